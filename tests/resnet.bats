#!/usr/bin/env bats
# resnet.bats — batch normalization's running statistics in evaluation:
# a small conv + batch norm net trained a few steps on Fashion-MNIST
# (fixed seed, --limit) evaluates to the same loss and accuracy at
# --batch 1, 32 and 500, and to what training's own evaluation printed;
# the same net normalizing with the batch's statistics does not (so the
# check can fail).  Then examples/fashion_resnet.net, trained two steps,
# is batch-size independent too (every layer passes `training` on).
# About 10 s of CPU.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  EX=$(cd "$BATS_TEST_DIRNAME/../examples" && pwd)
  cd "$BATS_TEST_TMPDIR"
  cat > tiny.net <<'NET'
input x : f32[B, 1, 28, 28]
input y : i64[B]
input training : bool = true

def batch_norm2d(x, training) {
  param gamma : [dim(x, 1)] = ones()
  param beta  : [dim(x, 1)] = zeros()
  state mean  : [dim(x, 1)] = zeros()
  state var   : [dim(x, 1)] = ones()
  y, mean, var = batch_norm(x, gamma, beta, mean, var, training)
  return y
}

param K : [8, 1, 5, 5] = kaiming()
param W : [8, 10] = xavier()
param b : [10] = zeros()
h = relu(batch_norm2d(conv2d(x, K, strides=[2, 2]), training))
logits = mean(h, axis=[2, 3]) @ W + b
loss = mean(softmax_cross_entropy(logits, y))
train {
  data      = "fashion-mnist"
  feed      = [x, y]
  metric    = logits
  optimizer = adam
  lr        = 0.01
  batch     = 50
  epochs    = 2
}
NET
}

# The "test: loss L accuracy A (N examples)" line of `eval SCRIPT
# --weights CKPT --limit N --batch B`.
eval_line() {
  "$NETRUN" eval "$1" --weights "$2" --limit "$3" --batch "$4" 2>/dev/null
}

# Whether two such lines agree: the same accuracy and examples, and losses
# within 1e-5 of each other, relatively.  The loss is the mean of the
# batches' means, each summed in f32 over its batch: its last printed
# digits move with the batch size (2.478317 at --batch 100 against
# 2.478318 at 1), where statistics of the batch instead of the running
# ones move it by far more.
same_eval() {
  [[ "$1" =~ ^test:\ loss\ ([0-9.]+)\ (accuracy .*)$ ]] || return 1
  local l1=${BASH_REMATCH[1]} rest=${BASH_REMATCH[2]}
  [[ "$2" =~ ^test:\ loss\ ([0-9.]+)\ (accuracy .*)$ ]] || return 1
  [ "${BASH_REMATCH[2]}" = "$rest" ] || return 1
  awk -v a="$l1" -v b="${BASH_REMATCH[1]}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * a) }'
}

@test "batch norm: eval uses the running statistics, at --batch 1, 32 and 500 alike" {
  run --separate-stderr "$NETRUN" train tiny.net --limit 1000 --seed 1 --save t.ckpt
  [ "$status" -eq 0 ]
  # The running statistics moved from their initial 0 and 1.
  run "$NETRUN" checkpoint t.ckpt
  [[ "$output" =~ batch_norm2d\.mean\ +f32\ +\[8\]\ +state\ +mean\ ([^ ]+) ]]
  [ "${BASH_REMATCH[1]}" != 0 ]
  [[ "$output" =~ batch_norm2d\.var\ +f32\ +\[8\]\ +state\ +mean\ ([^ ]+) ]]
  [ "${BASH_REMATCH[1]}" != 1 ]
  one=$(eval_line tiny.net t.ckpt 1000 1)
  [[ "$one" =~ ^test:\ loss\ ([0-9.]+)\ accuracy\ (0\.[0-9]{4})\ \(1000\ examples\)$ ]]
  loss=${BASH_REMATCH[1]} acc=${BASH_REMATCH[2]}
  same_eval "$(eval_line tiny.net t.ckpt 1000 32)" "$one"
  same_eval "$(eval_line tiny.net t.ckpt 1000 500)" "$one"
  # Training's last evaluation (the same 1000 test images, batch 50) read
  # the states that the checkpoint holds: its line shows the same figures.
  run --separate-stderr "$NETRUN" train tiny.net --limit 1000 --seed 1
  [[ "${lines[1]}" == "epoch 2/2: "*"| test loss $(printf %.4f "$loss") acc $acc |"* ]]
}

@test "batch norm: with the batch's statistics (training always true) eval depends on --batch" {
  "$NETRUN" train tiny.net --limit 1000 --seed 1 --save t.ckpt >/dev/null 2>&1
  sed 's/mean, var, training)/mean, var, true)/' tiny.net > batchstats.net
  run ! cmp -s tiny.net batchstats.net
  one=$(eval_line batchstats.net t.ckpt 1000 1)
  [ -n "$one" ]
  [ "$(eval_line batchstats.net t.ckpt 1000 32)" != "$one" ]
  [ "$(eval_line batchstats.net t.ckpt 1000 500)" != "$one" ]
}

@test "fashion_resnet: two training steps, then eval is the same at --batch 1, 32 and 100" {
  run --separate-stderr "$NETRUN" train "$EX/fashion_resnet.net" --limit 256 --epochs 1 --seed 2 --save r.ckpt
  [ "$status" -eq 0 ]
  one=$(eval_line "$EX/fashion_resnet.net" r.ckpt 100 1)
  [[ "$one" =~ ^test:\ loss\ [0-9.]+\ accuracy\ 0\.[0-9]{4}\ \(100\ examples\)$ ]]
  same_eval "$(eval_line "$EX/fashion_resnet.net" r.ckpt 100 32)" "$one"
  same_eval "$(eval_line "$EX/fashion_resnet.net" r.ckpt 100 100)" "$one"
}
