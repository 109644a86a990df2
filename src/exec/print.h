/* print.h — tensor values as text, the way NumPy's str() shows arrays.
 *
 *   [[1. 2.]          floats: shortest digits that read back as the f32,
 *    [3. 4.]]         at most `precision` after the point, one column width,
 *   [0.1 2. ]         a trailing '.' on whole numbers; exponent form when
 *   [1.e-05 1.e+00]   the values span more than 1000x, one is below 1e-4,
 *                     or one reaches 1e8
 *   [ 0  1 10]        ints right-aligned to one width
 *   [ True False]     bools
 *   3.0  7  True      0-d tensors print like NumPy scalars
 *
 * Rows wrap at 75 columns; blank lines separate the 2-D slabs of a 3-D+
 * tensor; past 1000 elements only the first and last 3 items of each long
 * dimension show, with "..." between (NumPy's threshold and edgeitems);
 * empty tensors print as "[]".  Used by the print op and the REPL. */
#ifndef NETRUN_PRINT_H
#define NETRUN_PRINT_H

#include "ir/tensor.h"

#include <stdio.h>

#define PRINT_DEFAULT_PRECISION 8

typedef struct PrintOptions {
  int precision;        /* digits after the point, at most (NumPy's precision) */
  int64_t threshold;    /* summarize tensors with more elements than this */
  int edgeitems;        /* items shown at each end of a summarized dimension */
  int linewidth;        /* wrap rows longer than this */
} PrintOptions;

/* NumPy's defaults, with the given precision (< 0: the default, 8). */
PrintOptions print_options(int precision);

/* Appends t's text to a new string (mem_alloc'd, the caller frees it);
 * no trailing newline. */
char *print_format(const Tensor *t, const PrintOptions *o);
/* Writes t's text to f (no trailing newline). */
void print_write(FILE *f, const Tensor *t, int precision);

#endif
