/* backward.h — bwd_append and the grad-maker interface.
 *
 * bwd_append(loss, parameter_list, no_grad_set) extends a program with
 * the ops that compute gradients, as netrun-lang(5) THE BACKWARD PROGRAM
 * describes (Paddle's append_backward, whose name the docs use):
 *
 *   - loss@GRAD is seeded with fill_constant(1) (the loss must be a scalar);
 *   - ops are visited in reverse; an op on a path from a parameter (or a
 *     requested input) to the loss asks its grad maker for grad ops, which
 *     are appended to the same block (block 0) — a while or if op gets a
 *     grad block whose parent is its forward sub-block, built recursively,
 *     owned by a while_grad / conditional_block_grad op;
 *   - a gradient written by several grad ops is written to v@GRAD@RENAME@0,
 *     @1, ... and summed into v@GRAD by add_n;
 *   - a gradient that a kept grad op reads but nothing writes is made by
 *     fill_zeros_like; grad ops none of whose outputs is needed are dropped;
 *   - every new variable is declared with its dtype and shape (shape
 *     inference runs on each new op); a verify pass checks that every
 *     gradient is written before it is read.
 *
 * The same builder serves the tape: tape_program() turns the tape into a
 * flat block, and bwd_append builds its backward the same way.
 */
#ifndef NETRUN_BACKWARD_H
#define NETRUN_BACKWARD_H

#include "ir/names.h"
#include "ir/registry.h"

typedef struct GradPair {
  const char *param;
  const char *grad;
} GradPair;

typedef struct BackwardResult {
  GradPair *pairs;         /* in the order of parameter_list (arena) */
  int npairs;
  int first_grad_op;       /* index in block 0 of the first backward op */
} BackwardResult;

/* Builds the backward of `loss` (a variable or exported script name) with
 * respect to `params` (NULL: every parameter), skipping `no_grad` names.
 * Errors (a non-scalar loss, an unknown name, a gradient asked through an
 * op that has none) are reported at their source; returns false then. */
bool bwd_append(Program *p, const char *loss, const char *const *params, int nparams,
                     const char *const *no_grad, int nno_grad, BackwardResult *out);

/* The variable a loss or --wrt name stands for (a variable or an exported
 * script name of block 0): NULL after reporting why it cannot be one (no
 * such value; a loss that is not a float scalar; a wrt that is not float). */
const VarDesc *bwd_loss_var(Program *p, const char *loss);
const VarDesc *bwd_wrt_var(Program *p, const char *name);

/* The grad ops of the one op of p's block 0 (its index 0), for the tape's
 * backward: p declares the op's variables and OUT@GRAD for each output.
 * need lists the inputs (variable names, each once) whose gradients are
 * wanted.  The grad ops are appended to block 0; pieces[k] (npieces[k] of
 * them, 0 when the op gives need[k] no gradient) are the variables holding
 * parts of need[k]'s gradient, in the order they are written: their sum, in
 * that order, is the gradient.  False on error (reported). */
bool bwd_op_grads(Program *p, const char *const *need, int nneed, const char ***pieces, int *npieces);

/* A script's grad(y, wrt...) (netrun-lang(5) GRADIENTS IN SCRIPTS): the
 * backward of the ops block b holds now, from the scalar y to each wrt[i],
 * appended to b as bwd_append builds one, its gradient names suffixed by
 * the program's next level (@L1, @L2, ...).  grads[i] receives wrt[i]'s
 * gradient: zeros of its shape when y does not depend on it, which
 * depends[i] (when not NULL) tells: false then.  Errors (an
 * op with no gradient on the way; in a loop or branch body, a value read
 * from outside that depends on a wrt: reported at `at`) are reported;
 * false then. */
bool bwd_grad(Program *p, Block *b, const char *y, const char *const *wrt, int nwrt, Span at, const char **grads,
              bool *depends);

/* The vector-Jacobian product of block 0 of p (a program of its own, such
 * as the body of an op defined in a script): appends the grad ops that
 * turn gradients of the values outs[k], held by the declared variables
 * seeds[k], into gradients of wrt[i]; grads[i] receives the name of wrt[i]'s
 * gradient, or NULL when none flows to it.  Errors are reported. */
bool bwd_vjp(Program *p, const char *const *outs, const char *const *seeds, int nouts, const char *const *wrt,
             int nwrt, const char **grads);

/* ---- the grad-maker interface ---------------------------------------------------
 * A grad maker turns one forward op into the ops computing its inputs'
 * gradients.  It asks for names through these calls and emits op
 * descriptions; the builder declares every new variable, renames repeated
 * writes, inserts add_n and fill_zeros_like, and infers shapes. */

typedef struct GradCtx GradCtx;

/* The forward op's input/output variable names, by slot name. */
int bwd_op_nin(GradCtx *g, const char *slot);
const char *bwd_op_in(GradCtx *g, const char *slot, int i);
int bwd_op_nout(GradCtx *g, const char *slot);
const char *bwd_op_out(GradCtx *g, const char *slot, int i);
/* The gradient of forward input slot[i], or NULL when no gradient of it is
 * needed (no_grad, stop_gradient, an integer, not on a path to a
 * parameter): the maker emits nothing for it then. */
const char *bwd_op_in_grad(GradCtx *g, const char *slot, int i);
/* The gradient of forward output slot[i]: always a name (the builder makes
 * it zeros if nothing writes it). */
const char *bwd_op_out_grad(GradCtx *g, const char *slot, int i);
/* The forward op's attribute (with its proto default). */
const AttrValue *bwd_op_attr(GradCtx *g, const char *name);
const OpDesc *bwd_op_fwd(GradCtx *g);

/* Emits a new op of `type`; inputs, outputs and attributes are then added
 * with bwd_emit_in/bwd_emit_out/bwd_emit_attr.  Attributes the proto has defaults
 * for are filled when the op is finished. */
OpDesc *bwd_emit(GradCtx *g, const char *type);
void bwd_emit_in(GradCtx *g, OpDesc *op, const char *slot, const char *var);
void bwd_emit_out(GradCtx *g, OpDesc *op, const char *slot, const char *var);
void bwd_emit_attr(GradCtx *g, OpDesc *op, const char *name, AttrValue v);
/* Gives emitted op `op` every attribute its type declares that the forward
 * op has (or has a default for), with the forward op's value: a grad op's
 * maker re-emitting a forward or grad op of the same attributes. */
void bwd_emit_attrs(GradCtx *g, OpDesc *op);
/* A fresh name for an intermediate value of the grad computation. */
const char *bwd_temp(GradCtx *g);
/* A fresh stem for names of the grad computation: `base` or "base.K",
 * unused in the program and not handed out before, nor the stem of any
 * variable (so "STEM@GRAD"-style names built on it are fresh too). */
const char *bwd_fresh(GradCtx *g, const char *base);
Program *bwd_prog(GradCtx *g);
/* The block the grad ops go to (block 0, or the grad block of a loop or
 * branch body): the parent of any sub-block a maker adds. */
Block *bwd_grad_block(GradCtx *g);
/* Says that emitted op `grad` (a while_grad or conditional_block_grad) runs
 * over the turns of emitted op `fwd` rather than of the forward op: the
 * builder keeps fwd whenever it keeps grad and points grad at fwd's final
 * place in the block. */
void bwd_emit_link(GradCtx *g, OpDesc *grad, const OpDesc *fwd);

/* Reports an error at the forward op ("MESSAGE") and returns -1, for the
 * maker to return. */
int bwd_fail(GradCtx *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether forward variable v gets a gradient (see bwd_op_in_grad). */
bool bwd_needs_grad(GradCtx *g, const char *v);

/* Grad sub-blocks, for the makers of ops that own blocks (src/ops/control.c):
 * bwd_sub_begin adds the grad block of forward block fwd (a child of
 * bwd_grad_block) and fills it with the grad ops of fwd's ops, last first,
 * nested control ops included; NULL when that failed (reported).  Names of
 * gradients inside it come from bwd_sub_grad (v@GRAD, or per turn
 * v@GRAD@B<block> for a v from outside fwd).  bwd_sub_end finishes it as the
 * builder finishes every block of grad ops: args are the gradients the
 * block starts from (one per arg; NAME_EMPTY: none), targets the ones it
 * must end with (NULL: not wanted); ops no target needs are dropped,
 * repeated writes summed, gradients nothing wrote made zeros.  One
 * sub-block at a time: begin, then end, then the next. */
Block *bwd_sub_begin(GradCtx *g, const Block *fwd);
const char *bwd_sub_grad(GradCtx *g, const Block *gb, const char *v);
void bwd_sub_end(GradCtx *g, Block *gb, const char *const *targets, int ntargets, const char *const *args, int nargs);

/* The default maker of a GRAD_DEDICATED op whose proto leaves `grad` NULL:
 * one <type>_grad op wired by the slot-naming convention (X, Out and
 * Out@GRAD in as the grad op declares them; X@GRAD out for each needed
 * gradient; the attributes the grad op declares copied). */
int bwd_default_grad(GradCtx *g);

/* Composite helpers. */
/* dst = src summed over the dimensions where `like` was broadcast to src's
 * shape, src having the shape of the forward variable src_shape (an assign
 * when the shapes are the same). */
void bwd_reduce_like(GradCtx *g, const char *src, const char *src_shape, const char *like, const char *dst);
/* Where to compute a gradient of src_shape's shape that bwd_reduce_like
 * then brings to like's shape into dst: dst itself when no reduction is
 * needed (bwd_reduce_like of dst into dst emits nothing), else a fresh
 * temporary. */
const char *bwd_target(GradCtx *g, const char *src_shape, const char *like, const char *dst);
/* out = type(x, y) and out = type(x), as a script calls an op: x and y go
 * to the op's first input slots and out to its first output slot, in the
 * order its proto declares them (mul: X, Y -> Out; embedding: Ids, W ->
 * Out; max_pool2d_grad: X, Out@GRAD -> X@GRAD).  They return the op, for
 * a maker that adds attributes. */
OpDesc *bwd_emit2(GradCtx *g, const char *type, const char *x, const char *y, const char *out);
OpDesc *bwd_emit1(GradCtx *g, const char *type, const char *x, const char *out);

#endif
