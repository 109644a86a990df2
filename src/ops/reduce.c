/* reduce.c — reductions over axes: sum, mean, max, min, logsumexp and
 * argmax, the running sum cumsum, and their gradients.
 *
 * `axis` lists the axes to reduce (negative ones count from the end, [] is
 * every axis); `keepdim` keeps each reduced axis as a dimension of size 1,
 * as NumPy's keepdims does.  cumsum's `axis` is one axis, kept. */
#include "autodiff/backward.h"
#include "exec/exec.h"
#include "base/mem.h"
#include "exec/par.h"

#include <math.h>
#include <string.h>

/* The shape left after reducing `axes` (n of them; none = all) of x. */
static bool reduce_shape(InferCtx *c, const Shape *x, const int64_t *axes, int n, bool keep,
                         Shape *out) {
  bool drop[SHAPE_MAX_RANK] = {false};
  *out = shape_unknown();
  if (x->rank < 0) {
    if (n == 0 && !keep) *out = shape_scalar();
    return true;
  }
  if (x->rank == 0) {   /* a scalar: only axis 0 (or -1) names it */
    for (int i = 0; i < n; i++)
      if (axes[i] != 0 && axes[i] != -1)
        return reg_infer_fail(c, "axis %lld is out of range for X of shape []", (long long)axes[i]);
    *out = shape_scalar();
    return true;
  }
  for (int i = 0; i < x->rank; i++) drop[i] = n == 0;
  for (int i = 0; i < n; i++) {
    int k;
    if (!reg_infer_norm_axis(c, "axis", axes[i], "X", x, &k)) return false;
    if (drop[k]) {
      char buf[128];
      return reg_infer_fail(c, "axis %lld names dimension %d of X (shape %s) twice",
                            (long long)axes[i], k, shape_str(x, buf, sizeof buf));
    }
    drop[k] = true;
  }
  Shape s = shape_scalar();
  for (int i = 0; i < x->rank; i++)
    if (!drop[i]) s.d[s.rank++] = x->d[i];
    else if (keep) s.d[s.rank++] = dim_n(1);
  *out = s;
  return true;
}

/* sum, mean, max, min; dtype by `kind`: 's' sum (bool counts as i64),
 * 'm' mean (f32), 'k' keep (max, min). */
static bool infer_reduce_as(InferCtx *c, char kind) {
  const VarDesc *x = reg_infer_in(c, "X", 0);
  if (!x) return reg_infer_fail(c, "input X is missing");
  const AttrValue *ax = reg_infer_attr(c, "axis");
  if (!ax || ax->type != ATTR_INTS) return reg_infer_fail(c, "attribute 'axis' must be an int list");
  Shape s;
  if (!reduce_shape(c, &x->shape, ax->u.ints, ax->n, reg_infer_attr_b(c, "keepdim"), &s))
    return false;
  DType t = x->dtype;
  if (kind == 's' && t == DT_BOOL) t = DT_I64;
  if (kind == 'm') t = DT_F32;
  reg_infer_set(c, "Out", 0, t, &s);
  return true;
}

static bool infer_sum(InferCtx *c) { return infer_reduce_as(c, 's'); }

/* logsumexp: f32 (an i64 X is read as f32, as PyTorch promotes it). */
static bool infer_logsumexp(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X");
  return x && reg_infer_need_float(c, "X", x) && infer_reduce_as(c, 'm');
}

/* cumsum: X's shape; bool and i64 sum as i64 (PyTorch's). */
static bool infer_cumsum(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X");
  if (!x) return false;
  int64_t axis = reg_infer_attr_i(c, "axis");
  Shape s;
  if (!reduce_shape(c, &x->shape, &axis, 1, true, &s)) return false;
  reg_infer_set(c, "Out", 0, x->dtype == DT_BOOL ? DT_I64 : x->dtype, &x->shape);
  return true;
}
static bool infer_mean(InferCtx *c) { return infer_reduce_as(c, 'm'); }
static bool infer_keep(InferCtx *c) { return infer_reduce_as(c, 'k'); }

static bool infer_argmax(InferCtx *c) {
  const VarDesc *x = reg_infer_in(c, "X", 0);
  if (!x) return reg_infer_fail(c, "input X is missing");
  int64_t axis = reg_infer_attr_i(c, "axis");
  Shape s;
  if (!reduce_shape(c, &x->shape, &axis, 1, reg_infer_attr_b(c, "keepdim"), &s)) return false;
  reg_infer_set(c, "Out", 0, DT_I64, &s);
  return true;
}

/* ---- kernels ------------------------------------------------------------------
 *
 * A reduction walks X once, in memory order.  Dimensions of size 1 are
 * dropped and neighbours that are both reduced or both kept are merged into
 * one group, so the usual case (the reduced axes next to each other) becomes
 * [outer, reduced, inner] and the walk is that triple loop; other patterns
 * (axes [0, 2] of [N, C, H]) take the same walk with more groups.  The last
 * group is a contiguous run handed to a tight loop: folded into one
 * accumulator when it is reduced, added elementwise into as many
 * accumulators when it is kept.
 *
 * Choices: f32 sums and means accumulate in double (NumPy sums pairwise,
 * PyTorch in float vector lanes; double is simpler and at least as accurate
 * at netrun's sizes).  i64 sums wrap on overflow like NumPy's (they are
 * computed in uint64_t, where wrapping is defined).  max, min and argmax
 * treat NaN as the largest and smallest value, so it propagates as in NumPy;
 * argmax breaks ties by the first index.  max, min and argmax of an empty
 * axis are errors (there is no identity to return); the sum of nothing is 0
 * and its mean NaN. */

/* Folds a run of n contiguous elements of X into the accumulators: into
 * acc[0] when the run is reduced, into acc[0..n) elementwise when it is
 * kept (`spread`). */
typedef void (*RunFn)(void *acc, const void *x, int64_t n, bool spread);

/* A reduced run is folded into four partial results, so the adds (or
 * compares) of neighbouring elements do not wait on each other. */
#define SUM_RUN(NAME, XT, AT)                                                   \
  static void NAME(void *accv, const void *xv, int64_t n, bool spread) {        \
    AT *restrict acc = accv;                                                    \
    const XT *restrict x = xv;                                                  \
    if (spread) {                                                               \
      for (int64_t i = 0; i < n; i++) acc[i] += (AT)x[i];                       \
      return;                                                                   \
    }                                                                           \
    AT s[4] = {0, 0, 0, 0};                                                     \
    int64_t i = 0;                                                              \
    for (; i + 4 <= n; i += 4)                                                  \
      for (int k = 0; k < 4; k++) s[k] += (AT)x[i + k];                         \
    for (; i < n; i++) s[0] += (AT)x[i];                                        \
    acc[0] += (s[0] + s[1]) + (s[2] + s[3]);                                    \
  }
SUM_RUN(sum_f32_f64, float, double)
SUM_RUN(sum_f64_f64, double, double)
SUM_RUN(sum_i64_f64, int64_t, double)
SUM_RUN(sum_bool_f64, uint8_t, double)
SUM_RUN(sum_i64_u64, int64_t, uint64_t)
SUM_RUN(sum_bool_u64, uint8_t, uint64_t)

/* PICK(v, m): the new pick after seeing v, m the current one. */
#define PICK_RUN(NAME, T, PICK)                                                 \
  static void NAME(void *accv, const void *xv, int64_t n, bool spread) {        \
    T *restrict acc = accv;                                                     \
    const T *restrict x = xv;                                                   \
    if (spread) {                                                               \
      for (int64_t i = 0; i < n; i++) acc[i] = PICK(x[i], acc[i]);              \
      return;                                                                   \
    }                                                                           \
    T m[4] = {acc[0], acc[0], acc[0], acc[0]};                                  \
    int64_t i = 0;                                                              \
    for (; i + 4 <= n; i += 4)                                                  \
      for (int k = 0; k < 4; k++) m[k] = PICK(x[i + k], m[k]);                  \
    for (; i < n; i++) m[0] = PICK(x[i], m[0]);                                 \
    acc[0] = PICK(PICK(m[1], m[0]), PICK(m[3], m[2]));                          \
  }
#define LARGER(v, m) ((v) > (m) ? (v) : (m))
#define SMALLER(v, m) ((v) < (m) ? (v) : (m))
#define LARGER_NAN(v, m) (((v) > (m)) | isnan(v) ? (v) : (m))   /* a NaN, once picked, stays */
#define SMALLER_NAN(v, m) (((v) < (m)) | isnan(v) ? (v) : (m))
/* max_S and min_S for element type T (S its name). */
#define PICK_RUNS(S, T, LARGER, SMALLER) PICK_RUN(max_##S, T, LARGER) PICK_RUN(min_##S, T, SMALLER)
PICK_RUNS(f32, float, LARGER_NAN, SMALLER_NAN)
PICK_RUNS(f64, double, LARGER_NAN, SMALLER_NAN)
PICK_RUNS(i64, int64_t, LARGER, SMALLER)
PICK_RUNS(bool, uint8_t, LARGER, SMALLER)

/* X as runs of its last group: ng merged groups of the given sizes, `gred`
 * marking reduced ones.  Run k starts at element k * last of X; an
 * odometer over the outer groups keeps `off`, the offset of the run's
 * first result (its only one when the last group is reduced). */
typedef struct Runs {
  int ng;
  int64_t size[SHAPE_MAX_RANK];
  int64_t ostride[SHAPE_MAX_RANK], idx[SHAPE_MAX_RANK];
  int64_t off, nrun, last;
} Runs;

static void runs_init(Runs *w, int ng, const int64_t *size, const bool *gred) {
  int64_t st = 1;
  memset(w, 0, sizeof *w);
  w->ng = ng;
  memcpy(w->size, size, sizeof(int64_t) * (size_t)ng);
  w->last = size[ng - 1];
  for (int g = ng - 1; g >= 0; g--) {
    w->ostride[g] = gred[g] ? 0 : st;
    if (!gred[g]) st *= size[g];
  }
  w->nrun = 1;
  for (int g = 0; g < ng - 1; g++) w->nrun *= size[g];
}

static void runs_next(Runs *w) {
  for (int g = w->ng - 2; g >= 0; g--) {
    w->off += w->ostride[g];
    if (++w->idx[g] < w->size[g]) return;
    w->off -= w->ostride[g] * w->size[g];
    w->idx[g] = 0;
  }
}

/* Walks X (element size xes) into the accumulators (element size aes). */
static void walk(const char *x, size_t xes, char *acc, size_t aes, int ng, const int64_t *size,
                 const bool *gred, RunFn run) {
  Runs w;
  runs_init(&w, ng, size, gred);
  for (int64_t k = 0; k < w.nrun; k++, runs_next(&w))
    run(acc + (size_t)w.off * aes, x + (size_t)(k * w.last) * xes, w.last, !gred[ng - 1]);
}

typedef enum ReduceKind { R_SUM, R_MEAN, R_MAX, R_MIN } ReduceKind;

/* X's dimensions as merged groups for walk(): size-1 dimensions dropped,
 * neighbours both reduced or both kept merged.  Returns the number of
 * groups (at least one); *count gets the elements per result. */
static int reduce_groups(ExecCtx *c, const Tensor *x, int64_t *size, bool *gred, int64_t *count) {
  const AttrValue *ax = exec_ctx_attr(c, "axis");
  bool red[SHAPE_MAX_RANK];
  for (int i = 0; i < x->rank; i++) red[i] = ax->n == 0;
  for (int i = 0; i < ax->n && x->rank > 0; i++) {   /* inference checked them */
    int64_t a = ax->u.ints[i];
    red[a < 0 ? a + x->rank : a] = true;
  }
  int ng = 0;
  *count = 1;
  for (int i = 0; i < x->rank; i++) {
    if (red[i]) *count *= x->shape[i];
    if (x->shape[i] == 1) continue;
    if (ng > 0 && gred[ng - 1] == red[i]) {
      size[ng - 1] *= x->shape[i];
    } else {
      size[ng] = x->shape[i];
      gred[ng++] = red[i];
    }
  }
  if (ng == 0) {   /* one element */
    size[0] = 1;
    gred[0] = true;
    ng = 1;
  }
  return ng;
}

static int reduce(ExecCtx *c, ReduceKind kind) {
  Tensor *x = exec_ctx_in(c, 0), *out = exec_ctx_out(c, 0);
  int64_t size[SHAPE_MAX_RANK], count;   /* count: elements per result */
  bool gred[SHAPE_MAX_RANK];
  int ng = reduce_groups(c, x, size, gred, &count);
  if (count == 0 && out->numel > 0 && (kind == R_MAX || kind == R_MIN)) {
    char buf[128];
    return exec_ctx_fail(c, "cannot reduce an empty axis of X (shape %s)",
                         tensor_shape_str(x, buf, sizeof buf));
  }

  int64_t n = out->numel;
  size_t xes = dtype_size(x->dtype);
  bool wide = kind == R_MEAN || (kind == R_SUM && dtype_is_float(x->dtype));
  if (wide && out->dtype == DT_F64) {   /* f64: summed straight into the result */
    double *o = tensor_f64(out);
    memset(o, 0, (size_t)n * sizeof *o);
    RunFn run = x->dtype == DT_F64 ? sum_f64_f64 : x->dtype == DT_I64 ? sum_i64_f64 : sum_bool_f64;
    if (x->numel > 0) walk(x->data, xes, (char *)o, sizeof *o, ng, size, gred, run);
    if (kind == R_MEAN)
      for (int64_t i = 0; i < n; i++) o[i] = count ? o[i] / (double)count : (double)NAN;
    return 0;
  }
  if (wide) {   /* a double accumulator per result */
    double *acc = mem_calloc(n ? (size_t)n : 1, sizeof *acc);
    RunFn run = x->dtype == DT_F32 ? sum_f32_f64 : x->dtype == DT_I64 ? sum_i64_f64 : sum_bool_f64;
    if (x->numel > 0) walk(x->data, xes, (char *)acc, sizeof *acc, ng, size, gred, run);
    float *o = tensor_f32(out);
    if (kind == R_SUM) {
      for (int64_t i = 0; i < n; i++) o[i] = (float)acc[i];
    } else {
      for (int64_t i = 0; i < n; i++) o[i] = count ? (float)(acc[i] / (double)count) : NAN;
    }
    mem_free(acc);
    return 0;
  }
  if (kind == R_SUM) {   /* i64 or bool, summed into the i64 result */
    memset(out->data, 0, (size_t)n * sizeof(int64_t));
    if (x->numel > 0)
      walk(x->data, xes, out->data, sizeof(int64_t), ng, size, gred,
           x->dtype == DT_I64 ? sum_i64_u64 : sum_bool_u64);
    return 0;
  }
  /* max, min: the result starts at the identity and is folded in place */
  bool mx = kind == R_MAX;
  RunFn run;
  if (x->dtype == DT_F32) {
    for (int64_t i = 0; i < n; i++) tensor_f32(out)[i] = mx ? -INFINITY : INFINITY;
    run = mx ? max_f32 : min_f32;
  } else if (x->dtype == DT_F64) {
    for (int64_t i = 0; i < n; i++) tensor_f64(out)[i] = mx ? -INFINITY : INFINITY;
    run = mx ? max_f64 : min_f64;
  } else if (x->dtype == DT_I64) {
    for (int64_t i = 0; i < n; i++) tensor_i64(out)[i] = mx ? INT64_MIN : INT64_MAX;
    run = mx ? max_i64 : min_i64;
  } else {
    memset(out->data, mx ? 0 : 1, (size_t)n);
    run = mx ? max_bool : min_bool;
  }
  if (x->numel > 0) walk(x->data, xes, out->data, xes, ng, size, gred, run);
  return 0;
}

/* logsumexp: log(sum(exp(X - m))) + m with m the largest element, so no
 * exp overflows; m is taken as 0 when it is infinite (PyTorch's choice): a
 * row of -inf gives -inf, one holding +inf gives +inf, NaN propagates, and
 * an empty axis gives -inf (log 0).  The exps sum in double. */
/* logsumexp for element type T (TF its data, EXPF its exp, MAXRUN its max run). */
#define LOGSUMEXP(NAME, T, TF, EXPF, MAXRUN)                                      \
static int NAME(ExecCtx *c) {                                                     \
  Tensor *out = exec_ctx_out(c, 0), *x = tensor_cast(exec_ctx_in(c, 0), out->dtype);        \
  int64_t size[SHAPE_MAX_RANK], count, n = out->numel;                            \
  bool gred[SHAPE_MAX_RANK];                                                      \
  int ng = reduce_groups(c, x, size, gred, &count);                               \
  T *m = TF(out);   /* the largest element, then the result */                    \
  double *acc = mem_calloc(n ? (size_t)n : 1, sizeof *acc);                       \
  for (int64_t i = 0; i < n; i++) m[i] = (T)-INFINITY;                            \
  if (x->numel > 0 && n > 0) {                                                    \
    walk(x->data, sizeof(T), (char *)m, sizeof(T), ng, size, gred, MAXRUN);       \
    for (int64_t i = 0; i < n; i++)                                               \
      if (isinf(m[i])) m[i] = (T)0;                                               \
    Runs w;                                                                       \
    runs_init(&w, ng, size, gred);                                                \
    const T *xv = TF(x);                                                          \
    for (int64_t k = 0; k < w.nrun; k++, runs_next(&w)) {                         \
      const T *xr = xv + k * w.last;                                              \
      if (gred[ng - 1]) {                                                         \
        T s = m[w.off];                                                           \
        double a = 0;                                                             \
        for (int64_t j = 0; j < w.last; j++) a += (double)EXPF(xr[j] - s);        \
        acc[w.off] += a;                                                          \
      } else {                                                                    \
        const T *s = m + w.off;                                                   \
        double *a = acc + w.off;                                                  \
        for (int64_t j = 0; j < w.last; j++) a[j] += (double)EXPF(xr[j] - s[j]);  \
      }                                                                           \
    }                                                                             \
  } else {                                                                        \
    for (int64_t i = 0; i < n; i++) m[i] = (T)0;                                  \
  }                                                                               \
  for (int64_t i = 0; i < n; i++) m[i] = (T)(log(acc[i]) + (double)m[i]);         \
  mem_free(acc);                                                                  \
  tensor_unref(x);                                                                \
  return 0;                                                                       \
}
LOGSUMEXP(logsumexp_f32, float, tensor_f32, expf, max_f32)
LOGSUMEXP(logsumexp_f64, double, tensor_f64, exp, max_f64)

static int k_logsumexp(ExecCtx *c) {
  return exec_ctx_out(c, 0)->dtype == DT_F64 ? logsumexp_f64(c) : logsumexp_f32(c);
}

/* cumsum over X viewed as [outer, n, inner] around axis: Out's row r is
 * the sum of X's rows 0..r (rev: r..n-1, the gradient's order), in double
 * for f32 (as PyTorch's CPU kernel) and wrapping for i64 (as NumPy).  Along
 * the last axis (inner 1) each of the outer runs is one chain of adds in a
 * register, the runs spread over the threads; otherwise whole rows are
 * added into one accumulator per inner element, a loop that vectorizes.
 * Each sum is taken in the same order either way, so the bits do not
 * depend on the threads. */
#define CUMSUM(NAME, T, AT)                                                     \
  static void NAME(const T *x, T *o, int64_t outer, int64_t n, int64_t inner,   \
                   bool rev) {                                                  \
    if (inner == 1) {                                                           \
      PAR_FOR(outer > 1 && outer * n >= 2 * PAR_MIN_WORK)                       \
      for (int64_t q = 0; q < outer; q++) {                                     \
        const T *xr = x + q * n;                                                \
        T *orow = o + q * n;                                                    \
        AT a = 0;                                                               \
        if (rev) {                                                              \
          for (int64_t r = n - 1; r >= 0; r--) orow[r] = (T)(a += (AT)xr[r]);  \
        } else {                                                                \
          for (int64_t r = 0; r < n; r++) orow[r] = (T)(a += (AT)xr[r]);        \
        }                                                                       \
      }                                                                         \
      return;                                                                   \
    }                                                                           \
    AT *acc = mem_alloc(NULL, sizeof(AT) * (size_t)inner);                      \
    for (int64_t q = 0; q < outer; q++) {                                       \
      const T *xb = x + q * n * inner;                                          \
      T *ob = o + q * n * inner;                                                \
      for (int64_t i = 0; i < inner; i++) acc[i] = 0;                           \
      for (int64_t r = 0; r < n; r++) {                                         \
        int64_t at = (rev ? n - 1 - r : r) * inner;                             \
        const T *restrict xr = xb + at;                                         \
        T *restrict orow = ob + at;                                             \
        for (int64_t i = 0; i < inner; i++) {                                   \
          acc[i] += (AT)xr[i];                                                  \
          orow[i] = (T)acc[i];                                                  \
        }                                                                       \
      }                                                                         \
    }                                                                           \
    mem_free(acc);                                                              \
  }
CUMSUM(cumsum_f32, float, double)
CUMSUM(cumsum_f64, double, double)
CUMSUM(cumsum_i64, int64_t, uint64_t)

/* X viewed as [outer, n, inner] around the attribute axis ([1, 1, 1] for a
 * scalar). */
static void axis_view(ExecCtx *c, const Tensor *x, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = *n = *inner = 1;
  if (x->rank == 0) return;
  int64_t a = exec_ctx_attr_i(c, "axis");
  int k = (int)(a < 0 ? a + x->rank : a);
  for (int i = 0; i < x->rank; i++) {
    if (i < k) *outer *= x->shape[i];
    else if (i > k) *inner *= x->shape[i];
  }
  *n = x->shape[k];
}

/* Out (or X@GRAD, rev) = the running sum of X (or Out@GRAD) along axis. */
static int cumsum_run(ExecCtx *c, bool rev) {
  if (exec_ctx_out_count(c, 0) == 0) return 0;
  Tensor *out = exec_ctx_out(c, 0), *x = tensor_cast(exec_ctx_in(c, 0), out->dtype);
  int64_t outer, n, inner;
  axis_view(c, x, &outer, &n, &inner);
  if (out->numel > 0) {
    if (out->dtype == DT_F32) cumsum_f32(tensor_f32(x), tensor_f32(out), outer, n, inner, rev);
    else if (out->dtype == DT_F64) cumsum_f64(tensor_f64(x), tensor_f64(out), outer, n, inner, rev);
    else cumsum_i64(tensor_i64(x), tensor_i64(out), outer, n, inner, rev);
  }
  tensor_unref(x);
  return 0;
}

static int k_cumsum(ExecCtx *c) { return cumsum_run(c, false); }
static int k_cumsum_grad(ExecCtx *c) { return cumsum_run(c, true); }

/* X@GRAD has Out@GRAD's shape; f32. */
static bool infer_cumsum_grad(InferCtx *c) {
  const VarDesc *d = reg_infer_input(c, "Out@GRAD");
  if (!d) return false;
  reg_infer_set(c, "X@GRAD", 0, DT_F32, &d->shape);
  return true;
}

/* ---- gradients ------------------------------------------------------------------
 *
 * Dedicated: the shape to broadcast back to is X's at run time (symbolic
 * dimensions), and the reduced axes come from the forward attributes.
 *
 * sum, mean: X@GRAD is Out@GRAD broadcast back over the reduced axes,
 * divided by the count for mean.
 *
 * max, min: each result's gradient goes whole to the first element of X,
 * in X's memory order, equal to the result (a NaN result: to the first
 * NaN) — the element argmax picks, and what PyTorch's max(dim) does; every
 * other element gets 0.  (PyTorch's amax splits the gradient evenly among
 * ties instead; both are subgradients, and away from ties they agree.) */

/* Is a the picked value m (NaN picks NaN)? */
#define PICKED(a, m) ((a) == (m) || ((a) != (a) && (m) != (m)))

/* The runs of a reduce grad over X (the reduced axes from the attributes):
 * false when X is empty.  *count gets the elements per result, *reduced
 * whether the last group is reduced (a run then has one result). */
static bool grad_runs(ExecCtx *c, const Tensor *x, Runs *w, int64_t *count, bool *reduced) {
  int64_t size[SHAPE_MAX_RANK];
  bool gred[SHAPE_MAX_RANK];
  int ng = reduce_groups(c, x, size, gred, count);
  if (x->numel == 0) return false;
  runs_init(w, ng, size, gred);
  *reduced = gred[ng - 1];
  return true;
}

/* sum_grad and mean_grad (Out@GRAD, scaled by 1/count for mean, spread
 * back over X's shape) and max_grad and min_grad (Out@GRAD to the first
 * element of each group that is the picked value), for element type T
 * (TF its data); out is NULL for sum and mean. */
#define REDUCE_GRAD_T(NAME, T, TF)                                                \
static int NAME(ExecCtx *c, ReduceKind kind, Tensor *x, Tensor *out, Tensor *dout, Tensor *dx) { \
  Runs w;                                                                       \
  int64_t count;                                                                \
  bool reduced;                                                                 \
  if (!grad_runs(c, x, &w, &count, &reduced)) return 0;                         \
  const T *g = TF(dout);                                                        \
  T *d = TF(dx);                                                                \
  if (!out) {                                                                   \
    double scale = kind == R_MEAN ? 1.0 / (double)count : 1.0;                  \
    for (int64_t k = 0; k < w.nrun; k++, runs_next(&w)) {                       \
      T *o = d + k * w.last;                                                    \
      if (reduced) {                                                            \
        T v = (T)((double)g[w.off] * scale);                                    \
        for (int64_t j = 0; j < w.last; j++) o[j] = v;                          \
      } else {                                                                  \
        const T *gr = g + w.off;                                                \
        for (int64_t j = 0; j < w.last; j++) o[j] = (T)((double)gr[j] * scale); \
      }                                                                         \
    }                                                                           \
    return 0;                                                                   \
  }                                                                             \
  /* taken[r]: result r's element has been found */                            \
  const T *xv = TF(x), *ov = TF(out);                                           \
  bool *taken = mem_calloc(out->numel ? (size_t)out->numel : 1, sizeof *taken); \
  for (int64_t k = 0; k < w.nrun; k++, runs_next(&w)) {                         \
    const T *xr = xv + k * w.last;                                              \
    T *o = d + k * w.last;                                                      \
    if (reduced) {                                                              \
      int64_t r = w.off, j = 0;                                                 \
      if (!taken[r]) {                                                          \
        for (; j < w.last && !PICKED(xr[j], ov[r]); j++) o[j] = 0;              \
        if (j < w.last) {                                                       \
          o[j++] = g[r];                                                        \
          taken[r] = true;                                                      \
        }                                                                       \
      }                                                                         \
      for (; j < w.last; j++) o[j] = 0;                                         \
    } else {                                                                    \
      for (int64_t j = 0; j < w.last; j++) {                                    \
        int64_t r = w.off + j;                                                  \
        bool hit = !taken[r] && PICKED(xr[j], ov[r]);                           \
        o[j] = hit ? g[r] : 0;                                                  \
        taken[r] |= hit;                                                        \
      }                                                                         \
    }                                                                           \
  }                                                                             \
  mem_free(taken);                                                              \
  return 0;                                                                     \
}
REDUCE_GRAD_T(reduce_grad_f32, float, tensor_f32)
REDUCE_GRAD_T(reduce_grad_f64, double, tensor_f64)

static int reduce_grad(ExecCtx *c, ReduceKind kind) {
  bool pick = kind == R_MAX || kind == R_MIN;
  if (exec_ctx_out_count(c, 0) == 0) return 0;
  Tensor *x = exec_ctx_in(c, 0), *out = pick ? exec_ctx_in(c, 1) : NULL, *dout = exec_ctx_in(c, pick ? 2 : 1);
  Tensor *dx = exec_ctx_out(c, 0);
  if (dx->dtype == DT_F64 && dout->dtype == DT_F64 && (!pick || (x->dtype == DT_F64 && out->dtype == DT_F64)))
    return reduce_grad_f64(c, kind, x, out, dout, dx);
  if (x->dtype != DT_F32 || dout->dtype != DT_F32 || (out && out->dtype != DT_F32))
    return exec_ctx_fail(c, "internal error: X, Out and Out@GRAD must be f32");
  return reduce_grad_f32(c, kind, x, out, dout, dx);
}

/* k_sum, k_sum_grad, ... for each kind. */
#define REDUCE_KERNELS(NAME, KIND)                                              \
  static int k_##NAME(ExecCtx *c) { return reduce(c, KIND); }                   \
  static int k_##NAME##_grad(ExecCtx *c) { return reduce_grad(c, KIND); }
REDUCE_KERNELS(sum, R_SUM)
REDUCE_KERNELS(mean, R_MEAN)
REDUCE_KERNELS(max, R_MAX)
REDUCE_KERNELS(min, R_MIN)

/* logsumexp: dX = dOut * exp(X - Out), the softmax over the reduced axes
 * (PyTorch's formula: NaN for a row of -inf, whose softmax is undefined). */
/* logsumexp_grad for element type T (DT its dtype). */
#define LOGSUMEXP_GRAD(NAME, T, TF, EXPF, DT)                                                \
static int NAME(ExecCtx *c) {                                                                \
  if (exec_ctx_out_count(c, 0) == 0) return 0;                                               \
  Tensor *x = exec_ctx_in(c, 0), *out = exec_ctx_in(c, 1), *dout = exec_ctx_in(c, 2), *dx = exec_ctx_out(c, 0);  \
  if (x->dtype != DT || out->dtype != DT || dout->dtype != DT)                               \
    return exec_ctx_fail(c, "internal error: X, Out and Out@GRAD must be f32");              \
  Runs w;                                                                                    \
  int64_t count;                                                                             \
  bool reduced;                                                                              \
  if (!grad_runs(c, x, &w, &count, &reduced)) return 0;                                      \
  const T *g = TF(dout), *ov = TF(out), *xv = TF(x);                                         \
  T *d = TF(dx);                                                                             \
  for (int64_t k = 0; k < w.nrun; k++, runs_next(&w)) {                                      \
    const T *xr = xv + k * w.last;                                                           \
    T *o = d + k * w.last;                                                                   \
    if (reduced) {                                                                           \
      T s = ov[w.off], gr = g[w.off];                                                        \
      for (int64_t j = 0; j < w.last; j++) o[j] = gr * EXPF(xr[j] - s);                      \
    } else {                                                                                 \
      const T *s = ov + w.off, *gr = g + w.off;                                              \
      for (int64_t j = 0; j < w.last; j++) o[j] = gr[j] * EXPF(xr[j] - s[j]);                \
    }                                                                                        \
  }                                                                                          \
  return 0;                                                                                  \
}
LOGSUMEXP_GRAD(logsumexp_grad_f32, float, tensor_f32, expf, DT_F32)
LOGSUMEXP_GRAD(logsumexp_grad_f64, double, tensor_f64, exp, DT_F64)

static int k_logsumexp_grad(ExecCtx *c) {
  return exec_ctx_in(c, 0)->dtype == DT_F64 ? logsumexp_grad_f64(c) : logsumexp_grad_f32(c);
}

/* ---- gradients of the grad ops ----
 * Composite.  Each grad op is linear in d = Out@GRAD; with G the gradient
 * of its X@GRAD: sum_grad's d gets sum(G), mean_grad's mean(G) (the same
 * axes), max_grad's and min_grad's sum(G m), m the 0/1 mask of the picked
 * elements (the grad op itself on a d of ones), cumsum_grad's cumsum(G).
 * logsumexp_grad = b(d) e, e = exp(X - b(Out)), b the broadcast back
 * (sum_grad): d gets sum(G e), X gets h = G b(d) e, Out gets -sum(h).
 * X's gradient through sum_grad, mean_grad, max_grad, min_grad is zero
 * (X gives them a shape, or picks piecewise). */

#define GG bwd_op_out_grad(g, "X@GRAD", 0)

/* out = TYPE(x) (sum, mean, sum_grad ...) with the grad op's attributes. */
static OpDesc *emit_reduce(GradCtx *g, const char *type, const char *x, const char *out) {
  OpDesc *op = bwd_emit(g, type);
  bwd_emit_in(g, op, strstr(type, "_grad") ? "Out@GRAD" : "X", x);
  bwd_emit_out(g, op, strstr(type, "_grad") ? "X@GRAD" : "Out", out);
  bwd_emit_attrs(g, op);
  return op;
}

/* out = x (of Out's shape) broadcast back to like's shape. */
static void emit_expand(GradCtx *g, const char *like, const char *x, const char *out) {
  bwd_emit_in(g, emit_reduce(g, "sum_grad", x, out), "X", like);
}

/* A grad op whose Out@GRAD's gradient is TYPE (sum, mean, cumsum) of G. */
static int grad_by(GradCtx *g, const char *type) {
  const char *dd = bwd_op_in_grad(g, "Out@GRAD", 0);
  if (dd) emit_reduce(g, type, GG, dd);
  return 0;
}

static int g_sum_grad(GradCtx *g) { return grad_by(g, "sum"); }
static int g_mean_grad(GradCtx *g) { return grad_by(g, "mean"); }

static int g_pick_grad(GradCtx *g) {
  const char *dd = bwd_op_in_grad(g, "Out@GRAD", 0);
  if (!dd) return 0;
  const char *o = bwd_op_in(g, "Out", 0), *one = bwd_temp(g), *m = bwd_temp(g), *u = bwd_temp(g);
  bwd_emit1(g, "ones_like", o, one);
  OpDesc *op = emit_reduce(g, bwd_op_fwd(g)->type, one, m);
  bwd_emit_in(g, op, "X", bwd_op_in(g, "X", 0));
  bwd_emit_in(g, op, "Out", o);
  bwd_emit2(g, "mul", GG, m, u);
  emit_reduce(g, "sum", u, dd);
  return 0;
}
#define g_max_grad g_pick_grad
#define g_min_grad g_pick_grad

static int g_logsumexp_grad(GradCtx *g) {
  const char *x = bwd_op_in(g, "X", 0), *o = bwd_op_in(g, "Out", 0), *d = bwd_op_in(g, "Out@GRAD", 0);
  const char *dd = bwd_op_in_grad(g, "Out@GRAD", 0), *dx = bwd_op_in_grad(g, "X", 0);
  const char *dout = bwd_op_in_grad(g, "Out", 0);
  const char *bo = bwd_temp(g), *s = bwd_temp(g), *e = bwd_temp(g), *ge = bwd_temp(g);
  emit_expand(g, x, o, bo);
  bwd_emit2(g, "sub", x, bo, s);
  bwd_emit1(g, "exp", s, e);
  bwd_emit2(g, "mul", GG, e, ge);
  if (dd) emit_reduce(g, "sum", ge, dd);
  if (!dx && !dout) return 0;
  /* (a gradient written here may be renamed and summed: never read back) */
  const char *bd = bwd_temp(g), *h = dout ? bwd_temp(g) : dx;
  emit_expand(g, x, d, bd);
  bwd_emit2(g, "mul", ge, bd, h);
  if (dout) {
    const char *t = bwd_temp(g);
    emit_reduce(g, "sum", h, t);
    bwd_emit1(g, "neg", t, dout);
    if (dx) bwd_emit1(g, "assign", h, dx);
  }
  return 0;
}

static int g_cumsum_grad(GradCtx *g) { return grad_by(g, "cumsum"); }

/* X@GRAD has X's shape and dtype. */
static bool infer_reduce_grad(InferCtx *c) {
  const VarDesc *x = reg_infer_in(c, "X", 0);
  if (!x) return reg_infer_fail(c, "input X is missing");
  reg_infer_set(c, "X@GRAD", 0, x->dtype, &x->shape);
  return true;
}


/* argmax over X viewed as [outer, n, inner]: the result is [outer, inner].
 * The first NaN wins (ISNAN is never true for integers). */
#define ARGMAX(NAME, T, ISNAN)                                                  \
  static void NAME(const void *xv, int64_t *out, int64_t outer, int64_t n,      \
                   int64_t inner) {                                             \
    T *bestv = inner > 1 ? mem_alloc(NULL, sizeof(T) * (size_t)inner) : NULL;   \
    for (int64_t o = 0; o < outer; o++) {                                       \
      const T *x = (const T *)xv + o * n * inner;                               \
      int64_t *best = out + o * inner;                                          \
      if (inner == 1) {                                                         \
        int64_t b = 0;                                                          \
        T bv = x[0];                                                            \
        for (int64_t r = 1; r < n && !ISNAN(bv); r++) {                         \
          if (x[r] > bv) {                                                      \
            bv = x[r];                                                          \
            b = r;                                                              \
          } else if (ISNAN(x[r])) {                                             \
            b = r;                                                              \
            break;                                                              \
          }                                                                     \
        }                                                                       \
        best[0] = b;                                                            \
        continue;                                                               \
      }                                                                         \
      for (int64_t i = 0; i < inner; i++) {                                     \
        best[i] = 0;                                                            \
        bestv[i] = x[i];                                                        \
      }                                                                         \
      for (int64_t r = 1; r < n; r++)                                           \
        for (int64_t i = 0; i < inner; i++) {                                   \
          T v = x[r * inner + i];                                               \
          if (v > bestv[i] || (ISNAN(v) && !ISNAN(bestv[i]))) {                 \
            bestv[i] = v;                                                       \
            best[i] = r;                                                        \
          }                                                                     \
        }                                                                       \
    }                                                                           \
    mem_free(bestv);                                                            \
  }
#define NEVER_NAN(v) false
ARGMAX(argmax_f32, float, isnan)
ARGMAX(argmax_f64, double, isnan)
ARGMAX(argmax_i64, int64_t, NEVER_NAN)
ARGMAX(argmax_bool, uint8_t, NEVER_NAN)

static int k_argmax(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0), *out = exec_ctx_out(c, 0);
  int64_t outer, n, inner;
  axis_view(c, x, &outer, &n, &inner);
  if (out->numel == 0) return 0;
  if (n == 0) {
    char buf[128];
    return exec_ctx_fail(c, "cannot reduce an empty axis of X (shape %s)",
                         tensor_shape_str(x, buf, sizeof buf));
  }
  if (x->dtype == DT_F32) argmax_f32(x->data, tensor_i64(out), outer, n, inner);
  else if (x->dtype == DT_F64) argmax_f64(x->data, tensor_i64(out), outer, n, inner);
  else if (x->dtype == DT_I64) argmax_i64(x->data, tensor_i64(out), outer, n, inner);
  else argmax_bool(x->data, tensor_i64(out), outer, n, inner);
  return 0;
}

#define REDUCE_ATTRS                                                            \
  {{"axis", ATTR_INTS, "[]", NULL, "the axes to reduce; [] means all"},         \
   {"keepdim", ATTR_BOOL, "false", NULL, "keep reduced axes as size 1"}}
#define REDUCE(NAME, DOC, INFER)                                                \
  {.type = #NAME, .doc = DOC, .in = {{"X", 0, "input"}},                        \
   .out = {{"Out", 0, "the result, X's shape without the reduced axes"}},       \
   .attrs = REDUCE_ATTRS, .infer = INFER, .kernel = k_##NAME,                   \
   .grad_kind = GRAD_DEDICATED, .flags = OP_F64}
/* Its gradient op, with the given input slots (max and min also read Out to
 * find the picked element); the default maker wires it. */
#define REDUCE_GRAD(NAME, DOC, ...)                                             \
  {.type = #NAME "_grad", .doc = DOC, .in = {__VA_ARGS__},                      \
   .out = {{"X@GRAD", 0, "X's gradient, shape of X"}},                          \
   .attrs = REDUCE_ATTRS, .infer = infer_reduce_grad, .kernel = k_##NAME##_grad, \
   .grad_kind = GRAD_COMPOSITE, .grad = g_##NAME##_grad, .flags = OP_INTERNAL | OP_F64}
#define GRAD_X {"X", 0, "the forward input"}
/* X giving the shape alone (or the pick): it has no gradient through the
 * grad op, so a second backward leaves it alone */
#define GRAD_X_SHAPE {"X", SLOT_NO_GRAD, "the forward input (its shape)"}
#define GRAD_X_PICK {"X", SLOT_NO_GRAD, "the forward input (where the pick is)"}
#define GRAD_OUT {"Out", 0, "the forward result"}
#define GRAD_DOUT {"Out@GRAD", 0, "the result's gradient"}

OpProto op_table_reduce[] = {
    REDUCE(sum, "Out = the sum of X over axis (bool counts as i64)", infer_sum),
    REDUCE_GRAD(sum, "X@GRAD = Out@GRAD broadcast back over axis", GRAD_X_SHAPE, GRAD_DOUT),
    REDUCE(mean, "Out = the f32 mean of X over axis", infer_mean),
    REDUCE_GRAD(mean, "X@GRAD = Out@GRAD / count broadcast back over axis", GRAD_X_SHAPE, GRAD_DOUT),
    REDUCE(max, "Out = the largest element of X over axis", infer_keep),
    REDUCE_GRAD(max, "X@GRAD = Out@GRAD at the first largest element over axis, 0 elsewhere",
                GRAD_X_PICK, GRAD_OUT, GRAD_DOUT),
    REDUCE(min, "Out = the smallest element of X over axis", infer_keep),
    REDUCE_GRAD(min, "X@GRAD = Out@GRAD at the first smallest element over axis, 0 elsewhere",
                GRAD_X_PICK, GRAD_OUT, GRAD_DOUT),
    REDUCE(logsumexp, "Out = log(sum(exp(X))) over axis, computed stably", infer_logsumexp),
    REDUCE_GRAD(logsumexp, "X@GRAD = Out@GRAD * exp(X - Out), broadcast back over axis", GRAD_X,
                GRAD_OUT, GRAD_DOUT),
    {.type = "cumsum", .doc = "Out = the running sum of X along axis (bool counts as i64)",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "the result, shape of X"}},
     .attrs = {{"axis", ATTR_INT, NULL, NULL, "the axis to sum along; negative counts from the end"}},
     .infer = infer_cumsum, .kernel = k_cumsum, .grad_kind = GRAD_DEDICATED, .flags = OP_F64},
    {.type = "cumsum_grad", .doc = "X@GRAD = the running sum of Out@GRAD along axis, from its end",
     .in = {{"Out@GRAD", 0, "the result's gradient"}}, .out = {{"X@GRAD", 0, "X's gradient"}},
     .attrs = {{"axis", ATTR_INT, NULL, NULL, "the axis summed along"}},
     .infer = infer_cumsum_grad, .kernel = k_cumsum_grad, .grad_kind = GRAD_COMPOSITE, .grad = g_cumsum_grad,
     .flags = OP_INTERNAL | OP_F64},
    {.type = "argmax", .doc = "Out = the index of the largest element of X along axis",
     .in = {{"X", 0, "input"}},
     .out = {{"Out", 0, "i64 indices, X's shape without axis"}},
     .attrs = {{"axis", ATTR_INT, "-1", NULL, "the axis to search"},
               {"keepdim", ATTR_BOOL, "false", NULL, "keep axis as size 1"}},
     .infer = infer_argmax, .kernel = k_argmax, .grad_kind = GRAD_NONE, .flags = OP_F64},
    {0},
};
