// RUN: partc-opt %s --partc-apply-optimizer --split-input-file --verify-diagnostics

// Tests that a function without gradients has nothing to optimize.
// expected-error@+1 {{@main returns no gradients; run partc-differentiate first}}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Tests that an update must write a graph.variable.
func.func @main(%p: tensor<4xf32>, %g: tensor<4xf32>) {
  // expected-error@+1 {{updates operand 0 in place, so it must be a graph.variable}}
  graph.sgd_update %p, %g {lr = 0.1 : f64} : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that momentum needs its buffer.
func.func @main(%g: tensor<4xf32>) {
  %p = graph.variable {name = "p", role = "parameter"} : tensor<4xf32>
  // expected-error@+1 {{has momentum 9.000000e-01 but no momentum buffer; it needs one exactly when momentum is not 0}}
  graph.sgd_update %p, %g {lr = 0.1 : f64, momentum = 0.9 : f64} : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that AdamW's step counter is an int64 scalar.
func.func @main(%g: tensor<4xf32>) {
  %p = graph.variable {name = "p", role = "parameter"} : tensor<4xf32>
  %m = graph.variable {name = "p.adam_m", role = "adam_m"} : tensor<4xf32>
  %v = graph.variable {name = "p.adam_v", role = "adam_v"} : tensor<4xf32>
  %s = graph.variable {name = "step", role = "step"} : tensor<f32>
  // expected-error@+1 {{counts steps in 'tensor<f32>'; the step counter is tensor<i64>}}
  graph.adamw_update %p, %g, %m, %v, %s {lr = 0.1 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
  return
}

// -----

// Tests that a variable's initial value has its type.
func.func @main() {
  // expected-error@+1 {{'w' of type 'tensor<4xf32>' is initialized with a value of type 'tensor<2xf32>'}}
  %p = graph.variable {name = "w", role = "parameter", value = dense<1.0> : tensor<2xf32>} : tensor<4xf32>
  return
}
