/* fuzz.h — what the fuzz harnesses in tests/fuzz share.
 *
 * Each harness defines LLVMFuzzerTestOneInput over one kind of untrusted
 * input.  It is built twice: with clang's libFuzzer for `make fuzz`, and
 * with driver.c's main() under the sanitizers of the default compiler, so
 * `make test` replays the corpora and every crash found (tests/fuzz/corpus,
 * tests/fuzz/regress) in seconds.  A harness must not hang, exhaust memory
 * or print: every limit it needs is set here, small. */
#ifndef NETRUN_FUZZ_H
#define NETRUN_FUZZ_H

#include "io/data.h"
#include "front/lower.h"
#include "ir/registry.h"
#include "train/train.h"
#include "front/userop.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Larger inputs only slow the fuzzer down: every path they could reach a
 * smaller one reaches too. */
#define FUZZ_MAX_INPUT (64 * 1024)
/* Function calls expand inline: a few lines can ask for millions of ops. */
#define FUZZ_MAX_OPS 20000

#ifndef NETRUN_STDLIB_DIR
#define NETRUN_STDLIB_DIR "stdlib"
#endif

/* Where diagnostics and print() go: nowhere. */
static inline FILE *fuzz_null(void) {
  static FILE *f;
  if (!f) f = fopen("/dev/null", "w");
  return f;
}

/* The readers' harnesses limit tensors to 64 MB; this is their
 * LLVMFuzzerInitialize. */
#define FUZZ_INIT_TENSOR_LIMIT                              \
  int LLVMFuzzerInitialize(int *argc, char ***argv) {       \
    (void)argc, (void)argv;                                 \
    tensor_set_memory_limit((int64_t)64 << 20);             \
    return 0;                                               \
  }

/* A Diag that prints nothing, over an arena of its own. */
typedef struct FuzzDiag {
  Arena arena;
  Diag d;
} FuzzDiag;

static inline Diag *fuzz_diag(FuzzDiag *f) {
  arena_init(&f->arena);
  diag_init(&f->d, &f->arena);
  f->d.out = fuzz_null();
  return &f->d;
}

static inline void fuzz_diag_free(FuzzDiag *f) { arena_free(&f->arena); }

/* A harness that reads the bytes as a file: READ(d, path, data, size)
 * reads the file at path (holding data), reporting to the quiet Diag d. */
#define FUZZ_FILE_HARNESS(READ)                                         \
  FUZZ_INIT_TENSOR_LIMIT                                                \
  int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {        \
    if (size > FUZZ_MAX_INPUT) return 0;                                \
    FuzzDiag q;                                                         \
    Diag *d = fuzz_diag(&q);                                            \
    char path[64];                                                      \
    int fd = fuzz_file(data, size, path, sizeof path);                  \
    if (fd >= 0) {                                                      \
      READ(d, path, data, size);                                        \
      close(fd);                                                        \
    }                                                                   \
    fuzz_diag_free(&q);                                                 \
    return 0;                                                           \
  }

/* One epoch of ds in batches of size (the last one dropped, and the
 * examples shuffled with seed 1, when asked), each gathered. */
static inline void fuzz_epoch(const Dataset *ds, int64_t size, bool drop_last, bool shuffle) {
  Batcher b;
  data_batcher_init(&b, ds, size, drop_last);
  Rng rng;
  rng_seed(&rng, 1);
  data_epoch(&b, shuffle ? &rng : NULL);
  Batch bt;
  while (data_next(&b, &bt)) data_batch_release(&bt);
  data_batcher_free(&b);
}

/* A script lowered from the fuzzer's bytes, in one arena. */
typedef struct FuzzScript {
  Arena arena;
  Diag diag;
  Lowerer *L;
  Program *prog;
} FuzzScript;

/* Scans, parses and lowers the bytes as the script "fuzz.net"; true when
 * there was no error.  Always release with fuzz_script_free. */
static inline bool fuzz_script(FuzzScript *s, const uint8_t *data, size_t size) {
  arena_init(&s->arena);
  diag_init(&s->diag, &s->arena);
  s->diag.out = fuzz_null();
  s->L = lower_new(&s->arena, &s->diag, NETRUN_STDLIB_DIR, &uop_impl);
  lower_set_max_ops(s->L, FUZZ_MAX_OPS);
  s->prog = lower_program(s->L);
  int file = diag_add_source(&s->diag, "fuzz.net", NULL, (const char *)data, size);
  AstNode *root = ast_parse(&s->arena, &s->diag, file);
  if (root) {
    ast_print(fuzz_null(), root);
    lower_block(s->L, root, file);
    lower_export(s->L);
  }
  return root && s->diag.nerrors == 0;
}

/* Appends the training program when the script has a train block, else
 * the backward of `loss` when it defines one; true when it did. */
static inline bool fuzz_backward(FuzzScript *s) {
  BackwardResult bw;
  if (s->prog->nsettings) {
    TrainConfig c;
    return train_config(s->prog, NULL, &c, true) && train_program(s->prog, &c, &bw);
  }
  return prog_export(s->prog, "loss") && bwd_append(s->prog, "loss", NULL, 0, NULL, 0, &bw);
}

static inline void fuzz_script_free(FuzzScript *s) {
  lower_free(s->L);
  reg_release_user_ops(s->prog);
  arena_free(&s->arena);
}

/* A file holding the bytes, for readers that take a path: an anonymous
 * memory file, named through /proc.  Returns its descriptor (close it), or
 * -1. */
static inline int fuzz_file(const void *data, size_t size, char *path, size_t n) {
  int fd = memfd_create("fuzz", MFD_CLOEXEC);
  if (fd < 0) return -1;
  const char *p = data;
  for (size_t left = size; left;) {
    ssize_t k = write(fd, p, left);
    if (k <= 0) {
      close(fd);
      return -1;
    }
    p += k, left -= (size_t)k;
  }
  snprintf(path, n, "/proc/self/fd/%d", fd);
  return fd;
}

#endif
