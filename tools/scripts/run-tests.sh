#!/usr/bin/env bash
# Builds (incrementally) and runs every test: runtime unit tests, lit tests
# of the dialects, passes, importer and tools, conformance against ONNX's
# test data, and the ResNet-50 / transformer model tests.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
ninja -C "$BUILD_DIR" -j "$(nproc)"
ctest --test-dir "$BUILD_DIR" --output-on-failure "$@"
