/* plan.c — the memory plan (plan.h): the last reader of each value of a
 * block, found in one pass over the block's ops. */
#include "exec/plan.h"

#include "ir/registry.h"

#include <limits.h>
#include <string.h>

typedef struct Access {
  int first_read, first_write, last_read, last_write;
  bool kept;
} Access;

/* The slot in block blk of variable `name`, or -1. */
static int slot_in(const Program *p, int blk, const char *name) {
  const VarDesc *v = prog_var(p, name);
  return v && v->block == blk ? v->slot : -1;
}

static int slot0(const Program *p, const char *name) { return slot_in(p, 0, name); }

/* Keeps every variable of block blk that op (or an op it stands for) names. */
static void keep_named(const Program *p, int blk, const OpDesc *op, Access *a) {
  for (int j = 0; j < op->nin; j++)
    for (int k = 0; k < op->in[j].n; k++) {
      int s = slot_in(p, blk, op->in[j].args[k]);
      if (s >= 0) a[s].kept = true;
    }
  for (int j = 0; j < op->nout; j++)
    for (int k = 0; k < op->out[j].n; k++) {
      int s = slot_in(p, blk, op->out[j].args[k]);
      if (s >= 0) a[s].kept = true;
    }
  for (int k = 0; k < op->norig; k++) keep_named(p, blk, op->orig[k], a);
}

static void keep_names(const Program *p, int blk, const char *const *names, int n, Access *a) {
  for (int k = 0; k < n; k++) {
    int s = names[k] ? slot_in(p, blk, names[k]) : -1;
    if (s >= 0) a[s].kept = true;
  }
}

/* Records op i's reads and writes.  Those of the ops a fused op stands
 * for are not: the fused op reads every value they read from outside the
 * group and writes every value read after it; the values between them
 * exist only under --check-nan, and are then kept. */
static void note_op(const Program *p, int blk, const OpDesc *op, int i, Access *a) {
  for (int j = 0; j < op->nin; j++)
    for (int k = 0; k < op->in[j].n; k++) {
      int s = slot_in(p, blk, op->in[j].args[k]);
      if (s < 0) continue;
      if (a[s].first_read > i) a[s].first_read = i;
      a[s].last_read = i;
    }
  for (int j = 0; j < op->nout; j++)
    for (int k = 0; k < op->out[j].n; k++) {
      int s = slot_in(p, blk, op->out[j].args[k]);
      if (s < 0) continue;
      if (a[s].first_write > i) a[s].first_write = i;
      a[s].last_write = i;
    }
}

/* Per slot of block blk: its accesses, and whether the plan must keep
 * it.  The ops of every other block (a body, its grad block, a branch)
 * reach blk's variables by name through their frame's parents, so a
 * variable any of them names is kept, as are the arguments and results
 * of every block (their values pass between frames by slot). */
static Access *accesses(const Program *p, int blk, const char *const *keep, int nkeep) {
  const Block *bb = p->blocks[blk];
  Access *a = mem_calloc((size_t)bb->nvars + 1, sizeof *a);
  for (int s = 0; s < bb->nvars; s++) {
    a[s] = (Access){INT_MAX, INT_MAX, -1, -1, false};
    if (bb->vars[s]->flags & (VAR_INPUT | VAR_PARAM | VAR_STATE | VAR_KEPT | VAR_ARG)) a[s].kept = true;
  }
  keep_names(p, blk, keep, nkeep, a);
  for (int b = 0; b < p->nblocks; b++) {
    const Block *o = p->blocks[b];
    for (int i = 0; i < o->nops && b != blk; i++) keep_named(p, blk, o->ops[i], a);
    keep_names(p, blk, o->args, o->nargs, a);
    keep_names(p, blk, o->results, o->nresults, a);
  }
  if (p->startup)
    for (int i = 0; i < p->startup->nops; i++) keep_named(p, blk, p->startup->ops[i], a);
  for (int i = 0; i < bb->nops; i++) note_op(p, blk, bb->ops[i], i, a);
  return a;
}

int *plan_release(const Program *p, int blk, const char *const *keep, int nkeep) {
  const Block *bb = p->blocks[blk];
  Access *a = accesses(p, blk, keep, nkeep);
  int *release = mem_calloc((size_t)bb->nvars + 1, sizeof *release);
  for (int s = 0; s < bb->nvars; s++) {
    const Access *x = &a[s];
    /* written first, read last, and the last read not by an op that
     * writes it again */
    bool drop = !x->kept && x->first_write < x->first_read && x->first_write != INT_MAX &&
                x->last_read > x->last_write;
    release[s] = drop ? x->last_read : -1;
  }
  mem_free(a);
  return release;
}

void plan_lists(int nops, int nslots, const int *release, int **head, int **next) {
  *head = mem_alloc(NULL, sizeof **head * (size_t)(nops + 1));
  *next = mem_alloc(NULL, sizeof **next * (size_t)(nslots + 1));
  for (int i = 0; i <= nops; i++) (*head)[i] = -1;
  for (int s = nslots - 1; s >= 0; s--) {
    (*next)[s] = -1;
    if (release[s] < 0 || release[s] >= nops) continue;
    (*next)[s] = (*head)[release[s]];
    (*head)[release[s]] = s;
  }
}

/* The ops whose output is a view of their first input (its storage). */
static bool is_view(const char *type) {
  static const char *const views[] = {"reshape", "flatten", "squeeze", "unsqueeze", "reshape_like", "share"};
  for (size_t k = 0; k < sizeof views / sizeof *views; k++)
    if (strcmp(type, views[k]) == 0) return true;
  return false;
}

/* The storages of a step's simulation: a variable's value is a storage of
 * its own or a view of another's; a storage holds its bytes while a value
 * uses it. */
typedef struct Sim {
  int *store;            /* per slot: the storage its value uses, or -1 */
  int64_t *size;         /* per storage: its bytes (-1 unknown) */
  int *users;            /* per storage: the values using it */
  int nstores;
  int64_t held;
  bool *unknown;
} Sim;

/* A new storage of `bytes`, not yet used. */
static int sim_new(Sim *m, int64_t bytes) {
  m->size[m->nstores] = bytes;
  m->users[m->nstores] = 0;
  return m->nstores++;
}

static void sim_use(Sim *m, int s, int st) {
  if (m->users[st]++ == 0) {
    if (m->size[st] < 0) *m->unknown = true;
    else m->held += m->size[st];
  }
  m->store[s] = st;
}

static void sim_drop(Sim *m, int s) {
  int st = m->store[s];
  if (st < 0) return;
  m->store[s] = -1;
  if (--m->users[st] == 0 && m->size[st] > 0) m->held -= m->size[st];
}

int64_t plan_peak(const Program *p, const int *release, const int64_t *bytes, bool *unknown) {
  const Block *b0 = p->blocks[0];
  Access *a = accesses(p, 0, NULL, 0);
  int n = b0->nvars;
  size_t cap = (size_t)n + 1;
  for (int i = 0; i < b0->nops; i++)
    for (int j = 0; j < b0->ops[i]->nout; j++) cap += 2 * (size_t)b0->ops[i]->out[j].n;   /* two steps */
  Sim m = {mem_alloc(NULL, sizeof *m.store * (size_t)(n + 1)), mem_alloc(NULL, sizeof *m.size * cap),
           mem_alloc(NULL, sizeof *m.users * cap), 0, 0, unknown};
  int *head = NULL, *next = NULL;
  if (release) plan_lists(b0->nops, n, release, &head, &next);
  /* Before the first step: the values that come from outside block 0
   * (inputs, parameters, states: used, and read before written). */
  for (int s = 0; s < n; s++) {
    m.store[s] = -1;
    bool used = a[s].kept || a[s].last_read >= 0 || a[s].last_write >= 0;
    if (used && a[s].first_read <= a[s].first_write) sim_use(&m, s, sim_new(&m, bytes[s]));
  }
  int64_t peak = m.held;
  /* Two steps: the second starts with what the first left. */
  for (int step = 0; step < 2; step++)
    for (int i = 0; i < b0->nops; i++) {
      const OpDesc *op = b0->ops[i];
      const OpProto *proto = reg_find_op(p, op->type);
      bool view = is_view(op->type), allocates = !view && proto && !(proto->flags & OP_NO_PREALLOC);
      int from = op->nin && op->in[0].n ? slot0(p, op->in[0].args[0]) : -1;
      int64_t during = m.held;
      for (int j = 0; j < op->nout; j++)
        for (int k = 0; k < op->out[j].n; k++) {
          int s = slot0(p, op->out[j].args[k]);
          if (s < 0 || !allocates) continue;
          if (bytes[s] < 0) *unknown = true;
          else during += bytes[s];
        }
      if (during > peak) peak = during;
      for (int j = 0; j < op->nout; j++)
        for (int k = 0; k < op->out[j].n; k++) {
          int s = slot0(p, op->out[j].args[k]);
          if (s < 0) continue;
          /* written in place (an update of its input): the value stays */
          if (!allocates && !view && m.store[s] >= 0) continue;
          int st = view && from >= 0 && m.store[from] >= 0 ? m.store[from] : sim_new(&m, bytes[s]);
          m.users[st]++;   /* held across the drop of the old value */
          sim_drop(&m, s);
          m.users[st]--;
          sim_use(&m, s, st);
        }
      if (m.held > peak) peak = m.held;
      for (int s = release ? head[i] : -1; s >= 0; s = next[s]) sim_drop(&m, s);
    }
  mem_free(head);
  mem_free(next);
  mem_free(m.store);
  mem_free(m.size);
  mem_free(m.users);
  mem_free(a);
  return peak;
}
