// RUN: partc-opt %s --partc-fold-matmul-views --split-input-file --verify-diagnostics

// Tests that a view reaching past its buffer is rejected, with the extent.
func.func @outside(%x: tensor<2x16x64xf32>) -> tensor<2x16x16xf32> {
  // expected-error@+2 {{lhs view [2,16,16] with strides [1024,64,1] at offset 64 reaches element 2063 of a buffer of 2048; the views come from slices, reshapes and transposes that partc-fold-matmul-views folds}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = graph.strided_matmul %x, %x {lhs_shape = array<i64: 2, 16, 16>, lhs_strides = array<i64: 1024, 64, 1>, lhs_offset = 64 : i64, rhs_shape = array<i64: 2, 16, 16>, rhs_strides = array<i64: 1024, 1, 64>, rhs_offset = 0 : i64, perm = array<i64: 0, 1, 2>, shape = array<i64: 2, 16, 16>} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x16xf32>
  return %y : tensor<2x16x16xf32>
}

// -----

// Tests that an operand matrix must have contiguous rows or columns.
func.func @scattered(%x: tensor<4x8x8xf32>) -> tensor<4x4x4xf32> {
  // expected-error@+2 {{operand matrices need rows or columns at stride 1 and the other stride at least that extent, got strides [64,16,2] and [64,8,1]}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = graph.strided_matmul %x, %x {lhs_shape = array<i64: 4, 4, 4>, lhs_strides = array<i64: 64, 16, 2>, lhs_offset = 0 : i64, rhs_shape = array<i64: 4, 4, 4>, rhs_strides = array<i64: 64, 8, 1>, rhs_offset = 0 : i64, perm = array<i64: 0, 1, 2>, shape = array<i64: 4, 4, 4>} : (tensor<4x8x8xf32>, tensor<4x8x8xf32>) -> tensor<4x4x4xf32>
  return %y : tensor<4x4x4xf32>
}

// -----

// Tests that the stored result must keep rows or columns innermost.
func.func @batchlast(%x: tensor<2x4x4xf32>) -> tensor<4x4x2xf32> {
  // expected-error@+2 {{result permutation [1,2,0] must keep the result's rows or columns contiguous}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = graph.strided_matmul %x, %x {lhs_shape = array<i64: 2, 4, 4>, lhs_strides = array<i64: 16, 4, 1>, lhs_offset = 0 : i64, rhs_shape = array<i64: 2, 4, 4>, rhs_strides = array<i64: 16, 4, 1>, rhs_offset = 0 : i64, perm = array<i64: 1, 2, 0>, shape = array<i64: 4, 4, 2>} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<4x4x2xf32>
  return %y : tensor<4x4x2xf32>
}

// -----

// Tests that contraction extents must agree and that only f32 is taken.
func.func @contraction(%x: tensor<2x4x4xf32>, %i: tensor<2x4x4xi32>) -> tensor<2x4x4xf32> {
  // expected-error@+2 {{contraction extents differ: [2,4,4] x [2,3,4]}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = graph.strided_matmul %x, %x {lhs_shape = array<i64: 2, 4, 4>, lhs_strides = array<i64: 16, 4, 1>, lhs_offset = 0 : i64, rhs_shape = array<i64: 2, 3, 4>, rhs_strides = array<i64: 16, 4, 1>, rhs_offset = 0 : i64, perm = array<i64: 0, 1, 2>, shape = array<i64: 2, 4, 4>} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %y : tensor<2x4x4xf32>
}

// -----

func.func @integer(%i: tensor<2x4x4xi32>) -> tensor<2x4x4xi32> {
  // expected-error@+2 {{multiplies two f32, bf16 or f16 tensors only}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = graph.strided_matmul %i, %i {lhs_shape = array<i64: 2, 4, 4>, lhs_strides = array<i64: 16, 4, 1>, lhs_offset = 0 : i64, rhs_shape = array<i64: 2, 4, 4>, rhs_strides = array<i64: 16, 4, 1>, rhs_offset = 0 : i64, perm = array<i64: 0, 1, 2>, shape = array<i64: 2, 4, 4>} : (tensor<2x4x4xi32>, tensor<2x4x4xi32>) -> tensor<2x4x4xi32>
  return %y : tensor<2x4x4xi32>
}
