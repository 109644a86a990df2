/* summary.c — `netrun summary FILE [--batch N]`: what a model holds and
 * costs (Keras's model.summary(), torchinfo), read from the lowered
 * program without running it:
 *
 *   - every parameter and state (a script's `state`) with its scoped name
 *     (netrun-lang(5), section 10), shape and element count, and their
 *     totals, parameters and states apart;
 *   - the layers: a layer is the ops one top-level call of a def expanded
 *     to (dense(x, 512) is one layer, named after the scope of the
 *     parameters it declares: dense_1), or one op called at top level
 *     (relu); with its output shape, parameter count and FLOPs;
 *   - the FLOPs of one forward step: matmul and conv2d/conv2d_transpose
 *     count 2 per multiply-add; every other op 1 per element of its
 *     outputs; ops inside while/if bodies are not counted (their count
 *     depends on the data);
 *   - the activation memory: the bytes of every value block 0's ops output
 *     in one forward step (no reuse assumed, the backward not counted);
 *   - the planned peak: the most bytes block 0's values hold at once in a
 *     training step (the train block's program: forward, backward, update,
 *     rewritten as the trainer runs it) under the memory plan
 *     (exec/plan.h), beside the same with every value kept; a script
 *     without a train block, its forward step; the values inside while
 *     and if bodies are not counted, and the line says so.
 *
 * A symbolic dimension that is the first of an input (B) takes the batch:
 * --batch, else the train block's batch, else 1.  Any other symbol, or a
 * size known only at run time, makes the figures it enters unknown ("?"). */
#include "cli/cli.h"
#include "cli/cmd.h"
#include "cli/option.h"
#include "exec/plan.h"
#include "ir/rewrite.h"
#include "train/train.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct Sum {
  const Program *p;
  int64_t batch;
  const char *bsyms[16];   /* the batch symbols: the first dims of inputs */
  int nbsyms;
} Sum;

/* ---- sizes at the batch ------------------------------------------------------------ */

static int64_t dim_size(const Sum *s, Dim d) {
  if (d.n >= 0) return d.n;
  for (int i = 0; d.sym && i < s->nbsyms; i++)
    if (strcmp(d.sym, s->bsyms[i]) == 0) return s->batch;
  return -1;
}

/* The element count of v at the batch, or -1 if unknown. */
static int64_t var_numel(const Sum *s, const VarDesc *v) {
  if (!v || v->shape.rank < 0) return -1;
  int64_t n = 1;
  for (int i = 0; i < v->shape.rank; i++) {
    int64_t k = dim_size(s, v->shape.d[i]);
    if (k < 0) return -1;
    n *= k;
  }
  return n;
}

static const char *shape_at_batch(const Sum *s, const VarDesc *v, char *buf, size_t n) {
  if (!v || v->shape.rank < 0) return "[...]";
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < v->shape.rank && k < n; i++) {
    int64_t d = dim_size(s, v->shape.d[i]);
    const char *sep = i ? ", " : "";
    if (d >= 0) k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, sep, d);
    else k += (size_t)snprintf(buf + k, n - k, "%s%s", sep, v->shape.d[i].sym ? v->shape.d[i].sym : "?");
  }
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

static int dtype_bytes(DType t) { return t == DT_I64 || t == DT_F64 ? 8 : t == DT_BOOL ? 1 : 4; }

static void fmt_count(char *buf, size_t n, int64_t v) {
  if (v < 0) snprintf(buf, n, "?");
  else snprintf(buf, n, "%" PRId64, v);
}

/* ---- FLOPs ------------------------------------------------------------------------- */

static const VarDesc *in_var(const Sum *s, const OpDesc *op, const char *slot) {
  const char *n = op_in1(op, slot);
  return n ? prog_var(s->p, n) : NULL;
}

/* Elements of every output of op (-1: one unknown). */
static int64_t out_numel(const Sum *s, const OpDesc *op) {
  int64_t n = 0;
  for (int i = 0; i < op->nout; i++)
    for (int j = 0; j < op->out[i].n; j++) {
      int64_t k = var_numel(s, prog_var(s->p, op->out[i].args[j]));
      if (k < 0) return -1;
      n += k;
    }
  return n;
}

/* The multiply-adds' FLOPs of a matmul or convolution (*mac set), else
 * one per output element; -1 if unknown. */
static int64_t op_flops(const Sum *s, const OpDesc *op, bool *mac) {
  *mac = false;
  int64_t out = out_numel(s, op);
  if (out < 0) return -1;
  if (strcmp(op->type, "matmul") == 0) {
    const VarDesc *x = in_var(s, op, "X");
    if (!x || x->shape.rank < 1) return -1;
    int r = x->shape.rank;
    int64_t k = dim_size(s, x->shape.d[r >= 2 && op_attr_i(op, "transpose_x", 0) ? r - 2 : r - 1]);
    *mac = true;
    return k < 0 ? -1 : 2 * out * k;
  }
  bool conv = strcmp(op->type, "conv2d") == 0, tconv = strcmp(op->type, "conv2d_transpose") == 0;
  if (conv || tconv) {
    /* conv2d: each output element is Filter[1]*kh*kw multiply-adds;
     * conv2d_transpose: each input element scatters Filter[1]*kh*kw. */
    const VarDesc *f = in_var(s, op, "Filter");
    int64_t fn = var_numel(s, f), per = fn > 0 && f->shape.rank == 4 ? fn / f->shape.d[0].n : -1;
    int64_t base = conv ? out : var_numel(s, in_var(s, op, "Input"));
    *mac = true;
    return per < 0 || base < 0 ? -1 : 2 * base * per;
  }
  return out;
}

/* ---- parameters and states --------------------------------------------------------- */

/* Prints the variables with flag; returns their total elements (-1 if
 * one is unknown) and adds their bytes to *bytes. */
static int64_t print_vars(const Sum *s, unsigned flag, const char *title, int64_t *bytes) {
  const Block *b = s->p->blocks[0];
  int64_t total = 0;
  bool any = false;
  char sh[256], cnt[32];
  for (int i = 0; i < b->nvars; i++) {
    const VarDesc *v = b->vars[i];
    if (!(v->flags & flag)) continue;
    if (!any) printf("%-32s %-7s %-22s %12s\n", title, "dtype", "shape", "elements");
    any = true;
    int64_t n = var_numel(s, v);
    fmt_count(cnt, sizeof cnt, n);
    printf("%-32s %-7s %-22s %12s\n", v->name, dtype_name(v->dtype), shape_at_batch(s, v, sh, sizeof sh), cnt);
    if (n < 0 || total < 0) total = -1;
    else total += n, *bytes += n * dtype_bytes(v->dtype);
  }
  if (!any) printf("%s: none\n", title);
  return total;
}

/* ---- layers ------------------------------------------------------------------------ */

static const CallSite *outermost(const CallSite *c) {
  while (c && c->outer) c = c->outer;
  return c;
}

typedef struct Totals {
  int64_t flops, mac_flops, act_bytes;
  bool unknown;
} Totals;

/* The name of the layer ops[first, last) make: the scope of the first
 * parameter they read, the def's name, or the op's type. */
static const char *layer_name(const Sum *s, const Block *b, int first, int last, char *buf, size_t n) {
  for (int i = first; i < last; i++)
    for (int j = 0; j < b->ops[i]->nin; j++)
      for (int k = 0; k < b->ops[i]->in[j].n; k++) {
        const VarDesc *v = prog_var(s->p, b->ops[i]->in[j].args[k]);
        const char *dot = v && (v->flags & (VAR_PARAM | VAR_KEPT)) ? strrchr(v->name, '.') : NULL;
        if (!dot) continue;
        snprintf(buf, n, "%.*s", (int)(dot - v->name), v->name);
        return buf;
      }
  const CallSite *c = outermost(b->ops[first]->call);
  return c ? c->fn : b->ops[first]->type;
}

/* Prints one layer, ops[first, last) of block 0, adding to t. */
static void print_layer(const Sum *s, int first, int last, Totals *t) {
  const Block *b = s->p->blocks[0];
  int64_t flops = 0, params = 0;
  for (int i = first; i < last; i++) {
    const OpDesc *op = b->ops[i];
    bool mac;
    int64_t f = op_flops(s, op, &mac);
    if (f < 0) flops = -1, t->unknown = true;
    else if (flops >= 0) flops += f;
    if (f >= 0) t->flops += f, t->mac_flops += mac ? f : 0;
    for (int j = 0; j < op->nout; j++)
      for (int k = 0; k < op->out[j].n; k++) {
        const VarDesc *v = prog_var(s->p, op->out[j].args[k]);
        int64_t n = var_numel(s, v);
        if (n < 0) t->unknown = true;
        else t->act_bytes += n * dtype_bytes(v->dtype);
      }
    for (int j = 0; j < op->nin; j++)
      for (int k = 0; k < op->in[j].n; k++) {
        const VarDesc *v = prog_var(s->p, op->in[j].args[k]);
        if (v && (v->flags & VAR_PARAM) && params >= 0) {
          int64_t n = var_numel(s, v);
          params = n < 0 ? -1 : params + n;
        }
      }
  }
  const OpDesc *lastop = b->ops[last - 1];
  const char *o = lastop->nout && lastop->out[0].n ? lastop->out[0].args[0] : NULL;
  char name[128], sh[256], pc[32], fc[32];
  fmt_count(pc, sizeof pc, params);
  fmt_count(fc, sizeof fc, flops);
  printf("%-24s %4d %-22s %-22s %12s %14s\n", layer_name(s, b, first, last, name, sizeof name), last - first,
         o ? o : "-", o ? shape_at_batch(s, prog_var(s->p, o), sh, sizeof sh) : "-", pc, fc);
}

static void print_layers(const Sum *s, Totals *t) {
  const Block *b = s->p->blocks[0];
  printf("%-24s %4s %-22s %-22s %12s %14s\n", "layer", "ops", "output", "output shape", "params", "FLOPs");
  for (int i = 0; i < b->nops;) {
    const CallSite *c = outermost(b->ops[i]->call);
    int j = i + 1;
    while (c && j < b->nops && outermost(b->ops[j]->call) == c) j++;
    print_layer(s, i, j, t);
    i = j;
  }
}

/* ---- the verb ---------------------------------------------------------------------- */

/* --batch, its one option of its own. */
static int summary_apply(const OptionParser *p, void *ctx) { return option_int(p, 1, ctx) ? 0 : EXIT_USAGE; }

/* The batch: --batch, the train block's, or 1; the batch symbols. */
static void find_batch(Sum *s, int64_t given) {
  const Setting *st = prog_setting(s->p, "train", "batch");
  s->batch = given > 0 ? given : st && st->value.type == ATTR_INT && st->value.u.i > 0 ? st->value.u.i : 1;
  const Block *b = s->p->blocks[0];
  for (int i = 0; i < b->nvars && s->nbsyms < 16; i++) {
    const VarDesc *v = b->vars[i];
    if ((v->flags & VAR_INPUT) && v->shape.rank > 0 && v->shape.d[0].sym) s->bsyms[s->nbsyms++] = v->shape.d[0].sym;
  }
}

static void print_totals(const Totals *t, int64_t params, int64_t pbytes, int64_t states, int64_t sbytes) {
  char a[32], c[32];
  fmt_count(a, sizeof a, params);
  fmt_count(c, sizeof c, states);
  printf("\nparameters: %s elements, %" PRId64 " bytes\n", a, pbytes);
  printf("states: %s elements, %" PRId64 " bytes\n", c, sbytes);
  const char *more = t->unknown ? " (and ops of unknown size)" : "";
  printf("FLOPs of one forward step: %" PRId64 "%s\n", t->flops, more);
  printf("  matmul and conv (2 per multiply-add): %" PRId64 "\n", t->mac_flops);
  printf("  other ops (1 per output element): %" PRId64 "\n", t->flops - t->mac_flops);
  printf("activation memory of one forward step (every op output): %" PRId64 " bytes%s\n", t->act_bytes, more);
}

/* ---- the memory plan ------------------------------------------------------------------- */

static bool has_train_block(const Program *p) {
  for (int i = 0; i < p->nsettings; i++)
    if (strcmp(p->settings[i].block, "train") == 0) return true;
  return false;
}

/* Turns block 0 into the program the trainer runs (the backward and the
 * updates appended, then the rewrites of run_start) and prints the peak
 * of its step under the memory plan and with every value kept; without a
 * train block, of the forward step.  False if the training program cannot
 * be made (reported). */
static bool print_plan(Sum *s, Program *p) {
  const char **keep = NULL;
  int nkeep = 0;
  bool training = has_train_block(p);
  if (training) {
    TrainConfig c;
    BackwardResult bw;
    int nforward = p->blocks[0]->nops;   /* as the trainer marks it */
    if (!train_config(p, NULL, &c, true) || !train_program(p, &c, &bw)) return false;
    ExecOptions o;
    exec_default_options(&o);
    o.tape = false;
    if (exec_rewrite_wanted(&o)) rewrite_program(p, &(RewriteOpts){RW_FUSE | RW_KEEP, &nforward, 1, 0, NULL, 0});
    keep = train_plan_keep(p, &c, &bw, &nkeep);
  }
  const Block *b0 = p->blocks[0];
  int64_t *bytes = mem_calloc((size_t)b0->nvars + 1, sizeof *bytes);
  for (int i = 0; i < b0->nvars; i++) {
    int64_t n = var_numel(s, b0->vars[i]);
    bytes[i] = n < 0 ? -1 : n * dtype_bytes(b0->vars[i]->dtype);
  }
  int *release = plan_release(p, 0, keep, nkeep);
  bool unknown = false;
  int64_t planned = plan_peak(p, release, bytes, &unknown), kept = plan_peak(p, NULL, bytes, &unknown);
  /* A body's turns are counted when it runs, not here: say so rather
   * than print a figure that looks whole. */
  printf("planned peak of one %s step: %" PRId64 " bytes (every value kept: %" PRId64 " bytes)%s%s\n",
         training ? "training" : "forward", planned, kept, unknown ? " (and values of unknown size)" : "",
         p->nblocks > 1 ? "; values inside while and if bodies not counted" : "");
  mem_free(release);
  mem_free(bytes);
  mem_free(keep);
  return true;
}

int cmd_summary(int argc, char **argv) {
  Args a;
  int64_t batch = 0;
  CliOwn own = {summary_apply, &batch};
  int rc = cli_parse_own(argc, argv, &a, OPT_SUMMARY, &own);
  if (rc) return rc;
  Session ld;
  if (!session_load(&ld, a.file)) {
    session_free(&ld);
    return EXIT_SCRIPT;
  }
  Sum s = {.p = ld.prog};
  find_batch(&s, batch);
  printf("model %s, batch %" PRId64 "\n\n", a.file, s.batch);
  int64_t pbytes = 0, sbytes = 0;
  int64_t params = print_vars(&s, VAR_PARAM, "parameter", &pbytes);
  printf("\n");
  int64_t states = print_vars(&s, VAR_KEPT, "state", &sbytes);
  printf("\n");
  Totals t = {0};
  print_layers(&s, &t);
  print_totals(&t, params, pbytes, states, sbytes);
  bool ok = print_plan(&s, ld.prog);
  diag_finish(&ld.diag);
  session_free(&ld);
  return ok ? 0 : EXIT_SCRIPT;
}
