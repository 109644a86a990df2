/* trainrun.h — what the trainer's files share (internal to src/train):
 * one run's state and the functions each file gives the others.  The
 * trainer is
 *   trainer.c   a run's set-up: the script, its data, the feeds; evaluation
 *               and `netrun eval`
 *   loop.c      the training loop (an epoch, its end, a step) and lr-find's
 *               sweep
 *   progress.c  what a run says: progress lines, the log, the summary
 *   save.c      checkpoints: saving and resuming
 *   ranks.c     data-parallel training: what the ranks agree on
 *   predict.c   `netrun predict` and its output
 * Each function's comment is at its definition. */
#ifndef NETRUN_TRAINRUN_H
#define NETRUN_TRAINRUN_H

#include "train/lrfind.h"
#include "front/run.h"
#include "train/train.h"

struct TrainArgs;   /* trainer.h: the trainer's API includes this header's users, not the reverse */

#include "base/file.h"
#include "io/data.h"
#include "io/report.h"

#include <signal.h>

/* A number as text. */
typedef struct Num {
  char s[32];
} Num;

/* One run of train, eval, predict or lr-find: the program, its executor,
 * its data and where the loop is. */
typedef struct Run {
  struct TrainArgs *t;
  TrainConfig c;
  Session ld;
  Program *p;
  BackwardResult bw;
  int nforward;                 /* block 0's forward ops */
  int backward_end;             /* training: where the backward ends (the allreduce's
                                   or the update's start: p->phase) */
  void **acc;                   /* accumulate > 1: per gradient (bw.pairs), the sum over
                                   the update's batches of examples x gradient */
  int64_t acc_mine, acc_all;    /* the examples summed so far: this rank's, every rank's */
  bool *acc_in_place;           /* per gradient: summed where it stands by the backward
                                   (train.c's sum_in_place), so without an acc buffer */
  Tensor *acc_rate;             /* TRAIN_ACC_RATE_VAR: minus this batch's examples */
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
  Confusion *confusion;         /* eval --confusion: counted by trun_correct() */
} Run;

/* The result of one step's forward pass: its loss, the correct predictions
 * and the examples (on N ranks, summed over them by trun_agree_step). */
typedef struct Step {
  double loss;
  int64_t hits, n;
} Step;

/* ---- trainer.c: a run's set-up, data and evaluation ---- */
bool trun_setup(Run *r, struct TrainArgs *t, bool training);
/* eval and predict: false, with the error reported, when a parameter's
 * initial value is drawn at random and neither --weights nor --init says
 * which values to use. */
bool trun_weights_given(Run *r);
void trun_teardown(Run *r);
uint64_t trun_program_hash(const Program *p);
const char *trun_mode_input(const Program *p);
bool trun_feed_mode(Run *r, bool training);
bool trun_feed_batch(Run *r, const Dataset *ds, Batch *b, bool training);
int64_t trun_predicted(const Tensor *m, int64_t i, int64_t rows);
int64_t trun_predictions(const Tensor *m, int64_t rows);
int64_t trun_correct(Run *r);
double trun_accuracy(const Run *r, int64_t hits, int64_t n);
double trun_loss_value(Run *r);
bool trun_evaluate(Run *r, const Dataset *ds, double *loss, double *acc);

/* ---- loop.c: the signal that stops a run, and the clock ---- */
extern volatile sig_atomic_t trun_stop_signal;
double trun_now(void);

/* ---- progress.c: numbers as text, the log, what a run says ---- */
Num trun_shortest_as(double x, bool f32);
Num trun_shortest(double x);
Num trun_loss_str(double x, int digits);
int trun_bits_per_char(const Run *r, double loss, char *out, size_t n);
Num trun_jnum(double x);
const char *trun_jstr(const char *s, char *buf, size_t n);
void trun_log_line(Run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void trun_log_sync(Run *r);
void trun_say_start(const Run *r, int64_t steps);
void trun_say_early_stop(const Run *r);
bool trun_watches_accuracy(const Run *r);
void trun_patience_text(const Run *r, char *line, size_t size, int *k);
void trun_say_allreduce(const Run *r, double secs);
void trun_progress(Run *r, double l, double smooth, int64_t steps_per_epoch, double secs, int64_t n, bool tty);
int trun_epoch_text(Run *r, double tl, double secs, char *line, size_t size);
void trun_epoch_eval_text(Run *r, const char *name, double el, double ea, char *line, size_t size, int *k);
void trun_say_summary(Run *r, double secs, int64_t n);

/* ---- save.c: checkpoints ---- */
bool trun_save(Run *r, const char *path, bool quiet);
bool trun_restore(Run *r, const char *path, bool state);
bool trun_resume_settings(Run *r, TrainOverrides *o);

/* ---- ranks.c: data-parallel runs (dist.h) ---- */
extern bool trun_failure_agreed;
int64_t trun_epoch_steps(const Run *r);
bool trun_agree_start(Run *r, bool ok, const char *what);
void trun_sync_model(Run *r);
bool trun_agree_step(Run *r, bool ok, Step *st);
int trun_stop_sig(const Run *r);
void trun_average_states(Run *r);
Tensor **trun_save_states(Run *r);
void trun_restore_states(Run *r, Tensor **saved);
void trun_reduce_confusion(Confusion *c);
bool trun_agree_params(Run *r);
bool trun_ranks_start(void);
int trun_ranks_stop(int status);

#endif
