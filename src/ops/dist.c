/* dist.c — the collective op of data-parallel training (src/exec/dist.h).
 *
 * allreduce stands in the training program between the backward and the
 * optimizer ops when the trainer runs on N > 1 ranks of an mpirun job
 * (rewrite.c puts one after each bucket of gradients).  Each rank scales
 * its gradients by its share of the step's examples (Weight: its batch's
 * examples over the step's, so 1/N when the batches are equal) and the
 * ranks sum the results in rank order: every rank gets the gradient of the
 * mean loss over the whole step's examples, the same bits everywhere.
 *
 * allreduce_start and allreduce_wait are the same sum in two halves, so
 * that it overlaps the rest of the backward (DDP's design): the start
 * stands right after the op that finishes the bucket's last gradient and
 * starts the sum (dist_sum_start); the wait stands before the first op
 * that reads one of them (the optimizers) and writes the sums back.  The
 * Handle between them names the sum in flight.  The same bits as
 * allreduce. */
#include "exec/dist.h"
#include "exec/exec.h"

#include <string.h>

/* Out[k] is X[k], each f32; false after an error. */
static bool pass_f32_list(InferCtx *c) {
  for (int k = 0; k < reg_infer_count(c, "X"); k++) {
    const VarDesc *x = reg_infer_in(c, "X", k);
    if (x->dtype != DT_F32) return reg_infer_fail(c, "X[%d] must be f32, got %s", k, dtype_name(x->dtype));
    reg_infer_set(c, "Out", k, DT_F32, &x->shape);
  }
  return true;
}

static bool infer_allreduce(InferCtx *c) {
  if (!pass_f32_list(c)) return false;
  const VarDesc *w = reg_infer_in(c, "Weight", 0);
  if (!w) return reg_infer_fail(c, "input Weight is missing");
  return reg_infer_need_float(c, "Weight", w);
}

/* The bucket's gradients, scaled, as one vector summed over the ranks and
 * written back in place (a bucket of one is summed where it is). */
static int k_allreduce(ExecCtx *c) {
  int n = exec_ctx_in_count(c, 0);
  float w = (float)tensor_get(exec_ctx_in(c, 1), 0);
  int64_t total = 0;
  for (int k = 0; k < n; k++) total += exec_ctx_in_at(c, 0, k)->numel;
  float *buf = n == 1 ? tensor_f32(exec_ctx_in_at(c, 0, 0)) : mem_alloc(NULL, sizeof *buf * (size_t)(total ? total : 1));
  int64_t at = 0;
  for (int k = 0; k < n; k++) {
    Tensor *x = exec_ctx_in_at(c, 0, k);
    const float *v = tensor_f32(x);
    for (int64_t i = 0; i < x->numel; i++) buf[at + i] = v[i] * w;
    at += x->numel;
  }
  dist_sum_f32(buf, total);
  at = 0;
  for (int k = 0; k < n; k++) {
    Tensor *x = exec_ctx_in_at(c, 0, k);
    if (n > 1) memcpy(tensor_f32(x), buf + at, sizeof *buf * (size_t)x->numel);
    at += x->numel;
    exec_ctx_set_out(c, 0, k, tensor_ref(x));
  }
  if (n > 1) mem_free(buf);
  return 0;
}

/* The bucket's gradients times Weight, in order, in a new vector of
 * *total floats. */
static float *pack(ExecCtx *c, int64_t *total) {
  int n = exec_ctx_in_count(c, 0);
  float w = (float)tensor_get(exec_ctx_in(c, 1), 0);
  *total = 0;
  for (int k = 0; k < n; k++) *total += exec_ctx_in_at(c, 0, k)->numel;
  float *buf = mem_alloc(NULL, sizeof *buf * (size_t)(*total ? *total : 1));
  int64_t at = 0;
  for (int k = 0; k < n; k++) {
    const Tensor *x = exec_ctx_in_at(c, 0, k);
    const float *v = tensor_f32(x);
    for (int64_t i = 0; i < x->numel; i++) buf[at + i] = v[i] * w;
    at += x->numel;
  }
  return buf;
}

static bool infer_allreduce_start(InferCtx *c) {
  for (int k = 0; k < reg_infer_count(c, "X"); k++) {
    const VarDesc *x = reg_infer_in(c, "X", k);
    if (x->dtype != DT_F32) return reg_infer_fail(c, "X[%d] must be f32, got %s", k, dtype_name(x->dtype));
  }
  const VarDesc *w = reg_infer_in(c, "Weight", 0);
  if (!w) return reg_infer_fail(c, "input Weight is missing");
  Shape s = shape_scalar();
  reg_infer_set(c, "Handle", 0, DT_I64, &s);
  return reg_infer_need_float(c, "Weight", w);
}

static int k_allreduce_start(ExecCtx *c) {
  int64_t total;
  float *buf = pack(c, &total);
  exec_ctx_set_out(c, 0, 0, tensor_scalar_i64(dist_sum_start(buf, total)));
  return 0;
}

static bool infer_allreduce_wait(InferCtx *c) {
  if (!pass_f32_list(c)) return false;
  const VarDesc *h = reg_infer_in(c, "Handle", 0);
  if (!h || h->dtype != DT_I64) return reg_infer_fail(c, "input Handle must be allreduce_start's i64");
  return true;
}

/* The sum allreduce_start started, written into the bucket's gradients. */
static int k_allreduce_wait(ExecCtx *c) {
  float *buf = dist_sum_finish((int64_t)tensor_get(exec_ctx_in(c, 1), 0));
  if (!buf) return exec_ctx_fail(c, "internal error: no allreduce_start for this Handle is in flight");
  int64_t at = 0;
  for (int k = 0; k < exec_ctx_in_count(c, 0); k++) {
    Tensor *x = exec_ctx_in_at(c, 0, k);
    memcpy(tensor_f32(x), buf + at, sizeof *buf * (size_t)x->numel);
    at += x->numel;
    exec_ctx_set_out(c, 0, k, tensor_ref(x));
  }
  mem_free(buf);
  return 0;
}

OpProto op_table_dist[] = {
    {.type = "allreduce",
     .doc = "Out = the sum over the ranks of Weight * X, in rank order, in place: the gradients of a "
            "bucket averaged over the ranks of data-parallel training",
     .in = {{"X", SLOT_LIST, "the bucket's gradients (f32, updated in place)"},
            {"Weight", 0, "this rank's share of the step's examples, one value"}},
     .out = {{"Out", SLOT_LIST, "the same, summed over the ranks"}},
     .infer = infer_allreduce, .kernel = k_allreduce, .grad_kind = GRAD_NONE,
     .flags = OP_NO_PREALLOC | OP_SIDE_EFFECT | OP_INTERNAL},
    {.type = "allreduce_start",
     .doc = "Starts the sum over the ranks of Weight * X, in rank order, and returns at once: allreduce's first "
            "half, overlapping the backward",
     .in = {{"X", SLOT_LIST, "the bucket's gradients (f32)"},
            {"Weight", 0, "this rank's share of the step's examples, one value"}},
     .out = {{"Handle", 0, "the sum in flight (i64), for allreduce_wait"}},
     .infer = infer_allreduce_start, .kernel = k_allreduce_start, .grad_kind = GRAD_NONE,
     .flags = OP_NO_PREALLOC | OP_SIDE_EFFECT | OP_INTERNAL},
    {.type = "allreduce_wait",
     .doc = "Waits for the sum allreduce_start started and writes it into X, in place: allreduce's second half",
     .in = {{"X", SLOT_LIST, "the bucket's gradients (f32, updated in place)"},
            {"Handle", 0, "allreduce_start's sum in flight"}},
     .out = {{"Out", SLOT_LIST, "the same, summed over the ranks"}},
     .infer = infer_allreduce_wait, .kernel = k_allreduce_wait, .grad_kind = GRAD_NONE,
     .flags = OP_NO_PREALLOC | OP_SIDE_EFFECT | OP_INTERNAL},
    {0},
};
