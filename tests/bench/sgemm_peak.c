/* sgemm_peak.c — `make bench-compare`'s yardstick: the rate OpenBLAS's
 * sgemm reaches on this machine, on the threads the OpenMP runtime is
 * given (OMP_NUM_THREADS), linked to the OpenBLAS netrun links.  Prints
 * one number, GFLOP/s (2 per multiply-add), the best of several runs of a
 * 1024 x 1024 x 1024 product, which a training step's FLOPs are compared
 * with ("share of sgemm peak"). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void) {
  enum { N = 1024, RUNS = 8 };
  float *a = malloc(sizeof *a * N * N), *b = malloc(sizeof *b * N * N), *c = malloc(sizeof *c * N * N);
  if (!a || !b || !c) return 1;
  for (int i = 0; i < N * N; i++) {
    a[i] = (float)(i % 7) * 0.25f;
    b[i] = (float)(i % 5) * 0.5f;
  }
  double best = 1e30;
  for (int r = 0; r < RUNS; r++) {
    double t = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
    t = now() - t;
    if (t < best) best = t;
  }
  printf("%.1f\n", 2.0 * N * N * N / best * 1e-9);
  free(a);
  free(b);
  free(c);
  return 0;
}
