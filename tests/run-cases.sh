#!/usr/bin/env bash
# run-cases.sh — the data-driven tests: every tests/cases/**/NAME.net runs
# under netrun and its output must equal NAME.expect exactly.
#
# The first line of a case may say how to run it:   # args: dump --format json
# (default: dump); a case that cannot hold that line (a symlink to an
# example) takes its arguments from NAME.args beside it.  The case runs from its own folder, so messages show
# "NAME.net:LINE:COL".  Files whose name starts with '_' are helpers that
# cases import, not cases.  The checkout's own path is shown as <root> (the
# stdlib's files are named by it).  An .expect file holds stdout, then, when not
# empty, "--- stderr" and stderr, then "--- exit N" when N is not 0.
#
#   tests/run-cases.sh [--regen] [CASE...]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd -P)
NETRUN=${NETRUN:-$here/../netrun}
regen=0
if [ "${1:-}" = "--regen" ]; then regen=1; shift; fi
if [ $# -gt 0 ]; then cases=("$@"); else
  mapfile -t cases < <(find "$here/cases" -name '*.net' ! -name '_*' | LC_ALL=C sort)
fi
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in "${cases[@]}"; do
  dir=$(dirname "$c") name=$(basename "$c" .net)
  args=$(sed -n '1s/^# args: //p' "$c")
  [ -f "$dir/$name.args" ] && args=$(cat "$dir/$name.args")
  [ -n "$args" ] || args=dump
  actual=$(cd "$dir" && {
    # shellcheck disable=SC2086
    timeout 60 "$NETRUN" $args "$name.net" >"$tmp/stdout" 2>"$tmp/stderr"
    code=$?
    cat "$tmp/stdout"
    if [ -s "$tmp/stderr" ]; then echo "--- stderr"; cat "$tmp/stderr"; fi
    if [ $code -ne 0 ]; then echo "--- exit $code"; fi
  } | sed "s|$root/|<root>/|g")
  expect="$dir/$name.expect"
  if [ $regen -eq 1 ]; then
    printf '%s\n' "$actual" >"$expect"
    continue
  fi
  if [ -f "$expect" ] && [ "$actual" = "$(cat "$expect")" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: ${c#"$here"/}"
    if [ -f "$expect" ]; then
      diff -u "$expect" <(printf '%s\n' "$actual") | head -40
    else
      echo "  (no $name.expect; run 'make regen' to create it)"
    fi
  fi
done
if [ $regen -eq 1 ]; then echo "regenerated ${#cases[@]} expectations"; exit 0; fi
echo "cases: $pass passed, $fail failed"
[ $fail -eq 0 ]
