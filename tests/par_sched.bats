#!/usr/bin/env bats
# par_sched.bats — par_parts (src/exec/par.c): GEMM parts and unary slices taken
# by whichever of netrun's threads is free, in whatever order, give the
# same bits as one thread doing them all in order: on more threads than
# parts, on more threads than cores, with every thread on one core, and
# beside busy processes that keep threads off their cores mid-job.  Each
# run is under `timeout -s KILL` (a pool that lost a wake-up would hang).
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  EX=$(cd "$BATS_TEST_DIRNAME/../examples" && pwd)
  cd "$BATS_TEST_TMPDIR"
}

# run_env [VAR=VALUE...] -- CMD...: CMD without OpenMP's variables but those given.
run_env() {
  local vars=()
  while [ "$1" != "--" ]; do vars+=("$1"); shift; done
  shift
  env -u OMP_NUM_THREADS -u OMP_DYNAMIC -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "${vars[@]}" \
    timeout -s KILL 300 "$@"
}

# mlp OUT [VAR=VALUE...]: fashion_mlp on its first 1024 images.
mlp() {
  local out=$1
  shift
  run_env "$@" -- "$NETRUN" train "$EX/fashion_mlp.net" --limit 1024 --epochs 1 --save "$out" >/dev/null 2>&1
}

# Two busy loops for at most 300 s; stop_busy ends them.
start_busy() {
  timeout 300 sh -c 'while :; do :; done' & B1=$!
  timeout 300 sh -c 'while :; do :; done' & B2=$!
}
stop_busy() { kill "$B1" "$B2" 2>/dev/null || true; }
teardown() { [ -z "${B1:-}" ] || stop_busy; }

@test "fashion_mlp: 1, 2, 4 and 8 threads (more than its GEMMs' 4 parts, more than the cores): one checkpoint" {
  mlp 1.ckpt OMP_NUM_THREADS=1
  [ -s 1.ckpt ]
  for t in 2 4 8; do
    mlp "$t.ckpt" OMP_NUM_THREADS=$t
    cmp 1.ckpt "$t.ckpt"
  done
}

@test "fashion_mlp beside two busy loops (threads kept off their cores mid-job): the checkpoint of one quiet thread" {
  mlp quiet.ckpt OMP_NUM_THREADS=1
  start_busy
  for t in 2 3; do
    mlp "busy$t.ckpt" OMP_NUM_THREADS=$t
    cmp quiet.ckpt "busy$t.ckpt"
  done
  stop_busy
}

@test "three threads on one core (taskset), beside a busy loop there: the same checkpoint, no hang" {
  command -v taskset >/dev/null || skip "no taskset"
  mlp one.ckpt OMP_NUM_THREADS=1
  timeout 300 taskset -c 0 sh -c 'while :; do :; done' & B1=$!
  B2=$B1
  run_env OMP_NUM_THREADS=3 -- taskset -c 0 "$NETRUN" train "$EX/fashion_mlp.net" --limit 1024 --epochs 1 \
    --save pinned.ckpt >/dev/null 2>&1
  stop_busy
  cmp one.ckpt pinned.ckpt
}

@test "unary ops and their gradients over 62 slices of a [500, 1000] tensor: the same bits on 1, 2, 3 and 8 threads" {
  # gelu, relu, tanh and their grad kernels each cut X into slices of 8192
  # elements (PAR_MIN_WORK) that the pool's threads take; json prints every
  # element of the gradient
  {
    printf 'param x : [500, 1000] = uniform(-4.0, 4.0)\n'
    printf 'loss = sum(gelu(x) * relu(tanh(x)))\n'
  } > u.net
  for t in 1 2 3 8; do
    run_env OMP_NUM_THREADS=$t -- "$NETRUN" grad --format json --precision 9 u.net > "g$t.json"
  done
  [ "$(jq '.grads.x.data | length' g1.json)" = 500000 ]
  for t in 2 3 8; do
    cmp g1.json "g$t.json"
  done
}

@test "broadcast binary ops over many slices (a flat [50000], rows of [400, 300] by [300]): the same bits on 1, 2, 3 and 8 threads" {
  # binary_loop_run cuts a flat operand into slices of 8192 elements, a
  # broadcast into slices of rows, taken by the pool's threads
  {
    printf 'param x : [50000] = uniform(-2.0, 2.0)\n'
    printf 'param y : [50000] = uniform(-2.0, 2.0)\n'
    printf 'param w : [400, 300] = uniform(-2.0, 2.0)\n'
    printf 'param v : [300] = uniform(-2.0, 2.0)\n'
    printf 'loss = sum(x * y - y / (x * x + 1.0)) + sum((w + v) * (w - v))\n'
  } > b.net
  for t in 1 2 3 8; do
    run_env OMP_NUM_THREADS=$t -- "$NETRUN" grad --format json --precision 9 b.net > "b$t.json"
  done
  [ "$(jq '.grads.x.data | length' b1.json)" = 50000 ]
  [ "$(jq '.grads.w.data | length' b1.json)" = 120000 ]
  for t in 2 3 8; do
    cmp b1.json "b$t.json"
  done
}
