/* creation.c — ops that make tensors from attributes (zeros, full, arange,
 * random fills, constants written in the script) and the plumbing ops that
 * pass or combine whole tensors (assign, cast, add_n, stop_gradient, print).
 *
 * A `shape` attribute here is a list of known sizes: no -1, no symbols. */
#include "autodiff/backward.h"
#include "exec/exec.h"
#include "exec/par.h"
#include "exec/print.h"

#include <math.h>
#include <string.h>

_Static_assert(SHAPE_MAX_RANK == 8, "the messages below say 8");

/* A shape attribute: at most SHAPE_MAX_RANK sizes, none negative, with an
 * element count that fits in int64. */
static const char *check_shape(const AttrValue *v) {
  if (v->type != ATTR_INTS) return NULL;
  if (v->n > SHAPE_MAX_RANK) return "must have at most 8 dimensions";
  int64_t n = 1;
  for (int i = 0; i < v->n; i++) {
    if (v->u.ints[i] < 0) return "must not hold negative sizes";
    if (v->u.ints[i] && n > INT64_MAX / v->u.ints[i]) return "has too many elements (more than 2^63)";
    n *= v->u.ints[i];
  }
  return NULL;
}

static const char *check_nonzero(const AttrValue *v) {
  double x = v->type == ATTR_FLOAT ? v->u.f : (double)v->u.i;
  return x != 0 && !isnan(x) ? NULL : "must not be 0";
}

/* Reads a shape attribute (checked again: ops made by netrun itself do not
 * pass through the script's attribute checks). */
static bool shape_attr(InferCtx *c, const char *name, Shape *out) {
  *out = shape_unknown();
  const AttrValue *v = reg_infer_attr(c, name);
  if (!v || v->type != ATTR_INTS) return reg_infer_fail(c, "attribute '%s' must be an int list", name);
  const char *why = check_shape(v);
  if (why) return reg_infer_fail(c, "attribute '%s' %s", name, why);
  *out = shape_of(v->n, v->u.ints);
  return true;
}

static bool dtype_attr(InferCtx *c, const char *name, DType *out) {
  int64_t t = reg_infer_attr_i(c, name);
  *out = DT_F32;
  if (t != DT_F32 && t != DT_I64 && t != DT_BOOL && t != DT_F64)
    return reg_infer_fail(c, "attribute '%s' must be f32, f64, i64 or bool", name);
  *out = (DType)t;
  return true;
}

/* Two shapes that must be equal: false if they provably differ (ranks, two
 * sizes, or two symbols of different names).  A symbol or "?" against a
 * size is checked at run time. */
static bool shapes_agree(const Shape *a, const Shape *b) {
  if (a->rank < 0 || b->rank < 0) return true;
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++) {
    Dim x = a->d[i], y = b->d[i];
    if (x.n >= 0 && y.n >= 0 && x.n != y.n) return false;
    if (x.sym && y.sym && strcmp(x.sym, y.sym) != 0) return false;
  }
  return true;
}

/* Attributes without a default must be given (the script's call is checked
 * when it is lowered; this catches ops built by netrun itself). */
static bool required_given(InferCtx *c) {
  for (int i = 0; i < c->proto->nattrs; i++)
    if (!c->proto->has_dflt[i] && !op_attr(c->op, c->proto->attrs[i].name))
      return reg_infer_fail(c, "attribute '%s' is required", c->proto->attrs[i].name);
  return true;
}

/* ---- tensors from attributes ---------------------------------------------- */

/* The given attributes of an op that makes a tensor: its `shape` into s
 * and, if t, its `dtype`. */
static bool made_shape(InferCtx *c, Shape *s, DType *t) {
  if (!required_given(c) || !shape_attr(c, "shape", s)) return false;
  return !t || dtype_attr(c, "dtype", t);
}

/* zeros, ones, full, fill_constant: `shape` of `dtype`. */
static bool infer_fill(InferCtx *c) {
  Shape s;
  DType t;
  if (!made_shape(c, &s, &t)) return false;
  reg_infer_set(c, "Out", 0, t, &s);
  return true;
}

/* Out = [start, start + step, ...) below stop: ceil((stop - start) / step)
 * values (NumPy's count; none if that is negative). */
static bool infer_arange(InferCtx *c) {
  if (!required_given(c)) return false;
  double start = reg_infer_attr_f(c, "start"), stop = reg_infer_attr_f(c, "stop");
  double step = reg_infer_attr_f(c, "step");
  DType t;
  if (!dtype_attr(c, "dtype", &t)) return false;
  if (t == DT_BOOL) return reg_infer_fail(c, "dtype must be f32 or i64, got bool");
  if (!isfinite(start) || !isfinite(stop) || !isfinite(step))
    return reg_infer_fail(c, "start, stop and step must be finite");
  if (step == 0) return reg_infer_fail(c, "step must not be 0");
  double q = ceil((stop - start) / step);
  if (!(q < 9.0e18))   /* also catches inf and nan */
    return reg_infer_fail(c, "start=%g, stop=%g, step=%g gives too many values", start, stop, step);
  int64_t n = q > 0 ? (int64_t)q : 0;
  Shape s = shape_of(1, &n);
  reg_infer_set(c, "Out", 0, t, &s);
  return true;
}

/* A random op makes its output's declared dtype: f64 for an f64 parameter
 * (or under --dtype f64), else f32. */
static DType random_dtype(InferCtx *c) {
  Slot *s = op_output(c->op, "Out");
  const VarDesc *v = s && s->n ? prog_var(c->prog, s->args[0]) : NULL;
  return v && v->dtype == DT_F64 ? DT_F64 : DT_F32;
}

static bool infer_uniform(InferCtx *c) {
  Shape s;
  if (!made_shape(c, &s, NULL)) return false;
  double lo = reg_infer_attr_f(c, "min"), hi = reg_infer_attr_f(c, "max");
  if (!(lo <= hi)) return reg_infer_fail(c, "min (%g) is greater than max (%g)", lo, hi);
  reg_infer_set(c, "Out", 0, random_dtype(c), &s);
  return true;
}

static bool infer_gaussian(InferCtx *c) {
  Shape s;
  if (!made_shape(c, &s, NULL)) return false;
  if (!(reg_infer_attr_f(c, "std") >= 0))
    return reg_infer_fail(c, "std (%g) must not be negative", reg_infer_attr_f(c, "std"));
  reg_infer_set(c, "Out", 0, random_dtype(c), &s);
  return true;
}

/* assign_value: a constant tensor written in the script; `values` holds its
 * elements in row-major order. */
static bool infer_assign_value(InferCtx *c) {
  Shape s;
  DType t;
  if (!made_shape(c, &s, &t)) return false;
  const AttrValue *v = reg_infer_attr(c, "values");
  if (!v || (v->type != ATTR_FLOATS && v->type != ATTR_I64S))
    return reg_infer_fail(c, "attribute 'values' must be a float list");
  char buf[128];
  if (shape_numel(&s) != v->n)
    return reg_infer_fail(c, "values holds %d numbers but shape %s needs %lld", v->n,
                          shape_str(&s, buf, sizeof buf), (long long)shape_numel(&s));
  reg_infer_set(c, "Out", 0, t, &s);
  return true;
}

/* ---- plumbing -------------------------------------------------------------- */

/* assign, stop_gradient, fill_zeros_like, zeros_like, ones_like: X's dtype
 * and shape. */
static bool infer_like(InferCtx *c) { return reg_infer_same_as(c, "Out", "X"); }

static bool infer_cast(InferCtx *c) {
  if (!required_given(c)) return false;
  const VarDesc *x = reg_infer_input(c, "X");
  DType t;
  if (!x || !dtype_attr(c, "dtype", &t)) return false;
  reg_infer_set(c, "Out", 0, t, &x->shape);
  return true;
}

/* add_n: every input has one shape (symbols compared by name); the result
 * takes the most precise dimension seen and the promoted dtype. */
static bool infer_add_n(InferCtx *c) {
  int n = reg_infer_count(c, "X");
  if (n == 0) return reg_infer_fail(c, "X must hold at least one tensor");
  const VarDesc *x0 = reg_infer_input(c, "X");
  if (!x0) return false;
  DType t = x0->dtype == DT_BOOL ? DT_I64 : x0->dtype;
  Shape s = x0->shape;
  for (int i = 1; i < n; i++) {
    const VarDesc *v = reg_infer_in(c, "X", i);
    if (!v) return reg_infer_fail(c, "input X[%d] is missing", i);
    if (!shapes_agree(&s, &v->shape)) {
      int j = 0;   /* name an earlier input that disagrees */
      while (j < i - 1 && shapes_agree(&reg_infer_in(c, "X", j)->shape, &v->shape)) j++;
      char a[128], b[128];
      return reg_infer_fail(c, "X[%d] has shape %s but X[%d] has shape %s", i,
                            shape_str(&v->shape, a, sizeof a), j,
                            shape_str(&reg_infer_in(c, "X", j)->shape, b, sizeof b));
    }
    t = reg_infer_promote(t, v->dtype);
    if (s.rank < 0) {
      s = v->shape;
      continue;
    }
    for (int k = 0; k < s.rank && v->shape.rank >= 0; k++)
      if (s.d[k].n < 0 && (v->shape.d[k].n >= 0 || !s.d[k].sym)) s.d[k] = v->shape.d[k];
  }
  reg_infer_set(c, "Out", 0, t, &s);
  return true;
}

static bool infer_nothing(InferCtx *c) {
  (void)c;
  return true;
}

/* ---- kernels ------------------------------------------------------------------
 *
 * Outputs arrive allocated with the dtype and shape inference gave them, so
 * these kernels only fill them in.  Each loop is chosen once per call by
 * dtype; none branches on the dtype per element. */


static void fill_value(Tensor *t, double v) {
  int64_t n = t->numel;
  switch (t->dtype) {
  case DT_F32: {
    float *o = tensor_f32(t), x = (float)v;
    for (int64_t i = 0; i < n; i++) o[i] = x;
    break;
  }
  case DT_I64: {
    int64_t *o = tensor_i64(t), x = tensor_to_i64(v);
    for (int64_t i = 0; i < n; i++) o[i] = x;
    break;
  }
  case DT_F64:
    for (int64_t i = 0; i < n; i++) tensor_f64(t)[i] = v;
    break;
  default:
    if (n) memset(t->data, v != 0, (size_t)n);
    break;
  }
}

/* Out[i] = EXPR for i < n, EXPR reading the output `o` and the input `x`
 * (the tensors `out` and `in`) as OT and XT. */
#define CONVERT(OT, XT, EXPR)                                                   \
  do {                                                                          \
    OT *restrict o = (OT *)out->data;                                           \
    const XT *x = (const XT *)in->data;                                         \
    for (int64_t i = 0; i < n; i++) o[i] = (OT)(EXPR);                          \
  } while (0)

/* out = in converted to out's dtype (same numel): float to int truncates
 * toward zero and saturates (NaN gives 0), anything to bool is "!= 0". */
static void convert(Tensor *out, const Tensor *in) {
  int64_t n = out->numel;
  if (out->dtype == in->dtype) {
    if (n) memcpy(out->data, in->data, (size_t)n * dtype_size(in->dtype));
    return;
  }
  if (out->dtype == DT_F64 || in->dtype == DT_F64) {   /* through a double */
    for (int64_t i = 0; i < n; i++) tensor_set(out, i, tensor_get(in, i));
    return;
  }
  switch (out->dtype * 3 + in->dtype) {
  case DT_F32 * 3 + DT_I64: CONVERT(float, int64_t, x[i]); break;
  case DT_F32 * 3 + DT_BOOL: CONVERT(float, uint8_t, x[i]); break;
  case DT_I64 * 3 + DT_F32: CONVERT(int64_t, float, tensor_to_i64((double)x[i])); break;
  case DT_I64 * 3 + DT_BOOL: CONVERT(int64_t, uint8_t, x[i]); break;
  case DT_BOOL * 3 + DT_F32: CONVERT(uint8_t, float, x[i] != 0); break;
  case DT_BOOL * 3 + DT_I64: CONVERT(uint8_t, int64_t, x[i] != 0); break;
  default: break;
  }
}

static int k_zeros(ExecCtx *c) {
  Tensor *out = exec_ctx_out(c, 0);
  /* 0.0f, 0 and false are all zero bytes */
  if (out->numel) memset(out->data, 0, (size_t)out->numel * dtype_size(out->dtype));
  return 0;
}

static int k_ones(ExecCtx *c) {
  fill_value(exec_ctx_out(c, 0), 1);
  return 0;
}

/* An i64 fill reads `value` as an integer: exact when it is an ATTR_I64. */
static int k_full(ExecCtx *c) {
  Tensor *out = exec_ctx_out(c, 0);
  if (out->dtype != DT_I64) {
    fill_value(out, exec_ctx_attr_f(c, "value"));
    return 0;
  }
  int64_t *o = tensor_i64(out), x = exec_ctx_attr_i(c, "value");
  for (int64_t i = 0; i < out->numel; i++) o[i] = x;
  return 0;
}

/* Value i is start + i * step, computed in double then converted. */
static int k_arange(ExecCtx *c) {
  Tensor *out = exec_ctx_out(c, 0);
  double start = exec_ctx_attr_f(c, "start"), step = exec_ctx_attr_f(c, "step");
  int64_t n = out->numel;
  if (out->dtype == DT_F32) {
    float *o = tensor_f32(out);
    for (int64_t i = 0; i < n; i++) o[i] = (float)(start + (double)i * step);
  } else if (out->dtype == DT_F64) {
    for (int64_t i = 0; i < n; i++) tensor_f64(out)[i] = start + (double)i * step;
  } else {
    int64_t *o = tensor_i64(out);
    for (int64_t i = 0; i < n; i++) o[i] = tensor_to_i64(start + (double)i * step);
  }
  return 0;
}

/* The generator a random op draws from: the run's, or (seed != 0) one of its
 * own seeded afresh at every call, so the op gives the same values each
 * time it runs. */
static Rng *op_rng(ExecCtx *c, Rng *own) {
  int64_t seed = exec_ctx_attr_i(c, "seed");
  if (seed == 0) return exec_ctx_rng(c);
  rng_seed(own, (uint64_t)seed);
  return own;
}

/* Uniform in [min, max): a draw that rounds up to max in f32 is moved just
 * below it. */
static int k_uniform_random(ExecCtx *c) {
  Tensor *out = exec_ctx_out(c, 0);
  Rng own, *r = op_rng(c, &own);
  double lo = exec_ctx_attr_f(c, "min"), span = exec_ctx_attr_f(c, "max") - lo;
  float hi = (float)exec_ctx_attr_f(c, "max"), below = nextafterf(hi, -INFINITY);
  if (out->dtype == DT_F64) {
    /* the f32 draws, widened: --dtype f64 starts from the f32 run's values */
    for (int64_t i = 0; i < out->numel; i++) {
      float v = (float)(lo + span * rng_uniform(r));
      tensor_f64(out)[i] = v >= hi && span > 0 ? below : v;
    }
    return 0;
  }
  float *o = tensor_f32(out);
  for (int64_t i = 0; i < out->numel; i++) {
    float v = (float)(lo + span * rng_uniform(r));
    o[i] = v >= hi && span > 0 ? below : v;
  }
  return 0;
}

static int k_gaussian_random(ExecCtx *c) {
  Tensor *out = exec_ctx_out(c, 0);
  Rng own, *r = op_rng(c, &own);
  double mean = exec_ctx_attr_f(c, "mean"), std = exec_ctx_attr_f(c, "std");
  if (out->dtype == DT_F64) {
    for (int64_t i = 0; i < out->numel; i++) tensor_f64(out)[i] = (float)(mean + std * rng_normal(r));   /* as uniform */
    return 0;
  }
  float *o = tensor_f32(out);
  for (int64_t i = 0; i < out->numel; i++) o[i] = (float)(mean + std * rng_normal(r));
  return 0;
}

static int k_assign_value(ExecCtx *c) {
  Tensor *out = exec_ctx_out(c, 0);
  const AttrValue *v = exec_ctx_attr(c, "values");
  if (!v || (v->type != ATTR_FLOATS && v->type != ATTR_I64S) || v->n != out->numel)
    return exec_ctx_fail(c, "internal error: values do not fit the shape");
  int64_t n = out->numel;
  if (v->type == ATTR_I64S) {   /* exact integers (past 2^53) */
    Tensor in = {.dtype = DT_I64, .numel = n, .data = v->u.ints};
    convert(out, &in);
    return 0;
  }
  const double *x = v->u.floats;
  switch (out->dtype) {
  case DT_F32: for (int64_t i = 0; i < n; i++) tensor_f32(out)[i] = (float)x[i]; break;
  case DT_I64: for (int64_t i = 0; i < n; i++) tensor_i64(out)[i] = tensor_to_i64(x[i]); break;
  case DT_F64: for (int64_t i = 0; i < n; i++) tensor_f64(out)[i] = x[i]; break;
  default: for (int64_t i = 0; i < n; i++) tensor_bool(out)[i] = x[i] != 0; break;
  }
  return 0;
}

static int k_fill_zeros_like(ExecCtx *c) { return k_zeros(c); }
static int k_ones_like(ExecCtx *c) { return k_ones(c); }

/* assign, stop_gradient and cast copy into their own output: sharing X's
 * storage would let a later in-place update of X (an optimizer step on a
 * parameter) change a value already computed. */
static int k_assign(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0), *out = exec_ctx_out(c, 0);
  if (x->numel != out->numel) return exec_ctx_fail(c, "internal error: X and Out differ in size");
  convert(out, x);
  return 0;
}

/* share: Out = X, the same storage.  A rewrite puts it in place of an
 * assign when nothing writes X or Out in place (rewrite.c). */
static int k_share(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0);
  exec_ctx_set_out(c, 0, 0, tensor_view(x, x->rank, x->shape));
  return 0;
}

/* add_n of float32 tensors in one pass, in slices of PAR_MIN_WORK
 * elements over the threads (par_parts): each element summed in the
 * inputs' order, the bits of the pass-per-input loop below. */
typedef struct AddN {
  float *out;
  const float *const *x;
  int k;
  int64_t n;
} AddN;

static void add_n_slice(void *arg, int64_t p) {
  const AddN *a = arg;
  int64_t at = p * PAR_MIN_WORK, len = a->n - at < PAR_MIN_WORK ? a->n - at : PAR_MIN_WORK;
  float *restrict o = a->out + at;
  const float *restrict x0 = a->x[0] + at, *restrict x1 = a->x[1] + at;
  for (int64_t i = 0; i < len; i++) o[i] = x0[i] + x1[i];
  for (int j = 2; j < a->k; j++) {
    const float *restrict xj = a->x[j] + at;
    for (int64_t i = 0; i < len; i++) o[i] += xj[i];
  }
}

static bool add_n_f32(ExecCtx *c, Tensor *out) {
  int k = exec_ctx_in_count(c, 0);
  if (out->dtype != DT_F32 || k < 2 || k > 64) return false;
  const float *x[64];
  for (int j = 0; j < k; j++) {
    Tensor *in = exec_ctx_in_at(c, 0, j);
    if (in->dtype != DT_F32 || in->numel != out->numel) return false;
    x[j] = tensor_f32(in);
  }
  AddN a = {tensor_f32(out), x, k, out->numel};
  int64_t parts = (a.n + PAR_MIN_WORK - 1) / PAR_MIN_WORK;
  if (parts > 1) par_parts(parts, add_n_slice, &a);
  else if (parts == 1) add_n_slice(&a, 0);
  return true;
}

/* Out = X[0] + X[1] + ..., each read converted to Out's dtype. */
static int k_add_n(ExecCtx *c) {
  Tensor *out = exec_ctx_out(c, 0);
  int64_t n = out->numel;
  if (add_n_f32(c, out)) return 0;
  for (int k = 0; k < exec_ctx_in_count(c, 0); k++) {
    Tensor *in = exec_ctx_in_at(c, 0, k);
    if (in->numel != n) {
      char a[128], b[128];
      return exec_ctx_fail(c, "X[%d] has shape %s but Out has shape %s", k,
                           tensor_shape_str(in, a, sizeof a), tensor_shape_str(out, b, sizeof b));
    }
    if (k == 0) {
      convert(out, in);
      continue;
    }
    if (out->dtype == DT_F64) {
      for (int64_t i = 0; i < n; i++) tensor_f64(out)[i] += tensor_get(in, i);
      continue;
    }
    switch (out->dtype * 3 + in->dtype) {
    case DT_F32 * 3 + DT_F32: CONVERT(float, float, o[i] + x[i]); break;
    case DT_F32 * 3 + DT_I64: CONVERT(float, int64_t, o[i] + (float)x[i]); break;
    case DT_F32 * 3 + DT_BOOL: CONVERT(float, uint8_t, o[i] + (float)x[i]); break;
    case DT_I64 * 3 + DT_I64: CONVERT(int64_t, int64_t, (uint64_t)o[i] + (uint64_t)x[i]); break;
    case DT_I64 * 3 + DT_BOOL: CONVERT(int64_t, uint8_t, (uint64_t)o[i] + x[i]); break;
    default: return exec_ctx_fail(c, "internal error: cannot add %s into %s", dtype_name(in->dtype),
                                  dtype_name(out->dtype));
    }
  }
  return 0;
}

/* Like Python's print(a, b): the values separated by spaces, then a
 * newline; a non-empty message comes first. */
static int k_print(ExecCtx *c) {
  FILE *f = exec_ctx_stream(c);
  const AttrValue *m = exec_ctx_attr(c, "message");
  bool sep = false;
  if (m && m->type == ATTR_STRING && m->u.s && m->u.s[0]) {
    fputs(m->u.s, f);
    sep = true;
  }
  for (int k = 0; k < exec_ctx_in_count(c, 0); k++) {
    if (sep) fputc(' ', f);
    print_write(f, exec_ctx_in_at(c, 0, k), exec_ctx_precision(c));
    sep = true;
  }
  fputc('\n', f);
  return 0;
}

/* ---- gradients ------------------------------------------------------------------
 * Composite.  stop_gradient, fill_zeros_like, zeros_like and ones_like
 * have none by definition (OP_ZERO_GRAD): the builder stops there without
 * an error. */

/* assign: dX = assign(dOut). */
static bool g_assign(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0);
  if (dx) bwd_emit1(g, "assign", bwd_op_out_grad(g, "Out", 0), dx);
  return true;
}

/* cast: dX = dOut cast back to X's dtype.  Only f32 values have gradients,
 * so this runs only for an f32 X cast to f32. */
static bool g_cast(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0);
  if (!dx) return true;
  const VarDesc *x = prog_var(bwd_prog(g), bwd_op_in(g, "X", 0));
  bwd_emit_attr(g, bwd_emit1(g, "cast", bwd_op_out_grad(g, "Out", 0), dx), "dtype", attr_dtype(x ? x->dtype : DT_F32));
  return true;
}

/* add_n: dX[i] = dOut for every input that needs one (an input listed
 * twice gets two writes, which the builder sums). */
static bool g_add_n(GradCtx *g) {
  for (int i = 0; i < bwd_op_nin(g, "X"); i++) {
    const char *dx = bwd_op_in_grad(g, "X", i);
    if (dx) bwd_emit1(g, "assign", bwd_op_out_grad(g, "Out", 0), dx);
  }
  return true;
}

/* ---- the table --------------------------------------------------------------- */

#define SHAPE_ATTR {"shape", ATTR_INTS, NULL, check_shape, "the result's shape"}
#define DTYPE_ATTR(DFLT) {"dtype", ATTR_DTYPE, DFLT, NULL, "the result's dtype"}
#define SEED_ATTR                                                               \
  {"seed", ATTR_INT, "0", reg_check_nonnegative,                                    \
   "0: draw from the run's generator (--seed); else this op's own seed"}
#define OUT_NEW {{"Out", 0, "the new tensor"}}
#define LIKE(NAME, KERNEL, DOC, GK, GRAD, FLAGS)                                \
  {.type = NAME, .doc = DOC, .kernel = KERNEL, .in = {{"X", 0, "input"}},       \
   .out = {{"Out", 0, "the result, dtype and shape of X"}}, .infer = infer_like, \
   .grad_kind = GK, .grad = GRAD, .flags = (FLAGS) | OP_F64}

OpProto op_table_creation[] = {
    {.type = "zeros", .doc = "Out = a tensor of zeros", .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, DTYPE_ATTR("f32")}, .infer = infer_fill, .kernel = k_zeros,
     .grad_kind = GRAD_NONE, .flags = OP_F64},
    {.type = "ones", .doc = "Out = a tensor of ones", .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, DTYPE_ATTR("f32")}, .infer = infer_fill, .kernel = k_ones,
     .grad_kind = GRAD_NONE, .flags = OP_F64},
    {.type = "full", .doc = "Out = a tensor filled with value", .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, {"value", ATTR_FLOAT, NULL, NULL, "the value of every element"},
               DTYPE_ATTR("f32")},
     .infer = infer_fill, .kernel = k_full, .grad_kind = GRAD_NONE, .flags = OP_CONSTANT | OP_F64},
    {.type = "fill_constant", .doc = "Out = a tensor filled with value (seeds loss@GRAD)",
     .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, {"value", ATTR_FLOAT, NULL, NULL, "the value of every element"},
               DTYPE_ATTR("f32")},
     .infer = infer_fill, .kernel = k_full, .grad_kind = GRAD_NONE, .flags = OP_CONSTANT | OP_F64},
    {.type = "arange", .doc = "Out = start, start + step, ... up to (not including) stop",
     .out = {{"Out", 0, "the 1-D result, ceil((stop - start) / step) values"}},
     .attrs = {{"start", ATTR_FLOAT, "0", NULL, "the first value"},
               {"stop", ATTR_FLOAT, NULL, NULL, "the end (excluded)"},
               {"step", ATTR_FLOAT, "1", check_nonzero, "the spacing; must not be 0"},
               DTYPE_ATTR("i64")},
     .infer = infer_arange, .kernel = k_arange, .grad_kind = GRAD_NONE, .flags = OP_F64},
    {.type = "uniform_random", .doc = "Out = f32 values drawn uniformly from [min, max)",
     .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, {"min", ATTR_FLOAT, "-1", NULL, "lower bound"},
               {"max", ATTR_FLOAT, "1", NULL, "upper bound"}, SEED_ATTR},
     .infer = infer_uniform, .kernel = k_uniform_random, .grad_kind = GRAD_NONE,
     .flags = OP_RANDOM | OP_F64},
    {.type = "gaussian_random", .doc = "Out = f32 values drawn from a normal distribution",
     .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, {"mean", ATTR_FLOAT, "0", NULL, "the mean"},
               {"std", ATTR_FLOAT, "1", reg_check_nonnegative, "the standard deviation"},
               SEED_ATTR},
     .infer = infer_gaussian, .kernel = k_gaussian_random, .grad_kind = GRAD_NONE,
     .flags = OP_RANDOM | OP_F64},
    {.type = "assign_value", .doc = "a constant tensor written in the script", .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, DTYPE_ATTR("f32"),
               {"values", ATTR_FLOATS, NULL, NULL, "the elements, row-major"}},
     .infer = infer_assign_value, .kernel = k_assign_value, .grad_kind = GRAD_NONE, .flags = OP_CONSTANT | OP_F64},
    LIKE("fill_zeros_like", k_fill_zeros_like, "Out = zeros of X's dtype and shape", GRAD_NONE,
         NULL, OP_ZERO_GRAD),
    LIKE("zeros_like", k_fill_zeros_like, "Out = zeros of X's dtype and shape (PyTorch's name)",
         GRAD_NONE, NULL, OP_ZERO_GRAD),
    LIKE("ones_like", k_ones_like, "Out = ones of X's dtype and shape", GRAD_NONE, NULL,
         OP_ZERO_GRAD),
    LIKE("assign", k_assign, "Out = X (a copy)", GRAD_COMPOSITE, g_assign, 0),
    LIKE("stop_gradient", k_assign, "Out = X; no gradient flows back through it", GRAD_NONE,
         NULL, OP_ZERO_GRAD),
    LIKE("share", k_share, "Out = X, sharing its storage: made by the executor from an assign",
         GRAD_NONE, NULL, OP_INTERNAL | OP_NO_PREALLOC),
    {.type = "cast", .doc = "Out = X converted to dtype (f32 to i64 truncates toward 0)",
     .in = {{"X", 0, "input"}},
     .out = {{"Out", 0, "the result, shape of X"}},
     .attrs = {{"dtype", ATTR_DTYPE, NULL, NULL, "the result's dtype"}},
     .infer = infer_cast, .kernel = k_assign, .grad_kind = GRAD_COMPOSITE, .grad = g_cast, .flags = OP_F64},
    {.type = "add_n", .doc = "Out = the sum of the tensors in X, all of one shape",
     .in = {{"X", SLOT_LIST, "the tensors to add"}},
     .out = {{"Out", 0, "the sum, shape of each X"}}, .infer = infer_add_n, .kernel = k_add_n,
     .grad_kind = GRAD_COMPOSITE, .grad = g_add_n, .flags = OP_F64},
    {.type = "print", .doc = "prints its inputs", .in = {{"X", SLOT_LIST, "the values to print"}},
     .attrs = {{"message", ATTR_STRING, "\"\"", NULL, "printed before the values"}},
     .infer = infer_nothing, .kernel = k_print, .grad_kind = GRAD_NONE, .flags = OP_SIDE_EFFECT | OP_F64},
    {0},
};
