#!/usr/bin/env bats
# grad2.bats — gradients of gradients: every op a grad maker emits has a
# gradient of its own, so a backward can be differentiated again.  The
# registry walk checks second derivatives (`gradcheck --order 2`: the
# gradient of f = sum(grad(loss) * v), v fixed, against central differences
# of f) of every op, and fails on a grad op without a gradient; values of
# second derivatives are checked against formulas worked by hand; the
# second-order program has a golden dump (tests/cases/backward2).

load grad_helpers

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  G=$BATS_TEST_DIRNAME/grad
  cd "$BATS_TEST_TMPDIR"
}

# The ops that a grad maker emits and no script can call: the *_grad ops,
# and the internal ops composite gradients are built from.
grad_ops() {
  "$NETRUN" ops | awk 'NR > 1 && ($1 ~ /_grad$/ || $1 == "sum_like" || $1 == "reshape_like" || $1 == "max_pool2d_pick") { print $1, $2 }'
}

# The grad ops that have no gradient, each for a reason netrun-ops(7) gives:
# the fused conv layer's, batch norm's and attention's, and a convolution's beneath its
# batch norm's (the executor makes them after every backward is built: no backward ever
# meets it).  A loop's and a branch's have one
# (tests/grad2_control.bats).
NO_GRAD2="fused_attention_grad fused_batch_norm_grad fused_bn_conv2d_grad fused_conv2d_grad"

@test "every op a grad maker emits has a gradient, but the listed few" {
  none=$(grad_ops | awk '$2 == "none" { print $1 }' | LC_ALL=C sort | tr '\n' ' ')
  [ "$none" = "$NO_GRAD2 " ] || { echo "grad ops without a gradient: $none (expected: $NO_GRAD2)"; return 1; }
  # and `netrun ops` lists dozens of them with one
  [ "$(grad_ops | awk '$2 != "none"' | wc -l)" -ge 30 ]
}

@test "the registry walk: every differentiable grad op has a second-order gradcheck script" {
  missing=""
  [ "$(grad_ops | awk '$2 != "none"' | wc -l)" -ge 30 ]
  script_owners > owners.txt
  for op in $(grad_ops | awk '$2 != "none" { print $1 }'); do
    grep -qx -- "$op" owners.txt || missing="$missing $op"
  done
  [ -z "$missing" ] || { echo "no tests/grad/ops script for:$missing"; return 1; }
}

# gradcheck FILE at the order its "# order: N" line asks (default 2).
check2() {
  order=$(sed -n 's/^# order: \([0-9]\)$/\1/p' "$1")
  "$NETRUN" gradcheck --order "${order:-2}" "$1"
}

@test "second derivatives of every op match finite differences (the registry walk)" {
  failed=""
  for f in "$G"/ops/*.net; do
    check2 "$f" > out.txt 2>&1 || { failed="$failed $(basename "$f")"; cat out.txt; }
  done
  [ -z "$failed" ] || { echo "gradcheck --order 2 failed:$failed"; return 1; }
}

@test "second derivatives of scripts with reuse, rebinding, user ops and the stdlib's layers" {
  failed=""
  for f in "$G"/conv_bias_relu.net "$G"/conv_bias_relu_pool.net "$G"/mlp_batch.net "$G"/rebound.net \
           "$G"/same_structure.net "$G"/same_var_twice.net "$G"/split_unused.net "$G"/unused_param.net \
           "$G"/used_many_times.net "$G"/userop_attrs.net "$G"/userop_grad_body.net "$G"/userop_multi.net \
           "$G"/userop_nested.net "$G"/stdlib/attention.net "$G"/stdlib/conv.net "$G"/stdlib/layers.net \
           "$G"/stdlib/losses.net "$G"/stdlib/norm.net; do
    "$NETRUN" gradcheck --order 2 "$f" > out.txt 2>&1 || { failed="$failed $(basename "$f")"; cat out.txt; }
  done
  [ -z "$failed" ] || { echo "gradcheck --order 2 failed:$failed"; return 1; }
}

@test "the walk fails on an op without a second-order gradient; a plugin declares one" {
  # cube(X) = X^3 with a dedicated cube_grad: built plain, cube_grad has no
  # gradient, and differentiating it again is an error naming it
  ${CC:-cc} -std=c11 -Wall -Wextra -Werror -fPIC -shared -I"$BATS_TEST_DIRNAME/../include" -o cube.so \
    "$BATS_TEST_DIRNAME/plugins/cube.c"
  printf 'param w : [3] = [0.5, -1.0, 2.0]\nloss = sum(cube(w) * w)\n' > c.net
  run "$NETRUN" --plugin ./cube.so gradcheck c.net
  [ "$status" -eq 0 ]
  run "$NETRUN" --plugin ./cube.so ops
  [[ "$output" == *"cube_grad                  none"* ]]
  run "$NETRUN" --plugin ./cube.so gradcheck --order 2 c.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "c.net:2:12: error: cube_grad, in the gradient of this cube, has no gradient: the gradient cannot be differentiated again" ]
  # built with CUBE_GRAD2, cube_grad declares a composite gradient
  ${CC:-cc} -std=c11 -Wall -Wextra -Werror -fPIC -shared -I"$BATS_TEST_DIRNAME/../include" -DCUBE_GRAD2 \
    -o cube2.so "$BATS_TEST_DIRNAME/plugins/cube.c"
  run "$NETRUN" --plugin ./cube2.so ops
  [[ "$output" == *"cube_grad                  composite"* ]]
  run "$NETRUN" --plugin ./cube2.so gradcheck --order 2 c.net
  [ "$status" -eq 0 ]
  # loss = sum(w^4): d2/dw2 = 12 w^2
  run "$NETRUN" --plugin ./cube2.so grad --order 2 --format json c.net
  [ "$(jq -c .grads.w.data <<<"$output")" = "[3,12,48]" ]
}

@test "a gradient right to first order but wrong to second FAILs gradcheck --order 2" {
  # a user op whose grad body stops the gradient through x: first
  # derivatives right, second ones missing the 6 x term
  cat > wrong.net <<'EOF2'
op cube(x) -> (y) {
  y = x * x * x
} grad {
  x@GRAD = y@GRAD * 3.0 * stop_gradient(x * x)
}
param w : [3] = [0.5, -1.0, 2.0]
loss = sum(cube(w))
EOF2
  run "$NETRUN" gradcheck wrong.net
  [ "$status" -eq 0 ]
  run "$NETRUN" gradcheck --order 2 wrong.net
  [ "$status" -eq 1 ]
  [ "${lines[1]}" = "w                         3    5.261e+00    1.000e+00  FAIL (element 1: analytic 0, numeric 5.26055, noise 3.9e-10)" ]
  # the f32 differences (--dtype f32) catch it too
  run "$NETRUN" gradcheck --order 2 --dtype f32 wrong.net
  [ "$status" -eq 1 ]
  [ "${lines[1]}" = "w                         3    5.261e+00    1.000e+00  FAIL (element 2: analytic 0, numeric 3.88058, noise 2.1e-05)" ]
  sed 's/stop_gradient(x \* x)/(x * x)/' wrong.net > right.net
  run "$NETRUN" gradcheck --order 2 right.net
  [ "$status" -eq 0 ]
}

@test "d2/dx2 of sum(tanh(x)) is -2 tanh(x) (1 - tanh(x)^2), by hand" {
  printf 'param x : [4] = [0.5, -1.0, 2.0, 0.0]\nloss = sum(tanh(x))\n' > t.net
  run "$NETRUN" grad --order 2 --format json t.net
  [ "$status" -eq 0 ]
  # tanh(0.5) = 0.46211716, tanh(1) = 0.76159416, tanh(2) = 0.96402758
  jq -r '.grads.x.data[]' <<<"$output" > got.txt
  printf '%s\n' -0.72686198 0.63970001 -0.13621869 0 > want.txt
  paste got.txt want.txt | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 2e-6) { print "got " $1 " want " $2; bad = 1 } } END { exit bad }'
  # f, the value differentiated, is sum(1 - tanh(x)^2)
  awk -v f="$(jq -r .loss <<<"$output")" 'BEGIN { w = 0.78644773 + 0.41997434 + 0.07065082 + 1; d = f - w; exit !(d < 2e-6 && d > -2e-6) }'
}

@test "second derivatives by hand: x^3, a product, sigmoid" {
  # d2/dx2 sum(x^3) = 6 x
  printf 'param x : [3] = [0.5, -1.0, 2.0]\nloss = sum(x * x * x)\n' > cube.net
  run "$NETRUN" grad --order 2 --format json cube.net
  [ "$(jq -c .grads.x.data <<<"$output")" = "[3,-6,12]" ]
  # loss = sum(x * y): grad = (y, x), the Hessian swaps: H 1 = (1, 1)
  printf 'param x : [2] = [0.5, -1.0]\nparam y : [2] = [3.0, 4.0]\nloss = sum(x * y)\n' > prod.net
  run "$NETRUN" grad --order 2 --format json prod.net
  [ "$(jq -c '[.grads.x.data, .grads.y.data]' <<<"$output")" = "[[1,1],[1,1]]" ]
  # d2/dx2 sum(sigmoid(x)) = s (1 - s) (1 - 2 s): 0 at x = 0; at x = ln 3,
  # s = 3/4: 3/16 * (-1/2) = -0.09375
  printf 'param x : [2] = [0.0, 1.0986123]\nloss = sum(sigmoid(x))\n' > sig.net
  run "$NETRUN" grad --order 2 --format json sig.net
  jq -r '.grads.x.data[]' <<<"$output" > got.txt
  paste got.txt <(printf '0\n-0.09375\n') |
    awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6) { print "got " $1 " want " $2; bad = 1 } } END { exit bad }'
}

@test "dump --backward --order 2: the golden second-order program" {
  run "$BATS_TEST_DIRNAME/run-cases.sh" "$BATS_TEST_DIRNAME/cases/backward2/tanh_twice.net"
  [ "$status" -eq 0 ]
}

@test "a loop in a user op's grad body cannot be differentiated again: a clear error, not a hang or a silent zero" {
  # (a second backward through the script's own while and if works:
  # tests/grad2_control.bats)
  run timeout 20 "$NETRUN" gradcheck --order 2 "$G/userop_loop_in_grad_body.net"
  [ "$status" -eq 1 ]
  [[ "$output" == *"cannot be differentiated again yet (a second-order gradient through while or if)"* ]]
  [[ "$output" != *"internal error"* ]]
}

@test "--order: checked values, also on the tape, dump needs --backward" {
  printf 'param x : [2] = [0.5, -1.0]\nloss = sum(x * x)\n' > q.net
  run "$NETRUN" gradcheck --order 4 q.net
  [ "$status" -eq 2 ]
  [[ "$output" == *"--order 4: derivatives up to the third (3) are checked"* ]]
  run "$NETRUN" gradcheck --order 0 q.net
  [ "$status" -eq 2 ]
  run "$NETRUN" gradcheck --order 2 --tape q.net
  [ "$status" -eq 0 ]
  [[ "$output" == *"all gradients match finite differences"* ]]
  run "$NETRUN" dump --order 2 q.net
  [ "$status" -eq 2 ]
  [[ "$output" == *"--order 2 prints a backward of a backward: it needs --backward"* ]]
  # order 3: the third derivative of sum(x^4) is 24 x
  printf 'param x : [2] = [0.5, -1.0]\nloss = sum(x * x * x * x)\n' > q4.net
  run "$NETRUN" gradcheck --order 3 q4.net
  [ "$status" -eq 0 ]
  run "$NETRUN" grad --order 3 --format json q4.net
  [ "$(jq -c .grads.x.data <<<"$output")" = "[12,-24]" ]
  run "$NETRUN" grad --order 3 --tape --format json q4.net
  [ "$(jq -c .grads.x.data <<<"$output")" = "[12,-24]" ]
}

@test "a first gradient that is constant has a zero second one; none at all is an error" {
  printf 'param x : [2] = [0.5, -1.0]\nloss = sum(x * 2.0)\n' > lin.net
  run "$NETRUN" gradcheck --order 2 lin.net
  [ "$status" -eq 0 ]
  run "$NETRUN" grad --order 2 lin.net
  [ "${lines[0]}" = "f = 4.0" ]
  [ "${lines[1]}" = "x@GRAD: none (f does not depend on x)" ]
  printf 'param x : [2] = [0.5, -1.0]\ninput c : f32[2] = [1.0, 2.0]\nloss = sum(c * c)\n' > none.net
  run "$NETRUN" gradcheck --order 2 --wrt x none.net
  [ "$status" -eq 1 ]
  [[ "$output" == *"error: --order 2: no gradient reaches the --wrt values, so there is none to differentiate again"* ]]
}
