/* checkpoint.h — training checkpoints: what a run saves to resume, in a
 * versioned binary file written atomically, and the `netrun checkpoint` verb.
 *
 * ---- The file format, version 1 ---------------------------------------------
 * All integers are little-endian and fixed-width; strings are a u32 byte
 * count then the bytes (no NUL).  Nothing is aligned.
 *
 *   preamble   8  magic "NETRUNCK"
 *              4  u32 format version (1)
 *              8  u64 total length of the file in bytes, trailer included
 *   sections   each: 4-byte tag, u64 payload length, payload.
 *              "HEAD", "SETS" and "TENS" appear once each, in this order;
 *              a reader skips a section whose tag it does not know.
 *     HEAD     u64 program hash (FNV-1a 64 of the program's canonical text,
 *                  see ckpt_hash), u64 epoch, u64 step, u64 samples seen,
 *              4 × u64 generator state (Rng.s[0..3])              64 bytes
 *     SETS     u32 count, then count × (string key, string value): the run
 *              settings, e.g. optimizer = sgd, lr = 0.1, batch = 128.
 *              Keys: 1-255 bytes of [A-Za-z0-9_.@-]; values: 0-4096
 *              bytes, no control characters; keys unique.
 *     TENS     u32 count, then count × tensor:
 *                string name      1-255 bytes, no control characters, unique
 *                u8 dtype         0 f32, 1 i64, 2 bool, 3 f64
 *                u8 rank          0-8
 *                rank × u64 dims  row-major
 *                data             numel × (4 | 8 | 1) bytes: f32 IEEE-754,
 *                                 i64 two's complement, bool 0 or 1
 *              The names are the caller's; the trainer groups parameters
 *              ("W1") and optimizer state ("W1@VELOCITY", "W1@MOMENT1", "W1@BETA1POW") by
 *              name.  A script's state (a `state` declaration: "count",
 *              "bn.mean") is a tensor like a parameter, marked by a setting
 *              "state.NAME" = "state" (CKPT_STATE_MARK); files without such
 *              settings read as before, and older readers ignore them.
 *   trailer    4  "TAIL"
 *              8  u64 total length (again)
 *              4  u32 CRC-32 (zlib's crc32) of every byte before it
 *
 * A reader checks, in order: the magic, the version (a newer one is refused
 * before anything else is read, since it may change the rest), the total
 * length against the file's size (truncated), the CRC (corrupt), then each
 * section, validating every count, length and shape against the bytes that
 * remain and the limits below before allocating anything.
 * Version history: 1 — the first.
 *
 * ---- Ownership ------------------------------------------------------------
 * A Checkpoint owns its strings and one reference to each of its tensors;
 * ckpt_free() releases them.  ckpt_add_tensor() takes its own reference
 * (the caller keeps theirs); ckpt_find() lends one that lives as long as the
 * checkpoint.
 */
#ifndef NETRUN_CHECKPOINT_H
#define NETRUN_CHECKPOINT_H

#include "ir/tensor.h"

#define CKPT_VERSION 1
#define CKPT_MAX_NAME 255         /* bytes in a tensor name or setting key */
#define CKPT_MAX_VALUE 4096       /* bytes in a setting's value */
#define CKPT_MAX_SETTINGS 4096
#define CKPT_MAX_TENSORS 65536
#define CKPT_MAX_FILE ((uint64_t)64 << 30)
/* A tensor that is a script's state (a `state` declaration, not a parameter)
 * has a setting CKPT_STATE_MARK NAME = "state" beside it: "state.bn.mean". */
#define CKPT_STATE_MARK "state."

typedef struct CkptSetting {
  char *key, *value;
} CkptSetting;

typedef struct CkptTensor {
  char *name;
  Tensor *t;
} CkptTensor;

typedef struct Checkpoint {
  uint32_t version;               /* of the file read; ckpt_write writes CKPT_VERSION */
  uint64_t program_hash;
  uint64_t epoch, step, samples;
  Rng rng;
  CkptSetting *settings;          /* in the order they were set */
  int nsettings, capsettings;
  CkptTensor *tensors;            /* in the order they were added */
  int ntensors, captensors;
} Checkpoint;

void ckpt_init(Checkpoint *c);
void ckpt_free(Checkpoint *c);    /* leaves c empty, as after ckpt_init */

/* FNV-1a, 64 bits: the program hash of a program's canonical text dump. */
uint64_t ckpt_hash(const void *bytes, size_t n);

/* Sets key to value, replacing an earlier value (which keeps its place). */
void ckpt_set(Checkpoint *c, const char *key, const char *value);
void ckpt_setf(Checkpoint *c, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The value of key, or NULL. */
const char *ckpt_get(const Checkpoint *c, const char *key);

/* Stores t under name (taking a reference), replacing a tensor of that name. */
void ckpt_add_tensor(Checkpoint *c, const char *name, Tensor *t);
/* The tensor called name, or NULL; borrowed from c. */
Tensor *ckpt_find(const Checkpoint *c, const char *name);

/* Writes c to path atomically: a temporary file PATH.tmp.XXXXXX beside it is
 * written, flushed and fsync'ed, renamed over path, and the folder is
 * fsync'ed.  On any failure (a name the format cannot hold, ENOSPC, EACCES,
 * EIO ...) the temporary file is removed, an existing file at path is left
 * untouched, and err receives "PATH: what went wrong: the OS error".  (If
 * only the final sync of the folder fails, the new file is in place but might
 * not survive a crash; that too returns false.) */
bool ckpt_write(const char *path, const Checkpoint *c, char *err, size_t errlen);

/* Reads the checkpoint at path into *out (which it initializes).  On failure
 * *out is left empty and err receives "PATH: what is wrong", e.g.
 *   not a netrun checkpoint (bad magic)
 *   written by a newer netrun (format version 2; this netrun reads up to 1)
 *   truncated (100 bytes, expected 2048)
 *   corrupt (checksum mismatch)
 *   malformed tensors section: tensor 2 of 4 ('W1'): rank 9 (at most 8) */
bool ckpt_read(const char *path, Checkpoint *out, char *err, size_t errlen);
/* The same for a file already open at fd (named path in errors), which it
 * closes: the file weights_read opened once and checked. */
bool ckpt_read_fd(int fd, const char *path, Checkpoint *out, char *err, size_t errlen);
/* The same for the n bytes at buf (a file already in memory; the fuzzer's
 * entry point); err names no path. */
bool ckpt_parse(const void *buf, size_t n, Checkpoint *out, char *err, size_t errlen);

#endif
