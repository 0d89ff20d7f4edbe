// RUN: partc-opt %s --partc-fuse-elementwise --split-input-file | FileCheck %s

// Tests that a Gelu-like chain (partc-match-gelu matches the real one)
// becomes one fused op reading x and the three scalars, in first-use order.
// CHECK-LABEL: func @notgelu
func.func @notgelu(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %c2 = graph.constant {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
  %c1 = graph.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %ch = graph.constant {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  // CHECK: %[[F:.*]] = graph.fused_elementwise %arg0, %{{.*}}, %{{.*}}, %{{.*}} {args = array<i64: 0, 1, -1, -2, 2, 0, -3, -4, 3>, steps = ["div", "erf", "add", "mul", "mul"]}
  // CHECK-NOT: graph.erf
  // CHECK: return %[[F]]
  %d = graph.div %x, %c2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = graph.erf %d : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = graph.add %e, %c1 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = graph.mul %x, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = graph.mul %m, %ch : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Tests that a value used outside the chain ends a chain (it must be
// written), that an add's ReLU becomes a step of its own, and that a lone
// element-wise op is left as it is.
// CHECK-LABEL: func @escapes
func.func @escapes(%x: tensor<4x3xf32>, %b: tensor<3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  // CHECK: %[[T:.*]] = graph.tanh %arg0
  // CHECK: %[[F:.*]] = graph.fused_elementwise %[[T]], %arg1 {args = array<i64: 0, 1, -1, -2, -3>, steps = ["add", "relu", "neg", "exp"]}
  // CHECK: %[[S:.*]] = graph.sqrt %arg0
  // CHECK: return %[[T]], %[[F]], %[[S]]
  %t = graph.tanh %x : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %a = graph.add %t, %b {activation = "relu"} : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %n = graph.neg %a : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %e = graph.exp %n : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %s = graph.sqrt %x : (tensor<4x3xf32>) -> tensor<4x3xf32>
  return %t, %e, %s : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// Tests that ops of other types (integers) and ops on another device stay
// out of a chain, while a producer of a shape that broadcasts to the
// chain's joins it.
// CHECK-LABEL: func @boundaries
func.func @boundaries(%x: tensor<3xf32>, %y: tensor<2x3xf32>, %i: tensor<3xi64>) -> (tensor<2x3xf32>, tensor<3xi64>, tensor<3xf32>) {
  // CHECK: graph.fused_elementwise %arg0, %arg1 {args = array<i64: 0, -1, 1, -2>, steps = ["exp", "mul", "sigmoid"]}
  %e = graph.exp %x : (tensor<3xf32>) -> tensor<3xf32>
  %m = graph.mul %e, %y : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = graph.sigmoid %m : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.add %arg2, %arg2
  // CHECK: graph.neg
  %ia = graph.add %i, %i : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %in = graph.neg %ia : (tensor<3xi64>) -> tensor<3xi64>
  // CHECK: graph.abs %arg0 {graph.device = 0 : i64}
  // CHECK: graph.log {{.*}}graph.device = 1 : i64
  %p = graph.abs %x {graph.device = 0 : i64} : (tensor<3xf32>) -> tensor<3xf32>
  %l = graph.log %p {graph.device = 1 : i64} : (tensor<3xf32>) -> tensor<3xf32>
  return %s, %in, %l : tensor<2x3xf32>, tensor<3xi64>, tensor<3xf32>
}

// -----

// Tests that a chain longer than the runtime's 16 steps is split in two.
// CHECK-LABEL: func @long
func.func @long(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: %[[A:.*]] = graph.fused_elementwise %arg0 {{.*}}steps = ["neg", "neg"]}
  // CHECK: graph.fused_elementwise %[[A]] {{.*}}steps = ["neg", "neg", "neg", "neg", "neg", "neg", "neg", "neg", "neg", "neg", "neg", "neg", "neg", "neg", "neg", "neg"]}
  %0 = graph.neg %x : (tensor<4xf32>) -> tensor<4xf32>
  %1 = graph.neg %0 : (tensor<4xf32>) -> tensor<4xf32>
  %2 = graph.neg %1 : (tensor<4xf32>) -> tensor<4xf32>
  %3 = graph.neg %2 : (tensor<4xf32>) -> tensor<4xf32>
  %4 = graph.neg %3 : (tensor<4xf32>) -> tensor<4xf32>
  %5 = graph.neg %4 : (tensor<4xf32>) -> tensor<4xf32>
  %6 = graph.neg %5 : (tensor<4xf32>) -> tensor<4xf32>
  %7 = graph.neg %6 : (tensor<4xf32>) -> tensor<4xf32>
  %8 = graph.neg %7 : (tensor<4xf32>) -> tensor<4xf32>
  %9 = graph.neg %8 : (tensor<4xf32>) -> tensor<4xf32>
  %10 = graph.neg %9 : (tensor<4xf32>) -> tensor<4xf32>
  %11 = graph.neg %10 : (tensor<4xf32>) -> tensor<4xf32>
  %12 = graph.neg %11 : (tensor<4xf32>) -> tensor<4xf32>
  %13 = graph.neg %12 : (tensor<4xf32>) -> tensor<4xf32>
  %14 = graph.neg %13 : (tensor<4xf32>) -> tensor<4xf32>
  %15 = graph.neg %14 : (tensor<4xf32>) -> tensor<4xf32>
  %16 = graph.neg %15 : (tensor<4xf32>) -> tensor<4xf32>
  %17 = graph.neg %16 : (tensor<4xf32>) -> tensor<4xf32>
  return %17 : tensor<4xf32>
}

// -----

// Tests that ops with parameters join chains and carry them in step order,
// their defaults (leaky_relu's alpha) included, and that an integer op
// stays out.
// CHECK-LABEL: func @parameters
func.func @parameters(%x: tensor<4xf32>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  // CHECK: %[[F:.*]] = graph.fused_elementwise %arg0 {args = array<i64: 0, -1, -2, -3>, params = array<f64: 1.000000e-02, 5.000000e-01, 1.500000e+00, 0xFFF0000000000000, 1.000000e+00>, steps = ["leaky_relu", "mish", "selu", "clip"]}
  // CHECK: %[[I:.*]] = graph.clip %arg1
  // CHECK: %[[N:.*]] = graph.neg %[[I]]
  // CHECK: return %[[F]], %[[N]]
  %a = graph.leaky_relu %x : (tensor<4xf32>) -> tensor<4xf32>
  %b = graph.mish %a : (tensor<4xf32>) -> tensor<4xf32>
  %c = graph.selu %b {alpha = 0.5 : f64, gamma = 1.5 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %d = graph.clip %c {max = 1.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %e = graph.clip %i {min = 0.0 : f64} : (tensor<4xi32>) -> tensor<4xi32>
  %f = graph.neg %e : (tensor<4xi32>) -> tensor<4xi32>
  return %d, %f : tensor<4xf32>, tensor<4xi32>
}

// -----

// Tests that a producer of a shape that broadcasts to the chain's joins it
// (squeeze-and-excitation's sigmoid of per-channel scales), its steps run
// per element of the result, while one read outside the chain stays apart.
// CHECK-LABEL: func @broadcast_producer
// CHECK: %[[F:.*]] = graph.fused_elementwise %arg1, %arg0 {args = array<i64: 0, -1, 1>, steps = ["sigmoid", "mul"]} : (tensor<2x1x1x4xf32>, tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
// CHECK: %[[T:.*]] = graph.tanh %arg2 : (tensor<2x1x1x4xf32>) -> tensor<2x1x1x4xf32>
// CHECK: %[[G:.*]] = graph.mul %[[T]], %arg0
// CHECK: return %[[F]], %[[G]], %[[T]]
func.func @broadcast_producer(%x: tensor<2x8x8x4xf32>, %s: tensor<2x1x1x4xf32>, %u: tensor<2x1x1x4xf32>) -> (tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>, tensor<2x1x1x4xf32>) {
  %g = graph.sigmoid %s : (tensor<2x1x1x4xf32>) -> tensor<2x1x1x4xf32>
  %y = graph.mul %g, %x : (tensor<2x1x1x4xf32>, tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
  %t = graph.tanh %u : (tensor<2x1x1x4xf32>) -> tensor<2x1x1x4xf32>
  %z = graph.mul %t, %x : (tensor<2x1x1x4xf32>, tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
  return %y, %z, %t : tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>, tensor<2x1x1x4xf32>
}
