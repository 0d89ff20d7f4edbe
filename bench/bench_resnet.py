#!/usr/bin/env python3
"""ResNet-50 inference benchmark: partc plans against PyTorch eager, one run.

Exports torchvision's ResNet-50 (random weights, seeded), compiles it with
partc for 1 GPU and for N-GPU pipeline and data-parallel plans, times each
with partc-run --backend cuda, times PyTorch eager (fp32, TF32 allowed,
cudnn.benchmark) on the same machine, and prints a markdown table with
images/s and ratios. Never a test: numbers go to docs/benchmarks.md.
"""
import argparse
import os
import re
import subprocess
import sys
import time

import torch
import torchvision


def sh(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    return p.stdout + p.stderr


def torch_eager(batch, hw, iters, warmup):
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    m = torchvision.models.resnet50().eval().cuda()
    x = torch.randn(batch, 3, hw, hw, device="cuda")
    with torch.no_grad():
        for _ in range(warmup):
            m(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            t = time.perf_counter()
            m(x)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2] * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    ap.add_argument("--iterations", type=int, default=20)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.manual_seed(0)
    model = os.path.join(args.work, "resnet50.onnx")
    x = torch.randn(args.batch, 3, 224, 224)
    kw = dict(opset_version=13, input_names=["input"], output_names=["output"],
              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    net = torchvision.models.resnet50().eval()
    try:
        torch.onnx.export(net, x, model, dynamo=False, **kw)
    except TypeError:
        torch.onnx.export(net, x, model, **kw)

    rows = []
    eager_ms = torch_eager(args.batch, 224, args.iterations, 5)
    configs = [("partc single", 1, [])]
    for n in range(2, args.gpus + 1):
        for mb in (n, 2 * n, 4 * n):
            configs.append(("partc pipeline mb=%d" % mb, n,
                            ["--devices", str(n), "--micro-batches", str(mb)]))
        configs.append(("partc data-parallel", n, ["--devices", str(n), "--strategy", "data"]))
    for label, n, opts in configs:
        plan = os.path.join(args.work, "r50_%s_%d.plan" % (re.sub(r"\W", "_", label), n))
        t = time.perf_counter()
        sh([os.path.join(args.bin, "partc"), "compile", model, "-o", plan,
            "--batch", str(args.batch), "--quiet"] + opts)
        compile_s = time.perf_counter() - t
        figures = []
        for extra in (["--keep-inputs"], [], ["--keep-inputs", "--no-graphs"]):
            out = sh([os.path.join(args.bin, "partc-run"), plan, "--backend", "cuda",
                      "--quiet", "--iterations", str(args.iterations), "--warmup", "5"]
                     + extra)
            figures.append(float(re.search(r"p50 ([0-9.]+)", out).group(1)))
            if "graph capture failed" in out:
                print(out)
        rows.append((label, n, figures[0], figures[1], figures[2]))
        print("%s on %d GPU(s): %.2f ms resident, %.2f ms from host, %.2f ms without "
              "graphs (compile %.2f s)" % (label, n, figures[0], figures[1], figures[2],
                                           compile_s), flush=True)

    single = next(r[2] for r in rows if r[0] == "partc single")
    print("\nResident: inputs stay on the GPU between runs, as in the PyTorch figure. "
          "From host: each run copies the batch in from page-locked memory.\n")
    print("| configuration | GPUs | batch | ms (p50), resident | images/s | vs PyTorch eager "
          "| vs partc 1 GPU | ms from host | ms without CUDA graphs |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("| PyTorch eager | 1 | %d | %.2f | %.0f | 1.00x | | | |"
          % (args.batch, eager_ms, args.batch / eager_ms * 1e3))
    for label, n, ms, host_ms, nograph_ms in rows:
        print("| %s | %d | %d | %.2f | %.0f | %.2fx | %.2fx | %.2f | %.2f |" % (
            label, n, args.batch, ms, args.batch / ms * 1e3, eager_ms / ms, single / ms,
            host_ms, nograph_ms))


if __name__ == "__main__":
    sys.exit(main())
