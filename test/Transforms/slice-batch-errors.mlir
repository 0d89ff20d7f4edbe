// RUN: partc-opt %s --partc-slice-batch="parts=4" --split-input-file --verify-diagnostics

// Tests that a batch the replicas cannot share equally is refused with the
// numbers.
// expected-error@+1 {{training on slices of the batch (replicas x micro-batches): batch 6 does not divide into 4 equal slices; choose a --batch that 4 divides}}
func.func @main(%x: tensor<6x8xf32>) -> tensor<6x8xf32> {
  %y = graph.relu %x : (tensor<6x8xf32>) -> tensor<6x8xf32>
  return %y : tensor<6x8xf32>
}

// -----

// Tests that an op mixing samples is named, with the way out.
func.func @main(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // expected-error@+1 {{training on slices of the batch (replicas x micro-batches) needs ops that treat samples independently, but 'graph.softmax' (ONNX node '') cannot be split along the batch: it normalizes over the batch dimension; train it on one device without micro-batches (--devices 1 --micro-batches 1)}}
  %a = graph.softmax %x {axis = 0 : i64} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  return %a : tensor<4x6xf32>
}

// -----

// Tests that a graph without inputs has no batch to slice.
// expected-error@+1 {{training on slices of the batch (replicas x micro-batches): the model has no input with a batch dimension to split}}
func.func @main() -> tensor<2xf32> {
  %c = graph.constant {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  return %c : tensor<2xf32>
}
