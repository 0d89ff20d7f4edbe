// RUN: partc-opt %s --split-input-file --verify-diagnostics

// Tests that a declared result type must match the inferred one.
func.func @wrong_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x2xf32> {
  // expected-error@+2 {{'graph.add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x2xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// Tests that shapes which do not broadcast are rejected with both shapes.
func.func @no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error@+2 {{shapes [2,3] and [4] do not broadcast}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that convolution channels must match the weight and group.
func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error@+2 {{input channels 3 do not match weight [4,2,3,3] with group 1}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// Tests that a reshape must keep the element count.
func.func @reshape_count(%x: tensor<2x3xf32>) -> tensor<7xf32> {
  // expected-error@+2 {{cannot reshape [2,3] (6 elements) to [7]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.reshape %x {shape = array<i64: 7>} : (tensor<2x3xf32>) -> tensor<7xf32>
  return %0 : tensor<7xf32>
}

// -----

// Tests that a transfer must move between two distinct devices.
func.func @transfer_same(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{moves from device 1 to device 1; both must be distinct device indices >= 0}}
  %0 = graph.transfer %x {source = 1 : i64, target = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that only slices and concats may run on the host.
func.func @host_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{only graph.slice and graph.concat can run on the host (device -1); place 'graph.relu' on a device}}
  %0 = graph.relu %x {graph.device = -1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that device indices are integers.
func.func @bad_device(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'graph.device' must be an integer >= -1, got "gpu0"}}
  %0 = graph.relu %x {graph.device = "gpu0"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that only a transfer is received at its first reader.
func.func @receive_at_use_on_relu(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'graph.receive_at_use' is a unit attribute of graph.transfer}}
  %0 = graph.relu %x {graph.receive_at_use} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that an out-of-bounds slice is rejected.
func.func @slice_bounds(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error@+2 {{slice [3:5:1] is out of bounds for dimension 0 of size 4}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.slice %x {starts = array<i64: 3>, ends = array<i64: 5>, steps = array<i64: 1>} : (tensor<4xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that a matmul's fused bias must hold one value per result column.
func.func @matmul_row_bias(%x: tensor<3x4xf32>, %w: tensor<4x5xf32>, %b: tensor<3x1xf32>) -> tensor<3x5xf32> {
  // expected-error@+2 {{bias [3,1] must hold one value per result column (5)}}
  // expected-error@+1 {{failed to infer returned types}}
  %m = graph.matmul %x, %w, %b : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<3x1xf32>) -> tensor<3x5xf32>
  return %m : tensor<3x5xf32>
}

// -----

// Tests that IsNaN needs a floating-point operand.
func.func @is_nan_int(%x: tensor<4xi64>) -> tensor<4xi1> {
  // expected-error@+2 {{needs a floating-point operand, got i64}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.is_nan %x : (tensor<4xi64>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// Tests that GatherND's index tuples must fit the data.
func.func @gather_nd_long_tuples(%x: tensor<2x3xf32>, %i: tensor<4x3xi64>) -> tensor<4xf32> {
  // expected-error@+2 {{index tuples of length 3 after 0 batch dimension(s) do not fit data [2,3]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.gather_nd %x, %i : (tensor<2x3xf32>, tensor<4x3xi64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that GatherND's batch dimensions must agree.
func.func @gather_nd_batch(%x: tensor<2x3xf32>, %i: tensor<3x1xi64>) -> tensor<3xf32> {
  // expected-error@+2 {{batch dimension 0 differs: data [2,3], indices [3,1]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.gather_nd %x, %i {batch_dims = 1 : i64} : (tensor<2x3xf32>, tensor<3x1xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// Tests that ScatterND's updates must match the addressed slices.
func.func @scatter_nd_updates(%x: tensor<4x2xf32>, %i: tensor<3x1xi64>, %u: tensor<3x4xf32>) -> tensor<4x2xf32> {
  // expected-error@+2 {{updates [3,4] should be [3,2] of the data's element type}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.scatter_nd %x, %i, %u : (tensor<4x2xf32>, tensor<3x1xi64>, tensor<3x4xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

// Tests that ScatterND names the reductions it knows.
func.func @scatter_nd_reduction(%x: tensor<4xf32>, %i: tensor<1x1xi64>, %u: tensor<1xf32>) -> tensor<4xf32> {
  // expected-error@+2 {{unknown reduction 'sum' (none, add, mul, max or min)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.scatter_nd %x, %i, %u {reduction = "sum"} : (tensor<4xf32>, tensor<1x1xi64>, tensor<1xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a softmax's bias must broadcast to its input.
func.func @softmax_bias(%x: tensor<2x4xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  // expected-error@+2 {{bias tensor<3x4xf32> does not broadcast to tensor<2x4xf32>; hint: the bias is added to the input before the softmax}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.softmax %x, %b {axis = 1 : i64} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that Resize names the modes partc implements.
func.func @resize_cubic(%x: tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32> {
  // expected-error@+2 {{mode 'cubic' is not supported (nearest or linear)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.resize %x {mode = "cubic", scales = array<f64: 1.0, 1.0, 2.0, 2.0>, sizes = array<i64: 1, 1, 4, 4>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32>
  return %0 : tensor<1x1x4x4xf32>
}

// -----

// Tests that Resize needs a size and a scale per dimension.
func.func @resize_rank(%x: tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32> {
  // expected-error@+2 {{needs sizes and scales for each of the 4 dimensions}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.resize %x {scales = array<f64: 2.0, 2.0>, sizes = array<i64: 1, 1, 4, 4>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32>
  return %0 : tensor<1x1x4x4xf32>
}

// -----

// Tests that GatherElements takes indices of the data's rank.
func.func @gather_elements_rank(%x: tensor<2x3xf32>, %i: tensor<2xi64>) -> tensor<2xf32> {
  // expected-error@+2 {{must have the same rank}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.gather_elements %x, %i {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that a convolution's input gradient must be what the forward op
// made of the input shape it names.
func.func @conv_grad_input_shape(%dy: tensor<1x2x3x3xf32>, %w: tensor<2x1x3x3xf32>) -> tensor<1x1x4x4xf32> {
  // expected-error@+2 {{gradient tensor<1x2x3x3xf32> is not what the forward op makes of input tensor<1x1x4x4xf32> (tensor<1x2x2x2xf32>)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.conv_grad_input %dy, %w {input_shape = array<i64: 1, 1, 4, 4>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x3x3xf32>, tensor<2x1x3x3xf32>) -> tensor<1x1x4x4xf32>
  return %0 : tensor<1x1x4x4xf32>
}

// -----

// Tests that a weight gradient checks the group as the convolution does.
func.func @conv_grad_weight_group(%x: tensor<1x3x4x4xf32>, %dy: tensor<1x2x2x2xf32>) -> tensor<2x1x3x3xf32> {
  // expected-error@+2 {{input channels 3 do not match weight tensor<2x1x3x3xf32> with group 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.conv_grad_weight %x, %dy {weight_shape = array<i64: 2, 1, 3, 3>, group = 2 : i64, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<1x2x2x2xf32>) -> tensor<2x1x3x3xf32>
  return %0 : tensor<2x1x3x3xf32>
}

// -----

// Tests that batch_norm_train needs one scale per channel.
func.func @batch_norm_train_scale(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>) -> tensor<2x3x4xf32> {
  // expected-error@+2 {{operand 1 tensor<4xf32> must hold one f32 per channel (3)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:3 = graph.batch_norm_train %x, %s, %s : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %0#0 : tensor<2x3x4xf32>
}

// -----

// Tests that running statistics are updated in place, so they must be
// variables.
func.func @running_stats_not_variable(%m: tensor<3xf32>) {
  %v = graph.variable {name = "v", role = "running_var"} : tensor<3xf32>
  // expected-error@+1 {{updates operand 0 in place, so it must be a graph.variable}}
  graph.update_running_stats %m, %v, %m, %m {momentum = 0.1 : f64, count = 8 : i64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  return
}

// -----

// Tests that the unbiased variance needs two values per channel.
func.func @running_stats_count() {
  %m = graph.variable {name = "m", role = "running_mean"} : tensor<3xf32>
  %v = graph.variable {name = "v", role = "running_var"} : tensor<3xf32>
  // expected-error@+1 {{averages 1 values per channel; the unbiased variance needs at least 2}}
  graph.update_running_stats %m, %v, %m, %v {momentum = 0.1 : f64, count = 1 : i64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  return
}

// -----

// Tests that dropout drops with a probability below 1.
func.func @dropout_ratio(%x: tensor<2x3xf32>, %s: tensor<i64>) -> tensor<2x3xf32> {
  // expected-error@+2 {{ratio 1.000000 must be in [0, 1) (the probability of dropping an element)}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = graph.dropout %x, %s, %s {ratio = 1.0 : f64} : (tensor<2x3xf32>, tensor<i64>, tensor<i64>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Tests that dropout's step is an int64 scalar.
func.func @dropout_step(%x: tensor<2x3xf32>, %s: tensor<1xi64>) -> tensor<2x3xf32> {
  // expected-error@+2 {{step tensor<1xi64> must be an int64 scalar (tensor<i64>)}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = graph.dropout %x, %s, %s {ratio = 0.5 : f64} : (tensor<2x3xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Tests that an all_reduce needs at least two distinct devices, among them
// its own, and f32 values.
func.func @all_reduce_one_device(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'graph.all_reduce' op averages over 1 device(s); a collective needs at least 2}}
  %a = graph.all_reduce %x {group = 0 : i64, devices = array<i64: 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

func.func @all_reduce_repeated_device(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'graph.all_reduce' op lists device 1 twice or below 0; devices must be distinct indices >= 0}}
  %a = graph.all_reduce %x {group = 0 : i64, devices = array<i64: 1, 1>} : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

func.func @all_reduce_elsewhere(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'graph.all_reduce' op is placed on device 2, which is not among its group's devices}}
  %a = graph.all_reduce %x {graph.device = 2 : i64, group = 0 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

func.func @all_reduce_integers(%x: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error@+1 {{'graph.all_reduce' op averages 'tensor<4xi64>'; only f32 tensors (gradients, losses) can be averaged so far}}
  %a = graph.all_reduce %x {group = 0 : i64, devices = array<i64: 0, 1>} : (tensor<4xi64>) -> tensor<4xi64>
  return %a : tensor<4xi64>
}

// -----

// Tests that a bucket's every tensor is checked, and that a bucket is not
// empty.
func.func @all_reduce_bucket_integers(%x: tensor<4xf32>, %y: tensor<2xi32>) -> (tensor<4xf32>, tensor<2xi32>) {
  // expected-error@+1 {{'graph.all_reduce' op averages 'tensor<2xi32>'; only f32 tensors (gradients, losses) can be averaged so far}}
  %a:2 = graph.all_reduce %x, %y {group = 0 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>, tensor<2xi32>) -> (tensor<4xf32>, tensor<2xi32>)
  return %a#0, %a#1 : tensor<4xf32>, tensor<2xi32>
}

// -----

func.func @all_reduce_nothing() {
  // expected-error@+1 {{'graph.all_reduce' op averages nothing; it needs at least one tensor}}
  graph.all_reduce {group = 0 : i64, devices = array<i64: 0, 1>} : () -> ()
  return
}

// -----

// Tests that an axis op refuses an axis outside the input's rank.
func.func @arg_max_axis(%x: tensor<2x3xf32>) -> tensor<2xi64> {
  // expected-error@+2 {{axis 2 is out of range for tensor<2x3xf32>; it must be in [0, 2)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.arg_max %x {axis = 2 : i64, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// Tests that ArgMin refuses an empty axis: there is no index to return.
func.func @arg_min_empty(%x: tensor<2x0xf32>) -> tensor<2xi64> {
  // expected-error@+2 {{is empty; there is no index to return}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.arg_min %x {axis = 1 : i64, keepdims = 0 : i64} : (tensor<2x0xf32>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// Tests that TopK refuses a k beyond the axis' extent.
func.func @top_k_too_many(%x: tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<2x4xi64>) {
  // expected-error@+2 {{k = 4 must lie in [0, 3], the extent of axis 1}}
  // expected-error@+1 {{failed to infer returned types}}
  %v, %i = graph.top_k %x {axis = 1 : i64, k = 4 : i64} : (tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<2x4xi64>)
  return %v, %i : tensor<2x4xf32>, tensor<2x4xi64>
}

// -----

// Tests that CumSum refuses a negative axis (axes are normalized at import).
func.func @cum_sum_negative_axis(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error@+2 {{axis -1 is out of range}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.cum_sum %x {axis = -1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that softmax's gradient needs the output's type and an axis in
// range.
func.func @softmax_grad_types(%dy: tensor<2x4xf32>, %y: tensor<2x5xf32>) {
  // expected-error@+2 {{gradient tensor<2x4xf32> must have the softmax output's type tensor<2x5xf32> (floats)}}
  // expected-error@+1 {{failed to infer returned types}}
  %dx = graph.softmax_grad %dy, %y {axis = 1 : i64} : (tensor<2x4xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @softmax_grad_axis(%dy: tensor<2x4xf32>, %y: tensor<2x4xf32>) {
  // expected-error@+2 {{axis 2 is out of range for rank 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %dx = graph.softmax_grad %dy, %y {axis = 2 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that layer norm's gradient needs a scale of the normalized shape
// (the gradient rule falls back to graph ops for other scales).
func.func @layer_norm_grad_scale(%dy: tensor<2x3x4xf32>, %x: tensor<2x3x4xf32>, %s: tensor<1x4xf32>) {
  // expected-error@+2 {{scale tensor<1x4xf32> must have the normalized dimensions' shape [4] and the input's element type}}
  // expected-error@+1 {{failed to infer returned types}}
  %dx, %ds, %db = graph.layer_norm_grad %dy, %x, %s {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<1x4xf32>) -> (tensor<2x3x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>)
  return
}

// -----

// Tests that a batch_dims past the data's rank is refused before it is
// added to anything (a fuzzed model asked for 2^63 - 1).
func.func @gather_nd_batch_dims_huge(%x: tensor<2x2xf32>, %i: tensor<2x2xi64>) {
  // expected-error@+2 {{batch_dims 9223372036854775807 must be in [0, 2], the rank of data [2,2]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.gather_nd %x, %i {batch_dims = 9223372036854775807 : i64} : (tensor<2x2xf32>, tensor<2x2xi64>) -> tensor<2xf32>
  return
}

// -----

// Tests that cross-entropy's classes fit in the rows of its logits.
func.func @cross_entropy_classes_past_rows(%x: tensor<4x8xf32>, %l: tensor<4xi64>) {
  // expected-error@+2 {{classes = 9 must be in [1, 8] (the logits tensor<4x8xf32> hold the classes first in each row)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = graph.softmax_cross_entropy %x, %l {classes = 9 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return
}
