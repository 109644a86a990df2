#!/usr/bin/env bash
# check_bats.sh [FILE...] — rejects bats lines that can never fail.
#
# bats runs a test with `set -e`, which ignores the status of a command
# negated with `!`: a line `! cmd` (or `a && ! cmd`) fails the test only as
# its last command.  This prints FILE:LINE for each such line that is not
# the last of its test or function (the next line that is neither blank nor
# a comment closes the body with `}`), and exits 1 if it found any.  Write
# `run ! cmd`, `[[ "$output" != *TEXT* ]]` or an explicit `if` instead.
# Default: every tests/*.bats and tests/*.bash beside this script's folder.
set -u
dir=$(cd "$(dirname "$0")/.." && pwd)
[ $# -gt 0 ] || set -- "$dir"/*.bats "$dir"/*.bash
awk '
  function report() { if (pending) { print pending; bad = 1 }; pending = "" }
  FNR == 1 { report() }
  /^[[:space:]]*(#.*)?$/ { next }
  {
    if (pending) { if ($0 ~ /^}[[:space:]]*$/) pending = ""; else report() }
    line = $0; sub(/[[:space:]]#.*$/, "", line)
    if (line ~ /^[[:space:]]*![[:space:]]/ ||
        (line ~ /&&[[:space:]]*![[:space:]]/ && line !~ /^[[:space:]]*(if|elif|while|until)[[:space:]]/ && line !~ /\|\|/))
      pending = FILENAME ":" FNR ": " $0
  }
  END { report(); if (bad) { print "check_bats: a negated command on a line that is not its test'"'"'s last never fails under bats: use run ! or an if" > "/dev/stderr"; exit 1 } }
' "$@"
