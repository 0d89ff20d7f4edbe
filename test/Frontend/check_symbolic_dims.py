"""A transformer exported as users export it, with dynamic batch and
sequence axes, compiled with --dim (and --shape) on 1 and 2 devices and
compared with PyTorch.

  check_symbolic_dims.py BIN_DIR WORK_DIR
"""
import os
import subprocess
import sys
import warnings

try:
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "Training"))
    from tiny_gpt import TinyGpt
except ImportError:
    print("SKIPPED: needs python3-torch")
    sys.exit(0)

BIN, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
warnings.filterwarnings("ignore")
torch.manual_seed(0)
net = TinyGpt(sliced=True).eval()
tokens = torch.randint(0, 50, (3, 8))
model = os.path.join(WORK, "gpt.onnx")
torch.onnx.export(net, tokens, model, opset_version=13,
                  input_names=["tokens"], output_names=["logits"],
                  dynamic_axes={"tokens": {0: "batch", 1: "seq"},
                                "logits": {0: "batch", 1: "seq"}})
names = [d.dim_param for d in
         onnx.load(model).graph.input[0].type.tensor_type.shape.dim]
print("input dims:", names)
failed = False
for batch, seq, how in [(3, 8, ["--batch", "3", "--dim", "seq=8"]),
                        (2, 5, ["--dim", "batch=2", "--dim", "seq=5"]),
                        (4, 6, ["--shape", "tokens=4x6"])]:
    x = tokens[:batch, :seq] if seq <= 8 else None
    if x.shape[0] < batch:
        x = torch.randint(0, 50, (batch, seq))
    np.save(os.path.join(WORK, "x.npy"), x.numpy())
    want = net(x).detach().numpy()
    for devices in [1, 2]:
        plan = os.path.join(WORK, f"p{batch}x{seq}d{devices}.plan")
        out = os.path.join(WORK, f"out{batch}x{seq}d{devices}")
        subprocess.run([f"{BIN}/partc", "compile", model, "-o", plan,
                        "--devices", str(devices), "--quiet", *how],
                       check=True)
        subprocess.run([f"{BIN}/partc-run", plan, "--input",
                        f"tokens={WORK}/x.npy", "--output-dir", out],
                       check=True, capture_output=True)
        t = onnx.TensorProto()
        t.ParseFromString(open(os.path.join(out, "output_0.pb"), "rb").read())
        got = numpy_helper.to_array(t)
        err = float(np.abs(got - want).max() / np.abs(want).max())
        ok = got.shape == want.shape and err <= 1e-5
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'} {' '.join(how)} devices={devices}: "
              f"{got.shape} within {err:.1e} of PyTorch")
sys.exit(1 if failed else 0)
