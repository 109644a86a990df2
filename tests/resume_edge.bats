#!/usr/bin/env bats
# resume_edge.bats — a run stopped by a signal in the LAST step of an epoch
# saves a checkpoint that --resume accepts, and the resumed run ends with
# the uninterrupted run's parameters, bit for bit.

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
  printf 'x,y\n1,2\n' > one.csv
  # One example, batch 1: every epoch is one step, and each step takes a
  # while (150 turns of a 384x384 matmul), so a signal sent once the run
  # has started training lands in the last step of an epoch. K's range
  # keeps h away from zero: with +-0.05, h decays into subnormal floats,
  # whose arithmetic some CPUs run 50 times slower (27 s a step), and
  # every epoch's loss reads 4.0000, so comparing losses told nothing.
  cat > slow.net <<'NET'
input x : f32[B, 1]
input y : f32[B, 1]
param w : [1, 1] = ones()
param K : [384, 384] = uniform(-0.1, 0.1)
h = broadcast_to(x @ w, shape=[384, 384])
i = 0.0
while i < 150.0 {
  h = tanh(h @ K)
  i = i + 1.0
}
loss = mean(square(h - y))
train {
  data = "one.csv"
  feed = [x, y]
  optimizer = momentum
  lr = 0.1
  batch = 1
  epochs = 3
}
NET
}

# stop_in_step SIG: trains in the background with --log run.jsonl (opened
# just before the signal handlers are set) and sends SIG once the log exists.
stop_in_step() {
  "$NETRUN" train slow.net --save int.ckpt --log run.jsonl >/dev/null 2>err.txt &
  local pid=$! i
  for i in $(seq 600); do [ -e run.jsonl ] && break; sleep 0.02; done
  sleep "$(awk -v s="${NETRUN_START_SECONDS:-1}" 'BEGIN { print 0.05 * s }')"
  kill "-$1" "$pid"
  st=0; wait "$pid" || st=$?
}

@test "a signal in an epoch's last step: --resume does that epoch's end, and the run ends as the uninterrupted one" {
  "$NETRUN" train slow.net --save full.ckpt >full.txt 2>/dev/null
  stop_in_step TERM
  cat err.txt
  [ "$st" -eq 143 ]
  # Stopped in epoch k (1 or 2) of 3, after its one step: k - 1 epochs
  # done, and all of epoch k's steps.
  k=$(sed -n 's/^netrun: interrupted at epoch \([0-9]*\), step \1$/\1/p' err.txt)
  [ "$k" = 1 ] || [ "$k" = 2 ]
  grep -Ex "saved int.ckpt \(epoch $((k - 1)), step $k\)" err.txt
  [ "$("$NETRUN" checkpoint int.ckpt | awk '$1 == "step_in_epoch" { print $3 }')" = 1 ]
  run "$NETRUN" train slow.net --save int.ckpt --resume int.ckpt
  echo "$output"
  [ "$status" -eq 0 ]
  # The resumed run ends epoch k with the whole epoch's train loss.
  want=$(grep "^epoch $k/3: " full.txt | sed 's/ | .*//')
  [ -n "$want" ]
  [ "$(grep "^epoch $k/3: " <<<"$output" | sed 's/ | .*//')" = "$want" ]
  [[ "$output" == *"epoch 3/3"* ]]
  cmp full.ckpt int.ckpt
}

@test "a run resumed in the middle of an epoch reports the whole epoch's train loss" {
  printf 'x,y\n1,2\n2,3\n3,5\n4,4\n' > four.csv
  sed -e 's/one.csv/four.csv/' -e 's/epochs = 3/epochs = 1/' slow.net > four.net
  "$NETRUN" train four.net --save full.ckpt >full.txt 2>/dev/null
  "$NETRUN" train four.net --save int.ckpt --log run.jsonl >/dev/null 2>err.txt &
  pid=$!
  for i in $(seq 1500); do grep -q '"event": "step"' run.jsonl 2>/dev/null && break; sleep 0.02; done
  kill -INT "$pid"
  st=0; wait "$pid" || st=$?
  cat err.txt
  [ "$st" -eq 130 ]
  in_epoch=$("$NETRUN" checkpoint int.ckpt | awk '$1 == "step_in_epoch" { print $3 }')
  [ "$in_epoch" -ge 1 ] && [ "$in_epoch" -le 3 ]
  run "$NETRUN" train four.net --save int.ckpt --resume int.ckpt
  echo "$output"
  [ "$status" -eq 0 ]
  want=$(grep '^epoch 1/1: ' full.txt | sed 's/ | .*//')
  [ -n "$want" ]
  [ "$(grep '^epoch 1/1: ' <<<"$output" | sed 's/ | .*//')" = "$want" ]
  cmp full.ckpt int.ckpt
}
