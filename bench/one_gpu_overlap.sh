#!/usr/bin/env bash
# On a GPU machine (after bench/pack_device.sh, carry .device): does running
# two plan devices side by side on one GPU fill what one batch leaves idle?
# For each SPEC (MODEL:BATCH[:SEQ], torch_peers.py's models), streamed ms per
# batch of the same batch compiled four ways, alternated ROUNDS times:
#   one    one device (what partc picks for one GPU)
#   pipe1  two pipeline stages, whole batches: batch k+1's first half of the
#          layers beside batch k's second half (--devices-per-gpu 2)
#   pipe2  two stages, two micro-batches
#   data   two replicas, half the batch each
# A benchmark, never a test.
set -u
. "$(dirname "$0")/device_env.sh"
SPECS=${SPECS:-bert-large:4:384 bert-large:16:384 resnet50:16 resnet50:64}
PRECISION=${PRECISION:-bf16}
ROUNDS=${ROUNDS:-2}
for spec in $SPECS; do
  IFS=: read -r model batch seq <<< "$spec"
  d=/tmp/overlap/$model-$batch
  timeout 300 python3 .device/torch_peers.py "$model" $d --batch "$batch" ${seq:+--seq $seq} \
    --no-compile --no-bf16 2>/dev/null | grep '"eager"'
  ins=""
  for f in $d/*.npy; do
    n=$(basename "$f" .npy)
    [ "$n" = reference ] || ins="$ins --input $n=$f"
  done
  c() { timeout 120 $B/partc compile $d/model.onnx --precision $PRECISION --quiet "$@" ||
    echo "compile failed: $*"; }
  c -o $d/one.plan
  c -o $d/pipe1.plan --devices 2 --strategy pipeline --micro-batches 1
  c -o $d/pipe2.plan --devices 2 --strategy pipeline --micro-batches 2
  c -o $d/data.plan --devices 2 --strategy data
  for round in $(seq "$ROUNDS"); do
    for p in one pipe1 pipe2 data; do
      k=2
      [ $p = one ] && k=1
      ms=$(timeout 120 $B/partc-run $d/$p.plan --backend cuda --devices-per-gpu $k \
        --iterations 50 --warmup 5 --keep-inputs --keep-outputs --stream --quiet $ins 2>&1 |
        grep -o "[0-9.]* ms per batch" || echo failed)
      echo "$spec $PRECISION $p round $round: $ms"
    done
  done
done
