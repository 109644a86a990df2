/* par.h — loops and GEMMs spread over the cores.
 *
 * netrun runs its work on threads of its own choosing (par.c): at most the
 * threads OpenMP offers (OMP_NUM_THREADS, else one per core).  OpenBLAS
 * itself always runs on one thread: par_sgemm cuts each GEMM into parts
 * fixed by its shape and hands the parts to par_parts, whose threads take
 * them as they come free.  The OpenMP loops below run on a team that is
 * smaller while other processes hold the cores.
 *
 * PAR_FOR(cond) before a for loop runs its iterations on the team when
 * cond holds (enough work to pay for waking it) and the build has OpenMP
 * (-fopenmp, the default), else in order on one thread.  Only loops whose
 * iterations write disjoint memory and whose results do not depend on the
 * order take it (par_parts likewise); with every GEMM cut by its shape
 * alone, the numbers are the same bits on any number of threads, and so
 * whichever thread runs which part. */
#ifndef NETRUN_PAR_H
#define NETRUN_PAR_H

#include <stdbool.h>
#include <stdint.h>

/* Records the threads OpenMP offers and puts OpenBLAS on one thread; the
 * first par_ call does it if main has not. */
void par_init(void);
/* The most threads netrun will use (OMP_NUM_THREADS, else the cores). */
int par_max_threads(void);
/* The team for the next parallel loop: between 1 and par_max_threads(),
 * smaller while the threads wait for cores other processes hold. */
int par_team(void);

/* fn(arg, p) for every p from 0 to parts - 1, on the team, each part
 * taken by whichever thread is free: the parts must write disjoint memory.
 * The caller takes parts too and returns when all are done. */
typedef void (*ParPart)(void *arg, int64_t p);
void par_parts(int64_t parts, ParPart fn, void *arg);
/* Inside fn: the slot of the thread running the part, from 0 to
 * par_max_threads() - 1, no two threads of one par_parts call sharing one
 * (the caller's is 0), for buffers of the call's own. */
int par_slot(void);

/* C = alpha op(A) op(B) + beta C, row-major, as cblas_sgemm, on the team:
 * rows or columns of C in parts fixed by the shape, each part one
 * single-threaded sgemm. */
void par_sgemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
               int ldb, float beta, float *c, int ldc);

/* cblas_sgemm's C = alpha op(A) op(B) + beta C (row-major) on the calling
 * thread: oneDNN's sgemm from PAR_DNNL_MIN multiply-adds, else OpenBLAS's,
 * a beta of 0 done by memset before its kernel (par.c). */
void par_sgemm1(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                int ldb, float beta, float *c, int ldc);
/* The multiply-adds from which par_sgemm1 calls oneDNN: 0 when it does not
 * (NETRUN_TEST_GEMM=openblas). */
int64_t par_dnnl_min(void);

#define PAR_PRAGMA(x) _Pragma(#x)
#ifdef _OPENMP
#include <omp.h>
/* Threads a loop may take now: 1 inside another PAR_ loop (it runs on its
 * caller's thread). */
static inline int par_threads(void) { return omp_in_parallel() ? 1 : par_team(); }
#define PAR_FOR(cond) \
  PAR_PRAGMA(omp parallel for schedule(static) if((cond) && par_threads() > 1) num_threads(par_threads()))
/* Iterations of much work each (a GEMM or more), handed out one at a time
 * to n threads (at most par_threads()); par_thread() numbers the thread
 * running one, from 0 to n - 1, for buffers of its own.  The GEMMs such a
 * loop calls run on its thread. */
#define PAR_EACH(cond, n) PAR_PRAGMA(omp parallel for schedule(dynamic, 1) if(cond) num_threads(n))
static inline int par_thread(void) { return omp_get_thread_num(); }
/* Threads a PAR_EACH loop may take now: every thread (1 inside another
 * PAR_ loop).  Its iterations are handed out as threads come free, so a
 * thread another process keeps off its core holds up only the iteration
 * it took, and the team is not shrunk on a busy host as PAR_FOR's is: on
 * two cores beside two busy processes, two threads get half the machine
 * where one gets a third. */
static inline int par_each_threads(void) { return omp_in_parallel() ? 1 : par_max_threads(); }
#else
#define PAR_FOR(cond)
#define PAR_EACH(cond, n)
static inline int par_threads(void) { return 1; }
static inline int par_thread(void) { return 0; }
static inline int par_each_threads(void) { return 1; }
#endif

/* Elements below which a memory-bound loop stays on one thread (waking
 * the team costs about as much as copying 8k floats). */
#define PAR_MIN_WORK 8192

#endif
