#!/usr/bin/env bats
# validation.bats — a train block's validation data (src/train/train.c,
# src/train/trainer.c, data_split in src/io/data.c): val_split's seeded choice of
# held-out examples, val = "FILE", the "| val loss X acc Y" of the epoch
# line, --keep-best and patience (early stopping) on the validation score.
# The error cases are tests/cases/data/err_val_*.net and err_patience_*.net.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
  # Example i holds x = 2^i: the mean of x over any set of examples names
  # the set (its sum is a sum of distinct powers of two).
  printf 'x,y\n1,0\n2,0\n4,0\n8,0\n16,0\n32,0\n64,0\n128,0\n' > rows.csv
  # The loss is the mean of x (W never changes it): the val loss is the
  # mean of the held-out examples' x, the train loss that of the others.
  cat > split.net <<'NET'
input x : f32[B, 1]
input y : f32[B, 1]
param W : [1, 1] = zeros()
loss = mean(x + 0 * (x @ W))
train {
  data      = "rows.csv"
  val_split = 0.25
  batch     = 8
  shuffle   = false
}
NET
}

# The epoch lines without their timing.
epochs() { sed -n 's/ | [0-9.]* s, [0-9]* samples\/s$//p' | grep '^epoch'; }

@test "val_split holds out round(n * fraction) examples chosen by the seed, the same ones each time" {
  run --separate-stderr "$NETRUN" train split.net
  [ "$status" -eq 0 ]
  [ "${stderr_lines[1]}" = "training split.net: 6 examples (2 more to validate), 1 step of 8 per epoch, sgd lr 0.01, 1 epoch" ]
  # held out: x = 8 and 16 (mean 12); trained on 1+2+4+32+64+128 = 231 over 6
  [ "$(echo "$output" | epochs)" = "epoch 1/1: train loss 38.5000 | val loss 12.0000" ]
  run --separate-stderr "$NETRUN" train split.net
  [ "$(echo "$output" | epochs)" = "epoch 1/1: train loss 38.5000 | val loss 12.0000" ]
  # another seed, another split: x = 16 and 128 (mean 72); 111 / 6 = 18.5
  run --separate-stderr "$NETRUN" train split.net --seed 7
  [ "$(echo "$output" | epochs)" = "epoch 1/1: train loss 18.5000 | val loss 72.0000" ]
  # 0.35 of 8 is 2.8: 3 held out, those of 0.25 and one more (the first
  # positions of one seeded permutation): x = 4, 8, 16, mean 28/3; 227 / 5
  sed -i 's/0.25/0.35/' split.net
  run --separate-stderr "$NETRUN" train split.net
  [ "${stderr_lines[1]}" = "training split.net: 5 examples (3 more to validate), 1 step of 8 per epoch, sgd lr 0.01, 1 epoch" ]
  [ "$(echo "$output" | epochs)" = "epoch 1/1: train loss 45.4000 | val loss 9.3333" ]
}

@test "the held-out examples never train; the log names the split val" {
  # With shuffling on, every epoch's batches still come from the 6 kept:
  # batches of 1 over 3 epochs, 18 steps, each a kept example's x.
  sed -i 's/batch     = 8/batch     = 1\n  epochs    = 3/; /shuffle/d' split.net
  run --separate-stderr "$NETRUN" train split.net --log l.json
  [ "$status" -eq 0 ]
  [ "$(jq -r 'select(.event == "step") | .loss' l.json | sort -n | uniq | paste -sd' ')" = "1 2 4 32 64 128" ]
  [ "$(jq -r 'select(.event == "step") | .loss' l.json | wc -l)" -eq 18 ]
  [ "$(jq -c 'select(.event == "eval") | [.epoch, .split, .loss]' l.json | paste -sd' ')" = '[1,"val",12] [2,"val",12] [3,"val",12]' ]
}

@test "val = FILE: evaluated beside train and the test data, each on the epoch line" {
  printf 'x,y\n3,0\n5,0\n' > v.csv
  printf 'x,y\n10,0\n' > t.csv
  sed -i 's/val_split = 0.25/val = "v.csv"\n  eval = "t.csv"/' split.net
  run --separate-stderr "$NETRUN" train split.net
  [ "$status" -eq 0 ]
  [ "${stderr_lines[1]}" = "training split.net: 8 examples (2 more to validate, 1 to evaluate), 1 step of 8 per epoch, sgd lr 0.01, 1 epoch" ]
  [ "$(echo "$output" | epochs)" = "epoch 1/1: train loss 31.8750 | val loss 4.0000 | t.csv loss 10.0000" ]
}

# A classifier from zero weights whose val accuracy rises, then stays.
# After one full-batch step of lr 1 from zero (softmax 1/2 each), the
# logit difference is x * mean(x (2y - 1)) + mean(2y - 1) = x - 0.5: of
# val's 8 examples, x = 0.6, 0.8, 1 and -1 are right, acc 0.5000.
early_net() {
  printf 'x,y\n1,1\n-1,0\n-1,0\n-1,0\n' > train.csv
  printf 'x,y\n0.1,1\n0.2,1\n0.3,1\n0.4,1\n0.6,1\n0.8,1\n1,1\n-1,0\n' > val.csv
  cat > early.net <<'NET'
import "nn"
input x : f32[B, 1]
input y : i64[B]
param W : [1, 2] = zeros()
param b : [2] = zeros()
logits = x @ W + b
loss   = cross_entropy(logits, y)
train {
  data     = "train.csv"
  val      = "val.csv"
  metric   = logits
  lr       = 1
  batch    = 8
  epochs   = 20
  patience = 3
}
NET
}

@test "patience stops the run N epochs after the last better val accuracy, and says why" {
  early_net
  run --separate-stderr "$NETRUN" train early.net --save m.ckpt --keep-best
  [ "$status" -eq 0 ]
  # 0.5, 0.625 (better), two equal (not better), 0.75 (better, epoch 5),
  # three equal: stopped after epoch 8 of 20.
  # the epoch line says what patience watches, and its count
  [ "$(echo "$output" | epochs | sed 's/.*| val/val/')" = "val loss 0.6480 acc 0.5000 | patience: val acc, 0 of 3 epochs without a better one
val loss 0.5897 acc 0.6250 | patience: val acc, 0 of 3 epochs without a better one
val loss 0.5435 acc 0.6250 | patience: val acc, 1 of 3 epochs without a better one
val loss 0.5080 acc 0.6250 | patience: val acc, 2 of 3 epochs without a better one
val loss 0.4802 acc 0.7500 | patience: val acc, 0 of 3 epochs without a better one
val loss 0.4578 acc 0.7500 | patience: val acc, 1 of 3 epochs without a better one
val loss 0.4394 acc 0.7500 | patience: val acc, 2 of 3 epochs without a better one
val loss 0.4239 acc 0.7500 | patience: val acc, 3 of 3 epochs without a better one" ]
  [ "${lines[8]}" = "stopping early after epoch 8: val accuracy has not improved for 3 epochs (best 0.7500, epoch 5)" ]
  [[ "${lines[9]}" == "trained 8 epochs (8 steps, 32 samples) in "*"; best val accuracy 0.7500" ]]
  # --keep-best kept epoch 5's parameters, the last checkpoint epoch 8's
  [ "$("$NETRUN" checkpoint m.ckpt.best | sed -n 's/^epoch: //p')" = 5 ]
  [ "$("$NETRUN" checkpoint m.ckpt | sed -n 's/^epoch: //p')" = 8 ]
  run "$NETRUN" eval early.net --weights m.ckpt.best --data val.csv
  [ "$output" = "val.csv: loss 0.480197 accuracy 0.7500 (8 examples)" ] || { echo "$output"; false; }
}

@test "a resumed run keeps patience's count: the same stop as a run never interrupted" {
  early_net
  "$NETRUN" train early.net --save e.ckpt --epochs 6 >/dev/null 2>&1
  run --separate-stderr "$NETRUN" train early.net --resume e.ckpt --epochs 20
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | epochs | cut -c1-11 | paste -sd' ')" = "epoch 7/20: epoch 8/20:" ]
  [ "${lines[2]}" = "stopping early after epoch 8: val accuracy has not improved for 3 epochs (best 0.7500, epoch 5)" ]
}

@test "without a metric, patience watches the val loss" {
  # The loss is the same every epoch: epoch 1 is the best, then 2 more.
  sed -i 's/shuffle   = false/epochs    = 9\n  patience  = 2/' split.net
  run --separate-stderr "$NETRUN" train split.net
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | epochs | wc -l)" -eq 3 ]
  [ "${lines[3]}" = "stopping early after epoch 3: val loss has not improved for 2 epochs (best 12.0000, epoch 1)" ]
}

@test "monitor = \"val_loss\" watches the val loss although a metric exists; bad values are refused" {
  early_net
  sed -i 's/^  patience = 3/  patience = 3\n  monitor  = "val_loss"/' early.net
  run --separate-stderr "$NETRUN" train early.net --save m.ckpt --keep-best
  [ "$status" -eq 0 ]
  # the val loss falls every epoch: no early stop, and epoch 20 is the best
  [ "$(echo "$output" | epochs | wc -l)" -eq 20 ]
  [[ "$(echo "$output" | epochs | tail -1)" == *"| patience: val loss, 0 of 3 epochs without a better one" ]]
  [[ "${lines[20]}" == "trained 20 epochs (20 steps, 80 samples) in "*"; best val loss 0."* ]]
  [ "$("$NETRUN" checkpoint m.ckpt.best | sed -n 's/^epoch: //p')" = 20 ]
  sed -i 's/"val_loss"/"val_acc"/' early.net
  run "$NETRUN" train early.net
  [ "$status" -eq 1 ]
  [[ "$output" == *'early.net:16:3: error: monitor must be "val_loss" or "val_accuracy", got "val_acc"'* ]]
  sed -i 's/"val_acc"/"val_accuracy"/; /metric/d' early.net
  run "$NETRUN" train early.net
  [ "$status" -eq 1 ]
  [[ "$output" == *'error: monitor = "val_accuracy" needs metric = NAME'* ]]
}

@test "without validation data, patience watches the eval data" {
  printf 'x,y\n10,0\n' > t.csv
  sed -i 's/val_split = 0.25/eval = "t.csv"\n  patience = 1\n  epochs = 5/' split.net
  run --separate-stderr "$NETRUN" train split.net
  [ "$status" -eq 0 ]
  [ "${lines[2]}" = "stopping early after epoch 2: t.csv loss has not improved for 1 epoch (best 10.0000, epoch 1)" ]
}

# ---- CSV columns by name ------------------------------------------------------------------

# A CSV file as people have it: an id, a text column, features, targets.
houses() {
  printf 'id,name,a,b,price,y\n1,foo,1,2,10,0\n2,bar,3,4,20,1\n3,baz,5,6,30,1\n' > houses.csv
  cat > houses.net <<'NET'
input x : f32[B, 2]
input t : f32[B, 1]
param W : [2, 1] = zeros()
loss = mean((x @ W - t) ** 2)
train {
  data    = "houses.csv"
  columns = ["b", "a"]
  label   = "price"
  lr      = 0.01
  batch   = 3
  shuffle = false
}
NET
}

@test "CSV: columns and label choose by header name; the text column is never read" {
  houses
  run --separate-stderr "$NETRUN" train houses.net --save h.ckpt
  [ "$status" -eq 0 ]
  # from W = 0 the loss is mean(price^2) = (100 + 400 + 900) / 3
  [ "$(echo "$output" | epochs)" = "epoch 1/1: train loss 466.6667" ]
  # one step: W -= 0.01 * 2/3 * x^T (0 - price), x's columns in the order
  # named, b then a: -(2*10 + 4*20 + 6*30) = -280, -(1*10 + 3*20 + 5*30) = -220
  [ "$("$NETRUN" predict houses.net --weights h.ckpt --output W | tr -d '[] ' | paste -sd' ')" = "1.8666667 1.4666667" ]
}

@test "CSV: label = [...] names several regression targets, fed as f32 [B, k]" {
  houses
  sed -i 's/label   = "price"/label   = ["price", "y"]/; s/input t : f32\[B, 1\]/input t : f32[B, 2]/' houses.net
  run --separate-stderr "$NETRUN" train houses.net
  [ "$status" -eq 0 ]
  # mean over both targets of their squares: (100 + 400 + 900 + 0 + 1 + 1) / 6
  [ "$(echo "$output" | epochs)" = "epoch 1/1: train loss 233.6667" ]
}

@test "CSV: label names a column when it names no input (the label input: the last fed)" {
  houses
  sed -i 's/label   = "price"/label   = "y"/' houses.net
  run --separate-stderr "$NETRUN" train houses.net
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | epochs)" = "epoch 1/1: train loss 0.6667" ]
}
