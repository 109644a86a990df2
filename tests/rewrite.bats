#!/usr/bin/env bats
# rewrite.bats — the program rewrites (src/ir/rewrite.c): `netrun dump
# --fused` prints the program the executor runs, the rewrite moves the
# indices that point into block 0 (a loop's gradient finds its turns), and
# --check-nan runs the ops a fused op stands for, to name the one that
# made a NaN.  tests/cases/rewrite/ pins the examples' rewritten training
# programs; tests/train.bats checks the bits against --no-fuse.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  cd "$BATS_TEST_TMPDIR"
}

# A conv layer (bias, relu, 2x2 pool), then a loop over its output.
loopconv() {
  cat > loopconv.net <<'EOF'
input x : f32[2, 1, 6, 6] = uniform_random([2, 1, 6, 6], min=-1.0, max=1.0)
param K : [2, 1, 3, 3] = uniform(-0.5, 0.5)
param c : [2, 1, 1] = uniform(-0.2, 0.2)
param a : [1] = [0.9]
h = max_pool2d(relu(conv2d(x, K, paddings=[1, 1]) + c), ksize=[2, 2])
i = 0
while i < 3 {
  h = h * a + 0.1
  i = i + 1
}
loss = sum(h * h)
EOF
}

@test "dump --fused: the program the executor runs; without it, with --no-fuse or --check-nan, the program as written" {
  loopconv
  run "$NETRUN" dump --fused loopconv.net
  [ "$status" -eq 0 ]
  # Block 0: the layer's four ops are one, the loop's three and the loss's two stay.
  [ "$(sed -n '/^block 0/,/^block 1/p' <<< "$output" | grep -c ' = ')" -eq 7 ]
  [[ "$output" == *"  {Output=[t.4], Pooled=[h]} = fused_conv2d(Input=[x], Filter=[K], Bias=[c]) {dilations=[1, 1], groups=1, paddings=[1, 1], relu=true, strides=[1, 1]}"* ]]
  [[ "$output" != *"= conv2d("* && "$output" != *"= relu("* && "$output" != *"= max_pool2d("* ]]
  plain=$("$NETRUN" dump loopconv.net)
  [[ "$plain" == *"= conv2d("* && "$plain" != *fused* ]]
  [ "$("$NETRUN" dump --fused --no-fuse loopconv.net)" = "$plain" ]
  [ "$("$NETRUN" dump --fused --check-nan loopconv.net)" = "$plain" ]
  # The backward: the gradient chain of the layer is one op, the grad of
  # the op that stands for the forward; the relu's output, which only it
  # reads, is made as a mask of where the pool's gradient goes.
  run "$NETRUN" dump --backward --fused loopconv.net
  [[ "$output" == *"  var t.4@MASK : bool[2, 2, 6, 6]"* ]]
  [[ "$output" == *"  {Pooled=[h], Mask=[t.4@MASK]} = fused_conv2d(Input=[x], Filter=[K], Bias=[c]) {dilations=[1, 1], groups=1, paddings=[1, 1], relu=true, strides=[1, 1]}"* ]]
  [[ "$output" == *"{Filter@GRAD=[K@GRAD], Bias@GRAD=[c@GRAD]} = fused_conv2d_grad(Input=[x], Filter=[K], Bias=[c], Pooled@GRAD=[h@GRAD], Mask=[t.4@MASK]) {dilations=[1, 1], groups=1, paddings=[1, 1], relu=true, strides=[1, 1]}  # grad of fused_conv2d at loopconv.net:5"* ]]
  [[ "$output" != *"= relu_grad("* && "$output" != *"= conv2d_grad("* && "$output" != *"= max_pool2d_grad("* ]]
  # --fused prints a program: not with --ast.
  run "$NETRUN" dump --ast --fused loopconv.net
  [ "$status" -eq 2 ]
  [ "$output" = "$(printf "netrun: --fused prints the rewritten program: not with --ast\nTry 'netrun dump --help'.")" ]
}

# A pooled conv layer's relu output that only the layer's gradient reads
# becomes Mask (a byte per output: where the pool's gradient goes); read by
# anything else, or named, it stays Output.  Either way the bits are those
# of --no-fuse, and of --check-nan (the ops the fused ones stand for).
@test "a pooled conv layer writes Mask for its gradient instead of Output, unless the relu's output is read or named: the bits of --no-fuse" {
  cat > mask.net <<'EOF'
input x : f32[3, 2, 10, 9] = uniform_random([3, 2, 10, 9], min=-1.0, max=1.0)
param K : [4, 2, 3, 3] = uniform(-0.5, 0.5)
param c : [4, 1, 1] = uniform(-0.2, 0.2)
param K2 : [4, 2, 3, 3] = uniform(-0.5, 0.5)
param c2 : [4, 1, 1] = uniform(-0.2, 0.2)
h = max_pool2d(relu(conv2d(x, K, paddings=[1, 1]) + c), ksize=[2, 2])
r = relu(conv2d(x, K2, paddings=[1, 1]) + c2)
h2 = max_pool2d(r, ksize=[2, 2])
loss = sum(sin(h)) + sum(sin(h2)) + 0.1 * sum(r)
EOF
  run -0 "$NETRUN" dump --backward --fused mask.net
  [ "$(grep -c '= fused_conv2d(' <<< "$output")" = 2 ]
  [ "$(grep -c '= fused_conv2d_grad(' <<< "$output")" = 2 ]
  [[ "$output" == *"{Pooled=[h], Mask=[t.3@MASK]} = fused_conv2d(Input=[x], Filter=[K], Bias=[c])"* ]]
  [[ "$output" == *"{Output=[r], Pooled=[h2]} = fused_conv2d(Input=[x], Filter=[K2], Bias=[c2])"* ]]
  [[ "$output" == *"Pooled@GRAD=[h@GRAD], Mask=[t.3@MASK])"* ]]
  [ "$(grep -c '@MASK' <<< "$output")" = 3 ]
  "$NETRUN" grad --format json mask.net > fused.json
  "$NETRUN" grad --format json --no-fuse mask.net > plain.json
  "$NETRUN" grad --format json --check-nan mask.net > nan.json
  NETRUN_TEST_ISA=avx2 "$NETRUN" grad --format json mask.net > avx2.json
  cmp fused.json plain.json
  cmp fused.json nan.json
  cmp fused.json avx2.json
  # the forward alone keeps Output: nothing reads a mask
  run -0 "$NETRUN" dump --fused mask.net
  [[ "$output" == *"{Output=[t.3], Pooled=[h]} = fused_conv2d("* && "$output" != *"@MASK"* ]]
}

# NET's gradients with --no-fuse (and ARGS) into plain.json: the fused
# program's on 1 and 3 threads and --check-nan's have their bits.
grad_as_unfused() {
  local net=$1
  shift
  "$NETRUN" grad --format json --no-fuse "$@" "$net" > plain.json
  for t in 1 3; do
    OMP_NUM_THREADS=$t "$NETRUN" grad --format json "$@" "$net" > fused.json
    cmp fused.json plain.json
  done
  "$NETRUN" grad --format json --check-nan "$@" "$net" > nan.json
  cmp nan.json plain.json
}

@test "a convolution's input gradient that an add_n adds to another, then relu_grad takes, is one fused_conv2d_grad with Add: the bits of --no-fuse and --check-nan on every convolution path, 1 and 3 threads" {
  cat > res.net <<'EOF'
input x : f32[2, 16, 9, 9] = uniform_random([2, 16, 9, 9], min=-1.0, max=1.0)
param p : [2, 16, 9, 9] = uniform(-1, 1)
param k1 : [16, 16, 3, 3] = uniform(-0.2, 0.2)
param k3 : [5, 16, 3, 3] = uniform(-0.2, 0.2)
param k4 : [16, 16, 3, 3] = uniform(-0.2, 0.2)
# a block that keeps the size (relu's output exactly 0 at about half the
# places), then one of stride 2 and one dilated reading its output
h = relu(p)
h = relu(h + conv2d(h, k1, paddings=[1, 1]))
s = conv2d(h, k3, strides=[2, 2], paddings=[1, 1])
h = h * 0.5
u = conv2d(h, k4, paddings=[2, 2], dilations=[2, 2])
h = sin(h) * x
# and one whose images' values are not a multiple of 8 (3 x 5 x 5)
param p2 : [2, 3, 5, 5] = uniform(-1, 1)
param k5 : [3, 3, 3, 3] = uniform(-0.5, 0.5)
q = relu(p2)
q = relu(q + conv2d(q, k5, paddings=[1, 1]))
loss = sum(h) + sum(sin(s)) + sum(sin(u)) + sum(sin(q))
EOF
  run -0 "$NETRUN" dump --backward --fused res.net
  [[ "$output" != *"= add_n("* && "$output" != *"= relu_grad("* && "$output" != *"= conv2d_grad("* ]]
  [ "$(grep -c '= fused_conv2d_grad(' <<< "$output")" -eq 4 ]
  # (relu's input is p: the sum's relu_grad is p's gradient)
  [[ "$output" == *"{Input@GRAD=[p@GRAD], Filter@GRAD=[k1@GRAD]} = fused_conv2d_grad(Input=[h], Filter=[k1], Output@GRAD=[t.1@GRAD], Add=[h@GRAD@RENAME@0, h]) {dilations=[1, 1], groups=1, paddings=[1, 1], relu=false, strides=[1, 1]}  # grad of conv2d at res.net:9"* ]]
  [[ "$output" == *"{Input@GRAD=[t.2@GRAD], Filter@GRAD=[k3@GRAD]} = fused_conv2d_grad(Input=[h.1], Filter=[k3], Output@GRAD=[s@GRAD], Add=[h.1@GRAD@RENAME@0, h.1]) "* ]]
  [[ "$output" == *"{Input@GRAD=[h.2@GRAD], Filter@GRAD=[k4@GRAD]} = fused_conv2d_grad(Input=[h.2], Filter=[k4], Output@GRAD=[u@GRAD], Add=[h.2@GRAD@RENAME@0]) "* ]]
  for conv in default winograd direct gemm; do
    export NETRUN_TEST_CONV=$conv
    grad_as_unfused res.net
  done
  [ "$(jq '.grads | length' plain.json)" -eq 6 ]
  # a gradient named by the script keeps its add_n: the rewrite leaves it
  sed -i 's/^h = relu(h + conv2d/r = relu(h + conv2d/; s/^s = conv2d(h, k3/s = conv2d(r, k3/; s/^h = h \* 0.5/h = r * 0.5/' res.net
  grep -q '^r = relu' res.net
  run -0 "$NETRUN" dump --backward --fused res.net
  [ "$(grep -c '= fused_conv2d_grad(' <<< "$output")" -eq 3 ]
  [[ "$output" == *"{Out=[r@GRAD]} = add_n(X=[r@GRAD@RENAME@0, r@GRAD@RENAME@1])"* ]]
}

# Batch norms and the convolutions around them: a convolution that reads
# a norm's output makes that output image by image (fused_norm_conv2d:
# the norm writes Coef instead of Y; rewrite.c, bn_norm; conv.c, NormIn),
# and a convolution's gradient beneath its norm's makes the norm's input
# gradient (fused_bn_conv2d_grad: the norm's gradient writes Coef instead
# of X@GRAD; bn_dx; BnDx).  Layers a..k: a norm read by a residual block
# (its relu taken by the block's Add), the block's (with Add; its output
# read by two convolutions, the first of which makes it), one of stride 2
# and a 1x1 one of stride 2 added, one with relu (fused_batch_norm_grad)
# on the direct kernels, and 3 channels on 5x5 (their input and input
# gradient through GEMMs: made whole first).
bn_conv_net() {
  { cat <<'EOF2'
input x : f32[4, 16, 8, 8] = uniform_random([4, 16, 8, 8], min=-1.0, max=1.0)
input training : bool = true
EOF2
    bn_def
    cat <<'EOF2'
def conv(x, c, k, s, p) {
  param W : [c, dim(x, 1), k, k] = uniform(-0.2, 0.2)
  return conv2d(x, W, strides=[s, s], paddings=[p, p])
}
param p : [4, 16, 8, 8] = uniform(-1, 1)
h = relu(bn(conv(p * x, 16, 3, 1, 1, scope="a"), training, scope="a"))
h = relu(h + bn(conv(h, 16, 3, 1, 1, scope="b"), training, scope="b"))
e = relu(bn(conv(h, 32, 3, 2, 1, scope="c"), training, scope="c") + bn(conv(h, 32, 1, 2, 0, scope="d"), training, scope="d"))
param q : [4, 3, 5, 5] = uniform(-1, 1)
f = relu(bn(conv(q, 3, 3, 1, 1, scope="f"), training, scope="f"))
u = relu(bn(conv(e, 32, 3, 1, 1, scope="g"), training, scope="g"))
v = bn(conv(u, 32, 3, 1, 1, scope="k"), training, scope="k")
loss = sum(sin(v)) + sum(sin(f))
EOF2
  } > bnc.net
}

@test "a convolution makes the output of the batch norm it reads, and its gradient the input gradient of the batch norm beneath it, image by image (fused_norm_conv2d, fused_bn_conv2d_grad): the bits of --no-fuse and --check-nan on every convolution path, 1 and 3 threads, training or not" {
  bn_conv_net
  run -0 "$NETRUN" dump --backward --fused bnc.net
  [ "$(grep -c '= fused_norm_conv2d(' <<< "$output")" -eq 3 ]
  [ "$(grep -c '{MeanOut=.*Coef=\[t\.[0-9]*@NORM\].*} = fused_batch_norm(' <<< "$output")" -eq 3 ]
  [[ "$output" == *"{Y=[h.1], Output=[t.6], Moments=[t.6@MOMENTS]} = fused_norm_conv2d(X=[t.4], Coef=[t.4@NORM], Residual=[h], Filter=[c.W], Training=[training]) {dilations=[1, 1], groups=1, paddings=[1, 1], relu=true, strides=[2, 2]}"* ]]
  [[ "$output" == *"= fused_conv2d(Input=[h.1], Filter=[d.W], Training=[training])"* ]]
  [[ "$output" == *"var t.4@NORM : f32[16, 3]"* ]]
  [[ "$output" != *"= conv2d_grad("* && "$output" != *"= fused_conv2d_grad("* ]]
  [ "$(grep -c '= fused_bn_conv2d_grad(' <<< "$output")" -eq 7 ]
  # no batch norm gradient writes X@GRAD
  [ "$(grep -c '{X@GRAD=.*= \(fused_\)\?batch_norm_grad(' <<< "$output")" -eq 0 ]
  [ "$(grep -c 'Coef=.*= \(fused_\)\?batch_norm_grad(' <<< "$output")" -eq 7 ]
  [[ "$output" == *"{Scale@GRAD=[g.gamma@GRAD], Bias@GRAD=[g.beta@GRAD], Coef=[t.10@COEF]} = fused_batch_norm_grad(X=[t.10], "* ]]
  [[ "$output" == *"{Input@GRAD=[e@GRAD], Filter@GRAD=[g.W@GRAD]} = fused_bn_conv2d_grad(Input=[e], Filter=[g.W], X=[t.10], Coef=[t.10@COEF], Y@GRAD=[u@GRAD]) {dilations=[1, 1], groups=1, paddings=[1, 1], relu=true, strides=[1, 1]}  # grad of fused_conv2d at bnc.net:13"* ]]
  [[ "$output" == *"{Input@GRAD=[bn.y@GRAD], Filter@GRAD=[b.W@GRAD]} = fused_bn_conv2d_grad(Input=[h], Filter=[b.W], X=[t.4], Coef=[t.4@COEF], Y@GRAD=[bn.y.1@GRAD], Add=[h@GRAD@RENAME@0, h]) {dilations=[1, 1], groups=1, paddings=[1, 1], relu=false, strides=[1, 1]}"* ]]
  [[ "$output" == *"var t.10@COEF : f32[32, 6]"* ]]
  for training in true false; do
    for conv in default winograd direct gemm pv cv; do
      export NETRUN_TEST_CONV=$conv
      grad_as_unfused bnc.net --set training=$training
    done
  done
  [ "$(jq '.grads | length' plain.json)" -eq 23 ]
  # a convolution's output the script names keeps its norm's X@GRAD
  sed -i 's/^v = bn(conv(u, 32, 3, 1, 1, scope="k"), training, scope="k")$/w = conv(u, 32, 3, 1, 1, scope="k")\nv = bn(w, training, scope="k")/' bnc.net
  grep -q '^w = conv' bnc.net
  run -0 "$NETRUN" dump --backward --fused bnc.net
  [ "$(grep -c '= fused_bn_conv2d_grad(' <<< "$output")" -eq 6 ]
  [[ "$output" == *"{X@GRAD=[w@GRAD], Scale@GRAD=[k.gamma@GRAD], Bias@GRAD=[k.beta@GRAD]} = batch_norm_grad(X=[w], "* ]]
  [[ "$output" == *"= conv2d_grad(Input=[u], Filter=[k.W], Output@GRAD=[w@GRAD])"* ]]
  # the forward alone (no gradient reads Y)
  forward_as_unfused bnc.net v
}

@test "a loop's gradient after a fused layer finds the turns of its loop: the bits of --no-fuse and of the tape" {
  loopconv
  "$NETRUN" grad --format json loopconv.net > fused.json
  "$NETRUN" grad --format json --no-fuse loopconv.net > plain.json
  "$NETRUN" grad --format json --tape-program loopconv.net > tape.json
  cmp fused.json plain.json
  cmp fused.json tape.json
  [ "$(jq '.grads["a"].data | length' fused.json)" -eq 1 ]
}

@test "a training run that diverges in a fused layer names the op of the layer that made the infinity" {
  awk 'BEGIN { printf "label"; for (i = 0; i < 16; i++) printf ",p%d", i; print ""
       for (r = 0; r < 8; r++) { printf "%d", r % 2; for (i = 0; i < 16; i++) printf ",%g", ((r * 7 + i * 3) % 11) / 10; print "" } }' > img.csv
  cat > div.net <<'EOF'
input x : f32[B, 16]
input y : i64[B]
param K : [2, 1, 3, 3] = uniform(-0.5, 0.5)
param c : [2, 1, 1] = zeros()
img = reshape(x, [-1, 1, 4, 4])
h = max_pool2d(relu(conv2d(img, K, paddings=[1, 1]) + c), ksize=[2, 2])
loss = mean((h - 10.0) * (h - 10.0))
train {
  data = "img.csv"
  label = y
  lr = 3e37
  batch = 4
  epochs = 3
}
EOF
  run "$NETRUN" dump --train --fused div.net
  [[ "$output" == *"= fused_conv2d("* ]]
  run --separate-stderr "$NETRUN" train div.net
  [ "$status" -eq 1 ]
  [ "${stderr_lines[0]}" = "netrun: note: img.csv: x gets columns p0, p1, p2, ..., p15 (16 columns) and y gets column label (columns = [...] and label = \"...\" in the train block choose others)" ]
  [ "${stderr_lines[2]}" = "netrun: error: step 2 (epoch 1): the loss is inf; stopped before its update, checkpoints are left as they were (--keep-going trains on)" ]
  [ "${stderr_lines[3]}" = "div.net:6:21: error: conv2d: produced NaN or Inf in 't.0' (shape [4, 2, 4, 4])" ]
}

# A batch norm layer with its own scale, bias and running statistics,
# normalizing with the batch's when training is true.
bn_def() {
  cat <<'EOF2'
def bn(x, training) {
  param gamma : [dim(x, 1)] = uniform(0.5, 1.5)
  param beta  : [dim(x, 1)] = uniform(-0.3, 0.3)
  state mean  : [dim(x, 1)] = zeros()
  state var   : [dim(x, 1)] = ones()
  y, mean, var = batch_norm(x, gamma, beta, mean, var, training)
  return y
}
EOF2
}

# NET's forward with print(VAR) added prints (more than 10 lines) what it
# prints with --no-fuse.
forward_as_unfused() {
  { cat "$1"; echo "print($2)"; } > fwd.net
  run "$NETRUN" run --precision 9 fwd.net
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -gt 10 ]
  [ "$output" = "$("$NETRUN" run --precision 9 --no-fuse fwd.net)" ]
}

# Batch norm layers: bn -> relu, relu(x + bn) with the residual on either
# side of the add, bn + residual without relu, in training mode.
bnlayers() {
  { cat <<'EOF2'
input x : f32[4, 3, 5, 5] = uniform_random([4, 3, 5, 5], min=-1.0, max=1.5)
input training : bool = true
EOF2
    bn_def
    cat <<'EOF2'
h = relu(bn(x * 1.5, training, scope="a"))
r = relu(h + bn(h * h, training, scope="b"))
s = relu(bn(r - 0.25, training, scope="c") + r)
t = bn(s * 3.0, training, scope="d") + s
loss = sum(t * t * x)
EOF2
  } > bn.net
}

@test "batch norm, add and relu run as one fused_batch_norm, their gradient as fused_batch_norm_grad: the bits of --no-fuse" {
  bnlayers
  run "$NETRUN" dump --backward --fused bn.net
  [ "$status" -eq 0 ]
  # every relu and add after a batch_norm is fused into it, the three with relu ...
  [ "$(grep -c '= fused_batch_norm(.*relu=true' <<< "$output")" -eq 3 ]
  [ "$(grep -c '= fused_batch_norm(.*Residual=.*relu=true' <<< "$output")" -eq 2 ]
  [ "$(grep -c '= fused_batch_norm(.*Residual=.*relu=false' <<< "$output")" -eq 1 ]
  [[ "$output" != *"= batch_norm("* && "$output" != *"= relu("* ]]
  # ... and the gradient of the one whose relu's input gradient goes nowhere else
  [ "$(grep -c '= fused_batch_norm_grad(' <<< "$output")" -eq 1 ]
  [[ "$output" == *"{Scale@GRAD=[a.gamma@GRAD], Bias@GRAD=[a.beta@GRAD]} = fused_batch_norm_grad(X=[t.3], Scale=[a.gamma], Bias=[a.beta], Mean=[a.mean], Variance=[a.var], Training=[training], Out@GRAD=[h@GRAD], Stats=[t.3@STATS]) {epsilon=1e-05, momentum=0.9}  # grad of fused_batch_norm at bn.net:8"* ]]
  "$NETRUN" grad --format json bn.net > fused.json
  "$NETRUN" grad --format json --no-fuse bn.net > plain.json
  cmp fused.json plain.json
  [ "$(jq '.grads | length' fused.json)" -eq 8 ]
  # the forward alone
  forward_as_unfused bn.net t
}

@test "a fused batch norm keeps the batch's statistics for its gradient (X@STATS): the bits of --no-fuse, training or not; none kept for an input's" {
  bnlayers
  run "$NETRUN" dump --backward --fused bn.net
  [ "$status" -eq 0 ]
  # each of the four writes them, and the gradient of the same X and Training reads them
  [ "$(grep -c '^  var t\.[0-9]*@STATS : f64\[2, 3\]$' <<< "$output")" -eq 4 ]
  for x in t.3 t.4 t.7 t.10; do
    [ "$(grep -c "= fused_batch_norm(X=\[$x\], .*Training=\[training\]" <<< "$output")" -eq 1 ]
    grep -q "Stats=\[$x@STATS\]} = fused_batch_norm(X=\[$x\]," <<< "$output"
    [ "$(grep -c "batch_norm_grad(X=\[$x\], .*Training=\[training\], .*Stats=\[$x@STATS\])" <<< "$output")" -eq 1 ]
  done
  # training (the statistics read) and not (the running ones): the bits of the ops as written
  for tr in true false; do
    "$NETRUN" grad --format json --set training=$tr bn.net > fused.json
    "$NETRUN" grad --format json --set training=$tr --no-fuse bn.net > plain.json
    cmp fused.json plain.json
  done
  [ "$(jq '.grads | length' fused.json)" -eq 8 ]
  # a batch norm of an input: no op writes X before it, so nothing is kept
  sed -i 's/^h = relu(bn(x \* 1.5, training, scope="a"))$/h = relu(bn(x, training, scope="a"))/' bn.net
  grep -q '^h = relu(bn(x, training, scope="a"))$' bn.net
  run "$NETRUN" dump --backward --fused bn.net
  [ "$status" -eq 0 ]
  [ "$(grep -c '@STATS : f64' <<< "$output")" -eq 3 ]
  [[ "$output" == *"= fused_batch_norm(X=[x], "* && "$output" != *"x@STATS"* ]]
  "$NETRUN" grad --format json bn.net > fused.json
  "$NETRUN" grad --format json --no-fuse bn.net > plain.json
  cmp fused.json plain.json
}

# Convolutions before batch norms, on each of the paths that can write
# one's output: the direct kernels (4 channels in), Winograd (16 each way
# on 10x10), GEMMs (2 groups), a 1x1 kernel of stride 2 over the
# positions it reads, and a conv with a bias and relu (fused_conv2d
# already); the second batch norm's output is also the next layer's
# residual.
convbn() {
  { cat <<'EOF2'
input x : f32[3, 4, 10, 10] = uniform_random([3, 4, 10, 10], min=-1.0, max=1.5)
input training : bool = true
EOF2
    bn_def
    cat <<'EOF2'
param k1 : [16, 4, 3, 3] = uniform(-0.5, 0.5)
param k2 : [16, 16, 3, 3] = uniform(-0.3, 0.3)
param k3 : [16, 8, 1, 1] = uniform(-0.3, 0.3)
param k4 : [8, 16, 1, 1] = uniform(-0.3, 0.3)
param c4 : [8, 1, 1] = uniform(-0.2, 0.2)
h = relu(bn(conv2d(x, k1, paddings=[1, 1]), training, scope="a"))
h = relu(bn(conv2d(h, k2, paddings=[1, 1]), training, scope="b") + h)
h = relu(bn(conv2d(h, k3, groups=2), training, scope="c"))
g = relu(bn(relu(conv2d(h, k4, strides=[2, 2]) + c4), training, scope="d"))
loss = sum(g * g * g)
EOF2
  } > cbn.net
}

@test "a convolution before a fused batch norm writes each image's moments as it lands (X@MOMENTS): the bits of --no-fuse and of --check-nan, training or not, on 1 and 3 threads; none in f64" {
  convbn
  run "$NETRUN" dump --fused cbn.net
  [ "$status" -eq 0 ]
  [ "$(grep -c '^  var t\.[0-9]*@MOMENTS : f64\[3, [0-9]*, 2\]$' <<< "$output")" -eq 4 ]
  # each convolution becomes (or, with its bias and relu, already is) a
  # fused_conv2d that writes them, or, reading a batch norm's output, a
  # fused_norm_conv2d (bn_norm) ...
  [ "$(grep -c '= fused_conv2d(' <<< "$output")" -eq 2 ]
  [ "$(grep -c '= fused_norm_conv2d(' <<< "$output")" -eq 2 ]
  [ "$(grep -c 'Moments=\[t\.[0-9]*@MOMENTS\]} = fused_\(norm_\)\?conv2d(' <<< "$output")" -eq 4 ]
  [ "$(grep -c 'Moments=\[t\.[0-9]*@MOMENTS\]} = fused_conv2d(Input=\[.*\], Filter=\[k4\], Bias=\[c4\], Training=\[training\]) .*relu=true' <<< "$output")" -eq 1 ]
  # (each reads the batch norm's Training: evaluating, it writes none)
  [ "$(grep -c '= fused_\(norm_\)\?conv2d(.*Training=\[training\])' <<< "$output")" -eq 4 ]
  [[ "$output" != *"= conv2d("* ]]
  # ... and the batch norm of its output reads them
  for m in $(grep -o 't\.[0-9]*@MOMENTS\]} = fused_\(norm_\)\?conv2d' <<< "$output" | cut -d@ -f1); do
    grep -q "= fused_batch_norm(X=\[$m\], .*Moments=\[$m@MOMENTS\])" <<< "$output"
  done
  for tr in true false; do
    "$NETRUN" grad --format json --set training=$tr --no-fuse cbn.net > plain.json
    for t in 1 3; do
      OMP_NUM_THREADS=$t "$NETRUN" grad --format json --set training=$tr cbn.net > fused$t.json
      cmp fused$t.json plain.json
    done
    "$NETRUN" grad --format json --set training=$tr --check-nan cbn.net > nan.json
    cmp nan.json plain.json
  done
  [ "$(jq '.grads | length' plain.json)" -eq 13 ]
  # the statistics' AVX-512, AVX2 and generic loops: the same bits
  NETRUN_TEST_ISA=avx2 "$NETRUN" grad --format json cbn.net > avx2.json
  NETRUN_TEST_ISA=scalar "$NETRUN" grad --format json cbn.net > scalar.json
  "$NETRUN" grad --format json cbn.net > fused.json
  cmp avx2.json fused.json
  cmp scalar.json fused.json
  # in f64 the convolutions are not fused (fused_conv2d is f32)
  run "$NETRUN" dump --fused --dtype f64 cbn.net
  [ "$status" -eq 0 ]
  [[ "$output" != *"@MOMENTS"* && "$output" != *"fused_conv2d"* ]]
}

@test "a batch norm whose Y two ops read runs as a fused_batch_norm alone: its convolution writes the moments, its gradient reads the statistics, the bits of --no-fuse and --check-nan, training or not" {
  cat > alone.net <<'EOF2'
input x : f32[3, 2, 6, 6] = uniform_random([3, 2, 6, 6], min=-1.0, max=1.5)
input training : bool = true
param k : [4, 2, 3, 3] = uniform(-0.5, 0.5)
EOF2
  bn_def >> alone.net
  cat >> alone.net <<'EOF2'
y = bn(conv2d(x, k, paddings=[1, 1]), training, scope="a")
loss = sum(y * y) + sum(relu(y) * 0.5)
EOF2
  run "$NETRUN" dump --backward --fused alone.net
  [ "$status" -eq 0 ]
  [[ "$output" != *"= batch_norm("* && "$output" != *"= conv2d("* ]]
  [ "$(grep -c '= fused_batch_norm(' <<< "$output")" -eq 1 ]
  grep -q '{Y=\[bn.y\], .*Stats=\[t\.[0-9]*@STATS\]} = fused_batch_norm(X=\[t\.[0-9]*\], .*Moments=\[t\.[0-9]*@MOMENTS\]) {epsilon=1e-05, momentum=0.9, relu=false}' <<< "$output"
  grep -q '= batch_norm_grad(.*Stats=\[t\.[0-9]*@STATS\])' <<< "$output"
  grep -q 'Moments=\[t\.[0-9]*@MOMENTS\]} = fused_conv2d(' <<< "$output"
  for tr in true false; do
    "$NETRUN" grad --format json --set training=$tr --no-fuse alone.net > plain.json
    "$NETRUN" grad --format json --set training=$tr alone.net > fused.json
    cmp fused.json plain.json
    "$NETRUN" grad --format json --set training=$tr --check-nan alone.net > nan.json
    cmp nan.json plain.json
  done
  [ "$(jq '.grads | length' plain.json)" -eq 3 ]
  # the forward alone keeps Y too
  forward_as_unfused alone.net y
}

@test "fused_batch_norm_grad makes the relu's mask from X: where the normalized value is exactly 0 (a constant channel, beta 0) the gradient is relu's, 0" {
  cat > flat.net <<'EOF2'
param x : [4, 3, 5, 5] = uniform(-1, 1)
input training : bool = true
def bn(z, training) {
  param gamma : [3] = [1.5, 0.5, 2.0]
  param beta  : [3] = [0.0, 0.0, 0.25]
  state mean  : [3] = zeros()
  state var   : [3] = ones()
  y, mean, var = batch_norm(z, gamma, beta, mean, var, training)
  return y
}
# channel 1 holds 0.75 everywhere: its normalized values are exactly beta's 0
z = x * reshape([1.0, 0.0, 1.0], [1, 3, 1, 1]) + reshape([0.0, 0.75, 0.0], [1, 3, 1, 1])
h = relu(bn(z, training, scope="n"))
loss = sum(h * x)
EOF2
  [[ "$("$NETRUN" dump --backward --fused flat.net)" == *"= fused_batch_norm_grad("* ]]
  for tr in true false; do
    "$NETRUN" grad --format json --set training=$tr flat.net > fused.json
    "$NETRUN" grad --format json --set training=$tr --no-fuse flat.net > plain.json
    cmp fused.json plain.json
  done
  # the gradient reaching beta's channel 1 is 0: relu's mask is false at every element there
  "$NETRUN" grad --format json flat.net > fused.json
  [ "$(jq '.grads["n.beta"].data[1]' fused.json)" = "0" ]
  [ "$(jq '.grads["n.beta"].data[0] != 0 and .grads["n.beta"].data[2] != 0' fused.json)" = "true" ]
}

@test "fused_batch_norm and its gradient: the same bits on 1, 2 and 3 threads (runs of images split over them, across images too)" {
  bnlayers
  sed -i 's/f32\[4, 3, 5, 5\] = uniform_random(\[4, 3, 5, 5\]/f32[8, 8, 16, 16] = uniform_random([8, 8, 16, 16]/' bn.net
  grep -q 'f32\[8, 8, 16, 16\]' bn.net
  [[ "$("$NETRUN" dump --backward --fused bn.net)" == *"= fused_batch_norm_grad("* ]]
  for t in 1 2 3; do OMP_NUM_THREADS=$t "$NETRUN" grad --format json bn.net > "$t.json"; done
  OMP_NUM_THREADS=2 "$NETRUN" grad --format json --no-fuse bn.net > plain.json
  cmp 1.json 2.json
  cmp 1.json 3.json
  cmp 1.json plain.json
}

# batch_norm and its gradient add up a channel's runs (one image's values
# of it) a chunk of images at a time, 65536 runs a chunk (src/ops/nn.c,
# BN_RUNS): a [700, 100] batch of one value a run is 70000 runs, two
# chunks (655 images, then 45).  Its gradients against NumPy's closed form
# in double (dBias = sum(dY), dScale = sum(dY xhat), dX = Scale inv (dY -
# mean(dY) - xhat mean(dY xhat))), on 1, 2 and 3 threads.
@test "batch_norm over more runs than a chunk holds (700 x 100, one value a run): gradients as NumPy computes them, the same bits on 1, 2 and 3 threads" {
  /usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "NumPy is not installed for /usr/bin/python3 (apt-get install python3-numpy)"
  /usr/bin/python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(0)
np.save("x.npy", (rng.standard_normal((700, 100)) * 2 + 3).astype(np.float32))
np.save("r.npy", rng.uniform(-1, 1, (700, 100)).astype(np.float32))
np.save("g.npy", rng.uniform(0.5, 1.5, 100).astype(np.float32))
np.save("b.npy", rng.uniform(-0.5, 0.5, 100).astype(np.float32))
PY
  cat > big.net <<'EOF2'
input x : f32[700, 100]
input r : f32[700, 100]
input g : f32[100]
input b : f32[100]
y, m, v = batch_norm(x, g, b, zeros([100]), ones([100]), true)
loss = sum(y * r)
EOF2
  for t in 1 2 3; do
    OMP_NUM_THREADS=$t "$NETRUN" grad --wrt x,g,b --feed x=x.npy --feed r=r.npy --feed g=g.npy --feed b=b.npy \
      --format json big.net > t$t.json
  done
  cmp t1.json t2.json
  cmp t1.json t3.json
  /usr/bin/python3 - <<'PY'
import json
import numpy as np
got = json.load(open("t1.json"))["grads"]
x, r, g = (np.load(f + ".npy").astype(np.float64) for f in "xrg")
mean, var = x.mean(0), x.var(0)
inv = 1 / np.sqrt(var + 1e-5)
xhat = (x - mean) * inv
want = {"b": r.sum(0), "g": (r * xhat).sum(0),
        "x": g * inv * (r - r.mean(0) - xhat * (r * xhat).mean(0))}
for k, w in want.items():
    a = np.array(got[k]["data"]).reshape(w.shape)
    rel = np.abs(a - w).max() / np.abs(w).max()
    print(k, rel)
    assert rel < 1e-5, (k, rel)
PY
}

@test "a user op's body: an output that a conv's or a batch norm's fusion would leave unmade is still made, the values of --no-fuse" {
  # y is the body's output and an intermediate of conv -> add -> relu
  # (of batch_norm -> relu): the caller reads it by name, so neither
  # fusion may leave it unmade.
  cat > conv.net <<'NET'
op cbr(x, w, b) -> (y, z) {
  y = conv2d(x, w) + b
  z = relu(y)
}
param w : [2, 1, 3, 3] = [[[[0.5, -1.0, 0.25], [1.0, 0.5, -0.5], [0.0, 1.0, -1.0]]], [[[-0.5, 1.0, 0.5], [0.25, -1.0, 1.0], [1.0, 0.0, -0.5]]]]
param b : [2, 1, 1] = [[[0.5]], [[-0.5]]]
input x : f32[1, 1, 4, 4] = [[[[1.0, -2.0, 0.5, 3.0], [0.0, 1.0, -1.0, 2.0], [2.5, -0.5, 1.5, -3.0], [1.0, 0.25, -1.0, 0.5]]]]
y, z = cbr(x, w, b)
loss = sum(y) + mean(z)
print(y)
print(z)
NET
  cat > bn.net <<'NET'
op bnr(x, s, c, m, v) -> (y, z) {
  y = batch_norm(x, s, c, m, v, true)
  z = relu(y)
}
param s : [2] = [1.0, 2.0]
param c : [2] = [0.5, -0.5]
input x : f32[1, 2, 2, 2] = [[[[1.0, -2.0], [0.5, 3.0]], [[0.0, 1.0], [-1.0, 2.0]]]]
u, v = bnr(x, s, c, zeros([2]), ones([2]))
loss = sum(u * u) + mean(v)
print(u)
print(v)
NET
  run "$NETRUN" run conv.net
  [ "$status" -eq 0 ]
  [ "$output" = "$("$NETRUN" run --no-fuse conv.net)" ]
  [ "${lines[0]}" = "[[[[ 2.125  3.75 ]" ]
  run "$NETRUN" run bn.net
  [ "$status" -eq 0 ]
  [ "$output" = "$("$NETRUN" run --no-fuse bn.net)" ]
  [ "${lines[0]}" = "[[[[ 0.7105584  -0.9739088 ]" ]
}
