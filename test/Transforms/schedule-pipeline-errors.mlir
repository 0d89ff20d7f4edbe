// RUN: partc-opt %s --partc-schedule-pipeline="micro-batches=2" --split-input-file --verify-diagnostics
// RUN: not partc-opt %s --split-input-file --partc-schedule-pipeline="micro-batches=2 schedule=1f1b" 2>&1 | FileCheck %s --check-prefix=SCHED

// Tests that ops must be placed before pipelining.
func.func @main(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // expected-error@+1 {{is not placed; run partc-assign-devices first}}
  %a = graph.relu %x : (tensor<4x6xf32>) -> tensor<4x6xf32>
  return %a : tensor<4x6xf32>
}

// -----

// Tests that an op mixing samples of the batch is named with the reason.
func.func @main(%x: tensor<4x6xf32>) -> tensor<1x6xf32> {
  // expected-error@+1 {{pipelining needs ops that treat samples independently, but 'graph.reduce_sum' (ONNX node '') cannot be split along the batch: it reduces over the batch dimension}}
  %a = graph.reduce_sum %x {axes = array<i64: 0>, keepdims = 1 : i64, graph.device = 0 : i64} : (tensor<4x6xf32>) -> tensor<1x6xf32>
  return %a : tensor<1x6xf32>
}

// -----

// Tests that the batch must have at least one sample per micro-batch.
// expected-error@+1 {{pipelining: batch 1 is smaller than 2 parts; raise --batch or use fewer parts}}
func.func @main(%x: tensor<1x6xf32>) -> tensor<1x6xf32> {
  %a = graph.relu %x {graph.device = 0 : i64} : (tensor<1x6xf32>) -> tensor<1x6xf32>
  return %a : tensor<1x6xf32>
}

// SCHED: pipeline schedule '1f1b' is not supported for inference

