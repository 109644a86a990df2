#!/usr/bin/env bats
# plot.bats — `netrun plot`: the training-log reader and the SVG it draws.
#
# Data in tests/plot/: three_epochs.jsonl (hand-written) and its golden SVG,
# logs without accuracy, with two splits, with an incomplete last line, the
# same run written by a newer trainer (forward/) and by a resumed one
# (resumed/), and bad/NAME.jsonl, each with the exact stderr in NAME.err.
# After a deliberate change to the picture or the messages:
#   NETRUN_REGEN=1 bats tests/plot.bats
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  P=$BATS_TEST_DIRNAME/plot
  cd "$BATS_TEST_TMPDIR"
}

# count PATTERN FILE: occurrences of a fixed string.
count() { grep -oF -- "$1" "$2" | wc -l; }

# plot_ok ARGS...: runs netrun plot, which must succeed silently; the SVG is out.svg.
plot_ok() {
  run --separate-stderr "$NETRUN" plot "$@" -o out.svg
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  [ -z "$stderr" ]
}

well_formed() {
  if command -v xmllint >/dev/null; then xmllint --noout "$1"; fi
}

@test "plot: the 3-epoch log gives the golden SVG" {
  plot_ok "$P/three_epochs.jsonl"
  if [ -n "${NETRUN_REGEN:-}" ]; then cp out.svg "$P/three_epochs.svg"; fi
  cmp out.svg "$P/three_epochs.svg"
}

@test "plot: the SVG's structure: one polyline per curve, axes, legend, title" {
  plot_ok "$P/three_epochs.jsonl"
  [ "$(head -c 4 out.svg)" = "<svg" ]
  [ "$(tail -n 1 out.svg)" = "</svg>" ]
  well_formed out.svg
  [ "$(count '<polyline' out.svg)" -eq 6 ]
  for c in train-loss-step train-loss-smooth train-loss-epoch eval-loss train-accuracy eval-accuracy; do
    [ "$(count "<polyline class=\"$c\"" out.svg)" -eq 1 ]
  done
  # Markers: 3 points on each of the 4 per-epoch curves, and one in each of their legend entries.
  [ "$(count '<circle' out.svg)" -eq 16 ]
  # Two panels, each with its axis titles and tick labels.
  [ "$(count '<g class="panel"' out.svg)" -eq 2 ]
  [ "$(count 'class="x-label"' out.svg)" -eq 2 ]
  grep -qF '>step</text>' out.svg
  grep -qF 'font-size="13">loss</text>' out.svg
  grep -qF 'font-size="13">accuracy</text>' out.svg
  for t in '>0.0</text>' '>2.5</text>' '>0</text>' '>120</text>' '>65%</text>' '>85%</text>'; do
    grep -qF "$t" out.svg
  done
  for l in 'train loss (per step)' 'train loss (smoothed)' 'train loss (epoch)' 'test loss' \
           'train accuracy' 'test accuracy'; do
    grep -qF ">$l</text>" out.svg
  done
  grep -qF 'font-weight="bold">three_epochs.jsonl</text>' out.svg
  grep -qF '>epoch 3, step 120 · test: loss 0.5, accuracy 82.35%</text>' out.svg
  [ "$(count '>epoch 2</text>' out.svg)" -eq 1 ]
}

@test "plot: the same log gives byte-identical output, to stdout or -o" {
  "$NETRUN" plot "$P/three_epochs.jsonl" > a.svg
  "$NETRUN" plot "$P/three_epochs.jsonl" > b.svg
  "$NETRUN" plot "$P/three_epochs.jsonl" -o c.svg
  cmp a.svg b.svg
  cmp a.svg c.svg
  cp "$P/three_epochs.jsonl" x.jsonl
  "$NETRUN" plot --log-y --x-axis samples x.jsonl > d.svg
  "$NETRUN" plot --log-y --x-axis samples x.jsonl > e.svg
  cmp d.svg e.svg
}

@test "plot: unknown keys, unknown events, other spacing and escapes change nothing" {
  cd "$P/forward"
  run "$NETRUN" plot three_epochs.jsonl
  [ "$status" -eq 0 ]
  cmp <(printf '%s\n' "$output") "$P/three_epochs.svg"
}

@test "plot: a resumed run that re-logged its last steps keeps the newer points" {
  cd "$P/resumed"
  run "$NETRUN" plot three_epochs.jsonl
  [ "$status" -eq 0 ]
  cmp <(printf '%s\n' "$output") "$P/three_epochs.svg"
}

@test "plot: a log without accuracy has only the loss panel" {
  plot_ok "$P/no_accuracy.jsonl"
  well_formed out.svg
  [ "$(count '<polyline' out.svg)" -eq 4 ]
  [ "$(count 'class="train-accuracy"' out.svg)" -eq 0 ]
  [ "$(count 'class="eval-accuracy"' out.svg)" -eq 0 ]
  [ "$(count '<polyline class="eval-loss"' out.svg)" -eq 1 ]
  [ "$(count '<g class="panel"' out.svg)" -eq 1 ]
  grep -qF 'height="370"' out.svg
  grep -qF '>val loss</text>' out.svg
  grep -qF '>epoch 2, step 60 · val: loss 0.23 · no accuracy in this log</text>' out.svg
}

@test "plot: each eval split has its own curves, colour and legend entry" {
  plot_ok "$P/two_splits.jsonl"
  [ "$(count '<polyline class="eval-loss"' out.svg)" -eq 2 ]
  [ "$(count '<polyline class="eval-accuracy"' out.svg)" -eq 2 ]
  [ "$(count 'class="train-loss-smooth"' out.svg)" -eq 0 ]
  for l in 'val loss' 'test loss' 'val accuracy' 'test accuracy'; do grep -qF ">$l</text>" out.svg; done
  [ "$(count 'stroke="#ff7f0e"' out.svg)" -eq 4 ]
  [ "$(count 'stroke="#2ca02c"' out.svg)" -eq 4 ]
}

@test "plot: an incomplete last line is ignored with a warning" {
  cd "$P"
  run --separate-stderr "$NETRUN" plot truncated.jsonl -o "$BATS_TEST_TMPDIR/out.svg"
  [ "$status" -eq 0 ]
  [ "$stderr" = "netrun: warning: truncated.jsonl:13: the last line is incomplete (no newline: a log still being written?); it is ignored" ]
  cd "$BATS_TEST_TMPDIR"
  well_formed out.svg
  grep -qF '>epoch 2, step 50 · test: loss 0.71, accuracy 74.20%</text>' out.svg
}

@test "plot: every malformed log is its exact error, exit 1, and writes nothing" {
  mkdir out
  cd "$P/bad"
  for log in *.jsonl; do
    name=${log%.jsonl}
    run --separate-stderr "$NETRUN" plot "$log" -o "$BATS_TEST_TMPDIR/out/out.svg"
    if [ -n "${NETRUN_REGEN:-}" ]; then printf '%s\n' "$stderr" > "$name.err"; fi
    echo "case $name: status $status: $stderr"
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    [ "$stderr" = "$(cat "$name.err")" ]
  done
  [ -z "$(ls -A "$BATS_TEST_TMPDIR/out")" ]
}

@test "plot: hostile input is an error, never a crash" {
  # NUL bytes, in a string and between tokens.
  printf '{"event": "st\0ep"}\n' > nul.jsonl
  run "$NETRUN" plot nul.jsonl
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: nul.jsonl:1: a NUL byte at column 14" ]
  # Deep nesting is rejected at jansson's depth limit, without a deep stack.
  { printf '{"event": "step", "x": '; head -c 20000 /dev/zero | tr '\0' '['; echo; } > deep.jsonl
  run "$NETRUN" plot deep.jsonl
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: deep.jsonl:1: maximum parsing depth reached near '[' at column 2071" ]
  # Overlong lines.
  { printf '{"event": "step", "x": "'; head -c 100000 /dev/zero | tr '\0' a; echo '"}'; } > long.jsonl
  run "$NETRUN" plot long.jsonl
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: long.jsonl:1: line longer than 65536 bytes" ]
  # Huge numbers: past double range an error; within it (or underflowing) drawn.
  { printf '{"event": "step", "step": 1, "loss": 1'; head -c 1000 /dev/zero | tr '\0' 0; echo '}'; } > huge.jsonl
  run "$NETRUN" plot huge.jsonl
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: huge.jsonl:1: real number overflow at column 1038" ]
  printf '%s\n' '{"event": "step", "step": 1, "loss": 1e-400}' '{"event": "step", "step": 2, "loss": 1.7e308}' \
    '{"event": "step", "step": 1e308, "loss": -1.7e308}' '{"event": "eval", "step": -5e307, "accuracy": 1e300}' > big.jsonl
  plot_ok big.jsonl
  well_formed out.svg
  # Random bytes.
  LC_ALL=C awk 'BEGIN { srand(7); for (i = 0; i < 200000; i++) printf "%c", int(rand() * 256) }' > random.jsonl
  run "$NETRUN" plot random.jsonl
  [ "$status" -eq 1 ]
}

@test "plot: single-byte mutations of a good log exit 0 or 1 and stay valid XML" {
  src=$P/three_epochs.jsonl
  size=$(wc -c < "$src")
  RANDOM=11
  for i in $(seq 1 120); do
    pos=$(( (RANDOM * 32768 + RANDOM) % size ))
    byte=$(( RANDOM % 256 ))
    { head -c "$pos" "$src"; printf "\\$(printf %03o "$byte")"; tail -c +"$((pos + 2))" "$src"; } > m.jsonl
    run "$NETRUN" plot m.jsonl -o m.svg
    echo "mutation $i: byte $byte at $pos: status $status"
    [ "$status" -eq 0 ] || [ "$status" -eq 1 ]
    if [ "$status" -eq 0 ]; then well_formed m.svg; fi
  done
}

@test "plot: text is escaped, names are cut in the legend, the eighth split is the last" {
  printf '%s\n' '{"event": "eval", "step": 1, "split": "<a&b> \"q\" \u0000 and a long tail", "accuracy": 0.5}' > esc.jsonl
  plot_ok esc.jsonl
  well_formed out.svg
  grep -qF '>&lt;a&amp;b&gt; &quot;q&quot; � … accuracy</text>' out.svg
  for i in 1 2 3 4 5 6 7 8 9 10; do
    printf '{"event": "eval", "step": %d, "split": "s%d", "accuracy": 0.5}\n' "$i" "$i"
  done > splits.jsonl
  run --separate-stderr "$NETRUN" plot splits.jsonl -o out.svg
  [ "$status" -eq 0 ]
  [ "$stderr" = "netrun: warning: splits.jsonl:9: more than 8 eval splits; the others are not drawn" ]
  [ "$(count '<polyline class="eval-accuracy"' out.svg)" -eq 8 ]
}

@test "plot: --log-y draws the loss on a log scale with 1-2-5 ticks" {
  plot_ok --log-y "$P/three_epochs.jsonl"
  grep -qF '>loss (log scale)</text>' out.svg
  for t in 0.2 0.5 1 2 5; do grep -qF ">$t</text>" out.svg; done
  [ "$(count '<polyline' out.svg)" -eq 6 ]
  printf '%s\n' '{"event": "step", "step": 1, "loss": 0}' '{"event": "step", "step": 2, "loss": 0.5}' \
    '{"event": "step", "step": 3, "loss": 0.25}' > zero.jsonl
  run --separate-stderr "$NETRUN" plot --log-y zero.jsonl -o out.svg
  [ "$status" -eq 0 ]
  [ "$stderr" = "netrun: warning: zero.jsonl: --log-y: 1 loss value <= 0 not drawn" ]
  printf '%s\n' '{"event": "step", "step": 1, "loss": -1}' > negative.jsonl
  run --separate-stderr "$NETRUN" plot --log-y negative.jsonl -o out.svg
  [ "$status" -eq 0 ]
  [ "$stderr" = "netrun: warning: negative.jsonl: --log-y: no loss is positive; the loss axis stays linear" ]
}

@test "plot: --x-axis samples and --x-axis epoch" {
  plot_ok --x-axis samples "$P/three_epochs.jsonl"
  [ "$(count '>samples</text>' out.svg)" -eq 2 ]
  grep -qF '>16k</text>' out.svg
  plot_ok --x-axis=epoch "$P/three_epochs.jsonl"
  [ "$(count 'font-size="13">epoch</text>' out.svg)" -eq 2 ]
  grep -qF '>3</text>' out.svg
  [ "$(count 'class="epochs"' out.svg)" -eq 0 ]
  run "$NETRUN" plot --x-axis samples "$P/two_splits.jsonl"
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: $P/two_splits.jsonl: --x-axis samples: no step line has \"samples\"" ]
  run "$NETRUN" plot --x-axis epoch "$P/two_splits.jsonl"
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: $P/two_splits.jsonl: --x-axis epoch: no epoch line has \"epoch\" and \"step\"" ]
}

@test "plot: - reads standard input" {
  run "$NETRUN" plot - < "$P/three_epochs.jsonl"
  [ "$status" -eq 0 ]
  [[ "$output" == *'font-weight="bold">&lt;stdin&gt;</text>'* ]]
}

@test "plot: usage errors exit 2" {
  run "$NETRUN" plot
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: plot needs a FILE" ]
  run "$NETRUN" plot a.jsonl b.jsonl
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: plot takes one file, got a second: 'b.jsonl'" ]
  run "$NETRUN" plot --log-x a.jsonl
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: plot: unknown option '--log-x' (did you mean '--log-y'?)" ]
  run "$NETRUN" plot --x-axis time a.jsonl
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: unknown x axis 'time' (expected step, samples, epoch or lr)" ]
  run "$NETRUN" plot a.jsonl --x-axis
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --x-axis needs step, samples, epoch or lr" ]
  run "$NETRUN" plot a.jsonl -o
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: -o needs a file name" ]
  [ "${lines[1]}" = "Try 'netrun plot --help'." ]
}

@test "plot: files that cannot be read, logs with nothing to draw, outputs that cannot be written" {
  run "$NETRUN" plot nowhere.jsonl
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot read nowhere.jsonl: No such file or directory" ]
  mkdir dir
  run "$NETRUN" plot dir
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot read dir: Is a directory" ]
  : > empty.jsonl
  run "$NETRUN" plot empty.jsonl
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: empty.jsonl: no loss or accuracy to plot" ]
  printf '%s\n' '{"event": "summary", "loss": 0.5}' '{"event": "step", "loss": 0.5}' > nothing.jsonl
  run "$NETRUN" plot nothing.jsonl
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: nothing.jsonl: no loss or accuracy to plot" ]
  run "$NETRUN" plot "$P/three_epochs.jsonl" -o missing/out.svg
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: missing/out.svg: cannot create a temporary file in missing: No such file or directory" ]
}

@test "plot: a long log draws quickly and stays small" {
  awk 'BEGIN { srand(3); for (s = 1; s <= 50000; s++)
         printf "{\"event\": \"step\", \"epoch\": %d, \"step\": %d, \"loss\": %.6f, \"loss_smooth\": %.6f}\n",
                int(s / 469) + 1, s, 0.3 + 2 * exp(-s / 2000) + rand() * 0.1, 0.35 + 2 * exp(-s / 2000) }' > long.jsonl
  plot_ok long.jsonl
  well_formed out.svg
  # At most four points per half-pixel column of a 540-unit-wide plot.
  points=$(grep -F 'class="train-loss-step"' out.svg | grep -o '[0-9.]*,[0-9.]*' | wc -l)
  [ "$points" -le 4400 ]
  [ "$(wc -c < out.svg)" -lt 150000 ]
}

@test "plot: running out of memory anywhere exits 3, never crashes, leaves no temporary file" {
  mkdir out
  for n in $(seq 1 16); do
    NETRUN_FAIL_ALLOC=$n run "$NETRUN" plot "$P/two_splits.jsonl" -o out/out.svg
    echo "allocation $n: status $status"
    [ "$status" -eq 0 ] || { [ "$status" -eq 3 ] && [[ "$output" == *"out of memory"* ]]; }
    rm -f out/out.svg
    [ -z "$(ls -A out)" ]
  done
}
