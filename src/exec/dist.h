/* dist.h — data-parallel training over Open MPI: the ranks of one
 * `mpirun -np N netrun train` job and the few collectives training needs.
 *
 * netrun does not link Open MPI.  dist_start loads libmpi (dlopen) only
 * when the environment says mpirun started the process (OMPI_COMM_WORLD_SIZE
 * or PMIX_RANK is set), through a small table of its functions; a netrun
 * that mpirun did not start never loads it, initialises nothing, and runs
 * on a machine without Open MPI.  Until dist_start succeeds (and after
 * dist_stop) the process is rank 0 of 1 and every collective is a no-op.
 *
 * Every reduction here is fixed by rank, so its result is the same bits on
 * every rank and from run to run: dist_sum_f32 sends each rank a slice of
 * every rank's vector (all-to-all), which it sums in rank order 0, 1, ...,
 * N-1, and then gathers the summed slices everywhere (all-gather) — the
 * traffic of a ring allreduce, 2 (N-1)/N times the vector, without the
 * reduction order MPI_Allreduce leaves to its algorithm.  Small values
 * (a step's loss, a flag) go through dist_gather and are summed by the
 * caller in rank order.
 *
 * Failing: the collectives cannot fail in a way the caller handles: Open
 * MPI's default error handler ends the job when one does (a rank that
 * died, a connection reset), and mpirun says which rank.  A link that is
 * down fails nothing (TCP waits without a reset), so every collective
 * waits with a deadline, NETRUN_COLLECTIVE_TIMEOUT seconds (60 unless
 * set; 0: none): a thread of each rank sends every other rank a
 * heartbeat each second, whether the main thread works or waits, so a
 * wait past the deadline names the ranks not heard from for that long
 * ("rank 0: no answer from rank 2 for 60 s") and ends the job, while a
 * rank busy in a long step is waited for.  A
 * rank that meets an error while the others may wait for it in a
 * collective calls dist_abort: its error is printed first, then mpirun
 * ends every rank. */
#ifndef NETRUN_DIST_H
#define NETRUN_DIST_H

#include "base/diag.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether mpirun started this process (its environment says so). */
bool dist_launched(void);
/* Loads libmpi and initialises MPI; false after an error reported to d. */
bool dist_start(Diag *d);
/* MPI_Finalize, when dist_start ran. */
void dist_stop(void);
/* Ends every rank of the job with exit status `status` (MPI_Abort; this
 * rank ends within 10 s even when MPI_Abort cannot reach mpirun); when
 * MPI is not running, returns. */
void dist_abort(int status);
/* For netrun's own tests (NETRUN_TEST_CUT): this rank stops as one whose
 * link was cut s seconds into a collective wait — its main thread waits
 * for nothing, never returning, and its heartbeats say it waits for s
 * seconds more (one more at the end), then stop.  A no-op without ranks. */
void dist_test_cut(double s);

/* This process's rank and the job's ranks (0 and 1 without mpirun). */
int dist_rank(void);
int dist_size(void);

/* x[0..n) := the sum over the ranks of each rank's x, in rank order. */
void dist_sum_f32(float *x, int64_t n);
/* The same sum, overlapped with the caller's work: dist_sum_start starts
 * summing x[0..n) (which stays the caller's, untouched until the end) and
 * returns the sum's id; dist_progress, called between the caller's steps,
 * lets Open MPI move the sums in flight along (it progresses non-blocking
 * collectives only inside MPI calls; at most once a millisecond); dist_sum_finish(id) waits for the
 * sum, writes it into x and returns x (NULL: no such sum in flight).  The
 * same bits as dist_sum_f32.  Every rank starts its sums in the same
 * order; they may finish in any. */
int64_t dist_sum_start(float *x, int64_t n);
void dist_progress(void);
float *dist_sum_finish(int64_t id);
/* all[k * bytes ...] := rank k's `mine` (bytes each), on every rank. */
void dist_gather(const void *mine, size_t bytes, void *all);
/* Rank 0 gathers every rank's `mine` (of any size): *all := rank 0's,
 * then rank 1's... (mem_alloc'd, the caller's to free), sizes[k] := rank
 * k's bytes; on the other ranks *all stays NULL.  False (on every rank)
 * when they total more than 2 GB, what one MPI call can move. */
bool dist_gather_bytes(const void *mine, size_t bytes, void **all, size_t *sizes);
/* buf := rank 0's buf, on every rank. */
void dist_broadcast(void *buf, size_t bytes);

/* What a rank says at a point every rank reaches together (the trainer's
 * start, each step's forward pass, evaluation, an epoch's end). */
typedef struct DistReport {
  double loss;          /* a loss times its examples */
  int64_t hits, n;      /* correct predictions, examples */
  int32_t ok, sig;      /* it got here without an error; the signal it got (0: none) */
  uint64_t tag;         /* what every rank must share (a fingerprint, a hash) */
  uint64_t states;      /* a second hash (the script's states), compared by no one */
  char why[DIAG_FIRST_MAX]; /* not ok: this rank's first error (dist_agree fills it) */
} DistReport;
/* Every rank's report into all[0..N) (N = dist_size()), and their sums in
 * rank order into *sum (ok: every rank's; sig: the largest; tag: rank
 * 0's); whether every rank is ok.  A report not ok carries its rank's
 * first error (diag_first_error) in why. */
bool dist_agree(const DistReport *mine, DistReport *sum, DistReport *all);
/* The first rank whose report is not ok (with tags, or whose tag is not
 * rank 0's); -1 when there is none.  why (NULL: not asked): ": " and that
 * rank's first error, "" when it is ok or said none, for a message's
 * "rank K could not start%s". */
int dist_odd_rank(const DistReport *all, bool tags, char why[DIAG_FIRST_MAX + 2]);

/* Seconds this process has spent in the collectives (dist_sum_f32, and
 * the calls of the sums in flight: start, progress, finish), and how many
 * sums; the seconds sums were in flight while the caller worked (from
 * dist_sum_start's return to dist_sum_finish's call), and those spent
 * waiting in dist_sum_finish (the part of the sums no work hid). */
double dist_reduce_seconds(void);
int64_t dist_reduce_calls(void);
double dist_overlap_seconds(void);
double dist_wait_seconds(void);

#endif
