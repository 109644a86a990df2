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
 *      the entry's class (tape.h: one structure of op, values sharing
 *      variables alike), these live inputs and these shapes, prepared
 *      once — runs over the entry's tensors, and each input's gradient
 *      pieces are added into that tensor's gradient in the order they were
 *      written.
 * Outputs' gradients are dropped once their producer has run: nothing
 * reads them after that, so memory follows the live gradients only.
 *
 * Per entry nothing is hashed or compared by name: the executor found the
 * classes when it prepared its ops, and every tensor the pass touches is
 * numbered through its `mark` (1 + its index in TapeGrad.vals), cleared
 * at the end, so its state is an array index away. */
#include "autodiff/tapegrad.h"

#include "autodiff/backward.h"

#include <string.h>

/* ---- per-tensor state ----------------------------------------------------------- */

typedef struct Val {
  const Tensor *t;
  Tensor *grad;
  bool live;
  bool frozen;          /* in the no-grad set */
  bool wanted;          /* a wrt tensor: its gradient is kept to the end */
} Val;

/* ---- templates: one class's grad ops, prepared ------------------------------------ */

typedef struct Template {
  struct Template *next;       /* another template of its class */
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

/* What is fixed for a class of entries (tape.h: ops of one structure
 * whose values share variables alike): which inputs' slots carry no
 * gradient, and the templates made for it, the last one used first. */
typedef struct OpInfo {
  bool *stop;                  /* per input value */
  Template *templates;
} OpInfo;

typedef struct TapeGrad {
  const Tape *tape;
  Program *fwd;
  bool any_stop;               /* does any variable have stop_gradient? */
  Arena arena;                 /* the OpInfos' arrays */
  ExecOptions opt;
  /* Every tensor the pass touches is numbered: its mark is 1 + its index
   * in vals.  Marks are reset at the end. */
  Val *vals;
  int nvals, capvals;
  OpInfo *infos;               /* per class; stop is NULL until made */
  int64_t *sig;                /* scratch */
  int capsig;
} TapeGrad;

/* The Val of a tensor the pass numbered (every one it touches). */
static inline Val *val_of(TapeGrad *tg, const Tensor *t) {
  return &tg->vals[t->mark - 1];
}

static void number(TapeGrad *tg, Tensor *t) {
  if (t->mark) return;
  VEC_RESERVE(tg->vals, tg->capvals, tg->nvals + 1);
  tg->vals[tg->nvals] = (Val){.t = t};
  t->mark = ++tg->nvals;
}

/* The OpInfo of entry e's class, made from the first entry of it. */
static OpInfo *op_info(TapeGrad *tg, const TapeEntry *e) {
  OpInfo *info = &tg->infos[e->klass];
  if (info->stop) return info;
  info->stop = arena_alloc(&tg->arena, sizeof *info->stop * (size_t)(e->nin + 1));
  const OpProto *proto = reg_find_op(tg->fwd, e->op->type);
  int k = 0;
  for (int s = 0; s < e->op->nin; s++) {
    int ps = proto ? reg_slot_index(proto->in, proto->nin, e->op->in[s].name) : -1;
    bool no_grad_slot = ps >= 0 && (proto->in[ps].flags & SLOT_NO_GRAD);
    for (int j = 0; j < e->op->in[s].n && k < e->nin; j++, k++) info->stop[k] = no_grad_slot;
  }
  return info;
}

/* Does no gradient flow into input k of entry e (its slot has none, or
 * its variable is stop_gradient)? */
static bool input_stops(const TapeGrad *tg, const TapeEntry *e, const OpInfo *info, int k) {
  if (info->stop[k]) return true;
  if (!tg->any_stop) return false;
  const VarDesc *v = prog_var(tg->fwd, e->vars[k]);
  return v && (v->flags & VAR_STOP_GRADIENT);
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

static Template *template_new(TapeGrad *tg, const TapeEntry *e, const bool *need, int nsig) {
  Template *t = mem_calloc(1, sizeof *t);
  arena_init(&t->arena);
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
    if (!dtype_is_float(x->dtype)) continue;
    gnames[o] = name_grad(&t->arena, names[e->nin + o]);
    if (prog_var(p, gnames[o])) continue;
    VarDesc *d = prog_add_var(p, b, gnames[o]);
    d->dtype = x->dtype;
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
    bool share = a && d && dtype_is_float(a->dtype) && a->dtype == d->dtype;
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

/* The template of entry e with live inputs need: one of its class made
 * for these shapes and live inputs (moved to the front), or a new one. */
static Template *template_for(TapeGrad *tg, OpInfo *info, const TapeEntry *e, const bool *need) {
  int n = entry_sig(tg, e, need);
  for (Template **pt = &info->templates, *t; (t = *pt); pt = &t->next)
    if (t->nsig == n && memcmp(t->sig, tg->sig, sizeof *tg->sig * (size_t)n) == 0) {
      if (pt != &info->templates) *pt = t->next, t->next = info->templates, info->templates = t;
      return t;
    }
  Template *t = template_new(tg, e, need, n);
  if (!t) return NULL;
  t->next = info->templates;
  return info->templates = t;
}

/* ---- gradients -------------------------------------------------------------------------- */

/* acc + piece, as add_n adds: in place when nothing else holds acc. */
static Tensor *accumulate(Tensor *acc, Tensor *piece) {
  if (!acc) return tensor_ref(piece);
  Tensor *out = acc;
  if (acc->refs > 1 || acc->storage->refs > 1 || acc == piece) {
    out = tensor_copy(acc);
    tensor_unref(acc);
  }
  if (out->dtype != DT_F32 || piece->dtype != DT_F32) {   /* f64: through doubles */
    for (int64_t i = 0; i < out->numel; i++) tensor_set(out, i, tensor_get(out, i) + tensor_get(piece, i));
    return out;
  }
  float *o = tensor_f32(out);
  const float *x = tensor_f32(piece);
  for (int64_t i = 0; i < out->numel; i++) o[i] = o[i] + x[i];
  return out;
}

/* Runs entry e's grad ops and adds their results into its inputs'
 * gradients.  need: its live inputs. */
static int run_entry(TapeGrad *tg, const TapeEntry *e, OpInfo *info, const bool *need) {
  Template *t = template_for(tg, info, e, need);
  if (!t) return -1;
  Executor *x = t->ex;
  for (int k = 0; k < t->nvals; k++) exec_set(x, t->slot[k], e->vals[k]);
  for (int o = 0; o < e->nout; o++) {
    if (t->gslot[o] < 0) continue;
    Val *v = val_of(tg, e->vals[e->nin + o]);
    if (v->grad) {
      exec_set(x, t->gslot[o], v->grad);
    } else {
      const Tensor *out = e->vals[e->nin + o];
      Tensor *z = tensor_zeros(out->dtype == DT_F64 ? DT_F64 : DT_F32, out->rank, out->shape);
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
    Val *v = val_of(tg, e->vals[e->nin + o]);
    if (v->grad && !v->wanted) tensor_unref(v->grad), v->grad = NULL;
  }
  for (int j = 0; j < t->nneed; j++) {
    Val *v = val_of(tg, e->vals[t->need_val[j]]);
    for (int q = 0; q < t->npieces[j]; q++) {
      Tensor *piece = exec_get(x, t->pslot[j][q]);
      if (!piece || !dtype_is_float(piece->dtype) || piece->numel != v->t->numel) {
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
  /* 0. number every tensor and op (no Val moves after this) */
  number(&tg, loss);
  for (int i = 0; i < nwrt; i++) grads[i] = NULL, number(&tg, wrt[i]);
  for (int i = 0; i < nno_grad; i++)
    if (no_grad[i]) number(&tg, no_grad[i]);
  tg.infos = mem_calloc((size_t)t->nclasses + 1, sizeof *tg.infos);
  for (int i = 0; i < t->n; i++) {
    const TapeEntry *e = &t->entries[i];
    for (int k = 0; k < e->nin + e->nout; k++) number(&tg, e->vals[k]);
  }
  for (int i = 0; i < nno_grad; i++)
    if (no_grad[i]) val_of(&tg, no_grad[i])->frozen = true;
  for (int i = 0; i < nwrt; i++) {
    Val *v = val_of(&tg, wrt[i]);
    v->wanted = true;
    if (!v->frozen) v->live = true;
  }
  /* 1. live */
  bool *need = NULL;
  int capneed = 0, rc = 0;
  for (int i = 0; i < t->n; i++) {
    const TapeEntry *e = &t->entries[i];
    const OpInfo *info = op_info(&tg, e);
    bool any = false;
    for (int k = 0; k < e->nin && !any; k++) any = val_of(&tg, e->vals[k])->live && !input_stops(&tg, e, info, k);
    if (!any) continue;
    for (int k = e->nin; k < e->nin + e->nout; k++)
      if (dtype_is_float(e->vals[k]->dtype)) {
        Val *v = val_of(&tg, e->vals[k]);
        if (!v->frozen) v->live = true;
      }
  }
  /* 2. the seed */
  Val *lv = val_of(&tg, loss);
  if (lv->live) {
    lv->grad = tensor_new(loss->dtype == DT_F64 ? DT_F64 : DT_F32, loss->rank, loss->shape);
    for (int64_t i = 0; i < loss->numel; i++) tensor_set(lv->grad, i, 1.0);
    /* 3. entries in reverse */
    for (int i = t->n - 1; i >= 0 && rc == 0; i--) {
      const TapeEntry *e = &t->entries[i];
      bool has_grad = false;
      for (int k = e->nin; k < e->nin + e->nout && !has_grad; k++) has_grad = val_of(&tg, e->vals[k])->grad;
      if (!has_grad) continue;
      OpInfo *info = op_info(&tg, e);
      VEC_RESERVE(need, capneed, e->nin + 1);
      bool any = false;
      for (int k = 0; k < e->nin; k++) {
        need[k] = val_of(&tg, e->vals[k])->live && dtype_is_float(e->vals[k]->dtype) && !input_stops(&tg, e, info, k);
        any = any || need[k];
      }
      if (any) rc = run_entry(&tg, e, info, need);
    }
  }
  for (int i = 0; i < nwrt && rc == 0; i++) {
    Val *v = val_of(&tg, wrt[i]);
    grads[i] = v->grad ? tensor_ref(v->grad) : NULL;
  }
  for (int i = 0; i < tg.nvals; i++) {
    tensor_unref(tg.vals[i].grad);
    ((Tensor *)tg.vals[i].t)->mark = 0;
  }
  for (int i = 0; i < t->nclasses; i++)
    for (Template *tp = tg.infos[i].templates, *next; tp; tp = next) next = tp->next, template_free(tp);
  arena_free(&tg.arena);
  mem_free(tg.infos);
  mem_free(tg.vals);
  mem_free(tg.sig);
  mem_free(need);
  return rc;
}
