/* main.c — the command line: verbs, options, exit statuses.
 *
 *   netrun VERB [OPTIONS] FILE      see `netrun --help` and man/netrun.1
 *
 * Exit status: 0 success, 1 an error in the script or its data, 2 a usage
 * error, 3 out of memory. */
#include "ast.h"
#include "dump.h"
#include "exec.h"
#include "feed.h"
#include "lower.h"
#include "registry.h"
#include "tape.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef NETRUN_VERSION
#define NETRUN_VERSION "0.1.0"
#endif

enum { EXIT_SCRIPT = 1, EXIT_USAGE = 2 };

typedef struct Verb {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *usage;
  const char *help;
} Verb;

static int cmd_dump(int argc, char **argv);
static int cmd_ops(int argc, char **argv);
static int cmd_help(int argc, char **argv);
static int cmd_later(int argc, char **argv);
static int cmd_run(int argc, char **argv);
static int cmd_time(int argc, char **argv);

#define RUN_OPTIONS                                                                  \
  "  --set NAME=VALUE   feed input NAME a literal value (3, [[1, 2], [3, 4]])\n"      \
  "  --feed NAME=FILE   feed input NAME from a CSV file (rows: first dimension)\n"   \
  "  --seed N           seed of the random generator (default 0)\n"                 \
  "  --max-steps N      turns one while loop may take (default 1000000)\n"          \
  "  --check-nan        stop at the first op that produces NaN or Inf\n"            \
  "  --precision N      digits print() shows (default 8)\n"

static const Verb verbs[] = {
    {"dump", cmd_dump, "netrun dump [--format text|dot|json] [--startup] [--lines] [--ast] [-o OUT] FILE",
     "Lower FILE to a program and print it (see netrun-lang(5), \"The program\").\n"
     "  --format FMT   text (default), dot (Graphviz) or json\n"
     "  --startup      also print the startup block: initializers and input defaults\n"
     "  --lines        annotate every op with the source position it came from\n"
     "  --ast          print the syntax tree instead of the program\n"
     "  --backward     append the backward program (not implemented yet)\n"
     "  -o OUT         write to OUT (atomically) instead of standard output"},
    {"ops", cmd_ops, "netrun ops [NAME]",
     "List every registered op, or describe one: its inputs, outputs, attributes\n"
     "with types and defaults, and whether it has a gradient and a kernel."},
    {"run", cmd_run, "netrun run [OPTIONS] FILE",
     "Execute FILE eagerly, op by op, recording the tape.\n" RUN_OPTIONS
     "  --dump-tape        print the tape (the ops run, loops unrolled) after the run\n"
     "  --format FMT       the tape's format: text (default), dot or json"},
    {"time", cmd_time, "netrun time [OPTIONS] FILE",
     "Run FILE's forward pass several times and print, per op type, the calls,\n"
     "the time and its share of the total.\n" RUN_OPTIONS
     "  --iterations N     forward passes to time (default 10)"},
    {"grad", cmd_later, "netrun grad FILE", "Print the loss and gradients (not implemented yet)."},
    {"gradcheck", cmd_later, "netrun gradcheck FILE",
     "Compare gradients with finite differences (not implemented yet)."},
    {"train", cmd_later, "netrun train FILE", "Train the model FILE describes (not implemented yet)."},
    {"eval", cmd_later, "netrun eval FILE --weights PATH", "Evaluate a trained model (not implemented yet)."},
    {"predict", cmd_later, "netrun predict FILE --weights PATH", "Predict with a trained model (not implemented yet)."},
    {"plot", cmd_later, "netrun plot LOG", "Draw training curves as SVG (not implemented yet)."},
    {"repl", cmd_later, "netrun repl [FILE]", "Interactive session (not implemented yet)."},
    {"help", cmd_help, "netrun help [VERB]", "Describe a verb."},
};

static const Verb *find_verb(const char *name) {
  for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
    if (strcmp(verbs[i].name, name) == 0) return &verbs[i];
  return NULL;
}

static void usage(FILE *f) {
  fputs("usage: netrun VERB [OPTIONS] FILE\n"
        "       netrun FILE                 run FILE\n"
        "       netrun --dump-backward FILE print FILE's program with its backward\n"
        "\nverbs:\n",
        f);
  for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) fprintf(f, "  %s\n", verbs[i].usage);
  fputs("\noptions: --help, --version; `netrun help VERB` describes a verb.\n", f);
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("netrun: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\nTry 'netrun --help'.\n", stderr);
  return EXIT_USAGE;
}

/* The installed stdlib: PREFIX/share/netrun/stdlib beside PREFIX/bin, or
 * the source tree's stdlib/ for an uninstalled build. */
static const char *stdlib_dir(void) {
  static char dir[PATH_MAX + 32];
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return NULL;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return NULL;
  *slash = 0;
  static const char *const rel[] = {"/../share/netrun/stdlib", "/stdlib", "/../../stdlib"};
  for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
    snprintf(dir, sizeof dir, "%s%s", exe, rel[i]);
    if (access(dir, R_OK) == 0) {
      char *real = realpath(dir, NULL);
      if (real) {
        snprintf(dir, sizeof dir, "%s", real);
        free(real);
      }
      return dir;
    }
  }
  return NULL;
}

/* ---- writing output atomically ------------------------------------------------ */

typedef struct Out {
  FILE *f;
  const char *path;
  char tmp[PATH_MAX];
} Out;

static bool out_open(Out *o, const char *path) {
  o->path = path;
  if (!path || strcmp(path, "-") == 0) {
    o->f = stdout;
    o->path = NULL;
    return true;
  }
  snprintf(o->tmp, sizeof o->tmp, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(o->tmp);
  if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
    fprintf(stderr, "netrun: error: cannot write %s: %s\n", path, strerror(errno));
    if (fd >= 0) close(fd), unlink(o->tmp);
    return false;
  }
  return true;
}

static bool out_close(Out *o) {
  if (!o->path) return fflush(stdout) == 0;
  bool ok = fflush(o->f) == 0 && !ferror(o->f) && fsync(fileno(o->f)) == 0;
  int err = errno;
  ok &= fclose(o->f) == 0;
  if (ok && rename(o->tmp, o->path) == 0) return true;
  if (ok) err = errno;
  unlink(o->tmp);
  fprintf(stderr, "netrun: error: cannot write %s: %s\n", o->path, strerror(err));
  return false;
}

/* ---- loading a script ------------------------------------------------------- */

typedef struct Loaded {
  Arena arena;
  Diag diag;
  Lowerer *L;
  Program *prog;
} Loaded;

static bool load_script(Loaded *ld, const char *path) {
  arena_init(&ld->arena);
  diag_init(&ld->diag, &ld->arena);
  ld->diag.color = false;
  ld->L = lower_new(&ld->arena, &ld->diag, stdlib_dir());
  bool ok = lower_file(ld->L, path);
  ld->prog = lower_program(ld->L);
  diag_finish(&ld->diag);
  return ok;
}

static void unload(Loaded *ld) {
  lower_free(ld->L);
  prog_release(ld->prog);
  arena_free(&ld->arena);
}

/* ---- verbs ---------------------------------------------------------------- */

static int cmd_dump(int argc, char **argv) {
  DumpOptions opt = {.format = DUMP_TEXT};
  const char *file = NULL, *out = NULL;
  bool ast = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--format") == 0 || strncmp(a, "--format=", 9) == 0) {
      const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : NULL);
      if (!v) return usage_error("%s needs a value", a);
      if (!dump_parse_format(v, &opt.format))
        return usage_error("unknown format '%s' (expected text, dot or json)", v);
    } else if (strcmp(a, "--startup") == 0) {
      opt.startup = true;
    } else if (strcmp(a, "--lines") == 0) {
      opt.lines = true;
    } else if (strcmp(a, "--ast") == 0) {
      ast = true;
    } else if (strcmp(a, "--backward") == 0 || strcmp(a, "--train") == 0 || strcmp(a, "--tape") == 0) {
      fprintf(stderr, "netrun: dump %s: not implemented yet\n", a);
      return EXIT_SCRIPT;
    } else if (strcmp(a, "-o") == 0) {
      if (i + 1 >= argc) return usage_error("%s needs a file name", a);
      out = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      return usage_error("dump: unknown option '%s'", a);
    } else if (file) {
      return usage_error("dump takes one file, got a second: '%s'", a);
    } else {
      file = a;
    }
  }
  if (!file) return usage_error("%s", "dump needs a FILE");
  Loaded ld;
  int status = 0;
  if (ast) {
    arena_init(&ld.arena);
    diag_init(&ld.diag, &ld.arena);
    int idx = diag_load_file(&ld.diag, file);
    AstNode *root = idx >= 0 ? ast_parse(&ld.arena, &ld.diag, idx) : NULL;
    Out o;
    if (root && out_open(&o, out)) {
      ast_print(o.f, root);
      if (!out_close(&o)) status = EXIT_SCRIPT;
    } else {
      status = EXIT_SCRIPT;
    }
    diag_finish(&ld.diag);
    arena_free(&ld.arena);
    return status;
  }
  if (!load_script(&ld, file)) {
    status = EXIT_SCRIPT;
  } else {
    Out o;
    if (!out_open(&o, out)) status = EXIT_SCRIPT;
    else {
      dump_program(o.f, ld.prog, &opt);
      if (!out_close(&o)) status = EXIT_SCRIPT;
    }
  }
  unload(&ld);
  return status;
}

static const char *grad_kind_name(const OpProto *p) {
  switch (p->grad_kind) {
  case GRAD_NONE: return "none";
  case GRAD_COMPOSITE: return "composite";
  case GRAD_DEDICATED: return "dedicated";
  }
  return "?";
}

static void slot_list(char *buf, size_t n, const SlotProto *slots, int count) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < count && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s%s", i ? ", " : "", slots[i].name,
                          slots[i].flags & SLOT_LIST ? "[]" : "");
}

static int describe_op(const OpProto *p) {
  printf("%s: %s\n", p->type, p->doc);
  printf("inputs:\n");
  if (!p->nin) printf("  (none)\n");
  for (int i = 0; i < p->nin; i++)
    printf("  %-12s %s%s%s%s\n", p->in[i].name, p->in[i].doc ? p->in[i].doc : "",
           p->in[i].flags & SLOT_LIST ? " (list)" : "", p->in[i].flags & SLOT_OPTIONAL ? " (optional)" : "",
           p->in[i].flags & SLOT_NO_GRAD ? " (no gradient)" : "");
  printf("outputs:\n");
  if (!p->nout) printf("  (none)\n");
  for (int i = 0; i < p->nout; i++)
    printf("  %-12s %s%s\n", p->out[i].name, p->out[i].doc ? p->out[i].doc : "",
           p->out[i].flags & SLOT_LIST ? " (list)" : "");
  printf("attributes:\n");
  if (!p->nattrs) printf("  (none)\n");
  for (int i = 0; i < p->nattrs; i++) {
    printf("  %-12s %-11s ", p->attrs[i].name, attr_type_name(p->attrs[i].type));
    if (p->has_dflt[i]) {
      fputs("= ", stdout);
      attr_print(stdout, &p->dflt[i]);
    } else {
      fputs("(required)", stdout);
    }
    printf("  %s\n", p->attrs[i].doc ? p->attrs[i].doc : "");
  }
  printf("gradient: %s\n", grad_kind_name(p));
  printf("kernel: %s\n", p->kernel ? "yes" : "not yet");
  return 0;
}

static int cmd_ops(int argc, char **argv) {
  if (argc > 2) return usage_error("%s", "ops takes at most one NAME");
  int n;
  const OpProto *const *all = reg_all(reg_default(), &n);
  if (argc == 2) {
    const OpProto *p = reg_find(reg_default(), argv[1]);
    if (p) return describe_op(p);
    const char **names = mem_alloc(NULL, sizeof *names * (size_t)n);
    for (int i = 0; i < n; i++) names[i] = all[i]->type;
    const char *near = diag_nearest(argv[1], names, n);
    mem_free(names);
    if (near) fprintf(stderr, "netrun: error: unknown op '%s' (did you mean '%s'?)\n", argv[1], near);
    else fprintf(stderr, "netrun: error: unknown op '%s'; `netrun ops` lists them\n", argv[1]);
    return EXIT_SCRIPT;
  }
  printf("%-24s %-40s %-10s %s\n", "op", "inputs -> outputs", "gradient", "kernel");
  for (int i = 0; i < n; i++) {
    char in[128], out[128], sig[300];
    slot_list(in, sizeof in, all[i]->in, all[i]->nin);
    slot_list(out, sizeof out, all[i]->out, all[i]->nout);
    snprintf(sig, sizeof sig, "%s -> %s", in, out);
    printf("%-24s %-40s %-10s %s\n", all[i]->type, sig, grad_kind_name(all[i]),
           all[i]->kernel ? "yes" : "no");
  }
  return 0;
}

/* ---- run and time ------------------------------------------------------------ */

typedef struct RunArgs {
  const char *file;
  ExecOptions opt;
  const char *sets[64];
  int nsets;
  const char *feeds[64];
  int nfeeds;
  bool dump_tape;
  DumpFormat format;
  int64_t iterations;
} RunArgs;

static bool parse_count(const char *opt, const char *v, int64_t lo, int64_t *out) {
  char *end;
  errno = 0;
  long long n = v ? strtoll(v, &end, 10) : 0;
  if (!v || !*v || *end || errno || n < lo) {
    usage_error("%s needs a whole number of at least %lld", opt, (long long)lo);
    return false;
  }
  *out = n;
  return true;
}

/* Parses the options run, time and the later verbs share.  0, or the
 * usage-error exit status. */
static int parse_run_args(int argc, char **argv, RunArgs *ra, bool timing) {
  memset(ra, 0, sizeof *ra);
  exec_default_options(&ra->opt);
  ra->iterations = 10;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *eq = strchr(a, '=');
    size_t len = a[0] == '-' && eq ? (size_t)(eq - a) : strlen(a);
#define OPT(name) (strlen(name) == len && strncmp(a, name, len) == 0)
#define VALUE() (eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL)
    int64_t n;
    if (OPT("--set") || OPT("--feed")) {
      bool set = OPT("--set");
      const char *v = VALUE();
      if (!v || !strchr(v, '=')) return usage_error("%s needs NAME=%s", set ? "--set" : "--feed", set ? "VALUE" : "FILE");
      if ((set ? ra->nsets : ra->nfeeds) == 64) return usage_error("%s", "too many values fed");
      if (set) ra->sets[ra->nsets++] = v;
      else ra->feeds[ra->nfeeds++] = v;
    } else if (OPT("--seed")) {
      if (!parse_count("--seed", VALUE(), 0, &n)) return EXIT_USAGE;
      ra->opt.seed = (uint64_t)n;
    } else if (OPT("--max-steps")) {
      if (!parse_count("--max-steps", VALUE(), 0, &n)) return EXIT_USAGE;
      ra->opt.max_steps = n;
    } else if (OPT("--precision")) {
      if (!parse_count("--precision", VALUE(), 0, &n)) return EXIT_USAGE;
      if (n > 17) n = 17;
      ra->opt.precision = (int)n;
    } else if (OPT("--check-nan")) {
      ra->opt.check_nan = true;
    } else if (!timing && OPT("--dump-tape")) {
      ra->dump_tape = true;
    } else if (!timing && OPT("--format")) {
      const char *v = VALUE();
      if (!v) return usage_error("%s", "--format needs a value");
      if (!dump_parse_format(v, &ra->format))
        return usage_error("unknown format '%s' (expected text, dot or json)", v);
    } else if (timing && OPT("--iterations")) {
      if (!parse_count("--iterations", VALUE(), 1, &ra->iterations)) return EXIT_USAGE;
    } else if (a[0] == '-' && a[1]) {
      return usage_error("%s: unknown option '%s'", argv[0], a);
    } else if (ra->file) {
      return usage_error("%s takes one file, got a second: '%s'", argv[0], a);
    } else {
      ra->file = a;
    }
#undef OPT
#undef VALUE
  }
  if (!ra->file) return usage_error("%s needs a FILE", argv[0]);
  return 0;
}

static void on_interrupt(int sig) {
  (void)sig;
  exec_interrupt();
}

/* Loads the script, makes an executor and feeds it.  NULL on error. */
static Executor *start(Loaded *ld, RunArgs *ra) {
  if (!load_script(ld, ra->file)) return NULL;
  Executor *ex = exec_new(ld->prog, &ra->opt);
  bool ok = true;
  for (int i = 0; i < ra->nsets + ra->nfeeds; i++) {
    bool set = i < ra->nsets;
    const char *arg = set ? ra->sets[i] : ra->feeds[i - ra->nsets];
    const char *eq = strchr(arg, '=');
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
    const char *var = prog_export(ld->prog, name);
    const VarDesc *v = prog_var(ld->prog, var ? var : name);
    if (!v || !(v->flags & VAR_INPUT)) {
      fprintf(stderr, "netrun: error: %s %s: the script has no input named '%s'\n", set ? "--set" : "--feed",
              arg, name);
      ld->diag.nerrors++;
      ok = false;
      continue;
    }
    Tensor *t = set ? feed_parse_value(&ld->diag, name, eq + 1, v->dtype) : feed_read_csv(&ld->diag, eq + 1, v);
    char what[300];
    snprintf(what, sizeof what, "%s %s", set ? "--set" : "--feed", name);
    if (!t || !exec_feed(ex, name, t, what)) ok = false;
    tensor_unref(t);
  }
  if (!ok) {
    diag_finish(&ld->diag);
    exec_free(ex);
    return NULL;
  }
  signal(SIGINT, on_interrupt);
  return ex;
}

static int cmd_run(int argc, char **argv) {
  RunArgs ra;
  int rc = parse_run_args(argc, argv, &ra, false);
  if (rc) return rc;
  Loaded ld;
  Executor *ex = start(&ld, &ra);
  int status = EXIT_SCRIPT;
  if (ex) {
    if (exec_run(ex) == 0) {
      status = 0;
      if (ra.dump_tape) {
        Arena a;
        arena_init(&a);
        Program *tp = tape_program(exec_tape(ex), ld.prog, &a);
        DumpOptions opt = {.format = ra.format};
        fflush(stdout);
        dump_program(stdout, tp, &opt);
        arena_free(&a);
      }
    }
    fflush(stdout);
    diag_finish(&ld.diag);
    exec_free(ex);
  }
  unload(&ld);
  return status;
}

static int cmp_timing(const void *a, const void *b) {
  const OpTiming *x = a, *y = b;
  if (x->seconds != y->seconds) return x->seconds < y->seconds ? 1 : -1;
  return strcmp(x->type, y->type);
}

static int cmd_time(int argc, char **argv) {
  RunArgs ra;
  int rc = parse_run_args(argc, argv, &ra, true);
  if (rc) return rc;
  ra.opt.timing = true;
  ra.opt.tape = false;
  FILE *devnull = fopen("/dev/null", "w");
  ra.opt.out = devnull;
  Loaded ld;
  Executor *ex = start(&ld, &ra);
  int status = EXIT_SCRIPT;
  if (ex) {
    status = 0;
    for (int64_t it = 0; it < ra.iterations && status == 0; it++)
      if (exec_run(ex) < 0) status = EXIT_SCRIPT;
    if (status == 0) {
      int n;
      const OpTiming *t = exec_timings(ex, &n);
      OpTiming *sorted = mem_alloc(NULL, sizeof *sorted * (size_t)(n + 1));
      memcpy(sorted, t, sizeof *sorted * (size_t)n);
      qsort(sorted, (size_t)n, sizeof *sorted, cmp_timing);
      double total = 0;
      int64_t calls = 0;
      for (int i = 0; i < n; i++) total += sorted[i].seconds, calls += sorted[i].calls;
      printf("%-24s %10s %12s %12s %7s\n", "op", "calls", "total ms", "per call us", "share");
      for (int i = 0; i < n; i++)
        printf("%-24s %10" PRId64 " %12.3f %12.3f %6.1f%%\n", sorted[i].type, sorted[i].calls,
               sorted[i].seconds * 1e3, sorted[i].calls ? sorted[i].seconds * 1e6 / (double)sorted[i].calls : 0.0,
               total > 0 ? 100.0 * sorted[i].seconds / total : 0.0);
      printf("%-24s %10" PRId64 " %12.3f %12s %6.1f%%\n", "total", calls, total * 1e3, "", 100.0);
      printf("%" PRId64 " forward passes, %.3f ms each\n", ra.iterations, total * 1e3 / (double)ra.iterations);
      mem_free(sorted);
    }
    diag_finish(&ld.diag);
    exec_free(ex);
  }
  unload(&ld);
  if (devnull) fclose(devnull);
  return status;
}

static int cmd_help(int argc, char **argv) {
  if (argc < 2) {
    usage(stdout);
    return 0;
  }
  const Verb *v = find_verb(argv[1]);
  if (!v) return usage_error("no help for unknown verb '%s'", argv[1]);
  printf("usage: %s\n\n%s\n", v->usage, v->help);
  return 0;
}

static int cmd_later(int argc, char **argv) {
  (void)argc;
  fprintf(stderr, "netrun: %s: not implemented yet\n", argv[0]);
  return EXIT_SCRIPT;
}

int main(int argc, char **argv) {
  int status;
  if (argc < 2) {
    if (isatty(0)) {
      char *repl[] = {"repl", NULL};
      status = cmd_later(1, repl);
    } else {
      usage(stderr);
      status = EXIT_USAGE;
    }
  } else if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(stdout);
    status = 0;
  } else if (strcmp(argv[1], "--version") == 0) {
    printf("netrun %s\n", NETRUN_VERSION);
    status = 0;
  } else if (strcmp(argv[1], "--dump-backward") == 0) {
    char **args = mem_alloc(NULL, sizeof *args * (size_t)(argc + 1));
    args[0] = "dump";
    args[1] = "--backward";
    for (int i = 2; i < argc; i++) args[i] = argv[i];
    args[argc] = NULL;
    status = cmd_dump(argc, args);
    mem_free(args);
  } else if (argv[1][0] == '-') {
    status = usage_error("unknown option '%s'", argv[1]);
  } else {
    const Verb *v = find_verb(argv[1]);
    if (v) {
      status = v->run(argc - 1, argv + 1);
    } else if (strchr(argv[1], '.') || strchr(argv[1], '/') || access(argv[1], F_OK) == 0) {
      argv[0] = "run";
      status = cmd_run(argc, argv);
    } else {
      const char *names[sizeof verbs / sizeof *verbs];
      for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) names[i] = verbs[i].name;
      const char *near = diag_nearest(argv[1], names, (int)(sizeof verbs / sizeof *verbs));
      fprintf(stderr, "netrun: unknown verb '%s'%s%s%s\nverbs:", argv[1], near ? " (did you mean '" : "",
              near ? near : "", near ? "'?)" : "");
      for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) fprintf(stderr, " %s", verbs[i].name);
      fputc('\n', stderr);
      status = EXIT_USAGE;
    }
  }
  reg_free_default();
  return status;
}
