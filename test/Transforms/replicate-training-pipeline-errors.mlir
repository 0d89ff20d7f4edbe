// RUN: partc-opt %s --partc-replicate-training="stages=2 micro-batches=2" --split-input-file --verify-diagnostics
// RUN: not partc-opt %s --partc-replicate-training="stages=2 schedule=zb" --split-input-file 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// SCHEDULE: unknown pipeline schedule 'zb'; expected gpipe or 1f1b

// Tests that an op without a stage is refused, with the pass to run first.
func.func @main(%x: tensor<2x3xf32> {graph.batch_slice = 2 : i64}) -> tensor<f32> {
  // expected-error@+1 {{'graph.reduce_mean' op has no pipeline stage in [0, 2) (got none); run partc-assign-devices with num-devices=2 on the forward graph before partc-prepare-training}}
  %loss = graph.reduce_mean %x {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that a stage beyond the pipeline's is refused.
func.func @main(%x: tensor<2x3xf32> {graph.batch_slice = 2 : i64}) -> tensor<f32> {
  // expected-error@+1 {{'graph.reduce_mean' op has no pipeline stage in [0, 2) (got 2)}}
  %loss = graph.reduce_mean %x {axes = array<i64: 0, 1>, keepdims = 0 : i64, graph.device = 2 : i64} : (tensor<2x3xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
