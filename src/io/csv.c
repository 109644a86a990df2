/* csv.c — CSV files of numbers (data.h's grammar): the scanner shared
 * with --feed, the dataset reader (data_formats' row "csv", datafmt.h),
 * and --feed's reader of one array.  A file is read through the
 * descriptor data_open or --feed opened and checked, never by its path
 * again. */
#include "io/datafmt.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- CSV ---------------------------------------------------------------------- */

/* A CSV field's value: as a double, and exactly as an integer when it was
 * written as one that fits in 64 bits (is_int). */
typedef struct CsvNum {
  double v;
  int64_t i;
  bool is_int;
} CsvNum;

/* A number filling [s, end) but for blanks; false if it is not one.  An
 * integer is read as an integer (strtoll: exact past 2^53); others with
 * strtod, where an underflow (1e-999) reads as 0 or a denormal, and an
 * overflow (1e999) as an infinity the caller refuses. */
static bool parse_number(const char *s, const char *end, CsvNum *out) {
  while (s < end && (*s == ' ' || *s == '\t')) s++;
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
  if (s == end || memchr(s, 0, (size_t)(end - s))) return false;
  size_t n = (size_t)(end - s);
  char small[128];
  char *buf = n < sizeof small ? small : mem_alloc(NULL, n + 1);   /* zero-padded numbers can be long */
  memcpy(buf, s, n);
  buf[n] = 0;
  char *stop;
  const char *p = buf + (*buf == '-' || *buf == '+');
  bool digits = *p >= '0' && *p <= '9';
  while (*p >= '0' && *p <= '9') p++;
  errno = 0;
  out->is_int = digits && !*p && (out->i = strtoll(buf, &stop, 10), errno == 0 && !*stop);
  bool ok = true;
  if (out->is_int) {
    out->v = (double)out->i;
  } else {
    errno = 0;
    out->v = strtod(buf, &stop);
    ok = stop != buf && !*stop && (errno != ERANGE || fabs(out->v) <= DBL_MIN || isinf(out->v));
  }
  if (buf != small) mem_free(buf);
  return ok;
}

bool data_csv_sniff(Diag *d, const char *path, int file, const char *gzip) {
  const Source *src = &d->files[file];
  const uint8_t *t = (const uint8_t *)src->text;
  size_t n = src->len;
  DataProbe p = {.spec = path, .path = path, .exists = true, .fd = -1, .nhead = n < 16 ? n : 16};
  memcpy(p.head, t, p.nhead);
  const DataFormat *f = data_format_find(&p);
  if (f && f->refuse)   /* a format netrun reads otherwise, or not at all (data_formats) */
    data_file_error(d, path, "%s", f->refuse);
  else if (n >= 2 && t[0] == 0x1f && t[1] == 0x8b)
    data_file_error(d, path, "a gzip file: %s", gzip);
  else if ((n >= 2 && ((t[0] == 0xff && t[1] == 0xfe) || (t[0] == 0xfe && t[1] == 0xff))) ||
           (n >= 2 && ((t[0] == 0 && t[1] != 0) || (t[0] != 0 && t[1] == 0))))
    data_file_error(d, path, "a UTF-16 file: CSV files are read as UTF-8 (convert it: iconv -f UTF-16 -t UTF-8)");
  else
    return true;
  return false;
}

static Span span_of(int file, const Source *src, const char *b, const char *e) {
  return (Span){file, (uint32_t)(b - src->text), (uint32_t)(e - src->text)};
}

static char *field_name(Arena *a, const Source *src, Span s);

/* A data-row field [f, fe) of column c that is not a number: empty (a
 * missing value) or text, named by its header column (else its index). */
static void not_a_number(Diag *d, const CsvScan *s, const Source *src, const char *f, const char *fe, int64_t c) {
  Span at = span_of(s->file, src, f, fe);
  const char *col = s->header.file >= 0 && c < s->nnames
                        ? arena_printf(d->arena, "'%s'", field_name(d->arena, src, s->names[c]))
                        : arena_printf(d->arena, "%" PRId64, c);
  const char *text = field_name(d->arena, src, at);
  if (!*text) {
    diag_error(d, at, "column %s has a missing value", col);
    return;
  }
  diag_error(d, at, "column %s holds '%s', not a number: CSV columns are read as numbers (text is not encoded "
             "as categories)%s%s", col, text, s->text_hint ? "; " : "", s->text_hint ? s->text_hint : "");
}

bool data_csv_scan(Diag *d, CsvScan *s) {
  const Source *src = &d->files[s->file];
  const char *nul = memchr(src->text, 0, src->len);
  if (nul) {
    diag_error(d, span_of(s->file, src, nul, nul + 1), "a NUL byte: a CSV file is text");
    return false;
  }
  double *vals = NULL;
  int64_t *ints = NULL;
  bool *isint = NULL;
  int64_t cap = 0;
  s->rows = 0;
  s->cols = -1;
  s->header = SPAN_NONE;
  s->names = NULL;
  s->nnames = 0;
  bool ok = true;
  for (int line = 0; line < src->nlines && ok; line++) {
    const char *b = src->text + src->line_starts[line];
    const char *e = line + 1 < src->nlines ? src->text + src->line_starts[line + 1] - 1 : src->text + src->len;
    const char *t = b;
    while (t < e && (*t == ' ' || *t == '\t' || *t == '\r')) t++;
    if (t == e) continue;
    int64_t c = 0;
    bool header = false;
    for (const char *f = b;; c++) {
      const char *comma = memchr(f, ',', (size_t)(e - f));
      const char *fe = comma ? comma : e;
      CsvNum v = {0};
      if (s->header.file >= 0 && c < s->nskip && s->skip[c]) {
        /* a column not read */
      } else if (!parse_number(f, fe, &v)) {
        if (s->cols < 0 && s->header.file < 0) {
          header = true;   /* the first row: a header */
        } else {
          not_a_number(d, s, src, f, fe, c);
          ok = false;
          break;
        }
      } else if (!isfinite(v.v)) {
        diag_error(d, span_of(s->file, src, f, fe), "not a finite number");
        ok = false;
        break;
      } else if (!v.is_int && !isfinite((float)v.v)) {
        diag_error(d, span_of(s->file, src, f, fe), "not a finite f32 number (f32 holds magnitudes up to 3.4e38)");
        ok = false;
        break;
      }
      if (c == cap) {
        cap = cap ? cap * 2 : 64;
        vals = mem_alloc(vals, sizeof *vals * (size_t)cap);
        ints = mem_alloc(ints, sizeof *ints * (size_t)cap);
        isint = mem_alloc(isint, sizeof *isint * (size_t)cap);
      }
      vals[c] = v.v;
      ints[c] = v.i;
      isint[c] = v.is_int;
      if (!comma) break;
      f = comma + 1;
    }
    if (!ok) break;
    Span row = span_of(s->file, src, b, e);
    if (header) {
      s->header = row;
      s->nnames = c + 1;
      s->names = arena_alloc(d->arena, sizeof *s->names * (size_t)s->nnames);
      const char *f = b;
      for (int64_t i = 0; i < s->nnames; i++) {
        const char *comma = memchr(f, ',', (size_t)(e - f));
        const char *fe = comma ? comma : e;
        s->names[i] = span_of(s->file, src, f, fe);
        f = comma ? comma + 1 : e;
      }
      if (s->on_header && !s->on_header(s->ctx)) ok = false;
      continue;
    }
    if (s->cols >= 0 && c + 1 != s->cols) {
      diag_error(d, row, "this row has %" PRId64 " values, the rows before have %" PRId64, c + 1, s->cols);
      ok = false;
      break;
    }
    s->cols = c + 1;
    s->rows++;
    s->ints = ints;
    s->isint = isint;
    if (s->row && !s->row(s->ctx, row, vals, c + 1)) ok = false;
  }
  s->ints = NULL;
  s->isint = NULL;
  mem_free(vals);
  mem_free(ints);
  mem_free(isint);
  return ok;
}

/* A CSV file as a dataset: the label column "y", the others "x". */
typedef struct CsvLoad {
  Diag *d;
  const char *path;
  Dataset *ds;
  CsvScan scan;
  const char *label;           /* the option */
  const DataOptions *opt;      /* columns and labels by name */
  int64_t ycol;                /* the label's column: -1 until the first row */
  int64_t *xcols, nxc;         /* the columns x holds, once chosen */
  int64_t *ycols, nyc;         /* the label columns (ycols[0] == ycol) */
  bool *skip;                  /* the columns not read */
  float *x;
  double *y;
  int64_t *yi;                 /* the labels as integers, while all are (yint) */
  bool yint;
  int64_t nx, capx, ny, capy;
  int64_t charged;             /* bytes of x, y and yi counted against the memory limit */
} CsvLoad;

/* A header field as a name: without blanks or enclosing double quotes, its
 * control characters escaped (\x1b), as names are printed to a terminal. */
static char *field_name(Arena *a, const Source *src, Span s) {
  const char *b = src->text + s.start, *e = src->text + s.end;
  while (b < e && (*b == ' ' || *b == '\t')) b++;
  while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
  if (e - b >= 2 && *b == '"' && e[-1] == '"') b++, e--;
  char *name = arena_alloc(a, (size_t)(e - b) * 4 + 1), *o = name;
  for (; b < e; b++) {
    unsigned char ch = (unsigned char)*b;
    if (ch < 0x20 || ch == 0x7f) o += sprintf(o, "\\x%02x", ch);
    else *o++ = (char)ch;
  }
  *o = 0;
  return name;
}

/* The columns cols[0, total), by name ("a, b, c") or index ("columns 0, 1,
 * 2"); a long list shows its first three and its last. */
static const char *columns_str(CsvLoad *L, const int64_t *cols, int64_t total) {
  const Source *src = &L->d->files[L->scan.file];
  bool header = L->scan.header.file >= 0;
  int64_t pick[6], np = 0;
  for (int64_t i = 0; i < total && np < (total <= 6 ? 6 : 3); i++) pick[np++] = cols[i];
  if (total > 6) pick[np++] = cols[total - 1];
  char buf[512];
  size_t k = (size_t)snprintf(buf, sizeof buf, "%s", header ? "" : total > 1 ? "columns " : "column ");
  for (int64_t j = 0; j < np && k < sizeof buf; j++) {
    const char *sep = j == 0 ? "" : total > 6 && j == np - 1 ? ", ..., " : ", ";
    if (header)
      k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", sep, field_name(&L->ds->arena, src, L->scan.names[pick[j]]));
    else
      k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%" PRId64, sep, pick[j]);
  }
  if (total > 6 && k < sizeof buf) snprintf(buf + k, sizeof buf - k, " (%" PRId64 " columns)", total);
  return arena_strdup(&L->ds->arena, buf);
}

/* Decides the label column at the first data row (n values). */
static bool csv_pick_label(CsvLoad *L, Span row, int64_t n) {
  Diag *d = L->d;
  const Source *src = &d->files[L->scan.file];
  bool header = L->scan.header.file >= 0;
  if (header && L->scan.nnames != n) {
    diag_error(d, row, "this row has %" PRId64 " values, the header names %" PRId64 " columns", n, L->scan.nnames);
    return false;
  }
  if (n < 2) {
    diag_error(d, row, "one column: a dataset needs columns of features and a label column");
    return false;
  }
  char **names = NULL;
  if (header) {
    names = arena_alloc(&L->ds->arena, sizeof *names * (size_t)n);
    for (int64_t i = 0; i < n; i++) names[i] = field_name(&L->ds->arena, src, L->scan.names[i]);
  }
  L->ycol = n - 1;
  if (!L->label) {
    for (int64_t i = 0; header && i < n; i++)
      if (strcasecmp(names[i], "label") == 0 || strcasecmp(names[i], "y") == 0) {
        L->ycol = i;
        break;
      }
    return true;
  }
  for (int64_t i = 0; header && i < n; i++)
    if (strcmp(names[i], L->label) == 0) {
      L->ycol = i;
      return true;
    }
  char *end;
  errno = 0;
  long long k = strtoll(L->label, &end, 10);
  if (*L->label && !*end && !errno && L->label[0] != '-' && L->label[0] != '+') {
    if (k >= n) {
      data_file_error(d, L->path, "no label column %lld: the rows have %" PRId64 " columns (0 to %" PRId64 ")", k, n,
                 n - 1);
      return false;
    }
    L->ycol = k;
    return true;
  }
  if (!header) {
    data_file_error(d, L->path, "no header row to find the label column '%s' in: give its index (0 to %" PRId64 ")",
               L->label, n - 1);
    return false;
  }
  const char *near = diag_nearest(L->label, (const char *const *)names, (int)n);
  diag_error(d, L->scan.header, "no column named '%s'%s%s%s", L->label, DIAG_MEAN(near));
  return false;
}

/* The columns x and the labels take, once the label column is known (x:
 * all the others), when columns = [...] did not choose them. */
static void csv_default_columns(CsvLoad *L, int64_t n) {
  L->ycols = arena_alloc(&L->ds->arena, sizeof *L->ycols);
  L->ycols[0] = L->ycol, L->nyc = 1;
  L->xcols = arena_alloc(&L->ds->arena, sizeof *L->xcols * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    if (i != L->ycol) L->xcols[L->nxc++] = i;
}

/* The header column called name into *at; else an error at the header,
 * with the nearest name. */
static bool csv_find(CsvLoad *L, const char *key, const char *name, int64_t *at) {
  const Source *src = &L->d->files[L->scan.file];
  int64_t n = L->scan.nnames;
  char **names = arena_alloc(&L->ds->arena, sizeof *names * (size_t)n);
  for (int64_t i = 0; i < n; i++) names[i] = field_name(&L->ds->arena, src, L->scan.names[i]);
  for (int64_t i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0) return *at = i, true;
  const char *near = diag_nearest(name, (const char *const *)names, (int)n);
  diag_error(L->d, L->scan.header, "%s names '%s', which is not a column%s%s%s", key, name,
             DIAG_MEAN(near));
  return false;
}

/* on_header with columns = [...] or several labels: the columns by name,
 * and those neither takes left unread. */
static bool csv_named_columns(void *ctx) {
  CsvLoad *L = ctx;
  const DataOptions *o = L->opt;
  int64_t n = L->scan.nnames;
  if (o->nlabels) {
    L->ycols = arena_alloc(&L->ds->arena, sizeof *L->ycols * (size_t)o->nlabels);
    for (int i = 0; i < o->nlabels; i++)
      if (!csv_find(L, "label", o->labels[i], &L->ycols[L->nyc++])) return false;
    L->ycol = L->ycols[0];
  } else {
    if (!csv_pick_label(L, L->scan.header, n)) return false;
    csv_default_columns(L, n);
  }
  L->xcols = arena_alloc(&L->ds->arena, sizeof *L->xcols * (size_t)(n + o->ncolumns));
  L->nxc = 0;
  if (o->ncolumns) {
    for (int i = 0; i < o->ncolumns; i++)
      if (!csv_find(L, "columns", o->columns[i], &L->xcols[L->nxc++])) return false;
  } else {
    for (int64_t i = 0; i < n; i++) {
      bool y = false;
      for (int64_t j = 0; j < L->nyc; j++) y |= L->ycols[j] == i;
      if (!y) L->xcols[L->nxc++] = i;
    }
  }
  L->skip = arena_alloc(&L->ds->arena, (size_t)n);
  memset(L->skip, 1, (size_t)n);
  for (int64_t i = 0; i < L->nxc; i++) L->skip[L->xcols[i]] = false;
  for (int64_t j = 0; j < L->nyc; j++) {
    if (!L->skip[L->ycols[j]]) {
      diag_error(L->d, L->scan.header, "column '%s' is both an input column and a label",
                 field_name(&L->ds->arena, &L->d->files[L->scan.file], L->scan.names[L->ycols[j]]));
      return false;
    }
    L->skip[L->ycols[j]] = false;
  }
  L->scan.skip = L->skip, L->scan.nskip = n;
  return true;
}

/* Counts the buffers' growth from the capacities (capx, capy) to the
 * ones asked for against the memory limit: false (reported) when it is
 * refused. */
static bool csv_charge(CsvLoad *L, Span at, int64_t capx, int64_t capy) {
  int64_t more = (capx - L->capx) * (int64_t)sizeof *L->x +
                 (capy - L->capy) * (int64_t)(sizeof *L->y + sizeof *L->yi);
  if (mem_charge(more)) {
    L->charged += more;
    return true;
  }
  char why[256];
  diag_error(L->d, at, "out of memory: the dataset's values, %" PRId64 " rows so far, grow at this row: %s", L->ny,
             mem_limit_why((double)more, why, sizeof why));
  return false;
}

static bool csv_row(void *ctx, Span at, const double *v, int64_t n) {
  CsvLoad *L = ctx;
  if (!L->xcols && L->scan.on_header) {
    diag_error(L->d, at, "columns and label name header columns, but the file has no header row");
    return false;
  }
  if (L->ycol < 0) {
    if (!csv_pick_label(L, at, n)) return false;
    csv_default_columns(L, n);
  }
  if (L->nx + L->nxc > L->capx) {
    int64_t cap = L->capx ? L->capx * 2 : 4096;
    while (cap < L->nx + L->nxc) cap *= 2;
    if (!csv_charge(L, at, cap, L->capy)) return false;
    L->capx = cap;
    L->x = mem_alloc(L->x, sizeof *L->x * (size_t)L->capx);
  }
  if (L->ny + L->nyc > L->capy) {
    int64_t cap = L->capy ? L->capy * 2 : 4096;
    if (!csv_charge(L, at, L->capx, cap)) return false;
    L->capy = cap;
    L->y = mem_alloc(L->y, sizeof *L->y * (size_t)L->capy);
    L->yi = mem_alloc(L->yi, sizeof *L->yi * (size_t)L->capy);
  }
  for (int64_t i = 0; i < L->nxc; i++) L->x[L->nx++] = (float)v[L->xcols[i]];
  if (L->nyc > 1) {   /* regression targets: f32 */
    for (int64_t j = 0; j < L->nyc; j++) L->y[L->ny++] = v[L->ycols[j]];
    L->yint = false;
    return true;
  }
  /* An integer label is kept exact (past 2^53); 3.0 counts as one too. */
  double y = v[L->ycol];
  bool exact = L->scan.isint[L->ycol];
  L->yint = L->yint && (exact || (y == floor(y) && fabs(y) < 0x1p53));
  L->yi[L->ny] = exact ? L->scan.ints[L->ycol] : L->yint ? (int64_t)y : 0;
  L->y[L->ny++] = y;
  return true;
}

bool data_csv_open(Diag *d, DataProbe *p, Dataset *ds) {
  const char *path = p->path;
  const DataOptions *opt = p->opt;
  int fd = p->fd;
  p->fd = -1;
  /* The text is needed only while reading (for carets), so it lives in a
   * Diag of its own, freed once the file is read; errors count in d. */
  Arena ta;
  arena_init(&ta);
  Diag td;
  diag_init(&td, &ta);
  td.out = d->out;
  td.color = d->color;
  td.max_errors = d->max_errors - d->nerrors;
  CsvLoad L = {.d = &td, .path = path, .ds = ds, .label = opt->label, .opt = opt, .ycol = -1, .yint = true};
  bool ok = false;
  int file = diag_load_fd(&td, path, fd);
  if (file < 0) goto done;
  const Source *src = &td.files[file];
  if (!data_csv_sniff(&td, path, file, "CSV files are read uncompressed, IDX files as IMAGES:LABELS")) goto done;
  L.scan = (CsvScan){.file = file, .row = csv_row, .ctx = &L,
                     .text_hint = opt->ncolumns ? "leave the column out of columns = [...]"
                                                : "name the numeric columns with columns = [...] in the train block"};
  if (opt->ncolumns || opt->nlabels) L.scan.on_header = csv_named_columns;
  if (!data_csv_scan(&td, &L.scan)) goto done;
  if (L.scan.rows == 0) {
    if (L.scan.header.file >= 0) diag_error(&td, L.scan.header, "a header but no rows of numbers");
    else diag_error(&td, (Span){file, 0, 0}, "empty file: expected rows of numbers, after an optional header");
    goto done;
  }
  int64_t n = L.scan.rows, k = L.nxc, ny = L.nyc;
  ds->n = n;
  ds->files[ds->nfiles++] = arena_strdup(&ds->arena, path);
  DataColumn *c = &ds->cols[DATA_INPUT];
  c->name = "x";
  c->dtype = DT_F32;
  c->store = DATA_F32;
  c->rank = 2;
  c->shape[0] = n;
  c->shape[1] = k;
  c->row = k;
  c->data = mem_alloc(L.x, sizeof *L.x * (size_t)(n * k));
  c->source = columns_str(&L, L.xcols, L.nxc);
  L.x = NULL;
  c = &ds->cols[DATA_LABEL];
  c->name = "y";
  bool integral = L.yint;
  c->dtype = integral ? DT_I64 : DT_F32;
  c->store = integral ? DATA_I64 : DATA_F32;
  c->rank = ny > 1 ? 2 : 1;
  c->shape[0] = n;
  c->shape[1] = ny;
  c->row = ny;
  if (integral) {
    c->data = mem_alloc(L.yi, sizeof *L.yi * (size_t)n);
    L.yi = NULL;
  } else {
    float *y = mem_alloc(NULL, sizeof *y * (size_t)(n * ny));
    for (int64_t i = 0; i < n * ny; i++) y[i] = (float)L.y[i];
    c->data = y;
  }
  c->source = ny > 1 ? columns_str(&L, L.ycols, ny)
            : L.scan.header.file >= 0 ? field_name(&ds->arena, src, L.scan.names[L.ycol])
                                      : arena_printf(&ds->arena, "column %" PRId64, L.ycol);
  ds->ncols = 2;
  /* The dataset keeps x and the labels: the rest of what was counted,
   * the growth's slack and the other form of the labels, is given back. */
  int64_t keep = n * k * (int64_t)sizeof(float) + n * ny * (int64_t)(integral ? sizeof(int64_t) : sizeof(float));
  ds->charged += keep;
  L.charged -= keep;
  ok = true;
done:
  mem_uncharge(L.charged);
  mem_free(L.x);
  mem_free(L.y);
  mem_free(L.yi);
  diag_absorb(d, &td);
  arena_free(&ta);
  return ok;
}

/* ---- --feed ------------------------------------------------------------------ */

/* The rows of a CSV file, as doubles and, for integers, exactly
 * (data_csv_scan calls this per row). */
typedef struct Rows {
  const CsvScan *scan;
  double *vals;
  int64_t *ints;               /* exact integers: vals[i] when it was not one */
  bool exact;                  /* every value is an exact integer */
  int64_t n, cap;
} Rows;

static bool add_row(void *ctx, Span at, const double *v, int64_t n) {
  (void)at;
  Rows *r = ctx;
  int64_t cap = r->cap;
  VEC_RESERVE(r->vals, r->cap, r->n + n);
  if (cap != r->cap) r->ints = mem_alloc(r->ints, sizeof *r->ints * (size_t)r->cap);
  memcpy(r->vals + r->n, v, sizeof *v * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    r->exact = r->exact && r->scan->isint[i];
    r->ints[r->n + i] = r->scan->isint[i] ? r->scan->ints[i] : 0;
  }
  r->n += n;
  return true;
}

/* A tensor of shape s (dtype want) of the file's n values: exact
 * integers for an i64 tensor when every value was one. */
static Tensor *feed_tensor(DType want, const Shape *s, const Rows *r, int64_t n) {
  int64_t dims[SHAPE_MAX_RANK];
  for (int i = 0; i < s->rank; i++) dims[i] = s->d[i].n;
  Tensor *t = tensor_new(want, s->rank, dims);
  n = n < t->numel ? n : t->numel;
  if (want == DT_I64 && r->exact) memcpy(t->data, r->ints, sizeof *r->ints * (size_t)n);
  else for (int64_t i = 0; i < n; i++) tensor_set(t, i, r->vals[i]);
  return t;
}

Tensor *data_csv_feed(Diag *d, int fd, const char *path, const VarDesc *decl) {
  int file = diag_load_fd(d, path, fd);
  if (file < 0 || !data_csv_sniff(d, path, file, "--feed reads CSV files uncompressed (gunzip it first)")) return NULL;
  CsvScan scan = {.file = file, .row = add_row};
  Rows acc = {.scan = &scan, .exact = true};
  scan.ctx = &acc;
  bool ok = data_csv_scan(d, &scan);
  double *vals = acc.vals;
  int64_t nv = acc.n, rows = scan.rows, cols = scan.cols;
  Tensor *t = NULL;
  if (ok && rows == 0) {
    diag_error(d, SPAN_NONE, "%s holds no data rows", path);
    ok = false;
  }
  if (ok) {
    /* Rows become the first dimension; the columns fill the others. */
    int r = decl->shape.rank;
    int64_t dims[SHAPE_MAX_RANK];
    int64_t rest = 1;
    bool fits = r >= 1;
    for (int i = 1; i < r; i++) {
      if (decl->shape.d[i].n < 0) fits = false;
      dims[i] = decl->shape.d[i].n;
      if (!mem_mul_size(rest, dims[i] >= 0 ? dims[i] : 1, &rest)) fits = false, rest = -1;   /* [B, 2^62, 2^62] */
    }
    if (r == 0 && rows * cols == 1) {
      t = feed_tensor(decl->dtype, &decl->shape, &acc, 1);
    } else if (!fits || rest != cols) {
      char want[128];
      diag_error(d, SPAN_NONE,
                 "%s has %lld rows of %lld values, which does not fit '%s' of shape %s "
                 "(rows fill the first dimension, columns the rest)",
                 path, (long long)rows, (long long)cols, decl->name, shape_str(&decl->shape, want, sizeof want));
    } else {
      dims[0] = rows;
      Shape s = shape_of(r, dims);
      t = feed_tensor(decl->dtype, &s, &acc, nv);
      if (decl->dtype == DT_I64 && !acc.exact)
        for (int64_t i = 0; i < nv; i++)
          if (vals[i] != floor(vals[i]) || fabs(vals[i]) >= 0x1p63) {
            diag_error(d, SPAN_NONE, "%s: '%s' is i64 but the file holds %g", path, decl->name, vals[i]);
            tensor_unref(t);
            t = NULL;
            break;
          }
    }
  }
  mem_free(vals);
  mem_free(acc.ints);
  return t;
}
