#!/usr/bin/env bash
# Installs what is missing (Debian 12), builds partc, and runs the main job:
# compile a small bundled model for 2 devices, run it on the CPU backend,
# print its outputs and the plan summary.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}

PACKAGES=(cmake ninja-build g++ pkg-config
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libonnx-dev libonnx-testdata protobuf-compiler libprotobuf-dev
  libopenblas-dev libzstd-dev libgtest-dev
  clang-22 libclang-rt-22-dev libfuzzer-22-dev
  python3-onnx python3-numpy python3-torch python3-torchvision)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "bootstrap: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
ninja -C "$BUILD_DIR" -j "$(nproc)"

# The main job: a small MLP with a residual edge, pipelined over 2 devices.
EXAMPLE="$BUILD_DIR/example"
/usr/bin/python3 test/Inputs/make_models.py "$EXAMPLE" > /dev/null
echo
echo "== partc compile mlp.onnx --devices 2 --strategy pipeline --micro-batches 2 --batch 4"
"$BUILD_DIR/bin/partc" compile "$EXAMPLE/mlp.onnx" -o "$EXAMPLE/mlp.plan" \
  --devices 2 --strategy pipeline --micro-batches 2 --batch 4
echo
echo "== partc-run mlp.plan --backend cpu --check (numpy reference)"
"$BUILD_DIR/bin/partc-run" "$EXAMPLE/mlp.plan" --backend cpu --summary \
  --check "$EXAMPLE/mlp_data"
