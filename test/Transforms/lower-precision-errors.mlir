// RUN: not partc-opt %s --partc-lower-precision="precision=int8" 2>&1 | FileCheck %s

// Tests that an unknown type is refused with the value and the choices.
// CHECK: error: precision is 'int8'; expected bf16 or fp16
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = graph.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
