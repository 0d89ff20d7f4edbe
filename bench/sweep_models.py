#!/usr/bin/env python3
"""The model sweep: whole families exported as users export them, compiled,
split and checked against PyTorch.

Families: every torchvision classification, segmentation and video model up
to --max-params parameters, and Hugging Face architectures built from
configs with random weights (BERT, GPT-2, Llama, T5's encoder and one
decoder step, ViT, Whisper's encoder, CLIP). Each model is exported with
dynamic batch (and sequence) dimensions by each exporter asked for, bound
back with `partc compile --dim`, compiled for one device and for two with
`--strategy auto`, run, and compared with PyTorch's outputs: the largest
difference over the output's largest magnitude must be at most --rtol, or
partc's output must be within twice the distance of PyTorch's fp32 output
from the model's float64 result (deep networks' fp32 rounding exceeds
1e-4: FCN-ResNet-101's PyTorch fp32 output is 3.3e-4 from its float64
one). A table row
per model and exporter: parameters, whether it compiles and matches on 1
and on 2 devices (and the layout chosen), else the first error, which
names the unsupported operator where that is the cause.

Results go to WORK/results.jsonl as they come (a rerun skips what is there
unless --redo), and the table to --table. Runs on the CPU backend by
default; pass --run-args "--backend cuda --precision fp32 --devices-per-gpu 2"
on a GPU machine.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import traceback

import numpy as np

IMAGE = {"classification": 64, "segmentation": 64}
# Models whose input size is fixed or has a floor above the default.
IMAGE_OVERRIDES = {
    "vit_b_16": 224, "vit_b_32": 224, "vit_l_16": 224, "vit_l_32": 224,
    "vit_h_14": 224, "maxvit_t": 224, "inception_v3": 96, "googlenet": 64,
    "swin_v2_t": 64, "swin_v2_s": 64, "swin_v2_b": 64, "alexnet": 224,
    "vgg11": 224, "vgg11_bn": 224, "vgg13": 224, "vgg13_bn": 224,
    "vgg16": 224, "vgg16_bn": 224, "vgg19": 224, "vgg19_bn": 224,
}
VIDEO_SHAPE = {"default": (4, 64, 64), "mvit_v1_b": (16, 224, 224),
               "mvit_v2_s": (16, 224, 224), "s3d": (16, 224, 224)}
HF_MODELS = ["bert", "gpt2", "llama", "t5-encoder", "t5-decoder-step", "vit",
             "whisper-encoder", "clip"]


class TupleOutputs:
    """Wraps a model so that it returns its tensors as a flat tuple."""

    @staticmethod
    def wrap(model, pick, names, positional=False):
        import torch

        # forward() gets one named parameter per input, so that the dynamo
        # exporter's dynamic_shapes can name them.
        params = ", ".join(names)
        scope = {}
        exec("def forward(self, %s):\n"
             "    return self.pick(self.model(%s))\n" % (
                 params, params if positional else
                 ", ".join("%s=%s" % (n, n) for n in names)), scope)

        class Wrapped(torch.nn.Module):
            forward = scope["forward"]

            def __init__(self):
                super().__init__()
                self.model = model
                self.pick = pick

        return Wrapped().eval()


def vision_models(family, max_params):
    import torchvision.models as tvm
    module = {"classification": tvm, "segmentation": tvm.segmentation,
              "video": tvm.video}[family]
    return [(family, name) for name in tvm.list_models(module=module)]


def build_vision(family, name):
    import torch
    import torchvision.models as tvm
    kwargs = {"weights": None}
    if family == "segmentation":
        kwargs.update(weights_backbone=None, num_classes=5)
        if not name.startswith("lraspp"):
            kwargs["aux_loss"] = False
    elif family == "classification":
        kwargs["num_classes"] = 10
        if name in ("googlenet", "inception_v3"):
            # PyTorch's default initialization: torchvision's own (std 0.01)
            # makes GoogLeNet's output almost independent of the input.
            kwargs["aux_logits"] = False
            kwargs["init_weights"] = False
    model = tvm.get_model(name, **kwargs).eval()
    # Weights a model starts at zero (ViT's head and class token) would make
    # its output independent of the input, and the comparison vacuous.
    with torch.no_grad():
        g = torch.Generator().manual_seed(3)
        for pname, p in model.named_parameters():
            if p.numel() > 1 and not pname.endswith("bias") and not p.any():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    g = torch.Generator().manual_seed(2)
    if family == "video":
        t, h, w = VIDEO_SHAPE.get(name, VIDEO_SHAPE["default"])
        x = torch.randn(2, 3, t, h, w, generator=g)
    else:
        size = IMAGE_OVERRIDES.get(name, IMAGE[family])
        x = torch.randn(2, 3, size, size, generator=g)
    calibrate_batch_norm(model, x)
    if family == "segmentation":
        model = TupleOutputs.wrap(model, lambda out: out["out"], ["x"],
                                   positional=True)
    return model, {"x": x}, {"x": {0: "batch"}}, ["output"]


def calibrate_batch_norm(model, x):
    """Sets batch norms' running statistics from a few random batches, as
    training would: with the initial ones (mean 0, variance 1) activations
    shrink layer by layer in many of these networks, until the output barely
    depends on the input and any comparison passes."""
    import torch
    norms = [m for m in model.modules()
             if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average
    g = torch.Generator().manual_seed(4)
    model.train()
    try:
        with torch.no_grad():
            for _ in range(3):
                model(torch.randn(x.shape, generator=g))
    finally:
        model.eval()


def tokens(batch, seq, vocab):
    import torch
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[-1, seq - seq // 4:] = 0
    return ids, mask


def build_hf(name):
    import torch
    import transformers as tf
    batch, seq = 2, 16
    text = {0: "batch", 1: "seq"}
    g = torch.Generator().manual_seed(2)
    if name == "bert":
        cfg = tf.BertConfig(vocab_size=1000, hidden_size=64,
                            num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=128, max_position_embeddings=64)
        model = tf.BertModel(cfg)
        ids, mask = tokens(batch, seq, cfg.vocab_size)
        inputs = {"input_ids": ids, "attention_mask": mask}
        pick = lambda o: (o.last_hidden_state, o.pooler_output)
        dyn, outs = {"input_ids": text, "attention_mask": text}, ["hidden", "pooled"]
    elif name == "gpt2":
        cfg = tf.GPT2Config(vocab_size=1000, n_embd=64, n_layer=2, n_head=4,
                            n_positions=64)
        model = tf.GPT2Model(cfg)
        ids, _ = tokens(batch, seq, cfg.vocab_size)
        inputs = {"input_ids": ids}
        pick = lambda o: (o.last_hidden_state,)
        dyn, outs = {"input_ids": text}, ["hidden"]
    elif name == "llama":
        cfg = tf.LlamaConfig(vocab_size=1000, hidden_size=64,
                             intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=64)
        model = tf.LlamaModel(cfg)
        ids, _ = tokens(batch, seq, cfg.vocab_size)
        inputs = {"input_ids": ids}
        pick = lambda o: (o.last_hidden_state,)
        dyn, outs = {"input_ids": text}, ["hidden"]
    elif name in ("t5-encoder", "t5-decoder-step"):
        cfg = tf.T5Config(vocab_size=1000, d_model=64, d_kv=16, d_ff=128,
                          num_layers=2, num_heads=4)
        ids, mask = tokens(batch, seq, cfg.vocab_size)
        if name == "t5-encoder":
            model = tf.T5EncoderModel(cfg)
            inputs = {"input_ids": ids, "attention_mask": mask}
            dyn = {"input_ids": text, "attention_mask": text}
        else:
            # One decoder step over the encoder's states (no cache).
            model = tf.T5Model(cfg)
            dec = ids[:, :1]
            inputs = {"input_ids": ids, "attention_mask": mask,
                      "decoder_input_ids": dec}
            dyn = {"input_ids": text, "attention_mask": text,
                   "decoder_input_ids": {0: "batch"}}
        pick = lambda o: (o.last_hidden_state,)
        outs = ["hidden"]
    elif name == "vit":
        cfg = tf.ViTConfig(image_size=32, patch_size=8, hidden_size=64,
                           num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128)
        model = tf.ViTModel(cfg, add_pooling_layer=False)
        inputs = {"pixel_values": torch.randn(batch, 3, 32, 32, generator=g)}
        pick = lambda o: (o.last_hidden_state,)
        dyn, outs = {"pixel_values": {0: "batch"}}, ["hidden"]
    elif name == "whisper-encoder":
        cfg = tf.WhisperConfig(vocab_size=1000, d_model=64,
                               encoder_layers=2, decoder_layers=2,
                               encoder_attention_heads=4,
                               decoder_attention_heads=4,
                               encoder_ffn_dim=128, decoder_ffn_dim=128,
                               num_mel_bins=16, max_source_positions=32,
                               pad_token_id=0, bos_token_id=1, eos_token_id=2,
                               decoder_start_token_id=1)
        model = tf.WhisperModel(cfg).get_encoder()
        inputs = {"input_features": torch.randn(batch, 16, 64, generator=g)}
        pick = lambda o: (o.last_hidden_state,)
        dyn, outs = {"input_features": {0: "batch"}}, ["hidden"]
    elif name == "clip":
        cfg = tf.CLIPConfig(
            text_config=dict(vocab_size=1000, hidden_size=64,
                             intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4,
                             max_position_embeddings=32),
            vision_config=dict(hidden_size=64, intermediate_size=128,
                               num_hidden_layers=2, num_attention_heads=4,
                               image_size=32, patch_size=8),
            projection_dim=32)
        model = tf.CLIPModel(cfg)
        ids, mask = tokens(batch, seq, 1000)
        inputs = {"input_ids": ids, "attention_mask": mask,
                  "pixel_values": torch.randn(batch, 3, 32, 32, generator=g)}
        pick = lambda o: (o.logits_per_image, o.text_embeds, o.image_embeds)
        dyn = {"input_ids": text, "attention_mask": text,
               "pixel_values": {0: "batch"}}
        outs = ["logits_per_image", "text_embeds", "image_embeds"]
    else:
        raise ValueError(name)
    wrapped = TupleOutputs.wrap(model.eval(), pick, list(inputs))
    return wrapped, inputs, dyn, outs


def write_pb(path, array, name):
    from onnx import numpy_helper
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array),
                                        name).SerializeToString())


def export(model, inputs, dynamic, outs, exporter, path, opset):
    import torch
    args = tuple(inputs.values())
    names = list(inputs)
    if exporter == "dynamo":
        dims = {}
        shapes = {}
        for k in names:
            shapes[k] = {a: dims.setdefault(n, torch.export.Dim(n, min=2, max=4096))
                         for a, n in dynamic.get(k, {}).items()}
        torch.onnx.export(model, args, path, dynamo=True, external_data=False,
                          input_names=names, output_names=outs,
                          dynamic_shapes=shapes)
    else:
        kwargs = {}
        if "dynamo" in torch.onnx.export.__code__.co_varnames:
            kwargs["dynamo"] = False
        dyn = {k: {a: n for a, n in v.items()} for k, v in dynamic.items()}
        torch.onnx.export(model, args, path, opset_version=opset,
                          input_names=names, output_names=outs,
                          dynamic_axes=dyn, **kwargs)


def first_error(text, directory):
    lines = [l for l in text.splitlines() if "error" in l.lower()]
    line = lines[0] if lines else (text.strip().splitlines() or [""])[-1]
    return line.replace(directory + "/", "").strip()[:260]


def exact_outputs(model, inputs):
    """The model's outputs in float64 (a copy of it), or None where it does
    not run in float64."""
    import copy
    import torch
    try:
        m = copy.deepcopy(model).double()
        args = [v.double() if v.is_floating_point() else v for v in inputs.values()]
        with torch.no_grad():
            out = m(*args)
        return (out,) if isinstance(out, torch.Tensor) else tuple(out)
    except Exception:
        return None


def relative_error(got, want):
    """The largest difference over the largest magnitude of `want`."""
    want = np.asarray(want, np.float64)
    got = np.asarray(got, np.float64)
    if got.shape != want.shape:
        return float("inf")
    if want.size == 0:
        return 0.0
    if not np.array_equal(np.isfinite(got), np.isfinite(want)):
        return float("inf")
    finite = np.isfinite(want)
    scale = max(np.abs(want[finite]).max(initial=0.0), 1e-30)
    return float(np.abs(got[finite] - want[finite]).max(initial=0.0) / scale)


def output_error(out_dir, names, expected, exact):
    """partc's outputs against PyTorch's fp32 ones and, where the model runs
    in float64, partc's and PyTorch's fp32 outputs against that: each the
    largest difference over the output's largest magnitude, the worst
    output's. (fp32 rounding grows with depth; an element-wise relative
    test fails on values near zero that PyTorch's own fp32 gets as wrong.)"""
    import onnx
    from onnx import numpy_helper
    got = {}
    for f in os.listdir(out_dir):
        if f.startswith("output_") and f.endswith(".pb"):
            t = onnx.load_tensor(os.path.join(out_dir, f))
            got[t.name] = numpy_helper.to_array(t)
    vs_torch = vs_exact = torch_vs_exact = 0.0
    for i, (name, e) in enumerate(zip(names, expected)):
        if name not in got:
            return float("inf"), None, None
        vs_torch = max(vs_torch, relative_error(got[name], e.numpy()))
        if exact is not None:
            x = exact[i].numpy()
            vs_exact = max(vs_exact, relative_error(got[name], x))
            torch_vs_exact = max(torch_vs_exact, relative_error(e.numpy(), x))
    if exact is None:
        return vs_torch, None, None
    return vs_torch, vs_exact, torch_vs_exact


def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return 124, "timed out after %d s" % timeout


def sweep_one(family, name, exporter, a):
    import torch
    row = {"family": family, "model": name, "exporter": exporter}
    torch.manual_seed(0)
    start = time.time()
    try:
        if family == "hf":
            model, inputs, dynamic, outs = build_hf(name)
        else:
            model, inputs, dynamic, outs = build_vision(family, name)
    except Exception as e:
        row["error"] = "build: " + str(e).splitlines()[0][:200]
        return row
    params = sum(p.numel() for p in model.parameters())
    row["params_m"] = round(params / 1e6, 2)
    if params > a.max_params:
        row["error"] = "skipped: over %.0fM parameters" % (a.max_params / 1e6)
        return row
    with torch.no_grad():
        expected = model(*inputs.values())
    if isinstance(expected, torch.Tensor):
        expected = (expected,)
    exact = exact_outputs(model, inputs)
    # Both samples of the batch are random; equal outputs would mean the
    # model ignores its input and the comparison proves nothing.
    first = expected[0]
    if first.dim() > 0 and first.shape[0] > 1 and torch.equal(first[0], first[1]):
        row["error"] = "output does not depend on the input (a vacuous check)"
        return row
    directory = os.path.join(a.work, "%s-%s" % (name, exporter))
    data = os.path.join(directory, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    path = os.path.join(directory, "model.onnx")
    try:
        export(model, inputs, dynamic, outs, exporter, path, a.opset)
    except Exception as e:
        # The exporters' messages open with banners; the cause is the first
        # line naming an error, else the last line.
        msg = [l.strip() for l in re.sub(r"\x1b\[[0-9;]*m", "", str(e)).splitlines()
               if l.strip()]
        cause = [l for l in msg if re.search(r"Error|Unsupported|error:", l)]
        text = (cause[0] if cause else msg[-1]) if msg else type(e).__name__
        row["error"] = "export: " + text[:220]
        return row
    for i, (k, v) in enumerate(inputs.items()):
        write_pb(os.path.join(data, "input_%d.pb" % i), v.numpy(), k)
    for i, (k, v) in enumerate(zip(outs, expected)):
        write_pb(os.path.join(data, "output_%d.pb" % i), v.numpy(), k)
    # Symbolic dimensions as the exporter named them, bound to the sizes
    # PyTorch ran with.
    import onnx
    graph = onnx.load(path, load_external_data=False).graph
    bindings = {}
    values = list(inputs.values())
    for i, vi in enumerate(graph.input[:len(values)]):
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.dim_param:
                bindings[d.dim_param] = values[i].shape[axis]
    dims = []
    for dim, value in bindings.items():
        dims += ["--dim", "%s=%d" % (dim, value)]
    run_args = a.run_args.split()
    for label, extra in (("1", []), ("2", ["--devices", "2"])):
        plan = os.path.join(directory, "p%s.plan" % label)
        rc, out = run([os.path.join(a.bin, "partc"), "compile", path, "-o",
                       plan] + dims + extra, a.timeout)
        row["compile" + label] = rc == 0
        if rc != 0:
            row.setdefault("error", "compile (%s device%s): %s" % (
                label, "s" if label == "2" else "", first_error(out, directory)))
            continue
        m = re.search(r"strategy=\w+: (\d+ stages? x \d+ replicas?)", out)
        if m and label == "2":
            row["layout2"] = m.group(1)
        out_dir = os.path.join(directory, "out" + label)
        feeds = []
        for i, k in enumerate(inputs):
            feeds += ["--input", "%s=%s" % (k, os.path.join(data, "input_%d.pb" % i))]
        rc, out = run([os.path.join(a.bin, "partc-run"), plan, "--output-dir",
                       out_dir, "--quiet"] + feeds + run_args, a.timeout)
        if rc != 0:
            row["match" + label] = False
            row.setdefault("error", "run (%s device%s): %s" % (
                label, "s" if label == "2" else "", first_error(out, directory)))
            continue
        err, exact_err, torch_err = output_error(out_dir, outs, expected, exact)
        row["err" + label] = float("%.2e" % err)
        ok = err <= a.rtol
        if exact_err is not None:
            row["exact_err" + label] = float("%.2e" % exact_err)
            row["torch_exact_err"] = float("%.2e" % torch_err)
            # About as close to the exact result as PyTorch's own fp32 (two
            # fp32 computations in different orders: within a factor 2).
            ok = ok or exact_err <= max(a.rtol, 2 * torch_err)
        row["match" + label] = ok
        if not ok:
            row.setdefault("error", "%s device%s: error %.2e of the output's "
                           "largest magnitude" % (label, "s" if label == "2" else "",
                                                  err))
    row["seconds"] = round(time.time() - start, 1)
    return row


def table(rows, header):
    lines = [header, "",
             "| family | model | exporter | params (M) | 1 device | 2 devices | PyTorch fp32 against fp64 | note |",
             "|---|---|---|---|---|---|---|---|"]
    def mark(r, k):
        if ("compile" + k) not in r:
            return "-"
        if not r["compile" + k]:
            return "no compile"
        if "err" + k in r:
            text = "%.1e" % r["err" + k]
            if "exact_err" + k in r:
                text += " (fp64: %.1e)" % r["exact_err" + k]
            return text if r.get("match" + k) else "**%s**" % text
        return "match" if r.get("match" + k) else "**mismatch**"
    for r in rows:
        two = mark(r, "2")
        if r.get("layout2") and r.get("match2"):
            two += " (%s)" % r["layout2"]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["family"], r["model"], r["exporter"], r.get("params_m", "-"),
            mark(r, "1"), two, "%.1e" % r["torch_exact_err"]
            if "torch_exact_err" in r else "-",
            r.get("error", "").replace("|", "/")))
    passed = sum(1 for r in rows if r.get("match1") and r.get("match2"))
    lines += ["", "%d of %d exports compile, split over 2 devices and match "
              "PyTorch on both." % (passed, len(rows))]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--families", default="classification,segmentation,video,hf")
    ap.add_argument("--models", default="", help="only these (comma-separated)")
    ap.add_argument("--exporters", default="torchscript")
    ap.add_argument("--max-params", type=float, default=150e6)
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--budget", type=int, default=0,
                    help="stop starting models after this many seconds")
    ap.add_argument("--run-args", default="")
    ap.add_argument("--table", help="write the markdown table here")
    ap.add_argument("--header", default="## Sweep")
    ap.add_argument("--redo", action="store_true")
    ap.add_argument("--keep", action="store_true",
                    help="keep each model's export, data and plans")
    ap.add_argument("--require-all", action="store_true",
                    help="exit 1 unless every export matches on 1 and 2 devices")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    results = os.path.join(a.work, "results.jsonl")
    done = {}
    if os.path.exists(results) and not a.redo:
        for line in open(results):
            r = json.loads(line)
            done[(r["model"], r["exporter"])] = r
    todo = []
    for family in a.families.split(","):
        if family == "hf":
            try:
                import transformers  # noqa: F401
                todo += [("hf", n) for n in HF_MODELS]
            except ImportError:
                print("hf: transformers is not installed; skipped")
        else:
            todo += vision_models(family, a.max_params)
    if a.models:
        keep = set(a.models.split(","))
        todo = [t for t in todo if t[1] in keep]
    start = time.time()
    rows = []
    with open(results, "a") as log:
        for family, name in todo:
            for exporter in a.exporters.split(","):
                key = (name, exporter)
                if key in done:
                    rows.append(done[key])
                    continue
                if a.budget and time.time() - start > a.budget:
                    continue
                try:
                    row = sweep_one(family, name, exporter, a)
                except Exception as e:
                    traceback.print_exc(limit=2)
                    row = {"family": family, "model": name, "exporter": exporter,
                           "error": "sweep: " + str(e)[:200]}
                rows.append(row)
                if not a.keep:
                    # Exports and plans hold the weights three times over:
                    # a whole sweep would fill a disk.
                    shutil.rmtree(os.path.join(a.work, "%s-%s" % key),
                                  ignore_errors=True)
                log.write(json.dumps(row) + "\n")
                log.flush()
                print(json.dumps(row), flush=True)
    if a.table:
        with open(a.table, "w") as f:
            f.write(table(rows, a.header))
    failed = [r for r in rows if not (r.get("match1") and r.get("match2"))]
    print("sweep: %d of %d exports match on 1 and 2 devices" %
          (len(rows) - len(failed), len(rows)))
    for r in failed:
        print("sweep: FAIL %s-%s: %s" % (r["model"], r["exporter"], r.get("error", "")))
    return 1 if a.require_all and failed else 0


if __name__ == "__main__":
    sys.exit(main())
