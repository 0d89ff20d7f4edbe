// RUN: partc-opt %s --partc-replicate-training="replicas=2" --split-input-file --verify-diagnostics

// Tests that a graph not sliced for the replicas is refused, with the pass
// to run first.
// expected-error@+1 {{no input holds a slice of the batch; run partc-slice-batch with parts=2 before partc-prepare-training}}
func.func @main(%x: tensor<2x3xf32>) -> tensor<f32> {
  %loss = graph.reduce_mean %x {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that a graph sliced for another number of replicas is refused.
// expected-error@+1 {{input 0 holds one of 4 slices of the batch, but 2 replica(s) of 1 micro-batch(es) were asked for; run partc-slice-batch with parts=2}}
func.func @main(%x: tensor<2x3xf32> {graph.batch_slice = 4 : i64}) -> tensor<f32> {
  %loss = graph.reduce_mean %x {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that a step returning something the replicas cannot average (an
// integer) is refused.
// expected-error@+1 {{result 0 is 'tensor<2x3xi64>'; a replicated or pipelined training step returns f32 losses and gradients, which it averages}}
func.func @main(%x: tensor<2x3xf32> {graph.batch_slice = 2 : i64}) -> tensor<2x3xi64> {
  %i = graph.cast %x {to = i64} : (tensor<2x3xf32>) -> tensor<2x3xi64>
  return %i : tensor<2x3xi64>
}
