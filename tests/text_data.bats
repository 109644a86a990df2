#!/usr/bin/env bats
# text_data.bats — a text file as a dataset of byte windows (text.h): the
# windows' bytes, the held-out tail's size, training a next-byte model on
# [B, T] targets (cross-entropy and accuracy over [B, T, V] logits), bits
# per character in the epoch line, and every error, word for word.

setup_file() {
  cd "$BATS_FILE_TMPDIR"
  printf 'the quick brown fox jumps over the lazy dog\n' >fox.txt          # 44 bytes
  for i in $(seq 0 98); do printf "\\$(printf %03o $((97 + i % 26)))"; done >hundred.txt
  printf '\n' >>hundred.txt                                               # 100 bytes
  printf 'abcd' >four.txt
  printf 'ab' >ab.txt
  for i in $(seq 400); do printf abc; done >abc.txt                       # 1200 bytes
  cp "$BATS_TEST_DIRNAME/text/abc_lm.net" lm.net                         # a next-byte model
  sed 's/input x : i64/input x : f32/; s/embedding_layer(x,/embedding_layer(cast(x, i64),/' lm.net >f32.net
  sed 's/context   = 8/context   = 0/' lm.net >c0.net
  sed 's/abc.txt/ab.txt/' lm.net >short.net
  sed 's/context   = 8/context   = 8\n  label_column = "y"/' lm.net >label.net
}

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_FILE_TMPDIR"
}

same() { diff -u - <(printf '%s\n' "$output"); }

@test "text: the train split's windows at offsets 0, T, 2T, y the next bytes, shuffled by seed" {
  # 44 bytes: the last 4 are held out; 40 make (40 - 1) / 4 = 9 windows.
  # Window 7 is bytes 28..31 "er t", window 0 "the ", window 8 "he l".
  run "$NETRUN" data fox.txt --context 4 --split train --head 3 --shuffle --seed 7
  [ "$status" -eq 0 ]
  same <<'EOF'
dataset fox.txt
split train
file fox.txt
examples 9
column x i64 [9, 4] from bytes
column y i64 [9, 4] from bytes
head 3 shuffled with seed 7
index
[7 0 8]
x
[[101 114  32 116]
 [116 104 101  32]
 [104 101  32 108]]
y
[[114  32 116 104]
 [104 101  32 113]
 [101  32 108  97]]
EOF
}

@test "text: the test split is the last tenth: 100 bytes give 22 train windows of 4 and 2 test ones from byte 90" {
  run "$NETRUN" data hundred.txt --context 4 --split train
  [ "$status" -eq 0 ]
  [[ "$output" == *$'examples 22\n'* ]]
  run "$NETRUN" data hundred.txt --context 4 --split test --head 2
  [ "$status" -eq 0 ]
  same <<'EOF'
dataset hundred.txt
split test
file hundred.txt
examples 2
column x i64 [2, 4] from bytes
column y i64 [2, 4] from bytes
head 2
index
[0 1]
x
[[109 110 111 112]
 [113 114 115 116]]
y
[[110 111 112 113]
 [114 115 116 117]]
EOF
}

@test "text: without a split the whole file; 4 bytes make one window of 3, not one of 4" {
  run "$NETRUN" data four.txt --context 3 --head 1
  [ "$status" -eq 0 ]
  [[ "$output" == *$'examples 1\n'* ]]
  [[ "$output" == *$'x\n[[97 98 99]]\ny\n[[ 98  99 100]]'* ]]
  run "$NETRUN" data four.txt --context 4
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: four.txt: 4 bytes, but context = 4 needs at least 5 (a window and the byte after it)" ]
}

@test "text: --context is checked" {
  run "$NETRUN" data four.txt --context 0
  [ "$status" -eq 2 ]
  [[ "$output" == *"netrun: data: --context needs a whole number of at least 1"* ]]
}

@test "text: a next-byte model on [B, T] targets learns abcabc...: loss to 0, accuracy 1, bits per char" {
  run "$NETRUN" train lm.net
  [ "$status" -eq 0 ]
  # 1200 bytes: 1080 train ((1080 - 1) / 8 = 134 windows), 120 held out (14).
  [[ "${lines[0]}" == "training lm.net: 134 examples (14 to evaluate), 9 steps of 16 per epoch, adam lr 0.05, 3 epochs" ]]
  # 2.2202 nats = 2.2202 / ln 2 = 3.2030 bits; the first epoch's mean
  # accuracy is over its 134 * 8 predictions, so below 1.
  [[ "${lines[1]}" == "epoch 1/3: train loss 2.2202 (3.2030 bits/char) acc 0.8414 | test loss 0.0060 (0.0087 bits/char) acc 1.0000 |"* ]]
  [[ "${lines[3]}" == "epoch 3/3: train loss 0.0000 (0.0000 bits/char) acc 1.0000 | test loss 0.0000 (0.0000 bits/char) acc 1.0000 |"* ]]
}

@test "text: softmax_cross_entropy of [2, 3, 4] logits and [2, 3] labels matches finite differences" {
  printf 'input logits : f32[2, 3, 4]\ninput y : i64[2, 3]\nloss = mean(softmax_cross_entropy(logits, y))\n' >ce3.net
  run "$NETRUN" gradcheck ce3.net --wrt logits \
    --set 'logits=[[[0.1,0.2,0.3,0.4],[1,2,3,4],[-1,0,1,2]],[[0.5,0.1,0.2,0.3],[1,0,0,0],[2,2,1,0]]]' \
    --set 'y=[[0,1,2],[3,0,1]]'
  [ "$status" -eq 0 ]
  [[ "$output" == *"all gradients match finite differences"* ]]
}

@test "text: errors: an f32 input, context 0, a split too short, a label column" {
  run "$NETRUN" train f32.net
  [ "$status" -eq 1 ]
  same <<'EOF'
f32.net:2:1: error: input 'x' is f32, but text data (context = 8) feeds byte values: declare it i64
input x : f32[B, 8]
^~~~~~~~~~~~~~~~~~~
EOF
  run "$NETRUN" train c0.net
  [ "$status" -eq 1 ]
  [[ "$output" == *"c0.net:8:3: error: context must be at least 1, got 0"* ]]
  run "$NETRUN" train short.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: ab.txt: the train split (all but the last tenth) has 2 bytes, but context = 8 needs at least 9 (a window and the byte after it)" ]
  run "$NETRUN" train label.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: abc.txt: text data has no label column: y is the next byte" ]
}
