#!/usr/bin/env bats
# f64.bats — the f64 dtype (netrun-lang(5), DATA TYPES): values and
# parameters, promotion, --dtype f64 on run, grad, gradcheck and train,
# checkpoints, and gradcheck's finite differences in f64 by default.
# Printed values are checked in tests/cases/f64/.

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  EX=$BATS_TEST_DIRNAME/../examples
  cd "$BATS_TEST_TMPDIR"
}

@test "the data cases" {
  "$BATS_TEST_DIRNAME/run-cases.sh" "$BATS_TEST_DIRNAME"/cases/f64/*.net
}

@test "an f64 loss: 17 digits in text and JSON, gradients f64" {
  cat > s.net <<'EOF'
param w : f64[2] = [1.0, 2.0]
loss = sum(w * w) / 3
EOF
  run "$NETRUN" grad s.net
  [ "$status" -eq 0 ]
  # 5/3 and 2w/3 as doubles (Python's repr of 5/3, 2/3, 4/3)
  [ "${lines[0]}" = "loss = 1.6666666666666667" ]
  [ "${lines[1]}" = "w@GRAD : f64[2] =" ]
  [ "${lines[2]}" = "[0.6666666666666666 1.3333333333333333]" ]
  run "$NETRUN" grad --format json s.net
  [ "$output" = '{"loss": 1.6666666666666667, "grads": {"w": {"shape": [2], "data": [0.66666666666666663, 1.3333333333333333]}}}' ]
}

@test "--dtype f64 runs the whole program in f64; without it, the same script is f32" {
  printf 'x = [1.0, 2.0]\nprint(x / 3)\n' > s.net
  run "$NETRUN" run s.net
  [ "$output" = "[0.33333334 0.6666667 ]" ]
  run "$NETRUN" run --dtype f64 s.net
  [ "$output" = "[0.3333333333333333 0.6666666666666666]" ]
  run "$NETRUN" run --dtype f16 s.net
  [ "$status" -eq 2 ]
  [[ "$output" == *"--dtype needs f32 or f64"* ]]
}

@test "gradcheck takes its finite differences in f64 by default, --dtype f32 keeps the f32 check" {
  # A loss of 1e4 with gradients of 1e-3: f32 differences drown in rounding
  # (its eps 1e-2 step moves the loss by 1e-5, below f32's resolution of 1e-3).
  cat > big.net <<'EOF'
param w : [3] = [0.5, -1.0, 2.0]
loss = 10000.0 + sum(w * [0.001, 0.002, -0.003]) + sum(w * w) * 0.0001
EOF
  run "$NETRUN" gradcheck big.net
  [ "$status" -eq 0 ]
  [[ "${lines[1]}" == "w "*" ok" ]]
  [ "${lines[2]}" = "all gradients match finite differences (rtol 0.001, eps 1e-06)" ]
  run "$NETRUN" gradcheck --dtype f32 big.net
  [ "$status" -eq 0 ]
  [[ "${lines[1]}" == *"cannot check 3 of 3: noise exceeds tolerance)" ]]
  [ "${lines[2]}" = "all gradients match finite differences within f32 noise (rtol 0.005, eps 0.01); 3 of 3 elements could not be checked: noise exceeds tolerance" ]
}

@test "gradcheck compares the f32 program's gradient with f64 differences and still fails a wrong one" {
  # A user op whose grad body is wrong (d/dx x^2 written as x): the f32
  # gradient is off by half, the f64 differences with almost no noise.
  cat > bad.net <<'EOF'
op sq(X) -> (Out) { Out = X * X } grad { X@GRAD = Out@GRAD * X }
param w : [2] = [1.5, -2.0]
loss = sum(sq(w))
EOF
  run "$NETRUN" gradcheck bad.net
  [ "$status" -eq 1 ]
  [[ "${lines[1]}" == "w "*"FAIL (element 1: analytic -2, numeric -4, noise "*"e-10)" ]]
  [[ "$output" != *"note:"* ]]
  # The f64 check of a correct f32 gradient: errors at f32 rounding, not 0.
  printf 'param w : [2] = [1.5, -2.0]\nloss = sum(tanh(w) * w)\n' > ok.net
  run "$NETRUN" gradcheck ok.net
  [ "$status" -eq 0 ]
  [ "${lines[2]}" = "all gradients match finite differences (rtol 0.001, eps 1e-06)" ]
}

@test "gradcheck --dtype f64: f64 gradients against f64 differences, to 1e-8" {
  printf 'param w : [3] = [0.5, -1.0, 2.0]\nx = [1.0, 2.0, 3.0]\nloss = sum(tanh(w * x) ** 2) / 3\n' > s.net
  run "$NETRUN" gradcheck --dtype f64 s.net
  [ "$status" -eq 0 ]
  err=$(echo "${lines[1]}" | awk '{ print $3 }')
  awk -v e="$err" 'BEGIN { exit !(e < 1e-8) }'
}

@test "an op without f64 kernels (a plugin's) refuses f64 values, with its name and where" {
  cp "$BATS_TEST_DIRNAME/../examples/plugins/xor_fused.net" "$BATS_TEST_DIRNAME/../examples/plugins/fused_dense_relu.so" .
  run "$NETRUN" --allow-load run xor_fused.net
  [ "$status" -eq 0 ]
  # run --dtype f64: the same program, refused at the plugin's op, nothing run
  run "$NETRUN" --allow-load run --dtype f64 xor_fused.net
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" == "xor_fused.net:16:5: error: fused_dense_relu: has no f64 kernel yet; cast its inputs to f32"* ]]
  # gradcheck takes the f32 check for it, and says so
  run "$NETRUN" --allow-load gradcheck xor_fused.net
  [ "$status" -eq 0 ]
  [[ "$output" == *"note: gradcheck in f32 (as --dtype f32): 'fused_dense_relu' has no f64 kernel yet"* ]]
  [[ "$output" == *"(rtol 0.005, eps 0.01)"* ]]
}

@test "conv2d, relu and max_pool2d in f64 agree with f32 to f32 precision, with more digits" {
  cat > c.net <<'EOF'
input x : f32[1, 1, 4, 4] = [[[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]]]
param k : [2, 1, 3, 3] = xavier()
y = max_pool2d(relu(conv2d(x, k, paddings=[1, 1])), ksize=[2, 2], strides=[2, 2])
print(sum(y) / 3)
EOF
  a=$("$NETRUN" run c.net)
  b=$("$NETRUN" run --dtype f64 c.net)
  [ ${#b} -gt ${#a} ]
  awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6 * (b < 0 ? -b : b)) }'
}

@test "train --dtype f64 on linreg: f64 parameters in the checkpoint, least squares reached" {
  cp -r "$EX"/linreg.net "$EX"/data .
  run "$NETRUN" train linreg.net --dtype f64 --save lr64.ckpt
  [ "$status" -eq 0 ]
  run "$NETRUN" checkpoint lr64.ckpt
  [[ "$output" == *"W "*"f64"* ]]
  # The least-squares fit of examples/data/linreg.csv is W = [3.0043, -2.0018]
  # (the script's comment); 30 epochs of sgd come within 0.01.
  run "$NETRUN" predict linreg.net --dtype f64 --weights lr64.ckpt --set 'x=[[0, 0]]' --set 'y=[[0]]' --output W
  [ "$status" -eq 0 ]
  w0=$(echo "$output" | tr -d '[]' | awk 'NR == 1 { print $1 }')
  w1=$(echo "$output" | tr -d '[]' | awk 'NR == 2 { print $1 }')
  awk -v a="$w0" -v b="$w1" 'BEGIN { exit !(a > 2.99 && a < 3.02 && b > -2.02 && b < -1.99) }'
  # an f64 checkpoint does not load into the f32 program
  run "$NETRUN" predict linreg.net --weights lr64.ckpt --set 'x=[[0, 0]]' --set 'y=[[0]]' --output W
  [ "$status" -ne 0 ]
  [[ "$output" == *"'W' is f64[2, 1] there, but f32[2, 1] here"* ]]
}

@test "an f32 checkpoint loads into the f64 program, exactly widened" {
  cp -r "$EX"/linreg.net "$EX"/data .
  "$NETRUN" train linreg.net --save lr32.ckpt > /dev/null
  run "$NETRUN" predict linreg.net --weights lr32.ckpt --set 'x=[[1, 0]]' --set 'y=[[0]]' --output W
  w32=$(echo "$output" | tr -d '[]' | awk 'NR == 1 { print $1 }')
  run "$NETRUN" predict linreg.net --dtype f64 --weights lr32.ckpt --set 'x=[[1, 0]]' --set 'y=[[0]]' --output W
  [ "$status" -eq 0 ]
  w64=$(echo "$output" | tr -d '[]' | awk 'NR == 1 { print $1 }')
  # the same number: the f64 shows the f32's exact value, to more digits
  awk -v a="$w32" -v b="$w64" 'BEGIN { exit !(a - b < 1e-7 && b - a < 1e-7) }'
  [ "${#w64}" -gt "${#w32}" ]
}

@test "f64 inputs take --set values and CSV files exactly" {
  cat > s.net <<'EOF'
input x : f64[B, 2]
print(x * 3)
EOF
  run "$NETRUN" run s.net --set 'x=[[0.1, 0.2]]'
  # 0.1 * 3 and 0.2 * 3 in double (Python: 0.30000000000000004, 0.6000000000000001)
  [ "$output" = "[[0.30000000000000004 0.6000000000000001 ]]" ]
  printf 'a,b\n0.1,0.2\n' > d.csv
  run "$NETRUN" run s.net --feed x=d.csv
  [ "$status" -eq 0 ]
  # a CSV file fed to an f64 input is read in double too
  [ "$output" = "[[0.30000000000000004 0.6000000000000001 ]]" ]
}

@test "fashion_mlp on 100 test images: the f64 check resolves every element the f32 check could not" {
  FASHION=${NETRUN_DATA:-/usr/share/datasets/fashion-mnist}
  gzip -dc "$FASHION/t10k-images-idx3-ubyte.gz" | tail -c +17 | head -c $((100 * 784)) |
    od -An -v -tu1 -w784 | awk '{ for (i = 1; i <= NF; i++) printf "%s%.6g", (i > 1 ? "," : ""), $i / 255; print "" }' > x.csv
  gzip -dc "$FASHION/t10k-labels-idx1-ubyte.gz" | tail -c +9 | head -c 100 | od -An -v -tu1 -w1 | awk '{ print $1 }' > y.csv
  run "$NETRUN" gradcheck "$EX/fashion_mlp.net" --samples 20 --feed x=x.csv --feed y=y.csv
  [ "$status" -eq 0 ]
  # f32 differences leave most of W1's 20 elements unchecked (trust_gradcheck.bats);
  # in f64 all 110 are "ok", the f32 gradient within 1e-5 of them
  [ "$(awk 'NR > 1 && NR < 8 && $5 == "ok" && $4 < 1e-5 { n++ } END { print n }' <<< "$output")" = 6 ]
  [ "${lines[-1]}" = "all gradients match finite differences (rtol 0.001, eps 1e-06)" ]
}

@test "--dtype f64: every op's and script's gradient matches f64 differences; static = tape to the last bit" {
  G=$BATS_TEST_DIRNAME/grad
  failed=""
  for f in "$G"/ops/*.net "$G"/*.net; do
    "$NETRUN" gradcheck --dtype f64 "$f" > out.txt 2>&1 || { failed="$failed $(basename "$f")"; cat out.txt; }
  done
  [ -z "$failed" ] || { echo "gradcheck --dtype f64 failed:$failed"; return 1; }
  # loops included (while_grad accumulates its turns in f64)
  for f in "$G"/ops/while.net "$G"/while_nested.net "$G"/while_used_after.net "$G"/mlp_batch.net "$G"/ops/conv2d_all.net; do
    "$NETRUN" grad --dtype f64 --format json "$f" > static.json
    "$NETRUN" grad --dtype f64 --tape --format json "$f" > tape.json
    cmp static.json tape.json
    grep -q '"grads": {"' static.json
  done
}
