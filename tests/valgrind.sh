#!/usr/bin/env bash
# valgrind.sh — netrun under valgrind's memcheck, for `make valgrind`: the
# suites run this as NETRUN.  Any memcheck error or leak makes the run exit
# 99 (failing the test that ran it) and is written to a log in
# $VALGRIND_LOGS, which make valgrind checks at the end, so a report cannot
# hide behind a test that ignores a status or stderr.
here=$(cd "$(dirname "$0")" && pwd)
: "${NETRUN_BIN:=$here/../netrun}" "${VALGRIND_LOGS:=/tmp}"
# Every tensor its own allocation, so memcheck sees each one (tensor.c's pool).
export NETRUN_NO_POOL=1
exec valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
  --show-leak-kinds=definite,indirect --suppressions="$here/valgrind.supp" \
  --log-file="$VALGRIND_LOGS/netrun.%p.log" "$NETRUN_BIN" "$@"
