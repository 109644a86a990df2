#!/usr/bin/env bats
# userop.bats — ops written in the language (`op NAME(...) -> (...) { }
# grad { }`, src/front/userop.c) beyond what the data cases show: training through
# them, and the man page's example with its printed backward.  Their
# gradients are checked by grad.bats (tests/grad/userop_*.net: finite
# differences, and the tape against the static backward).

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  cd "$BATS_TEST_TMPDIR"
}

# xor.net's model with swish and dense written as user ops ($1 = op) or as
# functions ($1 = def), trained for 50 steps on examples/data/xor.csv.
xor_script() {
  if [ "$1" = op ]; then
    cat <<'EOF'
op swish(x) -> (y) {
  y = x * sigmoid(x)
} grad {
  s = sigmoid(x)
  x@GRAD = y@GRAD * (s + y * (1 - s))
}
op dense(x, W, b) -> (y) {
  y = x @ W + b
}
EOF
  else
    cat <<'EOF'
def swish(x) {
  return x * sigmoid(x)
}
def dense(x, W, b) {
  return x @ W + b
}
EOF
  fi
  cat <<EOF
input x : f32[B, 2]
input y : f32[B, 1]
param W1 : [2, 8] = normal(0, 1)
param b1 : [8]    = zeros()
param W2 : [8, 1] = normal(0, 1)
param b2 : [1]    = zeros()
h    = swish(dense(x, W1, b1))
p    = sigmoid(dense(h, W2, b2))
loss = mean((p - y) ** 2)
train {
  data      = "$ROOT/examples/data/xor.csv"
  optimizer = adam
  lr        = 0.1
  batch     = 4
  epochs    = 50
  log_every = 1
}
EOF
}

@test "training through user ops follows the same losses as through functions" {
  for k in op def; do
    xor_script $k > $k.net
    "$NETRUN" train $k.net --seed 3 --log $k.jsonl > /dev/null 2>&1
    jq -r 'select(.event == "step") | .loss' $k.jsonl > $k.txt
  done
  [ "$(wc -l < op.txt)" -eq 50 ]
  # The grad part's formula rounds differently from the body's autodiff:
  # equal to about 1e-6, step by step.
  paste op.txt def.txt | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5) { print NR ": " $0; bad = 1 } }
                              END { exit bad }'
  # and the loss falls from about 0.28 to below 0.001
  awk 'NR == 1 && $1 < 0.2 { exit 1 } END { if ($1 > 0.001) exit 1 }' op.txt
}

# Writes the man page's `.\" example: NAME` block to NAME, and each
# `.\" output: ARGS` block to a file named after ARGS (spaces as _).
extract() {
  awk '
    /^\.\\" example: / { name = $3; out = 1; printf "" > name; next }
    /^\.\\" output: / { name = substr($0, 13); gsub(/\\-/, "-", name); gsub(/ /, "_", name);
                        name = name ".out"; out = 1; printf "" > name; next }
    /^\.\\" end (example|output)/ { out = 0; close(name); next }
    out && /^\.(EX|EE)/ { next }
    out { gsub(/\\-/, "-"); gsub(/\\e/, "\\"); gsub(/^\\&/, ""); print >> name }
  ' "$1"
}

@test "the man page's user-op example prints the backward and gradient it shows" {
  extract "$ROOT/man/netrun-lang.5"
  [ -s swishgrad.net ]
  [ -s dump_--backward_swishgrad.net.out ]
  "$NETRUN" dump --backward swishgrad.net > dump.txt
  diff -u dump_--backward_swishgrad.net.out dump.txt
  "$NETRUN" grad swishgrad.net > grad.txt
  diff -u grad_swishgrad.net.out grad.txt
  run "$NETRUN" gradcheck swishgrad.net
  [ "$status" -eq 0 ]
  [ "${lines[1]%% *}" = w ]
  [[ "${lines[1]}" == *" ok" ]]
}

@test "a user op's gradient through the tape equals the static one, in a loop, to the last bit" {
  for f in "$BATS_TEST_DIRNAME"/grad/userop_*.net; do
    "$NETRUN" grad --format json "$f" > static.json
    "$NETRUN" grad --tape --format json "$f" > tape.json
    cmp static.json tape.json || { echo "$(basename "$f")"; cat static.json tape.json; return 1; }
  done
}
