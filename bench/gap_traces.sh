#!/usr/bin/env bash
# On a GPU machine (after bench/pack_device.sh, carry .device): where a
# streamed plan's GPU idles between kernels. Exports each model with
# ../shared/bench/torch_peers.py (export only), compiles it, runs it
# streamed under bench/kernel_trace.cpp (kernels, copies, fills, and each
# CUDA graph's shape) and sums the gaps with bench/kernel_gaps.py. A
# benchmark, never a test. SPECS: model:batch[:seq],...; PRECISION: a
# --precision values, comma-separated (the first is traced); RUN_FLAGS:
# extra partc-run flags; AB_FLAG: a partc-run flag to time against its
# absence, twice each, alternating, in every precision.
set -u
. "$(dirname "$0")/device_env.sh"
SPECS=${SPECS:-bert-large:16:384,bert-large:4:384,resnet50:16,resnet50:64}
PRECISIONS=${PRECISIONS:-bf16}
PRECISION=${PRECISIONS%%,*}
mkdir -p /tmp/gaps
for spec in ${SPECS//,/ }; do
  IFS=: read -r model batch seq <<<"$spec"
  d=/tmp/gaps/$model-$batch
  args=(--batch "$batch")
  [ -n "${seq:-}" ] && args+=(--seq "$seq")
  if [ ! -f $d/model.onnx ]; then
    python3 .device/torch_peers.py "$model" $d "${args[@]}" --no-compile \
      --no-bf16 >/dev/null 2>$d.err || { echo "$spec: export failed"; tail -3 $d.err; continue; }
  fi
  ins=""
  for f in $d/*.npy; do
    n=$(basename "$f" .npy)
    [ "$n" = reference ] || ins="$ins --input $n=$f"
  done
  $B/partc compile $d/model.onnx -o $d/$PRECISION.plan --precision $PRECISION \
    --devices 1xh200 --quiet || continue
  PARTC_KERNEL_TRACE=$d/k.csv LD_PRELOAD=$PWD/.device/libkernel_trace.so \
    timeout 120 $B/partc-run $d/$PRECISION.plan --backend cuda --iterations 60 \
    --warmup 5 --keep-inputs --keep-outputs --stream --quiet ${RUN_FLAGS:-} $ins 2>&1 |
    grep -E "ms per batch|graph of" | sort | uniq -c | cut -c1-240
  python3 bench/kernel_gaps.py $d/k.csv --label "$spec $PRECISION" --last 3000 --pairs ${PAIRS:-15} --top ${TOP:-0}
  [ -n "${AB_FLAG:-}" ] || continue
  for p in ${PRECISIONS//,/ }; do
    [ -f $d/$p.plan ] || $B/partc compile $d/model.onnx -o $d/$p.plan \
      --precision $p --devices 1xh200 --quiet || continue
    line="$spec $p: as is / $AB_FLAG, ms per batch:"
    for round in 1 2; do
      for flag in "" "$AB_FLAG"; do
        ms=$(timeout 120 $B/partc-run $d/$p.plan --backend cuda --iterations 60 \
          --warmup 5 --keep-inputs --keep-outputs --stream --quiet ${RUN_FLAGS:-} \
          $flag $ins 2>&1 | sed -n 's/.* \([0-9.]*\) ms per batch.*/\1/p')
        line="$line ${ms:-?}"
      done
    done
    echo "$line"
  done
done
