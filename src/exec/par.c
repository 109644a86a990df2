/* par.c — the threads netrun's loops and GEMMs run on (par.h).
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
 * Two kinds of team.  par_parts (GEMMs, the unary loops) runs on a pool of
 * threads of its own that take parts as they come free, so the caller
 * never waits for a thread another process keeps off its core unless that
 * thread holds a part (the pool, below).  An OpenMP loop that splits its
 * elements evenly (PAR_FOR) instead ends at a barrier that waits for
 * every thread of its team, so one thread kept off its core stalls the
 * rest (a step of fashion_mlp beside two busy processes on two cores took
 * 30 times as long); for those, every PAR_CHECK_NS the thread starting a loop reads how
 * long netrun's threads waited, runnable, for a core (the kernel's
 * schedstat); when they waited more than PAR_SHRINK of the time, two looks
 * in a row, the team loses a thread, when less than PAR_GROW it gains one
 * back, at most one try per backoff (doubling while each try is undone at
 * once), so a machine that stays busy is not probed every check.  (A
 * thread spinning idle between loops waits too when another process takes
 * its core: one look is not enough.)  Since no team changes a result, it
 * may change at any loop.  (Attention's slices, layer norm's and
 * softmax-cross-entropy's rows run on the pool, as the GEMMs around them
 * do: one set of threads for a transformer's step, not the pool's worker
 * spinning beside an OpenMP thread woken for the next op.)  A PAR_EACH
 * loop hands its iterations (a convolution's batches of images) out one
 * at a time as threads come free, so a thread kept off its core holds up
 * only the one it took: it keeps every thread (par.h's par_each_threads),
 * which on a busy host gets netrun its fair share of the cores
 * (fashion_resnet's step beside two busy loops, 2 threads: 0.62-0.81x its
 * time on the shrunk team; doc/speed.md). */
#include "exec/par.h"

#include <cblas.h>
#include <dirent.h>
#include <dnnl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A GEMM's parts: at most PAR_GEMM_PARTS, each of PAR_GEMM_WORK
 * multiply-adds or more, in blocks of 16 rows or columns.  Measured on
 * fashion_mlp's 8 GEMMs on two threads: 0.90-0.96x the time OpenBLAS's
 * own threads take for them (each part packs the smaller operand again;
 * OpenBLAS's threads share one packed copy but wait for each other). */
#define PAR_GEMM_PARTS 4
#define PAR_GEMM_WORK ((int64_t)1 << 21)
#define PAR_GEMM_ALIGN 16
/* Products from which par_sgemm1 calls oneDNN (64x64x16, 32x64x32).  With
 * the two calls that hold the signals, oneDNN took 0.84-1.7x OpenBLAS's
 * time on products of 32768 (adding_lstm's, 16x64x32 and 32x16x64, the
 * slowest), 0.75-0.9x on 65536, 0.5-0.7x from 131072 (one thread,
 * OPENBLAS_CORETYPE=Haswell; 2026-11-30).  oneDNN's first call in a
 * process takes about 20 ms more: its kernels are made then. */
#define PAR_DNNL_MIN 65536
static bool par_dnnl;   /* par_init: NETRUN_TEST_GEMM is not openblas */
static sigset_t par_async_signals;   /* par_init: all but the faults' */
/* A part of more than PAR_PANEL_WORK multiply-adds (about half a second
 * on one core) is one sgemm per panel of C's rows, Ctrl-C checked between
 * them: one OpenBLAS call sees no interrupt until it ends.  The panels
 * start at multiples of PAR_PANEL_ALIGN rows from the part's start, a
 * multiple of every sgemm kernel's tile of C's rows (OpenBLAS tiles the
 * row-major C's rows as its column-major N: 12 rows on Haswell and Zen,
 * 4, 8, 16 or 24 elsewhere), so each row is computed in the same tile, by
 * the same code, as in one call on the part: the same bits with
 * OpenBLAS and with oneDNN's AVX-512 sgemm (tests/trust_limits.bats; any
 * other cut changes the last rows of a panel; oneDNN's AVX2 sgemm blocks
 * the sum by the call's shape, so there a cut gives other bits within
 * rounding).  Which cut a product gets depends on its shape alone: the
 * same bits on any number of threads either way.  Each panel packs B again: with PAR_PANEL_MIN_ROWS rows or more
 * that costs nothing measurable (a 2048^3 product on one core: panels of
 * 960 rows 0.96x the time of one call, of 192 rows 1.11x). */
#define PAR_PANEL_WORK ((int64_t)1 << 32)
#define PAR_PANEL_ALIGN 192
#define PAR_PANEL_MIN_ROWS 960
_Static_assert(PAR_PANEL_MIN_ROWS % PAR_PANEL_ALIGN == 0, "panels start at multiples of PAR_PANEL_ALIGN");
bool exec_interrupted(void);   /* exec.h's, whose DT_ names collide with dirent.h's */

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

/* OpenBLAS (a DYNAMIC_ARCH build, Debian's) picks its kernels by the
 * CPU's model when it loads, from a table as old as the release: Debian
 * 12's 0.3.21 does not know Intel's later Xeons (family 6 model 207 among
 * them) and runs its SSE3 kernels there (Prescott): a fifth of the rate
 * of its AVX2 ones, and other bits — a row's value depended on how many
 * rows the product had (eval at another --batch gave another loss).  When
 * it has taken kernels without AVX2 on a CPU that has AVX2 and FMA, and
 * OPENBLAS_CORETYPE does not choose, netrun has it take its AVX2 ones
 * (Haswell: those it is measured and tested with elsewhere), through the
 * two calls OpenBLAS makes at load time, before any product (weak: a
 * build without them keeps its kernels).  A choice of the user's, or
 * kernels that know AVX2, are kept. */
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
char *openblas_get_corename(void) __attribute__((weak));

static void blas_kernels(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (getenv("OPENBLAS_CORETYPE") || !gotoblas_dynamic_init || !gotoblas_dynamic_quit || !openblas_get_corename)
    return;
  static const char *const avx2[] = {"Haswell", "SkylakeX", "Cooperlake", "SapphireRapids", "Zen"};
  const char *core = openblas_get_corename();
  for (size_t i = 0; i < sizeof avx2 / sizeof *avx2; i++)
    if (!core || strcmp(core, avx2[i]) == 0) return;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
  setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");   /* what netrun starts (mpirun's ranks) decides for itself */
#endif
}

void par_init(void) {
  if (par.max) return;
  blas_kernels();
#ifdef _OPENMP
  par.max = omp_get_max_threads();
  /* netrun sizes its team itself: OMP_DYNAMIC's shrinking (from the load
   * average of 15 minutes) would only come on top */
  omp_set_dynamic(0);
#endif
  if (par.max < 1) par.max = 1;
#ifdef _OPENMP
  /* Every team netrun starts says its size (par.h); a library that asks
   * OpenMP how many threads to use (oneDNN) is told one, as on the pool's
   * workers */
  omp_set_num_threads(1);
#endif
  par.team = par.max;
  openblas_set_num_threads(1);
  const char *gemm = getenv("NETRUN_TEST_GEMM");
  par_dnnl = !(gemm && strcmp(gemm, "openblas") == 0);
  sigfillset(&par_async_signals);
  static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT};
  for (size_t i = 0; i < sizeof faults / sizeof *faults; i++) sigdelset(&par_async_signals, faults[i]);
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


/* ---- the pool: par_parts ------------------------------------------------
 *
 * A job is PARTS calls fn(arg, p).  The thread calling par_parts publishes
 * it and takes parts itself; each worker awake takes parts too, one at a
 * time, from one atomic word (the job's generation in the high 32 bits, the
 * next part in the low), until none is left.  The caller then waits only
 * for the parts taken and not yet done: a worker another process keeps off
 * its core before it took a part costs nothing (an OpenMP team waits at its
 * barrier for every thread).  Waits spin PAR_SPIN_NS, then sleep on a
 * futex.  Jobs alternate between two slots, so a worker that read a job
 * late can only fail to claim a part of it (the generation moved on). */
#define PAR_POOL_MAX 64
/* Measured on fashion_mlp's epoch (2 cores, alternating with the OpenMP
 * team's build): a 20 us spin slowed the quiet epoch ~9% (the worker slept
 * through most of the master's serial work between jobs, then a futex wake
 * each job); 50-200 us kept it as fast; 1 ms lost most of the gain beside
 * two busy loops (a spinning worker spends the core share the caller's
 * serial work could use). */
#define PAR_SPIN_NS 100000LL

typedef struct Job {
  _Atomic(ParPart) fn;
  _Atomic(void *) arg;
  _Atomic uint32_t parts, takers;   /* takers: workers 0 .. takers-1 join */
  _Atomic uint32_t done;            /* parts finished (a futex word) */
  _Atomic uint32_t waiting;         /* the caller sleeps on done */
} Job;

static struct {
  pthread_t thread[PAR_POOL_MAX];
  int n;                           /* workers started */
  _Atomic bool stop;
  _Atomic uint64_t claim;          /* generation << 32 | next part */
  _Atomic uint32_t gen;            /* the generation (a futex word) */
  _Atomic uint32_t sleepers;       /* workers asleep on gen */
  _Atomic bool busy;               /* a job is running */
  Job job[2];
} pool;

static _Thread_local int worker_id = -1;
/* par_slot's answer: set as a thread starts on a call's parts */
static _Thread_local int part_slot;

int par_slot(void) { return part_slot; }

static bool in_omp(void) {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

static void futex_wait(_Atomic uint32_t *w, uint32_t seen) {
  syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w, int n) {
  syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static int64_t clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Spins up to PAR_SPIN_NS while *w == seen; true if it changed. */
static bool spin_while(_Atomic uint32_t *w, uint32_t seen) {
  int64_t end = 0;
  for (int i = 0;; i++) {
    if (atomic_load_explicit(w, memory_order_acquire) != seen) return true;
    __builtin_ia32_pause();
    if ((i & 63) == 63) {
      int64_t t = clock_ns();
      if (!end) end = t + PAR_SPIN_NS;
      else if (t >= end) return false;
    }
  }
}

/* Takes and runs parts of the current job until none is left; returns the
 * generation found with no part left.  Worker `id` (-1: the caller) joins
 * only a job that counts it among its takers. */
static uint32_t take_parts(int id) {
  part_slot = id + 1;
  for (;;) {
    uint64_t c = atomic_load_explicit(&pool.claim, memory_order_acquire);
    uint32_t g = (uint32_t)(c >> 32), p = (uint32_t)c;
    Job *j = &pool.job[g & 1];
    uint32_t parts = atomic_load_explicit(&j->parts, memory_order_relaxed);
    if (p >= parts || (id >= 0 && (uint32_t)id >= atomic_load_explicit(&j->takers, memory_order_relaxed)))
      return g;
    ParPart fn = atomic_load_explicit(&j->fn, memory_order_relaxed);
    void *arg = atomic_load_explicit(&j->arg, memory_order_relaxed);
    /* the claim still names generation g: the slot was not rewritten */
    if (!atomic_compare_exchange_weak(&pool.claim, &c, c + 1)) continue;
    fn(arg, p);
    if (atomic_fetch_add(&j->done, 1) + 1 == parts && atomic_load(&j->waiting)) futex_wake(&j->done, 1);
  }
}

static void *worker(void *id) {
  worker_id = (int)(intptr_t)id;
#ifdef _OPENMP
  /* OpenBLAS's OpenMP build threads a GEMM as the calling thread's OpenMP
   * setting says (each thread has its own): one, as on the caller */
  omp_set_num_threads(1);
#endif
  uint32_t seen = 0;
  for (;;) {
    if (!spin_while(&pool.gen, seen)) {
      atomic_fetch_add(&pool.sleepers, 1);
      while (atomic_load(&pool.gen) == seen && !pool.stop) futex_wait(&pool.gen, seen);
      atomic_fetch_sub(&pool.sleepers, 1);
    }
    if (atomic_load(&pool.stop)) return NULL;
    seen = take_parts(worker_id);
  }
}

static void pool_stop(void) {
  pool.stop = true;
  atomic_fetch_add(&pool.gen, 1);
  futex_wake(&pool.gen, INT_MAX);
  for (int i = 0; i < pool.n; i++) pthread_join(pool.thread[i], NULL);
  pool.n = 0;
}

/* A child of fork has none of the workers (netrun does not fork; a plugin
 * might): its jobs then run on the caller alone. */
static void pool_forget(void) { pool.n = 0; }

/* Starts the workers the first time a job has takers for them. */
static void pool_start(int workers) {
  if (pool.n || workers < 1) return;
  if (workers > PAR_POOL_MAX) workers = PAR_POOL_MAX;
  for (int i = 0; i < workers; i++) {
    if (pthread_create(&pool.thread[i], NULL, worker, (void *)(intptr_t)i) != 0) break;
    pool.n = i + 1;
  }
  if (pool.n) {
    atexit(pool_stop);
    pthread_atfork(NULL, NULL, pool_forget);
  }
}

void par_parts(int64_t parts, ParPart fn, void *arg) {
  par_init();
  int team = parts > 1 && worker_id < 0 && !in_omp() ? par.max : 1;
  if (team > parts) team = (int)parts;
  bool idle = false;
  if (team > 1 && parts <= UINT32_MAX) {
    pool_start(par.max - 1);
    idle = pool.n > 0 && atomic_compare_exchange_strong(&pool.busy, &idle, true);
  }
  if (!idle) {   /* one thread: in order, no job at all */
    int slot = part_slot;   /* a call from inside a part keeps its caller's */
    part_slot = 0;
    for (int64_t p = 0; p < parts; p++) fn(arg, p);
    part_slot = slot;
    return;
  }
  uint32_t g = atomic_load(&pool.gen) + 1;
  Job *j = &pool.job[g & 1];
  atomic_store_explicit(&j->fn, fn, memory_order_relaxed);
  atomic_store_explicit(&j->arg, arg, memory_order_relaxed);
  atomic_store_explicit(&j->parts, (uint32_t)parts, memory_order_relaxed);
  atomic_store_explicit(&j->takers, (uint32_t)(team - 1), memory_order_relaxed);
  atomic_store(&j->done, 0);
  atomic_store(&j->waiting, 0);
  atomic_store_explicit(&pool.claim, (uint64_t)g << 32, memory_order_release);
  atomic_store(&pool.gen, g);
  if (atomic_load(&pool.sleepers)) futex_wake(&pool.gen, INT_MAX);
  take_parts(-1);
  uint32_t d;
  while ((d = atomic_load(&j->done)) != (uint32_t)parts)
    if (!spin_while(&j->done, d)) {
      atomic_store(&j->waiting, 1);
      if (atomic_load(&j->done) == d) futex_wait(&j->done, d);
    }
  atomic_store(&pool.busy, false);
}

/* sgemm on one thread.  Products of PAR_DNNL_MIN multiply-adds or more go
 * to oneDNN's sgemm, whose JIT kernels use the CPU's widest vectors
 * (AVX-512 where there is: char_lm's larger GEMMs 1.7-2.3x OpenBLAS's rate
 * with OPENBLAS_CORETYPE=Haswell, which keeps OpenBLAS in AVX2;
 * doc/speed.md); oneDNN's own threads are not used (par_init: OpenMP says
 * one).  Smaller ones (attention's 32x32x16 a head, an LSTM's 32x64x16)
 * cost less in OpenBLAS, whose call does less around the kernel.
 * NETRUN_TEST_GEMM=openblas sends every product to OpenBLAS (tests,
 * benchmarks); oneDNN's own DNNL_MAX_CPU_ISA bounds its vectors.  Which
 * library computes a product depends on its shape alone, so the bits do
 * not depend on the threads.
 * OpenBLAS's beta = 0 zeroes C in a pass of its own (sgemm_beta, 7% of a
 * char_lm step on one thread) that is slower than memset; with beta = 1 it
 * skips the pass and its kernel adds AB to C as it would to that pass's
 * zeros: the same bits. */
void par_sgemm1(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                int ldb, float beta, float *c, int ldc) {
  if (par_dnnl && (int64_t)m * n * k >= PAR_DNNL_MIN) {
    /* oneDNN 2.6's JIT sgemm points the stack pointer into its heap
     * buffer while it runs, so a signal handler run then (Ctrl-C in
     * netrun train) writes its frame there and corrupts the heap (oneDNN
     * issue 4845, fixed in 3.11): the asynchronous signals wait until the
     * call returns, as they would for a handler that only sets a flag */
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, &par_async_signals, &old);
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (st == dnnl_success) return;
  }
  if (beta == 0 && m > 0 && n > 0) {
    if (ldc == n) memset(c, 0, sizeof *c * (size_t)m * (size_t)n);
    else
      for (int i = 0; i < m; i++) memset(c + (int64_t)i * ldc, 0, sizeof *c * (size_t)n);
    beta = 1;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              lda, b, ldb, beta, c, ldc);
}

int64_t par_dnnl_min(void) {
  par_init();
  return par_dnnl ? PAR_DNNL_MIN : 0;
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
  int64_t rows = PAR_PANEL_WORK / ((int64_t)n * k + 1) / PAR_PANEL_ALIGN * PAR_PANEL_ALIGN;
  if (rows < PAR_PANEL_MIN_ROWS) rows = PAR_PANEL_MIN_ROWS;
  for (int64_t r = 0; r < m && !(r && exec_interrupted()); r += rows)
    par_sgemm1(ta, tb, (int)(m - r < rows ? m - r : rows), n, k, alpha, a + (ta ? r : r * lda), lda, b, ldb, beta,
               c + r * ldc, ldc);
}

typedef struct Gemm {
  bool cols, ta, tb;
  int parts, m, n, k, lda, ldb, ldc;
  float alpha, beta;
  const float *a, *b;
  float *c;
} Gemm;

static void gemm_run(void *arg, int64_t p) {
  const Gemm *g = arg;
  gemm_part((int)p, g->parts, g->cols, g->ta, g->tb, g->m, g->n, g->k, g->alpha, g->a, g->lda, g->b, g->ldb,
            g->beta, g->c, g->ldc);
}

void par_sgemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
               int ldb, float beta, float *c, int ldc) {
  /* Cutting C's columns packs A again for each part, cutting its rows B:
   * the smaller is copied again. */
  bool cols = m <= n;
  int64_t dim = cols ? n : m, units = (dim + PAR_GEMM_ALIGN - 1) / PAR_GEMM_ALIGN;
  int64_t parts = (int64_t)m * n * k / PAR_GEMM_WORK;
  if (parts > PAR_GEMM_PARTS) parts = PAR_GEMM_PARTS;
  if (parts > units) parts = units;
  if (parts < 1) parts = 1;
  Gemm g = {cols, ta, tb, (int)parts, m, n, k, lda, ldb, ldc, alpha, beta, a, b, c};
  par_parts(parts, gemm_run, &g);
}
