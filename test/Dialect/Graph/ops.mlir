// RUN: partc-opt %s | partc-opt | FileCheck %s

// Tests that every op family prints and parses back with inferred types.
// CHECK-LABEL: func @round_trip
func.func @round_trip(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>,
                      %b: tensor<4xf32>, %i: tensor<2xi64>) -> tensor<2x4xf32> {
  // CHECK: graph.conv %{{.*}}, %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}
  %c = graph.conv %x, %w, %b {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: graph.relu
  %r = graph.relu %c : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: graph.max_pool
  %p = graph.max_pool %r {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: graph.global_avg_pool
  %g = graph.global_avg_pool %p : (tensor<2x4x4x4xf32>) -> tensor<2x4x1x1xf32>
  // CHECK: graph.reshape {{.*}} -> tensor<2x4xf32>
  %f = graph.reshape %g {shape = array<i64: 2, 4>} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  // CHECK: graph.gather
  %e = graph.gather %f, %i {axis = 0 : i64} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  // CHECK: graph.greater {{.*}} -> tensor<2x4xi1>
  %m = graph.greater %e, %f : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
  // CHECK: graph.where
  %s = graph.where %m, %e, %f : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  // CHECK: graph.softmax {{.*}}axis = 1
  %o = graph.softmax %s {axis = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %o : tensor<2x4xf32>
}

// -----

// Tests placement attributes and a transfer between devices.
// CHECK-LABEL: func @placed
func.func @placed(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: graph.neg %{{.*}} {graph.device = 0 : i64}
  %a = graph.neg %x {graph.device = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  // CHECK: graph.transfer %{{.*}} {graph.device = 1 : i64, source = 0 : i64, target = 1 : i64}
  %t = graph.transfer %a {graph.device = 1 : i64, source = 0 : i64, target = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %b = graph.exp %t {graph.device = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// Tests multi-result split and normalized slices.
// CHECK-LABEL: func @split_slice
func.func @split_slice(%x: tensor<6x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>, tensor<3x2xf32>) {
  // CHECK: graph.split {{.*}} -> (tensor<2x4xf32>, tensor<4x4xf32>)
  %a, %b = graph.split %x {axis = 0 : i64, sizes = array<i64: 2, 4>} : (tensor<6x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>)
  // CHECK: graph.slice {{.*}} -> tensor<3x2xf32>
  %s = graph.slice %x {starts = array<i64: 5, 0>, ends = array<i64: -1, 4>, steps = array<i64: -2, 2>} : (tensor<6x4xf32>) -> tensor<3x2xf32>
  return %a, %b, %s : tensor<2x4xf32>, tensor<4x4xf32>, tensor<3x2xf32>
}

// -----

// Tests the index-tuple ops and float tests with their inferred types.
// CHECK-LABEL: func @index_tuples
func.func @index_tuples(%x: tensor<2x3x4xf32>, %i: tensor<2x5x1xi64>, %t: tensor<6x2xi32>, %u: tensor<6x4xf32>) -> (tensor<2x5x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xi1>, tensor<2x3x4xi1>) {
  // CHECK: graph.gather_nd {{.*}}batch_dims = 1{{.*}} -> tensor<2x5x4xf32>
  %g = graph.gather_nd %x, %i {batch_dims = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x1xi64>) -> tensor<2x5x4xf32>
  // CHECK: graph.scatter_nd {{.*}}reduction = "add"{{.*}} -> tensor<2x3x4xf32>
  %s = graph.scatter_nd %x, %t, %u {reduction = "add"} : (tensor<2x3x4xf32>, tensor<6x2xi32>, tensor<6x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: graph.is_nan {{.*}} -> tensor<2x3x4xi1>
  %n = graph.is_nan %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xi1>
  // CHECK: graph.is_inf {{.*}}detect_positive = false{{.*}} -> tensor<2x3x4xi1>
  %f = graph.is_inf %x {detect_positive = false} : (tensor<2x3x4xf32>) -> tensor<2x3x4xi1>
  return %g, %s, %n, %f : tensor<2x5x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xi1>, tensor<2x3x4xi1>
}

// -----

// Tests that gather_elements, resize and the activations defined through
// ElementwiseOps.h round-trip, defaults elided.
// CHECK-LABEL: func @resample_and_activations
func.func @resample_and_activations(%x: tensor<1x2x4x4xf32>, %i: tensor<1x1x4x4xi64>) -> (tensor<1x1x4x4xf32>, tensor<1x2x8x6xf32>, tensor<1x2x4x4xf32>) {
  // CHECK: graph.gather_elements {{.*}}{axis = 1 : i64}{{.*}} -> tensor<1x1x4x4xf32>
  %g = graph.gather_elements %x, %i {axis = 1 : i64} : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xi64>) -> tensor<1x1x4x4xf32>
  // CHECK: graph.resize {{.*}}{mode = "linear", scales = array<f64: 1.000000e+00, 1.000000e+00, 2.000000e+00, 1.500000e+00>, sizes = array<i64: 1, 2, 8, 6>}
  %r = graph.resize %x {mode = "linear", coordinate_transformation_mode = "half_pixel", scales = array<f64: 1.0, 1.0, 2.0, 1.5>, sizes = array<i64: 1, 2, 8, 6>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x8x6xf32>
  // CHECK: graph.selu %{{.*}} {gamma = 2.000000e+00 : f64}
  %s = graph.selu %x {gamma = 2.0 : f64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  // CHECK: graph.mish
  %m = graph.mish %s : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  return %g, %r, %m : tensor<1x1x4x4xf32>, tensor<1x2x8x6xf32>, tensor<1x2x4x4xf32>
}

// Tests that the backward window ops infer the forward input's and
// weight's shapes (a stride of 2 drops a row of the 5x5 input, which
// input_shape keeps), and pooling's gradient the pooled input's.
// CHECK-LABEL: func @window_gradients
func.func @window_gradients(%x: tensor<1x2x5x5xf32>, %dy: tensor<1x4x2x2xf32>, %w: tensor<4x1x3x3xf32>, %dp: tensor<1x2x2x2xf32>) -> (tensor<1x2x5x5xf32>, tensor<4x1x3x3xf32>, tensor<1x2x5x5xf32>, tensor<1x2x5x5xf32>) {
  // CHECK: graph.conv_grad_input {{.*}} -> tensor<1x2x5x5xf32>
  %a = graph.conv_grad_input %dy, %w {input_shape = array<i64: 1, 2, 5, 5>, group = 2 : i64, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x2x2xf32>, tensor<4x1x3x3xf32>) -> tensor<1x2x5x5xf32>
  // CHECK: graph.conv_grad_weight {{.*}} -> tensor<4x1x3x3xf32>
  %b = graph.conv_grad_weight %x, %dy {weight_shape = array<i64: 4, 1, 3, 3>, group = 2 : i64, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<1x4x2x2xf32>) -> tensor<4x1x3x3xf32>
  // CHECK: graph.max_pool_grad {{.*}} -> tensor<1x2x5x5xf32>
  %c = graph.max_pool_grad %dp, %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x2x2xf32>, tensor<1x2x5x5xf32>) -> tensor<1x2x5x5xf32>
  // CHECK: graph.avg_pool_grad {{.*}}count_include_pad = 1 : i64{{.*}} -> tensor<1x2x5x5xf32>
  %d = graph.avg_pool_grad %dp {input_shape = array<i64: 1, 2, 5, 5>, kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, count_include_pad = 1 : i64} : (tensor<1x2x2x2xf32>) -> tensor<1x2x5x5xf32>
  return %a, %b, %c, %d : tensor<1x2x5x5xf32>, tensor<4x1x3x3xf32>, tensor<1x2x5x5xf32>, tensor<1x2x5x5xf32>
}

// Tests that dropout round-trips with its step, seed and stream and keeps
// its operand's type.
// CHECK-LABEL: func @dropout
// CHECK: graph.dropout %arg0, %arg1, %arg2 {ratio = 1.000000e-01 : f64, stream = 2 : i64} : (tensor<2x3xf64>, tensor<i64>, tensor<i64>) -> tensor<2x3xf64>
func.func @dropout(%x: tensor<2x3xf64>, %step: tensor<i64>, %seed: tensor<i64>) -> tensor<2x3xf64> {
  %y = graph.dropout %x, %step, %seed {ratio = 0.1 : f64, stream = 2 : i64} : (tensor<2x3xf64>, tensor<i64>, tensor<i64>) -> tensor<2x3xf64>
  return %y : tensor<2x3xf64>
}

// -----

// Tests that the axis ops and the transposed convolution round-trip,
// defaults elided.
// CHECK-LABEL: func @axis_ops
func.func @axis_ops(%x: tensor<2x5xf32>, %y: tensor<1x4x3x3xf32>, %w: tensor<4x2x3x3xf32>) -> (tensor<2xi64>, tensor<2x1xi64>, tensor<2x5xf32>, tensor<2x2xf32>, tensor<2x2xi64>, tensor<1x4x5x5xf32>) {
  // CHECK: graph.arg_max %{{.*}} {axis = 1 : i64, keepdims = 0 : i64} : (tensor<2x5xf32>) -> tensor<2xi64>
  %a = graph.arg_max %x {axis = 1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<2x5xf32>) -> tensor<2xi64>
  // CHECK: graph.arg_min %{{.*}} {axis = 1 : i64, select_last_index = 1 : i64} : (tensor<2x5xf32>) -> tensor<2x1xi64>
  %b = graph.arg_min %x {axis = 1 : i64, select_last_index = 1 : i64} : (tensor<2x5xf32>) -> tensor<2x1xi64>
  // CHECK: graph.cum_sum %{{.*}} {axis = 1 : i64, reverse = 1 : i64}
  %c = graph.cum_sum %x {axis = 1 : i64, exclusive = 0 : i64, reverse = 1 : i64} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  // CHECK: %{{.*}}, %{{.*}} = graph.top_k %{{.*}} {axis = 1 : i64, k = 2 : i64, largest = 0 : i64} : (tensor<2x5xf32>) -> (tensor<2x2xf32>, tensor<2x2xi64>)
  %v, %i = graph.top_k %x {axis = 1 : i64, k = 2 : i64, largest = 0 : i64} : (tensor<2x5xf32>) -> (tensor<2x2xf32>, tensor<2x2xi64>)
  // CHECK: graph.conv_grad_input {{.*}}group = 2 : i64, input_shape = array<i64: 1, 4, 5, 5>
  %t = graph.conv_grad_input %y, %w {input_shape = array<i64: 1, 4, 5, 5>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x4x3x3xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x5x5xf32>
  return %a, %b, %c, %v, %i, %t : tensor<2xi64>, tensor<2x1xi64>, tensor<2x5xf32>, tensor<2x2xf32>, tensor<2x2xi64>, tensor<1x4x5x5xf32>
}
