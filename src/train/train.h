/* train.h — the train block: its keys (one table), the configuration they
 * make with the command line's overrides, and the training program built
 * from it.  The verbs that run it (`netrun train`, `eval`, `predict`,
 * `lr-find`) are trainer.h.
 *
 * A script names what training needs in a configuration block (see
 * netrun-lang(5), "TRAINING"):
 *
 *   train {
 *     data      = "fashion-mnist"     # the dataset
 *     feed      = [x, y]              # the inputs its columns feed, in order
 *     loss      = loss                # the scalar to minimize
 *     metric    = logits              # accuracy: argmax(logits) against the label
 *     optimizer = sgd                 # sgd, momentum, adam, adamw or rmsprop
 *     lr        = 0.1
 *     epochs    = 5
 *     batch     = 128
 *     no_decay  = ["*.b"]             # parameter groups (glob patterns over
 *     lr_mult   = ["embed.*: 0.1"]    #   scoped names): no decay, lr x 0.1
 *   }
 *
 * The training program is the script's program with its backward appended
 * (bwd_append), an optional clip_by_global_norm of the gradients, and
 * one optimizer op per parameter, all in block 0; the optimizer state
 * (velocities, moments) are variables initialized by the startup block. */
#ifndef NETRUN_TRAIN_H
#define NETRUN_TRAIN_H

#include "autodiff/backward.h"

typedef struct TrainConfig {
  const char *data;           /* dataset spec */
  const char *eval;           /* the split evaluated each epoch, or "none" */
  const char *const *feed;    /* inputs fed by the dataset's columns */
  int nfeed;
  const char *loss;
  const char *metric;         /* NULL: no accuracy */
  const char *label;          /* the input holding the labels (default: the last fed) */
  const char *label_column;   /* CSV: the column holding the labels */
  const char *const *labels;  /* CSV: label = [...], the target columns */
  int nlabels;
  const char *const *columns; /* CSV: columns = [...], the input's columns */
  int ncolumns;
  const char *val;            /* a validation data file, or NULL */
  double val_split;           /* the fraction of the training data held out (0: none) */
  int64_t patience;           /* epochs without a better score before stopping (0: never) */
  const char *monitor;        /* the score patience and --keep-best watch: "val_loss",
                                 "val_accuracy"; NULL: the accuracy with a metric, else the loss */
  const char *optimizer;
  const char *schedule;       /* constant, step, cosine */
  double lr, momentum, beta1, beta2, epsilon, rho, weight_decay, clip_norm, gamma, warmup;
  int64_t epochs, batch, step_size, log_every, limit;
  int64_t accumulate;         /* batches whose gradients make one update (1: each its own) */
  int64_t context;            /* text data: bytes per window (0: not text) */
  const double *mean, *std;   /* image folders: per-channel normalization (NULL: none) */
  int nmean, nstd;
  bool flip;                  /* image folders, training: random horizontal flips */
  int64_t crop_pad;           /* image folders, training: random crops with this padding (0: none) */
  bool nesterov, shuffle;
  const char *const *no_decay; /* parameter groups: glob patterns of parameters without weight decay */
  int nno_decay;
  const char **mult_pattern;  /* lr_mult = ["PATTERN: FACTOR", ...], in order: the first match counts */
  double *mult;
  int nmult;
  bool overlap;               /* data parallel: allreduce_start/wait, not allreduce */
  double bucket_mb;           /* data parallel: megabytes of gradients per allreduce */
  int ranks;                  /* data parallel: the ranks training (1: no allreduce) */
} TrainConfig;

/* Command-line overrides (negative / NULL: not given), and the settings a
 * resumed run keeps from its checkpoint (train --resume: `kept` says
 * which of the fields came from the checkpoint `resumed`). */
typedef struct TrainOverrides {
  int64_t epochs, batch, limit, accumulate;
  double lr;
  const char *optimizer, *data, *schedule;
  const char *resumed;
  unsigned kept;
} TrainOverrides;
enum {
  TRAIN_KEPT_EPOCHS = 1 << 0, TRAIN_KEPT_BATCH = 1 << 1, TRAIN_KEPT_ACCUMULATE = 1 << 2, TRAIN_KEPT_LR = 1 << 3,
  TRAIN_KEPT_OPTIMIZER = 1 << 4, TRAIN_KEPT_DATA = 1 << 5, TRAIN_KEPT_SCHEDULE = 1 << 6,
};

/* Reads the script's train block, applies the overrides, and checks it;
 * errors point at the setting.  Says (on stderr) which settings an override
 * replaced. */
bool train_config(Program *p, const TrainOverrides *o, TrainConfig *c, bool quiet);

/* The optimizers a train block may name, and the same as a phrase. */
bool train_optimizer_known(const char *name);
#define TRAIN_OPTIMIZERS "sgd, momentum, adam, adamw or rmsprop"

/* The variable the trainer writes the learning rate into each step. */
#define TRAIN_LR_VAR NAME_LR
/* On N > 1 ranks: the variable it writes this rank's share of the step's
 * examples into, which the allreduce ops weigh its gradients by. */
#define TRAIN_WEIGHT_VAR "rank_weight@DIST"
/* Accumulating: minus the examples of the batch whose gradients a weight's
 * gradient sums in place (sum_in_place), set by the trainer each step. */
#define TRAIN_ACC_RATE_VAR "accumulate_rate@ACC"

/* Appends the backward, the clipping and the optimizer ops (with
 * c->ranks > 1, the allreduce of the gradients before them: rewrite.h),
 * and marks the program's phases (p->phase, program.h): forward,
 * backward, allreduce, update.  With c->accumulate > 1 no rewrite crosses
 * the update's start, so the gradients are whole values the trainer can
 * add up between the backward and the update, and on N ranks the
 * allreduce is one blocking phase of its own, run once per update. */
bool train_program(Program *p, const TrainConfig *c, BackwardResult *bw);

/* The variables the trainer reads after it runs a part of the training
 * program, which the memory plan keeps (exec_use_plan): the loss, the
 * metric and each gradient of bw (NULL: none yet).  *n of them; mem_free
 * the array. */
const char **train_plan_keep(const Program *p, const TrainConfig *c, const BackwardResult *bw, int *n);

/* The train block's key i (NULL past the last) and what it does, with its
 * default (*doc): for the language server's hover and completion. */
const char *train_key(int i, const char **doc);

#endif
