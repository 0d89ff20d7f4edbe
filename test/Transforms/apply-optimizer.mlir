// RUN: partc-opt %s --partc-differentiate --partc-apply-optimizer="optimizer=sgd lr=0.1 momentum=0.9" --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-differentiate --partc-apply-optimizer="optimizer=adamw lr=0.01" --split-input-file | FileCheck %s --check-prefix=ADAMW

// Tests that the parameter becomes a variable initialized with the
// initializer's value, that SGD with momentum gets a zero momentum buffer,
// and that the update comes last, after every use of the parameter, while
// only the loss is still returned.
// CHECK-LABEL: func @main
// CHECK-SAME: -> (tensor<f32> {graph.name = "loss"})
// CHECK-DAG: %[[BUF:.*]] = graph.variable {name = "w.momentum", role = "momentum"} : tensor<3x2xf32>
// CHECK-DAG: %[[W:.*]] = graph.variable {name = "w", role = "parameter", value = dense<5.000000e-01> : tensor<3x2xf32>} : tensor<3x2xf32>
// CHECK: %[[DW:.*]] = graph.gemm %arg0, %{{.*}} {beta
// CHECK-NEXT: graph.sgd_update %[[W]], %[[DW]], %[[BUF]] {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64}
// CHECK-NEXT: return %{{.*}} : tensor<f32>

// AdamW: two moments per parameter, one step counter read by every update
// and counted once at the end; PyTorch's default weight decay of 0.01.
// ADAMW-LABEL: func @main
// ADAMW-DAG: %[[M:.*]] = graph.variable {name = "w.adam_m", role = "adam_m"}
// ADAMW-DAG: %[[V:.*]] = graph.variable {name = "w.adam_v", role = "adam_v"}
// ADAMW-DAG: %[[STEP:.*]] = graph.variable {name = "optimizer.step", role = "step"} : tensor<i64>
// ADAMW: graph.adamw_update %{{.*}}, %{{.*}}, %[[M]], %[[V]], %[[STEP]] {beta1 = 9.000000e-01 : f64, beta2 = 0.99{{[0-9]*}} : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-02 : f64, weight_decay = 1.000000e-02 : f64}
// ADAMW-NEXT: graph.count_step %[[STEP]]
// ADAMW-NEXT: return
func.func @main(%x: tensor<4x3xf32> {graph.name = "x"}) -> (tensor<4x2xf32> {graph.name = "y"}) {
  %w = graph.constant {graph.initializer = "w", value = dense<0.5> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
  %h = graph.gemm %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  return %h : tensor<4x2xf32>
}

// -----

// Tests that the step counter partc-prepare-training made for dropout is
// the one AdamW reads (no second counter) and that it is counted once,
// after every update that reads it; SGD leaves it where it is.
// CHECK-LABEL: func @main
// CHECK: graph.sgd_update
// CHECK-NEXT: graph.count_step
// CHECK-NEXT: return
// ADAMW-LABEL: func @main
// ADAMW-COUNT-1: graph.variable {name = "optimizer.step"
// ADAMW-NOT: graph.variable {name = "optimizer.step"
// ADAMW: graph.dropout %{{.*}}, %[[STEP:.*]], %{{.*}} {ratio
// ADAMW: graph.adamw_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[STEP]] {
// ADAMW-NEXT: graph.count_step %[[STEP]]
// ADAMW-NEXT: return
func.func @main(%x: tensor<4x3xf32> {graph.name = "x"}) -> (tensor<4x2xf32> {graph.name = "y"}) {
  %step = graph.variable {name = "optimizer.step", role = "step"} : tensor<i64>
  %seed = graph.variable {name = "rng.seed", role = "seed"} : tensor<i64>
  %w = graph.constant {graph.initializer = "w", value = dense<0.5> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
  %h = graph.gemm %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %y = graph.dropout %h, %step, %seed {ratio = 0.25 : f64} : (tensor<4x2xf32>, tensor<i64>, tensor<i64>) -> tensor<4x2xf32>
  graph.count_step %step : tensor<i64>
  return %y : tensor<4x2xf32>
}
