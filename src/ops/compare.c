/* compare.c — comparisons, logical connectives and sign.
 *
 * Comparisons broadcast like NumPy and give bool; the logical ops take bool
 * only (the language's `and`, `or`, `not`).  None has a gradient. */
#include "../registry.h"

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

#define COMPARE(NAME, DOC, INFER)                                               \
  {.type = NAME, .doc = DOC,                                                    \
   .in = {{"X", 0, "left operand"}, {"Y", 0, "right operand"}},                 \
   .out = {{"Out", 0, "bool, broadcast shape of X and Y"}},                     \
   .infer = INFER, .grad_kind = GRAD_NONE}

OpProto op_table_compare[] = {
    COMPARE("less_than", "Out = X < Y, broadcasting", infer_compare),
    COMPARE("less_equal", "Out = X <= Y, broadcasting", infer_compare),
    COMPARE("greater_than", "Out = X > Y, broadcasting", infer_compare),
    COMPARE("greater_equal", "Out = X >= Y, broadcasting", infer_compare),
    COMPARE("equal", "Out = X == Y, broadcasting", infer_compare),
    COMPARE("not_equal", "Out = X != Y, broadcasting", infer_compare),
    COMPARE("logical_and", "Out = X and Y, both bool, broadcasting", infer_logical),
    COMPARE("logical_or", "Out = X or Y, both bool, broadcasting", infer_logical),
    {.type = "logical_not", .doc = "Out = not X, X bool", .in = {{"X", 0, "a bool tensor"}},
     .out = {{"Out", 0, "bool, shape of X"}}, .infer = infer_not, .grad_kind = GRAD_NONE},
    {.type = "sign", .doc = "Out = -1, 0 or 1 by the sign of X", .in = {{"X", 0, "input"}},
     .out = {{"Out", 0, "dtype and shape of X"}}, .infer = infer_sign, .grad_kind = GRAD_NONE},
    {0},
};
