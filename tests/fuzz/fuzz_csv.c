/* fuzz_csv.c — bytes read as a CSV dataset (netrun train's data = "FILE",
 * netrun data FILE), every batch of it gathered; as a --feed file for an
 * input [B, 3]; and as a --set value. */
#include "fuzz.h"

#include "io/data.h"
#include "front/feed.h"

static void read_csv(Diag *d, const char *path, const uint8_t *data, size_t size) {
  /* The label column: the default, or one named by index or name. */
  static const char *const labels[] = {NULL, "0", "y"};
  DataOptions opt = {.label = labels[size % 3]};
  Dataset ds;
  if (data_open(d, path, &opt, &ds)) {
    int64_t n = 1 + (int64_t)(size % 5);
    fuzz_epoch(&ds, n, n % 2 == 0, true);
    data_free(&ds);
  }
  VarDesc v = {.name = "x", .dtype = size % 2 ? DT_F32 : DT_I64};
  v.shape.rank = 2;
  v.shape.d[0] = (Dim){.n = -1, .sym = "B"};
  v.shape.d[1] = (Dim){.n = 3};
  tensor_unref(feed_read_file(d, path, &v));
  char *text = arena_strndup(d->arena, (const char *)data, size);
  tensor_unref(feed_parse_value(d, "x", text, size % 2 ? DT_F32 : DT_I64));
}

FUZZ_FILE_HARNESS(read_csv)
