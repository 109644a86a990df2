#!/usr/bin/env bats
# error_path.bats — one error path (issue 16, item 3): every error, warning
# and note a user sees is printed by src/diag.c, and only diag.c counts
# errors; the messages that moved onto it keep their words.

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  SRC="$BATS_TEST_DIRNAME/../src"
  cd "$BATS_TEST_TMPDIR"
}

@test "no source file but diag.c writes 'netrun: error:', 'warning:' or 'note:' itself" {
  run grep -rnE '(printf|puts)\(.*"netrun: (error|warning|note):' "$SRC" --include='*.c' --include='*.h'
  [ "$output" = "" ]
  # The pattern finds the old way of writing them.
  echo 'fprintf(stderr, "netrun: error: %s\n", why);' | grep -qE '(printf|puts)\(.*"netrun: (error|warning|note):'
}

@test "no source file but diag.c counts errors by hand" {
  run bash -c "grep -rnE 'nerrors *(\\+\\+|\\+=|-=)|\\+\\+ *[a-z_>.-]*nerrors' '$SRC' --include='*.c' --include='*.h' | grep -v '/diag\\.c:'"
  [ "$output" = "" ]
}

@test "an error with no Diag in reach (netrun ops NAME) keeps its words and status" {
  run "$NETRUN" ops relux
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: unknown op 'relux' (did you mean 'relu'?)" ]
}

@test "--plugin that cannot be loaded: one message, through diag, status 1" {
  run "$NETRUN" --plugin ./nowhere.so ops
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot load plugin './nowhere.so': No such file or directory" ]
}

@test "a script's load outside the allowed folder is reported at the load, once" {
  mkdir sub
  printf 'load "../x.so"\ny = 1\n' > sub/s.net
  : > x.so
  run "$NETRUN" run --allow-load sub/s.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "sub/s.net:1:1: error: cannot load plugin 'sub/../x.so': it lies outside the script's folder sub (links followed); --allow-load=DIR allows another folder" ]
  [ "${#lines[@]}" -eq 3 ]
}
