/* cli.h — what the verbs of the command line share: their options (one
 * table, cli.c) and loading a script with them.  The verbs themselves are
 * declared in cmd.h.
 *
 * The verbs sit in cli/, the top layer of src/ (doc/design.md, "Layers"):
 * nothing below includes this header or cmd.h.  A verb that needs only its
 * own options (checkpointverb.c, exportverb.c, plotverb.c) parses them with
 * option.h. */
#ifndef NETRUN_CLI_H
#define NETRUN_CLI_H

#include "ir/dump.h"
#include "base/file.h"
#include "exec/exec.h"
#include "front/lower.h"
#include "front/session.h"

#ifndef NETRUN_VERSION
#define NETRUN_VERSION "0.1.0"
#endif

/* The groups of options a verb takes (its `accepts`).  Every option of
 * every verb that parses with cli_parse is one row of one table (cli.c),
 * with the groups that have it; --batch, say, is declared once for train,
 * eval, predict, lr-find, summary and data. */
enum {
  OPT_DUMP = 1 << 0,        /* --format --startup --lines --ast -o --backward --tape --train --fused --ranks */
  OPT_RUN = 1 << 1,         /* --set --feed --seed --max-steps --max-memory --precision --dtype --check-nan --no-fuse */
  OPT_TAPE_DUMP = 1 << 2,   /* --dump-tape --format */
  OPT_TIME = 1 << 3,        /* --iterations --backward --loss */
  OPT_GRAD = 1 << 4,        /* --loss --wrt --no-grad --tape --tape-program */
  OPT_CHECK = 1 << 5,       /* --eps --rtol --atol --samples */
  OPT_GRAD_FORMAT = 1 << 6, /* --format text|json (grad's output) */
  OPT_ORDER = 1 << 7,       /* --order (dump --backward, grad, gradcheck) */
  OPT_MAYBE_FILE = 1 << 8,  /* not a group: FILE may be left out (repl) */
  OPT_WEIGHTS = 1 << 9,     /* --weights --weights-partial: run, sample and the trainer's verbs */
  OPT_TRAIN = 1 << 10,      /* train's: --epochs --lr --optimizer --save --resume --log --keep-best ... */
  OPT_EVAL = 1 << 11,       /* eval's: --confusion --format text|json */
  OPT_PREDICT = 1 << 12,    /* predict's: --output --format text|csv|json|npy -o */
  OPT_LR_FIND = 1 << 13,    /* lr-find's: --start --end --steps --format text|csv|json -o --plot */
  OPT_SAMPLE = 1 << 14,     /* sample's: --length --count --temperature --prompt --output --probs --no-stop */
  OPT_SUMMARY = 1 << 15,    /* summary's: --batch */
  OPT_DATA = 1 << 16,       /* data's (dataverb.c): --split --label --head --shuffle ... */
};

/* The ids of the table's options (OptionParser's p->opt->id).  cli_parse
 * stores those before CLI_OWN in Args; the verb stores its own (CliOwn's
 * apply, or its own loop for data). */
enum {
  O_FORMAT = 1, O_STARTUP, O_LINES, O_AST, O_BACKWARD, O_TAPE, O_TAPE_PROGRAM, O_TRAIN, O_FUSED, O_OUT,
  O_SET, O_FEED, O_SEED, O_MAX_STEPS, O_MAX_MEMORY, O_PRECISION, O_CHECK_NAN, O_NO_FUSE, O_DUMP_TAPE,
  O_ITERATIONS, O_WARMUP, O_LOSS, O_WRT, O_NO_GRAD, O_EPS, O_RTOL, O_ATOL, O_SAMPLES, O_RANKS, O_ORDER, O_DTYPE,
  O_WEIGHTS, O_WEIGHTS_PARTIAL,
  CLI_OWN,
  O_EPOCHS = CLI_OWN, O_BATCH, O_ACCUMULATE, O_LIMIT, O_LR, O_OPTIMIZER, O_DATA, O_SAVE, O_NO_SAVE, O_RESUME, O_LOG, O_KEEP_BEST,
  O_KEEP_GOING, O_INIT, O_CONFUSION, O_REPORT_FORMAT, O_OUTPUT, O_START, O_END, O_STEPS, O_LRF_FORMAT, O_PLOT,
  O_LENGTH, O_COUNT, O_TEMPERATURE, O_PROMPT, O_PROBS, O_NO_STOP,
  O_SPLIT, O_LABEL, O_HEAD, O_SHUFFLE, O_DROP_LAST, O_FIT, O_CONTEXT, O_SHAPE, O_FLIP, O_CROP_PAD,
};

typedef struct Args {
  const char *verb;
  const char *file;
  DumpOptions dump;
  bool ast, backward, tape, tape_program, dump_tape, json, train, fused;
  const char *out;        /* -o */
  const char *weights;    /* --weights PATH: the weights to start from */
  bool weights_partial;   /* --weights-partial */
  bool seed_given;        /* --seed */
  ExecOptions opt;
  const char *sets[64], *feeds[64];
  int nsets, nfeeds;
  int64_t iterations;
  int64_t warmup;           /* time: untimed passes before (default 1) */
  const char *loss;
  const char *wrt[256], *no_grad[256];
  int nwrt, nno_grad;
  double eps, rtol, atol;
  int64_t samples;
  int64_t ranks;          /* dump --train --ranks N: the program of N mpirun ranks */
  int order;              /* --order: 1, 2 (second derivatives) or 3 */
  DType dtype;             /* --dtype: DT_F64 runs the program in f64; DT_UNKNOWN if not given */
  bool eps_set, rtol_set;  /* --eps, --rtol given (gradcheck's defaults depend on --dtype) */
} Args;

/* gradcheck's default --atol. */
#define CLI_ATOL 1e-5
/* gradcheck's --eps and --rtol when its finite differences are taken in
 * f64 (the default, and --dtype f64), as PyTorch's gradcheck. */
#define CLI_EPS_F64 1e-6
#define CLI_RTOL_F64 1e-3

/* Parses argv (argv[0] is the verb) into a with the option parser
 * (option.h), over the options of the groups accepts names; 0, or the
 * usage-error status (reported). */
int cli_parse(int argc, char **argv, Args *a, unsigned accepts);
/* The same, with a verb's own options (ids from CLI_OWN: train's --epochs
 * ...): apply stores the value of the option p just returned in ctx,
 * returning 0 or the usage-error status. */
struct OptionParser;
typedef struct CliOwn {
  int (*apply)(const struct OptionParser *p, void *ctx);
  void *ctx;
} CliOwn;
int cli_parse_own(int argc, char **argv, Args *a, unsigned accepts, const CliOwn *own);
/* Starts p over the options of the groups accepts names, for a verb that
 * walks them itself (data); prefix as option_init's. */
void cli_option_init(struct OptionParser *p, int argc, char **argv, unsigned accepts, const char *prefix);

/* The functions the installed stdlib defines (batchnorm in nn.net ...), so
 * that `netrun ops batch_norm` can point at one; *n gets their count. */
typedef struct StdlibDef {
  const char *name, *file;
} StdlibDef;
StdlibDef *cli_stdlib_defs(Arena *a, int *n);
/* An executor over ld's program with a's --set/--feed values fed; NULL on
 * error (reported).  The program is rewritten first when the executor's
 * options want it (exec_rewrite_wanted). */
Executor *cli_start(Session *ld, const Args *a);
/* The same, the rewrite moving the block-0 indices marks[0..nmarks) the
 * caller runs ranges up to (rewrite.h). */
Executor *cli_start_marks(Session *ld, const Args *a, int *marks, int nmarks);
/* dump --fused: rewrites p as an executor with a's options would run it
 * (mark: NULL, or the index in block 0 it runs a range up to; keep: as
 * RW_KEEP, false for a tape's program, whose forward values are given). */
void cli_rewrite_dumped(Program *p, const Args *a, int *mark, bool keep);
/* Feeds a's --set and --feed values to ex; false on error (reported). */
bool cli_feed(Session *ld, Executor *ex, const Args *a);
/* netrun time's executor options in a: op timings on, no tape, print()
 * into /dev/null; returns that stream, for the caller to close (NULL if
 * it cannot be opened: print() then writes to stdout). */
FILE *cli_time_options(Args *a);
/* The per-op-type table of netrun time (slowest first, then a total
 * line); returns the total seconds. */
double cli_print_timings(FILE *f, const OpTiming *t, int n);

#endif
