/* compare.c — comparisons, logical connectives and sign.
 *
 * Comparisons broadcast like NumPy and give bool; the logical ops take bool
 * only (the language's `and`, `or`, `not`).  None has a gradient. */
#include "../exec.h"
#include "bcast_loop.h"

#include <string.h>

/* An operand of a logical op must be bool. */
static bool need_bool(InferCtx *c, const char *slot, const VarDesc *v) {
  if (v->dtype != DT_BOOL)
    return infer_fail(c, "%s must be bool, got %s", slot, dtype_name(v->dtype));
  return true;
}

static bool infer_compare(InferCtx *c) {
  const VarDesc *x = infer_in(c, "X", 0), *y = infer_in(c, "Y", 0);
  if (!x || !y) return infer_fail(c, "needs both X and Y");
  Shape s;
  if (!infer_broadcast(c, &x->shape, &y->shape, &s)) return false;
  infer_set(c, "Out", 0, DT_BOOL, &s);
  return true;
}

static bool infer_logical(InferCtx *c) {
  const VarDesc *x = infer_in(c, "X", 0), *y = infer_in(c, "Y", 0);
  if (!x || !y) return infer_fail(c, "needs both X and Y");
  if (!need_bool(c, "X", x) || !need_bool(c, "Y", y)) return false;
  return infer_compare(c);
}

static bool infer_not(InferCtx *c) {
  const VarDesc *x = infer_in(c, "X", 0);
  if (!x) return infer_fail(c, "input X is missing");
  if (!need_bool(c, "X", x)) return false;
  infer_set(c, "Out", 0, DT_BOOL, &x->shape);
  return true;
}

static bool infer_sign(InferCtx *c) {
  const VarDesc *x = infer_in(c, "X", 0);
  if (!x) return infer_fail(c, "input X is missing");
  infer_set(c, "Out", 0, x->dtype, &x->shape);
  return true;
}

/* ---- kernels ------------------------------------------------------------------
 *
 * As in elementwise.c, each op x dtype pair is its own loop over the rows of
 * a broadcast, picked once per call from a table.  Operands of different
 * dtypes are compared as the wider type, converted as they are loaded: f32
 * with f32 as float, i64 or bool without f32 as int64, f32 with i64 as
 * double (exact for every f32 and for integers up to 2^53; NumPy compares
 * them as float64 too).  NaN compares unequal to everything. */

/* A comparison is a broadcast binary loop writing bools. */
#define COMPARE_LOOP(FN, XT, YT, CT, EXPR) BINARY_LOOP(FN, bln, XT, YT, CT, EXPR)

/* [X dtype][Y dtype] */
typedef BinaryLoop CompareTable[3][3];

#define COMPARE_OP(NAME, EXPR)                                                  \
  COMPARE_LOOP(NAME##_ff, f32, f32, f32, EXPR)                                  \
  COMPARE_LOOP(NAME##_fi, f32, i64, double, EXPR)                               \
  COMPARE_LOOP(NAME##_fb, f32, bln, f32, EXPR)                                  \
  COMPARE_LOOP(NAME##_if, i64, f32, double, EXPR)                               \
  COMPARE_LOOP(NAME##_ii, i64, i64, i64, EXPR)                                  \
  COMPARE_LOOP(NAME##_ib, i64, bln, i64, EXPR)                                  \
  COMPARE_LOOP(NAME##_bf, bln, f32, f32, EXPR)                                  \
  COMPARE_LOOP(NAME##_bi, bln, i64, i64, EXPR)                                  \
  COMPARE_LOOP(NAME##_bb, bln, bln, i64, EXPR)                                  \
  static const CompareTable NAME##_loops = {{NAME##_ff, NAME##_fi, NAME##_fb},  \
                                            {NAME##_if, NAME##_ii, NAME##_ib},  \
                                            {NAME##_bf, NAME##_bi, NAME##_bb}}; \
  static int k_##NAME(ExecCtx *c) { return compare_run(c, NAME##_loops); }

static int compare_run(ExecCtx *c, const CompareTable loops) {
  Tensor *x = ctx_in(c, 0), *y = ctx_in(c, 1), *out = ctx_out(c, 0);
  BinaryLoop f =
      x->dtype <= DT_BOOL && y->dtype <= DT_BOOL && out->dtype == DT_BOOL ? loops[x->dtype][y->dtype] : NULL;
  return bcast_kernel(c, f, x, y, out, "cannot compare", "with", "into");
}

COMPARE_OP(less_than, a < b)
COMPARE_OP(less_equal, a <= b)
COMPARE_OP(greater_than, a > b)
COMPARE_OP(greater_equal, a >= b)
COMPARE_OP(equal, a == b)
COMPARE_OP(not_equal, a != b)
/* bool operands only (inference checks), read as 0 / non-zero. */
COMPARE_OP(logical_and, (a != 0) & (b != 0))
COMPARE_OP(logical_or, (a != 0) | (b != 0))

static int k_logical_not(ExecCtx *c) {
  Tensor *x = ctx_in(c, 0), *out = ctx_out(c, 0);
  const bln *v = tensor_bool(x);
  bln *restrict o = tensor_bool(out);
  for (int64_t i = 0; i < out->numel; i++) o[i] = v[i] == 0;
  return 0;
}

/* -1, 0 or 1 in X's dtype; NaN stays NaN and a bool is its own sign. */
static int k_sign(ExecCtx *c) {
  Tensor *x = ctx_in(c, 0), *out = ctx_out(c, 0);
  int64_t n = out->numel;
  switch (x->dtype) {
  case DT_F32: {
    const f32 *v = tensor_f32(x);
    f32 *restrict o = tensor_f32(out);
    for (int64_t i = 0; i < n; i++)
      o[i] = v[i] > 0 ? 1.0f : v[i] < 0 ? -1.0f : v[i] == 0 ? 0.0f : v[i];
    break;
  }
  case DT_I64: {
    const i64 *v = tensor_i64(x);
    i64 *restrict o = tensor_i64(out);
    for (int64_t i = 0; i < n; i++) o[i] = (v[i] > 0) - (v[i] < 0);
    break;
  }
  default:
    if (n) memcpy(out->data, x->data, (size_t)n);
    break;
  }
  return 0;
}

/* ---- the table ----------------------------------------------------------------- */

#define COMPARE(NAME, DOC, INFER)                                               \
  {.type = #NAME, .doc = DOC, .kernel = k_##NAME,                               \
   .in = {{"X", 0, "left operand"}, {"Y", 0, "right operand"}},                 \
   .out = {{"Out", 0, "bool, broadcast shape of X and Y"}},                     \
   .infer = INFER, .grad_kind = GRAD_NONE}

OpProto op_table_compare[] = {
    COMPARE(less_than, "Out = X < Y, broadcasting", infer_compare),
    COMPARE(less_equal, "Out = X <= Y, broadcasting", infer_compare),
    COMPARE(greater_than, "Out = X > Y, broadcasting", infer_compare),
    COMPARE(greater_equal, "Out = X >= Y, broadcasting", infer_compare),
    COMPARE(equal, "Out = X == Y, broadcasting", infer_compare),
    COMPARE(not_equal, "Out = X != Y, broadcasting", infer_compare),
    COMPARE(logical_and, "Out = X and Y, both bool, broadcasting", infer_logical),
    COMPARE(logical_or, "Out = X or Y, both bool, broadcasting", infer_logical),
    {.type = "logical_not", .doc = "Out = not X, X bool", .in = {{"X", 0, "a bool tensor"}},
     .out = {{"Out", 0, "bool, shape of X"}}, .infer = infer_not, .kernel = k_logical_not,
     .grad_kind = GRAD_NONE},
    {.type = "sign", .doc = "Out = -1, 0 or 1 by the sign of X", .in = {{"X", 0, "input"}},
     .out = {{"Out", 0, "dtype and shape of X"}}, .infer = infer_sign, .kernel = k_sign,
     .grad_kind = GRAD_NONE, .flags = OP_ZERO_GRAD},   /* its gradient is 0 wherever it exists */
    {0},
};
