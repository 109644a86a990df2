/* fuzz_npy.c — bytes read as NumPy files: as --feed reads a .npy or .npz
 * (into an f32, i64 or bool input), as a .npz dataset with every batch
 * gathered, and as --weights reads a .npz.
 *
 * Seeds: the files of tests/cases/formats/files (made by its make.py), good
 * and bad, .npy and .npz, stored and deflated. */
#include "fuzz.h"

#include "front/feed.h"
#include "io/data.h"
#include "io/npy.h"
#include "io/weights.h"

static void read_npy(Diag *d, const char *path, const uint8_t *data, size_t size) {
  static const DType want[] = {DT_F32, DT_I64, DT_BOOL};
  VarDesc v = {.name = "x", .user_name = "x", .dtype = want[size % 3]};
  tensor_unref(feed_read_file(d, path, &v));   /* by its first bytes: .npy, .npz (or CSV) */
  if (npy_is_zip(data, size)) {
    Dataset ds;
    if (data_open(d, path, NULL, &ds)) {
      fuzz_epoch(&ds, 3, false, false);
      data_free(&ds);
    }
    Checkpoint c;
    if (weights_read(d, path, &c)) ckpt_free(&c);
  }
}

FUZZ_FILE_HARNESS(read_npy)
