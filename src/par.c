/* par.c — the team of threads netrun's loops and GEMMs run on (par.h).
 *
 * Same bits on any number of threads, by construction: OpenBLAS is put on
 * one thread for good (its own threading gives different bits on 1 and 2
 * threads), and par_sgemm cuts a GEMM into at most PAR_GEMM_PARTS parts,
 * blocks of whole rows or columns of C fixed by the shape alone; each
 * element of C is computed by one single-threaded sgemm over all of K,
 * whichever thread runs its part.  (A convolution that hands its images to
 * threads runs each of their GEMMs whole instead: conv.c.)  The PAR_ loops
 * keep their own orders (par.h).
 *
 * The team: OpenMP's threads spin, then sleep, at the barrier that ends a
 * parallel loop until every thread of the team has done its share, so one
 * thread that another process keeps off its core stalls the rest (a step
 * of fashion_mlp beside two busy processes on two cores took 30 times as
 * long).  Every PAR_CHECK_NS the thread starting a loop reads how long
 * netrun's threads waited, runnable, for a core (the kernel's schedstat);
 * when they waited more than PAR_SHRINK of the time, two looks in a row,
 * the team loses a thread, when less than PAR_GROW it gains one back, at
 * most one try per backoff (doubling while each try is undone at once), so
 * a machine that stays busy is not probed every check.  (A thread spinning
 * idle between loops waits too when another process takes its core: one
 * look is not enough.)  Since the team never changes a result, it may
 * change at any loop. */
#include "par.h"

#include <cblas.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* A GEMM's parts: at most PAR_GEMM_PARTS, each of PAR_GEMM_WORK
 * multiply-adds or more, in blocks of 16 rows or columns.  Measured on
 * fashion_mlp's 8 GEMMs on two threads: 0.90-0.96x the time OpenBLAS's
 * own threads take for them (each part packs the smaller operand again;
 * OpenBLAS's threads share one packed copy but wait for each other). */
#define PAR_GEMM_PARTS 4
#define PAR_GEMM_WORK ((int64_t)1 << 21)
#define PAR_GEMM_ALIGN 16

#define PAR_CHECK_NS 50000000LL
#define PAR_SHRINK 0.20
#define PAR_GROW 0.03
#define PAR_BACKOFF_NS 200000000LL
#define PAR_BACKOFF_MAX_NS 6400000000LL

static struct {
  int max, team;
  bool adapt;              /* schedstat readable */
  int64_t next;            /* when to look again */
  int64_t at, wait;        /* the last look: time, threads' summed wait */
  int64_t grew, hold;      /* when the team last grew; no growth before */
  int64_t backoff;
  int over;                /* looks in a row that found waits over PAR_SHRINK */
} par;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The nanoseconds every thread of the process has waited on a run queue
 * (the second field of each task's schedstat), or -1. */
static int64_t threads_waited(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int64_t sum = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", e->d_name);
    FILE *f = fopen(path, "r");
    unsigned long long run, wait;
    if (!f) continue;   /* a thread that just ended */
    if (fscanf(f, "%llu %llu", &run, &wait) == 2) sum += (int64_t)wait;
    fclose(f);
  }
  closedir(d);
  return sum;
}

void par_init(void) {
  if (par.max) return;
#ifdef _OPENMP
  par.max = omp_get_max_threads();
  /* netrun sizes its team itself: OMP_DYNAMIC's shrinking (from the load
   * average of 15 minutes) would only come on top */
  omp_set_dynamic(0);
#endif
  if (par.max < 1) par.max = 1;
  par.team = par.max;
  openblas_set_num_threads(1);
  par.backoff = PAR_BACKOFF_NS;
  par.at = now_ns();
  par.next = par.at + PAR_CHECK_NS;
  par.wait = par.max > 1 ? threads_waited() : -1;
  par.adapt = par.wait >= 0;
}

int par_max_threads(void) {
  par_init();
  return par.max;
}

/* Resizes the team from the threads' waits since the last look. */
static void adapt(int64_t t) {
  int64_t w = threads_waited();
  if (w < 0) {
    par.adapt = false;
    par.team = par.max;
    return;
  }
  double waited = (double)(w - par.wait) / ((double)(t - par.at) * par.team);
  par.at = t;
  par.wait = w;
  par.next = t + PAR_CHECK_NS;
  par.over = waited > PAR_SHRINK ? par.over + 1 : 0;
  if (par.team > 1 && par.over >= 2) {
    par.team--;
    par.over = 0;
    /* a team grown just before: the cores are still taken; wait longer */
    par.backoff = t - par.grew <= 4 * PAR_CHECK_NS ? par.backoff * 2 : PAR_BACKOFF_NS;
    if (par.backoff > PAR_BACKOFF_MAX_NS) par.backoff = PAR_BACKOFF_MAX_NS;
    par.hold = t + par.backoff;
  } else if (par.team < par.max && waited < PAR_GROW && t >= par.hold) {
    par.team++;
    par.grew = t;
  }
}

int par_team(void) {
  par_init();
  if (par.adapt) {
    int64_t t = now_ns();
    if (t >= par.next) adapt(t);
  }
  return par.team;
}

/* Part p of parts of a GEMM cut along C's columns (cols) or rows. */
static void gemm_part(int p, int parts, bool cols, bool ta, bool tb, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  int dim = cols ? n : m, units = (dim + PAR_GEMM_ALIGN - 1) / PAR_GEMM_ALIGN;
  int s0 = (int)((int64_t)units * p / parts) * PAR_GEMM_ALIGN;
  int s1 = (int)((int64_t)units * (p + 1) / parts) * PAR_GEMM_ALIGN;
  if (s1 > dim) s1 = dim;
  if (s1 <= s0) return;
  if (cols) {
    b += tb ? (int64_t)s0 * ldb : s0;
    c += s0;
    n = s1 - s0;
  } else {
    a += ta ? s0 : (int64_t)s0 * lda;
    c += (int64_t)s0 * ldc;
    m = s1 - s0;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              lda, b, ldb, beta, c, ldc);
}

void par_sgemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
               int ldb, float beta, float *c, int ldc) {
  par_init();
  /* Cutting C's columns packs A again for each part, cutting its rows B:
   * the smaller is copied again. */
  bool cols = m <= n;
  int64_t dim = cols ? n : m, units = (dim + PAR_GEMM_ALIGN - 1) / PAR_GEMM_ALIGN;
  int64_t parts = (int64_t)m * n * k / PAR_GEMM_WORK;
  if (parts > PAR_GEMM_PARTS) parts = PAR_GEMM_PARTS;
  if (parts > units) parts = units;
  if (parts < 1) parts = 1;
  int nt = parts > 1 ? par_threads() : 1;
  if (nt > parts) nt = (int)parts;
  if (nt <= 1) {   /* no parallel region at all: even one not taken costs */
    for (int p = 0; p < (int)parts; p++)
      gemm_part(p, (int)parts, cols, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  PAR_EACH(true, nt)
  for (int p = 0; p < (int)parts; p++)
    gemm_part(p, (int)parts, cols, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
