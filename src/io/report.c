/* report.c — predictions as CSV, JSON or NumPy files, and the confusion
 * matrix of eval --confusion (report.h says what each writes). */
#include "io/report.h"
#include "base/diag.h"
#include "base/file.h"
#include "base/mem.h"
#include "io/npy.h"
#include <inttypes.h>
#include <math.h>
#include <string.h>

bool report_format(const char *s, ReportFormat *f) {
  static const char *const names[] = {"text", "csv", "json", "npy"};
  for (int i = 0; i < 4; i++)
    if (strcmp(s, names[i]) == 0) return *f = (ReportFormat)i, true;
  return false;
}

/* ---- the values --------------------------------------------------------------------- */

void report_values_init(ReportValues *r, ReportFormat f, int n, const char *const *names) {
  memset(r, 0, sizeof *r);
  r->format = f;
  r->n = n;
  for (int k = 0; k < n; k++) r->names[k] = names[k];
}

void report_values_add(ReportValues *r, int k, const Tensor *v) {
  r->parts[k] = mem_alloc(r->parts[k], sizeof *r->parts[k] * (size_t)(r->nparts[k] + 1));
  r->parts[k][r->nparts[k]++] = tensor_copy(v);
}

void report_values_free(ReportValues *r) {
  for (int k = 0; k < r->n; k++) {
    for (int i = 0; i < r->nparts[k]; i++) tensor_unref(r->parts[k][i]);
    mem_free(r->parts[k]);
  }
}

const char *report_class_name(const ReportValues *r, int64_t c) {
  return r->class_names && c >= 0 && c < r->nclasses ? r->class_names[c] : NULL;
}

/* s as a CSV field: quoted when it holds a comma, a quote or a line
 * break, its quotes doubled. */
static void put_csv_string(FILE *f, const char *s) {
  if (!strpbrk(s, ",\"\r\n")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* The rows of a batch: its first dimension, 1 for a scalar. */
static int64_t rows_of(const Tensor *t) { return t->rank ? t->shape[0] : 1; }

/* Value k as one tensor: its only part, or the parts joined along their
 * first dimension (each part's rows, the rest of the shape the same and
 * dtype too); NULL, reported, when they differ. */
static Tensor *joined(ReportValues *r, int k) {
  Tensor **p = r->parts[k], *first = p[0];
  if (r->nparts[k] == 1) return tensor_copy(first);
  int64_t rows = 0, per = first->numel / (rows_of(first) ? rows_of(first) : 1);
  for (int i = 0; i < r->nparts[k]; i++) {
    bool same = p[i]->dtype == first->dtype && p[i]->rank == first->rank &&
                (first->rank < 2 || memcmp(p[i]->shape + 1, first->shape + 1, sizeof(int64_t) * (size_t)(first->rank - 1)) == 0);
    if (!same) {
      diag_error(NULL, SPAN_NONE, "'%s' has another shape or dtype in batch %d than in batch 1: its batches cannot be joined",
                 r->names[k], i + 1);
      return NULL;
    }
    rows += rows_of(p[i]);
  }
  int64_t shape[SHAPE_MAX_RANK];
  int rank = first->rank ? first->rank : 1;
  memcpy(shape, first->shape, sizeof shape);
  shape[0] = rows;
  Tensor *t = tensor_new(first->dtype, rank, shape);
  size_t at = 0, es = dtype_size(first->dtype);
  for (int i = 0; i < r->nparts[k]; i++) {
    size_t b = (size_t)(rows_of(p[i]) * per) * es;
    if (b) memcpy((char *)t->data + at, p[i]->data, b);
    at += b;
  }
  return t;
}

/* Element i of t: f32 in 9 significant digits (f64 in 17), non-finite as
 * nan, inf, -inf (quoted when json); i64 exactly; bool as true/false
 * (json) or 1/0. */
static void put_elem(FILE *f, const Tensor *t, int64_t i, bool json) {
  if (t->dtype == DT_I64) {
    fprintf(f, "%" PRId64, tensor_i64(t)[i]);
  } else if (t->dtype == DT_BOOL) {
    fputs(json ? (tensor_bool(t)[i] ? "true" : "false") : (tensor_bool(t)[i] ? "1" : "0"), f);
  } else {
    bool f64 = t->dtype == DT_F64;
    double x = f64 ? tensor_f64(t)[i] : (double)tensor_f32(t)[i];
    const char *s = isnan(x) ? "nan" : isinf(x) ? (x < 0 ? "-inf" : "inf") : NULL;
    if (!s) fprintf(f, f64 ? "%.17g" : "%.9g", x);
    else fprintf(f, json ? "\"%s\"" : "%s", s);
  }
}

/* Element i of value k: put_elem's, or value 0's class name. */
static void put_value(FILE *f, const ReportValues *r, int k, const Tensor *t, int64_t i, bool json) {
  const char *name = k == 0 && t->dtype == DT_I64 ? report_class_name(r, tensor_i64(t)[i]) : NULL;
  if (!name) put_elem(f, t, i, json);
  else if (json) report_json_string(f, name);
  else put_csv_string(f, name);
}

void report_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned char)*s);
    else fputc(*s, f);
  }
  fputc('"', f);
}

static void write_json(FILE *f, ReportValues *r, Tensor **t) {
  fputc('{', f);
  for (int k = 0; k < r->n; k++) {
    fputs(k ? ",\n " : "", f);
    report_json_string(f, r->names[k]);
    bool named = k == 0 && r->class_names && t[k]->dtype == DT_I64;
    fprintf(f, ": {\"dtype\": \"%s\", \"shape\": [", named ? "str" : dtype_name(t[k]->dtype));
    for (int d = 0; d < t[k]->rank; d++) fprintf(f, "%s%" PRId64, d ? ", " : "", t[k]->shape[d]);
    fputs("], \"data\": [", f);
    for (int64_t i = 0; i < t[k]->numel; i++) {
      if (i) fputs(", ", f);
      put_value(f, r, k, t[k], i, true);
    }
    fputs("]}", f);
  }
  fputs("}\n", f);
}

/* Whether the values have the same number of rows (else reported). */
static bool rows_agree(ReportValues *r, Tensor **t) {
  for (int k = 1; k < r->n; k++)
    if (rows_of(t[k]) != rows_of(t[0])) {
      diag_error(NULL, SPAN_NONE, "--format csv: '%s' has %" PRId64 " rows, '%s' %" PRId64 " (a row is an example)",
                 r->names[0], rows_of(t[0]), r->names[k], rows_of(t[k]));
      return false;
    }
  return true;
}

/* The header, then a row per example (rows_agree has checked them). */
static void write_csv(FILE *f, ReportValues *r, Tensor **t) {
  int64_t rows = rows_of(t[0]);
  bool ids = r->ids && rows == r->nexamples;
  fputs("id", f);
  for (int k = 0; k < r->n; k++) {
    int64_t per = rows ? t[k]->numel / rows : 0;
    if (t[k]->rank <= 1) fprintf(f, ",%s", r->names[k]);
    else
      for (int64_t j = 0; j < per; j++) fprintf(f, ",%s[%" PRId64 "]", r->names[k], j);
  }
  fputc('\n', f);
  for (int64_t i = 0; i < rows; i++) {
    if (ids) put_csv_string(f, r->ids[i]);
    else fprintf(f, "%" PRId64, i + 1);
    for (int k = 0; k < r->n; k++) {
      int64_t per = t[k]->numel / rows;
      for (int64_t j = 0; j < per; j++) {
        fputc(',', f);
        put_value(f, r, k, t[k], i * per + j, false);
      }
    }
    fputc('\n', f);
  }
}

/* One value as a .npy file at path. */
static bool write_npy(const char *path, const Tensor *t) {
  char h[4096];
  size_t hlen;
  npy_format_header(t, h, sizeof h, &hlen);
  OutFile o;
  if (!file_out_open(&o, path)) return false;
  fwrite(h, 1, hlen, o.f);
  fwrite(t->data, 1, (size_t)t->numel * dtype_size(t->dtype), o.f);
  return file_out_close(&o);
}

static bool write_file(ReportValues *r, Tensor **t, const char *path) {
  if (r->format == REPORT_NPY) {
    if (r->n == 1) return write_npy(path, t[0]);
    char err[4200];
    if (npy_write_npz(path, r->names, t, r->n, err, sizeof err)) return true;
    diag_error(NULL, SPAN_NONE, "%s", err);
    return false;
  }
  if (r->format == REPORT_CSV && !rows_agree(r, t)) return false;
  OutFile o;
  if (!file_out_open(&o, path)) return false;
  if (r->format == REPORT_JSON) write_json(o.f, r, t);
  else write_csv(o.f, r, t);
  return file_out_close(&o);
}

bool report_values_write(ReportValues *r, const char *path) {
  Tensor *t[REPORT_MAX_OUTPUTS] = {0};
  bool ok = true;
  for (int k = 0; k < r->n; k++)
    if (!r->nparts[k]) {
      diag_error(NULL, SPAN_NONE, "no value of '%s' was computed: nothing to write", r->names[k]);
      return false;
    }
  for (int k = 0; k < r->n && ok; k++) ok = (t[k] = joined(r, k)) != NULL;
  if (ok) ok = write_file(r, t, path);
  for (int k = 0; k < r->n; k++)
    if (t[k]) tensor_unref(t[k]);
  return ok;
}

/* ---- the confusion matrix --------------------------------------------------------------- */

/* Grows the matrix to k classes, keeping the counts. */
static void grow(Confusion *c, int64_t k) {
  int64_t *m = mem_alloc(NULL, sizeof *m * (size_t)(k * k));
  memset(m, 0, sizeof *m * (size_t)(k * k));
  for (int64_t i = 0; i < c->k; i++)
    for (int64_t j = 0; j < c->k; j++) m[i * k + j] = c->m[i * c->k + j];
  mem_free(c->m);
  c->m = m;
  c->k = k;
}

bool report_confusion_add(Confusion *c, int64_t classes, int64_t truth, int64_t pred) {
  if (truth < 0 || pred < 0) return false;
  int64_t k = classes > c->k ? classes : c->k;
  if (truth >= k) k = truth + 1;
  if (pred >= k) k = pred + 1;
  if (k > c->k) grow(c, k);
  c->m[truth * c->k + pred]++;
  return true;
}

void report_confusion_free(Confusion *c) {
  mem_free(c->m);
  c->m = NULL;
  c->k = 0;
}

typedef struct ClassFigures {
  int64_t tp, fp, fn, support, n;
} ClassFigures;

static ClassFigures figures(const Confusion *c, int64_t j) {
  ClassFigures g = {0};
  for (int64_t a = 0; a < c->k; a++)
    for (int64_t b = 0; b < c->k; b++) {
      int64_t x = c->m[a * c->k + b];
      g.n += x;
      if (a == j && b == j) g.tp += x;
      else if (a == j) g.fn += x;
      else if (b == j) g.fp += x;
    }
  g.support = g.tp + g.fn;
  return g;
}

/* num/den in 4 decimals (text) or 9 digits (json); "-" or null when den is 0. */
static void put_ratio(FILE *f, int64_t num, int64_t den, bool json, int width) {
  if (!den) fprintf(f, "%*s", width, json ? "null" : "-");
  else fprintf(f, json ? "%*.9g" : "%*.4f", width, (double)num / (double)den);
}

/* Class g's precision, recall and accuracy (put_ratio's json and width),
 * each after the first behind its separator. */
static void put_figures(FILE *f, const ClassFigures *g, bool json, int width) {
  static const char *const sep[2][2] = {{" ", " "}, {", \"recall\": ", ", \"accuracy\": "}};
  put_ratio(f, g->tp, g->tp + g->fp, json, width);
  fputs(sep[json][0], f);
  put_ratio(f, g->tp, g->support, json, width);
  fputs(sep[json][1], f);
  put_ratio(f, g->n - g->fp - g->fn, g->n, json, width);
}

void report_confusion_text(FILE *f, const Confusion *c) {
  fputs("confusion (rows: true class, columns: predicted class)\n", f);
  fprintf(f, "%8s", "");
  for (int64_t j = 0; j < c->k; j++) fprintf(f, " %8" PRId64, j);
  fputc('\n', f);
  for (int64_t i = 0; i < c->k; i++) {
    fprintf(f, "%8" PRId64, i);
    for (int64_t j = 0; j < c->k; j++) fprintf(f, " %8" PRId64, c->m[i * c->k + j]);
    fputc('\n', f);
  }
  fprintf(f, "%8s %9s %9s %9s %9s\n", "class", "precision", "recall", "accuracy", "support");
  int64_t hits = 0, n = 0;
  for (int64_t j = 0; j < c->k; j++) {
    ClassFigures g = figures(c, j);
    fprintf(f, "%8" PRId64 " ", j);
    put_figures(f, &g, false, 9);
    fprintf(f, " %9" PRId64 "\n", g.support);
    hits += g.tp, n = g.n;
  }
  fputs("overall accuracy ", f);
  put_ratio(f, hits, n, false, 0);
  fprintf(f, " (%" PRId64 " of %" PRId64 ")\n", hits, n);
}

void report_confusion_json(FILE *f, const Confusion *c) {
  fprintf(f, "\"classes\": %" PRId64 ", \"confusion\": [", c->k);
  for (int64_t i = 0; i < c->k; i++) {
    fputs(i ? ", [" : "[", f);
    for (int64_t j = 0; j < c->k; j++) fprintf(f, "%s%" PRId64, j ? ", " : "", c->m[i * c->k + j]);
    fputc(']', f);
  }
  fputs("],\n \"per_class\": [", f);
  for (int64_t j = 0; j < c->k; j++) {
    ClassFigures g = figures(c, j);
    fprintf(f, "%s{\"class\": %" PRId64 ", \"precision\": ", j ? ",\n  " : "", j);
    put_figures(f, &g, true, 0);
    fprintf(f, ", \"support\": %" PRId64 "}", g.support);
  }
  fputc(']', f);
}
