#!/usr/bin/env bats
# stdlib.bats — the standard library (stdlib/*.net): every function is
# documented, run on real values by a case in tests/cases/stdlib, and,
# when it has a gradient, checked against finite differences.

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$BATS_TEST_DIRNAME/..
  G=$BATS_TEST_DIRNAME/grad/stdlib
  cd "$BATS_TEST_TMPDIR"
}

# The names of the functions the stdlib defines.
stdlib_functions() {
  sed -n 's/^def \([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p' "$ROOT"/stdlib/*.net
}

# Metrics and counters: their values have no gradient worth checking.
not_differentiable=" error_rate top5_accuracy binary_accuracy seq_len "

@test "the stdlib defines the functions the examples rely on" {
  fns=" $(stdlib_functions | tr '\n' ' ') "
  for f in linear dense_relu cross_entropy mse_loss bce_loss; do
    [[ "$fns" == *" $f "* ]] || { echo "missing: $f"; return 1; }
  done
}

@test "every stdlib function is documented in netrun-lang(5)" {
  missing=""
  for f in $(stdlib_functions); do
    grep -q "^\.BI $f( " "$ROOT/man/netrun-lang.5" || missing="$missing $f"
  done
  [ -z "$missing" ] || { echo "not in netrun-lang(5) STANDARD LIBRARY:$missing"; return 1; }
}

@test "every stdlib function runs on real values in tests/cases/stdlib" {
  missing=""
  for f in $(stdlib_functions); do
    grep -q "\b$f(" "$BATS_TEST_DIRNAME"/cases/stdlib/[!_]*.net || missing="$missing $f"
  done
  [ -z "$missing" ] || { echo "no case calls:$missing"; return 1; }
}

@test "every differentiable stdlib function is gradchecked" {
  missing=""
  for f in $(stdlib_functions); do
    [[ "$not_differentiable" == *" $f "* ]] && continue
    grep -q "\b$f(" "$G"/*.net || missing="$missing $f"
  done
  [ -z "$missing" ] || { echo "no tests/grad/stdlib script calls:$missing"; return 1; }
}

# A script's first line may give gradcheck options: "# gradcheck: --seed 2".
@test "the stdlib's gradients match finite differences, in the program and on the tape" {
  failed=""
  for f in "$G"/*.net; do
    args=$(sed -n '1s/^# gradcheck: //p' "$f")
    # shellcheck disable=SC2086
    "$NETRUN" gradcheck $args "$f" > out.txt 2>&1 || { failed="$failed $(basename "$f")"; cat out.txt; }
    # shellcheck disable=SC2086
    "$NETRUN" gradcheck --tape $args "$f" > out.txt 2>&1 || { failed="$failed $(basename "$f")(tape)"; cat out.txt; }
  done
  [ -z "$failed" ] || { echo "gradcheck failed:$failed"; return 1; }
}

@test "each stdlib module imports alone, and nn imports them all" {
  for m in losses metrics recurrent; do
    printf 'import "%s"\n' "$m" > m.net
    run "$NETRUN" dump m.net
    [ "$status" -eq 0 ]
  done
  printf 'import "nn"\nx = [[1.0, 2.0]]\ny = rnn_cell(x, x, [[1.0, 0.0], [0.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]], [0.0, 0.0])\nprint(rmse(y, x) > 0.0, l1_loss(x, x))\n' > all.net
  run "$NETRUN" run all.net
  [ "$status" -eq 0 ]
  [ "$output" = 'True 0.0' ]
}
