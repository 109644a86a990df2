#!/usr/bin/env bats
# trust_input.bats — untrusted input stays untrusted: a script loads a
# plugin only when the command line allows it (--plugin, --allow-load),
# never from outside its folder; plugins are checked before dlopen maps
# them (a truncated ELF file, an op netrun cannot register); FIFOs and
# devices are refused instead of blocking; CSV numbers are read exactly or
# refused (f32 range, NUL bytes, underflow, integers past 2^53, gzip and
# UTF-16 files, control characters in a header).

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  SO=$ROOT/examples/plugins/fused_dense_relu.so
  cd "$BATS_TEST_TMPDIR"
}

# evil DIR: DIR/evil.so, a library whose constructor (run by dlopen, before
# netrun looks at it) writes the file $BATS_TEST_TMPDIR/pwned.
evil() {
  mkdir -p "$1"
  printf '#include <stdio.h>\n__attribute__((constructor)) static void run(void) {\n  FILE *f = fopen("%s/pwned", "w");\n  if (f) fclose(f);\n}\n' \
    "$BATS_TEST_TMPDIR" > "$1/evil.c"
  ${CC:-cc} -fPIC -shared -o "$1/evil.so" "$1/evil.c"
}

# not_run: the constructor of evil.so did not run.
not_run() { [ ! -e "$BATS_TEST_TMPDIR/pwned" ]; }

# refused FILE PATH [LINE]: the error netrun gives at `load "PATH"` (line
# LINE of FILE, default 1) without --allow-load.
refused() {
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "$1:${3:-1}:1: error: cannot load plugin '$2': a script loads plugins only with --allow-load (a plugin runs native code), or name it with --plugin" ]
}

@test "a script's load is refused without --allow-load, by every verb, before the library runs" {
  evil .
  printf 'load "evil.so"\nx = 1.0\nloss = x * x\n' > s.net
  for verb in dump run grad gradcheck time "dump --backward" "run --dump-tape"; do
    # shellcheck disable=SC2086
    run "$NETRUN" $verb s.net
    refused s.net evil.so
    [ "${lines[1]}" = 'load "evil.so"' ]
    [ "${lines[2]}" = "^~~~~~~~~~~~~~" ]
    not_run
  done
  run "$NETRUN" s.net
  refused s.net evil.so
  printf 'load "evil.so"\ntrain {\n  data = "d.csv"\n}\n' > t.net
  printf 'a,y\n1,0\n' > d.csv
  run "$NETRUN" train t.net
  refused t.net evil.so
  not_run
}

@test "a load hidden in an import, or a file that is no plugin, is refused the same way" {
  evil lib
  printf 'load "evil.so"\n' > lib/inner.net
  printf 'import "lib/inner"\nx = 1\n' > main.net
  run "$NETRUN" dump main.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "lib/inner.net:1:1: error: cannot load plugin 'lib/evil.so': a script loads plugins only with --allow-load (a plugin runs native code), or name it with --plugin" ]
  not_run
  # a FIFO named as a plugin is not even opened (the open would block)
  mkfifo pipe.so
  printf 'load "pipe.so"\n' > p.net
  run timeout 10 "$NETRUN" dump p.net
  refused p.net pipe.so
}

@test "the REPL: a typed load, :load FILE and repl FILE are refused without --allow-load" {
  evil .
  printf 'load "evil.so"\n' > s.net
  run "$NETRUN" repl <<< 'load "evil.so"'
  refused "<stdin>" evil.so
  run "$NETRUN" repl <<< ':load s.net'
  refused s.net evil.so
  run "$NETRUN" repl s.net < /dev/null
  refused s.net evil.so
  not_run
  # allowed: the plugin runs, in the working folder's session
  cp "$SO" .
  run "$NETRUN" --allow-load repl <<< $'load "fused_dense_relu.so"\nfused_dense_relu([[1.0, 2.0]], [[1.0], [1.0]], [0.5])'
  [ "$status" -eq 0 ]
  [ "$output" = "[[3.5]]" ]
}

@test "--allow-load: plugins inside the script's folder load; paths that leave it, by .., absolute or a link, do not" {
  evil outside
  mkdir -p model/sub
  cp "$SO" model/sub/
  printf 'load "sub/fused_dense_relu.so"\nprint(fused_dense_relu([[1.0, 2.0]], [[1.0], [1.0]], [0.5]))\n' > model/ok.net
  run "$NETRUN" --allow-load run model/ok.net
  [ "$status" -eq 0 ]
  [ "$output" = "[[3.5]]" ]
  printf 'load "../outside/evil.so"\n' > model/up.net
  printf 'load "%s/outside/evil.so"\n' "$PWD" > model/abs.net
  ln -s ../outside/evil.so model/link.so
  printf 'load "link.so"\n' > model/link.net
  run "$NETRUN" --allow-load dump model/up.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "model/up.net:1:1: error: cannot load plugin 'model/../outside/evil.so': it lies outside the script's folder model (links followed); --allow-load=DIR allows another folder" ]
  run "$NETRUN" --allow-load dump model/abs.net
  [ "${lines[0]}" = "model/abs.net:1:1: error: cannot load plugin '$PWD/outside/evil.so': it lies outside the script's folder model (links followed); --allow-load=DIR allows another folder" ]
  run "$NETRUN" --allow-load dump model/link.net
  [ "${lines[0]}" = "model/link.net:1:1: error: cannot load plugin 'model/link.so': it lies outside the script's folder model (links followed); --allow-load=DIR allows another folder" ]
  # an import from another folder is held to the folder of the script named
  printf 'load "evil.so"\n' > outside/lib.net
  printf 'import "../outside/lib"\n' > model/imp.net
  run "$NETRUN" --allow-load dump model/imp.net
  [ "${lines[0]}" = "model/../outside/lib.net:1:1: error: cannot load plugin 'model/../outside/evil.so': it lies outside the script's folder model (links followed); --allow-load=DIR allows another folder" ]
  not_run
  # --allow-load=DIR allows DIR instead
  run "$NETRUN" --allow-load=model/sub dump model/up.net
  [ "${lines[0]}" = "model/up.net:1:1: error: cannot load plugin 'model/../outside/evil.so': it lies outside model/sub, the folder --allow-load= allows (links followed)" ]
  not_run
  run "$NETRUN" --allow-load=outside dump model/up.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "model/up.net:1:1: error: 'model/../outside/evil.so' is not a netrun plugin: it defines no netrun_plugin_init" ]
  [ -e pwned ]
  run "$NETRUN" --allow-load= dump model/up.net
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --allow-load=DIR needs a folder" ]
}

@test "a plugin named with --plugin may be loaded by the script without --allow-load" {
  cp "$SO" .
  printf 'load "fused_dense_relu.so"\nprint(fused_dense_relu([[1.0, 2.0]], [[1.0], [1.0]], [0.5]))\n' > s.net
  run "$NETRUN" --plugin ./fused_dense_relu.so run s.net
  [ "$status" -eq 0 ]
  [ "$output" = "[[3.5]]" ]
  # the same file by another path (a link) is the same plugin
  mkdir sub
  ln -s "$SO" sub/fused_dense_relu.so
  cp s.net sub/
  run "$NETRUN" --plugin "$SO" run sub/s.net
  [ "$status" -eq 0 ]
  [ "$output" = "[[3.5]]" ]
  # another file is not
  run "$NETRUN" --plugin "$SO" run s.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "s.net:1:1: error: cannot load plugin 'fused_dense_relu.so': a script loads plugins only with --allow-load (a plugin runs native code), or name it with --plugin" ]
}

@test "a truncated plugin is refused before dlopen (it crashed with SIGBUS)" {
  head -c 3000 "$SO" > t.so
  run "$NETRUN" --plugin ./t.so ops
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot load plugin './t.so': a truncated ELF file (a segment lies past its end)" ]
  head -c 40 "$SO" > h.so
  run "$NETRUN" --plugin ./h.so ops
  [ "$output" = "netrun: error: cannot load plugin './h.so': a truncated ELF file (its header is cut short)" ]
  printf 'load "t.so"\n' > s.net
  run "$NETRUN" --allow-load dump s.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "s.net:1:1: error: cannot load plugin 't.so': a truncated ELF file (a segment lies past its end)" ]
  # an object file, not a shared library
  printf 'int f(void) { return 1; }\n' > o.c
  ${CC:-cc} -c -o o.so o.c
  run "$NETRUN" --plugin ./o.so ops
  [ "$output" = "netrun: error: cannot load plugin './o.so': an ELF file that is not a shared library" ]
}

# rejected NAME DEF MESSAGE: a plugin registering DEF (C initializer text;
# `ok` is a callback returning 0) fails with "plugin 'NAME.so': MESSAGE".
rejected() {
  cat > "$1.c" <<EOF
#include <netrun/plugin.h>
const int netrun_plugin_api_version = NETRUN_PLUGIN_API_VERSION;
static int ok(NetrunCtx *c) { (void)c; return 0; }
static const NetrunOpDef def = $2;
int netrun_plugin_init(const NetrunApi *api) { return api->register_op(&def); }
EOF
  ${CC:-cc} -std=c11 -Wall -Werror -fPIC -shared -I"$ROOT/include" -o "$1.so" "$1.c"
  run "$NETRUN" --plugin "./$1.so" ops
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: plugin './$1.so': $3" ]
}

@test "register_op refuses ops without slots, with a name twice, or with absurd names" {
  rejected noslots '{.type = "empty", .infer = ok, .kernel = ok}' "op 'empty': it has no slots: an op needs an input or an output"
  rejected twoin '{.type = "t", .infer = ok, .kernel = ok, .in = {{"X", 0, ""}, {"X", 0, ""}}, .out = {{"Out", 0, ""}}}' \
    "op 't': the name 'X' is given to two of its slots and attributes (two inputs)"
  rejected twoout '{.type = "t", .infer = ok, .kernel = ok, .in = {{"X", 0, ""}}, .out = {{"Out", 0, ""}, {"Out", 0, ""}}}' \
    "op 't': the name 'Out' is given to two of its slots and attributes (two outputs)"
  rejected slotattr '{.type = "t", .infer = ok, .kernel = ok, .in = {{"X", 0, ""}}, .out = {{"Out", 0, ""}}, .attrs = {{"X", NETRUN_ATTR_INT, "1", 0, ""}}}' \
    "op 't': the name 'X' is given to two of its slots and attributes (an input and an attribute)"
  rejected twoattrs '{.type = "t", .infer = ok, .kernel = ok, .out = {{"Out", 0, ""}}, .attrs = {{"k", NETRUN_ATTR_INT, "1", 0, ""}, {"k", NETRUN_ATTR_INT, "2", 0, ""}}}' \
    "op 't': the name 'k' is given to two of its slots and attributes (two attributes)"
  rejected spaces '{.type = "t", .infer = ok, .kernel = ok, .in = {{"two words", 0, ""}}, .out = {{"Out", 0, ""}}}' \
    "op 't': slot name 'two words' is not NAME or NAME@GRAD"
  long=$(printf 'a%.0s' $(seq 70))
  rejected longop "{.type = \"$long\", .infer = ok, .kernel = ok, .out = {{\"Out\", 0, \"\"}}}" \
    "op name '${long:0:64}...' is longer than 64 characters"
  rejected longslot "{.type = \"t\", .infer = ok, .kernel = ok, .out = {{\"$long\", 0, \"\"}}}" \
    "op 't': slot name '${long:0:64}...' is longer than 64 characters"
  rejected longattr "{.type = \"t\", .infer = ok, .kernel = ok, .out = {{\"Out\", 0, \"\"}}, .attrs = {{\"$long\", NETRUN_ATTR_INT, \"1\", 0, \"\"}}}" \
    "op 't': attribute name '${long:0:64}...' is longer than 64 characters"
}

@test "FIFOs and devices are refused, not waited on: --plugin, load, --feed, data" {
  mkfifo pipe.so pipe.csv
  run timeout 10 "$NETRUN" --plugin ./pipe.so ops
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot load plugin './pipe.so': not a regular file" ]
  printf 'load "pipe.so"\n' > s.net
  run timeout 10 "$NETRUN" --allow-load dump s.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "s.net:1:1: error: cannot load plugin 'pipe.so': not a regular file" ]
  printf 'input x : f32[B, 1]\nprint(x)\n' > f.net
  run timeout 10 "$NETRUN" run --feed x=pipe.csv f.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot read pipe.csv: not a regular file" ]
  run timeout 10 "$NETRUN" run --feed x=/dev/zero f.net
  [ "$output" = "netrun: error: cannot read /dev/zero: not a regular file" ]
  run timeout 10 "$NETRUN" data pipe.csv
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot read pipe.csv: not a regular file" ]
  mkfifo img.idx
  printf '\0\0\10\1\0\0\0\1\1' > lab.idx
  run timeout 10 "$NETRUN" data img.idx:lab.idx
  [ "$output" = "netrun: error: cannot read img.idx: not a regular file" ]
  printf 'input x : f32[B, 1]\nloss = sum(x)\ntrain {\n  data = "pipe.csv"\n}\n' > t.net
  run timeout 10 "$NETRUN" train t.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot read pipe.csv: not a regular file" ]
}

# opens FILE CMD...: how many times CMD opens FILE (strace; open and openat).
opens() {
  local file=$1
  shift
  strace -f -qq -e trace=open,openat -o trace.txt "$@" > /dev/null 2>&1 || true
  grep -cE "\"([^\"]*/)?$file\"" trace.txt || true
}

@test "every data file is opened once: the descriptor checked (a regular file) is the one read" {
  command -v strace > /dev/null || skip "strace (make deps) counts the opens"
  strace -qq -o /dev/null true 2> /dev/null || skip "strace cannot trace here (ptrace refused)"
  /usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "Debian's python3-numpy (make deps) writes the .npz"
  printf 'a,b\n1,0\n2,1\n' > d.csv
  printf '\0\0\10\3\0\0\0\1\0\0\0\1\0\0\0\1\7' > img.idx
  printf '\0\0\10\1\0\0\0\1\1' > lab.idx
  /usr/bin/python3 -c 'import numpy as np; np.savez("d.npz", x=np.ones((2, 1), np.float32)); np.save("x.npy", np.ones((2, 1), np.float32))'
  [ "$(opens d.csv "$NETRUN" data d.csv)" = 1 ]
  [ "$(opens img.idx "$NETRUN" data img.idx:lab.idx)" = 1 ]
  [ "$(opens lab.idx "$NETRUN" data img.idx:lab.idx)" = 1 ]
  [ "$(opens d.npz "$NETRUN" data d.npz)" = 1 ]
  printf 'input x : f32[B, 1]\nprint(sum(x))\n' > f.net
  printf '1\n2\n' > x.csv
  [ "$(opens x.csv "$NETRUN" run --feed x=x.csv f.net)" = 1 ]
  [ "$(opens x.npy "$NETRUN" run --feed x=x.npy f.net)" = 1 ]
}

@test "a data file flipped between a CSV file (or an IDX file) and a FIFO while read: refused or read, never waited on" {
  printf 'a,b\n1,0\n2,1\n' > d.csv
  printf '\0\0\10\3\0\0\0\1\0\0\0\1\0\0\0\1\7' > img.idx
  printf '\0\0\10\1\0\0\0\1\1' > lab.idx
  mkfifo pipe
  ln -s d.csv l.csv
  ln -s img.idx i.idx
  # the flipper: os.replace of a fresh link over each name, between its
  # file and the FIFO, until told to stop (at most 20 s)
  python3 - "$BATS_TEST_TMPDIR" > flips.txt <<'PY' &
import os, sys, time
d = sys.argv[1]
n, end = 0, time.time() + 20
while time.time() < end and not os.path.exists(os.path.join(d, 'stop')):
    for name, real in (('l.csv', 'd.csv'), ('i.idx', 'img.idx')):
        tmp = os.path.join(d, '.tmp')
        os.symlink(real if n % 2 else 'pipe', tmp)
        os.replace(tmp, os.path.join(d, name))
    n += 1
print(n)
PY
  flipper=$!
  read_ok=0 refused=0 hung=0 runs=0
  end=$((SECONDS + 6))
  while [ $SECONDS -lt $end ]; do
    for spec in l.csv i.idx:lab.idx; do
      status=0
      timeout 5 "$NETRUN" data "$spec" > out.txt 2>&1 || status=$?
      runs=$((runs + 1))
      if [ $status -eq 0 ]; then read_ok=$((read_ok + 1))
      elif [ $status -eq 1 ] && grep -q "not a regular file" out.txt; then refused=$((refused + 1))
      else hung=$((hung + 1)); echo "status $status: $(cat out.txt)"; fi
    done
  done
  touch stop
  wait $flipper
  echo "runs $runs: read $read_ok, refused $refused, other $hung; flips $(cat flips.txt)"
  [ $hung -eq 0 ]
  [ $read_ok -gt 0 ]
  [ $refused -gt 0 ]
}

# ---- CSV numbers ----------------------------------------------------------------

@test "CSV: values beyond f32 (1e39, 1e300, 127 digits) are errors at the field" {
  printf 'a,b\n1,2\n3,1e39\n' > big.csv
  run "$NETRUN" data big.csv
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "big.csv:3:3: error: not a finite f32 number (f32 holds magnitudes up to 3.4e38)" ]
  [ "${lines[1]}" = "3,1e39" ]
  [ "${lines[2]}" = "  ^~~~" ]
  printf '1e300,2\n' > huge.csv
  run "$NETRUN" data huge.csv
  [ "${lines[0]}" = "huge.csv:1:1: error: not a finite f32 number (f32 holds magnitudes up to 3.4e38)" ]
  printf '2,%s\n' "$(printf '9%.0s' $(seq 127))" > digits.csv
  printf 'input x : f32[B, 2]\nprint(x)\n' > f.net
  run "$NETRUN" run --feed x=digits.csv f.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "digits.csv:1:3: error: not a finite f32 number (f32 holds magnitudes up to 3.4e38)" ]
}

@test "CSV: a NUL byte is an error, not the end of the number" {
  printf 'a,b\n12\0 34,1\n' > nul.csv
  run "$NETRUN" data nul.csv
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "nul.csv:2:3: error: a NUL byte: a CSV file is text" ]
  head -c 64 /dev/zero > zeros.csv
  printf 'input x : f32[B, 1]\nprint(x)\n' > f.net
  run "$NETRUN" run --feed x=zeros.csv f.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "zeros.csv:1:1: error: a NUL byte: a CSV file is text" ]
}

@test "CSV: underflow (1e-999, 1e-310) and long zero-padded numbers are numbers" {
  printf '1e-999\n1e-310\n%s25\n-0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000.5\n' \
    "$(printf '0%.0s' $(seq 200))" > small.csv
  printf 'input x : f32[B, 1]\nprint(x)\n' > f.net
  run "$NETRUN" run --feed x=small.csv f.net
  [ "$status" -eq 0 ]
  [ "$output" = "[[ 0. ]
 [ 0. ]
 [25. ]
 [-0.5]]" ]
}

@test "integers past 2^53 stay exact: --feed, --set, a dataset's labels, a literal" {
  printf 'input v : i64[N]\ninput k : i64\nprint(v)\nprint(k)\n' > i.net
  printf '9007199254740993\n-9223372036854775807\n' > v.csv
  run "$NETRUN" run --feed v=v.csv --set k=9007199254740993 i.net
  [ "$status" -eq 0 ]
  [ "$output" = "[    9007199254740993 -9223372036854775807]
9007199254740993" ]
  run "$NETRUN" run --set 'v=[9007199254740995, 3]' --set k=-9007199254740993 i.net
  [ "$output" = "[9007199254740995                3]
-9007199254740993" ]
  printf 'x,label\n1,9007199254740993\n2,1\n' > lab.csv
  run "$NETRUN" data lab.csv
  [ "$status" -eq 0 ]
  [ "${lines[4]}" = "column y i64 [2] from label" ]
  [ "${lines[7]}" = "class 9007199254740993 1" ]
  printf 'x = [1, 9007199254740993]\nprint(x)\n' > lit.net
  run "$NETRUN" run lit.net
  [ "$status" -eq 0 ]
  [ "$output" = "[               1 9007199254740993]" ]
}

@test "CSV: a gzip file to --feed and a UTF-16 file say what they are; a header's control characters are escaped" {
  printf 'input x : f32[B, 1]\nprint(x)\n' > f.net
  printf '1\n2\n' | gzip > x.csv.gz
  run "$NETRUN" run --feed x=x.csv.gz f.net
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: x.csv.gz: a gzip file: --feed reads CSV files uncompressed (gunzip it first)" ]
  printf 'a,y\n1,2\n' | iconv -f UTF-8 -t UTF-16 > u.csv
  run "$NETRUN" data u.csv
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: u.csv: a UTF-16 file: CSV files are read as UTF-8 (convert it: iconv -f UTF-16 -t UTF-8)" ]
  printf '1\n2\n' | iconv -f UTF-8 -t UTF-16LE > le.csv
  run "$NETRUN" run --feed x=le.csv f.net
  [ "$output" = "netrun: error: le.csv: a UTF-16 file: CSV files are read as UTF-8 (convert it: iconv -f UTF-16 -t UTF-8)" ]
  printf 'a\033[2Jb,y\n1,2\n' > ctl.csv
  run "$NETRUN" data ctl.csv
  [ "$status" -eq 0 ]
  [ "${lines[3]}" = 'column x f32 [1, 1] from a\x1b[2Jb' ]
}
