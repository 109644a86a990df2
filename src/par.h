/* par.h — loops spread over the cores.
 *
 * PAR_FOR(cond) before a for loop runs its iterations on OpenMP's team of
 * threads when cond holds (enough work to pay for waking them) and the
 * build has OpenMP (-fopenmp, the default), else in order on one thread.
 * netrun links the OpenMP build of OpenBLAS, so the GEMMs and these loops
 * share one team: no thread of one spins while the other's wait.
 *
 * Only loops whose iterations write disjoint memory and whose results do
 * not depend on the order take it: the same bits on any number of threads. */
#ifndef NETRUN_PAR_H
#define NETRUN_PAR_H

#define PAR_PRAGMA(x) _Pragma(#x)
#ifdef _OPENMP
#include <omp.h>
/* Inside another PAR_ loop it runs on its caller's thread. */
#define PAR_FOR(cond) PAR_PRAGMA(omp parallel for schedule(static) if((cond) && !omp_in_parallel()))
/* Iterations of much work each (a GEMM or more), handed out one at a time
 * to n threads (at most par_threads()); par_thread() numbers the thread
 * running one, from 0 to n - 1, for buffers of its own.  The GEMMs such a
 * loop calls run on its thread. */
#define PAR_EACH(cond, n) PAR_PRAGMA(omp parallel for schedule(dynamic, 1) if(cond) num_threads(n))
static inline int par_threads(void) { return omp_in_parallel() ? 1 : omp_get_max_threads(); }
static inline int par_thread(void) { return omp_get_thread_num(); }
#else
#define PAR_FOR(cond)
#define PAR_EACH(cond, n)
static inline int par_threads(void) { return 1; }
static inline int par_thread(void) { return 0; }
#endif

/* Elements below which a memory-bound loop stays on one thread (waking
 * the team costs about as much as copying 8k floats). */
#define PAR_MIN_WORK 8192

#endif
