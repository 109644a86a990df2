/* compare.c — comparisons, logical connectives, sign, and where, which
 * picks by a bool condition.
 *
 * Comparisons broadcast like NumPy and give bool; the logical ops take bool
 * only (the language's `and`, `or`, `not`).  None has a gradient but
 * where's, which goes to X where Cond holds and to Y elsewhere. */
#include "autodiff/backward.h"
#include "exec/exec.h"
#include "ops/bcast_loop.h"

#include <string.h>

/* An operand of a logical op must be bool. */
static bool need_bool(InferCtx *c, const char *slot, const VarDesc *v) {
  if (v->dtype != DT_BOOL)
    return reg_infer_fail(c, "%s must be bool, got %s", slot, dtype_name(v->dtype));
  return true;
}

static bool infer_compare(InferCtx *c) {
  const VarDesc *x = reg_infer_in(c, "X", 0), *y = reg_infer_in(c, "Y", 0);
  if (!x || !y) return reg_infer_fail(c, "needs both X and Y");
  Shape s;
  if (!reg_infer_broadcast(c, &x->shape, &y->shape, &s)) return false;
  reg_infer_set(c, "Out", 0, DT_BOOL, &s);
  return true;
}

static bool infer_logical(InferCtx *c) {
  const VarDesc *x = reg_infer_in(c, "X", 0), *y = reg_infer_in(c, "Y", 0);
  if (!x || !y) return reg_infer_fail(c, "needs both X and Y");
  if (!need_bool(c, "X", x) || !need_bool(c, "Y", y)) return false;
  return infer_compare(c);
}

static bool infer_not(InferCtx *c) {
  const VarDesc *x = reg_infer_in(c, "X", 0);
  if (!x) return reg_infer_fail(c, "input X is missing");
  if (!need_bool(c, "X", x)) return false;
  reg_infer_set(c, "Out", 0, DT_BOOL, &x->shape);
  return true;
}

static bool infer_sign(InferCtx *c) {
  const VarDesc *x = reg_infer_in(c, "X", 0);
  if (!x) return reg_infer_fail(c, "input X is missing");
  reg_infer_set(c, "Out", 0, x->dtype, &x->shape);
  return true;
}

/* where: Cond bool; Cond, X and Y broadcast together (a message naming
 * the three shapes when they do not); Out has X's dtype if Y has it too,
 * else the promoted one (PyTorch's). */
static bool infer_where(InferCtx *c) {
  const VarDesc *v[3] = {reg_infer_input(c, "Cond"), reg_infer_input(c, "X"), reg_infer_input(c, "Y")};
  if (!v[0] || !v[1] || !v[2] || !need_bool(c, "Cond", v[0])) return false;
  Shape s = shape_unknown();
  bool ranked = v[0]->shape.rank >= 0 && v[1]->shape.rank >= 0 && v[2]->shape.rank >= 0;
  if (ranked) s.rank = 0;
  for (int k = 0; k < 3 && ranked; k++)
    if (v[k]->shape.rank > s.rank) s.rank = v[k]->shape.rank;
  for (int i = 0; i < s.rank; i++) {
    s.d[i] = dim_n(1);
    for (int k = 0; k < 3; k++) {
      const Shape *vs = &v[k]->shape;
      int j = i - (s.rank - vs->rank);
      Dim d = j >= 0 ? vs->d[j] : dim_n(1);
      if (d.n == 1 || dim_eq(s.d[i], d)) continue;
      if (s.d[i].n == 1) {
        s.d[i] = d;
      } else if (dim_known(s.d[i]) && dim_known(d)) {
        char a[128], b[128], e[128];
        return reg_infer_fail(c, "Cond (shape %s), X (shape %s) and Y (shape %s) do not broadcast "
                              "(dimension %d: %lld vs %lld)", shape_str(&v[0]->shape, a, sizeof a),
                              shape_str(&v[1]->shape, b, sizeof b), shape_str(&v[2]->shape, e, sizeof e), i,
                              (long long)s.d[i].n, (long long)d.n);
      } else if (!dim_known(s.d[i])) {   /* a symbol meets a size: checked at run time */
        s.d[i] = dim_known(d) ? d : dim_unknown();
      }
    }
  }
  reg_infer_set(c, "Out", 0, v[1]->dtype == v[2]->dtype ? v[1]->dtype : reg_infer_promote(v[1]->dtype, v[2]->dtype), &s);
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
/* f64 with f64, i64 or bool (the executor makes an f32 operand f64),
 * compared as double. */
typedef BinaryLoop CompareTable64[4][4];

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
  COMPARE_LOOP(NAME##_dd, f64, f64, f64, EXPR)                                  \
  COMPARE_LOOP(NAME##_di, f64, i64, f64, EXPR)                                  \
  COMPARE_LOOP(NAME##_db, f64, bln, f64, EXPR)                                  \
  COMPARE_LOOP(NAME##_id, i64, f64, f64, EXPR)                                  \
  COMPARE_LOOP(NAME##_bd, bln, f64, f64, EXPR)                                  \
  static const CompareTable64 NAME##_loops64 = {                                \
      [DT_F64] = {[DT_F64] = NAME##_dd, [DT_I64] = NAME##_di, [DT_BOOL] = NAME##_db}, \
      [DT_I64] = {[DT_F64] = NAME##_id}, [DT_BOOL] = {[DT_F64] = NAME##_bd}};   \
  static int k_##NAME(ExecCtx *c) { return compare_run(c, NAME##_loops, NAME##_loops64); }

static int compare_run(ExecCtx *c, const CompareTable loops, const CompareTable64 loops64) {
  Tensor *x = exec_ctx_in(c, 0), *y = exec_ctx_in(c, 1), *out = exec_ctx_out(c, 0);
  BinaryLoop f =
      x->dtype <= DT_BOOL && y->dtype <= DT_BOOL && out->dtype == DT_BOOL ? loops[x->dtype][y->dtype] : NULL;
  if ((x->dtype == DT_F64 || y->dtype == DT_F64) && x->dtype <= DT_F64 && y->dtype <= DT_F64 &&
      out->dtype == DT_BOOL)
    f = loops64[x->dtype][y->dtype];
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
  Tensor *x = exec_ctx_in(c, 0), *out = exec_ctx_out(c, 0);
  const bln *v = tensor_bool(x);
  bln *restrict o = tensor_bool(out);
  for (int64_t i = 0; i < out->numel; i++) o[i] = v[i] == 0;
  return 0;
}

/* -1, 0 or 1 in X's dtype; NaN stays NaN and a bool is its own sign. */
static int k_sign(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0), *out = exec_ctx_out(c, 0);
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
  case DT_F64: {
    const f64 *v = tensor_f64(x);
    f64 *restrict o = tensor_f64(out);
    for (int64_t i = 0; i < n; i++) o[i] = v[i] > 0 ? 1.0 : v[i] < 0 ? -1.0 : v[i] == 0 ? 0.0 : v[i];
    break;
  }
  default:
    if (n) memcpy(out->data, x->data, (size_t)n);
    break;
  }
  return 0;
}

/* where: one loop per element size over a run of n elements, each operand
 * advancing by its step (1, or 0 where it is broadcast).  Both values are
 * loaded before the pick, so the usual runs (every operand advancing, or a
 * constant X or Y) are plain loops the compiler vectorizes into blends. */
typedef void (*WhereLoop)(int64_t n, void *out, const bln *cond, const void *x, const void *y, const int64_t *step);

#define WHERE_LOOP(NAME, T)                                                     \
  static void NAME(int64_t n, void *ov, const bln *cv, const void *xv,          \
                   const void *yv, const int64_t *st) {                         \
    T *restrict o = ov;                                                         \
    const T *x = xv, *y = yv;                                                   \
    if (st[0] && st[1] && st[2]) {                                              \
      for (int64_t i = 0; i < n; i++) {                                         \
        T a = x[i], b = y[i];                                                   \
        o[i] = cv[i] ? a : b;                                                   \
      }                                                                         \
    } else if (st[0] && st[1]) {                                                \
      T b = y[0];                                                               \
      for (int64_t i = 0; i < n; i++) {                                         \
        T a = x[i];                                                             \
        o[i] = cv[i] ? a : b;                                                   \
      }                                                                         \
    } else if (st[0] && st[2]) {                                                \
      T a = x[0];                                                               \
      for (int64_t i = 0; i < n; i++) {                                         \
        T b = y[i];                                                             \
        o[i] = cv[i] ? a : b;                                                   \
      }                                                                         \
    } else {                                                                    \
      for (int64_t i = 0; i < n; i++) {                                         \
        T a = x[i * st[1]], b = y[i * st[2]];                                   \
        o[i] = cv[i * st[0]] ? a : b;                                           \
      }                                                                         \
    }                                                                           \
  }
WHERE_LOOP(where_u32, uint32_t)
WHERE_LOOP(where_u64, uint64_t)
WHERE_LOOP(where_u8, uint8_t)

/* Out's element strides in t (of rank <= Out's, aligned at the end): 0
 * where t is broadcast. */
static void where_strides(const Tensor *t, const Tensor *out, int64_t *st) {
  int64_t s = 1;
  for (int i = out->rank - 1; i >= 0; i--) {
    int k = i - (out->rank - t->rank);
    int64_t d = k >= 0 ? t->shape[k] : 1;
    st[i] = d == 1 ? 0 : s;
    s *= d;
  }
}

/* Out row by row (its last dimension), the operands' offsets kept by an
 * odometer over the others; when every operand is whole or one element,
 * Out is one run, cut in slices over the threads. */
static int k_where(ExecCtx *c) {
  Tensor *out = exec_ctx_out(c, 0), *in[3];
  in[0] = tensor_ref(exec_ctx_in(c, 0));
  for (int k = 1; k < 3; k++) in[k] = tensor_cast(exec_ctx_in(c, k), out->dtype);   /* inference promoted */
  size_t es = dtype_size(out->dtype);
  WhereLoop f = es == 4 ? where_u32 : es == 8 ? where_u64 : where_u8;
  int64_t n = out->numel, st[3][SHAPE_MAX_RANK], step[3];
  bool flat = true;
  for (int k = 0; k < 3; k++) {
    flat &= in[k]->numel == n || in[k]->numel == 1;
    step[k] = in[k]->numel == n;
  }
  char *o = out->data;
  const char *x = in[1]->data, *y = in[2]->data;
  const bln *cv = in[0]->data;
  if (n > 0 && flat) {
    int64_t slices = (n + PAR_MIN_WORK - 1) / PAR_MIN_WORK;
    PAR_FOR(slices > 1)
    for (int64_t s = 0; s < slices; s++) {
      int64_t at = s * PAR_MIN_WORK, len = n - at < PAR_MIN_WORK ? n - at : PAR_MIN_WORK;
      f(len, o + (size_t)at * es, cv + at * step[0], x + (size_t)(at * step[1]) * es,
        y + (size_t)(at * step[2]) * es, step);
    }
  } else if (n > 0) {
    for (int k = 0; k < 3; k++) where_strides(in[k], out, st[k]);
    int r = out->rank;
    int64_t w = out->shape[r - 1], idx[SHAPE_MAX_RANK] = {0}, off[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) step[k] = st[k][r - 1];
    for (int64_t row = 0; row < n / w; row++) {
      f(w, o + (size_t)(row * w) * es, cv + off[0], x + (size_t)off[1] * es, y + (size_t)off[2] * es, step);
      for (int d = r - 2; d >= 0; d--) {
        for (int k = 0; k < 3; k++) off[k] += st[k][d];
        if (++idx[d] < out->shape[d]) break;
        for (int k = 0; k < 3; k++) off[k] -= st[k][d] * out->shape[d];
        idx[d] = 0;
      }
    }
  }
  for (int k = 0; k < 3; k++) tensor_unref(in[k]);
  return 0;
}

/* ---- gradients ------------------------------------------------------------------
 * where: dX = where(Cond, dOut, 0) and dY = where(Cond, 0, dOut), each
 * summed back to its input's shape; 0 is one f32 scalar, broadcast. */
static int g_where(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0), *dy = bwd_op_in_grad(g, "Y", 0);
  const char *dout = bwd_op_out_grad(g, "Out", 0), *out = bwd_op_out(g, "Out", 0);
  if (!dx && !dy) return 0;
  const char *zero = bwd_temp(g);
  OpDesc *z = bwd_emit(g, "fill_constant");
  bwd_emit_out(g, z, "Out", zero);
  bwd_emit_attr(g, z, "shape", attr_ints(bwd_prog(g), NULL, 0));
  bwd_emit_attr(g, z, "value", attr_float(0));
  bwd_emit_attr(g, z, "dtype", attr_dtype(DT_F32));
  for (int k = 0; k < 2; k++) {
    const char *d = k == 0 ? dx : dy, *v = bwd_op_in(g, k == 0 ? "X" : "Y", 0);
    if (!d) continue;
    const char *t = bwd_target(g, out, v, d);
    OpDesc *op = bwd_emit(g, "where");
    bwd_emit_in(g, op, "Cond", bwd_op_in(g, "Cond", 0));
    bwd_emit_in(g, op, "X", k == 0 ? dout : zero);
    bwd_emit_in(g, op, "Y", k == 0 ? zero : dout);
    bwd_emit_out(g, op, "Out", t);
    bwd_reduce_like(g, t, out, v, d);
  }
  return 0;
}

/* ---- the table ----------------------------------------------------------------- */

#define COMPARE(NAME, DOC, INFER, FLAGS)                                            \
  {.type = #NAME, .doc = DOC, .kernel = k_##NAME,                               \
   .in = {{"X", 0, "left operand"}, {"Y", 0, "right operand"}},                 \
   .out = {{"Out", 0, "bool, broadcast shape of X and Y"}},                     \
   .infer = INFER, .grad_kind = GRAD_NONE, .flags = FLAGS}

OpProto op_table_compare[] = {
    COMPARE(less_than, "Out = X < Y, broadcasting", infer_compare, OP_F64),
    COMPARE(less_equal, "Out = X <= Y, broadcasting", infer_compare, OP_F64),
    COMPARE(greater_than, "Out = X > Y, broadcasting", infer_compare, OP_F64),
    COMPARE(greater_equal, "Out = X >= Y, broadcasting", infer_compare, OP_F64),
    COMPARE(equal, "Out = X == Y, broadcasting", infer_compare, OP_F64),
    COMPARE(not_equal, "Out = X != Y, broadcasting", infer_compare, OP_F64),
    COMPARE(logical_and, "Out = X and Y, both bool, broadcasting", infer_logical, 0),
    COMPARE(logical_or, "Out = X or Y, both bool, broadcasting", infer_logical, 0),
    {.type = "logical_not", .doc = "Out = not X, X bool", .in = {{"X", 0, "a bool tensor"}},
     .out = {{"Out", 0, "bool, shape of X"}}, .infer = infer_not, .kernel = k_logical_not,
     .grad_kind = GRAD_NONE},
    {.type = "sign", .doc = "Out = -1, 0 or 1 by the sign of X", .in = {{"X", 0, "input"}},
     .out = {{"Out", 0, "dtype and shape of X"}}, .infer = infer_sign, .kernel = k_sign,
     .grad_kind = GRAD_NONE, .flags = OP_ZERO_GRAD | OP_F64},   /* its gradient is 0 wherever it exists */
    {.type = "where", .doc = "Out = X where Cond, else Y; the three broadcast",
     .in = {{"Cond", SLOT_NO_GRAD, "a bool tensor"}, {"X", 0, "the values where Cond holds"},
            {"Y", 0, "the values elsewhere"}},
     .out = {{"Out", 0, "the broadcast shape of Cond, X and Y"}}, .infer = infer_where,
     .kernel = k_where, .grad_kind = GRAD_COMPOSITE, .grad = g_where, .flags = OP_F64},
    {0},
};
