/* safetensors.h — the safetensors format (Hugging Face's), read and written
 * without its library.
 *
 * ---- The format -----------------------------------------------------------
 *   8 bytes   N, a little-endian u64: the header's length
 *   N bytes   the header: a UTF-8 JSON object.  Each key is a tensor's name,
 *             its value {"dtype": "F32", "shape": [2, 3],
 *             "data_offsets": [BEGIN, END]}; the optional key
 *             "__metadata__" maps strings to strings.  The writer pads it
 *             with spaces to a multiple of 8 bytes, so the data starts
 *             aligned.
 *   the rest  the data: each tensor's elements, little-endian, row-major,
 *             at [BEGIN, END) counted from the data's start.
 * As the reference implementation checks: the tensors' ranges, in order of
 * BEGIN, tile the data exactly (no hole, no overlap, nothing after), END -
 * BEGIN is the shape's elements times the dtype's size, names are unique.
 * Read: F32, F64, I64, I32, U8 and BOOL (F64 becomes f32, I32 and U8 i64,
 * as npy.h's conversions); other dtypes (F16, BF16, ...) are refused.
 *
 * Errors are written into why ("header: ..."), the caller names the file. */
#ifndef NETRUN_SAFETENSORS_H
#define NETRUN_SAFETENSORS_H

#include "io/checkpoint.h"
#include "io/npy.h"

/* The reference implementation's limit on N. */
#define ST_MAX_HEADER 100000000

typedef struct StTensor {
  char *name;
  NpyType type;
  int rank;
  int64_t shape[SHAPE_MAX_RANK];
  int64_t numel;
  uint64_t begin, end;
} StTensor;

typedef struct StHeader {
  StTensor *t;
  int n, cap;
  char **meta;                 /* key, value, key, value ... */
  int nmeta, capmeta;          /* strings in meta */
} StHeader;

/* Parses and checks the n-byte header json against `data` bytes of data. */
bool st_parse_header(const char *json, size_t n, uint64_t data, StHeader *h, char *why, size_t wn);
void st_header_free(StHeader *h);

/* Whether the n bytes at b (a file's start) look like safetensors: a
 * header length, then '{'. */
bool st_is_safetensors(const void *b, size_t n);

/* Reads the file at path into *out (initialized): its tensors in the
 * order of their data, its metadata as settings.  false with err
 * ("PATH: ..."). */
bool st_read(const char *path, Checkpoint *out, char *err, size_t errlen);
/* The same for a file already open at fd (named path in errors), which it
 * closes. */
bool st_read_fd(int fd, const char *path, Checkpoint *out, char *err, size_t errlen);
/* Writes the tensors (t[i] named names[i]) and the metadata settings
 * (meta[2i] = meta[2i+1]) to path, atomically.  Tensors are laid out by
 * decreasing element size, so each starts aligned to its size. */
bool st_write(const char *path, const char *const *names, Tensor *const *t, int n, const char *const *meta,
              int nmeta, char *err, size_t errlen);

#endif
