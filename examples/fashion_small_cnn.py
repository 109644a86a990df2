"""fashion_small_cnn.py — writes examples/fashion_small_cnn.onnx, the small CNN
that README.md's tour imports and fine-tunes (run with Debian's python3-torch):

  /usr/bin/python3 examples/fashion_small_cnn.py examples/fashion_small_cnn.onnx

A PyTorch model (two 3x3 convolutions with batch norm, ReLU and max
pooling, then a linear layer) trained for one epoch on the first 2000
Fashion-MNIST training images (pixels / 255, as netrun feeds them),
seeded, then exported by torch.onnx.export at opset 14 with a dynamic
batch axis and in inference mode (batch norm on its running statistics)."""
import gzip, sys
import numpy as np
import torch
from torch import nn

DATA = "/usr/share/datasets/fashion-mnist/"


def idx(name, offset):
    with gzip.open(DATA + name) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


torch.manual_seed(0)
x = torch.tensor(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)[:2000] / 255.0, dtype=torch.float32)
y = torch.tensor(idx("train-labels-idx1-ubyte.gz", 8)[:2000].astype(np.int64))
model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
opt = torch.optim.Adam(model.parameters(), lr=0.002)
for i in range(0, 2000, 50):
    opt.zero_grad()
    nn.functional.cross_entropy(model(x[i:i + 50]), y[i:i + 50]).backward()
    opt.step()
model.eval()
torch.onnx.export(model, (x[:3],), sys.argv[1], input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, opset_version=14,
                  do_constant_folding=False)
