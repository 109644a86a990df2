/* fuzz_text.c — bytes read as a text dataset (netrun train --context N,
 * netrun data FILE --context N): its train and test splits at a context
 * from tiny to 2^63 - 1, every batch gathered.
 *
 * Seeds: tests/fuzz/corpus/text. */
#include "fuzz.h"

#include "io/data.h"

static void read_text(Diag *d, const char *path, const uint8_t *data, size_t size) {
  static const int64_t contexts[] = {1, 2, 3, 7, 64, INT64_MAX / 2, INT64_MAX - 1, INT64_MAX};
  static const char *const splits[] = {NULL, "train", "test"};
  (void)data;
  DataOptions opt = {.context = contexts[size % 8], .split = splits[size % 3]};
  Dataset ds;
  if (data_open(d, path, &opt, &ds)) {
    fuzz_epoch(&ds, 2, size % 2 == 0, true);
    data_free(&ds);
  }
}

FUZZ_FILE_HARNESS(read_text)
