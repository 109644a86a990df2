/* trainer.c — the runs of `netrun train`, `eval`, `predict` and `lr-find`
 * (trainer.h; their options are trainverb.c's): the training loop over
 * real data, progress and logs, checkpoints and resuming; lr-find's sweep
 * of training steps (its curve: lrfind.c).
 *
 * One executor runs the training program (forward, backward, optimizer
 * ops: train.c) once per batch; evaluation runs only its forward ops.
 * Everything a run depends on is seeded: the executor's generator
 * (initializers, dropout) and the shuffling generator, both saved in
 * checkpoints with the parameters and the optimizer state, so a resumed
 * run continues exactly where the interrupted one stopped. */
#include "train/trainer.h"

#include "io/checkpoint.h"
#include "io/data.h"
#include "exec/dist.h"
#include "ir/dump.h"
#include "base/file.h"
#include "train/lrfind.h"
#include "exec/print.h"
#include "io/report.h"
#include "train/train.h"
#include "io/weights.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;

/* The first signal stops the run after the current step (so every
 * parameter is updated, then saved); a second stops it at once.  Under
 * mpirun, which stops reading the ranks' output once it forwards a
 * signal, a rank blocked writing a progress line into a full pipe would
 * never reach the step where the ranks agree to stop: from the signal on,
 * output that cannot be written at once is dropped instead (fcntl is
 * async-signal-safe; the interrupted write restarts and returns). */
static void on_stop(int sig) {
  if (stop_signal) exec_interrupt();
  stop_signal = sig;
  if (dist_size() > 1)
    for (int fd = 1; fd <= 2; fd++) {
      int fl = fcntl(fd, F_GETFL);
      if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A number as text. */
typedef struct Num {
  char s[32];
} Num;

/* x in the fewest digits that read back as x: 0.1, not 0.10000000000000001;
 * with f32, as the float x is (the learning rate the optimizers read). */
static Num shortest_as(double x, bool f32) {
  Num n;
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(n.s, sizeof n.s, "%.*g", prec, x);
    if (f32 ? (double)strtof(n.s, NULL) == x : strtod(n.s, NULL) == x) break;
  }
  return n;
}
static Num shortest(double x) { return shortest_as(x, false); }

/* A loss as the progress lines show it: `digits` decimals, or in %g style
 * when it is huge (1.235e+30, not thirty-one digits and four decimals). */
static Num loss_str(double x, int digits) {
  Num n;
  if (isnan(x)) snprintf(n.s, sizeof n.s, "nan");   /* not "-nan" */
  else snprintf(n.s, sizeof n.s, fabs(x) < 1e6 ? "%.*f" : "%.*g", digits, x);
  return n;
}

bool trainer_sets_mode(const RunFeeds *f) {
  for (int i = 0; i < f->nsets; i++)
    if (strncmp(f->sets[i], "training=", 9) == 0) return true;
  return false;
}

/* ---- the learning rate ---------------------------------------------------------- */

/* The learning rate at fractional epoch e (0 at the start). */
static double schedule(const TrainConfig *c, double e) {
  double lr = c->lr;
  if (strcmp(c->schedule, "step") == 0) lr *= pow(c->gamma, floor(e / (double)c->step_size));
  else if (strcmp(c->schedule, "cosine") == 0) lr *= 0.5 * (1 + cos(M_PI * fmin(e / (double)c->epochs, 1.0)));
  if (c->warmup > 0 && e < c->warmup) lr *= e / c->warmup;
  return lr;
}

/* ---- the run ----------------------------------------------------------------------- */

typedef struct Run {
  TrainArgs *t;
  TrainConfig c;
  Session ld;
  Program *p;
  BackwardResult bw;
  int nforward;                 /* block 0's forward ops */
  Executor *ex;
  Dataset train, test, val;
  bool has_train, has_test, has_val;
  const VarDesc *feed[16];      /* the inputs fed, per dataset column */
  int nfeed;                    /* columns fed: all, or all but the labels */
  const VarDesc *label;         /* the label input, for accuracy; NULL if unfed */
  const char *eval_name;        /* what evaluation's results are labelled */
  const char *loss_var, *metric_var;
  Tensor *lr;
  Rng shuffle;                  /* the data order's generator */
  Rng shuffle_at_epoch;         /* its state when the current epoch began */
  uint64_t hash;
  int64_t epoch, step, samples, step_in_epoch;
  int64_t data_bytes;           /* of the splits read, before --limit */
  double best;
  int64_t best_epoch, stalled;  /* the epoch that scored best, and epochs since (patience) */
  double epoch_loss;            /* the current epoch's loss summed over its examples */
  int64_t epoch_n, epoch_hits;  /* its examples, and those the metric got right */
  int64_t per_example;          /* the metric's predictions per example: 1, or T for
                                   labels [B, T] (a text window's next bytes) */
  double ema;                   /* the loss's moving average, from 0 */
  int64_t ema_n;                /* the losses averaged into it */
  bool warned;                  /* --keep-going has said a loss was not finite */
  bool mode_set;                /* --set training=...: evaluation feeds that */
  LogFile log;                  /* --log: open when log.fd >= 0 or log.a.tmp */
  bool logging, log_failed;
  const char *mode_var;         /* `input training : bool`, if declared */
  Tensor *weight;               /* N > 1 ranks: this rank's share of a step */
  bool quiet;                   /* a rank but rank 0: no progress, log or checkpoint */
  int stop_sig;                 /* the signal every rank stops for (0: none yet) */
  Confusion *confusion;         /* eval --confusion: counted by correct() */
} Run;

/* On N > 1 ranks, a failure every rank saw (a rank's failed start or
 * forward pass, a loss that is not finite): they all stop, none waits. */
static bool failure_agreed;

/* ---- ranks: data-parallel training under mpirun (dist.h) ------------------------------ */

/* Steps per epoch: a step takes `batch` examples on each rank. */
static int64_t epoch_steps(const Run *r) {
  int64_t per = r->c.batch * dist_size();
  return (r->train.n + per - 1) / per;
}

/* What the ranks of one job must share: the program, the settings that
 * shape a step and the position a checkpoint resumes from. */
static uint64_t fingerprint(const Run *r) {
  double lr = r->c.lr;
  uint64_t v[] = {r->hash, (uint64_t)r->c.batch, (uint64_t)r->c.epochs, (uint64_t)r->train.n,
                  (uint64_t)r->step, 0};
  memcpy(&v[5], &lr, sizeof lr);
  return ckpt_hash(v, sizeof v);
}

/* Every rank set up (and resumed) the same run; when one did not, every
 * rank stops, and says which (what: what the ranks do, "trains"...). */
static bool agree_start(Run *r, bool ok, const char *what) {
  int n = dist_size();
  DistReport mine = {.ok = ok, .tag = ok ? fingerprint(r) : 0}, sum, *all = mem_alloc(NULL, sizeof *all * (size_t)n);
  bool same = dist_agree(&mine, &sum, all);
  int k = dist_odd_rank(all, same);
  mem_free(all);
  if (k < 0) return true;
  if (!same && ok)
    diag_error(NULL, SPAN_NONE, "rank %d of %d: rank %d could not start (its error is above); stopping", dist_rank(),
               n, k);
  else if (same && dist_rank() == 0)
    diag_error(NULL, SPAN_NONE, "rank %d %s another program, settings, data or checkpoint than rank 0; stopping",
               k, what);
  failure_agreed = true;
  return false;
}

/* Rank 0's parameters, optimizer state and generators on every rank: the
 * same model everywhere, whatever each rank initialised or read. */
static void sync_model(Run *r) {
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < b0->nvars; i++) {
    const VarDesc *v = b0->vars[i];
    bool held = v->flags & (VAR_PARAM | VAR_STATE) && strcmp(v->name, TRAIN_LR_VAR) != 0;
    Tensor *t = held ? exec_var_value(r->ex, v->name) : NULL;
    if (t) dist_broadcast(t->data, (size_t)t->numel * dtype_size(t->dtype));
  }
  dist_broadcast(exec_rng(r->ex), sizeof *exec_rng(r->ex));
  dist_broadcast(&r->shuffle, sizeof r->shuffle);
  dist_broadcast(&r->shuffle_at_epoch, sizeof r->shuffle_at_epoch);
}

/* After a step's forward pass: the step's loss (the mean over every
 * rank's examples), correct predictions and examples in *st; this rank's
 * share of the examples, the weight of its gradients in the allreduce;
 * and the signal every rank stops for.  False (every rank stops) when a
 * rank's forward pass failed. */
typedef struct Step {
  double loss;
  int64_t hits, n;
} Step;
static bool agree_step(Run *r, bool ok, Step *st) {
  int n = dist_size();
  DistReport mine = {.loss = st->n ? st->loss * (double)st->n : 0, .hits = st->hits, .n = st->n, .ok = ok,
                 .sig = stop_signal},
         sum, *all = mem_alloc(NULL, sizeof *all * (size_t)n);
  bool every = dist_agree(&mine, &sum, all);
  int k = dist_odd_rank(all, false);
  mem_free(all);
  if (!every) {
    if (ok) diag_error(NULL, SPAN_NONE, "rank %d of %d: step %lld failed on rank %d (its error is above); stopping",
                       dist_rank(), n, (long long)r->step + 1, k);
    failure_agreed = true;
    return false;
  }
  *st = (Step){sum.n ? sum.loss / (double)sum.n : (double)NAN, sum.hits, sum.n};
  tensor_f32(r->weight)[0] = (float)((double)mine.n / (double)(sum.n ? sum.n : 1));
  r->stop_sig = sum.sig;
  return true;
}

/* Whether the run stops after this step, and for which signal: on N
 * ranks, the one every rank agreed on at the step's forward pass. */
static int stop_sig(const Run *r) { return dist_size() > 1 ? r->stop_sig : stop_signal; }

/* The hash of this rank's variables of `flags` (FNV-1a of their bytes,
 * in order): its parameters, or its script's states. */
static uint64_t vars_hash(Run *r, unsigned flags) {
  const Block *b0 = r->p->blocks[0];
  uint64_t h = 14695981039346656037ull;
  for (int i = 0; i < b0->nvars; i++) {
    Tensor *t = b0->vars[i]->flags & flags ? exec_var_value(r->ex, b0->vars[i]->name) : NULL;
    if (t) h = (h ^ ckpt_hash(t->data, (size_t)t->numel * dtype_size(t->dtype))) * 1099511628211ull;
  }
  return h;
}

/* The script's f32 states (a batch normalisation's running mean and
 * variance), which each rank updates from its own shard: the mean over
 * the ranks (their sum in rank order, over N) on every rank, before an
 * evaluation or a checkpoint reads them. */
static void average_states(Run *r) {
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < b0->nvars; i++) {
    Tensor *t = b0->vars[i]->flags & VAR_KEPT ? exec_var_value(r->ex, b0->vars[i]->name) : NULL;
    if (!t || t->dtype != DT_F32) continue;
    float *x = tensor_f32(t);
    dist_sum_f32(x, t->numel);
    for (int64_t k = 0; k < t->numel; k++) x[k] /= (float)dist_size();
  }
}

/* The script's states of a rank's step that counts for nothing (a shard's
 * stand-in example): copied before it, put back after, so that the
 * example a rank runs twice does not move its running statistics. */
static Tensor **save_states(Run *r) {
  const Block *b0 = r->p->blocks[0];
  Tensor **saved = mem_calloc((size_t)b0->nvars + 1, sizeof *saved);
  for (int i = 0; i < b0->nvars; i++) {
    Tensor *t = b0->vars[i]->flags & VAR_KEPT ? exec_var_value(r->ex, b0->vars[i]->name) : NULL;
    if (t) saved[i] = tensor_copy(t);
  }
  return saved;
}
static void restore_states(Run *r, Tensor **saved) {
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < b0->nvars; i++) {
    Tensor *t = saved[i] ? exec_var_value(r->ex, b0->vars[i]->name) : NULL;
    if (t && t->numel == saved[i]->numel && t->dtype == saved[i]->dtype)
      memcpy(t->data, saved[i]->data, (size_t)t->numel * dtype_size(t->dtype));
    tensor_unref(saved[i]);
  }
  mem_free(saved);
}

/* FNV-1a of the forward program's text: a checkpoint belongs to it. */
static uint64_t program_hash(const Program *p) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) mem_oom(0);
  DumpOptions opt = {.format = DUMP_TEXT, .startup = true};
  dump_program(f, p, &opt);
  fclose(f);
  uint64_t h = ckpt_hash(buf, n);
  free(buf);
  return h;
}

/* Text data's windows are byte values: the inputs they feed must be i64
 * (an f32 input would silently take token ids as numbers). */
static bool text_inputs_i64(Run *r) {
  for (int i = 0; i < r->nfeed && r->c.context > 0; i++)
    if (r->feed[i]->dtype != DT_I64) {
      diag_error(&r->ld.diag, r->feed[i]->span, "input '%s' is %s, but text data (context = %lld) feeds byte values: "
                 "declare it i64", r->feed[i]->name, dtype_name(r->feed[i]->dtype), (long long)r->c.context);
      return false;
    }
  return true;
}
static bool label_is_column(const Run *r);

/* Which input each dataset column feeds: the train block's feed list, or
 * the script's inputs in order.  A feed list one short of the columns
 * leaves out the labels (the last column): an autoencoder reads only the
 * images. */
static bool bind_feeds(Run *r, Dataset *ds) {
  Program *p = r->p;
  const Block *b0 = p->blocks[0];
  r->nfeed = 0;
  if (r->c.nfeed) {
    for (int i = 0; i < r->c.nfeed && r->nfeed < 16; i++) {
      const VarDesc *v = prog_named_var(p, r->c.feed[i]);
      if (!v || !(v->flags & VAR_INPUT)) {
        const Setting *s = prog_setting(p, "train", "feed");
        diag_error(&r->ld.diag, s ? s->span : SPAN_NONE, "train: feed names '%s', which is not an input",
                   r->c.feed[i]);
        return false;
      }
      r->feed[r->nfeed++] = v;
    }
  } else {
    for (int i = 0; i < b0->nvars && r->nfeed < 16; i++)
      if ((b0->vars[i]->flags & VAR_INPUT) && b0->vars[i]->name != r->mode_var) r->feed[r->nfeed++] = b0->vars[i];
  }
  /* a .npz's arrays feed the inputs of their names */
  if (!data_select(&r->ld.diag, ds, r->feed, r->nfeed) ||
      (r->has_test && !data_select(&r->ld.diag, &r->test, r->feed, r->nfeed)) ||
      (r->has_val && !data_select(&r->ld.diag, &r->val, r->feed, r->nfeed)) || !text_inputs_i64(r))
    return false;
  bool unlabelled = r->c.nfeed && r->nfeed == ds->ncols - 1 && ds->ncols == DATA_LABEL + 1;
  if (r->nfeed != ds->ncols && !unlabelled) {
    char cols[1024] = "", fed[1024] = "";
    for (int i = 0; i < ds->ncols; i++)
      snprintf(cols + strlen(cols), sizeof cols - strlen(cols), "%s%s", i ? ", " : "", ds->cols[i].name);
    for (int i = 0; i < r->nfeed; i++)
      snprintf(fed + strlen(fed), sizeof fed - strlen(fed), "%s%s", i ? ", " : "", r->feed[i]->name);
    diag_error(&r->ld.diag, SPAN_NONE,
               "the dataset %s has %d columns (%s) but %d inputs are fed (%s); name them with feed = [...] in the "
               "train block", r->c.data, ds->ncols, cols, r->nfeed, fed);
    return false;
  }
  if (unlabelled) {
    const char *key = r->c.label ? "label" : r->c.metric ? "metric" : NULL;
    const Setting *s = key ? prog_setting(p, "train", key) : NULL;
    if (key)
      diag_error(&r->ld.diag, s ? s->span : SPAN_NONE,
                 "train: %s needs the labels, but feed leaves out the dataset's label column '%s'", key,
                 ds->cols[DATA_LABEL].name);
    r->label = NULL;
    return !key;
  }
  r->label = r->c.label && !label_is_column(r) ? prog_named_var(p, r->c.label) : r->feed[r->nfeed - 1];
  if (!r->label || !(r->label->flags & VAR_INPUT)) {
    const Setting *s = prog_setting(p, "train", "label");
    diag_error(&r->ld.diag, s ? s->span : SPAN_NONE, "train: label names '%s', which is not an input", r->c.label);
    return false;
  }
  return true;
}

/* The mode input: a script that declares `input training : bool` gets
 * true during training steps and false when evaluating or predicting, so
 * dropout and the like can tell the two apart (stdlib's dropout wrappers
 * take it as an argument). */
static const char *mode_input(const Program *p) {
  const VarDesc *d = prog_named_var(p, "training");
  return d && d->block == 0 && (d->flags & VAR_INPUT) && d->dtype == DT_BOOL && d->shape.rank == 0 ? d->name : NULL;
}

static bool feed_mode(Run *r, bool training) {
  if (!r->mode_var || (!training && r->mode_set)) return true;   /* evaluation keeps --set's value */
  Tensor *t = tensor_scalar_bool(training);
  bool ok = exec_feed(r->ex, r->mode_var, t, "the trainer");
  tensor_unref(t);
  return ok;
}

/* Feeds one batch: column k to input feed[k], shaped as the input says,
 * and the mode. */
static bool feed_batch(Run *r, const Dataset *ds, Batch *b, bool training) {
  exec_unbind(r->ex);
  if (!feed_mode(r, training)) return false;
  for (int k = 0; k < r->nfeed; k++) {
    Tensor *t = data_fit(&r->ld.diag, &ds->cols[k], b->cols[k], r->feed[k]);
    if (!t) return false;
    bool ok = exec_feed(r->ex, r->feed[k]->name, t, "data");
    tensor_unref(t);
    if (!ok) return false;
  }
  return true;
}

/* The class logits m predict for example i: the argmax of its row; a
 * single logit per example (logistic regression: [B, 1], or [B] when
 * `rows` says B) predicts 1 when it is positive, else 0. */
static int64_t predicted(const Tensor *m, int64_t i, int64_t rows) {
  int64_t c = m->shape[m->rank - 1];
  if (c == 1 || (m->rank == 1 && m->numel == rows)) return tensor_get(m, i) > 0;
  int64_t best = 0;
  if (m->dtype == DT_F32) {
    /* the same comparisons without a call per element (f32 to double is
     * exact): tensor_get's were a tenth of a char_lm step, 256 logits for
     * each of its 1024 predictions */
    const float *row = tensor_f32(m) + i * c;
    for (int64_t j = 1; j < c; j++)
      if (row[j] > row[best]) best = j;
    return best;
  }
  for (int64_t j = 1; j < c; j++)
    if (tensor_get(m, i * c + j) > tensor_get(m, i * c + best)) best = j;
  return best;
}

/* The examples the logits m hold a prediction for (see predicted). */
static int64_t predictions(const Tensor *m, int64_t rows) {
  int64_t c = m->shape[m->rank - 1];
  return m->rank == 1 && m->numel == rows ? rows : m->numel / (c ? c : 1);
}

/* Correct predictions of the metric's logits against the labels. */
static int64_t correct(Run *r) {
  if (!r->metric_var || !r->label) return 0;
  Tensor *m = exec_var_value(r->ex, r->metric_var), *y = exec_var_value(r->ex, r->label->name);
  if (!m || !y || m->rank < 1 || !dtype_is_float(m->dtype)) return 0;
  int64_t n = predictions(m, y->numel), hits = 0;
  int64_t classes = m->shape[m->rank - 1] == 1 || (m->rank == 1 && m->numel == y->numel) ? 2 : m->shape[m->rank - 1];
  for (int64_t i = 0; i < n && i < y->numel; i++) {
    int64_t p = predicted(m, i, y->numel), truth = (int64_t)tensor_get(y, i);
    hits += p == truth;
    if (r->confusion) report_confusion_add(r->confusion, classes, truth, p);
  }
  if (y->rank >= 2 && y->shape[0] > 0) r->per_example = (n < y->numel ? n : y->numel) / y->shape[0];
  return hits;
}

/* Accuracy: the share of the metric's predictions that are right. */
static double accuracy(const Run *r, int64_t hits, int64_t n) {
  int64_t per = r->per_example > 0 ? r->per_example : 1;
  return n ? (double)hits / ((double)n * (double)per) : (double)NAN;
}

/* Text data: a loss in nats per byte, said in bits per character too. */
static int bits_per_char(const Run *r, double loss, char *out, size_t n) {
  if (r->c.context <= 0) return 0;
  return snprintf(out, n, " (%s bits/char)", loss_str(loss / log(2.0), 4).s);
}

static double loss_value(Run *r) {
  Tensor *l = exec_var_value(r->ex, r->loss_var);
  return l ? tensor_get(l, 0) : (double)NAN;
}

/* eval --confusion on N ranks: the sum of every rank's matrix (each
 * padded to the most classes one saw), on every rank. */
static void reduce_confusion(Confusion *c) {
  int n = dist_size();
  int64_t *ks = mem_alloc(NULL, sizeof *ks * (size_t)n), k = 0;
  dist_gather(&c->k, sizeof c->k, ks);
  for (int i = 0; i < n; i++) k = ks[i] > k ? ks[i] : k;
  mem_free(ks);
  if (k == 0) return;
  size_t kk = (size_t)(k * k);
  int64_t *mine = mem_calloc(kk, sizeof *mine), *all = mem_alloc(NULL, sizeof *all * kk * (size_t)n);
  for (int64_t i = 0; i < c->k; i++)
    for (int64_t j = 0; j < c->k; j++) mine[i * k + j] = c->m[i * c->k + j];
  dist_gather(mine, sizeof *mine * kk, all);
  memset(mine, 0, sizeof *mine * kk);
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < kk; i++) mine[i] += all[(size_t)r * kk + i];
  mem_free(all);
  mem_free(c->m);
  c->m = mine, c->k = k;
}

/* Loss and accuracy of the forward ops over a whole dataset. */
static bool evaluate(Run *r, const Dataset *ds, double *loss, double *acc) {
  Batcher b;
  data_batcher_init(&b, ds, r->c.batch, false);
  data_epoch(&b, NULL);
  if (dist_size() > 1) data_shard(&b, dist_rank(), dist_size());   /* each rank its shard */
  Batch bt;
  double total = 0;
  int64_t n = 0, hits = 0;
  bool ok = true;
  while (ok && data_next(&b, &bt)) {
    int64_t bn = bt.n;
    ok = feed_batch(r, ds, &bt, false) && exec_run_range(r->ex, 0, r->nforward) == 0;
    data_batch_release(&bt);
    if (!ok) break;
    total += loss_value(r) * (double)bn;
    hits += correct(r);
    n += bn;
  }
  data_batcher_free(&b);
  if (dist_size() > 1) {
    DistReport mine = {.loss = total, .hits = hits, .n = n, .ok = ok}, sum;
    DistReport *all = mem_alloc(NULL, sizeof *all * (size_t)dist_size());
    if (!dist_agree(&mine, &sum, all)) ok = false, failure_agreed = true;
    mem_free(all);
    total = sum.loss, hits = sum.hits, n = sum.n;
    if (ok && r->confusion) reduce_confusion(r->confusion);
  }
  *loss = n ? total / (double)n : (double)NAN;
  *acc = accuracy(r, hits, n);
  return ok;
}

/* ---- checkpoints -------------------------------------------------------------------- */

static const char *const shuffle_keys[] = {"shuffle0", "shuffle1", "shuffle2", "shuffle3"};
static const char *const state_keys[] = {"optimizer", "lr", "batch", "epochs", "schedule", "data"};

/* A parameter-group setting as a checkpoint keeps it: its entries joined
 * by ", " ("*.b, *.gamma"; "embed.*: 0.1"), "" when not set. */
static void group_text(const TrainConfig *c, bool mult, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < (mult ? c->nmult : c->nno_decay) && at < n; i++) {
    int k = mult ? snprintf(buf + at, n - at, "%s%s: %s", i ? ", " : "", c->mult_pattern[i], shortest(c->mult[i]).s)
                 : snprintf(buf + at, n - at, "%s%s", i ? ", " : "", c->no_decay[i]);
    at += k > 0 ? (size_t)k : 0;
  }
}
static const char *const group_keys[] = {"no_decay", "lr_mult"};

static bool save(Run *r, const char *path, bool quiet) {
  if (r->quiet) return true;   /* rank 0 alone writes checkpoints */
  Checkpoint c;
  ckpt_init(&c);
  c.program_hash = r->hash;
  c.epoch = (uint64_t)r->epoch;
  c.step = (uint64_t)r->step;
  c.samples = (uint64_t)r->samples;
  c.rng = *exec_rng(r->ex);
  ckpt_setf(&c, "optimizer", "%s", r->c.optimizer);
  ckpt_setf(&c, "lr", "%s", shortest(r->c.lr).s);
  ckpt_setf(&c, "batch", "%lld", (long long)r->c.batch);
  ckpt_setf(&c, "epochs", "%lld", (long long)r->c.epochs);
  ckpt_setf(&c, "schedule", "%s", r->c.schedule);
  ckpt_setf(&c, "data", "%s", r->c.data ? r->c.data : "");
  for (int k = 0; k < 2; k++) {   /* parameter groups, when set */
    char g[CKPT_MAX_VALUE + 1];
    group_text(&r->c, k == 1, g, sizeof g);
    if (*g) ckpt_setf(&c, group_keys[k], "%s", g);
  }
  ckpt_setf(&c, "seed", "%llu", (unsigned long long)r->t->opt.seed);
  ckpt_setf(&c, "step_in_epoch", "%lld", (long long)r->step_in_epoch);
  ckpt_setf(&c, "ranks", "%d", dist_size());
  for (int i = 0; i < 4; i++) ckpt_setf(&c, shuffle_keys[i], "%llu", (unsigned long long)r->shuffle_at_epoch.s[i]);
  ckpt_setf(&c, "best", "%s", shortest(r->best).s);
  if (r->c.patience) {   /* patience's count */
    ckpt_setf(&c, "best_epoch", "%lld", (long long)r->best_epoch);
    ckpt_setf(&c, "stalled", "%lld", (long long)r->stalled);
  }
  ckpt_setf(&c, "loss_ema", "%s", shortest(r->ema).s);
  ckpt_setf(&c, "loss_ema_n", "%lld", (long long)r->ema_n);
  if (r->step_in_epoch) {   /* stopped within an epoch: its sums so far */
    ckpt_setf(&c, "epoch_loss", "%s", shortest(r->epoch_loss).s);
    ckpt_setf(&c, "epoch_n", "%lld", (long long)r->epoch_n);
    ckpt_setf(&c, "epoch_hits", "%lld", (long long)r->epoch_hits);
  }
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < b0->nvars; i++) {
    const VarDesc *v = b0->vars[i];
    if (!(v->flags & (VAR_PARAM | VAR_STATE | VAR_KEPT)) || strcmp(v->name, TRAIN_LR_VAR) == 0) continue;
    Tensor *t = exec_var_value(r->ex, v->name);
    if (t) ckpt_add_tensor(&c, v->name, t);
    /* a script's state is marked by a setting CKPT_STATE_MARK NAME (older
     * readers take it for a setting they do not use) */
    if (t && (v->flags & VAR_KEPT) && strlen(v->name) + strlen(CKPT_STATE_MARK) <= CKPT_MAX_NAME)
      ckpt_setf(&c, arena_printf(&r->ld.arena, "%s%s", CKPT_STATE_MARK, v->name), "state");
  }
  char err[5000];
  bool ok = ckpt_write(path, &c, err, sizeof err);
  if (!ok) diag_error(&r->ld.diag, SPAN_NONE, "%s", err);
  else if (!quiet) fprintf(stderr, "saved %s (epoch %lld, step %lld)\n", path, (long long)r->epoch, (long long)r->step);
  ckpt_free(&c);
  return ok;
}

/* A position (epoch, step, samples) past this is not one a run reached:
 * counting on from it could overflow. */
#define MAX_POSITION ((uint64_t)1 << 62)

/* A setting of checkpoint c (file path) that must be a whole number from 0
 * to max; false (said) if it is missing or is not. */
static bool setting_u64(Diag *d, const Checkpoint *c, const char *path, const char *key, uint64_t max, uint64_t *out) {
  const char *v = ckpt_get(c, key);
  if (!v) {
    diag_error(d, SPAN_NONE, "%s has no setting '%s'", path, key);
    return false;
  }
  char *end;
  errno = 0;
  *out = strtoull(v, &end, 10);
  if (*v < '0' || *v > '9' || *end || errno || *out > max) {
    diag_error(d, SPAN_NONE, "%s: setting %s = %s is not a whole number from 0 to %llu", path, key, v,
               (unsigned long long)max);
    return false;
  }
  return true;
}

/* A setting of checkpoint c (file path) that must be a finite number, into
 * *v; *have says whether c has it (older checkpoints do not).  False
 * (said) if it is there but not a finite number. */
static bool setting_finite(Diag *d, const Checkpoint *c, const char *path, const char *key, double *v, bool *have) {
  const char *s = ckpt_get(c, key);
  *have = s != NULL;
  if (!s) return true;
  char *end = NULL;
  *v = strtod(s, &end);
  if (!*s || *end || !isfinite(*v)) {
    diag_error(d, SPAN_NONE, "%s: setting %s = %s is not a finite number", path, key, s);
    return false;
  }
  return true;
}

/* The smoothed loss's average and its count of steps, so that a resumed
 * run's progress lines and log go on as the uninterrupted run's would.
 * Older checkpoints have neither: the average starts afresh. */
static bool restore_smoothing(Run *r, const Checkpoint *c, const char *path) {
  double e;
  uint64_t n;
  bool have;
  if (!setting_finite(&r->ld.diag, c, path, "loss_ema", &e, &have)) return false;
  if (!have) return true;
  if (!setting_u64(&r->ld.diag, c, path, "loss_ema_n", c->step, &n)) return false;
  r->ema = e;
  r->ema_n = (int64_t)n;
  return true;
}

/* The current epoch's sums so far, so that the epoch line of a run resumed
 * in the middle of an epoch (or after its last step, before its end) gives
 * the whole epoch's train loss and accuracy, as the uninterrupted run's.
 * Older checkpoints have none: the sums start from the resumed step. */
static bool restore_epoch_sums(Run *r, const Checkpoint *c, const char *path) {
  double l;
  uint64_t n, hits;
  bool have;
  if (!setting_finite(&r->ld.diag, c, path, "epoch_loss", &l, &have)) return false;
  if (!have) return true;
  if (!setting_u64(&r->ld.diag, c, path, "epoch_n", c->samples, &n) ||
      !setting_u64(&r->ld.diag, c, path, "epoch_hits", n, &hits))
    return false;
  r->epoch_loss = l;
  r->epoch_n = (int64_t)n;
  r->epoch_hits = (int64_t)hits;
  return true;
}

/* The ranks a checkpoint was saved by (1 before they were recorded).
 * Another number of ranks resumes at an epoch's end only: in the middle of
 * one, the shards that were done are not those another number would cut. */
/* patience's count: the epoch that scored best and the epochs since, up
 * to the checkpoint's epoch (kept by a run with patience; resuming one
 * without, counting starts again). */
static bool restore_patience(Run *r, const Checkpoint *c, const char *path) {
  uint64_t be = 0, st = 0;
  if (!ckpt_get(c, "best_epoch")) return true;
  if (!setting_u64(&r->ld.diag, c, path, "best_epoch", c->epoch, &be) ||
      !setting_u64(&r->ld.diag, c, path, "stalled", c->epoch, &st))
    return false;
  r->best_epoch = (int64_t)be, r->stalled = (int64_t)st;
  return true;
}

static bool restore_ranks(Run *r, const Checkpoint *c, const char *path) {
  uint64_t ranks = 1, in_epoch = 0;
  if (ckpt_get(c, "ranks") && !setting_u64(&r->ld.diag, c, path, "ranks", 1 << 20, &ranks)) return false;
  if (ranks == (uint64_t)dist_size()) return true;
  if (!setting_u64(&r->ld.diag, c, path, "step_in_epoch", INT64_MAX, &in_epoch)) return false;
  if (in_epoch) {
    diag_error(&r->ld.diag, SPAN_NONE, "%s was saved by %llu rank%s in the middle of epoch %llu: resume it on %llu "
               "(mpirun -np %llu), or from a checkpoint of an epoch's end", path, (unsigned long long)ranks,
               ranks == 1 ? "" : "s", (unsigned long long)c->epoch + 1, (unsigned long long)ranks,
               (unsigned long long)ranks);
    return false;
  }
  if (!r->quiet)
    diag_note(&r->ld.diag, SPAN_NONE, "%s was saved by %llu rank%s; resuming on %d", path, (unsigned long long)ranks,
              ranks == 1 ? "" : "s", dist_size());
  return true;
}

/* The run's position from a checkpoint, each field checked against what
 * it means: a crafted file (with a valid CRC) must not send the loop
 * backwards, overflow a counter or skip an epoch. */
static bool restore_position(Run *r, const Checkpoint *c, const char *path) {
  const char *why = NULL;
  if (c->samples > MAX_POSITION) why = "samples seen is more than 2^62";
  else if (c->step > c->samples) why = "more steps than samples seen (a step takes at least one sample)";
  else if (c->epoch > c->step) why = "more epochs than steps (an epoch takes at least one step)";
  if (why) {
    diag_error(&r->ld.diag, SPAN_NONE, "%s: epoch %llu, step %llu, samples %llu: %s", path,
               (unsigned long long)c->epoch, (unsigned long long)c->step, (unsigned long long)c->samples, why);
    return false;
  }
  int64_t steps_per_epoch = epoch_steps(r);
  uint64_t in_epoch, sh[4];
  if (!restore_ranks(r, c, path)) return false;
  if (!setting_u64(&r->ld.diag, c, path, "step_in_epoch", INT64_MAX, &in_epoch)) return false;
  /* step_in_epoch == steps: stopped after an epoch's last step, before its
   * end (evaluation, the epoch line, best), which the resumed run does. */
  if (in_epoch > (uint64_t)steps_per_epoch) {
    diag_error(&r->ld.diag, SPAN_NONE, "%s: step_in_epoch = %llu, but an epoch is %lld step%s of %lld examples", path,
               (unsigned long long)in_epoch, (long long)steps_per_epoch, steps_per_epoch == 1 ? "" : "s",
               (long long)r->c.batch);
    return false;
  }
  if (in_epoch > c->step - c->epoch) {
    diag_error(&r->ld.diag, SPAN_NONE, "%s: step_in_epoch = %llu, but %llu epochs in %llu steps leave at most %llu", path,
               (unsigned long long)in_epoch, (unsigned long long)c->epoch, (unsigned long long)c->step,
               (unsigned long long)(c->step - c->epoch));
    return false;
  }
  for (int i = 0; i < 4; i++)
    if (!setting_u64(&r->ld.diag, c, path, shuffle_keys[i], UINT64_MAX, &sh[i])) return false;
  /* xoshiro256's one state that never leaves itself: all zeros. */
  bool rng_zero = !(c->rng.s[0] | c->rng.s[1] | c->rng.s[2] | c->rng.s[3]);
  if (rng_zero || !(sh[0] | sh[1] | sh[2] | sh[3])) {
    diag_error(&r->ld.diag, SPAN_NONE, "%s: the %s generator's state is all zeros", path, rng_zero ? "run's" : "shuffling");
    return false;
  }
  const char *best = ckpt_get(c, "best");
  char *end = NULL;
  double b = best ? strtod(best, &end) : (double)-INFINITY;
  if (best && (!*best || *end)) {
    diag_error(&r->ld.diag, SPAN_NONE, "%s: setting best = %s is not a number", path, best);
    return false;
  }
  r->epoch = (int64_t)c->epoch;
  r->step = (int64_t)c->step;
  r->samples = (int64_t)c->samples;
  r->step_in_epoch = (int64_t)in_epoch;
  *exec_rng(r->ex) = c->rng;
  memcpy(r->shuffle_at_epoch.s, sh, sizeof sh);
  r->shuffle = r->shuffle_at_epoch;
  r->best = b;
  return restore_smoothing(r, c, path) && restore_epoch_sums(r, c, path) && restore_patience(r, c, path);
}

/* A checkpoint to resume from: netrun's own format only (it holds the
 * run's position, which exported weights do not). */
static bool read_checkpoint(Diag *d, const char *path, Checkpoint *c) {
  char err[1400];
  if (ckpt_read(path, c, err, sizeof err)) return true;
  diag_error(d, SPAN_NONE, "%s", err);
  return false;
}

/* Loads parameters (and with `state`, the optimizer state and the run's
 * position) from a checkpoint into the executor. */
static bool restore(Run *r, const char *path, bool state) {
  Checkpoint c;
  if (!(state ? read_checkpoint(&r->ld.diag, path, &c) : weights_read(&r->ld.diag, path, &c))) return false;
  bool ok = true;
  if (state && c.program_hash != r->hash) {
    diag_error(&r->ld.diag, SPAN_NONE, "%s: this checkpoint belongs to another program (hash %016llx, this one %016llx)",
               path, (unsigned long long)c.program_hash, (unsigned long long)r->hash);
    ok = false;
  }
  /* the script's states are part of the model: --weights restores them too */
  ok = ok && weights_apply(&r->ld.diag, r->p, r->ex, &c, path, state ? VAR_PARAM | VAR_KEPT | VAR_STATE : VAR_PARAM | VAR_KEPT,
                           state ? WEIGHTS_RESUME : r->t->weights_partial ? WEIGHTS_PARTIAL : WEIGHTS_EXACT);
  if (ok && state) ok = restore_position(r, &c, path);
  if (ok && state && !r->quiet) {
    /* Say which settings differ from the checkpoint's. */
    for (size_t k = 0; k < sizeof state_keys / sizeof *state_keys; k++) {
      const char *was = ckpt_get(&c, state_keys[k]);
      char now_s[256];
      const TrainConfig *tc = &r->c;
      if (!was) continue;
      Num was_lr;
      if (k == 1) was = (was_lr = shortest(strtod(was, NULL))).s;   /* compared as numbers */
      if (k == 0) snprintf(now_s, sizeof now_s, "%s", tc->optimizer);
      else if (k == 1) snprintf(now_s, sizeof now_s, "%s", shortest(tc->lr).s);
      else if (k == 2) snprintf(now_s, sizeof now_s, "%lld", (long long)tc->batch);
      else if (k == 3) snprintf(now_s, sizeof now_s, "%lld", (long long)tc->epochs);
      else if (k == 4) snprintf(now_s, sizeof now_s, "%s", tc->schedule);
      else snprintf(now_s, sizeof now_s, "%s", tc->data ? tc->data : "");
      if (strcmp(was, now_s) != 0)
        diag_note(&r->ld.diag, SPAN_NONE, "%s was %s in the checkpoint; resuming with %s", state_keys[k], was, now_s);
    }
    for (int k = 0; k < 2; k++) {   /* parameter groups: absent in older checkpoints, and when not set */
      char now_g[CKPT_MAX_VALUE + 1];
      const char *was = ckpt_get(&c, group_keys[k]);
      group_text(&r->c, k == 1, now_g, sizeof now_g);
      if (strcmp(was ? was : "", now_g) != 0)
        diag_note(&r->ld.diag, SPAN_NONE, "%s was [%s] in the checkpoint; resuming with [%s]", group_keys[k],
                  was ? was : "", now_g);
    }
  }
  ckpt_free(&c);
  return ok;
}

/* ---- progress ----------------------------------------------------------------------- */

static void log_line(Run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(Run *r, const char *fmt, ...) {
  if (!r->logging || r->log_failed) return;
  char line[2048], err[4200];
  DIAG_FORMAT(line, sizeof line, fmt);
  if (!file_log_line(&r->log, line, err, sizeof err)) {
    diag_error(&r->ld.diag, SPAN_NONE, "%s: %s", r->log.path, err);
    r->log_failed = true;
  }
}

/* The log is synced at each epoch's end: a crash loses at most one epoch's
 * lines. */
static void log_sync(Run *r) {
  char err[4200];
  if (r->logging && !r->log_failed && !file_log_sync(&r->log, err, sizeof err)) {
    diag_error(&r->ld.diag, SPAN_NONE, "%s: %s", r->log.path, err);
    r->log_failed = true;
  }
}

/* A JSON number: non-finite values are written null. */
static Num jnum(double x) {
  Num j;
  if (isfinite(x)) snprintf(j.s, sizeof j.s, "%.9g", x);
  else snprintf(j.s, sizeof j.s, "null");
  return j;
}

/* A JSON string's contents: s with quotes, backslashes and control
 * characters escaped (an eval file's name), cut to fit. */
static const char *jstr(const char *s, char *buf, size_t n) {
  size_t k = 0;
  for (; *s && k + 7 < n; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') buf[k++] = '\\', buf[k++] = (char)c;
    else if (c < 0x20) k += (size_t)snprintf(buf + k, n - k, "\\u%04x", c);
    else buf[k++] = (char)c;
  }
  buf[k] = 0;
  return buf;
}

static void fmt_time(double s, char *buf, size_t n) {
  if (!(s >= 0) || s > 1e7) s = 0;
  long t = (long)(s + 0.5);
  if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

/* Bytes in decimal units, two or three digits: 740 kB, 2.1 MB, 74 MB. */
static Num fmt_bytes(double b) {
  static const char *const unit[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 999.5 && u < 4) b /= 1000, u++;
  Num n;
  snprintf(n.s, sizeof n.s, u && b < 9.95 ? "%.1f %s" : "%.0f %s", b, unit[u]);
  return n;
}

/* What the run holds: its peak resident memory, against the data it read
 * and the model (parameters and optimizer state), which should be most of
 * it. */
typedef struct Memory {
  double peak, data, model;
} Memory;
static Memory memory(Run *r) {
  Memory m = {.data = (double)r->data_bytes};
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0) m.peak = (double)ru.ru_maxrss * 1024;   /* Linux: KiB */
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < b0->nvars; i++) {
    const VarDesc *v = b0->vars[i];
    bool held = v->flags & (VAR_PARAM | VAR_STATE | VAR_KEPT) && strcmp(v->name, TRAIN_LR_VAR) != 0;
    Tensor *t = held ? exec_var_value(r->ex, v->name) : NULL;
    if (t) m.model += (double)t->numel * (double)dtype_size(t->dtype);
  }
  return m;
}

/* ---- train ------------------------------------------------------------------------------ */

/* --limit N: only the first N examples of a split. */
static void limit(Dataset *ds, int64_t n) {
  if (n <= 0 || n >= ds->n) return;
  ds->n = n;
  for (int k = 0; k < ds->ncols; k++) ds->cols[k].shape[0] = n;
}

/* The folder a train block's data path (`key` data or eval) is read
 * from: that of the file setting it (the folder import searches first),
 * so a model file names the data beside it wherever it is run from.  A
 * --data path is the working folder's, as for any command. */
static const char *data_dir(Run *r, const char *key) {
  const Setting *s = prog_setting(r->p, "train", key);
  if ((key[0] == 'd' && r->t->o.data) || !s || s->span.file < 0) return NULL;
  const char *path = r->ld.diag.files[s->span.file].path;
  const char *slash = strrchr(path, '/');
  return !slash ? NULL : slash == path ? "/" : arena_strndup(&r->ld.arena, path, (size_t)(slash - path));
}

/* Does the dataset come in train and test splits? (A CSV file does not; a
 * text file, read with context = T, does: text.h.) */
static bool has_splits(const Run *r) { return r->c.context > 0 || strcmp(r->c.data, "fashion-mnist") == 0; }

/* Whether the train block's label names a CSV column rather than an
 * input: with CSV data, a name that is not one of the script's inputs
 * (and no label_column). */
static bool label_is_column(const Run *r) {
  const char *d = r->c.data;
  size_t n = strlen(d);
  if (!r->c.label || r->c.label_column || strcmp(d, "fashion-mnist") == 0 || strchr(d, ':') ||
      (n >= 4 && strcmp(d + n - 4, ".npz") == 0))
    return false;
  const VarDesc *v = prog_named_var(r->p, r->c.label);
  return !v || !(v->flags & VAR_INPUT);
}

/* The input the dataset's first column feeds (see bind_feeds), or NULL. */
static const VarDesc *first_feed(const Run *r) {
  if (r->c.nfeed) {
    const VarDesc *v = prog_named_var(r->p, r->c.feed[0]);
    return v && (v->flags & VAR_INPUT) ? v : NULL;
  }
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < b0->nvars; i++)
    if ((b0->vars[i]->flags & VAR_INPUT) && b0->vars[i]->name != r->mode_var) return b0->vars[i];
  return NULL;
}

/* How the train block reads a data file (`key` data, eval or val): the
 * CSV columns it chooses, from the folder of the script that sets key;
 * an image folder's images in the shape of the input they feed, when it
 * declares [B, C, H, W] (else the first image's), normalized. */
static DataOptions data_options(Run *r, const char *key) {
  DataOptions o = {.label = label_is_column(r) ? r->c.label : r->c.label_column, .dir = data_dir(r, key),
                   .columns = r->c.columns, .ncolumns = r->c.ncolumns, .labels = r->c.labels,
                   .nlabels = r->c.nlabels, .context = r->c.context, .mean = r->c.mean, .nmean = r->c.nmean,
                   .std = r->c.std, .nstd = r->c.nstd};
  const VarDesc *x = first_feed(r);
  if (x && x->shape.rank == 4 && x->shape.d[1].n > 0 && x->shape.d[2].n > 0 && x->shape.d[3].n > 0)
    o.channels = (int)(x->shape.d[1].n < 1000 ? x->shape.d[1].n : 1000), o.height = x->shape.d[2].n,
    o.width = x->shape.d[3].n;
  return o;
}

/* flip and crop_pad augment an image folder's training images: with
 * other data, an error at the setting. */
static bool augment_fits(Run *r) {
  if (r->train.cols[DATA_INPUT].channels) return true;
  const char *key = r->c.flip ? "flip" : r->c.crop_pad ? "crop_pad" : NULL;
  const Setting *s = key ? prog_setting(r->p, "train", key) : NULL;
  if (key)
    diag_error(&r->ld.diag, s ? s->span : SPAN_NONE, "train: %s augments an image folder's images, but %s is not "
               "an image folder", key, r->c.data);
  return !key;
}

/* The data evaluated after each epoch, and by `eval` and `predict`: the
 * train block's eval = "none"; a split ("test", "train") of a dataset
 * that has them; or a dataset of its own (a CSV file, IMAGES:LABELS).
 * The default "test" of a dataset without splits evaluates nothing (eval
 * and predict then take the training data); said out loud, it is an
 * error, as is a file that is not there.  `eval --data` and `predict
 * --data` take the data they name. */
static bool open_eval(Run *r, bool training) {
  const char *e = r->c.eval, *data = r->c.data;
  bool split = strcmp(e, "test") == 0 || strcmp(e, "train") == 0;
  r->eval_name = has_splits(r) ? "train" : data;
  if (strcmp(e, "none") == 0 || (!training && r->t->o.data && !has_splits(r))) return true;
  const Setting *s = prog_setting(r->p, "train", "eval");
  DataOptions dopt = data_options(r, split ? "data" : "eval");
  struct stat st;
  if (split && !has_splits(r)) {
    if (s) diag_error(&r->ld.diag, s->span, "train: eval = \"%s\" names a split, but %s has none: name a data file "
                      "(eval = \"test.csv\") or \"none\"", e, data);
    return !s;
  }
  if (!split && !strchr(e, ':') && stat(dopt.dir && e[0] != '/' ? arena_printf(&r->ld.arena, "%s/%s", dopt.dir, e) : e, &st) != 0) {
    diag_error(&r->ld.diag, s ? s->span : SPAN_NONE,
               "train: eval must be \"test\", \"train\", \"none\" or a data file, got \"%s\" (no such file)", e);
    return false;
  }
  dopt.split = split ? e : NULL;
  if (!data_open(&r->ld.diag, split ? data : e, &dopt, &r->test)) return false;
  r->has_test = true;
  r->eval_name = e;
  r->data_bytes += data_bytes(&r->test);
  limit(&r->test, r->c.limit);
  return true;
}

/* The validation data of a training run: the train block's val file, or
 * the val_split fraction of the training data held out (rounded to whole
 * examples; the shuffle's seed chooses which).  patience needs something
 * to evaluate: the validation data, else the eval split. */
static bool open_val(Run *r) {
  Diag *d = &r->ld.diag;
  const Setting *s;
  if (r->c.val) {
    DataOptions dopt = data_options(r, "val");
    const char *v = r->c.val;
    struct stat st;
    if (!strchr(v, ':') && stat(dopt.dir && v[0] != '/' ? arena_printf(&r->ld.arena, "%s/%s", dopt.dir, v) : v, &st) != 0) {
      s = prog_setting(r->p, "train", "val");
      diag_error(d, s ? s->span : SPAN_NONE, "train: val must name a data file, got \"%s\" (no such file)", v);
      return false;
    }
    if (!data_open(d, v, &dopt, &r->val)) return false;
    limit(&r->val, r->c.limit);
  } else if ((s = prog_setting(r->p, "train", "val_split"))) {
    int64_t n = r->train.n, nval = (int64_t)floor(r->c.val_split * (double)n + 0.5);
    if (nval < 1 || nval >= n) {
      diag_error(d, s->span, "val_split = %g of %lld examples leaves %s", r->c.val_split, (long long)n,
                 nval < 1 ? "no validation example" : "no training example");
      return false;
    }
    Rng rng;
    rng_seed(&rng, r->t->opt.seed ^ 0x7a11da7aull);
    if (!data_split(d, &r->train, nval, &rng, &r->val)) return false;
  }
  r->has_val = r->c.val || prog_setting(r->p, "train", "val_split");
  if (r->has_val) r->data_bytes += data_bytes(&r->val);
  if (r->c.patience && !r->has_val && !r->has_test) {
    s = prog_setting(r->p, "train", "patience");
    diag_error(d, s ? s->span : SPAN_NONE, "patience needs data evaluated after each epoch: give val_split, "
               "val = \"FILE\", or an eval split");
    return false;
  }
  return true;
}

static bool setup(Run *r, TrainArgs *t, bool training) {
  memset(r, 0, sizeof *r);
  r->t = t;
  r->best = -INFINITY;
  bool loaded = session_load(&r->ld, t->file);
  r->p = r->ld.prog;   /* teardown unloads it, loaded or not */
  if (!loaded) return false;
  r->quiet = dist_rank() > 0;
  if (!train_config(r->p, &t->o, &r->c, !training || r->quiet)) {
    diag_finish(&r->ld.diag);
    return false;
  }
  if (!r->c.data) {
    diag_error(&r->ld.diag, SPAN_NONE, "%s names no data: add data = \"...\" to its train block, or give --data SPEC",
               t->file);
    return false;
  }
  r->hash = program_hash(r->p);
  r->mode_var = mode_input(r->p);
  r->mode_set = trainer_sets_mode(&t->feeds);
  r->nforward = r->p->blocks[0]->nops;
  r->c.ranks = dist_size();
  if (training && !train_program(r->p, &r->c, &r->bw)) {
    diag_finish(&r->ld.diag);
    return false;
  }
  const char *lv = prog_export(r->p, r->c.loss);
  r->loss_var = lv ? lv : r->c.loss;
  if (!t->predicting && !prog_var(r->p, r->loss_var)) {
    const char *near = prog_nearest_name(r->p, r->c.loss);
    diag_error(&r->ld.diag, SPAN_NONE, "the script has no value named '%s' to use as the loss%s%s%s", r->c.loss,
               DIAG_MEAN(near));
    return false;
  }
  if (r->c.metric) {
    const char *mv = prog_export(r->p, r->c.metric);
    r->metric_var = mv ? mv : r->c.metric;
    if (!prog_var(r->p, r->metric_var)) {
      const Setting *s = prog_setting(r->p, "train", "metric");
      diag_error(&r->ld.diag, s ? s->span : SPAN_NONE, "train: metric names '%s', which the script does not define",
                 r->c.metric);
      diag_finish(&r->ld.diag);
      return false;
    }
  }
  DataOptions dopt = data_options(r, "data");
  dopt.split = has_splits(r) ? "train" : NULL;
  if (!data_open(&r->ld.diag, r->c.data, &dopt, &r->train)) {
    diag_finish(&r->ld.diag);
    return false;
  }
  r->has_train = true;
  if (!augment_fits(r)) {
    diag_finish(&r->ld.diag);
    return false;
  }
  r->data_bytes = data_bytes(&r->train);
  limit(&r->train, r->c.limit);
  if (r->train.n < dist_size()) {
    diag_error(&r->ld.diag, SPAN_NONE, "%d ranks need at least %d training examples, got %lld", dist_size(),
               dist_size(), (long long)r->train.n);
    return false;
  }
  if (!open_eval(r, training) || (training && !open_val(r))) {
    diag_finish(&r->ld.diag);
    return false;
  }
  if (!bind_feeds(r, &r->train)) return false;
  ExecOptions opt = t->opt;
  opt.tape = false;
  if (!(r->ex = run_start(&r->ld, &opt, &t->feeds, &r->nforward, 1))) return false;
  /* Initializers run now, so checkpoints can overwrite them. */
  if (exec_startup(r->ex) < 0) return false;
  r->lr = tensor_scalar_f32((float)r->c.lr);
  exec_preload(r->ex, TRAIN_LR_VAR, r->lr);
  if (r->c.ranks > 1) {
    r->weight = tensor_scalar_f32(1);
    exec_preload(r->ex, TRAIN_WEIGHT_VAR, r->weight);
    if (r->c.overlap) exec_between(r->ex, dist_progress);
  }
  rng_seed(&r->shuffle, t->opt.seed ^ 0x5eedda7aull);
  r->shuffle_at_epoch = r->shuffle;
  return true;
}

/* ---- a step ------------------------------------------------------------------------------- */

/* Says why step r->step + 1 stopped with loss l: a parameter that the
 * last update left NaN or infinite, else the first op of the forward
 * pass, run again from the same state under --check-nan, that makes a
 * NaN or an infinity (its error, with the script's line). */
static void diverged(Run *r, double l, const Rng *before, bool tty) {
  if (tty) fputc('\n', stderr);
  diag_error(&r->ld.diag, SPAN_NONE, "step %lld (epoch %lld): the loss is %s; stopped before its update, "
             "checkpoints are left as they were (--keep-going trains on)",
             (long long)r->step + 1, (long long)r->epoch + 1, loss_str(l, 4).s);
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < b0->nvars; i++) {
    Tensor *t = b0->vars[i]->flags & VAR_PARAM ? exec_value(r->ex, b0->vars[i]->name) : NULL;
    if (t && tensor_non_finite(t)) {
      diag_error(&r->ld.diag, SPAN_NONE, "parameter '%s' holds NaN or Inf: step %lld's update made it so",
                 b0->vars[i]->name, (long long)r->step);
      return;
    }
  }
  *exec_rng(r->ex) = *before;   /* dropout draws the same masks */
  exec_check_nan(r->ex, true);
  exec_run_range(r->ex, 0, r->nforward);
  exec_check_nan(r->ex, r->t->opt.check_nan);
}

static int one_step(Run *r, Batch *bt, bool real, Step *st, bool tty, const Rng *rng);

/* One training step on batch bt: the forward ops, then, when the loss is
 * finite (or with --keep-going), the backward ops and the updates.  The
 * check between the two costs one comparison a step.  On N ranks the
 * ranks agree between the two (agree_step); a batch that is not `real`
 * (a shard one example short) counts for nothing.  *st: the step's loss,
 * correct predictions and examples.  0 or the exit status. */
static int train_step(Run *r, Batch *bt, bool real, Step *st, bool tty) {
  Rng before = *exec_rng(r->ex);
  Tensor **states = real ? NULL : save_states(r);
  int status = one_step(r, bt, real, st, tty, &before);
  if (states) restore_states(r, states);
  return status;
}

/* train_step's forward, backward and updates. */
static int one_step(Run *r, Batch *bt, bool real, Step *st, bool tty, const Rng *rng) {
  bool ok = feed_batch(r, &r->train, bt, true) && exec_run_range(r->ex, 0, r->nforward) == 0;
  *st = (Step){ok ? loss_value(r) : (double)NAN, ok && real ? correct(r) : 0, real ? bt->n : 0};
  if ((dist_size() > 1 && !agree_step(r, ok, st)) || !ok) return EXIT_SCRIPT;
  double l = st->loss;
  if (!isfinite(l) && !r->t->keep_going) {
    failure_agreed = true;   /* every rank has the same loss */
    diverged(r, l, rng, tty);
    return EXIT_SCRIPT;
  }
  if (!isfinite(l) && !r->warned) {
    if (tty) fputc('\n', stderr);
    diag_warn(&r->ld.diag, SPAN_NONE, "step %lld (epoch %lld): the loss is %s; training on (--keep-going)",
              (long long)r->step + 1, (long long)r->epoch + 1, loss_str(l, 4).s);
    r->warned = true;
  }
  if (exec_run_range(r->ex, r->nforward, -1) != 0) return EXIT_SCRIPT;
  /* The moving average starts from 0, and is divided by 1 - 0.98^n as
   * Adam's moments are: the first steps' losses are not drowned by the
   * zero it started from. */
  r->ema = 0.98 * r->ema + 0.02 * l;
  r->ema_n++;
  return 0;
}

static double smoothed(const Run *r) { return r->ema / (1 - pow(0.98, (double)r->ema_n)); }

static void teardown(Run *r) {
  char err[4200];
  if (r->logging && !file_log_close(&r->log, err, sizeof err) && !r->log_failed)
    diag_error(&r->ld.diag, SPAN_NONE, "%s: %s", r->log.path, err);
  tensor_unref(r->lr);
  tensor_unref(r->weight);
  exec_free(r->ex);
  if (r->has_train) data_free(&r->train);
  if (r->has_test) data_free(&r->test);
  if (r->has_val) data_free(&r->val);
  if (r->p) session_free(&r->ld);
}

/* The next batch of this rank's shard into *bt, while the epoch has steps
 * left.  A shard one example shorter than rank 0's can run out a step
 * early: its last example stands in, and counts for nothing (*real false),
 * so that every rank runs every step. */
static bool next_batch(Run *r, Batcher *b, Batch *bt, int64_t steps, bool *real) {
  if (r->step_in_epoch >= steps) return false;
  if ((*real = data_next(b, bt)) || b->n == 0 || dist_size() == 1) return *real;
  b->pos = b->n - 1;
  return data_next(b, bt);
}

/* At an epoch's end on N ranks: every rank's parameters hash the same, or
 * the run stops (every rank says so).  The log records the hashes. */
static bool agree_params(Run *r) {
  int n = dist_size();
  DistReport mine = {.ok = 1, .tag = vars_hash(r, VAR_PARAM), .states = vars_hash(r, VAR_KEPT)}, sum,
             *all = mem_alloc(NULL, sizeof *all * (size_t)n);
  dist_agree(&mine, &sum, all);
  int k = dist_odd_rank(all, true);
  char list[1024] = "", states[1024] = "";
  for (int i = 0; i < n && strlen(list) + 24 < sizeof list; i++) {
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%016llx\"", i ? ", " : "",
             (unsigned long long)all[i].tag);
    snprintf(states + strlen(states), sizeof states - strlen(states), "%s\"%016llx\"", i ? ", " : "",
             (unsigned long long)all[i].states);
  }
  mem_free(all);
  log_line(r, "{\"event\": \"ranks\", \"epoch\": %lld, \"ranks\": %d, \"param_hashes\": [%s], \"state_hashes\": [%s]}",
           (long long)r->epoch, n, list, states);
  if (k < 0) return true;
  diag_error(&r->ld.diag, SPAN_NONE,
             "after epoch %lld, rank %d's parameters differ from rank 0's (hashes %s); stopping",
             (long long)r->epoch, k, list);
  failure_agreed = true;
  return false;
}

/* The run's first line: the data, the steps (on N ranks, of N times the
 * batch), the optimizer. */
static void say_start(const Run *r, int64_t steps) {
  char ranks[64] = "";
  char val[64] = "";
  if (dist_size() > 1) snprintf(ranks, sizeof ranks, "%d x ", dist_size());
  if (r->has_val) snprintf(val, sizeof val, " (%lld more to validate)", (long long)r->val.n);
  if (!r->quiet)
    fprintf(stderr, "training %s: %lld examples%s, %lld steps of %s%lld per epoch, %s lr %g, %lld epochs\n",
            r->t->file, (long long)r->train.n, val, (long long)steps, ranks, (long long)r->c.batch, r->c.optimizer,
            r->c.lr, (long long)r->c.epochs);
}

/* Evaluates ds at an epoch's end: " | NAME loss L acc A" appended to the
 * epoch's line at *k, an eval event logged, and *score set to what
 * --keep-best and patience compare (the accuracy, else minus the loss). */
static bool epoch_eval(Run *r, const Dataset *ds, const char *name, char *line, int *k, double *score) {
  const size_t size = 512;   /* train()'s line */
  double el, ea;
  if (!evaluate(r, ds, &el, &ea)) return false;
  *k += snprintf(line + *k, size - (size_t)*k, " | %s loss %s", name, loss_str(el, 4).s);
  *k += bits_per_char(r, el, line + *k, size - (size_t)*k);
  if (r->metric_var) *k += snprintf(line + *k, size - (size_t)*k, " acc %.4f", ea);
  char js[512];
  log_line(r, "{\"event\": \"eval\", \"epoch\": %lld, \"step\": %lld, \"split\": \"%s\", \"loss\": %s, \"accuracy\": %s}",
           (long long)r->epoch, (long long)r->step, jstr(name, js, sizeof js), jnum(el).s,
           jnum(r->metric_var ? ea : (double)NAN).s);
  *score = r->metric_var ? ea : -el;
  return true;
}

/* patience: why the run stops before its last epoch. */
static void say_early_stop(const Run *r) {
  const char *what = r->has_val ? "val" : r->eval_name;
  if (r->quiet) return;
  if (r->metric_var)
    printf("stopping early after epoch %lld: %s accuracy has not improved for %lld epochs (best %.4f, epoch %lld)\n",
           (long long)r->epoch, what, (long long)r->stalled, r->best, (long long)r->best_epoch);
  else
    printf("stopping early after epoch %lld: %s loss has not improved for %lld epochs (best %s, epoch %lld)\n",
           (long long)r->epoch, what, (long long)r->stalled, loss_str(-r->best, 4).s, (long long)r->best_epoch);
  fflush(stdout);
}

/* The run's last line on N ranks: rank 0's time in the collectives (of a
 * run of secs seconds), and overlapped, how much of it waiting and how
 * long the sums were in flight while the backward ran. */
static void say_allreduce(const Run *r, double secs) {
  printf("allreduce on %d ranks: %.2f s in %lld calls on rank 0 (%.0f%% of the run), ", dist_size(),
         dist_reduce_seconds(), (long long)dist_reduce_calls(), 100 * dist_reduce_seconds() / (secs > 0 ? secs : 1e-9));
  if (r->c.overlap)
    printf("%.2f s of it waiting at allreduce_wait; sums in flight for %.2f s of the backward\n", dist_wait_seconds(),
           dist_overlap_seconds());
  else
    printf("none of it overlapped\n");
}

/* The training loop of cmd_train. */
static int train(TrainArgs *t) {
  char err[4200];
  Run r;
  int status = EXIT_SCRIPT;
  bool ok = setup(&r, t, true) && (!t->resume || restore(&r, t->resume, true)) &&
            (!t->weights || restore(&r, t->weights, false));
  if (dist_size() > 1 && agree_start(&r, ok, "trains")) sync_model(&r);
  if (!ok || failure_agreed) goto out;
  if (t->log && !(r.logging = file_log_open(&r.log, t->log, r.epoch || r.step, err, sizeof err))) {
    diag_error(&r.ld.diag, SPAN_NONE, "%s: %s", t->log, err);
    goto out;
  }
  signal(SIGINT, on_stop);
  signal(SIGTERM, on_stop);
  bool tty = isatty(2) && !r.quiet;   /* only rank 0 shows progress */
  int64_t steps_per_epoch = epoch_steps(&r);
  double start = now();
  int64_t run_samples = 0;
  say_start(&r, steps_per_epoch);
  status = 0;
  while (r.epoch < r.c.epochs && status == 0) {
    Batcher b;
    data_batcher_init(&b, &r.train, r.c.batch, false);
    b.aug = (DataAugment){r.c.flip, r.c.crop_pad, t->opt.seed ^ DATA_AUGMENT_SEED, r.epoch};
    if (r.step_in_epoch == 0) r.shuffle_at_epoch = r.shuffle;
    else r.shuffle = r.shuffle_at_epoch;   /* resuming mid-epoch: the same order */
    data_epoch(&b, r.c.shuffle ? &r.shuffle : NULL);
    if (dist_size() > 1) data_shard(&b, dist_rank(), dist_size());
    data_skip(&b, r.step_in_epoch);
    Batch bt;
    bool real;
    double epoch_start = now();
    int64_t epoch_n = 0;   /* this process's examples of the epoch, for its rate */
    if (r.step_in_epoch == 0) r.epoch_loss = 0, r.epoch_n = 0, r.epoch_hits = 0;
    while (next_batch(&r, &b, &bt, steps_per_epoch, &real)) {
      double e = (double)r.epoch + (double)r.step_in_epoch / (double)steps_per_epoch;
      tensor_f32(r.lr)[0] = (float)schedule(&r.c, e);
      Step st;
      status = train_step(&r, &bt, real, &st, tty);
      data_batch_release(&bt);
      if (status) break;
      double smooth = smoothed(&r), l = st.loss;
      r.epoch_loss += l * (double)st.n, r.epoch_hits += st.hits, r.epoch_n += st.n, epoch_n += st.n;
      r.step++, r.step_in_epoch++, r.samples += st.n, run_samples += st.n;
      double el = now() - epoch_start, rate = (double)epoch_n / (el > 0 ? el : 1e-9);
      log_line(&r,
               "{\"event\": \"step\", \"epoch\": %lld, \"step\": %lld, \"samples\": %lld, \"loss\": %s, "
               "\"loss_smooth\": %s, \"lr\": %s, \"samples_per_s\": %s}",
               (long long)r.epoch + 1, (long long)r.step, (long long)r.samples, jnum(l).s, jnum(smooth).s,
               shortest_as((double)tensor_f32(r.lr)[0], true).s, jnum(rate).s);
      if (tty) {
        char eta[32];
        fmt_time((double)(steps_per_epoch - r.step_in_epoch) * el / (double)(r.step_in_epoch ? r.step_in_epoch : 1),
                 eta, sizeof eta);
        fprintf(stderr, "\repoch %lld/%lld  %lld/%lld  %.0f samples/s  loss %s  ETA %s   ", (long long)r.epoch + 1,
                (long long)r.c.epochs, (long long)r.step_in_epoch, (long long)steps_per_epoch, rate,
                loss_str(smooth, 4).s, eta);
      } else if (!r.quiet && r.step % r.c.log_every == 0) {
        fprintf(stderr, "iter %lld  epoch %lld  loss %s  lr %.6g  samples/s %.0f\n", (long long)r.step,
                (long long)r.epoch + 1, loss_str(smooth, 4).s, (double)tensor_f32(r.lr)[0], rate);
      }
      if (stop_sig(&r) || r.log_failed) break;
    }
    data_batcher_free(&b);
    if (r.log_failed) status = EXIT_SCRIPT;
    if (status) break;
    if (stop_sig(&r)) {
      if (tty) fputc('\n', stderr);
      if (!r.quiet)
        fprintf(stderr, "netrun: interrupted at epoch %lld, step %lld\n", (long long)r.epoch + 1, (long long)r.step);
      /* 128 + the signal says "stopped, and saved if asked"; a checkpoint
       * that could not be written is an error. */
      if (dist_size() > 1) average_states(&r);
      status = t->save && !save(&r, t->save, false) ? EXIT_SCRIPT : 128 + stop_sig(&r);
      break;
    }
    r.epoch++;
    r.step_in_epoch = 0;
    r.shuffle_at_epoch = r.shuffle;   /* the next epoch's order starts here */
    if (dist_size() > 1) average_states(&r);   /* before evaluating and saving them */
    double secs = now() - epoch_start;
    double tl = r.epoch_n ? r.epoch_loss / (double)r.epoch_n : (double)NAN;
    double ta = accuracy(&r, r.epoch_hits, r.epoch_n);
    if (tty) fputc('\n', stderr);
    char line[512];
    int k = snprintf(line, sizeof line, "epoch %lld/%lld: train loss %s", (long long)r.epoch, (long long)r.c.epochs,
                     loss_str(tl, 4).s);
    k += bits_per_char(&r, tl, line + k, sizeof line - (size_t)k);
    if (r.metric_var) k += snprintf(line + k, sizeof line - (size_t)k, " acc %.4f", ta);
    log_line(&r, "{\"event\": \"epoch\", \"epoch\": %lld, \"step\": %lld, \"train_loss\": %s, \"train_accuracy\": %s, \"seconds\": %s}",
             (long long)r.epoch, (long long)r.step, jnum(tl).s, jnum(r.metric_var ? ta : (double)NAN).s, jnum(secs).s);
    double score = -tl, test_score;
    if ((r.has_val && !epoch_eval(&r, &r.val, "val", line, &k, &score)) ||
        (r.has_test && !epoch_eval(&r, &r.test, r.eval_name, line, &k, r.has_val ? &test_score : &score))) {
      status = EXIT_SCRIPT;
      break;
    }
    snprintf(line + k, sizeof line - (size_t)k, " | %.1f s, %.0f samples/s", secs, (double)epoch_n / (secs > 0 ? secs : 1e-9));
    printf("%s\n", line);
    fflush(stdout);
    if ((status = dist_size() > 1 && !agree_params(&r) ? EXIT_SCRIPT : 0)) break;
    bool best = score > r.best;
    if (best) r.best = score, r.best_epoch = r.epoch, r.stalled = 0;
    else r.stalled++;
    log_sync(&r);
    if (r.log_failed) {
      status = EXIT_SCRIPT;
      break;
    }
    /* A checkpoint that cannot be written stops the run: training on
     * without one would waste what the user asked to keep. */
    if (t->save && !save(&r, t->save, true)) status = EXIT_SCRIPT;
    if (status == 0 && t->keep_best && best) {
      char path[4096];
      snprintf(path, sizeof path, "%s.best", t->save);
      if (!save(&r, path, true)) status = EXIT_SCRIPT;
    }
    if (status == 0 && r.c.patience && r.stalled >= r.c.patience) {
      say_early_stop(&r);
      break;
    }
  }
  if (status == 0) {
    double secs = now() - start;
    printf("trained %lld epochs (%lld steps, %lld samples) in %.1f s, %.0f samples/s",
           (long long)r.epoch, (long long)r.step, (long long)r.samples, secs, (double)run_samples / (secs > 0 ? secs : 1e-9));
    if ((r.has_val || r.has_test) && r.metric_var)
      printf("; best %s accuracy %.4f", r.has_val ? "val" : r.eval_name, r.best);
    Memory m = memory(&r);
    printf("\npeak memory %s (data %s, model %s)\n", fmt_bytes(m.peak).s, fmt_bytes(m.data).s, fmt_bytes(m.model).s);
    if (dist_size() > 1) say_allreduce(&r, secs);
    log_line(&r,
             "{\"event\": \"summary\", \"epoch\": %lld, \"step\": %lld, \"samples\": %lld, \"seconds\": %s, "
             "\"peak_memory_bytes\": %.0f, \"data_bytes\": %.0f, \"model_bytes\": %.0f}",
             (long long)r.epoch, (long long)r.step, (long long)r.samples, jnum(secs).s, m.peak, m.data, m.model);
    if (r.log_failed) status = EXIT_SCRIPT;
  }
out:
  teardown(&r);
  return status;
}

int trainer_train(TrainArgs *t) {
  /* Started by mpirun: one rank of data-parallel training (dist.h).
   * Rank 0 alone writes the log, checkpoints and results. */
  if (dist_launched() && !dist_start(NULL)) return EXIT_SCRIPT;
  if (dist_rank() > 0) {
    t->log = NULL;
    if (!freopen("/dev/null", "w", stdout)) return EXIT_SCRIPT;
  }
  /* One run at a time saves to a path: a second would overwrite the
   * first's checkpoints with its own. */
  FileLock lock = {NULL, -1};
  char err[4200];
  if (t->save && dist_rank() == 0 && !file_lock(&lock, t->save, err, sizeof err)) {
    diag_error(NULL, SPAN_NONE, "%s: %s", t->save, err);
    dist_abort(EXIT_SCRIPT);
    return EXIT_SCRIPT;
  }
  int status = train(t);
  file_unlock(&lock);
  /* The trainer says how a signal ended the run: a second one stopped a
   * step (status 1, nothing written), not main's generic Ctrl-C (130). */
  if (stop_signal) exec_interrupt_reset();
  /* A failure the other ranks did not see ends them (they may wait for
   * this one in a collective): its error is above, mpirun's note follows. */
  if (status && status < 128 && !failure_agreed) dist_abort(status);
  dist_stop();
  return status;
}

/* ---- eval and predict ----------------------------------------------------------------- */

/* eval's results: the line (or a JSON document, --format json), then
 * with --confusion the matrix and the per-class figures. */
static void eval_report(const Run *r, int64_t n, double l, double a) {
  if (r->t->format != REPORT_JSON) {
    printf("%s: loss %s", r->eval_name, loss_str(l, 6).s);
    if (r->metric_var) printf(" accuracy %.4f", a);
    printf(" (%lld examples)\n", (long long)n);
    if (r->confusion) report_confusion_text(stdout, r->confusion);
    return;
  }
  fputs("{\"data\": ", stdout);
  report_json_string(stdout, r->eval_name);
  fputs(", \"loss\": ", stdout);
  if (isfinite(l)) printf("%.9g", l);
  else printf("\"%s\"", isnan(l) ? "nan" : l < 0 ? "-inf" : "inf");
  if (r->metric_var) printf(", \"accuracy\": %.9g", a);
  printf(", \"examples\": %lld", (long long)n);
  if (r->confusion) fputs(",\n ", stdout), report_confusion_json(stdout, r->confusion);
  puts("}");
}

/* Under mpirun (eval and predict --data): MPI started, and the output of
 * every rank but rank 0 dropped.  False after an error. */
static bool ranks_start(void) {
  if (dist_launched() && !dist_start(NULL)) return false;
  return dist_rank() == 0 || freopen("/dev/null", "w", stdout);
}

/* Under mpirun: a rank's failure the others did not see ends them all
 * (they may wait for it in a collective); then MPI ends. */
static int ranks_stop(int status) {
  if (status && !failure_agreed) dist_abort(status);
  dist_stop();
  return status;
}

/* eval: the loss and accuracy over the test data (or the training data).
 * On N ranks each takes its shard (as training's evaluation does) and
 * rank 0 prints the reduced figures. */
int trainer_eval(TrainArgs *t) {
  if (!ranks_start()) return EXIT_SCRIPT;
  Run r;
  int status = EXIT_SCRIPT;
  Confusion conf = {0};
  bool ok = setup(&r, t, false) && (!t->weights || restore(&r, t->weights, false));
  if (dist_size() > 1 && !agree_start(&r, ok, "evaluates")) ok = false;
  if (ok) {
    const Dataset *ds = r.has_test ? &r.test : &r.train;
    double l, a;
    r.confusion = t->confusion ? &conf : NULL;
    if (t->confusion && (!r.metric_var || !r.label))
      diag_error(&r.ld.diag, SPAN_NONE, "--confusion needs a classifier: metric = NAME (its logits) and a label input fed");
    else if (evaluate(&r, ds, &l, &a)) {
      eval_report(&r, ds->n, l, a);
      status = 0;
    }
  }
  teardown(&r);
  report_confusion_free(&conf);
  return ranks_stop(status);
}

/* The class each example's logits in v predict, one a line (predicted()
 * says how); rows is the batch's size when known, else -1. */
static void print_classes(FILE *f, const Tensor *v, int64_t rows) {
  int64_t n = predictions(v, rows);
  for (int64_t i = 0; i < n; i++) fprintf(f, "%lld\n", (long long)predicted(v, i, rows));
}

/* The classes print_classes prints, as an i64 tensor [N]. */
static Tensor *classes_of(const Tensor *v, int64_t rows) {
  int64_t n = predictions(v, rows);
  Tensor *c = tensor_new(DT_I64, 1, &n);
  for (int64_t i = 0; i < n; i++) tensor_i64(c)[i] = predicted(v, i, rows);
  return c;
}

/* The values of one forward pass (rows: the batch's examples, or -1): each
 * of vars[n] (the --output values) in turn, or with `classes` the classes
 * of the metric vars[0]; printed to f (--format text) or kept in rv. */
static void emit_value(Run *r, int k, Tensor *v, bool classes, int64_t rows, FILE *f, ReportValues *rv) {
  bool as_classes = classes && v->rank >= 1 && dtype_is_float(v->dtype);
  if (rv->format == REPORT_TEXT && as_classes) {
    print_classes(f, v, rows);
  } else if (rv->format == REPORT_TEXT) {
    print_write(f, v, r->t->opt.precision);
    fputc('\n', f);
  } else if (as_classes) {
    Tensor *c = classes_of(v, rows);
    report_values_add(rv, k, c);
    tensor_unref(c);
  } else {
    report_values_add(rv, k, v);
  }
}

static bool predict_pass(Run *r, const char *const *vars, int n, bool classes, int64_t rows, FILE *f,
                         ReportValues *rv) {
  if (exec_run_for(r->ex, vars, n) != 0) return false;
  for (int k = 0; k < n; k++) {
    Tensor *v = exec_value(r->ex, vars[k]);
    if (v) emit_value(r, k, v, classes, rows, f, rv);
  }
  return true;
}

/* ---- predict --data on N ranks ---- */

/* A value as it travels to rank 0: this header, then its elements. */
typedef struct Wire {
  int32_t present, dtype, rank, pad;
  int64_t rows;
  int64_t shape[SHAPE_MAX_RANK];
} Wire;

/* v (NULL: none) and its batch's rows as bytes, *bytes of them. */
static char *wire_pack(const Tensor *v, int64_t rows, size_t *bytes) {
  Wire w = {.present = v != NULL, .rows = rows};
  size_t data = v ? (size_t)v->numel * dtype_size(v->dtype) : 0;
  if (v) {
    w.dtype = (int32_t)v->dtype, w.rank = v->rank;
    memcpy(w.shape, v->shape, sizeof *w.shape * (size_t)v->rank);
  }
  char *buf = mem_alloc(NULL, sizeof w + data);
  memcpy(buf, &w, sizeof w);
  if (data) memcpy(buf + sizeof w, v->data, data);
  *bytes = sizeof w + data;
  return buf;
}

/* The value wire_pack packed (NULL: none), its rows in *rows. */
static Tensor *wire_unpack(const char *buf, int64_t *rows) {
  Wire w;
  memcpy(&w, buf, sizeof w);
  *rows = w.rows;
  if (!w.present) return NULL;
  Tensor *v = tensor_new((DType)w.dtype, w.rank, w.shape);
  memcpy(v->data, buf + sizeof w, (size_t)v->numel * dtype_size(v->dtype));
  return v;
}

/* One step of predict on N ranks: this rank's batch bt (NULL past the
 * data's end) run for each value; rank 0 gathers them and writes them
 * rank by rank, each rank's values in --output's order: what one process
 * writes at the same --batch.  False on every rank when one failed. */
static bool predict_step(Run *r, const Dataset *ds, Batch *bt, const char *const *vars, int n, bool classes, FILE *f,
                         ReportValues *rv) {
  int N = dist_size();
  char *mine[REPORT_MAX_OUTPUTS] = {0}, *all[REPORT_MAX_OUTPUTS] = {0};
  size_t bytes[REPORT_MAX_OUTPUTS], *sizes = mem_alloc(NULL, sizeof *sizes * (size_t)N * REPORT_MAX_OUTPUTS);
  bool ok = !bt || (feed_batch(r, ds, bt, false) && exec_run_for(r->ex, vars, n) == 0);
  for (int k = 0; k < n; k++) {
    mine[k] = wire_pack(ok && bt ? exec_value(r->ex, vars[k]) : NULL, bt ? bt->n : 0, &bytes[k]);
  }
  DistReport me = {.ok = ok}, sum, *reports = mem_alloc(NULL, sizeof *reports * (size_t)N);
  bool every = dist_agree(&me, &sum, reports);
  int bad = dist_odd_rank(reports, false);
  mem_free(reports);
  if (!every && ok)
    diag_error(NULL, SPAN_NONE, "rank %d of %d: predicting failed on rank %d (its error is above); stopping", dist_rank(),
               N, bad);
  for (int k = 0; k < n && every; k++)
    if (!dist_gather_bytes(mine[k], bytes[k], (void **)&all[k], sizes + (size_t)k * N)) {
      diag_error(NULL, SPAN_NONE, "one step's values exceed 2 GB: lower --batch");
      every = false;
    }
  for (int q = 0; q < N && every && all[0]; q++)
    for (int k = 0; k < n; k++) {
      size_t at = 0;
      for (int j = 0; j < q; j++) at += sizes[(size_t)k * N + j];
      int64_t rows;
      Tensor *v = wire_unpack(all[k] + at, &rows);
      if (v) emit_value(r, k, v, classes, rows, f, rv);
      tensor_unref(v);
    }
  for (int k = 0; k < n; k++) mem_free(mine[k]), mem_free(all[k]);
  mem_free(sizes);
  if (!every) failure_agreed = true;
  return every;
}

/* The variables of predict's values (vars, names): each --output, or the
 * train block's metric; false, reported, when the script lacks one. */
static bool predict_vars(Run *r, const char **vars, const char **names, int *n) {
  const TrainArgs *t = r->t;
  *n = t->noutputs ? t->noutputs : 1;
  for (int k = 0; k < *n; k++) {
    const char *name = t->noutputs ? t->outputs[k] : r->c.metric;
    names[k] = t->noutputs ? name : "class";
    const char *var = name ? prog_export(r->p, name) : NULL;
    vars[k] = var ? var : name;
    if (!name) {
      diag_error(&r->ld.diag, SPAN_NONE, "predict needs --output NAME (or metric = NAME in the train block)");
      return false;
    }
    if (!prog_var(r->p, vars[k])) {
      const char *near = prog_nearest_name(r->p, name);
      diag_error(&r->ld.diag, SPAN_NONE, "the script has no value named '%s'%s%s%s", name, DIAG_MEAN(near));
      return false;
    }
  }
  return true;
}

/* Predict's results, once every pass has run: the text's file closed, or
 * the values written in their format.  0 or the exit status. */
static int predict_finish(const TrainArgs *t, bool ok, OutFile *o, ReportValues *rv) {
  if (t->format == REPORT_TEXT && !ok && o->path) {   /* a failed run leaves no file */
    fclose(o->f);
    o->file.fd = -1;
    file_abort(&o->file);
  } else if (t->format == REPORT_TEXT) {
    ok = file_out_close(o) && ok;
  } else {
    ok = ok && report_values_write(rv, t->out);
  }
  report_values_free(rv);
  return ok ? 0 : EXIT_SCRIPT;
}

/* Where text goes (-o FILE, else standard output); other formats are
 * written at the end. */
static bool predict_start(const TrainArgs *t, int n, const char *const *names, OutFile *o, ReportValues *rv) {
  report_values_init(rv, t->format, n, names);
  o->f = stdout;
  o->path = NULL;
  return t->format != REPORT_TEXT || file_out_open(o, t->out);
}

/* predict --data: the values over the examples of the data eval would
 * take (the test split, or the file), batch by batch.  On N ranks, step k
 * of the ranks takes batches kN .. kN + N - 1, one each, and rank 0 alone
 * writes their values, in order (predict_step). */
static int predict_data(TrainArgs *t) {
  Run r;
  int status = EXIT_SCRIPT, N = dist_size();
  const char *vars[REPORT_MAX_OUTPUTS], *names[REPORT_MAX_OUTPUTS];
  int n = 0;
  OutFile o = {0};
  ReportValues rv;
  bool ok = setup(&r, t, false) && (!t->weights || restore(&r, t->weights, false)) &&
            predict_vars(&r, vars, names, &n);
  bool started = ok && dist_rank() == 0 && predict_start(t, n, names, &o, &rv);
  ok = ok && (started || dist_rank() > 0);
  if ((N > 1 && !agree_start(&r, ok, "predicts with")) || !ok) {
    if (started) predict_finish(t, false, &o, &rv);
    goto out;
  }
  const Dataset *ds = r.has_test ? &r.test : &r.train;
  Batcher b;
  data_batcher_init(&b, ds, r.c.batch, false);
  data_epoch(&b, NULL);
  int64_t steps = (data_batches(&b) + N - 1) / N;
  data_skip(&b, dist_rank());
  for (int64_t s = 0; ok && s < steps; s++) {
    Batch bt;
    bool has = data_next(&b, &bt);
    if (N > 1) {
      ok = predict_step(&r, ds, has ? &bt : NULL, vars, n, !t->noutputs, o.f, &rv);
    } else {
      ok = feed_batch(&r, ds, &bt, false) && predict_pass(&r, vars, n, !t->noutputs, bt.n, o.f, &rv);
    }
    data_batch_release(&bt);
    data_skip(&b, N - 1);
  }
  data_batcher_free(&b);
  status = started ? predict_finish(t, ok, &o, &rv) : ok ? 0 : EXIT_SCRIPT;
out:
  teardown(&r);
  return status;
}

/* predict: the forward pass on fed inputs (or --data) with trained
 * weights; prints the class (see predicted) of each example by the train
 * block's metric, or the values of --output NAME, in --format. */
int trainer_predict(TrainArgs *t) {
  t->predicting = true;
  if (!ranks_start()) return EXIT_SCRIPT;
  if (t->o.data) return ranks_stop(predict_data(t));
  /* fed inputs: nothing to share out; rank 0 alone predicts */
  if (dist_rank() > 0) return ranks_stop(0);
  Run r;
  memset(&r, 0, sizeof r);
  r.t = t;
  int status = EXIT_SCRIPT;
  const char *vars[REPORT_MAX_OUTPUTS], *names[REPORT_MAX_OUTPUTS];
  int n;
  OutFile o;
  ReportValues rv;
  bool loaded = session_load(&r.ld, t->file);
  r.p = r.ld.prog;   /* unloaded below, loaded or not */
  if (!loaded) goto out;   /* session_load has counted the errors */
  if (!train_config(r.p, &t->o, &r.c, true)) goto fail;
  r.hash = program_hash(r.p);
  if (!predict_vars(&r, vars, names, &n)) goto out;
  ExecOptions opt = t->opt;
  opt.tape = false;
  if (!(r.ex = run_start(&r.ld, &opt, &t->feeds, NULL, 0))) goto out;   /* it has counted the errors */
  if (exec_startup(r.ex) < 0) goto fail;
  if (t->weights && !restore(&r, t->weights, false)) goto out;
  /* Predicting is not training, unless --set says otherwise. */
  r.mode_var = mode_input(r.p);
  r.mode_set = trainer_sets_mode(&t->feeds);
  if (!feed_mode(&r, false)) goto fail;
  if (!predict_start(t, n, names, &o, &rv)) goto out;
  bool ok = predict_pass(&r, vars, n, !t->noutputs, -1, o.f, &rv);
  status = predict_finish(t, ok, &o, &rv);
  if (!ok) goto fail;
  goto out;
fail:
  diag_finish(&r.ld.diag);   /* "N errors" */
out:
  exec_free(r.ex);
  if (r.p) session_free(&r.ld);
  return ranks_stop(status);
}

/* ---- lr-find ------------------------------------------------------------------------ */

/* One step of lr-find's sweep at learning rate lr, recorded in s; false
 * when the sweep ends here (s->stop says why) or failed (*status). */
static bool sweep_step(Run *r, Batch *bt, bool real, double lr, double *best, int *status) {
  LrSweep *s = &r->t->sweep;
  tensor_f32(r->lr)[0] = (float)lr;
  Step st;
  *status = train_step(r, bt, real, &st, false);
  if (*status) return false;
  double sm = smoothed(r);
  s->pts[s->n++] = (LrPoint){lr, st.loss, sm};
  r->step++, r->step_in_epoch++;
  if (!isfinite(st.loss)) snprintf(s->stop, sizeof s->stop, "the loss is %s at step %lld", loss_str(st.loss, 4).s,
                                   (long long)s->n);
  else if (sm > 4 * *best)
    snprintf(s->stop, sizeof s->stop, "the smoothed loss %.4g at step %lld exceeds 4 x the best, %.4g", sm,
             (long long)s->n, *best);
  if (sm < *best) *best = sm;
  if (!*s->stop && stop_signal)
    snprintf(s->stop, sizeof s->stop, "interrupted (signal %d) after step %lld", (int)stop_signal, (long long)s->n);
  return !*s->stop;
}

/* The sweep: s->steps training steps, epoch after epoch of the training
 * data, lr rising exponentially; nothing is saved.  On a terminal, a
 * progress line; Ctrl-C or SIGTERM ends the sweep after the current step
 * (the curve so far is printed, status 128 + the signal). */
static int sweep(Run *r) {
  LrSweep *s = &r->t->sweep;
  s->pts = mem_alloc(NULL, sizeof *s->pts * (size_t)s->steps);
  int64_t per_epoch = epoch_steps(r);
  double best = INFINITY;
  int status = 0;
  bool going = true, tty = isatty(2);
  signal(SIGINT, on_stop);
  signal(SIGTERM, on_stop);
  while (going && s->n < s->steps) {
    Batcher b;
    data_batcher_init(&b, &r->train, r->c.batch, false);
    data_epoch(&b, r->c.shuffle ? &r->shuffle : NULL);
    r->step_in_epoch = 0;
    Batch bt;
    bool real;
    while (going && s->n < s->steps && next_batch(r, &b, &bt, per_epoch, &real)) {
      going = sweep_step(r, &bt, real, lrf_rate(s, s->n), &best, &status);
      data_batch_release(&bt);
      if (tty && !status)
        fprintf(stderr, "\rstep %lld/%lld  lr %.3g  smoothed loss %s   ", (long long)s->n, (long long)s->steps,
                s->pts[s->n - 1].lr, loss_str(s->pts[s->n - 1].smooth, 4).s);
    }
    data_batcher_free(&b);
    r->epoch++;
  }
  if (tty) fputc('\n', stderr);
  return status ? status : stop_signal ? 128 + stop_signal : 0;
}

/* lr-find FILE: the sweep, its curve printed (and plotted), an lr suggested. */
static int lr_find(TrainArgs *t) {
  Run r;
  int status = EXIT_SCRIPT;
  if (dist_size() > 1) {
    diag_error(NULL, SPAN_NONE, "lr-find runs in one process, not under mpirun");
    return EXIT_USAGE;
  }
  t->keep_going = true;   /* a loss that is not finite ends the sweep (sweep_step), not the run */
  bool ok = setup(&r, t, true) && (!t->weights || restore(&r, t->weights, false));
  t->sweep.model = t->file;
  if (ok) {
    r.warned = true;
    fprintf(stderr, "lr-find %s: %s, %lld steps of %lld, lr from %g to %g\n", t->file, r.c.optimizer,
            (long long)t->sweep.steps, (long long)r.c.batch, t->sweep.start, t->sweep.end);
    status = sweep(&r);
  }
  if (ok && t->sweep.n && (!status || stop_signal)) {
    OutFile o;
    int done = status;   /* 0, or 128 + the signal that stopped the sweep */
    status = EXIT_SCRIPT;
    if (file_out_open(&o, t->out)) {
      lrf_print(o.f, &t->sweep, t->lrf_format);
      if (file_out_close(&o)) status = 0;
    }
    if (t->lrf_format == LRF_CSV) lrf_say_suggestion(stderr, &t->sweep);
    if (!status && t->plot) status = lrf_plot(&t->sweep, t->plot);
    if (!status) status = done;
  }
  mem_free(t->sweep.pts);
  teardown(&r);
  return status;
}

int trainer_lr_find(TrainArgs *t) {
  int rc = lr_find(t);
  if (stop_signal) exec_interrupt_reset();   /* the sweep said how a signal ended it (as cmd_train) */
  return rc;
}
