/* fuzz_checkpoint.c — bytes read as a checkpoint (ckpt_parse: what
 * netrun checkpoint, --resume and --weights read).
 *
 * Seeds: checkpoints written by tests/ckpt/mkckpt (write, tiny).  Most random
 * inputs stop at the CRC, so the harness also parses a copy whose lengths
 * and CRC are repaired, to reach the sections. */
#include "fuzz.h"

#include "io/checkpoint.h"

#include <zlib.h>

FUZZ_INIT_TENSOR_LIMIT

static void le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void parse(const unsigned char *b, size_t n) {
  Checkpoint c;
  char err[1024];
  if (ckpt_parse(b, n, &c, err, sizeof err)) ckpt_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > FUZZ_MAX_INPUT) return 0;
  parse(data, size);
  if (size >= 36) {
    unsigned char *b = mem_alloc(NULL, size);
    memcpy(b, data, size);
    le(b + 12, size, 8);
    memcpy(b + size - 16, "TAIL", 4);
    le(b + size - 12, size, 8);
    le(b + size - 4, crc32(crc32(0, Z_NULL, 0), b, (uInt)(size - 4)), 4);
    parse(b, size);
    mem_free(b);
  }
  return 0;
}
