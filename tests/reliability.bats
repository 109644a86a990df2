#!/usr/bin/env bats
# reliability.bats — no input crashes netrun, hangs it, leaks, or spoils a
# file it writes: allocations failing one by one, resource limits, deep
# nesting, interrupts, and writes into read-only and full folders.
#
# Run under `make asan`, the allocation walks also prove there is no leak on
# any out-of-memory path (LeakSanitizer reports one and changes the status).
# The fuzz harnesses (tests/fuzz, make fuzz) cover the readers; their corpora
# are replayed by make check.

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  EX=$ROOT/examples
  cd "$BATS_TEST_TMPDIR"
  # Under valgrind each run takes seconds: the walks then take every
  # NETRUN_WALK_STRIDE-th allocation (make valgrind sets it).
  STRIDE=${NETRUN_WALK_STRIDE:-1}
}

load fs_helpers

teardown() {
  cleanup_fs
}

# ---- failing allocations ----------------------------------------------------------

# allocations ARGS...: how many allocations `netrun ARGS` makes.
allocations() {
  NETRUN_COUNT_ALLOC=1 "$NETRUN" "$@" 2>&1 >/dev/null | sed -n 's/^netrun: \([0-9]*\) allocations$/\1/p'
}

# out_of_memory N: the run just made ended as running out of memory must:
# status 3, the error said so, no signal, no sanitizer or valgrind report.
out_of_memory() {
  [ "$status" -eq 3 ] || { echo "allocation $1: status $status"; echo "$output" | head -20; false; }
  [[ "$output" == *"netrun: error: out of memory"* ]] || { echo "allocation $1: $output"; false; }
  [[ "$output" != *"Sanitizer"* && "$output" != *"runtime error"* && "$output" != *"==ERROR"* ]] ||
    { echo "allocation $1: $output"; false; }
}

# no_temporaries: no temporary file of an atomic write is left in .
no_temporaries() {
  local left
  left=$(find . -name '*.tmp.*')
  [ -z "$left" ] || { echo "left behind: $left"; false; }
}

@test "out of memory at each allocation of a run: exit 3, a clear error, no crash, no leak" {
  cp "$EX/xor.net" .
  total=$(allocations run xor.net)
  [ "$total" -gt 50 ]
  for n in $(seq 1 "$STRIDE" "$total"); do
    NETRUN_FAIL_ALLOC=$n run "$NETRUN" run xor.net
    out_of_memory "$n"
  done
  NETRUN_FAIL_ALLOC=$((total + 1)) run "$NETRUN" run xor.net
  [ "$status" -eq 0 ]
}

@test "out of memory at each allocation of --dump-backward -o: the old file stays whole" {
  cp "$EX/xor.net" .
  "$NETRUN" --dump-backward xor.net > want.txt
  total=$(allocations --dump-backward -o out.txt xor.net)
  [ "$total" -gt 10 ]
  for n in $(seq 1 "$STRIDE" "$total"); do
    echo old > out.txt
    NETRUN_FAIL_ALLOC=$n run "$NETRUN" --dump-backward -o out.txt xor.net
    out_of_memory "$n"
    [ "$(cat out.txt)" = old ] || cmp -s want.txt out.txt || { echo "allocation $n: out.txt spoilt"; false; }
    no_temporaries
  done
  NETRUN_FAIL_ALLOC=$((total + 1)) run "$NETRUN" --dump-backward -o out.txt xor.net
  [ "$status" -eq 0 ]
  cmp want.txt out.txt
}

@test "out of memory at each allocation of plot -o: the old file stays whole" {
  "$NETRUN" plot -o want.svg "$ROOT/tests/plot/two_splits.jsonl"
  total=$(allocations plot -o out.svg "$ROOT/tests/plot/two_splits.jsonl")
  [ "$total" -gt 5 ]
  for n in $(seq 1 "$STRIDE" "$total"); do
    echo old > out.svg
    NETRUN_FAIL_ALLOC=$n run "$NETRUN" plot -o out.svg "$ROOT/tests/plot/two_splits.jsonl"
    out_of_memory "$n"
    [ "$(cat out.svg)" = old ] || cmp -s want.svg out.svg || { echo "allocation $n: out.svg spoilt"; false; }
    no_temporaries
  done
}

@test "out of memory at each allocation of a short train: checkpoint and log old or whole" {
  # Two epochs of xor: the first epoch's checkpoint and log lines are
  # written before later allocations fail.  Every allocation is walked.
  cp "$EX/xor.net" .
  mkdir -p examples/data
  cp "$EX/data/xor.csv" examples/data/
  "$NETRUN" train --epochs 1 --seed 7 --save old.ckpt xor.net >/dev/null 2>&1
  echo '{"event": "old"}' > old.jsonl
  total=$(allocations train --epochs 2 --save run.ckpt --log run.jsonl xor.net)
  [ "$total" -gt 100 ]
  for n in $(seq 1 "$STRIDE" "$total"); do
    cp old.ckpt run.ckpt
    cp old.jsonl run.jsonl
    NETRUN_FAIL_ALLOC=$n run "$NETRUN" train --epochs 2 --save run.ckpt --log run.jsonl xor.net
    out_of_memory "$n"
    # The checkpoint: the old one, or a whole new one.
    cmp -s old.ckpt run.ckpt || "$NETRUN" checkpoint run.ckpt >/dev/null || { echo "allocation $n: bad checkpoint"; false; }
    # The log: the old one, or whole JSON lines of the new run.
    cmp -s old.jsonl run.jsonl || ! grep -q '"old"' run.jsonl || { echo "allocation $n: log:"; cat run.jsonl; false; }
    jq -c . run.jsonl >/dev/null
    no_temporaries
  done
}

# ---- limits -------------------------------------------------------------------------

# gen FILE PYTHON: writes a generated script.
gen() { python3 -c "$2" > "$1"; }

# refuses ARGS... -- TEXT: netrun ARGS fails with status 1 within 60 s,
# no crash, and its errors hold TEXT.
refuses() {
  local args=()
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  run timeout 60 "$NETRUN" "${args[@]}"
  [ "$status" -eq 1 ] || { echo "status $status: ${output:0:2000}"; false; }
  [[ "$output" == *"$2"* ]] || { echo "${output:0:2000}"; false; }
}

@test "100,000 nested parentheses, brackets, ifs and whiles: an error at the limit, no crash" {
  gen parens.net "print('x = ' + '(' * 100000 + '1' + ')' * 100000)"
  gen brackets.net "print('x = ' + '[' * 100000 + '1' + ']' * 100000)"
  gen ifs.net "print('x = 0\n' + 'if x < 1 {\n' * 100000 + 'x = x + 1\n' + '}\n' * 100000)"
  gen whiles.net "print('x = 0\n' + 'while x < 1 {\n' * 100000 + 'x = x + 1\n' + '}\n' * 100000)"
  for f in parens brackets ifs whiles; do
    for verb in dump run "dump --backward"; do
      # shellcheck disable=SC2086
      refuses $verb $f.net -- "error: too deeply nested (more than 256 levels of brackets)"
    done
  done
}

@test "100,000 levels of function calls, and long else if chains: an error at the limit, quickly" {
  gen calls.net "
n = 100000
print(''.join('def f%d(x) {\n  return f%d(x) + 1\n}\n' % (i, i + 1) for i in range(n)))
print('def f%d(x) {\n  return x\n}\ny = f0(1.0)\nprint(y)' % n)"
  refuses dump calls.net -- "calls.net:191:10: error: function calls nested too deeply (more than 64 levels)"
  refuses run calls.net -- "function calls nested too deeply"
  gen elif.net "print('x = 3\ny = 0\nif x == 0 { y = 1 }' + ''.join(' else if x == %d { y = %d }' % (i, i) for i in range(1, 500)))"
  refuses run elif.net -- "error: blocks nested too deeply (more than 256 levels of while, if and else if"
  gen elif2.net "print('x = 3\ny = 0\nif x == 0 { y = 1 }' + ''.join(' else if x == %d { y = %d }' % (i, i) for i in range(1, 100000)))"
  refuses run elif2.net -- "error: expression too deeply nested (more than 1000 levels)"
  gen elif3.net "print('x = 3\ny = 0\nif x == 0 { y = 1 }' + ''.join(' else if x == %d { y = %d }' % (i, i) for i in range(1, 255)) + '\nprint(y)')"
  run "$NETRUN" run elif3.net
  [ "$status" -eq 0 ]
  [ "$output" = 3 ]
}

@test "nesting through function calls is bounded too: blocks, expressions, program size" {
  # 64 functions, each 5 ifs deep, each calling the next inside: 320 levels.
  gen blocks.net "
for i in range(64):
    print('def f%d(x) {' % i + '\n  if x < 1 {' * 5 + ('\n x = f%d(x)' % (i + 1) if i < 63 else '\n x = x + 1') + '\n}' * 5 + '\n return x\n}')
print('y = f0(0)')"
  refuses dump blocks.net -- "error: blocks nested too deeply (more than 256 levels"
  # Each function's body is 60 additions deep around the next call.
  gen exprs.net "
for i in range(64):
    print('def f%d(x) {\n  return %s%s\n}' % (i, 'f%d(x)' % (i + 1) if i < 63 else 'x', ' + x' * 60))
print('y = f0(1.0)')"
  refuses dump exprs.net -- "error: expression nested too deeply (more than 2000 levels, counting the bodies of the functions it calls)"
  # Each function calls the next twice: 2^40 ops.
  gen twice.net "
for i in range(40):
    print('def f%d(x) {\n  return f%d(x) + f%d(x)\n}' % (i, i + 1, i + 1))
print('def f40(x) {\n  return x\n}\ny = f0(1.0)')"
  refuses dump twice.net -- "error: the program is too large: more than 500000 ops (each call of a function adds its ops again)"
}

@test "255 levels of ifs and whiles, and expressions 990 deep, run forward and backward" {
  gen ifs.net "print('param w : [1] = ones()\nx = w\n' + 'if mean(x) < 1 {\n' * 255 + 'x = x * 2\n' + '}\n' * 255 + 'loss = mean(x)')"
  gen whiles.net "print('param w : [1] = ones()\nx = w\ni = 0\n' + 'while i < 1 {\n' * 255 + 'x = x * 2\ni = i + 1\n' + '}\n' * 255 + 'loss = mean(x)')"
  gen chain.net "print('param w : [1] = ones()\ny = ' + ' + '.join(['w'] * 990) + '\nloss = mean(y)')"
  gen calls.net "print('param w : [1] = ones()\ny = ' + 'exp(' * 250 + 'w' + ')' * 250 + '\nloss = mean(y)')"
  for f in ifs whiles chain calls; do
    run "$NETRUN" dump --backward $f.net
    [ "$status" -eq 0 ]
    run "$NETRUN" grad --tape $f.net
    [ "$status" -eq 0 ] || { echo "$f: $output"; false; }
  done
  run "$NETRUN" grad chain.net
  [ "${lines[2]}" = "[990.]" ] || { echo "$output"; false; }
  run "$NETRUN" grad whiles.net
  [ "${lines[2]}" = "[2.]" ] || { echo "$output"; false; }
}

@test "long programs: 100,000 lines, names and functions lower, run and differentiate in seconds" {
  gen lines.net "print('param w : [1] = ones()\nx = w\n' + 'x = x * 1.00001\n' * 100000 + 'loss = mean(x)')"
  gen names.net "print('param x0 : [1] = ones()\n' + ''.join('x%d = x%d + 1\n' % (i + 1, i) for i in range(100000)) + 'loss = mean(x100000)')"
  gen funcs.net "print(''.join('def f%d(x) {\n  return x + %d\n}\n' % (i, i) for i in range(100000)) + 'param w : [1] = ones()\nloss = mean(f99999(f0(w)))')"
  run timeout 120 "$NETRUN" grad lines.net
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "loss = 2.7219107" ]       # 1.00001^100000 in f32 steps
  [ "${lines[2]}" = "[2.7219107]" ]
  run timeout 120 "$NETRUN" grad names.net
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "loss = 100001.0" ]
  [ "${lines[2]}" = "[1.]" ]
  run timeout 120 "$NETRUN" grad funcs.net
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "loss = 100000.0" ]
  # A sum of 100,000 terms is one expression 100,000 deep: refused.
  gen sum.net "print('x = 1.0\ny = x' + ' + x' * 100000)"
  refuses dump sum.net -- "error: expression too deeply nested (more than 1000 levels)"
}

@test "tensors too large are refused before allocating, naming their size" {
  printf 'x = zeros([100000, 100000, 100])\nprint(sum(x))\n' > big.net
  refuses run big.net -- "big.net:1:5: error: zeros: output 'x' of shape [100000, 100000, 100]: it would take 3.64 TiB, more than the 16 GiB one tensor may take"
  # Element counts past 2^63 are refused when lowering.
  printf 'x = zeros([4294967296, 4294967296, 4294967296])\n' > over.net
  refuses run over.net -- "over.net:1:11: error: attribute 'shape' of 'zeros' has too many elements (more than 2^63)"
  printf 'x = ones([3, 4])\ny = reshape(x, [3037000500, 3037000500, -1])\n' > over2.net
  refuses run over2.net -- "over2.net:2:16: error: attribute 'shape' of 'reshape' has too many elements (more than 2^63)"
  # Sizes known only when running: fed, or grown by a loop.
  printf 'input a : f32[N, 1]\ninput b : f32[M]\nc = a * b\nprint(sum(c))\n' > outer.net
  seq 100000 | sed 's/.*/1/' > ones.csv
  refuses run --feed a=ones.csv --feed b=ones.csv outer.net -- "outer.net:3:7: error: mul: output 'c' of shape [100000, 100000]: it would take 37.3 GiB, more than the 16 GiB one tensor may take"
  # The memory limit: all tensors together.
  printf 'x = ones([1000, 1000])\ny = x + 1\nprint(sum(y))\n' > two.net
  refuses run --max-memory 5M two.net -- "two.net:2:7: error: add: output 'y' of shape [1000, 1000]: it would take 3.81 MiB, but only 1.19 MiB of the memory limit of 5 MiB is free (--max-memory)"
  run "$NETRUN" run --max-memory 8M two.net
  [ "$status" -eq 0 ]
  [ "$output" = "2000000.0" ]
  printf 'x = ones([1024, 1024])\nwhile true {\n  x = concat([x, x], axis=0)\n}\n' > grow.net
  refuses run --max-memory 64M grow.net -- "grow.net:3:7: error: concat: output 'x.2' of shape [16384, 1024]: it would take 64 MiB, but only 28 MiB of the memory limit of 64 MiB is free (--max-memory)"
  run "$NETRUN" run --max-memory lots two.net
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --max-memory needs a size, e.g. 512M or 4G" ]
}

@test "--max-steps and Ctrl-C stop runaway loops cleanly" {
  printf 'i = 0\nwhile true {\n  i = i + 1\n}\nprint(i)\n' > forever.net
  run "$NETRUN" run --max-steps 500 forever.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "forever.net:2:1: error: while: the loop ran 500 turns without ending (the limit is --max-steps=500)" ]
  run timeout --preserve-status -s INT 1 "$NETRUN" run --max-steps 1000000000000 forever.net
  [ "$status" -eq 130 ]
  [[ "${lines[0]}" == "forever.net:"*": error: "*"interrupted"* ]]
  # Nested loops: each level has its own limit, Ctrl-C stops them all.
  printf 'i = 0\nwhile true {\n  j = 0\n  while j < 1000000 {\n    j = j + 1\n  }\n  i = i + 1\n}\n' > nested.net
  run timeout --preserve-status -s INT 1 "$NETRUN" run --max-steps 1000000000000 nested.net
  [ "$status" -eq 130 ]
  # grad and time stop the same way.
  run timeout --preserve-status -s INT 1 "$NETRUN" time --max-steps 1000000000000 forever.net
  [ "$status" -eq 130 ]
}

# ---- files written ---------------------------------------------------------------------

@test "new files get the umask's mode; a replaced file keeps its mode" {
  cp "$EX/xor.net" .
  (umask 027 && "$NETRUN" dump -o a.txt xor.net)
  [ "$(stat -c %a a.txt)" = 640 ]
  (umask 022 && "$NETRUN" dump -o b.txt xor.net)
  [ "$(stat -c %a b.txt)" = 644 ]
  chmod 600 b.txt
  "$NETRUN" dump --backward -o b.txt xor.net
  [ "$(stat -c %a b.txt)" = 600 ]
  (umask 002 && "$NETRUN" plot -o c.svg "$ROOT/tests/plot/two_splits.jsonl")
  [ "$(stat -c %a c.svg)" = 664 ]
  mkdir -p examples/data
  cp "$EX/data/xor.csv" examples/data/
  (umask 077 && "$NETRUN" train --epochs 1 --save r.ckpt --log r.jsonl xor.net >/dev/null 2>&1)
  [ "$(stat -c %a r.ckpt)" = 600 ]
  [ "$(stat -c %a r.jsonl)" = 600 ]
  no_temporaries
}

@test "a symbolic link stays a link; a device or a pipe is written in place; a full stdout is an error" {
  cp "$EX/xor.net" .
  "$NETRUN" dump xor.net > want.txt
  echo old > real.txt
  ln -s real.txt link.txt
  "$NETRUN" dump -o link.txt xor.net
  [ -L link.txt ]
  cmp want.txt real.txt
  run "$NETRUN" dump -o /dev/null xor.net
  [ "$status" -eq 0 ]
  [ -c /dev/null ]
  "$NETRUN" dump -o /dev/stdout xor.net | cmp want.txt -
  run "$NETRUN" dump -o /dev/full xor.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: /dev/full: cannot write: No space left on device" ]
  run bash -c '"$0" dump "$1" > /dev/full' "$NETRUN" xor.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: standard output: No space left on device" ]
  printf 'print(1)\n' > p.net
  run bash -c '"$0" run "$1" > /dev/full' "$NETRUN" p.net
  [ "$status" -eq 1 ]
  [[ "$output" == "netrun: error: standard output: "* ]]
  no_temporaries
}

@test "Ctrl-C or SIGTERM while a dump is written: the old file stays, no temporary file" {
  gen lines.net "print('param w : [1] = ones()\nx = w\n' + 'x = x * 1.00001\n' * 100000 + 'loss = mean(x)')"
  for sig in INT TERM; do
    echo old > out.txt
    # (A background job starts with SIGINT ignored: restore it.)
    env --default-signal=INT "$NETRUN" dump --backward -o out.txt lines.net &
    pid=$!
    for _ in $(seq 1 600); do ls out.txt.tmp.* >/dev/null 2>&1 && break; sleep 0.05; done
    ls out.txt.tmp.*                   # caught while writing
    kill -s $sig "$pid"
    status=0
    wait "$pid" || status=$?
    [ "$status" -gt 128 ]
    [ "$(cat out.txt)" = old ]
    no_temporaries
  done
}

@test "reading an endless or a huge file stops at a limit" {
  run "$NETRUN" run /dev/zero
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot read /dev/zero: larger than 1024 MiB" ]
  run "$NETRUN" checkpoint /dev/zero
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: /dev/zero: not a netrun checkpoint (bad magic)" ]
}

# Every writer, each given a target that holds OLD content in folder $1;
# each must fail with status 1 and an error naming its file, leave the old
# contents, and leave no temporary file.  Runs as "${AS[@]}" netrun.
writers_fail() {
  local d=$1 why=$2
  run "${AS[@]}" "$NETRUN" dump -o "$d/out.txt" "$W/xor.net"
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: $d/out.txt: $why" ] || { echo "$output"; false; }
  run "${AS[@]}" "$NETRUN" plot -o "$d/out.svg" "$W/two_splits.jsonl"
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: $d/out.svg: $why" ] || { echo "$output"; false; }
  run "${AS[@]}" "$NETRUN" train --epochs 1 --save "$d/run.ckpt" --data "$W/xor.csv" "$W/xor.net"
  [ "$status" -eq 1 ]
  [[ "$output" == *"netrun: error: $d/run.ckpt: cannot save checkpoint: $why"* ]] || { echo "$output"; false; }
  run "${AS[@]}" "$NETRUN" train --epochs 1 --log "$d/run.jsonl" --data "$W/xor.csv" "$W/xor.net"
  [ "$status" -eq 1 ]
  [[ "$output" == *"netrun: error: $d/run.jsonl: $why"* ]] || { echo "$output"; false; }
  for f in out.txt out.svg run.ckpt run.jsonl; do [ "$(cat "$d/$f")" = OLD ]; done
  [ -z "$(find "$d" -name '*.tmp.*')" ]
}

# A folder every user can reach, holding what the writers read.
shared_inputs() {
  shared_dir
  W=$SHARED_DIR
  cp "$EX/xor.net" "$EX/data/xor.csv" "$ROOT/tests/plot/two_splits.jsonl" "$W/"
  chmod 644 "$W"/*
}

olds() { for f in out.txt out.svg run.ckpt run.jsonl; do echo OLD > "$1/$f"; done; }

@test "writing into a folder without write permission: a clear error, the old files intact" {
  shared_inputs
  mkdir "$W/locked"
  olds "$W/locked"
  chmod 644 "$W/locked"/*
  chmod 555 "$W/locked"
  as_nobody
  writers_fail "$W/locked" "cannot create a temporary file in $W/locked: Permission denied"
}

@test "writing into a read-only file system: a clear error, the old files intact" {
  mkdir ro
  mount -t tmpfs -o size=1m tmpfs ro 2>/dev/null || skip "cannot mount a tmpfs here (needs root)"
  shared_inputs
  olds ro
  mount -o remount,ro ro
  AS=()
  writers_fail ro "cannot create a temporary file in ro: Read-only file system"
}

@test "writing into a full file system: a clear error, the old files intact, no temporary file" {
  mkdir full
  mount -t tmpfs -o size=64k tmpfs full 2>/dev/null || skip "cannot mount a tmpfs here (needs root)"
  shared_inputs
  olds full
  dd if=/dev/zero of=full/filler bs=1k 2>/dev/null || true    # until it is full
  AS=()
  writers_fail full "cannot write: No space left on device"
  # With room for a few lines, a log stops at the first that does not fit,
  # and holds whole lines only.
  rm full/filler full/run.jsonl
  dd if=/dev/zero of=full/filler bs=1k count=40 2>/dev/null
  run "$NETRUN" train --epochs 1000 --log full/run.jsonl --data "$W/xor.csv" "$W/xor.net"
  [ "$status" -eq 1 ]
  [[ "$output" == *"netrun: error: full/run.jsonl: cannot write: No space left on device"* ]] || { echo "$output"; false; }
  [ "$(wc -l < full/run.jsonl)" -gt 10 ]
  jq -c . full/run.jsonl >/dev/null
  [ -z "$(find full -name '*.tmp.*')" ]
}

@test "a training log: appended whole lines; a run killed mid-way leaves only whole lines" {
  cp "$EX/xor.net" .
  mkdir -p examples/data
  cp "$EX/data/xor.csv" examples/data/
  "$NETRUN" train --epochs 100000 --log run.jsonl xor.net >/dev/null 2>&1 &
  pid=$!
  sleep 1
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  [ "$(wc -l < run.jsonl)" -gt 10 ]
  jq -c . run.jsonl >/dev/null
  [ "$(tail -c 1 run.jsonl | od -An -c | tr -d ' ')" = '\n' ]
  # --resume appends to the log.
  "$NETRUN" train --epochs 2 --save r.ckpt --log log.jsonl xor.net >/dev/null 2>&1
  before=$(wc -l < log.jsonl)
  "$NETRUN" train --epochs 3 --resume r.ckpt --log log.jsonl xor.net >/dev/null 2>&1
  [ "$(wc -l < log.jsonl)" -gt "$before" ]
  [ "$(jq -r 'select(.event == "epoch") | .epoch' log.jsonl | tr '\n' ' ')" = "1 2 3 " ]
  no_temporaries
}
