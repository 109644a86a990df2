/* weights.h — a model's weights in the files other tools read: `--weights`
 * from a netrun checkpoint, a .safetensors file or a .npz archive (the
 * `netrun export` verb, cli/exportverb.c, writes the last two).
 *
 * Names are the scoped names of netrun-lang(5) (`dense_1.W`, `bn.mean`);
 * a checkpoint's optimizer state is named PARAM@WHAT (`W@MOMENT1`) and is
 * exported only when asked (--optimizer-state). */
#ifndef NETRUN_WEIGHTS_H
#define NETRUN_WEIGHTS_H

#include "io/checkpoint.h"
#include "exec/exec.h"

/* Reads the weights at path, whichever of the three formats it holds (by
 * its first bytes), into *out (initialized); false, reported, on error.
 * .safetensors and .npz tensors come in as f32 (F32, F64), i64 (I64, I32,
 * U8) or bool. */
bool weights_read(Diag *d, const char *path, Checkpoint *out);

/* weights_read with the message written into err[n] (no Diag). */
bool weights_read_quiet(const char *path, Checkpoint *out, char *err, size_t n);

/* A weights file's table of contents, what lowering checks a
 * `weights("FILE")` initializer against (netrun-lang(5)): of a .safetensors
 * file only its header is read; of another format, the whole file (then
 * freed).  Entries live in the arena. */
typedef struct WeightsEntry {
  const char *name;
  DType dtype;
  int rank;
  int64_t shape[SHAPE_MAX_RANK];
} WeightsEntry;
typedef struct WeightsToc {
  WeightsEntry *e;
  int n;
} WeightsToc;
bool weights_toc(Arena *a, const char *path, WeightsToc *out, char *err, size_t n);

/* How weights_apply matches the file's values to the script's. */
typedef enum WeightsMatch {
  WEIGHTS_EXACT,     /* --weights: every value the script has, nothing else
                        (optimizer state, PARAM@WHAT, aside) */
  WEIGHTS_PARTIAL,   /* --weights-partial: those it has; notes name the rest */
  WEIGHTS_RESUME,    /* --resume: every value the script has; the file's
                        others are the run's (its position, settings) */
} WeightsMatch;

/* Preloads into ex (over p, its startup block run) the values of c for
 * block 0's variables with any of `flags` (VAR_PARAM, VAR_KEPT, VAR_STATE),
 * by name, each with the shape and dtype the script gives it; errors and
 * notes name path. */
bool weights_apply(Diag *d, const Program *p, Executor *ex, const Checkpoint *c, const char *path, unsigned flags,
                   WeightsMatch match);
/* weights_read, then weights_apply of the parameters and states:
 * `run --weights`. */
bool weights_load(Diag *d, const Program *p, Executor *ex, const char *path, bool partial);

/* Whether name is optimizer state (PARAM@WHAT), not a parameter or state. */
bool weights_is_optimizer(const char *name);
/* Whether c says which of its values are states (the others parameters):
 * a netrun checkpoint, a safetensors file netrun exported, an .npz with
 * NPY_STATES (npy.h); a file from elsewhere does not. */
bool weights_marks_states(const Checkpoint *c);

#endif
