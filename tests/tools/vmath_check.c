/* vmath_check — src/ops/vmath.c's exp against exp in double over the
 * floats (tests/vmath.bats).
 *
 *   vmath_check [STRIDE]
 *
 * walks every STRIDE-th bit pattern of the finite floats (1: all of them)
 * through vmath_exp_f32 in arrays of 1000, and checks each result:
 *   - a normal result (exact value >= FLT_MIN) within MAX_REL of the exact
 *     value, relative;
 *   - a subnormal or 0 result within one unit of the least subnormal
 *     (2^-149) of the exact value;
 *   - +inf exactly where expf gives +inf, a NaN for a NaN;
 *   - the same bits as vmath_expf of the element alone (a vector lane and
 *     the scalar tail agree).
 * It prints the largest relative error seen (and in ulp of the result)
 * with its x, and exits 1 on the first failed check, naming it. */
#include "ops/vmath.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REL 2.4e-7 /* 2 ulp of a float in [1, 2) */
#define BATCH 1000

static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static double worst_rel, worst_ulp;
static float worst_x;

static int check(float x, float y) {
  double e = exp((double)x);
  float ref = expf(x);
  if (bits_of(y) != bits_of(vmath_expf(x))) {
    printf("x = %a: the array gave %a, the scalar %a\n", (double)x, (double)y, (double)vmath_expf(x));
    return 1;
  }
  if (isnan(x) || isnan(y)) {
    if (isnan(x) && isnan(y)) return 0;
    printf("x = %a: exp gave %a\n", (double)x, (double)y);
    return 1;
  }
  if (isinf(y) || isinf(ref)) {
    if (isinf(y) && isinf(ref)) return 0;
    printf("x = %a: exp gave %a, expf %a\n", (double)x, (double)y, (double)ref);
    return 1;
  }
  if (e < (double)FLT_MIN) {
    if (fabs((double)y - e) <= 0x1p-149) return 0;
    printf("x = %a: exp gave %a, exactly %a: more than 2^-149 apart\n", (double)x, (double)y, e);
    return 1;
  }
  double rel = fabs((double)y - e) / e;
  int ex;
  frexp(e, &ex);
  double ulp = fabs((double)y - e) / ldexp(1, ex - 24);
  if (rel > worst_rel) worst_rel = rel, worst_x = x;
  if (ulp > worst_ulp) worst_ulp = ulp;
  if (rel <= MAX_REL) return 0;
  printf("x = %a: exp gave %a, exactly %a: relative error %.3g\n", (double)x, (double)y, e, rel);
  return 1;
}

int main(int argc, char **argv) {
  uint64_t stride = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
  if (stride == 0) stride = 1;
  float in[BATCH], out[BATCH];
  int n = 0;
  uint64_t count = 0;
  /* the infinities and a NaN, then every stride-th pattern of both signs */
  const float special[] = {INFINITY, -INFINITY, NAN, -NAN, 0.0f, -0.0f, FLT_MAX, -FLT_MAX, 88.72283935546875f,
                           88.7228317f, -103.972084f, -87.3365479f};
  for (size_t i = 0; i < sizeof special / sizeof *special; i++) {
    float y = special[i];
    vmath_exp_f32(&y, 1);
    if (check(special[i], y)) return 1;
  }
  for (uint64_t u = 0; u < 0x100000000ull; u += stride) {
    float x = float_of((uint32_t)u);
    if (isnan(x)) continue;
    in[n++] = x;
    if (n == BATCH || u + stride >= 0x100000000ull) {
      memcpy(out, in, sizeof in);
      vmath_exp_f32(out, n);
      for (int i = 0; i < n; i++)
        if (check(in[i], out[i])) return 1;
      count += (uint64_t)n;
      n = 0;
    }
  }
  printf("%llu floats: largest relative error %.3g (%.3f ulp) at x = %a\n", (unsigned long long)count,
         worst_rel, worst_ulp, (double)worst_x);
  return 0;
}
