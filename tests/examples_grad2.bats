#!/usr/bin/env bats
# examples_grad2.bats — the examples of second derivatives (README,
# "Gradients inside a script"): a Hessian-vector product and Newton's
# method (examples/newton_hvp.net), a gradient penalty trained by `netrun
# train` (examples/wgan_gp.net), a physics-informed network
# (examples/pinn.net), each checked against numbers worked by hand; and
# the REPL's :gradcheck, whose differences are taken in f64.

bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$BATS_TEST_DIRNAME/..
  EX=$ROOT/examples
  cd "$BATS_TEST_TMPDIR"
}

# ---- the REPL's :gradcheck in f64 ---------------------------------------------

# An op whose grad body is 0.2% off: 2.004 x for the derivative of x^2.
bad_op() {
  printf 'op bad(x) -> (y) {\n  y = x * x\n} grad {\n  x@GRAD = y@GRAD * 2.004 * x\n}\n'
  printf 'param W : [3] = [0.5, -1.0, 2.0]\nloss = sum(bad(W))\n:gradcheck loss\nW\n'
}

@test ":gradcheck takes its differences in f64: a gradient 0.2% off fails (f32 differences let it pass)" {
  bad_op > b.in
  run --separate-stderr "$NETRUN" repl < b.in
  [ "$status" -eq 1 ]
  # numeric 4 = d(x^2)/dx at 2 to f64 precision: the noise is 6e-10, not
  # f32's 4e-05, so the tolerance is rtol 1e-3 and 2e-3 is a failure
  [ "$output" = "variable           elements  max abs err  max rel err  verdict
W                         3    8.000e-03    2.000e-03  FAIL (element 2: analytic 4.008, numeric 4, noise 6.1e-10)
[ 0.5 -1.   2. ]" ]
  # f32 differences (as before, and as --dtype f32 asks) cannot see it
  run --separate-stderr "$NETRUN" repl --dtype f32 < b.in
  [ "$status" -eq 0 ]
  [ "${lines[1]}" = "W                         3    8.000e-03    2.000e-03  ok" ]
  [ "${lines[2]}" = "all gradients match finite differences (rtol 0.005, eps 0.01)" ]
}

@test ":gradcheck in f64 passes a right gradient to 1e-6 and leaves the session's values as they were" {
  run --separate-stderr "$NETRUN" repl <<'IN'
param W : [2, 2] = [[0.5, -0.5], [0.25, 1.0]]
x = [[1.0, 2.0]]
h = tanh(x @ W)
loss = sum(h * h * h)
:gradcheck loss
W
IN
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "variable           elements  max abs err  max rel err  verdict" ]
  # the analytic gradient is f32: agreement to f32 rounding, far below f32 differences' 1e-3
  awk 'NR == 2 { exit !($1 == "W" && $2 == 4 && $3 < 1e-6 && $4 < 1e-6 && $5 == "ok") }' <<< "$output"
  [ "${lines[2]}" = "all gradients match finite differences (rtol 0.001, eps 1e-06)" ]
  [ "${lines[3]}" = "[[ 0.5  -0.5 ]" ]
  [ "${lines[4]}" = " [ 0.25  1.  ]]" ]
}
