/* diag.h — source files, spans, and the diagnostics printed against them.
 *
 * Every error a user can cause goes through diag_error():
 *
 *     model.net:3:9: error: unknown op 'relux' (did you mean 'relu'?)
 *     h = relux(x)
 *         ^~~~~
 *
 * Errors are collected up to a cap (DIAG_MAX_ERRORS); diag_finish() prints
 * the count.  Sources live in the Diag's arena for the whole run.
 */
#ifndef NETRUN_DIAG_H
#define NETRUN_DIAG_H

#include "mem.h"

#include <stdarg.h>
#include <stdio.h>

/* A half-open byte range [start, end) in source file `file` (an index into
 * Diag.files; -1 for "no position", e.g. a command-line argument). */
typedef struct Span {
  int file;
  uint32_t start, end;
} Span;

#define SPAN_NONE ((Span){-1, 0, 0})

typedef struct Source {
  const char *path;        /* as the user named it (shown in messages) */
  const char *realpath;    /* canonical, for import de-duplication; may be NULL */
  const char *text;        /* NUL-terminated copy of the bytes */
  uint32_t len;
  uint32_t *line_starts;   /* byte offset of each line */
  int nlines;
  int line_offset;         /* its first line is line line_offset + 1: the REPL
                              numbers the lines of its input stream */
} Source;

#define DIAG_MAX_ERRORS 20
/* The largest source file read (a script or a CSV file), in bytes. */
#define DIAG_MAX_SOURCE (1024 << 20)

typedef struct Diag {
  Arena *arena;
  Source *files;
  int nfiles, capfiles;
  int nerrors;             /* errors reported so far (counted past the cap) */
  int max_errors;          /* print at most this many (default DIAG_MAX_ERRORS) */
  FILE *out;               /* stderr */
  bool color;              /* "error:" and "note:" in colour (a terminal REPL) */
} Diag;

void diag_init(Diag *d, Arena *arena);
/* Adds a source whose text is text[0..len) (copied).  Returns its index. */
int  diag_add_source(Diag *d, const char *path, const char *realpath,
                     const char *text, size_t len);
/* Reads a file into a new source.  On failure prints "netrun: error: cannot
 * read PATH: REASON" and returns -1. */
int  diag_load_file(Diag *d, const char *path);
/* Line and column (both 1-based, column in bytes) of an offset. */
void diag_line_col(const Diag *d, int file, uint32_t off, int *line, int *col);

void diag_error(Diag *d, Span at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void diag_verror(Diag *d, Span at, const char *fmt, va_list ap);
/* A note attached to the previous error (printed only if it was). */
void diag_note(Diag *d, Span at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints "N errors" when there were any; returns the error count. */
int  diag_finish(Diag *d);
static inline Span span_join(Span a, Span b) {
  if (a.file < 0) return b;
  if (b.file < 0 || b.file != a.file) return a;
  return (Span){a.file, a.start < b.start ? a.start : b.start, a.end > b.end ? a.end : b.end};
}

/* The nearest of `n` candidate names to `name` by edit distance, or NULL if
 * none is close enough to be a likely typo. */
const char *diag_nearest(const char *name, const char *const *cands, int n);

/* Prints s in double quotes, with '"', '\\', newline and tab escaped (\n,
 * \t) and the other control characters as the style says: \xNN as a
 * script writes them (DEL too) or \u00NN as JSON does.  The string quoter
 * of the AST printer and the JSON dump. */
typedef enum DiagQuote { QUOTE_SCRIPT, QUOTE_JSON } DiagQuote;
void diag_quote(FILE *f, const char *s, DiagQuote style);

#endif
