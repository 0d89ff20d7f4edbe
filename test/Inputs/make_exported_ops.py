#!/usr/bin/env python3
"""Writes exported_ops.onnx, a small decoder-style network made of the
operators users' exports bring (ConvTranspose, InstanceNormalization, PRelu,
DepthToSpace, SpaceToDepth, ReduceL2, LpNormalization, QuantizeLinear and
DequantizeLinear around an Einsum, CumSum, TopK, ArgMax, OneHot, Hardmax,
Trilu, Tile, ReduceLogSumExp), with a numpy reference written from ONNX's
operator definitions in exported_ops_data/, and group_norm18.onnx and
group_norm21.onnx (GroupNormalization with per-group and per-channel
parameters) with theirs.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)


def f32(a):
    return np.asarray(a, np.float32)


def tensor(name, array):
    return numpy_helper.from_array(array, name)


def write(name, inputs, outputs):
    data = os.path.join(out, name)
    os.makedirs(data, exist_ok=True)
    for kind, values in (("input", inputs), ("output", outputs)):
        for i, (tname, value) in enumerate(values):
            with open(os.path.join(data, f"{kind}_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(value, tname).SerializeToString())


def conv_transpose(x, w, b, stride, pad, out_pad, group):
    """Each input position scatters its kernel-weighted value (ONNX's
    definition, by loops)."""
    n, c, h, wd = x.shape
    cpg, opg, kh, kw = c // group, w.shape[1], w.shape[2], w.shape[3]
    full_h = (h - 1) * stride + kh + out_pad
    full_w = (wd - 1) * stride + kw + out_pad
    y = np.zeros((n, opg * group, full_h, full_w))
    for g in range(group):
        for ci in range(cpg):
            for co in range(opg):
                k = w[g * cpg + ci, co]
                for i in range(h):
                    for j in range(wd):
                        y[:, g * opg + co, i * stride:i * stride + kh,
                          j * stride:j * stride + kw] += \
                            x[:, g * cpg + ci, i, j][:, None, None] * k
    y = y[:, :, pad:full_h - pad, pad:full_w - pad]
    return y + b[None, :, None, None]


def normalize(v, axes, eps=1e-5):
    mean = v.mean(axis=axes, keepdims=True)
    var = ((v - mean) ** 2).mean(axis=axes, keepdims=True)
    return (v - mean) / np.sqrt(var + eps)


# exported_ops.onnx ---------------------------------------------------------
N = 4
wt = f32(rng.standard_normal((8, 4, 3, 3)) * 0.3)
bt = f32(rng.standard_normal(8) * 0.1)
in_scale = f32(rng.uniform(0.5, 1.5, 8))
in_bias = f32(rng.standard_normal(8) * 0.1)
slope = f32(rng.uniform(0.05, 0.3, (8, 1, 1)))
wq = rng.integers(-100, 100, (5, 8)).astype(np.int8)
wq_scale = f32(rng.uniform(0.005, 0.02, 5))
wq_zero = rng.integers(-3, 3, 5).astype(np.int8)
act_scale = np.array(0.02, np.float32)
act_zero = np.array(128, np.uint8)

nodes = [
    helper.make_node("ConvTranspose", ["x", "wt", "bt"], ["ct"], name="upconv",
                     strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1],
                     group=2),
    helper.make_node("InstanceNormalization", ["ct", "in_scale", "in_bias"],
                     ["inorm"], name="inorm"),
    helper.make_node("PRelu", ["inorm", "slope"], ["pr"], name="prelu"),
    helper.make_node("DepthToSpace", ["pr"], ["d2s"], name="d2s", blocksize=2,
                     mode="CRD"),
    helper.make_node("SpaceToDepth", ["d2s"], ["s2d"], name="s2d", blocksize=2),
    helper.make_node("ReduceL2", ["s2d"], ["l2"], name="l2", axes=[2, 3],
                     keepdims=0),
    helper.make_node("LpNormalization", ["l2"], ["lp"], name="lpnorm", axis=1),
    helper.make_node("QuantizeLinear", ["lp", "act_scale", "act_zero"], ["lq"],
                     name="quant"),
    helper.make_node("DequantizeLinear", ["lq", "act_scale", "act_zero"],
                     ["ldq"], name="dequant"),
    helper.make_node("DequantizeLinear", ["wq", "wq_scale", "wq_zero"], ["we"],
                     name="weight_dequant", axis=0),
    helper.make_node("Einsum", ["ldq", "we"], ["e"], name="einsum",
                     equation="nc,dc->nd"),
    helper.make_node("CumSum", ["e", "cum_axis"], ["cs"], name="cumsum"),
    helper.make_node("TopK", ["cs", "top_k"], ["tv", "ti"], name="topk", axis=1),
    helper.make_node("ArgMax", ["e"], ["am"], name="argmax", axis=1, keepdims=0),
    helper.make_node("OneHot", ["am", "depth", "onehot_values"], ["oh"],
                     name="onehot"),
    helper.make_node("Hardmax", ["e"], ["hm"], name="hardmax", axis=1),
    helper.make_node("Add", ["e", "oh"], ["s1"], name="add1"),
    helper.make_node("Add", ["s1", "hm"], ["s2"], name="add2"),
    helper.make_node("Einsum", ["s2", "s2"], ["outer"], name="outer",
                     equation="nd,ne->nde"),
    helper.make_node("Trilu", ["outer", "trilu_k"], ["tr"], name="triu", upper=1),
    helper.make_node("Reshape", ["tr", "flat"], ["trf"], name="flatten"),
    helper.make_node("Tile", ["trf", "repeats"], ["tl"], name="tile"),
    helper.make_node("ReduceLogSumExp", ["tl"], ["lse"], name="lse", axes=[1]),
    helper.make_node("Sub", ["tl", "lse"], ["y"], name="logprob"),
]
graph = helper.make_graph(
    nodes, "exported_ops",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 5, 5])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 50]),
     helper.make_tensor_value_info("tv", TensorProto.FLOAT, ["batch", 3]),
     helper.make_tensor_value_info("ti", TensorProto.INT64, ["batch", 3])],
    [tensor("wt", wt), tensor("bt", bt), tensor("in_scale", in_scale),
     tensor("in_bias", in_bias), tensor("slope", slope), tensor("wq", wq),
     tensor("wq_scale", wq_scale), tensor("wq_zero", wq_zero),
     tensor("act_scale", act_scale), tensor("act_zero", act_zero),
     tensor("cum_axis", np.array(1, np.int64)),
     tensor("top_k", np.array([3], np.int64)),
     tensor("depth", np.array(5, np.int64)),
     tensor("onehot_values", np.array([0, 1], np.float32)),
     tensor("trilu_k", np.array(1, np.int64)),
     tensor("flat", np.array([-1, 25], np.int64)),
     tensor("repeats", np.array([1, 2], np.int64))])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
          os.path.join(out, "exported_ops.onnx"))

x = f32(rng.standard_normal((N, 8, 5, 5)))
h = conv_transpose(x.astype(np.float64), wt, bt, 2, 1, 1, 2)
h = normalize(h, (2, 3)) * in_scale[None, :, None, None] + in_bias[None, :, None, None]
h = np.where(h < 0, h * slope, h)
# DepthToSpace (CRD) then SpaceToDepth, as ONNX defines them.
n_, c_, hh, ww = h.shape
d2s = h.reshape(n_, c_ // 4, 2, 2, hh, ww).transpose(0, 1, 4, 2, 5, 3).reshape(
    n_, c_ // 4, hh * 2, ww * 2)
s2d = d2s.reshape(n_, c_ // 4, hh, 2, ww, 2).transpose(0, 3, 5, 1, 2, 4).reshape(
    n_, c_, hh, ww)
l2 = np.sqrt((s2d ** 2).sum(axis=(2, 3)))
lp = f32(l2 / np.sqrt((l2 ** 2).sum(axis=1, keepdims=True)))
# Quantization in float32, as ONNX's reference computes it (ties to even).
lq = np.clip(np.rint(lp / act_scale) + 128, 0, 255)
ldq = (lq - 128) * np.float64(act_scale)
we = (wq.astype(np.float64) - wq_zero[:, None]) * wq_scale[:, None]
e = ldq @ we.T
cs = np.cumsum(e, axis=1)
order = np.argsort(-cs, axis=1, kind="stable")[:, :3]
tv = np.take_along_axis(cs, order, axis=1)
am = e.argmax(axis=1)
oh = np.eye(5)[am]
s2 = e + oh + oh  # Hardmax of e is the one-hot of its argmax
tr = np.triu(s2[:, :, None] * s2[:, None, :], 1)
tl = np.tile(tr.reshape(N, 25), (1, 2))
m = tl.max(axis=1, keepdims=True)
lse = np.log(np.exp(tl - m).sum(axis=1, keepdims=True)) + m
y = tl - lse
write("exported_ops_data", [("x", x)],
      [("y", f32(y)), ("tv", f32(tv)), ("ti", order.astype(np.int64))])

# GroupNormalization: opset 18's per-group parameters, opset 21's
# per-channel ones ---------------------------------------------------------
xg = f32(rng.standard_normal((4, 6, 3, 4)))
for opset, size in ((18, 3), (21, 6)):
    scale = f32(rng.uniform(0.5, 1.5, size))
    bias = f32(rng.standard_normal(size) * 0.1)
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"],
                            name="gn", num_groups=3, epsilon=1e-5)
    graph = helper.make_graph(
        [node], f"group_norm{opset}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6, 3, 4])],
        [tensor("scale", scale), tensor("bias", bias)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(model, os.path.join(out, f"group_norm{opset}.onnx"))
    g = normalize(xg.astype(np.float64).reshape(4, 3, -1), (2,)).reshape(xg.shape)
    per_channel = np.repeat(scale, 2) if size == 3 else scale
    per_bias = np.repeat(bias, 2) if size == 3 else bias
    yg = g * per_channel[None, :, None, None] + per_bias[None, :, None, None]
    write(f"group_norm{opset}_data", [("x", xg)], [("y", f32(yg))])

# Models partc refuses, each with one clear error -----------------------------
def single(name, node, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph([node], name, inputs, outputs, list(inits))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]),
              os.path.join(out, name + ".onnx"))


vi = helper.make_tensor_value_info
single("einsum_diagonal",
       helper.make_node("Einsum", ["x"], ["y"], name="trace", equation="ii->"),
       [vi("x", TensorProto.FLOAT, [3, 3])], [vi("y", TensorProto.FLOAT, [])])
single("top_k_dynamic",
       helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk"),
       [vi("x", TensorProto.FLOAT, [2, 5]), vi("k", TensorProto.INT64, [1])],
       [vi("v", TensorProto.FLOAT, [2, 2]), vi("i", TensorProto.INT64, [2, 2])])
single("conv_transpose_padding",
       helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up",
                        strides=[2, 2], output_padding=[2, 0]),
       [vi("x", TensorProto.FLOAT, [1, 2, 3, 3])],
       [vi("y", TensorProto.FLOAT, [1, 2, 9, 7])],
       [tensor("w", f32(np.ones((2, 2, 3, 3))))])
single("group_norm_groups",
       helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn",
                        num_groups=4),
       [vi("x", TensorProto.FLOAT, [2, 6, 3])], [vi("y", TensorProto.FLOAT, [2, 6, 3])],
       [tensor("s", f32(np.ones(4))), tensor("b", f32(np.zeros(4)))], opset=18)
