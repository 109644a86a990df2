/* loop.c — the training loop (trainrun.h): epochs of steps, each step the
 * forward ops, then the backward ops and the updates; an epoch's end
 * (evaluation, the epoch line, checkpoints, patience); how a signal stops
 * a run; and lr-find's sweep of training steps (its curve: lrfind.c). */
#include "train/trainer.h"
#include "train/trainrun.h"

#include "exec/dist.h"

#include <fcntl.h>
#include <math.h>
#include <time.h>

volatile sig_atomic_t trun_stop_signal;

/* The first signal stops the run after the current step (so every
 * parameter is updated, then saved); a second stops it at once.  Under
 * mpirun, which stops reading the ranks' output once it forwards a
 * signal, a rank blocked writing a progress line into a full pipe would
 * never reach the step where the ranks agree to stop: from the signal on,
 * output that cannot be written at once is dropped instead (fcntl is
 * async-signal-safe; the interrupted write restarts and returns). */
static void on_stop(int sig) {
  if (trun_stop_signal) exec_interrupt();
  trun_stop_signal = sig;
  if (dist_size() > 1)
    for (int fd = 1; fd <= 2; fd++) {
      int fl = fcntl(fd, F_GETFL);
      if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    }
}

double trun_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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

/* ---- a step ------------------------------------------------------------------------------- */

/* Says why step r->step + 1 stopped with loss l: a parameter that the
 * last update left NaN or infinite, else the first op of the forward
 * pass, run again from the same state under --check-nan, that makes a
 * NaN or an infinity (its error, with the script's line). */
static void diverged(Run *r, double l, const Rng *before, bool tty) {
  if (tty) fputc('\n', stderr);
  diag_error(&r->ld.diag, SPAN_NONE, "step %lld (epoch %lld): the loss is %s; stopped before its update, "
             "checkpoints are left as they were (--keep-going trains on)",
             (long long)r->step + 1, (long long)r->epoch + 1, trun_loss_str(l, 4).s);
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < b0->nvars; i++) {
    Tensor *t = b0->vars[i]->flags & VAR_PARAM ? exec_value(r->ex, b0->vars[i]->name) : NULL;
    if (t && tensor_non_finite(t)) {
      if (r->step > 0)
        diag_error(&r->ld.diag, SPAN_NONE, "parameter '%s' holds NaN or Inf: step %lld's update made it so",
                   b0->vars[i]->name, (long long)r->step);
      else if (r->t->weights)   /* no update yet: the value came in so */
        diag_error(&r->ld.diag, SPAN_NONE, "parameter '%s' holds NaN or Inf as read from %s (--weights)",
                   b0->vars[i]->name, r->t->weights);
      else
        diag_error(&r->ld.diag, SPAN_NONE, "parameter '%s' holds NaN or Inf as initialized", b0->vars[i]->name);
      return;
    }
  }
  *exec_rng(r->ex) = *before;   /* dropout draws the same masks */
  exec_check_nan(r->ex, true);
  exec_run_range(r->ex, 0, r->nforward);
  exec_check_nan(r->ex, r->t->opt.check_nan);
}

/* ---- gradient accumulation ---------------------------------------------------- */

/* Accumulating (accumulate = N > 1), a step runs the forward and the
 * backward phases of the training program; each gradient, times the
 * batch's examples, is added to its sum (in the gradient's dtype, as
 * PyTorch's .grad); after the update's
 * last batch the sums, over the examples they hold, are written into the
 * gradients and the allreduce and update phases run.  The gradients of a
 * mean loss weighted so make the update of one batch of all those
 * examples (an epoch's last group may be shorter).  A rank's stand-in
 * batch (not real) adds nothing.  On N ranks, this rank's weight in the
 * allreduce is its share of the update's examples.  A weight matrix's
 * gradient the backward sums in place (train.c's sum_in_place) is its own
 * sum: the backward adds the batch's examples times its gradient into it
 * (acc_rate), the sum is divided where it stands and zeroed after the
 * update. */

/* The value of gradient i, f32 or f64 (NULL: none this step). */
static Tensor *grad_value(Run *r, int i) {
  const char *g = r->bw.pairs[i].grad;
  Tensor *t = g ? exec_var_value(r->ex, g) : NULL;
  return t && (t->dtype == DT_F32 || t->dtype == DT_F64) ? t : NULL;
}

/* Before the first backward: which gradients the backward sums in place
 * (an sgd_matmul writing one, train.c's sum_in_place), each given its
 * starting sum, zeros of its parameter's shape, and the rate they read. */
static void accumulate_start(Run *r) {
  r->acc = mem_calloc((size_t)r->bw.npairs + 1, sizeof *r->acc);
  r->acc_in_place = mem_calloc((size_t)r->bw.npairs + 1, sizeof *r->acc_in_place);
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < r->bw.npairs; i++) {
    const char *g = r->bw.pairs[i].grad;
    for (int j = r->nforward; g && j < r->backward_end && !r->acc_in_place[i]; j++) {
      const char *w = op_out1(b0->ops[j], "ParamOut");
      r->acc_in_place[i] = strcmp(b0->ops[j]->type, "sgd_matmul") == 0 && w && strcmp(w, g) == 0;
    }
    const Tensor *param = r->acc_in_place[i] ? exec_var_value(r->ex, r->bw.pairs[i].param) : NULL;
    if (!param) {
      r->acc_in_place[i] = false;
      continue;
    }
    Tensor *zero = tensor_zeros(DT_F32, param->rank, param->shape);
    exec_preload(r->ex, g, zero);
    tensor_unref(zero);
    if (!r->acc_rate) {
      r->acc_rate = tensor_scalar_f32(0);
      exec_preload(r->ex, TRAIN_ACC_RATE_VAR, r->acc_rate);
    }
  }
}

/* Adds this step's gradients, times its n examples (this rank's), to the
 * sums (those summed in place already hold them). */
static void accumulate_add(Run *r, int64_t n, int64_t all) {
  for (int i = 0; i < r->bw.npairs; i++) {
    Tensor *g = r->acc_in_place[i] ? NULL : grad_value(r, i);
    if (!g) continue;
    size_t size = dtype_size(g->dtype);
    if (!r->acc[i]) r->acc[i] = mem_calloc((size_t)g->numel + 1, size);
    if (n == 0) continue;
    if (g->dtype == DT_F32) {
      float *a = r->acc[i], w = (float)n;
      for (int64_t k = 0; k < g->numel; k++) a[k] += w * tensor_f32(g)[k];
    } else {
      double *a = r->acc[i], w = (double)n;
      for (int64_t k = 0; k < g->numel; k++) a[k] += w * ((double *)g->data)[k];
    }
  }
  r->acc_mine += n, r->acc_all += all;
}

/* The sums, over this rank's examples, into the gradients the update
 * reads; the sums start again. */
static void accumulate_finish(Run *r) {
  double scale = r->acc_mine ? 1.0 / (double)r->acc_mine : 0;
  for (int i = 0; i < r->bw.npairs; i++) {
    Tensor *g = grad_value(r, i);
    if (g && r->acc_in_place[i]) {   /* the sum itself, divided where it stands */
      for (int64_t k = 0; k < g->numel; k++) tensor_f32(g)[k] = (float)((double)tensor_f32(g)[k] * scale);
      continue;
    }
    if (!g || !r->acc[i]) continue;
    if (g->dtype == DT_F32) {
      float *a = r->acc[i];
      for (int64_t k = 0; k < g->numel; k++) tensor_f32(g)[k] = (float)((double)a[k] * scale);
    } else {
      double *a = r->acc[i];
      for (int64_t k = 0; k < g->numel; k++) ((double *)g->data)[k] = a[k] * scale;
    }
    memset(r->acc[i], 0, dtype_size(g->dtype) * (size_t)g->numel);
  }
  if (r->weight) tensor_f32(r->weight)[0] = (float)((double)r->acc_mine / (double)(r->acc_all ? r->acc_all : 1));
  r->acc_mine = r->acc_all = 0;
}

/* The phases after the forward: the backward, then (unless the update
 * waits for more batches) the allreduce and the update.  mine: this
 * rank's examples of the step; all: every rank's. */
static bool backward_update(Run *r, bool update, int64_t mine, int64_t all) {
  if (r->c.accumulate == 1) return exec_run_range(r->ex, r->nforward, -1) == 0;
  if (!r->acc) accumulate_start(r);
  if (r->acc_rate) tensor_f32(r->acc_rate)[0] = -(float)mine;
  if (exec_run_range(r->ex, r->nforward, r->backward_end) != 0) return false;
  accumulate_add(r, mine, all);
  if (!update) return true;
  accumulate_finish(r);
  if (exec_run_range(r->ex, r->backward_end, -1) != 0) return false;
  for (int i = 0; i < r->bw.npairs; i++) {   /* the sums in place start again */
    Tensor *g = r->acc_in_place[i] ? grad_value(r, i) : NULL;
    if (g) memset(g->data, 0, sizeof(float) * (size_t)g->numel);
  }
  return true;
}

static bool one_step(Run *r, Batch *bt, bool real, bool update, Step *st, bool tty, const Rng *rng);

/* One training step on batch bt: the forward ops, then, when the loss is
 * finite (or with --keep-going), the backward ops and the updates.  The
 * check between the two costs one comparison a step.  On N ranks the
 * ranks agree between the two (agree_step); a batch that is not `real`
 * (a shard one example short) counts for nothing.  *st: the step's loss,
 * correct predictions and examples.  False once the failure is
 * reported. */
static bool train_step(Run *r, Batch *bt, bool real, bool update, Step *st, bool tty) {
  Rng before = *exec_rng(r->ex);
  Tensor **states = real ? NULL : trun_save_states(r);
  bool ok = one_step(r, bt, real, update, st, tty, &before);
  if (states) trun_restore_states(r, states);
  return ok;
}

/* train_step's forward, backward and (when `update`) updates. */
static bool one_step(Run *r, Batch *bt, bool real, bool update, Step *st, bool tty, const Rng *rng) {
  bool ok = trun_feed_batch(r, &r->train, bt, true) && exec_run_range(r->ex, 0, r->nforward) == 0;
  *st = (Step){ok ? trun_loss_value(r) : (double)NAN, ok && real ? trun_correct(r) : 0, real ? bt->n : 0};
  int64_t mine = st->n;
  if ((dist_size() > 1 && !trun_agree_step(r, ok, st)) || !ok) return false;
  double l = st->loss;
  if (!isfinite(l) && !r->t->keep_going) {
    trun_failure_agreed = true;   /* every rank has the same loss */
    diverged(r, l, rng, tty);
    return false;
  }
  if (!isfinite(l) && !r->warned) {
    if (tty) fputc('\n', stderr);
    diag_warn(&r->ld.diag, SPAN_NONE, "step %lld (epoch %lld): the loss is %s; training on (--keep-going)",
              (long long)r->step + 1, (long long)r->epoch + 1, trun_loss_str(l, 4).s);
    r->warned = true;
  }
  if (!backward_update(r, update, mine, st->n)) return false;
  /* The moving average starts from 0, and is divided by 1 - 0.98^n as
   * Adam's moments are: the first steps' losses are not drowned by the
   * zero it started from. */
  r->ema = 0.98 * r->ema + 0.02 * l;
  r->ema_n++;
  return true;
}

static double smoothed(const Run *r) { return r->ema / (1 - pow(0.98, (double)r->ema_n)); }

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

/* One epoch's steps (from r->step_in_epoch, when resumed in the middle
 * of it): each batch's learning rate, step and progress line.  *n: this
 * process's examples, for its rate.  False once a failure is reported; a
 * signal ends the epoch early, true (the caller asks trun_stop_sig). */
static bool run_epoch(Run *r, int64_t steps_per_epoch, bool tty, double epoch_start, int64_t *n) {
  const TrainArgs *t = r->t;
  Batcher b;
  data_batcher_init(&b, &r->train, r->c.batch, false);
  b.aug = (DataAugment){r->c.flip, r->c.crop_pad, t->opt.seed ^ DATA_AUGMENT_SEED, r->epoch};
  if (r->step_in_epoch == 0) r->shuffle_at_epoch = r->shuffle;
  else r->shuffle = r->shuffle_at_epoch;   /* resuming mid-epoch: the same order */
  data_epoch(&b, r->c.shuffle ? &r->shuffle : NULL);
  if (dist_size() > 1) data_shard(&b, dist_rank(), dist_size());
  data_skip(&b, r->step_in_epoch);
  Batch bt;
  bool real, ok = true;
  if (r->step_in_epoch == 0) r->epoch_loss = 0, r->epoch_n = 0, r->epoch_hits = 0;
  while (next_batch(r, &b, &bt, steps_per_epoch, &real)) {
    /* An update's batches: `accumulate` of them from the epoch's start,
     * the last group what is left.  Its learning rate is that of its
     * first batch. */
    int64_t in_group = r->step_in_epoch % r->c.accumulate;
    bool update = in_group == r->c.accumulate - 1 || r->step_in_epoch + 1 == steps_per_epoch;
    double e = (double)r->epoch + (double)r->step_in_epoch / (double)steps_per_epoch;
    if (in_group == 0) tensor_f32(r->lr)[0] = (float)schedule(&r->c, e);
    Step st;
    ok = train_step(r, &bt, real, update, &st, tty);
    data_batch_release(&bt);
    if (!ok) break;
    r->epoch_loss += st.loss * (double)st.n, r->epoch_hits += st.hits, r->epoch_n += st.n, *n += st.n;
    r->step++, r->step_in_epoch++, r->samples += st.n;
    trun_progress(r, st.loss, smoothed(r), steps_per_epoch, trun_now() - epoch_start, *n, tty);
    if ((update && trun_stop_sig(r)) || r->log_failed) break;   /* a signal stops a run after an update */
  }
  data_batcher_free(&b);
  return ok && !r->log_failed;
}

/* Evaluates ds at an epoch's end: " | NAME loss L acc A" appended to the
 * epoch's line at *k, an eval event logged, and *score set to what
 * --keep-best and patience compare (the accuracy, else minus the loss). */
static bool epoch_eval(Run *r, const Dataset *ds, const char *name, char *line, size_t size, int *k, double *score) {
  double el, ea;
  if (!trun_evaluate(r, ds, &el, &ea)) return false;
  trun_epoch_eval_text(r, name, el, ea, line, size, k);
  *score = trun_watches_accuracy(r) ? ea : -el;
  return true;
}

/* An epoch's end, after its last step: the evaluations, the epoch line,
 * the ranks' agreement, the best score and patience's count, the
 * checkpoints.  *stop: patience ends the run.  False once a failure is
 * reported. */
static bool end_epoch(Run *r, double epoch_start, int64_t n, bool tty, bool *stop) {
  const TrainArgs *t = r->t;
  r->epoch++;
  r->step_in_epoch = 0;
  r->shuffle_at_epoch = r->shuffle;   /* the next epoch's order starts here */
  if (dist_size() > 1) trun_average_states(r);   /* before evaluating and saving them */
  double secs = trun_now() - epoch_start;
  double tl = r->epoch_n ? r->epoch_loss / (double)r->epoch_n : (double)NAN;
  if (tty) fputc('\n', stderr);
  char line[1024];
  int k = trun_epoch_text(r, tl, secs, line, sizeof line);
  double score = -tl, test_score;
  if ((r->has_val && !epoch_eval(r, &r->val, "val", line, sizeof line, &k, &score)) ||
      (r->has_test && !epoch_eval(r, &r->test, r->eval_name, line, sizeof line, &k, r->has_val ? &test_score : &score)))
    return false;
  bool best = score > r->best;
  if (best) r->best = score, r->best_epoch = r->epoch, r->stalled = 0;
  else r->stalled++;
  trun_patience_text(r, line, sizeof line, &k);
  snprintf(line + k, sizeof line - (size_t)k, " | %.1f s, %.0f samples/s", secs, (double)n / (secs > 0 ? secs : 1e-9));
  printf("%s\n", line);
  fflush(stdout);
  if (dist_size() > 1 && !trun_agree_params(r)) return false;
  trun_log_sync(r);
  if (r->log_failed) return false;
  /* A checkpoint that cannot be written stops the run: training on
   * without one would waste what the user asked to keep. */
  if (t->save && !trun_save(r, t->save, true)) return false;
  if (t->keep_best && best) {
    char path[4096];
    snprintf(path, sizeof path, "%s.best", t->save);
    if (!trun_save(r, path, true)) return false;
  }
  if (r->c.patience && r->stalled >= r->c.patience) {
    trun_say_early_stop(r);
    *stop = true;
  }
  return true;
}

/* A run stopped by a signal after a step: said, and saved when asked;
 * false when the checkpoint could not be written (an error). */
static bool interrupted(Run *r, bool tty) {
  if (tty) fputc('\n', stderr);
  if (!r->quiet)
    fprintf(stderr, "netrun: interrupted at epoch %lld, step %lld\n", (long long)r->epoch + 1, (long long)r->step);
  if (dist_size() > 1) trun_average_states(r);
  return !r->t->save || trun_save(r, r->t->save, false);
}

/* The training loop of cmd_train: false once a failure is reported;
 * *sig, the signal that stopped the run (its checkpoint saved), else 0. */
static bool train(TrainArgs *t, int *sig) {
  char err[4200];
  Run r;
  *sig = 0;
  bool ok = trun_setup(&r, t, true) && (!t->resume || trun_restore(&r, t->resume, true)) &&
            (!t->weights || trun_restore(&r, t->weights, false));
  if (dist_size() > 1 && trun_agree_start(&r, ok, "trains")) trun_sync_model(&r);
  if (trun_failure_agreed) ok = false;
  if (ok && t->log && !(r.logging = file_log_open(&r.log, t->log, r.epoch || r.step, err, sizeof err))) {
    diag_error(&r.ld.diag, SPAN_NONE, "%s: %s", t->log, err);
    ok = false;
  }
  if (!ok) goto out;
  signal(SIGINT, on_stop);
  signal(SIGTERM, on_stop);
  bool tty = isatty(2) && !r.quiet;   /* only rank 0 shows progress */
  int64_t steps_per_epoch = trun_epoch_steps(&r);
  double start = trun_now();
  int64_t run_samples = 0;
  trun_say_start(&r, steps_per_epoch);
  if (t->save_back && !r.quiet)
    diag_note(&r.ld.diag, SPAN_NONE, "saving to %s, the checkpoint resumed (--save PATH: another file; --no-save: "
              "none)", t->save);
  bool stop = false;
  while (r.epoch < r.c.epochs && ok && !stop) {
    double epoch_start = trun_now();
    int64_t n = 0;
    ok = run_epoch(&r, steps_per_epoch, tty, epoch_start, &n);
    run_samples += n;
    if (!ok) break;
    if (trun_stop_sig(&r)) {
      *sig = trun_stop_sig(&r);
      ok = interrupted(&r, tty);
      break;
    }
    ok = end_epoch(&r, epoch_start, n, tty, &stop);
  }
  if (ok && !*sig) {
    trun_say_summary(&r, trun_now() - start, run_samples);
    ok = !r.log_failed;
  }
out:
  trun_teardown(&r);
  return ok;
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
  int sig;
  int status = !train(t, &sig) ? EXIT_SCRIPT : sig ? 128 + sig : 0;   /* 128 + a signal: stopped, saved if asked */
  file_unlock(&lock);
  /* The trainer says how a signal ended the run: a second one stopped a
   * step (status 1, nothing written), not main's generic Ctrl-C (130). */
  if (trun_stop_signal) exec_interrupt_reset();
  /* A failure the other ranks did not see ends them (they may wait for
   * this one in a collective): its error is above, mpirun's note follows. */
  if (status && status < 128 && !trun_failure_agreed) dist_abort(status);
  dist_stop();
  return status;
}

/* ---- lr-find ------------------------------------------------------------------------ */

/* One step of lr-find's sweep at learning rate lr, recorded in s; false
 * when the sweep ends here (s->stop says why) or failed (*failed, once
 * reported). */
static bool sweep_step(Run *r, Batch *bt, bool real, double lr, double *best, bool *failed) {
  LrSweep *s = &r->t->sweep;
  tensor_f32(r->lr)[0] = (float)lr;
  Step st;
  *failed = !train_step(r, bt, real, true, &st, false);
  if (*failed) return false;
  double sm = smoothed(r);
  s->pts[s->n++] = (LrPoint){lr, st.loss, sm};
  r->step++, r->step_in_epoch++;
  if (!isfinite(st.loss)) snprintf(s->stop, sizeof s->stop, "the loss is %s at step %lld", trun_loss_str(st.loss, 4).s,
                                   (long long)s->n);
  else if (sm > 4 * *best)
    snprintf(s->stop, sizeof s->stop, "the smoothed loss %.4g at step %lld exceeds 4 x the best, %.4g", sm,
             (long long)s->n, *best);
  if (sm < *best) *best = sm;
  if (!*s->stop && trun_stop_signal)
    snprintf(s->stop, sizeof s->stop, "interrupted (signal %d) after step %lld", (int)trun_stop_signal, (long long)s->n);
  return !*s->stop;
}

/* The sweep: s->steps training steps, epoch after epoch of the training
 * data, lr rising exponentially; nothing is saved.  On a terminal, a
 * progress line; Ctrl-C or SIGTERM ends the sweep after the current step
 * (the curve so far is printed; trun_stop_signal says which).  False
 * once a failure is reported. */
static bool sweep(Run *r) {
  LrSweep *s = &r->t->sweep;
  s->pts = mem_alloc(NULL, sizeof *s->pts * (size_t)s->steps);
  int64_t per_epoch = trun_epoch_steps(r);
  double best = INFINITY;
  bool going = true, failed = false, tty = isatty(2);
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
      going = sweep_step(r, &bt, real, lrf_rate(s, s->n), &best, &failed);
      data_batch_release(&bt);
      if (tty && !failed)
        fprintf(stderr, "\rstep %lld/%lld  lr %.3g  smoothed loss %s   ", (long long)s->n, (long long)s->steps,
                s->pts[s->n - 1].lr, trun_loss_str(s->pts[s->n - 1].smooth, 4).s);
    }
    data_batcher_free(&b);
    r->epoch++;
  }
  if (tty) fputc('\n', stderr);
  return !failed;
}

/* lr-find FILE: the sweep, its curve printed (and plotted), an lr
 * suggested.  False once a failure is reported. */
static bool lr_find(TrainArgs *t) {
  Run r;
  bool swept = false;
  t->keep_going = true;   /* a loss that is not finite ends the sweep (sweep_step), not the run */
  bool ok = trun_setup(&r, t, true) && (!t->weights || trun_restore(&r, t->weights, false));
  if (ok && r.c.accumulate > 1) {
    const Setting *s = prog_setting(r.p, "train", "accumulate");
    diag_error(&r.ld.diag, s ? s->span : SPAN_NONE, "lr-find sweeps one batch per step: accumulate = %lld is not "
               "supported (set batch to the examples of one update instead)", (long long)r.c.accumulate);
    ok = false;
  }
  t->sweep.model = t->file;
  if (ok) {
    r.warned = true;
    fprintf(stderr, "lr-find %s: %s, %lld steps of %lld, lr from %g to %g\n", t->file, r.c.optimizer,
            (long long)t->sweep.steps, (long long)r.c.batch, t->sweep.start, t->sweep.end);
    swept = sweep(&r);
  }
  /* the curve so far, also when a signal stopped the sweep */
  if (ok && t->sweep.n && (swept || trun_stop_signal)) {
    OutFile o;
    ok = false;
    if (file_out_open(&o, t->out)) {
      lrf_print(o.f, &t->sweep, t->lrf_format);
      ok = file_out_close(&o);
    }
    if (t->lrf_format == LRF_CSV) lrf_say_suggestion(stderr, &t->sweep);
    if (ok && t->plot) ok = lrf_plot(&t->sweep, t->plot);
    ok = ok && swept;   /* a step that failed is the run's failure, its curve shown */
  } else {
    ok = false;
  }
  mem_free(t->sweep.pts);
  trun_teardown(&r);
  return ok;
}

int trainer_lr_find(TrainArgs *t) {
  if (dist_size() > 1) {
    diag_error(NULL, SPAN_NONE, "lr-find runs in one process, not under mpirun");
    return EXIT_USAGE;
  }
  int rc = !lr_find(t) ? EXIT_SCRIPT : trun_stop_signal ? 128 + trun_stop_signal : 0;
  if (trun_stop_signal) exec_interrupt_reset();   /* the sweep said how a signal ended it (as cmd_train) */
  return rc;
}
