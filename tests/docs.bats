#!/usr/bin/env bats
# docs.bats — the documentation cannot rot: every example script in the
# language man page lowers cleanly, every session transcript in netrun(1)
# is what a session prints, and the README's sample output is what netrun
# prints.

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$BATS_TEST_DIRNAME/..
  cd "$BATS_TEST_TMPDIR"
}

# Writes each `.\" example: NAME.net` ... `.\" end example` block of a man
# page to NAME.net, without the .EX/.EE lines and with man escapes undone.
extract() {
  awk '
    /^\.\\" example: / { name = $3; out = 1; printf "" > name; next }
    /^\.\\" end example/ { out = 0; close(name); next }
    out && /^\.(EX|EE)/ { next }
    out { gsub(/\\-/, "-"); gsub(/\\e/, "\\"); gsub(/^\\&/, ""); print >> name }
  ' "$1"
}

@test "every example in netrun-lang(5) lowers without errors" {
  extract "$ROOT/man/netrun-lang.5"
  n=0
  for f in *.net; do
    run "$NETRUN" dump "$f"
    [ "$status" -eq 0 ] || { echo "$f:"; echo "$output"; return 1; }
    n=$((n + 1))
  done
  [ "$n" -ge 10 ]
}

# Writes each `.\" transcript: NAME` ... `.\" end transcript` block of a
# man page as NAME.in, the lines entered (after a prompt, without it), and
# NAME.out, the other lines: what a session fed NAME.in prints.
transcripts() {
  awk '
    /^\.\\" transcript: / { name = $3; out = 1; printf "" > (name ".in"); printf "" > (name ".out"); next }
    /^\.\\" end transcript/ { out = 0; close(name ".in"); close(name ".out"); next }
    out && /^\.(EX|EE)/ { next }
    out {
      gsub(/\\-/, "-"); gsub(/\\\(aq/, "\047"); gsub(/\\\(dq/, "\""); gsub(/\\\(ha/, "^")
      gsub(/\\\(ti/, "~"); gsub(/\\e/, "\\"); gsub(/^\\&/, "")
      if (sub(/^netrun> /, "") || sub(/^   \.\.\.> /, "")) print >> (name ".in")
      else print >> (name ".out")
    }
  ' "$1"
}

@test "every session transcript in netrun(1) is what a session prints" {
  transcripts "$ROOT/man/netrun.1"
  n=0
  for f in *.in; do
    "$NETRUN" repl < "$f" > "${f%.in}.actual" 2>&1 || true
    diff -u "${f%.in}.out" "${f%.in}.actual"
    n=$((n + 1))
  done
  [ "$n" -ge 1 ]
}

@test "the README's dump of examples/xor.net is current" {
  awk '/^`netrun dump examples\/xor.net` prints:/ { on = 1; next }
       on && /^```$/ { if (inside) exit; inside = 1; next }
       on && inside { print }' "$ROOT/README.md" > readme.txt
  [ -s readme.txt ]
  (cd "$ROOT" && "$NETRUN" dump examples/xor.net) > actual.txt
  diff -u readme.txt actual.txt
}
