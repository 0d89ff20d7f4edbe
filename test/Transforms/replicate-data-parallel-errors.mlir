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
