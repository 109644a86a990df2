#!/usr/bin/env bats
# vmath.bats — src/ops/vmath.c's vectorized exp, which softmax,
# log_softmax, softmax_cross_entropy and attention use in f32: the function
# over the float range against exp in double (build/vmath_check,
# tests/tools/vmath_check.c), and the ops' f32 results against the same
# ops in f64 (libm's exp).
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  root=$BATS_TEST_DIRNAME/..
  CHECK=$root/build/vmath_check
  make -C "$root" -s build/vmath_check >&2   # (again if vmath.c changed)
  cd "$BATS_TEST_TMPDIR"
}

@test "vmath's exp: every 997th float within 1 ulp of exp in double, underflow, overflow and NaN as expf, lanes as the scalar" {
  run "$CHECK" 997
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^4291000\ floats:\ largest\ relative\ error\ ([0-9.e-]+)\ \(([0-9.]+)\ ulp\) ]]
  # every float gives at most 0.99 ulp (doc/design.md); this sample under 1
  awk -v u="${BASH_REMATCH[2]}" 'BEGIN { exit !(u < 1) }'
}

@test "softmax, log_softmax, softmax_cross_entropy and their gradients in f32 within 3e-7 of f64 (1e-6 where a sum cancels)" {
  # inputs with 8 bits after the point, so x - max is exact in f32 and the
  # differences are exp's, the sums' and the last rounding's
  cat > r.net <<'EOF2'
def rel(a, b, floor) { return max(abs(cast(a, dtype=f64) - b) / maximum(abs(b), floor)) }
u = uniform_random([64, 300], min=-40.0, max=40.0)
x = cast(cast(u * 256.0, dtype=i64), dtype=f32) / 256.0
xd = cast(x, dtype=f64)
lab = cast(arange(stop=64) * 4, dtype=i64)
w = cast(cast(uniform_random([64, 300], min=-8.0, max=8.0), dtype=i64), dtype=f32)
wd = cast(w, dtype=f64)
print(rel(softmax(x), softmax(xd), 1e-30))
print(rel(softmax(x, axis=0), softmax(xd, axis=0), 1e-30))
print(rel(log_softmax(x), log_softmax(xd), 1.0))
print(rel(softmax_cross_entropy(x, lab), softmax_cross_entropy(xd, lab), 1.0))
print(rel(grad(sum(softmax_cross_entropy(x, lab)), x), grad(sum(softmax_cross_entropy(xd, lab)), xd), 1e-30))
print(rel(grad(sum(softmax(x) * w), x), grad(sum(softmax(xd) * wd), xd), 1.0))
print(rel(grad(sum(softmax(x, axis=0) * w), x), grad(sum(softmax(xd, axis=0) * wd), xd), 1.0))
print(rel(grad(sum(log_softmax(x) * w), x), grad(sum(log_softmax(xd) * wd), xd), 1.0))
EOF2
  run "$NETRUN" run r.net
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 8 ]
  # log_softmax's gradient w - exp(y) sum(w) cancels: 1e-6 (expf gave 8.5e-7)
  for i in 0 1 2 3 4 5 6 7; do
    awk -v d="${lines[$i]}" -v b="$([ "$i" -eq 7 ] && echo 1e-6 || echo 3e-7)" 'BEGIN { exit !(d > 0 && d <= b) }' ||
      { echo "line $i: f32 and f64 differ by ${lines[$i]}"; return 1; }
  done
}
