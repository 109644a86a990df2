/* weightsop.c — load_weights, the startup op a `weights("FILE")`
 * initializer lowers to (netrun-lang(5), VALUES FROM A WEIGHTS FILE).
 *
 * One op per file: lowering merges the initializers naming one file into a
 * single op whose outputs are the variables and whose `keys` name their
 * tensors in the file, so the file is read once when the startup block
 * runs, whatever number of parameters it initializes.  Lowering has checked
 * each key, shape and dtype against the file's table of contents; the
 * kernel checks them again, as the file may have changed since. */
#include "exec/exec.h"
#include "io/weights.h"

#include <string.h>

static bool infer_load_weights(InferCtx *c) {
  const AttrValue *k = reg_infer_attr(c, "keys");
  if (!k || k->type != ATTR_STRINGS) return reg_infer_fail(c, "attribute 'keys' must be a string list");
  int n = slot_count(op_output(c->op, "Out"));
  if (k->n != n) return reg_infer_fail(c, "%d keys for %d outputs", k->n, n);
  return true;
}

static int k_load_weights(ExecCtx *c) {
  const AttrValue *file = exec_ctx_attr(c, "file"), *keys = exec_ctx_attr(c, "keys");
  Checkpoint ck;
  char err[1400];
  if (!weights_read_quiet(file->u.s, &ck, err, sizeof err)) return exec_ctx_fail(c, "%s", err);
  int rc = 0;
  for (int i = 0; i < keys->n && rc == 0; i++) {
    Tensor *out = exec_ctx_out_at(c, 0, i);
    const Tensor *t = ckpt_find(&ck, keys->u.strings[i]);
    bool same = t && t->rank == out->rank;
    for (int j = 0; same && j < t->rank; j++) same = t->shape[j] == out->shape[j];
    if (!same) {
      rc = exec_ctx_fail(c, "%s: '%s' %s (the file changed since the script was lowered)", file->u.s,
                         keys->u.strings[i], t ? "has another shape now" : "is missing now");
    } else if (t->dtype == out->dtype) {
      if (t->numel) memcpy(out->data, t->data, (size_t)t->numel * dtype_size(t->dtype));
    } else {
      for (int64_t j = 0; j < t->numel; j++) tensor_set(out, j, tensor_get(t, j));
    }
  }
  ckpt_free(&ck);
  return rc;
}

OpProto op_table_weightsfile[] = {
    {.type = "load_weights", .doc = "Out[i] = the tensor keys[i] of the weights file `file` (weights(\"FILE\"))",
     .out = {{"Out", SLOT_LIST, "the parameters and states it initializes"}},
     .attrs = {{"file", ATTR_STRING, NULL, NULL, "the file's path, as lowering resolved it"},
               {"keys", ATTR_STRINGS, NULL, NULL, "each output's name in the file"}},
     .infer = infer_load_weights, .kernel = k_load_weights, .grad_kind = GRAD_NONE,
     .flags = OP_INTERNAL | OP_CONSTANT | OP_F64},
    {0},
};
