/* trainer.h — the training loop under the verbs train, eval and predict
 * (trainer.c and the files trainrun.h lists): what one run is given, and the three runs.  The verbs'
 * options (trainverb.c) fill a TrainArgs; the trainer needs nothing of the
 * command line beyond it. */
#ifndef NETRUN_TRAINER_H
#define NETRUN_TRAINER_H

#include "train/lrfind.h"
#include "io/report.h"
#include "front/run.h"
#include "train/train.h"

typedef struct TrainArgs {
  const char *file;        /* the script */
  ExecOptions opt;         /* the shared run options (--seed, --check-nan, --precision ...) */
  RunFeeds feeds;      /* --set and --feed */
  TrainOverrides o;
  const char *save, *resume, *log, *weights;
  bool weights_partial;    /* --weights-partial: load the values the file has, say which it lacks */
  bool keep_best;
  bool keep_going;         /* --keep-going: train on past a NaN or infinite loss */
  bool predicting;         /* predict: the script needs no loss */
  const char *output;      /* predict --output NAME: the first */
  const char *outputs[REPORT_MAX_OUTPUTS];   /* every --output, in order */
  int noutputs;
  ReportFormat format;     /* predict --format, eval --format (text or json) */
  const char *out;         /* predict -o FILE */
  bool confusion;          /* eval --confusion */
  LrSweep sweep;           /* lr-find: --start, --end, --steps */
  LrFormat lrf_format;     /* lr-find --format */
  const char *plot;        /* lr-find --plot FILE.svg */
} TrainArgs;

/* The runs of train, eval, predict and lr-find over t; each returns the exit
 * status (diag.h), its errors reported. */
int trainer_train(TrainArgs *t);
int trainer_eval(TrainArgs *t);
int trainer_predict(TrainArgs *t);
int trainer_lr_find(TrainArgs *t);
/* Whether f's --set values give the mode input `training` a value. */
bool trainer_sets_mode(const RunFeeds *f);

#endif
