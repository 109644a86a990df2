"""check.py — netrun import against ONNX Runtime (tests/onnx.bats).

  check.py NETRUN MODEL.onnx [--ort REF.onnx] [BATCH ...]

Imports MODEL.onnx with `netrun import`, then, at each batch size (the
value of every dynamic dimension; or NAME=N,NAME=N... giving each named
dynamic dimension its own, as batch=2,seq=5), feeds the same random inputs to ONNX
Runtime and to `netrun predict` on the script and compares every graph
output within 1e-4 relative (atol 1e-5).  With --ort, ONNX Runtime runs REF.onnx,
a model of the same inputs and outputs written with ops it has (for
LSTM's layout 1, which it does not run).  Prints one line per output and
batch; exits 1 on the first difference.  Inputs are fed under the names
netrun import gives them (valid_name below: its documented rule)."""
import keyword, os, re, subprocess, sys, tempfile
import numpy as np
import onnx
import onnxruntime as ort

RESERVED = {"input", "param", "state", "def", "op", "grad", "return", "while", "if", "else", "import", "load",
            "and", "or", "not", "true", "false", "print", "dim", "weights", "scope", "_"}


def valid_name(s, ops):
    o = re.sub(r"[^A-Za-z0-9_]", "_", s)
    if not o or o[0].isdigit():
        o = "_" + o
    if o in RESERVED or o in ops:
        o += "_"
    return o


def main():
    netrun, model = sys.argv[1], sys.argv[2]
    ref, rest = model, sys.argv[3:]
    if rest[:1] == ["--ort"]:
        ref, rest = rest[1], rest[2:]
    batches = rest or ["3", "4"]
    ops = set(l.split()[0] for l in subprocess.run([netrun, "ops"], capture_output=True, text=True).stdout.splitlines()[1:] if l.strip())
    work = tempfile.mkdtemp()
    script = os.path.join(work, "model.net")
    r = subprocess.run([netrun, "import", model, "-o", script], capture_output=True, text=True)
    if r.returncode:
        sys.exit("netrun import failed:\n" + r.stderr)
    sess = ort.InferenceSession(ref, providers=["CPUExecutionProvider"])
    for batch in batches:
        sizes = dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in batch.split(",")) if "=" in batch else None
        if sizes is None:
            batch = int(batch)
        rng = np.random.default_rng(sum(sizes.values()) if sizes else batch)
        feeds, args = {}, [netrun, "predict", script]
        for x in sess.get_inputs():
            shape = [d if isinstance(d, int) else sizes[d] if sizes else batch for d in x.shape]
            if x.type == "tensor(float)":
                v = rng.standard_normal(shape).astype(np.float32)
            elif x.type == "tensor(bool)":
                v = rng.integers(0, 2, shape).astype(bool)
            else:
                v = rng.integers(0, 5, shape).astype(np.int64)
            feeds[x.name] = v
            path = os.path.join(work, "in%d.npy" % len(feeds))
            np.save(path, v)
            args += ["--feed", "%s=%s" % (valid_name(x.name, ops), path)]
        want = sess.run(None, feeds)
        for o, w in zip(sess.get_outputs(), want):
            path = os.path.join(work, "out.npy")
            r = subprocess.run(args + ["--output", valid_name(o.name, ops), "--format", "npy", "-o", path],
                               capture_output=True, text=True)
            if r.returncode:
                sys.exit("netrun predict failed:\n" + r.stderr)
            got = np.load(path)
            if got.shape != w.shape or not np.allclose(got, w, rtol=1e-4, atol=1e-5):
                err = np.max(np.abs(got.astype(np.float64) - w)) if got.shape == w.shape else "shape"
                sys.exit("%s batch %s: output %s differs: got %s %s, want %s; max |diff| %s" %
                         (os.path.basename(model), batch, o.name, got.shape, got.ravel()[:4], w.ravel()[:4], err))
            print("%s batch %s %s: %s within 1e-4" % (os.path.basename(model), batch, o.name, list(w.shape)))


if __name__ == "__main__":
    main()
