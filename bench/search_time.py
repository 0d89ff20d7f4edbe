#!/usr/bin/env python3
"""Search-time benchmark of the cost model (CPU only; no GPU needed).

ResNet-50 for 8 H200s and a 48-layer transformer encoder for 64 simulated
H200s: prints the number of plans searched, the search time partc reports
and the whole compile time. Targets (issue 3): under 1 s and under 10 s.
"""
import os
import re
import subprocess
import sys
import time

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "models"))
from run_models import Encoder, export  # noqa: E402


def compile_and_time(bindir, model, devices, batch):
    t = time.perf_counter()
    out = subprocess.run([os.path.join(bindir, "partc"), "compile", model, "-o",
                          model + ".plan", "--devices", devices, "--batch", str(batch),
                          "--explain"], capture_output=True, text=True, check=True).stdout
    total = time.perf_counter() - t
    m = re.search(r"searched (\d+) plans in ([0-9.]+) ms", out)
    chosen = re.search(r"chosen: (.*)", out).group(1)
    ops = re.search(r"partc plan: (\d+) ops", out).group(1)
    return ops, int(m.group(1)), float(m.group(2)), total, chosen


def main():
    bindir, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    rows = []
    r50 = os.path.join(work, "resnet50.onnx")
    export(torchvision.models.resnet50().eval(), torch.randn(64, 3, 224, 224), r50, 13)
    rows.append(("ResNet-50", "8xh200", 64) + compile_and_time(bindir, r50, "8xh200", 64))
    enc = os.path.join(work, "encoder48.onnx")
    export(Encoder(vocab=1000, d=256, heads=8, ff=1024, layers=48, seq=128).eval(),
           torch.randint(0, 1000, (64, 128)), enc, 17)
    rows.append(("transformer, 48 layers", "64xh200", 64)
                + compile_and_time(bindir, enc, "64xh200", 64))
    print("| model | devices | batch | ops | plans searched | search time | whole compile | chosen |")
    print("|---|---|---|---|---|---|---|---|")
    for name, dev, batch, ops, plans, search_ms, total, chosen in rows:
        print("| %s | %s | %d | %s | %d | %.1f ms | %.2f s | %s |"
              % (name, dev, batch, ops, plans, search_ms, total, chosen))


if __name__ == "__main__":
    main()
