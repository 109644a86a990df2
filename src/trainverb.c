/* trainverb.c — the verbs train, eval, predict and lr-find: their options (each
 * verb's own table, then the shared run options of cli.h) into a
 * TrainArgs, and the run (trainer.c); and dump --train, the training
 * program the trainer runs. */
#include "cli.h"
#include "cmd.h"
#include "option.h"
#include "trainer.h"

#include <stdlib.h>
#include <string.h>

enum { T_EPOCHS = 100, T_BATCH, T_LIMIT, T_LR, T_OPTIMIZER, T_DATA, T_SAVE, T_RESUME, T_LOG, T_KEEP_BEST, T_KEEP_GOING,
       T_WEIGHTS, T_WEIGHTS_PARTIAL, T_OUTPUT, T_FORMAT, T_OUT, T_CONFUSION, T_START, T_END, T_STEPS, T_LRF_FORMAT,
       T_PLOT };

/* train's options, then eval's and predict's (each ends in {NULL}). */
static const Option train_options[] = {
    {"--epochs", OPTION_VALUE, "N", "a whole number of at least 1", T_EPOCHS},
    {"--batch", OPTION_VALUE, "N", "a whole number of at least 1", T_BATCH},
    {"--limit", OPTION_VALUE, "N", "a whole number of at least 1", T_LIMIT},
    {"--lr", OPTION_VALUE, "X", "a positive number", T_LR},
    {"--optimizer", OPTION_VALUE, "NAME", "a name: " TRAIN_OPTIMIZERS, T_OPTIMIZER},
    {"--data", OPTION_VALUE, "SPEC", "a SPEC", T_DATA},
    {"--save", OPTION_VALUE, "PATH", "a PATH", T_SAVE},
    {"--resume", OPTION_VALUE, "PATH", "a PATH", T_RESUME},
    {"--log", OPTION_VALUE, "FILE", "a FILE", T_LOG},
    {"--keep-best", OPTION_FLAG, NULL, NULL, T_KEEP_BEST},
    {"--keep-going", OPTION_FLAG, NULL, NULL, T_KEEP_GOING},
    {"--weights", OPTION_VALUE, "PATH", "a PATH", T_WEIGHTS},
    {"--weights-partial", OPTION_FLAG, NULL, NULL, T_WEIGHTS_PARTIAL},
    {NULL, 0, NULL, NULL, 0},
};
static const Option eval_options[] = {
    {"--batch", OPTION_VALUE, "N", "a whole number of at least 1", T_BATCH},
    {"--limit", OPTION_VALUE, "N", "a whole number of at least 1", T_LIMIT},
    {"--data", OPTION_VALUE, "SPEC", "a SPEC", T_DATA},
    {"--weights", OPTION_VALUE, "PATH", "a PATH", T_WEIGHTS},
    {"--weights-partial", OPTION_FLAG, NULL, NULL, T_WEIGHTS_PARTIAL},
    {"--confusion", OPTION_FLAG, NULL, NULL, T_CONFUSION},
    {"--format", OPTION_VALUE, "FMT", "text or json", T_FORMAT},
    {NULL, 0, NULL, NULL, 0},
};
static const Option predict_options[] = {
    {"--batch", OPTION_VALUE, "N", "a whole number of at least 1", T_BATCH},
    {"--limit", OPTION_VALUE, "N", "a whole number of at least 1", T_LIMIT},
    {"--data", OPTION_VALUE, "SPEC", "a SPEC", T_DATA},
    {"--weights", OPTION_VALUE, "PATH", "a PATH", T_WEIGHTS},
    {"--weights-partial", OPTION_FLAG, NULL, NULL, T_WEIGHTS_PARTIAL},
    {"--output", OPTION_VALUE, "NAME", "a NAME", T_OUTPUT},
    {"--format", OPTION_VALUE, "FMT", REPORT_FORMATS, T_FORMAT},
    {"-o", OPTION_VALUE, "FILE", "a file name", T_OUT},
    {NULL, 0, NULL, NULL, 0},
};

static const Option lrfind_options[] = {
    {"--start", OPTION_VALUE, "X", "a positive number", T_START},
    {"--end", OPTION_VALUE, "X", "a positive number", T_END},
    {"--steps", OPTION_VALUE, "N", "a whole number from 2 to 1000000", T_STEPS},
    {"--batch", OPTION_VALUE, "N", "a whole number of at least 1", T_BATCH},
    {"--limit", OPTION_VALUE, "N", "a whole number of at least 1", T_LIMIT},
    {"--optimizer", OPTION_VALUE, "NAME", "a name: " TRAIN_OPTIMIZERS, T_OPTIMIZER},
    {"--data", OPTION_VALUE, "SPEC", "a SPEC", T_DATA},
    {"--weights", OPTION_VALUE, "PATH", "a PATH", T_WEIGHTS},
    {"--weights-partial", OPTION_FLAG, NULL, NULL, T_WEIGHTS_PARTIAL},
    {"--format", OPTION_VALUE, "FMT", "text, csv or json", T_LRF_FORMAT},
    {"-o", OPTION_VALUE, "FILE", "a file name", T_OUT},
    {"--plot", OPTION_VALUE, "FILE", "a file name", T_PLOT},
    {NULL, 0, NULL, NULL, 0},
};

/* lr-find's own options (lrfind_options). */
static int apply_lrfind(const OptionParser *p, TrainArgs *t) {
  static const char *const formats[] = {"text", "csv", "json"};
  switch (p->opt->id) {
  case T_START: return option_real(p, false, &t->sweep.start) ? 0 : EXIT_USAGE;
  case T_END: return option_real(p, false, &t->sweep.end) ? 0 : EXIT_USAGE;
  case T_STEPS:
    if (!option_int(p, 2, &t->sweep.steps)) return EXIT_USAGE;
    return t->sweep.steps > LRF_MAX_STEPS ? option_bad(p) : 0;
  case T_LRF_FORMAT:
    for (int k = 0; k < 3; k++)
      if (strcmp(p->value, formats[k]) == 0) return t->lrf_format = (LrFormat)k, 0;
    return diag_usage("unknown format '%s' (expected %s)", p->value, p->opt->needs);
  case T_PLOT: t->plot = p->value; break;
  }
  return 0;
}

/* Stores one of the trainer's options in the TrainArgs ctx. */
static int apply_train(const OptionParser *p, void *ctx) {
  TrainArgs *t = ctx;
  switch (p->opt->id) {
  case T_EPOCHS: return option_int(p, 1, &t->o.epochs) ? 0 : EXIT_USAGE;
  case T_BATCH: return option_int(p, 1, &t->o.batch) ? 0 : EXIT_USAGE;
  case T_LIMIT: return option_int(p, 1, &t->o.limit) ? 0 : EXIT_USAGE;
  case T_LR: return option_real(p, false, &t->o.lr) ? 0 : EXIT_USAGE;
  case T_OPTIMIZER:
    if (!train_optimizer_known(p->value))
      return diag_usage("unknown optimizer '%s' (expected " TRAIN_OPTIMIZERS ")", p->value);
    t->o.optimizer = p->value;
    break;
  case T_DATA: t->o.data = p->value; break;
  case T_SAVE: t->save = p->value; break;
  case T_RESUME: t->resume = p->value; break;
  case T_LOG: t->log = p->value; break;
  case T_KEEP_BEST: t->keep_best = true; break;
  case T_KEEP_GOING: t->keep_going = true; break;
  case T_WEIGHTS: t->weights = p->value; break;
  case T_WEIGHTS_PARTIAL: t->weights_partial = true; break;
  case T_OUTPUT:
    if (t->noutputs == REPORT_MAX_OUTPUTS) return diag_usage("--output: at most %d values", REPORT_MAX_OUTPUTS);
    if (!t->output) t->output = p->value;
    t->outputs[t->noutputs++] = p->value;
    break;
  case T_FORMAT:
    if (!report_format(p->value, &t->format)) return diag_usage("unknown format '%s' (expected %s)", p->value, p->opt->needs);
    break;
  case T_OUT: t->out = p->value; break;
  case T_CONFUSION: t->confusion = true; break;
  default: return apply_lrfind(p, t);
  }
  return 0;
}

/* The options of train, eval or predict (train_options ...) and the run
 * options into t; a holds the run options t points into. */
static int parse_train(int argc, char **argv, Args *a, TrainArgs *t, const Option *options) {
  memset(t, 0, sizeof *t);
  t->o.epochs = t->o.batch = t->o.limit = -1;
  t->o.lr = -1;
  t->sweep = (LrSweep){.start = 1e-7, .end = 10, .steps = 100};
  bool training = options == train_options || options == lrfind_options;
  int n = 0;
  while (options[n].name) n++;
  CliOwn own = {options, n, apply_train, t};
  int rc = cli_parse_own(argc, argv, a, OPT_RUN, &own);
  t->file = a->file;
  t->opt = a->opt;
  t->feeds = (RunFeeds){a->sets, a->feeds, a->nsets, a->nfeeds};
  if (!rc && t->keep_best && !t->save) rc = diag_usage("%s", "--keep-best needs --save PATH");
  if (!rc && t->weights && t->resume)
    rc = diag_usage("%s", "--weights starts a run from given weights, --resume continues one: not both");
  if (!rc && t->weights_partial && !t->weights) rc = diag_usage("%s", "--weights-partial needs --weights PATH");
  if (!rc && options == eval_options && (t->format == REPORT_CSV || t->format == REPORT_NPY))
    rc = diag_usage("unknown format '%s' (expected text or json)", t->format == REPORT_CSV ? "csv" : "npy");
  if (!rc && training && trainer_sets_mode(&t->feeds))
    rc = diag_usage("%s", "--set training=...: train feeds 'training' itself (true in its steps, false when it evaluates)");
  if (!rc && options == lrfind_options && !(t->sweep.start < t->sweep.end))
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

int cmd_train(int argc, char **argv) {
  Args a;
  TrainArgs t;
  int rc = parse_train(argc, argv, &a, &t, train_options);
  return rc ? rc : trainer_train(&t);
}

int cmd_eval(int argc, char **argv) {
  Args a;
  TrainArgs t;
  int rc = parse_train(argc, argv, &a, &t, eval_options);
  return rc ? rc : trainer_eval(&t);
}

/* predict: the forward pass on fed inputs (or --data) with trained
 * weights (trainer_predict). */
int cmd_predict(int argc, char **argv) {
  Args a;
  TrainArgs t;
  int rc = parse_train(argc, argv, &a, &t, predict_options);
  if (!rc) rc = predict_check(&t);
  return rc ? rc : trainer_predict(&t);
}

int cmd_lr_find(int argc, char **argv) {
  Args a;
  TrainArgs t;
  int rc = parse_train(argc, argv, &a, &t, lrfind_options);
  return rc ? rc : trainer_lr_find(&t);
}

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
    cli_rewrite_dumped(ld.prog, a, &bw.first_grad_op);   /* the trainer's mark: the forward's end */
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
