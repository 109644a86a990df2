/* lrfind.h — `netrun lr-find`, the learning-rate finder (fastai's and
 * Lightning's): the sweep's learning rates, the curve it records, the lr it
 * suggests, and the curve printed and plotted.  The training steps
 * themselves run in loop.c (trainer_lr_find), beside the training loop.
 *
 * The sweep: step i of N (0-based) trains with lr_i = start (end / start)^(i / (N - 1)),
 * an exponential sweep from start to end; the smoothed loss is the
 * trainer's moving average (0.98, debiased); the sweep stops early after
 * the step whose smoothed loss exceeds 4 times the best so far, or whose
 * loss is not finite. */
#ifndef NETRUN_LRFIND_H
#define NETRUN_LRFIND_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define LRF_MAX_STEPS 1000000   /* points kept: 24 bytes each */

typedef struct LrPoint {
  double lr, loss, smooth;
} LrPoint;

typedef enum LrFormat { LRF_TEXT, LRF_CSV, LRF_JSON } LrFormat;

typedef struct LrSweep {
  const char *model;        /* the script, as named on the command line */
  double start, end;
  int64_t steps;            /* asked for: 2 .. LRF_MAX_STEPS */
  LrPoint *pts;             /* the steps run (mem_alloc'd, steps of them) */
  int64_t n;
  char stop[160];           /* why it stopped early, or "" */
} LrSweep;

/* The learning rate of step i (0-based). */
double lrf_rate(const LrSweep *s, int64_t i);

/* The suggestion: the step of the steepest descent of the smoothed loss
 * (its most negative central difference, past the first tenth of the
 * steps and before the last), and the step of the smallest smoothed loss;
 * -1 when there is none (fewer than 3 steps; a loss that never falls). */
typedef struct LrSuggestion {
  int64_t steepest, minimum;
} LrSuggestion;
LrSuggestion lrf_suggest(const LrSweep *s);

/* The curve and the suggestion in format fmt on f (text: a table and the
 * suggestion; csv: the table; json: one document with both). */
void lrf_print(FILE *f, const LrSweep *s, LrFormat fmt);
/* The suggestion as one line ("suggested lr ..."), for stderr beside csv. */
void lrf_say_suggestion(FILE *f, const LrSweep *s);
/* The curve as SVG (plot.c) into path, atomically; false once the
 * failure is reported. */
bool lrf_plot(const LrSweep *s, const char *path);

#endif
