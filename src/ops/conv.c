/* conv.c — 2-D convolution and pooling over NCHW tensors.
 *
 * Window attributes (strides, paddings, dilations, ksize) are pairs
 * [height, width]; a script may give one int for both (the protos' repeat,
 * applied by reg_coerce_attr).  An output side is (H + 2p - d*(k-1) - 1) / s + 1 and
 * must be at least 1.  Inputs compute in f32 (i64 is promoted; bool is an
 * error); results are f32.
 *
 * conv2d runs on direct kernels over the padded image (conv_direct_ok:
 * one group, no dilation, a kernel larger than 1x1), or else unfolds the
 * input (im2col) and multiplies by the filter with OpenBLAS's sgemm (a 1x1
 * kernel of stride 1 with no unfolding).  The pools are direct loops over
 * each window.  The gradients are dedicated ops: conv2d_grad runs the
 * direct kernels (the input's gradient too where conv_direct_dx says so),
 * or the two transposed GEMMs (dFilter = dOut . col^T, dCol = Filter^T .
 * dOut folded back by col2im); the pools' grads walk the same windows as
 * their forwards.
 *
 * upsample_nearest2d repeats each pixel over a block; its gradient sums
 * each block back. */
#include "autodiff/backward.h"
#include "exec/exec.h"
#include "exec/par.h"
#include "ops/vmath.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

/* ---- attribute pairs ---------------------------------------------------------- */

static const char *check_pair_positive(const AttrValue *v) {
  if (v->type != ATTR_INTS) return NULL;
  if (v->n != 2) return "must hold 2 values [height, width]";
  return reg_check_positive(v);
}

static const char *check_pair_nonnegative(const AttrValue *v) {
  if (v->type != ATTR_INTS) return NULL;
  if (v->n != 2) return "must hold 2 values [height, width]";
  return reg_check_nonnegative(v);
}

/* Pool strides: [] (the default) means ksize, as in PyTorch. */
static const char *check_pool_strides(const AttrValue *v) {
  if (v->type != ATTR_INTS || v->n == 0) return NULL;
  return check_pair_positive(v);
}

/* Reads pair attribute `name` into p[2], re-running its checker (ops made
 * by netrun itself skip the script's attribute checks). */
static bool pair_attr(InferCtx *c, const char *name, AttrCheckFn check, int64_t p[2]) {
  const AttrValue *v = reg_infer_attr(c, name);
  p[0] = p[1] = 1;
  if (!v || v->type != ATTR_INTS) return reg_infer_fail(c, "attribute '%s' must be an int list", name);
  const char *why = check(v);
  if (why) return reg_infer_fail(c, "attribute '%s' %s", name, why);
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
      return reg_infer_fail(c, "%s: output %s would be %s (strides %s, paddings %s, dilations %s)",
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
    return reg_infer_fail(c, "%s must have shape %s, got %s", slot, layout, shape_str(s, buf, sizeof buf));
  }
  return true;
}

/* ---- conv2d ------------------------------------------------------------------- */

/* conv2d's Output shape into *s, from Input, Filter and the attributes. */
/* conv_shape of the images in input slot `input`. */
static bool conv_shape_of(InferCtx *c, const char *input, Shape *s) {
  const VarDesc *in = reg_infer_input(c, input), *f = reg_infer_input(c, "Filter");
  if (!in || !f || !reg_infer_need_float(c, input, in) || !reg_infer_need_float(c, "Filter", f)) return false;
  const Shape *is = &in->shape, *fs = &f->shape;
  if (!need_rank4(c, input, is, "[N, C, H, W]") || !need_rank4(c, "Filter", fs, "[O, I, KH, KW]"))
    return false;
  int64_t st[2], pad[2], dil[2];
  if (!pair_attr(c, "strides", check_pair_positive, st) ||
      !pair_attr(c, "paddings", check_pair_nonnegative, pad) ||
      !pair_attr(c, "dilations", check_pair_positive, dil))
    return false;
  int64_t groups = reg_infer_attr_i(c, "groups");
  if (groups <= 0) return reg_infer_fail(c, "groups must be positive, got %lld", (long long)groups);
  char a[128], b[128], what[300];
  snprintf(what, sizeof what, "%s has shape %s and Filter has shape %s", input, shape_str(is, a, sizeof a),
           shape_str(fs, b, sizeof b));
  Dim o = dim_unknown(), k[2] = {dim_unknown(), dim_unknown()};
  if (fs->rank == 4) {
    o = fs->d[0];
    k[0] = fs->d[2];
    k[1] = fs->d[3];
    if (dim_known(o) && o.n % groups != 0)
      return reg_infer_fail(c, "Filter has shape %s: its %lld output channels do not divide into "
                            "groups=%lld", b, (long long)o.n, (long long)groups);
    Dim ci = fs->d[1];
    if (is->rank == 4 && dim_known(is->d[1]) && dim_known(ci) &&
        (ci.n > INT64_MAX / groups || is->d[1].n != ci.n * groups))
      return reg_infer_fail(c, "%s: %s has %lld channels but Filter expects I * groups = %lld * %lld", what, input,
                            (long long)is->d[1].n, (long long)ci.n, (long long)groups);
  }
  *s = shape_unknown();
  if (is->rank == 4) {
    *s = *is;
    s->d[1] = o;
    if (!window_out(c, is, k, st, pad, dil, what, s)) return false;
  }
  return true;
}

static bool conv_shape(InferCtx *c, Shape *s) { return conv_shape_of(c, "Input", s); }

static bool infer_conv2d(InferCtx *c) {
  Shape s;
  if (!conv_shape(c, &s)) return false;
  reg_infer_set(c, "Output", 0, DT_F32, &s);
  return true;
}

/* fused_conv2d: conv2d's Output and, if asked, its 2x2 max pool and its
 * moments per image and channel. */
/* Moments (if asked): f64 [N, O, 2] for an Output of shape s. */
static void infer_moments(InferCtx *c, const Shape *s) {
  if (reg_infer_out_count(c, "Moments") == 0) return;
  Dim n = s->rank == 4 ? s->d[0] : dim_unknown(), o = s->rank == 4 ? s->d[1] : dim_unknown();
  Shape ms = {.rank = 3, .d = {n, o, dim_n(2)}};
  reg_infer_set(c, "Moments", 0, DT_F64, &ms);
}

static bool infer_fused_conv2d(InferCtx *c) {
  Shape s;
  if (!conv_shape(c, &s)) return false;
  if (reg_infer_out_count(c, "Output") > 0) reg_infer_set(c, "Output", 0, DT_F32, &s);
  if (reg_infer_out_count(c, "Mask") > 0) reg_infer_set(c, "Mask", 0, DT_BOOL, &s);
  infer_moments(c, &s);
  if (reg_infer_out_count(c, "Pooled") > 0 && s.rank == 4) {
    for (int d = 2; d < 4; d++) s.d[d] = dim_known(s.d[d]) ? dim_n(s.d[d].n / 2) : dim_unknown();
    reg_infer_set(c, "Pooled", 0, DT_F32, &s);
  }
  return true;
}

/* fused_norm_conv2d: Y as X, then fused_conv2d's Output (and Moments) of Y. */
static bool infer_fused_norm_conv2d(InferCtx *c) {
  Shape s;
  const VarDesc *x = reg_infer_input(c, "X");
  if (!x || !conv_shape_of(c, "X", &s)) return false;
  reg_infer_set(c, "Y", 0, x->dtype, &x->shape);
  reg_infer_set(c, "Output", 0, DT_F32, &s);
  infer_moments(c, &s);
  return true;
}

/* ---- conv2d_transpose ------------------------------------------------------------- */

/* One output side of conv2d_transpose into *o: (size - 1) * stride - 2 *
 * pad + dil * (k - 1) + out_pad + 1; false if that overflows int64. */
static bool transpose_side(int64_t size, int64_t k, int64_t stride, int64_t pad, int64_t dil, int64_t opad,
                           int64_t *o) {
  int64_t a, b, p2;
  return !__builtin_mul_overflow(size - 1, stride, &a) && !__builtin_mul_overflow(dil, k - 1, &b) &&
         !__builtin_mul_overflow(pad, 2, &p2) && !__builtin_add_overflow(a, b, o) &&
         !__builtin_add_overflow(*o, opad + 1, o) && !__builtin_sub_overflow(*o, p2, o);
}

/* Output [N, C_out, OH, OW] from Input [N, C_in, H, W] and Filter [C_in,
 * C_out / groups, KH, KW]; output_padding below stride or dilation, as
 * PyTorch asks. */
static bool infer_conv2d_transpose(InferCtx *c) {
  const VarDesc *in = reg_infer_input(c, "Input"), *f = reg_infer_input(c, "Filter");
  if (!in || !f || !reg_infer_need_float(c, "Input", in) || !reg_infer_need_float(c, "Filter", f)) return false;
  const Shape *is = &in->shape, *fs = &f->shape;
  if (!need_rank4(c, "Input", is, "[N, C, H, W]") || !need_rank4(c, "Filter", fs, "[C, O / groups, KH, KW]"))
    return false;
  int64_t st[2], pad[2], opad[2], dil[2];
  if (!pair_attr(c, "strides", check_pair_positive, st) || !pair_attr(c, "paddings", check_pair_nonnegative, pad) ||
      !pair_attr(c, "output_padding", check_pair_nonnegative, opad) ||
      !pair_attr(c, "dilations", check_pair_positive, dil))
    return false;
  int64_t groups = reg_infer_attr_i(c, "groups");
  if (groups <= 0) return reg_infer_fail(c, "groups must be positive, got %lld", (long long)groups);
  char a[128], b[128], sb[64], db[64], ob[64];
  for (int i = 0; i < 2; i++)
    if (opad[i] >= st[i] && opad[i] >= dil[i])
      return reg_infer_fail(c, "output_padding %s must be smaller than strides %s or dilations %s",
                            pair_str(opad, ob, sizeof ob), pair_str(st, sb, sizeof sb), pair_str(dil, db, sizeof db));
  shape_str(is, a, sizeof a);
  shape_str(fs, b, sizeof b);
  Dim ci = is->rank == 4 ? is->d[1] : dim_unknown(), fi = fs->rank == 4 ? fs->d[0] : dim_unknown();
  if (dim_known(fi) && fi.n % groups != 0)
    return reg_infer_fail(c, "Filter has shape %s: its %lld input channels do not divide into groups=%lld", b,
                          (long long)fi.n, (long long)groups);
  if (dims_clash(ci, fi))
    return reg_infer_fail(c, "Input has shape %s and Filter has shape %s: Filter's first axis must be Input's "
                          "channels", a, b);
  Shape s = shape_unknown();
  if (is->rank == 4) {
    s = *is;
    Dim oc = fs->rank == 4 ? fs->d[1] : dim_unknown();
    s.d[1] = dim_known(oc) && oc.n <= INT64_MAX / groups ? dim_n(oc.n * groups) : dim_unknown();
    for (int i = 0; i < 2; i++) {
      Dim d = is->d[2 + i], k = fs->rank == 4 ? fs->d[2 + i] : dim_unknown();
      if (!dim_known(d) || !dim_known(k)) {
        s.d[2 + i] = dim_unknown();
        continue;
      }
      int64_t o;
      bool fits = transpose_side(d.n, k.n, st[i], pad[i], dil[i], opad[i], &o);
      if (!fits || o < 1) {
        char pb[64];
        return reg_infer_fail(c, "Input has shape %s and Filter has shape %s: output %s would be %s (strides %s, "
                              "paddings %s, output_padding %s, dilations %s)", a, b, i ? "width" : "height",
                          fits ? "less than 1" : "too large", pair_str(st, sb, sizeof sb),
                          pair_str(pad, pb, sizeof pb), pair_str(opad, ob, sizeof ob), pair_str(dil, db, sizeof db));
      }
      s.d[2 + i] = dim_n(o);
    }
  }
  reg_infer_set(c, "Output", 0, DT_F32, &s);
  return true;
}

/* ---- pools -------------------------------------------------------------------- */

static bool infer_pool(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X");
  if (!x || !reg_infer_need_float(c, "X", x) || !need_rank4(c, "X", &x->shape, "[N, C, H, W]")) return false;
  int64_t ks[2], st[2], pad[2], dil[2] = {1, 1};
  if (!pair_attr(c, "ksize", check_pair_positive, ks) ||
      !pair_attr(c, "strides", check_pool_strides, st) ||
      !pair_attr(c, "paddings", check_pair_nonnegative, pad))
    return false;
  const AttrValue *sv = reg_infer_attr(c, "strides");
  if (sv->n == 0) memcpy(st, ks, sizeof st);
  char a[128], kb[64], pb[64], what[300];
  if (pad[0] > ks[0] / 2 || pad[1] > ks[1] / 2)
    return reg_infer_fail(c, "paddings %s must be at most half of ksize %s", pair_str(pad, pb, sizeof pb),
                          pair_str(ks, kb, sizeof kb));
  Shape s = x->shape;
  if (s.rank == 4) {
    Dim k[2] = {dim_n(ks[0]), dim_n(ks[1])};
    snprintf(what, sizeof what, "X has shape %s and ksize is %s", shape_str(&s, a, sizeof a),
             pair_str(ks, kb, sizeof kb));
    if (!window_out(c, &x->shape, k, st, pad, dil, what, &s)) return false;
  }
  reg_infer_set(c, "Out", 0, DT_F32, &s);
  return true;
}

/* ---- upsample_nearest2d ----------------------------------------------------------- */

/* Out [N, C, H * sh, W * sw] from X [N, C, H, W] and scale [sh, sw]. */
static bool infer_upsample(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X");
  if (!x || !reg_infer_need_float(c, "X", x) || !need_rank4(c, "X", &x->shape, "[N, C, H, W]")) return false;
  int64_t sc[2];
  if (!pair_attr(c, "scale", check_pair_positive, sc)) return false;
  Shape s = x->shape;
  for (int i = 0; i < 2 && s.rank == 4; i++) {
    Dim d = s.d[2 + i];
    if (!dim_known(d)) {
      s.d[2 + i] = dim_unknown();
    } else if (d.n > TENSOR_MAX_BYTES / sc[i]) {
      char a[128];
      return reg_infer_fail(c, "X of shape %s scaled by %lld would have a %s too large", shape_str(&x->shape, a, sizeof a),
                            (long long)sc[i], i ? "width" : "height");
    } else {
      s.d[2 + i] = dim_n(d.n * sc[i]);
    }
  }
  reg_infer_set(c, "Out", 0, DT_F32, &s);
  return true;
}

/* ---- kernels -------------------------------------------------------------------- */

/* A pair attribute's values at run time (the checkers ran at inference). */
static void attr_pair(ExecCtx *c, const char *name, int64_t p[2]) {
  const AttrValue *v = exec_ctx_attr(c, name);
  p[0] = p[1] = 1;
  if (v && v->type == ATTR_INTS && v->n == 2) memcpy(p, v->u.ints, 2 * sizeof *p);
}

/* The geometry of one conv2d or pool call. */
typedef struct Window {
  int64_t n, c, h, w;          /* input [N, C, H, W] */
  int64_t oh, ow;              /* output sides */
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
} Window;

static void window_read(ExecCtx *c, const Tensor *x, const Tensor *out, bool dilated, Window *g) {
  int64_t st[2], pad[2], dil[2] = {1, 1};
  g->n = x->shape[0];
  g->c = x->shape[1];
  g->h = x->shape[2];
  g->w = x->shape[3];
  g->oh = out->shape[2];
  g->ow = out->shape[3];
  attr_pair(c, "strides", st);
  attr_pair(c, "paddings", pad);
  if (dilated) attr_pair(c, "dilations", dil);
  g->sh = st[0];
  g->sw = st[1];
  g->ph = pad[0];
  g->pw = pad[1];
  g->dh = dil[0];
  g->dw = dil[1];
}

/* Four floats at a time, in 16-byte vectors (GCC's and clang's vector
 * extensions, so any target builds them). */
typedef float V4f __attribute__((vector_size(16)));
typedef int32_t V4i __attribute__((vector_size(16)));

static inline V4f load4(const float *p) {
  V4f v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline void store4(float *p, V4f v) { memcpy(p, &v, sizeof v); }

/* The copy loops of im2col and col2im, and the direct path's copies into
 * and out of its padded layouts, also come in an AVX2 version, picked at
 * load time on machines that have it (an output row of 14 floats is two
 * 32-byte moves instead of four 16-byte ones). */
#if defined(__x86_64__) && defined(__GNUC__)
#define SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SIMD_CLONES
#endif

/* (no load/store helpers for it: a function returning a 32-byte vector
 * has another ABI with AVX than without) */
typedef float V8f __attribute__((vector_size(32)));

/* d[0, n) = s[0, n).  The last vector overlaps the one before it instead
 * of a scalar tail: runs are short (an output row).  The destination goes
 * through an empty asm, or GCC turns the loop into a call to memmove, which
 * on runs this short costs more than the copy (im2col went from 6% to 13%
 * of a CNN step). */
static inline void copy_run(float *restrict d, const float *restrict s, int64_t n) {
  if (n >= 8) {
    for (int64_t k = 0; k + 8 < n; k += 8) {
      float *dk = d + k;
      V8f v;
      __asm__("" : "+r"(dk));
      memcpy(&v, s + k, sizeof v);
      memcpy(dk, &v, sizeof v);
    }
    V8f tail;
    memcpy(&tail, s + n - 8, sizeof tail);
    memcpy(d + n - 8, &tail, sizeof tail);
  } else if (n >= 4) {
    V4f head = load4(s), tail = load4(s + n - 4);
    store4(d, head);
    store4(d + n - 4, tail);
  } else {
    for (int64_t k = 0; k < n; k++) d[k] = s[k];
  }
}

/* d[0, n) += s[0, n) */
static inline void add_run(float *restrict d, const float *restrict s, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    V8f a, b;
    memcpy(&a, d + k, sizeof a);
    memcpy(&b, s + k, sizeof b);
    a += b;
    memcpy(d + k, &a, sizeof a);
  }
  for (; k + 4 <= n; k += 4) store4(d + k, load4(d + k) + load4(s + k));
  for (; k < n; k++) d[k] += s[k];
}

/* Rows [r0, r1) of im2col's matrix (below) from src, the image with its
 * padding.  The geometry is read into locals: through the window, every
 * store would reload it (a float store may alias it as far as the compiler
 * knows). */
SIMD_CLONES static void unfold_rows(const float *src, const Window *g, float *col, int64_t ld, int64_t r0,
                                    int64_t r1) {
  const int64_t oh = g->oh, ow = g->ow, kw = g->kw, sh = g->sh, sw = g->sw, dh = g->dh, dw = g->dw;
  const int64_t hp = g->h + 2 * g->ph, wp = g->w + 2 * g->pw, taps = g->kh * kw;
  /* the tap (channel, ki, kj) of row r0, then counted on: no division per row */
  int64_t ci = r0 / taps, ki = r0 % taps / kw, kj = r0 % kw;
  for (int64_t r = r0; r < r1; r++) {
    float *row = col + r * ld;
    const float *tap = src + (ci * hp + ki * dh) * wp + kj * dw;
    for (int64_t oy = 0; oy < oh; oy++, row += ow) {
      const float *sr = tap + oy * sh * wp;
      if (sw == 1) copy_run(row, sr, ow);
      else
        for (int64_t ox = 0; ox < ow; ox++) row[ox] = sr[ox * sw];
    }
    if (++kj == kw) {
      kj = 0;
      if (++ki == g->kh) ki = 0, ci++;
    }
  }
}

/* im2col: unfolds channels [cg, H, W] of one image into the matrix
 * col[cg*KH*KW, OH*OW] (row stride ld), one row per kernel tap (channel,
 * ki, kj), one column per output pixel; taps falling in the padding are 0.
 * With padding, the image is first copied into the middle of `padded`
 * ([cg, H+2ph, W+2pw], its border zeroed once by the caller), so the copy
 * loops need no bounds tests: five times faster than clipping each run. */
static void im2col(const float *img, int64_t cg, const Window *g, float *padded, float *col,
                   int64_t ld) {
  const int64_t h = g->h, w = g->w, ph = g->ph, pw = g->pw, hp = h + 2 * ph, wp = w + 2 * pw;
  const int64_t rows = cg * g->kh * g->kw, block = 16, blocks = (rows + block - 1) / block;
  const float *src = img;
  if (ph || pw) {
    PAR_FOR(cg > 1 && cg * h * w >= PAR_MIN_WORK)
    for (int64_t ci = 0; ci < cg; ci++)
      for (int64_t y = 0; y < h; y++)
        memcpy(padded + (ci * hp + y + ph) * wp + pw, img + (ci * h + y) * w, sizeof *padded * (size_t)w);
    src = padded;
  }
  PAR_FOR(blocks > 1 && rows * g->oh * g->ow >= PAR_MIN_WORK)
  for (int64_t bl = 0; bl < blocks; bl++)
    unfold_rows(src, g, col, ld, bl * block, bl * block + block < rows ? bl * block + block : rows);
}

/* How many images one GEMM takes: enough for CONV_MIN_COLS columns (small
 * feature maps make GEMMs too thin to run fast), few enough that the column
 * buffer, CONV_COL_FLOATS (1 MB) at most, and OpenBLAS's packed copy of it
 * stay in a core's L2 cache (2 MB here).  Measured on [128, C, H, W]
 * inputs: from 14x14 up, one or two images per GEMM run as fast as any
 * batching (and whole-batch GEMMs 2x slower: their column buffer leaves
 * the cache); 7x7 maps run 1.5x faster five or six at a time, 3x3 maps 3x
 * faster thirty at a time.  With threads taking batches, fashion_cnn's
 * second layer (800 x 196 floats an image) ran 3% faster a step one image
 * at a time than two (a 2 MB cap). */
#define CONV_MIN_COLS 256
#define CONV_COL_FLOATS ((int64_t)1 << 18)
/* Multiply-adds of a whole convolution (or gradient) below which its
 * images stay on one thread: about 40 us of work, where waking the other
 * threads costs a few.  Above it, images (or batches of them) go to the
 * threads whole, however little each one is: the 1x1 stride-2 shortcut of
 * fashion_resnet, 16 -> 32 channels at 28x28 (200,704 multiply-adds a batch
 * of two images), had its tiny GEMMs cut over the team instead, and its
 * gradients took 3-4x their 1-thread time on 2 threads. */
#define CONV_THREAD_WORK ((int64_t)1 << 20)

/* Whether a * b floats (a, b >= 0) stay within what netrun allocates. */
static bool floats_fit(int64_t a, int64_t b) {
  return a == 0 || b <= (TENSOR_MAX_BYTES / (int64_t)sizeof(float)) / a;
}

/* What fused_conv2d does to each output row as it lands, while the row is
 * still in cache: its channel's bias added, then relu.  The float
 * operations are those of the separate add and relu kernels, so the bits
 * are the same (see rewrite.c). */
typedef struct Epilogue {
  const float *bias;   /* [O], or NULL: none */
  bool relu;
  float *pooled;       /* or NULL: the output's 2x2 max pool, stride 2 */
  double *moments;     /* or NULL: [N, O, 2], each image's sum and squared deviations per
                          channel (vmath_run_moments), for the batch norm that reads Output */
  uint8_t *mask;       /* or NULL (with pooled and relu): [N, O, OH, OW], 1 at each window's
                          pick when positive, where the pool's gradient goes */
} Epilogue;

static bool pool_2x2(const Window *g);
static void max_pool_2x2(const Window *g, const float *xv, float *y);
static void max_pool_2x2_grad(const Window *g, const float *xv, const float *gv, float *d);
static void max_pool_2x2_mask(const Window *g, const float *xv, float *y, uint8_t *mask);

/* The window of a 2x2 max pool, stride 2, over c planes of oh x ow. */
static Window pool_2x2_window(int64_t c, int64_t oh, int64_t ow) {
  return (Window){.n = 1, .c = c, .h = oh, .w = ow, .oh = oh / 2, .ow = ow / 2, .kh = 2, .kw = 2, .sh = 2,
                  .sw = 2, .dh = 1, .dw = 1};
}

/* After image b's channels [ch, ch + rows) of Output ([N, O, OH, OW]),
 * at img, are finished: their pool (and its mask) and their moments, while
 * they are in cache. */
static void pool_rows(const Epilogue *e, const Window *g, int64_t o, int64_t b, int64_t ch, int64_t rows,
                      const float *img) {
  if (!e) return;
  int64_t p = g->oh * g->ow;
  if (e->moments)
    for (int64_t r = ch; r < ch + rows; r++)
      vmath_run_moments_f32(img + (r - ch) * p, p, &e->moments[2 * (b * o + r)], &e->moments[2 * (b * o + r) + 1]);
  if (!e->pooled) return;
  Window pw = pool_2x2_window(rows, g->oh, g->ow);
  int64_t pp = pw.oh * pw.ow;
  if (e->mask) max_pool_2x2_mask(&pw, img, e->pooled + (b * o + ch) * pp, e->mask + (b * o + ch) * p);
  else max_pool_2x2(&pw, img, e->pooled + (b * o + ch) * pp);
}

/* rows rows of p outputs, from src (row stride lds) to dst (row stride
 * ldd), the first of output channel ch; without an epilogue a copy. */
static void finish_rows(const Epilogue *e, int64_t ch, int64_t rows, int64_t p, const float *src,
                        int64_t lds, float *dst, int64_t ldd) {
  /* nothing to do (a batch norm's convolution, in place): return before
   * the loop's parallel region, which even when not taken (inside the
   * image loops) is a call into the OpenMP runtime, once an image */
  if ((!e || (!e->bias && !e->relu)) && src == dst && lds == ldd) return;
  PAR_FOR(rows > 1 && rows * p >= PAR_MIN_WORK)
  for (int64_t r = 0; r < rows; r++) {
    const float *s = src + r * lds;
    float *d = dst + r * ldd;
    if (!e || (!e->bias && !e->relu)) {
      if (d != s) memcpy(d, s, sizeof *d * (size_t)p);
      continue;
    }
    if (!e->bias) {   /* relu alone */
      for (int64_t k = 0; k < p; k++) d[k] = s[k] > 0 || s[k] != s[k] ? s[k] : 0.0f;
      continue;
    }
    float b = e->bias[ch + r];
    if (e->relu) {
      for (int64_t k = 0; k < p; k++) {
        float v = s[k] + b;
        d[k] = v > 0 || v != v ? v : 0.0f;
      }
    } else {
      for (int64_t k = 0; k < p; k++) d[k] = s[k] + b;
    }
  }
}

/* How a convolution's images are cut into batches, one GEMM per (batch,
 * group), and the buffers of each thread working on batches. */
typedef struct ConvBufs {
  float *col;      /* im2col of a batch of images, then (backward) its dCol */
  float *padded;   /* one image's channels inside a zero border */
  float *tmp;      /* a batch's [og, nb*P] result, or its gathered gradient */
} ConvBufs;

typedef struct ConvPlan {
  int64_t cg, og, kk, p, hp, wp;
  int64_t nb, batches;   /* images per batch, and batches */
  bool direct, pad;
  bool spread;           /* batches go to threads, each GEMM whole on its thread; else
                            each GEMM is cut over the team (par_sgemm) */
  int threads;           /* threads that take batches: 1 to par_each_threads() */
  ConvBufs *bufs;        /* [threads] */
} ConvPlan;

/* A 1x1 kernel with stride 1 and no padding: the image is its own column
 * matrix, no im2col. */
static bool conv_direct(const Window *g) {
  return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

/* Fills *pl's batching for conv2d of geometry g (o output channels); false
 * if the unfolded input would be too large.  The batching depends on the
 * geometry alone, never on the thread count, so the results are the same
 * bits on any number of threads. */
static bool conv_plan(const Window *g, int64_t o, int64_t groups, ConvPlan *pl) {
  *pl = (ConvPlan){.cg = g->c / groups, .og = o / groups, .p = g->oh * g->ow, .hp = g->h + 2 * g->ph,
                   .wp = g->w + 2 * g->pw, .threads = 1};
  pl->kk = pl->cg * g->kh * g->kw;
  pl->direct = conv_direct(g);
  pl->pad = g->ph || g->pw;
  if (!floats_fit(pl->kk, pl->p) || (pl->pad && (!floats_fit(pl->hp, pl->wp) || !floats_fit(pl->cg, pl->hp * pl->wp))) ||
      pl->og > INT32_MAX || pl->kk > INT32_MAX || pl->p > INT32_MAX)
    return false;
  int64_t nb = (CONV_MIN_COLS + pl->p - 1) / pl->p;
  if (nb > 1 && nb * pl->kk * pl->p > CONV_COL_FLOATS) nb = CONV_COL_FLOATS / (pl->kk * pl->p);
  if (nb > g->n) nb = g->n;
  if (nb < 1 || pl->direct) nb = 1;
  pl->nb = nb;
  pl->batches = (g->n + nb - 1) / nb;
  return true;
}

/* Decides who runs the batches, cut into `units` that threads may take
 * (batches, or slices of them), and allocates each thread's buffers; tmp:
 * a result buffer even for batches of one image (the backward's gathered
 * gradient).  Units go to threads when there are two or more and the
 * convolution does enough work (CONV_THREAD_WORK): each thread then runs its own im2col,
 * GEMMs, col2im and epilogue, whose copies stay in that core's cache, and
 * no GEMM waits on a split of its own.  Batches of huge columns (over
 * 8 MB) stay together, their GEMMs spread over the threads: a buffer each
 * would cost too much memory, and GEMMs that large split well. */
static void conv_plan_threads(ConvPlan *pl, int64_t units, bool tmp) {
  int64_t colf = pl->kk * pl->p * pl->nb;
  /* in double: the product of three sizes may pass int64 */
  pl->spread = units > 1 && (double)pl->og * (double)colf * (double)pl->batches >= (double)CONV_THREAD_WORK &&
               colf <= 8 * CONV_COL_FLOATS;
  if (pl->spread) {
    int t = par_each_threads();
    pl->threads = t < units ? t : (int)units;
  }
  pl->bufs = mem_line_calloc((size_t)pl->threads, sizeof *pl->bufs);
  for (int t = 0; t < pl->threads; t++) {
    ConvBufs *b = &pl->bufs[t];
    if (!pl->direct) b->col = mem_line_alloc(sizeof *b->col * (size_t)colf);
    if (pl->pad) b->padded = mem_line_calloc((size_t)(pl->cg * pl->hp * pl->wp), sizeof *b->padded);
    if (pl->nb > 1 || tmp) b->tmp = mem_line_alloc(sizeof *b->tmp * (size_t)(pl->og * pl->p * pl->nb));
  }
}

static void conv_plan_free(ConvPlan *pl) {
  for (int t = 0; t < pl->threads; t++) {
    mem_line_free(pl->bufs[t].col);
    mem_line_free(pl->bufs[t].padded);
    mem_line_free(pl->bufs[t].tmp);
  }
  mem_line_free(pl->bufs);
}

static int conv_too_large(ExecCtx *c, const Window *g, int64_t groups) {
  return exec_ctx_fail(c, "the unfolded input ([%lld, %lld] per image) is too large",
                       (long long)(g->c / groups * g->kh * g->kw), (long long)(g->oh * g->ow));
}

/* One of a plan's GEMMs (alpha 1): whole, on its thread, when batches go
 * to threads, else cut into parts over the team (par_sgemm).  Which one
 * depends on the geometry alone, never on the team, so the bits do not
 * either. */
static void conv_gemm(const ConvPlan *pl, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  if (pl->spread)
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                (int)k, 1.0f, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
  else
    par_sgemm(ta, tb, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/* Output[b, g*og + o, :] = Filter_g[o, :] . im2col(Input[b, g*cg .. ]) for
 * the images of batch bi, each group g: one sgemm per group.  A single
 * image's result lands in Output directly; a batch's [og, nb*P] result is
 * scattered to its images.  A 1x1 kernel with stride 1 and no padding needs
 * no im2col: the image is its own column matrix.  e (or NULL) is applied to
 * each batch's rows after its GEMM. */
static void conv_batch(const ConvPlan *pl, const Window *g, int64_t o, int64_t groups, int64_t bi,
                       const float *in, const float *filt, float *out, const Epilogue *e, ConvBufs *buf) {
  int64_t og = pl->og, cg = pl->cg, kk = pl->kk, p = pl->p, b0 = bi * pl->nb;
  int64_t m = g->n - b0 < pl->nb ? g->n - b0 : pl->nb, cols = m * p;
  if (exec_interrupted()) return;   /* Ctrl-C between batches of images (the executor fails the op) */
  for (int64_t gi = 0; gi < groups; gi++) {
    const float *a = filt + gi * og * kk, *bm = buf->col;
    for (int64_t b = 0; b < m; b++) {
      const float *img = in + ((b0 + b) * g->c + gi * cg) * g->h * g->w;
      if (pl->direct) bm = img;
      else im2col(img, cg, g, buf->padded, buf->col + b * p, cols);
    }
    float *dst = m == 1 ? out + (b0 * o + gi * og) * p : buf->tmp;
    conv_gemm(pl, false, false, og, cols, kk, a, kk, bm, cols, 0.0f, dst, cols);
    if (m == 1) {
      if (e) finish_rows(e, gi * og, og, p, dst, p, dst, p);
      pool_rows(e, g, o, b0, gi * og, og, out + (b0 * o + gi * og) * p);
      continue;
    }
    for (int64_t b = 0; b < m; b++) {
      finish_rows(e, gi * og, og, p, buf->tmp + b * p, cols, out + ((b0 + b) * o + gi * og) * p, p);
      pool_rows(e, g, o, b0 + b, gi * og, og, out + ((b0 + b) * o + gi * og) * p);
    }
  }
}

/* ---- direct convolutions ------------------------------------------------------------
 * conv2d of one group without dilation (conv_direct_ok) runs without
 * im2col, without col2im and without OpenBLAS's copies of its operands.
 * Each image is copied once into a zero border ([C, H+2ph, W+2pw], each
 * channel's plane followed by a few zeros), and the kernels read its taps
 * in place: output position (y, x) reads tap (c, i, j) at
 * c*cs + (y*sh + i)*wp + x*sw + j.  Two layouts of the work (DirOut):
 *   pv: for stride 1 and padding that keeps the size (conv_same: the 3x3
 *       and 5x5 layers of ResNets and LeNets) on images of over 256
 *       positions, the output is computed in rows of the padded width,
 *       q = y*wp + x, so every tap is one contiguous run of the padded
 *       image (the wp - W columns past each row's end are computed and
 *       dropped); 4 output rows x 24 positions, or 4 rows x 3 filter taps,
 *       in twelve registers;
 *   cv: otherwise, at the list of the output's positions, 16 output rows
 *       x 6 positions (or 16 rows x 6 taps) a tile, the input broadcast.
 * The gradients:
 *   dFilter[o, c, i, j] = sum over positions of dOut[o, q] . image[tap + q]
 *             (pv: dOut in rows of the padded width, its extra columns
 *             zero; cv: dOut with its 16 rows side by side at each position);
 *   dInput  = for conv_same, the same convolution of dOut (in a border of
 *             kh-1-ph = ph) with the filter turned 180 degrees, its in and
 *             out channels swapped; for other geometries of 16 input
 *             channels or more, such convolutions over the stride's phases
 *             (DirDx); else through GEMMs (conv_direct_dx).
 * The kernels use AVX2 and FMA, picked at run time; other machines take
 * the GEMM path.  Each output is one running sum over the taps in order
 * (dFilter: over the positions, pv in eight lanes added up in a fixed
 * order, image after image), and images go to threads whole, so the bits
 * are the same on any number of threads.  Measured against im2col + GEMM
 * in doc/speed.md. */

#define DIR_QB 24   /* output positions per forward tile: three vectors */
#define DIR_PAD 8   /* zeros after each channel's padded plane */

typedef struct DirGeom {
  int64_t hp, wp, cs;   /* padded sides; a channel's stride: hp*wp + DIR_PAD */
  int64_t q, q8;        /* positions of the output in padded-width rows (oh*wp),
                           and rounded up to a vector */
} DirGeom;

/* Whether the kernels run in AVX-512 (dir_rows_z and the others): the CPU
 * has it, and NETRUN_TEST_ISA=avx2 (tests, benchmarks) does not keep them
 * in AVX2.  Decided by dir_cpu, on the thread that asks whether a
 * convolution takes the kernels, before any of them runs on the team. */
static int dir_z_ok = -1;
static bool dir_z(void) { return dir_z_ok > 0; }

/* What an image loop reads and writes next (the next image's input,
 * dOut, output) is asked of the cache (L2) a few lines between the
 * kernels' tiles (ahead_step), so that the next image's fill finds its
 * input there, and its stores their lines, instead of waiting on memory.
 * Up to six ranges per thread, set by ahead_clear and ahead_add before
 * an image's products.  Prefetches change no value and never fault: what
 * a loop leaves on a thread when it ends (an image's worth at most) is
 * only asked for by the next kernel there.  The next image is b + threads
 * (PAR_EACH hands images out in turn; not always this thread's) or the
 * slice's next.  Measured in doc/speed.md. */
#define AHEAD_RANGES 6
typedef struct Ahead {
  const char *p[AHEAD_RANGES];
  int64_t n[AHEAD_RANGES];   /* bytes left of each */
  bool write[AHEAD_RANGES];
  int at, count;
} Ahead;
static _Thread_local Ahead ahead;

static void ahead_clear(void) { ahead.at = ahead.count = 0; }

/* n floats at p (none: p NULL), to be read or written */
static void ahead_add(const float *p, int64_t n, bool write) {
  if (!p || n <= 0 || ahead.count == AHEAD_RANGES) return;
  ahead.p[ahead.count] = (const char *)p;
  ahead.n[ahead.count] = n * (int64_t)sizeof(float);
  ahead.write[ahead.count++] = write;
}

/* AHEAD_LINES cache lines of what is left, between two tiles of a kernel
 * (each a thousand cycles or more of multiply-adds). */
#define AHEAD_LINES 16
static inline void ahead_step(void) {
  while (ahead.at < ahead.count && ahead.n[ahead.at] <= 0) ahead.at++;
  if (ahead.at == ahead.count) return;
  int i = ahead.at;
  for (int l = 0; l < AHEAD_LINES && ahead.n[i] > 0; l++, ahead.p[i] += 64, ahead.n[i] -= 64)
    if (ahead.write[i]) __builtin_prefetch(ahead.p[i], 1, 2);
    else __builtin_prefetch(ahead.p[i], 0, 2);
}

/* Whether this machine runs the kernels; NETRUN_TEST_CONV=gemm (tests and
 * benchmarks only) sends every convolution down the GEMM path instead. */
static bool dir_cpu(void) {
  static int ok = -1;
  if (ok < 0) {
    const char *v = getenv("NETRUN_TEST_CONV"), *isa = getenv("NETRUN_TEST_ISA");
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    dir_z_ok = ok && __builtin_cpu_supports("avx512f") && !(isa && strcmp(isa, "avx2") == 0);
#else
    ok = 0;
    (void)isa;
#endif
    if (v && strcmp(v, "gemm") == 0) ok = 0;
  }
  return ok;
}

static DirGeom dir_geom(const Window *g) {
  DirGeom s = {.hp = g->h + 2 * g->ph, .wp = g->w + 2 * g->pw};
  s.cs = s.hp * s.wp + DIR_PAD;
  s.q = g->oh * s.wp;
  s.q8 = (s.q + 7) / 8 * 8;
  return s;
}

/* Floats of a padded buffer of c channels: the kernels read up to q8
 * past the last channel's first tap. */
static int64_t dir_len(const DirGeom *s, int64_t c) { return c * s->cs + s->q8 + 8; }

/* conv2d of geometry g (o output channels, groups) takes the direct path
 * forward and for the filter's gradient: one group, no dilation, any
 * stride and padding, any kernel but a 1x1 of stride 1 (its image is its
 * own column matrix: a GEMM with no copy).  A 1x1 kernel of stride 2 (a
 * ResNet's shortcut, 16 -> 32 channels at 28x28 and 32 -> 64 at 14x14,
 * batch 128, 1 thread) took 0.58x and 0.46x the GEMM path's time forward
 * over the positions it reads (dir_sub), and its gradients 0.76x and
 * 0.88x, the phases no tap reaches zeroed at once (dir_dx_image). */
static bool conv_direct_ok(const Window *g, int64_t o, int64_t groups) {
  if (groups != 1 || g->dh != 1 || g->dw != 1 || (g->kh * g->kw == 1 && g->sh == 1 && g->sw == 1) || !dir_cpu())
    return false;
  DirGeom s = dir_geom(g);
  int64_t c = g->c > o ? g->c : o;
  /* offsets are int32; a plane's buffers stay within what netrun allocates */
  return s.hp <= INT32_MAX / s.wp && c <= (INT32_MAX - s.q8 - 8) / s.cs &&
         (TENSOR_MAX_BYTES / (int64_t)sizeof(float)) / s.cs >= c + 1;
}

/* A convolution of stride 1 whose padding keeps the size (kernels of 3
 * and up). */
static bool conv_same(const Window *g) {
  return g->sh == 1 && g->sw == 1 && g->kh >= 3 && g->kw >= 3 && 2 * g->ph == g->kh - 1 &&
         2 * g->pw == g->kw - 1 && g->oh == g->h && g->ow == g->w;
}


/* The filter [o, c, kh, kw] packed in panels of w (4 or 16) output rows,
 * a panel's w floats side by side for each tap: a[(r/w)*K + k][r%w], rows
 * past o zero.  flip: the filter for dInput instead, its rows the c input
 * channels and its taps (o, kh-1-i, kw-1-j). */
static float *dir_pack(const float *f, int64_t o, int64_t c, int64_t kh, int64_t kw, bool flip, int64_t w) {
  int64_t rows = flip ? c : o, k = (flip ? o : c) * kh * kw, rw = (rows + w - 1) / w * w;
  float *a = mem_line_calloc((size_t)(rw * k), sizeof *a);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t t = 0; t < k; t++) {
      float v;
      if (flip) {
        int64_t oc = t / (kh * kw), i = t / kw % kh, j = t % kw;
        v = f[((oc * c + r) * kh + (kh - 1 - i)) * kw + (kw - 1 - j)];
      } else {
        v = f[r * k + t];
      }
      a[(r / w * k + t) * w + r % w] = v;
    }
  return a;
}

/* Tap t = (channel, i, j) of c channels at offset channel*cs + i*wp + j,
 * the list padded with zeros to a multiple of 6 (the filter kernels take
 * 3 or 6 taps at a time). */
static int32_t *dir_offsets(const DirGeom *s, int64_t c, int64_t kh, int64_t kw) {
  int64_t k = c * kh * kw, k6 = (k + 5) / 6 * 6;
  int32_t *off = mem_line_calloc((size_t)k6, sizeof *off);
  for (int64_t t = 0; t < k; t++) off[t] = (int32_t)(t / (kh * kw) * s->cs + t / kw % kh * s->wp + t % kw);
  return off;
}

/* c channels of an image ([c, H, W]) into the middle of pad, whose border
 * stays zero. */
SIMD_CLONES static void dir_fill(const DirGeom *s, const Window *g, int64_t c, const float *img, float *pad) {
  for (int64_t ch = 0; ch < c; ch++)
    for (int64_t y = 0; y < g->h; y++)
      copy_run(pad + ch * s->cs + (y + g->ph) * s->wp + g->pw, img + (ch * g->h + y) * g->w, g->w);
}

/* A 1x1 kernel of stride 2 or more without padding reads one input
 * position in sh*sw: the direct path runs it as the 1x1 kernel of stride
 * 1 over the positions it reads (dir_sub's window), gathered (dir_gather)
 * instead of the whole image copied. */
static bool dir_strided_1x1(const Window *g) {
  return g->kh == 1 && g->kw == 1 && (g->sh > 1 || g->sw > 1) && g->ph == 0 && g->pw == 0;
}

/* The window the direct path computes for g: g itself, or for a strided
 * 1x1 kernel that over the gathered positions (oh x ow, stride 1). */
static Window dir_sub(const Window *g) {
  Window w = *g;
  if (dir_strided_1x1(g)) w.h = g->oh, w.w = g->ow, w.sh = w.sw = 1;
  return w;
}

/* c channels of an image ([c, H, W]) into pad as dir_fill would put those
 * of dir_sub(g)'s gathered image. */
SIMD_CLONES static void dir_gather(const DirGeom *s, const Window *g, int64_t c, const float *img, float *pad) {
  const int64_t oh = g->oh, ow = g->ow, sh = g->sh, sw = g->sw, h = g->h, w = g->w, cs = s->cs;
  for (int64_t ch = 0; ch < c; ch++)
    for (int64_t y = 0; y < oh; y++) {
      const float *src = img + (ch * h + y * sh) * w;
      float *dst = pad + ch * cs + y * ow;
      for (int64_t x = 0; x < ow; x++) dst[x] = src[x * sw];
    }
}

/* An image's channels into the direct path's padded buffer: dir_fill, or
 * for a strided 1x1 kernel (g the original window) dir_gather. */
static void dir_load(const DirGeom *s, const Window *g, int64_t c, const float *img, float *pad) {
  if (dir_strided_1x1(g)) dir_gather(s, g, c, img, pad);
  else dir_fill(s, g, c, img, pad);
}

/* rows rows of t (row stride q8, padded width) into dst ([rows, OH, OW]). */
SIMD_CLONES static void dir_unpad(const DirGeom *s, const Window *g, int64_t rows, const float *t, float *dst) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t y = 0; y < g->oh; y++) copy_run(dst + (r * g->oh + y) * g->ow, t + r * s->q8 + y * s->wp, g->ow);
}

/* Where position q of a tap lies in the rows dir_rows reads: positions in
 * groups of 16, a group every gs floats (16: one after the other;
 * Winograd's V keeps its 16 parts of a group side by side). */
static inline int64_t dir_at(int64_t q, int64_t gs) {
  return (q >> 4) * gs + (q & 15);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define DIR_TARGET __attribute__((target("avx2,fma")))

/* t[r, 0..8*nv) = sum over taps i in order of a[i][r] * s[off[i] + dir_at(q + 0..8*nv, gs)], r < 4
 * (q a multiple of 8) */
DIR_TARGET static inline __attribute__((always_inline)) void dir_tile_n(const float *a, const float *s, int64_t q,
                                                                         int64_t gs, const int32_t *off, int64_t k,
                                                                         float *t, int64_t ldt, int nv) {
  __m256 c[4][3];
  const float *sv[3];
  for (int v = 0; v < nv; v++) sv[v] = s + dir_at(q + 8 * v, gs);
  for (int r = 0; r < 4; r++)
    for (int v = 0; v < nv; v++) c[r][v] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; i++, a += 4) {
    __m256 b[3];
    for (int v = 0; v < nv; v++) b[v] = _mm256_loadu_ps(sv[v] + off[i]);
    for (int r = 0; r < 4; r++) {
      __m256 w = _mm256_broadcast_ss(a + r);
      for (int v = 0; v < nv; v++) c[r][v] = _mm256_fmadd_ps(w, b[v], c[r][v]);
    }
  }
  for (int r = 0; r < 4; r++)
    for (int v = 0; v < nv; v++) _mm256_storeu_ps(t + r * ldt + 8 * v, c[r][v]);
}

/* The same tile in AVX-512: np panels of 4 rows by nv vectors of 16
 * positions, the last vector's lanes past the tile's end (mask last)
 * neither read nor written.  Each position's sum runs over the taps in
 * order, one fused multiply-add each, as dir_tile_n's: the same bits, with
 * twice the positions an instruction (on CPUs that run 512-bit vectors at
 * full width, AMD's Zen 5 among them, twice the rate).  Short rows (a 7x7
 * image's 16 Winograd tiles) take more panels, so that a vector loaded
 * serves 16 rows. */
#define DIR512_TARGET __attribute__((target("avx512f,avx2,fma")))
DIR512_TARGET static inline __attribute__((always_inline)) void dir_tile_z(const float *a, const float *s,
                                                                            int64_t gs, const int32_t *off, int64_t k,
                                                                            float *t, int64_t ldt, int np, int nv,
                                                                            __mmask16 last) {
  __m512 c[16][4];
  const float *sv[4];
  for (int v = 0; v < nv; v++) sv[v] = s + v * gs;
  for (int r = 0; r < 4 * np; r++)
    for (int v = 0; v < nv; v++) c[r][v] = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; i++, a += 4) {
    __m512 b[4];
    for (int v = 0; v < nv; v++)
      b[v] = v == nv - 1 ? _mm512_maskz_loadu_ps(last, sv[v] + off[i]) : _mm512_loadu_ps(sv[v] + off[i]);
    for (int r = 0; r < 4 * np; r++) {
      __m512 w = _mm512_set1_ps(a[r / 4 * 4 * k + r % 4]);
      for (int v = 0; v < nv; v++) c[r][v] = _mm512_fmadd_ps(w, b[v], c[r][v]);
    }
  }
  for (int r = 0; r < 4 * np; r++)
    for (int v = 0; v < nv; v++)
      if (v == nv - 1) _mm512_mask_storeu_ps(t + r * ldt + 16 * v, last, c[r][v]);
      else _mm512_storeu_ps(t + r * ldt + 16 * v, c[r][v]);
}

/* Rows r0 to rows4 of one tile of nv vectors, np panels at a time. */
#define DIR_Z_ROWS(NP, NV)                                                                      \
  for (; r + 4 * (NP) <= rows4; r += 4 * (NP))                                                  \
    ahead_step(), dir_tile_z(a + r * k, s + dir_at(q, gs), gs, off, k, t + r * ldt + q, ldt, NP, NV, last)
#define DIR_Z_TILE(NP, NV)                                                                      \
  do {                                                                                          \
    int64_t r = 0;                                                                              \
    DIR_Z_ROWS(NP, NV);                                                                         \
    if ((NP) > 2) DIR_Z_ROWS((NP) > 2 ? 2 : 1, NV);                                             \
    if ((NP) > 1) DIR_Z_ROWS(1, NV);                                                            \
  } while (0)

/* dir_rows in AVX-512 (dir_z): tiles of 64 positions (4 rows), the last of
 * 8 to 64 (up to 16 rows: 16 accumulators). */
DIR512_TARGET static void dir_rows_z(const float *a, int64_t rows4, const float *s, int64_t gs, const int32_t *off,
                                     int64_t k, int64_t n, float *t, int64_t ldt) {
  int64_t q = 0;
  __mmask16 last = 0xFFFF;
  for (; q + 64 <= n; q += 64) DIR_Z_TILE(1, 4);
  int64_t rem = n - q;
  if (rem <= 0) return;
  if (rem % 16) last = (__mmask16)((1u << (rem % 16)) - 1);
  switch ((rem + 15) / 16) {
  case 1: DIR_Z_TILE(4, 1); break;
  case 2: DIR_Z_TILE(2, 2); break;
  case 3: DIR_Z_TILE(1, 3); break;
  default: DIR_Z_TILE(1, 4); break;
  }
}
#undef DIR_Z_TILE
#undef DIR_Z_ROWS


/* t[r, 0..n) for the rows4 (a multiple of 4) rows of the packed filter a,
 * over the k taps off of the padded image s, its positions in groups of
 * 16 every gs floats (dir_at): tiles of 24 positions, the last of 8 or 16
 * (n is a multiple of 8). */
DIR_TARGET static void dir_rows(const float *a, int64_t rows4, const float *s, int64_t gs, const int32_t *off,
                                int64_t k, int64_t n, float *t, int64_t ldt) {
  if (dir_z()) {
    dir_rows_z(a, rows4, s, gs, off, k, n, t, ldt);
    return;
  }
  int64_t q = 0;
  for (; q + DIR_QB <= n; q += DIR_QB)
    for (int64_t r = 0; r < rows4; r += 4) ahead_step(), dir_tile_n(a + r * k, s, q, gs, off, k, t + r * ldt + q, ldt, 3);
  if (q + 16 == n)
    for (int64_t r = 0; r < rows4; r += 4) dir_tile_n(a + r * k, s, q, gs, off, k, t + r * ldt + q, ldt, 2);
  else if (q + 8 == n)
    for (int64_t r = 0; r < rows4; r += 4) dir_tile_n(a + r * k, s, q, gs, off, k, t + r * ldt + q, ldt, 1);
}

/* v's eight lanes added up: (0+4, 1+5, 2+6, 3+7), then pairs, then the two */
DIR_TARGET static inline float dir_hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(x, _mm_shuffle_ps(x, x, 1)));
}

/* dw[r, j] += sum over images i < m, then positions q < n (a multiple of
 * 8), of d[r][i*ds + q] * s[i*ss + off[j] + q], r < 4, j < 3: each lane a
 * running sum, the lanes added up at the end. */
DIR_TARGET static void dir_filter_tile(const float *const d[4], int64_t ds, const float *s, int64_t ss,
                                         const int32_t *off, int64_t n, int64_t m, float *dw, int64_t ldw) {
  /* named accumulators, as in cv_tile */
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00, c20 = c00,
         c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
  for (int64_t i = 0; i < m; i++) {
    const float *s0 = s + i * ss + off[0], *s1 = s + i * ss + off[1], *s2 = s + i * ss + off[2];
    const float *d0 = d[0] + i * ds, *d1 = d[1] + i * ds, *d2 = d[2] + i * ds, *d3 = d[3] + i * ds;
    for (int64_t q = 0; q < n; q += 8) {
      __m256 b0 = _mm256_loadu_ps(s0 + q), b1 = _mm256_loadu_ps(s1 + q), b2 = _mm256_loadu_ps(s2 + q), g;
#define PV_STEP(D, C0, C1, C2)                                                                            \
  g = _mm256_loadu_ps(D + q), C0 = _mm256_fmadd_ps(g, b0, C0), C1 = _mm256_fmadd_ps(g, b1, C1), \
  C2 = _mm256_fmadd_ps(g, b2, C2)
      PV_STEP(d0, c00, c01, c02);
      PV_STEP(d1, c10, c11, c12);
      PV_STEP(d2, c20, c21, c22);
      PV_STEP(d3, c30, c31, c32);
#undef PV_STEP
    }
  }
  dw[0] += dir_hsum(c00), dw[1] += dir_hsum(c01), dw[2] += dir_hsum(c02);
  dw += ldw;
  dw[0] += dir_hsum(c10), dw[1] += dir_hsum(c11), dw[2] += dir_hsum(c12);
  dw += ldw;
  dw[0] += dir_hsum(c20), dw[1] += dir_hsum(c21), dw[2] += dir_hsum(c22);
  dw += ldw;
  dw[0] += dir_hsum(c30), dw[1] += dir_hsum(c31), dw[2] += dir_hsum(c32);
}

/* dir_filter_tile in AVX-512 for nt (3, 6 or 9) taps: a vector holds two
 * rows' eight lanes, so each loaded input serves eight sums (dir_filter_tile:
 * four).  Each lane's running sum takes the same terms in the same order,
 * and the lanes are added up as dir_hsum does: dir_filter_tile's bits. */
DIR512_TARGET static inline __attribute__((always_inline)) void dir_filter_zt(const float *const d[4], int64_t ds,
                                                                               const float *s, int64_t ss,
                                                                               const int32_t *off, int nt, int64_t n,
                                                                               int64_t m, float *dw, int64_t ldw) {
  __m512 c[2][9];
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < nt; j++) c[h][j] = _mm512_setzero_ps();
  for (int64_t i = 0; i < m; i++) {
    const float *d0 = d[0] + i * ds, *d1 = d[1] + i * ds, *d2 = d[2] + i * ds, *d3 = d[3] + i * ds;
    const float *sj[9];
    for (int j = 0; j < nt; j++) sj[j] = s + i * ss + off[j];
    for (int64_t q = 0; q < n; q += 8) {
      /* rows 0 and 1 in one vector, 2 and 3 in the other */
      __m512 g0 = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(d0 + q))),
                                                      _mm256_castps_pd(_mm256_loadu_ps(d1 + q)), 1));
      __m512 g1 = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(d2 + q))),
                                                      _mm256_castps_pd(_mm256_loadu_ps(d3 + q)), 1));
      for (int j = 0; j < nt; j++) {
        __m512 b = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(sj[j] + q))));
        c[0][j] = _mm512_fmadd_ps(g0, b, c[0][j]);
        c[1][j] = _mm512_fmadd_ps(g1, b, c[1][j]);
      }
    }
  }
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < nt; j++) {
      __m512d v = _mm512_castps_pd(c[h][j]);
      dw[2 * h * ldw + j] += dir_hsum(_mm256_castpd_ps(_mm512_castpd512_pd256(v)));
      dw[(2 * h + 1) * ldw + j] += dir_hsum(_mm256_castpd_ps(_mm512_extractf64x4_pd(v, 1)));
    }
}

/* dir_filter_tile over nt taps (a multiple of 3, at most 9): off[0..nt),
 * dw[r, 0..nt); three at a time, or all at once in AVX-512 (dir_z). */
DIR512_TARGET static void dir_filter_z(const float *const d[4], int64_t ds, const float *s, int64_t ss,
                                       const int32_t *off, int nt, int64_t n, int64_t m, float *dw, int64_t ldw) {
  if (nt == 9) dir_filter_zt(d, ds, s, ss, off, 9, n, m, dw, ldw);
  else if (nt == 6) dir_filter_zt(d, ds, s, ss, off, 6, n, m, dw, ldw);
  else dir_filter_zt(d, ds, s, ss, off, 3, n, m, dw, ldw);
}

DIR_TARGET static void dir_filter_taps(const float *const d[4], int64_t ds, const float *s, int64_t ss,
                                       const int32_t *off, int nt, int64_t n, int64_t m, float *dw, int64_t ldw) {
  if (dir_z()) {
    dir_filter_z(d, ds, s, ss, off, nt, n, m, dw, ldw);
    return;
  }
  for (int j = 0; j < nt; j += 3) dir_filter_tile(d, ds, s, ss, off + j, n, m, dw + j, ldw);
}

/* Small images (channel-vectorized): t[j][0..16) = sum over taps i in order
 * of a[i][0..16) * s[pos[j] + off[i]], for the 6 output positions pos[j]:
 * 16 output rows in two vectors, each position's input broadcast. */
DIR_TARGET static void cv_tile(const float *a, const float *s, const int32_t *off, int64_t k,
                                const int32_t *pos, float *t) {
  /* named accumulators: as an array, GCC stores them to the stack each turn */
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
         c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float *p0 = s + pos[0], *p1 = s + pos[1], *p2 = s + pos[2], *p3 = s + pos[3], *p4 = s + pos[4],
              *p5 = s + pos[5];
  for (int64_t i = 0; i < k; i++, a += 16) {
    __m256 a0 = _mm256_loadu_ps(a), a1 = _mm256_loadu_ps(a + 8), b;
    int64_t o = off[i];
#define CV_STEP(P, C0, C1) \
  b = _mm256_broadcast_ss(P + o), C0 = _mm256_fmadd_ps(a0, b, C0), C1 = _mm256_fmadd_ps(a1, b, C1)
    CV_STEP(p0, c00, c01);
    CV_STEP(p1, c10, c11);
    CV_STEP(p2, c20, c21);
    CV_STEP(p3, c30, c31);
    CV_STEP(p4, c40, c41);
    CV_STEP(p5, c50, c51);
#undef CV_STEP
  }
  _mm256_storeu_ps(t, c00), _mm256_storeu_ps(t + 8, c01), _mm256_storeu_ps(t + 16, c10);
  _mm256_storeu_ps(t + 24, c11), _mm256_storeu_ps(t + 32, c20), _mm256_storeu_ps(t + 40, c21);
  _mm256_storeu_ps(t + 48, c30), _mm256_storeu_ps(t + 56, c31), _mm256_storeu_ps(t + 64, c40);
  _mm256_storeu_ps(t + 72, c41), _mm256_storeu_ps(t + 80, c50), _mm256_storeu_ps(t + 88, c51);
}

/* cv_tile in AVX-512 for npan (1 or 2) panels of 16 rows at once: panel
 * p's filter at a + p apan, its outputs at t + p tpan.  Each sum runs over
 * the taps in order, one fused multiply-add each: cv_tile's bits. */
DIR512_TARGET static inline __attribute__((always_inline)) void cv_tile_zn(const float *a, int64_t apan,
                                                                            const float *s, const int32_t *off,
                                                                            int64_t k, const int32_t *pos, float *t,
                                                                            int64_t tpan, int npan) {
  __m512 c[2][6];
  for (int p = 0; p < npan; p++)
    for (int j = 0; j < 6; j++) c[p][j] = _mm512_setzero_ps();
  const float *pj[6] = {s + pos[0], s + pos[1], s + pos[2], s + pos[3], s + pos[4], s + pos[5]};
  for (int64_t i = 0; i < k; i++, a += 16) {
    __m512 a0 = _mm512_loadu_ps(a), a1 = npan > 1 ? _mm512_loadu_ps(a + apan) : a0;
    int64_t o = off[i];
    for (int j = 0; j < 6; j++) {
      __m512 b = _mm512_set1_ps(pj[j][o]);
      c[0][j] = _mm512_fmadd_ps(a0, b, c[0][j]);
      if (npan > 1) c[1][j] = _mm512_fmadd_ps(a1, b, c[1][j]);
    }
  }
  for (int p = 0; p < npan; p++)
    for (int j = 0; j < 6; j++) _mm512_storeu_ps(t + p * tpan + 16 * j, c[p][j]);
}

DIR512_TARGET static void cv_rows_z(const float *a, int64_t rows16, const float *s, const int32_t *off, int64_t k,
                                    const int32_t *pos, int64_t np, float *t) {
  for (int64_t r = 0; r < rows16; r += 32)
    for (int64_t j = 0; j < np; j += 6) {
      float *tr = t + (r / 16 * np + j) * 16;
      ahead_step();
      if (rows16 - r > 16) cv_tile_zn(a + r * k, 16 * k, s, off, k, pos + j, tr, 16 * np, 2);
      else cv_tile_zn(a + r * k, 16 * k, s, off, k, pos + j, tr, 16 * np, 1);
    }
}

/* t[(r/16)*np + j][r%16] for the rows16 rows of the packed filter a (panels
 * of 16) at the np (a multiple of 6) positions pos of s. */
DIR_TARGET static void cv_rows(const float *a, int64_t rows16, const float *s, const int32_t *off, int64_t k,
                                const int32_t *pos, int64_t np, float *t) {
  if (dir_z()) {
    cv_rows_z(a, rows16, s, off, k, pos, np, t);
    return;
  }
  for (int64_t r = 0; r < rows16; r += 16)
    for (int64_t j = 0; j < np; j += 6) {
      ahead_step();
      cv_tile(a + r * k, s, off, k, pos + j, t + (r / 16 * np + j) * 16);
    }
}

/* dw[j][0..16) += sum over images i < m, then positions p < np, of
 * d[i*ds + p*16 + 0..16) * s[i*ss + pos[p] + off[j]], j < 6: dOut's 16
 * rows side by side at each position, the input broadcast. */
DIR_TARGET static void cv_filter_tile(const float *d, int64_t ds, const float *s, int64_t ss, const int32_t *off,
                                       const int32_t *pos, int64_t np, int64_t m, float *dw) {
  /* named accumulators, as in cv_tile */
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
         c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const int64_t o0 = off[0], o1 = off[1], o2 = off[2], o3 = off[3], o4 = off[4], o5 = off[5];
  for (int64_t i = 0; i < m; i++) {
    const float *di = d + i * ds, *si = s + i * ss;
    for (int64_t q = 0; q < np; q++) {
      __m256 d0 = _mm256_loadu_ps(di + 16 * q), d1 = _mm256_loadu_ps(di + 16 * q + 8), b;
      const float *x = si + pos[q];
#define CV_STEP(O, C0, C1) \
  b = _mm256_broadcast_ss(x + O), C0 = _mm256_fmadd_ps(d0, b, C0), C1 = _mm256_fmadd_ps(d1, b, C1)
      CV_STEP(o0, c00, c01);
      CV_STEP(o1, c10, c11);
      CV_STEP(o2, c20, c21);
      CV_STEP(o3, c30, c31);
      CV_STEP(o4, c40, c41);
      CV_STEP(o5, c50, c51);
#undef CV_STEP
    }
  }
#define CV_ADD(J, C0, C1)                                                              \
  _mm256_storeu_ps(dw + 16 * J, _mm256_add_ps(_mm256_loadu_ps(dw + 16 * J), C0)),      \
      _mm256_storeu_ps(dw + 16 * J + 8, _mm256_add_ps(_mm256_loadu_ps(dw + 16 * J + 8), C1))
  CV_ADD(0, c00, c01);
  CV_ADD(1, c10, c11);
  CV_ADD(2, c20, c21);
  CV_ADD(3, c30, c31);
  CV_ADD(4, c40, c41);
  CV_ADD(5, c50, c51);
#undef CV_ADD
}

/* cv_filter_tile in AVX-512 for npan (1 or 2) panels of 16 rows at once
 * (m = 1): panel p's dOut at d + p dpan, its sums at dw + p wpan.  One
 * vector holds a panel's 16 rows, so each broadcast input serves 32 rows;
 * each sum runs over the positions in order, one fused multiply-add each,
 * as cv_filter_tile's: the same bits. */
DIR512_TARGET static inline __attribute__((always_inline)) void cv_filter_zn(const float *d, int64_t dpan,
                                                                              const float *s, const int32_t *off,
                                                                              const int32_t *pos, int64_t np,
                                                                              float *dw, int64_t wpan, int npan) {
  __m512 c[2][6];
  for (int p = 0; p < npan; p++)
    for (int j = 0; j < 6; j++) c[p][j] = _mm512_setzero_ps();
  const int64_t oj[6] = {off[0], off[1], off[2], off[3], off[4], off[5]};
  for (int64_t q = 0; q < np; q++) {
    __m512 d0 = _mm512_loadu_ps(d + 16 * q), d1 = npan > 1 ? _mm512_loadu_ps(d + dpan + 16 * q) : d0;
    const float *x = s + pos[q];
    for (int j = 0; j < 6; j++) {
      __m512 b = _mm512_set1_ps(x[oj[j]]);
      c[0][j] = _mm512_fmadd_ps(d0, b, c[0][j]);
      if (npan > 1) c[1][j] = _mm512_fmadd_ps(d1, b, c[1][j]);
    }
  }
  for (int p = 0; p < npan; p++)
    for (int j = 0; j < 6; j++) {
      float *w = dw + p * wpan + 16 * j;
      _mm512_storeu_ps(w, _mm512_add_ps(_mm512_loadu_ps(w), c[p][j]));
    }
}

DIR512_TARGET static void cv_filter_z(const float *d, int64_t dpan, const float *s, const int32_t *off,
                                      const int32_t *pos, int64_t np, float *dw, int64_t wpan, int npan) {
  if (npan > 1) cv_filter_zn(d, dpan, s, off, pos, np, dw, wpan, 2);
  else cv_filter_zn(d, dpan, s, off, pos, np, dw, wpan, 1);
}

/* cv_filter_tile (m = 1) for npan panels: panel p's dOut at d + p dpan,
 * its sums at dw + p wpan; two at a time in AVX-512 (dir_z). */
static void cv_filter_panels(const float *d, int64_t dpan, const float *s, const int32_t *off, const int32_t *pos,
                             int64_t np, float *dw, int64_t wpan, int npan) {
  ahead_step();
  if (dir_z()) {
    for (int p = 0; p < npan; p += 2)
      cv_filter_z(d + p * dpan, dpan, s, off, pos, np, dw + p * wpan, wpan, npan - p > 1 ? 2 : 1);
    return;
  }
  for (int p = 0; p < npan; p++) cv_filter_tile(d + p * dpan, 0, s, 0, off, pos, np, 1, dw + p * wpan);
}

/* d[i*ld + j] (+)= s[j*ls + i] for i, j < 8: an 8x8 block transposed in
 * registers, added to d's values with add. */
DIR_TARGET static void dir_tr8(const float *s, int64_t ls, float *d, int64_t ld, bool add) {
  __m256 v0 = _mm256_loadu_ps(s), v1 = _mm256_loadu_ps(s + ls), v2 = _mm256_loadu_ps(s + 2 * ls),
         v3 = _mm256_loadu_ps(s + 3 * ls), v4 = _mm256_loadu_ps(s + 4 * ls), v5 = _mm256_loadu_ps(s + 5 * ls),
         v6 = _mm256_loadu_ps(s + 6 * ls), v7 = _mm256_loadu_ps(s + 7 * ls);
  __m256 u0 = _mm256_unpacklo_ps(v0, v1), u1 = _mm256_unpackhi_ps(v0, v1), u2 = _mm256_unpacklo_ps(v2, v3),
         u3 = _mm256_unpackhi_ps(v2, v3), u4 = _mm256_unpacklo_ps(v4, v5), u5 = _mm256_unpackhi_ps(v4, v5),
         u6 = _mm256_unpacklo_ps(v6, v7), u7 = _mm256_unpackhi_ps(v6, v7);
  __m256 t0 = _mm256_shuffle_ps(u0, u2, 0x44), t1 = _mm256_shuffle_ps(u0, u2, 0xEE),
         t2 = _mm256_shuffle_ps(u1, u3, 0x44), t3 = _mm256_shuffle_ps(u1, u3, 0xEE),
         t4 = _mm256_shuffle_ps(u4, u6, 0x44), t5 = _mm256_shuffle_ps(u4, u6, 0xEE),
         t6 = _mm256_shuffle_ps(u5, u7, 0x44), t7 = _mm256_shuffle_ps(u5, u7, 0xEE);
  __m256 w[8] = {_mm256_permute2f128_ps(t0, t4, 0x20), _mm256_permute2f128_ps(t1, t5, 0x20),
                 _mm256_permute2f128_ps(t2, t6, 0x20), _mm256_permute2f128_ps(t3, t7, 0x20),
                 _mm256_permute2f128_ps(t0, t4, 0x31), _mm256_permute2f128_ps(t1, t5, 0x31),
                 _mm256_permute2f128_ps(t2, t6, 0x31), _mm256_permute2f128_ps(t3, t7, 0x31)};
  for (int i = 0; i < 8; i++)
    _mm256_storeu_ps(d + i * ld, add ? _mm256_add_ps(_mm256_loadu_ps(d + i * ld), w[i]) : w[i]);
}
#else
static void dir_rows(const float *a, int64_t rows4, const float *s, int64_t gs, const int32_t *off, int64_t k,
                     int64_t n, float *t, int64_t ldt) {
  (void)a, (void)rows4, (void)s, (void)gs, (void)off, (void)k, (void)n, (void)t, (void)ldt;
}
static void dir_filter_taps(const float *const d[4], int64_t ds, const float *s, int64_t ss,
                            const int32_t *off, int nt, int64_t n, int64_t m, float *dw, int64_t ldw) {
  (void)d, (void)ds, (void)s, (void)ss, (void)off, (void)nt, (void)n, (void)m, (void)dw, (void)ldw;
}
static void cv_rows(const float *a, int64_t rows16, const float *s, const int32_t *off, int64_t k,
                    const int32_t *pos, int64_t np, float *t) {
  (void)a, (void)rows16, (void)s, (void)off, (void)k, (void)pos, (void)np, (void)t;
}
static void dir_tr8(const float *s, int64_t ls, float *d, int64_t ld, bool add) {
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++) d[i * ld + j] = add ? d[i * ld + j] + s[j * ls + i] : s[j * ls + i];
}
static void cv_filter_tile(const float *d, int64_t ds, const float *s, int64_t ss, const int32_t *off,
                           const int32_t *pos, int64_t np, int64_t m, float *dw) {
  (void)d, (void)ds, (void)s, (void)ss, (void)off, (void)pos, (void)np, (void)m, (void)dw;
}
static void cv_filter_panels(const float *d, int64_t dpan, const float *s, const int32_t *off, const int32_t *pos,
                             int64_t np, float *dw, int64_t wpan, int npan) {
  (void)d, (void)dpan, (void)s, (void)off, (void)pos, (void)np, (void)dw, (void)wpan, (void)npan;
}
#endif

/* The cv layout's panels of 16 rows side by side: dst[(r/16*n + q)*16 +
 * r%16] = src[r*n + q] for r < rows, q < n (dOut for the filter's
 * gradient); whole 8x8 blocks through dir_tr8, the rest one by one. */
static void cv_to_panels(const float *src, int64_t rows, int64_t n, float *dst) {
  int64_t r8 = rows / 8 * 8, n8 = n / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t q = 0; q < n8; q += 8) dir_tr8(src + r * n + q, n, dst + (r / 16 * n + q) * 16 + r % 16, 16, false);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t q = r < r8 ? n8 : 0; q < n; q++) dst[(r / 16 * n + q) * 16 + r % 16] = src[r * n + q];
}

/* dst[r*n + q] = src[(r/16*ldp + q)*16 + r%16] for r < rows, q < n (with
 * add: +=, each element once, the same bits as one by one): the panels
 * back to rows, through dir_tr8 as cv_to_panels. */
static void cv_from_panels(const float *src, int64_t ldp, int64_t rows, int64_t n, float *dst, bool add) {
  int64_t r8 = rows / 8 * 8, n8 = n / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t q = 0; q < n8; q += 8) dir_tr8(src + (r / 16 * ldp + q) * 16 + r % 16, 16, dst + r * n + q, n, add);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t q = r < r8 ? n8 : 0; q < n; q++) {
      float v = src[(r / 16 * ldp + q) * 16 + r % 16];
      dst[r * n + q] = add ? dst[r * n + q] + v : v;
    }
}

/* Threads that take the units (images, or slices of them): every thread,
 * when there are two units or more and the images do enough work. */
static int dir_threads(const Window *g, int64_t units, int64_t o) {
  if (units < 2 || (double)(g->n * o * g->oh * g->ow) * (double)(g->c * g->kh * g->kw) < (double)CONV_THREAD_WORK)
    return 1;
  int t = par_each_threads();
  return t < units ? t : (int)units;
}

/* How the direct path lays out one convolution's outputs: in rows of the
 * padded width, vectors along the positions (pv); or, for small images,
 * at the list of their positions, vectors across 16 output channels (cv:
 * on a 7x7 image, rows of the padded width would compute 63 positions for
 * 49, vectors along them 64). */
typedef struct DirOut {
  bool cv;
  int64_t w;         /* the packed filter's panel width: 4 (pv) or 16 (cv) */
  int64_t np;        /* cv: positions, rounded up to a tile of 6 */
  int32_t *pos;      /* cv: [np] each position's y*wp + x, the last repeated */
} DirOut;

/* Images of at most this many positions, of 16 rows or more, take the cv
 * layout (pv's tiles are of 4 rows, cv's of 16): against pv,
 * 1 thread, 64 channels at 7x7 forward 0.82x the time, gradients 0.70x;
 * 32 at 14x14 0.95x and 0.84x; 16 at 28x28 1.00x and 1.06x (doc/speed.md).
 * NETRUN_TEST_CONV=pv or cv (tests, benchmarks) picks one for all. */
#define DIR_CV_MAX 256

/* The layout for rows output rows (output channels; dInput's: input
 * channels). */
static DirOut dir_out(const DirGeom *s, const Window *g, int64_t rows) {
  const char *v = getenv("NETRUN_TEST_CONV");
  int64_t p = g->oh * g->ow;
  DirOut so = {.cv = !conv_same(g) || (v && strcmp(v, "cv") == 0) ? true
                      : v && strcmp(v, "pv") == 0 ? false
                                                  : p <= DIR_CV_MAX && rows >= 16};
  so.w = so.cv ? 16 : 4;
  if (so.cv) {
    so.np = (p + 5) / 6 * 6;
    so.pos = mem_line_alloc(sizeof *so.pos * (size_t)so.np);
    for (int64_t q = 0; q < so.np; q++) {
      int64_t at = q < p ? q : p - 1;
      so.pos[q] = (int32_t)(at / g->ow * g->sh * s->wp + at % g->ow * g->sw);
    }
  }
  return so;
}

/* Floats of the scratch that dir_compute needs for rows output rows. */
static int64_t dir_scratch(const DirOut *so, const DirGeom *s, int64_t rows) {
  return so->cv ? (rows + 15) / 16 * 16 * so->np : (rows + 3) / 4 * 4 * s->q8;
}

/* dst ([rows, OH, OW]) = the packed filter a (k taps off) over the padded
 * image pad, through the scratch t. */
static void dir_compute(const DirOut *so, const DirGeom *s, const Window *g, const float *a, int64_t rows,
                         const float *pad, const int32_t *off, int64_t k, float *t, float *dst) {
  if (!so->cv) {
    dir_rows(a, (rows + 3) / 4 * 4, pad, 16, off, k, s->q8, t, s->q8);
    dir_unpad(s, g, rows, t, dst);
    return;
  }
  int64_t p = g->oh * g->ow;
  cv_rows(a, (rows + 15) / 16 * 16, pad, off, k, so->pos, so->np, t);
  cv_from_panels(t, so->np, rows, p, dst, false);
}

/* fused_norm_conv2d's input, made image by image from its batch norm's
 * (rewrite.c, bn_norm): y = vmath_bn_norm of x (the norm's X) and res (its
 * Residual, or NULL) with the channel's coef (the norm's Coef, [C, 3]),
 * the norm's own loop, so the same bits as its Y, written (the gradient
 * reads it) and read at once by the convolution, while it is in cache. */
typedef struct NormIn {
  const float *x, *res, *coef;
  float *y;
  bool relu;
} NormIn;

/* Image b's c planes of hw values of y. */
static void norm_image(const NormIn *ni, int64_t b, int64_t c, int64_t hw) {
  for (int64_t ch = 0; ch < c; ch++) {
    int64_t at = (b * c + ch) * hw;
    vmath_bn_norm_f32(ni->x + at, ni->res ? ni->res + at : NULL, ni->y + at, hw, ni->coef + 3 * ch, ni->relu);
  }
}

/* The next image's ranges of the input (ahead_add): ni's x and res, its y
 * to be written; else the input. */
static void ahead_input(const NormIn *ni, const float *in, int64_t at, int64_t len) {
  if (!ni) {
    ahead_add(in + at, len, false);
    return;
  }
  ahead_add(ni->x + at, len, false);
  ahead_add(ni->res ? ni->res + at : NULL, len, false);
  ahead_add(ni->y + at, len, true);
}

/* conv2d's forward on the direct path: image by image, e applied to each
 * image's output as it lands; ni (if not NULL) makes each image's input
 * first. */
static void conv2d_direct_f32(const Window *g0, int64_t o, const float *in, const float *filt, float *out,
                              const Epilogue *e, const NormIn *ni) {
  Window gw = dir_sub(g0);
  const Window *g = &gw;   /* the computed window; g0's image is read */
  DirGeom s = dir_geom(g);
  DirOut so = dir_out(&s, g, o);
  int64_t k = g->c * g->kh * g->kw, p = g->oh * g->ow;
  float *a = dir_pack(filt, o, g->c, g->kh, g->kw, false, so.w);
  int32_t *off = dir_offsets(&s, g->c, g->kh, g->kw);
  int threads = dir_threads(g, g->n, o);
  float **pad = mem_line_calloc((size_t)threads, sizeof *pad), **t = mem_line_calloc((size_t)threads, sizeof *t);
  float **img = mem_line_calloc((size_t)threads, sizeof *img);   /* without Output: each image's output */
  for (int i = 0; i < threads; i++) {
    pad[i] = mem_line_calloc((size_t)dir_len(&s, g->c), sizeof **pad);
    t[i] = mem_line_alloc(sizeof **t * (size_t)dir_scratch(&so, &s, o));
    if (!out) img[i] = mem_line_alloc(sizeof **img * (size_t)(o * p));
  }
  PAR_EACH(threads > 1, threads)
  for (int64_t b = 0; b < g->n; b++) {
    if (exec_interrupted()) continue;   /* Ctrl-C between images (the executor fails the op) */
    int th = par_thread();
    float *dst = out ? out + b * o * p : img[th];
    int64_t len = g0->c * g0->h * g0->w;
    if (ni) norm_image(ni, b, g0->c, g0->h * g0->w);
    dir_load(&s, g0, g->c, in + b * len, pad[th]);
    ahead_clear();
    if (b + threads < g->n) {
      ahead_input(ni, in, (b + threads) * len, len);
      ahead_add(out ? out + (b + threads) * o * p : NULL, o * p, true);
    }
    dir_compute(&so, &s, g, a, o, pad[th], off, k, t[th], dst);
    if (e) finish_rows(e, 0, o, p, dst, p, dst, p);
    pool_rows(e, g, o, b, 0, o, dst);
  }
  for (int i = 0; i < threads; i++) mem_line_free(pad[i]), mem_line_free(t[i]), mem_line_free(img[i]);
  mem_line_free(img);
  mem_line_free(pad);
  mem_line_free(t);
  mem_line_free(off);
  mem_line_free(a);
  mem_line_free(so.pos);
}

/* ---- Winograd F(2x2, 3x3) ------------------------------------------------------------
 * 3x3 convolutions of stride 1 that keep the size (conv_same), forward and
 * input gradient: each 2x2 block of outputs (a tile) comes from the 4x4
 * block of the padded input under it, Y = A^T [(G w G^T) . (B^T d B)] A
 * (Lavin and Gray, 2015), 16 multiply-adds a tile and channel pair where
 * the direct kernels do 36.  Per image: the input's tiles transformed into
 * V (its 16 parts), one product per element of the 4x4 transform, U[e]
 * ([K, C], the transformed filter) times V[e], through the direct path's
 * row kernel (dir_rows: its taps are the channels), and the output
 * transform.  Tiles are numbered row after row, a row every twp tiles (tw
 * rounded up to 8, or 4 where tw is 4 or less: ty*twp + tx).  V keeps a
 * channel's tiles in groups of 16, each group's 16 parts side by side
 * ([C][groups][16][16]), so that the input transform writes one stream
 * (written to 16 planes, its stores were bound at a third of one stream's
 * rate); the products read a part's positions a group apart (dir_at).
 * Each output depends on its image alone, so the bits are the same on any
 * number of threads.  Measured against the direct kernels in
 * doc/speed.md. */

typedef struct Wino {
  int64_t c, k, k4;     /* channels in, rows out (k4: rounded up to 4) */
  int64_t h, w;         /* the image's sides (= the output's) */
  int64_t th, tw, twp;  /* tiles down and across, and a tile row's stride (tw rounded up to
                           8, or 4 where tw is 4 or less: 7x7 maps keep their lanes busy) */
  int64_t rb;           /* tile rows a block */
  int64_t tp;           /* a row's stride in a block's M: its tiles (rb*twp), plus 8 */
  int64_t vc;           /* a channel's stride in V: 256 floats a group of 16 tiles, plus 16 */
  int64_t me;           /* the stride of M's 16 parts: k4*tp, plus 16 (parts or channels a
                           multiple of 4 KB apart would share the cache's sets) */
  int64_t hp, wp;       /* the padded plane: rows and row stride (a border of 1, zeros past the right) */
  float *u;             /* [16][k4 * c], packed as dir_rows reads it */
  int32_t *off;         /* [c]: channel i at i * tp */
} Wino;

/* Tiles a block of tile rows takes at least (one row at most of more):
 * blocks bound the buffers on large images.  Smaller blocks, to keep V and
 * M in a cache, were slower: 48 and 96 tiles took 1.1-1.2x the time of
 * whole images of 16-64 channels at 7x7 to 28x28 (dir_rows reloads the
 * filter's panels for each block). */
#ifndef WINO_TB
#define WINO_TB 1024
#endif

/* Channels each way from which Winograd takes over: below, its transforms
 * cost more than the products they save (1 thread, 64 images at 28x28:
 * 8 -> 8 channels forward 1.07x the direct kernels' time, gradients 1.6x;
 * 4 -> 16 1.01x and 1.27x; 16 -> 16 0.87x and 0.89x). */
#define WINO_MIN 16

/* Bytes a thread's buffers may take: larger images stay on the direct path. */
#define WINO_MAX_BYTES (8 << 20)

static void wino_geom(Wino *z, const Window *g, int64_t rows, int64_t chans) {
  *z = (Wino){.c = chans, .k = rows, .k4 = (rows + 3) / 4 * 4, .h = g->h, .w = g->w,
              .th = (g->h + 1) / 2, .tw = (g->w + 1) / 2};
  z->twp = z->tw <= 4 ? 4 : (z->tw + 7) / 8 * 8;
  z->rb = (WINO_TB + z->twp - 1) / z->twp;
  if (z->rb > z->th) z->rb = z->th;
  z->tp = z->rb * z->twp + 8;
  z->vc = (z->rb * z->twp + 15) / 16 * 256 + 16;
  z->me = z->k4 * z->tp + 16;
  z->hp = 2 * z->th + 2;
  z->wp = 2 * ((z->tw + 7) / 8 * 8) + 2;
}

/* Winograd's 2x2 tiles cover an odd side one row or column past it: on
 * maps whose tiles cover this many times their area or more (1.25: 7x7
 * and 5x5, not 9x9) the direct kernels are faster below WINO_WIDE
 * channels either way (1 thread, batch 128, direct / Winograd, forward and
 * gradients: 7x7 with 16 channels 0.74 and 0.76, 32 0.78 and 0.80, 64
 * 0.89 and 0.94, 96 0.98 and 1.04, 128 0.99 and 1.00; 5x5 with 64 0.55
 * and 0.70; 9x9 with 64 1.01 and 1.05; 8x8, no waste, with 64 1.12 and
 * 1.14; doc/speed.md).  On the Intel host there, with V in groups, 64
 * channels at 7x7 took 1.31x and 1.04x Winograd's time on the direct
 * kernels, but the ResNet's step with Winograd from 64 channels 0.97x on
 * 1 thread and 1.00x on 2: the rule, one for every CPU, stays.
 * -DWINO_WIDE=N builds another to measure. */
#ifndef WINO_WIDE
#define WINO_WIDE 96
#endif

/* Whether conv2d of geometry g (o filters, one group: conv_direct_ok) runs
 * through Winograd, forward (rows = o, chans = c) or for dInput (rows = c,
 * chans = o): 3x3, stride 1, padding 1, WINO_MIN channels each way, and a
 * map whose tiles waste little (WINO_WIDE).  NETRUN_TEST_CONV=pv, cv or
 * direct (tests, benchmarks) keeps the direct kernels; winograd takes
 * Winograd whatever the map's size. */
static bool wino_ok(const Window *g, int64_t rows, int64_t chans) {
  const char *v = getenv("NETRUN_TEST_CONV");
  if (v && (strcmp(v, "pv") == 0 || strcmp(v, "cv") == 0 || strcmp(v, "direct") == 0)) return false;
  if (g->kh != 3 || g->kw != 3 || !conv_same(g) || rows < WINO_MIN || chans < WINO_MIN) return false;
  if ((g->h + 1) / 2 > INT32_MAX / (16 * ((g->w + 1) / 2 + 8))) return false;
  double cover = 4.0 * (double)((g->h + 1) / 2) * (double)((g->w + 1) / 2);
  bool force = v && strcmp(v, "winograd") == 0;
  if (!force && 4 * cover >= 5.0 * (double)g->h * (double)g->w && (rows < WINO_WIDE || chans < WINO_WIDE))
    return false;
  Wino z;
  wino_geom(&z, g, rows, chans);
  double plane = (double)chans * (double)z.hp * (double)z.wp;
  return ((double)chans * (double)z.vc + 16.0 * (double)z.me + plane) * sizeof(float) <= WINO_MAX_BYTES;
}

/* U = G w G^T for each of rows x chans 3x3 filters: w(r, ch) is the
 * forward's filt[r][ch] (flip false), or for dInput the filter turned 180
 * degrees with its in and out channels swapped (flip: rows are filt's
 * input channels).  In double, rounded once. */
static void wino_init(Wino *z, const Window *g, int64_t rows, int64_t chans, const float *filt, bool flip) {
  wino_geom(z, g, rows, chans);
  z->u = mem_line_calloc((size_t)(16 * z->k4 * chans), sizeof *z->u);
  z->off = mem_line_alloc(sizeof *z->off * (size_t)chans);
  for (int64_t i = 0; i < chans; i++) z->off[i] = (int32_t)(i * z->vc);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t ch = 0; ch < chans; ch++) {
      double w[3][3], t[4][3];
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
          w[i][j] = flip ? filt[((ch * rows + r) * 3 + 2 - i) * 3 + 2 - j] : filt[((r * chans + ch) * 3 + i) * 3 + j];
      for (int j = 0; j < 3; j++) {
        t[0][j] = w[0][j];
        t[1][j] = 0.5 * (w[0][j] + w[1][j] + w[2][j]);
        t[2][j] = 0.5 * (w[0][j] - w[1][j] + w[2][j]);
        t[3][j] = w[2][j];
      }
      for (int i = 0; i < 4; i++) {
        double u[4] = {t[i][0], 0.5 * (t[i][0] + t[i][1] + t[i][2]), 0.5 * (t[i][0] - t[i][1] + t[i][2]), t[i][2]};
        for (int j = 0; j < 4; j++)
          z->u[(4 * i + j) * z->k4 * chans + (r / 4 * chans + ch) * 4 + r % 4] = (float)u[j];
      }
    }
}

static void wino_free(Wino *z) {
  mem_line_free(z->u);
  mem_line_free(z->off);
}

/* Per thread: the padded plane (its border zero), a block's V and M, and
 * one output row's four outputs of each of the block's tiles. */
typedef struct WinoBufs {
  float *pad, *v, *m, *y;   /* on cache lines (mem_line_alloc): V's groups are whole lines, each
                               stored in one piece */
} WinoBufs;

static WinoBufs wino_bufs(const Wino *z) {
  WinoBufs b = {.pad = mem_line_calloc((size_t)(z->c * z->hp * z->wp), sizeof(float)),
                .m = mem_line_alloc(sizeof(float) * (size_t)(16 * z->me)),
                .y = mem_line_alloc(sizeof(float) * (size_t)(4 * z->tp)),
                .v = mem_line_calloc((size_t)(z->c * z->vc), sizeof(float))};
  return b;
}

static void wino_bufs_free(WinoBufs *b) {
  mem_line_free(b->pad), mem_line_free(b->v), mem_line_free(b->m), mem_line_free(b->y);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The even and the odd floats of a[0..16): a[0], a[2], .. and a[1], a[3], .. */
DIR_TARGET static inline __attribute__((always_inline)) void wino_split(const float *a, __m256 *even, __m256 *odd) {
  __m256 lo = _mm256_loadu_ps(a), hi = _mm256_loadu_ps(a + 8);
  *even = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))), 0xD8));
  *odd = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))), 0xD8));
}

/* Part e of tile t = (ty-ty0)*twp + tx of channel ch, V[ch][t/16][e][t%16],
 * = (B^T d B)[e] for the 4x4 block d at (2ty, 2tx) of the channel's padded
 * plane, tile rows ty0 to ty1, eight tiles of a row at a time (the lanes
 * past a row's end, to twp, from the plane's zeros past its right edge). */
/* Whether wino_in reads the image itself (wino_in_z) rather than its
 * padded plane (wino_fill first). */
static bool wino_reads_image(const Wino *z) { return (z->twp == 16 || z->twp == 8) && dir_z(); }

/* Lanes j of a load at image column x that fall inside the row (0 <= x+j < w). */
static __mmask16 wino_cols(int64_t x, int64_t w) {
  uint32_t m = 0;
  for (int64_t j = 0; j < 16; j++)
    if (x + j >= 0 && x + j < w) m |= 1u << j;
  return (__mmask16)m;
}

/* 16 floats of image row y from column x (lanes outside m zero), or zeros
 * above and below the image: a row of its padded plane, read in place
 * (masked lanes are never touched, before the plane's start included). */
DIR512_TARGET static inline __m512 wino_row(const float *plane, int64_t y, const Wino *z, int64_t x, __mmask16 m) {
  return y >= 0 && y < z->h ? _mm512_maskz_loadu_ps(m, plane + y * z->w + x) : _mm512_setzero_ps();
}

/* wino_in in AVX-512 where a group is one tile row (twp 16: 25 to 32
 * columns) or two (twp 8: 9 to 16): sixteen tiles at a time, whose 16
 * parts are one KB written in order.  The even and the odd floats of 16
 * tiles come from one two-source permute each: of a row's 32 floats, or
 * of two rows' 16 each.  Each output is the same subtraction or addition
 * of the same two values as wino_in's: the same bits.  It reads the
 * image, not its padded plane: the plane's column x is the image's x-1,
 * its zeros are masked lanes and rows past the image. */
DIR512_TARGET static void wino_in_z(const Wino *z, const float *img, int64_t ty0, int64_t ty1, float *v) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const int64_t rows = 16 / z->twp;   /* tile rows a group */
  /* lo and lo2 from the padded row's columns 0 and 2; hi and hi2 16 columns
     further (one row a group) or from the same columns of the next tile row */
  const int64_t xh = rows == 1 ? 16 : 0;
  const __mmask16 mlo = wino_cols(-1, z->w), mlo2 = wino_cols(1, z->w);
  const __mmask16 mhi = wino_cols(xh - 1, z->w), mhi2 = wino_cols(xh + 1, z->w);
  for (int64_t ch = 0; ch < z->c; ch++)
    for (int64_t ty = ty0; ty < ty1; ty += rows) {
      const float *plane = img + ch * z->h * z->w;
      int64_t dy = rows == 2 ? 2 : 0;   /* hi's rows below lo's (past the block's or the image's
                                           last tile row: tiles no output reads) */
      __m512 r[4][4];
      for (int i = 0; i < 4; i++) {
        int64_t y = 2 * ty - 1 + i;
        __m512 lo = wino_row(plane, y, z, -1, mlo), hi = wino_row(plane, y + dy, z, xh - 1, mhi);
        __m512 lo2 = wino_row(plane, y, z, 1, mlo2), hi2 = wino_row(plane, y + dy, z, xh + 1, mhi2);
        __m512 d0 = _mm512_permutex2var_ps(lo, even, hi), d1 = _mm512_permutex2var_ps(lo, odd, hi);
        __m512 d2 = _mm512_permutex2var_ps(lo2, even, hi2), d3 = _mm512_permutex2var_ps(lo2, odd, hi2);
        r[i][0] = _mm512_sub_ps(d0, d2);
        r[i][1] = _mm512_add_ps(d1, d2);
        r[i][2] = _mm512_sub_ps(d2, d1);
        r[i][3] = _mm512_sub_ps(d1, d3);
      }
      float *o = v + ch * z->vc + (ty - ty0) / rows * 256;
      for (int j = 0; j < 4; j++) {
        _mm512_storeu_ps(o + (0 + j) * 16, _mm512_sub_ps(r[0][j], r[2][j]));
        _mm512_storeu_ps(o + (4 + j) * 16, _mm512_add_ps(r[1][j], r[2][j]));
        _mm512_storeu_ps(o + (8 + j) * 16, _mm512_sub_ps(r[2][j], r[1][j]));
        _mm512_storeu_ps(o + (12 + j) * 16, _mm512_sub_ps(r[1][j], r[3][j]));
      }
    }
}

DIR_TARGET static void wino_in(const Wino *z, const float *img, const float *pad, int64_t ty0, int64_t ty1,
                                float *v) {
  if (wino_reads_image(z)) {
    wino_in_z(z, img, ty0, ty1, v);
    return;
  }
  for (int64_t ch = 0; ch < z->c; ch++)
    for (int64_t ty = ty0; ty < ty1; ty++)
      for (int64_t tx = 0; tx < z->tw; tx += 8) {
        const float *p = pad + (ch * z->hp + 2 * ty) * z->wp + 2 * tx;
        __m256 r[4][4];
        for (int i = 0; i < 4; i++) {
          __m256 d0, d1, d2, d3;
          wino_split(p + i * z->wp, &d0, &d1);
          wino_split(p + i * z->wp + 2, &d2, &d3);
          r[i][0] = _mm256_sub_ps(d0, d2);
          r[i][1] = _mm256_add_ps(d1, d2);
          r[i][2] = _mm256_sub_ps(d2, d1);
          r[i][3] = _mm256_sub_ps(d1, d3);
        }
        int64_t t = (ty - ty0) * z->twp + tx;
        float *o = v + ch * z->vc + t / 16 * 256 + t % 16;
        __m256 x[16];
        for (int j = 0; j < 4; j++) {
          x[0 + j] = _mm256_sub_ps(r[0][j], r[2][j]);
          x[4 + j] = _mm256_add_ps(r[1][j], r[2][j]);
          x[8 + j] = _mm256_sub_ps(r[2][j], r[1][j]);
          x[12 + j] = _mm256_sub_ps(r[1][j], r[3][j]);
        }
        if (z->twp == 4)   /* a row's four tiles, a quarter of a group: the lanes past them would
                              land on the next part's */
          for (int e = 0; e < 16; e++) _mm_storeu_ps(o + e * 16, _mm256_castps256_ps128(x[e]));
        else
          for (int e = 0; e < 16; e++) _mm256_storeu_ps(o + e * 16, x[e]);
      }
}

/* dst's rows 2ty0 to 2ty1 of each of its k planes ([k, H, W]) = A^T M A
 * for each tile of the block's M ([16][k4][tiles]): one plane's four
 * outputs of each tile into y ([4][tp], vectors over the tiles), then
 * interleaved into the plane's rows. */
/* wino_out in AVX-512 where a group of 16 tiles is one tile row or two
 * (as wino_in_z): each output row's values interleaved from a tile's two
 * columns by one two-source permute, stored straight into the plane (a
 * row of at most 32 outputs, masked at its end).  The same additions and
 * subtractions in the same order as wino_out's: the same bits. */
DIR512_TARGET static void wino_out_z(const Wino *z, const float *m, int64_t ty0, int64_t ty1, float *dst) {
  const __m512i ilo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i ihi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const int64_t es = z->me, rows = 16 / z->twp, nt = (ty1 - ty0) * z->twp, w = z->w;
  const int64_t y1 = 2 * ty1 < z->h ? 2 * ty1 : z->h;
  /* a row's outputs: the first 16 (or all of a two-row group's row) and those past 16 */
  const __mmask16 m0 = w >= 16 ? 0xFFFF : (__mmask16)((1u << w) - 1);
  const __mmask16 m1 = w <= 16 ? 0 : w >= 32 ? 0xFFFF : (__mmask16)((1u << (w - 16)) - 1);
  for (int64_t r = 0; r < z->k; r++) {
    float *plane = dst + r * z->h * w;
    for (int64_t t0 = 0; t0 < nt; t0 += 16) {
      const float *q = m + r * z->tp + t0;
      __mmask16 in = nt - t0 >= 16 ? 0xFFFF : (__mmask16)((1u << (nt - t0)) - 1);
      __m512 s[2][4];
      for (int j = 0; j < 4; j++) {
        __m512 a0 = _mm512_maskz_loadu_ps(in, q + j * es), a1 = _mm512_maskz_loadu_ps(in, q + (4 + j) * es),
               a2 = _mm512_maskz_loadu_ps(in, q + (8 + j) * es), a3 = _mm512_maskz_loadu_ps(in, q + (12 + j) * es);
        s[0][j] = _mm512_add_ps(_mm512_add_ps(a0, a1), a2);
        s[1][j] = _mm512_sub_ps(_mm512_sub_ps(a1, a2), a3);
      }
      int64_t yy = 2 * (ty0 + t0 / z->twp);   /* the group's first output row */
      for (int a = 0; a < 2; a++) {
        __m512 c0 = _mm512_add_ps(_mm512_add_ps(s[a][0], s[a][1]), s[a][2]);
        __m512 c1 = _mm512_sub_ps(_mm512_sub_ps(s[a][1], s[a][2]), s[a][3]);
        __m512 lo = _mm512_permutex2var_ps(c0, ilo, c1), hi = _mm512_permutex2var_ps(c0, ihi, c1);
        if (rows == 1) {
          if (yy + a < y1) {
            _mm512_mask_storeu_ps(plane + (yy + a) * w, m0, lo);
            if (m1) _mm512_mask_storeu_ps(plane + (yy + a) * w + 16, m1, hi);
          }
        } else {
          if (yy + a < y1) _mm512_mask_storeu_ps(plane + (yy + a) * w, m0, lo);
          if (yy + 2 + a < y1) _mm512_mask_storeu_ps(plane + (yy + 2 + a) * w, m0, hi);
        }
      }
    }
  }
}

DIR_TARGET static void wino_out(const Wino *z, const float *m, int64_t ty0, int64_t ty1, float *y, float *dst) {
  if ((z->twp == 16 || z->twp == 8) && dir_z()) {
    wino_out_z(z, m, ty0, ty1, dst);
    return;
  }
  int64_t es = z->me, nt = (ty1 - ty0) * z->twp;
  int64_t y1 = 2 * ty1 < z->h ? 2 * ty1 : z->h;
  for (int64_t r = 0; r < z->k; r++) {
    for (int64_t t0 = 0; t0 < nt; t0 += 8) {
      const float *q = m + r * z->tp + t0;
      __m256 s[2][4];
      for (int j = 0; j < 4; j++) {
        __m256 m0 = _mm256_loadu_ps(q + j * es), m1 = _mm256_loadu_ps(q + (4 + j) * es),
               m2 = _mm256_loadu_ps(q + (8 + j) * es), m3 = _mm256_loadu_ps(q + (12 + j) * es);
        s[0][j] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
        s[1][j] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
      }
      for (int a = 0; a < 2; a++) {
        _mm256_storeu_ps(y + 2 * a * z->tp + t0, _mm256_add_ps(_mm256_add_ps(s[a][0], s[a][1]), s[a][2]));
        _mm256_storeu_ps(y + (2 * a + 1) * z->tp + t0, _mm256_sub_ps(_mm256_sub_ps(s[a][1], s[a][2]), s[a][3]));
      }
    }
    float *plane = dst + r * z->h * z->w;
    for (int64_t yy = 2 * ty0; yy < y1; yy++) {
      const float *e0 = y + (yy & 1) * 2 * z->tp + (yy / 2 - ty0) * z->twp, *e1 = e0 + z->tp;
      float *o = plane + yy * z->w;
      int64_t x = 0;
      for (; x + 16 <= z->w; x += 16) {   /* 8 tiles: their two columns interleaved */
        __m256 a = _mm256_loadu_ps(e0 + x / 2), b = _mm256_loadu_ps(e1 + x / 2);
        __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);
        _mm256_storeu_ps(o + x, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(o + x + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
      }
      if (x + 8 <= z->w) {   /* 4 tiles */
        __m128 a = _mm_loadu_ps(e0 + x / 2), b = _mm_loadu_ps(e1 + x / 2);
        _mm_storeu_ps(o + x, _mm_unpacklo_ps(a, b));
        _mm_storeu_ps(o + x + 4, _mm_unpackhi_ps(a, b));
        x += 8;
      }
      for (; x + 2 <= z->w; x += 2) o[x] = e0[x / 2], o[x + 1] = e1[x / 2];
      if (x < z->w) o[x] = e0[x / 2];
    }
  }
}
#else
static bool wino_reads_image(const Wino *z) { return (void)z, false; }
static void wino_in(const Wino *z, const float *img, const float *pad, int64_t ty0, int64_t ty1, float *v) {
  (void)z, (void)img, (void)pad, (void)ty0, (void)ty1, (void)v;
}
static void wino_out(const Wino *z, const float *m, int64_t ty0, int64_t ty1, float *y, float *dst) {
  (void)z, (void)m, (void)ty0, (void)ty1, (void)y, (void)dst;
}
#endif

/* img [c, H, W] into the middle of each channel's padded plane, whose
 * border stays zero (copy_run in AVX2 where the CPU has it: the copies
 * inlined into generic code moved 16 bytes at a time). */
SIMD_CLONES static void wino_fill(const Wino *z, const float *img, float *pad) {
  for (int64_t ch = 0; ch < z->c; ch++)
    for (int64_t y = 0; y < z->h; y++)
      copy_run(pad + (ch * z->hp + y + 1) * z->wp + 1, img + (ch * z->h + y) * z->w, z->w);
}

/* dst [k, H, W] = the convolution of img [c, H, W] (Winograd), a block of
 * tile rows at a time. */
static void wino_image(const Wino *z, const float *img, WinoBufs *b, float *dst) {
  if (!wino_reads_image(z)) wino_fill(z, img, b->pad);
  for (int64_t ty0 = 0; ty0 < z->th; ty0 += z->rb) {
    int64_t ty1 = ty0 + z->rb < z->th ? ty0 + z->rb : z->th, n = ((ty1 - ty0) * z->twp + 7) / 8 * 8;
    wino_in(z, img, b->pad, ty0, ty1, b->v);
    for (int e = 0; e < 16; e++)
      dir_rows(z->u + e * z->k4 * z->c, z->k4, b->v + 16 * e, 256, z->off, z->c, n, b->m + e * z->me, z->tp);
    wino_out(z, b->m, ty0, ty1, b->y, dst);
  }
}

/* conv2d's forward through Winograd (wino_ok): image by image, as
 * conv2d_direct_f32. */
static void conv2d_wino_f32(const Window *g, int64_t o, const float *in, const float *filt, float *out,
                            const Epilogue *e, const NormIn *ni) {
  Wino z;
  wino_init(&z, g, o, g->c, filt, false);
  int64_t p = g->oh * g->ow;
  int threads = dir_threads(g, g->n, o);
  WinoBufs *bufs = mem_line_calloc((size_t)threads, sizeof *bufs);
  float **img = mem_line_calloc((size_t)threads, sizeof *img);   /* without Output: each image's output */
  for (int i = 0; i < threads; i++) {
    bufs[i] = wino_bufs(&z);
    if (!out) img[i] = mem_line_alloc(sizeof **img * (size_t)(o * p));
  }
  PAR_EACH(threads > 1, threads)
  for (int64_t b = 0; b < g->n; b++) {
    if (exec_interrupted()) continue;   /* Ctrl-C between images (the executor fails the op) */
    float *dst = out ? out + b * o * p : img[par_thread()];
    int64_t len = g->c * g->h * g->w;
    if (ni) norm_image(ni, b, g->c, g->h * g->w);
    ahead_clear();
    if (b + threads < g->n) {
      ahead_input(ni, in, (b + threads) * len, len);
      ahead_add(out ? out + (b + threads) * o * p : NULL, o * p, true);
    }
    wino_image(&z, in + b * len, &bufs[par_thread()], dst);
    if (e) finish_rows(e, 0, o, p, dst, p, dst, p);
    pool_rows(e, g, o, b, 0, o, dst);
  }
  for (int i = 0; i < threads; i++) wino_bufs_free(&bufs[i]), mem_line_free(img[i]);
  mem_line_free(img);
  mem_line_free(bufs);
  wino_free(&z);
}

/* out may be NULL (fused_conv2d writing Mask instead): the direct and
 * Winograd kernels then keep each image's output in a buffer of their
 * thread, the others in one of the whole batch. */
static int conv2d_f32(ExecCtx *c, const Window *g, int64_t o, int64_t groups, const float *in,
                      const float *filt, float *out, const Epilogue *e, const NormIn *ni) {
  int64_t kk = g->c / groups * g->kh * g->kw, p = g->oh * g->ow;
  if (ni && !(g->n > 0 && o > 0 && p > 0 && kk > 0 && conv_direct_ok(g, o, groups))) {
    /* the GEMMs (or nothing) read the input whole: made first */
    int64_t hw = g->h * g->w;
    PAR_FOR(g->n * g->c > 1 && g->n * g->c * hw >= PAR_MIN_WORK)
    for (int64_t r = 0; r < g->n * g->c; r++)
      vmath_bn_norm_f32(ni->x + r * hw, ni->res ? ni->res + r * hw : NULL, ni->y + r * hw, hw,
                        ni->coef + 3 * (r % g->c), ni->relu);
    ni = NULL;
  }
  if (g->n == 0 || o == 0 || p == 0) {
    if (e && e->moments) memset(e->moments, 0, sizeof *e->moments * (size_t)(2 * g->n * o));
    return 0;
  }
  if (!out && !(kk > 0 && conv_direct_ok(g, o, groups))) {
    float *whole = mem_line_alloc(sizeof *whole * (size_t)(g->n * o * p));
    int rc = conv2d_f32(c, g, o, groups, in, filt, whole, e, ni);
    mem_line_free(whole);
    return rc;
  }
  if (kk == 0) {
    memset(out, 0, sizeof *out * (size_t)(g->n * o * p));
    if (e)
      for (int64_t b = 0; b < g->n; b++) {
        finish_rows(e, 0, o, p, out + b * o * p, p, out + b * o * p, p);
        pool_rows(e, g, o, b, 0, o, out + b * o * p);
      }
    return 0;
  }
  if (conv_direct_ok(g, o, groups)) {
    if (wino_ok(g, o, g->c)) conv2d_wino_f32(g, o, in, filt, out, e, ni);
    else conv2d_direct_f32(g, o, in, filt, out, e, ni);
    return 0;
  }
  ConvPlan pl;
  if (!conv_plan(g, o, groups, &pl)) return conv_too_large(c, g, groups);
  conv_plan_threads(&pl, pl.batches, false);
  PAR_EACH(pl.threads > 1, pl.threads)
  for (int64_t bi = 0; bi < pl.batches; bi++)
    conv_batch(&pl, g, o, groups, bi, in, filt, out, e, &pl.bufs[par_thread()]);
  conv_plan_free(&pl);
  return 0;
}

/* A convolution's geometry: input x, output (or its gradient) out, filter f. */
static Window conv_window(ExecCtx *c, const Tensor *x, const Tensor *out, const Tensor *f) {
  Window g;
  window_read(c, x, out, true, &g);
  g.kh = f->shape[2];
  g.kw = f->shape[3];
  return g;
}

/* conv2d, and fused_conv2d: conv2d + Bias ([O, 1, 1] or [1, O, 1, 1]),
 * then relu if the attribute says so.  rewrite.c makes fused ops from
 * those ops when nothing else reads the values between; scripts never
 * name them. */
/* ---- f64: conv2d and its gradient, by im2col and dgemm ------------------------
 * One image and one group at a time: col [CG KH KW, OH OW] holds the
 * patches, Output = Filter [OG, CG KH KW] @ col; the gradient takes
 * Filter@GRAD += dOut @ col^T and col2im(Filter^T @ dOut).  Not tuned:
 * f64 is for precision, the f32 path above for speed. */

/* The patch element (row, p) of image img's group (channels [0, cg)): its
 * input offset, or -1 in the padding. */
static inline int64_t patch_at(const Window *g, int64_t row, int64_t p) {
  int64_t kj = row % g->kw, ki = row / g->kw % g->kh, ci = row / (g->kw * g->kh);
  int64_t iy = p / g->ow * g->sh - g->ph + ki * g->dh, ix = p % g->ow * g->sw - g->pw + kj * g->dw;
  return iy < 0 || iy >= g->h || ix < 0 || ix >= g->w ? -1 : (ci * g->h + iy) * g->w + ix;
}

static void im2col64(const Window *g, int64_t cg, const double *img, double *col) {
  int64_t rows = cg * g->kh * g->kw, np = g->oh * g->ow;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t p = 0; p < np; p++) {
      int64_t at = patch_at(g, r, p);
      col[r * np + p] = at < 0 ? 0.0 : img[at];
    }
}

static void col2im64(const Window *g, int64_t cg, const double *col, double *img) {
  int64_t rows = cg * g->kh * g->kw, np = g->oh * g->ow;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t p = 0; p < np; p++) {
      int64_t at = patch_at(g, r, p);
      if (at >= 0) img[at] += col[r * np + p];
    }
}

/* C = op(A) [m, k] @ op(B) [k, n] + beta C, row-major. */
static void dgemm64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a, const double *b,
                    double beta, double *c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n,
              (int)k, 1.0, a, ta ? (int)m : (int)k, b, tb ? (int)k : (int)n, beta, c, (int)n);
}

/* conv2d (fwd) or its gradient (dx, df, either NULL) in f64. */
static int conv2d_f64(ExecCtx *c, const Window *g, int64_t o, int64_t groups, const double *x, const double *f,
                      double *out, const double *dout, double *dx, double *df) {
  int64_t cg = g->c / groups, og = o / groups, ckk = cg * g->kh * g->kw, np = g->oh * g->ow;
  if (ckk > INT_MAX || np > INT_MAX || og > INT_MAX) return exec_ctx_fail(c, "a dimension is too large for BLAS");
  double *col = mem_line_alloc(sizeof *col * (size_t)(ckk * np + 1));
  if (dx) memset(dx, 0, sizeof *dx * (size_t)(g->n * g->c * g->h * g->w));
  if (df) memset(df, 0, sizeof *df * (size_t)(o * ckk));
  for (int64_t n = 0; n < g->n && !exec_interrupted(); n++)   /* Ctrl-C between images */
    for (int64_t gi = 0; gi < groups; gi++) {
      const double *img = x ? x + (n * g->c + gi * cg) * g->h * g->w : NULL, *fg = f + gi * og * ckk;
      if (np == 0 || ckk == 0) continue;
      if (out || df) im2col64(g, cg, img, col);
      if (out) dgemm64(false, false, og, np, ckk, fg, col, 0.0, out + (n * o + gi * og) * np);
      if (!dout) continue;
      const double *dg = dout + (n * o + gi * og) * np;
      if (df) dgemm64(false, true, og, ckk, np, dg, col, 1.0, df + gi * og * ckk);
      if (dx) {
        dgemm64(true, false, ckk, np, og, fg, dg, 0.0, col);
        col2im64(g, cg, col, dx + (n * g->c + gi * cg) * g->h * g->w);
      }
    }
  mem_line_free(col);
  return 0;
}

static int conv_forward(ExecCtx *c, bool fused) {
  dir_cpu();   /* the kernels' ISA, before a parallel region reads it */
  Tensor *x = tensor_cast(exec_ctx_in(c, 0), DT_F32), *f = tensor_cast(exec_ctx_in(c, 1), DT_F32),
         *bias = fused ? exec_ctx_in(c, 2) : NULL, *out = exec_ctx_out(c, 0);
  Tensor *mom = fused ? exec_ctx_out(c, 2) : NULL, *tr = mom ? exec_ctx_in(c, 3) : NULL;
  if (tr && tr->numel == 1 && tensor_get(tr, 0) == 0) mom = NULL;   /* not training: no batch norm reads them */
  int rc = 0;
  if (bias && (bias->dtype != DT_F32 || bias->numel != f->shape[0]))
    rc = exec_ctx_fail(c, "internal error: Bias does not hold one f32 per output channel");
  if (rc == 0 && mom && (mom->dtype != DT_F64 || mom->numel != 2 * x->shape[0] * f->shape[0]))
    rc = exec_ctx_fail(c, "internal error: Moments does not fit Output");
  Tensor *pooled = fused ? exec_ctx_out(c, 1) : NULL, *mask = fused ? exec_ctx_out(c, 3) : NULL;
  bool relu = fused && exec_ctx_attr_i(c, "relu") != 0;
  const Tensor *shape = out ? out : mask;   /* Output's shape */
  if (rc == 0 && (!shape || (mask && (mask->dtype != DT_BOOL || !pooled || !relu || shape->numel != mask->numel))))
    rc = exec_ctx_fail(c, "internal error: Mask needs Pooled and relu, and stands for Output");
  if (rc == 0 && shape) {
    Window g = conv_window(c, x, shape, f);
    Epilogue e = {bias ? tensor_f32(bias) : NULL, relu, pooled ? tensor_f32(pooled) : NULL,
                  mom ? tensor_f64(mom) : NULL, mask ? tensor_bool(mask) : NULL};
    rc = conv2d_f32(c, &g, f->shape[0], exec_ctx_attr_i(c, "groups"), tensor_f32(x), tensor_f32(f),
                    out ? tensor_f32(out) : NULL, fused ? &e : NULL, NULL);
  }
  tensor_unref(x);
  tensor_unref(f);
  return rc;
}

static int k_conv2d(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0), *f = exec_ctx_in(c, 1), *out = exec_ctx_out(c, 0);
  if (out->dtype == DT_F64) {
    Window g = conv_window(c, x, out, f);
    return conv2d_f64(c, &g, f->shape[0], exec_ctx_attr_i(c, "groups"), tensor_f64(x), tensor_f64(f), tensor_f64(out),
                      NULL, NULL, NULL);
  }
  return conv_forward(c, false);
}
static int k_fused_conv2d(ExecCtx *c) { return conv_forward(c, true); }

/* fused_norm_conv2d: Y, the batch norm's output (NormIn), then conv2d of
 * it, with Moments (when training) as fused_conv2d's. */
static int k_fused_norm_conv2d(ExecCtx *c) {
  dir_cpu();   /* the kernels' ISA, before a parallel region reads it */
  Tensor *bx = exec_ctx_in(c, 0), *coef = exec_ctx_in(c, 1), *res = exec_ctx_in(c, 2),
         *f = tensor_cast(exec_ctx_in(c, 3), DT_F32), *tr = exec_ctx_in(c, 4);
  Tensor *y = exec_ctx_out(c, 0), *out = exec_ctx_out(c, 1), *mom = exec_ctx_out(c, 2);
  if (tr && tr->numel == 1 && tensor_get(tr, 0) == 0) mom = NULL;   /* not training: no batch norm reads them */
  int rc = 0;
  if (bx->dtype != DT_F32 || y->dtype != DT_F32 || coef->dtype != DT_F32 || bx->rank != 4 || y->numel != bx->numel ||
      coef->numel != 3 * bx->shape[1] || (res && (res->dtype != DT_F32 || res->numel != bx->numel)))
    rc = exec_ctx_fail(c, "internal error: X, Coef or Residual do not fit Y");
  else if (mom && (mom->dtype != DT_F64 || mom->numel != 2 * bx->shape[0] * f->shape[0]))
    rc = exec_ctx_fail(c, "internal error: Moments does not fit Output");
  if (rc == 0) {
    Window g = conv_window(c, y, out, f);
    Epilogue e = {NULL, false, NULL, mom ? tensor_f64(mom) : NULL, NULL};
    NormIn ni = {tensor_f32(bx), res ? tensor_f32(res) : NULL, tensor_f32(coef), tensor_f32(y),
                 exec_ctx_attr_b(c, "relu")};
    rc = conv2d_f32(c, &g, f->shape[0], exec_ctx_attr_i(c, "groups"), tensor_f32(y), tensor_f32(f), tensor_f32(out),
                    &e, &ni);
  }
  tensor_unref(f);
  return rc;
}

/* Pools read ksize, and strides where [] means ksize. */
static void pool_window(ExecCtx *c, const Tensor *x, const Tensor *out, Window *g) {
  int64_t ks[2];
  window_read(c, x, out, false, g);
  attr_pair(c, "ksize", ks);
  g->kh = ks[0];
  g->kw = ks[1];
  const AttrValue *st = exec_ctx_attr(c, "strides");
  if (!st || st->n == 0) {
    g->sh = ks[0];
    g->sw = ks[1];
  }
}

/* The input rows (or columns) [*lo, *hi) of the window at output position
 * o along a dimension of `size` (step, padding, window length k), clipped
 * to the input: every pooling kernel walks its windows so. */
static inline void window_span(int64_t o, int64_t step, int64_t pad, int64_t k, int64_t size, int64_t *lo,
                               int64_t *hi) {
  *lo = o * step - pad;
  *hi = *lo + k;
  if (*lo < 0) *lo = 0;
  if (*hi > size) *hi = size;
}

/* The flat index in img (rows of w) of the maximum over rows [y0, y1) and
 * columns [x0, x1): the first of equal maxima, or the last NaN (a NaN is
 * the maximum, as in PyTorch).  The selects are branch-free: on real data a
 * branch per element mispredicts often and made the pools 3x slower.  The
 * forward and the gradient both pick through this, so they agree. */
/* window_argmax for element type T. */
#define WINDOW_ARGMAX(NAME, T)                                                                         \
static inline int64_t NAME(const T *img, int64_t w, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {  \
  int64_t at = y0 * w + x0, nan_at = -1;                                                               \
  T m = img[at];                                                                                       \
  for (int64_t iy = y0; iy < y1; iy++)                                                                 \
    for (int64_t ix = x0; ix < x1; ix++) {                                                             \
      int64_t i = iy * w + ix;                                                                         \
      T v = img[i];                                                                                    \
      at = v > m ? i : at;                                                                             \
      m = v > m ? v : m;                                                                               \
      nan_at = v != v ? i : nan_at;                                                                    \
    }                                                                                                  \
  return nan_at >= 0 ? nan_at : at;                                                                    \
}
WINDOW_ARGMAX(window_argmax, float)
WINDOW_ARGMAX(window_argmax64, double)

/* The common 2x2 pool with stride 2 and no padding, whose windows tile the
 * input: window_argmax unrolled, with the same picks (the first of equal
 * maxima in the order a b / c d, or the last NaN), four windows at a time
 * in 16-byte vectors (GCC's and clang's vector extensions, so any target
 * builds it): a row of windows is two input rows split into even and odd
 * columns.  On fashion_cnn's maps the gradient went from 12 to 3.4 ms. */
static bool pool_2x2(const Window *g) {
  return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 && g->pw == 0;
}

/* Four windows whose rows start at r0 and r1: their values a b / c d, and
 * masks saying which of the four each one picks (exactly one is set). */
typedef struct Quad {
  V4f a, b, c, d;
  V4i pa, pb, pc, pd;
} Quad;

/* Picks k (0..3) where `on`, unpicks the others there: one step of
 * window_argmax's scan, four windows wide. */
static inline void quad_pick(Quad *q, int k, V4i on) {
  q->pa = k == 0 ? q->pa | on : q->pa & ~on;
  q->pb = k == 1 ? q->pb | on : q->pb & ~on;
  q->pc = k == 2 ? q->pc | on : q->pc & ~on;
  q->pd = k == 3 ? q->pd | on : q->pd & ~on;
}

static inline V4f pick_larger(V4i take, V4f x, V4f m) { return (V4f)((take & (V4i)x) | (~take & (V4i)m)); }

static inline void quad_scan(Quad *q, const float *r0, const float *r1) {
  V4f p0 = load4(r0), p1 = load4(r0 + 4), s0 = load4(r1), s1 = load4(r1 + 4);
  q->a = __builtin_shufflevector(p0, p1, 0, 2, 4, 6);
  q->b = __builtin_shufflevector(p0, p1, 1, 3, 5, 7);
  q->c = __builtin_shufflevector(s0, s1, 0, 2, 4, 6);
  q->d = __builtin_shufflevector(s0, s1, 1, 3, 5, 7);
  q->pa = ~(V4i){0};
  q->pb = q->pc = q->pd = (V4i){0};
  V4i t = q->b > q->a;
  V4f m = pick_larger(t, q->b, q->a);
  quad_pick(q, 1, t);
  t = q->c > m;
  m = pick_larger(t, q->c, m);
  quad_pick(q, 2, t);
  quad_pick(q, 3, q->d > m);
  quad_pick(q, 0, q->a != q->a);
  quad_pick(q, 1, q->b != q->b);
  quad_pick(q, 2, q->c != q->c);
  quad_pick(q, 3, q->d != q->d);
}

static inline int pick_2x2(float a, float b, float c, float d) {
  float m = a;
  int at = 0;
  at = b > m ? 1 : at, m = b > m ? b : m;
  at = c > m ? 2 : at, m = c > m ? c : m;
  at = d > m ? 3 : at;
  at = a != a ? 0 : at;
  at = b != b ? 1 : at;
  at = c != c ? 2 : at;
  return d != d ? 3 : at;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The windows ox .. ox + n (n from 1 to 16) of one output row whose input
 * rows start at r0 and r1, in AVX-512 (dir_z): their values a b / c d in
 * v[0..4) and masks f[0..4) saying which of the four each one picks, as
 * pick_2x2 does (the first largest; the last NaN over anything else). */
DIR512_TARGET static inline __attribute__((always_inline)) void quad_z(const float *r0, const float *r1, int64_t n,
                                                                        bool full, __m512 v[4], __mmask16 f[4]) {
  const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  __mmask16 lo = n >= 8 ? (__mmask16)0xFFFF : (__mmask16)((1u << (2 * n)) - 1),
            hi = n <= 8 ? (__mmask16)0 : (__mmask16)((1u << (2 * n - 16)) - 1);
  __m512 p0, p1, s0, s1;
  if (full) {
    p0 = _mm512_loadu_ps(r0), p1 = _mm512_loadu_ps(r0 + 16), s0 = _mm512_loadu_ps(r1), s1 = _mm512_loadu_ps(r1 + 16);
  } else {
    p0 = _mm512_maskz_loadu_ps(lo, r0), p1 = _mm512_maskz_loadu_ps(hi, r0 + 16);
    s0 = _mm512_maskz_loadu_ps(lo, r1), s1 = _mm512_maskz_loadu_ps(hi, r1 + 16);
  }
  v[0] = _mm512_permutex2var_ps(p0, ev, p1), v[1] = _mm512_permutex2var_ps(p0, od, p1);
  v[2] = _mm512_permutex2var_ps(s0, ev, s1), v[3] = _mm512_permutex2var_ps(s0, od, s1);
  __mmask16 t1 = _mm512_cmp_ps_mask(v[1], v[0], _CMP_GT_OQ);
  __m512 m = _mm512_mask_mov_ps(v[0], t1, v[1]);
  __mmask16 t2 = _mm512_cmp_ps_mask(v[2], m, _CMP_GT_OQ);
  m = _mm512_mask_mov_ps(m, t2, v[2]);
  __mmask16 t3 = _mm512_cmp_ps_mask(v[3], m, _CMP_GT_OQ);
  __mmask16 na = _mm512_cmp_ps_mask(v[0], v[0], _CMP_UNORD_Q), nb = _mm512_cmp_ps_mask(v[1], v[1], _CMP_UNORD_Q),
            nc = _mm512_cmp_ps_mask(v[2], v[2], _CMP_UNORD_Q), nd = _mm512_cmp_ps_mask(v[3], v[3], _CMP_UNORD_Q);
  __mmask16 ok = (__mmask16)~(na | nb | nc | nd);
  f[3] = (__mmask16)(nd | (ok & t3));
  f[2] = (__mmask16)((nc & ~nd) | (ok & t2 & ~t3));
  f[1] = (__mmask16)((nb & ~nc & ~nd) | (ok & t1 & ~t2 & ~t3));
  f[0] = (__mmask16)~(f[1] | f[2] | f[3]);
}

static inline __mmask16 lanes_z(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* m's first n lanes (at most 16) to p; all 16 when spill: the caller
 * knows that the floats past the n land where a later store writes.  On
 * this CPU (Zen 5) the masked loads and stores of a pool's short rows took
 * 2x the time of the V4 loops; plain ones, 0.55x. */
DIR512_TARGET static inline __attribute__((always_inline)) void store_z(float *p, __m512 m, int64_t n, bool spill) {
  if (n >= 16 || spill) _mm512_storeu_ps(p, m);
  else if (n > 0) _mm512_mask_storeu_ps(p, lanes_z(n), m);
}

/* pool_2x2_grad_plane in AVX-512; with relu, the gradient then kept where
 * img > 0 only (start_row's mask, img being relu's output): the bits of
 * the V4 loop and of that mask after it.  The lanes past a row's windows
 * are zeros: rows of up to 16 windows spill them into the rows below,
 * written after them (or, an odd side's last row, zeros anyway), as long
 * as the plane goes on. */
DIR512_TARGET static void pool_2x2_grad_plane_z(const Window *g, const float *img, const float *gv, float *d,
                                                bool relu) {
  const int64_t h = g->h, w = g->w, oh = g->oh, ow = g->ow;
  if (h != 2 * oh || w != 2 * ow) memset(d, 0, sizeof *d * (size_t)(h * w));
  const __m512i i0 = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i i1 = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t oy = 0; oy < oh; oy++, gv += ow) {
    const float *r0 = img + 2 * oy * w, *r1 = r0 + w;
    float *d0 = d + 2 * oy * w, *d1 = d0 + w;
    for (int64_t ox = 0; ox < ow; ox += 16) {
      int64_t n = ow - ox < 16 ? ow - ox : 16;
      bool in = (2 * oy + 1) * w + 2 * ox + 32 <= h * w;   /* both rows' 32 floats inside the plane */
      __m512 v[4];
      __mmask16 f[4];
      quad_z(r0 + 2 * ox, r1 + 2 * ox, n, in, v, f);
      if (relu)
        for (int k = 0; k < 4; k++) f[k] = (__mmask16)(f[k] & _mm512_cmp_ps_mask(v[k], zero, _CMP_GT_OQ));
      __m512 gg = oy * ow + ox + 16 <= oh * ow ? _mm512_maskz_mov_ps(lanes_z(n), _mm512_loadu_ps(gv + ox))
                                               : _mm512_maskz_loadu_ps(lanes_z(n), gv + ox);
      __m512 ga = _mm512_maskz_mov_ps(f[0], gg), gb = _mm512_maskz_mov_ps(f[1], gg),
             gc = _mm512_maskz_mov_ps(f[2], gg), gd = _mm512_maskz_mov_ps(f[3], gg);
      bool spill = ow <= 16 && in;
      store_z(d0 + 2 * ox, _mm512_permutex2var_ps(ga, i0, gb), 2 * n, spill);
      store_z(d0 + 2 * ox + 16, _mm512_permutex2var_ps(ga, i1, gb), 2 * n - 16, spill && n > 8);
      store_z(d1 + 2 * ox, _mm512_permutex2var_ps(gc, i0, gd), 2 * n, spill);
      store_z(d1 + 2 * ox + 16, _mm512_permutex2var_ps(gc, i1, gd), 2 * n - 16, spill && n > 8);
    }
  }
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
static void pool_2x2_plane_z(const Window *g, const float *img, float *y, uint8_t *m);
#endif

/* One plane of max_pool_2x2: img [H, W] to y [OH, OW], and with m its
 * mask (max_pool_2x2_mask). */
static void pool_2x2_plane(const Window *g, const float *img, float *y, uint8_t *m) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (dir_z()) {
    pool_2x2_plane_z(g, img, y, m);
    return;
  }
#endif
  const int64_t h = g->h, w = g->w, oh = g->oh, ow = g->ow;
  if (m && (h != 2 * oh || w != 2 * ow)) memset(m, 0, (size_t)(h * w));
  for (int64_t oy = 0; oy < oh; oy++, y += ow) {
    const float *r0 = img + 2 * oy * w, *r1 = r0 + w;
    uint8_t *m0 = m ? m + 2 * oy * w : NULL, *m1 = m ? m0 + w : NULL;
    /* four windows at a time; from 4 on, the last four overlap the ones
     * before them (writing the same values again) instead of a scalar tail */
    for (int64_t ox = 0; ox < ow && ow >= 4; ox += 4) {
      if (ox + 4 > ow) ox = ow - 4;
      Quad q;
      quad_scan(&q, r0 + 2 * ox, r1 + 2 * ox);
      store4(y + ox, (V4f)((q.pa & (V4i)q.a) | (q.pb & (V4i)q.b) | (q.pc & (V4i)q.c) | (q.pd & (V4i)q.d)));
      if (!m) continue;
      V4f zero = {0, 0, 0, 0};
      V4i a = q.pa & (q.a > zero), b = q.pb & (q.b > zero), c = q.pc & (q.c > zero), d = q.pd & (q.d > zero);
      for (int k = 0; k < 4; k++) {
        m0[2 * (ox + k)] = (uint8_t)(a[k] & 1), m0[2 * (ox + k) + 1] = (uint8_t)(b[k] & 1);
        m1[2 * (ox + k)] = (uint8_t)(c[k] & 1), m1[2 * (ox + k) + 1] = (uint8_t)(d[k] & 1);
      }
    }
    for (int64_t ox = 0; ox < ow && ow < 4; ox++) {
      float v[4] = {r0[2 * ox], r0[2 * ox + 1], r1[2 * ox], r1[2 * ox + 1]};
      int at = pick_2x2(v[0], v[1], v[2], v[3]);
      y[ox] = v[at];
      if (m)
        for (int k = 0; k < 4; k++) (k < 2 ? m0 : m1)[2 * ox + k % 2] = (uint8_t)(k == at && v[k] > 0);
    }
  }
}

static void max_pool_2x2(const Window *g, const float *xv, float *yv) {
  int64_t planes = g->n * g->c;
  PAR_FOR(planes > 1 && planes * g->h * g->w >= PAR_MIN_WORK)
  for (int64_t pl = 0; pl < planes; pl++)
    if (!exec_interrupted())   /* Ctrl-C between planes (an OpenMP loop cannot break) */
      pool_2x2_plane(g, xv + pl * g->h * g->w, yv + pl * g->oh * g->ow, NULL);
}

/* One plane of max_pool_2x2_grad: each window's gradient (gv, [OH, OW]) to
 * its pick in img, zeros to the rest of it, into d ([H, W]); rows and
 * columns no window covers (odd sides) are zero. */
static void pool_2x2_grad_plane(const Window *g, const float *img, const float *gv, float *d) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (dir_z()) {
    pool_2x2_grad_plane_z(g, img, gv, d, false);
    return;
  }
#endif
  const int64_t h = g->h, w = g->w, oh = g->oh, ow = g->ow;
  if (h != 2 * oh || w != 2 * ow) memset(d, 0, sizeof *d * (size_t)(h * w));
  for (int64_t oy = 0; oy < oh; oy++, gv += ow) {
    const float *r0 = img + 2 * oy * w, *r1 = r0 + w;
    float *d0 = d + 2 * oy * w, *d1 = d0 + w;
    /* as in pool_2x2_plane: the last four windows overlap */
    for (int64_t ox = 0; ox < ow && ow >= 4; ox += 4) {
      if (ox + 4 > ow) ox = ow - 4;
      Quad q;
      quad_scan(&q, r0 + 2 * ox, r1 + 2 * ox);
      V4i v = (V4i)load4(gv + ox);
      V4f ga = (V4f)(q.pa & v), gb = (V4f)(q.pb & v), gc = (V4f)(q.pc & v), gd = (V4f)(q.pd & v);
      store4(d0 + 2 * ox, __builtin_shufflevector(ga, gb, 0, 4, 1, 5));
      store4(d0 + 2 * ox + 4, __builtin_shufflevector(ga, gb, 2, 6, 3, 7));
      store4(d1 + 2 * ox, __builtin_shufflevector(gc, gd, 0, 4, 1, 5));
      store4(d1 + 2 * ox + 4, __builtin_shufflevector(gc, gd, 2, 6, 3, 7));
    }
    for (int64_t ox = 0; ox < ow && ow < 4; ox++) {
      int at = pick_2x2(r0[2 * ox], r0[2 * ox + 1], r1[2 * ox], r1[2 * ox + 1]);
      float v = gv[ox];
      d0[2 * ox] = at == 0 ? v : 0.0f;
      d0[2 * ox + 1] = at == 1 ? v : 0.0f;
      d1[2 * ox] = at == 2 ? v : 0.0f;
      d1[2 * ox + 1] = at == 3 ? v : 0.0f;
    }
  }
}

static void max_pool_2x2_grad(const Window *g, const float *xv, const float *gv, float *d) {
  int64_t planes = g->n * g->c;
  PAR_FOR(planes > 1 && planes * g->h * g->w >= PAR_MIN_WORK)
  for (int64_t pl = 0; pl < planes; pl++)
    if (!exec_interrupted())   /* Ctrl-C between planes (an OpenMP loop cannot break) */
      pool_2x2_grad_plane(g, xv + pl * g->h * g->w, gv + pl * g->oh * g->ow, d + pl * g->h * g->w);
}

/* ---- the pool's mask: where its gradient goes ----------------------------------------
 * fused_conv2d with relu and a 2x2 pool may write, instead of its Output,
 * a byte per output that says whether the pool's gradient goes there: at
 * each window's pick (pick_2x2) when the value is positive (relu's mask),
 * 0 elsewhere and where no window reaches (odd sides).  The gradient then
 * reads a quarter of Output's bytes, and the forward keeps each image's
 * output in its cache.  The pooled values and the gradients are those of
 * the pool over Output and of max_pool_2x2_grad and relu's mask after it,
 * so the bits are the same (tests/conv_direct.bats). */

/* One plane's gradient: d [H, W] = the window's gradient (gv [OH, OW])
 * where m says, else 0. */
static void pool_2x2_mask_grad_plane_v4(const Window *g, const uint8_t *m, const float *gv, float *d) {
  const int64_t h = g->h, w = g->w, oh = g->oh, ow = g->ow;
  for (int64_t y = 0; y < 2 * oh; y++) {
    const float *gr = gv + y / 2 * ow;
    const uint8_t *mr = m + y * w;
    float *dr = d + y * w;
    for (int64_t x = 0; x < ow; x++) {
      float v = gr[x];
      dr[2 * x] = mr[2 * x] ? v : 0.0f;
      dr[2 * x + 1] = mr[2 * x + 1] ? v : 0.0f;
    }
    if (w > 2 * ow) dr[w - 1] = 0.0f;
  }
  if (h > 2 * oh) memset(d + (h - 1) * w, 0, sizeof *d * (size_t)w);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* v's 16 lanes (0 or 1) as bytes to p; n of them (0 to 16), or all 16
 * when spill (see store_z). */
DIR512_TARGET static inline __attribute__((always_inline)) void bytes_z(uint8_t *p, __m512i w, int64_t n,
                                                                         bool spill) {
  __m128i v = _mm512_cvtepi32_epi8(w);
  if (n >= 16 || spill) _mm_storeu_si128((__m128i *)p, v);
  else if (n > 0) {
    uint8_t b[16];
    _mm_storeu_si128((__m128i *)b, v);
    memcpy(p, b, (size_t)n);
  }
}

/* pool_2x2_plane in AVX-512: 16 windows of a row at a time, the same
 * picks, so the same bits.  Rows of up to 16 windows (one vector) spill
 * into the rows below, written after them, as long as the plane goes on.
 * With m, also the mask (see max_pool_2x2_mask), whose rows hold two
 * windows' bytes interleaved. */
DIR512_TARGET static void pool_2x2_plane_z(const Window *g, const float *img, float *y, uint8_t *m) {
  const int64_t h = g->h, w = g->w, oh = g->oh, ow = g->ow;
  if (m && (h != 2 * oh || w != 2 * ow)) memset(m, 0, (size_t)(h * w));
  const __m512i i0 = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i i1 = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t oy = 0; oy < oh; oy++, y += ow) {
    const float *r0 = img + 2 * oy * w, *r1 = r0 + w;
    uint8_t *m0 = m ? m + 2 * oy * w : NULL, *m1 = m ? m0 + w : NULL;
    for (int64_t ox = 0; ox < ow; ox += 16) {
      int64_t n = ow - ox < 16 ? ow - ox : 16;
      bool in = (2 * oy + 1) * w + 2 * ox + 32 <= h * w;
      __m512 v[4];
      __mmask16 f[4];
      quad_z(r0 + 2 * ox, r1 + 2 * ox, n, in, v, f);
      __m512 mx = _mm512_mask_mov_ps(_mm512_mask_mov_ps(_mm512_mask_mov_ps(v[0], f[1], v[1]), f[2], v[2]), f[3], v[3]);
      store_z(y + ox, mx, n, ow <= 16 && oy * ow + 16 <= oh * ow);
      if (!m) continue;
      __m512i b[4];   /* 1 where the window's gradient goes, lanes past n 0 */
      for (int j = 0; j < 4; j++)
        b[j] = _mm512_maskz_set1_epi32((__mmask16)(f[j] & lanes_z(n) & _mm512_cmp_ps_mask(v[j], zero, _CMP_GT_OQ)), 1);
      /* a row's outputs: window i's left at 2i, its right at 2i + 1 */
      bool spill = ow <= 16 && in;
      bytes_z(m0 + 2 * ox, _mm512_permutex2var_epi32(b[0], i0, b[1]), 2 * n, spill);
      bytes_z(m0 + 2 * ox + 16, _mm512_permutex2var_epi32(b[0], i1, b[1]), 2 * n - 16, spill && n > 8);
      bytes_z(m1 + 2 * ox, _mm512_permutex2var_epi32(b[2], i0, b[3]), 2 * n, spill);
      bytes_z(m1 + 2 * ox + 16, _mm512_permutex2var_epi32(b[2], i1, b[3]), 2 * n - 16, spill && n > 8);
    }
  }
}

/* pool_2x2_mask_grad_plane_v4 in AVX-512: 16 outputs of a row at a time
 * (eight windows' gradients, each twice); the lanes past a row land in
 * the rows below, written after it, as long as the plane goes on. */
DIR512_TARGET static void pool_2x2_mask_grad_plane_z(const Window *g, const uint8_t *m, const float *gv, float *d) {
  const int64_t h = g->h, w = g->w, oh = g->oh, ow = g->ow;
  const __m512i twice = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  for (int64_t y = 0; y < 2 * oh; y++) {
    const float *gr = gv + y / 2 * ow;
    const uint8_t *mr = m + y * w;
    float *dr = d + y * w;
    int64_t x = 0;
    for (; x < w && y * w + x + 16 <= h * w && y / 2 * ow + x / 2 + 8 <= oh * ow; x += 16) {
      __mmask16 k = _mm512_test_epi32_mask(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(mr + x))),
                                           _mm512_set1_epi32(0xFF));
      __m512 gg = _mm512_permutexvar_ps(twice, _mm512_castps256_ps512(_mm256_loadu_ps(gr + x / 2)));
      _mm512_storeu_ps(dr + x, _mm512_maskz_mov_ps(k, gg));
    }
    for (; x < w; x++) dr[x] = x < 2 * ow && mr[x] ? gr[x / 2] : 0.0f;
  }
  if (h > 2 * oh) memset(d + (h - 1) * w, 0, sizeof *d * (size_t)w);
}
#endif

static void pool_2x2_mask_grad_plane(const Window *g, const uint8_t *m, const float *gv, float *d) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (dir_z()) {
    pool_2x2_mask_grad_plane_z(g, m, gv, d);
    return;
  }
#endif
  pool_2x2_mask_grad_plane_v4(g, m, gv, d);
}

/* max_pool_2x2 of every plane of xv, and the mask of each (see above). */
static void max_pool_2x2_mask(const Window *g, const float *xv, float *yv, uint8_t *mask) {
  int64_t planes = g->n * g->c;
  PAR_FOR(planes > 1 && planes * g->h * g->w >= PAR_MIN_WORK)
  for (int64_t pl = 0; pl < planes; pl++)
    if (!exec_interrupted())
      pool_2x2_plane(g, xv + pl * g->h * g->w, yv + pl * g->oh * g->ow, mask + pl * g->h * g->w);
}

/* What pool_walk does at each window. */
typedef enum PoolVisit { POOL_MAX, POOL_AVG, POOL_MAX_GRAD, POOL_AVG_GRAD, POOL_MAX_PICK } PoolVisit;

/* Every window of g, plane by plane, each clipped to the input: the
 * forward pools write out[o] for window o from x; the grads add dout[o]
 * into out (X@GRAD, zeroed) at the pick (max) or over the window (avg,
 * each element dout[o] / (KH*KW)); the pick (max_pool2d_pick) writes
 * out[o] from dout, of x's shape, at the pick.  Each caller names one visit, so the
 * switch folds away where this is inlined. */
/* pool_walk for element type T (ARGMAX its window_argmax). */
#define POOL_WALK(NAME, T, ARGMAX)                                                                                             \
static inline __attribute__((always_inline)) void NAME(const Window *g, PoolVisit visit, const T *x, const T *dout, T *out) {  \
  double area = (double)(g->kh * g->kw);                                                                                       \
  T inv = (T)(1.0 / area);                                                                                                     \
  int64_t o = 0;                                                                                                               \
  for (int64_t pl = 0; pl < g->n * g->c; pl++) {                                                                               \
    const T *img = x ? x + pl * g->h * g->w : NULL;                                                                            \
    T *dimg = visit == POOL_MAX_PICK ? NULL : out + pl * g->h * g->w;                                                          \
    for (int64_t oy = 0; oy < g->oh; oy++) {                                                                                   \
      int64_t y0, y1;                                                                                                          \
      window_span(oy, g->sh, g->ph, g->kh, g->h, &y0, &y1);                                                                    \
      if (exec_interrupted()) return;   /* Ctrl-C between rows of windows, and between large windows */                        \
      for (int64_t ox = 0; ox < g->ow; ox++, o++) {                                                                            \
        int64_t x0, x1;                                                                                                        \
        if (area > 4096 && exec_interrupted()) return;                                                                         \
        window_span(ox, g->sw, g->pw, g->kw, g->w, &x0, &x1);                                                                  \
        switch (visit) {                                                                                                       \
        case POOL_MAX: out[o] = img[ARGMAX(img, g->w, y0, y1, x0, x1)]; break;                                                 \
        case POOL_AVG: {                                                                                                       \
          double s = 0;                                                                                                        \
          for (int64_t iy = y0; iy < y1; iy++)                                                                                 \
            for (int64_t ix = x0; ix < x1; ix++) s += (double)img[iy * g->w + ix];                                             \
          out[o] = (T)(s / area);                                                                                              \
          break;                                                                                                               \
        }                                                                                                                      \
        case POOL_MAX_GRAD: dimg[ARGMAX(img, g->w, y0, y1, x0, x1)] += dout[o]; break;                                         \
        case POOL_MAX_PICK: out[o] = dout[pl * g->h * g->w + ARGMAX(img, g->w, y0, y1, x0, x1)]; break;                         \
        case POOL_AVG_GRAD: {                                                                                                  \
          T v = dout[o] * inv;                                                                                                 \
          for (int64_t iy = y0; iy < y1; iy++)                                                                                 \
            for (int64_t ix = x0; ix < x1; ix++) dimg[iy * g->w + ix] += v;                                                    \
          break;                                                                                                               \
        }                                                                                                                      \
        }                                                                                                                      \
      }                                                                                                                        \
    }                                                                                                                          \
  }                                                                                                                            \
}
POOL_WALK(pool_walk, float, window_argmax)
POOL_WALK(pool_walk64, double, window_argmax64)

/* max_pool2d and avg_pool2d.  Max: each window clipped to the input, so
 * padding never wins a max (inference keeps paddings at most half of ksize,
 * so no window is all padding).  Avg: the sum of each window's unpadded
 * elements over KH*KW: padding counts as zeros in the mean, PyTorch's
 * default (count_include_pad=True). */
static int pool_run(ExecCtx *c, bool max) {
  if (exec_ctx_out(c, 0)->dtype == DT_F64) {   /* f64: the general walk */
    Tensor *x64 = exec_ctx_in(c, 0), *o64 = exec_ctx_out(c, 0);
    Window g;
    pool_window(c, x64, o64, &g);
    pool_walk64(&g, max ? POOL_MAX : POOL_AVG, tensor_f64(x64), NULL, tensor_f64(o64));
    return 0;
  }
  dir_cpu();   /* the 2x2 pool's ISA */
  Tensor *x = tensor_cast(exec_ctx_in(c, 0), DT_F32), *out = exec_ctx_out(c, 0);
  Window g;
  pool_window(c, x, out, &g);
  const float *xv = tensor_f32(x);
  float *y = tensor_f32(out);
  if (max && pool_2x2(&g)) max_pool_2x2(&g, xv, y);
  else if (max) pool_walk(&g, POOL_MAX, xv, NULL, y);
  else pool_walk(&g, POOL_AVG, xv, NULL, y);
  tensor_unref(x);
  return 0;
}

static int k_max_pool2d(ExecCtx *c) { return pool_run(c, true); }
static int k_avg_pool2d(ExecCtx *c) { return pool_run(c, false); }

/* ---- kernels: upsample_nearest2d ----------------------------------------------------- */

/* Out[n, c, y, x] = X[n, c, y / sh, x / sw]: each input row is widened
 * once, then copied to the sh - 1 rows below it.  Planes go to threads. */
/* upsample_nearest2d (grad: its gradient) in f64: element by element. */
static int upsample64(ExecCtx *c, bool grad) {
  Tensor *x = exec_ctx_in(c, 0), *o = grad ? exec_ctx_in(c, 1) : exec_ctx_out(c, 0), *dx = grad ? exec_ctx_out(c, 0) : NULL;
  int64_t sc[2];
  attr_pair(c, "scale", sc);
  int64_t h = x->shape[2], w = x->shape[3], oh = h * sc[0], ow = w * sc[1];
  if (o->numel != x->numel * sc[0] * sc[1]) return exec_ctx_fail(c, "internal error: Out does not fit X scaled");
  if (dx) memset(dx->data, 0, sizeof(double) * (size_t)dx->numel);
  for (int64_t i = 0; i < o->numel; i++) {
    int64_t pl = i / (oh * ow), y = i / ow % oh, xo = i % ow, at = (pl * h + y / sc[0]) * w + xo / sc[1];
    if (dx) tensor_f64(dx)[at] += tensor_f64(o)[i];
    else tensor_f64(o)[i] = tensor_f64(x)[at];
  }
  return 0;
}

static int k_upsample(ExecCtx *c) {
  if (exec_ctx_out(c, 0)->dtype == DT_F64) return upsample64(c, false);
  Tensor *x = tensor_cast(exec_ctx_in(c, 0), DT_F32), *out = exec_ctx_out(c, 0);
  int64_t sc[2];
  attr_pair(c, "scale", sc);
  const int64_t planes = x->shape[0] * x->shape[1], h = x->shape[2], w = x->shape[3], sh = sc[0], sw = sc[1];
  const int64_t ow = w * sw;
  const float *xv = tensor_f32(x);
  float *yv = tensor_f32(out);
  PAR_FOR(planes > 1 && out->numel >= PAR_MIN_WORK)
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t i = 0; i < h; i++) {
      const float *src = xv + (pl * h + i) * w;
      float *dst = yv + (pl * h + i) * sh * ow;
      for (int64_t j = 0; j < w; j++)
        for (int64_t k = 0; k < sw; k++) dst[j * sw + k] = src[j];
      for (int64_t r = 1; r < sh; r++) memcpy(dst + r * ow, dst, sizeof *dst * (size_t)ow);
    }
  tensor_unref(x);
  return 0;
}

/* X@GRAD[n, c, i, j] = the sum of Out@GRAD over the sh x sw block that
 * element (i, j) was copied to, row by row of the block. */
static int k_upsample_grad(ExecCtx *c) {
  if (exec_ctx_out(c, 0)->dtype == DT_F64 && exec_ctx_in(c, 1)->dtype == DT_F64) return upsample64(c, true);
  Tensor *x = exec_ctx_in(c, 0), *dout = exec_ctx_in(c, 1), *dx = exec_ctx_out(c, 0);
  int64_t sc[2];
  attr_pair(c, "scale", sc);
  const int64_t planes = x->shape[0] * x->shape[1], h = x->shape[2], w = x->shape[3], sh = sc[0], sw = sc[1];
  const int64_t ow = w * sw;
  if (dout->dtype != DT_F32 || dout->numel != x->numel * sh * sw)
    return exec_ctx_fail(c, "internal error: Out@GRAD does not fit X scaled by [%lld, %lld]", (long long)sh,
                         (long long)sw);
  const float *gv = tensor_f32(dout);
  float *dv = tensor_f32(dx);
  PAR_FOR(planes > 1 && dout->numel >= PAR_MIN_WORK)
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t i = 0; i < h; i++) {
      float *d = dv + (pl * h + i) * w;
      const float *g = gv + (pl * h + i) * sh * ow;
      for (int64_t j = 0; j < w; j++) {
        float acc = 0;
        for (int64_t r = 0; r < sh; r++)
          for (int64_t k = 0; k < sw; k++) acc += g[r * ow + j * sw + k];
        d[j] = acc;
      }
    }
  return 0;
}

/* ---- gradients ------------------------------------------------------------------ */

/* Output slot S@GRAD gets the dtype and shape of input slot S. */
static void infer_grad_like(InferCtx *c, const char *slot, const char *gslot) {
  const VarDesc *v = reg_infer_in(c, slot, 0);
  if (v && reg_infer_out_count(c, gslot) > 0) reg_infer_set(c, gslot, 0, v->dtype, &v->shape);
}

static bool infer_conv2d_grad(InferCtx *c) {
  infer_grad_like(c, "Input", "Input@GRAD");
  infer_grad_like(c, "Filter", "Filter@GRAD");
  return true;
}

static bool infer_fused_conv2d_grad(InferCtx *c) {
  infer_grad_like(c, "Input", "Input@GRAD");
  infer_grad_like(c, "Filter", "Filter@GRAD");
  infer_grad_like(c, "Bias", "Bias@GRAD");
  return true;
}

static bool infer_pool_grad(InferCtx *c) {
  infer_grad_like(c, "X", "X@GRAD");
  return true;
}

/* col2im: the adjoint of im2col, for channel ci.  Adds each of its rows
 * of col[cg*KH*KW, OH*OW] (row stride ld) back onto the taps it was read
 * from, into `padded` ([cg, H+2ph, W+2pw], zeroed by the caller) or,
 * without padding, into the image gradient itself. */
SIMD_CLONES static void col2im(const float *col, int64_t ld, int64_t ci, const Window *g, float *dst) {
  const int64_t oh = g->oh, ow = g->ow, kh = g->kh, kw = g->kw, sh = g->sh, sw = g->sw;
  const int64_t dh = g->dh, dw = g->dw, hp = g->h + 2 * g->ph, wp = g->w + 2 * g->pw;
  for (int64_t ki = 0; ki < kh; ki++)
    for (int64_t kj = 0; kj < kw; kj++) {
      const float *row = col + ((ci * kh + ki) * kw + kj) * ld;
      float *tap = dst + (ci * hp + ki * dh) * wp + kj * dw;
      for (int64_t oy = 0; oy < oh; oy++, row += ow) {
        float *d = tap + oy * sh * wp;
        if (sw == 1) add_run(d, row, ow);
        else
          for (int64_t ox = 0; ox < ow; ox++) d[ox * sw] += row[ox];
      }
    }
}

/* One image's dInput ([cg, H, W] at dimg) from its columns of dCol, a
 * channel at a time: through `padded` with padding (zeroed first, and left
 * zero if im2col is to use it again: rezero), else straight into dimg
 * (zeroed by the caller). */
static void image_grad(const float *col, int64_t ld, int64_t cg, const Window *g, float *padded, bool rezero,
                       float *dimg) {
  int64_t hp = g->h + 2 * g->ph, wp = g->w + 2 * g->pw;
  bool pad = g->ph || g->pw;
  PAR_FOR(cg > 1 && cg * g->kh * g->kw * g->oh * g->ow >= PAR_MIN_WORK)
  for (int64_t ci = 0; ci < cg; ci++) {
    if (!pad) {
      col2im(col, ld, ci, g, dimg);
      continue;
    }
    float *pc = padded + ci * hp * wp;
    memset(pc, 0, sizeof *pc * (size_t)(hp * wp));
    col2im(col, ld, ci, g, padded);
    for (int64_t y = 0; y < g->h; y++)
      memcpy(dimg + (ci * g->h + y) * g->w, pc + (y + g->ph) * wp + g->pw, sizeof *dimg * (size_t)g->w);
    if (rezero) memset(pc, 0, sizeof *pc * (size_t)(hp * wp));
  }
}

/* What fused_conv2d_grad does to each row of Output@GRAD as it gathers it:
 * relu's gradient (from relu's output, NULL without relu), and the bias's
 * gradient summed as sum_like does (f32_sum per row of OW, added to the
 * channel's float in the same order), so the bits are those of the
 * separate relu_grad, assign and sum_like. */
typedef struct Prologue {
  const float *out;    /* relu's output, laid out as Output@GRAD; or NULL */
  float *dbias;        /* [O], summed by conv2d_grad_f32 */
  bool pooled;         /* the gradients given are those of out's 2x2 max pool */
  const uint8_t *mask; /* with pooled, instead of out: where the pool's gradient goes (Mask) */
  float *sums;         /* [N, O, OH]: each row's sum, added up in order at the end */
} Prologue;

/* One plane (image b, channel ch) of the gradient: g is Output@GRAD's
 * plane, or with pooled the pool's gradient plane, routed as
 * max_pool2d_grad does from relu's output h first. */
static void start_row(const Prologue *pr, int64_t b, int64_t o, int64_t ch, const float *restrict g,
                      const float *restrict h, const Window *cw, float *restrict dst) {
  int64_t p = cw->oh * cw->ow, ow = cw->ow;
  if (pr->pooled) {
    /* one plane: no parallel region (even one not taken costs 0.4 us) */
    Window pw = pool_2x2_window(1, cw->oh, cw->ow);
    if (pr->mask) pool_2x2_mask_grad_plane(&pw, pr->mask + (b * o + ch) * p, g, dst);
#if defined(__x86_64__) && defined(__GNUC__)
    else if (dir_z()) pool_2x2_grad_plane_z(&pw, h, g, dst, true);   /* relu's mask in the same pass */
#endif
    else {
      pool_2x2_grad_plane(&pw, h, g, dst);
      for (int64_t k = 0; k < p; k++) {
        float dk = dst[k], hk = h[k];
        dst[k] = hk > 0 ? dk : 0.0f;
      }
    }
  } else if (h) {
    /* both loaded unconditionally, so the loop is a vector select, not a
     * branch that relu's random signs mispredict (2.5x slower) */
    for (int64_t k = 0; k < p; k++) {
      float gk = g[k], hk = h[k];
      dst[k] = hk > 0 ? gk : 0.0f;
    }
  } else {
    memcpy(dst, g, sizeof *dst * (size_t)p);
  }
  float *sums = pr->sums + (b * o + ch) * cw->oh;
  for (int64_t y = 0; y < cw->oh; y++) sums[y] = (float)f32_sum(dst + y * ow, ow);
}

/* The bias's gradient from the row sums start_row left, channel by channel
 * in image and row order: sum_like's order. */
static void bias_grad(const Prologue *pr, const Window *g, int64_t o) {
  for (int64_t b = 0; b < g->n; b++)
    for (int64_t ch = 0; ch < o; ch++) {
      const float *sums = pr->sums + (b * o + ch) * g->oh;
      for (int64_t y = 0; y < g->oh; y++) pr->dbias[ch] += sums[y];
    }
}

/* conv2d's gradients for the images of batch bi, each group as in
 * conv_batch, with the batch's Output@GRAD gathered into one [og, nb*P]
 * matrix dO (through pr, if not NULL):
 *   dFilter_g += dO . col^T           (col = im2col of the batch's images)
 *   dCol       = Filter_g^T . dO      then col2im into dInput.
 * din or dfilt may be NULL (not asked for). */
static void conv_grad_batch(const ConvPlan *pl, const Window *g, int64_t o, int64_t groups, int64_t bi,
                            const float *in, const float *filt, const float *dout, float *din, float *dfilt,
                            const Prologue *pr, ConvBufs *buf) {
  int64_t og = pl->og, cg = pl->cg, kk = pl->kk, p = pl->p, b0 = bi * pl->nb;
  int64_t m = g->n - b0 < pl->nb ? g->n - b0 : pl->nb, cols = m * p;
  /* Output@GRAD's plane (b, ch), or the pool gradient's */
  int64_t gp = pr && pr->pooled ? (g->oh / 2) * (g->ow / 2) : p;
  float *tmp = buf->tmp, *col = buf->col;
  if (exec_interrupted()) return;   /* Ctrl-C between batches of images (the executor fails the op) */
  for (int64_t gi = 0; gi < groups; gi++) {
    const float *w = filt + gi * og * kk, *dm = dout + (b0 * o + gi * og) * p;
    if (m > 1 || pr) {
      PAR_FOR(og > 1 && og * cols >= PAR_MIN_WORK)
      for (int64_t oc = 0; oc < og; oc++)
        for (int64_t b = 0; b < m; b++) {
          int64_t ch = gi * og + oc, at = ((b0 + b) * o + ch) * p;
          if (pr)
            start_row(pr, b0 + b, o, ch, dout + at / p * gp, pr->out ? pr->out + at : NULL, g,
                      tmp + oc * cols + b * p);
          else
            memcpy(tmp + oc * cols + b * p, dout + at, sizeof *tmp * (size_t)p);
        }
      dm = tmp;
    }
    if (dfilt) {
      const float *bm = col;
      /* im2col leaves the border of `padded` zero: only its middle is written */
      for (int64_t b = 0; b < m; b++) {
        const float *img = in + ((b0 + b) * g->c + gi * cg) * g->h * g->w;
        if (pl->direct) bm = img;
        else im2col(img, cg, g, buf->padded, col + b * p, cols);
      }
      conv_gemm(pl, false, true, og, kk, cols, dm, cols, bm, cols, 1.0f, dfilt + gi * og * kk, kk);
    }
    if (!din) continue;
    if (pl->direct) {
      float *dst = din + (b0 * g->c + gi * cg) * g->h * g->w;
      conv_gemm(pl, true, false, kk, cols, og, w, kk, dm, cols, 0.0f, dst, cols);
      continue;
    }
    conv_gemm(pl, true, false, kk, cols, og, w, kk, dm, cols, 0.0f, col, cols);
    for (int64_t b = 0; b < m; b++)
      image_grad(col + b * p, cols, cg, g, buf->padded, dfilt != NULL,
                 din + ((b0 + b) * g->c + gi * cg) * g->h * g->w);
  }
}

/* The input's gradient of a direct convolution that does not keep the
 * size (strides, other paddings; conv_direct_dx), in the cv layout over
 * sh*sw phases: the input positions (Y, X) with (Y + ph) % sh = ry and
 * (X + pw) % sw = rx see only the taps i = ry + sh*a, j = rx + sw*b, and
 * for them dInput[c, Y, X] = sum over o, a, b of
 * W[o, c, i, j] . dOut[o, Y' - a, X' - b] with Y' = (Y + ph) / sh and
 * X' = (X + pw) / sw: a convolution of stride 1 of dOut, in a zero border
 * of top = ceil(kh/sh) - 1 rows and left = ceil(kw/sw) - 1 columns, with
 * the phase's taps turned around. */
typedef struct DxPhase {
  int64_t k, np;     /* taps; positions, rounded up to a tile of 6 */
  float *a;          /* the phase's filter, packed in panels of 16 input channels */
  int32_t *off;      /* [k] each tap's offset in the padded dOut */
  int32_t *pos;      /* [np] each position's Y'*wp + X' (the last repeated) */
  int32_t *at;       /* [np] its Y*W + X in dInput's plane */
} DxPhase;

typedef struct DirDx {
  int64_t hp, wp, cs, top, left, len, scratch;
  bool gaps;         /* a phase no tap reaches (its positions are zero) */
  DxPhase ph[16];    /* sh*sw phases (strides up to 4 each way) */
} DirDx;

/* conv2d's input gradient of geometry g takes the direct path: a direct
 * convolution of 16 input channels or more (the cv layout's tiles are of
 * 16 rows), its size kept (conv_same: the row layout, 4 or more), or of
 * strides up to 4. */
/* dOut's padded geometry for the phases (o channels); false if its
 * offsets would not fit in int32. */
static bool dir_dx_geom(DirDx *d, const Window *g, int64_t o) {
  int64_t sh = g->sh, sw = g->sw;
  int64_t ymax = (g->h - 1 + g->ph) / sh, xmax = (g->w - 1 + g->pw) / sw;
  *d = (DirDx){.top = (g->kh + sh - 1) / sh - 1, .left = (g->kw + sw - 1) / sw - 1};
  d->hp = (ymax + 1 > g->oh ? ymax + 1 : g->oh) + d->top;
  d->wp = (xmax + 1 > g->ow ? xmax + 1 : g->ow) + d->left;
  if (d->hp > (INT32_MAX - DIR_PAD) / d->wp) return false;
  d->cs = d->hp * d->wp + DIR_PAD;
  d->len = o * d->cs + 8;
  return o <= (INT32_MAX - 8) / d->cs;
}

static bool conv_direct_dx(const Window *g, int64_t o) {
  if (conv_same(g)) return g->c >= 4;
  DirDx d;
  return g->c >= 16 && g->sh <= 4 && g->sw <= 4 && dir_dx_geom(&d, g, o);
}

static void dir_dx_init(DirDx *d, const Window *g, int64_t o, const float *filt) {
  int64_t sh = g->sh, sw = g->sw, c = g->c, kh = g->kh, kw = g->kw, c16 = (c + 15) / 16 * 16;
  dir_dx_geom(d, g, o);   /* true: conv_direct_dx asked */
  for (int64_t ry = 0; ry < sh; ry++)
    for (int64_t rx = 0; rx < sw; rx++) {
      DxPhase *f = &d->ph[ry * sw + rx];
      int64_t na = ry < kh ? (kh - ry + sh - 1) / sh : 0, nb = rx < kw ? (kw - rx + sw - 1) / sw : 0, n = 0;
      f->k = o * na * nb;
      f->a = mem_line_calloc((size_t)(c16 * (f->k > 0 ? f->k : 1)), sizeof *f->a);
      f->off = mem_line_calloc((size_t)(f->k > 0 ? f->k : 1), sizeof *f->off);
      for (int64_t oc = 0; oc < o; oc++)
        for (int64_t a = 0; a < na; a++)
          for (int64_t b = 0; b < nb; b++) {
            int64_t t = (oc * na + a) * nb + b;
            f->off[t] = (int32_t)(oc * d->cs + (d->top - a) * d->wp + d->left - b);
            for (int64_t r = 0; r < c; r++)
              f->a[(r / 16 * f->k + t) * 16 + r % 16] = filt[((oc * c + r) * kh + ry + sh * a) * kw + rx + sw * b];
          }
      /* the phase's input positions */
      int64_t y0 = ((ry - g->ph) % sh + sh) % sh, x0 = ((rx - g->pw) % sw + sw) % sw;
      int64_t ny = y0 < g->h ? (g->h - y0 + sh - 1) / sh : 0, nx = x0 < g->w ? (g->w - x0 + sw - 1) / sw : 0;
      f->np = (ny * nx + 5) / 6 * 6;
      f->pos = mem_line_alloc(sizeof *f->pos * (size_t)(f->np > 0 ? f->np : 1));
      f->at = mem_line_alloc(sizeof *f->at * (size_t)(f->np > 0 ? f->np : 1));
      for (int64_t y = y0; y < g->h; y += sh)
        for (int64_t x = x0; x < g->w; x += sw, n++) {
          f->pos[n] = (int32_t)((y + g->ph) / sh * d->wp + (x + g->pw) / sw);
          f->at[n] = (int32_t)(y * g->w + x);
        }
      for (; n < f->np; n++) f->pos[n] = f->pos[n - 1], f->at[n] = f->at[n - 1];
      if (f->k == 0 && f->np > 0) d->gaps = true;
      if (c16 * f->np > d->scratch) d->scratch = c16 * f->np;
    }
}

/* One image's dInput ([c, H, W] at dimg) from its dOut ([o, OH, OW] at
 * g_out), through the padded buffer pad (border zero) and the scratch t. */
SIMD_CLONES static void dir_dx_image(const DirDx *d, const Window *g, int64_t o, const float *g_out, float *pad,
                                     float *t, float *dimg) {
  int64_t c = g->c, c16 = (c + 15) / 16 * 16, hw = g->h * g->w;
  for (int64_t oc = 0; oc < o; oc++)
    for (int64_t y = 0; y < g->oh; y++)
      copy_run(pad + oc * d->cs + (y + d->top) * d->wp + d->left, g_out + (oc * g->oh + y) * g->ow, g->ow);
  /* positions no tap reaches (the phases a kernel smaller than the stride
   * skips: three of a 1x1 kernel's four of stride 2) are zero: the whole
   * image zeroed first, then the other phases written */
  if (d->gaps) memset(dimg, 0, sizeof *dimg * (size_t)(c * hw));
  for (int64_t f = 0; f < g->sh * g->sw; f++) {
    const DxPhase *ph = &d->ph[f];
    int64_t n = ph->np;
    if (n == 0 || ph->k == 0) continue;
    cv_rows(ph->a, c16, pad, ph->off, ph->k, ph->pos, n, t);
    for (int64_t r = 0; r < c; r++) {
      const float *tr = t + r / 16 * n * 16 + r % 16;
      float *dr = dimg + r * hw;
      for (int64_t j = 0; j < n; j++) dr[ph->at[j]] = tr[16 * j];
    }
  }
}

static void dir_dx_free(DirDx *d, const Window *g) {
  for (int64_t f = 0; f < g->sh * g->sw; f++)
    mem_line_free(d->ph[f].a), mem_line_free(d->ph[f].off), mem_line_free(d->ph[f].pos), mem_line_free(d->ph[f].at);
}

/* Filter gradients summed in at most this many slices of the batches, each
 * its own partial sum (added up in slice order at the end): threads take
 * slices.  Their number depends on the geometry alone, so the sums are the
 * same bits on any number of threads. */
#define CONV_SLICES 16
#define CONV_SLICE_FLOATS ((int64_t)1 << 22)

/* n values of each of slices partial sums (slice s's at part + s*stride),
 * added to dfilt in slice order. */
static void add_slices(float *dfilt, const float *part, int64_t slices, int64_t n, int64_t stride) {
  for (int64_t s = 0; s < slices; s++) {
    const float *ps = part + s * stride;
    for (int64_t i = 0; i < n; i++) dfilt[i] += ps[i];
  }
}

/* How many slices the filter's gradient of units batches of images is
 * summed in (CONV_SLICES), and their partial sums (NULL: dfilt itself). */
static int64_t conv_slices(int64_t units, int64_t n, bool dfilt, float **part) {
  int64_t slices = units < CONV_SLICES ? units : CONV_SLICES;
  while (slices > 1 && slices * n > CONV_SLICE_FLOATS) slices--;
  *part = dfilt && slices > 1 ? mem_line_calloc((size_t)(slices * n), sizeof **part) : NULL;
  return slices;
}

/* Images whose filter gradients one pass of the pv kernel sums: enough
 * positions (256) that adding up its lanes costs little.  The cv kernel's
 * lanes are outputs of their own: one image at a time. */
static int64_t dir_group(const DirOut *so, const DirGeom *s) {
  return so->cv ? 1 : (256 + s->q8 - 1) / s->q8;
}

/* The filter's gradient from the images a group holds: pv, dOut's rows
 * in the padded width (their extra columns are the border's zeros) against
 * the taps of each image's padded input; cv, dOut with 16 rows side by
 * side at each position (dt) against the input at the positions.  Nine
 * (pv) or twelve (cv) taps at a time over every row: their input stays in
 * the first-level cache. */
static void dir_filter_grad(const DirOut *so, const DirGeom *s, const Window *g, int64_t o4, int64_t k6,
                             const float *d, int64_t ld, const float *dt, const float *x, int64_t lx,
                             const int32_t *off, int64_t m, float *dw) {
  if (so->cv) {
    int64_t p = g->oh * g->ow;
    for (int64_t t0 = 0; t0 < k6; t0 += 12)
      for (int64_t r = 0; r < o4; r += 32)
        for (int64_t t = t0; t < k6 && t < t0 + 12; t += 6)
          cv_filter_panels(dt + r * p, 16 * p, x, off + t, so->pos, p, dw + (r / 16 * k6 + t) * 16, 16 * k6,
                           o4 - r > 16 ? 2 : 1);
    return;
  }
  for (int64_t t0 = 0; t0 < k6; t0 += 9)
    for (int64_t r = 0; r < o4; r += 4) {
      const float *dr[4];
      for (int i = 0; i < 4; i++) dr[i] = d + (r + i) * s->cs + g->ph * s->wp + g->pw;
      int nt = k6 - t0 < 9 ? (int)(k6 - t0) : 9;
      dir_filter_taps(dr, ld, x, lx, off + t0, nt, s->q8, m, dw + r * k6 + t0, k6);
    }
}

/* ---- the filter's gradient through Winograd F(3x3, 2x2) ---------------------------------
 * dFilter = G^T [ sum over tiles of (A dy A^T) . (B^T d B) ] G: for each
 * 2x2 tile of dOut (dy) and the 4x4 block of the padded input under it (d,
 * the forward's input transform), the same bilinear form as the forward's
 * read the other way.  The sums S[e][k][c] over every tile of every image
 * are 16 products of dOut's transformed tiles (16 rows side by side at each
 * tile, as the cv layout's dOut) by the input's (cv_filter_tile: the rows'
 * lanes are outputs of their own, images in order), each slice of images
 * its own S, added up in slice order; the 3x3 filters come from their
 * total once, in double (per slice, that was 8% of a 64-channel 7x7
 * layer's forward and filter gradient). */

typedef struct WinoDw {
  Wino z;               /* the forward's geometry (rows o, channels c) */
  int64_t o16, c6;      /* rows rounded up to 16, channels to 6 */
  int64_t de;           /* the stride of dy's 16 parts: o16 * tiles, plus 16 */
  int32_t *off, *pos;   /* [c6]: channel j at j*vc (those past c at 0); [tiles]: tile ty*tw + tx's
                           place in a part of V (dir_at of ty*twp + tx) */
} WinoDw;

/* Whether dFilter of geometry g (o filters, c channels) runs through
 * Winograd: as the forward (wino_ok), with the image's tiles in one block. */
static bool wino_dw_ok(const Window *g, int64_t o) {
  if (!wino_ok(g, o, g->c)) return false;
  Wino z;
  wino_geom(&z, g, o, g->c);
  int64_t o16 = (o + 15) / 16 * 16, t = z.th * z.tw;
  return z.rb == z.th && (double)(16 * o16 + 16) * (double)t * sizeof(float) <= WINO_MAX_BYTES;
}

static void wino_dw_init(WinoDw *w, const Window *g, int64_t o) {
  wino_geom(&w->z, g, o, g->c);
  int64_t t = w->z.th * w->z.tw;
  w->o16 = (o + 15) / 16 * 16;
  w->c6 = (g->c + 5) / 6 * 6;
  w->de = w->o16 * t + 16;
  w->off = mem_line_calloc((size_t)w->c6, sizeof *w->off);
  for (int64_t j = 0; j < g->c; j++) w->off[j] = (int32_t)(j * w->z.vc);
  w->pos = mem_line_alloc(sizeof *w->pos * (size_t)t);
  for (int64_t q = 0; q < t; q++) w->pos[q] = (int32_t)dir_at(q / w->z.tw * w->z.twp + q % w->z.tw, 256);
}

static void wino_dw_free(WinoDw *w) {
  mem_line_free(w->off);
  mem_line_free(w->pos);
}

/* Per thread: the input's padded plane and transform, dOut in panels of
 * 16 rows (its rows past o zero) and transformed, and where the sums S
 * ([16][o16/16][c6][16]) of its slice go. */
typedef struct WinoDwBufs {
  float *pad, *v, *dt, *dy, *s;   /* on cache lines (mem_line_alloc), s excepted */
} WinoDwBufs;

static WinoDwBufs wino_dw_bufs(const WinoDw *w, int64_t p) {
  const Wino *z = &w->z;
  WinoDwBufs b = {.pad = mem_line_calloc((size_t)(z->c * z->hp * z->wp), sizeof(float)),
                  .dt = mem_line_calloc((size_t)(w->o16 * p), sizeof(float)),
                  .dy = mem_line_alloc(sizeof(float) * (size_t)(16 * w->de)),
                  .v = mem_line_calloc((size_t)(z->c * z->vc), sizeof(float))};
  return b;
}

static void wino_dw_bufs_free(WinoDwBufs *b) {
  mem_line_free(b->pad), mem_line_free(b->v), mem_line_free(b->dt), mem_line_free(b->dy);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* dy[e][panel][t][16] = (A g A^T)[e] for each 2x2 tile g of dOut's panels
 * dt ([o16/16][H*W][16]); positions past the image's edge are zeros. */
DIR_TARGET static void wino_dy(const WinoDw *w, const float *dt, float *dy) {
  const Wino *z = &w->z;
  int64_t p = z->h * z->w, t = z->th * z->tw;
  __m256 zero = _mm256_setzero_ps();
  for (int64_t pn = 0; pn < w->o16 / 16; pn++)
    for (int64_t ty = 0; ty < z->th; ty++)
      for (int64_t tx = 0; tx < z->tw; tx++) {
        int64_t y0 = 2 * ty, x0 = 2 * tx;
        bool right = x0 + 1 < z->w, down = y0 + 1 < z->h;
        const float *q = dt + (pn * p + y0 * z->w + x0) * 16;
        float *o = dy + (pn * t + ty * z->tw + tx) * 16;
        for (int v = 0; v < 2; v++) {
          __m256 g00 = _mm256_loadu_ps(q + 8 * v), g01 = right ? _mm256_loadu_ps(q + 16 + 8 * v) : zero;
          __m256 g10 = down ? _mm256_loadu_ps(q + z->w * 16 + 8 * v) : zero;
          __m256 g11 = down && right ? _mm256_loadu_ps(q + (z->w + 1) * 16 + 8 * v) : zero;
          __m256 h[4][2] = {{g00, g01},
                            {_mm256_add_ps(g00, g10), _mm256_add_ps(g01, g11)},
                            {_mm256_sub_ps(g00, g10), _mm256_sub_ps(g01, g11)},
                            {_mm256_sub_ps(zero, g10), _mm256_sub_ps(zero, g11)}};
          for (int i = 0; i < 4; i++) {
            _mm256_storeu_ps(o + (4 * i + 0) * w->de + 8 * v, h[i][0]);
            _mm256_storeu_ps(o + (4 * i + 1) * w->de + 8 * v, _mm256_add_ps(h[i][0], h[i][1]));
            _mm256_storeu_ps(o + (4 * i + 2) * w->de + 8 * v, _mm256_sub_ps(h[i][0], h[i][1]));
            _mm256_storeu_ps(o + (4 * i + 3) * w->de + 8 * v, _mm256_sub_ps(zero, h[i][1]));
          }
        }
      }
}
#else
static void wino_dy(const WinoDw *w, const float *dt, float *dy) { (void)w, (void)dt, (void)dy; }
#endif

/* S += this image's products: img [c, H, W], dimg [o, H, W]. */
static void wino_dw_image(const WinoDw *w, int64_t o, const float *img, const float *dimg, WinoDwBufs *b) {
  const Wino *z = &w->z;
  int64_t p = z->h * z->w, t = z->th * z->tw, np = w->o16 / 16;
  if (!wino_reads_image(z)) wino_fill(z, img, b->pad);
  wino_in(z, img, b->pad, 0, z->th, b->v);
  cv_to_panels(dimg, o, p, b->dt);
  wino_dy(w, b->dt, b->dy);
  for (int e = 0; e < 16; e++)
    for (int64_t pn = 0; pn < np; pn += 2)
      for (int64_t j = 0; j < w->c6; j += 6)
        cv_filter_panels(b->dy + e * w->de + pn * t * 16, t * 16, b->v + 16 * e, w->off + j, w->pos, t,
                         b->s + ((e * np + pn) * w->c6 + j) * 16, w->c6 * 16, np - pn > 1 ? 2 : 1);
}

typedef double V4d __attribute__((vector_size(32)));

/* df[k, c, i, j] += (G^T S G)[i][j] for the sums S of all the images,
 * in double, four filters at a time: lane l holds filter k0 + l, whose
 * sums lie side by side in s's panels of 16 rows, and computes the
 * expression of one filter, its products and sums in its order (no
 * multiply-add contracted in either version), so the bits are those of
 * one filter at a time (in scalars it was a tenth of a 64-channel 7x7
 * layer's gradient). */
SIMD_CLONES
static void wino_dw_add(const WinoDw *w, int64_t o, const float *s, float *df) {
  static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  int64_t np = w->o16 / 16, c = w->z.c;
  for (int64_t k0 = 0; k0 < o; k0 += 4)
    for (int64_t ch = 0; ch < c; ch++) {
      V4d m[4][4], t[4][3];
      for (int e = 0; e < 16; e++) {
        V4f v;
        memcpy(&v, s + ((e * np + k0 / 16) * w->c6 + ch) * 16 + k0 % 16, sizeof v);
        m[e / 4][e % 4] = __builtin_convertvector(v, V4d);
      }
      for (int a = 0; a < 4; a++)
        for (int j = 0; j < 3; j++) t[a][j] = m[a][0] * G[0][j] + m[a][1] * G[1][j] + m[a][2] * G[2][j] + m[a][3] * G[3][j];
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
          V4d r = G[0][i] * t[0][j] + G[1][i] * t[1][j] + G[2][i] * t[2][j] + G[3][i] * t[3][j];
          for (int l = 0; l < 4 && k0 + l < o; l++) df[((k0 + l) * c + ch) * 9 + i * 3 + j] += (float)r[l];
        }
    }
}

/* What fused_conv2d_grad does to dInput as each image's lands (rewrite.c,
 * dx_add): the gradient add (add_n's other operand) added, then, given
 * relu's output, relu_grad's value taken, Out > 0 ? sum : 0: the float
 * operations of add_n and relu_grad, so the same bits, while the image is
 * in cache, without writing the convolution's own gradient to memory and
 * reading it back. */
typedef struct DxAdd {
  const float *add, *relu;   /* as dInput; relu NULL: no relu */
} DxAdd;

/* fused_bn_conv2d_grad's dOut, made image by image from the gradient of
 * the batch norm that normalized Output (rewrite.c, bn_dx): dOut =
 * vmath_bn_dx of that gradient and x (the norm's X: Output) with the
 * channel's coef (the norm's Coef, [O, 6]), the batch norm's own loops,
 * so the same bits as its X@GRAD, which is never written to memory. */
typedef struct BnDx {
  const float *x, *coef;
  bool relu;
} BnDx;

SIMD_CLONES static void dx_add_run(const DxAdd *e, int64_t at, int64_t n, float *din) {
  const float *restrict a = e->add + at, *restrict h = e->relu ? e->relu + at : NULL;
  float *restrict d = din + at;
  if (!h)
    for (int64_t i = 0; i < n; i++) d[i] = a[i] + d[i];
  else {
    /* in vectors, the choice a mask (the compiler made it a branch on
     * the data, which the CPU mispredicts: the layer's gradient took 2.3x
     * its time) */
    typedef int32_t V8i __attribute__((vector_size(32)));
    const V8f zero = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      V8f av, dv, hv;
      memcpy(&av, a + i, sizeof av);
      memcpy(&dv, d + i, sizeof dv);
      memcpy(&hv, h + i, sizeof hv);
      V8f v = (V8f)((V8i)(av + dv) & (hv > zero));
      memcpy(d + i, &v, sizeof v);
    }
    for (; i < n; i++) {
      float v = a[i] + d[i], hv = h[i];
      d[i] = hv > 0 ? v : 0;
    }
  }
}

/* conv2d's gradients on the direct path (conv_direct_ok; din only if
 * conv_same), image by image in slices (conv_slices) whose filter
 * gradients are partial sums added up in order, as conv_grad_gemm's are;
 * within a slice, groups of dir_group images.  din, dfilt may be NULL;
 * pr (or NULL) as in conv_grad_batch. */
static void conv_grad_direct(const Window *g, int64_t o, const float *in, const float *filt, const float *dout,
                             float *din, float *dfilt, const Prologue *pr, const DxAdd *ea, const BnDx *bn) {
  /* the filter's gradient reads the input as the forward does (dir_sub, dir_load) */
  Window gsub = dir_sub(g);
  DirGeom s = dir_geom(&gsub);
  /* the filter gradient's layout (o rows) and the input gradient's (c rows;
   * by phases, when the size is not kept, the cv layout of DirDx) */
  bool same = conv_same(g);
  /* the same-size input gradient through Winograd (wino) or the direct kernels (dsame) */
  bool wino = din && same && wino_ok(g, g->c, o), dsame = din && same && !wino;
  DirOut so = dir_out(&s, &gsub, o), sx = dsame ? dir_out(&s, g, g->c) : (DirOut){0};
  int64_t c = g->c, kk = c * g->kh * g->kw, k6 = (kk + 5) / 6 * 6, ko = o * g->kh * g->kw;
  int64_t orr = (o + so.w - 1) / so.w * so.w, p = g->oh * g->ow, hw = g->h * g->w;
  int64_t gp = pr && pr->pooled ? (g->oh / 2) * (g->ow / 2) : p;
  /* each image's padded input (lx floats) and dOut (ld: orr channels, those past o zero) */
  int64_t m = dir_group(&so, &s), lx = dir_len(&s, c), ld = dir_len(&s, orr);
  float *a = dsame ? dir_pack(filt, o, c, g->kh, g->kw, true, sx.w) : NULL;
  int32_t *off = dir_offsets(&s, c, g->kh, g->kw), *offo = dsame ? dir_offsets(&s, o, g->kh, g->kw) : NULL;
  Wino zx;
  if (wino) wino_init(&zx, g, c, o, filt, true);
  bool wdw = dfilt && wino_dw_ok(g, o);   /* the filter's gradient through Winograd */
  WinoDw zw;
  if (wdw) wino_dw_init(&zw, g, o);
  DirDx dx;   /* the input's gradient by phases, when the size is not kept */
  if (din && !same) dir_dx_init(&dx, g, o, filt);
  /* the slices' partial sums: of dFilter, or through Winograd of the sums
   * S, which become filters once, from their total */
  float *part;
  int64_t ns = wdw ? 16 * zw.o16 * zw.c6 : o * kk;
  int64_t slices = conv_slices(g->n, ns, dfilt && !wdw, &part);
  if (wdw) part = mem_line_calloc((size_t)(slices * ns), sizeof *part);
  int threads = dir_threads(g, slices, o);
  typedef struct { float *x, *d, *dt, *t, *dw, *rows, *dp; WinoBufs wb; WinoDwBufs wd; } Bufs;
  Bufs *bufs = mem_line_calloc((size_t)threads, sizeof *bufs);
  for (int i = 0; i < threads; i++) {
    Bufs *b = &bufs[i];
    /* the padded dOut: read by the row layout's filter gradient and by
     * the same-size input gradient */
    if (dsame || (!so.cv && dfilt && !wdw)) b->d = mem_line_calloc((size_t)(m * ld), sizeof *b->d);
    if (wdw) b->wd = wino_dw_bufs(&zw, p);   /* its S: the slice's part */
    if (dfilt && !wdw) {
      b->x = mem_line_calloc((size_t)(m * lx), sizeof *b->x);
      b->dw = mem_line_alloc(sizeof *b->dw * (size_t)(orr * k6));
      if (so.cv) b->dt = mem_line_calloc((size_t)(orr * p), sizeof *b->dt);
    }
    if (din && !wino) b->t = mem_line_alloc(sizeof *b->t * (size_t)(same ? dir_scratch(&sx, &s, c) : dx.scratch));
    if (wino) b->wb = wino_bufs(&zx);
    if (din && !same) b->dp = mem_line_calloc((size_t)dx.len, sizeof *b->dp);
    if (pr || bn) b->rows = mem_line_alloc(sizeof *b->rows * (size_t)(o * p));
  }
  PAR_EACH(threads > 1, threads)
  for (int64_t sl = 0; sl < slices; sl++) {
    Bufs *bf = &bufs[par_thread()];
    int64_t end = (sl + 1) * g->n / slices;
    if (dfilt && !wdw) memset(bf->dw, 0, sizeof *bf->dw * (size_t)(orr * k6));
    if (wdw) bf->wd.s = part + sl * ns;
    for (int64_t b0 = sl * g->n / slices; b0 < end && !exec_interrupted(); b0 += m) {
      int64_t mm = end - b0 < m ? end - b0 : m;
      for (int64_t i = 0; i < mm; i++) {
        int64_t b = b0 + i, nx = b + 1 < end ? b + 1 : -1;   /* the slice's next image */
        const float *dimg = dout + b * o * p;
        ahead_clear();
        if (nx >= 0) {
          ahead_add(dout + nx * o * gp, o * gp, false);
          if (dfilt) ahead_add(in + nx * c * hw, c * hw, false);
          if (din && ea) ahead_add(ea->add + nx * c * hw, c * hw, false);
          if (din && ea && ea->relu) ahead_add(ea->relu + nx * c * hw, c * hw, false);
          if (din) ahead_add(din + nx * c * hw, c * hw, true);
          if (pr && pr->out) ahead_add(pr->out + nx * o * p, o * p, false);
          if (bn) ahead_add(bn->x + nx * o * p, o * p, false);
        }
        if (pr) {
          for (int64_t ch = 0; ch < o; ch++)
            start_row(pr, b, o, ch, dout + (b * o + ch) * gp, pr->out ? pr->out + (b * o + ch) * p : NULL,
                      g, bf->rows + ch * p);
          dimg = bf->rows;
        } else if (bn) {
          for (int64_t ch = 0; ch < o; ch++) {
            int64_t at = (b * o + ch) * p;
            vmath_bn_dx_f32(dout + at, bn->x + at, bf->rows + ch * p, p, bn->coef + 6 * ch, bn->relu);
          }
          dimg = bf->rows;
        }
        float *d = bf->d ? bf->d + i * ld : NULL;   /* NULL: not needed (see above) */
        if (d) dir_fill(&s, g, o, dimg, d);
        if (wdw) wino_dw_image(&zw, o, in + b * c * hw, dimg, &bf->wd);
        else if (dfilt) dir_load(&s, g, c, in + b * c * hw, bf->x + i * lx);
        if (dfilt && !wdw && so.cv) cv_to_panels(dimg, o, p, bf->dt);
        if (wino) wino_image(&zx, dimg, &bf->wb, din + b * c * hw);
        else if (dsame) dir_compute(&sx, &s, g, a, c, d, offo, ko, bf->t, din + b * c * hw);
        else if (din) dir_dx_image(&dx, g, o, dimg, bf->dp, bf->t, din + b * c * hw);
        if (din && ea) dx_add_run(ea, b * c * hw, c * hw, din);
      }
      if (dfilt && !wdw) dir_filter_grad(&so, &s, &gsub, orr, k6, bf->d, ld, bf->dt, bf->x, lx, off, mm, bf->dw);
    }
    if (dfilt && !wdw) {
      float *df = part ? part + sl * o * kk : dfilt;
      if (so.cv) cv_from_panels(bf->dw, k6, o, kk, df, true);
      else
        for (int64_t r = 0; r < o; r++)
          for (int64_t t = 0; t < kk; t++) df[r * kk + t] += bf->dw[r * k6 + t];
    }
  }
  for (int i = 0; i < threads; i++) {
    mem_line_free(bufs[i].x), mem_line_free(bufs[i].d), mem_line_free(bufs[i].dt), mem_line_free(bufs[i].t);
    mem_line_free(bufs[i].dw), mem_line_free(bufs[i].rows), mem_line_free(bufs[i].dp);
    if (wino) wino_bufs_free(&bufs[i].wb);
    if (wdw) wino_dw_bufs_free(&bufs[i].wd);
  }
  mem_line_free(bufs);
  if (din && !same) dir_dx_free(&dx, g);
  if (wino) wino_free(&zx);
  if (wdw) wino_dw_free(&zw);
  if (wdw) {   /* S of every slice added up in slice order, then the filters */
    int64_t runs = (ns + 1023) / 1024;
    PAR_FOR(runs > 1 && ns * slices >= PAR_MIN_WORK)
    for (int64_t r = 0; r < runs; r++) {
      int64_t i0 = r * 1024, n = ns - i0 < 1024 ? ns - i0 : 1024;
      add_slices(part + i0, part + ns + i0, slices - 1, n, ns);
    }
    wino_dw_add(&zw, o, part, dfilt);
  } else if (part) {
    add_slices(dfilt, part, slices, o * kk, o * kk);
  }
  mem_line_free(part);
  mem_line_free(offo);
  mem_line_free(off);
  mem_line_free(a);
  mem_line_free(so.pos);
  mem_line_free(sx.pos);
}


/* conv2d's gradients through im2col and GEMMs, batch by batch
 * (conv_grad_batch). */
static int conv_grad_gemm(ExecCtx *c, const Window *g, int64_t o, int64_t groups, const float *in,
                          const float *filt, const float *dout, float *din, float *dfilt, const Prologue *pr) {
  int64_t kk = g->c / groups * g->kh * g->kw;
  ConvPlan pl;
  if (!conv_plan(g, o, groups, &pl)) return conv_too_large(c, g, groups);
  float *part;
  int64_t slices = conv_slices(pl.batches, o * kk, dfilt != NULL, &part);
  conv_plan_threads(&pl, slices, pr != NULL);
  PAR_EACH(pl.threads > 1, pl.threads)
  for (int64_t s = 0; s < slices; s++) {
    ConvBufs *buf = &pl.bufs[par_thread()];
    float *df = part ? part + s * o * kk : dfilt;
    for (int64_t bi = s * pl.batches / slices; bi < (s + 1) * pl.batches / slices; bi++)
      conv_grad_batch(&pl, g, o, groups, bi, in, filt, dout, din, df, pr, buf);
  }
  if (part) add_slices(dfilt, part, slices, o * kk, o * kk);
  mem_line_free(part);
  conv_plan_free(&pl);
  return 0;
}

/* Whether conv2d_grad_run computes the input gradient on the direct path
 * (which adds DxAdd's as each image lands), not through GEMMs. */
static bool conv_dx_direct(const Window *g, int64_t o, int64_t groups) {
  bool empty = g->n == 0 || o == 0 || g->oh * g->ow == 0 || g->c / groups * g->kh * g->kw == 0;
  return !empty && conv_direct_ok(g, o, groups) && conv_direct_dx(g, o);
}

/* conv2d's gradients, batch by batch (conv_grad_batch).  Every buffer is
 * allocated once. */
static int conv2d_grad_run(ExecCtx *c, const Window *g, int64_t o, int64_t groups, const float *in,
                           const float *filt, const float *dout, float *din, float *dfilt,
                           const Prologue *pr, const DxAdd *ea, const BnDx *bn) {
  int64_t kk = g->c / groups * g->kh * g->kw, p = g->oh * g->ow;
  bool pad = g->ph || g->pw, direct = conv_direct(g);
  bool empty = g->n == 0 || o == 0 || p == 0 || kk == 0;
  /* the direct path, and whether it computes dInput (else GEMMs do) */
  bool dk = !empty && conv_direct_ok(g, o, groups), dkx = conv_dx_direct(g, o, groups);
  if (bn && !(dk && (!din || dkx))) {
    /* the GEMMs read dOut whole: made first, then the plain gradient */
    float *made = mem_line_alloc(sizeof *made * (size_t)(g->n * o * p + 1));
    PAR_FOR(g->n * o > 1 && g->n * o * p >= PAR_MIN_WORK)
    for (int64_t r = 0; r < g->n * o; r++)
      vmath_bn_dx_f32(dout + r * p, bn->x + r * p, made + r * p, p, bn->coef + 6 * (r % o), bn->relu);
    int rc = conv2d_grad_run(c, g, o, groups, in, filt, made, din, dfilt, pr, ea, NULL);
    mem_line_free(made);
    return rc;
  }
  /* dInput is accumulated in place only without padding (col2im adds into
   * it); the padded and 1x1 paths, and the direct kernels, overwrite every
   * element */
  if (din && (empty || (!pad && !direct && !dkx)))
    memset(din, 0, sizeof *din * (size_t)(g->n * g->c * g->h * g->w));
  if (dfilt) memset(dfilt, 0, sizeof *dfilt * (size_t)(o * kk));
  if (pr) memset(pr->dbias, 0, sizeof *pr->dbias * (size_t)o);
  if (pr && (g->n == 0 || o == 0 || p == 0)) return 0;
  if (!pr && empty) return 0;
  Prologue prs;
  if (pr) {
    prs = *pr;
    prs.sums = mem_line_alloc(sizeof *prs.sums * (size_t)(g->n * o * g->oh));
    pr = &prs;
  }
  int rc = 0;
  if (kk == 0) {   /* no GEMM to feed, but the bias still has a gradient */
    int64_t gp = pr->pooled ? (g->oh / 2) * (g->ow / 2) : p;
    float *row = mem_line_alloc(sizeof *row * (size_t)p);
    for (int64_t b = 0; b < g->n; b++)
      for (int64_t ch = 0; ch < o; ch++)
        start_row(pr, b, o, ch, dout + (b * o + ch) * gp, pr->out ? pr->out + (b * o + ch) * p : NULL, g,
                  row);
    mem_line_free(row);
  } else {
    /* the direct path; its input gradient through GEMMs unless its stride
     * is 1 and its padding keeps the size */
    if (dk) conv_grad_direct(g, o, in, filt, dout, dkx ? din : NULL, dfilt, pr, ea, bn);
    if (!dk || (din && !dkx))
      rc = conv_grad_gemm(c, g, o, groups, in, filt, dout, din, dk ? NULL : dfilt, pr);
  }
  if (pr) {
    if (rc == 0) bias_grad(pr, g, o);
    mem_line_free(prs.sums);
  }
  return rc;
}

/* conv2d_grad_run, then (ea) DxAdd's add to the input gradient the GEMMs
 * made (or an empty convolution's zeros), image by image. */
static int conv2d_grad_f32(ExecCtx *c, const Window *g, int64_t o, int64_t groups, const float *in,
                           const float *filt, const float *dout, float *din, float *dfilt,
                           const Prologue *pr, const DxAdd *ea, const BnDx *bn) {
  int rc = conv2d_grad_run(c, g, o, groups, in, filt, dout, din, dfilt, pr, ea, bn);
  if (din && ea && rc == 0 && !conv_dx_direct(g, o, groups)) {
    int64_t chw = g->c * g->h * g->w;
    PAR_FOR(g->n > 1 && g->n * chw >= PAR_MIN_WORK)
    for (int64_t b = 0; b < g->n; b++) dx_add_run(ea, b * chw, chw, din);
  }
  return rc;
}

/* conv2d_grad, and fused_conv2d_grad: the gradients of fused_conv2d's
 * Input, Filter and Bias from Output@GRAD and, with relu, the fused op's
 * Output (relu's); and (Add) the input gradient's DxAdd. */
static int conv_backward(ExecCtx *c, bool fused) {
  dir_cpu();   /* the kernels' ISA, before a parallel region reads it */
  Tensor *x = tensor_cast(exec_ctx_in(c, 0), DT_F32), *f = tensor_cast(exec_ctx_in(c, 1), DT_F32),
         *out = fused ? exec_ctx_in(c, 3) : NULL, *gpool = fused ? exec_ctx_in(c, 5) : NULL,
         *mask = fused ? exec_ctx_in(c, 6) : NULL, *add = fused ? exec_ctx_in_at(c, 7, 0) : NULL,
         *hrelu = fused ? exec_ctx_in_at(c, 7, 1) : NULL,
         *dout = gpool ? gpool : exec_ctx_in(c, fused ? 4 : 2), *dx = exec_ctx_out(c, 0), *df = exec_ctx_out(c, 1),
         *db = fused ? exec_ctx_out(c, 2) : NULL;
  /* The output's shape: that of its gradient, or of Output (or Mask) beside a pool's */
  const Tensor *shape = gpool ? (out ? out : mask) : dout;
  int rc = 0;
  if (fused && exec_ctx_in_count(c, 7) > 2) rc = exec_ctx_fail(c, "internal error: Add holds more than two values");
  else if ((add || hrelu) && (!add || !dx || add->dtype != DT_F32 || add->numel != dx->numel ||
                         (hrelu && (hrelu->dtype != DT_F32 || hrelu->numel != dx->numel))))
    rc = exec_ctx_fail(c, "internal error: Add does not fit Input@GRAD");
  if (rc == 0 && db && (!dout || !shape || shape->rank != 4 || db->dtype != DT_F32 || db->numel != f->shape[0] ||
             dout->dtype != DT_F32 || (out && out->dtype != DT_F32) ||
             (out && !gpool && out->numel != dout->numel) ||
             (gpool && gpool->numel != shape->shape[0] * shape->shape[1] * (shape->shape[2] / 2) *
                                           (shape->shape[3] / 2)) ||
             (mask && (!gpool || mask->dtype != DT_BOOL || mask->numel != shape->numel))))
    rc = exec_ctx_fail(c, "internal error: Bias, Output or the gradient do not fit the convolution");
  if (rc == 0) {
    Window g = conv_window(c, x, shape, f);
    Prologue pr = {out ? tensor_f32(out) : NULL, db ? tensor_f32(db) : NULL, gpool != NULL,
                   mask ? tensor_bool(mask) : NULL, NULL};
    DxAdd ea = {add ? tensor_f32(add) : NULL, hrelu ? tensor_f32(hrelu) : NULL};
    rc = conv2d_grad_f32(c, &g, f->shape[0], exec_ctx_attr_i(c, "groups"), tensor_f32(x), tensor_f32(f),
                         tensor_f32(dout), dx ? tensor_f32(dx) : NULL, df ? tensor_f32(df) : NULL,
                         db ? &pr : NULL, add ? &ea : NULL, NULL);
  }
  tensor_unref(x);
  tensor_unref(f);
  return rc;
}

/* fused_bn_conv2d_grad: conv2d's gradients, dOut made from the batch
 * norm's (BnDx), and (Add) the input gradient's DxAdd. */
static int k_fused_bn_conv2d_grad(ExecCtx *c) {
  dir_cpu();   /* the kernels' ISA, before a parallel region reads it */
  Tensor *x = tensor_cast(exec_ctx_in(c, 0), DT_F32), *f = tensor_cast(exec_ctx_in(c, 1), DT_F32);
  Tensor *bx = exec_ctx_in(c, 2), *coef = exec_ctx_in(c, 3), *dy = exec_ctx_in(c, 4);
  Tensor *add = exec_ctx_in_at(c, 5, 0), *hrelu = exec_ctx_in_at(c, 5, 1), *dx = exec_ctx_out(c, 0),
         *df = exec_ctx_out(c, 1);
  int rc = 0;
  if (exec_ctx_in_count(c, 5) > 2) rc = exec_ctx_fail(c, "internal error: Add holds more than two values");
  else if ((add || hrelu) && (!add || !dx || add->dtype != DT_F32 || add->numel != dx->numel ||
                              (hrelu && (hrelu->dtype != DT_F32 || hrelu->numel != dx->numel))))
    rc = exec_ctx_fail(c, "internal error: Add does not fit Input@GRAD");
  else if (bx->dtype != DT_F32 || dy->dtype != DT_F32 || coef->dtype != DT_F32 || bx->rank != 4 ||
           dy->numel != bx->numel || f->rank != 4 || bx->shape[1] != f->shape[0] || coef->numel != 6 * f->shape[0])
    rc = exec_ctx_fail(c, "internal error: X, Coef or Y@GRAD do not fit the convolution");
  if (rc == 0) {
    Window g = conv_window(c, x, bx, f);
    DxAdd ea = {add ? tensor_f32(add) : NULL, hrelu ? tensor_f32(hrelu) : NULL};
    BnDx bn = {tensor_f32(bx), tensor_f32(coef), exec_ctx_attr_b(c, "relu")};
    rc = conv2d_grad_f32(c, &g, f->shape[0], exec_ctx_attr_i(c, "groups"), tensor_f32(x), tensor_f32(f),
                         tensor_f32(dy), dx ? tensor_f32(dx) : NULL, df ? tensor_f32(df) : NULL, NULL,
                         add ? &ea : NULL, &bn);
  }
  tensor_unref(x);
  tensor_unref(f);
  return rc;
}

static int k_conv2d_grad(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0), *f = exec_ctx_in(c, 1), *dout = exec_ctx_in(c, 2), *dx = exec_ctx_out(c, 0), *df = exec_ctx_out(c, 1);
  if (x->dtype == DT_F64 && f->dtype == DT_F64 && dout->dtype == DT_F64) {
    Window g = conv_window(c, x, dout, f);
    return conv2d_f64(c, &g, f->shape[0], exec_ctx_attr_i(c, "groups"), tensor_f64(x), tensor_f64(f), NULL,
                      tensor_f64(dout), dx ? tensor_f64(dx) : NULL, df ? tensor_f64(df) : NULL);
  }
  return conv_backward(c, false);
}
static int k_fused_conv2d_grad(ExecCtx *c) { return conv_backward(c, true); }

/* ---- kernels: conv2d_transpose ---------------------------------------------------------
 * conv2d_transpose is the adjoint of conv2d: its Output is the gradient
 * conv2d_grad gives the input of a conv2d whose output gradient is Input
 * (same Filter, strides, paddings, dilations, groups), and the same GEMM +
 * col2im code computes it.  Its own gradients are a conv2d of Output@GRAD
 * (Input's) and conv2d's filter gradient with the roles swapped
 * (Filter's). */

/* The conv2d that conv2d_transpose is the adjoint of: its input has the
 * transpose's Output shape (out), its output Input's (in). */
static Window transpose_window(ExecCtx *c, const Tensor *in, const Tensor *out, const Tensor *f) {
  return conv_window(c, out, in, f);
}

/* conv2d_transpose in f64: conv2d's input gradient, as the f32 kernel. */
static int conv2d_transpose64(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0), *f = exec_ctx_in(c, 1), *out = exec_ctx_out(c, 0);
  Window g = transpose_window(c, x, out, f);
  return conv2d_f64(c, &g, f->shape[0], exec_ctx_attr_i(c, "groups"), NULL, tensor_f64(f), NULL, tensor_f64(x),
                    tensor_f64(out), NULL);
}

static int k_conv2d_transpose(ExecCtx *c) {
  if (exec_ctx_out(c, 0)->dtype == DT_F64) return conv2d_transpose64(c);
  Tensor *x = tensor_cast(exec_ctx_in(c, 0), DT_F32), *f = tensor_cast(exec_ctx_in(c, 1), DT_F32), *out = exec_ctx_out(c, 0);
  Window g = transpose_window(c, x, out, f);
  int rc = conv2d_grad_f32(c, &g, f->shape[0], exec_ctx_attr_i(c, "groups"), NULL, tensor_f32(f), tensor_f32(x),
                           tensor_f32(out), NULL, NULL, NULL, NULL);
  tensor_unref(x);
  tensor_unref(f);
  return rc;
}

/* conv2d_transpose_grad in f64: X@GRAD is conv2d of Output@GRAD, Filter@GRAD
 * conv2d's filter gradient with the roles of X and Output@GRAD swapped. */
static int conv2d_transpose_grad64(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0), *f = exec_ctx_in(c, 1), *dout = exec_ctx_in(c, 2), *dx = exec_ctx_out(c, 0), *df = exec_ctx_out(c, 1);
  int64_t groups = exec_ctx_attr_i(c, "groups");
  if (dout->dtype != DT_F64 || dout->rank != 4 || dout->shape[0] != x->shape[0] ||
      dout->shape[1] != f->shape[1] * groups)
    return exec_ctx_fail(c, "internal error: Output@GRAD does not fit the convolution");
  Window g = transpose_window(c, x, dout, f);
  int rc = 0;
  if (dx) rc = conv2d_f64(c, &g, f->shape[0], groups, tensor_f64(dout), tensor_f64(f), tensor_f64(dx), NULL, NULL, NULL);
  if (rc == 0 && df)
    rc = conv2d_f64(c, &g, f->shape[0], groups, tensor_f64(dout), tensor_f64(f), NULL, tensor_f64(x), NULL,
                    tensor_f64(df));
  return rc;
}

/* conv2d_transpose_grad: Input@GRAD = conv2d(Output@GRAD, Filter);
 * Filter@GRAD = conv2d's filter gradient for input Output@GRAD and output
 * gradient Input. */
static int k_conv2d_transpose_grad(ExecCtx *c) {
  if (exec_ctx_in(c, 0)->dtype == DT_F64 && exec_ctx_in(c, 1)->dtype == DT_F64) return conv2d_transpose_grad64(c);
  Tensor *x = tensor_cast(exec_ctx_in(c, 0), DT_F32), *f = tensor_cast(exec_ctx_in(c, 1), DT_F32), *dout = exec_ctx_in(c, 2);
  Tensor *dx = exec_ctx_out(c, 0), *df = exec_ctx_out(c, 1);
  int64_t groups = exec_ctx_attr_i(c, "groups");
  int rc = 0;
  if (dout->dtype != DT_F32 || dout->rank != 4 || dout->shape[0] != x->shape[0] ||
      dout->shape[1] != f->shape[1] * groups)
    rc = exec_ctx_fail(c, "internal error: Output@GRAD does not fit the convolution");
  Window g = transpose_window(c, x, dout, f);
  if (rc == 0 && dx)
    rc = conv2d_f32(c, &g, f->shape[0], groups, tensor_f32(dout), tensor_f32(f), tensor_f32(dx), NULL, NULL);
  if (rc == 0 && df)
    rc = conv2d_grad_f32(c, &g, f->shape[0], groups, tensor_f32(dout), tensor_f32(f), tensor_f32(x), NULL,
                         tensor_f32(df), NULL, NULL, NULL);
  tensor_unref(x);
  tensor_unref(f);
  return rc;
}

/* max_pool2d_grad and avg_pool2d_grad in f64: each window's Out@GRAD goes
 * to the element the forward picked (window_argmax64), or spread evenly. */
static int pool_grad64(ExecCtx *c, PoolVisit visit) {
  Tensor *x = exec_ctx_in(c, 0), *dout = exec_ctx_in(c, 1), *dx = exec_ctx_out(c, 0);
  Window g;
  pool_window(c, x, dout, &g);
  memset(dx->data, 0, sizeof(double) * (size_t)dx->numel);
  pool_walk64(&g, visit, visit == POOL_MAX_GRAD ? tensor_f64(x) : NULL, tensor_f64(dout), tensor_f64(dx));
  return 0;
}

static int k_max_pool2d_grad(ExecCtx *c) {
  if (exec_ctx_out(c, 0)->dtype == DT_F64) return pool_grad64(c, POOL_MAX_GRAD);
  dir_cpu();
  Tensor *x = tensor_cast(exec_ctx_in(c, 0), DT_F32), *dout = exec_ctx_in(c, 1), *dx = exec_ctx_out(c, 0);
  Window g;
  pool_window(c, x, dout, &g);
  const float *xv = tensor_f32(x), *gv = tensor_f32(dout);
  float *d = tensor_f32(dx);
  if (pool_2x2(&g)) {
    max_pool_2x2_grad(&g, xv, gv, d);
    tensor_unref(x);
    return 0;
  }
  memset(d, 0, sizeof *d * (size_t)dx->numel);
  pool_walk(&g, POOL_MAX_GRAD, xv, gv, d);
  tensor_unref(x);
  return 0;
}

/* avg_pool2d_grad: each window's Out@GRAD / (KH*KW) is added to its
 * unpadded elements (padding took its share, as in the forward). */
static int k_avg_pool2d_grad(ExecCtx *c) {
  if (exec_ctx_out(c, 0)->dtype == DT_F64) return pool_grad64(c, POOL_AVG_GRAD);
  Tensor *x = exec_ctx_in(c, 0), *dout = exec_ctx_in(c, 1), *dx = exec_ctx_out(c, 0);
  Window g;
  pool_window(c, x, dout, &g);
  const float *gv = tensor_f32(dout);
  float *d = tensor_f32(dx);
  memset(d, 0, sizeof *d * (size_t)dx->numel);
  pool_walk(&g, POOL_AVG_GRAD, NULL, gv, d);
  return 0;
}

/* max_pool2d_pick: Out[o] = G at the element window o of X picks — what
 * max_pool2d_grad's gradient needs (it is that op's adjoint). */
static int k_max_pool2d_pick(ExecCtx *c) {
  Tensor *x = tensor_cast(exec_ctx_in(c, 0), DT_F32), *gx = exec_ctx_in(c, 1), *out = exec_ctx_out(c, 0);
  if (gx->dtype != DT_F32 || gx->numel != x->numel) {
    tensor_unref(x);
    return exec_ctx_fail(c, "internal error: G must be f32 of X's shape");
  }
  Window g;
  pool_window(c, x, out, &g);
  pool_walk(&g, POOL_MAX_PICK, tensor_f32(x), tensor_f32(gx), tensor_f32(out));
  tensor_unref(x);
  return 0;
}

/* ---- gradients of the grad ops ----
 * Composite, so that a backward can be differentiated again.  conv2d and
 * conv2d_transpose are bilinear, Output = T(Input, Filter), so their grad
 * op's outputs GI(D, Filter) and GF(Input, D) are linear in each argument;
 * with A and B the gradients of GI and GF:
 *   D gets T(A, Filter) + T(Input, B),
 *   Filter gets GF(A, D), Input gets GI(D, B) (the grad op again).
 * The pools' and upsample's grad ops are linear in D = Out@GRAD: D gets
 * the forward op on G (avg_pool2d, upsample_nearest2d: each is the other's
 * adjoint) or the pick at each window's maximum (max_pool2d_pick), whose
 * own gradient is max_pool2d_grad; X only picks or gives a shape. */

/* T(in, filter) -> out, of type fwd, with the grad op's attributes. */
static void emit_bilinear(GradCtx *g, const char *fwd, const char *in, const char *filter, const char *out) {
  bwd_emit_attrs(g, bwd_emit2(g, fwd, in, filter, out));
}

/* The grad op of type gtype on (in, filter, d), one output. */
static void emit_bilinear_grad(GradCtx *g, const char *gtype, const char *in, const char *filter, const char *d,
                               const char *slot, const char *out) {
  OpDesc *op = bwd_emit(g, gtype);
  bwd_emit_in(g, op, "Input", in);
  bwd_emit_in(g, op, "Filter", filter);
  bwd_emit_in(g, op, "Output@GRAD", d);
  bwd_emit_out(g, op, slot, out);
  bwd_emit_attrs(g, op);
}

static bool bilinear_grad2(GradCtx *g, const char *fwd) {
  const char *gtype = bwd_op_fwd(g)->type;
  const char *in = bwd_op_in(g, "Input", 0), *f = bwd_op_in(g, "Filter", 0), *d = bwd_op_in(g, "Output@GRAD", 0);
  const char *a = bwd_op_out(g, "Input@GRAD", 0) ? bwd_op_out_grad(g, "Input@GRAD", 0) : NULL;
  const char *b = bwd_op_out(g, "Filter@GRAD", 0) ? bwd_op_out_grad(g, "Filter@GRAD", 0) : NULL;
  const char *dd = bwd_op_in_grad(g, "Output@GRAD", 0), *di = bwd_op_in_grad(g, "Input", 0);
  const char *df = bwd_op_in_grad(g, "Filter", 0);
  if (dd && a && b) {
    const char *t = bwd_temp(g), *u = bwd_temp(g);
    emit_bilinear(g, fwd, a, f, t);
    emit_bilinear(g, fwd, in, b, u);
    bwd_emit2(g, "add", t, u, dd);
  } else if (dd && (a || b)) {
    emit_bilinear(g, fwd, a ? a : in, a ? f : b, dd);
  }
  if (df && a) emit_bilinear_grad(g, gtype, a, f, d, "Filter@GRAD", df);
  if (di && b) emit_bilinear_grad(g, gtype, in, b, d, "Input@GRAD", di);
  return true;
}

static bool g_conv2d_grad(GradCtx *g) { return bilinear_grad2(g, "conv2d"); }
static bool g_conv2d_transpose_grad(GradCtx *g) { return bilinear_grad2(g, "conv2d_transpose"); }

/* D's gradient from G = X@GRAD's: the op `type` on G, with the grad op's
 * attributes (and X, for max_pool2d_pick). */
static bool linear_grad2(GradCtx *g, const char *type, bool with_x) {
  const char *dd = bwd_op_in_grad(g, "Out@GRAD", 0), *gx = bwd_op_out_grad(g, "X@GRAD", 0);
  if (!dd) return true;
  bwd_emit_attrs(g, with_x ? bwd_emit2(g, type, bwd_op_in(g, "X", 0), gx, dd) : bwd_emit1(g, type, gx, dd));
  return true;
}

static bool g_max_pool2d_grad(GradCtx *g) { return linear_grad2(g, "max_pool2d_pick", true); }
static bool g_avg_pool2d_grad(GradCtx *g) { return linear_grad2(g, "avg_pool2d", false); }
static bool g_upsample_nearest2d_grad(GradCtx *g) { return linear_grad2(g, "upsample_nearest2d", false); }

/* max_pool2d_pick is linear in G: G gets max_pool2d_grad(X, Out@GRAD). */
static bool g_max_pool2d_pick(GradCtx *g) {
  const char *dg = bwd_op_in_grad(g, "G", 0);
  if (dg) bwd_emit_attrs(g, bwd_emit2(g, "max_pool2d_grad", bwd_op_in(g, "X", 0), bwd_op_out_grad(g, "Out", 0), dg));
  return true;
}

/* ---- the table ---------------------------------------------------------------- */

#define POOL_ATTRS                                                              \
  {{"ksize", ATTR_INTS, NULL, check_pair_positive, "window [height, width]", 2},   \
   {"strides", ATTR_INTS, "[]", check_pool_strides,                            \
    "step [height, width]; [] means ksize", 2},                                 \
   {"paddings", ATTR_INTS, "[0, 0]", check_pair_nonnegative,                   \
    "padding on each side [height, width], at most half of ksize", 2}}
#define POOL(NAME, KERNEL, DOC)                                                 \
  {.type = NAME, .doc = DOC, .in = {{"X", 0, "input [N, C, H, W]"}},            \
   .out = {{"Out", 0, "f32 [N, C, OH, OW]"}}, .attrs = POOL_ATTRS,              \
   .infer = infer_pool, .kernel = KERNEL, .grad_kind = GRAD_DEDICATED, .flags = OP_F64}
#define POOL_GRAD(NAME, KERNEL, MAKER, DOC)                                     \
  {.type = NAME, .doc = DOC,                                                    \
   .in = {{"X", SLOT_NO_GRAD, "the forward's input (its shape, the picks)"},  \
          {"Out@GRAD", 0, "the gradient of Out"}},                            \
   .out = {{"X@GRAD", 0, "the gradient of X"}}, .attrs = POOL_ATTRS,            \
   .infer = infer_pool_grad, .kernel = KERNEL, .grad_kind = GRAD_COMPOSITE, .grad = MAKER,   \
   .flags = OP_INTERNAL | OP_F64}

#define CONV_ATTR_LIST                                                          \
  {"strides", ATTR_INTS, "[1, 1]", check_pair_positive, "step [height, width]", 2},   \
  {"paddings", ATTR_INTS, "[0, 0]", check_pair_nonnegative,                     \
   "zero padding on each side [height, width]", 2},                              \
  {"dilations", ATTR_INTS, "[1, 1]", check_pair_positive,                       \
   "spacing of kernel taps [height, width]", 2},                                 \
  {"groups", ATTR_INT, "1", reg_check_positive, "channel groups; C and O divide by it"}
#define CONV_ATTRS {CONV_ATTR_LIST}
#define CONV_TRANSPOSE_ATTRS                                                    \
  {CONV_ATTR_LIST, {"output_padding", ATTR_INTS, "[0, 0]", check_pair_nonnegative, \
                    "added to one side of the output [height, width]; below strides or dilations", 2}}
#define FUSED_CONV_ATTRS {CONV_ATTR_LIST, {"relu", ATTR_BOOL, "false", NULL, "relu after the bias"}}

/* The outputs of conv2d_grad and conv2d_transpose_grad. */
#define CONV_GRAD_OUT                                                           \
  {{"Input@GRAD", SLOT_OPTIONAL, "the gradient of Input"},                     \
   {"Filter@GRAD", SLOT_OPTIONAL, "the gradient of Filter"}}

OpProto op_table_conv[] = {
    {.type = "conv2d", .doc = "Output = the 2-D cross-correlation of Input with Filter (NCHW, OIHW)",
     .in = {{"Input", 0, "images [N, C, H, W]"},
            {"Filter", 0, "kernels [O, C / groups, KH, KW]"}},
     .out = {{"Output", 0, "f32 [N, O, OH, OW]"}},
     .attrs = CONV_ATTRS,
     .infer = infer_conv2d, .kernel = k_conv2d, .grad_kind = GRAD_DEDICATED, .flags = OP_F64},
    {.type = "conv2d_grad", .doc = "the gradients of conv2d's Input and Filter (direct kernels, Winograd's F(2x2, 3x3), or GEMM + col2im)",
     .in = {{"Input", 0, "images [N, C, H, W]"}, {"Filter", 0, "kernels [O, C / groups, KH, KW]"},
            {"Output@GRAD", 0, "the gradient of Output"}},
     .out = CONV_GRAD_OUT,
     .attrs = CONV_ATTRS, .infer = infer_conv2d_grad, .kernel = k_conv2d_grad,
     .grad_kind = GRAD_COMPOSITE, .grad = g_conv2d_grad, .flags = OP_INTERNAL | OP_F64},
    {.type = "fused_conv2d",
     .doc = "Output = conv2d(Input, Filter) + Bias (if given), then relu if asked, Pooled its 2x2 max pool, "
            "and Moments its statistics per image and channel: made by the executor, not by scripts",
     .in = {{"Input", 0, "images [N, C, H, W]"},
            {"Filter", 0, "kernels [O, C / groups, KH, KW]"},
            {"Bias", SLOT_OPTIONAL, "one per output channel: [O, 1, 1] or [1, O, 1, 1]"},
            {"Training", SLOT_OPTIONAL | SLOT_NO_GRAD, "one bool: Moments is written only when it is true"}},
     .out = {{"Output", SLOT_OPTIONAL, "f32 [N, O, OH, OW] (left out when Mask stands for it)"},
             {"Pooled", SLOT_OPTIONAL, "Output's 2x2 max pool, stride 2: [N, O, OH / 2, OW / 2]"},
             {"Moments", SLOT_OPTIONAL,
              "f64 [N, O, 2]: each image's sum and squared deviations per channel of Output, for the batch "
              "norm that reads it"},
             {"Mask", SLOT_OPTIONAL,
              "bool [N, O, OH, OW]: true at each pool window's pick when it is positive (with relu and "
              "Pooled), where the gradient goes; for fused_conv2d_grad, instead of Output"}},
     .attrs = FUSED_CONV_ATTRS,
     .infer = infer_fused_conv2d, .kernel = k_fused_conv2d, .grad_kind = GRAD_NONE,
     .flags = OP_INTERNAL | OP_AFTER_BACKWARD},
    {.type = "fused_norm_conv2d",
     .doc = "Y = a batch norm's output (and relu) from its X and Coef, and Output = conv2d(Y, Filter), Y made image "
            "by image as the convolution reads it: made by the executor",
     .in = {{"X", SLOT_NO_GRAD, "the batch norm's X [N, C, H, W]"},
            {"Coef", SLOT_NO_GRAD, "the batch norm's Coef, [C, 3]"},
            {"Residual", SLOT_OPTIONAL | SLOT_NO_GRAD, "the batch norm's Residual"},
            {"Filter", SLOT_NO_GRAD, "kernels [O, C / groups, KH, KW]"},
            {"Training", SLOT_OPTIONAL | SLOT_NO_GRAD, "one bool: Moments is written only when it is true"}},
     .out = {{"Y", 0, "the batch norm's output, X's shape"},
             {"Output", 0, "f32 [N, O, OH, OW]"},
             {"Moments", SLOT_OPTIONAL, "as fused_conv2d's"}},
     .attrs = {CONV_ATTR_LIST, {"relu", ATTR_BOOL, "false", NULL, "the batch norm's relu"}},
     .infer = infer_fused_norm_conv2d, .kernel = k_fused_norm_conv2d, .grad_kind = GRAD_NONE,
     .flags = OP_INTERNAL | OP_AFTER_BACKWARD},
    {.type = "fused_conv2d_grad",
     .doc = "the gradients of fused_conv2d's Input, Filter and Bias, or of a conv2d's whose Input@GRAD "
            "another gradient is added to (Add): made by the executor",
     .in = {{"Input", 0, "images [N, C, H, W]"}, {"Filter", 0, "kernels [O, C / groups, KH, KW]"},
            {"Bias", SLOT_OPTIONAL, "the bias (a fused layer's; the others need Bias@GRAD)"},
            {"Output", SLOT_OPTIONAL, "the forward's Output (with relu)"},
            {"Output@GRAD", SLOT_OPTIONAL, "the gradient of Output (or:)"},
            {"Pooled@GRAD", SLOT_OPTIONAL, "the gradient of Pooled (Output or Mask is then needed)"},
            {"Mask", SLOT_OPTIONAL | SLOT_NO_GRAD, "the forward's Mask, instead of Output (with Pooled@GRAD)"},
            {"Add", SLOT_LIST | SLOT_OPTIONAL | SLOT_NO_GRAD,
             "a gradient of Input's shape that Input@GRAD adds (the add_n of the two); or it and the output "
             "of a relu whose input is Input: Input@GRAD is then relu_grad's value for the sum"}},
     .out = {{"Input@GRAD", SLOT_OPTIONAL, "the gradient of Input"},
             {"Filter@GRAD", SLOT_OPTIONAL, "the gradient of Filter"},
             {"Bias@GRAD", SLOT_OPTIONAL, "the gradient of Bias (with Bias)"}},
     .attrs = FUSED_CONV_ATTRS, .infer = infer_fused_conv2d_grad, .kernel = k_fused_conv2d_grad,
     .grad_kind = GRAD_NONE, .flags = OP_INTERNAL | OP_AFTER_BACKWARD},
    {.type = "fused_bn_conv2d_grad",
     .doc = "the gradients of a conv2d's Input and Filter whose Output a batch norm (and relu) normalized, from the "
            "batch norm's: its dX made image by image, not written (and Add as fused_conv2d_grad's): made by the "
            "executor",
     .in = {{"Input", 0, "images [N, C, H, W]"}, {"Filter", 0, "kernels [O, C / groups, KH, KW]"},
            {"X", SLOT_NO_GRAD, "the batch norm's X: the convolution's Output"},
            {"Coef", SLOT_NO_GRAD, "the batch norm gradient's Coef, [O, 6]"},
            {"Y@GRAD", 0, "the gradient of the batch norm's Y (of its relu's Out with relu)"},
            {"Add", SLOT_LIST | SLOT_OPTIONAL | SLOT_NO_GRAD, "as fused_conv2d_grad's"}},
     .out = CONV_GRAD_OUT,
     .attrs = {CONV_ATTR_LIST, {"relu", ATTR_BOOL, "false", NULL, "the batch norm's relu"}},
     .infer = infer_fused_conv2d_grad, .kernel = k_fused_bn_conv2d_grad,
     .grad_kind = GRAD_NONE, .flags = OP_INTERNAL | OP_AFTER_BACKWARD},
    {.type = "conv2d_transpose",
     .doc = "Output = the transposed 2-D convolution of Input with Filter (NCHW; the adjoint of conv2d)",
     .in = {{"Input", 0, "images [N, C, H, W]"}, {"Filter", 0, "kernels [C, O / groups, KH, KW]"}},
     .out = {{"Output", 0, "f32 [N, O, (H-1)*stride - 2*pad + dil*(KH-1) + output_padding + 1, ...]"}},
     .attrs = CONV_TRANSPOSE_ATTRS,
     .infer = infer_conv2d_transpose, .kernel = k_conv2d_transpose, .grad_kind = GRAD_DEDICATED, .flags = OP_F64},
    {.type = "conv2d_transpose_grad",
     .doc = "the gradients of conv2d_transpose's Input (a conv2d) and Filter (GEMMs)",
     .in = {{"Input", 0, "images [N, C, H, W]"}, {"Filter", 0, "kernels [C, O / groups, KH, KW]"},
            {"Output@GRAD", 0, "the gradient of Output"}},
     .out = CONV_GRAD_OUT,
     .attrs = CONV_TRANSPOSE_ATTRS, .infer = infer_conv2d_grad, .kernel = k_conv2d_transpose_grad,
     .grad_kind = GRAD_COMPOSITE, .grad = g_conv2d_transpose_grad, .flags = OP_INTERNAL | OP_F64},
    POOL("max_pool2d", k_max_pool2d,
         "Out = the maximum of each window of X (padding never wins)"),
    POOL_GRAD("max_pool2d_grad", k_max_pool2d_grad, g_max_pool2d_grad,
              "X@GRAD = Out@GRAD routed to the maximum of each window"),
    POOL("avg_pool2d", k_avg_pool2d,
         "Out = the mean of each window of X (padding counts as 0 in the mean)"),
    POOL_GRAD("avg_pool2d_grad", k_avg_pool2d_grad, g_avg_pool2d_grad,
              "X@GRAD = Out@GRAD / (KH*KW) spread over each window"),
    {.type = "max_pool2d_pick", .doc = "Out = G at the element of X each window's maximum picks",
     .in = {{"X", SLOT_NO_GRAD, "the forward's input (the picks)"}, {"G", 0, "a value of X's shape"}},
     .out = {{"Out", 0, "f32 [N, C, OH, OW]"}}, .attrs = POOL_ATTRS,
     .infer = infer_pool, .kernel = k_max_pool2d_pick, .grad_kind = GRAD_COMPOSITE, .grad = g_max_pool2d_pick,
     .flags = OP_INTERNAL},
    {.type = "upsample_nearest2d", .doc = "Out = X with each pixel repeated scale[0] times down and scale[1] across",
     .in = {{"X", 0, "images [N, C, H, W]"}}, .out = {{"Out", 0, "f32 [N, C, H * scale[0], W * scale[1]]"}},
     .attrs = {{"scale", ATTR_INTS, "[2, 2]", check_pair_positive, "integer factors [height, width]"}},
     .infer = infer_upsample, .kernel = k_upsample, .grad_kind = GRAD_DEDICATED, .flags = OP_F64},
    {.type = "upsample_nearest2d_grad", .doc = "X@GRAD = Out@GRAD summed over each pixel's block",
     .in = {{"X", SLOT_NO_GRAD, "the forward's input (its shape)"}, {"Out@GRAD", 0, "the gradient of Out"}},
     .out = {{"X@GRAD", 0, "the gradient of X"}},
     .attrs = {{"scale", ATTR_INTS, "[2, 2]", check_pair_positive, "integer factors [height, width]"}},
     .infer = infer_pool_grad, .kernel = k_upsample_grad, .grad_kind = GRAD_COMPOSITE,
     .grad = g_upsample_nearest2d_grad, .flags = OP_INTERNAL | OP_F64},
    {0},
};
