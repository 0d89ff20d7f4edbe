#!/usr/bin/env bash
# Regenerates the committed seed corpora in test/fuzz/corpus from the test
# models (test/Inputs/make_models.py), the ONNX node tests that partc passes
# (test/conformance/expected_pass.txt) and plans compiled from the models.
# Usage: test/fuzz/make_seeds.sh [BUILD_DIR]   (a normal build, for partc)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-build}/bin
C=test/fuzz/corpus
T=$(mktemp -d)
trap 'rm -rf $T' EXIT
rm -rf $C && mkdir -p $C/compile $C/plan-reader $C/tensor-file
/usr/bin/python3 test/Inputs/make_models.py $T/m > /dev/null
for f in $T/m/*.onnx; do
  [ "$(stat -c %s "$f")" -le 16384 ] && cp "$f" $C/compile/model-$(basename "$f")
done
data=/usr/share/libonnx-testdata/data
grep '^node/' test/conformance/expected_pass.txt | while read -r case; do
  f=$data/$case/model.onnx
  [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 2048 ] && cp "$f" $C/compile/${case#node/}.onnx
done
# Plans: one device, a pipeline and data-parallel replicas.
for m in mlp chain attention masked_softmax gelu inception; do
  $BIN/partc compile $T/m/$m.onnx -o $C/plan-reader/$m-1.plan --batch 4 --quiet
  $BIN/partc compile $T/m/$m.onnx -o $C/plan-reader/$m-pipe.plan --batch 4 --devices 2 --strategy pipeline --micro-batches 2 --quiet || true
done
$BIN/partc compile $T/m/mlp.onnx -o $C/plan-reader/mlp-data.plan --batch 4 --devices 2 --strategy data --quiet
# Training plans: state updated in place (SGD with momentum, AdamW).
$BIN/partc compile $T/m/mlp.onnx -o $C/plan-reader/mlp-train-sgd.plan --batch 4 --train --momentum 0.9 --quiet
$BIN/partc compile $T/m/mlp.onnx -o $C/plan-reader/mlp-train-adamw.plan --batch 4 --train --optimizer adamw --quiet
# Data-parallel training (all_reduce groups) and gradient accumulation.
$BIN/partc compile $T/m/mlp.onnx -o $C/plan-reader/mlp-train-data.plan --batch 4 --train --devices 2 --quiet
$BIN/partc compile $T/m/mlp.onnx -o $C/plan-reader/mlp-train-accumulate.plan --batch 4 --train --devices 2 --micro-batches 2 --quiet
# Training pipelines (transfers received at their first reader) and hybrids.
$BIN/partc compile $T/m/mlp.onnx -o $C/plan-reader/mlp-train-pipe.plan --batch 4 --train --devices 2 --strategy pipeline --micro-batches 2 --quiet
$BIN/partc compile $T/m/mlp.onnx -o $C/plan-reader/mlp-train-hybrid.plan --batch 4 --train --devices 4 --stages 2 --micro-batches 2 --quiet
# Tensor files: a selector byte (0: .npy, 1: .pb), then the file.
i=0
for f in $T/m/mlp_data/*.pb $T/m/nan_inf_data/input_0.pb $T/m/x_ok.npy $T/m/x_wrong_type.npy; do
  sel=0; case $f in *.pb) sel=1;; esac
  { printf "\\$(printf %o $sel)"; cat "$f"; } > $C/tensor-file/seed-$i
  i=$((i + 1))
done
du -sh $C/*
