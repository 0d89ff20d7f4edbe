// RUN: partc-opt %s --partc-schedule-updates --split-input-file | FileCheck %s

// Tests that each update moves up to right after the last op that reads
// its parameter or computes its gradient: w2's gradient is ready (and w2
// read for the last time) before w1's gradient is computed, so w2 is
// updated first and its gradient dies there; the step counter stays last.
// CHECK-LABEL: func @main
// CHECK: %[[DW2:.*]] = graph.gemm %[[A:.*]], %[[D:.*]] {beta
// CHECK: %[[DA:.*]] = graph.gemm %[[D]], %[[W2:.*]] {beta
// CHECK-NEXT: graph.sgd_update %[[W2]], %[[DW2]]
// CHECK-NEXT: %[[DW1:.*]] = graph.gemm %arg0, %[[DA]] {beta
// CHECK-NEXT: graph.sgd_update %{{.*}}, %[[DW1]]
// CHECK-NEXT: graph.count_step
// CHECK-NEXT: return
func.func @main(%x: tensor<4x3xf32>, %labels: tensor<4x2xf32>) -> tensor<f32> {
  %step = graph.variable {name = "optimizer.step", role = "step"} : tensor<i64>
  %w1 = graph.variable {name = "w1", role = "parameter", value = dense<0.5> : tensor<3x5xf32>} : tensor<3x5xf32>
  %w2 = graph.variable {name = "w2", role = "parameter", value = dense<0.5> : tensor<5x2xf32>} : tensor<5x2xf32>
  %a = graph.matmul %x, %w1 : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %y = graph.matmul %a, %w2 : (tensor<4x5xf32>, tensor<5x2xf32>) -> tensor<4x2xf32>
  %d = graph.sub %y, %labels : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %sq = graph.mul %d, %d : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %loss = graph.reduce_mean %sq {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<f32>
  %dw2 = graph.gemm %a, %d {trans_a = 1 : i64, beta = 0.0 : f64} : (tensor<4x5xf32>, tensor<4x2xf32>) -> tensor<5x2xf32>
  %da = graph.gemm %d, %w2 {trans_b = 1 : i64, beta = 0.0 : f64} : (tensor<4x2xf32>, tensor<5x2xf32>) -> tensor<4x5xf32>
  %dw1 = graph.gemm %x, %da {trans_a = 1 : i64, beta = 0.0 : f64} : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  graph.sgd_update %w1, %dw1 {lr = 0.1 : f64} : tensor<3x5xf32>, tensor<3x5xf32>
  graph.sgd_update %w2, %dw2 {lr = 0.1 : f64} : tensor<5x2xf32>, tensor<5x2xf32>
  graph.count_step %step : tensor<i64>
  return %loss : tensor<f32>
}

// -----

// Tests that a reader through a reshape (a view of the parameter's bytes
// in the plan) holds the update back, as does the last reader of an AdamW
// moment, and that the update does not move past the step counter's
// readers in any way that matters (it reads the step, never writes it).
// CHECK-LABEL: func @view
// CHECK: %[[R:.*]] = graph.reshape %[[W:[^ ]*]]
// CHECK: graph.mul %[[R]]
// CHECK-NEXT: graph.adamw_update %[[W]]
// CHECK-NEXT: graph.add
// CHECK-NEXT: graph.count_step
func.func @view(%g: tensor<6xf32>, %x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %step = graph.variable {name = "optimizer.step", role = "step"} : tensor<i64>
  %w = graph.variable {name = "w", role = "parameter", value = dense<0.5> : tensor<6xf32>} : tensor<6xf32>
  %m = graph.variable {name = "w.adam_m", role = "adam_m"} : tensor<6xf32>
  %v = graph.variable {name = "w.adam_v", role = "adam_v"} : tensor<6xf32>
  %r = graph.reshape %w {shape = array<i64: 2, 3>} : (tensor<6xf32>) -> tensor<2x3xf32>
  %p = graph.mul %r, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %q = graph.add %p, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  graph.adamw_update %w, %g, %m, %v, %step {lr = 0.01 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<i64>
  graph.count_step %step : tensor<i64>
  return %q : tensor<2x3xf32>
}
