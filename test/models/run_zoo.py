#!/usr/bin/env python3
"""Models as users export them, checked against PyTorch for every strategy.

Two sources:
  * zoo/NAME-EXPORTER/: Hugging Face transformers (BERT, GPT-2, Llama with
    grouped-query attention, ViT, T5's encoder) at a tiny size with random
    weights, exported by PyTorch 2.11's TorchScript and dynamo exporters on
    a GPU machine (bench/export_zoo.py) and committed with PyTorch's
    outputs; transformers is not a Debian package, so they cannot be made
    here at test time.
  * torchvision's MobileNetV3, EfficientNet, ConvNeXt, RegNet and Swin,
    and its FCN, DeepLabV3 and LR-ASPP segmentation models (bilinear
    Resize), exported at test time by Debian's PyTorch (random weights,
    64x64).

Each is compiled for one device, a 2-stage pipeline with 2 micro-batches
and 2 data-parallel replicas, and every plan's outputs must match
PyTorch's (rtol 1e-3, atol 1e-4 by default). A model a strategy cannot
split fails the test: these exports are expected to split. With
--compile-args "--precision bf16" (and a tolerance to match), the same
checks run the 16-bit plans against PyTorch's fp32 outputs.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VISION = ["mobilenet_v3_small", "efficientnet_b0", "convnext_tiny",
          "regnet_y_400mf", "swin_t"]
SEGMENTATION = ["fcn_resnet50", "deeplabv3_resnet50",
                "lraspp_mobilenet_v3_large"]


class SegmentationOutput:
    """The 'out' entry of a segmentation model's result dictionary."""

    def __init__(self, model):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, x):
                return self.model(x)["out"]

        self.module = Wrapped().eval()
STRATEGIES = {
    "single": [],
    "pipeline": ["--devices", "2", "--strategy", "pipeline",
                 "--micro-batches", "2"],
    "data": ["--devices", "2", "--strategy", "data"],
}


def export_vision(work):
    """Exports the torchvision models into WORK; returns their directories."""
    import warnings
    # The exporter's warnings about train-mode dropout and missing shape
    # inference are expected; they would bury the results in the log.
    warnings.filterwarnings("ignore")
    try:
        import torch
        import torchvision
        from onnx import numpy_helper
    except ImportError as e:
        print("SKIPPED torchvision models: need python3-torch, "
              "python3-torchvision and python3-onnx (%s)" % e)
        return [], []
    dirs, failures = [], []
    for name in VISION + SEGMENTATION:
        directory = os.path.join(work, name)
        try:
            export_one(name, directory)
            dirs.append(directory)
        except Exception as e:  # one model's export must not hide the rest
            print("FAIL %-28s export   %s: %s" % (name, type(e).__name__, e))
            failures.append("%s export" % name)
    return dirs, failures


def export_one(name, directory):
    """Exports torchvision's NAME with its input and PyTorch's output."""
    import torch
    import torchvision
    from onnx import numpy_helper
    data = os.path.join(directory, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    torch.manual_seed(0)
    if name in SEGMENTATION:
        build = getattr(torchvision.models.segmentation, name)
        model = SegmentationOutput(build(
            weights=None, weights_backbone=None, num_classes=10)).module
    else:
        model = getattr(torchvision.models, name)(num_classes=10).eval()
    # torchvision starts ConvNeXt's layer scales at 1e-6 and many biases
    # at zero, which would hide whatever a plan does to them (partc folds
    # a layer scale into its product's weights): random ones make every
    # op's contribution visible in the outputs.
    with torch.no_grad():
        for parameter_name, p in model.named_parameters():
            if parameter_name.endswith("layer_scale"):
                p.copy_(torch.rand_like(p) * 0.9 + 0.1)
            elif parameter_name.endswith("bias") and not p.any():
                p.copy_(torch.randn_like(p) * 0.05)
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        y = model(x)
    kwargs = dict(opset_version=17, input_names=["input"],
                  output_names=["output"])
    try:
        torch.onnx.export(model, x, os.path.join(directory, "model.onnx"),
                          dynamo=False, **kwargs)
    except TypeError:  # PyTorch before the dynamo exporter
        torch.onnx.export(model, x, os.path.join(directory, "model.onnx"),
                          **kwargs)
    for file, value, tensor in (("input_0.pb", x, "input"),
                                ("output_0.pb", y, "output")):
        with open(os.path.join(data, file), "wb") as f:
            f.write(numpy_helper.from_array(value.numpy(), tensor)
                    .SerializeToString())


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", default="", help="models whose name contains this")
    ap.add_argument("--run-args", default="",
                    help="extra partc-run arguments (e.g. --backend cuda)")
    ap.add_argument("--compile-args", default="",
                    help="extra partc compile arguments (e.g. --precision "
                         "bf16)")
    ap.add_argument("--rtol", default="1e-3")
    ap.add_argument("--atol", default="1e-4")
    ap.add_argument("--no-vision", action="store_true")
    a = ap.parse_args()
    # Lines in the order they happen, even through a pipe, so that a log cut
    # short still shows the check that failed.
    sys.stdout.reconfigure(line_buffering=True)
    os.makedirs(a.work, exist_ok=True)
    zoo = os.path.join(HERE, "zoo")
    dirs = [os.path.join(zoo, d) for d in sorted(os.listdir(zoo))]
    failures = []
    if not a.no_vision:
        exported, failures = export_vision(a.work)
        dirs += exported
    failed = checked = len(failures)
    for directory in dirs:
        name = os.path.basename(directory)
        if a.only and a.only not in name:
            continue
        for strategy, flags in STRATEGIES.items():
            plan = os.path.join(a.work, "%s-%s.plan" % (name, strategy))
            steps = [
                [os.path.join(a.bin, "partc"), "compile",
                 os.path.join(directory, "model.onnx"), "-o", plan, "--quiet"]
                + flags + a.compile_args.split(),
                [os.path.join(a.bin, "partc-run"), plan, "--check",
                 os.path.join(directory, "test_data_set_0"), "--rtol", a.rtol,
                 "--atol", a.atol, "--quiet"] + a.run_args.split(),
            ]
            checked += 1
            for step in steps:
                try:
                    p = subprocess.run(step, capture_output=True, text=True,
                                       timeout=600)
                except subprocess.TimeoutExpired:
                    p = subprocess.CompletedProcess(
                        step, -1, "", "still running after 600 s: %s" %
                        " ".join(step))
                if p.returncode != 0:
                    failed += 1
                    failures.append("%s %s" % (name, strategy))
                    print("FAIL %-28s %-8s %s" % (name, strategy,
                                                  (p.stdout + p.stderr)[-800:]))
                    break
            else:
                print("ok   %-28s %s" % (name, strategy))
    print("zoo: %d of %d checks passed%s" % (
        checked - failed, checked,
        "; failed: " + ", ".join(failures) if failures else ""))
    return 1 if failed or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
