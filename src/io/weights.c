/* weights.c — reading weights in any of the formats netrun knows
 * (weights.h); `netrun export` writes them (cli/exportverb.c). */
#include "io/weights.h"

#include "base/file.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "ir/names.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool weights_is_optimizer(const char *name) { return strchr(name, '@') != NULL; }

static DType dtype_of(NpyType t) {
  return t == NPY_F32 || t == NPY_F64 ? DT_F32 : t == NPY_BOOL ? DT_BOOL : DT_I64;
}

/* The NPY_STATES member of an .npz: each name a state, marked as a
 * checkpoint marks it (CKPT_STATE_MARK NAME), and CKPT_STATE_MARK alone
 * set: the file marks its states, even none. */
static bool npz_states(Checkpoint *c, const NpyHeader *h, NpyIn *in, char *why, size_t n) {
  if (ckpt_get(c, CKPT_STATE_MARK)) return diag_why(why, n, "twice");
  if (!h->chars || h->rank != 1)
    return diag_why(why, n, "not netrun's list of states (a 1-D array of strings, NumPy's '<U')");
  char *names = npy_read_strings(in, h, why, n);
  if (!names) return false;
  bool ok = true;
  const char *at = names;
  for (int64_t i = 0; ok && i < h->numel; i++, at += strlen(at) + 1) {
    if (!at[0] || strlen(at) + strlen(CKPT_STATE_MARK) > CKPT_MAX_NAME)
      ok = diag_why(why, n, "string %" PRId64 " is not the name of a state (empty, or longer than %d bytes)", i,
                    CKPT_MAX_NAME - (int)strlen(CKPT_STATE_MARK));
    else {
      char key[CKPT_MAX_NAME + 1];
      snprintf(key, sizeof key, "%s%s", CKPT_STATE_MARK, at);
      ckpt_set(c, key, "state");
    }
  }
  if (ok) ckpt_set(c, CKPT_STATE_MARK, "listed");
  mem_free(names);
  return ok;
}

/* A .npz member as a checkpoint tensor (or its list of states). */
static bool npz_tensor(void *ctx, const char *name, const NpyHeader *h, NpyIn *in, char *why, size_t n) {
  Checkpoint *c = ctx;
  if (strcmp(name, NPY_STATES) == 0) return npz_states(c, h, in, why, n);
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
  /* One open, checked on its descriptor (a FIFO is refused, not waited
   * on), and the same descriptor read: the file told apart by its first
   * bytes is the file read. */
  char err[1400];
  ckpt_init(out);
  int fd = file_open_regular(path, err, sizeof err);
  if (fd < 0) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", path, err);
    return false;
  }
  uint8_t b[16];
  ssize_t k = pread(fd, b, sizeof b, 0);
  size_t n = k > 0 ? (size_t)k : 0;
  if (npy_is_zip(b, n)) {
    if (npy_each_fd(d, fd, path, npz_tensor, out)) return true;
    ckpt_free(out);
    return false;
  }
  /* not netrun's own magic: a safetensors file by its header, or by its
   * name (then its header's length or JSON is what st_read names) */
  size_t len = strlen(path);
  bool st_name = len >= 12 && strcmp(path + len - 12, ".safetensors") == 0;
  bool ok = (n < 8 || memcmp(b, "NETRUNCK", 8) != 0) && (st_is_safetensors(b, n) || st_name)
                ? st_read_fd(fd, path, out, err, sizeof err)
                : ckpt_read_fd(fd, path, out, err, sizeof err);
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

/* Whether v's value in c is of the other kind: a state (marked
 * CKPT_STATE_MARK NAME) for a parameter, or a parameter for a state.  A
 * netrun checkpoint (one with a program hash) marks every state; other files (npz,
 * safetensors from elsewhere) say only what they mark. */
static bool kind_differs(const Checkpoint *c, const VarDesc *v) {
  char mark[CKPT_MAX_NAME + sizeof CKPT_STATE_MARK];
  snprintf(mark, sizeof mark, "%s%s", CKPT_STATE_MARK, v->name);
  bool marked = ckpt_get(c, mark) != NULL, kept = (v->flags & VAR_KEPT) != 0;
  return (c->program_hash != 0 || marked || ckpt_get(c, CKPT_STATE_MARK)) && marked != kept;
}

/* Whether c says which of its values are states: a netrun checkpoint
 * does, a file with at least one mark (safetensors that netrun exported),
 * and an npz with the NPY_STATES member (CKPT_STATE_MARK alone set). */
bool weights_marks_states(const Checkpoint *c) {
  if (c->program_hash) return true;
  for (int i = 0; i < c->nsettings; i++)
    if (strncmp(c->settings[i].key, CKPT_STATE_MARK, strlen(CKPT_STATE_MARK)) == 0) return true;
  return false;
}

bool weights_apply(Diag *d, const Program *p, Executor *ex, const Checkpoint *c, const char *path, unsigned flags,
                   WeightsMatch match) {
  const Block *b0 = p->blocks[0];
  Names missing = {"", 0}, unmarked = {"", 0};
  bool marks = weights_marks_states(c);
  int loaded = 0;
  for (int i = 0; i < b0->nvars; i++) {
    const VarDesc *v = b0->vars[i];
    if (!(v->flags & flags) || strcmp(v->name, NAME_LR) == 0) continue;
    Tensor *t = ckpt_find(c, v->name);
    Tensor *have = exec_var_value(ex, v->name);
    if (!t && match == WEIGHTS_PARTIAL) {
      names_add(&missing, v->name);
    } else if (!t) {
      diag_error(d, SPAN_NONE, "%s has no value for '%s'", path, v->name);
      return false;
    } else if (kind_differs(c, v)) {
      bool kept = (v->flags & VAR_KEPT) != 0;
      diag_error(d, SPAN_NONE, "%s: '%s' is a %s there, but a %s here", path, v->name, kept ? "parameter" : "state",
                 kept ? "state" : "parameter");
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
      if (!marks && (v->flags & VAR_KEPT)) names_add(&unmarked, v->name);
    }
  }
  if (unmarked.n)
    diag_note(d, SPAN_NONE, "%s does not mark its states (as netrun's checkpoints do): %s %s took %s by name",
              path, unmarked.n == 1 ? "the state" : "the states", unmarked.s, unmarked.n == 1 ? "its value" : "their values");
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
