// RUN: partc-opt %s --partc-match-gelu --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-match-gelu="skip-initializers=true" --split-input-file | FileCheck %s --check-prefix=TRAIN

// Tests that an exported exact Gelu (div, erf, add, mul, mul), in either
// operand order, becomes graph.gelu and its scalars go.
// CHECK-LABEL: func @exact
func.func @exact(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %c2 = graph.constant {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
  %c1 = graph.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %ch = graph.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  // CHECK-NOT: graph.constant
  // CHECK: %[[G:.*]] = graph.gelu %arg0 :
  // CHECK-NOT: graph.erf
  // CHECK: return %[[G]]
  %d = graph.div %x, %c2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = graph.erf %d : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = graph.add %c1, %e : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %m = graph.mul %a, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = graph.mul %ch, %m : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Tests that GPT-2's gelu_new as the TorchScript exporter writes it (the
// cube a pow) becomes graph.gelu with approximate = "tanh", keeping the
// outer op's device.
// CHECK-LABEL: func @tanh_pow
func.func @tanh_pow(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %ch = graph.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %c3 = graph.constant {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %cc = graph.constant {value = dense<0.044715> : tensor<f32>} : () -> tensor<f32>
  %cs = graph.constant {value = dense<0.797884583> : tensor<f32>} : () -> tensor<f32>
  %c1 = graph.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  // CHECK-NOT: graph.constant
  // CHECK: %[[G:.*]] = graph.gelu %arg0 {approximate = "tanh", graph.device = 1 : i64}
  // CHECK-NOT: graph.tanh
  // CHECK-NOT: graph.pow
  // CHECK: return %[[G]]
  %h = graph.mul %x, %ch : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %p = graph.pow %x, %c3 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %q = graph.mul %cc, %p : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = graph.add %x, %q : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = graph.mul %cs, %s : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %t = graph.tanh %r : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = graph.add %t, %c1 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = graph.mul %h, %a {graph.device = 1 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Tests the dynamo exporter's form: the cube as x * x * x, the factors of
// the outer product and of the sum swapped.
// CHECK-LABEL: func @tanh_products
func.func @tanh_products(%x: tensor<4xf32>) -> tensor<4xf32> {
  %ch = graph.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %cc = graph.constant {value = dense<0.044715> : tensor<f32>} : () -> tensor<f32>
  %cs = graph.constant {value = dense<0.797884583> : tensor<f32>} : () -> tensor<f32>
  %c1 = graph.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  // CHECK: %[[G:.*]] = graph.gelu %arg0 {approximate = "tanh"}
  // CHECK-NEXT: return %[[G]]
  %h = graph.mul %ch, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %sq = graph.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %cu = graph.mul %sq, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %q = graph.mul %cu, %cc : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %s = graph.add %q, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = graph.mul %s, %cs : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %t = graph.tanh %r : (tensor<4xf32>) -> tensor<4xf32>
  %a = graph.add %c1, %t : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %y = graph.mul %a, %h : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests PyTorch's own tanh Gelu as torch 1.13 exports it below opset 20:
// the half applied last, 0.5 * (x * (1 + tanh(...))), the cube as
// x * (x * x).
// CHECK-LABEL: func @tanh_half_last
func.func @tanh_half_last(%x: tensor<4xf32>) -> tensor<4xf32> {
  %ch = graph.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %cc = graph.constant {value = dense<0.044715> : tensor<f32>} : () -> tensor<f32>
  %cs = graph.constant {value = dense<0.797884583> : tensor<f32>} : () -> tensor<f32>
  %c1 = graph.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  // CHECK: %[[G:.*]] = graph.gelu %arg0 {approximate = "tanh"}
  // CHECK-NEXT: return %[[G]]
  %sq = graph.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %cu = graph.mul %x, %sq : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %q = graph.mul %cc, %cu : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %s = graph.add %x, %q : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = graph.mul %cs, %s : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %t = graph.tanh %r : (tensor<4xf32>) -> tensor<4xf32>
  %a = graph.add %c1, %t : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %m = graph.mul %x, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = graph.mul %ch, %m : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that a formula whose intermediate value is also returned, or whose
// constant is off (0.044 for 0.044715), stays as it is.
// CHECK-LABEL: func @not_tanh
func.func @not_tanh(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %ch = graph.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %c3 = graph.constant {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %cc = graph.constant {value = dense<0.044715> : tensor<f32>} : () -> tensor<f32>
  %cw = graph.constant {value = dense<0.044> : tensor<f32>} : () -> tensor<f32>
  %cs = graph.constant {value = dense<0.797884583> : tensor<f32>} : () -> tensor<f32>
  %c1 = graph.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  // CHECK-NOT: graph.gelu
  // CHECK: return
  %h = graph.mul %x, %ch : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %p = graph.pow %x, %c3 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %q = graph.mul %cc, %p : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %s = graph.add %x, %q : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = graph.mul %cs, %s : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %t = graph.tanh %r : (tensor<4xf32>) -> tensor<4xf32>
  %a = graph.add %t, %c1 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %y = graph.mul %h, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %h2 = graph.mul %x, %ch : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %p2 = graph.pow %x, %c3 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %q2 = graph.mul %cw, %p2 : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %s2 = graph.add %x, %q2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r2 = graph.mul %cs, %s2 : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %t2 = graph.tanh %r2 : (tensor<4xf32>) -> tensor<4xf32>
  %a2 = graph.add %t2, %c1 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %y2 = graph.mul %h2, %a2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y, %t, %y2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that with skip-initializers (training, before differentiation) a
// formula whose constant is an initializer, a parameter to train, stays
// as it is; without it the value is taken as the formula's.
// CHECK-LABEL: func @initializer_half
// CHECK: graph.gelu
// TRAIN-LABEL: func @initializer_half
// TRAIN-NOT: graph.gelu
// TRAIN: graph.erf
func.func @initializer_half(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %c2 = graph.constant {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
  %c1 = graph.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %ch = graph.constant {graph.initializer = "half", value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %d = graph.div %x, %c2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = graph.erf %d : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = graph.add %c1, %e : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %m = graph.mul %a, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = graph.mul %ch, %m : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
