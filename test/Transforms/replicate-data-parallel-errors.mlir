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

// -----

// Tests that a softmax over the batch is refused after a transpose moved
// the batch to dimension 1.
func.func @main(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %t = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  // expected-error@+1 {{'graph.softmax' (ONNX node '') cannot be split along the batch: it normalizes over the batch dimension}}
  %a = graph.softmax %t {axis = 1 : i64} : (tensor<6x4xf32>) -> tensor<6x4xf32>
  %y = graph.transpose %a {perm = array<i64: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

// Tests that an output must carry the batch in dimension 0: the slices are
// concatenated there.
func.func @main(%x: tensor<4x6xf32>) -> tensor<6x4xf32> {
  // expected-error@+1 {{cannot be split along the batch: a model output carries the batch in dimension 1 instead of dimension 0}}
  %t = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  return %t : tensor<6x4xf32>
}

// -----

// Tests that a reshape splitting the batch's extent is refused.
func.func @main(%x: tensor<4x6xf32>) -> tensor<2x12xf32> {
  // expected-error@+1 {{cannot be split along the batch: it reshapes across the batch dimension}}
  %r = graph.reshape %x {shape = array<i64: 2, 12>} : (tensor<4x6xf32>) -> tensor<2x12xf32>
  return %r : tensor<2x12xf32>
}

// -----

// Tests that a convolution needs the batch in dimension 0.
func.func @main(%x: tensor<4x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %w = graph.constant {value = dense<1.0> : tensor<1x4x1x1xf32>} : () -> tensor<1x4x1x1xf32>
  %t = graph.transpose %x {perm = array<i64: 1, 0, 2, 3>} : (tensor<4x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  // expected-error@+1 {{cannot be split along the batch: it needs the batch in dimension 0, but operand #0 carries it in dimension 1}}
  %c = graph.conv %t, %w {pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x4x4xf32>, tensor<1x4x1x1xf32>) -> tensor<1x1x4x4xf32>
  return %c : tensor<1x1x4x4xf32>
}

// -----

// Tests that a strided matmul contracting over the batch (x^T x) is
// refused.
func.func @main(%x: tensor<4x6xf32>) -> tensor<1x6x6xf32> {
  // expected-error@+1 {{cannot be split along the batch: it contracts over the batch dimension}}
  %g = graph.strided_matmul %x, %x {lhs_shape = array<i64: 1, 6, 4>, lhs_strides = array<i64: 0, 1, 6>, lhs_offset = 0 : i64, rhs_shape = array<i64: 1, 4, 6>, rhs_strides = array<i64: 0, 6, 1>, rhs_offset = 0 : i64, perm = array<i64: 0, 1, 2>, shape = array<i64: 1, 6, 6>} : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<1x6x6xf32>
  return %g : tensor<1x6x6xf32>
}

// -----

// Tests that a constant spanning the batch with different rows per sample
// stays shared, so the op that combines it with the batch is refused.
func.func @main(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %c = graph.constant {value = dense<[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.0, 2.0, 3.0]]> : tensor<4x3xf32>} : () -> tensor<4x3xf32>
  // expected-error@+1 {{cannot be split along the batch: operand #1 is not batched but spans the batch dimension}}
  %a = graph.add %x, %c : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %a : tensor<4x3xf32>
}

// -----

// Tests that a gather_nd addressing samples of the batch by position is not
// split (its tuples are not in order, so it stays a gather_nd).
func.func @main(%x: tensor<4x3xf32>) -> tensor<4x1xf32> {
  %i = graph.constant {value = dense<[[[3, 0]], [[2, 0]], [[1, 0]], [[0, 0]]]> : tensor<4x1x2xi64>} : () -> tensor<4x1x2xi64>
  // expected-error@+1 {{cannot be split along the batch: its index tuples address samples of the batch by position}}
  %g = graph.gather_nd %x, %i : (tensor<4x3xf32>, tensor<4x1x2xi64>) -> tensor<4x1xf32>
  return %g : tensor<4x1xf32>
}

// -----

// Tests that a softmax whose bias differs per sample, but is not batched,
// cannot be replicated.
func.func @main(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %m = graph.constant {value = dense<[[0.0], [1.0], [2.0], [3.0]]> : tensor<4x1xf32>} : () -> tensor<4x1xf32>
  // expected-error@+1 {{cannot be split along the batch: operand #1 is not batched but spans the batch dimension}}
  %a = graph.softmax %x, %m {axis = 1 : i64} : (tensor<4x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  return %a : tensor<4x6xf32>
}
