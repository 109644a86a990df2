#!/usr/bin/env bats
# onnx.bats — netrun import (ONNX in): models built with onnx.helper
# (tests/onnx/models.py) imported and run by netrun predict against ONNX
# Runtime at two batch sizes (tests/onnx/check.py), the script and weights
# import writes, its options, and crafted files that must fail with a
# clear error (tests/onnx/crafted.py).  onnx and onnxruntime come from
# PyPI into build/venv (make test-deps); without them every test fails,
# saying so.
bats_require_minimum_version 1.5.0

setup_file() {
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  export PY="$ROOT/build/venv/bin/python"
  export MODELS="$BATS_FILE_TMPDIR/models" CRAFTED="$BATS_FILE_TMPDIR/crafted"
  mkdir -p "$MODELS" "$CRAFTED"
  if "$PY" -c 'import onnx, onnxruntime' 2>/dev/null; then
    "$PY" "$ROOT/tests/onnx/models.py" "$MODELS"
    "$PY" "$ROOT/tests/onnx/crafted.py" "$CRAFTED"
  fi
}

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  cd "$BATS_TEST_TMPDIR"
  if ! "$PY" -c 'import onnx, onnxruntime' 2>/dev/null; then
    echo "onnx and onnxruntime are missing from $PY: run make test-deps" >&2
    return 1
  fi
}

check() {
  run "$PY" "$ROOT/tests/onnx/check.py" "$NETRUN" "$MODELS/$1.onnx" 3 4
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c 'within 1e-4' <<<"$output")" -ge 2 ]
}

# ---- against ONNX Runtime ----------------------------------------------------------

@test "import: an MLP (Gemm with transB, alpha, beta; Relu) gives ONNX Runtime's outputs at batch 3 and 4" {
  check mlp
}

@test "import: a CNN (Conv pads/groups/dilations, BatchNormalization, pools, the Shape->Reshape flatten) at two batch sizes" {
  check cnn
}

@test "import: a residual block (auto_pad SAME_UPPER, Add of the input, GlobalAveragePool, Flatten, MatMul)" {
  check resnet
}

@test "import: attention with a padding mask (heads by Reshape of a dynamic batch, Where, Softmax, LayerNormalization)" {
  check transformer
}

@test "import: elementwise ops (Erf among them), comparisons, logic, casts and reductions" {
  check elementwise
}

@test "import: layout ops (Split, Concat, Slice, Gather, Pad, CumSum, Tile, Expand, Range, ConstantOfShape)" {
  check shapes
}

@test "import: ConvTranspose with output_padding, Resize (nearest), Gelu at opset 20" {
  check convt
}

# each named dynamic dimension its own size: two batch sizes and two sequence lengths
check_sizes() {
  run "$PY" "$ROOT/tests/onnx/check.py" "$NETRUN" "$MODELS/$1.onnx" "${@:2}" batch=2,seq=5 batch=3,seq=2
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c 'within 1e-4' <<<"$output")" -ge 2 ]
  grep -q 'batch=2,seq=5' <<<"$output" && grep -q 'batch=3,seq=2' <<<"$output"
}

@test "import: LSTM forward (B, initial_h and initial_c fed, the default activations named) then reverse, at two batch sizes and sequence lengths" {
  check_sizes lstm
}

@test "import: LSTM at layout 1 (batch first) gives what ONNX Runtime gives for the same model at layout 0 inside transposes" {
  check_sizes lstm_batch_first --ort "$MODELS/lstm_batch_first_ref.onnx"
}

@test "import: GRU bidirectional (linear_before_reset=1), the exporters' Reshape [0, 0, -1] of two run-time sizes, GRU reverse (linear_before_reset=0)" {
  check_sizes gru
}

@test "import: Reshape and Expand to shapes holding the run-time batch and sequence (split heads, merge them back)" {
  check_sizes heads
  "$NETRUN" import "$MODELS/heads.onnx" -o h.net
  grep -q '^sp_piece, sp_piece_2 = split(x, num=2, axis=2)' h.net
  grep -q '^mg_flat = flatten(tp, start_axis=2)' h.net
  grep -q "^column_axis = unsqueeze(sum_, axes=\[2\])" h.net
}

@test "examples/fashion_small_cnn.onnx (README's tour fine-tunes it) imports and gives ONNX Runtime's outputs" {
  run "$PY" "$ROOT/tests/onnx/check.py" "$NETRUN" "$ROOT/examples/fashion_small_cnn.onnx" 3 4
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c 'within 1e-4' <<<"$output")" -eq 2 ]
}

@test "an imported LSTM and GRU differentiate: gradcheck passes through their while loops" {
  "$NETRUN" import "$MODELS/lstm.onnx" -o l.net
  printf 'loss = sum(output * output) + sum(yc1 * yh1)\n' >> l.net
  run "$NETRUN" gradcheck l.net --set 'x=[[[0.5, -1, 2]], [[1, 0.25, -0.5]], [[0, 1, 1]]]' \
    --set 'h0=[[[0.1, -0.2, 0.3, 0]]]' --set 'c0=[[[0.5, 0, -0.5, 1]]]'
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q '^l1.W ' <<<"$output" && grep -q '^l2.R ' <<<"$output"
  "$NETRUN" import "$MODELS/gru.onnx" -o g.net
  printf 'loss = sum(output * output) + sum(yh1)\n' >> g.net
  run "$NETRUN" gradcheck g.net --set 'x=[[[0.5, -1, 2]], [[1, 0.25, -0.5]]]' --set 'h0=[[[0.1, -0.2, 0.3, 0]], [[1, 0, 0, -1]]]'
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q '^g1.B ' <<<"$output" && grep -q '^g2.W ' <<<"$output"
}

@test "torch.onnx.export's MLP, CNN with batch norm, ResNet, GELU with LayerNorm, TransformerEncoderLayer, 2-layer bidirectional LSTM and GRU give PyTorch's outputs at batch 3 and 4, and its gradients" {
  # Debian's python3-torch (1.13), which make test does not install
  /usr/bin/python3 -c 'import torch' 2>/dev/null || skip "torch is not installed for /usr/bin/python3 (apt-get install python3-torch)"
  run /usr/bin/python3 -W ignore "$ROOT/tests/onnx/torch_check.py" "$NETRUN" mlp cnn resnet gelu encoder lstm gru
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c 'within 1e-4 of PyTorch' <<<"$output")" -eq 14 ]
  [ "$(grep -c 'parameters within 1e-3 of PyTorch' <<<"$output")" -eq 7 ]
  grep -qx 'lstm: the gradients of 7 parameters within 1e-3 .*' <<<"$output"
  grep -qx 'gru: the gradients of 7 parameters within 1e-3 .*' <<<"$output"
}

@test "an imported model with a loss appended: dump --backward prints its backward, gradcheck passes" {
  "$NETRUN" import "$MODELS/mlp.onnx" -o m.net
  printf 'input label : i64[batch]\nloss = mean(softmax_cross_entropy(output, label))\n' >> m.net
  run "$NETRUN" dump --backward --loss loss m.net
  [ "$status" -eq 0 ]
  grep -q 'fc1.weight@GRAD' <<<"$output"
  grep -q '= relu_grad(' <<<"$output"
  run "$NETRUN" gradcheck m.net --set 'input_=[[0.5, -1, 2, 0.25], [1, 1, -0.5, 0]]' --set 'label=[2, 0]'
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q '^fc2.bias ' <<<"$output"
}

# ---- the script and the weights -------------------------------------------------------

@test "import writes MODEL.net and MODEL.safetensors here; parameters keep their scoped names, batch norm's statistics are states" {
  run "$NETRUN" import "$MODELS/resnet.onnx"
  [ "$status" -eq 0 ]
  [ -f resnet.net ] && [ -f resnet.safetensors ]
  grep -qx 'input x : f32\[batch, 3, 6, 6\]' resnet.net
  grep -qx '  state running_mean : \[3\] = weights("resnet.safetensors")' resnet.net
  grep -q '^  layer1__0_bn1_weight, .*, layer1__0_conv2_weight = layer1__0_params(scope="_0")$' resnet.net
  run "$NETRUN" dump resnet.net
  [ "$status" -eq 0 ]
  grep -q 'var layer1._0.conv1.weight : f32\[3, 3, 3, 3\] param' <<<"$output"
  grep -q 'var layer1._0.bn2.running_var : f32\[3\] state' <<<"$output"
  # the weights file's keys are exactly the script's parameters and states
  keys=$("$PY" -c 'import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
print("\n".join(sorted(json.loads(b[8:8 + n]))))' resnet.safetensors)
  vars=$(grep -oE 'var [^ ]+ : f32\[[0-9, ]+\] (param|state)' <<<"$output" | awk '{print $2}' | sort)
  [ "$keys" = "$vars" ]
  # an output named 19 is _19 by the naming rule
  grep -q '^_19 = ' resnet.net
}

@test "import: names that are keywords, op names or not identifiers map to valid unique names, each mapping said in a comment" {
  "$NETRUN" import "$MODELS/names.onnx" -o n.net
  cat n.net
  [ "$(sed 1,2d n.net)" = "$(cat <<'EOF'
input input_ : f32[batch, 2]             # the ONNX input 'input'
input x_1 : f32[batch, 2]                # the ONNX input 'x.1'
while_ = relu(input_)
_19 = while_ + x_1
x_1_2 = neg(_19)
relu_ = sigmoid(x_1_2)
# the ONNX output '19' is _19
# the ONNX output 'x_1' is x_1_2
output = input_
# the ONNX output 'relu' is relu_
# the ONNX output 'while' is while_
EOF
)" ]
  run "$NETRUN" predict n.net --set 'input_=[[1, -2]]' --set 'x_1=[[0.5, 0.5]]' --output x_1_2
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "[[-1.5 -0.5]]" ]
}

@test "import: an existing script or weights file is kept without --force; -o names both" {
  run "$NETRUN" import "$MODELS/mlp.onnx" -o out/m.net
  [ "$status" -ne 0 ] # out/ does not exist
  mkdir out
  run "$NETRUN" import "$MODELS/mlp.onnx" -o out/m.net
  [ "$status" -eq 0 ] && [ -f out/m.net ] && [ -f out/m.safetensors ]
  run "$NETRUN" import "$MODELS/mlp.onnx" -o out/m.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: out/m.net exists; give --force to overwrite it" ]
  rm out/m.net
  run "$NETRUN" import "$MODELS/mlp.onnx" -o out/m.net
  [ "$output" = "netrun: error: out/m.safetensors exists; give --force to overwrite it" ]
  run "$NETRUN" import --force "$MODELS/mlp.onnx" -o out/m.net
  [ "$status" -eq 0 ]
  run "$NETRUN" import "$MODELS/mlp.onnx" -o m.txt
  [ "$status" -eq 2 ]
  [[ "$output" == *"the script's name must end in .net, got 'm.txt'"* ]]
}

@test "an imported model runs from another folder (weights() is relative to the script) and --weights overrides it" {
  mkdir sub
  "$NETRUN" import "$MODELS/mlp.onnx" -o sub/mlp.net
  run "$NETRUN" predict sub/mlp.net --set 'input_=[[1, 2, 3, 4]]' --output output
  [ "$status" -eq 0 ]
  first=$output
  "$NETRUN" export sub/mlp.safetensors -o zero.npz >/dev/null
  "$PY" -c 'import numpy as np
d = dict(np.load("zero.npz")); np.savez("zero.npz", **{k: np.zeros_like(v) for k, v in d.items()})'
  run "$NETRUN" predict sub/mlp.net --weights zero.npz --set 'input_=[[1, 2, 3, 4]]' --output output
  [ "$status" -eq 0 ]
  [ "$output" = "[[0. 0. 0.]]" ]
  [ "$first" != "$output" ]
}

@test "import: a constant holding NaN goes to the weights file (a literal cannot hold it); a Cast of NaN or 1e30 to int64 gives INT64_MIN, as NumPy's does" {
  "$NETRUN" import "$CRAFTED/nan_const.onnx" -o n.net
  grep -q '^state c : \[2\] = weights("n.safetensors") ' n.net
  run "$NETRUN" predict n.net --set 'x=[[1, 2]]' --output y
  [ "$status" -eq 0 ]
  [ "$output" = "[[nan  3.]]" ]
  "$NETRUN" import "$CRAFTED/nan_cast.onnx" -o c.net
  run "$NETRUN" predict c.net --set 'x=[[1, 2]]' --output y
  [ "$status" -eq 0 ]
  [ "$output" = "[[-9.223372e+18 -9.223372e+18]]" ]
}

# ---- errors ------------------------------------------------------------------------------

@test "import: every unsupported op type in one error, with its nodes and the opset" {
  cd "$CRAFTED"
  run "$NETRUN" import unsupported.onnx -o "$BATS_TEST_TMPDIR/u.net"
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: unsupported.onnx: the model uses 2 op types netrun cannot import (opset 17): NonZero (nodes 'nz1', #3); com.example.Custom (nodes 'mine')" ]
  [ ! -e "$BATS_TEST_TMPDIR/u.net" ] && [ ! -e "$BATS_TEST_TMPDIR/u.safetensors" ]
}

@test "import: crafted files fail with a clear error, never a crash" {
  cd "$CRAFTED"
  while IFS='|' read -r file want; do
    run "$NETRUN" import "$file.onnx" -o "$BATS_TEST_TMPDIR/$file.net"
    echo "$file: $output"
    [ "$status" -eq 1 ]
    [ "$output" = "netrun: error: $file.onnx: $want" ]
  done <<'EOF2'
cycle|the graph has a cycle: 3 nodes lie on it or after it: 'add' (Add), 'back' (Relu), 'out' (Relu)
undefined|node 'adder' (Add) reads 'nothing', which no node, input or initializer defines
no_output|node 'lost' (Add): it has no output
unnamed|node #1 (Add) reads 'nothing', which no node, input or initializer defines
unnamed_pad|node #1 (Pad): its constant_value must be a constant scalar
unnamed_cycle|the graph has a cycle: 3 nodes lie on it or after it: #0 (Add), 'back' (Relu), #2 (Relu)
pad_empty|node 'pad' (Pad): its constant_value must be a constant scalar
dropout_empty|node 'drop' (Dropout): its training_mode must be a constant scalar
twice|node 'two' (Relu) defines 'y', which another node already defines
bigdims|initializer 'huge' has more than 2^40 elements
shortraw|initializer 'w': its dims say 6 elements but its data holds 5
external|initializer 'w': its external data '../../etc/passwd' is outside the model's folder (absolute paths and '..' are refused)
million|graph: more than 200000 nodes
lstm_relu|node 'enc' (LSTM): activations other than the defaults (Sigmoid, Tanh, Tanh) are not supported
lstm_clip|node 'enc' (LSTM): the attribute clip is not supported
lstm_forget|node 'enc' (LSTM): input_forget=1 is not supported
lstm_lens|node 'enc' (LSTM): sequence_lens must be a constant whose every entry is X's length (sequences of different lengths are not supported)
gru_dir|node 'dec' (GRU): direction=both is not supported (forward, reverse, bidirectional)
gru_size|node 'dec' (GRU): X must be [T, B, in] (layout 0) or [B, T, in] (layout 1), W [1, 3H, in] and R [1, 3H, H] with H = hidden_size
reshape2|node 'swap' (Reshape): a Reshape to a shape with several sizes known only at run time ([T, B] of an input [B, T]) is supported only when they lead the input's shape in the same places and the rest is static, split into at most 64 pieces per axis (netrun's reshape infers one size)
flatten_axis|node 'flat' (Flatten): axis=1000 is outside its input's 2 axes
nested|the model uses 1 op type netrun cannot import (opset 17): If (nodes 'if2')
EOF2
  run "$NETRUN" import deepnest.onnx -o "$BATS_TEST_TMPDIR/d.net"
  [ "$status" -eq 1 ]
  [[ "$output" == *"attribute[0]: graphs nest more than 8 deep" ]]
  printf 'not a model at all' > "$BATS_TEST_TMPDIR/junk.onnx"
  run "$NETRUN" import "$BATS_TEST_TMPDIR/junk.onnx" -o "$BATS_TEST_TMPDIR/junk.net"
  [ "$status" -eq 1 ]
  [[ "$output" == *"junk.onnx: malformed bytes (not an ONNX model?)" ]]
}

@test "import: external data is read from the model's folder within --max-memory; locations outside it and wrong offsets or lengths are refused" {
  run "$PY" "$ROOT/tests/onnx/check.py" "$NETRUN" "$CRAFTED/ext/external_ok.onnx" 3 4
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c 'within 1e-4' <<<"$output")" -eq 2 ]
  cd "$CRAFTED/ext"
  run "$NETRUN" import external_ok.onnx -o "$BATS_TEST_TMPDIR/m.net" --max-memory 100
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: external_ok.onnx: initializer 'w': its external data (48 bytes, 144 once read) is more than the 100 bytes left of --max-memory" ]
  [ ! -e "$BATS_TEST_TMPDIR/m.net" ]
  "$NETRUN" import external_ok.onnx -o "$BATS_TEST_TMPDIR/m.net" --max-memory 1K
  while IFS='|' read -r file want; do
    run "$NETRUN" import "$file.onnx" -o "$BATS_TEST_TMPDIR/$file.net"
    echo "$file: $output"
    [ "$status" -eq 1 ]
    [ "$output" = "netrun: error: $file.onnx: initializer 'w': $want" ]
  done <<'EOF2'
ext_abs|its external data '/etc/passwd' is outside the model's folder (absolute paths and '..' are refused)
ext_up|its external data 'sub/../../w.bin' is outside the model's folder (absolute paths and '..' are refused)
ext_link|its external data 'away.bin' is a link leading out of the model's folder
ext_missing|cannot read its external data 'none.bin': No such file or directory
ext_beyond|its external data, 16 bytes at offset 12, lies beyond the end of 'w.bin' (24 bytes)
ext_length|its external data length is 20 bytes, but its dims say 16
ext_offset|its external data offset '12x' is not a number of bytes
ext_overflow|its external data offset '99999999999999999999' is not a number of bytes
ext_nolocation|its external data has no location
EOF2
}

# ---- export --model: ONNX out ------------------------------------------------------------

@test "import: the constants import computes (Range, folds) are charged to --max-memory" {
  cd "$BATS_TEST_TMPDIR"
  "$PY" - <<'PY'
import onnx
from onnx import helper, TensorProto
def c(name, v):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor("v", TensorProto.FLOAT, [], [v]))
nodes = []
for i in range(3):   # three ranges of 9e6 values: each under the 10^7 limit, 216 MB together
    nodes += [c(f"s{i}", 0.0), c(f"l{i}", 9e6), c(f"d{i}", 1.0)]
    nodes.append(helper.make_node("Range", [f"s{i}", f"l{i}", f"d{i}"], [f"r{i}"], name=f"range{i}"))
nodes.append(helper.make_node("Identity", ["x"], ["y"]))
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "ranges.onnx")
PY
  run "$NETRUN" import ranges.onnx -o r.net --max-memory 100M
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: ranges.onnx: node 'range1' (Range): the constants import computes take more than --max-memory (32857600 bytes left)" ]
  [ ! -e r.net ]
  [ ! -e r.safetensors ]   # a failed import leaves no file, though the model has no weights
  "$NETRUN" import ranges.onnx -o r.net --max-memory 300M
  [ -s r.net ]
}

@test "export --model: fashion_mlp, fashion_cnn, fashion_resnet, char_lm, lookup_transformer and tests/onnx/export_ops.net in ONNX Runtime give netrun's outputs (1e-5) at batch 3 and 4; import(export(m)) predicts the same bits (within 1e-6 through attention, which is exported unfused)" {
  for s in examples/fashion_mlp examples/fashion_cnn examples/fashion_resnet examples/char_lm \
           examples/lookup_transformer tests/onnx/export_ops; do
    run "$PY" "$ROOT/tests/onnx/export_check.py" "$NETRUN" "$ROOT/$s.net" logits
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(grep -c 'within 1e-5 of netrun predict' <<<"$output")" -eq 2 ]
    case $s in
      examples/char_lm|examples/lookup_transformer) want='predicts within 1e-6 (attention unfused)' ;;
      *) want='predicts the same bits' ;;
    esac
    [ "$(grep -c "$want" <<<"$output")" -eq 2 ]
  done
}

@test "export WEIGHTS --model: a trained checkpoint's values, the value asked with --value" {
  "$NETRUN" train "$ROOT/examples/xor.net" --epochs 2 --save xor.ckpt >/dev/null 2>&1
  run "$PY" "$ROOT/tests/onnx/export_check.py" "$NETRUN" "$ROOT/examples/xor.net" p xor.ckpt
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c 'predicts the same bits' <<<"$output")" -eq 2 ]
}

@test "export --model refuses an op ONNX cannot express at its source line, and writes nothing" {
  printf 'input x : f32[B, 3]\nparam W : [3, 4] = ones()\nh = x @ W\nlogits = logsumexp(h, axis=[1]) + mean(h)\n' > t.net
  run "$NETRUN" export --model t.net -o t.onnx
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "t.net:4:10: error: export to ONNX: op 'logsumexp' has no ONNX form (netrun-ops(7), ONNX)" ]
  [ ! -e t.onnx ]
  run "$NETRUN" export --model t.net -o t.onnx --value nothing
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: export to ONNX: t.net has no value 'nothing' to output (give --value NAME)" ]
  run "$NETRUN" export --model t.net -o t.npz
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: export --model writes ONNX: give -o FILE.onnx" ]
  run "$NETRUN" export w.safetensors -o t.onnx
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: export to ONNX needs --model MODEL.net, the script whose program it writes" ]
}
