#!/usr/bin/env bats
# mpi2.bats — data-parallel training over Open MPI, second part: the
# allreduce overlapped with the backward (allreduce_start/allreduce_wait),
# eval and predict on N ranks, and batch normalisation's running
# statistics averaged over the ranks.
#
# The models are mpi.bats's (tests/mpi) and a conv net with batch
# normalisation (tests/mpi2/bn.net), each run a second or two.  Every
# mpirun runs under timeout: a hang fails the test.  Without mpirun every
# test is skipped.  Under `make asan` the ranks run with leak detection off
# (Open MPI's own allocations at MPI_Finalize; see mpi.bats).

bats_require_minimum_version 1.5.0

load mpi_helpers

setup() {
  command -v mpirun > /dev/null || skip "mpirun is not installed (make deps)"
  mpi_setup
  M2=$BATS_TEST_DIRNAME/mpi2
}

# blocking SCRIPT DATA: SCRIPT and DATA copied here, and a copy of SCRIPT
# whose train block says overlap = false (NAME-blocking.net).
blocking() {
  cp "$1" "$2" .
  local name
  name=$(basename "$1" .net)
  sed '/^train {/a\  overlap = false' "$1" > "$name-blocking.net"
}

# state CKPT NAME: the elements of a checkpoint's tensor NAME, one a line.
state() {
  "$NETRUN" checkpoint --format json "$1" | jq -r --arg n "$2" '.values[] | select(.name == $n) | .data[]'
}

@test "overlapped: the allreduce starts in the backward and the run is the blocking one's, bit for bit" {
  blocking "$M/mlp.net" "$M/blobs.csv"
  # the program: a start right after W2's gradient, before the backward goes on
  "$NETRUN" dump --train --ranks 2 mlp.net > ov.txt
  grep -A1 '{Out=\[W2@GRAD\]} = matmul' ov.txt | tail -1 | grep -q '= allreduce_start(X=\[b2@GRAD, W2@GRAD\]'
  grep -q '= relu_grad' <(sed -n '/allreduce_start(X=\[b2@GRAD/,$p' ov.txt)
  run ! grep -q '= allreduce(' ov.txt
  "$NETRUN" dump --train --ranks 2 mlp-blocking.net | grep -c '= allreduce(' | grep -qx 2
  # 3 ranks, several buckets: the same checkpoint as the blocking allreduce, twice
  mpi 3 train mlp.net --batch 3 --save ov.ckpt > ov.out
  mpi 3 train mlp.net --batch 3 --save ov2.ckpt > /dev/null
  mpi 3 train mlp-blocking.net --batch 3 --save bl.ckpt > bl.out
  cmp ov.ckpt bl.ckpt
  cmp ov.ckpt ov2.ckpt
  grep -q '^allreduce on 3 ranks: [0-9.]* s in 36 calls on rank 0 (.*), [0-9.]* s of it waiting at allreduce_wait; sums in flight for [0-9.]* s of the backward$' ov.out
  grep -q '^allreduce on 3 ranks: .* none of it overlapped$' bl.out
}

@test "overlapped: a conv net (fused conv gradient, momentum) in small buckets, the blocking run's bits" {
  blocking "$M/cnn.net" "$M/stripes.csv"
  sed -i 's/^  batch     = 4$/  batch     = 4\n  bucket_mb = 0.00001/' cnn.net cnn-blocking.net
  # buckets of 10 bytes: b and W, c, K; c's and K's start after the fused op
  # that makes both (unfused, c's would split its run)
  [ "$("$NETRUN" dump --train --ranks 2 --fused cnn.net | grep -c '= allreduce_start')" -eq 3 ]
  "$NETRUN" dump --train --ranks 2 --fused cnn.net | grep -A1 'fused_conv2d_grad' | tail -1 | grep -q 'allreduce_start(X=\[c@GRAD\]'
  mpi 2 train cnn.net --save ov.ckpt > /dev/null
  mpi 2 train cnn-blocking.net --save bl.ckpt > /dev/null
  cmp ov.ckpt bl.ckpt
  # and it still is the model of one process at twice the batch
  "$NETRUN" train cnn.net --batch 8 --save one.ckpt > /dev/null 2>&1
  for p in K c W b; do
    paste <(state ov.ckpt $p) <(state one.ckpt $p) |
      awk -v p=$p '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; n++ } END { if (!n || m > 1e-5) { print p, m; exit 1 } }'
  done
}

@test "eval on 2 and 3 ranks prints once the figures of one process (loss within 1e-6, the same accuracy and matrix)" {
  "$NETRUN" train "$M/mlp.net" --epochs 1 --save m.ckpt > /dev/null 2>&1
  "$NETRUN" eval "$M/mlp.net" --weights m.ckpt --batch 7 --format json > one.json
  "$NETRUN" eval "$M/mlp.net" --weights m.ckpt --batch 7 --confusion > one.txt
  for np in 2 3; do
    mpi $np eval "$M/mlp.net" --weights m.ckpt --batch 7 --format json > n.json
    [ "$(wc -l < n.json)" -eq 1 ]
    [ "$(jq .examples n.json)" -eq 51 ]
    [ "$(jq .accuracy n.json)" = "$(jq .accuracy one.json)" ]
    jq -n --slurpfile a one.json --slurpfile b n.json '($a[0].loss - $b[0].loss) | fabs < 1e-6' | grep -qx true
    mpi $np eval "$M/mlp.net" --weights m.ckpt --batch 7 --confusion > n.txt
    # the loss's last digit may differ; the matrix and per-class figures may not
    diff <(sed 1d one.txt) <(sed 1d n.txt)
    [ "$(grep -c '^blobs.csv: loss' n.txt)" -eq 1 ]
  done
}

@test "predict --data on 2 and 3 ranks: rank 0 alone writes the values of one process, in order" {
  "$NETRUN" train "$M/mlp.net" --epochs 1 --save m.ckpt > /dev/null 2>&1
  "$NETRUN" predict "$M/mlp.net" --weights m.ckpt --data "$M/blobs.csv" --batch 4 > one.txt
  "$NETRUN" predict "$M/mlp.net" --weights m.ckpt --data "$M/blobs.csv" --batch 4 --output logits --output h \
    --precision 9 > one2.txt
  "$NETRUN" predict "$M/mlp.net" --weights m.ckpt --data "$M/blobs.csv" --batch 4 --output logits --output h \
    --format npy -o one.npz
  [ "$(wc -l < one.txt)" -eq 51 ]
  for np in 2 3; do
    mpi $np predict "$M/mlp.net" --weights m.ckpt --data "$M/blobs.csv" --batch 4 > n.txt
    cmp one.txt n.txt
    mpi $np predict "$M/mlp.net" --weights m.ckpt --data "$M/blobs.csv" --batch 4 --output logits --output h \
      --precision 9 > n2.txt
    cmp one2.txt n2.txt
    mpi $np predict "$M/mlp.net" --weights m.ckpt --data "$M/blobs.csv" --batch 4 --output logits --output h \
      --format npy -o n.npz
    cmp one.npz n.npz
  done
  # fed inputs: one forward pass, printed once
  run mpi 2 predict "$M/mlp.net" --weights m.ckpt --set 'x=[[0.5, 1, 0, 2]]'
  [ "$status" -eq 0 ]
  [ "$output" = "$("$NETRUN" predict "$M/mlp.net" --weights m.ckpt --set 'x=[[0.5, 1, 0, 2]]')" ]
}

@test "eval and predict: a rank that cannot start stops every rank, which says why" {
  run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" --oversubscribe --bind-to none -np 1 "$RANK" eval --init "$M/mlp.net" : \
    "${RANK_ENV[@]}" -np 1 "$RANK" eval --init "$M/mlp.net" --data nowhere.csv
  [ "$status" -eq 1 ]
  [[ "$output" == *"netrun: error: rank 0 of 2: rank 1 could not start: cannot read nowhere.csv: No such file or directory; stopping"* ]]
  run timeout 60 mpirun "${ROOT_OK[@]}" "${RANK_ENV[@]}" --oversubscribe --bind-to none -np 1 "$RANK" predict --init "$M/mlp.net" \
    --data "$M/blobs.csv" : -np 1 "$RANK" predict --init "$M/mlp.net" --data "$M/blobs.csv" --batch 3
  [ "$status" -eq 1 ]
  [[ "$output" == *"netrun: error: rank 1 predicts with another program, settings, data or checkpoint than rank 0; stopping"* ]]
}

@test "batch norm: every rank holds the same running statistics; the checkpoint's are the mean of the ranks' own" {
  mpi 2 train "$M2/bn.net" --epochs 2 --log h.jsonl > /dev/null
  jq -r 'select(.event == "ranks") | "\(.epoch) \(.state_hashes | length) \(.state_hashes | unique | length)"' h.jsonl > h.txt
  [ "$(cat h.txt)" = "$(printf '1 2 1\n2 2 1')" ]
  # A rank's own statistics: one process trained on its shard alone (the
  # normalisation reads the input, so its statistics depend on the
  # examples, not on the parameters).  33 examples: rank 1's shard (16)
  # runs out a step early and repeats its last example, which must not
  # move its statistics.
  for n in 32 33; do
    mpi 2 train "$M2/bn.net" --limit $n --save r2.ckpt > /dev/null
    awk -v n=$n 'NR == 1 { print > "s0.csv"; print > "s1.csv"; next } NR - 2 < n { print > ("s" (NR - 2) % 2 ".csv") }' \
      "$M/stripes.csv"
    "$NETRUN" train "$M2/bn.net" --data s0.csv --save s0.ckpt > /dev/null 2>&1
    "$NETRUN" train "$M2/bn.net" --data s1.csv --save s1.ckpt > /dev/null 2>&1
    for s in mean var; do
      paste <(state r2.ckpt batch_norm_layer.$s) <(state s0.ckpt batch_norm_layer.$s) \
        <(state s1.ckpt batch_norm_layer.$s) | awk -v s=$s -v n=$n '
        { d = $1 - ($2 + $3) / 2; if (d < 0) d = -d; if (d > m) m = d; k++
          e = $1 - $2; if (e < 0) e = -e; if (e > far) far = e }
        END { if (k != 4 || m > 1e-6 || far < 1e-3) { print n, s, k, m, far; exit 1 } }'
    done
  done
}
