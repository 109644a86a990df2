/* bcast_loop.h — the broadcast loop the binary elementwise and comparison
 * kernels are generated from, and their element types. */
#ifndef NETRUN_OPS_BCAST_LOOP_H
#define NETRUN_OPS_BCAST_LOOP_H

#include "exec/exec.h"
#include "exec/par.h"
#include "ir/tensor.h"

typedef float f32;
typedef double f64;
typedef int64_t i64;
typedef uint8_t bln;

/* One broadcast binary loop: output type OT, operand types XT and YT, both
 * read as CT into `a` and `b`, the result EXPR, over rows [row0, row0 +
 * nrows) of the broadcast.  Each row is a tight loop; which operands
 * advance along it is decided per row. */
typedef void (*BinaryLoop)(const Bcast *bc, void *out, const void *x, const void *y, int64_t row0,
                           int64_t nrows);

#define BINARY_LOOP(FN, OT, XT, YT, CT, EXPR)                                   \
  static void FN(const Bcast *bc, void *out, const void *xv, const void *yv,    \
                 int64_t row0, int64_t nrows) {                                 \
    const XT *x = xv;                                                           \
    const YT *y = yv;                                                           \
    int64_t n = bc->inner;                                                      \
    bool sx = bc->inner_step[0] != 0, sy = bc->inner_step[1] != 0;              \
    BcastIter it;                                                               \
    bcast_iter_seek(&it, bc, row0);                                             \
    for (int64_t r = 0; r < nrows; r++) {                                       \
      if (r > 0) bcast_iter_next(&it);                                          \
      OT *restrict o = (OT *)out + it.out;                                      \
      const XT *px = x + it.off[0];                                             \
      const YT *py = y + it.off[1];                                             \
      if (sx && sy) {                                                           \
        for (int64_t i = 0; i < n; i++) {                                       \
          CT a = (CT)px[i], b = (CT)py[i];                                      \
          o[i] = (OT)(EXPR);                                                    \
        }                                                                       \
      } else if (sx) {                                                          \
        CT b = (CT)py[0];                                                       \
        for (int64_t i = 0; i < n; i++) {                                       \
          CT a = (CT)px[i];                                                     \
          o[i] = (OT)(EXPR);                                                    \
        }                                                                       \
      } else if (sy) {                                                          \
        CT a = (CT)px[0];                                                       \
        for (int64_t i = 0; i < n; i++) {                                       \
          CT b = (CT)py[i];                                                     \
          o[i] = (OT)(EXPR);                                                    \
        }                                                                       \
      } else {                                                                  \
        CT a = (CT)px[0], b = (CT)py[0];                                        \
        OT r_ = (OT)(EXPR);                                                     \
        for (int64_t i = 0; i < n; i++) o[i] = r_;                              \
      }                                                                         \
    }                                                                           \
  }

/* The broadcast of x and y over an output of numel elements into bc, *n
 * its element count; false if they do not broadcast.  When it is one flat
 * run (each operand has numel elements, lined up with the output's, or
 * one, repeated), this skips bcast_init for the common cases. */
static inline bool bcast_flat_init(Bcast *bc, const Tensor *x, const Tensor *y, int64_t numel, int64_t *n) {
  *n = 0;
  if ((x->numel == numel || x->numel == 1) && (y->numel == numel || y->numel == 1)) {
    bc->rank = 1;
    bc->shape[0] = bc->inner = numel;
    bc->inner_step[0] = x->numel == numel;
    bc->inner_step[1] = y->numel == numel;
  } else if (!bcast_init(bc, x, y)) {
    return false;
  }
  *n = 1;
  for (int i = 0; i < bc->rank; i++) *n *= bc->shape[i];
  return true;
}

/* bcast_flat_init for a kernel: 0, or its error naming the shapes
 * (runtime inference has already checked that they broadcast). */
static inline int bcast_operands(ExecCtx *c, Bcast *bc, const Tensor *x, const Tensor *y, int64_t numel,
                                 int64_t *n) {
  if (bcast_flat_init(bc, x, y, numel, n)) return 0;
  char a[128], b[128];
  return exec_ctx_fail(c, "shapes %s and %s do not broadcast", tensor_shape_str(x, a, sizeof a),
                       tensor_shape_str(y, b, sizeof b));
}

/* One call of binary_loop_run: slices of PAR_MIN_WORK elements of a flat
 * broadcast (per == 0), or of `per` rows. */
typedef struct BinarySlices {
  BinaryLoop f;
  const Bcast *bc;
  int64_t n, rows, per;
  void *out;
  const void *x, *y;
  size_t so, sx, sy;
} BinarySlices;

static inline void binary_slice(void *arg, int64_t k) {
  const BinarySlices *b = arg;
  if (b->per) {
    int64_t row0 = k * b->per;
    b->f(b->bc, b->out, b->x, b->y, row0, b->rows - row0 < b->per ? b->rows - row0 : b->per);
    return;
  }
  int64_t at = k * PAR_MIN_WORK;
  Bcast s = *b->bc;
  s.inner = b->n - at < PAR_MIN_WORK ? b->n - at : PAR_MIN_WORK;
  b->f(&s, (char *)b->out + (size_t)at * b->so, (const char *)b->x + (size_t)(at * b->bc->inner_step[0]) * b->sx,
       (const char *)b->y + (size_t)(at * b->bc->inner_step[1]) * b->sy, 0, 1);
}

/* Runs f over the whole broadcast of out's n elements (element sizes so,
 * sx, sy), in slices over the threads (src/exec/par.h): slices of rows, or of
 * the one row a flat broadcast has.  Each element is computed alone, so
 * the slicing changes no bit. */
static inline void binary_loop_run(BinaryLoop f, const Bcast *bc, int64_t n, void *out, size_t so,
                                   const void *x, size_t sx, const void *y, size_t sy) {
  int64_t rows = bc->rank <= 1 ? 1 : bc->inner ? n / bc->inner : 0;
  if (n < 2 * PAR_MIN_WORK) {   /* below, never near the pool (waking it costs) */
    f(bc, out, x, y, 0, rows);
    return;
  }
  BinarySlices b = {f, bc, n, rows, 0, out, x, y, so, sx, sy};
  int64_t slices;
  if (bc->rank <= 1) {
    slices = (n + PAR_MIN_WORK - 1) / PAR_MIN_WORK;
  } else {
    b.per = bc->inner < PAR_MIN_WORK ? PAR_MIN_WORK / bc->inner : 1;
    slices = (rows + b.per - 1) / b.per;
  }
  par_parts(slices, binary_slice, &b);   /* parts taken by whichever thread is free (par.h) */
}

/* The body of a broadcast binary kernel: f (picked by the caller from its
 * table, NULL if there is none) over x and y into out.  An internal error
 * (no loop, or an out of the wrong size) is worded "VERB x SEP y INTO out". */
static inline int bcast_kernel(ExecCtx *c, BinaryLoop f, const Tensor *x, const Tensor *y, Tensor *out,
                               const char *verb, const char *sep, const char *into) {
  if (out->numel == 0) return 0;
  Bcast bc;
  int64_t n;
  if (bcast_operands(c, &bc, x, y, out->numel, &n) < 0) return -1;
  if (!f || n != out->numel) {
    char a[128], b[128], o[128];
    return exec_ctx_fail(c, "internal error: %s %s %s %s %s %s %s %s %s", verb, dtype_name(x->dtype),
                         tensor_shape_str(x, a, sizeof a), sep, dtype_name(y->dtype), tensor_shape_str(y, b, sizeof b),
                         into, dtype_name(out->dtype), tensor_shape_str(out, o, sizeof o));
  }
  binary_loop_run(f, &bc, n, out->data, dtype_size(out->dtype), x->data, dtype_size(x->dtype), y->data,
                  dtype_size(y->dtype));
  return 0;
}

#endif
