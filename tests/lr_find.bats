#!/usr/bin/env bats
# lr_find.bats — `netrun lr-find` (src/train/lrfind.c, the sweep in
# src/train/loop.c): the sweep's learning rates are exactly the exponential
# sequence, the early stop, the suggestion on Fashion-MNIST, the formats
# and the plot, determinism, nothing saved, and the usage errors.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  MLP=$ROOT/examples/fashion_mlp.net
  cd "$BATS_TEST_TMPDIR"
}

# A one-parameter model whose loss is w^2 on a one-row CSV: loss = 4 while
# the lr is small, and sgd's step w -= 2 lr w diverges once lr > 1.
tiny() {
  printf 'x,y\n0,0\n' > one.csv
  printf 'input x : f32[B, 1]\ninput y : f32[B]\nparam w : [1] = [2.0]\nloss = sum(w * w)\n' > tiny.net
  printf 'train {\n  data = "one.csv"\n  batch = 1\n  %s\n}\n' "${1:-lr = 0.1}" >> tiny.net
}

@test "lr-find: step i of N trains with exactly start * (end / start)^(i / (N - 1))" {
  tiny
  run --separate-stderr "$NETRUN" lr-find tiny.net --start 1e-6 --end 1e-2 --steps 7 --format csv
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "step,lr,loss,smoothed_loss" ]
  [ "${#lines[@]}" -eq 8 ]
  # awk's pow and C's agree to the bit; the csv holds the shortest text of each double.
  bad=$(printf '%s\n' "${lines[@]:1}" | awk -F, -v s=1e-6 -v e=1e-2 -v n=7 '
    { want = s * (e / s) ^ (($1 - 1) / (n - 1)); if ($1 != NR || $2 + 0 != want) print "step " $1 ": lr " $2 ", want " want }')
  [ -z "$bad" ] || { echo "$bad"; false; }
  # The ends are the ends.
  [ "$(cut -d, -f2 <<<"${lines[1]}")" = "1e-06" ]
  [ "$(cut -d, -f2 <<<"${lines[7]}")" = "0.01" ]
  # The loss of step 1 is w^2 = 4, before any update.
  [ "$(cut -d, -f3 <<<"${lines[1]}")" = 4 ]
  # The smoothed loss starts at the loss (debiased: 0.02 * 4 / (1 - 0.98), to rounding).
  awk -F, '{ d = $4 - 4; exit !(d < 1e-12 && d > -1e-12) }' <<<"${lines[1]}"
  [[ "$stderr" == *"netrun: lr-find: suggested lr "* ]]
}

@test "lr-find stops after the step whose smoothed loss exceeds 4 x the best" {
  tiny
  # lr 1e-3 .. 100 over 11 steps: x10^0.5 a step; w grows by |1 - 2 lr| once lr > 1.
  run --separate-stderr "$NETRUN" lr-find tiny.net --start 1e-3 --end 100 --steps 11 --format json
  [ "$status" -eq 0 ]
  n=$(jq '.points | length' <<<"$output")
  best=$(jq '[.points[].smoothed_loss] | min' <<<"$output")
  last=$(jq '.points[-1].smoothed_loss' <<<"$output")
  before=$(jq '.points[-2].smoothed_loss' <<<"$output")
  echo "stopped after $n steps: last smoothed $last, best $best"
  [ "$n" -lt 11 ]
  awk -v l="$last" -v b="$best" -v p="$before" 'BEGIN { exit !(l > 4 * b && p <= 4 * b) }'
  [[ "$(jq -r .stopped <<<"$output")" == "the smoothed loss "*" at step $n exceeds 4 x the best, "* ]]
  [ "$(jq .steps <<<"$output")" -eq 11 ]
  # A loss that is not finite ends the sweep at once: exp(50 w) at w = 2 is inf in f32.
  tiny
  sed -i 's/^loss = .*/loss = sum(exp(w * 50.0))/' tiny.net
  run --separate-stderr "$NETRUN" lr-find tiny.net --steps 5
  [ "$status" -eq 0 ]
  [ "$output" = "  step  lr            loss          smoothed
     1  1e-07         inf           inf
stopped early: the loss is inf at step 1
no suggested lr: a slope needs 3 steps, the sweep made 1" ]
  run --separate-stderr "$NETRUN" lr-find tiny.net --steps 5 --format json
  [ "$(jq -c '[.points[0].loss, .stopped, .suggested_lr]' <<<"$output")" = '[null,"the loss is inf at step 1",null]' ]
}

@test "lr-find on Fashion-MNIST suggests an lr between 0.01 and 1, the same twice, and writes no checkpoint" {
  run --separate-stderr "$NETRUN" lr-find "$MLP" --limit 1000 --seed 3 --plot curve.svg
  [ "$status" -eq 0 ]
  first=$output
  # 100 steps (or fewer: stopped early), each line step, lr, loss, smoothed.
  [ "${lines[0]}" = "  step  lr            loss          smoothed" ]
  [[ "${lines[1]}" == "     1  1e-07         2."* ]]
  sugg=$(grep -o '^suggested lr [0-9.e+-]*' <<<"$output" | awk '{ print $3 }')
  echo "suggested: $sugg"
  awk -v s="$sugg" 'BEGIN { exit !(s >= 0.01 && s <= 1) }'
  # The same seed gives the same bytes; csv and json say the same lrs.
  run --separate-stderr "$NETRUN" lr-find "$MLP" --limit 1000 --seed 3
  [ "$output" = "$first" ]
  # ... on one thread too.
  run --separate-stderr env OMP_NUM_THREADS=1 "$NETRUN" lr-find "$MLP" --limit 1000 --seed 3
  [ "$output" = "$first" ]
  "$NETRUN" lr-find "$MLP" --limit 1000 --seed 3 --format json -o a.json 2>/dev/null
  "$NETRUN" lr-find "$MLP" --limit 1000 --seed 3 --format json -o b.json 2>/dev/null
  cmp a.json b.json
  awk -v s="$sugg" -v j="$(jq .suggested_lr a.json)" 'BEGIN { d = s / j - 1; exit !(d < 5e-3 && d > -5e-3) }'
  # A plot over a logarithmic lr axis; no checkpoint anywhere.
  grep -q '<text class="x-label"[^>]*>lr</text>' curve.svg
  grep -q "suggested lr $sugg (steepest descent)" curve.svg
  [ -z "$(find . -name '*.ckpt*')" ]
  [ "$(ls | grep -v "^separate-stderr-" | tr "\n" " ")" = "a.json b.json curve.svg " ]
}

@test "Ctrl-C ends the sweep after the current step; the curve so far is printed, status 130" {
  tiny
  "$NETRUN" lr-find tiny.net --start 1e-7 --end 1e-6 --steps 1000000 > out.txt 2> err.txt &
  pid=$!
  for _ in $(seq 100); do grep -q '^lr-find tiny.net' err.txt && break; sleep 0.1; done
  sleep 0.5
  kill -INT "$pid"
  status=0
  wait "$pid" || status=$?
  [ "$status" -eq 130 ]
  n=$(grep -c '^ *[0-9]' out.txt)
  echo "$n steps before the signal"
  [ "$n" -gt 1 ] && [ "$n" -lt 1000000 ]
  grep -qx "stopped early: interrupted (signal 2) after step $n" out.txt
  grep -q '^suggested lr \|^no suggested lr' out.txt
}

@test "lr-find: --steps below 2, --start not below --end, bad formats are usage errors" {
  tiny
  for args in "--steps 0" "--steps 1" "--steps 1000001" "--start 1 --end 1" "--start 2 --end 1" "--start 0" \
              "--end -1" "--format npy" "--save x.ckpt"; do
    # shellcheck disable=SC2086  # the options
    run --separate-stderr "$NETRUN" lr-find tiny.net $args
    echo "$args: $status $stderr"
    [ "$status" -eq 2 ]
    [ -z "$output" ]
  done
  run --separate-stderr "$NETRUN" lr-find tiny.net --steps 0
  [ "${stderr_lines[0]}" = "netrun: --steps needs a whole number from 2 to 1000000, not '0'" ]
  run --separate-stderr "$NETRUN" lr-find tiny.net --start 0.5 --end 0.5
  [ "${stderr_lines[0]}" = "netrun: --start (0.5) must be below --end (0.5)" ]
  run --separate-stderr "$NETRUN" lr-find tiny.net --format npy
  [ "${stderr_lines[0]}" = "netrun: unknown format 'npy' (expected text, csv or json)" ]
  # A script error is the script's error.
  tiny 'optimizer = sgdd'
  run --separate-stderr "$NETRUN" lr-find tiny.net
  [ "$status" -eq 1 ]
  [[ "${stderr_lines[0]}" == "tiny.net:8:3: error: unknown optimizer 'sgdd'"* ]]
}

@test "netrun --help lists lr-find; netrun help lr-find describes it" {
  run "$NETRUN" --help
  [[ "$output" == *"  netrun lr-find [OPTIONS] FILE"* ]]
  run "$NETRUN" help lr-find
  [ "$status" -eq 0 ]
  [[ "$output" == *"--start X"*"--end X"*"--steps N"*"--plot FILE"* ]]
}

@test "plot --x-axis lr: a log's loss over a logarithmic lr axis; a log without lr is an error" {
  printf '{"event": "step", "step": 1, "loss": 2, "lr": 0.001}\n{"event": "step", "step": 2, "loss": 1, "lr": 0.1}\n' > a.jsonl
  run --separate-stderr "$NETRUN" plot --x-axis lr a.jsonl
  [ "$status" -eq 0 ]
  # Ticks at the powers of ten from 0.001 to 0.1, the two points at the ends.
  [[ "$output" == *'<text x="76.00" y="326.00">0.001</text>'*'<text x="346.00" y="326.00">0.01</text>'*'<text x="616.00" y="326.00">0.1</text>'* ]]
  [[ "$output" == *'points="76.00,'*' 616.00,'* ]]
  printf '{"event": "step", "step": 1, "loss": 2}\n' > b.jsonl
  run --separate-stderr "$NETRUN" plot --x-axis lr b.jsonl
  [ "$status" -eq 1 ]
  [ "$stderr" = 'netrun: error: b.jsonl: --x-axis lr: no step line has "lr"' ]
  run --separate-stderr "$NETRUN" plot --x-axis lrs b.jsonl
  [ "$status" -eq 2 ]
  [ "${stderr_lines[0]}" = "netrun: unknown x axis 'lrs' (expected step, samples, epoch or lr)" ]
}
