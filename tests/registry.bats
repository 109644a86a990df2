#!/usr/bin/env bats
# registry.bats — the registry (`netrun ops`) is the one list of ops: the
# OP LIST of netrun-ops(7) and the op tokens of tests/fuzz/script.dict are
# generated from it (tests/oplists.sh, `make oplists`) and checked here by
# regenerating them; the families of "The built-in ops" in netrun-lang(5),
# an overview, name only ops that exist.

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

@test "the op names of netrun-lang(5)'s families are ops a script may call, or control flow" {
  { callable; printf 'while\nconditional_block\n'; } > want.txt
  # The words set in bold between "The families:" and the example after
  # them, less the prose's own: the reductions' attributes, the train
  # setting clip_norm and the statement `if`.  The families are an
  # overview; the complete list is netrun-ops(7)'s OP LIST, generated.
  awk '/^The families:/ { on = 1; next } on && /^\.PP/ { exit }
       on && /^\.BR? [a-z_0-9]+/ { print $2 }' "$ROOT/man/netrun-lang.5" |
    grep -vxE 'axis|keepdim|clip_norm|if' | LC_ALL=C sort -u > man.txt
  [ "$(wc -l < man.txt)" -gt 90 ]
  LC_ALL=C sort -u want.txt > callable.txt
  run comm -23 man.txt callable.txt
  [ -z "$output" ] || { echo "not ops a script may call: $output"; false; }
}

@test "netrun-ops(7)'s OP LIST and the fuzz dictionary's op tokens are what tests/oplists.sh makes of netrun ops" {
  run "$ROOT/tests/oplists.sh" --check "$NETRUN"
  echo "$output"
  [ "$status" -eq 0 ]
  # Every op once, in the registry's order, in both.
  sed -n 's/^op_\([a-z_0-9]*\)="\1("$/\1/p' "$ROOT/tests/fuzz/script.dict" > dict.txt
  [ "$(grep -c '^op_' "$ROOT/tests/fuzz/script.dict")" -eq "$(wc -l < dict.txt)" ]
  diff dict.txt all.txt
  sed -n '/^\.SH OP LIST$/,/^\.\\" end OP LIST$/{/^\.TP$/{n;s/^\.B //p}}' "$ROOT/man/netrun-ops.7" | sed 's/\\-/-/g' > man.txt
  diff man.txt all.txt
}

@test "oplists.sh --check sees an op missing from the lists, and its regeneration adds it" {
  # A netrun whose registry has one more op than the lists.
  printf '#!/bin/sh\nif [ "$1" = ops ] && [ -z "$2" ]; then "%s" ops; echo "zz_new                     none       yes      X -> Out"; exit; fi\n' "$NETRUN" > fake
  printf 'if [ "$2" = zz_new ]; then echo "zz_new: a new op"; exit; fi\nexec "%s" "$@"\n' "$NETRUN" >> fake
  chmod +x fake
  mkdir -p tree/tests/fuzz tree/man
  cp "$ROOT/tests/oplists.sh" tree/tests/
  cp "$ROOT/tests/fuzz/script.dict" tree/tests/fuzz/
  cp "$ROOT/man/netrun-ops.7" tree/man/
  run tree/tests/oplists.sh --check "$PWD/fake"
  [ "$status" -eq 1 ]
  [[ "$output" == *'+op_zz_new="zz_new("'* ]]
  [[ "$output" == *"oplists.sh: man/netrun-ops.7 differs from netrun ops: run make oplists"* ]]
  run tree/tests/oplists.sh "$PWD/fake"
  [ "$status" -eq 0 ]
  grep -qx 'op_zz_new="zz_new("' tree/tests/fuzz/script.dict
  grep -A3 -x '.B zz_new' tree/man/netrun-ops.7 | grep -qx '(X \\-> Out; gradient: none)'
  run tree/tests/oplists.sh --check "$PWD/fake"
  [ "$status" -eq 0 ]
}
