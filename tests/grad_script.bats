#!/usr/bin/env bats
# grad_script.bats — grad(Y, X...) inside scripts (netrun-lang(5) GRADIENTS
# IN SCRIPTS): a gradient penalty trained by `netrun train`, the tape against
# the static program, an op with no gradient inside a gradient, the REPL and
# `grad` still a keyword of `op ... grad { }`.  The golden dumps, values and
# error texts are cases: tests/cases/gradscript.

bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$BATS_TEST_DIRNAME/..
  cd "$BATS_TEST_TMPDIR"
}

# A regression with a gradient penalty: loss = fit + 0.1 |d fit / dW|^2,
# fit the mean squared error of sin(x W) (a matmul by ones sums it: the ops
# of the inner gradient are all composite).
penalty() {
  cat > penalty.net <<EOF
input x : f32[B, 2]
input y : f32[B, 1]
param W : [2, 1] = [[0.5], [0.5]]
pred = sin(x @ W)
fit = transpose(ones_like(pred), perm=[1, 0]) @ mse(pred, y) * 0.05
gW = grad(fit, W)
loss = fit + 0.1 * sum(gW * gW)
train {
  data = "$ROOT/examples/data/linreg.csv"
  optimizer = sgd
  lr = 0.05
  batch = 20
  epochs = 4
}
EOF
}

@test "a loss holding a gradient penalty trains: netrun train, the loss falls every epoch" {
  penalty
  run --separate-stderr "$NETRUN" train penalty.net --log log.jsonl
  [ "$status" -eq 0 ]
  losses=$(jq -r 'select(.epoch != null and .train_loss != null) | .train_loss' log.jsonl)
  [ "$(echo "$losses" | wc -l)" -eq 4 ]
  echo "$losses" | awk 'NR > 1 && $1 >= prev { bad = 1 } { prev = $1 } END { exit bad }'
  # and by a third at least (3.22 to 1.93: sin(x W) cannot fit y exactly)
  echo "$losses" | awk 'NR == 1 { a = $1 } END { exit !($1 <= 0.67 * a) }'
}

@test "the gradient-penalty loss passes gradcheck, and its tape gives the static gradient" {
  penalty
  set_x='x=[[0.5, -1], [1, 2], [-2, 0.5], [0.25, 0.75]]' set_y='y=[[1], [2], [0], [-1]]'
  run "$NETRUN" gradcheck penalty.net --set "$set_x" --set "$set_y"
  [ "$status" -eq 0 ]
  [[ "$output" == *"all gradients match finite differences"* ]]
  "$NETRUN" grad --format json penalty.net --set "$set_x" --set "$set_y" > static.json
  "$NETRUN" grad --tape --format json penalty.net --set "$set_x" --set "$set_y" > tape.json
  [ "$(jq -c '.grads.W.data' static.json)" = "$(jq -c '.grads.W.data' tape.json)" ]
  [ "$(jq -r '.loss' static.json)" = "$(jq -r '.loss' tape.json)" ]
}

@test "the gradient-penalty step: dump --backward differentiates the inner gradient's ops" {
  penalty
  run "$NETRUN" dump --backward penalty.net
  [ "$status" -eq 0 ]
  # the inner gradient, where the call stands, before the loss ...
  inner=$(echo "$output" | grep -n '{Out=\[W@GRAD@L1\]}' | cut -d: -f1)
  loss=$(echo "$output" | grep -n '{Out=\[loss\]}' | cut -d: -f1)
  [ -n "$inner" ] && [ "$inner" -lt "$loss" ]
  # ... and the outer backward, which gives it a gradient of its own
  echo "$output" | grep -q '{Out=\[W@GRAD@L1@GRAD\]}'
  echo "$output" | grep -q '{Out=\[W@GRAD\]} = matmul'
}

@test "an op with no gradient inside a gradient: differentiating it again names it" {
  cat > fused.net <<'EOF'
param W : [2, 3] = [[1.0, 2.0, -1.0], [0.5, -1.0, 1.0]]
x = [[1.0, -2.0]]
b = [0.5, 0.0, -0.25]
h = fused_dense_relu(x, W, b)
y = h @ [[1.0], [1.0], [1.0]]
g = grad(y, W)
print(g)
loss = sum(g * g)
EOF
  # the first gradient is fine: d(sum of relu(xW + b))/dW = x' [1 1 0]
  # (xW + b = [0.5, 4, -3.25])
  run --separate-stderr "$NETRUN" --plugin "$ROOT/examples/plugins/fused_dense_relu.so" run fused.net
  [ "$status" -eq 0 ]
  [ "$output" = "[[ 1.  1.  0.]
 [-2. -2.  0.]]" ]
  run --separate-stderr "$NETRUN" --plugin "$ROOT/examples/plugins/fused_dense_relu.so" grad fused.net
  [ "$status" -eq 1 ]
  [ "$stderr" = "fused.net:4:5: error: fused_dense_relu_grad, in the gradient of this fused_dense_relu, has no gradient: the gradient cannot be differentiated again
h = fused_dense_relu(x, W, b)
    ^~~~~~~~~~~~~~~~" ]
}

@test "the REPL: a grad(...) entry, and :grad of a loss holding one" {
  run --separate-stderr "$NETRUN" repl <<'IN'
param w : [] = 2.0
y = w * w * w
g = grad(y, w)
g
grad(g, w)
loss = g * g
:grad loss
IN
  [ "$status" -eq 0 ]
  [ "$output" = "12.0
12.0
loss = 144.0
w@GRAD : f32[] =
288.0" ]
}

@test "grad stays a keyword: an op's grad { } body and grad(...) in one script" {
  cat > both.net <<'EOF'
op twice(x) -> (y) {
  y = x * 2.0
} grad {
  x@GRAD = y@GRAD * 2.0
}
param w : [] = 3.0
z = twice(w) * w
g = grad(z, w)
print(z, g)
EOF
  run --separate-stderr "$NETRUN" run both.net
  [ "$status" -eq 0 ]
  # z = 2 w^2 = 18, dz/dw = 4 w = 12
  [ "$output" = "18.0 12.0" ]
}

@test "a backward appended after grad(...) calls takes the next level: no name is reused" {
  printf 'param w : [] = 2.0\ny = w * w\ng = grad(y, w)\nh = grad(g * w, w)\nloss = h * g\n' > lv.net
  run "$NETRUN" dump --backward lv.net
  [ "$status" -eq 0 ]
  echo "$output" | grep -q '{Out=\[w@GRAD@L1\]}'
  echo "$output" | grep -q '{Out=\[w@GRAD@L2\]}'
  echo "$output" | grep -q '{Out=\[w@GRAD\]}'
  # every variable is declared once
  [ -z "$(echo "$output" | awk '$1 == "var" { print $2 }' | sort | uniq -d)" ]
  # loss = h g = (4 w) (2 w) = 8 w^2: 32, dloss/dw = 16 w = 32
  run "$NETRUN" grad lv.net
  [ "$output" = "loss = 32.0
w@GRAD : f32[] =
32.0" ]
}
