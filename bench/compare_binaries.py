#!/usr/bin/env python3
"""Two builds of partc side by side on one GPU: same models, same inputs.

For a change that must not cost speed (a refactoring), each model is
compiled by each build's partc and run by its partc-run, alternating
between the builds so that clock and thermal drift fall on both alike.
Reports, per model and build, the median of the streamed time per batch
and of the profiled kernel time per batch, the ratio new / old, and the
largest difference between the two builds' outputs. Never a test.

    compare_binaries.py --old DIR --new DIR --work DIR [--models r50,bert,gpt2]
"""
import argparse
import importlib.util
import json
import os
import re
import statistics
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# name: (export_zoo name, batch, sequence)
MODELS = {"r50": ("resnet50", 64, 0), "bert": ("bert", 32, 128),
          "gpt2": ("gpt2", 16, 256)}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=200)
    a = ap.parse_args()
    def load(name):
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(HERE, name + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    exporter = load("export_zoo")
    # The command runner and tensor reader bench_zoo.py uses.
    zoo = load("bench_zoo")
    sh, tensor = zoo.sh, zoo.tensor
    builds = {"old": a.old, "new": a.new}
    rows = []
    for name in a.models.split(","):
        zoo_name, batch, seq = MODELS[name]
        directory, _, inputs, _ = exporter.export_one(
            zoo_name, "torchscript", "base", batch, seq, a.work, 17,
            check=False)
        data = os.path.join(directory, "test_data_set_0")
        runs, outputs = {}, {}
        for build, bin_dir in builds.items():
            plan = os.path.join(directory, build + ".plan")
            sh([os.path.join(bin_dir, "partc"), "compile",
                os.path.join(directory, "model.onnx"), "-o", plan, "--quiet"])
            run = [os.path.join(bin_dir, "partc-run"), plan, "--backend",
                   "cuda"]
            for i, k in enumerate(inputs):
                run += ["--input", "%s=%s" % (k, os.path.join(
                    data, "input_%d.pb" % i))]
            out_dir = os.path.join(directory, "out-" + build)
            sh(run + ["--output-dir", out_dir, "--quiet"])
            outputs[build] = [tensor(os.path.join(out_dir, "output_%d.pb" % i))
                              for i in range(len(os.listdir(out_dir)) -
                                             len(inputs))]
            runs[build] = run
        streamed = {b: [] for b in builds}
        kernels = {b: [] for b in builds}
        for _ in range(a.rounds):
            for build, run in runs.items():
                out = sh(run + ["--keep-inputs", "--quiet", "--stream",
                                "--iterations", str(a.iterations),
                                "--warmup", "10"])
                streamed[build].append(float(re.search(
                    r"([0-9.]+) ms per batch", out).group(1)))
                table = os.path.join(directory, build + "-profile.json")
                sh(run + ["--keep-inputs", "--quiet", "--iterations", "5",
                          "--warmup", "2", "--profile", table])
                with open(table) as f:
                    kernels[build].append(1e3 * sum(
                        k["seconds"] for k in json.load(f)["kernels"]))
        diff = max(float(np.abs(o - n).max() / max(1e-30, np.abs(o).max()))
                   for o, n in zip(outputs["old"], outputs["new"]))
        s = {b: statistics.median(v) for b, v in streamed.items()}
        k = {b: statistics.median(v) for b, v in kernels.items()}
        rows.append((name, batch, seq, s["old"], s["new"], k["old"], k["new"],
                     diff))
        print("%s: streamed %s, kernels %s, outputs differ by %.1e" %
              (name, streamed, kernels, diff), flush=True)
    print("\n| model | batch x seq | streamed ms/batch old | new | new/old | "
          "kernels ms old | new | new/old | max rel diff of outputs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, batch, seq, so, sn, ko, kn, diff in rows:
        print("| %s | %d x %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | "
              "%.1e |" % (name, batch, seq or "224^2", so, sn, sn / so, ko, kn,
                          kn / ko, diff))


if __name__ == "__main__":
    sys.exit(main())
