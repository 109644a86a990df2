#!/usr/bin/env bats
# stdlib_layers.bats — the standard library's layers from the command
# line: batch_norm_layer's running statistics (moved by training steps as
# PyTorch moves them, used by eval and predict, so that evaluation does not
# depend on the batch size), the examples written with layers, and short
# trainings of the LSTM and transformer examples to the figures they reach.
# The layers' values, names and gradients are in tests/cases/stdlib and
# tests/grad/stdlib (stdlib.bats).
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  EX=$BATS_TEST_DIRNAME/../examples
  cd "$BATS_TEST_TMPDIR"
}

# The value of a one-element tensor NAME in checkpoint FILE.
ckpt_value() { "$NETRUN" checkpoint "$2" | awk -v n="$1" '$1 == n && $(NF - 1) == "value" { print $NF }'; }

# Whether $1 is within $3 (relative) of $2.
close_to() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= r * (b < 0 ? -b : b)) }'; }

# 600 points of three features, label 1 when a + 2 (b - 4) > 0.5; the
# features have means far from 0 (b near 4), so normalizing matters.
points_csv() {
  awk 'BEGIN { srand(3); print "a,b,c,label"
    for (i = 0; i < 600; i++) { a = rand() * 4 - 1; b = rand() * 2 + 3; c = rand()
      printf "%.3f,%.3f,%.3f,%d\n", a, b, c, (a + (b - 4) * 2 > 0.5) ? 1 : 0 } }' > points.csv
  cat > bn.net <<'NET'
import "nn"
input x : f32[B, 3]
input y : i64[B]
input training : bool = true
h = relu(batch_norm_layer(dense(x, 8), training, scope="bn1"))
logits = dense(h, 2, scope="out")
loss = cross_entropy(logits, y)
train {
  data      = "points.csv"
  metric    = logits
  optimizer = adam
  lr        = 0.01
  batch     = 32
  epochs    = 2
}
NET
}

@test "batch_norm_layer: one step moves the running statistics by PyTorch's rule (momentum 0.1, unbiased variance), the next from there" {
  # x = 1..8 in one batch: mean 4.5, unbiased variance 6.  From mean 0,
  # var 1: 0.1 * 4.5 = 0.45 and 0.9 + 0.1 * 6 = 1.5; then 0.9 * 0.45 +
  # 0.45 = 0.855 and 0.9 * 1.5 + 0.6 = 1.95.  loss = mean(h) moves beta
  # by -lr each step and gamma not at all (the normalized batch's mean is 0).
  printf 'x,y\n1,0\n2,0\n3,0\n4,0\n5,0\n6,0\n7,0\n8,0\n' > eight.csv
  cat > bn1.net <<'NET'
import "nn"
input x : f32[B, 1]
input y : f32[B]
input training : bool = true
h = batch_norm_layer(x, training, scope="bn")
loss = mean(h)
train {
  data   = "eight.csv"
  lr     = 0.5
  batch  = 8
  epochs = 2
}
NET
  "$NETRUN" train bn1.net --epochs 1 --save one.ckpt >/dev/null 2>&1
  close_to "$(ckpt_value bn.mean one.ckpt)" 0.45 1e-6
  close_to "$(ckpt_value bn.var one.ckpt)" 1.5 1e-6
  "$NETRUN" train bn1.net --save two.ckpt >/dev/null 2>&1
  close_to "$(ckpt_value bn.mean two.ckpt)" 0.855 1e-6
  close_to "$(ckpt_value bn.var two.ckpt)" 1.95 1e-6
  [ "$(ckpt_value bn.gamma two.ckpt)" = 1 ]
  [ "$(ckpt_value bn.beta two.ckpt)" = -1 ]
  "$NETRUN" checkpoint two.ckpt | grep -E '^ +bn\.mean +f32 +\[1\] +state '
  # eval normalizes with them: mean((x - 0.855) / sqrt(1.95 + 1e-5)) - 1
  # = 3.645 / 1.3964266 - 1 = 1.610232, one example at a time as well.
  run "$NETRUN" eval bn1.net --weights two.ckpt
  [ "$output" = "eight.csv: loss 1.610232 (8 examples)" ]
  run "$NETRUN" eval bn1.net --weights two.ckpt --batch 1
  [ "$output" = "eight.csv: loss 1.610232 (8 examples)" ]
  # and leaves them as they were
  close_to "$(ckpt_value bn.mean two.ckpt)" 0.855 1e-6
}

@test "batch_norm_layer: eval gives the same loss and accuracy at --batch 1, 32 and 500; the batch's statistics would not" {
  points_csv
  "$NETRUN" train bn.net --save bn.ckpt >/dev/null 2>&1
  run "$NETRUN" eval bn.net --weights bn.ckpt --batch 500
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^"points.csv: loss 0."[0-9]+" accuracy 0."[0-9]+" (600 examples)"$ ]]
  ref=$output
  for b in 1 32 600; do
    run "$NETRUN" eval bn.net --weights bn.ckpt --batch $b
    [ "$output" = "$ref" ] || { echo "--batch $b: $output, not $ref"; return 1; }
  done
  # The same weights normalized by each batch's own statistics (what the
  # stdlib's batchnorm did before): the result depends on the batch.
  run "$NETRUN" eval bn.net --weights bn.ckpt --batch 2 --set training=true
  [ "$status" -eq 0 ]
  [ "$output" != "$ref" ]
  # predict: one example at a time gives the classes of whole batches
  cut -d, -f1-3 points.csv | sed 1d > x.csv
  "$NETRUN" predict bn.net --weights bn.ckpt --data points.csv --batch 1 > one.txt
  "$NETRUN" predict bn.net --weights bn.ckpt --data points.csv --batch 500 > many.txt
  [ "$(wc -l < one.txt)" -ge 600 ]
  cmp one.txt many.txt
}

@test "the stdlib's old batchnorm (batch statistics in evaluation) is gone: a call is an error; netrun-lang(5) has batch_norm_layer" {
  printf 'import "nn"\ninput x : f32[B, 3]\nparam g : [3] = ones()\nparam b : [3] = zeros()\ny = batchnorm(x, g, b)\n' > old.net
  run "$NETRUN" dump old.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "old.net:5:5: error: unknown op or function 'batchnorm' (did you mean 'batch_norm'?)" ]
  grep -q '^\.BI batch_norm_layer( x ", " training )' "$BATS_TEST_DIRNAME/../man/netrun-lang.5"
}

@test "multi_head_attention refuses a model width that the heads do not divide, at the call" {
  printf 'import "nn"\ninput x : f32[B, 2, 6]\ny = multi_head_attention(x, 4, true)\n' > heads.net
  run "$NETRUN" dump heads.net
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" == *"/stdlib/nn.net:"*": error: dim(): axis 4 is out of range for a value of shape [B, 2, 6] (rank 3)" ]]
  [[ "${lines[1]}" == *"an error unless heads divides D" ]]
  grep -Fx "heads.net:3:5: note: in this call to 'multi_head_attention'" <<<"$output"
}

@test "fashion_mlp written with dense layers: the parameters are dense.W, dense_1.W, out.W and train as before" {
  run "$NETRUN" train "$EX/fashion_mlp.net" --limit 2000 --epochs 1 --save mlp.ckpt
  [ "$status" -eq 0 ]
  # the figures of the same model with top-level parameters W1 ... b3
  grep -F "epoch 1/1: train loss 1.5782 acc 0.5060 | test loss 1.3903 acc 0.5455" <<<"$output"
  names=$("$NETRUN" checkpoint mlp.ckpt | awk '/^tensors/ { on = 1; next } on && $1 !~ /@/ { print $1 }' | paste -sd,)
  [ "$names" = "dense.W,dense.b,dense_1.W,dense_1.b,out.W,out.b" ]
}

@test "adding_lstm.net: 10 epochs of the stdlib's LSTM bring the train loss under 0.12 and 96% of the test sequences right (the Elman RNN: 87%)" {
  run "$NETRUN" train "$EX/adding_lstm.net" --epochs 10 --save lstm.ckpt
  [ "$status" -eq 0 ]
  loss=$(awk '/^epoch 10\/10:/ { print $5 }' <<<"$output")
  awk -v l="$loss" 'BEGIN { exit !(l < 0.12) }' || { echo "train loss $loss"; return 1; }
  run "$NETRUN" eval "$EX/adding_lstm.net" --weights lstm.ckpt --data "$EX/data/adding_test.csv"
  acc=$(awk '{ print $(NF - 2) }' <<<"$output")
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.96) }' || { echo "$output"; return 1; }
  "$NETRUN" checkpoint lstm.ckpt | grep -E '^ +lstm\.Wh +f32 +\[16, 64\]'
}

@test "lookup_transformer.net: 3 epochs of two transformer blocks bring the train loss under 0.1 and 99% of the test lookups right" {
  run "$NETRUN" train "$EX/lookup_transformer.net" --epochs 3 --save tf.ckpt
  [ "$status" -eq 0 ]
  loss=$(awk '/^epoch 3\/3:/ { print $5 }' <<<"$output")
  awk -v l="$loss" 'BEGIN { exit !(l < 0.1) }' || { echo "train loss $loss"; return 1; }
  run "$NETRUN" eval "$EX/lookup_transformer.net" --weights tf.ckpt --data "$EX/data/lookup_test.csv"
  acc=$(awk '{ print $(NF - 2) }' <<<"$output")
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.99) }' || { echo "$output"; return 1; }
  "$NETRUN" checkpoint tf.ckpt | grep -E '^ +block2\.attn\.qkv\.W +f32 +\[32, 96\]'
}
