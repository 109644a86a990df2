/* reduce.c — reductions over axes: sum, mean, max, min and argmax.
 *
 * `axis` lists the axes to reduce (negative ones count from the end, [] is
 * every axis); `keepdim` keeps each reduced axis as a dimension of size 1,
 * as NumPy's keepdims does. */
#include "../registry.h"

/* Normalizes axis `a` (an entry of attribute `attr`) against X's shape. */
static bool norm_axis(InferCtx *c, const char *attr, int64_t a, const Shape *x, int *out) {
  int64_t k = a < 0 ? a + x->rank : a;
  *out = 0;
  if (k < 0 || k >= x->rank) {
    char buf[128];
    return infer_fail(c, "%s %lld is out of range for X of shape %s", attr, (long long)a,
                      shape_str(x, buf, sizeof buf));
  }
  *out = (int)k;
  return true;
}

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
        return infer_fail(c, "axis %lld is out of range for X of shape []", (long long)axes[i]);
    *out = shape_scalar();
    return true;
  }
  for (int i = 0; i < x->rank; i++) drop[i] = n == 0;
  for (int i = 0; i < n; i++) {
    int k;
    if (!norm_axis(c, "axis", axes[i], x, &k)) return false;
    if (drop[k]) {
      char buf[128];
      return infer_fail(c, "axis %lld names dimension %d of X (shape %s) twice",
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
  const VarDesc *x = infer_in(c, "X", 0);
  if (!x) return infer_fail(c, "input X is missing");
  const AttrValue *ax = infer_attr(c, "axis");
  if (!ax || ax->type != ATTR_INTS) return infer_fail(c, "attribute 'axis' must be an int list");
  Shape s;
  if (!reduce_shape(c, &x->shape, ax->u.ints, ax->n, infer_attr_b(c, "keepdim"), &s))
    return false;
  DType t = x->dtype;
  if (kind == 's' && t == DT_BOOL) t = DT_I64;
  if (kind == 'm') t = DT_F32;
  infer_set(c, "Out", 0, t, &s);
  return true;
}

static bool infer_sum(InferCtx *c) { return infer_reduce_as(c, 's'); }
static bool infer_mean(InferCtx *c) { return infer_reduce_as(c, 'm'); }
static bool infer_keep(InferCtx *c) { return infer_reduce_as(c, 'k'); }

static bool infer_argmax(InferCtx *c) {
  const VarDesc *x = infer_in(c, "X", 0);
  if (!x) return infer_fail(c, "input X is missing");
  int64_t axis = infer_attr_i(c, "axis");
  Shape s;
  if (!reduce_shape(c, &x->shape, &axis, 1, infer_attr_b(c, "keepdim"), &s)) return false;
  infer_set(c, "Out", 0, DT_I64, &s);
  return true;
}

#define REDUCE(NAME, DOC, INFER)                                                \
  {.type = NAME, .doc = DOC, .in = {{"X", 0, "input"}},                         \
   .out = {{"Out", 0, "the result, X's shape without the reduced axes"}},       \
   .attrs = {{"axis", ATTR_INTS, "[]", NULL, "the axes to reduce; [] means all"}, \
             {"keepdim", ATTR_BOOL, "false", NULL, "keep reduced axes as size 1"}}, \
   .infer = INFER, .grad_kind = GRAD_DEDICATED}

OpProto op_table_reduce[] = {
    REDUCE("sum", "Out = the sum of X over axis (bool counts as i64)", infer_sum),
    REDUCE("mean", "Out = the f32 mean of X over axis", infer_mean),
    REDUCE("max", "Out = the largest element of X over axis", infer_keep),
    REDUCE("min", "Out = the smallest element of X over axis", infer_keep),
    {.type = "argmax", .doc = "Out = the index of the largest element of X along axis",
     .in = {{"X", 0, "input"}},
     .out = {{"Out", 0, "i64 indices, X's shape without axis"}},
     .attrs = {{"axis", ATTR_INT, "-1", NULL, "the axis to search"},
               {"keepdim", ATTR_BOOL, "false", NULL, "keep axis as size 1"}},
     .infer = infer_argmax, .grad_kind = GRAD_NONE},
    {0},
};
