#!/usr/bin/env bash
# On a GPU machine (after bench/pack_device.sh, carry .device): where each
# model's kernel time goes. For each MODEL:BATCH of MODELS (torch_peers.py's
# names), exports it, compiles PRECISION plans, runs partc-run --profile and
# prints the time by op and the costliest kernels; the profiles land in
# $OUT. A benchmark, never a test.
set -u
. "$(dirname "$0")/device_env.sh"
OUT=${OUT:-/tmp/out}
for spec in ${MODELS:-efficientnet_b0:64}; do
  IFS=: read -r model batch <<< "$spec"
  d=/tmp/profiled/$model-$batch
  timeout 200 python3 .device/torch_peers.py "$model" $d --batch "$batch" --no-compile --no-bf16 \
    2>/dev/null | grep '"eager"'
  ins=""
  for f in $d/*.npy; do
    n=$(basename "$f" .npy)
    [ "$n" = reference ] || ins="$ins --input $n=$f"
  done
  for p in ${PRECISIONS:-bf16}; do
    timeout 120 $B/partc compile $d/model.onnx -o $d/$p.plan --precision $p --quiet || continue
    timeout 120 $B/partc-run $d/$p.plan --backend cuda $ins --iterations 10 --warmup 3 \
      --profile $OUT/profile-$model-$p.json --quiet > /dev/null 2>&1
    timeout 60 $B/partc-run $d/$p.plan --backend cuda $ins --iterations 30 --warmup 5 \
      --keep-inputs --keep-outputs --stream --quiet 2>&1 | grep -o "[0-9.]* ms per batch" |
      sed "s/^/$model $p streamed: /"
    python3 - $OUT/profile-$model-$p.json "$model $p" <<'PY'
import json, sys, collections
k = json.load(open(sys.argv[1]))["kernels"]
by, sig = collections.defaultdict(lambda: [0.0, 0]), collections.defaultdict(lambda: [0.0, 0])
for e in k:
    op = e["signature"].split("(")[0].split()[0]
    by[op][0] += e["seconds"]; by[op][1] += 1
    s = sig[e["signature"][:170]]
    s[0] += e["seconds"]; s[1] += 1
total = sum(v[0] for v in by.values())
print(f"{sys.argv[2]}: {total*1e3:.2f} ms of kernels per step, {len(k)} kernels")
for op, (t, n) in sorted(by.items(), key=lambda x: -x[1][0])[:10]:
    print(f"  {op:24s} {t*1e3:8.3f} ms {n:4d} kernels")
for s, (t, n) in sorted(sig.items(), key=lambda x: -x[1][0])[:14]:
    print(f"  {t*1e3:8.3f} ms {n:3d}x {s}")
PY
  done
done
