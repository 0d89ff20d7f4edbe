#!/usr/bin/env python3
"""Real networks split for real: ResNet-50 and a transformer encoder.

Both are built with PyTorch at test time (random weights, nothing
downloaded, nothing committed), exported to ONNX, compiled by partc for 1, 2
and 4 devices with every strategy, and run on the CPU backend:
  * the single-device result must match PyTorch (rtol 1e-3, atol 1e-4);
  * every multi-device result must equal the single-device result within a
    relative error of 1e-5 (max |a - b| / max |b|).
Needs Debian's python3-torch, python3-torchvision and python3-onnx; prints
'SKIPPED' and exits 0 when they are missing so that runtime-only builds pass.
"""
import argparse
import os
import subprocess
import sys
import time

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
    import torch
    import torchvision
except ImportError as e:  # pragma: no cover
    print("SKIPPED: model tests need python3-torch, python3-torchvision and "
          "python3-onnx (%s)" % e)
    sys.exit(0)


class Encoder(torch.nn.Module):
    """A small pre-norm transformer encoder with token embeddings."""

    def __init__(self, vocab=50, d=64, heads=4, ff=128, layers=2, seq=16):
        super().__init__()
        self.heads = heads
        self.embed = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(seq, d) * 0.1)
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            self.layers.append(torch.nn.ModuleDict({
                "ln1": torch.nn.LayerNorm(d), "qkv": torch.nn.Linear(d, 3 * d),
                "proj": torch.nn.Linear(d, d), "ln2": torch.nn.LayerNorm(d),
                "fc1": torch.nn.Linear(d, ff), "fc2": torch.nn.Linear(ff, d)}))
        self.head = torch.nn.Linear(d, 10)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos
        b, s, d = x.shape
        h = self.heads
        for layer in self.layers:
            y = layer["ln1"](x)
            q, k, v = layer["qkv"](y).chunk(3, dim=-1)
            q = q.reshape(b, s, h, d // h).transpose(1, 2)
            k = k.reshape(b, s, h, d // h).transpose(1, 2)
            v = v.reshape(b, s, h, d // h).transpose(1, 2)
            att = torch.softmax(q @ k.transpose(-1, -2) / (d // h) ** 0.5, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, s, d)
            x = x + layer["proj"](y)
            x = x + layer["fc2"](torch.nn.functional.gelu(layer["fc1"](layer["ln2"](x))))
        return self.head(x.mean(dim=1))


def export(model, example, path, opset):
    kwargs = dict(opset_version=opset, input_names=["input"], output_names=["output"],
                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    try:
        # Newer PyTorch defaults to the dynamo exporter; keep the TorchScript one.
        torch.onnx.export(model, example, path, dynamo=False, **kwargs)
    except TypeError:
        torch.onnx.export(model, example, path, **kwargs)


def write_data_set(directory, name, x, y):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, name).SerializeToString())
    with open(os.path.join(directory, "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(y, "output").SerializeToString())


def read_output(directory):
    t = onnx.TensorProto()
    with open(os.path.join(directory, "output_0.pb"), "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def sh(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s%s" % (" ".join(cmd), p.returncode,
                                                     p.stdout, p.stderr))
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", default="",
                    help="resnet50, transformer or torch_encoder_layer")
    ap.add_argument("--run-args", default="",
                    help="extra partc-run arguments, e.g. '--backend cuda'")
    ap.add_argument("--multi-tol", type=float, default=1e-5,
                    help="largest relative error of a multi-device result")
    ap.add_argument("--max-devices", type=int, default=4)
    args = ap.parse_args()
    run_args = args.run_args.split()
    os.makedirs(args.work, exist_ok=True)
    partc = os.path.join(args.bin, "partc")
    run = os.path.join(args.bin, "partc-run")
    torch.manual_seed(0)

    models = []
    if args.only in ("", "resnet50"):
        net = torchvision.models.resnet50().eval()
        x = torch.randn(4, 3, 224, 224)
        g = onnx  # noqa: keeps the import used for readers
        # The classic hand-made cut: after the last block of layer2.
        models.append(("resnet50", net, x, 13, "/layer2/layer2.3/relu_2/Relu"))
    if args.only in ("", "transformer"):
        net = Encoder().eval()
        x = torch.randint(0, 50, (4, 16))
        models.append(("transformer", net, x, 17, None))
    if args.only in ("", "torch_encoder_layer"):
        # PyTorch's own encoder layer: its exported attention moves the batch
        # to dimension 1 and merges it with the heads and then with the
        # sequence; replicas and micro-batches follow it there.
        net = torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                             dropout=0.0, batch_first=True),
            num_layers=2).eval()
        x = torch.randn(4, 10, 64)
        models.append(("torch_encoder_layer", net, x, 14, None))

    failures = 0
    checks = 0
    for name, net, x, opset, cut in models:
        path = os.path.join(args.work, name + ".onnx")
        t0 = time.time()
        export(net, x, path, opset)
        with torch.no_grad():
            ref = net(x).numpy()
        ref_dir = os.path.join(args.work, name + "_torch")
        write_data_set(ref_dir, "input", x.numpy(), ref)
        print("%s: exported in %.1f s" % (name, time.time() - t0))

        batch = str(x.shape[0])
        single_plan = os.path.join(args.work, name + "_1.plan")
        sh([partc, "compile", path, "-o", single_plan, "--batch", batch, "--quiet"])
        single_out = os.path.join(args.work, name + "_1_out")
        checks += 1
        try:
            sh([run, single_plan, "--check", ref_dir, "--rtol", "1e-3", "--atol",
                "1e-4", "--output-dir", single_out, "--quiet"] + run_args)
            print("  1 device vs PyTorch: ok")
        except RuntimeError as e:
            failures += 1
            print("  1 device vs PyTorch: FAILED\n" + str(e))
            continue
        base = read_output(single_out)

        configs = []
        for n in (d for d in (2, 4) if d <= args.max_devices):
            configs.append(("pipeline-%d" % n, ["--devices", str(n), "--strategy", "pipeline"]))
            configs.append(("pipeline-%d-mb%d" % (n, n), ["--devices", str(n), "--strategy",
                                                         "pipeline", "--micro-batches", str(n)]))
            configs.append(("data-%d" % n, ["--devices", str(n), "--strategy", "data"]))
        if args.max_devices >= 2:
            # The same micro-batched pipeline with its transfers through NCCL.
            configs.append(("pipeline-2-mb2-nccl", ["--devices", "2", "--strategy", "pipeline",
                                                    "--micro-batches", "2", "--transfers",
                                                    "nccl"]))
        if cut and args.max_devices >= 2:
            configs.append(("pipeline-2-split-at-layer3",
                            ["--devices", "2", "--strategy", "pipeline", "--split-at", cut]))
        for label, opts in configs:
            checks += 1
            plan = os.path.join(args.work, "%s_%s.plan" % (name, label))
            out = os.path.join(args.work, "%s_%s_out" % (name, label))
            try:
                summary = sh([partc, "compile", path, "-o", plan, "--batch", batch] + opts)
                sh([run, plan, "--check", ref_dir, "--rtol", "1e-3", "--atol", "1e-4",
                    "--output-dir", out, "--quiet"] + run_args)
                got = read_output(out)
                rel = float(np.max(np.abs(got - base)) / max(np.max(np.abs(base)), 1e-30))
                transfers = summary.split(" transfers")[0].rsplit(", ", 1)[-1]
                status = "ok" if rel < args.multi_tol else "FAILED"
                if rel >= args.multi_tol:
                    failures += 1
                print("  %-28s %s transfers, relative error vs 1 device %.2e: %s"
                      % (label, transfers, rel, status))
            except RuntimeError as e:
                failures += 1
                print("  %-28s FAILED\n%s" % (label, e))
    print("models: %d passed, %d failed" % (checks - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
