/* fuzz_csv.c — bytes read as a CSV dataset (netrun train's data = "FILE",
 * netrun data FILE), every batch of it gathered; as a --feed file for an
 * input [B, 3]; and as a --set value. */
#include "fuzz.h"

#include "data.h"
#include "feed.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  tensor_set_memory_limit((int64_t)64 << 20);
  return 0;
}

static void batches(const Dataset *ds, int64_t size) {
  Batcher b;
  data_batcher_init(&b, ds, size, size % 2 == 0);
  Rng rng;
  rng_seed(&rng, 1);
  data_epoch(&b, &rng);
  Batch bt;
  while (data_next(&b, &bt)) data_batch_release(&bt);
  data_batcher_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > FUZZ_MAX_INPUT) return 0;
  Arena arena;
  arena_init(&arena);
  Diag d;
  diag_init(&d, &arena);
  d.out = fuzz_null();
  char path[64];
  int fd = fuzz_file(data, size, path, sizeof path);
  if (fd >= 0) {
    /* The label column: the default, or one named by index or name. */
    static const char *const labels[] = {NULL, "0", "y"};
    DataOptions opt = {.label = labels[size % 3]};
    Dataset ds;
    if (data_open(&d, path, &opt, &ds)) {
      batches(&ds, 1 + (int64_t)(size % 5));
      data_free(&ds);
    }
    VarDesc v = {.name = "x", .dtype = size % 2 ? DT_F32 : DT_I64};
    v.shape.rank = 2;
    v.shape.d[0] = (Dim){.n = -1, .sym = "B"};
    v.shape.d[1] = (Dim){.n = 3};
    tensor_unref(feed_read_csv(&d, path, &v));
    close(fd);
  }
  char *text = arena_strndup(&arena, (const char *)data, size);
  tensor_unref(feed_parse_value(&d, "x", text, size % 2 ? DT_F32 : DT_I64));
  arena_free(&arena);
  return 0;
}
