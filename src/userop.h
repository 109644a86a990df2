/* userop.h — shape inference, kernel and grad maker of the ops scripts
 * define (`op NAME(...) -> (...) { } grad { }`), installed in their protos
 * by lower.c.  See userop.c. */
#ifndef NETRUN_USEROP_H
#define NETRUN_USEROP_H

#include "registry.h"

bool uop_infer(InferCtx *c);
int uop_kernel(struct ExecCtx *c);
int uop_grad(struct GradCtx *g);

#endif
