// RUN: partc-opt %s --partc-test-print-cost --verify-diagnostics

// Tests the FLOP estimates: 2*K per output element for contractions, one per
// element otherwise.
func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %m: tensor<2x5xf32>, %n: tensor<5x7xf32>) -> (tensor<1x4x6x6xf32>, tensor<2x7xf32>) {
  // expected-remark@+1 {{flops=7776 bytes=1776}}
  %c = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  // expected-remark@+1 {{flops=140 bytes=236}}
  %y = graph.matmul %m, %n : (tensor<2x5xf32>, tensor<5x7xf32>) -> tensor<2x7xf32>
  // expected-remark@+1 {{flops=144 bytes=1152}}
  %r = graph.relu %c : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  return %r, %y : tensor<1x4x6x6xf32>, tensor<2x7xf32>
}
