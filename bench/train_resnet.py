"""PyTorch's side of the training benchmark and check (docs/benchmarks.md).

  train_resnet.py OUT_DIR [--model resnet50] [--batch 64] [--size 224]
                  [--steps 5] [--timed 20]

Exports the torchvision model (random weights, seed 0, for training: batch
norm kept) to OUT_DIR/model.onnx with one batch of inputs (x.npy) and
labels (labels.npy), then trains it on that batch with torch.optim.SGD (lr
0.1, momentum 0.9, weight decay 1e-4), cross-entropy, BatchNorm in training
mode -- what `partc compile --train --loss cross-entropy --optimizer sgd
--lr 0.1 --momentum 0.9 --weight-decay 1e-4` compiles:
  * reference: `--steps` steps in strict fp32 (no TF32), printing each loss
    as "ref step K loss V", the numbers partc-run --steps must reproduce,
    and in float64 ("ref64 step K loss V");
  * timing: ms per step of eager (NCHW and channels last) and
    torch.compile (TF32 allowed, inputs on the GPU, synchronised at the
    end), one JSON line each.
"""
import argparse, copy, json, os, time

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--model", default="resnet50")
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--size", type=int, default=224)
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--timed", type=int, default=20)
ap.add_argument("--no-compile", action="store_true")
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)

torch.manual_seed(0)
net = getattr(torchvision.models, args.model)().train()
x = torch.randn(args.batch, 3, args.size, args.size)
labels = torch.randint(0, 1000, (args.batch,))
# Exported for training, so batch norm stays a node (an eval-mode export
# folds it into the convolutions). Tracing runs the copy's forward, which
# moves its running statistics: PyTorch starts from the file's as partc.
path = os.path.join(args.out, "model.onnx")
torch.onnx.export(copy.deepcopy(net), x, path, dynamo=False,
                  opset_version=13, input_names=["input"],
                  output_names=["output"],
                  training=torch.onnx.TrainingMode.TRAINING)
exported = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
            for t in onnx.load(path).graph.initializer}
np.save(os.path.join(args.out, "x.npy"), x.numpy())
np.save(os.path.join(args.out, "labels.npy"), labels.numpy().astype(np.int64))
state = {k: exported.get(k, v).clone() for k, v in net.state_dict().items()}


def trainer(compiled, dtype=torch.float32, channels_last=False):
    model = getattr(torchvision.models, args.model)()
    model.load_state_dict(state)
    model = model.to(dtype).cuda()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                          weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss
    return torch.compile(step) if compiled else step


xc, yc = x.cuda(), labels.cuda()
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
step = trainer(False)
for k in range(args.steps):
    print(f"ref step {k} loss {step(xc, yc).item():.7g}", flush=True)
# float64: how far float32 itself drifts (ResNet-50's gradients are
# ill-conditioned at initialization).
step = trainer(False, torch.float64)
for k in range(args.steps):
    print(f"ref64 step {k} loss {step(xc.double(), yc).item():.7g}",
          flush=True)

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
# Channels last is what a user tuning for tensor cores would add to eager.
for name, compiled, last in (("eager", False, False),
                             ("eager-channels-last", False, True),
                             ("compile", True, False)):
    if compiled and args.no_compile:
        continue
    step = trainer(compiled, channels_last=last)
    if last:
        xc = xc.contiguous(memory_format=torch.channels_last)
    else:
        xc = xc.contiguous()
    for _ in range(5):
        step(xc, yc)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.timed):
        step(xc, yc)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / args.timed
    print(json.dumps({"peer": "torch-" + name, "model": args.model,
                      "batch": args.batch, "size": args.size,
                      "ms_per_step": round(ms, 2),
                      "images_per_s": round(args.batch * 1e3 / ms, 1)}),
          flush=True)
