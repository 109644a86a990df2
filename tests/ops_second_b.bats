#!/usr/bin/env bats
# ops_second_b.bats — batch_norm, rmsprop, elu, silu, upsample_nearest2d and
# conv2d_transpose (netrun-ops(7), "Second set") against figures computed
# here with awk from PyTorch's formulas; their gradients are checked by
# grad.bats's registry walk (tests/grad/ops/) and their messages by
# tests/cases/ops/.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
}

# near A B [TOL]: |A - B| <= TOL (default 1e-6), or say both.
near() {
  awk -v a="$1" -v b="$2" -v t="${3:-1e-6}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }' ||
    { echo "got $1, expected $2 (within ${3:-1e-6})"; return 1; }
}

# same_numbers A B [TOL]: the numbers of texts A and B, in order, each within
# TOL (relative to B's where it is above 1).
same_numbers() {
  paste <(grep -oE -- '-?[0-9][0-9.e+-]*' <<<"$1") <(grep -oE -- '-?[0-9][0-9.e+-]*' <<<"$2") |
    awk -v t="${3:-1e-5}" '{ d = $1 - $2; if (d < 0) d = -d; s = $2 < 0 ? -$2 : $2; if (s < 1) s = 1
                             if (d > t * s || NF != 2) { print "row " NR ": " $0; bad = 1 } }
                           END { exit bad || NR == 0 }'
}

# ---- batch_norm ------------------------------------------------------------------------

# bn_awk MODE: what batch_norm gives on X [2, 3, 2] = 0.5 k^2 - 3k for k =
# 0..11, Scale [1, 2, -1], Bias [0, 0.5, 1], Mean [0.5, -1, 2], Variance
# [1, 4, 0.25], momentum 0.8, epsilon 0.001: Y by rows, then MeanOut and
# VarianceOut, from PyTorch's definition (MODE train or eval).
bn_awk() {
  awk -v mode="$1" 'BEGIN {
    split("1 2 -1", s); split("0 0.5 1", b); split("0.5 -1 2", rm); split("1 4 0.25", rv)
    for (k = 0; k < 12; k++) x[k] = 0.5 * k * k - 3 * k
    for (c = 1; c <= 3; c++) {
      m = 0; for (n = 0; n < 2; n++) for (l = 0; l < 2; l++) m += x[n * 6 + (c - 1) * 2 + l]; m /= 4
      v = 0; for (n = 0; n < 2; n++) for (l = 0; l < 2; l++) v += (x[n * 6 + (c - 1) * 2 + l] - m) ^ 2; v /= 4
      mean[c] = mode == "train" ? m : rm[c]; var[c] = mode == "train" ? v : rv[c]
      mo[c] = mode == "train" ? 0.8 * rm[c] + 0.2 * m : rm[c]
      vo[c] = mode == "train" ? 0.8 * rv[c] + 0.2 * v * 4 / 3 : rv[c]
    }
    for (k = 0; k < 12; k++) { c = int(k / 2) % 3 + 1; printf "%.7g\n", (x[k] - mean[c]) / sqrt(var[c] + 0.001) * s[c] + b[c] }
    for (c = 1; c <= 3; c++) printf "%.7g\n", mo[c]
    for (c = 1; c <= 3; c++) printf "%.7g\n", vo[c]
  }'
}

@test "batch_norm: Y, MeanOut and VarianceOut as PyTorch defines them, training and eval, one program" {
  cat > bn.net <<'EOF'
input training : bool
k = cast(arange(stop=12), dtype=f32)
x = reshape(0.5 * k * k - 3.0 * k, shape=[2, 3, 2])
y, m, v = batch_norm(x, [1.0, 2.0, -1.0], [0.0, 0.5, 1.0], [0.5, -1.0, 2.0], [1.0, 4.0, 0.25], training, momentum=0.8, epsilon=0.001)
print(y)
print(m)
print(v)
EOF
  run "$NETRUN" run --precision 9 --set training=true bn.net
  [ "$status" -eq 0 ]
  same_numbers "$output" "$(bn_awk train)" 2e-6
  run "$NETRUN" run --precision 9 --set training=false bn.net
  [ "$status" -eq 0 ]
  same_numbers "$output" "$(bn_awk eval)" 2e-6
}

@test "batch_norm: no gradient flows back from MeanOut and VarianceOut" {
  cat > st.net <<'EOF'
param x : [3, 2] = [[1.0, 2.0], [3.0, 6.0], [5.0, 4.0]]
y, m, v = batch_norm(x, [1.0, 2.0], [0.0, 1.0], [0.0, 1.0], [1.0, 4.0], true)
loss = sum(m) + sum(v) + sum(y * [[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
EOF
  # Only Y's term counts: channel 0 with xhat = (x - 3) / sqrt(8/3 + 1e-5) and
  # dY = [1, 0, 0]: dX = inv (dY - 1/3 - xhat (xhat_0 / 3)); channel 1 is 0.
  want=$(awk 'BEGIN { inv = 1 / sqrt(8 / 3 + 1e-5); split("1 3 5", x); split("1 0 0", g)
    h0 = (1 - 3) * inv
    for (i = 1; i <= 3; i++) { h = (x[i] - 3) * inv; printf "%.7g 0\n", inv * (g[i] - 1 / 3 - h * h0 / 3) } }')
  run "$NETRUN" grad --wrt x st.net
  [ "$status" -eq 0 ]
  same_numbers "$(sed -n '3,$p' <<<"$output")" "$want" 2e-6
}

@test "batch_norm, upsample_nearest2d and conv2d_transpose: the same bits on 1, 2 and 3 threads" {
  cat > th.net <<'EOF'
param x : [8, 4, 20, 20] = normal(0.5, 2)
param s : [4] = uniform(0.5, 1.5)
param b : [4] = normal(0, 1)
param k : [4, 3, 3, 3] = uniform(-1, 1)
input r : f32[8, 4, 20, 20] = uniform_random([8, 4, 20, 20], min=-1.0, max=1.0)
input r2 : f32[8, 3, 80, 80] = uniform_random([8, 3, 80, 80], min=-1.0, max=1.0)
y, m, v = batch_norm(x, s, b, [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], true)
t = conv2d_transpose(upsample_nearest2d(y), k, strides=[2, 2], paddings=[1, 1], output_padding=[1, 1])
loss = sum(y * r) + sum(t * r2)
EOF
  OMP_NUM_THREADS=1 "$NETRUN" grad --format json th.net > one.json
  OMP_NUM_THREADS=2 "$NETRUN" grad --format json th.net > two.json
  OMP_NUM_THREADS=3 "$NETRUN" grad --format json th.net > three.json
  [ "$(jq '.grads["x"].data | length' one.json)" -eq 12800 ]
  cmp one.json two.json
  cmp one.json three.json
}

# ---- rmsprop ---------------------------------------------------------------------------

# rms_run SETTING...: w [1] = 2 and u [1] = -1 after 3 steps on loss = w^2 +
# 3 u^2 with lr 0.01 and the train SETTINGs; prints "w u w@MEANSQUARE
# u@MEANSQUARE".
rms_run() {
  printf 'x,y\n0,0\n' > one.csv
  {
    printf 'input x : f32[B, 1]\ninput y : f32[B]\nparam w : [1] = [2.0]\nparam u : [1] = [-1.0]\n'
    printf 'loss = sum(w * w) + sum(3.0 * u * u)\n'
    printf 'train {\n  data = "one.csv"\n  batch = 1\n  epochs = 3\n  lr = 0.01\n  optimizer = rmsprop\n'
    printf '  %s\n' "$@"
    printf '}\n'
  } > w.net
  "$NETRUN" train w.net --save w.ckpt >/dev/null 2>w.err || { cat w.err; return 1; }
  "$NETRUN" checkpoint w.ckpt | awk '$(NF - 1) == "value" { v[$1] = $NF }
    END { print v["w"], v["u"], v["w@MEANSQUARE"], v["u@MEANSQUARE"] }'
}

# rms_awk RHO EPS: the same from PyTorch's RMSprop: ms = rho ms + (1 - rho) g^2,
# p -= lr g / (sqrt(ms) + eps).
rms_awk() {
  awk -v rho="$1" -v eps="$2" 'BEGIN { p[1] = 2; p[2] = -1; k[1] = 2; k[2] = 6
    for (t = 0; t < 3; t++) for (i = 1; i <= 2; i++) {
      g = k[i] * p[i]; ms[i] = rho * ms[i] + (1 - rho) * g * g; p[i] -= 0.01 * g / (sqrt(ms[i]) + eps) }
    printf "%.9g %.9g %.9g %.9g\n", p[1], p[2], ms[1], ms[2] }'
}

@test "rmsprop: PyTorch's update with its defaults, and with rho and epsilon set" {
  # by hand, w: g = 4, ms = 0.16, w = 2 - 0.01 * 4 / 0.4 = 1.9; g = 3.8, ms = 0.3028, w = 1.8309426
  got=$(rms_run)
  same_numbers "$got" "$(rms_awk 0.99 1e-8)" 1e-6
  near "$(cut -d' ' -f1 <<<"$got")" 1.7753494 2e-6
  # epsilon outside the root: 0.5 matters as much as the root itself
  got=$(rms_run 'rho = 0.9' 'epsilon = 0.5')
  same_numbers "$got" "$(rms_awk 0.9 0.5)" 1e-6
}

@test "rmsprop: its mean square is saved, restored by --resume, and needed to resume" {
  rms_run > /dev/null
  mv w.ckpt straight.ckpt
  sed -i 's/epochs = 3/epochs = 2/' w.net
  "$NETRUN" train w.net --save w.ckpt > /dev/null 2>&1
  "$NETRUN" checkpoint w.ckpt | grep -E '^  w@MEANSQUARE +f32 +\[1\] +value '
  run --separate-stderr "$NETRUN" train w.net --epochs 3 --resume w.ckpt --save w.ckpt
  [ "$status" -eq 0 ]
  cmp straight.ckpt w.ckpt
  # momentum's state is not rmsprop's
  run --separate-stderr "$NETRUN" train w.net --epochs 3 --optimizer momentum --resume straight.ckpt
  [ "$status" -eq 1 ]
  grep -F "w@VELOCITY" <<<"$stderr"
}

@test "rmsprop: settings it has no use for are refused, and rho with other optimizers" {
  run rms_run 'momentum = 0.9'
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "w.net:12:3: error: rmsprop has no momentum (PyTorch's RMSprop without momentum or weight decay)" ]
  run rms_run 'weight_decay = 0.1'
  [ "${lines[0]}" = "w.net:12:3: error: rmsprop has no weight_decay (PyTorch's RMSprop without momentum or weight decay)" ]
  run rms_run 'rho = 1.0'
  [ "${lines[0]}" = "w.net:12:3: error: rho must be in [0, 1), got 1" ]
  rms_run 'rho = 0.9'
  sed -i 's/optimizer = rmsprop/optimizer = adam/' w.net
  run "$NETRUN" train w.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "w.net:12:3: error: rho is rmsprop's setting, but the optimizer is adam" ]
}

# ---- upsample_nearest2d ----------------------------------------------------------------

@test "upsample_nearest2d: a symbolic batch stays symbolic, H and W scale" {
  printf 'input z : f32[B, 3, 5, 7]\nu = upsample_nearest2d(z, scale=[3, 2])\n' > up.net
  run "$NETRUN" dump up.net
  [ "$status" -eq 0 ]
  grep -Fx '  var u : f32[B, 3, 15, 14]' <<<"$output"
}

# ---- conv2d_transpose --------------------------------------------------------------------

@test "conv2d_transpose is conv2d's adjoint: <conv2d_transpose(x, W), y> = <x, conv2d(y, W)>" {
  # strides, paddings, output_padding, dilations and groups together, on
  # random values: Output [3, 6, 10, 6] = [N, 3 * 2, (5-1)*2 - 2 + 2 + 1 + 1, (6-1) - 2 + 2 + 1]
  cat > adj.net <<'EOF'
x = gaussian_random([3, 4, 5, 6], seed=1)
w = gaussian_random([4, 3, 3, 2], seed=2)
y = gaussian_random([3, 6, 10, 6], seed=3)
t = conv2d_transpose(x, w, strides=[2, 1], paddings=[1, 1], output_padding=[1, 0], dilations=[1, 2], groups=2)
c = conv2d(y, w, strides=[2, 1], paddings=[1, 1], dilations=[1, 2], groups=2)
print(sum(t * y))
print(sum(x * c))
print(sum(abs(t)))
EOF
  run "$NETRUN" run --precision 9 adj.net
  [ "$status" -eq 0 ]
  near "${lines[0]}" "${lines[1]}" "$(awk -v s="${lines[2]}" 'BEGIN { print s * 1e-6 }')"
  # and not trivially: the sums are not 0
  awk -v a="${lines[0]}" 'BEGIN { exit !(a > 1 || a < -1) }'
}

@test "conv2d_transpose: a symbolic batch stays symbolic; the output sides follow PyTorch's formula" {
  printf 'input z : f32[B, 4, 5, 7]\nparam w : [4, 3, 3, 3] = uniform(-1, 1)\nu = conv2d_transpose(z, w, strides=[2, 3], paddings=[1, 2], output_padding=[1, 2], dilations=[2, 1])\n' > ct.net
  run "$NETRUN" dump ct.net
  [ "$status" -eq 0 ]
  # (5-1)*2 - 2 + 2*2 + 1 + 1 = 12, (7-1)*3 - 4 + 2 + 2 + 1 = 19
  grep -Fx '  var u : f32[B, 3, 12, 19]' <<<"$output"
}
