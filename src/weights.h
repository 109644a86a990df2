/* weights.h — a model's weights in the files other tools read: `--weights`
 * from a netrun checkpoint, a .safetensors file or a .npz archive, and the
 * `netrun export` verb that writes the last two.
 *
 * Names are the scoped names of netrun-lang(5) (`dense_1.W`, `bn.mean`);
 * a checkpoint's optimizer state is named PARAM@WHAT (`W@MOMENT1`) and is
 * exported only when asked (--optimizer-state). */
#ifndef NETRUN_WEIGHTS_H
#define NETRUN_WEIGHTS_H

#include "checkpoint.h"

/* Reads the weights at path, whichever of the three formats it holds (by
 * its first bytes), into *out (initialized); false, reported, on error.
 * .safetensors and .npz tensors come in as f32 (F32, F64), i64 (I64, I32,
 * U8) or bool. */
bool weights_read(Diag *d, const char *path, Checkpoint *out);

/* Whether name is optimizer state (PARAM@WHAT), not a parameter or state. */
bool weights_is_optimizer(const char *name);

#endif
