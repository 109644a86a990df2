/* fuzz_onnx.c — bytes read as an ONNX model (netrun import's input): the
 * wire-format reader of src/io/onnx.c, then the graph's order (onnx_sort),
 * which checks that names are defined once and form no cycle.
 *
 * Seeds: the models of tests/onnx/models.py and the crafted files of
 * tests/onnx.bats (tests/fuzz/corpus/onnx). */
#include "fuzz.h"

#include "io/onnx.h"

FUZZ_INIT_TENSOR_LIMIT

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > FUZZ_MAX_INPUT) return 0;
  Arena a;
  arena_init(&a);
  OnnxModel m;
  char why[1024];
  if (onnx_parse(&a, data, size, &m, why, sizeof why)) {
    int *order = arena_alloc(&a, (size_t)(m.graph->nnodes + 1) * sizeof *order);
    onnx_sort(&a, m.graph, order, why, sizeof why);
  }
  arena_free(&a);
  return 0;
}
