#!/usr/bin/env python3
"""Writes an ONNX model of one attention layer's core, as BERT exports it,
for timing graph.attention alone (partc-run --profile, Nsight
Compute): q, k and v [batch, seq, heads * dim] are split into heads,
scores = q k^T * scale + bias, softmax, then p v with the heads merged back.
The bias is an input [batch, 1, 1, seq], BERT's padding mask (the same for
every query). With --causal the bias is GPT-2's instead: a boolean
padding mask [batch, 1, 1, seq] and-ed with the lower triangle, as
where(mask, 0, -inf), which partc-fuse-attention proves causal.
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(batch, seq, heads, dim, causal=False):
    width = heads * dim
    nodes, inits = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    split = const("split_shape", np.array([batch, seq, heads, dim], np.int64))
    merged = const("merged_shape", np.array([batch, seq, width], np.int64))
    for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]),
                       ("v", [0, 2, 1, 3])):
        nodes.append(helper.make_node("Reshape", [name, split], [name + "_4d"]))
        nodes.append(helper.make_node("Transpose", [name + "_4d"],
                                      [name + "_heads"], perm=perm))
    nodes.append(helper.make_node("MatMul", ["q_heads", "k_heads"], ["qk"]))
    scale = const("scale", np.array(1.0 / np.sqrt(dim), np.float32))
    nodes.append(helper.make_node("Mul", ["qk", scale], ["scaled"]))
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT,
                                            [batch, seq, width])
              for n in ("q", "k", "v")]
    if causal:
        inputs.append(helper.make_tensor_value_info(
            "keep", TensorProto.BOOL, [batch, 1, 1, seq]))
        const("triangle", np.tril(np.ones((1, 1, seq, seq), bool)))
        const("zero", np.array(0.0, np.float32))
        const("ninf", np.array(-np.inf, np.float32))
        nodes.append(helper.make_node("And", ["triangle", "keep"], ["seen"]))
        nodes.append(helper.make_node("Where", ["seen", "zero", "ninf"],
                                      ["bias"]))
    else:
        inputs.append(helper.make_tensor_value_info(
            "bias", TensorProto.FLOAT, [batch, 1, 1, seq]))
    nodes.append(helper.make_node("Add", ["scaled", "bias"], ["masked"]))
    nodes.append(helper.make_node("Softmax", ["masked"], ["probs"], axis=-1))
    nodes.append(helper.make_node("MatMul", ["probs", "v_heads"], ["context"]))
    nodes.append(helper.make_node("Transpose", ["context"], ["context_t"],
                                  perm=[0, 2, 1, 3]))
    nodes.append(helper.make_node("Reshape", ["context_t", merged], ["out"]))
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT,
                                        [batch, seq, width])
    graph = helper.make_graph(nodes, "attention", inputs, [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=384)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--causal", action="store_true")
    a = ap.parse_args()
    onnx.save(build(a.batch, a.seq, a.heads, a.dim, a.causal), a.out)


if __name__ == "__main__":
    main()
