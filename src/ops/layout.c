/* layout.c — ops that lay X's elements out anew: stack (join along a new
 * axis), pad (surround with a constant), tril and triu (keep a triangle of
 * the last two axes, zero the rest).  PyTorch's semantics, except that
 * pad's paddings list every axis, first axis first.
 *
 * Their gradients are composite, made of ops of the same kind: tril's is a
 * tril of the gradient, pad's a pad by the negated paddings (a negative
 * padding crops, as in PyTorch), stack's a slice of each input's layer
 * viewed in that input's shape.  So a second derivative needs nothing new.
 *
 * Inference keeps symbolic dimensions (B) wherever the result is provably
 * the same size, and writes "?" where only run time can tell. */
#include "autodiff/backward.h"
#include "exec/exec.h"

#include <string.h>

/* Row-major element strides of t. */
static void strides_of(const Tensor *t, int64_t *st) {
  int64_t s = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    st[i] = s;
    s *= t->shape[i];
  }
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---- stack ---------------------------------------------------------------------- */

/* stack: every X has one shape; Out has a new dimension of size n at axis,
 * which counts among Out's dimensions (-1 is a new last axis). */
static bool infer_stack(InferCtx *c) {
  InferList l;
  if (!reg_infer_list(c, "X", "Out", &l)) return false;
  if (!l.ref) return true;
  Shape s = l.ref->shape;
  char sa[128], sb[128];
  for (int i = 0; i < l.n; i++) {
    const Shape *vs = &reg_infer_in(c, "X", i)->shape;
    if (vs->rank < 0) continue;
    bool clash = vs->rank != s.rank;
    for (int k = 0; k < s.rank && !clash; k++) clash = dims_clash(vs->d[k], s.d[k]);
    if (clash)
      return reg_infer_fail(c, "X[%d] has shape %s but X[%d] has shape %s: stack needs equal shapes", i,
                            shape_str(vs, sa, sizeof sa), l.iref, shape_str(&l.ref->shape, sb, sizeof sb));
    for (int k = 0; k < s.rank; k++) s.d[k] = dim_merge(s.d[k], vs->d[k]);
  }
  if (s.rank >= SHAPE_MAX_RANK)
    return reg_infer_fail(c, "stacking X of shape %s would give rank %d; at most %d", shape_str(&s, sa, sizeof sa),
                          s.rank + 1, SHAPE_MAX_RANK);
  int64_t a = reg_infer_attr_i(c, "axis"), r = s.rank + 1, k = a < 0 ? a + r : a;
  if (k < 0 || k >= r)
    return reg_infer_fail(c, "axis %lld is out of range for stacking X of shape %s (from %lld to %lld)",
                          (long long)a, shape_str(&s, sa, sizeof sa), (long long)-r, (long long)(r - 1));
  for (int i = s.rank; i > k; i--) s.d[i] = s.d[i - 1];
  s.d[k] = dim_n(l.n);
  s.rank++;
  reg_infer_set(c, "Out", 0, l.t, &s);
  return true;
}

/* Out viewed as [outer, n, inner] around axis: X[j] is the layer j of it,
 * one contiguous chunk of inner elements per outer index. */
static int k_stack(ExecCtx *c) {
  Tensor *out = exec_ctx_out(c, 0);
  int n = exec_ctx_in_count(c, 0);
  int64_t a = exec_ctx_attr_i(c, "axis");
  int axis = (int)(a < 0 ? a + out->rank : a);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < out->rank; i++) {
    if (i < axis) outer *= out->shape[i];
    else if (i > axis) inner *= out->shape[i];
  }
  size_t es = dtype_size(out->dtype), chunk = (size_t)inner * es;
  char *od = out->data;
  for (int j = 0; j < n; j++) {
    Tensor *x = tensor_cast(exec_ctx_in_at(c, 0, j), out->dtype);   /* inference promoted */
    if (x->numel != outer * inner) {
      tensor_unref(x);
      return exec_ctx_fail(c, "internal error: X[%d] does not fill a layer of Out", j);
    }
    const char *xd = x->data;
    for (int64_t o = 0; o < outer; o++)
      memcpy(od + (size_t)((o * n + j) * inner) * es, xd + (size_t)(o * inner) * es, chunk);
    tensor_unref(x);
  }
  return 0;
}

/* stack: dX[j] = slice j of dOut along axis, viewed in X[j]'s shape. */
static int g_stack(GradCtx *g) {
  int64_t axis = reg_attr_i64(bwd_op_attr(g, "axis"));
  const char *dout = bwd_op_out_grad(g, "Out", 0);
  for (int j = 0; j < bwd_op_nin(g, "X"); j++) {
    const char *dx = bwd_op_in_grad(g, "X", j);
    if (!dx) continue;
    const char *t = bwd_temp(g);
    int64_t at[2] = {j, j + 1};
    OpDesc *op = bwd_emit(g, "slice");
    bwd_emit_in(g, op, "X", dout);
    bwd_emit_out(g, op, "Out", t);
    bwd_emit_attr(g, op, "axes", attr_ints(bwd_prog(g), &axis, 1));
    bwd_emit_attr(g, op, "starts", attr_ints(bwd_prog(g), &at[0], 1));
    bwd_emit_attr(g, op, "ends", attr_ints(bwd_prog(g), &at[1], 1));
    OpDesc *view = bwd_emit(g, "reshape_like");
    bwd_emit_in(g, view, "X", t);
    bwd_emit_in(g, view, "Like", bwd_op_in(g, "X", j));
    bwd_emit_out(g, view, "Out", dx);
  }
  return 0;
}

/* ---- pad ------------------------------------------------------------------------ */

/* pad: paddings holds (before, after) for every axis of X, first axis
 * first; a negative one crops.  Each padded size must stay >= 0. */
static bool infer_pad(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X");
  const AttrValue *p = reg_infer_attr(c, "paddings");
  if (!x) return false;
  if (!p || p->type != ATTR_INTS) return reg_infer_fail(c, "attribute 'paddings' must be an int list");
  const Shape *xs = &x->shape;
  Shape s = *xs;
  char buf[128];
  if (xs->rank >= 0 && p->n != 2 * xs->rank)
    return reg_infer_fail(c, "paddings has %d entries but X (shape %s) needs %d: a (before, after) pair per axis",
                          p->n, shape_str(xs, buf, sizeof buf), 2 * xs->rank);
  for (int k = 0; k < xs->rank; k++) {
    int64_t b = p->u.ints[2 * k], e = p->u.ints[2 * k + 1];
    if (b < -(INT64_MAX / 4) || b > INT64_MAX / 4 || e < -(INT64_MAX / 4) || e > INT64_MAX / 4)
      return reg_infer_fail(c, "paddings of axis %d (%lld, %lld) are too large", k, (long long)b, (long long)e);
    Dim d = xs->d[k];
    if (dim_known(d)) {
      int64_t size;   /* d.n + b + e, which may pass 2^63 - 1 for a huge d.n */
      if (__builtin_add_overflow(d.n, b + e, &size))
        return reg_infer_fail(c, "padding axis %d of X (shape %s) by (%lld, %lld) makes it larger than netrun can count",
                              k, shape_str(xs, buf, sizeof buf), (long long)b, (long long)e);
      if (size < 0)
        return reg_infer_fail(c, "padding axis %d of X (shape %s) by (%lld, %lld) leaves %lld elements", k,
                              shape_str(xs, buf, sizeof buf), (long long)b, (long long)e, (long long)size);
      s.d[k] = dim_n(size);
    } else if (b + e != 0) {
      s.d[k] = dim_unknown();
    }
  }
  reg_infer_set(c, "Out", 0, x->dtype, &s);
  return true;
}

/* Fills n elements of size es at dst with the one at val. */
static void fill_value(void *dst, const void *val, size_t es, int64_t n) {
  if (n <= 0) return;
  if (es == 4) {
    uint32_t v, *d = dst;
    memcpy(&v, val, 4);
    for (int64_t i = 0; i < n; i++) d[i] = v;
  } else if (es == 8) {
    uint64_t v, *d = dst;
    memcpy(&v, val, 8);
    for (int64_t i = 0; i < n; i++) d[i] = v;
  } else {
    memset(dst, *(const uint8_t *)val, (size_t)n);
  }
}

/* `value` in dtype t's bits: an i64 truncates it toward 0, a bool is
 * whether it is not 0. */
static void pad_value(DType t, double v, void *out) {
  if (t == DT_F32) {
    float f = (float)v;
    memcpy(out, &f, sizeof f);
  } else if (t == DT_F64) {
    memcpy(out, &v, sizeof v);
  } else if (t == DT_I64) {
    int64_t i = v != v ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
    memcpy(out, &i, sizeof i);
  } else {
    *(uint8_t *)out = v != 0;
  }
}

/* Out row by row (its last dimension): a row that some outer index puts
 * in the padding is all value; the others are value, a run of X's row
 * (memcpy), value. */
static int k_pad(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0), *out = exec_ctx_out(c, 0);
  const int64_t *p = exec_ctx_attr(c, "paddings")->u.ints;
  size_t es = dtype_size(out->dtype);
  const char *xd = x->data;
  char *od = out->data, val[8];
  int r = out->rank;
  if (out->numel == 0) return 0;
  if (r == 0) {
    memcpy(od, xd, es);
    return 0;
  }
  pad_value(out->dtype, exec_ctx_attr_f(c, "value"), val);
  int64_t xst[SHAPE_MAX_RANK], idx[SHAPE_MAX_RANK] = {0};
  strides_of(x, xst);
  int64_t ow = out->shape[r - 1], b = p[2 * (r - 1)];
  int64_t lo = clamp64(b, 0, ow), hi = clamp64(b + x->shape[r - 1], 0, ow);   /* Out's columns from X */
  if (hi < lo) hi = lo;
  int64_t rows = out->numel / ow;
  for (int64_t row = 0; row < rows; row++) {
    char *o = od + (size_t)(row * ow) * es;
    bool inside = hi > lo;
    int64_t off = lo - b;   /* X's offset of the run */
    for (int k = 0; k < r - 1 && inside; k++) {
      int64_t s = idx[k] - p[2 * k];
      inside = s >= 0 && s < x->shape[k];
      off += s * xst[k];
    }
    if (!inside) {
      fill_value(o, val, es, ow);
    } else {
      fill_value(o, val, es, lo);
      memcpy(o + (size_t)lo * es, xd + (size_t)off * es, (size_t)(hi - lo) * es);
      fill_value(o + (size_t)hi * es, val, es, ow - hi);
    }
    for (int k = r - 2; k >= 0; k--) {
      if (++idx[k] < out->shape[k]) break;
      idx[k] = 0;
    }
  }
  return 0;
}

/* pad: dX = pad(dOut) by the negated paddings, which crops the padding
 * off (and pads with zeros what the forward cropped). */
static int g_pad(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0);
  if (!dx) return 0;
  const AttrValue *p = bwd_op_attr(g, "paddings");
  int n = p->n < 2 * SHAPE_MAX_RANK ? p->n : 2 * SHAPE_MAX_RANK;   /* inference checked 2 * rank */
  int64_t neg[2 * SHAPE_MAX_RANK];
  for (int i = 0; i < n; i++) neg[i] = -p->u.ints[i];
  OpDesc *op = bwd_emit(g, "pad");
  bwd_emit_in(g, op, "X", bwd_op_out_grad(g, "Out", 0));
  bwd_emit_out(g, op, "Out", dx);
  bwd_emit_attr(g, op, "paddings", attr_ints(bwd_prog(g), neg, n));
  bwd_emit_attr(g, op, "value", attr_float(0));
  return 0;
}

/* ---- tril, triu ----------------------------------------------------------------- */

/* X has rank 2 or more; Out is like X. */
static bool infer_tri(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X");
  if (!x) return false;
  if (x->shape.rank >= 0 && x->shape.rank < 2) {
    char buf[128];
    return reg_infer_fail(c, "X has shape %s; %s needs rank 2 or more", shape_str(&x->shape, buf, sizeof buf),
                          c->proto->type);
  }
  reg_infer_set(c, "Out", 0, x->dtype, &x->shape);
  return true;
}

/* Row i of each matrix keeps columns j with j - i <= diagonal (tril) or
 * j - i >= diagonal (triu): one run copied, zeros around it. */
static int tri_run(ExecCtx *c, bool lower) {
  Tensor *x = exec_ctx_in(c, 0), *out = exec_ctx_out(c, 0);
  if (out->numel == 0) return 0;
  int64_t nr = out->shape[out->rank - 2], nc = out->shape[out->rank - 1];
  int64_t d = clamp64(exec_ctx_attr_i(c, "diagonal"), -nr - 1, nc + 1);
  size_t es = dtype_size(out->dtype);
  const char *xd = x->data;
  char *od = out->data;
  for (int64_t row = 0; row < out->numel / nc; row++) {
    int64_t i = row % nr;
    int64_t lo = lower ? 0 : clamp64(i + d, 0, nc), hi = lower ? clamp64(i + d + 1, 0, nc) : nc;
    if (hi < lo) hi = lo;
    char *o = od + (size_t)(row * nc) * es;
    memset(o, 0, (size_t)lo * es);
    memcpy(o + (size_t)lo * es, xd + (size_t)(row * nc + lo) * es, (size_t)(hi - lo) * es);
    memset(o + (size_t)hi * es, 0, (size_t)(nc - hi) * es);
  }
  return 0;
}

static int k_tril(ExecCtx *c) { return tri_run(c, true); }
static int k_triu(ExecCtx *c) { return tri_run(c, false); }

/* tril, triu: dX = the same triangle of dOut. */
static int g_tri(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0);
  if (!dx) return 0;
  OpDesc *op = bwd_emit(g, bwd_op_fwd(g)->type);
  bwd_emit_in(g, op, "X", bwd_op_out_grad(g, "Out", 0));
  bwd_emit_out(g, op, "Out", dx);
  bwd_emit_attr(g, op, "diagonal", *bwd_op_attr(g, "diagonal"));
  return 0;
}

/* ---- the table ------------------------------------------------------------------ */

#define TRI(NAME, DOC)                                                          \
  {.type = #NAME, .doc = DOC, .in = {{"X", 0, "input, rank 2 or more"}},        \
   .out = {{"Out", 0, "the result, dtype and shape of X"}},                     \
   .attrs = {{"diagonal", ATTR_INT, "0", NULL,                                  \
              "0: the main diagonal; k > 0: k above it; k < 0: below"}},        \
   .infer = infer_tri, .kernel = k_##NAME, .grad_kind = GRAD_COMPOSITE, .grad = g_tri, .flags = OP_F64}

OpProto op_table_layout[] = {
    {.type = "stack", .doc = "Out = the tensors in X, all of one shape, joined along a new axis",
     .in = {{"X", SLOT_LIST, "the tensors, all of one shape"}},
     .out = {{"Out", 0, "the result, X[0]'s shape with len(X) inserted at axis"}},
     .attrs = {{"axis", ATTR_INT, "0", NULL, "the new axis' position in Out; negative counts from the end"}},
     .infer = infer_stack, .kernel = k_stack, .grad_kind = GRAD_COMPOSITE, .grad = g_stack, .flags = OP_F64},
    {.type = "pad", .doc = "Out = X with value added before and after each axis",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "the result, each axis longer by its paddings"}},
     .attrs = {{"paddings", ATTR_INTS, NULL, NULL,
                "(before, after) per axis of X, first axis first; a negative one crops"},
               {"value", ATTR_FLOAT, "0", NULL, "the value of the new elements"}},
     .infer = infer_pad, .kernel = k_pad, .grad_kind = GRAD_COMPOSITE, .grad = g_pad, .flags = OP_F64},
    TRI(tril, "Out = X's lower triangle (last two axes): column - row <= diagonal, 0 elsewhere"),
    TRI(triu, "Out = X's upper triangle (last two axes): column - row >= diagonal, 0 elsewhere"),
    {0},
};
