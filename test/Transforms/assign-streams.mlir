// RUN: partc-opt %s --partc-assign-streams --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-assign-streams="max-streams=2" --split-input-file | FileCheck %s --check-prefix=TWO
// RUN: partc-opt %s --partc-assign-streams="max-streams=1" --split-input-file | FileCheck %s --check-prefix=ONE

// Tests that three small branches of one input, joined by a concat, run
// on streams of their own: the longest (two products) on stream 0, where
// the join runs, the others on 1 and 2 (with two streams, both on 1).
// Stream 0's branch moves just before the join, after the side branches.
// CHECK-LABEL: func @small_branches
// CHECK: graph.matmul %arg0, %arg2 {graph.device = 0 : i64, graph.stream = 1 : i64}
// CHECK: graph.neg %arg0 {graph.device = 0 : i64, graph.stream = 2 : i64}
// CHECK: %[[A:.*]] = graph.matmul %arg0, %arg1 {graph.device = 0 : i64, graph.stream = 0 : i64}
// CHECK: graph.relu %[[A]] {graph.device = 0 : i64, graph.stream = 0 : i64}
// CHECK: graph.concat {{.*}} {axis = 1 : i64, graph.device = 0 : i64} :
// TWO-LABEL: func @small_branches
// TWO: graph.matmul %arg0, %arg2 {graph.device = 0 : i64, graph.stream = 1 : i64}
// TWO: graph.neg %arg0 {graph.device = 0 : i64, graph.stream = 1 : i64}
// TWO: graph.stream = 0
// TWO: graph.stream = 0
// ONE-LABEL: func @small_branches
// ONE-NOT: graph.stream
func.func @small_branches(%x: tensor<8x64xf32>, %w1: tensor<64x64xf32>, %w2: tensor<64x64xf32>) -> tensor<8x192xf32> {
  %a = graph.matmul %x, %w1 {graph.device = 0 : i64} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %r = graph.relu %a {graph.device = 0 : i64} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %b = graph.matmul %x, %w2 {graph.device = 0 : i64} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %n = graph.neg %x {graph.device = 0 : i64} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %j = graph.concat %r, %b, %n {axis = 1 : i64, graph.device = 0 : i64} : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x192xf32>
  return %j : tensor<8x192xf32>
}

// -----

// Tests that branches whose products each fill the device stay on one
// stream: side by side they would take as long.
// CHECK-LABEL: func @large_branches
// CHECK-NOT: graph.stream
func.func @large_branches(%x: tensor<8192x4096xf32>, %w1: tensor<4096x4096xf32>, %w2: tensor<4096x4096xf32>) -> tensor<8192x4096xf32> {
  %a = graph.matmul %x, %w1 {graph.device = 0 : i64} : (tensor<8192x4096xf32>, tensor<4096x4096xf32>) -> tensor<8192x4096xf32>
  %b = graph.matmul %x, %w2 {graph.device = 0 : i64} : (tensor<8192x4096xf32>, tensor<4096x4096xf32>) -> tensor<8192x4096xf32>
  %j = graph.add %a, %b {graph.device = 0 : i64} : (tensor<8192x4096xf32>, tensor<8192x4096xf32>) -> tensor<8192x4096xf32>
  return %j : tensor<8192x4096xf32>
}

// -----

// Tests that a fork whose branches meet two at a time before the rest is
// left alone, and that a residual connection (the join reads the fork's
// result itself, one branch beside it) has nothing to run side by side.
// CHECK-LABEL: func @no_region
// CHECK-NOT: graph.stream
func.func @no_region(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %a = graph.neg %x {graph.device = 0 : i64} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %b = graph.exp %x {graph.device = 0 : i64} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %c = graph.abs %x {graph.device = 0 : i64} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %ab = graph.add %a, %b {graph.device = 0 : i64} : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %abc = graph.add %ab, %c {graph.device = 0 : i64} : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %r = graph.relu %abc {graph.device = 0 : i64} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %s = graph.sigmoid %r {graph.device = 0 : i64} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %y = graph.add %s, %abc {graph.device = 0 : i64} : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

// Tests that the predicted gain comes off the step placement predicted:
// the two devices are stages of one pipeline (device_stages), which run
// one after another, so both gains (7 us each) count against the step and
// the larger against the period, a quarter of each (what steps show); the
// one-stream figures are kept beside them. One stream leaves the
// predictions alone.
// CHECK-LABEL: module attributes {graph.placement = {branch_regions = "2"
// CHECK-SAME: branch_saving_ms = "0.0140"
// CHECK-SAME: predicted_period_ms = "0.9982"
// CHECK-SAME: predicted_period_ms_one_stream = "1.0"
// CHECK-SAME: predicted_step_ms = "1.9965"
// CHECK-SAME: predicted_step_ms_one_stream = "2.0"
// ONE-LABEL: module attributes {graph.placement = {device_stages = "0,1", predicted_period_ms = "1.0", predicted_step_ms = "2.0"}}
module attributes {graph.placement = {device_stages = "0,1", predicted_period_ms = "1.0", predicted_step_ms = "2.0"}} {
  func.func @two_stages(%x: tensor<8x64xf32>, %w1: tensor<64x64xf32>, %w2: tensor<64x64xf32>) -> tensor<8x128xf32> {
    %a = graph.matmul %x, %w1 {graph.device = 0 : i64} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %b = graph.matmul %x, %w2 {graph.device = 0 : i64} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %j = graph.concat %a, %b {axis = 1 : i64, graph.device = 0 : i64} : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x128xf32>
    %t = graph.transfer %j {graph.device = 1 : i64, source = 0 : i64, target = 1 : i64} : (tensor<8x128xf32>) -> tensor<8x128xf32>
    %c = graph.neg %t {graph.device = 1 : i64} : (tensor<8x128xf32>) -> tensor<8x128xf32>
    %d = graph.exp %t {graph.device = 1 : i64} : (tensor<8x128xf32>) -> tensor<8x128xf32>
    %y = graph.add %c, %d {graph.device = 1 : i64} : (tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x128xf32>
    return %y : tensor<8x128xf32>
  }
}
