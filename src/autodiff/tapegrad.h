/* tapegrad.h — running the tape's backward directly over its tensors.
 *
 * The tape's backward is the backward builder applied to the tape (a flat,
 * unrolled block).  `netrun dump --backward --tape` prints it as a program
 * (tape_program + bwd_append); this module computes the same
 * gradients without naming every recorded value: it visits the tape in
 * reverse, asks the builder once per class of recorded op (and shapes) for
 * its grad ops (bwd_op_grads), and runs them with the executor over the tensors
 * the entry recorded, summing the gradients of a value written more than
 * once in the order the builder's add_n would. */
#ifndef NETRUN_TAPEGRAD_H
#define NETRUN_TAPEGRAD_H

#include "exec/exec.h"
#include "exec/tape.h"

/* Differentiates `loss` (a recorded f32 scalar) with respect to wrt[i]
 * (tensors of the forward run), treating the tensors in no_grad as
 * constants.  grads[i] receives a new reference to wrt[i]'s gradient, or
 * NULL when the loss does not depend on it.  The grad ops run with the
 * options o (no tape).  0, or -1 after an error reported in fwd's diag. */
int tgrad_run(const Tape *t, Program *fwd, Tensor *loss, Tensor *const *wrt, int nwrt, Tensor *const *no_grad,
              int nno_grad, const ExecOptions *o, Tensor **grads);

/* Whether tensor x was read by some op on the tape. */
bool tgrad_on_tape(const Tape *t, const Tensor *x);

#endif
