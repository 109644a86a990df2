"""models.py — ONNX models built with onnx.helper for tests/onnx.bats.

  models.py OUTDIR [NAME ...]

writes OUTDIR/NAME.onnx for each model named (default: all).  Every model
has a dynamic batch dimension; weights are seeded random numbers."""
import os, sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

rng = np.random.default_rng(0)


def w(name, *shape, scale=0.5):
    return nh.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def ints(name, v):
    return nh.from_array(np.array(v, dtype=np.int64), name)


def f32(name, v):
    return nh.from_array(np.array(v, dtype=np.float32), name)


def model(nodes, inputs, outputs, inits, opset=17):
    g = h.make_graph(nodes, "g", inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def vi(name, shape, t=T.FLOAT):
    return h.make_tensor_value_info(name, t, shape)


def mlp():
    n = [h.make_node("Gemm", ["input", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
         h.make_node("Relu", ["h"], ["h2"], name="/relu/Relu"),
         h.make_node("Gemm", ["h2", "fc2.weight", "fc2.bias"], ["output"], name="/fc2/Gemm", transB=1, alpha=0.5,
                     beta=2.0)]
    return model(n, [vi("input", ["batch", 4])], [vi("output", ["batch", 3])],
                 [w("fc1.weight", 8, 4), w("fc1.bias", 8), w("fc2.weight", 3, 8), w("fc2.bias", 3)])


def cnn():
    """Conv (pads, strides, groups, dilations), batch norm, pools, flatten through the shape subgraph."""
    n = [h.make_node("Conv", ["input.1", "conv1.weight", "conv1.bias"], ["c1"], pads=[1, 1, 1, 1]),
         h.make_node("BatchNormalization", ["c1", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"],
                     ["b1"], epsilon=1e-3),
         h.make_node("Relu", ["b1"], ["r1"]),
         h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
         h.make_node("Conv", ["p1", "conv2.weight"], ["c2"], group=2, strides=[1, 1], dilations=[2, 2],
                     pads=[2, 2, 2, 2]),
         h.make_node("LeakyRelu", ["c2"], ["r2"], alpha=0.1),
         h.make_node("AveragePool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
         h.make_node("Shape", ["p2"], ["s"]),
         h.make_node("Gather", ["s", "zero"], ["s0"], axis=0),
         h.make_node("Unsqueeze", ["s0", "axes0"], ["s1"]),
         h.make_node("Concat", ["s1", "minus1"], ["shape"], axis=0),
         h.make_node("Reshape", ["p2", "shape"], ["flat"]),
         h.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], transB=1),
         h.make_node("Softmax", ["logits"], ["output"], axis=-1)]
    inits = [w("conv1.weight", 4, 1, 3, 3), w("conv1.bias", 4), f32("bn1.weight", rng.uniform(0.5, 1.5, 4)),
             w("bn1.bias", 4), w("bn1.running_mean", 4),
             f32("bn1.running_var", rng.uniform(0.5, 2, 4)), w("conv2.weight", 6, 2, 3, 3),
             ints("zero", 0), ints("axes0", [0]), ints("minus1", [-1]), w("fc.weight", 5, 6 * 2 * 2), w("fc.bias", 5)]
    return model(n, [vi("input.1", ["N", 1, 8, 8])], [vi("output", ["N", 5])], inits, opset=13)


def resnet():
    """A residual block: conv, batch norm, relu, conv, batch norm, add, relu; global average pool."""
    n = [h.make_node("Conv", ["x", "layer1.0.conv1.weight"], ["a"], pads=[1, 1, 1, 1]),
         h.make_node("BatchNormalization", ["a", "layer1.0.bn1.weight", "layer1.0.bn1.bias",
                                            "layer1.0.bn1.running_mean", "layer1.0.bn1.running_var"], ["b"]),
         h.make_node("Relu", ["b"], ["c"]),
         h.make_node("Conv", ["c", "layer1.0.conv2.weight"], ["d"], auto_pad="SAME_UPPER"),
         h.make_node("BatchNormalization", ["d", "layer1.0.bn2.weight", "layer1.0.bn2.bias",
                                            "layer1.0.bn2.running_mean", "layer1.0.bn2.running_var"], ["e"]),
         h.make_node("Add", ["e", "x"], ["f"]),
         h.make_node("Relu", ["f"], ["g"]),
         h.make_node("GlobalAveragePool", ["g"], ["pool"]),
         h.make_node("Flatten", ["pool"], ["flat"], axis=1),
         h.make_node("MatMul", ["flat", "fc.weight"], ["mm"]),
         h.make_node("Add", ["mm", "fc.bias"], ["19"])]
    inits = []
    for bn in ("bn1", "bn2"):
        p = "layer1.0." + bn
        inits += [f32(p + ".weight", rng.uniform(0.5, 1.5, 3)), w(p + ".bias", 3), w(p + ".running_mean", 3),
                  f32(p + ".running_var", rng.uniform(0.5, 2, 3))]
    inits += [w("layer1.0.conv1.weight", 3, 3, 3, 3), w("layer1.0.conv2.weight", 3, 3, 3, 3), w("fc.weight", 3, 2),
              w("fc.bias", 2)]
    return model(n, [vi("x", ["batch", 3, 6, 6])], [vi("19", ["batch", 2])], inits)


def transformer():
    """Attention with a padding mask: MatMul, Reshape/Transpose to heads (batch dynamic, through the
    shape subgraph), Softmax, Where, LayerNormalization, Erf-free GELU (opset 20 Gelu is separate)."""
    B, T_, D, H = "batch", 4, 8, 2
    n = [h.make_node("MatMul", ["x", "q.weight"], ["q"]),
         h.make_node("MatMul", ["x", "k.weight"], ["k"]),
         h.make_node("Shape", ["x"], ["xs"]),
         h.make_node("Gather", ["xs", "zero"], ["b0"], axis=0),
         h.make_node("Unsqueeze", ["b0", "axes0"], ["b1"]),
         h.make_node("Concat", ["b1", "heads"], ["hshape"], axis=0),
         h.make_node("Reshape", ["q", "hshape"], ["qh"]),
         h.make_node("Reshape", ["k", "hshape"], ["kh"]),
         h.make_node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
         h.make_node("Transpose", ["kh"], ["kt"], perm=[0, 2, 3, 1]),
         h.make_node("MatMul", ["qt", "kt"], ["s"]),
         h.make_node("Div", ["s", "sqrt_d"], ["s2"]),
         h.make_node("Equal", ["mask", "zero"], ["pad"]),
         h.make_node("Unsqueeze", ["pad", "axes12"], ["pad4"]),
         h.make_node("Where", ["pad4", "neg_inf", "s2"], ["s3"]),
         h.make_node("Softmax", ["s3"], ["att"], axis=-1),
         h.make_node("MatMul", ["att", "qt"], ["o"]),
         h.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
         h.make_node("Reshape", ["ot", "back"], ["o2"]),
         h.make_node("Add", ["o2", "x"], ["res"]),
         h.make_node("LayerNormalization", ["res", "ln.weight", "ln.bias"], ["ln"], axis=-1, epsilon=1e-5),
         h.make_node("ReduceMean", ["ln"], ["m"], axes=[1], keepdims=0),
         h.make_node("Tanh", ["m"], ["output"])]
    inits = [w("q.weight", D, D), w("k.weight", D, D), ints("zero", 0), ints("axes0", [0]),
             ints("heads", [T_, H, D // H]), f32("sqrt_d", np.sqrt(D // H)), ints("axes12", [1, 2]),
             f32("neg_inf", -1e9), ints("back", [0, T_, D]), f32("ln.weight", rng.uniform(0.5, 1.5, D)), w("ln.bias", D)]
    return model(n, [vi("x", [B, T_, D]), vi("mask", [B, T_], T.INT64)], [vi("output", [B, D])], inits)


def elementwise():
    """The unary and binary ops (Erf among them), reductions, comparisons, casts."""
    n = [h.make_node("Sigmoid", ["x"], ["a"]), h.make_node("Elu", ["x"], ["b"], alpha=0.7),
         h.make_node("Abs", ["x"], ["ab"]), h.make_node("Add", ["ab", "one"], ["ab1"]),
         h.make_node("Log", ["ab1"], ["c"]), h.make_node("Sqrt", ["ab1"], ["d"]), h.make_node("Exp", ["a"], ["e"]),
         h.make_node("Neg", ["e"], ["f"]), h.make_node("Pow", ["d", "two"], ["g"]), h.make_node("Sub", ["g", "c"], ["i"]),
         h.make_node("Div", ["i", "e"], ["j"]), h.make_node("Mul", ["j", "b"], ["k"]),
         h.make_node("Clip", ["k", "lo", "hi"], ["l"]),
         h.make_node("Greater", ["x", "zerof"], ["gt"]), h.make_node("Less", ["x", "onef"], ["lt"]),
         h.make_node("And", ["gt", "lt"], ["band"]), h.make_node("Not", ["band"], ["bnot"]),
         h.make_node("Or", ["bnot", "gt"], ["bor"]), h.make_node("Cast", ["bor"], ["cf"], to=T.FLOAT),
         h.make_node("Mul", ["l", "cf"], ["m"]), h.make_node("LogSoftmax", ["m"], ["ls"], axis=1),
         h.make_node("ReduceSum", ["ls", "ax1"], ["rs"], keepdims=1),
         h.make_node("ReduceMax", ["m"], ["rmax"], axes=[1], keepdims=1),
         h.make_node("ReduceMin", ["m"], ["rmin"], axes=[1], keepdims=1),
         h.make_node("Sub", ["rmax", "rmin"], ["rr"]), h.make_node("Add", ["rs", "rr"], ["sum1"]),
         h.make_node("Add", ["m", "sum1"], ["output"]), h.make_node("Erf", ["x"], ["erfx"]), h.make_node("Add", ["f", "erfx"], ["second"])]
    inits = [f32("one", 1.0), f32("two", 2.0), f32("lo", -3.0), f32("hi", 3.0), f32("zerof", 0.0), f32("onef", 1.0),
             ints("ax1", [1])]
    return model(n, [vi("x", ["B", 5])], [vi("output", ["B", 5]), vi("second", ["B", 5])], inits, opset=13)


def shapes():
    """Layout ops: Concat, Split, Slice, Gather, Squeeze/Unsqueeze, Expand, Tile, Pad, CumSum,
    Transpose, Constant, ConstantOfShape, Range, Dropout."""
    n = [h.make_node("Split", ["x", "sizes"], ["s1", "s2"], axis=1),
         h.make_node("Concat", ["s2", "s1"], ["cat"], axis=1),
         h.make_node("Slice", ["cat", "st", "en", "axs"], ["sl"]),
         h.make_node("Gather", ["sl", "idx"], ["ga"], axis=1),
         h.make_node("Unsqueeze", ["ga", "ax2"], ["un"]),
         h.make_node("Squeeze", ["un", "ax2"], ["sq"]),
         h.make_node("Constant", [], ["cst"], value=nh.from_array(np.arange(3, dtype=np.float32), "v")),
         h.make_node("Add", ["sq", "cst"], ["plus"]),
         h.make_node("Pad", ["plus", "pads", "padv"], ["pd"]),
         h.make_node("CumSum", ["pd", "ax1s"], ["cs"]),
         h.make_node("Tile", ["cs", "reps"], ["tl"]),
         h.make_node("Transpose", ["tl"], ["tr"]),
         h.make_node("Transpose", ["tr"], ["tr2"]),
         h.make_node("ConstantOfShape", ["cshape"], ["cos"], value=nh.from_array(np.array([0.25], np.float32))),
         h.make_node("Range", ["r0", "r1", "r2"], ["rg"]),
         h.make_node("Cast", ["rg"], ["rgf"], to=T.FLOAT),
         h.make_node("Add", ["cos", "rgf"], ["crg"]),
         h.make_node("Expand", ["crg", "eshape"], ["ex"]),
         h.make_node("Mul", ["ex", "tr2"], ["mx"]),
         h.make_node("Dropout", ["mx"], ["output"])]
    inits = [ints("sizes", [2, 4]), ints("st", [1]), ints("en", [100]), ints("axs", [1]), ints("idx", [3, 0, 1]),
             ints("ax2", [2]), ints("pads", [0, 1, 0, 2]), f32("padv", 0.5), ints("ax1s", 1), ints("reps", [1, 2]),
             ints("cshape", [12]), ints("r0", 0), ints("r1", 12), ints("r2", 1), ints("eshape", [1, 12])]
    return model(n, [vi("x", ["B", 6])], [vi("output", ["B", 12])], inits, opset=13)


def convt():
    """ConvTranspose with output_padding, Resize (nearest), Gelu (opset 20)."""
    n = [h.make_node("ConvTranspose", ["x", "up.weight", "up.bias"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                     output_padding=[1, 1]),
         h.make_node("Resize", ["y", "", "scales"], ["z"], mode="nearest", coordinate_transformation_mode="asymmetric",
                     nearest_mode="floor"),
         h.make_node("Gelu", ["z"], ["output"])]
    return model(n, [vi("x", ["B", 2, 3, 3])], [vi("output", ["B", 3, 12, 12])],
                 [w("up.weight", 2, 3, 3, 3), w("up.bias", 3), f32("scales", [1, 1, 2, 2])], opset=20)


def lstm_layers(layout):
    """LSTM forward with B, initial_h and initial_c fed, then LSTM reverse without them, at layout 0 or 1
    (layout -1: layout 0 inside transposes, the same model for ONNX Runtime, which has no layout 1)."""
    r = np.random.default_rng(7)
    ws = [nh.from_array((r.standard_normal(sh) * 0.5).astype(np.float32), nm) for nm, sh in
          (("l1.W", (1, 16, 3)), ("l1.R", (1, 16, 4)), ("l1.B", (1, 32)), ("l2.W", (1, 12, 4)), ("l2.R", (1, 12, 3)))]
    L = max(layout, 0)
    n, x, h0, c0 = [], "x", "h0", "c0"
    if layout < 0:
        n += [h.make_node("Transpose", [v], [v + "t"], perm=[1, 0, 2]) for v in ("x", "h0", "c0")]
        x, h0, c0 = "xt", "h0t", "c0t"
    o = "o" if layout < 0 else ""
    n += [h.make_node("LSTM", [x, "l1.W", "l1.R", "l1.B", "", h0, c0], ["y1", "yh1" + o, "yc1" + o], name="lstm1",
                      hidden_size=4, activations=["Sigmoid", "Tanh", "Tanh"], layout=L),
          h.make_node("Squeeze", ["y1", "one" if L == 0 else "two"], ["s1"]),
          h.make_node("LSTM", ["s1", "l2.W", "l2.R"], ["output" + o, "yh2" + o], name="lstm2", hidden_size=3,
                      direction="reverse", layout=L)]
    if layout < 0:
        n += [h.make_node("Transpose", ["outputo"], ["output"], perm=[2, 0, 1, 3])]
        n += [h.make_node("Transpose", [v + "o"], [v], perm=[1, 0, 2]) for v in ("yh1", "yc1", "yh2")]
    bt = (lambda a, b: [b, a]) if layout else (lambda a, b: [a, b])
    return model(n, [vi("x", bt("seq", "batch") + [3]), vi("h0", bt(1, "batch") + [4]), vi("c0", bt(1, "batch") + [4])],
                 [vi("output", ["batch", "seq", 1, 3] if layout else ["seq", 1, "batch", 3]),
                  vi("yh1", bt(1, "batch") + [4]), vi("yc1", bt(1, "batch") + [4]), vi("yh2", bt(1, "batch") + [3])],
                 ws + [ints("one", [1]), ints("two", [2])], opset=14)


def lstm():
    return lstm_layers(0)


def lstm_batch_first():
    return lstm_layers(1)


def lstm_batch_first_ref():
    return lstm_layers(-1)


def gru():
    """GRU bidirectional (linear_before_reset=1, B, initial_h fed), the exporters' Transpose and
    Reshape [0, 0, -1] of its Y, then GRU reverse (linear_before_reset=0, no B)."""
    n = [h.make_node("GRU", ["x", "g1.W", "g1.R", "g1.B", "", "h0"], ["y1", "yh1"], name="gru1", hidden_size=4,
                     direction="bidirectional", linear_before_reset=1),
         h.make_node("Transpose", ["y1"], ["tr"], perm=[0, 2, 1, 3]),
         h.make_node("Reshape", ["tr", "shape"], ["flat"]),
         h.make_node("GRU", ["flat", "g2.W", "g2.R"], ["output", "yh2"], name="gru2", hidden_size=3,
                     direction="reverse")]
    inits = [w("g1.W", 2, 12, 3), w("g1.R", 2, 12, 4), w("g1.B", 2, 24), ints("shape", [0, 0, -1]),
             w("g2.W", 1, 9, 8), w("g2.R", 1, 9, 3)]
    return model(n, [vi("x", ["seq", "batch", 3]), vi("h0", [2, "batch", 4])],
                 [vi("output", ["seq", 1, "batch", 3]), vi("yh1", [2, "batch", 4]), vi("yh2", [1, "batch", 3])],
                 inits, opset=14)


def heads():
    """Attention heads with a dynamic batch and sequence: Reshape to [batch, seq, 2, 3] and back to
    [batch, seq, -1] with both sizes from Shape; Expand to [batch, seq, 6] from Shape; a Reshape
    of [batch, seq] to [batch, seq, 1]."""
    n = [h.make_node("Shape", ["x"], ["s"]),
         h.make_node("Gather", ["s", "i0"], ["b"]), h.make_node("Gather", ["s", "i1"], ["t"]),
         h.make_node("Unsqueeze", ["b", "ax0"], ["b1"]), h.make_node("Unsqueeze", ["t", "ax0"], ["t1"]),
         h.make_node("Concat", ["b1", "t1", "hd"], ["split_shape"], axis=0),
         h.make_node("Reshape", ["x", "split_shape"], ["sp"]),
         h.make_node("Transpose", ["sp"], ["tp"], perm=[0, 1, 3, 2]),
         h.make_node("Concat", ["b1", "t1", "m1"], ["merge_shape"], axis=0),
         h.make_node("Reshape", ["tp", "merge_shape"], ["mg"]),
         h.make_node("Concat", ["b1", "t1", "six"], ["ex_shape"], axis=0),
         h.make_node("Expand", ["bias", "ex_shape"], ["ex"]),
         h.make_node("Add", ["mg", "ex"], ["output"]),
         h.make_node("ReduceSum", ["x", "ax2"], ["sum"], keepdims=0),
         h.make_node("Concat", ["b1", "t1", "one"], ["col_shape"], axis=0),
         h.make_node("Reshape", ["sum", "col_shape"], ["column"])]
    inits = [ints("i0", 0), ints("i1", 1), ints("ax0", [0]), ints("hd", [2, 3]), ints("m1", [-1]), ints("six", [6]),
             w("bias", 1, 1, 6), ints("ax2", [2]), ints("one", [1])]
    return model(n, [vi("x", ["batch", "seq", 6])], [vi("output", ["batch", "seq", 6]), vi("column", ["batch", "seq", 1])],
                 inits, opset=14)


def names():
    """Names that are keywords ('input', 'while'), an op's ('relu'), not identifiers ('x.1', '19'), or
    the valid form of another ('x_1' beside 'x.1')."""
    n = [h.make_node("Relu", ["input"], ["while"]), h.make_node("Add", ["while", "x.1"], ["19"]),
         h.make_node("Neg", ["19"], ["x_1"]), h.make_node("Identity", ["input"], ["output"]),
         h.make_node("Sigmoid", ["x_1"], ["relu"])]
    return model(n, [vi("input", ["batch", 2]), vi("x.1", ["batch", 2])],
                 [vi("19", ["batch", 2]), vi("x_1", ["batch", 2]), vi("output", ["batch", 2]), vi("relu", ["batch", 2]),
                  vi("while", ["batch", 2])], [])


MODELS = {f.__name__: f for f in (mlp, cnn, resnet, transformer, elementwise, shapes, convt, lstm, lstm_batch_first, lstm_batch_first_ref, gru, heads, names)}

if __name__ == "__main__":
    out = sys.argv[1]
    for name in sys.argv[2:] or MODELS:
        onnx.save(MODELS[name](), os.path.join(out, name + ".onnx"))
