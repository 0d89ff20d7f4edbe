// RUN: partc-opt %s --partc-fuse-attention --split-input-file | FileCheck %s

// Tests that GPT-2's attention (heads of one fused projection, a causal
// mask, the merged heads stored in place) becomes one op that keeps the
// views, the scale, the mask and nan_to_zero.
// CHECK-LABEL: func @gpt2
func.func @gpt2(%qkv: tensor<32x192xbf16>, %mask: tensor<2x1x16x16xbf16>) -> tensor<32x64xbf16> {
  // CHECK: %[[O:.*]] = graph.attention %arg0, %arg0, %arg0, %arg1
  // CHECK-SAME: k_offset = 64 : i64, k_shape = array<i64: 2, 4, 16, 16>, k_strides = array<i64: 3072, 16, 1, 192>
  // CHECK-SAME: nan_to_zero = true, perm = array<i64: 0, 2, 1, 3>
  // CHECK-SAME: q_offset = 0 : i64, q_shape = array<i64: 2, 4, 16, 16>, q_strides = array<i64: 3072, 16, 192, 1>
  // CHECK-SAME: scale = 2.500000e-01 : f64, shape = array<i64: 32, 64>
  // CHECK-SAME: v_offset = 128 : i64, v_shape = array<i64: 2, 4, 16, 16>, v_strides = array<i64: 3072, 16, 192, 1>
  // CHECK-NOT: graph.softmax
  // CHECK-NOT: graph.strided_matmul
  // CHECK: return %[[O]]
  %s = graph.strided_matmul %qkv, %qkv {alpha = 2.500000e-01 : f64, graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 4, 16, 16>, lhs_strides = array<i64: 3072, 16, 192, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 64 : i64, rhs_shape = array<i64: 2, 4, 16, 16>, rhs_strides = array<i64: 3072, 16, 1, 192>, shape = array<i64: 2, 4, 16, 16>} : (tensor<32x192xbf16>, tensor<32x192xbf16>) -> tensor<2x4x16x16xbf16>
  %p = graph.softmax %s, %mask {axis = 3 : i64, graph.device = 0 : i64, nan_to_zero = true} : (tensor<2x4x16x16xbf16>, tensor<2x1x16x16xbf16>) -> tensor<2x4x16x16xbf16>
  %o = graph.strided_matmul %p, %qkv {graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 4, 16, 16>, lhs_strides = array<i64: 1024, 256, 16, 1>, perm = array<i64: 0, 2, 1, 3>, rhs_offset = 128 : i64, rhs_shape = array<i64: 2, 4, 16, 16>, rhs_strides = array<i64: 3072, 16, 192, 1>, shape = array<i64: 32, 64>} : (tensor<2x4x16x16xbf16>, tensor<32x192xbf16>) -> tensor<32x64xbf16>
  return %o : tensor<32x64xbf16>
}

// -----

// Tests attention without a mask in f16 on separate q, k and v tensors,
// the keys and values shared by the heads (grouped-query attention), and
// that the fused op stays on its device.
// CHECK-LABEL: func @shared_keys
func.func @shared_keys(%q: tensor<1x4x8x32xf16>, %k: tensor<1x1x8x32xf16>, %v: tensor<1x1x8x32xf16>) -> tensor<1x4x8x32xf16> {
  // CHECK: graph.attention %arg0, %arg1, %arg2 {
  // CHECK-SAME: graph.device = 1 : i64
  // CHECK-SAME: nan_to_zero = false
  // CHECK-SAME: -> tensor<1x4x8x32xf16>
  %s = graph.strided_matmul %q, %k {graph.device = 1 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 4, 8, 32>, lhs_strides = array<i64: 1024, 256, 32, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 1, 32, 8>, rhs_strides = array<i64: 256, 256, 1, 32>, shape = array<i64: 1, 4, 8, 8>} : (tensor<1x4x8x32xf16>, tensor<1x1x8x32xf16>) -> tensor<1x4x8x8xf16>
  %p = graph.softmax %s {axis = 3 : i64, graph.device = 1 : i64} : (tensor<1x4x8x8xf16>) -> tensor<1x4x8x8xf16>
  %o = graph.strided_matmul %p, %v {graph.device = 1 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 4, 8, 8>, lhs_strides = array<i64: 256, 64, 8, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 1, 8, 32>, rhs_strides = array<i64: 256, 256, 32, 1>, shape = array<i64: 1, 4, 8, 32>} : (tensor<1x4x8x8xf16>, tensor<1x1x8x32xf16>) -> tensor<1x4x8x32xf16>
  return %o : tensor<1x4x8x32xf16>
}

// -----

// Tests that f32 attention fuses too (the GPU runs it on TF32 products,
// or three per product without TF32).
// CHECK-LABEL: func @f32
func.func @f32(%q32: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  // CHECK: %[[O:.*]] = graph.attention %arg0, %arg0, %arg0 {
  // CHECK-SAME: -> tensor<1x2x8x16xf32>
  // CHECK-NOT: graph.softmax
  // CHECK: return %[[O]]
  %s0 = graph.strided_matmul %q32, %q32 {lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 8, 16>, lhs_strides = array<i64: 256, 128, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 16, 8>, rhs_strides = array<i64: 256, 128, 1, 16>, shape = array<i64: 1, 2, 8, 8>} : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x8xf32>
  %p0 = graph.softmax %s0 {axis = 3 : i64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o0 = graph.strided_matmul %p0, %q32 {lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 8, 8>, lhs_strides = array<i64: 128, 64, 8, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 8, 16>, rhs_strides = array<i64: 256, 128, 16, 1>, shape = array<i64: 1, 2, 8, 16>} : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  return %o0 : tensor<1x2x8x16xf32>
}

// -----

// Tests what stays unfused: a head size the GPU kernel has no instance
// for, scores another op reads, a softmax on another device, and
// probabilities scaled by the second product.
// CHECK-LABEL: func @unfused
func.func @unfused(%q: tensor<1x2x8x16xbf16>, %q24: tensor<1x2x8x24xbf16>) -> (tensor<1x2x8x24xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x8xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>) {
  // CHECK-NOT: graph.attention
  // CHECK: return
  %s1 = graph.strided_matmul %q24, %q24 {lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 8, 24>, lhs_strides = array<i64: 384, 192, 24, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 24, 8>, rhs_strides = array<i64: 384, 192, 1, 24>, shape = array<i64: 1, 2, 8, 8>} : (tensor<1x2x8x24xbf16>, tensor<1x2x8x24xbf16>) -> tensor<1x2x8x8xbf16>
  %p1 = graph.softmax %s1 {axis = 3 : i64} : (tensor<1x2x8x8xbf16>) -> tensor<1x2x8x8xbf16>
  %o1 = graph.strided_matmul %p1, %q24 {lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 8, 8>, lhs_strides = array<i64: 128, 64, 8, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 8, 24>, rhs_strides = array<i64: 384, 192, 24, 1>, shape = array<i64: 1, 2, 8, 24>} : (tensor<1x2x8x8xbf16>, tensor<1x2x8x24xbf16>) -> tensor<1x2x8x24xbf16>
  %s2 = graph.strided_matmul %q, %q {lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 8, 16>, lhs_strides = array<i64: 256, 128, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 16, 8>, rhs_strides = array<i64: 256, 128, 1, 16>, shape = array<i64: 1, 2, 8, 8>} : (tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>) -> tensor<1x2x8x8xbf16>
  %p2 = graph.softmax %s2 {axis = 3 : i64} : (tensor<1x2x8x8xbf16>) -> tensor<1x2x8x8xbf16>
  %o2 = graph.strided_matmul %p2, %q {lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 8, 8>, lhs_strides = array<i64: 128, 64, 8, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 8, 16>, rhs_strides = array<i64: 256, 128, 16, 1>, shape = array<i64: 1, 2, 8, 16>} : (tensor<1x2x8x8xbf16>, tensor<1x2x8x16xbf16>) -> tensor<1x2x8x16xbf16>
  %s3 = graph.strided_matmul %q, %q {graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 8, 16>, lhs_strides = array<i64: 256, 128, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 16, 8>, rhs_strides = array<i64: 256, 128, 1, 16>, shape = array<i64: 1, 2, 8, 8>} : (tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>) -> tensor<1x2x8x8xbf16>
  %p3 = graph.softmax %s3 {axis = 3 : i64, graph.device = 1 : i64} : (tensor<1x2x8x8xbf16>) -> tensor<1x2x8x8xbf16>
  %o3 = graph.strided_matmul %p3, %q {graph.device = 1 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 8, 8>, lhs_strides = array<i64: 128, 64, 8, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 8, 16>, rhs_strides = array<i64: 256, 128, 16, 1>, shape = array<i64: 1, 2, 8, 16>} : (tensor<1x2x8x8xbf16>, tensor<1x2x8x16xbf16>) -> tensor<1x2x8x16xbf16>
  %s4 = graph.strided_matmul %q, %q {lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 8, 16>, lhs_strides = array<i64: 256, 128, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 16, 8>, rhs_strides = array<i64: 256, 128, 1, 16>, shape = array<i64: 1, 2, 8, 8>} : (tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>) -> tensor<1x2x8x8xbf16>
  %p4 = graph.softmax %s4 {axis = 3 : i64} : (tensor<1x2x8x8xbf16>) -> tensor<1x2x8x8xbf16>
  %o4 = graph.strided_matmul %p4, %q {alpha = 5.000000e-01 : f64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 8, 8>, lhs_strides = array<i64: 128, 64, 8, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 8, 16>, rhs_strides = array<i64: 256, 128, 16, 1>, shape = array<i64: 1, 2, 8, 16>} : (tensor<1x2x8x8xbf16>, tensor<1x2x8x16xbf16>) -> tensor<1x2x8x16xbf16>
  return %o1, %o2, %p2, %o3, %o4 : tensor<1x2x8x24xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x8xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>
}

// -----

// Tests that a mask proved -inf above the diagonal marks the attention
// causal: where(and(lower triangle, padding), 0, -inf), as Hugging Face's
// GPT-2 exports it, and the same mask folded to a constant; a triangle
// that keeps a key past its query, and a padding mask alone, do not. The
// fused op hides the keys past each query itself, so the first reads the
// padding mask alone, per key (the triangle and its `and` are gone), and
// the second, whose mask hides nothing else, reads none.
// CHECK-LABEL: func @causal_masks
func.func @causal_masks(%q: tensor<1x2x4x16xbf16>, %pad: tensor<1x1x1x4xi1>) -> (tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16>) {
  // CHECK-NOT: true, false, false, false
  // CHECK: %[[LEAKY:.*]] = graph.and
  // CHECK: %[[M2:.*]] = graph.where %[[LEAKY]]
  // CHECK: %[[M3:.*]] = graph.where %arg1
  // CHECK: %[[PAD:.*]] = graph.where %arg1, %{{.*}}, %{{.*}} {graph.device = 0 : i64} : (tensor<1x1x1x4xi1>, tensor<1xbf16>, tensor<1xbf16>) -> tensor<1x1x1x4xbf16>
  // CHECK-NEXT: graph.attention %arg0, %arg0, %arg0, %[[PAD]] {causal = true
  // CHECK-NEXT: graph.attention %arg0, %arg0, %arg0 {causal = true
  // CHECK: graph.attention %arg0, %arg0, %arg0, %[[M2]] {graph.device
  // CHECK: graph.attention %arg0, %arg0, %arg0, %[[M3]] {graph.device
  // CHECK-NOT: graph.and
  %tril = graph.constant {value = dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>} : () -> tensor<1x1x4x4xi1>
  %leaky = graph.constant {value = dense<[[[[true, true, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>} : () -> tensor<1x1x4x4xi1>
  %zero = graph.constant {value = dense<0.000000e+00> : tensor<1xbf16>} : () -> tensor<1xbf16>
  %ninf = graph.constant {value = dense<0xFF80> : tensor<1xbf16>} : () -> tensor<1xbf16>
  %folded = graph.constant {value = dense<[[[[0.0, 0xFF80, 0xFF80, 0xFF80], [0.0, 0.0, 0xFF80, 0xFF80], [0.0, 0.0, 0.0, 0xFF80], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xbf16>} : () -> tensor<1x1x4x4xbf16>
  %c0 = graph.and %tril, %pad {graph.device = 0 : i64} : (tensor<1x1x4x4xi1>, tensor<1x1x1x4xi1>) -> tensor<1x1x4x4xi1>
  %m0 = graph.where %c0, %zero, %ninf {graph.device = 0 : i64} : (tensor<1x1x4x4xi1>, tensor<1xbf16>, tensor<1xbf16>) -> tensor<1x1x4x4xbf16>
  %c2 = graph.and %leaky, %pad {graph.device = 0 : i64} : (tensor<1x1x4x4xi1>, tensor<1x1x1x4xi1>) -> tensor<1x1x4x4xi1>
  %m2 = graph.where %c2, %zero, %ninf {graph.device = 0 : i64} : (tensor<1x1x4x4xi1>, tensor<1xbf16>, tensor<1xbf16>) -> tensor<1x1x4x4xbf16>
  %m3 = graph.where %pad, %zero, %ninf {graph.device = 0 : i64} : (tensor<1x1x1x4xi1>, tensor<1xbf16>, tensor<1xbf16>) -> tensor<1x1x1x4xbf16>
  %s0 = graph.strided_matmul %q, %q {alpha = 2.500000e-01 : f64, graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 4, 16>, lhs_strides = array<i64: 128, 64, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 16, 4>, rhs_strides = array<i64: 128, 64, 1, 16>, shape = array<i64: 1, 2, 4, 4>} : (tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16>) -> tensor<1x2x4x4xbf16>
  %p0 = graph.softmax %s0, %m0 {axis = 3 : i64, graph.device = 0 : i64, nan_to_zero = true} : (tensor<1x2x4x4xbf16>, tensor<1x1x4x4xbf16>) -> tensor<1x2x4x4xbf16>
  %o0 = graph.strided_matmul %p0, %q {graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 4, 4>, lhs_strides = array<i64: 32, 16, 4, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 4, 16>, rhs_strides = array<i64: 128, 64, 16, 1>, shape = array<i64: 1, 2, 4, 16>} : (tensor<1x2x4x4xbf16>, tensor<1x2x4x16xbf16>) -> tensor<1x2x4x16xbf16>
  %s1 = graph.strided_matmul %q, %q {alpha = 2.500000e-01 : f64, graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 4, 16>, lhs_strides = array<i64: 128, 64, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 16, 4>, rhs_strides = array<i64: 128, 64, 1, 16>, shape = array<i64: 1, 2, 4, 4>} : (tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16>) -> tensor<1x2x4x4xbf16>
  %p1 = graph.softmax %s1, %folded {axis = 3 : i64, graph.device = 0 : i64, nan_to_zero = true} : (tensor<1x2x4x4xbf16>, tensor<1x1x4x4xbf16>) -> tensor<1x2x4x4xbf16>
  %o1 = graph.strided_matmul %p1, %q {graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 4, 4>, lhs_strides = array<i64: 32, 16, 4, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 4, 16>, rhs_strides = array<i64: 128, 64, 16, 1>, shape = array<i64: 1, 2, 4, 16>} : (tensor<1x2x4x4xbf16>, tensor<1x2x4x16xbf16>) -> tensor<1x2x4x16xbf16>
  %s2 = graph.strided_matmul %q, %q {alpha = 2.500000e-01 : f64, graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 4, 16>, lhs_strides = array<i64: 128, 64, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 16, 4>, rhs_strides = array<i64: 128, 64, 1, 16>, shape = array<i64: 1, 2, 4, 4>} : (tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16>) -> tensor<1x2x4x4xbf16>
  %p2 = graph.softmax %s2, %m2 {axis = 3 : i64, graph.device = 0 : i64, nan_to_zero = true} : (tensor<1x2x4x4xbf16>, tensor<1x1x4x4xbf16>) -> tensor<1x2x4x4xbf16>
  %o2 = graph.strided_matmul %p2, %q {graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 4, 4>, lhs_strides = array<i64: 32, 16, 4, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 4, 16>, rhs_strides = array<i64: 128, 64, 16, 1>, shape = array<i64: 1, 2, 4, 16>} : (tensor<1x2x4x4xbf16>, tensor<1x2x4x16xbf16>) -> tensor<1x2x4x16xbf16>
  %s3 = graph.strided_matmul %q, %q {alpha = 2.500000e-01 : f64, graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 4, 16>, lhs_strides = array<i64: 128, 64, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 16, 4>, rhs_strides = array<i64: 128, 64, 1, 16>, shape = array<i64: 1, 2, 4, 4>} : (tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16>) -> tensor<1x2x4x4xbf16>
  %p3 = graph.softmax %s3, %m3 {axis = 3 : i64, graph.device = 0 : i64, nan_to_zero = true} : (tensor<1x2x4x4xbf16>, tensor<1x1x1x4xbf16>) -> tensor<1x2x4x4xbf16>
  %o3 = graph.strided_matmul %p3, %q {graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 4, 4>, lhs_strides = array<i64: 32, 16, 4, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 4, 16>, rhs_strides = array<i64: 128, 64, 16, 1>, shape = array<i64: 1, 2, 4, 16>} : (tensor<1x2x4x4xbf16>, tensor<1x2x4x16xbf16>) -> tensor<1x2x4x16xbf16>
  return %o0, %o1, %o2, %o3 : tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16>
}

// -----

// Tests a decoder's mask without padding, where(lower triangle, 0, -inf)
// computed from a constant condition: the fused op is causal, reads no
// mask, and the mask's ops are erased.
// CHECK-LABEL: func @causal_only
func.func @causal_only(%q: tensor<1x2x4x16xbf16>) -> tensor<1x2x4x16xbf16> {
  // CHECK-NOT: graph.where
  // CHECK: graph.attention %arg0, %arg0, %arg0 {causal = true
  // CHECK-NOT: graph.where
  %tril = graph.constant {value = dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>} : () -> tensor<4x4xi1>
  %zero = graph.constant {value = dense<0.000000e+00> : tensor<1xbf16>} : () -> tensor<1xbf16>
  %ninf = graph.constant {value = dense<0xFF80> : tensor<1xbf16>} : () -> tensor<1xbf16>
  %m = graph.where %tril, %zero, %ninf {graph.device = 0 : i64} : (tensor<4x4xi1>, tensor<1xbf16>, tensor<1xbf16>) -> tensor<4x4xbf16>
  %s = graph.strided_matmul %q, %q {alpha = 2.500000e-01 : f64, graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 4, 16>, lhs_strides = array<i64: 128, 64, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 16, 4>, rhs_strides = array<i64: 128, 64, 1, 16>, shape = array<i64: 1, 2, 4, 4>} : (tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16>) -> tensor<1x2x4x4xbf16>
  %p = graph.softmax %s, %m {axis = 3 : i64, graph.device = 0 : i64, nan_to_zero = true} : (tensor<1x2x4x4xbf16>, tensor<4x4xbf16>) -> tensor<1x2x4x4xbf16>
  %o = graph.strided_matmul %p, %q {graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 2, 4, 4>, lhs_strides = array<i64: 32, 16, 4, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 2, 4, 16>, rhs_strides = array<i64: 128, 64, 16, 1>, shape = array<i64: 1, 2, 4, 16>} : (tensor<1x2x4x4xbf16>, tensor<1x2x4x16xbf16>) -> tensor<1x2x4x16xbf16>
  return %o : tensor<1x2x4x16xbf16>
}

// -----

// Tests a mask from a splat condition of 2^40 elements: proved causal
// (false everywhere) without walking them, and kept as it is.
// CHECK-LABEL: func @huge_splat_mask
func.func @huge_splat_mask(%q: tensor<1x1x1048576x16xbf16>) -> tensor<1x1x1048576x16xbf16> {
  // CHECK: %[[M:.*]] = graph.where
  // CHECK: graph.attention %arg0, %arg0, %arg0, %[[M]] {causal = true
  %none = graph.constant {value = dense<false> : tensor<1048576x1048576xi1>} : () -> tensor<1048576x1048576xi1>
  %zero = graph.constant {value = dense<0.000000e+00> : tensor<1xbf16>} : () -> tensor<1xbf16>
  %ninf = graph.constant {value = dense<0xFF80> : tensor<1xbf16>} : () -> tensor<1xbf16>
  %m = graph.where %none, %zero, %ninf {graph.device = 0 : i64} : (tensor<1048576x1048576xi1>, tensor<1xbf16>, tensor<1xbf16>) -> tensor<1048576x1048576xbf16>
  %s = graph.strided_matmul %q, %q {alpha = 2.500000e-01 : f64, graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 1, 1048576, 16>, lhs_strides = array<i64: 16777216, 16777216, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 1, 16, 1048576>, rhs_strides = array<i64: 16777216, 16777216, 1, 16>, shape = array<i64: 1, 1, 1048576, 1048576>} : (tensor<1x1x1048576x16xbf16>, tensor<1x1x1048576x16xbf16>) -> tensor<1x1x1048576x1048576xbf16>
  %p = graph.softmax %s, %m {axis = 3 : i64, graph.device = 0 : i64, nan_to_zero = true} : (tensor<1x1x1048576x1048576xbf16>, tensor<1048576x1048576xbf16>) -> tensor<1x1x1048576x1048576xbf16>
  %o = graph.strided_matmul %p, %q {graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 1, 1, 1048576, 1048576>, lhs_strides = array<i64: 1099511627776, 1099511627776, 1048576, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 1, 1, 1048576, 16>, rhs_strides = array<i64: 16777216, 16777216, 16, 1>, shape = array<i64: 1, 1, 1048576, 16>} : (tensor<1x1x1048576x1048576xbf16>, tensor<1x1x1048576x16xbf16>) -> tensor<1x1x1048576x16xbf16>
  return %o : tensor<1x1x1048576x16xbf16>
}

// -----

// Tests Hugging Face's BERT mask (transformers 5): the padding mask
// [B, 1, 1, N] and-ed with an all-true [1, 1, M, 1], expanded to
// [B, 1, M, N] and turned into 0 / -inf in each layer. The fused op reads
// the same mask at [B, 1, 1, N] (where and cast rebuilt there, on the
// layer's device); the full-size chain, left unused, is erased.
// CHECK-LABEL: func @padding_expanded
func.func @padding_expanded(%q: tensor<2x2x4x16xbf16>, %pad: tensor<2x1x1x4xi1>) -> tensor<2x2x4x16xbf16> {
  // CHECK-DAG: %[[ZERO:.*]] = graph.constant {value = dense<0.000000e+00> : tensor<1xf32>}
  // CHECK-DAG: %[[INF:.*]] = graph.constant {value = dense<0xFF800000> : tensor<1xf32>}
  // CHECK-NOT: graph.and
  // CHECK-NOT: graph.expand
  // CHECK: %[[W:.*]] = graph.where %arg1, %[[ZERO]], %[[INF]] {graph.device = 1 : i64} : (tensor<2x1x1x4xi1>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x1x4xf32>
  // CHECK: %[[C:.*]] = graph.cast %[[W]] {graph.device = 1 : i64, to = bf16} : (tensor<2x1x1x4xf32>) -> tensor<2x1x1x4xbf16>
  // CHECK: graph.attention %arg0, %arg0, %arg0, %[[C]]
  // CHECK-NOT: tensor<2x1x4x4
  %true = graph.constant {value = dense<true> : tensor<1x1x4x1xi1>} : () -> tensor<1x1x4x1xi1>
  %both = graph.and %true, %pad : (tensor<1x1x4x1xi1>, tensor<2x1x1x4xi1>) -> tensor<2x1x4x4xi1>
  %full = graph.expand %both {shape = array<i64: 2, 1, 4, 4>} : (tensor<2x1x4x4xi1>) -> tensor<2x1x4x4xi1>
  %zero = graph.constant {value = dense<0.000000e+00> : tensor<1xf32>} : () -> tensor<1xf32>
  %inf = graph.constant {value = dense<0xFF800000> : tensor<1xf32>} : () -> tensor<1xf32>
  %bias32 = graph.where %full, %zero, %inf {graph.device = 1 : i64} : (tensor<2x1x4x4xi1>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x4x4xf32>
  %bias = graph.cast %bias32 {graph.device = 1 : i64, to = bf16} : (tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xbf16>
  %s = graph.strided_matmul %q, %q {alpha = 2.500000e-01 : f64, graph.device = 1 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 4, 16>, lhs_strides = array<i64: 128, 64, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 16, 4>, rhs_strides = array<i64: 128, 64, 1, 16>, shape = array<i64: 2, 2, 4, 4>} : (tensor<2x2x4x16xbf16>, tensor<2x2x4x16xbf16>) -> tensor<2x2x4x4xbf16>
  %p = graph.softmax %s, %bias {axis = 3 : i64, graph.device = 1 : i64} : (tensor<2x2x4x4xbf16>, tensor<2x1x4x4xbf16>) -> tensor<2x2x4x4xbf16>
  %o = graph.strided_matmul %p, %q {graph.device = 1 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 4, 4>, lhs_strides = array<i64: 32, 16, 4, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 4, 16>, rhs_strides = array<i64: 128, 64, 16, 1>, shape = array<i64: 2, 2, 4, 16>} : (tensor<2x2x4x4xbf16>, tensor<2x2x4x16xbf16>) -> tensor<2x2x4x16xbf16>
  return %o : tensor<2x2x4x16xbf16>
}

// -----

// Tests two layers reading one expanded mask: the narrowed mask is built
// once, before the first, and both fused ops read it.
// CHECK-LABEL: func @two_layers_one_mask
func.func @two_layers_one_mask(%q: tensor<2x2x4x16xbf16>, %pad: tensor<2x1x1x4xi1>) -> tensor<2x2x4x16xbf16> {
  // CHECK: %[[W:.*]] = graph.where %arg1
  // CHECK-NOT: graph.where
  // CHECK: %[[A:.*]] = graph.attention %arg0, %arg0, %arg0, %[[W]]
  // CHECK-NOT: graph.where
  // CHECK: graph.attention %[[A]], %[[A]], %[[A]], %[[W]]
  %true = graph.constant {value = dense<true> : tensor<1x1x4x1xi1>} : () -> tensor<1x1x4x1xi1>
  %both = graph.and %true, %pad : (tensor<1x1x4x1xi1>, tensor<2x1x1x4xi1>) -> tensor<2x1x4x4xi1>
  %zero = graph.constant {value = dense<0.000000e+00> : tensor<1xbf16>} : () -> tensor<1xbf16>
  %inf = graph.constant {value = dense<0xFF80> : tensor<1xbf16>} : () -> tensor<1xbf16>
  %bias = graph.where %both, %zero, %inf {graph.device = 0 : i64} : (tensor<2x1x4x4xi1>, tensor<1xbf16>, tensor<1xbf16>) -> tensor<2x1x4x4xbf16>
  %s0 = graph.strided_matmul %q, %q {alpha = 2.500000e-01 : f64, graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 4, 16>, lhs_strides = array<i64: 128, 64, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 16, 4>, rhs_strides = array<i64: 128, 64, 1, 16>, shape = array<i64: 2, 2, 4, 4>} : (tensor<2x2x4x16xbf16>, tensor<2x2x4x16xbf16>) -> tensor<2x2x4x4xbf16>
  %p0 = graph.softmax %s0, %bias {axis = 3 : i64, graph.device = 0 : i64} : (tensor<2x2x4x4xbf16>, tensor<2x1x4x4xbf16>) -> tensor<2x2x4x4xbf16>
  %o0 = graph.strided_matmul %p0, %q {graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 4, 4>, lhs_strides = array<i64: 32, 16, 4, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 4, 16>, rhs_strides = array<i64: 128, 64, 16, 1>, shape = array<i64: 2, 2, 4, 16>} : (tensor<2x2x4x4xbf16>, tensor<2x2x4x16xbf16>) -> tensor<2x2x4x16xbf16>
  %s1 = graph.strided_matmul %o0, %o0 {alpha = 2.500000e-01 : f64, graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 4, 16>, lhs_strides = array<i64: 128, 64, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 16, 4>, rhs_strides = array<i64: 128, 64, 1, 16>, shape = array<i64: 2, 2, 4, 4>} : (tensor<2x2x4x16xbf16>, tensor<2x2x4x16xbf16>) -> tensor<2x2x4x4xbf16>
  %p1 = graph.softmax %s1, %bias {axis = 3 : i64, graph.device = 0 : i64} : (tensor<2x2x4x4xbf16>, tensor<2x1x4x4xbf16>) -> tensor<2x2x4x4xbf16>
  %o1 = graph.strided_matmul %p1, %o0 {graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 4, 4>, lhs_strides = array<i64: 32, 16, 4, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 4, 16>, rhs_strides = array<i64: 128, 64, 16, 1>, shape = array<i64: 2, 2, 4, 16>} : (tensor<2x2x4x4xbf16>, tensor<2x2x4x16xbf16>) -> tensor<2x2x4x16xbf16>
  return %o1 : tensor<2x2x4x16xbf16>
}

// -----

// Tests a bias that holds a different value for each query (the condition
// varies along them): nothing narrower is built, and the cast made for a
// narrower branch is dropped again.
// CHECK-LABEL: func @not_narrower
func.func @not_narrower(%q: tensor<2x2x4x16xbf16>, %keep: tensor<2x1x4x4xi1>, %small: tensor<2x1x1x4xf32>) -> tensor<2x2x4x16xbf16> {
  // CHECK-NOT: tensor<2x1x1x4xbf16>
  // CHECK: %[[B:.*]] = graph.where %arg1
  // CHECK-SAME: -> tensor<2x1x4x4xbf16>
  // CHECK: graph.attention %arg0, %arg0, %arg0, %[[B]]
  // CHECK-NOT: tensor<2x1x1x4xbf16>
  %full = graph.expand %small {shape = array<i64: 2, 1, 4, 4>} : (tensor<2x1x1x4xf32>) -> tensor<2x1x4x4xf32>
  %x = graph.cast %full {graph.device = 0 : i64, to = bf16} : (tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xbf16>
  %inf = graph.constant {value = dense<0xFF80> : tensor<1xbf16>} : () -> tensor<1xbf16>
  %bias = graph.where %keep, %x, %inf {graph.device = 0 : i64} : (tensor<2x1x4x4xi1>, tensor<2x1x4x4xbf16>, tensor<1xbf16>) -> tensor<2x1x4x4xbf16>
  %s = graph.strided_matmul %q, %q {alpha = 2.500000e-01 : f64, graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 4, 16>, lhs_strides = array<i64: 128, 64, 16, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 16, 4>, rhs_strides = array<i64: 128, 64, 1, 16>, shape = array<i64: 2, 2, 4, 4>} : (tensor<2x2x4x16xbf16>, tensor<2x2x4x16xbf16>) -> tensor<2x2x4x4xbf16>
  %p = graph.softmax %s, %bias {axis = 3 : i64, graph.device = 0 : i64} : (tensor<2x2x4x4xbf16>, tensor<2x1x4x4xbf16>) -> tensor<2x2x4x4xbf16>
  %o = graph.strided_matmul %p, %q {graph.device = 0 : i64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 4, 4>, lhs_strides = array<i64: 32, 16, 4, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 4, 16>, rhs_strides = array<i64: 128, 64, 16, 1>, shape = array<i64: 2, 2, 4, 16>} : (tensor<2x2x4x4xbf16>, tensor<2x2x4x16xbf16>) -> tensor<2x2x4x16xbf16>
  return %o : tensor<2x2x4x16xbf16>
}
