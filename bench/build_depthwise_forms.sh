#!/usr/bin/env bash
# Builds bench/depthwise_forms.cu into .device/ against the runtime's
# compiled Nn.cu (run after the build and bench/pack_device.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
objects=$BUILD_DIR/runtime/CMakeFiles/partc_runtime_cuda.dir/cuda
mkdir -p .device
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -I. bench/depthwise_forms.cu \
  $objects/Nn.cu.o $objects/Kernels.cu.o $objects/Elementwise.cu.o -o .device/depthwise_forms
