/* weights.c — reading weights in any of the formats netrun knows, and the
 * `netrun export` verb (weights.h). */
#include "io/weights.h"

#include "cli/cmd.h"
#include "io/npy.h"
#include "cli/option.h"
#include "io/safetensors.h"
#include "train/train.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool weights_is_optimizer(const char *name) { return strchr(name, '@') != NULL; }

static DType dtype_of(NpyType t) {
  return t == NPY_F32 || t == NPY_F64 ? DT_F32 : t == NPY_BOOL ? DT_BOOL : DT_I64;
}

/* A .npz member as a checkpoint tensor. */
static bool npz_tensor(void *ctx, const char *name, const NpyHeader *h, NpyIn *in, char *why, size_t n) {
  Checkpoint *c = ctx;
  char tw[TENSOR_WHY_MAX];
  if (ckpt_find(c, name)) {
    snprintf(why, n, "twice");
    return false;
  }
  Tensor *t = tensor_try_new(dtype_of(h->type), h->rank, h->shape, tw);
  if (!t) {
    snprintf(why, n, "out of memory: %s", tw);
    return false;
  }
  bool ok = npy_read_data(in, h, npy_of_dtype(t->dtype), t->data, why, n);
  if (ok) ckpt_add_tensor(c, name, t);
  tensor_unref(t);
  return ok;
}

/* The first bytes of path into b[16] (what the formats are told apart
 * by); their count, 0 if it cannot be read. */
static size_t first_bytes(const char *path, uint8_t *b) {
  ssize_t k = 0;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) {
    k = read(fd, b, 16);
    close(fd);
  }
  return k > 0 ? (size_t)k : 0;
}

bool weights_read(Diag *d, const char *path, Checkpoint *out) {
  uint8_t b[16];
  size_t n = first_bytes(path, b);
  char err[1400];
  ckpt_init(out);
  if (npy_is_zip(b, n)) {
    if (npy_each(d, path, npz_tensor, out)) return true;
    ckpt_free(out);
    return false;
  }
  bool ok = (n < 8 || memcmp(b, "NETRUNCK", 8) != 0) && st_is_safetensors(b, n) ? st_read(path, out, err, sizeof err)
                                                                                 : ckpt_read(path, out, err, sizeof err);
  if (!ok) diag_error(d, SPAN_NONE, "%s", err);
  return ok;
}

/* Reads path as weights_read does, a message into err instead of a Diag:
 * for callers with no source position (an op's kernel, lowering's index). */
bool weights_read_quiet(const char *path, Checkpoint *out, char *err, size_t n) {
  char *msg = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&msg, &len);
  if (!m) return diag_why(err, n, "%s: out of memory", path);
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d, &a);
  d.out = m;
  bool ok = weights_read(&d, path, out);
  fclose(m);
  if (!ok) {
    const char *e = msg ? strstr(msg, "error: ") : NULL;
    snprintf(err, n, "%s", e ? e + 7 : msg && *msg ? msg : path);
    size_t k = strlen(err);
    while (k && err[k - 1] == '\n') err[--k] = 0;
  }
  free(msg);
  arena_free(&a);
  return ok;
}

/* The dtype a safetensors entry holds, as a script declares it. */
static DType toc_dtype(NpyType t) {
  return t == NPY_F32 ? DT_F32 : t == NPY_F64 ? DT_F64 : t == NPY_BOOL ? DT_BOOL : DT_I64;
}

bool weights_toc(Arena *a, const char *path, WeightsToc *out, char *err, size_t n) {
  uint8_t b[16];
  size_t k = first_bytes(path, b);
  *out = (WeightsToc){0};
  if (st_is_safetensors(b, k) && memcmp(b, "NETRUNCK", 8) != 0) {
    StHeader h;
    if (!st_read_header(path, &h, err, n)) return false;
    out->e = arena_alloc(a, (size_t)(h.n ? h.n : 1) * sizeof *out->e);
    for (int i = 0; i < h.n; i++) {
      WeightsEntry *e = &out->e[out->n++];
      e->name = arena_strdup(a, h.t[i].name);
      e->dtype = toc_dtype(h.t[i].type);
      e->rank = h.t[i].rank;
      memcpy(e->shape, h.t[i].shape, sizeof e->shape);
    }
    st_header_free(&h);
    return true;
  }
  Checkpoint c;
  if (!weights_read_quiet(path, &c, err, n)) return false;
  out->e = arena_alloc(a, (size_t)(c.ntensors ? c.ntensors : 1) * sizeof *out->e);
  for (int i = 0; i < c.ntensors; i++) {
    const Tensor *t = c.tensors[i].t;
    WeightsEntry *e = &out->e[out->n++];
    e->name = arena_strdup(a, c.tensors[i].name);
    e->dtype = t->dtype;
    e->rank = t->rank;
    for (int j = 0; j < t->rank; j++) e->shape[j] = t->shape[j];
  }
  ckpt_free(&c);
  return true;
}

/* ---- loading into an executor ------------------------------------------------------- */

typedef struct Names {
  char s[1024];
  int n;
} Names;

static void names_add(Names *l, const char *name) {
  size_t k = strlen(l->s);
  snprintf(l->s + k, sizeof l->s - k, "%s%s", l->n++ ? ", " : "", name);
}

/* The file's values that no variable of flags takes (optimizer state
 * aside): an error for an exact match, a note for a partial one. */
static bool unused(Diag *d, const Program *p, const Checkpoint *c, const char *path, unsigned flags,
                   WeightsMatch match) {
  Names l = {"", 0};
  for (int i = 0; i < c->ntensors; i++) {
    const char *name = c->tensors[i].name;
    const VarDesc *v = prog_var(p, name);
    if (weights_is_optimizer(name) || (v && v->block == 0 && (v->flags & flags))) continue;
    names_add(&l, name);
  }
  if (!l.n) return true;
  if (match == WEIGHTS_PARTIAL) {
    diag_note(d, SPAN_NONE, "in %s but not in the script: %s", path, l.s);
    return true;
  }
  diag_error(d, SPAN_NONE, "%s has %d value%s the script has no parameter or state for: %s "
             "(--weights-partial loads the others)", path, l.n, l.n == 1 ? "" : "s", l.s);
  return false;
}

bool weights_apply(Diag *d, const Program *p, Executor *ex, const Checkpoint *c, const char *path, unsigned flags,
                   WeightsMatch match) {
  const Block *b0 = p->blocks[0];
  Names missing = {"", 0};
  int loaded = 0;
  for (int i = 0; i < b0->nvars; i++) {
    const VarDesc *v = b0->vars[i];
    if (!(v->flags & flags) || strcmp(v->name, TRAIN_LR_VAR) == 0) continue;
    Tensor *t = ckpt_find(c, v->name);
    Tensor *have = exec_var_value(ex, v->name);
    if (!t && match == WEIGHTS_PARTIAL) {
      names_add(&missing, v->name);
    } else if (!t) {
      diag_error(d, SPAN_NONE, "%s has no value for '%s'", path, v->name);
      return false;
    } else if (have && (!tensor_same_shape(t, have) ||
                        (t->dtype != have->dtype && !(t->dtype == DT_F32 && have->dtype == DT_F64)))) {
      char a[128], b[128];
      diag_error(d, SPAN_NONE, "%s: '%s' is %s%s there, but %s%s here", path, v->name, dtype_name(t->dtype),
                 tensor_shape_str(t, a, sizeof a), dtype_name(have->dtype), tensor_shape_str(have, b, sizeof b));
      return false;
    } else {
      /* an f32 value loads into an f64 program (--dtype f64), widened */
      Tensor *copy = have && have->dtype != t->dtype ? tensor_cast(t, have->dtype) : tensor_copy(t);
      copy->requires_grad = (v->flags & VAR_PARAM) != 0;
      exec_preload(ex, v->name, copy);
      tensor_unref(copy);
      loaded++;
    }
  }
  if (match == WEIGHTS_RESUME) return true;
  if (match == WEIGHTS_PARTIAL) {
    diag_note(d, SPAN_NONE, "--weights-partial: %d value%s loaded from %s", loaded, loaded == 1 ? "" : "s", path);
    if (missing.n) diag_note(d, SPAN_NONE, "not in %s, so as initialized: %s", path, missing.s);
  }
  return unused(d, p, c, path, flags, match);
}

bool weights_load(Diag *d, const Program *p, Executor *ex, const char *path, bool partial) {
  Checkpoint c;
  if (!weights_read(d, path, &c)) return false;
  bool ok = exec_startup(ex) == 0 &&
            weights_apply(d, p, ex, &c, path, VAR_PARAM | VAR_KEPT, partial ? WEIGHTS_PARTIAL : WEIGHTS_EXACT);
  ckpt_free(&c);
  return ok;
}

/* ---- netrun export ----------------------------------------------------------------- */

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
  char err[1400];
  bool ok = a.npz ? npy_write_npz(a.out, names, t, n, err, sizeof err)
                  : st_write(a.out, names, t, n, meta, nmeta, err, sizeof err);
  if (!ok) diag_error(NULL, SPAN_NONE, "%s", err);
  mem_free(names);
  mem_free(t);
  mem_free(meta);
  ckpt_free(&c);
  return ok ? 0 : EXIT_SCRIPT;
}
