/* conv.c — 2-D convolution and pooling over NCHW tensors.
 *
 * Window attributes (strides, paddings, dilations, ksize) are pairs
 * [height, width].  An output side is (H + 2p - d*(k-1) - 1) / s + 1 and
 * must be at least 1.  Inputs compute in f32 (i64 is promoted; bool is an
 * error); results are f32. */
#include "../registry.h"

#include <string.h>

static const VarDesc *input(InferCtx *c, const char *slot) {
  const VarDesc *v = infer_in(c, slot, 0);
  if (!v) infer_fail(c, "input %s is missing", slot);
  return v;
}

static bool need_float(InferCtx *c, const char *slot, const VarDesc *v) {
  if (v->dtype != DT_F32 && v->dtype != DT_I64)
    return infer_fail(c, "%s must be f32 (or i64), got %s", slot, dtype_name(v->dtype));
  return true;
}

/* ---- attribute pairs ---------------------------------------------------------- */

static const char *check_pair_positive(const AttrValue *v) {
  if (v->type != ATTR_INTS) return NULL;
  if (v->n != 2) return "must hold 2 values [height, width]";
  return check_positive(v);
}

static const char *check_pair_nonnegative(const AttrValue *v) {
  if (v->type != ATTR_INTS) return NULL;
  if (v->n != 2) return "must hold 2 values [height, width]";
  return check_nonnegative(v);
}

/* Pool strides: [] (the default) means ksize, as in PyTorch. */
static const char *check_pool_strides(const AttrValue *v) {
  if (v->type != ATTR_INTS || v->n == 0) return NULL;
  return check_pair_positive(v);
}

/* Reads pair attribute `name` into p[2], re-running its checker (ops made
 * by netrun itself skip the script's attribute checks). */
static bool pair_attr(InferCtx *c, const char *name, AttrCheckFn check, int64_t p[2]) {
  const AttrValue *v = infer_attr(c, name);
  p[0] = p[1] = 1;
  if (!v || v->type != ATTR_INTS) return infer_fail(c, "attribute '%s' must be an int list", name);
  const char *why = check(v);
  if (why) return infer_fail(c, "attribute '%s' %s", name, why);
  if (v->n == 2) memcpy(p, v->u.ints, 2 * sizeof *p);
  return true;
}

/* One output side of a window op: (size + 2*pad - dil*(k-1) - 1) / stride + 1.
 * Returns it, 0 if it would be below 1, or -1 if the sizes overflow int64. */
static int64_t out_side(int64_t size, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  int64_t span, room;
  if (__builtin_mul_overflow(pad, 2, &room) || __builtin_add_overflow(room, size, &room))
    return -1;
  if (__builtin_mul_overflow(dil, k - 1, &span) || __builtin_add_overflow(span, 1, &span))
    return 0;   /* a window wider than any padded input */
  return room < span ? 0 : (room - span) / stride + 1;
}

static const char *pair_str(const int64_t p[2], char *buf, size_t n) {
  snprintf(buf, n, "[%lld, %lld]", (long long)p[0], (long long)p[1]);
  return buf;
}

/* Fills s->d[2], s->d[3] from the input's H, W and the window; "?" where
 * an input side or kernel side is not known.  `what` describes the
 * operands for an error. */
static bool window_out(InferCtx *c, const Shape *in, const Dim k[2], const int64_t st[2],
                       const int64_t pad[2], const int64_t dil[2], const char *what, Shape *s) {
  for (int i = 0; i < 2; i++) {
    Dim d = in->d[2 + i];
    if (!dim_known(d) || !dim_known(k[i])) {
      s->d[2 + i] = dim_unknown();
      continue;
    }
    int64_t o = out_side(d.n, k[i].n, st[i], pad[i], dil[i]);
    if (o < 1) {
      char sb[64], pb[64], db[64];
      return infer_fail(c, "%s: output %s would be %s (strides %s, paddings %s, dilations %s)",
                        what, i ? "width" : "height", o ? "too large" : "less than 1",
                        pair_str(st, sb, sizeof sb), pair_str(pad, pb, sizeof pb),
                        pair_str(dil, db, sizeof db));
    }
    s->d[2 + i] = dim_n(o);
  }
  return true;
}

static bool need_rank4(InferCtx *c, const char *slot, const Shape *s, const char *layout) {
  if (s->rank >= 0 && s->rank != 4) {
    char buf[128];
    return infer_fail(c, "%s must have shape %s, got %s", slot, layout, shape_str(s, buf, sizeof buf));
  }
  return true;
}

/* ---- conv2d ------------------------------------------------------------------- */

static bool infer_conv2d(InferCtx *c) {
  const VarDesc *in = input(c, "Input"), *f = input(c, "Filter");
  if (!in || !f || !need_float(c, "Input", in) || !need_float(c, "Filter", f)) return false;
  const Shape *is = &in->shape, *fs = &f->shape;
  if (!need_rank4(c, "Input", is, "[N, C, H, W]") || !need_rank4(c, "Filter", fs, "[O, I, KH, KW]"))
    return false;
  int64_t st[2], pad[2], dil[2];
  if (!pair_attr(c, "strides", check_pair_positive, st) ||
      !pair_attr(c, "paddings", check_pair_nonnegative, pad) ||
      !pair_attr(c, "dilations", check_pair_positive, dil))
    return false;
  int64_t groups = infer_attr_i(c, "groups");
  if (groups <= 0) return infer_fail(c, "groups must be positive, got %lld", (long long)groups);
  char a[128], b[128], what[300];
  snprintf(what, sizeof what, "Input has shape %s and Filter has shape %s",
           shape_str(is, a, sizeof a), shape_str(fs, b, sizeof b));
  Dim o = dim_unknown(), k[2] = {dim_unknown(), dim_unknown()};
  if (fs->rank == 4) {
    o = fs->d[0];
    k[0] = fs->d[2];
    k[1] = fs->d[3];
    if (dim_known(o) && o.n % groups != 0)
      return infer_fail(c, "Filter has shape %s: its %lld output channels do not divide into "
                        "groups=%lld", b, (long long)o.n, (long long)groups);
    Dim ci = fs->d[1];
    if (is->rank == 4 && dim_known(is->d[1]) && dim_known(ci) &&
        (ci.n > INT64_MAX / groups || is->d[1].n != ci.n * groups))
      return infer_fail(c, "%s: Input has %lld channels but Filter expects I * groups = %lld * %lld",
                        what, (long long)is->d[1].n, (long long)ci.n, (long long)groups);
  }
  Shape s = shape_unknown();
  if (is->rank == 4) {
    s = *is;
    s.d[1] = o;
    if (!window_out(c, is, k, st, pad, dil, what, &s)) return false;
  }
  infer_set(c, "Output", 0, DT_F32, &s);
  return true;
}

/* ---- pools -------------------------------------------------------------------- */

static bool infer_pool(InferCtx *c) {
  const VarDesc *x = input(c, "X");
  if (!x || !need_float(c, "X", x) || !need_rank4(c, "X", &x->shape, "[N, C, H, W]")) return false;
  int64_t ks[2], st[2], pad[2], dil[2] = {1, 1};
  if (!pair_attr(c, "ksize", check_pair_positive, ks) ||
      !pair_attr(c, "strides", check_pool_strides, st) ||
      !pair_attr(c, "paddings", check_pair_nonnegative, pad))
    return false;
  const AttrValue *sv = infer_attr(c, "strides");
  if (sv->n == 0) memcpy(st, ks, sizeof st);
  char a[128], kb[64], pb[64], what[300];
  if (pad[0] > ks[0] / 2 || pad[1] > ks[1] / 2)
    return infer_fail(c, "paddings %s must be at most half of ksize %s", pair_str(pad, pb, sizeof pb),
                      pair_str(ks, kb, sizeof kb));
  Shape s = x->shape;
  if (s.rank == 4) {
    Dim k[2] = {dim_n(ks[0]), dim_n(ks[1])};
    snprintf(what, sizeof what, "X has shape %s and ksize is %s", shape_str(&s, a, sizeof a),
             pair_str(ks, kb, sizeof kb));
    if (!window_out(c, &x->shape, k, st, pad, dil, what, &s)) return false;
  }
  infer_set(c, "Out", 0, DT_F32, &s);
  return true;
}

/* ---- the table ---------------------------------------------------------------- */

#define POOL(NAME, DOC)                                                         \
  {.type = NAME, .doc = DOC, .in = {{"X", 0, "input [N, C, H, W]"}},            \
   .out = {{"Out", 0, "f32 [N, C, OH, OW]"}},                                   \
   .attrs = {{"ksize", ATTR_INTS, NULL, check_pair_positive, "window [height, width]"}, \
             {"strides", ATTR_INTS, "[]", check_pool_strides,                   \
              "step [height, width]; [] means ksize"},                          \
             {"paddings", ATTR_INTS, "[0, 0]", check_pair_nonnegative,          \
              "padding on each side [height, width], at most half of ksize"}},  \
   .infer = infer_pool, .grad_kind = GRAD_DEDICATED}

OpProto op_table_conv[] = {
    {.type = "conv2d", .doc = "Output = the 2-D cross-correlation of Input with Filter (NCHW, OIHW)",
     .in = {{"Input", 0, "images [N, C, H, W]"},
            {"Filter", 0, "kernels [O, C / groups, KH, KW]"}},
     .out = {{"Output", 0, "f32 [N, O, OH, OW]"}},
     .attrs = {{"strides", ATTR_INTS, "[1, 1]", check_pair_positive, "step [height, width]"},
               {"paddings", ATTR_INTS, "[0, 0]", check_pair_nonnegative,
                "zero padding on each side [height, width]"},
               {"dilations", ATTR_INTS, "[1, 1]", check_pair_positive,
                "spacing of kernel taps [height, width]"},
               {"groups", ATTR_INT, "1", check_positive, "channel groups; C and O divide by it"}},
     .infer = infer_conv2d, .grad_kind = GRAD_DEDICATED},
    POOL("max_pool2d", "Out = the maximum of each window of X (padding never wins)"),
    POOL("avg_pool2d", "Out = the mean of each window of X (padding counts as 0 in the mean)"),
    {0},
};
