// RUN: not partc-opt %s --partc-pad-matmul-columns="multiple=0" 2>&1 | FileCheck %s

// Tests that a multiple below 1 is refused with the value.
// CHECK: error: multiple is 0; column counts are padded to a multiple of at least 1
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x1030xf32>) -> tensor<4x1030xf32> {
  %y = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x1030xf32>) -> tensor<4x1030xf32>
  return %y : tensor<4x1030xf32>
}
