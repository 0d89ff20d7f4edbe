#!/usr/bin/env python3
"""The zoo's transformers compiled with --precision bf16 and fp16.

Each committed zoo model (Hugging Face BERT, GPT-2, Llama, ViT and T5's
encoder at a tiny size, with PyTorch's fp32 outputs) is compiled in fp32,
bf16 and fp16 and run on the CPU backend, which rounds every 16-bit op's
result as a GPU kernel does. Printed per model: the error against PyTorch,
max |partc - torch| / max |torch| over the outputs. Checked:
  * the 16-bit plans really run in the type (the placed graph has it),
    their attention fused (graph.attention, no softmax left);
  * the error stays within the type's bound (fp32 1e-4, fp16 5e-3, bf16
    3e-2; measured 2e-7 to 4e-7, 7e-4 to 1.2e-3 and 6e-3 to 1.1e-2);
  * the bf16 plan split over 2 devices (pipeline, data parallel) gives the
    1-device bf16 plan's outputs.
--gpu-args runs the plans with other partc-run arguments (--backend cuda).
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BOUND = {"fp32": 1e-4, "fp16": 5e-3, "bf16": 3e-2}
SPLITS = {
    "pipeline": ["--devices", "2", "--strategy", "pipeline",
                 "--micro-batches", "2"],
    "data": ["--devices", "2", "--strategy", "data"],
}


def read_outputs(directory):
    import onnx
    from onnx import numpy_helper
    files = sorted(f for f in os.listdir(directory) if f.startswith("output_"))
    out = []
    for f in files:
        t = onnx.TensorProto()
        with open(os.path.join(directory, f), "rb") as fh:
            t.ParseFromString(fh.read())
        out.append(numpy_helper.to_array(t).astype(np.float64))
    return out


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (" ".join(cmd),
                                              (p.stdout + p.stderr)[-1500:]))
    return p.stdout


def outputs_of(a, model, data, work, tag, flags):
    plan = os.path.join(work, tag + ".plan")
    out = os.path.join(work, tag + "-out")
    run([os.path.join(a.bin, "partc"), "compile", model, "-o", plan,
         "--quiet"] + flags)
    run([os.path.join(a.bin, "partc-run"), plan, "--check", data, "--rtol",
         "1e30", "--atol", "1e30", "--output-dir", out, "--quiet"]
        + a.run_args.split())
    return read_outputs(out)


def error(got, want):
    scale = max(float(np.max(np.abs(w))) for w in want)
    return max(float(np.max(np.abs(g - w))) for g, w in zip(got, want)) / \
        max(scale, 1e-30)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--run-args", default="")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    zoo = os.path.join(HERE, "zoo")
    failures = []
    print("%-20s %10s %10s %10s" % ("model", "fp32", "bf16", "fp16"))
    for name in sorted(os.listdir(zoo)):
        if a.only and a.only not in name:
            continue
        model = os.path.join(zoo, name, "model.onnx")
        data = os.path.join(zoo, name, "test_data_set_0")
        want = read_outputs(data)
        work = os.path.join(a.work, name)
        os.makedirs(work, exist_ok=True)
        errors = {}
        try:
            graph = run([os.path.join(a.bin, "partc"), "compile", model,
                         "--emit=graph", "-o", "-", "--precision", "bf16"])
            if "xbf16>" not in graph:
                failures.append("%s: no bf16 tensor in the placed graph" % name)
            # Every zoo model's heads fit the fused kernel.
            if "graph.attention" not in graph or "graph.softmax" in graph:
                failures.append("%s: attention not fused in the placed "
                                "graph" % name)
            results = {}
            for precision in BOUND:
                results[precision] = outputs_of(
                    a, model, data, work, precision, ["--precision", precision])
                errors[precision] = error(results[precision], want)
                if not errors[precision] <= BOUND[precision]:
                    failures.append("%s %s: error %.3g above %.3g" % (
                        name, precision, errors[precision], BOUND[precision]))
            for split, flags in SPLITS.items():
                got = outputs_of(a, model, data, work, "bf16-" + split,
                                 ["--precision", "bf16"] + flags)
                gap = error(got, results["bf16"])
                if not gap <= 1e-2:
                    failures.append("%s bf16 %s: %.3g from 1 device" % (
                        name, split, gap))
        except RuntimeError as e:
            failures.append("%s: %s" % (name, e))
        print("%-20s %10s %10s %10s" % (name, *(
            "%.2e" % errors[p] if p in errors else "-"
            for p in ("fp32", "bf16", "fp16"))))
        sys.stdout.flush()
    for f in failures:
        print("FAIL " + f)
    print("precision: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
