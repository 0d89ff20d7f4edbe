// RUN: partc-opt %s --partc-lower-to-plan --split-input-file --verify-diagnostics
// An unknown transport is rejected, naming the choices, before any lowering.
// RUN: not partc-opt %s --partc-lower-to-plan="transport=pigeon" --split-input-file 2>&1 | FileCheck %s --check-prefix=TRANSPORT
// TRANSPORT: error: unknown transport 'pigeon'; expected p2p (device-to-device copies) or nccl

// Tests that unplaced ops are rejected.
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{is not placed on a device; run partc-assign-devices first}}
  %a = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// Tests that an op no kernel can run is reported at compile time.
func.func @main(%x: tensor<1x1x4x4xf64>, %w: tensor<1x1x3x3xf64>) -> tensor<1x1x2x2xf64> {
  // expected-error@+1 {{cannot be executed: kernel 'conv': supports f32 only, got f64[1,1,4,4]}}
  %a = graph.conv %x, %w {graph.device = 0 : i64, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x4x4xf64>, tensor<1x1x3x3xf64>) -> tensor<1x1x2x2xf64>
  return %a : tensor<1x1x2x2xf64>
}
