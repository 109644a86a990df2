/* cli.h — what the verbs of the command line share: their options, and
 * starting an executor over a loaded script with the values fed.  The verbs
 * themselves are declared in cmd.h.
 *
 * The layers of src/, each using only the ones below it:
 *   main.c       dispatches argv to a verb (cmd.h)
 *   verbs        parse argv into Args (this header) and run: cli.c, grad.c,
 *                repl.c, summary.c, timeback.c, trainverb.c
 *   library      everything else, from the trainer (trainer.h), data,
 *                checkpoints, plots and weights down through run, session,
 *                lower, rewrite, backward, exec, registry and the ops to
 *                program, tensor and mem
 * Only the verbs include cli.h (tests/code_shape.bats checks it).  data.c,
 * checkpoint.c, plot.c and weights.c each hold a verb's entry point
 * (cmd.h) that parses its own options with option.h and needs nothing of
 * this header. */
#ifndef NETRUN_CLI_H
#define NETRUN_CLI_H

#include "dump.h"
#include "file.h"
#include "exec.h"
#include "lower.h"
#include "session.h"

#ifndef NETRUN_VERSION
#define NETRUN_VERSION "0.1.0"
#endif

/* Which options a verb takes. */
enum {
  OPT_DUMP = 1 << 0,      /* --format --startup --lines --ast -o --backward --tape */
  OPT_RUN = 1 << 1,       /* --set --feed --seed --max-steps --check-nan --no-fuse --precision */
  OPT_TAPE_DUMP = 1 << 2, /* --dump-tape --format */
  OPT_TIME = 1 << 3,      /* --iterations */
  OPT_GRAD = 1 << 4,      /* --loss --wrt --no-grad --tape --tape-program */
  OPT_CHECK = 1 << 5,     /* --eps --rtol --atol --samples */
  OPT_GRAD_FORMAT = 1 << 6, /* --format text|json (grad's output) */
  OPT_ORDER = 1 << 7,     /* --order (dump --backward, grad, gradcheck) */
  OPT_MAYBE_FILE = 1 << 8, /* FILE may be left out (repl) */
};

typedef struct Args {
  const char *verb;
  const char *file;
  DumpOptions dump;
  bool ast, backward, tape, tape_program, dump_tape, json, train, fused;
  const char *out;
  ExecOptions opt;
  const char *sets[64], *feeds[64];
  int nsets, nfeeds;
  int64_t iterations;
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
 * (option.h) and the tables of the groups accepts names; 0, or the
 * usage-error status (reported). */
int cli_parse(int argc, char **argv, Args *a, unsigned accepts);
/* A verb's own options besides the groups' (train's --epochs ...): looked
 * up first; apply stores the value of the option p just returned in ctx,
 * returning 0 or the usage-error status. */
struct OptionParser;
typedef struct CliOwn {
  const struct Option *options;
  int count;
  int (*apply)(const struct OptionParser *p, void *ctx);
  void *ctx;
} CliOwn;
int cli_parse_own(int argc, char **argv, Args *a, unsigned accepts, const CliOwn *own);

/* The functions the installed stdlib defines (batchnorm in nn.net ...), so
 * that `netrun ops batch_norm` can point at one; *n gets their count. */
typedef struct StdlibDef {
  const char *name, *file;
} StdlibDef;
StdlibDef *cli_stdlib_defs(Arena *a, int *n);
/* An executor over ld's program with a's --set/--feed values fed; NULL on
 * error (reported).  The program is rewritten first when the executor's
 * options want it (rewrite_wanted). */
Executor *cli_start(Session *ld, const Args *a);
/* The same, the rewrite moving the block-0 indices marks[0..nmarks) the
 * caller runs ranges up to (rewrite.h). */
Executor *cli_start_marks(Session *ld, const Args *a, int *marks, int nmarks);
/* dump --fused: rewrites p as an executor with a's options would run it
 * (mark: NULL, or the index in block 0 it runs a range up to). */
void cli_rewrite_dumped(Program *p, const Args *a, int *mark);
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
