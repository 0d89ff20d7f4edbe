#!/usr/bin/env python3
"""Checks partc's training against a float64 numpy reference.

  check_training.py BIN_DIR WORK_DIR gradients
      Small float64 models, one per family of ops, compiled with
      --train --optimizer none: every gradient partc returns must match
      central finite differences of the reference's forward pass (and the
      reference's own backward pass) to 1e-6 relative.
  check_training.py BIN_DIR WORK_DIR train
      float32 models trained 20 steps by partc-run --steps: every step's
      loss within 1e-4 relative of the reference's and the final
      parameters (--save-state) within 1e-4.
  check_training.py BIN_DIR WORK_DIR layouts
      The training cases with convolutions, pooling or batch norm, trained
      channels last (the default) and with --layout nchw: the same losses
      and states within 1e-6 (1e-4 on a GPU, whose libraries choose other
      algorithms per layout).
  check_training.py BIN_DIR WORK_DIR recompute
      Every training case compiled with --recompute none and all: the
      same losses and states within 1e-6 (1e-4 on a GPU), with fewer
      bytes kept and at least one value recomputed.

Options after the mode go to every partc-run (e.g. --backend cuda
--precision fp32 on a GPU machine).

Prints one line per case and exits 1 if any fails.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from onnx_numpy import (Graph, Optimizer, batch_statistics,  # noqa: E402
                        loss_and_grad, running_statistics)

BIN, WORK, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
RUN_OPTIONS = sys.argv[4:]
os.makedirs(WORK, exist_ok=True)
failures = []


def make_model(name, nodes, inputs, output_shape, params, dtype):
    elem = TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, elem, a.shape) for n, a in inputs],
        [helper.make_tensor_value_info("y", elem, output_shape)],
        [numpy_helper.from_array(np.asarray(a, dtype if a.dtype.kind == "f"
                                            else a.dtype), n)
         for n, a in params.items()])
    # LayerNormalization needs opset 17, Mish 18, RMSNormalization 23; the
    # others are written for 13.
    types = {n.op_type for n in nodes}
    opset = 23 if "RMSNormalization" in types else 18 if "Mish" in types \
        else 17 if "LayerNormalization" in types else 13
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", opset)])
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(model, path)
    return path, model


def run(*args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(" ".join(args) + "\n" + r.stdout + r.stderr)
    return r.stdout


def save(name, array):
    path = os.path.join(WORK, name + ".npy")
    np.save(path, array)
    return path


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def input_args(name, feeds, labels):
    """partc-run's --input options for the inputs and labels, saved as .npy."""
    args = []
    for k, v in list(feeds.items()) + [("labels", labels)]:
        args += ["--input", f"{k}={save(name + '_' + k, v)}"]
    return args


def report(case, ok, detail):
    print(("PASS" if ok else "FAIL") + f" {case}: {detail}")
    if not ok:
        failures.append(case)


rng = np.random.default_rng(7)


def randn(*shape, scale=1.0):
    return rng.standard_normal(shape) * scale


# Each case: nodes (output "y"), inputs, output shape, params, loss.
def gradient_cases():
    yield ("gemm_relu", [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1,
                         alpha=0.7, beta=0.5),
        helper.make_node("Relu", ["h"], ["a"]),
        helper.make_node("Gemm", ["a", "w2"], ["g"], transA=0),
        helper.make_node("Gemm", ["w3", "g"], ["y"], transA=1)],
        {"x": randn(4, 6)}, (5, 3),
        {"w1": randn(7, 6, scale=0.5), "b1": randn(1, 7), "w2": randn(7, 3),
         "w3": randn(4, 5)}, "mse")
    yield ("matmul_batched", [
        helper.make_node("MatMul", ["x", "w1"], ["m"]),
        helper.make_node("Add", ["m", "b1"], ["h"]),
        helper.make_node("Tanh", ["h"], ["t"]),
        helper.make_node("MatMul", ["w2", "t"], ["u"]),
        helper.make_node("Sigmoid", ["u"], ["y"])],
        {"x": randn(2, 3, 4)}, (2, 5, 5),
        {"w1": randn(4, 5, scale=0.5), "b1": randn(5), "w2": randn(2, 5, 3)},
        "mse")
    yield ("elementwise", [
        helper.make_node("Mul", ["x", "s"], ["a"]),
        helper.make_node("Softplus", ["w"], ["sp"]),
        helper.make_node("Sqrt", ["sp"], ["r"]),
        helper.make_node("Div", ["a", "r"], ["d"]),
        helper.make_node("Exp", ["d"], ["e"]),
        helper.make_node("Abs", ["x"], ["ax"]),
        helper.make_node("Add", ["ax", "c"], ["ac"]),
        helper.make_node("Log", ["ac"], ["l"]),
        helper.make_node("Sub", ["e", "l"], ["s1"]),
        helper.make_node("Neg", ["s1"], ["n"]),
        helper.make_node("Abs", ["n"], ["y"])],
        {"x": randn(3, 4, scale=0.5)}, (3, 4),
        {"s": randn(1, 4, scale=0.5), "w": randn(4), "c": 1.5 + np.abs(randn(3, 1))},
        "l1")
    yield ("softmax_reductions", [
        helper.make_node("Gemm", ["x", "w"], ["h"]),
        helper.make_node("Softmax", ["h"], ["p"], axis=1),
        helper.make_node("Mul", ["p", "v"], ["pv"]),
        helper.make_node("ReduceSum", ["pv", "axes"], ["r"], keepdims=1),
        helper.make_node("LogSoftmax", ["h"], ["ls"], axis=1),
        helper.make_node("Transpose", ["ls"], ["lt"], perm=[1, 0]),
        helper.make_node("ReduceMean", ["lt"], ["m"], axes=[0], keepdims=0),
        helper.make_node("Reshape", ["m", "shape"], ["mr"]),
        helper.make_node("Add", ["r", "mr"], ["y"])],
        {"x": randn(4, 3)}, (4, 1),
        {"w": randn(3, 5), "v": randn(5), "shape": np.array([4, 1], np.int64),
         "axes": np.array([1], np.int64)},
        "mse")
    # Softmax along a middle axis (softmax_grad's strided kernel).
    yield ("softmax_middle_axis", [
        helper.make_node("Mul", ["x", "w"], ["h"]),
        helper.make_node("Softmax", ["h"], ["p"], axis=1),
        helper.make_node("Mul", ["p", "v"], ["y"])],
        {"x": randn(2, 3, 4)}, (2, 3, 4),
        {"w": randn(3, 4), "v": randn(3, 4)},
        "mse")
    # A transformer's pieces: an embedding (rows picked twice), layer
    # norm, the Pow and Erf that opset 13 writes layer norm and Gelu with,
    # and a mask's Where.
    const = lambda name, value: helper.make_node(  # noqa: E731
        "Constant", [], [name], value=numpy_helper.from_array(value))
    yield ("embedding_layer_norm", [
        const("ids", np.array([[1, 4, 1], [0, 3, 4]], np.int64)),
        const("two", np.array(2.0, np.float32)),
        const("mask", np.array([[True, False, True, False]] * 3)),
        helper.make_node("Gather", ["table", "ids"], ["e"]),
        helper.make_node("Add", ["e", "pos"], ["h"]),
        helper.make_node("LayerNormalization", ["h", "g", "b"], ["n"],
                         epsilon=1e-3),
        helper.make_node("MatMul", ["n", "w"], ["m"]),
        helper.make_node("Mul", ["m", "x"], ["mx"]),
        helper.make_node("Pow", ["mx", "two"], ["p"]),
        helper.make_node("Erf", ["mx"], ["r"]),
        helper.make_node("Where", ["mask", "p", "r"], ["y"])],
        {"x": randn(2, 3, 4)}, (2, 3, 4),
        {"table": randn(5, 4), "pos": randn(3, 4, scale=0.1),
         "g": 1 + randn(4, scale=0.1), "b": randn(4, scale=0.1),
         "w": randn(4, 4, scale=0.5)}, "mse")
    # Gelu as exporters write it out, exact (opset 13's Erf) and tanh
    # (GPT-2's gelu_new, the cube a Pow): partc recognizes both before
    # differentiating (float32 formulas only), so gelu_grad and
    # gelu_tanh_grad are what is checked.
    f32 = lambda v: np.array(v, np.float32)  # noqa: E731
    yield ("gelu_formulas", [
        const("sqrt2", f32(np.sqrt(2.0))), const("one", f32(1.0)),
        const("half", f32(0.5)), const("three", f32(3.0)),
        const("cubic", f32(0.044715)), const("scale", f32(np.sqrt(2 / np.pi))),
        helper.make_node("Gemm", ["x", "w", "b"], ["h"]),
        helper.make_node("Div", ["h", "sqrt2"], ["hd"]),
        helper.make_node("Erf", ["hd"], ["he"]),
        helper.make_node("Add", ["he", "one"], ["h1"]),
        helper.make_node("Mul", ["h", "h1"], ["hm"]),
        helper.make_node("Mul", ["hm", "half"], ["g"]),
        helper.make_node("MatMul", ["g", "v"], ["k"]),
        helper.make_node("Mul", ["k", "half"], ["kh"]),
        helper.make_node("Pow", ["k", "three"], ["k3"]),
        helper.make_node("Mul", ["k3", "cubic"], ["kc"]),
        helper.make_node("Add", ["k", "kc"], ["ks"]),
        helper.make_node("Mul", ["ks", "scale"], ["kt"]),
        helper.make_node("Tanh", ["kt"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["t1"]),
        helper.make_node("Mul", ["kh", "t1"], ["y"])],
        {"x": randn(4, 3)}, (4, 5),
        {"w": randn(3, 6), "b": randn(6, scale=0.3), "v": randn(6, 5)},
        "mse")
    # Window ops and batch norm run in float32 only; their cases compare
    # partc with the float64 reference's backward pass at float32's
    # precision (the reference itself still meets finite differences).
    yield ("conv_bn_pool", [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g1", "be1", "m1", "v1"],
                         ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], strides=[2, 2],
                         pads=[0, 1, 1, 0], dilations=[1, 2], group=2),
        helper.make_node("AveragePool", ["c2"], ["a2"], kernel_shape=[2, 2],
                         pads=[1, 1, 0, 0], count_include_pad=0),
        # A 1x1 convolution padded at the end only (once read out of
        # bounds by the CPU kernel's pointwise shortcut).
        helper.make_node("Conv", ["a2", "w3"], ["c3"], pads=[0, 0, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c3"], ["gp"]),
        helper.make_node("Flatten", ["gp"], ["f"]),
        helper.make_node("Gemm", ["f", "wf"], ["y"], transB=1)],
        {"x": randn(2, 3, 9, 8)}, (2, 3),
        {"w1": randn(4, 3, 3, 3, scale=0.4), "b1": randn(4, scale=0.1),
         "g1": 1 + randn(4, scale=0.1), "be1": randn(4, scale=0.1),
         "m1": randn(4, scale=0.1), "v1": 1 + np.abs(randn(4)),
         "w2": randn(6, 2, 2, 3, scale=0.4), "w3": randn(5, 6, 1, 1, scale=0.4),
         "wf": randn(3, 5)}, "cross-entropy")
    yield ("residual_concat_slice", [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g1", "be1", "m1", "v1"],
                         ["n1"], epsilon=1e-3),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "x"], ["s"]),
        helper.make_node("Relu", ["s"], ["r2"]),
        helper.make_node("AveragePool", ["r2"], ["a"], kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1],
                         count_include_pad=1),
        helper.make_node("Concat", ["a", "e"], ["cat"], axis=1),
        helper.make_node("Slice", ["cat", "st", "en", "ax"], ["sl"]),
        helper.make_node("Expand", ["k", "kshape"], ["kx"]),
        helper.make_node("Mul", ["sl", "kx"], ["y"])],
        {"x": randn(2, 4, 6, 6)}, (2, 5, 3, 2),
        {"w1": randn(4, 4, 3, 3, scale=0.3), "g1": 1 + randn(4, scale=0.1),
         "be1": randn(4, scale=0.1), "m1": np.zeros(4), "v1": np.ones(4),
         "w2": randn(4, 4, 3, 3, scale=0.3), "e": randn(2, 3, 3, 3),
         "st": np.array([1, 1], np.int64), "en": np.array([6, 3], np.int64),
         "ax": np.array([1, 3], np.int64), "k": randn(1, 5, 1, 1),
         "kshape": np.array([2, 5, 3, 1], np.int64)}, "mse")
    # Strided slices: Swin's patch merging (the four phases of a 2x2 grid,
    # channels last, concatenated), then a slice read backwards with step
    # -2, so the gradient spreads, reverses and pads.
    big = np.iinfo(np.int64).max
    yield ("strided_slices", [
        helper.make_node("MatMul", ["x", "w0"], ["h"]),
    ] + [helper.make_node("Slice", ["h", f"st{k}", "en", "ax", "two"],
                          [f"p{k}"]) for k in range(4)] + [
        helper.make_node("Concat", ["p0", "p1", "p2", "p3"], ["cat"], axis=3),
        helper.make_node("Slice", ["cat", "rst", "ren", "rax", "rsp"], ["r"]),
        helper.make_node("MatMul", ["r", "w1"], ["y"])],
        {"x": randn(2, 4, 6, 3)}, (2, 2, 2, 4),
        {"w0": randn(3, 3), "w1": randn(12, 4),
         "st0": np.array([0, 0], np.int64), "st1": np.array([1, 0], np.int64),
         "st2": np.array([0, 1], np.int64), "st3": np.array([1, 1], np.int64),
         "en": np.array([big, big], np.int64),
         "ax": np.array([1, 2], np.int64), "two": np.array([2, 2], np.int64),
         "rst": np.array([-1, 2], np.int64),
         "ren": np.array([-big, -big], np.int64),
         "rax": np.array([1, 2], np.int64),
         "rsp": np.array([-1, -2], np.int64)}, "mse")
    # Gathers along the sequence axis: a class token's x[:, 0] (a scalar
    # index) and tokens picked by a list with a repeat and a negative
    # index, so their gradients scatter and add along axis 1.
    yield ("gather_tokens", [
        helper.make_node("MatMul", ["x", "w0"], ["h"]),
        helper.make_node("Gather", ["h", "first"], ["cls"], axis=1),
        helper.make_node("Gather", ["h", "picks"], ["tok"], axis=1),
        helper.make_node("ReduceMean", ["tok"], ["avg"], axes=[1], keepdims=0),
        helper.make_node("Add", ["cls", "avg"], ["s"]),
        helper.make_node("Gather", ["s", "cols"], ["c"], axis=-1),
        helper.make_node("MatMul", ["c", "w1"], ["y"])],
        {"x": randn(2, 5, 4)}, (2, 3),
        {"w0": randn(4, 4), "w1": randn(3, 3),
         "first": np.array(0, np.int64),
         "picks": np.array([-1, 2, 2], np.int64),
         "cols": np.array([3, 0, 3], np.int64)}, "mse")
    # Maxima and minima (PointNet's global max pool, a row's range): the
    # gradient goes to each extremum's element.
    yield ("reduce_extrema", [
        helper.make_node("MatMul", ["x", "w0"], ["h"]),
        helper.make_node("ReduceMin", ["h"], ["mn"], axes=[0], keepdims=1),
        helper.make_node("Sub", ["h", "mn"], ["s"]),
        helper.make_node("ReduceMax", ["s"], ["mx"], axes=[1], keepdims=1),
        helper.make_node("Mul", ["s", "mx"], ["t"]),
        helper.make_node("ReduceMax", ["t"], ["g"], axes=[0], keepdims=0),
        helper.make_node("Add", ["t", "g"], ["u"]),
        helper.make_node("MatMul", ["u", "w1"], ["y"])],
        {"x": randn(6, 4)}, (6, 3),
        {"w0": randn(4, 5), "w1": randn(5, 3)}, "mse")
    # The other activations and math ops, each on a linear layer's output
    # (kept away from their domains' edges), summed: Clip (ReLU6's
    # gradient, inside the bounds), the ReLU variants, MobileNet v3's hard
    # ones, Mish, trigonometry, the rounding ops (no gradient), Max and Min.
    act = [("Clip", ["h", "lo", "hi"], {}), ("LeakyRelu", ["h"], {"alpha": 0.1}),
           ("Elu", ["h"], {"alpha": 0.7}), ("Selu", ["h"], {}),
           ("Celu", ["h"], {"alpha": 1.3}),
           ("HardSigmoid", ["h"], {"alpha": 0.3, "beta": 0.4}),
           ("HardSwish", ["h"], {}), ("Mish", ["h"], {}),
           ("Softsign", ["h"], {}), ("Sin", ["h"], {}), ("Cos", ["h"], {}),
           ("Atan", ["h"], {}), ("Sinh", ["t"], {}), ("Cosh", ["t"], {}),
           ("Asinh", ["h"], {}), ("Tan", ["t"], {}), ("Asin", ["t"], {}),
           ("Acos", ["t"], {}), ("Atanh", ["t"], {}), ("Acosh", ["p"], {}),
           ("Reciprocal", ["p"], {}), ("Floor", ["h"], {}),
           ("Ceil", ["h"], {}), ("Round", ["h"], {}), ("Sign", ["h"], {}),
           ("Max", ["h", "t"], {}), ("Min", ["h", "t"], {})]
    def constant(name, value):
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(
            name, TensorProto.DOUBLE, [], [value]))
    nodes = [constant(n, v) for n, v in (("lo", -0.5), ("hi", 0.8),
                                         ("nine", 0.9), ("threehalves", 1.5))]
    nodes += [helper.make_node("MatMul", ["x", "w0"], ["h"]),
             helper.make_node("Tanh", ["h"], ["th"]),
             helper.make_node("Mul", ["th", "nine"], ["t"]),
             helper.make_node("Mul", ["h", "h"], ["hh"]),
             helper.make_node("Add", ["hh", "threehalves"], ["p"])]
    total = None
    for k, (op, operands, attrs) in enumerate(act):
        nodes.append(helper.make_node(op, operands, [f"a{k}"], **attrs))
        if total is not None:
            nodes.append(helper.make_node("Add", [total, f"a{k}"], [f"s{k}"]))
        total = f"s{k}" if total is not None else f"a{k}"
    nodes.append(helper.make_node("MatMul", [total, "w1"], ["y"]))
    yield ("activations_more", nodes, {"x": randn(6, 4)}, (6, 3),
           {"w0": randn(4, 8, scale=0.5), "w1": randn(8, 3, scale=0.3)},
           "mse")
    # Ops that pick, sort and accumulate along an axis: GatherElements
    # (a negative index, a repeat), TopK's values and CumSum both ways
    # (exclusive, reverse); each gradient adds back where its element came
    # from.
    yield ("gathers_sorts", [
        helper.make_node("MatMul", ["x", "w0"], ["h"]),
        helper.make_node("GatherElements", ["h", "idx"], ["ge"], axis=1),
        helper.make_node("TopK", ["h", "k"], ["tv", "ti"], axis=1),
        helper.make_node("CumSum", ["h", "one"], ["cs"], exclusive=1),
        helper.make_node("CumSum", ["cs", "zero"], ["cr"], reverse=1),
        helper.make_node("Concat", ["ge", "tv"], ["c"], axis=1),
        helper.make_node("MatMul", ["c", "w1"], ["p"]),
        helper.make_node("MatMul", ["cr", "w2"], ["q"]),
        helper.make_node("Add", ["p", "q"], ["y"])],
        {"x": randn(4, 6)}, (4, 3),
        {"w0": randn(6, 6), "w1": randn(5, 3), "w2": randn(6, 3, scale=0.3),
         "idx": np.array([[0, -1, 2], [5, 5, 1], [3, 0, -6], [2, 4, 4]],
                         np.int64),
         "k": np.array([2], np.int64), "one": np.array(1, np.int64),
         "zero": np.array(0, np.int64)}, "mse")
    # Products over an axis, of rows with no zero, one and two: the input
    # cancels the parameter exactly there, so the gradient reaches the
    # zeros (one zero: the product of the others; two: nothing). Then
    # Shrink and ThresholdedRelu.
    w = randn(4, 5, scale=0.8)
    x = randn(4, 5)
    for i, j in ((1, 2), (2, 0), (2, 3)):
        x[i, j] = -w[i, j]
    yield ("reduce_prod", [
        helper.make_node("Add", ["x", "w"], ["m"]),
        helper.make_node("ReduceProd", ["m"], ["p"], axes=[1], keepdims=1),
        helper.make_node("ReduceProd", ["m"], ["q"], axes=[0], keepdims=0),
        helper.make_node("Shrink", ["m"], ["s"], lambd=0.3, bias=0.1),
        helper.make_node("ThresholdedRelu", ["m"], ["t"], alpha=0.2),
        helper.make_node("Add", ["s", "t"], ["st"]),
        helper.make_node("Mul", ["st", "p"], ["sp"]),
        helper.make_node("Add", ["sp", "q"], ["u"]),
        helper.make_node("MatMul", ["u", "w1"], ["y"])],
        {"x": x}, (4, 2), {"w": w, "w1": randn(5, 2)}, "mse")
    # Resampling as U-Nets and FPNs do it (nearest x2, bilinear to a size,
    # align_corners, a nearest downsampling), RMSNormalization over the
    # last two dimensions with a broadcast scale, a global max pool.
    def scales(name, values):
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(
            name, TensorProto.DOUBLE, [4], values))
    yield ("resize_rms_norm", [
        scales("s2", [1, 1, 2, 2]), scales("s15", [1, 1, 1.5, 2]),
        helper.make_node("Mul", ["x", "w"], ["a"]),
        helper.make_node("Resize", ["a", "", "s2"], ["r0"], mode="nearest",
                         coordinate_transformation_mode="asymmetric",
                         nearest_mode="floor"),
        helper.make_node("Resize", ["a", "", "", "size67"], ["r1"],
                         mode="linear"),
        helper.make_node("Resize", ["a", "", "", "size36"], ["r2"],
                         mode="nearest", nearest_mode="round_prefer_ceil"),
        helper.make_node("Resize", ["a", "", "s15"], ["r3"], mode="linear",
                         coordinate_transformation_mode="align_corners"),
        helper.make_node("RMSNormalization", ["r0", "g"], ["n0"], axis=-2,
                         epsilon=1e-3),
        # (Opset 23's ReduceMean takes its axes as an input.)
        helper.make_node("GlobalAveragePool", ["n0"], ["g0"]),
        helper.make_node("GlobalAveragePool", ["r1"], ["g1"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g2"]),
        helper.make_node("GlobalMaxPool", ["r3"], ["g3"])] + [
        helper.make_node("Reshape", [f"g{i}", "rows"], [f"m{i}"])
        for i in range(4)] + [
        helper.make_node("Concat", ["m0", "m1", "m2", "m3"], ["c"], axis=1),
        helper.make_node("MatMul", ["c", "w1"], ["y"])],
        {"x": randn(2, 3, 4, 4)}, (2, 3),
        {"w": randn(1, 3, 1, 1), "g": randn(8), "w1": randn(12, 3),
         "size67": np.array([2, 3, 6, 7], np.int64),
         "size36": np.array([2, 3, 3, 6], np.int64),
         "rows": np.array([2, 3], np.int64)}, "mse")
    # Training-mode dropout: partc's counter-based mask, drawn again by
    # the backward pass (onnx_numpy.dropout_mask is the reference).
    yield ("dropout", [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
        helper.make_node("Constant", [], ["ratio"], value=helper.make_tensor(
            "ratio", TensorProto.FLOAT, [], [0.3])),
        helper.make_node("Constant", [], ["train"], value=helper.make_tensor(
            "train", TensorProto.BOOL, [], [True])),
        helper.make_node("Dropout", ["h", "ratio", "train"], ["d"]),
        helper.make_node("Tanh", ["d"], ["t"]),
        helper.make_node("Dropout", ["t", "ratio", "train"], ["t2"]),
        helper.make_node("Gemm", ["t2", "w2"], ["y"])],
        {"x": randn(6, 5)}, (6, 3),
        {"w1": randn(5, 12, scale=0.5), "b1": randn(12, scale=0.1),
         "w2": randn(12, 3, scale=0.5)}, "mse")
    # Attention's dropout of its probabilities: the softmax's gradient
    # reads the dropout's gradient through its mask (partc-fuse-dropout).
    yield ("softmax_dropout", [
        helper.make_node("Gemm", ["x", "w1"], ["h"]),
        helper.make_node("Softmax", ["h"], ["p"], axis=1),
        helper.make_node("Constant", [], ["ratio"], value=helper.make_tensor(
            "ratio", TensorProto.FLOAT, [], [0.3])),
        helper.make_node("Constant", [], ["train"], value=helper.make_tensor(
            "train", TensorProto.BOOL, [], [True])),
        helper.make_node("Dropout", ["p", "ratio", "train"], ["d"]),
        helper.make_node("Gemm", ["d", "w2"], ["y"])],
        {"x": randn(6, 5)}, (6, 3),
        {"w1": randn(5, 12, scale=0.5), "w2": randn(12, 3, scale=0.5)}, "mse")
    for loss in ("cross-entropy", "bce-with-logits"):
        yield ("loss_" + loss, [
            helper.make_node("Gemm", ["x", "w", "b"], ["y"])],
            {"x": randn(6, 4)}, (6, 3), {"w": randn(4, 3), "b": randn(3)}, loss)


def labels_for(loss, shape, dtype):
    if loss == "cross-entropy":
        return rng.integers(0, shape[-1], shape[:-1]).astype(np.int64)
    if loss == "bce-with-logits":
        return rng.uniform(0, 1, shape).astype(dtype)
    return randn(*shape).astype(dtype)


FLOAT32_CASES = {"conv_bn_pool", "residual_concat_slice",
                 "embedding_layer_norm", "gelu_formulas", "resize_rms_norm"}


def check_gradients():
    for name, nodes, inputs, out_shape, params, loss in gradient_cases():
        dtype = np.float32 if name in FLOAT32_CASES else np.float64
        # partc's precision: float64 cases meet 1e-6, float32 ones 1e-4.
        tolerance = 2e-4 if dtype == np.float32 else 1e-6
        path, model = make_model(name, nodes, list(inputs.items()), out_shape,
                                 params, dtype)
        plan = os.path.join(WORK, name + ".plan")
        run(f"{BIN}/partc", "compile", path, "-o", plan, "--train",
            "--loss", loss, "--optimizer", "none", "--quiet")
        labels = labels_for(loss, out_shape, dtype)
        feeds = {k: v.astype(dtype) for k, v in inputs.items()}
        args = input_args(name, feeds, labels)
        feeds = {k: v.astype(np.float64) for k, v in feeds.items()}
        labels = labels.astype(np.float64) if labels.dtype.kind == "f" \
            else labels
        out_dir = os.path.join(WORK, name + "_out")
        run(f"{BIN}/partc-run", plan, *args, *RUN_OPTIONS, "--quiet",
            "--output-dir", out_dir)
        plan_outputs = dict(onnx_outputs(out_dir))

        ref = Graph(model)

        def loss_at(p):
            values, _ = ref.run(feeds, p)
            return loss_and_grad(loss, values["y"], labels)[0]
        values, tape = ref.run(feeds)
        ref_loss, dy = loss_and_grad(loss, values["y"], labels)
        ref_grads = ref.backward(tape, {"y": dy})
        got_loss = plan_outputs.pop("loss")
        loss_tolerance = 1e-5 if dtype == np.float32 else 1e-9
        ok = abs(got_loss - ref_loss) <= loss_tolerance * max(1, abs(ref_loss))
        worst = 0.0
        running = running_statistics(model)
        names = [p for p in params if np.asarray(params[p]).dtype.kind == "f"
                 and p not in running]
        if sorted(plan_outputs) != sorted("grad." + n for n in names):
            report("gradients " + name, False,
                   f"outputs {sorted(plan_outputs)} for parameters {names}")
            continue
        for pname in names:
            got = plan_outputs["grad." + pname]
            base = {k: v.copy() for k, v in ref.params.items()}
            fd = np.zeros_like(base[pname])
            h = 1e-6
            for idx in np.ndindex(fd.shape):
                plus = {k: v.copy() for k, v in base.items()}
                minus = {k: v.copy() for k, v in base.items()}
                plus[pname][idx] += h
                minus[pname][idx] -= h
                fd[idx] = (loss_at(plus) - loss_at(minus)) / (2 * h)
            scale = max(1e-3, np.abs(fd).max())
            # The reference's backward pass meets finite differences...
            ref_err = np.abs(ref_grads[pname] - fd).max()
            # ...and partc meets both, at its precision.
            err = max(np.abs(got - fd).max(), np.abs(got - ref_grads[pname]).max())
            worst = max(worst, err / scale)
            ok = ok and err <= tolerance * scale and ref_err <= 1e-6 * scale
            if err > tolerance * scale or ref_err > 1e-6 * scale:
                print(f"  {pname}: partc {got.ravel()[:6]}, finite "
                      f"differences {fd.ravel()[:6]}")
        report("gradients " + name, ok,
               f"loss {got_loss:.6g} (ref {ref_loss:.6g}), {len(names)} "
               f"gradients, worst error {worst:.2e} of the largest")


def onnx_outputs(out_dir):
    i = 0
    while os.path.exists(os.path.join(out_dir, f"output_{i}.pb")):
        yield read_pb(os.path.join(out_dir, f"output_{i}.pb"))
        i += 1


def training_cases():
    w = lambda *s: randn(*s, scale=1 / np.sqrt(s[0]))  # noqa: E731
    yield ("mlp_mse_sgd_momentum", [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["a"]),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["y"])],
        {"x": randn(8, 16)}, (8, 4),
        {"w1": w(16, 32), "b1": randn(32, scale=0.1), "w2": w(32, 4),
         "b2": randn(4, scale=0.1)},
        "mse", dict(kind="sgd", lr=0.05, momentum=0.9, weight_decay=1e-4))
    # Chainer's MNIST example: 784-1000-1000-10, ReLU, softmax cross-entropy,
    # SGD with momentum (linear layers as PyTorch exports them for 3-D
    # inputs: MatMul and Add).
    yield ("chainer_mlp_cross_entropy", [
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["a1"]),
        helper.make_node("MatMul", ["a1", "w2"], ["m2"]),
        helper.make_node("Add", ["m2", "b2"], ["h2"]),
        helper.make_node("Relu", ["h2"], ["a2"]),
        helper.make_node("MatMul", ["a2", "w3"], ["m3"]),
        helper.make_node("Add", ["m3", "b3"], ["y"])],
        {"x": rng.uniform(0, 1, (32, 784))}, (32, 10),
        {"w1": w(784, 1000), "b1": np.zeros(1000), "w2": w(1000, 1000),
         "b2": np.zeros(1000), "w3": w(1000, 10), "b3": np.zeros(10)},
        "cross-entropy", dict(kind="sgd", lr=0.05, momentum=0.9))
    yield ("tanh_bce_adamw", [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
        helper.make_node("Tanh", ["h"], ["t"]),
        helper.make_node("Gemm", ["t", "w2", "b2"], ["u"]),
        helper.make_node("Sigmoid", ["u"], ["s"]),
        helper.make_node("Mul", ["s", "k"], ["y"])],
        {"x": randn(8, 12)}, (8, 3),
        {"w1": w(20, 12), "b1": randn(20, scale=0.1), "w2": w(20, 3),
         "b2": randn(3, scale=0.1), "k": np.full((1, 3), 3.0)},
        "bce-with-logits", dict(kind="adamw", lr=0.01))
    yield ("mlp_l1_adamw_decay", [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["a"]),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["y"])],
        {"x": randn(8, 6)}, (8, 2),
        {"w1": w(6, 16), "b1": randn(16, scale=0.1), "w2": w(16, 2),
         "b2": randn(2, scale=0.1)},
        "l1", dict(kind="adamw", lr=0.005, weight_decay=0.1,
                   betas=(0.8, 0.99), eps=1e-6))

    # A tied output head of 1,030 classes (GPT-2's is 50,257): partc pads
    # the product to 1,056 columns and the loss reads the padded logits in
    # place (its gradient zero in the padding).
    yield ("tied_head_cross_entropy", [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["a"]),
        helper.make_node("Transpose", ["e"], ["et"], perm=[1, 0]),
        helper.make_node("MatMul", ["a", "et"], ["y"])],
        {"x": randn(8, 12)}, (8, 1030),
        {"w1": w(12, 16), "b1": randn(16, scale=0.1), "e": w(1030, 16)},
        "cross-entropy", dict(kind="adamw", lr=0.01))

    # Dropout draws a new mask each step from the step counter that AdamW
    # also reads.
    ratio = helper.make_tensor("ratio", TensorProto.FLOAT, [], [0.25])
    train = helper.make_tensor("train", TensorProto.BOOL, [], [True])
    yield ("mlp_dropout_adamw", [
        helper.make_node("Constant", [], ["ratio"], value=ratio),
        helper.make_node("Constant", [], ["train"], value=train),
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["a"]),
        helper.make_node("Dropout", ["a", "ratio", "train"], ["d"]),
        helper.make_node("Gemm", ["d", "w2", "b2"], ["y"])],
        {"x": randn(16, 10)}, (16, 5),
        {"w1": w(10, 64), "b1": randn(64, scale=0.1), "w2": w(64, 5),
         "b2": randn(5, scale=0.1)},
        "cross-entropy", dict(kind="adamw", lr=0.01, seed=5))

    # A residual network in miniature, as torchvision's ResNet exports it:
    # convolutions without bias, batch norm in training mode (its running
    # statistics are checked too), max pooling, global average pooling.
    yield ("resnet_block_sgd", [
        helper.make_node("Conv", ["x", "w0"], ["c0"], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c0", "g0", "b0", "m0", "v0"],
                         ["n0"]),
        helper.make_node("Relu", ["n0"], ["r0"]),
        helper.make_node("MaxPool", ["r0"], ["p0"], kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["p0", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g1", "b1", "m1", "v1"],
                         ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2", "g2", "b2", "m2", "v2"],
                         ["n2"]),
        helper.make_node("Add", ["n2", "p0"], ["s"]),
        helper.make_node("Relu", ["s"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["gp"]),
        helper.make_node("Flatten", ["gp"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)],
        {"x": randn(8, 3, 16, 16)}, (8, 10),
        dict({"w0": randn(8, 3, 3, 3, scale=0.3),
              "w1": randn(8, 8, 3, 3, scale=0.15),
              "w2": randn(8, 8, 3, 3, scale=0.15),
              "wf": randn(10, 8, scale=0.3), "bf": np.zeros(10)},
             **{f"{k}{i}": v for i in range(3) for k, v in
                (("g", np.ones(8)), ("b", np.zeros(8)), ("m", np.zeros(8)),
                 ("v", np.ones(8)))}),
        "cross-entropy", dict(kind="sgd", lr=0.1, momentum=0.9,
                              weight_decay=1e-4))


def check_training(steps=20):
    for name, nodes, inputs, out_shape, params, loss, opt in training_cases():
        # partc-run --seed: the run's dropout seed.
        seed = opt.pop("seed", None)
        seed_args = ["--seed", str(seed)] if seed is not None else []
        path, model = make_model(name, nodes, list(inputs.items()), out_shape,
                                 params, np.float32)
        plan = os.path.join(WORK, name + ".plan")
        flags = ["--optimizer", opt["kind"], "--lr", str(opt["lr"])]
        if opt.get("momentum"):
            flags += ["--momentum", str(opt["momentum"])]
        if "weight_decay" in opt:
            flags += ["--weight-decay", str(opt["weight_decay"])]
        if "betas" in opt:
            flags += ["--betas", "%r,%r" % opt["betas"]]
        if "eps" in opt:
            flags += ["--eps", str(opt["eps"])]
        run(f"{BIN}/partc", "compile", path, "-o", plan, "--train", "--loss",
            loss, *flags, "--quiet")
        labels = labels_for(loss, out_shape, np.float32)
        feeds = {k: v.astype(np.float32) for k, v in inputs.items()}
        args = input_args(name, feeds, labels)
        state = os.path.join(WORK, name + "_state")
        trained_model = os.path.join(WORK, name + "_trained.onnx")
        out = run(f"{BIN}/partc-run", plan, *args, *RUN_OPTIONS, "--steps",
                  str(steps), "--save-state", state, "--save-onnx",
                  trained_model, "--quiet", *seed_args)
        got = [float(line.split()[3]) for line in out.splitlines()
               if line.startswith("step ")]
        if seed is not None:
            # Resuming from the state of step 10 continues the same run: the
            # step counter and the seed are state too.
            half = os.path.join(WORK, name + "_half")
            run(f"{BIN}/partc-run", plan, *args, *RUN_OPTIONS, "--steps",
                str(steps // 2), "--save-state", half, "--quiet", *seed_args)
            rest = run(f"{BIN}/partc-run", plan, *args, *RUN_OPTIONS,
                       "--steps", str(steps - steps // 2), "--load-state",
                       half, "--quiet")
            resumed = [float(line.split()[3]) for line in rest.splitlines()
                       if line.startswith("step ")]
            # Equal on the CPU; on a GPU a library may pick another
            # algorithm at each load (cuBLAS times them), so within 1e-5.
            if len(resumed) != steps - steps // 2 or any(
                    abs(r - g) > 1e-5 * max(abs(g), 1e-3)
                    for r, g in zip(resumed, got[steps // 2:])):
                report("train " + name, False,
                       f"resumed losses {resumed[:3]} differ from the run's "
                       f"{got[steps // 2:steps // 2 + 3]}")
                continue

        ref = Graph(model)
        if seed is not None:
            ref.seed = seed
        ref.params = {k: np.asarray(numpy_helper.to_array(t), np.float64)
                      for k, t in ((t.name, t) for t in model.graph.initializer)}
        optimizer = Optimizer(**opt)
        want = []
        for step in range(steps):
            ref.step = step
            values, tape = ref.run(feeds)
            l, dy = loss_and_grad(loss, values["y"], labels)
            want.append(l)
            grads = ref.backward(tape, {"y": dy})
            optimizer.step(ref.params, grads)
            # PyTorch's BatchNorm momentum 0.1, after the step as in torch.
            for stat in running_statistics(model):
                ref.params[stat] = 0.9 * ref.params[stat] + \
                    0.1 * batch_statistics[stat]
        loss_err = max(abs(g - w) / max(abs(w), 1e-3) for g, w in zip(got, want))
        weight_err = 0.0
        for pname, p in ref.params.items():
            trained = np.load(os.path.join(state, pname + ".npy"))
            weight_err = max(weight_err, np.abs(trained - p).max())
        exported = saved_model_problems(trained_model, model, state)
        ok = (len(got) == steps and loss_err <= 1e-4 and weight_err <= 1e-4
              and not exported)
        report("train " + name, ok,
               f"loss {want[0]:.5g} -> {want[-1]:.5g} in {steps} steps, worst "
               f"loss error {loss_err:.1e} (relative), weights {weight_err:.1e}"
               + "".join(f"; {e}" for e in exported))


def saved_model_problems(path, original, state):
    """--save-onnx's model against the original and the saved state: a valid
    ONNX model with the same nodes, every initializer the trained value
    (parameters and running statistics) or, if not trained, the original."""
    problems = []
    saved = onnx.load(path)
    onnx.checker.check_model(saved)
    if [n.SerializeToString() for n in saved.graph.node] != \
            [n.SerializeToString() for n in original.graph.node]:
        problems.append("--save-onnx changed the nodes")
    before = {t.name: numpy_helper.to_array(t)
              for t in original.graph.initializer}
    after = {t.name: numpy_helper.to_array(t) for t in saved.graph.initializer}
    if sorted(before) != sorted(after):
        problems.append(f"--save-onnx's initializers {sorted(after)} are not "
                        f"the model's {sorted(before)}")
    for name, value in after.items():
        npy = os.path.join(state, name + ".npy")
        want = np.load(npy) if os.path.exists(npy) else before.get(name)
        if want is None or value.dtype != want.dtype or \
                not np.array_equal(value, want):
            problems.append(f"--save-onnx's '{name}' is not the trained value")
    return problems


def sample_permutation(n, seed, epoch):
    """partc-run --shuffle's order (runtime/io/Dataset.cpp): Fisher-Yates
    over splitmix64 seeded with seed ^ (epoch * 0xd1b54a32d192ed03)."""
    mask = (1 << 64) - 1
    state = (seed ^ (epoch * 0xD1B54A32D192ED03)) & mask
    order = list(range(n))
    for i in range(n, 1, -1):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        j = z % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def check_data(batch=8, batches=4, epochs=3, seed=11):
    """partc-run --data: batches walked from files, shuffled per epoch, for
    --epochs, against the reference walking the same order; each epoch's
    mean loss; then the trained model saved with --save-onnx, compiled for
    inference and run, against the reference's forward pass."""
    name = "mlp_data_epochs"
    w = lambda *s: randn(*s, scale=1 / np.sqrt(s[0]))  # noqa: E731
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
             helper.make_node("Relu", ["h"], ["a"]),
             helper.make_node("Gemm", ["a", "w2", "b2"], ["y"])]
    params = {"w1": w(6, 16), "b1": randn(16, scale=0.1), "w2": w(16, 3),
              "b2": randn(3, scale=0.1)}
    path, model = make_model(name, nodes, [("x", np.zeros((batch, 6)))],
                             (batch, 3), params, np.float32)
    samples = batch * batches
    x = randn(samples, 6).astype(np.float32)
    labels = rng.integers(0, 3, samples).astype(np.int64)
    data = os.path.join(WORK, name + "_data")
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "x.npy"), x)
    np.save(os.path.join(data, "labels.npy"), labels)
    plan = os.path.join(WORK, name + ".plan")
    run(f"{BIN}/partc", "compile", path, "-o", plan, "--train", "--loss",
        "cross-entropy", "--optimizer", "sgd", "--lr", "0.1", "--momentum",
        "0.9", "--batch", str(batch), "--quiet")
    state = os.path.join(WORK, name + "_state")
    trained_model = os.path.join(WORK, name + "_trained.onnx")
    out = run(f"{BIN}/partc-run", plan, "--data", data, "--epochs",
              str(epochs), "--shuffle", "--seed", str(seed), "--save-state",
              state, "--save-onnx", trained_model, "--quiet", *RUN_OPTIONS)
    lines = out.splitlines()
    got = [float(line.split()[3]) for line in lines if line.startswith("step ")]
    got_epochs = [float(line.split()[4]) for line in lines
                  if line.startswith("epoch ")]

    ref = Graph(model)
    ref.params = {k: np.asarray(numpy_helper.to_array(t), np.float64)
                  for k, t in ((t.name, t) for t in model.graph.initializer)}
    optimizer = Optimizer(kind="sgd", lr=0.1, momentum=0.9)
    want, want_epochs = [], []
    for epoch in range(epochs):
        order = sample_permutation(samples, seed, epoch)
        for b in range(batches):
            rows = order[b * batch:(b + 1) * batch]
            values, tape = ref.run({"x": x[rows]})
            l, dy = loss_and_grad("cross-entropy", values["y"], labels[rows])
            want.append(l)
            optimizer.step(ref.params, ref.backward(tape, {"y": dy}))
        want_epochs.append(np.mean(want[-batches:]))
    problems = []
    if len(got) != epochs * batches or len(got_epochs) != epochs:
        problems.append(f"{len(got)} step and {len(got_epochs)} epoch lines")
    loss_err = max([abs(g - w) / max(abs(w), 1e-3)
                    for g, w in zip(got + got_epochs, want + want_epochs)]
                   or [1.0])
    weight_err = max(np.abs(np.load(os.path.join(state, k + ".npy")) - v).max()
                     for k, v in ref.params.items())
    problems += saved_model_problems(trained_model, model, state)
    # The saved model, compiled for inference, gives the trained network's
    # outputs.
    infer = os.path.join(WORK, name + "_trained.plan")
    run(f"{BIN}/partc", "compile", trained_model, "-o", infer, "--batch",
        str(batch), "--quiet")
    out_dir = os.path.join(WORK, name + "_outputs")
    run(f"{BIN}/partc-run", infer, "--input",
        f"x={save(name + '_x0', x[:batch])}", "--output-dir", out_dir,
        "--quiet", *RUN_OPTIONS)
    outputs = dict(onnx_outputs(out_dir))
    want_y = ref.run({"x": x[:batch]})[0]["y"]
    output_err = np.abs(outputs["y"] - want_y).max() / np.abs(want_y).max()
    ok = (not problems and loss_err <= 1e-4 and weight_err <= 1e-4
          and output_err <= 1e-5)
    report("train " + name, ok,
           f"{epochs} shuffled epochs of {batches} batches, worst loss error "
           f"{loss_err:.1e} (relative, steps and epoch means), weights "
           f"{weight_err:.1e}, saved model's outputs {output_err:.1e}"
           + "".join(f"; {p}" for p in problems))


def float32_case(name, nodes, inputs, out_shape, params, loss, opt):
    """A training case as float32 files: the model's path, partc-run's
    input options and partc compile's optimizer options."""
    path, _ = make_model(name, nodes, list(inputs.items()), out_shape,
                         params, np.float32)
    labels = labels_for(loss, out_shape, np.float32)
    feeds = {k: v.astype(np.float32) for k, v in inputs.items()}
    return path, input_args(name, feeds, labels), optimizer_flags(opt)


def optimizer_flags(opt):
    """partc compile's optimizer options for a training case's `opt`."""
    flags = ["--optimizer", opt["kind"], "--lr", str(opt["lr"])]
    if opt.get("momentum"):
        flags += ["--momentum", str(opt["momentum"])]
    if "weight_decay" in opt:
        flags += ["--weight-decay", str(opt["weight_decay"])]
    return flags


def run_steps(plan, args, steps, state, extra=()):
    """`steps` steps of `plan`: every step's loss and the saved states."""
    out = run(f"{BIN}/partc-run", plan, *args, *RUN_OPTIONS, *extra,
              "--steps", str(steps), "--save-state", state, "--quiet")
    losses = [float(line.split()[3]) for line in out.splitlines()
              if line.startswith("step ")]
    states = {f: np.load(os.path.join(state, f))
              for f in sorted(os.listdir(state)) if f.endswith(".npy")}
    return losses, states


def check_layouts(steps=10):
    """The training cases with convolutions, pooling or batch norm, trained
    channels last (the default) and in the model's layout (--layout nchw):
    every step's loss and every final state the same within 1e-6."""
    window_ops = {"Conv", "MaxPool", "AveragePool", "BatchNormalization"}
    for name, nodes, inputs, out_shape, params, loss, opt in training_cases():
        if not window_ops & {n.op_type for n in nodes}:
            continue
        opt.pop("seed", None)
        path, args, flags = float32_case(name, nodes, inputs, out_shape,
                                         params, loss, opt)
        results = {}
        for layout in ("nhwc", "nchw"):
            plan = os.path.join(WORK, f"{name}_{layout}.plan")
            state = os.path.join(WORK, f"{name}_{layout}_state")
            run(f"{BIN}/partc", "compile", path, "-o", plan, "--train",
                "--loss", loss, *flags, "--layout", layout, "--quiet")
            results[layout] = run_steps(plan, args, steps, state)
        (last_l, last_s), (first_l, first_s) = results["nhwc"], results["nchw"]
        loss_err = max(abs(a - b) / max(abs(b), 1e-3)
                       for a, b in zip(last_l, first_l))
        state_err = max(
            float(np.abs(last_s[k] - first_s[k]).max() /
                  max(np.abs(first_s[k]).max(), 1e-6))
            for k in first_s)
        # The CPU runs the same kernels between permutations; a GPU runs
        # other cuDNN algorithms in each layout.
        tolerance = 1e-4 if "cuda" in RUN_OPTIONS else 1e-6
        ok = (len(last_l) == len(first_l) == steps and
              last_s.keys() == first_s.keys() and loss_err <= tolerance and
              state_err <= tolerance)
        report("layouts " + name, ok,
               f"{steps} steps channels last against channels first: losses "
               f"within {loss_err:.1e}, {len(first_s)} states within "
               f"{state_err:.1e} (relative)")


def check_recompute(steps=10):
    """Every training case with its activations kept and with all of them
    that can be computed again in the backward pass (--recompute all): the
    same losses and final states within 1e-6 (the same kernels on the same
    values), fewer bytes kept, and at least one value recomputed where a
    nonlinear op's output is kept."""
    import json
    for name, nodes, inputs, out_shape, params, loss, opt in training_cases():
        seed = opt.pop("seed", None)
        seed_args = ["--seed", str(seed)] if seed is not None else []
        path, args, flags = float32_case(name, nodes, inputs, out_shape,
                                         params, loss, opt)
        results = {}
        for mode in ("none", "all"):
            plan = os.path.join(WORK, f"{name}_recompute_{mode}.plan")
            state = os.path.join(WORK, f"{name}_recompute_{mode}_state")
            explain = json.loads(run(
                f"{BIN}/partc", "compile", path, "-o", plan, "--train",
                "--loss", loss, *flags, "--recompute", mode,
                "--explain=json"))["training"]
            losses, states = run_steps(plan, args, steps, state, seed_args)
            memory = explain["memory_bytes"][0]
            total = sum(memory[k] for k in ("parameters", "optimizer_state",
                                            "other_state", "constants",
                                            "arena"))
            results[mode] = (losses, states, memory["kept_activations"],
                             explain["recomputed"], total)
        (kept_l, kept_s, kept_b, _, kept_t), (re_l, re_s, re_b, what, re_t) = (
            results["none"], results["all"])
        # By default (--recompute auto) a device between the two needs
        # gets a plan that recomputes just enough.
        fits = "no smaller need"
        if re_t < kept_t:
            topology = os.path.join(WORK, f"{name}_between.json")
            with open(topology, "w") as f:
                json.dump({"devices": [{"preset": "h200", "memory_gib":
                                        (re_t + kept_t) / 2 / 2**30}]}, f)
            plan = os.path.join(WORK, f"{name}_recompute_auto.plan")
            auto = json.loads(run(
                f"{BIN}/partc", "compile", path, "-o", plan, "--train",
                "--loss", loss, *flags, "--topology", topology,
                "--explain=json"))["training"]
            out = run(f"{BIN}/partc-run", plan, *args, *RUN_OPTIONS,
                      *seed_args, "--steps", str(steps), "--quiet")
            auto_l = [float(line.split()[3]) for line in out.splitlines()
                      if line.startswith("step ")]
            fits = (f"fits {(re_t + kept_t) // 2} bytes with "
                    f"{auto['recomputed'].split(' ')[0]} recomputed")
            auto_err = max(abs(a - b) / max(abs(b), 1e-3)
                           for a, b in zip(auto_l, kept_l))
            if (not auto["recomputed"] or len(auto_l) != steps or
                    auto_err > (1e-4 if "cuda" in RUN_OPTIONS else 0)):
                fits = "FAILED to fit between: " + auto["recomputed"]
        loss_err = max(abs(a - b) / max(abs(b), 1e-3)
                       for a, b in zip(re_l, kept_l))
        state_err = max(
            float(np.abs(re_s[k] - kept_s[k]).max() /
                  max(np.abs(kept_s[k]).max(), 1e-6))
            for k in kept_s)
        count = int(what.split()[0]) if what else 0
        tolerance = 1e-4 if "cuda" in RUN_OPTIONS else 1e-6
        ok = (len(re_l) == len(kept_l) == steps and
              re_s.keys() == kept_s.keys() and loss_err <= tolerance and
              state_err <= tolerance and count > 0 and re_b < kept_b and
              not fits.startswith("FAILED"))
        report("recompute " + name, ok,
               f"{count} value(s) recomputed, kept {kept_b} -> {re_b} bytes, "
               f"{fits}; "
               f"{steps} steps: losses within {loss_err:.1e}, "
               f"{len(kept_s)} states within {state_err:.1e} (relative)")


if MODE == "gradients":
    check_gradients()
elif MODE == "train":
    check_training()
    check_data()
elif MODE == "layouts":
    check_layouts()
elif MODE == "recompute":
    check_recompute()
else:
    sys.exit("mode must be gradients, train, layouts or recompute")
if failures:
    print(f"{len(failures)} case(s) failed: " + ", ".join(failures))
    sys.exit(1)
print("all passed")
