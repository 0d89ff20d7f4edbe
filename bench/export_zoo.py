#!/usr/bin/env python3
"""Exports Hugging Face transformers and torchvision models to ONNX.

Random weights from a fixed seed, nothing downloaded. Each model becomes
OUT/NAME/model.onnx with OUT/NAME/test_data_set_0/{input,output}_N.pb
holding PyTorch's own (float32, CPU) outputs, the oracle partc-run --check
compares with. `--size tiny` gives models of a few hundred kilobytes for the
test suite; `--size base` the published sizes for benchmarks.

Both exporters are tried where asked (`--exporter torchscript,dynamo`);
a model one of them cannot export is reported and skipped, not fatal.
"""
import argparse
import os
import sys
import traceback

import numpy as np
import torch
from onnx import numpy_helper


def tokens(batch, seq, vocab, pad_tail=0):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    if pad_tail:
        mask[-1, seq - pad_tail:] = 0
    return ids, mask


class Outputs(torch.nn.Module):
    """Returns a transformers model's tensors as a tuple, in a fixed order."""

    def __init__(self, model, keys):
        super().__init__()
        self.model = model
        self.keys = keys

    def forward(self, *args):
        names = self.input_names
        out = self.model(**dict(zip(names, args)))
        return tuple(out[k] for k in self.keys)


def hf(name, size, batch, seq):
    import transformers as tf
    tiny = size == "tiny"
    if name == "bert":
        cfg = tf.BertConfig() if not tiny else tf.BertConfig(
            vocab_size=1000, hidden_size=64, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=128,
            max_position_embeddings=64)
        model = tf.BertModel(cfg)
        ids, mask = tokens(batch, seq, cfg.vocab_size, seq // 4)
        types = torch.zeros_like(ids)
        types[:, seq // 2:] = 1
        inputs = {"input_ids": ids, "attention_mask": mask,
                  "token_type_ids": types}
        keys = ["last_hidden_state", "pooler_output"]
    elif name == "gpt2":
        cfg = tf.GPT2Config() if not tiny else tf.GPT2Config(
            vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=64)
        model = tf.GPT2Model(cfg)
        ids, mask = tokens(batch, seq, cfg.vocab_size)
        inputs = {"input_ids": ids}
        keys = ["last_hidden_state"]
    elif name == "llama":
        # "base": a Llama of 170M parameters (TinyLlama's shape at half the
        # width and a third of the depth; 1.1B would not fit one ONNX file).
        cfg = tf.LlamaConfig(
            vocab_size=32000, hidden_size=1024, intermediate_size=2816,
            num_hidden_layers=8, num_attention_heads=16,
            num_key_value_heads=4, max_position_embeddings=2048
        ) if not tiny else tf.LlamaConfig(
            vocab_size=1000, hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=64)
        model = tf.LlamaModel(cfg)
        ids, mask = tokens(batch, seq, cfg.vocab_size)
        inputs = {"input_ids": ids}
        keys = ["last_hidden_state"]
    elif name == "vit":
        cfg = tf.ViTConfig() if not tiny else tf.ViTConfig(
            image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=128)
        model = tf.ViTModel(cfg, add_pooling_layer=False)
        g = torch.Generator().manual_seed(2)
        inputs = {"pixel_values": torch.randn(
            batch, 3, cfg.image_size, cfg.image_size, generator=g)}
        keys = ["last_hidden_state"]
    elif name == "t5enc":
        cfg = tf.T5Config() if not tiny else tf.T5Config(
            vocab_size=1000, d_model=64, d_kv=16, d_ff=128, num_layers=2,
            num_heads=4)
        model = tf.T5EncoderModel(cfg)
        ids, mask = tokens(batch, seq, cfg.vocab_size, seq // 4)
        inputs = {"input_ids": ids, "attention_mask": mask}
        keys = ["last_hidden_state"]
    else:
        raise ValueError(name)
    wrapper = Outputs(model.eval(), keys)
    wrapper.input_names = list(inputs)
    return wrapper, inputs, keys


def vision(name, size, batch):
    import torchvision
    image = 64 if size == "tiny" else 224
    model = getattr(torchvision.models, name)(num_classes=10 if size == "tiny"
                                              else 1000)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(batch, 3, image, image, generator=g)
    return model.eval(), {"input": x}, ["output"]


def write(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array),
                                        name).SerializeToString())


def export_one(name, exporter, size, batch, seq, out, opset, check=True):
    torch.manual_seed(0)
    if name in ("bert", "gpt2", "llama", "vit", "t5enc"):
        model, inputs, keys = hf(name, size, batch, seq)
    else:
        model, inputs, keys = vision(name, size, batch)
    args = tuple(inputs.values())
    with torch.no_grad():
        expected = model(*args)
    if isinstance(expected, torch.Tensor):
        expected = (expected,)
    directory = os.path.join(out, "%s-%s" % (name, exporter))
    os.makedirs(os.path.join(directory, "test_data_set_0"), exist_ok=True)
    path = os.path.join(directory, "model.onnx")
    kwargs = dict(input_names=list(inputs), output_names=keys)
    if exporter == "dynamo":
        torch.onnx.export(model, args, path, dynamo=True,
                          external_data=False, **kwargs)
    else:
        torch.onnx.export(model, args, path, dynamo=False,
                          opset_version=opset, **kwargs)
    data = os.path.join(directory, "test_data_set_0")
    for i, (k, v) in enumerate(inputs.items()):
        write(os.path.join(data, "input_%d.pb" % i), v.numpy(), k)
    for i, (k, v) in enumerate(zip(keys, expected)):
        write(os.path.join(data, "output_%d.pb" % i), v.numpy(), k)
    if not check:
        return directory, model, inputs, expected
    try:
        import onnxruntime as ort
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds = {i.name: inputs[i.name].numpy() for i in sess.get_inputs()}
        got = sess.run(None, feeds)
        err = max(float(np.abs(g - e.numpy()).max() /
                        max(1e-30, np.abs(e.numpy()).max()))
                  for g, e in zip(got, expected))
        print("%s: onnxruntime rel err %.2e" % (directory, err))
    except Exception as e:  # onnxruntime is only a second opinion
        print("%s: onnxruntime failed: %s" % (directory, str(e)[:300]))
    return directory, model, inputs, expected


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="bert,gpt2,llama,vit,t5enc")
    ap.add_argument("--exporter", default="torchscript")
    ap.add_argument("--size", choices=["tiny", "base"], default="tiny")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--opset", type=int, default=17)
    a = ap.parse_args()
    failed = 0
    for name in a.models.split(","):
        for exporter in a.exporter.split(","):
            try:
                export_one(name, exporter, a.size, a.batch, a.seq, a.out,
                           a.opset)
            except Exception as e:
                failed += 1
                print("%s-%s: export failed: %s" % (name, exporter, e))
                traceback.print_exc(limit=3)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
