/* tapegrad.c — the tape's backward, run directly over its tensors
 * (tapegrad.h).
 *
 * Three steps, the builder's passes in their tape form:
 *   1. live: which recorded tensors depend on a wrt tensor (forward over
 *      the tape; stop_gradient variables, no-grad tensors and slots without
 *      gradients stop it);
 *   2. the loss's gradient is 1;
 *   3. entries in reverse: an entry none of whose outputs has a gradient
 *      is skipped (the loss does not depend on it: the builder's "needed"
 *      pass); otherwise its template — the grad ops bwd_op_grads made for
 *      this op, these live inputs and these shapes, prepared once — runs
 *      over the entry's tensors, and each input's gradient pieces are added
 *      into that tensor's gradient in the order they were written.
 * Outputs' gradients are dropped once their producer has run: nothing
 * reads them after that, so memory follows the live gradients only. */
#include "tapegrad.h"

#include "backward.h"

#include <string.h>

/* ---- per-tensor state ----------------------------------------------------------- */

typedef struct Val {
  const Tensor *t;
  Tensor *grad;
  bool live;
  bool frozen;          /* in the no-grad set */
  bool wanted;          /* a wrt tensor: its gradient is kept to the end */
} Val;

typedef struct ValMap {
  Val *v;
  size_t cap, n;
} ValMap;

static Val *val_slot(Val *v, size_t cap, const Tensor *t) {
  size_t i = mem_hash_ptr(t) & (cap - 1);
  while (v[i].t && v[i].t != t) i = (i + 1) & (cap - 1);
  return &v[i];
}

static Val *val_find(const ValMap *m, const Tensor *t) {
  if (!m->cap) return NULL;
  Val *v = val_slot(m->v, m->cap, t);
  return v->t ? v : NULL;
}

static Val *val_add(ValMap *m, const Tensor *t) {
  if ((m->n + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 256;
    Val *nv = mem_calloc(cap, sizeof *nv);
    for (size_t i = 0; i < m->cap; i++)
      if (m->v[i].t) *val_slot(nv, cap, m->v[i].t) = m->v[i];
    mem_free(m->v);
    m->v = nv;
    m->cap = cap;
  }
  Val *v = val_slot(m->v, m->cap, t);
  if (!v->t) v->t = t, m->n++;
  return v;
}

/* ---- templates: one recorded op's grad ops, prepared ----------------------------- */

typedef struct Template {
  struct Template *next;       /* another template in its bucket */
  uint64_t key;                /* the hash of the op's structure */
  const OpDesc *op;            /* the op it was made for */
  const int *alias;            /* per value: the first value of its variable */
  int64_t *sig;                /* per value: dtype, rank, dims; per input: live */
  int nsig;
  Arena arena;
  Program *p;
  Executor *ex;
  int nvals;
  int *slot;                   /* per value: its variable's slot */
  int *gslot;                  /* per output: its gradient's slot, -1 if none */
  int nneed;
  int *need_val;               /* per gradient computed: the value it is of */
  int *npieces, **pslot;       /* and the slots of its pieces */
  int *share_in, *share_out;   /* per grad op: an assign of one f32 value to
                                * another (slots), or -1: run it */
} Template;

/* What is fixed for one op description: which inputs can carry a gradient
 * at all, the hash of its structure, and the template it used last. */
typedef struct OpInfo {
  const OpDesc *op;
  bool *stop;                  /* per input value */
  int *alias;                  /* per value: the first value read from or
                                * written to the same variable */
  uint64_t key;
  Template *last;
} OpInfo;

typedef struct OpMap {
  OpInfo *v;
  size_t cap, n;
} OpMap;

/* Templates by the structure of their op: ops that differ only in their
 * variables' names (one per line of a straight-line script) share one. */
typedef struct TemplateMap {
  Template **v;
  size_t cap, n;
} TemplateMap;

typedef struct TapeGrad {
  const Tape *tape;
  Program *fwd;
  bool any_stop;               /* does any variable have stop_gradient? */
  struct {                     /* recent proto lookups, by type string */
    const char *type;
    const OpProto *proto;
  } protos[64];
  Arena arena;                 /* the OpInfos' arrays */
  ExecOptions opt;
  ValMap vals;
  OpMap ops;
  TemplateMap templates;
  int64_t *sig;                /* scratch */
  int capsig;
} TapeGrad;

/* ---- an op's structure: type, slots, attributes, which values share a
 * variable ---------------------------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

static uint64_t hash_str(uint64_t h, const char *s) {
  while (s && *s) h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
  return mix(h, 0xff);
}

static uint64_t hash_attr(uint64_t h, const AttrValue *v) {
  h = mix(h, (uint64_t)v->type * 31 + (uint64_t)v->n);
  switch (v->type) {
  case ATTR_FLOAT: {
    uint64_t bits;
    memcpy(&bits, &v->u.f, sizeof bits);
    return mix(h, bits);
  }
  case ATTR_STRING: return hash_str(h, v->u.s);
  case ATTR_INTS:
    for (int i = 0; i < v->n; i++) h = mix(h, (uint64_t)v->u.ints[i]);
    return h;
  case ATTR_FLOATS:
    for (int i = 0; i < v->n; i++) {
      uint64_t bits;
      memcpy(&bits, &v->u.floats[i], sizeof bits);
      h = mix(h, bits);
    }
    return h;
  case ATTR_STRINGS:
    for (int i = 0; i < v->n; i++) h = hash_str(h, v->u.strings[i]);
    return h;
  default: return mix(h, (uint64_t)v->u.i);
  }
}

static bool attr_same(const AttrValue *a, const AttrValue *b) {
  if (a->type != b->type || a->n != b->n) return false;
  switch (a->type) {
  case ATTR_FLOAT: return memcmp(&a->u.f, &b->u.f, sizeof a->u.f) == 0;
  case ATTR_STRING: return strcmp(a->u.s ? a->u.s : "", b->u.s ? b->u.s : "") == 0;
  case ATTR_INTS: return a->n == 0 || memcmp(a->u.ints, b->u.ints, sizeof *a->u.ints * (size_t)a->n) == 0;
  case ATTR_FLOATS: return a->n == 0 || memcmp(a->u.floats, b->u.floats, sizeof *a->u.floats * (size_t)a->n) == 0;
  case ATTR_STRINGS:
    for (int i = 0; i < a->n; i++)
      if (strcmp(a->u.strings[i], b->u.strings[i]) != 0) return false;
    return true;
  default: return a->u.i == b->u.i;
  }
}

static uint64_t op_key(const OpDesc *op, const int *alias, int nvals) {
  uint64_t h = hash_str(0xcbf29ce484222325ull, op->type);
  for (int s = 0; s < op->nin; s++) h = mix(hash_str(h, op->in[s].name), (uint64_t)op->in[s].n);
  for (int s = 0; s < op->nout; s++) h = mix(hash_str(h, op->out[s].name), (uint64_t)op->out[s].n);
  for (int a = 0; a < op->nattrs; a++) h = hash_attr(hash_str(h, op->attrs[a].name), &op->attrs[a].v);
  for (int k = 0; k < nvals; k++) h = mix(h, (uint64_t)alias[k]);
  return h;
}

static bool slots_same(const Slot *a, const Slot *b, int n) {
  for (int s = 0; s < n; s++)
    if (a[s].n != b[s].n || strcmp(a[s].name, b[s].name) != 0) return false;
  return true;
}

static bool op_same(const OpDesc *a, const int *alias_a, const OpDesc *b, const int *alias_b, int nvals) {
  if (a == b) return true;
  if (strcmp(a->type, b->type) != 0 || a->nin != b->nin || a->nout != b->nout || a->nattrs != b->nattrs) return false;
  if (!slots_same(a->in, b->in, a->nin) || !slots_same(a->out, b->out, a->nout)) return false;
  for (int i = 0; i < a->nattrs; i++)
    if (strcmp(a->attrs[i].name, b->attrs[i].name) != 0 || !attr_same(&a->attrs[i].v, &b->attrs[i].v)) return false;
  return memcmp(alias_a, alias_b, sizeof *alias_a * (size_t)nvals) == 0;
}

static OpInfo *op_slot(OpInfo *v, size_t cap, const OpDesc *op) {
  size_t i = mem_hash_ptr(op) & (cap - 1);
  while (v[i].op && v[i].op != op) i = (i + 1) & (cap - 1);
  return &v[i];
}

static OpInfo *op_info(TapeGrad *tg, const TapeEntry *e) {
  OpMap *m = &tg->ops;
  if ((m->n + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    OpInfo *nv = mem_calloc(cap, sizeof *nv);
    for (size_t i = 0; i < m->cap; i++)
      if (m->v[i].op) *op_slot(nv, cap, m->v[i].op) = m->v[i];
    mem_free(m->v);
    m->v = nv;
    m->cap = cap;
  }
  OpInfo *info = op_slot(m->v, m->cap, e->op);
  if (info->op) return info;
  info->op = e->op;
  m->n++;
  int nv = e->nin + e->nout;
  info->alias = arena_alloc(&tg->arena, sizeof *info->alias * (size_t)(nv + 1));
  for (int k = 0; k < nv; k++) {
    int j = 0;
    while (j < k && strcmp(e->vars[j], e->vars[k]) != 0) j++;
    info->alias[k] = j;
  }
  info->key = op_key(e->op, info->alias, nv);
  info->stop = arena_alloc(&tg->arena, sizeof *info->stop * (size_t)(e->nin + 1));
  size_t h = mem_hash_ptr(e->op->type) & 63;
  if (tg->protos[h].type != e->op->type)
    tg->protos[h].type = e->op->type, tg->protos[h].proto = prog_find_op(tg->fwd, e->op->type);
  const OpProto *proto = tg->protos[h].proto;
  int k = 0;
  for (int s = 0; s < e->op->nin; s++) {
    int ps = proto ? reg_slot_index(proto->in, proto->nin, e->op->in[s].name) : -1;
    bool no_grad_slot = ps >= 0 && (proto->in[ps].flags & SLOT_NO_GRAD);
    for (int j = 0; j < e->op->in[s].n && k < e->nin; j++, k++) {
      const VarDesc *v = tg->any_stop ? prog_var(tg->fwd, e->vars[k]) : NULL;
      info->stop[k] = no_grad_slot || (v && (v->flags & VAR_STOP_GRADIENT));
    }
  }
  return info;
}

/* The signature of entry e with live inputs `need`, into tg->sig. */
static int entry_sig(TapeGrad *tg, const TapeEntry *e, const bool *need) {
  int n = 0, nv = e->nin + e->nout;
  VEC_RESERVE(tg->sig, tg->capsig, nv * (2 + SHAPE_MAX_RANK) + e->nin);
  for (int k = 0; k < nv; k++) {
    const Tensor *t = e->vals[k];
    tg->sig[n++] = t->dtype;
    tg->sig[n++] = t->rank;
    for (int d = 0; d < t->rank; d++) tg->sig[n++] = t->shape[d];
  }
  for (int k = 0; k < e->nin; k++) tg->sig[n++] = need[k];
  return n;
}

static void template_free(Template *t) {
  exec_free(t->ex);
  /* The template borrows the script's ops (user_ops): not released here. */
  arena_free(&t->arena);
  mem_free(t);
}

/* The variable a template gives value k: the forward variable's name, but
 * an output never shares a name with an input. */
static const char *value_name(Template *t, const TapeEntry *e, int k) {
  const char *name = e->vars[k];
  if (k >= e->nin)
    for (int i = 0; i < e->nin; i++)
      if (strcmp(e->vars[i], name) == 0) return arena_printf(&t->arena, "%s#out", name);
  return name;
}

static Template *template_new(TapeGrad *tg, const OpInfo *info, const TapeEntry *e, const bool *need, int nsig) {
  Template *t = mem_calloc(1, sizeof *t);
  arena_init(&t->arena);
  t->key = info->key;
  t->op = e->op;
  t->alias = info->alias;
  t->nsig = nsig;
  t->sig = arena_alloc(&t->arena, sizeof *t->sig * (size_t)(nsig + 1));
  memcpy(t->sig, tg->sig, sizeof *t->sig * (size_t)nsig);
  Program *p = t->p = prog_new(&t->arena, tg->fwd->diag);
  p->user_ops = tg->fwd->user_ops;
  Block *b = p->blocks[0];
  int nv = t->nvals = e->nin + e->nout;
  const char **names = arena_alloc(&t->arena, sizeof *names * (size_t)(nv + 1));
  for (int k = 0; k < nv; k++) {
    names[k] = value_name(t, e, k);
    if (prog_var(p, names[k])) continue;
    VarDesc *d = prog_add_var(p, b, names[k]);
    d->dtype = e->vals[k]->dtype;
    d->shape = tensor_shape(e->vals[k]);
    const VarDesc *orig = prog_var(tg->fwd, e->vars[k]);
    d->span = orig ? orig->span : e->op->span;
  }
  op_append(b, p, tape_entry_op(p, e, names));
  /* The outputs' gradients, given. */
  const char **gnames = arena_alloc(&t->arena, sizeof *gnames * (size_t)(e->nout + 1));
  for (int o = 0; o < e->nout; o++) {
    const Tensor *x = e->vals[e->nin + o];
    gnames[o] = NULL;
    if (x->dtype != DT_F32) continue;
    gnames[o] = arena_printf(&t->arena, "%s@GRAD", names[e->nin + o]);
    if (prog_var(p, gnames[o])) continue;
    VarDesc *d = prog_add_var(p, b, gnames[o]);
    d->dtype = DT_F32;
    d->shape = tensor_shape(x);
  }
  /* The live inputs, each variable once. */
  const char **needs = arena_alloc(&t->arena, sizeof *needs * (size_t)(e->nin + 1));
  t->need_val = arena_alloc(&t->arena, sizeof *t->need_val * (size_t)(e->nin + 1));
  for (int i = 0; i < e->nin; i++) {
    if (!need[i]) continue;
    bool seen = false;
    for (int j = 0; j < t->nneed && !seen; j++) seen = strcmp(needs[j], names[i]) == 0;
    if (seen) continue;
    needs[t->nneed] = names[i];
    t->need_val[t->nneed++] = i;
  }
  const char ***pieces = arena_alloc(&t->arena, sizeof *pieces * (size_t)(t->nneed + 1));
  t->npieces = arena_alloc(&t->arena, sizeof *t->npieces * (size_t)(t->nneed + 1));
  if (!bwd_op_grads(p, needs, t->nneed, pieces, t->npieces)) {
    template_free(t);
    return NULL;
  }
  ExecOptions o = tg->opt;
  o.tape = false;
  o.keep_steps = false;
  o.timing = false;
  t->ex = exec_new(p, &o);
  t->slot = arena_alloc(&t->arena, sizeof *t->slot * (size_t)(nv + 1));
  for (int v = 0; v < nv; v++) t->slot[v] = exec_slot(t->ex, names[v]);
  t->gslot = arena_alloc(&t->arena, sizeof *t->gslot * (size_t)(e->nout + 1));
  for (int v = 0; v < e->nout; v++) t->gslot[v] = gnames[v] ? exec_slot(t->ex, gnames[v]) : -1;
  /* An assign between gradients (add's and sub's dX) passes the tensor
   * on: gradients here are never written in place once made (accumulate
   * copies a shared one), so the copy would buy nothing. */
  const Block *gb = p->blocks[0];
  t->share_in = arena_alloc(&t->arena, sizeof *t->share_in * (size_t)(gb->nops + 1));
  t->share_out = arena_alloc(&t->arena, sizeof *t->share_out * (size_t)(gb->nops + 1));
  for (int i = 0; i < gb->nops; i++) {
    const OpDesc *op = gb->ops[i];
    const char *src = strcmp(op->type, "assign") == 0 ? op_in1(op, "X") : NULL, *dst = src ? op_out1(op, "Out") : NULL;
    const VarDesc *a = src ? prog_var(p, src) : NULL, *d = dst ? prog_var(p, dst) : NULL;
    bool share = a && d && a->dtype == DT_F32 && d->dtype == DT_F32;
    t->share_in[i] = share ? exec_slot(t->ex, src) : -1;
    t->share_out[i] = share ? exec_slot(t->ex, dst) : -1;
    if (t->share_in[i] < 0 || t->share_out[i] < 0) t->share_in[i] = t->share_out[i] = -1;
  }
  t->pslot = arena_alloc(&t->arena, sizeof *t->pslot * (size_t)(t->nneed + 1));
  for (int j = 0; j < t->nneed; j++) {
    t->pslot[j] = arena_alloc(&t->arena, sizeof **t->pslot * (size_t)(t->npieces[j] + 1));
    for (int q = 0; q < t->npieces[j]; q++) t->pslot[j][q] = exec_slot(t->ex, pieces[j][q]);
  }
  return t;
}

static Template **bucket(TemplateMap *m, uint64_t key) {
  size_t i = (size_t)key & (m->cap - 1);
  return &m->v[i];
}

/* The template of entry e with live inputs need: the one its op used last,
 * or one of an op of the same structure, or a new one. */
static Template *template_for(TapeGrad *tg, OpInfo *info, const TapeEntry *e, const bool *need) {
  int n = entry_sig(tg, e, need);
  Template *t = info->last;
  if (t && t->nsig == n && memcmp(t->sig, tg->sig, sizeof *tg->sig * (size_t)n) == 0) return t;
  TemplateMap *m = &tg->templates;
  int nv = e->nin + e->nout;
  if (m->cap)
    for (t = *bucket(m, info->key); t; t = t->next)
      if (t->key == info->key && t->nsig == n && memcmp(t->sig, tg->sig, sizeof *tg->sig * (size_t)n) == 0 &&
          op_same(t->op, t->alias, e->op, info->alias, nv))
        return info->last = t;
  if ((m->n + 1) > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    Template **nv2 = mem_calloc(cap, sizeof *nv2);
    for (size_t i = 0; i < m->cap; i++)
      for (Template *x = m->v[i], *next; x; x = next) {
        next = x->next;
        x->next = nv2[(size_t)x->key & (cap - 1)];
        nv2[(size_t)x->key & (cap - 1)] = x;
      }
    mem_free(m->v);
    m->v = nv2;
    m->cap = cap;
  }
  t = template_new(tg, info, e, need, n);
  if (!t) return NULL;
  Template **b = bucket(m, info->key);
  t->next = *b;
  *b = t;
  m->n++;
  return info->last = t;
}

/* ---- gradients -------------------------------------------------------------------------- */

/* acc + piece, as add_n adds: in place when nothing else holds acc. */
static Tensor *accumulate(Tensor *acc, Tensor *piece) {
  if (!acc) return tensor_ref(piece);
  Tensor *out = acc;
  if (acc->refs > 1 || acc->storage->refs > 1 || acc == piece) {
    out = tensor_new(DT_F32, acc->rank, acc->shape);
    memcpy(tensor_f32(out), tensor_f32(acc), sizeof(float) * (size_t)acc->numel);
    tensor_unref(acc);
  }
  float *o = tensor_f32(out);
  const float *x = tensor_f32(piece);
  for (int64_t i = 0; i < out->numel; i++) o[i] = o[i] + x[i];
  return out;
}

/* Runs entry e's grad ops and adds their results into its inputs'
 * gradients.  need: its live inputs. */
static int run_entry(TapeGrad *tg, const TapeEntry *e, const bool *need) {
  OpInfo *info = op_info(tg, e);
  Template *t = template_for(tg, info, e, need);
  if (!t) return -1;
  Executor *x = t->ex;
  for (int k = 0; k < t->nvals; k++) exec_set(x, t->slot[k], e->vals[k]);
  for (int o = 0; o < e->nout; o++) {
    if (t->gslot[o] < 0) continue;
    Val *v = val_find(&tg->vals, e->vals[e->nin + o]);
    if (v && v->grad) {
      exec_set(x, t->gslot[o], v->grad);
    } else {
      const Tensor *out = e->vals[e->nin + o];
      Tensor *z = tensor_zeros(DT_F32, out->rank, out->shape);
      exec_set(x, t->gslot[o], z);
      tensor_unref(z);
    }
  }
  int nops = t->p->blocks[0]->nops;
  for (int i = 1; i < nops; i++) {
    if (t->share_in[i] >= 0 && exec_get(x, t->share_in[i])) {
      exec_set(x, t->share_out[i], exec_get(x, t->share_in[i]));
      continue;
    }
    if (exec_run_ops(x, i, i + 1) < 0) {
      exec_clear(x);
      return -1;
    }
  }
  /* The outputs' gradients are final and used: drop them. */
  for (int o = 0; o < e->nout; o++) {
    Val *v = val_find(&tg->vals, e->vals[e->nin + o]);
    if (v && v->grad && !v->wanted) tensor_unref(v->grad), v->grad = NULL;
  }
  for (int j = 0; j < t->nneed; j++) {
    Val *v = val_add(&tg->vals, e->vals[t->need_val[j]]);
    for (int q = 0; q < t->npieces[j]; q++) {
      Tensor *piece = exec_get(x, t->pslot[j][q]);
      if (!piece || piece->dtype != DT_F32 || piece->numel != v->t->numel) {
        exec_clear(x);
        diag_error(tg->fwd->diag, e->op->span,
                   "internal error in the tape's backward: %s gave %s a gradient of the wrong size", e->op->type,
                   e->vars[t->need_val[j]]);
        return -1;
      }
      v->grad = accumulate(v->grad, piece);
    }
  }
  exec_clear(x);
  return 0;
}

bool tgrad_on_tape(const Tape *t, const Tensor *x) {
  for (int i = 0; i < t->n; i++)
    for (int k = 0; k < t->entries[i].nin; k++)
      if (t->entries[i].vals[k] == x) return true;
  return false;
}

int tgrad_run(const Tape *t, Program *fwd, Tensor *loss, Tensor *const *wrt, int nwrt, Tensor *const *no_grad,
              int nno_grad, const ExecOptions *o, Tensor **grads) {
  TapeGrad tg = {.tape = t, .fwd = fwd, .opt = *o};
  arena_init(&tg.arena);
  for (int b = 0; b < fwd->nblocks && !tg.any_stop; b++)
    for (int i = 0; i < fwd->blocks[b]->nvars && !tg.any_stop; i++)
      tg.any_stop = (fwd->blocks[b]->vars[i]->flags & VAR_STOP_GRADIENT) != 0;
  for (int i = 0; i < nwrt; i++) grads[i] = NULL;
  for (int i = 0; i < nno_grad; i++)
    if (no_grad[i]) val_add(&tg.vals, no_grad[i])->frozen = true;
  for (int i = 0; i < nwrt; i++) {
    Val *v = val_add(&tg.vals, wrt[i]);
    v->wanted = true;
    if (!v->frozen) v->live = true;
  }
  /* 1. live */
  bool *need = NULL;
  int capneed = 0, rc = 0;
  for (int i = 0; i < t->n; i++) {
    const TapeEntry *e = &t->entries[i];
    OpInfo *info = op_info(&tg, e);
    bool any = false;
    for (int k = 0; k < e->nin && !any; k++) {
      const Val *v = info->stop[k] ? NULL : val_find(&tg.vals, e->vals[k]);
      any = v && v->live;
    }
    if (!any) continue;
    for (int k = e->nin; k < e->nin + e->nout; k++)
      if (e->vals[k]->dtype == DT_F32) {
        Val *v = val_add(&tg.vals, e->vals[k]);
        if (!v->frozen) v->live = true;
      }
  }
  /* 2. the seed */
  Val *lv = val_find(&tg.vals, loss);
  if (lv && lv->live) {
    lv->grad = tensor_new(DT_F32, loss->rank, loss->shape);
    for (int64_t i = 0; i < loss->numel; i++) tensor_f32(lv->grad)[i] = 1.0f;
    /* 3. entries in reverse */
    for (int i = t->n - 1; i >= 0 && rc == 0; i--) {
      const TapeEntry *e = &t->entries[i];
      bool has_grad = false;
      for (int k = e->nin; k < e->nin + e->nout && !has_grad; k++) {
        const Val *v = val_find(&tg.vals, e->vals[k]);
        has_grad = v && v->grad;
      }
      if (!has_grad) continue;
      OpInfo *info = op_info(&tg, e);
      VEC_RESERVE(need, capneed, e->nin + 1);
      bool any = false;
      for (int k = 0; k < e->nin; k++) {
        const Val *v = info->stop[k] ? NULL : val_find(&tg.vals, e->vals[k]);
        need[k] = v && v->live && e->vals[k]->dtype == DT_F32;
        any = any || need[k];
      }
      if (any) rc = run_entry(&tg, e, need);
    }
  }
  for (int i = 0; i < nwrt && rc == 0; i++) {
    Val *v = val_find(&tg.vals, wrt[i]);
    grads[i] = v && v->grad ? tensor_ref(v->grad) : NULL;
  }
  for (size_t i = 0; i < tg.vals.cap; i++) tensor_unref(tg.vals.v[i].grad);
  arena_free(&tg.arena);
  for (size_t i = 0; i < tg.templates.cap; i++)
    for (Template *tp = tg.templates.v[i], *next; tp; tp = next) next = tp->next, template_free(tp);
  mem_free(tg.templates.v);
  mem_free(tg.vals.v);
  mem_free(tg.ops.v);
  mem_free(tg.sig);
  mem_free(need);
  return rc;
}
