// RUN: partc-opt %s --partc-fuse-attention --split-input-file --verify-diagnostics

// Tests that a fused attention's views must fit their operands.
func.func @view(%x: tensor<16x64xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+2 {{q x k: lhs view [1,16,64] with strides [1024,64,1] at offset 64 reaches element 1087 of a buffer of 1024; hint: the views are those of the two strided_matmuls partc-fuse-attention fused}}
  // expected-error@+1 {{failed to infer returned types}}
  %o = graph.attention %x, %x, %x {q_shape = array<i64: 1, 16, 64>, q_strides = array<i64: 1024, 64, 1>, q_offset = 64 : i64, k_shape = array<i64: 1, 64, 16>, k_strides = array<i64: 1024, 1, 64>, k_offset = 0 : i64, v_shape = array<i64: 1, 16, 64>, v_strides = array<i64: 1024, 64, 1>, v_offset = 0 : i64, perm = array<i64: 0, 1, 2>, shape = array<i64: 16, 64>, scale = 1.250000e-01 : f64, nan_to_zero = false} : (tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16>) -> tensor<16x64xbf16>
  return %o : tensor<16x64xbf16>
}

// -----

// Tests that the mask must broadcast to the scores.
func.func @mask(%x: tensor<16x64xbf16>, %m: tensor<2x16xbf16>) -> tensor<16x64xbf16> {
  // expected-error@+2 {{bias tensor<2x16xbf16> does not broadcast to the scores [1,16,16]; hint: it is the softmax's bias (a mask)}}
  // expected-error@+1 {{failed to infer returned types}}
  %o = graph.attention %x, %x, %x, %m {q_shape = array<i64: 1, 16, 64>, q_strides = array<i64: 1024, 64, 1>, q_offset = 0 : i64, k_shape = array<i64: 1, 64, 16>, k_strides = array<i64: 1024, 1, 64>, k_offset = 0 : i64, v_shape = array<i64: 1, 16, 64>, v_strides = array<i64: 1024, 64, 1>, v_offset = 0 : i64, perm = array<i64: 0, 1, 2>, shape = array<i64: 16, 64>, scale = 1.250000e-01 : f64, nan_to_zero = false} : (tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<2x16xbf16>) -> tensor<16x64xbf16>
  return %o : tensor<16x64xbf16>
}

// -----

// Tests that q, k, v and the mask share one element type.
func.func @types(%x: tensor<16x64xbf16>, %y: tensor<16x64xf16>) -> tensor<16x64xbf16> {
  // expected-error@+2 {{operands must share one element type, got tensor<16x64xbf16> and tensor<16x64xf16>}}
  // expected-error@+1 {{failed to infer returned types}}
  %o = graph.attention %x, %y, %x {q_shape = array<i64: 1, 16, 64>, q_strides = array<i64: 1024, 64, 1>, q_offset = 0 : i64, k_shape = array<i64: 1, 64, 16>, k_strides = array<i64: 1024, 1, 64>, k_offset = 0 : i64, v_shape = array<i64: 1, 16, 64>, v_strides = array<i64: 1024, 64, 1>, v_offset = 0 : i64, perm = array<i64: 0, 1, 2>, shape = array<i64: 16, 64>, scale = 1.250000e-01 : f64, nan_to_zero = false} : (tensor<16x64xbf16>, tensor<16x64xf16>, tensor<16x64xbf16>) -> tensor<16x64xbf16>
  return %o : tensor<16x64xbf16>
}
