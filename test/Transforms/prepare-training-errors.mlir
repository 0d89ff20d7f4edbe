// RUN: partc-opt %s --partc-prepare-training --split-input-file --verify-diagnostics
// RUN: not partc-opt %s --partc-prepare-training="batch-norm-momentum=1.5" --split-input-file 2>&1 | FileCheck %s --check-prefix=MOMENTUM

// Tests that running statistics computed in the graph are refused: only
// an initializer can become state.
func.func @main(%x: tensor<2x3xf32> {graph.name = "x"}) -> (tensor<2x3xf32> {graph.name = "y"}) {
  %g = graph.constant {graph.initializer = "g", value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %v = graph.constant {graph.initializer = "var", value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %m = graph.neg %g : (tensor<3xf32>) -> tensor<3xf32>
  // expected-error@+1 {{takes its running mean from a computed value, not an initializer}}
  %y = graph.batch_norm %x, %g, %g, %m, %v : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Tests that one value per channel is refused: its variance is undefined.
func.func @main(%x: tensor<1x3xf32> {graph.name = "x"}) -> (tensor<1x3xf32> {graph.name = "y"}) {
  %g = graph.constant {graph.initializer = "g", value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
  // expected-error@+1 {{normalizes 1 value per channel of 'tensor<1x3xf32>'; training-mode batch statistics need at least 2 (a larger batch)}}
  %y = graph.batch_norm %x, %g, %g, %g, %g : (tensor<1x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3xf32>
  return %y : tensor<1x3xf32>
}

// -----

// Tests that a norm whose own momentum is outside [0, 1] is refused.
func.func @main(%x: tensor<4x2xf32> {graph.name = "x"}) -> (tensor<4x2xf32> {graph.name = "y"}) {
  %g = graph.constant {graph.initializer = "g", value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %m = graph.constant {graph.initializer = "mean", value = dense<0.0> : tensor<2xf32>} : () -> tensor<2xf32>
  // expected-error@+1 {{has momentum 1.5; the running statistics' weight must be in [0, 1] (hint: --batch-norm-momentum sets PyTorch's momentum for every norm)}}
  %y = graph.batch_norm %x, %g, %g, %m, %g {momentum = 1.5 : f64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// Tests that a momentum outside [0, 1] is refused (a graph without batch
// norm, which the first RUN leaves alone).
// MOMENTUM: --batch-norm-momentum must be in [0, 1], got 1.5
func.func @main(%x: tensor<4xf32> {graph.name = "x"}) -> (tensor<4xf32> {graph.name = "y"}) {
  return %x : tensor<4xf32>
}
