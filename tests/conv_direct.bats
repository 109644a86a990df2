#!/usr/bin/env bats
# conv_direct.bats — convolutions run on direct kernels, not im2col and GEMM
# (src/ops/conv.c, conv_direct_ok; the input's gradient too for stride 1
# and padding that keeps the size, conv_same: the 3x3 and 5x5 layers of
# examples/fashion_resnet.net and fashion_cnn.net): their results agree
# with the GEMM path's within float rounding, and are the same bits on any
# thread count; so do the 3x3 layers of 16 channels and up, which take
# Winograd F(2x2, 3x3).  Their gradients against finite differences:
# tests/grad/ops/conv2d_same.net and conv2d_winograd.net (grad.bats).
# NETRUN_TEST_CONV=gemm (netrun(1)) sends every convolution down the GEMM
# path; =pv and =cv make every direct one take the padded-width or the
# channel layout, =direct keeps Winograd out.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
  # conv + bias + relu + 2x2 pool (fused_conv2d) on 14x14, a 3x3 conv of
  # 16 channels on 7x7, a 3x5 kernel, a 17x18 image (over 256 positions:
  # the padded-width layout), and on it a conv of stride 2 and one without
  # padding (their input gradients through GEMMs: 2 channels), a conv of
  # stride 2 over 16 channels (its input gradient by phases), and 1x1
  # kernels of stride 2 (16 -> 32 channels: the input gradient by phases,
  # three of them no tap reaches) and of strides 2 and 3 (2 channels: a
  # GEMM for the input gradient), which gather the positions they read,
  # and one of stride 2 with padding (the whole image copied): every
  # gradient asked for
  cat > same.net <<'EOF'
param x  : [8, 3, 14, 14] = uniform(-1, 1)
param k1 : [16, 3, 5, 5] = uniform(-0.3, 0.3)
param b1 : [16, 1, 1] = uniform(-0.1, 0.1)
param k2 : [16, 16, 3, 3] = uniform(-0.3, 0.3)
param k3 : [6, 16, 3, 5] = uniform(-0.3, 0.3)
input r  : f32[8, 6, 7, 7] = uniform_random([8, 6, 7, 7], min=-1.0, max=1.0)
param x4 : [3, 2, 17, 18] = uniform(-1, 1)
param k4 : [5, 2, 3, 3] = uniform(-0.3, 0.3)
input r4 : f32[3, 5, 17, 18] = uniform_random([3, 5, 17, 18], min=-1.0, max=1.0)
param k5 : [4, 2, 3, 3] = uniform(-0.3, 0.3)
input r5 : f32[3, 4, 9, 9] = uniform_random([3, 4, 9, 9], min=-1.0, max=1.0)
param k6 : [3, 2, 5, 4] = uniform(-0.3, 0.3)
param k7 : [4, 16, 3, 3] = uniform(-0.3, 0.3)
input r7 : f32[8, 4, 4, 4] = uniform_random([8, 4, 4, 4], min=-1.0, max=1.0)
input r6 : f32[3, 3, 13, 15] = uniform_random([3, 3, 13, 15], min=-1.0, max=1.0)
param k8 : [32, 16, 1, 1] = uniform(-0.3, 0.3)
input r8 : f32[8, 32, 4, 4] = uniform_random([8, 32, 4, 4], min=-1.0, max=1.0)
param k9 : [5, 2, 1, 1] = uniform(-0.3, 0.3)
input r9 : f32[3, 5, 9, 6] = uniform_random([3, 5, 9, 6], min=-1.0, max=1.0)
param k10 : [4, 2, 1, 1] = uniform(-0.3, 0.3)
input r10 : f32[3, 4, 10, 10] = uniform_random([3, 4, 10, 10], min=-1.0, max=1.0)
h = max_pool2d(relu(conv2d(x, k1, paddings=[2, 2]) + b1), ksize=[2, 2])
h = relu(conv2d(h, k2, paddings=[1, 1]))
l = sum(conv2d(h, k3, paddings=[1, 2]) * r) + sum(conv2d(x4, k4, paddings=[1, 1]) * r4)
l = l + sum(conv2d(x4, k5, strides=[2, 2], paddings=[1, 1]) * r5) + sum(conv2d(x4, k6) * r6)
l = l + sum(conv2d(h, k7, strides=[2, 2], paddings=[1, 1]) * r7) + sum(conv2d(h, k8, strides=[2, 2]) * r8)
l = l + sum(conv2d(x4, k9, strides=[2, 3]) * r9)
loss = l + sum(conv2d(x4, k10, strides=[2, 2], paddings=[1, 1]) * r10)
EOF
}

# The largest difference between the gradients of two `netrun grad --format
# json` outputs, tensor by tensor, over that tensor's largest magnitude.
max_rel_diff() {
  python3 -c '
import json, sys
a, b = (json.load(open(f))["grads"] for f in sys.argv[1:3])
assert a.keys() == b.keys() and all(a[k]["shape"] == b[k]["shape"] for k in a)
print(max(max(abs(x - y) for x, y in zip(a[k]["data"], b[k]["data"])) / max(abs(x) for x in a[k]["data"])
          for k in a))
' "$1" "$2"
}

@test "direct convolutions agree with im2col and GEMM within float rounding, forward and backward" {
  NETRUN_TEST_CONV=gemm "$NETRUN" grad same.net --format json > gemm.json
  # the default, and each of the two layouts on every image
  for v in default pv cv; do
    NETRUN_TEST_CONV=$v "$NETRUN" grad same.net --format json > $v.json
    # the paths ran: their sums are taken in other orders
    run ! cmp -s $v.json gemm.json
    rel=$(max_rel_diff gemm.json $v.json)
    echo "$v: largest relative difference $rel"
    awk -v r="$rel" 'BEGIN { exit !(r > 0 && r < 2e-6) }'
  done
  # the default takes Winograd for k2 (16 channels each way on 7x7), the
  # channel layout for the others on 14x14 and 7x7, the other on 17x18
  run ! cmp -s default.json pv.json
  run ! cmp -s default.json cv.json
}

@test "direct convolutions give the same bits on 1, 2 and 3 threads" {
  for t in 1 2 3; do OMP_NUM_THREADS=$t "$NETRUN" grad same.net --format json > t$t.json; done
  [ "$(python3 -c 'import json, sys; print(sorted(json.load(open(sys.argv[1]))["grads"]))' t1.json)" = \
    "['b1', 'k1', 'k10', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7', 'k8', 'k9', 'x', 'x4']" ]
  cmp t1.json t2.json
  cmp t1.json t3.json
}

# 3x3 convolutions of stride 1 and padding 1 with 16 channels or more each
# way take Winograd F(2x2, 3x3) forward, for the input's gradient and for the
# filter's (src/ops/conv.c, wino_ok); NETRUN_TEST_CONV=direct keeps the
# direct kernels.  Odd sides, a 1x1 image of 17 channels, a 2x12 image
# and 18 filters (panels of 16), 16 channels at 28x28 over 24 images (the
# ResNet's first stage: two threads take images), a 66x66 image (1089
# tiles: the forward and the input's gradient in two blocks of tile rows,
# the filter's gradient on the direct kernels), and two tall images whose
# last block of tile rows has one row: 258x10 (two rows of 5 tiles a group
# of V, blocks of 128 rows) and 130x26 (one row of 13, blocks of 64).
# Maps of 8 columns or fewer keep four tile rows of 4 tiles a group: 9x5
# (5 rows, the last group of one), 1x1, and 520x7 (260 rows, in blocks of
# 256 and 4).
# The gradients of r1..r7 are the forward's outputs.
# Gradients against finite differences: tests/grad/ops/conv2d_winograd.net.
wino_net() {
  cat > wino.net <<'EOF2'
param x1 : [2, 16, 9, 5] = uniform(-1, 1)
param k1 : [16, 16, 3, 3] = uniform(-0.3, 0.3)
param x2 : [3, 17, 1, 1] = uniform(-1, 1)
param k2 : [16, 17, 3, 3] = uniform(-0.3, 0.3)
param x3 : [1, 16, 2, 12] = uniform(-1, 1)
param k3 : [18, 16, 3, 3] = uniform(-0.3, 0.3)
param x4 : [24, 16, 28, 28] = uniform(-1, 1)
param k4 : [16, 16, 3, 3] = uniform(-0.3, 0.3)
param x5 : [1, 16, 66, 66] = uniform(-1, 1)
param k5 : [17, 16, 3, 3] = uniform(-0.3, 0.3)
param r1 : [2, 16, 9, 5] = uniform(-1, 1)
param r2 : [3, 16, 1, 1] = uniform(-1, 1)
param r3 : [1, 18, 2, 12] = uniform(-1, 1)
param r4 : [24, 16, 28, 28] = uniform(-1, 1)
param r5 : [1, 17, 66, 66] = uniform(-1, 1)
param x6 : [1, 16, 258, 10] = uniform(-1, 1)
param k6 : [16, 16, 3, 3] = uniform(-0.3, 0.3)
param r6 : [1, 16, 258, 10] = uniform(-1, 1)
param x7 : [1, 16, 130, 26] = uniform(-1, 1)
param k7 : [16, 16, 3, 3] = uniform(-0.3, 0.3)
param r7 : [1, 16, 130, 26] = uniform(-1, 1)
param x8 : [1, 16, 520, 7] = uniform(-1, 1)
param k8 : [16, 16, 3, 3] = uniform(-0.3, 0.3)
param r8 : [1, 16, 520, 7] = uniform(-1, 1)
l = sum(conv2d(x1, k1, paddings=[1, 1]) * r1) + sum(conv2d(x2, k2, paddings=[1, 1]) * r2)
l = l + sum(conv2d(x3, k3, paddings=[1, 1]) * r3) + sum(conv2d(x4, k4, paddings=[1, 1]) * r4)
l = l + sum(conv2d(x6, k6, paddings=[1, 1]) * r6) + sum(conv2d(x7, k7, paddings=[1, 1]) * r7)
l = l + sum(conv2d(x8, k8, paddings=[1, 1]) * r8)
loss = l + sum(conv2d(x5, k5, paddings=[1, 1]) * r5)
EOF2
}

@test "Winograd convolutions agree with the direct kernels and GEMMs within float rounding" {
  wino_net
  for v in gemm direct winograd; do NETRUN_TEST_CONV=$v "$NETRUN" grad wino.net --format json > $v.json; done
  # Winograd ran: its sums differ from both
  run ! cmp -s winograd.json direct.json
  run ! cmp -s winograd.json gemm.json
  for ref in gemm direct; do
    rel=$(max_rel_diff $ref.json winograd.json)
    echo "against $ref: largest relative difference $rel"
    awk -v r="$rel" 'BEGIN { exit !(r > 0 && r < 4e-6) }'
  done
}

@test "Winograd convolutions give the same bits on 1, 2 and 3 threads" {
  wino_net
  for t in 1 2 3; do OMP_NUM_THREADS=$t NETRUN_TEST_CONV=winograd "$NETRUN" grad wino.net --format json > t$t.json; done
  cmp t1.json t2.json
  cmp t1.json t3.json
}

# On CPUs with AVX-512 the kernels run in 512-bit vectors (src/ops/conv.c,
# dir_z); NETRUN_TEST_ISA=avx2 keeps them in AVX2.  Each output's sum runs
# over the same terms in the same order either way, so the bits are the
# same.  The shapes reach every tile of the AVX-512 kernels: the channel
# layout with 40 and 36 filters (two panels of 16 at once, then one), the
# padded-width layout on 20x20 (six tiles of 64 positions, then 56),
# Winograd on 7x7 (16 tiles: 16 rows a vector, then 8, then 4, 28
# filters), 10x10 (25 tiles: two vectors), 12x12 (36: three) and 14x14
# (49: four, the last of one lane in two).  Winograd's input transform
# writes four tile rows a group of 16 up to 4 tiles a row (7x7, in AVX2
# either way), two tile rows up to 8 tiles a row (the 10x10 and
# 14x14 maps: an odd number of rows, the last group's second row past the
# image; 258x10: 129 rows, in blocks of 128 and 1), one row from 9 to
# 16 (30x30; 130x26: 65 rows, in blocks of 64 and 1), and 24 tiles a row (5x34)
# in AVX2 either way.  In AVX-512 it reads the image in place, its border
# masked; in AVX2 a padded copy.
@test "the AVX-512 kernels give the bits of the AVX2 ones, on every layout" {
  grep -qw avx512f /proc/cpuinfo || skip "this CPU has no AVX-512: the AVX2 kernels are the only ones"
  cat > isa.net <<'EOF2'
param x1 : [3, 8, 9, 9] = uniform(-1, 1)
param k1 : [40, 8, 3, 3] = uniform(-0.3, 0.3)
param x2 : [3, 8, 11, 11] = uniform(-1, 1)
param k2 : [36, 8, 3, 3] = uniform(-0.3, 0.3)
param x3 : [2, 3, 20, 20] = uniform(-1, 1)
param k3 : [12, 3, 3, 3] = uniform(-0.3, 0.3)
param x4 : [2, 16, 7, 7] = uniform(-1, 1)
param k4 : [28, 16, 3, 3] = uniform(-0.3, 0.3)
param x5 : [1, 16, 10, 10] = uniform(-1, 1)
param k5 : [16, 16, 3, 3] = uniform(-0.3, 0.3)
param x6 : [1, 20, 12, 12] = uniform(-1, 1)
param k6 : [16, 20, 3, 3] = uniform(-0.3, 0.3)
param x7 : [2, 16, 14, 14] = uniform(-1, 1)
param k7 : [20, 16, 3, 3] = uniform(-0.3, 0.3)
param x8 : [1, 16, 30, 30] = uniform(-1, 1)
param k8 : [16, 16, 3, 3] = uniform(-0.3, 0.3)
param x9 : [1, 16, 258, 10] = uniform(-1, 1)
param k9 : [16, 16, 3, 3] = uniform(-0.3, 0.3)
param x10 : [1, 16, 130, 26] = uniform(-1, 1)
param k10 : [16, 16, 3, 3] = uniform(-0.3, 0.3)
param x11 : [1, 16, 5, 34] = uniform(-1, 1)
param k11 : [16, 16, 3, 3] = uniform(-0.3, 0.3)
l = sum(sin(conv2d(x1, k1, paddings=[1, 1]))) + sum(sin(conv2d(x2, k2, strides=[2, 2], paddings=[1, 1])))
l = l + sum(sin(conv2d(x3, k3, paddings=[1, 1]))) + sum(sin(conv2d(x4, k4, paddings=[1, 1])))
l = l + sum(sin(conv2d(x5, k5, paddings=[1, 1]))) + sum(sin(conv2d(x6, k6, paddings=[1, 1])))
l = l + sum(sin(conv2d(x8, k8, paddings=[1, 1]))) + sum(sin(conv2d(x9, k9, paddings=[1, 1])))
l = l + sum(sin(conv2d(x10, k10, paddings=[1, 1]))) + sum(sin(conv2d(x11, k11, paddings=[1, 1])))
loss = l + sum(sin(conv2d(x7, k7, paddings=[1, 1])))
EOF2
  for v in default pv cv direct winograd; do
    NETRUN_TEST_CONV=$v "$NETRUN" grad isa.net --format json > $v.z.json
    NETRUN_TEST_ISA=avx2 NETRUN_TEST_CONV=$v "$NETRUN" grad isa.net --format json > $v.avx2.json
    cmp $v.z.json $v.avx2.json
  done
  # the layouts ran: their sums differ
  run ! cmp -s winograd.z.json direct.z.json
  run ! cmp -s pv.z.json cv.z.json
}

# 2x2 max pools of stride 2 run in AVX-512 too (pool_2x2_plane_z and its
# gradient, src/ops/conv.c): 16 windows of a row a vector, rows of up to 16
# windows spilling into the rows below, the last row of a plane masked.
# Each window picks as the AVX2 loops do (the first largest, the last NaN
# over anything else), so the bits are theirs.  The inputs have ties (+-1),
# zeros of both signs, NaN (10%), and rows of 1, 4, 7, 16, 23 and 35
# windows, odd sides among them; the fused convolution's pool and relu (its
# gradient's mask in the same pass) on 14, 5 and 4 windows a row.
@test "2x2 max pools in AVX-512 give the bits of the AVX2 loops: ties, signed zeros, NaN, odd sides, 1 to 35 windows a row, after a fused convolution" {
  grep -qw avx512f /proc/cpuinfo || skip "this CPU has no AVX-512: the AVX2 loops are the only ones"
  cat > pool.net <<'EOF2'
# ties (+-1), zeros of both signs beside their neighbours, NaN (5%)
def mixed(u, q) {
  t = where(greater_than(q, 0.4), sign(u), where(greater_than(q, -0.2), neg(relu(u)), relu(u)))
  return where(greater_than(q, 0.9), log(q - 2.0), t)
}
# each window's pick gets the gradient: e's exactly, m's times the value
def pooled(u, q) {
  param m : [dim(u, 0), dim(u, 1), dim(u, 2), dim(u, 3)] = ones()
  param e : [dim(u, 0), dim(u, 1), dim(u, 2), dim(u, 3)] = zeros()
  d = mixed(u, q)
  return sum(sin(max_pool2d(d * m, ksize=[2, 2]))) + sum(sin(max_pool2d(d + e, ksize=[2, 2])))
}
input u1 : f32[1, 2, 30, 46] = uniform_random([1, 2, 30, 46], min=-1.0, max=1.0, seed=1)
input q1 : f32[1, 2, 30, 46] = uniform_random([1, 2, 30, 46], min=-1.0, max=1.0, seed=2)
input u2 : f32[2, 2, 32, 32] = uniform_random([2, 2, 32, 32], min=-1.0, max=1.0, seed=3)
input q2 : f32[2, 2, 32, 32] = uniform_random([2, 2, 32, 32], min=-1.0, max=1.0, seed=4)
input u3 : f32[2, 2, 14, 14] = uniform_random([2, 2, 14, 14], min=-1.0, max=1.0, seed=5)
input q3 : f32[2, 2, 14, 14] = uniform_random([2, 2, 14, 14], min=-1.0, max=1.0, seed=6)
input u4 : f32[1, 2, 7, 9] = uniform_random([1, 2, 7, 9], min=-1.0, max=1.0, seed=7)
input q4 : f32[1, 2, 7, 9] = uniform_random([1, 2, 7, 9], min=-1.0, max=1.0, seed=8)
input u5 : f32[1, 3, 5, 3] = uniform_random([1, 3, 5, 3], min=-1.0, max=1.0, seed=9)
input q5 : f32[1, 3, 5, 3] = uniform_random([1, 3, 5, 3], min=-1.0, max=1.0, seed=10)
input u6 : f32[1, 2, 6, 33] = uniform_random([1, 2, 6, 33], min=-1.0, max=1.0, seed=11)
input q6 : f32[1, 2, 6, 33] = uniform_random([1, 2, 6, 33], min=-1.0, max=1.0, seed=12)
input u7 : f32[1, 2, 9, 70] = uniform_random([1, 2, 9, 70], min=-1.0, max=1.0, seed=13)
input q7 : f32[1, 2, 9, 70] = uniform_random([1, 2, 9, 70], min=-1.0, max=1.0, seed=14)
l = pooled(u1, q1) + pooled(u2, q2) + pooled(u3, q3) + pooled(u4, q4) + pooled(u5, q5) + pooled(u6, q6)
loss = l + pooled(u7, q7)
EOF2
  cat > fused.net <<'EOF2'
def conv_pool(x) {
  param k : [5, dim(x, 1), 3, 3] = uniform(-0.5, 0.5)
  param b : [5, 1, 1] = uniform(-0.1, 0.1)
  return sum(sin(max_pool2d(relu(conv2d(x, k, paddings=[1, 1]) + b), ksize=[2, 2])))
}
param x1 : [2, 3, 28, 28] = uniform(-1, 1)
param x2 : [2, 3, 10, 10] = uniform(-1, 1)
param x3 : [2, 3, 9, 9] = uniform(-1, 1)
loss = conv_pool(x1) + conv_pool(x2) + conv_pool(x3)
EOF2
  run -0 "$NETRUN" dump --fused fused.net
  [ "$(grep -c '= fused_conv2d(' <<< "$output")" = 3 ]
  for f in pool fused; do
    "$NETRUN" grad $f.net --format json > $f.z.json
    NETRUN_TEST_ISA=avx2 "$NETRUN" grad $f.net --format json > $f.avx2.json
    cmp $f.z.json $f.avx2.json
  done
  # every window's gradient lands on one place of its e (NaN ones as null)
  run -0 python3 -c '
import json
g = json.load(open("pool.z.json"))["grads"]
print(*(sum(1 for v in g[k]["data"] if v != 0) for k in g if k.endswith(".e")))'
  [ "$output" = "690 1024 196 24 6 96 280" ]
  "$NETRUN" grad --no-fuse fused.net --format json | cmp - fused.z.json
}

@test "Winograd is taken where its tiles waste little: 14x14 and 10x10 maps, and 7x7 from 96 channels; 7x7 and 9x5 below them stay direct" {
  cat > pick.net <<'EOF2'
param a : [2, 16, 14, 14] = uniform(-1, 1)
param ka : [16, 16, 3, 3] = uniform(-0.3, 0.3)
param b : [2, 16, 10, 10] = uniform(-1, 1)
param kb : [16, 16, 3, 3] = uniform(-0.3, 0.3)
param c : [1, 96, 7, 7] = uniform(-1, 1)
param kc : [96, 96, 3, 3] = uniform(-0.3, 0.3)
param d : [2, 64, 7, 7] = uniform(-1, 1)
param kd : [64, 64, 3, 3] = uniform(-0.3, 0.3)
param e : [2, 16, 9, 5] = uniform(-1, 1)
param ke : [16, 16, 3, 3] = uniform(-0.3, 0.3)
l = sum(sin(conv2d(a, ka, paddings=[1, 1]))) + sum(sin(conv2d(b, kb, paddings=[1, 1])))
l = l + sum(sin(conv2d(c, kc, paddings=[1, 1]))) + sum(sin(conv2d(d, kd, paddings=[1, 1])))
loss = l + sum(sin(conv2d(e, ke, paddings=[1, 1])))
EOF2
  for v in default direct winograd; do NETRUN_TEST_CONV=$v "$NETRUN" grad pick.net --format json > $v.json; done
  # per gradient (of the input and of the filter): the bits of the kernels the default picks
  for p in a ka b kb c kc; do
    [ "$(jq -c ".grads.$p" default.json)" = "$(jq -c ".grads.$p" winograd.json)" ]
    [ "$(jq -c ".grads.$p" default.json)" != "$(jq -c ".grads.$p" direct.json)" ]
  done
  for p in d kd e ke; do
    [ "$(jq -c ".grads.$p" default.json)" = "$(jq -c ".grads.$p" direct.json)" ]
    [ "$(jq -c ".grads.$p" default.json)" != "$(jq -c ".grads.$p" winograd.json)" ]
  done
}

@test "1x1 kernels of stride 2 or more take the direct kernels over the positions they read; of stride 1 a GEMM" {
  cat > pick1.net <<'EOF2'
param a : [4, 16, 14, 14] = uniform(-1, 1)
param ka : [32, 16, 1, 1] = uniform(-0.3, 0.3)
param b : [3, 3, 11, 10] = uniform(-1, 1)
param kb : [4, 3, 1, 1] = uniform(-0.3, 0.3)
param c : [4, 16, 14, 14] = uniform(-1, 1)
param kc : [32, 16, 1, 1] = uniform(-0.3, 0.3)
l = sum(sin(conv2d(a, ka, strides=[2, 2]))) + sum(sin(conv2d(b, kb, strides=[3, 2])))
loss = l + sum(sin(conv2d(c, kc)))
EOF2
  for v in default gemm; do NETRUN_TEST_CONV=$v "$NETRUN" grad pick1.net --format json > $v.json; done
  # the strided ones' filter gradients: other bits than the GEMM path's
  # (their sums over positions run in another order), within float
  # rounding.  Their outputs and input gradients sum over the channels in
  # order, one multiply-add each, which a GEMM's kernel may or may not do:
  # oneDNN's AVX-512 sgemm does, its AVX2 one and OpenBLAS's Zen kernels
  # (AMD's Zen 3) add in another order, so those are compared within
  # rounding too
  for p in ka kb; do
    [ "$(jq -c ".grads.$p" default.json)" != "$(jq -c ".grads.$p" gemm.json)" ]
  done
  rel=$(max_rel_diff gemm.json default.json)
  echo "largest relative difference $rel"
  awk -v r="$rel" 'BEGIN { exit !(r > 0 && r < 2e-6) }'
  # stride 1: the GEMM path's bits
  [ "$(jq -c '.grads.c' default.json)" = "$(jq -c '.grads.c' gemm.json)" ]
  [ "$(jq -c '.grads.kc' default.json)" = "$(jq -c '.grads.kc' gemm.json)" ]
}
