/* control.c — ops that own sub-blocks: while and conditional_block.
 *
 * Their bodies are blocks of the program (lower.c builds them):
 *
 *   {Out=[h.3, i.3]} = while(Cond=[c], X=[h, i], Input=[W]) {sub_block=1}
 *
 * runs block 1 while the condition holds.  A turn starts with the block's
 * args (one per carried value, X the first turn's) and yields its results:
 * one per carried value, then the condition for the next turn.  Out is the
 * carried values after the last turn; Input lists every outer variable the
 * body reads, so dependency walks need not enter the block.
 *
 *   {Out=[y.1]} = conditional_block(Cond=[c], Input=[x]) {sub_block=2, else_block=3}
 *
 * runs block 2 if Cond holds, else block 3; Out[k] is the taken block's
 * result k.  Every if gets an else block (empty when the script has none,
 * its results then being the values from before the if).
 *
 * Their kernels run those blocks through the control-flow kernel interface
 * (exec.h): a frame per turn or branch, kept for the backward; their grad
 * makers build a grad block per body through the grad sub-block calls of
 * the grad-maker interface (backward.h), run by while_grad and
 * conditional_block_grad over the kept turns. */
#include "autodiff/backward.h"
#include "exec/exec.h"
#include "ir/names.h"

#include <string.h>

static bool check_cond(InferCtx *c) {
  const VarDesc *cond = reg_infer_in(c, "Cond", 0);
  char buf[128];
  if (cond->dtype != DT_BOOL)
    return reg_infer_fail(c, "the condition must be a bool scalar, got %s", dtype_name(cond->dtype));
  int64_t n = shape_numel(&cond->shape);
  if (cond->shape.rank >= 0 && n >= 0 && n != 1)
    return reg_infer_fail(c, "the condition must be a scalar, got shape %s",
                          shape_str(&cond->shape, buf, sizeof buf));
  return true;
}

static const VarDesc *result(InferCtx *c, const char *attr, int k) {
  const Block *b = prog_block(c->prog, (int)reg_infer_attr_i(c, attr));
  if (!b || k >= b->nresults) return NULL;
  return prog_var(c->prog, b->results[k]);
}

/* Out k of a while or a conditional_block: the shape both A and B fit
 * (a malformed one is named as WHAT, its out as ITEM k). */
static bool infer_out(InferCtx *c, int k, const VarDesc *a, const VarDesc *b, const char *what, const char *item) {
  if (!a || !b) return reg_infer_fail(c, "malformed %s (%s %d)", what, item, k);
  Shape s = shape_join(&a->shape, &b->shape);
  reg_infer_set(c, "Out", k, a->dtype, &s);
  return true;
}

static bool infer_while(InferCtx *c) {
  if (!check_cond(c)) return false;
  for (int k = 0; k < reg_infer_out_count(c, "Out"); k++)
    if (!infer_out(c, k, reg_infer_in(c, "X", k), result(c, "sub_block", k), "loop", "carried value")) return false;
  return true;
}

static bool infer_conditional(InferCtx *c) {
  if (!check_cond(c)) return false;
  for (int k = 0; k < reg_infer_out_count(c, "Out"); k++)
    if (!infer_out(c, k, result(c, "sub_block", k), result(c, "else_block", k), "branch", "result")) return false;
  return true;
}

/* while_grad and conditional_block_grad: each gradient has its value's shape. */
static bool infer_control_grad(InferCtx *c) {
  for (int k = 0; k < reg_infer_out_count(c, "X@GRAD"); k++) {
    const VarDesc *x = reg_infer_in(c, "X", k);
    if (x) reg_infer_set(c, "X@GRAD", k, x->dtype, &x->shape);
  }
  for (int j = 0; j < reg_infer_out_count(c, "Input@GRAD"); j++) {
    const VarDesc *x = reg_infer_in(c, "Input", j);
    if (x) reg_infer_set(c, "Input@GRAD", j, x->dtype, &x->shape);
  }
  return true;
}

/* ---- kernels ------------------------------------------------------------------------
 * They run the op's blocks through the control-flow kernel interface
 * (exec.h): a while body gets a frame per turn, kept for the backward. */

static bool truth(const Tensor *t) { return t->numel > 0 && tensor_get(t, 0) != 0; }

/* while: runs the body while the condition holds, one frame per turn. */
static int k_while(ExecCtx *c) {
  int nc = exec_ctx_nargs(c, 0);
  Tensor *cond = exec_ctx_in(c, 0);
  exec_ctx_clear_turns(c);
  Tensor **carried = mem_calloc((size_t)nc + 1, sizeof *carried);
  for (int k = 0; k < nc; k++) carried[k] = tensor_ref(exec_ctx_in_at(c, 1, k));
  bool go = truth(cond);
  int rc = 0;
  int64_t max_steps = exec_ctx_max_steps(c);
  for (int64_t turn = 0; go; turn++) {
    if (turn >= max_steps) {
      rc = exec_ctx_fail(c, "the loop ran %lld turns without ending (the limit is --max-steps=%lld)", (long long)turn,
                         (long long)max_steps);
      break;
    }
    if (exec_interrupted()) {
      rc = exec_ctx_fail(c, "interrupted after %lld turn%s", (long long)turn, turn == 1 ? "" : "s");
      break;
    }
    ExecFrame *step = exec_ctx_frame_new(c, 0, exec_ctx_frame(c), exec_ctx_turn_suffix(c, turn));
    for (int k = 0; k < nc; k++) {
      exec_ctx_frame_set_arg(c, step, 0, k, carried[k]);
      carried[k] = NULL;
    }
    rc = exec_ctx_run_turn(c, step, turn);
    if (rc == 0) {
      for (int k = 0; k < nc; k++) carried[k] = tensor_ref(exec_ctx_frame_result(c, step, 0, k));
      Tensor *t = exec_ctx_frame_result(c, step, 0, nc);
      go = t && truth(t);
    }
    if (rc == 0) exec_ctx_keep_turn(c, step);
    else exec_ctx_frame_free(step);
    if (rc < 0) break;
  }
  for (int k = 0; k < nc; k++) {
    if (rc == 0) exec_ctx_set_out(c, 0, k, carried[k]);
    else tensor_unref(carried[k]);
  }
  mem_free(carried);
  return rc;
}

/* conditional_block: runs the then or the else block in a frame of its own. */
static int k_conditional(ExecCtx *c) {
  int which = truth(exec_ctx_in(c, 0)) ? 0 : 1;
  exec_ctx_clear_turns(c);
  ExecFrame *f = exec_ctx_frame(c), *br = exec_ctx_frame_new(c, which, f, exec_ctx_frame_suffix(f));
  int rc = exec_ctx_run_block(c, br);
  int no = exec_ctx_out_count(c, 0);
  for (int k = 0; rc == 0 && k < no; k++) {
    exec_ctx_set_out(c, 0, k, tensor_ref(exec_ctx_frame_result(c, br, which, k)));
    if (!exec_ctx_out_at(c, 0, k)) rc = exec_ctx_fail(c, "internal error: result %d has no value", k);
  }
  if (rc < 0)
    for (int k = 0; k < no; k++) exec_ctx_set_out(c, 0, k, NULL);
  if (rc == 0) exec_ctx_keep_turn(c, br);
  else exec_ctx_frame_free(br);
  return rc;
}

static Tensor *zeros_like(const Tensor *t) { return tensor_zeros(t->dtype, t->rank, t->shape); }

/* acc += t (same shapes), or acc = copy of t. */
static Tensor *accumulate(Tensor *acc, Tensor *t) {
  if (!acc) return tensor_copy(t);
  if (acc->dtype != DT_F32 || t->dtype != DT_F32) {   /* f64: through doubles */
    for (int64_t i = 0; i < acc->numel; i++) tensor_set(acc, i, tensor_get(acc, i) + tensor_get(t, i));
    return acc;
  }
  float *a = tensor_f32(acc);
  const float *b = tensor_f32(t);
  for (int64_t i = 0; i < acc->numel; i++) a[i] += b[i];
  return acc;
}

/* With the tape on, the parts a while_grad adds up: per outer value, each
 * turn's gradient (a reference) and its name on the tape. */
typedef struct Parts {
  bool on;
  Tensor **t;
  const char **names;
  int *n;
  int nsteps;
} Parts;

static void parts_add(ExecCtx *c, Parts *ps, int j, Tensor *r, ExecFrame *gf) {
  if (!ps->on) return;
  int k = ps->n[j]++;
  ps->t[j * ps->nsteps + k] = tensor_ref(r);
  ps->names[j * ps->nsteps + k] = exec_ctx_tape_name(c, exec_ctx_block(c, 0)->results[exec_ctx_in_count(c, 0) + j],
                                                     exec_ctx_frame_suffix(gf));
}

/* Records each sum made (slot 1: Input@GRAD) and drops the parts. */
static void parts_free(ExecCtx *c, Parts *ps, Tensor **acc, int ncap, bool record) {
  if (!ps->on) return;
  for (int j = 0; j < ncap; j++) {
    Tensor **t = ps->t + j * ps->nsteps;
    if (record && acc[j] && exec_ctx_out_wanted(c, 1, j))
      exec_ctx_tape_sum(c, 1, j, t, ps->names + j * ps->nsteps, ps->n[j], acc[j]);
    for (int k = 0; k < ps->n[j]; k++) tensor_unref(t[k]);
  }
  mem_free(ps->t);
  mem_free(ps->names);
  mem_free(ps->n);
}

/* while_grad: the body's grad block, run over the saved turns last first;
 * each turn's frame is the child of that turn's forward frame, so the
 * grad ops read the values of that turn.  The block's args after the
 * carried gradients (a while_grad's own grad block) get Seed, the same
 * every turn.  Its frames are kept when a second backward's while_grad
 * runs over them.  On the tape, a turn's grad ops are recorded as they
 * run (named with the forward turn's suffix) and the sums over turns as
 * add_n ops, so the tape's backward differentiates them like any ops. */
static int k_while_grad(ExecCtx *c) {
  int nc = exec_ctx_in_count(c, 0), ncap = exec_ctx_in_count(c, 2), nseed = exec_ctx_in_count(c, 3);
  ExecFrame **steps;
  int nsteps;
  if (!exec_ctx_kept_turns(c, &steps, &nsteps)) return exec_ctx_fail(c, "internal error: the loop's turns were not kept");
  exec_ctx_clear_turns(c);
  Tensor **g = mem_calloc((size_t)nc + 1, sizeof *g), **acc = mem_calloc((size_t)ncap + 1, sizeof *acc);
  Parts ps = {.on = exec_ctx_options(c)->tape && ncap > 0 && nsteps > 0, .nsteps = nsteps};
  if (ps.on) {
    ps.t = mem_calloc((size_t)(ncap * nsteps) + 1, sizeof *ps.t);
    ps.names = mem_calloc((size_t)(ncap * nsteps) + 1, sizeof *ps.names);
    ps.n = mem_calloc((size_t)ncap + 1, sizeof *ps.n);
  }
  /* A carried gradient with no Out@GRAD starts at zero (a second backward's
   * while_grad, when the first gave the loop's initial value none). */
  for (int k = 0; k < nc; k++) {
    Tensor *x = exec_ctx_in_at(c, 1, k);
    g[k] = exec_ctx_in_at(c, 0, k) ? tensor_ref(exec_ctx_in_at(c, 0, k)) : x && dtype_is_float(x->dtype) ? zeros_like(x) : NULL;
  }
  int rc = 0;
  for (int t = nsteps - 1; t >= 0 && rc == 0; t--) {
    ExecFrame *gf = exec_ctx_frame_new(c, 0, steps[t], exec_ctx_frame_suffix(steps[t]));
    for (int k = 0; k < nc; k++) {
      exec_ctx_frame_set_arg(c, gf, 0, k, g[k]);
      g[k] = NULL;
    }
    for (int j = 0; j < nseed && nc + j < exec_ctx_nargs(c, 0); j++)
      if (exec_ctx_in_at(c, 3, j)) exec_ctx_frame_set_arg(c, gf, 0, nc + j, tensor_ref(exec_ctx_in_at(c, 3, j)));
    rc = exec_ctx_run_block(c, gf);
    for (int k = 0; rc == 0 && k < nc; k++) {
      Tensor *r = exec_ctx_frame_result(c, gf, 0, k);
      g[k] = r ? tensor_ref(r) : NULL;
    }
    for (int j = 0; rc == 0 && j < ncap; j++) {
      Tensor *r = exec_ctx_frame_result(c, gf, 0, nc + j);
      if (r) acc[j] = accumulate(acc[j], r), parts_add(c, &ps, j, r, gf);
    }
    if (rc == 0) exec_ctx_keep_turn(c, gf);
    else exec_ctx_frame_free(gf);
  }
  parts_free(c, &ps, acc, ncap, rc == 0);
  for (int k = 0; k < nc; k++) {
    if (rc == 0 && exec_ctx_out_wanted(c, 0, k)) exec_ctx_set_out(c, 0, k, g[k] ? g[k] : zeros_like(exec_ctx_in_at(c, 1, k)));
    else tensor_unref(g[k]);
  }
  for (int j = 0; j < ncap; j++) {
    if (rc == 0 && exec_ctx_out_wanted(c, 1, j)) exec_ctx_set_out(c, 1, j, acc[j] ? acc[j] : zeros_like(exec_ctx_in_at(c, 2, j)));
    else tensor_unref(acc[j]);
  }
  mem_free(g);
  mem_free(acc);
  return rc;
}

/* conditional_block_grad: the grad block of the branch taken; zeros for
 * what the branch did not touch. */
static int k_conditional_grad(ExecCtx *c) {
  int ncap = exec_ctx_in_count(c, 1), no = exec_ctx_in_count(c, 2);
  ExecFrame **steps;
  int nsteps;
  if (!exec_ctx_kept_turns(c, &steps, &nsteps) || nsteps == 0)
    return exec_ctx_fail(c, "internal error: the branch taken was not kept");
  ExecFrame *br = steps[nsteps - 1];
  int which = exec_ctx_frame_block(br) == exec_ctx_block(c, 0)->fwd_block ? 0 : 1;
  exec_ctx_clear_turns(c);
  ExecFrame *gf = exec_ctx_frame_new(c, which, br, exec_ctx_frame_suffix(br));
  for (int k = 0; k < no && k < exec_ctx_nargs(c, which); k++) exec_ctx_frame_set_arg(c, gf, which, k, tensor_ref(exec_ctx_in_at(c, 2, k)));
  int rc = exec_ctx_run_block(c, gf);
  for (int j = 0; rc == 0 && j < ncap; j++) {
    Tensor *r = exec_ctx_frame_result(c, gf, which, j);
    if (exec_ctx_out_wanted(c, 0, j)) exec_ctx_set_out(c, 0, j, r ? tensor_ref(r) : zeros_like(exec_ctx_in_at(c, 1, j)));
  }
  if (rc == 0) exec_ctx_keep_turn(c, gf);   /* for a second backward's conditional_block_grad */
  else exec_ctx_frame_free(gf);
  return rc;
}

/* ---- grad makers ------------------------------------------------------------------------ */

static Block *own_block(GradCtx *c, const char *attr) {
  const AttrValue *a = bwd_op_attr(c, attr);
  return a ? prog_block(bwd_prog(c), (int)a->u.i) : NULL;
}

/* The grad block gb's targets for the forward op's n outer values
 * ("Input"): each one's gradient, or NULL if it needs none; n. */
static int input_targets(GradCtx *c, Block *gb, const char **targets, int n) {
  for (int j = 0; j < n; j++) {
    const char *v = bwd_op_in(c, "Input", j);
    targets[j] = bwd_needs_grad(c, v) ? bwd_sub_grad(c, gb, v) : NULL;
  }
  return n;
}

/* Slot Input of grad op g: the forward op's n outer values. */
static void emit_inputs(GradCtx *c, OpDesc *g, int n) {
  op_add_input(bwd_prog(c), g, "Input");
  for (int j = 0; j < n; j++) bwd_emit_in(c, g, "Input", bwd_op_in(c, "Input", j));
}

/* Slot SLOT@GRAD of grad op g: the gradients of the forward op's n inputs
 * SLOT, empty where there is none (or where carry says none is carried). */
static void emit_input_grads(GradCtx *c, OpDesc *g, const char *slot, int n, const bool *carry) {
  const char *gslot = arena_printf(bwd_prog(c)->arena, "%s@GRAD", slot);
  op_add_output(bwd_prog(c), g, gslot);
  for (int k = 0; k < n; k++) {
    const char *d = !carry || carry[k] ? bwd_op_in_grad(c, slot, k) : NULL;
    bwd_emit_out(c, g, gslot, d ? d : NAME_EMPTY);
  }
}

/* while: a grad block over the body, run turn by turn in reverse. */
static bool g_while(GradCtx *c) {
  Program *p = bwd_prog(c);
  const Block *s = own_block(c, "sub_block");
  const OpDesc *op = bwd_op_fwd(c);
  if (!s || !op_input(op, "X") || !op_output(op, "Out")) return bwd_fail(c, "internal error: malformed while op");
  int nc = s->nargs;
  Block *gs = bwd_sub_begin(c, s);
  if (!gs) return false;
  /* The grad block starts from the gradients of a turn's results and ends
   * with those of its args and of the outer values it read. */
  int ncap = bwd_op_nin(c, "Input");
  const char **args = arena_alloc(p->arena, sizeof *args * (size_t)(nc + 1));
  const char **targets = arena_alloc(p->arena, sizeof *targets * (size_t)(nc + ncap + 1));
  int nt = 0;
  /* A carried value with no gradient (a counter) has none in any turn. */
  bool *carry = arena_alloc(p->arena, sizeof *carry * (size_t)(nc + 1));
  for (int k = 0; k < nc; k++) carry[k] = bwd_needs_grad(c, s->args[k]) || bwd_needs_grad(c, s->results[k]);
  for (int k = 0; k < nc; k++) args[k] = carry[k] ? bwd_sub_grad(c, gs, s->results[k]) : NAME_EMPTY;
  for (int k = 0; k < nc; k++) targets[nt++] = carry[k] ? bwd_sub_grad(c, gs, s->args[k]) : NULL;
  nt += input_targets(c, gs, targets + nt, ncap);
  bwd_sub_end(c, gs, targets, nt, args, nc);
  OpDesc *w = bwd_emit(c, "while_grad");
  for (int k = 0; k < nc; k++) bwd_emit_in(c, w, "Out@GRAD", carry[k] ? bwd_op_out_grad(c, "Out", k) : NAME_EMPTY);
  op_add_input(p, w, "Out@GRAD");
  op_add_input(p, w, "X");
  for (int k = 0; k < nc; k++) bwd_emit_in(c, w, "X", bwd_op_in(c, "X", k));
  emit_inputs(c, w, ncap);
  emit_input_grads(c, w, "X", nc, carry);
  emit_input_grads(c, w, "Input", ncap, NULL);
  bwd_emit_attr(c, w, "sub_block", attr_block(gs->idx));
  return true;
}

/* if: a grad block per branch; the taken branch's runs. */
static bool g_conditional(GradCtx *c) {
  Program *p = bwd_prog(c);
  int ncap = bwd_op_nin(c, "Input"), no = bwd_op_nout(c, "Out");
  int gidx[2];
  const char *attrs[2] = {"sub_block", "else_block"};
  for (int br = 0; br < 2; br++) {
    const Block *b = own_block(c, attrs[br]);
    if (!b) return bwd_fail(c, "internal error: malformed conditional_block op");
    Block *gb = bwd_sub_begin(c, b);
    if (!gb) return false;
    gidx[br] = gb->idx;
    const char **args = arena_alloc(p->arena, sizeof *args * (size_t)(no + 1));
    const char **targets = arena_alloc(p->arena, sizeof *targets * (size_t)(ncap + 1));
    for (int k = 0; k < no; k++) args[k] = bwd_sub_grad(c, gb, b->results[k]);
    bwd_sub_end(c, gb, targets, input_targets(c, gb, targets, ncap), args, no);
  }
  OpDesc *g = bwd_emit(c, "conditional_block_grad");
  bwd_emit_in(c, g, "Cond", bwd_op_in(c, "Cond", 0));
  emit_inputs(c, g, ncap);
  op_add_input(p, g, "Out@GRAD");
  for (int k = 0; k < no; k++) bwd_emit_in(c, g, "Out@GRAD", bwd_op_out_grad(c, "Out", k));
  emit_input_grads(c, g, "Input", ncap, NULL);
  bwd_emit_attr(c, g, "sub_block", attr_block(gidx[0]));
  bwd_emit_attr(c, g, "else_block", attr_block(gidx[1]));
  return true;
}

/* ---- second backward: the gradients of while_grad and conditional_block_grad ----------
 * while_grad ran its grad block G over the turns last first; its own
 * gradient is another while_grad over G's grad block, run over G's kept
 * frames last first (the forward's turns in order), each frame the child
 * of that turn's frame of G.  Its carried values are the gradients of G's
 * carried args; its Seed, the gradients of while_grad's Input@GRAD (the
 * same for every turn, as those sums are of every turn).  What G read of
 * the forward turn gets per-turn gradients, which the second backward
 * hands to the loop's own grad block (backward.c, take_injects). */
static bool g_while_grad(GradCtx *c) {
  Program *p = bwd_prog(c);
  const Block *s = own_block(c, "sub_block");
  int nc = bwd_op_nin(c, "Out@GRAD"), ncap = bwd_op_nin(c, "Input");
  if (!s || s->nargs != nc || s->nresults < nc + ncap) return bwd_fail(c, "internal error: malformed while_grad op");
  Block *gs = bwd_sub_begin(c, s);
  if (!gs) return false;
  bool *carry = arena_alloc(p->arena, sizeof *carry * (size_t)(nc + 1));
  const char **args = arena_alloc(p->arena, sizeof *args * (size_t)(nc + ncap + 1));
  const char **seeds = arena_alloc(p->arena, sizeof *seeds * (size_t)(ncap + 1));
  const char **targets = arena_alloc(p->arena, sizeof *targets * (size_t)(nc + ncap + 1));
  for (int k = 0; k < nc; k++) {
    carry[k] = bwd_needs_grad(c, s->args[k]) || bwd_needs_grad(c, s->results[k]);
    args[k] = carry[k] ? bwd_sub_grad(c, gs, s->results[k]) : NAME_EMPTY;
    targets[k] = carry[k] ? bwd_sub_grad(c, gs, s->args[k]) : NULL;
  }
  for (int j = 0; j < ncap; j++) {
    const char *r = s->results[nc + j], *sum = bwd_op_out(c, "Input@GRAD", j);
    bool seeded = bwd_needs_grad(c, r) && !name_is_empty(sum);
    args[nc + j] = seeded ? bwd_sub_grad(c, gs, r) : NAME_EMPTY;
    seeds[j] = seeded ? bwd_op_out_grad(c, "Input@GRAD", j) : NAME_EMPTY;
  }
  int nt = nc + input_targets(c, gs, targets + nc, ncap);
  bwd_sub_end(c, gs, targets, nt, args, nc + ncap);
  OpDesc *w = bwd_emit(c, "while_grad");
  for (int k = 0; k < nc; k++) {
    const char *xg = bwd_op_out(c, "X@GRAD", k);
    bwd_emit_in(c, w, "Out@GRAD", carry[k] && !name_is_empty(xg) ? bwd_op_out_grad(c, "X@GRAD", k) : NAME_EMPTY);
    bwd_emit_in(c, w, "X", bwd_op_in(c, "Out@GRAD", k));
    const char *d = carry[k] ? bwd_op_in_grad(c, "Out@GRAD", k) : NULL;
    bwd_emit_out(c, w, "X@GRAD", d ? d : NAME_EMPTY);
  }
  emit_inputs(c, w, ncap);
  op_add_input(p, w, "Seed");
  for (int j = 0; j < ncap; j++) bwd_emit_in(c, w, "Seed", seeds[j]);
  emit_input_grads(c, w, "Input", ncap, NULL);
  bwd_emit_attr(c, w, "sub_block", attr_block(gs->idx));
  return true;
}

/* conditional_block_grad ran the grad block of the branch taken, its args
 * the gradients Out@GRAD, its results Input@GRAD; its gradient is another
 * conditional_block_grad over those blocks' grad blocks, whose args are
 * the gradients of Input@GRAD and whose results are those of Out@GRAD,
 * then of Input (its own Input lists both). */
static bool g_conditional_grad(GradCtx *c) {
  Program *p = bwd_prog(c);
  int ncap = bwd_op_nin(c, "Input"), no = bwd_op_nin(c, "Out@GRAD");
  int gidx[2];
  const char *attrs[2] = {"sub_block", "else_block"};
  for (int br = 0; br < 2; br++) {
    const Block *b = own_block(c, attrs[br]);
    if (!b || b->nargs > no || b->nresults > ncap) return bwd_fail(c, "internal error: malformed conditional_block_grad op");
    Block *gb = bwd_sub_begin(c, b);
    if (!gb) return false;
    gidx[br] = gb->idx;
    const char **args = arena_alloc(p->arena, sizeof *args * (size_t)(ncap + 1));
    const char **targets = arena_alloc(p->arena, sizeof *targets * (size_t)(no + ncap + 1));
    for (int j = 0; j < b->nresults; j++) args[j] = bwd_sub_grad(c, gb, b->results[j]);
    for (int k = 0; k < no; k++)
      targets[k] = k < b->nargs && bwd_needs_grad(c, b->args[k]) ? bwd_sub_grad(c, gb, b->args[k]) : NULL;
    int nt = no + input_targets(c, gb, targets + no, ncap);
    bwd_sub_end(c, gb, targets, nt, args, b->nresults);
  }
  OpDesc *g = bwd_emit(c, "conditional_block_grad");
  bwd_emit_in(c, g, "Cond", bwd_op_in(c, "Cond", 0));
  op_add_input(p, g, "Input");
  for (int k = 0; k < no; k++) bwd_emit_in(c, g, "Input", bwd_op_in(c, "Out@GRAD", k));
  for (int j = 0; j < ncap; j++) bwd_emit_in(c, g, "Input", bwd_op_in(c, "Input", j));
  op_add_input(p, g, "Out@GRAD");
  for (int j = 0; j < ncap; j++) {   /* an input the first gave no gradient (@EMPTY@) has none to read */
    const char *og = bwd_op_out(c, "Input@GRAD", j);
    bwd_emit_in(c, g, "Out@GRAD", og && !name_is_empty(og) ? bwd_op_out_grad(c, "Input@GRAD", j) : NAME_EMPTY);
  }
  op_add_output(p, g, "Input@GRAD");
  for (int k = 0; k < no; k++) {
    const char *d = bwd_op_in_grad(c, "Out@GRAD", k);
    bwd_emit_out(c, g, "Input@GRAD", d ? d : NAME_EMPTY);
  }
  for (int j = 0; j < ncap; j++) {
    const char *d = bwd_op_in_grad(c, "Input", j);
    bwd_emit_out(c, g, "Input@GRAD", d ? d : NAME_EMPTY);
  }
  bwd_emit_attr(c, g, "sub_block", attr_block(gidx[0]));
  bwd_emit_attr(c, g, "else_block", attr_block(gidx[1]));
  return true;
}

OpProto op_table_control[] = {
    {.type = "while", .doc = "runs sub_block while Cond holds, carrying X from turn to turn",
     .in = {{"Cond", 0, "the condition before the first turn (bool scalar)"},
            {"X", SLOT_LIST | SLOT_OPTIONAL, "initial values of the carried variables"},
            {"Input", SLOT_LIST | SLOT_OPTIONAL, "outer variables the body reads"}},
     .out = {{"Out", SLOT_LIST, "carried values after the last turn"}},
     .attrs = {{"sub_block", ATTR_BLOCK, NULL, NULL, "the loop body"}},
     .infer = infer_while, .kernel = k_while, .grad_kind = GRAD_DEDICATED, .grad = g_while, .flags = OP_CONTROL | OP_LOOP | OP_INTERNAL},
    {.type = "conditional_block", .doc = "runs sub_block if Cond holds, else else_block",
     .in = {{"Cond", 0, "the condition (bool scalar)"},
            {"Input", SLOT_LIST | SLOT_OPTIONAL, "outer variables the branches read"}},
     .out = {{"Out", SLOT_LIST, "the taken branch's results"}},
     .attrs = {{"sub_block", ATTR_BLOCK, NULL, NULL, "the branch run when Cond holds"},
               {"else_block", ATTR_BLOCK, NULL, NULL, "the branch run otherwise"}},
     .infer = infer_conditional, .kernel = k_conditional, .grad_kind = GRAD_DEDICATED, .grad = g_conditional, .flags = OP_CONTROL | OP_INTERNAL},
    {.type = "while_grad",
     .doc = "runs sub_block (the body's grad block) over the loop's saved turns, last turn first",
     .in = {{"Out@GRAD", SLOT_LIST, "gradients of the loop's outputs"},
            {"X", SLOT_LIST | SLOT_OPTIONAL, "the loop's initial carried values"},
            {"Input", SLOT_LIST | SLOT_OPTIONAL, "the outer values the body read"},
            {"Seed", SLOT_LIST | SLOT_OPTIONAL,
             "a while_grad's gradient: what its grad block's args after the carried ones get every turn"}},
     .out = {{"X@GRAD", SLOT_LIST, "gradients of the initial carried values"},
             {"Input@GRAD", SLOT_LIST, "gradients of the outer values, summed over turns"}},
     .attrs = {{"sub_block", ATTR_BLOCK, NULL, NULL, "the body's grad block"}},
     .infer = infer_control_grad, .kernel = k_while_grad, .grad_kind = GRAD_DEDICATED, .grad = g_while_grad,
     .flags = OP_CONTROL | OP_KEPT_TURNS | OP_INTERNAL},
    {.type = "conditional_block_grad",
     .doc = "runs the grad block of the branch its conditional_block took",
     .in = {{"Cond", 0, "the forward condition"},
            {"Input", SLOT_LIST | SLOT_OPTIONAL, "the outer values the branches read"},
            {"Out@GRAD", SLOT_LIST, "gradients of the branch results"}},
     .out = {{"Input@GRAD", SLOT_LIST, "gradients of the outer values (zero from the branch not taken)"}},
     .attrs = {{"sub_block", ATTR_BLOCK, NULL, NULL, "the then branch's grad block"},
               {"else_block", ATTR_BLOCK, NULL, NULL, "the else branch's grad block"}},
     .infer = infer_control_grad, .kernel = k_conditional_grad, .grad_kind = GRAD_DEDICATED, .grad = g_conditional_grad,
     .flags = OP_CONTROL | OP_KEPT_TURNS | OP_INTERNAL},
    {0},
};
