/* fuzz_plot.c — bytes read as a training log and drawn (netrun plot -o
 * /dev/null LOG): the JSON-lines reader and the SVG writer.  Its seeds are
 * the plot tests' logs, tests/plot. */
#include "fuzz.h"

int cmd_plot(int argc, char **argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > FUZZ_MAX_INPUT) return 0;
  char path[64];
  int fd = fuzz_file(data, size, path, sizeof path);
  if (fd < 0) return 0;
  char *argv[] = {"plot", "-o", "/dev/null", path, NULL};
  cmd_plot(4, argv);
  close(fd);
  return 0;
}
