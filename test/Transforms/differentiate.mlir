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
