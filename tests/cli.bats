#!/usr/bin/env bats
# cli.bats — the command line: verbs, options, exit statuses, hostile input.

bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  EX=$BATS_TEST_DIRNAME/../examples
  cd "$BATS_TEST_TMPDIR"
}

@test "--version prints the version, the OpenBLAS and threads it runs on, and the oneDNN of its larger products" {
  run "$NETRUN" --version
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 3 ]
  [[ "${lines[0]}" =~ ^netrun\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
  [[ "${lines[1]}" =~ ^OpenBLAS\ [0-9.]+\ \((OpenMP|pthreads|sequential)\ build,\ [A-Za-z0-9]+\ kernels\),\ [0-9]+\ threads?\;\ netrun\'s\ loops ]]
  [[ "${lines[2]}" =~ ^oneDNN\ [0-9]+\.[0-9]+\.[0-9]+,\ f32\ products\ of\ 65536\ multiply-adds\ and\ more,\ in\ (AVX-512|AVX2|SSE4.1\ or\ AVX)$ ]]
  # oneDNN's own variable bounds its vectors; NETRUN_TEST_GEMM=openblas
  # sends every product to OpenBLAS
  run env DNNL_MAX_CPU_ISA=SSE41 "$NETRUN" --version
  [[ "${lines[2]}" == *", in SSE4.1 or AVX" ]]
  run env NETRUN_TEST_GEMM=openblas "$NETRUN" --version
  [[ "${lines[2]}" =~ ^oneDNN\ [0-9.]+,\ not\ used\ \(NETRUN_TEST_GEMM=openblas\)$ ]]
  # The OpenMP build (the Makefile's choice when Debian's is installed)
  # takes its threads from OMP_NUM_THREADS, for GEMMs and loops alike.
  if [[ "${lines[1]}" == *OpenMP\ build* ]]; then
    run env OMP_NUM_THREADS=1 "$NETRUN" --version
    [[ "${lines[1]}" == *"(OpenMP build, "*" kernels), 1 thread; netrun's loops share it" ]]
  fi
}

@test "OpenBLAS's kernels: never those without AVX2 on a CPU with AVX2 and FMA (0.3.21 takes its SSE3 ones on CPUs it does not know), unless OPENBLAS_CORETYPE says so" {
  run env -u OPENBLAS_CORETYPE "$NETRUN" --version
  [ "$status" -eq 0 ]
  if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    [[ "${lines[1]}" =~ \ (Haswell|SkylakeX|Cooperlake|SapphireRapids|Zen)\ kernels\) ]] || { echo "${lines[1]}"; return 1; }
  fi
  # the user's choice is kept, whatever it is
  run env OPENBLAS_CORETYPE=Prescott "$NETRUN" --version
  [[ "${lines[1]}" == *"(OpenMP build, Prescott kernels), "* || "${lines[1]}" != *"OpenMP build"* ]]
  # and the same numbers as with the AVX2 kernels chosen by hand: an f32
  # product of 7 x 300 by 300 x 5 (OpenBLAS: under oneDNN's 65536)
  cat > mm.net <<'NET'
input a : f32[7, 300] = uniform_random([7, 300], min=-1.0, max=1.0, seed=3)
input b : f32[300, 5] = uniform_random([300, 5], min=-1.0, max=1.0, seed=4)
print(a @ b)
NET
  run env -u OPENBLAS_CORETYPE "$NETRUN" run --precision 9 mm.net
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 7 ]
  if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo &&
     [[ "$(env -u OPENBLAS_CORETYPE "$NETRUN" --version)" == *"Haswell kernels"* ]]; then
    [ "$output" = "$(OPENBLAS_CORETYPE=Haswell "$NETRUN" run --precision 9 mm.net)" ]
  fi
}

@test "the NETRUN_TEST_ variables: a value netrun does not know is refused with its exact error (status 2), empty or default is unset" {
  while IFS='|' read -r var val want; do
    run env "$var=$val" "$NETRUN" --version
    echo "$var=$val: $output"
    [ "$status" -eq 2 ]
    [ "$output" = "netrun: error: $var=$val: expected $want (a setting for netrun's own tests, netrun(1))" ]
  done <<'EOF2'
NETRUN_TEST_ISA|avx512|avx2, scalar or default
NETRUN_TEST_ISA|AVX2|avx2, scalar or default
NETRUN_TEST_CONV|wino|gemm, direct, pv, cv, winograd or default
NETRUN_TEST_CONV|gemm |gemm, direct, pv, cv, winograd or default
NETRUN_TEST_GEMM|dnnl|openblas or default
NETRUN_TEST_NO_THREAD_MULTIPLE|yes|1
NETRUN_TEST_SLOW_STEP|1:x|R:S, a rank and seconds below 3600
NETRUN_TEST_CUT|1:3600|R:S, a rank and seconds below 3600
NETRUN_TEST_CUT|-1:1|R:S, a rank and seconds below 3600
EOF2
  # the values the tests use, default, and empty, run
  for kv in NETRUN_TEST_ISA=avx2 NETRUN_TEST_ISA=scalar NETRUN_TEST_ISA= NETRUN_TEST_ISA=default \
            NETRUN_TEST_CONV=default NETRUN_TEST_GEMM=default NETRUN_TEST_CONV=pv NETRUN_TEST_CONV=cv \
            NETRUN_TEST_CONV=direct NETRUN_TEST_CONV=gemm NETRUN_TEST_GEMM=openblas NETRUN_TEST_CUT=1:1 \
            NETRUN_TEST_SLOW_STEP=0:2.5 NETRUN_TEST_NO_THREAD_MULTIPLE=1; do
    run env "$kv" "$NETRUN" --version
    echo "$kv: $output"
    [ "$status" -eq 0 ]
  done
  # and a script is not run under a refused one
  echo 'print(1)' > p.net
  run env NETRUN_TEST_ISA=avx "$NETRUN" p.net
  [ "$status" -eq 2 ]
  [ "${#lines[@]}" -eq 1 ]
}

@test "idle OpenMP threads sleep (OMP_WAIT_POLICY=PASSIVE) unless the user sets the policy; the verbs that run no op start once" {
  if [[ "$("$NETRUN" --version)" != *OpenMP\ build* ]]; then skip "not the OpenMP build"; fi
  # netrun sets the variable and starts itself again (libgomp reads it
  # before main): --version and every verb that runs ops see it.
  run env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$NETRUN" --version
  [ "$status" -eq 0 ]
  [[ "${lines[1]}" == *"(OpenMP build, "*" kernels), 2 threads; netrun's loops share them; OMP_WAIT_POLICY=PASSIVE" ]]
  run env OMP_WAIT_POLICY=active OMP_NUM_THREADS=2 "$NETRUN" --version
  [[ "${lines[1]}" == *"; netrun's loops share them; OMP_WAIT_POLICY=active" ]]
  # The process that runs the script is the one started again: its
  # environment has the policy (read from /proc while it waits on stdin).
  (sleep 1; echo 'print(6 * 7)') | env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$NETRUN" repl > out 2>&1 &
  local pid=$!
  sleep 0.5
  tr '\0' '\n' < "/proc/$pid/environ" > env.txt
  wait "$pid"
  grep -qx 'OMP_WAIT_POLICY=PASSIVE' env.txt
  [ "$(cat out)" = "42" ]
  # dump runs no op: it is not started again, the variable stays unset
  (sleep 1; echo 'x = 1.0') | env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$NETRUN" dump /dev/stdin > dump.out 2>&1 &
  pid=$!
  sleep 0.5
  tr '\0' '\n' < "/proc/$pid/environ" > env2.txt
  wait "$pid"
  grep -q '^block 0' dump.out
  run grep -c 'OMP_WAIT_POLICY' env2.txt
  [ "$output" = "0" ]
}

@test "--help lists the verbs and exits 0" {
  run "$NETRUN" --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"usage: netrun VERB"* ]]
  for v in dump ops run time summary grad gradcheck train eval predict lr-find plot repl help; do
    [[ "$output" == *"netrun $v"* ]]
  done
}

@test "an unknown verb is a usage error that lists the verbs" {
  run "$NETRUN" dumb
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: unknown verb 'dumb' (did you mean 'dump'?)" ]
  [ "${lines[1]}" = "verbs: dump fmt lsp ops run time summary grad gradcheck train eval predict lr-find plot data checkpoint export import sample repl help" ]
}

@test "an unknown option is a usage error" {
  run "$NETRUN" dump --frobnicate x.net
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: dump: unknown option '--frobnicate'" ]
}

@test "option errors suggest the option meant, repeat the bad value and point at the verb's help" {
  printf 'x = 1\n' > m.net
  run --separate-stderr "$NETRUN" train --epoch 3 m.net
  [ "$status" -eq 2 ]
  [ "$stderr" = "netrun: train: unknown option '--epoch' (did you mean '--epochs'?)
Try 'netrun train --help'." ]
  run --separate-stderr "$NETRUN" train --epochs=abc m.net
  [ "$status" -eq 2 ]
  [ "$stderr" = "netrun: --epochs needs a whole number of at least 1, not 'abc'
Try 'netrun train --help'." ]
  run --separate-stderr "$NETRUN" eval --wieghts w.ckpt m.net
  [ "$stderr" = "netrun: eval: unknown option '--wieghts' (did you mean '--weights'?)
Try 'netrun eval --help'." ]
  # a script run without a verb points at run's help; netrun's own options at netrun's
  run --separate-stderr "$NETRUN" m.net --sead 3
  [ "$stderr" = "netrun: run: unknown option '--sead' (did you mean '--seed'?)
Try 'netrun run --help'." ]
  run --separate-stderr "$NETRUN" --frobnicate
  [ "$stderr" = "netrun: unknown option '--frobnicate'
Try 'netrun --help'." ]
}

@test "dump without a file is a usage error" {
  run "$NETRUN" dump
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: dump needs a FILE" ]
}

@test "an unknown format is a usage error" {
  run "$NETRUN" dump --format yaml "$EX/xor.net"
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: unknown format 'yaml' (expected text, dot or json)" ]
}

@test "help VERB describes the verb" {
  run "$NETRUN" help dump
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "usage: netrun dump [OPTIONS] FILE" ]
  [[ "$output" == *"  --backward         append the backward program (append_backward)"* ]]
  run "$NETRUN" help nothing
  [ "$status" -eq 2 ]
}

@test "VERB --help and VERB -h, anywhere after the verb, print netrun help VERB on stdout, for every verb" {
  run "$NETRUN" dumb
  verbs=$(sed -n 's/^verbs: //p' <<<"$output")
  [ "$(wc -w <<<"$verbs")" -ge 14 ]
  for v in $verbs; do
    want=$("$NETRUN" help "$v")
    [[ "$want" == "usage: netrun $v"* ]]
    for args in "--help" "-h" "x.net --help" "--frobnicate -h" "--seed=x x.net y.net --help"; do
      # shellcheck disable=SC2086  # one argument per word
      run --separate-stderr "$NETRUN" "$v" $args
      [ "$status" -eq 0 ] || { echo "netrun $v $args: status $status"; return 1; }
      [ "$output" = "$want" ] || { echo "netrun $v $args:"; echo "$output"; return 1; }
      [ -z "$stderr" ]
    done
  done
  # The same for a script run without a verb, and for --dump-backward.
  run "$NETRUN" "$EX/xor.net" --help
  [ "$status" -eq 0 ]
  [ "$output" = "$("$NETRUN" help run)" ]
  run "$NETRUN" --dump-backward "$EX/xor.net" -h
  [ "$status" -eq 0 ]
  [ "$output" = "$("$NETRUN" help dump)" ]
}

@test "a missing file is a clear error" {
  run "$NETRUN" dump nowhere.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot read nowhere.net: No such file or directory" ]
}

@test "ops lists every op with its gradient kind" {
  run "$NETRUN" ops
  [ "$status" -eq 0 ]
  # Which ops exist is the registry's to say (netrun-ops(7)'s OP LIST is
  # generated from this listing, tests/registry.bats): here, its form.
  # Each op once, sorted, each line well formed, each name one `ops NAME`
  # describes.
  [ "${lines[0]}" = "op                         gradient   kernel   inputs -> outputs" ]
  names=$(printf '%s\n' "${lines[@]:1}" | awk '{ print $1 }')
  [ "$(wc -l <<<"$names")" -gt 140 ]
  [ "$names" = "$(LC_ALL=C sort -u <<<"$names")" ]
  bad=$(printf '%s\n' "${lines[@]:1}" |
        grep -vE '^[a-z_0-9]+ +(none|composite|dedicated) +(yes|no) +[][A-Za-z0-9@, ]* ->( [][A-Za-z0-9@, ]*)?(  \(internal[^)]*\))?$' || true)
  [ -z "$bad" ] || { echo "malformed: $bad"; false; }
  for op in $names; do
    [ "$("$NETRUN" ops "$op" | head -1 | cut -d: -f1)" = "$op" ] || { echo "ops $op"; false; }
  done
  grep -qE '^matmul +composite +yes +X, Y -> Out$' <<<"$output"
  grep -qE '^conv2d +dedicated +yes +Input, Filter -> Output$' <<<"$output"
  grep -qE '^less_than +none +yes +X, Y -> Out$' <<<"$output"
}

@test "ops NAME prints the proto" {
  run "$NETRUN" ops leaky_relu
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "leaky_relu: Out = X if X > 0 else alpha * X" ]
  [[ "$output" == *"alpha        float       = 0.01  slope for X < 0"* ]]
  [[ "$output" == *"gradient: dedicated"* ]]
  run "$NETRUN" ops relux
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: unknown op 'relux' (did you mean 'relu'?)" ]
}

@test "dump --format dot renders with Graphviz" {
  run "$NETRUN" dump --format dot "$EX/rnn.net"
  [ "$status" -eq 0 ]
  "$NETRUN" dump --format dot "$EX/rnn.net" | dot -Tsvg > rnn.svg
  grep -q '<svg' rnn.svg
  grep -q 'cluster_1' <<<"$output"
}

@test "dump --format json is valid JSON with the program's blocks" {
  "$NETRUN" dump --format json "$EX/fashion_mlp.net" > p.json
  [ "$(jq '.blocks | length' p.json)" = 1 ]
  [ "$(jq -r '.blocks[0].vars[] | select(.name == "dense.W") | .shape | map(tostring) | join(",")' p.json)" = "784,512" ]
  [ "$(jq -r '.blocks[0].ops[0].type' p.json)" = matmul ]
  [ "$(jq -r '.blocks[0].vars[] | select(.name == "x") | .shape[0]' p.json)" = B ]
  "$NETRUN" dump --format json "$EX/rnn.net" | jq -e '.blocks[1].parent == 0' >/dev/null
}

@test "dump output is deterministic" {
  for f in "$EX"/*.net; do
    a=$("$NETRUN" dump --startup --lines "$f")
    b=$("$NETRUN" dump --startup --lines "$f")
    [ "$a" = "$b" ]
  done
}

@test "dump -o writes the file atomically and keeps the old one on error" {
  run "$NETRUN" dump -o out.txt "$EX/xor.net"
  [ "$status" -eq 0 ]
  [ "$(head -1 out.txt)" = "block 0 (parent -1)" ]
  printf 'x = relux(1)\n' > bad.net
  cp out.txt before.txt
  run "$NETRUN" dump -o out.txt bad.net
  [ "$status" -eq 1 ]
  cmp out.txt before.txt
  [ -z "$(ls | grep tmp)" ]
}

@test "an empty file is an empty program" {
  : > empty.net
  run "$NETRUN" dump empty.net
  [ "$status" -eq 0 ]
  [ "$output" = "block 0 (parent -1)" ]
}

@test "100,000 nested parentheses: an error, no crash" {
  { printf 'x = '; head -c 100000 /dev/zero | tr '\0' '('; printf '1'; head -c 100000 /dev/zero | tr '\0' ')'; echo; } > deep.net
  run "$NETRUN" dump deep.net
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" == "deep.net:1:"*": error: too deeply nested (more than 256 levels of brackets)" ]]
}

@test "100,000 nested unary minus and a 100,000-term sum: errors, no crash" {
  { printf 'x = '; for i in $(seq 1000); do printf '%0.s- ' $(seq 100); done; echo 1; } > neg.net
  run "$NETRUN" dump neg.net
  [ "$status" -eq 1 ]
  [[ "$output" == *"error: expression too deeply nested (more than 1000 levels)"* ]]
  { printf 'x = 1'; for i in $(seq 1000); do printf '%0.s + 1' $(seq 100); done; echo; } > sum.net
  run "$NETRUN" dump sum.net
  [ "$status" -eq 1 ]
  [[ "$output" == *"error: expression too deeply nested (more than 1000 levels)"* ]]
}

@test "a 10 MB line is handled" {
  { printf 'x = "'; head -c 10000000 /dev/zero | tr '\0' 'a'; printf '"\n'; } > long.net
  run "$NETRUN" dump long.net
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" == "long.net:1:5: error: a string is not a value; strings can only be attributes" ]]
  [ "${#lines[1]}" -lt 200 ]
}

@test "binary garbage gets capped errors, no crash" {
  head -c 4096 /bin/ls > garbage.net
  run "$NETRUN" dump garbage.net
  [ "$status" -eq 1 ]
  [[ "$output" == *"netrun: too many errors;"* || "$output" == *"errors"* ]]
  [ "$(grep -c ': error: ' <<<"$output")" -le 20 ]
}

@test "a truncated file says which bracket is never closed" {
  printf 'def f(x) {\n  return relu(x\n' > trunc.net
  run "$NETRUN" dump trunc.net
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" == "trunc.net:2:14: error: unclosed '('"* ]]
}

@test "man pages render without warnings" {
  for page in netrun.1 netrun-lang.5; do
    out=$(MANWIDTH=80 man --warnings -E UTF-8 -l "$BATS_TEST_DIRNAME/../man/$page" 2>&1 >/dev/null)
    [ -z "$out" ] || { echo "$out"; return 1; }
  done
}

@test "make install puts the binary, stdlib and man pages under DESTDIR" {
  make -C "$BATS_TEST_DIRNAME/.." -s install PREFIX=/usr DESTDIR="$BATS_TEST_TMPDIR/root" >/dev/null
  [ -x root/usr/bin/netrun ]
  [ -f root/usr/share/netrun/stdlib/nn.net ]
  [ -f root/usr/share/man/man1/netrun.1 ]
  [ -f root/usr/share/man/man5/netrun-lang.5 ]
  printf 'import "nn"\ninput x : f32[2, 3]\nparam W : [3, 4] = zeros()\nparam b : [4] = zeros()\nloss = mean(linear(x, W, b))\n' > m.net
  run root/usr/bin/netrun dump m.net
  [ "$status" -eq 0 ]
  [[ "$output" == *"= matmul(X=[x], Y=[W])"* ]]
}

@test "imports search NETRUN_PATH and report cycles" {
  mkdir -p lib
  printf 'def twice(x) {\n  return x * 2\n}\n' > lib/util.net
  printf 'import "util"\ninput x : f32[3]\nloss = sum(twice(x))\n' > main.net
  run "$NETRUN" dump main.net
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" == "main.net:1:1: error: cannot find 'util.net' (searched ."* ]]
  NETRUN_PATH=lib run "$NETRUN" dump main.net
  [ "$status" -eq 0 ]
  printf 'import "b"\n' > a.net
  printf 'import "a"\n' > b.net
  run "$NETRUN" dump a.net
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" == "b.net:1:1: error: import cycle: a.net -> b.net -> a.net" ]]
}

@test "a FILE of '-' is the script on standard input: run, netrun -, dump, train (its data found from the current folder); errors name <stdin>" {
  run "$NETRUN" run - <<< 'print([1.0, 2.0] * 3.0)'
  [ "$status" -eq 0 ]
  [ "$output" = "[3. 6.]" ]
  run "$NETRUN" - <<< 'print(2.0 * 21.0)'
  [ "$status" -eq 0 ]
  [ "$output" = "42.0" ]
  run "$NETRUN" run - <<< $'x = [1.0, 2.0]\ny = x +* 3.0'
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "<stdin>:2:8: error: syntax error: unexpected '*', expecting an expression" ]
  [ "${lines[2]}" = "       ^" ]
  mkdir d
  printf 'x1,x2,y\n0,0,0\n0,1,1\n1,0,1\n1,1,0\n' > d/xor.csv
  cat > d/m.net <<'NET'
input x : f32[B, 2]
input y : f32[B, 1]
param W : [2, 1] = zeros()
loss = mean((x @ W - y) ** 2)
train {
  data   = "xor.csv"
  lr     = 0.1
  batch  = 2
  epochs = 2
}
NET
  [ "$("$NETRUN" dump - < d/m.net)" = "$("$NETRUN" dump d/m.net)" ]
  # train reads the script twice (its settings, then its program): the
  # same text both times
  (cd d && "$NETRUN" train - --save s.ckpt < m.net > ../out 2>&1)
  grep -q '^training <stdin>: 4 examples, 2 steps of 2 per epoch, sgd lr 0.1, 2 epochs$' out
  "$NETRUN" train d/m.net --save f.ckpt > /dev/null 2>&1
  cmp d/s.ckpt f.ckpt
  run "$NETRUN" train - < d/m.net
  [ "$status" -eq 1 ]
  [[ "$output" == *"netrun: error: cannot read xor.csv: No such file or directory"* ]]
  run "$NETRUN" -x
  [ "$status" -eq 2 ]
  [[ "$output" == *"unknown option '-x'"* ]]
}
