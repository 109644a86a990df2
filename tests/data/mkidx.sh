#!/usr/bin/env bash
# mkidx.sh — writes a small IDX file for the data tests (tests/data.bats).
#
#   mkidx.sh OUT "DIMS" "BYTES" [MAGIC]
#
# DIMS: the dimensions ("5 2 3"), written big-endian after the magic number;
# BYTES: the elements, decimal ("0 51 102 ..."); MAGIC: the magic number
# (default 0x0000 08 RR: unsigned bytes, RR = the number of dims).  OUT
# ending in .gz is gzipped (gzip -n: the same bytes every time).
set -eu
out=$1 dims=$2 bytes=$3
read -ra d <<<"$dims"
magic=$((${4:-0x800 + ${#d[@]}}))
be32() { printf '\\x%02x' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)); }
s=$(be32 "$magic")
for n in "${d[@]}"; do s+=$(be32 "$n"); done
# shellcheck disable=SC2086  # one argument per byte
[ -z "$bytes" ] || s+=$(printf '\\x%02x' $bytes)
case $out in
*.gz) printf "$s" | gzip -n -9 >"$out" ;;
*) printf "$s" >"$out" ;;
esac
