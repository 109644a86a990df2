#!/usr/bin/env bats
# memplan.bats — the memory plan (src/exec/plan.c): the planned peak
# `netrun summary` prints, against a figure worked out by hand from the
# training program; the trainer's measured peak with the plan and without
# (NETRUN_NO_MEMORY_PLAN); and the same bits either way.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
}

@test "summary: the planned peak of a small training step, worked out by hand from dump --train --fused" {
  cat > model.net <<'NET'
input x : f32[B, 256]
input y : f32[B, 1]
param W : [256, 1] = zeros()
loss = mean((x @ W - y) ** 2)
train {
  data   = "rows.csv"
  lr     = 0.5
  batch  = 4
  epochs = 1
}
NET
  # The step (dump --train --fused), batch 4, bytes of each value:
  #   0 t.0 = matmul(x, W)            16     5 loss@GRAD = fill_constant   4
  #   1 t.1 = sub(t.0, y)             16     6 t.3@GRAD = mean_grad(t.3, loss@GRAD)  16
  #   2 t.2 = fill_constant (i64)      8     7 t.1@GRAD = pow_grad(t.1, t.2, t.3, t.3@GRAD)  16
  #   3 t.3 = pow(t.1, t.2)           16     8 t.0@GRAD = share(t.1@GRAD): a view
  #   4 loss = mean(t.3)               4     9 W = sgd_matmul(W, x, t.0@GRAD, lr): in place
  run "$NETRUN" dump --train --fused model.net
  [ "$status" -eq 0 ]
  ops=$(grep -o '} = [a-z_]*(' <<< "$output" | sed 's/} = //; s/($//' | paste -sd' ')
  [ "$ops" = "matmul sub fill_constant pow mean fill_constant mean_grad pow_grad share sgd_matmul" ]
  # Held throughout: x 4096, y 16, W 1024, the learning rate 4 = 5140, and
  # from the second step on the loss 4 (the trainer reads it): 5144.  The
  # plan drops t.0 after op 1, loss@GRAD after 6, t.1 t.2 t.3 t.3@GRAD
  # after 7, t.0@GRAD (and with it t.1@GRAD's storage) after 9.  The
  # most is while op 7 runs: 5144 + t.1 16 + t.2 8 + t.3 16 + t.3@GRAD 16
  # + its output 16 = 5216 (op 4 of the second step, the loss written
  # beside the last one, reaches 5188).
  # Every value kept, the second step starts with all of them: 5140 +
  # t.0 t.1 t.2 t.3 loss loss@GRAD t.3@GRAD, t.1@GRAD = t.0@GRAD's storage
  # (16+16+8+16+4+4+16+16) = 5236, and op 0 allocates t.0 beside the last
  # one: 5252.
  run "$NETRUN" summary model.net
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "planned peak of one training step: 5216 bytes (every value kept: 5252 bytes)" ]
}

@test "summary: a script with a while body says its planned peak leaves the body's values out" {
  cat > loop.net <<'NET'
input x : f32[B, 4]
param W : [4, 4] = zeros()
h = x
t = 0
while t < 3 {
  h = tanh(h @ W)
  t = t + 1
}
loss = mean(h * h)
train {
  data   = "rows.csv"
  lr     = 0.5
  batch  = 2
  epochs = 1
}
NET
  run "$NETRUN" summary loop.net
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "planned peak of one training step: 312 bytes (every value kept: 453 bytes); values inside while and if bodies not counted" ]
  printf 'x = 1.0\nif x > 0.5 {\n  y = x * 2.0\n} else {\n  y = x\n}\nprint(y)\n' > branch.net
  run "$NETRUN" summary branch.net
  [ "$status" -eq 0 ]
  [[ "${lines[-1]}" == "planned peak of one forward step: "*" bytes); values inside while and if bodies not counted" ]]
}

@test "summary: a script without a train block gets its forward step's planned peak" {
  cat > fwd.net <<'NET'
input x : f32[1000]
a = exp(x)
b = tanh(a)
c = sigmoid(b)
d = a + c
NET
  # x 4000 held; a b c d 4000 each.  The plan drops b after op 2 and a, c
  # after op 3; d, written last, is kept.  Second step: x d held (8000),
  # op 2 runs with a b beside them and makes c: 20000; op 3 makes the new
  # d beside the old one, a and c: 20000.  Every value kept: 20000 held,
  # and op 0 makes a beside the last a: 24000.
  run "$NETRUN" summary fwd.net
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "planned peak of one forward step: 20000 bytes (every value kept: 24000 bytes)" ]
}

# rows FILE: rows.csv, 128 rows of four inputs a-d and a target y, and
# FILE's train block (batch 64, one epoch).
rows() {
  cat >> "$1" <<'NET'
train {
  data   = "rows.csv"
  lr     = 0.01
  batch  = 64
  epochs = 1
}
NET
  python3 -c "
import random
random.seed(1)
print('a,b,c,d,y')
for i in range(128): print(','.join('%.3f' % random.uniform(-1, 1) for _ in range(5)))" > rows.csv
}

# A wide layer, 64 x 65536 floats (16 MiB) per activation.
wide() {
  cat > wide.net <<'NET'
import "nn"
input x : f32[B, 4]
input y : f32[B, 1]
h = tanh(relu(dense(x, 65536)))
pred = dense(h, 1)
loss = mean((pred - y) ** 2)
NET
  rows wide.net
}

# both FILE: trains FILE with the plan (plan.log, plan.ckpt) and without
# (all.log, all.ckpt): the same weights, bit for bit, and the same losses.
both() {
  "$NETRUN" train "$1" --log plan.log --save plan.ckpt > plan.out 2>&1
  NETRUN_NO_MEMORY_PLAN=1 "$NETRUN" train "$1" --log all.log --save all.ckpt > all.out 2>&1
  cmp plan.ckpt all.ckpt
  losses() { grep -o '"\(train_\)\?loss": [^,]*' "$1" | paste -sd' '; }
  echo "losses: $(losses plan.log)"
  [ -n "$(losses plan.log)" ]
  [ "$(losses plan.log)" = "$(losses all.log)" ]
}

# peak LOG: the peak resident memory a training log's summary gives, in bytes.
peak() { sed -n 's/.*"peak_memory_bytes": \([0-9]*\).*/\1/p' "$1"; }

# apart BYTES: plan.log's peak resident memory is at least BYTES below
# all.log's (skipped under ASan).
apart() {
  if ldd "$NETRUN" 2> /dev/null | grep -q libasan; then
    skip "under ASan the resident memory holds its quarantine of freed blocks, not netrun's peak (make test compares)"
  fi
  p=$(peak plan.log) a=$(peak all.log)
  echo "peak resident memory: plan $p bytes, every value kept $a bytes"
  [ -n "$p" ] && [ -n "$a" ]
  [ "$p" -le $(($a - $1)) ]
}

@test "train: the plan lowers the measured peak, and the trained weights are the same bits" {
  wide
  run "$NETRUN" summary wide.net
  [ "${lines[-1]}" = "planned peak of one training step: 68945424 bytes (every value kept: 119278364 bytes)" ]
  both wide.net
  # The plan holds 50 MB less at its peak (summary above: the bias add
  # and the relu run fused with the tanh, so their values are never made
  # either way); measured, the two differed by 33-34 MB.  At least 24 MB
  # apart:
  apart 25165824
}

@test "train: a loop's model (the stdlib's LSTM, a while loop and its grad) trains to the same bits with the plan and without" {
  EX=$(cd "$BATS_TEST_DIRNAME/../examples" && pwd)
  "$NETRUN" train "$EX/adding_lstm.net" --epochs 1 --limit 256 --save plan.ckpt > plan.out 2>&1
  NETRUN_NO_MEMORY_PLAN=1 "$NETRUN" train "$EX/adding_lstm.net" --epochs 1 --limit 256 --save all.ckpt > all.out 2>&1
  cat plan.out
  cmp plan.ckpt all.ckpt
  [ "$(grep -o 'train loss [0-9.]*' plan.out)" = "$(grep -o 'train loss [0-9.]*' all.out)" ]
}

# A loop whose body makes three 4 MiB temporaries a turn (u, w and w - v:
# read by the next op only, and not by the loop's grad block) and another
# three its grad block's turn drops (t.7@GRAD, t.6@GRAD, w@GRAD and the
# parts of v@GRAD); eight turns, batch 64 x 16384 floats.
loop() {
  cat > loop.net <<'NET'
import "nn"
input x : f32[B, 4]
input y : f32[B, 1]
h = dense(x, 16384)
t = 0
while t < 8 {
  u = h * 1.5
  v = u + 0.5
  if t < 4 {
    w = v * v
    h = tanh(w - v) * 0.5
  } else {
    w = v * 0.25
    h = sigmoid(w + v)
  }
  t = t + 1
}
loss = mean((dense(h, 1, scope="out") - y) ** 2)
NET
  rows loop.net
}

@test "train: in a while body and its branches the plan drops each turn's temporaries; the same bits either way" {
  loop
  both loop.net
  # and on one thread, the same bits again
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$NETRUN" train loop.net --save one.ckpt > one.out 2>&1
  cmp plan.ckpt one.ckpt
  # What the values take is counted against --max-memory exactly: with the
  # plan the step fits in 200 MiB (it needs 141-150), every turn's every
  # value kept (231-240 MiB; 221-230 under a plan of block 0 alone) does
  # not.
  run "$NETRUN" train loop.net --max-memory 200M
  [ "$status" -eq 0 ]
  run env NETRUN_NO_MEMORY_PLAN=1 "$NETRUN" train loop.net --max-memory 200M
  [ "$status" -eq 3 ]
  [[ "$output" == *"of the memory limit of 200 MiB is free (--max-memory)"* ]]
  # Measured 164 and 256 MB; at least 48 MB apart:
  apart 50331648
}

@test "eval: the loop's model evaluates to the same figures with the plan and without" {
  loop
  "$NETRUN" train loop.net --save loop.ckpt > train.out 2>&1
  run "$NETRUN" eval loop.net --weights loop.ckpt --data rows.csv
  [ "$status" -eq 0 ]
  [[ "$output" == *"rows.csv: loss "*" (128 examples)"* ]]
  plan=$output
  run env NETRUN_NO_MEMORY_PLAN=1 "$NETRUN" eval loop.net --weights loop.ckpt --data rows.csv
  [ "$output" = "$plan" ]
}

@test "predict: the plan keeps the --output values and drops the rest after their last reader; the same output" {
  wide
  "$NETRUN" train wide.net --save wide.ckpt > train.out 2>&1
  # h's last reader runs for pred: asked for both, h is kept for the output.
  for v in pred h "h --output pred"; do
    "$NETRUN" predict wide.net --weights wide.ckpt --data rows.csv --output $v > plan.out
    NETRUN_NO_MEMORY_PLAN=1 "$NETRUN" predict wide.net --weights wide.ckpt --data rows.csv --output $v > all.out
    cmp plan.out all.out
    [ "$v" != pred ] || cp plan.out plan.pred
  done
  [ "$(wc -l < plan.pred)" -eq 128 ]
  grep -q '^h =$' plan.out
  # A batch's activations are 16 MiB each (64 x 65536 floats; the bias
  # add, relu and tanh run as one chain): under the plan predict needs
  # 31-35 MiB of --max-memory, keeping every value 46-50 MiB.
  run "$NETRUN" predict wide.net --weights wide.ckpt --data rows.csv --output pred --max-memory 42M
  [ "$status" -eq 0 ]
  [ "$output" = "$(cat plan.pred)" ]
  run env NETRUN_NO_MEMORY_PLAN=1 "$NETRUN" predict wide.net --weights wide.ckpt --data rows.csv --output pred --max-memory 42M
  [ "$status" -eq 3 ]
  [[ "$output" == *"of the memory limit of 42 MiB is free (--max-memory)"* ]]
}

@test "run: the plan drops each value after its last reader, in block 0 and in a loop's turns; the same output" {
  cat > fwd.net <<'NET'
input x : f32[256, 16384] = ones([256, 16384])
a = exp(x * 0.001)
b = tanh(a)
t = 0
while t < 6 {
  u = b * 1.5
  v = u + 0.5
  b = tanh(v * v - v)
  t = t + 1
}
print(sum(a + sigmoid(b)))
NET
  run "$NETRUN" run fwd.net
  [ "$status" -eq 0 ]
  [ "$output" = "7195338.0" ]
  run env NETRUN_NO_MEMORY_PLAN=1 "$NETRUN" run fwd.net
  [ "$output" = "7195338.0" ]
  # 16 MiB a value: the plan needs 111-115 MiB of --max-memory, keeping
  # every value 161-170 MiB.
  run "$NETRUN" run fwd.net --max-memory 140M
  [ "$status" -eq 0 ]
  [ "$output" = "7195338.0" ]
  run env NETRUN_NO_MEMORY_PLAN=1 "$NETRUN" run fwd.net --max-memory 140M
  [ "$status" -eq 3 ]
  [[ "$output" == *"of the memory limit of 140 MiB is free (--max-memory)"* ]]
}
