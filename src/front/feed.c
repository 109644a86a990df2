/* feed.c — parsing values given on the command line, and reading the files
 * --feed names (CSV here; NumPy's .npy and .npz in npy.c). */
#include "front/feed.h"

#include "front/ast.h"
#include "io/data.h"
#include "base/file.h"

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

/* --feed's file: its format the table's (data.h), of the rows --feed reads
 * (.npy, .npz, and CSV for every other file), decided on the descriptor
 * opened and checked once (a regular file), which that reader reads. */
Tensor *feed_read_file(Diag *d, const char *path, const VarDesc *decl) {
  char why[256];
  int fd = file_open_regular(path, why, sizeof why);
  if (fd < 0) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", path, why);
    return NULL;
  }
  DataProbe p = {.spec = path, .path = path, .exists = true, .fd = fd};
  ssize_t k = pread(fd, p.head, sizeof p.head, 0);
  p.nhead = k > 0 ? (size_t)k : 0;
  for (int i = 0; i < data_nformats; i++)
    if (data_formats[i].feed && data_formats[i].sniff(&p)) return data_formats[i].feed(d, fd, path, decl);
  close(fd);   /* not reached: the CSV row reads every file */
  diag_error(d, SPAN_NONE, "cannot read %s: not a format --feed reads", path);
  return NULL;
}
