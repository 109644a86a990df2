#!/usr/bin/env bats
# docs.bats — the documentation cannot rot: every example script in the
# language man page lowers cleanly, the examples of netrun-ops(7) build and
# check, and the README's sample output is what netrun prints.

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$BATS_TEST_DIRNAME/..
  cd "$BATS_TEST_TMPDIR"
}

# Writes each `.\" example: NAME` ... `.\" end example` block of a man page
# to the file NAME, without the .EX/.EE lines and with man escapes undone.
extract() {
  awk '
    /^\.\\" example: / { name = $3; out = 1; printf "" > name; next }
    /^\.\\" end example/ { out = 0; close(name); next }
    out && /^\.(EX|EE)/ { next }
    out { gsub(/\\-/, "-"); gsub(/\\\(aq/, "\047"); gsub(/\\e/, "\\"); gsub(/^\\&/, ""); print >> name }
  ' "$1"
}

# each VERB: runs `netrun VERB F` on every *.net file F here, which must
# succeed; n gets their count.
each() {
  n=0
  for f in *.net; do
    run "$NETRUN" "$1" "$f"
    [ "$status" -eq 0 ] || { echo "$f:"; echo "$output"; return 1; }
    n=$((n + 1))
  done
}

@test "every example in netrun-lang(5) lowers without errors" {
  extract "$ROOT/man/netrun-lang.5"
  each dump
  [ "$n" -ge 10 ]
}

# netrun-ops(7): each NAME.c example is a plugin, built as the page says;
# each NAME.net example passes gradcheck; each NAME.backward is the output
# of `netrun dump --backward NAME.net`.
@test "every example in netrun-ops(7) builds, checks its gradients and shows current output" {
  extract "$ROOT/man/netrun-ops.7"
  for c in *.c; do
    ${CC:-cc} -std=c11 -Wall -Wextra -pedantic -Werror -O2 -fPIC -shared -I"$ROOT/include" \
      -o "${c%.c}.so" "$c" -lm
  done
  each gradcheck
  for b in *.backward; do
    "$NETRUN" dump --backward "${b%.backward}.net" > actual.txt
    diff -u "$b" actual.txt
  done
  [ "$n" -ge 1 ] && [ -f swish.so ] && [ -f swish_plugin.backward ]
}

@test "the README's dump of examples/xor.net is current" {
  awk '/^`netrun dump examples\/xor.net` prints:/ { on = 1; next }
       on && /^```$/ { if (inside) exit; inside = 1; next }
       on && inside { print }' "$ROOT/README.md" > readme.txt
  [ -s readme.txt ]
  (cd "$ROOT" && "$NETRUN" dump examples/xor.net) > actual.txt
  diff -u readme.txt actual.txt
}
