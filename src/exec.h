/* exec.h — the eager executor and the kernel interface.
 *
 * The executor runs a program op by op, like PyTorch: first its startup
 * block (initializers, input defaults), then block 0.  Values live in
 * frames, one per block activation: a while body gets a new frame per turn
 * (its step scope, kept for the backward), an if branch one frame.  Before
 * each op runs, its proto's shape inference runs on the concrete input
 * shapes, so kernels receive outputs already allocated with the right dtype
 * and shape (ops flagged OP_NO_PREALLOC make their own, e.g. views).
 *
 * While running it records a tape (tape.h) of every op that reads a value
 * requiring a gradient.
 *
 * Kernels are `int kernel(ExecCtx *c)`: they read inputs and attributes
 * through the ctx_* functions below, write the outputs, and return 0, or
 * ctx_fail(...) (which reports a runtime error at the op's source and
 * returns -1).  Slots are addressed by their index in the op's proto.
 */
#ifndef NETRUN_EXEC_H
#define NETRUN_EXEC_H

#include "registry.h"
#include "tensor.h"

typedef struct Executor Executor;
typedef struct Tape Tape;

typedef struct ExecOptions {
  uint64_t seed;          /* --seed */
  int64_t max_steps;      /* --max-steps: turns one while loop may take */
  bool check_nan;         /* --check-nan: stop at the first op producing NaN/Inf */
  bool tape;              /* record the tape */
  bool keep_steps;        /* keep while step scopes (for the backward) */
  bool timing;            /* accumulate per-op-type times (netrun time) */
  int precision;          /* print(): digits after the point */
  FILE *out;              /* where print() writes */
} ExecOptions;

void exec_default_options(ExecOptions *o);

Executor *exec_new(Program *p, const ExecOptions *opt);
void exec_free(Executor *ex);
/* Feeds a value to input `name` (a script name or variable): checks dtype
 * and shape against the declaration and binds its symbolic dims.  Takes a
 * reference.  Reports an error at `at` (may be SPAN_NONE) and returns false
 * if it does not fit. */
bool exec_feed(Executor *ex, const char *name, Tensor *t, const char *what);
/* Forgets the symbolic dims feeding bound: the next feeds (a new batch,
 * maybe smaller) bind them afresh. */
void exec_unbind(Executor *ex);
/* Runs the startup block (once) and then block 0.  0 or -1. */
int exec_run(Executor *ex);
/* Runs the startup block if it has not run (initializers, defaults). */
int exec_startup(Executor *ex);
/* Runs ops [first, last) of block 0 (last -1: to the end), after the
 * startup block: a training step runs them all, an evaluation only the
 * forward ones. */
int exec_run_range(Executor *ex, int first, int last);
/* Runs only the ops of block 0 that variable var depends on (and print
 * ops): what predict needs, without the labels the loss would want. */
int exec_run_for(Executor *ex, const char *var);
/* Puts a value (a reference is taken) in variable `var` of block 0 without
 * the checks of exec_feed, and runs block 0 from op `first` on, without the
 * startup block: how the tape's backward runs over the tape's values. */
void exec_preload(Executor *ex, const char *var, Tensor *t);
int exec_run_from(Executor *ex, int first);
/* The value of a variable of block 0 (or an exported script name) after a
 * run; borrowed. */
Tensor *exec_value(Executor *ex, const char *name);
Tape *exec_tape(Executor *ex);
int64_t exec_ops_run(const Executor *ex);   /* ops executed so far */
/* Asks a running executor to stop at the next op (safe in a signal handler). */
void exec_interrupt(void);
/* Whether the last run was stopped by exec_interrupt (Ctrl-C). */
bool exec_interrupted(void);
Rng *exec_rng(Executor *ex);

/* Per-op-type timing (netrun time). */
typedef struct OpTiming {
  const char *type;
  int64_t calls;
  double seconds;
} OpTiming;
const OpTiming *exec_timings(Executor *ex, int *n);

/* ---- the kernel interface ---------------------------------------------------- */

typedef struct ExecCtx ExecCtx;

int ctx_in_count(ExecCtx *c, int slot);
Tensor *ctx_in(ExecCtx *c, int slot);            /* the first (often only) value; NULL if absent */
Tensor *ctx_in_at(ExecCtx *c, int slot, int i);
int ctx_out_count(ExecCtx *c, int slot);
Tensor *ctx_out(ExecCtx *c, int slot);           /* pre-allocated output */
Tensor *ctx_out_at(ExecCtx *c, int slot, int i);
/* The dtype and shape inference gave output slot[i] (for OP_NO_PREALLOC ops). */
const VarDesc *ctx_out_desc(ExecCtx *c, int slot, int i);
/* Sets output slot[i] to t, taking the caller's reference. */
void ctx_set_out(ExecCtx *c, int slot, int i, Tensor *t);
const OpDesc *ctx_op(ExecCtx *c);
const AttrValue *ctx_attr(ExecCtx *c, const char *name);   /* with proto defaults */
int64_t ctx_attr_i(ExecCtx *c, const char *name);
double ctx_attr_f(ExecCtx *c, const char *name);
bool ctx_attr_b(ExecCtx *c, const char *name);
Rng *ctx_rng(ExecCtx *c);
FILE *ctx_stream(ExecCtx *c);
int ctx_precision(ExecCtx *c);
/* Reports a runtime error at the op's source position ("OPTYPE: MESSAGE")
 * and returns -1. */
int ctx_fail(ExecCtx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
