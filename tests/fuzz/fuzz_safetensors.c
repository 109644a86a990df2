/* fuzz_safetensors.c — bytes read as a .safetensors file (--weights, export's
 * input), and as a safetensors header's JSON alone.
 *
 * Seeds: the .safetensors files of tests/cases/formats/files.  A mutation
 * that breaks the 8-byte header length would stop at it, so the harness
 * also reads a copy whose length is repaired: the bytes after the first 8
 * up to their last '}' are the header, the rest the data. */
#include "fuzz.h"

#include "io/safetensors.h"
#include "io/weights.h"

FUZZ_INIT_TENSOR_LIMIT

static void read_file(Diag *d, const uint8_t *data, size_t size) {
  char path[64];
  int fd = fuzz_file(data, size, path, sizeof path);
  if (fd < 0) return;
  Checkpoint c;
  if (weights_read(d, path, &c)) ckpt_free(&c);
  close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > FUZZ_MAX_INPUT) return 0;
  FuzzDiag q;
  Diag *d = fuzz_diag(&q);
  read_file(d, data, size);
  if (size > 8) {
    size_t end = size;
    while (end > 8 && data[end - 1] != '}') end--;
    uint8_t *b = mem_alloc(NULL, size);
    memcpy(b, data, size);
    uint64_t n = end > 8 ? end - 8 : size - 8;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(n >> (8 * i));
    read_file(d, b, size);
    mem_free(b);
  }
  StHeader h;
  char why[512];
  st_parse_header((const char *)data, size, size / 2, &h, why, sizeof why);
  st_header_free(&h);
  fuzz_diag_free(&q);
  return 0;
}
