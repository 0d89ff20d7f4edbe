// RUN: partc-opt %s --partc-differentiate --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-differentiate="loss=cross-entropy" --split-input-file | FileCheck %s --check-prefix=CE

// Tests that a linear layer and a ReLU get reverse-mode gradients: the
// loss first, then the backward ops in reverse order, the ReLU's through
// its result, the weight's by a transposed GEMM; the results are the loss
// and one gradient per initializer, and labels are a new argument.
// CHECK-LABEL: func @main
// CHECK-SAME: %[[X:.*]]: tensor<4x3xf32> {graph.name = "x"}, %[[L:.*]]: tensor<4x2xf32> {graph.name = "labels"}
// CHECK-SAME: -> (tensor<f32> {graph.name = "loss"}, tensor<3x2xf32> {graph.gradient_of = "w", graph.name = "grad.w"})
// CE-LABEL: func @main
// CE-SAME: tensor<4xi64> {graph.name = "labels"}
// CE: %[[LOSS:.*]] = graph.softmax_cross_entropy
// CE: graph.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x2xf32>, tensor<4xi64>, tensor<f32>)
func.func @main(%x: tensor<4x3xf32> {graph.name = "x"}) -> (tensor<4x2xf32> {graph.name = "y"}) {
  // CHECK: %[[W:.*]] = graph.constant {graph.initializer = "w"
  %w = graph.constant {graph.initializer = "w", value = dense<0.5> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
  // CHECK: %[[H:.*]] = graph.gemm %[[X]], %[[W]]
  %h = graph.gemm %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  // CHECK: %[[Y:.*]] = graph.relu %[[H]]
  %y = graph.relu %h : (tensor<4x2xf32>) -> tensor<4x2xf32>
  // CHECK: %[[D:.*]] = graph.sub %[[Y]], %[[L]]
  // CHECK: %[[SQ:.*]] = graph.mul %[[D]], %[[D]]
  // CHECK: %[[LOSS:.*]] = graph.reduce_mean %[[SQ]] {axes = array<i64: 0, 1>, keepdims = 0 : i64}
  // CHECK: %[[DY:.*]] = graph.relu_grad %{{.*}}, %[[Y]]
  // CHECK: %[[DW:.*]] = graph.gemm %[[X]], %[[DY]] {beta = 0.000000e+00 : f64, trans_a = 1 : i64}
  // CHECK: return %[[LOSS]], %[[DW]]
  return %y : tensor<4x2xf32>
}

// -----

// Tests that a parameter used twice sums its gradients and that a constant
// not imported from an initializer gets none.
// CHECK-LABEL: func @main
// CHECK-SAME: -> (tensor<f32> {graph.name = "loss"}, tensor<4xf32> {graph.gradient_of = "p", graph.name = "grad.p"})
func.func @main(%x: tensor<4xf32> {graph.name = "x"}) -> (tensor<4xf32> {graph.name = "y"}) {
  %p = graph.constant {graph.initializer = "p", value = dense<2.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %c = graph.constant {value = dense<3.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %a = graph.mul %x, %p : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = graph.mul %a, %p : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = graph.add %b, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: %[[P:.*]] = graph.constant {graph.initializer = "p"
  // CHECK: %[[A:.*]] = graph.mul %arg0, %[[P]]
  // CHECK: graph.expand
  // CHECK: %[[DB:.*]] = graph.add
  // CHECK-NEXT: %[[G1:.*]] = graph.mul %[[DB]], %[[P]]
  // CHECK-NEXT: %[[G2:.*]] = graph.mul %[[DB]], %[[A]]
  // CHECK-NEXT: %[[G3:.*]] = graph.mul %[[G1]], %arg0
  // CHECK-NEXT: %[[SUM:.*]] = graph.add %[[G2]], %[[G3]]
  // CHECK-NEXT: return %{{.*}}, %[[SUM]]
  return %y : tensor<4xf32>
}

// -----

// Tests that a convolution with a bias gets its input gradient by
// conv_grad_input (the input's shape as an attribute, so a stride loses no
// row), its weight gradient by conv_grad_weight and its bias gradient by a
// sum over the batch and positions.
// CHECK-LABEL: func @main
// CHECK-SAME: -> (tensor<f32> {graph.name = "loss"}, tensor<1x1x5x5xf32> {graph.gradient_of = "k", graph.name = "grad.k"}, tensor<2x1x3x3xf32> {graph.gradient_of = "w", graph.name = "grad.w"}, tensor<2xf32> {graph.gradient_of = "b", graph.name = "grad.b"})
func.func @main(%x: tensor<1x1x5x5xf32> {graph.name = "x"}) -> (tensor<1x2x2x2xf32> {graph.name = "y"}) {
  %k = graph.constant {graph.initializer = "k", value = dense<0.5> : tensor<1x1x5x5xf32>} : () -> tensor<1x1x5x5xf32>
  %w = graph.constant {graph.initializer = "w", value = dense<0.5> : tensor<2x1x3x3xf32>} : () -> tensor<2x1x3x3xf32>
  %b = graph.constant {graph.initializer = "b", value = dense<0.5> : tensor<2xf32>} : () -> tensor<2xf32>
  %s = graph.mul %x, %k : (tensor<1x1x5x5xf32>, tensor<1x1x5x5xf32>) -> tensor<1x1x5x5xf32>
  %y = graph.conv %s, %w, %b {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x1x5x5xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  // CHECK: %[[DX:.*]] = graph.conv_grad_input %[[DY:.*]], %{{.*}} {dilations = array<i64: 1, 1>, input_shape = array<i64: 1, 1, 5, 5>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x2x2xf32>, tensor<2x1x3x3xf32>) -> tensor<1x1x5x5xf32>
  // CHECK: %[[DW:.*]] = graph.conv_grad_weight %{{.*}}, %[[DY]] {{{.*}}weight_shape = array<i64: 2, 1, 3, 3>} : (tensor<1x1x5x5xf32>, tensor<1x2x2x2xf32>) -> tensor<2x1x3x3xf32>
  // CHECK: %[[DB:.*]] = graph.reduce_sum %[[DY]] {axes = array<i64: 0, 2, 3>, keepdims = 0 : i64}
  // CHECK: %[[DK:.*]] = graph.mul %[[DX]], %arg0
  // CHECK: return %{{.*}}, %[[DK]], %[[DW]], %[[DB]]
  return %y : tensor<1x2x2x2xf32>
}

// -----

// Tests that batch norm in training mode gets all three gradients from
// one batch_norm_grad, which reads the batch statistics the forward op
// returned, and that max pooling's gradient reads the pooled input.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<2x3x4x4xf32> {graph.name = "x"}) -> (tensor<2x3x2x2xf32> {graph.name = "y"}) {
  %g = graph.constant {graph.initializer = "g", value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %b = graph.constant {graph.initializer = "b", value = dense<0.0> : tensor<3xf32>} : () -> tensor<3xf32>
  // CHECK: %[[N:.*]], %[[MEAN:.*]], %[[VAR:.*]] = graph.batch_norm_train %[[X:.*]], %[[G:.*]], %[[B:.*]] {epsilon = 1.000000e-03 : f64}
  %n:3 = graph.batch_norm_train %x, %g, %b {epsilon = 1.0e-3 : f64} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  // CHECK: %[[P:.*]] = graph.max_pool %[[N]]
  %y = graph.max_pool %n#0 {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x3x4x4xf32>) -> tensor<2x3x2x2xf32>
  // CHECK: %[[DP:.*]] = graph.max_pool_grad %{{.*}}, %[[N]] {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x3x2x2xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = graph.batch_norm_grad %[[DP]], %[[X]], %[[G]], %[[MEAN]], %[[VAR]] {epsilon = 1.000000e-03 : f64}
  // CHECK: return %{{.*}}, %[[DG]], %[[DB]]
  return %y : tensor<2x3x2x2xf32>
}

// -----

// Tests an embedding's gradient: the gathered rows' gradients scattered
// with add into a zero table (a token picked twice adds twice).
// CHECK-LABEL: func @main(%{{.*}}: tensor<2x3xi64>
func.func @main(%ids: tensor<2x3xi64> {graph.name = "ids"}) -> (tensor<2x3x4xf32> {graph.name = "y"}) {
  %table = graph.constant {graph.initializer = "table", value = dense<0.5> : tensor<10x4xf32>} : () -> tensor<10x4xf32>
  %y = graph.gather %table, %ids {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  // CHECK: %[[T:.*]] = graph.reshape %arg0 {{.*}} -> tensor<6x1xi64>
  // CHECK: %[[U:.*]] = graph.reshape %{{.*}} -> tensor<6x4xf32>
  // CHECK: %[[ZERO:.*]] = graph.constant {value = dense<0.000000e+00> : tensor<f32>}
  // CHECK: %[[Z:.*]] = graph.expand %[[ZERO]] {shape = array<i64: 10, 4>}
  // CHECK: %[[D:.*]] = graph.scatter_nd %[[Z]], %[[T]], %[[U]] {reduction = "add"}
  // CHECK: return %{{.*}}, %[[D]]
  return %y : tensor<2x3x4xf32>
}

// -----

// Tests layer norm's gradient with a scale and bias of the normalized
// shape: one graph.layer_norm_grad gives the input's, the scale's and the
// bias's gradients.
// CHECK-LABEL: func @main(%{{.*}}: tensor<2x3x4xf32>
func.func @main(%x: tensor<2x3x4xf32> {graph.name = "x"}) -> (tensor<2x3x4xf32> {graph.name = "y"}) {
  %g = graph.constant {graph.initializer = "g", value = dense<1.5> : tensor<4xf32>} : () -> tensor<4xf32>
  %b = graph.constant {graph.initializer = "b", value = dense<0.5> : tensor<4xf32>} : () -> tensor<4xf32>
  %k = graph.constant {graph.initializer = "k", value = dense<2.0> : tensor<2x3x4xf32>} : () -> tensor<2x3x4xf32>
  %s = graph.mul %x, %k : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %y = graph.layer_norm %s, %g, %b {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  // CHECK: %[[S:.*]] = graph.mul %arg0, %[[K:.*]] :
  // CHECK: %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = graph.layer_norm_grad %{{.*}}, %[[S]], %{{.*}} {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK-NOT: graph.reduce_mean
  // CHECK: %[[DK:.*]] = graph.mul %[[DX]], %arg0
  // CHECK: return %{{.*}}, %[[DG]], %[[DB]], %[[DK]] :
  return %y : tensor<2x3x4xf32>
}

// -----

// Tests a masked softmax's gradient: one graph.softmax_grad of the
// softmax's result, and the mask (a bias parameter here) gets it summed to
// its shape.
// CHECK-LABEL: func @main(%{{.*}}: tensor<2x3x4xf32>
func.func @main(%x: tensor<2x3x4xf32> {graph.name = "x"}) -> (tensor<2x3x4xf32> {graph.name = "y"}) {
  %m = graph.constant {graph.initializer = "m", value = dense<0.5> : tensor<1x1x4xf32>} : () -> tensor<1x1x4xf32>
  %k = graph.constant {graph.initializer = "k", value = dense<2.0> : tensor<2x3x4xf32>} : () -> tensor<2x3x4xf32>
  %s = graph.mul %x, %k : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %y = graph.softmax %s, %m {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<1x1x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: %[[Y:.*]] = graph.softmax
  // CHECK-NOT: graph.reduce_sum %{{.*}} {axes = array<i64: 2>
  // CHECK: %[[DS:.*]] = graph.softmax_grad %{{.*}}, %[[Y]] {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: %[[DM:.*]] = graph.reduce_sum %[[DS]] {axes = array<i64: 0, 1>
  // CHECK: %[[DK:.*]] = graph.mul %[[DS]], %arg0
  // CHECK: return %{{.*}}, %[[DM]], %[[DK]] :
  return %y : tensor<2x3x4xf32>
}

// -----

// Tests layer norm's gradient in graph ops where the scale only broadcasts
// to the normalized dimensions: scale and bias summed over the leading
// dimensions, the input's through the normalized values.
// CHECK-LABEL: func @main(%{{.*}}: tensor<2x3x4xf32>
func.func @main(%x: tensor<2x3x4xf32> {graph.name = "x"}) -> (tensor<2x3x4xf32> {graph.name = "y"}) {
  %g = graph.constant {graph.initializer = "g", value = dense<1.5> : tensor<1x4xf32>} : () -> tensor<1x4xf32>
  %b = graph.constant {graph.initializer = "b", value = dense<0.5> : tensor<4xf32>} : () -> tensor<4xf32>
  %k = graph.constant {graph.initializer = "k", value = dense<2.0> : tensor<2x3x4xf32>} : () -> tensor<2x3x4xf32>
  %s = graph.mul %x, %k : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %y = graph.layer_norm %s, %g, %b {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x3x4xf32>, tensor<1x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  // CHECK-NOT: graph.layer_norm_grad
  // CHECK: graph.reduce_mean %{{.*}} {axes = array<i64: 1, 2>}
  // CHECK: %[[XHAT:.*]] = graph.mul %{{.*}}, %[[RSTD:.*]] : (tensor<2x3x4xf32>, tensor<2x1x1xf32>)
  // CHECK: %[[DS:.*]] = graph.mul %[[DY:.*]], %[[XHAT]]
  // CHECK: %[[DG:.*]] = graph.reshape %{{.*}} -> tensor<1x4xf32>
  // CHECK: return %{{.*}}, %[[DG]], %{{.*}}, %{{.*}} :
  return %y : tensor<2x3x4xf32>
}

// -----

// Tests Pow with a constant exponent (y x^(y-1)), Erf (2/sqrt(pi)
// exp(-x^2)) and Where (the gradient where the branch was taken, zero
// elsewhere): layer norm and Gelu as opset 13 exports them, and a causal
// mask.
// CHECK-LABEL: func @main(%{{.*}}: tensor<2x2xf32>
func.func @main(%x: tensor<2x2xf32> {graph.name = "x"}, %m: tensor<2x2xi1> {graph.name = "m"}) -> (tensor<2x2xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<0.5> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %two = graph.constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %ninf = graph.constant {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %h = graph.mul %x, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %p = graph.pow %h, %two : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  %e = graph.erf %p : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %y = graph.where %m, %ninf, %e : (tensor<2x2xi1>, tensor<f32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  // CHECK: %[[ZERO:.*]] = graph.constant {value = dense<0.000000e+00> : tensor<f32>}
  // CHECK: %[[DE:.*]] = graph.where %arg1, %[[ZERO]], %{{.*}} :
  // CHECK: %[[SQ:.*]] = graph.mul %[[P:.*]], %[[P]] :
  // CHECK: graph.exp
  // CHECK: dense<1.128379{{.*}}>
  // CHECK: %[[LOWER:.*]] = graph.sub %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // CHECK: graph.pow %[[H:.*]], %[[LOWER]]
  return %y : tensor<2x2xf32>
}

// -----

// Tests that dropout's gradient is the same dropout (the same mask, drawn
// again from step, seed and stream) applied to the output's gradient, and
// that the step counter's update moves after the backward ops, which read
// the step too.
// CHECK-LABEL: func @main
// CHECK: %[[STEP:.*]] = graph.variable {name = "optimizer.step"
// CHECK: %[[SEED:.*]] = graph.variable {name = "rng.seed"
// CHECK: graph.dropout %{{.*}}, %[[STEP]], %[[SEED]] {ratio = 2.500000e-01 : f64, stream = 3 : i64}
// CHECK: %[[DD:.*]] = graph.dropout %{{.*}}, %[[STEP]], %[[SEED]] {ratio = 2.500000e-01 : f64, stream = 3 : i64}
// CHECK: %[[DW:.*]] = graph.gemm %arg0, %[[DD]]
// CHECK-NEXT: graph.count_step %[[STEP]]
// CHECK-NEXT: return %{{.*}}, %[[DW]]
func.func @main(%x: tensor<4x3xf32> {graph.name = "x"}) -> (tensor<4x2xf32> {graph.name = "y"}) {
  %step = graph.variable {name = "optimizer.step", role = "step"} : tensor<i64>
  %seed = graph.variable {name = "rng.seed", role = "seed"} : tensor<i64>
  %w = graph.constant {graph.initializer = "w", value = dense<0.5> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
  %h = graph.gemm %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %y = graph.dropout %h, %step, %seed {ratio = 0.25 : f64, stream = 3 : i64} : (tensor<4x2xf32>, tensor<i64>, tensor<i64>) -> tensor<4x2xf32>
  graph.count_step %step : tensor<i64>
  return %y : tensor<4x2xf32>
}

// -----

// Tests that a strided slice's gradient spreads the result's gradient
// apart with zeros (a unit axis padded to the step, merged, cut to the
// last element read) and pads it back to the input's place.
// CHECK-LABEL: func @main
// CHECK: %[[U:.*]] = graph.reshape %{{.*}} {shape = array<i64: 2, 2, 1>} : (tensor<2x2xf32>) -> tensor<2x2x1xf32>
// CHECK: %[[P:.*]] = graph.pad %[[U]] {pads = array<i64: 0, 0, 0, 0, 0, 1>} : (tensor<2x2x1xf32>) -> tensor<2x2x2xf32>
// CHECK: %[[M:.*]] = graph.reshape %[[P]] {shape = array<i64: 2, 4>} : (tensor<2x2x2xf32>) -> tensor<2x4xf32>
// CHECK: %[[C:.*]] = graph.slice %[[M]] {ends = array<i64: 2, 3>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<2x3xf32>
// CHECK: graph.pad %[[C]] {pads = array<i64: 0, 1, 0, 1>} : (tensor<2x3xf32>) -> tensor<2x5xf32>
func.func @main(%x: tensor<2x5xf32> {graph.name = "x"}) -> (tensor<2x2xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<2x5xf32>} : () -> tensor<2x5xf32>
  %h = graph.mul %x, %w : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %y = graph.slice %h {starts = array<i64: 0, 1>, ends = array<i64: 2, 5>, steps = array<i64: 1, 2>} : (tensor<2x5xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// -----

// Tests that a slice read backwards has its gradient reversed first, then
// placed from the lowest index it read.
// CHECK-LABEL: func @main
// CHECK: %[[R:.*]] = graph.slice %{{.*}} {ends = array<i64: -1, 3>, starts = array<i64: 1, 0>, steps = array<i64: -1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.pad %[[R]] {pads = array<i64: 1, 0, 1, 0>} : (tensor<2x3xf32>) -> tensor<4x3xf32>
func.func @main(%x: tensor<4x3xf32> {graph.name = "x"}) -> (tensor<2x3xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<4x3xf32>} : () -> tensor<4x3xf32>
  %h = graph.mul %x, %w : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %y = graph.slice %h {starts = array<i64: 2, 0>, ends = array<i64: 0, 3>, steps = array<i64: -1, 1>} : (tensor<4x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Tests that a gather along another axis than the rows scatters its
// gradient with that axis moved to the front, then moves it back.
// CHECK-LABEL: func @main
// CHECK: %[[G:.*]] = graph.transpose %{{.*}} {perm = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
// CHECK: %[[I:.*]] = graph.reshape %{{.*}} {shape = array<i64: 2, 1>} : (tensor<2xi64>) -> tensor<2x1xi64>
// CHECK: %[[U:.*]] = graph.reshape %[[G]] {shape = array<i64: 2, 3>}
// CHECK: %[[Z:.*]] = graph.expand %{{.*}} {shape = array<i64: 5, 3>} : (tensor<f32>) -> tensor<5x3xf32>
// CHECK: %[[S:.*]] = graph.scatter_nd %[[Z]], %[[I]], %[[U]] {reduction = "add"}
// CHECK: graph.transpose %[[S]] {perm = array<i64: 1, 0>} : (tensor<5x3xf32>) -> tensor<3x5xf32>
func.func @main(%ids: tensor<2xi64> {graph.name = "ids"}) -> (tensor<3x2xf32> {graph.name = "y"}) {
  %t = graph.constant {graph.initializer = "t", value = dense<1.0> : tensor<3x5xf32>} : () -> tensor<3x5xf32>
  %y = graph.gather %t, %ids {axis = 1 : i64} : (tensor<3x5xf32>, tensor<2xi64>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

// Tests that a maximum's gradient goes to the elements equal to it, ties
// sharing it evenly.
// CHECK-LABEL: func @main
// CHECK: %[[Y:.*]] = graph.reshape %{{.*}} {shape = array<i64: 2, 1>} : (tensor<2xf32>) -> tensor<2x1xf32>
// CHECK: %[[G:.*]] = graph.reshape %{{.*}} {shape = array<i64: 2, 1>} : (tensor<2xf32>) -> tensor<2x1xf32>
// CHECK: %[[E:.*]] = graph.equal %{{.*}}, %[[Y]] : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xi1>
// CHECK: %[[M:.*]] = graph.cast %[[E]] {to = f32} : (tensor<2x4xi1>) -> tensor<2x4xf32>
// CHECK: %[[T:.*]] = graph.reduce_sum %[[M]] {axes = array<i64: 1>}
// CHECK: %[[S:.*]] = graph.div %[[G]], %[[T]]
// CHECK: graph.mul %[[M]], %[[S]] : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
func.func @main(%x: tensor<2x4xf32> {graph.name = "x"}) -> (tensor<2xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %h = graph.mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = graph.reduce_max %h {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// Tests that Clip (ReLU6) passes the gradient strictly inside its bounds.
// CHECK-LABEL: func @main
// CHECK: %[[LO:.*]] = graph.constant {value = dense<0.000000e+00> : tensor<f32>}
// CHECK: %[[ABOVE:.*]] = graph.greater %[[H:.*]], %[[LO]]
// CHECK: %[[HI:.*]] = graph.constant {value = dense<6.000000e+00> : tensor<f32>}
// CHECK: %[[BELOW:.*]] = graph.less %[[H]], %[[HI]]
// CHECK: %[[AND:.*]] = graph.and %[[ABOVE]], %[[BELOW]]
// CHECK: %[[MASK:.*]] = graph.cast %[[AND]] {to = f32} : (tensor<2x4xi1>) -> tensor<2x4xf32>
// CHECK: graph.mul %{{.*}}, %[[MASK]]
func.func @main(%x: tensor<2x4xf32> {graph.name = "x"}) -> (tensor<2x4xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %h = graph.mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = graph.clip %h {min = 0.0 : f64, max = 6.0 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Tests that Max of two tensors gives the gradient to the larger side,
// halves on a tie, and sums the broadcast side's share.
// CHECK-LABEL: func @main
// CHECK: %[[GT:.*]] = graph.greater %[[X:.*]], %[[W:.*]] : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
// CHECK: %[[WINS:.*]] = graph.cast %[[GT]] {to = f32}
// CHECK: %[[EQ:.*]] = graph.equal %[[X]], %[[W]]
// CHECK: %[[TIES:.*]] = graph.cast %[[EQ]] {to = f32}
// CHECK: %[[HALF:.*]] = graph.constant {value = dense<5.000000e-01> : tensor<f32>}
// CHECK: %[[HALVES:.*]] = graph.mul %[[TIES]], %[[HALF]]
// CHECK: %[[SHARE:.*]] = graph.add %[[WINS]], %[[HALVES]]
// CHECK: %[[LHS:.*]] = graph.mul %[[DY:.*]], %[[SHARE]]
// CHECK: %[[RHS:.*]] = graph.sub %[[DY]], %[[LHS]]
// CHECK: graph.reduce_sum %[[RHS]] {axes = array<i64: 0>} : (tensor<2x4xf32>) -> tensor<1x4xf32>
func.func @main(%x: tensor<2x4xf32> {graph.name = "x"}) -> (tensor<2x4xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %y = graph.max %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Tests that a constant pad's gradient is the slice of the padded region's
// gradient back to the input's place.
// CHECK-LABEL: func @main
// CHECK: graph.pad %{{.*}} {pads = array<i64: 0, 1, 0, 2>}
// CHECK: graph.slice %{{.*}} {ends = array<i64: 2, 4>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x3xf32>
func.func @main(%x: tensor<2x3xf32> {graph.name = "x"}) -> (tensor<2x6xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %h = graph.mul %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = graph.pad %h {pads = array<i64: 0, 1, 0, 2>} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  return %y : tensor<2x6xf32>
}

// -----

// Tests that a global max pool's gradient goes to each channel's maximum,
// ties sharing it.
// CHECK-LABEL: func @main
// CHECK: %[[HIT:.*]] = graph.equal %[[H:.*]], %[[Y:.*]] : (tensor<2x3x4x4xf32>, tensor<2x3x1x1xf32>) -> tensor<2x3x4x4xi1>
// CHECK: %[[MASK:.*]] = graph.cast %[[HIT]] {to = f32}
// CHECK: %[[TIES:.*]] = graph.reduce_sum %[[MASK]] {axes = array<i64: 2, 3>}
// CHECK: %[[SHARE:.*]] = graph.div %{{.*}}, %[[TIES]]
// CHECK: graph.mul %[[MASK]], %[[SHARE]] : (tensor<2x3x4x4xf32>, tensor<2x3x1x1xf32>) -> tensor<2x3x4x4xf32>
func.func @main(%x: tensor<2x3x4x4xf32> {graph.name = "x"}) -> (tensor<2x3x1x1xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<2x3x4x4xf32>} : () -> tensor<2x3x4x4xf32>
  %h = graph.mul %x, %w : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y = graph.global_max_pool %h : (tensor<2x3x4x4xf32>) -> tensor<2x3x1x1xf32>
  return %y : tensor<2x3x1x1xf32>
}

// -----

// Tests that a running sum's gradient is the running sum the other way,
// exclusive as the forward one was.
// CHECK-LABEL: func @main
// CHECK: graph.cum_sum %{{.*}} {axis = 1 : i64, exclusive = 1 : i64} : (tensor<2x5xf32>)
// CHECK: graph.cum_sum %{{.*}} {axis = 1 : i64, exclusive = 1 : i64, reverse = 1 : i64} : (tensor<2x5xf32>)
func.func @main(%x: tensor<2x5xf32> {graph.name = "x"}) -> (tensor<2x5xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<2x5xf32>} : () -> tensor<2x5xf32>
  %h = graph.mul %x, %w : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %y = graph.cum_sum %h {axis = 1 : i64, exclusive = 1 : i64, reverse = 0 : i64} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}

// -----

// Tests that GatherElements' gradient adds each element back where it was
// read: scatter_nd with add, whose tuples are the elements' coordinates
// with the axis one replaced by the index.
// CHECK-LABEL: func @main(%{{.*}}: tensor<2x5xf32> {graph.name = "x"}, %arg1: tensor<2x3xi64>
// CHECK: %[[ROW:.*]] = graph.constant {value = dense<{{\[\[}}0], [1]]> : tensor<2x1xi64>}
// CHECK: %[[ROWS:.*]] = graph.expand %[[ROW]] {shape = array<i64: 2, 3>}
// CHECK: %[[C0:.*]] = graph.reshape %[[ROWS]] {shape = array<i64: 6, 1>}
// CHECK: %[[C1:.*]] = graph.reshape %arg1 {shape = array<i64: 6, 1>}
// CHECK: %[[TUPLES:.*]] = graph.concat %[[C0]], %[[C1]] {axis = 1 : i64} : (tensor<6x1xi64>, tensor<6x1xi64>) -> tensor<6x2xi64>
// CHECK: %[[UPDATES:.*]] = graph.reshape %{{.*}} {shape = array<i64: 6>} : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK: graph.scatter_nd %{{.*}}, %[[TUPLES]], %[[UPDATES]] {reduction = "add"} : (tensor<2x5xf32>, tensor<6x2xi64>, tensor<6xf32>) -> tensor<2x5xf32>
func.func @main(%x: tensor<2x5xf32> {graph.name = "x"}, %i: tensor<2x3xi64> {graph.name = "i"}) -> (tensor<2x3xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<2x5xf32>} : () -> tensor<2x5xf32>
  %h = graph.mul %x, %w : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %y = graph.gather_elements %h, %i {axis = 1 : i64} : (tensor<2x5xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Tests that TopK's values scatter their gradient back to the indices it
// picked.
// CHECK-LABEL: func @main
// CHECK: %{{.*}}, %[[IDX:.*]] = graph.top_k
// CHECK: %[[C1:.*]] = graph.reshape %[[IDX]] {shape = array<i64: 4, 1>}
// CHECK: %[[TUPLES:.*]] = graph.concat %{{.*}}, %[[C1]] {axis = 1 : i64}
// CHECK: graph.scatter_nd %{{.*}}, %[[TUPLES]], %{{.*}} {reduction = "add"} : (tensor<2x5xf32>, tensor<4x2xi64>, tensor<4xf32>) -> tensor<2x5xf32>
func.func @main(%x: tensor<2x5xf32> {graph.name = "x"}) -> (tensor<2x2xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<2x5xf32>} : () -> tensor<2x5xf32>
  %h = graph.mul %x, %w : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %v, %k = graph.top_k %h {axis = 1 : i64, k = 2 : i64, largest = 1 : i64} : (tensor<2x5xf32>) -> (tensor<2x2xf32>, tensor<2x2xi64>)
  return %v : tensor<2x2xf32>
}

// -----

// Tests that nearest x2 upsampling's gradient sums each input element's
// repeats, one resized dimension at a time.
// CHECK-LABEL: func @main
// CHECK: %[[H:.*]] = graph.reshape %{{.*}} {shape = array<i64: 1, 2, 3, 2, 6>} : (tensor<1x2x6x6xf32>)
// CHECK: %[[HS:.*]] = graph.reduce_sum %[[H]] {axes = array<i64: 3>, keepdims = 0 : i64} : (tensor<1x2x3x2x6xf32>) -> tensor<1x2x3x6xf32>
// CHECK: %[[W:.*]] = graph.reshape %[[HS]] {shape = array<i64: 1, 2, 3, 3, 2>}
// CHECK: graph.reduce_sum %[[W]] {axes = array<i64: 4>, keepdims = 0 : i64} : (tensor<1x2x3x3x2xf32>) -> tensor<1x2x3x3xf32>
// CHECK-NOT: graph.scatter_nd
func.func @main(%x: tensor<1x2x3x3xf32> {graph.name = "x"}) -> (tensor<1x2x6x6xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<1x2x3x3xf32>} : () -> tensor<1x2x3x3xf32>
  %h = graph.mul %x, %w : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %y = graph.resize %h {sizes = array<i64: 1, 2, 6, 6>, scales = array<f64: 1.0, 1.0, 2.0, 2.0>, mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x6x6xf32>
  return %y : tensor<1x2x6x6xf32>
}

// -----

// Tests that a linear resize's gradient gives each output's two neighbours
// their weighted shares (3 to 5 columns, half_pixel: weights 0.2, 0.6, 1,
// 0.4, 0.8 below and 0.8, 0.4, 0, 0.6, 0.2 above, the neighbours clamped at
// the edges).
// CHECK-LABEL: func @main
// CHECK: %[[DOWN:.*]] = graph.constant {value = dense<{{\[\[\[\[}}2.000000e-01, 6.000000e-01, 1.000000e+00, 4.000000e-01, 8.000000e-01]]]]> : tensor<1x1x1x5xf32>}
// CHECK: %[[TOLOW:.*]] = graph.mul %[[G:.*]], %[[DOWN]]
// CHECK: %[[UP:.*]] = graph.constant {value = dense<{{\[\[\[\[}}8.000000e-01, 4.000000e-01, 0.000000e+00, 6.000000e-01, 2.000000e-01]]]]> : tensor<1x1x1x5xf32>}
// CHECK: %[[TOHIGH:.*]] = graph.mul %[[G]], %[[UP]]
// CHECK: graph.constant {value = dense<[0, 0, 1, 1, 2]> : tensor<5xi64>}
// CHECK: graph.transpose %[[TOLOW]] {perm = array<i64: 3, 0, 1, 2>}
// CHECK: %[[LOW:.*]] = graph.scatter_nd {{.*}} {reduction = "add"} : (tensor<3x1x2x3xf32>, tensor<5x1xi64>, tensor<5x1x2x3xf32>) -> tensor<3x1x2x3xf32>
// CHECK: %[[LOWBACK:.*]] = graph.transpose %[[LOW]] {perm = array<i64: 1, 2, 3, 0>}
// CHECK: graph.constant {value = dense<[0, 1, 2, 2, 2]> : tensor<5xi64>}
// CHECK: graph.transpose %[[TOHIGH]] {perm = array<i64: 3, 0, 1, 2>}
// CHECK: %[[HIGH:.*]] = graph.scatter_nd
// CHECK: %[[HIGHBACK:.*]] = graph.transpose %[[HIGH]] {perm = array<i64: 1, 2, 3, 0>}
// CHECK: graph.add %[[LOWBACK]], %[[HIGHBACK]] : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
func.func @main(%x: tensor<1x2x3x3xf32> {graph.name = "x"}) -> (tensor<1x2x3x5xf32> {graph.name = "z"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<1x2x3x3xf32>} : () -> tensor<1x2x3x3xf32>
  %h = graph.mul %x, %w : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %z = graph.resize %h {sizes = array<i64: 1, 2, 3, 5>, scales = array<f64: 1.0, 1.0, 1.0, 1.6666666666666667>, mode = "linear"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x5xf32>
  return %z : tensor<1x2x3x5xf32>
}

// -----

// Tests RMS normalization's scale gradient: dy x r summed over the rows,
// r = 1 / sqrt(mean(x^2) + eps).
// CHECK-LABEL: func @main
// CHECK: %[[SQ:.*]] = graph.mul %arg0, %arg0 : (tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK: %[[MS:.*]] = graph.reduce_mean %[[SQ]] {axes = array<i64: 1>} : (tensor<2x4xf32>) -> tensor<2x1xf32>
// CHECK: %[[EPS:.*]] = graph.constant {value = dense<9.99999974E-6> : tensor<f32>}
// CHECK: %[[SH:.*]] = graph.add %[[MS]], %[[EPS]]
// CHECK: %[[SQRT:.*]] = graph.sqrt %[[SH]]
// CHECK: %[[R:.*]] = graph.reciprocal %[[SQRT]]
// CHECK: %[[N:.*]] = graph.mul %arg0, %[[R]] : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
// CHECK: %[[DS:.*]] = graph.mul %{{.*}}, %[[N]]
// CHECK: graph.reduce_sum %[[DS]] {axes = array<i64: 0>} : (tensor<2x4xf32>) -> tensor<1x4xf32>
func.func @main(%x: tensor<2x4xf32> {graph.name = "x"}) -> (tensor<2x4xf32> {graph.name = "y"}) {
  %s = graph.constant {graph.initializer = "s", value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %y = graph.rms_norm %x, %s {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Tests that a product's gradient is y / x where the reduction has no
// zero, the product of the others at a lone zero, and 0 with two zeros:
// zeros are counted and read as ones, so no division by zero is selected.
// CHECK-LABEL: func @main
// CHECK: %[[ISZERO:.*]] = graph.equal %[[H:.*]], %{{.*}} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xi1>
// CHECK: %[[MASK:.*]] = graph.cast %[[ISZERO]] {to = f32}
// CHECK: %[[COUNT:.*]] = graph.reduce_sum %[[MASK]] {axes = array<i64: 1>}
// CHECK: %[[ONES:.*]] = graph.where %[[ISZERO]], %{{.*}}, %[[H]]
// CHECK: %[[OTHERS:.*]] = graph.reduce_prod %[[ONES]] {axes = array<i64: 1>} : (tensor<2x4xf32>) -> tensor<2x1xf32>
// CHECK: %[[QUOTIENT:.*]] = graph.div %[[OTHERS]], %[[ONES]]
// CHECK: %[[NONE:.*]] = graph.equal %[[COUNT]]
// CHECK: %[[ONE:.*]] = graph.equal %[[COUNT]]
// CHECK: %[[THEZERO:.*]] = graph.and %[[ONE]], %[[ISZERO]]
// CHECK: %[[ATZERO:.*]] = graph.where %[[THEZERO]], %[[OTHERS]], %{{.*}}
// CHECK: graph.where %[[NONE]], %[[QUOTIENT]], %[[ATZERO]]
func.func @main(%x: tensor<2x4xf32> {graph.name = "x"}) -> (tensor<2x1xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<1.0> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %h = graph.mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = graph.reduce_prod %h {axes = array<i64: 1>, keepdims = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  return %y : tensor<2x1xf32>
}

// -----

// Tests that cross-entropy reads logits sliced from a product of padded
// columns in place: the loss and its gradient take the padded product
// with `classes`, and the gradient flows to the weight with no pad of it.
// CE-LABEL: func @main
// CE: %[[P:.*]] = graph.matmul %{{.*}}, %[[W:.*]] : (tensor<4x3xf32>, tensor<3x8xf32>) -> tensor<4x8xf32>
// CE: graph.softmax_cross_entropy %[[P]], %{{.*}} {classes = 5 : i64} : (tensor<4x8xf32>, tensor<4xi64>)
// CE: %[[DP:.*]] = graph.softmax_cross_entropy_grad %[[P]], %{{.*}}, %{{.*}} {classes = 5 : i64} : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
// CE-NOT: graph.pad
// CE: graph.matmul {{.*}}%[[DP]]
func.func @main(%x: tensor<4x3xf32> {graph.name = "x"}) -> (tensor<4x5xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<0.5> : tensor<3x8xf32>} : () -> tensor<3x8xf32>
  %p = graph.matmul %x, %w : (tensor<4x3xf32>, tensor<3x8xf32>) -> tensor<4x8xf32>
  %y = graph.slice %p {ends = array<i64: 4, 5>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}
