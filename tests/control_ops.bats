#!/usr/bin/env bats
# control_ops.bats — while and if are ops like every other: their kernels
# and grad makers are registered in their protos (src/ops/control.c).

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
}

@test "ops: while, conditional_block and their grads show their kernels" {
  for op in while conditional_block while_grad conditional_block_grad; do
    run "$NETRUN" ops "$op"
    [ "$status" -eq 0 ]
    grep -qx "kernel: yes" <<<"$output"
  done
  run "$NETRUN" ops
  grep -qE '^while +dedicated +yes +Cond, X\[\], Input\[\] -> Out\[\]  \(internal\)$' <<<"$output"
  grep -qE '^conditional_block +dedicated +yes +Cond, Input\[\] -> Out\[\]  \(internal\)$' <<<"$output"
}
