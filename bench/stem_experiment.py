#!/usr/bin/env python3
"""ResNet-50's stem convolution as it is and rewritten space-to-depth.

The 7x7, stride-2 convolution over 3 input channels runs at a tenth of the
other convolutions' rate (3 channels fill tensor cores badly). The same
result comes from padding the input, moving each 2x2 block of pixels into
channels (12 of them) and running a 4x4, stride-1 convolution whose filter
holds the 7x7 one (zero where the 8x8 block passes it). This script builds
both as ONNX models, checks on the CPU backend that they agree, and times
their kernels on the GPU with partc-run --profile (and PyTorch's
channels_last convolution beside them). A benchmark, never a test.
"""
import argparse
import json
import os
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def sh(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    return p.stdout + p.stderr


def space_to_depth_filter(w):
    """[K, C, 7, 7] stride 2 -> [K, 4 C, 4, 4] stride 1 over 2x2 blocks."""
    k, c = w.shape[:2]
    out = np.zeros((k, 4 * c, 4, 4), np.float32)
    for dy in range(2):
        for dx in range(2):
            for by in range(4):
                for bx in range(4):
                    y, x = 2 * by + dy, 2 * bx + dx
                    if y < 7 and x < 7:
                        out[:, (dy * 2 + dx) * c:(dy * 2 + dx + 1) * c, by, bx] = w[:, :, y, x]
    return out


def models(work):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((64, 3, 7, 7)) * 0.1).astype(np.float32)
    b = (rng.standard_normal(64) * 0.1).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 224, 224])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64, 112, 112])
    plain = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[7, 7],
                          pads=[3, 3, 3, 3], strides=[2, 2]),
         helper.make_node("Relu", ["c"], ["y"])], "stem", [x], [y],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)
    s2d = helper.make_graph(
        [helper.make_node("Pad", ["x", "pads"], ["p"]),
         helper.make_node("Reshape", ["p", "blocks"], ["r"]),
         helper.make_node("Transpose", ["r"], ["t"], perm=[0, 3, 5, 1, 2, 4]),
         helper.make_node("Reshape", ["t", "depth"], ["d"]),
         helper.make_node("Conv", ["d", "w4", "b"], ["c"], kernel_shape=[4, 4]),
         helper.make_node("Relu", ["c"], ["y"])], "stem_s2d", [x], [y],
        [numpy_helper.from_array(space_to_depth_filter(w), "w4"),
         numpy_helper.from_array(b, "b"),
         i64("pads", [0, 0, 3, 3, 0, 0, 3, 3]),
         i64("blocks", [-1, 3, 115, 2, 115, 2]),
         i64("depth", [-1, 12, 115, 115])])
    paths = {}
    for name, graph in (("stem", plain), ("stem_s2d", s2d)):
        paths[name] = os.path.join(work, name + ".onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
                  paths[name])
    return paths


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--cpu-only", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    paths = models(args.work)
    partc = os.path.join(args.bin, "partc")
    run = os.path.join(args.bin, "partc-run")

    # The rewrite gives the same numbers (CPU backend, batch 2).
    data = os.path.join(args.work, "in")
    os.makedirs(data, exist_ok=True)
    x = np.random.default_rng(1).standard_normal((2, 3, 224, 224)).astype(np.float32)
    with open(os.path.join(data, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    outs = {}
    for name, path in paths.items():
        plan = os.path.join(args.work, name + "_2.plan")
        sh([partc, "compile", path, "-o", plan, "--batch", "2", "--quiet"])
        out = os.path.join(args.work, "out_" + name)
        sh([run, plan, "--backend", "cpu", "--input", "x=" + os.path.join(data, "input_0.pb"),
            "--output-dir", out, "--quiet"])
        t = onnx.TensorProto()
        with open(os.path.join(out, "output_0.pb"), "rb") as f:
            t.ParseFromString(f.read())
        outs[name] = numpy_helper.to_array(t)
    diff = np.abs(outs["stem"] - outs["stem_s2d"]).max() / np.abs(outs["stem"]).max()
    print("CPU: space-to-depth against plain, max relative difference %.1e" % diff, flush=True)
    if args.cpu_only:
        return

    for batch in (64, 16):
        for name, path in paths.items():
            plan = os.path.join(args.work, "%s_%d.plan" % (name, batch))
            sh([partc, "compile", path, "-o", plan, "--batch", str(batch), "--quiet"])
            table = os.path.join(args.work, "profile_%s_%d.json" % (name, batch))
            out = sh([run, plan, "--backend", "cuda", "--warmup", "3", "--iterations", "20",
                      "--profile", table, "--keep-inputs", "--quiet"])
            with open(table) as f:
                kernels = json.load(f)["kernels"]
            parts = ", ".join("%s %.1f us" % (k["signature"].split("(")[0], k["seconds"] * 1e6)
                              for k in kernels)
            streamed = sh([run, plan, "--backend", "cuda", "--keep-inputs", "--stream",
                           "--iterations", "200", "--warmup", "10", "--quiet"])
            per = [l for l in streamed.splitlines() if "ms per batch" in l]
            print("batch %d %s: %s; %s" % (batch, name, parts, per[0] if per else "?"),
                  flush=True)
    try:
        import torch
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
        conv = torch.nn.Conv2d(3, 64, 7, 2, 3).cuda().to(memory_format=torch.channels_last)
        for batch in (64, 16):
            xt = torch.randn(batch, 3, 224, 224, device="cuda").to(
                memory_format=torch.channels_last)
            with torch.no_grad():
                for _ in range(10):
                    conv(xt)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(True), torch.cuda.Event(True)
                start.record()
                for _ in range(100):
                    conv(xt)
                end.record()
                end.synchronize()
            print("batch %d PyTorch channels_last conv: %.1f us" %
                  (batch, start.elapsed_time(end) * 10), flush=True)
    except ImportError:
        pass


if __name__ == "__main__":
    main()
