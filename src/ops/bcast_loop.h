/* bcast_loop.h — the broadcast loop the binary elementwise and comparison
 * kernels are generated from, and their element types. */
#ifndef NETRUN_OPS_BCAST_LOOP_H
#define NETRUN_OPS_BCAST_LOOP_H

#include "../tensor.h"

typedef float f32;
typedef int64_t i64;
typedef uint8_t bln;

/* One broadcast binary loop: output type OT, operand types XT and YT, both
 * read as CT into `a` and `b`, the result EXPR.  Each row of the broadcast
 * is a tight loop; which operands advance along it is decided per row. */
typedef void (*BinaryLoop)(const Bcast *bc, void *out, const void *x, const void *y);

#define BINARY_LOOP(FN, OT, XT, YT, CT, EXPR)                                   \
  static void FN(const Bcast *bc, void *out, const void *xv, const void *yv) {  \
    const XT *x = xv;                                                           \
    const YT *y = yv;                                                           \
    int64_t n = bc->inner;                                                      \
    bool sx = bc->inner_step[0] != 0, sy = bc->inner_step[1] != 0;              \
    int64_t oo = 0, ox = 0, oy = 0;                                             \
    BcastIter it;                                                               \
    if (bc->rank > 1) bcast_iter_init(&it, bc);                                 \
    for (;;) {                                                                  \
      OT *restrict o = (OT *)out + oo;                                          \
      const XT *px = x + ox;                                                    \
      const YT *py = y + oy;                                                    \
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
        OT r = (OT)(EXPR);                                                      \
        for (int64_t i = 0; i < n; i++) o[i] = r;                               \
      }                                                                         \
      if (bc->rank <= 1 || !bcast_iter_next(&it)) break;                        \
      oo = it.out, ox = it.off[0], oy = it.off[1];                              \
    }                                                                           \
  }

#endif
