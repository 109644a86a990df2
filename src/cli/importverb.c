/* importverb.c — `netrun import MODEL.onnx -o OUT.net`: an ONNX model
 * (read by io/onnx.c) becomes a readable script and its weights, a
 * .safetensors file beside it that the script's weights("...")
 * initializers read (netrun(1), IMPORT).
 *
 * Each statement is lowered as soon as it is written, into one session,
 * so the shapes and dtypes that later nodes need (Shape, auto_pad, a
 * Reshape's 0) are netrun's own, and a statement that would not lower is
 * caught where it is made.  The statements name values after the ONNX
 * names, made valid by one rule (valid_name).  Values the graph computes
 * from constants and shapes (Shape -> Gather -> Unsqueeze -> Concat, the
 * shape subgraphs exporters write) are folded here: a shape entry that
 * depends on a symbolic dimension stays symbolic, and a Reshape with one
 * such entry reshapes to -1 there, so a dynamic batch stays dynamic. */
#include "cli/cmd.h"
#include "cli/option.h"
#include "front/ast.h"
#include "front/session.h"
#include "base/file.h"
#include "io/onnx.h"
#include "io/safetensors.h"
#include "ir/tensor.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The largest .onnx file import reads. */
#define IMPORT_MAX_FILE ((size_t)4 << 30)
/* Constants with more elements become states in the weights file rather
 * than literals in the script. */
#define IMPORT_MAX_LITERAL 64
/* The most elements a constant computed while importing may have. */
#define IMPORT_MAX_CONST 10000000

/* A value of the graph: a variable of the script, or a constant known at
 * import (whose entries, for a shape, may be symbols: sym[i] non-NULL). */
typedef struct Val {
  const char *var;
  OnnxTensor *c;
  const char **sym;
  bool param;                  /* an initializer the script declares */
} Val;

typedef struct Imp {
  Session s;
  Arena *a;
  const OnnxModel *m;
  const OnnxGraph *g;
  StrMap index;                /* ONNX name -> its Val in v */
  Val *v;
  int nv, capv;
  StrMap used;                 /* identifiers the script uses */
  char *text;                  /* the script so far */
  size_t len, cap;
  int lines;
  const char *net_path, *st_path, *st_name;
  struct Weight { const char *key; OnnxTensor *t; } *w;   /* the weights file's tensors */
  int nw, capw;
  int nanon;                   /* dynamic dims without a name so far */
  const OnnxNode *node;        /* being translated */
  const char *model;           /* the .onnx file's path, for messages */
  bool failed;
  bool st_written;             /* the weights file is written (removed again if the import fails) */
  int64_t const_left;          /* bytes the constants folded here may still take (--max-memory) */
  unsigned rnn_written;        /* the LSTM/GRU functions written so far (rnn_fn) */
  const char *rnn_names[6];
} Imp;

/* ---- names ---------------------------------------------------------------------- */

static const char *const reserved[] = {"input", "param", "state", "def", "op", "grad", "return", "while", "if",
                                       "else", "import", "load", "and", "or", "not", "true", "false", "print",
                                       "dim", "weights", "scope", "_"};

/* The rule (netrun(1), IMPORT): every character but a letter, a digit or
 * '_' becomes '_'; a name that is empty or starts with a digit gets a '_'
 * in front; a reserved word or an op's name gets one after.  Then, if the
 * script uses the name already, _2, _3 ... after it. */
static const char *valid_name(Imp *I, const char *s, bool unique) {
  size_t n = strlen(s);
  char *o = arena_alloc(I->a, n + 16);
  size_t k = 0;
  if (!n || isdigit((unsigned char)s[0])) o[k++] = '_';
  for (size_t i = 0; i < n; i++) o[k++] = isalnum((unsigned char)s[i]) || s[i] == '_' ? s[i] : '_';
  o[k] = 0;
  bool clash = reg_find_op(I->s.prog, o) != NULL;
  for (size_t i = 0; i < sizeof reserved / sizeof *reserved && !clash; i++) clash = strcmp(o, reserved[i]) == 0;
  if (clash) o[k++] = '_', o[k] = 0;
  if (!unique) return o;
  const char *name = o;
  for (int i = 2; strmap_get(&I->used, name) >= 0; i++) name = arena_printf(I->a, "%s_%d", o, i);
  strmap_put(I->a, &I->used, name, 1);
  return name;
}

/* A new name of the script: base (already valid) with suffix, unique. */
static const char *fresh(Imp *I, const char *base, const char *suffix) {
  return valid_name(I, arena_printf(I->a, "%s%s", base, suffix), true);
}

/* ---- the script ------------------------------------------------------------------- */

/* The node being translated as messages name it (onnx_node_label). */
static const char *node_label(const Imp *I, char lb[static ONNX_LABEL_MAX]) {
  return onnx_node_label(I->g, (int)(I->node - I->g->nodes), lb, ONNX_LABEL_MAX);
}

static void fail(Imp *I, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(Imp *I, const char *fmt, ...) {
  char msg[1024];
  DIAG_FORMAT(msg, sizeof msg, fmt);
  char lb[ONNX_LABEL_MAX];
  if (I->node)
    diag_error(&I->s.diag, SPAN_NONE, "%s: node %s (%s): %s", I->model, node_label(I, lb), I->node->op_type, msg);
  else
    diag_error(&I->s.diag, SPAN_NONE, "%s: %s", I->model, msg);
  I->failed = true;
}

/* Appends text (whole statements) to the script and lowers it; false if
 * it does not lower (an error of netrun's, reported). */
static bool say(Imp *I, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool say(Imp *I, const char *fmt, ...) {
  if (I->failed) return false;
  va_list ap;
  va_start(ap, fmt);
  char *t = NULL;
  int n = vasprintf(&t, fmt, ap);
  va_end(ap);
  if (n < 0) mem_oom(0);
  if (I->node && I->node->name[0] && !strchr(t, '\n')) {
    char *c = NULL;
    if (asprintf(&c, "%-40s # %s (%s)", t, I->node->name, I->node->op_type) < 0) mem_oom(0);
    free(t);
    t = c;
    n = (int)strlen(t);
  }
  VEC_RESERVE(I->text, I->cap, I->len + (size_t)n + 2);
  memcpy(I->text + I->len, t, (size_t)n);
  I->len += (size_t)n;
  I->text[I->len++] = '\n';
  I->text[I->len] = 0;
  int f = diag_add_source(&I->s.diag, I->net_path, NULL, t, (size_t)n);
  I->s.diag.files[f].line_offset = I->lines;
  for (int i = 0; i < n; i++) I->lines += t[i] == '\n';
  I->lines++;
  free(t);
  int before = I->s.diag.nerrors;
  AstNode *root = ast_parse(&I->s.arena, &I->s.diag, f);
  if (root && I->s.diag.nerrors == before) lower_block(I->s.L, root, f);
  if (I->s.diag.nerrors != before) {
    char lb[ONNX_LABEL_MAX];
    diag_note(&I->s.diag, SPAN_NONE, "the statement netrun import wrote for node %s (%s) does not lower: the "
              "node holds a value netrun's op refuses, or netrun import has a bug",
              I->node ? node_label(I, lb) : "''", I->node ? I->node->op_type : "none");
    I->failed = true;
    return false;
  }
  return true;
}

/* ---- values ------------------------------------------------------------------------ */

static Val *val(Imp *I, const char *name) {
  int i = strmap_get(&I->index, name);
  return i < 0 ? NULL : &I->v[i];
}

static Val *new_val(Imp *I, const char *name) {
  strmap_put(I->a, &I->index, name, I->nv);
  return ARENA_PUSH(I->a, I->v, I->nv, I->capv);
}

/* Input k of the node being translated, NULL when left out. */
static Val *in(Imp *I, int k) {
  if (k >= I->node->nin || !I->node->in[k][0]) return NULL;
  return val(I, I->node->in[k]);
}

/* Input k, which the op requires: a stand-in when the node leaves it
 * out (reported). */
static Val *need(Imp *I, int k) {
  /* empty, [0], but with an element behind it, so code that reads the
   * stand-in before the failure stops the import reads nothing wrong */
  static double zero[1];
  static OnnxTensor none = {.name = "", .data_type = ONNX_FLOAT, .rank = 1, .dims = {0}, .numel = 0, .f = zero};
  static Val missing;
  Val *v = in(I, k);
  if (v) return v;
  fail(I, "input %d is missing", k);
  missing = (Val){.var = "_", .c = &none};
  return &missing;
}

static const OnnxAttr *attr(Imp *I, const char *name) {
  for (int i = 0; i < I->node->nattrs; i++)
    if (strcmp(I->node->attrs[i].name, name) == 0) return &I->node->attrs[i];
  return NULL;
}
static int64_t attr_i(Imp *I, const char *name, int64_t dflt) {
  const OnnxAttr *a = attr(I, name);
  return a ? a->i : dflt;
}
static double attr_f(Imp *I, const char *name, double dflt) {
  const OnnxAttr *a = attr(I, name);
  return a ? a->f : dflt;
}

static const char *dtype_of_onnx(int t);
static bool is_float_type(int t) { return t == ONNX_FLOAT || t == ONNX_DOUBLE; }

/* A constant the import computes (a fold, Range, ConstantOfShape): its
 * values charged to --max-memory, 8 bytes each, as external data is;
 * NULL once the error is reported. */
static OnnxTensor *new_const(Imp *I, int type, int rank, const int64_t *dims) {
  int64_t numel = 1;
  for (int i = 0; i < rank; i++)
    if (dims[i] < 0 || __builtin_mul_overflow(numel, dims[i], &numel) || numel > I->const_left / 8) {
      fail(I, "the constants import computes take more than --max-memory (%lld bytes left)",
           (long long)I->const_left);
      return NULL;
    }
  I->const_left -= numel * 8;
  OnnxTensor *t = arena_alloc(I->a, sizeof *t);
  t->name = "";
  t->data_type = type;
  t->rank = rank;
  t->numel = numel;
  for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
  if (is_float_type(type)) t->f = arena_alloc(I->a, (size_t)(t->numel + 1) * sizeof *t->f);
  else t->i = arena_alloc(I->a, (size_t)(t->numel + 1) * sizeof *t->i);
  return t;
}
static double cget(const OnnxTensor *t, int64_t i) { return t->f ? t->f[i] : (double)t->i[i]; }
/* An entry as an integer: a float's truncated, as C casts it, and, where
 * C's cast is undefined (NaN, beyond int64), INT64_MIN, as NumPy's
 * astype gives on x86. */
static int64_t cgeti(const OnnxTensor *t, int64_t i) {
  if (!t->f) return t->i[i];
  double v = t->f[i];
  return v >= -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN;
}

/* Output k of the node: a new variable of the script. */
static const char *out_var(Imp *I, int k) {
  Val *v = new_val(I, I->node->out[k]);
  v->var = valid_name(I, I->node->out[k], true);
  return v->var;
}
/* Output k of the node: a constant. */
static Val *out_const(Imp *I, int k, OnnxTensor *t) {
  Val *v = new_val(I, I->node->out[k]);
  v->c = t;
  return v;
}
/* Output k is input j's value (Identity, Dropout at inference). */
static void out_alias(Imp *I, int k, const Val *j) {
  Val copy = *j;
  *new_val(I, I->node->out[k]) = copy;
}

/* The shortest decimal that reads back as the same f32 (attributes and
 * f32 constants are f32 values). */
static const char *num(Imp *I, double x) {
  char b[40];
  for (int p = 6; p <= 17; p++) {
    snprintf(b, sizeof b, "%.*g", p, x);
    if ((float)strtod(b, NULL) == (float)x) break;
  }
  return arena_strdup(I->a, b);
}

static void print_number(FILE *f, const OnnxTensor *t, int64_t i) {
  if (!t->f) {
    fprintf(f, "%lld", (long long)t->i[i]);
    return;
  }
  double x = t->f[i];
  if (isinf(x)) fprintf(f, "%s3.4028234663852886e38", x < 0 ? "-" : "");
  else if (x == floor(x) && fabs(x) < 1e15) fprintf(f, "%.1f", x);
  else {
    char b[40];
    for (int p = 6; p <= 17; p++) {
      snprintf(b, sizeof b, "%.*g", p, x);
      if ((t->data_type == ONNX_FLOAT ? (double)(float)strtod(b, NULL) == (double)(float)x : strtod(b, NULL) == x))
        break;
    }
    fputs(b, f);
  }
}

static void print_literal(FILE *f, const OnnxTensor *t, int axis, int64_t *at) {
  if (axis == t->rank) {
    print_number(f, t, *at);
    ++*at;
    return;
  }
  fputc('[', f);
  for (int64_t i = 0; i < t->dims[axis]; i++) {
    if (i) fputs(", ", f);
    print_literal(f, t, axis + 1, at);
  }
  fputc(']', f);
}

/* The weights file's tensor `key` (a parameter, a state, a large constant). */
static void add_weight(Imp *I, const char *key, OnnxTensor *t) {
  *ARENA_PUSH(I->a, I->w, I->nw, I->capw) = (struct Weight){key, t};
}

static const char *type_str(Imp *I, const OnnxTensor *t) {
  char dims[256] = "";
  size_t k = 0;
  for (int i = 0; i < t->rank; i++) k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%lld", i ? ", " : "",
                                                          (long long)t->dims[i]);
  const char *dt = is_float_type(t->data_type) ? "" : t->data_type == ONNX_BOOL ? "bool" : "i64";
  return arena_printf(I->a, "%s[%s]", dt, dims);
}

/* Writes the weights file (again, when a constant joined it). */
static bool write_weights(Imp *I) {
  const char **names = arena_alloc(I->a, (size_t)(I->nw + 1) * sizeof *names);
  Tensor **t = arena_alloc(I->a, (size_t)(I->nw + 1) * sizeof *t);
  bool ok = true;
  for (int i = 0; i < I->nw && ok; i++) {
    const OnnxTensor *o = I->w[i].t;
    DType dt = is_float_type(o->data_type) ? DT_F32 : o->data_type == ONNX_BOOL ? DT_BOOL : DT_I64;
    char why[TENSOR_WHY_MAX];
    names[i] = I->w[i].key;
    t[i] = tensor_try_new(dt, o->rank, o->dims, why);
    if (!t[i]) {
      fail(I, "'%s': out of memory: %s", o->name, why);
      ok = false;
      break;
    }
    for (int64_t j = 0; j < o->numel; j++) tensor_set(t[i], j, cget(o, j));
  }
  char err[1400];
  if (ok && !st_write(I->st_path, names, t, I->nw, NULL, 0, err, sizeof err)) {
    fail(I, "%s", err);
    ok = false;
  }
  I->st_written |= ok;
  for (int i = 0; i < I->nw; i++)
    if (t[i]) tensor_unref(t[i]);
  return ok;
}

/* The script's name for value v, making a constant a variable first: a
 * literal when small, else (or when it holds NaN) a state of the weights
 * file. */
static const char *ref(Imp *I, Val *v) {
  if (v->var) return v->var;
  if (v->sym) {
    for (int64_t i = 0; i < v->c->numel; i++)
      if (v->sym[i]) {
        fail(I, "a shape with the dynamic dimension '%s' is used as a value, which netrun import does not support",
             v->sym[i][0] ? v->sym[i] : "?");
        return "_";
      }
  }
  OnnxTensor *t = v->c;
  const char *name = valid_name(I, t->name && t->name[0] ? t->name : "c", true);
  v->var = name;
  bool nan = false;   /* a literal cannot hold NaN: the weights file can */
  for (int64_t i = 0; t->f && i < t->numel && !nan; i++) nan = isnan(t->f[i]);
  if ((t->numel > IMPORT_MAX_LITERAL || nan) && t->data_type != ONNX_BOOL) {
    add_weight(I, name, t);
    if (write_weights(I)) say(I, "state %s : %s = weights(\"%s\")", name, type_str(I, t), I->st_name);
    return name;
  }
  char *lit = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&lit, &n);
  int64_t at = 0;
  print_literal(f, t, 0, &at);
  fclose(f);
  if (t->data_type == ONNX_BOOL) say(I, "%s = cast(%s, dtype=\"bool\")", name, lit);
  else say(I, "%s = %s", name, lit);
  free(lit);
  return name;
}

/* A constant input's integers (an axes or shape input), *n of them;
 * NULL (reported) when it is not a constant. */
static const int64_t *const_ints(Imp *I, Val *v, const char *what, int *n) {
  if (!v || !v->c) {
    fail(I, "its %s must be a constant, known when importing", what);
    return NULL;
  }
  int64_t *o = arena_alloc(I->a, (size_t)(v->c->numel + 1) * sizeof *o);
  for (int64_t i = 0; i < v->c->numel; i++) o[i] = cgeti(v->c, i);
  *n = (int)v->c->numel;
  return o;
}

static const char *ints_str(Imp *I, const int64_t *v, int n) {
  if (n < 0) n = 0;
  char *s = arena_alloc(I->a, (size_t)n * 24 + 3);
  size_t k = 0;
  s[k++] = '[';
  for (int i = 0; i < n; i++) k += (size_t)sprintf(s + k, "%s%lld", i ? ", " : "", (long long)v[i]);
  s[k++] = ']';
  return s;
}

/* The shape netrun gives variable `var` (rank -1 if unknown). */
static const VarDesc *var_desc(Imp *I, const char *var) {
  const VarDesc *d = prog_var(I->s.prog, var);
  if (!d) {   /* a name bound to another's variable: a parameter a function returned */
    lower_export(I->s.L);
    int e = strmap_get(&I->s.prog->export_index, var);
    d = e >= 0 ? prog_var(I->s.prog, I->s.prog->exports[e].var) : NULL;
  }
  return d;
}
static Shape var_shape(Imp *I, const char *var) {
  const VarDesc *d = var_desc(I, var);
  return d ? d->shape : shape_unknown();
}
/* "f32", "i64", "bool" ("f64" under --dtype f64), "?" when unknown */
static const char *var_desc_dtype(Imp *I, const char *var) {
  const VarDesc *d = var_desc(I, var);
  return d ? dtype_name(d->dtype) : "?";
}
static int val_rank(Imp *I, const Val *v) { return v->var ? var_shape(I, v->var).rank : v->c ? v->c->rank : -1; }

/* ---- folding constants ----------------------------------------------------------------
 * A node whose inputs are all constants is computed here when it is one
 * of the ops shape subgraphs are made of.  A shape's entries may be
 * symbols (Shape of a value with a dynamic dimension); arithmetic on a
 * symbol gives an unknown entry (""). */

static bool all_const(Imp *I) {
  for (int k = 0; k < I->node->nin; k++) {
    Val *v = in(I, k);
    if (I->node->in[k][0] && (!v || !v->c || v->param)) return false;
  }
  return I->node->nin > 0;
}

static const char *sym_of(const Val *v, int64_t i) { return v->sym ? v->sym[i] : NULL; }

/* Binary arithmetic and comparisons of constants, NumPy broadcasting of
 * one scalar or equal shapes. */
static bool fold_binary(Imp *I, const char *op) {
  Val *a = need(I, 0), *b = need(I, 1);
  const OnnxTensor *x = a->c, *y = b->c;
  if ((x->numel != y->numel && x->numel != 1 && y->numel != 1) || !x->numel || !y->numel ||
      x->data_type != y->data_type)
    return false;   /* translated as the ops (ONNX wants one type: netrun's lowering checks it) */
  const OnnxTensor *big = x->numel >= y->numel ? x : y;
  bool cmp = strchr("=<>", op[0]) != NULL;
  int type = cmp ? ONNX_BOOL : x->data_type;
  OnnxTensor *t = new_const(I, type, big->rank, big->dims);
  if (!t) return false;
  const char **sym = NULL;
  for (int64_t i = 0; i < t->numel; i++) {
    int64_t ia = x->numel == 1 ? 0 : i, ib = y->numel == 1 ? 0 : i;
    const char *sa = sym_of(a, ia), *sb = sym_of(b, ib);
    if (sa || sb) {
      if (!sym) sym = arena_alloc(I->a, (size_t)t->numel * sizeof *sym);
      /* x * 1, x + 0, x / 1 keep the symbol */
      double other = sa ? cget(y, ib) : cget(x, ia);
      bool keep = !(sa && sb) && ((op[0] == '*' && other == 1) || (op[0] == '+' && other == 0) ||
                                  (op[0] == '-' && sa && other == 0) || (op[0] == '/' && sa && other == 1));
      sym[i] = keep ? (sa ? sa : sb) : "";
      continue;
    }
    double p = cget(x, ia), q = cget(y, ib);
    if (cmp) {
      t->i[i] = op[0] == '=' ? p == q : op[0] == '<' ? p < q : p > q;
    } else if (t->f) {
      t->f[i] = op[0] == '+' ? p + q : op[0] == '-' ? p - q : op[0] == '*' ? p * q : p / q;
    } else {
      int64_t P = cgeti(x, ia), Q = cgeti(y, ib), R = 0;
      bool over = op[0] == '+' ? __builtin_add_overflow(P, Q, &R) : op[0] == '-' ? __builtin_sub_overflow(P, Q, &R)
                : op[0] == '*' ? __builtin_mul_overflow(P, Q, &R) : Q == 0 || (P == INT64_MIN && Q == -1);
      if (over) return false;
      t->i[i] = op[0] == '/' ? P / Q : R;
    }
  }
  out_const(I, 0, t)->sym = sym;
  return true;
}

/* Gather of a constant (a shape's entries), along axis 0 of a 1-D one. */
static bool fold_gather(Imp *I) {
  Val *a = need(I, 0), *b = need(I, 1);
  if (a->c->rank != 1 || attr_i(I, "axis", 0) != 0) return false;
  OnnxTensor *t = new_const(I, a->c->data_type, b->c->rank, b->c->dims);
  if (!t) return false;
  const char **sym = a->sym ? arena_alloc(I->a, (size_t)(t->numel + 1) * sizeof *sym) : NULL;
  for (int64_t i = 0; i < t->numel; i++) {
    int64_t k = cgeti(b->c, i);
    if (k < 0) k += a->c->numel;
    if (k < 0 || k >= a->c->numel) return false;
    if (t->f) t->f[i] = a->c->f[k];
    else t->i[i] = a->c->i[k];
    if (sym) sym[i] = a->sym[k];
  }
  out_const(I, 0, t)->sym = sym;
  return true;
}

/* Concat of 1-D constants. */
static bool fold_concat(Imp *I) {
  int64_t n = 0;
  bool syms = false;
  for (int k = 0; k < I->node->nin; k++) {
    Val *v = need(I, k);
    if (v->c->rank != 1) return false;
    n += v->c->numel;
    syms |= v->sym != NULL;
  }
  OnnxTensor *t = new_const(I, need(I, 0)->c->data_type, 1, &n);
  if (!t) return false;
  const char **sym = syms ? arena_alloc(I->a, (size_t)(n + 1) * sizeof *sym) : NULL;
  int64_t at = 0;
  for (int k = 0; k < I->node->nin; k++) {
    Val *v = need(I, k);
    for (int64_t i = 0; i < v->c->numel; i++, at++) {
      if (t->f) t->f[at] = cget(v->c, i);
      else t->i[at] = cgeti(v->c, i);
      if (sym) sym[at] = sym_of(v, i);
    }
  }
  out_const(I, 0, t)->sym = sym;
  return true;
}

/* Unsqueeze, Squeeze, Reshape, Flatten of a constant: the same entries
 * in another shape. */
static bool fold_reshape(Imp *I, const int64_t *dims, int rank) {
  Val *a = need(I, 0);
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  if (n != a->c->numel || rank > ONNX_MAX_RANK) return false;
  OnnxTensor *t = new_const(I, a->c->data_type, rank, dims);
  if (!t) return false;
  for (int64_t i = 0; i < n; i++) {
    if (t->f) t->f[i] = a->c->f[i];
    else t->i[i] = a->c->i[i];
  }
  out_const(I, 0, t)->sym = a->sym;
  return true;
}

static bool fold_cast(Imp *I) {
  Val *a = need(I, 0);
  int to = (int)attr_i(I, "to", 0);
  if (!onnx_elem_size(to)) return false;
  OnnxTensor *t = new_const(I, to, a->c->rank, a->c->dims);
  if (!t) return false;
  for (int64_t i = 0; i < t->numel; i++) {
    if (t->f) t->f[i] = cget(a->c, i);
    else t->i[i] = to == ONNX_BOOL ? cget(a->c, i) != 0 : cgeti(a->c, i);
  }
  out_const(I, 0, t)->sym = a->sym;
  return true;
}

/* Slice of a 1-D constant. */
static bool fold_slice(Imp *I) {
  Val *a = need(I, 0);
  int n1 = 0, n2 = 0;
  Val *steps = in(I, 4);
  if (a->c->rank != 1 || !in(I, 1) || !in(I, 2) || (steps && steps->c && (steps->c->numel != 1 || cgeti(steps->c, 0) != 1))) return false;
  const int64_t *st = const_ints(I, in(I, 1), "starts", &n1), *en = const_ints(I, in(I, 2), "ends", &n2);
  if (!st || !en || n1 != 1 || n2 != 1) return false;
  int64_t len = a->c->numel, b = st[0] < 0 ? st[0] + len : st[0], e = en[0] < 0 ? en[0] + len : en[0];
  b = b < 0 ? 0 : b > len ? len : b;
  e = e < b ? b : e > len ? len : e;
  int64_t n = e - b;
  OnnxTensor *t = new_const(I, a->c->data_type, 1, &n);
  if (!t) return false;
  const char **sym = a->sym ? arena_alloc(I->a, (size_t)(n + 1) * sizeof *sym) : NULL;
  for (int64_t i = 0; i < n; i++) {
    if (t->f) t->f[i] = a->c->f[b + i];
    else t->i[i] = a->c->i[b + i];
    if (sym) sym[i] = a->sym[b + i];
  }
  out_const(I, 0, t)->sym = sym;
  return true;
}

/* Axes from the attribute (older opsets) or from input k (newer). */
static const int64_t *axes_of(Imp *I, int k, int *n) {
  const OnnxAttr *a = attr(I, "axes");
  if (a) {
    *n = a->nints;
    return a->ints;
  }
  *n = 0;
  if (!in(I, k)) return NULL;
  return const_ints(I, in(I, k), "axes", n);
}

static int norm_axis(int64_t a, int rank) { return (int)(a < 0 ? a + rank : a); }

static bool fold(Imp *I) {
  const char *op = I->node->op_type;
  if (!all_const(I)) return false;
  for (int k = 0; k < I->node->nin && k < 2; k++)   /* a left-out data input is the op's to report */
    if (!I->node->in[k][0]) return false;
  static const char *const bin[][2] = {{"Add", "+"}, {"Sub", "-"}, {"Mul", "*"}, {"Div", "/"},
                                       {"Equal", "="}, {"Less", "<"}, {"Greater", ">"}};
  for (size_t i = 0; i < sizeof bin / sizeof *bin; i++)
    if (strcmp(op, bin[i][0]) == 0) return fold_binary(I, bin[i][1]);
  if (strcmp(op, "Gather") == 0) return fold_gather(I);
  if (strcmp(op, "Concat") == 0) return fold_concat(I);
  if (strcmp(op, "Cast") == 0) return fold_cast(I);
  if (strcmp(op, "Slice") == 0) return fold_slice(I);
  if (strcmp(op, "Identity") == 0) {
    out_alias(I, 0, need(I, 0));
    return true;
  }
  if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0) {
    const OnnxTensor *c = need(I, 0)->c;
    int n = 0;
    const int64_t *ax = axes_of(I, 1, &n);
    int64_t dims[ONNX_MAX_RANK + 1];
    int rank = 0;
    if (op[0] == 'U') {
      int r = c->rank + n, src = 0;
      if (r > ONNX_MAX_RANK) return false;
      for (int i = 0; i < r; i++) {
        bool here = false;
        for (int j = 0; j < n; j++) here |= norm_axis(ax[j], r) == i;
        dims[rank++] = here ? 1 : c->dims[src++];
      }
    } else {
      for (int i = 0; i < c->rank; i++) {
        bool drop = n == 0 && c->dims[i] == 1;
        for (int j = 0; j < n; j++) drop |= norm_axis(ax[j], c->rank) == i;
        if (!drop) dims[rank++] = c->dims[i];
      }
    }
    return fold_reshape(I, dims, rank);
  }
  return false;
}

/* ---- translating nodes -------------------------------------------------------------- */

static const char *R(Imp *I, int k) {
  Val *v = in(I, k);
  if (!v) {
    fail(I, "input %d is missing", k);
    return "_";
  }
  return ref(I, v);
}

static void t_unary(Imp *I, const char *fn) { say(I, "%s = %s(%s)", out_var(I, 0), fn, R(I, 0)); }

static void t_binary(Imp *I, const char *op) {
  const char *a = R(I, 0), *b = R(I, 1);
  say(I, "%s = %s %s %s", out_var(I, 0), a, op, b);
}

/* Gemm: alpha * A' @ B' + beta * C. */
static void t_gemm(Imp *I) {
  const char *a = R(I, 0), *b = R(I, 1);
  double alpha = attr_f(I, "alpha", 1), beta = attr_f(I, "beta", 1);
  char expr[512];
  snprintf(expr, sizeof expr, "matmul(%s, %s, transpose_x=%s, transpose_y=%s)", a, b,
           attr_i(I, "transA", 0) ? "true" : "false", attr_i(I, "transB", 0) ? "true" : "false");
  char scaled[600];
  snprintf(scaled, sizeof scaled, alpha == 1 ? "%s" : "%s * %s", expr, num(I, alpha));
  if (!in(I, 2)) {
    say(I, "%s = %s", out_var(I, 0), scaled);
    return;
  }
  const char *c = R(I, 2);
  if (beta == 1) say(I, "%s = %s + %s", out_var(I, 0), scaled, c);
  else say(I, "%s = %s + %s * %s", out_var(I, 0), scaled, c, num(I, beta));
}

/* The 2-D windows of Conv, ConvTranspose and the pools: pads [t, l, b,
 * r] must be symmetric; auto_pad SAME_* computed from the input's size. */
static bool window(Imp *I, const int64_t *k, const int64_t *st, const int64_t *dil, int64_t pads[2]) {
  Shape x = var_shape(I, R(I, 0));
  const OnnxAttr *ap = attr(I, "auto_pad");
  const char *mode = ap ? ap->s : "NOTSET";
  pads[0] = pads[1] = 0;
  if (strcmp(mode, "SAME_UPPER") == 0 || strcmp(mode, "SAME_LOWER") == 0) {
    for (int i = 0; i < 2; i++) {
      int64_t n = x.rank == 4 ? x.d[2 + i].n : -1;
      if (n < 0) {
        fail(I, "auto_pad=%s needs the input's size, which is dynamic", mode);
        return false;
      }
      int64_t out = (n + st[i] - 1) / st[i], need = (out - 1) * st[i] + dil[i] * (k[i] - 1) + 1 - n;
      if (need < 0) need = 0;
      if (need % 2) {
        fail(I, "auto_pad=%s pads one side more than the other here, which netrun's ops do not", mode);
        return false;
      }
      pads[i] = need / 2;
    }
    return true;
  }
  if (strcmp(mode, "VALID") == 0) return true;
  if (strcmp(mode, "NOTSET") != 0) {
    fail(I, "auto_pad=%s is not supported", mode);
    return false;
  }
  const OnnxAttr *p = attr(I, "pads");
  if (!p) return true;
  if (p->nints != 4 || p->ints[0] != p->ints[2] || p->ints[1] != p->ints[3]) {
    fail(I, "pads=%s: netrun pads each side of an axis alike (2-D, symmetric pads only)", ints_str(I, p->ints, p->nints));
    return false;
  }
  pads[0] = p->ints[0], pads[1] = p->ints[1];
  return true;
}

/* The int list attribute name of a 2-D window op, dflt for each when absent. */
static bool pair(Imp *I, const char *name, int64_t dflt, int64_t v[2]) {
  const OnnxAttr *a = attr(I, name);
  v[0] = v[1] = dflt;
  if (!a) return true;
  if (a->nints != 2) {
    fail(I, "%s has %d values: netrun supports 2-D convolutions and pools only", name, a->nints);
    return false;
  }
  v[0] = a->ints[0], v[1] = a->ints[1];
  return true;
}

static void t_conv(Imp *I, bool transpose) {
  int64_t st[2], dil[2], pads[2], k[2], op[2];
  Shape w = var_shape(I, R(I, 1));
  if (w.rank != 4) {
    fail(I, "the filter has rank %d: netrun supports 2-D convolutions only", w.rank);
    return;
  }
  k[0] = w.d[2].n, k[1] = w.d[3].n;
  if (!pair(I, "strides", 1, st) || !pair(I, "dilations", 1, dil) || !pair(I, "output_padding", 0, op) ||
      !window(I, k, st, dil, pads))
    return;
  if (attr(I, "output_shape")) {
    fail(I, "the attribute output_shape is not supported (give pads and output_padding)");
    return;
  }
  char extra[64] = "";
  if (transpose && (op[0] || op[1])) snprintf(extra, sizeof extra, ", output_padding=[%lld, %lld]",
                                              (long long)op[0], (long long)op[1]);
  const char *x = R(I, 0), *f = R(I, 1);
  const char *bias = in(I, 2) ? R(I, 2) : NULL;
  const char *o = out_var(I, 0);
  char call[768];
  snprintf(call, sizeof call, "%s(%s, %s, strides=[%lld, %lld], paddings=[%lld, %lld], dilations=[%lld, %lld], "
           "groups=%lld%s)", transpose ? "conv2d_transpose" : "conv2d", x, f, (long long)st[0], (long long)st[1],
           (long long)pads[0], (long long)pads[1], (long long)dil[0], (long long)dil[1],
           (long long)attr_i(I, "group", 1), extra);
  if (bias) say(I, "%s = %s + reshape(%s, [-1, 1, 1])", o, call, bias);
  else say(I, "%s = %s", o, call);
}

static void t_pool(Imp *I, const char *fn) {
  int64_t k[2], st[2], dil[2], pads[2];
  if (!pair(I, "kernel_shape", 1, k) || !pair(I, "strides", 1, st) || !pair(I, "dilations", 1, dil)) return;
  if (dil[0] != 1 || dil[1] != 1 || attr_i(I, "ceil_mode", 0) || attr_i(I, "storage_order", 0)) {
    fail(I, "dilations, ceil_mode=1 and storage_order=1 are not supported");
    return;
  }
  if (!window(I, k, st, dil, pads)) return;
  if (fn[0] == 'a' && (pads[0] || pads[1]) && !attr_i(I, "count_include_pad", 0)) {
    fail(I, "count_include_pad=0 with padding is not supported (netrun's avg_pool2d counts the padding)");
    return;
  }
  if (I->node->nout > 1 && I->node->out[1][0]) {
    fail(I, "the Indices output is not supported");
    return;
  }
  const char *x = R(I, 0);
  say(I, "%s = %s(%s, ksize=[%lld, %lld], strides=[%lld, %lld], paddings=[%lld, %lld])", out_var(I, 0), fn, x,
      (long long)k[0], (long long)k[1], (long long)st[0], (long long)st[1], (long long)pads[0], (long long)pads[1]);
}

static void t_batchnorm(Imp *I) {
  if (attr_i(I, "training_mode", 0)) {
    fail(I, "training_mode=1 is not supported (import the graph exported for inference)");
    return;
  }
  const char *x = R(I, 0), *sc = R(I, 1), *b = R(I, 2), *m = R(I, 3), *v = R(I, 4);
  const char *y = out_var(I, 0);
  say(I, "%s, _, _ = batch_norm(%s, %s, %s, %s, %s, false, epsilon=%s)", y, x, sc, b, m, v,
      num(I, attr_f(I, "epsilon", 1e-5)));
}

static void t_layernorm(Imp *I) {
  if (I->node->nout > 1) {
    fail(I, "the Mean and InvStdDev outputs are not supported");
    return;
  }
  const char *x = R(I, 0), *sc = R(I, 1), *b = in(I, 2) ? R(I, 2) : NULL;
  const char *y = out_var(I, 0);
  const char *eps = num(I, attr_f(I, "epsilon", 1e-5));
  if (b) say(I, "%s = layer_norm(%s, %s, %s, begin_norm_axis=%lld, epsilon=%s)", y, x, sc, b,
             (long long)attr_i(I, "axis", -1), eps);
  else say(I, "%s = layer_norm(%s, %s, begin_norm_axis=%lld, epsilon=%s)", y, x, sc,
           (long long)attr_i(I, "axis", -1), eps);
}

static void t_softmax(Imp *I, const char *fn) {
  Val *x = need(I, 0);
  int rank = val_rank(I, x);
  int64_t axis = attr_i(I, "axis", I->m->opset >= 13 ? -1 : 1);
  if (I->m->opset < 13 && norm_axis(axis, rank) != rank - 1) {
    fail(I, "before opset 13, %s over axes %lld.. of a rank-%d input is not supported", I->node->op_type,
         (long long)axis, rank);
    return;
  }
  say(I, "%s = %s(%s, axis=%lld)", out_var(I, 0), fn, R(I, 0), (long long)axis);
}

static void t_reduce(Imp *I, const char *fn) {
  int n = 0;
  const int64_t *ax = axes_of(I, 1, &n);
  if (I->failed) return;
  if (n == 0 && attr_i(I, "noop_with_empty_axes", 0)) {
    out_alias(I, 0, need(I, 0));
    return;
  }
  say(I, "%s = %s(%s, axis=%s, keepdim=%s)", out_var(I, 0), fn, R(I, 0), ints_str(I, ax, n),
      attr_i(I, "keepdims", 1) ? "true" : "false");
}

static void t_global_pool(Imp *I, const char *fn) {
  say(I, "%s = %s(%s, axis=[2, 3], keepdim=true)", out_var(I, 0), fn, R(I, 0));
}

static const char *shape_text(Imp *I, Shape xs) {
  char *o = arena_alloc(I->a, (size_t)xs.rank * 72 + 2);
  size_t l = 0;
  for (int i = 0; i < xs.rank; i++) {
    if (xs.d[i].n >= 0) l += (size_t)sprintf(o + l, "%s%lld", i ? ", " : "", (long long)xs.d[i].n);
    else l += (size_t)sprintf(o + l, "%s%.64s", i ? ", " : "", xs.d[i].sym ? xs.d[i].sym : "?");
  }
  o[l] = 0;
  return o;
}

/* The most pieces a Reshape that splits an axis cuts it into (each piece
 * a statement's output, as Tile's copies). */
#define IMPORT_MAX_PIECES 64

/* A Reshape whose shape holds several sizes known at run time, which
 * netrun's reshape (one -1) cannot take: supported when the shape's
 * first k entries are the input's first k sizes (a dynamic batch and
 * sequence kept) and the rest are static.  The input's other axes merge
 * into one (flatten), which splits into the shape's static sizes by
 * split and stack, one axis at a time. */
static void reshape_dynamic(Imp *I, const char *x, Shape xs, const Val *s, int n) {
  int k = 0;
  for (; k < n && k < xs.rank; k++) {
    int64_t e = cgeti(s->c, k);
    const char *sym = s->sym ? s->sym[k] : NULL;
    if (!sym && e == 0 && !attr_i(I, "allowzero", 0)) continue;   /* copies the input's size */
    Dim xd = xs.d[k];
    bool same = sym ? xd.n < 0 && xd.sym && sym[0] && strcmp(xd.sym, sym) == 0 : xd.n >= 0 && xd.n == e;
    if (!same) break;
  }
  int64_t tail = 1, t[ONNX_MAX_RANK];
  int m = 0, minus = -1;
  bool ok = k < n;
  for (int i = k; i < xs.rank && ok; i++) ok = xs.d[i].n >= 0 && !__builtin_mul_overflow(tail, xs.d[i].n, &tail);
  int64_t known = 1;
  for (int i = k; i < n && ok; i++) {
    t[m] = cgeti(s->c, i);
    if ((s->sym && s->sym[i]) || t[m] < -1 || (t[m] == -1 && minus >= 0) || (t[m] == 0 && !attr_i(I, "allowzero", 0)))
      ok = false;
    else if (t[m] == -1) minus = m;
    else if (__builtin_mul_overflow(known, t[m], &known)) ok = false;
    m++;
  }
  if (ok && minus >= 0) ok = known > 0 && tail % known == 0, t[minus] = ok ? tail / known : 0;
  else if (ok) ok = known == tail;
  for (int i = 0; i < m - 1 && ok; i++) ok = t[i] >= 1 && t[i] <= IMPORT_MAX_PIECES;
  if (!ok) {
    char shown[512] = "";
    size_t l = 0;
    for (int i = 0; i < n && l < sizeof shown; i++) {
      const char *sym = s->sym ? s->sym[i] : NULL;
      if (sym) l += (size_t)snprintf(shown + l, sizeof shown - l, "%s%s", i ? ", " : "", sym[0] ? sym : "?");
      else l += (size_t)snprintf(shown + l, sizeof shown - l, "%s%lld", i ? ", " : "", (long long)cgeti(s->c, i));
    }
    fail(I, "a Reshape to a shape with several sizes known only at run time ([%s] of an input [%s]) is supported only "
         "when they lead the input's shape in the same places and the rest is static, split into at most %d pieces "
         "per axis (netrun's reshape infers one size)", shown, shape_text(I, xs), IMPORT_MAX_PIECES);
    return;
  }
  const char *cur = x;
  if (xs.rank == k) {   /* nothing after them: a new axis of 1 */
    cur = fresh(I, valid_name(I, I->node->out[0], false), "_axis");
    if (!say(I, "%s = unsqueeze(%s, axes=[%d])", cur, x, k)) return;
  } else if (xs.rank - k != 1) {
    cur = fresh(I, valid_name(I, I->node->out[0], false), "_flat");
    if (!say(I, "%s = flatten(%s, start_axis=%d)", cur, x, k)) return;
  }
  for (int i = 0; i < m - 1; i++) {   /* the last axis [t_i * rest] -> [t_i, rest] */
    char *outs = NULL, *list = NULL;
    size_t no = 0, nl = 0;
    FILE *fo = open_memstream(&outs, &no), *fl = open_memstream(&list, &nl);
    for (int64_t j = 0; j < t[i]; j++) {
      const char *piece = valid_name(I, arena_printf(I->a, "%s_piece", I->node->out[0]), true);
      fprintf(fo, "%s%s", j ? ", " : "", piece);
      fprintf(fl, "%s%s", j ? ", " : "", piece);
    }
    fclose(fo);
    fclose(fl);
    const char *next = valid_name(I, arena_printf(I->a, "%s_split%d", I->node->out[0], i), true);
    bool said = say(I, "%s = split(%s, num=%lld, axis=%d)", outs, cur, (long long)t[i], k + i) &&
                say(I, "%s = stack([%s], axis=%d)", next, list, k + i);
    free(outs);
    free(list);
    if (!said) return;
    cur = next;
  }
  out_alias(I, 0, &(Val){.var = cur});
}

/* Reshape to a constant shape: 0 copies the input's size, a symbolic
 * entry (a dynamic batch) becomes -1 when it is the only one unknown. */
static void t_reshape(Imp *I) {
  Val *s = in(I, 1);
  if (!s || !s->c) {
    fail(I, "the shape must be known when importing (a constant, or computed from shapes)");
    return;
  }
  const char *x = R(I, 0);
  Shape xs = var_shape(I, x);
  int n = (int)s->c->numel, unknown = 0;
  int64_t d[ONNX_MAX_RANK];
  if (n > ONNX_MAX_RANK) {
    fail(I, "a shape of rank %d", n);
    return;
  }
  /* A symbol of the input (its batch) named again in the shape cancels
   * out: then a -1 beside it is the input's known sizes over the shape's. */
  bool used[SHAPE_MAX_RANK] = {false};
  int64_t known_in = 1, known_out = 1;
  int syms_in = 0, cancelled = 0, minus = -1;
  bool over = false;
  for (int i = 0; i < xs.rank; i++) {
    if (xs.d[i].n >= 0) over |= __builtin_mul_overflow(known_in, xs.d[i].n, &known_in);
    else syms_in++;
  }
  for (int i = 0; i < n; i++) {
    d[i] = cgeti(s->c, i);
    const char *sym = s->sym ? s->sym[i] : NULL;
    if (!sym && d[i] == 0 && !attr_i(I, "allowzero", 0)) {
      d[i] = i < xs.rank ? xs.d[i].n : -1;
      sym = i < xs.rank && d[i] < 0 ? (xs.d[i].sym ? xs.d[i].sym : "") : NULL;
    }
    if (sym) {
      d[i] = -1;
      for (int j = 0; j < xs.rank && sym[0]; j++)
        if (!used[j] && xs.d[j].n < 0 && xs.d[j].sym && strcmp(xs.d[j].sym, sym) == 0) {
          used[j] = true, cancelled++;
          break;
        }
    } else if (d[i] < 0) {
      minus = i;
    } else {
      over |= __builtin_mul_overflow(known_out, d[i], &known_out);
    }
    unknown += d[i] < 0;
  }
  if (over) {
    fail(I, "a shape of more than 2^63 elements");
    return;
  }
  if (unknown > 1 && minus >= 0 && cancelled == syms_in && unknown == cancelled + 1 && known_out > 0 &&
      known_in % known_out == 0) {
    d[minus] = known_in / known_out;
    unknown--;
  }
  if (unknown > 1) {
    reshape_dynamic(I, x, xs, s, n);
    return;
  }
  say(I, "%s = reshape(%s, %s)", out_var(I, 0), x, ints_str(I, d, n));
}

static void t_flatten(Imp *I) {
  int64_t axis = attr_i(I, "axis", 1);
  const char *x = R(I, 0);
  if (I->failed) return;
  Shape s = var_shape(I, x);
  if (s.rank < 0 || axis < -s.rank || axis > s.rank) {
    fail(I, "axis=%lld is outside its input's %d axes", (long long)axis, s.rank);
    return;
  }
  axis = norm_axis(axis, s.rank);
  if (axis == 1) say(I, "%s = flatten(%s, start_axis=1)", out_var(I, 0), x);
  else if (axis == 0) say(I, "%s = reshape(%s, [1, -1])", out_var(I, 0), x);
  else {
    int64_t lead = 1;
    for (int i = 0; i < axis; i++) lead = s.d[i].n < 0 || lead < 0 ? -1 : lead * s.d[i].n;
    int64_t d[2] = {lead, -1};
    if (lead < 0) d[0] = -1, d[1] = 1;
    for (int i = (int)axis; lead < 0 && i < s.rank; i++) d[1] = s.d[i].n < 0 ? -2 : d[1] * s.d[i].n;
    if (d[0] < 0 && d[1] < 0) {
      fail(I, "Flatten at axis %lld of dynamic sizes on both sides is not supported", (long long)axis);
      return;
    }
    say(I, "%s = reshape(%s, %s)", out_var(I, 0), x, ints_str(I, d, 2));
  }
}

static void t_transpose(Imp *I) {
  const char *x = R(I, 0);
  if (I->failed) return;
  int rank = var_shape(I, x).rank;
  if (!attr(I, "perm") && (rank < 0 || rank > ONNX_MAX_RANK)) {
    fail(I, "the rank of its input is not known, and it has no perm");
    return;
  }
  const OnnxAttr *p = attr(I, "perm");
  int64_t rev[ONNX_MAX_RANK];
  for (int i = 0; i < rank && i < ONNX_MAX_RANK; i++) rev[i] = rank - 1 - i;
  say(I, "%s = transpose(%s, perm=%s)", out_var(I, 0), x, p ? ints_str(I, p->ints, p->nints) : ints_str(I, rev, rank));
}

static void t_squeeze(Imp *I, bool un) {
  int n = 0;
  const int64_t *ax = axes_of(I, 1, &n);
  if (I->failed) return;
  if (un && n == 0) {
    fail(I, "Unsqueeze needs axes");
    return;
  }
  say(I, "%s = %s(%s, axes=%s)", out_var(I, 0), un ? "unsqueeze" : "squeeze", R(I, 0), ints_str(I, ax, n));
}

static void t_concat(Imp *I) {
  char list[4096] = "";
  size_t k = 0;
  for (int i = 0; i < I->node->nin && k < sizeof list; i++)
    k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", R(I, i));
  if (k >= sizeof list) {
    fail(I, "too many inputs");
    return;
  }
  say(I, "%s = concat([%s], axis=%lld)", out_var(I, 0), list, (long long)attr_i(I, "axis", 0));
}

static void t_split(Imp *I) {
  const OnnxAttr *a = attr(I, "split");
  int n = 0;
  const int64_t *sec = a ? a->ints : in(I, 1) ? const_ints(I, in(I, 1), "split", &n) : NULL;
  if (a) n = a->nints;
  if (I->failed) return;
  const char *x = R(I, 0);
  char outs[4096] = "";
  size_t k = 0;
  for (int i = 0; i < I->node->nout && k < sizeof outs; i++)
    k += (size_t)snprintf(outs + k, sizeof outs - k, "%s%s", i ? ", " : "", out_var(I, i));
  if (sec) say(I, "%s = split(%s, sections=%s, axis=%lld)", outs, x, ints_str(I, sec, n),
               (long long)attr_i(I, "axis", 0));
  else say(I, "%s = split(%s, num=%d, axis=%lld)", outs, x, I->node->nout, (long long)attr_i(I, "axis", 0));
}

static void t_slice(Imp *I) {
  int ns = 0, ne = 0, na = 0, nst = 0;
  const int64_t *st = const_ints(I, in(I, 1), "starts", &ns), *en = const_ints(I, in(I, 2), "ends", &ne);
  const int64_t *ax = in(I, 3) ? const_ints(I, in(I, 3), "axes", &na) : NULL;
  const int64_t *step = in(I, 4) ? const_ints(I, in(I, 4), "steps", &nst) : NULL;
  if (I->failed) return;
  for (int i = 0; i < nst; i++)
    if (step[i] != 1) {
      fail(I, "steps other than 1 are not supported");
      return;
    }
  int64_t def[ONNX_MAX_RANK];
  if (!ax) {
    for (int i = 0; i < ns && i < ONNX_MAX_RANK; i++) def[i] = i;
    ax = def, na = ns;
  }
  if (ns != ne || ns != na) {
    fail(I, "starts, ends and axes differ in length");
    return;
  }
  say(I, "%s = slice(%s, axes=%s, starts=%s, ends=%s)", out_var(I, 0), R(I, 0), ints_str(I, ax, na),
      ints_str(I, st, ns), ints_str(I, en, ne));
}

static void t_gather(Imp *I) {
  const char *x = R(I, 0), *idx = R(I, 1);
  say(I, "%s = gather(%s, %s, axis=%lld)", out_var(I, 0), x, idx, (long long)attr_i(I, "axis", 0));
}

static void t_cast(Imp *I) {
  int to = (int)attr_i(I, "to", 0);
  const char *dt = is_float_type(to) ? "f32" : to == ONNX_BOOL ? "bool" : onnx_elem_size(to) ? "i64" : NULL;
  if (!dt) {
    fail(I, "Cast to %s is not supported", onnx_type_name(to));
    return;
  }
  say(I, "%s = cast(%s, dtype=\"%s\")", out_var(I, 0), R(I, 0), dt);
}

static void t_clip(Imp *I) {
  double lo = -3.4028234663852886e38, hi = 3.4028234663852886e38;
  const OnnxAttr *a = attr(I, "min"), *b = attr(I, "max");
  if (a) lo = a->f;
  if (b) hi = b->f;
  for (int k = 1; k <= 2; k++) {
    Val *v = in(I, k);
    if (!v) continue;
    if (!v->c || v->c->numel != 1) {
      fail(I, "its %s must be a constant scalar", k == 1 ? "min" : "max");
      return;
    }
    *(k == 1 ? &lo : &hi) = cget(v->c, 0);
  }
  say(I, "%s = clip(%s, min=%s, max=%s)", out_var(I, 0), R(I, 0), num(I, lo), num(I, hi));
}

static void t_pad(Imp *I) {
  const OnnxAttr *m = attr(I, "mode");
  if (m && strcmp(m->s, "constant") != 0) {
    fail(I, "mode=%s is not supported (constant only)", m->s);
    return;
  }
  int n = 0;
  const OnnxAttr *pa = attr(I, "pads");
  const int64_t *p = pa ? pa->ints : const_ints(I, in(I, 1), "pads", &n);
  if (pa) n = pa->nints;
  if (I->failed) return;
  if (in(I, 3)) {
    fail(I, "the axes input is not supported");
    return;
  }
  double value = attr_f(I, "value", 0);
  Val *cv = in(I, 2);
  if (cv && (!cv->c || cv->c->numel != 1)) {
    fail(I, "its constant_value must be a constant scalar");
    return;
  }
  if (cv) value = cget(cv->c, 0);
  int r = n / 2;
  int64_t q[2 * ONNX_MAX_RANK];
  for (int i = 0; i < r && i < ONNX_MAX_RANK; i++) q[2 * i] = p[i], q[2 * i + 1] = p[r + i];
  say(I, "%s = pad(%s, paddings=%s, value=%s)", out_var(I, 0), R(I, 0), ints_str(I, q, 2 * r), num(I, value));
}

static void t_where(Imp *I) {
  const char *c = R(I, 0), *x = R(I, 1), *y = R(I, 2);
  say(I, "%s = where(%s, %s, %s)", out_var(I, 0), c, x, y);
}

static void t_leaky(Imp *I, const char *fn, double dflt) {
  say(I, "%s = %s(%s, alpha=%s)", out_var(I, 0), fn, R(I, 0), num(I, attr_f(I, "alpha", dflt)));
}

static void t_gelu(Imp *I) {
  const OnnxAttr *a = attr(I, "approximate");
  if (a && strcmp(a->s, "none") != 0) {
    fail(I, "approximate=%s is not supported", a->s);
    return;
  }
  t_unary(I, "gelu");
}

static void t_cumsum(Imp *I) {
  if (attr_i(I, "exclusive", 0) || attr_i(I, "reverse", 0)) {
    fail(I, "exclusive=1 and reverse=1 are not supported");
    return;
  }
  int n = 0;
  const int64_t *ax = const_ints(I, in(I, 1), "axis", &n);
  if (I->failed || n != 1) return;
  say(I, "%s = cumsum(%s, axis=%lld)", out_var(I, 0), R(I, 0), (long long)ax[0]);
}

static void t_dropout(Imp *I) {
  if (I->node->nout > 1 && I->node->out[1][0]) {
    fail(I, "the mask output is not supported");
    return;
  }
  Val *mode = in(I, 2);
  if (mode && (!mode->c || mode->c->numel != 1)) {
    fail(I, "its training_mode must be a constant scalar");
    return;
  }
  if (mode && cget(mode->c, 0) != 0) {
    fail(I, "training_mode must be false");
    return;
  }
  out_alias(I, 0, need(I, 0));
}

/* Constant-making nodes: Constant, Shape, ConstantOfShape, Range. */
static void t_constant(Imp *I) {
  const OnnxAttr *a = I->node->nattrs ? &I->node->attrs[0] : NULL;
  OnnxTensor *t = NULL;
  if (a && a->t && strcmp(a->name, "value") == 0) {
    t = a->t;
  } else if (a && (strcmp(a->name, "value_float") == 0 || strcmp(a->name, "value_int") == 0)) {
    t = new_const(I, a->name[6] == 'f' ? ONNX_FLOAT : ONNX_INT64, 0, NULL);
    if (!t) return;
    if (t->f) t->f[0] = a->f;
    else t->i[0] = a->i;
  } else if (a && (strcmp(a->name, "value_floats") == 0 || strcmp(a->name, "value_ints") == 0)) {
    int64_t n = a->name[6] == 'f' ? a->nfloats : a->nints;
    t = new_const(I, a->name[6] == 'f' ? ONNX_FLOAT : ONNX_INT64, 1, &n);
    if (!t) return;
    for (int64_t i = 0; i < n; i++) {
      if (t->f) t->f[i] = a->floats[i];
      else t->i[i] = a->ints[i];
    }
  } else {
    fail(I, "its attribute %s is not supported", a ? a->name : "(none)");
    return;
  }
  Val *v = out_const(I, 0, t);
  v->c->name = I->node->out[0];
}

static void t_shape(Imp *I) {
  Val *x = in(I, 0);
  if (!x) {
    fail(I, "input 0 is missing");
    return;
  }
  int64_t rank = x->var ? var_shape(I, x->var).rank : x->c->rank;
  if (rank < 0) {
    fail(I, "the rank of '%s' is not known", I->node->in[0]);
    return;
  }
  int64_t b = attr_i(I, "start", 0), e = attr_i(I, "end", rank);
  b = b < 0 ? b + rank : b, e = e < 0 ? e + rank : e;
  b = b < 0 ? 0 : b > rank ? rank : b, e = e < b ? b : e > rank ? rank : e;
  int64_t n = e - b;
  OnnxTensor *t = new_const(I, ONNX_INT64, 1, &n);
  if (!t) return;
  const char **sym = arena_alloc(I->a, (size_t)(n + 1) * sizeof *sym);
  bool any = false;
  for (int64_t i = 0; i < n; i++) {
    if (x->var) {
      Dim d = var_shape(I, x->var).d[b + i];
      t->i[i] = d.n;
      if (d.n < 0) sym[i] = d.sym ? d.sym : "", any = true;
    } else {
      t->i[i] = x->c->dims[b + i];
    }
  }
  out_const(I, 0, t)->sym = any ? sym : NULL;
}

/* ---- shapes with sizes known at run time ---------------------------------------------
 * A tensor whose shape holds symbols (a dynamic batch and sequence) is
 * built by broadcasting: for each symbolic entry, a [1, .., S, .., 1]
 * slice of a variable that has that size (zeros_like of it, so nothing
 * flows back), added to zeros of the static entries. */

/* A variable whose shape has the dimension named sym, and that axis. */
static const char *var_with_dim(Imp *I, const char *prefer, const char *sym, int *axis) {
  for (int k = -1; k < I->nv; k++) {
    const char *var = k < 0 ? prefer : I->v[k].var;
    if (!var || (k >= 0 && I->v[k].param)) continue;
    Shape s = var_shape(I, var);
    for (int j = 0; j < s.rank; j++)
      if (s.d[j].n < 0 && s.d[j].sym && strcmp(s.d[j].sym, sym) == 0) {
        *axis = j;
        return var;
      }
  }
  return NULL;
}

/* The name of a new f32 variable of zeros whose shape has entry i =
 * sym[i] (a symbol) or d[i]; NULL (reported) when a symbol is not the
 * size of any variable (a size computed from sizes, as batch * seq). */
static const char *sym_zeros(Imp *I, const int64_t *d, const char *const *sym, int n, const char *prefer) {
  int64_t stat[ONNX_MAX_RANK] = {0};
  char expr[4096];
  size_t k = 0;
  for (int i = 0; i < n; i++) stat[i] = sym && sym[i] ? 1 : d[i];
  k += (size_t)snprintf(expr + k, sizeof expr - k, "zeros(%s)", ints_str(I, stat, n));
  for (int i = 0; i < n && sym; i++) {
    if (!sym[i]) continue;
    int axis = -1;
    const char *v = sym[i][0] ? var_with_dim(I, prefer, sym[i], &axis) : NULL;
    if (!v) {
      fail(I, "entry %d of its shape is a size computed at run time (not the size '%s' of a value), which netrun "
           "cannot express", i, sym[i][0] ? sym[i] : "?");
      return NULL;
    }
    Shape vs = var_shape(I, v);
    int64_t ax[ONNX_MAX_RANK], zero[ONNX_MAX_RANK], one[ONNX_MAX_RANK], to[ONNX_MAX_RANK];
    int na = 0;
    for (int j = 0; j < vs.rank && j < ONNX_MAX_RANK; j++)
      if (j != axis) ax[na] = j, zero[na] = 0, one[na++] = 1;
    for (int j = 0; j < n; j++) to[j] = j == i ? -1 : 1;
    const char *piece = na ? arena_printf(I->a, "slice(%s, axes=%s, starts=%s, ends=%s)", v, ints_str(I, ax, na),
                                         ints_str(I, zero, na), ints_str(I, one, na)) : v;
    k += (size_t)snprintf(expr + k, sizeof expr - k, " + zeros_like(cast(reshape(%s, %s), dtype=\"f32\"))", piece,
                          ints_str(I, to, n));
  }
  if (k >= sizeof expr) {
    fail(I, "a shape too long to write");
    return NULL;
  }
  const char *o = valid_name(I, arena_printf(I->a, "%s_zeros", I->node->out[0]), true);
  return say(I, "%s = %s", o, expr) ? o : NULL;
}

static void t_constant_of_shape(Imp *I) {
  Val *s = in(I, 0);
  const OnnxAttr *a = attr(I, "value");
  int n = 0;
  const int64_t *d = const_ints(I, s, "shape", &n);
  if (I->failed) return;
  if (n > ONNX_MAX_RANK) {
    fail(I, "a shape of rank %d", n);
    return;
  }
  int type = a && a->t ? a->t->data_type : ONNX_FLOAT;
  double value = a && a->t && a->t->numel ? cget(a->t, 0) : 0;
  int64_t numel = 1;
  for (int i = 0; i < n; i++) {
    if (s->sym && s->sym[i]) continue;
    if (d[i] < 0 || (d[i] && numel > IMPORT_MAX_CONST / d[i])) {
      fail(I, "a shape %s: negative, or more than %lld elements", ints_str(I, d, n), (long long)IMPORT_MAX_CONST);
      return;
    }
    numel *= d[i];
  }
  if (s->sym) {   /* sizes known at run time: a variable */
    const char *z = sym_zeros(I, d, s->sym, n, NULL);
    if (!z) return;
    const char *dt = dtype_of_onnx(type);
    const char *e = value != 0 ? arena_printf(I->a, "%s + %s", z, num(I, value)) : z;
    if (e == z && (!dt || strcmp(dt, "f32") == 0)) out_alias(I, 0, &(Val){.var = z});
    else if (dt && strcmp(dt, "f32") != 0) say(I, "%s = cast(%s, dtype=\"%s\")", out_var(I, 0), e, dt);
    else say(I, "%s = %s", out_var(I, 0), e);
    return;
  }
  OnnxTensor *t = new_const(I, type, n, d);
  if (!t) return;
  double v = value;
  for (int64_t i = 0; i < t->numel; i++) {
    if (t->f) t->f[i] = v;
    else t->i[i] = (int64_t)v;
  }
  out_const(I, 0, t);
}

static void t_range(Imp *I) {
  if (!all_const(I) || need(I, 0)->c->numel != 1 || need(I, 1)->c->numel != 1 || need(I, 2)->c->numel != 1) {
    fail(I, "start, limit and delta must be constant scalars");
    return;
  }
  double s = cget(need(I, 0)->c, 0), l = cget(need(I, 1)->c, 0), d = cget(need(I, 2)->c, 0);
  double q = d != 0 ? ceil((l - s) / d) : -1;
  if (!(q < 1e7) || d == 0) {
    fail(I, "a range of more than 10^7 values, or of step 0");
    return;
  }
  int64_t n = q > 0 ? (int64_t)q : 0;
  OnnxTensor *t = new_const(I, need(I, 0)->c->data_type, 1, &n);
  if (!t) return;
  for (int64_t i = 0; i < n; i++) {
    if (t->f) t->f[i] = s + (double)i * d;
    else t->i[i] = (int64_t)s + i * (int64_t)d;
  }
  out_const(I, 0, t);
}

static void t_expand(Imp *I) {
  int n = 0;
  Val *s = in(I, 1);
  const int64_t *d = const_ints(I, s, "shape", &n);
  if (I->failed) return;
  const char *x = R(I, 0);
  Shape xs = var_shape(I, x);
  int r = n > xs.rank ? n : xs.rank;
  if (n > ONNX_MAX_RANK || r > ONNX_MAX_RANK) {
    fail(I, "a shape of rank %d", r);
    return;
  }
  int64_t o[ONNX_MAX_RANK];
  bool dynamic = s->sym != NULL;
  for (int i = 0; i < r; i++) {   /* NumPy's rule: a 1 takes the other's size */
    int64_t a = i - (r - n) >= 0 ? d[i - (r - n)] : 1, b = i - (r - xs.rank) >= 0 ? xs.d[i - (r - xs.rank)].n : 1;
    o[i] = a == 1 ? b : a;
    dynamic |= o[i] < 0;
  }
  if (dynamic) {   /* x broadcast against zeros of the shape (its 1s stay 1) */
    const char *dt = var_desc_dtype(I, x);
    if (strcmp(dt, "bool") == 0) {
      fail(I, "Expand of a bool tensor to a shape known only at run time is not supported");
      return;
    }
    const char *z = sym_zeros(I, d, s->sym, n, x);
    if (!z) return;
    if (strcmp(dt, "i64") != 0) say(I, "%s = %s + %s", out_var(I, 0), x, z);
    else say(I, "%s = %s + cast(%s, dtype=\"i64\")", out_var(I, 0), x, z);
    return;
  }
  say(I, "%s = broadcast_to(%s, shape=%s)", out_var(I, 0), x, ints_str(I, o, r));
}

static void t_tile(Imp *I) {
  int n = 0;
  const int64_t *rep = const_ints(I, in(I, 1), "repeats", &n);
  if (I->failed) return;
  const char *cur = R(I, 0);
  for (int ax = 0; ax < n; ax++) {
    if (rep[ax] == 1) continue;
    if (rep[ax] < 1 || rep[ax] > 64) {
      fail(I, "repeats of %lld are not supported (1 to 64)", (long long)rep[ax]);
      return;
    }
    char list[4096] = "";
    size_t k = 0;
    for (int64_t j = 0; j < rep[ax]; j++) k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", j ? ", " : "", cur);
    const char *o = valid_name(I, arena_printf(I->a, "%s_tile%d", I->node->out[0], ax), true);
    say(I, "%s = concat([%s], axis=%d)", o, list, ax);
    cur = o;
  }
  out_alias(I, 0, &(Val){.var = cur});
}

static void t_trilu(Imp *I) {
  int64_t k = 0;
  Val *kv = in(I, 1);
  if (kv && (!kv->c || kv->c->numel != 1)) {
    fail(I, "its k must be a constant scalar");
    return;
  }
  if (kv) k = cgeti(kv->c, 0);
  say(I, "%s = %s(%s, diagonal=%lld)", out_var(I, 0), attr_i(I, "upper", 1) ? "triu" : "tril", R(I, 0), (long long)k);
}

static void t_resize(Imp *I) {
  const OnnxAttr *m = attr(I, "mode");
  if (m && strcmp(m->s, "nearest") != 0) {
    fail(I, "mode=%s is not supported (nearest only)", m->s);
    return;
  }
  const OnnxAttr *ct = attr(I, "coordinate_transformation_mode"), *nm = attr(I, "nearest_mode");
  if ((ct && strcmp(ct->s, "asymmetric") != 0) || (nm && strcmp(nm->s, "floor") != 0)) {
    fail(I, "only coordinate_transformation_mode=asymmetric with nearest_mode=floor is supported");
    return;
  }
  Val *sc = in(I, 2);
  int n = 0;
  if (!sc || !sc->c || sc->c->numel != 4) {
    fail(I, "its scales must be 4 constants (sizes are not supported)");
    return;
  }
  (void)n;
  double h = cget(sc->c, 2), w = cget(sc->c, 3);
  if (cget(sc->c, 0) != 1 || cget(sc->c, 1) != 1 || h != floor(h) || w != floor(w) || !(h >= 1 && h <= 1024) ||
      !(w >= 1 && w <= 1024)) {
    fail(I, "scales must be [1, 1, H, W] with integer H and W from 1 to 1024");
    return;
  }
  say(I, "%s = upsample_nearest2d(%s, scale=[%d, %d])", out_var(I, 0), R(I, 0), (int)h, (int)w);
}

/* ---- LSTM and GRU ------------------------------------------------------------------
 * Each direction runs a function of the script's own (written once, before
 * the first node that needs it): a while loop over the time steps of xs
 * [T, B, in] from the states h (and c) [B, H], with the gates' matrices
 * side by side, Wx [in, kH], Wh [H, kH], in ONNX's gate order (LSTM i, o,
 * f, c; GRU z, r, h), and the default activations (sigmoid, tanh).  It
 * returns every step's state [T, B, H] (in the input's time order when it
 * runs in reverse) and the last states.  So the loop differentiates like
 * any script. */

enum { RNN_LSTM = 0, RNN_GRU0 = 2, RNN_GRU1 = 4 };   /* + 1: in reverse; GRU0/1: linear_before_reset */

static const char *rnn_fn(Imp *I, int kind) {
  static const char *const names[] = {"onnx_lstm", "onnx_lstm_reverse", "onnx_gru", "onnx_gru_reverse",
                                      "onnx_gru_lbr", "onnx_gru_lbr_reverse"};
  if (I->rnn_written & (1u << kind)) return I->rnn_names[kind];
  bool rev = kind & 1, lstm = kind < RNN_GRU0;
  const char *name = valid_name(I, names[kind], true);
  const char *step = rev ? "xs[steps - 1 - t]" : "xs[t]";
  const char *grow = rev ? "hs = concat([unsqueeze(h, axes=[0]), hs], axis=0)"
                         : "hs = concat([hs, unsqueeze(h, axes=[0])], axis=0)";
  const char *all = rev ? "slice(hs, axes=[0], starts=[0], ends=[-1])" : "hs[1:]";
  const char *head = rev ? "\n# (in reverse: from the last step to the first; hs in the input's time order)" : "";
  bool ok;
  if (lstm)
    ok = say(I, "# ONNX's LSTM over xs [T, B, in] from h, c [B, H]: Wx [in, 4H], Wh [H, 4H], b [4H] with the gates\n"
             "# in ONNX's order i, o, f, c; every step's h [T, B, H], the last h and c.%s\n"
             "def %s(xs, h, c, Wx, Wh, b) {\n"
             "  hs = unsqueeze(h, axes=[0])\n"
             "  t = 0\n"
             "  steps = cast(sum(ones_like(xs[:, 0, 0])), dtype=\"i64\")\n"
             "  while t < steps {\n"
             "    gi, go, gf, gc = split(%s @ Wx + h @ Wh + b, num=4, axis=1)\n"
             "    c = sigmoid(gf) * c + sigmoid(gi) * tanh(gc)\n"
             "    h = sigmoid(go) * tanh(c)\n"
             "    %s\n"
             "    t = t + 1\n"
             "  }\n"
             "  return %s, h, c\n"
             "}", head, name, step, grow, all);
  else
    ok = say(I, "# ONNX's GRU (linear_before_reset=%d) over xs [T, B, in] from h [B, H]: Wx [in, 3H], Wh [H, 3H],\n"
             "# bx, bh [3H] with the gates in ONNX's order z, r, h; every step's h [T, B, H] and the last.%s\n"
             "def %s(xs, h, Wx, Wh, bx, bh) {\n"
             "  hs = unsqueeze(h, axes=[0])\n"
             "  Whz, Whr, Whh = split(Wh, num=3, axis=1)\n"
             "  bhz, bhr, bhh = split(bh, num=3, axis=0)\n"
             "  t = 0\n"
             "  steps = cast(sum(ones_like(xs[:, 0, 0])), dtype=\"i64\")\n"
             "  while t < steps {\n"
             "    xz, xr, xh = split(%s @ Wx + bx, num=3, axis=1)\n"
             "    z = sigmoid(xz + h @ Whz + bhz)\n"
             "    r = sigmoid(xr + h @ Whr + bhr)\n"
             "    n = tanh(xh + %s)\n"
             "    h = (1.0 - z) * n + z * h\n"
             "    %s\n"
             "    t = t + 1\n"
             "  }\n"
             "  return %s, h\n"
             "}", kind >= RNN_GRU1, head, name, step, kind >= RNN_GRU1 ? "r * (h @ Whh + bhh)" : "(r * h) @ Whh + bhh",
             grow, all);
  if (!ok) return NULL;
  I->rnn_written |= 1u << kind;
  I->rnn_names[kind] = name;
  return name;
}

/* The attributes of LSTM and GRU netrun does not import, refused by name. */
static bool rnn_attrs(Imp *I, bool lstm, int dirs) {
  const OnnxAttr *a = attr(I, "activations");
  if (a) {
    static const char *const want[] = {"Sigmoid", "Tanh", "Tanh"};
    int per = lstm ? 3 : 2;
    bool same = a->nstrings == per * dirs;
    for (int i = 0; i < a->nstrings && same; i++) same = strcmp(a->strings[i], want[i % per]) == 0;
    if (!same) {
      fail(I, "activations other than the defaults (%s) are not supported", lstm ? "Sigmoid, Tanh, Tanh" : "Sigmoid, Tanh");
      return false;
    }
  }
  static const char *const refused[] = {"activation_alpha", "activation_beta", "clip"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
    if (attr(I, refused[i])) {
      fail(I, "the attribute %s is not supported", refused[i]);
      return false;
    }
  if (attr_i(I, "input_forget", 0)) {
    fail(I, "input_forget=1 is not supported");
    return false;
  }
  if (lstm && in(I, 7)) {
    fail(I, "peepholes (the input P) are not supported");
    return false;
  }
  return true;
}

static void t_rnn(Imp *I, bool lstm) {
  const OnnxAttr *da = attr(I, "direction");
  const char *dir = da ? da->s : "forward";
  int dirs = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
  if (dirs == 1 && strcmp(dir, "forward") != 0 && strcmp(dir, "reverse") != 0) {
    fail(I, "direction=%s is not supported (forward, reverse, bidirectional)", dir);
    return;
  }
  int64_t layout = attr_i(I, "layout", 0), H = attr_i(I, "hidden_size", -1);
  int gates = lstm ? 4 : 3;
  if (layout != 0 && layout != 1) {
    fail(I, "layout=%lld is not supported (0 or 1)", (long long)layout);
    return;
  }
  if (!rnn_attrs(I, lstm, dirs)) return;
  const char *x = R(I, 0), *W = R(I, 1), *Rm = R(I, 2);
  if (I->failed) return;
  Shape xs = var_shape(I, x), ws = var_shape(I, W), rs = var_shape(I, Rm);
  if (xs.rank != 3 || ws.rank != 3 || rs.rank != 3 || ws.d[0].n != dirs || ws.d[1].n < 0 || ws.d[1].n % gates ||
      (H >= 0 && ws.d[1].n != gates * H) || rs.d[1].n != ws.d[1].n || rs.d[2].n != ws.d[1].n / gates ||
      ws.d[2].n < 0 || ws.d[2].n != xs.d[2].n) {
    fail(I, "X must be [T, B, in] (layout 0) or [B, T, in] (layout 1), W [%d, %dH, in] and R [%d, %dH, H] with "
         "H = hidden_size", dirs, gates, dirs, gates);
    return;
  }
  H = ws.d[1].n / gates;
  int64_t nin = ws.d[2].n;
  Val *sl = in(I, 4);
  if (sl) {   /* sequence_lens: every sequence as long as X */
    int64_t T = xs.d[layout ? 1 : 0].n;
    bool uniform = sl->c && T >= 0;
    for (int64_t i = 0; uniform && i < sl->c->numel; i++) uniform = cgeti(sl->c, i) == T;
    if (!uniform) {
      fail(I, "sequence_lens must be a constant whose every entry is X's length (sequences of different lengths "
           "are not supported)");
      return;
    }
  }
  const char *b = in(I, 3) ? R(I, 3) : NULL, *h0 = in(I, 5) ? R(I, 5) : NULL, *c0 = lstm && in(I, 6) ? R(I, 6) : NULL;
  if (I->failed) return;
  const char *o = I->node->out[0];
  const char *tmp = valid_name(I, arena_printf(I->a, "%s_rnn", I->node->nout && o[0] ? o : I->node->name), true);
  const char *X = x;
  if (layout) {
    X = fresh(I, tmp, "_x");
    if (!say(I, "%s = transpose(%s, perm=[1, 0, 2])", X, x)) return;
  }
  if (layout && h0) {
    const char *t = fresh(I, tmp, "_h0");
    if (!say(I, "%s = transpose(%s, perm=[1, 0, 2])", t, h0)) return;
    h0 = t;
  }
  if (layout && c0) {
    const char *t = fresh(I, tmp, "_c0");
    if (!say(I, "%s = transpose(%s, perm=[1, 0, 2])", t, c0)) return;
    c0 = t;
  }
  const char *ys[2], *hs[2], *cs[2] = {NULL, NULL};
  for (int d = 0; d < dirs; d++) {
    bool rev = d == 1 || strcmp(dir, "reverse") == 0;
    int kind = (lstm ? RNN_LSTM : attr_i(I, "linear_before_reset", 0) ? RNN_GRU1 : RNN_GRU0) + rev;
    const char *fn = rnn_fn(I, kind);
    if (!fn) return;
    const char *p = arena_printf(I->a, "%s%d", tmp, d);
    const char *wx = fresh(I, p, "_Wx"), *wh = fresh(I, p, "_Wh"), *hi = fresh(I, p, "_h0");
    const char *ci = lstm ? fresh(I, p, "_c0") : NULL;
    const char *zero = arena_printf(I->a, "%s[0] @ zeros([%lld, %lld])", X, (long long)nin, (long long)H);
    bool ok = say(I, "%s = transpose(%s[%d], perm=[1, 0])", wx, W, d) &&
              say(I, "%s = transpose(%s[%d], perm=[1, 0])", wh, Rm, d) &&
              say(I, "%s = %s", hi, h0 ? arena_printf(I->a, "%s[%d]", h0, d) : zero);
    if (lstm) ok = ok && say(I, "%s = %s", ci, c0 ? arena_printf(I->a, "%s[%d]", c0, d) : zero);
    const char *bw = b ? arena_printf(I->a, "slice(%s[%d], axes=[0], starts=[0], ends=[%lld])", b, d, (long long)(gates * H))
                       : arena_printf(I->a, "zeros([%lld])", (long long)(gates * H));
    const char *br = b ? arena_printf(I->a, "slice(%s[%d], axes=[0], starts=[%lld], ends=[%lld])", b, d,
                                      (long long)(gates * H), (long long)(2 * gates * H))
                       : bw;
    ys[d] = fresh(I, p, "_ys");
    hs[d] = fresh(I, p, "_h");
    if (lstm) cs[d] = fresh(I, p, "_c");
    if (lstm)
      ok = ok && say(I, "%s, %s, %s = %s(%s, %s, %s, %s, %s, %s + %s)", ys[d], hs[d], cs[d], fn, X, hi, ci, wx, wh, bw, br);
    else
      ok = ok && say(I, "%s, %s = %s(%s, %s, %s, %s, %s, %s)", ys[d], hs[d], fn, X, hi, wx, wh, bw, br);
    if (!ok) return;
  }
  /* Y [T, D, B, H] (layout 1: [B, T, D, H]); Y_h, Y_c [D, B, H] ([B, D, H]) */
  for (int k = 0; k < I->node->nout && k < (lstm ? 3 : 2); k++) {
    if (!I->node->out[k][0]) continue;
    const char **part = k == 0 ? ys : k == 1 ? hs : cs;
    int axis = k == 0 ? 1 : 0;
    const char *e = dirs == 1 ? arena_printf(I->a, "unsqueeze(%s, axes=[%d])", part[0], axis)
                              : arena_printf(I->a, "concat([unsqueeze(%s, axes=[%d]), unsqueeze(%s, axes=[%d])], axis=%d)",
                                             part[0], axis, part[1], axis, axis);
    if (layout) e = arena_printf(I->a, "transpose(%s, perm=%s)", e, k == 0 ? "[2, 0, 1, 3]" : "[1, 0, 2]");
    say(I, "%s = %s", out_var(I, k), e);
  }
}

/* ---- the table of ops ----------------------------------------------------------------- */

typedef struct Rule {
  const char *type;
  void (*fn)(Imp *I, const char *arg);
  const char *arg;
} Rule;

#define FIXED(name, call) \
  static void name(Imp *I, const char *arg) { (void)arg; call; }
FIXED(r_gemm, t_gemm(I))
FIXED(r_conv, t_conv(I, false))
FIXED(r_convt, t_conv(I, true))
FIXED(r_bn, t_batchnorm(I))
FIXED(r_ln, t_layernorm(I))
FIXED(r_reshape, t_reshape(I))
FIXED(r_flatten, t_flatten(I))
FIXED(r_transpose, t_transpose(I))
FIXED(r_squeeze, t_squeeze(I, false))
FIXED(r_unsqueeze, t_squeeze(I, true))
FIXED(r_concat, t_concat(I))
FIXED(r_split, t_split(I))
FIXED(r_slice, t_slice(I))
FIXED(r_gather, t_gather(I))
FIXED(r_cast, t_cast(I))
FIXED(r_clip, t_clip(I))
FIXED(r_pad, t_pad(I))
FIXED(r_where, t_where(I))
FIXED(r_gelu, t_gelu(I))
FIXED(r_cumsum, t_cumsum(I))
FIXED(r_dropout, t_dropout(I))
FIXED(r_identity, out_alias(I, 0, need(I, 0)))
FIXED(r_constant, t_constant(I))
FIXED(r_shape, t_shape(I))
FIXED(r_cos, t_constant_of_shape(I))
FIXED(r_range, t_range(I))
FIXED(r_expand, t_expand(I))
FIXED(r_tile, t_tile(I))
FIXED(r_resize, t_resize(I))
FIXED(r_trilu, t_trilu(I))
FIXED(r_lstm, t_rnn(I, true))
FIXED(r_gru, t_rnn(I, false))
static void r_unary(Imp *I, const char *fn) { t_unary(I, fn); }
static void r_binary(Imp *I, const char *op) { t_binary(I, op); }
static void r_pool(Imp *I, const char *fn) { t_pool(I, fn); }
static void r_gpool(Imp *I, const char *fn) { t_global_pool(I, fn); }
static void r_softmax(Imp *I, const char *fn) { t_softmax(I, fn); }
static void r_reduce(Imp *I, const char *fn) { t_reduce(I, fn); }
static void r_leaky(Imp *I, const char *fn) { t_leaky(I, fn, fn[0] == 'l' ? 0.01 : 1.0); }

static const Rule rules[] = {
    {"Abs", r_unary, "abs"}, {"Add", r_binary, "+"}, {"And", r_binary, "and"},
    {"AveragePool", r_pool, "avg_pool2d"}, {"BatchNormalization", r_bn, NULL}, {"Cast", r_cast, NULL},
    {"Clip", r_clip, NULL}, {"Concat", r_concat, NULL}, {"Constant", r_constant, NULL},
    {"ConstantOfShape", r_cos, NULL}, {"Conv", r_conv, NULL}, {"ConvTranspose", r_convt, NULL},
    {"CumSum", r_cumsum, NULL}, {"Div", r_binary, "/"}, {"Dropout", r_dropout, NULL}, {"Elu", r_leaky, "elu"},
    {"Equal", r_binary, "=="}, {"Erf", r_unary, "erf"}, {"Exp", r_unary, "exp"}, {"Expand", r_expand, NULL}, {"Flatten", r_flatten, NULL},
    {"GRU", r_gru, NULL}, {"Gather", r_gather, NULL}, {"Gelu", r_gelu, NULL}, {"Gemm", r_gemm, NULL},
    {"GlobalAveragePool", r_gpool, "mean"}, {"GlobalMaxPool", r_gpool, "max"}, {"Greater", r_binary, ">"},
    {"Identity", r_identity, NULL}, {"LayerNormalization", r_ln, NULL}, {"LeakyRelu", r_leaky, "leaky_relu"},
    {"LSTM", r_lstm, NULL}, {"Less", r_binary, "<"}, {"Log", r_unary, "log"}, {"LogSoftmax", r_softmax, "log_softmax"},
    {"MatMul", r_binary, "@"}, {"MaxPool", r_pool, "max_pool2d"}, {"Mul", r_binary, "*"},
    {"Neg", r_unary, "neg"}, {"Not", r_unary, "logical_not"}, {"Or", r_binary, "or"}, {"Pad", r_pad, NULL},
    {"Pow", r_binary, "**"}, {"Range", r_range, NULL}, {"ReduceMax", r_reduce, "max"},
    {"ReduceMean", r_reduce, "mean"}, {"ReduceMin", r_reduce, "min"}, {"ReduceSum", r_reduce, "sum"},
    {"Relu", r_unary, "relu"}, {"Reshape", r_reshape, NULL}, {"Resize", r_resize, NULL},
    {"Shape", r_shape, NULL}, {"Sigmoid", r_unary, "sigmoid"}, {"Slice", r_slice, NULL},
    {"Softmax", r_softmax, "softmax"}, {"Split", r_split, NULL}, {"Sqrt", r_unary, "sqrt"},
    {"Squeeze", r_squeeze, NULL}, {"Sub", r_binary, "-"}, {"Tanh", r_unary, "tanh"}, {"Tile", r_tile, NULL},
    {"Transpose", r_transpose, NULL}, {"Trilu", r_trilu, NULL}, {"Unsqueeze", r_unsqueeze, NULL}, {"Where", r_where, NULL},
};

static const Rule *find_rule(const OnnxNode *n) {
  if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0) return NULL;
  for (size_t i = 0; i < sizeof rules / sizeof *rules; i++)
    if (strcmp(rules[i].type, n->op_type) == 0) return &rules[i];
  return NULL;
}

/* Every node whose op netrun does not import, in one error: each op
 * type, then the names of its nodes. */
static bool check_ops(Imp *I) {
  char list[2048] = "", lb[ONNX_LABEL_MAX];
  size_t k = 0;
  int bad = 0;
  for (int i = 0; i < I->g->nnodes; i++) {
    const OnnxNode *n = &I->g->nodes[i];
    bool first = !find_rule(n);
    for (int j = 0; j < i && first; j++) first = strcmp(I->g->nodes[j].op_type, n->op_type) != 0;
    if (!first) continue;
    k += (size_t)snprintf(list + k, sizeof list - k, "%s%s%s%s (nodes", bad++ ? "; " : "", n->domain,
                          n->domain[0] ? "." : "", n->op_type);
    for (int j = i, shown = 0; j < I->g->nnodes && k < sizeof list - 1; j++)
      if (strcmp(I->g->nodes[j].op_type, n->op_type) == 0 && shown++ < 8)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s %s", shown > 1 ? "," : "",
                              onnx_node_label(I->g, j, lb, sizeof lb));
    if (k < sizeof list - 1) k += (size_t)snprintf(list + k, sizeof list - k, ")");
    if (k >= sizeof list) k = sizeof list - 1;
  }
  if (!bad) return true;
  diag_error(&I->s.diag, SPAN_NONE, "%s: the model uses %d op type%s netrun cannot import (opset %lld): %s",
             I->model, bad, bad == 1 ? "" : "s", (long long)I->m->opset, list);
  return false;
}

/* ---- declarations ------------------------------------------------------------------------ */

/* A float initializer with at least one dimension is a parameter (a state
 * when a BatchNormalization reads it as its running mean or variance);
 * the others are constants. */
static bool is_param(const OnnxTensor *t) { return is_float_type(t->data_type) && t->rank >= 1; }

static bool is_bn_stat(const OnnxGraph *g, const char *name) {
  for (int i = 0; i < g->nnodes; i++)
    if (strcmp(g->nodes[i].op_type, "BatchNormalization") == 0)
      for (int k = 3; k < 5 && k < g->nodes[i].nin; k++)
        if (strcmp(g->nodes[i].in[k], name) == 0) return true;
  return false;
}

/* A scope of the parameters' names: enc.linear1 holds enc.linear1.bias. */
typedef struct PScope {
  const char *seg;
  int parent;
  int first_child, next;       /* -1 ends */
  int *params, np, capp;       /* indices into I->w */
  const char *fn;
} PScope;

typedef struct Params {
  PScope *s;
  int n, cap;
  const char **alias;          /* per weight: the top-level name it is bound to */
  const char **leaf;           /* per weight: its name inside its scope's function */
  bool *state;
} Params;

static int scope_child(Imp *I, Params *P, int parent, const char *seg) {
  for (int c = 0; parent < 0 && c < P->n; c++)
    if (P->s[c].parent < 0 && strcmp(P->s[c].seg, seg) == 0) return c;
  for (int c = parent < 0 ? -1 : P->s[parent].first_child; c >= 0; c = P->s[c].next)
    if (strcmp(P->s[c].seg, seg) == 0) return c;
  PScope *s = ARENA_PUSH(I->a, P->s, P->n, P->cap);
  *s = (PScope){.seg = seg, .parent = parent, .first_child = -1, .next = -1};
  if (parent >= 0) {   /* children in the order their names first appear */
    int *at = &P->s[parent].first_child;
    while (*at >= 0) at = &P->s[*at].next;
    *at = P->n - 1;
  }
  return P->n - 1;
}

/* The names every call of scope k's function returns, in order. */
static void scope_returns(Imp *I, Params *P, int k, FILE *f, bool leaf_names, int *count) {
  for (int i = 0; i < P->s[k].np; i++)
    fprintf(f, "%s%s", (*count)++ ? ", " : "", leaf_names ? P->leaf[P->s[k].params[i]] : P->alias[P->s[k].params[i]]);
  for (int c = P->s[k].first_child; c >= 0; c = P->s[c].next) scope_returns(I, P, c, f, false, count);
}

/* Writes scope k's function, after its children's: it declares the
 * scope's parameters and calls each child with scope="SEG". */
static void scope_def(Imp *I, Params *P, int k) {
  for (int c = P->s[k].first_child; c >= 0; c = P->s[c].next) scope_def(I, P, c);
  char *body = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&body, &n);
  fprintf(f, "def %s() {\n", P->s[k].fn);
  for (int i = 0; i < P->s[k].np; i++) {
    int w = P->s[k].params[i];
    fprintf(f, "  %s %s : %s = weights(\"%s\")\n", P->state[w] ? "state" : "param", P->leaf[w],
            type_str(I, I->w[w].t), I->st_name);
  }
  for (int c = P->s[k].first_child; c >= 0; c = P->s[c].next) {
    int cnt = 0;
    fputs("  ", f);
    scope_returns(I, P, c, f, false, &cnt);
    fprintf(f, " = %s(scope=\"%s\")\n", P->s[c].fn, P->s[c].seg);
  }
  int cnt = 0;
  fputs("  return ", f);
  scope_returns(I, P, k, f, true, &cnt);
  fputs("\n}", f);
  fclose(f);
  say(I, "%s", body);
  free(body);
}

/* The initializers: parameters and states (in the weights file, declared
 * in functions that rebuild their dotted names' scopes), and constants. */
static void declare_params(Imp *I) {
  const OnnxGraph *g = I->g;
  Params P = {0};
  StrMap used_init = {0};
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i].nin; k++) strmap_put(I->a, &used_init, g->nodes[i].in[k], 1);
  int nparams = 0;
  for (int i = 0; i < g->ninits; i++) nparams += is_param(&g->inits[i]);
  P.alias = arena_alloc(I->a, (size_t)(nparams + g->ninits + 1) * sizeof *P.alias);
  P.leaf = arena_alloc(I->a, (size_t)(nparams + g->ninits + 1) * sizeof *P.leaf);
  P.state = arena_alloc(I->a, (size_t)(nparams + g->ninits + 1) * sizeof *P.state);
  for (int i = 0; i < g->ninits; i++) {
    OnnxTensor *t = &g->inits[i];
    if (val(I, t->name)) continue;   /* an input of the same name (a default) comes first */
    Val *v = new_val(I, t->name);
    v->c = t;
    if (strmap_get(&used_init, t->name) < 0 || !is_param(t)) continue;
    /* the scopes of a dotted name, each segment made valid */
    int parent = -1;
    char *copy = arena_strdup(I->a, t->name), *dot, *seg = copy;
    char key[1024] = "";
    size_t kl = 0;
    while ((dot = strchr(seg, '.')) != NULL) {
      *dot = 0;
      const char *s = valid_name(I, seg, false);
      kl += (size_t)snprintf(key + kl, sizeof key - kl, "%s.", s);
      parent = parent < 0 ? scope_child(I, &P, -1, s) : scope_child(I, &P, parent, s);
      seg = dot + 1;
    }
    int w = I->nw;
    const char *leaf = valid_name(I, seg, false);
    snprintf(key + kl, sizeof key - kl, "%s", leaf);
    P.leaf[w] = leaf;
    P.state[w] = is_bn_stat(g, t->name);
    v->var = P.alias[w] = valid_name(I, parent < 0 ? leaf : key, true);
    v->param = true;
    add_weight(I, parent < 0 ? v->var : arena_strdup(I->a, key), t);
    if (parent >= 0) *ARENA_PUSH(I->a, P.s[parent].params, P.s[parent].np, P.s[parent].capp) = w;
    else P.leaf[w] = NULL;   /* declared at the top level */
  }
  if (!write_weights(I)) return;
  for (int w = 0; w < I->nw; w++)
    if (!P.leaf[w]) say(I, "%s %s : %s = weights(\"%s\")", P.state[w] ? "state" : "param", P.alias[w],
                        type_str(I, I->w[w].t), I->st_name);
  for (int k = 0; k < P.n; k++) {
    char path[1024] = "";
    size_t l = 0;
    int chain[64], nc = 0;
    for (int c = k; c >= 0 && nc < 64; c = P.s[c].parent) chain[nc++] = c;
    for (int j = nc - 1; j >= 0; j--) l += (size_t)snprintf(path + l, sizeof path - l, "%s_", P.s[chain[j]].seg);
    snprintf(path + (l < sizeof path ? l : sizeof path - 1), sizeof path - (l < sizeof path ? l : sizeof path - 1),
             "params");
    P.s[k].fn = valid_name(I, path, true);
  }
  for (int k = 0; k < P.n; k++) {
    if (P.s[k].parent >= 0) continue;
    scope_def(I, &P, k);
    char *line = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&line, &n);
    int cnt = 0;
    scope_returns(I, &P, k, f, false, &cnt);
    fprintf(f, " = %s(scope=\"%s\")", P.s[k].fn, P.s[k].seg);
    fclose(f);
    say(I, "%s", line);
    free(line);
  }
}

static const char *dtype_of_onnx(int t) {
  return t == ONNX_FLOAT ? "f32" : t == ONNX_DOUBLE ? "f64" : t == ONNX_BOOL ? "bool"
         : onnx_elem_size(t) && t != ONNX_FLOAT ? "i64" : NULL;
}

/* input NAME : TYPE[DIMS] per graph input that no initializer gives. */
static void declare_inputs(Imp *I) {
  StrMap inits = {0};
  for (int i = 0; i < I->g->ninits; i++) strmap_put(I->a, &inits, I->g->inits[i].name, 1);
  for (int i = 0; i < I->g->ninputs; i++) {
    const OnnxValue *x = &I->g->inputs[i];
    if (strmap_get(&inits, x->name) >= 0) continue;
    const char *dt = dtype_of_onnx(x->elem_type);
    if (!dt || x->rank < 0) {
      fail(I, "input '%s': %s", x->name, !dt ? "its element type is not supported" : "its shape is not given");
      return;
    }
    char dims[512] = "";
    size_t k = 0;
    for (int d = 0; d < x->rank; d++) {
      const char *sym = x->syms[d];
      if (sym && !sym[0]) sym = I->nanon++ ? arena_printf(I->a, "B%d", I->nanon) : "B";
      if (sym) sym = valid_name(I, sym, false);
      if (sym) k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%s", d ? ", " : "", sym);
      else k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%lld", d ? ", " : "", (long long)x->dims[d]);
    }
    Val *v = new_val(I, x->name);
    v->var = valid_name(I, x->name, true);
    if (strcmp(v->var, x->name) != 0) say(I, "%-40s # the ONNX input '%s'", arena_printf(I->a, "input %s : %s[%s]", v->var, dt, dims), x->name);
    else say(I, "input %s : %s[%s]", v->var, dt, dims);
  }
}


/* ---- the verb ------------------------------------------------------------------------------ */

/* The graph's outputs under their own (valid) names. */
static void name_outputs(Imp *I) {
  I->node = NULL;
  for (int i = 0; i < I->g->noutputs && !I->failed; i++) {
    const char *name = I->g->outputs[i].name;
    Val *v = val(I, name);
    if (!v) {
      fail(I, "the output '%s' is not computed by any node", name);
      return;
    }
    const char *want = valid_name(I, name, false);
    const char *have = ref(I, v);
    if (I->failed) return;
    if (strcmp(have, want) != 0 && strmap_get(&I->used, want) < 0) {
      strmap_put(I->a, &I->used, want, 1);
      say(I, "%s = %s", want, have);
      have = want;
    }   /* else the name is another value's: the output keeps the unique one it has */
    if (strcmp(have, name) != 0) say(I, "# the ONNX output '%s' is %s", name, have);
  }
}

static bool translate(Imp *I, const char *model) {
  const OnnxGraph *g = I->g;
  if (I->m->opset && (I->m->opset < 7 || I->m->opset > 21)) {
    fail(I, "opset %lld is not supported (7 to 21)", (long long)I->m->opset);
    return false;
  }
  if (!check_ops(I)) return false;
  int *order = arena_alloc(I->a, (size_t)(g->nnodes + 1) * sizeof *order);
  char why[1024];
  if (!onnx_sort(I->a, g, order, why, sizeof why)) {
    fail(I, "%s", why);
    return false;
  }
  const char *base = strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
  say(I, "# %s: imported from %s (ONNX opset %lld) by netrun import;\n# the weights are %s (netrun(1), IMPORT)",
      strrchr(I->net_path, '/') ? strrchr(I->net_path, '/') + 1 : I->net_path, base, (long long)I->m->opset,
      I->st_name);
  declare_inputs(I);
  declare_params(I);
  for (int i = 0; i < g->nnodes && !I->failed; i++) {
    I->node = &g->nodes[order[i]];
    for (int k = 0; k < I->node->nin; k++)
      if (I->node->in[k][0] && !val(I, I->node->in[k])) fail(I, "'%s' is not defined", I->node->in[k]);
    if (!I->failed && I->node->nout == 0) fail(I, "it has no output");
    if (I->failed || fold(I) || I->failed) continue;   /* a fold that failed said why */
    const Rule *r = find_rule(I->node);
    if (r) r->fn(I, r->arg);
  }
  if (!I->failed) name_outputs(I);
  return !I->failed;
}

typedef struct ImportArgs {
  const char *in, *out;
  bool force;
  int64_t max_memory;          /* what external data may take, and apart the constants folded */
} ImportArgs;

enum { I_OUT = 1, I_FORCE, I_MAX_MEMORY };
static const Option import_options[] = {
    {"-o", OPTION_VALUE, "FILE", "a FILE.net", I_OUT, 0},
    {"--output", OPTION_VALUE, "FILE", "a FILE.net", I_OUT, 0},
    {"--force", OPTION_FLAG, NULL, NULL, I_FORCE, 0},
    {"--max-memory", OPTION_VALUE, "SIZE", "a size, e.g. 512M or 4G", I_MAX_MEMORY, 0},
    {NULL, 0, NULL, NULL, 0, 0},
};

static int import_args(int argc, char **argv, ImportArgs *a, Arena *arena) {
  memset(a, 0, sizeof *a);
  a->max_memory = (int64_t)IMPORT_MAX_FILE;
  OptionParser p;
  option_init(&p, argc, argv, (const Option *const[]){import_options, NULL}, "");
  for (int id; (id = option_next(&p)) != OPTION_END;) {
    if (id == OPTION_ERROR) return EXIT_USAGE;
    if (id == OPTION_ARG && a->in) return diag_usage("import takes one MODEL.onnx, got a second: '%s'", p.value);
    if (id == OPTION_ARG) a->in = p.value;
    else if (id == I_OUT) a->out = p.value;
    else if (id == I_MAX_MEMORY && !mem_parse_size(p.value, &a->max_memory)) return option_bad(&p);
    else if (id == I_FORCE) a->force = true;
  }
  if (!a->in) return diag_usage("%s", "import needs a MODEL.onnx");
  if (!a->out) {   /* MODEL.net in the current folder */
    const char *b = strrchr(a->in, '/') ? strrchr(a->in, '/') + 1 : a->in;
    size_t n = strlen(b);
    if (n > 5 && strcmp(b + n - 5, ".onnx") == 0) n -= 5;
    a->out = arena_printf(arena, "%.*s.net", (int)n, b);
  }
  size_t n = strlen(a->out);
  if (n < 5 || strcmp(a->out + n - 4, ".net") != 0)
    return diag_usage("import: the script's name must end in .net, got '%s'", a->out);
  return 0;
}

int cmd_import(int argc, char **argv) {
  Imp I = {0};
  session_init(&I.s);
  I.a = &I.s.arena;
  ImportArgs a;
  int rc = import_args(argc, argv, &a, I.a);
  if (rc) {
    session_free(&I.s);
    return rc;
  }
  size_t n = strlen(a.out);
  I.net_path = a.out;
  I.st_path = arena_printf(I.a, "%.*s.safetensors", (int)(n - 4), a.out);
  const char *slash = strrchr(I.st_path, '/');
  I.st_name = slash ? slash + 1 : I.st_path;
  struct stat st;
  for (int i = 0; i < 2 && !a.force; i++) {
    const char *p = i ? I.st_path : I.net_path;
    if (stat(p, &st) == 0) {
      diag_error(NULL, SPAN_NONE, "%s exists; give --force to overwrite it", p);
      session_free(&I.s);
      return EXIT_SCRIPT;
    }
  }
  OnnxModel m;
  char why[1400];
  bool ok = onnx_read(I.a, a.in, IMPORT_MAX_FILE, a.max_memory, &m, why, sizeof why);
  if (!ok) diag_error(NULL, SPAN_NONE, "%s", why);
  I.m = &m;
  I.g = m.graph;
  I.model = a.in;
  I.const_left = a.max_memory;
  ok = ok && translate(&I, a.in);
  if (ok) {
    AtomicFile f;
    char err[1400];
    ok = file_begin(&f, I.net_path, err, sizeof err) &&
         file_commit(&f, file_write_all(f.fd, I.text, I.len), err, sizeof err);
    if (!ok) diag_error(NULL, SPAN_NONE, "%s", err);
  }
  if (!ok && I.st_written) unlink(I.st_path);
  mem_free(I.text);
  session_free(&I.s);
  return ok ? 0 : EXIT_SCRIPT;
}
