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


def timed(fn, iters, warmup, devices):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        for d in devices:
            torch.cuda.synchronize(d)
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2] * 1e3


def torch_figures(batch, hw, iters, warmup, gpus, quick=False):
    """PyTorch eager on one GPU (NCHW and channels_last) and, with two GPUs,
    inference versions of the tutorial's hand-made model-parallel split
    (conv1..layer2 on cuda:0, layer3..fc on cuda:1) and its pipeline."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    out = {}
    m = torchvision.models.resnet50().eval().cuda()
    x = torch.randn(batch, 3, hw, hw, device="cuda")
    with torch.no_grad():
        out["eager"] = timed(lambda: m(x), iters, warmup, [0])
        mc = m.to(memory_format=torch.channels_last)
        xc = x.to(memory_format=torch.channels_last)
        out["eager channels_last"] = timed(lambda: mc(xc), iters, warmup, [0])
    if gpus < 2 or quick:
        return out
    net = torchvision.models.resnet50().eval()
    first = torch.nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool,
                                net.layer1, net.layer2).to("cuda:0")
    second = torch.nn.Sequential(net.layer3, net.layer4, net.avgpool,
                                 torch.nn.Flatten(), net.fc).to("cuda:1")

    def split(micro):
        parts = [second(first(p).to("cuda:1")) for p in x.split(micro)]
        return torch.cat(parts)

    with torch.no_grad():
        out["model parallel, 2 GPUs"] = timed(lambda: split(batch), iters, warmup, [0, 1])
        for micro in (16, 32):
            out["pipeline split_size %d, 2 GPUs" % micro] = timed(
                lambda: split(micro), iters, warmup, [0, 1])
    return out


def read_output(path):
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def stream_summary(path, skip=5):
    """Per device of a streamed trace (partc-run --stream --trace): the
    period, what keeps the compute stream busy, and how long it idles."""
    import json
    events = [e for e in json.load(open(path))["traceEvents"] if e["ph"] == "X"]
    lines = []
    for dev in sorted({e["pid"] for e in events}):
        mine = [e for e in events if e["pid"] == dev and e["args"]["batch"] >= skip]
        batches = sorted({e["args"]["batch"] for e in mine})
        if len(batches) < 2:
            continue
        first = {b: min(e["ts"] for e in mine if e["args"]["batch"] == b and e["tid"] == 0)
                 for b in batches}
        count = len(batches) - 1
        period = (first[batches[-1]] - first[batches[0]]) / count
        spans = [e for e in mine if e["args"]["batch"] < batches[-1]]
        compute = sum(e["dur"] for e in spans if e["tid"] == 0 and e["cat"] == "kernel") / count
        local = sum(e["dur"] for e in spans if e["tid"] == 0 and e["cat"] != "kernel") / count
        peer = sum(e["dur"] for e in spans if e["tid"] == 1) / count
        lines.append("device %d: period %.3f ms; compute stream: graphs %.3f, local copies "
                     "%.3f, idle %.3f; peer copies %.3f ms per batch"
                     % (dev, period / 1e3, compute / 1e3, local / 1e3,
                        (period - compute - local) / 1e3, peer / 1e3))
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--quick", action="store_true",
                    help="only the configurations that the targets name, and "
                    "the single GPU with and without fused epilogues")
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
    torch_ms = torch_figures(args.batch, 224, args.iterations, 5, args.gpus,
                             args.quick)
    eager_ms = torch_ms["eager"]
    for k, v in torch_ms.items():
        print("PyTorch %s: %.2f ms" % (k, v), flush=True)
    # (label, GPUs, compile options, partc-run options)
    configs = [("partc single", 1, [], []),
               ("partc single, epilogues unfused", 1, [], ["--no-fused-epilogues"]),
               ("partc single, legacy cuDNN API only", 1, [], ["--no-cudnn-graph"])]
    if not args.quick:
        configs.append(("partc single, NCHW layout", 1, ["--layout", "nchw"], []))
    pipelines = {2: (1, 2), 4: (1,)}
    for n in sorted({2, args.gpus}):
        if n < 2 or n > args.gpus or args.quick:
            continue
        for mb in pipelines.get(n, (1,)):
            configs.append(("partc pipeline mb=%d" % mb, n,
                            ["--devices", str(n), "--strategy", "pipeline",
                             "--micro-batches", str(mb)], []))
        configs.append(("partc data-parallel", n,
                        ["--devices", str(n), "--strategy", "data"], []))
        configs.append(("partc auto", n, ["--devices", str(n)], []))
    # Calibration: kernel times measured on this GPU at the batch and at the
    # slices the plans run (one profile per size), fed back to the compiler.
    tables = []
    for b in sorted({args.batch, args.batch // 2, args.batch // 4}, reverse=True):
        plan = os.path.join(args.work, "r50_profile_%d.plan" % b)
        table = os.path.join(args.work, "profile_%d.json" % b)
        sh([os.path.join(args.bin, "partc"), "compile", model, "-o", plan,
            "--batch", str(b), "--quiet"])
        out = sh([os.path.join(args.bin, "partc-run"), plan, "--backend", "cuda",
                  "--warmup", "3", "--iterations", "10", "--profile", table])
        for line in out.splitlines():
            if any(k in line for k in ("chosen by timing", "predicted", "event pair")):
                print("profile at batch %d: %s" % (b, line.strip()), flush=True)
        tables.append(table)
    calibrated = ["--cost-table", ",".join(tables)]
    configs.append(("partc single, calibrated", 1, calibrated, []))
    for n in sorted({2, args.gpus}):
        if n < 2 or n > args.gpus:
            continue
        for mb in pipelines.get(n, (1,)):
            configs.append(("partc pipeline mb=%d, calibrated" % mb, n,
                            ["--devices", str(n), "--strategy", "pipeline",
                             "--micro-batches", str(mb)] + calibrated, []))
            if mb == 1 and not args.quick:
                # Staging and landing copies of their own, as before the
                # kernels wrote and read the transferred buffers.
                configs.append(("partc pipeline mb=1, calibrated, --no-direct-transfers",
                                n, ["--devices", str(n), "--strategy", "pipeline",
                                    "--micro-batches", "1"] + calibrated,
                                ["--no-direct-transfers"]))
        configs.append(("partc data-parallel, calibrated", n,
                        ["--devices", str(n), "--strategy", "data"] + calibrated, []))
        configs.append(("partc auto, calibrated", n,
                        ["--devices", str(n)] + calibrated, []))
        # As DistributedDataParallel is measured: every GPU keeps the batch
        # of one GPU (weak scaling), so a step handles n times the images.
        configs.append(("partc data-parallel, %d per GPU (batch %d)"
                        % (args.batch, n * args.batch), n,
                        ["--devices", str(n), "--strategy", "data", "--batch",
                         str(n * args.batch)] + calibrated, []))
        if not args.quick:
            configs.append(("partc auto, latency objective, calibrated", n,
                            ["--devices", str(n), "--objective", "latency"]
                            + calibrated, []))
    reference = None
    for label, n, opts, run_opts in configs:
        tag = re.sub(r"\W+", "_", label)
        plan = os.path.join(args.work, "r50_%s_%d.plan" % (tag, n))
        t = time.perf_counter()
        explain = sh([os.path.join(args.bin, "partc"), "compile", model, "-o", plan,
                      "--batch", str(args.batch), "--quiet", "--explain"] + opts)
        compile_s = time.perf_counter() - t
        chosen = re.search(r"chosen: ([^;]*);", explain).group(1)
        predicted = re.search(r"predicted step ([0-9.]+) ms.*period ([0-9.]+) ms", explain)
        batch = int(opts[opts.index("--batch") + 1]) if "--batch" in opts else args.batch
        figures = []
        for extra in (["--keep-inputs"], [], ["--keep-inputs", "--no-graphs"]):
            out = sh([os.path.join(args.bin, "partc-run"), plan, "--backend", "cuda",
                      "--quiet", "--iterations", str(args.iterations), "--warmup", "5"]
                     + extra + run_opts)
            figures.append(float(re.search(r"p50 ([0-9.]+)", out).group(1)))
            if "graph capture failed" in out:
                print(out)
        outdir = os.path.join(args.work, "out_%s_%d" % (tag, n))
        for extra in (["--keep-inputs"], []):
            out = sh([os.path.join(args.bin, "partc-run"), plan, "--backend", "cuda",
                      "--quiet", "--iterations", str(5 * args.iterations), "--stream",
                      "--output-dir", outdir] + extra + run_opts)
            figures.append(float(re.search(r"([0-9.]+) ms per batch", out).group(1)))
        # Streamed outputs (the last batch) against the one-GPU plan's.
        got = read_output(os.path.join(outdir, "output_0.pb"))
        if reference is None:
            reference = got
        err = float("nan")
        if got.shape == reference.shape:
            err = float(abs(got - reference).max() / (abs(reference).max() + 1e-30))
        if n > 1 and "pipeline" in label:
            # Where a streamed batch's time goes, per device.
            trace = os.path.join(args.work, "trace_%s_%d.json" % (tag, n))
            sh([os.path.join(args.bin, "partc-run"), plan, "--backend", "cuda", "--quiet",
                "--iterations", "30", "--stream", "--keep-inputs", "--trace", trace]
               + run_opts)
            for line in stream_summary(trace):
                print("  %s, streamed: %s" % (label, line), flush=True)
            # Where the time goes: each stage's kernels, one batch at a time.
            out = sh([os.path.join(args.bin, "partc-run"), plan, "--backend", "cuda",
                      "--iterations", "5", "--warmup", "2", "--profile",
                      os.path.join(args.work, "stages_%s_%d.json" % (tag, n))])
            for line in out.splitlines():
                if "(stage" in line:
                    print("  %s: %s" % (label, line.strip()), flush=True)
        rows.append((label, n, chosen, figures, float(predicted.group(1)),
                     float(predicted.group(2)), err, batch))
        print("%s on %d GPU(s) [%s]: batch %d, latency %.2f ms resident, %.2f from host, %.2f "
              "without graphs; streamed %.2f ms/batch resident, %.2f from host; "
              "predicted step %s period %s; rel err vs 1 GPU %.1e (compile %.2f s)"
              % (label, n, chosen, batch, figures[0], figures[1], figures[2], figures[3],
                 figures[4], predicted.group(1), predicted.group(2), err, compile_s),
              flush=True)

    single = next(r[3] for r in rows if r[0] == "partc single")
    print("\nLatency: one synchronous batch (p50). Streamed: batches back to back, "
          "ms per batch. Resident: the input stays on the GPU (as in the PyTorch "
          "figures); from host: every batch is copied in from page-locked memory.\n")
    print("| configuration | GPUs | plan | latency ms | streamed ms/batch | images/s "
          "(streamed) | vs PyTorch eager | vs partc 1 GPU (streamed) | latency from host "
          "| streamed from host | latency without graphs | predicted step / period |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k, v in torch_ms.items():
        print("| PyTorch %s | %d | | %.2f | | %.0f | %.2fx | | | | | |"
              % (k, 2 if "GPUs" in k else 1, v, args.batch / v * 1e3, eager_ms / v))
    # Ratios compare images per second (a plan may take a larger batch).
    for label, n, chosen, f, step, period, err, batch in rows:
        per_image = f[3] / batch
        print("| %s | %d | %s | %.2f | %.2f | %.0f | %.2fx | %.2fx | %.2f | %.2f | %.2f "
              "| %.2f / %.2f |" % (
                  label, n, chosen, f[0], f[3], 1e3 / per_image,
                  eager_ms / args.batch / per_image,
                  single[3] / args.batch / per_image, f[1], f[4], f[2], step, period))
    worst = max(r[6] for r in rows if r[6] == r[6])
    print("\nworst relative difference of any plan's streamed output from the one-GPU "
          "plan's: %.1e" % worst)


if __name__ == "__main__":
    sys.exit(main())
