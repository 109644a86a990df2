"""torch_check.py — models exported by torch.onnx.export, imported by netrun
(tests/onnx.bats; run with a Python that has torch: Debian's python3-torch).

  torch_check.py NETRUN NAME...

Exports each model NAME at batch 3 with a dynamic batch axis (opset 13 or
14), imports it with `netrun import`, and compares `netrun predict` with
PyTorch's outputs (eval mode: batch norm on its running statistics, dropout
off) at batch 3 and 4, within 1e-4 relative.  Exits 77 saying why when
torch is missing."""
import json, os, re, subprocess, sys, tempfile
try:
    import numpy as np
    import torch
    from torch import nn
except ImportError as e:
    print("skip: %s" % e)
    sys.exit(77)

torch.manual_seed(0)


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 3, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(3)
        self.conv2 = nn.Conv2d(3, 3, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(3)

    def forward(self, x):
        return torch.relu(self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))) + x)


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 3, 3, padding=1)
        self.layer1 = nn.Sequential(Residual(), Residual())
        self.fc = nn.Linear(3, 10)

    def forward(self, x):
        x = self.layer1(torch.relu(self.stem(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Encoder(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.emb = nn.Embedding(20, 16)
        self.enc = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, activation=act, batch_first=True)
        self.head = nn.Linear(16, 5)

    def forward(self, ids):
        return self.head(self.enc(self.emb(ids)).mean(1))


class Recurrent(nn.Module):
    """nn.LSTM or nn.GRU, 2 layers, bidirectional, batch first, then a linear head on every step."""
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(3, 4, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


def models():
    return {
        "mlp": (nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 4),
                              nn.LogSoftmax(1)), lambda b: torch.randn(b, 3, 4)),
        "cnn": (nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.Sigmoid(),
                              nn.AvgPool2d(2), nn.Flatten(), nn.Linear(8, 10)), lambda b: torch.randn(b, 1, 8, 8)),
        "resnet": (ResNet(), lambda b: torch.randn(b, 1, 6, 6)),
        "gelu": (nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.LayerNorm(8), nn.Tanh(), nn.Linear(8, 2)),
                 lambda b: torch.randn(b, 6)),
        "encoder": (Encoder("relu"), lambda b: torch.randint(0, 20, (b, 7))),
        # the sequence as dynamic as the batch: 5 steps at batch 3, 6 at batch 4
        "lstm": (Recurrent(nn.LSTM), lambda b: torch.randn(b, b + 2, 3)),
        "gru": (Recurrent(nn.GRU), lambda b: torch.randn(b, b + 2, 3)),
    }


def check(netrun, name):
    model, make = models()[name]
    # no two parameters equal (the exporter merges equal initializers, as the
    # zero biases of a fresh model, into one), batch norm's statistics away
    # from 0 and 1 so they matter
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2)
    model.eval()
    work = tempfile.mkdtemp()
    path = os.path.join(work, name + ".onnx")
    x3 = make(3)
    torch.onnx.export(model, (x3,), path, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch", 1: "seq"} if name in ("lstm", "gru") else {0: "batch"},
                                    "output": {0: "batch"}}, opset_version=14)
    print("%s: exported at opset 14" % name)
    r = subprocess.run([netrun, "import", path, "-o", os.path.join(work, "m.net")], capture_output=True, text=True)
    if r.returncode:
        sys.exit("netrun import failed:\n" + r.stderr)
    for b in (3, 4):
        x = make(b)
        with torch.no_grad():
            want = model(x).numpy()
        xin = os.path.join(work, "x.npy")
        np.save(xin, x.numpy())
        out = os.path.join(work, "out.npy")
        r = subprocess.run([netrun, "predict", os.path.join(work, "m.net"), "--feed", "input_=" + xin,
                            "--output", "output", "--format", "npy", "-o", out], capture_output=True, text=True)
        if r.returncode:
            sys.exit("netrun predict failed:\n" + r.stderr)
        got = np.load(out)
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            sys.exit("%s batch %d: got %s, want %s" % (name, b, got.ravel()[:4], want.ravel()[:4]))
        print("%s batch %d: %s within 1e-4 of PyTorch" % (name, b, list(want.shape)))
    grads(netrun, name, model, make(3), work)


def seg(s):
    o = re.sub(r"[^A-Za-z0-9_]", "_", s)
    return "_" + o if not o or o[0].isdigit() else o


def rnn_grads(name, rnn, got):
    """The export stacks each layer's directions and reorders the gates (LSTM i, f, g, o -> i, o, f, c; GRU
    r, z, n -> z, r, h) into W [2, gH, in], R [2, gH, H], B [2, 2gH] with names of its own: PyTorch's
    gradients arranged so must each be one of netrun's.  The number found."""
    H = rnn.hidden_size
    order = [0, 3, 1, 2] if isinstance(rnn, nn.LSTM) else [1, 0, 2]

    def re(g):
        g = g.detach().numpy()
        return np.concatenate([g[i * H:(i + 1) * H] for i in order], 0)
    found = 0
    for l in range(rnn.num_layers):
        sfx = ["_l%d" % l, "_l%d_reverse" % l]
        want = [np.stack([re(getattr(rnn, "weight_ih" + x).grad) for x in sfx]),
                np.stack([re(getattr(rnn, "weight_hh" + x).grad) for x in sfx]),
                np.stack([np.concatenate([re(getattr(rnn, "bias_ih" + x).grad), re(getattr(rnn, "bias_hh" + x).grad)])
                          for x in sfx])]
        for k, w in enumerate(want):
            if not any(
                       (list(v["shape"]) == list(w.shape) and
                        np.allclose(np.array(v["data"], np.float32).reshape(w.shape), w, rtol=1e-3, atol=1e-5))
                       for v in got.values()):
                sys.exit("%s: layer %d: PyTorch's gradient of %s (arranged as ONNX's) is none of netrun's"
                         % (name, l, ["W", "R", "B"][k]))
            found += 1
    return found


def grads(netrun, name, model, x, work):
    """The gradients of mean(output^2) with respect to every parameter, netrun's
    (`netrun grad` on the imported script with that loss appended) against
    PyTorch's, within 1e-3 relative (atol 1e-5)."""
    script = os.path.join(work, "m.net")
    with open(script) as f:
        text = f.read()
    with open(os.path.join(work, "loss.net"), "w") as f:
        f.write(text + "loss = mean(output * output)\n")
    np.save(os.path.join(work, "x.npy"), x.numpy())
    r = subprocess.run([netrun, "grad", os.path.join(work, "loss.net"), "--feed", "input_=" + os.path.join(work, "x.npy"),
                        "--format", "json"], capture_output=True, text=True)
    if r.returncode:
        sys.exit("netrun grad failed:\n" + r.stderr)
    got = json.loads(r.stdout)["grads"]
    model.zero_grad()
    (model(x) ** 2).mean().backward()
    n = folded = 0
    for pname, p in model.named_parameters():
        key = ".".join(seg(s) for s in pname.split("."))
        if key not in got:   # folded by the export into another (a conv with its batch norm), or
            # rearranged (an LSTM's gates in ONNX's order: the gradcheck test checks those)
            folded += 1
            continue
        g = np.array(got[key]["data"], dtype=np.float32).reshape(p.shape)
        if not np.allclose(g, p.grad.numpy(), rtol=1e-3, atol=1e-5):
            sys.exit("%s: d loss / d %s: netrun %s, PyTorch %s" % (name, pname, g.ravel()[:3], p.grad.numpy().ravel()[:3]))
        n += 1
    if isinstance(getattr(model, "rnn", None), (nn.LSTM, nn.GRU)):
        n += rnn_grads(name, model.rnn, got)
        folded -= 4 * model.rnn.num_layers * 2
    if n == 0:
        sys.exit("%s: no parameter of PyTorch's is in the imported script: %s" % (name, sorted(got)))
    print("%s: the gradients of %d parameters within 1e-3 of PyTorch's (%d folded or rearranged by the export)" % (name, n, folded))


for name in sys.argv[2:]:
    check(sys.argv[1], name)
