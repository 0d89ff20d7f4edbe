// RUN: partc-opt %s --partc-insert-transfers | FileCheck %s
// RUN: partc-opt %s --partc-insert-transfers="at-first-use" | FileCheck %s --check-prefix=AT-USE

// Tests that a value used on two later stages moves once to each, directly
// from its producer (the residual edge skips stage 1), and that two uses on
// the same device share one transfer.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: %[[A:.*]] = graph.relu %arg0 {graph.device = 0
  // CHECK-DAG: %[[T1:.*]] = graph.transfer %[[A]] {graph.device = 1 : i64, source = 0 : i64, target = 1 : i64}
  // CHECK-DAG: %[[T2:.*]] = graph.transfer %[[A]] {graph.device = 2 : i64, source = 0 : i64, target = 2 : i64}
  // CHECK: %[[B:.*]] = graph.mul %[[T1]], %[[T1]] {graph.device = 1
  // CHECK: %[[TB:.*]] = graph.transfer %[[B]] {graph.device = 2 : i64, source = 1 : i64, target = 2 : i64}
  // CHECK: graph.add %[[TB]], %[[T2]] {graph.device = 2
  // CHECK-NOT: graph.transfer
  %a = graph.relu %x {graph.device = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %b = graph.mul %a, %a {graph.device = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = graph.add %b, %a {graph.device = 2 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %c : tensor<4xf32>
}

// With at-first-use (training pipelines) each transfer goes right before
// its first reader on the destination, marked so that the sender still
// sends right after computing the value.
// AT-USE-LABEL: func @main
// AT-USE: %[[A:.*]] = graph.relu %arg0 {graph.device = 0
// AT-USE: %[[T1:.*]] = graph.transfer %[[A]] {graph.device = 1 : i64, graph.receive_at_use, source = 0 : i64, target = 1 : i64}
// AT-USE: %[[B:.*]] = graph.mul %[[T1]], %[[T1]] {graph.device = 1
// AT-USE: %[[TB:.*]] = graph.transfer %[[B]] {graph.device = 2 : i64, graph.receive_at_use, source = 1 : i64, target = 2 : i64}
// AT-USE: %[[T2:.*]] = graph.transfer %[[A]] {graph.device = 2 : i64, graph.receive_at_use, source = 0 : i64, target = 2 : i64}
// AT-USE: graph.add %[[TB]], %[[T2]] {graph.device = 2
