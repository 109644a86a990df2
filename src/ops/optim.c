/* optim.c — optimizer updates, appended after the backward pass: each
 * reads a parameter, its gradient, a learning rate and its own state, and
 * writes the updated parameter and state (ParamOut is usually Param itself).
 *
 * Param is f32; Grad and the per-element state have Param's shape; the
 * learning rate and Adam's beta powers hold one value each. */
#include "../registry.h"

#include <string.h>

static bool need_float(InferCtx *c, const char *slot, const VarDesc *v) {
  if (v->dtype != DT_F32 && v->dtype != DT_I64)
    return infer_fail(c, "%s must be f32 (or i64), got %s", slot, dtype_name(v->dtype));
  return true;
}

/* Two shapes that must be equal: false if they provably differ. */
static bool shapes_agree(const Shape *a, const Shape *b) {
  if (a->rank < 0 || b->rank < 0) return true;
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++) {
    Dim x = a->d[i], y = b->d[i];
    if (dim_known(x) && dim_known(y) && x.n != y.n) return false;
    if (x.sym && y.sym && strcmp(x.sym, y.sym) != 0) return false;
  }
  return true;
}

/* Param, checked; NULL after an error. */
static const VarDesc *param(InferCtx *c) {
  const VarDesc *p = infer_in(c, "Param", 0);
  if (!p) infer_fail(c, "input Param is missing");
  else if (p->dtype != DT_F32) infer_fail(c, "Param must be f32, got %s", dtype_name(p->dtype));
  else return p;
  return NULL;
}

/* Input `slot` holds a float tensor of Param's shape. */
static bool like_param(InferCtx *c, const char *slot, const VarDesc *p) {
  const VarDesc *v = infer_in(c, slot, 0);
  if (!v) return infer_fail(c, "input %s is missing", slot);
  if (!need_float(c, slot, v)) return false;
  if (!shapes_agree(&v->shape, &p->shape)) {
    char a[128], b[128];
    return infer_fail(c, "%s has shape %s but Param has shape %s", slot,
                      shape_str(&v->shape, a, sizeof a), shape_str(&p->shape, b, sizeof b));
  }
  return true;
}

/* Input `slot` holds one float value (shape [], [1], [1, 1], ...). */
static bool one_value(InferCtx *c, const char *slot) {
  const VarDesc *v = infer_in(c, slot, 0);
  if (!v) return infer_fail(c, "input %s is missing", slot);
  if (!need_float(c, slot, v)) return false;
  for (int i = 0; i < v->shape.rank; i++)
    if (dim_known(v->shape.d[i]) && v->shape.d[i].n != 1) {
      char a[128];
      return infer_fail(c, "%s must hold one value, got shape %s", slot,
                        shape_str(&v->shape, a, sizeof a));
    }
  return true;
}

/* Output `out` takes the dtype f32 and the shape of input `in`. */
static void pass(InferCtx *c, const char *out, const char *in) {
  const VarDesc *v = infer_in(c, in, 0);
  if (v) infer_set(c, out, 0, DT_F32, &v->shape);
}

static bool infer_sgd(InferCtx *c) {
  const VarDesc *p = param(c);
  if (!p || !like_param(c, "Grad", p) || !one_value(c, "LearningRate")) return false;
  pass(c, "ParamOut", "Param");
  return true;
}

static bool infer_momentum(InferCtx *c) {
  const VarDesc *p = param(c);
  if (!p || !like_param(c, "Grad", p) || !like_param(c, "Velocity", p) ||
      !one_value(c, "LearningRate"))
    return false;
  pass(c, "ParamOut", "Param");
  pass(c, "VelocityOut", "Velocity");
  return true;
}

/* adam and adamw. */
static bool infer_adam(InferCtx *c) {
  const VarDesc *p = param(c);
  if (!p || !like_param(c, "Grad", p) || !one_value(c, "LearningRate") ||
      !like_param(c, "Moment1", p) || !like_param(c, "Moment2", p) || !one_value(c, "Beta1Pow") ||
      !one_value(c, "Beta2Pow"))
    return false;
  pass(c, "ParamOut", "Param");
  pass(c, "Moment1Out", "Moment1");
  pass(c, "Moment2Out", "Moment2");
  pass(c, "Beta1PowOut", "Beta1Pow");
  pass(c, "Beta2PowOut", "Beta2Pow");
  return true;
}

#define PARAM_IN {"Param", 0, "the parameter (f32)"}
#define GRAD_IN {"Grad", 0, "its gradient, shape of Param"}
#define LR_IN {"LearningRate", 0, "the learning rate, one value"}
#define PARAM_OUT {"ParamOut", 0, "the updated parameter (usually Param itself)"}
#define ADAM_IN                                                                 \
  {PARAM_IN, GRAD_IN, LR_IN,                                                    \
   {"Moment1", 0, "first-moment estimate, shape of Param"},                     \
   {"Moment2", 0, "second-moment estimate, shape of Param"},                    \
   {"Beta1Pow", 0, "beta1 to the power of the step count, one value"},          \
   {"Beta2Pow", 0, "beta2 to the power of the step count, one value"}}
#define ADAM_OUT                                                                \
  {PARAM_OUT, {"Moment1Out", 0, "updated Moment1"}, {"Moment2Out", 0, "updated Moment2"}, \
   {"Beta1PowOut", 0, "Beta1Pow * beta1"}, {"Beta2PowOut", 0, "Beta2Pow * beta2"}}
#define ADAM_ATTRS                                                              \
  {"beta1", ATTR_FLOAT, "0.9", check_probability, "decay of the first moment"},  \
  {"beta2", ATTR_FLOAT, "0.999", check_probability, "decay of the second moment"}, \
  {"epsilon", ATTR_FLOAT, "1e-8", check_nonnegative, "added to the root of the second moment"}

OpProto op_table_optim[] = {
    {.type = "sgd", .doc = "ParamOut = Param - LearningRate * Grad",
     .in = {PARAM_IN, GRAD_IN, LR_IN}, .out = {PARAM_OUT},
     .infer = infer_sgd, .grad_kind = GRAD_NONE},
    {.type = "momentum",
     .doc = "VelocityOut = mu * Velocity + Grad; ParamOut = Param - LearningRate * VelocityOut",
     .in = {PARAM_IN, GRAD_IN, {"Velocity", 0, "the running velocity, shape of Param"}, LR_IN},
     .out = {PARAM_OUT, {"VelocityOut", 0, "the updated velocity"}},
     .attrs = {{"mu", ATTR_FLOAT, "0.9", check_nonnegative, "the momentum factor"},
               {"use_nesterov", ATTR_BOOL, "false", NULL,
                "step by Grad + mu * VelocityOut (Nesterov) instead"}},
     .infer = infer_momentum, .grad_kind = GRAD_NONE},
    {.type = "adam", .doc = "one Adam step (Kingma and Ba) on Param",
     .in = ADAM_IN, .out = ADAM_OUT, .attrs = {ADAM_ATTRS},
     .infer = infer_adam, .grad_kind = GRAD_NONE},
    {.type = "adamw", .doc = "one AdamW step: Adam with decoupled weight decay coeff",
     .in = ADAM_IN, .out = ADAM_OUT,
     .attrs = {ADAM_ATTRS,
               {"coeff", ATTR_FLOAT, "0.01", check_nonnegative, "the weight decay factor"}},
     .infer = infer_adam, .grad_kind = GRAD_NONE},
    {0},
};
