#!/usr/bin/env bats
# trust_gradcheck.bats — gradcheck does not cry wolf: an element whose
# error is within the f32 noise of its finite difference passes as
# "ok (within f32 noise)", one the noise keeps from being checked to the
# tolerance is counted as such ("cannot check"), and a gradient 1% wrong
# still fails (a user op's grad body, a plugin's grad maker, a large loss).
# The realistic scripts are data: tests/grad/realistic/*.net.

bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  FASHION=${NETRUN_DATA:-/usr/share/datasets/fashion-mnist}
  cd "$BATS_TEST_TMPDIR"
}

# fashion N: the first N test images of Fashion-MNIST as x.csv (784 values
# in [0, 1] a row) and their labels as y.csv.
fashion() {
  gzip -dc "$FASHION/t10k-images-idx3-ubyte.gz" | tail -c +17 | head -c $(($1 * 784)) |
    od -An -v -tu1 -w784 | awk '{ for (i = 1; i <= NF; i++) printf "%s%.6g", (i > 1 ? "," : ""), $i / 255; print "" }' > x.csv
  gzip -dc "$FASHION/t10k-labels-idx1-ubyte.gz" | tail -c +9 | head -c "$1" | od -An -v -tu1 -w1 | awk '{ print $1 }' > y.csv
  [ "$(wc -l < x.csv)" -eq "$1" ] && [ "$(wc -l < y.csv)" -eq "$1" ]
}

# The verdicts of a gradcheck table (everything after the four columns).
verdicts() {
  awk 'NR > 1 && NF >= 5 && $2 ~ /^[0-9]+$/ { $1 = $2 = $3 = $4 = ""; sub(/^ +/, ""); print }' <<< "$1"
}

@test "fashion_mlp on 100 test images: the correct gradients pass (the issue's command)" {
  fashion 100
  run "$NETRUN" gradcheck --dtype f32 "$ROOT/examples/fashion_mlp.net" --samples 20 --feed x=x.csv --feed y=y.csv
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  [ "$(awk 'NR > 1 && NR < 8 { print $1 }' <<< "$output" | paste -sd,)" = "dense.W,dense.b,dense_1.W,dense_1.b,out.W,out.b" ]
  [[ "$output" != *FAIL* ]]
  [[ "${lines[-1]}" == "all gradients match finite differences within f32 noise (rtol 0.005, eps 0.01); "*" of 110 elements could not be checked: noise exceeds tolerance" ]]
}

@test "realistic scripts that f32 rounding alone made fail pass, statically and on the tape" {
  # attention, an LSTM, a dilated convolution, dropout, sigmoid
  # cross-entropy at ±50: each failed before, with correct gradients.
  n=0
  for f in "$BATS_TEST_DIRNAME"/grad/realistic/*.net; do
    for t in "" --tape; do
      run "$NETRUN" gradcheck $t "$f"
      [ "$status" -eq 0 ] || { echo "$(basename "$f") $t:"; echo "$output"; return 1; }
      [[ "${lines[-1]}" == "all gradients match finite differences"* ]]
    done
    n=$((n + 1))
  done
  [ "$n" -ge 5 ]
}

# The feed an example needs for a gradcheck on a small batch; an example
# not named here must run on its own defaults.
example_args() {
  case $1 in
  fashion_mlp.net | fashion_mlp_best.net) echo "--feed x=x.csv --feed y=y.csv --samples 8" ;;
  fashion_cnn.net | fashion_folder.net) echo "--feed x=x.csv --feed y=y.csv --samples 4" ;;
  adding_rnn.net | adding_lstm.net) echo "--feed xs=xs.csv --feed y=ya.csv" ;;
  lookup_transformer.net) echo "--feed t=lt.csv --feed y=ly8.csv" ;;
  char_lm.net) echo "--feed x=cx.csv --feed y=cy.csv --samples 4" ;;
  fashion_resnet.net) echo "--feed x=x.csv --feed y=y.csv --samples 4" ;;
  linreg.net) echo "--feed x=lx.csv --feed y=ly.csv" ;;
  newton_hvp.net) echo "--loss f0 --wrt p0" ;;
  wgan_gp.net) echo "--feed x=wx.csv" ;;
  pinn.net) echo "--feed x=px.csv --feed exact=pu.csv" ;;
  blobs.net) echo "--feed x=bx.csv --feed y=by.csv" ;;
  esac
}

@test "gradcheck passes on every example, with a small fed batch where it needs data" {
  fashion 4
  sed -n 2,9p "$ROOT/examples/data/adding_test.csv" | cut -d, -f1-20 > xs.csv
  sed -n 2,9p "$ROOT/examples/data/adding_test.csv" | cut -d, -f21 > ya.csv
  sed -n 2,9p "$ROOT/examples/data/linreg.csv" | cut -d, -f1-2 > lx.csv
  sed -n 2,9p "$ROOT/examples/data/linreg.csv" | cut -d, -f3 > ly.csv
  sed -n 2,9p "$ROOT/examples/data/lookup_test.csv" | cut -d, -f1-8 > lt.csv
  sed -n 2,9p "$ROOT/examples/data/lookup_test.csv" | cut -d, -f9 > ly8.csv
  sed -n 2,51p "$ROOT/examples/data/linreg.csv" | cut -d, -f1-2 > wx.csv
  sed -n 2,9p "$ROOT/examples/data/pinn.csv" | cut -d, -f1 > px.csv
  sed -n 2,9p "$ROOT/examples/data/pinn.csv" | cut -d, -f2 > pu.csv
  sed -n 2,9p "$ROOT/examples/data/blobs_train.csv" | cut -d, -f2-5 > bx.csv
  sed -n 2,9p "$ROOT/examples/data/blobs_train.csv" | cut -d, -f6 > by.csv
  # char_lm: two windows of 32 bytes of a word list, and the bytes after them.
  b=($(printf 'abbey\nabbot\nabbots\nabbreviate\nabdomen\nable\nabout\nabove\naccept\naccess\n' | od -An -tu1 -v))
  row() { local IFS=,; echo "${b[*]:$1:32}"; }
  { row 0; row 33; } > cx.csv
  { row 1; row 34; } > cy.csv
  n=0
  for f in "$ROOT"/examples/*.net "$ROOT"/examples/plugins/*.net; do
    run "$NETRUN" --allow-load gradcheck $(example_args "$(basename "$f")") "$f"
    [ "$status" -eq 0 ] || { echo "$(basename "$f"):"; echo "$output"; return 1; }
    [[ "$output" != *FAIL* ]] || { echo "$(basename "$f"):"; echo "$output"; return 1; }
    # every example's differences are taken in f64 (no op falls back to f32),
    # but a plugin's: its ops are f32-only (netrun-ops(7), DATA TYPES)
    case $f in
    */plugins/*) [[ "$output" == *'gradcheck in f32'* ]] || { echo "$(basename "$f") does not say it falls back to f32:"; echo "$output"; return 1; } ;;
    *) [[ "$output" != *'gradcheck in f32'* ]] || { echo "$(basename "$f") falls back to f32:"; echo "$output"; return 1; } ;;
    esac
    n=$((n + 1))
  done
  [ "$n" -ge 8 ]
}

# A user op whose grad body is 1% off: 3.03 x^2 for the derivative of x^3.
cube_op() {
  cat <<'EOF'
op cube(x) -> (y) {
  y = x * x * x
} grad {
  x@GRAD = y@GRAD * 3.03 * x * x
}
EOF
}

@test "a user op's gradient 1% off fails, on a small loss and on a large one, statically and on the tape" {
  { cube_op; printf 'param w : [4] = [0.5, -1.0, 1.5, 2.0]\nloss = sum(cube(w))\n'; } > small.net
  run "$NETRUN" gradcheck --dtype f32 small.net
  [ "$status" -eq 1 ]
  [ "${lines[1]}" = "w                         4    1.198e-01    1.000e-02  FAIL (element 2: analytic 6.8175, numeric 6.75, noise 0.00065)" ]
  [ "${#lines[@]}" -eq 2 ]
  run "$NETRUN" gradcheck --dtype f32 --tape small.net
  [ "$status" -eq 1 ]
  [[ "${lines[1]}" == "w "*" FAIL (element 2: analytic 6.8175, numeric 6.75, noise "*")" ]]
  # A loss of about 10^5, a sum of 4096 terms of both signs.
  { cube_op
    printf 'input r : f32[64, 64] = uniform_random([64, 64], min=-1.0, max=1.0)\n'
    printf 'param w : [64, 64] = uniform(-2.0, 2.0)\nloss = 1000.0 * sum(cube(w) * r)\n'; } > large.net
  for t in "" --tape; do
    run "$NETRUN" gradcheck --dtype f32 $t --samples 64 large.net
    [ "$status" -eq 1 ]
    [[ "${lines[1]}" =~ ^w\ +64\ .*\ FAIL\ \(element\ [0-9]+:\ analytic ]] || { echo "$output"; return 1; }
  done
}

@test "a plugin's gradient 1% off fails" {
  # triple(X) = 3 X, its composite grad maker scaling by 3.03.
  ${CC:-cc} -std=c11 -Wall -Wextra -Werror -fPIC -shared -I"$ROOT/include" -DGRAD_SCALE=3.03 -o wrong.so \
    "$ROOT/tests/plugins/triple.c"
  printf 'load "wrong.so"\nparam w : [3] = [1.0, -2.0, 0.5]\nloss = sum(triple(w) * triple(w))\n' > wrong.net
  run "$NETRUN" --allow-load gradcheck --dtype f32 wrong.net
  [ "$status" -eq 1 ]
  [[ "${lines[1]}" =~ ^w\ +3\ .*\ FAIL\ \(element\ [0-9]:\ analytic ]] || { echo "$output"; return 1; }
}

@test "noise that hides a 1% error is said, not passed as ok" {
  # A loss of about 5 10^6 of which w's part is 0.125: its rounding alone
  # moves the central difference far more than 1% of 3 w^2 = 0.75.
  { cube_op
    printf 'input big : f32[10000] = uniform_random([10000], min=0.0, max=1000.0)\n'
    printf 'param w : [] = 0.5\nloss = sum(big) + cube(w)\n'; } > noisy.net
  run "$NETRUN" gradcheck --dtype f32 noisy.net
  [ "$status" -eq 0 ]
  [[ "${lines[1]}" =~ ^w\ +1\ .*\ ok\ \(within\ f32\ noise\;\ cannot\ check\ 1\ of\ 1:\ noise\ exceeds\ tolerance\)$ ]]
  [ "${lines[2]}" = "all gradients match finite differences within f32 noise (rtol 0.005, eps 0.01); 1 of 1 elements could not be checked: noise exceeds tolerance" ]
}

@test "kinks: one within the step, or at the point, cannot be checked" {
  # abs at 0.001 with a step of 0.0078: the central difference is 0.128,
  # not abs'(0.001) = 1, and the differences at h/2, h and 2h disagree.
  printf 'param w : [2] = [0.001, 1.0]\nloss = sum(abs(w))\n' > abs.net
  run "$NETRUN" gradcheck --dtype f32 abs.net
  [ "$status" -eq 0 ]
  [[ "${lines[1]}" == "w "*" ok (within f32 noise; cannot check 1 of 2: noise exceeds tolerance)" ]]
  # relu at 0: every central difference says 1.5, the mean of the slopes
  # either side; the gradient says 0, the one on the left.
  printf 'param w : [] = 0.0\nloss = relu(w) * 3.0\n' > relu.net
  run "$NETRUN" gradcheck --dtype f32 relu.net
  [ "$status" -eq 0 ]
  [ "${lines[1]}" = "w                         1    1.500e+00    1.000e+00  ok (within f32 noise; cannot check 1 of 1: noise exceeds tolerance)" ]
}

@test "steps are powers of two: exact differences of a quadratic" {
  printf 'param w : [] = 2.0\nparam b : [] = 0.5\nx = 3.0\ny = w * x + b\nloss = y * y\n' > model.net
  run "$NETRUN" gradcheck --dtype f32 model.net
  [ "$status" -eq 0 ]
  [ "$output" = "variable           elements  max abs err  max rel err  verdict
w                         1    0.000e+00    0.000e+00  ok
b                         1    0.000e+00    0.000e+00  ok
all gradients match finite differences (rtol 0.005, eps 0.01)" ]
}

@test "--atol: the absolute tolerance, shown when given; a usage error when negative" {
  # A gradient 1e-4 too large where it should be 0.
  printf 'op sq(x) -> (y) {\n  y = x * x\n} grad {\n  x@GRAD = y@GRAD * 2.0 * x + 0.0001\n}\n' > off.net
  printf 'param w : [2] = [0.0, 1.0]\nloss = sum(sq(w))\n' >> off.net
  run "$NETRUN" gradcheck --dtype f32 off.net
  [ "$status" -eq 1 ]
  [[ "${lines[1]}" == "w "*" FAIL (element 0: analytic 0.0001, numeric 0, noise "*")" ]]
  run "$NETRUN" gradcheck --dtype f32 --atol 1e-3 off.net
  [ "$status" -eq 0 ]
  [ "${lines[1]}" = "w                         2    1.000e-04    1.000e-01  ok" ]
  [ "${lines[2]}" = "all gradients match finite differences (rtol 0.005, atol 0.001, eps 0.01)" ]
  run "$NETRUN" gradcheck --dtype f32 --atol=0 off.net
  [ "$status" -eq 1 ]
  for v in -1 nan inf x ""; do
    run "$NETRUN" gradcheck --dtype f32 --atol "$v" off.net
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "netrun: --atol needs a finite, non-negative number, not '$v'" ]
  done
  run "$NETRUN" gradcheck --help
  [[ "$output" == *"  --atol A           the absolute tolerance (default 1e-5)"* ]]
}

@test ":gradcheck in a session judges as gradcheck --tape does" {
  { cube_op
    printf 'input big : f32[10000] = uniform_random([10000], min=0.0, max=1000.0)\n'
    printf 'param w : [3] = [0.5, -1.0, 2.0]\nparam v : [2] = [0.25, 1.5]\n'
    printf 'loss = sum(big) * 0.0001 + sum(cube(w)) + sum(v * v * v)\n'; } > s.net
  cp s.net s.in
  printf ':gradcheck loss\n' >> s.in
  verb=$("$NETRUN" gradcheck --dtype f32 --tape s.net) && status=0 || status=$?
  [ "$status" -eq 1 ]
  run --separate-stderr "$NETRUN" repl --dtype f32 < s.in
  [ "$status" -eq 1 ]
  [ "$output" = "$verb" ]
  [ "$(verdicts "$output")" = "FAIL (element 2: analytic 12.12, numeric 12, noise 0.0059)
ok (within f32 noise; cannot check 1 of 2: noise exceeds tolerance)" ]
  # by default both take their differences in f64, where v is checked too
  verb=$("$NETRUN" gradcheck --tape s.net) && status=0 || status=$?
  [ "$status" -eq 1 ]
  run --separate-stderr "$NETRUN" repl < s.in
  [ "$status" -eq 1 ]
  [ "$output" = "$verb" ]
  [ "$(verdicts "$output")" = "FAIL (element 2: analytic 12.12, numeric 12, noise 6e-08)
ok" ]
}

@test "--wrt a value an op makes is perturbed after that op, not made again (it read numeric 0 and failed)" {
  printf 'param W : [2, 2] = [[0.5, -0.5], [0.25, 1.0]]\nx = [[1.0, 2.0]]\nh = tanh(x @ W)\nloss = sum(h * h)\n' > wrt.net
  for t in "" --tape; do
    run "$NETRUN" gradcheck $t --wrt h wrt.net
    [ "$status" -eq 0 ] || { echo "$output"; false; }
    [[ "${lines[1]}" =~ ^"h                         2 ".*"  ok"$ ]]
  done
}

@test "every forward pass takes the random draws the analytic gradient saw" {
  printf 'param w : [4] = [0.5, -1.0, 2.0, 0.25]\nn = uniform_random([4], min=0.5, max=1.5)\nloss = sum(w * w * n)\n' > rnd.net
  run "$NETRUN" gradcheck --dtype f32 rnd.net
  [ "$status" -eq 0 ]
  [[ "${lines[1]}" =~ ^"w                         4 ".*"  ok"$ ]] || { echo "$output"; false; }
  [ "${lines[2]}" = "all gradients match finite differences (rtol 0.005, eps 0.01)" ]
}
