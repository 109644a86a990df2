/* trainverb.c — the verbs train, eval, predict and lr-find: their options (each
 * verb's own group of cli.h's table, and the run options) into a
 * TrainArgs, and the run (trainer.c); and dump --train, the training
 * program the trainer runs. */
#include "cli/cli.h"
#include "cli/cmd.h"
#include "cli/option.h"
#include "train/trainer.h"

#include <stdlib.h>
#include <string.h>

/* lr-find's own options. */
static int apply_lrfind(const OptionParser *p, TrainArgs *t) {
  static const char *const formats[] = {"text", "csv", "json"};
  switch (p->opt->id) {
  case O_START: return option_real(p, false, &t->sweep.start) ? 0 : EXIT_USAGE;
  case O_END: return option_real(p, false, &t->sweep.end) ? 0 : EXIT_USAGE;
  case O_STEPS:
    if (!option_int(p, 2, &t->sweep.steps)) return EXIT_USAGE;
    return t->sweep.steps > LRF_MAX_STEPS ? option_bad(p) : 0;
  case O_LRF_FORMAT:
    for (int k = 0; k < 3; k++)
      if (strcmp(p->value, formats[k]) == 0) return t->lrf_format = (LrFormat)k, 0;
    return diag_usage("unknown format '%s' (expected %s)", p->value, p->opt->needs);
  case O_PLOT: t->plot = p->value; break;
  }
  return 0;
}

/* Stores one of the trainer's options in the TrainArgs ctx. */
static int apply_train(const OptionParser *p, void *ctx) {
  TrainArgs *t = ctx;
  switch (p->opt->id) {
  case O_EPOCHS: return option_int(p, 1, &t->o.epochs) ? 0 : EXIT_USAGE;
  case O_BATCH: return option_int(p, 1, &t->o.batch) ? 0 : EXIT_USAGE;
  case O_ACCUMULATE: return option_int(p, 1, &t->o.accumulate) ? 0 : EXIT_USAGE;
  case O_LIMIT: return option_int(p, 1, &t->o.limit) ? 0 : EXIT_USAGE;
  case O_LR: return option_real(p, false, &t->o.lr) ? 0 : EXIT_USAGE;
  case O_OPTIMIZER:
    if (!train_optimizer_known(p->value))
      return diag_usage("unknown optimizer '%s' (expected " TRAIN_OPTIMIZERS ")", p->value);
    t->o.optimizer = p->value;
    break;
  case O_DATA: t->o.data = p->value; break;
  case O_SAVE: t->save = p->value; break;
  case O_NO_SAVE: t->no_save = true; break;
  case O_RESUME: t->resume = p->value; break;
  case O_LOG: t->log = p->value; break;
  case O_KEEP_BEST: t->keep_best = true; break;
  case O_KEEP_GOING: t->keep_going = true; break;
  case O_OUTPUT:
    if (t->noutputs == REPORT_MAX_OUTPUTS) return diag_usage("--output: at most %d values", REPORT_MAX_OUTPUTS);
    for (int i = 0; i < t->noutputs; i++)   /* a .npz member and a JSON key each */
      if (strcmp(t->outputs[i], p->value) == 0) return diag_usage("--output %s is given twice", p->value);
    if (!t->output) t->output = p->value;
    t->outputs[t->noutputs++] = p->value;
    break;
  case O_REPORT_FORMAT:
    if (!report_format(p->value, &t->format)) return diag_usage("unknown format '%s' (expected %s)", p->value, p->opt->needs);
    break;
  case O_CONFUSION: t->confusion = true; break;
  case O_INIT: t->init = true; break;
  default: return apply_lrfind(p, t);
  }
  return 0;
}

/* The options of train, eval, predict or lr-find (verb: its group,
 * OPT_TRAIN ...) and the run options into t; a holds the run options t
 * points into. */
static int parse_train(int argc, char **argv, Args *a, TrainArgs *t, unsigned verb) {
  memset(t, 0, sizeof *t);
  t->o.epochs = t->o.batch = t->o.limit = t->o.accumulate = -1;
  t->o.lr = -1;
  t->sweep = (LrSweep){.start = 1e-7, .end = 10, .steps = 100};
  bool training = verb & (OPT_TRAIN | OPT_LR_FIND);
  CliOwn own = {apply_train, t};
  int rc = cli_parse_own(argc, argv, a, OPT_RUN | OPT_WEIGHTS | verb, &own);
  t->file = a->file;
  t->opt = a->opt;
  t->out = a->out;
  t->weights = a->weights;
  t->weights_partial = a->weights_partial;
  t->seed_given = a->seed_given;
  t->feeds = (RunFeeds){a->sets, a->feeds, a->nsets, a->nfeeds};
  if (!rc && t->save && t->no_save) rc = diag_usage("%s", "--save PATH writes checkpoints, --no-save none: not both");
  if (!rc && t->no_save && !t->resume)
    rc = diag_usage("%s", "--no-save is for --resume (which otherwise writes back to its checkpoint); without "
                    "--save nothing is saved");
  /* A resumed run writes back to the checkpoint it resumed (atomically,
   * as every save), unless --save names another or --no-save none. */
  if (!rc && t->resume && !t->save && !t->no_save) t->save = t->resume, t->save_back = true;
  if (!rc && t->keep_best && !t->save) rc = diag_usage("%s", "--keep-best needs --save PATH");
  if (!rc && t->weights && t->init)
    rc = diag_usage("%s", "--weights gives trained values, --init the initial ones: not both");
  if (!rc && t->weights && t->resume)
    rc = diag_usage("%s", "--weights starts a run from given weights, --resume continues one: not both");
  if (!rc && verb == OPT_EVAL && (t->format == REPORT_CSV || t->format == REPORT_NPY))
    rc = diag_usage("unknown format '%s' (expected text or json)", t->format == REPORT_CSV ? "csv" : "npy");
  if (!rc && training && trainer_sets_mode(&t->feeds))
    rc = diag_usage("%s", "--set training=...: train feeds 'training' itself (true in its steps, false when it evaluates)");
  if (!rc && verb == OPT_LR_FIND && !(t->sweep.start < t->sweep.end))
    rc = diag_usage("--start (%g) must be below --end (%g)", t->sweep.start, t->sweep.end);
  return rc;
}

/* predict's options checked together; 0 or EXIT_USAGE. */
static int predict_check(const TrainArgs *t) {
  if (!t->o.data && (t->o.batch >= 0 || t->o.limit >= 0))
    return diag_usage("--%s needs --data SPEC (predict over a dataset's examples)", t->o.batch >= 0 ? "batch" : "limit");
  if (t->format == REPORT_NPY && (!t->out || strcmp(t->out, "-") == 0))
    return diag_usage("%s", "--format npy needs -o FILE (a .npy file, or .npz for several --output values)");
  return 0;
}

/* A verb of the trainer: its options (verb: its group), checked, and its
 * run. */
static int train_verb(int argc, char **argv, unsigned verb, int (*run)(TrainArgs *)) {
  Args a;
  TrainArgs t;
  int rc = parse_train(argc, argv, &a, &t, verb);
  if (!rc && verb == OPT_PREDICT) rc = predict_check(&t);
  return rc ? rc : run(&t);
}

int cmd_train(int argc, char **argv) { return train_verb(argc, argv, OPT_TRAIN, trainer_train); }
int cmd_eval(int argc, char **argv) { return train_verb(argc, argv, OPT_EVAL, trainer_eval); }
/* predict: the forward pass on fed inputs (or --data) with trained
 * weights (trainer_predict). */
int cmd_predict(int argc, char **argv) { return train_verb(argc, argv, OPT_PREDICT, trainer_predict); }
int cmd_lr_find(int argc, char **argv) { return train_verb(argc, argv, OPT_LR_FIND, trainer_lr_find); }

/* dump --train: the training program the trainer runs. */
int cmd_dump_train(const Args *a) {
  Session ld;
  int status = EXIT_SCRIPT;
  TrainConfig c;
  BackwardResult bw;
  bool loaded = session_load(&ld, a->file);   /* counts its errors */
  bool configured = loaded && train_config(ld.prog, NULL, &c, true);
  if (configured && a->ranks > 1) c.ranks = (int)(a->ranks < 1 << 20 ? a->ranks : 1 << 20);
  if (configured && train_program(ld.prog, &c, &bw)) {
    cli_rewrite_dumped(ld.prog, a, &bw.first_grad_op, true);   /* the trainer's mark: the forward's end */
    OutFile o;
    if (file_out_open(&o, a->out)) {
      dump_program(o.f, ld.prog, &a->dump);
      if (file_out_close(&o)) status = 0;
    }
  }
  if (loaded) diag_finish(&ld.diag);
  session_free(&ld);
  return status;
}
