/* attention.c — scaled dot-product attention as one op, forward and
 * backward, without the [T, T] scores of a head in memory.
 *
 * attention(Q, K, V) = softmax(Q K^T / sqrt(d) [masked]) V per slice of
 * the leading axes.  The kernel walks each slice's queries in blocks of
 * ATT_ROWS rows: one product makes the block's scores [rows, Tk] in a
 * buffer of its thread, the softmax runs in place, a second product
 * multiplies by V.  In f32 the products are attmm.c's small kernels, on
 * each head where it lies; in f64, OpenBLAS's dgemm on packed heads.
 * With causal, a block needs the keys up to its last row only, and each
 * row's masked scores are 0 after the softmax, as exp(-1e9 - max) is in
 * the unfused form (stdlib's scaled_dot_product_attention before this op).
 * So memory is O(ATT_ROWS * Tk) per thread, not O(Tq * Tk) per head.
 *
 * attention_grad recomputes each block's softmax P (the same bits as the
 * forward) instead of storing it, then: dV += P^T dO, dP = dO V^T,
 * dS = P (dP - rowsum(P dP)) / sqrt(d), dQ = dS K, dK += dS^T Q.  A
 * slice's blocks run in order on one thread, so the sums into dK and dV
 * are in the same order on any number of threads (the same bits).
 * attention_grad's own gradient, for a second order, is composite (at
 * the end of this file): it holds the [Tq, Tk] matrices the unfused ops did.
 *
 * The numerics follow the unfused ops: scores divided by sqrt(d) (not
 * multiplied by its inverse), the softmax's exp, maximum and sum in
 * double those of nn.c's softmax (vmath.h), softmax_grad's row sum in
 * double. */
#include "autodiff/backward.h"
#include "exec/exec.h"
#include "exec/par.h"
#include "ops/attmm.h"
#include "ops/vmath.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* Query rows per block: a block's scores (64 x Tk floats) stay in L2. */
#define ATT_ROWS 64

/* ---- shapes ------------------------------------------------------------------- */

/* Q [..., Tq, d], K [..., Tk, d], V [..., Tk, dv], the same leading axes:
 * Out [..., Tq, dv]. */
static bool infer_attention(InferCtx *c) {
  const VarDesc *q = reg_infer_input(c, "Q"), *k = reg_infer_input(c, "K"), *v = reg_infer_input(c, "V");
  if (!q || !k || !v || !reg_infer_need_float(c, "Q", q) || !reg_infer_need_float(c, "K", k) ||
      !reg_infer_need_float(c, "V", v))
    return false;
  DType t = reg_infer_promote(reg_infer_promote(q->dtype, k->dtype), v->dtype);
  if (t != DT_F64) t = DT_F32;
  const Shape *qs = &q->shape, *ks = &k->shape, *vs = &v->shape;
  if (qs->rank < 0 || ks->rank < 0 || vs->rank < 0) {
    Shape u = shape_unknown();
    reg_infer_set(c, "Out", 0, t, &u);
    return true;
  }
  char a[128], b[128], e[128];
  if (qs->rank < 2 || ks->rank != qs->rank || vs->rank != qs->rank)
    return reg_infer_fail(c, "Q, K and V must have the same rank, 2 or more ([..., T, d]), got %s, %s and %s",
                          shape_str(qs, a, sizeof a), shape_str(ks, b, sizeof b), shape_str(vs, e, sizeof e));
  int r = qs->rank;
  Shape out = *qs;
  for (int i = 0; i < r - 2; i++) {
    if (dims_clash(qs->d[i], ks->d[i]) || dims_clash(qs->d[i], vs->d[i]))
      return reg_infer_fail(c, "Q, K and V must agree on the axes before the last two, got %s, %s and %s",
                            shape_str(qs, a, sizeof a), shape_str(ks, b, sizeof b), shape_str(vs, e, sizeof e));
    out.d[i] = dim_merge(dim_merge(qs->d[i], ks->d[i]), vs->d[i]);
  }
  if (dims_clash(qs->d[r - 1], ks->d[r - 1]))
    return reg_infer_fail(c, "Q has shape %s and K has shape %s: the last axes (the width d) differ",
                          shape_str(qs, a, sizeof a), shape_str(ks, b, sizeof b));
  if (dims_clash(ks->d[r - 2], vs->d[r - 2]))
    return reg_infer_fail(c, "K has shape %s and V has shape %s: one value per key is needed",
                          shape_str(ks, a, sizeof a), shape_str(vs, b, sizeof b));
  int64_t h = reg_infer_attr_i(c, "heads");
  if ((dim_known(qs->d[r - 1]) && qs->d[r - 1].n % h) || (dim_known(vs->d[r - 1]) && vs->d[r - 1].n % h))
    return reg_infer_fail(c, "Q has shape %s and V has shape %s: their last axes must divide into %lld heads",
                          shape_str(qs, a, sizeof a), shape_str(vs, b, sizeof b), (long long)h);
  out.d[r - 1] = vs->d[r - 1];
  reg_infer_set(c, "Out", 0, t, &out);
  return true;
}

/* attention_grad: each X@GRAD has X's shape and dtype. */
static bool infer_attention_grad(InferCtx *c) {
  static const char *const slots[][2] = {{"Q@GRAD", "Q"}, {"K@GRAD", "K"}, {"V@GRAD", "V"}};
  return reg_infer_like(c, slots, 3);
}

/* ---- kernels ------------------------------------------------------------------- */

/* One call's geometry: n slices of Q [tq, d], K [tk, d], V [tk, dv]:
 * heads slices side by side in each row of width ldq, ldk, ldv (Out's
 * and Out@GRAD's rows ldo), heads times the slice's width. */
typedef struct AttGeom {
  int64_t n, tq, tk, d, dv, heads, ldq, ldk, ldv, ldo;
  bool causal;
} AttGeom;

/* Where slice sl starts in Q (and dQ), K, V and Out (and Out@GRAD). */
typedef struct AttOff {
  size_t q, k, v, o;
} AttOff;

static AttOff att_off(const AttGeom *g, int64_t sl) {
  int64_t b = sl / g->heads, h = sl % g->heads;
  return (AttOff){.q = (size_t)(b * g->tq * g->ldq + h * g->d), .k = (size_t)(b * g->tk * g->ldk + h * g->d),
                  .v = (size_t)(b * g->tk * g->ldv + h * g->dv), .o = (size_t)(b * g->tq * g->ldo + h * g->dv)};
}

/* The keys rows r0..r1-1 see: all, or with causal those up to the last. */
static int64_t att_cols(const AttGeom *g, int64_t r1) { return g->causal && r1 < g->tk ? r1 : g->tk; }

/* The keys row r sees. */
static int64_t att_seen(const AttGeom *g, int64_t r) { return g->causal && r + 1 < g->tk ? r + 1 : g->tk; }

/* Where one slice's rows are: the row strides of its Q (and dQ), K (and
 * dK), V (and dV) and Out (and Out@GRAD), in elements. */
typedef struct AttLd {
  int64_t q, k, v, o;
} AttLd;

/* The loops for element type T.  The products, each of one head:
 *   NT(g, m, n, k, A, lda, B, ldb, BT, C, ldc, r0)   C = A B^T, with B^T
 *                                 given as BT [k, tk] (f32) or not (f64);
 *   NN(g, m, n, k, A, lda, B, ldb, C, ldc, r0)       C = A B;
 *   TN(g, m, n, k, A, lda, B, ldb, C, ldc, acc, r0)  C = A^T B, or C += with acc;
 * r0, the block's first query row, tells a causal head's products which
 * terms are zeros (attmm.h).  SOFTMAX(g, s, rows, cols, r0, root): the
 * rows of a block's scores s [rows, cols] divided by root, their softmax
 * over the keys each row sees, 0 past them.
 *   NAME_probs: P of rows r0..r1 of one slice into s [rows, cols]
 *   NAME_fwd: Out of one slice's block
 *   NAME_bwd: dQ, dK, dV of one slice (dp a second [ATT_ROWS, tk] buffer)
 * kt and vt: K^T and V^T [d, tk] (f32), else NULL. */
#define ATT_LOOPS(NAME, T, NT, NN, TN, SOFTMAX, SGRAD)                                                               \
  static void NAME##_probs(const AttGeom *g, AttLd L, const T *q, const T *k, const T *kt, int64_t r0, int64_t r1, \
                           T *s) {                                                                           \
    int64_t rows = r1 - r0, cols = att_cols(g, r1);                                                          \
    NT(g, rows, cols, g->d, q + r0 * L.q, L.q, k, L.k, kt, s, cols, r0);                                     \
    SOFTMAX(g, s, rows, cols, r0, (T)sqrt((double)g->d));                                                    \
  }                                                                                                          \
  static void NAME##_fwd(const AttGeom *g, AttLd L, const T *q, const T *k, const T *kt, const T *v, int64_t r0, \
                         int64_t r1, T *out, T *s) {                                                         \
    NAME##_probs(g, L, q, k, kt, r0, r1, s);                                                                 \
    int64_t cols = att_cols(g, r1);                                                                          \
    NN(g, r1 - r0, g->dv, cols, s, cols, v, L.v, out + r0 * L.o, L.o, r0);                                   \
  }                                                                                                          \
  static void NAME##_bwd(const AttGeom *g, AttLd L, const T *q, const T *k, const T *kt, const T *v,         \
                         const T *vt, const T *dout, T *dq, T *dk, T *dv, T *s, T *dp) {                     \
    int64_t d = g->d, w = g->dv;                                                                             \
    T root = (T)sqrt((double)d);                                                                             \
    /* the first block's TN sets dK's and dV's rows up to its cols, the rest are 0 */                        \
    for (int64_t j = att_cols(g, g->tq < ATT_ROWS ? g->tq : ATT_ROWS); j < g->tk; j++) {                     \
      memset(dk + j * L.k, 0, sizeof *dk * (size_t)d);                                                       \
      memset(dv + j * L.v, 0, sizeof *dv * (size_t)w);                                                       \
    }                                                                                                        \
    for (int64_t r0 = 0; r0 < g->tq; r0 += ATT_ROWS) {                                                       \
      int64_t r1 = r0 + ATT_ROWS < g->tq ? r0 + ATT_ROWS : g->tq, rows = r1 - r0, cols = att_cols(g, r1);    \
      NAME##_probs(g, L, q, k, kt, r0, r1, s);                                                               \
      TN(g, cols, w, rows, s, cols, dout + r0 * L.o, L.o, dv, L.v, r0 > 0, r0);                              \
      NT(g, rows, cols, w, dout + r0 * L.o, L.o, v, L.v, vt, dp, cols, r0);                                  \
      for (int64_t i = 0; i < rows; i++)                                                                     \
        SGRAD(s + i * cols, dp + i * cols, att_seen(g, r0 + i), cols, root);                                 \
      NN(g, rows, d, cols, dp, cols, k, L.k, dq + r0 * L.q, L.q, r0);                                        \
      TN(g, cols, d, rows, dp, cols, q + r0 * L.q, L.q, dk, L.k, r0 > 0, r0);                                \
    }                                                                                                        \
  }

/* f64: the softmax a row at a time (glibc's exp an element at a time: the
 * masked ones would be wasted work), OpenBLAS's dgemm on packed slices
 * (BT unused). */
/* softmax_grad of a row of probabilities p (those past seen 0) and their
 * gradient g, in place, divided by root; f32's is vmath's. */
static void att64_sgrad(const double *p, double *g, int64_t seen, int64_t cols, double root) {
  double sum = 0;
  for (int64_t j = 0; j < seen; j++) sum += g[j] * p[j];
  for (int64_t j = 0; j < seen; j++) g[j] = p[j] * (g[j] - sum) / root;
  for (int64_t j = seen; j < cols; j++) g[j] = 0;
}

static void att64_softmax(const AttGeom *g, double *s, int64_t rows, int64_t cols, int64_t r0, double root) {
  for (int64_t i = 0; i < rows; i++) {
    double *row = s + i * cols;
    int64_t seen = att_seen(g, r0 + i);
    for (int64_t j = 0; j < seen; j++) row[j] /= root;
    double m = vmath_max_f64(row, seen);
    for (int64_t j = 0; j < seen; j++) row[j] -= m;
    vmath_exp_f64(row, seen);
    double inv = 1 / vmath_sum_f64(row, seen);
    for (int64_t j = 0; j < seen; j++) row[j] *= inv;
    for (int64_t j = seen; j < cols; j++) row[j] = 0;
  }
}

static void att64_nt(const AttGeom *g, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
                     const double *b, int64_t ldb, const double *bt, double *c, int64_t ldc, int64_t r0) {
  (void)g, (void)bt, (void)r0;
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1, a, (int)lda, b, (int)ldb, 0, c,
              (int)ldc);
}

static void att64_nn(const AttGeom *g, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
                     const double *b, int64_t ldb, double *c, int64_t ldc, int64_t r0) {
  (void)g, (void)r0;
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1, a, (int)lda, b, (int)ldb, 0, c,
              (int)ldc);
}

static void att64_tn(const AttGeom *g, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
                     const double *b, int64_t ldb, double *c, int64_t ldc, bool acc, int64_t r0) {
  (void)g, (void)r0;
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1, a, (int)lda, b, (int)ldb, acc, c,
              (int)ldc);
}

/* f32: attmm.c's kernels on the heads where they lie (their bits do not
 * depend on the strides), B^T given to NT so that C's rows are the
 * vectors, a causal head's zero terms skipped. */
static void att32_mm(const AttGeom *g, int64_t m, int64_t n, int64_t k, const float *a, int64_t ars, int64_t acs,
                     const float *b, int64_t ldb, float *c, int64_t ldc, bool acc, AttMMCausal causal, int64_t r0) {
  att_mm(&(AttMM){.m = m, .n = n, .k = k, .a = a, .ars = ars, .acs = acs, .b = b, .ldb = ldb, .c = c, .ldc = ldc,
                  .acc = acc, .causal = g->causal ? causal : ATTMM_ALL, .off = r0});
}

static void att32_nt(const AttGeom *g, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                     const float *b, int64_t ldb, const float *bt, float *c, int64_t ldc, int64_t r0) {
  (void)b, (void)ldb;
  att32_mm(g, m, n, k, a, lda, 1, bt, g->tk, c, ldc, false, ATTMM_COLS, r0);
}

static void att32_nn(const AttGeom *g, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float *c, int64_t ldc, int64_t r0) {
  att32_mm(g, m, n, k, a, lda, 1, b, ldb, c, ldc, false, ATTMM_UPTO, r0);
}

static void att32_tn(const AttGeom *g, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float *c, int64_t ldc, bool acc, int64_t r0) {
  att32_mm(g, m, n, k, a, 1, lda, b, ldb, c, ldc, acc, ATTMM_FROM, r0);
}

/* f32: attmm.c's softmax, each row's passes in registers, the exp over the
 * whole block in one call (a causal row's few elements left a vector's
 * tail to the scalar loop, and char_lm's rows average 16.5). */
static void att32_softmax(const AttGeom *g, float *s, int64_t rows, int64_t cols, int64_t r0, float root) {
  att_mm_softmax(s, rows, cols, r0, g->tk, g->causal, root);
}

ATT_LOOPS(att_f32, float, att32_nt, att32_nn, att32_tn, att32_softmax, vmath_softmax_grad_row_f32)
ATT_LOOPS(att_f64, double, att64_nt, att64_nn, att64_tn, att64_softmax, att64_sgrad)

/* The geometry of Q, K and V, checked as infer_attention does (a kernel
 * may meet shapes shape inference did not know). */
static bool att_geom(ExecCtx *c, const Tensor *q, const Tensor *k, const Tensor *v, AttGeom *g) {
  int r = q->rank;
  int64_t h = exec_ctx_attr_i(c, "heads");
  bool ok = r >= 2 && k->rank == r && v->rank == r && q->shape[r - 1] == k->shape[r - 1] &&
            k->shape[r - 2] == v->shape[r - 2] && h >= 1;
  for (int i = 0; ok && i < r - 2; i++) ok = q->shape[i] == k->shape[i] && q->shape[i] == v->shape[i];
  if (!ok) {
    exec_ctx_fail(c, "Q, K and V do not fit ([..., Tq, d], [..., Tk, d], [..., Tk, dv])");
    return false;
  }
  if (q->shape[r - 1] % h || v->shape[r - 1] % h) {
    exec_ctx_fail(c, "the last axes of Q (%lld) and V (%lld) must divide into %lld heads",
                  (long long)q->shape[r - 1], (long long)v->shape[r - 1], (long long)h);
    return false;
  }
  g->heads = h;
  g->n = h;
  for (int i = 0; i < r - 2; i++) g->n *= q->shape[i];
  g->tq = q->shape[r - 2];
  g->ldq = g->ldk = q->shape[r - 1];
  g->d = g->ldq / h;
  g->tk = k->shape[r - 2];
  g->ldv = g->ldo = v->shape[r - 1];
  g->dv = g->ldv / h;
  g->causal = exec_ctx_attr_b(c, "causal");
  return true;
}

/* Input `slot` in dtype t: a new reference. */
static Tensor *att_in(ExecCtx *c, int slot, DType t) { return tensor_cast(exec_ctx_in(c, slot), t); }

/* The dtype the kernels compute in: f64 when the output is. */
static DType att_dtype(ExecCtx *c, int slot) {
  const Tensor *o = exec_ctx_out(c, slot);
  return o && o->dtype == DT_F64 ? DT_F64 : DT_F32;
}

/* One call's parts on the threads (par_parts: the pool that runs the GEMMs,
 * so a step's GEMMs and attention share one set of threads; each part
 * taken by whichever is free, so a thread another process keeps off its
 * core holds up only the part it took), or in order on this thread when
 * there is little work.  Each thread has its own buffers (par_slot): the
 * scores, then in f32 its slice's K^T and V^T; in f64 with heads > 1 its
 * slice's Q, K, V and Out (and their gradients) packed, so that dgemm runs
 * on the rows of one head (strided rows in OpenBLAS's small GEMMs took
 * 1.4x the time, and its results' bits changed with the stride).  f32's
 * kernels (attmm.c) read and write the heads where they lie.  The parts'
 * results do not depend on the threads. */
typedef struct AttRun {
  const AttGeom *g;
  DType t;
  const char *q, *k, *v, *dout;   /* where each starts (fused_attention: one QKV) */
  void *out, *dq, *dk, *dv;   /* the forward's Out, or the gradients */
  int64_t blocks;             /* the forward's blocks of ATT_ROWS rows a slice */
  size_t scores;              /* bytes of a thread's score buffers */
  size_t bytes;               /* a thread's buffers: the scores, then the packed
                                 slice (f64) or K^T and V^T (f32) */
  char *buf;
} AttRun;

/* Whether the slices are packed: f64 with heads. */
static bool att_packs(const AttRun *r) { return r->t == DT_F64 && r->g->heads > 1; }

static void att_run(AttRun *r, int64_t parts, size_t scores, size_t packed, ParPart fn) {
  const AttGeom *g = r->g;
  bool many = parts > 1 && g->n * g->tq * g->tk * (g->d + g->dv) >= 1 << 20;
  r->scores = scores;
  r->bytes = scores + (att_packs(r) ? packed : 0) +
             (r->t == DT_F32 ? sizeof(float) * (size_t)(g->tk * (g->d + g->dv)) : 0);
  r->buf = mem_alloc(NULL, r->bytes * (size_t)(many ? par_max_threads() : 1));
  if (many) par_parts(parts, fn, r);
  else
    for (int64_t p = 0; p < parts; p++) fn(r, p);
  mem_free(r->buf);
}

/* rows rows of cols elements of es bytes: from a stride of ld elements
 * into a packed array (pack), or back. */
static void att_copy(char *dst, const char *src, int64_t rows, int64_t cols, int64_t ldd, int64_t lds, size_t es) {
  for (int64_t i = 0; i < rows; i++) memcpy(dst + (size_t)(i * ldd) * es, src + (size_t)(i * lds) * es, (size_t)cols * es);
}

static void att_pack(char *dst, const char *src, int64_t rows, int64_t cols, int64_t ld, size_t es) {
  att_copy(dst, src, rows, cols, cols, ld, es);
}

static void att_unpack(char *dst, const char *src, int64_t rows, int64_t cols, int64_t ld, size_t es) {
  att_copy(dst, src, rows, cols, ld, cols, es);
}

/* A slice's Q, K and V, their row strides, and in f32 K^T and, with vt,
 * V^T (f32's NT products take B^T).  Packed (att_packs) or transposed
 * into the thread's buffers at *at, *at moved past what was written. */
typedef struct AttSlice {
  const char *q, *k, *v, *kt, *vt;
  AttLd ld;
} AttSlice;

static AttSlice att_slice(const AttRun *r, AttOff o, size_t es, char **at, bool vt) {
  const AttGeom *g = r->g;
  AttSlice x = {r->q + o.q * es, r->k + o.k * es, r->v + o.v * es, NULL, NULL, {g->ldq, g->ldk, g->ldv, g->ldo}};
  if (att_packs(r)) {
    char *pq = *at, *pk = pq + (size_t)(g->tq * g->d) * es, *pv = pk + (size_t)(g->tk * g->d) * es;
    att_pack(pq, x.q, g->tq, g->d, g->ldq, es);
    att_pack(pk, x.k, g->tk, g->d, g->ldk, es);
    att_pack(pv, x.v, g->tk, g->dv, g->ldv, es);
    *at = pv + (size_t)(g->tk * g->dv) * es;
    x.q = pq, x.k = pk, x.v = pv;
    x.ld = (AttLd){g->d, g->d, g->dv, g->dv};
  }
  if (r->t == DT_F32) {
    float *kt = (float *)(void *)*at, *vtr = kt + g->tk * g->d;
    att_mm_transpose(kt, (const float *)(const void *)x.k, g->tk, g->d, x.ld.k);
    if (vt) att_mm_transpose(vtr, (const float *)(const void *)x.v, g->tk, g->dv, x.ld.v);
    *at = (char *)(vtr + g->tk * g->dv);
    x.kt = (const char *)kt;
    x.vt = vt ? (const char *)vtr : NULL;
  }
  return x;
}

/* The forward's part p: block p % blocks of slice p / blocks. */
static void att_fwd_part(void *arg, int64_t p) {
  const AttRun *r = arg;
  const AttGeom *g = r->g;
  int64_t sl = p / r->blocks, r0 = p % r->blocks * ATT_ROWS, r1 = r0 + ATT_ROWS < g->tq ? r0 + ATT_ROWS : g->tq;
  char *s = r->buf + r->bytes * (size_t)par_slot(), *at = s + r->scores;
  size_t es = dtype_size(r->t);
  AttOff o = att_off(g, sl);
  AttSlice x = att_slice(r, o, es, &at, false);
  char *out = att_packs(r) ? at : (char *)r->out + o.o * es;   /* packed: the slice's [tq, dv] */
  if (r->t == DT_F64)
    att_f64_fwd(g, x.ld, (const double *)x.q, (const double *)x.k, NULL, (const double *)x.v, r0, r1,
                (double *)out, (double *)s);
  else
    att_f32_fwd(g, x.ld, (const float *)x.q, (const float *)x.k, (const float *)x.kt, (const float *)x.v, r0, r1,
                (float *)out, (float *)s);
  if (att_packs(r))
    att_unpack((char *)r->out + (o.o + (size_t)(r0 * g->ldo)) * es, out + (size_t)(r0 * g->dv) * es, r1 - r0,
               g->dv, g->ldo, es);
}

/* The backward's part sl: slice sl, its blocks in order. */
static void att_bwd_part(void *arg, int64_t sl) {
  const AttRun *r = arg;
  const AttGeom *g = r->g;
  char *s = r->buf + r->bytes * (size_t)par_slot(), *at = s + r->scores;
  size_t es = dtype_size(r->t), per = (size_t)(ATT_ROWS * g->tk);
  AttOff o = att_off(g, sl);
  AttSlice x = att_slice(r, o, es, &at, true);
  const char *dout = r->dout + o.o * es;
  char *dq = (char *)r->dq + o.q * es, *dk = (char *)r->dk + o.k * es, *dv = (char *)r->dv + o.v * es;
  if (att_packs(r)) {   /* packed: Out@GRAD, then the gradients */
    att_pack(at, dout, g->tq, g->dv, g->ldo, es);
    dout = at;
    dq = at + (size_t)(g->tq * g->dv) * es;
    dk = dq + (size_t)(g->tq * g->d) * es;
    dv = dk + (size_t)(g->tk * g->d) * es;
  }
  if (r->t == DT_F64)
    att_f64_bwd(g, x.ld, (const double *)x.q, (const double *)x.k, NULL, (const double *)x.v, NULL,
                (const double *)dout, (double *)dq, (double *)dk, (double *)dv, (double *)s, (double *)s + per);
  else
    att_f32_bwd(g, x.ld, (const float *)x.q, (const float *)x.k, (const float *)x.kt, (const float *)x.v,
                (const float *)x.vt, (const float *)dout, (float *)dq, (float *)dk, (float *)dv, (float *)s,
                (float *)s + per);
  if (att_packs(r)) {
    att_unpack((char *)r->dq + o.q * es, dq, g->tq, g->d, g->ldq, es);
    att_unpack((char *)r->dk + o.k * es, dk, g->tk, g->d, g->ldk, es);
    att_unpack((char *)r->dv + o.v * es, dv, g->tk, g->dv, g->ldv, es);
  }
}

/* Out of g from Q, K and V at q, k and v (elements of type t). */
static void att_forward(const AttGeom *g, DType t, const void *q, const void *k, const void *v, void *out) {
  att_mm_init();   /* on this thread, before the team runs the parts */
  AttRun r = {.g = g, .t = t, .q = q, .k = k, .v = v, .out = out, .blocks = (g->tq + ATT_ROWS - 1) / ATT_ROWS};
  size_t es = dtype_size(t);
  att_run(&r, g->n * r.blocks, es * (size_t)(ATT_ROWS * g->tk), es * (size_t)((g->tq + g->tk) * (g->d + g->dv)),
          att_fwd_part);
}

/* dQ, dK and dV of g (every element written, tq and tk > 0) from Q, K, V and dOut. */
static void att_backward(const AttGeom *g, DType t, const void *q, const void *k, const void *v, const void *dout,
                         void *dq, void *dk, void *dv) {
  att_mm_init();
  AttRun r = {.g = g, .t = t, .q = q, .k = k, .v = v, .dout = dout, .dq = dq, .dk = dk, .dv = dv};
  size_t es = dtype_size(t);
  att_run(&r, g->n, es * (size_t)(ATT_ROWS * g->tk) * 2,
          es * (size_t)(2 * (g->tq + g->tk) * g->d + (g->tq + 2 * g->tk) * g->dv), att_bwd_part);
}

static int k_attention(ExecCtx *c) {
  Tensor *out = exec_ctx_out(c, 0);
  DType t = out->dtype == DT_F64 ? DT_F64 : DT_F32;
  Tensor *q = att_in(c, 0, t), *k = att_in(c, 1, t), *v = att_in(c, 2, t);
  AttGeom g;
  int rc = 0;
  if (!att_geom(c, q, k, v, &g)) rc = -1;
  else if (g.tk == 0 && g.tq > 0 && g.dv > 0 && g.n > 0) rc = exec_ctx_fail(c, "K and V have no keys (Tk is 0)");
  else if (out->numel > 0) {
    att_forward(&g, t, q->data, k->data, v->data, out->data);
  }
  tensor_unref(q);
  tensor_unref(k);
  tensor_unref(v);
  return rc;
}

/* Where gradient `slot` goes: its output's data when there is one of
 * dtype t, else a scratch array of n elements (*tmp, freed by the caller). */
static void *att_dest(ExecCtx *c, int slot, DType t, int64_t n, void **tmp) {
  Tensor *o = exec_ctx_out(c, slot);
  *tmp = NULL;
  if (o && o->dtype == t) return o->data;
  return *tmp = mem_calloc((size_t)(n > 0 ? n : 1), dtype_size(t));
}

static int k_attention_grad(ExecCtx *c) {
  DType t = DT_F32;
  for (int s = 0; s < 3; s++)
    if (att_dtype(c, s) == DT_F64) t = DT_F64;
  Tensor *q = att_in(c, 0, t), *k = att_in(c, 1, t), *v = att_in(c, 2, t), *dout = att_in(c, 3, t);
  AttGeom g;
  int rc = 0;
  if (!att_geom(c, q, k, v, &g)) rc = -1;
  else if (dout->numel != g.n * g.tq * g.dv) rc = exec_ctx_fail(c, "Out@GRAD does not have the shape of Out");
  if (rc) goto done;
  void *tmp[3];
  const Tensor *src[3] = {q, k, v};
  char *dst[3];
  for (int s = 0; s < 3; s++) dst[s] = att_dest(c, s, t, src[s]->numel, &tmp[s]);
  size_t es = dtype_size(t);
  if (g.tk > 0 && g.tq > 0) {
    att_backward(&g, t, q->data, k->data, v->data, dout->data, dst[0], dst[1], dst[2]);
  } else {
    for (int s = 0; s < 3; s++) memset(dst[s], 0, es * (size_t)src[s]->numel);
  }
  for (int s = 0; s < 3; s++) {
    Tensor *o = exec_ctx_out(c, s);
    if (tmp[s] && o) {   /* an output of another dtype than t */
      for (int64_t i = 0; i < o->numel; i++)
        tensor_set(o, i, t == DT_F64 ? ((double *)tmp[s])[i] : (double)((float *)tmp[s])[i]);
    }
    mem_free(tmp[s]);
  }
done:
  tensor_unref(q);
  tensor_unref(k);
  tensor_unref(v);
  tensor_unref(dout);
  return rc;
}

/* ---- fused_attention: Q, K and V as one QKV ----------------------------------
 * A transformer's attention reads Q, K and V split from one product,
 * QKV [..., T, 3D] (stdlib's multi_head_attention: split(dense(x, 3D))),
 * and its gradient concatenates dQ, dK and dV back into one.  The
 * executor's rewrite (rewrite.c, qkv_attention) makes such a split and
 * attention one fused_attention, and the attention_grad and concat of
 * its gradient one fused_attention_grad: the kernels read Q, K and V where
 * they lie in QKV (rows of 3D) and write dQ, dK and dV into dQKV, the
 * same loops and the same bits as the split, attention_grad and concat,
 * without the two copies (on char_lm, 2 x 0.75 MB each way a block). */

/* QKV [..., T, 3D] as AttGeom, D = heads * d: Q its columns 0..D, K D..2D,
 * V 2D..3D, each row 3D wide; Out [..., T, D]. */
static bool att_geom_qkv(ExecCtx *c, const Tensor *qkv, AttGeom *g) {
  int r = qkv->rank;
  int64_t h = exec_ctx_attr_i(c, "heads");
  if (r < 2 || h < 1 || qkv->shape[r - 1] % (3 * h)) {
    char a[128];
    exec_ctx_fail(c, "QKV of shape %s does not hold Q, K and V of %lld heads side by side ([..., T, 3 * heads * d])",
                  tensor_shape_str(qkv, a, sizeof a), (long long)h);
    return false;
  }
  g->heads = h;
  g->n = h;
  for (int i = 0; i < r - 2; i++) g->n *= qkv->shape[i];
  g->tq = g->tk = qkv->shape[r - 2];
  g->ldq = g->ldk = g->ldv = qkv->shape[r - 1];
  g->ldo = g->ldq / 3;
  g->d = g->dv = g->ldo / h;
  g->causal = exec_ctx_attr_b(c, "causal");
  return true;
}

static int k_fused_attention(ExecCtx *c) {
  Tensor *out = exec_ctx_out(c, 0);
  DType t = out->dtype == DT_F64 ? DT_F64 : DT_F32;
  Tensor *qkv = att_in(c, 0, t);
  AttGeom g;
  int rc = 0;
  if (!att_geom_qkv(c, qkv, &g)) rc = -1;
  else if (out->numel != g.n * g.tq * g.dv) rc = exec_ctx_fail(c, "internal error: Out does not fit QKV");
  else if (out->numel > 0) {
    size_t es = dtype_size(t), w = (size_t)g.ldo * es;
    const char *q = qkv->data;
    att_forward(&g, t, q, q + w, q + 2 * w, out->data);
  }
  tensor_unref(qkv);
  return rc;
}

static int k_fused_attention_grad(ExecCtx *c) {
  Tensor *dqkv = exec_ctx_out(c, 0);
  DType t = dqkv->dtype == DT_F64 ? DT_F64 : DT_F32;
  Tensor *qkv = att_in(c, 0, t), *dout = att_in(c, 1, t);
  AttGeom g;
  int rc = 0;
  if (!att_geom_qkv(c, qkv, &g)) rc = -1;
  else if (dout->numel != g.n * g.tq * g.dv || dqkv->numel != qkv->numel)
    rc = exec_ctx_fail(c, "internal error: Out@GRAD or QKV@GRAD does not fit QKV");
  else if (dqkv->numel > 0) {
    size_t es = dtype_size(t), w = (size_t)g.ldo * es;
    const char *q = qkv->data;
    char *d = dqkv->data;
    att_backward(&g, t, q, q + w, q + 2 * w, dout->data, d, d + w, d + 2 * w);
  }
  tensor_unref(qkv);
  tensor_unref(dout);
  return rc;
}

/* fused_attention: Out [..., T, QKV's last / 3]. */
static bool infer_fused_attention(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "QKV");
  if (!x || !reg_infer_need_float(c, "QKV", x)) return false;
  DType t = x->dtype == DT_F64 ? DT_F64 : DT_F32;
  Shape out = x->shape;
  if (out.rank >= 2 && dim_known(out.d[out.rank - 1])) out.d[out.rank - 1].n /= 3;
  else if (out.rank >= 2) out.d[out.rank - 1] = dim_unknown();
  reg_infer_set(c, "Out", 0, t, &out);
  return true;
}

static bool infer_fused_attention_grad(InferCtx *c) {
  static const char *const slots[][2] = {{"QKV@GRAD", "QKV"}};
  return reg_infer_like(c, slots, 1);
}

/* ---- the gradient of attention_grad ----
 * Composite, so that a backward through attention can be differentiated
 * again (a gradient penalty, a Hessian-vector product).  Only this second
 * backward pays for the [Tq, Tk] matrices: the first stays attention_grad.
 * With r = sqrt(d), S = Q K^T / r masked as the unfused form masks it
 * (where(tril(1), S, -1e9)), P = softmax(S), dP = G V^T (G = Out@GRAD),
 * Z = softmax_grad(P, dP) / r, attention_grad is
 *   dQ = Z K,  dK = Z^T Q,  dV = P^T G.
 * With A, B and C the gradients of dQ, dK and dV:
 *   W = (A K^T + Q B^T) / r             the gradient of Z
 *   E = softmax_grad(P, W)              of dP (the Jacobian is symmetric)
 *   F = G C^T + W (dP - s) - dP sum(W P), s = sum(P dP)   of P
 *   H = softmax_grad(P, F) / r          of S / r, 0 where masked (P is)
 *   Q gets H K + Z B,  K gets H^T Q + Z^T A,  V gets E^T G,  G gets P C + E V
 * (sums over the last axis, kept).  Each intermediate is emitted once, when
 * a wanted gradient first needs it; r is computed from Q's width at run
 * time (the sum of a row of ones_like(Q)), so no shape need be known. */

typedef struct AttG2 {
  GradCtx *g;
  const char *q, *k, *v, *d;   /* the grad op's inputs: Q, K, V, Out@GRAD */
  const char *a, *b, *c;       /* the gradients of its outputs, or NULL */
  const char *root, *p, *dp, *z, *w, *e, *h;   /* made on first use */
} AttG2;

/* out = x @ y, either operand's last two axes swapped first */
static void emit_matmul(GradCtx *g, const char *x, bool tx, const char *y, bool ty, const char *out) {
  OpDesc *op = bwd_emit2(g, "matmul", x, y, out);
  if (tx) bwd_emit_attr(g, op, "transpose_x", attr_bool(true));
  if (ty) bwd_emit_attr(g, op, "transpose_y", attr_bool(true));
}

/* out = sum(x) over the last axis, kept */
static void emit_row_sum(GradCtx *g, const char *x, const char *out) {
  int64_t axis = -1;
  OpDesc *op = bwd_emit1(g, "sum", x, out);
  bwd_emit_attr(g, op, "axis", attr_ints(bwd_prog(g), &axis, 1));
  bwd_emit_attr(g, op, "keepdim", attr_bool(true));
}

/* A new temporary holding type(x, y) (type(x) when y is NULL). */
static const char *emit_t(GradCtx *g, const char *type, const char *x, const char *y) {
  const char *t = bwd_temp(g);
  if (y) bwd_emit2(g, type, x, y, t);
  else bwd_emit1(g, type, x, t);
  return t;
}

/* sqrt(d), [..., Tq, 1]: Q's width counted in Q's dtype */
static const char *att_root(AttG2 *s) {
  if (s->root) return s->root;
  const char *n = bwd_temp(s->g);
  emit_row_sum(s->g, emit_t(s->g, "ones_like", s->q, NULL), n);
  return s->root = emit_t(s->g, "sqrt", n, NULL);
}

static const char *att_p(AttG2 *s) {
  if (s->p) return s->p;
  GradCtx *g = s->g;
  const char *qk = bwd_temp(g);
  emit_matmul(g, s->q, false, s->k, true, qk);
  const char *sc = emit_t(g, "div", qk, att_root(s));
  if (bwd_op_attr(g, "causal")->u.i != 0) {
    const char *allowed = bwd_temp(g), *low = bwd_temp(g), *masked = bwd_temp(g);
    bwd_emit_attr(g, bwd_emit1(g, "cast", emit_t(g, "tril", emit_t(g, "ones_like", sc, NULL), NULL), allowed),
                  "dtype", attr_dtype(DT_BOOL));
    OpDesc *c = bwd_emit(g, "fill_constant");
    bwd_emit_out(g, c, "Out", low);
    bwd_emit_attr(g, c, "shape", attr_ints(bwd_prog(g), NULL, 0));
    bwd_emit_attr(g, c, "value", attr_float(-1e9));
    OpDesc *w = bwd_emit(g, "where");
    bwd_emit_in(g, w, "Cond", allowed);
    bwd_emit_in(g, w, "X", sc);
    bwd_emit_in(g, w, "Y", low);
    bwd_emit_out(g, w, "Out", masked);
    sc = masked;
  }
  return s->p = emit_t(g, "softmax", sc, NULL);
}

static const char *att_dp(AttG2 *s) {
  if (!s->dp) emit_matmul(s->g, s->d, false, s->v, true, s->dp = bwd_temp(s->g));
  return s->dp;
}

/* out = softmax_grad(Out=P, Out@GRAD=x) / r */
static const char *att_softmax_grad(AttG2 *s, const char *x, bool scaled) {
  GradCtx *g = s->g;
  const char *p = att_p(s), *t = bwd_temp(g);   /* P's ops first */
  OpDesc *op = bwd_emit(g, "softmax_grad");
  bwd_emit_in(g, op, "Out", p);
  bwd_emit_in(g, op, "Out@GRAD", x);
  bwd_emit_out(g, op, "X@GRAD", t);
  return scaled ? emit_t(g, "div", t, att_root(s)) : t;
}

static const char *att_z(AttG2 *s) { return s->z ? s->z : (s->z = att_softmax_grad(s, att_dp(s), true)); }

/* W, when A or B is there (else Z's gradient is 0 and so are E and W's
 * share of F) */
static const char *att_w(AttG2 *s) {
  if (s->w || (!s->a && !s->b)) return s->w;
  GradCtx *g = s->g;
  const char *ak = NULL, *qb = NULL;
  if (s->a) emit_matmul(g, s->a, false, s->k, true, ak = bwd_temp(g));
  if (s->b) emit_matmul(g, s->q, false, s->b, true, qb = bwd_temp(g));
  const char *gz = ak && qb ? emit_t(g, "add", ak, qb) : ak ? ak : qb;
  return s->w = emit_t(g, "div", gz, att_root(s));
}

static const char *att_e(AttG2 *s) {
  if (!s->e && att_w(s)) s->e = att_softmax_grad(s, s->w, false);
  return s->e;
}

/* H, or NULL when neither C nor W is there */
static const char *att_h(AttG2 *s) {
  if (s->h) return s->h;
  GradCtx *g = s->g;
  const char *gc = NULL, *f2 = NULL;
  if (s->c) emit_matmul(g, s->d, false, s->c, true, gc = bwd_temp(g));
  if (att_w(s)) {
    const char *p = att_p(s), *dp = att_dp(s), *sp = bwd_temp(g), *sw = bwd_temp(g);
    emit_row_sum(g, emit_t(g, "mul", p, dp), sp);
    emit_row_sum(g, emit_t(g, "mul", s->w, p), sw);
    const char *wd = emit_t(g, "mul", s->w, emit_t(g, "sub", dp, sp));
    f2 = emit_t(g, "sub", wd, emit_t(g, "mul", dp, sw));
  }
  if (!gc && !f2) return NULL;
  return s->h = att_softmax_grad(s, gc && f2 ? emit_t(g, "add", gc, f2) : gc ? gc : f2, true);
}

/* dst = x1 op y1 + x2 op y2 (matmuls, transposed as asked), a term whose
 * x is NULL left out; nothing when both are. */
static void emit_matmul_sum(GradCtx *g, const char *dst, const char *x1, bool tx1, const char *y1, bool ty1,
                            const char *x2, bool tx2, const char *y2, bool ty2) {
  if (!dst || (!x1 && !x2)) return;
  if (!x1 || !x2) {
    emit_matmul(g, x1 ? x1 : x2, x1 ? tx1 : tx2, x1 ? y1 : y2, x1 ? ty1 : ty2, dst);
    return;
  }
  const char *t = bwd_temp(g), *u = bwd_temp(g);
  emit_matmul(g, x1, tx1, y1, ty1, t);
  emit_matmul(g, x2, tx2, y2, ty2, u);
  bwd_emit2(g, "add", t, u, dst);
}

/* The gradients gq, gk, gv and gd (each NULL when not wanted) of one
 * slice's attention_grad of inputs q, k, v, d and outputs' gradients a,
 * b, c (NULL: none). */
static void att_grad2(GradCtx *g, const char *const in[7], const char *const want[4]) {
  AttG2 s = {.g = g, .q = in[0], .k = in[1], .v = in[2], .d = in[3], .a = in[4], .b = in[5], .c = in[6]};
  const char *gq = want[0], *gk = want[1], *gv = want[2], *gd = want[3];
  /* (one intermediate made per statement: the emitted order is fixed) */
  const char *h = gq || gk ? att_h(&s) : NULL, *z = (gq && s.b) || (gk && s.a) ? att_z(&s) : NULL;
  const char *e = gv || gd ? att_e(&s) : NULL, *p = gd && s.c ? att_p(&s) : NULL;
  if (gq) emit_matmul_sum(g, gq, h, false, s.k, false, s.b ? z : NULL, false, s.b, false);
  if (gk) emit_matmul_sum(g, gk, h, true, s.q, false, s.a ? z : NULL, true, s.a, false);
  if (gv) emit_matmul_sum(g, gv, e, true, s.d, false, NULL, false, NULL, false);
  if (gd) emit_matmul_sum(g, gd, p, false, s.c, false, e, false, s.v, false);
}

/* With heads > 1 each input is split into its heads along the last axis,
 * each head's gradients are those of one slice, and each wanted gradient
 * is its heads' concatenated. */
static bool g_attention_grad(GradCtx *g) {
  const char *in[7] = {bwd_op_in(g, "Q", 0), bwd_op_in(g, "K", 0), bwd_op_in(g, "V", 0),
                       bwd_op_in(g, "Out@GRAD", 0)};
  static const char *const outs[3] = {"Q@GRAD", "K@GRAD", "V@GRAD"};
  for (int i = 0; i < 3; i++) in[4 + i] = bwd_op_out(g, outs[i], 0) ? bwd_op_out_grad(g, outs[i], 0) : NULL;
  const char *want[4] = {bwd_op_in_grad(g, "Q", 0), bwd_op_in_grad(g, "K", 0), bwd_op_in_grad(g, "V", 0),
                         bwd_op_in_grad(g, "Out@GRAD", 0)};
  int64_t heads = bwd_op_attr(g, "heads")->u.i;
  if (heads == 1) {
    att_grad2(g, in, want);
    return true;
  }
  int64_t axis = -1;
  const char **part = mem_alloc(NULL, sizeof *part * (size_t)(11 * heads));   /* [heads][7 in, 4 out] */
  for (int i = 0; i < 7; i++) {
    if (!in[i]) {
      for (int64_t h = 0; h < heads; h++) part[h * 11 + i] = NULL;
      continue;
    }
    OpDesc *op = bwd_emit1(g, "split", in[i], part[i] = bwd_temp(g));
    for (int64_t h = 1; h < heads; h++) bwd_emit_out(g, op, "Out", part[h * 11 + i] = bwd_temp(g));
    bwd_emit_attr(g, op, "num", attr_int(heads));
    bwd_emit_attr(g, op, "axis", attr_int(axis));
  }
  for (int64_t h = 0; h < heads; h++) {
    for (int i = 0; i < 4; i++) part[h * 11 + 7 + i] = want[i] ? bwd_temp(g) : NULL;
    att_grad2(g, part + h * 11, part + h * 11 + 7);
  }
  for (int i = 0; i < 4; i++) {
    if (!want[i]) continue;
    OpDesc *op = bwd_emit(g, "concat");
    for (int64_t h = 0; h < heads; h++) bwd_emit_in(g, op, "X", part[h * 11 + 7 + i]);
    bwd_emit_out(g, op, "Out", want[i]);
    bwd_emit_attr(g, op, "axis", attr_int(axis));
  }
  mem_free(part);
  return true;
}

OpProto op_table_attention[] = {
    {.type = "attention",
     .doc = "Out = softmax(Q K^T / sqrt(d)) V per slice, keys after the query masked when causal; "
            "with heads, the slices side by side in the last axis; never holds the [Tq, Tk] scores of a slice",
     .in = {{"Q", 0, "queries [..., Tq, d]"}, {"K", 0, "keys [..., Tk, d]"}, {"V", 0, "values [..., Tk, dv]"}},
     .out = {{"Out", 0, "[..., Tq, dv]"}},
     .attrs = {{"causal", ATTR_BOOL, "false", NULL, "query t sees keys 0..t only"},
               {"heads", ATTR_INT, "1", reg_check_positive,
                "slices side by side in the last axis: head h of Q [..., Tq, heads * d] is its columns "
                "h * d up to (h + 1) * d, likewise K's, V's and Out's"}},
     .infer = infer_attention, .kernel = k_attention, .grad_kind = GRAD_DEDICATED, .flags = OP_F64},
    {.type = "attention_grad",
     .doc = "the gradients of attention's Q, K and V (its softmax recomputed a block of rows at a time); "
            "its own gradient recomputes the unfused [Tq, Tk] softmax",
     .in = {{"Q", 0, "the forward's Q"}, {"K", 0, "the forward's K"}, {"V", 0, "the forward's V"},
            {"Out@GRAD", 0, "the gradient of Out"}},
     .out = {{"Q@GRAD", SLOT_OPTIONAL, "the gradient of Q"},
             {"K@GRAD", SLOT_OPTIONAL, "the gradient of K"},
             {"V@GRAD", SLOT_OPTIONAL, "the gradient of V"}},
     .attrs = {{"causal", ATTR_BOOL, "false", NULL, "the forward's causal"},
               {"heads", ATTR_INT, "1", reg_check_positive, "the forward's heads"}},
     .infer = infer_attention_grad, .kernel = k_attention_grad, .grad_kind = GRAD_COMPOSITE,
     .grad = g_attention_grad,
     .flags = OP_INTERNAL | OP_F64},
    {.type = "fused_attention",
     .doc = "attention of the Q, K and V side by side in QKV (split(QKV, num=3, axis=-1)): made by the executor, "
            "not by scripts",
     .in = {{"QKV", 0, "[..., T, 3 * heads * d]: Q, K and V in the last axis, in that order"}},
     .out = {{"Out", 0, "[..., T, heads * d]"}},
     .attrs = {{"causal", ATTR_BOOL, "false", NULL, "as attention's"},
               {"heads", ATTR_INT, "1", reg_check_positive, "as attention's"}},
     .infer = infer_fused_attention, .kernel = k_fused_attention, .grad_kind = GRAD_NONE,
     .flags = OP_INTERNAL | OP_AFTER_BACKWARD | OP_F64},
    {.type = "fused_attention_grad",
     .doc = "concat of attention_grad's Q@GRAD, K@GRAD and V@GRAD, Q, K and V side by side in QKV: made by the "
            "executor, not by scripts",
     .in = {{"QKV", 0, "the forward's QKV"}, {"Out@GRAD", 0, "the gradient of Out"}},
     .out = {{"QKV@GRAD", 0, "the gradient of QKV"}},
     .attrs = {{"causal", ATTR_BOOL, "false", NULL, "the forward's causal"},
               {"heads", ATTR_INT, "1", reg_check_positive, "the forward's heads"}},
     .infer = infer_fused_attention_grad, .kernel = k_fused_attention_grad, .grad_kind = GRAD_NONE,
     .flags = OP_INTERNAL | OP_AFTER_BACKWARD | OP_F64},
    {0},
};
