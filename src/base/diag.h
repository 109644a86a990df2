/* diag.h — source files, spans, and the diagnostics printed against them.
 *
 * Every error a user can see goes through diag_error() (warnings through
 * diag_warn(), notes through diag_note()):
 *
 *     model.net:3:9: error: unknown op 'relux' (did you mean 'relu'?)
 *     h = relux(x)
 *         ^~~~~
 *
 * With SPAN_NONE (a command-line argument, a data file, a checkpoint) the
 * message has no position: "netrun: error: ...".  Errors are collected up
 * to a cap (DIAG_MAX_ERRORS); diag_finish() prints the count.  Sources live
 * in the Diag's arena for the whole run.  No other code writes "netrun:
 * error:" or counts errors by hand.
 *
 * Failing: one convention per layer (doc/design.md, "Layers").  In every
 * layer a failure is reported once, where it is found, through the Diag
 * (or the op's context) in reach; its callers only pass it up and never
 * print a second message for it.
 *   - Building and reading (base, ir, autodiff, io, front; the op
 *     contract's inference, InferFn, and grad makers, GradMakerFn): a
 *     function that can fail because of its input returns bool (or a
 *     pointer, NULL on failure), false once it has reported why
 *     (reg_infer_fail, bwd_fail).
 *   - Running (exec and the kernels, KernelFn): int, 0 or -1, -1 once
 *     op_fail or exec_ctx_fail has reported why (exec_run,
 *     exec_run_range, exec_startup).  It is the status the plugin
 *     interface's C functions return (include/netrun/plugin.h, a C ABI),
 *     so a plugin's kernel is called like a built-in one.
 *   - Commands (cli, and train's entry points the verbs return from:
 *     trainer_train, trainer_eval, trainer_predict, trainer_lr_find):
 *     the exit status of netrun(1), 0, EXIT_SCRIPT or EXIT_USAGE (below);
 *     only they turn a failure into one.  Below those entry points the
 *     training loop's steps follow the first convention.
 *
 * diag_error, diag_verror, diag_warn and diag_note take a NULL Diag: the
 * message goes to stderr and nothing is counted.  It is for code with no
 * Diag in reach: the verbs' drivers around a run (netrun ops NAME,
 * --plugin, writing an output file, plot), and the allocator, whose
 * out-of-memory report (mem_oom) must not allocate: with a NULL Diag and
 * SPAN_NONE, reporting allocates nothing.
 *
 * Library-like code that has no Diag and reports to no one (tensor.c's
 * size check, checkpoint.c's reader and writer, which the fuzzer drives,
 * file.c) returns false (or NULL) and writes why into storage the caller
 * gives (char why[TENSOR_WHY_MAX]; char *err, size_t errlen), never into a
 * static buffer; the caller reports it through its Diag, with its own
 * context.  Out of memory is not a failure a function returns: mem_alloc
 * reports it and exits with status 3 (MEM_EXIT_OOM).
 */
#ifndef NETRUN_DIAG_H
#define NETRUN_DIAG_H

#include "base/mem.h"

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
  /* When set, each error, warning and note goes here instead of to out,
   * its message formatted (the language server, netrun lsp). */
  void (*sink)(void *ctx, const char *kind, Span at, const char *msg);
  void *sink_ctx;
} Diag;

void diag_init(Diag *d, Arena *arena);
/* Adds a source whose text is text[0..len) (copied).  Returns its index. */
int  diag_add_source(Diag *d, const char *path, const char *realpath,
                     const char *text, size_t len);
/* Reads a file into a new source.  On failure prints "netrun: error: cannot
 * read PATH: REASON" and returns -1. */
int  diag_load_file(Diag *d, const char *path);
/* The same, reading the open descriptor fd (closed here): a file checked
 * on its descriptor (file_open_regular) is read without opening it again. */
int  diag_load_fd(Diag *d, const char *path, int fd);
/* Line and column (both 1-based, column in bytes) of an offset. */
void diag_line_col(const Diag *d, int file, uint32_t off, int *line, int *col);

void diag_error(Diag *d, Span at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void diag_verror(Diag *d, Span at, const char *fmt, va_list ap);
/* The same, the message after "WHAT: " (an op's type, a file's path);
 * what NULL: none. */
void diag_verror_in(Diag *d, Span at, const char *what, const char *fmt, va_list ap);
/* A warning: printed, not counted (training goes on). */
void diag_warn(Diag *d, Span at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A note attached to the previous error (printed only if it was), or
 * standing alone. */
void diag_note(Diag *d, Span at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Counts the errors of `sub`, a Diag of its own for one task (data.c reads
 * a CSV file through one whose arena is freed after), as errors of d. */
void diag_absorb(Diag *d, const Diag *sub);
/* The convention of library-like code (above): writes the message into
 * the caller's why[n] and returns false, for `return diag_why(...)`. */
bool diag_why(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The body of a function taking printf arguments (fmt, ...) that passes
 * the message on as a string: formats them into buf[n].  A macro, as
 * va_start must stand in the function whose arguments it reads. */
#define DIAG_FORMAT(buf, n, fmt) \
  do {                           \
    va_list ap_;                 \
    va_start(ap_, fmt);          \
    vsnprintf(buf, n, fmt, ap_); \
    va_end(ap_);                 \
  } while (0)
/* The first error this process printed (not one sent to a sink), with
 * its position ("FILE:LINE:COL: ") and what in front, cut to
 * DIAG_FIRST_MAX - 1 bytes; "" when there was none.  What a rank of an
 * MPI job that failed sends the others, whose output mpirun may drop. */
#define DIAG_FIRST_MAX 240
const char *diag_first_error(void);
/* Prints "N errors" when there were any; returns the error count. */
int  diag_finish(Diag *d);
static inline Span span_join(Span a, Span b) {
  if (a.file < 0) return b;
  if (b.file < 0 || b.file != a.file) return a;
  return (Span){a.file, a.start < b.start ? a.start : b.start, a.end > b.end ? a.end : b.end};
}

/* The nearest of `n` candidate names to `name` by edit distance, or NULL if
 * none is close enough to be a likely typo (one that shares no letter in
 * place, as 'w' for 'q', is not). */
const char *diag_nearest(const char *name, const char *const *cands, int n);
/* The three strings of " (did you mean 'NEAR'?)", for a "%s%s%s" in a
 * message; three empty ones when near is NULL. */
/* "s" after a count other than one: "%lld step%s", n, PLURAL(n). */
#define PLURAL(n) ((n) == 1 ? "" : "s")
#define DIAG_MEAN(near) (near) ? " (did you mean '" : "", (near) ? (near) : "", (near) ? "'?)" : ""

/* Prints s in double quotes, with '"', '\\', newline and tab escaped (\n,
 * \t) and the other control characters as the style says: \xNN as a
 * script writes them (DEL too) or \u00NN as JSON does.  The string quoter
 * of the AST printer and the JSON dump. */
typedef enum DiagQuote { QUOTE_SCRIPT, QUOTE_JSON } DiagQuote;
void diag_quote(FILE *f, const char *s, DiagQuote style);

/* Prints s with its control characters (but newline and tab) as \xNN: how
 * a name from outside (a file's, a class folder's) is printed, so that one
 * holding ESC or BEL cannot drive the terminal.  Every diagnostic's text
 * goes through it. */
void diag_put_escaped(FILE *f, const char *s);

/* The exit statuses of a verb (netrun(1)); out of memory is MEM_EXIT_OOM. */
enum { EXIT_SCRIPT = 1, EXIT_USAGE = 2 };
/* Prints a usage error ("netrun: MESSAGE", then where to look for help)
 * and returns EXIT_USAGE, for a verb to return. */
int diag_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The verb whose help diag_usage points to ("Try 'netrun train --help'."),
 * or NULL for netrun's own. */
void diag_usage_verb(const char *verb);

#endif
