#!/usr/bin/env bats
# summary.bats — `netrun summary` (parameters, states, layers, FLOPs,
# activation memory: figures checked against sums worked out here from the
# examples' shapes) and `netrun time --backward` (its structure: every op
# type of the forward and of the backward program in its table; not the
# timings).  The golden outputs are tests/cases/summary/.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  EX=$(cd "$BATS_TEST_DIRNAME/../examples" && pwd)
  cd "$BATS_TEST_TMPDIR"
}

# The figure after "LABEL: " in summary's output.
figure() { sed -n "s/^ *$1: \([0-9]*\).*/\1/p" <<<"$output"; }

@test "summary of fashion_mlp: parameters, FLOPs and activation memory worked out by hand" {
  run "$NETRUN" summary "$EX/fashion_mlp.net"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "model $EX/fashion_mlp.net, batch 128" ]   # the train block's batch
  B=128
  [ "$(figure parameters)" = $((784*512 + 512 + 512*256 + 256 + 256*10 + 10)) ]
  [ "$(figure states)" = 0 ]
  [ "$(figure 'matmul and conv (2 per multiply-add)')" = $((2*B*(784*512 + 512*256 + 256*10))) ]
  # one per output element: the adds and relus, the per-example loss, its mean
  [ "$(figure 'other ops (1 per output element)')" = $((B*(2*512 + 2*256 + 10) + B + 1)) ]
  # every op output, f32: t.0 t.1 h1, t.2 t.3 h2, t.4 logits, the losses, loss
  [ "$(figure 'activation memory of one forward step (every op output)')" = $((4*(B*(3*512 + 3*256 + 2*10 + 1) + 1))) ]
  [[ "$output" == *$'\n'"dense.W                          f32     [784, 512]                   401408"$'\n'* ]]
  [[ "$output" == *$'\n'"dense_1                     2 t.3                    [128, 256]                   131328       33587200"$'\n'* ]]
}

@test "summary --batch of fashion_cnn: the convolutions' FLOPs worked out by hand" {
  run "$NETRUN" summary --batch 32 "$EX/fashion_cnn.net"
  [ "$status" -eq 0 ]
  B=32
  [ "$(figure parameters)" = $((32*1*5*5 + 32 + 64*32*5*5 + 64 + 3136*256 + 256 + 256*10 + 10)) ]
  conv=$((2*B*32*28*28*(1*5*5) + 2*B*64*14*14*(32*5*5)))
  mm=$((2*B*(3136*256 + 256*10)))
  [ "$(figure 'matmul and conv (2 per multiply-add)')" = $((conv + mm)) ]
  [[ "$output" == *$'\n'"conv2d_layer_1              2 t.4                    [32, 64, 14, 14]"* ]]
  [[ "$output" == *$'\n'"max_pool2x2                 1 h.1                    [32, 64, 7, 7]"* ]]
}

@test "summary: states apart, a def's calls as layers, a symbol that is not the batch unknown" {
  cat > m.net <<'NET'
input x : f32[B, T]
state count : [3] = [0.0, 0.0, 0.0]
def gain(v) {
  param s : [2, 1] = [[2.0], [1.0]]
  return v * s
}
b = gain(gain(x))
loss = mean(b)
NET
  run "$NETRUN" summary --batch 2 m.net
  [ "$status" -eq 0 ]
  [ "$(figure parameters)" = 4 ]
  [ "$(figure states)" = 3 ]
  [[ "$output" == *$'\n'"gain_1                      1 b                      [2, T]                            2              ?"$'\n'* ]]
  [[ "$output" == *"FLOPs of one forward step: 1 (and ops of unknown size)"* ]]
}

@test "summary: bad batch and a script error" {
  run "$NETRUN" summary --batch 0 "$EX/fashion_mlp.net"
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --batch needs a whole number of at least 1, not '0'" ]
  printf 'y = nosuch(1)\n' > bad.net
  run "$NETRUN" summary bad.net
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" == "bad.net:1:5: error: "* ]]
}

@test "time --backward: the forward and the backward table list their op types" {
  cat > t.net <<'NET'
param w : [3, 2] = [[1.0, -2.0], [0.5, 1.0], [-1.0, 3.0]]
input x : f32[4, 3] = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
h = relu(x @ w)
loss = mean(h * h)
NET
  run "$NETRUN" time --backward --iterations 3 t.net
  [ "$status" -eq 0 ]
  fwd=$(sed -n '/^forward$/,/^total /p' <<<"$output" | awk 'NR > 2 && $1 != "total" {print $1 ":" $2}' | sort | tr '\n' ' ')
  bwd=$(sed -n '/^backward$/,/^total /p' <<<"$output" | awk 'NR > 2 && $1 != "total" {print $1 ":" $2}' | sort | tr '\n' ' ')
  # the startup block's assign_value is not timed; 3 passes each
  [ "$fwd" = "matmul:3 mean:3 mul:3 relu:3 " ]
  [ "$bwd" = "add_n:3 fill_constant:3 matmul:3 mean_grad:3 mul:6 relu_grad:3 " ]
  [[ "${lines[-1]}" == "3 forward and backward passes: forward "*" ms, backward "*" ms, both "*" ms each" ]]
}

@test "time --backward on an example fed a batch; a script without a loss" {
  run "$NETRUN" time --backward --iterations 1 --set 'x=[[0.5, 1.0]]' --set 'y=[1]' /dev/stdin <<'NET'
import "nn"
input x : f32[B, 2]
input y : i64[B]
loss = cross_entropy(dense(x, 3), y)
NET
  [ "$status" -eq 0 ]
  [[ "$output" == *$'\n'"softmax_cross_entropy_grad "* ]]
  [[ "$output" == *$'\n'"matmul "* ]]
  printf 'param w : [1] = [1.0]\nz = w * 2\n' > noloss.net
  run "$NETRUN" time --backward noloss.net
  [ "$status" -eq 1 ]
  [[ "$output" == *"no value named 'loss'"* ]]
  run "$NETRUN" time --backward --loss q noloss.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "netrun: error: the script has no value named 'q' to use as the loss" ]
  run "$NETRUN" time --loss z noloss.net
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --loss names what --backward differentiates: it needs --backward" ]
}
