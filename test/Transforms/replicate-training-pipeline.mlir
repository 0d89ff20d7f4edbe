// RUN: partc-opt %s --partc-replicate-training="stages=2 micro-batches=2" --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-replicate-training="stages=2 micro-batches=2" --split-input-file | grep "graph.device = 0" | FileCheck %s --check-prefix=F1B-DEV0
// RUN: partc-opt %s --partc-replicate-training="stages=2 micro-batches=2" --split-input-file | grep "graph.device = 1" | FileCheck %s --check-prefix=F1B-DEV1
// RUN: partc-opt %s --partc-replicate-training="stages=2 micro-batches=2 schedule=gpipe" --split-input-file | grep "graph.device = 1" | FileCheck %s --check-prefix=GPIPE-DEV1
// RUN: partc-opt %s --partc-replicate-training="stages=2 replicas=2" --split-input-file | FileCheck %s --check-prefix=HYBRID

// partc-replicate-training's pipeline mode (stages > 1): the ops carry
// their stage as graph.device. Tests a two-stage step of y = (x w0) w1:
// the forward ops are the loss's ancestors, the rest is backward.

// CHECK: module attributes {{.*}}graph.num_devices = 2
// CHECK-SAME: micro_batches = "2", replicas = "1", schedule = "1f1b", stages = "2", strategy = "pipeline"
// CHECK-LABEL: func @main
// CHECK-NOT: graph.all_reduce
// CHECK: return

// Under 1F1B stage 0 runs one forward ahead: F0 F1 B0 B1, then its update.
// F1B-DEV0: %[[W0:.*]] = graph.variable {graph.device = 0 : i64, name = "w0"
// F1B-DEV0: graph.matmul %[[X0:.*]], %[[W0]] {graph.device = 0 : i64}
// F1B-DEV0: graph.matmul %[[X1:.*]], %[[W0]] {graph.device = 0 : i64}
// F1B-DEV0: %[[G00:.*]] = graph.gemm %[[X0]], {{.*}}graph.device = 0 : i64
// F1B-DEV0: %[[G01:.*]] = graph.gemm %[[X1]], {{.*}}graph.device = 0 : i64
// F1B-DEV0: %[[SUM:.*]] = graph.add %[[G00]], %[[G01]] {graph.device = 0 : i64}
// F1B-DEV0: %[[MEAN:.*]] = graph.mul %[[SUM]]
// F1B-DEV0: graph.sgd_update %[[W0]], %[[MEAN]] {graph.device = 0 : i64

// The last stage alternates: F0 B0 F1 B1.
// F1B-DEV1: %[[W1:.*]] = graph.variable {graph.device = 1 : i64, name = "w1"
// F1B-DEV1: %[[Y0:.*]] = graph.matmul {{.*}}, %[[W1]] {graph.device = 1 : i64}
// F1B-DEV1: graph.reduce_mean %[[Y0]]
// F1B-DEV1: graph.gemm {{.*}}, %[[Y0]] {{.*}}graph.device = 1 : i64
// F1B-DEV1: graph.gemm %[[Y0]], %[[W1]] {{.*}}graph.device = 1 : i64
// F1B-DEV1: %[[Y1:.*]] = graph.matmul {{.*}}, %[[W1]] {graph.device = 1 : i64}
// F1B-DEV1: graph.reduce_mean %[[Y1]]
// F1B-DEV1: graph.gemm {{.*}}, %[[Y1]] {{.*}}graph.device = 1 : i64
// F1B-DEV1: graph.sgd_update %[[W1]]

// GPipe: every forward first.
// GPIPE-DEV1: %[[Y0:.*]] = graph.matmul {{.*}} {graph.device = 1 : i64}
// GPIPE-DEV1: %[[Y1:.*]] = graph.matmul {{.*}} {graph.device = 1 : i64}
// GPIPE-DEV1: graph.gemm {{.*}}, %[[Y0]] {{.*}}graph.device = 1 : i64
// GPIPE-DEV1: graph.gemm {{.*}}, %[[Y1]] {{.*}}graph.device = 1 : i64

// Stages x replicas: replica r's stage s on device 2r + s; each stage's
// replicas average its gradients; the loss comes from the last stage.
// HYBRID: module attributes {{.*}}graph.num_devices = 4
// HYBRID-SAME: replicas = "2", schedule = "1f1b", stages = "2", strategy = "hybrid"
// HYBRID-DAG: graph.all_reduce {{.*}} {devices = array<i64: 1, 3>, graph.device = 1 : i64, group = {{.*}}} : (tensor<f32>)
// HYBRID-DAG: graph.all_reduce {{.*}} {devices = array<i64: 0, 2>, graph.device = 2 : i64, group = {{.*}}} : (tensor<3x3xf32>)
// HYBRID-DAG: graph.all_reduce {{.*}} {devices = array<i64: 1, 3>, graph.device = 3 : i64, group = {{.*}}} : (tensor<3x3xf32>)
func.func @main(%x: tensor<2x3xf32> {graph.batch_slice = 2 : i64, graph.name = "x"}) -> tensor<f32> {
  %w0 = graph.variable {graph.device = 0 : i64, name = "w0", role = "parameter", value = dense<0.5> : tensor<3x3xf32>} : tensor<3x3xf32>
  %w1 = graph.variable {graph.device = 1 : i64, name = "w1", role = "parameter", value = dense<0.25> : tensor<3x3xf32>} : tensor<3x3xf32>
  %h = graph.matmul %x, %w0 {graph.device = 0 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %y = graph.matmul %h, %w1 {graph.device = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %loss = graph.reduce_mean %y {axes = array<i64: 0, 1>, keepdims = 0 : i64, graph.device = 1 : i64} : (tensor<2x3xf32>) -> tensor<f32>
  %g1 = graph.gemm %h, %y {trans_a = 1 : i64, beta = 0.0 : f64, graph.device = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
  %dh = graph.gemm %y, %w1 {trans_b = 1 : i64, beta = 0.0 : f64, graph.device = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %g0 = graph.gemm %x, %dh {trans_a = 1 : i64, beta = 0.0 : f64, graph.device = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
  graph.sgd_update %w0, %g0 {lr = 0.1 : f64, graph.device = 0 : i64} : tensor<3x3xf32>, tensor<3x3xf32>
  graph.sgd_update %w1, %g1 {lr = 0.1 : f64, graph.device = 1 : i64} : tensor<3x3xf32>, tensor<3x3xf32>
  return %loss : tensor<f32>
}

// -----

// Tests that the step counter read on both stages gets a copy (and a
// count) on each, and that batch norm's running statistics under 2
// micro-batches are one update with momentum 1 - (1 - 0.1)^2 = 0.19
// toward the micro-batches' statistics weighted 0.1 * 0.9 / 0.19 and
// 0.1 / 0.19.
// CHECK-LABEL: func @main
// CHECK-DAG: %[[STEP0:.*]] = graph.variable {graph.device = 0 : i64, name = "optimizer.step"
// CHECK-DAG: %[[STEP1:.*]] = graph.variable {graph.device = 1 : i64, name = "optimizer.step"
// CHECK-DAG: %[[EARLY:.*]] = graph.constant {value = dense<0.473684{{[0-9]*}}> : tensor<f32>}
// CHECK-DAG: %[[LATE:.*]] = graph.constant {value = dense<0.526315{{[0-9]*}}> : tensor<f32>}
// CHECK-DAG: graph.dropout {{.*}}, %[[STEP0]], {{.*}}graph.device = 0 : i64
// CHECK-DAG: graph.dropout {{.*}}, %[[STEP1]], {{.*}}graph.device = 1 : i64
// CHECK-DAG: graph.count_step %[[STEP0]] {graph.device = 0 : i64}
// CHECK: graph.mul {{.*}}, %[[EARLY]] {graph.device = 1 : i64}
// CHECK: graph.mul {{.*}}, %[[LATE]] {graph.device = 1 : i64}
// CHECK: graph.update_running_stats {{.*}}graph.device = 1 : i64, momentum = 0.18999
// CHECK-NOT: graph.update_running_stats
// CHECK: graph.count_step %[[STEP1]] {graph.device = 1 : i64}
func.func @main(%x: tensor<4x2xf32> {graph.batch_slice = 2 : i64}) -> tensor<f32> {
  %step = graph.variable {graph.device = 0 : i64, name = "optimizer.step", role = "step"} : tensor<i64>
  %seed = graph.variable {graph.device = 0 : i64, name = "rng.seed", role = "seed", value = dense<3> : tensor<i64>} : tensor<i64>
  %rm = graph.variable {graph.device = 1 : i64, name = "bn.running_mean", role = "running_mean", value = dense<0.0> : tensor<2xf32>} : tensor<2xf32>
  %rv = graph.variable {graph.device = 1 : i64, name = "bn.running_var", role = "running_var", value = dense<1.0> : tensor<2xf32>} : tensor<2xf32>
  %scale = graph.constant {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %bias = graph.constant {value = dense<0.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %d0 = graph.dropout %x, %step, %seed {ratio = 0.5 : f64, graph.device = 0 : i64} : (tensor<4x2xf32>, tensor<i64>, tensor<i64>) -> tensor<4x2xf32>
  %d1 = graph.dropout %d0, %step, %seed {ratio = 0.5 : f64, graph.device = 1 : i64} : (tensor<4x2xf32>, tensor<i64>, tensor<i64>) -> tensor<4x2xf32>
  %n, %mean, %var = graph.batch_norm_train %d1, %scale, %bias {epsilon = 1.0e-5 : f64, graph.device = 1 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)
  %loss = graph.reduce_mean %n {axes = array<i64: 0, 1>, keepdims = 0 : i64, graph.device = 1 : i64} : (tensor<4x2xf32>) -> tensor<f32>
  graph.update_running_stats %rm, %rv, %mean, %var {momentum = 0.1 : f64, count = 4 : i64, graph.device = 1 : i64} : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
  graph.count_step %step {graph.device = 0 : i64} : tensor<i64>
  return %loss : tensor<f32>
}
