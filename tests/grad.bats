#!/usr/bin/env bats
# grad.bats — gradients: every differentiable op against finite differences,
# the static backward against the tape's, the backward dump and the grad verbs.

bats_require_minimum_version 1.5.0
load grad_helpers

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  G=$BATS_TEST_DIRNAME/grad
  cd "$BATS_TEST_TMPDIR"
}

# The ops `netrun ops` lists with a gradient (composite or dedicated).
differentiable_ops() {
  "$NETRUN" ops | awk 'NR > 1 && $2 != "none" { print $1 }'
}

@test "the registry walk: every op with a gradient has a gradcheck script of its own" {
  missing=""
  script_owners > owners.txt
  [ "$(wc -l < owners.txt)" -ge 50 ]
  for op in $(differentiable_ops); do
    grep -qx -- "$op" owners.txt || missing="$missing $op"
  done
  [ -z "$missing" ] || { echo "no tests/grad/ops script for:$missing"; return 1; }
}

@test "every op's gradient matches finite differences" {
  failed=""
  for f in "$G"/ops/*.net; do
    "$NETRUN" gradcheck "$f" > out.txt 2>&1 || { failed="$failed $(basename "$f")"; cat out.txt; }
  done
  [ -z "$failed" ] || { echo "gradcheck failed:$failed"; return 1; }
}

@test "scripts with loops, branches, reuse and rebinding match finite differences" {
  failed=""
  for f in "$G"/*.net; do
    "$NETRUN" gradcheck "$f" > out.txt 2>&1 || { failed="$failed $(basename "$f")"; cat out.txt; }
  done
  [ -z "$failed" ] || { echo "gradcheck failed:$failed"; return 1; }
}

# Largest relative difference between the gradients two JSON outputs hold.
max_diff() {
  paste <(jq -r '.grads | to_entries | sort_by(.key)[] | .value.data[]' "$1") \
        <(jq -r '.grads | to_entries | sort_by(.key)[] | .value.data[]' "$2") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; s = ($1 < 0 ? -$1 : $1); if (s < 1) s = 1; r = d / s; if (r > m) m = r }
         END { printf "%.3g\n", m + 0 }'
}

@test "the tape's backward gives the static backward's gradients" {
  for f in "$G"/*.net "$G"/ops/*.net; do
    "$NETRUN" grad --format json "$f" > static.json
    "$NETRUN" grad --tape --format json "$f" > tape.json
    [ "$(jq -r '.grads | keys | join(",")' static.json)" = "$(jq -r '.grads | keys | join(",")' tape.json)" ]
    d=$(max_diff static.json tape.json)
    awk -v d="$d" 'BEGIN { exit !(d <= 1e-6) }' || { echo "$(basename "$f"): static and tape differ by $d"; return 1; }
  done
}

@test "without loops, static and tape gradients are equal to the last bit" {
  # conv_bias_relu*.net: the static run fuses conv2d, bias, relu and a max
  # pool (and their gradients) into one op each; the tape runs them one by one.
  for f in "$G"/used_many_times.net "$G"/same_var_twice.net "$G"/same_structure.net "$G"/rebound.net \
           "$G"/mlp_batch.net "$G"/conv_bias_relu.net "$G"/conv_bias_relu_pool.net; do
    "$NETRUN" grad --format json "$f" > static.json
    "$NETRUN" grad --tape --format json "$f" > tape.json
    cmp static.json tape.json
  done
}

@test "the tape's backward run directly equals its backward program, to the last bit" {
  # grad --tape runs the grad ops per recorded op (tapegrad.c); --tape-program
  # builds the tape's whole backward program and runs that.  Same builder,
  # same kernels, same summation order: the same bits, loops included.
  for f in "$G"/*.net "$G"/ops/*.net "$G"/stdlib/*.net; do
    "$NETRUN" grad --tape --format json "$f" > direct.json
    "$NETRUN" grad --tape-program --format json "$f" > program.json
    cmp direct.json program.json || { echo "$(basename "$f") differs"; return 1; }
  done
  "$NETRUN" grad --tape --wrt a,w "$G/used_many_times.net" > direct.txt
  "$NETRUN" grad --tape-program --wrt a,w "$G/used_many_times.net" > program.txt
  cmp direct.txt program.txt
  grep -q 'a@GRAD : f32\[3\]' direct.txt
}

@test "the tape's backward reports what the static backward reports, in the same words" {
  printf 'param w : [2] = ones()\ny = w * 2.0\n' > a.net
  printf 'param w : [2, 3] = ones()\ninput y : i64[2] = [0, 1]\nloss = accuracy(w, y)\n' > b.net
  for args in "a.net" "--loss y a.net" "--wrt nothing a.net" "b.net"; do
    run "$NETRUN" grad $args
    [ "$status" -eq 1 ]
    static="$output"
    run "$NETRUN" grad --tape $args
    [ "$status" -eq 1 ]
    [ "$output" = "$static" ] || { echo "grad --tape $args: $output"; return 1; }
  done
}

@test "grad prints the loss and each gradient; json for programs" {
  run "$NETRUN" grad "$G/unused_param.net"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "loss = 0.52000004" ]
  [ "${lines[1]}" = "w@GRAD : f32[2] =" ]
  [ "${lines[2]}" = "[ 0.8 -1.2]" ]
  [ "${lines[3]}" = "unused@GRAD: none (the loss does not depend on unused)" ]
  run "$NETRUN" grad --format json "$G/unused_param.net"
  [ "$output" = '{"loss": 0.520000041, "grads": {"w": {"shape": [2], "data": [0.800000012, -1.20000005]}}}' ]
}

@test "grad --format json stays JSON when the loss or a gradient is NaN or infinite: null and 1e999" {
  printf 'param w : [3] = [-1.0, 0.0, 4.0]\nloss = sum(sqrt(w))\n' > nan.net
  run -0 "$NETRUN" grad --format json nan.net
  [ "$output" = '{"loss": null, "grads": {"w": {"shape": [3], "data": [null, 1e999, 0.25]}}}' ]
  printf 'param w : [2] = [0.0, 2.0]\nloss = sum(log(w))\n' > inf.net
  run -0 "$NETRUN" grad --format json inf.net
  [ "$output" = '{"loss": -1e999, "grads": {"w": {"shape": [2], "data": [1e999, 0.5]}}}' ]
  printf 'param w : [1] = [1.0]\nloss = sum(exp(w * 100.0))\n' > big.net
  run -0 "$NETRUN" grad --format json --dtype f64 big.net
  [ "$output" = '{"loss": 2.6881171418161356e+43, "grads": {"w": {"shape": [1], "data": [2.6881171418161357e+45]}}}' ]
  run -0 "$NETRUN" grad --format json big.net
  [ "$output" = '{"loss": 1e999, "grads": {"w": {"shape": [1], "data": [1e999]}}}' ]
  python3 -c 'import json, sys; [json.load(open(f)) for f in sys.argv[1:]]' <("$NETRUN" grad --format json nan.net) \
    <("$NETRUN" grad --format json inf.net)
}

@test "grad --loss NAME prints NAME, the value the user named, not 'loss'" {
  printf 'param w : [2] = [1.0, 2.0]\nmyobj = sum(w * w)\n' > m.net
  run "$NETRUN" grad --loss myobj m.net
  [ "$status" -eq 0 ]
  [ "$output" = "myobj = 5.0
w@GRAD : f32[2] =
[2. 4.]" ]
}

@test "--wrt picks the parameters, --no-grad makes values constant" {
  run "$NETRUN" grad --format json --wrt w "$G/if_then_taken.net"
  [ "$(jq -r '.grads | keys | join(",")' <<<"$output")" = w ]
  run "$NETRUN" grad --format json --no-grad u "$G/if_then_taken.net"
  [ "$(jq -r '.grads | keys | join(",")' <<<"$output")" = w ]
  # with u constant, w's gradient is unchanged
  a=$("$NETRUN" grad --format json --wrt w "$G/if_then_taken.net" | jq -c .grads.w)
  b=$("$NETRUN" grad --format json --no-grad u "$G/if_then_taken.net" | jq -c .grads.w)
  [ "$a" = "$b" ]
  # an input can be differentiated too
  printf 'input x : f32[2] = [1.0, 2.0]\nparam w : [2] = [3.0, 4.0]\nloss = sum(x * x * w)\n' > in.net
  run "$NETRUN" grad --format json --wrt x in.net
  [ "$output" = '{"loss": 19, "grads": {"x": {"shape": [2], "data": [6, 16]}}}' ]
}

@test "--no-grad on a path: the gradient flows only around it" {
  printf 'param w : [] = 2.0\na = w * 3.0\nb = w * 5.0\nloss = a + b\n' > ng.net
  run "$NETRUN" grad --format json ng.net
  [ "$output" = '{"loss": 16, "grads": {"w": {"shape": [], "data": [8]}}}' ]
  run "$NETRUN" grad --format json --no-grad a ng.net
  [ "$output" = '{"loss": 16, "grads": {"w": {"shape": [], "data": [5]}}}' ]
}

@test "backward errors: unknown loss, a loss that is not a scalar, an op with no gradient" {
  printf 'param w : [2] = ones()\ny = w * 2.0\n' > a.net
  run "$NETRUN" grad a.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: the script has no value named 'loss' to use as the loss (name it with --loss NAME)" ]
  run "$NETRUN" grad --loss y a.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "a.net:2:7: error: the loss 'y' must be a float scalar (f32 or f64), but it is f32[2] (reduce it, e.g. with mean)" ]
  printf 'param w : [2, 3] = ones()\ninput y : i64[2] = [0, 1]\nloss = accuracy(w, y)\n' > b.net
  run "$NETRUN" grad b.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "b.net:3:8: error: accuracy has no gradient, but the loss depends on a parameter through it" ]
  [ "${lines[1]}" = "loss = accuracy(w, y)" ]
  run "$NETRUN" grad --wrt nothing a.net
  [ "$status" -eq 1 ]
}

@test "dump --backward follows the naming conventions" {
  run "$NETRUN" dump --backward "$G/same_var_twice.net"
  [ "$status" -eq 0 ]
  grep -qF '{Out=[loss@GRAD]} = fill_constant() {dtype=f32, shape=[], value=1.0}' <<<"$output"
  grep -qE 'x@GRAD@RENAME@0' <<<"$output"
  grep -qE '\{Out=\[x@GRAD\]\} = add_n\(X=\[x@GRAD@RENAME@0, x@GRAD@RENAME@1' <<<"$output"
  grep -qF '# grad of matmul at' <<<"$output"
  run "$NETRUN" dump --backward "$G/split_unused.net"
  grep -qF '= fill_zeros_like(X=[b])' <<<"$output"
  run "$NETRUN" dump --backward "$G/while_param_every_turn.net"
  grep -qE '= while_grad\(' <<<"$output"
  grep -qF 'block 2 (parent 1) args=[h.2@GRAD, @EMPTY@] results=[h.1@GRAD, @EMPTY@, W@GRAD@B2, b@GRAD@B2]' <<<"$output"
  "$NETRUN" dump --backward --format json "$G/while_param_every_turn.net" | jq -e '.blocks | length == 3' >/dev/null
  "$NETRUN" dump --backward --format dot "$G/while_param_every_turn.net" | dot -Tsvg >/dev/null
}

@test "dump --backward --tape differentiates the unrolled tape" {
  run "$NETRUN" dump --backward --tape "$G/while_param_every_turn.net"
  [ "$status" -eq 0 ]
  [ "$(grep -c '^block' <<<"$output")" -eq 1 ]
  [[ "$output" != *while_grad* ]]
  grep -qF 'h.2#3@GRAD' <<<"$output"
}
