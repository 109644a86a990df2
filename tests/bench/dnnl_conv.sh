#!/usr/bin/env bash
# dnnl_conv.sh — `make bench-dnnl`: examples/fashion_resnet.net's 15
# convolutions (batch 128) through netrun's own kernels (conv2d and
# conv2d_grad in `netrun time --backward` on tests/bench/resnet_convs.net)
# and through oneDNN (build/dnnl_conv), alternating for ROUNDS rounds on
# THREADS threads; prints each round and the ratios of the medians.
#
#   tests/bench/dnnl_conv.sh NETRUN DNNL_CONV [THREADS [ROUNDS]]
set -euo pipefail
netrun=$1 dnnl=$2 threads=${3:-1} rounds=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
export OMP_NUM_THREADS=$threads OMP_WAIT_POLICY=PASSIVE
ours=() theirs=() blocked=() moved=()
for r in $(seq "$rounds"); do
  # netrun: conv2d's and conv2d_grad's total ms over 3 passes, per pass
  n=$("$netrun" time --backward --iterations 3 "$here/resnet_convs.net" |
      awk '$1 == "conv2d" || $1 == "conv2d_grad" { s += $3 } END { printf "%.1f", s / 3 }')
  read -r plain own re < <("$dnnl" 3 | awk '/^oneDNN, NCHW:/ { p = $(NF - 1) } /^oneDNN, its layouts:/ { o = $(NF - 1) }
                                             /^oneDNN, with reorders:/ { r = $(NF - 1) } END { print p, o, r }')
  echo "round $r, $threads thread(s): netrun ${n} ms, oneDNN NCHW ${plain} ms, oneDNN in its layouts ${own} ms" \
       "(${re} ms with the reorders from and to NCHW)"
  ours+=("$n") theirs+=("$plain") blocked+=("$own") moved+=("$re")
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
m=$(median "${ours[@]}") p=$(median "${theirs[@]}") o=$(median "${blocked[@]}") e=$(median "${moved[@]}")
awk -v m="$m" -v p="$p" -v o="$o" -v e="$e" -v t="$threads" 'BEGIN {
  printf "medians, %d thread(s): netrun %.1f ms; oneDNN / netrun: NCHW %.2f, its own layouts %.2f, with reorders %.2f\n",
         t, m, p / m, o / m, e / m }'
