#!/usr/bin/env bash
# Runs every GPU check and benchmark in one device call (see docs/benchmarks.md).
# Expects .device/partc-bin.tar.xz (stripped partc, partc-run and the two
# shared libraries partc needs) and .device/testdata.tar.xz (ONNX test data),
# both made on the build machine by bench/pack_device.sh.
set -u
export NCCL_NVLS_ENABLE=0
L=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
W=/tmp/partc-gpu
mkdir -p $W && tar -C $W -xJf .device/partc-bin.tar.xz && tar -C $W -xJf .device/testdata.tar.xz
export LD_LIBRARY_PATH=$L/cu13/lib:$L/cudnn/lib:$L/nccl/lib:$L/cublas/lib:$W/lib:${LD_LIBRARY_PATH:-}
B=$W/bin
OUT=${OUT:-/tmp/out}
NGPU=$(nvidia-smi -L | wc -l)
{ date -u; nvidia-smi -L; nvidia-smi topo -m 2>/dev/null | head -5; git log -1 --format=%H 2>/dev/null; } | tee $OUT/machine.txt
what=${1:-smoke,conformance,models,bench}
# torchvision's ResNet-50 (random weights, batch dynamic) as DIR/r50.onnx.
export_resnet50() {
  mkdir -p "$1"
  python3 -c "
import torch, torchvision
net = torchvision.models.resnet50().eval()
torch.onnx.export(net, torch.randn(16, 3, 224, 224), '$1/r50.onnx', dynamo=False,
                  opset_version=13, input_names=['input'], output_names=['output'],
                  dynamic_axes={'input': {0: 'batch'}, 'output': {0: 'batch'}})" 2>/dev/null
}

t() { echo "+ $*"; timeout 60 "$@" || echo "FAILED ($?): $*"; }
# A --profile file's kernel time per step by op: FILE, how many ops.
profile_by_op() {
  python3 - "$1" "$2" <<'PY'
import json, sys, collections
k = json.load(open(sys.argv[1]))["kernels"]
by = collections.defaultdict(lambda: [0.0, 0])
for e in k:
    op = e["signature"].split("(")[0].split()[0]
    by[op][0] += e["seconds"]; by[op][1] += 1
total = sum(v[0] for v in by.values())
print(f"profile: {total*1e3:.2f} ms of kernels per step, {len(k)} kernels")
for op, (t, n) in sorted(by.items(), key=lambda x: -x[1][0])[:int(sys.argv[2])]:
    print(f"  {op:32s} {t*1e3:8.2f} ms {n:4d} kernels")
PY
}
if [[ $what == *smoke* ]]; then
  echo "== smoke"
  python3 test/Inputs/make_models.py $W/ex > /dev/null
  $B/partc compile $W/ex/mlp.onnx -o $W/mlp1.plan --batch 4 --quiet
  t $B/partc-run $W/mlp1.plan --backend cuda --precision fp32 --check $W/ex/mlp_data
  t $B/partc-run $W/mlp1.plan --backend cuda --check $W/ex/mlp_data --rtol 1e-2 --atol 1e-4 --iterations 3
  # Convolution epilogues, fused (chosen by timing) and unfused, against numpy.
  $B/partc compile $W/ex/resblock.onnx -o $W/resblock.plan --batch 2 --quiet
  t $B/partc-run $W/resblock.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --profile $OUT/resblock-profile.json
  t $B/partc-run $W/resblock.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --no-fused-epilogues
  t $B/partc-run $W/resblock.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --no-cudnn-graph
  t $B/partc-run $W/resblock.plan --backend cuda --check $W/ex/resblock_data --rtol 1e-2 --atol 1e-3
  # Linear layers: MatMul with its bias and ReLU fused (cuBLASLt epilogue).
  $B/partc compile $W/ex/linear.onnx -o $W/linear.plan --batch 4 --quiet
  t $B/partc-run $W/linear.plan --backend cuda --precision fp32 --check $W/ex/linear_data
  t $B/partc-run $W/linear.plan --backend cuda --check $W/ex/linear_data --rtol 1e-2 --atol 1e-3
  t $B/partc-run $W/linear.plan --backend cuda --precision fp32 --check $W/ex/linear_data --no-fused-epilogues
  # An exported exact Gelu as one fused element-wise kernel.
  $B/partc compile $W/ex/gelu.onnx -o $W/gelu.plan --batch 4 --quiet
  t $B/partc-run $W/gelu.plan --backend cuda --precision fp32 --check $W/ex/gelu_data
  # A fully masked softmax row is zeros (nan_to_zero), not NaN.
  $B/partc compile $W/ex/masked_softmax.onnx -o $W/masked.plan --batch 2 --quiet
  t $B/partc-run $W/masked.plan --backend cuda --precision fp32 --check $W/ex/masked_softmax_data
  $B/partc compile $W/ex/chain.onnx -o $W/chain1.plan --batch 4 --quiet
  t $B/partc-run $W/chain1.plan --backend cuda --precision fp32 --check $W/ex/chain_data --summary
  t $B/partc-run $W/chain1.plan --backend cuda --precision fp32 --check $W/ex/chain_data --no-generated-chains
  # NaN and Inf kept as ONNX's reference keeps them, fused epilogues too.
  $B/partc compile $W/ex/nan_inf.onnx -o $W/nan_inf.plan --quiet
  t $B/partc-run $W/nan_inf.plan --backend cuda --precision fp32 --check $W/ex/nan_inf_data --quiet
  t $B/partc-run $W/nan_inf.plan --backend cuda --precision fp32 --check $W/ex/nan_inf_data --no-fused-epilogues --quiet
  t $B/partc-run $W/nan_inf.plan --backend cuda --precision fp32 --check $W/ex/nan_inf_data --no-cudnn-graph --quiet
  t $B/partc-run $W/nan_inf.plan --backend cuda --precision fp32 --check $W/ex/nan_inf_data --no-generated-chains --quiet
  t $B/partc-run $W/nan_inf.plan --backend cuda --check $W/ex/nan_inf_data --rtol 1e-2 --atol 1e-2 --quiet
  # Generated fused chains against the interpreter and the CPU kernel.
  t $B/partc-cuda-unittests
  # Attention heads read in place by strided batched GEMMs (pointer arrays).
  $B/partc compile $W/ex/attention.onnx -o $W/attention1.plan --batch 4 --quiet
  t $B/partc-run $W/attention1.plan --backend cuda --precision fp32 --check $W/ex/attention_data
  t $B/partc-run $W/attention1.plan --backend cuda --check $W/ex/attention_data --rtol 1e-2 --atol 1e-2 --iterations 10 --stream --quiet
  # Inputs left on the GPU by the first run stay intact for the next ones.
  t $B/partc-run $W/gelu.plan --backend cuda --precision fp32 --check $W/ex/gelu_data --keep-inputs --iterations 3 --quiet
  t $B/partc-run $W/gelu.plan --backend cuda --precision fp32 --check $W/ex/gelu_data --keep-inputs --iterations 10 --stream --quiet
  # Two plan devices on one GPU, each on its own stream: replicas, and
  # pipeline stages whose transfers stay on the GPU.
  $B/partc compile $W/ex/resblock.onnx -o $W/resblock2d.plan --batch 2 --devices 2 --strategy data --quiet
  t $B/partc-run $W/resblock2d.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --iterations 5 --devices-per-gpu 2
  t $B/partc-run $W/resblock2d.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --iterations 20 --stream --devices-per-gpu 2 --quiet
  $B/partc compile $W/ex/mlp.onnx -o $W/mlp2pg.plan --batch 4 --devices 2 --strategy pipeline --micro-batches 2 --quiet
  t $B/partc-run $W/mlp2pg.plan --backend cuda --precision fp32 --check $W/ex/mlp_data --iterations 20 --stream --devices-per-gpu 2 --quiet
  t $B/partc-run $W/mlp2pg.plan --backend cuda --precision fp32 --check $W/ex/mlp_data --iterations 5 --devices-per-gpu 2 --no-graphs --quiet
  if [ "$NGPU" -ge 2 ]; then
    $B/partc compile $W/ex/mlp.onnx -o $W/mlp2.plan --batch 4 --devices 2 --micro-batches 2 --quiet
    t $B/partc-run $W/mlp2.plan --backend cuda --precision fp32 --check $W/ex/mlp_data --iterations 3
    $B/partc compile $W/ex/attention.onnx -o $W/attention2.plan --batch 4 --devices 2 --strategy pipeline --micro-batches 2 --quiet
    t $B/partc-run $W/attention2.plan --backend cuda --precision fp32 --check $W/ex/attention_data --iterations 10 --stream --quiet
    $B/partc compile $W/ex/mlp.onnx -o $W/mlp2s.plan --batch 4 --devices 2 --strategy pipeline --micro-batches 2 --quiet
    t $B/partc-run $W/mlp2s.plan --backend cuda --precision fp32 --check $W/ex/mlp_data --iterations 20 --stream --quiet
    t $B/partc-run $W/mlp2s.plan --backend cuda --precision fp32 --check $W/ex/mlp_data --iterations 20 --stream --no-graphs --quiet
    t $B/partc-run $W/mlp2s.plan --backend cuda --precision fp32 --check $W/ex/mlp_data --iterations 20 --stream --no-direct-transfers --quiet
    $B/partc compile $W/ex/resblock.onnx -o $W/resblock2.plan --batch 2 --devices 2 --strategy pipeline --micro-batches 2 --quiet
    t $B/partc-run $W/resblock2.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --iterations 20 --stream --quiet
    t $B/partc-run $W/resblock2.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --iterations 20 --stream --no-graphs --quiet
    # Transfers through NCCL (not streamed yet: a clear error, not a hang).
    $B/partc compile $W/ex/resblock.onnx -o $W/resblock2n.plan --batch 2 --devices 2 --strategy pipeline --micro-batches 2 --transfers nccl --quiet
    t $B/partc-run $W/resblock2n.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --iterations 5
    $B/partc compile $W/ex/mlp.onnx -o $W/mlp2n.plan --batch 4 --devices 2 --strategy pipeline --micro-batches 2 --transfers nccl --quiet
    t $B/partc-run $W/mlp2n.plan --backend cuda --precision fp32 --check $W/ex/mlp_data --iterations 3
    t $B/partc-run $W/mlp2n.plan --backend cuda --iterations 3 --trace $OUT/trace-nccl.json --quiet
    t $B/partc-run $W/mlp2n.plan --backend cuda --iterations 3 --profile $OUT/nccl-profile.json --quiet
    # NCCL inside the captured graph (a failed capture prints a note) and
    # streamed.
    t $B/partc-run $W/resblock2n.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --iterations 5 2>&1 | grep -E "graph capture failed|FAILED|mismatch" || echo "NCCL plan in a CUDA graph: ok"
    t $B/partc-run $W/resblock2n.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --iterations 20 --stream --quiet
    t $B/partc-run $W/mlp2n.plan --backend cuda --precision fp32 --check $W/ex/mlp_data --iterations 20 --stream --quiet
    t $B/partc-run $W/mlp2n.plan --backend cuda --iterations 6 --stream --trace $OUT/stream-trace-nccl.json --quiet
    # Transfers staged through host memory (as between GPUs without peer
    # access): single runs in a graph, without graphs, and streamed.
    t $B/partc-run $W/resblock2.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --iterations 5 --host-staging
    t $B/partc-run $W/resblock2.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --iterations 5 --host-staging --no-graphs --quiet
    t $B/partc-run $W/mlp2s.plan --backend cuda --precision fp32 --check $W/ex/mlp_data --iterations 20 --stream --host-staging --quiet
    t $B/partc-run $W/resblock2.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --iterations 20 --stream --host-staging --quiet
    t $B/partc-run $W/resblock2.plan --backend cuda --precision fp32 --check $W/ex/resblock_data --iterations 20 --stream --host-staging --no-direct-transfers --quiet
    t $B/partc-run $W/mlp2s.plan --backend cuda --iterations 6 --stream --host-staging --trace $OUT/stream-trace-host.json --quiet
    t $B/partc-run $W/mlp2s.plan --backend cuda --precision fp32 --iterations 3 --profile $OUT/mlp-profile.json --quiet
    t $B/partc-run $W/mlp2s.plan --backend cuda --iterations 6 --stream --trace $OUT/stream-trace.json --quiet
    python3 -c "import json; ev=[e for e in json.load(open('$OUT/stream-trace.json'))['traceEvents'] if e['ph']=='X']; print('stream trace:', len(ev), 'spans; devices', sorted({e['pid'] for e in ev}), 'peer-copy batches', sorted({e['args']['batch'] for e in ev if e['tid']==1}))"
    $B/partc compile $W/ex/mlp.onnx -o $W/mlp2p.plan --batch 4 --devices 2 --strategy pipeline --micro-batches 2 --quiet
    t $B/partc-run $W/mlp2p.plan --backend cuda --iterations 2 --trace $OUT/trace-cuda.json --quiet
    python3 -c "import json; ev=json.load(open('$OUT/trace-cuda.json'))['traceEvents']; x=[e for e in ev if e['ph']=='X']; print('cuda trace:', len(x), 'events on devices', sorted({e['pid'] for e in x}), sorted({e['cat'] for e in x}))"
  fi
  # Profiling holds the stream while launching; a kernel that runs on the
  # host (max pooling with indices has no GPU kernel) must not deadlock
  # against it. Reflect padding runs on the GPU.
  python3 - $W/pad.onnx <<'PY'
import sys, onnx
from onnx import helper as h, TensorProto as T
n = [h.make_node("Relu", ["x"], ["r"]),
     h.make_node("Pad", ["r", "p"], ["q"], mode="reflect"),
     h.make_node("MaxPool", ["q"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2])]
g = h.make_graph(n, "pad", [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 8, 8])],
                 [h.make_tensor_value_info("y", T.FLOAT, [2, 3, 5, 5]),
                  h.make_tensor_value_info("i", T.INT64, [2, 3, 5, 5])],
                 [h.make_tensor("p", T.INT64, [8], [0, 0, 1, 1, 0, 0, 1, 1])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), sys.argv[1])
PY
  $B/partc compile $W/pad.onnx -o $W/pad.plan --quiet
  # Fused element-wise chains (exact Gelu; broadcasting; odd sizes) against
  # the CPU backend.
  python3 - $W/chain.onnx <<'PY'
import sys, onnx
from onnx import helper as h, TensorProto as T
f = lambda name, v: h.make_tensor(name, T.FLOAT, [], [v])
n = [h.make_node("Div", ["x", "s2"], ["d"]), h.make_node("Erf", ["d"], ["e"]),
     h.make_node("Add", ["e", "one"], ["a"]), h.make_node("Mul", ["x", "a"], ["m"]),
     h.make_node("Mul", ["m", "half"], ["g"]),
     h.make_node("Sub", ["g", "b"], ["s"]), h.make_node("Tanh", ["s"], ["u"]),
     h.make_node("Mul", ["u", "c"], ["y"]),
     h.make_node("Sigmoid", ["z"], ["zs"]), h.make_node("Mul", ["zs", "z"], ["w"]),
     # Row kernels and widened copies: layer norm and softmax over rows of
     # 256, a transpose that keeps the last axis, a slice of whole rows.
     h.make_node("LayerNormalization", ["r", "lg", "lb"], ["ln"], axis=-1),
     h.make_node("Softmax", ["ln"], ["sm"], axis=-1),
     h.make_node("Transpose", ["sm"], ["tr"], perm=[1, 0, 2]),
     h.make_node("Slice", ["tr", "st", "en", "ax"], ["sl"]),
     h.make_node("Div", ["sl", "s2"], ["q"])]
g = h.make_graph(n, "chain", [h.make_tensor_value_info("x", T.FLOAT, [4, 6, 64]),
                              h.make_tensor_value_info("z", T.FLOAT, [3, 5, 7]),
                              h.make_tensor_value_info("r", T.FLOAT, [8, 16, 256])],
                 [h.make_tensor_value_info("y", T.FLOAT, [4, 6, 64]),
                  h.make_tensor_value_info("w", T.FLOAT, [3, 5, 7]),
                  h.make_tensor_value_info("q", T.FLOAT, [16, 8, 128])],
                 [f("s2", 1.4142135), f("one", 1.0), f("half", 0.5),
                  h.make_tensor("b", T.FLOAT, [64], [0.01 * i for i in range(64)]),
                  h.make_tensor("c", T.FLOAT, [4, 1, 1], [1, -1, 2, 0.5]),
                  h.make_tensor("lg", T.FLOAT, [256], [1 + 0.01 * i for i in range(256)]),
                  h.make_tensor("lb", T.FLOAT, [256], [0.02 * i - 1 for i in range(256)]),
                  h.make_tensor("st", T.INT64, [1], [64]), h.make_tensor("en", T.INT64, [1], [192]),
                  h.make_tensor("ax", T.INT64, [1], [2])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), sys.argv[1])
PY
  $B/partc compile $W/chain.onnx -o $W/chain.plan --quiet
  $B/partc-run $W/chain.plan --backend cpu --output-dir $W/chain_ref --quiet
  t $B/partc-run $W/chain.plan --backend cuda --precision fp32 --check $W/chain_ref --rtol 1e-4 --atol 1e-6
  # Reflect padding on the GPU (and the host kernel) against the CPU backend.
  $B/partc-run $W/pad.plan --backend cpu --output-dir $W/pad_ref --quiet
  t $B/partc-run $W/pad.plan --backend cuda --precision fp32 --check $W/pad_ref
  timeout 60 $B/partc-run $W/pad.plan --backend cuda --iterations 3 --profile $OUT/pad-profile.json --quiet \
    && echo "profile with a host kernel: ok" || echo "profile with a host kernel: FAILED ($?)"
fi
if [[ $what == *newops* ]]; then
  # The ops added through ElementwiseOps.h (fused chains with parameters,
  # generated and interpreted, and one kernel each), Resize and
  # GatherElements, against numpy; 2- and 4-device plans as plan devices.
  echo "== new ops (cuda)"
  python3 test/Inputs/make_models.py $W/ex > /dev/null
  for s in "" "--no-fuse-elementwise"; do
    $B/partc compile $W/ex/activations.onnx -o $W/act.plan --batch 4 --quiet $s
    for r in "" "--no-generated-chains"; do
      t $B/partc-run $W/act.plan --backend cuda --check $W/ex/activations_data --atol 1e-6 --quiet $r
    done
  done
  $B/partc compile $W/ex/activations.onnx -o $W/act2.plan --batch 4 --devices 2 --strategy pipeline --micro-batches 2 --quiet
  t $B/partc-run $W/act2.plan --backend cuda --check $W/ex/activations_data --atol 1e-6 --devices-per-gpu 2 --quiet
  $B/partc compile $W/ex/resample.onnx -o $W/resample.plan --quiet
  t $B/partc-run $W/resample.plan --backend cuda --precision fp32 --check $W/ex/resample_data --atol 1e-5 --quiet
  t $B/partc-run $W/resample.plan --backend cuda --precision fp32 --check $W/ex/resample_data --atol 1e-5 --iterations 10 --stream --quiet
  $B/partc compile $W/ex/resample.onnx -o $W/resample4.plan --devices 4 --strategy data --quiet
  t $B/partc-run $W/resample4.plan --backend cuda --precision fp32 --check $W/ex/resample_data --atol 1e-5 --devices-per-gpu 4 --quiet
  $B/partc compile $W/ex/resample.onnx -o $W/resample2p.plan --devices 2 --strategy pipeline --micro-batches 2 --quiet
  t $B/partc-run $W/resample2p.plan --backend cuda --precision fp32 --check $W/ex/resample_data --atol 1e-5 --devices-per-gpu 2 --quiet
fi
if [[ $what == *exportops* ]]; then
  # The operators of make_exported_ops.py (kernels of their own and
  # compositions) against numpy, 1, 2 and 4 plan devices; their GPU kernels
  # against the CPU's; ONNX's node tests of the new operators on the GPU.
  echo "== exported ops (cuda)"
  python3 test/Inputs/make_exported_ops.py $W/eo > /dev/null
  t $B/partc-cuda-unittests --gtest_filter='*ArgReduce*:*Reductions*:*GatherElements*'
  $B/partc compile $W/eo/exported_ops.onnx -o $W/eo1.plan --batch 4 --quiet
  t $B/partc-run $W/eo1.plan --backend cuda --precision fp32 --check $W/eo/exported_ops_data --atol 1e-5
  t $B/partc-run $W/eo1.plan --backend cuda --check $W/eo/exported_ops_data --rtol 1e-2 --atol 1e-3 --iterations 5
  $B/partc compile $W/eo/exported_ops.onnx -o $W/eo2.plan --batch 4 --devices 2 --strategy pipeline --micro-batches 2 --quiet
  t $B/partc-run $W/eo2.plan --backend cuda --precision fp32 --check $W/eo/exported_ops_data --atol 1e-5 --devices-per-gpu 2
  $B/partc compile $W/eo/exported_ops.onnx -o $W/eo4.plan --batch 4 --devices 4 --strategy data --quiet
  t $B/partc-run $W/eo4.plan --backend cuda --precision fp32 --check $W/eo/exported_ops_data --atol 1e-5 --devices-per-gpu 4
  $B/partc-run $W/eo1.plan --backend cuda 2>&1 | grep -i "on the host" || echo "exported_ops: every kernel on the GPU"
  for g in 18 21; do
    $B/partc compile $W/eo/group_norm$g.onnx -o $W/gn.plan --batch 4 --quiet
    t $B/partc-run $W/gn.plan --backend cuda --precision fp32 --check $W/eo/group_norm${g}_data --atol 1e-5
  done
  for f in argmax argmin cumsum top_k convtranspose hardmax onehot trilu tril triu einsum instancenorm \
           reduce_l1 reduce_l2 reduce_log_sum reduce_sum_square prelu depthtospace spacetodepth \
           quantizelinear dequantizelinear lpnorm tile; do
    timeout 120 python3 test/conformance/run_conformance.py --bin $B --data $W/data --jobs 16 -v \
      --expected /dev/null --filter node/test_$f --run-args "--backend cuda --precision fp32 --devices-per-gpu 2" \
      2>&1 | grep -E " fail |^\| node" | head -6 | sed "s|^|  $f: |"
  done
  echo "exported ops: conformance on the GPU done"
fi
if [[ $what == *sweep* ]]; then
  # The model sweep (bench/sweep_models.py) on the GPU: Hugging Face
  # architectures with both exporters, then torchvision's families with
  # the dynamo exporter, as far as SWEEP_BUDGET seconds go.
  echo "== sweep (cuda)"
  # SWEEP_BACKEND=cpu runs the plans on the CPU reference (the sweep's
  # tolerance is then fp32's).
  be=${SWEEP_BACKEND:-cuda}
  ra="--backend cuda --precision fp32 --devices-per-gpu 2"
  [ "$be" = cpu ] && ra=""
  timeout ${SWEEP_TIMEOUT:-560} python3 -u bench/sweep_models.py --bin $B --work $W/sweep-$be \
    --families ${SWEEP_FAMILIES:-hf,classification,segmentation,video} \
    --exporters ${SWEEP_EXPORTERS:-torchscript,dynamo} --budget ${SWEEP_BUDGET:-420} --timeout 120 \
    --rtol 1e-4 --atol 1e-4 --run-args "$ra" ${SWEEP_MODELS:+--models $SWEEP_MODELS} \
    --table $OUT/sweep-$be.md --header "## $be backend, PyTorch $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)" \
    2>&1 | grep -v -i warn | grep '^{' | cut -c1-400 > $OUT/sweep-$be.jsonl
  tail -3 $OUT/sweep-$be.md
fi
if [[ $what == *quarter* ]]; then
  # Issue 20's small batches: a quarter batch's time against a quarter of
  # the full batch's (goal: at most 1.1x), partc only, fp32 and bf16; then
  # ResNet-50's latency row (batch 1) beside PyTorch.
  echo "== quarter batches"
  timeout ${QUARTER_TIMEOUT:-300} python3 -u bench/bench_precision.py --bin $B --work $W/quarter \
    --peers .device/torch_peers.py --no-torch --precisions fp32,bf16 \
    --models ${QUARTER_MODELS:-resnet50:64,resnet50:16,bert-large:16:384,bert-large:4:384} \
    2>&1 | grep '^{' > $OUT/quarter.jsonl
  python3 - $OUT/quarter.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ms = {(r["model"], int(r["batch"]), r["mode"]): r["ms"] for r in rows
      if r["mode"].startswith("partc-")}
for (model, batch, mode), t in sorted(ms.items()):
    full = ms.get((model, batch * 4, mode))
    if full:
        print("%s %s batch %d: %.3f ms, a quarter of batch %d: %.3f ms, ratio %.2fx"
              % (model, mode, batch, t, batch * 4, full / 4, t / (full / 4)))
PY
  if [ -n "${LATENCY_MODELS-resnet50:1}" ]; then
    timeout ${LATENCY_TIMEOUT:-240} python3 -u bench/bench_precision.py --bin $B --work $W/latency \
      --peers .device/torch_peers.py --precisions fp32,bf16 --models ${LATENCY_MODELS-resnet50:1} \
      2>&1 | grep -v -i warn > $OUT/latency.txt
    tail -4 $OUT/latency.txt
  fi
fi
if [[ $what == *twins* ]]; then
  # Tuning pooled over identical kernels (TunedTwins.h) against each kernel
  # keeping its own pick (--tune-each), alternated, on the transformers
  # whose 24 identical layers had picked apart; then BERT-large bf16 beside
  # PyTorch's bf16 peers in the same call.
  echo "== twins"
  for spec in ${TWIN_MODELS:-bert-large:4:384 bert-large:16:384 gpt2-medium:8:512}; do
    w=$W/twins/${spec//:/-}
    timeout 300 python3 -u bench/bench_precision.py --bin $B --work $w \
      --peers .device/torch_peers.py --no-torch --precisions bf16 --models $spec \
      2>&1 | grep '^{' > /dev/null
    d=$(ls -d $w/*/ | head -1)
    ins=""; for f in $d/*.npy; do n=$(basename $f .npy); [ $n = reference ] || ins="$ins --input $n=$f"; done
    for round in 1 2; do
      for flags in "" "--tune-each"; do
        echo "$spec ${flags:-pooled} $(timeout 120 $B/partc-run $d/bf16.plan --backend cuda \
          --iterations 50 --warmup 5 --keep-inputs --keep-outputs --stream --quiet $flags $ins 2>&1 |
          grep -E 'ms per batch' | tr '\n' ' ')"
      done
    done
    # Which implementations each way chose (--profile's note, which
    # --quiet would silence).
    for flags in "" "--tune-each"; do
      echo "$spec ${flags:-pooled} $(timeout 120 $B/partc-run $d/bf16.plan --backend cuda \
        --iterations 3 --warmup 1 --profile $W/twins.json $flags $ins 2>&1 |
        grep -E 'chosen by timing' | cut -c1-700)"
    done
  done | tee $OUT/twins.txt
  if [ "${TWIN_PEERS:-1}" = 1 ]; then
    timeout 420 python3 -u bench/bench_precision.py --bin $B --work $W/twins-peers \
      --peers .device/torch_peers.py --precisions fp32,bf16 --models bert-large:16:384 \
      2>&1 | grep -v -i warn | tail -6 | tee $OUT/twins-peers.txt
  fi
fi
if [[ $what == *precision* ]]; then
  # --precision bf16 and fp16 (issue 20): the 16-bit kernels against the
  # CPU's rounding, the zoo's transformers on the GPU against PyTorch's
  # fp32 outputs, then fp32, bf16 and fp16 plans beside PyTorch's peers.
  echo "== precision"
  t $B/partc-cuda-unittests --gtest_filter='*SixteenBit*:*Bf16*:*GeneratedKernels*:*ConcatenatedParts*:*EveryUnary*:*Softmax*:*Attention*:*Products*'
  if [ "${PREC_ZOO:-1}" = 1 ]; then
    timeout 240 python3 test/models/precision_check.py --bin $B --work $W/zoo16 \
      --run-args "--backend cuda --precision fp32 --devices-per-gpu 2" > $OUT/precision-zoo.txt 2>&1
    tail -14 $OUT/precision-zoo.txt
  fi
  # The cost model's prediction uses this GPU's preset.
  preset=1xh200; nvidia-smi -L | grep -q H100 && preset=1xh100
  timeout ${PREC_TIMEOUT:-500} python3 -u bench/bench_precision.py --bin $B --work $W/prec \
    --peers .device/torch_peers.py ${PREC_MODELS:+--models $PREC_MODELS} --devices $preset \
    ${PREC_ARGS:-} 2>&1 | grep -v -i warn > $OUT/precision.txt
  tail -12 $OUT/precision.txt
  # Where a 16-bit plan's kernel time goes.
  for d in $W/prec/*/; do
    [ -f $d/${PREC_PROFILE:-bf16}.plan ] || continue
    ins=""; for f in $d/*.npy; do n=$(basename $f .npy); [ $n = reference ] || ins="$ins --input $n=$f"; done
    m=$(basename $d)
    timeout 90 $B/partc-run $d/${PREC_PROFILE:-bf16}.plan --backend cuda $ins --iterations 10 --warmup 3 \
      --profile $OUT/profile-${PREC_PROFILE:-bf16}-$m.json --quiet > /dev/null 2>&1
    echo "-- $m ${PREC_PROFILE:-bf16} kernels by op"
    profile_by_op $OUT/profile-${PREC_PROFILE:-bf16}-$m.json 12
    # Nsight Compute on one launch of the kernels PREC_NCU names (a regex),
    # e.g. PREC_NCU=attention: what limits them.
    if [ -n "${PREC_NCU:-}" ] && command -v ncu > /dev/null; then
      timeout 120 ncu --kernel-name regex:"$PREC_NCU" --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --section SchedulerStats --section ComputeWorkloadAnalysis --section LaunchStats \
        $B/partc-run $d/${PREC_PROFILE:-bf16}.plan --backend cuda $ins --iterations 1 --warmup 0 \
        --quiet > $OUT/ncu-$m.txt 2>&1
      grep -E "^  [a-zA-Z_<].*\(|Throughput|Duration|Registers|Achieved Occupancy|Theoretical Occupancy|Eligible|Issued Warp|No Eligible|Warp Cycles Per Issued|Block Limit|Shared Memory Config|Executed Ipc" $OUT/ncu-$m.txt | head -40
    fi
    python3 - $OUT/profile-${PREC_PROFILE:-bf16}-$m.json <<'PY'
import json, sys, collections
k = json.load(open(sys.argv[1]))["kernels"]
by = collections.defaultdict(lambda: [0.0, 0, ""])
for e in k:
    s = e["signature"]
    by[s[:150]][0] += e["seconds"]; by[s[:150]][1] += 1; by[s[:150]][2] = e.get("variant", "")
for s, (t, n, v) in sorted(by.items(), key=lambda x: -x[1][0])[:10]:
    print(f"  {t*1e3:7.3f} ms {n:3d}x {v[:30]:30s} {s}")
PY
  done
fi
if [[ $what == *peers* ]]; then
  # Models partc was not tuned on against their strongest PyTorch peers
  # (torch_peers.py, identical weights), then partc's kernel profile by op.
  echo "== peers: ${PEER_MODELS:=densenet121} at batch ${PEER_BATCH:=32}"
  for m in $PEER_MODELS; do
    d=$W/peer-$m
    timeout 240 python3 .device/torch_peers.py $m $d --batch $PEER_BATCH ${PEER_ARGS:---no-bf16} 2>&1 \
      | grep '^{' | tee -a $OUT/peers.jsonl
    $B/partc compile $d/model.onnx -o $d/p.plan --batch $PEER_BATCH --quiet
    in=$(ls $d/*.npy | grep -v reference | head -1)
    inname=$(basename $in .npy)
    t $B/partc-run $d/p.plan --backend cuda --input $inname=$in --iterations 30 --warmup 5 --keep-inputs --stream --quiet
    $B/partc-run $d/p.plan --backend cuda --input $inname=$in --output-dir $d/out --quiet && python3 -c "
import numpy as np, glob
r = np.load('$d/reference.npy'); g = [f for f in glob.glob('$d/out/*') ][0]
import onnx.numpy_helper as nh, onnx
y = nh.to_array(onnx.load_tensor(g)) if g.endswith('.pb') else np.load(g)
print('$m: max abs err vs PyTorch fp32 %.2e (max |y| %.2e)' % (abs(y - r).max(), abs(r).max()))" 2>&1 | tail -1
    timeout 90 $B/partc-run $d/p.plan --backend cuda --input $inname=$in --iterations 10 --warmup 3 \
      --profile $OUT/profile-$m.json --quiet > /dev/null 2>&1
    profile_by_op $OUT/profile-$m.json 14
  done
fi
if [[ $what == *compare* ]]; then
  # This build against the one packed as .device/partc-old.tar.xz
  # (pack_device.sh with OLD_BIN_DIR set): ResNet-50, BERT-base, GPT-2.
  echo "== old and new builds side by side"
  mkdir -p $W/old && tar -C $W/old -xJf .device/partc-old.tar.xz
  timeout 560 python3 -u bench/compare_binaries.py --old $W/old/bin --new $B \
    --work $W/compare ${COMPARE_MODELS:+--models $COMPARE_MODELS} 2>&1 | grep -v -i warn | tee $OUT/compare.txt
fi
if [[ $what == *sanitizer* ]]; then
  # The CUDA backend under compute-sanitizer (memcheck and racecheck) on the
  # smoke plans, where the machine has the tool (docs/robustness.md).
  echo "== compute-sanitizer"
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer \
       /usr/local/cuda*/compute-sanitizer/compute-sanitizer \
       $L/../*/compute-sanitizer/compute-sanitizer $L/*/compute-sanitizer/compute-sanitizer \
       /opt/*/compute-sanitizer 2>/dev/null | head -1)
  if [ -z "$CS" ]; then
    echo "compute-sanitizer: not found on this machine"
    find / -name 'compute-sanitizer*' -maxdepth 8 2>/dev/null | head -5
  else
    echo "compute-sanitizer: $CS"
    [ -d $W/ex ] || python3 test/Inputs/make_models.py $W/ex > /dev/null
    for m in mlp:mlp_data:4 resblock:resblock_data:2 attention:attention_data:4 nan_inf:nan_inf_data:1 chain:chain_data:4; do
      IFS=: read -r name data batch <<< "$m"
      $B/partc compile $W/ex/$name.onnx -o $W/cs-$name.plan --batch $batch --quiet
      $B/partc compile $W/ex/$name.onnx -o $W/cs-$name-2.plan --batch $batch --devices 2 --strategy pipeline --quiet 2>/dev/null
      for tool in memcheck racecheck; do
        for plan in $W/cs-$name.plan $W/cs-$name-2.plan; do
          [ -f $plan ] || continue
          timeout 120 $CS --tool $tool --error-exitcode 9 $B/partc-run $plan --backend cuda \
            --precision fp32 --check $W/ex/$data --devices-per-gpu 2 --quiet > $OUT/cs-$tool-$(basename $plan).log 2>&1
          echo "$tool $(basename $plan): exit $? $(grep -o 'ERROR SUMMARY: [0-9]* error[s]*\|RACECHECK SUMMARY: [0-9]* hazard[s]*' $OUT/cs-$tool-$(basename $plan).log | tail -1)"
        done
      done
    done
    # The committed zoo exports (transformers as users export them) and a
    # torchvision ResNet-50, one device, under both tools.
    if [[ $what == *sanitizerzoo* ]]; then
      export_resnet50 $W/cs-r50
      for d in test/models/zoo/*/ $W/cs-r50/; do
        n=$(basename $d)
        m=$d/model.onnx; batch=""
        [ -f $m ] || { m=$d/r50.onnx; batch="--batch 2"; }
        $B/partc compile $m -o $W/cs-zoo-$n.plan $batch --quiet || continue
        check=""; [ -d $d/test_data_set_0 ] && check="--check $d/test_data_set_0 --rtol 1e-3 --atol 1e-4"
        for tool in memcheck racecheck; do
          timeout 150 $CS --tool $tool --error-exitcode 9 $B/partc-run $W/cs-zoo-$n.plan --backend cuda \
            --precision fp32 $check --quiet > $OUT/cs-$tool-zoo-$n.log 2>&1
          echo "$tool zoo/$n: exit $? $(grep -o 'ERROR SUMMARY: [0-9]* error[s]*\|RACECHECK SUMMARY: [0-9]* hazard[s]*' $OUT/cs-$tool-zoo-$n.log | tail -1)"
        done
      done
    fi
  fi
fi
if [[ $what == *conformance* ]]; then
  echo "== conformance (cuda, fp32)"
  # -u: a timeout must not swallow buffered output.
  timeout 420 python3 -u test/conformance/run_conformance.py --bin $B --data $W/data --jobs 48 \
    --expected /dev/null --run-args "--backend cuda --precision fp32 --devices-per-gpu $((NGPU > 1 ? 1 : 2))" \
    ${CONFORMANCE_FILTER:+--filter $CONFORMANCE_FILTER} \
    --write-doc $OUT/conformance-cuda.md 2>&1 | tail -12
fi
if [[ $what == *models* ]]; then
  echo "== models (cuda, fp32)"
  timeout 240 python3 test/models/run_models.py --bin $B --work $W/models --max-devices $NGPU \
    --run-args "--backend cuda --precision fp32 --devices-per-gpu $((3 - NGPU > 1 ? 2 : 1))" 2>&1 | tee $OUT/models-cuda.txt
fi
if [[ $what == *pergpu* ]]; then
  echo "== several plan devices per GPU (data-parallel replicas side by side)"
  export_resnet50 $W/pergpu
  for batch in 16 32 64; do
    for k in 1 2 4; do
      [ $k -gt 1 ] && s="--strategy data" || s=""
      $B/partc compile $W/pergpu/r50.onnx -o $W/pergpu/r$batch-$k.plan --batch $batch --devices $k $s --quiet
      r=$($B/partc-run $W/pergpu/r$batch-$k.plan --backend cuda --keep-inputs --stream --iterations 200 --warmup 5 --devices-per-gpu $k --quiet | grep "ms per batch")
      echo "batch $batch as $k replicas on 1 GPU: $r"
    done
  done
  if [ "$NGPU" -ge 2 ]; then
    for k in 1 2; do
      $B/partc compile $W/pergpu/r50.onnx -o $W/pergpu/d64-$k.plan --batch 64 --devices $((2 * k)) --strategy data --quiet
      r=$($B/partc-run $W/pergpu/d64-$k.plan --backend cuda --keep-inputs --stream --iterations 200 --warmup 5 --devices-per-gpu $k --quiet | grep "ms per batch")
      echo "batch 64 as $((2 * k)) replicas on 2 GPUs: $r"
    done
  fi
fi
if [[ $what == *transformer* ]]; then
  echo "== transformer bench"
  timeout 400 python3 -u bench/bench_transformer.py --bin $B --work $W/tbench 2>&1 | grep -v Warning | tee $OUT/bench-transformer.txt
fi
if [[ $what == *torchencoder* ]]; then
  echo "== PyTorch's nn.TransformerEncoder bench"
  timeout 400 python3 -u bench/bench_transformer.py --model torch --bin $B --work $W/tebench 2>&1 | grep -v Warning | tee $OUT/bench-torch-encoder.txt
fi
if [[ $what == *attn* ]]; then
  echo "== attention, TF32"
  python3 test/Inputs/make_models.py $W/ex > /dev/null
  $B/partc compile $W/ex/attention.onnx -o $W/attention1.plan --batch 4 --quiet
  for extra in "" "--iterations 10 --stream"; do
    timeout 60 $B/partc-run $W/attention1.plan --backend cuda --check $W/ex/attention_data --rtol 1e-2 --atol 1e-2 $extra --quiet || echo "FAILED: attention TF32 $extra"
  done
fi
if [[ $what == *stem* ]]; then
  echo "== stem convolution, plain and space-to-depth"
  timeout 200 python3 -u bench/stem_experiment.py --bin $B --work $W/stem 2>&1 | tee $OUT/stem.txt
fi
if [[ $what == *r50x4* ]]; then
  echo "== ResNet-50 plans for 4 GPUs (analytic cost model)"
  export_resnet50 $W/r50x4
  r() { # label, batch, compile options...
    local label=$1 batch=$2; shift 2
    $B/partc compile $W/r50x4/r50.onnx -o $W/r50x4/p.plan --batch $batch --quiet "$@" --explain \
      | grep -m1 "chosen" | sed "s/^/  $label: /"
    $B/partc-run $W/r50x4/p.plan --backend cuda --keep-inputs --stream --iterations 300 --warmup 10 --quiet \
      | grep "ms per batch" | sed "s/^/  $label: /"
  }
  r "1 GPU, batch 64" 64
  r "1 GPU, batch 256" 256
  r "auto, 4 GPUs, batch 64" 64 --devices 4
  r "4 stages, batch 64" 64 --devices 4 --strategy pipeline
  r "2 stages x 2 replicas, batch 64" 64 --devices 4 --stages 2 --replicas 2
  r "4 replicas, batch 64" 64 --devices 4 --strategy data
  r "4 replicas, batch 256 (64 per GPU)" 256 --devices 4 --strategy data
  r "auto, 4 GPUs, batch 256" 256 --devices 4
fi
if [[ $what == *smallbatch* ]]; then
  echo "== ResNet-50 at batch 16, 64 and 256 (one GPU) and replicas of 16, cuDNN knobs tuned or not"
  export_resnet50 $W/sb
  n=$((NGPU >= 4 ? 4 : NGPU))
  $B/partc compile $W/sb/r50.onnx -o $W/sb/d.plan --batch $((16 * n)) --devices $n --strategy data --quiet
  for batch in 16 64 256; do
    $B/partc compile $W/sb/r50.onnx -o $W/sb/b$batch.plan --batch $batch --quiet
  done
  for knobs in "" --no-cudnn-knobs; do
    for batch in 16 64; do
      s=$(date +%s%N)
      $B/partc-run $W/sb/b$batch.plan --backend cuda --keep-inputs --iterations 50 --warmup 5 $knobs \
        --profile $OUT/profile_b$batch$knobs.json --quiet > /dev/null
      echo "  batch $batch $knobs: profiled run took $(( ($(date +%s%N) - s) / 1000000 )) ms"
    done
    for plan in b16 b64 b256 d; do
      $B/partc-run $W/sb/$plan.plan --backend cuda --keep-inputs --stream --iterations 300 --warmup 10 \
        $knobs --quiet 2>&1 | grep "ms per batch" | sed "s/^/  $plan $knobs: /"
    done
    python3 bench/profile_compare.py $OUT/profile_b16$knobs.json $OUT/profile_b64$knobs.json 2>&1 | head -12
  done
  python3 bench/profile_compare.py $OUT/profile_b16.json $OUT/profile_b64.json > $OUT/smallbatch.txt 2>&1
fi
if [[ $what == *zoo* ]]; then
  # Hugging Face and torchvision models as users export them (both of
  # PyTorch's exporters), compiled and checked against PyTorch on the GPU.
  echo "== zoo"
  Z=$W/zoo
  if [[ $what == *zooexport* ]]; then
    python3 bench/export_zoo.py --out $Z --exporter torchscript,dynamo 2>&1 | grep -v Warning | tail -40
    tar -C $W -cJf $OUT/zoo-tiny.tar.xz zoo
    python3 bench/export_zoo.py --out $Z --exporter torchscript,dynamo \
      --models ${ZOO_VISION:-mobilenet_v3_small,efficientnet_b0,convnext_tiny,regnet_y_400mf,swin_t} 2>&1 | grep -v Warning | tail -20
    # Each export compiled and checked against PyTorch on one GPU.
    for d in $Z/*/; do
      n=$(basename $d)
      if ! timeout 120 $B/partc compile $d/model.onnx -o $d/p.plan --quiet > $d/compile.log 2>&1; then
        echo "  $n: COMPILE FAILED: $(head -c 600 $d/compile.log)"; continue
      fi
      r=$(timeout 120 $B/partc-run $d/p.plan --backend cuda --precision fp32 --check $d/test_data_set_0 --rtol 1e-3 --atol 1e-4 2>&1)
      echo "  $n: rc=$? $(echo "$r" | grep -i -E "on the host|check|error|mismatch" | head -4 | tr '\n' ' ')"
    done
  fi
  if [[ $what == *zoocheck* ]]; then
    # The committed tiny exports and torchvision's models on the GPU, every
    # strategy the GPUs allow.
    timeout 400 python3 test/models/run_zoo.py --bin $B --work $W/zoocheck \
      --run-args "--backend cuda --precision fp32 --devices-per-gpu $((NGPU > 1 ? 1 : 2))" 2>&1 | grep -E "^ok|^FAIL|^zoo" | tee $OUT/zoocheck.txt | grep -v "^ok"
  fi
  if [[ $what == *zoobench* ]]; then
    timeout 500 python3 -u bench/bench_zoo.py --bin $B --work $W/zoobench \
      ${ZOO_MODELS:+--models $ZOO_MODELS} 2>&1 | grep -v -i warn | tee $OUT/zoobench.txt
  fi
  if [[ $what == *zoohost* ]]; then
    # Kernels without a GPU implementation (they run on the host and keep
    # the plan out of CUDA graphs).
    for d in test/models/zoo/*/; do
      $B/partc compile $d/model.onnx -o $W/zh.plan --quiet && \
        $B/partc-run $W/zh.plan --backend cuda 2>&1 | grep -i "on the host" | sed "s|^|  $(basename $d): |"
    done
  fi
fi
if [[ $what == *quick* ]]; then
  echo "== quick bench"
  timeout 450 python3 -u bench/bench_resnet.py --bin $B --work $W/bench --batch 64 --quick 2>&1 | tee $OUT/bench-quick.txt
  cp $W/bench/profile_*.json $W/bench/trace_*.json $OUT/ 2>/dev/null
fi
if [[ ,$what, == *,bench,* ]]; then
  echo "== bench"
  timeout 480 python3 -u bench/bench_resnet.py --bin $B --work $W/bench --batch 64 2>&1 | tee $OUT/bench.txt
  timeout 120 python3 .device/torch_baselines.py infer 2>&1 | tail -3 | tee -a $OUT/bench.txt
  cp $W/bench/profile_*.json $W/bench/trace_*.json $OUT/ 2>/dev/null
fi
if [[ $what == *training* ]]; then
  echo "== training"
  if [[ ${TRAIN_CHECKS:-1} == 1 ]]; then
  t $B/partc-cuda-unittests --gtest_filter='*ChannelsLast*:*Training*:*BatchNorm*:*LayerNorm*'
  # The training tests' models on the GPU, fp32 (no TF32), against the
  # float64 reference: gradients and 20 optimizer steps.
  timeout 150 python3 test/Training/check_training.py $B $W/tg gradients --backend cuda --precision fp32 2>&1 | tee $OUT/train-check.txt
  timeout 150 python3 test/Training/check_training.py $B $W/tt train --backend cuda --precision fp32 2>&1 | tee -a $OUT/train-check.txt
  timeout 100 python3 test/Training/check_training.py $B $W/tl layouts --backend cuda --precision fp32 2>&1 | tee -a $OUT/train-check.txt
  timeout 150 python3 test/Training/check_training.py $B $W/tr recompute --backend cuda --precision fp32 2>&1 | tee -a $OUT/train-check.txt
  # Against PyTorch itself (ResNet-18 and Chainer's MLP, 20 steps).
  timeout 150 python3 test/Training/check_torch.py $B $W/ttorch --backend cuda --precision fp32 2>&1 | tee -a $OUT/train-check.txt
  # One step's gradients of six torchvision models against PyTorch's
  # float64 (MobileNets, ShuffleNet, SqueezeNet, EfficientNet, GoogLeNet).
  timeout 300 python3 test/Training/check_torch_gradients.py $B $W/tgrad --backend cuda --precision fp32 2>&1 | tee -a $OUT/train-check.txt
  fi
  IFS=, read -ra specs <<< "${TRAIN_SPECS:-resnet50 64 224}"
  for spec in "${specs[@]}"; do
    set -- $spec
    [[ $1 == none ]] && continue
    D=$W/train-$1-$2
    timeout 300 python3 -u bench/train_resnet.py $D --model $1 --batch $2 --size $3 ${4:-} 2>&1 | grep -v "Warning\|_C._jit\|^  " | tee $OUT/train-$1-$2-torch.txt
    TF="--train --loss cross-entropy --optimizer sgd --lr 0.1 --momentum 0.9 --weight-decay 1e-4 --quiet"
    $B/partc compile $D/model.onnx -o $D/train.plan --batch $2 $TF || continue
    IN="--input input=$D/x.npy --input labels=$D/labels.npy"
    # Same steps as the strict-fp32 reference above.
    timeout 120 $B/partc-run $D/train.plan --backend cuda --precision fp32 $IN --steps 5 2>&1 | tail -7 | tee -a $OUT/train-$1-$2-partc.txt
    # The steady step: the mean after the second (the first chooses
    # cuDNN's algorithms, the second captures the CUDA graph).
    for prec in ${TRAIN_PRECISIONS:-tf32 fp32}; do
      ms=$(timeout 200 $B/partc-run $D/train.plan --backend cuda --precision $prec $IN --steps 22 2>&1 | grep -o '[0-9.]* after the second' | grep -o '^[0-9.]*')
      python3 -c "ms=float('${ms:-0}'); print('{\"peer\": \"partc-$prec\", \"model\": \"$1\", \"batch\": $2, \"size\": $3, \"ms_per_step\": %.2f, \"images_per_s\": %.1f}' % (ms, $2*1e3/ms if ms else 0))" | tee -a $OUT/train-$1-$2-partc.txt
    done
    # TRAIN_RECOMPUTE=1: the same step with every activation that can be
    # computed again in the backward pass, its memory and time.
    if [[ ${TRAIN_RECOMPUTE:-0} == 1 ]]; then
      for mode in none all; do
        $B/partc compile $D/model.onnx -o $D/train-$mode.plan --batch $2 $TF --recompute $mode --explain 2>&1 | grep -E "arena|kept|   total|recomputed" | tee -a $OUT/train-$1-$2-partc.txt
        ms=$(timeout 200 $B/partc-run $D/train-$mode.plan --backend cuda $IN --steps 22 2>&1 | grep -o '[0-9.]* after the second' | grep -o '^[0-9.]*')
        echo "{\"peer\": \"partc-tf32-recompute-$mode\", \"model\": \"$1\", \"batch\": $2, \"size\": $3, \"ms_per_step\": ${ms:-0}}" | tee -a $OUT/train-$1-$2-partc.txt
      done
    fi
    # Where a step's time goes: kernels by op, and which ran on the host.
    timeout 120 $B/partc-run $D/train.plan --backend cuda $IN --steps 4 --profile $OUT/train-$1-$2-profile.json 2>&1 | grep -v "^step" | head -8 | tee -a $OUT/train-$1-$2-partc.txt
    profile_by_op $OUT/train-$1-$2-profile.json 14 | tee -a $OUT/train-$1-$2-partc.txt
  done
fi
if [[ $what == *bnkernels* ]]; then
  echo "== batch-norm kernel variants (bench/bn_kernels.cu)"
  timeout 300 .device/bn_kernels 2>&1 | tee $OUT/bn-kernels.txt
fi
if [[ $what == *gpt2* ]]; then
  echo "== gpt2 training"
  t $B/partc-cuda-unittests --gtest_filter='*Dropout*'
  # Hugging Face's GPT-2 (small's width, random weights) exported for
  # training, AdamW lr 1e-4, next-token cross-entropy. Specs: layers batch
  # length dropout [--no-compile]; with dropout 0 partc's strict-fp32 steps
  # must reproduce PyTorch's.
  IFS=, read -ra specs <<< "${GPT2_SPECS:-2 8 128 0.0 --no-compile,12 16 256 0.1}"
  for spec in "${specs[@]}"; do
    set -- $spec
    D=$W/gpt2-$1-$2-$3-$4; tag=gpt2-$1l-b$2-t$3-p$4
    timeout 420 python3 -u bench/train_gpt2.py $D --layers $1 --batch $2 --length $3 --dropout $4 ${5:-} 2>&1 | grep -v "Warning\|warn\|^  " | tee $OUT/train-$tag-torch.txt
    TF="--train --loss cross-entropy --optimizer adamw --lr 1e-4"
    s=$(date +%s.%N)
    $B/partc compile $D/model.onnx -o $D/train.plan --batch $2 $TF 2>&1 | tail -3 | tee $OUT/train-$tag-partc.txt || continue
    echo "compile_s $(python3 -c "print(round($(date +%s.%N)-$s,2))")" | tee -a $OUT/train-$tag-partc.txt
    IN="--input input=$D/x.npy --input labels=$D/labels.npy"
    timeout 200 $B/partc-run $D/train.plan --backend cuda --precision fp32 $IN --steps 3 2>&1 | tail -12 | tee -a $OUT/train-$tag-partc.txt
    # ms per step after the second (the first chooses algorithms, the
    # second captures the CUDA graph), as partc-run reports it; the loss
    # is read each step. (Sessions 16-28 reported "after the first",
    # which averages the capture step in.)
    ms=$(timeout 200 $B/partc-run $D/train.plan --backend cuda $IN --steps 22 2>&1 | grep -o '[0-9.]* after the second' | grep -o '^[0-9.]*')
    python3 -c "ms=float('${ms:-0}'); print('{\"peer\": \"partc-tf32\", \"model\": \"gpt2\", \"spec\": \"$spec\", \"ms_per_step\": %.2f, \"tokens_per_s\": %d}' % (ms, $2*$3*1e3/ms if ms else 0))" | tee -a $OUT/train-$tag-partc.txt
    # GPT2_OLD=1: the same step with the build in .device/partc-old.tar.xz
    # (pack_device.sh with OLD_BIN_DIR), in the same call.
    if [[ ${GPT2_OLD:-0} == 1 && -f .device/partc-old.tar.xz ]]; then
      mkdir -p $W/old && tar -C $W/old -xJf .device/partc-old.tar.xz
      $W/old/bin/partc compile $D/model.onnx -o $D/train-old.plan --batch $2 $TF --quiet
      ms=$(timeout 200 $W/old/bin/partc-run $D/train-old.plan --backend cuda $IN --steps 22 2>&1 | grep -o '[0-9.]* after the second' | grep -o '^[0-9.]*')
      echo "{\"peer\": \"partc-old-tf32\", \"model\": \"gpt2\", \"spec\": \"$spec\", \"ms_per_step\": ${ms:-0}}" | tee -a $OUT/train-$tag-partc.txt
    fi
    if [[ ${TRAIN_RECOMPUTE:-0} == 1 ]]; then
      $B/partc compile $D/model.onnx -o $D/train-all.plan --batch $2 $TF --recompute all --explain 2>&1 | grep -E "arena|kept|   total|recomputed" | tee -a $OUT/train-$tag-partc.txt
      $B/partc compile $D/model.onnx -o $D/train-none.plan --batch $2 $TF --recompute none --explain 2>&1 | grep -E "arena|kept|   total" | tee -a $OUT/train-$tag-partc.txt
      ms=$(timeout 200 $B/partc-run $D/train-all.plan --backend cuda $IN --steps 21 2>&1 | grep -o '[0-9.]* after the first' | grep -o '^[0-9.]*')
      echo "{\"peer\": \"partc-tf32-recompute-all\", \"model\": \"gpt2\", \"spec\": \"$spec\", \"ms_per_step\": ${ms:-0}}" | tee -a $OUT/train-$tag-partc.txt
    fi
    timeout 120 $B/partc-run $D/train.plan --backend cuda $IN --steps 3 --profile $OUT/train-$tag-profile.json 2>&1 | grep -v "^step" | head -8 | tee -a $OUT/train-$tag-partc.txt
    profile_by_op $OUT/train-$tag-profile.json 16 | tee -a $OUT/train-$tag-partc.txt
  done
fi
if [[ $what == *parallel* ]]; then
  echo "== data-parallel training"
  t $B/partc-cuda-unittests --gtest_filter='*AllReduce*:*Dropout*:*ChannelsLast*'
  if [[ ${PARALLEL_CHECKS:-1} == 1 ]]; then
  # Correctness (test/Training/parallel.test on the GPU, strict fp32): 2
  # and 4 plan devices sharing GPU 0 (the peer-read average, in CUDA
  # graphs), then one plan device per GPU (NCCL) where there are GPUs.
  timeout 200 python3 test/Training/check_parallel.py $B $W/tp --backend cuda --precision fp32 --devices-per-gpu 4 2>&1 | tee $OUT/parallel-check.txt
  if (( NGPU >= 2 )); then
    PARTC_DEVICES=$(( NGPU >= 4 ? 4 : 2 )) timeout 200 python3 test/Training/check_parallel.py $B $W/tpn --backend cuda --precision fp32 2>&1 | tee -a $OUT/parallel-check.txt
    # Small buckets (several per step, NCCL groups of several tensors) and
    # one all-reduce per gradient.
    for bb in 4096 1; do
      PARTC_CONFIGS=2x1,2x2 PARTC_COMPILE_OPTIONS="--bucket-bytes $bb" timeout 200 python3 test/Training/check_parallel.py $B $W/tpb$bb --backend cuda --precision fp32 2>&1 | tee -a $OUT/parallel-check.txt
    done
  fi
  fi
  # ResNet-50 b256 at 224, SGD: partc on 1 and on every GPU (data
  # parallel, NCCL) against PyTorch single-GPU, the tutorial's hand-made
  # strategies and DDP, in one run. PARALLEL_BATCH overrides the batch;
  # PARALLEL_BENCH=0 runs only the checks above.
  if [[ ${PARALLEL_BENCH:-1} == 1 ]]; then
  PB=${PARALLEL_BATCH:-256}
  # Exported for training (batch norm kept, batch dynamic).
  D=$W/dp && mkdir -p $D
  python3 -c "
import numpy as np, torch, torchvision
net = torchvision.models.resnet50().train()
torch.onnx.export(net, torch.randn(8, 3, 224, 224), '$D/r50.onnx', dynamo=False,
                  opset_version=13, input_names=['input'], output_names=['output'],
                  training=torch.onnx.TrainingMode.TRAINING,
                  dynamic_axes={'input': {0: 'batch'}, 'output': {0: 'batch'}})
rng = np.random.default_rng(0)
np.save('$D/x.npy', rng.standard_normal(($PB, 3, 224, 224), dtype=np.float32))
np.save('$D/labels.npy', rng.integers(0, 1000, $PB))" 2>&1 | grep -v Warn | tail -2
  TF="--train --loss cross-entropy --optimizer sgd --lr 0.1 --momentum 0.9 --quiet"
  IN="--input input=$D/x.npy --input labels=$D/labels.npy"
  # PARALLEL_GPUS: the GPU counts to time (default 1 and all); with
  # PARALLEL_NCHW=1 also 1 GPU in the model's layout (channels first).
  runs="${PARALLEL_GPUS:-1 $NGPU}"
  [[ ${PARALLEL_NCHW:-0} == 1 ]] && runs="1nchw $runs"
  for n in $(printf '%s\n' $runs | awk '!seen[$0]++'); do
    layout=""
    [[ $n == *nchw ]] && { layout="--layout nchw"; }
    g=${n%nchw}
    s=$(date +%s.%N)
    $B/partc compile $D/r50.onnx -o $D/train$n.plan --batch $PB --devices $g $layout $TF || continue
    echo "compile_s $(python3 -c "print(round($(date +%s.%N)-$s,2))") devices $n" | tee -a $OUT/parallel-bench.txt
    out=$(timeout 240 $B/partc-run $D/train$n.plan --backend cuda $IN --steps ${PARALLEL_STEPS:-11} 2>&1)
    echo "$out" | grep -v "^step [2-9] \|^step [1-9][0-9] " | tail -12 | tee -a $OUT/parallel-bench.txt
    # Steady state: after the second step, which captures the graphs.
    ms=$(echo "$out" | grep -o '[0-9.]* after the second' | grep -o '^[0-9.]*')
    python3 -c "ms=float('${ms:-0}'); print('{\"peer\": \"partc-tf32${layout:+-nchw}\", \"gpus\": $g, \"batch\": $PB, \"ms_per_step\": %.2f, \"img_s\": %.1f}' % (ms, $PB*1e3/ms if ms else 0))" | tee -a $OUT/parallel-bench.txt
    # PARALLEL_NOGRAPHS=1: also launched kernel by kernel (a thread per
    # GPU), with a trace of the last step.
    if [[ ${PARALLEL_NOGRAPHS:-0} == 1 ]]; then
      out=$(timeout 240 $B/partc-run $D/train$n.plan --backend cuda $IN --steps ${PARALLEL_STEPS:-11} --no-graphs 2>&1)
      ms=$(echo "$out" | grep -o '[0-9.]* after the second' | grep -o '^[0-9.]*')
      python3 -c "ms=float('${ms:-0}'); print('{\"peer\": \"partc-tf32-no-graphs\", \"gpus\": $g, \"batch\": $PB, \"ms_per_step\": %.2f}' % ms)" | tee -a $OUT/parallel-bench.txt
    fi
    [[ ${PARALLEL_PROFILE:-1} == 1 ]] || continue
    timeout 120 $B/partc-run $D/train$n.plan --backend cuda $IN --steps 3 --profile $OUT/parallel-$n-profile.json 2>&1 | grep -v "^step" | head -6 | tee -a $OUT/parallel-bench.txt
    profile_by_op $OUT/parallel-$n-profile.json 12 | tee -a $OUT/parallel-bench.txt
  done
  if [[ ${PARALLEL_TORCH:-1} == 1 ]]; then
  timeout 400 python3 .device/torch_baselines.py ddp 2>&1 | grep -v Warning | tail -8 | tee -a $OUT/parallel-bench.txt
  # DDP as a user tuning for tensor cores runs it: channels last.
  [[ ${PARALLEL_DDP_CL:-1} == 1 ]] && timeout 400 python3 bench/ddp_variants.py --gpus "$(printf '%s\n' ${PARALLEL_GPUS:-1 $NGPU} | sort -un | paste -sd,)" --batch $PB --channels-last 2>&1 | grep peer | tee -a $OUT/parallel-bench.txt
  [[ ${PARALLEL_EAGER:-1} == 1 ]] && timeout 300 python3 -c "
import sys; sys.argv = ['x']
exec(open('.device/torch_baselines.py').read().split(\"if __name__\")[0])
s = train_steps(models.resnet50(num_classes=1000).cuda(0), $PB, 224, 10)
print('{\"peer\": \"torch-eager-1gpu\", \"batch\": $PB, \"ms_per_step\": %.2f}' % (s * 1e3))" 2>&1 | grep peer | tee -a $OUT/parallel-bench.txt
  fi
  fi
fi
if [[ $what == *faults* ]]; then
  echo "== a device failing or stopping mid-step (test/Training/check_faults.py)"
  # Plan devices sharing GPU 0 (peer-read average, one graph), then one per
  # GPU (NCCL, whose communicators the watchdog must abort).
  timeout 300 python3 test/Training/check_faults.py $B $W/faults --backend cuda --devices-per-gpu 2 2>&1 | tee $OUT/faults-check.txt
  if (( NGPU >= 2 )); then
    timeout 300 python3 test/Training/check_faults.py $B $W/faultsn --backend cuda 2>&1 | tee -a $OUT/faults-check.txt
  fi
fi
if [[ $what == *chainer* ]]; then
  echo "== Chainer's MNIST MLP: split by hand over 2 GPUs (PyTorch) against partc"
  # partc with 1 device, and with 2 left to the cost model (--strategy auto).
  for b in ${CHAINER_BATCHES:-100 8192}; do
    D=$W/chainer/b$b
    timeout 300 python3 bench/chainer_mlp.py $D --batch $b 2>&1 | grep peer | tee -a $OUT/chainer.txt
    TF="--train --loss cross-entropy --optimizer sgd --lr 0.01 --momentum 0.9 --batch $b"
    IN="--input input=$D/x.npy --input labels=$D/labels.npy"
    for n in $(printf '%s\n' 1 $NGPU | awk '$1 <= 2 && !seen[$1]++'); do
      $B/partc compile $D/mlp.onnx -o $D/train$n.plan --devices $n $TF --explain 2>&1 | grep -i "^chose\|strategy" | head -2 | tee -a $OUT/chainer.txt
      ms=$(timeout 120 $B/partc-run $D/train$n.plan --backend cuda $IN --steps 202 2>&1 | grep -o '[0-9.]* after the second' | grep -o '^[0-9.]*')
      echo "{\"peer\": \"partc-tf32-${n}dev\", \"model\": \"chainer-mlp\", \"batch\": $b, \"ms_per_step\": ${ms:-0}}" | tee -a $OUT/chainer.txt
    done
  done
fi
if [[ $what == *trainpipe* ]]; then
  echo "== training pipelines"
  if [[ ${PIPE_CHECKS:-1} == 1 ]]; then
  # Correctness (test/Training/parallel.test's pipeline cases on the GPU,
  # strict fp32): plan devices sharing GPU 0, then one per GPU.
  PARTC_CONFIGS=pipe2x4,gpipe4x2,pipe4x4,hybrid2x2x2,1x2 timeout 200 python3 test/Training/check_parallel.py $B $W/pp --backend cuda --precision fp32 --devices-per-gpu 4 2>&1 | tee $OUT/pipe-check.txt
  if (( NGPU >= 2 )); then
    PARTC_CONFIGS=pipe2x4,gpipe2x2,pipe2x1 timeout 200 python3 test/Training/check_parallel.py $B $W/ppn --backend cuda --precision fp32 2>&1 | tee -a $OUT/pipe-check.txt
  fi
  fi
  # PyTorch's model-parallel tutorial: ResNet-50, batch 120 of 128x128,
  # MSE on one-hot labels, SGD lr 0.001. partc on 1 GPU, data-parallel,
  # the tutorial's layer2/layer3 cut with micro-batches (its split_size),
  # the cost model's cut, beside the tutorial's own strategies and DDP.
  PB=${PIPE_BATCH:-120}; HW=${PIPE_HW:-128}
  D=$W/tut && mkdir -p $D
  python3 -c "
import numpy as np, torch, torchvision, onnx
net = torchvision.models.resnet50().train()
torch.onnx.export(net, torch.randn(8, 3, $HW, $HW), '$D/r50.onnx', dynamo=False,
                  opset_version=13, input_names=['input'], output_names=['output'],
                  training=torch.onnx.TrainingMode.TRAINING,
                  dynamic_axes={'input': {0: 'batch'}, 'output': {0: 'batch'}})
names = [n.name for n in onnx.load('$D/r50.onnx').graph.node if n.name.startswith('/layer2/')]
open('$D/cut.txt', 'w').write(names[-1])
rng = np.random.default_rng(0)
np.save('$D/x.npy', rng.standard_normal(($PB, 3, $HW, $HW), dtype=np.float32))
l = np.zeros(($PB, 1000), np.float32); l[np.arange($PB), rng.integers(0, 1000, $PB)] = 1
np.save('$D/labels.npy', l)" 2>&1 | grep -v Warn | tail -2
  CUT=$(cat $D/cut.txt)
  TF="--train --loss mse --optimizer sgd --lr 0.001 --quiet --batch $PB"
  IN="--input input=$D/x.npy --input labels=$D/labels.npy"
  run_plan() {  # tag, partc compile options...
    local tag=$1; shift
    local s=$(date +%s.%N)
    $B/partc compile $D/r50.onnx -o $D/$tag.plan $TF "$@" || return
    local cs=$(python3 -c "print(round($(date +%s.%N)-$s,2))")
    local out=$(timeout 200 $B/partc-run $D/$tag.plan --backend cuda $IN --steps 11 2>&1)
    local ms=$(echo "$out" | grep -o '[0-9.]* after the first' | grep -o '^[0-9.]*')
    echo "$out" | grep -i "error\|fail" | head -3
    python3 -c "ms=float('${ms:-0}'); print('{\"peer\": \"partc\", \"plan\": \"$tag\", \"options\": \"$*\", \"compile_s\": $cs, \"batch\": $PB, \"hw\": $HW, \"ms_per_step\": %.2f, \"img_s\": %.1f}' % (ms, $PB*1e3/ms if ms else 0))" | tee -a $OUT/pipe-bench.txt
  }
  if [[ ${PIPE_BENCH:-1} == 1 ]]; then
  run_plan one --devices 1
  if (( NGPU >= 2 )); then
    run_plan dp2 --devices 2 --strategy data
    run_plan cut-m1 --devices 2 --split-at $CUT --micro-batches 1
    for m in 2 4 8; do run_plan cut-m$m --devices 2 --split-at $CUT --micro-batches $m; done
    run_plan cut-m4-gpipe --devices 2 --split-at $CUT --micro-batches 4 --schedule gpipe
    for m in 4 8; do run_plan auto-m$m --devices 2 --strategy pipeline --micro-batches $m; done
    timeout 100 $B/partc-run $D/cut-m4.plan --backend cuda $IN --steps 3 --trace $OUT/pipe-cut-m4-trace.json > /dev/null 2>&1
  fi
  if (( NGPU >= 4 )); then
    run_plan dp4 --devices 4 --strategy data
    run_plan pipe4-m8 --devices 4 --strategy pipeline --micro-batches 8
    run_plan hybrid2x2-m4 --devices 4 --stages 2 --micro-batches 4
  fi
  timeout 300 python3 bench/tutorial_baselines.py $PB $HW 2>&1 | grep '^{' | tee -a $OUT/pipe-bench.txt
  fi
  # Where the step goes (PIPE_PROFILE: tag:options specs).
  [[ -n ${PIPE_PROFILE:-} ]] && bench/pipe_profile.sh $OUT $PIPE_PROFILE
fi
if [[ $what == *decoderdp* ]]; then
  echo "== GPT-2 data-parallel training"
  # A GPT-2-medium-sized decoder (24 layers, 1024 wide, 16 heads; Hugging
  # Face's GPT-2, random weights, dropout 0.1) with AdamW: partc on every
  # GPU against partc on one (the issue's scaling goal: 0.9 x N).
  # GPT2DP_SPEC: layers width heads batch length.
  set -- ${GPT2DP_SPEC:-24 1024 16 8 512}
  D=$W/gpt2dp; tag=gpt2dp-$1l-$2w-b$4-t$5
  timeout 300 python3 -u bench/train_gpt2.py $D --layers $1 --width $2 --heads $3 --batch $4 --length $5 --dropout 0.1 --no-compile --steps 1 --timed 5 2>&1 | grep -v "Warning\|warn\|^  " | tee $OUT/train-$tag-torch.txt
  TF="--train --loss cross-entropy --optimizer adamw --lr 1e-4 --quiet"
  IN="--input input=$D/x.npy --input labels=$D/labels.npy"
  # Where the step goes (GPT2_PROFILE: tag:options specs, see pipe_profile.sh).
  [[ -n ${GPT2_PROFILE:-} ]] && PROFILE_DIR=$D PROFILE_MODEL=model.onnx PROFILE_TF="$TF --batch $4" bench/pipe_profile.sh $OUT $GPT2_PROFILE
  # GPT2DP_GPUS: the GPU counts to time (default 1 and all).
  # GPT2DP_BUCKETS: --bucket-bytes settings to time on several GPUs (0:
  # chosen from the link, 1: one all-reduce per gradient).
  [[ ${GPT2DP_BENCH:-1} == 1 ]] && for n in $(printf '%s\n' ${GPT2DP_GPUS:-1 $NGPU} | sort -un); do
   for bb in $( (( n > 1 )) && echo ${GPT2DP_BUCKETS:-0} || echo 0); do
   # GPT2DP_VARIANTS: base, nopad (--no-pad-matmul-columns), and weak:
   # the batch grows with the GPUs (batch x n, so each replica keeps one
   # GPU's batch, as DDP is usually run): the same weights exported at
   # that batch (the export fixes it).
   for v in ${GPT2DP_VARIANTS:-base}; do
    X=""; [[ $v == nopad ]] && X="--no-pad-matmul-columns"
    bt=$4; M=$D/model.onnx; VIN=$IN
    if [[ $v == weak ]]; then
      (( n > 1 )) || continue
      bt=$(( $4 * n )); DW=$D-w$n; M=$DW/model.onnx
      timeout 200 python3 bench/train_gpt2.py $DW --layers $1 --width $2 --heads $3 --batch $bt --length $5 --dropout 0.1 --export-only 2>&1 | grep exported
      VIN="--input input=$DW/x.npy --input labels=$DW/labels.npy"
    fi
    s=$(date +%s.%N)
    $B/partc compile $M -o $D/train$n.plan --batch $bt --devices $n $TF --bucket-bytes $bb $X || continue
    echo "compile_s $(python3 -c "print(round($(date +%s.%N)-$s,2))") devices $n bucket_bytes $bb $v" | tee -a $OUT/train-$tag-partc.txt
    # (--summary also runs the plan: one step on the GPU, not the CPU.)
    timeout 120 $B/partc-run $D/train$n.plan --summary --backend cuda $VIN --steps 1 2>&1 | grep "all-reduces" | head -1 | tee -a $OUT/train-$tag-partc.txt
    out=$(timeout 240 $B/partc-run $D/train$n.plan --backend cuda $VIN --steps 21 2>&1)
    echo "$out" | grep -v "^step [2-9] \|^step [1-9][0-9] " | tail -5 | tee -a $OUT/train-$tag-partc.txt
    # Steady: after the second step, which captures the graphs.
    ms=$(echo "$out" | grep -o '[0-9.]* after the second' | grep -o '^[0-9.]*')
    python3 -c "ms=float('${ms:-0}'); print('{\"peer\": \"partc-tf32\", \"gpus\": $n, \"batch\": $bt, \"bucket_bytes\": $bb, \"variant\": \"$v\", \"ms_per_step\": %.2f, \"tokens_per_s\": %d}' % (ms, $bt*$5*1e3/ms if ms else 0))" | tee -a $OUT/train-$tag-partc.txt
    [[ ${GPT2DP_PROFILES:-1} == 1 ]] || continue
    timeout 120 $B/partc-run $D/train$n.plan --backend cuda $VIN --steps 3 --profile $OUT/train-$tag-$n-$bb$v-profile.json 2>&1 | grep "predicted\|measured" | tee -a $OUT/train-$tag-partc.txt
    profile_by_op $OUT/train-$tag-$n-$bb$v-profile.json 8 | tee -a $OUT/train-$tag-partc.txt
    (( n > 1 )) && [[ ${GPT2DP_TRACE:-1} == 1 ]] && timeout 120 $B/partc-run $D/train$n.plan --backend cuda $VIN --steps 2 --trace $OUT/train-$tag-$n-$bb$v-trace.json > /dev/null 2>&1
   done
   done
  done
  # The same step as a 2-stage pipeline (GPIPE_MICRO: micro-batch counts).
  if (( NGPU >= 2 )) && [[ ${GPT2DP_BENCH:-1} == 1 && ${GPT2DP_PIPE:-1} == 1 ]]; then
    for m in ${GPIPE_MICRO:-4 8}; do
      $B/partc compile $D/model.onnx -o $D/pipe$m.plan --batch $4 --devices 2 --strategy pipeline --micro-batches $m $TF || continue
      out=$(timeout 240 $B/partc-run $D/pipe$m.plan --backend cuda $IN --steps 21 2>&1)
      ms=$(echo "$out" | grep -o '[0-9.]* after the second' | grep -o '^[0-9.]*')
      python3 -c "ms=float('${ms:-0}'); print('{\"peer\": \"partc-tf32-pipeline\", \"gpus\": 2, \"micro_batches\": $m, \"ms_per_step\": %.2f, \"tokens_per_s\": %d}' % (ms, $4*$5*1e3/ms if ms else 0))" | tee -a $OUT/train-$tag-partc.txt
    done
  fi
fi

