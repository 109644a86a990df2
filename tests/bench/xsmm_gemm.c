/* xsmm_gemm.c — `make bench-xsmm`: the GEMMs of examples/fashion_resnet.net's
 * 15 convolutions (batch 128) as netrun's conv2d and conv2d_grad make
 * them, through OpenBLAS's sgemm (what netrun calls) and through libxsmm's
 * JIT kernels (Debian's libxsmm-dev 1.17, measured only: netrun does not
 * link it), on one thread.
 *
 * netrun's im2col puts nb images side by side (src/ops/conv.c: enough for
 * 256 columns, at most 2^18 floats), and per batch of P = nb * OH * OW
 * columns, row-major:
 *   forward        Y[O, P]    = W[O, K] . Col[K, P]        (beta 0)
 *   input grad     dCol[K, P] = W[O, K]' . dY[O, P]        (beta 0)
 *   filter grad    dW[O, K]  += dY[O, P] . Col[K, P]'      (beta 1)
 * with K = C * KH * KW.  libxsmm's kernels are column-major and take no
 * transposes here, so the same products are asked of them as
 *   forward        Y'[P, O]   = Col'[P, K] . W'[K, O]      (no copy)
 *   input grad     dCol'[P, K] = dY'[P, O] . W[O, K]       (W transposed once per op, counted)
 *   filter grad    dW'[O, K]  += dY[O, P] . Col'[P, K]      (dY transposed per batch into
 *                                                           [P, O] order, counted)
 * m cut into blocks of 64 rows (the columns of the batch).  Each way's
 * total is the median of ITERATIONS passes over the 15 convolutions; the
 * largest difference between the two ways' outputs, relative to the
 * largest value, is printed as a check that both computed the same
 * products (their sums run in different orders, so not the same bits).
 *
 *   build/xsmm_gemm [ITERATIONS]   prints per convolution and in all:
 *                                  forward, input grad, filter grad (ms) */
#include <cblas.h>
#include <libxsmm.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "resnet_convs.h"

enum { MB = 64 };   /* rows of C per libxsmm kernel call */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static float *floats(size_t n) {
  float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
  if (!p) {
    fprintf(stderr, "xsmm_gemm: out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
  return p;
}

typedef struct Shape {
  int o, k, cols, batches;   /* O, K, the columns of one batch, batches */
} Shape;

static Shape shape_of(const Conv *v) {
  int oh = (v->hw + 2 * v->pad - v->k) / v->stride + 1, p = oh * oh, k = v->c * v->k * v->k;
  int nb = (256 + p - 1) / p;
  if (nb > 1 && (int64_t)nb * k * p > (1 << 18)) nb = (1 << 18) / (k * p);
  if (nb < 1 || (v->k == 1 && v->stride == 1 && v->pad == 0)) nb = 1;
  if (nb > BATCH) nb = BATCH;
  return (Shape){v->o, k, nb * p, (BATCH + nb - 1) / nb};
}

/* One GEMM kind of one convolution, every batch, through OpenBLAS. */
static void blas(int kind, const Shape *s, const float *w, const float *col, const float *dy, float *y, float *dcol,
                 float *dw) {
  for (int b = 0; b < s->batches; b++) {
    if (kind == 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->o, s->cols, s->k, 1.0f, w, s->k, col, s->cols, 0.0f,
                  y, s->cols);
    else if (kind == 1)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s->k, s->cols, s->o, 1.0f, w, s->k, dy, s->cols, 0.0f,
                  dcol, s->cols);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->o, s->k, s->cols, 1.0f, dy, s->cols, col, s->cols,
                  1.0f, dw, s->k);
  }
}

typedef struct Kernels {
  libxsmm_smmfunction fwd[2], igrad[2], fgrad;   /* [0] 64 rows, [1] the last block's */
} Kernels;

static libxsmm_smmfunction kernel(int m, int n, int k, int lda, int ldb, int ldc, float beta) {
  float alpha = 1.0f;
  int flags = LIBXSMM_GEMM_FLAGS('N', 'N');
  libxsmm_smmfunction f = libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, &flags, NULL);
  if (!f) {
    fprintf(stderr, "xsmm_gemm: libxsmm has no kernel for m=%d n=%d k=%d\n", m, n, k);
    exit(1);
  }
  return f;
}

static Kernels kernels_of(const Shape *s) {
  Kernels q;
  int last = s->cols % MB ? s->cols % MB : MB;
  for (int i = 0; i < 2; i++) {
    int m = i ? last : MB;
    q.fwd[i] = kernel(m, s->o, s->k, s->cols, s->k, s->cols, 0.0f);
    q.igrad[i] = kernel(m, s->k, s->o, s->cols, s->o, s->cols, 0.0f);
  }
  q.fgrad = kernel(s->o, s->k, s->cols, s->o, s->cols, s->o, 1.0f);
  return q;
}

/* The same, through libxsmm; wt: W transposed, dyt: room for dY'. */
static void xsmm(int kind, const Shape *s, const Kernels *q, const float *w, float *wt, const float *col,
                 const float *dy, float *dyt, float *y, float *dcol, float *dwt) {
  if (kind == 1)   /* W[O, K] -> [K, O] row-major, i.e. W as a column-major O x K */
    for (int i = 0; i < s->o; i++)
      for (int j = 0; j < s->k; j++) wt[(size_t)j * s->o + i] = w[(size_t)i * s->k + j];
  for (int b = 0; b < s->batches; b++) {
    if (kind == 2) {
      for (int i = 0; i < s->o; i++)
        for (int p = 0; p < s->cols; p++) dyt[(size_t)p * s->o + i] = dy[(size_t)i * s->cols + p];
      q->fgrad(dyt, col, dwt);
      continue;
    }
    for (int m0 = 0; m0 < s->cols; m0 += MB) {
      int i = m0 + MB > s->cols;
      if (kind == 0) (i ? q->fwd[1] : q->fwd[0])(col + m0, w, y + m0);
      else (i ? q->igrad[1] : q->igrad[0])(dy + m0, wt, dcol + m0);
    }
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double diff(const float *a, const float *b, size_t n) {
  double d = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
    if (fabs(a[i]) > m) m = fabs(a[i]);
  }
  return m > 0 ? d / m : d;
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 5;
  if (iters < 1 || iters > 1000) {
    fprintf(stderr, "usage: xsmm_gemm [ITERATIONS (1-1000)]\n");
    return 2;
  }
  libxsmm_init();
  Shape sh[NCONV];
  Kernels q[NCONV];
  size_t most_k_cols = 0, most_o_cols = 0, most_ok = 0;
  for (int v = 0; v < NCONV; v++) {
    sh[v] = shape_of(&convs[v]);
    q[v] = kernels_of(&sh[v]);
    size_t kc = (size_t)sh[v].k * sh[v].cols, oc = (size_t)sh[v].o * sh[v].cols, ok = (size_t)sh[v].o * sh[v].k;
    if (kc > most_k_cols) most_k_cols = kc;
    if (oc > most_o_cols) most_o_cols = oc;
    if (ok > most_ok) most_ok = ok;
  }
  float *col = floats(most_k_cols), *dcol = floats(most_k_cols), *dcol2 = floats(most_k_cols);
  float *dy = floats(most_o_cols), *dyt = floats(most_o_cols), *y = floats(most_o_cols), *y2 = floats(most_o_cols);
  float *w = floats(most_ok), *wt = floats(most_ok), *dw = floats(most_ok), *dwt = floats(most_ok);
  double *t = calloc((size_t)iters * NCONV * 6, sizeof *t), total[6] = {0};
  double worst[3] = {0, 0, 0};
  for (int it = 0; it < iters + 1; it++)   /* the first pass warms up, untimed */
    for (int v = 0; v < NCONV; v++)
      for (int kind = 0; kind < 3; kind++) {
        const Shape *s = &sh[v];
        memset(dw, 0, sizeof *dw * (size_t)s->o * s->k);
        memset(dwt, 0, sizeof *dwt * (size_t)s->o * s->k);
        double t0 = now();
        blas(kind, s, w, col, dy, y, dcol, dw);
        double t1 = now();
        xsmm(kind, s, &q[v], w, wt, col, dy, dyt, y2, dcol2, dwt);
        double t2 = now();
        if (it) {
          t[((size_t)(it - 1) * NCONV + v) * 6 + kind] = (t1 - t0) * 1e3;
          t[((size_t)(it - 1) * NCONV + v) * 6 + 3 + kind] = (t2 - t1) * 1e3;
        }
        double d = 0;
        if (kind == 0) {   /* Y[o][p] against Y'[p][o] of each 64-row block: the same layout, Y row-major */
          d = diff(y, y2, (size_t)s->o * s->cols);
        } else if (kind == 1) {
          d = diff(dcol, dcol2, (size_t)s->k * s->cols);
        } else {           /* dW'[O, K] column-major is dW[O, K]... with O the fast index: transpose back */
          for (int i = 0; i < s->o; i++)
            for (int j = 0; j < s->k; j++) wt[(size_t)i * s->k + j] = dwt[(size_t)j * s->o + i];
          d = diff(dw, wt, (size_t)s->o * s->k);
        }
        if (d > worst[kind]) worst[kind] = d;
      }
  static const char *const kinds[] = {"forward", "input grad", "filter grad"};
  printf("conv (C->O, HxW, k, stride): columns per GEMM x GEMMs; OpenBLAS / libxsmm ms (median of %d)\n", iters);
  double *col_t = calloc((size_t)iters, sizeof *col_t);
  for (int v = 0; v < NCONV; v++) {
    const Conv *c = &convs[v];
    printf("  %2d->%-2d %2dx%-2d k%d s%d: %4d x %3d", c->c, c->o, c->hw, c->hw, c->k, c->stride, sh[v].cols,
           sh[v].batches);
    for (int j = 0; j < 6; j++) {
      for (int it = 0; it < iters; it++) col_t[it] = t[((size_t)it * NCONV + v) * 6 + j];
      qsort(col_t, (size_t)iters, sizeof *col_t, cmp);
      double m = col_t[(iters - 1) / 2];
      total[j] += m;
      if (j < 3) printf("  %s %.2f", kinds[j], m);
      else printf(j == 3 ? " | %.2f" : " %.2f", m);
    }
    printf("\n");
  }
  printf("all 15: OpenBLAS forward %.1f, input grad %.1f, filter grad %.1f = %.1f ms\n", total[0], total[1], total[2],
         total[0] + total[1] + total[2]);
  printf("all 15: libxsmm  forward %.1f, input grad %.1f, filter grad %.1f = %.1f ms\n", total[3], total[4], total[5],
         total[3] + total[4] + total[5]);
  printf("libxsmm / OpenBLAS: forward %.2f, input grad %.2f, filter grad %.2f, all %.2f\n", total[3] / total[0],
         total[4] / total[1], total[5] / total[2], (total[3] + total[4] + total[5]) / (total[0] + total[1] + total[2]));
  printf("largest difference / largest value: forward %.1e, input grad %.1e, filter grad %.1e\n", worst[0], worst[1],
         worst[2]);
  libxsmm_finalize();
  return 0;
}
