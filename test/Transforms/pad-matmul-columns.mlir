// RUN: partc-opt %s --partc-pad-matmul-columns --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-pad-matmul-columns="min-columns=16 multiple=8" --split-input-file | FileCheck %s --check-prefix=SMALL

// Tests that a tied LM head (the hidden states times the transposed
// embedding of 1030 rows) pads the embedding's rows to 1056, keeps the
// transpose a transpose for partc-fold-matmul-views, and slices the logits
// back to 1030 columns.
// CHECK-LABEL: func @tied_head
// CHECK: %[[P:.*]] = graph.pad %arg1 {pads = array<i64: 0, 0, 26, 0>} : (tensor<1030x8xf32>) -> tensor<1056x8xf32>
// CHECK-NEXT: %[[T:.*]] = graph.transpose %[[P]] {perm = array<i64: 1, 0>} : (tensor<1056x8xf32>) -> tensor<8x1056xf32>
// CHECK-NEXT: %[[M:.*]] = graph.matmul %arg0, %[[T]] : (tensor<2x3x8xf32>, tensor<8x1056xf32>) -> tensor<2x3x1056xf32>
// CHECK-NEXT: %[[S:.*]] = graph.slice %[[M]] {ends = array<i64: 2, 3, 1030>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>}
// CHECK-NEXT: return %[[S]]
func.func @tied_head(%h: tensor<2x3x8xf32>, %w: tensor<1030x8xf32>) -> tensor<2x3x1030xf32> {
  %t = graph.transpose %w {perm = array<i64: 1, 0>} : (tensor<1030x8xf32>) -> tensor<8x1030xf32>
  %y = graph.matmul %h, %t : (tensor<2x3x8xf32>, tensor<8x1030xf32>) -> tensor<2x3x1030xf32>
  return %y : tensor<2x3x1030xf32>
}

// -----

// Tests that a matrix used as it is gets zero columns, placed where the
// product was.
// CHECK-LABEL: func @plain
// CHECK: %[[P:.*]] = graph.pad %arg1 {graph.device = 1 : i64, pads = array<i64: 0, 0, 0, 26>} : (tensor<8x1030xf32>) -> tensor<8x1056xf32>
// CHECK-NEXT: graph.matmul %arg0, %[[P]] {graph.device = 1 : i64} : (tensor<4x8xf32>, tensor<8x1056xf32>) -> tensor<4x1056xf32>
// CHECK-NEXT: graph.slice {{.*}}graph.device = 1 : i64
func.func @plain(%x: tensor<4x8xf32>, %w: tensor<8x1030xf32>) -> tensor<4x1030xf32> {
  %y = graph.matmul %x, %w {graph.device = 1 : i64} : (tensor<4x8xf32>, tensor<8x1030xf32>) -> tensor<4x1030xf32>
  return %y : tensor<4x1030xf32>
}

// -----

// Tests that aligned, narrow and batched-matrix products are left alone by
// default, and that the options widen what is padded: 20 columns to 24.
// CHECK-LABEL: func @left_alone
// CHECK-NOT: graph.pad
// CHECK: return
// SMALL-LABEL: func @left_alone
// SMALL: graph.pad %arg2 {pads = array<i64: 0, 0, 0, 4>} : (tensor<8x20xf32>) -> tensor<8x24xf32>
// SMALL-NOT: graph.pad
// SMALL: return
func.func @left_alone(%x: tensor<4x8xf32>, %a: tensor<8x1024xf32>, %b: tensor<8x20xf32>, %c: tensor<2x8x1030xf32>) -> (tensor<4x1024xf32>, tensor<4x20xf32>, tensor<2x4x1030xf32>) {
  %ya = graph.matmul %x, %a : (tensor<4x8xf32>, tensor<8x1024xf32>) -> tensor<4x1024xf32>
  %yb = graph.matmul %x, %b : (tensor<4x8xf32>, tensor<8x20xf32>) -> tensor<4x20xf32>
  %yc = graph.matmul %x, %c : (tensor<4x8xf32>, tensor<2x8x1030xf32>) -> tensor<2x4x1030xf32>
  return %ya, %yb, %yc : tensor<4x1024xf32>, tensor<4x20xf32>, tensor<2x4x1030xf32>
}
