/* diag.c — printing errors with their source line and a caret. */
#include "base/diag.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void diag_init(Diag *d, Arena *arena) {
  memset(d, 0, sizeof *d);
  d->arena = arena;
  d->max_errors = DIAG_MAX_ERRORS;
  d->out = stderr;
}

int diag_add_source(Diag *d, const char *path, const char *realpath,
                    const char *text, size_t len) {
  if (len > UINT32_MAX - 1) len = UINT32_MAX - 1;
  Source *s = ARENA_PUSH(d->arena, d->files, d->nfiles, d->capfiles);
  s->path = arena_strdup(d->arena, path);
  s->realpath = realpath ? arena_strdup(d->arena, realpath) : NULL;
  s->text = arena_strndup(d->arena, text, len);
  s->len = (uint32_t)len;
  int nl = 1;
  for (size_t i = 0; i < len; i++) nl += text[i] == '\n';
  s->line_starts = arena_alloc(d->arena, sizeof(uint32_t) * (size_t)nl);
  s->nlines = 0;
  s->line_starts[s->nlines++] = 0;
  for (size_t i = 0; i < len; i++)
    if (text[i] == '\n') s->line_starts[s->nlines++] = (uint32_t)i + 1;
  return d->nfiles - 1;
}

static bool read_stream(Diag *d, const char *name, FILE *f, char **text, size_t *len);
static int load_stream(Diag *d, const char *path, FILE *f);

/* Standard input ("-"), read once: a verb that reads its script twice
 * (train, for its settings and then its program) gets the same text. */
static struct {
  char *text;
  size_t len;
  bool read;
} stdin_script;

static int add_text(Diag *d, const char *path, const char *realpath, const char *buf, size_t len) {
  size_t skip = len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;   /* a UTF-8 byte order mark */
  return diag_add_source(d, path, realpath, buf + skip, len - skip);
}

int diag_load_file(Diag *d, const char *path) {
  if (strcmp(path, "-") == 0) {
    if (!stdin_script.read) {
      int fd = dup(STDIN_FILENO);
      FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
      if (!f) {
        diag_error(d, SPAN_NONE, "cannot read standard input: %s", strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
      }
      if (!read_stream(d, "standard input", f, &stdin_script.text, &stdin_script.len)) return -1;
      stdin_script.read = true;
    }
    return add_text(d, "<stdin>", NULL, stdin_script.text, stdin_script.len);
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", path, strerror(errno));
    return -1;
  }
  return load_stream(d, path, f);
}

int diag_load_fd(Diag *d, const char *path, int fd) {
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  return load_stream(d, path, f);
}

/* The text of f (closed here) in *text (mem_alloc'ed), *len bytes. */
static bool read_stream(Diag *d, const char *name, FILE *f, char **text, size_t *len_out) {
  /* Sources are counted in 32 bits (and flex in int): a larger file, or an
   * endless stream like /dev/zero, stops at DIAG_MAX_SOURCE. */
  size_t cap = 65536, len = 0;
  char *buf = mem_alloc(NULL, cap);
  size_t got;
  while (len <= DIAG_MAX_SOURCE && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap && len <= DIAG_MAX_SOURCE) {
      cap = cap * 2 <= DIAG_MAX_SOURCE ? cap * 2 : DIAG_MAX_SOURCE + 1;
      buf = mem_alloc(buf, cap);
    }
  }
  int err = ferror(f);
  fclose(f);
  if (err || len > DIAG_MAX_SOURCE) {
    if (err) diag_error(d, SPAN_NONE, "cannot read %s: read error", name);
    else diag_error(d, SPAN_NONE, "cannot read %s: larger than %d MiB", name, DIAG_MAX_SOURCE >> 20);
    mem_free(buf);
    return false;
  }
  *text = buf;
  *len_out = len;
  return true;
}

/* The text of f (closed here) as a new source named path. */
static int load_stream(Diag *d, const char *path, FILE *f) {
  char *buf;
  size_t len;
  if (!read_stream(d, path, f, &buf, &len)) return -1;
  char *rp = mem_realpath(path);
  int idx = add_text(d, path, rp, buf, len);
  mem_free(rp);
  mem_free(buf);
  return idx;
}

void diag_line_col(const Diag *d, int file, uint32_t off, int *line, int *col) {
  const Source *s = &d->files[file];
  int lo = 0, hi = s->nlines - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (s->line_starts[mid] <= off) lo = mid;
    else hi = mid - 1;
  }
  *line = lo + 1 + s->line_offset;
  *col = (int)(off - s->line_starts[lo]) + 1;
}

/* A diagnostic is gathered here and written in one call: the ranks of an
 * MPI job share one stderr, and a message written a byte at a time
 * interleaves with another rank's.  On the stack: reporting out of
 * memory must not allocate. */
typedef struct Out {
  FILE *f;
  size_t n;
  char b[4096];
} Out;

static void out_flush(Out *o) {
  if (o->n) fwrite(o->b, 1, o->n, o->f);
  o->n = 0;
}

static void out_mem(Out *o, const char *s, size_t len) {
  while (len) {
    if (o->n == sizeof o->b) out_flush(o);
    size_t k = sizeof o->b - o->n < len ? sizeof o->b - o->n : len;
    memcpy(o->b + o->n, s, k);
    o->n += k, s += k, len -= k;
  }
}

static void out_puts(Out *o, const char *s) { out_mem(o, s, strlen(s)); }

static void out_putc(Out *o, int c) {
  char ch = (char)c;
  out_mem(o, &ch, 1);
}

static void out_escaped(Out *o, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f) {
      char hex[8];
      snprintf(hex, sizeof hex, "\\x%02x", *p);
      out_puts(o, hex);
    } else {
      out_putc(o, *p);
    }
}

/* Prints the line holding `at` and a caret line under the span (clipped to
 * that line; long lines are shown as a window around the span). */
static void show_caret(Out *o, Diag *d, Span at) {
  const Source *s = &d->files[at.file];
  int line, col;
  diag_line_col(d, at.file, at.start, &line, &col);
  uint32_t ls = s->line_starts[line - 1 - s->line_offset];
  uint32_t le = ls;
  while (le < s->len && s->text[le] != '\n') le++;
  if (le > ls && s->text[le - 1] == '\r') le--;
  uint32_t start = at.start < le ? at.start : le;
  uint32_t end = at.end > le ? le : at.end;
  if (end <= start) end = start + 1;
  /* Window: at most 100 bytes before the caret and 60 after its start. */
  uint32_t ws = ls, we = le;
  const char *pre = "", *post = "";
  if (start - ws > 100) ws = start - 80, pre = "...";
  if (we > start + 100) we = start + 100, post = "...";
  if (end > we) end = we;
  out_puts(o, pre);
  for (uint32_t i = ws; i < we; i++) {
    unsigned char c = (unsigned char)s->text[i];
    out_putc(o, c == '\t' || c >= 32 ? (int)c : '?');
  }
  out_puts(o, post);
  out_putc(o, '\n');
  for (size_t i = 0; i < strlen(pre); i++) out_putc(o, ' ');
  for (uint32_t i = ws; i < start; i++) out_putc(o, s->text[i] == '\t' ? '\t' : ' ');
  out_putc(o, '^');
  for (uint32_t i = start + 1; i < end; i++) out_putc(o, '~');
  out_putc(o, '\n');
}

void diag_put_escaped(FILE *f, const char *s) {
  Out o = {.f = f};
  out_escaped(&o, s);
  out_flush(&o);
}

/* The first error this process reported (diag_first_error). */
static char first_error[DIAG_FIRST_MAX];

/* Keeps the first error's text, its position and what in front, in
 * first_error: what a rank that failed tells the others (dist.h). */
static void keep_first(Diag *d, Span at, const char *what, const char *msg) {
  if (first_error[0]) return;
  char pos[64] = "";
  const char *path = "";
  if (d && at.file >= 0) {
    int line, col;
    diag_line_col(d, at.file, at.start, &line, &col);
    path = d->files[at.file].path;
    snprintf(pos, sizeof pos, ":%d:%d: ", line, col);
  }
  const char *parts[] = {path, pos, what ? what : "", what ? ": " : "", msg};
  size_t n = 0;
  for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
    size_t len = strnlen(parts[i], sizeof first_error - 1 - n);
    memcpy(first_error + n, parts[i], len);
    n += len;
  }
  first_error[n] = 0;
}

const char *diag_first_error(void) { return first_error; }

static void report(Diag *d, Span at, const char *kind, const char *what, const char *fmt, va_list ap) {
  if (d && d->sink) {
    char msg[2048];
    int n = what ? snprintf(msg, sizeof msg, "%s: ", what) : 0;
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    d->sink(d->sink_ctx, kind, at, msg);
    return;
  }
  Out o = {.f = d ? d->out : stderr};
  /* Bold red errors, bold magenta warnings, bold cyan notes, as compilers
   * colour them. */
  bool color = d && d->color;
  const char *on = !color ? "" : kind[0] == 'e' ? "\033[1;31m" : kind[0] == 'w' ? "\033[1;35m" : "\033[1;36m";
  const char *off = color ? "\033[0m" : "";
  char head[96];
  if (d && at.file >= 0) {
    int line, col;
    diag_line_col(d, at.file, at.start, &line, &col);
    out_escaped(&o, d->files[at.file].path);
    snprintf(head, sizeof head, ":%d:%d: %s%s:%s ", line, col, on, kind, off);
  } else {
    snprintf(head, sizeof head, "netrun: %s%s:%s ", on, kind, off);
  }
  out_puts(&o, head);
  if (what) out_escaped(&o, what), out_puts(&o, ": ");
  /* The message, with its control characters escaped: a file name holding
   * ESC or BEL must not drive the terminal.  A message too long for buf
   * goes out as it is formatted. */
  char buf[4096];
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(buf, sizeof buf, fmt, copy);
  va_end(copy);
  if (n >= 0 && (size_t)n < sizeof buf) {
    out_escaped(&o, buf);
  } else {
    out_flush(&o);
    vfprintf(o.f, fmt, ap);
  }
  if (kind[0] == 'e' && n >= 0) keep_first(d, at, what, buf);
  out_putc(&o, '\n');
  if (d && at.file >= 0) show_caret(&o, d, at);
  out_flush(&o);
}

void diag_verror(Diag *d, Span at, const char *fmt, va_list ap) { diag_verror_in(d, at, NULL, fmt, ap); }

void diag_verror_in(Diag *d, Span at, const char *what, const char *fmt, va_list ap) {
  if (d && ++d->nerrors > d->max_errors) return;
  report(d, at, "error", what, fmt, ap);
}

/* A warning or note (kind), unless errors are past the limit. */
static void remark(Diag *d, Span at, const char *kind, const char *fmt, va_list ap) {
  if (d && d->nerrors > d->max_errors) return;
  report(d, at, kind, NULL, fmt, ap);
}

void diag_error(Diag *d, Span at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror(d, at, fmt, ap);
  va_end(ap);
}

void diag_warn(Diag *d, Span at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  remark(d, at, "warning", fmt, ap);
  va_end(ap);
}

void diag_note(Diag *d, Span at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  remark(d, at, "note", fmt, ap);
  va_end(ap);
}

bool diag_why(char *why, size_t n, const char *fmt, ...) {
  DIAG_FORMAT(why, n, fmt);
  return false;
}

void diag_absorb(Diag *d, const Diag *sub) { d->nerrors += sub->nerrors; }

int diag_finish(Diag *d) {
  if (d->nerrors > d->max_errors)
    fprintf(d->out, "netrun: too many errors; %d more not shown\n", d->nerrors - d->max_errors);
  if (d->nerrors > 1) fprintf(d->out, "%d errors\n", d->nerrors);
  fflush(d->out);
  return d->nerrors;
}

static int edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 64 || lb > 64) return INT_MAX;
  int row[65];
  for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j];
      int best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

const char *diag_nearest(const char *name, const char *const *cands, int n) {
  const char *best = NULL;
  int bestd = INT_MAX;
  int limit = (int)strlen(name) / 3 + 1;
  if (limit > 3) limit = 3;
  for (int i = 0; i < n; i++) {
    if (!cands[i] || strcmp(cands[i], name) == 0) continue;
    int dist = edit_distance(name, cands[i]);
    if (dist < bestd || (dist == bestd && best && strcmp(cands[i], best) < 0)) {
      bestd = dist;
      best = cands[i];
    }
  }
  /* One that keeps nothing of the name ('w' for 'q') is no hint. */
  if (best && (size_t)bestd >= (strlen(name) > strlen(best) ? strlen(name) : strlen(best))) return NULL;
  return bestd <= limit ? best : NULL;
}

void diag_quote(FILE *f, const char *s, DiagQuote style) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c == '\n') fputs("\\n", f);
    else if (c == '\t') fputs("\\t", f);
    else if (style == QUOTE_SCRIPT && (c < 0x20 || c == 0x7f)) fprintf(f, "\\x%02x", c);
    else if (style == QUOTE_JSON && c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

/* mem's out-of-memory report (mem.h): a positionless error, which
 * allocates nothing.  Installed before main runs, so that every program
 * linked with diag (netrun, the fuzzers, the test helpers) reports alike. */
static void report_mem(const char *line) { diag_error(NULL, SPAN_NONE, "%s", line); }

__attribute__((constructor)) static void install_mem_reporter(void) { mem_set_reporter(report_mem); }

static const char *usage_verb;

void diag_usage_verb(const char *verb) { usage_verb = verb; }

int diag_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("netrun: ", stderr);
  char buf[4096];
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n >= 0) diag_put_escaped(stderr, buf);   /* cut at 4 KiB */
  fprintf(stderr, "\nTry 'netrun %s%s--help'.\n", usage_verb ? usage_verb : "", usage_verb ? " " : "");
  return EXIT_USAGE;
}
