/* cmd.h — the verbs of the command line (netrun(1)), each the entry point
 * of the file that implements it, and the entry points the REPL and the
 * dump verb call in those files.  main.c dispatches to them; they return
 * the exit status (diag.h). */
#ifndef NETRUN_CMD_H
#define NETRUN_CMD_H

#include <stdbool.h>
#include <stdio.h>

struct Args;      /* cli.h */
struct Program;   /* program.h */
struct Executor;  /* exec.h */

/* gradverb.c: the grad verbs. */
int cmd_grad(const struct Args *a);
int cmd_gradcheck(const struct Args *a);
/* The REPL's :grad and :gradcheck: the backward of the tape that ex (a
 * session's executor over program p) has recorded, run over its values;
 * a names the loss, --wrt, --no-grad and the gradcheck options. */
int cmd_grad_session(struct Program *p, struct Executor *ex, const struct Args *a);
int cmd_gradcheck_session(struct Program *p, struct Executor *ex, const struct Args *a);
/* dump --backward: appends the backward (of the tape, with a.tape) and
 * dumps it. */
int cmd_dump_backward(const struct Args *a);

/* trainverb.c: the training verbs (over trainer.c), and dump --train. */
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_dump_train(const struct Args *a);
/* lr-find FILE: the learning-rate finder (lrfind.h). */
int cmd_lr_find(int argc, char **argv);

/* dataverb.c: data SPEC; checkpointverb.c: checkpoint PATH, describes a
 * checkpoint; plotverb.c: plot LOG. */
int cmd_data(int argc, char **argv);
int cmd_checkpoint(int argc, char **argv);
int cmd_plot(int argc, char **argv);
/* summary.c: summary FILE; timeback.c: time --backward FILE. */
int cmd_summary(int argc, char **argv);
int cmd_time_backward(const struct Args *a);
/* exportverb.c: export CKPT -o FILE.safetensors|FILE.npz */
int cmd_export(int argc, char **argv);
/* exportonnx.c: export [WEIGHTS] --model MODEL.net -o FILE.onnx [--output NAME ...]:
 * MODEL's forward program as ONNX (weights NULL: the script's own values). */
int cmd_export_onnx(const char *weights, const char *model, const char *path, const char *const *names, int nnames);
/* importverb.c: import MODEL.onnx [-o OUT.net], an ONNX model as a script. */
int cmd_import(int argc, char **argv);
/* sample.c: sample FILE, new text from a next-byte model. */
int cmd_sample(int argc, char **argv);
/* fmt.c: fmt [--check] FILE...|-, the canonical layout (fmt.h). */
int cmd_fmt(int argc, char **argv);
/* lsp.c: lsp [--stdio], the language server (lsp.h). */
int cmd_lsp(int argc, char **argv);

#endif
