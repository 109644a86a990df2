#!/usr/bin/env bats
# code_shape.bats — what issue 16 (the shape of the code) made testable:
# `netrun checkpoint --format json` (every value of a checkpoint in full),
# the one option parser every verb uses, the include graph of src/ (each
# folder a layer that includes only the layers below it, no cycles), and
# one prefix per module for what its header exports.
bats_require_minimum_version 1.5.0

setup_file() {
  # tests/ckpt/mkckpt.c writes the checkpoint checkpoint.bats knows by heart.
  export MKCKPT="$BATS_FILE_TMPDIR/mkckpt"
  cd "$BATS_TEST_DIRNAME/.."
  "${CC:-cc}" -std=c11 -D_GNU_SOURCE -O2 -Isrc -o "$MKCKPT" tests/ckpt/mkckpt.c src/io/checkpoint.c src/cli/option.c src/base/diag.c \
    src/base/file.c src/base/mem.c src/ir/tensor.c src/ir/program.c -lz -lm
}

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  cd "$BATS_TEST_TMPDIR"
}

# ---- netrun checkpoint --format json ---------------------------------------------

# The tensors of checkpoint FILE read straight from its bytes (the format in
# src/io/checkpoint.h), not through netrun: one line per tensor,
#   NAME<TAB>DTYPE<TAB>DIMS<TAB>VALUES
# an f32 element as the hex of its four bytes, so equality is bit for bit.
raw_tensors() {
  python3 - "$1" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"NETRUNCK"
p = 20
def u(n):
    global p
    v = int.from_bytes(b[p:p + n], "little"); p += n; return v
while b[p:p + 4] != b"TENS":
    p += 4
    n = u(8)
    p += n
p += 12
for _ in range(u(4)):
    n = u(4)
    name = b[p:p + n].decode()
    p += n
    dtype = ["f32", "i64", "bool"][u(1)]
    dims = [u(8) for _ in range(u(1))]
    n = 1
    for d in dims: n *= d
    size = {"f32": 4, "i64": 8, "bool": 1}[dtype]
    raw = b[p:p + n * size]; p += n * size
    if dtype == "f32": vals = [raw[i:i + 4].hex() for i in range(0, len(raw), 4)]
    elif dtype == "i64": vals = [str(struct.unpack("<q", raw[i:i + 8])[0]) for i in range(0, len(raw), 8)]
    else: vals = ["true" if x else "false" for x in raw]
    print(name, dtype, ",".join(map(str, dims)), " ".join(vals), sep="\t")
PY
}

# The same lines from the JSON document on stdin: each f32 element parsed as
# a double and rounded to the float, hex of its bytes (so a value printed
# with too few digits differs); "nan", "inf", "-inf" as those floats.
json_tensors() {
  python3 -c '
import json, struct, sys
doc = json.load(sys.stdin)
def f32(x):
    x = float(x)   # a number, or the strings "nan", "inf", "-inf"
    return struct.pack("<f", x).hex() if x == x else "0000c07f"
for v in doc["values"]:
    if v["dtype"] == "f32": vals = [f32(x) for x in v["data"]]
    elif v["dtype"] == "i64": vals = [str(x) for x in v["data"]]
    else: vals = [json.dumps(x) for x in v["data"]]
    print(v["name"], v["dtype"], ",".join(map(str, v["shape"])), " ".join(vals), sep="\t")
'
}

# A tiny model trained two steps with adam: parameters and optimizer values.
trained() {
  "$NETRUN" train "$ROOT/examples/xor.net" --epochs 2 --save xor.ckpt >/dev/null 2>&1
}

@test "checkpoint --format json: one valid document, every value of a trained model bit for bit" {
  trained
  run --separate-stderr "$NETRUN" checkpoint --format json xor.ckpt
  [ "$status" -eq 0 ]
  [ -z "$stderr" ]
  python3 -m json.tool <<<"$output" >/dev/null
  diff -u <(raw_tensors xor.ckpt) <(json_tensors <<<"$output")
  # Every tensor of the file, each once, in its order: 4 parameters, 16 adam values.
  [ "$(raw_tensors xor.ckpt | wc -l)" -eq 20 ]
  # --format=json is the same document.
  [ "$("$NETRUN" checkpoint --format=json xor.ckpt)" = "$output" ]
}

@test "checkpoint --format json: the header fields and one-element values equal the listing's" {
  trained
  "$NETRUN" checkpoint xor.ckpt > list.txt
  "$NETRUN" checkpoint --format json xor.ckpt > doc.json
  python3 - <<'PY'
import json
doc = json.load(open("doc.json"))
lines = open("list.txt").read().splitlines()
field = {l.split(": ")[0]: l.split(": ", 1)[1] for l in lines if ": " in l and not l.startswith(" ")}
assert field["checkpoint"] == doc["checkpoint"] == "xor.ckpt"
assert int(field["format version"]) == doc["format_version"] == 1
assert field["program hash"] == doc["program_hash"]
assert int(field["epoch"]) == doc["epoch"] == 2
assert int(field["step"]) == doc["step"] == 2
assert int(field["samples seen"]) == doc["samples_seen"] == 8
assert field["rng state"].split() == doc["rng_state"]
settings = [l[2:].split(" =", 1) for l in lines if l.startswith("  ") and " = " in l]
assert [(k, v.strip()) for k, v in settings] == list(doc["settings"].items())
assert int(field["settings"]) == len(doc["settings"]) == 17
count, rest = field["tensors"].split(" (")
assert int(count) == len(doc["values"]) == 20
assert rest == "%d elements, %d bytes)" % (doc["elements"], doc["bytes"]) == "107 elements, 428 bytes)"
rows = [l.split() for l in lines if l.startswith("  ") and " = " not in l]
for row, v in zip(rows, doc["values"], strict=True):
    assert row[0] == v["name"] and row[1] == v["dtype"]
    if row[-2] == "value":   # a one-element value: the listing's nine digits
        assert row[-1] == "%.9g" % v["data"][0], (row, v)
    else:                    # min and max in the listing's six digits
        i = row.index("min")
        assert row[i + 1] == "%.6g" % min(v["data"]) and row[i + 3] == "%.6g" % max(v["data"]), (row, v)
    want = "optimizer" if "@" in v["name"] else "param"
    assert v["kind"] == want, v
assert {v["kind"] for v in doc["values"]} == {"param", "optimizer"}
assert [v["name"] for v in doc["values"] if v["kind"] == "param"] == ["W1", "b1", "W2", "b2"]
assert doc["values"][4]["name"] == "W1@MOMENT1" and doc["values"][4]["shape"] == [2, 8]
PY
}

@test "checkpoint --format json: every dtype, non-finite values, odd names and settings, exactly" {
  "$MKCKPT" write k.ckpt
  run --separate-stderr "$NETRUN" checkpoint --format json k.ckpt
  [ "$status" -eq 0 ]
  python3 -m json.tool <<<"$output" >/dev/null
  diff -u - <(printf '%s\n' "$output") <<'EOF'
{"checkpoint": "k.ckpt",
 "format_version": 1, "program_hash": "4aaf3e8a42a03714",
 "epoch": 3, "step": 1407, "samples_seen": 180000,
 "rng_state": ["bdd732262feb6e95", "28efe333b266f103", "47526757130f9f52", "581ce1ff0e4ae394"],
 "settings": {"optimizer": "momentum", "lr": "0.1", "momentum": "0.9", "batch": "128", "epochs": "5", "seed": "0", "note": "", "comment": "résumé = run 7, \"quoted\""},
 "elements": 50, "bytes": 203,
 "values": [
  {"name": "W1", "kind": "param", "dtype": "f32", "shape": [3, 4], "data": [-1.25, -1, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1, 1.25, 1.5]},
  {"name": "b1", "kind": "param", "dtype": "f32", "shape": [4], "data": [0, 0, 0, 0]},
  {"name": "W1@momentum", "kind": "optimizer", "dtype": "f32", "shape": [3, 4], "data": [0, 0.00999999978, 0.0199999996, 0.0299999993, 0.0399999991, 0.049999997, 0.0599999987, 0.0700000003, 0.0799999982, 0.0899999961, 0.099999994, 0.109999999]},
  {"name": "@beta1_pow", "kind": "optimizer", "dtype": "f32", "shape": [], "data": [0.728999972]},
  {"name": "labels", "kind": "param", "dtype": "i64", "shape": [5], "data": [-3, 0, 7, 1099511627776, 2]},
  {"name": "@count", "kind": "optimizer", "dtype": "i64", "shape": [], "data": [-12]},
  {"name": "mask", "kind": "param", "dtype": "bool", "shape": [2, 3], "data": [true, false, true, true, false, true]},
  {"name": "empty", "kind": "param", "dtype": "f32", "shape": [0, 3], "data": []},
  {"name": "odd", "kind": "param", "dtype": "f32", "shape": [4], "data": [1, "nan", "-inf", 3]},
  {"name": "deep", "kind": "param", "dtype": "f32", "shape": [1, 2, 1, 1, 1, 1, 1, 2], "data": [1, 2, 3, 4]},
  {"name": "name with spaces/and é", "kind": "param", "dtype": "bool", "shape": [], "data": [true]}
 ]}
EOF
  diff -u <(raw_tensors k.ckpt) <(json_tensors <<<"$output")
}

@test "checkpoint --format: text is the listing; an unknown format or a missing one is a usage error" {
  "$MKCKPT" write k.ckpt
  [ "$("$NETRUN" checkpoint --format text k.ckpt)" = "$("$NETRUN" checkpoint k.ckpt)" ]
  [ "$("$NETRUN" checkpoint k.ckpt --format=text)" = "$("$NETRUN" checkpoint k.ckpt)" ]
  run "$NETRUN" checkpoint --format yaml k.ckpt
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: unknown format 'yaml' (expected text or json)" ]
  run "$NETRUN" checkpoint k.ckpt --format
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --format needs a value" ]
  # A damaged file is the same error in either format, and no JSON is printed.
  printf 'NETRUNCK' > bad.ckpt
  run --separate-stderr "$NETRUN" checkpoint --format json bad.ckpt
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  [[ "$stderr" == "netrun: error: bad.ckpt: "* ]]
}

# ---- the one option parser ---------------------------------------------------------

# The options `netrun help VERB` documents: a line's first word when it is
# one ("  --seed N   ..."), or every one of a line that lists them
# ("  --set, --feed, ...   as for netrun run").
documented() {
  "$NETRUN" help "$1" | awk '$1 ~ /^(--[a-z-]+,?|-o)$/ {
      if ($1 ~ /,$/) { for (i = 1; i <= NF; i++) if ($i ~ /^--[a-z-]+,?$/) { sub(/,$/, "", $i); print $i } }
      else print $1 }' | sort -u
}

@test "every verb accepts exactly the options its help documents" {
  verbs=(dump run time summary grad gradcheck train eval predict lr-find plot data checkpoint export import sample repl)
  # Every option any help documents, and every option any table declares.
  all=$( { for v in "${verbs[@]}"; do documented "$v"; done
           grep -ohE '\{"(--[a-z-]+|-o)", OPTION_' "$ROOT"/src/*/*.c | grep -oE -- '--?[a-z-]+'; } |
         grep -vxE -- '--help|--plugin|--allow-load' | sort -u)
  [ "$(wc -l <<<"$all")" -gt 40 ]
  bad=""
  for v in "${verbs[@]}"; do
    doc=$(documented "$v")
    for o in $all; do
      err=$("$NETRUN" "$v" "$o" </dev/null 2>&1 >/dev/null | head -1)
      if grep -qx -- "$o" <<<"$doc"; then
        [[ "$err" != *"unknown option '$o'"* ]] || bad+="$v accepts no $o, which its help documents"$'\n'
      else
        [[ "$err" == "netrun: $v: unknown option '$o'"* ]] || bad+="$v takes $o, which its help does not document: $err"$'\n'
      fi
    done
  done
  [ -z "$bad" ] || { echo "$bad"; false; }
}

@test "option forms: --opt value, --opt=value; a flag given a value, a missing value, an unknown option" {
  printf 'input x : f32[1]\ny = x * 2\nprint(y)\n' > t.net
  [ "$("$NETRUN" run t.net --set x=[3])" = "$("$NETRUN" run t.net --set=x=[3])" ]
  [ "$("$NETRUN" run --seed=4 --set x=[3] t.net)" = "$("$NETRUN" run t.net --seed 4 --set=x=[3])" ]
  run "$NETRUN" run t.net --check-nan=yes
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --check-nan takes no value" ]
  run "$NETRUN" data --shuffle=1 x.csv
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: data: --shuffle takes no value" ]
  run "$NETRUN" run t.net --seed
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --seed needs a whole number of at least 0" ]
  run "$NETRUN" train t.net --lr inf
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --lr needs a positive number, not 'inf'" ]
  run "$NETRUN" predict t.net --output
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --output needs a NAME" ]
  run "$NETRUN" eval t.net --output y
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: eval: unknown option '--output'" ]
  run "$NETRUN" ops --all
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: ops: unknown option '--all'" ]
  run "$NETRUN" help run train
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: help takes at most one VERB" ]
  run "$NETRUN" plot -o
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: -o needs a file name" ]
  # -o takes no '=' form; '-' alone is an argument (plot's standard input).
  run "$NETRUN" plot -o=x.svg -
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: plot: unknown option '-o=x.svg'" ]
}

# ---- the include graph ----------------------------------------------------------------

# The layers of src/, lowest first (doc/design.md, "Layers"): a file may
# include headers of its own folder and of the folders before it, never of
# one after it.
LAYERS="base ir exec autodiff ops io front train cli"

# Every #include "..." of src/FOLDER/*.{c,h,list} resolved to a file of src/
# (by its folder/name.h spelling, or beside the including file); prints each
# include of a higher layer, each folder outside LAYERS, each include cycle
# between modules (a strongly connected component; a module is folder/name);
# fails on any of them.  Headers not in src/ (the generated parser.h, the
# public netrun/plugin.h) are not the layers' business.
include_check() {
  python3 - "$1" "$LAYERS" <<'PY'
import glob, os, re, sys
src = os.path.join(sys.argv[1], "src")
rank = {f: i for i, f in enumerate(sys.argv[2].split())}
edges, bad = {}, []
for d in sorted(glob.glob(src + "/*/")):
    if os.path.basename(d.rstrip("/")) not in rank:
        bad.append("src/%s: a folder not in the layers (%s)" % (os.path.basename(d.rstrip("/")), sys.argv[2]))
files = sorted(f for e in ("c", "h", "list") for f in glob.glob(src + "/*/*." + e))
for f in files:
    rel = os.path.relpath(f, src)
    folder, mod = rel.split("/")[0], os.path.splitext(rel)[0]
    for n, line in enumerate(open(f, encoding="utf-8"), 1):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if not m:
            continue
        for cand in (os.path.join(src, m.group(1)), os.path.join(os.path.dirname(f), m.group(1))):
            if os.path.exists(cand):
                target = os.path.splitext(os.path.relpath(cand, src))[0]
                break
        else:
            continue
        to = target.split("/")[0]
        if folder in rank and to in rank and rank[to] > rank[folder]:
            bad.append("src/%s:%d: %s includes %s, a higher layer" % (rel, n, folder, m.group(1)))
        if target != mod:
            edges.setdefault(mod, set()).add(target)
index, low, stack, on, cycles = {}, {}, [], set(), []
def visit(v):
    index[v] = low[v] = len(index); stack.append(v); on.add(v)
    for w in sorted(edges.get(v, ())):
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        c = []
        while not c or c[-1] != v:
            c.append(stack.pop()); on.discard(c[-1])
        if len(c) > 1:
            cycles.append(sorted(c))
for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
    if v not in index:
        visit(v)
for c in cycles:
    bad.append("include cycle: " + ", ".join("%s -> %s" % (a, b) for a in c for b in sorted(edges.get(a, ())) if b in c))
for b in bad:
    print(b)
print("%d files, %d modules, %d edges" % (len(files), len(index), sum(map(len, edges.values()))))
sys.exit(1 if bad else 0)
PY
}

@test "the include graph of src/: each folder includes only its own and lower layers, no cycle" {
  run include_check "$ROOT"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "${lines[-1]}" =~ ^[0-9]+" files, "[0-9]+" modules, "[0-9]+" edges"$ ]]
  # Every folder of src/ is a layer, and every layer a folder.
  [ "$(ls -d "$ROOT"/src/*/ | xargs -n1 basename | sort)" = "$(tr ' ' '\n' <<<"$LAYERS" | sort)" ]
  # The check sees a lower folder including a higher one (a header, an
  # X-macro list), a folder outside the layers, and a cycle inside one
  # folder (one include resolved beside its file).
  mkdir -p fake/src/base fake/src/ir fake/src/io fake/src/cli fake/src/ops fake/src/widget
  printf '#include "base/b.h"\n' > fake/src/base/a.h
  printf '#include "a.h"\n' > fake/src/base/b.c
  printf '#include "base/b.h"\n' > fake/src/base/b.h
  printf '#include "base/a.h"\n#include "ir/program.h"\n#include "cli/cmd.h"\n' > fake/src/io/data.c
  printf '#include "ops/ops.list"\n#include "parser.h"\n' > fake/src/ir/registry.c
  : > fake/src/ir/program.h
  : > fake/src/cli/cmd.h
  : > fake/src/ops/ops.list
  : > fake/src/widget/w.c
  run include_check fake
  echo "$output"
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "src/widget: a folder not in the layers (base ir exec autodiff ops io front train cli)" ]
  [ "${lines[1]}" = "src/io/data.c:3: io includes cli/cmd.h, a higher layer" ]
  [ "${lines[2]}" = "src/ir/registry.c:1: ir includes ops/ops.list, a higher layer" ]
  [ "${lines[3]}" = "include cycle: base/a -> base/b, base/b -> base/a" ]
  [ "${lines[4]}" = "9 files, 7 modules, 6 edges" ]
  # The same tree in order passes.
  rm -r fake/src/widget fake/src/base/b.c
  printf '#include "ir/program.h"\n' > fake/src/io/data.c
  printf '#include "ir/program.h"\n' > fake/src/ir/registry.c
  run include_check fake
  echo "$output"
  [ "$status" -eq 0 ]
}

# ---- one prefix per module ---------------------------------------------------------------

# The prefixes each module's header may export functions (and extern
# values) under: its own, and for the modules that define the program's
# and the tensors' vocabulary, one per type they define (STYLE.md rule 5).
# A header missing from the table fails, so a new module says its prefix.
prefix_check() {
  python3 - "$1" <<'PY'
import glob, os, re, sys
PREFIXES = {
    "base/diag": "diag_ span_", "base/file": "file_", "base/mem": "mem_ arena_ strmap_ ptrmap_", "base/scan": "scan_",
    "ir/dump": "dump_", "ir/names": "name_", "ir/program": "prog_ op_ attr_ slot_ dtype_ dim_ dims_ shape_ i64_",
    "ir/registry": "reg_", "ir/rewrite": "rewrite_", "ir/tensor": "tensor_ dtype_ f32_ bcast_ rng_",
    "exec/dist": "dist_", "exec/exec": "exec_", "exec/par": "par_", "exec/plan": "plan_", "exec/print": "print_", "exec/tape": "tape_",
    "autodiff/backward": "bwd_", "autodiff/tapegrad": "tgrad_",
    "ops/bcast_loop": "bcast_ binary_", "ops/plugin": "plugin_", "ops/vmath": "vmath_", "ops/attmm": "att_mm",
    "io/checkpoint": "ckpt_", "io/data": "data_", "io/datafmt": "data_", "io/image": "image_", "io/npy": "npy_", "io/onnx": "onnx_", "io/plot": "plot_",
    "io/report": "report_", "io/safetensors": "st_", "io/text": "text_", "io/weights": "weights_", "io/zip": "zip_",
    "front/ast": "ast_", "front/feed": "feed_", "front/lower": "lower_", "front/run": "run_",
    "front/session": "session_", "front/userop": "uop_",
    "train/lrfind": "lrf_", "train/train": "train_", "train/trainer": "trainer_", "train/trainrun": "trun_",
    "cli/cli": "cli_", "cli/cmd": "cmd_", "cli/option": "option_", "cli/repl": "repl_",
    "cli/fmt": "fmt_", "cli/lsp": "lsp_",
}
src = os.path.join(sys.argv[1], "src")
bad = 0
headers = sorted(glob.glob(src + "/*.h") + glob.glob(src + "/*/*.h"))
for h in headers:
    mod = os.path.splitext(os.path.relpath(h, src))[0]
    text = re.sub(r"/\*.*?\*/", " ", open(h, encoding="utf-8").read(), flags=re.S)
    text = re.sub(r"\\\n", " ", text)
    names = set()
    for line in text.splitlines():
        if re.match(r"\s|#|typedef\b|struct\b|enum\b|union\b|}", line):
            continue   # indented, preprocessor or a type
        m = re.match(r"(?:(?:static|inline|extern|const|unsigned|struct)\s+)*[A-Za-z_]\w*[\s*]+(?:const\s+)?\**\s*([A-Za-z_]\w*)\s*[(;\[]", line)
        if m:
            names.add(m.group(1))
    if mod not in PREFIXES:
        print("%s.h: no prefix in the table for it (exports %s)" % (mod, " ".join(sorted(names))))
        bad += 1
        continue
    for n in sorted(names):
        if not n.startswith(tuple(PREFIXES[mod].split())):
            print("%s.h: %s is not under %s" % (mod, n, PREFIXES[mod] or "any prefix"))
            bad += 1
print("%d headers checked" % len(headers))
sys.exit(1 if bad else 0)
PY
}

@test "every module's header exports its functions under the module's prefix" {
  run prefix_check "$ROOT"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "${lines[-1]}" =~ ^[0-9]+" headers checked"$ ]]
  # The check sees a name outside the prefix, a static inline one and an
  # extern value among them, and a module the table does not know.
  mkdir -p fake/src/exec fake/src/front
  printf '/* exec_in(c) in a comment */\nint exec_run(Executor *ex);\nTensor *ctx_in(ExecCtx *c, int i);\n' > fake/src/exec/exec.h
  printf 'static inline int par_team(void) { return 1; }\nstatic inline int threads(void) { return 1; }\n' > fake/src/exec/par.h
  printf 'extern const UserOpImpl uop_impl;\nextern int nerrors;\n' > fake/src/front/userop.h
  printf 'const char *\nnothing(void);\nvoid other_thing(int x);\n' > fake/src/widget.h
  run prefix_check fake
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "exec/exec.h: ctx_in is not under exec_" ]
  [ "${lines[1]}" = "exec/par.h: threads is not under par_" ]
  [ "${lines[2]}" = "front/userop.h: nerrors is not under uop_" ]
  [ "${lines[3]}" = "widget.h: no prefix in the table for it (exports other_thing)" ]
  [ "${lines[4]}" = "4 headers checked" ]
}
