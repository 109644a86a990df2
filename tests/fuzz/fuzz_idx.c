/* fuzz_idx.c — bytes read as an IDX pair IMAGES:LABELS (raw or gzip), as
 * netrun train's data = "IMAGES:LABELS" reads it, and every batch gathered.
 * The input is the two files one after the other; its first two bytes
 * (little-endian) say where the labels file starts. */
#include "fuzz.h"

#include "data.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  tensor_set_memory_limit((int64_t)64 << 20);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || size > FUZZ_MAX_INPUT) return 0;
  size_t split = (size_t)data[0] | (size_t)data[1] << 8;
  data += 2, size -= 2;
  if (split > size) split = size;
  Arena arena;
  arena_init(&arena);
  Diag d;
  diag_init(&d, &arena);
  d.out = fuzz_null();
  char images[64], labels[64], spec[160];
  int fi = fuzz_file(data, split, images, sizeof images);
  int fl = fuzz_file(data + split, size - split, labels, sizeof labels);
  if (fi >= 0 && fl >= 0) {
    snprintf(spec, sizeof spec, "%s:%s", images, labels);
    Dataset ds;
    if (data_open(&d, spec, NULL, &ds)) {
      Batcher b;
      data_batcher_init(&b, &ds, 3, false);
      data_epoch(&b, NULL);
      Batch bt;
      while (data_next(&b, &bt)) data_batch_release(&bt);
      data_batcher_free(&b);
      data_free(&ds);
    }
  }
  if (fi >= 0) close(fi);
  if (fl >= 0) close(fl);
  arena_free(&arena);
  return 0;
}
