/* fuzz_npy.c — bytes read as NumPy files: as --feed reads a .npy or .npz
 * (into an f32, i64 or bool input), as a .npz dataset with every batch
 * gathered, and as --weights reads a .npz.
 *
 * Seeds: the files of tests/cases/formats/files (made by its make.py), good
 * and bad, .npy and .npz, stored and deflated. */
#include "fuzz.h"

#include "data.h"
#include "npy.h"
#include "weights.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  tensor_set_memory_limit((int64_t)64 << 20);
  return 0;
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
    static const DType want[] = {DT_F32, DT_I64, DT_BOOL};
    VarDesc v = {.name = "x", .user_name = "x", .dtype = want[size % 3]};
    tensor_unref(npy_feed(&d, path, &v));
    if (npy_is_zip(data, size)) {
      Dataset ds;
      if (data_open(&d, path, NULL, &ds)) {
        Batcher b;
        data_batcher_init(&b, &ds, 3, false);
        data_epoch(&b, NULL);
        Batch bt;
        while (data_next(&b, &bt)) data_batch_release(&bt);
        data_batcher_free(&b);
        data_free(&ds);
      }
      Checkpoint c;
      if (weights_read(&d, path, &c)) ckpt_free(&c);
    }
    close(fd);
  }
  arena_free(&arena);
  return 0;
}
