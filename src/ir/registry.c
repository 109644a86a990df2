/* registry.c — the operator registry, attribute defaults, and the helpers
 * that ops' shape inference is written with. */
#include "ir/registry.h"

#include "ir/names.h"
#include "ir/tensor.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct Registry {
  Arena arena;             /* parsed attribute defaults */
  OpProto **protos;        /* sorted by type */
  int n, cap;
};

static Registry *default_registry;

static int cmp_proto(const void *a, const void *b) {
  return strcmp((*(OpProto *const *)a)->type, (*(OpProto *const *)b)->type);
}

static int find_index(const Registry *r, const char *type) {
  int lo = 0, hi = r->n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    int c = strcmp(r->protos[mid]->type, type);
    if (c == 0) return mid;
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return -(lo + 1);
}

static void prepare(Registry *r, OpProto *p) {
  p->nin = p->nout = p->nattrs = 0;
  while (p->nin < REG_MAX_SLOTS && p->in[p->nin].name) p->nin++;
  while (p->nout < REG_MAX_SLOTS && p->out[p->nout].name) p->nout++;
  while (p->nattrs < REG_MAX_ATTRS && p->attrs[p->nattrs].name) {
    AttrProto *a = &p->attrs[p->nattrs];
    p->has_dflt[p->nattrs] = false;
    if (a->dflt) {
      if (!reg_parse_attr(&r->arena, a->type, a->dflt, &p->dflt[p->nattrs])) {
        fprintf(stderr, "netrun: internal error: bad default '%s' for %s.%s\n",
                a->dflt, p->type, a->name);
        abort();
      }
      p->has_dflt[p->nattrs] = true;
    }
    p->nattrs++;
  }
}

bool reg_add(Registry *r, OpProto *proto) {
  int at = find_index(r, proto->type);
  if (at >= 0) return false;
  at = -at - 1;
  prepare(r, proto);
  VEC_RESERVE(r->protos, r->cap, r->n + 1);
  memmove(&r->protos[at + 1], &r->protos[at], (size_t)(r->n - at) * sizeof *r->protos);
  r->protos[at] = proto;
  r->n++;
  return true;
}

bool reg_remove(Registry *r, const char *type) {
  int at = find_index(r, type);
  if (at < 0) return false;
  memmove(&r->protos[at], &r->protos[at + 1], (size_t)(r->n - at - 1) * sizeof *r->protos);
  r->n--;
  return true;
}

Registry *reg_default(void) {
  if (default_registry) return default_registry;
  Registry *r = mem_calloc(1, sizeof *r);
  arena_init(&r->arena);
  for (OpProto *const *t = reg_builtin_tables; *t; t++)
    for (OpProto *p = *t; p->type; p++) {
      prepare(r, p);
      VEC_RESERVE(r->protos, r->cap, r->n + 1);
      r->protos[r->n++] = p;
    }
  qsort(r->protos, (size_t)r->n, sizeof *r->protos, cmp_proto);
  for (int i = 1; i < r->n; i++)
    if (strcmp(r->protos[i - 1]->type, r->protos[i]->type) == 0) {
      fprintf(stderr, "netrun: internal error: op '%s' registered twice\n", r->protos[i]->type);
      abort();
    }
  default_registry = r;
  return r;
}

Registry *reg_new(void) {
  Registry *r = mem_calloc(1, sizeof *r);
  arena_init(&r->arena);
  return r;
}

void reg_free(Registry *r) {
  if (!r) return;
  arena_free(&r->arena);
  mem_free(r->protos);
  mem_free(r);
}

void reg_free_default(void) {
  reg_free(default_registry);
  default_registry = NULL;
}

const OpProto *reg_find_op(const Program *p, const char *type) {
  const OpProto *op = p->user_ops ? reg_find(p->user_ops, type) : NULL;
  return op ? op : reg_find(reg_default(), type);
}

void reg_release_user_ops(Program *p) {
  reg_free(p->user_ops);
  p->user_ops = NULL;
}

const OpProto *reg_find(const Registry *r, const char *type) {
  int i = find_index(r, type);
  return i >= 0 ? r->protos[i] : NULL;
}

const OpProto *const *reg_all(const Registry *r, int *n) {
  *n = r->n;
  return (const OpProto *const *)r->protos;
}

int reg_slot_index(const SlotProto *slots, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(slots[i].name, name) == 0) return i;
  return -1;
}

int reg_attr_index(const OpProto *p, const char *name) {
  for (int i = 0; i < p->nattrs; i++)
    if (strcmp(p->attrs[i].name, name) == 0) return i;
  return -1;
}

void reg_coerce_attr(Arena *a, const OpProto *p, int attr, AttrValue *v) {
  int n = p->attrs[attr].repeat;
  if (n <= 1 || v->type != ATTR_INTS || v->n != 1) return;
  int64_t one = v->u.ints[0];
  v->u.ints = arena_alloc(a, sizeof(int64_t) * (size_t)n);
  for (int i = 0; i < n; i++) v->u.ints[i] = one;
  v->n = n;
}

const char *reg_check_attr(const OpProto *p, int attr, const AttrValue *v) {
  if (p->attrs[attr].check) return p->attrs[attr].check(v);
  return p->check_attr ? p->check_attr(p, attr, v) : NULL;
}

/* ---- attribute constants in script syntax ------------------------------ */

static const char *skip_ws(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

static bool parse_scalar(Arena *a, AttrType t, const char **sp, AttrValue *out) {
  const char *s = skip_ws(*sp);
  char *end = NULL;
  out->type = t;
  switch (t) {
  case ATTR_INT:
    errno = 0;
    out->u.i = strtoll(s, &end, 10);
    if (end == s || errno) return false;
    break;
  case ATTR_FLOAT:
    out->u.f = strtod(s, &end);
    if (end == s) return false;
    break;
  case ATTR_BOOL:
    if (strncmp(s, "true", 4) == 0) out->u.i = 1, end = (char *)s + 4;
    else if (strncmp(s, "false", 5) == 0) out->u.i = 0, end = (char *)s + 5;
    else return false;
    break;
  case ATTR_DTYPE: {
    size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789");
    char buf[8];
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, s, n);
    buf[n] = 0;
    DType dt;
    if (!dtype_parse(buf, &dt)) return false;
    out->u.i = dt;
    end = (char *)s + n;
    break;
  }
  case ATTR_STRING: {
    if (*s == '"') {
      const char *q = strchr(s + 1, '"');
      if (!q) return false;
      out->u.s = arena_strndup(a, s + 1, (size_t)(q - s - 1));
      end = (char *)q + 1;
    } else {
      size_t n = strcspn(s, ",]");
      out->u.s = arena_strndup(a, s, n);
      end = (char *)s + n;
    }
    break;
  }
  default:
    return false;
  }
  *sp = end;
  return true;
}

bool reg_parse_attr(Arena *a, AttrType t, const char *text, AttrValue *out) {
  memset(out, 0, sizeof *out);
  const char *s = skip_ws(text);
  if (t == ATTR_INTS || t == ATTR_FLOATS || t == ATTR_STRINGS) {
    AttrType et = t == ATTR_INTS ? ATTR_INT : t == ATTR_FLOATS ? ATTR_FLOAT : ATTR_STRING;
    if (*s != '[') return false;
    s++;
    int n = 0;
    AttrValue items[64];
    s = skip_ws(s);
    while (*s && *s != ']') {
      if (n == 64 || !parse_scalar(a, et, &s, &items[n])) return false;
      n++;
      s = skip_ws(s);
      if (*s == ',') s = skip_ws(s + 1);
    }
    if (*s != ']') return false;
    out->type = t;
    out->n = n;
    if (t == ATTR_INTS) {
      out->u.ints = arena_alloc(a, sizeof(int64_t) * (size_t)(n ? n : 1));
      for (int i = 0; i < n; i++) out->u.ints[i] = items[i].u.i;
    } else if (t == ATTR_FLOATS) {
      out->u.floats = arena_alloc(a, sizeof(double) * (size_t)(n ? n : 1));
      for (int i = 0; i < n; i++) out->u.floats[i] = items[i].u.f;
    } else {
      out->u.strings = arena_alloc(a, sizeof(char *) * (size_t)(n ? n : 1));
      for (int i = 0; i < n; i++) out->u.strings[i] = items[i].u.s;
    }
    return true;
  }
  if (t == ATTR_BLOCK) {
    out->type = t;
    out->u.i = strtoll(s, NULL, 10);
    return true;
  }
  if (!parse_scalar(a, t, &s, out)) return false;
  return *skip_ws(s) == 0;
}

/* ---- inference ----------------------------------------------------------- */

bool reg_infer(Program *p, Block *b, OpDesc *op) {
  const OpProto *proto = reg_find_op(p, op->type);
  InferCtx c = {.prog = p, .block = b, .op = op, .proto = proto};
  if (!proto) return false;
  /* An input whose type is unknown comes from an earlier error: stay quiet
   * rather than report the same problem again. */
  for (int i = 0; i < op->nin; i++)
    for (int j = 0; j < op->in[i].n; j++) {
      if (name_is_empty(op->in[i].args[j])) continue;   /* a gradient nobody needs */
      const VarDesc *v = prog_var(p, op->in[i].args[j]);
      if (!v || v->dtype == DT_UNKNOWN) return true;
    }
  return reg_infer_run(&c);
}

/* ---- f64 ------------------------------------------------------------------
 * The ops whose kernels compute in f64 say so (OP_F64, netrun-ops(7), DATA
 * TYPES).  Any other op given an f64 value fails at inference, never
 * computing it in f32 behind the user's back. */
bool reg_has_f64(const OpProto *p) { return p->flags & (OP_F64 | OP_CONTROL | OP_ANY_FLOAT); }

static bool any_f64_input(InferCtx *c) {
  for (int s = 0; s < c->proto->nin; s++)
    for (int i = 0; !(c->proto->in[s].flags & SLOT_AS_IS) && i < reg_infer_count(c, c->proto->in[s].name); i++) {
      const VarDesc *v = reg_infer_in(c, c->proto->in[s].name, i);
      if (v && v->dtype == DT_F64) return true;
    }
  return false;
}

/* An op given an f64 input computes in f64: its f32 outputs become f64
 * (NumPy's promotion), except an op converting to a dtype it is told and
 * one whose inference knows (control ops, ops scripts define). */
static void promote_outputs(InferCtx *c) {
  if ((c->proto->flags & (OP_CONTROL | OP_ANY_FLOAT)) || reg_attr_index(c->proto, "dtype") >= 0) return;
  for (int s = 0; s < c->proto->nout; s++)
    for (int i = 0; i < reg_infer_out_count(c, c->proto->out[s].name); i++) {
      VarDesc *v = NULL;
      if (c->rt) v = &c->rt->out[s][i];
      else {
        Slot *sl = op_output(c->op, c->proto->out[s].name);
        v = sl && i < sl->n ? prog_var(c->prog, sl->args[i]) : NULL;
      }
      if (v && v->dtype == DT_F32) v->dtype = DT_F64;
    }
}

bool reg_infer_run(InferCtx *c) {
  bool f64 = any_f64_input(c);
  if (f64 && !reg_has_f64(c->proto))
    return reg_infer_fail(c, "has no f64 kernel yet; cast its inputs to f32 (netrun-ops(7), DATA TYPES)");
  if (c->proto->infer && (!c->proto->infer(c) || c->failed)) return false;
  if (f64) promote_outputs(c);
  return true;
}

/* How many vars the op's input slot (or output slot, if out) `slot` holds. */
static int vars_in_slot(InferCtx *c, bool out, const char *slot) {
  if (c->rt) {
    int k = out ? reg_slot_index(c->proto->out, c->proto->nout, slot)
                : reg_slot_index(c->proto->in, c->proto->nin, slot);
    return k < 0 ? 0 : out ? c->rt->nout[k] : c->rt->nin[k];
  }
  return slot_count(out ? op_output(c->op, slot) : op_input(c->op, slot));
}

int reg_infer_count(InferCtx *c, const char *slot) { return vars_in_slot(c, false, slot); }

const VarDesc *reg_infer_in(InferCtx *c, const char *slot, int i) {
  if (c->rt) {
    int k = reg_slot_index(c->proto->in, c->proto->nin, slot);
    return k >= 0 && i < c->rt->nin[k] ? c->rt->in[k][i] : NULL;
  }
  Slot *s = op_input(c->op, slot);
  if (!s || i >= s->n) return NULL;
  return prog_var(c->prog, s->args[i]);
}

int reg_infer_out_count(InferCtx *c, const char *slot) { return vars_in_slot(c, true, slot); }

void reg_infer_set(InferCtx *c, const char *slot, int i, DType t, const Shape *sh) {
  if (c->rt) {
    int k = reg_slot_index(c->proto->out, c->proto->nout, slot);
    if (k >= 0 && i < c->rt->nout[k]) {
      c->rt->out[k][i].dtype = t;
      c->rt->out[k][i].shape = *sh;
    }
    return;
  }
  Slot *s = op_output(c->op, slot);
  if (!s || i >= s->n) return;
  VarDesc *v = prog_var(c->prog, s->args[i]);
  if (!v) return;
  v->dtype = t;
  v->shape = *sh;
}

bool reg_infer_like(InferCtx *c, const char *const (*pairs)[2], int n) {
  for (int k = 0; k < n; k++) {
    if (reg_infer_out_count(c, pairs[k][0]) == 0) continue;
    const VarDesc *v = reg_infer_in(c, pairs[k][1], 0);
    if (!v) return reg_infer_fail(c, "input %s is missing", pairs[k][1]);
    reg_infer_set(c, pairs[k][0], 0, v->dtype, &v->shape);
  }
  return true;
}

bool reg_infer_fail(InferCtx *c, const char *fmt, ...) {
  c->failed = true;
  char msg[1024];
  DIAG_FORMAT(msg, sizeof msg, fmt);
  if (c->quiet) {
    if (!c->error) c->error = arena_strdup(c->prog->arena, msg);
    return false;
  }
  diag_error(c->prog->diag, c->op->span, "%s: %s", c->op->type, msg);
  return false;
}

const AttrValue *reg_op_attr(const OpProto *p, const OpDesc *op, const char *name) {
  const Attr *a = op_attr(op, name);
  if (a) return &a->v;
  int i = p ? reg_attr_index(p, name) : -1;
  return i >= 0 && p->has_dflt[i] ? &p->dflt[i] : NULL;
}

void reg_fill_defaults(Program *prog, OpDesc *op, const OpProto *p) {
  for (int i = 0; i < p->nattrs; i++)
    if (p->has_dflt[i] && !op_attr(op, p->attrs[i].name)) op_set_attr(prog, op, p->attrs[i].name, p->dflt[i]);
}

int64_t reg_attr_i64(const AttrValue *v) {
  if (!v) return 0;
  return v->type == ATTR_FLOAT ? tensor_to_i64(v->u.f) : v->u.i;
}

double reg_attr_f64(const AttrValue *v) {
  if (!v) return 0;
  return v->type == ATTR_FLOAT ? v->u.f : (double)v->u.i;
}

const AttrValue *reg_infer_attr(InferCtx *c, const char *name) { return reg_op_attr(c->proto, c->op, name); }
int64_t reg_infer_attr_i(InferCtx *c, const char *name) { return reg_attr_i64(reg_infer_attr(c, name)); }
double reg_infer_attr_f(InferCtx *c, const char *name) { return reg_attr_f64(reg_infer_attr(c, name)); }

bool reg_infer_attr_b(InferCtx *c, const char *name) { return reg_infer_attr_i(c, name) != 0; }

bool reg_infer_broadcast(InferCtx *c, const Shape *a, const Shape *b, Shape *out) {
  if (a->rank < 0 || b->rank < 0) {
    *out = shape_unknown();
    return true;
  }
  int r = a->rank > b->rank ? a->rank : b->rank;
  Shape s = shape_scalar();
  s.rank = r;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->rank), ib = i - (r - b->rank);
    Dim x = ia >= 0 ? a->d[ia] : dim_n(1);
    Dim y = ib >= 0 ? b->d[ib] : dim_n(1);
    if (x.n == 1) s.d[i] = y;
    else if (y.n == 1) s.d[i] = x;
    else if (dim_eq(x, y)) s.d[i] = x;
    else if (x.n >= 0 && y.n >= 0) {
      char sa[128], sb[128];
      return reg_infer_fail(c, "shapes %s and %s do not broadcast (dimension %d: %lld vs %lld)",
                            shape_str(a, sa, sizeof sa), shape_str(b, sb, sizeof sb), i,
                            (long long)x.n, (long long)y.n);
    } else if (x.n >= 0) s.d[i] = x;   /* a symbol meets a size: checked at run time */
    else if (y.n >= 0) s.d[i] = y;
    else s.d[i] = dim_unknown();
  }
  *out = s;
  return true;
}

bool reg_infer_axis(InferCtx *c, int64_t axis, int rank, int *out) {
  if (rank < 0) {
    *out = (int)axis;
    return true;
  }
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= (rank ? rank : 1))
    return reg_infer_fail(c, "axis %lld is out of range for a tensor of rank %d", (long long)axis, rank);
  *out = (int)a;
  return true;
}

const VarDesc *reg_infer_input(InferCtx *c, const char *slot) {
  const VarDesc *v = reg_infer_in(c, slot, 0);
  if (!v) reg_infer_fail(c, "input %s is missing", slot);
  return v;
}

bool reg_infer_same_as(InferCtx *c, const char *out, const char *in) {
  const VarDesc *x = reg_infer_input(c, in);
  if (!x) return false;
  reg_infer_set(c, out, 0, x->dtype, &x->shape);
  return true;
}

bool reg_infer_need_float(InferCtx *c, const char *slot, const VarDesc *v) {
  if (v->dtype != DT_F32 && v->dtype != DT_I64 && v->dtype != DT_F64)
    return reg_infer_fail(c, "%s must be f32 (or i64), got %s", slot, dtype_name(v->dtype));
  return true;
}

bool reg_infer_norm_axis(InferCtx *c, const char *attr, int64_t a, const char *slot, const Shape *s, int *out) {
  int64_t k = a < 0 ? a + s->rank : a;
  *out = 0;
  if (k < 0 || k >= s->rank) {
    char buf[128];
    return reg_infer_fail(c, "%s %lld is out of range for %s of shape %s", attr, (long long)a, slot,
                          shape_str(s, buf, sizeof buf));
  }
  *out = (int)k;
  return true;
}

DType reg_infer_promote(DType a, DType b) {
  if (a == DT_UNKNOWN || b == DT_UNKNOWN) return DT_UNKNOWN;
  if (a == DT_F64 || b == DT_F64) return DT_F64;
  if (a == DT_F32 || b == DT_F32) return DT_F32;
  return DT_I64;
}

bool reg_infer_list(InferCtx *c, const char *slot, const char *out, InferList *l) {
  int n = reg_infer_count(c, slot);
  if (n == 0) return reg_infer_fail(c, "%s must hold at least one tensor", slot);
  *l = (InferList){.n = n, .t = DT_UNKNOWN, .iref = -1, .ref = NULL, .all_ranked = true};
  for (int i = 0; i < n; i++) {
    const VarDesc *v = reg_infer_in(c, slot, i);
    if (!v) return reg_infer_fail(c, "input %s[%d] is missing", slot, i);
    l->t = i == 0 || v->dtype == l->t ? v->dtype : reg_infer_promote(l->t, v->dtype);
    if (v->shape.rank < 0) l->all_ranked = false;
    else if (l->iref < 0) l->iref = i, l->ref = v;
  }
  if (!l->ref) {
    Shape u = shape_unknown();
    reg_infer_set(c, out, 0, l->t, &u);
  }
  return true;
}

/* ---- shared attribute checkers -------------------------------------------- */

const char *reg_check_positive(const AttrValue *v) {
  switch (v->type) {
  case ATTR_INT: case ATTR_I64: return v->u.i > 0 ? NULL : "must be positive";
  case ATTR_FLOAT: return v->u.f > 0 ? NULL : "must be positive";
  case ATTR_INTS:
    for (int i = 0; i < v->n; i++)
      if (v->u.ints[i] <= 0) return "must hold positive values";
    return NULL;
  default: return NULL;
  }
}

const char *reg_check_nonnegative(const AttrValue *v) {
  switch (v->type) {
  case ATTR_INT: case ATTR_I64: return v->u.i >= 0 ? NULL : "must not be negative";
  case ATTR_FLOAT: return v->u.f >= 0 ? NULL : "must not be negative";
  case ATTR_INTS:
    for (int i = 0; i < v->n; i++)
      if (v->u.ints[i] < 0) return "must not hold negative values";
    return NULL;
  default: return NULL;
  }
}

const char *reg_check_probability(const AttrValue *v) {
  double p = v->type == ATTR_FLOAT ? v->u.f : (double)v->u.i;
  return p >= 0 && p < 1 ? NULL : "must be in [0, 1)";
}

const char *reg_check_float_dtype(const AttrValue *v) {
  return v->u.i == DT_F32 ? NULL : "must be f32";
}

/* ---- describing ops (netrun ops, the REPL's :ops) ------------------------------- */

static const char *grad_kind_name(const OpProto *p) {
  switch (p->grad_kind) {
  case GRAD_NONE: return "none";
  case GRAD_COMPOSITE: return "composite";
  case GRAD_DEDICATED: return "dedicated";
  }
  return "?";
}

static void slot_list(char *buf, size_t n, const SlotProto *slots, int count) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < count && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s%s", i ? ", " : "", slots[i].name,
                          slots[i].flags & SLOT_LIST ? "[]" : "");
}

int reg_callable_names(const OpProto *const *ops, int n, const char **names) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!(ops[i]->flags & OP_INTERNAL)) names[k++] = ops[i]->type;
  return k;
}

/* Whether an op has a kernel (control flow's run the op's blocks). */
static const char *kernel_name(const OpProto *p, bool table) {
  return p->kernel ? "yes" : table ? "no" : "not yet";
}

/* The signature comes last, so a long one (adam's) cannot push the other
 * columns out of line; the first column is as wide as the longest name. */
void reg_print_table(FILE *f, const OpProto *const *ops, int n) {
  int w = 24;
  for (int i = 0; i < n; i++)
    if ((int)strlen(ops[i]->type) > w) w = (int)strlen(ops[i]->type);
  fprintf(f, "%-*s %-10s %-8s %s\n", w, "op", "gradient", "kernel", "inputs -> outputs");
  for (int i = 0; i < n; i++) {
    char in[128], out[128];
    slot_list(in, sizeof in, ops[i]->in, ops[i]->nin);
    slot_list(out, sizeof out, ops[i]->out, ops[i]->nout);
    unsigned fl = ops[i]->flags;
    fprintf(f, "%-*s %-10s %-8s %s -> %s%s\n", w, ops[i]->type, grad_kind_name(ops[i]), kernel_name(ops[i], true), in,
            out, fl & OP_AFTER_BACKWARD ? "  (internal; made after every backward, which never meets it)"
                 : fl & OP_INTERNAL ? "  (internal)" : "");
  }
}

void reg_call_signature(FILE *f, const OpProto *p) {
  fprintf(f, "%s(", p->type);
  for (int i = 0; i < p->nin; i++) fprintf(f, "%s%s%s", i ? ", " : "", p->in[i].name, p->in[i].flags & SLOT_LIST ? "[]" : "");
  for (int i = 0; i < p->nattrs; i++) {
    fprintf(f, "%s%s", i || p->nin ? ", " : "", p->attrs[i].name);
    if (p->has_dflt[i]) {
      fputc('=', f);
      attr_print(f, &p->dflt[i]);
    }
  }
  fputc(')', f);
}

void reg_describe(FILE *f, const OpProto *p) {
  fprintf(f, "%s: %s\n", p->type, p->doc);
  fprintf(f, "inputs:\n");
  if (!p->nin) fprintf(f, "  (none)\n");
  for (int i = 0; i < p->nin; i++)
    fprintf(f, "  %-12s %s%s%s%s\n", p->in[i].name, p->in[i].doc ? p->in[i].doc : "",
            p->in[i].flags & SLOT_LIST ? " (list)" : "", p->in[i].flags & SLOT_OPTIONAL ? " (optional)" : "",
            p->in[i].flags & SLOT_NO_GRAD ? " (no gradient)" : "");
  fprintf(f, "outputs:\n");
  if (!p->nout) fprintf(f, "  (none)\n");
  for (int i = 0; i < p->nout; i++)
    fprintf(f, "  %-12s %s%s\n", p->out[i].name, p->out[i].doc ? p->out[i].doc : "",
            p->out[i].flags & SLOT_LIST ? " (list)" : "");
  fprintf(f, "attributes:\n");
  if (!p->nattrs) fprintf(f, "  (none)\n");
  for (int i = 0; i < p->nattrs; i++) {
    fprintf(f, "  %-12s %-11s ", p->attrs[i].name, attr_type_name(p->attrs[i].type));
    if (p->has_dflt[i]) {
      fputs("= ", f);
      attr_print(f, &p->dflt[i]);
    } else {
      fputs("(required)", f);
    }
    fprintf(f, "  %s", p->attrs[i].doc ? p->attrs[i].doc : "");
    if (p->attrs[i].repeat > 1) fprintf(f, "; one int stands for %d equal values", p->attrs[i].repeat);
    fputc('\n', f);
  }
  fprintf(f, "gradient: %s\n", grad_kind_name(p));
  fprintf(f, "kernel: %s\n", kernel_name(p, false));
  if (p->flags & OP_INTERNAL) fprintf(f, "internal: made by netrun itself (a script cannot call it)\n");
}
