/* progress.c — what a training run says (trainrun.h): numbers as the
 * progress lines show them, the progress line of each step, the epoch
 * line's parts, the run's first and last lines, and the --log file of
 * JSON events. */
#include "train/trainer.h"
#include "train/trainrun.h"

#include "exec/dist.h"

#include <math.h>
#include <stdlib.h>
#include <sys/resource.h>

/* x in the fewest digits that read back as x: 0.1, not 0.10000000000000001;
 * with f32, as the float x is (the learning rate the optimizers read). */
Num trun_shortest_as(double x, bool f32) {
  Num n;
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(n.s, sizeof n.s, "%.*g", prec, x);
    if (f32 ? (double)strtof(n.s, NULL) == x : strtod(n.s, NULL) == x) break;
  }
  return n;
}
Num trun_shortest(double x) { return trun_shortest_as(x, false); }

/* A loss as the progress lines show it: `digits` decimals, or in %g style
 * when it is huge (1.235e+30, not thirty-one digits and four decimals). */
Num trun_loss_str(double x, int digits) {
  Num n;
  if (isnan(x)) snprintf(n.s, sizeof n.s, "nan");   /* not "-nan" */
  else snprintf(n.s, sizeof n.s, fabs(x) < 1e6 ? "%.*f" : "%.*g", digits, x);
  return n;
}

/* Text data: a loss in nats per byte, said in bits per character too. */
int trun_bits_per_char(const Run *r, double loss, char *out, size_t n) {
  if (r->c.context <= 0) return 0;
  return snprintf(out, n, " (%s bits/char)", trun_loss_str(loss / log(2.0), 4).s);
}

/* ---- progress ----------------------------------------------------------------------- */

void trun_log_line(Run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void trun_log_line(Run *r, const char *fmt, ...) {
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
void trun_log_sync(Run *r) {
  char err[4200];
  if (r->logging && !r->log_failed && !file_log_sync(&r->log, err, sizeof err)) {
    diag_error(&r->ld.diag, SPAN_NONE, "%s: %s", r->log.path, err);
    r->log_failed = true;
  }
}

/* A JSON number: non-finite values are written null. */
Num trun_jnum(double x) {
  Num j;
  if (isfinite(x)) snprintf(j.s, sizeof j.s, "%.9g", x);
  else snprintf(j.s, sizeof j.s, "null");
  return j;
}

/* A JSON string's contents: s with quotes, backslashes and control
 * characters escaped (an eval file's name), cut to fit. */
const char *trun_jstr(const char *s, char *buf, size_t n) {
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

/* The run's first line: the data, the steps (on N ranks, of N times the
 * batch), the optimizer. */
void trun_say_start(const Run *r, int64_t steps) {
  char ranks[64] = "";
  char val[128] = "";
  if (dist_size() > 1) snprintf(ranks, sizeof ranks, "%d x ", dist_size());
  /* the examples validated and evaluated, after --limit: " (30 more to validate, 1000 to evaluate)" */
  if (r->has_val && r->has_test)
    snprintf(val, sizeof val, " (%lld more to validate, %lld to evaluate)", (long long)r->val.n, (long long)r->test.n);
  else if (r->has_val) snprintf(val, sizeof val, " (%lld more to validate)", (long long)r->val.n);
  else if (r->has_test) snprintf(val, sizeof val, " (%lld to evaluate)", (long long)r->test.n);
  if (!r->quiet)
    fprintf(stderr, "training %s: %lld example%s%s, %lld step%s of %s%lld per epoch, %s lr %g, %lld epoch%s\n",
            strcmp(r->t->file, "-") == 0 ? "<stdin>" : r->t->file, (long long)r->train.n, PLURAL(r->train.n), val,
            (long long)steps, PLURAL(steps), ranks, (long long)r->c.batch, r->c.optimizer, r->c.lr,
            (long long)r->c.epochs, PLURAL(r->c.epochs));
}

/* Whether patience and --keep-best watch the accuracy of the evaluated
 * data (monitor = "val_accuracy", or by default with a metric), not its
 * loss. */
bool trun_watches_accuracy(const Run *r) {
  return r->c.monitor ? strcmp(r->c.monitor, "val_accuracy") == 0 : r->metric_var != NULL;
}

/* patience's part of the epoch line, when the block sets patience: what
 * it watches and the epochs without a better score so far, of how many
 * (" | patience: val acc, 1 of 3 epochs without a better one"). */
void trun_patience_text(const Run *r, char *line, size_t size, int *k) {
  if (!r->c.patience || (!r->has_val && !r->has_test) || (size_t)*k >= size) return;
  *k += snprintf(line + *k, size - (size_t)*k, " | patience: %s %s, %lld of %lld epochs without a better one",
                 r->has_val ? "val" : r->eval_name, trun_watches_accuracy(r) ? "acc" : "loss", (long long)r->stalled,
                 (long long)r->c.patience);
}

/* patience: why the run stops before its last epoch. */
void trun_say_early_stop(const Run *r) {
  const char *what = r->has_val ? "val" : r->eval_name;
  if (r->quiet) return;
  if (trun_watches_accuracy(r))
    printf("stopping early after epoch %lld: %s accuracy has not improved for %lld epoch%s (best %.4f, epoch %lld)\n",
           (long long)r->epoch, what, (long long)r->stalled, PLURAL(r->stalled), r->best, (long long)r->best_epoch);
  else
    printf("stopping early after epoch %lld: %s loss has not improved for %lld epoch%s (best %s, epoch %lld)\n",
           (long long)r->epoch, what, (long long)r->stalled, PLURAL(r->stalled), trun_loss_str(-r->best, 4).s,
           (long long)r->best_epoch);
  fflush(stdout);
}

/* The run's last line on N ranks: rank 0's time in the collectives (of a
 * run of secs seconds), and overlapped, how much of it waiting and how
 * long the sums were in flight while the backward ran. */
void trun_say_allreduce(const Run *r, double secs) {
  printf("allreduce on %d ranks: %.2f s in %lld calls on rank 0 (%.0f%% of the run), ", dist_size(),
         dist_reduce_seconds(), (long long)dist_reduce_calls(), 100 * dist_reduce_seconds() / (secs > 0 ? secs : 1e-9));
  if (r->c.overlap)
    printf("%.2f s of it waiting at allreduce_wait; sums in flight for %.2f s of the backward\n", dist_wait_seconds(),
           dist_overlap_seconds());
  else
    printf("none of it overlapped\n");
}

/* After each step: its event in the log; on a terminal, the progress line
 * (redrawn in place: the epoch, the step, the rate, the smoothed loss, the
 * time the epoch has left), else a line every log_every steps.  l: the
 * step's loss; smooth: the moving average; secs: the epoch's time so far,
 * in which this process took n examples. */
void trun_progress(Run *r, double l, double smooth, int64_t steps_per_epoch, double secs, int64_t n, bool tty) {
  double rate = (double)n / (secs > 0 ? secs : 1e-9), lr = (double)tensor_f32(r->lr)[0];
  trun_log_line(r,
                "{\"event\": \"step\", \"epoch\": %lld, \"step\": %lld, \"samples\": %lld, \"loss\": %s, "
                "\"loss_smooth\": %s, \"lr\": %s, \"samples_per_s\": %s}",
                (long long)r->epoch + 1, (long long)r->step, (long long)r->samples, trun_jnum(l).s,
                trun_jnum(smooth).s, trun_shortest_as(lr, true).s, trun_jnum(rate).s);
  if (tty) {
    char eta[32];
    fmt_time((double)(steps_per_epoch - r->step_in_epoch) * secs / (double)(r->step_in_epoch ? r->step_in_epoch : 1),
             eta, sizeof eta);
    fprintf(stderr, "\repoch %lld/%lld  %lld/%lld  %.0f samples/s  loss %s  ETA %s   ", (long long)r->epoch + 1,
            (long long)r->c.epochs, (long long)r->step_in_epoch, (long long)steps_per_epoch, rate,
            trun_loss_str(smooth, 4).s, eta);
  } else if (!r->quiet && r->step % r->c.log_every == 0) {
    fprintf(stderr, "iter %lld  epoch %lld  loss %s  lr %.6g  samples/s %.0f\n", (long long)r->step,
            (long long)r->epoch + 1, trun_loss_str(smooth, 4).s, lr, rate);
  }
}

/* The start of an epoch's line into line[size] (the epoch just ended, its
 * train loss tl and accuracy), its event logged (secs: the epoch's time);
 * the characters written. */
int trun_epoch_text(Run *r, double tl, double secs, char *line, size_t size) {
  double ta = trun_accuracy(r, r->epoch_hits, r->epoch_n);
  int k = snprintf(line, size, "epoch %lld/%lld: train loss %s", (long long)r->epoch, (long long)r->c.epochs,
                   trun_loss_str(tl, 4).s);
  k += trun_bits_per_char(r, tl, line + k, size - (size_t)k);
  if (r->metric_var) k += snprintf(line + k, size - (size_t)k, " acc %.4f", ta);
  trun_log_line(r, "{\"event\": \"epoch\", \"epoch\": %lld, \"step\": %lld, \"train_loss\": %s, \"train_accuracy\": %s, "
                "\"seconds\": %s}", (long long)r->epoch, (long long)r->step, trun_jnum(tl).s,
                trun_jnum(r->metric_var ? ta : (double)NAN).s, trun_jnum(secs).s);
  return k;
}

/* An evaluation's part of the epoch's line: " | NAME loss L acc A"
 * appended at *k, and its event logged. */
void trun_epoch_eval_text(Run *r, const char *name, double el, double ea, char *line, size_t size, int *k) {
  *k += snprintf(line + *k, size - (size_t)*k, " | %s loss %s", name, trun_loss_str(el, 4).s);
  *k += trun_bits_per_char(r, el, line + *k, size - (size_t)*k);
  if (r->metric_var) *k += snprintf(line + *k, size - (size_t)*k, " acc %.4f", ea);
  char js[512];
  trun_log_line(r, "{\"event\": \"eval\", \"epoch\": %lld, \"step\": %lld, \"split\": \"%s\", \"loss\": %s, "
                "\"accuracy\": %s}", (long long)r->epoch, (long long)r->step, trun_jstr(name, js, sizeof js),
                trun_jnum(el).s, trun_jnum(r->metric_var ? ea : (double)NAN).s);
}

/* The run's last lines, when it ran to its end (secs seconds, n examples
 * in this process): epochs, steps, the rate and the best score; the peak
 * memory; on N ranks the time in the collectives; the summary event. */
void trun_say_summary(Run *r, double secs, int64_t n) {
  printf("trained %lld epoch%s (%lld step%s, %lld sample%s) in %.1f s, %.0f samples/s", (long long)r->epoch,
         PLURAL(r->epoch), (long long)r->step, PLURAL(r->step), (long long)r->samples, PLURAL(r->samples), secs,
         (double)n / (secs > 0 ? secs : 1e-9));
  if ((r->has_val || r->has_test) && trun_watches_accuracy(r))
    printf("; best %s accuracy %.4f", r->has_val ? "val" : r->eval_name, r->best);
  else if ((r->has_val || r->has_test) && r->c.monitor)
    printf("; best %s loss %s", r->has_val ? "val" : r->eval_name, trun_loss_str(-r->best, 4).s);
  Memory m = memory(r);
  printf("\npeak memory %s (data %s, model %s)\n", fmt_bytes(m.peak).s, fmt_bytes(m.data).s, fmt_bytes(m.model).s);
  if (dist_size() > 1) trun_say_allreduce(r, secs);
  trun_log_line(r,
                "{\"event\": \"summary\", \"epoch\": %lld, \"step\": %lld, \"samples\": %lld, \"seconds\": %s, "
                "\"peak_memory_bytes\": %.0f, \"data_bytes\": %.0f, \"model_bytes\": %.0f}",
                (long long)r->epoch, (long long)r->step, (long long)r->samples, trun_jnum(secs).s, m.peak, m.data,
                m.model);
}
