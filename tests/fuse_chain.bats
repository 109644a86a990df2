#!/usr/bin/env bats
# fuse_chain.bats — chains of elementwise ops as one fused_elementwise op
# (src/ir/rewrite.c, fused_chain; the kernel in src/ops/elementwise.c):
# which ops a chain takes (dump --fused), the values it still makes, and
# the bits: each script's gradients with the chains fused equal those of
# --no-fuse exactly (JSON's 9 digits round-trip an f32), on 1 and 2
# threads (64 x 256 elements: the kernel runs in slices over the threads).
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  cd "$BATS_TEST_TMPDIR"
}

# script NAME BODY: NAME.net with inputs x, y of [64, 256], a bias b of
# [256] and a scalar parameter s, then BODY.
script() {
  {
    echo 'input x : f32[64, 256] = uniform_random([64, 256], min=-2.0, max=2.0)'
    echo 'param y : [64, 256] = uniform(0.5, 1.5)'
    echo 'param b : [256] = uniform(-0.5, 0.5)'
    echo 'param s : [] = 0.7'
    printf '%s\n' "$2"
  } > "$1.net"
}

# same_bits NAME [OPTIONS]: the gradients of NAME.net fused (1 and 2
# threads) are those of --no-fuse, bit for bit.
same_bits() {
  local f=$1
  shift
  OMP_NUM_THREADS=1 "$NETRUN" grad --format json "$@" --no-fuse "$f.net" > "$f.plain.json"
  OMP_NUM_THREADS=1 "$NETRUN" grad --format json "$@" "$f.net" > "$f.fused1.json"
  OMP_NUM_THREADS=2 "$NETRUN" grad --format json "$@" "$f.net" > "$f.fused2.json"
  cmp "$f.plain.json" "$f.fused1.json"
  cmp "$f.plain.json" "$f.fused2.json"
}

# fused_ops NAME [OPTIONS]: the ops= lists of NAME.net's fused_elementwise ops, one a line.
fused_ops() {
  local f=$1
  shift
  "$NETRUN" dump --backward --fused "$@" "$f.net" | grep -o 'fused_elementwise(.*' | grep -o 'ops=\[[^]]*\]'
}

@test "binary steps (add sub mul div maximum minimum pow), with a bias and a scalar operand" {
  script bin 'loss = sum(maximum(minimum((x * y + b) / (y - s), x), y * 0.1) ** 2.0)'
  run fused_ops bin
  [ "$status" -eq 0 ]
  # y - s and y * 0.1 come before the chain reads them: inputs, not steps
  [ "${lines[0]}" = 'ops=["mul", "add", "div", "minimum", "maximum", "pow"]' ]
  same_bits bin
}

@test "unary steps: neg abs square relu clip exp log sqrt sin cos erf sigmoid tanh softplus gelu silu hardswish scale leaky_relu elu" {
  script un1 'loss = sum(relu(clip(square(abs(-x)), min=0.1, max=3.0)) + sqrt(exp(log(y))) + erf(cos(sin(x))))'
  script un2 'loss = sum(hardswish(silu(gelu(softplus(tanh(sigmoid(x * 1.5) + y))))))'
  script un3 'loss = sum(elu(leaky_relu(x * y, alpha=0.3), alpha=0.8) * 2.0 + 1.0)'
  for f in un1 un2 un3; do
    [ "$(fused_ops $f | wc -l)" -ge 2 ]
    same_bits $f
  done
  [[ "$(fused_ops un2)" == *'"sigmoid", "add", "tanh", "softplus", "gelu", "silu", "hardswish"'* ]]
  [[ "$(fused_ops un3)" == *'"leaky_relu", "elu"'* ]]
}

@test "unary grad steps: the backward's relu_grad, sigmoid_grad, tanh_grad, clip_grad, leaky_relu_grad chains" {
  script grads 'h = clip(leaky_relu(tanh(sigmoid(relu(x * y + b))), alpha=0.2), min=-0.5, max=0.5)
loss = sum(h * h)'
  run fused_ops grads
  [[ "$output" == *'"clip_grad", "leaky_relu_grad"'* ]]
  [[ "$output" == *'"tanh_grad"'* && "$output" == *'"sigmoid_grad"'* && "$output" == *'"relu_grad"'* ]]
  same_bits grads
}

@test "add_n of a value's two gradients is an add step: a residual's sum and the relu_grad before it in one pass; add_n of three is not" {
  # block's v is read twice, so its gradient is add_n of two, then the
  # relu_grad of the relu that made v
  script res 'def block(v) {
  return relu(v * 0.5 + relu(v) * x)
}
loss = sum(block(relu(x * y + b)))'
  run fused_ops res
  [ "$status" -eq 0 ]
  [[ "$output" == *'"relu_grad", "add", "relu_grad"'* ]]
  run "$NETRUN" dump --backward --fused res.net
  [[ "$output" != *"add_n("* ]]
  same_bits res
  # a value read three times: add_n of three stays add_n
  script three 'h = tanh(x * y)
loss = sum(h * h * h + h)'
  run "$NETRUN" dump --backward --fused three.net
  [[ "$output" == *"add_n(X=["*", "*", "*"])"* ]]
  same_bits three
}

@test "f64: the chains run in f64, with the f64 bits of --no-fuse" {
  script f64 'loss = sum(sigmoid(x * y + b) * tanh(x - s))'
  [ "$(fused_ops f64 --dtype f64 | wc -l)" -ge 1 ]
  same_bits f64 --dtype f64
}

@test "second order: the chains of a backward of a backward keep the bits" {
  script order2 'loss = sum(tanh(x * y + b) * sigmoid(x))'
  OMP_NUM_THREADS=1 "$NETRUN" grad --order 2 --format json --no-fuse order2.net > plain.json
  OMP_NUM_THREADS=2 "$NETRUN" grad --order 2 --format json order2.net > fused.json
  cmp plain.json fused.json
}

@test "a value a chain makes that is read elsewhere is still made; a chain an op between would read from is refused" {
  # h is named: the chain writes it (the run prints it) though only the chain's next op reads it.
  script named 'h = sigmoid(x * y)
loss = sum(h * x)'
  run "$NETRUN" dump --fused named.net
  [[ "$output" == *'{Out=[h, t.3]} = fused_elementwise(X=[x, y]) {args=[0, 1, 2, -1, 3, 0], kinds=[0, 0], ops=["mul", "sigmoid", "mul"], outs=[3, 4]'* ]]
  # div's gradient: q = dOut / y is read by the chain (q * Out, negated)
  # and by the assign of x's gradient between them: q is made, so the
  # chain is the mul and neg after the assign.
  script between 'param z : [64, 256] = uniform(-1.0, 1.0)
loss = sum(z / y)'
  run "$NETRUN" dump --backward --fused between.net
  [[ "$output" == *'{Out=[t.3]} = div(X=[t.2@GRAD], Y=[y])'* && "$output" == *'{Out=[z@GRAD]} = assign(X=[t.3])'* ]]
  [[ "$output" == *'ops=["mul", "neg"]'* ]]
  same_bits between
  OMP_NUM_THREADS=2 "$NETRUN" run named.net > fused.txt
  "$NETRUN" run --no-fuse named.net > plain.txt
  cmp plain.txt fused.txt
}

@test "--no-fuse and --check-nan: no chain is fused" {
  script off 'loss = sum(sigmoid(x * y + b))'
  [ "$(fused_ops off | wc -l)" -ge 1 ]
  run fused_ops off --no-fuse
  [ "$output" = "" ]
  run fused_ops off --check-nan
  [ "$output" = "" ]
}

@test "training char_lm with the chains and attention fused and with --no-fuse: the same checkpoint bits and losses, 1 and 2 threads" {
  for t in 1 2; do
    OMP_NUM_THREADS=$t "$NETRUN" train "$ROOT/examples/char_lm.net" --epochs 1 --limit 96 --save f$t.ckpt --log f$t.jsonl > /dev/null
  done
  OMP_NUM_THREADS=2 "$NETRUN" train "$ROOT/examples/char_lm.net" --epochs 1 --limit 96 --no-fuse --save p.ckpt --log p.jsonl > /dev/null
  cmp p.ckpt f1.ckpt
  cmp p.ckpt f2.ckpt
  losses() { jq -c 'select(.event == "step") | .loss' "$1"; }
  [ "$(losses p.jsonl)" = "$(losses f1.jsonl)" ]
  [ "$(losses p.jsonl)" = "$(losses f2.jsonl)" ]
  [ "$(losses p.jsonl | wc -l)" -eq 3 ]
  "$NETRUN" dump --train --fused "$ROOT/examples/char_lm.net" > fused.txt
  grep -q 'fused_elementwise(X=\[t.7, block1.ff1.b\]).*ops=\["add", "relu"\]' fused.txt
  # the attention reads Q, K and V in the qkv product, its gradient writes theirs there (attention.bats)
  [ "$(grep -c '= fused_attention(QKV=' fused.txt)" -eq 2 ]
  [ "$(grep -c '= fused_attention_grad(QKV=' fused.txt)" -eq 2 ]
}

@test "a user op's body: an output its chain reads on is still made (the caller reads it by name)" {
  cat > uop.net <<'NET'
op affine2(x, a, b) -> (y, z) {
  y = x * a + b
  z = y * y
}
param p : [2, 3] = [[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]]
param q : [3] = [0.5, -1.0, 2.0]
y, z = affine2(p, q, 0.25)
loss = sum(y) + mean(z)
print(y)
print(z)
NET
  run "$NETRUN" run uop.net
  [ "$status" -eq 0 ]
  [ "$output" = "$("$NETRUN" run --no-fuse uop.net)" ]
  [[ "$output" == *"0.75"* ]]
}

@test "two biases of different trailing shapes: one chain holds one tail shape, the bits of --no-fuse" {
  # b is [256], y [64, 256]: both trailing dims of z's [4, 64, 256], but
  # the kernel's rows are of one size, so the add of y is left out.
  script tails 'input z : f32[4, 64, 256] = uniform_random([4, 64, 256], min=-2.0, max=2.0)
loss = sum(relu(z * 2.0 + b) + y)'
  run "$NETRUN" dump --fused tails.net
  [[ "$output" == *'{Out=[t.6]} = fused_elementwise(X=[z, t.3, b]) {args=[0, 1, 3, 2, 4, -1], kinds=[0, 1, 2], ops=["mul", "add", "relu"], outs=[5]'* ]]
  [[ "$output" == *'{Out=[t.7]} = add(X=[t.6], Y=[y])'* ]]
  same_bits tails
}

@test "a short bias: whole rows of it to a tile (6 rows of 40), the last tile part of one, on 1 and 2 threads" {
  script short 'input u : f32[64, 7, 40] = uniform_random([64, 7, 40], min=-2.0, max=2.0)
param c : [40] = uniform(-0.5, 0.5)
param k : [7, 40] = uniform(0.5, 1.5)
loss = sum(sigmoid(u * 1.5 + c) * u) + sum(tanh(u - s) * k)'
  run fused_ops short
  [ "${lines[0]}" = 'ops=["mul", "add", "sigmoid", "mul"]' ]
  [ "${lines[1]}" = 'ops=["sub", "tanh", "mul"]' ]
  same_bits short
}

@test "chains around a while loop and an if: the loop's gradient reads what it needs, the bits of --no-fuse" {
  script loops 'h = sigmoid(x * y + b) * x
i = 0
while i < 3 {
  h = tanh(h * 0.9 + b)
  i = i + 1
}
if sum(h) > 0.0 {
  h = relu(h - s) * 2.0
}
loss = sum(exp(h * 0.5 - s) * y)'
  run "$NETRUN" dump --backward --fused loops.net
  [ "$status" -eq 0 ]
  [[ "$output" == *'ops=["mul", "add", "sigmoid", "mul"]'* ]]
  # the bodies (blocks 1 and up) are as written
  [[ "$(sed -n '/^block 1/,$p' <<< "$output")" != *fused_elementwise* ]]
  same_bits loops
}
