#!/usr/bin/env bash
# Cost-model calibration on GPUs: profile ResNet-50 on one GPU, then compile
# 2-GPU plans with that cost table and compare predicted with measured.
# Run after run_gpu_session.sh has unpacked the tools (same machine call).
set -u
W=/tmp/partc-gpu
B=$W/bin
M=$W/bench/resnet50.onnx
OUT=${OUT:-/tmp/out}
$B/partc compile $M -o $W/cal1.plan --batch 64 --devices 1 --quiet
$B/partc-run $W/cal1.plan --backend cuda --warmup 5 --iterations 10 --profile $OUT/profile-h200.json --quiet
echo "| plan | predicted (analytic) | predicted (cost table) | measured p50, resident |"
echo "|---|---|---|---|"
for opts in "--devices 1" "--devices 2xh200 --strategy pipeline --micro-batches 4" "--devices 2xh200 --strategy data" "--devices 2xh200"; do
  a=$($B/partc compile $M -o $W/cal.plan --batch 64 $opts --explain | sed -n 's/.*predicted step \([0-9.]*\) ms.*/\1/p' | head -1)
  $B/partc compile $M -o $W/cal.plan --batch 64 $opts --cost-table $OUT/profile-h200.json --quiet
  line=$($B/partc-run $W/cal.plan --backend cuda --keep-inputs --warmup 5 --iterations 20 --quiet | grep predicted)
  p=$(echo "$line" | sed -n 's/predicted step \([0-9.]*\) ms.*/\1/p')
  m=$(echo "$line" | sed -n 's/.*measured p50 \([0-9.]*\) ms.*/\1/p')
  echo "| $opts | $a ms | $p ms | $m ms |"
done
