#!/usr/bin/env python3
"""Chainer's MNIST MLP trained by hand on two GPUs, for partc to beat.

Usage: chainer_mlp.py OUT_DIR [--batch B] [--steps N]

The model of Chainer's MNIST example (784-1000-1000-10, ReLU, softmax
cross-entropy, momentum SGD lr 0.01 momentum 0.9) as its users spread it
over two GPUs by hand: every Linear layer's output features split in halves,
one half per GPU, and after each layer the halves copied both ways so that
each GPU holds the whole activation (two synchronizations per layer). Beside
it the same model on one GPU in PyTorch eager. Prints one JSON line per
strategy with the milliseconds per step (inputs on the GPU, steps back to
back), and exports the model (OUT_DIR/mlp.onnx) with a batch of inputs and
labels (OUT_DIR/x.npy, labels.npy) for partc.
"""
import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--batch", type=int, default=100)
parser.add_argument("--steps", type=int, default=200)
args = parser.parse_args()
os.makedirs(args.out, exist_ok=True)
SIZES = [784, 1000, 1000, 10]


def mlp():
    torch.manual_seed(0)
    layers = []
    for i in range(3):
        layers.append(nn.Linear(SIZES[i], SIZES[i + 1]))
        if i < 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class SplitLinear(nn.Module):
    """A Linear layer whose output features are split over two GPUs; the
    result is gathered on both (each copies its half to the other)."""

    def __init__(self, full):
        super().__init__()
        half = full.out_features // 2
        self.parts = nn.ModuleList()
        for g, rows in enumerate((slice(0, half), slice(half, None))):
            part = nn.Linear(full.in_features, rows.stop - rows.start
                             if rows.stop else full.out_features - half)
            part.weight.data.copy_(full.weight.data[rows])
            part.bias.data.copy_(full.bias.data[rows])
            self.parts.append(part.to(f"cuda:{g}"))

    def forward(self, xs):
        ys = [p(x) for p, x in zip(self.parts, xs)]
        # Two synchronizations: each half to the other GPU.
        return [torch.cat([ys[0], ys[1].to("cuda:0", non_blocking=True)], 1),
                torch.cat([ys[0].to("cuda:1", non_blocking=True), ys[1]], 1)]


class ChainerParallelMLP(nn.Module):
    def __init__(self, full):
        super().__init__()
        self.layers = nn.ModuleList(
            SplitLinear(m) for m in full if isinstance(m, nn.Linear))

    def forward(self, x):
        xs = [x, x.to("cuda:1", non_blocking=True)]
        for i, layer in enumerate(self.layers):
            xs = layer(xs)
            if i < len(self.layers) - 1:
                xs = [torch.relu(v) for v in xs]
        return xs[0]


def time_steps(model, params, x, labels):
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), labels)
        loss.backward()
        opt.step()
    for _ in range(20):
        step()
    for g in range(torch.cuda.device_count()):
        torch.cuda.synchronize(g)
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    for g in range(torch.cuda.device_count()):
        torch.cuda.synchronize(g)
    return (time.perf_counter() - start) / args.steps


def emit(**kw):
    print(json.dumps(kw), flush=True)


rng = np.random.default_rng(0)
x_host = rng.standard_normal((args.batch, 784), dtype=np.float32)
labels_host = rng.integers(0, 10, args.batch)
np.save(os.path.join(args.out, "x.npy"), x_host)
np.save(os.path.join(args.out, "labels.npy"), labels_host)
model = mlp()
torch.onnx.export(model, torch.from_numpy(x_host),
                  os.path.join(args.out, "mlp.onnx"), dynamo=False,
                  opset_version=13, input_names=["input"],
                  output_names=["output"],
                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})

x = torch.from_numpy(x_host).cuda(0)
labels = torch.from_numpy(labels_host).cuda(0)
one = mlp().cuda(0)
emit(peer="torch-eager-1gpu", model="chainer-mlp", batch=args.batch,
     ms_per_step=round(time_steps(one, one.parameters(), x, labels) * 1e3, 4))
if torch.cuda.device_count() >= 2:
    split = ChainerParallelMLP(mlp())
    emit(peer="torch-chainer-split-2gpu", model="chainer-mlp",
         batch=args.batch,
         ms_per_step=round(time_steps(split, split.parameters(), x,
                                      labels) * 1e3, 4))
