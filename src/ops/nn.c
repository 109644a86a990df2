/* nn.c — neural-network ops: softmax, losses, dropout, layer norm,
 * embedding lookup and accuracy.
 *
 * They compute in f32: an i64 input is promoted (as NumPy would), a bool one
 * is an error.  Labels and indices are i64 and never differentiated; the f32
 * Label of sigmoid_cross_entropy is (a soft target can be learned).
 *
 * Gradients: composite for sigmoid_cross_entropy, mse and dropout; dedicated
 * *_grad ops for the rest (see "gradients" below).
 *
 * Numerics: sums of exponentials subtract the row's maximum first and
 * accumulate in double, so logits like 1000 and -1000 give finite results;
 * layer_norm's mean and variance are two passes in double, each in eight
 * running sums. */
#include "autodiff/backward.h"
#include "exec/exec.h"
#include "exec/par.h"
#include "ops/vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#include <stdatomic.h>
#endif

_Static_assert(SHAPE_MAX_RANK == 8, "the messages below say 8");

/* ---- helpers ----------------------------------------------------------------- */

/* A float attribute in [0, 1] (batch_norm's momentum). */
static const char *check_unit(const AttrValue *v) {
  double f = reg_attr_f64(v);
  return f >= 0 && f <= 1 ? NULL : "must be in [0, 1]";
}

static bool need_i64(InferCtx *c, const char *slot, const VarDesc *v) {
  if (v->dtype != DT_I64) return reg_infer_fail(c, "%s must be i64, got %s", slot, dtype_name(v->dtype));
  return true;
}

/* Whether the first n dims of a and b can be equal; merges them into out. */
static bool dims_agree(const Dim *a, const Dim *b, int n, Dim *out) {
  for (int i = 0; i < n; i++) {
    if (dims_clash(a[i], b[i])) return false;
    out[i] = dim_merge(a[i], b[i]);
  }
  return true;
}

/* A label for rows of `lead` (a batch shape): of shape lead or lead + [1].
 * Sets *out to the merged batch shape. */
static bool label_fits(const Shape *label, const Shape *lead, Shape *out) {
  *out = *lead;
  if (label->rank < 0 || lead->rank < 0) return true;
  if (label->rank == lead->rank + 1) {
    Dim last = label->d[lead->rank];
    if (dim_known(last) && last.n != 1) return false;
  } else if (label->rank != lead->rank) {
    return false;
  }
  return dims_agree(label->d, lead->d, lead->rank, out->d);
}

/* The expected label shapes, "[B] or [B, 1]", for an error message. */
static const char *label_want(const Shape *lead, char *buf, size_t n) {
  char a[128], b[128];
  Shape one = *lead;
  one.d[one.rank++] = dim_n(1);
  snprintf(buf, n, "%s or %s", shape_str(lead, a, sizeof a), shape_str(&one, b, sizeof b));
  return buf;
}

/* ---- softmax and losses -------------------------------------------------------- */

/* softmax, log_softmax: f32, X's shape, axis in range. */
static bool infer_softmax(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X");
  if (!x || !reg_infer_need_float(c, "X", x)) return false;
  int k;
  if (x->shape.rank >= 0 && !reg_infer_norm_axis(c, "axis", reg_infer_attr_i(c, "axis"), "X", &x->shape, &k))
    return false;
  reg_infer_set(c, "Out", 0, DT_F32, &x->shape);
  return true;
}

static bool infer_softmax_ce(InferCtx *c) {
  const VarDesc *lg = reg_infer_input(c, "Logits"), *lb = reg_infer_input(c, "Label");
  if (!lg || !lb || !reg_infer_need_float(c, "Logits", lg) || !need_i64(c, "Label", lb)) return false;
  if (lg->shape.rank == 0)
    return reg_infer_fail(c, "Logits must have a class axis, got a scalar");
  Shape lead = lg->shape, loss;
  if (lead.rank > 0) lead.rank--;
  if (!label_fits(&lb->shape, &lead, &loss)) {
    char a[128], b[128], w[300];
    return reg_infer_fail(c, "Label has shape %s but Logits has shape %s: expected %s",
                          shape_str(&lb->shape, a, sizeof a), shape_str(&lg->shape, b, sizeof b),
                          label_want(&lead, w, sizeof w));
  }
  reg_infer_set(c, "Loss", 0, DT_F32, &loss);
  return true;
}

static bool infer_sigmoid_ce(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X"), *lb = reg_infer_input(c, "Label");
  if (!x || !lb || !reg_infer_need_float(c, "X", x) || !reg_infer_need_float(c, "Label", lb)) return false;
  Shape s = x->shape;
  if (x->shape.rank >= 0 && lb->shape.rank >= 0 &&
      (x->shape.rank != lb->shape.rank || !dims_agree(x->shape.d, lb->shape.d, s.rank, s.d))) {
    char a[128], b[128];
    return reg_infer_fail(c, "Label has shape %s but X has shape %s: they must be equal",
                          shape_str(&lb->shape, a, sizeof a), shape_str(&x->shape, b, sizeof b));
  }
  if (s.rank < 0) s = lb->shape;
  reg_infer_set(c, "Out", 0, DT_F32, &s);
  return true;
}

static bool infer_mse(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X"), *y = reg_infer_input(c, "Y");
  if (!x || !y || !reg_infer_need_float(c, "X", x) || !reg_infer_need_float(c, "Y", y)) return false;
  Shape s;
  if (!reg_infer_broadcast(c, &x->shape, &y->shape, &s)) return false;
  reg_infer_set(c, "Out", 0, DT_F32, &s);
  return true;
}

/* ---- dropout, layer_norm ---------------------------------------------------- */

static bool infer_dropout(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X");
  if (!x || !reg_infer_need_float(c, "X", x)) return false;
  double p = reg_infer_attr_f(c, "p");
  if (!(p >= 0 && p < 1)) return reg_infer_fail(c, "p must be in [0, 1), got %g", p);
  reg_infer_set(c, "Out", 0, DT_F32, &x->shape);
  reg_infer_set(c, "Mask", 0, DT_F32, &x->shape);
  return true;
}

/* Scale and Bias of layer_norm: shape X.shape[k:] or [prod(X.shape[k:])]. */
static bool norm_param_fits(InferCtx *c, const char *slot, const Shape *xs, int k) {
  const VarDesc *v = reg_infer_in(c, slot, 0);
  if (!v) return true;   /* optional */
  if (!reg_infer_need_float(c, slot, v)) return false;
  const Shape *ps = &v->shape;
  if (ps->rank < 0) return true;
  Shape tail = shape_scalar(), flat = shape_scalar();
  tail.rank = xs->rank - k;
  memcpy(tail.d, xs->d + k, sizeof(Dim) * (size_t)tail.rank);
  /* the flattened form: a size when all are known, a lone symbol, else "?" */
  int64_t p = 1;
  int nsym = 0, other = 0;
  Dim sym = dim_unknown();
  for (int i = 0; i < tail.rank; i++) {
    Dim d = tail.d[i];
    if (dim_known(d) && (d.n == 0 || p <= INT64_MAX / d.n)) p *= d.n;
    else if (!d.sym) other++;
    else if (nsym++ == 0) sym = d;
  }
  flat.rank = 1;
  flat.d[0] = other || nsym > 1 || (nsym == 1 && p != 1) ? dim_unknown() : nsym ? sym : dim_n(p);
  Dim scratch[SHAPE_MAX_RANK];
  if (ps->rank == tail.rank && dims_agree(ps->d, tail.d, tail.rank, scratch)) return true;
  if (ps->rank == 1 && dims_agree(ps->d, flat.d, 1, scratch)) return true;
  char a[128], b[128], t[128], f[128];
  return reg_infer_fail(c, "%s has shape %s but X has shape %s normalized from axis %d: expected %s or %s",
                        slot, shape_str(ps, a, sizeof a), shape_str(xs, b, sizeof b), k,
                        shape_str(&tail, t, sizeof t), shape_str(&flat, f, sizeof f));
}

static bool infer_layer_norm(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X");
  if (!x || !reg_infer_need_float(c, "X", x)) return false;
  if (!(reg_infer_attr_f(c, "epsilon") >= 0))
    return reg_infer_fail(c, "epsilon must not be negative, got %g", reg_infer_attr_f(c, "epsilon"));
  const Shape *xs = &x->shape;
  if (xs->rank == 0) return reg_infer_fail(c, "X must have rank 1 or more, got a scalar");
  if (xs->rank > 0) {
    int k;
    if (!reg_infer_norm_axis(c, "begin_norm_axis", reg_infer_attr_i(c, "begin_norm_axis"), "X", xs, &k) ||
        !norm_param_fits(c, "Scale", xs, k) || !norm_param_fits(c, "Bias", xs, k))
      return false;
  }
  reg_infer_set(c, "Y", 0, DT_F32, xs);
  return true;
}

/* ---- batch_norm ------------------------------------------------------------------ */

/* Input `slot` of batch_norm: float, of shape [C] (c: X's channel axis). */
static bool channel_vec(InferCtx *c, const char *slot, const Shape *xs, Dim ch) {
  const VarDesc *v = reg_infer_input(c, slot);
  if (!v || !reg_infer_need_float(c, slot, v)) return false;
  Dim scratch;
  if (v->shape.rank < 0 || (v->shape.rank == 1 && dims_agree(v->shape.d, &ch, 1, &scratch))) return true;
  char a[128], b[128], w[64];
  Shape want = {.rank = 1, .d = {ch}};
  return reg_infer_fail(c, "%s has shape %s but X has shape %s: expected %s, one value per channel", slot,
                        shape_str(&v->shape, a, sizeof a), shape_str(xs, b, sizeof b), shape_str(&want, w, sizeof w));
}

/* X [N, C, ...]; Scale, Bias, Mean and Variance [C]; Training one bool. */
static bool infer_batch_norm(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X"), *t = reg_infer_input(c, "Training");
  if (!x || !t || !reg_infer_need_float(c, "X", x)) return false;
  const Shape *xs = &x->shape;
  char a[128];
  if (xs->rank >= 0 && xs->rank < 2)
    return reg_infer_fail(c, "X must have shape [N, C] or [N, C, ...], got %s", shape_str(xs, a, sizeof a));
  Dim ch = xs->rank >= 2 ? xs->d[1] : dim_unknown();
  static const char *const vecs[] = {"Scale", "Bias", "Mean", "Variance"};
  for (int k = 0; k < 4; k++)
    if (!channel_vec(c, vecs[k], xs, ch)) return false;
  bool one = t->shape.rank >= 0;
  for (int i = 0; i < t->shape.rank; i++) one &= !dim_known(t->shape.d[i]) || t->shape.d[i].n == 1;
  if (t->dtype != DT_BOOL || (t->shape.rank >= 0 && !one))
    return reg_infer_fail(c, "Training must be one bool, got %s%s", dtype_name(t->dtype),
                          shape_str(&t->shape, a, sizeof a));
  if (!(reg_infer_attr_f(c, "epsilon") >= 0))
    return reg_infer_fail(c, "epsilon must not be negative, got %g", reg_infer_attr_f(c, "epsilon"));
  Shape cs = {.rank = 1, .d = {ch}};
  reg_infer_set(c, "Y", 0, DT_F32, xs);
  reg_infer_set(c, "MeanOut", 0, DT_F32, &cs);
  reg_infer_set(c, "VarianceOut", 0, DT_F32, &cs);
  return true;
}

/* fused_batch_norm: batch_norm's, and Residual (if given) of X's shape. */
static bool infer_fused_batch_norm(InferCtx *c) {
  if (!infer_batch_norm(c)) return false;
  const VarDesc *x = reg_infer_input(c, "X"), *r = reg_infer_in(c, "Residual", 0);
  char a[128], b[128];
  if (r && (r->dtype != x->dtype || !shape_eq(&r->shape, &x->shape)))
    return reg_infer_fail(c, "Residual %s%s must be X's %s%s", dtype_name(r->dtype), shape_str(&r->shape, a, sizeof a),
                          dtype_name(x->dtype), shape_str(&x->shape, b, sizeof b));
  if (reg_infer_out_count(c, "Stats")) {
    Shape ss = {.rank = 2, .d = {dim_n(2), x->shape.rank >= 2 ? x->shape.d[1] : dim_unknown()}};
    reg_infer_set(c, "Stats", 0, DT_F64, &ss);
  }
  if (reg_infer_out_count(c, "Coef")) {
    Shape cs = {.rank = 2, .d = {x->shape.rank >= 2 ? x->shape.d[1] : dim_unknown(), dim_n(3)}};
    reg_infer_set(c, "Coef", 0, x->dtype, &cs);
  }
  return true;
}

/* ---- embedding, accuracy ------------------------------------------------------- */

static bool infer_embedding(InferCtx *c) {
  const VarDesc *ids = reg_infer_input(c, "Ids"), *w = reg_infer_input(c, "W");
  if (!ids || !w || !need_i64(c, "Ids", ids) || !reg_infer_need_float(c, "W", w)) return false;
  char a[128];
  if (w->shape.rank >= 0 && w->shape.rank != 2)
    return reg_infer_fail(c, "W must have shape [V, D], got %s", shape_str(&w->shape, a, sizeof a));
  Shape s = ids->shape;
  if (s.rank >= SHAPE_MAX_RANK)
    return reg_infer_fail(c, "Ids of shape %s would give a result of rank %d, more than 8",
                          shape_str(&s, a, sizeof a), s.rank + 1);
  if (s.rank >= 0) s.d[s.rank++] = w->shape.rank == 2 ? w->shape.d[1] : dim_unknown();
  reg_infer_set(c, "Out", 0, w->dtype, &s);
  return true;
}

static bool infer_accuracy(InferCtx *c) {
  const VarDesc *lg = reg_infer_input(c, "Logits"), *lb = reg_infer_input(c, "Label");
  if (!lg || !lb || !reg_infer_need_float(c, "Logits", lg) || !need_i64(c, "Label", lb)) return false;
  char a[128], b[128], w[300];
  const Shape *ls = &lg->shape;
  if (ls->rank >= 0 && ls->rank != 2)
    return reg_infer_fail(c, "Logits must have shape [N, C], got %s", shape_str(ls, a, sizeof a));
  int64_t k = reg_infer_attr_i(c, "k");
  if (k <= 0) return reg_infer_fail(c, "k must be positive, got %lld", (long long)k);
  if (ls->rank == 2) {
    if (dim_known(ls->d[1]) && k > ls->d[1].n)
      return reg_infer_fail(c, "k=%lld is more than the %lld classes of Logits (shape %s)", (long long)k,
                            (long long)ls->d[1].n, shape_str(ls, a, sizeof a));
    Shape lead = *ls, merged;
    lead.rank = 1;
    if (!label_fits(&lb->shape, &lead, &merged))
      return reg_infer_fail(c, "Label has shape %s but Logits has shape %s: expected %s",
                            shape_str(&lb->shape, a, sizeof a), shape_str(ls, b, sizeof b),
                            label_want(&lead, w, sizeof w));
  }
  Shape s = shape_scalar();
  reg_infer_set(c, "Out", 0, DT_F32, &s);
  return true;
}

/* ---- kernels: helpers ----------------------------------------------------------- */

/* Input `slot` as f32: a new reference (to the value itself when it already
 * is f32, else to a promoted copy).  opt_f32 is for optional inputs: NULL if
 * absent. */
static Tensor *in_f32(ExecCtx *c, int slot) { return tensor_cast(exec_ctx_in(c, slot), DT_F32); }

/* Input `slot` as f64 if it is f64, else as f32 (in_f32). */
static Tensor *in_float(ExecCtx *c, int slot) {
  Tensor *t = exec_ctx_in(c, slot);
  return t->dtype == DT_F64 ? tensor_ref(t) : tensor_cast(t, DT_F32);
}

static Tensor *opt_f32(ExecCtx *c, int slot) {
  Tensor *t = exec_ctx_in(c, slot);
  return t ? tensor_cast(t, DT_F32) : NULL;
}

/* The same in f64 (an op computing in f64). */
static Tensor *in_f64(ExecCtx *c, int slot) { return tensor_cast(exec_ctx_in(c, slot), DT_F64); }

static Tensor *opt_f64(ExecCtx *c, int slot) {
  Tensor *t = exec_ctx_in(c, slot);
  return t ? tensor_cast(t, DT_F64) : NULL;
}

static int64_t prod(const int64_t *d, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++) p *= d[i];
  return p;
}

/* Where flat element i of t sits, for a message: "Label[1, 0]", or just
 * "Label" for a scalar. */
static const char *position(const char *name, const Tensor *t, int64_t i, char *buf, size_t n) {
  int64_t idx[SHAPE_MAX_RANK];
  for (int d = t->rank - 1; d >= 0; d--) {
    idx[d] = t->shape[d] ? i % t->shape[d] : 0;
    i = t->shape[d] ? i / t->shape[d] : 0;
  }
  size_t len = (size_t)snprintf(buf, n, "%s", name);
  for (int d = 0; d < t->rank && len < n; d++)
    len += (size_t)snprintf(buf + len, n - len, "%s%lld%s", d ? ", " : "[", (long long)idx[d],
                            d == t->rank - 1 ? "]" : "");
  return buf;
}

/* Reports element i of index tensor `t` (slot `name`): its value v is not
 * one of the n `what` of `of`, as in "Label[1] = 5 is out of range: Logits
 * has 3 classes (0 to 2)". */
static int index_fail(ExecCtx *c, const char *name, const Tensor *t, int64_t i, int64_t v,
                      const char *of, int64_t n, const char *what) {
  char pos[160], range[64] = "";
  if (n > 0) snprintf(range, sizeof range, " (0 to %lld)", (long long)(n - 1));
  return exec_ctx_fail(c, "%s = %lld is out of range: %s has %lld %s%s",
                       position(name, t, i, pos, sizeof pos), (long long)v, of, (long long)n, what,
                       range);
}

/* 0 if label l (element r of Label lb) names one of ncls classes, else
 * the error. */
static int label_check(ExecCtx *c, const Tensor *lb, int64_t r, int64_t l, int64_t ncls) {
  return l < 0 || l >= ncls ? index_fail(c, "Label", lb, r, l, "Logits", ncls, "classes") : 0;
}

/* ---- kernels: softmax and losses ------------------------------------------------ */

/* softmax / log_softmax of X along `axis`.  X is viewed as [outer, n, inner]
 * with the axis in the middle; the `inner` rows sharing an outer index are
 * done together so every loop walks memory in order.  The exps go into e
 * (the output for softmax; a buffer for log_softmax, which reads X after),
 * through vmath.h's vectorized exp; m and s hold each row's maximum and
 * sum in double.  A contiguous row (inner = 1) takes vmath's maximum and
 * sum, in lanes. */
/* The loops of softmax_run for element type T (EXPS, MAX, SUM: vmath.h's). */
#define SOFTMAX_LOOPS(NAME, T, EXPS, MAX, SUM)                                                                  \
static void NAME(const T *xv, T *yv, int64_t outer, int64_t n, int64_t inner, bool log_out, T *m, double *s,    \
                 T *e) {                                                                                        \
  for (int64_t o = 0; o < outer; o++) {                                                                         \
    const T *xp = xv + o * n * inner;                                                                           \
    T *yp = yv + o * n * inner;                                                                                 \
    if (!log_out) e = yp;                                                                                       \
    if (inner == 1) m[0] = MAX(xp, n);                                                                          \
    else {                                                                                                      \
      for (int64_t i = 0; i < inner; i++) m[i] = xp[i];                                                         \
      for (int64_t j = 1; j < n; j++)                                                                           \
        for (int64_t i = 0; i < inner; i++)                                                                     \
          if (xp[j * inner + i] > m[i]) m[i] = xp[j * inner + i];                                               \
    }                                                                                                           \
    for (int64_t j = 0; j < n; j++)                                                                             \
      for (int64_t i = 0; i < inner; i++) e[j * inner + i] = xp[j * inner + i] - m[i];                          \
    EXPS(e, n * inner);                                                                                         \
    if (inner == 1) s[0] = SUM(e, n);                                                                           \
    else {                                                                                                      \
      for (int64_t i = 0; i < inner; i++) s[i] = 0;                                                             \
      for (int64_t j = 0; j < n; j++)                                                                           \
        for (int64_t i = 0; i < inner; i++) s[i] += (double)e[j * inner + i];                                   \
    }                                                                                                           \
    if (log_out) {                                                                                              \
      for (int64_t i = 0; i < inner; i++) s[i] = log(s[i]);                                                     \
      for (int64_t j = 0; j < n; j++)                                                                           \
        for (int64_t i = 0; i < inner; i++)                                                                     \
          yp[j * inner + i] = (T)((double)(xp[j * inner + i] - m[i]) - s[i]);                                   \
    } else {                                                                                                    \
      for (int64_t i = 0; i < inner; i++) s[i] = 1 / s[i];                                                      \
      for (int64_t j = 0; j < n; j++)                                                                           \
        for (int64_t i = 0; i < inner; i++)                                                                     \
          yp[j * inner + i] = (T)((double)yp[j * inner + i] * s[i]);                                            \
    }                                                                                                           \
  }                                                                                                             \
}
SOFTMAX_LOOPS(softmax_f32, float, vmath_exp_f32, vmath_max_f32, vmath_sum_f32)
SOFTMAX_LOOPS(softmax_f64, double, vmath_exp_f64, vmath_max_f64, vmath_sum_f64)

static int softmax_run(ExecCtx *c, bool log_out) {
  Tensor *x = in_float(c, 0), *out = exec_ctx_out(c, 0);
  int axis = (int)exec_ctx_attr_i(c, "axis");
  if (axis < 0) axis += x->rank;
  int64_t outer = prod(x->shape, 0, axis), n = x->shape[axis],
          inner = prod(x->shape, axis + 1, x->rank);
  if (x->numel == 0) {
    tensor_unref(x);
    return 0;
  }
  size_t es = dtype_size(x->dtype);
  void *m = mem_alloc(NULL, es * (size_t)inner), *e = log_out ? mem_alloc(NULL, es * (size_t)(n * inner)) : NULL;
  double *s = mem_alloc(NULL, sizeof *s * (size_t)inner);
  if (x->dtype == DT_F64) softmax_f64(tensor_f64(x), tensor_f64(out), outer, n, inner, log_out, m, s, e);
  else softmax_f32(tensor_f32(x), tensor_f32(out), outer, n, inner, log_out, m, s, e);
  mem_free(m);
  mem_free(e);
  mem_free(s);
  tensor_unref(x);
  return 0;
}

static int k_softmax(ExecCtx *c) { return softmax_run(c, false); }
static int k_log_softmax(ExecCtx *c) { return softmax_run(c, true); }

/* softmax_cross_entropy and its grad per row of x, for element type T: with
 * m the row's maximum and s the sum of exp(x - m) in double, the loss
 * y[r] = m - x[l] + log(s) (d NULL, the exps in e, a row's buffer), or the
 * gradient d's row = (exp(x - m) / s - onehot(l)) * gl[r], the softmax
 * recomputed stably into it (y NULL).  One row at a time, each pass over
 * it (maximum, shift, exp, sum, scale) while it is in cache; EXPS, MAX
 * and SUM are vmath.h's.  Rows r0..r1 - 1, their labels checked. */
#define SOFTMAX_CE_LOOPS(NAME, T, EXPS, MAX, SUM)                                                                 \
static void NAME(const T *x, const int64_t *label, int64_t r0, int64_t r1, int64_t ncls, T *y, const T *gl, T *d,  \
                 T *e) {                                                                                          \
  for (int64_t r = r0; r < r1; r++) {                                                                             \
    int64_t l = label[r];                                                                                         \
    const T *row = x + r * ncls;                                                                                  \
    T *er = d ? d + r * ncls : e;                                                                                 \
    T m = MAX(row, ncls);                                                                                         \
    for (int64_t j = 0; j < ncls; j++) er[j] = row[j] - m;                                                        \
    EXPS(er, ncls);                                                                                               \
    double s = SUM(er, ncls);                                                                                     \
    if (!d) {   /* (max - x[l]) first: both are large for large logits, their difference is not */                \
      y[r] = (T)((double)(m - row[l]) + log(s));                                                                  \
      continue;                                                                                                   \
    }                                                                                                             \
    T k = (T)((double)gl[r] / s);                                                                                 \
    for (int64_t j = 0; j < ncls; j++) er[j] *= k;                                                                \
    er[l] -= gl[r];                                                                                               \
  }                                                                                                               \
}
SOFTMAX_CE_LOOPS(softmax_ce_f32, float, vmath_exp_f32, vmath_max_f32, vmath_sum_f32)
SOFTMAX_CE_LOOPS(softmax_ce_f64, double, vmath_exp_f64, vmath_max_f64, vmath_sum_f64)

/* A softmax_cross_entropy (or its grad) call: its rows in blocks of
 * CE_ROWS on the pool (par_parts), each row's result its own (the same
 * bits on any number of threads), each thread's row buffer e its own
 * (par_slot). */
#define CE_ROWS 64
typedef struct CeJob {
  bool f64;
  const void *x, *gl;
  const int64_t *label;
  int64_t rows, ncls;
  void *y, *d;
  char *e;
  size_t ebytes;
} CeJob;

static void ce_part(void *arg, int64_t p) {
  const CeJob *j = arg;
  int64_t r0 = p * CE_ROWS, r1 = r0 + CE_ROWS < j->rows ? r0 + CE_ROWS : j->rows;
  void *e = j->e ? j->e + j->ebytes * (size_t)par_slot() : NULL;
  if (j->f64) softmax_ce_f64(j->x, j->label, r0, r1, j->ncls, j->y, j->gl, j->d, e);
  else softmax_ce_f32(j->x, j->label, r0, r1, j->ncls, j->y, j->gl, j->d, e);
}

/* Checks every label (the first bad one is the error), then runs the rows. */
static int ce_run(ExecCtx *c, const Tensor *lb, CeJob *j) {
  j->label = tensor_i64(lb);
  for (int64_t r = 0; r < j->rows; r++)
    if (label_check(c, lb, r, j->label[r], j->ncls) < 0) return -1;
  int64_t parts = (j->rows + CE_ROWS - 1) / CE_ROWS;
  bool many = parts > 1 && j->rows * j->ncls >= PAR_MIN_WORK;
  j->ebytes = (j->f64 ? sizeof(double) : sizeof(float)) * (size_t)j->ncls;
  j->e = j->d ? NULL : mem_alloc(NULL, j->ebytes * (size_t)(many ? par_max_threads() : 1));
  if (many) par_parts(parts, ce_part, j);
  else
    for (int64_t p = 0; p < parts; p++) ce_part(j, p);
  mem_free(j->e);
  return 0;
}

/* Loss[r] = logsumexp(Logits[r]) - Logits[r, Label[r]]. */
static int k_softmax_ce(ExecCtx *c) {
  Tensor *lg = in_float(c, 0), *lb = exec_ctx_in(c, 1), *loss = exec_ctx_out(c, 0);
  CeJob j = {.f64 = lg->dtype == DT_F64, .x = lg->data, .rows = prod(lg->shape, 0, lg->rank - 1),
             .ncls = lg->shape[lg->rank - 1], .y = loss->data};
  int rc = ce_run(c, lb, &j);
  tensor_unref(lg);
  return rc;
}

/* Out = max(x, 0) - x z + log1p(exp(-|x|)): never exp of a large number. */
static int k_sigmoid_ce(ExecCtx *c) {
  if (exec_ctx_out(c, 0)->dtype == DT_F64) {   /* the same in double (the executor made X and Label f64) */
    Tensor *x = exec_ctx_in(c, 0), *z = exec_ctx_in(c, 1), *out = exec_ctx_out(c, 0);
    for (int64_t i = 0; i < out->numel; i++) {
      double a = tensor_get(x, i);
      tensor_f64(out)[i] = fmax(a, 0) - a * tensor_get(z, i) + log1p(exp(-fabs(a)));
    }
    return 0;
  }
  Tensor *x = in_f32(c, 0), *z = in_f32(c, 1), *out = exec_ctx_out(c, 0);
  const float *xv = tensor_f32(x), *zv = tensor_f32(z);
  float *y = tensor_f32(out);
  for (int64_t i = 0; i < out->numel; i++) {
    double a = xv[i];
    y[i] = (float)(fmax(a, 0) - a * (double)zv[i] + log1p(exp(-fabs(a))));
  }
  tensor_unref(x);
  tensor_unref(z);
  return 0;
}

/* The loop of k_mse for element type T. */
#define MSE_LOOP(NAME, T)                                                       \
  static void NAME(const Bcast *b, const T *xv, const T *tv, T *y) {            \
    BcastIter it;                                                               \
    bcast_iter_init(&it, b);                                                    \
    do {                                                                        \
      const T *xp = xv + it.off[0], *tp = tv + it.off[1];                       \
      T *yp = y + it.out;                                                       \
      for (int64_t i = 0; i < b->inner; i++) {                                  \
        T d = xp[i * b->inner_step[0]] - tp[i * b->inner_step[1]];              \
        yp[i] = d * d;                                                          \
      }                                                                         \
    } while (bcast_iter_next(&it));                                             \
  }
MSE_LOOP(mse_f32, float)
MSE_LOOP(mse_f64, double)

static int k_mse(ExecCtx *c) {
  Tensor *x = in_float(c, 0), *t = in_float(c, 1), *out = exec_ctx_out(c, 0);
  Bcast b;
  int rc = 0;
  if (!bcast_init(&b, x, t)) {
    rc = exec_ctx_fail(c, "X and Y do not broadcast");
  } else if (out->numel > 0 && out->dtype == DT_F64 && x->dtype == DT_F64 && t->dtype == DT_F64) {
    mse_f64(&b, tensor_f64(x), tensor_f64(t), tensor_f64(out));
  } else if (out->numel > 0) {
    mse_f32(&b, tensor_f32(x), tensor_f32(t), tensor_f32(out));
  }
  tensor_unref(x);
  tensor_unref(t);
  return rc;
}

/* ---- kernels: dropout, layer_norm ----------------------------------------------- */

/* Inverted dropout, as in PyTorch: Mask = (u >= p) / (1 - p) with u uniform in
 * [0, 1), Out = X * Mask, so the expected value of Out is X and nothing needs
 * rescaling at test time.  seed = 0 draws from the run's generator (each call
 * a new mask); a non-zero seed seeds a private generator per call (the same
 * mask every call). */
/* dropout in f64: the mask of the same draws as f32's. */
static void dropout64(ExecCtx *c, const Tensor *x, Tensor *out, Tensor *mask, double p) {
  int64_t seed = exec_ctx_attr_i(c, "seed"), n = x->numel;
  double *y = tensor_f64(out), *mv = tensor_f64(mask);
  bool pass = exec_ctx_attr_b(c, "is_test") || p == 0;
  Rng own, *rng = exec_ctx_rng(c);
  if (!pass && seed != 0) {
    rng_seed(&own, (uint64_t)seed);
    rng = &own;
  }
  double keep = 1 / (1 - p);
  for (int64_t i = 0; i < n; i++) {
    mv[i] = pass ? 1 : rng_uniform(rng) >= p ? keep : 0;
    y[i] = tensor_get(x, i) * mv[i];
  }
}

static int k_dropout(ExecCtx *c) {
  if (exec_ctx_out(c, 0)->dtype == DT_F64) {
    dropout64(c, exec_ctx_in(c, 0), exec_ctx_out(c, 0), exec_ctx_out(c, 1), exec_ctx_attr_f(c, "p"));
    return 0;
  }
  Tensor *x = in_f32(c, 0), *out = exec_ctx_out(c, 0), *mask = exec_ctx_out(c, 1);
  double p = exec_ctx_attr_f(c, "p");
  int64_t seed = exec_ctx_attr_i(c, "seed");
  const float *xv = tensor_f32(x);
  float *y = tensor_f32(out), *mv = tensor_f32(mask);
  int64_t n = x->numel;
  if (exec_ctx_attr_b(c, "is_test") || p == 0) {
    memcpy(y, xv, sizeof *y * (size_t)n);
    for (int64_t i = 0; i < n; i++) mv[i] = 1;
  } else {
    Rng own, *rng = exec_ctx_rng(c);
    if (seed != 0) {
      rng_seed(&own, (uint64_t)seed);
      rng = &own;
    }
    float keep = (float)(1 / (1 - p));
    for (int64_t i = 0; i < n; i++) {
      mv[i] = rng_uniform(rng) >= p ? keep : 0;
      y[i] = xv[i] * mv[i];
    }
  }
  tensor_unref(x);
  return 0;
}

/* layer_norm's rows: begin_norm_axis splits X's shape into rows of n
 * normalized values. */
static void norm_rows(ExecCtx *c, const Tensor *x, int64_t *rows, int64_t *n) {
  int k = (int)exec_ctx_attr_i(c, "begin_norm_axis");
  if (k < 0) k += x->rank;
  *rows = prod(x->shape, 0, k);
  *n = prod(x->shape, k, x->rank);
}

/* The sum of eight running sums, pairwise: the order every lane sum below
 * ends in. */
static inline double lanes_total(const double *s) {
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* The sum over i < n of (double)a[i] * b[i] (b NULL: of a[i]), in eight
 * running sums (i mod 8) added pairwise: the compiler vectorizes it,
 * where one running sum is a chain of dependent adds. */
static inline double lanes_dot(const double *a, const double *b, int64_t n) {
  double s[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) s[k] += b ? a[i + k] * b[i + k] : a[i + k];
  for (int k = 0; i + k < n; k++) s[k] += b ? a[i + k] * b[i + k] : a[i + k];
  return lanes_total(s);
}

/* The mean of the n values xp into *mean and 1 / sqrt(variance + eps),
 * the biased variance, in two passes over the row in double (the forward
 * and the grad compute them alike), each in eight running sums. */
/* row_moments_S for element type T. */
#define ROW_MOMENTS(NAME, T)                                                   \
static inline double NAME(const T *xp, int64_t n, double eps, double *mean) {  \
  double s[8] = {0}, q[8] = {0};                                               \
  int64_t i = 0;                                                               \
  for (; i + 8 <= n; i += 8)                                                   \
    for (int k = 0; k < 8; k++) s[k] += (double)xp[i + k];                     \
  for (int k = 0; i + k < n; k++) s[k] += (double)xp[i + k];                   \
  double m = lanes_total(s) / (double)n;                                       \
  for (i = 0; i + 8 <= n; i += 8)                                              \
    for (int k = 0; k < 8; k++) {                                              \
      double d = (double)xp[i + k] - m;                                        \
      q[k] += d * d;                                                           \
    }                                                                          \
  for (int k = 0; i + k < n; k++) {                                            \
    double d = (double)xp[i + k] - m;                                          \
    q[k] += d * d;                                                             \
  }                                                                            \
  *mean = m;                                                                   \
  return 1 / sqrt(lanes_total(q) / (double)n + eps);                           \
}
ROW_MOMENTS(row_moments_f32, float)
ROW_MOMENTS(row_moments_f64, double)

/* One row of layer_norm: y = ((x - mean) * inv) * s + b, s and b where
 * given; a loop for each case, so that each is vectorized. */
/* ln_row_S for element type T. */
#define LN_ROW(NAME, T)                                                                                   \
static inline void NAME(const T *restrict x, T *restrict y, const T *restrict s, const T *restrict b,    \
                        int64_t n, double mean, double inv) {                                             \
  if (s && b)                                                                                             \
    for (int64_t i = 0; i < n; i++) y[i] = (T)(((double)x[i] - mean) * inv * (double)s[i] + (double)b[i]); \
  else if (s)                                                                                             \
    for (int64_t i = 0; i < n; i++) y[i] = (T)(((double)x[i] - mean) * inv * (double)s[i]);              \
  else if (b)                                                                                             \
    for (int64_t i = 0; i < n; i++) y[i] = (T)(((double)x[i] - mean) * inv + (double)b[i]);              \
  else                                                                                                    \
    for (int64_t i = 0; i < n; i++) y[i] = (T)(((double)x[i] - mean) * inv);                             \
}
LN_ROW(ln_row_f32, float)
LN_ROW(ln_row_f64, double)

typedef double V8d __attribute__((vector_size(64)));
typedef float V8s __attribute__((vector_size(32)));

/* layer_norm's rows r0..r1 - 1 of n values: blocks of LN_ROWS rows go to
 * the threads (the pool: LnJob below), each row's result its own (the
 * same bits on any number).
 * Each row function comes in an AVX2 version (VMATH_CLONES). */
#define LN_ROWS 32
/* ln_rows_S for element type T. */
#define LN_ROWS_FN(NAME, T, S)                                                                      \
VMATH_CLONES static void NAME(const T *x, T *y, const T *sv, const T *bv, int64_t r0, int64_t r1,  \
                              int64_t n, double eps) {                                             \
  for (int64_t r = r0; r < r1; r++) {                                                              \
    double mean, inv = row_moments_##S(x + r * n, n, eps, &mean);                                  \
    ln_row_##S(x + r * n, y + r * n, sv, bv, n, mean, inv);                                        \
  }                                                                                                \
}
LN_ROWS_FN(ln_rows_f32, float, f32)
LN_ROWS_FN(ln_rows_f64, double, f64)

/* A layer_norm or layer_norm_grad call's parts, for the pool: par_parts,
 * which runs the GEMMs around a transformer's layer norms too, so a step
 * wakes one set of threads (src/exec/par.c), not an OpenMP thread beside
 * the pool's. */
typedef struct LnJob {
  const void *x, *sv, *bv, *dy;
  void *y, *dx;
  double *as, *ab, *buf;   /* the gradient's column sums and row buffers, w a part */
  int64_t rows, n, per, w;  /* per: rows a part (the forward's: LN_ROWS) */
  double eps;
} LnJob;

/* fn for each of parts on the pool when there is work enough, else here. */
static void ln_run(LnJob *j, int64_t parts, ParPart fn) {
  if (parts > 1 && j->rows * j->n >= PAR_MIN_WORK) par_parts(parts, fn, j);
  else
    for (int64_t p = 0; p < parts; p++) fn(j, p);
}

/* The forward's part p: rows p * LN_ROWS onwards. */
#define LN_PART(NAME, T, S)                                                                           static void NAME(void *arg, int64_t p) {                                                              const LnJob *j = arg;                                                                               int64_t r0 = p * j->per, r1 = r0 + j->per < j->rows ? r0 + j->per : j->rows;                        ln_rows_##S(j->x, j->y, j->sv, j->bv, r0, r1, j->n, j->eps);                                      }
LN_PART(ln_part_f32, float, f32)
LN_PART(ln_part_f64, double, f64)

/* NAME_f32 and NAME_f64 from TEMPLATE (its arguments: the function's name,
 * the element type T and its suffix S, which names T's helpers: tensor_S,
 * in_S, row_moments_S, ...), and k_NAME, which runs NAME_f64 when tensor
 * WHICH is f64, else NAME_f32. */
#define DTYPE_f32 DT_F32
#define DTYPE_f64 DT_F64
#define F32_F64(NAME, TEMPLATE, WHICH)                                          \
  TEMPLATE(NAME##_f32, float, f32)                                              \
  TEMPLATE(NAME##_f64, double, f64)                                             \
  static int k_##NAME(ExecCtx *c) { return (WHICH)->dtype == DT_F64 ? NAME##_f64(c) : NAME##_f32(c); }

/* Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias, with mean and biased
 * variance over the trailing axes from begin_norm_axis; Scale and Bias have
 * those axes' shape or its product, so both index as flat rows. */
/* layer_norm for element type T (suffix S: see F32_F64). */
#define LAYER_NORM(NAME, T, S)                                                                        \
static int NAME(ExecCtx *c) {                                                                         \
  Tensor *x = in_##S(c, 0), *sc = opt_##S(c, 1), *bi = opt_##S(c, 2), *out = exec_ctx_out(c, 0);      \
  double eps = exec_ctx_attr_f(c, "epsilon");                                                         \
  int64_t rows, n;                                                                                    \
  norm_rows(c, x, &rows, &n);                                                                         \
  int rc = 0;                                                                                         \
  if ((sc && sc->numel != n) || (bi && bi->numel != n)) {                                             \
    rc = exec_ctx_fail(c, "%s has %lld elements but each normalized row has %lld",                    \
                       sc && sc->numel != n ? "Scale" : "Bias",                                       \
                       (long long)(sc && sc->numel != n ? sc : bi)->numel, (long long)n);             \
    rows = 0;                                                                                         \
  }                                                                                                   \
  const T *sv = sc ? tensor_##S(sc) : NULL, *bv = bi ? tensor_##S(bi) : NULL;                         \
  LnJob j = {.x = tensor_##S(x), .y = tensor_##S(out), .sv = sv, .bv = bv, .rows = rows, .n = n,      \
             .per = LN_ROWS, .eps = eps};                                                             \
  ln_run(&j, n > 0 ? (rows + LN_ROWS - 1) / LN_ROWS : 0, ln_part_##S);                                \
  tensor_unref(x);                                                                                    \
  tensor_unref(sc);                                                                                   \
  tensor_unref(bi);                                                                                   \
  return rc;                                                                                          \
}
F32_F64(layer_norm, LAYER_NORM, exec_ctx_out(c, 0))

/* ---- kernels: batch_norm ------------------------------------------------------------ */

/* X [N, C, ...] viewed as [n, ch, hw]: channel k's values are the n runs
 * X[b, k, :] of hw contiguous floats. */
typedef struct BnGeom {
  int64_t n, ch, hw;
} BnGeom;

static BnGeom bn_geom(const Tensor *x) { return (BnGeom){x->shape[0], x->shape[1], prod(x->shape, 2, x->rank)}; }

/* f32 runs in vectors (grad_sums below): lane l of a V4d sums what a[l]
 * sums in the scalar version, in the same order, so the results are the
 * same bits; the compiler left the four scalar lanes scalar.  These loops
 * (and batch norm's elementwise ones below) come in AVX2 and AVX-512
 * versions too (VMATH_CLONES), with no multiply-add contracted in any, so
 * all give the same bits. */
typedef float V4s __attribute__((vector_size(16)));
typedef double V4d __attribute__((vector_size(32)));
/* (through pointers: a function taking or returning a 32-byte vector has
 * another ABI with AVX than without) */
static inline void load4d(V4d *d, const float *p) {
  V4s v;
  memcpy(&v, p, sizeof v);
  *d = __builtin_convertvector(v, V4d);
}
static inline double lanes_sum(const V4d *v) { return ((*v)[0] + (*v)[1]) + ((*v)[2] + (*v)[3]); }

/* Adds sum(gp) to *sg and sum(gp (xp - m)) to *sgx over a run of n, in
 * four lanes of double (independent sums the CPU overlaps), added up in a
 * fixed order. */
/* grad_sums_S for element type T. */
#define GRAD_SUMS(NAME, T)                                                                    \
static inline void NAME(const T *gp, const T *xp, T m, int64_t n, double *sg, double *sgx) {  \
  double a[4] = {0}, b[4] = {0};                                                              \
  int64_t i = 0;                                                                              \
  for (; i + 4 <= n; i += 4)                                                                  \
    for (int l = 0; l < 4; l++) {                                                             \
      a[l] += (double)gp[i + l];                                                              \
      b[l] += (double)gp[i + l] * (double)(xp[i + l] - m);                                    \
    }                                                                                         \
  for (; i < n; i++) {                                                                        \
    a[0] += (double)gp[i];                                                                    \
    b[0] += (double)gp[i] * (double)(xp[i] - m);                                              \
  }                                                                                           \
  *sg += (a[0] + a[1]) + (a[2] + a[3]);                                                       \
  *sgx += (b[0] + b[1]) + (b[2] + b[3]);                                                      \
}
GRAD_SUMS(grad_sums_f64, double)

/* grad_sums for f32, in vectors (lanes as channel_moments_f32's: the same bits). */
VMATH_CLONES
static void grad_sums_f32(const float *gp, const float *xp, float m, int64_t n, double *sg, double *sgx) {
  V4d a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
  V4s mv = {m, m, m, m};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    V4s x0;
    memcpy(&x0, xp + i, sizeof x0);
    V4d g0;
    load4d(&g0, gp + i);
    a += g0;
    b += g0 * __builtin_convertvector(x0 - mv, V4d);
  }
  for (; i < n; i++) {
    a[0] += (double)gp[i];
    b[0] += (double)gp[i] * (double)(xp[i] - m);
  }
  *sg += lanes_sum(&a);
  *sgx += lanes_sum(&b);
}

/* fused_batch_norm_grad's grad_sums, with relu_grad's value in place of
 * each gp[i]: Out > 0 ? gp[i] : 0, with the relu's Out made again from x
 * as norm_run made it, v = (x - m) ra + rb, whose sign is Out's (relu(v)
 * > 0 exactly when v > 0, NaN neither): the same float operations, none
 * contracted (vmath.h), so the same bits as relu_grad's then grad_sums',
 * without reading Out.  The value is computed as it is summed: written to
 * a buffer first and read back, the sums waited on each run's last value
 * (the whole gradient took 1.7x its time).  Both values are loaded before
 * the choice, so the compiler makes it a vector blend or mask, not a
 * branch on the data (half of whose outcomes the CPU would mispredict). */
#define GRAD_SUMS_RELU(NAME, T)                                                                              \
static inline void NAME(const T *gp, const T *xp, T m, T ra, T rb, int64_t n, double *sg, double *sgx) {    \
  double a[4] = {0}, b[4] = {0};                                                                             \
  int64_t i = 0;                                                                                             \
  for (; i + 4 <= n; i += 4)                                                                                 \
    for (int l = 0; l < 4; l++) {                                                                            \
      T v = (xp[i + l] - m) * ra + rb, gv = gp[i + l], g = v > 0 ? gv : 0;                                   \
      a[l] += (double)g;                                                                                     \
      b[l] += (double)g * (double)(xp[i + l] - m);                                                           \
    }                                                                                                        \
  for (; i < n; i++) {                                                                                       \
    T v = (xp[i] - m) * ra + rb, gv = gp[i], g = v > 0 ? gv : 0;                                             \
    a[0] += (double)g;                                                                                       \
    b[0] += (double)g * (double)(xp[i] - m);                                                                 \
  }                                                                                                          \
  *sg += (a[0] + a[1]) + (a[2] + a[3]);                                                                      \
  *sgx += (b[0] + b[1]) + (b[2] + b[3]);                                                                     \
}
GRAD_SUMS_RELU(grad_sums_relu_f64, double)

typedef int32_t V4i __attribute__((vector_size(16)));
VMATH_CLONES
static void grad_sums_relu_f32(const float *gp, const float *xp, float m, float ra, float rb, int64_t n, double *sg,
                               double *sgx) {
  V4d a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
  V4s mv = {m, m, m, m}, av = {ra, ra, ra, ra}, bv = {rb, rb, rb, rb}, zero = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    V4s x0, g0;
    memcpy(&x0, xp + i, sizeof x0);
    memcpy(&g0, gp + i, sizeof g0);
    V4s d = x0 - mv;
    g0 = (V4s)((V4i)g0 & (d * av + bv > zero));
    V4d gd = __builtin_convertvector(g0, V4d);
    a += gd;
    b += gd * __builtin_convertvector(d, V4d);
  }
  for (; i < n; i++) {
    float v = (xp[i] - m) * ra + rb, gv = gp[i], g = v > 0 ? gv : 0;
    a[0] += (double)g;
    b[0] += (double)g * (double)(xp[i] - m);
  }
  *sg += lanes_sum(&a);
  *sgx += lanes_sum(&b);
}

/* batch norm's elementwise runs of n values: y = (x - m) a + b, then (fused)
 * the residual r added (r may be NULL) and relu applied; and dX's
 * dx = g a + (x - m) b + d.  The f32 ones with VMATH_CLONES (the same
 * bits in both versions). */
#define BN_RUNS(S, T, ATTR)                                                                        \
ATTR static void norm_run_##S(const T *xp, const T *rp, T *yp, int64_t n, T m, T a, T b, int mode) {  \
  if (mode == 0)                                                                                   \
    for (int64_t i = 0; i < n; i++) yp[i] = (xp[i] - m) * a + b;                                   \
  else if (!rp)                                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                              \
      T v = (xp[i] - m) * a + b;                                                                   \
      yp[i] = mode == 1 || v > 0 || v != v ? v : 0;                                                \
    }                                                                                              \
  else                                                                                             \
    for (int64_t i = 0; i < n; i++) {                                                              \
      T v = (xp[i] - m) * a + b;                                                                   \
      v = v + rp[i];                                                                               \
      yp[i] = mode == 1 || v > 0 || v != v ? v : 0;                                                \
    }                                                                                              \
}                                                                                                  \
ATTR static void dx_run_##S(const T *gp, const T *xp, T *dp, int64_t n, T m, T a, T b, T d) {      \
  for (int64_t i = 0; i < n; i++) dp[i] = gp[i] * a + (xp[i] - m) * b + d;                         \
}                                                                                                  \
/* dx_run of relu_grad's value (grad_sums_relu) */                                                 \
ATTR static void dx_relu_run_##S(const T *gp, const T *xp, T *dp, int64_t n, T m, T a, T b, T d,  \
                                 T ra, T rb) {                                                     \
  for (int64_t i = 0; i < n; i++) {                                                                \
    T v = (xp[i] - m) * ra + rb, gv = gp[i], g = v > 0 ? gv : 0;                                   \
    dp[i] = g * a + (xp[i] - m) * b + d;                                                           \
  }                                                                                                \
}
BN_RUNS(f32, float, VMATH_CLONES)
BN_RUNS(f64, double, )

void vmath_bn_norm_f32(const float *x, const float *res, float *y, int64_t n, const float *coef, bool relu) {
  norm_run_f32(x, res, y, n, coef[0], coef[1], coef[2], relu ? 2 : 1);
}

void vmath_bn_dx_f32(const float *g, const float *x, float *dx, int64_t n, const float *coef, bool relu) {
  if (relu) dx_relu_run_f32(g, x, dx, n, coef[0], coef[1], coef[2], coef[3], coef[4], coef[5]);
  else dx_run_f32(g, x, dx, n, coef[0], coef[1], coef[2], coef[3]);
}

/* Whether batch_norm's Training input says true. */
static bool bn_training(ExecCtx *c) { return tensor_get(exec_ctx_in(c, 5), 0) != 0; }

/* Training needs two values per channel or more (the unbiased variance
 * divides by their count less one), as PyTorch. */
static int bn_check_batch(ExecCtx *c, const Tensor *x, BnGeom g) {
  if (g.n * g.hw >= 2) return 0;
  char a[128];
  return exec_ctx_fail(c, "training needs more than one value per channel, got X of shape %s",
                       tensor_shape_str(x, a, sizeof a));
}

/* A channel's statistics and sums are its runs' (one image's values of
 * it), each run's computed on the team, the runs of consecutive images
 * (their channels in order) on one thread: one stream of memory a thread,
 * and on 2 threads the images its convolution just made, in its caches.
 * The runs' numbers are then added up per channel in image order, as one
 * thread would, so the bits do not depend on the thread count.  (Channels
 * in blocks, one a thread, read half of every image on each of 2 threads:
 * a ResNet's batch norm gradients took 1.3x their 1-thread time.)  The
 * images go in chunks of at most BN_RUNS runs, whose numbers are kept (two
 * doubles a run): a batch norm over [N, C], one value a run, takes 1 MB
 * more, not 4x X's size. */
enum { BN_RUNS = 1 << 16 };

/* Images a chunk. */
static int64_t bn_chunk(BnGeom g) { return g.ch >= BN_RUNS ? 1 : BN_RUNS / (g.ch > 0 ? g.ch : 1); }

/* The doubles a chunk's runs' numbers take: two a run of the largest
 * chunk, no more than the batch has. */
static size_t bn_part_len(BnGeom g) {
  int64_t chunk = bn_chunk(g);
  return (size_t)(2 * (g.n < chunk ? g.n : chunk) * g.ch + 1);
}

/* The batch mean and biased variance of each channel: each run's sum and
 * squared deviations from its mean (vmath_run_moments; or mom, [n, ch, 2],
 * the same numbers the convolution that wrote X computed, conv.c),
 * combined image after image in double as Chan, Golub and LeVeque's
 * pairwise update does: with d the run's mean less the mean so far, the
 * mean moves by d n_b / (n_a + n_b) and the squared deviations gain the
 * run's plus d^2 n_a n_b / (n_a + n_b).  No value is squared far from its
 * run's own, so nothing cancels however far the mean lies from zero.
 * bn_moments_add takes images [b0, b1), run (b, k)'s numbers at rm[2((b -
 * b0) ch + k)], into mu and m2 (zero before the first image); bn_stats
 * makes mean and var (g.ch each), through part (bn_part_len doubles)
 * unless mom has the numbers.  (The forward and the grad compute them
 * alike: the same bits.) */
static void bn_moments_add(const double *rm, BnGeom g, int64_t b0, int64_t b1, double *mu, double *m2) {
  double nb = (double)g.hw;
  for (int64_t b = b0; b < b1; b++) {
    double na = (double)b * nb, t = na + nb;
    for (int64_t k = 0; k < g.ch; k++) {
      const double *q = rm + 2 * ((b - b0) * g.ch + k);
      double rmean = g.hw > 0 ? q[0] / nb : 0, d = rmean - mu[k];
      if (b == 0) mu[k] = rmean, m2[k] = q[1];
      else mu[k] += d * nb / t, m2[k] += q[1] + d * d * na * nb / t;
    }
  }
}

#define BN_STATS(S, T)                                                                                       \
static void bn_stats_##S(const T *x, const double *mom, BnGeom g, bool team, double *part, double *mean,      \
                         double *var) {                                                                      \
  int64_t chunk = bn_chunk(g);                                                                               \
  memset(mean, 0, sizeof *mean * (size_t)g.ch);                                                              \
  memset(var, 0, sizeof *var * (size_t)g.ch);                                                                \
  for (int64_t b0 = 0; b0 < g.n; b0 += chunk) {                                                              \
    int64_t b1 = g.n - b0 < chunk ? g.n : b0 + chunk, r0 = b0 * g.ch;                                        \
    if (!mom) {                                                                                              \
      PAR_FOR(team)                                                                                          \
      for (int64_t r = r0; r < b1 * g.ch; r++)                                                               \
        vmath_run_moments_##S(x + r * g.hw, g.hw, &part[2 * (r - r0)], &part[2 * (r - r0) + 1]);             \
    }                                                                                                        \
    bn_moments_add(mom ? mom + 2 * r0 : part, g, b0, b1, mean, var);                                         \
  }                                                                                                          \
  double count = (double)(g.n * g.hw);                                                                       \
  for (int64_t k = 0; k < g.ch; k++) {                                                                       \
    double v = count > 0 ? var[k] / count : 0;                                                               \
    var[k] = v > 0 ? v : 0;                                                                                  \
  }                                                                                                          \
}
BN_STATS(f32, float)
BN_STATS(f64, double)

/* Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias per channel, with the
 * batch's mean and biased variance when training (and the running
 * statistics moved toward them, the variance unbiased), else with Mean
 * and Variance (passed through).  Runs go to threads and each channel's
 * are added up in image order (BN_RUNS), so the bits do not depend on the
 * thread count. */
/* fused_batch_norm (made by rewrite.c from batch_norm, [add,] relu): the
 * same, then Residual added and relu applied to each value as it lands, the
 * float operations of the add and relu kernels in their order, so the bits
 * are those of the separate ops; neither batch_norm's Y nor the sum is
 * made. */
/* batch_norm for element type T (suffix S: see F32_F64); NAME##_fused
 * runs batch_norm (fused false) or fused_batch_norm. */
#define BATCH_NORM(NAME, T, S)                                                                                           \
static int NAME##_fused(ExecCtx *c, bool fused) {                                                                        \
  Tensor *x = in_##S(c, 0), *sc = in_##S(c, 1), *bi = in_##S(c, 2), *rm = in_##S(c, 3), *rv = in_##S(c, 4);              \
  Tensor *yt = exec_ctx_out(c, 0), *mo = exec_ctx_out(c, 1), *vo = exec_ctx_out(c, 2);                                   \
  Tensor *cft = fused ? exec_ctx_out(c, 4) : NULL;                                                                       \
  Tensor *res = fused ? opt_##S(c, 6) : NULL;                                                                            \
  bool relu = fused && exec_ctx_attr_i(c, "relu") != 0;                                                                  \
  BnGeom g = bn_geom(x);                                                                                                 \
  bool training = bn_training(c);                                                                                        \
  double mom = exec_ctx_attr_f(c, "momentum"), eps = exec_ctx_attr_f(c, "epsilon");                                      \
  double unbias = g.n * g.hw > 1 ? (double)(g.n * g.hw) / (double)(g.n * g.hw - 1) : 0;                                  \
  int rc = training ? bn_check_batch(c, x, g) : 0;                                                                       \
  if (rc == 0 && res && res->numel != x->numel) rc = exec_ctx_fail(c, "internal error: Residual does not fit X");        \
  const T *xv = tensor_##S(x), *sv = tensor_##S(sc), *bv = tensor_##S(bi), *mv = tensor_##S(rm),                         \
              *vv = tensor_##S(rv), *resv = res ? tensor_##S(res) : NULL;                                                \
  T *yv = yt ? tensor_##S(yt) : NULL, *mov = tensor_##S(mo), *vov = tensor_##S(vo);                                     \
  if (rc == 0 && cft && (cft->dtype != DTYPE_##S || cft->numel != 3 * g.ch))                                             \
    rc = exec_ctx_fail(c, "internal error: Coef does not fit X");                                                        \
  T *cf = cft && rc == 0 ? tensor_##S(cft) : NULL;                                                                       \
  Tensor *stt = fused && training ? exec_ctx_out(c, 3) : NULL;                                                           \
  if (rc == 0 && stt && (stt->dtype != DT_F64 || stt->numel != 2 * g.ch))                                                \
    rc = exec_ctx_fail(c, "internal error: Stats does not fit X");                                                       \
  double *stv = stt && rc == 0 ? tensor_f64(stt) : NULL;                                                                 \
  /* each image's moments per channel, from the convolution that wrote X (rewrite.c, conv_moments) */                    \
  Tensor *mot = fused && training ? exec_ctx_in(c, 7) : NULL;                                                            \
  if (rc == 0 && mot && (mot->dtype != DT_F64 || mot->numel != 2 * g.n * g.ch))                                          \
    rc = exec_ctx_fail(c, "internal error: Moments does not fit X");                                                     \
  const double *momv = mot && rc == 0 ? tensor_f64(mot) : NULL;                                                          \
  /* each run's moments on the team (unless Moments has them), each                                                     \
     channel's statistics from them in image order (bn_stats), then the                                                 \
     runs of Y on the team (BN_RUNS) */                                                                                 \
  int64_t runs = rc ? 0 : g.n * g.ch, hw = g.hw;                                                                        \
  bool team = runs > 1 && x->numel >= PAR_MIN_WORK;                                                                     \
  double *mean = mem_alloc(NULL, sizeof *mean * (size_t)(2 * g.ch + 1)), *var = mean + g.ch;                            \
  double *part = training && !momv ? mem_alloc(NULL, sizeof *part * bn_part_len(g)) : NULL;                              \
  T *mf = mem_alloc(NULL, sizeof *mf * (size_t)(2 * g.ch + 1)), *af = mf + g.ch;                                        \
  if (training && rc == 0) bn_stats_##S(xv, momv, g, team, part, mean, var);                                            \
  for (int64_t k = 0; k < (rc ? 0 : g.ch); k++) {                                                                       \
    if (!training) mean[k] = mv[k], var[k] = vv[k];                                                                     \
    if (stv) stv[k] = mean[k], stv[g.ch + k] = var[k];                                                                  \
    double a = (double)sv[k] / sqrt(var[k] + eps);                                                                      \
    af[k] = (T)a, mf[k] = (T)mean[k];                                                                                   \
    mov[k] = training ? (T)(mom * (double)mv[k] + (1 - mom) * mean[k]) : mv[k];                                         \
    vov[k] = training ? (T)(mom * (double)vv[k] + (1 - mom) * var[k] * unbias) : vv[k];                                 \
    if (cf) cf[3 * k] = mf[k], cf[3 * k + 1] = af[k], cf[3 * k + 2] = bv[k];                                            \
  }                                                                                                                     \
  PAR_FOR(team && yv)                                                                                                   \
  for (int64_t r = 0; r < (yv ? runs : 0); r++) {                                                                       \
    int64_t k = r % g.ch;                                                                                               \
    norm_run_##S(xv + r * hw, resv ? resv + r * hw : NULL, yv + r * hw, hw, mf[k], af[k], bv[k], !fused ? 0 : relu ? 2 : 1);\
  }                                                                                                                     \
  mem_free(mean);                                                                                                       \
  mem_free(part);                                                                                                       \
  mem_free(mf);                                                                                                         \
  tensor_unref(x);                                                                                                       \
  tensor_unref(sc);                                                                                                      \
  tensor_unref(bi);                                                                                                      \
  tensor_unref(rm);                                                                                                      \
  tensor_unref(rv);                                                                                                      \
  if (res) tensor_unref(res);                                                                                            \
  return rc;                                                                                                             \
}                                                                                                                        \
static int NAME(ExecCtx *c) { return NAME##_fused(c, false); }
F32_F64(batch_norm, BATCH_NORM, exec_ctx_out(c, 0))
static int k_fused_batch_norm(ExecCtx *c) {
  const Tensor *y = exec_ctx_out(c, 0);   /* (none with Coef: X's dtype) */
  DType t = y ? y->dtype : exec_ctx_in(c, 0)->dtype;
  return t == DT_F64 ? batch_norm_f64_fused(c, true) : batch_norm_f32_fused(c, true);
}

/* batch_norm_grad: per channel, with inv = 1/sqrt(var + eps), xhat = (x -
 * mean) inv, sums over the channel's m values of dY and dY xhat:
 *   dBias = sum(dY), dScale = sum(dY xhat),
 *   dX = Scale inv (dY - sum(dY)/m - xhat sum(dY xhat)/m)   training,
 *   dX = Scale inv dY                                        eval,
 * the batch's statistics recomputed as the forward did (training) or
 * Mean and Variance read (eval: constants, so dX is affine in dY).  When
 * the executor links it to a fused_batch_norm of the same X (rewrite.c,
 * bn_stats), Stats holds the statistics that forward computed, in double:
 * the same numbers without the pass over X. */
/* fused_batch_norm_grad (rewrite.c: relu_grad, batch_norm_grad) reads the
 * relu's Out@GRAD (input 6) and batch_norm's Bias: each value of a
 * channel's dY is relu_grad's, Out > 0 ? Out@GRAD : 0, Out's sign made
 * again from X as it is used (grad_sums_relu, dx_relu_run), in the same
 * sums and loop as batch_norm_grad's: the same bits, without writing the
 * gradient of batch_norm's Y to memory and reading it back twice, or
 * reading Out. */
/* batch_norm_grad for element type T (suffix S: see F32_F64); NAME##_fused
 * runs batch_norm_grad (fused false) or fused_batch_norm_grad. */
#define BATCH_NORM_GRAD(NAME, T, S)                                                                                           \
static int NAME##_fused(ExecCtx *c, bool fused) {                                                                             \
  Tensor *x = in_##S(c, 0), *sc = in_##S(c, 1), *rm = in_##S(c, 3), *rv = in_##S(c, 4), *dyt = exec_ctx_in(c, 6);             \
  Tensor *dxt = exec_ctx_out(c, 0), *dst = exec_ctx_out(c, 1), *dbt = exec_ctx_out(c, 2), *cft = exec_ctx_out(c, 3);         \
  BnGeom g = bn_geom(x);                                                                                                      \
  bool training = bn_training(c);                                                                                             \
  double eps = exec_ctx_attr_f(c, "epsilon"), count = (double)(g.n * g.hw);                                                   \
  int rc = training ? bn_check_batch(c, x, g) : 0;                                                                            \
  if (rc == 0 && (dyt->dtype != DTYPE_##S || dyt->numel != x->numel))                                                         \
    rc = exec_ctx_fail(c, "internal error: Y@GRAD does not fit X");                                                           \
  if (rc == 0 && cft && (cft->dtype != DTYPE_##S || cft->numel != 6 * g.ch))                                                  \
    rc = exec_ctx_fail(c, "internal error: Coef does not fit X");                                                             \
  T *cf = cft && rc == 0 ? tensor_##S(cft) : NULL;                                                                            \
  const T *xv = tensor_##S(x), *sv = tensor_##S(sc), *mv = tensor_##S(rm), *vv = tensor_##S(rv);                              \
  Tensor *bit = fused && rc == 0 ? in_##S(c, 2) : NULL;                                                                       \
  Tensor *stt = training && rc == 0 ? exec_ctx_in(c, 7) : NULL;                                                               \
  if (stt && (stt->dtype != DT_F64 || stt->numel != 2 * g.ch)) rc = exec_ctx_fail(c, "internal error: Stats does not fit X");  \
  const double *stv = stt && rc == 0 ? tensor_f64(stt) : NULL;                                                                \
  const T *dy = rc ? NULL : tensor_##S(dyt), *bv = bit ? tensor_##S(bit) : NULL;                                             \
  /* each run's numbers on the team, then each channel's in image order,                                                      \
     a chunk of images at a time (BN_RUNS) */                                                                                 \
  int64_t runs = rc ? 0 : g.n * g.ch, hw = g.hw, chunk = bn_chunk(g);                                                         \
  bool team = runs > 1 && x->numel >= PAR_MIN_WORK;                                                                           \
  double *mean = mem_alloc(NULL, sizeof *mean * (size_t)(4 * g.ch + 1)), *var = mean + g.ch, *sg = var + g.ch,                \
         *sgx = sg + g.ch;                                                                                                    \
  double *part = mem_alloc(NULL, sizeof *part * bn_part_len(g));                                                              \
  T *mf = mem_alloc(NULL, sizeof *mf * (size_t)(5 * g.ch + 1)), *ra = mf + g.ch, *af = ra + g.ch, *bf = af + g.ch,            \
    *df = bf + g.ch;                                                                                                          \
  /* the batch's statistics, as the forward made them (bn_stats) */                                                           \
  if (training && !stv && rc == 0) bn_stats_##S(xv, NULL, g, team, part, mean, var);                                          \
  for (int64_t k = 0; k < (rc ? 0 : g.ch); k++) {                                                                             \
    if (!training) mean[k] = mv[k], var[k] = vv[k];                                                                           \
    else if (stv) mean[k] = stv[k], var[k] = stv[g.ch + k];                                                                   \
    mf[k] = (T)mean[k];                                                                                                       \
    ra[k] = (T)((double)sv[k] / sqrt(var[k] + eps));   /* the forward's a (batch_norm) */                                     \
    sg[k] = 0, sgx[k] = 0;                                                                                                    \
  }                                                                                                                           \
  for (int64_t b0 = 0; b0 < (rc ? 0 : g.n); b0 += chunk) {                                                                    \
    int64_t b1 = g.n - b0 < chunk ? g.n : b0 + chunk, r0 = b0 * g.ch;                                                         \
    PAR_FOR(team)                                                                                                             \
    for (int64_t r = r0; r < b1 * g.ch; r++) {                                                                                \
      int64_t k = r % g.ch;                                                                                                   \
      double s = 0, sx = 0;                                                                                                   \
      if (bv) grad_sums_relu_##S(dy + r * hw, xv + r * hw, mf[k], ra[k], bv[k], hw, &s, &sx);                                 \
      else grad_sums_##S(dy + r * hw, xv + r * hw, mf[k], hw, &s, &sx);                                                       \
      part[2 * (r - r0)] = s, part[2 * (r - r0) + 1] = sx;                                                                    \
    }                                                                                                                         \
    for (int64_t b = b0; b < b1; b++)                                                                                         \
      for (int64_t k = 0; k < g.ch; k++)                                                                                      \
        sg[k] += part[2 * ((b - b0) * g.ch + k)], sgx[k] += part[2 * ((b - b0) * g.ch + k) + 1];                              \
  }                                                                                                                           \
  for (int64_t k = 0; k < (rc ? 0 : g.ch); k++) {                                                                             \
    double inv = 1 / sqrt(var[k] + eps);                                                                                      \
    if (dbt) tensor_##S(dbt)[k] = (T)sg[k];                                                                                   \
    if (dst) tensor_##S(dst)[k] = (T)(sgx[k] * inv);                                                                          \
    /* dX = a dY + b (x - mean) + d */                                                                                        \
    double a = (double)sv[k] * inv;                                                                                           \
    af[k] = (T)a, bf[k] = training ? (T)(-a * inv * inv * sgx[k] / count) : (T)0,                                             \
    df[k] = training ? (T)(-a * sg[k] / count) : (T)0;                                                                        \
    /* the numbers dx_run and dx_relu_run take (vmath_bn_dx) */                                                               \
    if (cf) cf[6 * k] = mf[k], cf[6 * k + 1] = af[k], cf[6 * k + 2] = bf[k], cf[6 * k + 3] = df[k],                           \
            cf[6 * k + 4] = ra[k], cf[6 * k + 5] = bv ? bv[k] : (T)0;                                                         \
  }                                                                                                                           \
  PAR_FOR(team && dxt)                                                                                                        \
  for (int64_t r = 0; r < (dxt ? runs : 0); r++) {                                                                            \
    int64_t k = r % g.ch;                                                                                                     \
    if (bv) dx_relu_run_##S(dy + r * hw, xv + r * hw, tensor_##S(dxt) + r * hw, hw, mf[k], af[k], bf[k], df[k], ra[k], bv[k]);\
    else dx_run_##S(dy + r * hw, xv + r * hw, tensor_##S(dxt) + r * hw, hw, mf[k], af[k], bf[k], df[k]);                      \
  }                                                                                                                           \
  mem_free(mean);                                                                                                             \
  mem_free(part);                                                                                                             \
  mem_free(mf);                                                                                                               \
  tensor_unref(x);                                                                                                            \
  tensor_unref(sc);                                                                                                           \
  tensor_unref(rm);                                                                                                           \
  tensor_unref(rv);                                                                                                           \
  if (bit) tensor_unref(bit);                                                                                                 \
  return rc;                                                                                                                  \
}                                                                                                                             \
static int NAME(ExecCtx *c) { return NAME##_fused(c, false); }
F32_F64(batch_norm_grad, BATCH_NORM_GRAD, exec_ctx_in(c, 0))
static int k_fused_batch_norm_grad(ExecCtx *c) {
  return exec_ctx_in(c, 0)->dtype == DT_F64 ? batch_norm_grad_f64_fused(c, true) : batch_norm_grad_f32_fused(c, true);
}

/* ---- kernels: embedding, accuracy ------------------------------------------------- */

/* Out[..., :] = W[Ids[...], :], for a W of any dtype (rows are copied). */
static int k_embedding(ExecCtx *c) {
  Tensor *ids = exec_ctx_in(c, 0), *w = exec_ctx_in(c, 1), *out = exec_ctx_out(c, 0);
  int64_t v = w->shape[0], d = w->shape[1];
  size_t row = (size_t)d * dtype_size(w->dtype);
  const int64_t *iv = tensor_i64(ids);
  for (int64_t i = 0; i < ids->numel; i++) {
    if (iv[i] < 0 || iv[i] >= v) return index_fail(c, "Ids", ids, i, iv[i], "W", v, "rows");
    if (row) memcpy((char *)out->data + (size_t)i * row, (const char *)w->data + (size_t)iv[i] * row, row);
  }
  return 0;
}

/* The fraction of rows whose label ranks among the top k.  A label's rank
 * counts the classes that beat it: a larger logit, or an equal logit at a
 * lower index (the order argmax uses), so ties never count twice and k = 1
 * means "argmax == label".  A NaN logit for the label is a miss.  No rows
 * give 0, not NaN, so an empty batch does not poison a running average. */
static int k_accuracy(ExecCtx *c) {
  if (exec_ctx_in(c, 0)->dtype == DT_F64) {   /* f64 logits, compared as f64 */
    Tensor *x64 = exec_ctx_in(c, 0), *lb = exec_ctx_in(c, 1);
    int64_t rows = x64->shape[0], ncls = x64->shape[1], k = exec_ctx_attr_i(c, "k"), hits = 0;
    for (int64_t r = 0; r < rows; r++) {
      int64_t l = tensor_i64(lb)[r], rank = 0;
      int rc = label_check(c, lb, r, l, ncls);
      if (rc < 0) return rc;
      const double *row = tensor_f64(x64) + r * ncls;
      if (isnan(row[l])) continue;
      for (int64_t j = 0; j < ncls && rank < k; j++) rank += row[j] > row[l] || (row[j] == row[l] && j < l);
      hits += rank < k;
    }
    tensor_set(exec_ctx_out(c, 0), 0, rows ? (double)hits / (double)rows : 0.0);
    return 0;
  }
  Tensor *lg = in_f32(c, 0), *lb = exec_ctx_in(c, 1), *out = exec_ctx_out(c, 0);
  int64_t rows = lg->shape[0], ncls = lg->shape[1], k = exec_ctx_attr_i(c, "k"), hits = 0;
  const float *x = tensor_f32(lg);
  const int64_t *label = tensor_i64(lb);
  int rc = 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t l = label[r];
    if ((rc = label_check(c, lb, r, l, ncls)) < 0) break;
    const float *row = x + r * ncls;
    float v = row[l];
    if (isnan(v)) continue;
    int64_t rank = 0;
    for (int64_t j = 0; j < ncls && rank < k; j++)
      if (row[j] > v || (row[j] == v && j < l)) rank++;
    if (rank < k) hits++;
  }
  tensor_f32(out)[0] = rows ? (float)((double)hits / (double)rows) : 0.0f;
  tensor_unref(lg);
  return rc;
}

/* ---- gradients ------------------------------------------------------------------
 * Composite where the gradient is a few elementwise ops (sigmoid_cross_entropy,
 * mse, dropout); dedicated where a fused kernel saves passes and temporaries
 * over whole rows (softmax, log_softmax, softmax_cross_entropy, layer_norm)
 * or scatters (embedding).  Dedicated kernels recompute what they need from
 * the forward's inputs rather than have the forward save it; the one
 * exception is made by the executor, not the backward: a fused batch
 * norm's statistics (rewrite.c, bn_stats). */

/* Every output slot S@GRAD of a grad op gets the dtype and shape of input
 * slot S (when the op has that output). */
static bool infer_grads(InferCtx *c) {
  for (int k = 0; k < c->proto->nout; k++) {
    const char *gs = c->proto->out[k].name, *at = strstr(gs, "@GRAD");
    if (!at || reg_infer_out_count(c, gs) == 0) continue;
    char base[64];
    snprintf(base, sizeof base, "%.*s", (int)(at - gs), gs);
    const VarDesc *v = reg_infer_in(c, base, 0);
    if (!v) return reg_infer_fail(c, "input %s is missing", base);
    reg_infer_set(c, gs, 0, v->dtype, &v->shape);
  }
  return true;
}

/* batch_norm_grad, fused_batch_norm_grad: infer_grads, and Coef [C, 6]. */
static bool infer_bn_grad(InferCtx *c) {
  if (!infer_grads(c)) return false;
  if (reg_infer_out_count(c, "Coef") == 0) return true;
  const VarDesc *x = reg_infer_in(c, "X", 0);
  if (!x || x->shape.rank < 2) return reg_infer_fail(c, "Coef needs X of rank 2 or more");
  Shape sh = {.rank = 2, .d = {x->shape.d[1], dim_n(6)}};
  reg_infer_set(c, "Coef", 0, x->dtype, &sh);
  return true;
}

/* softmax_grad, log_softmax_grad: X@GRAD has the shape of Out. */
static bool infer_softmax_grad(InferCtx *c) {
  const VarDesc *o = reg_infer_input(c, "Out");
  if (!o) return false;
  reg_infer_set(c, "X@GRAD", 0, DT_F32, &o->shape);
  return true;
}

/* Along the axis, with s = sum(dOut * Out) (softmax) or sum(dOut)
 * (log_softmax): dX = Out * (dOut - s), or dX = dOut - exp(Out) * s,
 * exp(Out) first into dX by vmath.h's exp (EXPS).  The [outer, n, inner]
 * walk is softmax_run's; a contiguous row's s is vmath's SUM or DOT. */
/* The loops of softmax_grad_run for element type T. */
#define SOFTMAX_GRAD_LOOPS(NAME, T, EXPS, SUM, DOT)                                                                    \
static void NAME(const T *yv, const T *gv, T *xv, int64_t outer, int64_t n, int64_t inner, bool log_out, double *s) {  \
  for (int64_t o = 0; o < outer; o++) {                                                                                \
    const T *yp = yv + o * n * inner, *gp = gv + o * n * inner;                                                        \
    T *xp = xv + o * n * inner;                                                                                        \
    if (inner == 1) s[0] = log_out ? SUM(gp, n) : DOT(gp, yp, n);                                                      \
    else {                                                                                                             \
      for (int64_t i = 0; i < inner; i++) s[i] = 0;                                                                    \
      for (int64_t j = 0; j < n; j++)                                                                                  \
        for (int64_t i = 0; i < inner; i++)                                                                            \
          s[i] += log_out ? (double)gp[j * inner + i] : (double)gp[j * inner + i] * (double)yp[j * inner + i];         \
    }                                                                                                                  \
    if (log_out) {                                                                                                     \
      memcpy(xp, yp, sizeof *xp * (size_t)(n * inner));                                                                \
      EXPS(xp, n * inner);                                                                                             \
    }                                                                                                                  \
    for (int64_t j = 0; j < n; j++)                                                                                    \
      for (int64_t i = 0; i < inner; i++) {                                                                            \
        int64_t k = j * inner + i;                                                                                     \
        xp[k] = log_out ? (T)((double)gp[k] - (double)xp[k] * s[i]) : (T)((double)yp[k] * ((double)gp[k] - s[i]));     \
      }                                                                                                                \
  }                                                                                                                    \
}
SOFTMAX_GRAD_LOOPS(softmax_grad_f32, float, vmath_exp_f32, vmath_sum_f32, vmath_dot_f32)
SOFTMAX_GRAD_LOOPS(softmax_grad_f64, double, vmath_exp_f64, vmath_sum_f64, vmath_dot_f64)

static int softmax_grad_run(ExecCtx *c, bool log_out) {
  Tensor *y = exec_ctx_in(c, 0), *dy = exec_ctx_in(c, 1), *dx = exec_ctx_out(c, 0);
  if (!dx || y->numel == 0) return 0;
  if (dy->numel != y->numel) return exec_ctx_fail(c, "Out@GRAD does not have the shape of Out");
  int axis = (int)exec_ctx_attr_i(c, "axis");
  if (axis < 0) axis += y->rank;
  int64_t outer = prod(y->shape, 0, axis), n = y->shape[axis],
          inner = prod(y->shape, axis + 1, y->rank);
  double *s = mem_alloc(NULL, sizeof *s * (size_t)inner);
  if (y->dtype == DT_F64 && dy->dtype == DT_F64 && dx->dtype == DT_F64)
    softmax_grad_f64(tensor_f64(y), tensor_f64(dy), tensor_f64(dx), outer, n, inner, log_out, s);
  else
    softmax_grad_f32(tensor_f32(y), tensor_f32(dy), tensor_f32(dx), outer, n, inner, log_out, s);
  mem_free(s);
  return 0;
}

static int k_softmax_grad(ExecCtx *c) { return softmax_grad_run(c, false); }
static int k_log_softmax_grad(ExecCtx *c) { return softmax_grad_run(c, true); }

/* Logits@GRAD[r] = (softmax(Logits[r]) - onehot(Label[r])) * Loss@GRAD[r]. */
static int k_softmax_ce_grad(ExecCtx *c) {
  Tensor *lg = in_float(c, 0), *lb = exec_ctx_in(c, 1), *dl = exec_ctx_in(c, 2), *dx = exec_ctx_out(c, 0);
  int64_t ncls = lg->shape[lg->rank - 1], rows = prod(lg->shape, 0, lg->rank - 1);
  int rc = 0;
  if (!dx || lg->numel == 0) {
    tensor_unref(lg);
    return 0;
  }
  if (dl->numel != rows || lb->numel != rows) {
    tensor_unref(lg);
    return exec_ctx_fail(c, "Loss@GRAD or Label does not have one value per row of Logits");
  }
  CeJob j = {.f64 = lg->dtype == DT_F64 && dl->dtype == DT_F64 && dx->dtype == DT_F64, .x = lg->data,
             .gl = dl->data, .rows = rows, .ncls = ncls, .d = dx->data};
  rc = ce_run(c, lb, &j);
  tensor_unref(lg);
  return rc;
}

/* sigmoid_cross_entropy: dX = (sigmoid(X) - Label) * dOut and
 * dLabel = -X * dOut (X and Label have one shape, so nothing reduces). */
static bool g_sigmoid_ce(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0), *dl = bwd_op_in_grad(g, "Label", 0);
  const char *x = bwd_op_in(g, "X", 0), *dout = bwd_op_out_grad(g, "Out", 0);
  if (dx) {
    const char *s = bwd_temp(g), *t = bwd_temp(g);
    bwd_emit1(g, "sigmoid", x, s);
    bwd_emit2(g, "sub", s, bwd_op_in(g, "Label", 0), t);
    bwd_emit2(g, "mul", t, dout, dx);
  }
  if (dl) {
    const char *t = bwd_temp(g);
    bwd_emit2(g, "mul", x, dout, t);
    bwd_emit1(g, "neg", t, dl);
  }
  return true;
}

/* mse: with t = (X - Y) * dOut, dX = 2t and dY = -2t, each summed back to
 * its input's shape where the forward broadcast it. */
static bool g_mse(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0), *dy = bwd_op_in_grad(g, "Y", 0);
  const char *out = bwd_op_out(g, "Out", 0), *d = bwd_temp(g), *t = bwd_temp(g);
  bwd_emit2(g, "sub", bwd_op_in(g, "X", 0), bwd_op_in(g, "Y", 0), d);
  bwd_emit2(g, "mul", d, bwd_op_out_grad(g, "Out", 0), t);
  for (int k = 0; k < 2; k++) {
    const char *dst = k ? dy : dx;
    if (!dst) continue;
    const char *u = bwd_target(g, out, bwd_op_in(g, k ? "Y" : "X", 0), dst);
    OpDesc *op = bwd_emit(g, "scale");
    bwd_emit_in(g, op, "X", t);
    bwd_emit_out(g, op, "Out", u);
    bwd_emit_attr(g, op, "scale", attr_float(k ? -2 : 2));
    bwd_reduce_like(g, u, out, bwd_op_in(g, k ? "Y" : "X", 0), dst);
  }
  return true;
}

/* dropout: dX = dOut * Mask (the mask the forward drew). */
static bool g_dropout(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0);
  if (dx) bwd_emit2(g, "mul", bwd_op_out_grad(g, "Out", 0), bwd_op_out(g, "Mask", 0), dx);
  return true;
}

/* layer_norm_grad: per row, with xhat = (x - mean) * inv, inv = 1/sqrt(var +
 * eps) and g = dY * Scale (dY without Scale):
 *   dX = inv * (g - mean(g) - xhat * mean(g * xhat)),
 *   dScale = sum over rows of dY * xhat, dBias = sum over rows of dY.
 * The mean and variance are recomputed as the forward does (two passes in
 * double); then the row's xhat and g (double), the column sums, mean(g)
 * and mean(g xhat) as lane sums, and dX, each a loop the compiler
 * vectorizes, over a row still in cache.
 * The rows are cut into at most LNG_PARTS parts, their number fixed by
 * the rows alone; each part sums its own columns in double (xh and g its
 * buffers), and the parts' sums are added in order: the same bits on any
 * number of threads.  A part's sums and buffers lie w doubles apart, w
 * rounded up to a cache line with one to spare: two threads taking
 * neighbouring parts would otherwise write a shared line for every row
 * (1.3-2.1x the 1-thread time on 2 threads). */
#define LNG_PARTS 16
/* A row of layer_norm_grad in f32 in the usual case (Scale given, every
 * output wanted): xh, the column sums, g and the lanes of mean(g) and
 * mean(g xh) in one pass (eight lanes of double, lane k the elements k
 * mod 8, as lanes_dot's), then dX: the float operations of the loops
 * below in the same order (none contracted), so the same bits, in two
 * passes over the row instead of seven (char_lm's rows of 64: 110 us a
 * call against 127). */
#define LN_GRAD_FAST_f32 1
#define LN_GRAD_FAST_f64 0
/* The end of a row of ln_grad_fast_v and ln_grad_fast_y: the values from i
 * on (fewer than 8) into the lanes l1 and l2 one at a time, then dX. */
static inline void ln_grad_finish(const float *xp, const float *gp, const float *sv, float *dp, double *restrict as,
                                  double *restrict ab, double *restrict xh, double *restrict g, int64_t i, int64_t n,
                                  double mean, double inv, double *l1, double *l2) {
  for (int k = 0; i + k < n; k++) {
    int64_t j = i + k;
    double gpv = (double)gp[j], xhv = ((double)xp[j] - mean) * inv, gv = gpv * (double)sv[j];
    xh[j] = xhv;
    as[j] += gpv * xhv;
    ab[j] += gpv;
    g[j] = gv;
    l1[k] += gv;
    l2[k] += gv * xhv;
  }
  double mg = lanes_total(l1) / (double)n, mgx = lanes_total(l2) / (double)n;
  for (i = 0; i < n; i++) dp[i] = (float)(inv * (g[i] - mg - xh[i] * mgx));
}

VMATH_CLONES
static void ln_grad_fast_v(const float *xp, const float *gp, const float *sv, float *dp, double *restrict as,
                           double *restrict ab, double *restrict xh, double *restrict g, int64_t n, double mean,
                           double inv) {
  V8d s1 = {0}, s2 = {0}, vm = {mean, mean, mean, mean, mean, mean, mean, mean};
  V8d vi = {inv, inv, inv, inv, inv, inv, inv, inv};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    V8s xs, gs, ss;
    memcpy(&xs, xp + i, sizeof xs);
    memcpy(&gs, gp + i, sizeof gs);
    memcpy(&ss, sv + i, sizeof ss);
    V8d gpv = __builtin_convertvector(gs, V8d), xhv = (__builtin_convertvector(xs, V8d) - vm) * vi;
    V8d gv = gpv * __builtin_convertvector(ss, V8d), va, vb;
    memcpy(xh + i, &xhv, sizeof xhv);
    memcpy(g + i, &gv, sizeof gv);
    memcpy(&va, as + i, sizeof va);
    memcpy(&vb, ab + i, sizeof vb);
    va += gpv * xhv;
    vb += gpv;
    memcpy(as + i, &va, sizeof va);
    memcpy(ab + i, &vb, sizeof vb);
    s1 += gv;
    s2 += gv * xhv;
  }
  double l1[8], l2[8];
  memcpy(l1, &s1, sizeof l1);
  memcpy(l2, &s2, sizeof l2);
  ln_grad_finish(xp, gp, sv, dp, as, ab, xh, g, i, n, mean, inv, l1, l2);
}
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* ln_grad_fast_v in AVX2 intrinsics, each 8-lane vector of doubles as two
 * of four: GCC's AVX2 clone of the loop above passed its vectors through
 * the stack (char_lm's layer_norm_grad on AMD's Zen 3).  The same lanes,
 * operations and order, none fused: the same bits. */
__attribute__((target("avx2"))) static void ln_grad_fast_y(const float *xp, const float *gp, const float *sv,
                                                           float *dp, double *restrict as, double *restrict ab,
                                                           double *restrict xh, double *restrict g, int64_t n,
                                                           double mean, double inv) {
  __m256d s1[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()}, s2[2] = {s1[0], s1[0]};
  const __m256d vm = _mm256_set1_pd(mean), vi = _mm256_set1_pd(inv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 xs = _mm256_loadu_ps(xp + i), gs = _mm256_loadu_ps(gp + i), ss = _mm256_loadu_ps(sv + i);
    for (int h = 0; h < 2; h++) {
      __m128 xq = h ? _mm256_extractf128_ps(xs, 1) : _mm256_castps256_ps128(xs);
      __m128 gq = h ? _mm256_extractf128_ps(gs, 1) : _mm256_castps256_ps128(gs);
      __m128 sq = h ? _mm256_extractf128_ps(ss, 1) : _mm256_castps256_ps128(ss);
      __m256d gpv = _mm256_cvtps_pd(gq), xhv = _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(xq), vm), vi);
      __m256d gv = _mm256_mul_pd(gpv, _mm256_cvtps_pd(sq));
      int64_t k = i + 4 * h;
      _mm256_storeu_pd(xh + k, xhv);
      _mm256_storeu_pd(g + k, gv);
      _mm256_storeu_pd(as + k, _mm256_add_pd(_mm256_loadu_pd(as + k), _mm256_mul_pd(gpv, xhv)));
      _mm256_storeu_pd(ab + k, _mm256_add_pd(_mm256_loadu_pd(ab + k), gpv));
      s1[h] = _mm256_add_pd(s1[h], gv);
      s2[h] = _mm256_add_pd(s2[h], _mm256_mul_pd(gv, xhv));
    }
  }
  double l1[8], l2[8];
  _mm256_storeu_pd(l1, s1[0]), _mm256_storeu_pd(l1 + 4, s1[1]);
  _mm256_storeu_pd(l2, s2[0]), _mm256_storeu_pd(l2 + 4, s2[1]);
  ln_grad_finish(xp, gp, sv, dp, as, ab, xh, g, i, n, mean, inv, l1, l2);
}
#endif

/* ln_grad_fast_y on CPUs with AVX2 but not AVX-512 (where GCC's AVX-512
 * clone of ln_grad_fast_v holds a vector in one register), unless
 * NETRUN_TEST_ISA=scalar asks for the loop above (tests: the same bits) */
static void ln_grad_fast_f32(const float *xp, const float *gp, const float *sv, float *dp, double *restrict as,
                             double *restrict ab, double *restrict xh, double *restrict g, int64_t n, double mean,
                             double inv) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  static _Atomic int ys = -1;   /* the first call may come on two threads at once: the same answer */
  int y = atomic_load_explicit(&ys, memory_order_relaxed);
  if (y < 0) {
    __builtin_cpu_init();
    const char *isa = getenv("NETRUN_TEST_ISA");
    y = __builtin_cpu_supports("avx2") && !__builtin_cpu_supports("avx512f") && !(isa && strcmp(isa, "scalar") == 0);
    atomic_store_explicit(&ys, y, memory_order_relaxed);
  }
  if (y) {
    ln_grad_fast_y(xp, gp, sv, dp, as, ab, xh, g, n, mean, inv);
    return;
  }
#endif
  ln_grad_fast_v(xp, gp, sv, dp, as, ab, xh, g, n, mean, inv);
}
/* (no f64 version: the macro's loops) */
#define ln_grad_fast_f64(...) ((void)0)
/* ln_grad_rows_S for element type T: rows r0..r1 - 1 (dx NULL: the column
 * sums only; as or ab NULL: not those). */
#define LN_GRAD_ROWS(NAME, T, S)                                                                         \
VMATH_CLONES static void NAME(const T *x, const T *gy, T *dx, const T *sv, double *as, double *ab,      \
                              double *xh, double *g, int64_t r0, int64_t r1, int64_t n, double eps) {   \
  for (int64_t r = r0; r < r1; r++) {                                                                    \
    const T *xp = x + r * n, *gp = gy + r * n;                                                           \
    double mean, inv = row_moments_##S(xp, n, eps, &mean);                                               \
    if (LN_GRAD_FAST_##S && as && ab && sv && dx) {   /* one pass, then dX */                            \
      ln_grad_fast_##S(xp, gp, sv, dx + r * n, as, ab, xh, g, n, mean, inv);                              \
      continue;                                                                                          \
    }                                                                                                    \
    for (int64_t i = 0; i < n; i++) xh[i] = ((double)xp[i] - mean) * inv;                                \
    if (as)                                                                                              \
      for (int64_t i = 0; i < n; i++) as[i] += (double)gp[i] * xh[i];                                    \
    if (ab)                                                                                              \
      for (int64_t i = 0; i < n; i++) ab[i] += (double)gp[i];                                            \
    if (!dx) continue;                                                                                   \
    if (sv)                                                                                              \
      for (int64_t i = 0; i < n; i++) g[i] = (double)gp[i] * (double)sv[i];                              \
    else                                                                                                 \
      for (int64_t i = 0; i < n; i++) g[i] = (double)gp[i];                                              \
    double mg = lanes_dot(g, NULL, n) / (double)n, mgx = lanes_dot(g, xh, n) / (double)n;                \
    T *dp = dx + r * n;                                                                                  \
    for (int64_t i = 0; i < n; i++) dp[i] = (T)(inv * (g[i] - mg - xh[i] * mgx));                        \
  }                                                                                                      \
}
LN_GRAD_ROWS(ln_grad_rows_f32, float, f32)
LN_GRAD_ROWS(ln_grad_rows_f64, double, f64)

/* The gradient's part p: its rows, its own column sums and buffers. */
#define LN_GRAD_PART(NAME, T, S)                                                                         \
  static void NAME(void *arg, int64_t p) {                                                               \
    const LnJob *j = arg;                                                                                \
    int64_t r0 = p * j->per, r1 = r0 + j->per < j->rows ? r0 + j->per : j->rows;                         \
    ln_grad_rows_##S(j->x, j->dy, j->dx, j->sv, j->as ? j->as + p * j->w : NULL,                         \
                     j->ab ? j->ab + p * j->w : NULL, j->buf + 2 * p * j->w, j->buf + (2 * p + 1) * j->w, \
                     r0, r1, j->n, j->eps);                                                              \
  }
LN_GRAD_PART(ln_grad_part_f32, float, f32)
LN_GRAD_PART(ln_grad_part_f64, double, f64)

/* layer_norm_grad for element type T (suffix S: see F32_F64). */
#define LAYER_NORM_GRAD(NAME, T, S)                                                                      \
static int NAME(ExecCtx *c) {                                                                            \
  Tensor *x = in_##S(c, 0), *sc = opt_##S(c, 1), *dyt = exec_ctx_in(c, 3);                               \
  Tensor *dxt = exec_ctx_out(c, 0), *dst = exec_ctx_out(c, 1), *dbt = exec_ctx_out(c, 2);                \
  double eps = exec_ctx_attr_f(c, "epsilon");                                                            \
  int64_t rows, n;                                                                                       \
  norm_rows(c, x, &rows, &n);                                                                            \
  int rc = 0;                                                                                            \
  if ((sc && sc->numel != n) || (dst && dst->numel != n) || (dbt && dbt->numel != n) ||                  \
      dyt->numel != x->numel) {                                                                          \
    rc = exec_ctx_fail(c, "Scale, Bias or Y@GRAD does not fit X");                                       \
    rows = n = 0;                                                                                        \
  }                                                                                                      \
  int64_t parts = n > 0 ? (rows + LN_ROWS - 1) / LN_ROWS : 0;                                            \
  if (parts > LNG_PARTS) parts = LNG_PARTS;                                                              \
  int64_t per = parts > 0 ? (rows + parts - 1) / parts : 0, w = (n + 7) / 8 * 8 + 8;                     \
  double *as = dst ? mem_calloc((size_t)(parts * w) + 1, sizeof *as) : NULL;                             \
  double *ab = dbt ? mem_calloc((size_t)(parts * w) + 1, sizeof *ab) : NULL;                             \
  double *buf = mem_alloc(NULL, sizeof *buf * (2 * (size_t)(parts * w) + 1));                            \
  const T *sv = sc ? tensor_##S(sc) : NULL;                                                              \
  T *dx = dxt ? tensor_##S(dxt) : NULL;                                                                  \
  LnJob j = {.x = tensor_##S(x), .dy = tensor_##S(dyt), .dx = dx, .sv = sv, .as = as, .ab = ab,          \
             .buf = buf, .rows = rows, .n = n, .per = per, .w = w, .eps = eps};                          \
  ln_run(&j, parts, ln_grad_part_##S);                                                                   \
  for (int64_t i = 0; i < n; i++) {                                                                      \
    double ts = 0, tb = 0;                                                                               \
    for (int64_t p = 0; p < parts; p++) {                                                                \
      if (as) ts += as[p * w + i];                                                                       \
      if (ab) tb += ab[p * w + i];                                                                       \
    }                                                                                                    \
    if (as) tensor_##S(dst)[i] = (T)ts;                                                                  \
    if (ab) tensor_##S(dbt)[i] = (T)tb;                                                                  \
  }                                                                                                      \
  mem_free(as);                                                                                          \
  mem_free(ab);                                                                                          \
  mem_free(buf);                                                                                         \
  tensor_unref(x);                                                                                       \
  tensor_unref(sc);                                                                                      \
  return rc;                                                                                             \
}
F32_F64(layer_norm_grad, LAYER_NORM_GRAD, exec_ctx_in(c, 0))

/* W@GRAD = zeros([V, D]) with each row of Out@GRAD added at its id:
 * repeated ids accumulate. */
/* embedding_grad for element type T (suffix S: see F32_F64). */
#define EMBEDDING_GRAD(NAME, T, S)                                                                               \
static int NAME(ExecCtx *c) {                                                                                    \
  Tensor *ids = exec_ctx_in(c, 0), *w = exec_ctx_in(c, 1), *dout = exec_ctx_in(c, 2), *dw = exec_ctx_out(c, 0);  \
  if (!dw) return 0;                                                                                             \
  int64_t v = w->shape[0], d = w->shape[1];                                                                      \
  if (dout->numel != ids->numel * d) return exec_ctx_fail(c, "Out@GRAD does not fit Ids and W");                 \
  const int64_t *iv = tensor_i64(ids);                                                                           \
  T *o = tensor_##S(dw);                                                                                         \
  const T *gv = tensor_##S(dout);                                                                                \
  memset(o, 0, sizeof *o * (size_t)dw->numel);                                                                   \
  for (int64_t i = 0; i < ids->numel; i++) {                                                                     \
    if (iv[i] < 0 || iv[i] >= v) return index_fail(c, "Ids", ids, i, iv[i], "W", v, "rows");                     \
    T *row = o + iv[i] * d;                                                                                      \
    const T *src = gv + i * d;                                                                                   \
    for (int64_t j = 0; j < d; j++) row[j] += src[j];                                                            \
  }                                                                                                              \
  return 0;                                                                                                      \
}
F32_F64(embedding_grad, EMBEDDING_GRAD, exec_ctx_in(c, 2))

/* ---- the table --------------------------------------------------------------- */

/* ---- gradients of the grad ops ----
 * Composite, so that a backward can be differentiated again.  G is the
 * gradient of the grad op's output, d its Out@GRAD, o its Out.
 *   softmax_grad = o (d - s), s = sum(d o): d gets softmax_grad(o, G) (the
 *     Jacobian is symmetric), o gets G (d - s) - d sum(G o).
 *   log_softmax_grad = d - p sum(d), p = exp(o): d gets G - sum(G p), o
 *     gets -G p sum(d).
 *   softmax_cross_entropy_grad = q b(d), q = softmax(Logits) - onehot,
 *     b(d) d with the class axis put back: d gets sum(G q) over the class
 *     axis, Logits gets softmax_grad(softmax(Logits), G b(d)).
 *   embedding_grad is linear in d: d gets embedding(Ids, G).
 * (sums over the grad op's axis, keeping it) */

#define GG2(SLOT) bwd_op_out_grad(g, SLOT, 0)

/* out = sum(x) over axis (kept) */
static void emit_axis_sum(GradCtx *g, const char *x, int64_t axis, const char *out) {
  OpDesc *op = bwd_emit(g, "sum");
  bwd_emit_in(g, op, "X", x);
  bwd_emit_out(g, op, "Out", out);
  bwd_emit_attr(g, op, "axis", attr_ints(bwd_prog(g), &axis, 1));
  bwd_emit_attr(g, op, "keepdim", attr_bool(true));
}

/* out = softmax_grad(Out=o, Out@GRAD=d) over axis */
static void emit_softmax_grad(GradCtx *g, const char *o, const char *d, int64_t axis, const char *out) {
  OpDesc *op = bwd_emit(g, "softmax_grad");
  bwd_emit_in(g, op, "Out", o);
  bwd_emit_in(g, op, "Out@GRAD", d);
  bwd_emit_out(g, op, "X@GRAD", out);
  bwd_emit_attr(g, op, "axis", attr_int(axis));
}

static bool g_softmax_grad(GradCtx *g) {
  const char *o = bwd_op_in(g, "Out", 0), *d = bwd_op_in(g, "Out@GRAD", 0), *G = GG2("X@GRAD");
  const char *dd = bwd_op_in_grad(g, "Out@GRAD", 0), *dout = bwd_op_in_grad(g, "Out", 0);
  int64_t axis = reg_attr_i64(bwd_op_attr(g, "axis"));
  if (dd) emit_softmax_grad(g, o, G, axis, dd);
  if (!dout) return true;
  const char *t[8];
  for (int k = 0; k < 8; k++) t[k] = bwd_temp(g);
  bwd_emit2(g, "mul", d, o, t[0]);
  emit_axis_sum(g, t[0], axis, t[1]);
  bwd_emit2(g, "sub", d, t[1], t[2]);
  bwd_emit2(g, "mul", G, t[2], t[3]);
  bwd_emit2(g, "mul", G, o, t[4]);
  emit_axis_sum(g, t[4], axis, t[5]);
  bwd_emit2(g, "mul", d, t[5], t[6]);
  bwd_emit2(g, "sub", t[3], t[6], dout);
  return true;
}

static bool g_log_softmax_grad(GradCtx *g) {
  const char *o = bwd_op_in(g, "Out", 0), *d = bwd_op_in(g, "Out@GRAD", 0), *G = GG2("X@GRAD");
  const char *dd = bwd_op_in_grad(g, "Out@GRAD", 0), *dout = bwd_op_in_grad(g, "Out", 0);
  int64_t axis = reg_attr_i64(bwd_op_attr(g, "axis"));
  const char *p = bwd_temp(g), *gp = bwd_temp(g);
  bwd_emit1(g, "exp", o, p);
  bwd_emit2(g, "mul", G, p, gp);
  if (dd) {
    const char *s = bwd_temp(g);
    emit_axis_sum(g, gp, axis, s);
    bwd_emit2(g, "sub", G, s, dd);
  }
  if (dout) {
    const char *s = bwd_temp(g), *u = bwd_temp(g);
    emit_axis_sum(g, d, axis, s);
    bwd_emit2(g, "mul", gp, s, u);
    bwd_emit1(g, "neg", u, dout);
  }
  return true;
}

static bool g_softmax_cross_entropy_grad(GradCtx *g) {
  const char *l = bwd_op_in(g, "Logits", 0), *y = bwd_op_in(g, "Label", 0), *d = bwd_op_in(g, "Loss@GRAD", 0);
  const char *G = GG2("Logits@GRAD");
  const char *dd = bwd_op_in_grad(g, "Loss@GRAD", 0), *dl = bwd_op_in_grad(g, "Logits", 0);
  const VarDesc *lv = prog_var(bwd_prog(g), l);
  if (!lv || lv->shape.rank < 1) return bwd_fail(g, "internal error: Logits' rank is not known");
  int64_t axis = lv->shape.rank - 1;
  if (dd) {
    const char *one = bwd_temp(g), *q = bwd_temp(g), *gq = bwd_temp(g), *s = bwd_temp(g);
    bwd_emit1(g, "ones_like", d, one);
    OpDesc *op = bwd_emit(g, "softmax_cross_entropy_grad");
    bwd_emit_in(g, op, "Logits", l);
    bwd_emit_in(g, op, "Label", y);
    bwd_emit_in(g, op, "Loss@GRAD", one);
    bwd_emit_out(g, op, "Logits@GRAD", q);
    bwd_emit2(g, "mul", G, q, gq);
    emit_axis_sum(g, gq, axis, s);
    OpDesc *r = bwd_emit(g, "reshape_like");
    bwd_emit_in(g, r, "X", s);
    bwd_emit_in(g, r, "Like", d);
    bwd_emit_out(g, r, "Out", dd);
  }
  if (dl) {
    const char *p = bwd_temp(g), *bd = bwd_temp(g), *gb = bwd_temp(g);
    OpDesc *sm = bwd_emit(g, "softmax");
    bwd_emit_in(g, sm, "X", l);
    bwd_emit_out(g, sm, "Out", p);
    bwd_emit_attr(g, sm, "axis", attr_int(-1));
    OpDesc *u = bwd_emit(g, "unsqueeze");
    bwd_emit_in(g, u, "X", d);
    bwd_emit_out(g, u, "Out", bd);
    bwd_emit_attr(g, u, "axes", attr_ints(bwd_prog(g), &axis, 1));
    bwd_emit2(g, "mul", G, bd, gb);
    emit_softmax_grad(g, p, gb, -1, dl);
  }
  return true;
}

static bool g_embedding_grad(GradCtx *g) {
  const char *dd = bwd_op_in_grad(g, "Out@GRAD", 0);
  if (dd) bwd_emit2(g, "embedding", bwd_op_in(g, "Ids", 0), GG2("W@GRAD"), dd);
  return true;
}

/* layer_norm_grad = (DX, DS, DB): with xh = layer_norm(X), r = 1 / sqrt(var
 * + epsilon), g = DY S (per row, m the mean over the normalized axes):
 *   DX = r (g - m(g) - xh m(g xh)) = J g, J = dxh/dX (symmetric),
 *   DS = DY xh summed over the rows, DB = DY summed likewise.
 * With A, B, C the gradients of DX, DS, DB:
 *   DY gets S J A + xh B + C,      S gets (DY J A) summed over the rows,
 *   X gets J (B DY) - r (r xh K + m(g xh) J A + m(A xh) J g),
 *   K = m(A g) - m(A) m(g) - m(A xh) m(g xh)
 * (J v is layer_norm_grad on v).  Scale must have the normalized axes'
 * shape (not their product) when there are several. */
typedef struct LnCtx {
  GradCtx *g;
  AttrValue axes;        /* the normalized axes */
} LnCtx;

static const char *ln_op(LnCtx *c, const char *type, const char *x, const char *y) {
  const char *t = bwd_temp(c->g);
  if (y) bwd_emit2(c->g, type, x, y, t);
  else bwd_emit1(c->g, type, x, t);
  return t;
}

/* m(x): the mean over the normalized axes, kept */
static const char *ln_mean(LnCtx *c, const char *x) {
  const char *t = bwd_temp(c->g);
  OpDesc *op = bwd_emit(c->g, "mean");
  bwd_emit_in(c->g, op, "X", x);
  bwd_emit_out(c->g, op, "Out", t);
  bwd_emit_attr(c->g, op, "axis", c->axes);
  bwd_emit_attr(c->g, op, "keepdim", attr_bool(true));
  return t;
}

/* J v with Scale s (or none), or layer_norm of X (v NULL) */
static const char *ln_j(LnCtx *c, const char *v, const char *s) {
  GradCtx *g = c->g;
  const char *t = bwd_temp(g);
  OpDesc *op = bwd_emit(g, v ? "layer_norm_grad" : "layer_norm");
  bwd_emit_in(g, op, "X", bwd_op_in(g, "X", 0));
  if (s) bwd_emit_in(g, op, "Scale", s);
  if (v) bwd_emit_in(g, op, "Y@GRAD", v);
  bwd_emit_out(g, op, v ? "X@GRAD" : "Y", t);
  bwd_emit_attrs(g, op);
  return t;
}

/* acc + x, or x when acc is NULL */
static const char *ln_add(LnCtx *c, const char *acc, const char *x) { return acc ? ln_op(c, "add", acc, x) : x; }

static bool g_layer_norm_grad(GradCtx *g) {
  const char *x = bwd_op_in(g, "X", 0), *s = bwd_op_in(g, "Scale", 0), *dy = bwd_op_in(g, "Y@GRAD", 0);
  const char *ddy = bwd_op_in_grad(g, "Y@GRAD", 0), *dx = bwd_op_in_grad(g, "X", 0);
  const char *ds = s ? bwd_op_in_grad(g, "Scale", 0) : NULL;
  const char *A = bwd_op_out(g, "X@GRAD", 0) ? bwd_op_out_grad(g, "X@GRAD", 0) : NULL;
  const char *B = bwd_op_out(g, "Scale@GRAD", 0) ? bwd_op_out_grad(g, "Scale@GRAD", 0) : NULL;
  const char *C = bwd_op_out(g, "Bias@GRAD", 0) ? bwd_op_out_grad(g, "Bias@GRAD", 0) : NULL;
  const VarDesc *xv = prog_var(bwd_prog(g), x), *sv = s ? prog_var(bwd_prog(g), s) : NULL;
  int rank = xv ? xv->shape.rank : -1;
  int64_t k = reg_attr_i64(bwd_op_attr(g, "begin_norm_axis"));
  if (k < 0) k += rank;
  if (rank < 0 || k < 0 || k >= rank) return bwd_fail(g, "internal error: X's rank is not known");
  if (sv && sv->shape.rank != rank - k)
    return bwd_fail(g, "the gradient of layer_norm's gradient needs Scale of shape X.shape[begin_norm_axis:], "
                       "not their product");
  int64_t axes[SHAPE_MAX_RANK];
  for (int i = 0; i < rank - k; i++) axes[i] = k + i;
  LnCtx c = {g, attr_ints(bwd_prog(g), axes, (int)(rank - k))};
  const char *xh = ln_j(&c, NULL, NULL), *ja = A ? ln_j(&c, A, NULL) : NULL;
  if (ddy && (A || B || C)) {
    const char *acc = A ? (s ? ln_op(&c, "mul", ja, s) : ja) : NULL;
    if (B) acc = ln_add(&c, acc, ln_op(&c, "mul", xh, B));
    if (C) acc = ln_add(&c, acc, C);
    if (!A && !B) acc = ln_op(&c, "add", ln_op(&c, "fill_zeros_like", dy, NULL), acc);
    bwd_emit1(g, "assign", acc, ddy);
  }
  if (ds && A) {
    const char *t = ln_op(&c, "mul", dy, ja);
    OpDesc *op = bwd_emit(g, "sum_like");
    bwd_emit_in(g, op, "X", t);
    bwd_emit_in(g, op, "Like", s);
    bwd_emit_out(g, op, "Out", ds);
  }
  if (!dx || (!A && !B)) return true;
  const char *acc = B ? ln_j(&c, ln_op(&c, "mul", B, dy), NULL) : NULL;
  if (A) {
    const char *gg = s ? ln_op(&c, "mul", dy, s) : dy, *jg = ln_j(&c, dy, s);
    const char *d = ln_op(&c, "sub", x, ln_mean(&c, x));
    const char *var = ln_mean(&c, ln_op(&c, "square", d, NULL)), *ve = bwd_temp(g);
    OpDesc *op = bwd_emit(g, "scale");
    bwd_emit_in(g, op, "X", var);
    bwd_emit_out(g, op, "Out", ve);
    bwd_emit_attr(g, op, "bias", *bwd_op_attr(g, "epsilon"));
    const char *sd = ln_op(&c, "sqrt", ve, NULL), *r = ln_op(&c, "div", ln_op(&c, "ones_like", sd, NULL), sd);
    const char *mgx = ln_mean(&c, ln_op(&c, "mul", gg, xh)), *max = ln_mean(&c, ln_op(&c, "mul", A, xh));
    const char *kk = ln_op(&c, "sub", ln_mean(&c, ln_op(&c, "mul", A, gg)),
                           ln_op(&c, "mul", ln_mean(&c, A), ln_mean(&c, gg)));
    kk = ln_op(&c, "sub", kk, ln_op(&c, "mul", max, mgx));
    const char *u = ln_op(&c, "mul", ln_op(&c, "mul", r, xh), kk);
    u = ln_op(&c, "add", u, ln_op(&c, "mul", mgx, ja));
    u = ln_op(&c, "add", u, ln_op(&c, "mul", max, jg));
    acc = ln_add(&c, acc, ln_op(&c, "neg", ln_op(&c, "mul", r, u), NULL));
  }
  bwd_emit1(g, "assign", acc, dx);
  return true;
}

/* batch_norm_grad: the same with the channel's statistics (means over
 * every axis but 1), J the Jacobian of xh = batch_norm(X, 1, 0, ...) in the
 * forward's mode: in eval mode J = rv I (rv = 1 / sqrt(Variance +
 * epsilon)) does not depend on X, so X's term from A is the training
 * mode's alone, selected by Training at run time (where).  Scale, Bias and
 * their gradients are [C], put on axis 1 by unsqueeze. */

/* The op batch_norm_grad (v given) or batch_norm (v NULL) on X with Scale s
 * (ones when NULL) and Bias zeros, in the forward's mode: J v, or xh. */
static const char *bn_j(LnCtx *c, const char *v, const char *s) {
  GradCtx *g = c->g;
  const char *sc = bwd_op_in(g, "Scale", 0), *b = bwd_op_in(g, "Bias", 0), *t = bwd_temp(g);
  if (!s) s = ln_op(c, "ones_like", sc, NULL);
  const char *z = ln_op(c, "fill_zeros_like", b, NULL);
  OpDesc *op = bwd_emit(g, v ? "batch_norm_grad" : "batch_norm");
  bwd_emit_in(g, op, "X", bwd_op_in(g, "X", 0));
  bwd_emit_in(g, op, "Scale", s);
  bwd_emit_in(g, op, "Bias", z);
  bwd_emit_in(g, op, "Mean", bwd_op_in(g, "Mean", 0));
  bwd_emit_in(g, op, "Variance", bwd_op_in(g, "Variance", 0));
  bwd_emit_in(g, op, "Training", bwd_op_in(g, "Training", 0));
  if (v) bwd_emit_in(g, op, "Y@GRAD", v);
  bwd_emit_out(g, op, v ? "X@GRAD" : "Y", t);
  if (!v) {
    bwd_emit_out(g, op, "MeanOut", bwd_temp(g));
    bwd_emit_out(g, op, "VarianceOut", bwd_temp(g));
  }
  bwd_emit_attrs(g, op);
  return t;
}

/* v [C] on axis 1 of a value of rank `rank` */
static const char *bn_chan(LnCtx *c, const char *v, int rank) {
  if (rank <= 2) return v;
  int64_t axes[SHAPE_MAX_RANK];
  for (int i = 0; i < rank - 2; i++) axes[i] = 1 + i;
  const char *t = bwd_temp(c->g);
  OpDesc *op = bwd_emit(c->g, "unsqueeze");
  bwd_emit_in(c->g, op, "X", v);
  bwd_emit_out(c->g, op, "Out", t);
  bwd_emit_attr(c->g, op, "axes", attr_ints(bwd_prog(c->g), axes, rank - 2));
  return t;
}

/* X's term from A in training mode: -r (r xh K + m(g xh) J A + m(A xh) J g). */
static const char *bn_train_term(LnCtx *c, const char *A, const char *gg, const char *xh, const char *ja,
                                 const char *jg) {
  GradCtx *g = c->g;
  const char *x = bwd_op_in(g, "X", 0);
  const char *d = ln_op(c, "sub", x, ln_mean(c, x));
  const char *var = ln_mean(c, ln_op(c, "square", d, NULL)), *ve = bwd_temp(g);
  OpDesc *op = bwd_emit(g, "scale");
  bwd_emit_in(g, op, "X", var);
  bwd_emit_out(g, op, "Out", ve);
  bwd_emit_attr(g, op, "bias", *bwd_op_attr(g, "epsilon"));
  const char *sd = ln_op(c, "sqrt", ve, NULL), *r = ln_op(c, "div", ln_op(c, "ones_like", sd, NULL), sd);
  const char *mgx = ln_mean(c, ln_op(c, "mul", gg, xh)), *max = ln_mean(c, ln_op(c, "mul", A, xh));
  const char *kk = ln_op(c, "sub", ln_mean(c, ln_op(c, "mul", A, gg)), ln_op(c, "mul", ln_mean(c, A), ln_mean(c, gg)));
  kk = ln_op(c, "sub", kk, ln_op(c, "mul", max, mgx));
  const char *u = ln_op(c, "mul", ln_op(c, "mul", r, xh), kk);
  u = ln_op(c, "add", u, ln_op(c, "mul", mgx, ja));
  u = ln_op(c, "add", u, ln_op(c, "mul", max, jg));
  return ln_op(c, "neg", ln_op(c, "mul", r, u), NULL);
}

static bool g_batch_norm_grad(GradCtx *g) {
  const char *x = bwd_op_in(g, "X", 0), *s = bwd_op_in(g, "Scale", 0), *dy = bwd_op_in(g, "Y@GRAD", 0);
  const char *ddy = bwd_op_in_grad(g, "Y@GRAD", 0), *dx = bwd_op_in_grad(g, "X", 0), *ds = bwd_op_in_grad(g, "Scale", 0);
  const char *A = bwd_op_out(g, "X@GRAD", 0) ? bwd_op_out_grad(g, "X@GRAD", 0) : NULL;
  const char *B = bwd_op_out(g, "Scale@GRAD", 0) ? bwd_op_out_grad(g, "Scale@GRAD", 0) : NULL;
  const char *C = bwd_op_out(g, "Bias@GRAD", 0) ? bwd_op_out_grad(g, "Bias@GRAD", 0) : NULL;
  const VarDesc *xv = prog_var(bwd_prog(g), x);
  int rank = xv ? xv->shape.rank : -1;
  if (rank < 2) return bwd_fail(g, "internal error: X's rank is not known");
  int64_t axes[SHAPE_MAX_RANK];
  axes[0] = 0;
  for (int i = 2; i < rank; i++) axes[i - 1] = i;
  LnCtx c = {g, attr_ints(bwd_prog(g), axes, rank - 1)};
  const char *xh = bn_j(&c, NULL, NULL), *ja = A ? bn_j(&c, A, NULL) : NULL, *sb = bn_chan(&c, s, rank);
  if (ddy && (A || B || C)) {
    const char *acc = A ? ln_op(&c, "mul", ja, sb) : NULL;
    if (B) acc = ln_add(&c, acc, ln_op(&c, "mul", xh, bn_chan(&c, B, rank)));
    if (C) acc = ln_add(&c, acc, bn_chan(&c, C, rank));
    acc = ln_op(&c, "add", ln_op(&c, "fill_zeros_like", dy, NULL), acc);
    bwd_emit1(g, "assign", acc, ddy);
  }
  if (ds && A) {
    const char *t = ln_op(&c, "mul", dy, ja), *u = bwd_temp(g);
    OpDesc *op = bwd_emit(g, "sum");
    bwd_emit_in(g, op, "X", t);
    bwd_emit_out(g, op, "Out", u);
    bwd_emit_attr(g, op, "axis", c.axes);
    bwd_emit_attr(g, op, "keepdim", attr_bool(false));
    bwd_emit1(g, "assign", u, ds);
  }
  if (!dx || (!A && !B)) return true;
  const char *acc = B ? bn_j(&c, ln_op(&c, "mul", bn_chan(&c, B, rank), dy), NULL) : NULL;
  if (A) {
    const char *gg = ln_op(&c, "mul", dy, sb), *jg = bn_j(&c, dy, s);
    const char *t = bn_train_term(&c, A, gg, xh, ja, jg), *z = ln_op(&c, "fill_zeros_like", t, NULL);
    const char *w = bwd_temp(g);
    OpDesc *op = bwd_emit(g, "where");
    bwd_emit_in(g, op, "Cond", bwd_op_in(g, "Training", 0));
    bwd_emit_in(g, op, "X", t);
    bwd_emit_in(g, op, "Y", z);
    bwd_emit_out(g, op, "Out", w);
    acc = ln_add(&c, acc, w);
  }
  bwd_emit1(g, "assign", acc, dx);
  return true;
}

/* softmax or log_softmax (NAME) and its grad op. */
#define SOFTMAX_OPS(NAME, DOC, KERNEL, GRAD_DOC, GRAD_KERNEL, GRAD)                                   \
  {.type = NAME, .doc = DOC, .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "f32, shape of X"}},        \
   .attrs = {{"axis", ATTR_INT, "-1", NULL, "the axis normalized"}},                                  \
   .infer = infer_softmax, .kernel = KERNEL, .grad_kind = GRAD_DEDICATED, .flags = OP_F64},            \
  {.type = NAME "_grad", .doc = GRAD_DOC,                                                              \
   .in = {{"Out", 0, NAME "'s result"}, {"Out@GRAD", 0, "the gradient of Out"}},                       \
   .out = {{"X@GRAD", 0, "the gradient of X"}},                                                        \
   .attrs = {{"axis", ATTR_INT, "-1", NULL, "the axis normalized"}},                                  \
   .infer = infer_softmax_grad, .kernel = GRAD_KERNEL, .grad_kind = GRAD_COMPOSITE, .grad = GRAD,     \
   .flags = OP_INTERNAL | OP_F64}

/* batch_norm's attributes, and its gradient ops' outputs. */
#define BN_ATTRS                                                                                    \
  {{"momentum", ATTR_FLOAT, "0.9", check_unit, "the share of Mean and Variance kept"},            \
   {"epsilon", ATTR_FLOAT, "1e-5", reg_check_nonnegative, "added to the variance"}}
/* The forward's batch statistics, when the executor links them (rewrite.c, bn_stats). */
#define BN_STATS_IN                                                                                 \
  {"Stats", SLOT_OPTIONAL | SLOT_NO_GRAD | SLOT_AS_IS, "f64 [2, C]: fused_batch_norm's Stats (else recomputed from X)"}
#define BN_GRAD_OUT                                                                                 \
  {{"X@GRAD", SLOT_OPTIONAL, "the gradient of X"},                                                \
   {"Scale@GRAD", SLOT_OPTIONAL, "the gradient of Scale"},                                        \
   {"Bias@GRAD", SLOT_OPTIONAL, "the gradient of Bias"},                                          \
   {"Coef", SLOT_OPTIONAL,                                                                         \
    "[C, 6], X's dtype: per channel the mean and a, b, d of X@GRAD = a dY + b (X - mean) + d, then "   \
    "the forward's scale and Bias (relu's sign), for the convolution's gradient that makes X@GRAD "    \
    "itself (fused_bn_conv2d_grad; rewrite.c, bn_dx)"}}

OpProto op_table_nn[] = {
    SOFTMAX_OPS("softmax", "Out = exp(X) / sum(exp(X)) along axis, computed stably", k_softmax,
                "X@GRAD = Out * (Out@GRAD - sum(Out@GRAD * Out, axis))", k_softmax_grad, g_softmax_grad),
    SOFTMAX_OPS("log_softmax", "Out = log(softmax(X)) along axis, computed stably", k_log_softmax,
                "X@GRAD = Out@GRAD - exp(Out) * sum(Out@GRAD, axis)", k_log_softmax_grad, g_log_softmax_grad),
    {.type = "softmax_cross_entropy",
     .doc = "Loss = -log softmax(Logits)[Label] per example, computed stably",
     .in = {{"Logits", 0, "scores [..., C]"},
            {"Label", SLOT_NO_GRAD, "i64 class indices [...] (or [..., 1])"}},
     .out = {{"Loss", 0, "f32 loss per example, Logits' shape without the class axis"}},
     .infer = infer_softmax_ce, .kernel = k_softmax_ce, .grad_kind = GRAD_DEDICATED, .flags = OP_F64},
    {.type = "softmax_cross_entropy_grad",
     .doc = "Logits@GRAD = (softmax(Logits) - onehot(Label)) * Loss@GRAD per example",
     .in = {{"Logits", 0, "scores [..., C]"}, {"Label", SLOT_NO_GRAD, "i64 class indices"},
            {"Loss@GRAD", 0, "the gradient of Loss"}},
     .out = {{"Logits@GRAD", 0, "the gradient of Logits"}},
     .infer = infer_grads, .kernel = k_softmax_ce_grad, .grad_kind = GRAD_COMPOSITE,
     .grad = g_softmax_cross_entropy_grad, .flags = OP_INTERNAL | OP_F64},
    {.type = "sigmoid_cross_entropy",
     .doc = "Out = -(Label log sigmoid(X) + (1 - Label) log(1 - sigmoid(X))), computed stably",
     .in = {{"X", 0, "logits"}, {"Label", 0, "targets in [0, 1], shape of X"}},
     .out = {{"Out", 0, "f32 loss per element, shape of X"}},
     .infer = infer_sigmoid_ce, .kernel = k_sigmoid_ce, .grad_kind = GRAD_COMPOSITE,
     .grad = g_sigmoid_ce, .flags = OP_F64},
    {.type = "mse", .doc = "Out = (X - Y)^2 per element, broadcasting",
     .in = {{"X", 0, "prediction"}, {"Y", 0, "target"}},
     .out = {{"Out", 0, "f32, broadcast shape of X and Y"}},
     .infer = infer_mse, .kernel = k_mse, .grad_kind = GRAD_COMPOSITE, .grad = g_mse, .flags = OP_F64},
    {.type = "dropout",
     .doc = "Out = X * Mask: zeroes each element with probability p, scales the rest by 1/(1-p)",
     .in = {{"X", 0, "input"}},
     .out = {{"Out", 0, "f32, shape of X"},
             {"Mask", 0, "f32, shape of X: 0 or 1/(1-p) per element (1 when is_test)"}},
     .attrs = {{"p", ATTR_FLOAT, "0.5", reg_check_probability, "the probability of dropping"},
               {"is_test", ATTR_BOOL, "false", NULL, "pass X through unchanged"},
               {"seed", ATTR_INT, "0", reg_check_nonnegative,
                "0: draw from the run's generator (--seed); else this op's own seed"}},
     .infer = infer_dropout, .kernel = k_dropout, .grad_kind = GRAD_COMPOSITE, .grad = g_dropout,
     .flags = OP_RANDOM | OP_F64},
    {.type = "layer_norm",
     .doc = "Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias over axes begin_norm_axis..",
     .in = {{"X", 0, "input"},
            {"Scale", SLOT_OPTIONAL, "X.shape[begin_norm_axis:] or its product (default 1)"},
            {"Bias", SLOT_OPTIONAL, "X.shape[begin_norm_axis:] or its product (default 0)"}},
     .out = {{"Y", 0, "f32, shape of X"}},
     .attrs = {{"begin_norm_axis", ATTR_INT, "-1", NULL, "the first axis normalized"},
               {"epsilon", ATTR_FLOAT, "1e-5", reg_check_nonnegative, "added to the variance"}},
     .infer = infer_layer_norm, .kernel = k_layer_norm, .grad_kind = GRAD_DEDICATED, .flags = OP_F64},
    {.type = "layer_norm_grad",
     .doc = "the gradients of layer_norm's X, Scale and Bias (mean and variance recomputed)",
     .in = {{"X", 0, "input"}, {"Scale", SLOT_OPTIONAL, "the forward's Scale"},
            {"Bias", SLOT_OPTIONAL | SLOT_NO_GRAD, "the forward's Bias (for its gradient's shape)"},
            {"Y@GRAD", 0, "the gradient of Y"}},
     .out = {{"X@GRAD", SLOT_OPTIONAL, "the gradient of X"},
             {"Scale@GRAD", SLOT_OPTIONAL, "the gradient of Scale"},
             {"Bias@GRAD", SLOT_OPTIONAL, "the gradient of Bias"}},
     .attrs = {{"begin_norm_axis", ATTR_INT, "-1", NULL, "the first axis normalized"},
               {"epsilon", ATTR_FLOAT, "1e-5", reg_check_nonnegative, "added to the variance"}},
     .infer = infer_grads, .kernel = k_layer_norm_grad, .grad_kind = GRAD_COMPOSITE,
     .grad = g_layer_norm_grad, .flags = OP_INTERNAL | OP_F64},
    {.type = "batch_norm",
     .doc = "Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias per channel (axis 1): the batch's "
            "statistics when Training, else Mean and Variance",
     .in = {{"X", 0, "input [N, C] or [N, C, ...]"}, {"Scale", 0, "[C]"}, {"Bias", 0, "[C]"},
            {"Mean", SLOT_NO_GRAD, "the running mean [C]"},
            {"Variance", SLOT_NO_GRAD, "the running variance [C]"},
            {"Training", SLOT_NO_GRAD, "one bool: normalize with the batch's statistics"}},
     .out = {{"Y", 0, "f32, shape of X"},
             {"MeanOut", 0, "training: momentum * Mean + (1 - momentum) * the batch's mean; else Mean"},
             {"VarianceOut", 0,
              "training: momentum * Variance + (1 - momentum) * the batch's unbiased variance; else Variance"}},
     .attrs = BN_ATTRS,
     .infer = infer_batch_norm, .kernel = k_batch_norm, .grad_kind = GRAD_DEDICATED, .flags = OP_F64},
    {.type = "batch_norm_grad",
     .doc = "the gradients of batch_norm's X, Scale and Bias (the batch's statistics recomputed unless given)",
     .in = {{"X", 0, "input"}, {"Scale", 0, "the forward's Scale"},
            {"Bias", SLOT_NO_GRAD, "the forward's Bias (for its gradient's shape)"},
            {"Mean", SLOT_NO_GRAD, "the running mean"}, {"Variance", SLOT_NO_GRAD, "the running variance"},
            {"Training", SLOT_NO_GRAD, "the forward's Training"}, {"Y@GRAD", 0, "the gradient of Y"},
            BN_STATS_IN},
     .out = BN_GRAD_OUT, .attrs = BN_ATTRS,
     .infer = infer_bn_grad, .kernel = k_batch_norm_grad, .grad_kind = GRAD_COMPOSITE, .grad = g_batch_norm_grad,
     .flags = OP_INTERNAL | OP_F64},
    {.type = "fused_batch_norm",
     .doc = "Y = batch_norm(X, ...) + Residual, then relu if asked: made by the executor, not by scripts",
     .in = {{"X", 0, "input [N, C] or [N, C, ...]"}, {"Scale", 0, "[C]"}, {"Bias", 0, "[C]"},
            {"Mean", SLOT_NO_GRAD, "the running mean [C]"},
            {"Variance", SLOT_NO_GRAD, "the running variance [C]"},
            {"Training", SLOT_NO_GRAD, "one bool: normalize with the batch's statistics"},
            {"Residual", SLOT_OPTIONAL, "added to the normalized X (X's shape)"},
            {"Moments", SLOT_OPTIONAL | SLOT_NO_GRAD | SLOT_AS_IS,
             "f64 [N, C, 2]: each image's sum and squared deviations per channel, from the convolution that wrote X "
             "(rewrite.c; else computed from X)"}},
     .out = {{"Y", SLOT_OPTIONAL, "shape of X (left out when Coef stands for it)"},
             {"MeanOut", 0, "as batch_norm's"}, {"VarianceOut", 0, "as batch_norm's"},
             {"Stats", SLOT_OPTIONAL,
              "f64 [2, C]: the batch's mean and biased variance when training, for the gradient (rewrite.c)"},
             {"Coef", SLOT_OPTIONAL,
              "[C, 3], X's dtype: per channel the mean, the scale a and the bias of Y = (X - mean) a + bias, for "
              "the convolution that reads Y, which makes it (fused_norm_conv2d; rewrite.c, bn_norm)"}},
     .attrs = {{"momentum", ATTR_FLOAT, "0.9", check_unit, "the share of Mean and Variance kept"},
               {"epsilon", ATTR_FLOAT, "1e-5", reg_check_nonnegative, "added to the variance"},
               {"relu", ATTR_BOOL, "false", NULL, "relu after the sum"}},
     .infer = infer_fused_batch_norm, .kernel = k_fused_batch_norm, .grad_kind = GRAD_NONE,
     .flags = OP_INTERNAL | OP_AFTER_BACKWARD | OP_F64},
    {.type = "fused_batch_norm_grad",
     .doc = "batch_norm_grad of relu_grad(Out, Out@GRAD), Out = relu(batch_norm(X)): made by the executor, not by scripts",
     .in = {{"X", 0, "input"}, {"Scale", 0, "the forward's Scale"},
            {"Bias", SLOT_NO_GRAD, "the forward's Bias (the relu's input made again from X)"},
            {"Mean", SLOT_NO_GRAD, "the running mean"}, {"Variance", SLOT_NO_GRAD, "the running variance"},
            {"Training", SLOT_NO_GRAD, "the forward's Training"},
            {"Out@GRAD", 0, "the gradient of the relu's Out"}, BN_STATS_IN},
     .out = BN_GRAD_OUT, .attrs = BN_ATTRS,
     .infer = infer_bn_grad, .kernel = k_fused_batch_norm_grad, .grad_kind = GRAD_NONE,
     .flags = OP_INTERNAL | OP_AFTER_BACKWARD | OP_F64},
    {.type = "embedding", .doc = "Out = the rows of W at Ids",
     .in = {{"Ids", SLOT_NO_GRAD, "i64 row indices in [0, V)"}, {"W", 0, "the table [V, D]"}},
     .out = {{"Out", 0, "Ids.shape + [D], dtype of W"}},
     .infer = infer_embedding, .kernel = k_embedding, .grad_kind = GRAD_DEDICATED, .flags = OP_F64},
    {.type = "embedding_grad", .doc = "W@GRAD = the rows of Out@GRAD added at Ids into zeros like W",
     .in = {{"Ids", SLOT_NO_GRAD, "i64 row indices"}, {"W", SLOT_NO_GRAD, "the table [V, D] (its shape)"},
            {"Out@GRAD", 0, "the gradient of Out"}},
     .out = {{"W@GRAD", 0, "the gradient of W"}},
     .infer = infer_grads, .kernel = k_embedding_grad, .grad_kind = GRAD_COMPOSITE,
     .grad = g_embedding_grad, .flags = OP_INTERNAL | OP_F64},
    {.type = "accuracy",
     .doc = "Out = the fraction of rows whose Label is among the k highest Logits",
     .in = {{"Logits", 0, "scores [N, C]"},
            {"Label", SLOT_NO_GRAD, "i64 class indices [N] (or [N, 1])"}},
     .out = {{"Out", 0, "an f32 scalar in [0, 1]"}},
     .attrs = {{"k", ATTR_INT, "1", reg_check_positive, "how many top classes count as a hit"}},
     .infer = infer_accuracy, .kernel = k_accuracy, .grad_kind = GRAD_NONE, .flags = OP_F64},
    {0},
};
