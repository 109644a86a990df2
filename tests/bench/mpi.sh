#!/usr/bin/env bash
# mpi.sh — data parallel against threads on one machine (make bench-mpi):
# one epoch's step of examples/fashion_mlp.net and fashion_cnn.net at the
# same global batch, 1 rank x 2 threads against 2 ranks x 1 thread
# (mpirun), the ranks' allreduce blocking (overlap = false) and overlapped
# with the backward (buckets of 0.5 MB, so that the last layers' gradients
# are reduced while the first layers' are computed), and the time rank 0
# spent in allreduce.
# Measured, never asserted.
#
#   tests/bench/mpi.sh [LIMIT_MLP] [LIMIT_CNN]     (examples per epoch)
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
NETRUN=${NETRUN:-$here/netrun}
mlp=${1:-12800} cnn=${2:-1280}
root=()
[ "$(id -u)" != 0 ] || root=(--allow-run-as-root)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ranks MODEL LIMIT BATCH: one epoch on 2 ranks x 1 thread, batch BATCH each.
ranks() {
  mpirun "${root[@]}" --oversubscribe --bind-to core -x OMP_NUM_THREADS=1 -np 2 "$NETRUN" train "$1" \
    --epochs 1 --limit "$2" --batch "$3" 2> /dev/null |
    sed -n -e 's/^trained .* in \([0-9.]*\) s, \([0-9]*\) samples\/s.*/\1 s, \2 samples\/s/p' \
           -e 's/^allreduce on 2 ranks: \([0-9.]* s\) in [0-9]* calls on rank 0 (\([0-9]*%\) of the run)/  allreduce \1 (\2)/p' |
    paste -sd' '
}

# one NAME LIMIT BATCH: the samples/s of one epoch, three ways.
one() {
  local model=$here/examples/$1.net limit=$2 batch=$3
  sed '/^train {/a\  overlap = false' "$model" > "$tmp/$1.net"
  sed '/^train {/a\  bucket_mb = 0.5' "$model" > "$tmp/$1-halfmb.net"
  local t2
  t2=$(OMP_NUM_THREADS=2 "$NETRUN" train "$model" --epochs 1 --limit "$limit" --batch "$batch" --data fashion-mnist \
         2> /dev/null | sed -n 's/^trained .* in \([0-9.]*\) s, \([0-9]*\) samples\/s.*/\1 s, \2 samples\/s/p')
  printf '%-12s %6d examples, batch %d: 1 rank x 2 threads %s\n' "$1" "$limit" "$batch" "$t2"
  printf '  2 ranks x 1 thread (batch %d each), blocking:   %s\n' $((batch / 2)) "$(ranks "$tmp/$1.net" "$limit" $((batch / 2)))"
  printf '  2 ranks x 1 thread (batch %d each), overlapped (0.5 MB buckets): %s\n' $((batch / 2)) "$(ranks "$tmp/$1-halfmb.net" "$limit" $((batch / 2)))"
}
one fashion_mlp "$mlp" 128
one fashion_cnn "$cnn" 128
