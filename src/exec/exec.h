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
 * through the exec_ctx_* functions below, write the outputs, and return 0, or
 * exec_ctx_fail(...) (which reports a runtime error at the op's source and
 * returns -1).  Slots are addressed by their index in the op's proto.
 */
#ifndef NETRUN_EXEC_H
#define NETRUN_EXEC_H

#include "ir/registry.h"
#include "ir/tensor.h"

typedef struct Executor Executor;
typedef struct Tape Tape;

typedef struct ExecOptions {
  uint64_t seed;          /* --seed */
  int64_t max_steps;      /* --max-steps: turns one while loop may take */
  bool check_nan;         /* --check-nan: stop at the first op producing NaN/Inf */
  bool tape;              /* record the tape */
  bool keep_steps;        /* keep while step scopes (for the backward) */
  bool keep_all_steps;    /* and a grad op's, for a second backward entered
                             later (the REPL) */
  bool timing;            /* accumulate per-op-type times (netrun time) */
  bool fuse;              /* callers rewrite the program first (rewrite.h; on; --no-fuse) */
  int precision;          /* print(): digits after the point */
  FILE *out;              /* where print() writes */
} ExecOptions;

void exec_default_options(ExecOptions *o);
/* Whether an executor with options o runs the program rewritten by the
 * RW_FUSE rewrites (rewrite.h), which its callers make first: not with the
 * tape (which records each op), --check-nan (which reruns originals
 * anyway) or --no-fuse. */
bool exec_rewrite_wanted(const ExecOptions *o);

Executor *exec_new(Program *p, const ExecOptions *opt);
void exec_free(Executor *ex);
/* Feeds a value to input `name` (a script name or variable): checks dtype
 * and shape against the declaration and binds its symbolic dims.  Takes a
 * reference.  Returns false if it does not fit, the error reported at the
 * input's declaration and prefixed "WHAT: " (what: e.g. "--set x"). */
bool exec_feed(Executor *ex, const char *name, Tensor *t, const char *what);
/* Forgets the symbolic dims feeding bound: the next feeds (a new batch,
 * maybe smaller) bind them afresh. */
void exec_unbind(Executor *ex);
/* Turns --check-nan on or off from now on: the trainer reruns a step whose
 * loss is not finite with it on, to name the first op that made a NaN or
 * an infinity (fused ops then run as the ops they stand for). */
void exec_check_nan(Executor *ex, bool on);
/* fn (NULL: none) runs after each op of exec_run_range: the trainer's
 * dist_progress, which moves the gradients' sums in flight along. */
void exec_between(Executor *ex, void (*fn)(void));
/* Runs the startup block (once) and then block 0.  0 or -1. */
int exec_run(Executor *ex);
/* Runs under the memory plan (plan.h): after each op of block 0 that
 * exec_run_range or exec_run_for runs, and after each op of a sub-block
 * any run of the executor runs (a loop's turn, a branch, a grad block's
 * turn), the values that op read last are dropped, except the variables
 * named in keep[0..nkeep) (what the caller reads after a run) and those
 * exec_run_for is asked for, the inputs, parameters and states, and the
 * rest plan.h keeps.  exec_run_ops and exec_run_to drop no value of block
 * 0.  The plan covers the blocks the program has now (a block added later
 * runs without).
 * False, and no plan, when the environment variable NETRUN_NO_MEMORY_PLAN
 * is set (not empty). */
bool exec_use_plan(Executor *ex, const char *const *keep, int nkeep);
/* Runs the startup block if it has not run (initializers, defaults). */
int exec_startup(Executor *ex);
/* Runs ops [first, last) of block 0 (last -1: to the end), after the
 * startup block: a training step runs them all, an evaluation only the
 * forward ones. */
int exec_run_range(Executor *ex, int first, int last);
/* Runs, once, only the ops of block 0 that the variables vars[0..n)
 * depend on (and print ops): what predict needs, without the labels the
 * loss would want. */
int exec_run_for(Executor *ex, const char *const *vars, int n);
/* Puts a value (a reference is taken) in variable `var` of block 0 without
 * the checks of exec_feed, and runs block 0 from op `first` on, without the
 * startup block: how the tape's backward runs over the tape's values. */
void exec_preload(Executor *ex, const char *var, Tensor *t);
int exec_run_from(Executor *ex, int first);
/* Slot-level access to block 0's variables, for a caller that runs one
 * small program many times over different values (the tape's backward):
 * exec_slot finds a variable's slot once (-1: not in block 0), exec_set
 * stores a value (taking a reference of its own), exec_get reads one
 * (borrowed), exec_clear drops them all.  exec_run_ops runs ops [first,
 * last) of block 0 and nothing else: no startup, no input checks. */
int exec_slot(Executor *ex, const char *var);
void exec_set(Executor *ex, int slot, Tensor *t);
Tensor *exec_get(Executor *ex, int slot);
void exec_clear(Executor *ex);
int exec_run_ops(Executor *ex, int first, int last);
/* The value of a variable of block 0 (or an exported script name) after a
 * run; borrowed. */
Tensor *exec_value(Executor *ex, const char *name);
/* The value of a variable of block 0 (not looked up among the exports). */
Tensor *exec_var_value(Executor *ex, const char *var);
Tape *exec_tape(Executor *ex);
int64_t exec_ops_run(const Executor *ex);   /* ops executed so far */
/* Asks a running executor to stop at the next op (safe in a signal handler). */
void exec_interrupt(void);
/* Forgets an interrupt asked for before: the REPL, when a new entry is
 * read (exec_grow and exec_run_to keep one, so that Ctrl-C while an entry
 * is lowered still stops it). */
void exec_interrupt_reset(void);
/* Whether the last run was stopped by exec_interrupt (Ctrl-C). */
bool exec_interrupted(void);
Rng *exec_rng(Executor *ex);

/* For a kernel that runs a program of its own (an op defined in a script
 * runs its body): an executor over `sub` that draws from c's generator,
 * prints where c's prints, keeps c's limits, and records no tape.  Feed
 * its values with exec_preload, run block 0 with exec_run_child (sub has
 * no startup block), read results with exec_value, then exec_free it. */
Executor *exec_child(struct ExecCtx *c, Program *sub);
int exec_run_child(Executor *ex);

/* ---- a growing program (the REPL) --------------------------------------------
 * The REPL's program grows statement by statement, and one executor runs it
 * as it grows (its program holds no backward).  exec_grow prepares what
 * was added since the executor was made or last grown (blocks, ops,
 * variables), so that values can be fed; exec_run_to runs the startup ops
 * not run yet, then block 0's ops up to index `end`, each op once.  An op that reads a value that does
 * not exist — an input not fed and without a default, or a value computed
 * from one — is skipped, and its outputs wait for that input: the session
 * binds its names before data comes.  A print of such a value is an error.
 * exec_mark and exec_rollback undo a statement that failed: values, tape
 * entries, the generator's state and the ops prepared since the mark. */
void exec_grow(Executor *ex);
int exec_run_to(Executor *ex, int end);
/* The input a variable without a value waits for, or NULL. */
const char *exec_waits_for(Executor *ex, const char *var);
typedef struct ExecMark {
  int nblocks, nops, nstartup, nvars, ran, startup_ran, ntape, ndims;
  Rng rng;
  bool started;
} ExecMark;
void exec_mark(const Executor *ex, ExecMark *m);
void exec_rollback(Executor *ex, const ExecMark *m);

/* Per-op-type timing (netrun time). */
typedef struct OpTiming {
  const char *type;
  int64_t calls;
  double seconds;
} OpTiming;
const OpTiming *exec_timings(Executor *ex, int *n);
/* Zeroes the calls and times of every op type (untimed passes before). */
void exec_timings_reset(Executor *ex);

/* ---- the kernel interface ---------------------------------------------------- */

typedef struct ExecCtx ExecCtx;

int exec_ctx_in_count(ExecCtx *c, int slot);
Tensor *exec_ctx_in(ExecCtx *c, int slot);            /* the first (often only) value; NULL if absent */
Tensor *exec_ctx_in_at(ExecCtx *c, int slot, int i);
int exec_ctx_out_count(ExecCtx *c, int slot);
Tensor *exec_ctx_out(ExecCtx *c, int slot);           /* pre-allocated output */
Tensor *exec_ctx_out_at(ExecCtx *c, int slot, int i);
/* The dtype and shape inference gave output slot[i] (for OP_NO_PREALLOC ops). */
const VarDesc *exec_ctx_out_desc(ExecCtx *c, int slot, int i);
/* Sets output slot[i] to t, taking the caller's reference. */
void exec_ctx_set_out(ExecCtx *c, int slot, int i, Tensor *t);
const OpDesc *exec_ctx_op(ExecCtx *c);
const OpProto *exec_ctx_proto(ExecCtx *c);
const AttrValue *exec_ctx_attr(ExecCtx *c, const char *name);   /* with proto defaults */
int64_t exec_ctx_attr_i(ExecCtx *c, const char *name);
double exec_ctx_attr_f(ExecCtx *c, const char *name);
bool exec_ctx_attr_b(ExecCtx *c, const char *name);
Rng *exec_ctx_rng(ExecCtx *c);
FILE *exec_ctx_stream(ExecCtx *c);
int exec_ctx_precision(ExecCtx *c);
const ExecOptions *exec_ctx_options(ExecCtx *c);      /* the running executor's */
/* Reports a runtime error at the op's source position ("OPTYPE: MESSAGE")
 * and returns -1. */
int exec_ctx_fail(ExecCtx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- the control-flow kernel interface -------------------------------------------
 * The kernels of ops flagged OP_CONTROL (src/ops/control.c) run blocks of
 * the program.  No shape inference runs before them and no output is made
 * for them: they set each output with exec_ctx_set_out, and may leave unset one
 * nobody wants (exec_ctx_out_wanted: its variable is NAME_EMPTY); an input
 * named NAME_EMPTY reads as NULL.
 *
 * A block runs in a frame of its own (its scope), made with exec_ctx_frame_new
 * as the child of the op's frame (exec_ctx_frame) or of a kept turn's: its args
 * are set before exec_ctx_run_block, its results read after.  A forward control
 * op hands each turn's frame to exec_ctx_keep_turn, which keeps it for the
 * backward when the program has one (the grad op then finds them with
 * exec_ctx_kept_turns) and frees it otherwise.  `which` picks the op's block:
 * 0 its sub_block, 1 its else_block. */

typedef struct Frame ExecFrame;

ExecFrame *exec_ctx_frame(ExecCtx *c);
/* A frame for the op's block `which` under parent; suffix: the turn's
 * suffix for the tape's names (it must outlive the frame). */
ExecFrame *exec_ctx_frame_new(ExecCtx *c, int which, ExecFrame *parent, const char *suffix);
void exec_ctx_frame_free(ExecFrame *f);
const char *exec_ctx_frame_suffix(const ExecFrame *f);
/* The index of the program block a frame runs. */
int exec_ctx_frame_block(const ExecFrame *f);
/* The op's block `which` (NULL if it has none). */
const Block *exec_ctx_block(ExecCtx *c, int which);
int exec_ctx_nargs(ExecCtx *c, int which);
/* Sets arg k of a frame of block `which`, taking the caller's reference
 * (dropped if the block does not read that arg). */
void exec_ctx_frame_set_arg(ExecCtx *c, ExecFrame *f, int which, int k, Tensor *t);
/* Result k of a frame of block `which` after it ran (borrowed; NULL if
 * it has no value or the block has fewer results). */
Tensor *exec_ctx_frame_result(ExecCtx *c, ExecFrame *f, int which, int k);
/* Runs the ops of the frame's block in it: 0 or -1 (reported). */
int exec_ctx_run_block(ExecCtx *c, ExecFrame *f);
/* The same for turn `turn` of a loop: an op interrupted in it says which
 * turn of which loop. */
int exec_ctx_run_turn(ExecCtx *c, ExecFrame *f, int64_t turn);
/* Forgets the turns the op kept on its previous run. */
void exec_ctx_clear_turns(ExecCtx *c);
/* Keeps turn frame f for the backward, or frees it. */
void exec_ctx_keep_turn(ExecCtx *c, ExecFrame *f);
/* A grad op: the turn frames its forward op kept, first turn first (*n of
 * them); false if the forward op's frame is not found. */
bool exec_ctx_kept_turns(ExecCtx *c, ExecFrame ***turns, int *n);
/* The suffix naming turn `turn` of the op on the tape ("" with no tape). */
const char *exec_ctx_turn_suffix(ExecCtx *c, int64_t turn);
int64_t exec_ctx_max_steps(ExecCtx *c);      /* --max-steps */
bool exec_ctx_out_wanted(ExecCtx *c, int slot, int i);
/* With the tape on: records output slot[i], sum, as the add_n of the n
 * parts a kernel added up (a while_grad's per-turn gradients), each named
 * uniquely (names must outlive the tape: exec_ctx_turn_suffix's arena),
 * so that the tape's backward differentiates through the sum. */
void exec_ctx_tape_sum(ExecCtx *c, int slot, int i, Tensor *const *parts, const char *const *names, int n, Tensor *sum);
/* A name for the tape, NAME followed by SUFFIX, kept as long as the tape. */
const char *exec_ctx_tape_name(ExecCtx *c, const char *name, const char *suffix);

#endif
