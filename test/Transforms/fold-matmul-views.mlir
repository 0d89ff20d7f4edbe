// RUN: partc-opt %s --partc-fold-matmul-views --split-input-file | FileCheck %s

// Tests attention's scores: q and k are heads of one [2, 16, 192] projection
// (4 heads of 16), read in place; the scale by 1/4 becomes alpha, and the
// slices, reshapes and transposes are erased.
// CHECK-LABEL: func @scores
func.func @scores(%qkv: tensor<2x16x192xf32>) -> tensor<2x4x16x16xf32> {
  %c4 = graph.constant {value = dense<4.0> : tensor<f32>} : () -> tensor<f32>
  // CHECK-NOT: graph.slice
  // CHECK-NOT: graph.transpose
  // CHECK-NOT: graph.constant
  // CHECK: %[[S:.*]] = graph.strided_matmul %arg0, %arg0 {alpha = 2.500000e-01 : f64,
  // CHECK-SAME: lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 4, 16, 16>, lhs_strides = array<i64: 3072, 16, 192, 1>
  // CHECK-SAME: perm = array<i64: 0, 1, 2, 3>
  // CHECK-SAME: rhs_offset = 64 : i64, rhs_shape = array<i64: 2, 4, 16, 16>, rhs_strides = array<i64: 3072, 16, 1, 192>
  // CHECK-SAME: shape = array<i64: 2, 4, 16, 16>}
  // CHECK-NEXT: return %[[S]]
  %q = graph.slice %qkv {starts = array<i64: 0, 0, 0>, ends = array<i64: 2, 16, 64>, steps = array<i64: 1, 1, 1>} : (tensor<2x16x192xf32>) -> tensor<2x16x64xf32>
  %k = graph.slice %qkv {starts = array<i64: 0, 0, 64>, ends = array<i64: 2, 16, 128>, steps = array<i64: 1, 1, 1>} : (tensor<2x16x192xf32>) -> tensor<2x16x64xf32>
  %q4 = graph.reshape %q {shape = array<i64: 2, 16, 4, 16>} : (tensor<2x16x64xf32>) -> tensor<2x16x4x16xf32>
  %k4 = graph.reshape %k {shape = array<i64: 2, 16, 4, 16>} : (tensor<2x16x64xf32>) -> tensor<2x16x4x16xf32>
  %qt = graph.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x16xf32>) -> tensor<2x4x16x16xf32>
  %kt = graph.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x16x4x16xf32>) -> tensor<2x4x16x16xf32>
  %s = graph.matmul %qt, %kt : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %y = graph.div %s, %c4 : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  return %y : tensor<2x4x16x16xf32>
}

// -----

// Tests q and k each scaled by a constant before the product, as exporters
// of scaled dot-product attention write it (q * 0.5, k^T / 2): both scales
// join alpha, and the scaling copies and their constants go.
// CHECK-LABEL: func @prescaled
func.func @prescaled(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32> {
  %half = graph.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %two = graph.constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  // CHECK-NOT: graph.constant
  // CHECK-NOT: graph.mul
  // CHECK: %[[S:.*]] = graph.strided_matmul %arg0, %arg1 {alpha = 2.500000e-01 : f64,
  // CHECK-SAME: rhs_shape = array<i64: 2, 4, 8, 16>, rhs_strides = array<i64: 512, 128, 1, 8>
  // CHECK-NEXT: return %[[S]]
  %qs = graph.mul %half, %q : (tensor<f32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x16x8xf32>) -> tensor<2x4x8x16xf32>
  %ks = graph.div %kt, %two : (tensor<2x4x8x16xf32>, tensor<f32>) -> tensor<2x4x8x16xf32>
  %s = graph.matmul %qs, %ks : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  return %s : tensor<2x4x16x16xf32>
}

// -----

// Tests the head merge: the result's transpose and reshape become the
// layout the strided matmul writes.
// CHECK-LABEL: func @merge
func.func @merge(%p: tensor<2x4x16x16xf32>, %v: tensor<2x4x16x8xf32>) -> tensor<2x16x32xf32> {
  // CHECK: %[[O:.*]] = graph.strided_matmul %arg0, %arg1
  // CHECK-SAME: perm = array<i64: 0, 2, 1, 3>
  // CHECK-SAME: shape = array<i64: 2, 16, 32>
  // CHECK-SAME: -> tensor<2x16x32xf32>
  // CHECK-NEXT: return %[[O]]
  %o = graph.matmul %p, %v : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %t = graph.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x16x8xf32>) -> tensor<2x16x4x8xf32>
  %r = graph.reshape %t {shape = array<i64: 2, 16, 32>} : (tensor<2x16x4x8xf32>) -> tensor<2x16x32xf32>
  return %r : tensor<2x16x32xf32>
}

// -----

// Tests that a view with another use stays (and still feeds the strided
// matmul's source), and that a transpose reaching only the batch is read
// in place too.
// CHECK-LABEL: func @shared
func.func @shared(%x: tensor<3x2x4x5xf32>, %w: tensor<2x5x6xf32>) -> (tensor<2x3x4x6xf32>, tensor<2x3x4x5xf32>) {
  // CHECK: %[[T:.*]] = graph.transpose %arg0
  // CHECK: graph.strided_matmul %arg0, %arg1
  // CHECK-SAME: lhs_shape = array<i64: 2, 3, 4, 5>, lhs_strides = array<i64: 20, 40, 5, 1>
  // CHECK-SAME: rhs_shape = array<i64: 2, 1, 5, 6>, rhs_strides = array<i64: 30, 30, 6, 1>
  %t = graph.transpose %x {perm = array<i64: 1, 0, 2, 3>} : (tensor<3x2x4x5xf32>) -> tensor<2x3x4x5xf32>
  %r = graph.reshape %w {shape = array<i64: 2, 1, 5, 6>} : (tensor<2x5x6xf32>) -> tensor<2x1x5x6xf32>
  %m = graph.matmul %t, %r : (tensor<2x3x4x5xf32>, tensor<2x1x5x6xf32>) -> tensor<2x3x4x6xf32>
  return %m, %t : tensor<2x3x4x6xf32>, tensor<2x3x4x5xf32>
}

// -----

// Tests parts of a split read in place: v is the third part of the
// projection, read at offset 2 * 8.
// CHECK-LABEL: func @split
func.func @split(%p: tensor<2x2x6x6xf32>, %qkv: tensor<2x6x24xf32>) -> tensor<2x6x8xf32> {
  // CHECK-NOT: graph.split
  // CHECK: %[[O:.*]] = graph.strided_matmul %arg0, %arg1
  // CHECK-SAME: perm = array<i64: 0, 2, 1, 3>
  // CHECK-SAME: rhs_offset = 16 : i64, rhs_shape = array<i64: 2, 2, 6, 4>, rhs_strides = array<i64: 144, 4, 24, 1>
  // CHECK-SAME: shape = array<i64: 2, 6, 8>
  // CHECK-NEXT: return %[[O]]
  %q, %k, %v = graph.split %qkv {axis = 2 : i64, sizes = array<i64: 8, 8, 8>} : (tensor<2x6x24xf32>) -> (tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
  %v4 = graph.reshape %v {shape = array<i64: 2, 6, 2, 4>} : (tensor<2x6x8xf32>) -> tensor<2x6x2x4xf32>
  %vt = graph.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x6x2x4xf32>) -> tensor<2x2x6x4xf32>
  %o = graph.matmul %p, %vt : (tensor<2x2x6x6xf32>, tensor<2x2x6x4xf32>) -> tensor<2x2x6x4xf32>
  %ot = graph.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x6x4xf32>) -> tensor<2x6x2x4xf32>
  %r = graph.reshape %ot {shape = array<i64: 2, 6, 8>} : (tensor<2x6x2x4xf32>) -> tensor<2x6x8xf32>
  return %r : tensor<2x6x8xf32>
}

// -----

// Tests a slice with steps whose matrix keeps contiguous columns, a
// transposed weight read as its transpose, and a result transpose that
// leaves M innermost.
// CHECK-LABEL: func @stepped
func.func @stepped(%y: tensor<4x8x2xf32>, %w: tensor<4x4xf32>) -> tensor<4x4x2xf32> {
  // CHECK: %[[O:.*]] = graph.strided_matmul %arg0, %arg1
  // CHECK-SAME: lhs_shape = array<i64: 4, 2, 4>, lhs_strides = array<i64: 16, 1, 4>
  // CHECK-SAME: perm = array<i64: 0, 2, 1>
  // CHECK-SAME: rhs_shape = array<i64: 1, 4, 4>, rhs_strides = array<i64: 0, 1, 4>
  // CHECK-NEXT: return %[[O]]
  %s = graph.slice %y {starts = array<i64: 0, 0, 0>, ends = array<i64: 4, 8, 2>, steps = array<i64: 1, 2, 1>} : (tensor<4x8x2xf32>) -> tensor<4x4x2xf32>
  %st = graph.transpose %s {perm = array<i64: 0, 2, 1>} : (tensor<4x4x2xf32>) -> tensor<4x2x4xf32>
  %t = graph.transpose %w {perm = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %o = graph.matmul %st, %t : (tensor<4x2x4xf32>, tensor<4x4xf32>) -> tensor<4x2x4xf32>
  %ot = graph.transpose %o {perm = array<i64: 0, 2, 1>} : (tensor<4x2x4xf32>) -> tensor<4x4x2xf32>
  return %ot : tensor<4x4x2xf32>
}

// -----

// Tests what stays a plain matmul: nothing to read in place (a reshape
// alone moves no data), a fused bias, and a slice with steps in both
// matrix dimensions (neither rows nor columns contiguous).
// CHECK-LABEL: func @unchanged
func.func @unchanged(%x: tensor<2x3x4xf32>, %w: tensor<4x4xf32>, %b: tensor<4xf32>, %y: tensor<4x8x4xf32>, %v: tensor<2x3xf32>) -> (tensor<6x4xf32>, tensor<2x3x4xf32>, tensor<4x4x3xf32>) {
  // CHECK-NOT: graph.strided_matmul
  // CHECK: graph.matmul
  // CHECK: graph.matmul
  // CHECK: graph.slice
  // CHECK: graph.matmul
  // CHECK-NOT: graph.strided_matmul
  %r = graph.reshape %x {shape = array<i64: 6, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %m = graph.matmul %r, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %t = graph.transpose %w {perm = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %n = graph.matmul %x, %t, %b : (tensor<2x3x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %s = graph.slice %y {starts = array<i64: 0, 0, 0>, ends = array<i64: 4, 8, 4>, steps = array<i64: 1, 2, 2>} : (tensor<4x8x4xf32>) -> tensor<4x4x2xf32>
  %o = graph.matmul %s, %v : (tensor<4x4x2xf32>, tensor<2x3xf32>) -> tensor<4x4x3xf32>
  return %m, %n, %o : tensor<6x4xf32>, tensor<2x3x4xf32>, tensor<4x4x3xf32>
}

// -----

// Tests that a scale alone (here the last step of an exported Gelu before
// a linear layer) leaves the matmul and the scale as they are.
// CHECK-LABEL: func @scaleonly
func.func @scaleonly(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %half = graph.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  // CHECK: graph.mul
  // CHECK-NEXT: graph.matmul
  // CHECK-NOT: graph.strided_matmul
  %g = graph.mul %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %y = graph.matmul %g, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests q and k taken by gathers with constant indices from a stacked
// [3, 2, 16, 64] projection, as PyTorch 2 exports attention: each gather is
// an offset (1 * 2048 for k) and drops the stacked dimension; the gathers
// and their indices are erased.
// CHECK-LABEL: func @gathered
func.func @gathered(%qkv: tensor<3x2x16x64xf32>) -> tensor<2x16x16xf32> {
  %i0 = graph.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %i1 = graph.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  // CHECK-NOT: graph.gather
  // CHECK-NOT: graph.constant
  // CHECK: graph.strided_matmul %arg0, %arg0 {
  // CHECK-SAME: lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 16, 64>, lhs_strides = array<i64: 1024, 64, 1>
  // CHECK-SAME: rhs_offset = 2048 : i64, rhs_shape = array<i64: 2, 64, 16>, rhs_strides = array<i64: 1024, 1, 64>
  %q = graph.gather %qkv, %i0 {axis = 0 : i64} : (tensor<3x2x16x64xf32>, tensor<i64>) -> tensor<2x16x64xf32>
  %k = graph.gather %qkv, %i1 {axis = 0 : i64} : (tensor<3x2x16x64xf32>, tensor<i64>) -> tensor<2x16x64xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 1>} : (tensor<2x16x64xf32>) -> tensor<2x64x16xf32>
  %s = graph.matmul %q, %kt : (tensor<2x16x64xf32>, tensor<2x64x16xf32>) -> tensor<2x16x16xf32>
  return %s : tensor<2x16x16xf32>
}

// -----

// Tests that a gather whose index is only known at run time stays a copy.
// CHECK-LABEL: func @runtimeindex
func.func @runtimeindex(%qkv: tensor<3x2x16x64xf32>, %i: tensor<i64>) -> tensor<2x16x16xf32> {
  // CHECK: %[[Q:.*]] = graph.gather %arg0, %arg1
  // CHECK: graph.strided_matmul %[[Q]], %[[Q]]
  %q = graph.gather %qkv, %i {axis = 0 : i64} : (tensor<3x2x16x64xf32>, tensor<i64>) -> tensor<2x16x64xf32>
  %kt = graph.transpose %q {perm = array<i64: 0, 2, 1>} : (tensor<2x16x64xf32>) -> tensor<2x64x16xf32>
  %s = graph.matmul %q, %kt : (tensor<2x16x64xf32>, tensor<2x64x16xf32>) -> tensor<2x16x16xf32>
  return %s : tensor<2x16x16xf32>
}

// -----

// Tests that a gemm whose only user transposes it on the same device
// computes the transposed product (operands swapped, transpositions
// flipped), and that a gemm read elsewhere too, with an addend or
// transposed on another device (pipeline stage) is left alone.
// CHECK-LABEL: func @transposed_gemm
// CHECK: %[[G:.*]] = graph.gemm %arg1, %arg0 {beta = 0.000000e+00 : f64, graph.device = 1 : i64, trans_a = 1 : i64} : (tensor<4x6xf32>, tensor<4x3xf32>) -> tensor<6x3xf32>
// CHECK-NOT: graph.transpose
// CHECK: return %[[G]]
func.func @transposed_gemm(%a: tensor<4x3xf32>, %b: tensor<4x6xf32>) -> tensor<6x3xf32> {
  %g = graph.gemm %a, %b {beta = 0.0 : f64, trans_a = 1 : i64, graph.device = 1 : i64} : (tensor<4x3xf32>, tensor<4x6xf32>) -> tensor<3x6xf32>
  %t = graph.transpose %g {perm = array<i64: 1, 0>, graph.device = 1 : i64} : (tensor<3x6xf32>) -> tensor<6x3xf32>
  return %t : tensor<6x3xf32>
}

// CHECK-LABEL: func @gemm_on_another_stage
// CHECK: graph.gemm %arg0, %arg1
// CHECK: graph.transpose
func.func @gemm_on_another_stage(%a: tensor<4x3xf32>, %b: tensor<4x6xf32>) -> tensor<6x3xf32> {
  %g = graph.gemm %a, %b {trans_a = 1 : i64, graph.device = 1 : i64} : (tensor<4x3xf32>, tensor<4x6xf32>) -> tensor<3x6xf32>
  %t = graph.transpose %g {perm = array<i64: 1, 0>, graph.device = 0 : i64} : (tensor<3x6xf32>) -> tensor<6x3xf32>
  return %t : tensor<6x3xf32>
}

// CHECK-LABEL: func @gemm_read_twice
// CHECK: graph.gemm %arg0, %arg1
// CHECK: graph.transpose
func.func @gemm_read_twice(%a: tensor<4x3xf32>, %b: tensor<4x6xf32>) -> (tensor<6x3xf32>, tensor<3x6xf32>) {
  %g = graph.gemm %a, %b {trans_a = 1 : i64} : (tensor<4x3xf32>, tensor<4x6xf32>) -> tensor<3x6xf32>
  %t = graph.transpose %g {perm = array<i64: 1, 0>} : (tensor<3x6xf32>) -> tensor<6x3xf32>
  return %t, %g : tensor<6x3xf32>, tensor<3x6xf32>
}

// CHECK-LABEL: func @gemm_with_addend
// CHECK: graph.gemm %arg0, %arg1, %arg2
// CHECK: graph.transpose
func.func @gemm_with_addend(%a: tensor<4x3xf32>, %b: tensor<4x6xf32>, %c: tensor<3x6xf32>) -> tensor<6x3xf32> {
  %g = graph.gemm %a, %b, %c {trans_a = 1 : i64} : (tensor<4x3xf32>, tensor<4x6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
  %t = graph.transpose %g {perm = array<i64: 1, 0>} : (tensor<3x6xf32>) -> tensor<6x3xf32>
  return %t : tensor<6x3xf32>
}
