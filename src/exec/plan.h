/* plan.h — the memory plan: when each value of a block may be dropped.
 *
 * Without a plan every variable keeps its value until an op writes it
 * again (block 0: the next step; a loop body or a branch: until its frame
 * is freed, and a loop's turns are kept for its grad op, so every turn's
 * every value lives to the end of the step), so a training step holds
 * every activation, every gradient and every temporary of the step at
 * once.  The plan finds, per variable of a block, the last op of the
 * block that reads it; an executor running under the plan (exec_use_plan)
 * drops the variable's value right after that op, in block 0 and in every
 * run of a sub-block (each turn of a loop, each branch, each turn of a
 * grad block), so what a step holds at once is its live set, not its
 * every value.  The tensor's memory goes back to the allocator (a view,
 * another variable sharing it or the tape keeps it).
 *
 * Kept, never dropped (plan_release gives -1):
 *   - inputs, parameters, training states (optimizer moments, the
 *     learning rate), a script's states, block arguments and results
 *     (what a loop carries from turn to turn, a branch's values);
 *   - the variables named in `keep` (what the caller reads after a run:
 *     the trainer's loss, metric and gradients);
 *   - a variable any op of another block (a loop body, a branch, a grad
 *     block, block 0) or the startup block names, read or written: a grad
 *     block reads the values of its forward turn by name, so a body's
 *     value the backward needs is kept with that turn;
 *   - a variable the block reads before it writes it (its value comes from
 *     the previous step), or never writes;
 *   - a variable whose last access in the block is a write, or a read by
 *     the op that writes it again (in place): its value is the step's
 *     result.
 * A fused op's reads and writes are its own: the values between the ops it
 * stands for are written only under --check-nan (which runs those ops
 * instead), and are then kept. */
#ifndef NETRUN_PLAN_H
#define NETRUN_PLAN_H

#include "ir/program.h"

/* Per variable of block blk (by slot, the block's nvars of them): the
 * index of the op of blk after which its value is dropped, or -1 (kept).
 * keep names variables of any block.  mem_free it. */
int *plan_release(const Program *p, int blk, const char *const *keep, int nkeep);

/* The same by op: the slots dropped after op i are head[i], next[head[i]],
 * ... up to -1.  mem_free both. */
void plan_lists(int nops, int nslots, const int *release, int **head, int **next);

/* The largest bytes the values of block 0 hold at once in a step that
 * follows another, under the release points `release` (from
 * plan_release; NULL: nothing dropped): before op i runs, every variable
 * kept from the previous step (release -1; those block 0 names and the
 * inputs, parameters and states) and every variable written since and not
 * yet dropped; while op i runs, those and the outputs it allocates (an op
 * that writes in place or makes views, OP_NO_PREALLOC, allocates none).
 * bytes[slot]: the variable's bytes, -1 if unknown (*unknown is then set
 * and it counts 0).  A view counts its bytes as a value of its own.  The
 * values of sub-blocks (a loop's turns, a branch) are not counted: how
 * many turns a loop runs is known only when it runs. */
int64_t plan_peak(const Program *p, const int *release, const int64_t *bytes, bool *unknown);

#endif
