// RUN: partc-opt %s --partc-fuse-dropout --split-input-file | FileCheck %s

// Tests that attention's dropout gradient is read by the softmax gradient
// in place: the softmax_grad takes the dropout's input, step and seed and
// its ratio, stream and offset, and the dropout is gone.
// CHECK-LABEL: func @attention_probabilities
func.func @attention_probabilities(%dz: tensor<2x3x4x4xf32>, %p: tensor<2x3x4x4xf32>,
                                   %step: tensor<i64>, %seed: tensor<i64>) -> tensor<2x3x4x4xf32> {
  // CHECK-NOT: graph.dropout
  // CHECK: %[[G:.*]] = graph.softmax_grad %arg0, %arg1, %arg2, %arg3 {axis = 3 : i64, dropout_offset = 96 : i64, dropout_ratio = 1.000000e-01 : f64, dropout_stream = 7 : i64, graph.device = 1 : i64}
  // CHECK: return %[[G]]
  %dp = graph.dropout %dz, %step, %seed {graph.device = 1 : i64, offset = 96 : i64, ratio = 1.000000e-01 : f64, stream = 7 : i64} : (tensor<2x3x4x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x3x4x4xf32>
  %ds = graph.softmax_grad %dp, %p {axis = 3 : i64, graph.device = 1 : i64} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %ds : tensor<2x3x4x4xf32>
}

// -----

// Tests that a dropout read elsewhere too, or placed on another device,
// stays.
// CHECK-LABEL: func @kept_dropouts
func.func @kept_dropouts(%dz: tensor<2x4xf32>, %p: tensor<2x4xf32>,
                         %step: tensor<i64>, %seed: tensor<i64>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  // CHECK: %[[D:.*]] = graph.dropout %arg0
  // CHECK: graph.softmax_grad %[[D]], %arg1 {axis = 1 : i64} :
  // CHECK: %[[E:.*]] = graph.dropout %arg0
  // CHECK: graph.softmax_grad %[[E]], %arg1 {axis = 1 : i64, graph.device = 1 : i64} :
  %d = graph.dropout %dz, %step, %seed {ratio = 1.000000e-01 : f64} : (tensor<2x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x4xf32>
  %a = graph.softmax_grad %d, %p {axis = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %e = graph.dropout %dz, %step, %seed {graph.device = 0 : i64, ratio = 1.000000e-01 : f64} : (tensor<2x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x4xf32>
  %b = graph.softmax_grad %e, %p {axis = 1 : i64, graph.device = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %a, %b, %d : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}
