/* attmm.h — attention's products of one head, in f32: C = A B (or C += A B)
 * for the small matrices of a head (char_lm's are 32 x 32 x 16), without a
 * BLAS call's fixed cost (0.45 us each in OpenBLAS, 2,300 a char_lm step).
 *
 * Each element of C is one running sum over k in order, a fused
 * multiply-add a term (from 0, or from C's value with acc): the same bits
 * in AVX-512, in AVX2 and in the scalar loop, in whatever blocks of rows
 * and columns the kernel takes them, and so on any number of threads.
 * A's element (r, j) is a[r * ars + j * acs]: A itself (ars = lda, acs = 1)
 * or a transpose (ars = 1, acs = lda). */
#ifndef NETRUN_OPS_ATTMM_H
#define NETRUN_OPS_ATTMM_H

#include <stdbool.h>
#include <stdint.h>

/* Which terms a causal head needs (off: the first query's row, r0).  The
 * terms left out are zeros of A, or results the caller overwrites, so
 * leaving them out changes no bit.
 *   ATTMM_ALL   every row, column and term;
 *   ATTMM_COLS  row r (a query) needs columns j < r + off + 1 (the scores);
 *   ATTMM_UPTO  row r (a query) needs terms j < r + off + 1 (P V, dS K);
 *   ATTMM_FROM  row r (a key) needs terms i >= r - off (P^T dO, dS^T Q). */
typedef enum { ATTMM_ALL, ATTMM_COLS, ATTMM_UPTO, ATTMM_FROM } AttMMCausal;

typedef struct AttMM {
  int64_t m, n, k;
  const float *a;
  int64_t ars, acs;
  const float *b;   /* [k, n], rows ldb apart */
  int64_t ldb;
  float *c;         /* [m, n], rows ldc apart */
  int64_t ldc;
  bool acc;         /* C += A B, else C = A B */
  AttMMCausal causal;
  int64_t off;
} AttMM;

/* Decides the instruction set, once: call it on the thread that starts a
 * team, before att_mm runs on it.  NETRUN_TEST_ISA=avx2 keeps AVX2,
 * NETRUN_TEST_ISA=scalar the scalar loop (tests compare their bits). */
void att_mm_init(void);

void att_mm(const AttMM *p);

/* softmax(S / root) of a block of a head's scores s [rows, cols] in place,
 * row i seeing the keys j < seen (all tk, or with causal those up to its
 * query r0 + i), 0 past them: the divide, the largest, the shift, vmath's
 * exp (over the whole block in one call: its bits depend on the value
 * alone), the sum in double in vmath_sum_f32's order and the scale in
 * double, each in one pass of the row and in the same bits as those
 * functions row by row. */
void att_mm_softmax(float *s, int64_t rows, int64_t cols, int64_t r0, int64_t tk, bool causal, float root);

/* dst [cols, rows] = src [rows, cols]^T, src's rows ld apart. */
void att_mm_transpose(float *dst, const float *src, int64_t rows, int64_t cols, int64_t ld);

#endif
