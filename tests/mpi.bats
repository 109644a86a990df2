#!/usr/bin/env bats
# mpi.bats — data-parallel training over Open MPI (src/exec/dist.h): `mpirun -np
# N netrun train` on this machine, 2 and 3 ranks.
#
# The models are small (tests/mpi: an MLP on 51 examples, a conv net on 37
# images) so that each run takes a second: what is checked is that N ranks
# at batch B train the model one process trains at batch N*B (the same
# examples in each step, the gradient of the same mean loss), that every
# rank holds the same parameters, and that a rank's failure or a signal
# ends every rank.  Every mpirun runs under timeout: a hang fails the test.
#
# Under `make asan` the ranks run with leak detection off (the rest of
# AddressSanitizer and UBSan on): Open MPI leaves its own allocations at
# MPI_Finalize, in components it has unloaded by then, which no suppression
# can name.  The processes mpirun does not start keep it on.  Under `make
# valgrind` the ranks run the plain binary (NETRUN_BIN), for the same
# reason: memcheck's reports would be Open MPI's.

bats_require_minimum_version 1.5.0

load mpi_helpers

setup() {
  mpi_setup
}

# bg_train NAME ARGS...: netrun train ARGS on 2 ranks in the background,
# logging to NAME.jsonl, until it has logged 20 steps; $job is timeout's
# pid, $mpirun mpirun's.
bg_train() {
  local name=$1
  shift
  timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" --oversubscribe --bind-to none -np 2 "$RANK" train "$@" --log "$name.jsonl" \
    > "$name.out" 2> "$name.err" &
  job=$!
  for _ in $(seq 200); do
    [ "$(grep -c '"step"' "$name.jsonl" 2> /dev/null || true)" -gt 20 ] 2> /dev/null && break
    sleep 0.1
  done
  mpirun=$(pgrep -P "$job" -x mpirun)
}

# values CKPT SCRIPT NAME: the parameter NAME of a checkpoint, one number a line.
values() {
  "$NETRUN" predict "$2" --weights "$1" --output "$3" --precision 9 | tr -d '[]' | tr -s ' ' '\n' | grep .
}

# close A.ckpt B.ckpt SCRIPT TOL NAMES...: every element of each parameter
# within TOL of the other's (and the same count of them).
close() {
  local a=$1 b=$2 script=$3 tol=$4
  shift 4
  for p in "$@"; do
    paste <(values "$a" "$script" "$p") <(values "$b" "$script" "$p") | awk -v p="$p" -v tol="$tol" '
      NF != 2 { print p ": element counts differ"; bad = 1 }
      { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; n++ }
      END { if (!n || m > tol || bad) { print p ": " n " elements, largest difference " m " > " tol; exit 1 } }'
  done
}

@test "a netrun that mpirun did not start never loads libmpi; one mpirun started does" {
  # Not linked: a machine without Open MPI runs it.
  ldd "$RANK" > ldd.txt
  run ! grep -q libmpi ldd.txt
  grep -q libopenblas ldd.txt
  LD_DEBUG=libs "$NETRUN" train "$M/mlp.net" --epochs 1 > out.txt 2> libs.txt
  run ! grep -q libmpi libs.txt
  grep -q '^epoch 1/1: train loss' out.txt
  LD_DEBUG=libs mpi 1 train "$M/mlp.net" --epochs 1 > out1.txt 2> libs1.txt
  grep -q 'libmpi.so.40' libs1.txt
  # One rank of mpirun trains as one process.
  [ "$(grep '^epoch' out1.txt | cut -d'|' -f1-2)" = "$(grep '^epoch' out.txt | cut -d'|' -f1-2)" ]
}

@test "2 and 3 ranks at batch B reach the parameters of 1 process at batch N*B (MLP, within 1e-5)" {
  mpi 2 train "$M/mlp.net" --batch 5 --save r2.ckpt > out2.txt
  "$NETRUN" train "$M/mlp.net" --batch 10 --save r1.ckpt > out1.txt 2> /dev/null
  close r2.ckpt r1.ckpt "$M/mlp.net" 1e-5 W1 b1 W2 b2
  # 51 examples in steps of 10: the last step's one example is rank 0's,
  # rank 1 runs it on a stand-in that counts for nothing.
  [ "$(sed -n 's/^trained \(.*\) in.*/\1/p' out2.txt)" = "3 epochs (18 steps, 153 samples)" ]
  mpi 3 train "$M/mlp.net" --batch 3 --save r3.ckpt > /dev/null
  "$NETRUN" train "$M/mlp.net" --batch 9 --save r1b.ckpt > /dev/null 2>&1
  close r3.ckpt r1b.ckpt "$M/mlp.net" 1e-5 W1 b1 W2 b2
  # Not a test that cannot fail: the batch of one rank alone is further off.
  "$NETRUN" train "$M/mlp.net" --batch 5 --save r1c.ckpt > /dev/null 2>&1
  ! close r2.ckpt r1c.ckpt "$M/mlp.net" 1e-3 W1 2> /dev/null
}

@test "2 and 3 ranks at batch B reach the parameters of 1 process at batch N*B (conv net, momentum, within 1e-5)" {
  mpi 2 train "$M/cnn.net" --batch 4 --save r2.ckpt > /dev/null
  "$NETRUN" train "$M/cnn.net" --batch 8 --save r1.ckpt > /dev/null 2>&1
  close r2.ckpt r1.ckpt "$M/cnn.net" 1e-5 K c W b
  mpi 3 train "$M/cnn.net" --batch 4 --save r3.ckpt > /dev/null
  "$NETRUN" train "$M/cnn.net" --batch 12 --save r1b.ckpt > /dev/null 2>&1
  close r3.ckpt r1b.ckpt "$M/cnn.net" 1e-5 K c W b
}

@test "every rank holds the same parameters each epoch, and a run repeats bit for bit" {
  mpi 2 train "$M/mlp.net" --log a.jsonl --save a.ckpt > /dev/null
  mpi 2 train "$M/mlp.net" --log b.jsonl --save b.ckpt > /dev/null
  jq -r 'select(.event == "ranks") | "\(.epoch) \(.param_hashes | length) \(.param_hashes | unique | length)"' a.jsonl > h.txt
  [ "$(cat h.txt)" = "$(printf '1 2 1\n2 2 1\n3 2 1')" ]
  [ "$(jq -c 'select(.event == "ranks") | .param_hashes' a.jsonl)" = "$(jq -c 'select(.event == "ranks") | .param_hashes' b.jsonl)" ]
  cmp a.ckpt b.ckpt
}

@test "rank 0 alone prints, logs and saves; the checkpoint records the ranks" {
  mpi 2 train "$M/mlp.net" --save c.ckpt --log c.jsonl > out.txt 2> err.txt
  [ "$(grep -c '^epoch 1/3: ' out.txt)" -eq 1 ]
  [ "$(grep -c '^trained ' out.txt)" -eq 1 ]
  [ "$(grep -c '^training ' err.txt)" -eq 1 ]
  grep -q '^training .*mlp.net: 51 examples (51 to evaluate), 6 steps of 2 x 5 per epoch, sgd lr 0.2, 3 epochs$' err.txt
  [ "$(jq -r 'select(.event == "step") | .step' c.jsonl | tr '\n' ' ')" = "$(seq 1 18 | tr '\n' ' ')" ]
  "$NETRUN" checkpoint c.ckpt | grep -qx '  ranks = 2'
  [ "$(ls)" = "$(printf 'c.ckpt\nc.jsonl\nerr.txt\nout.txt')" ]
}

@test "--resume on 2 ranks continues as the run that was not stopped; 1 rank resumes at an epoch's end" {
  mpi 2 train "$M/mlp.net" --epochs 3 --save full.ckpt > /dev/null 2>&1
  mpi 2 train "$M/mlp.net" --epochs 2 --save part.ckpt > /dev/null 2>&1
  mpi 2 train "$M/mlp.net" --epochs 3 --resume part.ckpt --save part.ckpt > /dev/null 2>&1
  for p in W1 b1 W2 b2; do [ "$(values full.ckpt "$M/mlp.net" $p)" = "$(values part.ckpt "$M/mlp.net" $p)" ]; done
  mpi 2 train "$M/mlp.net" --epochs 2 --save two.ckpt > /dev/null 2>&1
  run "$NETRUN" train "$M/mlp.net" --epochs 3 --batch 10 --resume two.ckpt
  [ "$status" -eq 0 ]
  [[ "$output" == *"netrun: note: two.ckpt was saved by 2 ranks; resuming on 1"* ]]
  [[ "$output" == *"epoch 3/3: train loss"* ]]
}

@test "SIGTERM to mpirun saves and stops every rank; another rank count cannot resume in mid-epoch" {
  bg_train s "$M/mlp.net" --epochs 100000 --save s.ckpt
  kill -TERM "$mpirun"
  wait "$job" || true
  grep -q '^netrun: interrupted at epoch [0-9]*, step [0-9]*$' s.err
  grep -q '^saved s.ckpt (epoch [0-9]*, step [0-9]*)$' s.err
  "$NETRUN" checkpoint s.ckpt | grep -qx '  ranks = 2'
  if ! "$NETRUN" checkpoint s.ckpt | grep -qx '  step_in_epoch = 0'; then
    run "$NETRUN" train "$M/mlp.net" --epochs 100000 --resume s.ckpt
    [ "$status" -eq 1 ]
    [[ "$output" == *"s.ckpt was saved by 2 ranks in the middle of epoch "*": resume it on 2 (mpirun -np 2), or from a checkpoint of an epoch's end"* ]]
  fi
}

# signal_rank NAME SIGNAL: 2 ranks training (bg_train NAME), rank 1 sent
# SIGNAL; the job's $status and the seconds it took after the signal, $took.
signal_rank() {
  bg_train "$1" "$M/mlp.net" --epochs 100000
  local ranks
  ranks=($(pgrep -P "$mpirun"))
  [ "${#ranks[@]}" -eq 2 ] || return 1
  local t0=$SECONDS
  kill "-$2" "${ranks[1]}"
  status=0
  wait "$job" || status=$?
  took=$((SECONDS - t0))
}

@test "a rank killed in training ends the job within seconds" {
  signal_rank k KILL
  [ "$status" -ne 0 ]
  [ "$status" -ne 124 ]   # not the timeout
  [ "$took" -le 10 ]
  grep -q 'exited on signal 9 (Killed)' k.err
}

@test "a rank that stops answering ends the job after NETRUN_COLLECTIVE_TIMEOUT, named by the rank waiting for it" {
  RANK_ENV+=(-x NETRUN_COLLECTIVE_TIMEOUT=2)
  signal_rank s STOP
  cat s.err
  [ "$status" -eq 1 ]
  [ "$took" -le 20 ]
  grep -Eqx 'netrun: error: rank 0: no answer from rank 1 for [2-9] s \(its host unreachable\?\); stopping' s.err
  grep -qx 'netrun: note: NETRUN_COLLECTIVE_TIMEOUT=2 is the limit; raise it (0: none) when a rank may not answer that long' s.err
}

@test "a rank at work longer than NETRUN_COLLECTIVE_TIMEOUT is waited for: its heartbeats come from a thread of its own" {
  # rank 1's first step takes 8 s more (its main thread out of every
  # collective), rank 0 waiting for it in the step's agreement; the limit is 2 s
  run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" -x NETRUN_COLLECTIVE_TIMEOUT=2 -x NETRUN_TEST_SLOW_STEP=1:8 \
    --oversubscribe --bind-to none -np 2 "$RANK" train "$M/mlp.net" --epochs 2 --save busy.ckpt
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" != *"no answer"* ]]
  # the same bits as the run without the slow step
  mpi 2 train "$M/mlp.net" --epochs 2 --save plain.ckpt
  cmp busy.ckpt plain.ckpt
}

@test "a rank stopped in the middle of a long step ends the job within NETRUN_COLLECTIVE_TIMEOUT" {
  # rank 1's first step would take 60 s more; 4 s into it (rank 0 waiting,
  # the limit 2 s) the job still runs; stopped (SIGSTOP: its heartbeat
  # thread too), rank 1 is named by rank 0 within seconds
  timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" -x NETRUN_COLLECTIVE_TIMEOUT=2 -x NETRUN_TEST_SLOW_STEP=1:60 \
    --oversubscribe --bind-to none -np 2 "$RANK" train "$M/mlp.net" > w.out 2> w.err &
  local job=$!
  sleep 4
  kill -0 "$job"
  local ranks
  ranks=($(pgrep -P "$(pgrep -P "$job" -x mpirun)"))
  [ "${#ranks[@]}" -eq 2 ]
  local t0=$SECONDS
  kill -STOP "${ranks[1]}"
  status=0
  wait "$job" || status=$?
  cat w.err
  [ "$status" -eq 1 ]
  [ $((SECONDS - t0)) -le 20 ]
  grep -Eqx 'netrun: error: rank 0: no answer from rank 1 for 2 s \(its host unreachable\?\); stopping' w.err
}

@test "the whole job stopped past the limit and continued (Ctrl-Z and fg, a suspended host) trains on to the same bits" {
  # rank 1's first step takes 6 s more (rank 0 waiting for it, the limit
  # 2 s); 3 s into it both ranks are stopped for 4 s and continued: each
  # was stopped itself, so the others' silence over those seconds is no
  # sign of theirs, and rank 0 waits on (it named rank 1 at once)
  timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" -x NETRUN_COLLECTIVE_TIMEOUT=2 -x NETRUN_TEST_SLOW_STEP=1:6 \
    --oversubscribe --bind-to none -np 2 "$RANK" train "$M/mlp.net" --epochs 2 --save stopped.ckpt > z.out 2> z.err &
  local job=$!
  sleep 3
  local ranks
  ranks=($(pgrep -P "$(pgrep -P "$job" -x mpirun)"))
  [ "${#ranks[@]}" -eq 2 ]
  kill -STOP "${ranks[@]}"
  sleep 4
  kill -CONT "${ranks[@]}"
  status=0
  wait "$job" || status=$?
  cat z.err
  [ "$status" -eq 0 ]
  run ! grep -q 'no answer\|every rank answers' z.err
  mpi 2 train "$M/mlp.net" --epochs 2 --save plain.ckpt
  cmp stopped.ckpt plain.ckpt
}

@test "a link cut just after a wait began: the rank last heard waiting is named once silent for the limit, not taken for one that answers" {
  # NETRUN_TEST_CUT=1:1: after the first step's agreement, rank 1 stops as
  # a rank whose link is cut 1 s into the next wait — rank 0, in the
  # step's gradient sum, hears it say it waits for 1 s and then nothing.
  # When rank 0's wait passes the limit (6 s), rank 1 was heard within it
  # and no rank worked: without the three beats' rule this ended as a
  # collective that cannot complete, "though every rank answers" (the
  # verdict hosts.bats's link cut got on a loaded host); rank 1 is waited
  # for until its silence reaches the limit, and named.
  run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" -x NETRUN_COLLECTIVE_TIMEOUT=6 -x NETRUN_TEST_CUT=1:1 \
    --oversubscribe --bind-to none -np 2 "$RANK" train "$M/mlp.net"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" != *"every rank answers"* ]]
  [[ "$output" == *$'\nnetrun: error: rank 0: no answer from rank 1 for 6 s (its host unreachable?); stopping\n'* ]]
}

# Without MPI_THREAD_MULTIPLE (forced by NETRUN_TEST_NO_THREAD_MULTIPLE=1:
# Open MPI gives MPI_THREAD_SERIALIZED) no heartbeat thread runs: a rank
# sends heartbeats only while it waits past a second, and a wait past the
# limit names every rank not heard during it.

@test "without MPI_THREAD_MULTIPLE: a rank stopped is named after the limit, though it answered in earlier waits" {
  # rank 0's first step takes 2.5 s more (under the limit, 4 s: waited
  # for), rank 1 sending heartbeats as it waits, which rank 0, at work,
  # leaves unread; once rank 1 is stopped, those old heartbeats are no
  # answers to rank 0's wait
  RANK_ENV+=(-x NETRUN_TEST_NO_THREAD_MULTIPLE=1 -x NETRUN_COLLECTIVE_TIMEOUT=4 -x NETRUN_TEST_SLOW_STEP=0:2.5)
  signal_rank f STOP
  cat f.err
  [ "$status" -eq 1 ]
  [ "$took" -le 20 ]
  # rank 0's words (rank 1, woken by mpirun to be ended, may add its own)
  diff <(grep -A2 '^netrun: error: rank 0: ' f.err) - <<'EOF'
netrun: error: rank 0: no answer from rank 1 for 4 s (its host unreachable?); stopping
netrun: note: without MPI_THREAD_MULTIPLE a rank answers only while it waits: one at work that long is named too
netrun: note: NETRUN_COLLECTIVE_TIMEOUT=4 is the limit; raise it (0: none) when a rank may not answer that long
EOF
}

@test "without MPI_THREAD_MULTIPLE: a rank at work longer than the limit is named as one that does not answer" {
  # what the heartbeat thread prevents: rank 1's first step takes 8 s
  # more, the limit is 2 s; rank 0 ends the job 2 s into its wait
  run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" -x NETRUN_TEST_NO_THREAD_MULTIPLE=1 -x NETRUN_COLLECTIVE_TIMEOUT=2 \
    -x NETRUN_TEST_SLOW_STEP=1:8 --oversubscribe --bind-to none -np 2 "$RANK" train "$M/mlp.net" --epochs 2
  echo "$output"
  [ "$status" -eq 1 ]
  diff <(grep '^netrun: [a-z]*: \(rank\|without\|NETRUN\)' <<< "$output") - <<'EOF'
netrun: error: rank 0: no answer from rank 1 for 2 s (its host unreachable?); stopping
netrun: note: without MPI_THREAD_MULTIPLE a rank answers only while it waits: one at work that long is named too
netrun: note: NETRUN_COLLECTIVE_TIMEOUT=2 is the limit; raise it (0: none) when a rank may not answer that long
EOF
  # under the limit (1 s of 4), it is waited for: the bits of the run with the thread
  mpi 2 train "$M/mlp.net" --epochs 2 --save plain.ckpt
  run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" -x NETRUN_TEST_NO_THREAD_MULTIPLE=1 -x NETRUN_COLLECTIVE_TIMEOUT=4 \
    -x NETRUN_TEST_SLOW_STEP=1:1 --oversubscribe --bind-to none -np 2 "$RANK" train "$M/mlp.net" --epochs 2 --save single.ckpt
  [ "$status" -eq 0 ]
  cmp single.ckpt plain.ckpt
}

@test "NETRUN_COLLECTIVE_TIMEOUT must be seconds" {
  for v in soon -1 1e9 nan ''; do
    run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" -x NETRUN_COLLECTIVE_TIMEOUT="$v" -np 1 "$RANK" train "$M/mlp.net"
    [ "$status" -eq 1 ]
    [[ "$output" == *"netrun: error: NETRUN_COLLECTIVE_TIMEOUT=$v: expected a number of seconds from 0 (no limit) to 1000000"* ]]
  done
  run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" -x NETRUN_COLLECTIVE_TIMEOUT=0.5 -np 1 "$RANK" train "$M/mlp.net"
  [ "$status" -eq 0 ]
}

@test "a rank that cannot start (its data missing) stops every rank, which says why" {
  # Rank 0 says rank 1's error: Open MPI can drop a rank's own last output
  # when the job ends (seen in whole runs under ASan), so it is not asked.
  run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" --oversubscribe --bind-to none -np 1 "$RANK" train "$M/mlp.net" : \
    "${RANK_ENV[@]}" -np 1 "$RANK" train "$M/mlp.net" --data nowhere.csv
  [ "$status" -eq 1 ]
  [[ "$output" == *"netrun: error: rank 0 of 2: rank 1 could not start: cannot read nowhere.csv: No such file or directory; stopping"* ]]
  # an error with a position carries it
  printf 'input x: f32[B, 4]\nh = relux(x)\n' > bad.net
  run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" --oversubscribe --bind-to none -np 1 "$RANK" train "$M/mlp.net" : \
    "${RANK_ENV[@]}" -np 1 "$RANK" train bad.net
  [ "$status" -ne 0 ]
  [ "$status" -ne 124 ]
  [[ "$output" == *"rank 1 could not start: bad.net:2:5: unknown op or function 'relux' (did you mean 'relu'?); stopping"* ]]
}

@test "ranks running different settings refuse to train; more ranks than examples is an error" {
  run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" --oversubscribe --bind-to none -np 1 "$RANK" train "$M/mlp.net" : \
    "${RANK_ENV[@]}" -np 1 "$RANK" train "$M/mlp.net" --batch 7
  [ "$status" -eq 1 ]
  [[ "$output" == *"netrun: error: rank 1 trains another program, settings, data or checkpoint than rank 0; stopping"* ]]
  run mpi 2 train "$M/mlp.net" --limit 1
  [ "$status" -eq 1 ]
  [[ "$output" == *"netrun: error: 2 ranks need at least 2 training examples, got 1"* ]]
}
