"""Checks training across devices against one device and against DDP.

  check_parallel.py BIN_DIR WORK_DIR [partc-run options...]

Each model is made in PyTorch (seeded) and exported for training. The plan
for 1 device and the data-parallel plans for 2 and 4 devices train it for
10 steps on the same batches: every step's loss and every final parameter
and optimizer state of the N-device plan must be the 1-device plan's
within 1e-5 (relative; of the tensor's largest value), since the replicas
average gradients of equal shares of the batch (1e-4 under AdamW). On a
GPU the states are compared within 1e-4 (2e-4 under AdamW): the libraries
choose other algorithms for a share's shapes, and AdamW's update divides
tiny gradients by their own size. Dropout draws the same
mask on N devices as on one (each replica numbers its rows' elements from
their place in the batch).

Gradient accumulation (--micro-batches M) is checked the same way: on one
device and on 2 replicas, the M micro-batches' mean gradient must give the
1-device plan's steps.

Training pipelines are checked the same way: S stages (--strategy
pipeline, the stages cut by the cost model) with M micro-batches under
the 1F1B and GPipe schedules, and hybrids of S stages x R replicas, must
give the 1-device plan's steps.

Batch normalization is the exception, as in DistributedDataParallel: each
replica normalizes with its own share's statistics. That case is checked
against DDP's arithmetic in PyTorch float32 (N model replicas, each on its
rows, gradients averaged, replica 0's running statistics saved) within
1e-4. Under micro-batches (accumulation, pipelines) batch norm normalizes
each micro-batch with its own statistics and moves the running ones once
per micro-batch, as PyTorch's accumulation loop and the tutorial's
hand-made pipeline do; that is checked against such a loop in PyTorch.

Prints one line per case and plan; exits 1 if any fails. PARTC_CONFIGS
(default below) lists the plans to check, for GPU machines with fewer
GPUs than plan devices and no --devices-per-gpu: NxM is N data-parallel
devices with M micro-batches each, pipeSxM and gpipeSxM an S-stage
pipeline (1F1B, GPipe) of M micro-batches, hybridSxRxM S stages x R
replicas. PARTC_COMPILE_OPTIONS adds options to every plan but the
1-device reference (--recompute all: pipelines and replicas that compute
activations again against the 1-device plan that keeps them).
"""
import copy
import inspect
import os
import subprocess
import sys
import warnings

try:
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from tiny_gpt import TinyGpt
except ImportError:
    print("SKIPPED: needs python3-torch")
    sys.exit(0)

BIN, WORK = sys.argv[1], sys.argv[2]
RUN_OPTIONS = sys.argv[3:]
STATE_TOLERANCE = 1e-4 if "cuda" in RUN_OPTIONS else 1e-5
# AdamW on the GPU: an element whose gradient is near zero moves by about
# lr whatever its size, so the order of a sum's float additions (a bias
# gradient summed in row chunks, session 29: 1.0e-4 on one weight of the
# tiny GPT with 2 replicas on one H200) shows in the weights.
ADAMW_GPU_TOLERANCE = 2e-4
# The same on the CPU: OpenBLAS's AVX-512 kernels sum a share's products in
# another order than the whole batch's (2.8e-5 on one weight of the tiny
# GPT, 2 replicas x 2 micro-batches, on an AVX-512 Xeon; below 1e-5 on
# machines without AVX-512).
ADAMW_CPU_TOLERANCE = 1e-4
STEPS = 10
DEFAULT_CONFIGS = ("2x1,4x1,1x2,1x4,2x2,pipe2x4,gpipe2x4,pipe4x4,gpipe4x2,"
                   "pipe2x1,hybrid2x2x2")


def parse_config(token):
    """(label, devices, partc compile options) of one PARTC_CONFIGS entry."""
    kind = token.rstrip("0123456789x")
    n = [int(v) for v in token[len(kind):].split("x")]
    if kind == "":
        devices, micro = n
        return (f"devices={devices} micro-batches={micro}", devices,
                ["--devices", str(devices), "--micro-batches", str(micro)] +
                (["--strategy", "data"] if devices > 1 else []))
    if kind in ("pipe", "gpipe"):
        stages, micro = n
        schedule = "1f1b" if kind == "pipe" else "gpipe"
        return (f"pipeline stages={stages} micro-batches={micro} {schedule}",
                stages, ["--devices", str(stages), "--strategy", "pipeline",
                         "--micro-batches", str(micro)] +
                (["--schedule", schedule] if micro > 1 else []))
    if kind == "hybrid":
        stages, replicas, micro = n
        return (f"hybrid stages={stages} replicas={replicas} "
                f"micro-batches={micro}", stages * replicas,
                ["--devices", str(stages * replicas), "--stages", str(stages),
                 "--replicas", str(replicas), "--micro-batches", str(micro)])
    sys.exit(f"unknown PARTC_CONFIGS entry '{token}'")


CONFIGS = [parse_config(c) for c in
           os.environ.get("PARTC_CONFIGS", DEFAULT_CONFIGS).split(",")]
# PARTC_COMPILE_OPTIONS: more partc compile options for every plan but the
# 1-device reference (e.g. --recompute all, checked against keeping all).
CONFIGS = [(label, devices, placement +
            os.environ.get("PARTC_COMPILE_OPTIONS", "").split())
           for label, devices, placement in CONFIGS]
os.makedirs(WORK, exist_ok=True)
warnings.filterwarnings("ignore")
torch.set_num_threads(2)
failed = False


def run(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def state_file(directory, name):
    """--save-state's file of a tensor: bytes outside [A-Za-z0-9.-] as _XX."""
    return os.path.join(directory, "".join(
        c if c.isascii() and (c.isalnum() or c in ".-") else f"_{ord(c):02x}"
        for c in name) + ".npy")


def export(net, x, path, fold=True):
    """torch.onnx.export for training; returns the weights as exported.
    Without `fold` the exporter keeps tied weights one initializer."""
    legacy = ({"dynamo": False} if "dynamo" in inspect.signature(
        torch.onnx.export).parameters else {})
    torch.onnx.export(copy.deepcopy(net), x, path, opset_version=13,
                      input_names=["input"], output_names=["output"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=fold, **legacy)
    exported = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
                for t in onnx.load(path).graph.initializer}
    net.load_state_dict({k: exported.get(k, v)
                         for k, v in net.state_dict().items()})


def train_partc(work, placement, batches, options, tag):
    """Compiles with the `placement` options and runs STEPS steps over
    `batches` (a list of (x, labels)); returns the losses and the
    --save-state directory."""
    plan = os.path.join(work, f"{tag}.plan")
    x0 = batches[0][0]
    run(f"{BIN}/partc", "compile", os.path.join(work, "model.onnx"), "-o",
        plan, "--batch", str(x0.shape[0]), "--train", "--quiet",
        *placement, *options)
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "input.npy"),
            np.concatenate([b[0].numpy() for b in batches]))
    np.save(os.path.join(data, "labels.npy"),
            np.concatenate([b[1].numpy() for b in batches]))
    state = os.path.join(work, f"{tag}_state")
    out = run(f"{BIN}/partc-run", plan, "--data", data, "--epochs",
              str(STEPS // len(batches)), "--save-state", state, "--quiet",
              *RUN_OPTIONS)
    losses = [float(line.split()[3]) for line in out.splitlines()
              if line.startswith("step ")]
    return losses, state


def compare_states(got_dir, want, skip_key_bias=False):
    """Worst relative difference of every tensor in `want` (state file name
    -> array), relative to the tensor's largest value (at least 1e-3)."""
    worst, worst_name = 0.0, ""
    for name, expected in want.items():
        got = np.load(os.path.join(got_dir, name)).astype(np.float64)
        expected = np.asarray(expected, np.float64)
        if skip_key_bias and "qkv.bias" in name:
            # The key bias's true gradient is zero (softmax ignores a shift
            # shared by all keys): AdamW moves it by the sign of rounding
            # noise, so only the query and value parts compare.
            third = expected.shape[0] // 3
            keep = np.r_[0:third, 2 * third:3 * third]
            got, expected = got[keep], expected[keep]
        err = np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-3)
        if err > worst:
            worst, worst_name = err, name
    return worst, worst_name


def report(case, ok, detail):
    global failed
    failed |= not ok
    print(f"{'PASS' if ok else 'FAIL'} {case}: {detail}", flush=True)


def states_of(directory):
    return {f: np.load(os.path.join(directory, f))
            for f in sorted(os.listdir(directory)) if f.endswith(".npy")}


def check_against_one_device(name, net, batches, options, adamw=False,
                             fold=True):
    """N-device and M-micro-batch plans against the 1-device plan."""
    work = os.path.join(WORK, name)
    os.makedirs(work, exist_ok=True)
    export(net, batches[0][0], os.path.join(work, "model.onnx"), fold)
    one, one_state = train_partc(work, [], batches, options, "one")
    want = states_of(one_state)
    for label, _, placement in CONFIGS:
        losses, state = train_partc(work, placement, batches, options,
                                    label.replace(" ", "_"))
        loss_err = max((abs(g - w) / max(abs(w), 1e-3)
                        for g, w in zip(losses, one)), default=1.0)
        err, worst = compare_states(state, want, skip_key_bias=adamw)
        if adamw:
            tolerance = (ADAMW_GPU_TOLERANCE if "cuda" in RUN_OPTIONS
                         else ADAMW_CPU_TOLERANCE)
        else:
            tolerance = STATE_TOLERANCE
        ok = (len(losses) == STEPS and loss_err <= 1e-5 and err <= tolerance)
        report(f"{name} {label}", ok,
               f"loss {one[0]:.6g} -> {one[-1]:.6g}; every step's loss "
               f"within {loss_err:.1e} of 1 device's, {len(want)} state "
               f"tensors within {err:.1e} ({worst})")


def report_against_pytorch(case, losses, state, want_losses, model,
                           reference, states_note):
    """Every step's loss and `model`'s float state (PyTorch's result)
    against partc's losses and --save-state directory, within 1e-4."""
    loss_err = max((abs(g - w) / max(abs(w), 1e-3)
                    for g, w in zip(losses, want_losses)), default=1.0)
    want = {os.path.basename(state_file("", k)): v.double().numpy()
            for k, v in model.state_dict().items() if v.is_floating_point()}
    err, worst = compare_states(state, want)
    ok = len(losses) == STEPS and loss_err <= 1e-4 and err <= 1e-4
    report(case, ok,
           f"loss {want_losses[0]:.6g} -> {want_losses[-1]:.6g}; every "
           f"step's loss within {loss_err:.1e} of {reference}, {len(want)} "
           f"tensors ({states_note}) within {err:.1e} ({worst})")


def check_batch_norm_against_ddp(name, net, batches, lr):
    """Per-replica batch statistics: DDP's arithmetic in PyTorch."""
    work = os.path.join(WORK, name)
    os.makedirs(work, exist_ok=True)
    export(net, batches[0][0], os.path.join(work, "model.onnx"))
    options = ["--loss", "cross-entropy", "--optimizer", "sgd", "--lr",
               str(lr), "--momentum", "0.9"]
    data_parallel = [d for label, d, _ in CONFIGS
                     if label.startswith("devices=") and d > 1]
    for devices in sorted(set(data_parallel)):
        replicas = [copy.deepcopy(net) for _ in range(devices)]
        optimizers = [torch.optim.SGD(r.parameters(), lr=lr, momentum=0.9)
                      for r in replicas]
        want_losses = []
        for step in range(STEPS):
            x, y = batches[step % len(batches)]
            rows = x.shape[0] // devices
            losses = []
            for r, replica in enumerate(replicas):
                replica.zero_grad()
                loss = torch.nn.functional.cross_entropy(
                    replica(x[r * rows:(r + 1) * rows]),
                    y[r * rows:(r + 1) * rows])
                loss.backward()
                losses.append(loss.item())
            # DDP's all-reduce: every replica gets the mean gradient.
            for params in zip(*(r.parameters() for r in replicas)):
                mean = sum(p.grad for p in params) / devices
                for p in params:
                    p.grad = mean.clone()
            for opt in optimizers:
                opt.step()
            want_losses.append(sum(losses) / devices)
        losses, state = train_partc(
            work, ["--devices", str(devices), "--strategy", "data"], batches,
            options, f"dp{devices}")
        report_against_pytorch(f"{name} {devices} devices", losses, state,
                               want_losses, replicas[0], "DDP's",
                               "replica 0's running statistics")


def check_batch_norm_micro_batches(name, net, batches, lr):
    """Batch norm under micro-batches: PyTorch's accumulation loop (each
    micro-batch normalized by its own statistics, the running ones moved
    once per micro-batch, one optimizer step)."""
    work = os.path.join(WORK, name)
    os.makedirs(work, exist_ok=True)
    export(net, batches[0][0], os.path.join(work, "model.onnx"))
    options = ["--loss", "cross-entropy", "--optimizer", "sgd", "--lr",
               str(lr), "--momentum", "0.9"]
    for label, _, placement in CONFIGS:
        micro = int(placement[placement.index("--micro-batches") + 1])
        if micro < 2 or "--replicas" in placement or (
                "--strategy" in placement and "data" in placement):
            continue
        model = copy.deepcopy(net)
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        want_losses = []
        for step in range(STEPS):
            x, y = batches[step % len(batches)]
            rows = x.shape[0] // micro
            opt.zero_grad()
            total = 0.0
            for k in range(micro):
                loss = torch.nn.functional.cross_entropy(
                    model(x[k * rows:(k + 1) * rows]),
                    y[k * rows:(k + 1) * rows])
                (loss / micro).backward()
                total += loss.item() / micro
            opt.step()
            want_losses.append(total)
        losses, state = train_partc(work, placement, batches, options,
                                    label.replace(" ", "_"))
        report_against_pytorch(f"{name} {label}", losses, state, want_losses,
                               model, "PyTorch's accumulation",
                               "running statistics included")


# Chainer's MNIST MLP, momentum SGD, two batches of 32.
torch.manual_seed(1)
net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 1000),
                          torch.nn.ReLU(), torch.nn.Linear(1000, 1000),
                          torch.nn.ReLU(), torch.nn.Linear(1000, 10))
batches = [(torch.rand(32, 1, 28, 28), torch.randint(0, 10, (32,)))
           for _ in range(2)]
check_against_one_device("chainer_mlp", net, batches,
                         ["--loss", "cross-entropy", "--optimizer", "sgd",
                          "--lr", "0.05", "--momentum", "0.9"])

# A small CNN without batch norm, MSE on one-hot labels (the tutorial's
# loss).
torch.manual_seed(2)
net = torch.nn.Sequential(
    torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
    torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 16, 3, padding=1),
    torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
    torch.nn.Linear(16, 10))
batches = [(torch.randn(8, 3, 16, 16),
            torch.nn.functional.one_hot(torch.randint(0, 10, (8,)),
                                        10).float()) for _ in range(2)]
check_against_one_device("small_cnn", net, batches,
                         ["--loss", "mse", "--optimizer", "sgd", "--lr",
                          "0.1"])


torch.manual_seed(3)
net = TinyGpt(dropout=0.1)
batches = [(torch.randint(0, 50, (8, 8)), torch.randint(0, 50, (8, 8)))
           for _ in range(2)]
check_against_one_device("tiny_gpt_dropout_adamw", net, batches,
                         ["--loss", "cross-entropy", "--optimizer", "adamw",
                          "--lr", "0.001"], adamw=True)

# GPT-2's tied embedding: one weight read by the first and the last
# stage of a pipeline (moved to the last, updated after both reads).
torch.manual_seed(5)
net = TinyGpt(tied=True)
batches = [(torch.randint(0, 50, (8, 8)), torch.randint(0, 50, (8, 8)))
           for _ in range(2)]
check_against_one_device("tiny_gpt_tied_sgd", net, batches,
                         ["--loss", "cross-entropy", "--optimizer", "sgd",
                          "--lr", "0.1", "--momentum", "0.9"], fold=False)

# Batch norm keeps each replica's statistics, as DDP does.
torch.manual_seed(4)
net = torch.nn.Sequential(
    torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8),
    torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3, padding=1, bias=False),
    torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
    torch.nn.Flatten(), torch.nn.Linear(8, 10))
batches = [(torch.randn(16, 3, 8, 8), torch.randint(0, 10, (16,)))
           for _ in range(2)]
check_batch_norm_against_ddp("cnn_batch_norm", net, batches, 0.05)
check_batch_norm_micro_batches("cnn_batch_norm_micro", net, batches, 0.05)

print("some failed" if failed else "all passed")
sys.exit(1 if failed else 0)
