#!/usr/bin/env python3
"""Transformer encoder inference: partc against PyTorch eager, one run.

A BERT-base-sized pre-norm encoder (test/models/run_models.py's Encoder:
12 layers, width 768, 12 heads, feed-forward 3072, 128 tokens; random
weights, seeded) is exported to ONNX (opset 17, so Gelu arrives as
div/erf/add/mul/mul) and timed as partc plans for 1 and 2 GPUs and as
PyTorch eager, fp32 with TF32 allowed on both sides. With --model torch,
PyTorch's own nn.TransformerEncoder of the same size instead (post-norm,
ReLU, batch first; eager runs its fused fast path), whose exported attention
moves the batch into dimension 1. Prints a markdown table; never a test
(figures go to docs/benchmarks.md).
"""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys

import numpy as np
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def load_encoder():
    path = os.path.join(HERE, "..", "test", "models", "run_models.py")
    spec = importlib.util.spec_from_file_location("run_models", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Encoder


def sh(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    return p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--model", choices=["custom", "torch"], default="custom")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.manual_seed(0)
    seq = 128
    if args.model == "torch":
        net = torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072,
                                             dropout=0.0, batch_first=True),
            num_layers=12, enable_nested_tensor=False).eval()
        tokens = torch.randn(args.batch, seq, 768)
    else:
        net = load_encoder()(vocab=1000, d=768, heads=12, ff=3072, layers=12,
                             seq=seq).eval()
        tokens = torch.randint(0, 1000, (args.batch, seq))
    model = os.path.join(args.work, "encoder.onnx")
    kw = dict(opset_version=17, input_names=["input"], output_names=["output"],
              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    try:
        # Newer PyTorch defaults to the dynamo exporter; keep TorchScript's.
        torch.onnx.export(net, tokens, model, dynamo=False, **kw)
    except TypeError:
        torch.onnx.export(net, tokens, model, **kw)
    data = os.path.join(args.work, "data")
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(tokens.numpy(), "input").SerializeToString())

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    gpu = net.cuda()
    x = tokens.cuda()
    with torch.no_grad():
        ref = gpu(x).float().cpu().numpy()
        for _ in range(5):
            gpu(x)
        torch.cuda.synchronize()

    def time_eager():
        start, end = torch.cuda.Event(True), torch.cuda.Event(True)
        times = []
        with torch.no_grad():
            for _ in range(args.iterations):
                start.record()
                gpu(x)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
        return sorted(times)[len(times) // 2]

    # Eager is bound by host-side launches and varies between lent hosts;
    # it is timed before and after partc, and the faster median is used.
    eager_before = time_eager()
    rows = []

    configs = [("partc", 1, []),
               ("partc, no element-wise fusion", 1, ["--no-fuse-elementwise"]),
               ("partc, heads copied (no strided matmuls)", 1,
                ["--no-fold-matmul-views"])]
    if args.gpus >= 2:
        configs += [("partc auto", 2, ["--devices", "2"]),
                    ("partc pipeline", 2, ["--devices", "2", "--strategy", "pipeline"]),
                    ("partc data-parallel", 2, ["--devices", "2", "--strategy", "data"])]
    if args.gpus >= 4:
        configs += [("partc auto", 4, ["--devices", "4"]),
                    ("partc pipeline", 4, ["--devices", "4", "--strategy", "pipeline"]),
                    ("partc data-parallel", 4, ["--devices", "4", "--strategy", "data"])]
    for label, n, opts in configs:
        tag = re.sub(r"\W+", "_", label)
        plan = os.path.join(args.work, tag + ".plan")
        compile_args = ["--batch", str(args.batch), "--quiet"]
        explain = sh([os.path.join(args.bin, "partc"), "compile", model, "-o", plan,
                      "--explain"] + compile_args + opts)
        chosen = re.search(r"chosen: ([^;]*);", explain).group(1)
        out_dir = os.path.join(args.work, "out_" + tag)
        run = [os.path.join(args.bin, "partc-run"), plan, "--backend", "cuda",
               "--quiet", "--input", "input=" + os.path.join(data, "input_0.pb"),
               "--keep-inputs"]
        out = sh(run + ["--iterations", str(args.iterations), "--warmup", "5"])
        latency = float(re.search(r"p50 ([0-9.]+)", out).group(1))
        out = sh(run + ["--iterations", str(5 * args.iterations), "--stream",
                        "--output-dir", out_dir])
        streamed = float(re.search(r"([0-9.]+) ms per batch", out).group(1))
        t = onnx_tensor(os.path.join(out_dir, "output_0.pb"))
        err = float(np.abs(t - ref).max() / (np.abs(ref).max() + 1e-30))
        rows.append((label, n, chosen, latency, streamed, err))
        if n == 1:
            # Where one batch's kernel time goes, by kernel.
            table = os.path.join(args.work, "profile_%s.json" % tag)
            sh(run + ["--iterations", "5", "--warmup", "2", "--profile", table])
            with open(table) as f:
                kernels = json.load(f)["kernels"]
            by_kind = {}
            for k in kernels:
                kind = k["signature"].split("(")[0]
                by_kind[kind] = by_kind.get(kind, 0) + k["seconds"]
            total = sum(by_kind.values())
            print("  %s: kernels %.2f ms per batch: %s" % (label, total * 1e3, ", ".join(
                "%s %.2f" % (kind, t * 1e3) for kind, t in
                sorted(by_kind.items(), key=lambda x: -x[1]))), flush=True)
        print("%s on %d GPU(s) [%s]: latency %.2f ms, streamed %.2f ms/batch, "
              "rel err vs PyTorch %.1e" % (label, n, chosen, latency, streamed, err),
              flush=True)

    eager_after = time_eager()
    eager = min(eager_before, eager_after)
    rows.insert(0, ("PyTorch eager (%.2f before partc, %.2f after)" %
                    (eager_before, eager_after), 1, "", eager, None, 0.0))
    print("\nEncoder 12 x 768 (%s), 128 tokens, batch %d, TF32. Latency: one batch "
          "(p50, input on the GPU); streamed: batches back to back.\n" %
          ("nn.TransformerEncoder" if args.model == "torch" else "run_models.Encoder",
           args.batch))
    print("| configuration | GPUs | plan | latency ms | streamed ms/batch | "
          "vs PyTorch eager (streamed, or latency) | rel err vs PyTorch |")
    print("|---|---|---|---|---|---|---|")
    for label, n, chosen, latency, streamed, err in rows:
        best = streamed if streamed else latency
        print("| %s | %d | %s | %.2f | %s | %.2fx | %.1e |" % (
            label, n, chosen, latency, "%.2f" % streamed if streamed else "",
            eager / best, err))


def onnx_tensor(path):
    from onnx import TensorProto
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


if __name__ == "__main__":
    sys.exit(main())
