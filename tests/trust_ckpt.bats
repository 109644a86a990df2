#!/usr/bin/env bats
# trust_ckpt.bats — checkpoints hold what was trained (issue 15): a script
# that rebinds a parameter's name saves, restores, evaluates and
# differentiates the parameter, not the name's last binding; crafted
# checkpoint fields are refused; signals, locks and stale temporary files
# around `train --save`.
bats_require_minimum_version 1.5.0

setup_file() {
  # tests/ckpt/mkckpt.c rewrites a checkpoint's fields (mkckpt set).
  export MKCKPT="$BATS_FILE_TMPDIR/mkckpt"
  cd "$BATS_TEST_DIRNAME/.."
  "${CC:-cc}" -std=c11 -D_GNU_SOURCE -O2 -Isrc -o "$MKCKPT" tests/ckpt/mkckpt.c src/io/checkpoint.c src/cli/option.c src/base/file.c \
    src/base/diag.c src/base/mem.c src/ir/tensor.c src/ir/program.c -lz -lm
}

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
  pid=
}

teardown() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi   # a background run a failed test left
}

# The tensors section of `netrun checkpoint FILE`.
tensors() { "$NETRUN" checkpoint "$1" | sed -n '/^tensors:/,$p'; }

# model NAME FORWARD...: a linear model whose forward lines are FORWARD,
# trained on rows.csv (y = 2 x + 1) for 4 epochs of 2 steps.
model() {
  local name=$1
  shift
  {
    printf 'input x : f32[B, 1]\ninput y : f32[B, 1]\n'
    printf 'param w : [1, 1] = constant(0.5)\nparam b : [1] = zeros()\n'
    printf '%s\n' "$@"
    printf 'loss = mean((pred - y) ** 2)\n'
    printf 'train {\n  data = "rows.csv"\n  lr = 0.01\n  batch = 2\n  epochs = 4\n}\n'
  } > "$name.net"
  printf 'x,y\n1,3\n2,5\n3,7\n4,9\n' > rows.csv
}

# ---- 1. a checkpoint holds what was trained ------------------------------------------

# The script without rebinding, whose checkpoint the others must match.
REF_TENSORS='tensors: 2 (2 elements, 8 bytes)
  w  f32   [1, 1]  value 1.12053668
  b  f32   [1]     value 0.133967683'

@test "a rebound parameter: the checkpoint holds the parameter; eval, predict and --resume use it" {
  model ref 'pred = x @ (w * 2.0) + b'
  model re 'w = w * 2.0' 'pred = x @ w + b'
  for s in ref re; do "$NETRUN" train $s.net --save $s.ckpt >/dev/null 2>&1; done
  [ "$(tensors ref.ckpt)" = "$REF_TENSORS" ]
  [ "$(tensors re.ckpt)" = "$REF_TENSORS" ]
  run --separate-stderr "$NETRUN" eval re.net --weights re.ckpt
  [ "$status" -eq 0 ]
  [ "$output" = "rows.csv: loss 0.141998 (4 examples)" ]
  run --separate-stderr "$NETRUN" predict re.net --weights re.ckpt --output pred --set 'x=[[10]]'
  [ "$status" -eq 0 ]
  [ "$output" = "[[22.544703]]" ]
  # Two epochs, then two more from the checkpoint: the same file.
  "$NETRUN" train re.net --epochs 2 --save half.ckpt >/dev/null 2>&1
  "$NETRUN" train re.net --resume half.ckpt --epochs 4 >/dev/null 2>&1
  cmp half.ckpt re.ckpt
}

@test "a transposed parameter: checkpoint, eval and --resume see its declared shape" {
  model ref 'pred = x @ (w * 2.0) + b'
  model tr 'w = transpose(w, perm=[1, 0])' 'pred = x @ (transpose(w, perm=[1, 0]) * 2.0) + b'
  "$NETRUN" train ref.net --save ref.ckpt >/dev/null 2>&1
  "$NETRUN" train tr.net --save tr.ckpt >/dev/null 2>&1
  [ "$(tensors tr.ckpt)" = "$REF_TENSORS" ]
  run --separate-stderr "$NETRUN" eval tr.net --weights tr.ckpt
  [ "$status" -eq 0 ]
  [ "$output" = "rows.csv: loss 0.141998 (4 examples)" ]
  "$NETRUN" train tr.net --epochs 2 --save half.ckpt >/dev/null 2>&1
  run --separate-stderr "$NETRUN" train tr.net --resume half.ckpt --epochs 4
  [ "$status" -eq 0 ]
  cmp half.ckpt tr.ckpt
}

@test "a [2, 1] parameter rebound to its [1, 2] transpose: checkpoint, eval, predict and --resume keep [2, 1]" {
  printf 'a,b,y\n1,0,2\n0,1,-1\n' > rows.csv
  cat > t.net <<'NET'
input x : f32[B, 2]
input y : f32[B, 1]
param W : [2, 1] = zeros()
W = transpose(W, perm=[1, 0])
loss = mean((x @ transpose(W, perm=[1, 0]) - y) ** 2)
train {
  data = "rows.csv"
  lr = 0.5
  batch = 2
  epochs = 3
}
NET
  "$NETRUN" train t.net --save t.ckpt >/dev/null 2>&1
  [ "$(tensors t.ckpt)" = "tensors: 1 (2 elements, 8 bytes)
  W  f32   [2, 1]  mean 0.4375  std 1.3125  min -0.875  max 1.75" ]
  # --output W is the name's last binding, the transpose of what was trained.
  run --separate-stderr "$NETRUN" predict t.net --weights t.ckpt --output W
  [ "$output" = "[[ 1.75  -0.875]]" ]
  run --separate-stderr "$NETRUN" eval t.net --weights t.ckpt
  [ "$status" -eq 0 ]
  [ "$output" = "rows.csv: loss 0.039062 (2 examples)" ]
  "$NETRUN" train t.net --epochs 1 --save r.ckpt >/dev/null 2>&1
  run --separate-stderr "$NETRUN" train t.net --resume r.ckpt --epochs 3
  [ "$status" -eq 0 ]
  cmp r.ckpt t.ckpt
}

@test "a parameter reassigned inside a function: the checkpoint holds the parameter" {
  model ref 'pred = x @ (w * 2.0) + b'
  model fn 'def lin(x, w, b) {' '  w = w * 2.0' '  return x @ w + b' '}' 'pred = lin(x, w, b)'
  "$NETRUN" train fn.net --save fn.ckpt >/dev/null 2>&1
  [ "$(tensors fn.ckpt)" = "$REF_TENSORS" ]
  run --separate-stderr "$NETRUN" eval fn.net --weights fn.ckpt
  [ "$output" = "rows.csv: loss 0.141998 (4 examples)" ]
}

@test "grad and gradcheck --wrt a rebound parameter differentiate the parameter" {
  cat > g.net <<'NET'
input x : f32[B, 1] = [[1], [2]]
input y : f32[B, 1] = [[3], [5]]
param w : [1, 1] = constant(0.5)
param b : [1] = zeros()
w = w * 2.0
pred = x @ w + b
loss = mean((pred - y) ** 2)
NET
  for tape in "" --tape; do
    run --separate-stderr "$NETRUN" grad g.net $tape --wrt w
    [ "$status" -eq 0 ]
    [ "$output" = "loss = 6.5
w@GRAD : f32[1, 1] =
[[-16.]]" ]
    run --separate-stderr "$NETRUN" gradcheck g.net $tape --wrt w
    [ "$status" -eq 0 ]
    [ "${lines[1]}" = "w                         1    0.000e+00    0.000e+00  ok" ]
  done
  # The rebound value itself is still reachable by its variable's name.
  run --separate-stderr "$NETRUN" grad g.net --wrt w.1
  [ "${lines[2]}" = "[[-8.]]" ]
}

@test "--set an input the script rebinds feeds the input" {
  printf 'input x : f32[2]\nx = x * 2.0\nprint(x)\n' > in.net
  run --separate-stderr "$NETRUN" run in.net --set 'x=[1, 2]'
  [ "$status" -eq 0 ]
  [ "$output" = "[2. 4.]" ]
}

# ---- 7. checkpoints with a valid CRC but crafted fields ---------------------------------

# crafted FIELD VALUE: e1.ckpt (re.net after epoch 1: step 2, samples 4) with
# one field rewritten and its CRC recomputed; then resume from it.
crafted() {
  cp e1.ckpt c.ckpt
  "$MKCKPT" set c.ckpt "$1" "$2"
  resume c.ckpt
}

# resume CKPT [ARGS...]: train re.net --resume CKPT; $stderr without the
# note that the checkpoint's 1 epoch is kept (the script says 4) and the
# note naming the columns taken by default.
resume() {
  local ckpt=$1
  shift
  run --separate-stderr timeout 20 "$NETRUN" train re.net --resume "$ckpt" "$@"
  stderr=$(grep -vx "netrun: note: epochs 1 is kept from $ckpt, the run resumed (the script's is not used)" <<< "$stderr" |
    grep -vF '(columns = [...] and label = "..." in the train block choose others)' || true)
}

@test "crafted positions are refused with the field and its meaning, never trained from" {
  model re 'w = w * 2.0' 'pred = x @ w + b'
  "$NETRUN" train re.net --epochs 1 --save e1.ckpt >/dev/null 2>&1
  crafted epoch 9223372036854775808   # 2^63: was negative epochs forever
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: epoch 9223372036854775808, step 2, samples 4: more epochs than steps (an epoch takes at least one step)" ]
  crafted epoch 18446744073709551615  # 2^64 - 1: was 4 more epochs, silently
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: epoch 18446744073709551615, step 2, samples 4: more epochs than steps (an epoch takes at least one step)" ]
  crafted step 9223372036854775807    # 2^63 - 1: the step counter overflowed
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: epoch 1, step 9223372036854775807, samples 4: more steps than samples seen (a step takes at least one sample)" ]
  crafted samples 9223372036854775807
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: epoch 1, step 2, samples 9223372036854775807: samples seen is more than 2^62" ]
}

@test "crafted settings: step_in_epoch, the shuffling state, best; an all-zero generator" {
  model re 'w = w * 2.0' 'pred = x @ w + b'
  "$NETRUN" train re.net --epochs 1 --save e1.ckpt >/dev/null 2>&1
  crafted step_in_epoch -1            # was: the rest of the epoch skipped
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: setting step_in_epoch = -1 is not a whole number from 0 to 9223372036854775807" ]
  crafted step_in_epoch 999
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: step_in_epoch = 999, but an epoch is 2 steps of 2 examples" ]
  cp e1.ckpt c.ckpt
  "$MKCKPT" set c.ckpt step 3
  "$MKCKPT" set c.ckpt step_in_epoch 2
  resume c.ckpt --batch 4
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: note: --batch 4 overrides the script's batch
netrun: error: c.ckpt: step_in_epoch = 2, but an epoch is 1 step of 4 examples" ]
  crafted step_in_epoch 3
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: step_in_epoch = 3, but an epoch is 2 steps of 2 examples" ]
  # step_in_epoch = the steps of an epoch (stopped after its last step) is
  # a position, but not after 1 epoch in 2 steps.
  crafted step_in_epoch 2
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: step_in_epoch = 2, but 1 epoch in 2 steps leaves at most 1" ]
  cp e1.ckpt c.ckpt
  "$MKCKPT" set c.ckpt epoch 2
  "$MKCKPT" set c.ckpt step_in_epoch 1
  resume c.ckpt
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: step_in_epoch = 1, but 2 epochs in 2 steps leave at most 0" ]
  crafted shuffle2 1e3
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: setting shuffle2 = 1e3 is not a whole number from 0 to 18446744073709551615" ]
  crafted best fast
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: setting best = fast is not a number" ]
  crafted loss_ema nan                # the smoothed loss's average
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: setting loss_ema = nan is not a finite number" ]
  crafted loss_ema_n 3                # more steps averaged than the run took
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: setting loss_ema_n = 3 is not a whole number from 0 to 2" ]
  cp e1.ckpt c.ckpt
  for i in 0 1 2 3; do "$MKCKPT" set c.ckpt rng$i 0; done
  resume c.ckpt
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: c.ckpt: the run's generator's state is all zeros" ]
  # The untouched file resumes.
  resume e1.ckpt
  [ "$status" -eq 0 ]
}

@test "a tensor stored as another dtype says which; an empty tensor with a huge dimension is empty" {
  model re 'w = w * 2.0' 'pred = x @ w + b'
  "$NETRUN" train re.net --epochs 1 --save e1.ckpt >/dev/null 2>&1
  "$MKCKPT" retype e1.ckpt w i64
  run --separate-stderr "$NETRUN" eval re.net --weights e1.ckpt
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: e1.ckpt: 'w' is i64[1, 1] there, but f32[1, 1] here" ]
  # tests/checkpoint.bats's tiny checkpoint with W's shape [2^40, 0]: no
  # elements (was "shape is it would take 0 bytes, more than the 16 GiB
  # one tensor may take"); its 24 bytes of data are then read as tensor 2.
  "$MKCKPT" tiny t.ckpt
  printf '\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' |
    dd of=t.ckpt bs=1 seek=148 conv=notrunc status=none
  "$MKCKPT" fixcrc t.ckpt
  run --separate-stderr "$NETRUN" checkpoint t.ckpt
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: t.ckpt: malformed tensors section: tensor 2 of 2: the name is empty (at byte 168)" ]
}

# ---- 8. signals, locks and stale temporary files ---------------------------------------

# slow_model: slow.net, a linear model whose every step also runs a loop of
# some seconds, so that signals land inside a step.
slow_model() {
  printf 'x,y\n1,3\n2,5\n3,7\n4,9\n' > rows.csv
  cat > slow.net <<'NET'
input x : f32[B, 1]
input y : f32[B, 1]
param w : [1, 1] = zeros()
i = 0
while i < 40 {
  j = 0
  while j < 500000 {
    j = j + 1
  }
  i = i + 1
}
loss = mean((x @ w - y) ** 2)
train {
  data = "rows.csv"
  batch = 2
  epochs = 100
}
NET
}

# train_bg ARGS...: `netrun train ARGS` in the background ($pid), its
# standard error in bg.err; returns once it is training.
train_bg() {
  "$NETRUN" train "$@" 2>bg.err >/dev/null &
  pid=$!
  local i
  for i in $(seq 600); do
    grep -q '^training ' bg.err && return 0
    sleep 0.05
  done
  return 1
}

@test "a second signal during a step stops it at once: status 1, the error, nothing written" {
  slow_model
  train_bg slow.net --save s.ckpt
  kill -INT "$pid"
  sleep 0.3
  kill -TERM "$pid"
  st=0; wait "$pid" || st=$?
  cat bg.err
  [ "$st" -eq 1 ]
  grep -Eq '^slow.net:[0-9]+:[0-9]+: error: .*interrupted' bg.err
  run ! grep -q '^saved' bg.err
  [ ! -e s.ckpt ]
}

@test "a checkpoint that cannot be written after a signal: status 1 and the error" {
  slow_model
  mkdir sub
  train_bg slow.net --save sub/s.ckpt
  rm -r sub
  kill -INT "$pid"
  st=0; wait "$pid" || st=$?
  cat bg.err
  [ "$st" -eq 1 ]
  grep -Eqx 'netrun: interrupted at epoch 1, step 1' bg.err
  grep -qx "netrun: error: sub/s.ckpt: cannot save checkpoint: cannot create a temporary file in sub: No such file or directory" bg.err
}

@test "a second train --save to the same checkpoint (or a link to it) is refused while the first runs" {
  slow_model
  train_bg slow.net --save s.ckpt
  [ -e s.ckpt.lock ]
  run --separate-stderr timeout 30 "$NETRUN" train slow.net --save s.ckpt
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: s.ckpt: process $pid is writing it (it holds s.ckpt.lock)" ]
  ln -s s.ckpt link.ckpt
  run --separate-stderr timeout 30 "$NETRUN" train slow.net --save link.ckpt
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: link.ckpt: process $pid is writing it (it holds s.ckpt.lock)" ]
  kill -INT "$pid"
  st=0; wait "$pid" || st=$?
  [ "$st" -eq 130 ]
  grep -qx 'saved s.ckpt (epoch 0, step 1)' bg.err
  # Released and removed at the end; a lock file a killed run left is
  # taken again.
  [ ! -e s.ckpt.lock ]
  echo 99999999 > s.ckpt.lock
  model re 'w = w * 2.0' 'pred = x @ w + b'
  run --separate-stderr "$NETRUN" train re.net --epochs 1 --save s.ckpt
  [ "$status" -eq 0 ]
  [ ! -e s.ckpt.lock ]
}

@test "--save through a dangling symbolic link makes the file it names; the link stays" {
  model re 'w = w * 2.0' 'pred = x @ w + b'
  mkdir sub
  ln -s t.ckpt sub/link.ckpt          # relative to sub
  "$NETRUN" train re.net --epochs 1 --save sub/link.ckpt >/dev/null 2>&1
  [ -L sub/link.ckpt ]
  [ "$(readlink sub/link.ckpt)" = t.ckpt ]
  run --separate-stderr "$NETRUN" checkpoint sub/t.ckpt
  [ "$status" -eq 0 ]
  [ "${lines[3]}" = "epoch: 1" ]
  ln -s loop.ckpt loop.ckpt
  run --separate-stderr "$NETRUN" dump -o loop.ckpt re.net
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: loop.ckpt: cannot follow its symbolic link: Too many levels of symbolic links" ]
}

@test "stale temporary files of a killed writer are removed by the next writer; live ones stay" {
  model re 'w = w * 2.0' 'pred = x @ w + b'
  dead=$(sh -c 'echo $$')             # a process that has exited
  sleep 60 & live=$!
  touch "m.ckpt.tmp.$dead.abcdef" "m.ckpt.tmp.$live.ghijkl" "m.ckpt.tmp.$dead.locked" m.ckpt.tmp.qrstuv \
    "other.ckpt.tmp.$dead.mnopqr"
  exec 7<"m.ckpt.tmp.$dead.locked"    # this shell holds its lock, as a live writer on another machine
  flock 7
  "$NETRUN" train re.net --epochs 1 --save m.ckpt >/dev/null 2>&1
  exec 7<&-
  kill "$live"
  [ "$(ls | grep tmp | sort)" = "m.ckpt.tmp.$dead.locked
m.ckpt.tmp.$live.ghijkl
m.ckpt.tmp.qrstuv
other.ckpt.tmp.$dead.mnopqr" ]
}
