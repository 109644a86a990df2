/* vmath.c — exp over an array of floats, written so that GCC vectorizes
 * the loop (SSE2, and AVX2 in a clone picked at load time on machines
 * that have it).  glibc's expf is called one element at a time; in the
 * softmax loops it was a seventh of a transformer's training step.
 *
 * exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 in
 * [-ln 2 / 2, ln 2 / 2]:
 *   - n by the round-to-nearest of adding 1.5 * 2^23 (no conversion of a
 *     float to an integer, which C leaves undefined for a NaN);
 *   - r with ln 2 split in two (Cody and Waite): n * LN2_HI is exact for
 *     |n| < 2^15, LN2_HI having 9 significant bits;
 *   - exp(r) = 1 + r + r^2 q(r), q of degree 4 fitted for the least
 *     largest relative error on the interval (3.1e-9, under a float's half
 *     ulp of 6e-8: the error left is the float arithmetic's);
 *   - 2^n as two powers of two, 2^(n/2) and 2^(n - n/2), each a normal
 *     float for every n the clamp allows, so the last product rounds once
 *     into the subnormals or overflows to inf, as expf does.
 * x is first clamped to [-104, 89]: exp is +inf above 88.73 and rounds to
 * 0 below -103.98; a NaN passes the clamp (its comparisons are false) and
 * the arithmetic keeps it.  No operation here depends on the vector width
 * (no fused multiply-add: ISO C mode does not contract), so a vector lane
 * and the scalar tail give the same bits. */
#include "ops/vmath.h"

#include <math.h>
#include <string.h>
#include <stdlib.h>

#define EXP_LO (-104.0f)
#define EXP_HI 89.0f
#define LOG2E 0x1.715476p+0f  /* 1 / ln 2 */
#define LN2_HI 0x1.63p-1f     /* ln 2's first 9 bits: 0.693359375 */
#define LN2_LO -0x1.bd0106p-13f /* ln 2 - LN2_HI */
#define ROUNDER 0x1.8p+23f      /* x + 1.5 * 2^23 - 1.5 * 2^23: x rounded to an integer */
#define Q0 0x1.fffffcp-2f
#define Q1 0x1.555492p-3f
#define Q2 0x1.5558f2p-5f
#define Q3 0x1.1239d4p-7f
#define Q4 0x1.6a244cp-10f

static inline uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* 2^k for -126 <= k <= 127. */
static inline float pow2(int32_t k) { return float_of((uint32_t)(k + 127) << 23); }

static inline float exp_one(float x, float lo, float hi) {
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  float t = x * LOG2E + ROUNDER, n = t - ROUNDER;
  int32_t k = (int32_t)(bits_of(t) - bits_of(ROUNDER)), k1 = k / 2;
  float r = (x - n * LN2_HI) - n * LN2_LO;
  float q = (((Q4 * r + Q3) * r + Q2) * r + Q1) * r + Q0;
  float p = 1.0f + (r + r * r * q);
  return p * pow2(k1) * pow2(k - k1);
}

/* The clamp's bounds go through an empty asm: seeing them as constants,
 * GCC computes exp(EXP_LO) at compile time and branches to it, and a loop
 * with a branch is not vectorized. */
VMATH_CLONES void vmath_exp_f32(float *x, int64_t n) {
  float lo = EXP_LO, hi = EXP_HI;
  __asm__("" : "+g"(lo), "+g"(hi));
  for (int64_t i = 0; i < n; i++) x[i] = exp_one(x[i], lo, hi);
}

float vmath_expf(float x) {
  float lo = EXP_LO, hi = EXP_HI;
  __asm__("" : "+g"(lo), "+g"(hi));
  return exp_one(x, lo, hi);
}

void vmath_exp_f64(double *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = x[i] < -746.0 ? 0 : exp(x[i]);
}

/* `a > b ? a : b` keeps b when either is a NaN, the form GCC makes maxps
 * of; eight lanes, combined at the end. */
#define MAX_LANES(T)                                                   \
  T m[8];                                                              \
  int64_t j = 8;                                                       \
  if (n < 8) {                                                         \
    T r = x[0];                                                        \
    for (int64_t i = 1; i < n; i++) r = x[i] > r ? x[i] : r;           \
    return r;                                                          \
  }                                                                    \
  for (int k = 0; k < 8; k++) m[k] = x[k];                             \
  for (; j + 8 <= n; j += 8)                                           \
    for (int k = 0; k < 8; k++) m[k] = x[j + k] > m[k] ? x[j + k] : m[k]; \
  for (int k = 0; j + k < n; k++) m[k] = x[j + k] > m[k] ? x[j + k] : m[k]; \
  T r = m[0];                                                          \
  for (int k = 1; k < 8; k++) r = m[k] > r ? m[k] : r;                 \
  return r;

VMATH_CLONES float vmath_max_f32(const float *x, int64_t n) { MAX_LANES(float) }

double vmath_max_f64(const double *x, int64_t n) { MAX_LANES(double) }

VMATH_CLONES double vmath_sum_f32(const float *x, int64_t n) {
  double s[8] = {0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; k++) s[k] += (double)x[j + k];
  for (int k = 0; j + k < n; k++) s[k] += (double)x[j + k];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

VMATH_CLONES void vmath_colsum_f32(const float *x, int64_t rows, int64_t cols, float *out) {
  int64_t j = 0;
  for (; j + 32 <= cols; j += 32) {   /* 32 running sums: 4 AVX2 registers */
    float a[32] = {0};
    for (int64_t i = 0; i < rows; i++)
      for (int k = 0; k < 32; k++) a[k] += x[i * cols + j + k];
    memcpy(out + j, a, sizeof a);
  }
  for (; j < cols; j++) {
    float a = 0;
    for (int64_t i = 0; i < rows; i++) a += x[i * cols + j];
    out[j] = a;
  }
}

double vmath_sum_f64(const double *x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += x[i];
  return s;
}

VMATH_CLONES double vmath_dot_f32(const float *a, const float *b, int64_t n) {
  double s[8] = {0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; k++) s[k] += (double)a[j + k] * (double)b[j + k];
  for (int k = 0; j + k < n; k++) s[k] += (double)a[j + k] * (double)b[j + k];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

VMATH_CLONES void vmath_softmax_grad_row_f32(const float *p, float *g, int64_t seen, int64_t cols, float root) {
  double s = vmath_dot_f32(g, p, seen);
  for (int64_t j = 0; j < seen; j++) g[j] = (float)((double)p[j] * ((double)g[j] - s)) / root;
  for (int64_t j = seen; j < cols; j++) g[j] = 0;
}

double vmath_dot_f64(const double *a, const double *b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

/* Eight lanes in one vector of doubles (two or four registers below
 * AVX-512): the compiler left the arrays' lanes scalar. */
typedef double V8d __attribute__((vector_size(64)));
typedef float V8s __attribute__((vector_size(32)));
#define LOAD8_float(d, p)                     \
  do {                                        \
    V8s v_;                                   \
    memcpy(&v_, (p), sizeof v_);              \
    d = __builtin_convertvector(v_, V8d);     \
  } while (0)
#define LOAD8_double(d, p) memcpy(&d, (p), sizeof d)

#define RUN_MOMENTS(T)                                                                       \
  if (n <= 0) {                                                                              \
    *s = 0, *m2 = 0;                                                                         \
    return;                                                                                  \
  }                                                                                          \
  double k0 = (double)x[0];                                                                  \
  V8d a = {0}, q = {0}, a1 = {0}, q1 = {0}, sh = {k0, k0, k0, k0, k0, k0, k0, k0};            \
  int64_t j = 0;                                                                             \
  for (; j + 16 <= n; j += 16) { /* two sums of each, so no add waits on the one before */   \
    V8d v, w;                                                                                \
    LOAD8_##T(v, x + j);                                                                     \
    LOAD8_##T(w, x + j + 8);                                                                 \
    V8d d = v - sh, e = w - sh;                                                              \
    a += v;                                                                                  \
    q += d * d;                                                                              \
    a1 += w;                                                                                 \
    q1 += e * e;                                                                             \
  }                                                                                          \
  a += a1;                                                                                   \
  q += q1;                                                                                   \
  if (j + 8 <= n) {                                                                          \
    V8d v;                                                                                   \
    LOAD8_##T(v, x + j);                                                                     \
    V8d d = v - sh;                                                                          \
    a += v;                                                                                  \
    q += d * d;                                                                              \
    j += 8;                                                                                  \
  }                                                                                          \
  double ta = 0, tq = 0; /* the last n % 8 values: scalars (a vector's lanes would go through memory) */  \
  for (; j < n; j++) {                                                                       \
    double v = (double)x[j], d = v - k0;                                                     \
    ta += v;                                                                                 \
    tq += d * d;                                                                             \
  }                                                                                          \
  double sum = (((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))) + ta;     \
  double sq = (((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]))) + tq;      \
  double dm = sum / (double)n - k0, r = sq - (double)n * dm * dm;                            \
  *s = sum;                                                                                  \
  *m2 = r < 0 ? 0 : r;

VMATH_CLONES static void run_moments_f32(const float *x, int64_t n, double *s, double *m2) { RUN_MOMENTS(float) }

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#include <stdatomic.h>
/* The end of run_moments_z's and run_moments_y's run: the values from j
 * on (fewer than 8) one at a time, the lanes al and ql (sums, and squared
 * deviations from k0) added pairwise, as RUN_MOMENTS ends. */
static inline void moments_end(const float *x, int64_t j, int64_t n, double k0, const double *al, const double *ql,
                               double *s, double *m2) {
  double ta = 0, tq = 0;
  for (; j < n; j++) {
    double v = (double)x[j], d = v - k0;
    ta += v;
    tq += d * d;
  }
  double sum = (((al[0] + al[1]) + (al[2] + al[3])) + ((al[4] + al[5]) + (al[6] + al[7]))) + ta;
  double sq = (((ql[0] + ql[1]) + (ql[2] + ql[3])) + ((ql[4] + ql[5]) + (ql[6] + ql[7]))) + tq;
  double dm = sum / (double)n - k0, r = sq - (double)n * dm * dm;
  *s = sum;
  *m2 = r < 0 ? 0 : r;
}

/* run_moments_f32 in AVX-512 intrinsics: each conversion one instruction
 * (GCC's clone split them in halves, and the loop, run on each image's
 * output of a convolution while it is in cache, was bound by them).  The
 * same lanes, operations and order, none fused: the same bits. */
__attribute__((target("avx512f"))) static void run_moments_z(const float *x, int64_t n, double *s, double *m2) {
  if (n <= 0) {
    *s = 0, *m2 = 0;
    return;
  }
  double k0 = (double)x[0];
  __m512d sh = _mm512_set1_pd(k0), a = _mm512_setzero_pd(), q = a, a1 = a, q1 = a;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + j)), w = _mm512_cvtps_pd(_mm256_loadu_ps(x + j + 8));
    __m512d d = _mm512_sub_pd(v, sh), e = _mm512_sub_pd(w, sh);
    a = _mm512_add_pd(a, v);
    q = _mm512_add_pd(q, _mm512_mul_pd(d, d));
    a1 = _mm512_add_pd(a1, w);
    q1 = _mm512_add_pd(q1, _mm512_mul_pd(e, e));
  }
  a = _mm512_add_pd(a, a1);
  q = _mm512_add_pd(q, q1);
  if (j + 8 <= n) {
    __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + j)), d = _mm512_sub_pd(v, sh);
    a = _mm512_add_pd(a, v);
    q = _mm512_add_pd(q, _mm512_mul_pd(d, d));
    j += 8;
  }
  double al[8], ql[8];
  _mm512_storeu_pd(al, a);
  _mm512_storeu_pd(ql, q);
  moments_end(x, j, n, k0, al, ql, s, m2);
}

/* run_moments_f32 in AVX2 intrinsics, each 8-lane vector of doubles as two
 * of four (GCC's clone of the generic loop ran at half this speed on
 * AMD's Zen 3): the same lanes, operations and order, none fused, as
 * run_moments_z. */
__attribute__((target("avx2"))) static void run_moments_y(const float *x, int64_t n, double *s, double *m2) {
  if (n <= 0) {
    *s = 0, *m2 = 0;
    return;
  }
  double k0 = (double)x[0];
  __m256d sh = _mm256_set1_pd(k0), a = _mm256_setzero_pd(), b = a, q = a, r = a, a1 = a, b1 = a, q1 = a, r1 = a;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m256 u = _mm256_loadu_ps(x + j), w = _mm256_loadu_ps(x + j + 8);
    __m256d v0 = _mm256_cvtps_pd(_mm256_castps256_ps128(u)), v1 = _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1));
    __m256d w0 = _mm256_cvtps_pd(_mm256_castps256_ps128(w)), w1 = _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1));
    __m256d d0 = _mm256_sub_pd(v0, sh), d1 = _mm256_sub_pd(v1, sh);
    __m256d e0 = _mm256_sub_pd(w0, sh), e1 = _mm256_sub_pd(w1, sh);
    a = _mm256_add_pd(a, v0), b = _mm256_add_pd(b, v1);
    q = _mm256_add_pd(q, _mm256_mul_pd(d0, d0)), r = _mm256_add_pd(r, _mm256_mul_pd(d1, d1));
    a1 = _mm256_add_pd(a1, w0), b1 = _mm256_add_pd(b1, w1);
    q1 = _mm256_add_pd(q1, _mm256_mul_pd(e0, e0)), r1 = _mm256_add_pd(r1, _mm256_mul_pd(e1, e1));
  }
  a = _mm256_add_pd(a, a1), b = _mm256_add_pd(b, b1);
  q = _mm256_add_pd(q, q1), r = _mm256_add_pd(r, r1);
  if (j + 8 <= n) {
    __m256 u = _mm256_loadu_ps(x + j);
    __m256d v0 = _mm256_cvtps_pd(_mm256_castps256_ps128(u)), v1 = _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1));
    __m256d d0 = _mm256_sub_pd(v0, sh), d1 = _mm256_sub_pd(v1, sh);
    a = _mm256_add_pd(a, v0), b = _mm256_add_pd(b, v1);
    q = _mm256_add_pd(q, _mm256_mul_pd(d0, d0)), r = _mm256_add_pd(r, _mm256_mul_pd(d1, d1));
    j += 8;
  }
  double al[8], ql[8];
  _mm256_storeu_pd(al, a), _mm256_storeu_pd(al + 4, b);
  _mm256_storeu_pd(ql, q), _mm256_storeu_pd(ql + 4, r);
  moments_end(x, j, n, k0, al, ql, s, m2);
}

void vmath_run_moments_f32(const float *x, int64_t n, double *s, double *m2) {
  /* decided at the first call, which may come on two threads at once
   * (a convolution's images, batch norm's blocks): atomic, the same answer */
  static _Atomic int zs = -1;
  int z = atomic_load_explicit(&zs, memory_order_relaxed);
  if (z < 0) {
    __builtin_cpu_init();
    const char *isa = getenv("NETRUN_TEST_ISA");   /* tests: the same bits each way */
    /* 2: AVX-512, 1: AVX2, 0: the generic loop (NETRUN_TEST_ISA=scalar) */
    z = __builtin_cpu_supports("avx512f") && !(isa && strcmp(isa, "avx2") == 0) ? 2
        : __builtin_cpu_supports("avx2") && !(isa && strcmp(isa, "scalar") == 0) ? 1 : 0;
    atomic_store_explicit(&zs, z, memory_order_relaxed);
  }
  if (z == 2) run_moments_z(x, n, s, m2);
  else if (z == 1) run_moments_y(x, n, s, m2);
  else run_moments_f32(x, n, s, m2);
}
#else
void vmath_run_moments_f32(const float *x, int64_t n, double *s, double *m2) { run_moments_f32(x, n, s, m2); }
#endif

void vmath_run_moments_f64(const double *x, int64_t n, double *s, double *m2) { RUN_MOMENTS(double) }
