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

static int one_step(Run *r, Batch *bt, bool real, Step *st, bool tty, const Rng *rng);

/* One training step on batch bt: the forward ops, then, when the loss is
 * finite (or with --keep-going), the backward ops and the updates.  The
 * check between the two costs one comparison a step.  On N ranks the
 * ranks agree between the two (agree_step); a batch that is not `real`
 * (a shard one example short) counts for nothing.  *st: the step's loss,
 * correct predictions and examples.  0 or the exit status. */
static int train_step(Run *r, Batch *bt, bool real, Step *st, bool tty) {
  Rng before = *exec_rng(r->ex);
  Tensor **states = real ? NULL : trun_save_states(r);
  int status = one_step(r, bt, real, st, tty, &before);
  if (states) trun_restore_states(r, states);
  return status;
}

/* train_step's forward, backward and updates. */
static int one_step(Run *r, Batch *bt, bool real, Step *st, bool tty, const Rng *rng) {
  bool ok = trun_feed_batch(r, &r->train, bt, true) && exec_run_range(r->ex, 0, r->nforward) == 0;
  *st = (Step){ok ? trun_loss_value(r) : (double)NAN, ok && real ? trun_correct(r) : 0, real ? bt->n : 0};
  if ((dist_size() > 1 && !trun_agree_step(r, ok, st)) || !ok) return EXIT_SCRIPT;
  double l = st->loss;
  if (!isfinite(l) && !r->t->keep_going) {
    trun_failure_agreed = true;   /* every rank has the same loss */
    diverged(r, l, rng, tty);
    return EXIT_SCRIPT;
  }
  if (!isfinite(l) && !r->warned) {
    if (tty) fputc('\n', stderr);
    diag_warn(&r->ld.diag, SPAN_NONE, "step %lld (epoch %lld): the loss is %s; training on (--keep-going)",
              (long long)r->step + 1, (long long)r->epoch + 1, trun_loss_str(l, 4).s);
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
 * process's examples, for its rate.  0 or the exit status; a signal ends
 * the epoch early with 0 (the caller asks trun_stop_sig). */
static int run_epoch(Run *r, int64_t steps_per_epoch, bool tty, double epoch_start, int64_t *n) {
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
  bool real;
  int status = 0;
  if (r->step_in_epoch == 0) r->epoch_loss = 0, r->epoch_n = 0, r->epoch_hits = 0;
  while (next_batch(r, &b, &bt, steps_per_epoch, &real)) {
    double e = (double)r->epoch + (double)r->step_in_epoch / (double)steps_per_epoch;
    tensor_f32(r->lr)[0] = (float)schedule(&r->c, e);
    Step st;
    status = train_step(r, &bt, real, &st, tty);
    data_batch_release(&bt);
    if (status) break;
    r->epoch_loss += st.loss * (double)st.n, r->epoch_hits += st.hits, r->epoch_n += st.n, *n += st.n;
    r->step++, r->step_in_epoch++, r->samples += st.n;
    trun_progress(r, st.loss, smoothed(r), steps_per_epoch, trun_now() - epoch_start, *n, tty);
    if (trun_stop_sig(r) || r->log_failed) break;
  }
  data_batcher_free(&b);
  return status ? status : r->log_failed ? EXIT_SCRIPT : 0;
}

/* Evaluates ds at an epoch's end: " | NAME loss L acc A" appended to the
 * epoch's line at *k, an eval event logged, and *score set to what
 * --keep-best and patience compare (the accuracy, else minus the loss). */
static bool epoch_eval(Run *r, const Dataset *ds, const char *name, char *line, size_t size, int *k, double *score) {
  double el, ea;
  if (!trun_evaluate(r, ds, &el, &ea)) return false;
  trun_epoch_eval_text(r, name, el, ea, line, size, k);
  *score = r->metric_var ? ea : -el;
  return true;
}

/* An epoch's end, after its last step: the evaluations, the epoch line,
 * the ranks' agreement, the best score and patience's count, the
 * checkpoints.  *stop: patience ends the run.  0 or the exit status. */
static int end_epoch(Run *r, double epoch_start, int64_t n, bool tty, bool *stop) {
  const TrainArgs *t = r->t;
  r->epoch++;
  r->step_in_epoch = 0;
  r->shuffle_at_epoch = r->shuffle;   /* the next epoch's order starts here */
  if (dist_size() > 1) trun_average_states(r);   /* before evaluating and saving them */
  double secs = trun_now() - epoch_start;
  double tl = r->epoch_n ? r->epoch_loss / (double)r->epoch_n : (double)NAN;
  if (tty) fputc('\n', stderr);
  char line[512];
  int k = trun_epoch_text(r, tl, secs, line, sizeof line);
  double score = -tl, test_score;
  if ((r->has_val && !epoch_eval(r, &r->val, "val", line, sizeof line, &k, &score)) ||
      (r->has_test && !epoch_eval(r, &r->test, r->eval_name, line, sizeof line, &k, r->has_val ? &test_score : &score)))
    return EXIT_SCRIPT;
  snprintf(line + k, sizeof line - (size_t)k, " | %.1f s, %.0f samples/s", secs, (double)n / (secs > 0 ? secs : 1e-9));
  printf("%s\n", line);
  fflush(stdout);
  if (dist_size() > 1 && !trun_agree_params(r)) return EXIT_SCRIPT;
  bool best = score > r->best;
  if (best) r->best = score, r->best_epoch = r->epoch, r->stalled = 0;
  else r->stalled++;
  trun_log_sync(r);
  if (r->log_failed) return EXIT_SCRIPT;
  /* A checkpoint that cannot be written stops the run: training on
   * without one would waste what the user asked to keep. */
  if (t->save && !trun_save(r, t->save, true)) return EXIT_SCRIPT;
  if (t->keep_best && best) {
    char path[4096];
    snprintf(path, sizeof path, "%s.best", t->save);
    if (!trun_save(r, path, true)) return EXIT_SCRIPT;
  }
  if (r->c.patience && r->stalled >= r->c.patience) {
    trun_say_early_stop(r);
    *stop = true;
  }
  return 0;
}

/* A run stopped by a signal after a step: said, and saved when asked.
 * 128 + the signal says "stopped, and saved if asked"; a checkpoint that
 * could not be written is an error. */
static int interrupted(Run *r, bool tty) {
  if (tty) fputc('\n', stderr);
  if (!r->quiet)
    fprintf(stderr, "netrun: interrupted at epoch %lld, step %lld\n", (long long)r->epoch + 1, (long long)r->step);
  if (dist_size() > 1) trun_average_states(r);
  return r->t->save && !trun_save(r, r->t->save, false) ? EXIT_SCRIPT : 128 + trun_stop_sig(r);
}

/* The training loop of cmd_train. */
static int train(TrainArgs *t) {
  char err[4200];
  Run r;
  int status = EXIT_SCRIPT;
  bool ok = trun_setup(&r, t, true) && (!t->resume || trun_restore(&r, t->resume, true)) &&
            (!t->weights || trun_restore(&r, t->weights, false));
  if (dist_size() > 1 && trun_agree_start(&r, ok, "trains")) trun_sync_model(&r);
  if (!ok || trun_failure_agreed) goto out;
  if (t->log && !(r.logging = file_log_open(&r.log, t->log, r.epoch || r.step, err, sizeof err))) {
    diag_error(&r.ld.diag, SPAN_NONE, "%s: %s", t->log, err);
    goto out;
  }
  signal(SIGINT, on_stop);
  signal(SIGTERM, on_stop);
  bool tty = isatty(2) && !r.quiet;   /* only rank 0 shows progress */
  int64_t steps_per_epoch = trun_epoch_steps(&r);
  double start = trun_now();
  int64_t run_samples = 0;
  trun_say_start(&r, steps_per_epoch);
  status = 0;
  bool stop = false;
  while (r.epoch < r.c.epochs && status == 0 && !stop) {
    double epoch_start = trun_now();
    int64_t n = 0;
    status = run_epoch(&r, steps_per_epoch, tty, epoch_start, &n);
    run_samples += n;
    if (status) break;
    if (trun_stop_sig(&r)) {
      status = interrupted(&r, tty);
      break;
    }
    status = end_epoch(&r, epoch_start, n, tty, &stop);
  }
  if (status == 0) {
    trun_say_summary(&r, trun_now() - start, run_samples);
    if (r.log_failed) status = EXIT_SCRIPT;
  }
out:
  trun_teardown(&r);
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
  if (trun_stop_signal) exec_interrupt_reset();
  /* A failure the other ranks did not see ends them (they may wait for
   * this one in a collective): its error is above, mpirun's note follows. */
  if (status && status < 128 && !trun_failure_agreed) dist_abort(status);
  dist_stop();
  return status;
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
 * (the curve so far is printed, status 128 + the signal). */
static int sweep(Run *r) {
  LrSweep *s = &r->t->sweep;
  s->pts = mem_alloc(NULL, sizeof *s->pts * (size_t)s->steps);
  int64_t per_epoch = trun_epoch_steps(r);
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
                s->pts[s->n - 1].lr, trun_loss_str(s->pts[s->n - 1].smooth, 4).s);
    }
    data_batcher_free(&b);
    r->epoch++;
  }
  if (tty) fputc('\n', stderr);
  return status ? status : trun_stop_signal ? 128 + trun_stop_signal : 0;
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
  bool ok = trun_setup(&r, t, true) && (!t->weights || trun_restore(&r, t->weights, false));
  t->sweep.model = t->file;
  if (ok) {
    r.warned = true;
    fprintf(stderr, "lr-find %s: %s, %lld steps of %lld, lr from %g to %g\n", t->file, r.c.optimizer,
            (long long)t->sweep.steps, (long long)r.c.batch, t->sweep.start, t->sweep.end);
    status = sweep(&r);
  }
  if (ok && t->sweep.n && (!status || trun_stop_signal)) {
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
  trun_teardown(&r);
  return status;
}

int trainer_lr_find(TrainArgs *t) {
  int rc = lr_find(t);
  if (trun_stop_signal) exec_interrupt_reset();   /* the sweep said how a signal ended it (as cmd_train) */
  return rc;
}
