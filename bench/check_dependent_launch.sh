#!/usr/bin/env bash
# On a GPU machine: whether partc-run --dependent-launch (layer norms
# launched with programmatic stream serialization, sm_90+) is correct and
# whether it pays. Runs its GPU test, then times BERT-large at 4 and 16 x
# 384 and GPT-2 medium in bf16 without and with the flag, partc alone, in
# the same call (bench_precision.py --no-torch: the models are exported by
# ../shared/bench/torch_peers.py, copied to .device/ by pack_device.sh).
# Needs .device/partc-bin.tar.xz (bench/pack_device.sh). Prints one line
# per model and flag; a benchmark, never a test.
set -u
export NCCL_NVLS_ENABLE=0
L=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
W=/tmp/partc-gpu
mkdir -p $W && tar -C $W -xJf .device/partc-bin.tar.xz
export LD_LIBRARY_PATH=$L/cu13/lib:$L/cudnn/lib:$L/nccl/lib:$L/cublas/lib:$W/lib:${LD_LIBRARY_PATH:-}
B=$W/bin
nvidia-smi -L
timeout 120 $B/partc-cuda-unittests \
  --gtest_filter='GpuKernels.DependentLayerNormWaitsForItsInput:GpuKernels.SixteenBitKernelsMatchCpu' 2>&1 |
  grep -E '^\[ +(OK|FAILED|SKIPPED|PASSED) |Failure|Expected|Which is'
MODELS=${MODELS:-bert-large:4:384,bert-large:16:384,gpt2-medium:8:512}
for flags in "" "--dependent-launch"; do
  echo "== partc-run flags: ${flags:-none}"
  timeout 300 python3 bench/bench_precision.py --bin $B --work /tmp/dl \
    --peers .device/torch_peers.py --models "$MODELS" --precisions bf16 \
    --iterations 100 --no-torch --run-flags="$flags" 2>&1 |
    grep -E '"mode": "partc|rror' | cut -c1-200
done
