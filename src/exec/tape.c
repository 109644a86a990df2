/* tape.c — recording executed ops and turning the tape into a block. */
#include "exec/tape.h"

#include "ir/registry.h"

#include <string.h>

void tape_init(Tape *t) {
  memset(t, 0, sizeof *t);
  arena_init(&t->arena);
  t->arena.what = "the tape";
}

void tape_free(Tape *t) {
  for (int i = 0; i < t->n; i++)
    for (int k = 0; k < t->entries[i].nin + t->entries[i].nout; k++) tensor_unref(t->entries[i].vals[k]);
  mem_free(t->entries);
  mem_uncharge((int64_t)(sizeof *t->entries * (size_t)t->cap));
  arena_free(&t->arena);
  memset(t, 0, sizeof *t);
}

void tape_truncate(Tape *t, int n) {
  for (int i = n; i < t->n; i++)
    for (int k = 0; k < t->entries[i].nin + t->entries[i].nout; k++) tensor_unref(t->entries[i].vals[k]);
  if (n < t->n) t->n = n;
}

const char *tape_turn(Tape *t, const char *parent, int64_t k) {
  /* Once per loop turn: no printf. */
  char digits[24];
  int nd = 0;
  uint64_t u = k < 0 ? 0 : (uint64_t)k;
  do digits[nd++] = (char)('0' + u % 10); while ((u /= 10) && nd < 23);
  size_t np = parent ? strlen(parent) : 0;
  char *s = arena_alloc(&t->arena, np + (size_t)nd + 2);
  if (np) memcpy(s, parent, np);
  s[np] = '#';
  for (int i = 0; i < nd; i++) s[np + 1 + (size_t)i] = digits[nd - 1 - i];
  s[np + 1 + (size_t)nd] = 0;
  return s;
}

void tape_record(Tape *t, const OpDesc *op, int klass, Tensor *const *ins, const char *const *in_vars,
                 const char *const *in_turns, int nin, Tensor *const *outs,
                 const char *const *out_vars, int nout, const char *turn) {
  if (t->n == t->cap) {   /* the entries count against the memory limit */
    int cap = t->cap ? t->cap * 2 : 64;
    mem_charge_or_exit("the tape", (int64_t)(sizeof *t->entries * (size_t)(cap - t->cap)));
    t->entries = mem_alloc(t->entries, sizeof *t->entries * (size_t)cap);
    t->cap = cap;
  }
  TapeEntry *e = &t->entries[t->n++];
  int n = nin + nout;
  e->op = op;
  e->klass = klass;
  if (klass >= t->nclasses) t->nclasses = klass + 1;
  e->nin = nin;
  e->nout = nout;
  void **mem = arena_alloc(&t->arena, sizeof(void *) * 3 * (size_t)(n ? n : 1));
  e->vals = (Tensor **)mem;
  e->vars = (const char **)(mem + n);
  e->turns = (const char **)(mem + 2 * n);
  for (int i = 0; i < nin; i++) {
    e->vals[i] = tensor_ref(ins[i]);
    e->vars[i] = in_vars[i];
    e->turns[i] = in_turns[i];
  }
  for (int i = 0; i < nout; i++) {
    e->vals[nin + i] = tensor_ref(outs[i]);
    e->vars[nin + i] = out_vars[i];
    e->turns[nin + i] = turn;
  }
}

OpDesc *tape_entry_op(Program *p, const TapeEntry *e, const char *const *names) {
  OpDesc *op = op_new(p, e->op->type, e->op->span);
  op->call = e->op->call;
  int k = 0;
  for (int s = 0; s < e->op->nin; s++) {
    Slot *slot = op_add_input(p, op, e->op->in[s].name);
    for (int j = 0; j < e->op->in[s].n; j++) slot_push(p, slot, names[k++]);
  }
  for (int s = 0; s < e->op->nout; s++) {
    Slot *slot = op_add_output(p, op, e->op->out[s].name);
    for (int j = 0; j < e->op->out[s].n; j++) slot_push(p, slot, names[k++]);
  }
  for (int a = 0; a < e->op->nattrs; a++) op_set_attr(p, op, e->op->attrs[a].name, e->op->attrs[a].v);
  return op;
}

static const char *qualified(Arena *a, const char *var, const char *turn) {
  if (!turn || !*turn) return var;
  return arena_printf(a, "%s%s", var, turn);
}

/* A value no op on the tape made (a parameter, an input, a constant) read
 * first inside a loop's first turn, through one of the body's args: the
 * variable outside the loop the while op passed in, with that frame's turn
 * (nested loops: followed outwards).  A parameter carried into a loop
 * unchanged keeps its own name, so the backward finds it. */
static const char *leaf_name(const Program *fwd, Arena *a, const char *var, const char *turn) {
  /* Only a first turn's args hold what the while op passed in; a later
   * turn's hold what the turn before made (a leaf only if no taped op made
   * it, like a counter). */
  while (turn && *turn && strrchr(turn, '#') && strcmp(strrchr(turn, '#'), "#0") == 0) {
    const VarDesc *v = prog_var(fwd, var);
    const Block *b = v && v->block > 0 ? prog_block(fwd, v->block) : NULL;
    int arg = -1;
    for (int i = 0; b && i < b->nargs && arg < 0; i++)
      if (strcmp(b->args[i], var) == 0) arg = i;
    const Block *parent = arg >= 0 ? prog_block(fwd, b->parent) : NULL;
    const Slot *x = NULL;
    for (int i = 0; parent && i < parent->nops && !x; i++) {
      const Attr *sb = op_attr(parent->ops[i], "sub_block");
      const OpProto *proto = sb && sb->v.u.i == b->idx ? reg_find_op(fwd, parent->ops[i]->type) : NULL;
      if (proto && (proto->flags & OP_LOOP)) x = op_input(parent->ops[i], "X");
    }
    if (!x || arg >= x->n) break;
    var = x->args[arg];
    const char *hash = strrchr(turn, '#');
    turn = hash ? arena_strndup(a, turn, (size_t)(hash - turn)) : "";
  }
  return qualified(a, var, turn);
}

/* Every value gets one name: the name it got when an op on the tape made
 * it, else the variable it was first read from (a parameter, an input, a
 * constant; see leaf_name). */
Program *tape_program(const Tape *t, const Program *fwd, Arena *arena, Tensor ***values) {
  Program *p = prog_new(arena, fwd->diag);
  p->user_ops = fwd->user_ops;
  Block *b = p->blocks[0];
  PtrMap map = {0};            /* a value -> its name in known */
  const char **known = NULL;
  int nknown = 0, capknown = 0;
  const char **names = NULL;
  int cap = 0;
  Tensor **vals = NULL;
  int capvals = 0;
  for (int i = 0; i < t->n; i++) {
    const TapeEntry *e = &t->entries[i];
    VEC_RESERVE(names, cap, e->nin + e->nout + 1);
    for (int k = 0; k < e->nin; k++) {
      int at = ptrmap_get(&map, e->vals[k]);
      if (at < 0) {
        VEC_RESERVE(known, capknown, nknown + 1);
        known[at = nknown++] = leaf_name(fwd, arena, e->vars[k], e->turns[k]);
        ptrmap_put(NULL, &map, e->vals[k], at);
      }
      names[k] = known[at];
    }
    for (int k = e->nin; k < e->nin + e->nout; k++) {
      names[k] = qualified(arena, e->vars[k], e->turns[k]);
      VEC_RESERVE(known, capknown, nknown + 1);
      known[nknown] = names[k];
      ptrmap_put(NULL, &map, e->vals[k], nknown++);
    }
    OpDesc *op = tape_entry_op(p, e, names);
    for (int v = 0; v < e->nin + e->nout; v++) {
      if (prog_var(p, names[v])) continue;
      VarDesc *d = prog_add_var(p, b, names[v]);
      VEC_RESERVE(vals, capvals, b->nvars);
      vals[b->nvars - 1] = e->vals[v];
      d->dtype = e->vals[v]->dtype;
      d->shape = tensor_shape(e->vals[v]);
      const VarDesc *orig = prog_var(fwd, names[v]);
      if (orig) d->flags = orig->flags & (VAR_PARAM | VAR_INPUT | VAR_STOP_GRADIENT);
      d->span = orig ? orig->span : e->op->span;
      d->user_name = orig ? orig->user_name : NULL;
    }
    op_append(b, p, op);
  }
  mem_free(names);
  ptrmap_free(&map);
  mem_free(known);
  /* The forward's names, so --loss and --wrt find their variables. */
  for (int i = 0; i < fwd->nexports; i++)
    if (prog_var(p, fwd->exports[i].var)) prog_set_export(p, fwd->exports[i].name, fwd->exports[i].var);
  if (values) *values = vals;
  else mem_free(vals);
  return p;
}
