// RUN: partc-opt %s --partc-replicate-training="replicas=2" --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-replicate-training="replicas=1 micro-batches=2" --split-input-file | FileCheck %s --check-prefix=MICRO

// Tests one SGD step of y = x w on 2 replicas: the input grows back to the
// whole batch and each replica reads its rows on the host; each has its
// own parameter (one initial value) and update; the gradient is averaged
// right after it is computed and before the update reads it; the loss is
// averaged and returned from replica 0. Groups are numbered in the order
// every device meets them.
// CHECK: module attributes {{.*}}graph.num_devices = 2
// CHECK-SAME: gradient_all_reduces = "2", micro_batches = "1", replicas = "2", strategy = "data"
// CHECK-LABEL: func @main
// CHECK-SAME: (%arg0: tensor<4x3xf32> {graph.name = "x"}, %arg1: tensor<4x2xf32> {graph.name = "labels"}) -> (tensor<f32> {graph.name = "loss"})
func.func @main(%x: tensor<2x3xf32> {graph.batch_slice = 2 : i64, graph.name = "x"},
                %labels: tensor<2x2xf32> {graph.batch_slice = 2 : i64, graph.name = "labels"})
    -> (tensor<f32> {graph.name = "loss"}) {
  // CHECK: %[[X0:.*]] = graph.slice %arg0 {ends = array<i64: 2, 3>, graph.device = -1 : i64, starts = array<i64: 0, 0>
  // CHECK: %[[L0:.*]] = graph.slice %arg1 {ends = array<i64: 2, 2>, graph.device = -1 : i64, starts = array<i64: 0, 0>
  // CHECK: %[[X1:.*]] = graph.slice %arg0 {ends = array<i64: 4, 3>, graph.device = -1 : i64, starts = array<i64: 2, 0>
  // CHECK: %[[W0:.*]] = graph.variable {graph.device = 0 : i64, name = "w", role = "parameter"
  // CHECK: %[[Y0:.*]] = graph.matmul %[[X0]], %[[W0]] {graph.device = 0 : i64}
  // CHECK: %[[D0:.*]] = graph.sub %[[Y0]], %[[L0]] {graph.device = 0 : i64}
  // CHECK: %[[LOSS0:.*]] = graph.reduce_mean
  // CHECK: %[[AVGLOSS:.*]] = graph.all_reduce %[[LOSS0]] {devices = array<i64: 0, 1>, graph.device = 0 : i64, group = 0 : i64}
  // CHECK: %[[G0:.*]] = graph.gemm %[[X0]], %[[D0]] {{{.*}}graph.device = 0 : i64
  // CHECK: %[[AVG0:.*]] = graph.all_reduce %[[G0]] {devices = array<i64: 0, 1>, graph.device = 0 : i64, group = 1 : i64}
  // CHECK: graph.sgd_update %[[W0]], %[[AVG0]] {graph.device = 0 : i64
  // CHECK: %[[W1:.*]] = graph.variable {graph.device = 1 : i64, name = "w", role = "parameter"
  // CHECK: graph.matmul %[[X1]], %[[W1]] {graph.device = 1 : i64}
  // CHECK: graph.all_reduce {{.*}} {devices = array<i64: 0, 1>, graph.device = 1 : i64, group = 0 : i64}
  // CHECK: %[[AVG1:.*]] = graph.all_reduce {{.*}} {devices = array<i64: 0, 1>, graph.device = 1 : i64, group = 1 : i64}
  // CHECK: graph.sgd_update %[[W1]], %[[AVG1]] {graph.device = 1 : i64
  // CHECK: return %[[AVGLOSS]] : tensor<f32>
  %w = graph.variable {name = "w", role = "parameter", value = dense<0.5> : tensor<3x2xf32>} : tensor<3x2xf32>
  %y = graph.matmul %x, %w : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  %d = graph.sub %y, %labels : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %sq = graph.mul %d, %d : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %loss = graph.reduce_mean %sq {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x2xf32>) -> tensor<f32>
  %g = graph.gemm %x, %d {trans_a = 1 : i64, beta = 0.0 : f64} : (tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  graph.sgd_update %w, %g {lr = 0.1 : f64} : tensor<3x2xf32>, tensor<3x2xf32>
  return %loss : tensor<f32>
}

// -----

// Tests that each replica's dropout continues the whole batch's numbering
// from its rows (2 rows of 4: replica 1 starts at element 8), forward and
// backward alike, and that a gradient no op of the replica computes (a
// constant) is averaged before the replica's first op.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<2x4xf32> {graph.batch_slice = 2 : i64}) -> (tensor<f32>, tensor<4xf32>) {
  // CHECK: graph.all_reduce %[[ZERO:.*]] {devices = array<i64: 0, 1>, graph.device = 0 : i64
  // CHECK: graph.dropout {{.*}}graph.device = 0 : i64, ratio
  // CHECK: graph.dropout {{.*}}graph.device = 1 : i64, offset = 8 : i64, ratio
  // CHECK: graph.dropout {{.*}}graph.device = 1 : i64, offset = 8 : i64, ratio
  %step = graph.variable {name = "optimizer.step", role = "step"} : tensor<i64>
  %seed = graph.variable {name = "rng.seed", role = "seed", value = dense<3> : tensor<i64>} : tensor<i64>
  %zero = graph.constant {value = dense<0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %d = graph.dropout %x, %step, %seed {ratio = 0.5 : f64} : (tensor<2x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x4xf32>
  %back = graph.dropout %d, %step, %seed {ratio = 0.5 : f64} : (tensor<2x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x4xf32>
  %loss = graph.reduce_mean %back {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<f32>
  graph.count_step %step : tensor<i64>
  return %loss, %zero : tensor<f32>, tensor<4xf32>
}

// -----

// Tests that a dropout folded into a softmax gradient (partc-fuse-dropout)
// continues the whole batch's numbering as graph.dropout does.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<2x4xf32> {graph.batch_slice = 2 : i64}) -> (tensor<f32>) {
  // CHECK: graph.softmax_grad {{.*}} {axis = 1 : i64, dropout_ratio = 5.000000e-01 : f64, graph.device = 0 : i64}
  // CHECK: graph.softmax_grad {{.*}} {axis = 1 : i64, dropout_offset = 8 : i64, dropout_ratio = 5.000000e-01 : f64, graph.device = 1 : i64}
  %step = graph.variable {name = "optimizer.step", role = "step"} : tensor<i64>
  %seed = graph.variable {name = "rng.seed", role = "seed", value = dense<3> : tensor<i64>} : tensor<i64>
  %p = graph.softmax %x {axis = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %g = graph.softmax_grad %x, %p, %step, %seed {axis = 1 : i64, dropout_ratio = 5.000000e-01 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x4xf32>
  %loss = graph.reduce_mean %g {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<f32>
  graph.count_step %step : tensor<i64>
  return %loss : tensor<f32>
}

// -----

// Tests gradient accumulation on one device (2 micro-batches, no replica
// to average with): each micro-batch reads its rows, its gradient is added
// to the running sum as soon as it is computed, the sum is halved, and
// the one update reads the mean; the loss is the micro-batches' mean. One
// micro-batch's forward and backward ops run before the next's. No
// all_reduce.
// MICRO-LABEL: func @main(%arg0: tensor<4x3xf32> {graph.name = "micro"})
// MICRO-NOT: graph.all_reduce
// MICRO: %[[HALF:.*]] = graph.constant {value = dense<5.000000e-01> : tensor<f32>}
// MICRO: graph.slice %arg0 {ends = array<i64: 2, 3>, graph.device = -1 : i64, starts = array<i64: 0, 0>
// MICRO: graph.slice %arg0 {ends = array<i64: 4, 3>, graph.device = -1 : i64, starts = array<i64: 2, 0>
// MICRO: %[[W:.*]] = graph.variable {graph.device = 0 : i64, name = "w"
// MICRO: %[[L0:.*]] = graph.reduce_mean
// MICRO: %[[G0:.*]] = graph.gemm
// MICRO: %[[L1:.*]] = graph.reduce_mean
// MICRO: %[[LS:.*]] = graph.add %[[L0]], %[[L1]] {graph.device = 0 : i64}
// MICRO: %[[LM:.*]] = graph.mul %[[LS]], %[[HALF]] {graph.device = 0 : i64}
// MICRO: %[[G1:.*]] = graph.gemm
// MICRO: %[[GS:.*]] = graph.add %[[G0]], %[[G1]] {graph.device = 0 : i64}
// MICRO: %[[GM:.*]] = graph.mul %[[GS]], %[[HALF]] {graph.device = 0 : i64}
// MICRO: graph.sgd_update %[[W]], %[[GM]] {graph.device = 0 : i64
// MICRO-NOT: graph.sgd_update
// MICRO: return %[[LM]] : tensor<f32>
func.func @main(%x: tensor<2x3xf32> {graph.batch_slice = 2 : i64, graph.name = "micro"}) -> tensor<f32> {
  %w = graph.variable {name = "w", role = "parameter", value = dense<0.5> : tensor<3x2xf32>} : tensor<3x2xf32>
  %y = graph.matmul %x, %w : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  %loss = graph.reduce_mean %y {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x2xf32>) -> tensor<f32>
  %g = graph.gemm %x, %y {trans_a = 1 : i64, beta = 0.0 : f64} : (tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  graph.sgd_update %w, %g {lr = 0.1 : f64} : tensor<3x2xf32>, tensor<3x2xf32>
  return %loss : tensor<f32>
}
