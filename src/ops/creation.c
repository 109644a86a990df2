/* creation.c — ops that make tensors from attributes (zeros, full, arange,
 * random fills, constants written in the script) and the plumbing ops that
 * pass or combine whole tensors (assign, cast, add_n, stop_gradient, print).
 *
 * A `shape` attribute here is a list of known sizes: no -1, no symbols. */
#include "../registry.h"

#include <math.h>
#include <string.h>

_Static_assert(SHAPE_MAX_RANK == 8, "the messages below say 8");

/* The first variable of input slot `slot`, or an error if the op has none. */
static const VarDesc *input(InferCtx *c, const char *slot) {
  const VarDesc *v = infer_in(c, slot, 0);
  if (!v) infer_fail(c, "input %s is missing", slot);
  return v;
}

/* A shape attribute: at most SHAPE_MAX_RANK sizes, none negative, with an
 * element count that fits in int64. */
static const char *check_shape(const AttrValue *v) {
  if (v->type != ATTR_INTS) return NULL;
  if (v->n > SHAPE_MAX_RANK) return "must have at most 8 dimensions";
  int64_t n = 1;
  for (int i = 0; i < v->n; i++) {
    if (v->u.ints[i] < 0) return "must not hold negative sizes";
    if (v->u.ints[i] && n > INT64_MAX / v->u.ints[i]) return "has too many elements";
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
  const AttrValue *v = infer_attr(c, name);
  if (!v || v->type != ATTR_INTS) return infer_fail(c, "attribute '%s' must be an int list", name);
  const char *why = check_shape(v);
  if (why) return infer_fail(c, "attribute '%s' %s", name, why);
  *out = shape_of(v->n, v->u.ints);
  return true;
}

static bool dtype_attr(InferCtx *c, const char *name, DType *out) {
  int64_t t = infer_attr_i(c, name);
  *out = DT_F32;
  if (t != DT_F32 && t != DT_I64 && t != DT_BOOL)
    return infer_fail(c, "attribute '%s' must be f32, i64 or bool", name);
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
      return infer_fail(c, "attribute '%s' is required", c->proto->attrs[i].name);
  return true;
}

/* ---- tensors from attributes ---------------------------------------------- */

/* zeros, ones, full, fill_constant: `shape` of `dtype`. */
static bool infer_fill(InferCtx *c) {
  if (!required_given(c)) return false;
  Shape s;
  DType t;
  if (!shape_attr(c, "shape", &s) || !dtype_attr(c, "dtype", &t)) return false;
  infer_set(c, "Out", 0, t, &s);
  return true;
}

/* Out = [start, start + step, ...) below stop: ceil((stop - start) / step)
 * values (NumPy's count; none if that is negative). */
static bool infer_arange(InferCtx *c) {
  if (!required_given(c)) return false;
  double start = infer_attr_f(c, "start"), stop = infer_attr_f(c, "stop");
  double step = infer_attr_f(c, "step");
  DType t;
  if (!dtype_attr(c, "dtype", &t)) return false;
  if (t == DT_BOOL) return infer_fail(c, "dtype must be f32 or i64, got bool");
  if (!isfinite(start) || !isfinite(stop) || !isfinite(step))
    return infer_fail(c, "start, stop and step must be finite");
  if (step == 0) return infer_fail(c, "step must not be 0");
  double q = ceil((stop - start) / step);
  if (!(q < 9.0e18))   /* also catches inf and nan */
    return infer_fail(c, "start=%g, stop=%g, step=%g gives too many values", start, stop, step);
  int64_t n = q > 0 ? (int64_t)q : 0;
  Shape s = shape_of(1, &n);
  infer_set(c, "Out", 0, t, &s);
  return true;
}

static bool infer_uniform(InferCtx *c) {
  if (!required_given(c)) return false;
  Shape s;
  if (!shape_attr(c, "shape", &s)) return false;
  if (!(infer_attr_f(c, "min") <= infer_attr_f(c, "max")))
    return infer_fail(c, "min (%g) is greater than max (%g)", infer_attr_f(c, "min"),
                      infer_attr_f(c, "max"));
  infer_set(c, "Out", 0, DT_F32, &s);
  return true;
}

static bool infer_gaussian(InferCtx *c) {
  if (!required_given(c)) return false;
  Shape s;
  if (!shape_attr(c, "shape", &s)) return false;
  if (!(infer_attr_f(c, "std") >= 0))
    return infer_fail(c, "std (%g) must not be negative", infer_attr_f(c, "std"));
  infer_set(c, "Out", 0, DT_F32, &s);
  return true;
}

/* assign_value: a constant tensor written in the script; `values` holds its
 * elements in row-major order. */
static bool infer_assign_value(InferCtx *c) {
  if (!required_given(c)) return false;
  Shape s;
  DType t;
  if (!shape_attr(c, "shape", &s) || !dtype_attr(c, "dtype", &t)) return false;
  const AttrValue *v = infer_attr(c, "values");
  if (!v || v->type != ATTR_FLOATS) return infer_fail(c, "attribute 'values' must be a float list");
  char buf[128];
  if (shape_numel(&s) != v->n)
    return infer_fail(c, "values holds %d numbers but shape %s needs %lld", v->n,
                      shape_str(&s, buf, sizeof buf), (long long)shape_numel(&s));
  infer_set(c, "Out", 0, t, &s);
  return true;
}

/* ---- plumbing -------------------------------------------------------------- */

/* assign, stop_gradient, fill_zeros_like, ones_like: X's dtype and shape. */
static bool infer_like(InferCtx *c) {
  const VarDesc *x = input(c, "X");
  if (!x) return false;
  infer_set(c, "Out", 0, x->dtype, &x->shape);
  return true;
}

static bool infer_cast(InferCtx *c) {
  if (!required_given(c)) return false;
  const VarDesc *x = input(c, "X");
  DType t;
  if (!x || !dtype_attr(c, "dtype", &t)) return false;
  infer_set(c, "Out", 0, t, &x->shape);
  return true;
}

/* add_n: every input has one shape (symbols compared by name); the result
 * takes the most precise dimension seen and the promoted dtype. */
static bool infer_add_n(InferCtx *c) {
  int n = infer_count(c, "X");
  if (n == 0) return infer_fail(c, "X must hold at least one tensor");
  const VarDesc *x0 = input(c, "X");
  if (!x0) return false;
  DType t = x0->dtype == DT_BOOL ? DT_I64 : x0->dtype;
  Shape s = x0->shape;
  for (int i = 1; i < n; i++) {
    const VarDesc *v = infer_in(c, "X", i);
    if (!v) return infer_fail(c, "input X[%d] is missing", i);
    if (!shapes_agree(&s, &v->shape)) {
      int j = 0;   /* name an earlier input that disagrees */
      while (j < i - 1 && shapes_agree(&infer_in(c, "X", j)->shape, &v->shape)) j++;
      char a[128], b[128];
      return infer_fail(c, "X[%d] has shape %s but X[%d] has shape %s", i,
                        shape_str(&v->shape, a, sizeof a), j,
                        shape_str(&infer_in(c, "X", j)->shape, b, sizeof b));
    }
    t = infer_promote(t, v->dtype);
    if (s.rank < 0) {
      s = v->shape;
      continue;
    }
    for (int k = 0; k < s.rank && v->shape.rank >= 0; k++)
      if (s.d[k].n < 0 && (v->shape.d[k].n >= 0 || !s.d[k].sym)) s.d[k] = v->shape.d[k];
  }
  infer_set(c, "Out", 0, t, &s);
  return true;
}

static bool infer_nothing(InferCtx *c) {
  (void)c;
  return true;
}

/* ---- the table --------------------------------------------------------------- */

#define SHAPE_ATTR {"shape", ATTR_INTS, NULL, check_shape, "the result's shape"}
#define DTYPE_ATTR(DFLT) {"dtype", ATTR_DTYPE, DFLT, NULL, "the result's dtype"}
#define SEED_ATTR                                                               \
  {"seed", ATTR_INT, "0", check_nonnegative,                                    \
   "0: draw from the run's generator (--seed); else this op's own seed"}
#define OUT_NEW {{"Out", 0, "the new tensor"}}
#define LIKE(NAME, DOC, GK)                                                     \
  {.type = NAME, .doc = DOC, .in = {{"X", 0, "input"}},                         \
   .out = {{"Out", 0, "the result, dtype and shape of X"}}, .infer = infer_like, \
   .grad_kind = GK}

OpProto op_table_creation[] = {
    {.type = "zeros", .doc = "Out = a tensor of zeros", .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, DTYPE_ATTR("f32")}, .infer = infer_fill, .grad_kind = GRAD_NONE},
    {.type = "ones", .doc = "Out = a tensor of ones", .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, DTYPE_ATTR("f32")}, .infer = infer_fill, .grad_kind = GRAD_NONE},
    {.type = "full", .doc = "Out = a tensor filled with value", .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, {"value", ATTR_FLOAT, NULL, NULL, "the value of every element"},
               DTYPE_ATTR("f32")},
     .infer = infer_fill, .grad_kind = GRAD_NONE},
    {.type = "fill_constant", .doc = "Out = a tensor filled with value (seeds loss@GRAD)",
     .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, {"value", ATTR_FLOAT, NULL, NULL, "the value of every element"},
               DTYPE_ATTR("f32")},
     .infer = infer_fill, .grad_kind = GRAD_NONE},
    {.type = "arange", .doc = "Out = start, start + step, ... up to (not including) stop",
     .out = {{"Out", 0, "the 1-D result, ceil((stop - start) / step) values"}},
     .attrs = {{"start", ATTR_FLOAT, "0", NULL, "the first value"},
               {"stop", ATTR_FLOAT, NULL, NULL, "the end (excluded)"},
               {"step", ATTR_FLOAT, "1", check_nonzero, "the spacing; must not be 0"},
               DTYPE_ATTR("i64")},
     .infer = infer_arange, .grad_kind = GRAD_NONE},
    {.type = "uniform_random", .doc = "Out = f32 values drawn uniformly from [min, max)",
     .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, {"min", ATTR_FLOAT, "-1", NULL, "lower bound"},
               {"max", ATTR_FLOAT, "1", NULL, "upper bound"}, SEED_ATTR},
     .infer = infer_uniform, .grad_kind = GRAD_NONE, .flags = OP_RANDOM},
    {.type = "gaussian_random", .doc = "Out = f32 values drawn from a normal distribution",
     .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, {"mean", ATTR_FLOAT, "0", NULL, "the mean"},
               {"std", ATTR_FLOAT, "1", check_nonnegative, "the standard deviation"},
               SEED_ATTR},
     .infer = infer_gaussian, .grad_kind = GRAD_NONE, .flags = OP_RANDOM},
    {.type = "assign_value", .doc = "a constant tensor written in the script", .out = OUT_NEW,
     .attrs = {SHAPE_ATTR, DTYPE_ATTR("f32"),
               {"values", ATTR_FLOATS, NULL, NULL, "the elements, row-major"}},
     .infer = infer_assign_value, .grad_kind = GRAD_NONE},
    LIKE("fill_zeros_like", "Out = zeros of X's dtype and shape", GRAD_NONE),
    LIKE("ones_like", "Out = ones of X's dtype and shape", GRAD_NONE),
    LIKE("assign", "Out = X (a copy)", GRAD_COMPOSITE),
    LIKE("stop_gradient", "Out = X; no gradient flows back through it", GRAD_NONE),
    {.type = "cast", .doc = "Out = X converted to dtype", .in = {{"X", 0, "input"}},
     .out = {{"Out", 0, "the result, shape of X"}},
     .attrs = {{"dtype", ATTR_DTYPE, NULL, NULL, "the result's dtype"}},
     .infer = infer_cast, .grad_kind = GRAD_COMPOSITE},
    {.type = "add_n", .doc = "Out = the sum of the tensors in X, all of one shape",
     .in = {{"X", SLOT_LIST, "the tensors to add"}},
     .out = {{"Out", 0, "the sum, shape of each X"}}, .infer = infer_add_n,
     .grad_kind = GRAD_COMPOSITE},
    {.type = "print", .doc = "prints its inputs", .in = {{"X", SLOT_LIST, "the values to print"}},
     .attrs = {{"message", ATTR_STRING, "\"\"", NULL, "printed before the values"}},
     .infer = infer_nothing, .grad_kind = GRAD_NONE, .flags = OP_SIDE_EFFECT},
    {0},
};
