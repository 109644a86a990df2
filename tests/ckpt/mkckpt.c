/* mkckpt.c — a test helper for tests/checkpoint.bats: writes checkpoints
 * with known contents through the checkpoint API (there is no trainer to
 * make them yet), checks the API reads them back exactly, and damages them
 * in memory by the thousand to show the reader never crashes.
 *
 * Built by the bats setup:  cc -Isrc tests/ckpt/mkckpt.c src/io/checkpoint.c src/cli/option.c
 *   src/base/diag.c src/base/mem.c src/ir/tensor.c src/ir/program.c -lz -lm
 *
 *   mkckpt write PATH            the known checkpoint (see known())
 *   mkckpt verify PATH           read PATH; it must equal known()
 *   mkckpt tiny PATH             a small one whose layout the tests poke into
 *   mkckpt big PATH MIB [EPOCH]  one f32 tensor of MIB MiB
 *   mkckpt loop PATH MIB         write big checkpoints, epochs 1, 2, ... forever
 *   mkckpt fixcrc PATH           set the total length and CRC after a poke
 *   mkckpt damage PATH           flip every byte and cut at every length
 *   mkckpt fuzz PATH N SEED      N random mutations, parsed in memory
 *   mkckpt mutate IN OUT SEED    one random mutation, written to OUT
 *   mkckpt api                   set/get/find/replace and refused writes
 *   mkckpt hash TEXT             ckpt_hash of TEXT, in hex
 *   mkckpt set PATH FIELD VALUE  rewrite one field of a valid checkpoint (a
 *                                valid CRC): epoch, step, samples, rng0..rng3
 *                                (decimal u64) or a setting (text)
 *   mkckpt retype PATH NAME DTYPE  tensor NAME as zeros of DTYPE, same shape
 */
#include "io/checkpoint.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static int die(const char *msg) {
  fprintf(stderr, "mkckpt: %s\n", msg);
  return 1;
}

static Tensor *f32(int rank, const int64_t *shape, const float *v) {
  Tensor *t = tensor_new(DT_F32, rank, shape);
  if (t->numel) memcpy(t->data, v, sizeof *v * (size_t)t->numel);
  return t;
}

/* Stores t in c and drops the caller's reference. */
static void add(Checkpoint *c, const char *name, Tensor *t) {
  ckpt_add_tensor(c, name, t);
  tensor_unref(t);
}

static const char PROGRAM[] = "x = input([4, 3])\nW1 = param([3, 4])\n";

/* The checkpoint the round-trip tests know by heart. */
static void known(Checkpoint *c) {
  ckpt_init(c);
  c->program_hash = ckpt_hash(PROGRAM, strlen(PROGRAM));
  c->epoch = 3;
  c->step = 1407;
  c->samples = 180000;
  rng_seed(&c->rng, 42);
  ckpt_set(c, "optimizer", "momentum");
  ckpt_set(c, "lr", "0.1");
  ckpt_set(c, "momentum", "0.9");
  ckpt_set(c, "batch", "128");
  ckpt_setf(c, "epochs", "%d", 5);
  ckpt_set(c, "seed", "0");
  ckpt_set(c, "note", "");
  ckpt_set(c, "comment", "résumé = run 7, \"quoted\"");

  float w[12], m[12];
  for (int i = 0; i < 12; i++) w[i] = (float)(i - 5) * 0.25f, m[i] = (float)i * 0.01f;
  add(c, "W1", f32(2, (int64_t[]){3, 4}, w));
  add(c, "b1", tensor_zeros(DT_F32, 1, (int64_t[]){4}));
  add(c, "W1@momentum", f32(2, (int64_t[]){3, 4}, m));
  add(c, "@beta1_pow", tensor_scalar_f32(0.729f));
  Tensor *labels = tensor_new(DT_I64, 1, (int64_t[]){5});
  int64_t lv[] = {-3, 0, 7, (int64_t)1 << 40, 2};
  memcpy(labels->data, lv, sizeof lv);
  add(c, "labels", labels);
  add(c, "@count", tensor_scalar_i64(-12));
  Tensor *mask = tensor_new(DT_BOOL, 2, (int64_t[]){2, 3});
  uint8_t mv[] = {1, 0, 1, 1, 0, 1};
  memcpy(mask->data, mv, sizeof mv);
  add(c, "mask", mask);
  add(c, "empty", tensor_new(DT_F32, 2, (int64_t[]){0, 3}));
  add(c, "odd", f32(1, (int64_t[]){4}, (float[]){1.0f, NAN, -INFINITY, 3.0f}));
  add(c, "deep", f32(8, (int64_t[]){1, 2, 1, 1, 1, 1, 1, 2}, (float[]){1, 2, 3, 4}));
  add(c, "name with spaces/and \xc3\xa9", tensor_scalar_bool(true));
}

static bool same_tensor(const Tensor *a, const Tensor *b) {
  return a->dtype == b->dtype && a->rank == b->rank && tensor_same_shape(a, b) && a->numel == b->numel &&
         memcmp(a->data, b->data, (size_t)a->numel * dtype_size(a->dtype)) == 0;
}

/* Everything in a equals b, in the same order, bit for bit. */
static const char *same(const Checkpoint *a, const Checkpoint *b) {
  if (a->program_hash != b->program_hash) return "program hash";
  if (a->epoch != b->epoch || a->step != b->step || a->samples != b->samples) return "epoch, step or samples";
  if (memcmp(&a->rng, &b->rng, sizeof a->rng) != 0) return "rng state";
  if (a->nsettings != b->nsettings) return "number of settings";
  for (int i = 0; i < a->nsettings; i++)
    if (strcmp(a->settings[i].key, b->settings[i].key) || strcmp(a->settings[i].value, b->settings[i].value))
      return "a setting";
  if (a->ntensors != b->ntensors) return "number of tensors";
  for (int i = 0; i < a->ntensors; i++)
    if (strcmp(a->tensors[i].name, b->tensors[i].name) || !same_tensor(a->tensors[i].t, b->tensors[i].t))
      return "a tensor";
  return NULL;
}

static bool write_or_say(const char *path, const Checkpoint *c) {
  char err[1024];
  if (ckpt_write(path, c, err, sizeof err)) return true;
  fprintf(stderr, "mkckpt: %s\n", err);
  return false;
}

static int cmd_verify(const char *path) {
  Checkpoint want, got;
  char err[1024];
  known(&want);
  if (!ckpt_read(path, &got, err, sizeof err)) {
    ckpt_free(&want);
    return die(err);
  }
  const char *diff = same(&want, &got);
  /* The lookups the trainer will use. */
  if (!diff && (ckpt_find(&got, "W1@momentum") != got.tensors[2].t || ckpt_find(&got, "W2")))
    diff = "ckpt_find";
  if (!diff && (strcmp(ckpt_get(&got, "lr"), "0.1") || strcmp(ckpt_get(&got, "note"), "") || ckpt_get(&got, "x")))
    diff = "ckpt_get";
  if (!diff && got.version != CKPT_VERSION) diff = "version";
  ckpt_free(&want);
  ckpt_free(&got);
  if (diff) {
    fprintf(stderr, "mkckpt: %s: %s differs\n", path, diff);
    return 1;
  }
  printf("same\n");
  return 0;
}

/* Layout (offsets in tests/checkpoint.bats): settings lr=0.1; tensors
 * W f32 [2, 3] = 0..5, m bool [2] = 1, 0. */
static int cmd_tiny(const char *path) {
  Checkpoint c;
  ckpt_init(&c);
  c.program_hash = 0x0123456789abcdefu;
  c.epoch = 1;
  c.step = 2;
  c.samples = 3;
  ckpt_set(&c, "lr", "0.1");
  add(&c, "W", f32(2, (int64_t[]){2, 3}, (float[]){0, 1, 2, 3, 4, 5}));
  Tensor *m = tensor_new(DT_BOOL, 1, (int64_t[]){2});
  tensor_bool(m)[0] = 1;
  tensor_bool(m)[1] = 0;
  add(&c, "m", m);
  bool ok = write_or_say(path, &c);
  ckpt_free(&c);
  return ok ? 0 : 1;
}

static Tensor *big_tensor(double mib) {
  int64_t n = (int64_t)(mib * (1 << 20) / 4);
  Tensor *t = tensor_new(DT_F32, 1, &n);
  for (int64_t i = 0; i < n; i++) tensor_f32(t)[i] = (float)(i % 1000) * 0.001f;
  return t;
}

static int cmd_big(const char *path, double mib, uint64_t epoch, bool loop) {
  Checkpoint c;
  ckpt_init(&c);
  ckpt_set(&c, "optimizer", "sgd");
  Tensor *t = big_tensor(mib);
  add(&c, "big", t);
  bool ok = true;
  do {
    c.epoch = epoch;
    tensor_f32(t)[0] = (float)epoch;
    ok = write_or_say(path, &c);
    epoch++;
  } while (loop && ok);
  ckpt_free(&c);
  return ok ? 0 : 1;
}

/* ---- files in memory --------------------------------------------------------- */

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0;
  unsigned char *b = mem_alloc(NULL, cap);
  size_t k;
  while ((k = fread(b + len, 1, cap - len, f)) > 0)
    if ((len += k) == cap) b = mem_alloc(b, cap *= 2);
  fclose(f);
  *n = len;
  return b;
}

static bool spit(const char *path, const unsigned char *b, size_t n) {
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(b, 1, n, f) == n;
  if (f) ok &= fclose(f) == 0;
  return ok;
}

static void le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Makes the n bytes at b self-consistent again: the total length in the
 * preamble and the trailer, the trailer's tag and its CRC. */
static void fix(unsigned char *b, size_t n) {
  if (n < 36) return;
  le(b + 12, n, 8);
  memcpy(b + n - 16, "TAIL", 4);
  le(b + n - 12, n, 8);
  le(b + n - 4, crc32(crc32(0, Z_NULL, 0), b, (uInt)(n - 4)), 4);
}

/* The kind of an error message: its words before the first '(' or ':'. */
static void kind(const char *err, char *out, size_t n) {
  size_t k = strcspn(err, "(:");
  while (k && err[k - 1] == ' ') k--;
  snprintf(out, n, "%.*s", (int)k, err);
}

typedef struct Tally {
  char kinds[32][96];
  int counts[32], n;
} Tally;

static void count(Tally *t, const char *k) {
  for (int i = 0; i < t->n; i++)
    if (strcmp(t->kinds[i], k) == 0) {
      t->counts[i]++;
      return;
    }
  if (t->n == 32) return;
  snprintf(t->kinds[t->n], sizeof t->kinds[0], "%s", k);
  t->counts[t->n++] = 1;
}

static void show(const char *what, const Tally *t) {
  printf("%s:", what);
  for (int i = 0; i < t->n; i++) printf("%s %d %s", i ? "," : "", t->counts[i], t->kinds[i]);
  printf("\n");
}

/* Parses the n bytes at b and counts the outcome. */
static void try_parse(Tally *t, const unsigned char *b, size_t n) {
  Checkpoint c;
  char err[1024], k[96];
  if (ckpt_parse(b, n, &c, err, sizeof err)) {
    count(t, "read");
    ckpt_free(&c);
  } else {
    kind(err, k, sizeof k);
    count(t, k);
  }
}

static int cmd_damage(const char *path) {
  size_t n;
  unsigned char *b = slurp(path, &n);
  if (!b) return die("cannot read the file");
  unsigned char *copy = mem_alloc(NULL, n);
  Tally flip = {0}, cut = {0};
  for (size_t i = 0; i < n; i++) {
    memcpy(copy, b, n);
    copy[i] ^= 0xff;
    try_parse(&flip, copy, n);
  }
  for (size_t len = 0; len < n; len++) try_parse(&cut, b, len);
  show("flip", &flip);
  show("cut", &cut);
  mem_free(copy);
  mem_free(b);
  return 0;
}

/* One random mutation of the n bytes at b (capacity cap); the new length. */
static size_t mutate(Rng *r, unsigned char *b, size_t n, size_t cap) {
  static const uint64_t interesting[] = {0, 1, 2, 8, 9, 255, 256, 0x7fffffff, 0xffffffff, 0x100000000,
                                         INT64_MAX, UINT64_MAX};
  int times = 1 + (int)(rng_next(r) % 4);
  for (int k = 0; k < times && n; k++) {
    size_t at = (size_t)(rng_next(r) % n);
    switch (rng_next(r) % 6) {
    case 0: b[at] ^= (unsigned char)(1u << (rng_next(r) % 8)); break;
    case 1: b[at] = (unsigned char)rng_next(r); break;
    case 2: {                                   /* an interesting integer */
      int w = (int)(rng_next(r) % 3);
      int bytes = w == 0 ? 1 : w == 1 ? 4 : 8;
      if (at + (size_t)bytes <= n)
        le(b + at, interesting[rng_next(r) % (sizeof interesting / sizeof *interesting)], bytes);
      break;
    }
    case 3: n = at; break;                      /* cut */
    case 4: {                                   /* insert bytes */
      size_t add_n = 1 + (size_t)(rng_next(r) % 16);
      if (n + add_n <= cap) {
        memmove(b + at + add_n, b + at, n - at);
        for (size_t i = 0; i < add_n; i++) b[at + i] = (unsigned char)rng_next(r);
        n += add_n;
      }
      break;
    }
    default: {                                  /* delete bytes */
      size_t del = 1 + (size_t)(rng_next(r) % 16);
      if (at + del <= n) memmove(b + at, b + at + del, n - at - del), n -= del;
      break;
    }
    }
  }
  /* Usually repair the lengths and the CRC, so the sections get parsed. */
  if (rng_next(r) % 8) fix(b, n);
  return n;
}

static int cmd_fuzz(const char *path, long iters, uint64_t seed) {
  size_t n;
  unsigned char *b = slurp(path, &n);
  if (!b) return die("cannot read the file");
  size_t cap = n + 64 * 4;
  unsigned char *copy = mem_alloc(NULL, cap);
  Rng r;
  rng_seed(&r, seed);
  Tally t = {0};
  for (long i = 0; i < iters; i++) {
    memcpy(copy, b, n);
    size_t m = mutate(&r, copy, n, cap);
    try_parse(&t, copy, m);
  }
  show("fuzz", &t);
  mem_free(copy);
  mem_free(b);
  return 0;
}

static int cmd_mutate(const char *in, const char *out, uint64_t seed) {
  size_t n;
  unsigned char *b = slurp(in, &n);
  if (!b) return die("cannot read the file");
  size_t cap = n + 64;
  b = mem_alloc(b, cap);
  Rng r;
  rng_seed(&r, seed);
  size_t m = mutate(&r, b, n, cap);
  bool ok = spit(out, b, m);
  mem_free(b);
  return ok ? 0 : die("cannot write the file");
}

static int cmd_fixcrc(const char *path) {
  size_t n;
  unsigned char *b = slurp(path, &n);
  if (!b) return die("cannot read the file");
  fix(b, n);
  bool ok = spit(path, b, n);
  mem_free(b);
  return ok ? 0 : die("cannot write the file");
}

/* ---- the API beyond reading and writing ---------------------------------------- */

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "mkckpt: api: line %d: %s\n", __LINE__, #cond);      \
      return 1;                                                            \
    }                                                                      \
  } while (0)

static bool refused(Checkpoint *c, const char *path, const char *want) {
  char err[1024];
  if (ckpt_write(path, c, err, sizeof err)) return false;
  printf("%s\n", err);
  return strstr(err, want) != NULL;
}

static int cmd_api(const char *dir) {
  Checkpoint c;
  ckpt_init(&c);
  ckpt_set(&c, "lr", "0.1");
  ckpt_set(&c, "batch", "64");
  ckpt_set(&c, "lr", "0.05");                 /* replaces, keeping its place */
  CHECK(c.nsettings == 2 && strcmp(c.settings[0].key, "lr") == 0);
  CHECK(strcmp(ckpt_get(&c, "lr"), "0.05") == 0 && !ckpt_get(&c, "momentum"));

  Tensor *a = tensor_scalar_f32(1), *b = tensor_scalar_f32(2);
  ckpt_add_tensor(&c, "W", a);
  CHECK(a->refs == 2);                        /* the checkpoint took its own */
  ckpt_add_tensor(&c, "W", b);                /* replaces */
  CHECK(a->refs == 1 && b->refs == 2 && c.ntensors == 1 && ckpt_find(&c, "W") == b);
  CHECK(!ckpt_find(&c, "V"));

  char path[4096];
  snprintf(path, sizeof path, "%s/api.ckpt", dir);
  ckpt_set(&c, "bad key", "1");
  CHECK(refused(&c, path, "setting key 'bad key' has a character other than"));
  ckpt_free(&c);
  ckpt_set(&c, "k", "line\nbreak");
  CHECK(refused(&c, path, "the value of setting 'k' has a control character"));
  ckpt_free(&c);
  ckpt_add_tensor(&c, "", a);
  CHECK(refused(&c, path, "tensor name '' is empty"));
  ckpt_free(&c);
  char longname[300];
  memset(longname, 'x', 299);
  longname[299] = 0;
  ckpt_add_tensor(&c, longname, a);
  CHECK(refused(&c, path, "is too long"));
  ckpt_free(&c);
  CHECK(a->refs == 1 && b->refs == 1);        /* ckpt_free dropped its references */
  CHECK(c.ntensors == 0 && c.nsettings == 0 && c.tensors == NULL);
  FILE *f = fopen(path, "r");
  CHECK(f == NULL);                           /* nothing was written */

  ckpt_add_tensor(&c, "W", a);
  snprintf(path, sizeof path, "%s/no/such/folder/api.ckpt", dir);
  CHECK(refused(&c, path, "cannot create a temporary file in"));
  snprintf(path, sizeof path, "%s", dir);     /* a folder: the rename fails */
  CHECK(refused(&c, path, ": cannot write: Is a directory"));
  ckpt_free(&c);
  tensor_unref(a);
  tensor_unref(b);
  printf("api ok\n");
  return 0;
}

/* A crafted checkpoint: one field rewritten, the rest as it was. */
static int cmd_set(const char *path, const char *field, const char *value) {
  Checkpoint c;
  char err[1024];
  if (!ckpt_read(path, &c, err, sizeof err)) return die(err);
  uint64_t n = strtoull(value, NULL, 10);
  if (strcmp(field, "epoch") == 0) c.epoch = n;
  else if (strcmp(field, "step") == 0) c.step = n;
  else if (strcmp(field, "samples") == 0) c.samples = n;
  else if (strncmp(field, "rng", 3) == 0 && field[3] >= '0' && field[3] <= '3' && !field[4]) c.rng.s[field[3] - '0'] = n;
  else ckpt_set(&c, field, value);
  bool ok = write_or_say(path, &c);
  ckpt_free(&c);
  return ok ? 0 : 1;
}

/* A checkpoint whose tensor `name` has another dtype. */
static int cmd_retype(const char *path, const char *name, const char *dtype) {
  Checkpoint c;
  char err[1024];
  if (!ckpt_read(path, &c, err, sizeof err)) return die(err);
  Tensor *t = ckpt_find(&c, name);
  DType dt = strcmp(dtype, "i64") == 0 ? DT_I64 : strcmp(dtype, "bool") == 0 ? DT_BOOL : DT_F32;
  if (t) add(&c, name, tensor_zeros(dt, t->rank, t->shape));
  bool ok = t && write_or_say(path, &c);
  ckpt_free(&c);
  return ok ? 0 : die("no such tensor");
}

int main(int argc, char **argv) {
  const char *cmd = argc > 1 ? argv[1] : "";
  Checkpoint c;
  if (strcmp(cmd, "write") == 0 && argc == 3) {
    known(&c);
    bool ok = write_or_say(argv[2], &c);
    ckpt_free(&c);
    return ok ? 0 : 1;
  }
  if (strcmp(cmd, "verify") == 0 && argc == 3) return cmd_verify(argv[2]);
  if (strcmp(cmd, "tiny") == 0 && argc == 3) return cmd_tiny(argv[2]);
  if (strcmp(cmd, "big") == 0 && (argc == 4 || argc == 5))
    return cmd_big(argv[2], atof(argv[3]), argc == 5 ? strtoull(argv[4], NULL, 10) : 0, false);
  if (strcmp(cmd, "loop") == 0 && argc == 4) return cmd_big(argv[2], atof(argv[3]), 1, true);
  if (strcmp(cmd, "fixcrc") == 0 && argc == 3) return cmd_fixcrc(argv[2]);
  if (strcmp(cmd, "damage") == 0 && argc == 3) return cmd_damage(argv[2]);
  if (strcmp(cmd, "fuzz") == 0 && argc == 5) return cmd_fuzz(argv[2], atol(argv[3]), strtoull(argv[4], NULL, 10));
  if (strcmp(cmd, "mutate") == 0 && argc == 5) return cmd_mutate(argv[2], argv[3], strtoull(argv[4], NULL, 10));
  if (strcmp(cmd, "api") == 0 && argc == 3) return cmd_api(argv[2]);
  if (strcmp(cmd, "set") == 0 && argc == 5) return cmd_set(argv[2], argv[3], argv[4]);
  if (strcmp(cmd, "retype") == 0 && argc == 5) return cmd_retype(argv[2], argv[3], argv[4]);
  if (strcmp(cmd, "hash") == 0 && argc == 3) {
    printf("%016" PRIx64 "\n", ckpt_hash(argv[2], strlen(argv[2])));
    return 0;
  }
  return die("usage: see the comment at the top of tests/ckpt/mkckpt.c");
}
