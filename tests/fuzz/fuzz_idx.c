/* fuzz_idx.c — bytes read as an IDX pair IMAGES:LABELS (raw or gzip), as
 * netrun train's data = "IMAGES:LABELS" reads it, and every batch gathered.
 * The input is the two files one after the other; its first two bytes
 * (little-endian) say where the labels file starts. */
#include "fuzz.h"

#include "io/data.h"

FUZZ_INIT_TENSOR_LIMIT

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || size > FUZZ_MAX_INPUT) return 0;
  size_t split = (size_t)data[0] | (size_t)data[1] << 8;
  data += 2, size -= 2;
  if (split > size) split = size;
  FuzzDiag q;
  Diag *d = fuzz_diag(&q);
  char images[64], labels[64], spec[160];
  int fi = fuzz_file(data, split, images, sizeof images);
  int fl = fuzz_file(data + split, size - split, labels, sizeof labels);
  if (fi >= 0 && fl >= 0) {
    snprintf(spec, sizeof spec, "%s:%s", images, labels);
    Dataset ds;
    if (data_open(d, spec, NULL, &ds)) {
      fuzz_epoch(&ds, 3, false, false);
      data_free(&ds);
    }
  }
  if (fi >= 0) close(fi);
  if (fl >= 0) close(fl);
  fuzz_diag_free(&q);
  return 0;
}
