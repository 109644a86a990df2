#!/usr/bin/env bats
# fmt.bats — netrun fmt (netrun(1), netrun-lang(5) LAYOUT): the layout of
# tests/fmt/layout.net is tests/fmt/layout.expect exactly; every script of
# the repository keeps its meaning and formats to a fixed point
# (tests/fmt/meaning.sh); examples/ and stdlib/ are kept formatted; a file
# with a syntax error is refused and left as it was.

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$BATS_TEST_DIRNAME/..
  cd "$BATS_TEST_TMPDIR"
}

@test "fmt: the layout of every construct, comments kept in their places" {
  run "$NETRUN" fmt - <"$ROOT/tests/fmt/layout.net"
  [ "$status" -eq 0 ]
  diff -u "$ROOT/tests/fmt/layout.expect" <(printf '%s\n' "$output")
}

# Alignment pads a line by more than FMT_WIDTH spaces when a key is that
# much longer than its neighbours' (fuzz_lsp found the pad written past
# the line's end, which make asan sees here; tests/fuzz/regress/lsp).
@test "fmt: a config key over 100 characters longer than its neighbours aligns them" {
  k=$(printf 'd%.0s' $(seq 130))
  printf 'train {\n  %s = "d.csv"\n  lr = 0.1\n}\n' "$k" > long.net
  run "$NETRUN" fmt - < long.net
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf 'train {\n  %s = "d.csv"\n  lr%*s = 0.1\n}' "$k" 128 '')" ]
}

@test "fmt: its own output is a fixed point" {
  run "$NETRUN" fmt --check "$ROOT/tests/fmt/layout.expect"
  [ "$status" -eq 0 ]
  [ "$output" = "" ]
}

@test "fmt: every script in the repository keeps its meaning and is a fixed point" {
  NETRUN=$NETRUN run "$ROOT/tests/fmt/meaning.sh" "$ROOT"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "${lines[-1]}" == "formatted "*", failed 0" ]]
}

@test "fmt --check: examples/ and stdlib/ are formatted" {
  run "$NETRUN" fmt --check "$ROOT"/examples/*.net "$ROOT"/examples/plugins/*.net "$ROOT"/stdlib/*.net
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "" ]
}

@test "fmt FILE rewrites it in place; --check lists what would change, exit 1" {
  printf 'x=f(1,2)\n' >a.net
  printf 'y = 1\n' >b.net
  run "$NETRUN" fmt --check a.net b.net
  [ "$status" -eq 1 ]
  [ "$output" = "a.net" ]
  [ "$(cat a.net)" = "x=f(1,2)" ]
  run "$NETRUN" fmt a.net b.net
  [ "$status" -eq 0 ]
  [ "$(cat a.net)" = "x = f(1, 2)" ]
  run "$NETRUN" fmt --check a.net b.net
  [ "$status" -eq 0 ]
}

@test "fmt: a file with a syntax error is refused with the error and left untouched (exit 2)" {
  printf 'x = f(1,\ny  =  2\n' >bad.net
  cp bad.net orig.net
  run "$NETRUN" fmt bad.net
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "bad.net:1:6: error: unclosed '(' (it is never closed)" ]
  cmp bad.net orig.net
  run "$NETRUN" fmt --check bad.net
  [ "$status" -eq 2 ]
  cmp bad.net orig.net
}

@test "fmt: usage errors exit 2" {
  run "$NETRUN" fmt
  [ "$status" -eq 2 ]
  [[ "${lines[0]}" == *"fmt needs a FILE (or - for standard input)"* ]]
  run "$NETRUN" fmt --bogus x.net
  [ "$status" -eq 2 ]
  run "$NETRUN" fmt missing.net
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: error: cannot read missing.net: No such file or directory" ]
}
