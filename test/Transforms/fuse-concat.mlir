// RUN: partc-opt %s --partc-fuse-concat --split-input-file | FileCheck %s

// Tests that a concatenation along the last axis read by one chain (a
// DenseNet layer's batch norm and ReLU, channels last) becomes the chain's
// concat_parts: the parts lead the operands, program input 0 stands for
// them, and the chain's other operands are renumbered after it.
// CHECK-LABEL: func @densenet_layer
func.func @densenet_layer(%a: tensor<2x4x4x64xf32>, %b: tensor<2x4x4x32xf32>,
                          %c: tensor<2x4x4x32xf32>, %scale: tensor<128xf32>,
                          %shift: tensor<128xf32>) -> tensor<2x4x4x128xf32> {
  // CHECK-NOT: graph.concat
  // CHECK: %[[Y:.*]] = graph.fused_elementwise %arg0, %arg1, %arg2, %arg3, %arg4
  // CHECK-SAME: args = array<i64: 0, 1, -1, 2, -2>
  // CHECK-SAME: concat_parts = 3 : i64
  // CHECK-SAME: graph.device = 0 : i64
  // CHECK-SAME: steps = ["mul", "add", "relu"]
  // CHECK: return %[[Y]]
  %x = graph.concat %a, %b, %c {axis = 3 : i64, graph.device = 0 : i64} : (tensor<2x4x4x64xf32>, tensor<2x4x4x32xf32>, tensor<2x4x4x32xf32>) -> tensor<2x4x4x128xf32>
  %y = graph.fused_elementwise %x, %scale, %shift {args = array<i64: 0, 1, -1, 2, -2>, graph.device = 0 : i64, steps = ["mul", "add", "relu"]} : (tensor<2x4x4x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<2x4x4x128xf32>
  return %y : tensor<2x4x4x128xf32>
}

// -----

// Tests that the concatenation need not be the chain's first operand and
// may be read twice; bf16 too.
// CHECK-LABEL: func @second_operand_twice
func.func @second_operand_twice(%s: tensor<6xbf16>, %a: tensor<3x2xbf16>,
                                %b: tensor<3x4xbf16>) -> tensor<3x6xbf16> {
  // CHECK: graph.fused_elementwise %arg1, %arg2, %arg0
  // CHECK-SAME: args = array<i64: 1, 0, -1, 0>
  // CHECK-SAME: concat_parts = 2
  %x = graph.concat %a, %b {axis = 1 : i64} : (tensor<3x2xbf16>, tensor<3x4xbf16>) -> tensor<3x6xbf16>
  %y = graph.fused_elementwise %s, %x {args = array<i64: 0, 1, -1, 1>, steps = ["mul", "add"]} : (tensor<6xbf16>, tensor<3x6xbf16>) -> tensor<3x6xbf16>
  return %y : tensor<3x6xbf16>
}

// -----

// Tests what stays: a concatenation with another user (its result is
// needed anyway), along another axis (the parts would not be rows), that
// the chain broadcasts (not read at the result's shape), or on another
// device than its chain.
// CHECK-LABEL: func @kept
func.func @kept(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %r: tensor<2x1x6xf32>)
    -> (tensor<2x6xf32>, tensor<2x6xf32>, tensor<4x3xf32>, tensor<2x2x6xf32>, tensor<2x6xf32>) {
  // CHECK: %[[SHARED:.*]] = graph.concat %arg0, %arg1 {axis = 1
  // CHECK: graph.fused_elementwise %[[SHARED]] {
  // CHECK-NOT: concat_parts
  %shared = graph.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  %y0 = graph.fused_elementwise %shared {args = array<i64: 0, -1>, steps = ["relu", "neg"]} : (tensor<2x6xf32>) -> tensor<2x6xf32>
  // CHECK: %[[ROWS:.*]] = graph.concat %arg0, %arg1 {axis = 0
  // CHECK: graph.fused_elementwise %[[ROWS]] {
  %rows = graph.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %y1 = graph.fused_elementwise %rows {args = array<i64: 0, -1>, steps = ["relu", "neg"]} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  // CHECK: %[[BCAST:.*]] = graph.concat %arg0, %arg1 {axis = 1
  // CHECK: graph.fused_elementwise %[[BCAST]], %arg2 {
  %bcast = graph.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  %y2 = graph.fused_elementwise %bcast, %r {args = array<i64: 0, 1>, steps = ["add"]} : (tensor<2x6xf32>, tensor<2x1x6xf32>) -> tensor<2x2x6xf32>
  // CHECK: %[[MOVED:.*]] = graph.concat %arg0, %arg1 {axis = 1 : i64, graph.device = 1
  // CHECK: graph.fused_elementwise %[[MOVED]] {
  %moved = graph.concat %a, %b {axis = 1 : i64, graph.device = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  %y3 = graph.fused_elementwise %moved {args = array<i64: 0>, graph.device = 0 : i64, steps = ["relu"]} : (tensor<2x6xf32>) -> tensor<2x6xf32>
  return %y0, %shared, %y1, %y2, %y3 : tensor<2x6xf32>, tensor<2x6xf32>, tensor<4x3xf32>, tensor<2x2x6xf32>, tensor<2x6xf32>
}
