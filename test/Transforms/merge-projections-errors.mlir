// RUN: partc-opt %s --partc-merge-projections --split-input-file --verify-diagnostics

// Tests that a reader's view past its operand is diagnosed before the pass
// could move it (the pass itself diagnoses nothing: it merges what fits).
func.func @view(%x: tensor<2x8x32xf32>) -> tensor<2x2x8x8xf32> {
  %w = graph.constant {value = dense<1.000000e+00> : tensor<32x32xf32>} : () -> tensor<32x32xf32>
  %q = graph.matmul %x, %w : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %k = graph.matmul %x, %w : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  // expected-error@+2 {{lhs view [2,2,8,16] with strides [256,16,32,1] at offset 64 reaches element 575 of a buffer of 512; the views come from slices, reshapes and transposes that partc-fold-matmul-views folds}}
  // expected-error@+1 {{failed to infer returned types}}
  %s = graph.strided_matmul %q, %k {lhs_offset = 64 : i64, lhs_shape = array<i64: 2, 2, 8, 16>, lhs_strides = array<i64: 256, 16, 32, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 16, 8>, rhs_strides = array<i64: 256, 16, 1, 32>, shape = array<i64: 2, 2, 8, 8>} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x2x8x8xf32>
  return %s : tensor<2x2x8x8xf32>
}
