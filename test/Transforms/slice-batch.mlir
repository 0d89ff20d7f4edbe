// RUN: partc-opt %s --partc-slice-batch="parts=2" --split-input-file | FileCheck %s

// Tests that the batched input, every op and the output take half the
// batch, that the input is marked as one of 2 slices, and that the weights
// stay whole.
// CHECK-LABEL: func @main
// CHECK-SAME: (%arg0: tensor<3x8xf32> {graph.batch_slice = 2 : i64, graph.name = "x"}) -> tensor<3x4xf32>
func.func @main(%x: tensor<6x8xf32> {graph.name = "x"}) -> tensor<6x4xf32> {
  // CHECK: %[[W:.*]] = graph.constant {{.*}} -> tensor<4x8xf32>
  // CHECK: %[[Y:.*]] = graph.gemm %arg0, %[[W]] {trans_b = 1 : i64} : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  // CHECK: %[[R:.*]] = graph.reshape %[[Y]] {shape = array<i64: 3, 2, 2>}
  // CHECK: %[[F:.*]] = graph.reshape %[[R]] {shape = array<i64: 3, 4>}
  // CHECK: return %[[F]] : tensor<3x4xf32>
  %w = graph.constant {value = dense<1.0> : tensor<4x8xf32>} : () -> tensor<4x8xf32>
  %y = graph.gemm %x, %w {trans_b = 1 : i64} : (tensor<6x8xf32>, tensor<4x8xf32>) -> tensor<6x4xf32>
  %r = graph.reshape %y {shape = array<i64: 6, 2, 2>} : (tensor<6x4xf32>) -> tensor<6x2x2xf32>
  %f = graph.reshape %r {shape = array<i64: 6, 4>} : (tensor<6x2x2xf32>) -> tensor<6x4xf32>
  return %f : tensor<6x4xf32>
}

// -----

// Tests that an input without a batch dimension (a scalar) keeps its type
// and is not marked, and that dropout's slice starts at the first element
// (partc-replicate-training offsets each replica).
// CHECK-LABEL: func @main
// CHECK-SAME: (%arg0: tensor<2x4xf32> {graph.batch_slice = 2 : i64}, %arg1: tensor<i64>, %arg2: tensor<i64>)
func.func @main(%x: tensor<4x4xf32>, %step: tensor<i64>, %seed: tensor<i64>) -> tensor<4x4xf32> {
  // CHECK: graph.dropout %arg0, %arg1, %arg2 {ratio = 1.000000e-01 : f64} : (tensor<2x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x4xf32>
  %d = graph.dropout %x, %step, %seed {ratio = 0.1 : f64} : (tensor<4x4xf32>, tensor<i64>, tensor<i64>) -> tensor<4x4xf32>
  return %d : tensor<4x4xf32>
}
