/* program.c — building and querying the program IR (program.h). */
#include "ir/program.h"

#include "ir/names.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes and shapes ------------------------------------------------- */

const char *dtype_name(DType t) {
  switch (t) {
  case DT_F32: return "f32";
  case DT_I64: return "i64";
  case DT_BOOL: return "bool";
  case DT_F64: return "f64";
  default: return "?";
  }
}

bool dtype_parse(const char *s, DType *out) {
  static const char *const names[] = {"f32", "i64", "bool", "f64"};
  for (int i = 0; i < 4; i++)
    if (strcmp(s, names[i]) == 0) {
      *out = (DType)i;
      return true;
    }
  return false;
}

bool dims_clash(Dim a, Dim b) {
  if (dim_known(a) && dim_known(b)) return a.n != b.n;
  return a.sym && b.sym && strcmp(a.sym, b.sym) != 0;
}

Dim dim_merge(Dim a, Dim b) {
  if (dim_known(a)) return a;
  if (dim_known(b) || !a.sym) return b;
  return a;
}

bool dim_eq(Dim a, Dim b) {
  if (a.n >= 0 || b.n >= 0) return a.n == b.n;
  return a.sym && b.sym && strcmp(a.sym, b.sym) == 0;
}

Shape shape_unknown(void) {
  Shape s;
  memset(&s, 0, sizeof s);
  s.rank = -1;
  return s;
}

Shape shape_scalar(void) {
  Shape s;
  memset(&s, 0, sizeof s);
  return s;
}

Shape shape_of(int rank, const int64_t *dims) {
  Shape s = shape_scalar();
  s.rank = rank;
  for (int i = 0; i < rank; i++) s.d[i] = dim_n(dims[i]);
  return s;
}

int64_t shape_numel(const Shape *s) {
  if (s->rank < 0) return -1;
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) {
    if (s->d[i].n < 0) return -1;
    if (s->d[i].n && n > INT64_MAX / s->d[i].n) return -1;
    n *= s->d[i].n;
  }
  return n;
}

bool shape_eq(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++) {
    Dim x = a->d[i], y = b->d[i];
    if (x.n != y.n) return false;
    if ((x.sym == NULL) != (y.sym == NULL)) return false;
    if (x.sym && strcmp(x.sym, y.sym)) return false;
  }
  return true;
}

Shape shape_join(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return shape_unknown();
  Shape s = *a;
  for (int i = 0; i < a->rank; i++)
    if (!dim_eq(a->d[i], b->d[i])) s.d[i] = dim_unknown();
  return s;
}

const char *shape_str(const Shape *s, char *buf, size_t n) {
  size_t k = 0;
#define PUT(...) k += (size_t)snprintf(buf + (k < n ? k : n), k < n ? n - k : 0, __VA_ARGS__)
  if (s->rank < 0) {
    PUT("[...]");
    return buf;
  }
  PUT("[");
  for (int i = 0; i < s->rank; i++) {
    if (i) PUT(", ");
    if (s->d[i].n >= 0) PUT("%" PRId64, s->d[i].n);
    else if (s->d[i].sym) PUT("%s", s->d[i].sym);
    else PUT("?");
  }
  PUT("]");
#undef PUT
  return buf;
}

/* ---- name -> variable maps (mem.h's StrMap) ---------------------------- */

/* The first variable named name in b (or, b NULL, in the program). */
static VarDesc *map_get(const Program *p, const Block *b, const char *name) {
  int i = strmap_get(b ? &b->map : &p->all, name);
  return i < 0 ? NULL : b ? b->vars[i] : p->allvars[i];
}

/* Indexes v, the last variable of block b, by its name in b and in the
 * program, where the name is new (a lookup finds the first). */
static void map_put(Program *p, Block *b, VarDesc *v) {
  if (strmap_get(&b->map, v->name) < 0) strmap_put(p->arena, &b->map, v->name, v->slot);
  *ARENA_PUSH(p->arena, p->allvars, p->nallvars, p->capallvars) = v;
  if (strmap_get(&p->all, v->name) < 0) strmap_put(p->arena, &p->all, v->name, p->nallvars - 1);
}

/* ---- programs and blocks ----------------------------------------------- */

Program *prog_new(Arena *arena, Diag *diag) {
  Program *p = arena_alloc(arena, sizeof *p);
  p->arena = arena;
  p->diag = diag;
  prog_add_block(p, -1);
  p->startup = arena_alloc(arena, sizeof *p->startup);
  p->startup->idx = -1;
  p->startup->parent = -1;
  p->startup->fwd_block = -1;
  return p;
}

const char *prog_phase_name(Phase k) {
  static const char *const names[PHASE_COUNT] = {"forward", "backward", "allreduce", "update"};
  return k >= 0 && k < PHASE_COUNT ? names[k] : "?";
}

Block *prog_add_block(Program *p, int parent) {
  Block *b = arena_alloc(p->arena, sizeof *b);
  b->idx = p->nblocks;
  b->parent = parent;
  b->fwd_block = -1;
  *ARENA_PUSH(p->arena, p->blocks, p->nblocks, p->capblocks) = b;
  return b;
}

Block *prog_block(const Program *p, int idx) {
  return idx >= 0 && idx < p->nblocks ? p->blocks[idx] : NULL;
}

VarDesc *prog_add_var(Program *p, Block *b, const char *name) {
  VarDesc *v = arena_alloc(p->arena, sizeof *v);
  v->name = arena_strdup(p->arena, name);
  v->dtype = DT_UNKNOWN;
  v->shape = shape_unknown();
  v->span = SPAN_NONE;
  v->block = b->idx;
  *ARENA_PUSH(p->arena, b->vars, b->nvars, b->capvars) = v;
  v->slot = b->nvars - 1;
  map_put(p, b, v);
  return v;
}

VarDesc *prog_find_var(const Program *p, const Block *b, const char *name) {
  while (b) {
    VarDesc *v = map_get(p, b, name);
    if (v) return v;
    b = b->parent >= 0 ? p->blocks[b->parent] : NULL;
  }
  return NULL;
}

VarDesc *prog_var(const Program *p, const char *name) { return map_get(p, NULL, name); }

void prog_promote_f64(Block *b) {
  for (int i = 0; i < b->nvars; i++)
    if (b->vars[i]->dtype == DT_F32) b->vars[i]->dtype = DT_F64;
  for (int i = 0; i < b->nops; i++)
    for (int a = 0; a < b->ops[i]->nattrs; a++) {
      AttrValue *v = &b->ops[i]->attrs[a].v;
      if (v->type == ATTR_DTYPE && v->u.i == DT_F32) v->u.i = DT_F64;
    }
}

bool prog_name_used(const Program *p, const char *name) { return map_get(p, NULL, name) != NULL; }

const char *prog_fresh(Program *p, const char *base) {
  if (!prog_name_used(p, base)) return arena_strdup(p->arena, base);
  /* base -> the next version to try (p->versions), so rebinding a name n
   * times costs O(n), not O(n^2). */
  if (!p->versions) p->versions = arena_alloc(p->arena, sizeof *p->versions);
  int k = strmap_get(p->versions, base);
  const char *key = k < 0 ? arena_strdup(p->arena, base) : base;   /* the map keeps its first key */
  /* A gradient name's version goes on its stem: x.1@GRAD, not x@GRAD.1. */
  int stem = (int)name_stem_len(base);
  const char *at = base[stem] ? base + stem : NULL;
  for (k = k < 0 ? 1 : k;; k++) {
    char buf[256];
    snprintf(buf, sizeof buf, "%.*s.%d%.50s", stem < 200 ? stem : 200, base, k, at ? at : "");
    if (!prog_name_used(p, buf)) {
      strmap_put(p->arena, p->versions, key, k + 1);
      return arena_strdup(p->arena, buf);
    }
  }
}

const char *prog_temp(Program *p) {
  for (;;) {
    char buf[32];
    snprintf(buf, sizeof buf, "t.%d", p->next_temp++);
    if (!prog_name_used(p, buf)) return arena_strdup(p->arena, buf);
  }
}

const char *prog_export(const Program *p, const char *name) {
  int i = strmap_get(&p->export_index, name);
  return i >= 0 ? p->exports[i].var : NULL;
}

const VarDesc *prog_named_var(const Program *p, const char *name) {
  const char *e = prog_export(p, name);
  const VarDesc *v = prog_var(p, e ? e : name);
  if (v && v->block == 0 && (v->flags & (VAR_PARAM | VAR_INPUT))) return v;
  const Block *b0 = p->nblocks ? p->blocks[0] : NULL;
  for (int i = b0 ? b0->nvars - 1 : -1; i >= 0; i--) {   /* the latest, if a session declared it twice */
    const VarDesc *u = b0->vars[i];
    if ((u->flags & (VAR_PARAM | VAR_INPUT)) && u->user_name && strcmp(u->user_name, name) == 0) return u;
  }
  return v && v->block == 0 ? v : NULL;
}

const char *prog_nearest_name(const Program *p, const char *name) {
  const char **names = mem_alloc(NULL, sizeof *names * (size_t)(p->nexports + 1));
  for (int i = 0; i < p->nexports; i++) names[i] = p->exports[i].name;
  const char *near = diag_nearest(name, names, p->nexports);
  mem_free(names);
  return near;
}

const char *prog_user_name(const Program *p, const char *var) {
  const VarDesc *v = prog_var(p, var);
  return v && v->user_name ? v->user_name : var;
}

void prog_set_export(Program *p, const char *name, const char *var) {
  int i = strmap_get(&p->export_index, name);
  if (i >= 0) {
    p->exports[i].var = var;
    return;
  }
  Export *e = ARENA_PUSH(p->arena, p->exports, p->nexports, p->capexports);
  e->name = arena_strdup(p->arena, name);
  e->var = var;
  strmap_put(p->arena, &p->export_index, e->name, p->nexports - 1);
}

/* ---- marks ------------------------------------------------------------- */

void prog_mark(const Program *p, ProgMark *m) {
  m->nblocks = p->nblocks;
  size_t n = (size_t)p->nblocks + 1;
  m->nvars = mem_alloc(NULL, 4 * n * sizeof *m->nvars);
  m->nops = m->nvars + n, m->nargs = m->nops + n, m->nresults = m->nargs + n;
  for (int i = 0; i <= p->nblocks; i++) {
    const Block *b = i < p->nblocks ? p->blocks[i] : p->startup;
    m->nvars[i] = b->nvars, m->nops[i] = b->nops, m->nargs[i] = b->nargs, m->nresults[i] = b->nresults;
  }
  m->export_vars = mem_alloc(NULL, sizeof *m->export_vars * (size_t)(p->nexports + 1));
  for (int i = 0; i < p->nexports; i++) m->export_vars[i] = p->exports[i].var;
  m->nexports = p->nexports;
  m->nsettings = p->nsettings;
  m->next_temp = p->next_temp;
  m->nforward = p->nforward;
  m->nbackward = p->nbackward;
  m->nlevels = p->nlevels;
}

void prog_rollback(Program *p, const ProgMark *m) {
  bool dropped = p->nblocks > m->nblocks;
  p->nblocks = m->nblocks;
  for (int i = 0; i <= p->nblocks; i++) {
    Block *b = i < p->nblocks ? p->blocks[i] : p->startup;
    if (b->nvars > m->nvars[i]) {
      b->nvars = m->nvars[i];
      dropped = true;
    }
    b->nops = m->nops[i], b->nargs = m->nargs[i], b->nresults = m->nresults[i];
  }
  /* Open addressing cannot delete: the maps are rebuilt from what stays. */
  if (dropped) {
    p->all = (StrMap){0};
    p->nallvars = 0;
    for (int i = 0; i <= p->nblocks; i++) {
      Block *b = i < p->nblocks ? p->blocks[i] : p->startup;
      b->map = (StrMap){0};
      for (int k = 0; k < b->nvars; k++) map_put(p, b, b->vars[k]);
    }
  }
  if (p->nexports != m->nexports) {
    p->nexports = m->nexports;
    memset(&p->export_index, 0, sizeof p->export_index);
    for (int i = 0; i < p->nexports; i++) strmap_put(p->arena, &p->export_index, p->exports[i].name, i);
  }
  for (int i = 0; i < p->nexports; i++) p->exports[i].var = m->export_vars[i];
  p->nsettings = m->nsettings;
  p->next_temp = m->next_temp;
  p->nforward = m->nforward;
  p->nbackward = m->nbackward;
  p->nlevels = m->nlevels;
  /* The version counters only skip names in use; started afresh, they find
   * the same free names the dropped ones had. */
  p->versions = NULL;
}

void prog_mark_free(ProgMark *m) {
  mem_free(m->nvars);
  mem_free(m->export_vars);
  m->nvars = NULL;
  m->export_vars = NULL;
}

/* ---- op descriptions ----------------------------------------------------- */

OpDesc *op_new(Program *p, const char *type, Span span) {
  OpDesc *op = arena_alloc(p->arena, sizeof *op);
  op->type = arena_strdup(p->arena, type);
  op->span = span;
  op->fwd_block = op->fwd_op = -1;
  return op;
}

void op_append(Block *b, Program *p, OpDesc *op) {
  *ARENA_PUSH(p->arena, b->ops, b->nops, b->capops) = op;
}

/* ---- an op's structure ---- */

static uint64_t hash_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

static uint64_t hash_str(uint64_t h, const char *s) {
  return hash_mix(s ? mem_fnv_str(h, s) : h, 0xff);
}

static uint64_t hash_attr(uint64_t h, const AttrValue *v) {
  h = hash_mix(h, (uint64_t)v->type * 31 + (uint64_t)v->n);
  switch (v->type) {
  case ATTR_FLOAT: {
    uint64_t bits;
    memcpy(&bits, &v->u.f, sizeof bits);
    return hash_mix(h, bits);
  }
  case ATTR_STRING: return hash_str(h, v->u.s);
  case ATTR_INTS: case ATTR_I64S:
    for (int i = 0; i < v->n; i++) h = hash_mix(h, (uint64_t)v->u.ints[i]);
    return h;
  case ATTR_FLOATS:
    for (int i = 0; i < v->n; i++) {
      uint64_t bits;
      memcpy(&bits, &v->u.floats[i], sizeof bits);
      h = hash_mix(h, bits);
    }
    return h;
  case ATTR_STRINGS:
    for (int i = 0; i < v->n; i++) h = hash_str(h, v->u.strings[i]);
    return h;
  default: return hash_mix(h, (uint64_t)v->u.i);
  }
}

bool attr_value_equal(const AttrValue *a, const AttrValue *b) {
  if (a->type != b->type || a->n != b->n) return false;
  switch (a->type) {
  case ATTR_FLOAT: return memcmp(&a->u.f, &b->u.f, sizeof a->u.f) == 0;
  case ATTR_STRING: return strcmp(a->u.s ? a->u.s : "", b->u.s ? b->u.s : "") == 0;
  case ATTR_INTS: case ATTR_I64S: return a->n == 0 || memcmp(a->u.ints, b->u.ints, sizeof *a->u.ints * (size_t)a->n) == 0;
  case ATTR_FLOATS: return a->n == 0 || memcmp(a->u.floats, b->u.floats, sizeof *a->u.floats * (size_t)a->n) == 0;
  case ATTR_STRINGS:
    for (int i = 0; i < a->n; i++)
      if (strcmp(a->u.strings[i], b->u.strings[i]) != 0) return false;
    return true;
  default: return a->u.i == b->u.i;
  }
}

uint64_t op_struct_hash(const OpDesc *op) {
  uint64_t h = hash_str(MEM_FNV_BASIS, op->type);
  for (int s = 0; s < op->nin; s++) h = hash_mix(hash_str(h, op->in[s].name), (uint64_t)op->in[s].n);
  for (int s = 0; s < op->nout; s++) h = hash_mix(hash_str(h, op->out[s].name), (uint64_t)op->out[s].n);
  for (int a = 0; a < op->nattrs; a++) h = hash_attr(hash_str(h, op->attrs[a].name), &op->attrs[a].v);
  return h;
}

static bool slots_same(const Slot *a, const Slot *b, int n) {
  for (int s = 0; s < n; s++)
    if (a[s].n != b[s].n || strcmp(a[s].name, b[s].name) != 0) return false;
  return true;
}

bool op_struct_equal(const OpDesc *a, const OpDesc *b) {
  if (a == b) return true;
  if (strcmp(a->type, b->type) != 0 || a->nin != b->nin || a->nout != b->nout || a->nattrs != b->nattrs) return false;
  if (!slots_same(a->in, b->in, a->nin) || !slots_same(a->out, b->out, a->nout)) return false;
  for (int i = 0; i < a->nattrs; i++)
    if (strcmp(a->attrs[i].name, b->attrs[i].name) != 0 || !attr_value_equal(&a->attrs[i].v, &b->attrs[i].v)) return false;
  return true;
}

static Slot *find_slot(Slot *slots, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(slots[i].name, name) == 0) return &slots[i];
  return NULL;
}

/* The slot `name` of a list of slots (an op's inputs or outputs), added if
 * missing. */
static Slot *add_slot(Program *p, Slot **slots, int *n, int *cap, const char *name) {
  Slot *s = find_slot(*slots, *n, name);
  if (s) return s;
  s = ARENA_PUSH(p->arena, *slots, *n, *cap);
  s->name = arena_strdup(p->arena, name);
  return s;
}

Slot *op_add_input(Program *p, OpDesc *op, const char *slot) {
  return add_slot(p, &op->in, &op->nin, &op->capin, slot);
}

Slot *op_add_output(Program *p, OpDesc *op, const char *slot) {
  return add_slot(p, &op->out, &op->nout, &op->capout, slot);
}

void slot_push(Program *p, Slot *s, const char *name) {
  *ARENA_PUSH(p->arena, s->args, s->n, s->cap) = name;
}

Slot *op_input(const OpDesc *op, const char *slot) { return find_slot(op->in, op->nin, slot); }
Slot *op_output(const OpDesc *op, const char *slot) { return find_slot(op->out, op->nout, slot); }

const char *op_in1(const OpDesc *op, const char *slot) {
  Slot *s = op_input(op, slot);
  return s && s->n ? s->args[0] : NULL;
}

const char *op_out1(const OpDesc *op, const char *slot) {
  Slot *s = op_output(op, slot);
  return s && s->n ? s->args[0] : NULL;
}

void op_set_attr(Program *p, OpDesc *op, const char *name, AttrValue v) {
  int i = 0;
  while (i < op->nattrs && strcmp(op->attrs[i].name, name) < 0) i++;
  if (i < op->nattrs && strcmp(op->attrs[i].name, name) == 0) {
    op->attrs[i].v = v;
    return;
  }
  ARENA_PUSH(p->arena, op->attrs, op->nattrs, op->capattrs);
  memmove(&op->attrs[i + 1], &op->attrs[i], (size_t)(op->nattrs - 1 - i) * sizeof *op->attrs);
  op->attrs[i].name = arena_strdup(p->arena, name);
  op->attrs[i].v = v;
}

const Attr *op_attr(const OpDesc *op, const char *name) {
  for (int i = 0; i < op->nattrs; i++)
    if (strcmp(op->attrs[i].name, name) == 0) return &op->attrs[i];
  return NULL;
}

int64_t op_attr_i(const OpDesc *op, const char *name, int64_t dflt) {
  const Attr *a = op_attr(op, name);
  if (!a) return dflt;
  return a->v.type == ATTR_FLOAT ? (int64_t)a->v.u.f : a->v.u.i;
}

double op_attr_f(const OpDesc *op, const char *name, double dflt) {
  const Attr *a = op_attr(op, name);
  if (!a) return dflt;
  return a->v.type == ATTR_FLOAT ? a->v.u.f : (double)a->v.u.i;
}

const char *attr_type_name(AttrType t) {
  switch (t) {
  case ATTR_INT: return "int";
  case ATTR_FLOAT: return "float";
  case ATTR_BOOL: return "bool";
  case ATTR_STRING: return "string";
  case ATTR_DTYPE: return "dtype";
  case ATTR_INTS: return "int list";
  case ATTR_FLOATS: return "float list";
  case ATTR_STRINGS: return "string list";
  case ATTR_BLOCK: return "block";
  case ATTR_I64: return "exact int";
  case ATTR_I64S: return "exact int list";
  }
  return "?";
}

const Setting *prog_setting(const Program *p, const char *block, const char *key) {
  for (int i = p->nsettings - 1; i >= 0; i--)
    if (strcmp(p->settings[i].block, block) == 0 && strcmp(p->settings[i].key, key) == 0) return &p->settings[i];
  return NULL;
}

AttrValue attr_int(int64_t i) { return (AttrValue){.type = ATTR_INT, .u.i = i}; }
AttrValue attr_float(double f) { return (AttrValue){.type = ATTR_FLOAT, .u.f = f}; }
AttrValue attr_bool(bool b) { return (AttrValue){.type = ATTR_BOOL, .u.i = b}; }
AttrValue attr_dtype(DType t) { return (AttrValue){.type = ATTR_DTYPE, .u.i = t}; }
AttrValue attr_block(int idx) { return (AttrValue){.type = ATTR_BLOCK, .u.i = idx}; }

AttrValue attr_string(Program *p, const char *s) {
  return (AttrValue){.type = ATTR_STRING, .u.s = arena_strdup(p->arena, s)};
}

AttrValue attr_ints(Program *p, const int64_t *v, int n) {
  AttrValue a = {.type = ATTR_INTS, .n = n};
  a.u.ints = arena_alloc(p->arena, sizeof(int64_t) * (size_t)(n ? n : 1));
  if (n) memcpy(a.u.ints, v, sizeof(int64_t) * (size_t)n);
  return a;
}

AttrValue attr_floats(Program *p, const double *v, int n) {
  AttrValue a = {.type = ATTR_FLOATS, .n = n};
  a.u.floats = arena_alloc(p->arena, sizeof(double) * (size_t)(n ? n : 1));
  if (n) memcpy(a.u.floats, v, sizeof(double) * (size_t)n);
  return a;
}

bool i64_fits_double(int64_t i) {
  double x = (double)i;
  return x < 0x1p63 && (int64_t)x == i;   /* (double)INT64_MAX is 2^63 */
}

AttrValue attr_i64(int64_t i) { return (AttrValue){.type = ATTR_I64, .u.i = i}; }

AttrValue attr_i64s(Program *p, const int64_t *v, int n) {
  AttrValue a = attr_ints(p, v, n);
  a.type = ATTR_I64S;
  return a;
}

/* A finite double as the dump writes it: the shortest form that reads
 * back, 9 digits for a value exact in f32 (what most attributes are used
 * as), up to 17 for any other double; 2 is written 2.0. */
static void format_float(char buf[static 64], double x) {
  snprintf(buf, 64, "%.9g", x);
  for (int prec = 10; (double)(float)x != x && strtod(buf, NULL) != x && prec <= 17; prec++)
    snprintf(buf, 64, "%.*g", prec, x);
  if (!strpbrk(buf, ".eE")) strcat(buf, ".0");
}

static void print_float(FILE *f, double x) {
  if (isnan(x)) fputs("nan", f);
  else if (isinf(x)) fputs(x < 0 ? "-inf" : "inf", f);
  else {
    char buf[64];
    format_float(buf, x);
    fputs(buf, f);
  }
}

/* An exact integer in a float attribute: as the float would be (2.0) when
 * that text reads back as the integer, else every digit (9007199254740993,
 * and 9007199254740992 rather than 9.00719925e+15). */
static void print_number(FILE *f, int64_t i) {
  char buf[64];
  if (i64_fits_double(i)) {
    format_float(buf, (double)i);
    double back = strtod(buf, NULL);
    if (back == (double)i) {
      fputs(buf, f);
      return;
    }
  }
  fprintf(f, "%" PRId64, i);
}


/* (Not diag_quote: the checkpoint tools link program.c without diag.c.) */
static void print_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
    else if (*s == '\n') fputs("\\n", f);
    else if (*s == '\t') fputs("\\t", f);
    else fputc(*s, f);
  }
  fputc('"', f);
}

void attr_print(FILE *f, const AttrValue *v) {
  switch (v->type) {
  case ATTR_INT: fprintf(f, "%" PRId64, v->u.i); break;
  case ATTR_BLOCK: fprintf(f, "%" PRId64, v->u.i); break;
  case ATTR_FLOAT: print_float(f, v->u.f); break;
  case ATTR_I64: print_number(f, v->u.i); break;
  case ATTR_BOOL: fputs(v->u.i ? "true" : "false", f); break;
  case ATTR_DTYPE: fputs(dtype_name((DType)v->u.i), f); break;
  case ATTR_STRING: print_string(f, v->u.s); break;
  case ATTR_INTS:
  case ATTR_FLOATS:
  case ATTR_STRINGS:
  case ATTR_I64S:
    fputc('[', f);
    for (int i = 0; i < v->n; i++) {
      if (i) fputs(", ", f);
      if (v->type == ATTR_INTS) fprintf(f, "%" PRId64, v->u.ints[i]);
      else if (v->type == ATTR_FLOATS) print_float(f, v->u.floats[i]);
      else if (v->type == ATTR_I64S) print_number(f, v->u.ints[i]);
      else print_string(f, v->u.strings[i]);
    }
    fputc(']', f);
    break;
  }
}
