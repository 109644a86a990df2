/* feed.c — parsing values given on the command line, and reading the files
 * --feed names (CSV here; NumPy's .npy and .npz in npy.c). */
#include "front/feed.h"

#include "front/ast.h"
#include "io/data.h"
#include "base/file.h"
#include "io/npy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

/* Flattens a literal into vals, recording its shape; false (with an error)
 * if it is not a rectangular literal of numbers. */
static bool flatten(Diag *d, const AstNode *n, int depth, int *leaf, Shape *s, double **vals, int64_t **ints,
                    int64_t *nv, int64_t *cap, bool *floats) {
  if (n->kind == AST_LIST) {
    if (depth >= SHAPE_MAX_RANK || (*leaf >= 0 && depth >= *leaf)) {
      diag_error(d, n->span, "expected a number here");
      return false;
    }
    if (s->rank <= depth) {
      s->rank = depth + 1;
      s->d[depth] = dim_n(n->list.n);
    } else if (s->d[depth].n != n->list.n) {
      diag_error(d, n->span, "not rectangular: %d elements here, %lld before", n->list.n,
                 (long long)s->d[depth].n);
      return false;
    }
    for (int i = 0; i < n->list.n; i++)
      if (!flatten(d, n->list.items[i], depth + 1, leaf, s, vals, ints, nv, cap, floats)) return false;
    return true;
  }
  if ((*leaf >= 0 && depth != *leaf) || s->rank > depth) {
    diag_error(d, n->span, "not rectangular: expected a list here");
    return false;
  }
  *leaf = depth;
  double v;
  int64_t iv = 0;
  const AstNode *m = n;
  double sign = 1;
  while (m->kind == AST_UNARY && m->op == '-') sign = -sign, m = m->a;
  if (m->kind == AST_INT) v = (double)m->ival, iv = sign < 0 ? (int64_t)(0 - (uint64_t)m->ival) : m->ival;
  else if (m->kind == AST_FLOAT) v = m->fval, *floats = true;
  else if (m->kind == AST_BOOL && m == n) v = (double)m->ival, iv = m->ival;
  else {
    diag_error(d, n->span, "expected a number or a list of numbers");
    return false;
  }
  if (*nv == *cap) {
    *cap = *cap ? *cap * 2 : 16;
    *vals = mem_alloc(*vals, sizeof **vals * (size_t)*cap);
    *ints = mem_alloc(*ints, sizeof **ints * (size_t)*cap);
  }
  (*ints)[*nv] = iv;
  (*vals)[(*nv)++] = sign * v;
  return true;
}

static Tensor *make(DType want, const Shape *s, const double *vals, int64_t n) {
  int64_t dims[SHAPE_MAX_RANK];
  for (int i = 0; i < s->rank; i++) dims[i] = s->d[i].n;
  Tensor *t = tensor_new(want, s->rank, dims);
  for (int64_t i = 0; i < n && i < t->numel; i++) tensor_set(t, i, vals[i]);
  return t;
}

/* An i64 tensor of shape s from exact integers. */
static Tensor *make_i64(const Shape *s, const int64_t *ints, int64_t n) {
  int64_t dims[SHAPE_MAX_RANK];
  for (int i = 0; i < s->rank; i++) dims[i] = s->d[i].n;
  Tensor *t = tensor_new(DT_I64, s->rank, dims);
  int64_t k = n < t->numel ? n : t->numel;
  if (k > 0) memcpy(t->data, ints, sizeof *ints * (size_t)k);   /* [[]]: no values, ints NULL */
  return t;
}

Tensor *feed_parse_value(Diag *d, const char *name, const char *text, DType want) {
  Arena arena;
  arena_init(&arena);
  char path[256];
  snprintf(path, sizeof path, "--set %s", name);
  int file = diag_add_source(d, path, NULL, text, strlen(text));
  int before = d->nerrors;
  AstNode *root = ast_parse(&arena, d, file);
  Tensor *t = NULL;
  if (root && (root->list.n != 1 || root->list.items[0]->kind != AST_EXPR)) {
    diag_error(d, root->list.n ? root->list.items[0]->span : (Span){file, 0, 0},
               "expected one value, like 3, -1.5 or [[1, 2], [3, 4]]");
  } else if (root) {
    Shape s = shape_scalar();
    double *vals = NULL;
    int64_t *ints = NULL;
    int64_t nv = 0, cap = 0;
    int leaf = -1;
    bool floats = false;
    const AstNode *e = root->list.items[0]->a;
    if (flatten(d, e, 0, &leaf, &s, &vals, &ints, &nv, &cap, &floats)) {
      if (floats && !dtype_is_float(want)) diag_error(d, e->span, "'%s' is %s: expected integers", name, dtype_name(want));
      else t = want == DT_I64 ? make_i64(&s, ints, nv) : make(want, &s, vals, nv);
    }
    mem_free(vals);
    mem_free(ints);
  }
  arena_free(&arena);
  if (d->nerrors != before && t) {
    tensor_unref(t);
    t = NULL;
  }
  return t;
}

/* ---- CSV --------------------------------------------------------------------- */

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

/* The source of the CSV file at path, or -1 (reported) if it cannot be
 * one: not a regular file (a FIFO would block), or a gzip, IDX or UTF-16
 * file. */
static int load_csv(Diag *d, const char *path) {
  char why[256];
  if (!file_check_regular(path, why, sizeof why)) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", path, why);
    return -1;
  }
  int file = diag_load_file(d, path);
  if (file >= 0 && !data_csv_sniff(d, path, file, "--feed reads CSV files uncompressed (gunzip it first)")) return -1;
  return file;
}

Tensor *feed_read_csv(Diag *d, const char *path, const VarDesc *decl) {
  int file = load_csv(d, path);
  if (file < 0) return NULL;
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
      t = decl->dtype == DT_I64 && acc.exact ? make_i64(&decl->shape, acc.ints, 1) : make(decl->dtype, &decl->shape, vals, 1);
    } else if (!fits || rest != cols) {
      char want[128];
      diag_error(d, SPAN_NONE,
                 "%s has %lld rows of %lld values, which does not fit '%s' of shape %s "
                 "(rows fill the first dimension, columns the rest)",
                 path, (long long)rows, (long long)cols, decl->name, shape_str(&decl->shape, want, sizeof want));
    } else {
      dims[0] = rows;
      Shape s = shape_of(r, dims);
      t = decl->dtype == DT_I64 && acc.exact ? make_i64(&s, acc.ints, nv) : make(decl->dtype, &s, vals, nv);
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

Tensor *feed_read_file(Diag *d, const char *path, const VarDesc *decl) {
  uint8_t magic[8];
  size_t n = 0;
  char why[256];
  int fd = file_open_regular(path, why, sizeof why);
  if (fd >= 0) {
    ssize_t k = read(fd, magic, sizeof magic);
    n = k > 0 ? (size_t)k : 0;
    close(fd);
  }
  if (npy_is_npy(magic, n) || npy_is_zip(magic, n)) return npy_feed(d, path, decl);
  return feed_read_csv(d, path, decl);
}
