#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# char_lm.bats — `netrun sample` (src/cli/sample.c): new text drawn a byte at a
# time from a next-byte model.  Models whose logits are known by hand check
# which position is read (the window slides past T), greedy decoding, and
# that the probabilities drawn from are softmax(logits / temperature); a
# model trained for a few steps samples the same bytes twice and on any
# thread count; examples/char_lm.net trains and samples; every error.

setup_file() {
  cd "$BATS_FILE_TMPDIR"
  # The next byte is the last one plus 1, for sure: logit 3 there, 0 at
  # the other 255 (p = e^3 / (e^3 + 255) = 0.073016).
  cat >succ.net <<'EOF'
input x : i64[B, 4]
logits = one_hot(x + 1, depth=256) * 3.0
EOF
  # Whatever the bytes: logits ln 4, ln 2, 0 at 'a', 'b', 'c', -inf elsewhere.
  cat >abc.net <<'EOF'
input x : i64[B, 4]
z = x * 0
logits = log(one_hot(z + 97, depth=256) * 4.0 + one_hot(z + 98, depth=256) * 2.0 + one_hot(z + 99, depth=256))
EOF
  # text_data.bats's next-byte model on "abcabc...", trained 3 epochs.
  for i in $(seq 400); do printf abc; done >abc.txt
  cp "$BATS_TEST_DIRNAME/text/abc_lm.net" lm.net
  "${NETRUN:-$BATS_TEST_DIRNAME/../netrun}" train lm.net --save lm.ckpt >/dev/null
}

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$BATS_TEST_DIRNAME/..
  cd "$BATS_FILE_TMPDIR"
}

same() { diff -u - <(printf '%s\n' "$output"); }

# The count of byte c in the text on stdin.
count() { tr -cd "$1" | wc -c; }

@test "sample: temperature 0 takes the likeliest byte at the last position, past the window of 4" {
  # "\na" is padded to 4 bytes; its last byte is position 1 ('a' -> 'b'),
  # then the window slides: the last 4 bytes, position 3.
  run "$NETRUN" sample succ.net --output logits --temperature 0 --prompt a --length 10
  [ "$status" -eq 0 ]
  [ "$output" = "abcdefghijk" ]
  # --probs: each draw, its probability and the likeliest bytes'.
  run "$NETRUN" sample succ.net --output logits --temperature 0 --prompt xy --length 3 --probs 2
  [ "$status" -eq 0 ]
  same <<'EOF'
sample 1, byte 1: 'z' 0.073016 | 'z' 0.073016 '\x00' 0.003635
sample 1, byte 2: '{' 0.073016 | '{' 0.073016 '\x00' 0.003635
sample 1, byte 3: '|' 0.073016 | '|' 0.073016 '\x00' 0.003635
xyz{|
EOF
}

@test "sample: the probabilities are softmax(logits / T): 4/7 2/7 1/7 at 1, 2:1.414:1 at 2, 16:4:1 at 0.5" {
  want() { printf "sample 1, byte 1: 'a' %s | 'a' %s 'b' %s 'c' %s\na\n" "$1" "$1" "$2" "$3"; }
  run "$NETRUN" sample abc.net --output logits --length 1 --probs 5
  [ "$output" = "$(want 0.571429 0.285714 0.142857)" ]
  run "$NETRUN" sample abc.net --output logits --length 1 --probs 5 --temperature 2
  [ "$output" = "$(want 0.453082 0.320377 0.226541)" ]
  run "$NETRUN" sample abc.net --output logits --length 1 --probs 5 --temperature 0.5
  [ "$output" = "$(want 0.761905 0.190476 0.047619)" ]
  # Temperature 0 shows softmax(logits) and always takes 'a'.
  run "$NETRUN" sample abc.net --output logits --length 1 --probs 3 --temperature 0
  [ "$output" = "$(want 0.571429 0.285714 0.142857)" ]
  run "$NETRUN" sample abc.net --output logits --length 50 --no-stop --temperature 0
  [ "$output" = "$(printf 'a%.0s' $(seq 50))" ]
}

@test "sample: 7000 draws match the probabilities (each count within 5 standard deviations)" {
  # At T = 1: 4000, 2000, 1000 expected (sd 41, 38, 29); at T = 2: 3172, 2243, 1586.
  within() { echo "$1 want $2 +- $3"; [ "$1" -ge $(($2 - $3)) ] && [ "$1" -le $(($2 + $3)) ]; }
  "$NETRUN" sample abc.net --output logits --length 7000 --no-stop --seed 3 >t1.txt
  [ "$(wc -c <t1.txt)" -eq 7001 ]
  within "$(count a <t1.txt)" 4000 207
  within "$(count b <t1.txt)" 2000 189
  within "$(count c <t1.txt)" 1000 146
  "$NETRUN" sample abc.net --output logits --length 7000 --no-stop --seed 3 --temperature 2 >t2.txt
  within "$(count a <t2.txt)" 3172 208
  within "$(count b <t2.txt)" 2243 195
  within "$(count c <t2.txt)" 1586 175
  # The same seed, the same bytes; another seed, others.
  cmp t1.txt <("$NETRUN" sample abc.net --output logits --length 7000 --no-stop --seed 3)
  ! cmp -s t1.txt <("$NETRUN" sample abc.net --output logits --length 7000 --no-stop --seed 4)
}

@test "sample: a model trained on abcabc... continues the prompt greedily; a seeded sample repeats bit for bit" {
  run "$NETRUN" sample lm.net --weights lm.ckpt --temperature 0 --prompt b --length 12
  [ "$status" -eq 0 ]
  [ "$output" = "bcabcabcabcab" ]
  run "$NETRUN" sample lm.net --weights lm.ckpt --temperature 0 --prompt ca --length 12 --count 3
  [ "$output" = "$(printf 'cabcabcabcabca\n%.0s' 1 2 3)" ]
  # Sampled: --count 6 rows of a batch; the same on 1 and 2 threads.
  OMP_NUM_THREADS=1 "$NETRUN" sample lm.net --weights lm.ckpt --temperature 3 --count 6 --length 20 --seed 9 >s1.txt
  OMP_NUM_THREADS=2 "$NETRUN" sample lm.net --weights lm.ckpt --temperature 3 --count 6 --length 20 --seed 9 >s2.txt
  cmp s1.txt s2.txt
  [ "$(wc -l <s1.txt)" -eq 6 ]
  ! cmp -s s1.txt <("$NETRUN" sample lm.net --weights lm.ckpt --temperature 3 --count 6 --length 20 --seed 10)
}

@test "sample: a sample ends at its first newline, which is not printed; --no-stop draws --length bytes" {
  # After '\t' (9) comes '\n' (10): the sample ends there.
  run "$NETRUN" sample succ.net --output logits --temperature 0 --prompt $'\x07' --length 10
  [ "$status" -eq 0 ]
  [ "$output" = $'\x07\x08\x09' ]
  run "$NETRUN" sample succ.net --output logits --temperature 0 --prompt $'\x07' --length 4 --no-stop
  [ "$output" = $'\x07\x08\x09\n\x0b' ]
}

@test "sample: the training input is fed false, unless --set gives it; --dtype f64 draws the same" {
  cat >mode.net <<'EOF'
input x : i64[B, 4]
input training : bool = true
logits = one_hot(x + 1, depth=256) * 3.0
if training {
  logits = logits * 0.0
}
EOF
  run "$NETRUN" sample mode.net --output logits --temperature 0 --prompt a --length 3
  [ "$status" -eq 0 ]
  [ "$output" = "abcd" ]
  # All 256 logits equal: the first of them, byte 0.
  [ "$("$NETRUN" sample mode.net --output logits --temperature 0 --prompt a --length 3 --set training=true | od -An -c | tr -s ' ')" = " a \0 \0 \0 \n" ]
  run "$NETRUN" sample abc.net --output logits --length 1 --probs 3 --temperature 2 --dtype f64
  [ "$output" = "sample 1, byte 1: 'a' 0.453082 | 'a' 0.453082 'b' 0.320377 'c' 0.226541"$'\n'"a" ]
  cmp <("$NETRUN" sample abc.net --output logits --length 300 --no-stop --seed 5 --dtype f64) \
      <("$NETRUN" sample abc.net --output logits --length 300 --no-stop --seed 5)
}

@test "sample: examples/char_lm.net trains a few steps on the word list and samples words" {
  [ -r /usr/share/dict/words ] || skip "/usr/share/dict/words is missing (make deps installs wamerican)"
  run --separate-stderr "$NETRUN" train "$ROOT/examples/char_lm.net" --limit 320 --epochs 1 --save charlm.ckpt
  [ "$status" -eq 0 ]
  [ "${stderr_lines[0]}" = "netrun: note: --epochs 1 overrides the script's epochs" ]
  [[ "${stderr_lines[1]}" == *"char_lm.net: 320 examples (320 to evaluate), 10 steps of 32 per epoch, adam lr 0.003, 1 epoch" ]]
  [[ "${lines[0]}" =~ "bits/char) acc "[0-9.]+" | test loss "[0-9.]+" ("[0-9.]+" bits/char)" ]]
  run "$NETRUN" sample "$ROOT/examples/char_lm.net" --weights charlm.ckpt --count 5 --length 24 --seed 2
  [ "$status" -eq 0 ]
  [ "$(printf '%s\n' "$output" | wc -l)" -eq 5 ]   # a line may be empty: a newline drawn first
  [ "$(printf '%s\n' "$output" | LC_ALL=C awk 'length($0) > 24' | wc -l)" -eq 0 ]
  [ "$output" = "$("$NETRUN" sample "$ROOT/examples/char_lm.net" --weights charlm.ckpt --count 5 --length 24 --seed 2)" ]
}

@test "sample: a model without an i64[B, T] text input is refused at the input" {
  printf 'input x : f32[B, 8]\nlogits = one_hot(cast(x, i64), depth=256)\n' >f32.net
  run "$NETRUN" sample f32.net --output logits
  [ "$status" -eq 1 ]
  same <<'EOF'
f32.net:1:1: error: sample feeds input 'x' the text's bytes, so it must be i64[B, T] with T a size; it is f32[B, 8]
input x : f32[B, 8]
^~~~~~~~~~~~~~~~~~~
EOF
  printf 'input x : i64[B, T]\nlogits = one_hot(x, depth=256)\n' >sym.net
  run "$NETRUN" sample sym.net --output logits
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "sym.net:1:1: error: sample feeds input 'x' the text's bytes, so it must be i64[B, T] with T a size; it is i64[B, T]" ]
  # A fixed batch of 1 takes one sample at a time.
  printf 'input x : i64[1, 4]\nlogits = one_hot(x + 1, depth=256) * 3.0\n' >one.net
  run "$NETRUN" sample one.net --output logits --prompt a --temperature 0 --length 5
  [ "$output" = "abcdef" ]
  run "$NETRUN" sample one.net --output logits --count 2
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "one.net:1:1: error: sample: 'x' is declared i64[1, 4] but the value has shape [2, 4]" ]
  printf 'logits = ones([1, 4, 256])\n' >none.net
  run "$NETRUN" sample none.net --output logits
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: none.net has no input for the text: sample feeds an input i64[B, T] its bytes" ]
}

@test "sample: logits that are not [B, T, V <= 256], or not finite, are errors" {
  printf 'input x : i64[B, 4]\nlogits = one_hot(x, depth=256)[:, 3]\n' >last.net
  run "$NETRUN" sample last.net --output logits
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: 'logits' is f32[1, 256], but sample needs logits [1, 4, V] of V <= 256 byte values: one row per sample, one per position of x" ]
  printf 'input x : i64[B, 4]\nlogits = one_hot(x, depth=300)\n' >wide.net
  run "$NETRUN" sample wide.net --output logits --count 2
  [ "$output" = "netrun: error: 'logits' is f32[2, 4, 300], but sample needs logits [2, 4, V] of V <= 256 byte values: one row per sample, one per position of x" ]
  printf 'input x : i64[B, 4]\nlogits = log(one_hot(x, depth=256) * 0.0)\n' >inf.net
  run "$NETRUN" sample inf.net --output logits --prompt ab
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: the logits 'logits' of sample 1 at byte 1 are not finite (NaN, +inf, or all -inf)" ]
  printf 'input x : i64[B, 4]\nlogits = sqrt(one_hot(x, depth=256) - 1.0)\n' >nan.net
  run "$NETRUN" sample nan.net --output logits
  [ "$output" = "netrun: error: the logits 'logits' of sample 1 at byte 1 are not finite (NaN, +inf, or all -inf)" ]
}

@test "sample: which logits, the text input given by --set, weights of another model" {
  run "$NETRUN" sample succ.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: sample needs the logits: --output NAME (or metric = NAME in the train block)" ]
  run "$NETRUN" sample succ.net --output nope
  [ "$output" = "netrun: error: the script has no value named 'nope'" ]
  run "$NETRUN" sample succ.net --output logits --set x=[[1,2,3,4]]
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: --set x=[[1,2,3,4]]: sample feeds 'x' itself (the text's bytes)" ]
  run "$NETRUN" sample succ.net --output logits --weights lm.ckpt
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" == "netrun: error: lm.ckpt"* ]]
}

@test "sample: option values are checked" {
  for o in "--temperature -1:a finite number of at least 0" "--temperature inf:a finite number of at least 0" \
           "--count 0:a whole number from 1 to 4096" "--count 4097:a whole number from 1 to 4096" \
           "--length 0:a whole number from 1 to 1000000" "--probs 257:a whole number from 1 to 256"; do
    run "$NETRUN" sample succ.net ${o%%:*}
    [ "$status" -eq 2 ]
    v=${o%%:*}; v=${v#* }
    [ "${lines[0]}" = "netrun: ${o%% *} needs ${o#*:}, not '$v'" ]
  done
  run "$NETRUN" sample succ.net --weights-partial
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --weights-partial needs --weights PATH" ]
}
