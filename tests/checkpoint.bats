#!/usr/bin/env bats
# checkpoint.bats — checkpoint files (src/io/checkpoint.h): the format, the
# `netrun checkpoint` verb, hostile files, and atomic writes.
#
# There is no trainer to write checkpoints yet, so tests/ckpt/mkckpt.c — a
# small program over the checkpoint API, built here with the sanitizers when
# the compiler has them — writes them with known contents and damages them.

setup_file() {
  export MKCKPT="$BATS_FILE_TMPDIR/mkckpt"
  local srcs=(tests/ckpt/mkckpt.c src/io/checkpoint.c src/cli/option.c src/base/diag.c src/base/file.c src/base/mem.c src/ir/tensor.c src/ir/program.c)
  local flags=(-std=c11 -D_GNU_SOURCE -g -Isrc)
  cd "$BATS_TEST_DIRNAME/.."
  "${CC:-cc}" "${flags[@]}" -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all \
      -o "$MKCKPT" "${srcs[@]}" -lz -lm 2>/dev/null ||
    "${CC:-cc}" "${flags[@]}" -O2 -o "$MKCKPT" "${srcs[@]}" -lz -lm
}

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
}

load fs_helpers

teardown() {
  cleanup_fs   # mounts and folders the atomicity tests made
}

# poke FILE OFFSET HEX...: overwrite bytes of FILE in place.
poke() {
  local f=$1 off=$2 s="" b
  shift 2
  for b in "$@"; do s+="\\x$b"; done
  printf "$s" | dd of="$f" bs=1 seek="$off" conv=notrunc status=none
}

# bytes FILE OFFSET COUNT: those bytes in hex, e.g. 4e455452.
bytes() { od -An -v -tx1 -j "$2" -N "$3" "$1" | tr -d ' \n'; }

# flip FILE OFFSET: invert every bit of one byte.
flip() { poke "$1" "$2" "$(printf '%02x' $((0x$(bytes "$1" "$2" 1) ^ 0xff)))"; }

# A tiny checkpoint; its layout, byte by byte (the format in checkpoint.h):
#     0 "NETRUNCK"   8 version 1   12 total length 221
#    20 "HEAD" 24 length 64   32 hash, epoch, step, samples, rng[4]
#    96 "SETS" 100 length 17  108 count 1: 112 "lr" (len, bytes) 118 "0.1"
#   125 "TENS" 129 length 68  137 count 2
#   141 name "W" (len 141, byte 145)  146 dtype f32  147 rank 2
#   148 dims 2, 3  164 data 0..5 (24 bytes)
#   188 name "m" (len 188, byte 192)  193 dtype bool 194 rank 1
#   195 dim 2  203 data 1, 0
#   205 "TAIL" 209 total length 221  217 CRC-32
tiny() { "$MKCKPT" tiny t.ckpt; }

# ---- round trip ----------------------------------------------------------------

@test "netrun checkpoint prints exactly what was written" {
  "$MKCKPT" write k.ckpt
  run "$NETRUN" checkpoint k.ckpt
  [ "$status" -eq 0 ]
  diff -u - <(printf '%s\n' "$output") <<'EOF'
checkpoint: k.ckpt
format version: 1
program hash: 4aaf3e8a42a03714
epoch: 3
step: 1407
samples seen: 180000
rng state: bdd732262feb6e95 28efe333b266f103 47526757130f9f52 581ce1ff0e4ae394
settings: 8
  optimizer = momentum
  lr = 0.1
  momentum = 0.9
  batch = 128
  epochs = 5
  seed = 0
  note =
  comment = résumé = run 7, "quoted"
tensors: 11 (50 elements, 203 bytes)
  W1                      f32   [3, 4]                    mean 0.125  std 0.863013  min -1.25  max 1.5
  b1                      f32   [4]                       mean 0  std 0  min 0  max 0
  W1@momentum             f32   [3, 4]                    mean 0.055  std 0.0345205  min 0  max 0.11
  @beta1_pow              f32   []                        value 0.728999972
  labels                  i64   [5]                       min -3  max 1099511627776
  @count                  i64   []                        value -12
  mask                    bool  [2, 3]                    true 4 of 6
  empty                   f32   [0, 3]                    empty
  odd                     f32   [4]                       mean 2  std 1  min 1  max 3  2 non-finite
  deep                    f32   [1, 2, 1, 1, 1, 1, 1, 2]  mean 2.5  std 1.11803  min 1  max 4
  name with spaces/and é  bool  []                        value true
EOF
}

@test "the API reads back every field, bit for bit" {
  "$MKCKPT" write k.ckpt
  run "$MKCKPT" verify k.ckpt
  [ "$status" -eq 0 ]
  [ "$output" = same ]
}

@test "the API: settings and tensors replace by name; writes the format cannot hold are refused" {
  run "$MKCKPT" api "$PWD"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "$PWD/api.ckpt: cannot save checkpoint: setting key 'bad key' has a character other than [A-Za-z0-9_.@-]" ]
  [ "${lines[1]}" = "$PWD/api.ckpt: cannot save checkpoint: the value of setting 'k' has a control character" ]
  [ "${lines[2]}" = "$PWD/api.ckpt: cannot save checkpoint: tensor name '' is empty" ]
  [[ "${lines[3]}" == *": cannot save checkpoint: tensor name 'xxxx"*"' is too long" ]]
  [ "${lines[4]}" = "$PWD/no/such/folder/api.ckpt: cannot save checkpoint: cannot create a temporary file in $PWD/no/such/folder: No such file or directory" ]
  [ "${lines[5]}" = "$PWD: cannot save checkpoint: cannot write: Is a directory" ]
  [ "${lines[6]}" = "api ok" ]
  [ -z "$(ls)" ]       # no file, no temporary file left behind
}

@test "the program hash is FNV-1a, 64 bits" {
  [ "$("$MKCKPT" hash '')" = cbf29ce484222325 ]
  [ "$("$MKCKPT" hash a)" = af63dc4c8601ec8c ]
  [ "$("$MKCKPT" hash foobar)" = 85944171f73967e8 ]
}

@test "the bytes on disk follow the documented layout" {
  tiny
  [ "$(stat -c %s t.ckpt)" -eq 221 ]
  [ "$(bytes t.ckpt 0 8)" = "$(printf NETRUNCK | od -An -tx1 | tr -d ' \n')" ]
  [ "$(bytes t.ckpt 8 4)" = 01000000 ]
  [ "$(bytes t.ckpt 12 8)" = dd00000000000000 ]
  [ "$(bytes t.ckpt 20 12)" = 484541444000000000000000 ]        # HEAD, 64
  [ "$(bytes t.ckpt 32 8)" = efcdab8967452301 ]                 # the hash, little-endian
  [ "$(bytes t.ckpt 96 12)" = 534554531100000000000000 ]        # SETS, 17
  [ "$(bytes t.ckpt 108 17)" = 0100000002000000"6c72"03000000"302e31" ]
  [ "$(bytes t.ckpt 125 12)" = 54454e534400000000000000 ]        # TENS, 68
  [ "$(bytes t.ckpt 141 23)" = 01000000"57"0002"0200000000000000""0300000000000000" ]
  [ "$(bytes t.ckpt 164 8)" = 000000000000803f ]                 # 0.0f, 1.0f
  [ "$(bytes t.ckpt 188 17)" = 01000000"6d"0201"0200000000000000""0100" ]
  [ "$(bytes t.ckpt 205 12)" = 5441494cdd00000000000000 ]        # TAIL, 221
  # The CRC-32 is zlib's over bytes 0..216: recomputing it changes nothing.
  cp t.ckpt again.ckpt
  "$MKCKPT" fixcrc again.ckpt
  cmp t.ckpt again.ckpt
}

# ---- damaged files ---------------------------------------------------------------

@test "a flipped byte is a checksum error, wherever it is after the version" {
  "$MKCKPT" write k.ckpt
  size=$(stat -c %s k.ckpt)
  for at in 16 40 200 $((size / 2)) $((size - 20)) $((size - 10)) $((size - 1)); do
    cp k.ckpt f.ckpt
    flip f.ckpt "$at"
    run "$NETRUN" checkpoint f.ckpt
    echo "byte $at: $output"
    [ "$status" -eq 1 ]
    [[ "$output" == "netrun: error: f.ckpt: corrupt (checksum mismatch: stored "????????", computed "????????")" ]]
  done
}

@test "every single-byte flip and every truncation is refused, none crashes" {
  "$MKCKPT" write k.ckpt
  size=$(stat -c %s k.ckpt)
  run "$MKCKPT" damage k.ckpt
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "flip: 8 not a netrun checkpoint, 4 written by a newer netrun, $((size - 12)) corrupt" ]
  [ "${lines[1]}" = "cut: 1 not a netrun checkpoint, $((size - 1)) truncated" ]
}

@test "a truncated checkpoint says how long it is and should be" {
  tiny
  for n in 5 10 16; do
    head -c "$n" t.ckpt > cut.ckpt
    run "$NETRUN" checkpoint cut.ckpt
    [ "$status" -eq 1 ]
    [ "$output" = "netrun: error: cut.ckpt: truncated ($n bytes, expected at least 144)" ]
  done
  # inside the header, the settings, a tensor's shape and data, the trailer
  for n in 20 40 110 150 170 204 215 220; do
    head -c "$n" t.ckpt > cut.ckpt
    run "$NETRUN" checkpoint cut.ckpt
    [ "$status" -eq 1 ]
    [ "$output" = "netrun: error: cut.ckpt: truncated ($n bytes, expected 221)" ]
  done
}

@test "an empty file, another file, a folder, a missing file" {
  : > empty.ckpt
  run "$NETRUN" checkpoint empty.ckpt
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: empty.ckpt: not a netrun checkpoint (empty file)" ]
  printf 'x = 1\n' > model.net
  run "$NETRUN" checkpoint model.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: model.net: not a netrun checkpoint (bad magic)" ]
  printf 'NETRUN' > short.ckpt
  run "$NETRUN" checkpoint short.ckpt
  [ "$output" = "netrun: error: short.ckpt: truncated (6 bytes, expected at least 144)" ]
  tiny
  poke t.ckpt 7 6a                    # NETRUNCj
  run "$NETRUN" checkpoint t.ckpt
  [ "$output" = "netrun: error: t.ckpt: not a netrun checkpoint (bad magic)" ]
  mkdir folder
  run "$NETRUN" checkpoint folder
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: folder: is a directory, not a checkpoint" ]
  run "$NETRUN" checkpoint missing.ckpt
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: missing.ckpt: cannot read: No such file or directory" ]
}

@test "a checkpoint from a newer netrun is refused by its version, before anything else" {
  tiny
  poke t.ckpt 8 02 00 00 00
  run "$NETRUN" checkpoint t.ckpt
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: t.ckpt: written by a newer netrun (format version 2; this netrun reads up to 1)" ]
  head -c 30 t.ckpt > newer-short.ckpt          # whatever follows may differ
  run "$NETRUN" checkpoint newer-short.ckpt
  [ "$output" = "netrun: error: newer-short.ckpt: written by a newer netrun (format version 2; this netrun reads up to 1)" ]
  poke t.ckpt 8 00 00 00 00
  run "$NETRUN" checkpoint t.ckpt
  [ "$output" = "netrun: error: t.ckpt: malformed preamble: format version 0" ]
}

@test "bytes after the end, or a damaged length field, are corruption" {
  tiny
  cp t.ckpt long.ckpt
  printf 'junk' >> long.ckpt
  run "$NETRUN" checkpoint long.ckpt
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: long.ckpt: corrupt (225 bytes, expected 221: data after the end)" ]
  poke t.ckpt 12 ff                   # the preamble says 255 bytes; the trailer 221
  run "$NETRUN" checkpoint t.ckpt
  [[ "$output" == "netrun: error: t.ckpt: corrupt (checksum mismatch"* ]]
}

# malformed CASE OFFSET HEX... EXPECTED: poke a valid tiny checkpoint, repair
# its CRC, and expect the message.
malformed() {
  local msg=${*: -1}
  tiny
  poke t.ckpt "${@:1:$#-1}"
  "$MKCKPT" fixcrc t.ckpt
  run "$NETRUN" checkpoint t.ckpt
  echo "got:  $output"
  echo "want: netrun: error: t.ckpt: $msg"
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: t.ckpt: $msg" ]
}

@test "a malformed section is named, with the item and the byte" {
  malformed 147 09 "malformed tensors section: tensor 1 of 2 ('W'): rank 9 (at most 8) (at byte 148)"
  malformed 146 07 "malformed tensors section: tensor 1 of 2 ('W'): unknown dtype code 7 (at byte 148)"
  malformed 148 ff ff ff ff ff ff ff ff \
    "malformed tensors section: tensor 1 of 2 ('W'): dimension 0 is 18446744073709551615 (at byte 156)"
  malformed 148 ff ff ff ff ff ff ff 7f \
    "malformed tensors section: tensor 1 of 2 ('W'): shape [9223372036854775807, 3] f32 needs more data than the 41 bytes that remain (at byte 164)"
  malformed 156 00 00 00 00 00 01 00 00 \
    "malformed tensors section: tensor 1 of 2 ('W'): shape [2, 1099511627776] f32 needs more data than the 41 bytes that remain (at byte 164)"
  malformed 203 02 "malformed tensors section: tensor 2 of 2 ('m'): bool element 0 is 2 (not 0 or 1) (at byte 205)"
  malformed 192 57 "malformed tensors section: tensor 'W' appears twice (at byte 205)"
  malformed 141 00 01 00 00 "malformed tensors section: tensor 1 of 2: the name is 256 bytes long (at most 255) (at byte 145)"
  malformed 141 00 00 00 00 "malformed tensors section: tensor 1 of 2: the name is empty (at byte 145)"
  malformed 145 0a "malformed tensors section: tensor 1 of 2: the name has a control character (at byte 146)"
  malformed 137 ff ff ff ff "malformed tensors section: 4294967295 tensors (at most 65536) (at byte 141)"
  malformed 137 09 00 00 00 "malformed tensors section: 9 tensors need at least 72 bytes, 64 remain (at byte 141)"
  malformed 137 01 00 00 00 "malformed tensors section: 17 stray bytes at its end (at byte 188)"
  malformed 108 ff ff ff ff "malformed settings section: 4294967295 settings (at most 4096) (at byte 112)"
  malformed 108 03 00 00 00 "malformed settings section: 3 settings need at least 24 bytes, 13 remain (at byte 112)"
  malformed 116 20 "malformed settings section: setting 1 of 1: the key has a character other than [A-Za-z0-9_.@-] (at byte 118)"
  malformed 122 1b "malformed settings section: setting 1 of 1 ('lr'): the value has a control character (at byte 125)"
  malformed 118 ff ff ff ff "malformed settings section: setting 1 of 1 ('lr'): the value is 4294967295 bytes long (at most 4096) (at byte 122)"
  malformed 118 09 00 00 00 "malformed settings section: setting 1 of 1 ('lr'): the value needs 9 bytes, 3 remain (at byte 122)"
  malformed 24 3f "malformed header section: rng state needs 8 bytes, 7 remain (at byte 88)"
  malformed 129 45 "malformed file: section 'TENS' at byte 125 is 69 bytes long, 68 remain"
  malformed 129 43 "malformed tensors section: tensor 2 of 2 ('m'): shape [2] bool needs more data than the 1 bytes that remain (at byte 203)"
  malformed 96 58 58 58 58 "malformed file: section 'TENS' at byte 125 where 'SETS' was expected"
  malformed 125 53 45 54 53 "malformed file: section 'SETS' at byte 125 where 'TENS' was expected"
  malformed 125 58 58 58 58 "malformed file: no tensors section"
}

@test "random damage, through netrun itself, is an error or a read, never a crash" {
  "$MKCKPT" write k.ckpt
  read_ok=0
  for seed in $(seq 1 60); do
    "$MKCKPT" mutate k.ckpt m.ckpt "$seed"
    run "$NETRUN" checkpoint m.ckpt
    [ "$status" -le 1 ] || { echo "seed $seed: status $status: $output"; false; }
    [[ "$output" != *Sanitizer* && "$output" != *"runtime error"* ]] || { echo "seed $seed: $output"; false; }
    if [ "$status" -eq 1 ]; then
      [ "${#lines[@]}" -eq 1 ] && [[ "$output" == "netrun: error: m.ckpt: "* ]] || { echo "seed $seed: $output"; false; }
    else
      read_ok=$((read_ok + 1))
    fi
  done
  echo "read: $read_ok of 60"
}

@test "the reader survives 20000 random mutations in memory" {
  "$MKCKPT" write k.ckpt
  run "$MKCKPT" fuzz k.ckpt 20000 7
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == "fuzz: "*"malformed tensors section"* ]]
}

@test "usage errors" {
  run "$NETRUN" checkpoint
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: checkpoint needs a PATH" ]
  run "$NETRUN" checkpoint a.ckpt b.ckpt
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: checkpoint takes one PATH" ]
  run "$NETRUN" checkpoint --frobnicate
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: checkpoint: unknown option '--frobnicate'" ]
}

# ---- atomic writes ---------------------------------------------------------------

@test "a rewrite keeps the old file's permissions; a new file gets the umask's" {
  "$MKCKPT" write k.ckpt
  [ "$(stat -c %a k.ckpt)" = "$(printf '%o' $((0666 & ~$(umask))))" ]
  chmod 640 k.ckpt
  "$MKCKPT" tiny k.ckpt
  [ "$(stat -c %a k.ckpt)" = 640 ]
  [ "$(stat -c %s k.ckpt)" -eq 221 ]
}

@test "a write into a read-only file system fails clearly and leaves the old checkpoint" {
  mkdir ro
  mount -t tmpfs -o size=1m tmpfs ro 2>/dev/null || skip "cannot mount a tmpfs here (needs root)"
  "$MKCKPT" write ro/run.ckpt
  cp ro/run.ckpt before.ckpt
  mount -o remount,ro ro
  run "$MKCKPT" big ro/run.ckpt 0.1
  [ "$status" -eq 1 ]
  [ "$output" = "mkckpt: ro/run.ckpt: cannot save checkpoint: cannot create a temporary file in ro: Read-only file system" ]
  cmp before.ckpt ro/run.ckpt
  [ "$(ls ro)" = run.ckpt ]
}

@test "a write into a folder without write permission fails clearly and leaves the old checkpoint" {
  # As root the writer runs as nobody, from a folder nobody can reach.
  shared_dir
  cp "$MKCKPT" "$SHARED_DIR/mkckpt"
  dir=$SHARED_DIR/locked
  mkdir "$dir"
  "$MKCKPT" write "$dir/run.ckpt"
  chmod 644 "$dir/run.ckpt"
  cp "$dir/run.ckpt" before.ckpt
  chmod 555 "$dir"
  as_nobody
  run "${AS[@]}" "$SHARED_DIR/mkckpt" big "$dir/run.ckpt" 0.1
  [ "$status" -eq 1 ]
  [ "$output" = "mkckpt: $dir/run.ckpt: cannot save checkpoint: cannot create a temporary file in $dir: Permission denied" ]
  cmp before.ckpt "$dir/run.ckpt"
  [ "$(ls "$dir")" = run.ckpt ]
}

@test "a write into a full file system fails clearly, leaves the old checkpoint and no temporary file" {
  mkdir full
  mount -t tmpfs -o size=64k tmpfs full 2>/dev/null || skip "cannot mount a tmpfs here (needs root)"
  "$MKCKPT" write full/run.ckpt
  cp full/run.ckpt before.ckpt
  run "$MKCKPT" big full/run.ckpt 1            # 1 MiB into 64 KiB
  [ "$status" -eq 1 ]
  [ "$output" = "mkckpt: full/run.ckpt: cannot save checkpoint: cannot write: No space left on device" ]
  cmp before.ckpt full/run.ckpt
  [ "$(ls full)" = run.ckpt ]
  # and the space is back: a small checkpoint still fits
  "$MKCKPT" tiny full/run.ckpt
  [ "$(stat -c %s full/run.ckpt)" -eq 221 ]
}

@test "a writer killed with SIGKILL never leaves a partial checkpoint at PATH" {
  "$MKCKPT" big run.ckpt 8 0
  size=$(stat -c %s run.ckpt)
  midwrite=0
  for round in 1 2 3 4 5 6 7 8; do
    "$MKCKPT" loop run.ckpt 8 3>&- &
    pid=$!
    sleep "0.$((RANDOM % 4 + 2))"
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    run "$NETRUN" checkpoint run.ckpt
    [ "$status" -eq 0 ] || { echo "round $round: $output"; false; }
    [ "$(stat -c %s run.ckpt)" -eq "$size" ]
    for t in run.ckpt.tmp.*; do
      [ -e "$t" ] || continue
      midwrite=$((midwrite + 1))
      [ "$(stat -c %s "$t")" -le "$size" ]
      rm -f "$t"
    done
  done
  echo "killed mid-write in $midwrite of 8 rounds"
  [ "$midwrite" -ge 1 ]
  # and the writer got through whole writes between the kills
  run "$NETRUN" checkpoint run.ckpt
  [ "${lines[3]}" != "epoch: 0" ]
}
