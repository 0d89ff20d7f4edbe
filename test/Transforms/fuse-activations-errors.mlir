// RUN: partc-opt %s --partc-fuse-activations --split-input-file --verify-diagnostics

// Tests that only known activations can be fused into a producer.
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{attribute 'activation' failed to satisfy constraint: string attribute a fused activation (relu)}}
  %a = graph.add %x, %x {activation = "gelu"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}


// -----

// Tests that a matmul's residual addend must have the result's shape.
func.func @addend(%x: tensor<3x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>, %z: tensor<1x3xf32>) -> tensor<3x3xf32> {
  // expected-error@+2 {{addend [1,3] must have the result's type, shape [3,3]}}
  // expected-error@+1 {{failed to infer returned types}}
  %m = graph.matmul %x, %w, %b, %z : (tensor<3x4xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
  return %m : tensor<3x3xf32>
}

// -----

// Tests that a training batch norm's fused addend must have its input's
// type.
func.func @norm_addend(%x: tensor<2x4x3x3xf32>, %z: tensor<2x4x3x1xf32>, %s: tensor<4xf32>) -> tensor<2x4x3x3xf32> {
  // expected-error@+2 {{addend tensor<2x4x3x1xf32> must have the input's type tensor<2x4x3x3xf32>}}
  // expected-error@+1 {{failed to infer returned types}}
  %y, %m, %v = graph.batch_norm_train %x, %s, %s, %z : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x4x3x1xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  return %y : tensor<2x4x3x3xf32>
}

// -----

// Tests that a batch norm gradient with a fused ReLU needs the norm's
// bias.
func.func @norm_grad_relu(%x: tensor<2x4x3x3xf32>, %s: tensor<4xf32>) -> tensor<2x4x3x3xf32> {
  // expected-error@+2 {{a fused activation needs the norm's bias (operand 5) to compute the norm's output again}}
  // expected-error@+1 {{failed to infer returned types}}
  %dx, %ds, %db = graph.batch_norm_grad %x, %x, %s, %s, %s {activation = "relu"} : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  return %dx : tensor<2x4x3x3xf32>
}

// -----

// Tests that a product takes a tanh Gelu but no other Gelu as its
// activation, and an add not even the tanh one.
func.func @gelu(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error@+1 {{attribute 'activation' failed to satisfy constraint: string attribute a fused activation (relu or gelu_tanh)}}
  %m = graph.matmul %x, %x {activation = "gelu"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

// -----

func.func @add_gelu(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{attribute 'activation' failed to satisfy constraint: string attribute a fused activation (relu)}}
  %a = graph.add %x, %x {activation = "gelu_tanh"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// Tests that layer norm's gradient takes an addend of the input's type only.
func.func @layer_norm_grad_addend(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %s: tensor<8xf32>, %z: tensor<1x8xf32>) -> tensor<4x8xf32> {
  // expected-error@+2 {{addend tensor<1x8xf32> must have the input's type tensor<4x8xf32>; hint: it is added to the input's gradient}}
  // expected-error@+1 {{failed to infer returned types}}
  %dx, %ds, %db = graph.layer_norm_grad %dy, %x, %s, %z {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<1x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %dx : tensor<4x8xf32>
}

// -----

// Tests that SiLU is a convolution's activation only, not a product's.
func.func @silu_product(%x: tensor<3x4xf32>, %w: tensor<4x3xf32>) -> tensor<3x3xf32> {
  // expected-error@+1 {{attribute 'activation' failed to satisfy constraint: string attribute a fused activation (relu or gelu_tanh)}}
  %m = graph.matmul %x, %w {activation = "silu"} : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  return %m : tensor<3x3xf32>
}
