#!/usr/bin/env bats
# resume_settings.bats — a resumed run continues the run it resumes
# (issue 27): every setting its checkpoint holds is kept unless the command
# line changes it; without --save it writes back to the checkpoint it
# resumed (--no-save: nothing); and eval and predict read only the data
# they use (src/train/save.c trun_resume_settings, trainer.c open_train).
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR" || return 1
  cp "$BATS_TEST_DIRNAME/mpi/mlp.net" "$BATS_TEST_DIRNAME/mpi/blobs.csv" .
}

setting() { "$NETRUN" checkpoint --format json "$1" | jq -r --arg k "$2" '.settings[$k]'; }

@test "--resume keeps the checkpoint's epochs, batch, lr, optimizer and seed; the command line changes them" {
  # the script says 3 epochs of batch 5, sgd lr 0.2; the run said otherwise
  "$NETRUN" train mlp.net --epochs 2 --batch 4 --lr 0.1 --optimizer momentum --seed 7 --save c.ckpt > /dev/null 2>&1
  cp c.ckpt c2.ckpt
  run --separate-stderr "$NETRUN" train mlp.net --resume c.ckpt
  [ "$status" -eq 0 ]
  [ "${stderr_lines[0]}" = "netrun: note: optimizer momentum is kept from c.ckpt, the run resumed (the script's is not used)" ]
  [ "${stderr_lines[1]}" = "netrun: note: lr 0.1 is kept from c.ckpt, the run resumed (the script's is not used)" ]
  [ "${stderr_lines[2]}" = "netrun: note: epochs 2 is kept from c.ckpt, the run resumed (the script's is not used)" ]
  [ "${stderr_lines[3]}" = "netrun: note: batch 4 is kept from c.ckpt, the run resumed (the script's is not used)" ]
  [ "${stderr_lines[4]}" = "netrun: note: blobs.csv: x gets columns x0, x1, x2, x3 and y gets column label (columns = [...] and label = \"...\" in the train block choose others)" ]
  [ "${stderr_lines[5]}" = "training mlp.net: 51 examples (51 to evaluate), 13 steps of 4 per epoch, momentum lr 0.1, 2 epochs" ]
  [[ "$output" == "trained 2 epochs (26 steps, 102 samples)"* ]]
  # more epochs from the command line: the same as a run of 3 never stopped
  run --separate-stderr "$NETRUN" train mlp.net --resume c2.ckpt --epochs 3
  [ "$status" -eq 0 ]
  [[ "$stderr" == *"netrun: note: epochs was 2 in the checkpoint; resuming with 3"* ]]
  "$NETRUN" train mlp.net --epochs 3 --batch 4 --lr 0.1 --optimizer momentum --seed 7 --save whole.ckpt > /dev/null 2>&1
  [ "$(setting c2.ckpt seed)" = 7 ]
  [ "$(setting c2.ckpt epochs)" = 3 ]
  "$NETRUN" checkpoint --format json c2.ckpt | jq -c .values > a.json
  "$NETRUN" checkpoint --format json whole.ckpt | jq -c .values > b.json
  cmp a.json b.json
}

@test "--resume without --save writes back to its checkpoint; --no-save writes nothing; both with --save refused" {
  "$NETRUN" train mlp.net --epochs 1 --save c.ckpt > /dev/null 2>&1
  cp c.ckpt keep.ckpt
  run --separate-stderr "$NETRUN" train mlp.net --resume c.ckpt --epochs 2
  [ "$status" -eq 0 ]
  [[ "$stderr" == *"netrun: note: saving to c.ckpt, the checkpoint resumed (--save PATH: another file; --no-save: none)"* ]]
  [ "$("$NETRUN" checkpoint c.ckpt | sed -n 's/^epoch: //p')" = 2 ]
  run ls -A
  [[ "$output" == *c.ckpt* && "$output" != *.tmp* && "$output" != *.lock* ]]   # no temporary or lock left
  run "$NETRUN" train mlp.net --resume keep.ckpt --epochs 2 --no-save
  [ "$status" -eq 0 ]
  [ "$("$NETRUN" checkpoint keep.ckpt | sed -n 's/^epoch: //p')" = 1 ]
  run "$NETRUN" train mlp.net --resume keep.ckpt --save x.ckpt --no-save
  [ "$status" -eq 2 ]
  [[ "$output" == *"--save PATH writes checkpoints, --no-save none: not both"* ]]
  run "$NETRUN" train mlp.net --no-save
  [ "$status" -eq 2 ]
  [[ "$output" == *"--no-save is for --resume"* ]]
}

@test "eval and predict with eval = FILE read only that file, not the training data" {
  printf 'x1,x2,x3,x4,y\n1,oops,0,0,0\n' > train.csv
  sed 's/data      = "blobs.csv"/data      = "train.csv"/' mlp.net > m.net
  "$NETRUN" train mlp.net --save w.ckpt > /dev/null 2>&1
  run "$NETRUN" eval m.net --weights w.ckpt
  [ "$status" -eq 0 ]
  [[ "$output" == "blobs.csv: loss "*" (51 examples)" ]]
  run "$NETRUN" predict m.net --weights w.ckpt --data blobs.csv
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 51 ]
  rm train.csv
  run "$NETRUN" eval m.net --weights w.ckpt
  [ "$status" -eq 0 ]
  # training reads it, and says what is wrong with it
  run "$NETRUN" train m.net
  [ "$status" -ne 0 ]
  [[ "$output" == *"train.csv"* ]]
}
