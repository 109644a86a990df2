/* vmath.h — elementary functions over arrays, in loops the compiler
 * vectorizes, for the kernels whose time is in them (the softmaxes). */
#ifndef NETRUN_OPS_VMATH_H
#define NETRUN_OPS_VMATH_H

#include <stdbool.h>
#include <stdint.h>

/* A function with this attribute comes in AVX2 and AVX-512 versions too,
 * the widest the machine has picked at load time (GCC on x86-64; on a
 * Zen 5, whose 512-bit vectors run at full width, char_lm's step took
 * 0.95-0.98x the time of the AVX2 versions).  No version contracts a
 * multiply and an add (ISO C mode) and each lane computes one element's
 * expression (or one of the fixed lanes of a sum), so all give the same
 * bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VMATH_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VMATH_CLONES
#endif

/* x[i] = exp(x[i]) for i < n, in place.  Within 1 ulp of the exact value
 * for results from FLT_MIN up (doc/design.md gives the bound measured
 * over every float; tests/vmath.bats checks a sample); below FLT_MIN it
 * rounds to a subnormal or 0 as expf does, above FLT_MAX it is +inf, a
 * NaN stays NaN.  An element's bits depend on its value only, not
 * on its place in the array or the machine's vector width. */
void vmath_exp_f32(float *x, int64_t n);

/* The same for one value (the loop's body: the same bits). */
float vmath_expf(float x);

/* x[i] = exp(x[i]) in double: 0 below -746 straight away (exp gives 0
 * there anyway, and its underflow path is slow). */
void vmath_exp_f64(double *x, int64_t n);

/* out[j] = the sum of column j of x [rows, cols], over the rows in order
 * from 0 (the bits of adding row after row into zeros), for j < cols: in
 * registers, a block of columns at a time. */
void vmath_colsum_f32(const float *x, int64_t rows, int64_t cols, float *out);

/* The largest of x[0, n), n >= 1, for softmax's shift: in lanes, so a NaN
 * gives either a NaN or another element (the softmax's rows are NaN
 * then either way). */
float vmath_max_f32(const float *x, int64_t n);
double vmath_max_f64(const double *x, int64_t n);

/* The sum of x[0, n) in double, in a fixed order that does not depend on
 * the machine: eight running sums of the elements i = k (mod 8), added
 * pairwise at the end. */
double vmath_sum_f32(const float *x, int64_t n);

/* The sum of x[0, n) from the first to the last (f64's softmax sums as
 * before). */
double vmath_sum_f64(const double *x, int64_t n);

/* The sum of a[i] * b[i] over [0, n) in double: f32 in vmath_sum_f32's
 * eight lanes, f64 from the first to the last. */
double vmath_dot_f32(const float *a, const float *b, int64_t n);
double vmath_dot_f64(const double *a, const double *b, int64_t n);

/* softmax_grad of one row of probabilities p, of which those past seen
 * are 0, and their gradient g, in place, each divided by root:
 * g = (float)(p (g - s)) / root, s = vmath_dot_f32(g, p, seen), as
 * softmax_grad's f32 loops (nn.c), and 0 past seen up to cols
 * (attention's backward, a block's rows). */
void vmath_softmax_grad_row_f32(const float *p, float *g, int64_t seen, int64_t cols, float root);

/* One run x[0, n) of a channel's values, for batch norm's statistics:
 * *s its sum and *m2 the sum of its squared deviations from its mean,
 * both in double, from eight lanes summing x and (x - x[0])^2 (the shift
 * by a value of the run keeps the squares' sum from cancelling), as
 * vmath_sum_f32 adds them up; m2 = sum (x - x[0])^2 - n (mean - x[0])^2,
 * raised to 0 if it rounds below.  n = 0 gives 0 and 0.  The convolution that writes batch
 * norm's input calls it on each image's channels while they are in cache
 * (conv.c), batch norm on each run it reads (nn.c): the same bits. */
void vmath_run_moments_f32(const float *x, int64_t n, double *s, double *m2);

/* A batch norm's input gradient over a run of n values of one channel,
 * dx = a g + b (x - mean) + d, g taken where relu's input (x - mean)
 * scale + bias is positive (relu), with coef = {mean, a, b, d, scale,
 * bias}: a batch_norm_grad's Coef (nn.c).  Its own loops (dx_run,
 * dx_relu_run), so the same bits as its X@GRAD. */
void vmath_bn_dx_f32(const float *g, const float *x, float *dx, int64_t n, const float *coef, bool relu);

/* A fused batch norm's output over a run of n values of one channel, y =
 * (x - mean) a + bias, plus res (if not NULL), then relu (if asked; NaN
 * kept), with coef = {mean, a, bias}: a fused_batch_norm's Coef (nn.c).
 * Its own loop (norm_run), so the same bits as its Y. */
void vmath_bn_norm_f32(const float *x, const float *res, float *y, int64_t n, const float *coef, bool relu);
void vmath_run_moments_f64(const double *x, int64_t n, double *s, double *m2);

#endif
