/* tensor.h — values: dense tensors of f32, f64, i64 and bool, any rank.
 *
 * f32 and f64 are the float dtypes (dtype_is_float); f64 elements are doubles.
 *
 * Ownership (the one rule for values, everywhere in netrun):
 *   - A Tensor is refcounted.  tensor_new* returns a tensor holding one
 *     reference, owned by the caller.  tensor_ref() adds a reference,
 *     tensor_unref() drops one; the last drop frees the tensor.
 *   - A tensor's elements live in a Storage, refcounted too, so views that
 *     keep the element order (reshape, squeeze, flatten) share it; the
 *     storage is freed when its last tensor goes.
 *   - A function that stores a tensor it was given (a scope slot, the tape)
 *     takes its own reference; a function that returns a tensor hands its
 *     reference to the caller.  Nobody frees a tensor they did not ref.
 *   - Elements are contiguous, row-major.  bool is one byte per element.
 */
#ifndef NETRUN_TENSOR_H
#define NETRUN_TENSOR_H

#include "ir/program.h"

typedef struct Storage {
  int refs;
  size_t bytes;
  void *data;
  void *block;                /* the allocation holding this storage (and its data) */
  bool pooled;                /* block came from the small-tensor pool (tensor.c) */
  unsigned char shift;        /* the tensor's place in block: its data on a cache line (tensor.c) */
} Storage;

typedef struct Tensor {
  int refs;
  DType dtype;
  int rank;
  int64_t shape[SHAPE_MAX_RANK];
  int64_t numel;
  Storage *storage;
  void *data;                 /* == storage->data */
  bool requires_grad;         /* a parameter, or computed from one */
  int mark;                   /* scratch of one pass over tensors (the tape's
                               * backward numbers its values): 0 outside it */
} Tensor;

/* Largest tensor netrun will allocate, in bytes (a guard against
 * zeros([100000, 100000, 100])). */
#define TENSOR_MAX_BYTES ((int64_t)16 << 30)

/* The memory limit (mem.h): what all live tensors (elements and headers),
 * datasets, the tape and netrun's records may take together (--max-memory;
 * by default the machine's physical memory).  tensor_try_new refuses a
 * tensor that would pass it, before allocating. */
int64_t tensor_memory_limit(void);
void tensor_set_memory_limit(int64_t bytes);
int64_t tensor_memory_used(void);

size_t dtype_size(DType t);

/* A new tensor with uninitialized elements.  Returns NULL (without
 * allocating) if the shape is invalid, larger than TENSOR_MAX_BYTES or
 * than the memory limit leaves; why[] (the caller's) then says so, naming
 * the size ("it would take 4 TB, more than the 17.2 GB one tensor may
 * take"), for the caller to report (diag.h). */
#define TENSOR_WHY_MAX 256
Tensor *tensor_try_new(DType t, int rank, const int64_t *shape, char why[TENSOR_WHY_MAX]);
/* Like tensor_try_new, for shapes already known to be valid; past the
 * memory limit it exits as out of memory (mem_exit_oom). */
Tensor *tensor_new(DType t, int rank, const int64_t *shape);
Tensor *tensor_zeros(DType t, int rank, const int64_t *shape);
Tensor *tensor_scalar_f32(float v);
Tensor *tensor_scalar_f64(double v);
Tensor *tensor_scalar_i64(int64_t v);
Tensor *tensor_scalar_bool(bool v);
/* A new tensor sharing x's storage with another shape of equal numel. */
Tensor *tensor_view(Tensor *x, int rank, const int64_t *shape);
/* A deep copy. */
Tensor *tensor_copy(const Tensor *x);
/* x converted to dtype t (a new tensor; a reference to x if t == x->dtype). */
Tensor *tensor_cast(Tensor *x, DType t);

static inline Tensor *tensor_ref(Tensor *t) {
  if (t) t->refs++;
  return t;
}
void tensor_unref(Tensor *t);

static inline float *tensor_f32(const Tensor *t) { return (float *)t->data; }
static inline double *tensor_f64(const Tensor *t) { return (double *)t->data; }
static inline int64_t *tensor_i64(const Tensor *t) { return (int64_t *)t->data; }
static inline uint8_t *tensor_bool(const Tensor *t) { return (uint8_t *)t->data; }
/* A double as an i64: truncated toward zero, saturating at the i64 range,
 * NaN giving 0 (C leaves all three undefined). */
static inline int64_t tensor_to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

/* The sum of n floats in double precision, in four interleaved lanes
 * added at the end: a fixed order (the same bits every run) that keeps
 * four additions in flight instead of waiting on one chain. */
static inline double f32_sum(const float *x, int64_t n) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    a0 += (double)x[k];
    a1 += (double)x[k + 1];
    a2 += (double)x[k + 2];
    a3 += (double)x[k + 3];
  }
  for (; k < n; k++) a0 += (double)x[k];
  return (a0 + a1) + (a2 + a3);
}

/* Element i as a double, whatever the dtype. */
double tensor_get(const Tensor *t, int64_t i);
void tensor_set(Tensor *t, int64_t i, double v);

bool tensor_same_shape(const Tensor *a, const Tensor *b);
/* Whether float tensor t (f32 or f64) holds a NaN or an infinity; false
 * for the other dtypes. */
bool tensor_non_finite(const Tensor *t);
/* "[2, 3]" */
const char *tensor_shape_str(const Tensor *t, char *buf, size_t n);
/* The tensor's shape as a Shape (all dims known). */
Shape tensor_shape(const Tensor *t);

/* ---- broadcasting ------------------------------------------------------------
 * A Bcast describes how an output of rank r reads one input: per output dim,
 * the input's stride (0 where the input is broadcast).  Kernels iterate
 * the output in row-major order and advance input offsets with these
 * strides, so broadcasting never copies. */
typedef struct Bcast {
  int rank;
  int64_t shape[SHAPE_MAX_RANK];        /* the output's */
  int64_t stride[2][SHAPE_MAX_RANK];    /* per input, 0 where broadcast */
  /* The innermost run: the last `inner` elements of a row advance input k by
   * inner_step[k] (0 or 1), so kernels can run a tight loop over them. */
  int64_t inner;
  int64_t inner_step[2];
} Bcast;

/* Fills b for inputs a and c broadcast to out's shape.  False if they do
 * not broadcast. */
bool bcast_init(Bcast *b, const Tensor *a, const Tensor *c);
/* Computes the broadcast shape of a and c; false if they do not broadcast. */
bool bcast_shape(const Tensor *a, const Tensor *c, int *rank, int64_t *shape);

/* Iterates rows of a broadcast: for each row, offsets of input 0 and 1.
 * Usage:
 *   BcastIter it; bcast_iter_init(&it, &b);
 *   do { ... it.off[0], it.off[1], b.inner ... } while (bcast_iter_next(&it));
 */
typedef struct BcastIter {
  const Bcast *b;
  int64_t idx[SHAPE_MAX_RANK];
  int64_t off[2];
  int64_t out;                          /* offset of the row in the output */
} BcastIter;
void bcast_iter_init(BcastIter *it, const Bcast *b);
/* Starts at row `row` (rows counted in the order bcast_iter_next takes). */
void bcast_iter_seek(BcastIter *it, const Bcast *b, int64_t row);
bool bcast_iter_next(BcastIter *it);

/* ---- the seeded generator ---------------------------------------------------
 * One generator for every random op and initializer: the same seed gives the
 * same numbers on every run (xoshiro256**, seeded through splitmix64). */
typedef struct Rng {
  uint64_t s[4];
} Rng;
void rng_seed(Rng *r, uint64_t seed);
uint64_t rng_next(Rng *r);
double rng_uniform(Rng *r);          /* [0, 1) */
double rng_normal(Rng *r);           /* N(0, 1), Box-Muller */

#endif
