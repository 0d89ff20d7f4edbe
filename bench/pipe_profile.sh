#!/usr/bin/env bash
# Where a training pipeline's step goes: per-device kernel time of the
# tutorial's ResNet-50 step (run_gpu_session.sh trainpipe made $W/tut), or
# of PROFILE_DIR/PROFILE_MODEL with PROFILE_TF, for the plans given.
# Usage (after run_gpu_session.sh trainpipe on the same machine):
#   bench/pipe_profile.sh OUT TAG:OPTION,OPTION... (options joined by commas)
set -u
OUT=$1; shift
W=/tmp/partc-gpu; B=$W/bin; D=${PROFILE_DIR:-$W/tut}
L=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$L/cu13/lib:$L/cudnn/lib:$L/nccl/lib:$L/cublas/lib:$W/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
TF=${PROFILE_TF:-"--train --loss mse --optimizer sgd --lr 0.001 --quiet --batch 120"}
IN="--input input=$D/x.npy --input labels=$D/labels.npy"
for spec in "$@"; do
  tag=${spec%%:*}; opts=${spec#*:}; opts=${opts//,/ }
  $B/partc compile $D/${PROFILE_MODEL:-r50.onnx} -o $D/p-$tag.plan $TF $opts || continue
  out=$(timeout 100 $B/partc-run $D/p-$tag.plan --backend cuda $IN --steps 11 2>&1)
  ms=$(echo "$out" | grep -o '[0-9.]* after the first' | grep -o '^[0-9.]*')
  timeout 100 $B/partc-run $D/p-$tag.plan --backend cuda $IN --steps 3 --profile $OUT/p-$tag.json > /dev/null 2>&1
  [[ ${TRACE:-0} == 1 ]] && timeout 100 $B/partc-run $D/p-$tag.plan --backend cuda $IN --steps 3 --trace $OUT/t-$tag.json > /dev/null 2>&1
  python3 - "$OUT/p-$tag.json" "$tag" "$ms" <<'PY'
import json, sys, collections
k = json.load(open(sys.argv[1]))["kernels"]
dev = collections.defaultdict(float); by = collections.defaultdict(float); n = collections.Counter()
for e in k:
    dev[e.get("device", 0)] += e["seconds"]
    op = e["signature"].split("(")[0].split()[0]
    by[op] += e["seconds"]; n[op] += 1
print(f"{sys.argv[2]}: step {sys.argv[3]} ms; kernels per device (ms): " +
      ", ".join(f"{d}: {t*1e3:.2f}" for d, t in sorted(dev.items())) + f"; {len(k)} kernels")
for op, t in sorted(by.items(), key=lambda x: -x[1])[:8]:
    print(f"    {op:28s} {t*1e3:8.2f} ms {n[op]:4d}")
PY
done
