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
