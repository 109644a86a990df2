#!/usr/bin/env bats
# data.bats — datasets: `netrun data` over the real Fashion-MNIST, small IDX
# files made here (tests/data/mkidx.sh), CSV files, batching, shuffling,
# fitting batches to a script's inputs, and every reader error, word for word.

bats_require_minimum_version 1.5.0

setup_file() {
  MKIDX=$BATS_TEST_DIRNAME/data/mkidx.sh
  cd "$BATS_FILE_TMPDIR"
  # A tiny Fashion-MNIST: train gzipped, 5 images 2x3 whose pixels are
  # 51 * ((i + j) % 6), i.e. 0, 0.2, ..., 1 once scaled; test raw, 3 images 2x2.
  mkdir -p fm half
  px=""
  for i in 0 1 2 3 4; do for j in 0 1 2 3 4 5; do px+="$((51 * ((i + j) % 6))) "; done; done
  "$MKIDX" fm/train-images-idx3-ubyte.gz "5 2 3" "$px"
  "$MKIDX" fm/train-labels-idx1-ubyte.gz "5" "3 1 4 1 5"
  "$MKIDX" fm/t10k-images-idx3-ubyte "3 2 2" "0 255 0 255 255 0 255 0 51 51 51 51"
  "$MKIDX" fm/t10k-labels-idx1-ubyte "3" "7 8 9"
  cp fm/train-images-idx3-ubyte.gz half/
  # Broken files, each with one thing wrong.
  "$MKIDX" img.idx "5 2 3" "$px"
  "$MKIDX" lab.idx "5" "3 1 4 1 5"
  "$MKIDX" lab4.idx "4" "3 1 4 1"
  "$MKIDX" short.idx "5 2 3" "1 2 3 4 5 6 7 8 9 10 11 12"
  "$MKIDX" magic.idx "5 2 3" "$px" 0x12345678
  "$MKIDX" float.idx "5 2 3" "$px" 0x00000d03
  "$MKIDX" trailing.idx "5 2 3" "$px 7 7 7"
  "$MKIDX" huge.idx "4294967295 4294967295 4294967295" ""
  "$MKIDX" none.idx "0 2 3" ""
  "$MKIDX" nine.idx "1 1 1 1 1 1 1 1 1" "0"
  : >empty.idx
  printf '\x00\x00\x08\x03\x00\x00\x00\x05\x00\x00' >header.idx
  # 30 images 10x10 of pseudo-random bytes (they do not compress away), gzipped,
  # then cut, or with a bad checksum.
  x=1 big=""
  for i in $(seq 3000); do x=$(((x * 1103515245 + 12345) % 2147483648)); big+="$((x >> 16 & 255)) "; done
  "$MKIDX" big.idx.gz "30 10 10" "$big"
  "$MKIDX" lab30.idx "30" "$(printf '1 %.0s' $(seq 30))"
  size=$(stat -c %s big.idx.gz)
  head -c $((size / 2)) big.idx.gz >cut.idx.gz
  head -c $((size - 4)) big.idx.gz >nocrc.idx.gz
  cp big.idx.gz badcrc.idx.gz
  printf '\xde\xad\xbe\xef' | dd of=badcrc.idx.gz bs=1 seek=$((size - 8)) conv=notrunc 2>/dev/null
  cat big.idx.gz big.idx.gz >twice.idx.gz
  # CSV files.
  printf 'a,b,c,label\n1,2,3,0\n4,5,6,1\n\n7,8,9.5,1\n' >ok.csv
  printf '1,2,0.5\n3,4,1.5\r\n5,6,-2\n' >noheader.csv
  printf 'a,b,c\n1,2,3\n4,5\n' >ragged.csv
  printf 'a,b,c\n1,2,3\n4,x,6\n' >word.csv
  : >empty.csv
  printf 'a,b,c\n' >header.csv
  printf 'a,b\n1,2,3\n' >narrow.csv
  printf '1\n2\n' >onecol.csv
  printf '1,2\n3,inf\n' >inf.csv
  # Scripts whose inputs batches must fit.
  printf 'input x : f32[B, 1, 2, 3]\ninput y : i64[B]\nprint(sum(x))\n' >cnn.net
  printf 'input x : f32[B, D]\ninput labels : f32[B]\nprint(sum(x))\n' >sym.net
  printf 'input x : f32[4, 6]\ninput y : i64[B]\nprint(sum(x))\n' >fixed.net
  printf 'input x : f32[B, 3]\ninput y : i64[B]\nprint(sum(x))\n' >csv.net
}

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  EX=$BATS_TEST_DIRNAME/../examples
  FASHION=/usr/share/datasets/fashion-mnist
  unset NETRUN_DATA
  cd "$BATS_FILE_TMPDIR"
}

# Compares $output with the expected text on stdin, showing a diff.
same() { diff -u - <(printf '%s\n' "$output"); }

need_fashion() { [ -f "$FASHION/train-images-idx3-ubyte.gz" ] || skip "dataset-fashion-mnist is not installed"; }

# ---- the real Fashion-MNIST --------------------------------------------------------

@test "fashion-mnist train: 60000 images 28x28, 10 classes of 6000" {
  need_fashion
  run "$NETRUN" data fashion-mnist
  [ "$status" -eq 0 ]
  same <<EOF
dataset fashion-mnist
split train
file $FASHION/train-images-idx3-ubyte.gz
file $FASHION/train-labels-idx1-ubyte.gz
examples 60000
column images f32 [60000, 28, 28] from u8 scaled to [0, 1]
column labels i64 [60000]
classes 10
class 0 6000
class 1 6000
class 2 6000
class 3 6000
class 4 6000
class 5 6000
class 6 6000
class 7 6000
class 8 6000
class 9 6000
EOF
}

@test "fashion-mnist test: 10000 images, 10 classes of 1000" {
  need_fashion
  run "$NETRUN" data fashion-mnist --split test
  [ "$status" -eq 0 ]
  [ "${lines[1]}" = "split test" ]
  [ "${lines[2]}" = "file $FASHION/t10k-images-idx3-ubyte.gz" ]
  [ "${lines[3]}" = "file $FASHION/t10k-labels-idx1-ubyte.gz" ]
  [ "${lines[4]}" = "examples 10000" ]
  [ "${lines[5]}" = "column images f32 [10000, 28, 28] from u8 scaled to [0, 1]" ]
  [ "${lines[7]}" = "classes 10" ]
  for c in 0 1 2 3 4 5 6 7 8 9; do [ "${lines[8 + c]}" = "class $c 1000" ]; done
  [ "${#lines[@]}" -eq 18 ]
}

@test "fashion-mnist: batches of 128, the last partial or dropped; the first labels" {
  need_fashion
  run "$NETRUN" data fashion-mnist --batch 128
  [ "${lines[18]}" = "batches 469 of 128, the last of 96" ]
  run "$NETRUN" data fashion-mnist --batch 128 --drop-last --shuffle
  [ "${lines[18]}" = "batches 468 of 128, dropping the last 96" ]
  run "$NETRUN" data fashion-mnist --head 3
  [ "${lines[-2]}" = "labels" ]
  [ "${lines[-1]}" = "[9 0 0]" ]
  run "$NETRUN" data fashion-mnist --split test --head 5
  [ "${lines[-1]}" = "[9 2 1 1 6]" ]
}

@test "fashion-mnist batches fit the example models' inputs" {
  need_fashion
  run "$NETRUN" data fashion-mnist --fit "$EX/fashion_mlp.net" --batch 128
  [ "$status" -eq 0 ]
  [ "${lines[-2]}" = "fit x f32[B, 784] takes images as f32[128, 784]" ]
  [ "${lines[-1]}" = "fit y i64[B] takes labels as i64[128]" ]
  run "$NETRUN" data fashion-mnist --split test --fit "$EX/fashion_cnn.net"
  [ "$status" -eq 0 ]
  [ "${lines[-2]}" = "fit x f32[B, 1, 28, 28] takes images as f32[10000, 1, 28, 28]" ]
  [ "${lines[-1]}" = "fit y i64[B] takes labels as i64[10000]" ]
}

# ---- NETRUN_DATA and small IDX files ----------------------------------------------------

@test "NETRUN_DATA: a tiny fashion-mnist, every value as scaled" {
  NETRUN_DATA=$PWD/fm run "$NETRUN" data fashion-mnist --head 5
  [ "$status" -eq 0 ]
  same <<EOF
dataset fashion-mnist
split train
file $PWD/fm/train-images-idx3-ubyte.gz
file $PWD/fm/train-labels-idx1-ubyte.gz
examples 5
column images f32 [5, 2, 3] from u8 scaled to [0, 1]
column labels i64 [5]
classes 4
class 1 2
class 3 1
class 4 1
class 5 1
head 5
index
[0 1 2 3 4]
images
[[[0.  0.2 0.4]
  [0.6 0.8 1. ]]

 [[0.2 0.4 0.6]
  [0.8 1.  0. ]]

 [[0.4 0.6 0.8]
  [1.  0.  0.2]]

 [[0.6 0.8 1. ]
  [0.  0.2 0.4]]

 [[0.8 1.  0. ]
  [0.2 0.4 0.6]]]
labels
[3 1 4 1 5]
EOF
}

@test "NETRUN_DATA: the test split from uncompressed files" {
  NETRUN_DATA=$PWD/fm run "$NETRUN" data fashion-mnist --split test --head 2
  [ "$status" -eq 0 ]
  same <<EOF
dataset fashion-mnist
split test
file $PWD/fm/t10k-images-idx3-ubyte
file $PWD/fm/t10k-labels-idx1-ubyte
examples 3
column images f32 [3, 2, 2] from u8 scaled to [0, 1]
column labels i64 [3]
classes 3
class 7 1
class 8 1
class 9 1
head 2
index
[0 1]
images
[[[0. 1.]
  [0. 1.]]

 [[1. 0.]
  [1. 0.]]]
labels
[7 8]
EOF
}

@test "NETRUN_DATA holding one file of a split is an error, not a mix of folders" {
  NETRUN_DATA=$PWD/half run "$NETRUN" data fashion-mnist
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: $PWD/half: holds $PWD/half/train-images-idx3-ubyte.gz but not train-labels-idx1-ubyte.gz (nor train-labels-idx1-ubyte)" ]
}

@test "NETRUN_DATA without the files falls back to the installed dataset" {
  need_fashion
  NETRUN_DATA=$PWD/nowhere run "$NETRUN" data fashion-mnist
  [ "$status" -eq 0 ]
  [ "${lines[2]}" = "file $FASHION/train-images-idx3-ubyte.gz" ]
}

@test "an IDX pair IMAGES:LABELS, gzip and raw" {
  run "$NETRUN" data fm/train-images-idx3-ubyte.gz:lab.idx --head 1
  [ "$status" -eq 0 ]
  same <<EOF
dataset fm/train-images-idx3-ubyte.gz:lab.idx
file fm/train-images-idx3-ubyte.gz
file lab.idx
examples 5
column images f32 [5, 2, 3] from u8 scaled to [0, 1]
column labels i64 [5]
classes 4
class 1 2
class 3 1
class 4 1
class 5 1
head 1
index
[0]
images
[[[0.  0.2 0.4]
  [0.6 0.8 1. ]]]
labels
[3]
EOF
  run "$NETRUN" data big.idx.gz:lab30.idx
  [ "$status" -eq 0 ]
  [ "${lines[4]}" = "column images f32 [30, 10, 10] from u8 scaled to [0, 1]" ]
}

# ---- batches and shuffling -------------------------------------------------------------

@test "batches: the last one partial, or dropped" {
  NETRUN_DATA=$PWD/fm
  export NETRUN_DATA
  run "$NETRUN" data fashion-mnist --batch 2
  [ "${lines[-1]}" = "batches 3 of 2, the last of 1" ]
  run "$NETRUN" data fashion-mnist --batch 2 --drop-last
  [ "${lines[-1]}" = "batches 2 of 2, dropping the last 1" ]
  run "$NETRUN" data fashion-mnist --batch 5 --drop-last
  [ "${lines[-1]}" = "batches 1 of 5" ]
  run "$NETRUN" data fashion-mnist --batch 7
  [ "${lines[-1]}" = "batches 1 of 7, the last of 5" ]
  run "$NETRUN" data fashion-mnist --batch 7 --drop-last --shuffle
  [ "${lines[-1]}" = "batches 0 of 7, dropping the last 5" ]
}

@test "shuffling: the same seed gives the same rows, another seed others" {
  NETRUN_DATA=$PWD/fm
  export NETRUN_DATA
  run "$NETRUN" data fashion-mnist --shuffle --seed 1 --head 3
  [ "$status" -eq 0 ]
  first=$output
  [[ "$output" == *"head 3 shuffled with seed 1"$'\n'"index"$'\n'"[0 1 3]"$'\n'* ]]
  [ "${lines[-1]}" = "[3 1 1]" ]
  run "$NETRUN" data fashion-mnist --shuffle --seed 1 --head 3
  [ "$output" = "$first" ]
  run "$NETRUN" data fashion-mnist --shuffle --seed 2 --head 3
  [ "$output" != "$first" ]
  [[ "$output" == *"head 3 shuffled with seed 2"$'\n'"index"$'\n'"[3 1 4]"$'\n'* ]]
  [ "${lines[-1]}" = "[1 1 5]" ]
  # Every example once: the whole set shuffled is a permutation.
  run "$NETRUN" data fashion-mnist --shuffle --seed 7 --head 5
  idx=$(printf '%s\n' "${lines[@]}" | sed -n '/^index$/{n;p}' | tr -d '[]' | tr ' ' '\n' | sort | tr '\n' ' ')
  [ "$idx" = "0 1 2 3 4 " ]
  # The real set too.
  need_fashion
  unset NETRUN_DATA
  run "$NETRUN" data fashion-mnist --shuffle --seed 5 --head 3
  a=$output
  run "$NETRUN" data fashion-mnist --shuffle --seed 5 --head 3
  [ "$output" = "$a" ]
  run "$NETRUN" data fashion-mnist --shuffle --seed 6 --head 3
  [ "$output" != "$a" ]
}

# ---- fitting batches to inputs -----------------------------------------------------------

@test "fit: a batch is reshaped to the input's trailing dims" {
  NETRUN_DATA=$PWD/fm
  export NETRUN_DATA
  run "$NETRUN" data fashion-mnist --fit cnn.net
  [ "$status" -eq 0 ]
  [ "${lines[-2]}" = "fit x f32[B, 1, 2, 3] takes images as f32[5, 1, 2, 3]" ]
  [ "${lines[-1]}" = "fit y i64[B] takes labels as i64[5]" ]
  # A symbolic dim is inferred; i64 labels may feed an f32 input.
  run "$NETRUN" data fashion-mnist --fit sym.net --batch 2
  [ "$status" -eq 0 ]
  [ "${lines[-2]}" = "fit x f32[B, D] takes images as f32[2, 6]" ]
  [ "${lines[-1]}" = "fit labels f32[B] takes labels as f32[2]" ]
  run "$NETRUN" data fashion-mnist --fit fixed.net --batch 4
  [ "$status" -eq 0 ]
  [ "${lines[-2]}" = "fit x f32[4, 6] takes images as f32[4, 6]" ]
  run "$NETRUN" data ok.csv --fit csv.net
  [ "$status" -eq 0 ]
  [ "${lines[-2]}" = "fit x f32[B, 3] takes x as f32[3, 3]" ]
}

@test "fit: a shape that does not match names the input, its shape and the column's" {
  NETRUN_DATA=$PWD/fm run "$NETRUN" data fashion-mnist --fit "$EX/fashion_mlp.net"
  [ "$status" -eq 1 ]
  [ "${lines[-4]}" = "$EX/fashion_mlp.net:4:1: error: input 'x' is declared f32[B, 784] (784 values per example), but column 'images' has shape [5, 2, 3] (6 values per example)" ]
  [ "${lines[-3]}" = "input x : f32[B, 784]  # B is bound when a batch is fed" ]
  [ "${lines[-2]}" = "^~~~~~~~~~~~~~~~~~~~~" ]
  [ "${lines[-1]}" = "fit y i64[B] takes labels as i64[5]" ]
  NETRUN_DATA=$PWD/fm run "$NETRUN" data fashion-mnist --fit fixed.net --batch 2
  [ "$status" -eq 1 ]
  [ "${lines[-4]}" = "fixed.net:1:1: error: input 'x' is declared f32[4, 6]: batches of 4, but this batch of column 'images' holds 2 examples" ]
  run "$NETRUN" data noheader.csv --fit csv.net
  [ "$status" -eq 1 ]
  output=$(printf '%s\n' "${lines[@]: -7}")
  same <<'EOF'
csv.net:1:1: error: input 'x' is declared f32[B, 3] (3 values per example), but column 'x' has shape [3, 2] (2 values per example)
input x : f32[B, 3]
^~~~~~~~~~~~~~~~~~~
csv.net:2:1: error: input 'y' is declared i64[B], but column 'y' holds f32 values
input y : i64[B]
^~~~~~~~~~~~~~~~
2 errors
EOF
}

# ---- IDX errors -------------------------------------------------------------------------

# Runs `netrun data SPEC` and checks it fails with status 1 and exactly the message.
fails() {
  run "$NETRUN" data "$1"
  [ "$status" -eq 1 ] || { echo "status $status: $output"; return 1; }
  [ "$output" = "$2" ] || { diff -u <(printf '%s\n' "$2") <(printf '%s\n' "$output"); return 1; }
}

@test "IDX: a wrong path" {
  fails nosuch.idx:lab.idx "netrun: error: cannot read nosuch.idx: No such file or directory"
  fails img.idx:nosuch.idx "netrun: error: cannot read nosuch.idx: No such file or directory"
  fails fm:lab.idx "netrun: error: cannot read fm: Is a directory"
  fails nosuch.csv "netrun: error: cannot read nosuch.csv: No such file or directory"
}

@test "IDX: truncated pixels, header, magic; an empty file" {
  fails short.idx:lab.idx "netrun: error: short.idx: truncated: 30 bytes of pixels expected, 12 found"
  fails header.idx:lab.idx "netrun: error: header.idx: truncated: a 16-byte IDX header expected, 10 bytes found"
  fails empty.idx:lab.idx "netrun: error: empty.idx: empty file: expected IDX images (magic number 0x00000803)"
  fails img.idx:empty.idx "netrun: error: empty.idx: empty file: expected IDX labels (magic number 0x00000801)"
  printf '\x00\x00' >two.idx
  fails two.idx:lab.idx "netrun: error: two.idx: truncated: a 4-byte IDX magic number expected, 2 found"
}

@test "IDX: a cut gzip stream, a missing or wrong checksum" {
  run "$NETRUN" data cut.idx.gz:lab30.idx
  [ "$status" -eq 1 ]
  [[ "$output" =~ ^"netrun: error: cut.idx.gz: truncated: 3000 bytes of pixels expected, "[0-9]+" found (the gzip stream is cut short)"$ ]]
  fails nocrc.idx.gz:lab30.idx "netrun: error: nocrc.idx.gz: truncated: the gzip stream ends before its checksum"
  fails badcrc.idx.gz:lab30.idx "netrun: error: badcrc.idx.gz: corrupt gzip data (incorrect data check)"
}

@test "IDX: a corrupt magic number, an unsupported element type, too many dims" {
  fails magic.idx:lab.idx "netrun: error: magic.idx: not an IDX file: magic number 0x12345678, expected 0x00000803 (images: unsigned bytes, 3 dimensions)"
  fails img.idx:magic.idx "netrun: error: magic.idx: not an IDX file: magic number 0x12345678, expected 0x00000801 (labels: unsigned bytes, 1 dimension)"
  fails float.idx:lab.idx "netrun: error: float.idx: IDX elements of type 0x0d (32-bit float) are not supported: expected 0x08 (unsigned byte)"
  fails nine.idx:lab.idx "netrun: error: nine.idx: IDX magic 0x00000809: 9 dimensions, more than netrun's 8"
}

@test "IDX: labels given as images, images as labels" {
  fails lab.idx:lab.idx "netrun: error: lab.idx: expected images (IDX magic 0x00000803), found magic 0x00000801: 1 dimension, like labels"
  fails img.idx:img.idx "netrun: error: img.idx: expected labels (IDX magic 0x00000801), found magic 0x00000803: 3 dimensions, like images"
}

@test "IDX: dims too large or empty" {
  fails huge.idx:lab.idx "netrun: error: huge.idx: dims [4294967295, 4294967295, 4294967295] are too large: 7.923e+28 pixels, more than netrun's limit of 4294967296"
  fails none.idx:lab.idx "netrun: error: none.idx: no examples: dims [0, 2, 3]"
}

@test "IDX: trailing data is an error" {
  fails trailing.idx:lab.idx "netrun: error: trailing.idx: trailing data: 3 bytes after the 30 bytes of pixels its header announces"
  fails twice.idx.gz:lab30.idx "netrun: error: twice.idx.gz: trailing data: 3016 bytes after the 3000 bytes of pixels its header announces"
}

@test "IDX: images and labels counts differ" {
  fails img.idx:lab4.idx "netrun: error: lab4.idx: 4 labels, but img.idx holds 5 images"
  fails big.idx.gz:lab.idx "netrun: error: lab.idx: 5 labels, but big.idx.gz holds 30 images"
}

@test "an IDX or gzip file given alone, as if it were CSV" {
  fails img.idx "netrun: error: img.idx: an IDX file: name IDX files as a pair, IMAGES:LABELS"
  fails big.idx.gz "netrun: error: big.idx.gz: a gzip file: CSV files are read uncompressed, IDX files as IMAGES:LABELS"
}

# ---- CSV -------------------------------------------------------------------------------

@test "CSV: a header, the label column named 'label', blank lines skipped" {
  run "$NETRUN" data ok.csv --head 3
  [ "$status" -eq 0 ]
  same <<'EOF'
dataset ok.csv
file ok.csv
examples 3
column x f32 [3, 3] from a, b, c
column y i64 [3] from label
classes 2
class 0 1
class 1 2
head 3
index
[0 1 2]
x
[[1.  2.  3. ]
 [4.  5.  6. ]
 [7.  8.  9.5]]
y
[0 1 1]
EOF
}

@test "CSV: no header, the last column the label, f32 when not integral" {
  run "$NETRUN" data noheader.csv --head 1
  [ "$status" -eq 0 ]
  same <<'EOF'
dataset noheader.csv
file noheader.csv
examples 3
column x f32 [3, 2] from columns 0, 1
column y f32 [3] from column 2
range y -2 1.5
head 1
index
[0]
x
[[1. 2.]]
y
[0.5]
EOF
}

@test "CSV: the label column chosen by name or index" {
  run "$NETRUN" data ok.csv --label b
  [ "${lines[3]}" = "column x f32 [3, 3] from a, c, label" ]
  [ "${lines[4]}" = "column y i64 [3] from b" ]
  run "$NETRUN" data noheader.csv --label 0
  [ "${lines[3]}" = "column x f32 [3, 2] from columns 1, 2" ]
  [ "${lines[4]}" = "column y i64 [3] from column 0" ]
}

@test "CSV: a long header is shown by its ends" {
  printf 'p1,p2,p3,p4,p5,p6,p7,label\n1,2,3,4,5,6,7,0\n' >wide.csv
  run "$NETRUN" data wide.csv
  [ "${lines[3]}" = "column x f32 [1, 7] from p1, p2, p3, ..., p7 (7 columns)" ]
}

@test "CSV: a ragged row" {
  fails ragged.csv "ragged.csv:3:1: error: this row has 2 values, the rows before have 3
4,5
^~~"
  fails narrow.csv "narrow.csv:2:1: error: this row has 3 values, the header names 2 columns
1,2,3
^~~~~"
}

@test "CSV: a field that is not a number, or not finite" {
  fails word.csv "word.csv:3:3: error: column 'b' holds 'x', not a number: CSV columns are read as numbers (text is not encoded as categories); name the numeric columns with columns = [...] in the train block
4,x,6
  ^"
  fails inf.csv "inf.csv:2:3: error: not a finite number
3,inf
  ^~~"
}

@test "CSV: an empty cell is a missing value, named by its column, on every path (data, columns = [...], --feed)" {
  printf 'a,b,c\n1,2,0\n4,,1\n' >train.csv
  msg="train.csv:3:3: error: column 'b' has a missing value
4,,1
  ^"
  fails train.csv "$msg"
  printf 'input x : f32[B, 2]\ninput y : i64[B]\nparam W : [2, 2] = zeros()\nloss = mean(softmax_cross_entropy(x @ W, y))\ntrain {\n  data = "train.csv"\n  columns = ["a", "b"]\n  label = "c"\n}\n' >cols.net
  run --separate-stderr "$NETRUN" train cols.net
  [ "$status" -eq 1 ]
  [ "$stderr" = "$msg" ]
  printf 'input x : f32[N, 3]\nprint(sum(x))\n' >feed3.net
  run --separate-stderr "$NETRUN" run --feed x=train.csv feed3.net
  [ "$status" -eq 1 ]
  [ "$stderr" = "$msg" ]
  # without a header, the column's index; a cell of blanks is empty too
  printf '1,2,0\n4, ,1\n' >nohead.csv
  fails nohead.csv "nohead.csv:2:3: error: column 1 has a missing value
4, ,1
  ^"
}

@test "CSV: the columns train takes by default are named in a note" {
  printf 'a,b,c,label\n1,2,3,0\n4,5,6,1\n' >abc.csv
  printf 'input x : f32[B, 3]\ninput y : i64[B]\nparam W : [3, 2] = zeros()\nloss = mean(softmax_cross_entropy(x @ W, y))\ntrain {\n  data = "abc.csv"\n  epochs = 1\n}\n' >abc.net
  run --separate-stderr "$NETRUN" train abc.net
  [ "$status" -eq 0 ]
  [ "${stderr_lines[0]}" = "netrun: note: abc.csv: x gets columns a, b, c and y gets column label (columns = [...] and label = \"...\" in the train block choose others)" ]
  # chosen columns need no note
  printf 'input x : f32[B, 2]\ninput y : i64[B]\nparam W : [2, 2] = zeros()\nloss = mean(softmax_cross_entropy(x @ W, y))\ntrain {\n  data = "abc.csv"\n  columns = ["a", "c"]\n  epochs = 1\n}\n' >ac.net
  run --separate-stderr "$NETRUN" train ac.net
  [ "$status" -eq 0 ]
  [[ "$stderr" != *"note:"* ]]
}

@test "CSV: an empty file, a header alone, one column" {
  fails empty.csv "empty.csv:1:1: error: empty file: expected rows of numbers, after an optional header

^"
  fails header.csv "header.csv:1:1: error: a header but no rows of numbers
a,b,c
^~~~~"
  fails onecol.csv "onecol.csv:1:1: error: one column: a dataset needs columns of features and a label column
1
^"
}

@test "CSV: a label column that does not exist" {
  run "$NETRUN" data ok.csv --label lable
  [ "$status" -eq 1 ]
  [ "$output" = "ok.csv:1:1: error: no column named 'lable' (did you mean 'label'?)
a,b,c,label
^~~~~~~~~~~" ]
  run "$NETRUN" data noheader.csv --label 3
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: noheader.csv: no label column 3: the rows have 3 columns (0 to 2)" ]
  run "$NETRUN" data noheader.csv --label price
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: noheader.csv: no header row to find the label column 'price' in: give its index (0 to 2)" ]
}

@test "--feed reads CSV through the same reader: header, blank lines, CRLF" {
  printf 'x1,x2\r\n1,2\r\n\r\n3,4.5\r\n' >feed.csv
  printf 'input x : f32[N, 2]\nprint(sum(x))\n' >feed.net
  run "$NETRUN" run --feed x=feed.csv feed.net
  [ "$status" -eq 0 ]
  [ "$output" = "10.5" ]
  run "$NETRUN" run --feed x=word.csv feed.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "word.csv:3:3: error: column 'b' holds 'x', not a number: CSV columns are read as numbers (text is not encoded as categories)" ]
  run "$NETRUN" run --feed x=empty.csv feed.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "netrun: error: empty.csv holds no data rows" ]
}

# ---- the command line --------------------------------------------------------------------

@test "data: usage errors exit 2, data errors 1" {
  run "$NETRUN" data
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: data needs a SPEC: fashion-mnist, IMAGES:LABELS or a CSV file" ]
  run "$NETRUN" data fashion-mnist --split valid
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: data: --split needs train or test, not 'valid'" ]
  run "$NETRUN" data fashion-mnist --frobnicate
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: data: unknown option '--frobnicate'" ]
  run "$NETRUN" data ok.csv --head 0
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: data: --head needs a whole number of at least 1, not '0'" ]
  run "$NETRUN" data ok.csv --drop-last
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: data: --drop-last needs --batch" ]
  run "$NETRUN" data ok.csv noheader.csv
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: data takes one SPEC, got a second: 'noheader.csv'" ]
  run "$NETRUN" data ok.csv --split test
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: ok.csv: no split 'test': only fashion-mnist has splits" ]
  run "$NETRUN" data img.idx:lab.idx --label 0
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: img.idx:lab.idx: an IDX pair's label column is fixed ('labels'); only a CSV file's can be chosen" ]
  run "$NETRUN" data --help
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "usage: netrun data [OPTIONS] SPEC" ]
  [[ "$output" == *"  --fit FILE         check that batches fit FILE's inputs"* ]]
}
