// RUN: partc-opt %s --partc-fuse-concat --split-input-file --verify-diagnostics

// Tests that concat_parts is checked: it counts leading operands.
func.func @too_many_parts(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error@+1 {{has concat_parts = 2 with 1 operands; it counts the leading operands concatenated into the program's input 0, from 1 to 64}}
  %y = graph.fused_elementwise %a {args = array<i64: 0>, concat_parts = 2 : i64, steps = ["relu"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Tests that parts must agree outside the last axis.
func.func @ragged_parts(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) -> tensor<2x6xf32> {
  // expected-error@+2 {{concatenated part [3,3] differs from [2,3] outside the last axis}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = graph.fused_elementwise %a, %b {args = array<i64: 0>, concat_parts = 2 : i64, steps = ["relu"]} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return %y : tensor<2x6xf32>
}

// -----

// Tests that the concatenation must have the result's shape: the GPU walks
// it part by part and writes each element where it lies in the result.
func.func @broadcast_concatenation(%a: tensor<1x3xf32>, %b: tensor<1x3xf32>, %r: tensor<4x1xf32>) -> tensor<4x6xf32> {
  // expected-error@+2 {{the other operands broadcast the concatenation [1,6] to [4,6]; it must have the result's shape}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = graph.fused_elementwise %a, %b, %r {args = array<i64: 0, 1>, concat_parts = 2 : i64, steps = ["add"]} : (tensor<1x3xf32>, tensor<1x3xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

// Tests that the program counts the parts as one input.
func.func @program_reads_parts(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x6xf32> {
  // expected-error@+1 {{has an invalid program}}
  %y = graph.fused_elementwise %a, %b {args = array<i64: 0, 1>, concat_parts = 2 : i64, steps = ["add"]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return %y : tensor<2x6xf32>
}
