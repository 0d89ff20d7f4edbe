// RUN: partc-opt %s --canonicalize --split-input-file | FileCheck %s

// Tests that identities and no-op reshapes disappear.
// CHECK-LABEL: func @identity
func.func @identity(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK-NOT: graph.identity
  // CHECK-NOT: graph.reshape
  // CHECK: return %arg0
  %0 = graph.identity %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = graph.reshape %0 {shape = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// Tests that reshape chains collapse into one reshape of the source.
// CHECK-LABEL: func @reshape_chain
func.func @reshape_chain(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // CHECK: %[[R:.*]] = graph.reshape %arg0 {shape = array<i64: 3, 2>}
  // CHECK-NEXT: return %[[R]]
  %0 = graph.reshape %x {shape = array<i64: 6>} : (tensor<2x3xf32>) -> tensor<6xf32>
  %1 = graph.reshape %0 {shape = array<i64: 3, 2>} : (tensor<6xf32>) -> tensor<3x2xf32>
  return %1 : tensor<3x2xf32>
}

// -----

// Tests that ops on constants are evaluated with the runtime's kernels.
// CHECK-LABEL: func @constant_arith
func.func @constant_arith() -> tensor<3xi64> {
  // CHECK: %[[C:.*]] = graph.constant {value = dense<[5, 7, 9]> : tensor<3xi64>}
  // CHECK-NEXT: return %[[C]]
  %a = graph.constant {value = dense<[1, 2, 3]> : tensor<3xi64>} : () -> tensor<3xi64>
  %b = graph.constant {value = dense<[4, 5, 6]> : tensor<3xi64>} : () -> tensor<3xi64>
  %c = graph.add %a, %b : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %c : tensor<3xi64>
}

// -----

// Tests that an op whose kernel fails on constants is kept, not miscompiled.
// CHECK-LABEL: func @gather_out_of_range
func.func @gather_out_of_range() -> tensor<1xf32> {
  // CHECK: graph.gather
  %d = graph.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %i = graph.constant {value = dense<[7]> : tensor<1xi64>} : () -> tensor<1xi64>
  %g = graph.gather %d, %i {axis = 0 : i64} : (tensor<2xf32>, tensor<1xi64>) -> tensor<1xf32>
  return %g : tensor<1xf32>
}

// -----

// Tests that a concatenation of one tensor is that tensor.
// CHECK-LABEL: func @concat_one
func.func @concat_one(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x6xf32>) {
  // CHECK: %[[C:.*]] = graph.concat %arg0, %arg0
  // CHECK-NEXT: return %arg0, %[[C]]
  %0 = graph.concat %x {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = graph.concat %x, %x {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x6xf32>
}
