/* elementwise.c — arithmetic and activation ops, one value per element.
 *
 * Binary ops broadcast like NumPy; their gradients are summed back to each
 * input's shape.  i64 with f32 promotes to f32; bool counts as i64. */
#include "../registry.h"

/* Binary arithmetic: broadcast shapes, promote dtypes. */
static bool infer_binary(InferCtx *c) {
  const VarDesc *x = infer_in(c, "X", 0), *y = infer_in(c, "Y", 0);
  Shape s;
  if (!infer_broadcast(c, &x->shape, &y->shape, &s)) return false;
  infer_set(c, "Out", 0, infer_promote(x->dtype, y->dtype), &s);
  return true;
}

/* Unary ops that keep the input's shape and dtype. */
static bool infer_same(InferCtx *c) {
  const VarDesc *x = infer_in(c, "X", 0);
  infer_set(c, "Out", 0, x->dtype == DT_BOOL ? DT_I64 : x->dtype, &x->shape);
  return true;
}

/* Unary ops whose result is always real (exp, log, tanh, ...). */
static bool infer_float(InferCtx *c) {
  const VarDesc *x = infer_in(c, "X", 0);
  infer_set(c, "Out", 0, DT_F32, &x->shape);
  return true;
}

static bool infer_clip(InferCtx *c) {
  if (infer_attr_f(c, "min") > infer_attr_f(c, "max"))
    return infer_fail(c, "min (%g) is greater than max (%g)", infer_attr_f(c, "min"),
                      infer_attr_f(c, "max"));
  return infer_same(c);
}

#define BINARY(NAME, DOC, GK)                                                   \
  {.type = NAME, .doc = DOC,                                                    \
   .in = {{"X", 0, "left operand"}, {"Y", 0, "right operand"}},                 \
   .out = {{"Out", 0, "the result, broadcast shape of X and Y"}},               \
   .infer = infer_binary, .grad_kind = GK}
#define UNARY(NAME, DOC, INFER, GK)                                             \
  {.type = NAME, .doc = DOC, .in = {{"X", 0, "input"}},                         \
   .out = {{"Out", 0, "the result, shape of X"}}, .infer = INFER, .grad_kind = GK}

OpProto op_table_elementwise[] = {
    BINARY("add", "Out = X + Y, broadcasting", GRAD_COMPOSITE),
    BINARY("sub", "Out = X - Y, broadcasting", GRAD_COMPOSITE),
    BINARY("mul", "Out = X * Y, broadcasting", GRAD_COMPOSITE),
    BINARY("div", "Out = X / Y, broadcasting; integer division truncates", GRAD_COMPOSITE),
    BINARY("pow", "Out = X ** Y, broadcasting", GRAD_DEDICATED),
    BINARY("maximum", "Out = max(X, Y) elementwise", GRAD_DEDICATED),
    BINARY("minimum", "Out = min(X, Y) elementwise", GRAD_DEDICATED),
    UNARY("neg", "Out = -X", infer_same, GRAD_COMPOSITE),
    UNARY("abs", "Out = |X|", infer_same, GRAD_DEDICATED),
    UNARY("exp", "Out = e^X", infer_float, GRAD_COMPOSITE),
    UNARY("log", "Out = ln X (log 0 is -inf)", infer_float, GRAD_COMPOSITE),
    UNARY("sqrt", "Out = sqrt(X)", infer_float, GRAD_COMPOSITE),
    UNARY("square", "Out = X * X", infer_same, GRAD_COMPOSITE),
    UNARY("sin", "Out = sin X", infer_float, GRAD_COMPOSITE),
    UNARY("cos", "Out = cos X", infer_float, GRAD_COMPOSITE),
    UNARY("relu", "Out = max(X, 0)", infer_same, GRAD_DEDICATED),
    UNARY("sigmoid", "Out = 1 / (1 + e^-X)", infer_float, GRAD_DEDICATED),
    UNARY("tanh", "Out = tanh X", infer_float, GRAD_DEDICATED),
    UNARY("softplus", "Out = ln(1 + e^X), computed stably", infer_float, GRAD_DEDICATED),
    UNARY("gelu", "Out = X * Phi(X), the Gaussian error linear unit (erf form)", infer_float,
          GRAD_DEDICATED),
    {.type = "leaky_relu", .doc = "Out = X if X > 0 else alpha * X",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "the result, shape of X"}},
     .attrs = {{"alpha", ATTR_FLOAT, "0.01", check_nonnegative, "slope for X < 0"}},
     .infer = infer_float, .grad_kind = GRAD_DEDICATED},
    {.type = "scale", .doc = "Out = scale * X + bias",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "the result, shape of X"}},
     .attrs = {{"scale", ATTR_FLOAT, "1", NULL, "multiplier"},
               {"bias", ATTR_FLOAT, "0", NULL, "added after scaling"}},
     .infer = infer_float, .grad_kind = GRAD_COMPOSITE},
    {.type = "clip", .doc = "Out = X limited to [min, max]",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "the result, shape of X"}},
     .attrs = {{"min", ATTR_FLOAT, NULL, NULL, "lower bound"},
               {"max", ATTR_FLOAT, NULL, NULL, "upper bound"}},
     .infer = infer_clip, .grad_kind = GRAD_DEDICATED},
    {0},
};
