// RUN: partc-opt %s --partc-replicate-data-parallel="replicas=2" | FileCheck %s

// Tests that each replica gets half the batch on its own device, reads the
// shared weights, and that unbatched parameters are not sliced.
// CHECK: module attributes {graph.num_devices = 2
// CHECK-LABEL: func @main
func.func @main(%x: tensor<6x8xf32>) -> tensor<6x4xf32> {
  // CHECK: %[[W:.*]] = graph.constant
  // CHECK: %[[S0:.*]] = graph.slice %arg0 {ends = array<i64: 3, 8>, graph.device = -1
  // CHECK: %[[Y0:.*]] = graph.gemm %[[S0]], %[[W]] {{.*}}graph.device = 0 : i64{{.*}} -> tensor<3x4xf32>
  // CHECK: %[[S1:.*]] = graph.slice %arg0 {ends = array<i64: 6, 8>, graph.device = -1 : i64, starts = array<i64: 3, 0>
  // CHECK: %[[Y1:.*]] = graph.gemm %[[S1]], %[[W]] {{.*}}graph.device = 1 : i64
  // CHECK: graph.concat %[[Y0]], %[[Y1]] {axis = 0 : i64, graph.device = -1 : i64}
  %w = graph.constant {value = dense<1.0> : tensor<4x8xf32>} : () -> tensor<4x8xf32>
  %y = graph.gemm %x, %w {trans_b = 1 : i64} : (tensor<6x8xf32>, tensor<4x8xf32>) -> tensor<6x4xf32>
  return %y : tensor<6x4xf32>
}
