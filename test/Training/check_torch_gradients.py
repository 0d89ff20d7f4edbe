"""One step's gradients of torchvision models against PyTorch's float64.

  check_torch_gradients.py BIN_DIR WORK_DIR [partc-run options...]

Each model (10 classes, dropout and stochastic depth off, 4 images of
64x64) is exported for training (batch norm kept, opset 17), compiled
with --train --loss cross-entropy --optimizer none and run once: its loss
must equal PyTorch's in float64 within 1e-5 relative and every gradient
within 1e-3 of the larger of its tensor's largest value and a thousandth
of the largest gradient of the model (gradients that are zero in exact
arithmetic, such as a norm's bias before another norm, come out as
float32 noise). float32 against float64: these models stay within 1e-4
(RegNet is not among them: at 64x64 its last stage normalizes 16 values
per channel, and PyTorch's own float32 gradients there part from float64
by 1e-1).

Prints one line per model; exits 1 if any fails, and 0 with SKIPPED where
PyTorch is missing.
"""
import copy
import glob
import inspect
import os
import subprocess
import sys
import warnings

try:
    import numpy as np
    import onnx
    import torch
    import torchvision
    from onnx import numpy_helper
except ImportError:
    print("SKIPPED: needs python3-torch and python3-torchvision")
    sys.exit(0)

BIN, WORK = sys.argv[1], sys.argv[2]
RUN_OPTIONS = sys.argv[3:]
MODELS = ["mobilenet_v2", "mobilenet_v3_small", "shufflenet_v2_x0_5",
          "squeezenet1_0", "efficientnet_b0", "googlenet"]
warnings.filterwarnings("ignore")
torch.set_num_threads(2)


def gradients(name):
    work = os.path.join(WORK, name)
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(4)
    options = {"num_classes": 10}
    if name == "googlenet":
        options.update(aux_logits=False, init_weights=False)
    net = getattr(torchvision.models, name)(**options).train()
    for m in net.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        if isinstance(m, torchvision.ops.StochasticDepth):
            m.p = 0.0
    x = torch.randn(4, 3, 64, 64)
    labels = torch.randint(0, 10, (4,))
    legacy = ({"dynamo": False} if "dynamo" in inspect.signature(
        torch.onnx.export).parameters else {})
    path = os.path.join(work, "model.onnx")
    torch.onnx.export(copy.deepcopy(net), x, path, opset_version=17,
                      input_names=["input"], output_names=["output"],
                      training=torch.onnx.TrainingMode.TRAINING, **legacy)
    # Tracing runs the copy's forward: both sides start from the file.
    exported = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
                for t in onnx.load(path).graph.initializer}
    net.load_state_dict({k: exported.get(k, v)
                         for k, v in net.state_dict().items()})
    np.save(os.path.join(work, "x.npy"), x.numpy())
    np.save(os.path.join(work, "labels.npy"), labels.numpy())
    plan = os.path.join(work, "model.plan")
    out = os.path.join(work, "out")
    subprocess.run([os.path.join(BIN, "partc"), "compile", path, "-o", plan,
                    "--train", "--loss", "cross-entropy", "--optimizer",
                    "none", "--quiet"], check=True)
    subprocess.run([os.path.join(BIN, "partc-run"), plan, "--input",
                    "input=" + os.path.join(work, "x.npy"), "--input",
                    "labels=" + os.path.join(work, "labels.npy"),
                    "--output-dir", out, "--quiet"] + RUN_OPTIONS, check=True)
    mine = {}
    for f in glob.glob(os.path.join(out, "output_*.pb")):
        t = onnx.TensorProto()
        with open(f, "rb") as stream:
            t.ParseFromString(stream.read())
        mine[t.name] = numpy_helper.to_array(t)
    reference = copy.deepcopy(net).double()
    loss = torch.nn.functional.cross_entropy(reference(x.double()), labels)
    loss.backward()
    return mine, loss.item(), dict(reference.named_parameters())


failed = False
for name in MODELS:
    mine, loss, params = gradients(name)
    problems = []
    loss_error = abs(float(mine["loss"]) - loss) / abs(loss)
    if loss_error > 1e-5:
        problems.append(f"loss {float(mine['loss'])} against {loss}")
    top = max(p.grad.abs().max().item() for p in params.values())
    worst, where = 0.0, None
    for n, p in params.items():
        if "grad." + n not in mine:
            problems.append(f"no gradient for {n}")
            continue
        ref = p.grad.numpy()
        error = np.abs(mine["grad." + n] - ref).max() / max(
            np.abs(ref).max(), 1e-3 * top)
        if error > worst:
            worst, where = error, n
    if worst > 1e-3:
        problems.append(f"{where} differs by {worst:.1e}")
    failed |= bool(problems)
    print(f"{'FAIL' if problems else 'PASS'} {name}: loss within "
          f"{loss_error:.1e}, {len(params)} gradients within {worst:.1e} "
          f"({where})" + ("; " + "; ".join(problems) if problems else ""),
          flush=True)
print("some failed" if failed else "all passed")
sys.exit(1 if failed else 0)
