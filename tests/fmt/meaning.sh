#!/usr/bin/env bash
# meaning.sh — netrun fmt over every script of the repository (examples,
# stdlib, tests): a script that parses formats to a fixed point (fmt
# --check of the output lists nothing) whose program is the original's
# (netrun dump of both is the same, but for the source lines and columns
# it names); a script that does not parse is refused with exit 2 and
# left as it was.  The scripts are formatted in a mirror of the tree
# (links to every other file), so imports and data paths resolve as they
# do for the originals.
#   tests/fmt/meaning.sh ROOT     prints each failure, then the counts
set -u
NETRUN=${NETRUN:?}
root=$(cd "$1" && pwd -P)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
mapfile -t scripts < <(find examples stdlib tests -name '*.net' | LC_ALL=C sort)
for d in examples stdlib tests; do cp -rs "$root/$d" "$tmp/$d"; done
fail=0 refused=0 changed=0 formatted=()
# A dump that fails shows its messages only, positions left out: the
# source lines and carets under them move with the layout.
dump() {
  local out code
  out=$(cd "$(dirname "$1")" && "$NETRUN" dump "$(basename "$1")" 2>&1)
  code=$?
  if [ $code -ne 0 ]; then
    out=$(printf '%s\n' "$out" | grep -E '^[^ ]+:[0-9]+:[0-9]+: |^netrun: ' | sed -E 's/^([^ ]+):[0-9]+:[0-9]+:/\1:L:C:/')
  fi
  printf '%s\n--- exit %d\n' "$out" "$code" | sed -E 's/ at ([^ ]*):[0-9]+/ at \1:N/g'
}
for s in "${scripts[@]}"; do
  m=$tmp/$s
  rm -f "$m"
  "$NETRUN" fmt - <"$s" >"$m" 2>/dev/null
  code=$?
  if [ $code -ne 0 ]; then
    cp "$s" "$m"
    if [ $code -ne 2 ]; then echo "$s: fmt exit $code"; fail=$((fail + 1)); fi
    if "$NETRUN" dump --ast "$s" >/dev/null 2>&1; then echo "$s: parses, but fmt refused it"; fail=$((fail + 1)); fi
    refused=$((refused + 1))
    continue
  fi
  formatted+=("$m")
  cmp -s "$s" "$m" && continue
  changed=$((changed + 1))
  if [ "$(dump "$root/$s")" != "$(dump "$m")" ]; then
    echo "$s: dump differs"; diff <(dump "$root/$s") <(dump "$m") | head -6; fail=$((fail + 1))
  fi
done
# fixed point: formatting the output again changes nothing
if ! notfixed=$("$NETRUN" fmt --check "${formatted[@]}"); then
  printf '%s: not a fixed point\n' $notfixed; fail=$((fail + 1))
fi
echo "formatted ${#formatted[@]} ($changed changed), refused $refused, failed $fail"
[ $fail -eq 0 ]
