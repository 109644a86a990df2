/* optim.c — optimizer updates, appended after the backward pass: each
 * reads a parameter, its gradient, a learning rate and its own state, and
 * writes the updated parameter and state (ParamOut is usually Param itself).
 *
 * Param is f32; Grad and the per-element state have Param's shape; the
 * learning rate and Adam's beta powers hold one value each.  rmsprop is
 * PyTorch's RMSprop with its defaults (no momentum, not centered). */
#include "exec/exec.h"
#include "exec/par.h"

#include <limits.h>
#include <math.h>
#include <string.h>

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
  const VarDesc *p = reg_infer_in(c, "Param", 0);
  if (!p) reg_infer_fail(c, "input Param is missing");
  else if (!dtype_is_float(p->dtype)) reg_infer_fail(c, "Param must be f32 (or f64), got %s", dtype_name(p->dtype));
  else return p;
  return NULL;
}

/* Input `slot` holds a float tensor of Param's shape. */
static bool like_param(InferCtx *c, const char *slot, const VarDesc *p) {
  const VarDesc *v = reg_infer_in(c, slot, 0);
  if (!v) return reg_infer_fail(c, "input %s is missing", slot);
  if (!reg_infer_need_float(c, slot, v)) return false;
  if (v->dtype == DT_F64 && p->dtype != DT_F64)   /* it would update a converted copy of Param */
    return reg_infer_fail(c, "%s is f64 but Param is %s: an f32 parameter used with f64 values cannot be trained "
                      "(declare it f64, or run with --dtype f64)", slot, dtype_name(p->dtype));
  if (!shapes_agree(&v->shape, &p->shape)) {
    char a[128], b[128];
    return reg_infer_fail(c, "%s has shape %s but Param has shape %s", slot,
                      shape_str(&v->shape, a, sizeof a), shape_str(&p->shape, b, sizeof b));
  }
  return true;
}

/* Input `slot` holds one float value (shape [], [1], [1, 1], ...). */
static bool one_value(InferCtx *c, const char *slot) {
  const VarDesc *v = reg_infer_in(c, slot, 0);
  if (!v) return reg_infer_fail(c, "input %s is missing", slot);
  if (!reg_infer_need_float(c, slot, v)) return false;
  for (int i = 0; i < v->shape.rank; i++)
    if (dim_known(v->shape.d[i]) && v->shape.d[i].n != 1) {
      char a[128];
      return reg_infer_fail(c, "%s must hold one value, got shape %s", slot,
                        shape_str(&v->shape, a, sizeof a));
    }
  return true;
}

/* Output `out` takes the dtype f32 and the shape of input `in`. */
static void pass(InferCtx *c, const char *out, const char *in) {
  const VarDesc *v = reg_infer_in(c, in, 0);
  if (v) reg_infer_set(c, out, 0, DT_F32, &v->shape);
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

static bool infer_rmsprop(InferCtx *c) {
  const VarDesc *p = param(c);
  if (!p || !like_param(c, "Grad", p) || !one_value(c, "LearningRate") || !like_param(c, "MeanSquare", p))
    return false;
  pass(c, "ParamOut", "Param");
  pass(c, "MeanSquareOut", "MeanSquare");
  return true;
}

/* sgd_matmul: Param [m, n]; X and Y 2-D, transposed as their attributes
 * say, with op(X) [m, k] and op(Y) [k, n]. */
static bool infer_sgd_matmul(InferCtx *c) {
  const VarDesc *p = param(c);
  if (!p || !one_value(c, "LearningRate")) return false;
  const VarDesc *x = reg_infer_in(c, "X", 0), *y = reg_infer_in(c, "Y", 0);
  if (!x || !y) return reg_infer_fail(c, "inputs X and Y are needed");
  if (x->dtype != DT_F32 || y->dtype != DT_F32) return reg_infer_fail(c, "X and Y must be f32");
  if (x->shape.rank != 2 || y->shape.rank != 2 || p->shape.rank != 2)
    return reg_infer_fail(c, "Param, X and Y must be matrices");
  bool ta = reg_infer_attr_b(c, "transpose_x"), tb = reg_infer_attr_b(c, "transpose_y");
  Dim m = x->shape.d[ta ? 1 : 0], k = x->shape.d[ta ? 0 : 1];
  Dim k2 = y->shape.d[tb ? 1 : 0], n = y->shape.d[tb ? 0 : 1];
  Shape want = {.rank = 2, .d = {m, n}};
  if ((dim_known(k) && dim_known(k2) && k.n != k2.n) || !shapes_agree(&want, &p->shape)) {
    char a[128], b[128], w[128];
    return reg_infer_fail(c, "op(X) %s times op(Y) %s does not give Param's shape %s", shape_str(&x->shape, a, sizeof a),
                      shape_str(&y->shape, b, sizeof b), shape_str(&p->shape, w, sizeof w));
  }
  pass(c, "ParamOut", "Param");
  return true;
}

/* ---- kernels: every update is in place; the outputs are the inputs ---------- */

/* The outputs of an update are its state inputs, updated where they are. */
static void same(ExecCtx *c, int out_slot, int in_slot) {
  if (exec_ctx_out_count(c, out_slot)) exec_ctx_set_out(c, out_slot, 0, tensor_ref(exec_ctx_in(c, in_slot)));
}

static float one(ExecCtx *c, int slot) { return (float)tensor_get(exec_ctx_in(c, slot), 0); }

/* The learning rate this update steps by: LearningRate times the op's
 * lr_mult (a parameter group's multiplier, train.c; 1 when not set). */
static float rate(ExecCtx *c, int slot) { return one(c, slot) * (float)exec_ctx_attr_f(c, "lr_mult"); }
static double rate64(ExecCtx *c, int slot) { return tensor_get(exec_ctx_in(c, slot), 0) * exec_ctx_attr_f(c, "lr_mult"); }

/* ---- the f64 sgd: the same formula in double, for an f64 Param (its
 * state and Grad are f64 with it: train.c, the executor). */

static int sgd64(ExecCtx *c, Tensor *p, const Tensor *g) {
  double lr = rate64(c, 2), wd = exec_ctx_attr_f(c, "weight_decay");
  double *pv = tensor_f64(p);
  const double *gv = tensor_f64(g);
  for (int64_t i = 0; i < p->numel; i++) pv[i] -= lr * (gv[i] + wd * pv[i]);
  same(c, 0, 0);
  return 0;
}

/* The momentum, Adam and RMSprop updates, written once for both element
 * types: T (float or double) is the arithmetic, SFX the name's suffix, DATA
 * the tensor's values, RATE the learning rate (rate, rate64) and SQRT the
 * root of T.  The f64 ones serve an f64 Param, whose state and Grad are f64
 * with it (train.c, the executor). */
#define OPTIM_UPDATES(T, SFX, DATA, RATE, SQRT)                                             \
  static int momentum##SFX(ExecCtx *c, Tensor *p, const Tensor *g, Tensor *v) {             \
    T lr = RATE(c, 3), mu = (T)exec_ctx_attr_f(c, "mu"), wd = (T)exec_ctx_attr_f(c, "weight_decay"); \
    bool nesterov = exec_ctx_attr_b(c, "use_nesterov");                                     \
    T *pv = DATA(p), *vv = DATA(v);                                                         \
    const T *gv = DATA(g);                                                                  \
    for (int64_t i = 0; i < p->numel; i++) {                                                \
      T gi = gv[i] + wd * pv[i];                                                            \
      vv[i] = mu * vv[i] + gi;                                                              \
      pv[i] -= lr * (nesterov ? gi + mu * vv[i] : vv[i]);                                   \
    }                                                                                       \
    same(c, 0, 0);                                                                          \
    same(c, 1, 2);                                                                          \
    return 0;                                                                               \
  }                                                                                         \
  /* Adam (Kingma and Ba) with bias correction through Beta1Pow/Beta2Pow,                   \
   * which hold beta^t; AdamW adds the decoupled decay p -= lr coeff p. */                  \
  static int adam##SFX(ExecCtx *c, T coeff) {                                               \
    Tensor *p = exec_ctx_in(c, 0), *g = exec_ctx_in(c, 1), *m1 = exec_ctx_in(c, 3), *m2 = exec_ctx_in(c, 4); \
    Tensor *b1p = exec_ctx_in(c, 5), *b2p = exec_ctx_in(c, 6);                              \
    T lr = RATE(c, 2), b1 = (T)exec_ctx_attr_f(c, "beta1"), b2 = (T)exec_ctx_attr_f(c, "beta2"); \
    T eps = (T)exec_ctx_attr_f(c, "epsilon");                                               \
    T pow1 = (T)tensor_get(b1p, 0) * b1, pow2 = (T)tensor_get(b2p, 0) * b2;                 \
    T step = lr * SQRT(1 - pow2) / (1 - pow1), eps_hat = eps * SQRT(1 - pow2);              \
    T *pv = DATA(p), *mv = DATA(m1), *vv = DATA(m2);                                        \
    const T *gv = DATA(g);                                                                  \
    for (int64_t i = 0; i < p->numel; i++) {                                                \
      if (coeff != 0) pv[i] -= lr * coeff * pv[i];                                          \
      mv[i] = b1 * mv[i] + (1 - b1) * gv[i];                                                \
      vv[i] = b2 * vv[i] + (1 - b2) * gv[i] * gv[i];                                        \
      pv[i] -= step * mv[i] / (SQRT(vv[i]) + eps_hat);                                      \
    }                                                                                       \
    tensor_set(b1p, 0, pow1);                                                               \
    tensor_set(b2p, 0, pow2);                                                               \
    for (int k = 0; k < 5; k++) same(c, k, k == 0 ? 0 : k + 2);                             \
    return 0;                                                                               \
  }                                                                                         \
  static int rmsprop##SFX(ExecCtx *c, Tensor *p, const Tensor *g, Tensor *ms) {             \
    T lr = RATE(c, 2), rho = (T)exec_ctx_attr_f(c, "rho"), eps = (T)exec_ctx_attr_f(c, "epsilon"); \
    T *pv = DATA(p), *mv = DATA(ms);                                                        \
    const T *gv = DATA(g);                                                                  \
    for (int64_t i = 0; i < p->numel; i++) {                                                \
      mv[i] = rho * mv[i] + (1 - rho) * gv[i] * gv[i];                                      \
      pv[i] -= lr * gv[i] / (SQRT(mv[i]) + eps);                                            \
    }                                                                                       \
    same(c, 0, 0);                                                                          \
    same(c, 1, 3);                                                                          \
    return 0;                                                                               \
  }

OPTIM_UPDATES(float, 32, tensor_f32, rate, sqrtf)
OPTIM_UPDATES(double, 64, tensor_f64, rate64, sqrt)

/* An f64 update needs its Grad and state in f64: anything else is refused,
 * never updated in a copy. */
static bool all_f64(ExecCtx *c, int n, const int *slots) {
  for (int k = 0; k < n; k++)
    if (exec_ctx_in(c, slots[k])->dtype != DT_F64) return false;
  return true;
}
#define NEED_F64(...)                                                           \
  if (!all_f64(c, sizeof((int[]){__VA_ARGS__}) / sizeof(int), (int[]){__VA_ARGS__})) \
    return exec_ctx_fail(c, "an f64 Param needs f64 Grad and state")

/* p -= lr * (g + wd * p) */
static int k_sgd(ExecCtx *c) {
  Tensor *p = exec_ctx_in(c, 0), *g = exec_ctx_in(c, 1);
  if (p->dtype == DT_F64) {
    NEED_F64(1);
    return sgd64(c, p, g);
  }
  float lr = rate(c, 2), wd = (float)exec_ctx_attr_f(c, "weight_decay");
  float *pv = tensor_f32(p);
  const float *gv = tensor_f32(g);
  if (wd != 0)
    for (int64_t i = 0; i < p->numel; i++) pv[i] -= lr * (gv[i] + wd * pv[i]);
  else
    for (int64_t i = 0; i < p->numel; i++) pv[i] -= lr * gv[i];
  same(c, 0, 0);
  return 0;
}

/* Param -= lr * op(X) @ op(Y): one GEMM accumulating into Param (beta 1,
 * alpha -lr), so the gradient is never stored and never read back. */
static int k_sgd_matmul(ExecCtx *c) {
  Tensor *p = exec_ctx_in(c, 0), *x = exec_ctx_in(c, 1), *y = exec_ctx_in(c, 2);
  float lr = rate(c, 3);
  bool ta = exec_ctx_attr_b(c, "transpose_x"), tb = exec_ctx_attr_b(c, "transpose_y");
  int64_t m = x->shape[ta ? 1 : 0], k = x->shape[ta ? 0 : 1], k2 = y->shape[tb ? 1 : 0], n = y->shape[tb ? 0 : 1];
  if (k != k2 || p->shape[0] != m || p->shape[1] != n)
    return exec_ctx_fail(c, "op(X) [%lld, %lld] times op(Y) [%lld, %lld] does not give Param's shape [%lld, %lld]",
                    (long long)m, (long long)k, (long long)k2, (long long)n, (long long)p->shape[0],
                    (long long)p->shape[1]);
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
    return exec_ctx_fail(c, "a dimension is larger than OpenBLAS's int (%d)", INT_MAX);
  if (m && n && k)
    par_sgemm(ta, tb, (int)m, (int)n, (int)k, -lr, tensor_f32(x), (int)x->shape[1], tensor_f32(y),
              (int)y->shape[1], 1.0f, tensor_f32(p), (int)n);
  same(c, 0, 0);
  return 0;
}

/* PyTorch's SGD with momentum: v = mu v + g; p -= lr v (Nesterov: p -= lr (g + mu v)). */
static int k_momentum(ExecCtx *c) {
  Tensor *p = exec_ctx_in(c, 0), *g = exec_ctx_in(c, 1), *v = exec_ctx_in(c, 2);
  if (p->dtype != DT_F64) return momentum32(c, p, g, v);
  NEED_F64(1, 2);
  return momentum64(c, p, g, v);
}

/* PyTorch's RMSprop (no momentum, not centered): ms = rho ms + (1 - rho) g^2;
 * p -= lr g / (sqrt(ms) + eps), epsilon outside the root as PyTorch has it. */
static int k_rmsprop(ExecCtx *c) {
  Tensor *p = exec_ctx_in(c, 0), *g = exec_ctx_in(c, 1), *ms = exec_ctx_in(c, 3);
  if (p->dtype != DT_F64) return rmsprop32(c, p, g, ms);
  NEED_F64(1, 3);
  return rmsprop64(c, p, g, ms);
}

/* adam (coeff 0) or adamw in Param's element type. */
static int adam_step(ExecCtx *c, double coeff) {
  if (exec_ctx_in(c, 0)->dtype != DT_F64) return adam32(c, (float)coeff);
  NEED_F64(1, 3, 4, 5, 6);
  return adam64(c, coeff);
}
static int k_adam(ExecCtx *c) { return adam_step(c, 0); }
static int k_adamw(ExecCtx *c) { return adam_step(c, exec_ctx_attr_f(c, "coeff")); }

/* Out = X scaled so that the global L2 norm of all X is at most max_norm. */
static int k_clip_by_global_norm(ExecCtx *c) {
  double sq = 0;
  int n = exec_ctx_in_count(c, 0);
  for (int k = 0; k < n; k++) {
    Tensor *x = exec_ctx_in_at(c, 0, k);
    if (x->dtype == DT_F64) {
      for (int64_t i = 0; i < x->numel; i++) sq += tensor_f64(x)[i] * tensor_f64(x)[i];
      continue;
    }
    const float *v = tensor_f32(x);
    for (int64_t i = 0; i < x->numel; i++) sq += (double)v[i] * (double)v[i];
  }
  double norm = sqrt(sq), max_norm = exec_ctx_attr_f(c, "max_norm");
  float scale = norm > max_norm ? (float)(max_norm / (norm + 1e-6)) : 1.0f;
  for (int k = 0; k < n; k++) {
    Tensor *x = exec_ctx_in_at(c, 0, k);
    if (scale != 1.0f && x->dtype == DT_F64) {
      double s64 = norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
      for (int64_t i = 0; i < x->numel; i++) tensor_f64(x)[i] *= s64;
    } else if (scale != 1.0f) {
      float *v = tensor_f32(x);
      for (int64_t i = 0; i < x->numel; i++) v[i] *= scale;
    }
    exec_ctx_set_out(c, 0, k, tensor_ref(x));
  }
  return 0;
}

static bool infer_clip_norm(InferCtx *c) {
  for (int k = 0; k < reg_infer_count(c, "X"); k++) {
    const VarDesc *x = reg_infer_in(c, "X", k);
    if (!dtype_is_float(x->dtype)) return reg_infer_fail(c, "X[%d] must be f32, got %s", k, dtype_name(x->dtype));
    reg_infer_set(c, "Out", k, x->dtype, &x->shape);
  }
  return true;
}

/* Updates write their inputs in place and must run even though nothing
 * reads what they write in this pass. */
#define UPDATE (OP_NO_PREALLOC | OP_SIDE_EFFECT)
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
#define LR_MULT {"lr_mult", ATTR_FLOAT, "1", reg_check_positive, "the parameter group's learning-rate multiplier"}
#define ADAM_ATTRS                                                              \
  LR_MULT,                                                                      \
  {"beta1", ATTR_FLOAT, "0.9", reg_check_probability, "decay of the first moment"},  \
  {"beta2", ATTR_FLOAT, "0.999", reg_check_probability, "decay of the second moment"}, \
  {"epsilon", ATTR_FLOAT, "1e-8", reg_check_nonnegative, "added to the root of the second moment"}

OpProto op_table_optim[] = {
    {.type = "sgd", .doc = "ParamOut = Param - lr_mult * LearningRate * (Grad + weight_decay * Param)",
     .in = {PARAM_IN, GRAD_IN, LR_IN}, .out = {PARAM_OUT},
     .attrs = {{"weight_decay", ATTR_FLOAT, "0", reg_check_nonnegative, "L2 penalty added to Grad: wd * Param"},
               LR_MULT},
     .infer = infer_sgd, .kernel = k_sgd, .grad_kind = GRAD_NONE, .flags = UPDATE | OP_F64},
    {.type = "sgd_matmul",
     .doc = "ParamOut = Param - LearningRate * op(X) @ op(Y): an sgd step fused with the matmul that makes "
            "its gradient (training makes it when nothing else reads that gradient)",
     .in = {PARAM_IN, {"X", 0, "the gradient's left factor, a matrix"},
            {"Y", 0, "its right factor, a matrix"}, LR_IN},
     .out = {PARAM_OUT},
     .attrs = {{"transpose_x", ATTR_BOOL, "false", NULL, "use X transposed"},
               {"transpose_y", ATTR_BOOL, "false", NULL, "use Y transposed"}, LR_MULT},
     .infer = infer_sgd_matmul, .kernel = k_sgd_matmul, .grad_kind = GRAD_NONE, .flags = UPDATE | OP_INTERNAL},
    {.type = "momentum",
     .doc = "VelocityOut = mu * Velocity + Grad; ParamOut = Param - LearningRate * VelocityOut",
     .in = {PARAM_IN, GRAD_IN, {"Velocity", 0, "the running velocity, shape of Param"}, LR_IN},
     .out = {PARAM_OUT, {"VelocityOut", 0, "the updated velocity"}},
     .attrs = {{"mu", ATTR_FLOAT, "0.9", reg_check_nonnegative, "the momentum factor"},
               {"use_nesterov", ATTR_BOOL, "false", NULL,
                "step by Grad + mu * VelocityOut (Nesterov) instead"},
               {"weight_decay", ATTR_FLOAT, "0", reg_check_nonnegative, "L2 penalty added to Grad: wd * Param"},
               LR_MULT},
     .infer = infer_momentum, .kernel = k_momentum, .grad_kind = GRAD_NONE, .flags = UPDATE | OP_F64},
    {.type = "adam", .doc = "one Adam step (Kingma and Ba) on Param",
     .in = ADAM_IN, .out = ADAM_OUT, .attrs = {ADAM_ATTRS},
     .infer = infer_adam, .kernel = k_adam, .grad_kind = GRAD_NONE, .flags = UPDATE | OP_F64},
    {.type = "adamw", .doc = "one AdamW step: Adam with decoupled weight decay coeff",
     .in = ADAM_IN, .out = ADAM_OUT,
     .attrs = {ADAM_ATTRS,
               {"coeff", ATTR_FLOAT, "0.01", reg_check_nonnegative, "the weight decay factor"}},
     .infer = infer_adam, .kernel = k_adamw, .grad_kind = GRAD_NONE, .flags = UPDATE | OP_F64},
    {.type = "rmsprop",
     .doc = "MeanSquareOut = rho * MeanSquare + (1 - rho) * Grad^2; "
            "ParamOut = Param - LearningRate * Grad / (sqrt(MeanSquareOut) + epsilon)",
     .in = {PARAM_IN, GRAD_IN, LR_IN, {"MeanSquare", 0, "the running mean of Grad^2, shape of Param"}},
     .out = {PARAM_OUT, {"MeanSquareOut", 0, "the updated mean square"}},
     .attrs = {{"rho", ATTR_FLOAT, "0.99", reg_check_probability, "the decay of the mean square (PyTorch's alpha)"},
               {"epsilon", ATTR_FLOAT, "1e-8", reg_check_nonnegative, "added to the root of the mean square"},
               LR_MULT},
     .infer = infer_rmsprop, .kernel = k_rmsprop, .grad_kind = GRAD_NONE, .flags = UPDATE | OP_F64},
    {.type = "clip_by_global_norm",
     .doc = "scales every X by max_norm / (their global L2 norm) when that norm exceeds max_norm",
     .in = {{"X", SLOT_LIST, "gradients (updated in place)"}}, .out = {{"Out", SLOT_LIST, "the same, clipped"}},
     .attrs = {{"max_norm", ATTR_FLOAT, NULL, reg_check_positive, "the largest global norm let through"}},
     .infer = infer_clip_norm, .kernel = k_clip_by_global_norm, .grad_kind = GRAD_NONE, .flags = UPDATE | OP_F64},
    {0},
};
