"""One step's gradients of torchvision models against PyTorch's float64.

  check_torch_gradients.py BIN_DIR WORK_DIR [partc-run options...]

Each model (10 classes, dropout and stochastic depth off, 4 images of
64x64) is exported for training (batch norm kept, opset 17), compiled
with --train --loss cross-entropy --optimizer none and run once: its loss
must equal PyTorch's in float64 within 1e-5 relative and every gradient
must lie near float64's: within the larger of 1e-3 and four times
PyTorch's own float32 error for that tensor (the larger of its CPU's and,
when the plan runs on --backend cuda, its GPU's without TF32), each
measured against the larger of its tensor's largest value and a
thousandth of the largest gradient of the model (gradients that are zero
in exact arithmetic, such as a norm's bias before another norm, come out
as float32 noise).

Why PyTorch's float32 sets the bar: at random initialization a few
activations of these models lie within float32 rounding of a ReLU's kink
(MobileNet v2: one of 15,360 outputs of features.15's first ReLU6 lies
within 1e-6 of zero). Whether float32 lands on float64's side of the kink depends on
the order of a sum, and a flip moves the gradients before it by up to
3e-1 of a small tensor's largest value. PyTorch's float32 on the CPU
flips on MobileNet v2 and ShuffleNet v2, on an H200 on GoogLeNet, and
partc's GPU kernels on some of the same; the CPU backend, which sums in
double, flips on none. RegNet is not among the models: at 64x64 it parts
from float64 even more.

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
    # PyTorch's float32 on the CPU and, where partc ran on a GPU, on the
    # GPU too (TF32 off).
    devices = ["cpu"]
    if "cuda" in RUN_OPTIONS and torch.cuda.is_available():
        devices.append("cuda")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    singles = []
    for device in devices:
        single = copy.deepcopy(net).to(device)
        torch.nn.functional.cross_entropy(
            single(x.to(device)), labels.to(device)).backward()
        singles.append({n: p.grad.cpu().double().numpy()
                        for n, p in single.named_parameters()})
    return mine, loss.item(), dict(reference.named_parameters()), singles


def errors(grads, params):
    """Each gradient's error in GRADS (name -> array) against PARAMS'
    float64 gradients, relative as the docstring says."""
    top = max(p.grad.abs().max().item() for p in params.values())
    return {n: np.abs(grads[n] - p.grad.numpy()).max() /
            max(p.grad.abs().max().item(), 1e-3 * top)
            for n, p in params.items() if n in grads}


failed = False
for name in MODELS:
    mine, loss, params, singles = gradients(name)
    problems = []
    loss_error = abs(float(mine["loss"]) - loss) / abs(loss)
    if loss_error > 1e-5:
        problems.append(f"loss {float(mine['loss'])} against {loss}")
    problems += [f"no gradient for {n}" for n in params
                 if "grad." + n not in mine]
    partc = errors({n[len("grad."):]: v for n, v in mine.items()
                    if n.startswith("grad.")}, params)
    # PyTorch's float32 error per tensor: the larger of the CPU's and the
    # GPU's.
    single = {n: max(e[n] for e in (errors(g, params) for g in singles))
              for n in params}
    where = max(partc, key=partc.get)
    worst, torch_worst = partc[where], max(single.values())
    # Tensor by tensor, so that a well-conditioned gradient keeps a tight
    # bound beside an ill-conditioned one.
    over = [n for n in partc if partc[n] > max(1e-3, 4 * single[n])]
    if over:
        problems.append(f"{len(over)} over their bound, such as {over[0]} "
                        f"({partc[over[0]]:.1e} against PyTorch float32's "
                        f"{single[over[0]]:.1e})")
    failed |= bool(problems)
    print(f"{'FAIL' if problems else 'PASS'} {name}: loss within "
          f"{loss_error:.1e}, {len(params)} gradients within {worst:.1e} "
          f"({where}); PyTorch float32 within {torch_worst:.1e}"
          + ("; " + "; ".join(problems) if problems else ""),
          flush=True)
print("some failed" if failed else "all passed")
sys.exit(1 if failed else 0)
