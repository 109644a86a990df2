#!/usr/bin/env python3
"""driver.py — a small LSP client for tests/lsp.bats: starts `netrun lsp`,
sends the messages of a script of steps, and prints what the server
answers, one JSON value a line (keys sorted), so a test compares them
with exact expectations.

  driver.py NETRUN STEP...     a STEP is one of
    open:PATH                  textDocument/didOpen of PATH (uri file://PATH)
    change:PATH:TEXTFILE       didChange of PATH to the text of TEXTFILE
    close:PATH                 didClose
    write:PATH:TEXTFILE        (no message) PATH on disk gets TEXTFILE's text
    hover:PATH:LINE:COL        (0-based, as LSP counts)
    definition:PATH:LINE:COL   references:PATH:LINE:COL
    completion:PATH:LINE:COL:LABEL,...   only the items of those labels are shown
    symbols:PATH               formatting:PATH
    hints:PATH:L0:C0:L1:C1     textDocument/inlayHint over that range
    raw:TEXT                   TEXT as a message body, as is; shows the answer
    notify:TEXT                the same, expecting no answer
    frame:TEXT                 TEXT written to the server as is (headers and all)
    shutdown                   shutdown, then exit
A first step "uninitialized" leaves out the initialize request.
The output: each response's result or error, each publishDiagnostics'
diagnostics, and at the end "exit N" with the server's status.
"""
import json, signal, subprocess, sys

netrun, steps = sys.argv[1], sys.argv[2:]
p = subprocess.Popen([netrun, "lsp", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

def timeout(*_):
    print("timeout: no answer in 60 s")
    p.kill()
    sys.exit(1)
signal.signal(signal.SIGALRM, timeout)
signal.alarm(60)
next_id = [1]

def write(body):
    data = body.encode()
    p.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
    p.stdin.flush()

def read():
    n = None
    while True:
        line = p.stdout.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    return json.loads(p.stdout.read(n))

def show(msg):
    print(json.dumps(msg, sort_keys=True))

def request(method, params, keep=None):
    i = next_id[0]; next_id[0] += 1
    write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}))
    while True:
        m = read()
        if m is None:
            print("server closed"); return
        if m.get("id") == i:
            r = m.get("result")
            if keep is not None and isinstance(r, list):
                r = [x for x in r if x.get("label") in keep]
            show({"error": m["error"]} if "error" in m else {"result": r}); return
        show(m)

def notify(method, params):
    write(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}))

def doc(path):
    return {"uri": "file://" + path}

def wait_diagnostics():
    m = read()
    show({"diagnostics": m["params"]["diagnostics"]} if m and m.get("method") == "textDocument/publishDiagnostics" else m)

if steps and steps[0] == "uninitialized":
    steps = steps[1:]
else:
    request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    notify("initialized", {})
for step in steps:
    kind, _, rest = step.partition(":")
    if kind == "open":
        notify("textDocument/didOpen", {"textDocument": dict(doc(rest), languageId="netrun", version=1, text=open(rest).read())})
        wait_diagnostics()
    elif kind == "change":
        path, textfile = rest.split(":")
        notify("textDocument/didChange", {"textDocument": dict(doc(path), version=2), "contentChanges": [{"text": open(textfile).read()}]})
        wait_diagnostics()
    elif kind == "write":
        path, textfile = rest.split(":")
        with open(path, "w") as f:
            f.write(open(textfile).read())
    elif kind == "close":
        notify("textDocument/didClose", {"textDocument": doc(rest)})
        wait_diagnostics()
    elif kind in ("hover", "definition", "references", "completion"):
        keep = None
        if kind == "completion":
            rest, keep = rest.rsplit(":", 1)
            keep = keep.split(",")
        path, line, col = rest.rsplit(":", 2)
        params = {"textDocument": doc(path), "position": {"line": int(line), "character": int(col)}}
        if kind == "references":
            params["context"] = {"includeDeclaration": True}
        request("textDocument/" + kind, params, keep)
    elif kind == "hints":
        path, l0, c0, l1, c1 = rest.rsplit(":", 4)
        rng = {"start": {"line": int(l0), "character": int(c0)}, "end": {"line": int(l1), "character": int(c1)}}
        request("textDocument/inlayHint", {"textDocument": doc(path), "range": rng})
    elif kind == "symbols":
        request("textDocument/documentSymbol", {"textDocument": doc(rest)})
    elif kind == "formatting":
        request("textDocument/formatting", {"textDocument": doc(rest), "options": {"tabSize": 2, "insertSpaces": True}})
    elif kind == "raw":
        write(rest)
        show(read())
    elif kind == "notify":
        write(rest)
    elif kind == "frame":
        p.stdin.write(rest.encode().decode("unicode_escape").encode()); p.stdin.flush()
        show(read())
    elif kind == "shutdown":
        request("shutdown", None)
        notify("exit", None)
p.stdin.close()
rest = p.stdout.read()
if rest:
    print("left over:", rest[:200])
print("exit", p.wait())
