/* elementwise.c — arithmetic and activation ops, one value per element.
 *
 * Binary ops broadcast like NumPy; their gradients are summed back to each
 * input's shape.  i64 with f32 promotes to f32; bool counts as i64; f64
 * with anything promotes to f64 (the executor converts an f32 operand, so
 * the f64 loops read f64, i64 or bool). */
#include "autodiff/backward.h"
#include "exec/exec.h"
#include "exec/par.h"
#include "ops/bcast_loop.h"

#include <math.h>
#include <tgmath.h> /* exp, log, ... of a float are expf, logf, ...: one text for f32 and f64 */
#include <string.h>

/* Binary arithmetic: broadcast shapes, promote dtypes. */
static bool infer_binary(InferCtx *c) {
  const VarDesc *x = reg_infer_in(c, "X", 0), *y = reg_infer_in(c, "Y", 0);
  Shape s;
  if (!reg_infer_broadcast(c, &x->shape, &y->shape, &s)) return false;
  reg_infer_set(c, "Out", 0, reg_infer_promote(x->dtype, y->dtype), &s);
  return true;
}

/* Unary ops that keep the input's shape and dtype. */
static bool infer_same(InferCtx *c) {
  const VarDesc *x = reg_infer_in(c, "X", 0);
  reg_infer_set(c, "Out", 0, x->dtype == DT_BOOL ? DT_I64 : x->dtype, &x->shape);
  return true;
}

/* Unary ops whose result is always real (exp, log, tanh, ...). */
static bool infer_float(InferCtx *c) {
  const VarDesc *x = reg_infer_in(c, "X", 0);
  reg_infer_set(c, "Out", 0, x->dtype == DT_F64 ? DT_F64 : DT_F32, &x->shape);
  return true;
}

static bool infer_clip(InferCtx *c) {
  if (reg_infer_attr_f(c, "min") > reg_infer_attr_f(c, "max"))
    return reg_infer_fail(c, "min (%g) is greater than max (%g)", reg_infer_attr_f(c, "min"),
                          reg_infer_attr_f(c, "max"));
  return infer_same(c);
}

/* ---- kernels ------------------------------------------------------------------
 *
 * Every op x dtype combination is its own loop, stamped out by the macros
 * below, so the per-element work is one inline expression: no function
 * pointer and no dtype switch inside a loop.  A kernel picks its loop once,
 * from a table indexed by the output's dtype and the inputs' dtypes.
 *
 * Mixed dtypes are read converted in place (an i64 or bool operand of an f32
 * result is converted as it is loaded), so no kernel allocates.  f32 results
 * compute in float, as NumPy's float32 arrays do; i64 results compute in
 * int64 and wrap on overflow like NumPy (through uint64_t, where wrapping is
 * defined).
 *
 * Integer semantics: `/` on two integers truncates toward zero (C and
 * Paddle; NumPy's // floors instead), and a zero divisor is a runtime error.
 * An integer to a negative integer power is a runtime error, as in NumPy.
 *
 * Outputs never alias inputs (the executor allocates them fresh), so the
 * loops mark them restrict, which lets the compiler vectorize. */


static inline i64 wrap_add(i64 a, i64 b) { return (i64)((uint64_t)a + (uint64_t)b); }
static inline i64 wrap_sub(i64 a, i64 b) { return (i64)((uint64_t)a - (uint64_t)b); }
static inline i64 wrap_mul(i64 a, i64 b) { return (i64)((uint64_t)a * (uint64_t)b); }
static inline i64 wrap_neg(i64 a) { return (i64)(0 - (uint64_t)a); }
/* Truncating division; the divisor is known not to be 0.  INT64_MIN / -1
 * wraps to INT64_MIN instead of trapping. */
static inline i64 int_div(i64 a, i64 b) { return b == -1 ? wrap_neg(a) : a / b; }

/* a ** e for e >= 0, by squaring, wrapping on overflow. */
static inline i64 int_pow(i64 a, i64 e) {
  uint64_t r = 1, base = (uint64_t)a;
  for (uint64_t k = (uint64_t)e; k; k >>= 1) {
    if (k & 1) r *= base;
    base *= base;
  }
  return (i64)r;
}

/* The scalar helpers of element type T (f32, f64) with suffix S; <tgmath.h>
 * makes each math call T's own (expf for f32, exp for f64). */
#define FLOAT_HELPERS(T, S)                                                     \
  /* max/min that propagate NaN, like NumPy's maximum/minimum. */              \
  static inline T max_##S(T a, T b) { return a > b || a != a ? a : b; }        \
  static inline T min_##S(T a, T b) { return a < b || a != a ? a : b; }        \
  /* 1 / (1 + e^-a) without overflow: e^-|a| is at most 1. */                  \
  static inline T sigmoid_##S(T a) {                                           \
    T e = exp(-fabs(a)), r = 1 / (1 + e);                                       \
    return a >= 0 ? r : e * r;                                                  \
  }                                                                             \
  /* ln(1 + e^a) = max(a, 0) + ln(1 + e^-|a|), finite for every finite a. */   \
  static inline T softplus_##S(T a) { return (a > 0 ? a : 0) + log1p(exp(-fabs(a))); } \
  static inline T gelu_##S(T a) { return (T)0.5 * a * (1 + erf(a * (T)0.70710678118654752)); } \
  /* Standard normal density and distribution function, for gelu's grad. */  \
  static inline T phi_##S(T a) { return (T)0.39894228040143268 * exp((T)-0.5 * a * a); } \
  static inline T Phi_##S(T a) { return (T)0.5 * (1 + erf(a * (T)0.70710678118654752)); }
FLOAT_HELPERS(f32, f32)
FLOAT_HELPERS(f64, f64)

/* ---- binary loops ---- */

/* [output dtype (f32, i64)][X dtype][Y dtype]; NULL where promotion cannot
 * lead (an i64 result never has an f32 operand). */
typedef BinaryLoop BinaryTable[2][3][3];

/* The loops of a binary op giving float type T (letter L: f, d): T with T,
 * i64 or bool. */
#define FLOAT_BINARY_LOOPS(NAME, T, L, EXPR)                                    \
  BINARY_LOOP(NAME##_##L##L##L, T, T, T, T, EXPR)                               \
  BINARY_LOOP(NAME##_##L##L##i, T, T, i64, T, EXPR)                             \
  BINARY_LOOP(NAME##_##L##L##b, T, T, bln, T, EXPR)                             \
  BINARY_LOOP(NAME##_##L##i##L, T, i64, T, T, EXPR)                             \
  BINARY_LOOP(NAME##_##L##b##L, T, bln, T, T, EXPR)

/* The loops of one binary op: FEXPR computes an f32 result, IEXPR an i64. */
#define BINARY_OP(NAME, FEXPR, IEXPR)                                           \
  FLOAT_BINARY_LOOPS(NAME, f32, f, FEXPR)                                       \
  BINARY_LOOP(NAME##_iii, i64, i64, i64, i64, IEXPR)                            \
  BINARY_LOOP(NAME##_iib, i64, i64, bln, i64, IEXPR)                            \
  BINARY_LOOP(NAME##_ibi, i64, bln, i64, i64, IEXPR)                            \
  BINARY_LOOP(NAME##_ibb, i64, bln, bln, i64, IEXPR)                            \
  static const BinaryTable NAME##_loops = {                                     \
      {{NAME##_fff, NAME##_ffi, NAME##_ffb}, {NAME##_fif, NULL, NULL},          \
       {NAME##_fbf, NULL, NULL}},                                               \
      {{NULL, NULL, NULL}, {NULL, NAME##_iii, NAME##_iib},                      \
       {NULL, NAME##_ibi, NAME##_ibb}}};

/* Each binary op: X(NAME, float expression, i64 expression), the float one
 * in element type S (f32, f64). */
#define BINARY_OPS(X, S)                                                        \
  X(add, a + b, wrap_add(a, b))                                                 \
  X(sub, a - b, wrap_sub(a, b))                                                 \
  X(mul, a * b, wrap_mul(a, b))                                                 \
  X(div, a / b, int_div(a, b))                                                  \
  X(pow, pow(a, b), int_pow(a, b))                                              \
  X(maximum, max_##S(a, b), a > b ? a : b)                                      \
  X(minimum, min_##S(a, b), a < b ? a : b)
BINARY_OPS(BINARY_OP, f32)

/* The f64 loops of one binary op, [X dtype][Y dtype] (f64 with f64, i64 or
 * bool; the executor has made any f32 operand f64): DEXPR in double. */
typedef BinaryLoop BinaryTable64[4][4];
#define BINARY_F64(NAME, DEXPR, IEXPR)                                          \
  FLOAT_BINARY_LOOPS(NAME, f64, d, DEXPR)                                       \
  static const BinaryTable64 NAME##_loops64 = {                                 \
      [DT_F64] = {[DT_F64] = NAME##_ddd, [DT_I64] = NAME##_ddi, [DT_BOOL] = NAME##_ddb}, \
      [DT_I64] = {[DT_F64] = NAME##_did}, [DT_BOOL] = {[DT_F64] = NAME##_dbd}};
BINARY_OPS(BINARY_F64, f64)

static int binary_run(ExecCtx *c, const BinaryTable loops, const BinaryTable64 loops64) {
  Tensor *x = exec_ctx_in(c, 0), *y = exec_ctx_in(c, 1), *out = exec_ctx_out(c, 0);
  BinaryLoop f = out->dtype <= DT_I64 && x->dtype <= DT_BOOL && y->dtype <= DT_BOOL
                     ? loops[out->dtype][x->dtype][y->dtype]
                     : NULL;
  if (out->dtype == DT_F64 && x->dtype <= DT_F64 && y->dtype <= DT_F64) f = loops64[x->dtype][y->dtype];
  return bcast_kernel(c, f, x, y, out, "no loop for", "and", "giving");
}

/* True if an integer (i64 or bool) tensor holds a value below `bound`. */
static bool int_any_below(const Tensor *t, int64_t bound) {
  bool hit = false;
  if (t->dtype == DT_I64) {
    const i64 *v = tensor_i64(t);
    for (int64_t i = 0; i < t->numel; i++) hit |= v[i] < bound;
  } else if (t->dtype == DT_BOOL) {
    const bln *v = tensor_bool(t);
    for (int64_t i = 0; i < t->numel; i++) hit |= v[i] < bound;
  }
  return hit;
}

static bool int_any_zero(const Tensor *t) {
  bool hit = false;
  if (t->dtype == DT_I64) {
    const i64 *v = tensor_i64(t);
    for (int64_t i = 0; i < t->numel; i++) hit |= v[i] == 0;
  } else if (t->dtype == DT_BOOL) {
    const bln *v = tensor_bool(t);
    for (int64_t i = 0; i < t->numel; i++) hit |= v[i] == 0;
  }
  return hit;
}

static int k_add(ExecCtx *c) { return binary_run(c, add_loops, add_loops64); }
static int k_sub(ExecCtx *c) { return binary_run(c, sub_loops, sub_loops64); }
static int k_mul(ExecCtx *c) { return binary_run(c, mul_loops, mul_loops64); }
static int k_maximum(ExecCtx *c) { return binary_run(c, maximum_loops, maximum_loops64); }
static int k_minimum(ExecCtx *c) { return binary_run(c, minimum_loops, minimum_loops64); }

/* Every Y element is some output's divisor once the output is not empty,
 * so checking Y itself finds every zero divisor. */
static int k_div(ExecCtx *c) {
  if (exec_ctx_out(c, 0)->dtype == DT_I64 && exec_ctx_out(c, 0)->numel && int_any_zero(exec_ctx_in(c, 1)))
    return exec_ctx_fail(c, "integer division by zero");
  return binary_run(c, div_loops, div_loops64);
}

static int k_pow(ExecCtx *c) {
  if (exec_ctx_out(c, 0)->dtype == DT_I64 && exec_ctx_out(c, 0)->numel && int_any_below(exec_ctx_in(c, 1), 0))
    return exec_ctx_fail(c, "an integer to a negative integer power; make the base a float (2.0 ** -1)");
  return binary_run(c, pow_loops, pow_loops64);
}

/* ---- unary loops ---- */

/* An op's attributes (alpha, scale and bias, clip's bounds), read once per
 * call: as f32 for the f32 loops, as i64 for the i64 ones. */
typedef struct UnaryArgs {
  f32 f[2];
  i64 i[2];
  f64 d[2];                   /* for the f64 loops */
} UnaryArgs;

typedef void (*UnaryLoop)(int64_t n, void *out, const void *x, const UnaryArgs *p);

#define UNARY_LOOP(FN, OT, XT, CT, EXPR)                                        \
  static void FN(int64_t n, void *out, const void *xv, const UnaryArgs *p) {    \
    OT *restrict o = out;                                                       \
    const XT *x = xv;                                                           \
    (void)p;                                                                    \
    for (int64_t i = 0; i < n; i++) {                                           \
      CT a = (CT)x[i];                                                          \
      o[i] = (OT)(EXPR);                                                        \
    }                                                                           \
  }

/* [output dtype][X dtype] */
typedef UnaryLoop UnaryTable[3][3];

/* Ops whose result is f32 whatever X is. */
#define FLOAT_UNARY(NAME, EXPR)                                                 \
  UNARY_LOOP(NAME##_ff, f32, f32, f32, EXPR)                                    \
  UNARY_LOOP(NAME##_fi, f32, i64, f32, EXPR)                                    \
  UNARY_LOOP(NAME##_fb, f32, bln, f32, EXPR)                                    \
  static const UnaryTable NAME##_loops = {{NAME##_ff, NAME##_fi, NAME##_fb}};

/* Ops that keep X's dtype (bool becoming i64): FEXPR for f32, IEXPR for i64. */
#define SAME_UNARY(NAME, FEXPR, IEXPR)                                          \
  UNARY_LOOP(NAME##_ff, f32, f32, f32, FEXPR)                                   \
  UNARY_LOOP(NAME##_ii, i64, i64, i64, IEXPR)                                   \
  UNARY_LOOP(NAME##_ib, i64, bln, i64, IEXPR)                                   \
  static const UnaryTable NAME##_loops = {{NAME##_ff}, {NULL, NAME##_ii, NAME##_ib}};

/* The unary ops that keep X's dtype: X(NAME, float expression, i64
 * expression), the float one reading the attributes p->P (f, d). */
#define SAME_UNARY_OPS(X, P)                                                    \
  X(neg, -a, wrap_neg(a))                                                       \
  X(abs, fabs(a), a < 0 ? wrap_neg(a) : a)                                      \
  X(square, a * a, wrap_mul(a, a))                                              \
  X(relu, a > 0 || a != a ? a : 0, a > 0 ? a : 0)                               \
  X(clip, a < p->P[0] ? p->P[0] : a > p->P[1] ? p->P[1] : a,                    \
    a < p->i[0] ? p->i[0] : a > p->i[1] ? p->i[1] : a)
/* The float unary ops: X(NAME, expression in element type S). */
#define FLOAT_UNARY_OPS(X, P, S)                                                \
  X(exp, exp(a))                                                                \
  X(log, log(a))                                                                \
  X(sqrt, sqrt(a))                                                              \
  X(sin, sin(a))                                                                \
  X(cos, cos(a))                                                                \
  X(erf, erf(a))                                                                \
  X(sigmoid, sigmoid_##S(a))                                                    \
  X(tanh, tanh(a))                                                              \
  X(softplus, softplus_##S(a))                                                  \
  X(gelu, gelu_##S(a))                                                          \
  X(leaky_relu, a > 0 ? a : p->P[0] * a)                                        \
  X(elu, a > 0 ? a : p->P[0] * expm1(a))                                        \
  X(silu, a * sigmoid_##S(a))                                                   \
  X(hardswish, a * (a <= -3 ? 0 : a >= 3 ? 6 : a + 3) / 6)                      \
  X(scale, p->P[0] * a + p->P[1])
SAME_UNARY_OPS(SAME_UNARY, f)
FLOAT_UNARY_OPS(FLOAT_UNARY, f, f32)

/* The f64 loop of each float unary op: f64 X giving f64. */
#define F64_UNARY(NAME, EXPR) UNARY_LOOP(NAME##_dd, f64, f64, f64, EXPR)
#define F64_SAME_UNARY(NAME, DEXPR, IEXPR) F64_UNARY(NAME, DEXPR)
SAME_UNARY_OPS(F64_SAME_UNARY, d)
FLOAT_UNARY_OPS(F64_UNARY, d, f64)

/* A unary loop over slices of PAR_MIN_WORK elements (par_parts). */
typedef struct UnarySlices {
  UnaryLoop f;
  int64_t n;
  void *out;
  const void *x;
  size_t so, sx;
  const UnaryArgs *p;
} UnarySlices;

static void unary_slice(void *arg, int64_t k) {
  const UnarySlices *u = arg;
  int64_t at = k * PAR_MIN_WORK, len = u->n - at < PAR_MIN_WORK ? u->n - at : PAR_MIN_WORK;
  u->f(len, (char *)u->out + (size_t)at * u->so, (const char *)u->x + (size_t)at * u->sx, u->p);
}

static int unary_run(ExecCtx *c, const UnaryTable loops, UnaryLoop loop64, const UnaryArgs *p) {
  Tensor *x = exec_ctx_in(c, 0), *out = exec_ctx_out(c, 0);
  UnaryLoop f = out->dtype <= DT_BOOL && x->dtype <= DT_BOOL ? loops[out->dtype][x->dtype] : NULL;
  if (out->dtype == DT_F64 && x->dtype == DT_F64) f = loop64;
  if (!f || x->numel != out->numel)
    return exec_ctx_fail(c, "internal error: no loop for %s X giving %s", dtype_name(x->dtype),
                         dtype_name(out->dtype));
  /* in slices over the threads (src/exec/par.h): each element alone; a small
   * tensor never reaches the parallel construct, which costs even when it
   * runs on one thread */
  int64_t n = x->numel, slices = (n + PAR_MIN_WORK - 1) / PAR_MIN_WORK;
  if (slices <= 1) {
    f(n, out->data, x->data, p);
    return 0;
  }
  UnarySlices u = {f, n, out->data, x->data, dtype_size(out->dtype), dtype_size(x->dtype), p};
  par_parts(slices, unary_slice, &u);
  return 0;
}

/* The unary ops without attributes that have a grad kernel of their own
 * (below): one list for both kernels. */
#define UNARY_OPS_WITH_GRAD(X) X(abs) X(relu) X(sigmoid) X(tanh) X(softplus) X(gelu) X(silu) X(hardswish)

#define UNARY_KERNEL(NAME)                                                      \
  static int k_##NAME(ExecCtx *c) { return unary_run(c, NAME##_loops, NAME##_dd, NULL); }
UNARY_KERNEL(neg)
UNARY_KERNEL(square)
UNARY_KERNEL(exp)
UNARY_KERNEL(log)
UNARY_KERNEL(sqrt)
UNARY_KERNEL(sin)
UNARY_KERNEL(cos)
UNARY_KERNEL(erf)
UNARY_OPS_WITH_GRAD(UNARY_KERNEL)

/* The f32 attributes A and B (each if named) of a unary op or its grad. */
static UnaryArgs float_args(ExecCtx *c, const char *a, const char *b) {
  double da = a ? exec_ctx_attr_f(c, a) : 0, db = b ? exec_ctx_attr_f(c, b) : 0;
  UnaryArgs p = {.f = {(f32)da, (f32)db}, .d = {da, db}};
  return p;
}

static int k_leaky_relu(ExecCtx *c) {
  UnaryArgs p = float_args(c, "alpha", NULL);
  return unary_run(c, leaky_relu_loops, leaky_relu_dd, &p);
}

static int k_elu(ExecCtx *c) {
  UnaryArgs p = float_args(c, "alpha", NULL);
  return unary_run(c, elu_loops, elu_dd, &p);
}

static int k_scale(ExecCtx *c) {
  UnaryArgs p = float_args(c, "scale", "bias");
  return unary_run(c, scale_loops, scale_dd, &p);
}

/* A double bound as an i64 bound: integers clip to the integers inside
 * [min, max], saturating at the i64 range. */
static i64 int_bound(double v, bool lower) {
  v = lower ? ceil(v) : floor(v);
  if (!(v > -9.2233720368547758e18)) return INT64_MIN;
  if (!(v < 9.2233720368547758e18)) return INT64_MAX;
  return (i64)v;
}

/* NumPy's clip: min(max(X, min), max); NaN stays NaN. */
static int k_clip(ExecCtx *c) {
  double lo = exec_ctx_attr_f(c, "min"), hi = exec_ctx_attr_f(c, "max");
  UnaryArgs p = {.f = {(f32)lo, (f32)hi}, .i = {int_bound(lo, true), int_bound(hi, false)}, .d = {lo, hi}};
  return unary_run(c, clip_loops, clip_dd, &p);
}

/* ---- gradients ------------------------------------------------------------------
 * Composite: each gradient is built from forward ops and summed back to its
 * input's shape where the forward op broadcast it. */

#define DOUT bwd_op_out_grad(g, "Out", 0)
#define X0 bwd_op_in(g, "X", 0)
#define Y0 bwd_op_in(g, "Y", 0)
#define OUT0 bwd_op_out(g, "Out", 0)

/* add: dX = dOut, dY = dOut. */
static bool g_add(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0), *dy = bwd_op_in_grad(g, "Y", 0);
  if (dx) bwd_reduce_like(g, DOUT, OUT0, X0, dx);
  if (dy) bwd_reduce_like(g, DOUT, OUT0, Y0, dy);
  return true;
}

/* sub: dX = dOut (an assign), dY = scale(dOut, -1). */
static bool g_sub(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0), *dy = bwd_op_in_grad(g, "Y", 0);
  if (dx) bwd_reduce_like(g, DOUT, OUT0, X0, dx);
  if (dy) {
    const char *t = bwd_target(g, OUT0, Y0, dy);
    bwd_emit_attr(g, bwd_emit1(g, "scale", DOUT, t), "scale", attr_float(-1));
    bwd_reduce_like(g, t, OUT0, Y0, dy);
  }
  return true;
}

/* mul: dX = dOut * Y, dY = dOut * X. */
static bool g_mul(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0), *dy = bwd_op_in_grad(g, "Y", 0);
  if (dx) {
    const char *t = bwd_target(g, OUT0, X0, dx);
    bwd_emit2(g, "mul", DOUT, Y0, t);
    bwd_reduce_like(g, t, OUT0, X0, dx);
  }
  if (dy) {
    const char *t = bwd_target(g, OUT0, Y0, dy);
    bwd_emit2(g, "mul", DOUT, X0, t);
    bwd_reduce_like(g, t, OUT0, Y0, dy);
  }
  return true;
}

/* div: dX = dOut / Y, dY = -(dOut / Y) * Out. */
static bool g_div(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0), *dy = bwd_op_in_grad(g, "Y", 0);
  const char *q = bwd_temp(g);
  bwd_emit2(g, "div", DOUT, Y0, q);
  if (dx) bwd_reduce_like(g, q, OUT0, X0, dx);
  if (dy) {
    const char *t = bwd_temp(g), *u = bwd_target(g, OUT0, Y0, dy);
    bwd_emit2(g, "mul", q, OUT0, t);
    bwd_emit1(g, "neg", t, u);
    bwd_reduce_like(g, u, OUT0, Y0, dy);
  }
  return true;
}

/* out = scale(x, k) */
static void emit_scale(GradCtx *g, const char *x, const char *out, AttrValue k) {
  bwd_emit_attr(g, bwd_emit1(g, "scale", x, out), "scale", k);
}

/* A unary op's gradient dX = dOut * f(...) built by `emit`. */
#define UNARY_GRAD(NAME, ...)                                                   \
  static bool g_##NAME(GradCtx *g) {                                             \
    const char *dx = bwd_op_in_grad(g, "X", 0);                                    \
    if (!dx) return true;                                                          \
    __VA_ARGS__;                                                                \
    return true;                                                                   \
  }

/* neg: dX = -dOut */
UNARY_GRAD(neg, bwd_emit1(g, "neg", DOUT, dx))
/* exp: dX = dOut * Out */
UNARY_GRAD(exp, bwd_emit2(g, "mul", DOUT, OUT0, dx))
/* log: dX = dOut / X */
UNARY_GRAD(log, bwd_emit2(g, "div", DOUT, X0, dx))
/* sqrt: dX = dOut * 0.5 / Out */
UNARY_GRAD(sqrt, {
  const char *t = bwd_temp(g);
  emit_scale(g, DOUT, t, attr_float(0.5));
  bwd_emit2(g, "div", t, OUT0, dx);
})
/* square: dX = dOut * 2X */
UNARY_GRAD(square, {
  const char *t = bwd_temp(g);
  emit_scale(g, X0, t, attr_float(2));
  bwd_emit2(g, "mul", DOUT, t, dx);
})
/* sin: dX = dOut * cos X */
UNARY_GRAD(sin, {
  const char *t = bwd_temp(g);
  bwd_emit1(g, "cos", X0, t);
  bwd_emit2(g, "mul", DOUT, t, dx);
})
/* erf: dX = dOut * 2 / sqrt(pi) * e^(-X^2) */
UNARY_GRAD(erf, {
  const char *sq = bwd_temp(g), *ng = bwd_temp(g), *ex = bwd_temp(g), *t = bwd_temp(g);
  bwd_emit1(g, "square", X0, sq);
  bwd_emit1(g, "neg", sq, ng);
  bwd_emit1(g, "exp", ng, ex);
  emit_scale(g, ex, t, attr_float(1.1283791670955126));
  bwd_emit2(g, "mul", DOUT, t, dx);
})
/* cos: dX = -dOut * sin X */
UNARY_GRAD(cos, {
  const char *t = bwd_temp(g), *u = bwd_temp(g);
  bwd_emit1(g, "sin", X0, t);
  bwd_emit2(g, "mul", DOUT, t, u);
  bwd_emit1(g, "neg", u, dx);
})
/* scale: dX = scale(dOut, scale) */
UNARY_GRAD(scale, emit_scale(g, DOUT, dx, *bwd_op_attr(g, "scale")))

/* ---- dedicated gradients ---------------------------------------------------------
 * The activations are on the hot path of training, so each has a *_grad op
 * whose kernel makes dX in one pass with no temporaries.  pow, maximum and
 * minimum have one too: a single pass over Out computes both gradients and
 * sums them straight back to X's and Y's shapes where they were broadcast.
 *
 * Their grad ops are wired by the default maker (bwd_default_grad): a grad
 * op reads the forward values it declares (X, Y, Out) and Out@GRAD, carries
 * the forward op's attributes, and writes only the gradients the builder
 * asked for: an output slot it was not given is absent. */

/* Each X@GRAD has its X's shape; gradients are f32. */
static bool infer_grad_like(InferCtx *c) {
  static const char *const pairs[][2] = {{"X@GRAD", "X"}, {"Y@GRAD", "Y"}};
  for (int k = 0; k < 2; k++) {
    if (!reg_infer_out_count(c, pairs[k][0])) continue;
    const VarDesc *v = reg_infer_in(c, pairs[k][1], 0);
    if (!v) return reg_infer_fail(c, "input %s is missing", pairs[k][1]);
    reg_infer_set(c, pairs[k][0], 0, DT_F32, &v->shape);
  }
  return true;
}

/* A unary grad op's X@GRAD: the shape of its one forward input (X or Out,
 * which have the same shape). */
static bool infer_unary_grad(InferCtx *c) {
  const VarDesc *v = reg_infer_in(c, c->proto->in[0].name, 0);
  if (!v) return reg_infer_fail(c, "input %s is missing", c->proto->in[0].name);
  reg_infer_set(c, "X@GRAD", 0, DT_F32, &v->shape);
  return true;
}

/* ---- unary grad kernels ----
 * dX[i] = EXPR, EXPR reading the forward value v (X or Out), the incoming
 * gradient d and the attributes p. */
typedef void (*UnaryGradLoop)(int64_t n, f32 *restrict gx, const f32 *v, const f32 *dout,
                              const UnaryArgs *p);

#define UNARY_GRAD_LOOP(NAME, EXPR) UNARY_GRAD_LOOP_T(NAME##_grad_loop, f32, EXPR)
#define UNARY_GRAD_LOOP_T(FN, T, EXPR)                                          \
  static void FN(int64_t n, T *restrict gx, const T *vv, const T *dd, const UnaryArgs *p) { \
    (void)p;                                                                    \
    for (int64_t i = 0; i < n; i++) {                                           \
      T v = vv[i], d = dd[i];                                                   \
      gx[i] = (EXPR);                                                           \
    }                                                                           \
  }
/* The f64 loop of a unary grad op (run on one thread: f64 is for checking,
 * not speed). */
typedef void (*UnaryGradLoop64)(int64_t n, f64 *restrict gx, const f64 *v, const f64 *dout,
                                const UnaryArgs *p);
#define UNARY_GRAD_LOOP64(NAME, EXPR) UNARY_GRAD_LOOP_T(NAME##_grad_loop64, f64, EXPR)

/* A unary grad loop over slices of PAR_MIN_WORK elements (par_parts). */
typedef struct UnaryGradSlices {
  UnaryGradLoop f;
  int64_t n;
  f32 *gx;
  const f32 *v, *d;
  const UnaryArgs *p;
} UnaryGradSlices;

static void unary_grad_slice(void *arg, int64_t k) {
  const UnaryGradSlices *u = arg;
  int64_t at = k * PAR_MIN_WORK, len = u->n - at < PAR_MIN_WORK ? u->n - at : PAR_MIN_WORK;
  u->f(len, u->gx + at, u->v + at, u->d + at, u->p);
}

/* f (f64: f64) over the op's inputs, with its attributes A and B (float_args). */
static int unary_grad_run(ExecCtx *c, UnaryGradLoop f, UnaryGradLoop64 fd, const char *a, const char *b) {
  UnaryArgs args = float_args(c, a, b);
  const UnaryArgs *p = &args;
  Tensor *v = exec_ctx_in(c, 0), *d = exec_ctx_in(c, 1), *gx = exec_ctx_out(c, 0);
  if (!gx) return 0;
  if (gx->dtype == DT_F64 && v->dtype == DT_F64 && d->dtype == DT_F64 && v->numel == gx->numel &&
      d->numel == gx->numel) {
    fd(gx->numel, tensor_f64(gx), tensor_f64(v), tensor_f64(d), p);
    return 0;
  }
  if (v->dtype != DT_F32 || d->dtype != DT_F32 || v->numel != gx->numel || d->numel != gx->numel)
    return exec_ctx_fail(c, "internal error: the forward value and Out@GRAD must be f32 of X's size");
  int64_t n = gx->numel, slices = (n + PAR_MIN_WORK - 1) / PAR_MIN_WORK;
  if (slices <= 1) {
    f(n, tensor_f32(gx), tensor_f32(v), tensor_f32(d), p);
    return 0;
  }
  UnaryGradSlices u = {f, n, tensor_f32(gx), tensor_f32(v), tensor_f32(d), p};
  par_parts(slices, unary_grad_slice, &u);
  return 0;
}

/* Each unary grad op: X(NAME, dX in element type T with suffix S, reading
 * the attributes p->P). */
#define UNARY_GRAD_OPS(X, T, P, S)                                              \
  /* abs: sign(X), 0 at 0 (PyTorch's choice: a subgradient). */               \
  X(abs, v > 0 ? d : v < 0 ? -d : 0)                                            \
  /* relu, from Out: passes where Out > 0, so 0 at X = 0. */                   \
  X(relu, v > 0 ? d : 0)                                                        \
  /* sigmoid, from Out: Out (1 - Out). */                                      \
  X(sigmoid, d * v * (1 - v))                                                   \
  /* tanh, from Out: 1 - Out^2. */                                             \
  X(tanh, d * (1 - v * v))                                                      \
  /* softplus: sigmoid(X). */                                                  \
  X(softplus, d * sigmoid_##S(v))                                               \
  /* gelu (exact, erf form): Phi(X) + X phi(X). */                             \
  X(gelu, d * (Phi_##S(v) + v * phi_##S(v)))                                    \
  /* silu: sigmoid(X) (1 + X (1 - sigmoid(X))). */                             \
  X(silu, d * sigmoid_##S(v) * (1 + v * (1 - sigmoid_##S(v))))                  \
  /* hardswish: 0 below -3, X/3 + 1/2 on [-3, 3], 1 above (PyTorch's       \
   * one-sided choices at -3 and 3). */                                         \
  X(hardswish, v < -3 ? 0 : v <= 3 ? d * (v / 3 + (T)0.5) : d)                  \
  /* elu: 1 for X > 0, else alpha e^X (alpha at 0, as PyTorch). */             \
  X(elu, v > 0 ? d : d * p->P[0] * exp(v))                                      \
  /* leaky_relu: 1 for X > 0, else alpha (p->P[0]). */                         \
  X(leaky_relu, v > 0 ? d : p->P[0] * d)                                        \
  /* clip: passes strictly inside (min, max) = (p->P[0], p->P[1]); at a bound  \
   * or outside it is 0. */                                                     \
  X(clip, v > p->P[0] && v < p->P[1] ? d : 0)
UNARY_GRAD_OPS(UNARY_GRAD_LOOP, f32, f, f32)
UNARY_GRAD_OPS(UNARY_GRAD_LOOP64, f64, d, f64)

#define UNARY_GRAD_KERNEL(NAME)                                                 \
  static int k_##NAME##_grad(ExecCtx *c) {                                      \
    return unary_grad_run(c, NAME##_grad_loop, NAME##_grad_loop64, NULL, NULL); \
  }
UNARY_OPS_WITH_GRAD(UNARY_GRAD_KERNEL)

static int k_leaky_relu_grad(ExecCtx *c) {
  return unary_grad_run(c, leaky_relu_grad_loop, leaky_relu_grad_loop64, "alpha", NULL);
}
static int k_elu_grad(ExecCtx *c) { return unary_grad_run(c, elu_grad_loop, elu_grad_loop64, "alpha", NULL); }
static int k_clip_grad(ExecCtx *c) { return unary_grad_run(c, clip_grad_loop, clip_grad_loop64, "min", "max"); }

/* ---- binary grad kernels ----
 * One pass over Out: element i of Out reads X and Y where the broadcast
 * put them, and adds its gradients GX and GY (expressions of a = X, b = Y,
 * o = Out, d = Out@GRAD) into dX and dY at those same places, which sums
 * them back over the broadcast dimensions.  gx or gy is NULL when that
 * gradient was not asked for. */
typedef void (*BinaryGradLoop)(const Bcast *bc, f32 *gx, f32 *gy, const f32 *x, const f32 *y,
                               const f32 *out, const f32 *dout);

#define BINARY_GRAD_LOOP(NAME, GX, GY) BINARY_GRAD_LOOP_T(NAME##_grad_loop, f32, GX, GY)
#define BINARY_GRAD_LOOP_T(FN, T, GX, GY)                                     \
  static void FN(const Bcast *bc, T *gx, T *gy, const T *x,               \
                 const T *y, const T *out, const T *dout) {               \
    int64_t n = bc->inner, sx = bc->inner_step[0], sy = bc->inner_step[1];      \
    int64_t oo = 0, ox = 0, oy = 0;                                             \
    BcastIter it;                                                               \
    if (bc->rank > 1) bcast_iter_init(&it, bc);                                 \
    for (;;) {                                                                  \
      for (int64_t i = 0; i < n; i++) {                                         \
        T a = x[ox + i * sx], b = y[oy + i * sy];                             \
        T o = out[oo + i], d = dout[oo + i];                                  \
        (void)o;                                                                \
        if (gx) gx[ox + i * sx] += (GX);                                        \
        if (gy) gy[oy + i * sy] += (GY);                                        \
      }                                                                         \
      if (bc->rank <= 1 || !bcast_iter_next(&it)) break;                        \
      oo = it.out, ox = it.off[0], oy = it.off[1];                              \
    }                                                                           \
  }

/* Each binary grad op: X(NAME, GX, GY) in element type T.
 * pow, as PyTorch: dX = d Y X^(Y-1), 0 where Y = 0 (not 0 * inf at X = 0);
 * dY = d Out ln X, 0 where X = 0 and Y >= 0 (the limit); NaN for X < 0.
 * maximum and minimum: the gradient goes to the operand that was chosen;
 * on a tie it is split evenly (PyTorch's choice, and what a central
 * difference measures there); a NaN operand is the one chosen. */
#define BINARY_GRAD_OPS(X, T)                                                   \
  X(pow, b == 0 ? 0 : d * b * pow(a, b - 1), a == 0 && b >= 0 ? 0 : d * o * log(a)) \
  X(maximum, a > b || a != a ? d : a == b ? (T)0.5 * d : 0,                     \
    b > a || (b != b && a == a) ? d : a == b ? (T)0.5 * d : 0)                  \
  X(minimum, a < b || a != a ? d : a == b ? (T)0.5 * d : 0,                     \
    b < a || (b != b && a == a) ? d : a == b ? (T)0.5 * d : 0)
BINARY_GRAD_OPS(BINARY_GRAD_LOOP, f32)

/* The f64 loops. */
typedef void (*BinaryGradLoop64)(const Bcast *bc, f64 *gx, f64 *gy, const f64 *x, const f64 *y,
                                 const f64 *out, const f64 *dout);
#define BINARY_GRAD_LOOP64(NAME, GX, GY) BINARY_GRAD_LOOP_T(NAME##_grad_loop64, f64, GX, GY)
BINARY_GRAD_OPS(BINARY_GRAD_LOOP64, f64)

/* binary_grad_run in f64: every value read as f64. */
static int binary_grad_run64(ExecCtx *c, BinaryGradLoop64 f, Tensor **in, Tensor *out, Tensor *dout, Tensor **g) {
  Bcast bc;
  int64_t n;
  if (!bcast_flat_init(&bc, in[0], in[1], out->numel, &n) || n != out->numel)
    return exec_ctx_fail(c, "internal error: X and Y do not broadcast to Out");
  Tensor *v[4] = {tensor_cast(in[0], DT_F64), tensor_cast(in[1], DT_F64), tensor_cast(out, DT_F64),
                  tensor_cast(dout, DT_F64)};
  f(&bc, g[0] ? tensor_f64(g[0]) : NULL, g[1] ? tensor_f64(g[1]) : NULL, tensor_f64(v[0]), tensor_f64(v[1]),
    tensor_f64(v[2]), tensor_f64(v[3]));
  for (int k = 0; k < 4; k++) tensor_unref(v[k]);
  return 0;
}

static int binary_grad_run(ExecCtx *c, BinaryGradLoop f, BinaryGradLoop64 fd) {
  Tensor *in[2] = {exec_ctx_in(c, 0), exec_ctx_in(c, 1)}, *out = exec_ctx_in(c, 2), *dout = exec_ctx_in(c, 3);
  Tensor *g[2] = {exec_ctx_out(c, 0), exec_ctx_out(c, 1)};
  for (int k = 0; k < 2; k++)
    if (g[k] && g[k]->numel) memset(g[k]->data, 0, dtype_size(g[k]->dtype) * (size_t)g[k]->numel);
  if ((!g[0] && !g[1]) || out->numel == 0) return 0;
  if ((!g[0] || g[0]->dtype == DT_F64) && (!g[1] || g[1]->dtype == DT_F64) && out->dtype == DT_F64)
    return binary_grad_run64(c, fd, in, out, dout, g);
  if (out->dtype != DT_F32 || dout->dtype != DT_F32 || dout->numel != out->numel)
    return exec_ctx_fail(c, "internal error: Out and Out@GRAD must be f32 of one size");
  Bcast bc;
  int64_t n;
  if (!bcast_flat_init(&bc, in[0], in[1], out->numel, &n))
    return exec_ctx_fail(c, "internal error: X and Y do not broadcast");
  if (n != out->numel) return exec_ctx_fail(c, "internal error: X and Y do not broadcast to Out");
  /* An operand with no gradient may be an integer (x ** 2): read it as f32. */
  Tensor *v[2];
  for (int k = 0; k < 2; k++)
    v[k] = in[k]->dtype == DT_F32 ? tensor_ref(in[k]) : tensor_cast(in[k], DT_F32);
  f(&bc, g[0] ? tensor_f32(g[0]) : NULL, g[1] ? tensor_f32(g[1]) : NULL, tensor_f32(v[0]),
    tensor_f32(v[1]), tensor_f32(out), tensor_f32(dout));
  tensor_unref(v[0]);
  tensor_unref(v[1]);
  return 0;
}

static int k_pow_grad(ExecCtx *c) { return binary_grad_run(c, pow_grad_loop, pow_grad_loop64); }
static int k_maximum_grad(ExecCtx *c) { return binary_grad_run(c, maximum_grad_loop, maximum_grad_loop64); }
static int k_minimum_grad(ExecCtx *c) { return binary_grad_run(c, minimum_grad_loop, minimum_grad_loop64); }

/* ---- gradients of the grad ops ---------------------------------------------------
 * Composite, so that a backward can be differentiated again.  A unary grad
 * op computes dX = d * f'(v) from the forward value v (X or Out) and
 * d = Out@GRAD; with G the gradient of dX, d's gradient is G * f'(v) — the
 * grad op itself, run on G — and v's is G * d * f''(v), built from forward
 * ops (zero for the piecewise linear ones: abs, relu, leaky_relu, clip). */

#define GG bwd_op_out_grad(g, "X@GRAD", 0)
#define GD bwd_op_in(g, "Out@GRAD", 0)

/* out = scale(x, k) + b */
static void emit_affine(GradCtx *g, const char *x, const char *out, double k, double b) {
  OpDesc *op = bwd_emit1(g, "scale", x, out);
  bwd_emit_attr(g, op, "scale", attr_float(k));
  bwd_emit_attr(g, op, "bias", attr_float(b));
}

/* out = TYPE_grad(v, d), TYPE and the attributes being the grad op's own:
 * d's part of the gradient (the grad op is linear in d). */
static void emit_unary_grad(GradCtx *g, const char *type, const char *v, const char *d, const char *out) {
  bwd_emit_attrs(g, bwd_emit2(g, type, v, d, out));
}

/* The maker of unary grad op NAME_grad: d's gradient as the op itself;
 * then, with t = G * d and dv the gradient of its forward value v (NULL
 * when not needed), the statements that follow. */
#define UNARY_GRAD2(NAME, IN, ...)                                              \
  static bool g_##NAME##_grad(GradCtx *g) {                                      \
    const char *v = bwd_op_in(g, IN, 0), *dd = bwd_op_in_grad(g, "Out@GRAD", 0); \
    const char *dv = bwd_op_in_grad(g, IN, 0);                                  \
    (void)v;                                                                    \
    if (dd) emit_unary_grad(g, #NAME "_grad", v, GG, dd);                       \
    if (dv) {                                                                   \
      const char *t = bwd_temp(g);                                              \
      bwd_emit2(g, "mul", GG, GD, t);                                           \
      __VA_ARGS__;                                                              \
    }                                                                           \
    return true;                                                                   \
  }

UNARY_GRAD2(abs, "X", (void)t)
UNARY_GRAD2(relu, "Out", (void)t)
UNARY_GRAD2(leaky_relu, "X", (void)t)
UNARY_GRAD2(clip, "X", (void)t)
/* tanh, from Out: d (1 - Out^2) gives Out -2 G d Out. */
UNARY_GRAD2(tanh, "Out", {
  const char *u = bwd_temp(g);
  bwd_emit2(g, "mul", t, v, u);
  emit_scale(g, u, dv, attr_float(-2));
})
/* sigmoid, from Out: d Out (1 - Out) gives Out G d (1 - 2 Out). */
UNARY_GRAD2(sigmoid, "Out", {
  const char *u = bwd_temp(g);
  emit_affine(g, v, u, -2, 1);
  bwd_emit2(g, "mul", t, u, dv);
})
/* softplus: d sigmoid(X) gives X G d sigmoid'(X), a sigmoid_grad. */
UNARY_GRAD2(softplus, "X", {
  const char *s = bwd_temp(g);
  bwd_emit1(g, "sigmoid", v, s);
  emit_unary_grad(g, "sigmoid_grad", s, t, dv);
})
/* gelu: d (Phi + X phi) gives X G d phi(X) (2 - X^2). */
UNARY_GRAD2(gelu, "X", {
  const char *x2 = bwd_temp(g), *h = bwd_temp(g), *e = bwd_temp(g), *f = bwd_temp(g), *q = bwd_temp(g);
  bwd_emit1(g, "square", v, x2);
  emit_affine(g, x2, h, -0.5, 0);
  bwd_emit1(g, "exp", h, e);
  emit_affine(g, x2, f, -0.39894228040143268, 0.79788456080286536);
  bwd_emit2(g, "mul", e, f, q);
  bwd_emit2(g, "mul", t, q, dv);
})
/* silu: d s (1 + X (1 - s)), s = sigmoid(X), gives X
 * G d s (1 - s) (2 + X (1 - 2 s)). */
UNARY_GRAD2(silu, "X", {
  const char *s = bwd_temp(g), *q = bwd_temp(g), *w = bwd_temp(g), *xw = bwd_temp(g), *z = bwd_temp(g);
  bwd_emit1(g, "sigmoid", v, s);
  emit_unary_grad(g, "sigmoid_grad", s, t, q);
  emit_affine(g, s, w, -2, 1);
  bwd_emit2(g, "mul", v, w, xw);
  emit_affine(g, xw, z, 1, 2);
  bwd_emit2(g, "mul", q, z, dv);
})
/* hardswish: d (X/3 + 1/2) on (-3, 3) gives X G d / 3 there, 0 elsewhere:
 * a clip_grad to (-3, 3) of t, scaled. */
UNARY_GRAD2(hardswish, "X", {
  const char *u = bwd_temp(g);
  OpDesc *in = bwd_emit2(g, "clip_grad", v, t, u);
  bwd_emit_attr(g, in, "min", attr_float(-3));
  bwd_emit_attr(g, in, "max", attr_float(3));
  emit_scale(g, u, dv, attr_float(1.0 / 3));
})
/* elu: d alpha e^X for X <= 0 gives X the same of t there, and 0 where
 * X > 0: elu_grad(X, t) less relu_grad(X, t). */
UNARY_GRAD2(elu, "X", {
  const char *a = bwd_temp(g), *b = bwd_temp(g);
  emit_unary_grad(g, "elu_grad", v, t, a);
  emit_unary_grad(g, "relu_grad", v, t, b);
  bwd_emit2(g, "sub", a, b, dv);
})

/* out = cast(x) to f32 */
static void emit_cast_f32(GradCtx *g, const char *x, const char *out) {
  bwd_emit_attr(g, bwd_emit1(g, "cast", x, out), "dtype", attr_dtype(DT_F32));
}

/* maximum_grad and minimum_grad are linear in d = Out@GRAD and piecewise
 * constant in X and Y: d's gradient is GX m + GY (1 - m), m (of Out's
 * shape) 1 where X was chosen, 1/2 on a tie, 0 where Y was. */
static bool pick_grad(GradCtx *g, const char *cmp) {
  const char *dd = bwd_op_in_grad(g, "Out@GRAD", 0);
  if (!dd) return true;
  const char *x = bwd_op_in(g, "X", 0), *y = bwd_op_in(g, "Y", 0);
  bool hx = bwd_op_out(g, "X@GRAD", 0) != NULL, hy = bwd_op_out(g, "Y@GRAD", 0) != NULL;
  const char *gx = hx ? bwd_op_out_grad(g, "X@GRAD", 0) : NULL, *gy = hy ? bwd_op_out_grad(g, "Y@GRAD", 0) : NULL;
  const char *c = bwd_temp(g), *e = bwd_temp(g), *cf = bwd_temp(g), *ef = bwd_temp(g), *h = bwd_temp(g);
  const char *m = bwd_temp(g);
  bwd_emit2(g, cmp, x, y, c);
  bwd_emit2(g, "equal", x, y, e);
  emit_cast_f32(g, c, cf);
  emit_cast_f32(g, e, ef);
  emit_affine(g, ef, h, 0.5, 0);
  bwd_emit2(g, "add", cf, h, m);
  if (gx && gy) {
    const char *df = bwd_temp(g), *u = bwd_temp(g);
    bwd_emit2(g, "sub", gx, gy, df);
    bwd_emit2(g, "mul", df, m, u);
    bwd_emit2(g, "add", u, gy, dd);
  } else if (gx) {
    bwd_emit2(g, "mul", gx, m, dd);
  } else if (gy) {
    const char *n = bwd_temp(g);
    emit_affine(g, m, n, -1, 1);
    bwd_emit2(g, "mul", gy, n, dd);
  }
  return true;
}
/* out = a * b + c (c may be NULL) */
static void emit_muladd(GradCtx *g, const char *a, const char *b, const char *c, const char *out) {
  const char *t = c ? bwd_temp(g) : out;
  bwd_emit2(g, "mul", a, b, t);
  if (c) bwd_emit2(g, "add", t, c, out);
}

/* pow_grad(x, y, o, d) with the outputs asked for (NULL: not). */
static void emit_pow_grad(GradCtx *g, const char *x, const char *y, const char *o, const char *d, const char *gx,
                          const char *gy) {
  OpDesc *op = bwd_emit(g, "pow_grad");
  bwd_emit_in(g, op, "X", x);
  bwd_emit_in(g, op, "Y", y);
  bwd_emit_in(g, op, "Out", o);
  bwd_emit_in(g, op, "Out@GRAD", d);
  if (gx) bwd_emit_out(g, op, "X@GRAD", gx);
  if (gy) bwd_emit_out(g, op, "Y@GRAD", gy);
}

/* pow_grad: GX = d A, GY = d B (each summed back to its operand's shape),
 * A = Y X^(Y-1) and B = Out ln X with the kernel's special points.  With
 * G1, G2 the gradients of GX, GY (either may be absent):
 *   d:   G1 A + G2 B
 *   X:   d (G1 Y (Y-1) X^(Y-2) + G2 X^(Y-1))       (B's part: Out / X)
 *   Y:   d G1 X^(Y-1) (1 + Y ln X)
 *   Out: d G2 ln X
 * A, ln X and (Y-1) X^(Y-2) come from pow_grad itself on X and Y
 * broadcast to Out's shape, so they keep its special points (0, not NaN,
 * at X = 0 with Y >= 0). */
static bool g_pow_grad(GradCtx *g) {
  const char *x = bwd_op_in(g, "X", 0), *y = bwd_op_in(g, "Y", 0), *o = bwd_op_in(g, "Out", 0), *d = GD;
  const char *dd = bwd_op_in_grad(g, "Out@GRAD", 0), *dx = bwd_op_in_grad(g, "X", 0);
  const char *dy = bwd_op_in_grad(g, "Y", 0), *dout = bwd_op_in_grad(g, "Out", 0);
  const char *g1 = bwd_op_out(g, "X@GRAD", 0) ? bwd_op_out_grad(g, "X@GRAD", 0) : NULL;
  const char *g2 = bwd_op_out(g, "Y@GRAD", 0) ? bwd_op_out_grad(g, "Y@GRAD", 0) : NULL;
  if (!dd && !dx && !dy && !dout) return true;
  const char *z = bwd_temp(g), *one = bwd_temp(g), *xb = bwd_temp(g), *yb = bwd_temp(g);
  const char *a = bwd_temp(g), *l = bwd_temp(g);
  bwd_emit1(g, "fill_zeros_like", o, z);
  bwd_emit1(g, "ones_like", o, one);
  bwd_emit2(g, "add", x, z, xb);
  bwd_emit2(g, "add", y, z, yb);
  emit_pow_grad(g, xb, yb, one, one, a, l);
  if (dd) {
    const char *b = bwd_temp(g), *t = g1 && g2 ? bwd_temp(g) : NULL;
    bwd_emit2(g, "mul", o, l, b);
    if (g2) emit_muladd(g, g2, b, NULL, t ? t : dd);
    if (g1) emit_muladd(g, g1, a, t, dd);
  }
  if (dout && g2) {
    const char *t = bwd_temp(g);
    bwd_emit2(g, "mul", d, g2, t);
    bwd_emit2(g, "mul", t, l, dout);
  }
  if (!dx && !(dy && g1)) return true;
  const char *y1 = bwd_temp(g), *q = bwd_temp(g);
  emit_affine(g, yb, y1, 1, -1);
  bwd_emit2(g, "pow", xb, y1, q);
  if (dx && (g1 || g2)) {
    const char *s = bwd_temp(g), *t = bwd_target(g, o, x, dx);
    if (g1) {
      const char *ax = bwd_temp(g), *ay = bwd_temp(g);
      emit_pow_grad(g, xb, y1, one, one, ax, NULL);
      bwd_emit2(g, "mul", yb, ax, ay);
      const char *u = g2 ? bwd_temp(g) : s;
      if (g2) emit_muladd(g, g2, q, NULL, u);
      emit_muladd(g, g1, ay, g2 ? u : NULL, s);
    } else {
      bwd_emit2(g, "mul", g2, q, s);
    }
    bwd_emit2(g, "mul", d, s, t);
    bwd_reduce_like(g, t, o, x, dx);
  }
  if (dy && g1) {
    const char *yl = bwd_temp(g), *w = bwd_temp(g), *u = bwd_temp(g), *v = bwd_temp(g);
    const char *t = bwd_target(g, o, y, dy);
    bwd_emit2(g, "mul", yb, l, yl);
    emit_affine(g, yl, w, 1, 1);
    bwd_emit2(g, "mul", q, w, u);
    bwd_emit2(g, "mul", g1, u, v);
    bwd_emit2(g, "mul", d, v, t);
    bwd_reduce_like(g, t, o, y, dy);
  }
  return true;
}

static bool g_maximum_grad(GradCtx *g) { return pick_grad(g, "greater_than"); }
static bool g_minimum_grad(GradCtx *g) { return pick_grad(g, "less_than"); }

/* ---- fused_elementwise ------------------------------------------------------------
 * A chain of the ops above (rewrite.c's fused_chain) run as one op: every
 * element goes through all the steps while it is in cache, a tile of
 * FE_TILE elements at a time, each step one vectorizable loop over the
 * tile.  A step computes the expression of its op's own loop above, in
 * the op's element type (the lists below are those the loops are made
 * from), so the fused result has the bits of the ops it stands for.
 *
 * Registers: 0..nin-1 are the inputs X, nin + s is step s's result.  An
 * input is the whole shape (FE_FULL), one value repeated (FE_SCALAR), or
 * a shape of the trailing dims repeated along the leading ones (FE_TAIL:
 * a bias); the tiles then follow its rows (fe_line). */
/* At least rewrite.c's FE_STEPS and FE_INS. */
enum { FE_MAX_STEPS = 16, FE_MAX_IN = 8, FE_TILE = 256 };
enum { FE_FULL, FE_SCALAR, FE_TAIL };

#define FE_CODE2(NAME, F, I) FE_##NAME,
#define FE_CODE1(NAME, E) FE_##NAME,
#define FE_CODEG(NAME, E) FE_##NAME##_grad,
enum FeCode {
  BINARY_OPS(FE_CODE2, f32) SAME_UNARY_OPS(FE_CODE2, f) FLOAT_UNARY_OPS(FE_CODE1, f, f32)
  UNARY_GRAD_OPS(FE_CODEG, f32, f, f32) FE_NCODES
};
#define FE_NAME2(NAME, F, I) #NAME,
#define FE_NAME1(NAME, E) #NAME,
#define FE_NAMEG(NAME, E) #NAME "_grad",
static const char *const fe_names[FE_NCODES] = {
    BINARY_OPS(FE_NAME2, f32) SAME_UNARY_OPS(FE_NAME2, f) FLOAT_UNARY_OPS(FE_NAME1, f, f32)
    UNARY_GRAD_OPS(FE_NAMEG, f32, f, f32)};

/* One step over n elements: o = the op's expression of A (and B). */
#define FE_CASE_BIN(NAME, FEXPR, IEXPR)                                        \
  case FE_##NAME:                                                               \
    for (int64_t i = 0; i < n; i++) {                                           \
      fe_t a = A[i], b = B[i];                                                     \
      o[i] = (fe_t)(FEXPR);                                                        \
    }                                                                           \
    break;
#define FE_CASE_SAME(NAME, FEXPR, IEXPR)                                       \
  case FE_##NAME:                                                               \
    for (int64_t i = 0; i < n; i++) {                                           \
      fe_t a = A[i];                                                             \
      o[i] = (fe_t)(FEXPR);                                                        \
    }                                                                           \
    break;
#define FE_CASE_UN(NAME, EXPR) FE_CASE_SAME(NAME, EXPR, 0)
#define FE_CASE_GRAD(NAME, EXPR)                                               \
  case FE_##NAME##_grad:                                                        \
    for (int64_t i = 0; i < n; i++) {                                           \
      fe_t v = A[i], d = B[i];                                                     \
      o[i] = (EXPR);                                                            \
    }                                                                           \
    break;
#define FE_STEP_FN(FN, T, S, P)                                                 \
  static void FN(int code, int64_t n, T *restrict o, const T *A, const T *B, const UnaryArgs *p) { \
    typedef T fe_t;                                                             \
    (void)B;                                                                    \
    switch (code) {                                                             \
      BINARY_OPS(FE_CASE_BIN, S)                                                \
      SAME_UNARY_OPS(FE_CASE_SAME, P)                                           \
      FLOAT_UNARY_OPS(FE_CASE_UN, P, S)                                         \
      UNARY_GRAD_OPS(FE_CASE_GRAD, T, P, S)                                     \
    default: break;                                                             \
    }                                                                           \
  }
FE_STEP_FN(fe_step_f32, f32, f32, f)
FE_STEP_FN(fe_step_f64, f64, f64, d)

/* A fused op's steps, read once per run. */
typedef struct FeProg {
  int nin, nsteps, nout;
  int kind[FE_MAX_IN];
  int code[FE_MAX_STEPS], arg[FE_MAX_STEPS][2];
  int out_of[FE_MAX_STEPS];  /* the output step s writes, or -1 */
  UnaryArgs args[FE_MAX_STEPS];
  const char *data[FE_MAX_IN];
  char *out[FE_MAX_STEPS];
  bool f64;
  int64_t n, row;            /* elements, the row (the tail's size; n without one) */
} FeProg;

/* The kernel's lines: a row of the tail (all of n without one), or, for
 * a row shorter than a tile, as many whole rows as fill one (the tail
 * repeated that often in a buffer); a line is cut into tiles. */
static int64_t fe_line(const FeProg *fp) { return fp->row >= FE_TILE ? fp->row : FE_TILE / fp->row * fp->row; }

/* Tiles [k0, k1) of the lines. */
static void fe_chunks(const FeProg *fp, int64_t k0, int64_t k1) {
  size_t es = fp->f64 ? sizeof(f64) : sizeof(f32);
  int64_t line = fe_line(fp), per_line = (line + FE_TILE - 1) / FE_TILE;
  _Alignas(64) char bufs[FE_MAX_STEPS][FE_TILE * sizeof(f64)];
  _Alignas(64) char rep[FE_MAX_IN][FE_TILE * sizeof(f64)];   /* the scalars and short tails, repeated */
  for (int r = 0; r < fp->nin; r++)
    if (fp->kind[r] == FE_SCALAR || (fp->kind[r] == FE_TAIL && fp->row < FE_TILE)) {
      int64_t len = fp->kind[r] == FE_SCALAR ? 1 : fp->row, fill = line < FE_TILE ? line : FE_TILE;
      for (int64_t i = 0; i + len <= fill; i += len) memcpy(rep[r] + (size_t)i * es, fp->data[r], (size_t)len * es);
    }
  for (int64_t k = k0; k < k1; k++) {
    int64_t col = (k % per_line) * FE_TILE, at = k / per_line * line + col;
    int64_t n = line - col < FE_TILE ? line - col : FE_TILE;
    if (n > fp->n - at) n = fp->n - at;
    const char *reg[FE_MAX_IN + FE_MAX_STEPS];
    for (int r = 0; r < fp->nin; r++)
      reg[r] = fp->kind[r] == FE_FULL                         ? fp->data[r] + (size_t)at * es
               : fp->kind[r] == FE_TAIL && fp->row >= FE_TILE ? fp->data[r] + (size_t)col * es
                                                               : rep[r];
    for (int s = 0; s < fp->nsteps; s++) {
      char *o = fp->out_of[s] >= 0 ? fp->out[fp->out_of[s]] + (size_t)at * es : bufs[s];
      const char *a = reg[fp->arg[s][0]], *b = fp->arg[s][1] >= 0 ? reg[fp->arg[s][1]] : a;
      if (fp->f64) fe_step_f64(fp->code[s], n, (f64 *)o, (const f64 *)a, (const f64 *)b, &fp->args[s]);
      else fe_step_f32(fp->code[s], n, (f32 *)o, (const f32 *)a, (const f32 *)b, &fp->args[s]);
      reg[fp->nin + s] = o;
    }
  }
}

typedef struct FeSlices {
  const FeProg *fp;
  int64_t nchunks, per;
} FeSlices;

static void fe_slice(void *arg, int64_t k) {
  const FeSlices *u = arg;
  int64_t k1 = (k + 1) * u->per < u->nchunks ? (k + 1) * u->per : u->nchunks;
  fe_chunks(u->fp, k * u->per, k1);
}

/* The attribute `name` of the fused op, a list of at least n values. */
static const AttrValue *fe_list(ExecCtx *c, const char *name, AttrType t, int n) {
  const AttrValue *v = exec_ctx_attr(c, name);
  return v && v->type == t && v->n >= n ? v : NULL;
}

static int k_fused_elementwise(ExecCtx *c) {
  FeProg fp = {.nin = exec_ctx_in_count(c, 0), .nout = exec_ctx_out_count(c, 0)};
  const AttrValue *ops = exec_ctx_attr(c, "ops");
  fp.nsteps = ops && ops->type == ATTR_STRINGS ? ops->n : 0;
  const AttrValue *args = fe_list(c, "args", ATTR_INTS, 2 * fp.nsteps), *kinds = fe_list(c, "kinds", ATTR_INTS, fp.nin);
  const AttrValue *params = fe_list(c, "params", ATTR_FLOATS, 2 * fp.nsteps), *outs = fe_list(c, "outs", ATTR_INTS, fp.nout);
  if (!fp.nsteps || fp.nsteps > FE_MAX_STEPS || fp.nin < 1 || fp.nin > FE_MAX_IN || fp.nout < 1 || !args || !kinds ||
      !params || !outs)
    return exec_ctx_fail(c, "internal error: fused_elementwise: malformed steps");
  Tensor *o0 = exec_ctx_out_at(c, 0, 0);
  if (o0->dtype != DT_F32 && o0->dtype != DT_F64)
    return exec_ctx_fail(c, "internal error: fused_elementwise: %s values", dtype_name(o0->dtype));
  fp.f64 = o0->dtype == DT_F64;
  fp.n = o0->numel;
  fp.row = fp.n;
  for (int s = 0; s < fp.nsteps; s++) {
    fp.code[s] = -1;
    for (int k = 0; k < FE_NCODES && fp.code[s] < 0; k++)
      if (strcmp(ops->u.strings[s], fe_names[k]) == 0) fp.code[s] = k;
    fp.out_of[s] = -1;
    for (int r = 0; r < 2; r++) {
      fp.arg[s][r] = (int)args->u.ints[2 * s + r];
      if (fp.arg[s][r] < (r ? -1 : 0) || fp.arg[s][r] >= fp.nin + s) fp.code[s] = -1;
    }
    double da = params->u.floats[2 * s], db = params->u.floats[2 * s + 1];
    fp.args[s] = (UnaryArgs){.f = {(f32)da, (f32)db}, .d = {da, db}};
    if (fp.code[s] < 0) return exec_ctx_fail(c, "internal error: fused_elementwise: bad step %d", s);
  }
  for (int k = 0; k < fp.nout; k++) {
    Tensor *t = exec_ctx_out_at(c, 0, k);
    int64_t r = outs->u.ints[k] - fp.nin;
    if (r < 0 || r >= fp.nsteps || fp.out_of[r] >= 0 || t->dtype != o0->dtype || t->numel != fp.n)
      return exec_ctx_fail(c, "internal error: fused_elementwise: bad output %d", k);
    fp.out_of[r] = k;
    fp.out[k] = t->data;
  }
  for (int k = 0; k < fp.nin; k++) {
    Tensor *t = exec_ctx_in_at(c, 0, k);
    fp.kind[k] = (int)kinds->u.ints[k];
    fp.data[k] = t->data;
    bool ok = t->dtype == o0->dtype;
    if (fp.kind[k] == FE_FULL) ok &= t->numel == fp.n;
    else if (fp.kind[k] == FE_SCALAR) ok &= t->numel == 1;
    else if (fp.kind[k] == FE_TAIL && fp.row == fp.n && t->numel > 0 && fp.n % t->numel == 0) fp.row = t->numel;
    else ok &= fp.kind[k] == FE_TAIL && t->numel == fp.row;
    if (!ok) return exec_ctx_fail(c, "internal error: fused_elementwise: input %d does not fit", k);
  }
  if (fp.n == 0) return 0;
  int64_t line = fe_line(&fp), nchunks = (fp.n + line - 1) / line * ((line + FE_TILE - 1) / FE_TILE);
  int64_t per = (PAR_MIN_WORK + FE_TILE - 1) / FE_TILE, slices = (nchunks + per - 1) / per;
  if (slices <= 1) {
    fe_chunks(&fp, 0, nchunks);
    return 0;
  }
  FeSlices u = {&fp, nchunks, per};
  par_parts(slices, fe_slice, &u);
  return 0;
}

/* Every output has the shape of the first whole input (the rewrite made
 * sure the others fit it), and its dtype. */
static bool infer_fused_elementwise(InferCtx *c) {
  const AttrValue *kinds = reg_infer_attr(c, "kinds");
  int nin = reg_infer_count(c, "X");
  const VarDesc *full = NULL;
  for (int k = 0; k < nin && kinds && kinds->type == ATTR_INTS && k < kinds->n && !full; k++)
    if (kinds->u.ints[k] == FE_FULL) full = reg_infer_in(c, "X", k);
  if (!full) return reg_infer_fail(c, "internal error: no whole input");
  for (int k = 0; k < nin; k++) {
    const VarDesc *v = reg_infer_in(c, "X", k);
    int64_t kind = k < kinds->n ? kinds->u.ints[k] : -1;
    bool ok = v->dtype == full->dtype;
    if (kind == FE_FULL) ok &= shape_eq(&v->shape, &full->shape);
    else if (kind == FE_TAIL) {
      ok &= v->shape.rank >= 0 && v->shape.rank < full->shape.rank;
      for (int d = 0; ok && d < v->shape.rank; d++) {
        Dim a = v->shape.d[d], b = full->shape.d[full->shape.rank - v->shape.rank + d];
        ok = a.n == b.n && (a.sym == NULL) == (b.sym == NULL) && (!a.sym || strcmp(a.sym, b.sym) == 0);
      }
    } else if (kind == FE_SCALAR) {
      ok &= v->shape.rank >= 0 && v->shape.rank <= full->shape.rank;
      for (int d = 0; ok && d < v->shape.rank; d++) ok = v->shape.d[d].n == 1;
    } else ok = false;
    if (!ok) {
      char a[128], b[128];
      return reg_infer_fail(c, "internal error: input %d (%s %s) does not fit %s %s", k, dtype_name(v->dtype),
                            shape_str(&v->shape, a, sizeof a), dtype_name(full->dtype),
                            shape_str(&full->shape, b, sizeof b));
    }
  }
  for (int k = 0; k < reg_infer_out_count(c, "Out"); k++) reg_infer_set(c, "Out", k, full->dtype, &full->shape);
  return true;
}

/* ---- the table ----------------------------------------------------------------- */

#define BINARY(NAME, DOC, GK)                                                   \
  {.type = #NAME, .doc = DOC, .kernel = k_##NAME, .grad = GRAD_FN_##GK(NAME),   \
   .in = {{"X", 0, "left operand"}, {"Y", 0, "right operand"}},                 \
   .out = {{"Out", 0, "the result, broadcast shape of X and Y"}},               \
   .infer = infer_binary, .grad_kind = GK, .flags = OP_F64 | OP_STEP}
/* A composite maker is g_NAME; a dedicated op has the default maker, which
 * emits NAME_grad, the entry that follows its forward op in the table. */
#define GRAD_FN_GRAD_COMPOSITE(NAME) g_##NAME
#define GRAD_FN_GRAD_DEDICATED(NAME) NULL
#define UNARY(NAME, DOC, INFER, GK)                                             \
  {.type = #NAME, .doc = DOC, .kernel = k_##NAME, .grad = GRAD_FN_##GK(NAME),   \
   .in = {{"X", 0, "input"}},                                                   \
   .out = {{"Out", 0, "the result, shape of X"}}, .infer = INFER, .grad_kind = GK, .flags = OP_F64 | OP_STEP}
/* NAME_grad: X@GRAD from Out@GRAD and the forward value IN (X or Out);
 * ATTRS are the forward op's. */
#define UNARY_GRAD_OP(NAME, IN, ATTRS)                                          \
  {.type = #NAME "_grad", .doc = "the gradient of " #NAME, .kernel = k_##NAME##_grad, \
   .in = {{IN, 0, "the forward op's " IN}, {"Out@GRAD", 0, "the gradient of Out"}}, \
   .out = {{"X@GRAD", 0, "the gradient of X"}}, .attrs = ATTRS,                \
   .infer = infer_unary_grad, .grad_kind = GRAD_COMPOSITE, .grad = g_##NAME##_grad, \
   .flags = OP_INTERNAL | OP_F64 | OP_STEP}
#define NO_ATTRS {{NULL}}
#define LEAKY_RELU_ATTRS {{"alpha", ATTR_FLOAT, "0.01", reg_check_nonnegative, "slope for X < 0"}}
#define ELU_ATTRS {{"alpha", ATTR_FLOAT, "1.0", NULL, "the value approached as X goes to -inf is -alpha"}}
#define CLIP_ATTRS                                                              \
  {{"min", ATTR_FLOAT, NULL, NULL, "lower bound"},                              \
   {"max", ATTR_FLOAT, NULL, NULL, "upper bound"}}
/* NAME_grad: X@GRAD and Y@GRAD (either may be left out), reduced to X's
 * and Y's shapes. */
#define BINARY_GRAD_OP(NAME)                                                    \
  {.type = #NAME "_grad", .doc = "the gradients of " #NAME, .kernel = k_##NAME##_grad, \
   .in = {{"X", 0, "the forward op's X"}, {"Y", 0, "the forward op's Y"},       \
          {"Out", 0, "the forward op's Out"}, {"Out@GRAD", 0, "the gradient of Out"}}, \
   .out = {{"X@GRAD", SLOT_OPTIONAL, "the gradient of X"},                      \
           {"Y@GRAD", SLOT_OPTIONAL, "the gradient of Y"}},                     \
   .infer = infer_grad_like, .grad_kind = GRAD_COMPOSITE, .grad = g_##NAME##_grad, \
   .flags = OP_INTERNAL | OP_F64}

OpProto op_table_elementwise[] = {
    BINARY(add, "Out = X + Y, broadcasting", GRAD_COMPOSITE),
    BINARY(sub, "Out = X - Y, broadcasting", GRAD_COMPOSITE),
    BINARY(mul, "Out = X * Y, broadcasting", GRAD_COMPOSITE),
    BINARY(div, "Out = X / Y, broadcasting; integer division truncates toward 0, by 0 is an error",
           GRAD_COMPOSITE),
    BINARY(pow, "Out = X ** Y, broadcasting; an integer to a negative integer power is an error",
           GRAD_DEDICATED),
    BINARY_GRAD_OP(pow),
    BINARY(maximum, "Out = max(X, Y) elementwise", GRAD_DEDICATED),
    BINARY_GRAD_OP(maximum),
    BINARY(minimum, "Out = min(X, Y) elementwise", GRAD_DEDICATED),
    BINARY_GRAD_OP(minimum),
    UNARY(neg, "Out = -X", infer_same, GRAD_COMPOSITE),
    UNARY(abs, "Out = |X|", infer_same, GRAD_DEDICATED),
    UNARY_GRAD_OP(abs, "X", NO_ATTRS),
    UNARY(exp, "Out = e^X", infer_float, GRAD_COMPOSITE),
    UNARY(log, "Out = ln X (log 0 is -inf)", infer_float, GRAD_COMPOSITE),
    UNARY(sqrt, "Out = sqrt(X)", infer_float, GRAD_COMPOSITE),
    UNARY(square, "Out = X * X", infer_same, GRAD_COMPOSITE),
    UNARY(sin, "Out = sin X", infer_float, GRAD_COMPOSITE),
    UNARY(cos, "Out = cos X", infer_float, GRAD_COMPOSITE),
    UNARY(erf, "Out = erf X, the error function", infer_float, GRAD_COMPOSITE),
    UNARY(relu, "Out = max(X, 0)", infer_same, GRAD_DEDICATED),
    UNARY_GRAD_OP(relu, "Out", NO_ATTRS),
    UNARY(sigmoid, "Out = 1 / (1 + e^-X)", infer_float, GRAD_DEDICATED),
    UNARY_GRAD_OP(sigmoid, "Out", NO_ATTRS),
    UNARY(tanh, "Out = tanh X", infer_float, GRAD_DEDICATED),
    UNARY_GRAD_OP(tanh, "Out", NO_ATTRS),
    UNARY(softplus, "Out = ln(1 + e^X), computed stably", infer_float, GRAD_DEDICATED),
    UNARY_GRAD_OP(softplus, "X", NO_ATTRS),
    UNARY(gelu, "Out = X * Phi(X), the Gaussian error linear unit (erf form)", infer_float,
          GRAD_DEDICATED),
    UNARY_GRAD_OP(gelu, "X", NO_ATTRS),
    {.type = "leaky_relu", .doc = "Out = X if X > 0 else alpha * X",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "the result, shape of X"}},
     .attrs = LEAKY_RELU_ATTRS, .infer = infer_float, .kernel = k_leaky_relu,
     .grad_kind = GRAD_DEDICATED, .flags = OP_F64 | OP_STEP},
    UNARY_GRAD_OP(leaky_relu, "X", LEAKY_RELU_ATTRS),
    {.type = "elu", .doc = "Out = X if X > 0 else alpha * (e^X - 1)",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "the result, shape of X"}},
     .attrs = ELU_ATTRS, .infer = infer_float, .kernel = k_elu, .grad_kind = GRAD_DEDICATED, .flags = OP_F64 | OP_STEP},
    UNARY_GRAD_OP(elu, "X", ELU_ATTRS),
    UNARY(silu, "Out = X * sigmoid(X), the sigmoid linear unit (swish)", infer_float, GRAD_DEDICATED),
    UNARY_GRAD_OP(silu, "X", NO_ATTRS),
    UNARY(hardswish, "Out = X * min(max(X + 3, 0), 6) / 6, the hard swish (MobileNetV3)", infer_float,
          GRAD_DEDICATED),
    UNARY_GRAD_OP(hardswish, "X", NO_ATTRS),
    {.type = "scale", .doc = "Out = scale * X + bias",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "the result, shape of X"}},
     .attrs = {{"scale", ATTR_FLOAT, "1", NULL, "multiplier"},
               {"bias", ATTR_FLOAT, "0", NULL, "added after scaling"}},
     .infer = infer_float, .kernel = k_scale, .grad_kind = GRAD_COMPOSITE, .grad = g_scale, .flags = OP_F64 | OP_STEP},
    {.type = "clip", .doc = "Out = X limited to [min, max]",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "the result, shape of X"}},
     .attrs = CLIP_ATTRS, .infer = infer_clip, .kernel = k_clip, .grad_kind = GRAD_DEDICATED, .flags = OP_F64 | OP_STEP},
    UNARY_GRAD_OP(clip, "X", CLIP_ATTRS),
    {.type = "fused_elementwise",
     .doc = "a chain of elementwise ops run as one pass over the elements: made by the executor, not by scripts",
     .in = {{"X", SLOT_LIST, "the chain's inputs"}},
     .out = {{"Out", SLOT_LIST, "the chain's values read after it"}},
     .attrs = {{"ops", ATTR_STRINGS, NULL, NULL, "each step's op"},
               {"args", ATTR_INTS, NULL, NULL, "each step's two operands: registers (X, then the steps), -1 for none"},
               {"params", ATTR_FLOATS, NULL, NULL, "each step's two attributes (scale and bias, alpha, min and max)"},
               {"kinds", ATTR_INTS, NULL, NULL, "each input: 0 whole, 1 one value, 2 trailing dims repeated"},
               {"outs", ATTR_INTS, NULL, NULL, "the register each Out is"}},
     .infer = infer_fused_elementwise, .kernel = k_fused_elementwise, .grad_kind = GRAD_NONE,
     .flags = OP_INTERNAL | OP_AFTER_BACKWARD | OP_F64},
    {0},
};
