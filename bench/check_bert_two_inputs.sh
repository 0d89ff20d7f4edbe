#!/usr/bin/env bash
# On a GPU machine (it has transformers): a tiny Hugging Face BERT exported
# with input_ids and attention_mask only, which brings GatherElements (the
# buffered token type ids), by both of PyTorch's exporters; each compiled
# for 1 device, 2 replicas and a 2-stage pipeline and checked against
# PyTorch on the CPU backend. Needs .device/partc-bin.tar.xz
# (bench/pack_device.sh).
set -u
L=/opt/torch/.venv/lib/python3.12/site-packages/nvidia; W=/tmp/partc-gpu; mkdir -p $W && tar -C $W -xJf .device/partc-bin.tar.xz
export LD_LIBRARY_PATH=$L/cu13/lib:$L/cudnn/lib:$L/nccl/lib:$L/cublas/lib:$W/lib:${LD_LIBRARY_PATH:-}
python3 - <<'PY'
import torch, transformers as tf, numpy as np, os
from onnx import numpy_helper
cfg = tf.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, max_position_embeddings=64)
m = tf.BertModel(cfg).eval()
class W2(torch.nn.Module):
    def __init__(s): super().__init__(); s.m = m
    def forward(s, ids, mask): return s.m(input_ids=ids, attention_mask=mask).last_hidden_state
g = torch.Generator().manual_seed(1)
ids = torch.randint(0, 1000, (4, 32), generator=g); mask = torch.ones(4, 32, dtype=torch.int64); mask[-1, 24:] = 0
y = W2().eval()(ids, mask)
for ex in ("torchscript", "dynamo"):
    d = "/tmp/bert2-" + ex; os.makedirs(d + "/t", exist_ok=True)
    torch.onnx.export(W2().eval(), (ids, mask), d + "/m.onnx", input_names=["input_ids", "attention_mask"], output_names=["y"], dynamo=(ex == "dynamo"), **({} if ex == "dynamo" else {"opset_version": 17}))
    for i, (n, v) in enumerate((("input_ids", ids), ("attention_mask", mask))):
        open(d + "/t/input_%d.pb" % i, "wb").write(numpy_helper.from_array(v.numpy(), n).SerializeToString())
    open(d + "/t/output_0.pb", "wb").write(numpy_helper.from_array(y.detach().numpy(), "y").SerializeToString())
    import onnx; print(ex, sorted({n.op_type for n in onnx.load(d + "/m.onnx").graph.node} & {"GatherElements"}))
PY
for ex in torchscript dynamo; do d=/tmp/bert2-$ex
  for s in "" "--devices 2 --strategy data" "--devices 2 --strategy pipeline --micro-batches 2"; do
    $W/bin/partc compile $d/m.onnx -o $d/p.plan --quiet $s && $W/bin/partc-run $d/p.plan --check $d/t --rtol 1e-3 --atol 1e-4 --quiet | sed "s|^|$ex [$s]: |"
  done
done
