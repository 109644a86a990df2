/* sample.c — `netrun sample`: new text from a trained next-byte model
 * (netrun(1), "sample").
 *
 * The model is a script whose text input x : i64[B, T] (T fixed: the input
 * the train block's text data feeds first) gives logits [B, T, V], V <= 256
 * (the train block's metric, or --output NAME), where position t predicts
 * the byte after x[t].
 *
 * Each sample starts from a newline (the separator of a word list) and
 * --prompt.  A step feeds every unfinished sample's last T bytes as a row
 * of x (fewer at first: the row is then padded with newlines after them,
 * which a causal model does not see from the sample's last position),
 * takes the logits at the sample's last byte, and draws the next byte:
 * p = softmax(logits / temperature), by the inverse of its cumulative sum
 * at a uniform number of the seeded generator (xoshiro, seeded by --seed);
 * temperature 0 takes the most likely byte (the first of equals).  A
 * sample ends at a newline (unless --no-stop) or after --length bytes; it
 * is printed without the first newline, one a line.  --count samples run
 * together, a row of the batch each, and draw from the generator in row
 * order, so the same command prints the same bytes. */
#include "cli/cli.h"
#include "cli/cmd.h"
#include "cli/option.h"
#include "train/train.h"
#include "io/weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLE_MAX_COUNT 4096
#define SAMPLE_MAX_LENGTH 1000000

typedef struct SampleArgs {
  Args a;
  const char *output, *prompt;
  bool no_stop;
  int64_t length, count, probs;
  double temperature;
} SampleArgs;

/* A whole number in [lo, hi], or the usage error. */
static int int_in(const OptionParser *p, int64_t lo, int64_t hi, int64_t *out) {
  if (!option_int(p, lo, out)) return EXIT_USAGE;
  return *out > hi ? option_bad(p) : 0;
}

static int apply_sample(const OptionParser *p, void *ctx) {
  SampleArgs *s = ctx;
  switch (p->opt->id) {
  case O_LENGTH: return int_in(p, 1, SAMPLE_MAX_LENGTH, &s->length);
  case O_COUNT: return int_in(p, 1, SAMPLE_MAX_COUNT, &s->count);
  case O_TEMPERATURE: return option_real(p, true, &s->temperature) ? 0 : EXIT_USAGE;
  case O_PROMPT: s->prompt = p->value; break;
  case O_OUTPUT: s->output = p->value; break;
  case O_PROBS: return int_in(p, 1, 256, &s->probs);
  case O_NO_STOP: s->no_stop = true; break;
  }
  return 0;
}

static int parse_sample(int argc, char **argv, SampleArgs *s) {
  memset(s, 0, sizeof *s);
  s->length = 100;
  s->count = 1;
  s->temperature = 1;
  s->prompt = "";
  CliOwn own = {apply_sample, s};
  return cli_parse_own(argc, argv, &s->a, OPT_RUN | OPT_WEIGHTS | OPT_SAMPLE, &own);
}

/* ---- the model ------------------------------------------------------------------------ */

/* What a step needs of the loaded script. */
typedef struct Model {
  Session ld;
  Executor *ex;
  const VarDesc *text;     /* the input fed the bytes */
  const char *logits;      /* the variable of the logits */
  const char *mode;        /* the mode input `training`, or NULL */
  int64_t context;         /* T */
  bool counted;            /* the errors have been counted (session_load, cli_start) */
} Model;

/* The mode input `training` (a bool scalar input; trainer.c's rule): fed
 * false, as predict does, unless --set gives it. */
static const char *mode_input(const Program *p) {
  const VarDesc *d = prog_named_var(p, "training");
  return d && d->block == 0 && (d->flags & VAR_INPUT) && d->dtype == DT_BOOL && d->shape.rank == 0 ? d->name : NULL;
}

/* The text input: the train block's first fed input, else the script's
 * first input (the mode input aside); it must be i64[B, T], T fixed. */
static bool find_text_input(Model *m, const TrainConfig *c, const char *file) {
  const Program *p = m->ld.prog;
  const Block *b0 = p->blocks[0];
  const VarDesc *v = c->nfeed ? prog_named_var(p, c->feed[0]) : NULL;
  for (int i = 0; i < b0->nvars && !c->nfeed && !v; i++)
    if ((b0->vars[i]->flags & VAR_INPUT) && b0->vars[i]->name != m->mode) v = b0->vars[i];
  if (!v || !(v->flags & VAR_INPUT)) {
    diag_error(&m->ld.diag, SPAN_NONE, "%s has no input for the text: sample feeds an input i64[B, T] its bytes", file);
    return false;
  }
  const char *name = v->user_name ? v->user_name : v->name;
  if (v->dtype != DT_I64 || v->shape.rank != 2 || !dim_known(v->shape.d[1])) {
    char buf[128];
    diag_error(&m->ld.diag, v->span, "sample feeds input '%s' the text's bytes, so it must be i64[B, T] with T a size; "
               "it is %s%s", name, dtype_name(v->dtype), shape_str(&v->shape, buf, sizeof buf));
    return false;
  }
  m->text = v;
  m->context = v->shape.d[1].n;
  return true;
}

/* The logits: --output NAME, else the train block's metric. */
static bool find_logits(Model *m, const TrainConfig *c, const char *output) {
  const char *name = output ? output : c->metric;
  if (!name) {
    diag_error(&m->ld.diag, SPAN_NONE, "sample needs the logits: --output NAME (or metric = NAME in the train block)");
    return false;
  }
  const char *var = prog_export(m->ld.prog, name);
  m->logits = var ? var : name;
  if (!prog_var(m->ld.prog, m->logits)) {
    const char *near = prog_nearest_name(m->ld.prog, name);
    diag_error(&m->ld.diag, SPAN_NONE, "the script has no value named '%s'%s%s%s", name, DIAG_MEAN(near));
    return false;
  }
  return true;
}

/* --set and --feed give the other inputs; the text input is sample's. */
static bool text_not_given(Model *m, const Args *a) {
  const char *name = m->text->user_name ? m->text->user_name : m->text->name;
  size_t n = strlen(name);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < (k ? a->nfeeds : a->nsets); i++) {
      const char *v = k ? a->feeds[i] : a->sets[i];
      if (strncmp(v, name, n) == 0 && v[n] == '=') {
        diag_error(&m->ld.diag, SPAN_NONE, "--%s %s: sample feeds '%s' itself (the text's bytes)", k ? "feed" : "set", v,
                   name);
        return false;
      }
    }
  return true;
}

/* Loads the script, finds its text input and logits, starts an executor
 * with the weights and the mode fed; false (reported) on error. */
static bool model_open(Model *m, SampleArgs *s) {
  memset(m, 0, sizeof *m);
  m->counted = true;
  if (!session_load(&m->ld, s->a.file)) return false;
  m->counted = false;
  TrainConfig c;
  m->mode = mode_input(m->ld.prog);
  bool mode_set = false;
  for (int i = 0; i < s->a.nsets && m->mode; i++) mode_set |= strncmp(s->a.sets[i], "training=", 9) == 0;
  if (!train_config(m->ld.prog, NULL, &c, true) || !find_text_input(m, &c, s->a.file) ||
      !find_logits(m, &c, s->output) || !text_not_given(m, &s->a))
    return false;
  Args a = s->a;
  a.opt.tape = false;
  if (!(m->ex = cli_start(&m->ld, &a))) return m->counted = true, false;
  if (a.weights ? !weights_load(&m->ld.diag, m->ld.prog, m->ex, a.weights, a.weights_partial) : exec_startup(m->ex) < 0)
    return false;
  if (m->mode && !mode_set) {
    Tensor *t = tensor_scalar_bool(false);
    bool ok = exec_feed(m->ex, m->mode, t, "sample");
    tensor_unref(t);
    if (!ok) return false;
  }
  return true;
}

/* ---- the samples ---------------------------------------------------------------------- */

/* The samples: row r's bytes are text[r * cap ..], len[r] of them (the
 * first newline and the prompt included); done[r] once it has ended. */
typedef struct Samples {
  int64_t count, cap, start;   /* rows, bytes a row may hold, bytes before the first drawn one */
  uint8_t *text;
  int64_t *len;
  bool *done;
  int64_t charged;
} Samples;

static bool samples_init(Diag *d, Samples *sm, const SampleArgs *s) {
  memset(sm, 0, sizeof *sm);
  sm->count = s->count;
  sm->start = 1 + (int64_t)strlen(s->prompt);
  sm->cap = sm->start + s->length;
  int64_t bytes = sm->count * (sm->cap + (int64_t)sizeof(int64_t) + 1);
  if (!mem_charge(bytes)) {
    char lim[256];
    diag_error(d, SPAN_NONE, "out of memory: %lld samples of %lld bytes: %s", (long long)sm->count,
               (long long)sm->cap, mem_limit_why((double)bytes, lim, sizeof lim));
    return false;
  }
  sm->charged = bytes;
  sm->text = mem_alloc(NULL, (size_t)(sm->count * sm->cap));
  sm->len = mem_alloc(NULL, sizeof *sm->len * (size_t)sm->count);
  sm->done = mem_alloc(NULL, sizeof *sm->done * (size_t)sm->count);
  for (int64_t r = 0; r < sm->count; r++) {
    uint8_t *t = sm->text + r * sm->cap;
    t[0] = '\n';
    memcpy(t + 1, s->prompt, (size_t)(sm->start - 1));
    sm->len[r] = sm->start;
    sm->done[r] = false;
  }
  return true;
}

static void samples_free(Samples *sm) {
  mem_free(sm->text);
  mem_free(sm->len);
  mem_free(sm->done);
  mem_uncharge(sm->charged);
}

/* x for one step: each row's last T bytes, padded with newlines after
 * them while a row is shorter than T.  A finished row is fed as it is. */
static Tensor *window(const Samples *sm, int64_t T) {
  int64_t shape[2] = {sm->count, T};
  Tensor *x = tensor_new(DT_I64, 2, shape);
  for (int64_t r = 0; r < sm->count; r++) {
    const uint8_t *t = sm->text + r * sm->cap;
    int64_t from = sm->len[r] > T ? sm->len[r] - T : 0;
    for (int64_t j = 0; j < T; j++) tensor_i64(x)[r * T + j] = from + j < sm->len[r] ? t[from + j] : '\n';
  }
  return x;
}

/* The position whose logits predict row r's next byte. */
static int64_t last_position(const Samples *sm, int64_t r, int64_t T) { return (sm->len[r] < T ? sm->len[r] : T) - 1; }

/* ---- a draw ------------------------------------------------------------------------------ */

/* Element i of float tensor v as a double. */
static double logit(const Tensor *v, int64_t i) {
  return v->dtype == DT_F64 ? tensor_f64(v)[i] : (double)tensor_f32(v)[i];
}

/* The next byte from the V logits of v at offset off: p = softmax(l / temp)
 * (softmax(l) when temp is 0, which takes the first largest logit), drawn
 * by inverse transform at one uniform number of rng.  p[] gets the
 * probabilities; -1 when a logit is NaN or +inf, or all are -inf. */
static int draw(const Tensor *v, int64_t off, int64_t V, double temp, Rng *rng, double *p) {
  int best = 0;
  for (int64_t i = 0; i < V; i++) {
    double l = logit(v, off + i);
    if (isnan(l) || (isinf(l) && l > 0)) return -1;
    if (l > logit(v, off + best)) best = (int)i;
  }
  double top = logit(v, off + best), z = 0, t = temp > 0 ? temp : 1;
  if (isinf(top)) return -1;   /* every logit -inf */
  for (int64_t i = 0; i < V; i++) z += p[i] = exp((logit(v, off + i) - top) / t);
  if (temp == 0) {
    for (int64_t i = 0; i < V; i++) p[i] /= z;
    return best;
  }
  double at = rng_uniform(rng) * z, sum = 0;
  int pick = -1;
  for (int64_t i = 0; i < V; i++) {
    sum += p[i];
    if (pick < 0 && sum > at) pick = (int)i;
    if (p[i] > 0 && sum <= at) best = (int)i;   /* the last possible byte, should rounding leave sum <= at */
    p[i] /= z;
  }
  return pick >= 0 ? pick : best;
}

/* A byte as a C character constant: 'a', '\n', '\'', '\x80'. */
static void put_byte(FILE *f, int b) {
  if (b == '\n') fputs("'\\n'", f);
  else if (b == '\t') fputs("'\\t'", f);
  else if (b == '\'' || b == '\\') fprintf(f, "'\\%c'", b);
  else if (b >= 0x20 && b < 0x7f) fprintf(f, "'%c'", b);
  else fprintf(f, "'\\x%02x'", b);
}

/* --probs K: the byte drawn for sample r (1-based) and its probability,
 * then the K most probable bytes (those possible), the likelier first
 * (the lower byte of equals). */
static void trace(FILE *f, int64_t r, int64_t at, int b, const double *p, int64_t V, int64_t k) {
  fprintf(f, "sample %lld, byte %lld: ", (long long)r + 1, (long long)at);
  put_byte(f, b);
  fprintf(f, " %.6f |", p[b]);
  bool shown[256] = {false};
  for (int64_t j = 0; j < k && j < V; j++) {
    int m = -1;
    for (int i = 0; i < V; i++)
      if (!shown[i] && p[i] > 0 && (m < 0 || p[i] > p[m])) m = i;
    if (m < 0) break;   /* no other byte is possible */
    shown[m] = true;
    fputc(' ', f);
    put_byte(f, m);
    fprintf(f, " %.6f", p[m]);
  }
  fputc('\n', f);
}

/* ---- the steps --------------------------------------------------------------------------- */

/* The logits of one step, checked: [count, T, V], V <= 256, float. */
static const Tensor *step_logits(Model *m, const Samples *sm) {
  Tensor *x = window(sm, m->context);
  bool ok = exec_feed(m->ex, m->text->name, x, "sample");
  tensor_unref(x);
  if (!ok || exec_run_for(m->ex, &m->logits, 1) != 0) return NULL;
  const Tensor *v = exec_value(m->ex, m->logits);
  bool fits = v && dtype_is_float(v->dtype) && v->rank == 3 && v->shape[0] == sm->count &&
              v->shape[1] == m->context && v->shape[2] >= 1 && v->shape[2] <= 256;
  if (!fits) {
    char buf[128];
    diag_error(&m->ld.diag, SPAN_NONE, "'%s' is %s%s, but sample needs logits [%lld, %lld, V] of V <= 256 byte values: "
               "one row per sample, one per position of x", m->logits, v ? dtype_name(v->dtype) : "unset",
               v ? tensor_shape_str(v, buf, sizeof buf) : "", (long long)sm->count, (long long)m->context);
    return NULL;
  }
  return v;
}

/* Runs the steps until every sample has ended; false (reported) on error. */
static bool sample_steps(Model *m, const SampleArgs *s, Samples *sm) {
  Rng rng;
  rng_seed(&rng, s->a.opt.seed ^ 0x5a3b1e5eedull);
  double p[256];
  for (int64_t step = 1; step <= s->length; step++) {
    const Tensor *v = step_logits(m, sm);
    if (!v) return false;
    int64_t T = m->context, V = v->shape[2];
    bool left = false;
    for (int64_t r = 0; r < sm->count; r++) {
      if (sm->done[r]) continue;
      int b = draw(v, (r * T + last_position(sm, r, T)) * V, V, s->temperature, &rng, p);
      if (b < 0) {
        diag_error(&m->ld.diag, SPAN_NONE, "the logits '%s' of sample %lld at byte %lld are not finite (NaN, +inf, or "
                   "all -inf)", m->logits, (long long)r + 1, (long long)step);
        return false;
      }
      if (s->probs) trace(stdout, r, step, b, p, V, s->probs);
      sm->done[r] = (b == '\n' && !s->no_stop) || step == s->length;
      if (b != '\n' || s->no_stop) sm->text[r * sm->cap + sm->len[r]++] = (uint8_t)b;
      left |= !sm->done[r];
    }
    if (!left) break;
  }
  return true;
}

int cmd_sample(int argc, char **argv) {
  SampleArgs s;
  int rc = parse_sample(argc, argv, &s);
  if (rc) return rc;
  Model m;
  Samples sm = {0};
  bool ok = model_open(&m, &s) && samples_init(&m.ld.diag, &sm, &s) && sample_steps(&m, &s, &sm);
  for (int64_t r = 0; ok && r < sm.count; r++) {
    fwrite(sm.text + r * sm.cap + 1, 1, (size_t)(sm.len[r] - 1), stdout);
    fputc('\n', stdout);
  }
  if (sm.text) samples_free(&sm);
  if (!ok && !m.counted) diag_finish(&m.ld.diag);
  exec_free(m.ex);
  session_free(&m.ld);
  return ok ? 0 : EXIT_SCRIPT;
}
