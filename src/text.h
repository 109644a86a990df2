/* text.h — a text file as a dataset of byte windows, for language models.
 *
 * A train block with `context = T` reads its data file as bytes.  The
 * file's last tenth (TEXT_HOLDOUT: its last L / 10 bytes, rounded down) is
 * held out as the "test" split, the rest is "train".  Each split is cut into
 * windows of T bytes at offsets 0, T, 2T ... from the split's start, as
 * many as fit with one byte after them: window k holds
 *     x[k] = bytes[s + kT .. s + kT + T),  y[k] = bytes[s + kT + 1 .. s + kT + T + 1)
 * (y[t] = x[t + 1], the next byte), so a split of m bytes has (m - 1) / T
 * windows.  The columns "x" and "y" are i64 [N, T] of byte values 0-255
 * (kept as bytes in memory).  The trainer shuffles windows, not bytes.
 *
 * Errors (one line, "netrun: error: FILE: ..."): context < 1, a split too
 * short for one window (fewer than T + 1 bytes). */
#ifndef NETRUN_TEXT_H
#define NETRUN_TEXT_H

#include "data.h"

#define TEXT_HOLDOUT 10   /* the test split is the last 1 / TEXT_HOLDOUT of the file */

/* Reads split "train" or "test" of the text file at path (NULL: the whole
 * file, as one split) into out as columns x and y.  False, with the error
 * reported, on failure; *out then holds nothing to free but its arena. */
bool text_open(Diag *d, const char *path, int64_t context, const char *split, Dataset *out);

#endif
