/* main.c — the command line: verbs, options, exit statuses.
 *
 *   netrun VERB [OPTIONS] FILE      see `netrun --help` and man/netrun.1
 *   --plugin PATH.so, anywhere     loads a plugin first (plugin.h)
 *
 * Exit status: 0 success, 1 an error in the script or its data, 2 a usage
 * error, 3 out of memory (mem.h), 130 interrupted (Ctrl-C). */
#include "front/ast.h"
#include "cli/cli.h"
#include "cli/cmd.h"
#include "io/weights.h"
#include "io/data.h"
#include "cli/option.h"
#include "exec/par.h"
#include "ops/plugin.h"
#include "ir/registry.h"
#include "cli/repl.h"
#include "exec/tape.h"

#include <cblas.h>
#include <dnnl.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct Verb {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *usage;
  const char *help;
} Verb;

static int cmd_dump(int argc, char **argv);
static int cmd_ops(int argc, char **argv);
static int cmd_help(int argc, char **argv);
static int cmd_run(int argc, char **argv);
static int cmd_time(int argc, char **argv);
static int cmd_grad_verb(int argc, char **argv);
static int cmd_gradcheck_verb(int argc, char **argv);

#define RUN_OPTIONS                                                                  \
  "  --set NAME=VALUE   feed input NAME a literal value (3, [[1, 2], [3, 4]])\n"      \
  "  --feed NAME=FILE   feed input NAME from a CSV file (rows: first dimension), a\n" \
  "                     NumPy .npy file, or a .npz archive (its array NAME)\n"     \
  "  --seed N           seed of the random generator (default 0)\n"                 \
  "  --max-steps N      turns one while loop may take (default 1000000)\n"          \
  "  --max-memory SIZE  memory all values may take together, e.g. 512M, 4G\n"       \
  "                     (default: the machine's physical memory)\n"                \
  "  --check-nan        stop at the first op that produces NaN or Inf\n"            \
  "  --no-fuse          run conv2d, its bias and relu as separate ops (same results)\n" \
  "  --precision N      digits printed values show (default 8)\n"                  \
  "  --dtype f32|f64    f64: run the whole program in f64 (default f32)\n"
#define GRAD_OPTIONS                                                                 \
  "  --loss NAME        the scalar to differentiate (default: loss)\n"              \
  "  --wrt NAMES        differentiate with respect to these (default: every param)\n" \
  "  --no-grad NAMES    treat these as constants\n"                                 \
  "  --tape             differentiate the tape of a run instead of the program\n"     \
  "  --tape-program     ... turning the tape into a program first (append_backward)\n"

static const Verb verbs[] = {
    {"dump", cmd_dump, "netrun dump [OPTIONS] FILE",
     "Lower FILE to a program and print it (see netrun-lang(5), \"The program\").\n"
     "  --format FMT       text (default), dot (Graphviz) or json\n"
     "  --startup          also print the startup block: initializers and input defaults\n"
     "  --lines            annotate every op with the source position it came from\n"
     "  --ast              print the syntax tree instead of the program\n"
     "  --backward         append the backward program (append_backward)\n"
     "  --order N          with --backward: the program gradcheck --order N checks (2: a\n"
     "                     second backward of f = sum(grad * v), v fixed; 3: one more)\n"
     "  --train            print the training program: backward, clipping, optimizer ops\n"
     "  --ranks N          with --train: the program of N ranks of mpirun, its gradients\n"
     "                     averaged over them (allreduce_start/allreduce_wait ops)\n"
     "  --fused            print the program as rewritten for the executor (src/ir/rewrite.c):\n"
     "                     fused conv layers, shared gradients (not with --no-fuse, --check-nan)\n"
     GRAD_OPTIONS
     "  -o OUT             write to OUT (atomically) instead of standard output\n"
     "  --dtype f32|f64    f64: print the program promoted to f64, as run --dtype f64 runs it\n"
     "With --tape, the run options apply too (see netrun run):\n"
     "  --set, --feed, --seed, --max-steps, --max-memory, --check-nan, --no-fuse,\n"
     "  --precision"},
    {"fmt", cmd_fmt, "netrun fmt [--check] FILE...",
     "Rewrite each FILE in the canonical layout (netrun-lang(5), \"LAYOUT\"): the\n"
     "same tokens and comments, only the white space changes.  - reads standard\n"
     "input and writes standard output.  A file with a syntax error is reported\n"
     "and left as it is (exit 2).\n"
     "  --check            change nothing: list the files that would change, and\n"
     "                     exit 1 if there are any"},
    {"lsp", cmd_lsp, "netrun lsp [--stdio]",
     "A Language Server Protocol server for .net scripts over standard input and\n"
     "output (JSON-RPC): diagnostics as a script changes, hover with shapes,\n"
     "definitions, references, symbols, completion and formatting.  It runs no\n"
     "kernel, reads no data, and loads no plugin unless --allow-load is given.\n"
     "  --stdio            talk over standard input and output (the only way; accepted\n"
     "                     because clients pass it)"},
    {"ops", cmd_ops, "netrun ops [NAME]",
     "List every registered op, or describe one: its inputs, outputs, attributes\n"
     "with types and defaults, and whether it has a gradient and a kernel."},
    {"run", cmd_run, "netrun run [OPTIONS] FILE",
     "Execute FILE eagerly, op by op, recording the tape.\n" RUN_OPTIONS
     "  --weights PATH     parameters and states from a checkpoint, .safetensors or .npz\n"
     "  --weights-partial  load those PATH has, say which it lacks and which the script does\n"
     "  --dump-tape        print the tape (the ops run, loops unrolled) after the run\n"
     "  --format FMT       the tape's format: text (default), dot or json"},
    {"time", cmd_time, "netrun time [OPTIONS] FILE",
     "Run FILE's forward pass several times and print, per op type, the calls,\n"
     "the time and its share of the total.\n" RUN_OPTIONS
     "  --iterations N     forward passes to time (default 10)\n"
     "  --warmup N         passes run before them, not timed (default 1)\n"
     "  --backward         also run the backward program netrun grad runs (the gradients\n"
     "                     of loss) and print forward and backward times apart\n"
     "  --loss NAME        with --backward: the scalar to differentiate (default: loss)"},
    {"summary", cmd_summary, "netrun summary [--batch N] FILE",
     "Print, without running FILE: every parameter and state with its shape and\n"
     "element count and their totals; each layer (a top-level call of a def, or a\n"
     "top-level op) with its output shape, parameters and FLOPs; the FLOPs (2 per\n"
     "multiply-add in matmul and conv, 1 per output element elsewhere) and the\n"
     "activation memory (every op output) of one forward step.\n"
     "  --batch N          the size of the batch dimension (default: the train\n"
     "                     block's batch, else 1)"},
    {"grad", cmd_grad_verb, "netrun grad [OPTIONS] FILE",
     "Run FILE forward and backward and print the loss and the gradients.\n" GRAD_OPTIONS RUN_OPTIONS
     "  --format FMT       text (default) or json: {\"loss\": L, \"grads\": {NAME: {\"shape\", \"data\"}}}\n"
     "  --order 2          second derivatives: the gradient of f = sum(grad(loss)), the\n"
     "                     Hessian times ones (each element's own for an elementwise loss)"},
    {"gradcheck", cmd_gradcheck_verb, "netrun gradcheck [OPTIONS] FILE",
     "Compare every gradient with central finite differences, element by element,\n"
     "and report the largest errors; exit 1 if one exceeds the tolerance plus the\n"
     "difference's noise (an element whose noise exceeds the tolerance is\n"
     "reported as one that cannot be checked).  The differences are taken in f64\n"
     "(on the program promoted to f64) against the f32 program's gradient;\n"
     "--dtype f32 takes them in f32, --dtype f64 checks the f64 program's gradient.\n"
     GRAD_OPTIONS RUN_OPTIONS
     "  --eps E            the first step, relative to max(|x|, 1) (default 1e-6; 1e-2 with --dtype f32)\n"
     "  --rtol R           the relative tolerance: |analytic - numeric| <= atol + rtol |numeric| + noise\n"
     "                     (default 1e-3; 5e-3 with --dtype f32)\n"
     "  --atol A           the absolute tolerance (default 1e-5)\n"
     "  --samples N        check N random elements of each variable instead of all\n"
     "  --order N          2: check second derivatives: the gradient of f = sum(grad * v),\n"
     "                     v fixed and random, the Hessian times v, against central\n"
     "                     differences of f; 3: third derivatives likewise"},
    {"train", cmd_train, "netrun train [OPTIONS] FILE",
     "Train the model FILE describes on the data its train block names\n"
     "(see netrun-lang(5), \"TRAINING\"); netrun(1) describes the output.\n"
     "These override the train block's setting of the same name:\n"
     "  --epochs N         passes over the data\n"
     "  --batch N          examples per step\n"
     "  --accumulate N     batches whose gradients make one update\n"
     "  --lr X             the base learning rate\n"
     "  --optimizer NAME   sgd, momentum, adam, adamw or rmsprop\n"
     "  --data SPEC        fashion-mnist, a CSV file, a .npz archive, IMAGES:LABELS or\n"
     "                     a folder of class folders of PNG/JPEG images\n"
     "                     (paths from the working folder)\n"
     "Other options:\n"
     "  --limit N          use only the first N examples of each split\n"
     "  --save PATH        write a checkpoint every epoch and on Ctrl-C / SIGTERM\n"
     "  --resume PATH      continue the run a checkpoint stopped, with its settings\n"
     "                     (the command line's aside); saves back to PATH unless\n"
     "                     --save names another file or --no-save is given\n"
     "  --no-save          with --resume: write no checkpoint\n"
     "  --weights PATH     start from these parameters and states (fine-tuning): a\n"
     "                     checkpoint, .safetensors or .npz\n"
     "  --weights-partial  load the values PATH has; notes name those it lacks and extra ones\n"
     "  --keep-best        also write PATH.best whenever the evaluation improves\n"
     "  --keep-going       train on when the loss is NaN or infinite (default: stop\n"
     "                     with an error before that step's update)\n"
     "  --log FILE         every metric as JSON lines (see netrun plot)\n"
     "  --seed N           seed of initializers, dropout and shuffling (default 0)\n"
     "  --set, --feed, --max-steps, --max-memory, --check-nan, --no-fuse, --precision,\n"
     "  --dtype            as for netrun run\n"
     "Under mpirun (mpirun -np N netrun train FILE), N ranks train data parallel: each\n"
     "takes its shard of every step (--batch is per rank), the gradients are averaged\n"
     "over the ranks (allreduce, in buckets of the train block's bucket_mb, default 25),\n"
     "each bucket's average overlapping the rest of the backward (overlap = false: after\n"
     "it), batch norm's running statistics are averaged at each epoch's end, and rank 0\n"
     "alone prints, logs and saves; see netrun(1), DISTRIBUTED TRAINING."},
    {"eval", cmd_eval, "netrun eval [OPTIONS] FILE [--weights PATH | --init]",
     "Loss and accuracy of trained weights on the train block's evaluation split\n"
     "(the test split of fashion-mnist; the whole data of a CSV file or IDX pair).\n"
     "  --weights PATH     a checkpoint written by netrun train --save, or the .safetensors\n"
     "                     or .npz file netrun export writes (names, shapes, dtypes checked);\n"
     "                     needed when a parameter starts from random values\n"
     "  --init             evaluate the initial values on purpose (no --weights)\n"
     "  --weights-partial  load the values PATH has; notes name those it lacks and extra ones\n"
     "  --data SPEC        evaluate on this dataset instead (results labelled by it)\n"
     "  --batch N          examples per forward pass (default: the train block's)\n"
     "  --limit N          use only the first N examples\n"
     "  --confusion        also the confusion matrix (rows: true class, columns:\n"
     "                     predicted) and each class's precision, recall, accuracy\n"
     "  --format FMT       text (default) or json (one document)\n"
     "  --set, --feed, --seed, --max-steps, --max-memory, --check-nan, --no-fuse,\n"
     "  --precision, --dtype   as for netrun run\n"
     "Under mpirun, each rank evaluates its shard and rank 0 prints the figures of the\n"
     "whole data once."},
    {"predict", cmd_predict, "netrun predict [OPTIONS] FILE [--weights PATH | --init] --feed x=FILE.csv",
     "The predicted class of every fed example (the argmax of the train block's metric;\n"
     "with one logit per example, 1 when it is positive, else 0), or the value of\n"
     "--output NAME.\n" RUN_OPTIONS
     "  --weights PATH     a checkpoint written by netrun train --save, or the .safetensors\n"
     "                     or .npz file netrun export writes (names, shapes, dtypes checked);\n"
     "                     needed when a parameter starts from random values\n"
     "  --init             predict with the initial values on purpose (no --weights)\n"
     "  --weights-partial  load the values PATH has; notes name those it lacks and extra ones\n"
     "  --output NAME      this value instead of the classes (each batch's); repeat it\n"
     "                     for several values\n"
     "  --format FMT       text (default: NumPy-style, long values cut to ...), csv (a\n"
     "                     row per example), json or npy (.npy; .npz for several\n"
     "                     values): these write every element\n"
     "  -o FILE            write to FILE (atomically); npy needs it\n"
     "  --data SPEC        predict every example of this dataset's inputs, in batches\n"
     "  --limit N          with --data: only its first N examples\n"
     "  --batch N          with --data: examples per batch (default: the train block's)\n"
     "Under mpirun, with --data: each rank predicts its batches of every N, rank 0\n"
     "gathers and alone writes them, in order (the output of one process)."},
    {"lr-find", cmd_lr_find, "netrun lr-find [OPTIONS] FILE",
     "The learning-rate finder: train FILE on its train block's data for --steps steps\n"
     "with the lr rising exponentially from --start to --end (step i of N:\n"
     "start * (end / start)^(i / (N - 1))), stopping early once the smoothed loss\n"
     "exceeds 4 times its best or a loss is not finite; print the curve (lr, loss,\n"
     "smoothed loss per step) and suggest an lr: the steepest descent of the smoothed\n"
     "loss (with the lr of its minimum / 10 beside it).  Nothing is saved; the train\n"
     "block's lr, schedule, warmup, epochs and evaluation are not used.\n"
     "  --start X          the first step's lr (default 1e-7)\n"
     "  --end X            the last step's lr (default 10)\n"
     "  --steps N          steps of the sweep, 2 to 1000000 (default 100)\n"
     "  --format FMT       text (default: a table and the suggestion), csv (the table;\n"
     "                     the suggestion on stderr) or json (one document)\n"
     "  -o FILE            write the curve to FILE (atomically)\n"
     "  --plot FILE        draw the curve as SVG over a logarithmic lr axis (as netrun plot)\n"
     "  --batch N          examples per step (default: the train block's)\n"
     "  --optimizer NAME   sgd, momentum, adam, adamw or rmsprop (default: the train block's)\n"
     "  --data SPEC        sweep on this dataset instead\n"
     "  --limit N          use only the first N training examples\n"
     "  --weights PATH     start from these parameters and states\n"
     "  --weights-partial  load the values PATH has; notes name those it lacks and extra ones\n"
     "  --seed N           seed of initializers, dropout and shuffling (default 0)\n"
     "  --set, --feed, --max-steps, --max-memory, --check-nan, --no-fuse, --precision,\n"
     "  --dtype            as for netrun run"},
    {"plot", cmd_plot, "netrun plot [-o OUT.svg] [--log-y] [--x-axis AXIS] LOG.jsonl",
     "Draw the loss and accuracy curves of a training log (netrun train --log) as SVG.\n"
     "  -o OUT             write to OUT (atomically) instead of standard output\n"
     "  --log-y            a logarithmic loss axis\n"
     "  --x-axis AXIS      step (default), samples, epoch, or lr (a logarithmic axis)\n"
     "LOG - reads standard input."},
    {"data", cmd_data, "netrun data [OPTIONS] SPEC",
     "Read a dataset and describe it: its files, examples, columns and classes.\n"
     "SPEC: fashion-mnist ($NETRUN_DATA, else " DATA_FASHION_DIR "),\n"
     "      IMAGES:LABELS (IDX files, gzip or raw), a CSV file, a NumPy .npz\n"
     "      archive (a column per array, named like it), or a folder of class\n"
     "      folders of PNG or JPEG images (classes numbered in name order).\n"
     "  --split S          fashion-mnist's split: train (default) or test; a text\n"
     "                     file's (--context): train, or test (its last tenth)\n"
     "  --context T        read SPEC as text: windows x of T bytes, y the next bytes\n"
     "  --label COL        CSV: the label column, by header name or 0-based index\n"
     "  --head N           print the first N examples (one batch of the columns)\n"
     "  --shuffle          take them in a random order (seeded by --seed)\n"
     "  --seed N           seed of the shuffle (default 0)\n"
     "  --batch N          count the batches of N examples an epoch makes\n"
     "  --drop-last        ... dropping a last batch smaller than N\n"
     "  --shape C,H,W      an image folder's images as C channels (1 or 3) of H x W\n"
     "                     (default: the first image's)\n"
     "  --flip, --crop-pad N  --head's images augmented as training does (--seed)\n"
     "  --max-memory SIZE  memory the data may take, e.g. 512M\n"
     "  --fit FILE         check that batches fit FILE's inputs (named like a column,\n"
     "                     else in order) and print the shapes they are fed as"},
    {"checkpoint", cmd_checkpoint, "netrun checkpoint [--format FMT] PATH",
     "Describe a checkpoint written by netrun train --save: its format version,\n"
     "program hash, epoch, step, generator state, settings and tensors.\n"
     "  --format FMT       text (default), or json: the same fields and every tensor's\n"
     "                     elements in full"},
    {"export", cmd_export, "netrun export [--optimizer-state] CKPT -o FILE.safetensors|FILE.npz\n"
     "       netrun export [WEIGHTS] --model MODEL.net -o FILE.onnx",
     "Write the parameters and states of a checkpoint (or of a .safetensors or .npz file)\n"
     "under their scoped names, as safetensors or as NumPy's .npz (by FILE's extension);\n"
     "or, with --model, MODEL.net's forward program for inference as ONNX (opset 17),\n"
     "with WEIGHTS' values (default: the script's own)\n"
     "  -o FILE            the file to write (atomically)\n"
     "  --output FILE      the same as -o\n"
     "  --format F         safetensors, npz or onnx, whatever FILE's extension\n"
     "  --model FILE       the script whose forward program the ONNX file holds\n"
     "  --value NAME       a value of the script the ONNX model outputs (repeat it;\n"
     "                     default: logits, else output)\n"
     "  --optimizer-state  also the optimizer's state (W@MOMENT1 ...) and learning rate"},
    {"import", cmd_import, "netrun import [--force] [--max-memory SIZE] MODEL.onnx [-o OUT.net]",
     "Write an ONNX model as a script, OUT.net (default: MODEL.net here), and its\n"
     "weights, OUT.safetensors beside it, which the script's weights(\"...\")\n"
     "initializers read (netrun(1), IMPORT: the ops and the naming rule)\n"
     "  -o FILE            the script to write; its weights go to FILE's .safetensors\n"
     "  --output FILE      the same as -o\n"
     "  --force            overwrite the script and the weights if they exist\n"
     "  --max-memory SIZE  memory the model's external data may take, read and\n"
     "                     decoded, e.g. 512M (default 4G)"},
    {"sample", cmd_sample, "netrun sample [OPTIONS] FILE",
     "Sample new text from FILE, a next-byte model: an input x : i64[B, T] (T fixed:\n"
     "the input its text data feeds) and logits [B, T, V] (V <= 256) whose position t\n"
     "predicts the byte after x[t].  Each sample starts after a newline, with\n"
     "--prompt; a step feeds its last T bytes (padded with newlines after them while\n"
     "it is shorter: the model must be causal), takes the logits at its last byte,\n"
     "and draws the next byte from softmax(logits / temperature) with the seeded\n"
     "generator.  A sample ends at a newline or after --length bytes; each is printed\n"
     "on a line of its own, without that newline.\n"
     "  --weights PATH     parameters and states from a checkpoint, .safetensors or .npz\n"
     "  --weights-partial  load those PATH has, say which it lacks and which the script does\n"
     "  --count N          samples to draw, together as a batch of N (default 1, at most 4096)\n"
     "  --length N         bytes to draw per sample at most (default 100, at most 1000000)\n"
     "  --temperature T    divides the logits (default 1); 0 takes the likeliest byte\n"
     "  --prompt TEXT      the start of every sample, fed before the first draw\n"
     "  --output NAME      the logits (default: the train block's metric)\n"
     "  --no-stop          a newline does not end a sample: draw --length bytes\n"
     "  --probs K          print, per drawn byte, its probability and the K likeliest\n"
     "                     bytes' (at temperature 0, those of softmax(logits))\n"
     "The run options (see netrun run; --seed seeds the draws too):\n"
     "  --set, --feed, --seed, --max-steps, --max-memory, --check-nan, --no-fuse,\n"
     "  --precision, --dtype"},
    {"repl", repl_main, "netrun repl [OPTIONS] [FILE]",
     "An interactive session: statements run as they are entered, an expression\n"
     "prints its value, and :help lists the commands.  FILE runs first.\n" RUN_OPTIONS},
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
  fputs("\noptions: --help, --version; --plugin PATH.so (anywhere, repeatable) loads a plugin's ops;\n"
        "--allow-load[=DIR] (anywhere) lets a script `load` plugins from its folder (or DIR);\n"
        "`netrun help VERB` or `netrun VERB --help` describes a verb.\n", f);
}

/* ---- verbs ---------------------------------------------------------------- */

static int cmd_dump(int argc, char **argv) {
  Args a;
  int rc = cli_parse(argc, argv, &a, OPT_DUMP | OPT_GRAD | OPT_RUN | OPT_ORDER);
  if (rc) return rc;
  if (a.fused && a.ast) return diag_usage("%s", "--fused prints the rewritten program: not with --ast");
  if (a.ranks && !a.train) return diag_usage("%s", "--ranks N needs --train (the training program of N ranks)");
  if (a.train) return cmd_dump_train(&a);
  if (a.backward || a.tape) return cmd_dump_backward(&a);
  Session ld;
  int status = 0;
  if (a.ast) {
    arena_init(&ld.arena);
    diag_init(&ld.diag, &ld.arena);
    int idx = diag_load_file(&ld.diag, a.file);
    AstNode *root = idx >= 0 ? ast_parse(&ld.arena, &ld.diag, idx) : NULL;
    OutFile o;
    if (root && file_out_open(&o, a.out)) {
      ast_print(o.f, root);
      if (!file_out_close(&o)) status = EXIT_SCRIPT;
    } else {
      status = EXIT_SCRIPT;
    }
    diag_finish(&ld.diag);
    arena_free(&ld.arena);
    return status;
  }
  if (!session_load(&ld, a.file)) {
    status = EXIT_SCRIPT;
  } else {
    OutFile o;
    if (!file_out_open(&o, a.out)) status = EXIT_SCRIPT;
    else {
      cli_rewrite_dumped(ld.prog, &a, NULL, true);
      dump_program(o.f, ld.prog, &a.dump);
      if (!file_out_close(&o)) status = EXIT_SCRIPT;
    }
  }
  session_free(&ld);
  return status;
}

/* netrun ops NAME of no op: suggests the nearest op a script can call, or
 * the stdlib function of that name ("batch_norm": nn.net's batchnorm). */
static void unknown_op(const char *name, const OpProto *const *all, int n) {
  Arena a;
  arena_init(&a);
  int nd;
  StdlibDef *defs = cli_stdlib_defs(&a, &nd);
  const char **names = mem_alloc(NULL, sizeof *names * (size_t)(n + nd + 1));
  int k = reg_callable_names(all, n, names);
  for (int i = 0; i < nd; i++) names[k + i] = defs[i].name;
  const char *near = diag_nearest(name, names, k + nd);
  const StdlibDef *def = NULL;
  for (int i = 0; i < nd; i++)
    if (strcmp(defs[i].name, name) == 0 || (near && strcmp(defs[i].name, near) == 0 && !def)) def = &defs[i];
  if (def) {
    int len = (int)strlen(def->file) - 4;
    diag_error(NULL, SPAN_NONE, "%s '%s'; the stdlib's %s defines the function '%s' (import \"%.*s\")",
               strcmp(def->name, name) == 0 ? "no op is named" : "unknown op", name, def->file, def->name, len,
               def->file);
  } else if (near) {
    diag_error(NULL, SPAN_NONE, "unknown op '%s' (did you mean '%s'?)", name, near);
  } else {
    diag_error(NULL, SPAN_NONE, "unknown op '%s'; `netrun ops` lists them", name);
  }
  mem_free(names);
  arena_free(&a);
}

/* A verb without options (ops, help): its arguments, at most one, in
 * *arg; 0 or the usage-error status. */
static int no_options(int argc, char **argv, const char **arg) {
  OptionParser p;
  option_init(&p, argc, argv, (const Option *const[]){NULL}, "");
  *arg = NULL;
  for (int id; (id = option_next(&p)) != OPTION_END;) {
    if (id == OPTION_ERROR) return EXIT_USAGE;
    if (*arg) return diag_usage("%s takes at most one %s", argv[0], strcmp(argv[0], "ops") == 0 ? "NAME" : "VERB");
    *arg = p.value;
  }
  return 0;
}

static int cmd_ops(int argc, char **argv) {
  const char *name;
  int rc = no_options(argc, argv, &name);
  if (rc) return rc;
  int n;
  const OpProto *const *all = reg_all(reg_default(), &n);
  if (name) {
    const OpProto *p = reg_find(reg_default(), name);
    if (p) {
      reg_describe(stdout, p);
      return 0;
    }
    unknown_op(name, all, n);
    return EXIT_SCRIPT;
  }
  reg_print_table(stdout, all, n);
  return 0;
}

/* ---- run and time ------------------------------------------------------------ */

static int cmd_run(int argc, char **argv) {
  Args a;
  int rc = cli_parse(argc, argv, &a, OPT_RUN | OPT_TAPE_DUMP | OPT_WEIGHTS);
  if (rc) return rc;
  Session ld;
  int status = EXIT_SCRIPT;
  Executor *ex = session_load(&ld, a.file) ? cli_start(&ld, &a) : NULL;
  if (ex) {
    exec_use_plan(ex, NULL, 0);   /* nothing is read after the run but the tape, which holds its values */
    if ((!a.weights || weights_load(&ld.diag, ld.prog, ex, a.weights, a.weights_partial)) && exec_run(ex) == 0) {
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
  session_free(&ld);
  return status;
}

static int cmd_time(int argc, char **argv) {
  Args a;
  int rc = cli_parse(argc, argv, &a, OPT_RUN | OPT_TIME);
  if (rc) return rc;
  if (a.backward) return cmd_time_backward(&a);
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], "--loss", 6) == 0 && (!argv[i][6] || argv[i][6] == '='))
      return diag_usage("%s", "--loss names what --backward differentiates: it needs --backward");
  FILE *devnull = cli_time_options(&a);
  Session ld;
  int status = EXIT_SCRIPT;
  Executor *ex = session_load(&ld, a.file) ? cli_start(&ld, &a) : NULL;
  if (ex) {
    status = 0;
    for (int64_t it = 0; it < a.warmup + a.iterations && status == 0; it++) {
      if (it == a.warmup) exec_timings_reset(ex);
      if (exec_run(ex) < 0) status = EXIT_SCRIPT;
    }
    if (status == 0) {
      int n;
      const OpTiming *t = exec_timings(ex, &n);
      double total = cli_print_timings(stdout, t, n);
      printf("%" PRId64 " forward passes, %.3f ms each\n", a.iterations, total * 1e3 / (double)a.iterations);
    }
    diag_finish(&ld.diag);
    exec_free(ex);
  }
  session_free(&ld);
  if (devnull) fclose(devnull);
  return status;
}

static int cmd_grad_verb(int argc, char **argv) {
  Args a;
  int rc = cli_parse(argc, argv, &a, OPT_RUN | OPT_GRAD | OPT_GRAD_FORMAT | OPT_ORDER);
  return rc ? rc : cmd_grad(&a);
}

static int cmd_gradcheck_verb(int argc, char **argv) {
  Args a;
  int rc = cli_parse(argc, argv, &a, OPT_RUN | OPT_GRAD | OPT_CHECK | OPT_ORDER);
  return rc ? rc : cmd_gradcheck(&a);
}

static int verb_help(const Verb *v) {
  printf("usage: %s\n\n%s\n", v->usage, v->help);
  return 0;
}

static int cmd_help(int argc, char **argv) {
  const char *name;
  int rc = no_options(argc, argv, &name);
  if (rc) return rc;
  if (!name) {
    usage(stdout);
    return 0;
  }
  const Verb *v = find_verb(name);
  if (!v) return diag_usage("no help for unknown verb '%s'", name);
  return verb_help(v);
}

/* `netrun VERB ... --help` (or -h) anywhere after the verb: its help. */
static bool asks_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
  return false;
}

/* The options netrun takes anywhere on the command line, before the verb
 * reads its own. */
enum { G_PLUGIN = 1, G_ALLOW_LOAD };
static const Option global_options[] = {
    {"--plugin", OPTION_VALUE, "PATH", "the path of a plugin (a .so file)", G_PLUGIN, 0},
    {"--allow-load", OPTION_EQ_VALUE, "DIR", "a folder", G_ALLOW_LOAD, 0},
    {NULL, 0, NULL, NULL, 0, 0},
};

/* --plugin PATH (or --plugin=PATH), anywhere on the command line: loads
 * the plugin; --allow-load[=DIR] lets scripts load plugins (plugin.h, the
 * trust model).  Both are removed from argv.  0, or the exit status. */
static int load_plugins(int *argc, char **argv) {
  OptionParser p;
  option_init(&p, *argc, argv, (const Option *const[]){global_options, NULL}, "");
  p.keep_unknown = true;
  int kept = 1;
  for (int id; (id = option_next(&p)) != OPTION_END;) {
    if (id == OPTION_ERROR) return EXIT_USAGE;
    if (id == OPTION_ARG) argv[kept++] = (char *)p.value;
    else if (id == G_ALLOW_LOAD) plugin_allow_script_loads(p.value);
    else if (!plugin_load(NULL, SPAN_NONE, p.value, NULL)) return EXIT_SCRIPT;
  }
  argv[kept] = NULL;
  *argc = kept;
  return 0;
}

/* --version's second line: the OpenBLAS linked, its kernels (par.c's
 * blas_kernels), and the threads netrun spreads its GEMMs (each part on
 * one thread) and its own loops over (src/exec/par.h); the third: the oneDNN that computes the larger f32
 * products, and the widest vectors its kernels use here. */
static void print_blas(FILE *f) {
  const char *cfg = openblas_get_config();
  int words = 0, n = 0;
  while (cfg[n] && !(cfg[n] == ' ' && ++words == 2)) n++;
  static const char *const kinds[] = {"sequential", "pthreads", "OpenMP"};
  int kind = openblas_get_parallel(), threads = par_max_threads();
  fprintf(f, "%.*s (%s build, %s kernels), %d thread%s", n, cfg, kind >= 0 && kind <= 2 ? kinds[kind] : "unknown",
          openblas_get_corename(), threads, threads == 1 ? "" : "s");
#ifdef _OPENMP
  const char *policy = getenv("OMP_WAIT_POLICY");
  fprintf(f, "; netrun's loops share %s", threads == 1 ? "it" : "them");
  if (threads > 1) fprintf(f, "; OMP_WAIT_POLICY=%s", policy && *policy ? policy : "(unset)");
  fputc('\n', f);
#else
  fprintf(f, "; netrun's loops run on one thread\n");
#endif
  const dnnl_version_t *v = dnnl_version();
  int64_t from = par_dnnl_min();
  fprintf(f, "oneDNN %d.%d.%d, ", v->major, v->minor, v->patch);
  if (!from) {
    fprintf(f, "not used (NETRUN_TEST_GEMM=openblas)\n");
    return;
  }
  unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
  const char *vec = (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core ? "AVX-512"
                    : (isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2             ? "AVX2"
                                                                                  : "SSE4.1 or AVX";
  fprintf(f, "f32 products of %lld multiply-adds and more, in %s\n", (long long)from, vec);
}

/* The verb argv[1] names, or a script to run. */
static int dispatch(int argc, char **argv) {
  int status;
  if (argc < 2) {
    /* Like python or sh: a session on a terminal, else one read from stdin. */
    char *repl[] = {"repl", NULL};
    status = repl_main(1, repl);
  } else if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(stdout);
    status = 0;
  } else if (strcmp(argv[1], "--version") == 0) {
    printf("netrun %s\n", NETRUN_VERSION);
    print_blas(stdout);
    status = 0;
  } else if (strcmp(argv[1], "--dump-backward") == 0) {
    char **args = mem_alloc(NULL, sizeof *args * (size_t)(argc + 1));
    args[0] = "dump";
    args[1] = "--backward";
    for (int i = 2; i < argc; i++) args[i] = argv[i];
    args[argc] = NULL;
    diag_usage_verb("dump");
    status = asks_help(argc, args) ? verb_help(find_verb("dump")) : cmd_dump(argc, args);
    mem_free(args);
  } else if (argv[1][0] == '-' && argv[1][1]) {
    status = diag_usage("unknown option '%s'", argv[1]);
  } else {
    const Verb *v = find_verb(argv[1]);
    diag_usage_verb(v ? v->name : "run");
    if (v) {
      status = asks_help(argc - 1, argv + 1) ? verb_help(v) : v->run(argc - 1, argv + 1);
    } else if (strcmp(argv[1], "-") == 0 || strchr(argv[1], '.') || strchr(argv[1], '/') ||
               access(argv[1], F_OK) == 0) {   /* -: the script on standard input */
      argv[0] = "run";
      status = asks_help(argc, argv) ? verb_help(find_verb("run")) : cmd_run(argc, argv);
    } else {
      const char *names[sizeof verbs / sizeof *verbs];
      for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) names[i] = verbs[i].name;
      const char *near = diag_nearest(argv[1], names, (int)(sizeof verbs / sizeof *verbs));
      fprintf(stderr, "netrun: unknown verb '%s'%s%s%s\nverbs:", argv[1], DIAG_MEAN(near));
      for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) fprintf(stderr, " %s", verbs[i].name);
      fputc('\n', stderr);
      status = EXIT_USAGE;
    }
  }
  return status;
}

/* The verbs that run a program on netrun's threads (and --version, which
 * says how they wait); not dump, fmt, lsp, ops, summary, plot, data,
 * checkpoint, export, import, help: they run no op. */
static bool runs_ops(int argc, char **argv) {
  static const char *const idle[] = {"dump", "fmt", "lsp", "ops", "summary", "plot", "data", "checkpoint",
                                     "export", "import", "help", "--help", "-h", "--dump-backward"};
  if (argc < 2) return true;   /* the REPL */
  for (size_t k = 0; k < sizeof idle / sizeof *idle; k++)
    if (strcmp(argv[1], idle[k]) == 0) return false;
  return true;
}

/* OpenMP's idle threads sleep (OMP_WAIT_POLICY=PASSIVE) unless the user
 * set the policy.  By default GNU OpenMP's spin for a while between loops,
 * on the core the pool's workers (par.c) need next: with PASSIVE the
 * training steps of bench-compare took 0.88-0.96x the time on 2 threads
 * of a quiet host, with 0.75-0.94x the CPU (tests/bench/netrun_ab.py), and
 * a busy host gets the cores back sooner.  libgomp reads the variable once,
 * before main, so netrun sets it and starts itself again (the same
 * process, pid and arguments) before it has read anything.  Not on one
 * thread (nothing waits), nor under valgrind (the new image would leave
 * it): there, and if the exec fails, it runs as it is, which changes no
 * result. */
static void sleep_when_idle(int argc, char **argv) {
#ifdef _OPENMP
  if (getenv("OMP_WAIT_POLICY") || par_max_threads() < 2 || !runs_ops(argc, argv)) return;
  const char *preload = getenv("LD_PRELOAD");
  if (preload && strstr(preload, "vgpreload")) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OMP_WAIT_POLICY");
#else
  (void)argc, (void)argv;
#endif
}

/* The NETRUN_TEST_* variables (netrun(1); for netrun's own tests and
 * benchmarks): a value netrun does not know is refused, not ignored, so a
 * misspelt one never runs the default kernels unnoticed.  Empty, or
 * default where the variable names kernels, is unset.
 * values: the words it takes, or NULL for R:S (a rank, and seconds below
 * 3600); say: those words for the error. */
static int check_test_env(void) {
  static const struct {
    const char *name, *values, *say;
  } known[] = {{"NETRUN_TEST_CONV", "gemm direct pv cv winograd default", "gemm, direct, pv, cv, winograd or default"},
               {"NETRUN_TEST_ISA", "avx2 scalar default", "avx2, scalar or default"},
               {"NETRUN_TEST_GEMM", "openblas default", "openblas or default"},
               {"NETRUN_TEST_NO_THREAD_MULTIPLE", "1", "1"},
               {"NETRUN_TEST_SLOW_STEP", NULL, "R:S, a rank and seconds below 3600"},
               {"NETRUN_TEST_CUT", NULL, "R:S, a rank and seconds below 3600"}};
  for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
    const char *v = getenv(known[i].name), *w = known[i].values;
    if (!v || !*v) continue;
    bool ok = false;
    if (w) {
      size_t n = strlen(v);
      for (const char *p = w; *p && !ok; p += strcspn(p, " "), p += *p == ' ')
        ok = strncmp(p, v, n) == 0 && (p[n] == ' ' || p[n] == 0);
    } else {
      int rank, end = 0;
      double sec;
      ok = sscanf(v, "%d:%lf%n", &rank, &sec, &end) == 2 && v[end] == 0 && rank >= 0 && sec >= 0 && sec < 3600;
    }
    if (!ok) {
      diag_error(NULL, SPAN_NONE, "%s=%s: expected %s (a setting for netrun's own tests, netrun(1))",
                 known[i].name, v, known[i].say);
      return EXIT_USAGE;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  par_init();   /* before any GEMM: OpenBLAS on one thread */
  sleep_when_idle(argc, argv);
  int status = check_test_env();
  if (status == 0) status = load_plugins(&argc, argv);
  if (status == 0) status = dispatch(argc, argv);
  /* Output that could not be written (a full disk) is an error, even when
   * the verb succeeded (GNU's close_stdout). */
  errno = 0;
  if ((fflush(stdout) != 0 || ferror(stdout)) && status == 0) {
    diag_error(NULL, SPAN_NONE, "standard output: %s", errno ? strerror(errno) : "write error");
    status = EXIT_SCRIPT;
  }
  /* An error that followed a refusal at the memory limit (a value, a
   * dataset, the program) is running out of memory. */
  if (status == EXIT_SCRIPT && mem_limit_hit()) status = MEM_EXIT_OOM;
  /* A run stopped by Ctrl-C exits like a shell's interrupted command. */
  if (status == EXIT_SCRIPT && exec_interrupted()) status = 128 + SIGINT;
  reg_free_default();
  plugin_unload_all();
  plugin_forget_script_loads();
  return status;
}
