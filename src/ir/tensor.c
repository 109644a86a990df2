/* tensor.c — tensor storage, refcounts, broadcasting and the generator. */
#include "ir/tensor.h"

#include "base/diag.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

size_t dtype_size(DType t) {
  switch (t) {
  case DT_F32: return 4;
  case DT_I64: return 8;
  case DT_F64: return 8;
  case DT_BOOL: return 1;
  default: return 1;
  }
}

/* ---- the memory limit ---------------------------------------------------------- */

/* The limit and its count live in mem.c: a tensor charges its elements
 * and its header (a loop over scalars keeps millions of headers on the
 * tape). */
int64_t tensor_memory_limit(void) { return mem_limit(); }
void tensor_set_memory_limit(int64_t bytes) { mem_set_limit(bytes); }
int64_t tensor_memory_used(void) { return mem_used(); }

/* A tensor's header and storage, before its elements. */
#define HEAD_BYTES ((sizeof(Tensor) + sizeof(Storage) + 15) & ~(size_t)15)

/* Why a tensor cannot be made, naming its size, written to why[]; NULL if
 * it can, and then its bytes are charged against the memory limit.  The
 * product of the dims is checked before it can overflow. */
static const char *size_error(DType t, int rank, const int64_t *shape, int64_t *numel,
                              char why[TENSOR_WHY_MAX]) {
  if (rank < 0 || rank > SHAPE_MAX_RANK) return "too many dimensions";
  double exact = (double)dtype_size(t);
  int64_t n = 1;
  bool over = false;
  for (int i = 0; i < rank; i++)
    if (shape[i] < 0) return "a negative dimension";
  for (int i = 0; i < rank; i++)
    if (shape[i] == 0) {   /* no elements, whatever the other dimensions */
      *numel = 0;
      return NULL;
    }
  for (int i = 0; i < rank; i++) {
    exact *= (double)shape[i];
    if (shape[i] && n > TENSOR_MAX_BYTES / shape[i]) over = true;
    else n *= shape[i];
  }
  char a[32], b[32];
  if (over || n > TENSOR_MAX_BYTES / (int64_t)dtype_size(t)) {
    snprintf(why, TENSOR_WHY_MAX, "it would take %s, more than the %s one tensor may take",
             mem_size_str(exact, a, sizeof a), mem_size_str((double)TENSOR_MAX_BYTES, b, sizeof b));
    return why;
  }
  int64_t bytes = n * (int64_t)dtype_size(t);
  if (!mem_charge(bytes + (int64_t)HEAD_BYTES)) return mem_limit_why(exact, why, TENSOR_WHY_MAX);
  *numel = n;
  return NULL;
}

/* ---- the small-tensor pool ---------------------------------------------------------
 * Most tensors of a loop over scalars hold a few elements, and the tape
 * keeps every one of them until the backward: a malloc and a free each
 * were a fifth of an op's cost.  Blocks for tensors of up to POOL_DATA
 * bytes come from chunks of POOL_CHUNK blocks, and freed ones go back to a
 * free list.  Chunks are released at exit.  Under AddressSanitizer, and
 * with NETRUN_NO_POOL set (make valgrind), every tensor is its own
 * allocation again, so the tools see each use and each leak. */
#define POOL_DATA 64
#define LINE_FROM 1024
#define POOL_CHUNK 256
#define POOL_BLOCK (HEAD_BYTES + POOL_DATA)

typedef struct PoolChunk {
  struct PoolChunk *next;
  _Alignas(16) unsigned char blocks[];
} PoolChunk;

static struct {
  void *free;             /* a free block's first word points to the next */
  PoolChunk *chunks;
  int state;              /* 0: not decided yet, 1: on, -1: off */
} pool;

static void pool_release(void) {
  for (PoolChunk *c = pool.chunks, *next; c; c = next) next = c->next, mem_free(c);
  pool.chunks = NULL;
  pool.free = NULL;
}

static bool pool_on(void) {
  if (!pool.state) {
#if defined(__SANITIZE_ADDRESS__)
    pool.state = -1;
    (void)pool_release;
#else
    pool.state = getenv("NETRUN_NO_POOL") ? -1 : 1;
    if (pool.state > 0) atexit(pool_release);
#endif
  }
  return pool.state > 0;
}

static void *pool_get(void) {
  if (!pool.free) {
    PoolChunk *c = mem_alloc(NULL, sizeof *c + POOL_BLOCK * POOL_CHUNK);
    c->next = pool.chunks;
    pool.chunks = c;
    for (int i = POOL_CHUNK - 1; i >= 0; i--) {
      void **b = (void **)(c->blocks + (size_t)i * POOL_BLOCK);
      *b = pool.free;
      pool.free = b;
    }
  }
  void **b = pool.free;
  pool.free = *b;
  return b;
}

static void pool_put(void *block) {
  *(void **)block = pool.free;
  pool.free = block;
}

Tensor *tensor_try_new(DType t, int rank, const int64_t *shape, char why[TENSOR_WHY_MAX]) {
  int64_t n = 0;
  const char *e = size_error(t, rank, shape, &n, why);
  if (e) {
    if (e != why) snprintf(why, TENSOR_WHY_MAX, "%s", e);
    return NULL;
  }
  /* One allocation holds the tensor, its storage and the elements: a new
   * tensor costs one malloc.  The block lives while its storage has users
   * (views made by tensor_view share it). */
  size_t head = HEAD_BYTES;
  size_t bytes = (size_t)n * dtype_size(t);
  bool pooled = bytes <= POOL_DATA && pool_on();
  /* Elements from LINE_FROM bytes start on a cache line, the tensor and its
   * storage up to 56 bytes into the block (malloc's blocks start on 16
   * bytes, or 8 under a sanitizer: a kernel's 64-byte loads and stores
   * straddled two lines). */
  bool line = !pooled && bytes >= LINE_FROM;
  char *block = pooled ? pool_get() : mem_alloc(NULL, head + (bytes ? bytes : 1) + (line ? 56 : 0));
  size_t shift = line ? (size_t)(-(uintptr_t)(block + head) & 63) : 0;
  Tensor *x = (Tensor *)(block + shift);
  Storage *s = (Storage *)(block + shift + sizeof(Tensor));
  x->refs = 1;
  x->dtype = t;
  x->rank = rank;
  if (rank) memcpy(x->shape, shape, sizeof(int64_t) * (size_t)rank);
  x->numel = n;
  x->requires_grad = false;
  x->mark = 0;
  s->refs = 1;
  s->bytes = bytes;
  s->data = block + shift + head;
  s->block = block;
  s->pooled = pooled;
  s->shift = (unsigned char)shift;
  x->storage = s;
  x->data = s->data;
  return x;
}

Tensor *tensor_new(DType t, int rank, const int64_t *shape) {
  char why[TENSOR_WHY_MAX];
  Tensor *x = tensor_try_new(t, rank, shape, why);
  if (!x) {
    diag_error(NULL, SPAN_NONE, "out of memory: a tensor of %s: %s", dtype_name(t), why);
    mem_exit_oom();
  }
  return x;
}

Tensor *tensor_zeros(DType t, int rank, const int64_t *shape) {
  Tensor *x = tensor_new(t, rank, shape);
  memset(x->data, 0, x->storage->bytes);
  return x;
}

/* A rank-0 tensor of dtype t holding the value at v (a C value of t's size). */
static Tensor *scalar_of(DType t, const void *v) {
  Tensor *x = tensor_new(t, 0, NULL);
  memcpy(x->data, v, dtype_size(t));
  return x;
}

Tensor *tensor_scalar_f32(float v) { return scalar_of(DT_F32, &v); }
Tensor *tensor_scalar_f64(double v) { return scalar_of(DT_F64, &v); }
Tensor *tensor_scalar_i64(int64_t v) { return scalar_of(DT_I64, &v); }
Tensor *tensor_scalar_bool(bool v) { return scalar_of(DT_BOOL, &v); }

Tensor *tensor_view(Tensor *x, int rank, const int64_t *shape) {
  mem_charge_or_exit("values", (int64_t)sizeof(Tensor));
  Tensor *v = mem_alloc(NULL, sizeof *v);
  *v = *x;
  v->refs = 1;
  v->mark = 0;
  v->rank = rank;
  if (rank) memcpy(v->shape, shape, sizeof(int64_t) * (size_t)rank);
  x->storage->refs++;
  return v;
}

Tensor *tensor_copy(const Tensor *x) {
  Tensor *c = tensor_new(x->dtype, x->rank, x->shape);
  memcpy(c->data, x->data, (size_t)x->numel * dtype_size(x->dtype));
  return c;
}

Tensor *tensor_cast(Tensor *x, DType t) {
  if (x->dtype == t) return tensor_ref(x);
  Tensor *c = tensor_new(t, x->rank, x->shape);
  int64_t n = x->numel;
  if (t == DT_F64 || x->dtype == DT_F64) {
    /* Through a double, which holds every f32, i64 up to 2^53 and bool. */
    if (t == DT_F64 && x->dtype == DT_F32)
      for (int64_t i = 0; i < n; i++) tensor_f64(c)[i] = tensor_f32(x)[i];
    else if (t == DT_F32 && x->dtype == DT_F64)
      for (int64_t i = 0; i < n; i++) tensor_f32(c)[i] = (float)tensor_f64(x)[i];
    else
      for (int64_t i = 0; i < n; i++) tensor_set(c, i, tensor_get(x, i));
  } else if (t == DT_F32) {
    float *o = tensor_f32(c);
    if (x->dtype == DT_I64) for (int64_t i = 0; i < n; i++) o[i] = (float)tensor_i64(x)[i];
    else for (int64_t i = 0; i < n; i++) o[i] = (float)tensor_bool(x)[i];
  } else if (t == DT_I64) {
    int64_t *o = tensor_i64(c);
    if (x->dtype == DT_F32) for (int64_t i = 0; i < n; i++) o[i] = tensor_to_i64(tensor_f32(x)[i]);
    else for (int64_t i = 0; i < n; i++) o[i] = tensor_bool(x)[i];
  } else {
    uint8_t *o = tensor_bool(c);
    if (x->dtype == DT_F32) for (int64_t i = 0; i < n; i++) o[i] = tensor_f32(x)[i] != 0;
    else for (int64_t i = 0; i < n; i++) o[i] = tensor_i64(x)[i] != 0;
  }
  return c;
}

void tensor_unref(Tensor *t) {
  if (!t || --t->refs > 0) return;
  Storage *s = t->storage;
  bool owns_block = (char *)s->block + s->shift == (char *)t;
  if (--s->refs == 0) {
    mem_uncharge((int64_t)(s->bytes + HEAD_BYTES));
    if (s->pooled) pool_put(s->block);
    else mem_free(s->block);
  }
  if (!owns_block) {               /* a view: its own small allocation */
    mem_uncharge((int64_t)sizeof *t);
    mem_free(t);
  }
}

double tensor_get(const Tensor *t, int64_t i) {
  switch (t->dtype) {
  case DT_F32: return tensor_f32(t)[i];
  case DT_F64: return tensor_f64(t)[i];
  case DT_I64: return (double)tensor_i64(t)[i];
  default: return tensor_bool(t)[i];
  }
}

void tensor_set(Tensor *t, int64_t i, double v) {
  switch (t->dtype) {
  case DT_F32: tensor_f32(t)[i] = (float)v; break;
  case DT_F64: tensor_f64(t)[i] = v; break;
  case DT_I64: tensor_i64(t)[i] = tensor_to_i64(v); break;
  default: tensor_bool(t)[i] = v != 0; break;
  }
}

bool tensor_same_shape(const Tensor *a, const Tensor *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

bool tensor_non_finite(const Tensor *t) {
  if (t->dtype == DT_F64) {
    for (int64_t i = 0; i < t->numel; i++)
      if (!isfinite(tensor_f64(t)[i])) return true;
    return false;
  }
  if (t->dtype != DT_F32) return false;
  const float *x = tensor_f32(t);
  for (int64_t i = 0; i < t->numel; i++)
    if (!isfinite(x[i])) return true;
  return false;
}

const char *tensor_shape_str(const Tensor *t, char *buf, size_t n) {
  Shape s = tensor_shape(t);
  return shape_str(&s, buf, n);
}

Shape tensor_shape(const Tensor *t) { return shape_of(t->rank, t->shape); }

/* ---- broadcasting ---------------------------------------------------------- */

bool bcast_shape(const Tensor *a, const Tensor *c, int *rank, int64_t *shape) {
  int r = a->rank > c->rank ? a->rank : c->rank;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->rank), ic = i - (r - c->rank);
    int64_t x = ia >= 0 ? a->shape[ia] : 1, y = ic >= 0 ? c->shape[ic] : 1;
    if (x != y && x != 1 && y != 1) return false;
    shape[i] = x == 1 ? y : x;
  }
  *rank = r;
  return true;
}

bool bcast_init(Bcast *b, const Tensor *a, const Tensor *c) {
  memset(b, 0, sizeof *b);
  int64_t shape[SHAPE_MAX_RANK];
  int r;
  if (!bcast_shape(a, c, &r, shape)) return false;
  const Tensor *in[2] = {a, c};
  /* Same shapes: one flat run. */
  if (tensor_same_shape(a, c)) {
    int64_t n = a->numel;
    b->rank = 1;
    b->shape[0] = n;
    b->stride[0][0] = b->stride[1][0] = 1;
    b->inner = n;
    b->inner_step[0] = b->inner_step[1] = 1;
    return true;
  }
  b->rank = r;
  memcpy(b->shape, shape, sizeof(int64_t) * (size_t)r);
  for (int k = 0; k < 2; k++) {
    int64_t st = 1;
    for (int i = r - 1; i >= 0; i--) {
      int ii = i - (r - in[k]->rank);
      int64_t d = ii >= 0 ? in[k]->shape[ii] : 1;
      b->stride[k][i] = d == 1 ? 0 : st;
      st *= d;
    }
  }
  if (r == 0) {
    b->inner = 1;
    return true;
  }
  b->inner = shape[r - 1];
  b->inner_step[0] = b->stride[0][r - 1];
  b->inner_step[1] = b->stride[1][r - 1];
  return true;
}

void bcast_iter_init(BcastIter *it, const Bcast *b) {
  memset(it, 0, sizeof *it);
  it->b = b;
}

void bcast_iter_seek(BcastIter *it, const Bcast *b, int64_t row) {
  bcast_iter_init(it, b);
  it->out = row * b->inner;
  for (int i = b->rank - 2; i >= 0 && row > 0; i--) {
    it->idx[i] = row % b->shape[i];
    row /= b->shape[i];
    it->off[0] += it->idx[i] * b->stride[0][i];
    it->off[1] += it->idx[i] * b->stride[1][i];
  }
}

bool bcast_iter_next(BcastIter *it) {
  const Bcast *b = it->b;
  it->out += b->inner;
  for (int i = b->rank - 2; i >= 0; i--) {
    it->idx[i]++;
    it->off[0] += b->stride[0][i];
    it->off[1] += b->stride[1][i];
    if (it->idx[i] < b->shape[i]) return true;
    it->off[0] -= b->stride[0][i] * b->shape[i];
    it->off[1] -= b->stride[1][i] * b->shape[i];
    it->idx[i] = 0;
  }
  return false;
}

/* ---- the generator ---------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void rng_seed(Rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rng_next(Rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double rng_uniform(Rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

double rng_normal(Rng *r) {
  double u1 = rng_uniform(r), u2 = rng_uniform(r);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
