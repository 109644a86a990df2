"""crafted.py — malformed and hostile ONNX files for tests/onnx.bats.

  crafted.py OUTDIR   writes OUTDIR/NAME.onnx for each case below."""
import os, sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh


def vi(name, shape, t=T.FLOAT):
    return h.make_tensor_value_info(name, t, shape)


def save(out, name, nodes, inits=(), inputs=None, outputs=None, opset=17):
    g = h.make_graph(nodes, "g", inputs if inputs is not None else [vi("x", ["B", 2])],
                     outputs if outputs is not None else [vi("y", ["B", 2])], list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, os.path.join(out, name + ".onnx"))


def varint(n):
    b = bytearray()
    while True:
        c = n & 0x7f
        n >>= 7
        b.append(c | (0x80 if n else 0))
        if not n:
            return bytes(b)


def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def main(out):
    save(out, "cycle", [h.make_node("Relu", ["x", ], ["a"], name="r0"), h.make_node("Add", ["a", "c"], ["b"], name="add"),
                        h.make_node("Relu", ["b"], ["c"], name="back"), h.make_node("Relu", ["b"], ["y"], name="out")])
    save(out, "undefined", [h.make_node("Add", ["x", "nothing"], ["y"], name="adder")])
    # nodes without a name are named by their index in graph.node
    save(out, "unnamed", [h.make_node("Relu", ["x"], ["a"]), h.make_node("Add", ["a", "nothing"], ["y"])])
    save(out, "unnamed_pad", [h.make_node("Relu", ["x"], ["a"]), h.make_node("Pad", ["a", "pads", "e"], ["y"])],
         [nh.from_array(np.zeros(4, np.int64), "pads"), onnx.TensorProto(name="e", data_type=T.FLOAT, dims=[0])])
    save(out, "unnamed_cycle", [h.make_node("Add", ["x", "c"], ["b"]), h.make_node("Relu", ["b"], ["c"], name="back"),
                                h.make_node("Relu", ["b"], ["y"])])
    save(out, "no_output", [h.make_node("Relu", ["x"], ["y"], name="r"), h.make_node("Add", ["x", "y"], [], name="lost")])
    # a constant holding NaN (a script's literal cannot hold it); a Cast of NaN
    # and of 1e30 to int64 (C leaves them undefined; NumPy gives INT64_MIN)
    save(out, "nan_const", [h.make_node("Constant", [], ["c"], name="k",
                                        value=nh.from_array(np.array([np.nan, 1], np.float32), "cv")),
                            h.make_node("Add", ["x", "c"], ["y"], name="plus")])
    save(out, "nan_cast", [h.make_node("Constant", [], ["c"], name="k",
                                       value=nh.from_array(np.array([np.nan, 1e30], np.float32), "cv")),
                           h.make_node("Cast", ["c"], ["ci"], name="toint", to=T.INT64),
                           h.make_node("Cast", ["ci"], ["cf"], name="back", to=T.FLOAT),
                           h.make_node("Add", ["x", "cf"], ["y"], name="plus")])
    # scalar inputs given as empty constants
    empty = onnx.TensorProto(name="e", data_type=T.FLOAT, dims=[0, 63])
    save(out, "pad_empty", [h.make_node("Pad", ["x", "pads", "e"], ["y"], name="pad")],
         [nh.from_array(np.zeros(4, np.int64), "pads"), empty])
    save(out, "dropout_empty", [h.make_node("Dropout", ["x", "r", "m"], ["y"], name="drop")],
         [nh.from_array(np.array(0.5, np.float32), "r"), onnx.TensorProto(name="m", data_type=T.BOOL, dims=[0])])
    save(out, "twice", [h.make_node("Relu", ["x"], ["y"], name="one"), h.make_node("Relu", ["x"], ["y"], name="two")])
    big = onnx.TensorProto(name="huge", data_type=T.FLOAT, dims=[1 << 20, 1 << 20, 2])
    save(out, "bigdims", [h.make_node("Add", ["x", "huge"], ["y"])], [big])
    short = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[2, 3], raw_data=np.zeros(5, np.float32).tobytes())
    save(out, "shortraw", [h.make_node("MatMul", ["x", "w"], ["y"])], [short])
    ext = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[2, 2], data_location=onnx.TensorProto.EXTERNAL)
    ext.external_data.add(key="location", value="../../etc/passwd")
    save(out, "external", [h.make_node("MatMul", ["x", "w"], ["y"])], [ext])
    # If nodes whose branches hold If nodes, 3 and 12 deep
    for name, depth in (("nested", 3), ("deepnest", 12)):
        g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "leaf", [], [vi("y", ["B", 2])])
        for d in range(depth):
            node = h.make_node("If", ["cond"], ["y"], name="if%d" % d, then_branch=g, else_branch=g)
            g = h.make_graph([node], "level%d" % d, [], [vi("y", ["B", 2])])
        save(out, name, list(g.node), inputs=[vi("x", ["B", 2]), vi("cond", [], T.BOOL)])
    save(out, "unsupported", [h.make_node("Relu", ["x"], ["a"], name="relu0"), h.make_node("LSTM", ["a", "w", "r"], ["b"], name="lstm"),
                              h.make_node("NonZero", ["b"], ["c0"], name="nz1"), h.make_node("NonZero", ["c0"], ["c"]),
                              h.make_node("Relu", ["c"], ["d"], name="relu"),
                              h.make_node("Custom", ["d"], ["y"], name="mine", domain="com.example")],
         [nh.from_array(np.zeros((1, 8, 2), np.float32), "w"), nh.from_array(np.zeros((1, 8, 2), np.float32), "r")])
    # LSTM and GRU with what netrun refuses
    rw = [nh.from_array(np.zeros((1, 8, 2), np.float32), "w"), nh.from_array(np.zeros((1, 8, 2), np.float32), "r")]
    rin, rout = [vi("x", [3, "B", 2]), vi("lens", ["B"], T.INT32)], [vi("y", [3, 1, "B", 2])]
    for name, kw, ins in (("lstm_relu", dict(activations=["Relu", "Tanh", "Tanh"]), ["x", "w", "r"]),
                          ("lstm_clip", dict(clip=3.0), ["x", "w", "r"]),
                          ("lstm_forget", dict(input_forget=1), ["x", "w", "r"]),
                          ("lstm_lens", {}, ["x", "w", "r", "", "lens"])):
        save(out, name, [h.make_node("LSTM", ins, ["y"], name="enc", hidden_size=2, **kw)], rw, rin, rout)
    gw = [nh.from_array(np.zeros((1, 6, 2), np.float32), "w"), nh.from_array(np.zeros((1, 6, 2), np.float32), "r")]
    save(out, "gru_dir", [h.make_node("GRU", ["x", "w", "r"], ["y"], name="dec", hidden_size=2, direction="both")],
         gw, rin[:1], rout)
    save(out, "gru_size", [h.make_node("GRU", ["x", "w", "r"], ["y"], name="dec", hidden_size=3)], gw, rin[:1], rout)
    # a Reshape of two run-time sizes that are not the input's leading ones
    save(out, "reshape2", [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "rev"], ["s2"]),
                           h.make_node("Reshape", ["x", "s2"], ["y"], name="swap")],
         [nh.from_array(np.array([1, 0], np.int64), "rev")], [vi("x", ["B", "T"])], [vi("y", ["T", "B"])])
    save(out, "flatten_axis", [h.make_node("Flatten", ["x"], ["y"], name="flat", axis=1000)])
    # external data: a model saved with its weights in ext/weights.bin (ONNX Runtime reads it too), and
    # tensors whose location, offset or length is wrong
    os.makedirs(os.path.join(out, "ext"), exist_ok=True)
    rng = np.random.default_rng(1)
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "b"], ["y"])], "g",
                     [vi("x", ["B", 3])], [vi("y", ["B", 4])],
                     [nh.from_array(rng.standard_normal((3, 4)).astype(np.float32), "w"),
                      nh.from_array(rng.standard_normal(4).astype(np.float32), "b")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(out, "ext", "external_ok.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    with open(os.path.join(out, "ext", "w.bin"), "wb") as f:
        f.write(np.arange(6, dtype=np.float32).tobytes())
    os.symlink("/etc/hostname", os.path.join(out, "ext", "away.bin"))
    for name, kv in (("ext_abs", {"location": "/etc/passwd"}),
                     ("ext_up", {"location": "sub/../../w.bin"}),
                     ("ext_link", {"location": "away.bin"}),
                     ("ext_missing", {"location": "none.bin"}),
                     ("ext_beyond", {"location": "w.bin", "offset": "12"}),
                     ("ext_length", {"location": "w.bin", "length": "20"}),
                     ("ext_offset", {"location": "w.bin", "offset": "12x"}),
                     ("ext_overflow", {"location": "w.bin", "offset": "99999999999999999999"}),
                     ("ext_nolocation", {"offset": "0"})):
        t = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[2, 2], data_location=onnx.TensorProto.EXTERNAL)
        for k, v in kv.items():
            t.external_data.add(key=k, value=v)
        save(os.path.join(out, "ext"), name, [h.make_node("MatMul", ["x", "w"], ["y"])], [t])
    # 10^6 Relu nodes in a chain, written as protobuf bytes directly
    nodes = b"".join(field(1, field(1, b"v%d" % i) + field(2, b"v%d" % (i + 1)) + field(4, b"Relu"))
                     for i in range(1000000))
    graph = nodes + field(11, field(1, b"v0"))
    with open(os.path.join(out, "million.onnx"), "wb") as f:
        f.write(varint(1 << 3) + varint(8) + field(7, graph) + field(8, varint(2 << 3) + varint(17)))


main(sys.argv[1])
