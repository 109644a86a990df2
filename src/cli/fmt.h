/* fmt.h — the canonical layout of a script (netrun fmt; netrun-lang(5),
 * LAYOUT).  The formatter works on the scanner's tokens and comments
 * (ast_parse_tokens), so it moves only white space: the text it writes
 * parses to the same syntax tree, with every comment kept, and formatting
 * its own output changes nothing. */
#ifndef NETRUN_FMT_H
#define NETRUN_FMT_H

#include "base/diag.h"

/* The widest line the formatter makes when it can break one (a line with
 * no bracket to break stays as long as it is). */
#define FMT_WIDTH 100

/* Formats source `file` of d.  Returns the new text (mem_alloc'd, NUL
 * terminated, its length in *len), or NULL when the file has syntax
 * errors, reported through d (*parsed false).  A result that would not
 * parse to the same tree is refused the same way, *parsed true (an
 * internal error; nothing is written). */
char *fmt_source(Diag *d, int file, size_t *len, bool *parsed);

#endif
