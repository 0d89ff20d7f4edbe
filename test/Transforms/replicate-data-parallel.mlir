// RUN: partc-opt %s --partc-replicate-data-parallel="replicas=2" --split-input-file | FileCheck %s

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

// -----

// Tests attention as PyTorch exports it: the batch moves to dimension 1
// ([L, N, E]), merges with the heads in the strided views ([N * H, L, hd]),
// then with the sequence in the result ([L * N, E]). Each replica's views
// cover its 2 samples: the steps over whole sequence positions shrink from
// 32 to 16 elements, the merged extents from 8 to 4 and 12 to 6.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<4x3x8xf32>) -> tensor<4x3x8xf32> {
  // CHECK: %[[S0:.*]] = graph.slice %arg0 {ends = array<i64: 2, 3, 8>
  // CHECK: %[[T0:.*]] = graph.transpose %[[S0]] {{.*}} -> tensor<3x2x8xf32>
  // CHECK: %[[A0:.*]] = graph.strided_matmul %[[T0]], %[[T0]] {{{.*}}lhs_shape = array<i64: 4, 3, 4>, lhs_strides = array<i64: 4, 16, 1>{{.*}}rhs_shape = array<i64: 4, 4, 3>, rhs_strides = array<i64: 4, 1, 16>, shape = array<i64: 4, 3, 3>}
  // CHECK: %[[O0:.*]] = graph.strided_matmul %[[A0]], %[[T0]] {{{.*}}lhs_shape = array<i64: 4, 3, 3>, lhs_strides = array<i64: 9, 3, 1>{{.*}}rhs_shape = array<i64: 4, 3, 4>, rhs_strides = array<i64: 4, 16, 1>, shape = array<i64: 6, 8>} {{.*}} -> tensor<6x8xf32>
  // CHECK: graph.reshape %[[O0]] {graph.device = 0 : i64, shape = array<i64: 3, 2, 8>}
  // CHECK: graph.slice %arg0 {ends = array<i64: 4, 3, 8>, graph.device = -1 : i64, starts = array<i64: 2, 0, 0>
  // CHECK: graph.concat {{.*}} {axis = 0 : i64, graph.device = -1 : i64} {{.*}} -> tensor<4x3x8xf32>
  %t = graph.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<4x3x8xf32>) -> tensor<3x4x8xf32>
  %a = graph.strided_matmul %t, %t {lhs_shape = array<i64: 8, 3, 4>, lhs_strides = array<i64: 4, 32, 1>, lhs_offset = 0 : i64, rhs_shape = array<i64: 8, 4, 3>, rhs_strides = array<i64: 4, 1, 32>, rhs_offset = 0 : i64, perm = array<i64: 0, 1, 2>, shape = array<i64: 8, 3, 3>, alpha = 5.000000e-01 : f64} : (tensor<3x4x8xf32>, tensor<3x4x8xf32>) -> tensor<8x3x3xf32>
  %o = graph.strided_matmul %a, %t {lhs_shape = array<i64: 8, 3, 3>, lhs_strides = array<i64: 9, 3, 1>, lhs_offset = 0 : i64, rhs_shape = array<i64: 8, 3, 4>, rhs_strides = array<i64: 4, 32, 1>, rhs_offset = 0 : i64, perm = array<i64: 1, 0, 2>, shape = array<i64: 12, 8>} : (tensor<8x3x3xf32>, tensor<3x4x8xf32>) -> tensor<12x8xf32>
  %r = graph.reshape %o {shape = array<i64: 3, 4, 8>} : (tensor<12x8xf32>) -> tensor<3x4x8xf32>
  %y = graph.transpose %r {perm = array<i64: 1, 0, 2>} : (tensor<3x4x8xf32>) -> tensor<4x3x8xf32>
  return %y : tensor<4x3x8xf32>
}

// -----

// Tests a batch merged with the sequence into a GEMM's rows and split out
// again: each replica reshapes 2 samples' 3 rows.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<4x3x8xf32>) -> tensor<4x3x2xf32> {
  // CHECK: graph.reshape {{.*}}shape = array<i64: 6, 8>
  // CHECK: graph.gemm {{.*}} -> tensor<6x2xf32>
  // CHECK: graph.reshape {{.*}}shape = array<i64: 2, 3, 2>
  %w = graph.constant {value = dense<1.0> : tensor<8x2xf32>} : () -> tensor<8x2xf32>
  %rows = graph.reshape %x {shape = array<i64: 12, 8>} : (tensor<4x3x8xf32>) -> tensor<12x8xf32>
  %g = graph.gemm %rows, %w : (tensor<12x8xf32>, tensor<8x2xf32>) -> tensor<12x2xf32>
  %y = graph.reshape %g {shape = array<i64: 4, 3, 2>} : (tensor<12x2xf32>) -> tensor<4x3x2xf32>
  return %y : tensor<4x3x2xf32>
}

// -----

// Tests q, k and v taken from a stacked projection as PyTorch 2 exports
// them: the batch lies in dimension 2 of [3, L, N, E] and a gather along
// dimension 0 keeps it there, in dimension 1 of its [L, N, E] result.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<4x3x8xf32>) -> tensor<4x3x8xf32> {
  // CHECK: graph.reshape {{.*}}shape = array<i64: 3, 2, 2, 4>
  // CHECK: graph.transpose {{.*}} -> tensor<2x3x2x4xf32>
  // CHECK: graph.gather {{.*}} -> tensor<3x2x4xf32>
  // CHECK: graph.reshape {{.*}}shape = array<i64: 3, 2, 4>
  %i = graph.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %t = graph.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<4x3x8xf32>) -> tensor<3x4x8xf32>
  %r = graph.reshape %t {shape = array<i64: 3, 4, 2, 4>} : (tensor<3x4x8xf32>) -> tensor<3x4x2x4xf32>
  %s = graph.transpose %r {perm = array<i64: 2, 0, 1, 3>} : (tensor<3x4x2x4xf32>) -> tensor<2x3x4x4xf32>
  %k = graph.gather %s, %i {axis = 0 : i64} : (tensor<2x3x4x4xf32>, tensor<i64>) -> tensor<3x4x4xf32>
  %m = graph.reshape %k {shape = array<i64: 3, 4, 4>} : (tensor<3x4x4xf32>) -> tensor<3x4x4xf32>
  %u = graph.concat %m, %m {axis = 2 : i64} : (tensor<3x4x4xf32>, tensor<3x4x4xf32>) -> tensor<3x4x8xf32>
  %y = graph.transpose %u {perm = array<i64: 1, 0, 2>} : (tensor<3x4x8xf32>) -> tensor<4x3x8xf32>
  return %y : tensor<4x3x8xf32>
}

// -----

// Tests that constants an exporter broadcast to a fixed batch (a causal
// mask, a class token) are batched when an op needs them to be: each
// replica reads its own leading rows of the equal rows.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<4x2x3xf32>) -> tensor<4x3x3xf32> {
  // CHECK: %[[S0:.*]] = graph.slice %arg0 {ends = array<i64: 2, 2, 3>
  // CHECK: %[[M0:.*]] = graph.constant {value = dense<{{.*}}> : tensor<2x1x3xf32>}
  // CHECK: %[[C0:.*]] = graph.constant {value = dense<{{.*}}> : tensor<2x1x3xf32>}
  // CHECK: %[[A0:.*]] = graph.add %[[S0]], %[[M0]] {graph.device = 0 : i64} : (tensor<2x2x3xf32>, tensor<2x1x3xf32>) -> tensor<2x2x3xf32>
  // CHECK: graph.concat %[[C0]], %[[A0]] {axis = 1 : i64, graph.device = 0 : i64} : (tensor<2x1x3xf32>, tensor<2x2x3xf32>) -> tensor<2x3x3xf32>
  // CHECK: graph.slice %arg0 {ends = array<i64: 4, 2, 3>
  // CHECK: graph.concat {{.*}} {axis = 0 : i64, graph.device = -1 : i64} {{.*}} -> tensor<4x3x3xf32>
  %mask = graph.constant {value = dense<[[[0.0, -1.0, -2.0]], [[0.0, -1.0, -2.0]], [[0.0, -1.0, -2.0]], [[0.0, -1.0, -2.0]]]> : tensor<4x1x3xf32>} : () -> tensor<4x1x3xf32>
  %cls = graph.constant {value = dense<5.0> : tensor<4x1x3xf32>} : () -> tensor<4x1x3xf32>
  %a = graph.add %x, %mask : (tensor<4x2x3xf32>, tensor<4x1x3xf32>) -> tensor<4x2x3xf32>
  %y = graph.concat %cls, %a {axis = 1 : i64} : (tensor<4x1x3xf32>, tensor<4x2x3xf32>) -> tensor<4x3x3xf32>
  return %y : tensor<4x3x3xf32>
}

// -----

// Tests a softmax's bias: a shared mask stays whole, a batched one is
// sliced with the scores, and a mask broadcast to the fixed batch gives
// each replica its leading rows.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<4x2x3xf32>, %pad: tensor<4x1x3xf32>) -> (tensor<4x2x3xf32>, tensor<4x2x3xf32>, tensor<4x2x3xf32>) {
  // CHECK: graph.softmax {{.*}} : (tensor<2x2x3xf32>, tensor<2x3xf32>) -> tensor<2x2x3xf32>
  // CHECK: graph.softmax {{.*}} : (tensor<2x2x3xf32>, tensor<2x1x3xf32>) -> tensor<2x2x3xf32>
  // CHECK: graph.softmax {{.*}} : (tensor<2x2x3xf32>, tensor<2x1x3xf32>) -> tensor<2x2x3xf32>
  %causal = graph.constant {value = dense<[[0.0, -1.0, -2.0], [0.0, 0.0, -1.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %fixed = graph.constant {value = dense<[[[0.0, -1.0, -2.0]], [[0.0, -1.0, -2.0]], [[0.0, -1.0, -2.0]], [[0.0, -1.0, -2.0]]]> : tensor<4x1x3xf32>} : () -> tensor<4x1x3xf32>
  %a = graph.softmax %x, %causal {axis = 2 : i64} : (tensor<4x2x3xf32>, tensor<2x3xf32>) -> tensor<4x2x3xf32>
  %b = graph.softmax %x, %pad {axis = 2 : i64} : (tensor<4x2x3xf32>, tensor<4x1x3xf32>) -> tensor<4x2x3xf32>
  %c = graph.softmax %x, %fixed {axis = 2 : i64} : (tensor<4x2x3xf32>, tensor<4x1x3xf32>) -> tensor<4x2x3xf32>
  return %a, %b, %c : tensor<4x2x3xf32>, tensor<4x2x3xf32>, tensor<4x2x3xf32>
}
