/* feed.h — values from outside: `--set NAME=VALUE`, and --feed's files. */
#ifndef NETRUN_FEED_H
#define NETRUN_FEED_H

#include "ir/tensor.h"

/* Parses VALUE, written like a script literal (`3`, `-1.5`, `[[1, 2], [3, 4]]`,
 * `true`), as a tensor of dtype `want`.  Errors point into the text, shown
 * as coming from "--set NAME".  NULL on error. */
Tensor *feed_parse_value(Diag *d, const char *name, const char *text, DType want);

/* --feed NAME=FILE: a NumPy .npy file, a .npz archive (npy.h: its array
 * named like the input, or its only one) or a CSV file (rows become the
 * first dimension, the columns fill the rest: their product must equal
 * the column count), by the file's first bytes (data.h's table of
 * formats).  NULL on error (reported). */
Tensor *feed_read_file(Diag *d, const char *path, const VarDesc *decl);

#endif
