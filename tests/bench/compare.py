#!/usr/bin/env python3
"""compare.py — `make bench-compare`: netrun's training steps against the
same models in PyTorch, both measured in one run, alternating.  Speed is
measured here, never asserted; no test depends on this script.

Workloads (each the example's model, batch and optimizer, op for op):
  fashion_resnet  examples/fashion_resnet.net, batch 128, momentum SGD
  fashion_cnn     examples/fashion_cnn.net, batch 128, Adam
  char_lm         examples/char_lm.net, 32 windows of 32 bytes, Adam
  char_lm_256     tests/bench/char_lm_256.net: the same at context 256
  adding_lstm     examples/adding_lstm.net: an LSTM of 16 over 10 steps, batch 32
  fashion_mlp     examples/fashion_mlp.net: one epoch of 60,000 images and the
                  test set's evaluation, the whole process on each side

Both sides leave their first steps out, as a long run does: netrun's step
time is that of STEPS steps after WARMUP (3) unmeasured ones (`netrun
train --log`: each step event's epoch time so far, samples / samples_per_s;
adding_lstm's whole file, 62 steps, is one epoch, so 59 are measured);
PyTorch's, the time of STEPS steps after 3 unmeasured ones (char_lm's, 5)
on random data of the same shapes (values do not change a step's time).
netrun's first step pays once for what the rest reuse (oneDNN's JIT, about
20 ms a process, and the first touch of its buffers' memory):
counted over 10 to 100 steps it added 3 to 7% to a step.  Each side runs
as its own process, one after the other, ROUNDS times, on the same number
of threads (OMP_NUM_THREADS for netrun; torch.set_num_threads for
PyTorch), so a busy machine slows both; the table gives the medians and
their ratio, and each side's
peak resident memory (the process's, from wait4: PyTorch's includes the
Python interpreter and torch's own libraries, ~300 MB before any tensor).

"share of peak" is the step's floating-point work (three times the forward
FLOPs `netrun summary` counts: forward, the gradient of the input and of
the weights) over netrun's step time, as a share of the sgemm rate
on the same threads (build/sgemm_peak: the faster of OpenBLAS's and
oneDNN's sgemm of 1024^3), measured in
each round right after both sides: the median over the rounds of each
round's step against that round's yardstick, so that a host whose speed
moves between minutes (a shared virtual machine) moves both.

--busy runs the whole comparison beside two busy loops (bounded: they stop
when this script does, or after --busy-limit seconds).

OMP_WAIT_POLICY: quiet, each side runs with its own default, as its users
do (PASSIVE for both would make PyTorch's 2-thread char_lm step twice as
slow on a quiet host); with --busy, PASSIVE for both
unless the environment sets it, the better setting for PyTorch there (its
default spin loses most beside busy loops).  --wait-policy picks either
for both sides; the first line printed says which.

PyTorch: the one installed by `make bench-deps` in build/bench-venv when it
imports there, else Debian's python3-torch (/usr/bin/python3); the table
says which version it compared.  Without either, this says so and exits 0.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FASHION = "/usr/share/datasets/fashion-mnist"
WORDS = "/usr/share/dict/words"


def ex(name):
    return os.path.join(ROOT, "examples", name)


# Steps each side runs before the timed ones.
WARMUP = 3

# name: (script, batch, steps timed per round, netrun train's extra arguments)
WORKLOADS = {
    "fashion_resnet": (ex("fashion_resnet.net"), 128, 10, []),
    "fashion_cnn": (ex("fashion_cnn.net"), 128, 30, []),
    "char_lm": (ex("char_lm.net"), 32, 100, []),
    "char_lm_256": (os.path.join(HERE, "char_lm_256.net"), 32, 10, []),
    "adding_lstm": (ex("adding_lstm.net"), 32, 62, []),
    "fashion_mlp": (ex("fashion_mlp.net"), 128, 0, []),   # one epoch, whole process
}


# ---- running a process: its seconds and peak memory ---------------------------

def run(cmd, env):
    """Runs cmd; (wall seconds, peak resident MB, stdout)."""
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        t = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    if p.returncode != 0:
        raise RuntimeError("%s exited %d" % (" ".join(cmd), p.returncode))
    return t, ru.ru_maxrss / 1024.0, text


# OMP_WAIT_POLICY for both sides: "PASSIVE" unless the environment sets
# it; None (--wait-policy default): unset, each side's own default.
WAIT_POLICY = "PASSIVE"


def env_threads(threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    if WAIT_POLICY is None:
        env.pop("OMP_WAIT_POLICY", None)
    else:
        env.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)
    return env


def netrun_side(netrun, name, threads):
    """netrun's (seconds per step, or per epoch for fashion_mlp; peak MB)."""
    script, batch, steps, extra = WORKLOADS[name]
    env = env_threads(threads)
    with tempfile.TemporaryDirectory() as tmp:
        if name == "fashion_mlp":
            secs, mb, _ = run([netrun, "train", script, "--epochs", "1"], env)
            return secs, mb
        log = os.path.join(tmp, "log.jsonl")
        # adding_lstm: its whole file (2000 rows, 62 steps) is one epoch
        limit = [] if name == "adding_lstm" else ["--limit", str((WARMUP + steps) * batch)]
        _, mb, _ = run([netrun, "train", script, "--epochs", "1", "--log", log] + limit + extra, env)
        return steady_step(log), mb


def steady_step(log, warmup=WARMUP):
    """Seconds per step after the first warmup steps, from the log of a
    one-epoch run of one process: at each step event the epoch has taken
    samples / samples_per_s seconds."""
    with open(log) as f:
        events = [json.loads(line) for line in f if line.strip()]
    steps = [e for e in events if e.get("event") == "step" and e.get("epoch") == 1]
    if len(steps) <= warmup or steps[warmup - 1]["step"] != warmup:
        raise RuntimeError("%s: fewer than %d steps logged" % (log, warmup + 1))
    first, last = steps[warmup - 1], steps[-1]
    secs = last["samples"] / last["samples_per_s"] - first["samples"] / first["samples_per_s"]
    return secs / (last["step"] - first["step"])


def torch_side(python, name, threads):
    _, batch, steps, _ = WORKLOADS[name]
    cmd = [python, os.path.abspath(__file__), "--worker", name, "--threads", str(threads), "--steps", str(steps)]
    secs, mb, out = run(cmd, env_threads(threads))
    return (secs if name == "fashion_mlp" else float(out.split()[-1])), mb


def forward_flops(netrun, name):
    script, batch, _, _ = WORKLOADS[name]
    try:
        _, _, out = run([netrun, "summary", "--batch", str(batch), script], dict(os.environ))
    except RuntimeError:
        return None
    for line in out.splitlines():
        if line.startswith("FLOPs of one forward step:"):
            count = line.split(":")[1].split()
            return int(count[0]) if len(count) == 1 else None   # "(and ops of unknown size)": a loop
    return None


# ---- the PyTorch side (--worker): one model, STEPS steps ------------------------

def resnet(torch):
    nn = torch.nn

    def conv_bn(cin, cout, k, stride, pad):
        return nn.Sequential(nn.Conv2d(cin, cout, k, stride, pad, bias=False), nn.BatchNorm2d(cout))

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1, self.c2 = conv_bn(cin, cout, 3, stride, 1), conv_bn(cout, cout, 3, 1, 1)
            self.short = conv_bn(cin, cout, 1, stride, 0) if stride != 1 else None

        def forward(self, x):
            h = self.c2(torch.relu(self.c1(x)))
            return torch.relu((self.short(x) if self.short is not None else x) + h)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = conv_bn(1, 16, 3, 1, 1)
            self.blocks = nn.Sequential(Block(16, 16, 1), Block(16, 16, 1), Block(16, 32, 2), Block(32, 32, 1),
                                        Block(32, 64, 2), Block(64, 64, 1))
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            return self.fc(self.blocks(torch.relu(self.stem(x))).mean(dim=(2, 3)))

    m = Net()
    return m, torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)


def cnn(torch):
    nn = torch.nn
    m = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(3136, 256), nn.ReLU(), nn.Linear(256, 10))
    return m, torch.optim.Adam(m.parameters(), lr=1e-3)


def mlp(torch):
    nn = torch.nn
    m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    return m, torch.optim.SGD(m.parameters(), lr=0.1)


def lstm(torch):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell, self.out = nn.LSTM(2, 16), nn.Linear(16, 2)

        def forward(self, xs):
            _, (h, _) = self.cell(xs.transpose(0, 1))
            return self.out(h[-1])

    m = Net()
    return m, torch.optim.Adam(m.parameters(), lr=0.01)


def idx(torch, path):
    import gzip
    data = gzip.open(path).read()
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(data[3])]
    return torch.frombuffer(bytearray(data[4 + 4 * len(dims):]), dtype=torch.uint8).reshape(dims)


def mlp_epoch(torch):
    """One epoch of fashion_mlp on the real data, then the test set's loss and accuracy."""
    torch.manual_seed(0)
    m, opt = mlp(torch)
    loss_fn = torch.nn.CrossEntropyLoss()

    def load(kind):
        x = idx(torch, "%s/%s-images-idx3-ubyte.gz" % (FASHION, kind)).reshape(-1, 784).float() / 255.0
        return x, idx(torch, "%s/%s-labels-idx1-ubyte.gz" % (FASHION, kind)).long()

    x, y = load("train")
    order = torch.randperm(len(x))
    for s in range(0, len(x), 128):
        i = order[s:s + 128]
        opt.zero_grad()
        loss_fn(m(x[i]), y[i]).backward()
        opt.step()
    tx, ty = load("t10k")
    with torch.no_grad():
        out = m(tx)
        print("test loss %.4f accuracy %.4f" % (loss_fn(out, ty).item(), (out.argmax(1) == ty).float().mean().item()))


def worker(name, threads, steps):
    import torch
    torch.set_num_threads(threads)
    if name == "fashion_mlp":
        mlp_epoch(torch)
        return
    torch.manual_seed(0)
    if name.startswith("char_lm"):
        sys.dont_write_bytecode = True
        sys.path.insert(0, HERE)
        import char_lm
        char_lm.T = 256 if name == "char_lm_256" else 32
        print(char_lm.torch_step(torch, char_lm.windows(torch, steps), steps, threads))
        return
    batch = WORKLOADS[name][1]
    if name == "adding_lstm":
        m, opt = lstm(torch)
        x, y = torch.rand(batch, 10, 2), torch.randint(0, 2, (batch,))
    else:
        m, opt = resnet(torch) if name == "fashion_resnet" else cnn(torch)
        x, y = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))
    m.train()
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(m(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    print((time.perf_counter() - t) / steps)


# ---- the table --------------------------------------------------------------------

def torch_python(explicit):
    """The python whose torch is compared, and torch's version; (None, why) if none."""
    venv = os.path.join(ROOT, "build", "bench-venv", "bin", "python")
    for py in ([explicit] if explicit else [venv, "/usr/bin/python3"]):
        if not os.access(py, os.X_OK):
            continue
        r = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
        if r.returncode == 0:
            return py, r.stdout.strip()
    return None, "no PyTorch: make bench-deps installs one (or apt-get install python3-torch)"


def busy_loops(seconds):
    """Two busy processes, each stopping by itself after `seconds`."""
    code = "import time\nend = time.time() + %d\nwhile time.time() < end: pass\n" % seconds
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]


def sgemm_peak(threads):
    peak = os.path.join(ROOT, "build", "sgemm_peak")
    if not os.access(peak, os.X_OK):
        return None
    return float(run([peak], env_threads(threads))[2])


def share_of_peak(flops, steps, peaks):
    """The median over rounds of 3 * flops / steps[r] against peaks[r]
    (GFLOP/s), as a fraction; None without the FLOPs or a yardstick."""
    if not flops or not peaks or None in peaks:
        return None
    return statistics.median(3 * flops / s / (p * 1e9) for s, p in zip(steps, peaks))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--netrun", default=os.path.join(ROOT, "netrun"))
    ap.add_argument("--python", help="the python whose torch is compared (default: build/bench-venv's, else /usr/bin/python3)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of both sides (default 3)")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    ap.add_argument("--only", help="workloads, comma-separated (default all: %s)" % ", ".join(WORKLOADS))
    ap.add_argument("--busy", action="store_true", help="beside two busy loops")
    ap.add_argument("--busy-limit", type=int, default=3600, help="seconds the busy loops run at most (default 3600)")
    ap.add_argument("--wait-policy", choices=["passive", "default"],
                    help="OMP_WAIT_POLICY of both sides: unset, each side's own default (the default when "
                         "quiet), or PASSIVE unless the environment sets it (the default with --busy)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    global WAIT_POLICY
    if (a.wait_policy or ("passive" if a.busy else "default")) == "default":
        WAIT_POLICY = None
    if a.worker:
        worker(a.worker, int(a.threads), a.steps)
        return 0
    names = a.only.split(",") if a.only else list(WORKLOADS)
    for n in names:
        if n not in WORKLOADS:
            ap.error("unknown workload '%s' (%s)" % (n, ", ".join(WORKLOADS)))
    python, version = torch_python(a.python)
    if python is None:
        print("bench-compare: skipped: %s" % version)
        return 0
    for need in ([FASHION] if any(n.startswith("fashion") for n in names) else []) + \
                ([WORDS] if any(n.startswith("char_lm") for n in names) else []):
        if not os.path.exists(need):
            print("bench-compare: skipped: %s is missing (make deps installs it)" % need)
            return 0
    threads = [int(t) for t in a.threads.split(",")]
    # SIGTERM too ends the run through `finally`, which stops the busy loops
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    busy = busy_loops(a.busy_limit) if a.busy else []
    rows = []
    try:
        policy = env_threads(1).get("OMP_WAIT_POLICY", "unset")
        print("netrun %s against PyTorch %s (%s), %s, %d rounds alternating%s, OMP_WAIT_POLICY %s" %
              (a.netrun, version, python, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), a.rounds,
               ", beside two busy loops" if a.busy else "", policy), flush=True)
        for t in threads:
            for n in names:
                ours, theirs, our_mb, their_mb, peaks = [], [], [], [], []
                for r in range(a.rounds):
                    s, mb = netrun_side(a.netrun, n, t)
                    ours.append(s)
                    our_mb.append(mb)
                    s, mb = torch_side(python, n, t)
                    theirs.append(s)
                    their_mb.append(mb)
                    peaks.append(sgemm_peak(t))
                    print("  %s, %d thread%s, round %d: netrun %.2f ms (%.0f MB), PyTorch %.2f ms (%.0f MB), "
                          "sgemm %s" %
                          (n, t, "" if t == 1 else "s", r + 1, ours[-1] * 1e3, our_mb[-1], theirs[-1] * 1e3,
                           their_mb[-1], "%.1f GFLOP/s" % peaks[-1] if peaks[-1] else "- (no build/sgemm_peak)"),
                          flush=True)
                mo, mt = statistics.median(ours), statistics.median(theirs)
                flops = None if n == "fashion_mlp" else forward_flops(a.netrun, n)
                sh = share_of_peak(flops, ours, peaks)
                share = "-" if sh is None else "%.0f%%" % (100 * sh)
                rows.append((n, t, mo, mt, min(o / p for o, p in zip(ours, theirs)),
                             max(o / p for o, p in zip(ours, theirs)), share, max(our_mb), max(their_mb)))
    finally:
        for p in busy:
            p.kill()
            p.wait()
    print()
    print("| step (%s) | threads | netrun | PyTorch %s | netrun / PyTorch (rounds) | share of sgemm peak | "
          "peak MB netrun / PyTorch |" % ("busy" if a.busy else "quiet", version))
    print("|---|---|---|---|---|---|---|")
    for n, t, mo, mt, lo, hi, share, omb, tmb in rows:
        unit = (lambda s: "%.2f s" % s) if n == "fashion_mlp" else (lambda s: "%.1f ms" % (s * 1e3))
        print("| %s | %d | %s | %s | **%.2f** (%.2f-%.2f) | %s | %.0f / %.0f |" %
              (n + (" epoch" if n == "fashion_mlp" else ""), t, unit(mo), unit(mt), mo / mt, lo, hi, share, omb, tmb))
    return 0


if __name__ == "__main__":
    sys.exit(main())
