#!/usr/bin/env bats
# examples_grad2.bats — the examples of second derivatives (doc/speed.md,
# "The examples"): a Hessian-vector product and Newton's
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

# ---- examples/newton_hvp.net --------------------------------------------------

@test "newton_hvp: the gradient and Hessian-vector product of Rosenbrock's function at (-1.2, 1), worked by hand" {
  run --separate-stderr "$NETRUN" run "$EX/newton_hvp.net"
  [ "$status" -eq 0 ]
  # f = (1 + 1.2)^2 + 100 (1 - 1.44)^2 = 4.84 + 19.36 = 24.2;
  # g = [-2 (2.2) - 400 (-1.2)(-0.44), 200 (-0.44)] = [-215.6, -88];
  # H = [[2 + 176 + 1152, 480], [480, 200]], H [1, -1] = [850, 280]
  awk 'function near(a, b) { d = a - b; return (d < 0 ? -d : d) < 1e-9 * (b < 0 ? -b : b) + 1e-12 }
       NR == 1 { ok = near($1, 24.2) }
       NR == 2 { gsub(/[][]/, ""); ok = ok && near($1, -215.6) && near($2, -88) }
       NR == 3 { gsub(/[][]/, ""); ok = ok && near($1, 850) && near($2, 280) }
       END { exit !ok }' <<< "$output"
  # another point and direction: at (2, -1), y - x^2 = -5: f = 1 + 2500,
  # g = [2 + 4000, -1000], H = [[2 + 2000 + 3200, -800], [-800, 200]], H [1, 2] = [3602, -400]
  run --separate-stderr "$NETRUN" run "$EX/newton_hvp.net" --set 'p0=[2.0, -1.0]' --set 'v=[1.0, 2.0]'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "2501.0" ]
  [ "${lines[1]}" = "[ 4002. -1000.]" ]
  [ "${lines[2]}" = "[3602. -400.]" ]
}

@test "newton_hvp: Newton's method with the Hessian built from HVPs lands on the minimum (1, 1)" {
  run --separate-stderr "$NETRUN" run "$EX/newton_hvp.net"
  [ "$status" -eq 0 ]
  # the first step by hand: det H = 1330 * 200 - 480^2 = 35600,
  # H^-1 g = [200 (-215.6) + 480 (88), 480 (215.6) - 1330 (88)] / 35600
  #        = [-0.0247191, -0.3806742], so p1 = [-1.1752809, 1.3806742]
  awk 'NR == 4 { gsub(/[][]/, ""); d1 = $2 + 1.1752808988764045; d2 = $3 - 1.3806741573033703
       exit !($1 == 1 && d1 < 1e-12 && d1 > -1e-12 && d2 < 1e-12 && d2 > -1e-12) }' <<< "$output"
  # f after each step, then |g|^2 at the end: f climbs at step 2 (pure Newton is no descent
  # method) and then converges quadratically, to (1, 1) at step 7
  [ "$(awk 'NR >= 4 { print $NF }' <<< "$output" | paste -sd' ')" = "4.731884325266608 1411.8451793094023 0.0559655168339573 0.31318907611638225 1.8527397735047917e-11 3.4326461875363225e-20 0.0 0.0" ]
  [ "${lines[-1]}" = "7 [1. 1.] 0.0" ]
  # gradcheck of f0 (24.2) against p0, first and second order, in f64
  # (logical_and, which reads only bools, no longer makes it f32)
  for order in 1 2; do
    run --separate-stderr "$NETRUN" gradcheck --order $order --loss f0 --wrt p0 "$EX/newton_hvp.net"
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    awk '$1 == "p0" && $2 == 2 && $4 < 1e-9 && $5 == "ok" { ok = 1 } END { exit !ok }' <<< "$output"
    [ "${lines[-1]}" = "all gradients match finite differences (rtol 0.001, eps 1e-06)" ]
  done
  # from (2, -1) it takes 5 steps
  run --separate-stderr "$NETRUN" run "$EX/newton_hvp.net" --set 'p0=[2.0, -1.0]'
  [ "${lines[-1]}" = "5 [1. 1.] 0.0" ]
}

# ---- examples/wgan_gp.net -----------------------------------------------------

# The penalty and the critic's estimate of W1, each averaged over the 4
# batches of the data, at the weights of checkpoint $1.
gp_w1() {
  "$NETRUN" predict "$EX/wgan_gp.net" --weights "$1" --data "$EX/data/linreg.csv" --batch 50 --output gp --output w1 |
    grep -v ' =$' | paste -sd' ' | awk '{ printf "%.4f %.4f\n", ($1 + $3 + $5 + $7) / 4, ($2 + $4 + $6 + $8) / 4 }'
}

@test "wgan_gp: netrun train drives the gradient penalty down and the critic's estimate to W1 = |t| = 1" {
  run --separate-stderr "$NETRUN" train "$EX/wgan_gp.net" --epochs 1 --save e1.ckpt
  [ "$status" -eq 0 ]
  run --separate-stderr "$NETRUN" train "$EX/wgan_gp.net" --save e100.ckpt --log log.jsonl
  [ "$status" -eq 0 ]
  losses=$(jq -r 'select(.epoch != null and .train_loss != null) | .train_loss' log.jsonl)
  [ "$(echo "$losses" | wc -l)" -eq 100 ]
  # the loss falls from 4.1 to about -1.07 (-W1 with a penalty near 0)
  echo "$losses" | awk 'NR == 1 { a = $1 } END { exit !(a > 3 && $1 < -0.95 && $1 > -1.2) }'
  read -r gp1 w1_1 <<< "$(gp_w1 e1.ckpt)"
  read -r gp100 w1_100 <<< "$(gp_w1 e100.ckpt)"
  echo "after 1 epoch: gp $gp1 w1 $w1_1; after 100: gp $gp100 w1 $w1_100"
  # the penalty: 0.27 after one epoch, 0.00372 at the end (|grad D| = 1 on the segments)
  awk -v a="$gp1" -v b="$gp100" 'BEGIN { exit !(a > 0.2 && b < 0.01 && b < a / 20) }'
  # the estimate of W1 = 1: 0.2 after one epoch, within 5% of 1 at the end
  awk -v a="$w1_1" -v b="$w1_100" 'BEGIN { exit !(a < 0.5 && b > 0.95 && b < 1.05) }'
}

@test "wgan_gp: the loss, which holds a gradient, passes gradcheck and gradcheck --order 2" {
  head -51 "$EX/data/linreg.csv" | cut -d, -f1,2 > x50.csv
  run "$NETRUN" gradcheck "$EX/wgan_gp.net" --feed x=x50.csv
  [ "$status" -eq 0 ]
  [ "$(awk 'NR > 1 && NF == 5 { print $1, $2, $5 }' <<< "$output" | paste -sd,)" = "D.c1.W 64 ok,D.c1.b 32 ok,D.c2.W 1024 ok,D.c2.b 32 ok,D.c3.W 32 ok,D.c3.b 1 ok" ]
  [ "${lines[-1]}" = "all gradients match finite differences (rtol 0.001, eps 1e-06)" ]
  run "$NETRUN" gradcheck --order 2 "$EX/wgan_gp.net" --feed x=x50.csv
  [ "$status" -eq 0 ]
  [ "$(grep -c ' ok$' <<< "$output")" -eq 6 ]
  [ "${lines[-1]}" = "all gradients match finite differences (rtol 0.001, eps 1e-06)" ]
}

# ---- examples/pinn.net --------------------------------------------------------

# The grid of 1001 points of [0, 1] with sin(pi x) beside each.
grid() {
  { echo x,u; awk 'BEGIN { for (i = 0; i <= 1000; i++) printf "%g,%.9f\n", i / 1000, sin(atan2(0, -1) * i / 1000) }'; } > grid.csv
}

@test "pinn: trained by netrun train (50 epochs here), u is sin(pi x) to 1e-3 on a grid of 1001 points" {
  run --separate-stderr "$NETRUN" train "$EX/pinn.net" --epochs 50 --save p.ckpt --log log.jsonl
  [ "$status" -eq 0 ]
  # the residual's mean square falls from 26 to below 0.01
  jq -r 'select(.epoch != null and .train_loss != null) | .train_loss' log.jsonl |
    awk 'NR == 1 { a = $1 } END { exit !(NR == 50 && a > 20 && $1 < 0.01) }'
  grid
  run --separate-stderr "$NETRUN" predict "$EX/pinn.net" --weights p.ckpt --data grid.csv --batch 1001 --output err
  [ "$status" -eq 0 ]
  echo "max |u - sin(pi x)| = $output"
  # measured 3.2e-4 (the full 200 epochs: 3.7e-5); an untrained N gives 0.5 or more
  awk -v e="$output" 'BEGIN { exit !(e > 0 && e <= 1e-3) }'
  # u'' as the script computes it (two grad calls) is -pi^2 sin(pi x) to
  # 1% of pi^2 inside [0.05, 0.95] (measured 0.068) and 3% at the ends (0.19)
  "$NETRUN" predict "$EX/pinn.net" --weights p.ckpt --data grid.csv --batch 1001 --output d2u --format csv -o d2u.csv
  paste -d, <(tail -n +2 grid.csv) <(tail -n +2 d2u.csv | cut -d, -f2-) |
    awk -F, '{ d = $3 + 9.8696044 * $2; if (d < 0) d = -d; if (d > m) m = d; if ($1 >= 0.05 && $1 <= 0.95 && d > mi) mi = d }
            END { print "max |residual|:", mi, "inside,", m, "overall"; exit !(mi < 0.1 && m < 0.3) }'
}

@test "pinn: the loss, which holds a second derivative, passes gradcheck and gradcheck --order 2" {
  head -9 "$EX/data/pinn.csv" | cut -d, -f1 > x.csv
  head -9 "$EX/data/pinn.csv" | cut -d, -f2 > u.csv
  run "$NETRUN" gradcheck "$EX/pinn.net" --feed x=x.csv --feed exact=u.csv
  [ "$status" -eq 0 ]
  [ "$(awk 'NR > 1 && NF == 5 { print $1, $2, $5 }' <<< "$output" | paste -sd,)" = "N.l1.W 32 ok,N.l1.b 32 ok,N.l2.W 1024 ok,N.l2.b 32 ok,N.l3.W 32 ok,N.l3.b 1 ok" ]
  run "$NETRUN" gradcheck --order 2 "$EX/pinn.net" --feed x=x.csv --feed exact=u.csv
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "all gradients match finite differences (rtol 0.001, eps 1e-06)" ]
}

# ---- what the examples needed of grad(...) ---------------------------------------

@test "grad(f(p), p): a name bound to a literal, passed to a function, is differentiated (it gave zeros)" {
  cat > lit.net <<'NET'
def rosen(p) {
  x = p[0]
  y = p[1]
  return (1.0 - x) ** 2 + 100.0 * (y - x * x) ** 2
}
def sq(a) {
  y = a * a
  return grad(y, a)
}
p = [-1.2, 1.0]
print(grad(rosen(p), p))
x = 2.0
print(sq(x))
n = 3
print(ones([n]) * n)
NET
  run --separate-stderr "$NETRUN" run lit.net
  [ "$status" -eq 0 ]
  # Rosenbrock's gradient at (-1.2, 1), in f32: [-215.6, -88]; d(a^2)/da at 2;
  # and a name bound to a constant is still a constant where one is needed
  [ "$output" = "[-215.60004   -88.000015]
4.0
[3. 3. 3.]" ]
}

@test "grad(...) of f64 values: Y and X may be f64 (it refused them)" {
  printf 'input a : f64[] = 3.0\ny = a * a * a\ng = grad(y, a)\nprint(g, grad(g, a))\n' > f64.net
  run --separate-stderr "$NETRUN" run f64.net
  [ "$status" -eq 0 ]
  [ "$output" = "27.0 18.0" ]
  printf 'input a : f64[] = 0.1\nprint(grad(a * a * a, a))\n' > f64b.net
  run --separate-stderr "$NETRUN" run f64b.net
  # 3 a^2 in f64: 0.030000000000000006 (0.1 is not exact), not f32's 0.030000001
  [ "$output" = "0.030000000000000006" ]
}
