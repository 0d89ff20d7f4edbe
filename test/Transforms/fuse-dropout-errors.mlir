// RUN: partc-opt %s --partc-fuse-dropout --split-input-file --verify-diagnostics

// Tests that a folded dropout brings both its step and seed and its ratio.
func.func @ratio_without_counters(%dz: tensor<2x4xf32>, %p: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error@+2 {{has 0 dropout operands and a dropout_ratio; hint: a folded dropout takes its step and seed and its ratio}}
  // expected-error@+1 {{failed to infer returned types}}
  %g = graph.softmax_grad %dz, %p {axis = 1 : i64, dropout_ratio = 1.000000e-01 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

// Tests that the step and seed are int64 scalars.
func.func @float_seed(%dz: tensor<2x4xf32>, %p: tensor<2x4xf32>, %step: tensor<i64>, %seed: tensor<f32>) -> tensor<2x4xf32> {
  // expected-error@+2 {{dropout counter tensor<f32> must be an int64 scalar (the step or the seed)}}
  // expected-error@+1 {{failed to infer returned types}}
  %g = graph.softmax_grad %dz, %p, %step, %seed {axis = 1 : i64, dropout_ratio = 1.000000e-01 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<i64>, tensor<f32>) -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}
