/* fuzz_feed.c — bytes read as `--feed NAME=FILE` reads them (a .npy, a
 * .npz or a CSV file, told by its first bytes) into inputs of every dtype
 * and of declared shapes with huge sizes ([B, 2^62], [2^63 - 1, 0]), and
 * of any shape.
 *
 * Seeds: tests/fuzz/corpus/npy's files and a few CSV files of its own
 * (tests/fuzz/corpus/feed). */
#include "fuzz.h"

#include "front/feed.h"

static void read_feed(Diag *d, const char *path, const uint8_t *data, size_t size) {
  static const DType want[] = {DT_F32, DT_I64, DT_BOOL, DT_F64};
  static const int64_t dim[] = {-1, 0, 1, 3, (int64_t)1 << 62, INT64_MAX};
  (void)data;
  VarDesc v = {.name = "x", .user_name = "x", .dtype = want[size % 4]};
  v.shape.rank = 1 + (int)(size / 4 % 3);
  for (int i = 0; i < v.shape.rank; i++) {
    int64_t n = dim[(size / 12 + (size_t)i * 5) % 6];
    v.shape.d[i] = n < 0 ? (Dim){.n = -1, .sym = "B"} : (Dim){.n = n};
  }
  tensor_unref(feed_read_file(d, path, &v));
  v.shape.rank = -1;   /* any shape */
  tensor_unref(feed_read_file(d, path, &v));
}

FUZZ_FILE_HARNESS(read_feed)
