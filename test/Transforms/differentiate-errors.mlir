// RUN: partc-opt %s --partc-differentiate --split-input-file --verify-diagnostics

// Tests that an op without a gradient rule on the path to the loss is named.
func.func @main(%x: tensor<1x1x4x4xf32> {graph.name = "x"}) -> (tensor<1x1x3x3xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<1x1x2x2xf32>} : () -> tensor<1x1x2x2xf32>
  // expected-error@+1 {{'graph.conv' has no gradient yet, so the model cannot be trained through it}}
  %y = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x4x4xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x3x3xf32>
  return %y : tensor<1x1x3x3xf32>
}

// -----

// Tests that a model whose loss depends on no initializer is refused.
// expected-error@+1 {{the loss depends on no float initializer of the model, so there is nothing to train}}
func.func @main(%x: tensor<4xf32> {graph.name = "x"}) -> (tensor<4xf32> {graph.name = "y"}) {
  %c = graph.constant {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %y = graph.add %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that the loss must know which output it applies to.
// expected-error@+1 {{the model has 2 outputs ('y', 'z'); choose the one the loss applies to with --output}}
func.func @main(%x: tensor<4xf32> {graph.name = "x"}) -> (tensor<4xf32> {graph.name = "y"}, tensor<4xf32> {graph.name = "z"}) {
  %p = graph.constant {graph.initializer = "p", value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %y = graph.mul %x, %p : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y, %y : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a fused activation, which hides the pre-activation value, is
// refused with a hint to differentiate before fusion.
func.func @main(%x: tensor<4xf32> {graph.name = "x"}) -> (tensor<4xf32> {graph.name = "y"}) {
  %p = graph.constant {graph.initializer = "p", value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  // expected-error@+1 {{has a fused activation 'relu'; differentiate the graph before partc-fuse-activations}}
  %y = graph.add %x, %p {activation = "relu"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that integer outputs take no loss.
// expected-error@+1 {{the loss applies to an output of type 'tensor<4xi64>'; it must be floating-point}}
func.func @main(%x: tensor<4xi64> {graph.name = "x"}) -> (tensor<4xi64> {graph.name = "y"}) {
  return %x : tensor<4xi64>
}
