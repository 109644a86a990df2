#!/usr/bin/env bats
# trust_threads.bats — the same bits on any number of threads, whatever
# OpenBLAS kernel or OpenMP variables the environment sets (src/exec/par.c):
# every GEMM is cut into parts fixed by its shape, each part a
# single-threaded sgemm, so neither the thread count nor the team netrun
# shrinks under load can change a result.  Every run is under `timeout -s
# KILL` (a hang inside OpenBLAS ignored SIGTERM).
#
# Runs use --limit (4 steps of fashion_mlp, 2 of fashion_cnn); the file
# takes about a minute of CPU.
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  EX=$ROOT/examples
  cd "$BATS_TEST_TMPDIR"
}

# train OUT MODEL LIMIT [VAR=VALUE...]: one epoch of the first LIMIT images,
# in an environment without OpenMP's or OpenBLAS's variables but those given.
train() {
  local out=$1 model=$2 limit=$3
  shift 3
  env -u OMP_NUM_THREADS -u OMP_DYNAMIC -u OMP_WAIT_POLICY -u OMP_PROC_BIND -u GOMP_SPINCOUNT \
    -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OPENBLAS_NUM_THREADS "$@" \
    timeout -s KILL 300 "$NETRUN" train "$EX/$model.net" --limit "$limit" --epochs 1 --save "$out" >/dev/null 2>&1
}

# same_on_threads MODEL LIMIT [VAR=VALUE...]: 1, 2 and 3 threads give one
# checkpoint, byte for byte.
same_on_threads() {
  local model=$1 limit=$2
  shift 2
  for t in 1 2 3; do
    train "$t.ckpt" "$model" "$limit" "$@" OMP_NUM_THREADS=$t
  done
  cmp 1.ckpt 2.ckpt
  cmp 1.ckpt 3.ckpt
}

@test "fashion_mlp: one thread, two or three, the same checkpoint (the default OpenBLAS kernels)" {
  # OpenBLAS's own threads gave 48,191 of [128,784]x[784,512]'s 65,536
  # elements other bits on two threads than on one.
  same_on_threads fashion_mlp 512
}

@test "fashion_mlp: one thread, two or three, the same checkpoint under OPENBLAS_CORETYPE=Haswell" {
  same_on_threads fashion_mlp 512 OPENBLAS_CORETYPE=Haswell
  # and with the cache size some machines set beside it
  train l2.ckpt fashion_mlp 512 OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=1048576 OMP_NUM_THREADS=2
  train l2-1.ckpt fashion_mlp 512 OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=1048576 OMP_NUM_THREADS=1
  cmp l2.ckpt l2-1.ckpt
}

@test "fashion_cnn: one thread, two or three, the same checkpoint, with and without OPENBLAS_CORETYPE=Haswell" {
  same_on_threads fashion_cnn 256
  mv 1.ckpt default.ckpt
  same_on_threads fashion_cnn 256 OPENBLAS_CORETYPE=Haswell
}

@test "products of 65536 multiply-adds and more are oneDNN's, within 1e-6 of OpenBLAS's, the same bits on 1 and 3 threads; smaller ones OpenBLAS's" {
  cat > mm.net <<'NET'
a = uniform_random(shape=[100, 70], seed=1)
b = uniform_random(shape=[70, 90], seed=2)
c = uniform_random(shape=[90, 70], seed=3)
print((a @ b)[96:100])
print(matmul(a, c, transpose_y=true)[0:4])
print(matmul(b, b, transpose_x=true)[86:90])
s = uniform_random(shape=[32, 16], seed=4)
t = uniform_random(shape=[16, 64], seed=5)
print((s @ t)[28:32])
NET
  local core avx512=0
  grep -qw avx512f /proc/cpuinfo && avx512=1
  for core in Haswell ""; do
    for t in 1 3; do
      env -u OPENBLAS_CORETYPE -u NETRUN_TEST_GEMM -u DNNL_MAX_CPU_ISA ${core:+OPENBLAS_CORETYPE=$core} OMP_NUM_THREADS=$t \
        timeout -s KILL 60 "$NETRUN" run --precision 9 mm.net > dnnl$t.txt
    done
    cmp dnnl1.txt dnnl3.txt
    env -u OPENBLAS_CORETYPE ${core:+OPENBLAS_CORETYPE=$core} NETRUN_TEST_GEMM=openblas \
      timeout -s KILL 60 "$NETRUN" run --precision 9 mm.net > openblas.txt
    # per product: its largest difference over its largest value, and how
    # many of the printed elements differ.  oneDNN's AVX-512 kernels sum
    # in another order than OpenBLAS's AVX2 ones (Haswell): 31 to 355 of
    # 360 here (OpenBLAS's AVX-512 kernels gave oneDNN's bits).  The
    # 32x64x16 product, 32768, stays OpenBLAS's.
    run python3 - dnnl1.txt openblas.txt <<'PY'
import re, sys
def blocks(f):
    parts = re.split(r"\n(?=\[\[)", open(f).read().strip())
    return [[float(x) for x in re.findall(r"-?\d+\.?\d*(?:e[-+]?\d+)?", p)] for p in parts]
for a, b in zip(blocks(sys.argv[1]), blocks(sys.argv[2])):
    rel = max(abs(x - y) for x, y in zip(a, b)) / max(abs(y) for y in b)
    print(len(a), "%.1e" % rel, sum(x != y for x, y in zip(a, b)))
PY
    echo "OPENBLAS_CORETYPE=$core: $output"
    [ "$status" -eq 0 ] && [ "${#lines[@]}" -eq 4 ]
    for i in 0 1 2; do
      read -r n rel differ <<< "${lines[$i]}"
      [ "$n" -eq 360 ]
      if [ "$core" = Haswell ] && [ "$avx512" = 1 ]; then [ "$differ" -gt 0 ]; fi
      python3 -c "import sys; sys.exit(0 if $rel <= 1e-6 else 1)"
    done
    [ "${lines[3]}" = "256 0.0e+00 0" ]
  done
}

@test "a convolution of one image (each GEMM cut over the threads, not images to threads): the same gradients on 1, 2 or 3 threads" {
  # One image, so one batch: the plan cannot hand images to threads, and
  # each GEMM ([64, 288] x [288, 4096], and its two transposed products) is
  # cut by par_sgemm.  OpenBLAS's threads gave other bits for the filter's
  # gradient on 1, 2 and 3 threads.
  {
    printf 'input x : f32[1, 32, 64, 64] = uniform_random([1, 32, 64, 64], min=-1.0, max=1.0)\n'
    printf 'param k : [64, 32, 3, 3] = uniform(-0.3, 0.3)\n'
    printf 'y = conv2d(x, k, paddings=[1, 1])\nloss = sum(y * y)\n'
  } > one.net
  for core in "" Haswell; do
    for t in 1 2 3; do
      env -u OPENBLAS_CORETYPE -u NETRUN_TEST_GEMM -u DNNL_MAX_CPU_ISA ${core:+OPENBLAS_CORETYPE=$core} OMP_NUM_THREADS=$t \
        timeout -s KILL 120 "$NETRUN" grad --precision 9 one.net > "g$t.txt"
    done
    [ -s g1.txt ]
    cmp g1.txt g2.txt
    cmp g1.txt g3.txt
  done
}

@test "OpenMP's variables change no bit, and none hangs (OMP_DYNAMIC=true did, inside OpenBLAS)" {
  train ref.ckpt fashion_mlp 512 OMP_NUM_THREADS=1
  local vars=("OMP_DYNAMIC=true" "OMP_WAIT_POLICY=active" "OMP_WAIT_POLICY=passive" "OMP_NUM_THREADS=1"
              "OMP_NUM_THREADS=3" "OMP_PROC_BIND=true" "OMP_DYNAMIC=true OMP_NUM_THREADS=3"
              "OMP_DYNAMIC=true OPENBLAS_CORETYPE=Haswell")
  for v in "${vars[@]}"; do
    # shellcheck disable=SC2086  # v holds one or two VAR=VALUE words
    run train v.ckpt fashion_mlp 512 $v
    [ "$status" -eq 0 ] || { echo "$v: exit $status"; false; }
    if [[ "$v" == *CORETYPE* ]]; then
      train ref-haswell.ckpt fashion_mlp 512 OPENBLAS_CORETYPE=Haswell OMP_NUM_THREADS=1
      cmp ref-haswell.ckpt v.ckpt
    else
      cmp ref.ckpt v.ckpt || { echo "$v: other bits"; false; }
    fi
  done
}

# alone_and_loaded MODEL LIMIT: alone.ckpt on 2 threads, then loaded.ckpt
# on 2 threads beside two busy processes; they must be the same bits.
alone_and_loaded() {
  train alone.ckpt "$1" "$2" OMP_NUM_THREADS=2
  timeout 120 sh -c 'while :; do :; done' & local b1=$!
  timeout 120 sh -c 'while :; do :; done' & local b2=$!
  train loaded.ckpt "$1" "$2" OMP_NUM_THREADS=2
  kill "$b1" "$b2"
  cmp alone.ckpt loaded.ckpt
}

@test "beside two busy processes (the team shrinks and grows): the same checkpoint as alone" {
  alone_and_loaded fashion_mlp 2048
}

@test "fashion_cnn beside two busy processes (its convolutions keep every thread, the loops' team shrinks): the same checkpoint as alone" {
  alone_and_loaded fashion_cnn 256
  train one.ckpt fashion_cnn 256 OMP_NUM_THREADS=1
  cmp alone.ckpt one.ckpt
}
