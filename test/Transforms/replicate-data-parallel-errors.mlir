// RUN: partc-opt %s --partc-replicate-data-parallel="replicas=2" --split-input-file --verify-diagnostics

// Tests that a softmax over the batch cannot be replicated.
func.func @main(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // expected-error@+1 {{data parallelism needs ops that treat samples independently, but 'graph.softmax' (ONNX node '') cannot be split along the batch: it normalizes over the batch dimension}}
  %a = graph.softmax %x {axis = 0 : i64} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  return %a : tensor<4x6xf32>
}

// -----

// Tests that a graph without inputs has no batch to split.
// expected-error@+1 {{data parallelism: the model has no input with a batch dimension to split}}
func.func @main() -> tensor<2xf32> {
  %c = graph.constant {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  return %c : tensor<2xf32>
}

// -----

// Tests that max pooling with indices is not split: its indices count
// positions across the whole batch.
func.func @main(%x: tensor<4x1x4x4xf32>) -> (tensor<4x1x2x2xf32>, tensor<4x1x2x2xi64>) {
  // expected-error@+1 {{cannot be split along the batch: its indices count positions across the whole batch}}
  %v, %i = graph.max_pool_with_indices %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<4x1x4x4xf32>) -> (tensor<4x1x2x2xf32>, tensor<4x1x2x2xi64>)
  return %v, %i : tensor<4x1x2x2xf32>, tensor<4x1x2x2xi64>
}
