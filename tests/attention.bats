#!/usr/bin/env bats
# attention.bats — the attention op (src/ops/attention.c), which stdlib's
# scaled_dot_product_attention calls: against the unfused form it
# replaced (matmul, divide, where, softmax, matmul) in f32, the same bits
# on any thread count, its second-order gradients (attention_grad's
# composite gradient) against finite differences and against the unfused
# form's, and what it refuses.  Its gradients against finite differences:
# tests/grad/ops/attention.net and attention_grad.net (grad.bats,
# grad2.bats); its values and shape errors: tests/cases/ops/nn/attention*;
# its second backward's program: tests/cases/backward2/attention_twice.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
}

# model FILE EXPR SHAPE: q, k, v and a random weighting r of SHAPE, the
# loss sum(EXPR(causal) * r) + sum(EXPR(not causal) * r).
model() {
  cat > "$1" <<NET
param q : [$3] = normal(0, 1)
param k : [$3] = normal(0, 1)
param v : [$3] = normal(0, 1)
input r : f32[$3] = uniform_random([$3], min=-0.5, max=0.5)
def unfused(q, k, v, causal) {
  T = dim(q, -2)
  s = matmul(q, k, transpose_y=true) / sqrt(cast(dim(q, -1), f32))
  allowed = (tril(ones([T, T])) > 0.5) or not causal
  return softmax(where(allowed, s, -1e9)) @ v
}
loss = sum($2(q, k, v, true) * r) + sum($2(q, k, v, false) * r)
NET
}

# model2 FILE EXPR: the loss a Hessian-vector product gives, through
# EXPR (fused or unfused) causal and not: l1 of q, k and v, Out@GRAD
# depending on them (a square), then the sum of its gradients weighted by
# a fixed s, whose gradient `netrun grad` takes.
model2() {
  model "$1" "$2" "2, 2, 80, 8"
  sed -i 's/^loss = sum(\(.*\)(q, k, v, true) \* r)/l1 = sum(square(\1(q, k, v, true)) * r)/' "$1"
  cat >> "$1" <<'NET'
input s : f32[2, 2, 80, 8] = uniform_random([2, 2, 80, 8], min=-0.5, max=0.5)
gq, gk, gv = grad(l1, q, k, v)
loss = sum(gq * s) + sum(gk * s) + sum(gv * s)
NET
}

# The largest difference between the numbers (loss and gradients) of two
# grad JSON outputs, relative to the larger of 1 and the first's value.
max_diff() {
  paste <(jq -r '[.loss] + [.grads | to_entries | sort_by(.key)[] | .value.data[]] | .[]' "$1") \
        <(jq -r '[.loss] + [.grads | to_entries | sort_by(.key)[] | .value.data[]] | .[]' "$2") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; s = ($1 < 0 ? -$1 : $1); if (s < 1) s = 1; r = d / s; if (r > m) m = r; n++ }
         END { printf "%d %.3g\n", n, m + 0 }'
}

@test "attention and the unfused form agree within 1e-6 in f32: loss and gradients, causal and not, over two blocks of rows" {
  model unf.net unfused "2, 2, 80, 8"
  model fus.net scaled_dot_product_attention "2, 2, 80, 8"
  sed -i '1i import "nn"' fus.net
  "$NETRUN" grad --format json unf.net > unf.json
  "$NETRUN" grad --format json fus.net > fus.json
  read -r n d < <(max_diff unf.json fus.json)
  [ "$n" -eq 7681 ]   # the loss and 3 x 2560 gradients
  awk -v d="$d" 'BEGIN { exit !(d <= 1e-6) }' || { echo "fused and unfused differ by $d"; return 1; }
  # and not trivially: the gradients are not all zero
  [ "$(jq '[.grads[] | .data[] | select(. != 0)] | length' fus.json)" -gt 7000 ]
}

@test "attention: the same bits on 1, 2 and 3 threads, forward and backward" {
  model m.net attention "4, 2, 130, 16"
  sed -i 's/attention(q, k, v, true)/attention(q, k, v, causal=true)/; s/attention(q, k, v, false)/attention(q, k, v)/' m.net
  for t in 1 2 3; do OMP_NUM_THREADS=$t "$NETRUN" grad --format json m.net > "$t.json"; done
  cmp 1.json 2.json
  cmp 1.json 3.json
}

@test "attention with heads: the same bits as its heads moved to slices of their own by transposes, forward and backward, on 1, 2 and 3 threads" {
  for f in h t; do
    cat > $f.net <<'NET'
param q : [3, 130, 32] = normal(0, 1)
param k : [3, 130, 32] = normal(0, 1)
param v : [3, 130, 24] = normal(0, 1)
input r : f32[3, 130, 24] = uniform_random([3, 130, 24], min=-0.5, max=0.5)
def heads(x) {
  return transpose(reshape(x, [3, 130, 2, -1]), perm=[0, 2, 1, 3])
}
def back(o) {
  return reshape(transpose(o, perm=[0, 2, 1, 3]), [3, 130, 24])
}
NET
  done
  echo 'loss = sum(attention(q, k, v, causal=true, heads=2) * r) + sum(attention(q, k, v, heads=2) * r)' >> h.net
  echo 'loss = sum(back(attention(heads(q), heads(k), heads(v), causal=true)) * r) + sum(back(attention(heads(q), heads(k), heads(v))) * r)' >> t.net
  "$NETRUN" grad --format json t.net > t.json
  for t in 1 2 3; do OMP_NUM_THREADS=$t "$NETRUN" grad --format json h.net > "$t.json"; done
  cmp t.json 1.json
  cmp 1.json 2.json
  cmp 1.json 3.json
  [ "$(jq '[.grads[] | .data[] | select(. != 0)] | length' 1.json)" -gt 30000 ]
}

@test "attention's f32 products: the same bits in AVX-512, AVX2 and the scalar loop (NETRUN_TEST_ISA), tails of rows and columns, causal and not" {
  # Tq 70 (blocks of 64 and 6 rows: tails of 4 and 2 rows), Tk 45 (causal
  # rows past the keys; 45 columns: two chunks, the second masked), d 20
  # and dv 38 (masked vectors), and with 2 heads d 10 and dv 19.
  cat > m.net <<'NET'
param q : [2, 70, 20] = normal(0, 1)
param k : [2, 45, 20] = normal(0, 1)
param v : [2, 45, 38] = normal(0, 1)
input r : f32[2, 70, 38] = uniform_random([2, 70, 38], min=-0.5, max=0.5)
loss = sum(attention(q, k, v, causal=true) * r) + sum(attention(q, k, v) * r) + sum(attention(q, k, v, causal=true, heads=2) * r)
NET
  "$NETRUN" grad --format json m.net > def.json
  NETRUN_TEST_ISA=avx2 "$NETRUN" grad --format json m.net > avx2.json
  NETRUN_TEST_ISA=scalar "$NETRUN" grad --format json m.net > scalar.json
  cmp def.json avx2.json
  cmp def.json scalar.json
  [ "$(jq '[.grads[] | .data[] | select(. != 0)] | length' def.json)" -gt 5000 ]
}

@test "attention: second-order gradients match finite differences of the first, causal and not, f32 and f64" {
  cat > g2.net <<'NET'
param q : [1, 3, 2] = normal(0, 1)
param k : [1, 4, 2] = normal(0, 1)
param v : [1, 4, 3] = normal(0, 1)
loss = sum(square(attention(q, k, v))) + sum(square(attention(q, k, v, causal=true)))
NET
  # the f32 program's second derivatives against differences taken in f64,
  # then the f64 program's; with one gradient of the three wanted (the
  # first backward's attention_grad has one output); on the tape
  for opts in "" "--dtype f64" "--wrt q" "--wrt k" "--wrt v" "--tape"; do
    run "$NETRUN" gradcheck --order 2 $opts g2.net
    [ "$status" -eq 0 ] || { echo "$opts: $output"; return 1; }
    [ "${lines[$((${#lines[@]} - 1))]}" = "all gradients match finite differences (rtol 0.001, eps 1e-06)" ]
  done
  [ "${lines[1]%% *}" = q ] && [ "${lines[2]%% *}" = k ] && [ "${lines[3]%% *}" = v ]
  # the third order too: every op attention_grad's gradient emits has one
  run "$NETRUN" gradcheck --order 3 --dtype f64 g2.net
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  [ "${lines[4]}" = "all gradients match finite differences (rtol 0.001, eps 1e-06)" ]
}

@test "attention: second-order gradients agree with the unfused form's within 1e-6, f32 and f64, over two blocks of rows" {
  model2 unf.net unfused
  model2 fus.net scaled_dot_product_attention
  sed -i '1i import "nn"' fus.net
  grep -q '^l1 = sum(square(unfused(q, k, v, true)) \* r) + sum(unfused(q, k, v, false) \* r)$' unf.net
  for dt in f32 f64; do
    "$NETRUN" grad --dtype $dt --format json unf.net > unf.json
    "$NETRUN" grad --dtype $dt --format json fus.net > fus.json
    read -r n d < <(max_diff unf.json fus.json)
    [ "$n" -eq 7681 ]
    awk -v d="$d" 'BEGIN { exit !(d <= 1e-6) }' || { echo "$dt: fused and unfused second orders differ by $d"; return 1; }
    [ "$(jq '[.grads[] | .data[] | select(. != 0)] | length' fus.json)" -gt 7000 ]
  done
}

@test "attention: causal must be a constant" {
  printf 'input c : bool\nq = ones([2, 2])\nprint(attention(q, q, q, causal=c))\n' > c.net
  run "$NETRUN" run c.net
  [ "$status" -ne 0 ]
  [ "${lines[0]}" = "c.net:3:33: error: attribute 'causal' of 'attention' expects a bool, got a name" ]
}

# qkv FILE [EXTRA]: attention (causal and not, 2 heads, 80 rows: two
# blocks) of the three parts of a split of one QKV [2, 80, 24], as
# stdlib's multi_head_attention makes them; EXTRA is added to the
# attention's output inside the function (e.g. "+ q": Q read twice).
qkv() {
  cat > "$1" <<NET
param x : [2, 80, 24] = normal(0, 1)
input r : f32[2, 80, 8] = uniform_random([2, 80, 8], min=-0.5, max=0.5)
def att(qkv, causal) {
  q, k, v = split(qkv, num=3, axis=2)
  return attention(q, k, v, causal=causal, heads=2) ${2:-}
}
loss = sum(att(x, true) * r) + sum(att(x * 1.5, false) * r)
NET
}

@test "a split of one QKV into attention: fused_attention and fused_attention_grad (no split, concat or copy), the bits of --no-fuse on 1, 2 and 3 threads" {
  qkv m.net
  run "$NETRUN" dump --backward --fused m.net
  [ "$status" -eq 0 ]
  [ "$(grep -c '= fused_attention(QKV=' <<< "$output")" -eq 2 ]
  [ "$(grep -c '= fused_attention_grad(QKV=' <<< "$output")" -eq 2 ]
  [ "$(grep -cE '= (split|concat|attention|attention_grad)\(' <<< "$output")" -eq 0 ]
  grep -q '{QKV@GRAD=\[.*\]} = fused_attention_grad(QKV=\[x\], Out@GRAD=\[.*\]) {causal=true, heads=2}' <<< "$output"
  # forward only (run): the split and attention fuse too
  [ "$("$NETRUN" dump --fused m.net | grep -c '= fused_attention(QKV=')" -eq 2 ]
  "$NETRUN" grad --format json --no-fuse m.net > plain.json
  for t in 1 2 3; do OMP_NUM_THREADS=$t "$NETRUN" grad --format json m.net > "$t.json"; done
  cmp plain.json 1.json
  cmp plain.json 2.json
  cmp plain.json 3.json
  [ "$(jq '[.grads.x.data[] | select(. != 0)] | length' 1.json)" -eq 3840 ]
  [ "$("$NETRUN" run m.net)" = "$("$NETRUN" run --no-fuse m.net)" ]
}

@test "a split whose Q another op reads too: split, attention and attention_grad stay, the bits of --no-fuse" {
  qkv m.net "+ q"
  run "$NETRUN" dump --backward --fused m.net
  [ "$status" -eq 0 ]
  [ "$(grep -c 'fused_attention' <<< "$output")" -eq 0 ]
  [ "$(grep -cE '= split\(' <<< "$output")" -eq 2 ]
  [ "$(grep -cE '= attention_grad\(' <<< "$output")" -eq 2 ]
  "$NETRUN" grad --format json --no-fuse m.net > plain.json
  "$NETRUN" grad --format json m.net > fused.json
  cmp plain.json fused.json
}
