/* sgemm_peak.c — `make bench-compare`'s yardstick: the best rate an
 * sgemm reaches on this machine, on the threads the OpenMP runtime is
 * given (OMP_NUM_THREADS): OpenBLAS's (the one netrun links) or oneDNN's,
 * whichever is faster.  OpenBLAS 0.3.21 (Debian 12) does not know every
 * CPU: on Intel's family 6 model 207, without OPENBLAS_CORETYPE, it picks
 * its SSE3 kernels (Prescott), a fifth of what the cores do, and a share
 * of that would mean nothing.  Prints one number, GFLOP/s (2 per
 * multiply-add), the best of several runs of a 1024 x 1024 x 1024
 * product, which a training step's FLOPs are compared with ("share of
 * sgemm peak"); and on stderr each library's figure, with OpenBLAS's
 * kernels' name. */
#include <cblas.h>
#include <dnnl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

char *openblas_get_corename(void);

enum { N = 1024, RUNS = 8 };

/* The best GFLOP/s of RUNS products through OpenBLAS (dnnl false) or oneDNN. */
static double rate(bool dnnl, const float *a, const float *b, float *c) {
  double best = 1e30;
  for (int r = 0; r < RUNS; r++) {
    double t = now();
    if (dnnl) {
      if (dnnl_sgemm('N', 'N', N, N, N, 1.0f, a, N, b, N, 0.0f, c, N) != dnnl_success) return 0;
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
    }
    t = now() - t;
    if (t < best) best = t;
  }
  return 2.0 * N * N * N / best * 1e-9;
}

int main(void) {
  float *a = malloc(sizeof *a * N * N), *b = malloc(sizeof *b * N * N), *c = malloc(sizeof *c * N * N);
  if (!a || !b || !c) return 1;
  for (int i = 0; i < N * N; i++) {
    a[i] = (float)(i % 7) * 0.25f;
    b[i] = (float)(i % 5) * 0.5f;
  }
  double blas = rate(false, a, b, c), dnnl = rate(true, a, b, c);
  fprintf(stderr, "sgemm_peak: OpenBLAS (%s kernels) %.1f GFLOP/s, oneDNN %.1f GFLOP/s\n", openblas_get_corename(),
          blas, dnnl);
  printf("%.1f\n", blas > dnnl ? blas : dnnl);
  free(a);
  free(b);
  free(c);
  return 0;
}
