/* linalg.c — matrix products and their gradient.
 *
 * matmul follows NumPy's matmul: 2-D operands multiply as matrices; higher
 * ranks are stacks of matrices whose batch dimensions broadcast; a 1-D X is
 * a row vector and a 1-D Y a column vector, and the dimension added for
 * that is removed from the result.  transpose_x / transpose_y swap the last
 * two dimensions of an operand of rank 2 or more first. */
#include "autodiff/backward.h"
#include "exec/exec.h"
#include "exec/par.h"

#include <cblas.h>
#include <limits.h>
#include <string.h>

static bool infer_matmul(InferCtx *c) {
  const VarDesc *x = reg_infer_in(c, "X", 0), *y = reg_infer_in(c, "Y", 0);
  if (!x || !y) return reg_infer_fail(c, "needs both X and Y");
  DType t = reg_infer_promote(x->dtype, y->dtype);
  char a[128], b[128];
  if (x->shape.rank == 0 || y->shape.rank == 0)
    return reg_infer_fail(c, "%s must have at least one dimension, got a scalar",
                          x->shape.rank == 0 ? "X" : "Y");
  if (x->shape.rank < 0 || y->shape.rank < 0) {
    Shape u = shape_unknown();
    reg_infer_set(c, "Out", 0, t, &u);
    return true;
  }
  Shape xs = x->shape, ys = y->shape;
  bool tx = reg_infer_attr_b(c, "transpose_x"), ty = reg_infer_attr_b(c, "transpose_y");
  bool xvec = xs.rank == 1, yvec = ys.rank == 1;
  if (xvec) {   /* [K] -> [1, K] */
    xs.rank = 2;
    xs.d[1] = xs.d[0];
    xs.d[0] = dim_n(1);
    tx = false;
  }
  if (yvec) {   /* [K] -> [K, 1] */
    ys.rank = 2;
    ys.d[1] = dim_n(1);
    ty = false;
  }
  int rx = xs.rank, ry = ys.rank;
  Dim m = xs.d[tx ? rx - 1 : rx - 2], kx = xs.d[tx ? rx - 2 : rx - 1];
  Dim ky = ys.d[ty ? ry - 1 : ry - 2], n = ys.d[ty ? ry - 2 : ry - 1];
  if (dim_known(kx) && dim_known(ky) && kx.n != ky.n)
    return reg_infer_fail(c, "X has shape %s%s and Y has shape %s%s: inner dimensions %lld and %lld differ",
                          shape_str(&x->shape, a, sizeof a), tx ? " (transposed)" : "",
                          shape_str(&y->shape, b, sizeof b), ty ? " (transposed)" : "",
                          (long long)kx.n, (long long)ky.n);
  Shape bx = xs, by = ys, s;
  bx.rank -= 2;
  by.rank -= 2;
  bool quiet = c->quiet;
  c->quiet = true;
  bool ok = reg_infer_broadcast(c, &bx, &by, &s);
  c->quiet = quiet;
  if (!ok) {
    char ba[128], bb[128];
    return reg_infer_fail(c, "X has shape %s and Y has shape %s: batch dimensions %s and %s do not broadcast",
                          shape_str(&x->shape, a, sizeof a), shape_str(&y->shape, b, sizeof b),
                          shape_str(&bx, ba, sizeof ba), shape_str(&by, bb, sizeof bb));
  }
  if (!xvec) s.d[s.rank++] = m;
  if (!yvec) s.d[s.rank++] = n;
  reg_infer_set(c, "Out", 0, t, &s);
  return true;
}

/* ---- the kernel ---------------------------------------------------------------
 *
 * f32 products go to OpenBLAS's sgemm through par_sgemm (par.h), one call
 * per matrix of the broadcast batch (Debian's OpenBLAS has no batched sgemm); a transposed
 * operand is passed as CblasTrans, never copied.  When X's batch is the
 * result's and Y is one matrix ([B, M, K] @ [K, N], a linear layer), the
 * batch folds into M and a single call does it.  i64 products (bool counts
 * as i64) are plain loops, as BLAS has no integer GEMM; they wrap on
 * overflow like NumPy's.  A mixed i64 @ f32 casts the i64 operand to f32. */

/* The product's geometry after promoting 1-D operands: a batch of
 * [M, K] @ [K, N], and per batch dimension the step of X and Y in matrices
 * (0 where that operand is broadcast). */
typedef struct MatDims {
  int rb;
  int64_t batch[SHAPE_MAX_RANK];
  int64_t xstep[SHAPE_MAX_RANK], ystep[SHAPE_MAX_RANK];
  int64_t nbatch, m, k, n;
  bool tx, ty;
} MatDims;

static void mat_dims(const Tensor *x, const Tensor *y, bool tx, bool ty, MatDims *d) {
  int64_t xs[SHAPE_MAX_RANK], ys[SHAPE_MAX_RANK];
  int rx = x->rank, ry = y->rank;
  memcpy(xs, x->shape, sizeof(int64_t) * (size_t)rx);
  memcpy(ys, y->shape, sizeof(int64_t) * (size_t)ry);
  if (rx == 1) {   /* [K] -> [1, K], as inference does */
    xs[1] = xs[0];
    xs[0] = 1;
    rx = 2;
    tx = false;
  }
  if (ry == 1) {   /* [K] -> [K, 1] */
    ys[1] = 1;
    ry = 2;
    ty = false;
  }
  d->tx = tx;
  d->ty = ty;
  d->m = xs[tx ? rx - 1 : rx - 2];
  d->k = xs[tx ? rx - 2 : rx - 1];
  d->n = ys[ty ? ry - 2 : ry - 1];
  int bx = rx - 2, by = ry - 2;
  d->rb = bx > by ? bx : by;
  d->nbatch = 1;
  int64_t sx = 1, sy = 1;
  for (int i = d->rb - 1; i >= 0; i--) {
    int ix = i - (d->rb - bx), iy = i - (d->rb - by);
    int64_t dx = ix >= 0 ? xs[ix] : 1, dy = iy >= 0 ? ys[iy] : 1;
    d->batch[i] = dx == 1 ? dy : dx;
    d->xstep[i] = dx == 1 ? 0 : sx;
    d->ystep[i] = dy == 1 ? 0 : sy;
    sx *= dx;
    sy *= dy;
    d->nbatch *= d->batch[i];
  }
}

/* Advances the batch odometer idx, moving the matrix offsets *xo and *yo. */
static void batch_next(const MatDims *d, int64_t *idx, int64_t *xo, int64_t *yo) {
  for (int i = d->rb - 1; i >= 0; i--) {
    *xo += d->xstep[i];
    *yo += d->ystep[i];
    if (++idx[i] < d->batch[i]) return;
    *xo -= d->xstep[i] * d->batch[i];
    *yo -= d->ystep[i] * d->batch[i];
    idx[i] = 0;
  }
}

/* The float matmul of element type T through GEMM (cblas_?gemm's arguments). */
#define MATMUL_FLOAT(NAME, T, GEMM)                                                               \
static int NAME(ExecCtx *c, const MatDims *d, const T *x, const T *y, T *out) {                   \
  int64_t mk = d->m * d->k, kn = d->k * d->n, mn = d->m * d->n;                                   \
  if (mn == 0 || d->nbatch == 0) return 0;                                                        \
  if (d->k == 0) {   /* a sum of nothing; BLAS wants leading dimensions >= 1 */                   \
    memset(out, 0, sizeof(T) * (size_t)(d->nbatch * mn));                                         \
    return 0;                                                                                     \
  }                                                                                               \
  int64_t big = d->m > d->n ? d->m : d->n;                                                        \
  if (d->k > big) big = d->k;                                                                     \
  if (big > INT_MAX)   /* Debian's OpenBLAS takes int sizes */                                    \
    return exec_ctx_fail(c, "a dimension of %lld is too large for BLAS (at most %d)", (long long)big,  \
                         INT_MAX);                                                                     \
  bool fold = !d->tx && d->nbatch * d->m <= INT_MAX;                                              \
  for (int i = 0; i < d->rb && fold; i++)                                                         \
    if (d->ystep[i] != 0 || (d->xstep[i] == 0 && d->batch[i] != 1)) fold = false;                 \
  int64_t times = d->nbatch, m = d->m;                                                            \
  if (fold) {                                                                                     \
    m *= d->nbatch;                                                                               \
    times = 1;                                                                                    \
  }                                                                                               \
  int lda = (int)(d->tx ? d->m : d->k), ldb = (int)(d->ty ? d->k : d->n);                         \
  int64_t idx[SHAPE_MAX_RANK] = {0}, xo = 0, yo = 0;                                              \
  for (int64_t b = 0; b < times && !exec_interrupted(); b++) {   /* Ctrl-C between matrices */     \
    GEMM(d->tx, d->ty, (int)m, (int)d->n, (int)d->k, 1, x + xo * mk, lda, y + yo * kn, ldb, 0,    \
              out + b * mn, (int)d->n);                                                           \
    batch_next(d, idx, &xo, &yo);                                                                 \
  }                                                                                               \
  return 0;                                                                                       \
}

/* f64 products: one cblas_dgemm per matrix (f64 is for precision, not
 * speed: no parts on the team). */
static void dgemm(bool ta, bool tb, int m, int n, int k, double alpha, const double *a, int lda,
                  const double *b, int ldb, double beta, double *out, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, out, ldc);
}

MATMUL_FLOAT(matmul_f32, float, par_sgemm)
MATMUL_FLOAT(matmul_f64, double, dgemm)

static void matmul_i64(const MatDims *d, const int64_t *x, const int64_t *y, int64_t *out) {
  int64_t m = d->m, k = d->k, n = d->n, mk = m * k, kn = k * n;
  /* element strides of X along its rows i and columns kk, and of Y along kk and j */
  int64_t xi = d->tx ? 1 : k, xk = d->tx ? m : 1, yk = d->ty ? 1 : n, yj = d->ty ? k : 1;
  int64_t idx[SHAPE_MAX_RANK] = {0}, xo = 0, yo = 0;
  for (int64_t b = 0; b < d->nbatch; b++) {
    const int64_t *xp = x + xo * mk, *yp = y + yo * kn;
    for (int64_t i = 0; i < m; i++) {
      if (exec_interrupted()) return;   /* Ctrl-C between rows (the executor fails the op) */
      uint64_t *row = (uint64_t *)(out + (b * m + i) * n);   /* unsigned: defined wrapping */
      for (int64_t j = 0; j < n; j++) row[j] = 0;
      for (int64_t kk = 0; kk < k; kk++) {
        uint64_t a = (uint64_t)xp[i * xi + kk * xk];
        if (a == 0) continue;
        const int64_t *yr = yp + kk * yk;
        for (int64_t j = 0; j < n; j++) row[j] += a * (uint64_t)yr[j * yj];
      }
    }
    batch_next(d, idx, &xo, &yo);
  }
}

static int k_matmul(ExecCtx *c) {
  Tensor *out = exec_ctx_out(c, 0);
  MatDims d;
  mat_dims(exec_ctx_in(c, 0), exec_ctx_in(c, 1), exec_ctx_attr_b(c, "transpose_x"), exec_ctx_attr_b(c, "transpose_y"),
           &d);
  Tensor *x = tensor_cast(exec_ctx_in(c, 0), out->dtype), *y = tensor_cast(exec_ctx_in(c, 1), out->dtype);
  int rc = 0;
  if (out->dtype == DT_F32) rc = matmul_f32(c, &d, tensor_f32(x), tensor_f32(y), tensor_f32(out));
  else if (out->dtype == DT_F64) rc = matmul_f64(c, &d, tensor_f64(x), tensor_f64(y), tensor_f64(out));
  else matmul_i64(&d, tensor_i64(x), tensor_i64(y), tensor_i64(out));
  tensor_unref(x);
  tensor_unref(y);
  return rc;
}

/* ---- the gradient ---------------------------------------------------------------
 *
 * Composite: two matmuls whose transpose attributes absorb every transpose,
 * so nothing is copied:
 *
 *   Out = X @ Y       dX = dOut @ Y^T       dY = X^T @ dOut
 *   Out = X^T @ Y     dX = Y @ dOut^T       dY = X @ dOut
 *   Out = X @ Y^T     dX = dOut @ Y         dY = dOut^T @ X
 *   Out = X^T @ Y^T   dX = Y^T @ dOut^T     dY = dOut^T @ X^T
 *
 * A 1-D operand takes part as the matrix NumPy makes of it (unsqueeze: X
 * [K] -> [1, K], Y [K] -> [K, 1]), dOut gets back the dimensions the
 * result lost, and the operand's gradient loses its added one again
 * (squeeze).  Each gradient comes out with the result's batch dimensions;
 * where its operand's batch was broadcast (fewer or size-1 dimensions) it
 * is summed back to the operand's shape (sum_like).
 *
 * One case is folded instead, as the forward kernel folds it: a stack of
 * matrices times one matrix ([B, T, K] @ [K, N], a linear layer on a
 * sequence).  Y's gradient is then one product of X and dOut viewed as
 * [B*T, K] and [B*T, N], not B products summed afterwards. */

static const char *mm_emit(GradCtx *g, const char *a, const char *b, bool ta, bool tb, const char *out) {
  OpDesc *op = bwd_emit2(g, "matmul", a, b, out);
  bwd_emit_attr(g, op, "transpose_x", attr_bool(ta));
  bwd_emit_attr(g, op, "transpose_y", attr_bool(tb));
  return out;
}

/* out = op(x) {axes = [a0, a1][:n]} */
static const char *axes_emit(GradCtx *g, const char *type, const char *x, int64_t a0, int64_t a1, int n,
                             const char *out) {
  int64_t axes[2] = {a0, a1};
  bwd_emit_attr(g, bwd_emit1(g, type, x, out), "axes", attr_ints(bwd_prog(g), axes, n));
  return out;
}

/* out = reshape(x, [-1, d]) */
static const char *rows_emit(GradCtx *g, const char *x, int64_t d) {
  int64_t shape[2] = {-1, d};
  const char *out = bwd_temp(g);
  bwd_emit_attr(g, bwd_emit1(g, "reshape", x, out), "shape", attr_ints(bwd_prog(g), shape, 2));
  return out;
}

/* Are v's batch dimensions (all but its last two; none for a vector)
 * provably the result's? */
static bool same_batch(const VarDesc *v, const VarDesc *out, int out_mat) {
  int rv = v->shape.rank >= 2 ? v->shape.rank - 2 : 0, ro = out->shape.rank - out_mat;
  if (ro != rv) return false;
  for (int i = 0; i < rv; i++)
    if (!dim_eq(v->shape.d[i], out->shape.d[i])) return false;
  return true;
}

/* Where the matmul giving an operand's gradient writes: dst itself when
 * nothing is left to do. */
static const char *mm_target(GradCtx *g, bool vec, bool same, const char *dst) {
  return !vec && same ? dst : bwd_temp(g);
}

/* Turns `full`, an operand's gradient with the result's batch dimensions
 * (and, for a vector, its added dimension at vaxis), into dst. */
static void mm_finish(GradCtx *g, const char *full, bool vec, int64_t vaxis, bool same, const char *like,
                      const char *dst) {
  if (vec) full = axes_emit(g, "squeeze", full, vaxis, 0, 1, same ? dst : bwd_temp(g));
  if (!same) bwd_emit2(g, "sum_like", full, like, dst);
}

static bool g_matmul(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0), *dy = bwd_op_in_grad(g, "Y", 0);
  if (!dx && !dy) return true;
  Program *p = bwd_prog(g);
  const char *x = bwd_op_in(g, "X", 0), *y = bwd_op_in(g, "Y", 0), *dout = bwd_op_out_grad(g, "Out", 0);
  const VarDesc *xv = prog_var(p, x), *yv = prog_var(p, y), *ov = prog_var(p, bwd_op_out(g, "Out", 0));
  if (!xv || !yv || !ov || xv->shape.rank < 1 || yv->shape.rank < 1 || ov->shape.rank < 0) {
    diag_error(p->diag, bwd_op_fwd(g)->span, "matmul: its gradient needs operands of known rank");
    return false;
  }
  bool xvec = xv->shape.rank == 1, yvec = yv->shape.rank == 1;
  bool tx = !xvec && bwd_op_attr(g, "transpose_x")->u.i != 0;
  bool ty = !yvec && bwd_op_attr(g, "transpose_y")->u.i != 0;
  int out_mat = !xvec + !yvec;   /* the result's matrix dimensions */
  bool fold = xv->shape.rank >= 3 && yv->shape.rank == 2 && !tx;
  Dim k = fold ? xv->shape.d[xv->shape.rank - 1] : dim_unknown();
  Dim n = fold ? ov->shape.d[ov->shape.rank - 1] : dim_unknown();
  fold = fold && k.n > 0 && n.n > 0;
  /* dOut as the product of the promoted operands: [..., M, N] */
  const char *g2 = dout;
  if (xvec && yvec) g2 = axes_emit(g, "unsqueeze", dout, 0, 1, 2, bwd_temp(g));
  else if (xvec) g2 = axes_emit(g, "unsqueeze", dout, -2, 0, 1, bwd_temp(g));
  else if (yvec) g2 = axes_emit(g, "unsqueeze", dout, -1, 0, 1, bwd_temp(g));
  if (dx) {
    const char *y2 = yvec ? axes_emit(g, "unsqueeze", y, -1, 0, 1, bwd_temp(g)) : y;
    bool same = same_batch(xv, ov, out_mat);
    const char *t = mm_target(g, xvec, same, dx);
    if (tx) mm_emit(g, y2, g2, ty, true, t);
    else mm_emit(g, g2, y2, false, !ty, t);
    mm_finish(g, t, xvec, -2, same, x, dx);
  }
  if (dy && fold) {
    const char *xf = rows_emit(g, x, k.n), *gf = rows_emit(g, dout, n.n);
    if (ty) mm_emit(g, gf, xf, true, false, dy);
    else mm_emit(g, xf, gf, true, false, dy);
  } else if (dy) {
    const char *x2 = xvec ? axes_emit(g, "unsqueeze", x, 0, 0, 1, bwd_temp(g)) : x;
    bool same = same_batch(yv, ov, out_mat);
    const char *t = mm_target(g, yvec, same, dy);
    if (ty) mm_emit(g, g2, x2, true, tx, t);
    else mm_emit(g, x2, g2, !tx, false, t);
    mm_finish(g, t, yvec, -1, same, y, dy);
  }
  return true;
}

OpProto op_table_linalg[] = {
    {.type = "matmul", .doc = "Out = X @ Y, NumPy matmul: batched, broadcasting, 1-D promoted",
     .in = {{"X", 0, "left operand [..., M, K] (or [K])"},
            {"Y", 0, "right operand [..., K, N] (or [K])"}},
     .out = {{"Out", 0, "the product [..., M, N], promoted dtype"}},
     .attrs = {{"transpose_x", ATTR_BOOL, "false", NULL, "use X's last two axes swapped"},
               {"transpose_y", ATTR_BOOL, "false", NULL, "use Y's last two axes swapped"}},
     .infer = infer_matmul, .kernel = k_matmul, .grad_kind = GRAD_COMPOSITE,
     .grad = g_matmul, .flags = OP_F64},
    {0},
};
