/* exec.c — the eager executor: frames, op dispatch, the kernel interface
 * (control flow's included: src/ops/control.c runs loops and branches
 * through it), feeding, runtime checks and the tape (exec.h).
 *
 * Each op is prepared once: its proto and kernel are looked up and every
 * variable it reads or writes is resolved to (frames up, slot), so running
 * an op does no name lookups.  Runtime shape inference is cached per op:
 * when the input shapes are those of the previous run, the previous output
 * shapes are reused. */
#include "exec/exec.h"

#include "ir/names.h"
#include "exec/plan.h"
#include "exec/tape.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t interrupted;

void exec_interrupt(void) { interrupted = 1; }
void exec_interrupt_reset(void) { interrupted = 0; }
bool exec_interrupted(void) { return interrupted != 0; }

typedef struct VarRef {
  int up;         /* frames to walk up from the op's frame */
  int slot;       /* index in that frame's block */
  const char *name;
} VarRef;

typedef struct Prepared {
  const OpDesc *op;
  const OpProto *proto;
  int timing;                      /* index into the executor's timings */
  int nin[REG_MAX_SLOTS], nout[REG_MAX_SLOTS];
  int in_total, out_total;
  VarRef *in, *out;                /* flattened in proto slot order */
  int klass;                       /* its class on the tape, or -1 */
  /* An OP_CONSTANT op in a loop body: whether it may keep its output, and
   * the output it made (later turns share it). */
  bool keeps;
  Tensor *constant;
  /* Cached runtime inference: the inputs' signature and the outputs. */
  bool cached;
  int64_t *sig;
  int nsig;
  VarDesc *out_desc;
  /* A control grad op: whether a second backward runs over the frames it
   * keeps (1 yes, -1 no; found when it starts a run). */
  int wanted;
  OpDesc *tape_op;                 /* a while_grad's sums on the tape (exec_ctx_tape_sum) */
  /* Control ops: the sub-blocks' args and results, resolved. */
  int sub[2];
  VarRef *results[2];
  int nresults[2];
  int *args[2];
  int nargs[2];
  /* An op a rewrite put in place of others (rewrite.c): those, prepared;
   * they run instead of it under --check-nan. */
  struct Prepared *orig;
  int norig;
} Prepared;

typedef struct Frame Frame;
typedef struct PBlock {
  const Block *block;
  Prepared *ops;
  int nops;
  Frame *spare;          /* a freed frame of this block, kept for its next
                          * turn (a loop body makes one per turn) */
} PBlock;

typedef struct StepList {
  Frame **frames;
  int n, cap;
} StepList;

struct Frame {
  Frame *parent;
  const PBlock *pb;
  Tensor **vals;                  /* nvals: the block's variables (block 0's grow) */
  int nvals;
  const char *suffix;             /* the turn suffix for tape names */
  StepList *steps;                /* per op: kept step frames (keep_steps) */
};

struct Executor {
  Executor *parent;                /* exec_child: the executor whose generator it draws from */
  void (*between)(void);           /* exec_between: called after each op exec_run_range runs */
  Program *prog;
  Diag *diag;
  ExecOptions opt;
  Rng rng;
  PBlock **pblocks;                /* one per program block (they never move:
                                    * frames point to theirs) */
  int nprepared;                   /* blocks prepared so far */
  PBlock startup;
  Frame *root;                     /* block 0 */
  bool started;
  /* A growing program (exec_grow): the startup and block-0 ops run so far,
   * and per block-0 variable without a value, the input it waits for. */
  int startup_ran, ran;
  const char **waits;
  Tape tape;
  /* The tape's op classes: a structure (op_struct_hash) and which of the
   * op's values share a variable; by hash in class_index (ids + 1). */
  struct OpClass {
    uint64_t key;
    const OpDesc *op;
    int nvals;
    int *alias;
  } *classes;
  int nclasses, capclasses;
  int *class_index;
  size_t capindex;
  OpTiming *timings;
  int ntimings, captimings;
  int64_t ops_run;                 /* ops executed, control ops included */
  /* The innermost while loop running, and its turn (from 0): what Ctrl-C
   * reports. */
  const Prepared *loop;
  int64_t turn;
  struct BoundDim {                /* symbolic dims bound by feeding */
    const char *name;
    int64_t value;
    const char *by;                /* the input that bound it */
  } *dims;
  int ndims, capdims;
  /* The memory plan (exec_use_plan), per block of the program when it
   * was made (nplans of them; NULL: none): the slots whose values are
   * dropped after op i of the block, head[i], next[...] up to -1, for
   * its first nops ops. */
  struct BlockPlan {
    int *head, *next;
    int nops;
  } *plans;
  int nplans;
};

struct ExecCtx {
  Executor *ex;
  const Prepared *p;
  Frame *frame;
  Tensor **in[REG_MAX_SLOTS];
  Tensor **out[REG_MAX_SLOTS];
  int op_index;                    /* the op's index in its block (kept turns) */
};

void exec_default_options(ExecOptions *o) {
  memset(o, 0, sizeof *o);
  o->max_steps = 1000000;
  o->precision = 8;
  o->tape = true;
  o->fuse = true;
  o->out = stdout;
}

bool exec_rewrite_wanted(const ExecOptions *o) { return o->fuse && !o->tape && !o->check_nan; }

/* ---- preparing ops ------------------------------------------------------------ */

/* The block whose frame is the parent of blk's at run time: the startup
 * block (-1) runs as a child of block 0, whose variables it initializes;
 * block 0 has none (-2). */
static int parent_of(const Program *p, int blk) {
  if (blk == -1) return 0;
  if (blk == 0) return -2;
  return p->blocks[blk]->parent;
}

static VarRef resolve(Executor *ex, int from_block, const char *name) {
  const VarDesc *v = prog_var(ex->prog, name);
  VarRef r = {-1, -1, name};
  if (!v) return r;
  int up = 0;
  for (int b = from_block; b != v->block; b = parent_of(ex->prog, b)) {
    if (b == -2) return r;
    up++;
  }
  r.up = up;
  r.slot = v->slot;
  return r;
}

static void prepare_block(Executor *ex, PBlock *pb, const Block *b);

static bool concrete(const VarDesc *v) {
  if (!v || v->dtype == DT_UNKNOWN || v->shape.rank < 0) return false;
  for (int d = 0; d < v->shape.rank; d++)
    if (v->shape.d[d].n < 0) return false;
  return true;
}

/* When lowering knew every shape of the op, the runtime inference cache
 * starts filled with them: an op that then runs on the shapes it was
 * lowered for (every op of a straight-line script with fixed shapes) never
 * runs its inference again.  Not for ops that choose their outputs'
 * storage themselves or run blocks. */
static void precache(Executor *ex, Prepared *p) {
  if (p->proto->flags & (OP_NO_PREALLOC | OP_CONTROL)) return;
  int nsig = 0;
  for (int i = 0; i < p->in_total; i++) {
    const VarDesc *v = prog_var(ex->prog, p->in[i].name);
    if (!concrete(v)) return;
    nsig += 2 + v->shape.rank;
  }
  for (int i = 0; i < p->out_total; i++)
    if (!concrete(prog_var(ex->prog, p->out_desc[i].name))) return;
  p->sig = mem_alloc(NULL, sizeof *p->sig * (size_t)(nsig + 1));
  p->nsig = nsig;
  int k = 0;
  for (int i = 0; i < p->in_total; i++) {
    const VarDesc *v = prog_var(ex->prog, p->in[i].name);
    p->sig[k++] = v->dtype;
    p->sig[k++] = v->shape.rank;
    for (int d = 0; d < v->shape.rank; d++) p->sig[k++] = v->shape.d[d].n;
  }
  for (int i = 0; i < p->out_total; i++) {
    const VarDesc *v = prog_var(ex->prog, p->out_desc[i].name);
    p->out_desc[i].dtype = v->dtype;
    p->out_desc[i].shape = v->shape;
  }
  p->cached = true;
}

/* Value k's alias: the first of p's values (inputs then outputs) read
 * from or written to the same variable. */
static void value_alias(const Prepared *p, int *alias) {
  int nv = p->in_total + p->out_total;
  for (int k = 0; k < nv; k++) {
    const char *name = k < p->in_total ? p->in[k].name : p->out[k - p->in_total].name;
    int j = 0;
    while (j < k && strcmp(j < p->in_total ? p->in[j].name : p->out[j - p->in_total].name, name) != 0) j++;
    alias[k] = j;
  }
}

/* The class of a prepared op: the one of an op alike, or a new one. */
static int op_class(Executor *ex, const Prepared *p) {
  int nv = p->in_total + p->out_total;
  int *alias = mem_alloc(NULL, sizeof *alias * (size_t)(nv + 1));
  value_alias(p, alias);
  uint64_t key = op_struct_hash(p->op);
  for (int k = 0; k < nv; k++) key = mem_fnv_step(key, (uint64_t)alias[k]);
  size_t mask = ex->capindex - 1, i = ex->capindex ? (size_t)key & mask : 0;
  if (ex->capindex)
    for (; ex->class_index[i]; i = (i + 1) & mask) {
      const struct OpClass *c = &ex->classes[ex->class_index[i] - 1];
      if (c->key == key && c->nvals == nv && memcmp(c->alias, alias, sizeof *alias * (size_t)nv) == 0 &&
          op_struct_equal(c->op, p->op)) {
        mem_free(alias);
        return ex->class_index[i] - 1;
      }
    }
  VEC_RESERVE(ex->classes, ex->capclasses, ex->nclasses + 1);
  ex->classes[ex->nclasses] = (struct OpClass){key, p->op, nv, alias};
  int id = ++ex->nclasses;
  if ((size_t)id * 2 > ex->capindex) {
    size_t cap = ex->capindex ? ex->capindex * 2 : 64;
    mem_free(ex->class_index);
    ex->class_index = mem_calloc(cap, sizeof *ex->class_index);
    ex->capindex = cap;
    for (int c = 1; c <= id; c++) {
      size_t j = (size_t)ex->classes[c - 1].key & (cap - 1);
      while (ex->class_index[j]) j = (j + 1) & (cap - 1);
      ex->class_index[j] = c;
    }
  } else {
    ex->class_index[i] = id;
  }
  return id - 1;
}

static void prepare_op(Executor *ex, Prepared *p, const OpDesc *op, int blk) {
  memset(p, 0, sizeof *p);
  p->op = op;
  p->proto = reg_find_op(ex->prog, op->type);
  p->timing = -1;
  p->klass = -1;
  p->sub[0] = p->sub[1] = -1;
  if (!p->proto) return;
  /* Only in a forward sub-block: block 0 and the startup run again with new
   * bindings, and a grad block's values can reach updates that write them
   * in place (clip_by_global_norm); a body's constants reach neither. */
  const Block *b = blk > 0 ? prog_block(ex->prog, blk) : NULL;
  p->keeps = (p->proto->flags & OP_CONSTANT) && b && b->fwd_block < 0;
  for (int s = 0; s < p->proto->nin; s++) {
    const Slot *sl = op_input(op, p->proto->in[s].name);
    p->nin[s] = sl ? sl->n : 0;
    p->in_total += p->nin[s];
  }
  for (int s = 0; s < p->proto->nout; s++) {
    const Slot *sl = op_output(op, p->proto->out[s].name);
    p->nout[s] = sl ? sl->n : 0;
    p->out_total += p->nout[s];
  }
  p->in = mem_calloc((size_t)p->in_total + 1, sizeof *p->in);
  p->out = mem_calloc((size_t)p->out_total + 1, sizeof *p->out);
  p->out_desc = mem_calloc((size_t)p->out_total + 1, sizeof *p->out_desc);
  int k = 0;
  for (int s = 0; s < p->proto->nin; s++) {
    const Slot *sl = op_input(op, p->proto->in[s].name);
    for (int i = 0; i < p->nin[s]; i++) p->in[k++] = resolve(ex, blk, sl->args[i]);
  }
  k = 0;
  for (int s = 0; s < p->proto->nout; s++) {
    const Slot *sl = op_output(op, p->proto->out[s].name);
    for (int i = 0; i < p->nout[s]; i++) {
      p->out_desc[k].name = sl->args[i];
      p->out[k++] = resolve(ex, blk, sl->args[i]);
    }
  }
  precache(ex, p);
  if (op->norig) {
    p->orig = mem_calloc((size_t)op->norig, sizeof *p->orig);
    p->norig = op->norig;
    for (int j = 0; j < op->norig; j++) prepare_op(ex, &p->orig[j], op->orig[j], blk);
  }
  /* With the tape on, its classes are found here, once per op. */
  if (ex->opt.tape && p->proto->grad_kind != GRAD_NONE && !(p->proto->flags & OP_CONTROL))
    p->klass = op_class(ex, p);
  if (p->proto->flags & OP_CONTROL) {
    const char *attrs[2] = {"sub_block", "else_block"};
    for (int j = 0; j < 2; j++) {
      const Attr *a = op_attr(op, attrs[j]);
      if (!a) continue;
      const Block *sb = prog_block(ex->prog, (int)a->v.u.i);
      if (!sb) continue;
      p->sub[j] = sb->idx;
      p->nresults[j] = sb->nresults;
      p->results[j] = mem_calloc((size_t)sb->nresults + 1, sizeof *p->results[j]);
      for (int r = 0; r < sb->nresults; r++) p->results[j][r] = resolve(ex, sb->idx, sb->results[r]);
      if (sb->nargs) {
        p->nargs[j] = sb->nargs;
        p->args[j] = mem_calloc((size_t)sb->nargs, sizeof *p->args[j]);
        for (int r = 0; r < sb->nargs; r++) {
          const VarDesc *av = prog_var(ex->prog, sb->args[r]);
          p->args[j][r] = av ? av->slot : -1;
        }
      }
    }
  }
  /* A control op's time is its body's ops', which are timed themselves. */
  if (ex->opt.timing && !(p->proto->flags & OP_CONTROL)) {
    int t = 0;
    while (t < ex->ntimings && strcmp(ex->timings[t].type, op->type) != 0) t++;
    if (t == ex->ntimings) {
      VEC_RESERVE(ex->timings, ex->captimings, ex->ntimings + 1);
      ex->timings[ex->ntimings++] = (OpTiming){op->type, 0, 0};
    }
    p->timing = t;
  }
}

static void prepare_block(Executor *ex, PBlock *pb, const Block *b) {
  pb->block = b;
  pb->nops = b->nops;
  pb->spare = NULL;
  pb->ops = mem_calloc((size_t)b->nops + 1, sizeof *pb->ops);
  for (int i = 0; i < b->nops; i++) prepare_op(ex, &pb->ops[i], b->ops[i], b->idx);
}

static void free_prepared(Prepared *p) {
  for (int k = 0; k < p->norig; k++) free_prepared(&p->orig[k]);
  mem_free(p->orig);
  tensor_unref(p->constant);
  mem_free(p->in);
  mem_free(p->out);
  mem_free(p->out_desc);
  mem_free(p->sig);
  mem_free(p->results[0]);
  mem_free(p->results[1]);
  mem_free(p->args[0]);
  mem_free(p->args[1]);
}

/* A frame's bytes, which count against the memory limit: a loop keeps a
 * frame per turn for the backward. */
static int64_t frame_bytes(int nvals) { return (int64_t)(sizeof(Frame) + sizeof(Tensor *) * ((size_t)nvals + 1)); }

static void frame_release(Frame *f) {
  mem_uncharge(frame_bytes(f->nvals));
  mem_free(f->vals);
  mem_free(f);
}

static void free_pblock(PBlock *pb) {
  for (int i = 0; i < pb->nops; i++) free_prepared(&pb->ops[i]);
  mem_free(pb->ops);
  if (pb->spare) frame_release(pb->spare);
  pb->spare = NULL;
}

/* Prepares the ops a block gained since it was prepared. */
static void grow_pblock(Executor *ex, PBlock *pb) {
  const Block *b = pb->block;
  if (b->nops <= pb->nops) return;
  pb->ops = mem_alloc(pb->ops, sizeof *pb->ops * (size_t)(b->nops + 1));
  for (int i = pb->nops; i < b->nops; i++) prepare_op(ex, &pb->ops[i], b->ops[i], b->idx);
  pb->nops = b->nops;
}

/* ---- frames ------------------------------------------------------------------- */

/* suffix: the turn suffix for tape names; it must outlive the frame (the
 * tape's arena holds it). */
static Frame *frame_new(const PBlock *pb, Frame *parent, const char *suffix) {
  Frame *f = pb->spare;
  ((PBlock *)pb)->spare = NULL;
  if (f && f->nvals != pb->block->nvars) frame_release(f), f = NULL;
  if (!f) {
    mem_charge_or_exit("loop frames", frame_bytes(pb->block->nvars));
    f = mem_calloc(1, sizeof *f);
    f->nvals = pb->block->nvars;
    f->vals = mem_calloc((size_t)f->nvals + 1, sizeof *f->vals);
  }
  f->parent = parent;
  f->pb = pb;
  f->suffix = suffix ? suffix : "";
  return f;
}

/* Releases a frame's values; the frame itself becomes its block's spare
 * when the block has none and the frame has the block's size. */
static void frame_free(Frame *f) {
  if (!f) return;
  for (int i = 0; i < f->nvals; i++) tensor_unref(f->vals[i]), f->vals[i] = NULL;
  if (f->steps) {
    for (int i = 0; i < f->pb->nops; i++) {
      for (int k = 0; k < f->steps[i].n; k++) frame_free(f->steps[i].frames[k]);
      mem_free(f->steps[i].frames);
    }
    mem_free(f->steps);
    f->steps = NULL;
  }
  PBlock *pb = (PBlock *)f->pb;
  if (!pb->spare && f->nvals == pb->block->nvars) pb->spare = f;
  else frame_release(f);
}

static Frame *frame_up(Frame *f, int up) {
  while (up-- > 0 && f) f = f->parent;
  return f;
}

static Tensor *frame_get(Frame *f, VarRef r) {
  if (r.slot < 0) return NULL;
  Frame *g = frame_up(f, r.up);
  return g && r.slot < g->nvals ? g->vals[r.slot] : NULL;
}

/* A kept frame whose block gained variables since it was made (the REPL:
 * a later grad(...) writes a turn's gradient into that turn's frame)
 * grows to hold them. */
static void frame_grow(Frame *f, int nvals) {
  mem_charge_or_exit("loop frames", frame_bytes(nvals) - frame_bytes(f->nvals));
  f->vals = mem_alloc(f->vals, sizeof *f->vals * ((size_t)nvals + 1));
  for (int i = f->nvals; i <= nvals; i++) f->vals[i] = NULL;
  f->nvals = nvals;
}

/* Stores t (taking the caller's reference) in the variable r. */
static void frame_put(Frame *f, VarRef r, Tensor *t) {
  Frame *g = frame_up(f, r.up);
  if (!g || r.slot < 0) {
    tensor_unref(t);
    return;
  }
  if (r.slot >= g->nvals) frame_grow(g, r.slot + 1);
  tensor_unref(g->vals[r.slot]);
  g->vals[r.slot] = t;
}

static const char *frame_suffix_of(Frame *f, VarRef r) {
  Frame *g = frame_up(f, r.up);
  return g ? g->suffix : "";
}

/* Forgets the turns a control op kept from its previous run. */
static void clear_steps(Frame *f, int op_index) {
  if (!f->steps) return;
  StepList *s = &f->steps[op_index];
  for (int k = 0; k < s->n; k++) frame_free(s->frames[k]);
  s->n = 0;
}

static void keep_step(Frame *f, int op_index, Frame *step) {
  if (!f->steps) f->steps = mem_calloc((size_t)f->pb->nops + 1, sizeof *f->steps);
  StepList *s = &f->steps[op_index];
  VEC_RESERVE(s->frames, s->cap, s->n + 1);
  s->frames[s->n++] = step;
}

/* ---- errors ------------------------------------------------------------------ */

/* An op expanded from a function call points at the call the user wrote,
 * the outermost one, as lowering's errors do. */
static void call_note(Diag *d, const OpDesc *op) {
  const CallSite *s = op->call;
  if (!s) return;
  while (s->outer) s = s->outer;
  diag_note(d, s->at, "in this call to '%s'", s->fn);
}

/* Reports "TYPE: message" at op p, and the call it is in; -1. */
static int op_vfail(Executor *ex, const Prepared *p, const char *fmt, va_list ap) {
  diag_verror_in(ex->diag, p->op->span, p->op->type, fmt, ap);
  call_note(ex->diag, p->op);
  return -1;
}

int exec_ctx_fail(ExecCtx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  op_vfail(c->ex, c->p, fmt, ap);
  va_end(ap);
  return -1;
}

static int op_fail(Executor *ex, const Prepared *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int op_fail(Executor *ex, const Prepared *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  op_vfail(ex, p, fmt, ap);
  va_end(ap);
  return -1;
}

/* ---- the kernel interface ---------------------------------------------------------- */

int exec_ctx_in_count(ExecCtx *c, int slot) { return c->p->nin[slot]; }
Tensor *exec_ctx_in(ExecCtx *c, int slot) { return c->p->nin[slot] ? c->in[slot][0] : NULL; }
Tensor *exec_ctx_in_at(ExecCtx *c, int slot, int i) { return i < c->p->nin[slot] ? c->in[slot][i] : NULL; }
int exec_ctx_out_count(ExecCtx *c, int slot) { return c->p->nout[slot]; }
Tensor *exec_ctx_out(ExecCtx *c, int slot) { return c->p->nout[slot] ? c->out[slot][0] : NULL; }
Tensor *exec_ctx_out_at(ExecCtx *c, int slot, int i) { return i < c->p->nout[slot] ? c->out[slot][i] : NULL; }

const VarDesc *exec_ctx_out_desc(ExecCtx *c, int slot, int i) {
  int k = 0;
  for (int s = 0; s < slot; s++) k += c->p->nout[s];
  return &c->p->out_desc[k + i];
}

void exec_ctx_set_out(ExecCtx *c, int slot, int i, Tensor *t) {
  tensor_unref(c->out[slot][i]);
  c->out[slot][i] = t;
}

const OpDesc *exec_ctx_op(ExecCtx *c) { return c->p->op; }

const AttrValue *exec_ctx_attr(ExecCtx *c, const char *name) { return reg_op_attr(c->p->proto, c->p->op, name); }
int64_t exec_ctx_attr_i(ExecCtx *c, const char *name) { return reg_attr_i64(exec_ctx_attr(c, name)); }
double exec_ctx_attr_f(ExecCtx *c, const char *name) { return reg_attr_f64(exec_ctx_attr(c, name)); }

bool exec_ctx_attr_b(ExecCtx *c, const char *name) { return exec_ctx_attr_i(c, name) != 0; }
Rng *exec_ctx_rng(ExecCtx *c) {
  Executor *ex = c->ex;
  while (ex->parent) ex = ex->parent;
  return &ex->rng;
}
const OpProto *exec_ctx_proto(ExecCtx *c) { return c->p->proto; }
FILE *exec_ctx_stream(ExecCtx *c) { return c->ex->opt.out; }
int exec_ctx_precision(ExecCtx *c) { return c->ex->opt.precision; }
const ExecOptions *exec_ctx_options(ExecCtx *c) { return &c->ex->opt; }

/* ---- running one op --------------------------------------------------------------- */

static int run_block(Executor *ex, const PBlock *pb, Frame *f);

/* Runtime shape inference, cached on the inputs' dtypes and shapes. */
static int infer_outputs(Executor *ex, Prepared *p, Tensor **ins) {
  int nsig = 0;
  for (int i = 0; i < p->in_total; i++) nsig += 2 + ins[i]->rank;
  if (p->cached && nsig == p->nsig) {
    int k = 0;
    bool same = true;
    for (int i = 0; i < p->in_total && same; i++) {
      same = p->sig[k++] == ins[i]->dtype && p->sig[k++] == ins[i]->rank;
      for (int d = 0; d < ins[i]->rank && same; d++) same = p->sig[k++] == ins[i]->shape[d];
    }
    if (same) return 0;
  }
  InferRuntime rt;
  memset(&rt, 0, sizeof rt);
  VarDesc *descs = mem_calloc((size_t)p->in_total + 1, sizeof *descs);
  const VarDesc **ptrs = mem_calloc((size_t)p->in_total + 1, sizeof *ptrs);
  int k = 0, ko = 0;
  for (int s = 0; s < p->proto->nin; s++) {
    rt.in[s] = ptrs + k;
    rt.nin[s] = p->nin[s];
    for (int i = 0; i < p->nin[s]; i++, k++) {
      descs[k].name = p->in[k].name;
      descs[k].dtype = ins[k]->dtype;
      descs[k].shape = tensor_shape(ins[k]);
      ptrs[k] = &descs[k];
    }
  }
  for (int s = 0; s < p->proto->nout; s++) {
    rt.out[s] = p->out_desc + ko;
    rt.nout[s] = p->nout[s];
    for (int i = 0; i < p->nout[s]; i++, ko++) {
      p->out_desc[ko].dtype = DT_UNKNOWN;
      p->out_desc[ko].shape = shape_unknown();
    }
  }
  InferCtx c = {.prog = ex->prog, .block = ex->prog->blocks[0], .op = (OpDesc *)p->op,
                .proto = p->proto, .rt = &rt};
  bool ok = reg_infer_run(&c);
  mem_free(descs);
  mem_free(ptrs);
  if (!ok) {
    p->cached = false;
    return -1;
  }
  for (int i = 0; i < p->out_total; i++) {
    const VarDesc *o = &p->out_desc[i];
    bool known = o->dtype != DT_UNKNOWN && o->shape.rank >= 0;
    for (int d = 0; known && d < o->shape.rank; d++) known = o->shape.d[d].n >= 0;
    if (!known && !(p->proto->flags & OP_NO_PREALLOC)) {
      char buf[128];
      return op_fail(ex, p, "internal error: the shape of output %d is not known at run time (%s)", i,
                     shape_str(&o->shape, buf, sizeof buf));
    }
  }
  mem_free(p->sig);
  p->sig = mem_alloc(NULL, sizeof *p->sig * (size_t)(nsig + 1));
  p->nsig = nsig;
  k = 0;
  for (int i = 0; i < p->in_total; i++) {
    p->sig[k++] = ins[i]->dtype;
    p->sig[k++] = ins[i]->rank;
    for (int d = 0; d < ins[i]->rank; d++) p->sig[k++] = ins[i]->shape[d];
  }
  p->cached = true;
  return 0;
}

/* Ctrl-C stopped op p: inside a loop, says which turn of which loop. */
static int interrupt_fail(Executor *ex, const Prepared *p) {
  if (!ex->loop) return op_fail(ex, p, "interrupted");
  Span at = ex->loop->op->span;
  int line = 0, col = 0;
  if (at.file >= 0) diag_line_col(ex->diag, at.file, at.start, &line, &col);
  return op_fail(ex, p, "interrupted in turn %lld of the while loop at %s:%d:%d", (long long)ex->turn + 1,
                 at.file >= 0 ? ex->diag->files[at.file].path : "?", line, col);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define MAX_STACK_VALS 16

/* Does tensor t have the dtype and shape of output description o? */
static bool out_matches(const Tensor *t, const VarDesc *o) {
  if (t->dtype != o->dtype || t->rank != o->shape.rank) return false;
  for (int d = 0; d < t->rank; d++)
    if (t->shape[d] != o->shape.d[d].n) return false;
  return true;
}

/* Calls the op's kernel on inputs ins and outputs outs (flat, in proto
 * slot order). */
static inline int call_kernel(Executor *ex, Prepared *p, int op_index, Frame *f, Tensor **ins, Tensor **outs) {
  /* Only the proto's slots are set: the kernel interface reads no
   * others (and clearing all REG_MAX_SLOTS of each costs per op). */
  ExecCtx c;
  c.ex = ex, c.p = p, c.frame = f, c.op_index = op_index;
  int k = 0, ko = 0;
  for (int s = 0; s < p->proto->nin; s++) c.in[s] = ins + k, k += p->nin[s];
  for (int s = 0; s < p->proto->nout; s++) c.out[s] = outs + ko, ko += p->nout[s];
  return p->proto->kernel(&c);
}

/* An op given f64 and f32 values computes in f64 (registry.c promotes its
 * outputs): converts its f32 inputs, marking the copies it made in owned[]
 * for the caller to drop. */
static void promote_inputs(const Prepared *p, Tensor **ins, bool *owned) {
  bool any = false, as_is = false;
  for (int i = 0; i < p->in_total; i++) owned[i] = false;
  for (int s = 0, i = 0; s < p->proto->nin; i += p->nin[s++]) {
    bool keep = p->proto->in[s].flags & SLOT_AS_IS;
    as_is |= keep;
    for (int j = i; j < i + p->nin[s] && !keep; j++) any |= ins[j] && ins[j]->dtype == DT_F64;
  }
  /* print shows each value as it is; control ops and ops scripts define
   * pass them to blocks whose ops promote */
  if (!any || (p->proto->flags & (OP_CONTROL | OP_SIDE_EFFECT | OP_ANY_FLOAT))) return;
  for (int s = 0, i = 0; s < p->proto->nin; i += p->nin[s++])
    for (int j = i; j < i + p->nin[s] && !(as_is && (p->proto->in[s].flags & SLOT_AS_IS)); j++)
      if (ins[j] && ins[j]->dtype == DT_F32) {
        bool rg = ins[j]->requires_grad;
        ins[j] = tensor_cast(ins[j], DT_F64);
        ins[j]->requires_grad = rg;
        owned[j] = true;
      }
}

/* Gather: the op's input values from frame f into ins (a control op's
 * missing input may be empty); *any_grad whether one requires a gradient.
 * 0 or -1 (reported). */
static inline int gather_inputs(Executor *ex, Prepared *p, Frame *f, Tensor **ins, bool *any_grad) {
  for (int i = 0; i < p->in_total; i++) {
    ins[i] = frame_get(f, p->in[i]);
    if (!ins[i] && (p->proto->flags & OP_CONTROL) && name_is_empty(p->in[i].name)) continue;
    if (!ins[i]) return op_fail(ex, p, "internal error: '%s' has no value", p->in[i].name);
    *any_grad |= ins[i] && ins[i]->requires_grad;
  }
  return 0;
}

/* Allocate: each output a new tensor of its inferred dtype and shape, but
 * for an op that makes its own (OP_NO_PREALLOC).  0 or -1 (reported; the
 * outputs made so far are the caller's to drop). */
static inline int allocate_outputs(Executor *ex, Prepared *p, Tensor **outs) {
  for (int i = 0; i < p->out_total; i++) {
    outs[i] = NULL;
    if (p->proto->flags & OP_NO_PREALLOC) continue;
    const VarDesc *o = &p->out_desc[i];
    int64_t dims[SHAPE_MAX_RANK];
    for (int d = 0; d < o->shape.rank; d++) dims[d] = o->shape.d[d].n;
    char why[TENSOR_WHY_MAX];
    outs[i] = tensor_try_new(o->dtype, o->shape.rank, dims, why);
    if (!outs[i]) {
      char buf[128];
      int rc = op_fail(ex, p, "output '%s' of shape %s: %s", o->name, shape_str(&o->shape, buf, sizeof buf), why);
      if (ex->tape.n && mem_limit_hit())
        diag_note(ex->diag, SPAN_NONE, "the tape keeps the values of the %d ops run so far that a gradient may need",
                  ex->tape.n);
      return rc;
    }
  }
  return 0;
}

/* A non-control op's kernel run: its outputs inferred, its inputs
 * promoted, a constant's value reused, the outputs allocated, the kernel
 * called and its outputs checked.  The kernel's status, or -1 (reported). */
static inline int run_kernel(Executor *ex, Prepared *p, int op_index, Frame *f, Tensor **ins, Tensor **outs,
                             bool *owned) {
  int rc;
  if ((rc = infer_outputs(ex, p, ins)) < 0) return rc;
  promote_inputs(p, ins, owned);
  if (p->constant && out_matches(p->constant, &p->out_desc[0])) {
    outs[0] = tensor_ref(p->constant);
    return rc;
  }
  if ((rc = allocate_outputs(ex, p, outs)) < 0) return rc;
  /* Outputs of no elements cost nothing: there is nothing to compute
   * (concat of [2^62, 0] would otherwise walk 2^62 rows to copy none). */
  bool empty = p->out_total > 0 && !(p->proto->flags & (OP_NO_PREALLOC | OP_SIDE_EFFECT));
  for (int i = 0; empty && i < p->out_total; i++) empty = outs[i]->numel == 0;
  if (!empty && (rc = call_kernel(ex, p, op_index, f, ins, outs)) < 0) return rc;
  /* A kernel's long loops stop early on Ctrl-C (exec_interrupted): its
   * outputs are then partial, and the op failed. */
  if (interrupted) return interrupt_fail(ex, p);
  for (int i = 0; i < p->out_total; i++)
    if (!outs[i]) return op_fail(ex, p, "internal error: the kernel left output %d unset", i);
  if (p->keeps && p->out_total == 1) {
    tensor_unref(p->constant);
    p->constant = tensor_ref(outs[0]);
  }
  return rc;
}

/* Post-kernel: the op's time (from t0), whether a gradient flows to each
 * output, --check-nan, the tape's record, then the outputs handed to frame
 * f.  0 or -1 (reported; the outputs are still the caller's). */
static inline int post_kernel(Executor *ex, Prepared *p, Frame *f, Tensor **ins, Tensor **outs, bool any_grad,
                              double t0) {
  if (p->timing >= 0) {
    ex->timings[p->timing].calls++;
    ex->timings[p->timing].seconds += now() - t0;
  }
  /* A gradient flows to an output if one flows from an input through an op
   * that has one, and the output is real-valued. */
  bool grad_flows = any_grad && p->proto->grad_kind != GRAD_NONE;
  for (int i = 0; i < p->out_total; i++)
    if (outs[i]) outs[i]->requires_grad = grad_flows && dtype_is_float(outs[i]->dtype);
  if (ex->opt.check_nan)
    for (int i = 0; i < p->out_total; i++)
      if (outs[i] && tensor_non_finite(outs[i])) {
        char buf[128];
        return op_fail(ex, p, "produced NaN or Inf in '%s' (shape %s)", p->out_desc[i].name,
                       tensor_shape_str(outs[i], buf, sizeof buf));
      }
  if (ex->opt.tape && grad_flows && !(p->proto->flags & OP_CONTROL)) {
    const char *in_vars[MAX_STACK_VALS], *in_turns[MAX_STACK_VALS], *out_vars[MAX_STACK_VALS];
    bool small = p->in_total <= MAX_STACK_VALS && p->out_total <= MAX_STACK_VALS;
    const char **iv = small ? in_vars : mem_alloc(NULL, sizeof *iv * (size_t)(p->in_total + 1));
    const char **it = small ? in_turns : mem_alloc(NULL, sizeof *it * (size_t)(p->in_total + 1));
    const char **ov = small ? out_vars : mem_alloc(NULL, sizeof *ov * (size_t)(p->out_total + 1));
    for (int i = 0; i < p->in_total; i++) iv[i] = p->in[i].name, it[i] = frame_suffix_of(f, p->in[i]);
    for (int i = 0; i < p->out_total; i++) ov[i] = p->out[i].name;
    if (p->klass < 0) p->klass = op_class(ex, p);
    tape_record(&ex->tape, p->op, p->klass, ins, iv, it, p->in_total, outs, ov, p->out_total, f->suffix);
    if (!small) mem_free(iv), mem_free(it), mem_free(ov);
  }
  for (int i = 0; i < p->out_total; i++) {
    frame_put(f, p->out[i], outs[i]);
    outs[i] = NULL;
  }
  return 0;
}

/* Runs one op in frame f: gather its inputs, run its kernel (a control op
 * making its outputs from the blocks it runs), then the post-kernel work.
 * With --check-nan a fused op runs as the ops it stands for. */
static int run_op(Executor *ex, Prepared *p, int op_index, Frame *f) {
  if (p->norig && ex->opt.check_nan) {
    for (int k = 0; k < p->norig; k++)
      if (run_op(ex, &p->orig[k], op_index, f) < 0) return -1;
    return 0;
  }
  if (interrupted) return interrupt_fail(ex, p);
  ex->ops_run++;
  if (!p->proto) return op_fail(ex, p, "internal error: unknown op type");
  Tensor *in_stack[MAX_STACK_VALS], *out_stack[MAX_STACK_VALS];
  Tensor **ins = p->in_total <= MAX_STACK_VALS ? in_stack : mem_alloc(NULL, sizeof *ins * (size_t)p->in_total);
  Tensor **outs = p->out_total <= MAX_STACK_VALS ? out_stack
                                                 : mem_calloc((size_t)p->out_total, sizeof *outs);
  for (int i = 0; i < p->out_total; i++) outs[i] = NULL;
  bool owned_stack[MAX_STACK_VALS];
  bool *owned = p->in_total <= MAX_STACK_VALS ? owned_stack : mem_calloc((size_t)p->in_total + 1, sizeof *owned);
  for (int i = 0; i < p->in_total; i++) owned[i] = false;
  bool any_grad = false;
  int rc = gather_inputs(ex, p, f, ins, &any_grad);
  if (rc < 0) goto done;
  double t0 = p->timing >= 0 ? now() : 0;
  if (!p->proto->kernel) rc = op_fail(ex, p, "has no kernel yet");
  else if (p->proto->flags & OP_CONTROL) rc = call_kernel(ex, p, op_index, f, ins, outs);
  else rc = run_kernel(ex, p, op_index, f, ins, outs, owned);
  if (rc >= 0) {
    int post = post_kernel(ex, p, f, ins, outs, any_grad, t0);
    if (post < 0) rc = post;
  }
done:
  for (int i = 0; i < p->out_total; i++)
    if (rc < 0) tensor_unref(outs[i]);
  for (int i = 0; i < p->in_total; i++)
    if (owned[i]) tensor_unref(ins[i]);
  if (owned != owned_stack) mem_free(owned);
  if (ins != in_stack) mem_free(ins);
  if (outs != out_stack) mem_free(outs);
  return rc;
}

/* Under the memory plan, drops the values of frame f (a run of block
 * pb) whose last reader was op i of the block, but for the slots spare
 * marks (NULL: none). */
static void plan_drop_but(Executor *ex, const PBlock *pb, int i, Frame *f, const bool *spare) {
  int b = pb->block->idx;
  if (b < 0 || b >= ex->nplans || i >= ex->plans[b].nops) return;
  const struct BlockPlan *bp = &ex->plans[b];
  for (int s = bp->head[i]; s >= 0; s = bp->next[s])
    if (s < f->nvals && !(spare && spare[s])) tensor_unref(f->vals[s]), f->vals[s] = NULL;
}

static void plan_drop(Executor *ex, const PBlock *pb, int i, Frame *f) { plan_drop_but(ex, pb, i, f, NULL); }

static int run_block(Executor *ex, const PBlock *pb, Frame *f) {
  for (int i = 0; i < pb->nops; i++) {
    if (run_op(ex, &pb->ops[i], i, f) < 0) return -1;
    plan_drop(ex, pb, i, f);
  }
  return 0;
}

/* ---- the control-flow kernel interface ------------------------------------------------- */

ExecFrame *exec_ctx_frame(ExecCtx *c) { return c->frame; }

ExecFrame *exec_ctx_frame_new(ExecCtx *c, int which, ExecFrame *parent, const char *suffix) {
  return frame_new(c->ex->pblocks[c->p->sub[which]], parent, suffix);
}

void exec_ctx_frame_free(ExecFrame *f) { frame_free(f); }
const char *exec_ctx_frame_suffix(const ExecFrame *f) { return f->suffix; }
int exec_ctx_frame_block(const ExecFrame *f) { return f->pb->block->idx; }

const Block *exec_ctx_block(ExecCtx *c, int which) {
  return c->p->sub[which] >= 0 ? c->ex->prog->blocks[c->p->sub[which]] : NULL;
}

int exec_ctx_nargs(ExecCtx *c, int which) { return c->p->nargs[which]; }

void exec_ctx_frame_set_arg(ExecCtx *c, ExecFrame *f, int which, int k, Tensor *t) {
  int slot = c->p->args[which][k];
  if (t && slot >= 0) f->vals[slot] = t;
  else tensor_unref(t);
}

Tensor *exec_ctx_frame_result(ExecCtx *c, ExecFrame *f, int which, int k) {
  return k < c->p->nresults[which] ? frame_get(f, c->p->results[which][k]) : NULL;
}

int exec_ctx_run_block(ExecCtx *c, ExecFrame *f) { return run_block(c->ex, f->pb, f); }

int exec_ctx_run_turn(ExecCtx *c, ExecFrame *f, int64_t turn) {
  Executor *ex = c->ex;
  const Prepared *outer = ex->loop;
  int64_t outer_turn = ex->turn;
  ex->loop = c->p, ex->turn = turn;   /* an op interrupted in it names the turn */
  int rc = run_block(ex, f->pb, f);
  ex->loop = outer, ex->turn = outer_turn;
  return rc;
}

/* Does a grad op of a second backward run over the frames the grad op p
 * (in block blk) keeps? */
static bool turns_wanted(const Program *prog, const Prepared *p, int blk) {
  for (int b = 0; b < prog->nblocks; b++)
    for (int i = 0; i < prog->blocks[b]->nops; i++) {
      const OpDesc *op = prog->blocks[b]->ops[i];
      if (op->fwd_block == blk && op->fwd_op >= 0 && op->fwd_op < prog->blocks[blk]->nops &&
          prog->blocks[blk]->ops[op->fwd_op] == p->op && (reg_find_op(prog, op->type)->flags & OP_KEPT_TURNS))
        return true;
    }
  return false;
}

/* Before a control op runs: forgets its turns from its previous run, and
 * for a grad op, finds whether to keep this run's (the program may have
 * grown since: the REPL). */
void exec_ctx_clear_turns(ExecCtx *c) {
  Prepared *p = (Prepared *)c->p;
  clear_steps(c->frame, c->op_index);
  if (c->ex->opt.keep_steps && (p->proto->flags & OP_KEPT_TURNS))
    p->wanted = c->ex->opt.keep_all_steps || turns_wanted(c->ex->prog, p, c->frame->pb->block->idx) ? 1 : -1;
}

/* A loop's turns are kept for its grad op; a grad op's, only for a second
 * backward's. */
void exec_ctx_keep_turn(ExecCtx *c, ExecFrame *f) {
  if (c->ex->opt.keep_steps && c->p->wanted >= 0) keep_step(c->frame, c->op_index, f);
  else frame_free(f);
}

/* The frame of the forward op a grad op came from, and the turns (or the
 * branch) that op kept. */
bool exec_ctx_kept_turns(ExecCtx *c, ExecFrame ***turns, int *n) {
  const OpDesc *op = c->p->op;
  Frame *f = c->frame;
  while (f && f->pb->block->idx != op->fwd_block) f = f->parent;
  if (!f || op->fwd_op < 0 || op->fwd_op >= f->pb->nops) return false;
  /* a loop that ran no turn kept nothing */
  *turns = f->steps ? f->steps[op->fwd_op].frames : NULL;
  *n = f->steps ? f->steps[op->fwd_op].n : 0;
  return true;
}

const char *exec_ctx_turn_suffix(ExecCtx *c, int64_t turn) {
  return c->ex->opt.tape ? tape_turn(&c->ex->tape, c->frame->suffix, turn) : "";
}

int64_t exec_ctx_max_steps(ExecCtx *c) { return c->ex->opt.max_steps; }

bool exec_ctx_out_wanted(ExecCtx *c, int slot, int i) {
  int k = i;
  for (int s = 0; s < slot; s++) k += c->p->nout[s];
  return c->p->out[k].slot >= 0;
}

/* An add_n with n inputs, as the tape records a while_grad's sums: one
 * per count of parts, kept while the count stays the same. */
static OpDesc *sum_op(Executor *ex, Prepared *p, int n) {
  if (p->tape_op && p->tape_op->in[0].n == n) return p->tape_op;
  OpDesc *op = op_new(ex->prog, "add_n", p->op->span);
  Slot *x = op_add_input(ex->prog, op, "X");
  for (int k = 0; k < n; k++) slot_push(ex->prog, x, arena_printf(ex->prog->arena, "X%d", k));
  slot_push(ex->prog, op_add_output(ex->prog, op, "Out"), "Out");
  VarRef *refs = mem_calloc((size_t)n + 2, sizeof *refs);
  for (int k = 0; k <= n; k++) refs[k] = (VarRef){.slot = -1, .name = k < n ? x->args[k] : "Out"};
  Prepared q = {.op = op, .proto = reg_find_op(ex->prog, "add_n"), .in_total = n, .out_total = 1, .in = refs, .out = refs + n};
  p->klass = op_class(ex, &q);
  mem_free(refs);
  return p->tape_op = op;
}

const char *exec_ctx_tape_name(ExecCtx *c, const char *name, const char *suffix) {
  return arena_printf(&c->ex->tape.arena, "%s%s", name, suffix);
}

void exec_ctx_tape_sum(ExecCtx *c, int slot, int i, Tensor *const *parts, const char *const *names, int n, Tensor *sum) {
  Executor *ex = c->ex;
  Prepared *p = (Prepared *)c->p;
  bool any = false;
  for (int k = 0; k < n; k++) any = any || parts[k]->requires_grad;
  if (!ex->opt.tape || !any || n < 1) return;
  int o = i;
  for (int s = 0; s < slot; s++) o += p->nout[s];
  OpDesc *op = sum_op(ex, p, n);
  const char **turns = mem_calloc((size_t)n + 1, sizeof *turns);
  for (int k = 0; k < n; k++) turns[k] = "";
  const char *out = p->out[o].name;
  tape_record(&ex->tape, op, p->klass, parts, names, turns, n, &sum, &out, 1, c->frame->suffix);
  mem_free(turns);
}

/* ---- the executor ----------------------------------------------------------------- */

Executor *exec_new(Program *p, const ExecOptions *opt) {
  Executor *ex = mem_calloc(1, sizeof *ex);
  ex->prog = p;
  ex->diag = p->diag;
  ex->opt = *opt;
  if (!ex->opt.out) ex->opt.out = stdout;
  rng_seed(&ex->rng, opt->seed);
  tape_init(&ex->tape);
  for (int i = 0; i < p->nblocks; i++)
    for (int j = 0; j < p->blocks[i]->nops; j++) {
      const OpProto *proto = reg_find_op(p, p->blocks[i]->ops[j]->type);
      if (proto && (proto->flags & OP_KEPT_TURNS)) ex->opt.keep_steps = true;
    }
  ex->pblocks = mem_calloc((size_t)p->nblocks + 1, sizeof *ex->pblocks);
  for (int i = 0; i < p->nblocks; i++) {
    ex->pblocks[i] = mem_calloc(1, sizeof **ex->pblocks);
    prepare_block(ex, ex->pblocks[i], p->blocks[i]);
  }
  ex->nprepared = p->nblocks;
  prepare_block(ex, &ex->startup, p->startup);
  ex->root = frame_new(ex->pblocks[0], NULL, "");
  ex->waits = mem_calloc((size_t)ex->root->nvals + 1, sizeof *ex->waits);
  return ex;
}

static void plans_free(Executor *ex) {
  for (int b = 0; b < ex->nplans; b++) mem_free(ex->plans[b].head), mem_free(ex->plans[b].next);
  mem_free(ex->plans);
  ex->plans = NULL;
  ex->nplans = 0;
}

void exec_free(Executor *ex) {
  if (!ex) return;
  frame_free(ex->root);
  for (int i = 0; i < ex->nprepared; i++) free_pblock(ex->pblocks[i]), mem_free(ex->pblocks[i]);
  free_pblock(&ex->startup);
  mem_free(ex->pblocks);
  tape_free(&ex->tape);
  for (int i = 0; i < ex->nclasses; i++) mem_free(ex->classes[i].alias);
  mem_free(ex->classes);
  mem_free(ex->class_index);
  mem_free(ex->timings);
  mem_free(ex->dims);
  mem_free(ex->waits);
  plans_free(ex);
  mem_free(ex);
}

bool exec_use_plan(Executor *ex, const char *const *keep, int nkeep) {
  plans_free(ex);
  const char *off = getenv("NETRUN_NO_MEMORY_PLAN");
  if (off && *off) return false;
  ex->nplans = ex->nprepared;
  ex->plans = mem_calloc((size_t)ex->nplans + 1, sizeof *ex->plans);
  for (int b = 0; b < ex->nplans; b++) {
    int *release = plan_release(ex->prog, b, keep, nkeep);
    struct BlockPlan *bp = &ex->plans[b];
    bp->nops = ex->pblocks[b]->nops;
    plan_lists(bp->nops, ex->prog->blocks[b]->nvars, release, &bp->head, &bp->next);
    mem_free(release);
  }
  return true;
}

Executor *exec_child(ExecCtx *c, Program *sub) {
  ExecOptions o = c->ex->opt;
  o.tape = o.keep_steps = o.timing = false;
  Executor *ex = exec_new(sub, &o);
  ex->parent = c->ex;
  ex->started = true;
  return ex;
}

int exec_run_child(Executor *ex) { return run_block(ex, ex->pblocks[0], ex->root); }

Tape *exec_tape(Executor *ex) { return &ex->tape; }
int64_t exec_ops_run(const Executor *ex) { return ex->ops_run; }
Rng *exec_rng(Executor *ex) { return &ex->rng; }

const OpTiming *exec_timings(Executor *ex, int *n) {
  *n = ex->ntimings;
  return ex->timings;
}

void exec_timings_reset(Executor *ex) {
  for (int i = 0; i < ex->ntimings; i++) ex->timings[i].calls = 0, ex->timings[i].seconds = 0;
}

static const VarDesc *find_input(Executor *ex, const char *name) {
  const VarDesc *v = prog_named_var(ex->prog, name);
  return v && (v->flags & VAR_INPUT) ? v : NULL;
}

static struct BoundDim *bound_dim(Executor *ex, const char *sym) {
  for (int i = 0; i < ex->ndims; i++)
    if (strcmp(ex->dims[i].name, sym) == 0) return &ex->dims[i];
  return NULL;
}

void exec_unbind(Executor *ex) { ex->ndims = 0; }

void exec_check_nan(Executor *ex, bool on) { ex->opt.check_nan = on; }
void exec_between(Executor *ex, void (*fn)(void)) { ex->between = fn; }

bool exec_feed(Executor *ex, const char *name, Tensor *t, const char *what) {
  const VarDesc *v = find_input(ex, name);
  if (!v) {
    diag_error(ex->diag, SPAN_NONE, "%s: the script has no input named '%s'", what, name);
    return false;
  }
  char want[256], got[128];
  snprintf(want, sizeof want, "%s", dtype_name(v->dtype));
  shape_str(&v->shape, want + strlen(want), sizeof want - strlen(want));
  tensor_shape_str(t, got, sizeof got);
  if (v->dtype == DT_F64 && (t->dtype == DT_F32 || t->dtype == DT_I64)) {   /* read as f64 */
    Tensor *wide = tensor_cast(t, DT_F64);
    bool ok = exec_feed(ex, name, wide, what);
    tensor_unref(wide);
    return ok;
  }
  if (t->dtype != v->dtype) {
    diag_error(ex->diag, v->span, "%s: '%s' is declared %s but the value is %s", what, v->name, want,
               dtype_name(t->dtype));
    return false;
  }
  if (t->rank != v->shape.rank) {
    diag_error(ex->diag, v->span, "%s: '%s' is declared %s but the value has shape %s", what, v->name, want,
               got);
    return false;
  }
  /* Check known dims first, then bind symbols (so a failed feed binds nothing). */
  for (int d = 0; d < t->rank; d++) {
    Dim dim = v->shape.d[d];
    if (dim.n >= 0 && dim.n != t->shape[d]) {
      diag_error(ex->diag, v->span, "%s: '%s' is declared %s but the value has shape %s", what, v->name, want,
                 got);
      return false;
    }
    struct BoundDim *b = dim.sym ? bound_dim(ex, dim.sym) : NULL;
    if (b && b->value != t->shape[d] && strcmp(b->by, v->name) != 0) {
      diag_error(ex->diag, v->span, "%s: '%s' has shape %s, but %s = %lld (bound by '%s')", what, v->name, got,
                 dim.sym, (long long)b->value, b->by);
      return false;
    }
    for (int e = 0; e < d && dim.sym; e++)
      if (v->shape.d[e].sym && strcmp(v->shape.d[e].sym, dim.sym) == 0 && t->shape[e] != t->shape[d]) {
        diag_error(ex->diag, v->span, "%s: '%s' is declared %s but the value has shape %s", what, v->name,
                   want, got);
        return false;
      }
  }
  for (int d = 0; d < t->rank; d++) {
    Dim dim = v->shape.d[d];
    if (!dim.sym) continue;
    struct BoundDim *b = bound_dim(ex, dim.sym);
    if (!b) {
      VEC_RESERVE(ex->dims, ex->capdims, ex->ndims + 1);
      b = &ex->dims[ex->ndims++];
      b->name = dim.sym;
    }
    b->value = t->shape[d];
    b->by = v->name;
  }
  /* A fed value starts a fresh graph: it does not require a gradient. */
  Tensor *copy = t->requires_grad ? tensor_copy(t) : tensor_ref(t);
  copy->requires_grad = false;
  VarRef r = {0, v->slot, v->name};
  frame_put(ex->root, r, copy);
  return true;
}

/* Runs the startup ops not run yet: defaults, without overwriting what was
 * fed, and initializers. */
static int run_startup(Executor *ex) {
  Frame *sf = frame_new(&ex->startup, ex->root, "");
  for (int i = ex->startup_ran; i < ex->startup.nops; i++) {
    Prepared *p = &ex->startup.ops[i];
    bool fed = p->out_total == 1 && p->out[0].up == 1 && ex->root->vals[p->out[0].slot];
    if (fed) continue;
    if (run_op(ex, p, i, sf) < 0) {
      frame_free(sf);
      return -1;
    }
  }
  frame_free(sf);
  ex->startup_ran = ex->startup.nops;
  const Block *b0 = ex->prog->blocks[0];
  for (int i = 0; i < b0->nvars && i < ex->root->nvals; i++)
    if ((b0->vars[i]->flags & VAR_PARAM) && ex->root->vals[i]) ex->root->vals[i]->requires_grad = true;
  return 0;
}

int exec_startup(Executor *ex) {
  if (ex->started) return 0;
  interrupted = 0;
  if (run_startup(ex) < 0) return -1;
  ex->started = true;
  return 0;
}

int exec_run_range(Executor *ex, int first, int last) {
  if (exec_startup(ex) < 0) return -1;
  interrupted = 0;
  const Block *b0 = ex->prog->blocks[0];
  for (int i = 0; i < b0->nvars; i++) {
    const VarDesc *v = b0->vars[i];
    if ((v->flags & VAR_INPUT) && !ex->root->vals[i]) {
      diag_error(ex->diag, v->span,
                 "input '%s' has no value: feed it (--set %s=VALUE or --feed %s=FILE.csv) or give it a default",
                 v->name, v->name, v->name);
      return -1;
    }
  }
  const PBlock *pb = ex->pblocks[0];
  if (last < 0 || last > pb->nops) last = pb->nops;
  for (int i = first; i < last; i++) {
    if (run_op(ex, &pb->ops[i], i, ex->root) < 0) return -1;
    plan_drop(ex, pb, i, ex->root);
    if (ex->between) ex->between();
  }
  return 0;
}

int exec_run(Executor *ex) { return exec_run_range(ex, 0, -1); }

int exec_run_for(Executor *ex, const char *const *vars, int nvars) {
  if (exec_startup(ex) < 0) return -1;
  interrupted = 0;
  const Block *b0 = ex->prog->blocks[0];
  const PBlock *pb = ex->pblocks[0];
  for (int k = 0; k < nvars; k++) {
    const VarDesc *target = prog_var(ex->prog, vars[k]);
    if (!target || target->block != 0) return -1;
  }
  bool *need = mem_calloc((size_t)b0->nvars + 1, sizeof *need);
  bool *run = mem_calloc((size_t)pb->nops + 1, sizeof *run);
  bool *wanted = mem_calloc((size_t)b0->nvars + 1, sizeof *wanted);   /* the plan keeps them */
  for (int k = 0; k < nvars; k++) need[prog_var(ex->prog, vars[k])->slot] = wanted[prog_var(ex->prog, vars[k])->slot] = true;
  /* The ops the value depends on, found backwards. */
  for (int i = pb->nops - 1; i >= 0; i--) {
    const Prepared *p = &pb->ops[i];
    for (int k = 0; k < p->out_total && !run[i]; k++) run[i] = p->out[k].up == 0 && p->out[k].slot >= 0 && need[p->out[k].slot];
    if (!run[i] && !(p->proto && (p->proto->flags & OP_SIDE_EFFECT) && !(p->proto->flags & OP_NO_PREALLOC))) continue;
    run[i] = true;
    for (int k = 0; k < p->in_total; k++)
      if (p->in[k].up == 0 && p->in[k].slot >= 0) need[p->in[k].slot] = true;
  }
  int rc = 0;
  for (int i = 0; i < b0->nvars && rc == 0; i++) {
    const VarDesc *v = b0->vars[i];
    if (need[i] && (v->flags & VAR_INPUT) && !ex->root->vals[i]) {
      diag_error(ex->diag, v->span,
                 "input '%s' has no value: feed it (--set %s=VALUE or --feed %s=FILE.csv) or give it a default",
                 v->name, v->name, v->name);
      rc = -1;
    }
  }
  for (int i = 0; i < pb->nops && rc == 0; i++) {
    if (!run[i]) continue;
    if (run_op(ex, &pb->ops[i], i, ex->root) < 0) rc = -1;
    else plan_drop_but(ex, pb, i, ex->root, wanted);
  }
  mem_free(need);
  mem_free(run);
  mem_free(wanted);
  return rc;
}

void exec_preload(Executor *ex, const char *var, Tensor *t) {
  const VarDesc *v = prog_var(ex->prog, var);
  if (!v || v->block != 0) return;
  VarRef r = {0, v->slot, v->name};
  frame_put(ex->root, r, tensor_ref(t));
}

int exec_slot(Executor *ex, const char *var) {
  const VarDesc *v = prog_var(ex->prog, var);
  return v && v->block == 0 ? v->slot : -1;
}

void exec_set(Executor *ex, int slot, Tensor *t) {
  Tensor **v = &ex->root->vals[slot];
  tensor_ref(t);
  tensor_unref(*v);
  *v = t;
}

Tensor *exec_get(Executor *ex, int slot) { return ex->root->vals[slot]; }

void exec_clear(Executor *ex) {
  Tensor **v = ex->root->vals;
  for (int i = 0; i < ex->root->nvals; i++) tensor_unref(v[i]), v[i] = NULL;
}

int exec_run_ops(Executor *ex, int first, int last) {
  const PBlock *pb = ex->pblocks[0];
  for (int i = first; i < last && i < pb->nops; i++)
    if (run_op(ex, &pb->ops[i], i, ex->root) < 0) return -1;
  return 0;
}

int exec_run_from(Executor *ex, int first) {
  ex->started = true;
  return exec_run_range(ex, first, -1);
}

Tensor *exec_value(Executor *ex, const char *name) {
  const char *var = prog_export(ex->prog, name);
  return exec_var_value(ex, var ? var : name);
}

Tensor *exec_var_value(Executor *ex, const char *var) {
  const VarDesc *v = prog_var(ex->prog, var);
  if (!v || v->block != 0 || v->slot >= ex->root->nvals) return NULL;
  return ex->root->vals[v->slot];
}

/* ---- a growing program (the REPL) ------------------------------------------------ */

void exec_grow(Executor *ex) {
  Program *p = ex->prog;
  if (p->nblocks > ex->nprepared) {
    ex->pblocks = mem_alloc(ex->pblocks, sizeof *ex->pblocks * (size_t)(p->nblocks + 1));
    for (int i = ex->nprepared; i < p->nblocks; i++) {
      ex->pblocks[i] = mem_calloc(1, sizeof **ex->pblocks);
      prepare_block(ex, ex->pblocks[i], p->blocks[i]);
    }
    ex->nprepared = p->nblocks;
  }
  int had = ex->pblocks[0]->nops;
  grow_pblock(ex, ex->pblocks[0]);
  grow_pblock(ex, &ex->startup);
  Frame *root = ex->root;
  int nvars = p->blocks[0]->nvars;
  if (nvars > root->nvals) {
    root->vals = mem_alloc(root->vals, sizeof *root->vals * (size_t)(nvars + 1));
    ex->waits = mem_alloc(ex->waits, sizeof *ex->waits * (size_t)(nvars + 1));
    for (int i = root->nvals; i <= nvars; i++) root->vals[i] = NULL, ex->waits[i] = NULL;
    root->nvals = nvars;
  }
  if (root->steps) {   /* one list per op, for the turns kept (keep_steps) */
    root->steps = mem_alloc(root->steps, sizeof *root->steps * (size_t)(ex->pblocks[0]->nops + 1));
    for (int i = had + 1; i <= ex->pblocks[0]->nops; i++) root->steps[i] = (StepList){0};
  }
}

/* The input a block-0 op cannot run without: the first input it reads that
 * has no value, or the input such a value waits for; NULL if it can run. */
static const char *missing_input(Executor *ex, const Prepared *p) {
  for (int k = 0; k < p->in_total; k++) {
    VarRef r = p->in[k];
    if (r.up != 0 || r.slot < 0 || ex->root->vals[r.slot] || name_is_empty(r.name)) continue;
    if (ex->waits[r.slot]) return ex->waits[r.slot];
    const VarDesc *v = prog_var(ex->prog, r.name);
    if (v && (v->flags & VAR_INPUT)) return v->name;
  }
  return NULL;
}

int exec_run_to(Executor *ex, int end) {
  if (ex->startup_ran < ex->startup.nops) {
    if (run_startup(ex) < 0) return -1;
    ex->started = true;
  }
  const PBlock *pb = ex->pblocks[0];
  if (end > pb->nops) end = pb->nops;
  for (; ex->ran < end; ex->ran++) {
    Prepared *p = &pb->ops[ex->ran];
    const char *wait = missing_input(ex, p);
    if (!wait) {
      if (run_op(ex, p, ex->ran, ex->root) < 0) return -1;
      continue;
    }
    if (p->proto && (p->proto->flags & OP_SIDE_EFFECT)) {
      for (int k = 0; k < p->in_total; k++)
        if (p->in[k].slot >= 0 && !ex->root->vals[p->in[k].slot])
          return op_fail(ex, p, "'%s' has no value: it depends on input '%s', which was not fed",
                         prog_user_name(ex->prog, p->in[k].name), prog_user_name(ex->prog, wait));
    }
    for (int k = 0; k < p->out_total; k++)
      if (p->out[k].up == 0 && p->out[k].slot >= 0) ex->waits[p->out[k].slot] = wait;
  }
  return 0;
}

const char *exec_waits_for(Executor *ex, const char *var) {
  const VarDesc *v = prog_var(ex->prog, var);
  if (!v || v->block != 0 || v->slot >= ex->root->nvals || ex->root->vals[v->slot]) return NULL;
  return ex->waits[v->slot] ? ex->waits[v->slot] : (v->flags & VAR_INPUT) ? v->name : NULL;
}

void exec_mark(const Executor *ex, ExecMark *m) {
  m->nblocks = ex->nprepared;
  m->nops = ex->pblocks[0]->nops;
  m->nstartup = ex->startup.nops;
  m->nvars = ex->root->nvals;
  m->ran = ex->ran;
  m->startup_ran = ex->startup_ran;
  m->ntape = ex->tape.n;
  m->ndims = ex->ndims;
  m->rng = ex->rng;
  m->started = ex->started;
}

void exec_rollback(Executor *ex, const ExecMark *m) {
  Frame *root = ex->root;
  for (int i = m->nvars; i < root->nvals; i++) {
    tensor_unref(root->vals[i]);
    root->vals[i] = NULL;
    ex->waits[i] = NULL;
  }
  PBlock *b0 = ex->pblocks[0];
  for (int i = m->nops; i < b0->nops; i++) {
    clear_steps(root, i);
    if (root->steps) mem_free(root->steps[i].frames), root->steps[i] = (StepList){0};
    free_prepared(&b0->ops[i]);
  }
  b0->nops = m->nops;
  for (int i = m->nstartup; i < ex->startup.nops; i++) free_prepared(&ex->startup.ops[i]);
  ex->startup.nops = m->nstartup;
  for (int i = m->nblocks; i < ex->nprepared; i++) free_pblock(ex->pblocks[i]), mem_free(ex->pblocks[i]);
  ex->nprepared = m->nblocks;
  tape_truncate(&ex->tape, m->ntape);
  ex->ran = m->ran;
  ex->startup_ran = m->startup_ran;
  ex->ndims = m->ndims;
  ex->rng = m->rng;
  ex->started = m->started;
}
