// RUN: partc-opt %s --partc-merge-projections --split-input-file | FileCheck %s

// Tests that BERT's query, key and value projections (one input, a bias
// each, read only through the heads' views) become one product with the
// weights side by side, and that each view moves to its column offset
// with the row stride scaled to the merged width.
// CHECK-LABEL: func @qkv
func.func @qkv(%x: tensor<2x8x32xf32>) -> tensor<2x2x8x16xf32> {
  // CHECK: %[[W:.*]] = graph.constant {value = dense<{{.*}}> : tensor<32x96xf32>}
  // CHECK: %[[B:.*]] = graph.constant {value = dense<{{.*}}> : tensor<96xf32>}
  // CHECK: %[[P:.*]] = graph.matmul %arg0, %[[W]], %[[B]] : (tensor<2x8x32xf32>, tensor<32x96xf32>, tensor<96xf32>) -> tensor<2x8x96xf32>
  // CHECK: graph.strided_matmul %[[P]], %[[P]] {alpha = 2.500000e-01 : f64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 8, 16>, lhs_strides = array<i64: 768, 16, 96, 1>
  // CHECK-SAME: rhs_offset = 32 : i64, rhs_shape = array<i64: 2, 2, 16, 8>, rhs_strides = array<i64: 768, 16, 1, 96>
  // CHECK: graph.strided_matmul %{{.*}}, %[[P]]
  // CHECK-SAME: rhs_offset = 64 : i64, rhs_shape = array<i64: 2, 2, 8, 16>, rhs_strides = array<i64: 768, 16, 96, 1>
  // CHECK-NOT: graph.matmul
  %wq = graph.constant {value = dense<1.000000e+00> : tensor<32x32xf32>} : () -> tensor<32x32xf32>
  %wk = graph.constant {value = dense<2.000000e+00> : tensor<32x32xf32>} : () -> tensor<32x32xf32>
  %wv = graph.constant {value = dense<3.000000e+00> : tensor<32x32xf32>} : () -> tensor<32x32xf32>
  %bq = graph.constant {value = dense<1.000000e+00> : tensor<32xf32>} : () -> tensor<32xf32>
  %bk = graph.constant {value = dense<2.000000e+00> : tensor<32xf32>} : () -> tensor<32xf32>
  %bv = graph.constant {value = dense<3.000000e+00> : tensor<32xf32>} : () -> tensor<32xf32>
  %q = graph.matmul %x, %wq, %bq : (tensor<2x8x32xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %k = graph.matmul %x, %wk, %bk : (tensor<2x8x32xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %v = graph.matmul %x, %wv, %bv : (tensor<2x8x32xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %s = graph.strided_matmul %q, %k {alpha = 2.500000e-01 : f64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 8, 16>, lhs_strides = array<i64: 256, 16, 32, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 16, 8>, rhs_strides = array<i64: 256, 16, 1, 32>, shape = array<i64: 2, 2, 8, 8>} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x2x8x8xf32>
  %o = graph.strided_matmul %s, %v {lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 8, 8>, lhs_strides = array<i64: 128, 64, 8, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 8, 16>, rhs_strides = array<i64: 256, 16, 32, 1>, shape = array<i64: 2, 2, 8, 16>} : (tensor<2x2x8x8xf32>, tensor<2x8x32xf32>) -> tensor<2x2x8x16xf32>
  return %o : tensor<2x2x8x16xf32>
}

// -----

// Tests what stays apart: a value another op reads (the query and key
// still merge), and a product of another input.
// CHECK-LABEL: func @partial
func.func @partial(%x: tensor<2x8x32xf32>, %y: tensor<2x8x32xf32>) -> (tensor<2x2x8x16xf32>, tensor<2x8x32xf32>, tensor<2x2x8x8xf32>) {
  // CHECK: %[[P:.*]] = graph.matmul %arg0, %{{.*}} : (tensor<2x8x32xf32>, tensor<32x64xf32>) -> tensor<2x8x64xf32>
  // CHECK: %[[V:.*]] = graph.matmul %arg0, %{{.*}} : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  // CHECK: %[[Y:.*]] = graph.matmul %arg1, %{{.*}} : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  // CHECK: graph.strided_matmul %[[P]], %[[P]] {alpha = 2.500000e-01 : f64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 8, 16>, lhs_strides = array<i64: 512, 16, 64, 1>
  // CHECK-SAME: rhs_offset = 32 : i64, rhs_shape = array<i64: 2, 2, 16, 8>, rhs_strides = array<i64: 512, 16, 1, 64>
  // CHECK: graph.strided_matmul %{{.*}}, %[[V]]
  // CHECK: graph.add %[[V]], %[[V]]
  // CHECK: graph.strided_matmul %[[Y]], %[[Y]]
  %wq = graph.constant {value = dense<1.000000e+00> : tensor<32x32xf32>} : () -> tensor<32x32xf32>
  %wk = graph.constant {value = dense<2.000000e+00> : tensor<32x32xf32>} : () -> tensor<32x32xf32>
  %wv = graph.constant {value = dense<3.000000e+00> : tensor<32x32xf32>} : () -> tensor<32x32xf32>
  %bq = graph.constant {value = dense<1.000000e+00> : tensor<32xf32>} : () -> tensor<32xf32>
  %bk = graph.constant {value = dense<2.000000e+00> : tensor<32xf32>} : () -> tensor<32xf32>
  %bv = graph.constant {value = dense<3.000000e+00> : tensor<32xf32>} : () -> tensor<32xf32>
  %q = graph.matmul %x, %wq : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %k = graph.matmul %x, %wk : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %v = graph.matmul %x, %wv : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %yq = graph.matmul %y, %wq : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %s = graph.strided_matmul %q, %k {alpha = 2.500000e-01 : f64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 8, 16>, lhs_strides = array<i64: 256, 16, 32, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 16, 8>, rhs_strides = array<i64: 256, 16, 1, 32>, shape = array<i64: 2, 2, 8, 8>} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x2x8x8xf32>
  %o = graph.strided_matmul %s, %v {lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 8, 8>, lhs_strides = array<i64: 128, 64, 8, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 8, 16>, rhs_strides = array<i64: 256, 16, 32, 1>, shape = array<i64: 2, 2, 8, 16>} : (tensor<2x2x8x8xf32>, tensor<2x8x32xf32>) -> tensor<2x2x8x16xf32>
  %a = graph.add %v, %v : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %t = graph.strided_matmul %yq, %yq {alpha = 2.500000e-01 : f64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 2, 8, 16>, lhs_strides = array<i64: 256, 16, 32, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 0 : i64, rhs_shape = array<i64: 2, 2, 16, 8>, rhs_strides = array<i64: 256, 16, 1, 32>, shape = array<i64: 2, 2, 8, 8>} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x2x8x8xf32>
  return %o, %a, %t : tensor<2x2x8x16xf32>, tensor<2x8x32xf32>, tensor<2x2x8x8xf32>
}
