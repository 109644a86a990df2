#!/usr/bin/env bats
# param_groups.bats — parameter groups in the train block (src/train/train.c):
# no_decay's parameters are not decayed, lr_mult scales a group's step
# exactly (sgd and its fused sgd_matmul, momentum, adam, adamw, rmsprop,
# f32 and f64), both are kept in checkpoints and noted when --resume
# changes them.  The golden dumps and the errors are the cases in
# tests/cases/groups.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
  printf 'x,y\n1,0\n' > one.csv
}

# The value of a one-element tensor NAME in checkpoint FILE, as printed
# (the shortest text that reads back as the same float).
ckpt_value() { "$NETRUN" checkpoint "$2" | awk -v n="$1" '$1 == n && $(NF - 1) == "value" { print $NF }'; }

# model FILE LOSS SETTING...: two scoped parameters layer.W [1, 1] = 2 and
# layer.b [1] = 2 (x is 1), the loss LOSS, 2 steps of batch 1.
model() {
  local f=$1 loss=$2
  shift 2
  {
    printf 'input x : f32[B, 1]\ninput y : f32[B]\n'
    printf 'def layer(x) {\n  param W : [1, 1] = [[2.0]]\n  param b : [1] = [2.0]\n  return x @ W + b\n}\n'
    printf 'h = layer(x)\nloss = %s\n' "$loss"
    printf 'train {\n  data = "one.csv"\n  batch = 1\n  epochs = 2\n'
    printf '  %s\n' "$@"
    printf '}\n'
  } > "$f"
}

@test "no_decay: with a zero gradient, the decayed parameter shrinks by exactly (1 - lr wd) a step, the other stays" {
  # loss = 0 * (...): every gradient is 0, so sgd's step is lr * wd * w:
  # W = 2 * (1 - 0.5 * 0.5)^2 = 2 * 0.5625 = 1.125 after 2 steps; b keeps 2.
  for opt in 'optimizer = sgd' $'optimizer = momentum\n  momentum = 0' 'optimizer = adamw'; do
    model m.net 'sum(h) * 0.0' "$opt" 'lr = 0.5' 'weight_decay = 0.5' 'no_decay = ["*.b"]'
    run --separate-stderr "$NETRUN" train m.net --save m.ckpt
    [ "$status" -eq 0 ]
    echo "$opt: W $(ckpt_value layer.W m.ckpt) b $(ckpt_value layer.b m.ckpt)"
    [ "$(ckpt_value layer.W m.ckpt)" = 1.125 ]
    [ "$(ckpt_value layer.b m.ckpt)" = 2 ]
  done
  # Without no_decay both shrink.
  model m.net 'sum(h) * 0.0' 'lr = 0.5' 'weight_decay = 0.5'
  "$NETRUN" train m.net --save m.ckpt 2>/dev/null >&2
  [ "$(ckpt_value layer.b m.ckpt)" = 1.125 ]
}

@test "lr_mult scales the step exactly: lr 0.25 with lr_mult 0.5 is lr 0.125, for every optimizer" {
  # loss = sum(x @ W + b): W@GRAD = x = 1, b@GRAD = 1.
  loss='sum(h)'
  for opt in sgd momentum adam adamw rmsprop; do
    model a.net "$loss" "optimizer = $opt" 'lr = 0.25' 'lr_mult = ["*.W: 0.5"]'
    model b.net "$loss" "optimizer = $opt" 'lr = 0.125'
    model c.net "$loss" "optimizer = $opt" 'lr = 0.25'
    for dt in f32 f64; do
      for m in a b c; do "$NETRUN" train $m.net --dtype $dt --save $m.ckpt >/dev/null 2>&1; done
      echo "$opt $dt: W $(ckpt_value layer.W a.ckpt) (lr 0.125: $(ckpt_value layer.W b.ckpt)), b $(ckpt_value layer.b a.ckpt) (lr 0.25: $(ckpt_value layer.b c.ckpt))"
      [ "$(ckpt_value layer.W a.ckpt)" = "$(ckpt_value layer.W b.ckpt)" ]
      [ "$(ckpt_value layer.W a.ckpt)" != "$(ckpt_value layer.W c.ckpt)" ]
      [ "$(ckpt_value layer.b a.ckpt)" = "$(ckpt_value layer.b c.ckpt)" ]
    done
  done
  # By hand, sgd: W = 2 - 2 * 0.125 * 1 = 1.75; b = 2 - 2 * 0.25 * 1 = 1.5.
  model a.net "$loss" 'optimizer = sgd' 'lr = 0.25' 'lr_mult = ["*.W: 0.5"]'
  "$NETRUN" train a.net --save a.ckpt >/dev/null 2>&1
  [ "$(ckpt_value layer.W a.ckpt)" = 1.75 ]
  [ "$(ckpt_value layer.b a.ckpt)" = 1.5 ]
  # ... and W's update is the fused sgd_matmul, carrying the multiplier.
  run "$NETRUN" dump --train a.net
  [[ "$output" == *"{ParamOut=[layer.W]} = sgd_matmul("*"{lr_mult=0.5, transpose_x=true, transpose_y=false}"* ]]
}

@test "the groups are kept in the checkpoint; --resume continues them and says when they changed" {
  loss='sum(h * h)'
  model a.net "$loss" 'optimizer = momentum' 'lr = 0.25' 'weight_decay = 0.5' 'no_decay = ["*.b"]' 'lr_mult = ["*.W: 0.5"]'
  "$NETRUN" train a.net --save whole.ckpt >/dev/null 2>&1
  "$NETRUN" train a.net --epochs 1 --save half.ckpt >/dev/null 2>&1
  run --separate-stderr "$NETRUN" checkpoint half.ckpt
  [[ "$output" == *$'\n  no_decay = *.b\n'* ]]
  [[ "$output" == *$'\n  lr_mult = *.W: 0.5\n'* ]]
  run --separate-stderr "$NETRUN" train a.net --resume half.ckpt --epochs 2 --save rest.ckpt
  [ "$status" -eq 0 ]
  [[ "$stderr" != *"no_decay was"* && "$stderr" != *"lr_mult was"* ]]
  [ "$(ckpt_value layer.W rest.ckpt)" = "$(ckpt_value layer.W whole.ckpt)" ]
  [ "$(ckpt_value layer.b rest.ckpt)" = "$(ckpt_value layer.b whole.ckpt)" ]
  model b.net "$loss" 'optimizer = momentum' 'lr = 0.25' 'weight_decay = 0.5' 'lr_mult = ["*.W: 0.25"]'
  run --separate-stderr "$NETRUN" train b.net --resume half.ckpt --epochs 2 --save rest.ckpt
  [ "$status" -eq 0 ]
  [[ "$stderr" == *"netrun: note: no_decay was [*.b] in the checkpoint; resuming with []"* ]]
  [[ "$stderr" == *"netrun: note: lr_mult was [*.W: 0.5] in the checkpoint; resuming with [*.W: 0.25]"* ]]
}

@test "a group's pattern that matches no parameter stops training before the first step" {
  model a.net 'sum(h)' 'weight_decay = 0.1' 'no_decay = ["*.bias"]'
  run --separate-stderr "$NETRUN" train a.net --save a.ckpt
  [ "$status" -eq 1 ]
  [ "${stderr_lines[0]}" = 'a.net:15:3: error: no_decay pattern "*.bias" matches no parameter (did you mean "*.b"?)' ]
  [ ! -e a.ckpt ]
}
