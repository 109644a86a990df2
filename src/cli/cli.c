/* cli.c — what the verbs share (cli.h): every option in one table and its
 * parser, the stdlib's functions (for suggestions), starting an executor
 * with a run's values fed (over front/run.h), the timing table. */
#include "cli/cli.h"

#include "cli/option.h"
#include "front/run.h"
#include "front/session.h"
#include "train/trainer.h"
#include "ir/rewrite.h"

#include <assert.h>
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- options ------------------------------------------------------------------------ */

/* Every verb's options (cli.h's groups), each once.  A name twice is two
 * options that no verb takes together (--format is a value of its own to
 * dump, eval, predict and lr-find). */
#define WHOLE_0 "a whole number of at least 0"
#define WHOLE_1 "a whole number of at least 1"
#define TRAINER (OPT_TRAIN | OPT_EVAL | OPT_PREDICT | OPT_LR_FIND)
static const Option cli_options[] = {
    {"--format", OPTION_VALUE, "FMT", "a value", O_FORMAT, OPT_DUMP | OPT_TAPE_DUMP | OPT_GRAD_FORMAT},
    {"--startup", OPTION_FLAG, NULL, NULL, O_STARTUP, OPT_DUMP},
    {"--lines", OPTION_FLAG, NULL, NULL, O_LINES, OPT_DUMP},
    {"--ast", OPTION_FLAG, NULL, NULL, O_AST, OPT_DUMP},
    {"--backward", OPTION_FLAG, NULL, NULL, O_BACKWARD, OPT_DUMP | OPT_TIME},
    {"--loss", OPTION_VALUE, "NAME", "a NAME", O_LOSS, OPT_DUMP | OPT_TIME | OPT_GRAD},
    {"--tape", OPTION_FLAG, NULL, NULL, O_TAPE, OPT_DUMP | OPT_GRAD},
    {"--train", OPTION_FLAG, NULL, NULL, O_TRAIN, OPT_DUMP},
    {"--fused", OPTION_FLAG, NULL, NULL, O_FUSED, OPT_DUMP},
    {"-o", OPTION_VALUE, "FILE", "a file name", O_OUT, OPT_DUMP | OPT_PREDICT | OPT_LR_FIND},
    {"--ranks", OPTION_VALUE, "N", WHOLE_1, O_RANKS, OPT_DUMP},
    {"--set", OPTION_VALUE, "NAME=VALUE", "NAME=VALUE", O_SET, OPT_RUN},
    {"--feed", OPTION_VALUE, "NAME=FILE", "NAME=FILE", O_FEED, OPT_RUN},
    {"--seed", OPTION_VALUE, "N", WHOLE_0, O_SEED, OPT_RUN | OPT_DATA},
    {"--max-steps", OPTION_VALUE, "N", WHOLE_0, O_MAX_STEPS, OPT_RUN},
    {"--max-memory", OPTION_VALUE, "SIZE", "a size, e.g. 512M or 4G", O_MAX_MEMORY, OPT_RUN | OPT_DATA},
    {"--precision", OPTION_VALUE, "N", WHOLE_0, O_PRECISION, OPT_RUN},
    {"--dtype", OPTION_VALUE, "T", "f32 or f64", O_DTYPE, OPT_RUN},
    {"--check-nan", OPTION_FLAG, NULL, NULL, O_CHECK_NAN, OPT_RUN},
    {"--no-fuse", OPTION_FLAG, NULL, NULL, O_NO_FUSE, OPT_RUN},
    {"--dump-tape", OPTION_FLAG, NULL, NULL, O_DUMP_TAPE, OPT_TAPE_DUMP},
    {"--iterations", OPTION_VALUE, "N", WHOLE_1, O_ITERATIONS, OPT_TIME},
    {"--warmup", OPTION_VALUE, "N", WHOLE_0, O_WARMUP, OPT_TIME},
    {"--wrt", OPTION_VALUE, "NAMES", "NAMES (comma-separated)", O_WRT, OPT_GRAD},
    {"--no-grad", OPTION_VALUE, "NAMES", "NAMES (comma-separated)", O_NO_GRAD, OPT_GRAD},
    {"--tape-program", OPTION_FLAG, NULL, NULL, O_TAPE_PROGRAM, OPT_GRAD},
    {"--eps", OPTION_VALUE, "E", "a positive number", O_EPS, OPT_CHECK},
    {"--rtol", OPTION_VALUE, "R", "a positive number", O_RTOL, OPT_CHECK},
    {"--atol", OPTION_VALUE, "A", "a finite, non-negative number", O_ATOL, OPT_CHECK},
    {"--samples", OPTION_VALUE, "N", WHOLE_1, O_SAMPLES, OPT_CHECK},
    {"--order", OPTION_VALUE, "N", "1, 2 or 3 (derivatives up to the third are checked)", O_ORDER, OPT_ORDER},
    {"--weights", OPTION_VALUE, "PATH", "a PATH", O_WEIGHTS, OPT_WEIGHTS},
    {"--weights-partial", OPTION_FLAG, NULL, NULL, O_WEIGHTS_PARTIAL, OPT_WEIGHTS},
    /* the verbs' own (CliOwn) */
    {"--epochs", OPTION_VALUE, "N", WHOLE_1, O_EPOCHS, OPT_TRAIN},
    {"--batch", OPTION_VALUE, "N", WHOLE_1, O_BATCH, TRAINER | OPT_SUMMARY | OPT_DATA},
    {"--accumulate", OPTION_VALUE, "N", WHOLE_1, O_ACCUMULATE, OPT_TRAIN},
    {"--limit", OPTION_VALUE, "N", WHOLE_1, O_LIMIT, TRAINER},
    {"--lr", OPTION_VALUE, "X", "a positive number", O_LR, OPT_TRAIN},
    {"--optimizer", OPTION_VALUE, "NAME", "a name: " TRAIN_OPTIMIZERS, O_OPTIMIZER, OPT_TRAIN | OPT_LR_FIND},
    {"--data", OPTION_VALUE, "SPEC", "a SPEC", O_DATA, TRAINER},
    {"--save", OPTION_VALUE, "PATH", "a PATH", O_SAVE, OPT_TRAIN},
    {"--no-save", OPTION_FLAG, NULL, NULL, O_NO_SAVE, OPT_TRAIN},
    {"--resume", OPTION_VALUE, "PATH", "a PATH", O_RESUME, OPT_TRAIN},
    {"--log", OPTION_VALUE, "FILE", "a FILE", O_LOG, OPT_TRAIN},
    {"--keep-best", OPTION_FLAG, NULL, NULL, O_KEEP_BEST, OPT_TRAIN},
    {"--keep-going", OPTION_FLAG, NULL, NULL, O_KEEP_GOING, OPT_TRAIN},
    {"--init", OPTION_FLAG, NULL, NULL, O_INIT, OPT_EVAL | OPT_PREDICT},
    {"--confusion", OPTION_FLAG, NULL, NULL, O_CONFUSION, OPT_EVAL},
    {"--format", OPTION_VALUE, "FMT", "text or json", O_REPORT_FORMAT, OPT_EVAL},
    {"--format", OPTION_VALUE, "FMT", REPORT_FORMATS, O_REPORT_FORMAT, OPT_PREDICT},
    {"--output", OPTION_VALUE, "NAME", "a NAME", O_OUTPUT, OPT_PREDICT | OPT_SAMPLE},
    {"--start", OPTION_VALUE, "X", "a positive number", O_START, OPT_LR_FIND},
    {"--end", OPTION_VALUE, "X", "a positive number", O_END, OPT_LR_FIND},
    {"--steps", OPTION_VALUE, "N", "a whole number from 2 to 1000000", O_STEPS, OPT_LR_FIND},
    {"--format", OPTION_VALUE, "FMT", "text, csv or json", O_LRF_FORMAT, OPT_LR_FIND},
    {"--plot", OPTION_VALUE, "FILE", "a file name", O_PLOT, OPT_LR_FIND},
    {"--length", OPTION_VALUE, "N", "a whole number from 1 to 1000000", O_LENGTH, OPT_SAMPLE},
    {"--count", OPTION_VALUE, "N", "a whole number from 1 to 4096", O_COUNT, OPT_SAMPLE},
    {"--temperature", OPTION_VALUE, "T", "a finite number of at least 0", O_TEMPERATURE, OPT_SAMPLE},
    {"--prompt", OPTION_VALUE, "TEXT", "a TEXT", O_PROMPT, OPT_SAMPLE},
    {"--probs", OPTION_VALUE, "K", "a whole number from 1 to 256", O_PROBS, OPT_SAMPLE},
    {"--no-stop", OPTION_FLAG, NULL, NULL, O_NO_STOP, OPT_SAMPLE},
    {"--split", OPTION_VALUE, "S", "train or test", O_SPLIT, OPT_DATA},
    {"--label", OPTION_VALUE, "COL", "a column", O_LABEL, OPT_DATA},
    {"--head", OPTION_VALUE, "N", WHOLE_1, O_HEAD, OPT_DATA},
    {"--shuffle", OPTION_FLAG, NULL, NULL, O_SHUFFLE, OPT_DATA},
    {"--drop-last", OPTION_FLAG, NULL, NULL, O_DROP_LAST, OPT_DATA},
    {"--fit", OPTION_VALUE, "FILE", "a FILE", O_FIT, OPT_DATA},
    {"--context", OPTION_VALUE, "T", WHOLE_1, O_CONTEXT, OPT_DATA},
    {"--shape", OPTION_VALUE, "C,H,W", "channels (1 or 3), height and width, as 3,32,32", O_SHAPE, OPT_DATA},
    {"--flip", OPTION_FLAG, NULL, NULL, O_FLIP, OPT_DATA},
    {"--crop-pad", OPTION_VALUE, "N", WHOLE_0, O_CROP_PAD, OPT_DATA},
    {NULL, 0, NULL, NULL, 0, 0},
};

void cli_option_init(OptionParser *p, int argc, char **argv, unsigned accepts, const char *prefix) {
  /* No verb takes two rows of one name: the second would never be seen. */
  for (const Option *o = cli_options; o->name; o++)
    for (const Option *q = o + 1; q->name; q++)
      assert(!(o->groups & q->groups & accepts) || strcmp(o->name, q->name) != 0);
  option_init_groups(p, argc, argv, cli_options, accepts, prefix);
}

/* NAMES: comma-separated, appended to list. */
static bool parse_names(const OptionParser *p, const char **list, int *n, int cap) {
  if (!*p->value) return option_bad(p), false;
  char *copy = (char *)p->value;   /* an argv string: ours to split in place */
  for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
    if (*n == cap) {
      diag_usage("%s: too many names", p->opt->name);
      return false;
    }
    list[(*n)++] = tok;
  }
  return true;
}

static int set_format(Args *a, const char *v, unsigned accepts) {
  if (accepts & OPT_GRAD_FORMAT) {
    if (strcmp(v, "json") == 0) a->json = true;
    else if (strcmp(v, "text") != 0) return diag_usage("unknown format '%s' (expected text or json)", v);
  } else if (!dump_parse_format(v, &a->dump.format)) {
    return diag_usage("unknown format '%s' (expected text, dot or json)", v);
  }
  return 0;
}

/* Stores the value of one of the groups' options; 0 or EXIT_USAGE. */
static int apply(const OptionParser *p, int id, Args *a, unsigned accepts) {
  const char *v = p->value;
  int64_t n;
  switch (id) {
  case O_FORMAT: return set_format(a, v, accepts);
  case O_STARTUP: a->dump.startup = true; break;
  case O_LINES: a->dump.lines = true; break;
  case O_AST: a->ast = true; break;
  case O_BACKWARD: a->backward = true; break;
  case O_TAPE: a->tape = true; break;
  case O_TAPE_PROGRAM: a->tape = a->tape_program = true; break;
  case O_TRAIN: a->train = true; break;
  case O_FUSED: a->fused = true; break;
  case O_OUT: a->out = v; break;
  case O_WEIGHTS: a->weights = v; break;
  case O_WEIGHTS_PARTIAL: a->weights_partial = true; break;
  case O_SET:
  case O_FEED:
    if (!strchr(v, '=')) return option_bad(p);
    if ((id == O_SET ? a->nsets : a->nfeeds) == 64) return diag_usage("%s", "too many values fed");
    if (id == O_SET) a->sets[a->nsets++] = v;
    else a->feeds[a->nfeeds++] = v;
    break;
  case O_SEED:
    if (!option_int(p, 0, &n)) return EXIT_USAGE;
    a->opt.seed = (uint64_t)n;
    a->seed_given = true;
    break;
  case O_MAX_STEPS: return option_int(p, 0, &a->opt.max_steps) ? 0 : EXIT_USAGE;
  case O_MAX_MEMORY:
    if (!mem_parse_size(v, &n)) return option_bad(p);
    tensor_set_memory_limit(n);
    break;
  case O_PRECISION:
    if (!option_int(p, 0, &n)) return EXIT_USAGE;
    a->opt.precision = (int)(n > 17 ? 17 : n);
    break;
  case O_CHECK_NAN: a->opt.check_nan = true; break;
  case O_NO_FUSE: a->opt.fuse = false; break;
  case O_DUMP_TAPE: a->dump_tape = true; break;
  case O_ITERATIONS: return option_int(p, 1, &a->iterations) ? 0 : EXIT_USAGE;
  case O_WARMUP: return option_int(p, 0, &a->warmup) ? 0 : EXIT_USAGE;
  case O_LOSS: a->loss = v; break;
  case O_WRT: return parse_names(p, a->wrt, &a->nwrt, 256) ? 0 : EXIT_USAGE;
  case O_NO_GRAD: return parse_names(p, a->no_grad, &a->nno_grad, 256) ? 0 : EXIT_USAGE;
  case O_EPS: return option_real(p, false, &a->eps) ? (a->eps_set = true, 0) : EXIT_USAGE;
  case O_RTOL: return option_real(p, false, &a->rtol) ? (a->rtol_set = true, 0) : EXIT_USAGE;
  case O_DTYPE:
    if (strcmp(v, "f32") != 0 && strcmp(v, "f64") != 0) return option_bad(p);
    a->dtype = strcmp(v, "f64") == 0 ? DT_F64 : DT_F32;
    session_set_f64(a->dtype == DT_F64);
    break;
  case O_ATOL: return option_real(p, true, &a->atol) ? 0 : EXIT_USAGE;
  case O_SAMPLES: return option_int(p, 1, &a->samples) ? 0 : EXIT_USAGE;
  case O_RANKS: return option_int(p, 1, &a->ranks) ? 0 : EXIT_USAGE;
  case O_ORDER:
    if (!option_int(p, 1, &n)) return EXIT_USAGE;
    if (n > 3) return diag_usage("--order %lld: derivatives up to the third (3) are checked", (long long)n);
    a->order = (int)n;
    break;
  }
  return 0;
}

int cli_parse(int argc, char **argv, Args *a, unsigned accepts) { return cli_parse_own(argc, argv, a, accepts, NULL); }

int cli_parse_own(int argc, char **argv, Args *a, unsigned accepts, const CliOwn *own) {
  memset(a, 0, sizeof *a);
  a->dtype = DT_UNKNOWN;
  a->verb = argv[0];
  exec_default_options(&a->opt);
  a->iterations = 10;
  a->warmup = 1;
  a->loss = "loss";
  a->eps = 1e-2;
  a->rtol = 5e-3;
  a->atol = CLI_ATOL;
  a->order = 1;
  OptionParser p;
  cli_option_init(&p, argc, argv, accepts, "");
  int id, rc = 0;
  while (!rc && (id = option_next(&p)) != OPTION_END) {
    if (id == OPTION_ERROR) rc = EXIT_USAGE;
    else if (id == OPTION_ARG && a->file) rc = diag_usage("%s takes one file, got a second: '%s'", a->verb, p.value);
    else if (id == OPTION_ARG) a->file = p.value;
    else if (id >= CLI_OWN) rc = own->apply(&p, own->ctx);
    else rc = apply(&p, id, a, accepts);
  }
  if (!rc && !a->file && !(accepts & OPT_MAYBE_FILE)) rc = diag_usage("%s needs a FILE", a->verb);
  if (!rc && a->weights_partial && !a->weights) rc = diag_usage("%s", "--weights-partial needs --weights PATH");
  if (!rc && a->order > 1 && (accepts & OPT_DUMP) && (!a->backward || a->train))
    rc = diag_usage("--order %d prints a backward of a backward: it needs --backward (and not --train)", a->order);
  return rc;
}

/* ---- scripts and executors -------------------------------------------------------- */

/* Adds the functions that file (a stdlib .net file) defines, by the lines
 * "def NAME(" that define them. */
static void stdlib_defs(Arena *a, const char *dir, const char *file, StdlibDef **defs, int *n, int *cap) {
  char path[PATH_MAX + 256], line[512];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  FILE *f = fopen(path, "r");
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "def ", 4) != 0) continue;
    size_t len = strcspn(line + 4, "( \t\n");
    if (!len || line[4 + len] != '(') continue;
    StdlibDef *d = ARENA_PUSH(a, *defs, *n, *cap);
    d->name = arena_strndup(a, line + 4, len);
    d->file = arena_strdup(a, file);
  }
  fclose(f);
}

StdlibDef *cli_stdlib_defs(Arena *a, int *n) {
  StdlibDef *defs = NULL;
  int cap = 0;
  *n = 0;
  const char *dir = session_stdlib_dir();
  char pattern[PATH_MAX + 32];
  glob_t g;
  if (!dir || snprintf(pattern, sizeof pattern, "%s/*.net", dir) >= (int)sizeof pattern ||
      glob(pattern, 0, NULL, &g) != 0)
    return NULL;
  for (size_t i = 0; i < g.gl_pathc; i++) stdlib_defs(a, dir, g.gl_pathv[i] + strlen(dir) + 1, &defs, n, &cap);
  globfree(&g);
  return defs;
}

/* The values a's --set and --feed give. */
static RunFeeds feeds_of(const Args *a) { return (RunFeeds){a->sets, a->feeds, a->nsets, a->nfeeds}; }

bool cli_feed(Session *ld, Executor *ex, const Args *a) {
  RunFeeds f = feeds_of(a);
  return run_feed(ld, ex, &f);
}

Executor *cli_start(Session *ld, const Args *a) { return cli_start_marks(ld, a, NULL, 0); }

Executor *cli_start_marks(Session *ld, const Args *a, int *marks, int nmarks) {
  RunFeeds f = feeds_of(a);
  return run_start(ld, &a->opt, &f, marks, nmarks);
}

void cli_rewrite_dumped(Program *p, const Args *a, int *mark, bool keep) {
  ExecOptions o = a->opt;
  o.tape = false;
  if (a->fused && exec_rewrite_wanted(&o))
    rewrite_program(p, &(RewriteOpts){RW_FUSE | (keep ? RW_KEEP : 0), mark, mark ? 1 : 0, 0, NULL, 0});
}

FILE *cli_time_options(Args *a) {
  a->opt.timing = true;
  a->opt.tape = false;
  a->opt.out = fopen("/dev/null", "w");
  return a->opt.out;
}

static int cmp_timing(const void *a, const void *b) {
  const OpTiming *x = a, *y = b;
  if (x->seconds != y->seconds) return x->seconds < y->seconds ? 1 : -1;
  return strcmp(x->type, y->type);
}

double cli_print_timings(FILE *f, const OpTiming *t, int n) {
  OpTiming *sorted = mem_alloc(NULL, sizeof *sorted * (size_t)(n + 1));
  if (n) memcpy(sorted, t, sizeof *sorted * (size_t)n);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_timing);
  double total = 0;
  int64_t calls = 0;
  for (int i = 0; i < n; i++) total += sorted[i].seconds, calls += sorted[i].calls;
  fprintf(f, "%-24s %10s %12s %12s %7s\n", "op", "calls", "total ms", "per call us", "share");
  /* Op types that never ran (a branch not taken, ops run fused) have no row. */
  for (int i = 0; i < n; i++)
    if (sorted[i].calls)
      fprintf(f, "%-24s %10" PRId64 " %12.3f %12.3f %6.1f%%\n", sorted[i].type, sorted[i].calls,
              sorted[i].seconds * 1e3, sorted[i].seconds * 1e6 / (double)sorted[i].calls,
              total > 0 ? 100.0 * sorted[i].seconds / total : 0.0);
  fprintf(f, "%-24s %10" PRId64 " %12.3f %12s %6.1f%%\n", "total", calls, total * 1e3, "", 100.0);
  mem_free(sorted);
  return total;
}
