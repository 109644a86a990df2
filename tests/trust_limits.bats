#!/usr/bin/env bats
# trust_limits.bats — issue 15 ("Trust"), items 8 and 10: --max-memory
# bounds every value netrun keeps (datasets, the tape and loop frames, a
# session's entries, a program's ops), and the words netrun prints about
# itself are true (the ops table, "did you mean", where an error happened).

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  cd "$BATS_TEST_TMPDIR"
}

bats_require_minimum_version 1.5.0

# ---- netrun ops and "did you mean" ------------------------------------------------

@test "ops: the table stays in line on adam's long row; control flow runs in the executor" {
  run "$NETRUN" ops
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "op                         gradient   kernel   inputs -> outputs" ]
  grep -qxF "adam                       none       yes      Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow -> ParamOut, Moment1Out, Moment2Out, Beta1PowOut, Beta2PowOut" <<< "$output"
  grep -qxF "while                      dedicated  executor Cond, X[], Input[] -> Out[]  (internal)" <<< "$output"
  grep -qxF "sgd_matmul                 none       yes      Param, X, Y, LearningRate -> ParamOut  (internal)" <<< "$output"
  grep -qxF "relu                       dedicated  yes      X -> Out" <<< "$output"
  # Every row's columns start where the heading's do, past the longest
  # name (softmax_cross_entropy_grad).
  grep -qE '^softmax_cross_entropy_grad +none' <<< "$output"
  [ "$(cut -c28-47 <<< "$output" | sort -u | tr '\n' ,)" = "composite  yes      ,dedicated  executor ,dedicated  yes      ,gradient   kernel   ,none       executor ,none       yes      ," ]
  run "$NETRUN" ops while
  [ "${lines[${#lines[@]} - 2]}" = "kernel: the executor (control flow: it runs the op's blocks)" ]
  [ "${lines[${#lines[@]} - 1]}" = "internal: made by netrun itself (a script cannot call it)" ]
}

@test "did you mean: never an op a script cannot call (where is not share)" {
  printf 'x = ones([2])\ny = where(x)\n' > w.net
  run "$NETRUN" run w.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "w.net:2:5: error: unknown op or function 'where'" ]
  printf 'y = sgd_matmu(1.0)\n' > s.net
  run "$NETRUN" run s.net
  [ "${lines[0]}" = "s.net:1:5: error: unknown op or function 'sgd_matmu'" ]
  run "$NETRUN" ops whre
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: unknown op 'whre'; \`netrun ops\` lists them" ]
  run "$NETRUN" ops relux
  [ "$output" = "netrun: error: unknown op 'relux' (did you mean 'relu'?)" ]
  run --separate-stderr "$NETRUN" repl <<< ':ops shar'
  [ "$stderr" = "<stdin>:1:6: error: unknown op 'shar'
:ops shar
     ^~~~" ]
  # Internal ops are refused when called, as before.
  printf 'y = sgd_matmul(1.0)\n' > c.net
  run "$NETRUN" run c.net
  [ "${lines[0]}" = "c.net:1:5: error: 'sgd_matmul' is used by netrun itself and cannot be called" ]
}

@test "ops batch_norm points at the stdlib's batchnorm" {
  run "$NETRUN" ops batch_norm
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: unknown op 'batch_norm'; the stdlib's nn.net defines the function 'batchnorm' (import \"nn\")" ]
  run "$NETRUN" ops batchnorm
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: no op is named 'batchnorm'; the stdlib's nn.net defines the function 'batchnorm' (import \"nn\")" ]
  run "$NETRUN" ops cross_entropy
  [ "$output" = "netrun: error: no op is named 'cross_entropy'; the stdlib's losses.net defines the function 'cross_entropy' (import \"losses\")" ]
}

# ---- where a runtime error happened -------------------------------------------------

@test "a runtime error inside a function points at the call, as a lowering error does" {
  printf 'def f(x) {\n  i = [0, 1]\n  return gather(x, i + 5)\n}\ndef g(x) {\n  return f(x) * 2\n}\nx = [1.0, 2.0]\ny = g(x)\nprint(y)\n' > fn.net
  run "$NETRUN" run fn.net
  [ "$status" -eq 1 ]
  [ "$output" = "fn.net:3:10: error: gather: index 5 is out of range for axis 0 of size 2
  return gather(x, i + 5)
         ^~~~~~
fn.net:9:5: note: in this call to 'g'
y = g(x)
    ^" ]
  # The same error in lowering (a misspelt op) has the same note.
  printf 'def f(x) {\n  return relux(x)\n}\ny = f([1.0])\n' > low.net
  run "$NETRUN" run low.net
  [ "${lines[3]}" = "low.net:4:5: note: in this call to 'f'" ]
}

@test "Ctrl-C in a loop says which turn of which loop" {
  printf 'def f(x) {\n  i = 0\n  while true {\n    i = i + x\n  }\n  return i\n}\ny = f(1)\n' > loop.net
  run timeout --preserve-status -s INT "${NETRUN_START_SECONDS:-1}" "$NETRUN" run --max-steps 1000000000000 loop.net
  [ "$status" -eq 130 ]
  # The signal finds either an op of the body (or of the condition), or
  # the loop between two turns.
  [[ "${lines[0]}" =~ ^loop\.net:[34]:[0-9]+:\ error:\ [a-z_]+:\ interrupted\ in\ turn\ [1-9][0-9]*\ of\ the\ while\ loop\ at\ loop\.net:3:3$ ||
     "${lines[0]}" =~ ^loop\.net:3:3:\ error:\ while:\ interrupted\ after\ [1-9][0-9]*\ turns$ ]] || { echo "$output"; false; }
  [ "${lines[3]}" = "loop.net:8:5: note: in this call to 'f'" ]
}
