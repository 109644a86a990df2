#!/usr/bin/env bats
# trust_readers.bats — sizes read from a file's header are checked for
# overflow before any memory is spent on them (issue 31): a .npz whose
# arrays declare 2^62 examples of zero bytes, 19-digit shapes, -2^63 and
# 2^53 + 1 fed into f32, a text window of 2^63 - 1 bytes.

bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  cd "$BATS_TEST_TMPDIR"
}

# npz FILE NAME=DESCR:SHAPE[:HEXDATA]...: a .npz archive whose members are
# .npy files with exactly that header (numpy itself refuses such shapes).
npz() {
  python3 - "$@" <<'PY'
import struct, sys, zipfile
def npy(descr, shape, data):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    d += ' ' * ((64 - (10 + len(d) + 1) % 64) % 64) + '\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(d)) + d.encode() + data
with zipfile.ZipFile(sys.argv[1], 'w') as z:
    for m in sys.argv[2:]:
        name, rest = m.split('=', 1)
        parts = rest.split(':')
        z.writestr(name + '.npy', npy(parts[0], parts[1], bytes.fromhex(parts[2]) if len(parts) > 2 else b''))
PY
}

# A script reading x and y of [B, 0].
zero_net() {
  printf 'input x : f32[B, 0]\ninput y : f32[B, 0]\nparam w : [1] = zeros()\nloss = sum(x) + sum(y) + sum(w * w)\ntrain {\n  optimizer = sgd\n  lr = 0.1\n  batch = 1\n  epochs = 1\n}\n' > z.net
}

@test "2^62 examples of zero bytes: train, eval and data say out of memory (status 3), no crash" {
  npz big.npz "x=<f4:(4611686018427387904, 0)" "y=<f4:(4611686018427387904, 0)"
  zero_net
  for verb in train eval; do
    run "$NETRUN" $verb z.net --data big.npz
    [ "$status" -eq 3 ]
    [ "${lines[${#lines[@]}-1]}" = "netrun: error: big.npz: out of memory: 4611686018427387904 examples: the batches' order of them takes 8 bytes each, more than netrun can count (--max-memory)" ]
  done
  run "$NETRUN" data big.npz --batch 4
  [ "$status" -eq 3 ]
  [ "${lines[0]}" = "netrun: error: big.npz: out of memory: 4611686018427387904 examples: the batches' order of them takes 8 bytes each, more than netrun can count (--max-memory)" ]
}

@test "2^28 examples of zero bytes are charged to --max-memory: 2 GiB refused under 64M" {
  npz many.npz "x=<f4:(268435456, 0)" "y=<f4:(268435456, 0)"
  run "$NETRUN" data many.npz --max-memory 64M --batch 4
  [ "$status" -eq 3 ]
  [[ "${lines[0]}" = "netrun: error: many.npz: out of memory: 268435456 examples: the batches' order of them takes 8 bytes each: it would take 2 GiB, but only "*" (--max-memory)" ]]
  # what fits is still read
  npz few.npz "x=<f4:(1000, 0)" "y=<f4:(1000, 0)"
  run "$NETRUN" data few.npz --max-memory 64M --batch 4
  [ "$status" -eq 0 ]
  [ "${lines[${#lines[@]}-1]}" = "batches 250 of 4" ]
}

@test "a 19- or 20-digit size in a .npy header is refused, not wrapped" {
  npz d19.npz "x=<f4:(9999999999999999999,)"
  run "$NETRUN" data d19.npz
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: d19.npz: array 'x': shape has a size past 2^63 - 1 (9999999999999999999)" ]
  npz d3.npz "x=<f4:(4294967296, 4294967296, 2)"
  run "$NETRUN" data d3.npz
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: d3.npz: array 'x': shape (4294967296, 4294967296, 2): more elements than netrun can count" ]
}

@test "-2^63 and 2^53 + 1 fed into f32: exact, or refused in integers" {
  printf 'input x : f32[1, 1]\nprint(x * 1.0)\n' > m.net
  # -2^63 is a float32 exactly
  npz minint.npz "x=<i8:(1, 1):0000000000000080"
  run "$NETRUN" run m.net --feed x=minint.npz
  [ "$status" -eq 0 ]
  [ "$output" = "[[-9.223372e+18]]" ]
  # 2^53 + 1 is not (the double it passes through already rounded it)
  npz big53.npz "x=<i8:(1, 1):0100000000002000"
  run "$NETRUN" run m.net --feed x=big53.npz
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: big53.npz: member 'x.npy': element 0 is 9007199254740993, which float32 cannot hold exactly" ]
  # nor is 2^63 - 1 (which rounds to 2^63, past int64)
  npz max.npz "x=<i8:(1, 1):ffffffffffffff7f"
  run "$NETRUN" run m.net --feed x=max.npz
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: max.npz: member 'x.npy': element 0 is 9223372036854775807, which float32 cannot hold exactly" ]
}

@test "--context 2^63 - 1 is refused with its real need" {
  printf 'abcdefgh' > t.txt
  run "$NETRUN" data t.txt --context 9223372036854775807
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: t.txt: 8 bytes, but context = 9223372036854775807 needs at least 9223372036854775808 (a window and the byte after it)" ]
}

# npy FILE DESCR SHAPE: a .npy file of that header and no data.
npy() {
  python3 - "$@" <<'PY'
import struct, sys
d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (sys.argv[2], sys.argv[3])
d += ' ' * ((64 - (10 + len(d) + 1) % 64) % 64) + '\n'
open(sys.argv[1], 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(d)) + d.encode())
PY
}

@test "ops on values of no elements cost nothing: concat of a fed [2^62, 0] ends at once" {
  npy z.npy '<f4' '(4611686018427387904, 0)'
  printf 'input x : f32[N, M]\ny = concat([x, x, x], axis=1)\nprint(sum(y))\n' > c.net
  run timeout 20 "$NETRUN" run c.net --feed x=z.npy
  [ "$status" -eq 0 ]
  [ "$output" = "0.0" ]
}

@test "concat whose sizes along its axis add up past 2^63 - 1 says so (not an internal error)" {
  npy z.npy '<f4' '(0, 4611686018427387904)'
  printf 'input x : f32[N, M]\ny = concat([x, x, x], axis=1)\nprint(sum(y))\n' > c.net
  run "$NETRUN" run c.net --feed x=z.npy
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "c.net:2:5: error: concat: the sizes of axis 1 (X[1] has shape [0, 4611686018427387904]) add up past 2^63 - 1" ]
}

@test "a FIFO as --weights, --resume, netrun checkpoint or export is refused at once, not waited on" {
  cp "$ROOT/examples/linreg.net" .
  mkdir data && cp "$ROOT/examples/data/linreg.csv" data/
  mkfifo ff
  run timeout 10 "$NETRUN" eval linreg.net --weights ff
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot read ff: not a regular file" ]
  run timeout 10 "$NETRUN" train linreg.net --resume ff
  [ "$status" -eq 1 ]
  [ "${lines[${#lines[@]}-1]}" = "netrun: error: ff: cannot read: not a regular file" ]
  run timeout 10 "$NETRUN" checkpoint ff
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: ff: cannot read: not a regular file" ]
  run timeout 10 "$NETRUN" export ff -o o.npz
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot read ff: not a regular file" ]
  [ ! -e o.npz ]
}

# png FILE: a 1 x 1 grey PNG image.
png() {
  python3 - "$1" <<'PY'
import struct, sys, zlib
def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))
open(sys.argv[1], 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 1, 1, 8, 0, 0, 0, 0))
                              + chunk(b'IDAT', zlib.compress(b'\x00\x80')) + chunk(b'IEND', b''))
PY
}

@test "an image folder out of memory exits 3 also past netrun's largest image (16 GiB)" {
  mkdir -p f/a f/b
  png f/a/1.png
  png f/b/1.png
  run "$NETRUN" data f --shape 3,1048576,1048576
  [ "$status" -eq 3 ]
  [[ "$output" = "netrun: error: out of memory: f: 2 images of 3 x 1048576 x 1048576: it would take 6 TiB"* ]]
  run "$NETRUN" data f --shape 1,1,1 --max-memory 1K
  [ "$status" -eq 3 ]
}

# st FILE NAME...: a safetensors file of f32 [1] tensors of those names.
st() {
  python3 - "$@" <<'PY'
import json, struct, sys
names = sys.argv[2:]
j = json.dumps({n: {'dtype': 'F32', 'shape': [1], 'data_offsets': [4 * i, 4 * i + 4]} for i, n in enumerate(names)}).encode()
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(j)) + j + b'\0' * (4 * len(names)))
PY
}

@test "names that leave the folder or are not UTF-8 are refused, reading and writing npz and safetensors" {
  # writing: a safetensors name ../../b2 would be the npz member ../../b2.npy
  st dotdot.safetensors ../../b2
  run "$NETRUN" export dotdot.safetensors -o o.npz
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: o.npz: member '../../b2.npy' would have a '..' that climbs out of the folder it is unpacked in: refused" ]
  [ ! -e o.npz ]
  # reading: such members, and absolute ones
  npz slip.npz "../x=<f4:(1,):00000000"
  run "$NETRUN" data slip.npz
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: slip.npz: member '../x.npy' has a '..' that climbs out of the folder it is unpacked in: refused" ]
  npz abs.npz "/x=<f4:(1,):00000000"
  run "$NETRUN" export abs.npz -o o.safetensors
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: abs.npz: member '/x.npy' has an absolute path: refused" ]
  # a name that is not UTF-8: a safetensors header is JSON
  python3 -c "
import struct
h = b'{\"\xff\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}'
open('bad8.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + b'\0' * 4)"
  run "$NETRUN" export bad8.safetensors -o o.npz
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: bad8.safetensors: header: text that is not UTF-8 at byte 2" ]
  npz w.npz "w=<f4:(1,):00000000"
  python3 -c "
d = open('w.npz', 'rb').read().replace(b'w.npy', b'\xff.npy')
open('w.npz', 'wb').write(d)"
  run "$NETRUN" export w.npz -o o.safetensors
  [ "$status" -eq 1 ]
  [ "$output" = $'netrun: error: o.safetensors: tensor name \'\xff\' is not UTF-8: refused' ]
  [ ! -e o.safetensors ]
}

@test "a safetensors header of length 0 or 2^62, or not an object, is named so" {
  python3 -c "
import struct
open('h0.safetensors', 'wb').write(struct.pack('<Q', 0))
open('h62.safetensors', 'wb').write(struct.pack('<Q', 2**62) + b'{}')
open('arr.safetensors', 'wb').write(struct.pack('<Q', 2) + b'[]')"
  run "$NETRUN" export h0.safetensors -o o.npz
  [ "$output" = "netrun: error: h0.safetensors: a header of 0 bytes: a safetensors header is a JSON object" ]
  run "$NETRUN" export h62.safetensors -o o.npz
  [ "$output" = "netrun: error: h62.safetensors: a header of 4611686018427387904 bytes: more than 100000000" ]
  run "$NETRUN" export arr.safetensors -o o.npz
  [ "$output" = "netrun: error: arr.safetensors: header: not a JSON object" ]
}

@test "predict --output p --output p is refused" {
  cp "$ROOT/examples/linreg.net" .
  run "$NETRUN" predict linreg.net --set 'x=[[0, 0]]' --set 'y=[[0]]' --output W --output W -o p.npz
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --output W is given twice" ]
  [ ! -e p.npz ]
}

@test "NaN from --weights is said to come from the weights file" {
  cp "$ROOT/examples/linreg.net" .
  mkdir data && cp "$ROOT/examples/data/linreg.csv" data/
  npz nan.npz "W=<f4:(2, 1):0000c07f00000000" "b=<f4:(1,):00000000"
  run "$NETRUN" train linreg.net --weights nan.npz
  [ "$status" -eq 1 ]
  [ "${lines[${#lines[@]}-1]}" = "netrun: error: parameter 'W' holds NaN or Inf as read from nan.npz (--weights)" ]
}

@test "--weights does not load a state into a parameter of its name, nor back" {
  mkdir data && cp "$ROOT/examples/data/linreg.csv" data/
  for kind in param state; do
    printf 'input x : f32[B, 2]\ninput y : f32[B, 1]\nparam W : [2, 1] = zeros()\n%s b : [1] = zeros()\nloss = mean((x @ W + b - y) * (x @ W + b - y))\ntrain {\n  data = "data/linreg.csv"\n  optimizer = sgd\n  lr = 0.1\n  batch = 20\n  epochs = 1\n}\n' $kind > $kind.net
    "$NETRUN" train $kind.net --save $kind.ckpt > /dev/null
  done
  run "$NETRUN" eval param.net --weights state.ckpt
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: state.ckpt: 'b' is a state there, but a parameter here" ]
  run "$NETRUN" eval state.net --weights param.ckpt
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: param.ckpt: 'b' is a parameter there, but a state here" ]
  run "$NETRUN" eval state.net --weights state.ckpt
  [ "$status" -eq 0 ]
  # an export to safetensors keeps the marks, and so does one to npz (its
  # __netrun_states__ member); an npz from elsewhere has none, and a note says so
  "$NETRUN" export state.ckpt -o state.safetensors
  for kind in param state; do "$NETRUN" export $kind.ckpt -o $kind.npz; done
  for f in state.safetensors state.npz; do
    run "$NETRUN" eval param.net --weights $f
    [ "$status" -eq 1 ]
    [ "$output" = "netrun: error: $f: 'b' is a state there, but a parameter here" ]
    run --separate-stderr "$NETRUN" eval state.net --weights $f
    [ "$status" -eq 0 ]
    [ "$stderr" = "" ]
  done
  run "$NETRUN" eval state.net --weights param.npz
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: param.npz: 'b' is a parameter there, but a state here" ]
  run --separate-stderr "$NETRUN" eval param.net --weights param.npz
  [ "$status" -eq 0 ]
  [ "$stderr" = "" ]
  # the round trip: the npz exported again is the same file
  "$NETRUN" export state.npz -o again.npz
  cmp state.npz again.npz
  npz foreign.npz "W=<f4:(2, 1):0000000000000000" "b=<f4:(1,):00000000"
  run --separate-stderr "$NETRUN" eval state.net --weights foreign.npz
  [ "$status" -eq 0 ]
  [ "$stderr" = "netrun: note: foreign.npz does not mark its states (as netrun's checkpoints do): the state b took its value by name" ]
  # a foreign npz exported stays unmarked (it says nothing of its states)
  "$NETRUN" export foreign.npz -o foreign2.npz
  run --separate-stderr "$NETRUN" eval state.net --weights foreign2.npz
  [ "$status" -eq 0 ]
  [[ "$stderr" == "netrun: note: foreign2.npz does not mark its states"* ]]
}

@test "an npz's __netrun_states__ member: NumPy reads it as strings; a malformed one is refused" {
  mkdir data && cp "$ROOT/examples/data/linreg.csv" data/
  printf 'input x : f32[B, 2]\ninput y : f32[B, 1]\nparam W : [2, 1] = zeros()\nstate b : [1] = zeros()\nstate scale : [1] = ones()\nloss = mean((x @ W * scale + b - y) * (x @ W + b - y))\ntrain {\n  data = "data/linreg.csv"\n  optimizer = sgd\n  lr = 0.1\n  batch = 20\n  epochs = 1\n}\n' > s.net
  "$NETRUN" train s.net --save s.ckpt > /dev/null
  "$NETRUN" export s.ckpt -o s.npz
  if /usr/bin/python3 -c 'import numpy' 2> /dev/null; then
    run /usr/bin/python3 -c 'import numpy as np; z = np.load("s.npz"); a = z["__netrun_states__"]; print(a.dtype, list(a), sorted(z.files))'
    [ "$output" = "<U5 ['b', 'scale'] ['W', '__netrun_states__', 'b', 'scale']" ]
  fi
  run --separate-stderr "$NETRUN" eval s.net --weights s.npz
  [ "$status" -eq 0 ]
  [ "$stderr" = "" ]
  npz num.npz "W=<f4:(2, 1):0000000000000000" "b=<f4:(1,):00000000" "__netrun_states__=<i8:(1,):0100000000000000"
  run "$NETRUN" eval s.net --weights num.npz
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: num.npz: array '__netrun_states__': not netrun's list of states (a 1-D array of strings, NumPy's '<U')" ]
  npz empty.npz "W=<f4:(2, 1):0000000000000000" "__netrun_states__=<U1:(1,):00000000"
  run "$NETRUN" eval s.net --weights empty.npz
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: empty.npz: array '__netrun_states__': string 0 is not the name of a state (empty, or longer than 249 bytes)" ]
  npz sur.npz "W=<f4:(2, 1):0000000000000000" "__netrun_states__=<U1:(1,):00d80000"
  run "$NETRUN" eval s.net --weights sur.npz
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: sur.npz: array '__netrun_states__': string 0 holds U+D800, not a character" ]
  # elsewhere, an array of strings is refused as before
  npz feed.npz "x=<U1:(1,):41000000"
  printf 'input x : f32[1]\nprint(x)\n' > f.net
  run "$NETRUN" run f.net --feed x=feed.npz
  [ "$status" -eq 1 ]
  [[ "$output" == *"dtype '<U1' is not supported"* ]]
}

@test "a link loop as a class folder says so; control characters in names are escaped, in errors and in netrun data" {
  mkdir -p f/a f/b
  png f/a/1.png
  png f/b/1.png
  ln -s loop f/loop
  run "$NETRUN" data f
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot read f/loop: Too many levels of symbolic links" ]
  rm f/loop
  mkdir "f/x"$'\e'"[31mred"
  png "f/x"$'\e'"[31mred/1.png"
  run "$NETRUN" data f
  [ "$status" -eq 0 ]
  [ "${lines[8]}" = 'class 2 x\x1b[31mred 1' ]
  mkdir "f/e"$'\a'
  run "$NETRUN" data f
  [ "$status" -eq 1 ]
  [ "$output" = 'netrun: error: f/e\x07: class folder 2 is empty: every class folder must hold PNG or JPEG images' ]
}
