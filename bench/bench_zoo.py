#!/usr/bin/env python3
"""Hugging Face models at their published sizes: partc against PyTorch eager.

Each model (random weights, bench/export_zoo.py) is exported with the
TorchScript exporter (or the dynamo one, --exporter dynamo), compiled by
partc and timed beside PyTorch eager on the same GPU, fp32 with TF32
allowed on both sides. PyTorch runs the
transformers implementation users get (scaled_dot_product_attention).
partc's outputs are compared with PyTorch's float32 CPU outputs. Prints a
markdown table and where partc's kernel time goes; never a test.

For the one-GPU plan of each --precisions entry the table also gives the
cost model's predicted step (partc compile --explain, the GPU's preset)
and the step predicted again from that plan's own profile (--cost-table),
each against the streamed time: the zoo's rows of docs/cost-model.md's
error per model family. The streamed time leaves each batch's outputs on
the GPU, as PyTorch returns them; "outputs to host" is the same stream
copying them back.
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
from onnx import TensorProto, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
# name: (batch, sequence)
MODELS = {"bert": (32, 128), "gpt2": (16, 256), "vit": (32, 0),
          "llama": (16, 256), "t5enc": (32, 128)}


def load_exporter():
    spec = importlib.util.spec_from_file_location(
        "export_zoo", os.path.join(HERE, "export_zoo.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sh(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(" ".join(cmd) + "\n" + (p.stdout + p.stderr)[-2000:])
    return p.stdout + p.stderr


def tensor(path):
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def time_eager(model, inputs, iterations):
    model = model.cuda()
    args = tuple(v.cuda() for v in inputs.values())
    start, end = torch.cuda.Event(True), torch.cuda.Event(True)
    times = []
    with torch.no_grad():
        for i in range(iterations + 5):
            start.record()
            model(*args)
            end.record()
            torch.cuda.synchronize()
            if i >= 5:
                times.append(start.elapsed_time(end))
    model.cpu()
    return sorted(times)[len(times) // 2]


def last_predicted_step(text):
    """The step partc compile predicted last: with branches on streams,
    the plan summary's step (their gain taken off) follows --explain's."""
    found = re.findall(r"predicted step ([0-9.]+) ms", text)
    return float(found[-1]) if found else None


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--exporter", default="torchscript",
                    help="torchscript or dynamo (torch.onnx.export's "
                         "default in recent PyTorch)")
    ap.add_argument("--precisions", default="fp32",
                    help="--precision of each one-GPU plan (fp32,bf16); "
                         "the multi-GPU plans run the first")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    exporter = load_exporter()
    rows = []
    for name in a.models.split(","):
        batch, seq = MODELS[name]
        try:
            directory, model, inputs, expected = exporter.export_one(
                name, a.exporter, "base", batch, seq, a.work, 17, check=False)
        except Exception as e:  # the exporter's failure, not partc's
            message = str(e).strip().splitlines()
            print("%s: %s export failed: %s" % (
                name, a.exporter, message[0] if message else type(e).__name__))
            continue
        data = os.path.join(directory, "test_data_set_0")
        eager = time_eager(model, inputs, a.iterations)
        precisions = a.precisions.split(",")
        configs = [("partc" + ("" if p == "fp32" else " " + p), 1,
                    ["--precision", p]) for p in precisions]
        if a.gpus >= 2:
            first = ["--precision", precisions[0]]
            configs += [("partc pipeline", 2, ["--devices", "2", "--strategy",
                                                "pipeline"] + first),
                        ("partc data-parallel", 2, ["--devices", "2",
                                                    "--strategy", "data"] +
                         first)]
        for label, gpus, flags in configs:
            plan = os.path.join(directory, "%d%s.plan" % (
                gpus, label.replace(" ", "-")))
            compile_cmd = [os.path.join(a.bin, "partc"), "compile",
                           os.path.join(directory, "model.onnx"), "-o", plan,
                           "--explain"] + flags
            explained = sh(compile_cmd)
            predicted = last_predicted_step(explained)
            calibrated = None
            run = [os.path.join(a.bin, "partc-run"), plan, "--backend", "cuda"]
            for i, k in enumerate(inputs):
                run += ["--input", "%s=%s" % (k, os.path.join(
                    data, "input_%d.pb" % i))]
            out_dir = os.path.join(directory, "out")
            first = sh(run + ["--output-dir", out_dir])
            fallback = re.search(r"[^\n]*on the host[^\n]*", first)
            err = max(float(np.abs(tensor(os.path.join(out_dir,
                                                       "output_%d.pb" % i)) -
                                   e.numpy()).max() /
                            max(1e-30, np.abs(e.numpy()).max()))
                      for i, e in enumerate(expected))
            out = sh(run + ["--keep-inputs", "--quiet", "--iterations",
                            str(a.iterations), "--warmup", "5"])
            latency = float(re.search(r"p50 ([0-9.]+)", out).group(1))
            # Outputs stay on the GPU, as PyTorch returns them; the same
            # stream copying each batch's outputs to the host is timed
            # apart (the zoo's outputs are 8-20 MB of f32 a batch).
            def stream(extra, command=None):
                out = sh((command or run) + [
                    "--keep-inputs", "--quiet", "--stream", "--iterations",
                    str(5 * a.iterations)] + extra)
                return float(re.search(r"([0-9.]+) ms per batch",
                                       out).group(1))
            streamed = stream(["--keep-outputs"])
            streamed_host = stream([])
            # Branches on streams (partc-assign-streams): the same plan on
            # one stream a device, to set the gain the compiler predicted
            # against the one measured (docs/cost-model.md).
            gain = re.search(r"predicted to save ([0-9.]+) ms", explained)
            if gain:
                single = plan + ".one-stream"
                sh(compile_cmd[:4] + [single, "--branch-streams", "1",
                                      "--quiet"] + flags)
                one = stream(["--keep-outputs"],
                             [run[0], single] + run[2:])
                print("  %s %s branches: predicted gain %.3f ms, measured "
                      "%.3f ms (%.3f on one stream, %.3f on streams)" % (
                          name, label, float(gain.group(1)), one - streamed,
                          one, streamed), flush=True)
            if gpus == 1:
                table = os.path.join(directory, "profile.json")
                sh(run + ["--keep-inputs", "--quiet", "--iterations", "5",
                          "--warmup", "2", "--profile", table])
                again = sh(compile_cmd[:4] + [plan + ".calibrated",
                                              "--explain", "--cost-table",
                                              table] + flags)
                calibrated = last_predicted_step(again)
                with open(table) as f:
                    kernels = json.load(f)["kernels"]
                by_kind = {}
                for k in kernels:
                    kind = k["signature"].split("(")[0]
                    by_kind[kind] = by_kind.get(kind, 0) + k["seconds"]
                print("  %s kernels %.2f ms: %s" % (name, sum(by_kind.values()) * 1e3,
                      ", ".join("%s %.2f" % (kind, t * 1e3) for kind, t in sorted(
                          by_kind.items(), key=lambda x: -x[1])[:8])), flush=True)
                # Where the uncalibrated model is off (partc compile
                # --explain with the table): its largest differences.
                lines = again.split("\n")
                for i, line in enumerate(lines):
                    if line.startswith("cost table:"):
                        for row in [line] + lines[i + 2:i + 8]:
                            print("  %s %s calibration %s" % (
                                name, label, row.strip()), flush=True)
            rows.append((name, batch, seq, label, gpus, eager, latency,
                         streamed, err,
                         fallback.group(0) if fallback else "", predicted,
                         calibrated, streamed_host))
            print(json.dumps({"model": name, "batch": batch, "seq": seq,
                              "plan": label, "gpus": gpus, "eager_ms": eager,
                              "latency_ms": latency, "streamed_ms": streamed,
                              "streamed_to_host_ms": streamed_host,
                              "predicted_ms": predicted,
                              "calibrated_ms": calibrated, "rel_err": err,
                              "host_fallback": rows[-1][9]}), flush=True)

    def versus(ms, measured):
        if ms is None:
            return "-"
        return "%.2f (%+.0f%%)" % (ms, 100.0 * (ms / measured - 1.0))

    print("\n| model | batch x seq | plan | GPUs | PyTorch eager ms | partc "
          "latency ms | partc streamed ms/batch | outputs to host | vs eager "
          "| predicted | calibrated | rel err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (name, batch, seq, label, gpus, eager, latency, streamed, err,
         fallback, predicted, calibrated, streamed_host) in rows:
        print("| %s | %d x %s | %s | %d | %.2f | %.2f | %.2f | %.2f | %.2fx | "
              "%s | %s | %.1e%s |"
              % (name, batch, seq or "224^2", label, gpus, eager, latency,
                 streamed, streamed_host, eager / streamed,
                 versus(predicted, streamed),
                 versus(calibrated, streamed), err,
                 " (" + fallback + ")" if fallback else ""))


if __name__ == "__main__":
    sys.exit(main())
