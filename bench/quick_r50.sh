#!/usr/bin/env bash
# Quick ResNet-50 check on a GPU machine (after run_gpu_session.sh unpacked
# the tools): one GPU with and without fused epilogues, a profile, and the
# 4-GPU data-parallel plan, each under its own timeout.
set -u
L=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
W=/tmp/partc-gpu
export LD_LIBRARY_PATH=$L/cu13/lib:$L/cudnn/lib:$L/nccl/lib:$L/cublas/lib:$W/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$W/bin
OUT=${OUT:-/tmp/out}
M=$W/r50.onnx
t() { echo "+ ${*:2}"; timeout "$1" "${@:2}" 2>&1 | grep -v "^partc-run: note" | tail -8 || true; }
python3 - $M <<'PY'
import sys, torch, torchvision
torch.manual_seed(0)
net = torchvision.models.resnet50().eval()
torch.onnx.export(net, torch.randn(64, 3, 224, 224), sys.argv[1], dynamo=False,
                  opset_version=13, input_names=["input"], output_names=["output"],
                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
PY
for b in 64 16; do
  $B/partc compile $M -o $W/r50_$b.plan --batch $b --quiet
  t 60 $B/partc-run $W/r50_$b.plan --backend cuda --iterations 20 --warmup 5 --keep-inputs --stream --quiet
  t 60 $B/partc-run $W/r50_$b.plan --backend cuda --iterations 20 --warmup 5 --keep-inputs --stream --quiet --no-fused-epilogues
  t 60 $B/partc-run $W/r50_$b.plan --backend cuda --iterations 10 --warmup 3 --profile $OUT/profile_$b.json
done
$B/partc compile $M -o $W/r50_dp4.plan --batch 64 --devices 4 --strategy data --quiet
t 60 $B/partc-run $W/r50_dp4.plan --backend cuda --iterations 100 --warmup 5 --keep-inputs --stream --quiet
$B/partc compile $M -o $W/r50_pp2.plan --batch 64 --devices 2 --strategy pipeline --micro-batches 1 --cost-table $OUT/profile_64.json,$OUT/profile_16.json --quiet
t 60 $B/partc-run $W/r50_pp2.plan --backend cuda --iterations 100 --warmup 5 --keep-inputs --stream --quiet
# Agreement of the fused plan with the CPU-free reference: fp32 against TF32 off.
t 60 $B/partc-run $W/r50_64.plan --backend cuda --precision fp32 --output-dir $W/o1 --quiet
t 60 $B/partc-run $W/r50_64.plan --backend cuda --precision fp32 --no-fused-epilogues --output-dir $W/o2 --quiet
python3 -c "
import onnx, numpy as np; from onnx import numpy_helper as nh
r=[nh.to_array(onnx.load_tensor('$W/o%d/output_0.pb'%i)) for i in (1,2)]
print('fused vs unfused fp32 max rel diff %.2e' % (abs(r[0]-r[1]).max()/abs(r[1]).max()))"
