/* attmm.c — attention's small f32 products (attmm.h).
 *
 * A block of R rows of C and up to two vectors of its columns stays in
 * registers while k runs: each step loads B's row once and broadcasts one
 * element of A a row, so the R sums are R independent chains of fused
 * multiply-adds (one chain would wait on the adder's latency).  The last
 * vector of a row is masked: no load or store past a row's end. */
#include "ops/attmm.h"
#include "ops/vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ATTMM_X86 1
#endif

/* 0: the scalar loop, 1: AVX2, 2: AVX-512 */
static int mm_isa = -1;

void att_mm_init(void) {
  if (mm_isa >= 0) return;
  const char *isa = getenv("NETRUN_TEST_ISA");
  int best = 0;
#ifdef ATTMM_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    best = __builtin_cpu_supports("avx512f") ? 2 : 1;
#endif
  if (isa && strcmp(isa, "avx2") == 0 && best > 1) best = 1;
  if (isa && strcmp(isa, "scalar") == 0) best = 0;
  mm_isa = best;
}

/* The terms [*k0, *k1) and columns [0, *n1) rows r..r+rows-1 need. */
static void mm_bounds(const AttMM *p, int64_t r, int64_t rows, int64_t *k0, int64_t *k1, int64_t *n1) {
  *k0 = 0;
  *k1 = p->k;
  *n1 = p->n;
  int64_t last = r + rows + p->off;   /* one past what the block's last row needs */
  if (p->causal == ATTMM_COLS && last < *n1) *n1 = last;
  if (p->causal == ATTMM_UPTO && last < *k1) *k1 = last;
  if (p->causal == ATTMM_FROM && r - p->off > 0) *k0 = r - p->off;
  if (*k0 > *k1) *k0 = *k1;
}

static float mm_a(const AttMM *p, int64_t r, int64_t j) { return p->a[r * p->ars + j * p->acs]; }

static void mm_scalar(const AttMM *p, int64_t r) {
  int64_t k0, k1, n1;
  mm_bounds(p, r, 1, &k0, &k1, &n1);
  float *c = p->c + r * p->ldc;
  for (int64_t j = 0; j < n1; j++) {
    float s = p->acc ? c[j] : 0.0f;
    for (int64_t t = k0; t < k1; t++) s = fmaf(mm_a(p, r, t), p->b[t * p->ldb + j], s);
    c[j] = s;
  }
}

#ifdef ATTMM_X86
#define Z_TARGET __attribute__((target("avx512f,avx2,fma"), always_inline)) static inline
#define Y_TARGET __attribute__((target("avx2,fma"), always_inline)) static inline

/* AVX-512: rows r..r+R-1, columns j..j+w-1 (w <= 16 * NV), NV vectors. */
Z_TARGET void mm_z_tile(const AttMM *p, int64_t r, int R, int NV, int64_t j, int64_t w, int64_t k0, int64_t k1) {
  __mmask16 m[2];
  for (int v = 0; v < 2; v++) {
    int64_t left = w - 16 * v;
    m[v] = left >= 16 ? (__mmask16)0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
  }
  __m512 c[8][2];
  for (int i = 0; i < R; i++)
    for (int v = 0; v < NV; v++)
      c[i][v] = p->acc ? _mm512_maskz_loadu_ps(m[v], p->c + (r + i) * p->ldc + j + 16 * v) : _mm512_setzero_ps();
  for (int64_t t = k0; t < k1; t++) {
    const float *bt = p->b + t * p->ldb + j;
    __m512 b[2];
    for (int v = 0; v < NV; v++) b[v] = _mm512_maskz_loadu_ps(m[v], bt + 16 * v);
    for (int i = 0; i < R; i++) {
      __m512 x = _mm512_set1_ps(mm_a(p, r + i, t));
      for (int v = 0; v < NV; v++) c[i][v] = _mm512_fmadd_ps(x, b[v], c[i][v]);
    }
  }
  for (int i = 0; i < R; i++)
    for (int v = 0; v < NV; v++) _mm512_mask_storeu_ps(p->c + (r + i) * p->ldc + j + 16 * v, m[v], c[i][v]);
}

Z_TARGET void mm_z_rows(const AttMM *p, int64_t r, int R) {
  int64_t k0, k1, n1;
  mm_bounds(p, r, R, &k0, &k1, &n1);
  for (int64_t j = 0; j < n1; j += 32) {
    int64_t w = n1 - j < 32 ? n1 - j : 32;
    if (w > 16) mm_z_tile(p, r, R, 2, j, w, k0, k1);
    else mm_z_tile(p, r, R, 1, j, w, k0, k1);
  }
}

__attribute__((target("avx512f,avx2,fma"))) static void mm_z(const AttMM *p) {
  int64_t r = 0;
  for (; r + 8 <= p->m; r += 8) mm_z_rows(p, r, 8);
  if (r + 4 <= p->m) mm_z_rows(p, r, 4), r += 4;
  if (r + 2 <= p->m) mm_z_rows(p, r, 2), r += 2;
  if (r < p->m) mm_z_rows(p, r, 1);
}

/* AVX2: the same with vectors of 8. */
Y_TARGET __m256i mm_y_mask(int64_t left) {
  int n = left >= 8 ? 8 : left > 0 ? (int)left : 0;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Rows r..r+R-1, columns j..j+w-1 (w <= 8 * NV), NV vectors: masked loads
 * where a vector runs past w (MASK), plain ones otherwise, and the last
 * partial vector of a row stored through a copy: a masked store costs
 * tens of cycles on AMD's Zen 2 and 3. */
Y_TARGET void mm_y_tile(const AttMM *p, int64_t r, int R, int NV, bool MASK, int64_t j, int64_t w, int64_t k0,
                        int64_t k1) {
  __m256i m[2] = {mm_y_mask(w), mm_y_mask(w - 8)};
  __m256 c[4][2];
  for (int i = 0; i < R; i++)
    for (int v = 0; v < NV; v++) {
      float *cp = p->c + (r + i) * p->ldc + j + 8 * v;
      c[i][v] = !p->acc ? _mm256_setzero_ps() : MASK ? _mm256_maskload_ps(cp, m[v]) : _mm256_loadu_ps(cp);
    }
  for (int64_t t = k0; t < k1; t++) {
    const float *bt = p->b + t * p->ldb + j;
    __m256 b[2];
    for (int v = 0; v < NV; v++) b[v] = MASK ? _mm256_maskload_ps(bt + 8 * v, m[v]) : _mm256_loadu_ps(bt + 8 * v);
    for (int i = 0; i < R; i++) {
      __m256 x = _mm256_set1_ps(mm_a(p, r + i, t));
      for (int v = 0; v < NV; v++) c[i][v] = _mm256_fmadd_ps(x, b[v], c[i][v]);
    }
  }
  for (int i = 0; i < R; i++)
    for (int v = 0; v < NV; v++) {
      float *cp = p->c + (r + i) * p->ldc + j + 8 * v;
      int64_t left = w - 8 * v;
      if (MASK && left < 8) {
        float tail[8];
        _mm256_storeu_ps(tail, c[i][v]);
        memcpy(cp, tail, (size_t)left * sizeof(float));
      } else {
        _mm256_storeu_ps(cp, c[i][v]);
      }
    }
}

Y_TARGET void mm_y_rows(const AttMM *p, int64_t r, int R) {
  int64_t k0, k1, n1;
  mm_bounds(p, r, R, &k0, &k1, &n1);
  for (int64_t j = 0; j < n1; j += 16) {
    int64_t w = n1 - j < 16 ? n1 - j : 16;
    if (w == 16) mm_y_tile(p, r, R, 2, false, j, w, k0, k1);
    else if (w == 8) mm_y_tile(p, r, R, 1, false, j, w, k0, k1);
    else if (w > 8) mm_y_tile(p, r, R, 2, true, j, w, k0, k1);
    else mm_y_tile(p, r, R, 1, true, j, w, k0, k1);
  }
}

/* dst [cols, rows] = src^T, 8 x 8 blocks in registers, the edges scalar. */
__attribute__((target("avx2,fma"))) static void mm_y_transpose(float *dst, const float *src, int64_t rows,
                                                               int64_t cols, int64_t ld) {
  int64_t i = 0;
  for (; i + 8 <= rows; i += 8) {
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
      __m256 r[8], t[8];
      for (int x = 0; x < 8; x++) r[x] = _mm256_loadu_ps(src + (i + x) * ld + j);
      for (int x = 0; x < 8; x += 2) {
        t[x] = _mm256_unpacklo_ps(r[x], r[x + 1]);
        t[x + 1] = _mm256_unpackhi_ps(r[x], r[x + 1]);
      }
      for (int x = 0; x < 8; x += 4) {
        r[x] = _mm256_shuffle_ps(t[x], t[x + 2], 0x44);
        r[x + 1] = _mm256_shuffle_ps(t[x], t[x + 2], 0xee);
        r[x + 2] = _mm256_shuffle_ps(t[x + 1], t[x + 3], 0x44);
        r[x + 3] = _mm256_shuffle_ps(t[x + 1], t[x + 3], 0xee);
      }
      for (int x = 0; x < 4; x++) {
        _mm256_storeu_ps(dst + (j + x) * rows + i, _mm256_permute2f128_ps(r[x], r[x + 4], 0x20));
        _mm256_storeu_ps(dst + (j + x + 4) * rows + i, _mm256_permute2f128_ps(r[x], r[x + 4], 0x31));
      }
    }
    for (; j < cols; j++)
      for (int x = 0; x < 8; x++) dst[j * rows + i + x] = src[(i + x) * ld + j];
  }
  for (; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) dst[j * rows + i] = src[i * ld + j];
}

__attribute__((target("avx2,fma"))) static void mm_y(const AttMM *p) {
  int64_t r = 0;
  for (; r + 4 <= p->m; r += 4) mm_y_rows(p, r, 4);
  if (r + 2 <= p->m) mm_y_rows(p, r, 2), r += 2;
  if (r < p->m) mm_y_rows(p, r, 1);
}

/* The softmax's passes over one row (att_mm_softmax), in AVX-512: x[j] /=
 * root for j < seen and the largest of those; then x[j] -= it, and 0 past
 * seen up to cols. */
__attribute__((target("avx512f,avx2,fma"))) static void sm_z_shift(float *x, int64_t seen, int64_t cols, float root) {
  __m512 mx = _mm512_set1_ps(-INFINITY), rt = _mm512_set1_ps(root);
  for (int64_t j = 0; j < seen; j += 16) {
    __mmask16 m = seen - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (seen - j)) - 1);
    __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + j), rt);
    _mm512_mask_storeu_ps(x + j, m, v);
    mx = _mm512_mask_max_ps(mx, m, mx, v);
  }
  __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  for (int64_t j = 0; j < cols; j += 16) {
    int64_t left = cols - j, on = seen - j;
    __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    __mmask16 keep = on >= 16 ? (__mmask16)0xffff : on > 0 ? (__mmask16)((1u << on) - 1) : 0;
    __m512 v = _mm512_maskz_sub_ps(keep, _mm512_maskz_loadu_ps(keep, x + j), top);
    _mm512_mask_storeu_ps(x + j, m, v);
  }
}

/* The sum in double of x[0..seen) in vmath_sum_f32's order (lane j % 8
 * sums in order, the lanes added in a tree); x[j] = x[j] / that in double
 * for j < seen, 0 after it up to cols. */
__attribute__((target("avx512f,avx2,fma"))) static void sm_z_scale(float *x, int64_t seen, int64_t cols) {
  __m512d acc = _mm512_setzero_pd();
  for (int64_t j = 0; j < seen; j += 16) {   /* 16 floats: the lanes take the low 8, then the high 8 */
    __mmask16 m = seen - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (seen - j)) - 1);
    __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  }
  double l[8];
  _mm512_storeu_pd(l, acc);
  __m512d inv = _mm512_set1_pd(1 / (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))));
  for (int64_t j = 0; j < cols; j += 16) {
    int64_t left = cols - j, on = seen - j;
    __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    __mmask16 keep = on >= 16 ? (__mmask16)0xffff : on > 0 ? (__mmask16)((1u << on) - 1) : 0;
    __m512 v = _mm512_maskz_loadu_ps(keep, x + j);
    __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), inv));
    __m256 hi = _mm512_cvtpd_ps(
        _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), inv));
    __m512 r = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
    _mm512_mask_storeu_ps(x + j, m, r);
  }
}

/* The softmax's passes in AVX2, as sm_shift and sm_scale: the same
 * operations on each value, the sum's lanes j % 8 in two vectors of four
 * doubles.  Whole vectors only, the last few values one at a time: a
 * masked store costs tens of cycles on AMD's Zen 2 and 3. */
Y_TARGET __m256 sm_y_max8(__m256 v) {
  v = _mm256_max_ps(v, _mm256_permute2f128_ps(v, v, 1));
  v = _mm256_max_ps(v, _mm256_shuffle_ps(v, v, 0x4e));
  return _mm256_max_ps(v, _mm256_shuffle_ps(v, v, 0xb1));
}

__attribute__((target("avx2,fma"))) static void sm_y_shift(float *x, int64_t seen, int64_t cols, float root) {
  __m256 mx = _mm256_set1_ps(-INFINITY), rt = _mm256_set1_ps(root);
  int64_t j = 0;
  for (; j + 8 <= seen; j += 8) {
    __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + j), rt);
    _mm256_storeu_ps(x + j, v);
    mx = _mm256_max_ps(v, mx);
  }
  float m[8];
  _mm256_storeu_ps(m, sm_y_max8(mx));
  float top = m[0];
  for (; j < seen; j++) {
    x[j] /= root;
    top = x[j] > top ? x[j] : top;
  }
  __m256 t = _mm256_set1_ps(top);
  for (j = 0; j + 8 <= seen; j += 8) _mm256_storeu_ps(x + j, _mm256_sub_ps(_mm256_loadu_ps(x + j), t));
  for (; j < seen; j++) x[j] -= top;
  for (; j < cols; j++) x[j] = 0;
}

__attribute__((target("avx2,fma"))) static void sm_y_scale(float *x, int64_t seen, int64_t cols) {
  __m256d lo = _mm256_setzero_pd(), hi = lo;
  int64_t j = 0;
  for (; j + 8 <= seen; j += 8) {
    __m256 v = _mm256_loadu_ps(x + j);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  double l[8];
  _mm256_storeu_pd(l, lo);
  _mm256_storeu_pd(l + 4, hi);
  for (int64_t i = j; i < seen; i++) l[i % 8] += (double)x[i];
  double d = 1 / (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])));
  __m256d inv = _mm256_set1_pd(d);
  for (j = 0; j + 8 <= seen; j += 8) {
    __m256 v = _mm256_loadu_ps(x + j);
    __m128 a = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), inv));
    __m128 b = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), inv));
    _mm256_storeu_ps(x + j, _mm256_set_m128(b, a));
  }
  for (; j < seen; j++) x[j] = (float)((double)x[j] * d);
  for (; j < cols; j++) x[j] = 0;
}
#endif

void att_mm(const AttMM *p) {
  if (mm_isa < 0) att_mm_init();
#ifdef ATTMM_X86
  if (mm_isa == 2) {
    mm_z(p);
    return;
  }
  if (mm_isa == 1) {
    mm_y(p);
    return;
  }
#endif
  for (int64_t r = 0; r < p->m; r++) mm_scalar(p, r);
}

/* The scalar passes: the same operations, so the same bits. */
static void sm_shift(float *x, int64_t seen, int64_t cols, float root) {
  float m = -INFINITY;
  for (int64_t j = 0; j < seen; j++) {
    x[j] /= root;
    m = x[j] > m ? x[j] : m;
  }
  for (int64_t j = 0; j < seen; j++) x[j] -= m;
  for (int64_t j = seen; j < cols; j++) x[j] = 0;
}

static void sm_scale(float *x, int64_t seen, int64_t cols) {
  double l[8] = {0};
  for (int64_t j = 0; j < seen; j++) l[j % 8] += (double)x[j];
  double inv = 1 / (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])));
  for (int64_t j = 0; j < seen; j++) x[j] = (float)((double)x[j] * inv);
  for (int64_t j = seen; j < cols; j++) x[j] = 0;
}

void att_mm_softmax(float *s, int64_t rows, int64_t cols, int64_t r0, int64_t tk, bool causal, float root) {
  if (mm_isa < 0) att_mm_init();
  for (int64_t i = 0; i < rows; i++) {
    int64_t seen = causal && r0 + i + 1 < tk ? r0 + i + 1 : tk;
#ifdef ATTMM_X86
    if (mm_isa == 2) {
      sm_z_shift(s + i * cols, seen, cols, root);
      continue;
    }
    if (mm_isa == 1) {
      sm_y_shift(s + i * cols, seen, cols, root);
      continue;
    }
#endif
    sm_shift(s + i * cols, seen, cols, root);
  }
  vmath_exp_f32(s, rows * cols);
  for (int64_t i = 0; i < rows; i++) {
    int64_t seen = causal && r0 + i + 1 < tk ? r0 + i + 1 : tk;
#ifdef ATTMM_X86
    if (mm_isa == 2) {
      sm_z_scale(s + i * cols, seen, cols);
      continue;
    }
    if (mm_isa == 1) {
      sm_y_scale(s + i * cols, seen, cols);
      continue;
    }
#endif
    sm_scale(s + i * cols, seen, cols);
  }
}

void att_mm_transpose(float *dst, const float *src, int64_t rows, int64_t cols, int64_t ld) {
  if (mm_isa < 0) att_mm_init();
#ifdef ATTMM_X86
  if (mm_isa >= 1) {
    mm_y_transpose(dst, src, rows, cols, ld);
    return;
  }
#endif
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) dst[j * rows + i] = src[i * ld + j];
}
