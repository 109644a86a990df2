/* backward.c — bwd_append: building the backward program (backward.h).
 *
 * Four passes over the forward program, then one per block of grad ops:
 *   1. live: which values depend on a parameter (forward, through ops that
 *      have a gradient, into loop bodies until the carried values settle);
 *   2. needed: which values the loss depends on (backward, likewise);
 *      a value gets a gradient if it is live, needed, f32, and neither in
 *      the no_grad set nor marked stop_gradient;
 *   3. grad ops: ops visited in reverse ask their grad makers for ops; the
 *      maker of a while or if op (src/ops/control.c) gets a grad block
 *      built recursively (bwd_sub_begin / bwd_sub_end);
 *   4. per block of grad ops: dead grad ops dropped, repeated writes
 *      renamed and summed by add_n, missing gradients made by
 *      fill_zeros_like, new variables declared and their shapes inferred,
 *      and a verify pass.
 *
 * Gradient names: the gradient of v is v@GRAD.  Inside the grad block of a
 * loop or branch body, the per-turn gradient of a variable from outside
 * the body (a parameter the body reads) is v@GRAD@B<block>, and the
 * while_grad / conditional_block_grad op sums those into v@GRAD outside.
 *
 * A script's grad(Y, X...) (bwd_grad) runs the same passes over the ops a
 * block holds when the call is lowered (its home block: block 0 or a loop
 * or branch body), appending the grad ops there, named at a level of their
 * own (v@GRAD@L1).  Those ops are forward ops to any later backward, which
 * differentiates them like the others: the gradient of x@GRAD@L1 is
 * x@GRAD@L1@GRAD.
 */
#include "autodiff/backward.h"

#include <assert.h>
#include <stdarg.h>
#include <string.h>

enum { MARK_LIVE = 1, MARK_NEED = 2, MARK_GRAD = 4 };

typedef struct OpList {
  OpDesc **ops;
  int n, cap;
} OpList;

/* Sets and counts of names: StrMaps on the heap, absent names counting 0. */
typedef StrMap NameSet;
static int set_get(const NameSet *m, const char *k) {
  int v = strmap_get(m, k);
  return v < 0 ? 0 : v;
}
static void set_put(NameSet *m, const char *k, int v) { strmap_put(NULL, m, k, v); }

typedef struct Backward {
  Program *p;
  Diag *diag;
  unsigned char *marks;          /* per variable, indexed by VarIndex */
  PtrMap *idx;
  int nvars;
  const char *const *no_grad;
  int nno_grad;
  Block *home;                   /* the block differentiated in place: block 0, or the
                                    block a script's grad(...) stands in */
  int nfwd;                      /* home's forward ops (earlier backwards follow) */
  const char *suffix;            /* "" for the first backward, "@L1", ... after */
  bool one_op;                   /* bwd_op_grads: leave repeated writes unsummed */
  bool zeros;                    /* bwd_grad: a wrt no gradient reaches gets zeros */
  bool failed;
  /* bwd_fresh: the stems of every variable, and those handed out since
   * (made on first use). */
  NameSet *stems;
  /* Grad ops whose forward op is another emitted op (bwd_emit_link). */
  struct Link {
    OpDesc *grad;
    const OpDesc *fwd;
  } *links;
  int nlinks, caplinks;
  /* Per-turn gradients a second backward hands from a grad block's grad
   * block to the grad block of the forward body whose turn it reads
   * (grad_name, take_injects): each one's name, its variable, that body
   * and the block that writes it. */
  struct Inject {
    const char *name, *var;
    int block, from;
    bool used;
  } *injects;
  int ninjects, capinjects;
} Backward;

struct GradCtx {
  Backward *bw;
  Block *fwd;                    /* the forward block */
  Block *gblock;                 /* where its grad ops go */
  const OpDesc *op;
  int op_index;
  const OpProto *proto;
  OpList *out;
  OpList sub;                    /* the grad ops of a sub-block being made */
};

/* ---- variable marks ------------------------------------------------------------
 * Marks live in a side array indexed by each variable's position among all
 * variables, found by its VarDesc's address (a PtrMap, mem.h), built once. */

/* A name that is no variable (@EMPTY@ in a grad op's slots) has a mark
 * that stays 0. */
static unsigned char mark_none;

static unsigned char *mark_of(Backward *bw, const char *name) {
  const VarDesc *v = prog_var(bw->p, name);
  int i = v ? ptrmap_get(bw->idx, v) : -1;
  mark_none = 0;
  return i >= 0 ? &bw->marks[i] : &mark_none;
}

static bool has_mark(Backward *bw, const char *name, unsigned m) { return name && (*mark_of(bw, name) & m) != 0; }

static bool set_mark(Backward *bw, const char *name, unsigned m) {
  if (name_is_empty(name)) return false;   /* a control grad op's empty slot entry */
  unsigned char *k = mark_of(bw, name);
  if ((*k & m) || k == &mark_none) return false;
  *k |= (unsigned char)m;
  return true;
}

static bool in_no_grad(Backward *bw, const char *name) {
  const VarDesc *v = prog_var(bw->p, name);
  for (int i = 0; i < bw->nno_grad; i++) {
    const char *var = prog_export(bw->p, bw->no_grad[i]);
    if (strcmp(bw->no_grad[i], name) == 0 || (var && strcmp(var, name) == 0)) return true;
    if (v && v->user_name && strcmp(v->user_name, bw->no_grad[i]) == 0 && v->block == 0 &&
        (v->flags & (VAR_PARAM | VAR_INPUT)))
      return true;
  }
  return false;
}

/* Can a gradient exist for this variable at all? */
static bool differentiable(Backward *bw, const char *name) {
  const VarDesc *v = prog_var(bw->p, name);
  return v && dtype_is_float(v->dtype) && !(v->flags & VAR_STOP_GRADIENT) && !in_no_grad(bw, name);
}

/* ---- pass 1: live values (depend on a parameter) ----------------------------------- */

static const Block *sub_block(const Program *p, const OpDesc *op, const char *attr) {
  const Attr *a = op_attr(op, attr);
  return a ? prog_block(p, (int)a->v.u.i) : NULL;
}

static unsigned flags_of(const Backward *bw, const OpDesc *op) {
  const OpProto *proto = reg_find_op(bw->p, op->type);
  return proto ? proto->flags : 0;
}

/* An op that owns blocks (while, conditional_block); a loop carries values
 * from turn to turn. */
static bool is_control(const Backward *bw, const OpDesc *op) {
  /* A control op's grad op (made by a script's grad(...)) is not a loop or
   * a branch of the forward: its slots are what it reads and writes. */
  return (flags_of(bw, op) & (OP_CONTROL | OP_KEPT_TURNS)) == OP_CONTROL;
}
static bool is_loop(const Backward *bw, const OpDesc *op) { return flags_of(bw, op) & OP_LOOP; }

/* A loop's or a branch's grad op (while_grad, conditional_block_grad),
 * which a second backward differentiates through its grad blocks. */
static bool is_control_grad(const Backward *bw, const OpDesc *op) {
  /* (the tape records one without its blocks: an op like any other) */
  return (flags_of(bw, op) & (OP_CONTROL | OP_KEPT_TURNS)) == (OP_CONTROL | OP_KEPT_TURNS) && op_attr(op, "sub_block");
}

static bool prop_live(Backward *bw, const Block *b);

static bool live_control(Backward *bw, const OpDesc *op) {
  bool changed = false;
  const Slot *x = op_input(op, "X"), *out = op_output(op, "Out");
  if (is_loop(bw, op)) {
    const Block *s = sub_block(bw->p, op, "sub_block");
    for (int iter = 0; iter < 64; iter++) {
      bool more = false;
      for (int k = 0; x && k < x->n && k < s->nargs; k++)
        if ((has_mark(bw, x->args[k], MARK_LIVE) || has_mark(bw, s->results[k], MARK_LIVE)) &&
            differentiable(bw, s->args[k]))
          more |= set_mark(bw, s->args[k], MARK_LIVE);
      more |= prop_live(bw, s);
      changed |= more;
      if (!more) break;
    }
    for (int k = 0; out && k < out->n; k++)
      if ((has_mark(bw, x->args[k], MARK_LIVE) || has_mark(bw, s->results[k], MARK_LIVE)) &&
          differentiable(bw, out->args[k]))
        changed |= set_mark(bw, out->args[k], MARK_LIVE);
  } else {
    const Block *t = sub_block(bw->p, op, "sub_block"), *e = sub_block(bw->p, op, "else_block");
    changed |= prop_live(bw, t);
    changed |= prop_live(bw, e);
    for (int k = 0; out && k < out->n; k++)
      if ((has_mark(bw, t->results[k], MARK_LIVE) || has_mark(bw, e->results[k], MARK_LIVE)) &&
          differentiable(bw, out->args[k]))
        changed |= set_mark(bw, out->args[k], MARK_LIVE);
  }
  return changed;
}

/* A control grad op's slot k entry, or NULL. */
static const char *slot_at(const Slot *s, int k) { return s && k >= 0 && k < s->n ? s->args[k] : NULL; }

/* What a control grad op feeds its block's arg k: Out@GRAD k, or past a
 * while_grad's nc carried gradients, its Seed. */
static const char *arg_source(const OpDesc *op, int k, int nc, bool loop) {
  return loop && k >= nc ? slot_at(op_input(op, "Seed"), k - nc) : slot_at(op_input(op, "Out@GRAD"), k);
}

/* A control grad op's slots and blocks: a while_grad (loop, with its nc
 * carried gradients) has one block, a conditional_block_grad two. */
typedef struct {
  const Slot *og, *xg, *ig;
  const Block *br[2];
  bool loop;
  int nc;
} ControlGrad;

static ControlGrad control_grad(const Backward *bw, const OpDesc *op) {
  ControlGrad g = {op_input(op, "Out@GRAD"), op_output(op, "X@GRAD"), op_output(op, "Input@GRAD"),
                   {sub_block(bw->p, op, "sub_block"), sub_block(bw->p, op, "else_block")}, false, 0};
  g.loop = !g.br[1];
  g.nc = g.loop ? slot_count(g.og) : 0;
  return g;
}

/* while_grad runs its block over the turns last first: the block's arg k
 * (the gradient of a turn's result k) is carried from the block's result
 * k, Out@GRAD k the first turn's, X@GRAD k the last turn's result k; its
 * results after the carried ones are summed into Input@GRAD.  A
 * conditional_block_grad's blocks take Out@GRAD as args and give
 * Input@GRAD as results. */
static bool live_control_grad(Backward *bw, const OpDesc *op) {
  bool changed = false;
  ControlGrad g = control_grad(bw, op);
  for (int j = 0; j < 2 && g.br[j]; j++) {
    const Block *s = g.br[j];
    for (int iter = 0; iter < 64; iter++) {
      bool more = false;
      for (int k = 0; k < s->nargs; k++)
        if ((has_mark(bw, arg_source(op, k, g.nc, g.loop), MARK_LIVE) || (k < g.nc && has_mark(bw, s->results[k], MARK_LIVE))) &&
            differentiable(bw, s->args[k]))
          more |= set_mark(bw, s->args[k], MARK_LIVE);
      more |= prop_live(bw, s);
      changed |= more;
      if (!more || !g.loop) break;
    }
    for (int k = 0; k < g.nc; k++)
      if ((has_mark(bw, slot_at(g.og, k), MARK_LIVE) || has_mark(bw, s->results[k], MARK_LIVE)) &&
          differentiable(bw, slot_at(g.xg, k)))
        changed |= set_mark(bw, slot_at(g.xg, k), MARK_LIVE);
    for (int k = 0; k < slot_count(g.ig) && g.nc + k < s->nresults; k++)
      if (has_mark(bw, s->results[g.nc + k], MARK_LIVE) && differentiable(bw, g.ig->args[k]))
        changed |= set_mark(bw, g.ig->args[k], MARK_LIVE);
  }
  return changed;
}

/* The forward ops of a block: in the home block, those before any backward. */
static int forward_ops(const Backward *bw, const Block *b) { return b == bw->home ? bw->nfwd : b->nops; }

static bool prop_live(Backward *bw, const Block *b) {
  bool changed = false;
  for (int i = 0; i < forward_ops(bw, b); i++) {
    const OpDesc *op = b->ops[i];
    if (is_control(bw, op) || is_control_grad(bw, op)) {
      changed |= is_control(bw, op) ? live_control(bw, op) : live_control_grad(bw, op);
      continue;
    }
    const OpProto *proto = reg_find_op(bw->p, op->type);
    /* An op with no gradient stops the flow when its gradient is zero by
     * definition (sign, stop_gradient); otherwise its outputs stay live, so
     * that differentiating through it is reported. */
    if (!proto || (proto->grad_kind == GRAD_NONE && (proto->flags & OP_ZERO_GRAD))) continue;
    bool any = false;
    for (int s = 0; s < op->nin && !any; s++) {
      int k = reg_slot_index(proto->in, proto->nin, op->in[s].name);
      if (k >= 0 && (proto->in[k].flags & SLOT_NO_GRAD)) continue;
      for (int j = 0; j < op->in[s].n && !any; j++) any = has_mark(bw, op->in[s].args[j], MARK_LIVE);
    }
    if (!any) continue;
    for (int s = 0; s < op->nout; s++)
      for (int j = 0; j < op->out[s].n; j++)
        if (differentiable(bw, op->out[s].args[j])) changed |= set_mark(bw, op->out[s].args[j], MARK_LIVE);
  }
  return changed;
}

/* ---- pass 2: needed values (the loss depends on them) ------------------------------- */

static bool prop_need(Backward *bw, const Block *b);

static bool need_control(Backward *bw, const OpDesc *op) {
  bool changed = false;
  const Slot *x = op_input(op, "X"), *out = op_output(op, "Out");
  if (is_loop(bw, op)) {
    const Block *s = sub_block(bw->p, op, "sub_block");
    for (int k = 0; out && k < out->n; k++)
      if (has_mark(bw, out->args[k], MARK_NEED)) changed |= set_mark(bw, s->results[k], MARK_NEED);
    for (int iter = 0; iter < 64; iter++) {
      bool more = prop_need(bw, s);
      for (int k = 0; k < s->nargs; k++)
        if (has_mark(bw, s->args[k], MARK_NEED)) more |= set_mark(bw, s->results[k], MARK_NEED);
      changed |= more;
      if (!more) break;
    }
    for (int k = 0; x && k < x->n && k < s->nargs; k++)
      if (has_mark(bw, s->args[k], MARK_NEED) || has_mark(bw, out->args[k], MARK_NEED))
        changed |= set_mark(bw, x->args[k], MARK_NEED);
  } else {
    const Block *br[2] = {sub_block(bw->p, op, "sub_block"), sub_block(bw->p, op, "else_block")};
    for (int j = 0; j < 2; j++) {
      for (int k = 0; out && k < out->n; k++)
        if (has_mark(bw, out->args[k], MARK_NEED)) changed |= set_mark(bw, br[j]->results[k], MARK_NEED);
      changed |= prop_need(bw, br[j]);
    }
  }
  return changed;
}

/* The needed values of a control grad op's blocks (see live_control_grad);
 * the forward values its blocks read become needed too, so the backward of
 * the loop or branch that made them gets them their gradients. */
static bool need_control_grad(Backward *bw, const OpDesc *op) {
  bool changed = false;
  ControlGrad g = control_grad(bw, op);
  for (int j = 0; j < 2 && g.br[j]; j++) {
    const Block *s = g.br[j];
    for (int k = 0; k < g.nc && k < s->nresults; k++)
      if (has_mark(bw, slot_at(g.xg, k), MARK_NEED)) changed |= set_mark(bw, s->results[k], MARK_NEED);
    for (int k = 0; k < slot_count(g.ig) && g.nc + k < s->nresults; k++)
      if (has_mark(bw, g.ig->args[k], MARK_NEED)) changed |= set_mark(bw, s->results[g.nc + k], MARK_NEED);
    for (int iter = 0; iter < 64; iter++) {
      bool more = prop_need(bw, s);
      for (int k = 0; k < g.nc && k < s->nargs; k++)
        if (has_mark(bw, s->args[k], MARK_NEED)) more |= set_mark(bw, s->results[k], MARK_NEED);
      changed |= more;
      if (!more || !g.loop) break;
    }
    for (int k = 0; k < s->nargs || k < slot_count(g.og); k++) {
      const char *from = arg_source(op, k, g.nc, g.loop);
      if (from && ((k < s->nargs && has_mark(bw, s->args[k], MARK_NEED)) || (k < g.nc && has_mark(bw, slot_at(g.xg, k), MARK_NEED))))
        changed |= set_mark(bw, from, MARK_NEED);
    }
  }
  return changed;
}

static bool prop_need(Backward *bw, const Block *b) {
  bool changed = false;
  for (int i = forward_ops(bw, b) - 1; i >= 0; i--) {
    const OpDesc *op = b->ops[i];
    if (is_control(bw, op) || is_control_grad(bw, op)) {
      changed |= is_control(bw, op) ? need_control(bw, op) : need_control_grad(bw, op);
      continue;
    }
    bool any = false;
    for (int s = 0; s < op->nout && !any; s++)
      for (int j = 0; j < op->out[s].n && !any; j++) any = has_mark(bw, op->out[s].args[j], MARK_NEED);
    if (!any) continue;
    /* A value the loss reads only through slots that take no gradient
     * (labels, a user op's input its grad body leaves alone) needs none. */
    const OpProto *proto = reg_find_op(bw->p, op->type);
    for (int s = 0; s < op->nin; s++) {
      int k = proto ? reg_slot_index(proto->in, proto->nin, op->in[s].name) : -1;
      if (k >= 0 && (proto->in[k].flags & SLOT_NO_GRAD)) continue;
      for (int j = 0; j < op->in[s].n; j++) changed |= set_mark(bw, op->in[s].args[j], MARK_NEED);
    }
  }
  return changed;
}

/* ---- names ------------------------------------------------------------------------ */

/* The gradient of v inside grad block g (whose forward block is g->fwd_block,
 * or the home block itself, where no gradient is per turn). */
static const char *grad_name(Backward *bw, const Block *g, const char *v) {
  const VarDesc *d = prog_var(bw->p, v);
  bool home = g == bw->home;
  bool here = !d || d->block == (home ? g->idx : g->fwd_block) || (home && g->idx != 0);
  const char *name = name_grad_at(bw->p->arena, v, bw->suffix, here ? -1 : g->idx);
  /* In the grad block g of a loop's or branch's grad block F, a value of
   * F's forward body is a value of the turn F ran in: its gradient there
   * is handed to that turn's grad block (take_injects). */
  const Block *f = !here && !home && g->fwd_block >= 0 ? prog_block(bw->p, g->fwd_block) : NULL;
  if (f && f->fwd_block >= 0 && d->block == f->fwd_block) {
    for (int i = 0; i < bw->ninjects; i++)
      if (strcmp(bw->injects[i].name, name) == 0) return name;
    VEC_RESERVE(bw->injects, bw->capinjects, bw->ninjects + 1);
    bw->injects[bw->ninjects++] = (struct Inject){name, d->name, d->block, g->idx, false};
  }
  return name;
}

/* Does block b, or a block inside it, write a per-turn gradient that a
 * later grad block reads (so the op that runs b stays)? */
static bool block_injects(const Backward *bw, int b) {
  for (int i = 0; i < bw->ninjects; i++)
    for (const Block *k = prog_block(bw->p, bw->injects[i].from); k; k = k->parent >= 0 ? prog_block(bw->p, k->parent) : NULL)
      if (k->idx == b) return true;
  return false;
}

/* The forward body a per-turn gradient is handed to (its variable is
 * declared there, so each turn's frame holds its own), or -1. */
static int inject_block(const Backward *bw, const char *name) {
  for (int i = 0; i < bw->ninjects; i++)
    if (strcmp(bw->injects[i].name, name) == 0) return bw->injects[i].block;
  return -1;
}

static bool needs_grad(Backward *bw, const char *v) { return has_mark(bw, v, MARK_GRAD); }

/* ---- the grad-maker interface --------------------------------------------------------- */

int bwd_op_nin(GradCtx *g, const char *slot) { return slot_count(op_input(g->op, slot)); }
const char *bwd_op_in(GradCtx *g, const char *slot, int i) { return slot_arg(op_input(g->op, slot), i); }
int bwd_op_nout(GradCtx *g, const char *slot) { return slot_count(op_output(g->op, slot)); }
const char *bwd_op_out(GradCtx *g, const char *slot, int i) { return slot_arg(op_output(g->op, slot), i); }

const char *bwd_op_in_grad(GradCtx *g, const char *slot, int i) {
  const char *v = bwd_op_in(g, slot, i);
  if (!v || !needs_grad(g->bw, v)) return NULL;
  return grad_name(g->bw, g->gblock, v);
}

const char *bwd_op_out_grad(GradCtx *g, const char *slot, int i) {
  const char *v = bwd_op_out(g, slot, i);
  return v ? grad_name(g->bw, g->gblock, v) : NULL;
}

const AttrValue *bwd_op_attr(GradCtx *g, const char *name) { return reg_op_attr(g->proto, g->op, name); }

const OpDesc *bwd_op_fwd(GradCtx *g) { return g->op; }
Program *bwd_prog(GradCtx *g) { return g->bw->p; }

OpDesc *bwd_emit(GradCtx *g, const char *type) {
  OpDesc *op = op_new(g->bw->p, type, g->op->span);
  op->call = g->op->call;
  op->fwd_block = g->fwd->idx;
  op->fwd_op = g->op_index;
  VEC_RESERVE(g->out->ops, g->out->cap, g->out->n + 1);
  g->out->ops[g->out->n++] = op;
  return op;
}

void bwd_emit_in(GradCtx *g, OpDesc *op, const char *slot, const char *var) {
  slot_push(g->bw->p, op_add_input(g->bw->p, op, slot), var);
}

void bwd_emit_out(GradCtx *g, OpDesc *op, const char *slot, const char *var) {
  slot_push(g->bw->p, op_add_output(g->bw->p, op, slot), var);
}

void bwd_emit_attr(GradCtx *g, OpDesc *op, const char *name, AttrValue v) { op_set_attr(g->bw->p, op, name, v); }

void bwd_emit_attrs(GradCtx *g, OpDesc *op) {
  const OpProto *p = reg_find_op(g->bw->p, op->type);
  for (int a = 0; p && a < p->nattrs; a++) {
    const AttrValue *v = bwd_op_attr(g, p->attrs[a].name);
    if (v) bwd_emit_attr(g, op, p->attrs[a].name, *v);
  }
}

const char *bwd_temp(GradCtx *g) { return prog_temp(g->bw->p); }

const char *bwd_fresh(GradCtx *g, const char *base) {
  Backward *bw = g->bw;
  Program *p = bw->p;
  if (!bw->stems) {
    /* Every variable's stem, once: a stem some gradient name is built on
     * (v@GRAD@L1 of an earlier backward) is taken even if v is not. */
    bw->stems = mem_calloc(1, sizeof *bw->stems);
    for (int b = 0; b < p->nblocks; b++)
      for (int i = 0; i < p->blocks[b]->nvars; i++) set_put(bw->stems, name_stem(p->arena, p->blocks[b]->vars[i]->name), 1);
  }
  for (int k = 0;; k++) {
    const char *s = k ? arena_printf(p->arena, "%s.%d", base, k) : arena_strdup(p->arena, base);
    if (prog_name_used(p, s) || set_get(bw->stems, s)) continue;
    set_put(bw->stems, s, 1);
    return s;
  }
}

Block *bwd_grad_block(GradCtx *g) { return g->gblock; }

void bwd_emit_link(GradCtx *g, OpDesc *grad, const OpDesc *fwd) {
  Backward *bw = g->bw;
  VEC_RESERVE(bw->links, bw->caplinks, bw->nlinks + 1);
  bw->links[bw->nlinks++] = (struct Link){grad, fwd};
}

/* The forward op an emitted op was linked to, or NULL. */
static const OpDesc *linked_fwd(const Backward *bw, const OpDesc *op) {
  for (int i = 0; i < bw->nlinks; i++)
    if (bw->links[i].grad == op) return bw->links[i].fwd;
  return NULL;
}

/* Op `type` reading ins[0..n) through its first n input slots and writing
 * out through its first output slot, in the order its proto declares them. */
static OpDesc *emit_call(GradCtx *g, const char *type, const char *const *ins, int n, const char *out) {
  const OpProto *p = reg_find_op(g->bw->p, type);
  assert(p && p->nin >= n && p->nout >= 1);   /* makers name ops of the registry */
  OpDesc *op = bwd_emit(g, type);
  for (int i = 0; i < n; i++) bwd_emit_in(g, op, p->in[i].name, ins[i]);
  bwd_emit_out(g, op, p->out[0].name, out);
  return op;
}

OpDesc *bwd_emit1(GradCtx *g, const char *type, const char *x, const char *out) {
  return emit_call(g, type, &x, 1, out);
}

OpDesc *bwd_emit2(GradCtx *g, const char *type, const char *x, const char *y, const char *out) {
  const char *ins[2] = {x, y};
  return emit_call(g, type, ins, 2, out);
}

/* ---- the default grad maker ------------------------------------------------------------
 * A GRAD_DEDICATED op without a maker of its own gets one <type>_grad op
 * wired from that op's proto by the slot-naming convention (Paddle's
 * DefaultGradOpMaker): each input slot the grad op declares is fed the
 * forward's input or output slot of that name, or for NAME@GRAD the
 * gradients of forward output NAME; each output slot NAME@GRAD receives
 * the gradients of forward input NAME that are needed (not a list: which
 * of a list's would be lost, so concat has a maker of its own); each
 * attribute the grad op declares is copied from the forward op.  Nothing
 * is emitted when no gradient is needed. */

/* The length of NAME in a slot name "NAME@GRAD", or 0. */
static size_t grad_stem(const char *name) {
  size_t n = strlen(name);
  return n > 5 && strcmp(name + n - 5, "@GRAD") == 0 ? n - 5 : 0;
}

/* The slot among slots[0..n) named by the first len characters of name. */
static const Slot *slot_named(const Slot *slots, int n, const char *name, size_t len) {
  for (int i = 0; i < n; i++)
    if (strncmp(slots[i].name, name, len) == 0 && slots[i].name[len] == '\0') return &slots[i];
  return NULL;
}

int bwd_default_grad(GradCtx *g) {
  Backward *bw = g->bw;
  const OpDesc *fwd = g->op;
  char type[160];
  const OpProto *gp = NULL;
  if (name_grad_op(type, sizeof type, fwd->type)) gp = reg_find_op(bw->p, type);
  bool list = false;
  for (int s = 0; gp && s < gp->nout; s++) list |= (gp->out[s].flags & SLOT_LIST) != 0;
  if (!gp || list) {
    diag_error(bw->p->diag, fwd->span, "internal error: %s has no grad maker, and no op %s_grad without lists",
               fwd->type, fwd->type);
    return -1;
  }
  bool any = false;
  for (int s = 0; s < gp->nout && !any; s++) {
    const char *name = gp->out[s].name;
    const Slot *x = slot_named(fwd->in, fwd->nin, name, grad_stem(name));
    for (int i = 0; x && i < x->n && !any; i++) any = needs_grad(bw, x->args[i]);
  }
  if (!any) return 0;
  OpDesc *op = bwd_emit(g, gp->type);
  for (int s = 0; s < gp->nin; s++) {
    const char *name = gp->in[s].name;
    size_t stem = grad_stem(name);
    const Slot *x = stem ? slot_named(fwd->out, fwd->nout, name, stem) : op_input(fwd, name);
    if (!x && !stem) x = op_output(fwd, name);
    for (int i = 0; x && i < x->n; i++) bwd_emit_in(g, op, name, stem ? grad_name(bw, g->gblock, x->args[i]) : x->args[i]);
  }
  for (int s = 0; s < gp->nout; s++) {
    const char *name = gp->out[s].name;
    const Slot *x = slot_named(fwd->in, fwd->nin, name, grad_stem(name));
    for (int i = 0; x && i < x->n; i++) {
      const char *d = needs_grad(bw, x->args[i]) ? grad_name(bw, g->gblock, x->args[i]) : NULL;
      if (d) bwd_emit_out(g, op, gp->out[s].name, d);
    }
  }
  for (int a = 0; a < gp->nattrs; a++) {
    const AttrValue *v = bwd_op_attr(g, gp->attrs[a].name);
    if (v) bwd_emit_attr(g, op, gp->attrs[a].name, *v);
  }
  return 0;
}

/* Whether a value of src_shape's shape needs no reduction to like's. */
static bool same_shape(GradCtx *g, const char *src_shape, const char *like) {
  const VarDesc *a = prog_var(g->bw->p, src_shape), *b = prog_var(g->bw->p, like);
  bool same = a && b && a->shape.rank >= 0 && shape_eq(&a->shape, &b->shape);
  for (int i = 0; same && i < a->shape.rank; i++) same = a->shape.d[i].n >= 0 || a->shape.d[i].sym;
  return same;
}

const char *bwd_target(GradCtx *g, const char *src_shape, const char *like, const char *dst) {
  return same_shape(g, src_shape, like) ? dst : bwd_temp(g);
}

void bwd_reduce_like(GradCtx *g, const char *src, const char *src_shape, const char *like, const char *dst) {
  if (src == dst) return;
  if (same_shape(g, src_shape, like)) bwd_emit1(g, "assign", src, dst);
  else bwd_emit2(g, "sum_like", src, like, dst);
}

/* ---- pass 3: grad ops ------------------------------------------------------------------- */

static bool build_block(Backward *bw, Block *fwd, Block *g, int nfwd, OpList *out);
static void insert_op(OpList *l, int at, OpDesc *op);
static void finish_block(Backward *bw, Block *g, OpList *list, const char *const *targets, int ntargets,
                         const char *const *args, int nargs);

static void vfail_at(Backward *bw, Span at, const char *fmt, va_list ap) {
  diag_verror(bw->diag, at, fmt, ap);
  bw->failed = true;
}

static void fail_at(Backward *bw, Span at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail_at(Backward *bw, Span at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail_at(bw, at, fmt, ap);
  va_end(ap);
}

/* ---- grad sub-blocks (the makers of ops that own blocks) ------------------------------- */

/* The per-turn gradients handed to fwd's grad block gs: each is added to
 * its value's gradient there (an assign first, summed with the other
 * writes by finish_block). */
static void take_injects(Backward *bw, const Block *fwd, const Block *gs, OpList *list) {
  Program *p = bw->p;
  for (int i = 0; i < bw->ninjects; i++) {
    struct Inject *in = &bw->injects[i];
    if (in->block != fwd->idx || !prog_var(p, in->name) || !needs_grad(bw, in->var)) continue;
    const VarDesc *v = prog_var(p, in->var);
    OpDesc *op = op_new(p, "assign", v->span);
    slot_push(p, op_add_input(p, op, "X"), in->name);
    slot_push(p, op_add_output(p, op, "Out"), grad_name(bw, gs, in->var));
    insert_op(list, 0, op);
    in->used = true;
  }
}

Block *bwd_sub_begin(GradCtx *g, const Block *fwd) {
  Program *p = g->bw->p;
  Block *gs = prog_add_block(p, fwd->idx);
  gs->fwd_block = fwd->idx;
  g->sub = (OpList){0};
  if (build_block(g->bw, (Block *)fwd, gs, fwd->nops, &g->sub)) {
    take_injects(g->bw, fwd, gs, &g->sub);
    return gs;
  }
  mem_free(g->sub.ops);
  g->sub = (OpList){0};
  return NULL;
}

const char *bwd_sub_grad(GradCtx *g, const Block *gb, const char *v) { return grad_name(g->bw, gb, v); }

bool bwd_needs_grad(GradCtx *g, const char *v) { return needs_grad(g->bw, v); }

void bwd_sub_end(GradCtx *g, Block *gb, const char *const *targets, int ntargets, const char *const *args, int nargs) {
  finish_block(g->bw, gb, &g->sub, targets, ntargets, args, nargs);
  mem_free(g->sub.ops);
  g->sub = (OpList){0};
}

int bwd_fail(GradCtx *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail_at(g->bw, g->op->span, fmt, ap);
  va_end(ap);
  return -1;
}

/* Does forward body b (or a loop or branch in it) hold a value that is
 * both live and needed? */
static bool body_wanted(Backward *bw, const Block *b) {
  for (int i = 0; i < b->nvars; i++)
    if (has_mark(bw, b->vars[i]->name, MARK_NEED) && has_mark(bw, b->vars[i]->name, MARK_LIVE)) return true;
  for (int i = 0; i < b->nops; i++) {
    const Block *s = is_control(bw, b->ops[i]) ? sub_block(bw->p, b->ops[i], "sub_block") : NULL;
    const Block *e = s ? sub_block(bw->p, b->ops[i], "else_block") : NULL;
    if ((s && body_wanted(bw, s)) || (e && body_wanted(bw, e))) return true;
  }
  return false;
}

/* Does op have an input whose gradient is needed, and an output the loss
 * depends on? */
static bool op_wants_grad(Backward *bw, const OpDesc *op, const OpProto *proto) {
  bool in_grad = false, out_need = false;
  for (int s = 0; s < op->nin && !in_grad; s++) {
    int k = proto ? reg_slot_index(proto->in, proto->nin, op->in[s].name) : -1;
    if (k >= 0 && (proto->in[k].flags & SLOT_NO_GRAD)) continue;
    for (int j = 0; j < op->in[s].n && !in_grad; j++) in_grad = needs_grad(bw, op->in[s].args[j]);
  }
  for (int s = 0; s < op->nout && !out_need; s++)
    for (int j = 0; j < op->out[s].n && !out_need; j++)
      out_need = has_mark(bw, op->out[s].args[j], MARK_NEED) && has_mark(bw, op->out[s].args[j], MARK_LIVE);
  /* A loop or branch whose outputs the loss does not read may still owe
   * its turns' values gradients that a second backward hands in. */
  const char *attrs[2] = {"sub_block", "else_block"};
  for (int k = 0; k < 2 && !out_need && in_grad && is_control(bw, op); k++) {
    const Block *b = sub_block(bw->p, op, attrs[k]);
    out_need = b && body_wanted(bw, b);
  }
  return in_grad && out_need;
}

/* The forward op whose gradient an op computes (an op a script's grad(...)
 * placed in the program), or NULL for an op of the script. */
static const OpDesc *grad_op_source(const Backward *bw, const OpDesc *op) {
  const Block *b = op->fwd_block >= 0 && op->fwd_block < bw->p->nblocks ? bw->p->blocks[op->fwd_block] : NULL;
  return b && op->fwd_op >= 0 && op->fwd_op < b->nops ? b->ops[op->fwd_op] : NULL;
}

/* The grad ops of forward block fwd's first nfwd ops, in reverse, into out. */
static bool build_block(Backward *bw, Block *fwd, Block *g, int nfwd, OpList *out) {
  for (int i = nfwd - 1; i >= 0 && !bw->failed; i--) {
    const OpDesc *op = fwd->ops[i];
    const OpProto *proto = reg_find_op(bw->p, op->type);
    if (!op_wants_grad(bw, op, proto)) continue;
    if (proto && (proto->flags & OP_AFTER_BACKWARD)) {
      fail_at(bw, op->span, "internal error: %s is made after every backward is built, yet a backward met it",
              op->type);
      return false;
    }
    const OpDesc *src = grad_op_source(bw, op);
    const OpProto *sp = src ? reg_find_op(bw->p, src->type) : NULL;
    if (proto && (proto->flags & OP_CONTROL) && op->fwd_op >= 0 &&
        (!(proto->flags & OP_KEPT_TURNS) || (sp && (sp->flags & OP_KEPT_TURNS)))) {
      /* a loop or branch of an earlier backward (a user op's grad body), or
       * a loop's or branch's second backward */
      fail_at(bw, op->span,
              "%s: %s", op->type, (proto->flags & OP_KEPT_TURNS)
                  ? "the second backward of a loop or a branch cannot be differentiated again "
                    "(a third-order gradient through while or if)"
                  : "the backward of a loop or a branch cannot be differentiated again yet "
                    "(a second-order gradient through while or if)");
      return false;
    }
    GradCtx c = {.bw = bw, .fwd = fwd, .gblock = g, .op = op, .op_index = i, .proto = proto, .out = out};
    GradMakerFn maker = !proto ? NULL : proto->grad ? proto->grad : proto->grad_kind == GRAD_DEDICATED ? bwd_default_grad : NULL;
    if (!proto || proto->grad_kind == GRAD_NONE || !maker) {
      if (proto && (proto->flags & OP_ZERO_GRAD)) continue;
      const OpDesc *of = grad_op_source(bw, op);
      if (proto && (proto->flags & OP_KEPT_TURNS))
        fail_at(bw, op->span,
                "%s: the backward of a loop or a branch cannot be differentiated again yet "
                "(a second-order gradient through while or if)", op->type);
      else if (of)
        fail_at(bw, op->span, "%s, in the gradient of this %s, has no gradient: the gradient "
                "cannot be differentiated again", op->type, of->type);
      else if (!proto || proto->grad_kind == GRAD_NONE)
        fail_at(bw, op->span, "%s has no gradient, but the loss depends on a parameter through it", op->type);
      else
        fail_at(bw, op->span, "%s: its gradient is not implemented yet", op->type);
      return false;
    }
    int before = out->n;
    if (maker(&c) < 0) {
      bw->failed = true;
      return false;
    }
    /* Fill the defaults of the ops the maker emitted. */
    for (int k = before; k < out->n; k++) {
      const OpProto *gp = reg_find_op(bw->p, out->ops[k]->type);
      if (!gp) {
        fail_at(bw, op->span, "internal error: the grad maker of %s emitted unknown op '%s'", op->type,
                out->ops[k]->type);
        return false;
      }
      reg_fill_defaults(bw->p, out->ops[k], gp);
    }
  }
  return !bw->failed;
}

/* ---- pass 4: tidy a block of grad ops -------------------------------------------------- */

static void push_op(OpList *l, OpDesc *op) {
  VEC_RESERVE(l->ops, l->cap, l->n + 1);
  l->ops[l->n++] = op;
}

static void insert_op(OpList *l, int at, OpDesc *op) {
  VEC_RESERVE(l->ops, l->cap, l->n + 1);
  memmove(&l->ops[at + 1], &l->ops[at], sizeof *l->ops * (size_t)(l->n - at));
  l->ops[at] = op;
  l->n++;
}

/* Dead grad ops: keep what leads to a target. */
static void prune_dead(Backward *bw, OpList *list, const char *const *targets, int ntargets) {
  NameSet live = {0};
  for (int t = 0; t < ntargets; t++)
    if (targets[t]) set_put(&live, targets[t], 1);
  for (int i = 0; i < bw->ninjects; i++) set_put(&live, bw->injects[i].name, 1);   /* handed on */
  bool *keep = mem_calloc((size_t)list->n + 1, sizeof *keep);
  for (int i = list->n - 1; i >= 0; i--) {
    OpDesc *op = list->ops[i];
    const Attr *sb = op_attr(op, "sub_block"), *eb = op_attr(op, "else_block");
    keep[i] = keep[i] || (sb && block_injects(bw, (int)sb->v.u.i)) || (eb && block_injects(bw, (int)eb->v.u.i));
    for (int s = 0; s < op->nout && !keep[i]; s++)
      for (int j = 0; j < op->out[s].n && !keep[i]; j++) keep[i] = set_get(&live, op->out[s].args[j]);
    if (!keep[i]) continue;
    for (int s = 0; s < op->nin; s++)
      for (int j = 0; j < op->in[s].n; j++) set_put(&live, op->in[s].args[j], 1);
    /* A kept grad op of an emitted loop or branch keeps that op, whose
     * turns it runs over. */
    const OpDesc *fwd = linked_fwd(bw, op);
    for (int k = 0; fwd && k < i; k++)
      if (list->ops[k] == fwd) keep[k] = true;
  }
  int n = 0;
  for (int i = 0; i < list->n; i++)
    if (keep[i]) list->ops[n++] = list->ops[i];
  list->n = n;
  mem_free(keep);
  strmap_free(&live);
}

/* Repeated writes: count the writers of every gradient (a block arg
 * counts as one, first), rename each write and sum them after the last.
 * Returns the block's args as declared: renamed too when repeated. */
static const char **sum_repeated(Backward *bw, OpList *list, const char *const *args, int nargs) {
  Program *p = bw->p;
  NameSet writers = {0}, seen = {0};
  for (int a = 0; a < nargs; a++)
    if (!name_is_empty(args[a])) set_put(&writers, args[a], set_get(&writers, args[a]) + 1);
  for (int i = 0; i < list->n; i++)
    for (int s = 0; s < list->ops[i]->nout; s++)
      for (int j = 0; j < list->ops[i]->out[s].n; j++) {
        const char *o = list->ops[i]->out[s].args[j];
        if (strcmp(o, NAME_EMPTY) != 0) set_put(&writers, o, set_get(&writers, o) + 1);
      }
  const char **arg_names = arena_alloc(p->arena, sizeof *arg_names * (size_t)(nargs + 1));
  for (int a = 0; a < nargs; a++) {
    arg_names[a] = args[a];
    if (set_get(&writers, args[a]) > 1) {
      arg_names[a] = name_rename(p->arena, args[a], 0);
      set_put(&seen, args[a], 1);
    }
  }
  /* Rename each write of a repeated gradient; after its last write, sum
   * (the list is built anew: inserting in place would cost the list's
   * length per sum). */
  OpList out = {0};
  for (int i = 0; i < list->n; i++) {
    OpDesc *op = list->ops[i];
    push_op(&out, op);
    for (int s = 0; s < op->nout; s++)
      for (int j = 0; j < op->out[s].n; j++) {
        const char *o = op->out[s].args[j];
        int total = set_get(&writers, o);
        if (total < 2) continue;
        int k = set_get(&seen, o);
        op->out[s].args[j] = name_rename(p->arena, o, k);
        set_put(&seen, o, k + 1);
        if (k + 1 == total && !bw->one_op) {
          OpDesc *sum = op_new(p, "add_n", op->span);
          sum->fwd_block = op->fwd_block;
          sum->fwd_op = op->fwd_op;
          Slot *x = op_add_input(p, sum, "X");
          for (int r = 0; r < total; r++) slot_push(p, x, name_rename(p->arena, o, r));
          slot_push(p, op_add_output(p, sum, "Out"), o);
          push_op(&out, sum);
        }
      }
  }
  mem_free(list->ops);
  *list = out;
  strmap_free(&writers);
  strmap_free(&seen);
  return arg_names;
}

/* Missing gradients: a grad op reads one that nothing wrote: zeros. */
static void zero_fill(Backward *bw, OpList *list, const char *const *targets, int ntargets, const char **arg_names,
                      int nargs) {
  Program *p = bw->p;
  NameSet written = {0};
  for (int a = 0; a < nargs; a++) set_put(&written, arg_names[a], 1);
  OpList filled = {0};
  for (int i = 0; i < list->n; i++) {
    OpDesc *op = list->ops[i];
    for (int s = 0; s < op->nin; s++)
      for (int j = 0; j < op->in[s].n; j++) {
        const char *v = op->in[s].args[j];
        if (!name_is_grad(v) || set_get(&written, v) || prog_var(p, v) || strcmp(v, NAME_EMPTY) == 0) continue;
        OpDesc *z = op_new(p, "fill_zeros_like", op->span);
        z->fwd_block = op->fwd_block;
        z->fwd_op = op->fwd_op;
        slot_push(p, op_add_input(p, z, "X"), name_grad_of(p->arena, v));
        slot_push(p, op_add_output(p, z, "Out"), v);
        push_op(&filled, z);
        set_put(&written, v, 1);
      }
    push_op(&filled, op);
    for (int s = 0; s < op->nout; s++)
      for (int j = 0; j < op->out[s].n; j++) set_put(&written, op->out[s].args[j], 1);
  }
  mem_free(list->ops);
  *list = filled;
  for (int t = 0; t < ntargets && !bw->one_op; t++)
    if (targets[t] && !set_get(&written, targets[t]) && !prog_var(p, targets[t])) {
      OpDesc *z = op_new(p, "fill_zeros_like", SPAN_NONE);
      slot_push(p, op_add_input(p, z, "X"), name_grad_of(p->arena, targets[t]));
      slot_push(p, op_add_output(p, z, "Out"), targets[t]);
      insert_op(list, list->n, z);
      set_put(&written, targets[t], 1);
    }
  strmap_free(&written);
}

/* Declare the block's args and results, then every new variable, with
 * its shape from inference. */
static void declare(Backward *bw, Block *g, OpList *list, const char *const *targets, int ntargets,
                    const char **arg_names, int nargs) {
  Program *p = bw->p;
  for (int a = 0; a < nargs && g != bw->home; a++) {
    if (strcmp(arg_names[a], NAME_EMPTY) == 0) {
      *ARENA_PUSH(p->arena, g->args, g->nargs, g->capargs) = NAME_EMPTY;
      continue;
    }
    const VarDesc *f = prog_var(p, name_grad_of(p->arena, arg_names[a]));
    VarDesc *v = prog_var(p, arg_names[a]) ? prog_var(p, arg_names[a]) : prog_add_var(p, g, arg_names[a]);
    if (f) v->dtype = f->dtype, v->shape = f->shape;
    v->flags |= VAR_ARG;
    *ARENA_PUSH(p->arena, g->args, g->nargs, g->capargs) = v->name;
  }
  for (int i = 0; i < list->n; i++) {
    OpDesc *op = list->ops[i];
    for (int s = 0; s < op->nout; s++)
      for (int j = 0; j < op->out[s].n; j++) {
        const char *o = op->out[s].args[j];
        if (strcmp(o, NAME_EMPTY) == 0 || prog_var(p, o)) continue;
        int at = inject_block(bw, o);
        VarDesc *v = prog_add_var(p, at >= 0 ? p->blocks[at] : g, o);
        v->span = op->span;
      }
    op_append(g, p, op);
    if (!reg_infer(p, g, op)) bw->failed = true;
  }
  /* Linked grad ops find their forward op's turns by its final place. */
  for (int i = 0; i < g->nops; i++) {
    const OpDesc *fwd = linked_fwd(bw, g->ops[i]);
    for (int k = 0; fwd && k < g->nops; k++)
      if (g->ops[k] == fwd) g->ops[i]->fwd_block = g->idx, g->ops[i]->fwd_op = k;
  }
  if (g != bw->home)
    for (int t = 0; t < ntargets; t++)
      *ARENA_PUSH(p->arena, g->results, g->nresults, g->capresults) = targets[t] ? targets[t] : NAME_EMPTY;
}

/* The grad ops of list made block g's: the dead pruned, repeated writes
 * summed, missing gradients zero-filled, then declared and appended. */
static void finish_block(Backward *bw, Block *g, OpList *list, const char *const *targets, int ntargets,
                         const char *const *args, int nargs) {
  prune_dead(bw, list, targets, ntargets);
  const char **arg_names = sum_repeated(bw, list, args, nargs);
  zero_fill(bw, list, targets, ntargets, arg_names, nargs);
  declare(bw, g, list, targets, ntargets, arg_names, nargs);
}

/* ---- verify ------------------------------------------------------------------------------ */

/* Every gradient a grad op reads is written before, in its block, or is an
 * arg of the block, or comes from an enclosing block. */
static bool verify_block(Backward *bw, const Block *b, int first) {
  Program *p = bw->p;
  NameSet written = {0};
  for (int a = 0; a < b->nargs; a++) set_put(&written, b->args[a], 1);
  /* What the forward ops read and write is there: gradients among them
   * were made by a script's grad(...). */
  for (int i = 0; i < first; i++) {
    const OpDesc *op = b->ops[i];
    for (int s = 0; s < op->nin; s++)
      for (int j = 0; j < op->in[s].n; j++) set_put(&written, op->in[s].args[j], 1);
    for (int s = 0; s < op->nout; s++)
      for (int j = 0; j < op->out[s].n; j++) set_put(&written, op->out[s].args[j], 1);
  }
  bool ok = true;
  for (int i = first; i < b->nops && ok; i++) {
    const OpDesc *op = b->ops[i];
    for (int s = 0; s < op->nin && ok; s++)
      for (int j = 0; j < op->in[s].n && ok; j++) {
        const char *v = op->in[s].args[j];
        const VarDesc *d = prog_var(p, v);
        if (name_is_empty(v)) continue;
        if (!d) {
          fail_at(bw, op->span, "internal error in the backward: %s reads '%s', which is not declared", op->type, v);
          ok = false;
        } else if (name_is_grad(v) && d->block == b->idx && !set_get(&written, v)) {
          fail_at(bw, op->span, "internal error in the backward: %s reads '%s' before it is written", op->type, v);
          ok = false;
        }
      }
    for (int s = 0; s < op->nout; s++)
      for (int j = 0; j < op->out[s].n; j++) {
        const char *o = op->out[s].args[j];
        const VarDesc *d = prog_var(p, o);
        /* Every new variable must have been declared with its type. */
        if (ok && !name_is_empty(o) && (!d || d->dtype == DT_UNKNOWN)) {
          fail_at(bw, op->span, "internal error in the backward: %s writes '%s', whose type is not known", op->type, o);
          ok = false;
        }
        set_put(&written, o, 1);
      }
    const Attr *sb = op_attr(op, "sub_block"), *eb = op_attr(op, "else_block");
    if (ok && sb && (flags_of(bw, op) & OP_KEPT_TURNS)) {
      ok = verify_block(bw, p->blocks[sb->v.u.i], 0);
      if (ok && eb) ok = verify_block(bw, p->blocks[eb->v.u.i], 0);
    }
  }
  strmap_free(&written);
  return ok;
}

/* ---- the whole backward --------------------------------------------------------------------- */

static void backward_init(Backward *bw, Program *p, PtrMap *idx) {
  /* Index every variable for the marks. */
  int nvars = 0;
  memset(idx, 0, sizeof *idx);
  for (int i = 0; i < p->nblocks; i++)
    for (int j = 0; j < p->blocks[i]->nvars; j++) ptrmap_put(NULL, idx, p->blocks[i]->vars[j], nvars++);
  bw->p = p;
  bw->diag = p->diag;
  bw->idx = idx;
  bw->marks = mem_calloc((size_t)nvars + 1, 1);
  bw->nvars = nvars;
  bw->home = p->blocks[0];
  bw->nfwd = p->nforward ? p->nforward : p->blocks[0]->nops;
}

static void backward_free(Backward *bw) {
  ptrmap_free(bw->idx);
  mem_free(bw->marks);
  if (bw->stems) strmap_free(bw->stems);
  mem_free(bw->stems);
  mem_free(bw->links);
  mem_free(bw->injects);
}

/* Passes 1-4 over block 0: the gradients of wrt (grads[i], NULL where no
 * gradient flows to wrt[i]) from those of outs.  Each out's gradient is
 * seeded by an assign from seeds[k] or, with seeds NULL, by fill_constant 1
 * (outs is then the scalar loss). */
static bool differentiate(Backward *bw, const char *const *outs, const char *const *seeds, int nouts,
                          const char *const *wrt, int nwrt, const char **grads) {
  Program *p = bw->p;
  Block *b0 = bw->home;
  for (int i = 0; i < nwrt; i++)
    if (!in_no_grad(bw, wrt[i])) set_mark(bw, wrt[i], MARK_LIVE);
  while (prop_live(bw, b0)) {
  }
  for (int k = 0; k < nouts; k++) set_mark(bw, outs[k], MARK_NEED);
  while (prop_need(bw, b0)) {
  }
  for (int i = 0; i < bw->nvars; i++)
    if ((bw->marks[i] & (MARK_LIVE | MARK_NEED)) == (MARK_LIVE | MARK_NEED)) bw->marks[i] |= MARK_GRAD;
  /* Honour no_grad and stop_gradient on the marks too. */
  for (int i = 0; i < p->nblocks; i++)
    for (int j = 0; j < p->blocks[i]->nvars; j++) {
      const VarDesc *v = p->blocks[i]->vars[j];
      if (!differentiable(bw, v->name)) *mark_of(bw, v->name) &= (unsigned char)~MARK_GRAD;
    }
  int first = b0->nops;
  OpList list = {0};
  bool live = false;
  for (int k = 0; k < nouts; k++) {
    const VarDesc *v = prog_var(p, outs[k]);
    OpDesc *seed = op_new(p, seeds ? "assign" : "fill_constant", v->span);
    if (seeds) {
      slot_push(p, op_add_input(p, seed, "X"), seeds[k]);
    } else {
      /* loss@GRAD = 1 */
      int64_t dims[SHAPE_MAX_RANK];
      for (int d = 0; d < v->shape.rank; d++) dims[d] = v->shape.d[d].n;
      /* (A scalar of unknown rank: a grad(...) in an op body being checked.) */
      op_set_attr(p, seed, "shape", attr_ints(p, dims, v->shape.rank > 0 ? v->shape.rank : 0));
      op_set_attr(p, seed, "value", attr_float(1.0));
      op_set_attr(p, seed, "dtype", attr_dtype(v->dtype == DT_F64 ? DT_F64 : DT_F32));
    }
    slot_push(p, op_add_output(p, seed, "Out"), grad_name(bw, b0, outs[k]));
    VEC_RESERVE(list.ops, list.cap, list.n + 1);
    list.ops[list.n++] = seed;
    live |= has_mark(bw, outs[k], MARK_LIVE);
  }
  bool ok = !live || build_block(bw, b0, b0, bw->nfwd, &list);
  if (ok && !bw->failed) {
    for (int i = 0; i < nwrt; i++)
      grads[i] = needs_grad(bw, wrt[i]) || bw->zeros ? grad_name(bw, b0, wrt[i]) : NULL;
    finish_block(bw, b0, &list, grads, nwrt, NULL, 0);
    for (int i = 0; i < bw->ninjects && !bw->failed; i++)
      if (!bw->injects[i].used && prog_var(p, bw->injects[i].name))
        fail_at(bw, SPAN_NONE, "internal error in the backward: the gradient %s of a turn's value reaches no grad block",
                bw->injects[i].name);
    ok = !bw->failed && verify_block(bw, b0, first);
    for (int i = 0; i < nwrt; i++)
      if (grads[i] && !prog_var(p, grads[i])) grads[i] = NULL;
  } else {
    ok = false;
  }
  mem_free(list.ops);
  return ok;
}

const VarDesc *bwd_loss_var(Program *p, const char *loss) {
  const char *lv = prog_export(p, loss);
  const VarDesc *lvar = prog_var(p, lv ? lv : loss);
  if (!lvar || lvar->block != 0) {
    const char *near = prog_nearest_name(p, loss);
    if (near)
      diag_error(p->diag, SPAN_NONE, "the script has no value named '%s' to use as the loss%s%s%s", loss, DIAG_MEAN(near));
    else
      diag_error(p->diag, SPAN_NONE, "the script has no value named '%s' to use as the loss%s", loss,
                 strcmp(loss, "loss") == 0 ? " (name it with --loss NAME)" : "");
    return NULL;
  }
  char buf[128];
  if (shape_numel(&lvar->shape) != 1 || !dtype_is_float(lvar->dtype)) {
    diag_error(p->diag, lvar->span, "the loss '%s' must be a float scalar (f32 or f64), but it is %s%s (reduce it, e.g. with mean)",
               loss, dtype_name(lvar->dtype), shape_str(&lvar->shape, buf, sizeof buf));
    return NULL;
  }
  return lvar;
}

const VarDesc *bwd_wrt_var(Program *p, const char *name) {
  const VarDesc *st = prog_var(p, name);
  if (st && (st->flags & VAR_KEPT)) {
    diag_error(p->diag, SPAN_NONE, "--wrt %s: '%s' is a state, which is not trained and has no gradient", name, name);
    return NULL;
  }
  const VarDesc *d = prog_named_var(p, name);
  if (!d) {
    const char *near = prog_nearest_name(p, name);
    diag_error(p->diag, SPAN_NONE, "--wrt %s: the script has no value named '%s'%s%s%s", name, name, DIAG_MEAN(near));
    return NULL;
  }
  if (!dtype_is_float(d->dtype)) {
    diag_error(p->diag, SPAN_NONE, "--wrt %s: '%s' is %s; only float values (f32, f64) have gradients", name, name,
               dtype_name(d->dtype));
    return NULL;
  }
  return d;
}

bool bwd_append(Program *p, const char *loss, const char *const *params, int nparams,
                     const char *const *no_grad, int nno_grad, BackwardResult *out) {
  memset(out, 0, sizeof *out);
  Block *b0 = p->blocks[0];
  const VarDesc *lvar = bwd_loss_var(p, loss);
  if (!lvar) return false;
  Backward bw = {.no_grad = no_grad, .nno_grad = nno_grad};
  PtrMap idx;
  backward_init(&bw, p, &idx);
  /* A second backward (another loss, other parameters) gets names of its
   * own: v@GRAD@L1, ... (after the levels of the script's grad(...) calls);
   * it differentiates only the forward ops. */
  int level = p->nbackward ? p->nlevels + 1 : 0;
  bw.suffix = name_level(p->arena, level);

  /* The parameter list: the given names, or every parameter. */
  const char **plist = arena_alloc(p->arena, sizeof *plist * (size_t)(b0->nvars + nparams + 1));
  int np = 0;
  bool ok = true;
  if (params && nparams) {
    for (int i = 0; i < nparams; i++) {
      const VarDesc *d = bwd_wrt_var(p, params[i]);
      if (d) plist[np++] = d->name;
      else ok = false;
    }
  } else {
    for (int i = 0; i < b0->nvars; i++)
      if ((b0->vars[i]->flags & VAR_PARAM) && !in_no_grad(&bw, b0->vars[i]->name)) plist[np++] = b0->vars[i]->name;
  }
  if (ok) {
    int nfwd = bw.nfwd;
    out->first_grad_op = b0->nops;
    const char **grads = arena_alloc(p->arena, sizeof *grads * (size_t)(np + 1));
    ok = differentiate(&bw, &lvar->name, NULL, 1, plist, np, grads);
    if (ok) {
      p->nforward = nfwd, p->nbackward++;
      if (level) p->nlevels = level;
      out->pairs = arena_alloc(p->arena, sizeof *out->pairs * (size_t)(np + 1));
      for (int i = 0; i < np; i++) out->pairs[i] = (GradPair){plist[i], grads[i]};
      out->npairs = np;
    }
  }
  backward_free(&bw);
  return ok;
}

/* A grad(...) in a loop or branch body differentiates the body's ops: it
 * is refused when a value the body reads from outside depends on a wrt
 * through the ops before the body (that part of the gradient would be
 * lost).  The marks are cleared after. */
static bool outer_paths_ok(Backward *bw, const Block *b, const char *const *wrt, int nwrt, Span at) {
  Program *p = bw->p;
  for (int i = 0; i < nwrt; i++) set_mark(bw, wrt[i], MARK_LIVE);
  for (const Block *a = prog_block(p, b->parent); a; a = a->parent >= 0 ? prog_block(p, a->parent) : NULL)
    while (prop_live(bw, a)) {
    }
  bool ok = true;
  for (int i = 0; i < b->nops && ok; i++)
    for (int s = 0; s < b->ops[i]->nin && ok; s++)
      for (int j = 0; j < b->ops[i]->in[s].n && ok; j++) {
        const char *v = b->ops[i]->in[s].args[j];
        const VarDesc *d = prog_var(p, v);
        bool is_wrt = false;
        for (int k = 0; k < nwrt; k++) is_wrt |= strcmp(wrt[k], v) == 0;
        if (!d || d->block == b->idx || is_wrt || !has_mark(bw, v, MARK_LIVE)) continue;
        diag_error(p->diag, at, "grad: in a loop or branch body, grad(...) differentiates the body's ops, but '%s' "
                   "depends on what is differentiated through ops before the body (call grad(...) after the body, "
                   "or compute '%s' in it)", prog_user_name(p, v), prog_user_name(p, v));
        ok = false;
      }
  memset(bw->marks, 0, (size_t)bw->nvars + 1);
  return ok;
}

bool bwd_grad(Program *p, Block *b, const char *y, const char *const *wrt, int nwrt, Span at, const char **grads,
              bool *depends) {
  Backward bw = {.zeros = true};
  PtrMap idx;
  backward_init(&bw, p, &idx);
  int level = p->nlevels + 1;
  bw.suffix = name_level(p->arena, level);
  bw.home = b;
  bw.nfwd = b->nops;
  bool ok = b->parent < 0 || outer_paths_ok(&bw, b, wrt, nwrt, at);
  ok = ok && differentiate(&bw, &y, NULL, 1, wrt, nwrt, grads);
  for (int i = 0; ok && i < nwrt; i++) ok = grads[i] != NULL;
  for (int i = 0; ok && depends && i < nwrt; i++) depends[i] = needs_grad(&bw, wrt[i]);
  if (ok) p->nlevels = level;
  backward_free(&bw);
  return ok;
}

bool bwd_vjp(Program *p, const char *const *outs, const char *const *seeds, int nouts, const char *const *wrt,
             int nwrt, const char **grads) {
  Backward bw = {.suffix = ""};
  PtrMap idx;
  backward_init(&bw, p, &idx);
  bool ok = differentiate(&bw, outs, seeds, nouts, wrt, nwrt, grads);
  backward_free(&bw);
  return ok;
}

/* ---- the grad ops of one op -------------------------------------------------------------------
 * The tape's backward (tapegrad.c) asks this once per distinct recorded op
 * and runs the result every time the op was recorded: the same grad maker,
 * pruning, renaming and declaring as above, with every output's gradient
 * given and the sums of repeated writes left to the caller, who adds the
 * pieces in the order they are written, as add_n would. */
bool bwd_op_grads(Program *p, const char *const *need, int nneed, const char ***pieces, int *npieces) {
  Backward bw = {.suffix = "", .one_op = true};
  Block *b0 = p->blocks[0];
  PtrMap idx;
  backward_init(&bw, p, &idx);
  bw.nfwd = 1;
  for (int i = 0; i < bw.nvars; i++) bw.marks[i] = MARK_LIVE | MARK_NEED;
  const OpDesc *op = b0->ops[0];
  for (int s = 0; s < op->nout; s++)
    for (int j = 0; j < op->out[s].n; j++) *mark_of(&bw, op->out[s].args[j]) |= MARK_GRAD;
  for (int k = 0; k < nneed; k++) *mark_of(&bw, need[k]) |= MARK_GRAD;
  OpList list = {0};
  const char **targets = arena_alloc(p->arena, sizeof *targets * (size_t)(nneed + 1));
  for (int k = 0; k < nneed; k++) targets[k] = grad_name(&bw, b0, need[k]);
  bool ok = build_block(&bw, b0, b0, 1, &list);
  if (ok) {
    finish_block(&bw, b0, &list, targets, nneed, NULL, 0);
    /* The outputs' gradients are given: for the verify pass, the block's
     * args, which block 0 otherwise never has. */
    int nout = 0;
    const char **given = arena_alloc(p->arena, sizeof *given * (size_t)(b0->nvars + 1));
    for (int s = 0; s < op->nout; s++)
      for (int j = 0; j < op->out[s].n; j++) given[nout++] = grad_name(&bw, b0, op->out[s].args[j]);
    b0->args = given, b0->nargs = nout;
    ok = !bw.failed && verify_block(&bw, b0, 1);
    b0->args = NULL, b0->nargs = 0;
  }
  /* The pieces of each gradient: its own name, or its renames in order. */
  for (int k = 0; ok && k < nneed; k++) {
    npieces[k] = 0;
    pieces[k] = arena_alloc(p->arena, sizeof *pieces[k] * (size_t)(b0->nops + 1));
    for (int i = 1; i < b0->nops; i++)
      for (int s = 0; s < b0->ops[i]->nout; s++)
        for (int j = 0; j < b0->ops[i]->out[s].n; j++) {
          const char *o = b0->ops[i]->out[s].args[j];
          if (name_is_write_of(o, targets[k]))
            pieces[k][npieces[k]++] = o;
        }
  }
  mem_free(list.ops);
  backward_free(&bw);
  return ok;
}
