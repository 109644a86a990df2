#!/usr/bin/env bats
# lang_layers.bats — LANGUAGE.md sections 10 and 11 from the command line:
# parameters declared in functions (their names in checkpoints, --wrt and
# gradcheck), and states: a step counter and an exponential moving average
# that change only in training steps, saved in checkpoints, continued by
# --resume and restored by --weights.  The lowering itself (names, dim(),
# constants, each error) is in tests/cases/layers.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
  # Two examples; with batch 2 a step is the whole set, so it is exact:
  # loss = mean((x W - y)^2), W <- W - 0.5 [W1 - 2, W2 + 1].
  printf 'a,b,y\n1,0,2\n0,1,-1\n' > rows.csv
  cat > counter.net <<'NET'
input x : f32[B, 2]
input y : f32[B, 1]
param W : [2, 1] = zeros()
state count : [1] = zeros()
state ema : [2, 1] = zeros()
seen = count * 1.0                    # the state's value as the step reads it
seen_ema = ema * 1.0
count = count + 1.0
ema = 0.5 * ema + 0.5 * W
loss = mean((x @ W - y) ** 2)
train {
  data   = "rows.csv"
  eval   = "rows.csv"                 # evaluated after every epoch
  lr     = 0.5
  batch  = 2
  epochs = 3
}
NET
}

# The value of a one-element tensor NAME in checkpoint FILE.
ckpt_value() { "$NETRUN" checkpoint "$2" | awk -v n="$1" '$1 == n && $(NF - 1) == "value" { print $NF }'; }

# The values of output NAME of `predict` with weights FILE, on one line.
predicted() {
  "$NETRUN" predict counter.net --weights "$2" --output "$1" 2>/dev/null | tr -d '[]' | xargs -n1 | awk '{ printf "%s%g", (NR > 1 ? " " : ""), $1 } END { print "" }'
}

@test "a state counts training steps only: evaluation after each epoch leaves it" {
  run --separate-stderr "$NETRUN" train counter.net --save a.ckpt
  [ "$status" -eq 0 ]
  # 3 epochs of one step, each followed by an evaluation: 3, not 6.
  [ "$(ckpt_value count a.ckpt)" = 3 ]
  # W: (0, 0) -> (1, -0.5) -> (1.5, -0.75) -> (1.75, -0.875); the EMA of
  # the W each step read: 0 -> (0.5, -0.25) -> (1, -0.5).
  [ "$(predicted W a.ckpt)" = "1.75 -0.875" ]
  [ "$(predicted seen_ema a.ckpt)" = "1 -0.5" ]
  [ "$(predicted seen a.ckpt)" = 3 ]
  # predict reads the state and computes the next value, but keeps nothing:
  # the checkpoint is the only place a state lives between runs.
  [ "$(predicted count a.ckpt)" = 4 ]
  [ "$(predicted ema a.ckpt)" = "1.375 -0.6875" ]
  # eval with the weights: the loss at W = (1.75, -0.875).
  run --separate-stderr "$NETRUN" eval counter.net --weights a.ckpt
  [ "$status" -eq 0 ]
  [ "$output" = "rows.csv: loss 0.039062 (2 examples)" ]
}

@test "netrun checkpoint lists the states beside the parameters and marks them" {
  "$NETRUN" train counter.net --save a.ckpt 2>/dev/null
  run "$NETRUN" checkpoint a.ckpt
  [ "$status" -eq 0 ]
  echo "$output" | grep -qx '  state.count = state'
  echo "$output" | grep -qx '  W      f32   \[2, 1\]         mean 0.4375  std 1.3125  min -0.875  max 1.75'
  echo "$output" | grep -qx '  count  f32   \[1\]     state  value 3'
  echo "$output" | grep -qx '  ema    f32   \[2, 1\]  state  mean 0.25  std 0.75  min -0.5  max 1'
}

@test "--resume continues a state; --weights restores it; run and grad start from its initial value" {
  "$NETRUN" train counter.net --save a.ckpt 2>/dev/null
  run --separate-stderr "$NETRUN" train counter.net --resume a.ckpt --epochs 5 --save b.ckpt
  [ "$status" -eq 0 ]
  [ "$(ckpt_value count b.ckpt)" = 5 ]
  # Five uninterrupted epochs give the same state.
  "$NETRUN" train counter.net --epochs 5 --save c.ckpt 2>/dev/null
  [ "$(ckpt_value count c.ckpt)" = 5 ]
  [ "$(predicted seen_ema b.ckpt)" = "$(predicted seen_ema c.ckpt)" ]
  # Without a checkpoint a state has its initial value, however often run.
  printf 'import "counter"\nprint(seen, count)\n' > show.net
  for i in 1 2; do
    run --separate-stderr "$NETRUN" run show.net --set 'x=[[1, 0]]' --set 'y=[[2]]'
    [ "$status" -eq 0 ]
    [ "$output" = "[0.] [1.]" ]
  done
  run --separate-stderr "$NETRUN" grad counter.net --set 'x=[[1, 0]]' --set 'y=[[2]]'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "loss = 4.0" ]
  [ "$(grep -c '@GRAD' <<< "$output")" -eq 1 ]   # W@GRAD only: no gradient for a state
}

@test "a checkpoint without a script's state is refused by --weights" {
  sed '/state\|count\|ema/d' counter.net > plain.net
  "$NETRUN" train plain.net --save p.ckpt 2>/dev/null
  run --separate-stderr "$NETRUN" eval counter.net --weights p.ckpt
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: p.ckpt has no value for 'count'" ]
}

@test "--wrt on a state is refused: it has no gradient" {
  for cmd in grad "dump --backward"; do
    # shellcheck disable=SC2086
    run --separate-stderr "$NETRUN" $cmd counter.net --wrt count --set 'x=[[1, 0]]' --set 'y=[[2]]'
    [ "$status" -eq 1 ]
    [ "$stderr" = "netrun: error: --wrt count: 'count' is a state, which is not trained and has no gradient" ]
  done
}

@test "dumps show a state as state; JSON says so too" {
  run --separate-stderr "$NETRUN" dump counter.net
  [ "$status" -eq 0 ]
  echo "$output" | grep -qx '  var count : f32\[1\] state'
  echo "$output" | grep -qx '  var ema : f32\[2, 1\] state'
  run --separate-stderr "$NETRUN" dump --format json counter.net
  [ "$status" -eq 0 ]
  [ "$(jq -c '.blocks[0].vars[] | select(.state) | .name' <<< "$output" | xargs)" = "count ema" ]
  # The write-back follows the update, and only in the training program.
  run --separate-stderr "$NETRUN" dump --train counter.net
  [ "$(grep -o '^  {ParamOut=\[W\]} = [a-z_]*\|^  {Out=\[[a-z]*\]} = assign(X=\[[a-z]*.1\])' <<< "$output" | xargs)" = \
    "{ParamOut=[W]} = sgd_matmul {Out=[count]} = assign(X=[count.1]) {Out=[ema]} = assign(X=[ema.1])" ]
  run --separate-stderr "$NETRUN" dump --backward counter.net
  ! grep -q 'assign(X=\[count.1\])' <<< "$output"
}

@test "the REPL lists a state as a state" {
  run --separate-stderr "$NETRUN" repl <<< $'state n : [2] = ones()\nparam W : [2] = zeros()\n:vars'
  [ "$status" -eq 0 ]
  grep -qx 'n     f32    \[2\]    state' <<< "$output"
  grep -qx 'W     f32    \[2\]    param' <<< "$output"
}

@test "layers: gradcheck passes through functions' parameters, automatic, scoped, tied and in a loop" {
  cat > layers.net <<'NET'
input x : f32[3, 4] = [[0.5, -1.0, 0.25, 2.0], [-0.5, 0.75, 1.5, -2.0], [1.0, 0.1, -0.3, 0.6]]
def dense(x, n) {
  param W : [dim(x, -1), n] = xavier()
  param b : [n] = normal(0.0, 0.5)
  return x @ W + b
}
def block(x, width) {
  return dense(tanh(dense(x, width * 2)), width)
}
h = tanh(dense(x, 3))
h = block(h, 3, scope="blk")
h = block(h, 3, scope="blk")          # tied: blk.dense.W, blk.dense_1.W again
h = tanh(dense(h, 3))
i = 0
while i < 2 {
  h = tanh(dense(h, 3, scope="rnn"))  # one rnn.W for both turns
  i = i + 1
}
state seen : [1] = zeros()
seen = seen + 1.0
loss = mean(h * h) + mean(seen)
NET
  run --separate-stderr "$NETRUN" gradcheck layers.net
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(awk 'NR > 1 && $5 == "ok" { print $1 }' <<< "$output" | xargs)" = \
    "dense.W dense.b blk.dense.W blk.dense.b blk.dense_1.W blk.dense_1.b dense_1.W dense_1.b rnn.W rnn.b" ]
  [[ "${lines[-1]}" == "all gradients match finite differences"* ]]
}

@test "a function with constant arguments is one function: a dropout rate and a training flag" {
  cat > drop.net <<'NET'
input x : f32[2, 1000] = ones([2, 1000])
def drop(x, rate, training) {
  y = x
  if training {
    y, _ = dropout(x, p=rate)
  }
  return y
}
a = mean(drop(x, 0.25, true))          # kept values scaled by 1/0.75
b = mean(drop(x, 0.5, false))          # the identity
print(dim(x, -1) // 3)
print(a)
print(b)
NET
  run --separate-stderr "$NETRUN" dump drop.net
  [ "$status" -eq 0 ]
  grep -q 'dropout(X=\[x\]) {is_test=false, p=0.25, seed=0}' <<< "$output"
  grep -q 'dropout(X=\[x\]) {is_test=false, p=0.5, seed=0}' <<< "$output"
  run --separate-stderr "$NETRUN" run drop.net
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = 333 ]
  # a is the mean of 2000 values, each 0 or 4/3 (p = 0.25): near 1.
  awk -v a="${lines[1]}" 'BEGIN { exit !(a > 0.9 && a < 1.1 && a != 1) }'
  [ "${lines[2]}" = "1.0" ]
}

@test "a function's state updated by a multi-output op, as batch_norm's running mean will be" {
  cat > bn.net <<'NET'
input x : f32[B, 2]
input y : f32[B, 1]
param W : [2, 1] = zeros()
op runstat(x, m) -> (out, m_out) {
  mu = mean(x, axis=0)
  out = x - mu
  m_out = 0.5 * m + 0.5 * mu
} grad {
  x@GRAD = out@GRAD - mean(out@GRAD, axis=0)
}
def norm(x) {
  state mean : [dim(x, 1)] = zeros()
  h, mean = runstat(x, mean)
  return h
}
loss = mean((norm(x) @ W - y) ** 2)
train {
  data   = "rows.csv"
  eval   = "none"
  lr     = 0.5
  batch  = 2
  epochs = 3
}
NET
  run --separate-stderr "$NETRUN" train bn.net --save bn.ckpt
  [ "$status" -eq 0 ]
  # The batch mean is (0.5, 0.5) each step: the state is 0.5 (1 - 0.5^3).
  # W = (a, -a), a <- a/2 + 0.75: 0, 0.75, 1.125, 1.3125.
  run "$NETRUN" checkpoint bn.ckpt
  echo "$output" | grep -qx '  norm.mean  f32   \[2\]     state  mean 0.4375  std 0  min 0.4375  max 0.4375'
  echo "$output" | grep -qx '  W          f32   \[2, 1\]         mean 0  std 1.3125  min -1.3125  max 1.3125'
  run --separate-stderr "$NETRUN" dump --train bn.net
  [ "${lines[-1]}" = "  {Out=[norm.mean]} = assign(X=[norm.mean.1])" ]
}
