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

// -----

// Tests that a gather whose constant indices read the whole axis in order
// (PyTorch's vmap-built attention masks) becomes a reshape.
// CHECK-LABEL: func @gather_in_order
func.func @gather_in_order(%x: tensor<8xi1>) -> tensor<2x1x4xi1> {
  // CHECK-NOT: graph.gather
  // CHECK: graph.reshape %arg0 {shape = array<i64: 2, 1, 4>}
  %i = graph.constant {value = dense<[[[0, 1, 2, 3]], [[4, 5, 6, -1]]]> : tensor<2x1x4xi64>} : () -> tensor<2x1x4xi64>
  %g = graph.gather %x, %i {axis = 0 : i64} : (tensor<8xi1>, tensor<2x1x4xi64>) -> tensor<2x1x4xi1>
  return %g : tensor<2x1x4xi1>
}

// -----

// Tests that index tuples enumerating every position in row-major order
// make gather_nd a reshape.
// CHECK-LABEL: func @gather_nd_in_order
func.func @gather_nd_in_order(%x: tensor<2x3xf32>) -> tensor<2x1x3xf32> {
  // CHECK-NOT: graph.gather_nd
  // CHECK: graph.reshape %arg0 {shape = array<i64: 2, 1, 3>}
  %t = graph.constant {value = dense<[[[0, 0], [0, 1], [0, 2]], [[1, 0], [1, 1], [1, 2]]]> : tensor<2x3x2xi32>} : () -> tensor<2x3x2xi32>
  %g = graph.gather_nd %x, %t : (tensor<2x3xf32>, tensor<2x3x2xi32>) -> tensor<2x3xf32>
  %r = graph.reshape %g {shape = array<i64: 2, 1, 3>} : (tensor<2x3xf32>) -> tensor<2x1x3xf32>
  return %r : tensor<2x1x3xf32>
}

// -----

// Tests that gathers out of order, or of part of the axis, stay gathers.
// CHECK-LABEL: func @gather_permuted
func.func @gather_permuted(%x: tensor<4x2xf32>, %y: tensor<2x3xf32>) -> (tensor<4x2xf32>, tensor<3x2xf32>, tensor<2xf32>) {
  // CHECK: graph.gather %arg0
  // CHECK: graph.gather %arg0
  // CHECK: graph.gather_nd %arg1
  %p = graph.constant {value = dense<[1, 0, 2, 3]> : tensor<4xi64>} : () -> tensor<4xi64>
  %g = graph.gather %x, %p {axis = 0 : i64} : (tensor<4x2xf32>, tensor<4xi64>) -> tensor<4x2xf32>
  %q = graph.constant {value = dense<[0, 1, 2]> : tensor<3xi64>} : () -> tensor<3xi64>
  %h = graph.gather %x, %q {axis = 0 : i64} : (tensor<4x2xf32>, tensor<3xi64>) -> tensor<3x2xf32>
  %t = graph.constant {value = dense<[[0, 0], [1, 2]]> : tensor<2x2xi64>} : () -> tensor<2x2xi64>
  %n = graph.gather_nd %y, %t : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2xf32>
  return %g, %h, %n : tensor<4x2xf32>, tensor<3x2xf32>, tensor<2xf32>
}

// -----

// Tests that IsNaN, IsInf and ScatterND of constants fold.
// CHECK-LABEL: func @float_tests_and_scatter
func.func @float_tests_and_scatter() -> (tensor<3xi1>, tensor<3xi1>, tensor<4xf32>) {
  // CHECK-DAG: graph.constant {value = dense<[false, true, false]> : tensor<3xi1>}
  // CHECK-DAG: graph.constant {value = dense<[true, false, false]> : tensor<3xi1>}
  // CHECK-DAG: graph.constant {value = dense<[1.000000e+00, 1.400000e+01, 3.000000e+00, 6.000000e+01]> : tensor<4xf32>}
  // CHECK-NOT: graph.is_nan
  // CHECK-NOT: graph.scatter_nd
  %x = graph.constant {value = dense<[0x7F800000, 0x7FC00000, 1.0]> : tensor<3xf32>} : () -> tensor<3xf32>
  %n = graph.is_nan %x : (tensor<3xf32>) -> tensor<3xi1>
  %i = graph.is_inf %x {detect_negative = false} : (tensor<3xf32>) -> tensor<3xi1>
  %d = graph.constant {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> tensor<4xf32>
  %t = graph.constant {value = dense<[[3], [1], [3]]> : tensor<3x1xi64>} : () -> tensor<3x1xi64>
  %u = graph.constant {value = dense<[5.0, 7.0, 3.0]> : tensor<3xf32>} : () -> tensor<3xf32>
  %s = graph.scatter_nd %d, %t, %u {reduction = "mul"} : (tensor<4xf32>, tensor<3x1xi64>, tensor<3xf32>) -> tensor<4xf32>
  return %n, %i, %s : tensor<3xi1>, tensor<3xi1>, tensor<4xf32>
}

// -----

// Tests that adding zeros and multiplying by ones are dropped where they
// do not broadcast the other operand, and kept where they do.
// CHECK-LABEL: func @identity_operands
func.func @identity_operands(%x: tensor<2x3xf32>, %v: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  // CHECK-NOT: graph.mul
  // CHECK: %[[W:.*]] = graph.add %arg1, %{{.*}} : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: return %arg0, %[[W]]
  %z = graph.constant {value = dense<0.0> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %o = graph.constant {value = dense<1.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %a = graph.add %z, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %m = graph.mul %a, %o : (tensor<2x3xf32>, tensor<1xf32>) -> tensor<2x3xf32>
  %w = graph.add %v, %z : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %m, %w : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Tests that squares and cubes are multiplications, and that other powers
// and broadcasting ones stay powers.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<2x3xf32>, %s: tensor<f32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  // CHECK: %[[SQ:.*]] = graph.mul %arg0, %arg0
  // CHECK: %[[C2:.*]] = graph.mul %arg0, %arg0
  // CHECK: %[[CUBE:.*]] = graph.mul %[[C2]], %arg0
  // CHECK: %[[P:.*]] = graph.pow %arg0
  // CHECK: %[[B:.*]] = graph.pow %arg1
  // CHECK: return %[[SQ]], %[[CUBE]], %[[P]], %[[B]]
  %two = graph.constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %three = graph.constant {value = dense<3.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %half = graph.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %wide = graph.constant {value = dense<2.0> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %a = graph.pow %x, %two : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %b = graph.pow %x, %three : (tensor<2x3xf32>, tensor<1xf32>) -> tensor<2x3xf32>
  %c = graph.pow %x, %half : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %d = graph.pow %s, %wide : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %a, %b, %c, %d : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Tests that a pad by nothing (PyTorch 1.x exports one before DenseNet's
// average pools) is its input, and that a real pad stays.
// CHECK-LABEL: func @empty_pad
func.func @empty_pad(%x: tensor<1x4x4x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x6x4x8xf32>) {
  // CHECK: %[[P:.*]] = graph.pad %arg0
  // CHECK: return %arg0, %[[P]]
  %same = graph.pad %x {pads = array<i64: 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %rows = graph.pad %x {pads = array<i64: 0, 1, 0, 0, 0, 1, 0, 0>} : (tensor<1x4x4x8xf32>) -> tensor<1x6x4x8xf32>
  return %same, %rows : tensor<1x4x4x8xf32>, tensor<1x6x4x8xf32>
}

// -----

// Tests that a rotary embedding's rotate_half times its sine table,
// concat(-x2, x1) * s, becomes concat(x2, x1) * s' with s' negated where
// the negated part lies (the table [1, 2, 1, 4]: its first two columns),
// so no neg kernel runs; and that a table broadcast along the concatenated
// axis is widened first.
// CHECK-LABEL: func @rotate_half
// CHECK-NOT: graph.neg
// CHECK-DAG: %[[S:.*]] = graph.constant {value = dense<{{\[\[\[\[}}-1.000000e+00, -2.000000e+00, 3.000000e+00, 4.000000e+00]], {{\[\[}}-5.000000e+00, -6.000000e+00, 7.000000e+00, 8.000000e+00]]]]> : tensor<1x2x1x4xf32>}
// CHECK-DAG: %[[B:.*]] = graph.constant {value = dense<{{\[\[\[\[}}-2.000000e+00, -2.000000e+00, 2.000000e+00, 2.000000e+00]]]]> : tensor<1x1x1x4xf32>}
// CHECK: %[[C:.*]] = graph.concat %[[X2:.*]], %[[X1:.*]] {axis = 3 : i64}
// CHECK: graph.mul %[[C]], %[[S]]
// CHECK: graph.mul %[[B]], %{{.*}}
func.func @rotate_half(%x: tensor<3x2x5x4xf32>) -> (tensor<3x2x5x4xf32>, tensor<3x2x5x4xf32>) {
  %s = graph.constant {value = dense<[[[[1.0, 2.0, 3.0, 4.0]], [[5.0, 6.0, 7.0, 8.0]]]]> : tensor<1x2x1x4xf32>} : () -> tensor<1x2x1x4xf32>
  %b = graph.constant {value = dense<2.0> : tensor<1x1x1x1xf32>} : () -> tensor<1x1x1x1xf32>
  %x1 = graph.slice %x {starts = array<i64: 0, 0, 0, 0>, ends = array<i64: 3, 2, 5, 2>, steps = array<i64: 1, 1, 1, 1>} : (tensor<3x2x5x4xf32>) -> tensor<3x2x5x2xf32>
  %x2 = graph.slice %x {starts = array<i64: 0, 0, 0, 2>, ends = array<i64: 3, 2, 5, 4>, steps = array<i64: 1, 1, 1, 1>} : (tensor<3x2x5x4xf32>) -> tensor<3x2x5x2xf32>
  %n = graph.neg %x2 : (tensor<3x2x5x2xf32>) -> tensor<3x2x5x2xf32>
  %r = graph.concat %n, %x1 {axis = 3 : i64} : (tensor<3x2x5x2xf32>, tensor<3x2x5x2xf32>) -> tensor<3x2x5x4xf32>
  %m = graph.mul %r, %s : (tensor<3x2x5x4xf32>, tensor<1x2x1x4xf32>) -> tensor<3x2x5x4xf32>
  %n2 = graph.neg %x2 : (tensor<3x2x5x2xf32>) -> tensor<3x2x5x2xf32>
  %r2 = graph.concat %n2, %x1 {axis = 3 : i64} : (tensor<3x2x5x2xf32>, tensor<3x2x5x2xf32>) -> tensor<3x2x5x4xf32>
  %m2 = graph.mul %b, %r2 : (tensor<1x1x1x1xf32>, tensor<3x2x5x4xf32>) -> tensor<3x2x5x4xf32>
  return %m, %m2 : tensor<3x2x5x4xf32>, tensor<3x2x5x4xf32>
}

// -----

// Tests that a negated part read elsewhere too keeps its neg, and that a
// factor that is not a constant leaves the product alone.
// CHECK-LABEL: func @rotate_half_kept
// CHECK-COUNT-2: graph.neg
func.func @rotate_half_kept(%x: tensor<2x4xf32>, %y: tensor<2x2xf32>, %f: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x2xf32>, tensor<2x4xf32>) {
  %s = graph.constant {value = dense<3.0> : tensor<1x4xf32>} : () -> tensor<1x4xf32>
  %n = graph.neg %y : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %r = graph.concat %n, %y {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %m = graph.mul %r, %s : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  %n2 = graph.neg %x : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %z = graph.slice %n2 {starts = array<i64: 0, 0>, ends = array<i64: 2, 2>, steps = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<2x2xf32>
  %r2 = graph.concat %z, %z {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %m2 = graph.mul %r2, %f : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %m, %n, %m2 : tensor<2x4xf32>, tensor<2x2xf32>, tensor<2x4xf32>
}
