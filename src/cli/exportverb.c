/* exportverb.c — `netrun export CKPT -o FILE.safetensors|FILE.npz`: a
 * checkpoint's weights written in the formats other tools read
 * (io/weights.h, io/safetensors.h, io/npy.h); with --model, a script's
 * forward program as ONNX (exportonnx.c). */
#include "cli/cmd.h"
#include "cli/option.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "io/weights.h"

#include <string.h>

typedef struct ExportArgs {
  const char *in, *out;
  bool optimizer;
  bool npz;
  const char *model;           /* --model: export the script's forward program as ONNX */
  const char *outputs[16];
  int noutputs;
} ExportArgs;

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

enum { E_OUT = 1, E_FORMAT, E_OPTIMIZER, E_MODEL, E_VALUE };
static const Option export_options[] = {
    {"-o", OPTION_VALUE, "FILE", "a FILE", E_OUT, 0},
    {"--output", OPTION_VALUE, "FILE", "a FILE", E_OUT, 0},
    {"--format", OPTION_VALUE, "F", "safetensors, npz or onnx", E_FORMAT, 0},
    {"--model", OPTION_VALUE, "FILE", "a script", E_MODEL, 0},
    {"--value", OPTION_VALUE, "NAME", "a value of the script", E_VALUE, 0},
    {"--optimizer-state", OPTION_FLAG, NULL, NULL, E_OPTIMIZER, 0},
    {NULL, 0, NULL, NULL, 0, 0},
};

static int export_args(int argc, char **argv, ExportArgs *a) {
  memset(a, 0, sizeof *a);
  const char *format = NULL;
  OptionParser p;
  option_init(&p, argc, argv, (const Option *const[]){export_options, NULL}, "");
  for (int id; (id = option_next(&p)) != OPTION_END;) {
    if (id == OPTION_ERROR) return EXIT_USAGE;
    if (id == OPTION_ARG && a->in) return diag_usage("export takes one CKPT, got a second: '%s'", p.value);
    if (id == OPTION_ARG) a->in = p.value;
    else if (id == E_OUT) a->out = p.value;
    else if (id == E_OPTIMIZER) a->optimizer = true;
    else if (id == E_MODEL) a->model = p.value;
    else if (id == E_VALUE && a->noutputs >= 16) return diag_usage("%s", "export: at most 16 --value");
    else if (id == E_VALUE) a->outputs[a->noutputs++] = p.value;
    else if (strcmp(p.value, "safetensors") == 0 || strcmp(p.value, "npz") == 0 || strcmp(p.value, "onnx") == 0)
      format = p.value;
    else return option_bad(&p);
  }
  bool onnx = format ? strcmp(format, "onnx") == 0 : a->out && ends_with(a->out, ".onnx");
  if (onnx != (a->model != NULL))
    return diag_usage("%s", onnx ? "export to ONNX needs --model MODEL.net, the script whose program it writes"
                                 : "export --model writes ONNX: give -o FILE.onnx");
  if (!a->out) return diag_usage("%s", "export needs -o FILE.safetensors, -o FILE.npz or -o FILE.onnx");
  if (onnx) return 0;
  if (a->noutputs) return diag_usage("%s", "export --value goes with --model (ONNX)");
  if (!a->in) return diag_usage("%s", "export needs a CKPT: a checkpoint written by netrun train --save");
  if (!format && !ends_with(a->out, ".safetensors") && !ends_with(a->out, ".npz"))
    return diag_usage("export: %s ends in neither .safetensors nor .npz: say which with --format", a->out);
  a->npz = format ? strcmp(format, "npz") == 0 : ends_with(a->out, ".npz");
  return 0;
}

int cmd_export(int argc, char **argv) {
  ExportArgs a;
  int rc = export_args(argc, argv, &a);
  if (rc) return rc;
  if (a.model) return cmd_export_onnx(a.in, a.model, a.out, a.outputs, a.noutputs);
  Checkpoint c;
  if (!weights_read(NULL, a.in, &c)) return EXIT_SCRIPT;
  const char **names = mem_alloc(NULL, sizeof *names * (size_t)(c.ntensors + 1));
  Tensor **t = mem_alloc(NULL, sizeof *t * (size_t)(c.ntensors + 1));
  const char **meta = mem_alloc(NULL, sizeof *meta * (size_t)(2 * c.nsettings + 2));
  int n = 0, nmeta = 0;
  for (int i = 0; i < c.ntensors; i++)
    if (a.optimizer || !weights_is_optimizer(c.tensors[i].name)) names[n] = c.tensors[i].name, t[n++] = c.tensors[i].t;
  /* A script state's mark (state.NAME) goes along, as safetensors metadata. */
  for (int i = 0; i < c.nsettings; i++)
    if (strncmp(c.settings[i].key, CKPT_STATE_MARK, strlen(CKPT_STATE_MARK)) == 0 && ckpt_find(&c, c.settings[i].key + strlen(CKPT_STATE_MARK))) {
      meta[2 * nmeta] = c.settings[i].key;
      meta[2 * nmeta++ + 1] = c.settings[i].value;
    }
  /* ... and into an npz as the NPY_STATES member (npy.h), when the file
   * read says which values are states (a foreign npz does not) */
  const char **states = mem_alloc(NULL, sizeof *states * (size_t)(nmeta + 1));
  for (int i = 0; i < nmeta; i++) states[i] = meta[2 * i] + strlen(CKPT_STATE_MARK);
  char err[1400];
  bool ok = a.npz ? npy_write_npz_states(a.out, names, t, n, weights_marks_states(&c) ? states : NULL, nmeta, err,
                                         sizeof err)
                  : st_write(a.out, names, t, n, meta, nmeta, err, sizeof err);
  mem_free(states);
  if (!ok) diag_error(NULL, SPAN_NONE, "%s", err);
  mem_free(names);
  mem_free(t);
  mem_free(meta);
  ckpt_free(&c);
  return ok ? 0 : EXIT_SCRIPT;
}
