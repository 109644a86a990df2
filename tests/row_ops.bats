#!/usr/bin/env bats
# row_ops.bats — layer_norm and softmax_cross_entropy, whose kernels
# (src/ops/nn.c) take each row through its passes while it is in cache,
# with lane sums in double: against the same function written with
# unfused ops in f32, loss and gradients within 1e-6, and the same bits on
# any thread count.  Their gradients against finite differences:
# tests/grad/ops/layer_norm*.net, softmax_cross_entropy.net (grad.bats).
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
}

# The largest difference between the numbers (loss and gradients) of two
# grad JSON outputs, relative to the larger of 1 and the first's value,
# after their count.
max_diff() {
  paste <(jq -r '[.loss] + [.grads | to_entries | sort_by(.key)[] | .value.data[]] | .[]' "$1") \
        <(jq -r '[.loss] + [.grads | to_entries | sort_by(.key)[] | .value.data[]] | .[]' "$2") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; s = ($1 < 0 ? -$1 : $1); if (s < 1) s = 1; r = d / s; if (r > m) m = r; n++ }
         END { printf "%d %.3g\n", n, m + 0 }'
}

# agree A.net B.net COUNT: their grad outputs hold COUNT numbers, within 1e-6.
agree() {
  "$NETRUN" grad --format json "$1" > a.json
  "$NETRUN" grad --format json "$2" > b.json
  read -r n d < <(max_diff a.json b.json)
  [ "$n" -eq "$3" ] || { echo "$n numbers, not $3"; return 1; }
  awk -v d="$d" 'BEGIN { exit !(d <= 1e-6) }' || { echo "op and unfused form differ by $d"; return 1; }
  # and not trivially: most gradients are not zero
  [ "$(jq '[.grads[] | .data[] | select(. != 0)] | length' b.json)" -gt $(($3 * 9 / 10)) ]
}

# A row width that is not a multiple of 8 (the lanes' tail) and one that is;
# 48 rows, enough to go to the threads in two blocks.
ln_model() {
  cat > "$1" <<NET
param x : [48, $3] = normal(3, 2)
param s : [$3] = normal(1, 0.5)
param b : [$3] = normal(0, 0.5)
input r : f32[48, $3] = uniform_random([48, $3], min=-0.5, max=0.5)
def unfused(x, s, b) {
  m = mean(x, axis=[-1], keepdim=true)
  d = x - m
  v = mean(d * d, axis=[-1], keepdim=true)
  return d / sqrt(v + 1e-5) * s + b
}
loss = sum($2(x, s, b) * r)
NET
}

@test "layer_norm and its unfused form agree within 1e-6 in f32: loss and gradients of X, Scale and Bias" {
  for w in 203 64; do
    ln_model unf.net unfused "$w"
    ln_model fus.net layer_norm "$w"
    agree unf.net fus.net $((1 + 50 * w))
  done
}

ce_model() {
  cat > "$1" <<NET
param x : [48, 203] = normal(0, 4)
input r : f32[48] = uniform_random([48], min=0.5, max=1.5)
lab = cast(arange(stop=48) * 4, dtype=i64)
def unfused(x, lab) {
  return -sum(log_softmax(x) * one_hot(lab, depth=203), axis=[-1])
}
loss = sum($2(x, lab) * r)
NET
}

@test "softmax_cross_entropy and its unfused form agree within 1e-6 in f32: loss and gradient" {
  ce_model unf.net unfused
  ce_model fus.net softmax_cross_entropy
  agree unf.net fus.net $((1 + 48 * 203))
  # over char_lm's 1024 rows of 256, cut in blocks of 64 rows
  for f in unf fus; do sed -i "s/48/1024/g; s/203/256/g; s|stop=1024) \* 4|stop=1024) / 4|" $f.net; done
  agree unf.net fus.net $((1 + 1024 * 256))
}

@test "layer_norm, softmax_cross_entropy, softmax and log_softmax: the same bits on 1, 2 and 3 threads, forward and backward" {
  ln_model ln.net layer_norm 203
  ce_model ce.net softmax_cross_entropy
  cat > sm.net <<'NET'
param x : [48, 203] = normal(0, 4)
input r : f32[48, 203] = uniform_random([48, 203], min=-1.0, max=1.0)
loss = sum(softmax(x) * r) + sum(log_softmax(x) * r) + sum(softmax(x, axis=0) * r)
NET
  # and over char_lm's 1024 rows of 64: 32 blocks forward, 16 parts of
  # column sums backward, taken by the pool's threads as they come free
  ln_model ln2.net layer_norm 64
  sed -i 's/\[48, /[1024, /g' ln2.net
  # softmax_cross_entropy over char_lm's 1024 rows of 256: 16 blocks
  ce_model ce2.net softmax_cross_entropy
  sed -i "s/48/1024/g; s/203/256/g; s|stop=1024) \* 4|stop=1024) / 4|" ce2.net
  for m in ln ln2 ce ce2 sm; do
    for t in 1 2 3; do OMP_NUM_THREADS=$t "$NETRUN" grad --format json $m.net > "$m$t.json"; done
    cmp "${m}1.json" "${m}2.json"
    cmp "${m}1.json" "${m}3.json"
  done
}

@test "layer_norm_grad's one-pass rows (Scale given, every gradient wanted): the bits of its general loops and of its generic form (NETRUN_TEST_ISA=scalar), rows of 64 and 203" {
  # With --wrt x,s no Bias@GRAD is wanted and the general loops run; the
  # gradients of x and s are the same bits either way.
  for w in 64 203; do
    ln_model m$w.net layer_norm "$w"
    "$NETRUN" grad --format json m$w.net > all.json
    "$NETRUN" grad --format json --wrt x,s m$w.net > xs.json
    [ "$(jq -c '.grads | keys' all.json)" = '["b","s","x"]' ]
    [ "$(jq -c '.grads | keys' xs.json)" = '["s","x"]' ]
    cmp <(jq -c '.grads.x, .grads.s' all.json) <(jq -c '.grads.x, .grads.s' xs.json)
    # the one-pass rows' AVX2 form (CPUs without AVX-512) and the generic loop
    NETRUN_TEST_ISA=scalar "$NETRUN" grad --format json m$w.net > generic.json
    cmp all.json generic.json
    [ "$(jq '[.grads.x.data[] | select(. != 0)] | length' all.json)" -gt $((48 * w * 9 / 10)) ]
  done
}
