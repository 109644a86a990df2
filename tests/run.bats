#!/usr/bin/env bats
# run.bats — executing scripts: run, time, the tape, feeding, interrupts.

bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  EX=$BATS_TEST_DIRNAME/../examples
  cd "$BATS_TEST_TMPDIR"
}

@test "netrun FILE runs it like netrun run FILE" {
  printf 'x = [1, 2, 3]\nprint(x * 2)\n' > a.net
  run "$NETRUN" a.net
  [ "$status" -eq 0 ]
  [ "$output" = "[2 4 6]" ]
  run "$NETRUN" run a.net
  [ "$output" = "[2 4 6]" ]
}

@test "run: usage errors" {
  run "$NETRUN" run
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: run needs a FILE" ]
  run "$NETRUN" run --seed x a.net
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --seed needs a whole number of at least 0, not 'x'" ]
  run "$NETRUN" run --set a.net
  [ "$status" -eq 2 ]
  run "$NETRUN" run --bogus a.net
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: run: unknown option '--bogus'" ]
}

@test "--dump-tape prints the unrolled loop as one flat block" {
  cat > rnn.net <<'NET'
param W : [2, 2] = [[0.5, -0.5], [0.25, 1.0]]
h = [[1.0, 2.0]]
k = 0
while k < 2 {
  h = tanh(h @ W)
  k = k + 1
}
loss = sum(h)
NET
  run "$NETRUN" run --dump-tape rnn.net
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "block 0 (parent -1)" ]
  # two turns of the body, then the sum; the counter (no gradient) is not recorded
  [ "$(grep -c ' = matmul(' <<<"$output")" -eq 2 ]
  [ "$(grep -c ' = tanh(' <<<"$output")" -eq 2 ]
  grep -qF '{Out=[t.3#1]} = matmul(X=[h.2#0], Y=[W])' <<<"$output"
  grep -qF '{Out=[loss]} = sum(X=[h.2#1])' <<<"$output"
  run ! grep -q 'less_than\|fill_constant' <<<"$output"
  "$NETRUN" run --dump-tape --format json rnn.net | jq -e '.blocks[0].ops | length == 5' >/dev/null
}

@test "the tape records only the taken branch" {
  cat > br.net <<'NET'
param w : [2] = [1.0, 2.0]
if sum(w) > 0.0 {
  y = exp(w)
} else {
  y = log(w)
}
loss = sum(y)
NET
  run "$NETRUN" run --dump-tape br.net
  [ "$status" -eq 0 ]
  grep -q ' = exp(' <<<"$output"
  ! grep -q ' = log(' <<<"$output"
}

@test "time prints per-op-type calls, time and share" {
  run "$NETRUN" time --iterations 3 "$EX/xor.net"
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" =~ ^op\ +calls\ +total\ ms\ +per\ call\ us\ +share$ ]]
  grep -qE '^matmul +6 ' <<<"$output"
  # the bias adds and tanh run as chains (dump --fused); --no-fuse times them apart
  grep -qE '^fused_elementwise +6 ' <<<"$output"
  grep -qE '^total +' <<<"$output"
  run "$NETRUN" time --no-fuse --iterations 3 "$EX/xor.net"
  grep -qE '^tanh +3 ' <<<"$output"
  grep -qE '^add +6 ' <<<"$output"
  run "$NETRUN" time --iterations 3 "$EX/xor.net"
  [[ "${lines[-1]}" =~ ^3\ forward\ passes,\ [0-9.]+\ ms\ each$ ]]
  run "$NETRUN" time --iterations 0 "$EX/xor.net"
  [ "$status" -eq 2 ]
}

@test "time --warmup: the passes before the timed ones are not counted, with or without --backward; a count below 0 is refused" {
  for w in 0 1 4; do
    run "$NETRUN" time --warmup $w --iterations 3 "$EX/xor.net"
    [ "$status" -eq 0 ]
    grep -qE '^matmul +6 ' <<<"$output"
    [[ "${lines[-1]}" =~ ^3\ forward\ passes,\ [0-9.]+\ ms\ each$ ]]
    run "$NETRUN" time --backward --warmup $w --iterations 2 "$EX/xor.net"
    [ "$status" -eq 0 ]
    [ "$(sed -n '/^forward$/,/^total /p' <<<"$output" | grep -cE '^matmul +4 ')" -eq 1 ]
    [ "$(sed -n '/^backward$/,/^total /p' <<<"$output" | grep -cE '^matmul +6 ')" -eq 1 ]
  done
  run -2 "$NETRUN" time --warmup -1 "$EX/xor.net"
  [ "${lines[0]}" = "netrun: --warmup needs a whole number of at least 0, not '-1'" ]
}

@test "ops shows which ops have kernels" {
  run "$NETRUN" ops
  grep -qE '^matmul +composite +yes +X, Y -> Out$' <<<"$output"
  run "$NETRUN" ops relu
  [[ "$output" == *"kernel: yes"* ]]
}

@test "Ctrl-C stops a runaway loop cleanly" {
  printf 'i = 0\nwhile i >= 0 {\n  i = i + 1\n}\n' > forever.net
  run timeout --preserve-status -s INT "${NETRUN_START_SECONDS:-1}" "$NETRUN" run --max-steps 1000000000000 forever.net
  [ "$status" -eq 130 ]
  [[ "${lines[0]}" == "forever.net:"*": error: "*"interrupted"* ]]
}

@test "the same seed gives the same numbers, another seed others" {
  printf 'param W : [3, 3] = xavier()\nprint(W)\nprint(uniform_random([4]))\n' > r.net
  a=$("$NETRUN" run --seed 3 r.net)
  b=$("$NETRUN" run --seed 3 r.net)
  c=$("$NETRUN" run --seed 4 r.net)
  [ "$a" = "$b" ]
  [ "$a" != "$c" ]
}

@test "a value too large for memory is refused before allocating" {
  printf 'x = zeros([100000, 100000, 100])\nprint(sum(x))\n' > big.net
  run "$NETRUN" run big.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "big.net:1:5: error: zeros: output 'x' of shape [100000, 100000, 100]: it would take 3.64 TiB, more than the 16 GiB one tensor may take" ]
}
