#!/usr/bin/python3
# penalty_torch.py — PyTorch's side of `make bench`'s gradient-penalty line
# (bench.c, section 7), run by hand (PyTorch is not a dependency): the
# training step of fashion_mlp's model (784-512-256-10, ReLU, SGD, batch
# 128) on `fit`, and on fit + 0.1 |d fit / dx|^2 with double backward
# (create_graph=True), best of alternating rounds, on 2 threads (THREADS=N:
# N).
#   /usr/bin/python3 tests/bench/penalty_torch.py
import os
import time

import torch

torch.set_num_threads(int(os.environ.get("THREADS", "2")))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                            torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.rand(128, 784) - 0.5
y = torch.arange(128) % 10


def step(penalty):
    xx = x.clone().requires_grad_(penalty)
    fit = torch.nn.functional.cross_entropy(model(xx), y)
    loss = fit
    if penalty:
        (gx,) = torch.autograd.grad(fit, xx, create_graph=True)
        loss = fit + 0.1 * (gx * gx).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()


def timed(penalty, reps=10):
    t0 = time.perf_counter()
    for _ in range(reps):
        step(penalty)
    return (time.perf_counter() - t0) / reps


step(False)
step(True)
t1 = t2 = 1e9
for _ in range(8):
    t1 = min(t1, timed(False))
    t2 = min(t2, timed(True))
print(f"PyTorch {torch.__version__}: first order {t1 * 1e3:.3f} ms   with the gradient penalty {t2 * 1e3:.3f} ms"
      f"   ratio {t2 / t1:.2f}")
