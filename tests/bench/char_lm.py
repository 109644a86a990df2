#!/usr/bin/env python3
"""char_lm.py — `make bench-charlm` (and the end of `make bench`): the
training step of examples/char_lm.net in netrun and in PyTorch, side by
side in one run.  Speed is measured here, never asserted.

The PyTorch model is the example's, op for op: a byte embedding 256 x 64
and a learned position embedding 32 x 64, two pre-norm transformer blocks
(layer norm; one dense layer making q, k, v; 4 causal heads of 16 whose
scores are masked with where(allowed, s, -1e9) before the softmax, as
stdlib/nn.net does; a dense layer mixing the heads; layer norm, dense 256,
relu, dense 64; both residual), a final layer norm and a dense layer to
256 logits per position, the mean cross-entropy over the batch's 32 x 32
predictions, and Adam (lr 0.003).  A step is the forward, the backward and
the optimizer's update of one batch of 32 windows of 32 bytes from
/usr/share/dict/words (the training split: the file's first nine tenths).

Each side's step time is that of STEPS steps after WARMUP (5) unmeasured
ones: netrun's from its training log (netrun train --limit
(WARMUP+STEPS)*32 --epochs 1 --log FILE; compare.py's steady_step),
PyTorch's by its clock.  The two alternate ROUNDS times on the same
number of threads (OMP_NUM_THREADS for netrun; torch.set_num_threads and
OPENBLAS_NUM_THREADS for PyTorch, whose matrix products are OpenBLAS's;
OMP_WAIT_POLICY=PASSIVE for both unless set), and the medians (and the
best rounds) are compared, so that a busy machine slows both.

Needs Debian's python3-torch (torch is not a test dependency): without it
this prints why it is skipped and exits 0.
"""
import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (steady_step)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORDS = "/usr/share/dict/words"
T, D, HEADS, HIDDEN, V, BATCH, LR = 32, 64, 4, 256, 256, 32, 0.003
WARMUP = 5   # steps each side runs before the timed ones


def netrun_step(netrun, steps, threads):
    """Seconds per training step of examples/char_lm.net in netrun."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.jsonl")
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        cmd = [netrun, "train", os.path.join(ROOT, "examples", "char_lm.net"),
               "--limit", str((WARMUP + steps) * BATCH), "--epochs", "1", "--log", log]
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return compare.steady_step(log, WARMUP)


def torch_model(torch):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.out = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.ff1, self.ff2 = nn.Linear(D, HIDDEN), nn.Linear(HIDDEN, D)
            self.register_buffer("allowed", torch.tril(torch.ones(T, T)) > 0.5)

        def forward(self, x):
            b, w = x.shape[0], D // HEADS
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
            q, k, v = (t.reshape(b, T, HEADS, w).transpose(1, 2) for t in (q, k, v))
            s = q @ k.transpose(-2, -1) / math.sqrt(w)
            s = torch.where(self.allowed, s, torch.full_like(s, -1e9))
            o = (F.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, T, D)
            h = x + self.out(o)
            return h + self.ff2(F.relu(self.ff1(self.ln2(h))))

    class CharLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, D)
            self.pos = nn.Parameter(torch.randn(T, D) * 0.02)
            self.blocks = nn.Sequential(Block(), Block())
            self.ln = nn.LayerNorm(D)
            self.head = nn.Linear(D, V)

        def forward(self, x):
            return self.head(self.ln(self.blocks(self.embed(x) + self.pos)))

    return CharLM()


def torch_step(torch, batches, steps, threads):
    """Seconds per training step of the same model in PyTorch."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torch_model(torch)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad()
        loss = loss_fn(model(x).reshape(-1, V), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    for i in range(WARMUP):
        step(i)
    start = time.perf_counter()
    for i in range(steps):
        step(i)
    return (time.perf_counter() - start) / steps


def windows(torch, steps):
    """Batches of the training split's windows (x, y), shuffled (seed 0)."""
    data = open(WORDS, "rb").read()
    train = data[: len(data) - len(data) // 10]
    n = (len(train) - 1) // T
    order = list(range(n))
    random.Random(0).shuffle(order)
    out = []
    for s in range(min(steps, n // BATCH)):
        ks = order[s * BATCH:(s + 1) * BATCH]
        x = torch.tensor([list(train[k * T:k * T + T]) for k in ks], dtype=torch.long)
        y = torch.tensor([list(train[k * T + 1:k * T + T + 1]) for k in ks], dtype=torch.long)
        out.append((x, y))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--netrun", default=os.path.join(ROOT, "netrun"))
    ap.add_argument("--steps", type=int, default=200, help="training steps timed per round (default 200)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of both (default 3)")
    ap.add_argument("--threads", type=int, default=2, help="threads of both (default 2)")
    a = ap.parse_args()
    # The same threads for both, waiting passively: PyTorch's OpenMP threads
    # spinning beside OpenBLAS's own threads (Debian's torch calls
    # OpenBLAS) made its steps 30 times slower on a busy 2-core host.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.threads))
    try:
        import torch
    except ImportError:
        print("bench-charlm: skipped: python3-torch is not importable by %s (apt-get install python3-torch)"
              % sys.executable)
        return 0
    if not os.access(WORDS, os.R_OK):
        print("bench-charlm: skipped: %s is missing (make deps installs wamerican)" % WORDS)
        return 0
    batches = windows(torch, a.steps)
    ours, theirs = [], []
    for r in range(a.rounds):
        ours.append(netrun_step(a.netrun, a.steps, a.threads))
        theirs.append(torch_step(torch, batches, a.steps, a.threads))
        print("round %d: netrun %.2f ms/step, PyTorch %s %.2f ms/step" % (r + 1, ours[-1] * 1e3, torch.__version__,
                                                                         theirs[-1] * 1e3), flush=True)
    n, t = statistics.median(ours), statistics.median(theirs)
    print("char_lm step (batch %d x %d bytes, %d thread%s), %d rounds of %d steps, median (best):" %
          (BATCH, T, a.threads, "" if a.threads == 1 else "s", a.rounds, a.steps))
    print("  netrun  %.2f ms/step (%.2f)" % (n * 1e3, min(ours) * 1e3))
    print("  PyTorch %.2f ms/step (%.2f)" % (t * 1e3, min(theirs) * 1e3))
    print("  netrun / PyTorch = %.2f (%.2f)" % (n / t, min(ours) / min(theirs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
