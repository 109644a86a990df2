/* grad.c — the verbs that differentiate: `dump --backward`, `grad` and
 * `gradcheck`.
 *
 * Two ways to a gradient, one builder: the static backward appends grad
 * ops to the program (loops and branches get grad blocks); the tape's
 * backward turns the ops the run recorded into one flat block and appends
 * the same way, then runs only the grad ops over the recorded values.
 * gradcheck judges each gradient against a central difference and that
 * difference's own noise (rounding, truncation, kinks): see netrun(1).  The
 * differences are taken on a second copy of the script, promoted to f64
 * unless --dtype f32 (or a plugin's op) keeps it f32; the REPL's on a copy
 * of the tape's forward ops, widened the same way.  --order 2 (3)
 * differentiates the backward again (below): the program's, or with
 * --tape the one of the tape's program. */
#include "autodiff/backward.h"
#include "cli/cli.h"
#include "cli/cmd.h"
#include "exec/print.h"
#include "ir/rewrite.h"
#include "exec/tape.h"
#include "autodiff/tapegrad.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A program with its backward, ready to run: either the script's program
 * (static) or the tape's. */
typedef struct Built {
  Session ld;             /* the script (the verbs) */
  Program *prog;         /* the forward program: the script's or a REPL session's */
  Executor *ex;          /* the forward run (tape) or the whole run (static) */
  bool own_ex;
  Arena tape_arena;
  Program *tp;           /* the tape's program, with its backward */
  Tensor **tape_vals;    /* of the tape program's first ntape_vals variables */
  int ntape_vals;
  Executor *tex;         /* runs the tape's grad ops */
  Tensor **tgrads;       /* or: the tape's gradients, per pair (tapegrad.c) */
  BackwardResult bw;
  const char *loss;      /* the loss's variable (in the tape's program, with a tape) */
  int run_from;          /* the tape program's first grad op (its first backward's) */
  bool loaded;
} Built;

static void built_free(Built *b) {
  exec_free(b->tex);
  for (int i = 0; b->tgrads && i < b->bw.npairs; i++) tensor_unref(b->tgrads[i]);
  mem_free(b->tgrads);
  if (b->own_ex) exec_free(b->ex);
  mem_free(b->tape_vals);
  /* The tape's program borrows the forward's user ops: nothing to release. */
  arena_free(&b->tape_arena);   /* zeroed when no tape was built: a no-op */
  if (b->loaded) session_free(&b->ld);
}

static bool build_tape(Built *b, const Args *a, bool run);
static bool tape_grads(Built *b, const Args *a);

/* ---- second derivatives (--order 2, and 3) ----------------------------------------------
 * The program's backward is built as for --order 1; then
 *
 *   f = sum(g1 * v1) + sum(g2 * v2) + ...
 *
 * is appended, gk the gradient of the k-th parameter and vk a fixed draw
 * from [-1, 1) (uniform_random with a seed of its own, so every copy of
 * the program holds the same vk), and the whole program so far, backward
 * included, counts as the forward of a second backward of f.  f's
 * gradient is the Hessian-vector product H v; gradcheck compares it with
 * central differences of f, which the first backward computes.  --order 3
 * takes one more step: f' = sum((H v) * v') differentiated again. */

/* Declares the output of op as a fresh variable of block 0 named after
 * base, appends op and infers its shape; the variable's name. */
static const char *order2_op(Program *p, OpDesc *op, const char *base) {
  Block *b0 = p->blocks[0];
  VarDesc *v = prog_add_var(p, b0, prog_fresh(p, base));
  v->span = op->span;
  slot_push(p, op_add_output(p, op, "Out"), v->name);
  op_append(b0, p, op);
  return reg_infer(p, b0, op) ? v->name : NULL;
}

/* The values differentiated: --wrt's (as names of p), or none (every
 * parameter). */
typedef struct Wrt {
  const char *const *names;
  int n;
} Wrt;

/* Appends the backward of loss with respect to w and f = sum(g1 * v1) + ...
 * to p, the vk drawn with seeds base + k (ones for `netrun grad`); *f gets f's
 * variable, *first the backward's first op.  False on error (reported). */
static bool order2_step(Program *p, const Args *a, Wrt w, const char *loss, int base, const char **f, int *first) {
  BackwardResult bw;
  bool ones = strcmp(a->verb, "grad") == 0;
  if (!bwd_append(p, loss, w.names, w.n, a->no_grad, a->nno_grad, &bw)) return false;
  *first = bw.first_grad_op;
  const char *sum = NULL;
  for (int i = 0; i < bw.npairs; i++) {
    const VarDesc *g = bw.pairs[i].grad ? prog_var(p, bw.pairs[i].grad) : NULL;
    if (!g) continue;
    int64_t dims[SHAPE_MAX_RANK];
    for (int d = 0; d < g->shape.rank; d++) dims[d] = g->shape.d[d].n;
    if (g->shape.rank < 0 || shape_numel(&g->shape) < 0) {
      char buf[128];
      diag_error(p->diag, SPAN_NONE, "--order %d: the gradient of '%s' has shape %s, which is not known before the run",
                 a->order, prog_user_name(p, bw.pairs[i].param), shape_str(&g->shape, buf, sizeof buf));
      return false;
    }
    OpDesc *r = op_new(p, ones ? "ones_like" : "uniform_random", SPAN_NONE);
    if (ones) {
      slot_push(p, op_add_input(p, r, "X"), g->name);
    } else {
      op_set_attr(p, r, "shape", attr_ints(p, dims, g->shape.rank));
      op_set_attr(p, r, "seed", attr_int(base + i));
      reg_fill_defaults(p, r, reg_find_op(p, "uniform_random"));
    }
    const char *v = order2_op(p, r, "v");
    OpDesc *m = op_new(p, "mul", SPAN_NONE);
    slot_push(p, op_add_input(p, m, "X"), g->name);
    slot_push(p, op_add_input(p, m, "Y"), v);
    const char *gv = v ? order2_op(p, m, "gv") : NULL;
    OpDesc *s = op_new(p, "sum", SPAN_NONE);
    slot_push(p, op_add_input(p, s, "X"), gv);
    reg_fill_defaults(p, s, reg_find_op(p, "sum"));
    const char *t = gv ? order2_op(p, s, "f") : NULL;
    if (t && sum) {
      OpDesc *add = op_new(p, "add", SPAN_NONE);
      slot_push(p, op_add_input(p, add, "X"), sum);
      slot_push(p, op_add_input(p, add, "Y"), t);
      t = order2_op(p, add, "f");
    }
    if (!t) return false;
    sum = t;
  }
  if (!sum) {
    diag_error(p->diag, SPAN_NONE, "--order %d: no gradient reaches %s, so there is none to differentiate again",
               a->order, a->nwrt ? "the --wrt values" : "a parameter");
    return false;
  }
  /* The second backward differentiates every op so far. */
  p->nforward = 0;
  *f = sum;
  return true;
}

/* --order N: N - 1 steps, each differentiating the f of the one before
 * (loss first); *f gets the last f, *first the first backward's first op.
 * `netrun grad` takes v = ones. */
static bool order2_prepare(Program *p, const Args *a, Wrt w, const char *loss, const char **f, int *first) {
  int from;
  for (int k = 1; k < a->order; k++) {
    if (!order2_step(p, a, w, loss, 1000 * k, f, &from)) return false;
    if (k == 1) *first = from;
    loss = *f;
  }
  return true;
}

/* The N-th backward of loss (in p) with respect to w: the last f's
 * gradient, in out; *f gets f, *first the first backward's first op. */
static bool order2_append(Program *p, const Args *a, Wrt w, const char **f, int *first, BackwardResult *out) {
  return order2_prepare(p, a, w, *f, f, first) && bwd_append(p, *f, w.names, w.n, a->no_grad, a->nno_grad, out);
}

/* Loads the script and appends the backward; with run, also executes the
 * forward and backward.  False on error (reported). */
static bool build(Built *b, const Args *a, bool run) {
  memset(b, 0, sizeof *b);
  b->loaded = true;
  bool ok = session_load(&b->ld, a->file);
  b->prog = b->ld.prog;
  if (!ok) return false;
  Program *p = b->prog;
  Diag *d = &b->ld.diag;
  b->own_ex = true;
  if (!a->tape) {
    const char *lv = prog_export(p, a->loss);
    b->loss = lv ? lv : a->loss;
    if (a->order > 1) ok = order2_append(p, a, (Wrt){a->wrt, a->nwrt}, &b->loss, &b->run_from, &b->bw);
    else ok = bwd_append(p, a->loss, a->wrt, a->nwrt, a->no_grad, a->nno_grad, &b->bw);
    diag_finish(d);
    if (!ok || !run) return ok;
    Args ra = *a;
    ra.opt.tape = false;
    if (!(b->ex = cli_start(&b->ld, &ra))) return false;
    bool done = exec_run(b->ex) == 0;
    diag_finish(d);
    return done;
  }
  /* The tape: run the forward, recording. */
  Args ra = *a;
  ra.opt.tape = true;
  if (!(b->ex = cli_start(&b->ld, &ra)) || exec_run(b->ex) != 0) {
    diag_finish(d);
    return false;
  }
  if (run && !a->tape_program && a->order == 1) {
    arena_init(&b->tape_arena);
    ok = tape_grads(b, a);
    diag_finish(d);
    return ok;
  }
  return build_tape(b, a, run);
}

/* The variable a no-grad name stands for in block 0, or NULL. */
static const char *var_named(Program *p, const char *name) {
  const VarDesc *d = prog_named_var(p, name);
  return d ? d->name : NULL;
}

/* The tape's backward, run over the recorded tensors (tapegrad.c), for the
 * parameter list the builder would take: --wrt, or the script's
 * parameters that the tape holds. */
static bool tape_grads(Built *b, const Args *a) {
  Program *p = b->prog;
  const VarDesc *lvar = bwd_loss_var(p, a->loss);
  if (!lvar) return false;
  b->loss = lvar->name;
  int nb0 = p->blocks[0]->nvars;
  const char **params = arena_alloc(&b->tape_arena, sizeof *params * (size_t)(nb0 + a->nwrt + 1));
  Tensor **wrt = arena_alloc(&b->tape_arena, sizeof *wrt * (size_t)(nb0 + a->nwrt + 1));
  Tensor **frozen = arena_alloc(&b->tape_arena, sizeof *frozen * (size_t)(a->nno_grad + 1));
  int np = 0;
  bool ok = true;
  for (int i = 0; i < a->nno_grad; i++) {
    const char *v = var_named(p, a->no_grad[i]);
    frozen[i] = v ? exec_var_value(b->ex, v) : NULL;
  }
  const Tape *t = exec_tape(b->ex);
  if (a->nwrt) {
    for (int i = 0; i < a->nwrt; i++) {
      const VarDesc *d = bwd_wrt_var(p, a->wrt[i]);
      if (d) params[np++] = d->name;
      else ok = false;
    }
  } else {
    for (int i = 0; i < nb0; i++) {
      const VarDesc *v = p->blocks[0]->vars[i];
      if (!(v->flags & VAR_PARAM) || !tgrad_on_tape(t, exec_var_value(b->ex, v->name))) continue;
      bool skip = false;
      for (int k = 0; k < a->nno_grad && !skip; k++) skip = var_named(p, a->no_grad[k]) == v->name;
      if (!skip) params[np++] = v->name;
    }
  }
  if (!ok) return false;
  for (int i = 0; i < np; i++) wrt[i] = exec_var_value(b->ex, params[i]);
  b->tgrads = mem_calloc((size_t)np + 1, sizeof *b->tgrads);
  ExecOptions o = a->opt;
  o.tape = false;
  if (tgrad_run(t, p, exec_var_value(b->ex, lvar->name), wrt, np, frozen, a->nno_grad, &o, b->tgrads) != 0)
    return false;
  /* No gradient reached any parameter: the loss may depend on one through
   * an op without a gradient, which the tape does not record.  The
   * program's builder finds and reports that op. */
  bool none = a->nwrt > 0;
  for (int i = 0; i < nb0 && !none; i++) none = (p->blocks[0]->vars[i]->flags & VAR_PARAM) != 0;
  for (int i = 0; i < np && none; i++) none = b->tgrads[i] == NULL;
  BackwardResult check;
  if (none && !bwd_append(p, a->loss, a->wrt, a->nwrt, a->no_grad, a->nno_grad, &check)) return false;
  b->bw.npairs = np;
  b->bw.pairs = arena_alloc(&b->tape_arena, sizeof *b->bw.pairs * (size_t)(np + 1));
  for (int i = 0; i < np; i++) {
    b->bw.pairs[i].param = params[i];
    b->bw.pairs[i].grad = b->tgrads[i] ? name_grad(&b->tape_arena, params[i]) : NULL;
  }
  return true;
}

/* A forward variable (var, the script's name for it: name) as the tape's
 * program knows it.  The tape names a value after the op that made it, so
 * the result of a loop or an if goes by the name it had in the body (h.2#2
 * for h.3). */
static const char *tape_name(Built *b, const char *var, const char *name) {
  if (!var) var = name;
  if (prog_var(b->tp, var)) return var;
  Tensor *t = exec_var_value(b->ex, var);
  for (int i = 0; t && i < b->ntape_vals; i++)
    if (b->tape_vals[i] == t) return b->tp->blocks[0]->vars[i]->name;
  return name;
}

/* The backward of the tape b->ex recorded running b->prog; with run, also
 * runs the grad ops over the recorded values. */
static bool build_tape(Built *b, const Args *a, bool run) {
  Program *p = b->prog;
  Diag *d = p->diag;
  arena_init(&b->tape_arena);
  b->tp = tape_program(exec_tape(b->ex), p, &b->tape_arena, &b->tape_vals);
  b->ntape_vals = b->tp->blocks[0]->nvars;
  /* The parameter list names the script's variables; on the tape they keep
   * their names (they were made outside any loop).  Without --wrt, the
   * script's parameters in the script's order, those the tape holds. */
  const char **params = NULL;
  int nparams = a->nwrt;
  if (nparams) {
    params = arena_alloc(&b->tape_arena, sizeof *params * (size_t)nparams);
    for (int i = 0; i < nparams; i++) params[i] = tape_name(b, var_named(p, a->wrt[i]), a->wrt[i]);
  } else {
    params = arena_alloc(&b->tape_arena, sizeof *params * (size_t)(p->blocks[0]->nvars + 1));
    for (int i = 0; i < p->blocks[0]->nvars; i++) {
      const VarDesc *v = p->blocks[0]->vars[i];
      if ((v->flags & VAR_PARAM) && prog_var(b->tp, v->name)) params[nparams++] = v->name;
    }
  }
  b->loss = tape_name(b, prog_export(p, a->loss), a->loss);
  bool ok;
  if (a->order > 1) {
    ok = order2_append(b->tp, a, (Wrt){params, nparams}, &b->loss, &b->run_from, &b->bw);
  } else {
    ok = bwd_append(b->tp, b->loss, params, nparams, a->no_grad, a->nno_grad, &b->bw);
    b->run_from = b->bw.first_grad_op;
  }
  diag_finish(d);
  if (!ok || !run) return ok;
  ExecOptions o = a->opt;
  o.tape = false;
  int marks[2] = {b->run_from, b->bw.first_grad_op};
  if (exec_rewrite_wanted(&o)) rewrite_program(b->tp, &(RewriteOpts){RW_FUSE, marks, 2, 0, NULL, 0});
  b->run_from = marks[0], b->bw.first_grad_op = marks[1];
  b->tex = exec_new(b->tp, &o);
  for (int i = 0; i < b->ntape_vals; i++)
    if (b->tape_vals[i]) exec_preload(b->tex, b->tp->blocks[0]->vars[i]->name, b->tape_vals[i]);
  ok = exec_run_from(b->tex, b->run_from) == 0;
  diag_finish(d);
  return ok;
}

/* The value of a variable (not a script name) after the run. */
static Tensor *value(Built *b, const char *var) {
  for (int i = 0; b->tgrads && i < b->bw.npairs; i++)
    if (b->bw.pairs[i].grad && strcmp(b->bw.pairs[i].grad, var) == 0) return b->tgrads[i];
  if (b->tex) {
    const VarDesc *v = prog_var(b->tp, var);
    if (v && v->block == 0) {
      Tensor *t = exec_var_value(b->tex, var);
      if (t) return t;
      return v->slot < b->ntape_vals ? b->tape_vals[v->slot] : NULL;
    }
    return NULL;
  }
  return exec_var_value(b->ex, var);
}


int cmd_dump_backward(const Args *a) {
  Built b;
  int status = 0;
  if (!build(&b, a, false)) {
    status = EXIT_SCRIPT;
  } else {
    OutFile o;
    if (!file_out_open(&o, a->out)) status = EXIT_SCRIPT;
    else {
      DumpOptions opt = a->dump;
      cli_rewrite_dumped(b.tp ? b.tp : b.ld.prog, a, b.tp ? &b.bw.first_grad_op : NULL, !b.tp);
      dump_program(o.f, b.tp ? b.tp : b.ld.prog, &opt);
      if (!file_out_close(&o)) status = EXIT_SCRIPT;
    }
  }
  built_free(&b);
  return status;
}

/* One number in JSON, which has no NaN or infinity: NaN as null, the
 * infinities as 1e999 and -1e999 (which JSON readers take as them). */
static void json_number(FILE *f, double v, bool f64) {
  if (isnan(v)) fputs("null", f);
  else if (isinf(v)) fputs(v > 0 ? "1e999" : "-1e999", f);
  else fprintf(f, f64 ? "%.17g" : "%.9g", v);
}

static void json_tensor(FILE *f, const Tensor *t) {
  fputs("{\"shape\": [", f);
  for (int i = 0; i < t->rank; i++) fprintf(f, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
  fputs("], \"data\": [", f);
  for (int64_t i = 0; i < t->numel; i++) {
    if (i) fputs(", ", f);
    json_number(f, tensor_get(t, i), t->dtype == DT_F64);
  }
  fputs("]}", f);
}

/* Prints the loss and the gradients of a run backward. */
static void print_grads(Built *b, const Args *a) {
  Program *p = b->tp ? b->tp : b->prog;
  Tensor *loss = value(b, b->loss);
  fflush(stdout);
  if (a->json) {
    fputs("{\"loss\": ", stdout);
    json_number(stdout, loss ? tensor_get(loss, 0) : (double)NAN, loss && loss->dtype == DT_F64);
    fputs(", \"grads\": {", stdout);
    bool first = true;
    for (int i = 0; i < b->bw.npairs; i++) {
      if (!b->bw.pairs[i].grad) continue;
      Tensor *g = value(b, b->bw.pairs[i].grad);
      if (!g) continue;
      printf("%s\"%s\": ", first ? "" : ", ", a->nwrt ? a->wrt[i] : prog_user_name(p, b->bw.pairs[i].param));
      json_tensor(stdout, g);
      first = false;
    }
    printf("}}\n");
  } else {
    printf("%s = ", a->order > 1 ? "f" : a->loss);
    if (loss) print_write(stdout, loss, a->opt.precision);
    putchar('\n');
    for (int i = 0; i < b->bw.npairs; i++) {
      const char *name = a->nwrt ? a->wrt[i] : prog_user_name(p, b->bw.pairs[i].param);
      if (!b->bw.pairs[i].grad) {
        printf("%s" NAME_GRAD ": none (%s does not depend on %s)\n", name, a->order > 1 ? "f" : "the loss", name);
        continue;
      }
      Tensor *g = value(b, b->bw.pairs[i].grad);
      char shape[128];
      printf("%s" NAME_GRAD " : %s%s =\n", name, g ? dtype_name(g->dtype) : "f32",
             g ? tensor_shape_str(g, shape, sizeof shape) : "?");
      if (g) print_write(stdout, g, a->opt.precision);
      putchar('\n');
    }
  }
  fflush(stdout);
}

int cmd_grad(const Args *a) {
  Built b;
  bool ok = build(&b, a, true);
  if (ok) print_grads(&b, a);
  built_free(&b);
  return ok ? 0 : EXIT_SCRIPT;
}

/* The REPL: the run so far is ex's, over the session's program p. */
static bool build_session(Built *b, Program *p, Executor *ex, const Args *a) {
  memset(b, 0, sizeof *b);
  b->prog = p;
  b->ex = ex;
  return build_tape(b, a, true);
}

int cmd_grad_session(Program *p, Executor *ex, const Args *a) {
  Built b;
  bool ok = build_session(&b, p, ex, a);
  if (ok) print_grads(&b, a);
  built_free(&b);
  return ok ? 0 : EXIT_SCRIPT;
}

/* ---- gradcheck --------------------------------------------------------------------- */

/* Where the numeric side of gradcheck gets its forward passes. */
typedef struct Forward {
  /* The value of parameter `var` (script name `name`) that the forward
   * reads, to be perturbed in place. */
  Tensor *(*param)(struct Forward *f, const char *var, const char *name);
  /* One forward pass: the loss. */
  bool (*loss)(struct Forward *f, double *out);
  Executor *ex;
  Program *prog;
  const char *loss_var;
  Built *b;
  int first;             /* the first op the perturbed value reaches */
  Rng rng;               /* the verb: the draws every pass starts from */
} Forward;

/* The finite differences of one element.  The step h0 is eps·max(|x|, 1)
 * rounded down to a power of two, so that x ± h0·2^k is exact in f32 and
 * the steps taken are the steps asked for.  Central differences at the
 * steps h0·2^k, k in [-1, GC_K], are computed when first needed. */
enum { GC_K = 5, GC_NK = GC_K + 2 };

typedef struct Element {
  Forward *f;
  Tensor *t;             /* the element t[e], perturbed in place (f32 or f64) */
  int64_t e;
  double saved;
  double base;           /* the loss at x */
  double h0;
  double lp[GC_NK], lm[GC_NK], d[GC_NK];
  bool have[GC_NK];
  double lscale;         /* the largest |loss| seen */
} Element;

static double gc_step(const Element *el, int k) { return ldexp(el->h0, k); }

/* An element x of a parameter, the loss being base there. */
static void element_init(Element *el, Forward *f, Tensor *t, int64_t e, double eps, double base) {
  memset(el, 0, sizeof *el);
  el->f = f;
  el->t = t;
  el->e = e;
  el->saved = tensor_get(t, e);
  el->base = base;
  /* At least 16 ulps of x, so that the smallest step, h0/2, is 8 ulps. */
  double m = fmax(fabs(el->saved), 1.0);
  el->h0 = fmax(exp2(floor(log2(eps * m))), ldexp(16.0, ilogb(m) - (t->dtype == DT_F64 ? 52 : 23)));
  el->lscale = fabs(base);
}

/* The central difference at step h0·2^k; false if a forward pass failed. */
static bool central(Element *el, int k) {
  int i = k + 1;
  if (el->have[i]) return true;
  double h = gc_step(el, k);
  double s = el->saved;
  tensor_set(el->t, el->e, s + h);
  double hp = tensor_get(el->t, el->e) - s;
  bool ok = el->f->loss(el->f, &el->lp[i]);
  tensor_set(el->t, el->e, s - h);
  double hm = s - tensor_get(el->t, el->e);
  ok = ok && el->f->loss(el->f, &el->lm[i]);
  tensor_set(el->t, el->e, s);
  if (!ok) return false;
  el->d[i] = (el->lp[i] - el->lm[i]) / (hp + hm);
  el->lscale = fmax(el->lscale, fmax(fabs(el->lp[i]), fabs(el->lm[i])));
  el->have[i] = true;
  return true;
}

/* The fourth difference of the losses at 0, ±h/2, ±h (h = h0·2^k): for a
 * smooth loss h^4/16 times its fourth derivative, negligible; else
 * rounding noise (sqrt(70) times that of one loss) or a kink. */
static double fourth_difference(const Element *el, int k) {
  int i = k + 1;
  return el->lp[i] + el->lm[i] - 4 * (el->lp[i - 1] + el->lm[i - 1]) + 6 * el->base;
}

/* The rounding noise of the central difference at step h = h0·2^s: a
 * loss is off by about one f32 epsilon of it, a difference of two by
 * twice that, which the quotient divides by 2h.  (A loss whose terms
 * cancel is off by more: its fourth differences show it.) */
static double gc_rounding(const Element *el, int s) {
  return (el->t->dtype == DT_F64 ? DBL_EPSILON : (double)FLT_EPSILON) * el->lscale / gc_step(el, s);
}

/* What else makes it uncertain, from the differences at h/2, h and 2h:
 * truncation, and kinks (a relu's, a max's) within the steps.  Their
 * spread is at least the error of the difference at h that a kink
 * between h/2 and 2h from x makes; a kink nearer shifts the three alike,
 * but makes the fourth difference of the losses at 0, ±h, ±2h over 2h
 * at least that error.  The rounding alone makes that fourth difference
 * up to about three times the rounding: only the excess counts.  Many
 * kinks (a bias that moves a thousand relus) can make the error larger
 * than the three show: their estimate counts twice. */
static double gc_noise(const Element *el, int s) {
  int i = s + 1;
  double r = gc_rounding(el, s);
  double lo = fmin(el->d[i - 1], fmin(el->d[i], el->d[i + 1]));
  double hi = fmax(el->d[i - 1], fmax(el->d[i], el->d[i + 1]));
  double kink = fabs(fourth_difference(el, s + 1)) / (2 * gc_step(el, s));
  double u = r + 2 * ((hi - lo) + fmax(0.0, kink - 3 * r));
  return isnan(u) ? HUGE_VAL : u;
}

static double gc_tol(const Args *a, double n) { return a->atol + a->rtol * fabs(n); }

/* The differences of the window at step h0·2^s. */
static bool window(Element *el, int s) {
  return central(el, s - 1) && central(el, s) && central(el, s + 1);
}

/* The numeric derivative of an element and its uncertainty, at step h0;
 * or, when that leaves the check short of the tolerance and the rounding
 * alone explains the roughness (the loss is smooth there), at a step
 * twice as large if that makes it a quarter more certain, and so on up
 * to 16 h0. */
static bool numeric(Element *el, const Args *a, double *n, double *noise) {
  if (!window(el, 0)) return false;
  int best = 0;
  double bn = gc_noise(el, 0);
  for (int s = 1; s + 1 <= GC_K && bn > gc_tol(a, el->d[best + 1]); s++) {
    if (!(gc_noise(el, best) <= 4 * gc_rounding(el, best))) break;
    if (!window(el, s)) return false;
    double u = gc_noise(el, s);
    if (!(u < 0.75 * bn)) break;
    best = s;
    bn = u;
  }
  *n = el->d[best + 1];
  *noise = bn;
  return true;
}

/* What an element's check says. */
typedef enum { EL_OK, EL_NOISE, EL_UNRESOLVED, EL_FAIL } ElVerdict;

static ElVerdict judge(const Args *a, double ana, double num, double noise) {
  if (!isfinite(ana)) return EL_FAIL;
  if (!isfinite(num) || !isfinite(noise)) return EL_UNRESOLVED;
  double err = fabs(ana - num), tol = gc_tol(a, num);
  if (err > tol + noise) return EL_FAIL;
  if (noise > tol) return EL_UNRESOLVED;
  return err > tol ? EL_NOISE : EL_OK;
}

/* One value's check, summed up. */
typedef struct VarCheck {
  int64_t checks, count[EL_FAIL + 1];
  double max_abs, max_rel, worst;      /* worst: of a failure, err / (tol + noise) */
  int64_t worst_e;
  double worst_a, worst_n, worst_noise;
} VarCheck;

static void tally(VarCheck *vc, const Args *a, int64_t e, double ana, double num, double noise) {
  ElVerdict v = judge(a, ana, num, noise);
  double err = fabs(ana - num), rel = err / fmax(fabs(num), 1e-3);
  vc->count[v]++;
  if (err > vc->max_abs) vc->max_abs = err;
  if (rel > vc->max_rel) vc->max_rel = rel;
  double r = err / (gc_tol(a, num) + noise);
  if (v == EL_FAIL && (vc->worst_e < 0 || !(r <= vc->worst))) {
    vc->worst = r;
    vc->worst_e = e;
    vc->worst_a = ana;
    vc->worst_n = num;
    vc->worst_noise = noise;
  }
}

/* Checks the elements of w (all, or --samples drawn from rng) against g. */
static bool check_var(Forward *f, const Args *a, Tensor *w, Tensor *g, Rng *rng, VarCheck *vc) {
  int64_t n = w->numel, checks = a->samples && a->samples < n ? a->samples : n;
  memset(vc, 0, sizeof *vc);
  vc->checks = checks;
  vc->worst_e = -1;
  double base;
  if (!f->loss(f, &base)) return false;
  for (int64_t k = 0; k < checks; k++) {
    int64_t e = checks == n ? k : (int64_t)(rng_uniform(rng) * (double)n);
    Element el;
    double num, noise;
    element_init(&el, f, w, e, a->eps, base);
    if (!numeric(&el, a, &num, &noise)) return false;
    tally(vc, a, e, g ? tensor_get(g, e) : 0.0, num, noise);
  }
  return true;
}

/* Compares every gradient b holds with central differences of f's loss. */
static int check_grads(Built *b, const Args *a, Forward *f) {
  const char *dt = a->dtype == DT_F64 ? "f64" : "f32";   /* the dtype of the differences */
  int status = 0;
  int64_t noisy = 0, unresolved = 0, total = 0;
  Program *p = b->tp ? b->tp : b->prog;
  printf("%-16s %10s %12s %12s  %s\n", "variable", "elements", "max abs err", "max rel err", "verdict");
  Rng rng;
  rng_seed(&rng, a->opt.seed + 12345);
  for (int i = 0; i < b->bw.npairs; i++) {
    const char *param = b->bw.pairs[i].param;
    const char *name = a->nwrt ? a->wrt[i] : prog_user_name(p, param);
    Tensor *w = f->param(f, param, name);
    Tensor *g = b->bw.pairs[i].grad ? value(b, b->bw.pairs[i].grad) : NULL;
    if (!w) continue;
    VarCheck vc;
    if (!check_var(f, a, w, g, &rng, &vc)) return EXIT_SCRIPT;
    printf("%-16s %10lld %12.3e %12.3e  ", name, (long long)vc.checks, vc.max_abs, vc.max_rel);
    total += vc.checks;
    noisy += vc.count[EL_NOISE];
    unresolved += vc.count[EL_UNRESOLVED];
    if (vc.count[EL_FAIL]) {
      printf("FAIL (element %lld: analytic %.6g, numeric %.6g, noise %.2g)\n", (long long)vc.worst_e, vc.worst_a,
             vc.worst_n, vc.worst_noise);
      status = EXIT_SCRIPT;
    } else if (vc.count[EL_UNRESOLVED]) {
      printf("ok (within %s noise; cannot check %lld of %lld: noise exceeds tolerance)\n", dt,
             (long long)vc.count[EL_UNRESOLVED], (long long)vc.checks);
    } else {
      printf(vc.count[EL_NOISE] ? "ok (within %s noise)\n" : "ok\n", dt);
    }
  }
  if (status) return status;
  printf("all gradients match finite differences%s%s%s (rtol %g", noisy + unresolved ? " within " : "",
         noisy + unresolved ? dt : "", noisy + unresolved ? " noise" : "", a->rtol);
  if (a->atol != CLI_ATOL) printf(", atol %g", a->atol);
  printf(", eps %g)", a->eps);
  if (unresolved) printf("; %lld of %lld elements could not be checked: noise exceeds tolerance", (long long)unresolved, (long long)total);
  putchar('\n');
  return 0;
}

/* The index after the last op of block 0 (before first_grad_op, or all
 * when it is negative) that writes var: where a pass that perturbs var's
 * value must start, so that no op makes it again; 0 for a parameter or
 * an input. */
static int after_writer(const Program *p, int nops, const char *var) {
  const Block *b0 = p->blocks[0];
  int first = 0;
  for (int i = 0; i < (nops < 0 ? b0->nops : nops); i++)
    for (int s = 0; s < b0->ops[i]->nout; s++)
      for (int k = 0; k < b0->ops[i]->out[s].n; k++)
        if (strcmp(b0->ops[i]->out[s].args[k], var) == 0) first = i + 1;
  return first;
}

/* A forward-only copy of the program (the verb's copy of the script,
 * :gradcheck's f64 copy of the tape): the copy's own tensor of var (the
 * one the analytic gradient saw is not perturbed), and a pass that runs
 * from the op after the one that makes var (from the start for a
 * parameter). */
static Tensor *copy_param(Forward *f, const char *var) {
  f->first = after_writer(f->prog, -1, var);
  return exec_var_value(f->ex, var);
}

static bool copy_loss(Forward *f, double *out) {
  if (exec_run_from(f->ex, f->first) != 0) return false;
  Tensor *t = exec_var_value(f->ex, f->loss_var);
  if (!t) return false;
  *out = tensor_get(t, 0);
  return true;
}

/* The verb: a second copy of the script (same seed, same values), each
 * pass with the random draws of the first (those the analytic gradient
 * saw). */
static Tensor *script_param(Forward *f, const char *var, const char *name) {
  const VarDesc *d = prog_named_var(f->prog, name);
  return copy_param(f, d ? d->name : var);
}

static bool script_loss(Forward *f, double *out) {
  *exec_rng(f->ex) = f->rng;
  return copy_loss(f, out);
}

/* The forward copy starts where the analytic gradient was taken: each
 * parameter checked gets the value b's run gave it (an f32 one, widened). */
static void copy_params(Built *b, const Args *a, Forward *f) {
  Program *p = b->tp ? b->tp : b->prog;
  for (int i = 0; i < b->bw.npairs; i++) {
    const char *param = b->bw.pairs[i].param;
    const VarDesc *d = prog_named_var(f->prog, a->nwrt ? a->wrt[i] : prog_user_name(p, param));
    if (!d || !(d->flags & VAR_PARAM)) continue;   /* a value an op makes is made again */
    Tensor *src = value(b, param), *dst = exec_var_value(f->ex, d->name);
    if (src && dst && src != dst && src->numel == dst->numel)
      for (int64_t e = 0; e < dst->numel; e++) tensor_set(dst, e, tensor_get(src, e));
  }
}

/* Does op read values, none of them float (a logical op on bools: the
 * f64 copy never gives it an f64 value)? */
static bool reads_no_float(Program *p, const OpDesc *op) {
  int n = 0;
  for (int s = 0; s < op->nin; s++)
    for (int k = 0; k < op->in[s].n; k++, n++) {
      const VarDesc *v = prog_var(p, op->in[s].args[k]);
      if (!v || dtype_is_float(v->dtype)) return false;
    }
  return n > 0;
}

/* The first op of p (its blocks and startup) without f64 kernels that the
 * f64 copy would give an f64 value, or NULL. */
static const char *op_without_f64(Program *p) {
  for (int i = -1; i < p->nblocks; i++) {
    const Block *bl = i < 0 ? p->startup : p->blocks[i];
    for (int k = 0; k < bl->nops; k++) {
      const char *t = bl->ops[k]->type;
      const OpProto *proto = reg_find_op(p, t);
      /* the rewrite's fused ops (rewrite.c: made after every backward) stand
       * for ops with f64 kernels; the f64 copy is not fused (its values are
       * not f32) */
      if (proto && (proto->flags & OP_AFTER_BACKWARD)) continue;
      if (proto && !reg_has_f64(proto) && !reads_no_float(p, bl->ops[k])) return t;
    }
  }
  return NULL;
}

/* gradcheck: the analytic gradient of the program (f32, or f64 with
 * --dtype f64) against central differences of a forward copy of it, taken
 * in f64 unless --dtype f32 (then in f32, the check of netrun(1)). */
int cmd_gradcheck(const Args *a) {
  Built b;
  if (!build(&b, a, true)) {
    built_free(&b);
    return EXIT_SCRIPT;
  }
  Session fwd;
  int status = EXIT_SCRIPT;
  Args fa = *a;
  fa.opt.tape = false;
  fa.opt.out = fopen("/dev/null", "w");
  bool wide = a->dtype != DT_F32;
  const char *narrow = a->dtype == DT_UNKNOWN ? op_without_f64(b.prog) : NULL;
  if (narrow) {   /* an op the f64 copy cannot run: the f32 check, said so */
    diag_note(&b.ld.diag, SPAN_NONE, "gradcheck in f32 (as --dtype f32): '%s' has no f64 kernel yet", narrow);
    wide = false;
  }
  fa.dtype = wide ? DT_F64 : DT_F32;
  if (wide && !a->eps_set) fa.eps = CLI_EPS_F64;
  if (wide && !a->rtol_set) fa.rtol = CLI_RTOL_F64;
  session_set_f64(wide);
  const char *f2 = NULL;
  bool loaded = session_load(&fwd, a->file);
  if (loaded && a->order > 1) {
    int first;
    loaded = order2_prepare(fwd.prog, a, (Wrt){a->wrt, a->nwrt}, a->loss, &f2, &first);
    diag_finish(&fwd.diag);
  }
  Executor *ex = loaded ? cli_start(&fwd, &fa) : NULL;
  if (ex) {
    const char *lv = f2 ? f2 : prog_export(fwd.prog, a->loss);
    Forward f = {script_param, script_loss, ex, fwd.prog, lv ? lv : a->loss, &b, 0, {{0}}};
    double base;   /* a first run makes the parameters' tensors */
    if (exec_startup(ex) == 0) {
      f.rng = *exec_rng(ex);
      copy_params(&b, a, &f);
      if (script_loss(&f, &base)) status = check_grads(&b, &fa, &f);
    }
  }
  fflush(stdout);
  if (fa.opt.out) fclose(fa.opt.out);
  exec_free(ex);
  session_free(&fwd);
  built_free(&b);
  return status;
}

/* The REPL: the forward ops of the tape's program, run again over the
 * values the session recorded (the branches it took, the turns its loops
 * made), with the session's own tensors perturbed in place.  A value an op
 * of the tape made (a --wrt that is not a parameter) is perturbed after
 * that op: only the ops after it run again. */
static Tensor *tape_param(Forward *f, const char *var, const char *name) {
  (void)name;
  f->first = after_writer(f->b->tp, f->b->bw.first_grad_op, var);
  return value(f->b, var);
}

static bool tape_loss(Forward *f, double *out) {
  Built *b = f->b;
  if (exec_run_range(b->tex, f->first, b->bw.first_grad_op) != 0) return false;
  Tensor *t = value(b, f->loss_var);
  if (!t) return false;
  *out = tensor_get(t, 0);
  return true;
}

/* The REPL's differences in f64: the tape's forward ops once more, in a
 * program of their own whose f32 values are all declared f64, over f64
 * copies of the recorded values; the parameter checked is perturbed in
 * that copy, so the session's tensors are not touched. */
typedef struct Wide {
  Arena arena;
  Program *prog;
  Tensor **vals;         /* the recorded values (borrowed), per variable of block 0 */
  Executor *ex;
} Wide;

/* The copy of b's tape, fed f64 copies of its values and run once. */
static bool wide_start(Wide *w, Built *b, const Args *a) {
  memset(w, 0, sizeof *w);
  arena_init(&w->arena);
  w->prog = tape_program(exec_tape(b->ex), b->prog, &w->arena, &w->vals);
  prog_promote_f64(w->prog->blocks[0]);
  ExecOptions o = a->opt;
  o.tape = false;
  w->ex = exec_new(w->prog, &o);
  const Block *b0 = w->prog->blocks[0];
  for (int i = 0; i < b0->nvars; i++) {
    if (!w->vals[i]) continue;
    Tensor *t = w->vals[i]->dtype == DT_F32 ? tensor_cast(w->vals[i], DT_F64) : tensor_ref(w->vals[i]);
    exec_preload(w->ex, b0->vars[i]->name, t);
    tensor_unref(t);
  }
  return exec_run(w->ex) == 0;
}

static void wide_free(Wide *w) {
  exec_free(w->ex);
  mem_free(w->vals);
  arena_free(&w->arena);
}

/* The copy's variable var (the session's tensor is not perturbed). */
static Tensor *wide_param(Forward *f, const char *var, const char *name) {
  (void)name;
  return copy_param(f, var);
}

/* :gradcheck: the differences in f64 (unless --dtype f32, or an op of the
 * tape has no f64 kernel: then in f32 over the session's own tensors). */
int cmd_gradcheck_session(Program *p, Executor *ex, const Args *a) {
  Built b;
  int status = EXIT_SCRIPT;
  if (build_session(&b, p, ex, a)) {
    Args fa = *a;
    const char *narrow = a->dtype == DT_F32 ? "" : op_without_f64(b.tp);
    if (narrow && *narrow)
      diag_note(p->diag, SPAN_NONE, "gradcheck in f32 (as --dtype f32): '%s' has no f64 kernel yet", narrow);
    if (narrow) {
      Forward f = {tape_param, tape_loss, NULL, p, b.loss, &b, 0, {{0}}};
      fa.dtype = DT_F32;
      status = check_grads(&b, &fa, &f);
    } else {
      Wide w;
      fa.dtype = DT_F64;
      if (!a->eps_set) fa.eps = CLI_EPS_F64;
      if (!a->rtol_set) fa.rtol = CLI_RTOL_F64;
      if (wide_start(&w, &b, a)) {
        Forward f = {wide_param, copy_loss, w.ex, w.prog, b.loss, &b, 0, {{0}}};
        status = check_grads(&b, &fa, &f);
      }
      wide_free(&w);
    }
  }
  fflush(stdout);
  built_free(&b);
  return status;
}
