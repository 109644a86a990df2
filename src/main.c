/* main.c — the command line: verbs, options, exit statuses.
 *
 *   netrun VERB [OPTIONS] FILE      see `netrun --help` and man/netrun.1
 *
 * Exit status: 0 success, 1 an error in the script or its data, 2 a usage
 * error, 3 out of memory (mem.h), 130 interrupted (Ctrl-C). */
#include "ast.h"
#include "cli.h"
#include "registry.h"
#include "tape.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef NETRUN_VERSION
#define NETRUN_VERSION "0.1.0"
#endif

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
static int cmd_grad_verb(int argc, char **argv);
static int cmd_gradcheck_verb(int argc, char **argv);
/* Verbs implemented beside their modules. */
int cmd_data(int argc, char **argv);        /* data.c */
int cmd_checkpoint(int argc, char **argv);  /* checkpoint.c */
int cmd_plot(int argc, char **argv);        /* plot.c */

#define RUN_OPTIONS                                                                  \
  "  --set NAME=VALUE   feed input NAME a literal value (3, [[1, 2], [3, 4]])\n"      \
  "  --feed NAME=FILE   feed input NAME from a CSV file (rows: first dimension)\n"   \
  "  --seed N           seed of the random generator (default 0)\n"                 \
  "  --max-steps N      turns one while loop may take (default 1000000)\n"          \
  "  --max-memory SIZE  memory all values may take together, e.g. 512M, 4G\n"       \
  "                     (default: the machine's physical memory)\n"                \
  "  --check-nan        stop at the first op that produces NaN or Inf\n"            \
  "  --precision N      digits printed values show (default 8)\n"
#define GRAD_OPTIONS                                                                 \
  "  --loss NAME        the scalar to differentiate (default: loss)\n"              \
  "  --wrt NAMES        differentiate with respect to these (default: every param)\n" \
  "  --no-grad NAMES    treat these as constants\n"                                 \
  "  --tape             differentiate the tape of a run instead of the program\n"

static const Verb verbs[] = {
    {"dump", cmd_dump, "netrun dump [OPTIONS] FILE",
     "Lower FILE to a program and print it (see netrun-lang(5), \"The program\").\n"
     "  --format FMT       text (default), dot (Graphviz) or json\n"
     "  --startup          also print the startup block: initializers and input defaults\n"
     "  --lines            annotate every op with the source position it came from\n"
     "  --ast              print the syntax tree instead of the program\n"
     "  --backward         append the backward program (append_backward)\n"
     GRAD_OPTIONS
     "  -o OUT             write to OUT (atomically) instead of standard output\n"
     "With --tape, the run options of `netrun run` apply too."},
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
    {"grad", cmd_grad_verb, "netrun grad [OPTIONS] FILE",
     "Run FILE forward and backward and print the loss and the gradients.\n" GRAD_OPTIONS RUN_OPTIONS
     "  --format FMT       text (default) or json: {\"loss\": L, \"grads\": {NAME: {\"shape\", \"data\"}}}"},
    {"gradcheck", cmd_gradcheck_verb, "netrun gradcheck [OPTIONS] FILE",
     "Compare every gradient with central finite differences, element by element,\n"
     "and report the largest errors; exit 1 if one exceeds the tolerance.\n" GRAD_OPTIONS RUN_OPTIONS
     "  --eps E            the finite-difference step (default 1e-2: the forward runs in f32)\n"
     "  --rtol R           the tolerance on |analytic - numeric| / max(|numeric|, 1e-3) (default 5e-3)\n"
     "  --samples N        check N random elements of each variable instead of all"},
    {"train", cmd_train, "netrun train [OPTIONS] FILE",
     "Train the model FILE describes on the data its train block names.\n"
     "  --epochs N --batch N --lr X --optimizer NAME --data SPEC   override the train block\n"
     "  --seed N           seed of initializers, dropout and shuffling (default 0)\n"
     "  --limit N          use only the first N examples of each split\n"
     "  --save PATH        write a checkpoint every epoch and on Ctrl-C / SIGTERM\n"
     "  --resume PATH      continue the run a checkpoint stopped\n"
     "  --keep-best        also write PATH.best whenever the evaluation improves\n"
     "  --log FILE         every metric as JSON lines (see netrun plot)"},
    {"eval", cmd_eval, "netrun eval [OPTIONS] FILE --weights PATH",
     "Loss and accuracy of trained weights on the train block's evaluation split.\n"
     "  --weights PATH     a checkpoint written by netrun train --save\n"
     "  --data SPEC --batch N --limit N"},
    {"predict", cmd_predict, "netrun predict [OPTIONS] FILE --weights PATH --feed x=FILE.csv",
     "The predicted class of every fed example (the argmax of the train block's metric),\n"
     "or the value of --output NAME.\n" RUN_OPTIONS
     "  --weights PATH     a checkpoint written by netrun train --save\n"
     "  --output NAME      print this value instead of the classes"},
    {"plot", cmd_plot, "netrun plot [-o OUT.svg] LOG.jsonl",
     "Draw the loss and accuracy curves of a training log (netrun train --log) as SVG."},
    {"data", cmd_data, "netrun data SPEC",
     "Describe a dataset netrun can read: fashion-mnist, a CSV file, or IDX files."},
    {"checkpoint", cmd_checkpoint, "netrun checkpoint PATH",
     "Describe a checkpoint written by netrun train --save."},
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

/* ---- verbs ---------------------------------------------------------------- */

static int cmd_dump(int argc, char **argv) {
  Args a;
  int rc = cli_parse(argc, argv, &a, OPT_DUMP | OPT_GRAD | OPT_RUN);
  if (rc) return rc;
  if (a.train) return dump_train(&a);
  if (a.backward || a.tape) return dump_backward(&a);
  Loaded ld;
  int status = 0;
  if (a.ast) {
    arena_init(&ld.arena);
    diag_init(&ld.diag, &ld.arena);
    int idx = diag_load_file(&ld.diag, a.file);
    AstNode *root = idx >= 0 ? ast_parse(&ld.arena, &ld.diag, idx) : NULL;
    Out o;
    if (root && out_open(&o, a.out)) {
      ast_print(o.f, root);
      if (!out_close(&o)) status = EXIT_SCRIPT;
    } else {
      status = EXIT_SCRIPT;
    }
    diag_finish(&ld.diag);
    arena_free(&ld.arena);
    return status;
  }
  if (!load_script(&ld, a.file)) {
    status = EXIT_SCRIPT;
  } else {
    Out o;
    if (!out_open(&o, a.out)) status = EXIT_SCRIPT;
    else {
      dump_program(o.f, ld.prog, &a.dump);
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

static int cmd_run(int argc, char **argv) {
  Args a;
  int rc = cli_parse(argc, argv, &a, OPT_RUN | OPT_TAPE_DUMP);
  if (rc) return rc;
  Loaded ld;
  int status = EXIT_SCRIPT;
  Executor *ex = load_script(&ld, a.file) ? cli_start(&ld, &a) : NULL;
  if (ex) {
    if (exec_run(ex) == 0) {
      status = 0;
      if (a.dump_tape) {
        Arena arena;
        arena_init(&arena);
        Program *tp = tape_program(exec_tape(ex), ld.prog, &arena, NULL);
        fflush(stdout);
        dump_program(stdout, tp, &a.dump);
        arena_free(&arena);
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
  Args a;
  int rc = cli_parse(argc, argv, &a, OPT_RUN | OPT_TIME);
  if (rc) return rc;
  a.opt.timing = true;
  a.opt.tape = false;
  FILE *devnull = fopen("/dev/null", "w");
  a.opt.out = devnull;
  Loaded ld;
  int status = EXIT_SCRIPT;
  Executor *ex = load_script(&ld, a.file) ? cli_start(&ld, &a) : NULL;
  if (ex) {
    status = 0;
    for (int64_t it = 0; it < a.iterations && status == 0; it++)
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
      printf("%" PRId64 " forward passes, %.3f ms each\n", a.iterations, total * 1e3 / (double)a.iterations);
      mem_free(sorted);
    }
    diag_finish(&ld.diag);
    exec_free(ex);
  }
  unload(&ld);
  if (devnull) fclose(devnull);
  return status;
}

static int cmd_grad_verb(int argc, char **argv) {
  Args a;
  int rc = cli_parse(argc, argv, &a, OPT_RUN | OPT_GRAD);
  return rc ? rc : cmd_grad(&a);
}

static int cmd_gradcheck_verb(int argc, char **argv) {
  Args a;
  int rc = cli_parse(argc, argv, &a, OPT_RUN | OPT_GRAD | OPT_CHECK);
  return rc ? rc : cmd_gradcheck(&a);
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
  /* Output that could not be written (a full disk) is an error, even when
   * the verb succeeded (GNU's close_stdout). */
  errno = 0;
  if ((fflush(stdout) != 0 || ferror(stdout)) && status == 0) {
    fprintf(stderr, "netrun: error: standard output: %s\n", errno ? strerror(errno) : "write error");
    status = EXIT_SCRIPT;
  }
  /* A run stopped by Ctrl-C exits like a shell's interrupted command. */
  if (status == EXIT_SCRIPT && exec_interrupted()) status = 128 + SIGINT;
  reg_free_default();
  return status;
}
