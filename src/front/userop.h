/* userop.h — shape inference, kernel and grad maker of the ops scripts
 * define (`op NAME(...) -> (...) { } grad { }`), which a lowerer (given
 * them by lower_new) installs in their protos.  See userop.c. */
#ifndef NETRUN_USEROP_H
#define NETRUN_USEROP_H

#include "front/lower.h"

extern const UserOpImpl uop_impl;

#endif
