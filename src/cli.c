/* cli.c — option parsing, starting an executor with the values fed, the
 * timing table (cli.h). */
#include "cli.h"

#include "feed.h"
#include "session.h"
#include "rewrite.h"

#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool parse_int(const char *opt, const char *v, int64_t lo, int64_t *out) {
  char *end;
  errno = 0;
  long long n = v ? strtoll(v, &end, 10) : 0;
  if (!v || !*v || *end || errno || n < lo) {
    diag_usage("%s needs a whole number of at least %lld", opt, (long long)lo);
    return false;
  }
  *out = n;
  return true;
}

/* A positive number, or with zero_ok one that is not negative; finite. */
static bool parse_real(const char *opt, const char *v, double *out, bool zero_ok) {
  char *end;
  double x = v ? strtod(v, &end) : 0;
  if (!v || !*v || *end || !isfinite(x) || !(x > 0 || (zero_ok && x == 0))) {
    diag_usage("%s needs a %s number", opt, zero_ok ? "finite, non-negative" : "positive");
    return false;
  }
  *out = x;
  return true;
}

/* NAMES: comma-separated, appended to list. */
static bool parse_names(const char *opt, const char *v, const char **list, int *n, int cap) {
  if (!v || !*v) {
    diag_usage("%s needs NAMES (comma-separated)", opt);
    return false;
  }
  char *copy = (char *)v;   /* an argv string: ours to split in place */
  for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
    if (*n == cap) {
      diag_usage("%s: too many names", opt);
      return false;
    }
    list[(*n)++] = tok;
  }
  return true;
}

int cli_parse(int argc, char **argv, Args *a, unsigned accepts) {
  memset(a, 0, sizeof *a);
  a->dtype = DT_UNKNOWN;
  a->verb = argv[0];
  exec_default_options(&a->opt);
  a->iterations = 10;
  a->loss = "loss";
  a->eps = 1e-2;
  a->rtol = 5e-3;
  a->atol = CLI_ATOL;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *eq = arg[0] == '-' && arg[1] == '-' ? strchr(arg, '=') : NULL;
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
#define IS(name, group) ((accepts & (group)) && strlen(name) == len && strncmp(arg, name, len) == 0)
#define VALUE() (eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL)
    int64_t n;
    if (IS("--format", OPT_DUMP | OPT_TAPE_DUMP | OPT_GRAD)) {
      const char *v = VALUE();
      if (!v) return diag_usage("%s", "--format needs a value");
      if ((accepts & OPT_GRAD) && !(accepts & OPT_DUMP)) {
        if (strcmp(v, "json") == 0) a->json = true;
        else if (strcmp(v, "text") != 0) return diag_usage("unknown format '%s' (expected text or json)", v);
      } else if (!dump_parse_format(v, &a->dump.format)) {
        return diag_usage("unknown format '%s' (expected text, dot or json)", v);
      }
    } else if (IS("--startup", OPT_DUMP)) {
      a->dump.startup = true;
    } else if (IS("--lines", OPT_DUMP)) {
      a->dump.lines = true;
    } else if (IS("--ast", OPT_DUMP)) {
      a->ast = true;
    } else if (IS("--backward", OPT_DUMP)) {
      a->backward = true;
    } else if (IS("--tape", OPT_DUMP | OPT_GRAD)) {
      a->tape = true;
    } else if (IS("--tape-program", OPT_GRAD)) {
      a->tape = a->tape_program = true;
    } else if (IS("--train", OPT_DUMP)) {
      a->train = true;
    } else if (IS("--fused", OPT_DUMP)) {
      a->fused = true;
    } else if (IS("-o", OPT_DUMP)) {
      if (!(a->out = VALUE())) return diag_usage("%s", "-o needs a file name");
    } else if (IS("--set", OPT_RUN) || IS("--feed", OPT_RUN)) {
      bool set = arg[2] == 's';
      const char *v = VALUE();
      if (!v || !strchr(v, '=')) return diag_usage("%s needs NAME=%s", set ? "--set" : "--feed", set ? "VALUE" : "FILE");
      if ((set ? a->nsets : a->nfeeds) == 64) return diag_usage("%s", "too many values fed");
      if (set) a->sets[a->nsets++] = v;
      else a->feeds[a->nfeeds++] = v;
    } else if (IS("--seed", OPT_RUN)) {
      if (!parse_int("--seed", VALUE(), 0, &n)) return EXIT_USAGE;
      a->opt.seed = (uint64_t)n;
    } else if (IS("--max-steps", OPT_RUN)) {
      if (!parse_int("--max-steps", VALUE(), 0, &n)) return EXIT_USAGE;
      a->opt.max_steps = n;
    } else if (IS("--max-memory", OPT_RUN)) {
      const char *v = VALUE();
      if (!v || !mem_parse_size(v, &n)) return diag_usage("%s", "--max-memory needs a size, e.g. 512M or 4G");
      tensor_set_memory_limit(n);
    } else if (IS("--precision", OPT_RUN)) {
      if (!parse_int("--precision", VALUE(), 0, &n)) return EXIT_USAGE;
      a->opt.precision = (int)(n > 17 ? 17 : n);
    } else if (IS("--dtype", OPT_RUN)) {
      const char *v = VALUE();
      if (!v || (strcmp(v, "f32") != 0 && strcmp(v, "f64") != 0))
        return diag_usage("%s", "--dtype needs f32 or f64");
      a->dtype = strcmp(v, "f64") == 0 ? DT_F64 : DT_F32;
      session_set_f64(a->dtype == DT_F64);
    } else if (IS("--check-nan", OPT_RUN)) {
      a->opt.check_nan = true;
    } else if (IS("--no-fuse", OPT_RUN)) {
      a->opt.fuse = false;
    } else if (IS("--dump-tape", OPT_TAPE_DUMP)) {
      a->dump_tape = true;
    } else if (IS("--iterations", OPT_TIME)) {
      if (!parse_int("--iterations", VALUE(), 1, &a->iterations)) return EXIT_USAGE;
    } else if (IS("--loss", OPT_GRAD)) {
      if (!(a->loss = VALUE())) return diag_usage("%s", "--loss needs a NAME");
    } else if (IS("--wrt", OPT_GRAD)) {
      if (!parse_names("--wrt", VALUE(), a->wrt, &a->nwrt, 256)) return EXIT_USAGE;
    } else if (IS("--no-grad", OPT_GRAD)) {
      if (!parse_names("--no-grad", VALUE(), a->no_grad, &a->nno_grad, 256)) return EXIT_USAGE;
    } else if (IS("--eps", OPT_CHECK)) {
      if (!parse_real("--eps", VALUE(), &a->eps, false)) return EXIT_USAGE;
      a->eps_set = true;
    } else if (IS("--rtol", OPT_CHECK)) {
      if (!parse_real("--rtol", VALUE(), &a->rtol, false)) return EXIT_USAGE;
      a->rtol_set = true;
    } else if (IS("--atol", OPT_CHECK)) {
      if (!parse_real("--atol", VALUE(), &a->atol, true)) return EXIT_USAGE;
    } else if (IS("--samples", OPT_CHECK)) {
      if (!parse_int("--samples", VALUE(), 1, &a->samples)) return EXIT_USAGE;
    } else if (arg[0] == '-' && arg[1]) {
      return diag_usage("%s: unknown option '%s'", a->verb, arg);
    } else if (a->file) {
      return diag_usage("%s takes one file, got a second: '%s'", a->verb, arg);
    } else {
      a->file = arg;
    }
#undef IS
#undef VALUE
  }
  if (!a->file && !(accepts & OPT_MAYBE_FILE)) return diag_usage("%s needs a FILE", a->verb);
  return 0;
}

/* ---- scripts and executors -------------------------------------------------------- */

/* The installed stdlib: PREFIX/share/netrun/stdlib beside PREFIX/bin, or
 * the source tree's stdlib/ for an uninstalled build. */
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

static void on_interrupt(int sig) {
  (void)sig;
  exec_interrupt();
}

bool cli_feed(Session *ld, Executor *ex, const Args *a) {
  bool ok = true;
  for (int i = 0; i < a->nsets + a->nfeeds; i++) {
    bool set = i < a->nsets;
    const char *arg = set ? a->sets[i] : a->feeds[i - a->nsets];
    const char *eq = strchr(arg, '=');
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
    const VarDesc *v = prog_named_var(ld->prog, name);
    if (!v || !(v->flags & VAR_INPUT)) {
      diag_error(&ld->diag, SPAN_NONE, "%s %s: the script has no input named '%s'", set ? "--set" : "--feed", arg,
                 name);
      ok = false;
      continue;
    }
    Tensor *t = set ? feed_parse_value(&ld->diag, name, eq + 1, v->dtype) : feed_read_csv(&ld->diag, eq + 1, v);
    char what[300];
    snprintf(what, sizeof what, "%s %s", set ? "--set" : "--feed", name);
    if (!t || !exec_feed(ex, name, t, what)) ok = false;
    tensor_unref(t);
  }
  return ok;
}

Executor *cli_start(Session *ld, const Args *a) { return cli_start_marks(ld, a, NULL, 0); }

Executor *cli_start_marks(Session *ld, const Args *a, int *marks, int nmarks) {
  if (rewrite_wanted(&a->opt)) rewrite_program(ld->prog, &(RewriteOpts){RW_FUSE, marks, nmarks});
  Executor *ex = exec_new(ld->prog, &a->opt);
  if (!cli_feed(ld, ex, a)) {
    diag_finish(&ld->diag);
    exec_free(ex);
    return NULL;
  }
  signal(SIGINT, on_interrupt);
  return ex;
}

void cli_rewrite_dumped(Program *p, const Args *a, int *mark) {
  ExecOptions o = a->opt;
  o.tape = false;
  if (a->fused && rewrite_wanted(&o)) rewrite_program(p, &(RewriteOpts){RW_FUSE, mark, mark ? 1 : 0});
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
