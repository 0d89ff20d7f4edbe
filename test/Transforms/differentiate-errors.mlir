// RUN: partc-opt %s --partc-differentiate --split-input-file --verify-diagnostics

// Tests that an op without a gradient rule on the path to the loss is named.
func.func @main(%x: tensor<2x4xf32> {graph.name = "x"}) -> (tensor<2x4xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %h = graph.mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %c = graph.constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  // expected-error@+1 {{'graph.mod' has no gradient yet, so the model cannot be trained through it}}
  %y = graph.mod %h, %c : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
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

// -----

// Tests that a convolution made channels last is refused: its gradient
// ops are channels first.
func.func @main(%x: tensor<1x4x4x1xf32> {graph.name = "x"}) -> (tensor<1x3x3x2xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<2x2x2x1xf32>} : () -> tensor<2x2x2x1xf32>
  // expected-error@+1 {{'graph.conv' op is channels last; differentiate the graph before partc-convert-layout}}
  %y = graph.conv %x, %w {channels_last, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x1xf32>, tensor<2x2x2x1xf32>) -> tensor<1x3x3x2xf32>
  return %y : tensor<1x3x3x2xf32>
}

// -----

// Tests that a training batch norm with a fused residual add is refused:
// its gradient rule is the unfused op's.
func.func @main(%x: tensor<2x2x2x2xf32> {graph.name = "x"}) -> (tensor<2x2x2x2xf32> {graph.name = "y"}) {
  %s = graph.constant {graph.initializer = "s", value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  // expected-error@+1 {{'graph.batch_norm_train' op has a fused addend; differentiate the graph before partc-fuse-activations}}
  %y, %m, %v = graph.batch_norm_train %x, %s, %s, %x : (tensor<2x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2x2x2x2xf32>) -> (tensor<2x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>)
  return %y : tensor<2x2x2x2xf32>
}

// -----

// Tests that a pad's gradient is refused in a mode other than constant.
func.func @main(%x: tensor<2x4xf32> {graph.name = "x"}) -> (tensor<2x6xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %h = graph.mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  // expected-error@+1 {{'graph.pad' op pads in mode 'reflect'; only constant padding has a gradient so far}}
  %y = graph.pad %h {pads = array<i64: 0, 1, 0, 1>, mode = "reflect"} : (tensor<2x4xf32>) -> tensor<2x6xf32>
  return %y : tensor<2x6xf32>
}

// -----

// Tests that GatherElements of a rank past what index tuples address (8
// dimensions) is refused for its gradient with the rank.
func.func @main(%x: tensor<1x1x1x1x1x1x1x1x2xf32> {graph.name = "x"}, %i: tensor<1x1x1x1x1x1x1x1x2xi64> {graph.name = "i"}) -> (tensor<1x1x1x1x1x1x1x1x2xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<1x1x1x1x1x1x1x1x2xf32>} : () -> tensor<1x1x1x1x1x1x1x1x2xf32>
  %h = graph.mul %x, %w : (tensor<1x1x1x1x1x1x1x1x2xf32>, tensor<1x1x1x1x1x1x1x1x2xf32>) -> tensor<1x1x1x1x1x1x1x1x2xf32>
  // expected-error@+1 {{of rank 9 has no gradient: index tuples cover 8 dimensions at most}}
  %y = graph.gather_elements %h, %i {axis = 8 : i64} : (tensor<1x1x1x1x1x1x1x1x2xf32>, tensor<1x1x1x1x1x1x1x1x2xi64>) -> tensor<1x1x1x1x1x1x1x1x2xf32>
  return %y : tensor<1x1x1x1x1x1x1x1x2xf32>
}

// -----

// Tests that a resize whose gradient would need an index table longer than
// 2^22 entries is refused with the dimension and its length.
func.func @main(%x: tensor<1x1x1x2xf32> {graph.name = "x"}) -> (tensor<1x1x1x8388608xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<1x1x1x2xf32>} : () -> tensor<1x1x1x2xf32>
  %h = graph.mul %x, %w : (tensor<1x1x1x2xf32>, tensor<1x1x1x2xf32>) -> tensor<1x1x1x2xf32>
  // expected-error@+1 {{has no gradient: its dimension 3 is resized to 8388608 elements, more than the 4194304 an index table may hold}}
  %y = graph.resize %h {sizes = array<i64: 1, 1, 1, 8388608>, scales = array<f64: 1.0, 1.0, 1.0, 4194304.0>, mode = "nearest"} : (tensor<1x1x1x2xf32>) -> tensor<1x1x1x8388608xf32>
  return %y : tensor<1x1x1x8388608xf32>
}

// -----

// Tests that GatherElements whose gradient would need a coordinate table
// longer than 2^22 entries is refused with the dimension and its length.
func.func @main(%x: tensor<8388608x2xf32> {graph.name = "x"}, %i: tensor<8388608x1xi64> {graph.name = "i"}) -> (tensor<8388608x1xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<8388608x2xf32>} : () -> tensor<8388608x2xf32>
  %h = graph.mul %x, %w : (tensor<8388608x2xf32>, tensor<8388608x2xf32>) -> tensor<8388608x2xf32>
  // expected-error@+1 {{has no gradient: dimension 0 of its indices has 8388608 elements, more than the 4194304 a coordinate table may hold}}
  %y = graph.gather_elements %h, %i {axis = 1 : i64} : (tensor<8388608x2xf32>, tensor<8388608x1xi64>) -> tensor<8388608x1xf32>
  return %y : tensor<8388608x1xf32>
}
