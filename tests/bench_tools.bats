#!/usr/bin/env bats
# bench_tools.bats — the benchmark scripts' own arithmetic (tests/bench/):
# what they measure is never asserted here, only how they read it.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  B=$BATS_TEST_DIRNAME/bench
  cd "$BATS_TEST_TMPDIR"
}

# steady STEPS...: compare.py's steady_step of a log whose step k (of 128
# samples) ends at the given epoch time in seconds.
steady() {
  local k=0 t
  : > log.jsonl
  for t in "$@"; do
    k=$((k + 1))
    printf '{"event": "step", "epoch": 1, "step": %d, "samples": %d, "loss": 1, "loss_smooth": 1, "lr": 0.1, "samples_per_s": %s}\n' \
      "$k" $((128 * k)) "$(awk -v n=$((128 * k)) -v t="$t" 'BEGIN { printf "%.9g", n / t }')" >> log.jsonl
  done
  echo '{"event": "epoch", "epoch": 1, "step": '"$k"', "train_loss": 1, "train_accuracy": null, "seconds": '"$t"'}' >> log.jsonl
  python3 -c "import sys; sys.path.insert(0, '$B'); import compare; print('%.6f' % compare.steady_step('log.jsonl'))"
}

@test "compare.py times a step after the first three, as its PyTorch side does" {
  # a first step of 0.5 s, then 0.1, 0.1, then steps of 0.05 s
  run steady 0.5 0.6 0.7 0.75 0.8 0.85
  [ "$status" -eq 0 ]
  [ "$output" = "0.050000" ]
  run steady 0.5 0.6 0.7 0.75
  [ "$output" = "0.050000" ]
  run ! steady 0.5 0.6 0.7
  [[ "$output" == *"fewer than 4 steps logged"* ]]
}

@test "compare.py's steady step reads the log netrun train writes" {
  "$NETRUN" train "$BATS_TEST_DIRNAME/../examples/fashion_mlp.net" --limit 640 --batch 128 --epochs 1 --log log.jsonl \
    > /dev/null 2>&1
  run python3 -c "import sys; sys.path.insert(0, '$B'); import compare; s = compare.steady_step('log.jsonl'); print(0 < s < 10)"
  [ "$status" -eq 0 ]
  [ "$output" = "True" ]
}

@test "compare.py's share of the sgemm peak takes each round's step against that round's yardstick" {
  share() { python3 -c "import sys; sys.path.insert(0, '$B'); import compare; print(compare.share_of_peak($1))"; }
  # 1 GFLOP forward: 3 GFLOP a step; round 2 runs at half speed on both
  # sides of the measure, round 3 at twice the step's speed alone
  run share "1e9, [0.1, 0.2, 0.05], [100.0, 50.0, 100.0]"
  [ "$status" -eq 0 ]
  [ "$output" = "0.3" ]
  run share "1e9, [0.1, 0.2], [100.0, 50.0]"
  [ "$output" = "0.3" ]
  run share "1e9, [0.1, 0.1, 0.1], [100.0, 50.0, 75.0]"
  [ "$output" = "0.4" ]
  run share "None, [0.1], [100.0]"
  [ "$output" = "None" ]
  run share "1e9, [0.1], [None]"
  [ "$output" = "None" ]
}
