#!/usr/bin/env bats
# formats.bats — issue 18's formats from the command line: NumPy .npz
# datasets in a train block, `netrun export` to safetensors and .npz, and
# --weights from those files (eval, predict, run, and train to fine-tune),
# bit for bit; a NumPy test that recomputes a model's forward from an
# exported .npz.  --feed's .npy/.npz values and errors are data cases
# (tests/cases/formats); their files are made by tests/cases/formats/files/make.py.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  FILES=$BATS_TEST_DIRNAME/cases/formats/files
  cd "$BATS_TEST_TMPDIR"
  cp "$FILES"/*.npz "$FILES"/*.safetensors .
  # The classifier of train.npz: y = 1 when x0 + x1 > 0 (8 examples, x f64
  # and y u8 in the archive: read as f32 and i64).
  cat > clf.net <<'NET'
input x : [B, 2]
input y : i64[B]
def dense(h, n) {
  param W : [dim(h, -1), n] = xavier()
  param b : [n] = zeros()
  return h @ W + b
}
state seen : [1] = zeros()
seen = seen + 1.0
logits = dense(relu(dense(x, 4)), 2, scope="out")
loss = mean(softmax_cross_entropy(logits, y))
train {
  data = "train.npz"
  eval = "test.npz"
  loss = loss
  metric = logits
  optimizer = adam
  lr = 0.05
  epochs = 4
  batch = 4
}
NET
  # linear.safetensors holds W = [[1, -2], [0.5, 3]], b = [0.25, -0.75].
  cat > linear.net <<'NET'
input x : [B, 2]
input t : [B, 2]
param W : [2, 2] = zeros()
param b : [2] = zeros()
p = x @ W + b
loss = mean((p - t) ** 2)
train {
  data = "step.npz"
  eval = "none"
  lr = 0.5
  batch = 2
  epochs = 1
}
NET
  printf 'param W : [2, 2] = zeros()\nparam b : [2] = zeros()\nprint(W)\nprint(b)\n' > show.net
}

@test "a .npz dataset: each array feeds the input of its name, in any order, converted as NumPy's astype" {
  run --separate-stderr "$NETRUN" data train.npz --head 3
  [ "$status" -eq 0 ]
  # train.npz holds y then x; y is u8 (kept as bytes, read as i64), x f64 (read as f32).
  [ "${lines[3]}" = "column y i64 [8] from uint8" ]
  [ "${lines[4]}" = "column x f32 [8, 2] from float64" ]
  [ "${lines[5]}" = "head 3" ]
  [ "${lines[9]}" = "[1 0 1]" ]
  [ "${lines[11]}" = "[[ 0.5   0.25]" ]
  # Train and evaluate: the columns are bound by name, test.npz (x then y,
  # deflated) as well as train.npz (y then x, stored, ZIP64 local headers).
  run --separate-stderr "$NETRUN" train clf.net --save c.ckpt
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 6 ]
  [[ "${lines[0]}" == "epoch 1/4: train loss "*" | test.npz loss "* ]]
  # eval with the checkpoint reads test.npz again: the last epoch's figures.
  last=$(printf '%s\n' "${lines[3]}" | sed -E 's/.*\| test.npz loss ([0-9.]+) acc ([0-9.]+).*/\1 \2/')
  run --separate-stderr "$NETRUN" eval clf.net --weights c.ckpt
  [ "$status" -eq 0 ]
  loss=$(printf '%s\n' "$output" | sed -E 's/test.npz: loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/')
  [ "$(printf '%.4f' "${loss%% *}")" = "${last%% *}" ]
  [ "${loss##* }" = "${last##* }" ]
}

@test "a .npz dataset's errors name the file and the arrays" {
  run --separate-stderr "$NETRUN" train clf.net --data extra.npz
  [ "$status" -eq 1 ]
  [ "${stderr_lines[1]}" = "netrun: error: extra.npz: array 'w' feeds no input (the inputs fed: x, y; a train block's feed = [...] names them)" ]
  run --separate-stderr "$NETRUN" train clf.net --data missing.npz
  [ "$status" -eq 1 ]
  [ "${stderr_lines[1]}" = "netrun: error: missing.npz: no array 'y' for the input of that name (its arrays: x)" ]
  run --separate-stderr "$NETRUN" train clf.net --data uneven.npz
  [ "$status" -eq 1 ]
  [ "${stderr_lines[1]}" = "netrun: error: uneven.npz: array 'y': shape [7]: 7 examples, but array 'x' has 8" ]
  run --separate-stderr "$NETRUN" train clf.net --data notnpy.npz
  [ "$status" -eq 1 ]
  [ "${stderr_lines[1]}" = "netrun: error: notnpy.npz: member 'README.txt' is not a .npy array (numpy.savez writes NAME.npy)" ]
  run --separate-stderr "$NETRUN" data crc.npz
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: crc.npz: array 'x': corrupt: CRC-32 mismatch (cea2f960, the directory says 7d2f780b)" ]
}

@test "a .npz dataset's memory is counted against --max-memory before it is read" {
  # 8 MB of f32 zeros, deflated to a few KB: refused before it is inflated.
  python3 - <<'PY'
import struct, zipfile
def npy(descr, shape, data):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    d += ' ' * ((10 + len(d) + 1 + 63) // 64 * 64 - 10 - len(d) - 1) + '\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(d)) + d.encode() + data
with zipfile.ZipFile('big.npz', 'w', compression=zipfile.ZIP_DEFLATED) as z:
    z.writestr('x.npy', npy('<f4', '(1000000, 2)', bytes(8000000)))
    z.writestr('y.npy', npy('|u1', '(1000000,)', bytes(1000000)))
PY
  run --separate-stderr "$NETRUN" train clf.net --data big.npz --max-memory 4M
  [ "$status" -eq 3 ]
  [[ "${stderr_lines[1]}" == "netrun: error: big.npz: array 'x': out of memory: shape [1000000, 2] float32: it would take 7.63 MiB, but only "*" of the memory limit of 4 MiB is free (--max-memory)" ]]
}

@test "export: parameters and states under their scoped names, safetensors and .npz; predict is the same bit for bit" {
  run --separate-stderr "$NETRUN" train clf.net --save c.ckpt
  [ "$status" -eq 0 ]
  run "$NETRUN" export c.ckpt -o w.safetensors
  [ "$status" -eq 0 ]
  [ "$output" = "" ]
  run "$NETRUN" export c.ckpt -o w.npz
  [ "$status" -eq 0 ]
  # The header: length (8 bytes, little-endian), JSON padded to 8 bytes;
  # adam's moments (W@MOMENT1 ...) are not exported, the state is, marked.
  n=$(od -An -tu8 -N8 w.safetensors | tr -d ' ')
  [ $((n % 8)) -eq 0 ]
  header=$(dd if=w.safetensors bs=1 skip=8 count="$n" 2>/dev/null)
  [ "$(jq -c 'del(.__metadata__) | keys' <<<"$header")" = '["dense.W","dense.b","out.W","out.b","seen"]' ]
  [ "$(jq -c '.__metadata__' <<<"$header")" = '{"state.seen":"state"}' ]
  [ "$(jq -c '.seen' <<<"$header")" = '{"dtype":"F32","shape":[1],"data_offsets":[0,4]}' ]
  [ "$(jq -c '."dense.W"' <<<"$header")" = '{"dtype":"F32","shape":[2,4],"data_offsets":[4,36]}' ]
  [ "$(jq -c '."out.b"' <<<"$header")" = '{"dtype":"F32","shape":[2],"data_offsets":[84,92]}' ]
  [ $((8 + n + 92)) -eq "$(stat -c %s w.safetensors)" ]
  # The .npz: one stored .npy member per value, named NAME.npy, and the
  # list of the states.
  run unzip -Z1 w.npz
  [ "$output" = "$(printf 'seen.npy\ndense.W.npy\ndense.b.npy\nout.W.npy\nout.b.npy\n__netrun_states__.npy')" ]
  # Round trips: the same predictions, logits and state from all three.
  for out in logits seen; do
    "$NETRUN" predict clf.net --weights c.ckpt --data test.npz --output $out --precision 17 > ckpt.txt
    "$NETRUN" predict clf.net --weights w.safetensors --data test.npz --output $out --precision 17 > st.txt
    "$NETRUN" predict clf.net --weights w.npz --data test.npz --output $out --precision 17 > npz.txt
    cmp ckpt.txt st.txt
    cmp ckpt.txt npz.txt
  done
  # Exporting what was exported gives the same bytes.
  "$NETRUN" export w.safetensors -o again.safetensors
  cmp w.safetensors again.safetensors
  "$NETRUN" export w.safetensors -o again.npz
  cmp w.npz again.npz
  # --optimizer-state adds the moments and the learning rate.
  "$NETRUN" export c.ckpt -o all.safetensors --optimizer-state
  n=$(od -An -tu8 -N8 all.safetensors | tr -d ' ')
  [ "$(dd if=all.safetensors bs=1 skip=8 count="$n" 2>/dev/null | jq -c '[keys[] | select(contains("out.b"))]')" = \
    '["out.b","out.b@BETA1POW","out.b@BETA2POW","out.b@MOMENT1","out.b@MOMENT2"]' ]
}

@test "export refuses what it cannot do, with usage errors" {
  run --separate-stderr "$NETRUN" export linear.safetensors -o w.bin
  [ "$status" -eq 2 ]
  [ "${stderr_lines[0]}" = "netrun: export: w.bin ends in neither .safetensors nor .npz: say which with --format" ]
  run --separate-stderr "$NETRUN" export linear.safetensors
  [ "$status" -eq 2 ]
  [ "${stderr_lines[0]}" = "netrun: export needs -o FILE.safetensors, -o FILE.npz or -o FILE.onnx" ]
  run --separate-stderr "$NETRUN" export hole.safetensors -o w.npz
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: hole.safetensors: tensor 'b' starts at byte 20 of the data, where a hole is before it" ]
  [ ! -e w.npz ]
}

@test "--weights from safetensors: names, shapes and dtypes checked; --weights-partial loads the rest" {
  run --separate-stderr "$NETRUN" run show.net --weights linear.safetensors
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf '[[ 1.  -2. ]\n [ 0.5  3. ]]\n[ 0.25 -0.75]')" ]
  # F64 is read as f32 (these values exactly).
  run --separate-stderr "$NETRUN" run show.net --weights linear_f64.safetensors
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf '[[ 1.  -2. ]\n [ 0.5  3. ]]\n[ 0.25 -0.75]')" ]
  run --separate-stderr "$NETRUN" run show.net --weights renamed.safetensors
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: renamed.safetensors has no value for 'b'" ]
  run --separate-stderr "$NETRUN" run show.net --weights extra.safetensors
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: extra.safetensors has 1 value the script has no parameter or state for: c (--weights-partial loads the others)" ]
  run --separate-stderr "$NETRUN" run show.net --weights renamed.safetensors --weights-partial
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf '[[ 1.  -2. ]\n [ 0.5  3. ]]\n[0. 0.]')" ]
  [ "${stderr_lines[0]}" = "netrun: note: --weights-partial: 1 value loaded from renamed.safetensors" ]
  [ "${stderr_lines[1]}" = "netrun: note: not in renamed.safetensors, so as initialized: b" ]
  [ "${stderr_lines[2]}" = "netrun: note: in renamed.safetensors but not in the script: bias" ]
  run --separate-stderr "$NETRUN" run show.net --weights shape.safetensors
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: shape.safetensors: 'W' is f32[4] there, but f32[2, 2] here" ]
  run --separate-stderr "$NETRUN" run show.net --weights i64.safetensors
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: i64.safetensors: 'W' is i64[2, 2] there, but f32[2, 2] here" ]
  run --separate-stderr "$NETRUN" run show.net --weights f16.safetensors
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: f16.safetensors: tensor 'W': dtype F16 is not supported: netrun reads F32, F64, I64, I32, U8 and BOOL" ]
  run --separate-stderr "$NETRUN" run show.net --weights short.safetensors
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: short.safetensors: truncated: the tensors hold 24 bytes of data, the file 20" ]
  run --separate-stderr "$NETRUN" run show.net --weights badjson.safetensors
  [ "$status" -eq 1 ]
  [ "$stderr" = "netrun: error: badjson.safetensors: header: premature end of input near '\"F' at byte 16" ]
  run --separate-stderr "$NETRUN" run show.net --weights-partial
  [ "$status" -eq 2 ]
}

@test "train --weights starts from given weights: one SGD step from linear.safetensors, by hand" {
  # x = I, t = 0: p = W + b per row, dL/dp = (p - t) / 2, so dW = dp and
  # db = its column sums.  p = [[1.25, -2.75], [0.75, 2.25]];
  # W' = W - 0.5 dp = [[0.6875, -1.3125], [0.3125, 2.4375]],
  # b' = b - 0.5 [1, -0.25] = [-0.25, -0.625].
  python3 - <<'PY'
import struct, zipfile
def npy(shape, vals):
    d = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape
    d += ' ' * ((10 + len(d) + 1 + 63) // 64 * 64 - 10 - len(d) - 1) + '\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(d)) + d.encode() + struct.pack('<%df' % len(vals), *vals)
with zipfile.ZipFile('step.npz', 'w') as z:
    z.writestr('x.npy', npy('(2, 2)', [1, 0, 0, 1]))
    z.writestr('t.npy', npy('(2, 2)', [0, 0, 0, 0]))
PY
  run --separate-stderr "$NETRUN" train linear.net --weights linear.safetensors --save s.ckpt
  [ "$status" -eq 0 ]
  "$NETRUN" export s.ckpt -o s.npz
  run --separate-stderr "$NETRUN" run show.net --weights s.npz
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf '[[ 0.6875 -1.3125]\n [ 0.3125  2.4375]]\n[-0.25  -0.625]')" ]
  run --separate-stderr "$NETRUN" train linear.net --weights linear.safetensors --resume s.ckpt
  [ "$status" -eq 2 ]
  [ "${stderr_lines[0]}" = "netrun: --weights starts a run from given weights, --resume continues one: not both" ]
}

@test "NumPy reads an exported .npz (and the .safetensors by its spec) and recomputes the forward: the logits of predict" {
  /usr/bin/python3 -c 'import numpy' 2>/dev/null ||
    skip "Debian's python3-numpy is not installed (make deps installs it)"
  run --separate-stderr "$NETRUN" train clf.net --save c.ckpt
  [ "$status" -eq 0 ]
  "$NETRUN" export c.ckpt -o w.npz
  "$NETRUN" export c.ckpt -o w.safetensors
  "$NETRUN" predict clf.net --weights w.npz --data test.npz --output logits --precision 9 > netrun.txt
  /usr/bin/python3 - <<'PY'
import json
import numpy as np
w = np.load('w.npz')
# The safetensors file, read by the spec's rules with NumPy: the same arrays.
raw = open('w.safetensors', 'rb').read()
n = int.from_bytes(raw[:8], 'little')
header = json.loads(raw[8:8 + n])
assert n % 8 == 0 and raw[8:9] == b'{'
data = raw[8 + n:]
end = 0
for name, info in sorted(((k, v) for k, v in header.items() if k != '__metadata__'), key=lambda kv: kv[1]['data_offsets']):
    b, e = info['data_offsets']
    assert b == end, (name, b, end)
    end = e
    assert info['dtype'] == 'F32'
    a = np.frombuffer(data[b:e], dtype='<f4').reshape(info['shape'])
    assert np.array_equal(a, w[name]), name
assert end == len(data)
assert sorted(w.files) == ['__netrun_states__', 'dense.W', 'dense.b', 'out.W', 'out.b', 'seen'], w.files
assert w['__netrun_states__'].tolist() == ['seen'], w['__netrun_states__']
assert w['dense.W'].dtype == np.float32 and w['dense.W'].shape == (2, 4)
assert w['seen'][0] == 8, w['seen']     # 4 epochs of 2 steps
x = np.load('test.npz')['x'].astype(np.float32)
h = np.maximum(x @ w['dense.W'] + w['dense.b'], 0)
logits = h @ w['out.W'] + w['out.b']
text = open('netrun.txt').read().replace('[', ' ').replace(']', ' ').split()
got = np.array([float(v) for v in text], dtype=np.float32).reshape(logits.shape)
assert np.allclose(got, logits, rtol=1e-6, atol=1e-6), (got, logits)
np.save('x.npy', x)
PY
  # NumPy's own .npy (np.save) feeds predict too: the same values, in one batch.
  "$NETRUN" predict clf.net --weights w.npz --feed x=x.npy --output logits --precision 9 > fed.txt
  [ "$(tr -s '[] \n' ' ' < netrun.txt)" = "$(tr -s '[] \n' ' ' < fed.txt)" ]
}
