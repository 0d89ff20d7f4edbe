#!/usr/bin/env bash
# Builds (incrementally) and runs every test: runtime unit tests, lit tests
# of the dialects, passes, importer and tools, conformance against ONNX's
# test data, and the ResNet-50 / transformer model tests; then the same unit,
# lit and conformance tests in a clang build with AddressSanitizer and
# UndefinedBehaviorSanitizer, and each libFuzzer target for a bounded time
# (docs/robustness.md). Arguments go to the first ctest.
#   PARTC_FUZZ_SECONDS  seconds per fuzz target (default 60; 0 skips fuzzing)
#   PARTC_SKIP_SANITIZE=1  only the first part (a quicker local run)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
SAN_DIR=${SAN_DIR:-build-san}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
ninja -C "$BUILD_DIR" -j "$(nproc)"
ctest --test-dir "$BUILD_DIR" --output-on-failure "$@"

[ "${PARTC_SKIP_SANITIZE:-0}" = 1 ] && exit 0
if [ ! -f "$SAN_DIR/build.ninja" ]; then
  cmake -S . -B "$SAN_DIR" -G Ninja -DCMAKE_C_COMPILER=clang-22 \
    -DCMAKE_CXX_COMPILER=clang++-22 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1" \
    "-DPARTC_SANITIZE=address;undefined" -DPARTC_FUZZ=ON
fi
ninja -C "$SAN_DIR" -j "$(nproc)"
ctest --test-dir "$SAN_DIR" --output-on-failure -L sanitize
seconds=${PARTC_FUZZ_SECONDS:-60}
if [ "$seconds" -gt 0 ]; then
  test/fuzz/run_fuzzers.sh "$SAN_DIR" "$seconds"
fi
