/* repl.c — the interactive session (netrun repl [OPTIONS] [FILE]).
 *
 * A session is one program that grows: every entry (a line, or several
 * while a ( [ { is open; a file given to :load) is parsed, lowered at the
 * top level of the session's program (lower_chunk), and its new ops are
 * run by one executor that keeps every value and the tape (exec_grow,
 * exec_run_to).  An expression statement prints its value.  An entry is
 * all or nothing: when it fails to parse, lower or run, the lowerer and
 * the executor are rolled back to marks taken before it, so the session
 * is as it was.
 *
 * Lines starting with ':' are commands (see `commands` below).  Input
 * comes from libedit on a terminal (prompts, history in
 * $HOME/.netrun_history, completion), else from plain standard input, so
 * that a session can be scripted.  Diagnostics name the input "<stdin>"
 * with the line number in the input stream.
 *
 * Ctrl-C: at the prompt it drops the input typed so far; while a statement
 * runs it stops the executor at its next op (exec_interrupt), and the
 * statement fails like any other.  Without a terminal it ends the session
 * (status 130), as it ends any Unix filter.
 */
#include "cli/repl.h"

#include "autodiff/backward.h"
#include "cli/cli.h"
#include "cli/cmd.h"
#include "exec/print.h"
#include "exec/tape.h"

#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <histedit.h>
#include <locale.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define PROMPT      "netrun> "
#define CONTINUE    "   ...> "
#define HISTORY_MAX 1000
#define MAX_WORDS   64

typedef struct Buf {
  char *s;
  size_t n, cap;
} Buf;

static void buf_add(Buf *b, const char *s, size_t n) {
  VEC_RESERVE(b->s, b->cap, b->n + n + 1);
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

typedef struct Repl {
  Args args;               /* the command line: run options, FILE */
  Session ld;               /* the session: its program and diagnostics */
  Executor *ex;            /* ... and the values, the tape, the timings */
  Buf script;              /* the entries that succeeded, for :save */
  bool interactive;        /* standard input is a terminal */
  bool color;
  int line;                /* lines of input read so far */
  int failures;            /* entries and commands that failed */
  bool quit;
  FILE *term;              /* where libedit draws */
  EditLine *el;
  History *hist;
  char *histfile;          /* NULL: no history file */
  struct sigaction old_winch;
} Repl;

static volatile sig_atomic_t sigint_seen;
/* A statement runs on a terminal: the terminal has echoed "^C", and the
 * diagnostic that follows should start a line of its own. */
static volatile sig_atomic_t newline_on_sigint;

/* The terminal changed size: libedit learns it before the next line. */
static volatile sig_atomic_t resized;

static void on_sigwinch(int sig) {
  (void)sig;
  resized = 1;
}

static void on_sigint(int sig) {
  (void)sig;
  sigint_seen = 1;
  exec_interrupt();
  if (newline_on_sigint) {
    ssize_t n = write(STDERR_FILENO, "\n", 1);
    (void)n;
  }
}

/* ---- the session ------------------------------------------------------------- */

static void session_open(Repl *R) {
  session_init(&R->ld);
  /* Every entry's source, syntax and ops stay (an entry may name any value
   * made before): at the memory limit the session ends with this name. */
  R->ld.arena.what = "the session's entries";
  R->ld.diag.color = R->color;
  /* A later grad(...) may differentiate a loop or a branch run before it:
   * their turns are kept from the start. */
  ExecOptions o = R->args.opt;
  o.keep_steps = o.keep_all_steps = true;
  R->ex = exec_new(R->ld.prog, &o);
  R->script.n = 0;
}

static void session_close(Repl *R) {
  exec_free(R->ex);
  R->ex = NULL;
  session_free(&R->ld);
}

static bool failed(Repl *R) {
  diag_finish(&R->ld.diag);
  R->failures++;
  return false;
}

/* An entry read from standard input as a source, numbered from its first
 * line. */
static int add_input(Repl *R, const char *text, size_t len, int first_line) {
  int f = diag_add_source(&R->ld.diag, "<stdin>", NULL, text, len);
  R->ld.diag.files[f].line_offset = first_line - 1;
  return f;
}

/* Keeps an entry that succeeded for :save. */
static void keep(Repl *R, const char *text, size_t len) {
  while (len && (*text == ' ' || *text == '\t')) text++, len--;
  buf_add(&R->script, text, len);
  if (len && text[len - 1] != '\n') buf_add(&R->script, "\n", 1);
}

/* Prints the value of an expression statement. */
static bool show(Repl *R, const char *var, Span at) {
  Tensor *t = exec_var_value(R->ex, var);
  if (!t) {
    const char *wait = exec_waits_for(R->ex, var);
    diag_error(&R->ld.diag, at, "no value to show: it depends on input '%s', which was not fed",
               wait ? prog_user_name(R->ld.prog, wait) : "?");
    return false;
  }
  print_write(stdout, t, R->args.opt.precision);
  putchar('\n');
  fflush(stdout);
  return true;
}

/* An entry (a chunk of statements, a file) is all or nothing: begin marks
 * the session, end keeps what the entry did or rolls it back. */
typedef struct Entry {
  LowerMark *lm;
  ExecMark em;
} Entry;

static void begin(Repl *R, Entry *e) {
  R->ld.diag.nerrors = 0;
  e->lm = lower_mark(R->ld.L);
  exec_mark(R->ex, &e->em);
}

static bool end(Repl *R, Entry *e, bool ok) {
  fflush(stdout);
  if (!ok) {
    exec_rollback(R->ex, &e->em);
    lower_rollback(R->ld.L, e->lm);
    return failed(R);
  }
  lower_mark_free(e->lm);
  lower_export(R->ld.L);
  return true;
}

/* Parses, lowers and runs the statements of source `file` from byte
 * `start` on, statement by statement, printing the values of expressions.
 * All or nothing. */
static bool run_source(Repl *R, int file, uint32_t start) {
  Diag *d = &R->ld.diag;
  d->nerrors = 0;
  AstNode *root = ast_parse_at(&R->ld.arena, d, file, start);
  if (!root) return failed(R);
  if (root->list.n == 0) return true;
  Entry e;
  begin(R, &e);
  LowerStmt *st;
  int n;
  bool ok = lower_chunk(R->ld.L, root, &st, &n);
  if (ok) exec_grow(R->ex);
  for (int k = 0; ok && k < n; k++) {
    ok = exec_run_to(R->ex, st[k].end_op) == 0;
    if (ok && st[k].shown) ok = show(R, st[k].shown, root->list.items[k]->span);
  }
  if (!end(R, &e, ok)) return false;
  keep(R, d->files[file].text + start, d->files[file].len - start);
  return true;
}

/* Runs a script in the session, as `netrun run` would (nothing shown);
 * with feed, feeds the command line's --set and --feed values first. */
static bool run_file(Repl *R, const char *path, bool feed) {
  Diag *d = &R->ld.diag;
  int first = d->nfiles;
  Entry e;
  begin(R, &e);
  bool ok = lower_file(R->ld.L, path);
  if (ok) {
    exec_grow(R->ex);
    if (feed && !cli_feed(&R->ld, R->ex, &R->args)) {
      R->quit = true;   /* the command line was wrong: no session */
      ok = false;
    }
  }
  if (ok) ok = exec_run_to(R->ex, R->ld.prog->blocks[0]->nops) == 0;
  if (!end(R, &e, ok)) return false;
  const char *header = arena_printf(&R->ld.arena, "# :load %s\n", path);
  buf_add(&R->script, header, strlen(header));
  keep(R, d->files[first].text, d->files[first].len);
  return true;
}

/* ---- commands ------------------------------------------------------------------ */

typedef struct Word {
  const char *s;
  int n;
  uint32_t at;             /* offset in the line */
} Word;

typedef struct Command Command;

/* A command line being run: its words, and the line as a source (for
 * diagnostics with a caret). */
typedef struct Cmd {
  const Command *def;
  const char *line;
  size_t len;
  int file;
  Word w[MAX_WORDS];
  int nw;                  /* w[0] is the command itself */
} Cmd;

struct Command {
  const char *name, *args, *summary, *details;
  int min, max;            /* arguments */
  bool (*run)(Repl *R, Cmd *c);
};

static bool c_help(Repl *R, Cmd *c);
static bool c_ops(Repl *R, Cmd *c);
static bool c_vars(Repl *R, Cmd *c);
static bool c_shape(Repl *R, Cmd *c);
static bool c_program(Repl *R, Cmd *c);
static bool c_tape(Repl *R, Cmd *c);
static bool c_backward(Repl *R, Cmd *c);
static bool c_grad(Repl *R, Cmd *c);
static bool c_gradcheck(Repl *R, Cmd *c);
static bool c_time(Repl *R, Cmd *c);
static bool c_load(Repl *R, Cmd *c);
static bool c_save(Repl *R, Cmd *c);
static bool c_reset(Repl *R, Cmd *c);
static bool c_quit(Repl *R, Cmd *c);

static const Command commands[] = {
    {"help", "[TOPIC]", "these commands; :help COMMAND or :help OP says more",
     "Without a topic, lists the commands.  A topic is a command (with or without\n"
     "its ':') or an op, described as `netrun ops NAME` describes it.",
     0, 1, c_help},
    {"ops", "[NAME]", "the ops, the session's own included, or one op in full",
     "Lists every op the session can call, built-in or defined with `op`, with its\n"
     "inputs and outputs, its gradient and whether it has a kernel; with NAME,\n"
     "describes that op: inputs, outputs, attributes with types and defaults.",
     0, 1, c_ops},
    {"vars", "", "the names bound: dtype, shape and kind",
     "One line per name bound at the top level, in the order they were first\n"
     "bound: its dtype, its shape (the value's, or the declared one while it has\n"
     "no value) and its kind: param, input, value or function.  A value that\n"
     "waits for an input that was not fed says which.",
     0, 0, c_vars},
    {"shape", "EXPR", "the dtype and shape of EXPR, inferred without running it",
     "Lowers EXPR and prints the dtype and shape that shape inference gives it,\n"
     "as the program dump writes them (f32[B, 10]); nothing runs and nothing is\n"
     "bound.",
     1, MAX_WORDS, c_shape},
    {"program", "", "the session's program, as netrun dump prints it",
     "Every statement that succeeded so far has added its ops to one program;\n"
     "this prints it in the text format of `netrun dump`.",
     0, 0, c_program},
    {"tape", "", "the tape: the ops run that a gradient can flow through",
     "The ops the session ran that read a value computed from a parameter, as one\n"
     "flat block (loops unrolled), as `netrun run --dump-tape` prints it.",
     0, 0, c_tape},
    {"backward", "NAME [WRT...]", "the program with the backward of scalar NAME",
     "Appends the backward of NAME (a float scalar) with respect to the names WRT\n"
     "(default: every param) to the session's program, prints the program as\n"
     "`netrun dump --backward --loss NAME` would, and takes the backward away again.",
     1, MAX_WORDS - 1, c_backward},
    {"grad", "NAME [WRT...]", "the gradients of scalar NAME, from the tape",
     "Differentiates NAME (a float scalar computed from params) through the ops the\n"
     "tape recorded, with respect to the names WRT (default: every param on the\n"
     "tape), and prints NAME and the gradients as `netrun grad` does.",
     1, MAX_WORDS - 1, c_grad},
    {"gradcheck", "NAME [WRT...]", "those gradients against finite differences",
     "Computes the gradients as :grad does and compares every element with central\n"
     "differences of NAME, taken in f64 (eps 1e-6, rtol 1e-3) by running the tape's\n"
     "forward ops again over f64 copies of the session's values (in f32 under\n"
     "`netrun repl --dtype f32`); prints the table of `netrun gradcheck`.",
     1, MAX_WORDS - 1, c_gradcheck},
    {"time", "[STATEMENT]", "time per op type: of the session, or of STATEMENT",
     "Without a statement, the calls and time of every op type the session has run\n"
     "so far, slowest first, as `netrun time` prints them; with one, runs it as if\n"
     "it were typed and prints the table of its ops only.",
     0, MAX_WORDS, c_time},
    {"load", "FILE", "run a script in the session",
     "Runs FILE in the session as `netrun run` would (expressions print nothing), and\n"
     "leaves its names bound.  If it fails, nothing of it stays.",
     1, 1, c_load},
    {"save", "FILE", "write the entries that succeeded as a script",
     "Writes every entry that succeeded since the session began (or :reset), in\n"
     "order, as a script that rebuilds the session; a file loaded with :load\n"
     "is written whole.  FILE is replaced atomically.",
     1, 1, c_save},
    {"reset", "", "forget everything: a new, empty session",
     "Drops every name, value, op and the tape; the history stays.", 0, 0, c_reset},
    {"quit", "", "leave (Ctrl-D too)", "Ends the session.", 0, 0, c_quit},
};
static const int ncommands = (int)(sizeof commands / sizeof *commands);

/* ":grad NAME [WRT...]" */
static const char *usage_of(const Command *cmd, char *buf, size_t n) {
  snprintf(buf, n, ":%s%s%s", cmd->name, *cmd->args ? " " : "", cmd->args);
  return buf;
}

static Span word_span(const Cmd *c, int i) {
  if (i < 0 || i >= c->nw) return (Span){c->file, 0, (uint32_t)c->len};
  return (Span){c->file, c->w[i].at, c->w[i].at + (uint32_t)c->w[i].n};
}

static bool cmd_fail(Repl *R, Cmd *c, int word, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool cmd_fail(Repl *R, Cmd *c, int word, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror(&R->ld.diag, word_span(c, word), fmt, ap);
  va_end(ap);
  return failed(R);
}

static char *word_dup(Repl *R, const Word *w) { return arena_strndup(&R->ld.arena, w->s, (size_t)w->n); }

/* The variable a session name is bound to, or an error at word i. */
static const char *bound_var(Repl *R, Cmd *c, int i) {
  const char *name = word_dup(R, &c->w[i]);
  const char *var = prog_export(R->ld.prog, name);
  if (var) return var;
  const Program *p = R->ld.prog;
  const char **names = mem_alloc(NULL, sizeof *names * (size_t)(p->nexports + 1));
  for (int k = 0; k < p->nexports; k++) names[k] = p->exports[k].name;
  const char *near = diag_nearest(name, names, p->nexports);
  if (near) cmd_fail(R, c, i, "unknown name '%s' (did you mean '%s'?)", name, near);
  else cmd_fail(R, c, i, "unknown name '%s'", name);
  mem_free(names);
  return NULL;
}

/* Where the code after the command word starts (:shape EXPR, :time STATEMENT). */
static uint32_t rest_at(const Cmd *c) { return c->w[0].at + (uint32_t)c->w[0].n; }

static void print_help_list(void) {
  fputs("Statements run as in a script as soon as they are complete; an expression\n"
        "on its own prints its value.  An open ( [ or { continues on the next line.\n"
        "Ctrl-C cancels the input or stops a running statement; Ctrl-D leaves.\n"
        "\ncommands:\n",
        stdout);
  for (int i = 0; i < ncommands; i++) {
    char usage[64];
    printf("  %-25s %s\n", usage_of(&commands[i], usage, sizeof usage), commands[i].summary);
  }
  fputs("\n:help COMMAND describes a command, :help OP an op.\n", stdout);
}

static const Command *find_command(const char *name, int n) {
  for (int i = 0; i < ncommands; i++)
    if ((int)strlen(commands[i].name) == n && strncmp(commands[i].name, name, (size_t)n) == 0) return &commands[i];
  return NULL;
}

/* Every op the session can call: the built-ins and its own, by name. */
static const OpProto **all_ops(Repl *R, int *n) {
  int nb, nu = 0;
  const OpProto *const *b = reg_all(reg_default(), &nb);
  const OpProto *const *u = R->ld.prog->user_ops ? reg_all(R->ld.prog->user_ops, &nu) : NULL;
  const OpProto **all = mem_alloc(NULL, sizeof *all * (size_t)(nb + nu + 1));
  int i = 0, j = 0, k = 0;
  while (i < nb || j < nu)
    all[k++] = j >= nu || (i < nb && strcmp(b[i]->type, u[j]->type) < 0) ? b[i++] : u[j++];
  *n = k;
  return all;
}

static bool unknown_topic(Repl *R, Cmd *c, const char *what, bool with_commands) {
  const char *name = word_dup(R, &c->w[1]);
  int n;
  const OpProto **ops = all_ops(R, &n);
  const char **cands = mem_alloc(NULL, sizeof *cands * (size_t)(n + ncommands + 1));
  for (int i = 0; i < ncommands; i++) cands[i] = commands[i].name;
  /* A command first: :help is mostly asked about them. */
  const char *bare = name[0] == ':' ? name + 1 : name;
  const char *near = with_commands ? diag_nearest(bare, cands, ncommands) : NULL;
  bool cmd = near != NULL;
  int nc = reg_callable_names(ops, n, cands);
  if (!near) near = diag_nearest(bare, cands, nc);
  if (near) cmd_fail(R, c, 1, "%s '%s' (did you mean '%s%s'?)", what, name, cmd ? ":" : "", near);
  else cmd_fail(R, c, 1, "%s '%s'", what, name);
  mem_free(cands);
  mem_free(ops);
  return false;
}

/* :help [TOPIC] */
static bool c_help(Repl *R, Cmd *c) {
  if (c->nw == 1) {
    print_help_list();
    return true;
  }
  const Word *t = &c->w[1];
  const Command *cmd = t->s[0] == ':' ? find_command(t->s + 1, t->n - 1) : find_command(t->s, t->n);
  if (cmd) {
    char usage[64];
    printf("usage: %s\n\n%s\n", usage_of(cmd, usage, sizeof usage), cmd->details);
    return true;
  }
  const OpProto *op = reg_find_op(R->ld.prog, word_dup(R, t));
  if (op) {
    reg_describe(stdout, op);
    return true;
  }
  return unknown_topic(R, c, "no help for", true);
}

/* :ops [NAME] */
static bool c_ops(Repl *R, Cmd *c) {
  if (c->nw == 2) {
    const OpProto *op = reg_find_op(R->ld.prog, word_dup(R, &c->w[1]));
    if (!op) return unknown_topic(R, c, "unknown op", false);
    reg_describe(stdout, op);
    return true;
  }
  int n;
  const OpProto **ops = all_ops(R, &n);
  reg_print_table(stdout, ops, n);
  mem_free(ops);
  return true;
}

/* :vars — name, dtype, shape, kind of every name bound, in binding order. */
static bool c_vars(Repl *R, Cmd *c) {
  (void)c;
  Lowerer *L = R->ld.L;
  int n = lower_nglobals(L);
  char (*shape)[128] = mem_alloc(NULL, sizeof *shape * (size_t)(n + 1));
  const char **kind = mem_alloc(NULL, sizeof *kind * (size_t)(n + 1));
  const char **dtype = mem_alloc(NULL, sizeof *dtype * (size_t)(n + 1));
  int wname = 4, wshape = 5;
  for (int i = 0; i < n; i++) {
    const char *var, *name = lower_global(L, i, &var);
    kind[i] = NULL;
    if (!name || !*name) continue;
    if (!var) {
      kind[i] = "function";
      dtype[i] = "-";
      snprintf(shape[i], sizeof shape[i], "-");
    } else {
      const VarDesc *v = prog_var(R->ld.prog, var);
      Tensor *t = exec_var_value(R->ex, var);
      dtype[i] = dtype_name(t ? t->dtype : v->dtype);
      if (t) tensor_shape_str(t, shape[i], sizeof shape[i]);
      else shape_str(&v->shape, shape[i], sizeof shape[i]);
      kind[i] = v->flags & VAR_PARAM ? "param" : v->flags & VAR_KEPT ? "state" : v->flags & VAR_INPUT ? "input" : "value";
      if (!t) {
        const char *wait = exec_waits_for(R->ex, var);
        kind[i] = wait && strcmp(wait, var) == 0 ? "input, not fed"
                  : arena_printf(&R->ld.arena, "%s, waits for input '%s'", kind[i],
                                 wait ? prog_user_name(R->ld.prog, wait) : "?");
      }
    }
    if ((int)strlen(name) > wname) wname = (int)strlen(name);
    if ((int)strlen(shape[i]) > wshape) wshape = (int)strlen(shape[i]);
  }
  printf("%-*s  %-5s  %-*s  %s\n", wname, "name", "dtype", wshape, "shape", "kind");
  for (int i = 0; i < n; i++) {
    const char *var, *name = lower_global(L, i, &var);
    if (kind[i]) printf("%-*s  %-5s  %-*s  %s\n", wname, name, dtype[i], wshape, shape[i], kind[i]);
  }
  mem_free(shape);
  mem_free(kind);
  mem_free(dtype);
  return true;
}

/* :shape EXPR — lowered, inferred, then undone; nothing runs. */
static bool c_shape(Repl *R, Cmd *c) {
  Diag *d = &R->ld.diag;
  d->nerrors = 0;
  AstNode *root = ast_parse_at(&R->ld.arena, d, c->file, rest_at(c));
  if (!root) return failed(R);
  if (root->list.n != 1 || root->list.items[0]->kind != AST_EXPR)
    return cmd_fail(R, c, root->list.n > 1 ? -1 : 1, ":shape takes one expression");
  LowerMark *lm = lower_mark(R->ld.L);
  LowerStmt *st;
  int n;
  bool ok = lower_chunk(R->ld.L, root, &st, &n);
  const VarDesc *v = ok && st[0].shown ? prog_var(R->ld.prog, st[0].shown) : NULL;
  if (ok && !v) diag_error(d, root->list.items[0]->span, "this expression gives no value");
  if (v) {
    char buf[256];
    printf("%s%s\n", dtype_name(v->dtype), shape_str(&v->shape, buf, sizeof buf));
  }
  lower_rollback(R->ld.L, lm);
  return v ? true : failed(R);
}

static const DumpOptions plain_dump;

/* :program */
static bool c_program(Repl *R, Cmd *c) {
  (void)c;
  dump_program(stdout, R->ld.prog, &plain_dump);
  return true;
}

/* :tape */
static bool c_tape(Repl *R, Cmd *c) {
  (void)c;
  Arena a;
  arena_init(&a);
  Program *tp = tape_program(exec_tape(R->ex), R->ld.prog, &a, NULL);
  dump_program(stdout, tp, &plain_dump);
  arena_free(&a);
  return true;
}

/* The arguments of :backward, :grad and :gradcheck: NAME [WRT...], every
 * one a bound value.  Fills a like the command line of the grad verbs. */
static bool grad_args(Repl *R, Cmd *c, Args *a) {
  *a = R->args;
  a->loss = word_dup(R, &c->w[1]);
  a->nwrt = 0;
  a->nno_grad = 0;
  a->samples = 0;
  a->tape = true;
  a->json = false;
  for (int i = 1; i < c->nw; i++) {
    if (!bound_var(R, c, i)) return false;
    if (i > 1) a->wrt[a->nwrt++] = word_dup(R, &c->w[i]);
  }
  return true;
}

/* Is the value of var on the tape?  Found by the tensor, not the name: a
 * loop's result, or a loop's gradient, is the value a turn made. */
static bool on_tape(Repl *R, const char *var) {
  const Tape *t = exec_tape(R->ex);
  const Tensor *x = exec_var_value(R->ex, var);
  for (int i = 0; x && i < t->n; i++)
    for (int k = 0; k < t->entries[i].nin + t->entries[i].nout; k++)
      if (t->entries[i].vals[k] == x) return true;
  return false;
}

/* Before differentiating the tape: the loss has a value computed from a
 * parameter, and every WRT is on the tape. */
static bool tape_ready(Repl *R, Cmd *c, const Args *a) {
  const char *lv = prog_export(R->ld.prog, a->loss);
  Tensor *t = exec_var_value(R->ex, lv);
  if (!t) {
    const char *wait = exec_waits_for(R->ex, lv);
    return cmd_fail(R, c, 1, "'%s' has no value: it depends on input '%s', which was not fed", a->loss,
                    wait ? prog_user_name(R->ld.prog, wait) : "?");
  }
  if (!t->requires_grad || !on_tape(R, lv))
    return cmd_fail(R, c, 1, "'%s' does not depend on a parameter, so it has no gradients (the tape records only what is computed from params)",
                    a->loss);
  for (int i = 0; i < a->nwrt; i++) {
    const VarDesc *w = prog_named_var(R->ld.prog, a->wrt[i]);   /* a parameter, though rebound */
    if (!w || !on_tape(R, w->name))
      return cmd_fail(R, c, 2 + i, "'%s' is not on the tape: no op that a gradient flows through read it", a->wrt[i]);
  }
  return true;
}

/* :backward NAME [WRT...] — appended to the session's program, printed,
 * and undone. */
static bool c_backward(Repl *R, Cmd *c) {
  Args a;
  if (!grad_args(R, c, &a)) return false;
  Diag *d = &R->ld.diag;
  d->nerrors = 0;
  LowerMark *lm = lower_mark(R->ld.L);
  BackwardResult bw;
  bool ok = bwd_append(R->ld.prog, a.loss, (const char *const *)a.wrt, a.nwrt, NULL, 0, &bw);
  if (ok) dump_program(stdout, R->ld.prog, &plain_dump);
  lower_rollback(R->ld.L, lm);
  return ok ? true : failed(R);
}

/* :grad NAME [WRT...] */
static bool c_grad(Repl *R, Cmd *c) {
  Args a;
  R->ld.diag.nerrors = 0;
  if (!grad_args(R, c, &a) || !tape_ready(R, c, &a)) return false;
  return cmd_grad_session(R->ld.prog, R->ex, &a) == 0 ? true : failed(R);
}

/* :gradcheck NAME [WRT...] */
static bool c_gradcheck(Repl *R, Cmd *c) {
  Args a;
  R->ld.diag.nerrors = 0;
  if (!grad_args(R, c, &a) || !tape_ready(R, c, &a)) return false;
  return cmd_gradcheck_session(R->ld.prog, R->ex, &a) == 0 ? true : failed(R);
}

/* :time [STATEMENT] */
static bool c_time(Repl *R, Cmd *c) {
  int n;
  const OpTiming *t = exec_timings(R->ex, &n);
  if (c->nw == 1) {
    cli_print_timings(stdout, t, n);
    return true;
  }
  OpTiming *before = mem_alloc(NULL, sizeof *before * (size_t)(n + 1));
  if (n) memcpy(before, t, sizeof *before * (size_t)n);
  int nbefore = n;
  bool ok = run_source(R, c->file, rest_at(c));
  if (ok) {
    t = exec_timings(R->ex, &n);
    OpTiming *diff = mem_alloc(NULL, sizeof *diff * (size_t)(n + 1));
    int nd = 0;
    for (int i = 0; i < n; i++) {
      OpTiming o = t[i];
      if (i < nbefore) o.calls -= before[i].calls, o.seconds -= before[i].seconds;
      if (o.calls) diff[nd++] = o;
    }
    cli_print_timings(stdout, diff, nd);
    mem_free(diff);
  }
  mem_free(before);
  return ok;
}

/* :load FILE */
static bool c_load(Repl *R, Cmd *c) { return run_file(R, word_dup(R, &c->w[1]), false); }

/* :save FILE — written whole or not at all (a temporary file renamed). */
static bool c_save(Repl *R, Cmd *c) {
  OutFile o;
  if (!file_out_open(&o, word_dup(R, &c->w[1]))) return failed(R);
  if (R->script.n) fwrite(R->script.s, 1, R->script.n, o.f);
  return file_out_close(&o) ? true : failed(R);
}

/* :reset */
static bool c_reset(Repl *R, Cmd *c) {
  (void)c;
  session_close(R);
  session_open(R);
  return true;
}

/* :quit */
static bool c_quit(Repl *R, Cmd *c) {
  (void)c;
  R->quit = true;
  return true;
}


static int split_words(const char *line, size_t len, Word *w, int max) {
  int n = 0;
  size_t i = 0;
  while (i < len && n < max) {
    while (i < len && isspace((unsigned char)line[i])) i++;
    if (i == len) break;
    size_t s = i;
    while (i < len && !isspace((unsigned char)line[i])) i++;
    w[n++] = (Word){line + s, (int)(i - s), (uint32_t)s};
  }
  return n;
}

static bool run_command(Repl *R, const char *line, size_t len) {
  while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
  Cmd c;
  memset(&c, 0, sizeof c);
  c.line = line;
  c.len = len;
  c.file = add_input(R, line, len, R->line);
  c.nw = split_words(line, len, c.w, MAX_WORDS);
  R->ld.diag.nerrors = 0;
  const Word *name = &c.w[0];
  c.def = find_command(name->s + 1, name->n - 1);
  if (!c.def) {
    const char *names[sizeof commands / sizeof *commands];
    for (int i = 0; i < ncommands; i++) names[i] = commands[i].name;
    const char *typed = arena_strndup(&R->ld.arena, name->s + 1, (size_t)name->n - 1);
    const char *near = diag_nearest(typed, names, ncommands);
    if (near) return cmd_fail(R, &c, 0, "unknown command ':%s' (did you mean ':%s'?)", typed, near);
    return cmd_fail(R, &c, 0, "unknown command ':%s'; :help lists the commands", typed);
  }
  int nargs = c.nw - 1;
  char usage[64];
  if (nargs < c.def->min || nargs > c.def->max)
    return cmd_fail(R, &c, nargs > c.def->max ? c.def->max + 1 : 0, "usage: %s", usage_of(c.def, usage, sizeof usage));
  bool ok = c.def->run(R, &c);
  fflush(stdout);
  return ok;
}

/* ---- completion ------------------------------------------------------------------ */

typedef struct Names {
  const char **s;
  int n, cap;
  Arena *arena;
} Names;

static void names_add(Names *ns, const char *s) {
  VEC_RESERVE(ns->s, ns->cap, ns->n + 1);
  ns->s[ns->n++] = s;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static const char *const keywords[] = {"input", "param", "def", "op", "grad", "return", "while", "if",
                                       "else", "import", "and", "or", "not", "true", "false"};

/* Files and folders (with a '/') whose path starts with prefix. */
static void file_names(Names *ns, const char *prefix) {
  size_t n = strlen(prefix);
  char *pattern = arena_alloc(ns->arena, 2 * n + 2);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (strchr("*?[\\", prefix[i])) pattern[k++] = '\\';
    pattern[k++] = prefix[i];
  }
  pattern[k++] = '*';
  glob_t g;
  if (glob(pattern, GLOB_MARK, NULL, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; i++) names_add(ns, arena_strdup(ns->arena, g.gl_pathv[i]));
  globfree(&g);
}

/* The words that could complete the word [start, cursor) of the line. */
static void candidates(Repl *R, const char *line, const char *start, Names *ns, bool *calls) {
  const char *p = line;
  while (p < start && isspace((unsigned char)*p)) p++;
  *calls = false;
  if (p == start - 1 && *p == ':') {          /* the command itself */
    for (int i = 0; i < ncommands; i++) names_add(ns, commands[i].name);
    return;
  }
  const Command *cmd = NULL;
  if (p < start && *p == ':') {
    const char *e = p + 1;
    while (e < start && !isspace((unsigned char)*e)) e++;
    cmd = find_command(p + 1, (int)(e - p - 1));
    if (cmd && (strcmp(cmd->name, "load") == 0 || strcmp(cmd->name, "save") == 0)) return;  /* files: see complete() */
  }
  /* After :ops and :help, op names (internal ones too); after :shape and
   * :time, a statement's words; after the other commands, session names. */
  bool about = cmd && (strcmp(cmd->name, "ops") == 0 || strcmp(cmd->name, "help") == 0);
  bool code = !cmd || strcmp(cmd->name, "shape") == 0 || strcmp(cmd->name, "time") == 0;
  if (cmd && strcmp(cmd->name, "help") == 0)
    for (int i = 0; i < ncommands; i++) names_add(ns, commands[i].name);
  if (about || code) {
    int n;
    const OpProto **all = all_ops(R, &n);
    for (int i = 0; i < n; i++)
      if (about || !(all[i]->flags & OP_INTERNAL)) names_add(ns, all[i]->type);
    mem_free(all);
  }
  if (!about) {
    for (int i = 0; i < lower_nglobals(R->ld.L); i++) {
      const char *var, *name = lower_global(R->ld.L, i, &var);
      if (name && *name && (code || var)) names_add(ns, name);
    }
  }
  if (code)
    for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++) names_add(ns, keywords[i]);
  *calls = code;
}

/* Prints the matches in columns under the line being edited. */
static void list_matches(Repl *R, const char *const *m, int n) {
  int width = 80, longest = 1;
  struct winsize ws;
  if (ioctl(fileno(R->term), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) width = ws.ws_col;
  for (int i = 0; i < n; i++)
    if ((int)strlen(m[i]) > longest) longest = (int)strlen(m[i]);
  int cols = width / (longest + 2);
  if (cols < 1) cols = 1;
  int rows = (n + cols - 1) / cols;
  fputc('\n', R->term);
  for (int r = 0; r < rows; r++) {
    for (int k = r; k < n; k += rows) fprintf(R->term, "%-*s", k + rows < n ? longest + 2 : 0, m[k]);
    fputc('\n', R->term);
  }
}

/* Tab: completes the word before the cursor as far as the candidates
 * agree; lists them when that is no further. */
static unsigned char complete(EditLine *el, int ch) {
  (void)ch;
  void *data;
  el_get(el, EL_CLIENTDATA, &data);
  Repl *R = data;
  const LineInfo *li = el_line(el);
  Arena scratch;
  arena_init(&scratch);
  const char *line = arena_strndup(&scratch, li->buffer, (size_t)(li->lastchar - li->buffer));
  const char *cursor = line + (li->cursor - li->buffer);
  Names ns = {.arena = &scratch};
  const char *p = line;
  while (*p == ' ' || *p == '\t') p++;
  bool files = strncmp(p, ":load ", 6) == 0 || strncmp(p, ":save ", 6) == 0;
  const char *start = cursor;
  bool calls = false;
  if (files) {
    while (start > line && !isspace((unsigned char)start[-1])) start--;
    file_names(&ns, arena_strndup(&scratch, start, (size_t)(cursor - start)));
  } else {
    while (start > line && (isalnum((unsigned char)start[-1]) || start[-1] == '_')) start--;
    candidates(R, line, start, &ns, &calls);
  }
  size_t typed = (size_t)(cursor - start);
  int n = 0;
  for (int i = 0; i < ns.n; i++)
    if (strncmp(ns.s[i], start, typed) == 0) ns.s[n++] = ns.s[i];
  qsort(ns.s, (size_t)n, sizeof *ns.s, cmp_str);
  int u = 0;
  for (int i = 0; i < n; i++)
    if (!u || strcmp(ns.s[u - 1], ns.s[i]) != 0) ns.s[u++] = ns.s[i];
  unsigned char rc = CC_ERROR;
  if (u == 1) {
    const char *rest = ns.s[0] + typed;
    bool dir = files && rest[0] && rest[strlen(rest) - 1] == '/';
    bool is_cmd = start > line && start[-1] == ':' && find_command(ns.s[0], (int)strlen(ns.s[0]));
    const char *tail = files ? (dir ? "" : " ") : is_cmd ? " " : "";
    if (calls && reg_find_op(R->ld.prog, ns.s[0])) tail = "(";
    for (int i = 0; !*tail && calls && i < lower_nglobals(R->ld.L); i++) {
      const char *var, *name = lower_global(R->ld.L, i, &var);
      if (name && !var && strcmp(name, ns.s[0]) == 0) tail = "(";
    }
    const char *ins = arena_printf(&scratch, "%s%s", rest, tail);
    if (*ins) el_insertstr(el, ins);
    rc = CC_REFRESH;
  } else if (u > 1) {
    size_t common = strlen(ns.s[0]);
    for (int i = 1; i < u; i++) {
      size_t k = 0;
      while (k < common && ns.s[i][k] == ns.s[0][k]) k++;
      common = k;
    }
    if (common > typed) {
      el_insertstr(el, arena_strndup(&scratch, ns.s[0] + typed, common - typed));
      rc = CC_REFRESH;
    } else {
      list_matches(R, ns.s, u);
      rc = CC_REDISPLAY;
    }
  }
  mem_free(ns.s);
  arena_free(&scratch);
  return rc;
}

/* ---- reading input ------------------------------------------------------------------ */

static const char *prompt_fn(EditLine *el) {
  (void)el;
  return PROMPT;
}

static const char *continue_fn(EditLine *el) {
  (void)el;
  return CONTINUE;
}

static void editor_open(Repl *R) {
  setlocale(LC_CTYPE, "");   /* multibyte input; numbers are unaffected (LC_NUMERIC) */
  R->term = isatty(1) ? stdout : stderr;
  R->el = el_init("netrun", stdin, R->term, stderr);
  el_set(R->el, EL_CLIENTDATA, R);
  el_set(R->el, EL_EDITOR, "emacs");
  el_set(R->el, EL_PROMPT, prompt_fn);
  R->hist = history_init();
  HistEvent ev;
  history(R->hist, &ev, H_SETSIZE, HISTORY_MAX);
  history(R->hist, &ev, H_SETUNIQUE, 1);
  el_set(R->el, EL_HIST, history, R->hist);
  /* The wide call keeps our (static) strings; the narrow one copies them
   * and never frees the copies. */
  el_wset(R->el, EL_ADDFN, L"netrun-complete", L"complete a name, an op or a command", complete);
  el_set(R->el, EL_BIND, "^I", "netrun-complete", NULL);
  el_source(R->el, NULL);   /* the user's ~/.editrc */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigwinch;
  sa.sa_flags = SA_RESTART;   /* a read at the prompt goes on */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGWINCH, &sa, &R->old_winch);
  const char *home = getenv("HOME");
  if (home && *home) {
    size_t n = strlen(home) + sizeof "/.netrun_history";
    R->histfile = mem_alloc(NULL, n);
    snprintf(R->histfile, n, "%s/.netrun_history", home);
    history(R->hist, &ev, H_LOAD, R->histfile);   /* none yet is fine */
  }
}

static void editor_close(Repl *R) {
  HistEvent ev;
  /* A history that cannot be written (a read-only home) is not an error. */
  if (R->histfile) history(R->hist, &ev, H_SAVE, R->histfile);
  history_end(R->hist);
  el_end(R->el);
  sigaction(SIGWINCH, &R->old_winch, NULL);
  mem_free(R->histfile);
}

typedef enum { READ_LINE, READ_EOF, READ_INTERRUPT } ReadStatus;

/* One line of input (with its '\n' if it had one) into *line. */
static ReadStatus read_line(Repl *R, bool more, Buf *line) {
  line->n = 0;
  sigint_seen = 0;
  if (R->el) {
    if (resized) el_resize(R->el), resized = 0;
    el_set(R->el, EL_PROMPT, more ? continue_fn : prompt_fn);
    int n;
    const char *s = el_gets(R->el, &n);
    if (!s && sigint_seen) return READ_INTERRUPT;
    if (!s || n <= 0) return READ_EOF;
    buf_add(line, s, (size_t)n);
    HistEvent ev;
    size_t len = (size_t)n;
    while (len && (s[len - 1] == '\n' || s[len - 1] == '\r')) len--;
    bool blank = true;
    for (size_t i = 0; i < len; i++) blank &= isspace((unsigned char)s[i]) != 0;
    if (!blank) {
      char *entry = mem_alloc(NULL, len + 1);
      memcpy(entry, s, len);
      entry[len] = 0;
      history(R->hist, &ev, H_ENTER, entry);
      mem_free(entry);
    }
    return READ_LINE;
  }
  for (;;) {
    int ch = getchar();
    if (ch == EOF) {
      if (sigint_seen) return READ_INTERRUPT;
      if (ferror(stdin) && errno == EINTR) {
        clearerr(stdin);
        continue;
      }
      return line->n ? READ_LINE : READ_EOF;
    }
    char c = (char)ch;
    buf_add(line, &c, 1);
    if (c == '\n') return READ_LINE;
  }
}

static bool is_command(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return *s == ':';
}

/* A session keeps every entry it ran (its source, syntax, ops and values:
 * a later entry may name any of them).  Near the memory limit, new entries
 * are refused with an error, not run until an allocation deep inside ends
 * the session; commands (:reset, :save, :quit) still work. */
#define REPL_RESERVE ((int64_t)1 << 20)
static bool at_memory_limit(Repl *R) {
  int64_t limit = mem_limit(), reserve = limit / 8 < REPL_RESERVE ? limit / 8 : REPL_RESERVE;
  if (limit - mem_used() >= reserve) return false;
  char a[32], b[32];
  fprintf(stderr, "<stdin>:%d: error: out of memory: the session's entries and values take %s of the memory limit of %s "
          "(--max-memory); the entry is not run (:reset frees them)\n", R->line,
          mem_size_str((double)mem_used(), a, sizeof a), mem_size_str((double)limit, b, sizeof b));
  mem_limit_reached();
  R->failures++;
  return true;
}

/* Reads chunks and commands until the end of input or :quit. */
static void loop(Repl *R) {
  Buf line = {0}, chunk = {0};
  int chunk_line = 0;
  while (!R->quit) {
    ReadStatus st = read_line(R, chunk.n > 0, &line);
    if (st == READ_INTERRUPT) {
      if (!R->interactive) break;
      fputc('\n', R->term);
      chunk.n = 0;
      continue;
    }
    if (st == READ_EOF) {
      if (chunk.n) {
        run_source(R, add_input(R, chunk.s, chunk.n, chunk_line), 0);
        chunk.n = 0;
      }
      if (R->interactive) fputc('\n', R->term);
      break;
    }
    R->line++;
    exec_interrupt_reset();   /* a Ctrl-C at the prompt is not for this entry */
    newline_on_sigint = R->interactive;
    if (!chunk.n && is_command(line.s)) {
      run_command(R, line.s, line.n);
    } else if (!chunk.n && at_memory_limit(R)) {
      continue;
    } else {
      if (!chunk.n) chunk_line = R->line;
      buf_add(&chunk, line.s, line.n);
      if (ast_unclosed(chunk.s, chunk.n) == 0) {
        run_source(R, add_input(R, chunk.s, chunk.n, chunk_line), 0);
        chunk.n = 0;
      }
    }
    newline_on_sigint = 0;
    if (sigint_seen && !R->interactive) break;
  }
  mem_free(line.s);
  mem_free(chunk.s);
}

int repl_main(int argc, char **argv) {
  Repl *R = mem_calloc(1, sizeof *R);
  int rc = cli_parse(argc, argv, &R->args, OPT_RUN | OPT_MAYBE_FILE);
  if (rc) {
    mem_free(R);
    return rc;
  }
  if (!R->args.file && R->args.nsets + R->args.nfeeds)
    rc = diag_usage("%s", "repl: --set and --feed feed the inputs of a FILE");
  FILE *f = R->args.file ? fopen(R->args.file, "rb") : NULL;
  if (f) fclose(f);
  else if (!rc && R->args.file) {
    diag_error(NULL, SPAN_NONE, "cannot read %s: %s", R->args.file, strerror(errno));
    rc = EXIT_SCRIPT;
  }
  if (rc) {
    mem_free(R);
    return rc;
  }
  R->interactive = isatty(0);
  const char *term = getenv("TERM");
  R->color = R->interactive && isatty(2) && !getenv("NO_COLOR") && !(term && strcmp(term, "dumb") == 0);
  R->args.opt.timing = true;
  R->args.opt.out = stdout;
  /* Values and diagnostics keep their order when both go to one pipe. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;   /* no SA_RESTART: a read at the prompt returns */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old);
  session_open(R);
  if (R->interactive) {
    editor_open(R);
    printf("netrun %s: statements run as you enter them; :help lists the commands.\n", NETRUN_VERSION);
  }
  if (R->args.file) run_file(R, R->args.file, true);
  bool fatal = R->quit;   /* the command line's values could not be fed */
  loop(R);
  if (R->el) editor_close(R);
  session_close(R);
  mem_free(R->script.s);
  sigaction(SIGINT, &old, NULL);
  int status = fatal                              ? EXIT_SCRIPT
               : sigint_seen && !R->interactive   ? 128 + SIGINT
               : R->failures && !R->interactive   ? EXIT_SCRIPT
                                                  : 0;
  mem_free(R);
  return status;
}
