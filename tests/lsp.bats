#!/usr/bin/env bats
# lsp.bats — netrun lsp (netrun(1), lsp): every request through a small
# client of ours (tests/lsp/driver.py) against exact answers
# (tests/lsp/*.expect: diagnostics with the CLI's text and positions,
# hovers with shapes, definitions into the stdlib, references, symbols,
# completion, formatting); malformed messages get JSON-RPC errors and the
# server reads on; a client that disappears ends it; and Neovim's
# built-in client (Debian's 0.7, through editors/vim) gets the diagnostic
# at the right line and column and a hover's shape; Emacs in batch mode
# loads editors/emacs's major mode (faces, indentation, eglot's command).

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  L=$ROOT/tests/lsp
  cd "$BATS_TEST_TMPDIR"
}

# The driver's output with the checkout's paths made neutral.
drive() {
  python3 "$L/driver.py" "$NETRUN" "$@" | sed "s|$L|<dir>|g; s|$ROOT/stdlib|<stdlib>|g"
}

@test "lsp: a session over a script on the stdlib: every request, exactly" {
  S=$L/stdlib_error.net
  run drive open:$S hover:$S:5:0 hover:$S:6:0 hover:$S:5:34 hover:$S:6:9 hover:$S:5:21 hover:$S:5:16 \
    hover:$S:10:3 hover:$S:1:8 hover:$S:8:40 definition:$S:7:8 definition:$S:6:9 definition:$S:1:8 \
    references:$S:6:0 symbols:$S completion:$S:10:2:epochs,lr completion:$S:8:0:dense,logits,relu,lstm,while \
    formatting:$S change:$S:$L/fixed.net close:$S shutdown
  diff -u "$L/session.expect" <(printf '%s\n' "$output")
}

@test "lsp: a shape error's diagnostic; a param's hover: scoped name, elements, initializer" {
  E=$L/shape_error.net
  run drive open:$E hover:$E:2:6 hover:$E:3:0 hover:$E:3:4 shutdown
  diff -u "$L/shape_error.expect" <(printf '%s\n' "$output")
}

@test "lsp: a hover on an op is the registry's: its call, then netrun ops NAME, whose line netrun-ops(7) lists" {
  S=$L/ops.net
  drive open:$S hover:$S:2:4 hover:$S:2:12 hover:$S:3:4 hover:$S:4:4 shutdown >session
  grep '"contents"' session | jq -j '.result.contents.value + "@@\n"' >hovers
  [ "$(grep -c '^@@$' hovers)" -eq 4 ]
  i=0
  for call in 'softmax(X, axis=-1)' 'relu(X)' 'concat(X[], axis=0)' 'reshape(X, shape)'; do
    i=$((i + 1))
    op=${call%%(*}
    { printf '```netrun\n%s\n```\n```\n' "$call"; "$NETRUN" ops "$op"; printf '```\n'; } >want
    awk -v n=$i '/^@@$/ { k++; next } k == n - 1' hovers >got
    diff -u want got
    # the man page's OP LIST paragraph of the op: its documentation line
    doc=$(sed -n "1s/^$op: //p" want)
    awk -v op="$op" '/^\.SH OP LIST/ { on = 1 } on && prev == ".B " op { gsub(/\\-/, "-"); gsub(/\\e/, "\\"); print; exit } { prev = $0 }' \
      "$ROOT/man/netrun-ops.7" >man
    [[ "$(cat man)" == "$doc"* ]]
  done
}

@test "lsp: inlay hints: the shape after each assignment, in a range; a def's body shows its last call's" {
  S=$L/hints.net
  run drive open:$S hints:$S:0:0:99:0 hints:$S:11:0:12:3 \
    raw:'{"jsonrpc":"2.0","id":9,"method":"textDocument/inlayHint","params":{"textDocument":{"uri":"file://'$S'"},"range":{"start":{"line":0}}}}' \
    shutdown
  diff -u "$L/hints.expect" <(printf '%s\n' "$output")
}

# The server reads imports from disk at each change: an import edited on
# disk is seen at the next one, and an error inside an import names its
# file wherever it stands among the files (lib.net second, then third).
@test "lsp: an import edited on disk is read again at the next change; an error inside one names its file" {
  printf 'def double(v) {\n  return v * 2\n}\ndef bad(v) {\n  return v + zeros([4])\n}\n' > lib1.net
  printf 'def triple(v) {\n  return v * 3\n}\n' > lib2.net
  printf 'def half(v) {\n  return v / 2\n}\n' > other.net
  cp lib1.net lib.net
  printf 'import "lib"\ninput x : f32[3]\ny = double(x)\n' > a.net
  printf 'import "other"\nimport "lib"\ninput x : f32[3]\ny = bad(half(x))\n' > b.net
  D=$PWD
  run drive open:$D/a.net change:$D/a.net:$D/b.net write:$D/lib.net:$D/lib2.net change:$D/a.net:$D/b.net \
    write:$D/lib.net:$D/lib1.net change:$D/a.net:$D/a.net hover:$D/a.net:2:0 shutdown
  [ "${lines[1]}" = '{"diagnostics": []}' ]
  [[ "${lines[2]}" == '{"diagnostics": [{"message": "'$D'/lib.net:5:12: add: shapes [3] and [4] do not broadcast (dimension 0: 3 vs 4)"'* ]]
  [[ "${lines[3]}" == '{"diagnostics": [{"message": "unknown op or function '"'bad'"' (did you mean '"'pad'"'?)", "range": {"end": {"character": 7, "line": 3}, "start": {"character": 4, "line": 3}}'* ]]
  [ "${lines[4]}" = '{"diagnostics": []}' ]
  [ "${lines[5]}" = '{"result": {"contents": {"kind": "markdown", "value": "```netrun\nlocal y : f32[3]\n```\n"}, "range": {"end": {"character": 1, "line": 2}, "start": {"character": 0, "line": 2}}}}' ]
  [ "${lines[6]}" = '{"result": null}' ]
  [ "${lines[7]}" = "exit 0" ]
}

@test "lsp: malformed messages get JSON-RPC errors and the server reads on" {
  run drive uninitialized raw:'{"jsonrpc":"2.0","id":1,"method":"textDocument/hover","params":{}}' \
    'raw:{"jsonrpc":"2.0","id":2,"method":"initialize","params":{}}' raw:'{]' raw:'[1,2]' \
    raw:'{"jsonrpc":"2.0","id":3,"method":"nope"}' \
    raw:'{"jsonrpc":"2.0","id":4,"method":"textDocument/hover","params":{}}' \
    raw:'{"jsonrpc":"2.0","id":5,"method":"textDocument/hover","params":{"textDocument":{"uri":"file:///nowhere.net"},"position":{"line":0,"character":0}}}' \
    raw:'{"jsonrpc":"2.0","id":6,"method":"textDocument/hover","params":7}' \
    'frame:Content-Length: x\r\n\r\n' 'frame:Content-Type: a\r\n\r\n' \
    raw:'{"jsonrpc":"2.0","id":{"a":1},"method":"shutdown"}' \
    notify:'{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":5}}' \
    notify:'{"jsonrpc":"2.0","method":"whatever"}' \
    raw:'{"jsonrpc":"2.0","id":7,"method":"textDocument/hover","params":{"textDocument":{"uri":"file:///x.net"},"position":{"line":-1,"character":0}}}' \
    raw:'{"jsonrpc":"2.0","id":8,"method":"shutdown"}' notify:'{"jsonrpc":"2.0","method":"exit"}'
  diff -u "$L/robust.expect" <(printf '%s\n' "$output")
}

@test "lsp: a client that disappears ends the server (status 1, nothing on stderr)" {
  body='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'
  open='{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":"file:///t/a.net","text":"x = 1\n"}}}'
  status=0
  { printf 'Content-Length: %d\r\n\r\n%s' ${#body} "$body"; printf 'Content-Length: %d\r\n\r\n%s' ${#open} "$open"
    printf 'Content-Length: 50\r\n\r\n{"jsonrpc"'; } | "$NETRUN" lsp >out 2>err || status=$?
  [ "$status" -eq 1 ]
  [ ! -s err ]
  grep -q '"method":"textDocument/publishDiagnostics"' out
  # and one whose reader is gone: the answers hit a closed pipe
  run bash -c "printf 'Content-Length: %d\r\n\r\n%s' ${#body} '$body' | '$NETRUN' lsp | head -c 1"
  [ "$output" = "C" ]
}

@test "lsp: takes --stdio, refuses a FILE" {
  run "$NETRUN" lsp --stdio </dev/null
  [ "$status" -eq 1 ]
  run "$NETRUN" lsp model.net
  [ "$status" -eq 2 ]
  [[ "${lines[0]}" == *"lsp takes no FILE (it talks over standard input and output): 'model.net'"* ]]
}

# Neovim headless, its built-in client configured by editors/vim.
nvim_check() {
  OUT=$PWD/nvim.out EDITORS=$ROOT/editors NETRUN=$NETRUN FILE=$1 LINE=$2 COL=$3 \
    timeout 120 nvim --headless --clean -c "luafile $L/nvim_test.lua" </dev/null >nvim.log 2>&1
  cat nvim.out
}

@test "lsp: Neovim's client gets a shape error at its line and column, and a hover's shape" {
  command -v nvim || skip "neovim is not installed (make deps)"
  run nvim_check "$L/shape_error.net" 4 1
  echo "$output"
  [ "${lines[0]}" = "filetype netrun" ]
  [ "${lines[1]}" = "diagnostic 5:7 matmul: X has shape [B, 64] and Y has shape [784, 64]: inner dimensions 64 and 784 differ" ]
  [ "${lines[2]}" = 'hover ```netrun local h : f32[B, 64] ``` ' ]
  # the CLI puts it at the same place
  run "$NETRUN" dump "$L/shape_error.net"
  [[ "${lines[0]}" == *"shape_error.net:5:7: error: matmul: X has shape [B, 64]"* ]]
}

@test "lsp: Neovim, a script that imports the stdlib: two errors, a layer's output shape" {
  command -v nvim || skip "neovim is not installed (make deps)"
  run nvim_check "$L/stdlib_error.net" 6 1
  echo "$output"
  [ "${lines[1]}" = "diagnostic 8:14 add: shapes [B, 10] and [B, 6272] do not broadcast (dimension 1: 10 vs 6272)" ]
  [ "${lines[2]}" = "diagnostic 9:22 unknown op or function 'relux' (did you mean 'relu'?)" ]
  [ "${lines[3]}" = 'hover ```netrun local h : f32[B, 32, 14, 14] ``` ' ]
}

# Emacs in batch mode loads editors/emacs's major mode (tests/emacs/emacs_test.el).
@test "lsp: Emacs's netrun-mode: the mode, its faces, fmt's indentation, eglot's command" {
  command -v emacs || skip "emacs is not installed (make deps)"
  run timeout 60 emacs --batch -Q -l "$ROOT/tests/emacs/emacs_test.el" "$ROOT/editors" "$ROOT/examples/fashion_mlp.net"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "mode netrun-mode" ]
  [ "${lines[1]}" = "keyword input font-lock-keyword-face" ]
  [ "${lines[2]}" = "comment font-lock-comment-delimiter-face font-lock-comment-face" ]
  [ "${lines[3]}" = "indent kept" ]
  [ "${lines[4]}" = 'eglot ("/opt/netrun/bin/netrun" "lsp" "--stdio")' ]
  [ "${#lines[@]}" -eq 5 ]
}

@test "lsp: the session transcript in netrun(1) is what the server answers" {
  awk '/^\.\\" lsp transcript: / { on = 1; next } /^\.\\" end lsp transcript/ { on = 0 }
       on && !/^\.(EX|EE)/ { gsub(/\\-/, "-"); gsub(/\\e/, "\\"); print }' "$ROOT/man/netrun.1" >transcript
  [ "$(grep -c '^client: ' transcript)" -ge 4 ]
  python3 - transcript "$NETRUN" <<'PY'
import subprocess, sys
lines = open(sys.argv[1]).read().splitlines()
sent = [l[8:] for l in lines if l.startswith("client: ")]
want = [l[8:] for l in lines if l.startswith("server: ")]
data = b"".join(b"Content-Length: %d\r\n\r\n" % len(m.encode()) + m.encode() for m in sent)
out = subprocess.run([sys.argv[2], "lsp"], input=data, capture_output=True)
got = [part.split(b"\r\n\r\n", 1)[1].decode() for part in out.stdout.split(b"Content-Length: ")[1:]]
assert out.returncode == 0, out.returncode
for w, g in zip(want, got):
    assert w == g, "man page:\n%s\nserver:\n%s" % (w, g)
assert len(want) == len(got), (len(want), len(got))
PY
}
