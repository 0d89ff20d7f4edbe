#!/usr/bin/env python3
"""partc in fp32/TF32, bf16 and fp16 beside PyTorch's strongest peers.

For each MODEL:BATCH[:SEQ], torch_peers.py (../shared/bench) times PyTorch
eager, torch.compile (default and reduce-overhead), and bf16 both ways
(autocast, and the model cast to bf16, under reduce-overhead), and exports
the model with identical weights. partc compiles the export with each
--precision, runs it back to back on the GPU (--stream --keep-inputs
--keep-outputs: inputs and outputs stay on the GPU, the way torch_peers
times; "ms_with_output_copy" is the same with each batch's outputs copied
back to host memory), and compares its output with PyTorch's fp32 CPU
output. Prints one JSON line per measurement and a markdown table; never a
test.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

import numpy as np


def sh(cmd, timeout=600):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode:
        raise RuntimeError(" ".join(cmd) + "\n" + (p.stdout + p.stderr)[-1500:])
    return p.stdout + p.stderr


def last_predicted_step(text):
    """The step partc compile predicted last: with branches on streams,
    the plan summary's step (their gain taken off) follows --explain's."""
    found = re.findall(r"predicted step ([0-9.]+) ms", text)
    return float(found[-1]) if found else None


def read_output(directory):
    import onnx
    from onnx import numpy_helper
    files = sorted(glob.glob(os.path.join(directory, "output_*.pb")))
    t = onnx.TensorProto()
    with open(files[0], "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t).astype(np.float64)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--peers", required=True, help="torch_peers.py")
    ap.add_argument("--models", default="gpt2-medium:8:512,bert-large:16:384,"
                    "resnet50:64,densenet121:32")
    ap.add_argument("--precisions", default="fp32,bf16,fp16",
                    help="each a --precision value, optionally with partc "
                    "compile flags after '+' (bf16+no-fuse-attention)")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--calibrate", action="store_true",
                    help="also profile each plan (partc-run --profile) and "
                         "predict again from that cost table "
                         "(calibrated_ms)")
    ap.add_argument("--devices", default="1",
                    help="partc compile --devices: the GPU's preset for the "
                         "cost model's prediction (1xh100, 1xh200)")
    ap.add_argument("--run-flags", default="",
                    help="extra partc-run flags for the timed runs, "
                         "space-separated")
    ap.add_argument("--no-torch", action="store_true",
                    help="export only (torch_peers --no-compile --no-bf16)")
    a = ap.parse_args()
    rows = []
    for spec in a.models.split(","):
        parts = spec.split(":")
        model, batch = parts[0], parts[1]
        work = os.path.join(a.work, model)
        cmd = [sys.executable, a.peers, model, work, "--batch", batch]
        if len(parts) > 2:
            cmd += ["--seq", parts[2]]
        if a.no_torch:
            cmd += ["--no-compile", "--no-bf16"]
        torch_ms = {}
        try:
            for line in sh(cmd, timeout=420).splitlines():
                if line.startswith("{"):
                    print(line, flush=True)
                    r = json.loads(line)
                    torch_ms[r["mode"]] = r["ms"]
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("torch_peers failed for %s: %s" % (model, str(e)[-600:]))
            if not os.path.exists(os.path.join(work, "model.onnx")):
                continue
        reference = np.load(os.path.join(work, "reference.npy")).astype(
            np.float64)
        inputs = []
        for f in sorted(glob.glob(os.path.join(work, "*.npy"))):
            name = os.path.basename(f)[:-4]
            if name != "reference":
                inputs += ["--input", "%s=%s" % (name, f)]
        partc_ms, errors, with_copy, predicted, calibrated = {}, {}, {}, {}, {}
        for precision in a.precisions.split(","):
            plan = os.path.join(work, precision + ".plan")
            flags = precision.split("+")
            try:
                # --explain: the cost model's predicted step, beside the
                # measurement (docs/cost-model.md, error per family).
                explained = sh([os.path.join(a.bin, "partc"), "compile",
                                os.path.join(work, "model.onnx"), "-o", plan,
                                "--precision", flags[0], "--devices",
                                a.devices, "--explain"] +
                               ["--" + flag for flag in flags[1:]])
                predicted[precision] = last_predicted_step(explained)
                def timed(extra, plan=plan):
                    out = sh([os.path.join(a.bin, "partc-run"), plan,
                              "--backend", "cuda", "--iterations",
                              str(a.iterations), "--warmup", "5",
                              "--keep-inputs", "--stream", "--quiet"] +
                             a.run_flags.split() + extra + inputs)
                    m = re.search(r"([0-9.]+) ms per batch", out)
                    return float(m.group(1)) if m else None
                partc_ms[precision] = timed(["--keep-outputs"])
                with_copy[precision] = timed([])
                # Branches on streams: the predicted gain against the one
                # measured on one stream a device (docs/cost-model.md).
                gain = re.search(r"predicted to save ([0-9.]+) ms", explained)
                if gain:
                    single = plan + ".one-stream"
                    sh([os.path.join(a.bin, "partc"), "compile",
                        os.path.join(work, "model.onnx"), "-o", single,
                        "--precision", flags[0], "--devices", a.devices,
                        "--branch-streams", "1", "--quiet"] +
                       ["--" + flag for flag in flags[1:]])
                    one = timed(["--keep-outputs"], single)
                    if one and partc_ms[precision]:
                        print("%s %s branches: predicted gain %.3f ms, "
                              "measured %.3f ms (%.3f on one stream)" % (
                                  model, precision, float(gain.group(1)),
                                  one - partc_ms[precision], one),
                              flush=True)
                outdir = os.path.join(work, precision + "-out")
                sh([os.path.join(a.bin, "partc-run"), plan, "--backend",
                    "cuda", "--output-dir", outdir, "--quiet"] + inputs)
                if a.calibrate:
                    table = os.path.join(work, precision + "-profile.json")
                    sh([os.path.join(a.bin, "partc-run"), plan, "--backend",
                        "cuda", "--iterations", "10", "--warmup", "3",
                        "--profile", table, "--quiet"] + inputs)
                    again = sh([os.path.join(a.bin, "partc"), "compile",
                                os.path.join(work, "model.onnx"), "-o",
                                plan + ".calibrated", "--precision", flags[0],
                                "--devices", a.devices, "--cost-table", table,
                                "--explain"] +
                               ["--" + flag for flag in flags[1:]])
                    calibrated[precision] = last_predicted_step(again)
                y = read_output(outdir)
                errors[precision] = float(np.max(np.abs(y - reference)) /
                                          max(np.max(np.abs(reference)), 1e-30))
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print("partc %s %s failed: %s" % (model, precision,
                                                  str(e)[-800:]))
                continue
            print(json.dumps({"model": model, "batch": batch,
                              "mode": "partc-" + precision,
                              "ms": partc_ms[precision],
                              "ms_with_output_copy": with_copy[precision],
                              "predicted_ms": predicted[precision],
                              "calibrated_ms": calibrated.get(precision),
                              "error_vs_fp32_torch": errors[precision]}),
                  flush=True)
        rows.append((spec, torch_ms, partc_ms, errors))

    print("\n| model | partc fp32 | torch.compile (CUDA graphs) | ratio | "
          "partc bf16 | bf16 error | best torch bf16 | ratio | partc fp16 | "
          "fp16 error |")
    print("|---|---|---|---|---|---|---|---|---|---|")

    def f(v):
        return "-" if v is None else "%.2f" % v

    for spec, t, p, e in rows:
        compiled = t.get("compile-reduce-overhead")
        bf16 = [t[k] for k in ("bf16-autocast-compile-reduce-overhead",
                               "bf16-model-compile-reduce-overhead") if k in t]
        best = min(bf16) if bf16 else None
        ratio32 = compiled / p["fp32"] if compiled and p.get("fp32") else None
        ratio16 = best / p["bf16"] if best and p.get("bf16") else None
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            spec, f(p.get("fp32")), f(compiled),
            "-" if ratio32 is None else "%.2fx" % ratio32, f(p.get("bf16")),
            "%.1e" % e["bf16"] if "bf16" in e else "-", f(best),
            "-" if ratio16 is None else "%.2fx" % ratio16, f(p.get("fp16")),
            "%.1e" % e["fp16"] if "fp16" in e else "-"))


if __name__ == "__main__":
    main()
