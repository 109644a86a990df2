#!/usr/bin/env bats
# train_keys.bats — the train block's keys are one table (src/train/train.c
# keys[]: kind, field, default, range, override, meaning): netrun-lang(5)
# lists exactly its keys with its defaults (tests/tools/train_keys.py), and
# the range errors come from its rows.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  cd "$BATS_TEST_TMPDIR" || return 1
}

@test "netrun-lang(5) lists every key of the table, and no other, with the table's defaults" {
  run python3 "$ROOT/tests/tools/train_keys.py" "$ROOT"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "${lines[-1]}" =~ ^[0-9]+" keys checked"$ ]]
  # a key missing from the page, one the table lacks, a default that differs
  mkdir -p fake/src/train fake/man
  cp "$ROOT/src/train/train.c" fake/src/train/
  sed -e '/^\.BR log_every /s/default 100/default 10/' -e 's/^\.BR overlap /.BR overlapping /' \
    "$ROOT/man/netrun-lang.5" > fake/man/netrun-lang.5
  sed -i 's/{"warmup", K_NUMBER/{"warmup2", K_NUMBER/' fake/src/train/train.c
  run python3 "$ROOT/tests/tools/train_keys.py" fake
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "key overlap is in the table but not in netrun-lang(5)" ]
  [ "${lines[1]}" = "key warmup2 is in the table but not in netrun-lang(5)" ]
  [ "${lines[2]}" = "key overlapping is in netrun-lang(5) but not in the table" ]
  [ "${lines[3]}" = "key warmup is in netrun-lang(5) but not in the table" ]
  [ "${lines[4]}" = "key log_every: netrun-lang(5) says default 10, the table 100" ]
}

# block KEY = VALUE: a script whose train block sets it; its errors.
block() {
  printf 'input x : f32[B, 1]\nparam w : [1, 1] = zeros()\nloss = mean(x @ w)\ntrain {\n  data = "d.csv"\n  %s\n}\n' "$1" > k.net
  run "$NETRUN" dump --train k.net
}

@test "a key's range comes from its table row, the error at the setting" {
  block "epochs = 0"
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "k.net:6:3: error: epochs must be at least 1, got 0" ]
  block "lr = 0"
  [ "${lines[0]}" = "k.net:6:3: error: the learning rate must be positive, got 0" ]
  block "momentum = 1"
  [ "${lines[0]}" = "k.net:6:3: error: momentum must be in [0, 1), got 1" ]
  block "crop_pad = 2000000"
  [ "${lines[0]}" = "k.net:6:3: error: crop_pad must be in [0, 1048576], got 2000000" ]
  block "bucket_mb = 0"
  [ "${lines[0]}" = "k.net:6:3: error: bucket_mb must be in (0, 1048576], got 0" ]
  block "val_split = 1"
  [ "${lines[0]}" = "k.net:6:3: error: val_split must be in (0, 1), got 1" ]
  block "warmup = -1"
  [ "${lines[0]}" = "k.net:6:3: error: warmup must not be negative, got -1" ]
  block "accumulate = 0"
  [ "${lines[0]}" = "k.net:6:3: error: accumulate must be in [1, 1048576], got 0" ]
  block "patience = 0"
  [ "${lines[0]}" = "k.net:6:3: error: patience must be at least 1, got 0" ]
  # a key's kind, and an unknown key's nearest
  block "epochs = 1.5"
  [ "${lines[0]}" = "k.net:6:3: error: train setting 'epochs' takes a whole number" ]
  block "epoch = 3"
  [ "${lines[0]}" = "k.net:6:3: error: unknown train setting 'epoch' (did you mean 'epochs'?)" ]
  # in range: no error; defaults as the table says
  block "accumulate = 3"
  [ "$status" -eq 0 ]
}
