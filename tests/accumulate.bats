#!/usr/bin/env bats
# accumulate.bats — gradient accumulation (accumulate = N, --accumulate N:
# src/train/loop.c) and the training program's phases (program.h, dump
# --train): N batches' gradients, weighted by their examples, make the
# update of one batch N times the size; no rewrite crosses the update's
# start then (sgd_matmul); under mpirun the allreduce runs once per update.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  cd "$BATS_TEST_TMPDIR" || return 1
}

# maxdiff A B: the largest difference between the tensors of two checkpoints.
maxdiff() {
  python3 - "$NETRUN" "$1" "$2" <<'PY'
import json, subprocess, sys
def load(p):
    d = json.loads(subprocess.check_output([sys.argv[1], "checkpoint", "--format", "json", p]))
    return {t["name"]: t["data"] for t in d["values"]}
a, b = load(sys.argv[2]), load(sys.argv[3])
assert a.keys() == b.keys()
print(max(max(abs(float(x) - float(y)) for x, y in zip(a[k], b[k])) for k in a))
PY
}

# same OPTIMIZER TOL [ARGS...]: fashion_mlp, --limit 2048 --epochs 1, batch 32
# x accumulate 4 against batch 128; the parameters agree within TOL.
same() {
  local opt=$1 tol=$2
  shift 2
  "$NETRUN" train "$ROOT/examples/fashion_mlp.net" --limit 2048 --epochs 1 --optimizer "$opt" "$@" \
    --batch 128 --save big.ckpt > big.out 2>&1
  "$NETRUN" train "$ROOT/examples/fashion_mlp.net" --limit 2048 --epochs 1 --optimizer "$opt" "$@" \
    --batch 32 --accumulate 4 --save acc.ckpt > acc.out 2>&1
  grep -q '^trained 1 epoch (16 steps, 2048 samples)' big.out
  grep -q '^trained 1 epoch (64 steps, 2048 samples)' acc.out
  d=$(maxdiff big.ckpt acc.ckpt)
  echo "$opt: max difference $d (tolerance $tol)"
  python3 -c "import sys; sys.exit(0 if $d <= $tol else 1)"
}

@test "batch 32 x accumulate 4 gives batch 128's parameters: sgd and momentum within 1e-5" {
  same sgd 1e-5
  same momentum 1e-5
}

@test "batch 32 x accumulate 4 gives batch 128's parameters: adam within 5e-3" {
  # Adam's step is lr m / sqrt(v): a gradient near zero moves its weight
  # by about lr whatever its size, so the last bits of sums taken in
  # another order show as up to a few lr (measured 1.5e-3 = 1.5 lr; 6e-6
  # with OpenBLAS's products alone).  A group updated once a batch is off
  # by 0.04, one update fewer by 0.02.
  same adam 5e-3 --lr 0.001
}

@test "an epoch's last, shorter group is weighted by its examples; accumulate = N in the train block" {
  # 2000 examples: 62 batches of 32 and one of 16; in groups of 4 the last
  # group holds 3 batches (80 examples), as batch 128's last step does
  sed 's/^  epochs    = 5/  epochs    = 1\n  accumulate = 4/' "$ROOT/examples/fashion_mlp.net" > acc.net
  "$NETRUN" train "$ROOT/examples/fashion_mlp.net" --limit 2000 --epochs 1 --batch 128 --save big.ckpt > /dev/null 2>&1
  run "$NETRUN" train acc.net --limit 2000 --batch 32 --save acc.ckpt
  [ "$status" -eq 0 ]
  [[ "$output" == *"63 steps of 32 per epoch"* ]]
  d=$(maxdiff big.ckpt acc.ckpt)
  echo "max difference $d"
  python3 -c "import sys; sys.exit(0 if $d <= 1e-5 else 1)"
}

@test "dump --train shows the phases; accumulating, sgd_matmul does not cross the update's start, it sums a gradient in place" {
  run "$NETRUN" dump --train "$ROOT/examples/fashion_mlp.net"
  [ "$status" -eq 0 ]
  [ "$(grep -c '^  # phase ' <<< "$output")" -eq 3 ]
  grep -qx '  # phase forward: ops 0-9' <<< "$output"
  grep -qx '  # phase backward: ops 10-22' <<< "$output"
  grep -qx '  # phase update: ops 23-28' <<< "$output"
  [ "$(grep -c '= sgd_matmul(' <<< "$output")" -eq 3 ]
  sed 's/^  epochs    = 5/  epochs    = 5\n  accumulate = 2/' "$ROOT/examples/fashion_mlp.net" > acc.net
  run "$NETRUN" dump --train acc.net
  [ "$status" -eq 0 ]
  # each weight's gradient is summed where it stands: an sgd_matmul of the
  # backward adds minus the rate (minus the batch's examples) times X'Y to it
  [ "$(grep -c '= sgd_matmul(' <<< "$output")" -eq 3 ]
  for w in dense.W dense_1.W out.W; do
    grep -q "^  {ParamOut=\[$w@GRAD\]} = sgd_matmul(Param=\[$w@GRAD\], .*LearningRate=\[accumulate_rate@ACC\])" <<< "$output"
  done
  [ "$(grep -c '= sgd(' <<< "$output")" -eq 6 ]
  # every sgd stands in the update phase, every matmul_grad and sgd_matmul in the backward
  awk '/# phase/ {p = $3} /= sgd\(/ && p != "update:" {bad = 1} /= (matmul_grad|sgd_matmul)\(/ && p != "backward:" {bad = 1} END {exit bad}' <<< "$output"
  run "$NETRUN" dump --train --format json acc.net
  [[ "$output" == *'"phases": [{"name": "forward", "start": 0, "end": 10}, {"name": "backward", "start": 10, "end": 26}, {"name": "allreduce", "start": 26, "end": 26}, {"name": "update", "start": 26, "end": 32}]'* ]]
}

# peak LOG: the peak resident memory a training log's summary gives, in bytes.
peak() { sed -n 's/.*"peak_memory_bytes": \([0-9]*\).*/\1/p' "$1"; }

@test "accumulating spends no memory one batch does not: batch 32 x accumulate 4 peaks as batch 32 (sgd)" {
  if ldd "$NETRUN" 2> /dev/null | grep -q libasan; then
    skip "under ASan the resident memory holds its quarantine of freed blocks, not netrun's peak (make test compares)"
  fi
  for a in 1 4; do
    "$NETRUN" train "$ROOT/examples/fashion_mlp.net" --limit 2048 --epochs 1 --batch 32 --accumulate $a \
      --log acc$a.log > /dev/null 2>&1
  done
  p1=$(peak acc1.log) p4=$(peak acc4.log)
  echo "peak resident memory: batch 32 $p1 bytes, batch 32 x accumulate 4 $p4 bytes"
  [ -n "$p1" ] && [ -n "$p4" ]
  # a set of the model's gradients is 2.1 MB: summed in buffers apart, the
  # peak was 1.5 to 1.9 MB higher; the two runs' peaks vary by up to 0.3 MB
  [ "$p4" -le $((p1 + 1048576)) ]
}

@test "accumulate: bad values are refused at the setting and on the command line" {
  sed 's/^  epochs    = 5/  accumulate = 0/' "$ROOT/examples/fashion_mlp.net" > zero.net
  run "$NETRUN" dump --train zero.net
  [ "$status" -ne 0 ]
  [[ "$output" == *"zero.net:19:3: error: accumulate must be in [1, 1048576], got 0"* ]]
  run "$NETRUN" train "$ROOT/examples/fashion_mlp.net" --accumulate 0
  [ "$status" -eq 2 ]
  [[ "$output" == *"--accumulate"* ]]
  sed 's/^  epochs    = 5/  accumulate = 2/' "$ROOT/examples/fashion_mlp.net" > two.net
  run "$NETRUN" lr-find two.net --limit 256
  [ "$status" -ne 0 ]
  [[ "$output" == *"error: lr-find sweeps one batch per step: accumulate = 2 is not supported"* ]]
}

@test "a signal stops an accumulating run after an update; another accumulate refuses to resume inside one" {
  # 16384 steps: 1.9 s on a host that ran 4096 in 0.5 s, before the signal
  ( "$NETRUN" train "$ROOT/examples/fashion_mlp.net" --limit 16384 --batch 1 --accumulate 5 --epochs 1 \
      --save s.ckpt > s.out 2>&1 & echo $! > pid; wait )  &
  for _ in $(seq 100); do grep -q 'samples/s' s.out 2> /dev/null && break; sleep 0.1; done
  sleep 0.5
  kill -INT "$(cat pid)"
  wait
  grep -q 'interrupted at epoch 1' s.out
  in_epoch=$("$NETRUN" checkpoint --format json s.ckpt | python3 -c 'import json,sys; print(json.load(sys.stdin)["settings"]["step_in_epoch"])')
  [ "$in_epoch" -gt 0 ]
  [ $((in_epoch % 5)) -eq 0 ]
  run "$NETRUN" train "$ROOT/examples/fashion_mlp.net" --limit 16384 --batch 1 --accumulate 3 --epochs 1 --resume s.ckpt --save s.ckpt
  if [ $((in_epoch % 3)) -ne 0 ]; then
    [ "$status" -ne 0 ]
    [[ "$output" == *"error: s.ckpt stopped after step $in_epoch of its epoch, inside an update of accumulate = 3 batches"* ]]
  fi
}

@test "under mpirun the allreduce runs once per update, and 2 ranks x batch 5 x accumulate 3 train as batch 15" {
  command -v mpirun > /dev/null || skip "mpirun is not installed (make deps)"
  load mpi_helpers
  mpi_setup
  cp "$BATS_TEST_DIRNAME/mpi/mlp.net" "$BATS_TEST_DIRNAME/mpi/blobs.csv" .
  # 51 examples on 2 ranks: 6 steps of 2 x 5 an epoch, 2 updates of 3 steps;
  # 2 buckets of gradients: 3 epochs x 2 updates x 2 allreduce ops
  mpi 2 train mlp.net --batch 5 --accumulate 3 --save acc.ckpt > acc.out
  grep -q '^allreduce on 2 ranks: [0-9.]* s in 12 calls on rank 0 (.*), none of it overlapped$' acc.out
  mpi 2 train mlp.net --batch 15 --save big.ckpt > big.out
  grep -q '^allreduce on 2 ranks: [0-9.]* s in 12 calls on rank 0 (.*), [0-9.]* s of it waiting' big.out
  d=$(maxdiff big.ckpt acc.ckpt)
  echo "max difference $d"
  python3 -c "import sys; sys.exit(0 if $d <= 1e-5 else 1)"
  # overlap = true said out loud cannot be kept
  sed '/^train {/a\  overlap = true' mlp.net > ov.net
  run "$NETRUN" train ov.net --accumulate 2
  [ "$status" -ne 0 ]
  [[ "$output" == *"ov.net:18:3: error: overlap = true cannot be kept with accumulate = 2"* ]]
}
