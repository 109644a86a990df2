#!/usr/bin/env bats
# registry.bats — the op lists kept by hand outside the registry are checked
# against it (`netrun ops`): the families of "The built-in ops" in
# netrun-lang(5), the ops cli.bats expects `netrun ops` to list, and the op
# tokens of the fuzzers' tests/fuzz/script.dict.  A new op that one of them
# misses, or an op removed that one still names, fails here with the diff.

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  cd "$BATS_TEST_TMPDIR"
  "$NETRUN" ops | awk 'NR > 1 { print $1 }' | LC_ALL=C sort > all.txt
  [ -s all.txt ]
}

# The ops a script may call: the registry's, less those netrun makes itself
# (grad ops, fusions), which a call names as "used by netrun itself".
callable() {
  while read -r op; do
    printf 'x = %s()\n' "$op" > probe.net
    "$NETRUN" dump probe.net 2>&1 | grep -q "is used by netrun itself" || echo "$op"
  done < all.txt
}

# same FILE-A FILE-B: equal, or the lines only in one or the other.
same() {
  diff <(LC_ALL=C sort -u "$1") <(LC_ALL=C sort -u "$2") > d.txt && return 0
  echo "only in $1: $(grep '^<' d.txt | cut -c3- | tr '\n' ' ')"
  echo "only in $2: $(grep '^>' d.txt | cut -c3- | tr '\n' ' ')"
  return 1
}

@test "netrun-lang(5)'s families list every op a script may call, and the control-flow ops" {
  { callable; printf 'while\nconditional_block\n'; } > want.txt
  # The words set in bold between "The families:" and the example after
  # them, less the prose's own: the reductions' attributes, the train
  # setting clip_norm and the statement `if`.
  awk '/^The families:/ { on = 1; next } on && /^\.PP/ { exit }
       on && /^\.BR? [a-z_0-9]+/ { print $2 }' "$ROOT/man/netrun-lang.5" |
    grep -vxE 'axis|keepdim|clip_norm|if' > man.txt
  same man.txt want.txt
}

@test "cli.bats's op list is every op a script may call, and the control-flow ops" {
  { callable; printf 'while\nconditional_block\n'; } > want.txt
  sed -n '/^@test "ops lists every op with its gradient kind"/,/; do$/p' "$ROOT/tests/cli.bats" |
    sed -n '/for op in/,$p' | sed -e 's/for op in//' -e 's/; do$//' -e 's/\\$//' | tr ' ' '\n' | grep -v '^$' > cli.txt
  [ -s cli.txt ]
  same cli.txt want.txt
}

@test "the fuzz dictionary has a token for every op of the registry" {
  sed -n 's/^op_\([a-z_0-9]*\)="\1("$/\1/p' "$ROOT/tests/fuzz/script.dict" > dict.txt
  [ "$(grep -c '^op_' "$ROOT/tests/fuzz/script.dict")" -eq "$(wc -l < dict.txt)" ]
  same dict.txt all.txt
}
