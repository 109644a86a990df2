#!/usr/bin/env bats
# tape_grad2.bats — second derivatives through while and if on the tape:
# while_grad's and conditional_block_grad's grad ops are recorded turn by
# turn as they run (named with the forward turn's suffix), and a
# while_grad's sums over turns as add_n ops, so `netrun grad --tape`, the
# tape's program (--tape-program) and the REPL's :grad differentiate them
# op by op.  Checked against the program's backward (the same bits on the
# cases of tests/cases/grad2, within 1e-6 relative where sums over turns
# are added in another order), against values worked by hand, and against
# finite differences of the f64 program (gradcheck --tape).

bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$BATS_TEST_DIRNAME/..
  C=$BATS_TEST_DIRNAME/cases/grad2
  cd "$BATS_TEST_TMPDIR"
}

# The JSON of netrun grad FLAGS... FILE, status checked.
grads() {
  run "$NETRUN" grad --format json "$@"
  echo "$output"
  [ "$status" -eq 0 ]
  printf '%s' "$output" > "$BATS_TEST_TMPDIR/last.json"
}

@test "the cases of tests/cases/grad2: the tape and the tape's program give the program's gradients, bit for bit" {
  for c in while_second:729 if_second:121.5 else_second:5 initial_value_second:21403.5352 tape_second:730; do
    grads "$C/${c%:*}.net"
    static=$output
    [ "$(jq -c '.grads.w.data[0]' <<<"$static")" = "${c#*:}" ]
    grads --tape "$C/${c%:*}.net"
    [ "$output" = "$static" ]
    grads --tape-program "$C/${c%:*}.net"
    [ "$output" = "$static" ]
  done
  # squaring_turns (--order 2 is the program's only): the script's own
  # first gradient f = 17 x^16, differentiated: 272 x^15
  run "$NETRUN" grad --order 2 --format json "$C/squaring_turns.net"
  [ "$status" -eq 0 ]
  static=$(jq -c .grads <<<"$output")
  [ "$static" = '{"x":{"shape":[],"data":[13922.5537]}}' ]
  grads --tape --loss f "$C/tape_squaring.net"
  [ "$(jq -c .grads <<<"$output")" = "$static" ]
  grads --loss f "$C/tape_squaring.net"
  [ "$(jq -c .grads <<<"$output")" = "$static" ]
  run "$BATS_TEST_DIRNAME/run-cases.sh" "$C/tape_second.net" "$C/tape_squaring.net" "$C/tape_third_order.net" "$C/tape_nested.net"
  [ "$status" -eq 0 ]
}

@test "grad of a grad through a loop in the script on the tape: h = 27, and the tape differentiates it once more: 24 w = 36" {
  grads --tape --loss h "$C/grad_of_grad_while.net"
  [ "${lines[0]}" = "5.0625 13.5 27.0" ]
  [ "${lines[-1]}" = '{"loss": 27, "grads": {"w": {"shape": [], "data": [36]}}}' ]
  run "$NETRUN" gradcheck --tape --loss h "$C/grad_of_grad_while.net"
  [ "$status" -eq 0 ]
  [[ "${lines[-1]}" == "all gradients match finite differences"* ]]
}

@test "vector loops, nested loops and an if in a loop: the tape's second derivatives match f64 finite differences and the program's" {
  { grep -v '^#' "$BATS_TEST_DIRNAME/grad/ops/while_grad.net"
    printf 'gw = grad(loss, w)\nga = grad(loss, a)\nl2 = sum(gw * gw * w) + ga * ga * a\n'; } > wg.net
  { grep -v '^#' "$ROOT/examples/loop_second_derivative.net"
    printf 'g = grad(loss, a)\nl2 = sum(g * g * a)\n'; } > newton.net
  { grep -v '^#' "$BATS_TEST_DIRNAME/grad/ops/conditional_block_grad.net"
    printf 'gw = grad(loss, w)\nga = grad(loss, a)\nl2 = sum(gw * gw) + ga * ga * a\n'; } > cg.net
  for f in wg.net newton.net cg.net "$C/tape_nested.net"; do
    run "$NETRUN" gradcheck --tape --loss l2 "$f"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "${lines[-1]}" == "all gradients match finite differences"* ]]
    [[ "$output" != *FAIL* ]]
  done
  # the program's backward: the same values within 1e-6 relative (the sums
  # over turns are added in another order).  Not cg.net nor tape_nested.net:
  # the program's second backward stops on them with an internal error
  # today (conditional_block_grad writes 'y.3@GRAD@L2@GRAD', whose type is
  # not known; while_grad writes '@EMPTY@@RENAME@1', an inner loop reading
  # an outer parameter).
  for f in wg.net newton.net; do
    grads --loss l2 "$f"
    static=$output
    grads --tape --loss l2 "$f"
    jq -e --argjson s "$static" '[.grads | to_entries[] | .key as $k | .value.data | to_entries[]
      | (.value - $s.grads[$k].data[.key]) | fabs] | max < 1e-6 * 50' <<<"$output"
    jq -e --argjson s "$static" '[.grads | to_entries[] | .key as $k | .value.data | to_entries[]
      | ((.value - $s.grads[$k].data[.key]) / ($s.grads[$k].data[.key] | fabs | if . < 1 then 1 else . end)) | fabs]
      | max < 1e-6' <<<"$output"
  done
}

@test "the REPL's :grad of a loss holding a loop's or a branch's gradient: the program's values" {
  run --separate-stderr "$NETRUN" repl <<'IN'
param w : [] = 1.5
x = w
i = 0
while i < 3 {
  x = x * w
  i = i + 1
}
g = grad(x, w)
h = grad(g, w)
if w > 1.0 {
  y = w * w * w
} else {
  y = w * w
}
k = grad(y, w)
loss = g * g + w
:grad loss
lk = k * k
:grad lk
:grad h
IN
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [ -z "$stderr" ]
  [ "$output" = "loss = 183.75
w@GRAD : f32[] =
730.0
lk = 45.5625
w@GRAD : f32[] =
121.5
h = 27.0
w@GRAD : f32[] =
36.0" ]
}

@test "the REPL's :grad through the else branch and of a loop's initial value's gradient, as netrun grad gives; :grad of a loop's result" {
  for c in else_second initial_value_second; do
    want=$("$NETRUN" grad "$C/$c.net")
    [[ "$want" == *"w@GRAD : f32[] ="* ]]
    run --separate-stderr "$NETRUN" repl < <(grep -v '^#' "$C/$c.net"; echo ':grad loss')
    echo "$output"
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    [ "$output" = "$want" ]
  done
  # a loop's result is on the tape as the value its last turn made
  run --separate-stderr "$NETRUN" repl <<'IN'
param w : [] = 1.5
x = w
i = 0
while i < 3 {
  x = x * w
  i = i + 1
}
:grad x
IN
  [ "$status" -eq 0 ]
  [ "$output" = "x = 5.0625
w@GRAD : f32[] =
13.5" ]
}

# --order 2 and 3 on the tape: the tape's program (loops unrolled, the
# branches taken) gets the same builder's backward, then f = sum(g * v),
# then the backward of f.  Every second-order gradcheck script gives the
# program's H·v within 1e-5 relative; a value the tape reports as none is
# all zeros in the program (a path through an integer cast, which the tape
# does not record).  Both refuse the same scripts, with the same error.
@test "grad --order 2 --tape gives the program's second derivatives for every gradcheck script" {
  cat > cmp.py <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert abs(a["loss"] - b["loss"]) <= 1e-5 * max(1.0, abs(a["loss"])), (a["loss"], b["loss"])
for k in set(a["grads"]) | set(b["grads"]):
    u, v = a["grads"].get(k), b["grads"].get(k)
    if u is None or v is None:
        assert all(x == 0 for x in (u or v)["data"]), k
        continue
    assert u["shape"] == v["shape"], k
    for x, y in zip(u["data"], v["data"]):
        assert abs(x - y) <= 1e-5 * max(1e-3, abs(x), abs(y)), (k, x, y)
PY
  n=0 failed=""
  for f in "$ROOT"/tests/grad/ops/*.net "$ROOT"/tests/grad/*.net "$ROOT"/tests/grad/stdlib/*.net; do
    o=$(sed -n 's/^# order: \([0-9]\)$/\1/p' "$f")
    rp=0 rt=0
    "$NETRUN" grad --order "${o:-2}" --format json "$f" > p.json 2> p.err || rp=$?
    "$NETRUN" grad --order "${o:-2}" --tape --format json "$f" > t.json 2> t.err || rt=$?
    if [ $rp -ne 0 ] || [ $rt -ne 0 ]; then
      [ $rp -eq $rt ] && cmp -s p.err t.err || failed+=" $(basename "$f")(status $rp/$rt)"
      continue
    fi
    python3 cmp.py p.json t.json || failed+=" $(basename "$f")"
    n=$((n + 1))
  done
  [ -z "$failed" ] || { echo "differ:$failed"; return 1; }
  [ "$n" -gt 100 ]
}

@test "gradcheck --order 2 --tape: H·v of the tape against finite differences, through loops and branches" {
  for f in mlp_batch.net while_nested.net while_data_dependent.net if_else_taken.net stdlib/layers.net; do
    run "$NETRUN" gradcheck --order 2 --tape "$ROOT/tests/grad/$f"
    [ "$status" -eq 0 ]
    [[ "$output" == *"all gradients match finite differences"* ]]
  done
}
