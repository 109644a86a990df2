#!/usr/bin/env bats
# error_path.bats — one error path (issue 16, item 3): every error, warning
# and note a user sees is printed by src/base/diag.c, and only diag.c counts
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

# A name given on the command line that the script does not have: the
# error suggests the nearest of the script's names, as a script's own
# unknown names do (--loss, --wrt, predict's and sample's --output, the
# train block's loss).
@test "an unknown name on the command line suggests the script's nearest one" {
  cat > m.net <<'NET'
input x : f32[B, 2] = [[1.0, 2.0]]
input y : i64[B] = [1]
param weights : [2, 3] = uniform(-1, 1)
logits = x @ weights
loss = mean(logits)
NET
  run "$NETRUN" grad --loss los m.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: the script has no value named 'los' to use as the loss (did you mean 'loss'?)" ]
  run "$NETRUN" grad --wrt weight m.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: --wrt weight: the script has no value named 'weight' (did you mean 'weights'?)" ]
  run "$NETRUN" predict --output logit m.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: the script has no value named 'logit' (did you mean 'logits'?)" ]
  run "$NETRUN" sample --output logit "$BATS_TEST_DIRNAME/text/abc_lm.net"
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: the script has no value named 'logit' (did you mean 'logits'?)" ]
  # nothing near: the message alone
  run "$NETRUN" predict --output zzzzzz m.net
  [ "$output" = "netrun: error: the script has no value named 'zzzzzz'" ]
  printf 'train {\n  data = "d.csv"\n  loss = los\n}\n' >> m.net
  printf 'x0,x1,y\n1,2,1\n' > d.csv
  run "$NETRUN" train m.net
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" == *"the script has no value named 'los' to use as the loss (did you mean 'loss'?)"* ]]
}
