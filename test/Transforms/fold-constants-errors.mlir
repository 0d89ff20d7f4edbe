// RUN: partc-opt %s --partc-fold-constants --split-input-file --verify-diagnostics

// Tests that IR whose types do not check is rejected before folding.
func.func @bad_matmul(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  %w = graph.constant {value = dense<1.0> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  // expected-error@+2 {{contraction dimensions differ: [2,3] x [4,2]}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = graph.matmul %x, %w : (tensor<2x3xf32>, tensor<4x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}
