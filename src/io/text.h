/* text.h — a text file as byte windows, for language models.
 *
 * A train block with `context = T` reads its data file as bytes (data.c
 * makes the windows a Dataset).  The file's last tenth (TEXT_HOLDOUT: its
 * last L / 10 bytes, rounded down) is held out as the "test" split, the
 * rest is "train".  Each split is cut into windows of T bytes at offsets 0,
 * T, 2T ... from the split's start, as many as fit with one byte after
 * them: window k holds
 *     x[k] = bytes[s + kT .. s + kT + T),  y[k] = bytes[s + kT + 1 .. s + kT + T + 1)
 * (y[t] = x[t + 1], the next byte), so a split of m bytes has (m - 1) / T
 * windows.  The trainer shuffles windows, not bytes.
 *
 * Errors (one line, "netrun: error: FILE: ..."): context < 1, a split too
 * short for one window (fewer than T + 1 bytes), memory over the limit. */
#ifndef NETRUN_TEXT_H
#define NETRUN_TEXT_H

#include "base/diag.h"

#include <stdint.h>

#define TEXT_HOLDOUT 10   /* the test split is the last 1 / TEXT_HOLDOUT of the file */

typedef struct TextWindows {
  int64_t n, context;        /* windows, bytes per window */
  uint8_t *x, *y;            /* n * context bytes each (mem_alloc'd: the caller frees them) */
  int64_t charged;           /* bytes charged to the memory limit for x and y (mem.h) */
} TextWindows;

/* Reads split "train" or "test" of the text file at path (NULL: the whole
 * file, as one split) into *out.  False, with the error reported, on
 * failure; *out then holds nothing. */
bool text_windows(Diag *d, const char *path, int64_t context, const char *split, TextWindows *out);

#endif
