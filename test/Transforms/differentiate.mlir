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
