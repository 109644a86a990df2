/* save.c — a training run's checkpoints (trainrun.h): what one holds
 * (parameters, optimizer state, the generators, the run's position and
 * settings) and resuming from one, every field checked against what it
 * means; --weights loads only the model. */
#include "train/trainer.h"
#include "train/trainrun.h"

#include "exec/dist.h"
#include "io/weights.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

/* ---- checkpoints -------------------------------------------------------------------- */

static const char *const shuffle_keys[] = {"shuffle0", "shuffle1", "shuffle2", "shuffle3"};
static const char *const state_keys[] = {"optimizer", "lr", "batch", "epochs", "schedule", "data"};

/* A parameter-group setting as a checkpoint keeps it: its entries joined
 * by ", " ("*.b, *.gamma"; "embed.*: 0.1"), "" when not set. */
static void group_text(const TrainConfig *c, bool mult, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < (mult ? c->nmult : c->nno_decay) && at < n; i++) {
    int k = mult ? snprintf(buf + at, n - at, "%s%s: %s", i ? ", " : "", c->mult_pattern[i], trun_shortest(c->mult[i]).s)
                 : snprintf(buf + at, n - at, "%s%s", i ? ", " : "", c->no_decay[i]);
    at += k > 0 ? (size_t)k : 0;
  }
}
static const char *const group_keys[] = {"no_decay", "lr_mult"};

bool trun_save(Run *r, const char *path, bool quiet) {
  if (r->quiet) return true;   /* rank 0 alone writes checkpoints */
  Checkpoint c;
  ckpt_init(&c);
  c.program_hash = r->hash;
  c.epoch = (uint64_t)r->epoch;
  c.step = (uint64_t)r->step;
  c.samples = (uint64_t)r->samples;
  c.rng = *exec_rng(r->ex);
  ckpt_setf(&c, "optimizer", "%s", r->c.optimizer);
  ckpt_setf(&c, "lr", "%s", trun_shortest(r->c.lr).s);
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
  ckpt_setf(&c, "best", "%s", trun_shortest(r->best).s);
  if (r->c.patience) {   /* patience's count */
    ckpt_setf(&c, "best_epoch", "%lld", (long long)r->best_epoch);
    ckpt_setf(&c, "stalled", "%lld", (long long)r->stalled);
  }
  ckpt_setf(&c, "loss_ema", "%s", trun_shortest(r->ema).s);
  ckpt_setf(&c, "loss_ema_n", "%lld", (long long)r->ema_n);
  if (r->step_in_epoch) {   /* stopped within an epoch: its sums so far */
    ckpt_setf(&c, "epoch_loss", "%s", trun_shortest(r->epoch_loss).s);
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

/* The ranks a checkpoint was saved by (1 before they were recorded).
 * Another number of ranks resumes at an epoch's end only: in the middle of
 * one, the shards that were done are not those another number would cut. */
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
  int64_t steps_per_epoch = trun_epoch_steps(r);
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
bool trun_restore(Run *r, const char *path, bool state) {
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
      if (k == 1) was = (was_lr = trun_shortest(strtod(was, NULL))).s;   /* compared as numbers */
      if (k == 0) snprintf(now_s, sizeof now_s, "%s", tc->optimizer);
      else if (k == 1) snprintf(now_s, sizeof now_s, "%s", trun_shortest(tc->lr).s);
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
