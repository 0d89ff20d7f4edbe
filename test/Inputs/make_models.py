#!/usr/bin/env python3
"""Writes the small ONNX models the lit tests use into a directory.

Models are generated at test time (Debian's python3-onnx and numpy) rather
than committed. mlp.onnx comes with a numpy reference in mlp_data/.
"""
import math
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)


def save(graph, name, opset=13):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(model, os.path.join(out, name))


def init(name, array):
    return numpy_helper.from_array(array.astype(np.float32), name)


def write_data_set(name, x, y):
    """A test_data_set directory: input x and expected output y (f32)."""
    data = os.path.join(out, name)
    os.makedirs(data, exist_ok=True)
    for file, value, tensor in (("input_0.pb", x, "x"), ("output_0.pb", y, "y")):
        with open(os.path.join(data, file), "wb") as f:
            f.write(numpy_helper.from_array(value.astype(np.float32),
                                            tensor).SerializeToString())


# mlp.onnx: three Gemm layers with a residual Add that skips the middle one.
w1, b1 = rng.standard_normal((16, 32)) * 0.3, rng.standard_normal(32) * 0.1
w2, b2 = rng.standard_normal((32, 32)) * 0.3, rng.standard_normal(32) * 0.1
w3, b3 = rng.standard_normal((32, 8)) * 0.3, rng.standard_normal(8) * 0.1
nodes = [
    helper.make_node("Gemm", ["x", "w1", "b1"], ["h1"], name="fc1"),
    helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
    helper.make_node("Gemm", ["a1", "w2", "b2"], ["h2"], name="fc2"),
    helper.make_node("Relu", ["h2"], ["a2"], name="relu2"),
    helper.make_node("Add", ["a2", "a1"], ["r"], name="residual"),
    helper.make_node("Gemm", ["r", "w3", "b3"], ["h3"], name="fc3"),
    helper.make_node("Softmax", ["h3"], ["y"], name="softmax", axis=1),
]
graph = helper.make_graph(
    nodes, "mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
    [init("w1", w1), init("b1", b1), init("w2", w2), init("b2", b2),
     init("w3", w3), init("b3", b3)])
save(graph, "mlp.onnx")

x = rng.standard_normal((4, 16)).astype(np.float32)
a1 = np.maximum(x @ w1 + b1, 0)
r = np.maximum(a1 @ w2 + b2, 0) + a1
h3 = r @ w3 + b3
e = np.exp(h3 - h3.max(axis=1, keepdims=True))
y = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
write_data_set("mlp_data", x, y)
# An input of the wrong shape and one of the wrong type.
with open(os.path.join(out, "x_wrong_shape.pb"), "wb") as f:
    f.write(numpy_helper.from_array(np.zeros((4, 15), np.float32), "x").SerializeToString())
np.save(os.path.join(out, "x_wrong_type.npy"), np.zeros((4, 16), np.int64))
np.save(os.path.join(out, "x_ok.npy"), x)

# resblock.onnx: a bottleneck residual block (1x1, 3x3, 1x1 convolutions,
# the last one's output added to the block's input, then ReLU): the shape
# whose epilogues the GPU fuses. Reference in resblock_data/.
def conv(x, w, b, pad):
    n, c, h, wd = x.shape
    k, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    y = np.zeros((n, k, h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + y.shape[2], j:j + y.shape[3]]
            y += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j])
    return y + b[None, :, None, None]


cw1, cb1 = rng.standard_normal((16, 8, 1, 1)) * 0.3, rng.standard_normal(16) * 0.1
cw2, cb2 = rng.standard_normal((16, 16, 3, 3)) * 0.1, rng.standard_normal(16) * 0.1
cw3, cb3 = rng.standard_normal((8, 16, 1, 1)) * 0.3, rng.standard_normal(8) * 0.1
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1"),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
    helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], name="conv3"),
    helper.make_node("Add", ["c3", "x"], ["s"], name="residual"),
    helper.make_node("Relu", ["s"], ["y"], name="relu3"),
]
graph = helper.make_graph(
    nodes, "resblock",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 6, 6])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8, 6, 6])],
    [init("w1", cw1), init("b1", cb1), init("w2", cw2), init("b2", cb2),
     init("w3", cw3), init("b3", cb3)])
save(graph, "resblock.onnx")
xr = rng.standard_normal((2, 8, 6, 6))
r1 = np.maximum(conv(xr, cw1, cb1, 0), 0)
r2 = np.maximum(conv(r1, cw2, cb2, 1), 0)
yr = np.maximum(conv(r2, cw3, cb3, 0) + xr, 0)
write_data_set("resblock_data", xr, yr)

# inception.onnx: an Inception block in miniature: a 1x1 convolution, a
# 1x1 then a 3x3 one, and a 3x3 max pool then a 1x1 convolution, each
# with ReLU, read the same input; their results are concatenated along
# the channels. partc-assign-streams runs the branches on streams of their
# own. Reference in inception_data/.
iw1, ib1 = rng.standard_normal((8, 8, 1, 1)) * 0.3, rng.standard_normal(8) * 0.1
iw2, ib2 = rng.standard_normal((6, 8, 1, 1)) * 0.3, rng.standard_normal(6) * 0.1
iw3, ib3 = rng.standard_normal((8, 6, 3, 3)) * 0.1, rng.standard_normal(8) * 0.1
iw4, ib4 = rng.standard_normal((4, 8, 1, 1)) * 0.3, rng.standard_normal(4) * 0.1
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="branch1_conv"),
    helper.make_node("Relu", ["c1"], ["r1"], name="branch1_relu"),
    helper.make_node("Conv", ["x", "w2", "b2"], ["c2"], name="branch2_reduce"),
    helper.make_node("Relu", ["c2"], ["r2"], name="branch2_relu1"),
    helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], name="branch2_conv",
                     pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c3"], ["r3"], name="branch2_relu2"),
    helper.make_node("MaxPool", ["x"], ["p"], name="branch3_pool",
                     kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    helper.make_node("Conv", ["p", "w4", "b4"], ["c4"], name="branch3_conv"),
    helper.make_node("Relu", ["c4"], ["r4"], name="branch3_relu"),
    helper.make_node("Concat", ["r1", "r3", "r4"], ["y"], name="concat",
                     axis=1),
]
graph = helper.make_graph(
    nodes, "inception",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 6, 6])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 20, 6, 6])],
    [init("w1", iw1), init("b1", ib1), init("w2", iw2), init("b2", ib2),
     init("w3", iw3), init("b3", ib3), init("w4", iw4), init("b4", ib4)])
save(graph, "inception.onnx")
xi = rng.standard_normal((2, 8, 6, 6))
padded = np.pad(xi, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
pooled = np.max([padded[:, :, i:i + 6, j:j + 6] for i in range(3)
                 for j in range(3)], axis=0)
yi = np.concatenate([
    np.maximum(conv(xi, iw1, ib1, 0), 0),
    np.maximum(conv(np.maximum(conv(xi, iw2, ib2, 0), 0), iw3, ib3, 1), 0),
    np.maximum(conv(pooled, iw4, ib4, 0), 0)], axis=1)
write_data_set("inception_data", xi, yi)

# linear.onnx: two linear layers as PyTorch exports them for a 3-D input
# (MatMul, then Add of the bias), the first followed by ReLU; the bias is
# the Add's first operand in one and second in the other.
lw1, lb1 = rng.standard_normal((16, 24)) * 0.3, rng.standard_normal(24) * 0.1
lw2, lb2 = rng.standard_normal((24, 8)) * 0.3, rng.standard_normal(8) * 0.1
nodes = [
    helper.make_node("MatMul", ["x", "w1"], ["m1"], name="fc1"),
    helper.make_node("Add", ["b1", "m1"], ["h1"], name="fc1_bias"),
    helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
    helper.make_node("MatMul", ["a1", "w2"], ["m2"], name="fc2"),
    helper.make_node("Add", ["m2", "b2"], ["y"], name="fc2_bias"),
]
graph = helper.make_graph(
    nodes, "linear",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5, 8])],
    [init("w1", lw1), init("b1", lb1), init("w2", lw2), init("b2", lb2)])
save(graph, "linear.onnx")
xl = rng.standard_normal((4, 5, 16))
yl = np.maximum(xl @ lw1 + lb1, 0) @ lw2 + lb2
write_data_set("linear_data", xl, yl)

# gelu.onnx: a linear layer followed by Gelu as opset-17 exporters write it
# (Div by sqrt(2), Erf, Add 1, Mul by x, Mul by 0.5), then a second one.
gw1, gb1 = rng.standard_normal((16, 32)) * 0.3, rng.standard_normal(32) * 0.1
gw2 = rng.standard_normal((32, 8)) * 0.3
nodes = [
    helper.make_node("MatMul", ["x", "w1"], ["m1"], name="fc1"),
    helper.make_node("Add", ["m1", "b1"], ["h"], name="fc1_bias"),
    helper.make_node("Div", ["h", "sqrt2"], ["d"], name="gelu_div"),
    helper.make_node("Erf", ["d"], ["e"], name="gelu_erf"),
    helper.make_node("Add", ["e", "one"], ["a"], name="gelu_add"),
    helper.make_node("Mul", ["h", "a"], ["m"], name="gelu_mul"),
    helper.make_node("Mul", ["m", "half"], ["g"], name="gelu_half"),
    helper.make_node("MatMul", ["g", "w2"], ["y"], name="fc2"),
]
graph = helper.make_graph(
    nodes, "gelu",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5, 8])],
    [init("w1", gw1), init("b1", gb1), init("w2", gw2),
     init("sqrt2", np.array(np.sqrt(2.0))), init("one", np.array(1.0)),
     init("half", np.array(0.5))])
save(graph, "gelu.onnx")
xg = rng.standard_normal((4, 5, 16))
hg = xg @ gw1 + gb1
erf = np.vectorize(math.erf)
yg = (0.5 * hg * (1 + erf(hg / np.sqrt(2.0)))) @ gw2
write_data_set("gelu_data", xg, yg)

# chain.onnx: a linear layer, then a chain of element-wise ops with a
# per-column bias, a scalar and a per-sample-row broadcast, fused into one
# graph.fused_elementwise that must survive batch splitting.
cw = rng.standard_normal((16, 12)) * 0.3
cb = rng.standard_normal(12) * 0.1
nodes = [
    helper.make_node("MatMul", ["x", "w"], ["m"], name="fc"),
    helper.make_node("Sub", ["m", "b"], ["s"], name="chain_sub"),
    helper.make_node("Tanh", ["s"], ["t"], name="chain_tanh"),
    helper.make_node("Mul", ["t", "k"], ["u"], name="chain_scale"),
    helper.make_node("Exp", ["u"], ["e"], name="chain_exp"),
    helper.make_node("Add", ["e", "m"], ["y"], name="chain_add"),
]
graph = helper.make_graph(
    nodes, "chain",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5, 12])],
    [init("w", cw), init("b", cb), init("k", np.array(0.75))])
save(graph, "chain.onnx")
xc = rng.standard_normal((4, 5, 16))
mc = xc @ cw
yc = np.exp(np.tanh(mc - cb) * 0.75) + mc
write_data_set("chain_data", xc, yc)

# activations.onnx: linear layers between the activations added through
# the one-definition recipe (docs/adding-an-op.md), with non-default
# parameters where they have any, so that fused chains carry parameters.
aw1 = rng.standard_normal((16, 24)) * 0.4
aw2 = rng.standard_normal((24, 24)) * 0.4
aw3 = rng.standard_normal((24, 8)) * 0.4
nodes = [
    helper.make_node("MatMul", ["x", "w1"], ["m1"], name="fc1"),
    helper.make_node("Mish", ["m1"], ["a1"], name="mish"),
    helper.make_node("MatMul", ["a1", "w2"], ["m2"], name="fc2"),
    helper.make_node("Selu", ["m2"], ["a2"], name="selu", alpha=1.5, gamma=1.1),
    helper.make_node("Celu", ["a2"], ["a3"], name="celu", alpha=0.8),
    helper.make_node("Softsign", ["a3"], ["a4"], name="softsign"),
    helper.make_node("ThresholdedRelu", ["a4"], ["a5"], name="thresholded_relu",
                     alpha=0.05),
    helper.make_node("MatMul", ["a5", "w3"], ["m3"], name="fc3"),
    helper.make_node("LeakyRelu", ["m3"], ["a6"], name="leaky_relu"),
    helper.make_node("HardSigmoid", ["a6"], ["y"], name="hard_sigmoid",
                     alpha=0.3, beta=0.4),
]
graph = helper.make_graph(
    nodes, "activations",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6, 8])],
    [init("w1", aw1), init("w2", aw2), init("w3", aw3)])
save(graph, "activations.onnx", opset=18)
xa = rng.standard_normal((4, 6, 16))
f32 = lambda v: v.astype(np.float32).astype(np.float64)
xa, aw1, aw2, aw3 = f32(xa), f32(aw1), f32(aw2), f32(aw3)
h = xa @ aw1
h = h * np.tanh(np.log1p(np.exp(h)))
h = h @ aw2
h = np.where(h > 0, 1.1 * h, 1.1 * (1.5 * np.exp(h) - 1.5))
h = np.maximum(0, h) + np.minimum(0, 0.8 * (np.exp(h / 0.8) - 1))
h = h / (1 + np.abs(h))
h = np.where(h > 0.05, h, 0)
h = h @ aw3
h = np.where(h >= 0, h, 0.01 * h)
ya = np.clip(0.3 * h + 0.4, 0, 1)
write_data_set("activations_data", xa, ya)

# resample.onnx: a segmentation head in miniature: a convolution, a
# bilinear upsampling to given sizes (half_pixel, as torchvision's models
# export F.interpolate), a 1x1 convolution, a nearest downsampling by
# scales, and GatherElements along the channels with indices that an
# exporter broadcast to the fixed batch (equal rows per sample).
def interp_matrix(n_in, n_out, scale, mode):
    """Rows: output positions; columns: weights over input positions."""
    m = np.zeros((n_out, n_in))
    for o in range(n_out):
        if mode == "linear":
            c = (o + 0.5) / scale - 0.5
            f = math.floor(c)
            w = c - f
            m[o, min(max(f, 0), n_in - 1)] += 1 - w
            m[o, min(max(f + 1, 0), n_in - 1)] += w
        else:  # nearest, asymmetric, floor
            m[o, min(max(math.floor(o / scale), 0), n_in - 1)] = 1
    return m


rw1, rb1 = rng.standard_normal((4, 3, 3, 3)) * 0.3, rng.standard_normal(4) * 0.1
rw2, rb2 = rng.standard_normal((6, 4, 1, 1)) * 0.3, rng.standard_normal(6) * 0.1
gidx = rng.integers(-6, 6, size=(1, 2, 6, 6))
gidx = np.repeat(gidx, 4, axis=0)
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("Resize", ["r1", "", "", "up_sizes"], ["u"], name="upsample",
                     mode="linear", coordinate_transformation_mode="half_pixel"),
    helper.make_node("Conv", ["u", "w2", "b2"], ["c2"], name="conv2"),
    helper.make_node("Resize", ["c2", "", "down_scales"], ["d"], name="downsample",
                     mode="nearest", coordinate_transformation_mode="asymmetric",
                     nearest_mode="floor"),
    helper.make_node("GatherElements", ["d", "gidx"], ["y"], name="pick", axis=1),
]
graph = helper.make_graph(
    nodes, "resample",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3, 6, 6])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 2, 6, 6])],
    [init("w1", rw1), init("b1", rb1), init("w2", rw2), init("b2", rb2),
     numpy_helper.from_array(np.array([4, 4, 12, 12], dtype=np.int64), "up_sizes"),
     numpy_helper.from_array(np.array([1, 1, 0.5, 0.5], dtype=np.float32), "down_scales"),
     numpy_helper.from_array(gidx.astype(np.int64), "gidx")])
save(graph, "resample.onnx")
xr = rng.standard_normal((4, 3, 6, 6)).astype(np.float32).astype(np.float64)
rw1, rb1, rw2, rb2 = (f32(v) for v in (rw1, rb1, rw2, rb2))
h = np.maximum(conv(xr, rw1, rb1, 1), 0)
up = interp_matrix(6, 12, 2.0, "linear")
h = np.einsum("oh,nchw,pw->ncop", up, h, up)
h = conv(h, rw2, rb2, 0)
down = interp_matrix(12, 6, 0.5, "nearest")
h = np.einsum("oh,nchw,pw->ncop", down, h, down)
yr = np.take_along_axis(h, np.where(gidx < 0, gidx + 6, gidx), axis=1)
write_data_set("resample_data", xr, yr)

# attention.onnx: self-attention with 2 heads: a QKV projection split into
# q, k and v, heads split by Reshape and Transpose, scores scaled by Div,
# Softmax, heads merged by Transpose and Reshape, an output projection
# with its bias and a residual connection. partc-fold-matmul-views reads
# the heads in place (two strided matmuls); the projection's bias and
# residual run in its GEMM's epilogue.
def head_split():
    """q, k, v [batch, 6, 16] -> 2 heads of 8: qt, vt [b, 2, 6, 8], kt [b, 2, 8, 6]."""
    return [
        helper.make_node("Reshape", [t, "heads"], [t + "4"], name=t + "_heads")
        for t in "qkv"
    ] + [
        helper.make_node("Transpose", [t + "4"], [t + "t"], name=t + "_t", perm=perm)
        for t, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3]))
    ]


def head_merge(scores, out):
    """Softmax of `scores`, times vt, heads merged into `out` [b, 6, 16]."""
    return [
        helper.make_node("Softmax", [scores], ["a"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["a", "vt"], ["o"], name="context"),
        helper.make_node("Transpose", ["o"], ["ot"], name="merge_t", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ot", "merged"], [out], name="merge"),
    ]


aw = rng.standard_normal((16, 48)) * 0.3
ab = rng.standard_normal(48) * 0.1
ao = rng.standard_normal((16, 16)) * 0.3
abo = rng.standard_normal(16) * 0.1
nodes = [
    helper.make_node("MatMul", ["x", "wqkv"], ["p"], name="qkv"),
    helper.make_node("Add", ["p", "bqkv"], ["pb"], name="qkv_bias"),
    helper.make_node("Split", ["pb"], ["q", "k", "v"], name="split", axis=-1),
] + head_split() + [
    helper.make_node("MatMul", ["qt", "kt"], ["s"], name="scores"),
    helper.make_node("Div", ["s", "scale"], ["ss"], name="scale"),
] + head_merge("ss", "m") + [
    helper.make_node("MatMul", ["m", "wo"], ["mo"], name="out"),
    helper.make_node("Add", ["mo", "bo"], ["mb"], name="out_bias"),
    helper.make_node("Add", ["x", "mb"], ["y"], name="residual"),
]
graph = helper.make_graph(
    nodes, "attention",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6, 16])],
    [init("wqkv", aw), init("bqkv", ab), init("wo", ao), init("bo", abo),
     init("scale", np.array(np.sqrt(8.0))),
     numpy_helper.from_array(np.array([-1, 6, 2, 8], np.int64), "heads"),
     numpy_helper.from_array(np.array([-1, 6, 16], np.int64), "merged")])
save(graph, "attention.onnx")
xa = rng.standard_normal((4, 6, 16))
qa, ka, va = np.split(xa @ aw + ab, 3, axis=-1)
heads = lambda t: t.reshape(4, 6, 2, 8).transpose(0, 2, 1, 3)
sa = heads(qa) @ heads(ka).transpose(0, 1, 3, 2) / np.sqrt(8.0)
pa = np.exp(sa - sa.max(-1, keepdims=True))
pa /= pa.sum(-1, keepdims=True)
ya = xa + (pa @ heads(va)).transpose(0, 2, 1, 3).reshape(4, 6, 16) @ ao + abo
write_data_set("attention_data", xa, ya)

# sdpa.onnx: attention as exporters decompose scaled_dot_product_attention:
# separate q, k, v projections, q and k^T each scaled by sqrt(sqrt(1/8))
# before their product (both scales fold into the strided matmul's alpha).
sq, sk, sv = (rng.standard_normal((16, 16)) * 0.3 for _ in range(3))
root = np.float32((1.0 / 8) ** 0.25)
nodes = [
    helper.make_node("MatMul", ["x", "wq"], ["q"], name="q_proj"),
    helper.make_node("MatMul", ["x", "wk"], ["k"], name="k_proj"),
    helper.make_node("MatMul", ["x", "wv"], ["v"], name="v_proj"),
] + head_split() + [
    helper.make_node("Mul", ["qt", "root"], ["qs"], name="q_scale"),
    helper.make_node("Mul", ["kt", "root"], ["ks"], name="k_scale"),
    helper.make_node("MatMul", ["qs", "ks"], ["s"], name="scores"),
] + head_merge("s", "y")
graph = helper.make_graph(
    nodes, "sdpa",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6, 16])],
    [init("wq", sq), init("wk", sk), init("wv", sv), init("root", np.array(root)),
     numpy_helper.from_array(np.array([-1, 6, 2, 8], np.int64), "heads"),
     numpy_helper.from_array(np.array([-1, 6, 16], np.int64), "merged")])
save(graph, "sdpa.onnx")
xs = rng.standard_normal((4, 6, 16))
ss = heads(xs @ sq) @ heads(xs @ sk).transpose(0, 1, 3, 2) / np.sqrt(8.0)
ps = np.exp(ss - ss.max(-1, keepdims=True))
ps /= ps.sum(-1, keepdims=True)
ys = (ps @ heads(xs @ sv)).transpose(0, 2, 1, 3).reshape(4, 6, 16)
write_data_set("sdpa_data", xs, ys)

# bad_shapes.onnx: a MatMul whose contraction dimensions differ.
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["y"], name="bad_matmul")], "bad",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
    [init("w", np.ones((4, 5)))])
save(graph, "bad_shapes.onnx")

# unsupported.onnx: two unsupported op types, one of them twice.
graph = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["a"], name="ok"),
     helper.make_node("Unique", ["a"], ["b"], name="u1"),
     helper.make_node("Unique", ["a"], ["c"], name="u2"),
     helper.make_node("Det", ["a"], ["d"], name="det")], "unsupported",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
    [helper.make_tensor_value_info("b", TensorProto.FLOAT, [9]),
     helper.make_tensor_value_info("c", TensorProto.FLOAT, [9]),
     helper.make_tensor_value_info("d", TensorProto.FLOAT, [])])
save(graph, "unsupported.onnx")

# dynamic.onnx: a dynamic dimension other than the batch.
graph = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"], name="r")], "dynamic",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])])
save(graph, "dynamic.onnx")

# masked_softmax.onnx: attention weights as PyTorch exports them: masked
# scores, a softmax, and IsNaN + Where zeroing the row whose every key is
# masked (softmax gives NaN there).
keep = np.ones((1, 4, 6), bool)
keep[0, 1, :] = False
keep[0, 2, 3:] = False
graph = helper.make_graph(
    [helper.make_node("Where", ["keep", "x", "ninf"], ["s"], name="mask"),
     helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
     helper.make_node("IsNaN", ["p"], ["nan"], name="isnan"),
     helper.make_node("Where", ["nan", "zero", "p"], ["y"], name="zero_nan")],
    "masked_softmax",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 6])],
    [numpy_helper.from_array(keep, "keep"),
     init("ninf", np.array([-np.inf])), init("zero", np.array([0.0]))])
save(graph, "masked_softmax.onnx")
xm = rng.standard_normal((2, 4, 6))
sm = np.where(keep, xm, -np.inf)
with np.errstate(invalid="ignore"):
    pm = np.exp(sm - sm.max(-1, keepdims=True))
    pm = pm / pm.sum(-1, keepdims=True)
write_data_set("masked_softmax_data", xm, np.nan_to_num(pm, nan=0.0))

# dropout_train{0,1}.onnx: Dropout in training mode dropping nothing (the
# identity, as torchvision's Swin exports it) and dropping a tenth;
# dropout_train_mask.onnx also returns the mask, which partc refuses;
# dropout_train_unread_mask.onnx names it without reading it, as PyTorch's
# training exports do.
for name, ratio, outputs in (("dropout_train0.onnx", 0.0, ["y"]),
                             ("dropout_train1.onnx", 0.1, ["y"]),
                             ("dropout_train_mask.onnx", 0.1, ["y", "mask"]),
                             ("dropout_train_unread_mask.onnx", 0.1,
                              ["y", "unread_mask"])):
    graph = helper.make_graph(
        [helper.make_node("Dropout", ["x", "ratio", "training"], outputs,
                          name="drop")], "dropout",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 3])] +
        [helper.make_tensor_value_info("mask", TensorProto.BOOL, [64, 3])
         for o in outputs[1:] if o == "mask"],
        [numpy_helper.from_array(np.array(ratio, np.float32), "ratio"),
         numpy_helper.from_array(np.array(True), "training")])
    save(graph, name)
# An inference compile draws one fixed mask (step 0, seed 0, stream 0):
# test/Training/onnx_numpy.py's Philox is the reference.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "Training"))
from onnx_numpy import dropout_mask  # noqa: E402
xd = np.random.default_rng(7).standard_normal((64, 3)).astype(np.float32)
keep = dropout_mask(xd.shape, 0.1, 0, 0, 0)
write_data_set("dropout_train1_data", xd,
               np.where(keep, xd * np.float32(1 / 0.9), 0).astype(np.float32))

# bn_train{14,9}.onnx: batch norm exported for training (PyTorch's
# TrainingMode.TRAINING): opset 14's training_mode attribute, or opset 9's
# five outputs, the statistics unread. ONNX then normalizes with the
# batch's statistics (biased variance). bn_train_stats.onnx returns the
# running mean as well, which partc refuses.
rng_bn = np.random.default_rng(7)
xb = rng_bn.standard_normal((4, 3, 2, 2)).astype(np.float32) * 2 + 1
bn_inits = [numpy_helper.from_array(np.array([1.0, 0.5, 2.0], np.float32), "s"),
            numpy_helper.from_array(np.array([0.0, 1.0, -1.0], np.float32), "b"),
            numpy_helper.from_array(np.zeros(3, np.float32), "m"),
            numpy_helper.from_array(np.ones(3, np.float32), "v")]
for name, opset, outputs, attrs, graph_outputs in (
        ("bn_train14.onnx", 14, ["y", "rm", "rv"], {"training_mode": 1}, ["y"]),
        ("bn_train9.onnx", 9, ["y", "rm", "rv", "sm", "sv"], {}, ["y"]),
        ("bn_train_stats.onnx", 14, ["y", "rm", "rv"], {"training_mode": 1},
         ["y", "rm"])):
    graph = helper.make_graph(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                          outputs, name="bn", epsilon=1e-5, **attrs)],
        "bn_train",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3, 2, 2])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT,
                                       [4, 3, 2, 2] if o == "y" else [3])
         for o in graph_outputs], bn_inits)
    save(graph, name, opset=opset)
mean_b = xb.mean(axis=(0, 2, 3), keepdims=True)
var_b = xb.var(axis=(0, 2, 3), keepdims=True)
yb = ((xb - mean_b) / np.sqrt(var_b + 1e-5)
      * np.array([1.0, 0.5, 2.0], np.float32).reshape(1, 3, 1, 1)
      + np.array([0.0, 1.0, -1.0], np.float32).reshape(1, 3, 1, 1))
write_data_set("bn_train_data", xb, yb.astype(np.float32))

# Ops partc imports only in part: an attribute the generic import does not
# know, Resize's cubic mode, GatherElements indices wider than the data.
def single_node(name, node, x_shape, y_shape, inits=()):
    graph = helper.make_graph(
        [node], name.split(".")[0],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        list(inits))
    save(graph, name, opset=18)


single_node("relu_extra_attr.onnx",
            helper.make_node("Relu", ["x"], ["y"], name="relu", slope=0.5),
            [2, 3], [2, 3])
single_node("resize_cubic.onnx",
            helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up",
                             mode="cubic"),
            [1, 1, 2, 2], [1, 1, 4, 4],
            [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")])
single_node("gather_elements_wide.onnx",
            helper.make_node("GatherElements", ["x", "idx"], ["y"], name="pick",
                             axis=0),
            [2, 3], [2, 4],
            [numpy_helper.from_array(np.zeros((2, 4), np.int64), "idx")])

single_node("conv_stride0.onnx",
            helper.make_node("Conv", ["x", "cw"], ["y"], name="conv", strides=[0, 1],
                             auto_pad="SAME_UPPER"),
            [1, 1, 4, 4], [1, 1, 4, 4],
            [numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "cw")])

# concat_chain.onnx: a concatenation along the last axis read only by an
# element-wise chain (relu(concat(a, b) * s)), which partc-fuse-concat
# gives the chain's parts.
graph = helper.make_graph(
    [helper.make_node("Concat", ["a", "b"], ["ab"], name="join", axis=1),
     helper.make_node("Mul", ["ab", "s"], ["scaled"], name="scale"),
     helper.make_node("Relu", ["scaled"], ["y"], name="relu")],
    "concat_chain",
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 3]),
     helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 5])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
    [numpy_helper.from_array(np.linspace(-1, 1, 8).astype(np.float32), "s")])
save(graph, "concat_chain.onnx")

# external.onnx: weights in a separate file, as for models over 2 GiB.
w = rng.standard_normal((8, 8)).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "external",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
    [numpy_helper.from_array(w, "w")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.save_model(model, os.path.join(out, "external.onnx"), save_as_external_data=True,
                all_tensors_to_one_file=True, location="external.weights",
                size_threshold=0)
# The same model with its external data's entries tampered with: a path
# out of the model's directory, an absolute path, and an offset that is no
# number (ONNX's checker refuses the first two; partc must too).
for name, key, value in (("external_escape.onnx", "location", "../outside.weights"),
                         ("external_absolute.onnx", "location", "/etc/passwd"),
                         ("external_badoffset.onnx", "offset", "abc")):
    bad = onnx.load(os.path.join(out, "external.onnx"), load_external_data=False)
    entries = bad.graph.initializer[0].external_data
    for e in entries:
        if e.key == key:
            e.value = value
    if key == "offset" and not any(e.key == "offset" for e in entries):
        entries.add(key=key, value=value)
    onnx.save(bad, os.path.join(out, name))
with open(os.path.join(os.path.dirname(os.path.abspath(out)), "outside.weights"), "wb") as f:
    f.write(w.tobytes())
xe = rng.standard_normal((2, 8)).astype(np.float32)
data = os.path.join(out, "external_data")
os.makedirs(data, exist_ok=True)
with open(os.path.join(data, "input_0.pb"), "wb") as f:
    f.write(numpy_helper.from_array(xe, "x").SerializeToString())
with open(os.path.join(data, "output_0.pb"), "wb") as f:
    f.write(numpy_helper.from_array((xe @ w).astype(np.float32), "y").SerializeToString())

# Sizes that do not fit any machine, or overflow 64 bits: a ConstantOfShape
# of [-1, 3] and one of [2^40] returned whole, Pad with pads near 2^62 and
# 2^61 (the size overflows, or passes 2^50 bytes).
def constant_of_shape(name, shape):
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")],
        name.split(".")[0],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(shape, np.int64), "s")])
    save(graph, name)


constant_of_shape("fill_negative.onnx", [-1, 3])
constant_of_shape("fill_huge.onnx", [2**40])
for name, pad in (("pad_overflow.onnx", 2**62), ("pad_huge.onnx", 2**61)):
    graph = helper.make_graph(
        [helper.make_node("Pad", ["k", "p"], ["y"], name="pad", mode="edge")],
        name.split(".")[0],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [numpy_helper.from_array(np.ones((2, 3), np.int32), "k"),
         numpy_helper.from_array(np.array([0, pad, 0, pad], np.int64), "p")])
    save(graph, name)

# Input files that declare more than they hold: a .npy dimension of 10^23,
# a .pb of dims [2^40, 16] with no data, a file far larger than the input.
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000000000000000, 16), }"
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
with open(os.path.join(out, "x_dim_1e23.npy"), "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
huge = TensorProto()
huge.name = "x"
huge.data_type = TensorProto.FLOAT
huge.dims.extend([2**40, 16])
with open(os.path.join(out, "x_dims_2e40.pb"), "wb") as f:
    f.write(huge.SerializeToString())
with open(os.path.join(out, "x_oversized.npy"), "wb") as f:
    f.write(np.zeros(2 << 20, np.float32).tobytes())
os.makedirs(os.path.join(out, "x_directory.npy"), exist_ok=True)

# nan_inf.onnx: NaN and +-Inf through the ops whose formulas could drop
# them (a max, a min, a clamp, a comparison). ONNX's reference computes
# these with numpy, whose maximum, minimum and clip keep NaN; so does this
# oracle. Conv + Relu and MatMul + Relu are there for the fused epilogues.
xn = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
xn[0, 0, 0, 0] = np.nan
xn[0, 1, 2, 1] = np.inf
xn[0, 0, 3, 3] = -np.inf
xn[0, 1, 0, 3] = np.nan
nw = (rng.standard_normal((3, 2, 3, 3)) * 0.3).astype(np.float32)
mw = (rng.standard_normal((4, 5)) * 0.3).astype(np.float32)
half = np.array(0.5, np.float32)


def maxpool2(x):
    n, c, h, w = x.shape
    windows = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
    return np.max(windows.reshape(n, c, h // 2, w // 2, 4), axis=-1)


with np.errstate(invalid="ignore", over="ignore"):
    nan_outputs = {
        "relu": np.maximum(xn, 0),
        "max": np.maximum(xn, half),
        "min": np.minimum(xn, half),
        "clip": np.clip(xn, -1, 1),
        "leaky": np.where(xn >= 0, xn, 0.1 * xn),
        "hardsigmoid": np.clip(0.2 * xn + 0.5, 0, 1),
        "sign": np.sign(xn),
        "maxpool": maxpool2(xn),
        "globalmax": np.max(xn, axis=(2, 3), keepdims=True),
        "reducemax": np.max(xn, axis=3, keepdims=True),
        "reducemin": np.min(xn, axis=3, keepdims=True),
        "convrelu": np.maximum(conv(xn.astype(np.float64), nw, np.zeros(3), 1), 0),
        "matmulrelu": np.maximum(xn.reshape(8, 4).astype(np.float64) @ mw, 0),
    }
nodes = [
    helper.make_node("Relu", ["x"], ["relu"], name="relu"),
    helper.make_node("Max", ["x", "half"], ["max"], name="max"),
    helper.make_node("Min", ["x", "half"], ["min"], name="min"),
    helper.make_node("Clip", ["x", "lo", "hi"], ["clip"], name="clip"),
    helper.make_node("LeakyRelu", ["x"], ["leaky"], name="leaky", alpha=0.1),
    helper.make_node("HardSigmoid", ["x"], ["hardsigmoid"], name="hardsigmoid"),
    helper.make_node("Sign", ["x"], ["sign"], name="sign"),
    helper.make_node("MaxPool", ["x"], ["maxpool"], name="maxpool",
                     kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("GlobalMaxPool", ["x"], ["globalmax"], name="globalmax"),
    helper.make_node("ReduceMax", ["x"], ["reducemax"], name="reducemax", axes=[3]),
    helper.make_node("ReduceMin", ["x"], ["reducemin"], name="reducemin", axes=[3]),
    helper.make_node("Conv", ["x", "nw"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["conv"], ["convrelu"], name="convrelu"),
    helper.make_node("Reshape", ["x", "rows"], ["x2d"], name="rows"),
    helper.make_node("MatMul", ["x2d", "mw"], ["mm"], name="matmul"),
    helper.make_node("Relu", ["mm"], ["matmulrelu"], name="matmulrelu"),
]
graph = helper.make_graph(
    nodes, "nan_inf",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
    [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape))
     for k, v in nan_outputs.items()],
    [init("half", half), init("lo", np.array(-1.0)), init("hi", np.array(1.0)),
     init("nw", nw), init("mw", mw),
     numpy_helper.from_array(np.array([8, 4], np.int64), "rows")])
save(graph, "nan_inf.onnx")
data = os.path.join(out, "nan_inf_data")
os.makedirs(data, exist_ok=True)
with open(os.path.join(data, "input_0.pb"), "wb") as f:
    f.write(numpy_helper.from_array(xn, "x").SerializeToString())
for k, (name, value) in enumerate(nan_outputs.items()):
    with open(os.path.join(data, "output_%d.pb" % k), "wb") as f:
        f.write(numpy_helper.from_array(value.astype(np.float32), name).SerializeToString())

# huge_io.onnx: a Relu of [1, 2^34] floats: 64 GiB in and out, which a
# device of the default topology holds but no CI machine's memory does.
graph = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"], name="relu")], "huge_io",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2**34])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2**34])])
save(graph, "huge_io.onnx")
constant_of_shape("fill_huge2d.onnx", [2**20, 2**20])

# Layer norm over a huge normalized shape: with no rows it compiles (an
# empty input needs no scale index table); with a row the table would not
# fit (fuzz findings of session 16).
for name, shape in (("ln_empty_huge.onnx", [0, 2**40]),
                    ("ln_row_huge.onnx", [1, 2**33])):
    save(helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=1,
                          name="ln")], "ln",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(np.ones(1, np.float32), "s")]), name,
        opset=17)

# rms_norm.onnx: opset 23's RMSNormalization over the last two dimensions,
# its scale [4] broadcast to them; rms_norm_bad_scale.onnx: a scale [3]
# that does not broadcast to [3, 4].
x = rng.standard_normal((2, 3, 4))
s = rng.standard_normal(4)
y = x / np.sqrt((x * x).mean(axis=(1, 2), keepdims=True) + 1e-3) * s
for name, scale in (("rms_norm.onnx", s), ("rms_norm_bad_scale.onnx",
                                            rng.standard_normal(3))):
    save(helper.make_graph(
        [helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-2,
                          epsilon=1e-3, name="rms")], "rms",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])],
        [init("s", scale)]), name, opset=23)
write_data_set("rms_norm_data", x, y)

# masked_attention(): attention (2 heads of 16) whose mask keeps token j of
# a row where its first feature is >= 0 (`kept4`, [batch, 1, 1, 6]),
# combined by `mask_nodes` into the condition `condition` and turned into
# 0 / -inf, with the data set of `keep(x)`, numpy's view of that condition.
# Each model has its own generator, so that the models above keep their
# data.
def masked_attention(name, seed, mask_nodes, mask_inits, condition, keep):
    rng = np.random.default_rng(seed)
    wq, wk, wv = (rng.standard_normal((32, 32)) * 0.2 for _ in range(3))
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"], name="q_proj"),
        helper.make_node("MatMul", ["x", "wk"], ["k"], name="k_proj"),
        helper.make_node("MatMul", ["x", "wv"], ["v"], name="v_proj"),
    ] + head_split() + [
        helper.make_node("MatMul", ["qt", "kt"], ["s"], name="scores"),
        helper.make_node("Div", ["s", "scale"], ["ss"], name="scale"),
        helper.make_node("Gather", ["x", "first"], ["x0"],
                         name="first_feature", axis=2),
        helper.make_node("GreaterOrEqual", ["x0", "zero"], ["kept"],
                         name="kept"),
        helper.make_node("Unsqueeze", ["kept", "axes"], ["kept4"],
                         name="kept4"),
    ] + mask_nodes + [
        helper.make_node("Where", [condition, "zero", "ninf"], ["bias"],
                         name="bias"),
        helper.make_node("Add", ["ss", "bias"], ["sb"], name="masked"),
    ] + head_merge("sb", "y")
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                       ["batch", 6, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       ["batch", 6, 32])],
        [init("wq", wq), init("wk", wk), init("wv", wv),
         init("scale", np.array(4.0)), init("zero", np.array(0.0)),
         init("ninf", np.array(-np.inf)),
         numpy_helper.from_array(np.array(0, np.int64), "first"),
         numpy_helper.from_array(np.array([1, 2], np.int64), "axes")] +
        mask_inits +
        [numpy_helper.from_array(np.array([-1, 6, 2, 16], np.int64), "heads"),
         numpy_helper.from_array(np.array([-1, 6, 32], np.int64), "merged")])
    save(graph, name + ".onnx")
    x = rng.standard_normal((4, 6, 32))
    x[:, 0, 0] = 1.0  # every row keeps its first token
    heads = lambda t: t.reshape(4, 6, 2, 16).transpose(0, 2, 1, 3)
    scores = heads(x @ wq) @ heads(x @ wk).transpose(0, 1, 3, 2) / 4.0
    scores = np.where(keep(x), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    y = (p @ heads(x @ wv)).transpose(0, 2, 1, 3).reshape(4, 6, 32)
    write_data_set(name + "_data", x, y)


def padding_of(x):
    return (x[:, :, 0] >= 0)[:, None, None, :]


# attention_padding.onnx: the padding mask as Hugging Face's encoders export
# it (transformers 5): and-ed with an all-true constant [1, 1, 6, 1],
# expanded to every query. partc-fuse-attention reads it at [batch, 1, 1, 6].
masked_attention(
    "attention_padding", 11,
    [helper.make_node("And", ["all_queries", "kept4"], ["both"], name="both"),
     helper.make_node("Expand", ["both", "square"], ["full"], name="full")],
    [numpy_helper.from_array(np.ones((1, 1, 6, 1), bool), "all_queries"),
     numpy_helper.from_array(np.array([1, 1, 6, 6], np.int64), "square")],
    "full", padding_of)

# dropout_mode_huge.onnx: Dropout whose training_mode, by the spec a
# scalar, is a folded constant of 2^40 values (a fuzz finding of session
# 36: expanding it took minutes).
save(helper.make_graph(
    [helper.make_node("ConstantOfShape", ["s"], ["mode"], name="fill",
                      value=numpy_helper.from_array(np.array([1], bool))),
     helper.make_node("Dropout", ["x", "ratio", "mode"], ["y"], name="drop")],
    "dropout_mode_huge",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    [numpy_helper.from_array(np.array([2**20, 2**20], np.int64), "s"),
     init("ratio", np.array(0.5))]), "dropout_mode_huge.onnx")

# attention_causal.onnx: a decoder's mask as Hugging Face's exports build
# it: and(lower triangle [1, 1, 6, 6], the padding mask). partc-fuse-attention
# marks the op causal and hands it the padding mask alone at [batch, 1, 1, 6].
masked_attention(
    "attention_causal", 13,
    [helper.make_node("And", ["triangle", "kept4"], ["both"], name="both")],
    [numpy_helper.from_array(np.tril(np.ones((6, 6), bool))[None, None],
                             "triangle")],
    "both", lambda x: padding_of(x) & np.tril(np.ones((6, 6), bool)))

# patch_embed.onnx: a vision transformer's patch embedding, a 4 x 4
# convolution at stride 4 over 3 channels, then flatten(2).transpose(1, 2)
# to [batch, patches, width]. partc-convert-layout runs it as a transpose
# into patches and one product.
pw = rng.standard_normal((5, 3, 4, 4)) * 0.3
pb = rng.standard_normal(5) * 0.1
graph = helper.make_graph(
    [helper.make_node("Conv", ["x", "pw", "pb"], ["c"], name="patches",
                      kernel_shape=[4, 4], strides=[4, 4]),
     helper.make_node("Reshape", ["c", "flat"], ["f"], name="flatten"),
     helper.make_node("Transpose", ["f"], ["y"], name="tokens", perm=[0, 2, 1])],
    "patch_embed",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 12])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6, 5])],
    [init("pw", pw), init("pb", pb),
     numpy_helper.from_array(np.array([0, 5, 6], np.int64), "flat")])
save(graph, "patch_embed.onnx")
xp = rng.standard_normal((4, 3, 8, 12)).astype(np.float32)
blocks = xp.reshape(4, 3, 2, 4, 3, 4).transpose(0, 2, 4, 1, 3, 5)
yp = blocks.reshape(4, 6, 48) @ pw.reshape(5, 48).T + pb
write_data_set("patch_embed_data", xp, yp)

# rotary.onnx: Llama's rotary embedding of queries [batch, 6, 2 heads x
# 8] as Hugging Face exports it: x * cos + rotate_half(x) * sin with
# rotate_half(x) = concat(-x[..., 4:], x[..., :4]) and constant tables
# [1, 1, 6, 8]. partc-fold-constants puts the negation into the sine table.
positions = np.arange(6)[:, None] / (10000.0 ** (np.arange(4) / 4.0))[None, :]
angles = np.concatenate([positions, positions], axis=1)[None, None]
cos_table, sin_table = np.cos(angles), np.sin(angles)
graph = helper.make_graph(
    [helper.make_node("Reshape", ["x", "heads"], ["h"], name="heads"),
     helper.make_node("Transpose", ["h"], ["t"], name="to_heads",
                      perm=[0, 2, 1, 3]),
     helper.make_node("Slice", ["t", "zero", "half", "last"], ["x1"], name="x1"),
     helper.make_node("Slice", ["t", "half", "whole", "last"], ["x2"], name="x2"),
     helper.make_node("Neg", ["x2"], ["n2"], name="neg"),
     helper.make_node("Concat", ["n2", "x1"], ["r"], name="rotate_half", axis=-1),
     helper.make_node("Mul", ["t", "cos"], ["a"], name="by_cos"),
     helper.make_node("Mul", ["r", "sin"], ["b"], name="by_sin"),
     helper.make_node("Add", ["a", "b"], ["y"], name="rotary")],
    "rotary",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2, 6, 8])],
    [init("cos", cos_table), init("sin", sin_table),
     numpy_helper.from_array(np.array([0, 6, 2, 8], np.int64), "heads"),
     numpy_helper.from_array(np.array([0], np.int64), "zero"),
     numpy_helper.from_array(np.array([4], np.int64), "half"),
     numpy_helper.from_array(np.array([8], np.int64), "whole"),
     numpy_helper.from_array(np.array([-1], np.int64), "last")])
save(graph, "rotary.onnx")
xr = rng.standard_normal((4, 6, 16)).astype(np.float32)
tr = xr.reshape(4, 6, 2, 8).transpose(0, 2, 1, 3)
rot = np.concatenate([-tr[..., 4:], tr[..., :4]], axis=-1)
write_data_set("rotary_data", xr, tr * cos_table + rot * sin_table)
