#!/usr/bin/env bash
# mpi_beat.sh — what the heartbeat thread of src/exec/dist.c costs
# (make bench-mpi-beat; doc/speed.md, "The heartbeat thread"): one epoch
# of examples/fashion_mlp.net on 2 ranks x 1 thread, three ways in turn,
# A B C A B C ..., on a quiet machine and beside two busy loops:
#   A  as netrun runs: MPI_THREAD_MULTIPLE and the heartbeat thread;
#   B  NETRUN_TEST_NO_THREAD_MULTIPLE=1: MPI_THREAD_SERIALIZED, no thread;
#   C  NETRUN_COLLECTIVE_TIMEOUT=0: MPI_THREAD_MULTIPLE, no thread;
# so that C/A is the thread's own cost and B/C the thread level's.  Then
# the CPU time the thread itself used per second of a run
# (/proc/PID/task/TID/schedstat of the thread named netrun-beat), which
# bounds its own cost from above whatever the noise.
# Measured, never asserted.
#
#   tests/bench/mpi_beat.sh [ROUNDS] [LIMIT]     (A B C rounds, examples per epoch)
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
NETRUN=${NETRUN:-$here/netrun}
pairs=${1:-7} limit=${2:-3200}
export NETRUN_PATH=${NETRUN_PATH:-$here/stdlib}   # the standard library of this tree, whichever binary runs
root=()
[ "$(id -u)" != 0 ] || root=(--allow-run-as-root)

# run [ENV=VALUE]: the seconds of one epoch on 2 ranks, as rank 0 reports
# them, and the CPU seconds of the whole job (perf stat's task-clock: the
# ranks and mpirun), less sensitive to the time other processes hold the
# cores; "failed", and mpirun's last words on stderr, when it did not end.
run() {
  local err cpu wall
  err=$(mktemp) cpu=$(mktemp)
  wall=$(perf stat -x, -e task-clock -o "$cpu" mpirun "${root[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 \
    -x NETRUN_PATH ${1:+-x "$1"} -np 2 "$NETRUN" train "$here/examples/fashion_mlp.net" --epochs 1 --limit "$limit" \
    --batch 32 2> "$err" | sed -n 's/^trained .* in \([0-9.]*\) s, .*/\1/p')
  if [ -n "$wall" ]; then
    echo "$wall $(awk -F, '/task-clock/ { printf "%.2f", $1 / 1000 }' "$cpu")"
  else
    echo failed
    tail -3 "$err" >&2
  fi
  rm -f "$err" "$cpu"
}

# abc LABEL: ROUNDS rounds of A B C; the median of each round's B/A and
# C/A, and their range, of the seconds and of the CPU seconds.
abc() {
  local a b c ratios=()
  for _ in $(seq "$pairs"); do
    a=$(run) b=$(run NETRUN_TEST_NO_THREAD_MULTIPLE=1) c=$(run NETRUN_COLLECTIVE_TIMEOUT=0)
    printf '  %s: A %s, B %s, C %s (s, CPU s)\n' "$1" "$a" "$b" "$c"
    case "$a $b $c" in *failed*) continue ;; esac   # a failed run: no ratio
    ratios+=("$(echo "$a $b $c" | awk '{ printf "%.3f %.3f %.3f %.3f", $3 / $1, $5 / $1, $4 / $2, $6 / $2 }')")
  done
  local names=("B/A seconds" "C/A seconds" "B/A CPU seconds" "C/A CPU seconds")
  for col in 1 2 3 4; do
    printf '%s\n' "${ratios[@]}" | cut -d' ' -f$col | sort -n | awk -v l="$1" -v w="${names[col - 1]}" '
      { r[NR] = $1 } END { m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
        printf "%s: %s median %.3f over %d rounds (%.3f to %.3f)\n", l, w, m, NR, r[1], r[NR] }'
  done
}

abc quiet
busy=()
for _ in 1 2; do
  sh -c 'while :; do :; done' &
  busy+=($!)
done
trap 'kill "${busy[@]}" 2> /dev/null || true' EXIT
abc "beside 2 busy loops"
kill "${busy[@]}"
trap - EXIT

# The thread's own CPU time: a run of 5 epochs, sampled 2 s in and 2 s
# before its end on rank 0 and rank 1 (schedstat's first field: ns on a CPU).
log=$(mktemp)
mpirun "${root[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x NETRUN_PATH -np 2 "$NETRUN" train \
  "$here/examples/fashion_mlp.net" --epochs 5 --limit "$limit" --batch 32 > "$log" 2>&1 &
job=$!
sleep 2
cpu() {
  for p in $(pgrep -f "fashion_mlp.net --epochs 5" | sort -n); do
    for t in /proc/"$p"/task/*; do
      if [ "$(cat "$t/comm" 2> /dev/null)" = netrun-beat ]; then echo "$p $(cut -d' ' -f1 "$t/schedstat")"; fi
    done
  done
}
t0=$(date +%s.%N) c0=$(cpu)
sleep 8
t1=$(date +%s.%N) c1=$(cpu)
wait "$job" || true
rm -f "$log"
join <(echo "$c0") <(echo "$c1") | awk -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" '{
  printf "heartbeat thread of pid %s: %.1f us of CPU per second (%.4f%% of a core) over %.1f s\n", $1, ($3 - $2) / 1e3 / w, ($3 - $2) / 1e7 / w, w }'
