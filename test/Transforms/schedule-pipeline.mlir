// RUN: partc-opt %s --partc-schedule-pipeline="micro-batches=2" | FileCheck %s

// Tests that a two-stage graph is cloned per micro-batch in GPipe order:
// inputs sliced on the host, each clone keeps its stage, shapes shrink to
// the micro-batch (including the reshape's target) and outputs are
// concatenated on the host.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<4x6xf32>) -> tensor<4x2x3xf32> {
  // CHECK: %[[S0:.*]] = graph.slice %arg0 {ends = array<i64: 2, 6>, graph.device = -1 : i64, starts = array<i64: 0, 0>
  // CHECK: %[[A0:.*]] = graph.relu %[[S0]] {graph.device = 0 : i64, graph.micro_batch = 0 : i64} : (tensor<2x6xf32>)
  // CHECK: %[[B0:.*]] = graph.reshape %[[A0]] {graph.device = 1 : i64, graph.micro_batch = 0 : i64, shape = array<i64: 2, 2, 3>}
  // CHECK: %[[S1:.*]] = graph.slice %arg0 {ends = array<i64: 4, 6>, graph.device = -1 : i64, starts = array<i64: 2, 0>
  // CHECK: graph.relu %[[S1]] {graph.device = 0 : i64, graph.micro_batch = 1 : i64}
  // CHECK: %[[B1:.*]] = graph.reshape {{.*}}graph.micro_batch = 1
  // CHECK: %[[C:.*]] = graph.concat %[[B0]], %[[B1]] {axis = 0 : i64, graph.device = -1 : i64}
  // CHECK: return %[[C]]
  %a = graph.relu %x {graph.device = 0 : i64} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %b = graph.reshape %a {graph.device = 1 : i64, shape = array<i64: 4, 2, 3>} : (tensor<4x6xf32>) -> tensor<4x2x3xf32>
  return %b : tensor<4x2x3xf32>
}
