/* grad.c — the verbs that differentiate: `dump --backward`, `grad` and
 * `gradcheck`.
 *
 * Two ways to a gradient, one builder: the static backward appends grad
 * ops to the program (loops and branches get grad blocks); the tape's
 * backward turns the ops the run recorded into one flat block and appends
 * the same way, then runs only the grad ops over the recorded values. */
#include "backward.h"
#include "cli.h"
#include "print.h"
#include "tape.h"
#include "tapegrad.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A program with its backward, ready to run: either the script's program
 * (static) or the tape's. */
typedef struct Built {
  Loaded ld;
  Executor *ex;          /* the forward run (tape) or the whole run (static) */
  Arena tape_arena;
  Program *tp;           /* the tape's program, with its backward */
  Tensor **tape_vals;    /* of the tape program's first ntape_vals variables */
  int ntape_vals;
  Executor *tex;         /* runs the tape's grad ops */
  Tensor **tgrads;       /* or: the tape's gradients, per pair (tapegrad.c) */
  BackwardResult bw;
  bool loaded;
} Built;

static void built_free(Built *b) {
  for (int i = 0; b->tgrads && i < b->bw.npairs; i++) tensor_unref(b->tgrads[i]);
  mem_free(b->tgrads);
  exec_free(b->tex);
  exec_free(b->ex);
  mem_free(b->tape_vals);
  /* The tape's program borrows the script's ops (its user_ops): only its
   * arena is its own. */
  if (b->tp) arena_free(&b->tape_arena);
  if (b->loaded) unload(&b->ld);
}

/* The name a no-grad or wrt name stands for in block 0, or NULL. */
static const char *var_named(Program *p, const char *name) {
  const char *v = prog_export(p, name);
  const VarDesc *d = prog_var(p, v ? v : name);
  if (d && d->block == 0) return d->name;
  for (int i = 0; d == NULL && i < p->blocks[0]->nvars; i++) {
    const VarDesc *u = p->blocks[0]->vars[i];
    if (u->user_name && strcmp(u->user_name, name) == 0 && (u->flags & (VAR_PARAM | VAR_INPUT))) return u->name;
  }
  return NULL;
}

/* The tape's backward, run over the recorded tensors (tapegrad.c), for the
 * parameter list the builder would take: --wrt, or the script's
 * parameters that the tape holds. */
static bool tape_grads(Built *b, const Args *a) {
  Program *p = b->ld.prog;
  const VarDesc *lvar = bwd_loss_var(p, a->loss);
  if (!lvar) return false;
  int nb0 = p->blocks[0]->nvars;
  const char **params = arena_alloc(&b->tape_arena, sizeof *params * (size_t)(nb0 + a->nwrt + 1));
  Tensor **wrt = arena_alloc(&b->tape_arena, sizeof *wrt * (size_t)(nb0 + a->nwrt + 1));
  Tensor **frozen = arena_alloc(&b->tape_arena, sizeof *frozen * (size_t)(a->nno_grad + 1));
  int np = 0;
  bool ok = true;
  for (int i = 0; i < a->nno_grad; i++) {
    const char *v = var_named(p, a->no_grad[i]);
    frozen[i] = v ? exec_value(b->ex, v) : NULL;
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
      if (!(v->flags & VAR_PARAM) || !tgrad_on_tape(t, exec_value(b->ex, v->name))) continue;
      bool skip = false;
      for (int k = 0; k < a->nno_grad && !skip; k++) skip = var_named(p, a->no_grad[k]) == v->name;
      if (!skip) params[np++] = v->name;
    }
  }
  if (!ok) return false;
  for (int i = 0; i < np; i++) wrt[i] = exec_value(b->ex, params[i]);
  b->tgrads = mem_calloc((size_t)np + 1, sizeof *b->tgrads);
  ExecOptions o = a->opt;
  o.tape = false;
  if (tgrad_run(t, p, exec_value(b->ex, lvar->name), wrt, np, frozen, a->nno_grad, &o, b->tgrads) != 0) return false;
  /* No gradient reached any parameter: the loss may depend on one through
   * an op without a gradient, which the tape does not record.  The
   * program's builder finds and reports that op. */
  bool none = a->nwrt > 0;
  for (int i = 0; i < nb0 && !none; i++) none = (p->blocks[0]->vars[i]->flags & VAR_PARAM) != 0;
  for (int i = 0; i < np && none; i++) none = b->tgrads[i] == NULL;
  BackwardResult check;
  if (none && !append_backward(p, a->loss, a->wrt, a->nwrt, a->no_grad, a->nno_grad, &check)) return false;
  b->bw.npairs = np;
  b->bw.pairs = arena_alloc(&b->tape_arena, sizeof *b->bw.pairs * (size_t)(np + 1));
  for (int i = 0; i < np; i++) {
    b->bw.pairs[i].param = params[i];
    b->bw.pairs[i].grad = b->tgrads[i] ? arena_printf(&b->tape_arena, "%s@GRAD", params[i]) : NULL;
  }
  return true;
}

/* Loads the script and appends the backward; with run, also executes the
 * forward and backward.  False on error (reported). */
static bool build(Built *b, const Args *a, bool run) {
  memset(b, 0, sizeof *b);
  b->loaded = true;
  if (!load_script(&b->ld, a->file)) return false;
  Program *p = b->ld.prog;
  Diag *d = &b->ld.diag;
  if (!a->tape) {
    bool ok = append_backward(p, a->loss, a->wrt, a->nwrt, a->no_grad, a->nno_grad, &b->bw);
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
  arena_init(&b->tape_arena);
  if (run && !a->tape_program) {
    bool ok = tape_grads(b, a);
    diag_finish(d);
    return ok;
  }
  b->tp = tape_program(exec_tape(b->ex), p, &b->tape_arena, &b->tape_vals);
  b->ntape_vals = b->tp->blocks[0]->nvars;
  /* The parameter list names the script's variables; on the tape they keep
   * their names (they were made outside any loop).  Without --wrt, the
   * script's parameters in the script's order, those the tape holds. */
  const char **params = a->nwrt ? (const char **)a->wrt : NULL;
  int nparams = a->nwrt;
  if (!params) {
    params = arena_alloc(&b->tape_arena, sizeof *params * (size_t)(p->blocks[0]->nvars + 1));
    for (int i = 0; i < p->blocks[0]->nvars; i++) {
      const VarDesc *v = p->blocks[0]->vars[i];
      if ((v->flags & VAR_PARAM) && prog_var(b->tp, v->name)) params[nparams++] = v->name;
    }
  }
  bool ok = append_backward(b->tp, a->loss, params, nparams, a->no_grad, a->nno_grad, &b->bw);
  diag_finish(d);
  if (!ok || !run) return ok;
  ExecOptions o = a->opt;
  o.tape = false;
  b->tex = exec_new(b->tp, &o);
  for (int i = 0; i < b->ntape_vals; i++)
    if (b->tape_vals[i]) exec_preload(b->tex, b->tp->blocks[0]->vars[i]->name, b->tape_vals[i]);
  ok = exec_run_from(b->tex, b->bw.first_grad_op) == 0;
  diag_finish(d);
  return ok;
}

static Tensor *value(Built *b, const char *name) {
  for (int i = 0; b->tgrads && i < b->bw.npairs; i++)
    if (b->bw.pairs[i].grad && strcmp(b->bw.pairs[i].grad, name) == 0) return b->tgrads[i];
  if (b->tex) {
    const VarDesc *v = prog_var(b->tp, name);
    if (v && v->block == 0) {
      Tensor *t = exec_value(b->tex, name);
      if (t) return t;
      return v->slot < b->ntape_vals ? b->tape_vals[v->slot] : NULL;
    }
    return NULL;
  }
  return exec_value(b->ex, name);
}

/* The name a user knows a variable by. */
static const char *shown_name(const Program *p, const char *var) {
  const VarDesc *v = prog_var(p, var);
  return v && v->user_name ? v->user_name : var;
}

int dump_backward(const Args *a) {
  Built b;
  int status = 0;
  if (!build(&b, a, false)) {
    status = EXIT_SCRIPT;
  } else {
    Out o;
    if (!out_open(&o, a->out)) status = EXIT_SCRIPT;
    else {
      DumpOptions opt = a->dump;
      dump_program(o.f, b.tp ? b.tp : b.ld.prog, &opt);
      if (!out_close(&o)) status = EXIT_SCRIPT;
    }
  }
  built_free(&b);
  return status;
}

static void json_tensor(FILE *f, const Tensor *t) {
  fputs("{\"shape\": [", f);
  for (int i = 0; i < t->rank; i++) fprintf(f, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
  fputs("], \"data\": [", f);
  for (int64_t i = 0; i < t->numel; i++) {
    double v = tensor_get(t, i);
    if (i) fputs(", ", f);
    if (isnan(v)) fputs("null", f);
    else if (isinf(v)) fputs(v > 0 ? "1e999" : "-1e999", f);
    else fprintf(f, "%.9g", v);
  }
  fputs("]}", f);
}

int cmd_grad(const Args *a) {
  Built b;
  int status = 0;
  if (!build(&b, a, true)) {
    built_free(&b);
    return EXIT_SCRIPT;
  }
  Program *p = b.tp ? b.tp : b.ld.prog;
  const char *lv = prog_export(b.ld.prog, a->loss);
  Tensor *loss = value(&b, lv ? lv : a->loss);
  fflush(stdout);
  if (a->json) {
    printf("{\"loss\": %.9g, \"grads\": {", loss ? tensor_get(loss, 0) : (double)NAN);
    bool first = true;
    for (int i = 0; i < b.bw.npairs; i++) {
      if (!b.bw.pairs[i].grad) continue;
      Tensor *g = value(&b, b.bw.pairs[i].grad);
      if (!g) continue;
      printf("%s\"%s\": ", first ? "" : ", ", shown_name(p, b.bw.pairs[i].param));
      json_tensor(stdout, g);
      first = false;
    }
    printf("}}\n");
  } else {
    printf("loss = ");
    if (loss) tensor_print(stdout, loss, a->opt.precision);
    putchar('\n');
    for (int i = 0; i < b.bw.npairs; i++) {
      const char *name = shown_name(p, b.bw.pairs[i].param);
      if (!b.bw.pairs[i].grad) {
        printf("%s@GRAD: none (the loss does not depend on %s)\n", name, name);
        continue;
      }
      Tensor *g = value(&b, b.bw.pairs[i].grad);
      char shape[128];
      printf("%s@GRAD : f32%s =\n", name, g ? tensor_shape_str(g, shape, sizeof shape) : "?");
      if (g) tensor_print(stdout, g, a->opt.precision);
      putchar('\n');
    }
  }
  fflush(stdout);
  built_free(&b);
  return status;
}

/* ---- gradcheck --------------------------------------------------------------------- */

/* The loss after a forward run of fwd's executor. */
static bool forward_loss(Executor *ex, const char *loss, double *out) {
  if (exec_run(ex) != 0) return false;
  Tensor *t = exec_value(ex, loss);
  if (!t) return false;
  *out = tensor_get(t, 0);
  return true;
}

int cmd_gradcheck(const Args *a) {
  Built b;
  if (!build(&b, a, true)) {
    built_free(&b);
    return EXIT_SCRIPT;
  }
  /* A second, forward-only copy of the program: same seed, same values. */
  Loaded fwd;
  int status = 0;
  if (!load_script(&fwd, a->file)) {
    built_free(&b);
    unload(&fwd);
    return EXIT_SCRIPT;
  }
  Args fa = *a;
  fa.opt.tape = false;
  fa.opt.out = fopen("/dev/null", "w");
  Executor *ex = cli_start(&fwd, &fa);
  const char *lv = prog_export(fwd.prog, a->loss);
  const char *loss = lv ? lv : a->loss;
  double base;
  if (!ex || !forward_loss(ex, loss, &base)) {
    status = EXIT_SCRIPT;
    goto out;
  }
  Program *p = b.tp ? b.tp : b.ld.prog;
  printf("%-16s %10s %12s %12s  %s\n", "variable", "elements", "max abs err", "max rel err", "verdict");
  Rng rng;
  rng_seed(&rng, a->opt.seed + 12345);
  for (int i = 0; i < b.bw.npairs; i++) {
    const char *param = b.bw.pairs[i].param;
    const char *name = shown_name(p, param);
    const char *pv = prog_export(fwd.prog, name);
    Tensor *w = exec_value(ex, pv ? pv : param);
    Tensor *g = b.bw.pairs[i].grad ? value(&b, b.bw.pairs[i].grad) : NULL;
    if (!w) continue;
    int64_t n = w->numel, checks = a->samples && a->samples < n ? a->samples : n;
    double max_abs = 0, max_rel = 0;
    int64_t worst = -1;
    double worst_a = 0, worst_n = 0;
    for (int64_t k = 0; k < checks; k++) {
      int64_t e = checks == n ? k : (int64_t)(rng_uniform(&rng) * (double)n);
      float *x = tensor_f32(w);
      float saved = x[e];
      double lp, lm;
      x[e] = (float)((double)saved + a->eps);
      double hp = (double)x[e] - (double)saved;
      bool ok = forward_loss(ex, loss, &lp);
      x[e] = (float)((double)saved - a->eps);
      double hm = (double)saved - (double)x[e];
      ok = ok && forward_loss(ex, loss, &lm);
      x[e] = saved;
      if (!ok) {
        status = EXIT_SCRIPT;
        goto out;
      }
      double num = (lp - lm) / (hp + hm);
      double ana = g ? tensor_get(g, e) : 0.0;
      double err = fabs(ana - num), rel = err / fmax(fabs(num), 1e-3);
      if (err > max_abs) max_abs = err;
      if (rel > max_rel || worst < 0) {
        if (rel > max_rel) max_rel = rel;
        if (rel >= max_rel) worst = e, worst_a = ana, worst_n = num;
      }
    }
    bool pass = max_rel <= a->rtol;
    printf("%-16s %10lld %12.3e %12.3e  %s", name, (long long)checks, max_abs, max_rel, pass ? "ok" : "FAIL");
    if (!pass) printf(" (element %lld: analytic %.6g, numeric %.6g)", (long long)worst, worst_a, worst_n);
    putchar('\n');
    if (!pass) status = EXIT_SCRIPT;
  }
  if (status == 0) printf("all gradients match finite differences (rtol %g, eps %g)\n", a->rtol, a->eps);
out:
  fflush(stdout);
  if (fa.opt.out) fclose(fa.opt.out);
  exec_free(ex);
  unload(&fwd);
  built_free(&b);
  return status;
}
