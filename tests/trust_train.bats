#!/usr/bin/env bats
# trust_train.bats — a training run that diverges stops with an error and
# leaves its checkpoint whole (--keep-going trains on); the smoothed loss
# is bias-corrected and resumes with the checkpoint; huge losses print in
# %g style; and what was accepted then ignored is honoured or refused:
# eval = "FILE.csv", predict --data/--limit/--batch, eval --set training,
# a [B, 1] logit's accuracy, feed = [x] on a two-column dataset, eval
# --data's label, and .npy files (src/train/trainer.c, train.c, data.c, feed.c).
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  cd "$BATS_TEST_TMPDIR"
}

# linreg.csv with a learning rate of 5: the loss grows a hundredfold a
# step and passes the float range at step 23, in the third epoch.
diverging() {
  cp "$ROOT/examples/data/linreg.csv" .
  cat > div.net <<'EOF'
import "nn"
input x : f32[B, 2]
input y : f32[B, 1]
param W : [2, 1] = zeros()
param b : [1]    = zeros()
pred = linear(x, W, b)
loss = mse_loss(pred, y)
train {
  data   = "linreg.csv"
  lr     = 5
  batch  = 20
  epochs = 3
}
EOF
}

# 40 points (a, b) labelled a + b/2 > 0 (20 of each class), and logistic
# regression on them: one logit per example, [B, 1].
logistic() {
  awk 'BEGIN { print "a,b,label"; for (i = 0; i < 40; i++) { a = (i % 8 - 3.5) / 4; b = ((i * 3) % 5 - 2) / 2;
       printf "%g,%g,%d\n", a, b, (a + 0.5 * b > 0) } }' > bin.csv
  cat > logit.net <<EOF
import "nn"
input x : f32[B, 2]
input y : f32[B, 1]
param W : [2, 1] = zeros()
param b : [1]    = zeros()
logit = linear(x, W, b)
loss = bce_loss(logit, y)
train {
  data      = "bin.csv"
  metric    = logit
  optimizer = adam
  lr        = 0.1
  batch     = 8
  epochs    = ${1:-30}
  $2
}
EOF
}

# ---- a loss that is not finite ----------------------------------------------------

@test "a loss that turns infinite stops training: the step, the op, exit 1, the checkpoint of epoch 2 kept" {
  diverging
  run --separate-stderr "$NETRUN" train div.net --save d.ckpt
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 2 ]
  [[ "${lines[1]}" == "epoch 2/3: train loss 3.27e+32 | "* ]]
  [ "${stderr_lines[1]}" = "netrun: error: step 23 (epoch 3): the loss is inf; stopped before its update, checkpoints are left as they were (--keep-going trains on)" ]
  line=$(grep -n 'return mean(mse(pred, target))' "$ROOT/stdlib/losses.net" | cut -d: -f1)
  [ "${stderr_lines[2]}" = "$ROOT/stdlib/losses.net:$line:15: error: mse: produced NaN or Inf in 't.1' (shape [20, 1])" ]
  [ "${stderr_lines[3]}" = "  return mean(mse(pred, target))" ]
  [ "${stderr_lines[5]}" = "div.net:7:8: note: in this call to 'mse_loss'" ]
  [ "${#stderr_lines[@]}" -eq 8 ]
  # The checkpoint is the one epoch 2 wrote: the same as a run of 2 epochs.
  "$NETRUN" checkpoint d.ckpt | grep -qx 'step: 20'
  "$NETRUN" train div.net --epochs 2 --save two.ckpt >/dev/null 2>&1
  [ "$("$NETRUN" checkpoint d.ckpt | grep -E '^ *(W|b) ')" = "$("$NETRUN" checkpoint two.ckpt | grep -E '^ *(W|b) ')" ]
}

@test "--keep-going trains on past an infinite loss, and says so once" {
  diverging
  run --separate-stderr "$NETRUN" train div.net --keep-going
  [ "$status" -eq 0 ]
  [[ "${lines[2]}" == "epoch 3/3: train loss inf | "* ]]
  [ "${stderr_lines[1]}" = "netrun: warning: step 23 (epoch 3): the loss is inf; training on (--keep-going)" ]
  [ "${#stderr_lines[@]}" -eq 2 ]
}

@test "a parameter that an update left infinite is named, with the step that made it so" {
  cp "$ROOT/examples/data/linreg.csv" .
  # sqrt(0)'s gradient is infinite: the first step's loss is finite, its
  # update makes w infinite, and the second step's loss is NaN.
  cat > sq.net <<'EOF'
input x : f32[B, 2]
input y : f32[B, 1]
param w : [1] = [0.0]
loss = mean(sqrt(w * w)) + mean(x) * 0.0 + mean(y) * 0.0
train {
  data  = "linreg.csv"
  batch = 100
}
EOF
  run --separate-stderr "$NETRUN" train sq.net
  [ "$status" -eq 1 ]
  [ "${stderr_lines[1]}" = "netrun: error: step 2 (epoch 1): the loss is nan; stopped before its update, checkpoints are left as they were (--keep-going trains on)" ]
  [ "${stderr_lines[2]}" = "netrun: error: parameter 'w' holds NaN or Inf: step 1's update made it so" ]
}

@test "--keep-going is in --help and netrun(1)" {
  run "$NETRUN" train --help
  [[ "$output" == *"--keep-going"* ]]
  grep -q 'keep\\-going' "$ROOT/man/netrun.1"
}

# ---- the smoothed loss and huge losses ----------------------------------------------

@test "the smoothed loss is the moving average divided by 1 - 0.98^n" {
  logistic 2
  "$NETRUN" train logit.net --log s.jsonl >/dev/null 2>&1
  [ "$(jq -s '[.[] | select(.event == "step")] | length' s.jsonl)" -eq 10 ]
  # Every step's loss_smooth against the formula (old: 0.98 s + 0.02 l from
  # the first loss, 0.676 at step 2 where this gives 0.6763).
  bad=$(jq -s '[.[] | select(.event == "step")] | reduce .[] as $s ({e: 0, n: 0, bad: 0};
          .e = 0.98 * .e + 0.02 * $s.loss | .n += 1
          | .bad += (if ((.e / (1 - pow(0.98; .n)) - $s.loss_smooth) | fabs) > 1e-6 * ($s.loss_smooth | fabs)
                     then 1 else 0 end)) | .bad' s.jsonl)
  [ "$bad" -eq 0 ]
  [ "$(jq -s '[.[] | select(.event == "step")][1].loss_smooth' s.jsonl)" = 0.67633798 ]
}

@test "a resumed run continues the smoothed loss from its checkpoint" {
  logistic 2
  "$NETRUN" train logit.net --log whole.jsonl >/dev/null 2>&1
  "$NETRUN" train logit.net --epochs 1 --save r.ckpt --log part.jsonl >/dev/null 2>&1
  "$NETRUN" train logit.net --resume r.ckpt --epochs 2 --log part.jsonl >/dev/null 2>&1
  jq -c 'select(.event == "step") | [.step, .loss, .loss_smooth]' whole.jsonl > a.txt
  jq -c 'select(.event == "step") | [.step, .loss, .loss_smooth]' part.jsonl > b.txt
  [ "$(wc -l < b.txt)" -eq 10 ]
  diff a.txt b.txt
}

@test "huge losses print in %g style, in progress lines and at each epoch's end" {
  diverging
  run --separate-stderr "$NETRUN" train div.net --epochs 2 --keep-going
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" == "epoch 1/2: train loss 3.171e+13 | "* ]]
  [[ "${lines[1]}" == "epoch 2/2: train loss 3.27e+32 | "* ]]
  sed -i 's/batch  = 20/batch = 20\n  log_every = 10/' div.net
  run --separate-stderr "$NETRUN" train div.net --epochs 2
  [[ "${stderr_lines[2]}" == "iter 10  epoch 1  loss 3.467e+13  lr 5  samples/s "* ]]
}

# ---- eval = FILE, eval --data, eval --set ---------------------------------------------

@test "train block eval = \"FILE.csv\" evaluates that file after each epoch" {
  logistic 2 'eval = "test.csv"'
  head -11 bin.csv > test.csv
  run --separate-stderr "$NETRUN" train logit.net --log e.jsonl
  [ "$status" -eq 0 ]
  [[ "${lines[1]}" == "epoch 2/2: train loss 0.5145 acc 0.8250 | test.csv loss 0.4600 acc 1.0000 | "* ]]
  [[ "${lines[2]}" == *"; best test.csv accuracy 1.0000" ]]
  [ "$(jq -c 'select(.event == "eval") | [.split, .accuracy]' e.jsonl | tail -1)" = '["test.csv",1]' ]
  # eval evaluates it too, labelled by it.
  "$NETRUN" train logit.net --save l.ckpt >/dev/null 2>&1
  run "$NETRUN" eval logit.net --weights l.ckpt
  [ "$output" = "test.csv: loss 0.460044 accuracy 1.0000 (10 examples)" ]
}

@test "train block eval: an unknown value, and a split of data that has none, are errors" {
  logistic 2 'eval = "bogus"'
  run --separate-stderr "$NETRUN" train logit.net
  [ "$status" -eq 1 ]
  [ "${stderr_lines[0]}" = 'logit.net:15:3: error: train: eval must be "test", "train", "none" or a data file, got "bogus" (no such file)' ]
  logistic 2 'eval = "test"'
  run --separate-stderr "$NETRUN" train logit.net
  [ "$status" -eq 1 ]
  [ "${stderr_lines[0]}" = 'logit.net:15:3: error: train: eval = "test" names a split, but bin.csv has none: name a data file (eval = "test.csv") or "none"' ]
  # Without eval, a CSV file's run evaluates nothing, as before.
  logistic 2
  run --separate-stderr "$NETRUN" train logit.net
  [ "$status" -eq 0 ]
  [[ "${lines[1]}" == "epoch 2/2: train loss 0.5145 acc 0.8250 | 0.0 s, "* ]]
}

@test "eval --data FILE labels its result by that file, not \"train\"" {
  run "$NETRUN" eval "$ROOT/examples/linreg.net" --data "$ROOT/examples/data/linreg.csv"
  [ "$status" -eq 0 ]
  [ "$output" = "$ROOT/examples/data/linreg.csv: loss 3.903098 (200 examples)" ]
}

@test "eval --set training=true is honoured; train refuses it" {
  printf 'x,y\n1,2\n2,4\n3,6\n4,8\n' > d.csv
  cat > m.net <<'EOF'
input x : f32[B, 1]
input y : f32[B]
input training : bool = true
param w : [1] = [1.0]
pen = 0.0
if training {
  pen = 100.0
}
loss = mean((x[:, 0] * w - y) ** 2) + pen
train {
  data  = "d.csv"
  batch = 4
}
EOF
  run "$NETRUN" eval m.net
  [ "$output" = "d.csv: loss 7.500000 (4 examples)" ]
  run "$NETRUN" eval m.net --set training=true
  [ "$output" = "d.csv: loss 107.500000 (4 examples)" ]
  run --separate-stderr "$NETRUN" train m.net --set training=false
  [ "$status" -eq 2 ]
  [ "${stderr_lines[0]}" = "netrun: --set training=...: train feeds 'training' itself (true in its steps, false when it evaluates)" ]
}

# ---- predict -----------------------------------------------------------------------------

@test "predict --data predicts each example; --limit the first N; --batch sizes the batches" {
  logistic 30
  "$NETRUN" train logit.net --save l.ckpt >/dev/null 2>&1
  run --separate-stderr "$NETRUN" predict logit.net --weights l.ckpt --data bin.csv
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 40 ]
  [ "$output" = "$(tail -n +2 bin.csv | cut -d, -f3)" ]
  run "$NETRUN" predict logit.net --weights l.ckpt --data bin.csv --limit 5 --batch 2
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf '0\n0\n0\n1\n1')" ]
  run "$NETRUN" predict logit.net --weights l.ckpt --data bin.csv --limit 3 --batch 2 --output logit
  # Each batch's value: [2, 1], then [1, 1].
  [ "$output" = "$(printf '[[-9.255066 ]\n [-2.5971885]]\n[[-4.1831055]]')" ]
}

@test "predict --limit and --batch without --data are usage errors" {
  logistic 2
  run --separate-stderr "$NETRUN" predict logit.net --limit 3 --set 'x=[[1, 0]]'
  [ "$status" -eq 2 ]
  [ "${stderr_lines[0]}" = "netrun: --limit needs --data SPEC (predict over a dataset's examples)" ]
  run --separate-stderr "$NETRUN" predict logit.net --batch 3 --set 'x=[[1, 0]]'
  [ "$status" -eq 2 ]
  [ "${stderr_lines[0]}" = "netrun: --batch needs --data SPEC (predict over a dataset's examples)" ]
}

# ---- one logit per example ---------------------------------------------------------------

@test "a [B, 1] logit's accuracy is by its sign, and predict prints 0 or 1" {
  logistic 30
  run --separate-stderr "$NETRUN" train logit.net --save l.ckpt
  [ "$status" -eq 0 ]
  # Before: 0.5000, the share of class 0 (the argmax of one column is 0).
  [[ "${lines[29]}" == "epoch 30/30: train loss 0.1130 acc 1.0000 | "* ]]
  run "$NETRUN" eval logit.net --weights l.ckpt
  [ "$output" = "bin.csv: loss 0.110628 accuracy 1.0000 (40 examples)" ]
  run "$NETRUN" predict logit.net --weights l.ckpt --set 'x=[[1, 0], [-1, 0], [0.1, 0.5]]'
  [ "$output" = "$(printf '1\n0\n1')" ]
}

@test "a [B] logit against [B] labels: accuracy by its sign" {
  logistic 30
  sed -i 's/input y : f32\[B, 1\]/input y : f32[B]/; s/^logit = linear(x, W, b)/logit = linear(x, W, b)[:, 0]/' logit.net
  run --separate-stderr "$NETRUN" train logit.net
  [ "$status" -eq 0 ]
  [[ "${lines[29]}" == "epoch 30/30: train loss 0.1130 acc 1.0000 | "* ]]
}

# ---- feed = [x] on images and labels -----------------------------------------------------

@test "feed = [x] on an IDX pair feeds the images and leaves the labels (an autoencoder)" {
  "$ROOT/tests/data/mkidx.sh" img.idx "4 2 2" "255 0 0 255 0 255 255 0 255 255 0 0 0 0 255 255"
  "$ROOT/tests/data/mkidx.sh" lab.idx "4" "0 1 2 3"
  cat > ae.net <<'EOF'
input x : f32[B, 2, 2]
param W : [4, 4] = zeros()
v = reshape(x, [-1, 4])
loss = mean((v @ W - v) ** 2)
train {
  data   = "img.idx:lab.idx"
  feed   = [x]
  lr     = 0.5
  batch  = 4
  epochs = 2
}
EOF
  run --separate-stderr "$NETRUN" train ae.net
  [ "$status" -eq 0 ]
  # W = 0: half the pixels are 1, so the first loss is 0.5.
  [[ "${lines[0]}" == "epoch 1/2: train loss 0.5000 | "* ]]
  [[ "${lines[1]}" == "epoch 2/2: train loss 0.3320 | "* ]]
  # A metric needs the labels that feed left out.
  sed -i 's/feed   = \[x\]/feed = [x]\n  metric = v/' ae.net
  run --separate-stderr "$NETRUN" train ae.net
  [ "$status" -eq 1 ]
  [ "${stderr_lines[0]}" = "ae.net:8:3: error: train: metric needs the labels, but feed leaves out the dataset's label column 'labels'" ]
}

# ---- .npy files ------------------------------------------------------------------------------

@test "netrun data and --feed on a .npy file: --feed reads it (a header that lies is an error), a dataset is a .npz" {
  printf '\x93NUMPY\x01\x00\x76\x00{"descr": "<f4", "fortran_order": False, "shape": (2,), }            \n\x00\x00\x80\x3f\x00\x00\x00\x40' > a.npy
  run --separate-stderr "$NETRUN" data a.npy
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: a.npy: a NumPy .npy file: --feed reads it; a dataset is a .npz archive of one array per input (numpy.savez)" ]
  printf 'input x : f32[B]\nprint(x)\n' > p.net
  run --separate-stderr "$NETRUN" run p.net --feed x=a.npy
  [ "$status" -eq 1 ]
  [ "$output" = "" ]
  # The header's length says 118 bytes; 78 follow.
  [ "$stderr" = "netrun: error: a.npy: truncated: it ends in the 118-byte header" ]
  # Told the truth (70 bytes), the same file is the array [1, 2].
  printf '\x93NUMPY\x01\x00\x46\x00{"descr": "<f4", "fortran_order": False, "shape": (2,), }            \n\x00\x00\x80\x3f\x00\x00\x00\x40' > a.npy
  run --separate-stderr "$NETRUN" run p.net --feed x=a.npy
  [ "$status" -eq 0 ]
  [ "$output" = "[1. 2.]" ]
}
