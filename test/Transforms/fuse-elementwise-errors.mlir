// RUN: partc-opt %s --partc-fuse-elementwise --split-input-file --verify-diagnostics

// Tests that a fused chain must read each of its inputs.
func.func @unread(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'graph.fused_elementwise' op has an invalid program: input 1 is never read; args lists each step's operands (k >= 0: operand k, k < 0: step -k-1)}}
  %a = graph.fused_elementwise %x, %y {steps = ["neg", "exp"], args = array<i64: 0, -1>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// Tests that a step may only read steps before it.
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{has an invalid program: step 0 (add) reads step 1, which does not precede it}}
  %a = graph.fused_elementwise %x {steps = ["add", "neg"], args = array<i64: 0, -2, -1>} : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// Tests that an unknown step is named.
func.func @unknown(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{has an invalid program: unknown fused step 'softmax'}}
  %a = graph.fused_elementwise %x {steps = ["softmax"], args = array<i64: 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// Tests that only f32 chains are fused.
func.func @integer(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error@+2 {{fuses f32 (or all bf16, or all f16) tensors only}}
  // expected-error@+1 {{failed to infer returned types}}
  %a = graph.fused_elementwise %x {steps = ["neg"], args = array<i64: 0>} : (tensor<4xi32>) -> tensor<4xi32>
  return %a : tensor<4xi32>
}

// -----

// Tests that a step's parameters must be given: their defaults live in the
// ops' definitions, which the chain no longer names.
func.func @missing_params(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'graph.fused_elementwise' op has an invalid program: step 1 (selu) lacks its parameter 'gamma' in 'params'}}
  %a = graph.fused_elementwise %x {steps = ["neg", "selu"], args = array<i64: 0, -1>, params = array<f64: 1.5>} : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// Tests that every parameter given is read by a step.
func.func @extra_params(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'params' holds 2 values but the steps take 1}}
  %a = graph.fused_elementwise %x {steps = ["neg", "leaky_relu"], args = array<i64: 0, -1>, params = array<f64: 0.1, 0.2>} : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}
