"""export_check.py — netrun export --model against ONNX Runtime, and the round trip (tests/onnx.bats).

  export_check.py NETRUN SCRIPT.net VALUE [WEIGHTS]

Exports SCRIPT.net's forward program to ONNX (with WEIGHTS when given),
then at batch 3 and 4 feeds the same random inputs to ONNX Runtime on the
exported model and to `netrun predict --output VALUE` on the script: the
outputs agree within 1e-5 relative, each value of its own magnitude or, near
zero, of the largest's (both sum in float32 in their own orders: through
fashion_resnet's 15 convolutions the two differ by up to 2.4e-6 on logits of
magnitude 4, 0.016260624 against 0.016259318 on one).  Then imports the exported model with
`netrun import` and checks that its predictions are the script's, bit for
bit; or, when the script's program runs the fused attention op (which ONNX
gets as MatMul, Softmax and the rest, and import brings back as those ops),
within 1e-6 of the largest value: attention's own kernels sum its products
in another order than matmul's (the fused and unfused forms agree within
1e-6, tests/attention.bats)."""
import os, subprocess, sys, tempfile
import numpy as np
import onnxruntime as ort
sys.path.insert(0, os.path.dirname(__file__))
from check import valid_name  # noqa: E402


def predict(netrun, script, feeds, value, names, work, weights=None):
    args = [netrun, "predict", script, "--output", value, "--format", "npy", "-o", os.path.join(work, "p.npy")]
    # without a weights file the initial values are what is exported and compared
    args += ["--weights", weights] if weights else ["--init"]
    for i, (k, v) in enumerate(feeds.items()):
        path = os.path.join(work, "f%d.npy" % i)
        np.save(path, v)
        args += ["--feed", "%s=%s" % (names(k), path)]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        sys.exit("netrun predict %s failed:\n%s" % (script, r.stderr))
    return np.load(os.path.join(work, "p.npy"))


def main():
    netrun, script, value = sys.argv[1:4]
    weights = sys.argv[4] if len(sys.argv) > 4 else None
    work = tempfile.mkdtemp()
    model = os.path.join(work, "m.onnx")
    r = subprocess.run([netrun, "export"] + ([weights] if weights else []) +
                       ["--model", script, "--value", value, "-o", model], capture_output=True, text=True)
    if r.returncode:
        sys.exit("netrun export failed:\n" + r.stderr)
    ops = set(l.split()[0] for l in subprocess.run([netrun, "ops"], capture_output=True, text=True).stdout.splitlines()[1:] if l.strip())
    rt = os.path.join(work, "rt.net")
    r = subprocess.run([netrun, "import", model, "-o", rt], capture_output=True, text=True)
    if r.returncode:
        sys.exit("netrun import of the export failed:\n" + r.stderr)
    dump = subprocess.run([netrun, "dump", script], capture_output=True, text=True).stdout
    fused = any(" = attention(" in l for l in dump.splitlines())
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for batch in (3, 4):
        rng = np.random.default_rng(batch)
        feeds = {}
        for x in sess.get_inputs():
            shape = [d if isinstance(d, int) else batch for d in x.shape]
            feeds[x.name] = (rng.random(shape).astype(np.float32) if x.type == "tensor(float)"
                             else rng.integers(0, 10, shape).astype(np.int64))
        want = predict(netrun, script, feeds, value, lambda k: k, work, weights)
        got = sess.run(None, feeds)[0]
        scale = 1e-5 * max(float(np.abs(want).max()), 0.1)
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=scale):
            bad = np.argmax(np.abs(got - want) - 1e-5 * np.abs(want)) if got.shape == want.shape else 0
            sys.exit("batch %d: ONNX Runtime gives %s, netrun %s (element %d: %r against %r)" %
                     (batch, got.ravel()[:4], want.ravel()[:4], bad, got.ravel()[bad], want.ravel()[bad]))
        print("%s batch %d: ONNX Runtime within 1e-5 of netrun predict" % (os.path.basename(script), batch))
        back = predict(netrun, rt, feeds, valid_name(value, ops), lambda k: valid_name(k, ops), work)
        if fused:
            tol = 1e-6 * max(float(np.abs(want).max()), 0.1)
            if back.shape != want.shape or not np.abs(back - want).max() <= tol:
                sys.exit("batch %d: the round trip import(export(m)) predicts %s, m %s: beyond 1e-6" %
                         (batch, back.ravel()[:4], want.ravel()[:4]))
            print("%s batch %d: import(export(m)) predicts within 1e-6 (attention unfused)" %
                  (os.path.basename(script), batch))
            continue
        if back.shape != want.shape or back.tobytes() != want.tobytes():
            sys.exit("batch %d: the round trip import(export(m)) predicts %s, m %s" %
                     (batch, back.ravel()[:4], want.ravel()[:4]))
        print("%s batch %d: import(export(m)) predicts the same bits" % (os.path.basename(script), batch))


main()
