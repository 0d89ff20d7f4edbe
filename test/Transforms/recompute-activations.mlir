// RUN: partc-opt %s --partc-recompute-activations="all=true" --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-recompute-activations="target-bytes=1" --split-input-file | FileCheck %s --check-prefix=ONE
// RUN: partc-opt %s --partc-recompute-activations --split-input-file | FileCheck %s --check-prefix=NONE

// A two-layer MLP's training step, x (4096x1024) -> matmul -> gelu ->
// matmul -> MSE, as partc-differentiate leaves it: the backward pass reads
// h (Gelu's gradient), g (the second weight's gradient) and d (the loss's
// gradient).

// Tests that g, the cheapest per byte (one Gelu over h, which Gelu's
// gradient keeps anyway), is computed again right before its first reader
// after the loss, that the readers after the loss read the copy while the
// forward matmul reads the original, and that h then stays kept (it is
// what g comes from) and d is not recomputed from g. The module records
// the choice.
// CHECK: module attributes {partc.recomputed = {bytes = 16777216 : i64, seconds = {{.*}} : f64, values = 1 : i64}}
// CHECK-LABEL: func @main
// CHECK: %[[H:.*]] = graph.matmul %arg0, %[[W1:.*]] :
// CHECK: %[[G:.*]] = graph.gelu %[[H]] :
// CHECK: %[[Y:.*]] = graph.matmul %[[G]], %[[W2:.*]] :
// CHECK: %[[LOSS:.*]] = graph.reduce_mean
// CHECK: %[[DY:.*]] = graph.mul
// CHECK-NEXT: %[[G2:.*]] = graph.gelu %[[H]] :
// CHECK-NEXT: graph.gemm %[[G2]], %[[DY]]
// CHECK-NOT: graph.matmul
// CHECK: graph.gelu_grad %{{.*}}, %[[H]]
// CHECK: return %[[LOSS]]

// ONE-LABEL: func @main
// ONE: graph.reduce_mean
// ONE-COUNT-1: graph.gelu %
// ONE-NOT: graph.matmul
// ONE: return

// NONE-NOT: partc.recomputed
// NONE-LABEL: func @main
// NONE: graph.reduce_mean
// NONE-NOT: graph.gelu %
// NONE: return
func.func @main(%x: tensor<4096x1024xf32>, %labels: tensor<4096x16xf32>) -> tensor<f32> {
  %w1 = graph.variable {name = "w1", role = "parameter", value = dense<0.5> : tensor<1024x1024xf32>} : tensor<1024x1024xf32>
  %w2 = graph.variable {name = "w2", role = "parameter", value = dense<0.5> : tensor<1024x16xf32>} : tensor<1024x16xf32>
  %two = graph.constant {value = dense<3.0e-5> : tensor<f32>} : () -> tensor<f32>
  %h = graph.matmul %x, %w1 : (tensor<4096x1024xf32>, tensor<1024x1024xf32>) -> tensor<4096x1024xf32>
  %g = graph.gelu %h : (tensor<4096x1024xf32>) -> tensor<4096x1024xf32>
  %y = graph.matmul %g, %w2 : (tensor<4096x1024xf32>, tensor<1024x16xf32>) -> tensor<4096x16xf32>
  %d = graph.sub %y, %labels : (tensor<4096x16xf32>, tensor<4096x16xf32>) -> tensor<4096x16xf32>
  %sq = graph.mul %d, %d : (tensor<4096x16xf32>, tensor<4096x16xf32>) -> tensor<4096x16xf32>
  %loss = graph.reduce_mean %sq {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<4096x16xf32>) -> tensor<f32>
  %dy = graph.mul %d, %two : (tensor<4096x16xf32>, tensor<f32>) -> tensor<4096x16xf32>
  %dw2 = graph.gemm %g, %dy {trans_a = 1 : i64, beta = 0.0 : f64} : (tensor<4096x1024xf32>, tensor<4096x16xf32>) -> tensor<1024x16xf32>
  %dg = graph.gemm %dy, %w2 {trans_b = 1 : i64, beta = 0.0 : f64} : (tensor<4096x16xf32>, tensor<1024x16xf32>) -> tensor<4096x1024xf32>
  %dh = graph.gelu_grad %dg, %h : (tensor<4096x1024xf32>, tensor<4096x1024xf32>) -> tensor<4096x1024xf32>
  %dw1 = graph.gemm %x, %dh {trans_a = 1 : i64, beta = 0.0 : f64} : (tensor<4096x1024xf32>, tensor<4096x1024xf32>) -> tensor<1024x1024xf32>
  graph.sgd_update %w1, %dw1 {lr = 0.1 : f64} : tensor<1024x1024xf32>, tensor<1024x1024xf32>
  graph.sgd_update %w2, %dw2 {lr = 0.1 : f64} : tensor<1024x16xf32>, tensor<1024x16xf32>
  return %loss : tensor<f32>
}

// -----

// Tests that a value the step also returns is never recomputed (it lives
// to the end anyway): with g pinned, h is computed again through its
// matmul from the input, and d through the second matmul from the kept g,
// each before its first reader after the loss.
// CHECK: partc.recomputed = {bytes = 17039360 : i64, seconds = {{.*}} : f64, values = 2 : i64}
// CHECK-LABEL: func @main
// CHECK: %[[G:.*]] = graph.gelu %[[H:[^ ]*]] :
// CHECK: graph.reduce_mean
// CHECK-NEXT: %[[Y2:.*]] = graph.matmul %[[G]], %[[W2:[^ ]*]] :
// CHECK-NEXT: %[[D2:.*]] = graph.sub %[[Y2]], %arg1
// CHECK-NEXT: %[[DY:.*]] = graph.mul %[[D2]]
// CHECK: %[[H2:.*]] = graph.matmul %arg0, %{{.*}} :
// CHECK-NEXT: graph.gelu_grad %{{.*}}, %[[H2]]
// CHECK: return %{{.*}}, %[[G]]

// With a target of one byte, only the cheapest per byte: h (16 MiB for one
// matmul) before d (256 KiB for a matmul and a subtraction).
// ONE: partc.recomputed = {bytes = 16777216 : i64, seconds = {{.*}} : f64, values = 1 : i64}
// ONE-LABEL: func @main
// ONE: graph.reduce_mean
// ONE-NOT: graph.sub
// ONE: graph.matmul %arg0
// ONE-NEXT: graph.gelu_grad
func.func @main(%x: tensor<4096x1024xf32>, %labels: tensor<4096x16xf32>) -> (tensor<f32>, tensor<4096x1024xf32>) {
  %w1 = graph.variable {name = "w1", role = "parameter", value = dense<0.5> : tensor<1024x1024xf32>} : tensor<1024x1024xf32>
  %w2 = graph.variable {name = "w2", role = "parameter", value = dense<0.5> : tensor<1024x16xf32>} : tensor<1024x16xf32>
  %two = graph.constant {value = dense<3.0e-5> : tensor<f32>} : () -> tensor<f32>
  %h = graph.matmul %x, %w1 : (tensor<4096x1024xf32>, tensor<1024x1024xf32>) -> tensor<4096x1024xf32>
  %g = graph.gelu %h : (tensor<4096x1024xf32>) -> tensor<4096x1024xf32>
  %y = graph.matmul %g, %w2 : (tensor<4096x1024xf32>, tensor<1024x16xf32>) -> tensor<4096x16xf32>
  %d = graph.sub %y, %labels : (tensor<4096x16xf32>, tensor<4096x16xf32>) -> tensor<4096x16xf32>
  %sq = graph.mul %d, %d : (tensor<4096x16xf32>, tensor<4096x16xf32>) -> tensor<4096x16xf32>
  %loss = graph.reduce_mean %sq {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<4096x16xf32>) -> tensor<f32>
  %dy = graph.mul %d, %two : (tensor<4096x16xf32>, tensor<f32>) -> tensor<4096x16xf32>
  %dw2 = graph.gemm %g, %dy {trans_a = 1 : i64, beta = 0.0 : f64} : (tensor<4096x1024xf32>, tensor<4096x16xf32>) -> tensor<1024x16xf32>
  %dg = graph.gemm %dy, %w2 {trans_b = 1 : i64, beta = 0.0 : f64} : (tensor<4096x16xf32>, tensor<1024x16xf32>) -> tensor<4096x1024xf32>
  %dh = graph.gelu_grad %dg, %h : (tensor<4096x1024xf32>, tensor<4096x1024xf32>) -> tensor<4096x1024xf32>
  %dw1 = graph.gemm %x, %dh {trans_a = 1 : i64, beta = 0.0 : f64} : (tensor<4096x1024xf32>, tensor<4096x1024xf32>) -> tensor<1024x1024xf32>
  graph.sgd_update %w1, %dw1 {lr = 0.1 : f64} : tensor<1024x1024xf32>, tensor<1024x1024xf32>
  graph.sgd_update %w2, %dw2 {lr = 0.1 : f64} : tensor<1024x16xf32>, tensor<1024x16xf32>
  return %loss, %g : tensor<f32>, tensor<4096x1024xf32>
}

// -----

// Tests the chain bound: Tanh's output, kept for its gradient, comes from
// the input through seven ops nobody keeps (a scale and six negations), too
// long a chain to compute again, so nothing is recomputed; the walk stops
// at the bound instead of climbing the whole run.
// CHECK: partc.recomputed = {bytes = 0 : i64, seconds = 0.000000e+00 : f64, values = 0 : i64}
// CHECK-LABEL: func @main
// CHECK: graph.reduce_mean
// CHECK-NOT: graph.tanh %
// CHECK: return
func.func @main(%x: tensor<256x256xf32>) -> tensor<f32> {
  %w = graph.variable {name = "w", role = "parameter", value = dense<0.5> : tensor<256x256xf32>} : tensor<256x256xf32>
  %half = graph.constant {value = dense<5.0e-1> : tensor<f32>} : () -> tensor<f32>
  %m = graph.mul %x, %w : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %n1 = graph.neg %m : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %n2 = graph.neg %n1 : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %n3 = graph.neg %n2 : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %n4 = graph.neg %n3 : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %n5 = graph.neg %n4 : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %n6 = graph.neg %n5 : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %t = graph.tanh %n6 : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %loss = graph.reduce_mean %t {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<256x256xf32>) -> tensor<f32>
  %dt = graph.expand %half {shape = array<i64: 256, 256>} : (tensor<f32>) -> tensor<256x256xf32>
  %dn6 = graph.tanh_grad %dt, %t : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %dw = graph.mul %dn6, %x : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  graph.sgd_update %w, %dw {lr = 0.1 : f64} : tensor<256x256xf32>, tensor<256x256xf32>
  return %loss : tensor<f32>
}

// -----

// Tests the same with two negations: Tanh's output is computed again
// through its four ops from the input and the parameter.
// CHECK: partc.recomputed = {bytes = 262144 : i64, seconds = {{.*}} : f64, values = 1 : i64}
// CHECK-LABEL: func @main
// CHECK: graph.reduce_mean
// CHECK: graph.mul %arg0
// CHECK-NEXT: graph.neg
// CHECK-NEXT: graph.neg
// CHECK-NEXT: %[[T2:.*]] = graph.tanh
// CHECK-NEXT: graph.tanh_grad %{{.*}}, %[[T2]]
func.func @main(%x: tensor<256x256xf32>) -> tensor<f32> {
  %w = graph.variable {name = "w", role = "parameter", value = dense<0.5> : tensor<256x256xf32>} : tensor<256x256xf32>
  %half = graph.constant {value = dense<5.0e-1> : tensor<f32>} : () -> tensor<f32>
  %m = graph.mul %x, %w : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %n1 = graph.neg %m : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %n2 = graph.neg %n1 : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %t = graph.tanh %n2 : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %loss = graph.reduce_mean %t {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<256x256xf32>) -> tensor<f32>
  %dt = graph.expand %half {shape = array<i64: 256, 256>} : (tensor<f32>) -> tensor<256x256xf32>
  %dn2 = graph.tanh_grad %dt, %t : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %dw = graph.mul %dn2, %x : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  graph.sgd_update %w, %dw {lr = 0.1 : f64} : tensor<256x256xf32>, tensor<256x256xf32>
  return %loss : tensor<f32>
}
