// RUN: partc-opt %s --partc-fold-constants --split-input-file | FileCheck %s

// Tests that shape arithmetic on constants folds to one constant.
// CHECK-LABEL: func @shape_arith
func.func @shape_arith(%x: tensor<2x12xf32>) -> tensor<2x3x4xf32> {
  // CHECK-NOT: graph.concat
  // CHECK: graph.reshape %arg0 {shape = array<i64: 2, 3, 4>}
  %a = graph.constant {value = dense<[2]> : tensor<1xi64>} : () -> tensor<1xi64>
  %b = graph.constant {value = dense<[3, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %s = graph.concat %a, %b {axis = 0 : i64} : (tensor<1xi64>, tensor<2xi64>) -> tensor<3xi64>
  %r = graph.reshape %x {shape = array<i64: 2, 3, 4>} : (tensor<2x12xf32>) -> tensor<2x3x4xf32>
  return %r : tensor<2x3x4xf32>
}

// -----

// Tests that a weight transform on constants is evaluated at compile time.
// CHECK-LABEL: func @weight_transpose
func.func @weight_transpose(%x: tensor<1x2xf32>) -> tensor<1x3xf32> {
  // CHECK: %[[W:.*]] = graph.constant {value = dense<{{\[\[}}1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>}
  // CHECK: graph.matmul %arg0, %[[W]]
  %w = graph.constant {value = dense<[[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
  %t = graph.transpose %w {perm = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %y = graph.matmul %x, %t : (tensor<1x2xf32>, tensor<2x3xf32>) -> tensor<1x3xf32>
  return %y : tensor<1x3xf32>
}

// -----

// Tests that dead ops and identities are removed.
// CHECK-LABEL: func @dead_code
func.func @dead_code(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: %[[R:.*]] = graph.relu %arg0
  // CHECK-NEXT: return %[[R]]
  %unused = graph.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %i = graph.identity %x : (tensor<4xf32>) -> tensor<4xf32>
  %r = graph.relu %i : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
