// RUN: partc-opt %s --partc-convert-layout --split-input-file --verify-diagnostics

// Tests that a channels-last convolution checks channels on the last axis.
func.func @main(%x: tensor<1x4x4x3xf32>, %w: tensor<2x1x1x2xf32>) -> tensor<1x4x4x2xf32> {
  // expected-error@+2 {{input channels 3 do not match weight [2,1,1,2] with group 1 (channels last)}}
  // expected-error@+1 {{failed to infer returned types}}
  %c = graph.conv %x, %w {channels_last, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x3xf32>, tensor<2x1x1x2xf32>) -> tensor<1x4x4x2xf32>
  return %c : tensor<1x4x4x2xf32>
}

// -----

// Tests that a fused residual must have the convolution's result type.
func.func @main(%x: tensor<1x4x4x2xf32>, %w: tensor<2x1x1x2xf32>, %b: tensor<2xf32>, %z: tensor<1x2x4x4xf32>) -> tensor<1x4x4x2xf32> {
  // expected-error@+2 {{addend [1,2,4,4] must have the result's type [1,4,4,2]}}
  // expected-error@+1 {{failed to infer returned types}}
  %c = graph.conv %x, %w, %b, %z {channels_last, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<2x1x1x2xf32>, tensor<2xf32>, tensor<1x2x4x4xf32>) -> tensor<1x4x4x2xf32>
  return %c : tensor<1x4x4x2xf32>
}

// -----

// Tests that pooling rejects a channels-last input without spatial axes.
func.func @main(%x: tensor<1x3xf32>) -> tensor<1x3xf32> {
  // expected-error@+2 {{input must have rank >= 3}}
  // expected-error@+1 {{failed to infer returned types}}
  %p = graph.max_pool %x {channels_last, dilations = array<i64: 1>, kernel_shape = array<i64: 1>, pads = array<i64: 0, 0>, strides = array<i64: 1>} : (tensor<1x3xf32>) -> tensor<1x3xf32>
  return %p : tensor<1x3xf32>
}

// -----

// Tests that a channels-last batch norm reads its channels on the last
// axis.
func.func @main(%x: tensor<2x4x4x3xf32>, %s: tensor<4xf32>) -> tensor<2x4x4x3xf32> {
  // expected-error@+2 {{operand 1 tensor<4xf32> must hold one f32 per channel (3)}}
  // expected-error@+1 {{failed to infer returned types}}
  %y, %m, %v = graph.batch_norm_train %x, %s, %s {channels_last} : (tensor<2x4x4x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x3xf32>, tensor<4xf32>, tensor<4xf32>)
  return %y : tensor<2x4x4x3xf32>
}

// -----

// Tests that a channels-last weight gradient checks its shape against the
// forward convolution's, channels last.
func.func @main(%x: tensor<1x4x4x3xf32>, %dy: tensor<1x4x4x2xf32>) -> tensor<2x1x1x2xf32> {
  // expected-error@+2 {{input channels 3 do not match weight}}
  // expected-error@+1 {{failed to infer returned types}}
  %dw = graph.conv_grad_weight %x, %dy {channels_last, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>, weight_shape = array<i64: 2, 1, 1, 2>} : (tensor<1x4x4x3xf32>, tensor<1x4x4x2xf32>) -> tensor<2x1x1x2xf32>
  return %dw : tensor<2x1x1x2xf32>
}
