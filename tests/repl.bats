#!/usr/bin/env bats
# repl.bats — the interactive session: driven through a pipe for every
# statement kind, command and error path (exact output), and through a
# pseudo-terminal (tmux) for prompts, completion, multi-line input, Ctrl-C,
# Ctrl-D and history.

bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  EX=$BATS_TEST_DIRNAME/../examples
  cd "$BATS_TEST_TMPDIR"
  export HOME=$BATS_TEST_TMPDIR/home
  mkdir -p "$HOME"
}

# repl [ARGS...] < input: stdout and stderr apart.
repl() {
  run --separate-stderr "$NETRUN" repl "$@"
}

@test "a piped session prints the values of expressions and nothing else" {
  repl <<< $'x = 2\nx * 3'
  [ "$status" -eq 0 ]
  [ "$output" = "6" ]
  [ "$stderr" = "" ]
}

@test "netrun without arguments reads a session from a pipe" {
  run --separate-stderr "$NETRUN" <<< $'x = [1, 2]\nx + 1'
  [ "$status" -eq 0 ]
  [ "$output" = "[2 3]" ]
  [ "$stderr" = "" ]
  run "$NETRUN" < /dev/null
  [ "$status" -eq 0 ]
  [ "$output" = "" ]
}

@test "every kind of statement works as in a script" {
  repl <<'IN'
input z : f32[2] = [0.5, 1.5]
param W : [2, 2] = [[1, 2], [3, 4]]
def double(v) {
  return v * 2
}
h = double(z @ W)
h
a, b = split(h, num=2)
b
i = 0
while i < 3 {
  i = i + 1
}
if i > 2 { s = 1.0 } else { s = -1.0 }
s
print(i, s)
1 < 2
import "nn"
relu([-1.0, 2.0])
op sq(x) -> (y) {
  y = x * x
} grad {
  x@GRAD = y@GRAD * 2 * x
}
:ops sq
train { epochs = 2 }
h = h - 1.0; h
IN
  [ "$status" -eq 0 ]
  [ "$stderr" = "" ]
  [ "$output" = "[10. 14.]
[14.]
1.0
3 1.0
True
[0. 2.]
sq: defined in <stdin>
inputs:
  x            input
outputs:
  y            output
attributes:
  (none)
gradient: composite
kernel: yes
[ 9. 13.]" ]
}

@test "a call with no value shows nothing; a function's first value is shown" {
  repl <<'IN'
def two(a) {
  return a, a * 2
}
def say(a) {
  print(a)
}
two(3)
say(4)
print(5)
IN
  [ "$status" -eq 0 ]
  [ "$output" = $'3\n4\n5' ]
}

@test "values print in the order the statements of a line run" {
  repl <<< 'x = 1; x; print(x + 1); x + 2'
  [ "$output" = $'1\n2\n3' ]
}

@test "an error leaves the session as it was, and the piped session fails" {
  repl <<'IN'
x = 1
x = x + nosuch
x
a = 10; b = nosuch
a
op f(u) -> (v) { v = u }; q = nosuch
:ops f
import "nn"; q = nosuch
linear
import "nn"
linear(ones([1, 2]), ones([2, 1]), zeros([1]))
IN
  [ "$status" -eq 1 ]
  [ "$output" = $'1\n[[2.]]' ]
  [ "$stderr" = "<stdin>:2:9: error: unknown name 'nosuch'
x = x + nosuch
        ^~~~~~
<stdin>:4:13: error: unknown name 'nosuch'
a = 10; b = nosuch
            ^~~~~~
<stdin>:5:1: error: unknown name 'a'
a
^
<stdin>:6:31: error: unknown name 'nosuch'
op f(u) -> (v) { v = u }; q = nosuch
                              ^~~~~~
<stdin>:7:6: error: unknown op 'f'
:ops f
     ^
<stdin>:8:18: error: unknown name 'nosuch'
import \"nn\"; q = nosuch
                 ^~~~~~
<stdin>:9:1: error: unknown name 'linear'
linear
^~~~~~" ]
}

@test "a statement that fails while running is undone: values, ops, tape" {
  repl --max-steps 5 <<'IN'
param W : [2] = [1.0, 2.0]
i = 0
h = W * 2; while true { i = i + 1 }
i
h
:program
:tape
IN
  [ "$status" -eq 1 ]
  [ "$stderr" = "<stdin>:3:12: error: while: the loop ran 5 turns without ending (the limit is --max-steps=5)
h = W * 2; while true { i = i + 1 }
           ^~~~~
<stdin>:5:1: error: unknown name 'h'
h
^" ]
  [ "$output" = "0
block 0 (parent -1)
  var W : f32[2] param
  var i : i64[]
  {Out=[i]} = fill_constant() {dtype=i64, shape=[], value=0.0}
block 0 (parent -1)" ]
}

@test "the random generator is rolled back with a failed statement" {
  fresh=$(printf 'param A : [3] = uniform(0, 1)\nA\nuniform_random([2])\n' | "$NETRUN" repl)
  repl --max-steps 3 <<'IN'
param A : [3] = uniform(0, 1); nope
r = uniform_random([2]); i = 0; while true { i = i + 1 }
param A : [3] = uniform(0, 1)
A
uniform_random([2])
IN
  [ "$status" -eq 1 ]
  [ "$output" = "$fresh" ]
  [ "${#lines[@]}" -eq 2 ]
  other=$(printf 'param A : [3] = uniform(0, 1)\nA\n' | "$NETRUN" repl --seed 1)
  [ "${lines[0]}" != "$other" ]
}

@test "an open bracket continues the statement on the next line" {
  repl <<'IN'
f = [1.0,
     2.0]
g = relu(
  f * -1.0
)
while f[0] < 3.0 {
  f = f + 1.0
}
f
g = (f +
IN
  [ "$status" -eq 1 ]
  [ "$output" = "[3. 4.]" ]
  [ "$stderr" = "<stdin>:10:5: error: unclosed '(' (it is never closed)
g = (f +
    ^" ]
}

@test "an expression whose value waits for an input not fed is an error" {
  printf 'input x : f32[B, 2]\ny = x * 2\nz = sum(y)\n' > m.net
  repl m.net <<'IN'
:vars
y
print(z)
:grad z
:shape z
w = y + 1
:vars
IN
  [ "$status" -eq 1 ]
  [ "$output" = "name  dtype  shape   kind
x     f32    [B, 2]  input, not fed
y     f32    [B, 2]  value, waits for input 'x'
z     f32    []      value, waits for input 'x'
f32[]
name  dtype  shape   kind
x     f32    [B, 2]  input, not fed
y     f32    [B, 2]  value, waits for input 'x'
z     f32    []      value, waits for input 'x'
w     f32    [B, 2]  value, waits for input 'x'" ]
  [ "$stderr" = "<stdin>:2:1: error: no value to show: it depends on input 'x', which was not fed
y
^
<stdin>:3:1: error: print: 'z' has no value: it depends on input 'x', which was not fed
print(z)
^~~~~
<stdin>:4:7: error: 'z' has no value: it depends on input 'x', which was not fed
:grad z
      ^" ]
}

@test "repl FILE runs the file first; --set and --feed feed its inputs" {
  printf 'input x : f32[2]\ny = x * 2\nprint(y)\n' > m.net
  printf '1.5\n-2\n' > x.csv
  repl --set 'x=[1, 2]' m.net <<< $'y + 1\n:vars'
  [ "$status" -eq 0 ]
  [ "$output" = "[2. 4.]
[3. 5.]
name  dtype  shape  kind
x     f32    [2]    input
y     f32    [2]    value" ]
  repl --feed x=x.csv m.net <<< 'y'
  [ "$output" = $'[ 3. -4.]\n[ 3. -4.]' ]
  repl --set 'q=1' m.net <<< 'y'
  [ "$status" -eq 1 ]
  [ "$output" = "" ]
  [ "$stderr" = "netrun: error: --set q=1: the script has no input named 'q'" ]
}

@test "repl FILE with errors reports them and starts empty" {
  printf 'x = 1\ny = nosuch\n' > bad.net
  repl bad.net <<< $'x\nz = 3\nz'
  [ "$status" -eq 1 ]
  [ "$output" = "3" ]
  [ "$stderr" = "bad.net:2:5: error: unknown name 'nosuch'
y = nosuch
    ^~~~~~
<stdin>:1:1: error: unknown name 'x'
x
^" ]
}

@test "repl: usage errors and unreadable files" {
  run "$NETRUN" repl --set x=1
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: repl: --set and --feed feed the inputs of a FILE" ]
  run "$NETRUN" repl a.net b.net
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: repl takes one file, got a second: 'b.net'" ]
  run "$NETRUN" repl --bogus
  [ "$status" -eq 2 ]
  run "$NETRUN" repl nowhere.net < /dev/null
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot read nowhere.net: No such file or directory" ]
}

@test ":vars lists names, dtypes, shapes and kinds in binding order" {
  repl <<'IN'
input x : f32[2] = [1.0, 2.0]
param W : [2, 3] = zeros()
def f(a) {
  return a
}
h = x @ W
n = 3
b = n > 2
h = h + 1.0
:vars
IN
  [ "$status" -eq 0 ]
  [ "$output" = "name  dtype  shape   kind
x     f32    [2]     input
W     f32    [2, 3]  param
f     -      -       function
h     f32    [3]     value
n     i64    []      value
b     bool   []      value" ]
}

@test ":shape infers without running or binding anything" {
  repl <<'IN'
input x : f32[B, 4]
param W : [4, 3] = zeros()
:shape x @ W
:shape sum(x, axis=1) > 0
:shape W
t = x @ W
:shape t[:, 0]
:shape W @ W
:shape
:shape 1; 2
:shape print(W)
:shape W +
:vars
IN
  [ "$status" -eq 1 ]
  [ "$output" = "f32[B, 3]
bool[B]
f32[4, 3]
f32[B]
name  dtype  shape   kind
x     f32    [B, 4]  input, not fed
W     f32    [4, 3]  param
t     f32    [B, 3]  value, waits for input 'x'" ]
  [ "$stderr" = "<stdin>:8:10: error: matmul: X has shape [4, 3] and Y has shape [4, 3]: inner dimensions 3 and 4 differ
:shape W @ W
         ^
<stdin>:9:1: error: usage: :shape EXPR
:shape
^~~~~~
<stdin>:10:1: error: :shape takes one expression
:shape 1; 2
^~~~~~~~~~~
<stdin>:11:8: error: this expression gives no value
:shape print(W)
       ^~~~~~~~
<stdin>:12:11: error: syntax error: unexpected end of file, expecting an expression
:shape W +
          ^" ]
}

@test ":program and :tape are what dump and run --dump-tape print for the saved session" {
  repl <<'IN'
param W : [2, 2] = [[1, 2], [3, 4]]
x = [[1.0, -1.0]]
h = x @ W
k = 0
while k < 2 {
  h = tanh(h) * 0.5
  k = k + 1
}
loss = mean(h * h)
:save s.net
:program
:tape
IN
  [ "$status" -eq 0 ]
  [ "$stderr" = "" ]
  "$NETRUN" dump s.net > dump.txt
  "$NETRUN" run --dump-tape s.net > tape.txt
  [ "$output" = "$(cat dump.txt tape.txt)" ]
  grep -q 'h.2#1' tape.txt
}

@test ":backward prints the program with the backward, then forgets it" {
  repl <<'IN'
param W : [2] = [1.0, -2.0]
x = [3.0, 4.0]
loss = sum(W * x)
:backward loss
:program
:backward loss W
:backward x
:backward nosuch
IN
  [ "$status" -eq 1 ]
  [ "$output" = "block 0 (parent -1)
  var W : f32[2] param
  var x : f32[2]
  var t.1 : f32[2]
  var loss : f32[]
  var loss@GRAD : f32[]
  var t.1@GRAD : f32[2]
  var W@GRAD : f32[2]
  {Out=[x]} = assign_value() {dtype=f32, shape=[2], values=[3.0, 4.0]}
  {Out=[t.1]} = mul(X=[W], Y=[x])
  {Out=[loss]} = sum(X=[t.1]) {axis=[], keepdim=false}
  {Out=[loss@GRAD]} = fill_constant() {dtype=f32, shape=[], value=1.0}
  {X@GRAD=[t.1@GRAD]} = sum_grad(X=[t.1], Out@GRAD=[loss@GRAD]) {axis=[], keepdim=false}  # grad of sum at <stdin>:3
  {Out=[W@GRAD]} = mul(X=[t.1@GRAD], Y=[x])  # grad of mul at <stdin>:3
block 0 (parent -1)
  var W : f32[2] param
  var x : f32[2]
  var t.1 : f32[2]
  var loss : f32[]
  {Out=[x]} = assign_value() {dtype=f32, shape=[2], values=[3.0, 4.0]}
  {Out=[t.1]} = mul(X=[W], Y=[x])
  {Out=[loss]} = sum(X=[t.1]) {axis=[], keepdim=false}
$(sed -n 1,14p <<< "$output")" ]
  [ "$stderr" = "<stdin>:2:5: error: the loss 'x' must be a float scalar (f32 or f64), but it is f32[2] (reduce it, e.g. with mean)
x = [3.0, 4.0]
    ^~~~~~~~~~
<stdin>:8:11: error: unknown name 'nosuch'
:backward nosuch
          ^~~~~~" ]
}

@test ":backward of a loop gives a while_grad, like dump --backward of the saved session" {
  repl <<'IN'
param V : [2, 2] = [[1.0, 0.5], [-0.5, 0.25]]
g = [[2.0, 1.0]]
n = 3
while n > 0 {
  g = sigmoid(g @ V) * 2.0
  n = n - 1
}
loss = mean(g)
:save s.net
:backward loss
IN
  [ "$status" -eq 0 ]
  [[ "$output" == *"while_grad("* ]]
  diff <("$NETRUN" dump --backward s.net | sed 's/  # .*//') <(sed 's/  # .*//' <<< "$output")
}

@test ":grad differentiates the tape, as grad --tape does the saved session" {
  repl <<'IN'
param W : [2, 2] = [[0.5, -0.5], [0.25, 1.0]]
param b : [2] = [0.1, 0.2]
param unused : [1] = [1.0]
h = [[1.0, 2.0]]
k = 0
while k < 3 {
  h = tanh(h @ W + b)
  k = k + 1
}
if sum(h) > 0 { out = h * 2.0 } else { out = h }
loss = mean(out * out)
:save s.net
:grad loss
:grad loss b
:grad loss h
IN
  [ "$status" -eq 0 ]
  [ "$stderr" = "" ]
  expect=$("$NETRUN" grad --tape s.net)
  [ "$(sed -n 1,6p <<< "$output")" = "$expect" ]
  [ "$(sed -n 7,9p <<< "$output")" = "$(sed -n '1p;5,6p' <<< "$expect")" ]
  [ "$(sed -n 10p <<< "$output")" = "$(sed -n 1p <<< "$expect")" ]
  [ "$(sed -n 11p <<< "$output")" = "h@GRAD : f32[1, 2] =" ]
  [ "${#lines[@]}" -eq 12 ]
  [[ "$expect" == *"W@GRAD : f32[2, 2] ="* ]]
  # a loop's result is on the tape under the name it had in the body
  [ "$(sed -n 10,12p <<< "$output")" = "$("$NETRUN" grad --tape --wrt h s.net)" ]
}

@test ":grad NAME prints NAME = its value, not 'loss'" {
  repl <<'IN'
param w : [2] = [1.0, 2.0]
myobj = sum(w * w)
:grad myobj
IN
  [ "$status" -eq 0 ]
  [ "$output" = "myobj = 5.0
w@GRAD : f32[2] =
[2. 4.]" ]
}

@test ":grad and :gradcheck: what cannot be differentiated" {
  repl <<'IN'
param W : [2] = [1.0, 2.0]
param V : [2] = [1.0, 2.0]
x = 3.0
loss = sum(W * W)
v = W * 2
:grad x
:grad nosuch
:grad loss V
:grad v
:grad loss nosuch
:gradcheck x
:grad
IN
  [ "$status" -eq 1 ]
  [ "$output" = "" ]
  [ "$stderr" = "<stdin>:6:7: error: 'x' does not depend on a parameter, so it has no gradients (the tape records only what is computed from params)
:grad x
      ^
<stdin>:7:7: error: unknown name 'nosuch'
:grad nosuch
      ^~~~~~
<stdin>:8:12: error: 'V' is not on the tape: no op that a gradient flows through read it
:grad loss V
           ^
<stdin>:5:7: error: the loss 'v' must be a float scalar (f32 or f64), but it is f32[2] (reduce it, e.g. with mean)
v = W * 2
      ^
<stdin>:10:12: error: unknown name 'nosuch'
:grad loss nosuch
           ^~~~~~
<stdin>:11:12: error: 'x' does not depend on a parameter, so it has no gradients (the tape records only what is computed from params)
:gradcheck x
           ^
<stdin>:12:1: error: usage: :grad NAME [WRT...]
:grad
^~~~~" ]
}

@test ":gradcheck compares the tape's gradients with finite differences" {
  repl <<'IN'
param W : [2, 3] = [[0.5, -0.5, 0.1], [0.25, 1.0, -0.3]]
param c : [3] = [0.1, 0.2, 0.3]
x = [[1.0, 2.0], [-1.0, 0.5]]
i = 0
h = x @ W
while i < 2 {
  h = sigmoid(h + c)
  i = i + 1
}
loss = mean(h * h)
:gradcheck loss
:gradcheck loss c
W
IN
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "variable           elements  max abs err  max rel err  verdict" ]
  [[ "${lines[1]}" =~ ^W\ +6\ +[0-9.e+-]+\ +[0-9.e+-]+\ +ok$ ]]
  [[ "${lines[2]}" =~ ^c\ +3\ +[0-9.e+-]+\ +[0-9.e+-]+\ +ok$ ]]
  [ "${lines[3]}" = "all gradients match finite differences (rtol 0.001, eps 1e-06)" ]
  [[ "${lines[5]}" =~ ^c\ +3\ +.*ok$ ]]
  [ "${#lines[@]}" -eq 9 ]
  # the parameters are left exactly as they were
  [ "${lines[7]}" = "[[ 0.5  -0.5   0.1 ]" ]
  [ "${lines[8]}" = " [ 0.25  1.   -0.3 ]]" ]
}

@test ":gradcheck fails on a wrong gradient" {
  # An op whose grad body is 1% off: 2.02 x for the derivative of x^2.
  repl <<'IN'
op bad(x) -> (y) {
  y = x * x
} grad {
  x@GRAD = y@GRAD * 2.02 * x
}
param W : [3] = [0.5, -1.0, 2.0]
loss = sum(bad(W))
:gradcheck loss
IN
  [ "$status" -eq 1 ]
  [ "${lines[1]}" = "W                         3    4.000e-02    1.000e-02  FAIL (element 2: analytic 4.04, numeric 4, noise 6.1e-10)" ]
  [ "${#lines[@]}" -eq 2 ]
}

@test ":time tables the session's ops, or one statement's" {
  repl <<'IN'
x = ones([4, 4])
y = x @ x
:time
:time z = y @ y + 1.0
:time q = nosuch
z
IN
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "op                            calls     total ms  per call us   share" ]
  [[ "${lines[1]}" =~ ^(ones|matmul)\ +1\ +[0-9.]+\ +[0-9.]+\ +[0-9.]+%$ ]]
  [[ "${lines[2]}" =~ ^(ones|matmul)\ +1\ + ]]
  [[ "${lines[3]}" =~ ^total\ +2\ +[0-9.]+\ +100.0%$ ]]
  [ "${lines[4]}" = "${lines[0]}" ]
  ops=$(sed -n '6,8p' <<< "$output" | awk '{print $1, $2}' | sort | tr '\n' ' ')
  [ "$ops" = "add 1 fill_constant 1 matmul 1 " ]
  [[ "${lines[8]}" =~ ^total\ +3\  ]]
  [ "${lines[9]}" = "[[65. 65. 65. 65.]" ]
  [ "$stderr" = "<stdin>:5:11: error: unknown name 'nosuch'
:time q = nosuch
          ^~~~~~" ]
}

@test ":ops lists the built-in ops and the session's own; :ops NAME describes one" {
  repl <<'IN'
op twice(x) -> (y) {
  y = x * 2
}
:ops
:ops relu
:ops reluu
IN
  [ "$status" -eq 1 ]
  expect=$("$NETRUN" ops; "$NETRUN" ops relu)
  [ "$(grep -v '^twice ' <<< "$output")" = "$expect" ]
  [[ "$(grep '^twice ' <<< "$output")" =~ ^twice\ +composite\ +yes\ +x\ -\>\ y$ ]]
  [ "$stderr" = "<stdin>:6:6: error: unknown op 'reluu' (did you mean 'relu'?)
:ops reluu
     ^~~~~" ]
}

@test ":help lists the commands and describes a command or an op" {
  repl <<'IN'
:help
:help :grad
:help time
:help tanh
:help gard
:help zzzzzz
IN
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "Statements run as in a script as soon as they are complete; an expression" ]
  for c in help ops vars shape program tape backward grad gradcheck time load save reset quit; do
    grep -q "^  :$c" <<< "$output"
  done
  grep -qx "usage: :grad NAME \[WRT...\]" <<< "$output"
  grep -qx "usage: :time \[STATEMENT\]" <<< "$output"
  [ "$(sed -n '/^tanh:/,/^kernel:/p' <<< "$output")" = "$("$NETRUN" ops tanh)" ]
  [ "$stderr" = "<stdin>:5:7: error: no help for 'gard' (did you mean ':grad'?)
:help gard
      ^~~~
<stdin>:6:7: error: no help for 'zzzzzz'
:help zzzzzz
      ^~~~~~" ]
}

@test "unknown commands and wrong arguments are errors with a caret" {
  repl <<'IN'
:qiut
:frobnicate
:vars x
:program please
:load
:save a b
:
IN
  [ "$status" -eq 1 ]
  [ "$output" = "" ]
  [ "$stderr" = "<stdin>:1:1: error: unknown command ':qiut' (did you mean ':quit'?)
:qiut
^~~~~
<stdin>:2:1: error: unknown command ':frobnicate'; :help lists the commands
:frobnicate
^~~~~~~~~~~
<stdin>:3:7: error: usage: :vars
:vars x
      ^
<stdin>:4:10: error: usage: :program
:program please
         ^~~~~~
<stdin>:5:1: error: usage: :load FILE
:load
^~~~~
<stdin>:6:9: error: usage: :save FILE
:save a b
        ^
<stdin>:7:1: error: unknown command ':'; :help lists the commands
:
^" ]
}

@test ":load runs a script in the session; a failing one leaves nothing" {
  printf 'param W : [2] = [1.0, 2.0]\nh = W * 3\nprint(h)\nh\n' > lib.net
  printf 'a = 1\nb = nosuch\n' > bad.net
  repl <<'IN'
:load lib.net
h + 1
:load bad.net
a
:load lib.net
:load nowhere.net
IN
  [ "$status" -eq 1 ]
  [ "$output" = $'[3. 6.]\n[4. 7.]' ]
  [ "$stderr" = "bad.net:2:5: error: unknown name 'nosuch'
b = nosuch
    ^~~~~~
<stdin>:4:1: error: unknown name 'a'
a
^
lib.net:1:1: error: 'W' is already declared
param W : [2] = [1.0, 2.0]
^~~~~~~~~~~~~~~~~~~~~~~~~~
lib.net:1:1: note: the first declaration is here
param W : [2] = [1.0, 2.0]
^~~~~~~~~~~~~~~~~~~~~~~~~~
netrun: error: cannot read nowhere.net: No such file or directory" ]
}

@test ":save writes the inputs that succeeded as a script that runs" {
  printf 'param W : [2] = [1.0, 2.0]\n' > lib.net
  repl <<'IN'
:load lib.net
x = W * 2
bad = nosuch
:vars
  print(x)
:time y = x + 1
y
:save out.net
:save /nonexistent/dir/out.net
IN
  [ "$status" -eq 1 ]
  [ "$(sed -n '1,4p;9p' <<< "$output")" = "name  dtype  shape  kind
W     f32    [2]    param
x     f32    [2]    value
[2. 4.]
[3. 5.]" ]
  [ "$stderr" = "<stdin>:3:7: error: unknown name 'nosuch'
bad = nosuch
      ^~~~~~
netrun: error: /nonexistent/dir/out.net: cannot create a temporary file in /nonexistent/dir: No such file or directory" ]
  [ "$(cat out.net)" = "# :load lib.net
param W : [2] = [1.0, 2.0]
x = W * 2
print(x)
y = x + 1
y" ]
  run "$NETRUN" run out.net
  [ "$status" -eq 0 ]
  [ "$output" = "[2. 4.]" ]
  [ ! -e /nonexistent/dir/out.net ]
  [ -z "$(ls -a | grep tmp)" ]
}

@test ":reset forgets everything; :quit ends the session" {
  repl <<'IN'
x = 1
:reset
x
param x : [1] = [2.0]
x
:save s.net
:quit
x
IN
  [ "$status" -eq 1 ]
  [ "$output" = "[2.]" ]
  [ "$(cat s.net)" = $'param x : [1] = [2.0]\nx' ]
  [ "$stderr" = "<stdin>:3:1: error: unknown name 'x'
x
^" ]
  repl <<< $':quit\nnosuch'
  [ "$status" -eq 0 ]
}

@test "piped: no prompt, no colour, no history; Ctrl-C ends the session with 130" {
  repl <<< $'nosuch\n1'
  [ "$output" = "1" ]
  [[ "$stderr" != *$'\e'* ]]
  [ ! -e "$HOME/.netrun_history" ]
  mkfifo in
  "$NETRUN" repl --max-steps 1000000000 < in > out 2>&1 &
  pid=$!
  exec 7> in
  printf 'i = 0\nprint(i)\nwhile true { i = i + 1 }\n' >&7
  for _ in $(seq 600); do [ -s out ] && break; sleep 0.1; done
  sleep 0.2
  kill -INT $pid
  status=0
  wait $pid || status=$?
  exec 7>&-
  [ "$status" -eq 130 ]
  [ "$(head -1 out)" = "0" ]
  grep -q "interrupted" out
}

# ---- through a pseudo-terminal (tmux) -------------------------------------------

tm() { tmux -L "netrun-repl-$BATS_TEST_NUMBER" -f /dev/null "$@"; }

# Starts netrun repl ARGS in a detached 120x40 terminal; the shell around
# it prints its exit status and waits, so the pane stays readable.
# (A session started while the previous server of the socket is still
# exiting fails with "server exited unexpectedly": it is tried again.)
start() {
  export TMUX_TMPDIR=$BATS_TEST_TMPDIR
  local try
  for try in 1 2 3 4 5; do
    tm new-session -d -x 120 -y 40 \
      "cd '$BATS_TEST_TMPDIR' && HOME='$HOME' $NETRUN repl $*; echo \"status=\$?\"; sleep 600" && break
    [ "$try" -lt 5 ] || return 1
    sleep 0.5
  done
  wait_prompts 0
}

# Kills the tmux server and waits until it answers no more.
stop_server() {
  tm kill-server
  for _ in $(seq 100); do
    tm has-session 2>/dev/null || return 0
    sleep 0.1
  done
  echo "the tmux server did not exit"
  return 1
}

screen() { tm capture-pane -p -S -100; }

# Waits (up to 60 s, polling) until the screen holds the text, which may
# span lines.
wait_for() {
  local want
  want=$(printf '%s' "$1" | tr '\n' '\r')
  for _ in $(seq 600); do
    screen | tr '\n' '\r' | grep -qF -- "$want" && return 0
    sleep 0.1
  done
  echo "timed out waiting for: $1"; screen
  return 1
}

# Waits until the screen shows more than N prompts.
wait_prompts() {
  for _ in $(seq 600); do
    [ "$(screen | grep -c '^netrun>')" -gt "$1" ] && return 0
    sleep 0.1
  done
  echo "timed out waiting for prompt $(($1 + 1))"; screen
  return 1
}

# Waits until the screen's last line is an empty prompt: the statement
# entered has run, and the line editor reads keys again (keys sent before
# are echoed by the terminal's cooked mode, a Tab as spaces).
wait_idle() {
  for _ in $(seq 600); do
    [[ "$(screen | sed '/^$/d' | tail -n 1)" =~ ^netrun\>\ *$ ]] && return 0
    sleep 0.1
  done
  echo "timed out waiting for an empty prompt"; screen
  return 1
}

teardown() {
  tm kill-server 2>/dev/null || true
}

@test "terminal: a banner, the prompt, values, and Ctrl-D leaves with status 0" {
  start
  [ "$(screen | head -1)" = "netrun 0.1.0: statements run as you enter them; :help lists the commands." ]
  tm send-keys 'x = [1, 2] * 3' Enter 'x' Enter
  wait_for "[3 6]"
  tm send-keys C-d
  wait_for "status=0"
  [ "$(screen | sed -n 2,4p)" = "netrun> x = [1, 2] * 3
netrun> x
[3 6]" ]
}

@test "terminal: netrun without arguments opens the session" {
  export TMUX_TMPDIR=$BATS_TEST_TMPDIR
  tm new-session -d -x 120 -y 40 "HOME='$HOME' $NETRUN; echo \"status=\$?\"; sleep 600"
  wait_prompts 0
  [ "$(screen | head -1)" = "netrun 0.1.0: statements run as you enter them; :help lists the commands." ]
  tm send-keys ':quit' Enter
  wait_for "status=0"
}

@test "terminal: an open bracket gives the continuation prompt" {
  start
  tm send-keys 'i = 0' Enter 'while i < 4 {' Enter
  wait_for "   ...>"
  tm send-keys '  i = i + 1' Enter '}' Enter 'i' Enter
  wait_for "4"
  [ "$(screen | sed -n 2,6p)" = "netrun> i = 0
netrun> while i < 4 {
   ...>   i = i + 1
   ...> }
netrun> i" ]
}

@test "terminal: Tab completes ops, names and commands, and lists choices" {
  mkdir models
  cp "$EX/xor.net" models/
  start
  tm send-keys 'my_value = [-1.0, 2.0]' Enter
  wait_idle
  tm send-keys 'ta' Tab
  wait_for "netrun> tanh("
  tm send-keys 'my_v' Tab
  wait_for "netrun> tanh(my_value"
  tm send-keys ')' Enter
  wait_for "[-0.7615942  0.9640276]"
  wait_idle
  tm send-keys 'sigm' Tab
  wait_for "netrun> sigmoid"
  tm send-keys Tab
  wait_for "sigmoid                sigmoid_cross_entropy"
  tm send-keys '(my_value)' Enter
  wait_for "[0.26894143 0.880797  ]"
  wait_idle
  tm send-keys ':gr' Tab
  wait_for "netrun> :grad"
  tm send-keys Tab
  wait_for "grad       gradcheck"
  tm send-keys C-u
  tm send-keys ':sh' Tab 'my_' Tab
  wait_for "netrun> :shape my_value"
  tm send-keys Enter
  wait_for $'netrun> :shape my_value\nf32[2]'
  wait_idle
  tm send-keys ':load mod' Tab
  wait_for "netrun> :load models/"
  tm send-keys 'x' Tab
  wait_for "netrun> :load models/xor.net"
  tm send-keys Enter ':quit' Enter
  wait_for "status=0"
}

@test "terminal: Ctrl-C cancels the input, and stops a running statement" {
  # a loop that cannot end by itself before the Ctrl-C reaches it, however
  # busy the machine (a million turns took less than tmux's round trip)
  start --max-steps 2000000000
  tm send-keys 'x = 5'
  wait_for "netrun> x = 5"
  tm send-keys C-c
  wait_prompts 1
  tm send-keys 'x' Enter
  wait_for "unknown name 'x'"
  tm send-keys 'while true {' Enter
  wait_for "   ...>"
  tm send-keys C-c
  wait_prompts 3
  # the print shows that the loop has started
  tm send-keys 'i = 0' Enter 'print(i + 7); while true { i = i + 1 }' Enter
  wait_for $'netrun> print(i + 7); while true { i = i + 1 }\n7'
  tm send-keys C-c
  wait_for "interrupted"
  tm send-keys 'i' Enter
  wait_for $'netrun> i\n0'
  # the cancelled input never ran: x is unbound, the loop's state is undone
  screen | grep -q "^<stdin>:1:1: error: unknown name 'x'"
  # the diagnostic starts on a line of its own, in colour
  screen | grep -Eq "^<stdin>:4:[0-9]+: error: .*interrupted"
  # (tmux gives back bold red as two sequences)
  tm capture-pane -e -p -S -100 | grep -q $'\e\\[1m\e\\[31merror:'
  tm send-keys C-d
  wait_for "status=0"
}

@test "terminal: history is kept in ~/.netrun_history and recalled" {
  start
  tm send-keys 'history_value = 42' Enter 'history_value' Enter
  wait_for "42"
  tm send-keys C-d
  wait_for "status=0"
  grep -q "history_value" "$HOME/.netrun_history"
  stop_server
  start
  tm send-keys 'history_value = 7' Enter Up Up Enter
  wait_for "netrun> history_value"$'\n'"7"
}

@test "terminal: a history file that cannot be written is not an error" {
  HOME=$BATS_TEST_TMPDIR/no/such/home
  start
  tm send-keys 'y = 1' Enter 'y' Enter
  wait_for $'netrun> y\n1'
  tm send-keys C-d
  wait_for "status=0"
  [ ! -e "$HOME" ]
}
