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
# A second build to compare with (bench/compare_binaries.py): a directory
# holding its partc and partc-run, e.g. a build of the previous commit.
if [ -n "${OLD_BIN_DIR:-}" ]; then
  rm -rf /tmp/partc-pack-old && mkdir -p /tmp/partc-pack-old/bin
  strip -o /tmp/partc-pack-old/bin/partc "$OLD_BIN_DIR/partc"
  strip -o /tmp/partc-pack-old/bin/partc-run "$OLD_BIN_DIR/partc-run"
  tar -C /tmp/partc-pack-old -cJf .device/partc-old.tar.xz bin
fi
cp ../shared/bench/torch_baselines.py ../shared/bench/torch_peers.py .device/ 2>/dev/null || true
# The kernel tracer (bench/kernel_trace.cpp), preloaded on the GPU machine.
g++ -O2 -shared -fPIC -I/usr/local/cuda/include bench/kernel_trace.cpp \
  -o .device/libkernel_trace.so -ldl
du -sh .device/*
