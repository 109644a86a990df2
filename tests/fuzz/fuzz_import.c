/* fuzz_import.c — bytes imported as an ONNX model by `netrun import`: the
 * reader, then the translation into a script, each statement lowered
 * (src/cli/importverb.c), into a folder of the harness's own.
 *
 * Seeds: those of fuzz_onnx (tests/fuzz/corpus/onnx). */
#include "fuzz.h"

#include "cli/cmd.h"

#include <stdlib.h>

static char out[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  tensor_set_memory_limit((int64_t)64 << 20);
  snprintf(out, sizeof out, "/tmp/netrun-fuzz-import-XXXXXX");
  if (!mkdtemp(out)) abort();
  strcat(out, "/m.net");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > FUZZ_MAX_INPUT) return 0;
  char path[64];
  int fd = fuzz_file(data, size, path, sizeof path);
  if (fd < 0) return 0;
  /* external data is read from the input's folder: at most 16M of it */
  char *argv[] = {"import", path, "-o", out, "--force", "--max-memory", "16M", NULL};
  cmd_import(7, argv);
  close(fd);
  return 0;
}
