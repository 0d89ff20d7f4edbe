// RUN: partc-opt %s --partc-fuse-normalizations --split-input-file --verify-diagnostics

// Tests that an RMS normalization's scale must broadcast to the normalized
// dimensions.
func.func @main(%x: tensor<4x8xf32>, %w: tensor<4xf32>) -> tensor<4x8xf32> {
  // expected-error@+2 {{scale/bias [4] does not broadcast to [8]}}
  // expected-error@+1 {{failed to infer returned types}}
  %n = graph.rms_norm %x, %w {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}

// -----

// Tests that the normalized dimensions must exist.
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error@+2 {{axis 2 is out of range}}
  // expected-error@+1 {{failed to infer returned types}}
  %n = graph.rms_norm %x {axis = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}
