#!/usr/bin/env bash
# Packs what a GPU machine needs (it has no MLIR or Debian packages) into
# .device/ (git-ignored), compressed to fit the 64 MiB carry limit.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
rm -rf .device /tmp/partc-pack && mkdir -p .device /tmp/partc-pack/bin /tmp/partc-pack/lib
strip -o /tmp/partc-pack/bin/partc "$BUILD_DIR/bin/partc"
strip -o /tmp/partc-pack/bin/partc-run "$BUILD_DIR/bin/partc-run"
if [ -x "$BUILD_DIR/bin/partc-cuda-unittests" ]; then
  strip -o /tmp/partc-pack/bin/partc-cuda-unittests "$BUILD_DIR/bin/partc-cuda-unittests"
fi
cp -L /usr/lib/x86_64-linux-gnu/libonnx_proto.so.1 /usr/lib/x86_64-linux-gnu/libprotobuf.so.32 /tmp/partc-pack/lib/
tar -C /tmp/partc-pack -cJf .device/partc-bin.tar.xz bin lib
tar -C /usr/share/libonnx-testdata -cJf .device/testdata.tar.xz data/node \
  data/pytorch-converted data/pytorch-operator data/simple
cp ../shared/bench/torch_baselines.py .device/ 2>/dev/null || true
du -sh .device/*
