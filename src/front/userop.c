/* userop.c — the ops scripts define: `op NAME(INPUTS) -> (OUTPUTS) { BODY }
 * grad { GRADBODY }` (netrun-lang(5), USER-DEFINED OPS).  lower.c checks a definition
 * and registers its proto; this file gives it shape inference, a kernel and
 * a grad maker, each of which lowers a body again, for concrete types, with
 * lower_user_body.
 *
 * Kernel.  A call runs its body as a program of its own: the body lowered
 * for the call's input types and attributes (once per distinct signature,
 * cached in the script's arena) and run by a child executor that draws
 * from the caller's generator and records no tape.  On the caller's tape
 * the call is one entry of type NAME, like a built-in op.
 *
 * Grad maker, with a grad body: the grad body lowered for the forward op's
 * types into a scratch program, its ops emitted with names bound — inputs,
 * outputs and OUT@GRADs to the forward op's variables and gradients, each
 * IN@GRAD to the gradient the builder asks for.  A gradient of a broadcast
 * shape is summed back to its input's shape (as PyTorch does); one of
 * another shape is an error.  An input the grad body leaves unassigned has
 * no gradient (lower.c marks its slot SLOT_NO_GRAD).
 *
 * Grad maker, without a grad body: the body is differentiated.  It is
 * lowered into a scratch program whose vector-Jacobian product the builder
 * appends there (bwd_vjp), and both are emitted: the body's ops recomputed
 * on fresh names, then their grad ops.  Recomputing, rather than keeping
 * the values the kernel made, keeps the call one op (one kernel run, one
 * tape entry) and shows every op of the gradient in the dump, as a def's
 * would; it costs a second run of the body's ops that the gradient reads
 * (the others are dropped as dead).  A body that draws random numbers
 * cannot be recomputed, so it needs a grad block.
 *
 * Names.  Emitted temporaries keep the names lowering gave them, made
 * fresh in the real program: `swish.s`, `swish.s.1` for the next call,
 * `t.N` for unnamed values; a gradient name keeps its suffix
 * (`swish.s@GRAD`).  Loops and branches of a body come along as new blocks.
 */
#include "front/userop.h"

#include "autodiff/backward.h"
#include "exec/exec.h"
#include "front/lower.h"
#include "ir/rewrite.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers ----------------------------------------------------------------------- */

/* Declares a variable of the given type in block 0 of p, named after base. */
static const char *declare(Program *p, const char *base, DType t, const Shape *shape) {
  VarDesc *v = prog_add_var(p, p->blocks[0], prog_fresh(p, base));
  v->dtype = t;
  v->shape = shape ? *shape : shape_unknown();
  return v->name;
}

static Program *scratch_new(Arena *a, Diag *d, struct Registry *ops) {
  arena_init(a);
  Program *p = prog_new(a, d);
  p->user_ops = ops;
  return p;
}

static const AttrValue *attr_of(const OpProto *proto, const OpDesc *op, int i) {
  const Attr *a = op ? op_attr(op, proto->attrs[i].name) : NULL;
  return a ? &a->v : &proto->dflt[i];
}

/* v with everything it points to copied into p's arena. */
static AttrValue attr_clone(Program *p, AttrValue v) {
  switch (v.type) {
  case ATTR_STRING: return attr_string(p, v.u.s);
  case ATTR_INTS: return attr_ints(p, v.u.ints, v.n);
  case ATTR_I64S: return attr_i64s(p, v.u.ints, v.n);
  case ATTR_FLOATS: return attr_floats(p, v.u.floats, v.n);
  case ATTR_STRINGS: {
    const char **s = arena_alloc(p->arena, sizeof *s * (size_t)(v.n + 1));
    for (int i = 0; i < v.n; i++) s[i] = arena_strdup(p->arena, v.u.strings[i]);
    v.u.strings = s;
    return v;
  }
  default: return v;
  }
}

/* s with its symbolic dimensions' names copied into p's arena. */
static Shape shape_clone(Program *p, Shape s) {
  for (int i = 0; i < s.rank; i++)
    if (s.d[i].sym) s.d[i].sym = arena_strdup(p->arena, s.d[i].sym);
  return s;
}

/* ---- what a gradient may be -------------------------------------------------------- */

typedef enum Fit { FIT_SAME, FIT_REDUCE, FIT_BAD_SHAPE, FIT_BAD_DTYPE } Fit;

/* How gradient g fits input x: it has x's shape, or a shape x broadcasts
 * to (then summed back to x's), or neither.  Unknown dimensions fit. */
static Fit grad_fit(const VarDesc *x, const VarDesc *g) {
  if (g->dtype != x->dtype && g->dtype != DT_UNKNOWN) return FIT_BAD_DTYPE;
  const Shape *a = &x->shape, *b = &g->shape;
  if (a->rank < 0 || b->rank < 0) return FIT_REDUCE;
  if (a->rank > b->rank) return FIT_BAD_SHAPE;
  bool same = a->rank == b->rank;
  for (int i = 0; i < a->rank; i++) {
    Dim da = a->d[i], db = b->d[b->rank - a->rank + i];
    if (dim_known(da) && dim_known(db) && da.n != db.n && da.n != 1) return FIT_BAD_SHAPE;
    if (!dim_eq(da, db)) same = false;
  }
  return same ? FIT_SAME : FIT_REDUCE;
}

/* The target of the last assignment to IN@GRAD in stmts, or NULL. */
static const AstNode *grad_assignment(const AstList *stmts, const char *in) {
  const AstNode *found = NULL, *t;
  for (int i = 0; i < stmts->n; i++) {
    const AstNode *s = stmts->items[i];
    if (s->kind == AST_ASSIGN) {
      for (int k = 0; k < s->list.n; k++)
        if (s->list.items[k]->kind == AST_GRADNAME && strcmp(s->list.items[k]->name, in) == 0) found = s->list.items[k];
    } else if (s->kind == AST_WHILE || s->kind == AST_IF) {
      if ((t = grad_assignment(&s->b->list, in))) found = t;
      AstList one = {(AstNode **)&s->c, 1, 1};
      if (s->kind == AST_IF && s->c && (t = grad_assignment(s->c->kind == AST_BLOCK ? &s->c->list : &one, in)))
        found = t;
    }
  }
  return found;
}

/* Reports a gradient g of input `in` (type x) that does not fit; the
 * fit, or -1 after an error. */
static int check_fit(const UserOp *u, const char *in, const VarDesc *x, const VarDesc *g) {
  Fit f = grad_fit(x, g);
  if (f == FIT_SAME || f == FIT_REDUCE) return (int)f;
  const AstNode *t = u->def->b ? grad_assignment(&u->def->b->list, in) : NULL;
  Span at = t ? t->span : u->def->span;
  char a[128], b[128];
  if (f == FIT_BAD_DTYPE)
    diag_error(u->diag, at, "the gradient of '%s' must be %s, but it is %s", in, dtype_name(x->dtype),
               dtype_name(g->dtype));
  else
    diag_error(u->diag, at,
               "the gradient of '%s' has shape %s, but '%s' has shape %s (a gradient has its input's shape, or "
               "one the input broadcasts to)",
               in, shape_str(&g->shape, a, sizeof a), in, shape_str(&x->shape, b, sizeof b));
  return -1;
}

/* ---- shape inference ----------------------------------------------------------------- */

/* The body lowered for these input types and op's attributes, from the
 * cache or lowered now; NULL (reported) if it does not apply to them. */
typedef struct UopEntry {
  struct UopEntry *next;
  int64_t *sig;
  int nsig;
  OpDesc *attrs;                /* the attributes, copied */
  Program *prog;
  bool rewritten;               /* prog rewritten for the executor (rewrite.h) */
  const char *in[REG_MAX_SLOTS], *out[REG_MAX_SLOTS];
} UopEntry;

static UopEntry *body_for(const OpProto *proto, const OpDesc *op, const VarDesc *const *ins) {
  UserOp *u = proto->user;
  int64_t sig[REG_MAX_SLOTS * (2 + SHAPE_MAX_RANK)];
  int n = 0;
  for (int i = 0; i < proto->nin; i++) {
    sig[n++] = ins[i]->dtype;
    sig[n++] = ins[i]->shape.rank;
    for (int d = 0; d < ins[i]->shape.rank; d++) sig[n++] = ins[i]->shape.d[d].n;
  }
  for (UopEntry *e = u->cache; e; e = e->next) {
    bool same = e->nsig == n && memcmp(e->sig, sig, sizeof *sig * (size_t)n) == 0;
    for (int i = 0; same && i < proto->nattrs; i++) same = attr_value_equal(attr_of(proto, e->attrs, i), attr_of(proto, op, i));
    if (same) return e;
  }
  Program *p = prog_new(u->arena, u->diag);
  p->user_ops = u->registry;
  UopEntry *e = arena_alloc(u->arena, sizeof *e);
  /* The attributes are copied: op may live in a shorter-lived program. */
  e->attrs = op_new(p, proto->type, op ? op->span : SPAN_NONE);
  for (int i = 0; i < proto->nattrs; i++)
    op_set_attr(p, e->attrs, proto->attrs[i].name, attr_clone(p, *attr_of(proto, op, i)));
  for (int i = 0; i < proto->nin; i++) e->in[i] = declare(p, proto->in[i].name, ins[i]->dtype, &ins[i]->shape);
  if (!lower_user_body(proto, e->attrs, false, p, e->in, NULL, NULL, e->out)) return NULL;
  e->prog = p;
  e->sig = arena_alloc(u->arena, sizeof *sig * (size_t)(n + 1));
  memcpy(e->sig, sig, sizeof *sig * (size_t)n);
  e->nsig = n;
  e->next = u->cache;
  u->cache = e;
  return e;
}

/* While lowering: the grad body, applied to the call's types, must give
 * each input a gradient that fits it. */
static void check_grads(InferCtx *c, Program *s, const char *const *in, const char *const *outs) {
  const OpProto *proto = c->proto;
  const UserOp *u = proto->user;
  const char *out[REG_MAX_SLOTS], *out_grad[REG_MAX_SLOTS], *res[REG_MAX_SLOTS];
  for (int k = 0; k < proto->nout; k++) {
    const VarDesc *v = prog_var(s, outs[k]);
    out[k] = declare(s, proto->out[k].name, v->dtype, &v->shape);
    out_grad[k] = declare(s, name_grad(s->arena, proto->out[k].name), v->dtype, &v->shape);
  }
  int before = u->diag->nerrors;
  if (lower_user_body(proto, c->op, true, s, in, out, out_grad, res))
    for (int i = 0; i < proto->nin; i++) {
      const VarDesc *x = prog_var(s, in[i]);
      if (res[i] && dtype_is_float(x->dtype)) check_fit(u, proto->in[i].name, x, prog_var(s, res[i]));
    }
  if (u->diag->nerrors != before) diag_note(u->diag, c->op->span, "in this call to '%s'", proto->type);
}

static bool uop_infer(InferCtx *c) {
  const OpProto *proto = c->proto;
  const UserOp *u = proto->user;
  const VarDesc *ins[REG_MAX_SLOTS];
  for (int i = 0; i < proto->nin; i++) ins[i] = reg_infer_in(c, proto->in[i].name, 0);
  if (c->rt) {
    /* At run time: the cached body for these types. */
    const UopEntry *e = body_for(proto, c->op, ins);
    if (!e) return reg_infer_fail(c, "its body cannot be applied to these inputs (see above)");
    for (int k = 0; k < proto->nout; k++) {
      const VarDesc *v = prog_var(e->prog, e->out[k]);
      reg_infer_set(c, proto->out[k].name, 0, v->dtype, &v->shape);
    }
    return true;
  }
  /* While lowering: shapes may be symbolic, so the body is lowered aside. */
  Arena a;
  Program *s = scratch_new(&a, u->diag, u->registry);
  const char *in[REG_MAX_SLOTS], *outs[REG_MAX_SLOTS];
  for (int i = 0; i < proto->nin; i++)
    in[i] = declare(s, proto->in[i].name, ins[i] ? ins[i]->dtype : DT_F32, ins[i] ? &ins[i]->shape : NULL);
  bool ok = lower_user_body(proto, c->op, false, s, in, NULL, NULL, outs);
  for (int k = 0; ok && k < proto->nout; k++) {
    const VarDesc *v = prog_var(s, outs[k]);
    reg_infer_set(c, proto->out[k].name, 0, v->dtype, &v->shape);
  }
  if (ok && u->def->b) check_grads(c, s, in, outs);
  arena_free(&a);
  return ok || reg_infer_fail(c, "its body cannot be applied to these inputs (see above)");
}

/* ---- the kernel ------------------------------------------------------------------------ */

static int uop_kernel(ExecCtx *c) {
  const OpProto *proto = exec_ctx_proto(c);
  const UserOp *u = proto->user;
  VarDesc descs[REG_MAX_SLOTS];
  const VarDesc *ins[REG_MAX_SLOTS];
  for (int i = 0; i < proto->nin; i++) {
    Tensor *t = exec_ctx_in(c, i);
    descs[i] = (VarDesc){.dtype = t->dtype, .shape = tensor_shape(t)};
    ins[i] = &descs[i];
  }
  UopEntry *e = body_for(proto, exec_ctx_op(c), ins);
  if (!e) return exec_ctx_fail(c, "its body cannot be applied to these inputs (see above)");
  /* The body runs without the tape (exec_child), rewritten as any
   * program so run is, once. */
  ExecOptions o = *exec_ctx_options(c);
  o.tape = false;
  if (!e->rewritten && exec_rewrite_wanted(&o)) {
    rewrite_program(e->prog, &(RewriteOpts){RW_FUSE, NULL, 0, 0, e->out, proto->nout});
    e->rewritten = true;
  }
  Executor *x = exec_child(c, e->prog);
  for (int i = 0; i < proto->nin; i++) exec_preload(x, e->in[i], exec_ctx_in(c, i));
  int rc = exec_run_child(x);
  for (int k = 0; rc == 0 && k < proto->nout; k++) {
    Tensor *t = exec_value(x, e->out[k]);
    if (!t) {
      rc = exec_ctx_fail(c, "internal error: its body left '%s' without a value", proto->out[k].name);
      break;
    }
    /* An output that is an input or another output (y = x) is copied:
     * every output is a value of its own, for the tape and for gradients. */
    bool shared = false;
    for (int i = 0; i < proto->nin; i++) shared |= t == exec_ctx_in(c, i);
    for (int j = 0; j < k; j++) shared |= t == exec_ctx_out(c, j);
    exec_ctx_set_out(c, k, 0, shared ? tensor_copy(t) : tensor_ref(t));
  }
  exec_free(x);
  if (rc < 0) diag_note(u->diag, exec_ctx_op(c)->span, "in this call to '%s'", proto->type);
  return rc;
}

/* ---- the grad maker --------------------------------------------------------------------- */

/* One grad maker's work: a scratch program whose ops are emitted into the
 * backward, renamed. */
typedef struct Emit {
  GradCtx *g;
  Program *s, *p;            /* the scratch program, the real one */
  const OpDesc *op;          /* the forward op */
  const OpProto *proto;
  const UserOp *u;
  const char *prefix;        /* the op's type: "swish" */
  /* Per input slot: its scratch variable, the gradient the builder wants
   * (or NULL), the scratch value giving it (or NULL), how that fits, and
   * whether its op writes the wanted name itself. */
  const char *in[REG_MAX_SLOTS], *want[REG_MAX_SLOTS], *res[REG_MAX_SLOTS];
  int fit[REG_MAX_SLOTS];
  bool direct[REG_MAX_SLOTS];
  bool *skip;                /* scratch block 0 ops left out (or NULL) */
  /* Scratch variables bound to real names (the forward op's variables and
   * gradients), few: */
  const char *bind_from[4 * REG_MAX_SLOTS + 1], *bind_to[4 * REG_MAX_SLOTS + 1];
  int nbind;
  /* Fresh stems made so far, few: scratch stem -> real stem. */
  struct Stem {
    const char *from, *to;
  } *stems;
  int nstems, capstems;
  const char ***real;        /* per scratch block and slot: the real name, once made */
  int *blocks;               /* scratch block -> real block */
} Emit;

static const char *bound(const Emit *e, const char *name) {
  for (int i = 0; i < e->nbind; i++)
    if (strcmp(e->bind_from[i], name) == 0) return e->bind_to[i];
  return NULL;
}

static void bind_name(Emit *e, const char *from, const char *to) {
  e->bind_from[e->nbind] = from;
  e->bind_to[e->nbind++] = to;
}

/* Does any op of the scratch program (or a block's results) read name? */
static bool is_read(const Emit *e, const char *name) {
  for (int b = 0; b < e->s->nblocks; b++) {
    const Block *blk = e->s->blocks[b];
    for (int i = 0; i < blk->nops; i++)
      for (int k = 0; k < blk->ops[i]->nin; k++)
        for (int j = 0; j < blk->ops[i]->in[k].n; j++)
          if (strcmp(blk->ops[i]->in[k].args[j], name) == 0) return true;
    for (int i = 0; i < blk->nresults; i++)
      if (strcmp(blk->results[i], name) == 0) return true;
  }
  return false;
}

static bool is_temp(const char *stem) {
  if (strncmp(stem, "t.", 2) != 0 || !stem[2]) return false;
  for (const char *c = stem + 2; *c; c++)
    if (*c < '0' || *c > '9') return false;
  return true;
}

/* A gradient name's suffix with the grad block it names ("@GRAD@B4":
 * the per-turn gradient inside block 4) renumbered as copied. */
static const char *block_suffix(Emit *e, const char *rest) {
  long k;
  const char *end, *b = e->blocks ? name_block_suffix(rest, &k, &end) : NULL;
  if (!b || k <= 0 || k >= e->s->nblocks || e->blocks[k] <= 0) return rest;
  return name_with_block(e->s->arena, rest, b, e->blocks[k], end);
}

/* The real name of scratch variable `name`: the one it is bound to, or a
 * fresh one made on a fresh stem (the part before any '@'), so that
 * swish.s and swish.s@GRAD stay a value and its gradient. */
static const char *real_name(Emit *e, const char *name) {
  const VarDesc *v = prog_var(e->s, name);
  if (!v) return name;   /* @EMPTY@ */
  const char **r = &e->real[v->block][v->slot];
  if (*r) return *r;
  if ((*r = bound(e, name))) return *r;
  const char *at = name[name_stem_len(name)] ? name + name_stem_len(name) : NULL;
  const char *stem = name_stem(e->s->arena, name), *to = NULL;
  for (int i = 0; i < e->nstems && !to; i++)
    if (strcmp(e->stems[i].from, stem) == 0) to = e->stems[i].to;
  if (!to) {
    /* "swish.s.2" is the third binding of s: its fresh name is made from
     * "swish.s" again, so versions do not pile up ("swish.s.2.1"). */
    const char *base = strchr(stem, '.') ? stem : arena_printf(e->s->arena, "%s.%s", e->prefix, stem);
    const char *dot = strrchr(base, '.');
    size_t n = strlen(base);
    if (dot && dot[1] && strspn(dot + 1, "0123456789") == strlen(dot + 1) && memchr(base, '.', (size_t)(dot - base)))
      n = (size_t)(dot - base);
    to = is_temp(stem) ? bwd_temp(e->g) : bwd_fresh(e->g, arena_strndup(e->s->arena, base, n));
    VEC_RESERVE(e->stems, e->capstems, e->nstems + 1);
    e->stems[e->nstems++] = (struct Stem){stem, to};
  }
  return *r = at ? arena_printf(e->p->arena, "%s%s", to, block_suffix(e, at)) : to;
}

static int copy_block(Emit *e, int sidx);

/* Fills d with o's slots and attributes, renamed; sub-blocks are copied,
 * the then block first. */
static void fill_op(Emit *e, OpDesc *d, const OpDesc *o) {
  for (int s = 0; s < o->nin; s++) {
    Slot *sl = op_add_input(e->p, d, o->in[s].name);
    for (int j = 0; j < o->in[s].n; j++) slot_push(e->p, sl, real_name(e, o->in[s].args[j]));
  }
  for (int s = 0; s < o->nout; s++) {
    Slot *sl = op_add_output(e->p, d, o->out[s].name);
    for (int j = 0; j < o->out[s].n; j++) slot_push(e->p, sl, real_name(e, o->out[s].args[j]));
  }
  for (int pass = 0; pass < 2; pass++)
    for (int a = 0; a < o->nattrs; a++) {
      AttrValue v = o->attrs[a].v;
      bool then = strcmp(o->attrs[a].name, "sub_block") == 0;
      if (v.type == ATTR_BLOCK ? pass != !then : pass != 0) continue;
      op_set_attr(e->p, d, o->attrs[a].name,
                  v.type == ATTR_BLOCK ? attr_block(copy_block(e, (int)v.u.i)) : attr_clone(e->p, v));
    }
}

/* Copies scratch block sidx (a loop or branch body, or a grad block of
 * one, whose parent is that body) as a new block of the real program; its
 * index. */
static int copy_block(Emit *e, int sidx) {
  const Block *sb = e->s->blocks[sidx];
  Block *rb = prog_add_block(e->p, e->blocks[sb->parent]);
  e->blocks[sidx] = rb->idx;
  rb->fwd_block = sb->fwd_block >= 0 ? e->blocks[sb->fwd_block] : -1;
  for (int i = 0; i < sb->nvars; i++) {
    const VarDesc *sv = sb->vars[i];
    VarDesc *v = prog_add_var(e->p, rb, real_name(e, sv->name));
    v->dtype = sv->dtype;
    v->shape = shape_clone(e->p, sv->shape);
    v->flags = sv->flags;
    v->span = sv->span;
  }
  for (int i = 0; i < sb->nargs; i++) *ARENA_PUSH(e->p->arena, rb->args, rb->nargs, rb->capargs) = real_name(e, sb->args[i]);
  for (int i = 0; i < sb->nresults; i++)
    *ARENA_PUSH(e->p->arena, rb->results, rb->nresults, rb->capresults) = real_name(e, sb->results[i]);
  for (int i = 0; i < sb->nops; i++) {
    const OpDesc *o = sb->ops[i];
    OpDesc *d = op_new(e->p, o->type, o->span);
    d->fwd_block = o->fwd_block >= 0 ? e->blocks[o->fwd_block] : -1;
    d->fwd_op = o->fwd_op;
    fill_op(e, d, o);
    op_append(rb, e->p, d);
  }
  return rb->idx;
}

/* Emits the ops of scratch block 0 (but those left out) into the
 * backward.  A loop's or branch's grad op is linked to the copy of its
 * forward op, whose turns it runs over. */
static void emit_ops(Emit *e) {
  const Block *b0 = e->s->blocks[0];
  OpDesc **copies = mem_calloc((size_t)b0->nops + 1, sizeof *copies);
  for (int i = 0; i < b0->nops; i++) {
    const OpDesc *o = b0->ops[i];
    if (e->skip && e->skip[i]) continue;
    OpDesc *d = bwd_emit(e->g, o->type);
    d->span = o->span;   /* the line of the body or grad body it comes from */
    fill_op(e, d, o);
    copies[i] = d;
    const OpProto *proto = reg_find_op(e->s, o->type);
    if (o->fwd_block == 0 && o->fwd_op >= 0 && o->fwd_op < i && copies[o->fwd_op] && proto &&
        (proto->flags & OP_KEPT_TURNS))
      bwd_emit_link(e->g, d, copies[o->fwd_op]);
  }
  mem_free(copies);
}

/* Does any op of p draw random numbers? */
static const OpDesc *random_op(const Program *p) {
  for (int b = 0; b < p->nblocks; b++)
    for (int i = 0; i < p->blocks[b]->nops; i++) {
      const OpProto *op = reg_find_op(p, p->blocks[b]->ops[i]->type);
      if (op && (op->flags & OP_RANDOM)) return p->blocks[b]->ops[i];
    }
  return NULL;
}

/* The grad part, lowered for the forward op's types into e->s with its
 * names bound to the forward op's; e->res gets each IN@GRAD's value. */
static bool lower_grad_part(Emit *e) {
  const char *out[REG_MAX_SLOTS], *out_grad[REG_MAX_SLOTS];
  for (int k = 0; k < e->proto->nout; k++) {
    const char *name = e->proto->out[k].name;
    const VarDesc *v = prog_var(e->p, bwd_op_out(e->g, name, 0));
    out[k] = declare(e->s, name, v->dtype, &v->shape);
    out_grad[k] = declare(e->s, name_grad(e->s->arena, name), v->dtype, &v->shape);
    bind_name(e, out[k], bwd_op_out(e->g, name, 0));
    bind_name(e, out_grad[k], bwd_op_out_grad(e->g, name, 0));
  }
  return lower_user_body(e->proto, e->op, true, e->s, e->in, out, out_grad, e->res);
}

/* The body, lowered into e->s, and its vector-Jacobian product for the
 * inputs whose gradients are wanted; e->res gets those gradients.  A seed
 * that alone writes an output's gradient is left out (e->skip): that
 * gradient is the forward op's OUT@GRAD itself. */
static bool lower_body_vjp(Emit *e) {
  const OpProto *proto = e->proto;
  const char *outs[REG_MAX_SLOTS], *seeds[REG_MAX_SLOTS], *wrt[REG_MAX_SLOTS], *grads[REG_MAX_SLOTS];
  int which[REG_MAX_SLOTS], nw = 0;
  if (!lower_user_body(proto, e->op, false, e->s, e->in, NULL, NULL, outs)) return false;
  const OpDesc *r = random_op(e->s);
  if (r) {
    diag_error(e->p->diag, r->span,
               "op '%s' has no grad block, so its gradient runs its body again, but '%s' draws random numbers "
               "that would differ; give '%s' a grad block",
               proto->type, r->type, proto->type);
    return false;
  }
  for (int k = 0; k < proto->nout; k++) {
    const VarDesc *v = prog_var(e->s, outs[k]);
    seeds[k] = declare(e->s, arena_printf(e->s->arena, "%s@SEED", proto->out[k].name), v->dtype, &v->shape);
    bind_name(e, seeds[k], bwd_op_out_grad(e->g, proto->out[k].name, 0));
  }
  for (int i = 0; i < proto->nin; i++)
    if (e->want[i]) which[nw] = i, wrt[nw++] = e->in[i];
  if (!bwd_vjp(e->s, outs, seeds, proto->nout, wrt, nw, grads)) return false;
  for (int j = 0; j < nw; j++) e->res[which[j]] = grads[j];
  const Block *b0 = e->s->blocks[0];
  e->skip = mem_calloc((size_t)b0->nops + 1, sizeof *e->skip);
  for (int i = 0; i < b0->nops; i++) {
    const OpDesc *o = b0->ops[i];
    const char *x = strcmp(o->type, "assign") == 0 ? op_in1(o, "X") : NULL;
    const char *y = x ? op_out1(o, "Out") : NULL;
    for (int k = 0; y && k < proto->nout; k++) {
      if (strcmp(x, seeds[k]) != 0 || name_is_rename(y) || bound(e, y)) continue;
      bool is_res = false;
      for (int j = 0; j < proto->nin; j++) is_res |= e->res[j] && strcmp(e->res[j], y) == 0;
      if (is_res) continue;
      bind_name(e, y, bound(e, seeds[k]));
      e->skip[i] = true;
    }
  }
  return true;
}

/* How each wanted gradient gets to the builder's name: the op computing
 * it writes that name (direct) when nothing else reads its value, else it
 * is copied or summed back into it after the ops.  Checks the shapes. */
static bool plan_grads(Emit *e) {
  const Block *b0 = e->s->blocks[0];
  bool ok = true;
  for (int i = 0; i < e->proto->nin && ok; i++) {
    if (!e->res[i] || !e->want[i]) continue;
    const VarDesc *x = prog_var(e->s, e->in[i]);
    if ((e->fit[i] = check_fit(e->u, e->proto->in[i].name, x, prog_var(e->s, e->res[i]))) < 0) {
      diag_note(e->p->diag, e->op->span, "in this call to '%s'", e->proto->type);
      ok = false;
      break;
    }
    bool written = false, shared = false;
    for (int k = 0; k < b0->nops && !written; k++)
      for (int sl = 0; !(e->skip && e->skip[k]) && sl < b0->ops[k]->nout; sl++)
        for (int j = 0; j < b0->ops[k]->out[sl].n; j++) written |= strcmp(b0->ops[k]->out[sl].args[j], e->res[i]) == 0;
    for (int j = 0; j < e->proto->nin; j++) shared |= j != i && e->res[j] && strcmp(e->res[j], e->res[i]) == 0;
    if (e->fit[i] == FIT_SAME && written && !shared && !bound(e, e->res[i]) && !is_read(e, e->res[i])) {
      bind_name(e, e->res[i], e->want[i]);
      e->direct[i] = true;
    }
  }
  return ok;
}

static bool uop_grad(GradCtx *g) {
  Program *p = bwd_prog(g);
  const OpDesc *op = bwd_op_fwd(g);
  const OpProto *proto = reg_find_op(p, op->type);
  Arena a;
  Emit e = {.g = g, .p = p, .op = op, .proto = proto, .u = proto->user, .prefix = proto->type};
  e.s = scratch_new(&a, p->diag, e.u->registry);
  for (int i = 0; i < proto->nin; i++) {
    const char *name = proto->in[i].name;
    const VarDesc *v = prog_var(p, bwd_op_in(g, name, 0));
    e.in[i] = declare(e.s, name, v->dtype, &v->shape);
    bind_name(&e, e.in[i], bwd_op_in(g, name, 0));
    e.want[i] = bwd_op_in_grad(g, name, 0);
  }
  bool ok = (e.u->def->b ? lower_grad_part(&e) : lower_body_vjp(&e)) && plan_grads(&e);
  if (ok) {
    e.blocks = mem_calloc((size_t)e.s->nblocks + 1, sizeof *e.blocks);
    e.blocks[0] = bwd_grad_block(g)->idx;
    e.real = mem_calloc((size_t)e.s->nblocks + 1, sizeof *e.real);
    for (int b = 0; b < e.s->nblocks; b++) e.real[b] = mem_calloc((size_t)e.s->blocks[b]->nvars + 1, sizeof **e.real);
    emit_ops(&e);
    for (int i = 0; i < proto->nin; i++) {
      if (!e.res[i] || !e.want[i] || e.direct[i]) continue;
      OpDesc *d = bwd_emit(g, e.fit[i] == FIT_SAME ? "assign" : "sum_like");
      const AstNode *t = e.u->def->b ? grad_assignment(&e.u->def->b->list, proto->in[i].name) : NULL;
      if (t) d->span = t->span;
      bwd_emit_in(g, d, "X", real_name(&e, e.res[i]));
      if (e.fit[i] != FIT_SAME) bwd_emit_in(g, d, "Like", bwd_op_in(g, proto->in[i].name, 0));
      bwd_emit_out(g, d, "Out", e.want[i]);
    }
    for (int b = 0; b < e.s->nblocks; b++) mem_free(e.real[b]);
    mem_free(e.real);
    mem_free(e.blocks);
  }
  mem_free(e.skip);
  mem_free(e.stems);
  arena_free(&a);
  return ok;
}

const UserOpImpl uop_impl = {uop_infer, uop_kernel, uop_grad};
