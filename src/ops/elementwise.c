/* elementwise.c — arithmetic and activation ops, one value per element.
 *
 * Binary ops broadcast like NumPy; their gradients are summed back to each
 * input's shape.  i64 with f32 promotes to f32; bool counts as i64. */
#include "../backward.h"
#include "../exec.h"

#include <math.h>

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

typedef float f32;
typedef int64_t i64;
typedef uint8_t bln;

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

/* max/min that propagate NaN, like NumPy's maximum/minimum. */
static inline f32 max_f32(f32 a, f32 b) { return a > b || a != a ? a : b; }
static inline f32 min_f32(f32 a, f32 b) { return a < b || a != a ? a : b; }

/* 1 / (1 + e^-a) without overflow: e^-|a| is at most 1. */
static inline f32 sigmoid_f32(f32 a) {
  f32 e = expf(-fabsf(a)), r = 1.0f / (1.0f + e);
  return a >= 0 ? r : e * r;
}

/* ln(1 + e^a) = max(a, 0) + ln(1 + e^-|a|), finite for every finite a. */
static inline f32 softplus_f32(f32 a) { return (a > 0 ? a : 0.0f) + log1pf(expf(-fabsf(a))); }

static inline f32 gelu_f32(f32 a) { return 0.5f * a * (1.0f + erff(a * 0.70710678118654752f)); }

/* ---- binary loops ---- */

/* One broadcast binary loop: output type OT, operand types XT and YT, both
 * read as CT into `a` and `b`, the result EXPR.  Each row of the broadcast
 * is a tight loop; which operands advance along it is decided per row. */
typedef void (*BinaryLoop)(const Bcast *bc, void *out, const void *x, const void *y);

#define BINARY_LOOP(FN, OT, XT, YT, CT, EXPR)                                   \
  static void FN(const Bcast *bc, void *out, const void *xv, const void *yv) {  \
    const XT *x = xv;                                                           \
    const YT *y = yv;                                                           \
    int64_t n = bc->inner;                                                      \
    bool sx = bc->inner_step[0] != 0, sy = bc->inner_step[1] != 0;              \
    int64_t oo = 0, ox = 0, oy = 0;                                             \
    BcastIter it;                                                               \
    if (bc->rank > 1) bcast_iter_init(&it, bc);                                 \
    for (;;) {                                                                  \
      OT *restrict o = (OT *)out + oo;                                          \
      const XT *px = x + ox;                                                    \
      const YT *py = y + oy;                                                    \
      if (sx && sy) {                                                           \
        for (int64_t i = 0; i < n; i++) {                                       \
          CT a = (CT)px[i], b = (CT)py[i];                                      \
          o[i] = (OT)(EXPR);                                                    \
        }                                                                       \
      } else if (sx) {                                                          \
        CT b = (CT)py[0];                                                       \
        for (int64_t i = 0; i < n; i++) {                                       \
          CT a = (CT)px[i];                                                     \
          o[i] = (OT)(EXPR);                                                    \
        }                                                                       \
      } else if (sy) {                                                          \
        CT a = (CT)px[0];                                                       \
        for (int64_t i = 0; i < n; i++) {                                       \
          CT b = (CT)py[i];                                                     \
          o[i] = (OT)(EXPR);                                                    \
        }                                                                       \
      } else {                                                                  \
        CT a = (CT)px[0], b = (CT)py[0];                                        \
        OT r = (OT)(EXPR);                                                      \
        for (int64_t i = 0; i < n; i++) o[i] = r;                               \
      }                                                                         \
      if (bc->rank <= 1 || !bcast_iter_next(&it)) break;                        \
      oo = it.out, ox = it.off[0], oy = it.off[1];                              \
    }                                                                           \
  }

/* [output dtype (f32, i64)][X dtype][Y dtype]; NULL where promotion cannot
 * lead (an i64 result never has an f32 operand). */
typedef BinaryLoop BinaryTable[2][3][3];

/* The loops of one binary op: FEXPR computes an f32 result, IEXPR an i64. */
#define BINARY_OP(NAME, FEXPR, IEXPR)                                           \
  BINARY_LOOP(NAME##_fff, f32, f32, f32, f32, FEXPR)                            \
  BINARY_LOOP(NAME##_ffi, f32, f32, i64, f32, FEXPR)                            \
  BINARY_LOOP(NAME##_ffb, f32, f32, bln, f32, FEXPR)                            \
  BINARY_LOOP(NAME##_fif, f32, i64, f32, f32, FEXPR)                            \
  BINARY_LOOP(NAME##_fbf, f32, bln, f32, f32, FEXPR)                            \
  BINARY_LOOP(NAME##_iii, i64, i64, i64, i64, IEXPR)                            \
  BINARY_LOOP(NAME##_iib, i64, i64, bln, i64, IEXPR)                            \
  BINARY_LOOP(NAME##_ibi, i64, bln, i64, i64, IEXPR)                            \
  BINARY_LOOP(NAME##_ibb, i64, bln, bln, i64, IEXPR)                            \
  static const BinaryTable NAME##_loops = {                                     \
      {{NAME##_fff, NAME##_ffi, NAME##_ffb}, {NAME##_fif, NULL, NULL},          \
       {NAME##_fbf, NULL, NULL}},                                               \
      {{NULL, NULL, NULL}, {NULL, NAME##_iii, NAME##_iib},                      \
       {NULL, NAME##_ibi, NAME##_ibb}}};

BINARY_OP(add, a + b, wrap_add(a, b))
BINARY_OP(sub, a - b, wrap_sub(a, b))
BINARY_OP(mul, a * b, wrap_mul(a, b))
BINARY_OP(div, a / b, int_div(a, b))
BINARY_OP(pow, powf(a, b), int_pow(a, b))
BINARY_OP(maximum, max_f32(a, b), a > b ? a : b)
BINARY_OP(minimum, min_f32(a, b), a < b ? a : b)

/* The broadcast of x and y over an output of n elements when it is one
 * flat run: each operand has n elements (then its elements line up with
 * the output's) or one (then it repeats).  This skips bcast_init for the
 * common cases; runtime inference has already checked that the shapes
 * broadcast. */
static bool flat_bcast(Bcast *bc, const Tensor *x, const Tensor *y, int64_t n) {
  if ((x->numel != n && x->numel != 1) || (y->numel != n && y->numel != 1)) return false;
  bc->rank = 1;
  bc->shape[0] = bc->inner = n;
  bc->inner_step[0] = x->numel == n;
  bc->inner_step[1] = y->numel == n;
  return true;
}

static int binary_run(ExecCtx *c, const BinaryTable loops) {
  Tensor *x = ctx_in(c, 0), *y = ctx_in(c, 1), *out = ctx_out(c, 0);
  if (out->numel == 0) return 0;
  Bcast bc;
  char a[128], b[128];
  if (!flat_bcast(&bc, x, y, out->numel) && !bcast_init(&bc, x, y))
    return ctx_fail(c, "shapes %s and %s do not broadcast", tensor_shape_str(x, a, sizeof a),
                    tensor_shape_str(y, b, sizeof b));
  int64_t n = 1;
  for (int i = 0; i < bc.rank; i++) n *= bc.shape[i];
  BinaryLoop f = out->dtype <= DT_I64 && x->dtype <= DT_BOOL && y->dtype <= DT_BOOL
                     ? loops[out->dtype][x->dtype][y->dtype]
                     : NULL;
  if (!f || n != out->numel)
    return ctx_fail(c, "internal error: no loop for %s %s and %s %s giving %s %s",
                    dtype_name(x->dtype), tensor_shape_str(x, a, sizeof a), dtype_name(y->dtype),
                    tensor_shape_str(y, b, sizeof b), dtype_name(out->dtype),
                    tensor_shape_str(out, a, sizeof a));
  f(&bc, out->data, x->data, y->data);
  return 0;
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

static int k_add(ExecCtx *c) { return binary_run(c, add_loops); }
static int k_sub(ExecCtx *c) { return binary_run(c, sub_loops); }
static int k_mul(ExecCtx *c) { return binary_run(c, mul_loops); }
static int k_maximum(ExecCtx *c) { return binary_run(c, maximum_loops); }
static int k_minimum(ExecCtx *c) { return binary_run(c, minimum_loops); }

/* Every Y element is some output's divisor once the output is not empty,
 * so checking Y itself finds every zero divisor. */
static int k_div(ExecCtx *c) {
  if (ctx_out(c, 0)->dtype == DT_I64 && ctx_out(c, 0)->numel && int_any_zero(ctx_in(c, 1)))
    return ctx_fail(c, "integer division by zero");
  return binary_run(c, div_loops);
}

static int k_pow(ExecCtx *c) {
  if (ctx_out(c, 0)->dtype == DT_I64 && ctx_out(c, 0)->numel && int_any_below(ctx_in(c, 1), 0))
    return ctx_fail(c, "an integer to a negative integer power; make the base a float (2.0 ** -1)");
  return binary_run(c, pow_loops);
}

/* ---- unary loops ---- */

/* An op's attributes (alpha, scale and bias, clip's bounds), read once per
 * call: as f32 for the f32 loops, as i64 for the i64 ones. */
typedef struct UnaryArgs {
  f32 f[2];
  i64 i[2];
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

SAME_UNARY(neg, -a, wrap_neg(a))
SAME_UNARY(abs, fabsf(a), a < 0 ? wrap_neg(a) : a)
SAME_UNARY(square, a * a, wrap_mul(a, a))
SAME_UNARY(relu, a > 0 || a != a ? a : 0.0f, a > 0 ? a : 0)
SAME_UNARY(clip, a < p->f[0] ? p->f[0] : a > p->f[1] ? p->f[1] : a,
           a < p->i[0] ? p->i[0] : a > p->i[1] ? p->i[1] : a)
FLOAT_UNARY(exp, expf(a))
FLOAT_UNARY(log, logf(a))
FLOAT_UNARY(sqrt, sqrtf(a))
FLOAT_UNARY(sin, sinf(a))
FLOAT_UNARY(cos, cosf(a))
FLOAT_UNARY(sigmoid, sigmoid_f32(a))
FLOAT_UNARY(tanh, tanhf(a))
FLOAT_UNARY(softplus, softplus_f32(a))
FLOAT_UNARY(gelu, gelu_f32(a))
FLOAT_UNARY(leaky_relu, a > 0 ? a : p->f[0] * a)
FLOAT_UNARY(scale, p->f[0] * a + p->f[1])

static int unary_run(ExecCtx *c, const UnaryTable loops, const UnaryArgs *p) {
  Tensor *x = ctx_in(c, 0), *out = ctx_out(c, 0);
  UnaryLoop f = out->dtype <= DT_BOOL && x->dtype <= DT_BOOL ? loops[out->dtype][x->dtype] : NULL;
  if (!f || x->numel != out->numel)
    return ctx_fail(c, "internal error: no loop for %s X giving %s", dtype_name(x->dtype),
                    dtype_name(out->dtype));
  f(x->numel, out->data, x->data, p);
  return 0;
}

#define UNARY_KERNEL(NAME)                                                      \
  static int k_##NAME(ExecCtx *c) { return unary_run(c, NAME##_loops, NULL); }
UNARY_KERNEL(neg)
UNARY_KERNEL(abs)
UNARY_KERNEL(square)
UNARY_KERNEL(relu)
UNARY_KERNEL(exp)
UNARY_KERNEL(log)
UNARY_KERNEL(sqrt)
UNARY_KERNEL(sin)
UNARY_KERNEL(cos)
UNARY_KERNEL(sigmoid)
UNARY_KERNEL(tanh)
UNARY_KERNEL(softplus)
UNARY_KERNEL(gelu)

static int k_leaky_relu(ExecCtx *c) {
  UnaryArgs p = {.f = {(f32)ctx_attr_f(c, "alpha")}};
  return unary_run(c, leaky_relu_loops, &p);
}

static int k_scale(ExecCtx *c) {
  UnaryArgs p = {.f = {(f32)ctx_attr_f(c, "scale"), (f32)ctx_attr_f(c, "bias")}};
  return unary_run(c, scale_loops, &p);
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
  double lo = ctx_attr_f(c, "min"), hi = ctx_attr_f(c, "max");
  UnaryArgs p = {.f = {(f32)lo, (f32)hi}, .i = {int_bound(lo, true), int_bound(hi, false)}};
  return unary_run(c, clip_loops, &p);
}

/* ---- gradients ------------------------------------------------------------------
 * Composite: each gradient is built from forward ops and summed back to its
 * input's shape where the forward op broadcast it. */

#define DOUT gop_out_grad(g, "Out", 0)
#define X0 gop_in(g, "X", 0)
#define Y0 gop_in(g, "Y", 0)
#define OUT0 gop_out(g, "Out", 0)

/* add: dX = dOut, dY = dOut. */
static int g_add(GradCtx *g) {
  const char *dx = gop_in_grad(g, "X", 0), *dy = gop_in_grad(g, "Y", 0);
  if (dx) grad_reduce_like(g, DOUT, OUT0, X0, dx);
  if (dy) grad_reduce_like(g, DOUT, OUT0, Y0, dy);
  return 0;
}

/* sub: dX = dOut (an assign), dY = scale(dOut, -1). */
static int g_sub(GradCtx *g) {
  const char *dx = gop_in_grad(g, "X", 0), *dy = gop_in_grad(g, "Y", 0);
  if (dx) grad_reduce_like(g, DOUT, OUT0, X0, dx);
  if (dy) {
    const char *t = gtemp(g);
    OpDesc *op = gemit(g, "scale");
    gemit_in(g, op, "X", DOUT);
    gemit_out(g, op, "Out", t);
    gemit_attr(g, op, "scale", attr_float(-1));
    grad_reduce_like(g, t, OUT0, Y0, dy);
  }
  return 0;
}

/* mul: dX = dOut * Y, dY = dOut * X. */
static int g_mul(GradCtx *g) {
  const char *dx = gop_in_grad(g, "X", 0), *dy = gop_in_grad(g, "Y", 0);
  if (dx) {
    const char *t = gtemp(g);
    gemit2(g, "mul", DOUT, Y0, t);
    grad_reduce_like(g, t, OUT0, X0, dx);
  }
  if (dy) {
    const char *t = gtemp(g);
    gemit2(g, "mul", DOUT, X0, t);
    grad_reduce_like(g, t, OUT0, Y0, dy);
  }
  return 0;
}

/* div: dX = dOut / Y, dY = -(dOut / Y) * Out. */
static int g_div(GradCtx *g) {
  const char *dx = gop_in_grad(g, "X", 0), *dy = gop_in_grad(g, "Y", 0);
  const char *q = gtemp(g);
  gemit2(g, "div", DOUT, Y0, q);
  if (dx) grad_reduce_like(g, q, OUT0, X0, dx);
  if (dy) {
    const char *t = gtemp(g), *u = gtemp(g);
    gemit2(g, "mul", q, OUT0, t);
    gemit1(g, "neg", t, u);
    grad_reduce_like(g, u, OUT0, Y0, dy);
  }
  return 0;
}

/* A unary op's gradient dX = dOut * f(...) built by `emit`. */
#define UNARY_GRAD(NAME, ...)                                                   \
  static int g_##NAME(GradCtx *g) {                                             \
    const char *dx = gop_in_grad(g, "X", 0);                                    \
    if (!dx) return 0;                                                          \
    __VA_ARGS__;                                                                \
    return 0;                                                                   \
  }

/* neg: dX = -dOut */
UNARY_GRAD(neg, gemit1(g, "neg", DOUT, dx))
/* exp: dX = dOut * Out */
UNARY_GRAD(exp, gemit2(g, "mul", DOUT, OUT0, dx))
/* log: dX = dOut / X */
UNARY_GRAD(log, gemit2(g, "div", DOUT, X0, dx))
/* sqrt: dX = dOut * 0.5 / Out */
UNARY_GRAD(sqrt, {
  const char *t = gtemp(g);
  OpDesc *op = gemit(g, "scale");
  gemit_in(g, op, "X", DOUT);
  gemit_out(g, op, "Out", t);
  gemit_attr(g, op, "scale", attr_float(0.5));
  gemit2(g, "div", t, OUT0, dx);
})
/* square: dX = dOut * 2X */
UNARY_GRAD(square, {
  const char *t = gtemp(g);
  OpDesc *op = gemit(g, "scale");
  gemit_in(g, op, "X", X0);
  gemit_out(g, op, "Out", t);
  gemit_attr(g, op, "scale", attr_float(2));
  gemit2(g, "mul", DOUT, t, dx);
})
/* sin: dX = dOut * cos X */
UNARY_GRAD(sin, {
  const char *t = gtemp(g);
  gemit1(g, "cos", X0, t);
  gemit2(g, "mul", DOUT, t, dx);
})
/* cos: dX = -dOut * sin X */
UNARY_GRAD(cos, {
  const char *t = gtemp(g), *u = gtemp(g);
  gemit1(g, "sin", X0, t);
  gemit2(g, "mul", DOUT, t, u);
  gemit1(g, "neg", u, dx);
})
/* scale: dX = scale(dOut, scale) */
UNARY_GRAD(scale, {
  OpDesc *op = gemit(g, "scale");
  gemit_in(g, op, "X", DOUT);
  gemit_out(g, op, "Out", dx);
  gemit_attr(g, op, "scale", *gop_attr(g, "scale"));
})

/* ---- the table ----------------------------------------------------------------- */

#define BINARY(NAME, DOC, GK)                                                   \
  {.type = #NAME, .doc = DOC, .kernel = k_##NAME, .grad = GRAD_FN_##GK(NAME),   \
   .in = {{"X", 0, "left operand"}, {"Y", 0, "right operand"}},                 \
   .out = {{"Out", 0, "the result, broadcast shape of X and Y"}},               \
   .infer = infer_binary, .grad_kind = GK}
/* Composite gradients are the g_ functions above; dedicated ones come with
 * their *_grad ops. */
#define GRAD_FN_GRAD_COMPOSITE(NAME) g_##NAME
#define GRAD_FN_GRAD_DEDICATED(NAME) NULL
#define UNARY(NAME, DOC, INFER, GK)                                             \
  {.type = #NAME, .doc = DOC, .kernel = k_##NAME, .grad = GRAD_FN_##GK(NAME),   \
   .in = {{"X", 0, "input"}},                                                   \
   .out = {{"Out", 0, "the result, shape of X"}}, .infer = INFER, .grad_kind = GK}

OpProto op_table_elementwise[] = {
    BINARY(add, "Out = X + Y, broadcasting", GRAD_COMPOSITE),
    BINARY(sub, "Out = X - Y, broadcasting", GRAD_COMPOSITE),
    BINARY(mul, "Out = X * Y, broadcasting", GRAD_COMPOSITE),
    BINARY(div, "Out = X / Y, broadcasting; integer division truncates toward 0, by 0 is an error",
           GRAD_COMPOSITE),
    BINARY(pow, "Out = X ** Y, broadcasting; an integer to a negative integer power is an error",
           GRAD_DEDICATED),
    BINARY(maximum, "Out = max(X, Y) elementwise", GRAD_DEDICATED),
    BINARY(minimum, "Out = min(X, Y) elementwise", GRAD_DEDICATED),
    UNARY(neg, "Out = -X", infer_same, GRAD_COMPOSITE),
    UNARY(abs, "Out = |X|", infer_same, GRAD_DEDICATED),
    UNARY(exp, "Out = e^X", infer_float, GRAD_COMPOSITE),
    UNARY(log, "Out = ln X (log 0 is -inf)", infer_float, GRAD_COMPOSITE),
    UNARY(sqrt, "Out = sqrt(X)", infer_float, GRAD_COMPOSITE),
    UNARY(square, "Out = X * X", infer_same, GRAD_COMPOSITE),
    UNARY(sin, "Out = sin X", infer_float, GRAD_COMPOSITE),
    UNARY(cos, "Out = cos X", infer_float, GRAD_COMPOSITE),
    UNARY(relu, "Out = max(X, 0)", infer_same, GRAD_DEDICATED),
    UNARY(sigmoid, "Out = 1 / (1 + e^-X)", infer_float, GRAD_DEDICATED),
    UNARY(tanh, "Out = tanh X", infer_float, GRAD_DEDICATED),
    UNARY(softplus, "Out = ln(1 + e^X), computed stably", infer_float, GRAD_DEDICATED),
    UNARY(gelu, "Out = X * Phi(X), the Gaussian error linear unit (erf form)", infer_float,
          GRAD_DEDICATED),
    {.type = "leaky_relu", .doc = "Out = X if X > 0 else alpha * X",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "the result, shape of X"}},
     .attrs = {{"alpha", ATTR_FLOAT, "0.01", check_nonnegative, "slope for X < 0"}},
     .infer = infer_float, .kernel = k_leaky_relu, .grad_kind = GRAD_DEDICATED},
    {.type = "scale", .doc = "Out = scale * X + bias",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "the result, shape of X"}},
     .attrs = {{"scale", ATTR_FLOAT, "1", NULL, "multiplier"},
               {"bias", ATTR_FLOAT, "0", NULL, "added after scaling"}},
     .infer = infer_float, .kernel = k_scale, .grad_kind = GRAD_COMPOSITE, .grad = g_scale},
    {.type = "clip", .doc = "Out = X limited to [min, max]",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "the result, shape of X"}},
     .attrs = {{"min", ATTR_FLOAT, NULL, NULL, "lower bound"},
               {"max", ATTR_FLOAT, NULL, NULL, "upper bound"}},
     .infer = infer_clip, .kernel = k_clip, .grad_kind = GRAD_DEDICATED},
    {0},
};
