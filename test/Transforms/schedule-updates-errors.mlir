// RUN: partc-opt %s --partc-schedule-updates --split-input-file --verify-diagnostics

// Tests that an op reading a parameter after its update in the same step
// (it would see the new value) is refused with both places named.
func.func @read_after_update(%g: tensor<6xf32>, %x: tensor<6xf32>) -> tensor<6xf32> {
  %w = graph.variable {name = "w", role = "parameter", value = dense<0.5> : tensor<6xf32>} : tensor<6xf32>
  // expected-error@+1 {{'graph.sgd_update' op writes operand 0 before 'graph.mul' reads it in the same step; hint: an update follows every reader of what it writes (partc-apply-optimizer puts updates last)}}
  graph.sgd_update %w, %g {lr = 0.1 : f64} : tensor<6xf32>, tensor<6xf32>
  // expected-note@+1 {{read here}}
  %y = graph.mul %w, %x : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  return %y : tensor<6xf32>
}

// -----

// Tests that a reader through a view counts as a reader.
func.func @read_view_after_update(%g: tensor<6xf32>, %x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %w = graph.variable {name = "w", role = "parameter", value = dense<0.5> : tensor<6xf32>} : tensor<6xf32>
  %r = graph.reshape %w {shape = array<i64: 2, 3>} : (tensor<6xf32>) -> tensor<2x3xf32>
  // expected-error@+1 {{writes operand 0 before 'graph.add' reads it in the same step}}
  graph.sgd_update %w, %g {lr = 0.1 : f64} : tensor<6xf32>, tensor<6xf32>
  // expected-note@+1 {{read here}}
  %y = graph.add %r, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
