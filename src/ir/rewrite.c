/* rewrite.c — program rewrites: one pass over block 0, a table of
 * declared patterns (rewrite.h).
 *
 * Each pattern looks at the op at index i and, when the ops there are the
 * ones it stands for, builds the op that replaces them and says which ops
 * those are (a run from i, or ops apart: sgd_matmul takes a matmul of the
 * backward and the sgd that reads its product).  Every match is decided
 * on the program as it was (the reads and writes of each value counted
 * over the whole program), then block 0 is rebuilt: each replacing op
 * stands where the pattern says, its ops leave.  No match spans a mark
 * (RewriteOpts), nor a boundary between a training program's phases
 * (program.h) that its pattern does not declare it may cross; the marks
 * and the phases move to their index in the new block.
 *
 * The patterns rely on the values between the ops they replace being
 * temporaries: values of block 0 that nothing else reads and nobody can
 * name (not a script name's binding, an input, a parameter or state, nor
 * the gradient of such a name), since the replacing op never makes them.
 * They match the order in which backward.c emits a layer's gradient ops;
 * tests/cases/rewrite/ pins the rewritten programs of the examples, so a
 * change to that order that stops a pattern matching fails a test. */
#include "ir/rewrite.h"

#include "ir/names.h"
#include "ir/registry.h"

#include <stdlib.h>
#include <string.h>

/* ---- what the patterns look at -------------------------------------------------- */

/* The variables ops of block 0 write in place: those an op reads and
 * writes (the optimizers' ParamOut, clip_by_global_norm's gradients). */
typedef struct InPlace {
  const char **names;
  int n, cap;
} InPlace;

/* How many ops of the whole program read (nr) and write (nw) each value,
 * by its index in allvars, and where its last writer stands (wblk: its
 * block, -1 the startup block; wop: its index there): counted once a
 * round, since the program does not change within one (counting at each
 * question made the rewrite of a long program quadratic). */
typedef struct Uses {
  int *nr, *nw, *wblk, *wop;
  int n;                /* the values counted: allvars[0..n) */
} Uses;

typedef struct Site {
  Program *p;
  const Block *b;
  int end;              /* the first index past i's mark segment */
  const InPlace *ip;
  const bool *taken;    /* the ops earlier matches took */
  const RewriteOpts *o;
  const Uses *uses;
} Site;

#define MATCH_MAX 16

typedef struct Match {
  OpDesc *op;           /* the op that replaces them */
  int at[MATCH_MAX];    /* the ops it replaces, in block order */
  int n;
  int place;            /* it stands where at[place] stood */
} Match;

static bool is_op(const OpDesc *op, const char *type) { return op && strcmp(op->type, type) == 0; }

static bool same(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* A run of n ops from i, the new op standing at its head. */
static bool run_of(Match *m, OpDesc *op, int i, int n) {
  m->op = op;
  m->n = n;
  m->place = 0;
  for (int k = 0; k < n; k++) m->at[k] = i + k;
  return true;
}

/* Whether a script or the command line can look value v up by name: its
 * name is the current binding of a script name (a rebound name leaves the
 * earlier values nameless), or is a script name nothing exports. */
static bool nameable(const Program *p, const VarDesc *v) {
  if (!v->user_name) return false;
  const char *e = prog_export(p, v->user_name);
  return e ? strcmp(e, v->name) == 0 : strcmp(v->name, v->user_name) == 0;
}

/* The reads and writes of every value of the program (Uses). */
static Uses uses_count(const Program *p) {
  size_t n = (size_t)p->nallvars + 1;
  Uses u = {mem_calloc(n, sizeof *u.nr), mem_calloc(n, sizeof *u.nw), mem_calloc(n, sizeof *u.wblk),
            mem_calloc(n, sizeof *u.wop), p->nallvars};
  for (int i = -1; i < p->nblocks; i++) {
    const Block *b = i < 0 ? p->startup : p->blocks[i];
    for (int j = 0; j < b->nops; j++) {
      const OpDesc *op = b->ops[j];
      for (int s = 0; s < op->nin; s++)
        for (int k = 0; k < op->in[s].n; k++) {
          int v = strmap_get(&p->all, op->in[s].args[k]);
          if (v >= 0 && v < u.n) u.nr[v]++;
        }
      for (int s = 0; s < op->nout; s++)
        for (int k = 0; k < op->out[s].n; k++) {
          int v = strmap_get(&p->all, op->out[s].args[k]);
          if (v >= 0 && v < u.n) u.nw[v]++, u.wblk[v] = i, u.wop[v] = j;
        }
    }
  }
  return u;
}

static void uses_free(Uses *u) {
  mem_free(u->nr);
  mem_free(u->nw);
  mem_free(u->wblk);
  mem_free(u->wop);
}

/* v's index in u, or -1. */
static int use_index(const Program *p, const Uses *u, const char *v) {
  int k = v ? strmap_get(&p->all, v) : -1;
  return k < u->n ? k : -1;
}

/* Whether the value named `name` is one of block 0 that nobody can name
 * (for a gradient, nor its value) and the caller does not keep
 * (RewriteOpts.keep: a user op body's outputs). */
static bool hidden_value(const Program *p, const RewriteOpts *o, const char *name) {
  const VarDesc *v = prog_var(p, name);
  if (!v || v->block != 0 || nameable(p, v) || (v->flags & (VAR_INPUT | VAR_PARAM | VAR_ARG | VAR_STATE | VAR_KEPT)))
    return false;
  for (int i = 0; i < o->nkeep; i++)
    if (same(o->keep[i], name)) return false;
  const char *at = strchr(name, '@');
  if (at) {
    char base[256];
    if ((size_t)(at - name) >= sizeof base) return false;
    memcpy(base, name, (size_t)(at - name));
    base[at - name] = 0;
    const VarDesc *b = prog_var(p, base);
    if (!b || nameable(p, b)) return false;
  }
  return true;
}

/* Whether the value named `name` may be left unmade: a hidden value read
 * by `reads` ops of the whole program and written by one. */
static bool unmade_ok(const Site *s, const char *name, int reads) {
  if (!hidden_value(s->p, s->o, name)) return false;
  int k = strmap_get(&s->p->all, name);
  return k >= 0 && k < s->uses->n && s->uses->nr[k] == reads && s->uses->nw[k] == 1;
}

/* Whether op is a max pool (or its gradient) of 2x2 windows, stride 2,
 * no padding, reading X = x: the pool the fused conv ops do themselves. */
static bool pool_2x2_of(const OpDesc *op, const char *type, const char *x) {
  if (!op || strcmp(op->type, type) != 0 || !op_in1(op, "X") || strcmp(op_in1(op, "X"), x) != 0) return false;
  const Attr *k = op_attr(op, "ksize"), *st = op_attr(op, "strides"), *pd = op_attr(op, "paddings");
  bool two = k && k->v.type == ATTR_INTS && k->v.n == 2 && k->v.u.ints[0] == 2 && k->v.u.ints[1] == 2;
  bool stride = !st || (st->v.type == ATTR_INTS && (st->v.n == 0 || (st->v.n == 2 && st->v.u.ints[0] == 2 &&
                                                                      st->v.u.ints[1] == 2)));
  bool nopad = !pd || (pd->v.type == ATTR_INTS && pd->v.n == 2 && pd->v.u.ints[0] == 0 && pd->v.u.ints[1] == 0);
  return two && stride && nopad;
}

/* Whether `bias` is one f32 per output channel of the conv2d `conv`:
 * [O, 1, 1] or [1, O, 1, 1], against a Filter of O known channels. */
static bool channel_bias(const Program *p, const OpDesc *conv, const char *bias) {
  const VarDesc *b = prog_var(p, bias), *f = prog_var(p, op_in1(conv, "Filter"));
  if (!b || !f || b->dtype != DT_F32 || f->dtype != DT_F32 || f->shape.rank != 4 ||
      !dim_known(f->shape.d[0]))   /* fused_conv2d is f32 */
    return false;
  const Shape *s = &b->shape;
  int first = s->rank == 4 ? 1 : 0;
  if (s->rank != 3 && s->rank != 4) return false;
  if (s->rank == 4 && !(dim_known(s->d[0]) && s->d[0].n == 1)) return false;
  return dim_known(s->d[first]) && s->d[first].n == f->shape.d[0].n && dim_known(s->d[first + 1]) &&
         s->d[first + 1].n == 1 && dim_known(s->d[first + 2]) && s->d[first + 2].n == 1;
}

static void copy_conv_attrs(Program *p, OpDesc *to, const OpDesc *from, bool relu) {
  static const char *const names[] = {"strides", "paddings", "dilations", "groups"};
  for (int k = 0; k < 4; k++) {
    const Attr *a = op_attr(from, names[k]);
    if (a) op_set_attr(p, to, names[k], a->v);
  }
  op_set_attr(p, to, "relu", attr_bool(relu));
}

static void add1(Program *p, OpDesc *op, bool in, const char *slot, const char *name) {
  if (name) slot_push(p, in ? op_add_input(p, op, slot) : op_add_output(p, op, slot), name);
}

static void in_place_find(const Program *p, InPlace *ip) {
  const Block *b = p->blocks[0];
  for (int j = 0; j < b->nops; j++) {
    const OpDesc *op = b->ops[j];
    for (int s = 0; s < op->nout; s++)
      for (int k = 0; k < op->out[s].n; k++) {
        const char *name = op->out[s].args[k];
        bool read = false;
        for (int t = 0; t < op->nin && !read; t++)
          for (int m = 0; m < op->in[t].n && !read; m++) read = strcmp(op->in[t].args[m], name) == 0;
        if (!read) continue;
        VEC_RESERVE(ip->names, ip->cap, ip->n + 1);
        ip->names[ip->n++] = name;
      }
  }
}

static bool in_place(const InPlace *ip, const char *name) {
  for (int i = 0; i < ip->n; i++)
    if (strcmp(ip->names[i], name) == 0) return true;
  return false;
}

/* ---- the patterns ---------------------------------------------------------------- */

/* conv2d, add [, relu [, max_pool2d]] -> fused_conv2d (conv.c).
 * Matches a conv2d whose Output only the next op reads, an add of a bias
 * of one f32 per output channel, optionally a relu of the sum (read by
 * nothing else) and then a 2x2, stride-2, unpadded max pool of it.  Exact:
 * the kernel adds the bias, applies relu and takes the max of each window
 * on each GEMM's output while it is in cache, the same float operations in
 * the same order as the ops; the conv's output and the sum are never
 * made (the relu's output is when a pool follows: the gradient reads it). */
static bool conv_forward(const Site *s, int i, Match *m) {
  Program *p = s->p;
  const OpDesc *conv = s->b->ops[i], *add = i + 1 < s->end ? s->b->ops[i + 1] : NULL;
  if (!is_op(conv, "conv2d") || !add) return false;
  const char *t0 = op_out1(conv, "Output");
  if (!t0 || !is_op(add, "add") || add->nattrs || !same(op_in1(add, "X"), t0)) return false;
  const char *bias = op_in1(add, "Y"), *t1 = op_out1(add, "Out");
  if (!bias || !t1 || !channel_bias(p, conv, bias) || !unmade_ok(s, t0, 1)) return false;
  const OpDesc *relu = i + 2 < s->end ? s->b->ops[i + 2] : NULL;
  bool with_relu = is_op(relu, "relu") && same(op_in1(relu, "X"), t1) && op_out1(relu, "Out") && unmade_ok(s, t1, 1);
  const OpDesc *pool = with_relu && i + 3 < s->end ? s->b->ops[i + 3] : NULL;
  bool with_pool = pool && pool_2x2_of(pool, "max_pool2d", op_out1(relu, "Out")) && op_out1(pool, "Out");
  OpDesc *f = op_new(p, "fused_conv2d", conv->span);
  add1(p, f, true, "Input", op_in1(conv, "Input"));
  add1(p, f, true, "Filter", op_in1(conv, "Filter"));
  add1(p, f, true, "Bias", bias);
  add1(p, f, false, "Output", with_relu ? op_out1(relu, "Out") : t1);
  if (with_pool) add1(p, f, false, "Pooled", op_out1(pool, "Out"));
  copy_conv_attrs(p, f, conv, with_relu);
  return run_of(m, f, i, with_pool ? 4 : with_relu ? 3 : 2);
}

/* [[max_pool2d_grad,] relu_grad,] assign, sum_like, conv2d_grad ->
 * fused_conv2d_grad (conv.c): the gradient of the layer above, in the
 * order backward.c emits it for max_pool2d(relu(conv2d + bias)) (the
 * add's assign of dOut to the conv's output gradient and sum_like to the
 * bias's).  Each gradient between is read by the next ops only and
 * nameable by nobody.  Exact: the kernel applies the pool's and relu's
 * gradients to each row of the output gradient as it gathers it and sums
 * the bias gradient in the same order as sum_like. */
static bool conv_backward(const Site *s, int i, Match *m) {
  Program *p = s->p;
  const Block *b = s->b;
  if (i + 1 >= s->end) return false;
  const OpDesc *pg = is_op(b->ops[i], "max_pool2d_grad") ? b->ops[i] : NULL;
  int r = pg ? i + 1 : i;
  const OpDesc *rg = is_op(b->ops[r], "relu_grad") ? b->ops[r] : NULL;
  if (pg && (!rg || !op_in1(rg, "Out") || !pool_2x2_of(pg, "max_pool2d_grad", op_in1(rg, "Out")) ||
             !same(op_out1(pg, "X@GRAD"), op_in1(rg, "Out@GRAD")) || !unmade_ok(s, op_out1(pg, "X@GRAD"), 1) ||
             !op_in1(pg, "Out@GRAD")))
    return false;
  int k = rg ? r + 1 : r;
  if (k + 2 >= s->end) return false;
  const OpDesc *as = b->ops[k], *sl = b->ops[k + 1], *cg = b->ops[k + 2];
  if (!is_op(as, "assign") || !is_op(sl, "sum_like") || !is_op(cg, "conv2d_grad")) return false;
  const char *g = rg ? op_out1(rg, "X@GRAD") : op_in1(as, "X"), *t0g = op_out1(as, "Out");
  const char *bias = op_in1(sl, "Like"), *dbias = op_out1(sl, "Out");
  if (!g || !t0g || !bias || !dbias || !same(op_in1(as, "X"), g) || !same(op_in1(sl, "X"), g) ||
      !same(op_in1(cg, "Output@GRAD"), t0g) || !channel_bias(p, cg, bias) || !unmade_ok(s, t0g, 1) ||
      (rg && !unmade_ok(s, g, 2)))
    return false;
  OpDesc *f = op_new(p, "fused_conv2d_grad", cg->span);
  add1(p, f, true, "Input", op_in1(cg, "Input"));
  add1(p, f, true, "Filter", op_in1(cg, "Filter"));
  add1(p, f, true, "Bias", bias);
  if (rg) add1(p, f, true, "Output", op_in1(rg, "Out"));
  if (pg) add1(p, f, true, "Pooled@GRAD", op_in1(pg, "Out@GRAD"));
  else add1(p, f, true, "Output@GRAD", rg ? op_in1(rg, "Out@GRAD") : g);
  add1(p, f, false, "Input@GRAD", op_out1(cg, "Input@GRAD"));
  add1(p, f, false, "Filter@GRAD", op_out1(cg, "Filter@GRAD"));
  add1(p, f, false, "Bias@GRAD", dbias);
  copy_conv_attrs(p, f, cg, rg != NULL);
  f->fwd_block = cg->fwd_block, f->fwd_op = cg->fwd_op;   /* dump: the grad of the layer's op */
  return run_of(m, f, i, k + 3 - i);
}

/* batch_norm [, add], relu -> fused_batch_norm (nn.c), and batch_norm,
 * add -> fused_batch_norm without relu: a ResNet's conv -> bn -> relu and
 * its block's relu(shortcut + bn(...)).  Matches a batch_norm of f32
 * whose Y only the next op reads: a relu of it, or an add (no broadcast:
 * the other operand of Y's dtype and shape) whose sum only a relu after
 * reads, or which no relu follows.  Exact: the kernel adds the residual
 * and applies relu to each normalized value as it lands, the float
 * operations of the add and relu kernels (a + b is b + a in IEEE
 * arithmetic); Y and the sum are never made.  Any other batch_norm of
 * f32 becomes a fused_batch_norm alone, writing Y (a down block's second
 * batch norm, whose Y the shortcut's adds): the same operations, and
 * with it the convolution before it writes the moments and its gradient
 * reads the statistics (conv_moments, bn_stats), two passes over X
 * fewer. */
static bool bn_forward(const Site *s, int i, Match *m) {
  Program *p = s->p;
  const OpDesc *bn = s->b->ops[i], *next = i + 1 < s->end ? s->b->ops[i + 1] : NULL;
  if (!is_op(bn, "batch_norm")) return false;
  const char *y = op_out1(bn, "Y");
  const VarDesc *xv = prog_var(p, op_in1(bn, "X"));
  if (!y || !xv || xv->dtype != DT_F32) return false;
  const char *res = NULL, *out = y;
  int n = 1;
  if (!next || !unmade_ok(s, y, 1)) {
    /* alone */
  } else if (is_op(next, "relu") && same(op_in1(next, "X"), y)) {
    out = op_out1(next, "Out");
    n = 2;
  } else if (is_op(next, "add") && !next->nattrs) {
    const char *a = op_in1(next, "X"), *b = op_in1(next, "Y");
    const char *r = same(a, y) ? b : same(b, y) ? a : NULL;
    const VarDesc *rv = r ? prog_var(p, r) : NULL, *yv = prog_var(p, y);
    if (rv && yv && !same(r, y) && rv->dtype == DT_F32 && rv->shape.rank >= 0 && shape_eq(&rv->shape, &yv->shape)) {
      res = r;
      out = op_out1(next, "Out");
      n = 2;
      const OpDesc *relu = i + 2 < s->end ? s->b->ops[i + 2] : NULL;
      if (out && is_op(relu, "relu") && same(op_in1(relu, "X"), out) && op_out1(relu, "Out") &&
          unmade_ok(s, out, 1)) {
        out = op_out1(relu, "Out");
        n = 3;
      }
    }
  }
  if (!out) return false;
  OpDesc *f = op_new(p, "fused_batch_norm", bn->span);
  static const char *const ins[] = {"X", "Scale", "Bias", "Mean", "Variance", "Training"};
  for (int k = 0; k < 6; k++) add1(p, f, true, ins[k], op_in1(bn, ins[k]));
  if (res) add1(p, f, true, "Residual", res);
  add1(p, f, false, "Y", out);
  add1(p, f, false, "MeanOut", op_out1(bn, "MeanOut"));
  add1(p, f, false, "VarianceOut", op_out1(bn, "VarianceOut"));
  for (int k = 0; k < bn->nattrs; k++) op_set_attr(p, f, bn->attrs[k].name, bn->attrs[k].v);
  op_set_attr(p, f, "relu", attr_bool(is_op(s->b->ops[i + n - 1], "relu")));
  return run_of(m, f, i, n);
}

/* The one op that writes v, if it is an op of block 0; else NULL. */
static const OpDesc *writer0(const Program *p, const Uses *u, const char *v) {
  int k = use_index(p, u, v);
  return k >= 0 && u->nw[k] == 1 && u->wblk[k] == 0 ? p->blocks[0]->ops[u->wop[k]] : NULL;
}

/* relu_grad, batch_norm_grad -> fused_batch_norm_grad (nn.c): the
 * gradient of relu(batch_norm(X)) in the order backward.c emits it,
 * when the relu's X@GRAD is read by the batch_norm_grad alone (not under
 * a residual add, whose other branch needs it too) and the relu's Out is
 * relu of the Y of a batch_norm of the grad's X.  Exact: the kernel takes
 * relu_grad's value at each element where batch_norm_grad read it, Out's
 * sign made again from X as the batch norm made Y. */
static bool bn_backward(const Site *s, int i, Match *m) {
  Program *p = s->p;
  const OpDesc *rg = s->b->ops[i], *bg = i + 1 < s->end ? s->b->ops[i + 1] : NULL;
  if (!is_op(rg, "relu_grad") || !is_op(bg, "batch_norm_grad")) return false;
  const char *g = op_out1(rg, "X@GRAD"), *out = op_in1(rg, "Out"), *dout = op_in1(rg, "Out@GRAD");
  const VarDesc *xv = prog_var(p, op_in1(bg, "X"));
  if (!g || !out || !dout || !same(op_in1(bg, "Y@GRAD"), g) || !xv || xv->dtype != DT_F32 || !unmade_ok(s, g, 1))
    return false;
  const OpDesc *relu = writer0(p, s->uses, out), *bn = relu ? writer0(p, s->uses, op_in1(relu, "X")) : NULL;
  if (!is_op(relu, "relu") || !is_op(bn, "batch_norm") || !same(op_in1(bn, "X"), op_in1(bg, "X")) ||
      !same(op_out1(bn, "Y"), op_in1(relu, "X")) || !same(op_in1(bn, "Training"), op_in1(bg, "Training")))
    return false;
  OpDesc *f = op_new(p, "fused_batch_norm_grad", bg->span);
  static const char *const ins[] = {"X", "Scale", "Bias", "Mean", "Variance", "Training"};
  for (int k = 0; k < 6; k++) add1(p, f, true, ins[k], op_in1(bg, ins[k]));
  add1(p, f, true, "Out@GRAD", dout);
  static const char *const outs[] = {"X@GRAD", "Scale@GRAD", "Bias@GRAD"};
  for (int k = 0; k < 3; k++)
    if (op_out1(bg, outs[k])) add1(p, f, false, outs[k], op_out1(bg, outs[k]));
  for (int k = 0; k < bg->nattrs; k++) op_set_attr(p, f, bg->attrs[k].name, bg->attrs[k].v);
  f->fwd_block = bg->fwd_block, f->fwd_op = bg->fwd_op;
  return run_of(m, f, i, 2);
}

/* conv2d_grad, add_n [, relu_grad] -> fused_conv2d_grad with Add (conv.c,
 * DxAdd): a residual block's input gradient, the sum of its shortcut's
 * and its first convolution's, and relu_grad's value for it when a relu
 * made the block's input.  Matches a conv2d_grad whose Input@GRAD (f32)
 * only the next op reads: an add_n of it and one other value of its dtype
 * and shape, whose sum, when only a relu_grad next reads it, is that
 * relu_grad's Out@GRAD.  Exact: the kernel adds and takes relu_grad's
 * value as each image's input gradient lands, the float operations of
 * add_n and relu_grad; the convolution's own input gradient and the sum
 * are never written to memory. */
static bool dx_add(const Site *s, int i, Match *m) {
  Program *p = s->p;
  const OpDesc *cg = s->b->ops[i], *an = i + 1 < s->end ? s->b->ops[i + 1] : NULL;
  if (!is_op(cg, "conv2d_grad") || !is_op(an, "add_n") || an->nin != 1 || an->in[0].n != 2) return false;
  const char *dx = op_out1(cg, "Input@GRAD"), *a0 = an->in[0].args[0], *a1 = an->in[0].args[1];
  const char *other = same(a0, dx) ? a1 : same(a1, dx) ? a0 : NULL, *sum = op_out1(an, "Out");
  const VarDesc *dv = dx ? prog_var(p, dx) : NULL, *ov = other ? prog_var(p, other) : NULL;
  if (!dv || !ov || !sum || same(other, dx) || dv->dtype != DT_F32 || ov->dtype != DT_F32 || dv->shape.rank < 0 ||
      !shape_eq(&dv->shape, &ov->shape) || !unmade_ok(s, dx, 1))
    return false;
  const OpDesc *rg = i + 2 < s->end ? s->b->ops[i + 2] : NULL;
  const char *relu_out = NULL, *out = sum;
  if (is_op(rg, "relu_grad") && same(op_in1(rg, "Out@GRAD"), sum) && op_in1(rg, "Out") && op_out1(rg, "X@GRAD") &&
      unmade_ok(s, sum, 1)) {
    const VarDesc *hv = prog_var(p, op_in1(rg, "Out"));
    if (hv && hv->dtype == DT_F32 && shape_eq(&hv->shape, &dv->shape))
      relu_out = op_in1(rg, "Out"), out = op_out1(rg, "X@GRAD");
  }
  /* (the kernel reads Add as it writes Input@GRAD: never the same value) */
  if (same(out, other) || same(out, relu_out)) return false;
  OpDesc *f = op_new(p, "fused_conv2d_grad", cg->span);
  f->call = cg->call;
  add1(p, f, true, "Input", op_in1(cg, "Input"));
  add1(p, f, true, "Filter", op_in1(cg, "Filter"));
  add1(p, f, true, "Output@GRAD", op_in1(cg, "Output@GRAD"));
  Slot *add = op_add_input(p, f, "Add");
  slot_push(p, add, other);
  if (relu_out) slot_push(p, add, relu_out);
  add1(p, f, false, "Input@GRAD", out);
  add1(p, f, false, "Filter@GRAD", op_out1(cg, "Filter@GRAD"));
  copy_conv_attrs(p, f, cg, false);
  f->fwd_block = cg->fwd_block, f->fwd_op = cg->fwd_op;
  return run_of(m, f, i, relu_out ? 3 : 2);
}

static OpDesc *op_with_slot(Program *p, const OpDesc *op, const char *drop, bool in, const char *add,
                            const char *name);

/* batch_norm_grad or fused_batch_norm_grad at i, then the gradient of the
 * convolution whose Output the batch norm read, at i + 1: a conv2d_grad,
 * or a fused_conv2d_grad of Add alone (dx_add), that reads the norm's
 * X@GRAD as its Output@GRAD, the only op that reads it.  f32, its X of
 * rank 4.  The two ops bn_dx's patterns replace (both decide on this). */
static bool bn_dx_pair(const Site *s, int i) {
  const OpDesc *bg = s->b->ops[i], *cg = i + 1 < s->end ? s->b->ops[i + 1] : NULL;
  if (!(is_op(bg, "batch_norm_grad") || is_op(bg, "fused_batch_norm_grad")) || op_out1(bg, "Coef")) return false;
  if (!(is_op(cg, "conv2d_grad") || is_op(cg, "fused_conv2d_grad"))) return false;
  const char *t = op_out1(bg, "X@GRAD");
  const VarDesc *xv = prog_var(s->p, op_in1(bg, "X")), *fv = prog_var(s->p, op_in1(cg, "Filter"));
  if (!t || !xv || !fv || xv->dtype != DT_F32 || fv->dtype != DT_F32 || xv->shape.rank != 4 ||
      !dim_known(xv->shape.d[1]) || !same(op_in1(cg, "Output@GRAD"), t) || !unmade_ok(s, t, 1))
    return false;
  static const char *const not[] = {"Bias", "Output", "Pooled@GRAD", "Mask"};
  for (int k = 0; k < 4; k++)
    if (op_in1(cg, not[k])) return false;
  return !op_out1(cg, "Bias@GRAD");
}

/* A Coef of batch norm input X (named X and suffix), declared once: f32
 * [C, cols]. */
static const char *coef_var(Program *p, const char *x, const char *suffix, int cols) {
  const char *name = arena_printf(p->arena, "%s%s", x, suffix);
  if (!prog_var(p, name)) {
    const VarDesc *xv = prog_var(p, x);
    VarDesc *cv = prog_add_var(p, p->blocks[0], name);
    cv->dtype = DT_F32;
    cv->shape = (Shape){.rank = 2, .d = {xv->shape.d[1], dim_n(cols)}};
  }
  return name;
}

/* The gradient's Coef (X@COEF, [C, 6]) and the forward's (X@NORM, [C, 3]). */
static const char *bn_coef(Program *p, const char *x) { return coef_var(p, x, "@COEF", 6); }
static const char *bn_norm_coef(Program *p, const char *x) { return coef_var(p, x, "@NORM", 3); }

/* The batch norm op at i, writing Coef (`coef`) instead of its output
 * `drop`: the op itself, a run of one. */
static bool coef_instead(const Site *s, int i, Match *m, const char *drop, const char *coef) {
  OpDesc *f = op_with_slot(s->p, s->b->ops[i], drop, false, "Coef", coef);
  f->norig = 0, f->orig = NULL;   /* the match's: this op */
  return run_of(m, f, i, 1);
}

/* batch_norm_grad, conv2d_grad -> batch_norm_grad with Coef,
 * fused_bn_conv2d_grad (conv.c, BnDx): a convolution's gradient beneath
 * its batch norm's (bn_dx_pair).  The norm's gradient writes, instead of
 * X@GRAD, the numbers each of X@GRAD's values is made from (Coef, [C,
 * 6]), and the convolution's gradient makes them image by image as it
 * reads them, through the same loops (vmath_bn_dx): the same bits, and
 * X@GRAD is never written to memory or read back.  Two patterns, one for
 * each op (the norm's keeps its place: its sums come first); round 1,
 * after dx_add made the convolution's. */
static bool bn_dx_norm(const Site *s, int i, Match *m) {
  return bn_dx_pair(s, i) && coef_instead(s, i, m, "X@GRAD", bn_coef(s->p, op_in1(s->b->ops[i], "X")));
}

static bool bn_dx_conv(const Site *s, int i, Match *m) {
  if (i == 0 || !bn_dx_pair(s, i - 1)) return false;
  Program *p = s->p;
  const OpDesc *bg = s->b->ops[i - 1], *cg = s->b->ops[i];
  OpDesc *f = op_new(p, "fused_bn_conv2d_grad", cg->span);
  f->call = cg->call;
  add1(p, f, true, "Input", op_in1(cg, "Input"));
  add1(p, f, true, "Filter", op_in1(cg, "Filter"));
  add1(p, f, true, "X", op_in1(bg, "X"));
  add1(p, f, true, "Coef", bn_coef(p, op_in1(bg, "X")));
  add1(p, f, true, "Y@GRAD", op_in1(bg, is_op(bg, "fused_batch_norm_grad") ? "Out@GRAD" : "Y@GRAD"));
  const Slot *add = op_input(cg, "Add");
  if (add) {
    Slot *d = op_add_input(p, f, "Add");
    for (int k = 0; k < add->n; k++) slot_push(p, d, add->args[k]);
  }
  add1(p, f, false, "Input@GRAD", op_out1(cg, "Input@GRAD"));
  add1(p, f, false, "Filter@GRAD", op_out1(cg, "Filter@GRAD"));
  copy_conv_attrs(p, f, cg, is_op(bg, "fused_batch_norm_grad"));
  f->fwd_block = cg->fwd_block, f->fwd_op = cg->fwd_op;
  return run_of(m, f, i, 1);
}

/* fused_batch_norm at i, then at i + 1 a convolution that reads its Y:
 * a conv2d, or a fused_conv2d without bias, relu or pool.  f32, X of rank
 * 4.  The two ops bn_norm's patterns replace (both decide on this). */
static bool bn_norm_pair(const Site *s, int i) {
  const OpDesc *bn = s->b->ops[i], *cv = i + 1 < s->end ? s->b->ops[i + 1] : NULL;
  if (!is_op(bn, "fused_batch_norm") || op_out1(bn, "Coef") || !op_out1(bn, "Y")) return false;
  if (!(is_op(cv, "conv2d") || is_op(cv, "fused_conv2d")) || !same(op_in1(cv, "Input"), op_out1(bn, "Y"))) return false;
  const VarDesc *xv = prog_var(s->p, op_in1(bn, "X")), *fv = prog_var(s->p, op_in1(cv, "Filter"));
  if (!xv || !fv || xv->dtype != DT_F32 || fv->dtype != DT_F32 || xv->shape.rank != 4 || !dim_known(xv->shape.d[1]))
    return false;
  static const char *const not[] = {"Bias", "Training"};
  for (int k = 0; k < 2; k++)
    if (op_in1(cv, not[k])) return false;
  return !op_out1(cv, "Pooled") && !op_out1(cv, "Mask") && !op_out1(cv, "Moments") &&
         op_attr_i(cv, "relu", 0) == 0 && op_out1(cv, "Output");
}

/* fused_batch_norm, conv2d -> fused_batch_norm with Coef, fused_norm_conv2d
 * (conv.c, NormIn): a convolution that reads a batch norm's output
 * (bn_norm_pair).  The norm computes its statistics and writes, instead
 * of Y, the numbers each of Y's values is made from (Coef, [C, 3]); the
 * convolution makes Y image by image (written: the gradients read it)
 * through the norm's own loop (vmath_bn_norm) and reads each image while
 * it is in cache: the same bits, one read of Y from memory fewer, and no
 * pass of the norm's own over X.  Two patterns, one for each op; round
 * 1. */
static bool bn_norm_stats(const Site *s, int i, Match *m) {
  return bn_norm_pair(s, i) && coef_instead(s, i, m, "Y", bn_norm_coef(s->p, op_in1(s->b->ops[i], "X")));
}

static bool bn_norm_conv(const Site *s, int i, Match *m) {
  if (i == 0 || !bn_norm_pair(s, i - 1)) return false;
  Program *p = s->p;
  const OpDesc *bn = s->b->ops[i - 1], *cv = s->b->ops[i];
  OpDesc *f = op_new(p, "fused_norm_conv2d", cv->span);
  f->call = cv->call;
  add1(p, f, true, "X", op_in1(bn, "X"));
  add1(p, f, true, "Coef", bn_norm_coef(p, op_in1(bn, "X")));
  add1(p, f, true, "Residual", op_in1(bn, "Residual"));
  add1(p, f, true, "Filter", op_in1(cv, "Filter"));
  add1(p, f, false, "Y", op_out1(bn, "Y"));
  add1(p, f, false, "Output", op_out1(cv, "Output"));
  copy_conv_attrs(p, f, cv, op_attr_i(bn, "relu", 0) != 0);
  return run_of(m, f, i, 1);
}

/* X when `op` is a split of an f32 X of known last axis into three equal
 * parts along it (Q, K and V side by side, as stdlib's
 * multi_head_attention makes them); else NULL. */
static const char *qkv_split(const Program *p, const OpDesc *op) {
  if (!is_op(op, "split")) return NULL;
  const char *x = op_in1(op, "X");
  const VarDesc *xv = x ? prog_var(p, x) : NULL;
  const Slot *out = op_output(op, "Out");
  if (!xv || xv->dtype != DT_F32 || xv->shape.rank < 2 || !out || out->n != 3) return NULL;
  int r = xv->shape.rank;
  int64_t axis = op_attr_i(op, "axis", 0), w = xv->shape.d[r - 1].n;
  const Attr *sec = op_attr(op, "sections");
  bool equal = !sec || (sec->v.type == ATTR_INTS && (sec->v.n == 0 ? op_attr_i(op, "num", 0) == 3 :
                                                       sec->v.n == 3 && sec->v.u.ints[0] == sec->v.u.ints[1] &&
                                                           sec->v.u.ints[1] == sec->v.u.ints[2]));
  if ((axis != r - 1 && axis != -1) || !dim_known(xv->shape.d[r - 1]) || w % 3 || !equal) return NULL;
  return x;
}

/* Whether `op`, an attention or attention_grad of f32 values, reads as
 * Q, K and V the three outputs of `sp` in that order. */
static bool reads_qkv(const Program *p, const OpDesc *op, const OpDesc *sp) {
  const Slot *out = op_output(sp, "Out");
  static const char *const qkv[] = {"Q", "K", "V"};
  for (int k = 0; k < 3; k++) {
    const VarDesc *v = prog_var(p, out->args[k]);
    if (!v || v->dtype != DT_F32 || !same(op_in1(op, qkv[k]), out->args[k])) return false;
  }
  return true;
}

static void copy_att_attrs(Program *p, OpDesc *to, const OpDesc *from) {
  static const char *const names[] = {"causal", "heads"};
  for (int k = 0; k < 2; k++) {
    const Attr *a = op_attr(from, names[k]);
    if (a) op_set_attr(p, to, names[k], a->v);
  }
}

/* attention_grad, concat -> fused_attention_grad (attention.c): the
 * gradient of an attention whose Q, K and V a split of one QKV made
 * (qkv_split), the concat of their gradients along the same axis being
 * the split's own gradient.  Matches when only that concat, next, reads
 * the three gradients.  Exact: the kernel writes each gradient where the
 * concat would copy it, by the same loops.  Round 0, so that in round 1
 * the split and attention (qkv_attention) see Q, K and V read by the
 * attention alone. */
static bool qkv_attention_grad(const Site *s, int i, Match *m) {
  Program *p = s->p;
  const OpDesc *ag = s->b->ops[i], *cc = i + 1 < s->end ? s->b->ops[i + 1] : NULL;
  if (!is_op(ag, "attention_grad") || !is_op(cc, "concat")) return false;
  const OpDesc *sp = writer0(p, s->uses, op_in1(ag, "Q"));
  const char *x = qkv_split(p, sp), *out = op_out1(cc, "Out");
  const Slot *parts = op_input(cc, "X");
  if (!x || !out || !reads_qkv(p, ag, sp) || !parts || parts->n != 3) return false;
  int64_t axis = op_attr_i(cc, "axis", 0), r = prog_var(p, x)->shape.rank;
  if (axis != r - 1 && axis != -1) return false;
  static const char *const grads[] = {"Q@GRAD", "K@GRAD", "V@GRAD"};
  for (int k = 0; k < 3; k++) {
    const char *g = op_out1(ag, grads[k]);
    if (!g || !same(parts->args[k], g) || !unmade_ok(s, g, 1)) return false;
  }
  OpDesc *f = op_new(p, "fused_attention_grad", ag->span);
  add1(p, f, true, "QKV", x);
  add1(p, f, true, "Out@GRAD", op_in1(ag, "Out@GRAD"));
  add1(p, f, false, "QKV@GRAD", out);
  copy_att_attrs(p, f, ag);
  f->fwd_block = ag->fwd_block, f->fwd_op = ag->fwd_op;
  return run_of(m, f, i, 2);
}

/* split, attention -> fused_attention (attention.c): an attention of the
 * three parts of a split of one QKV (qkv_split), in order, when the
 * attention, next, alone reads them (in a training program, once
 * qkv_attention_grad has taken the gradient's reads).  Exact: the kernel
 * reads each of Q, K and V where it lies in QKV, by the same loops. */
static bool qkv_attention(const Site *s, int i, Match *m) {
  Program *p = s->p;
  const OpDesc *sp = s->b->ops[i], *at = i + 1 < s->end ? s->b->ops[i + 1] : NULL;
  const char *x = qkv_split(p, sp);
  if (!x || !is_op(at, "attention") || !reads_qkv(p, at, sp) || !op_out1(at, "Out")) return false;
  const Slot *out = op_output(sp, "Out");
  for (int k = 0; k < 3; k++)
    if (!unmade_ok(s, out->args[k], 1)) return false;
  OpDesc *f = op_new(p, "fused_attention", at->span);
  add1(p, f, true, "QKV", x);
  add1(p, f, false, "Out", op_out1(at, "Out"));
  copy_att_attrs(p, f, at);
  return run_of(m, f, i, 2);
}

/* assign between gradients -> share (backward.c's for add, sub,
 * reshape...).  Matches an assign of a @GRAD value to another of its
 * dtype when no op of block 0 writes either in place.  Exact: the copy is
 * there for values an in-place update could change afterwards, and
 * neither of these is ever so updated, so sharing X's storage reads the
 * same numbers. */
static bool share_assign(const Site *s, int i, Match *m) {
  const OpDesc *as = s->b->ops[i];
  if (!is_op(as, "assign")) return false;
  const char *x = op_in1(as, "X"), *out = op_out1(as, "Out");
  if (!x || !out || !name_is_grad(x) || !name_is_grad(out)) return false;
  const VarDesc *vx = prog_var(s->p, x), *vo = prog_var(s->p, out);
  if (!vx || !vo || vx->dtype != vo->dtype || in_place(s->ip, x) || in_place(s->ip, out)) return false;
  OpDesc *f = op_new(s->p, "share", as->span);
  f->fwd_block = as->fwd_block, f->fwd_op = as->fwd_op;
  add1(s->p, f, true, "X", x);
  add1(s->p, f, false, "Out", out);
  return run_of(m, f, i, 1);
}

/* sgd on a matmul's gradient -> sgd_matmul (optim.c), in the training
 * program.  Matches an sgd without weight decay whose Grad (a @GRAD value)
 * exactly one op writes, a matmul of two matrices, and no op but the sgd
 * reads (so not with gradient clipping).  The matmul leaves the backward
 * and sgd_matmul stands where the sgd stood (after every read of the
 * parameter): its GEMM accumulates -lr * X'Y into the parameter (beta =
 * 1), so the gradient is never written or read back.  The same update,
 * rounded once instead of twice: not bit for bit the ops it replaces,
 * which is why it is part of the training program (--no-fuse too) and
 * keeps no originals. */
static bool sgd_matmul(const Site *s, int i, Match *m) {
  Program *p = s->p;
  const Block *b = s->b;
  const OpDesc *sgd = b->ops[i];
  if (!is_op(sgd, "sgd") || op_attr_f(sgd, "weight_decay", 0) != 0) return false;
  const char *w = op_in1(sgd, "Param"), *g = op_in1(sgd, "Grad");
  if (!w || !g || !name_is_grad(g) || !same(op_out1(sgd, "ParamOut"), w) || !op_in1(sgd, "LearningRate"))
    return false;
  int at = -1;
  for (int j = 0; j < s->end; j++) {
    const OpDesc *op = b->ops[j];
    for (int t = 0; t < op->nin && j != i; t++)
      for (int k = 0; k < op->in[t].n; k++)
        if (strcmp(op->in[t].args[k], g) == 0) return false;
    for (int t = 0; t < op->nout; t++)
      for (int k = 0; k < op->out[t].n; k++)
        if (strcmp(op->out[t].args[k], g) == 0) {
          if (at >= 0 || !is_op(op, "matmul")) return false;
          at = j;
        }
  }
  if (at < 0) return false;
  const OpDesc *mm = b->ops[at];
  const VarDesc *x = prog_var(p, op_in1(mm, "X")), *y = prog_var(p, op_in1(mm, "Y"));
  if (!x || !y || x->shape.rank != 2 || y->shape.rank != 2) return false;
  if (x->dtype != DT_F32 || y->dtype != DT_F32) return false;   /* sgd_matmul is f32 (sgemm) */
  OpDesc *op = op_new(p, "sgd_matmul", mm->span);
  op->fwd_block = mm->fwd_block;
  op->fwd_op = mm->fwd_op;
  add1(p, op, true, "Param", w);
  add1(p, op, true, "X", op_in1(mm, "X"));
  add1(p, op, true, "Y", op_in1(mm, "Y"));
  add1(p, op, true, "LearningRate", op_in1(sgd, "LearningRate"));
  add1(p, op, false, "ParamOut", w);
  op_set_attr(p, op, "transpose_x", attr_bool(op_attr_i(mm, "transpose_x", 0) != 0));
  op_set_attr(p, op, "transpose_y", attr_bool(op_attr_i(mm, "transpose_y", 0) != 0));
  if (op_attr(sgd, "lr_mult")) op_set_attr(p, op, "lr_mult", attr_float(op_attr_f(sgd, "lr_mult", 1)));   /* its group's */
  m->op = op;
  m->n = 2;
  m->at[0] = at < i ? at : i;
  m->at[1] = at < i ? i : at;
  m->place = at < i ? 1 : 0;
  return true;
}

static bool touches(const OpDesc *op, const char *name, bool writes);

/* A chain of elementwise ops (OP_STEP, and add_n of two as an add) ->
 * fused_elementwise (elementwise.c): ops of one shape and float dtype, each reading a value
 * an earlier one of them made, run as one pass over the elements.  From
 * the op at i, the ops after it in its segment that read a value of the
 * chain join it (at most FE_STEPS, within FE_WINDOW ops); then the longest
 * head of them that is sound is taken:
 *  - every value a step makes that the chain alone reads is a temporary
 *    (unmade_ok: the caller does not keep it either), and is
 *    never made; the others (read after the chain, nameable, a gradient
 *    of a name...) are the fused op's outputs; at least one value goes
 *    unmade;
 *  - no op between its first and last reads a value of the chain, or
 *    writes an input a step before it read (the fused op stands where
 *    the last step stood: a constant made between is made by then);
 *  - an input is of the chain's shape, one value, or a shape of its
 *    trailing dims (a bias; all such inputs of one shape), of its dtype;
 *    the shape has no unnamed unknown dim, so the inputs have one shape
 *    when it runs.
 * Exact: each step is its op's expression in its element type. */
/* At most the kernel's FE_MAX_STEPS and FE_MAX_IN (elementwise.c). */
enum { FE_STEPS = 16, FE_INS = 8, FE_WINDOW = 48 };

/* add_n of two values: X[0] + X[1], add's expression (backward.c's sum
 * of a value's two gradients, a residual block's input among them). */
static bool add2(const OpDesc *op) {
  return is_op(op, "add_n") && op->nin == 1 && op->in[0].n == 2 && op->nout == 1 && op->out[0].n == 1 &&
         !same(op->in[0].args[0], op->out[0].args[0]) && !same(op->in[0].args[1], op->out[0].args[0]);
}

/* Whether op can be a step: an OP_STEP op of one output and one value in
 * each of its (one or two) input slots, none of them its output; or an
 * add_n of two (add2). */
static bool step_op(const Program *p, const OpDesc *op) {
  if (add2(op)) return true;
  const OpProto *pr = reg_find_op(p, op->type);
  if (!pr || !(pr->flags & OP_STEP) || op->nout != 1 || op->out[0].n != 1 || pr->nin < 1 || pr->nin > 2 ||
      op->nin != pr->nin)
    return false;
  for (int r = 0; r < pr->nin; r++) {
    const Slot *in = op_input(op, pr->in[r].name);
    if (!in || in->n != 1 || same(in->args[0], op->out[0].args[0])) return false;
  }
  return true;
}

/* Step op's operand r (0 or 1; NULL for none): its proto's r-th input
 * slot, whose place is the kernel's first or second operand. */
static const char *step_arg(const Program *p, const OpDesc *op, int r) {
  if (add2(op)) return op->in[0].args[r];
  const OpProto *pr = reg_find_op(p, op->type);
  return r < pr->nin ? op_in1(op, pr->in[r].name) : NULL;
}

/* How value v fits shape s of dtype t: 0 the shape, 1 one value, 2
 * trailing dims; -1 not. */
static int fit_kind(const VarDesc *v, const Shape *s, DType t) {
  if (!v || v->dtype != t || v->shape.rank < 0) return -1;
  if (shape_eq(&v->shape, s)) return 0;
  bool ones = v->shape.rank <= s->rank;
  for (int d = 0; ones && d < v->shape.rank; d++) ones = dim_known(v->shape.d[d]) && v->shape.d[d].n == 1;
  if (ones) return 1;
  if (v->shape.rank >= s->rank || v->shape.rank == 0) return -1;
  Shape tail = {.rank = v->shape.rank};
  for (int d = 0; d < tail.rank; d++) tail.d[d] = s->d[s->rank - tail.rank + d];
  return shape_eq(&v->shape, &tail) ? 2 : -1;
}

static bool op_writes(const OpDesc *op, const char *name) {
  for (int s = 0; s < op->nout; s++)
    for (int k = 0; k < op->out[s].n; k++)
      if (strcmp(op->out[s].args[k], name) == 0) return true;
  return false;
}

/* The register of `name` for step `upto` of a chain at[]: the step
 * before it that writes it (FE_INS + step), else its input (added to
 * ins[*nin]); -1 when the inputs are full. */
static int chain_reg(const Block *b, const int *at, const char *name, const char **ins, int *nin, int upto) {
  for (int k = upto - 1; k >= 0; k--)
    if (same(b->ops[at[k]]->out[0].args[0], name)) return FE_INS + k;
  for (int k = 0; k < *nin; k++)
    if (same(ins[k], name)) return k;
  if (*nin == FE_INS) return -1;
  ins[*nin] = name;
  return (*nin)++;
}

/* The fused op of the steps at[0..n) when they are sound (above); NULL if not. */
static OpDesc *chain_op(const Site *s, const int *at, int n, const Shape *shape, DType t) {
  Program *p = s->p;
  const Block *b = s->b;
  const char *ins[FE_INS];
  int nin = 0, reg[FE_STEPS][2];
  bool live[FE_STEPS];
  for (int k = 0; k < n; k++) {
    const OpDesc *op = b->ops[at[k]];
    reg[k][1] = -1;
    for (int r = 0; r < 2 && step_arg(p, op, r); r++)
      if ((reg[k][r] = chain_reg(b, at, step_arg(p, op, r), ins, &nin, k)) < 0) return NULL;
  }
  /* an input is no step's output (a value written twice) */
  for (int i = 0; i < nin; i++)
    for (int k = 0; k < n; k++)
      if (op_writes(b->ops[at[k]], ins[i])) return NULL;
  int nout = 0;
  for (int k = 0; k < n; k++) {
    const char *v = b->ops[at[k]]->out[0].args[0];
    int reads = 0;
    for (int j = 0; j < n; j++)
      for (int r = 0; r < 2; r++) reads += reg[j][r] == FE_INS + k;
    live[k] = reads == 0 || !unmade_ok(s, v, reads);
    nout += live[k];
  }
  if (nout == n) return NULL;
  for (int j = at[0] + 1; j < at[n - 1]; j++) {
    bool in_chain = false;
    for (int k = 0; k < n; k++) in_chain |= at[k] == j;
    if (in_chain) continue;
    const OpDesc *op = b->ops[j];
    for (int k = 0; k < n; k++)
      if (touches(op, b->ops[at[k]]->out[0].args[0], true)) return NULL;
    for (int i = 0; i < nin; i++)
      for (int k = 0; k < n && at[k] < j; k++)
        if (op_writes(op, ins[i]) && touches(b->ops[at[k]], ins[i], false)) return NULL;
  }
  int64_t kinds[FE_INS], args[2 * FE_STEPS], outs[FE_STEPS];
  double params[2 * FE_STEPS];
  bool whole = false;
  const VarDesc *tail = NULL;   /* the kernel's rows: one tail shape */
  for (int i = 0; i < nin; i++) {
    const VarDesc *v = prog_var(p, ins[i]);
    kinds[i] = fit_kind(v, shape, t);
    whole |= kinds[i] == 0;
    if (kinds[i] == 2 && tail && !shape_eq(&tail->shape, &v->shape)) return NULL;
    if (kinds[i] == 2) tail = v;
  }
  if (!whole) return NULL;
  const OpDesc *last = b->ops[at[n - 1]];
  OpDesc *f = op_new(p, "fused_elementwise", last->span);
  f->fwd_block = last->fwd_block, f->fwd_op = last->fwd_op;
  for (int i = 0; i < nin; i++) add1(p, f, true, "X", ins[i]);
  const char **types = arena_alloc(p->arena, sizeof *types * (size_t)n);
  int no = 0;
  for (int k = 0; k < n; k++) {
    const OpDesc *op = b->ops[at[k]];
    const OpProto *pr = reg_find_op(p, op->type);
    types[k] = add2(op) ? "add" : op->type;
    for (int r = 0; r < 2; r++) args[2 * k + r] = reg[k][r] >= FE_INS ? nin + reg[k][r] - FE_INS : reg[k][r];
    params[2 * k] = params[2 * k + 1] = 0;
    for (int a = 0, np = 0; a < pr->nattrs && np < 2; a++) {
      const AttrValue *v = reg_op_attr(pr, op, pr->attrs[a].name);
      params[2 * k + np++] = v ? reg_attr_f64(v) : 0;
    }
    if (live[k]) {
      add1(p, f, false, "Out", op->out[0].args[0]);
      outs[no++] = nin + k;
    }
  }
  op_set_attr(p, f, "ops", (AttrValue){.type = ATTR_STRINGS, .n = n, .u.strings = types});
  op_set_attr(p, f, "args", attr_ints(p, args, 2 * n));
  op_set_attr(p, f, "params", attr_floats(p, params, 2 * n));
  op_set_attr(p, f, "kinds", attr_ints(p, kinds, nin));
  op_set_attr(p, f, "outs", attr_ints(p, outs, no));
  return f;
}

/* Whether the step op at j fits a chain of shape s, dtype t: its output
 * is of them, its inputs fit them. */
static bool step_fits(const Program *p, const OpDesc *op, const Shape *s, DType t) {
  if (fit_kind(prog_var(p, op->out[0].args[0]), s, t) != 0) return false;
  for (int r = 0; r < 2 && step_arg(p, op, r); r++)
    if (fit_kind(prog_var(p, step_arg(p, op, r)), s, t) < 0) return false;
  return true;
}

static bool fused_chain(const Site *s, int i, Match *m) {
  Program *p = s->p;
  const Block *b = s->b;
  const OpDesc *first = b->ops[i];
  if (!step_op(p, first)) return false;
  const VarDesc *ov = prog_var(p, first->out[0].args[0]);
  if (!ov || (ov->dtype != DT_F32 && ov->dtype != DT_F64) || ov->shape.rank < 0) return false;
  for (int d = 0; d < ov->shape.rank; d++)
    if (!dim_known(ov->shape.d[d]) && !ov->shape.d[d].sym) return false;
  const Shape *shape = &ov->shape;
  if (!step_fits(p, first, shape, ov->dtype)) return false;
  int at[FE_STEPS] = {i}, n = 1;
  for (int j = i + 1; j < s->end && j <= i + FE_WINDOW && n < FE_STEPS && n < MATCH_MAX; j++) {
    const OpDesc *op = b->ops[j];
    if ((s->taken && s->taken[j]) || !step_op(p, op) || !step_fits(p, op, shape, ov->dtype)) continue;
    bool reads = false;
    for (int k = 0; k < n && !reads; k++) reads = touches(op, b->ops[at[k]]->out[0].args[0], false);
    if (reads) at[n++] = j;
  }
  for (; n >= 2; n--) {
    OpDesc *f = chain_op(s, at, n, shape, ov->dtype);
    if (!f) continue;
    m->op = f;
    m->n = n;
    memcpy(m->at, at, sizeof *at * (size_t)n);
    m->place = n - 1;
    return true;
  }
  return false;
}

typedef struct Pattern {
  const char *name;      /* the op that replaces the match */
  unsigned set;          /* RW_FUSE or RW_TRAIN */
  bool (*match)(const Site *s, int i, Match *m);
  unsigned crosses;      /* the phase boundaries a match may span: 1 << k for
                            the start of phase k (none: it stays in one phase) */
  int round;             /* the pass it is tried in (0, then 1 on the result) */
} Pattern;

/* Tried in order at each op; the first match wins.  sgd_matmul alone
 * crosses a boundary: the backward's matmul and the update's sgd become
 * one op, in the update (with no allreduce between them: a gradient the
 * allreduce reads has another reader, and does not match).  The chains
 * are fused in a second pass, over what the first made: the layers'
 * patterns take their adds and relus first. */
static const Pattern patterns[] = {
    {"fused_conv2d", RW_FUSE, conv_forward, 0, 0},
    {"fused_conv2d_grad", RW_FUSE, conv_backward, 0, 0},
    {"fused_batch_norm", RW_FUSE, bn_forward, 0, 0},
    {"fused_batch_norm_grad", RW_FUSE, bn_backward, 0, 0},
    {"fused_conv2d_grad", RW_FUSE, dx_add, 0, 0},
    {"batch_norm_grad", RW_FUSE, bn_dx_norm, 0, 1},
    {"fused_bn_conv2d_grad", RW_FUSE, bn_dx_conv, 0, 1},
    {"fused_batch_norm", RW_FUSE, bn_norm_stats, 0, 1},
    {"fused_norm_conv2d", RW_FUSE, bn_norm_conv, 0, 1},
    {"share", RW_FUSE, share_assign, 0, 0},
    {"fused_attention_grad", RW_FUSE, qkv_attention_grad, 0, 0},
    {"fused_attention", RW_FUSE, qkv_attention, 0, 1},
    {"sgd_matmul", RW_TRAIN, sgd_matmul, 1u << PHASE_ALLREDUCE | 1u << PHASE_UPDATE, 0},
    {"fused_elementwise", RW_FUSE, fused_chain, 0, 1},
};

/* The marks a pass keeps: the caller's, then a training program's phase
 * boundaries; kind[k] is 0 for the caller's (never spanned), 1 << phase
 * for a phase's start. */
typedef struct Marks {
  int *at;
  unsigned *kind;
  int n;
} Marks;

/* ---- data parallel: the gradients' allreduce (RW_DIST) ------------------------------ */

/* The last op of block 0 before `end` that reads or writes `name`; -1 if
 * none does. */
static int last_use(const Block *b, int end, const char *name) {
  for (int j = end - 1; j >= 0; j--) {
    const OpDesc *op = b->ops[j];
    for (int s = 0; s < op->nin; s++)
      for (int k = 0; k < op->in[s].n; k++)
        if (strcmp(op->in[s].args[k], name) == 0) return j;
    for (int s = 0; s < op->nout; s++)
      for (int k = 0; k < op->out[s].n; k++)
        if (strcmp(op->out[s].args[k], name) == 0) return j;
  }
  return -1;
}

/* The bytes of an f32 gradient of known shape (0 when a dim is unknown). */
static int64_t grad_bytes(const Program *p, const char *name) {
  const VarDesc *v = prog_var(p, name);
  if (!v || v->shape.rank < 0) return 0;
  int64_t n = 4;
  for (int i = 0; i < v->shape.rank; i++) n *= dim_known(v->shape.d[i]) ? v->shape.d[i].n : 0;
  return n;
}

/* Whether op reads or writes `name`. */
static bool touches(const OpDesc *op, const char *name, bool writes) {
  for (int s = 0; s < op->nin; s++)
    for (int k = 0; k < op->in[s].n; k++)
      if (strcmp(op->in[s].args[k], name) == 0) return true;
  for (int s = 0; writes && s < op->nout; s++)
    for (int k = 0; k < op->out[s].n; k++)
      if (strcmp(op->out[s].args[k], name) == 0) return true;
  return false;
}

/* The first op of block 0 from `from` that reads one of op's X (its
 * bucket's gradients); the block's end if none does. */
static int first_read(const Block *b, int from, const OpDesc *op) {
  const Slot *x = op_input(op, "X");
  for (int j = from; j < b->nops; j++)
    for (int k = 0; x && k < x->n; k++)
      if (touches(b->ops[j], x->args[k], false)) return j;
  return b->nops;
}

/* An op to insert into block 0 before the op at `at` (the block's end
 * when at is its size); `order` keeps inserts at one place in order. */
typedef struct Insert {
  OpDesc *op;
  int at, order;
  bool after;   /* it follows the op before `at` (a start after the op that
                   finished its gradients): a mark at `at` moves past it */
} Insert;

static int insert_cmp(const void *a, const void *b) {
  const Insert *x = a, *y = b;
  return x->at != y->at ? (x->at > y->at) - (x->at < y->at) : (x->order > y->order) - (x->order < y->order);
}

/* The ops of ins[n] put into block 0 (each at its place, those of one
 * place in order); the marks move past the ops inserted before them (and
 * past those at their place that follow the op before it). */
static void insert_ops(Program *p, Insert *ins, int n, int *marks, int nmarks) {
  Block *b = p->blocks[0];
  qsort(ins, (size_t)n, sizeof *ins, insert_cmp);
  OpDesc **old = mem_alloc(NULL, sizeof *old * (size_t)(b->nops + 1));
  int nold = b->nops, k = 0;
  memcpy(old, b->ops, sizeof *old * (size_t)nold);
  b->nops = 0;
  for (int j = 0; j <= nold; j++) {
    for (; k < n && ins[k].at == j; k++) op_append(b, p, ins[k].op);
    if (j < nold) op_append(b, p, old[j]);
  }
  for (int m = 0; m < nmarks; m++) {
    int before = 0;
    for (int i = 0; i < n; i++) before += ins[i].at < marks[m] || (ins[i].after && ins[i].at == marks[m]);
    marks[m] += before;
  }
  mem_free(old);
}

/* One bucket's op(s), made with its gradients grads[n]: one allreduce
 * before bwd_end, or (o->overlap) an allreduce_start after `ready` (the
 * last op of the backward touching them) and an allreduce_wait before the
 * first op from bwd_end on that reads one; their inserts in ins[*nins]. */
static void bucket_ops(Program *p, const AllreduceOpts *o, const char *const *grads, int n, int ready, int id,
                       Insert *ins, int *nins) {
  Block *b = p->blocks[0];
  OpDesc *op = op_new(p, o->overlap ? "allreduce_wait" : "allreduce", SPAN_NONE);
  for (int i = 0; i < n; i++) {
    slot_push(p, op_add_input(p, op, "X"), grads[i]);
    slot_push(p, op_add_output(p, op, "Out"), grads[i]);
  }
  if (!o->overlap) {
    slot_push(p, op_add_input(p, op, "Weight"), o->weight);
    reg_infer(p, b, op);
    ins[(*nins)++] = (Insert){op, o->bwd_end, id, false};
    return;
  }
  OpDesc *st = op_new(p, "allreduce_start", SPAN_NONE);
  for (int i = 0; i < n; i++) slot_push(p, op_add_input(p, st, "X"), grads[i]);
  slot_push(p, op_add_input(p, st, "Weight"), o->weight);
  const char *h = arena_printf(p->arena, "bucket%d@DIST", id);
  VarDesc *hv = prog_var(p, h) ? NULL : prog_add_var(p, b, h);
  if (hv) hv->dtype = DT_I64, hv->shape = shape_scalar();
  slot_push(p, op_add_output(p, st, "Handle"), h);
  slot_push(p, op_add_input(p, op, "Handle"), h);
  reg_infer(p, b, st);
  reg_infer(p, b, op);
  /* at one place the starts go before the waits, each in bucket order */
  ins[(*nins)++] = (Insert){st, ready + 1, id, true};
  ins[(*nins)++] = (Insert){op, first_read(b, o->bwd_end, op), (1 << 20) + id, false};
}

/* One allreduce op per bucket, or (o->overlap) a start and a wait: the
 * gradients in the order the backward finishes them (DDP's buckets: the
 * last layer's first), a bucket closed once it holds bucket_bytes.  The
 * ops read and write their gradients in place.  Blocking, the allreduce
 * ops stand together at bwd_end, before clipping and the optimizers;
 * overlapped, a bucket's sum starts as soon as the backward has finished
 * its gradients and runs while the rest of the backward does, and is
 * waited for just before the first op that reads one (rewrite_program
 * moves the starts out of the runs it fuses). */
int rewrite_allreduce(Program *p, const AllreduceOpts *o) {
  Block *b = p->blocks[0];
  int n = 0, *order = mem_alloc(NULL, sizeof *order * (size_t)(o->ngrads + 1));
  int *ready = mem_alloc(NULL, sizeof *ready * (size_t)(o->ngrads + 1));
  for (int i = 0; i < o->ngrads; i++) {
    int at = last_use(b, o->bwd_end, o->grads[i]);
    if (at < 0) continue;
    int k = n++;
    for (; k > 0 && ready[k - 1] > at; k--) order[k] = order[k - 1], ready[k] = ready[k - 1];
    order[k] = i, ready[k] = at;
  }
  const char **bucket = mem_alloc(NULL, sizeof *bucket * (size_t)(n + 1));
  Insert *ins = mem_alloc(NULL, sizeof *ins * (size_t)(2 * n + 1));
  int made = 0, nins = 0, nb = 0;
  int64_t bytes = 0;
  for (int i = 0; i < n; i++) {
    bucket[nb++] = o->grads[order[i]];
    bytes += grad_bytes(p, o->grads[order[i]]);
    if (bytes >= o->bucket_bytes || i == n - 1) {
      bucket_ops(p, o, bucket, nb, ready[i], made++, ins, &nins);
      nb = 0, bytes = 0;
    }
  }
  insert_ops(p, ins, nins, o->marks, o->nmarks);
  mem_free(ins);
  mem_free(bucket);
  mem_free(order);
  mem_free(ready);
  return made;
}

/* ---- starts out of the fused runs ------------------------------------------------------ */

/* The allreduce_start ops of block 0 leave it (the rewrites see the
 * backward's ops as backward.c emits them, in unbroken runs); their
 * number, the ops in *out.  The marks after each move back. */
static int lift_starts(Program *p, const Marks *o, OpDesc ***out) {
  Block *b = p->blocks[0];
  int n = 0, kept = 0;
  *out = mem_alloc(NULL, sizeof **out * (size_t)(b->nops + 1));
  for (int i = 0; i < b->nops; i++) {
    if (!is_op(b->ops[i], "allreduce_start")) {
      b->ops[kept++] = b->ops[i];
      continue;
    }
    (*out)[n++] = b->ops[i];
    for (int k = 0; k < o->n; k++)
      if (o->at[k] > kept) o->at[k]--;
  }
  b->nops = kept;
  return n;
}

/* The lifted starts back in block 0, each after the last op before its
 * wait that touches its gradients (after whatever op now makes them). */
static void place_starts(Program *p, const Marks *o, OpDesc **starts, int n) {
  Block *b = p->blocks[0];
  Insert *ins = mem_alloc(NULL, sizeof *ins * (size_t)(n + 1));
  for (int i = 0; i < n; i++) {
    const char *h = op_out1(starts[i], "Handle");
    int wait = 0;
    while (wait < b->nops && !(is_op(b->ops[wait], "allreduce_wait") && same(op_in1(b->ops[wait], "Handle"), h)))
      wait++;
    const Slot *x = op_input(starts[i], "X");
    int at = 0;
    for (int k = 0; x && k < x->n; k++) {
      int u = last_use(b, wait, x->args[k]);
      if (u + 1 > at) at = u + 1;
    }
    ins[i] = (Insert){starts[i], at, i, true};
  }
  insert_ops(p, ins, n, o->at, o->n);
  mem_free(ins);
}

/* ---- the pass ---------------------------------------------------------------------- */

/* i's segment of the block, [*start, end): between the marks around i
 * that a match may not span (those of a kind in `crosses` it may). */
static int segment(const Marks *o, const Block *b, int i, unsigned crosses, int *start) {
  int end = b->nops;
  *start = 0;
  for (int k = 0; k < o->n; k++) {
    if (o->kind[k] & crosses) continue;
    if (o->at[k] > i && o->at[k] < end) end = o->at[k];
    if (o->at[k] <= i && o->at[k] > *start) *start = o->at[k];
  }
  return end;
}

/* The op at i, rewritten: the pattern whose match takes it first, none
 * of whose ops an earlier match took or another segment holds; NULL when
 * none does.  The boundaries o->hold names are crossed by none. */
static const Pattern *match_at(Site *s, const Marks *mk, const RewriteOpts *o, const bool *taken, int i, Match *m,
                               int round) {
  for (size_t k = 0; k < sizeof patterns / sizeof *patterns; k++) {
    int start;
    if (patterns[k].round != round) continue;
    s->end = segment(mk, s->b, i, patterns[k].crosses & ~o->hold, &start);
    if (!(patterns[k].set & o->sets) || !patterns[k].match(s, i, m)) continue;
    bool ok = true;
    for (int j = 0; j < m->n; j++) ok &= !taken[m->at[j]] && m->at[j] >= start && m->at[j] < s->end;
    if (ok) return &patterns[k];
  }
  return NULL;
}

/* Block 0 rebuilt: each match's op where it stands, its ops gone.  The
 * indices into it move: the marks, and the forward op of every grad op
 * (a replaced op's is the op that replaced it).  owner[i]: where the op
 * standing for op i stood. */
static void rebuild(Program *p, const Marks *o, OpDesc **repl, const bool *taken, const int *owner) {
  Block *b = p->blocks[0];
  int n = 0, nold = b->nops;
  int *to = mem_alloc(NULL, sizeof *to * (size_t)(nold + 1));
  for (int i = 0; i < nold; i++) {
    to[i] = n;
    if (repl[i]) b->ops[n++] = repl[i];
    else if (!taken[i]) b->ops[n++] = b->ops[i];
  }
  to[nold] = n;
  b->nops = n;
  for (int k = 0; k < o->n; k++)
    if (o->at[k] >= 0 && o->at[k] <= nold) o->at[k] = to[o->at[k]];
  for (int i = 0; i < p->nblocks; i++)
    for (int j = 0; j < p->blocks[i]->nops; j++) {
      OpDesc *op = p->blocks[i]->ops[j];
      if (op->fwd_block == 0 && op->fwd_op >= 0 && op->fwd_op < nold) op->fwd_op = to[owner[op->fwd_op]];
    }
  mem_free(to);
}

/* The marks of a pass over p: o's, then p's phase boundaries. */
static Marks marks_of(const Program *p, const RewriteOpts *o) {
  int nphase = p->phased ? PHASE_COUNT - 1 : 0;
  Marks mk = {mem_alloc(NULL, sizeof *mk.at * (size_t)(o->nmarks + nphase + 1)),
              mem_calloc((size_t)(o->nmarks + nphase + 1), sizeof *mk.kind), o->nmarks + nphase};
  for (int k = 0; k < o->nmarks; k++) mk.at[k] = o->marks[k];
  for (int k = 0; k < nphase; k++) mk.at[o->nmarks + k] = p->phase[k + 1], mk.kind[o->nmarks + k] = 1u << (k + 1);
  return mk;
}

/* The marks moved by a pass, back where they came from. */
static void marks_back(Program *p, const RewriteOpts *o, Marks *mk) {
  for (int k = 0; k < o->nmarks; k++) o->marks[k] = mk->at[k];
  for (int k = o->nmarks; k < mk->n; k++) p->phase[k - o->nmarks + 1] = mk->at[k];
  mem_free(mk->at);
  mem_free(mk->kind);
}

/* One pass of the patterns of `round` over block 0; the rewrites made. */
static int rewrite_round(Program *p, Marks *mk, const RewriteOpts *o, int round) {
  Block *b = p->blocks[0];
  InPlace ip = {0};
  in_place_find(p, &ip);
  Uses uses = uses_count(p);
  bool *taken = mem_calloc((size_t)b->nops + 1, sizeof *taken);
  OpDesc **repl = mem_calloc((size_t)b->nops + 1, sizeof *repl);
  int *owner = mem_alloc(NULL, sizeof *owner * (size_t)(b->nops + 1));
  for (int i = 0; i < b->nops; i++) owner[i] = i;
  int made = 0;
  for (int i = 0; i < b->nops; i++) {
    if (taken[i]) continue;
    Site s = {p, b, b->nops, &ip, taken, o, &uses};
    Match m;
    const Pattern *pat = match_at(&s, mk, o, taken, i, &m, round);
    if (!pat) continue;
    /* An exact rewrite keeps the ops it stands for (--check-nan runs
     * them); an op of the training program is inferred like the others. */
    if (pat->set == RW_FUSE) {
      m.op->orig = arena_alloc(p->arena, sizeof *m.op->orig * (size_t)m.n);
      for (int j = 0; j < m.n; j++) m.op->orig[j] = b->ops[m.at[j]];
      m.op->norig = m.n;
    } else if (!reg_infer(p, b, m.op)) {
      continue;
    }
    for (int j = 0; j < m.n; j++) taken[m.at[j]] = true, owner[m.at[j]] = m.at[m.place];
    repl[m.at[m.place]] = m.op;
    made++;
  }
  if (made) rebuild(p, mk, repl, taken, owner);
  mem_free(owner);
  mem_free(taken);
  mem_free(repl);
  mem_free(ip.names);
  uses_free(&uses);
  return made;
}

/* Whether value v of the program is written by one op alone, of block 0
 * before op `before` (or, input true, by none but the startup block's:
 * an input, its default). */
static bool written_before(const Program *p, const Uses *u, const char *v, int before, bool input) {
  int k = use_index(p, u, v);
  if (k < 0 || u->nw[k] > 1) return false;
  if (u->nw[k] == 0 || u->wblk[k] == -1) return input;
  return u->wblk[k] == 0 && u->wop[k] < before;
}


/* op with Stats read from `stats`: a fused_batch_norm_grad gains the slot;
 * a batch_norm_grad is replaced by a copy that has it, which stands for
 * the op (--check-nan runs the op without it, as it runs the forward's
 * batch_norm without Stats). */
static OpDesc *with_stats(Program *p, OpDesc *op, const char *stats) {
  if (is_op(op, "fused_batch_norm_grad")) {
    add1(p, op, true, "Stats", stats);
    return op;
  }
  return op_with_slot(p, op, NULL, true, "Stats", stats);
}

/* fused_batch_norm ... batch_norm_grad or fused_batch_norm_grad of the
 * same X and Training: the forward writes the batch's mean and biased
 * variance (X@STATS, f64: the numbers its pass over X computes), and the
 * gradient reads them instead of a pass over X that computes the same
 * numbers again, so the bits are the same.  Only where neither X nor
 * Training can change in between: each written once in the whole program,
 * by an op of block 0 before the forward (Training may be an input).  The
 * ops stay where they are, so no mark or phase is crossed; X@STATS lives
 * from the forward to the gradient, as X does. */
static int bn_stats(Program *p) {
  Block *b = p->blocks[0];
  Uses u = uses_count(p);
  int *fwd = mem_calloc((size_t)u.n + 1, sizeof *fwd);   /* by X: its forward's index + 1 */
  for (int i = 0; i < b->nops; i++) {
    OpDesc *f = b->ops[i];
    const char *x = op_in1(f, "X"), *tr = op_in1(f, "Training");
    const VarDesc *xv = x ? prog_var(p, x) : NULL;
    int k = use_index(p, &u, x);
    if (is_op(f, "fused_batch_norm") && !op_out1(f, "Stats") && k >= 0 && xv && tr && xv->shape.rank >= 2 &&
        dim_known(xv->shape.d[1]) && written_before(p, &u, x, i, false) && written_before(p, &u, tr, i, true) &&
        !prog_var(p, name_stats(p->arena, x)))
      fwd[k] = i + 1;
  }
  /* the gradients that read them (link: their forward's index + 1), then
   * X@STATS declared in the forwards' order */
  int *link = mem_calloc((size_t)b->nops + 1, sizeof *link), made = 0;
  bool *used = mem_calloc((size_t)b->nops + 1, sizeof *used);
  for (int j = 0; j < b->nops; j++) {
    const OpDesc *g = b->ops[j];
    int k = use_index(p, &u, op_in1(g, "X"));
    if ((is_op(g, "batch_norm_grad") || is_op(g, "fused_batch_norm_grad")) && k >= 0 && fwd[k] && fwd[k] <= j &&
        !op_in1(g, "Stats") && same(op_in1(g, "Training"), op_in1(b->ops[fwd[k] - 1], "Training")))
      link[j] = fwd[k], used[fwd[k] - 1] = true;
  }
  for (int i = 0; i < b->nops; i++) {
    if (!used[i]) continue;
    const VarDesc *xv = prog_var(p, op_in1(b->ops[i], "X"));
    VarDesc *sv = prog_add_var(p, b, name_stats(p->arena, xv->name));
    sv->dtype = DT_F64;
    sv->shape = (Shape){.rank = 2, .d = {dim_n(2), xv->shape.d[1]}};
    add1(p, b->ops[i], false, "Stats", sv->name);
  }
  for (int j = 0; j < b->nops; j++)
    if (link[j]) b->ops[j] = with_stats(p, b->ops[j], op_out1(b->ops[link[j] - 1], "Stats")), made++;
  mem_free(used);
  mem_free(link);
  mem_free(fwd);
  uses_free(&u);
  return made;
}

/* conv2d (or fused_conv2d) ... fused_batch_norm of its Output: the
 * convolution becomes a fused_conv2d that also writes each image's sum
 * and squared deviations per channel (X@MOMENTS, f64 [N, C, 2]) while the
 * image's output is in cache, and the batch norm combines them instead of
 * a pass over X for its training statistics: the same numbers its own
 * pass computes (vmath_run_moments), so the same bits.  The convolution
 * reads the batch norm's Training too and writes them only when it is
 * true (evaluating, the batch norm reads the running statistics).  Only
 * where X is written once in the whole program, by the convolution, in
 * block 0 before the batch norm, in f32, and Training once before the
 * convolution (or is an input).  A conv2d stands in for itself under
 * --check-nan (its original), as the batch norm's do, which do not read
 * Moments. */
static int conv_moments(Program *p) {
  Block *b = p->blocks[0];
  Uses u = uses_count(p);
  int made = 0;
  for (int i = 0; i < b->nops; i++) {
    OpDesc *bn = b->ops[i];
    const char *x = op_in1(bn, "X");
    int k = use_index(p, &u, x);
    if (!is_op(bn, "fused_batch_norm") || op_in1(bn, "Moments") || k < 0 || !written_before(p, &u, x, i, false))
      continue;
    OpDesc *cv = b->ops[u.wop[k]];
    bool plain = is_op(cv, "conv2d"), norm = is_op(cv, "fused_norm_conv2d");
    if ((!plain && !norm && !is_op(cv, "fused_conv2d")) || op_out1(cv, "Moments") || !same(op_out1(cv, "Output"), x))
      continue;
    const VarDesc *xv = prog_var(p, x), *in = prog_var(p, norm ? op_out1(cv, "Y") : op_in1(cv, "Input")),
                  *f = prog_var(p, op_in1(cv, "Filter"));
    const char *tr = op_in1(bn, "Training");
    if (!xv || !in || !f || xv->dtype != DT_F32 || in->dtype != DT_F32 || f->dtype != DT_F32 || xv->shape.rank != 4 ||
        prog_var(p, name_moments(p->arena, x)) || !tr || !written_before(p, &u, tr, u.wop[k], true))
      continue;
    VarDesc *mv = prog_add_var(p, b, name_moments(p->arena, x));
    mv->dtype = DT_F64;
    mv->shape = (Shape){.rank = 3, .d = {xv->shape.d[0], xv->shape.d[1], dim_n(2)}};
    if (plain) {
      OpDesc *fc = op_new(p, "fused_conv2d", cv->span);
      fc->call = cv->call;
      add1(p, fc, true, "Input", op_in1(cv, "Input"));
      add1(p, fc, true, "Filter", op_in1(cv, "Filter"));
      add1(p, fc, false, "Output", x);
      copy_conv_attrs(p, fc, cv, false);
      fc->orig = arena_alloc(p->arena, sizeof *fc->orig);
      fc->orig[0] = cv;
      fc->norig = 1;
      b->ops[u.wop[k]] = cv = fc;
    }
    add1(p, cv, true, "Training", tr);
    add1(p, cv, false, "Moments", mv->name);
    add1(p, bn, true, "Moments", mv->name);
    made++;
  }
  uses_free(&u);
  return made;
}

/* A copy of op (which it stands for: --check-nan runs op's originals, or
 * op) with its slot `drop` (if not NULL) left out, an input or an output
 * as `in` says, and the slot `add` reading or writing `name`. */
static OpDesc *op_with_slot(Program *p, const OpDesc *op, const char *drop, bool in, const char *add,
                            const char *name) {
  OpDesc *n = op_new(p, op->type, op->span);
  n->call = op->call;
  for (int s = 0; s < op->nin; s++) {
    if (in && drop && strcmp(op->in[s].name, drop) == 0) continue;
    Slot *d = op_add_input(p, n, op->in[s].name);
    for (int j = 0; j < op->in[s].n; j++) slot_push(p, d, op->in[s].args[j]);
  }
  if (in) add1(p, n, true, add, name);
  for (int s = 0; s < op->nout; s++) {
    if (!in && drop && strcmp(op->out[s].name, drop) == 0) continue;
    Slot *d = op_add_output(p, n, op->out[s].name);
    for (int j = 0; j < op->out[s].n; j++) slot_push(p, d, op->out[s].args[j]);
  }
  if (!in) add1(p, n, false, add, name);
  for (int k = 0; k < op->nattrs; k++) op_set_attr(p, n, op->attrs[k].name, op->attrs[k].v);
  n->fwd_block = op->fwd_block, n->fwd_op = op->fwd_op;
  if (op->norig) {
    n->orig = op->orig;
    n->norig = op->norig;
  } else {
    n->orig = arena_alloc(p->arena, sizeof *n->orig);
    n->orig[0] = (OpDesc *)op;
    n->norig = 1;
  }
  return n;
}

/* fused_conv2d with relu and a 2x2 pool, whose Output (relu's) only the
 * layer's fused_conv2d_grad ops read, beside the pool's gradient: all they
 * need of it is where each window's gradient goes, its pick when positive.
 * The convolution writes that instead (X@MASK, bool, Output's shape: a
 * quarter of Output's bytes) and keeps each image's output in its cache;
 * the gradients read Mask.  Only where X is a value of block 0 that
 * nobody can name or keeps, written once, and where the forward runs in
 * the same program as its gradients (RW_KEEP). */
static int conv_mask(Program *p, const RewriteOpts *o) {
  Block *b = p->blocks[0];
  Uses u = uses_count(p);
  int made = 0;
  for (int i = 0; i < b->nops; i++) {
    OpDesc *fc = b->ops[i];
    const Attr *relu = is_op(fc, "fused_conv2d") ? op_attr(fc, "relu") : NULL;
    const char *x = op_out1(fc, "Output");
    int k = use_index(p, &u, x);
    const VarDesc *xv = k >= 0 ? prog_var(p, x) : NULL;
    if (!relu || relu->v.type != ATTR_BOOL || !relu->v.u.i || !op_out1(fc, "Pooled") || op_out1(fc, "Moments") ||
        !xv || xv->dtype != DT_F32 || xv->shape.rank != 4 || !hidden_value(p, o, x) || u.nw[k] != 1 ||
        u.wblk[k] != 0 || u.wop[k] != i || prog_var(p, name_mask(p->arena, x)))
      continue;
    int readers = 0;
    for (int j = i + 1; j < b->nops; j++) {
      const OpDesc *g = b->ops[j];
      if (is_op(g, "fused_conv2d_grad") && same(op_in1(g, "Output"), x) && op_in1(g, "Pooled@GRAD")) readers++;
    }
    if (readers == 0 || readers != u.nr[k]) continue;
    VarDesc *mv = prog_add_var(p, b, name_mask(p->arena, x));
    mv->dtype = DT_BOOL;
    mv->shape = xv->shape;
    b->ops[i] = op_with_slot(p, fc, "Output", false, "Mask", mv->name);
    for (int j = i + 1; j < b->nops; j++)
      if (is_op(b->ops[j], "fused_conv2d_grad") && same(op_in1(b->ops[j], "Output"), x))
        b->ops[j] = op_with_slot(p, b->ops[j], "Output", true, "Mask", mv->name);
    made++;
  }
  uses_free(&u);
  return made;
}

int rewrite_program(Program *p, const RewriteOpts *o) {
  OpDesc **starts;
  Marks mk = marks_of(p, o);
  int nstarts = lift_starts(p, &mk, &starts);
  int made = rewrite_round(p, &mk, o, 0);
  if (o->sets & RW_FUSE) made += rewrite_round(p, &mk, o, 1);
  if ((o->sets & RW_FUSE) && (o->sets & RW_KEEP)) made += bn_stats(p);
  if (o->sets & RW_FUSE) made += conv_moments(p);
  if ((o->sets & RW_FUSE) && (o->sets & RW_KEEP)) made += conv_mask(p, o);
  if (nstarts) place_starts(p, &mk, starts, nstarts);
  marks_back(p, o, &mk);
  mem_free(starts);
  return made;
}
