#!/usr/bin/env python3
"""A model over 2 GiB, as ONNX stores them: weights in an external data file.

Writes a 2.3 GB embedding table as external data, compiles it with partc,
runs the plan (which maps its 2.3 GB weights section) and checks three rows.
Prints SKIPPED without numpy/onnx. Usage: large_model.py BIN_DIR WORK_DIR
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print("SKIPPED: needs python3-numpy and python3-onnx (%s)" % e)
    sys.exit(0)

bindir, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
rows, dim = 9_000_000, 64  # 9e6 * 64 * 4 bytes = 2.3 GB
raw = os.path.join(out, "table.bin")
# Zeros except three marked rows, written without holding 2.3 GB in memory.
with open(raw, "wb") as f:
    f.truncate(rows * dim * 4)
    for row, value in ((0, 1.0), (4_500_000, 2.0), (rows - 1, 3.0)):
        f.seek(row * dim * 4)
        f.write(np.full(dim, value, np.float32).tobytes())
t = TensorProto()
t.name = "table"
t.data_type = TensorProto.FLOAT
t.dims.extend([rows, dim])
t.data_location = TensorProto.EXTERNAL
for k, v in (("location", "table.bin"), ("offset", "0"), ("length", str(rows * dim * 4))):
    e = t.external_data.add()
    e.key = k
    e.value = v
g = helper.make_graph(
    [helper.make_node("Gather", ["table", "ids"], ["y"], name="embed", axis=0)], "big",
    [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, dim])], [t])
model = os.path.join(out, "big.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), model)
data = os.path.join(out, "data")
os.makedirs(data, exist_ok=True)
idx = np.array([[0, 4_500_000, rows - 1]], dtype=np.int64)
with open(os.path.join(data, "input_0.pb"), "wb") as f:
    f.write(numpy_helper.from_array(idx, "ids").SerializeToString())
y = np.stack([np.full(dim, v, np.float32) for v in (1.0, 2.0, 3.0)])[None]
with open(os.path.join(data, "output_0.pb"), "wb") as f:
    f.write(numpy_helper.from_array(y, "y").SerializeToString())

plan = os.path.join(out, "big.plan")
try:
    subprocess.run([os.path.join(bindir, "partc"), "compile", model, "-o", plan, "--quiet"],
                   check=True)
    subprocess.run([os.path.join(bindir, "partc-run"), plan, "--check", data, "--quiet"],
                   check=True)
    print("large model (%.1f GB of weights): 1 passed, 0 failed" % (rows * dim * 4 / 1e9))
    rc = 0
except subprocess.CalledProcessError as e:
    print("large model: 0 passed, 1 failed (%s)" % e)
    rc = 1
finally:
    for f in (raw, plan):
        if os.path.exists(f):
            os.remove(f)
sys.exit(rc)
