#!/usr/bin/env bash
# On a GPU machine (after bench/pack_device.sh, carry .device): the zoo at
# its published sizes in fp32 and bf16 (bench_zoo.py: partc against
# PyTorch eager, the cost model's predicted and calibrated steps), then a
# kernel trace of each bf16 plan's streamed run (bench/kernel_trace.cpp,
# bench/kernel_gaps.py): how busy the GPU stays and where it waits. A
# benchmark, never a test. MODELS picks the zoo models (default: all),
# EXPORTER torchscript (default) or dynamo.
set -u
. "$(dirname "$0")/device_env.sh"
MODELS=${MODELS:-bert,gpt2,vit,llama,t5enc}
EXPORTER=${EXPORTER:-torchscript}
timeout ${ZOO_TIMEOUT:-400} python3 bench/bench_zoo.py --bin $B --work /tmp/zoo \
  --models $MODELS --exporter $EXPORTER --precisions fp32,bf16 --iterations 30 --gpus 1 2>&1 |
  grep -E '^\||kernels [0-9.]+ ms|calibration|branches:|rror|export failed' | cut -c1-300
for m in ${MODELS//,/ }; do
  d=/tmp/zoo/$m-$EXPORTER
  [ -f $d/1partc-bf16.plan ] || continue
  ins=""
  i=0
  for f in $d/test_data_set_0/input_*.pb; do
    n=$(python3 -c "import onnx; g=onnx.load('$d/model.onnx').graph; print(g.input[$i].name)")
    ins="$ins --input $n=$f"
    i=$((i + 1))
  done
  PARTC_KERNEL_TRACE=/tmp/k-$m.csv LD_PRELOAD=$PWD/.device/libkernel_trace.so \
    timeout 60 $B/partc-run $d/1partc-bf16.plan --backend cuda --iterations 40 \
    --warmup 5 --keep-inputs --keep-outputs --stream --quiet $ins 2>&1 |
    grep -E "ms per batch" | tr '\n' ' '
  echo
  python3 bench/kernel_gaps.py /tmp/k-$m.csv --label "$m bf16" --last 2000
done
