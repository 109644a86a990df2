/* rewrite.h — program rewrites: one pass, a table of declared patterns.
 *
 * rewrite_program replaces runs of block 0's ops by ops that do the same
 * work in one pass over the data (conv2d + bias + relu + pool as one
 * fused_conv2d, a gradient's copy as a share, a chain of elementwise ops
 * as one fused_elementwise...).  It is the one place
 * where a program is changed for speed: the executor runs whatever program
 * it is given, and `netrun dump --fused` prints the rewritten one.
 *
 * Two sets of patterns:
 *   RW_FUSE   exact rewrites (the same float operations in the same order:
 *             the same bits); the op that replaces a run keeps the ops it
 *             stands for (OpDesc.orig), which the executor runs instead
 *             under --check-nan, to name the op that made a NaN.  Applied
 *             when the executor runs without the tape, --check-nan or
 *             --no-fuse (exec_rewrite_wanted, exec.h).
 *   RW_TRAIN  rewrites of the training program itself (train_program):
 *             sgd on a matmul's gradient as one sgd_matmul.  Always applied
 *             to the training program, --no-fuse or not, as before.
 *   RW_KEEP   with RW_FUSE: a forward op may keep what it computed for an
 *             op of the backward (a fused batch norm its statistics), for
 *             callers whose executor runs the ops before a mark whenever
 *             it runs those after it (not one that preloads the forward's
 *             values from a tape and runs the backward alone).
 *
 * rewrite_allreduce is the rewrite of data-parallel training on N > 1
 * ranks (dist.h): per bucket of gradients, an allreduce_start right after
 * the op that finishes them and an allreduce_wait before the first op
 * that reads one (clipping, the optimizers), or with overlap off one
 * allreduce op between the backward and those.  train_program makes it
 * before the RW_TRAIN patterns, so a gradient the allreduce reads is no
 * longer sgd_matmul's to fuse away: that update runs as matmul, then
 * allreduce, then sgd.  rewrite_program takes the starts out of block 0
 * while it matches (they would split the runs it fuses) and puts each
 * back after the op that then makes its gradients. */
#ifndef NETRUN_REWRITE_H
#define NETRUN_REWRITE_H

#include "ir/program.h"

enum { RW_FUSE = 1 << 0, RW_TRAIN = 1 << 1, RW_KEEP = 1 << 2 };

typedef struct RewriteOpts {
  unsigned sets;      /* RW_FUSE | RW_TRAIN | RW_KEEP: the patterns tried */
  /* Indices into block 0 that callers run ranges up to (the end of the
   * forward, the first backward op): no rewrite spans one, and each is
   * moved to its index in the rewritten block. */
  int *marks;
  int nmarks;
  /* A training program's phase boundaries (1 << PHASE_x, program.h) no
   * pattern may cross this time, even one declared to (gradient
   * accumulation holds the update's start: the gradients must be whole
   * values between the backward and the update). */
  unsigned hold;
  /* Values the caller reads by name after the run although no name
   * reaches them (a user op body's outputs): never left unmade. */
  const char *const *keep;
  int nkeep;
} RewriteOpts;

typedef struct AllreduceOpts {
  const char *const *grads;   /* the gradients, in parameter order */
  int ngrads;
  int bwd_end;                /* the index in block 0 where the backward ends */
  int64_t bucket_bytes;       /* a bucket holds at least this (the last, less) */
  const char *weight;         /* the variable of this rank's share of a step */
  bool overlap;               /* allreduce_start and allreduce_wait, not allreduce */
  int *marks;                 /* moved as RewriteOpts's */
  int nmarks;
} AllreduceOpts;

/* Rewrites p's block 0 in place; the number of rewrites made. */
int rewrite_program(Program *p, const RewriteOpts *o);

/* Inserts the allreduce ops in p's block 0; their number. */
int rewrite_allreduce(Program *p, const AllreduceOpts *o);

#endif
