#!/usr/bin/env bats
# train.bats — `netrun train`, `eval` and `predict` (src/train/train.c,
# src/train/loop.c and the trainer files): a short run on real data whose loss falls, determinism,
# resuming (at an epoch boundary and after SIGINT/SIGTERM) to exactly the
# parameters of an uninterrupted run, checkpoint and data errors, the
# progress lines and the JSON log, the optimizers against updates computed
# by hand, the learning-rate schedules, and the small examples' results.
#
# Runs on Fashion-MNIST use --limit (the first N images of each split) and
# one or two epochs; the whole file takes about 20 s of CPU.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  EX=$ROOT/examples
  MLP=$EX/fashion_mlp.net
  cd "$BATS_TEST_TMPDIR"
}

# A --log file without the fields that measure time and memory.
untimed() { jq -c 'del(.samples_per_s, .seconds, .peak_memory_bytes)' "$1"; }

# The value of a one-element tensor NAME in checkpoint FILE.
ckpt_value() { "$NETRUN" checkpoint "$2" | awk -v n="$1" '$1 == n && $(NF - 1) == "value" { print $NF }'; }

# A checkpoint's description without its first line (which names the file).
ckpt_body() { "$NETRUN" checkpoint "$1" | tail -n +2; }

# near A B [TOL]: |A - B| <= TOL (default 1e-6), or say both.
near() {
  awk -v a="$1" -v b="$2" -v t="${3:-1e-6}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }' ||
    { echo "got $1, expected $2 (within ${3:-1e-6})"; return 1; }
}

# ---- a short run on real data ----------------------------------------------------

@test "2000 Fashion-MNIST images, one epoch: the loss falls by more than 0.8" {
  run --separate-stderr "$NETRUN" train "$MLP" --limit 2000 --epochs 1 --seed 7 --log a.jsonl
  [ "$status" -eq 0 ]
  # 16 steps of 128 (the last of 80); the first loss is about ln 10 = 2.30.
  [ "$(jq -s '[.[] | select(.event == "step")] | length' a.jsonl)" -eq 16 ]
  first=$(jq -s '[.[] | select(.event == "step")][0].loss' a.jsonl)
  last10=$(jq -s '[.[] | select(.event == "step")][-10:] | map(.loss) | add / 10' a.jsonl)
  echo "first step's loss $first, mean of the last 10 $last10"
  near "$first" 2.3 0.25
  awk -v f="$first" -v l="$last10" 'BEGIN { exit !(l < f - 0.8) }'
  # The test split is evaluated once, and beats chance (10%) by far.
  acc=$(jq -s '[.[] | select(.event == "eval")][0].accuracy' a.jsonl)
  awk -v a="$acc" 'BEGIN { exit !(a > 0.4) }'
}

@test "one seed gives one log, but for the timings; another seed another" {
  for s in a b; do "$NETRUN" train "$MLP" --limit 1000 --epochs 1 --seed 3 --log $s.jsonl >/dev/null 2>&1; done
  "$NETRUN" train "$MLP" --limit 1000 --epochs 1 --seed 4 --log c.jsonl >/dev/null 2>&1
  untimed a.jsonl > a.txt
  untimed b.jsonl > b.txt
  untimed c.jsonl > c.txt
  diff a.txt b.txt
  ! diff -q a.txt c.txt
}

# ---- resuming ------------------------------------------------------------------------

@test "2 epochs straight = 1 epoch, then --resume for the second: the same checkpoint, byte for byte" {
  "$NETRUN" train "$MLP" --limit 1000 --epochs 2 --save a.ckpt --log a.jsonl >/dev/null 2>&1
  "$NETRUN" train "$MLP" --limit 1000 --epochs 1 --save b.ckpt --log b.jsonl >/dev/null 2>&1
  run --separate-stderr "$NETRUN" train "$MLP" --limit 1000 --epochs 2 --resume b.ckpt --save b.ckpt --log b.jsonl
  [ "$status" -eq 0 ]
  # Overriding a setting the checkpoint holds says so.
  grep -Fx "netrun: note: epochs was 1 in the checkpoint; resuming with 2" <<<"$stderr"
  [ "$(ckpt_body a.ckpt)" = "$(ckpt_body b.ckpt)" ]
  cmp a.ckpt b.ckpt
  # The resumed log continues the first: the same steps, losses and
  # evaluations (loss_smooth restarts; the first leg ends with its summary).
  diff <(untimed a.jsonl | jq -c 'del(.loss_smooth)') \
       <(untimed b.jsonl | jq -c 'select(.event != "summary" or .epoch == 2) | del(.loss_smooth)')
}

# train_bg LOG ARGS...: starts a run on 32000 images, batches of 32 (1000 steps
# an epoch: 0.4 s on a host that trains 80,000 images a second), logging to
# LOG, in the background; its pid is in $pid.
train_bg() {
  local log=$1
  shift
  "$NETRUN" train "$MLP" --limit 32000 --batch 32 --epochs 2 --log "$log" "$@" >/dev/null 2>>bg.err &
  pid=$!
}

# steps_logged LOG: step lines in LOG.
steps_logged() { grep -c '"event": "step"' "$1" 2>/dev/null || true; }

# wait_steps LOG N: waits until LOG holds N step lines (at most 30 s, or
# 30 NETRUN_START_SECONDS under valgrind).
wait_steps() {
  local i
  for i in $(seq $((600 * ${NETRUN_START_SECONDS:-1}))); do
    [ "$(steps_logged "$1")" -ge "$2" ] && return 0
    sleep 0.05
  done
  return 1
}

@test "SIGINT in epoch 1, SIGTERM in epoch 2, each resumed: exactly the parameters of an uninterrupted run" {
  "$NETRUN" train "$MLP" --limit 32000 --batch 32 --epochs 2 --save full.ckpt >/dev/null 2>&1
  # Interrupted in the middle of epoch 1 ...
  train_bg int.jsonl --save int.ckpt
  wait_steps int.jsonl 20
  kill -INT "$pid"
  st=0; wait "$pid" || st=$?
  cat bg.err
  [ "$st" -eq 130 ]
  grep -Ex 'netrun: interrupted at epoch 1, step [0-9]+' bg.err
  grep -Ex 'saved int.ckpt \(epoch 0, step [0-9]+\)' bg.err
  step=$("$NETRUN" checkpoint int.ckpt | awk '$1 == "step:" { print $2 }')
  [ "$step" -ge 20 ] && [ "$step" -lt 1000 ]
  # ... resumed, and stopped again in the middle of epoch 2 ...
  train_bg int.jsonl --save int.ckpt --resume int.ckpt
  wait_steps int.jsonl 1030
  kill -TERM "$pid"
  st=0; wait "$pid" || st=$?
  [ "$st" -eq 143 ]
  grep -Ex 'netrun: interrupted at epoch 2, step [0-9]+' bg.err
  step=$("$NETRUN" checkpoint int.ckpt | awk '$1 == "step:" { print $2 }')
  [ "$step" -gt 1000 ] && [ "$step" -lt 2000 ]
  # ... and resumed to the end.
  "$NETRUN" train "$MLP" --limit 32000 --batch 32 --epochs 2 --save int.ckpt --resume int.ckpt >/dev/null 2>&1
  [ "$(ckpt_body full.ckpt)" = "$(ckpt_body int.ckpt)" ]
  cmp full.ckpt int.ckpt
}

# ---- checkpoint errors ---------------------------------------------------------------

@test "--resume: a corrupt, a truncated, a missing checkpoint, and a file that is not one" {
  "$NETRUN" train "$MLP" --limit 256 --epochs 1 --save good.ckpt >/dev/null 2>&1
  size=$(stat -c %s good.ckpt)
  # One byte in the middle of the parameters, every bit flipped.
  cp good.ckpt bad.ckpt
  off=$((size / 2))
  byte=$(od -An -tu1 -j $off -N 1 bad.ckpt | tr -d ' ')
  printf "\\$(printf %03o $((byte ^ 255)))" | dd of=bad.ckpt bs=1 seek=$off conv=notrunc status=none
  run ! cmp -s good.ckpt bad.ckpt
  run --separate-stderr "$NETRUN" train "$MLP" --limit 256 --resume bad.ckpt
  [ "$status" -eq 1 ]
  [[ "$stderr" =~ ^"netrun: error: bad.ckpt: corrupt (checksum mismatch: stored "[0-9a-f]{8}", computed "[0-9a-f]{8}")"$ ]]
  head -c 1000 good.ckpt > cut.ckpt
  run --separate-stderr "$NETRUN" train "$MLP" --limit 256 --resume cut.ckpt
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: cut.ckpt: truncated (1000 bytes, expected $size)" ]
  run --separate-stderr "$NETRUN" train "$MLP" --limit 256 --resume nowhere.ckpt
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: nowhere.ckpt: cannot read: No such file or directory" ]
  echo "W1 = 0" > text.ckpt
  run --separate-stderr "$NETRUN" train "$MLP" --limit 256 --resume text.ckpt
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: text.ckpt: not a netrun checkpoint (bad magic)" ]
  # Nothing was trained, and nothing was written over the checkpoint.
  [ -z "$output" ]
  cmp good.ckpt <(head -c "$size" good.ckpt)
}

@test "--resume with a checkpoint of another program is refused by its hash" {
  cat > linear.net <<'NET'
import "nn"
input x : f32[B, 784]
input y : i64[B]
param W : [784, 10] = zeros()
param b : [10] = zeros()
loss = cross_entropy(linear(x, W, b), y)
train {
  data = "fashion-mnist"
  lr = 0.1
}
NET
  "$NETRUN" train linear.net --limit 256 --save linear.ckpt >/dev/null 2>&1
  run --separate-stderr "$NETRUN" train "$MLP" --limit 256 --resume linear.ckpt
  [ "$status" -eq 1 ]
  [[ "$stderr" =~ ^"netrun: error: linear.ckpt: this checkpoint belongs to another program (hash "[0-9a-f]{16}", this one "[0-9a-f]{16}")"$ ]]
  # eval and predict only read the parameters, which must be there.
  run --separate-stderr "$NETRUN" eval "$MLP" --limit 256 --weights linear.ckpt
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: linear.ckpt has no value for 'dense.W'" ]
}

@test "overriding settings at resume says so, in the checkpoint's terms" {
  "$NETRUN" train "$MLP" --limit 256 --epochs 1 --save a.ckpt >/dev/null 2>&1
  run --separate-stderr "$NETRUN" train "$MLP" --limit 256 --epochs 2 --lr 0.05 --batch 64 --resume a.ckpt --no-save
  [ "$status" -eq 0 ]
  grep -Fx "netrun: note: --lr 0.05 overrides the script's lr" <<<"$stderr"
  # Numbers in their shortest form that reads back exactly.
  grep -Fx "netrun: note: lr was 0.1 in the checkpoint; resuming with 0.05" <<<"$stderr"
  grep -Fx "  lr = 0.1" <<<"$("$NETRUN" checkpoint a.ckpt)"
  grep -Fx "netrun: note: batch was 128 in the checkpoint; resuming with 64" <<<"$stderr"
  grep -Fx "netrun: note: epochs was 1 in the checkpoint; resuming with 2" <<<"$stderr"
  # Another optimizer has other state: its absence is an error.
  run --separate-stderr "$NETRUN" train "$MLP" --limit 256 --epochs 2 --optimizer momentum --resume a.ckpt
  [ "$status" -eq 1 ]
  grep -F "dense.W@VELOCITY" <<<"$stderr"
}

# ---- data errors -----------------------------------------------------------------------

@test "data errors: a wrong path, a CSV whose columns do not fit the inputs, too few columns" {
  run --separate-stderr "$NETRUN" train "$MLP" --data nowhere.csv
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: note: --data nowhere.csv overrides the script's data
netrun: error: cannot read nowhere.csv: No such file or directory" ]
  run --separate-stderr "$NETRUN" train "$MLP" --data nowhere/images.idx:nowhere/labels.idx
  [ "$status" -eq 1 ]
  [ "${stderr_lines[-1]}" = "netrun: error: cannot read nowhere/images.idx: No such file or directory" ]
  # Two features per row, where the model reads 784.
  printf 'a,b,label\n0.5,0.25,1\n0,1,0\n' > two.csv
  run --separate-stderr "$NETRUN" train "$MLP" --data two.csv
  [ "$status" -eq 1 ]
  [ "${stderr_lines[-3]}" = "$MLP:4:1: error: input 'x' is declared f32[B, 784] (784 values per example), but column 'x' has shape [2, 2] (2 values per example)" ]
  [ -z "$output" ]
  # Three inputs, two columns.
  cat > three.net <<'NET'
input x : f32[B, 2]
input z : f32[B, 2]
input y : i64[B]
param W : [2, 2] = zeros()
loss = mean((x + z) @ W)
train {
  data = "two.csv"
}
NET
  run --separate-stderr "$NETRUN" train three.net
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: the dataset two.csv has 2 columns (x, y) but 3 inputs are fed (x, z, y); name them with feed = [...] in the train block" ]
  # A malformed row points at itself.
  printf 'a,b,label\n0.5,0.25,1\n0,1\n' > ragged.csv
  run --separate-stderr "$NETRUN" train three.net --data ragged.csv
  [ "$status" -eq 1 ]
  [ "${stderr_lines[1]}" = "ragged.csv:3:1: error: this row has 2 values, the rows before have 3" ]
  # No data at all.
  sed '/train {/,$d' three.net > nodata.net
  run --separate-stderr "$NETRUN" train nodata.net
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: nodata.net names no data: add data = \"...\" to its train block, or give --data SPEC" ]
}

# block_error VERB SETTINGS MESSAGE: netrun VERB fails on the MLP with a
# train block of SETTINGS appended, and its first error is MESSAGE.
block_error() {
  printf 'import "%s"\ntrain {\n%s\n}\n' "$MLP" "$2" > block.net
  run --separate-stderr "$NETRUN" "$1" block.net --limit 10
  [ "$status" -eq 1 ]
  [ "${stderr_lines[0]}" = "$3" ] || { echo "$stderr"; return 1; }
}

@test "configuration errors point at the setting" {
  printf 'import "%s"\ntrain {\n  lr = -1\n  schedul = cosine\n}\n' "$MLP" > bad.net
  run --separate-stderr "$NETRUN" train bad.net
  [ "$status" -eq 1 ]
  [ "${stderr_lines[0]}" = "bad.net:4:3: error: unknown train setting 'schedul' (did you mean 'schedule'?)" ]
  [ "${stderr_lines[3]}" = "bad.net:3:3: error: the learning rate must be positive, got -1" ]
  run "$NETRUN" train "$MLP" --epochs 0
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --epochs needs a whole number of at least 1, not '0'" ]
  run "$NETRUN" train "$MLP" --keep-best
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --keep-best needs --save PATH" ]
  # A label that is not an input (it used to crash), weight decay that adam would ignore.
  block_error train "label = logits" "block.net:3:1: error: train: label names 'logits', which is not an input"
  block_error eval "label = nothing" "block.net:3:1: error: train: label names 'nothing', which is not an input"
  # A misspelt value names the script's nearest value, or input.
  block_error train "metric = logit" "block.net:3:1: error: train: metric names 'logit', which the script does not define (did you mean 'logits'?)"
  block_error train "label = yy" "block.net:3:1: error: train: label names 'yy', which is not an input (did you mean 'y'?)"
  block_error train $'optimizer = adam\nweight_decay = 0.1' \
    "block.net:4:1: error: adam has no weight decay: use adamw (decoupled decay), or sgd or momentum (an L2 penalty)"
  # Errors in the script are counted once.
  printf 'x = nothing1\ny = nothing2\n' > two.net
  for verb in "dump --train" "predict --output x" "train" "eval"; do
    # shellcheck disable=SC2086  # the verb and its options
    run --separate-stderr "$NETRUN" $verb two.net
    [ "$status" -eq 1 ]
    [ "$(grep -c '^two.net:' <<<"$stderr")" -eq 2 ]
    [ "${stderr_lines[-1]}" = "2 errors" ] && [ "${stderr_lines[-2]}" != "2 errors" ]
  done
}

@test "--optimizer with an unknown name is a usage error naming the valid ones" {
  run --separate-stderr "$NETRUN" train "$MLP" --optimizer adagrad
  [ "$status" -eq 2 ]
  [ "$stderr" = "netrun: unknown optimizer 'adagrad' (expected sgd, momentum, adam, adamw or rmsprop)
Try 'netrun train --help'." ]
  run --separate-stderr "$NETRUN" train "$MLP" --optimizer
  [ "$status" -eq 2 ]
  [ "${stderr_lines[0]}" = "netrun: --optimizer needs a name: sgd, momentum, adam, adamw or rmsprop" ]
  # In the script, the error points at the setting.
  block_error train "optimizer = adagrad" "block.net:3:1: error: unknown optimizer 'adagrad' (expected sgd, momentum, adam, adamw or rmsprop)"
}

@test "a train block's data is read from its script's folder, --data from the working folder" {
  mkdir sub
  cat > sub/model.net <<'NET'
input x : f32[B, 2]
input y : f32[B, 1]
param W : [2, 1] = zeros()
loss = mean((x @ W - y) ** 2)
train {
  data   = "rows.csv"
  lr     = 0.5
  batch  = 2
  epochs = 3
}
NET
  printf 'a,b,y\n1,0,2\n0,1,-1\n' > sub/rows.csv
  # From the working folder, from the script's, and through an import: the
  # file beside the script that names it, the same parameters each time.
  W() { "$NETRUN" predict sub/model.net --weights "$1" --output W | tr -d '[] ' | paste -sd' '; }
  "$NETRUN" train sub/model.net --save a.ckpt >/dev/null 2>&1
  (cd sub && "$NETRUN" train model.net --save ../b.ckpt) >/dev/null 2>&1
  printf 'import "sub/model"\n' > top.net
  "$NETRUN" train top.net --save c.ckpt >/dev/null 2>&1
  [ "$(W a.ckpt)" = "1.75 -0.875" ]
  [ "$(W b.ckpt)" = "1.75 -0.875" ]
  [ "$(W c.ckpt)" = "1.75 -0.875" ]
  # eval reads it from the same place.
  run --separate-stderr "$NETRUN" eval top.net --weights a.ckpt
  [ "$status" -eq 0 ]
  [ "$output" = "rows.csv: loss 0.039062 (2 examples)" ]
  # A setting in the importing script is read from that script's folder.
  printf 'import "sub/model"\ntrain {\n  data = "sub/missing.csv"\n}\n' > over.net
  run --separate-stderr "$NETRUN" train over.net
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: cannot read sub/missing.csv: No such file or directory" ]
  cd sub
  run --separate-stderr "$NETRUN" train ../over.net
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: cannot read ../sub/missing.csv: No such file or directory" ]
  cd ..
  # --data is the working folder's: ./rows.csv (targets doubled), not sub/rows.csv.
  printf 'a,b,y\n1,0,4\n0,1,-2\n' > rows.csv
  "$NETRUN" train sub/model.net --data rows.csv --save d.ckpt >/dev/null 2>&1
  [ "$(W d.ckpt)" = "3.5 -1.75" ]
  rm rows.csv
  run --separate-stderr "$NETRUN" eval sub/model.net --data rows.csv
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: cannot read rows.csv: No such file or directory" ]
  # An IDX pair: both files from the script's folder.
  "$BATS_TEST_DIRNAME/data/mkidx.sh" sub/img.idx "2 2" "255 0 0 255"
  "$BATS_TEST_DIRNAME/data/mkidx.sh" sub/lab.idx "2" "0 1"
  cat > sub/idx.net <<'NET'
import "nn"
input x : f32[B, 2]
input y : i64[B]
param W : [2, 2] = zeros()
logits = x @ W
loss = cross_entropy(logits, y)
train {
  data   = "img.idx:lab.idx"
  metric = logits
  epochs = 1
}
NET
  run "$NETRUN" eval sub/idx.net
  [ "$status" -eq 0 ]
  [ "$output" = "img.idx:lab.idx: loss 0.693147 accuracy 0.5000 (2 examples)" ]
}

# ---- progress and the log ---------------------------------------------------------------

# The MLP with a progress line every 4 steps.
mlp_every4() { printf 'import "%s"\ntrain {\n  log_every = 4\n}\n' "$MLP" > every4.net; }

@test "not on a terminal: an iter line every log_every steps, a line per epoch, a summary" {
  mlp_every4
  run --separate-stderr "$NETRUN" train every4.net --limit 1024 --epochs 1
  [ "$status" -eq 0 ]
  echo "$stderr"
  [ "${stderr_lines[0]}" = "netrun: note: --epochs 1 overrides the script's epochs" ]
  [ "${stderr_lines[1]}" = "training every4.net: 1024 examples (1024 to evaluate), 8 steps of 128 per epoch, sgd lr 0.1, 1 epoch" ]
  [[ "${stderr_lines[2]}" =~ ^"iter 4  epoch 1  loss "[0-9]+\.[0-9]{4}"  lr 0.1  samples/s "[0-9]+$ ]]
  [[ "${stderr_lines[3]}" =~ ^"iter 8  epoch 1  loss "[0-9]+\.[0-9]{4}"  lr 0.1  samples/s "[0-9]+$ ]]
  [ "${#stderr_lines[@]}" -eq 4 ]
  [[ "$stderr" != *$'\r'* ]]
  # On standard output: the epoch and the summary: its time and speed, then
  # the peak resident memory against the data read (both splits, whole,
  # whatever --limit) and the model (parameters and optimizer state).
  [ "${#lines[@]}" -eq 3 ]
  [[ "${lines[0]}" =~ ^"epoch 1/1: train loss "[0-9]\.[0-9]{4}" acc "[01]\.[0-9]{4}" | test loss "[0-9]\.[0-9]{4}" acc "[01]\.[0-9]{4}" | "[0-9]+\.[0-9]" s, "[0-9]+" samples/s"$ ]]
  [[ "${lines[1]}" =~ ^"trained 1 epoch (8 steps, 1024 samples) in "[0-9]+\.[0-9]" s, "[0-9]+" samples/s; best test accuracy "[01]\.[0-9]{4}$ ]]
  [[ "${lines[2]}" =~ ^"peak memory "[0-9]+" MB (data 55 MB, model 2.1 MB)"$ ]]
  peak=$(awk '{ print $3 }' <<<"${lines[2]}")
  # Near data + model: the rest is the process itself (~7 MB), gradients and
  # a batch's activations.  (AddressSanitizer's shadow memory is not.)
  [ "$peak" -ge 57 ]
  [ -n "${ASAN_OPTIONS-}" ] || [ "$peak" -le 100 ]
}

@test "on a terminal: a live progress line with samples/s, loss and ETA, rewritten in place" {
  command -v script >/dev/null || skip "script(1) is not installed"
  mlp_every4
  script -qec "'$NETRUN' train every4.net --limit 1024 --epochs 1" /dev/null > tty.txt
  # The line of step 3 of 8, and of the last, ended by the epoch's line.
  grep -aEq $'\repoch 1/1  3/8  [0-9]+ samples/s  loss [0-9]+\\.[0-9]{4}  ETA [0-9]+:[0-9]{2}   ' tty.txt
  grep -aEq $'\repoch 1/1  8/8  [0-9]+ samples/s  loss [0-9]+\\.[0-9]{4}  ETA 0:00   \r?\n' tty.txt
  grep -aEq '^epoch 1/1: train loss ' tty.txt
  grep -aEq '^trained 1 epoch \(8 steps, 1024 samples\)' tty.txt
  # No greppable iter lines on a terminal.
  ! grep -aq '^iter ' tty.txt
}

@test "--log: JSON lines of steps, epochs, evaluations and a summary; netrun plot draws them" {
  run --separate-stderr "$NETRUN" train "$MLP" --limit 1024 --epochs 2 --log run.jsonl
  [ "$status" -eq 0 ]
  # Every line is one JSON object.
  [ "$(jq -c . run.jsonl | wc -l)" -eq "$(wc -l < run.jsonl)" ]
  [ "$(jq -r .event run.jsonl | sort | uniq -c | awk '{ printf "%s=%s ", $2, $1 }')" = "epoch=2 eval=2 step=16 summary=1 " ]
  [ "$(jq -r 'select(.event == "step") | keys_unsorted | join(",")' run.jsonl | sort -u)" = \
    "event,epoch,step,samples,loss,loss_smooth,lr,samples_per_s" ]
  [ "$(jq -r 'select(.event == "epoch") | keys_unsorted | join(",")' run.jsonl | sort -u)" = \
    "event,epoch,step,train_loss,train_accuracy,seconds" ]
  [ "$(jq -r 'select(.event == "eval") | keys_unsorted | join(",")' run.jsonl | sort -u)" = \
    "event,epoch,step,split,loss,accuracy" ]
  [ "$(jq -c 'select(.event == "summary") | del(.seconds, .peak_memory_bytes)' run.jsonl)" = \
    '{"event":"summary","epoch":2,"step":16,"samples":2048,"data_bytes":55440000,"model_bytes":2143272}' ]
  [ "$(jq 'select(.event == "summary") | .peak_memory_bytes > 55440000' run.jsonl)" = true ]
  # Steps count on; the samples of the last step of an epoch are all of it.
  [ "$(jq -s -c '[.[] | select(.event == "step") | .step]' run.jsonl)" = "[$(seq -s, 16)]" ]
  [ "$(jq -c 'select(.event == "step" and .step == 8) | [.epoch, .samples]' run.jsonl)" = "[1,1024]" ]
  # The last eval line is what the epoch line printed.
  acc=$(jq -r 'select(.event == "eval" and .epoch == 2) | .accuracy' run.jsonl)
  [[ "${lines[1]}" == *"| test loss "*" acc $(printf %.4f "$acc") |"* ]]
  run --separate-stderr "$NETRUN" plot run.jsonl -o run.svg
  [ "$status" -eq 0 ]
  grep -q '<svg' run.svg
  grep -q '</svg>' run.svg
}

# ---- the optimizers against hand-computed updates ---------------------------------------
#
# w.net: one parameter w = 2 and loss = sum(w * w), so the gradient is 2 w.
# A CSV of one row feeds inputs the loss does not read; batch 1 makes one
# step per epoch, and 2 epochs two steps.  lr = 0.1 throughout.

# opt_run SETTING...: trains w.net for 2 steps with these extra train
# settings (one per argument) and prints w.
opt_run() {
  printf 'x,y\n0,0\n' > one.csv
  {
    printf 'input x : f32[B, 1]\ninput y : f32[B]\nparam w : [1] = [2.0]\nloss = sum(w * w)\n'
    printf 'train {\n  data = "one.csv"\n  batch = 1\n  epochs = 2\n  lr = 0.1\n'
    printf '  %s\n' "$@"
    printf '}\n'
  } > w.net
  "$NETRUN" train w.net --save w.ckpt >/dev/null 2>w.err || { cat w.err; return 1; }
  ckpt_value w w.ckpt
}

@test "sgd: w -= lr g; with weight_decay, w -= lr (g + wd w)" {
  # g = 4, w = 2 - 0.1 * 4 = 1.6; g = 3.2, w = 1.6 - 0.32 = 1.28
  near "$(opt_run 'optimizer = sgd')" 1.28
  # wd 0.1: w = 2 - 0.1 (4 + 0.2) = 1.58; g = 3.16, w = 1.58 - 0.1 (3.16 + 0.158) = 1.2482
  near "$(opt_run 'optimizer = sgd' 'weight_decay = 0.1')" 1.2482
}

@test "plain sgd on a matmul's gradient is one fused sgd_matmul step, with the same update" {
  # W [2, 1] = [[1], [2]], x = [[1, 3]]: loss = sum(x @ W) = 1 + 6 = 7, and
  # W@GRAD = x^T @ ones = [[1], [3]]: one step of lr 0.1 gives
  # W = [[0.9], [1.7]], a second [[0.8], [1.4]].
  printf 'x0,x1,y\n1,3,0\n' > row.csv
  for opt in sgd momentum; do
    {
      printf 'input x : f32[B, 2]\ninput y : f32[B]\nparam W : [2, 1] = [[1.0], [2.0]]\n'
      printf 'loss = sum(x @ W)\n'
      printf 'train {\n  data = "row.csv"\n  batch = 1\n  epochs = 2\n  lr = 0.1\n  optimizer = %s\n  momentum = 0\n}\n' "$opt"
    } > mm_$opt.net
  done
  run "$NETRUN" dump --train mm_sgd.net
  [ "$status" -eq 0 ]
  [[ "$output" == *"{ParamOut=[W]} = sgd_matmul(Param=[W], X=[x], Y=[t.1@GRAD], LearningRate=[learning_rate@LR]) {transpose_x=true, transpose_y=false}  # grad of matmul at mm_sgd.net:4"* ]]
  [[ "$output" != *"= sgd(Param=[W]"* ]]
  # Another optimizer reads the gradient itself: no fusion.
  run "$NETRUN" dump --train mm_momentum.net
  [[ "$output" != *"sgd_matmul"* ]]
  "$NETRUN" train mm_sgd.net --save a.ckpt >/dev/null 2>&1
  "$NETRUN" train mm_momentum.net --save b.ckpt >/dev/null 2>&1
  a=$("$NETRUN" checkpoint a.ckpt | awk '$1 == "W" { $1 = $1; print }')
  [ "$a" = "$("$NETRUN" checkpoint b.ckpt | awk '$1 == "W" { $1 = $1; print }')" ]
  [ "$a" = "W f32 [2, 1] mean 1.1 std 0.3 min 0.8 max 1.4" ]
}

@test "conv2d, bias, relu and a 2x2 max pool run as one fused op, with the bits of --no-fuse" {
  # netrun time shows which ops ran: fused_conv2d stands for the three,
  # but not where a value between them is read elsewhere (t).
  {
    printf 'input x : f32[2, 1, 8, 8] = uniform_random([2, 1, 8, 8], min=-1.0, max=1.0)\n'
    printf 'param K : [3, 1, 3, 3] = kaiming()\nparam c : [3, 1, 1] = zeros()\nparam J : [3, 3, 1, 1] = ones()\n'
    printf 'h = relu(conv2d(x, K, paddings=[1, 1]) + c)\n'
    printf 't = conv2d(h, J)\ng = relu(t + c)\nloss = sum(g) + sum(t)\n'
  } > conv.net
  run "$NETRUN" time --iterations 1 conv.net
  [ "$status" -eq 0 ]
  [ "$(awk '$1 == "fused_conv2d" || $1 == "conv2d" || $1 == "relu" { print $1, $2 }' <<< "$output" | sort)" = \
    "$(printf 'conv2d 1\nfused_conv2d 1\nrelu 1')" ]
  run "$NETRUN" time --iterations 1 --no-fuse conv.net
  [ "$(awk '$1 == "conv2d" || $1 == "relu" { print $1, $2 }' <<< "$output" | sort)" = "$(printf 'conv2d 2\nrelu 2')" ]
  [[ "$output" != *fused* ]]
  # With groups, a [1, O, 1, 1] bias, and pools over odd sides (a row and a
  # column no window covers), the gradients are the same bits too.
  {
    printf 'input x : f32[3, 4, 7, 9] = uniform_random([3, 4, 7, 9], min=-1.0, max=1.0)\n'
    printf 'param k : [6, 2, 3, 3] = uniform(-0.3, 0.3)\nparam c : [1, 6, 1, 1] = uniform(-0.2, 0.2)\n'
    printf 'input r : f32[3, 6, 3, 4] = uniform_random([3, 6, 3, 4], min=-1.0, max=1.0)\n'
    printf 'h = max_pool2d(relu(conv2d(x, k, paddings=[1, 1], groups=2) + c), ksize=[2, 2])\n'
    printf 'loss = sum(h * r)\n'
  } > odd.net
  run "$NETRUN" time --iterations 1 odd.net
  [[ "$output" == *fused_conv2d* && "$output" != *max_pool2d* ]]
  "$NETRUN" grad --format json odd.net > fused.json
  "$NETRUN" grad --format json --no-fuse odd.net > plain.json
  cmp fused.json plain.json
  [ "$(jq '.grads["k"].data | length' fused.json)" -eq 108 ]
  # Training (the backward fused too) writes the same checkpoint either way.
  "$NETRUN" train "$EX/fashion_cnn.net" --limit 256 --epochs 1 --save fused.ckpt >/dev/null 2>&1
  "$NETRUN" train "$EX/fashion_cnn.net" --limit 256 --epochs 1 --save plain.ckpt --no-fuse >/dev/null 2>&1
  cmp fused.ckpt plain.ckpt
}

@test "one thread, two or three: the same checkpoint, byte for byte" {
  # Loops split over threads (src/exec/par.h) write disjoint elements and keep
  # every sum in one order; GEMMs are cut into parts fixed by their shapes
  # (src/exec/par.c; tests/trust_threads.bats tries more environments).  Three
  # threads on two cores: more threads than cores, and an uneven share of
  # a convolution's batches of images.
  OMP_NUM_THREADS=1 "$NETRUN" train "$EX/fashion_cnn.net" --limit 256 --epochs 1 --save one.ckpt >/dev/null 2>&1
  OMP_NUM_THREADS=2 "$NETRUN" train "$EX/fashion_cnn.net" --limit 256 --epochs 1 --save two.ckpt >/dev/null 2>&1
  OMP_NUM_THREADS=3 "$NETRUN" train "$EX/fashion_cnn.net" --limit 256 --epochs 1 --save three.ckpt >/dev/null 2>&1
  cmp one.ckpt two.ckpt
  cmp one.ckpt three.ckpt
}

@test "convolutions large enough to spread their images over threads: right gradients, same bits on 1, 2 or 3 threads" {
  # Each layer's GEMMs per batch of images are large enough (src/ops/conv.c
  # CONV_THREAD_WORK) for batches to go to threads: 5 batches of one image,
  # then (groups=2, 8x8 maps) a batch of four images and one of one, each
  # slice of batches summing its own filter gradient.  avg_pool2d for the
  # finite differences (a max pool's windows change their pick under them).
  # Three threads: more than the second layer has batches for.
  {
    printf 'input x : f32[5, 4, 16, 16] = uniform_random([5, 4, 16, 16], min=-1.0, max=1.0)\n'
    printf 'param k : [32, 4, 3, 3] = uniform(-0.3, 0.3)\nparam c : [32, 1, 1] = uniform(-0.2, 0.2)\n'
    printf 'param j : [16, 16, 3, 3] = uniform(-0.3, 0.3)\nparam d : [1, 16, 1, 1] = uniform(-0.2, 0.2)\n'
    printf 'input r : f32[5, 16, 8, 8] = uniform_random([5, 16, 8, 8], min=-1.0, max=1.0)\n'
    printf 'h = avg_pool2d(conv2d(x, k, paddings=[1, 1]) + c, ksize=[2, 2])\n'
    printf 'y = conv2d(h, j, paddings=[1, 1], groups=2) + d\nloss = sum(y * r)\n'
  } > linear.net
  run "$NETRUN" gradcheck --samples 40 linear.net
  [ "$status" -eq 0 ]
  [ "$(grep -cE ' ok( \(within f32 noise.*\))?$' <<< "$output")" -eq 4 ]
  # With relu and 2x2 max pools (fused, their gradients routed in the
  # gathering of each batch): one thread, two, three, unfused and the tape
  # give the same bits.
  {
    printf 'input x : f32[5, 4, 16, 16] = uniform_random([5, 4, 16, 16], min=-1.0, max=1.0)\n'
    printf 'param k : [32, 4, 3, 3] = uniform(-0.3, 0.3)\nparam c : [32, 1, 1] = uniform(-0.2, 0.2)\n'
    printf 'param j : [16, 16, 3, 3] = uniform(-0.3, 0.3)\nparam d : [1, 16, 1, 1] = uniform(-0.2, 0.2)\n'
    printf 'input r : f32[5, 16, 4, 4] = uniform_random([5, 16, 4, 4], min=-1.0, max=1.0)\n'
    printf 'h = max_pool2d(relu(conv2d(x, k, paddings=[1, 1]) + c), ksize=[2, 2])\n'
    printf 'y = max_pool2d(relu(conv2d(h, j, paddings=[1, 1], groups=2) + d), ksize=[2, 2])\nloss = sum(y * r)\n'
  } > fused.net
  OMP_NUM_THREADS=1 "$NETRUN" grad --format json fused.net > one.json
  OMP_NUM_THREADS=2 "$NETRUN" grad --format json fused.net > two.json
  OMP_NUM_THREADS=3 "$NETRUN" grad --format json fused.net > three.json
  OMP_NUM_THREADS=2 "$NETRUN" grad --format json --no-fuse fused.net > plain.json
  OMP_NUM_THREADS=2 "$NETRUN" grad --format json --tape fused.net > tape.json
  cmp one.json two.json
  cmp one.json three.json
  cmp two.json plain.json
  cmp two.json tape.json
  [ "$(jq '.grads["j"].data | length' two.json)" -eq 2304 ]
}

@test "input training: true in training steps, false in evaluation and predict (unless --set)" {
  printf 'x,y\n1,2\n2,4\n3,6\n4,8\n' > d.csv
  printf '1\n' > xs.csv
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
  data = "d.csv"
  batch = 4
  epochs = 1
  lr = 0.01
}
EOF
  # w = 1: the mean square error is (1 + 4 + 9 + 16) / 4 = 7.5, and the
  # training step adds the penalty.
  run --separate-stderr "$NETRUN" train m.net --save m.ckpt
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" == "epoch 1/1: train loss 107.5000 |"* ]]
  run "$NETRUN" eval m.net --weights m.ckpt
  [ "$status" -eq 0 ]
  # w = 1 + 0.01 * 15 = 1.15: (0.85^2 (1 + 4 + 9 + 16)) / 4 = 5.41875
  [ "$output" = "d.csv: loss 5.418750 (4 examples)" ]
  run "$NETRUN" predict m.net --weights m.ckpt --feed x=xs.csv --output pen
  [ "$output" = "0.0" ]
  run "$NETRUN" predict m.net --weights m.ckpt --feed x=xs.csv --output pen --set training=true
  [ "$output" = "100.0" ]
}

@test "momentum: v = mu v + g, w -= lr v; Nesterov: w -= lr (g + mu v)" {
  # v = 4, w = 2 - 0.4 = 1.6; g = 3.2, v = 0.9 * 4 + 3.2 = 6.8, w = 1.6 - 0.68 = 0.92
  near "$(opt_run 'optimizer = momentum')" 0.92
  # v = 4, w = 2 - 0.1 (4 + 0.9 * 4) = 1.24;
  # g = 2.48, v = 3.6 + 2.48 = 6.08, w = 1.24 - 0.1 (2.48 + 0.9 * 6.08) = 1.24 - 0.7952 = 0.4448
  near "$(opt_run 'optimizer = momentum' 'nesterov = true')" 0.4448
  # mu 0.5: v = 4, w = 1.6; g = 3.2, v = 2 + 3.2 = 5.2, w = 1.6 - 0.52 = 1.08
  near "$(opt_run 'optimizer = momentum' 'momentum = 0.5')" 1.08
  # Nesterov with wd 0.1: g' = 4.2, v = 4.2, w = 2 - 0.1 (4.2 + 3.78) = 1.202;
  # g' = 2.404 + 0.1202 = 2.5242, v = 3.78 + 2.5242 = 6.3042,
  # w = 1.202 - 0.1 (2.5242 + 0.9 * 6.3042) = 1.202 - 0.81980 = 0.382202
  near "$(opt_run 'optimizer = momentum' 'nesterov = true' 'weight_decay = 0.1')" 0.382202
}

@test "adam and adamw, with bias correction" {
  # Step 1: m = 0.1 * 4 = 0.4, v = 0.001 * 16 = 0.016; m^ = 0.4 / 0.1 = 4,
  #   v^ = 0.016 / 0.001 = 16, w = 2 - 0.1 * 4 / (sqrt 16 + 1e-8) = 1.9.
  # Step 2: g = 3.8, m = 0.36 + 0.38 = 0.74, v = 0.015984 + 0.01444 = 0.030424;
  #   m^ = 0.74 / 0.19 = 3.8947368, v^ = 0.030424 / 0.001999 = 15.219610,
  #   w = 1.9 - 0.1 * 3.8947368 / 3.9012318 = 1.9 - 0.0998335 = 1.8001665
  near "$(opt_run 'optimizer = adam')" 1.8001665 2e-6
  # beta1 0.5, beta2 0.9: step 1 moves by lr whatever the betas: w = 1.9;
  #   g = 3.8, m = 0.5 * 2 + 0.5 * 3.8 = 2.9, v = 0.9 * 1.6 + 0.1 * 14.44 = 2.884;
  #   m^ = 2.9 / 0.75 = 3.8666667, v^ = 2.884 / 0.19 = 15.178947,
  #   w = 1.9 - 0.1 * 3.8666667 / 3.8960169 = 1.9 - 0.0992467 = 1.8007533
  near "$(opt_run 'optimizer = adam' 'beta1 = 0.5' 'beta2 = 0.9')" 1.8007533 2e-6
  # adamw decays first, w -= lr coeff w, with coeff = weight_decay (default 0.01):
  #   w = 2 - 0.1 * 0.01 * 2 = 1.998, then - 0.1 as adam: 1.898;
  #   g = 3.796, w = 1.898 * 0.999 = 1.896102, m = 0.7396, v = 0.030393616,
  #   m^ = 3.8926316, v^ = 15.204410, w = 1.896102 - 0.0998294 = 1.7962726
  near "$(opt_run 'optimizer = adamw')" 1.7962726 2e-6
  # coeff 0.1: w = 2 - 0.02 - 0.1 = 1.88; g = 3.76, w = 1.88 * 0.99 = 1.8612,
  #   m = 0.736, v = 0.0301216, m^ = 3.8736842, v^ = 15.068334,
  #   w = 1.8612 - 0.0997910 = 1.7614090
  near "$(opt_run 'optimizer = adamw' 'weight_decay = 0.1')" 1.761409 2e-6
}

@test "clip_norm scales the gradients to a global norm of at most clip_norm" {
  # |g| = 4 > 1: g = 4 / (4 + 1e-6) = 0.99999975, w = 2 - 0.1 = 1.9;
  # |g| = 3.8 > 1: g = 1, w = 1.8.
  near "$(opt_run 'optimizer = sgd' 'clip_norm = 1')" 1.8
  # With momentum the clipped gradients add up: v = 1, w = 1.9; v = 0.9 + 1, w = 1.9 - 0.19 = 1.71
  near "$(opt_run 'optimizer = momentum' 'clip_norm = 1')" 1.71
  # A norm below the limit goes through: as plain sgd, 1.28.
  near "$(opt_run 'optimizer = sgd' 'clip_norm = 100')" 1.28
}

# lrs SETTING...: the learning rate of each of the 4 steps of w.net with a
# 2-row CSV (2 steps an epoch, 2 epochs), one per line, read from --log.
lrs() {
  printf 'x,y\n0,0\n1,1\n' > two.csv
  {
    printf 'input x : f32[B, 1]\ninput y : f32[B]\nparam w : [1] = [2.0]\nloss = sum(w * w)\n'
    printf 'train {\n  data = "two.csv"\n  batch = 1\n  epochs = 2\n  lr = 0.1\n'
    printf '  %s\n' "$@"
    printf '}\n'
  } > s.net
  rm -f s.jsonl
  "$NETRUN" train s.net --log s.jsonl >/dev/null 2>s.err || { cat s.err; return 1; }
  jq -r 'select(.event == "step") | .lr' s.jsonl | tr '\n' ' '
}

# lrs_near "A B C D" "E F G H": four rates, each within 1e-7.
lrs_near() {
  local a=($1) b=($2) i
  [ "${#a[@]}" -eq 4 ] || { echo "got '$1'"; return 1; }
  for i in 0 1 2 3; do near "${a[$i]}" "${b[$i]}" 1e-7; done
}

@test "clip_norm on gradients that are copies of one value scales each once" {
  # a@GRAD and b@GRAD are both an assign of sum's gradient (ones).  Without
  # the tape the executor shares an assign's storage instead of copying,
  # but never for a value written in place, as clip_by_global_norm writes
  # these: shared, they would be scaled twice (a = 2.975).  |g| = 2, so
  # each gradient is 1/2 and one step of lr 0.1 gives a = [2.95, 3.95].
  printf 'x,y\n0,0\n' > one.csv
  {
    printf 'input x : f32[B, 1]\ninput y : f32[B]\nparam a : [2] = [3.0, 4.0]\nparam b : [2] = [0.0, 0.0]\n'
    printf 'loss = sum(a + b)\n'
    printf 'train {\n  data = "one.csv"\n  batch = 1\n  epochs = 1\n  lr = 0.1\n  optimizer = sgd\n  clip_norm = 1\n}\n'
  } > ab.net
  "$NETRUN" train ab.net --save ab.ckpt >/dev/null 2>&1
  "$NETRUN" train ab.net --save plain.ckpt --no-fuse >/dev/null 2>&1
  cmp ab.ckpt plain.ckpt
  [ "$("$NETRUN" checkpoint ab.ckpt | awk '$1 == "a" || $1 == "b" { print $1, $9, $11 }')" = "$(printf 'a 2.95 3.95\nb -0.05 -0.05')" ]
}

@test "schedules: constant, step, cosine, warm-up, read from the log's lr" {
  # The rate of step k is taken at the fraction of epochs done, e = 0, 0.5, 1, 1.5.
  lrs_near "$(lrs)" "0.1 0.1 0.1 0.1"
  # step: lr * gamma^floor(e / step_size)
  lrs_near "$(lrs 'schedule = step' 'gamma = 0.5')" "0.1 0.1 0.05 0.05"
  lrs_near "$(lrs 'schedule = step' 'gamma = 0.5' 'step_size = 2')" "0.1 0.1 0.1 0.1"
  # cosine: lr (1 + cos(pi e / epochs)) / 2 = 0.1, 0.0853553, 0.05, 0.0146447
  lrs_near "$(lrs 'schedule = cosine')" "0.1 0.0853553 0.05 0.0146447"
  # warm-up over 1 epoch: times e / 1, from 0 (the first step does not move w)
  lrs_near "$(lrs 'warmup = 1')" "0 0.05 0.1 0.1"
  lrs_near "$(lrs 'warmup = 1' 'schedule = cosine')" "0 0.0426777 0.05 0.0146447"
  # The command line's --lr scales them all.
  printf 'x,y\n0,0\n1,1\n' > two.csv
  "$NETRUN" train s.net --lr 0.2 --log s2.jsonl >/dev/null 2>&1
  lrs_near "$(jq -r 'select(.event == "step") | .lr' s2.jsonl | tr '\n' ' ')" "0 0.0853553 0.1 0.0292893"
}

# ---- eval and predict with trained weights ----------------------------------------------

@test "eval --weights prints the accuracy of training's last evaluation" {
  "$NETRUN" train "$MLP" --limit 1000 --epochs 1 --save m.ckpt --log m.jsonl >/dev/null 2>&1
  run --separate-stderr "$NETRUN" eval "$MLP" --limit 1000 --weights m.ckpt
  [ "$status" -eq 0 ]
  loss=$(jq -r 'select(.event == "eval") | .loss' m.jsonl)
  acc=$(jq -r 'select(.event == "eval") | .accuracy' m.jsonl)
  [ "$output" = "test: loss $(printf %.6f "$loss") accuracy $(printf %.4f "$acc") (1000 examples)" ]
  # --keep-best: PATH.best holds the best epoch's parameters.
  "$NETRUN" train "$MLP" --limit 1000 --epochs 2 --save k.ckpt --keep-best >/dev/null 2>&1
  [ -f k.ckpt.best ]
  "$NETRUN" checkpoint k.ckpt.best | grep -Ex 'epoch: [12]'
}

@test "examples/xor.net trains to a loss under 0.001 and all four right" {
  cd "$ROOT"
  "$NETRUN" train examples/xor.net --save "$BATS_TEST_TMPDIR/xor.ckpt" > "$BATS_TEST_TMPDIR/xor.out" 2>&1
  cd "$BATS_TEST_TMPDIR"
  run "$NETRUN" eval "$EX/xor.net" --weights xor.ckpt --data "$EX/data/xor.csv"
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^"$EX/data/xor.csv: loss 0.000"[0-9]+" (4 examples)"$ ]]
  # predict uses the inputs' defaults, the four cases: p rounds to 0 1 1 0.
  run "$NETRUN" predict "$EX/xor.net" --weights xor.ckpt --output p
  [ "$status" -eq 0 ]
  [ "$(tr -d '[] ' <<<"$output" | awk '{ printf "%d", $1 + 0.5 }')" = 0110 ]
}

@test "examples/linreg.net recovers y = 3 x1 - 2 x2 + 0.5 to within 0.01" {
  cd "$ROOT"
  "$NETRUN" train examples/linreg.net --save "$BATS_TEST_TMPDIR/lr.ckpt" >/dev/null 2>&1
  cd "$BATS_TEST_TMPDIR"
  w=$("$NETRUN" predict "$EX/linreg.net" --weights lr.ckpt --set 'x=[[0, 0]]' --set 'y=[[0]]' --output W | tr -d '[]')
  b=$("$NETRUN" predict "$EX/linreg.net" --weights lr.ckpt --set 'x=[[0, 0]]' --set 'y=[[0]]' --output b | tr -d '[]')
  near "$(echo $w | cut -d' ' -f1)" 3 0.01
  near "$(echo $w | cut -d' ' -f2)" -2 0.01
  near "$b" 0.5 0.01
}

@test "examples/adding_rnn.net: over 93% on its test sequences (95.6% with seed 0); predict agrees with eval" {
  cd "$ROOT"
  "$NETRUN" train examples/adding_rnn.net --save "$BATS_TEST_TMPDIR/rnn.ckpt" >/dev/null 2>&1
  cd "$BATS_TEST_TMPDIR"
  run "$NETRUN" eval "$EX/adding_rnn.net" --weights rnn.ckpt --data "$EX/data/adding_test.csv"
  [ "$status" -eq 0 ]
  [[ "$output" =~ " accuracy 0."9[3-9][0-9]{2}" (500 examples)"$ ]]
  # The first 100 test sequences: predict's classes against their labels.
  sed -n 2,101p "$EX/data/adding_test.csv" | cut -d, -f1-20 > xs.csv
  sed -n 2,101p "$EX/data/adding_test.csv" | cut -d, -f21 > y.csv
  head -101 "$EX/data/adding_test.csv" > first100.csv
  "$NETRUN" predict "$EX/adding_rnn.net" --weights rnn.ckpt --feed xs=xs.csv --feed y=y.csv > classes.txt
  [ "$(wc -l < classes.txt)" -eq 100 ]
  right=$(paste -d' ' classes.txt y.csv | awk '$1 == $2' | wc -l)
  run "$NETRUN" eval "$EX/adding_rnn.net" --weights rnn.ckpt --data first100.csv
  [[ "$output" == *" accuracy $(awk -v r="$right" 'BEGIN { printf "%.4f", r / 100 }') (100 examples)" ]]
}
