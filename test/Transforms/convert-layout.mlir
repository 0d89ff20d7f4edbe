// RUN: partc-opt %s --partc-convert-layout --split-input-file | FileCheck %s

// Tests that a residual block runs channels last end to end: one transpose
// of the input, channels-last convolutions with pre-transposed weights, the
// residual add and ReLU between them, and global pooling as a reduction
// whose result only needs a view.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32> {
  %w = graph.constant {value = dense<1.0> : tensor<4x4x3x3xf32>} : () -> tensor<4x4x3x3xf32>
  %b = graph.constant {value = dense<0.5> : tensor<4xf32>} : () -> tensor<4xf32>
  // CHECK: %[[IN:.*]] = graph.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x8x8x4xf32>
  // CHECK: %[[C1:.*]] = graph.conv %[[IN]], %{{.*}}, %{{.*}} {channels_last, {{.*}}} : (tensor<2x8x8x4xf32>, tensor<4x3x3x4xf32>, tensor<4xf32>) -> tensor<2x8x8x4xf32>
  // CHECK: %[[R:.*]] = graph.relu %[[C1]] : (tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
  // CHECK: %[[C2:.*]] = graph.conv %[[R]], {{.*}}channels_last
  // CHECK: %[[A:.*]] = graph.add %[[C2]], %[[IN]] : (tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
  // CHECK: %[[M:.*]] = graph.reduce_mean %[[A]] {axes = array<i64: 1, 2>} : (tensor<2x8x8x4xf32>) -> tensor<2x1x1x4xf32>
  // CHECK: %[[V:.*]] = graph.reshape %[[M]] {shape = array<i64: 2, 4, 1, 1>}
  // CHECK-NOT: graph.transpose
  // CHECK: return %[[V]]
  %c1 = graph.conv %x, %w, %b {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %r = graph.relu %c1 : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %c2 = graph.conv %r, %w, %b {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %a = graph.add %c2, %x : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %g = graph.global_avg_pool %a : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  return %g : tensor<2x4x1x1xf32>
}

// -----

// Tests that pooling converts too and that its output returns to channels
// first where the model's output needs it.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<1x3x6x6xf32>) -> tensor<1x3x3x3xf32> {
  // CHECK: %[[IN:.*]] = graph.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>}
  // CHECK: %[[P:.*]] = graph.max_pool %[[IN]] {channels_last, {{.*}}} : (tensor<1x6x6x3xf32>) -> tensor<1x3x3x3xf32>
  // CHECK: %[[OUT:.*]] = graph.transpose %[[P]] {perm = array<i64: 0, 3, 1, 2>}
  // CHECK: return %[[OUT]]
  %p = graph.max_pool %x {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x3x6x6xf32>) -> tensor<1x3x3x3xf32>
  return %p : tensor<1x3x3x3xf32>
}

// -----

// Tests that 1-D convolutions keep their layout and that an element-wise op
// mixing layouts (other than with a function argument) keeps its transposes.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<1x2x5xf32>, %w: tensor<2x2x3xf32>, %y: tensor<1x2x4x4xf32>, %v: tensor<2x2x1x1xf32>) -> (tensor<1x2x3xf32>, tensor<1x2x4x4xf32>) {
  // CHECK: graph.conv %arg0, %arg1 {dilations
  %c = graph.conv %x, %w {dilations = array<i64: 1>, pads = array<i64: 0, 0>, strides = array<i64: 1>} : (tensor<1x2x5xf32>, tensor<2x2x3xf32>) -> tensor<1x2x3xf32>
  // CHECK: %[[C2:.*]] = graph.conv {{.*}}channels_last
  // CHECK: %[[BACK:.*]] = graph.transpose %[[C2]] {perm = array<i64: 0, 3, 1, 2>}
  // CHECK: %[[E:.*]] = graph.exp %arg2
  // CHECK: graph.mul %[[BACK]], %[[E]]
  %c2 = graph.conv %y, %v {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %e = graph.exp %y : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %m = graph.mul %c2, %e : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  return %c, %m : tensor<1x2x3xf32>, tensor<1x2x4x4xf32>
}

// -----

// Tests that a placed transpose moving only unit dimensions becomes a
// reshape on the same device (the device is read before the transpose is
// erased: the fuzzer found the read after, a use after free under ASan).
// CHECK-LABEL: func @unit_dims_placed
func.func @unit_dims_placed(%x: tensor<2x1x8xf32>) -> tensor<2x8x1xf32> {
  // CHECK: %[[V:.*]] = graph.reshape %arg0 {graph.device = 1 : i64, shape = array<i64: 2, 8, 1>}
  // CHECK-NOT: graph.transpose
  // CHECK: return %[[V]]
  %t = graph.transpose %x {perm = array<i64: 0, 2, 1>, graph.device = 1 : i64} : (tensor<2x1x8xf32>) -> tensor<2x8x1xf32>
  return %t : tensor<2x8x1xf32>
}

// -----

// Tests that an element-wise op of an argument and the argument's own
// transpose ends (the fuzzer found it sinking the transpose forever): the
// identity transpose becomes a view and nothing moves to the arguments.
// CHECK-LABEL: func @transpose_of_argument
func.func @transpose_of_argument(%x: tensor<2xui32>) -> tensor<2xui32> {
  // CHECK: %[[Q:.*]] = graph.div %arg0, %arg0
  // CHECK-NOT: graph.transpose
  // CHECK: return %[[Q]]
  %t = graph.transpose %x {perm = array<i64: 0>} : (tensor<2xui32>) -> tensor<2xui32>
  %q = graph.div %x, %t : (tensor<2xui32>, tensor<2xui32>) -> tensor<2xui32>
  return %q : tensor<2xui32>
}

// -----

// Tests that a DenseNet-style block stays channels last: the concatenation
// of two convolutions' outputs joins them along the last axis, the inference
// batch norm after it becomes a per-channel multiply and add (its constants
// folded), and the padded average pool keeps its pad channels last.
// CHECK-LABEL: func @dense_block
func.func @dense_block(%x: tensor<2x4x8x8xf32>) -> tensor<2x8x5x5xf32> {
  %w = graph.constant {value = dense<1.0> : tensor<4x4x3x3xf32>} : () -> tensor<4x4x3x3xf32>
  %gamma = graph.constant {value = dense<2.0> : tensor<8xf32>} : () -> tensor<8xf32>
  %beta = graph.constant {value = dense<0.5> : tensor<8xf32>} : () -> tensor<8xf32>
  %mean = graph.constant {value = dense<1.0> : tensor<8xf32>} : () -> tensor<8xf32>
  %var = graph.constant {value = dense<3.0> : tensor<8xf32>} : () -> tensor<8xf32>
  // CHECK: %[[C1:.*]] = graph.conv {{.*}}channels_last
  // CHECK: %[[C2:.*]] = graph.conv {{.*}}channels_last
  // CHECK: %[[CAT:.*]] = graph.concat %[[C1]], %[[C2]] {axis = 3 : i64} : (tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>) -> tensor<2x8x8x8xf32>
  // CHECK: %[[MUL:.*]] = graph.mul %[[CAT]], %{{.*}} : (tensor<2x8x8x8xf32>, tensor<8xf32>) -> tensor<2x8x8x8xf32>
  // CHECK: %[[ADD:.*]] = graph.add %[[MUL]], %{{.*}} : (tensor<2x8x8x8xf32>, tensor<8xf32>) -> tensor<2x8x8x8xf32>
  // CHECK: %[[R:.*]] = graph.relu %[[ADD]]
  // CHECK: %[[PAD:.*]] = graph.pad %[[R]] {pads = array<i64: 0, 1, 1, 0, 0, 1, 1, 0>} : (tensor<2x8x8x8xf32>) -> tensor<2x10x10x8xf32>
  // CHECK: graph.avg_pool %[[PAD]] {channels_last
  // CHECK-NOT: graph.batch_norm
  %c1 = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %c2 = graph.conv %c1, %w {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cat = graph.concat %c1, %c2 {axis = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x8x8x8xf32>
  %bn = graph.batch_norm %cat, %gamma, %beta, %mean, %var {epsilon = 1.0e-5 : f64} : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x8x8xf32>
  %r = graph.relu %bn : (tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
  %pad = graph.pad %r {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>} : (tensor<2x8x8x8xf32>) -> tensor<2x8x10x10xf32>
  %p = graph.avg_pool %pad {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x8x10x10xf32>) -> tensor<2x8x5x5xf32>
  return %p : tensor<2x8x5x5xf32>
}

// -----

// Tests that batch norm in training mode keeps its kernel (it needs the
// batch's statistics) and its transposes.
// CHECK-LABEL: func @training_batch_norm
func.func @training_batch_norm(%x: tensor<2x4x8x8xf32>, %s: tensor<4xf32>) -> tensor<2x4x8x8xf32> {
  %w = graph.constant {value = dense<1.0> : tensor<4x4x1x1xf32>} : () -> tensor<4x4x1x1xf32>
  // CHECK: %[[C:.*]] = graph.conv {{.*}}channels_last
  // CHECK: %[[T:.*]] = graph.transpose %[[C]] {perm = array<i64: 0, 3, 1, 2>}
  // CHECK: graph.batch_norm %[[T]], {{.*}}training_mode
  %c = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x8x8xf32>
  %bn = graph.batch_norm %c, %s, %s, %s, %s {epsilon = 1.0e-5 : f64, training_mode} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  return %bn : tensor<2x4x8x8xf32>
}

// -----

// Tests that a training step runs channels last from its input to its
// gradients: the trained weight is transposed once for the forward
// convolution and its input gradient, its gradient transposed back, the
// statistics and per-channel gradients keep their layout, and global
// average pooling's gradient (a broadcast) joins the channels-last chain.
// CHECK-LABEL: func @training_step
func.func @training_step(%x: tensor<2x4x8x8xf32>, %dy: tensor<2x4x1x1xf32>) -> (tensor<4x4x3x3xf32>, tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>) {
  // CHECK-DAG: %[[W:.*]] = graph.variable {name = "w"
  // CHECK-DAG: %[[WL:.*]] = graph.transpose %[[W]] {perm = array<i64: 0, 2, 3, 1>}
  // CHECK-DAG: %[[XL:.*]] = graph.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>}
  // CHECK: %[[C:.*]] = graph.conv %[[XL]], %[[WL]] {channels_last
  // CHECK: %[[Y:[a-z_0-9]+]], %[[MEAN:[a-z_0-9]+]], %[[VAR:[a-z_0-9]+]] = graph.batch_norm_train %[[C]], {{.*}}channels_last{{.*}} : (tensor<2x8x8x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x8x8x4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: %[[R:.*]] = graph.relu %[[Y]] {{.*}}tensor<2x8x8x4xf32>
  // CHECK: graph.expand {{.*}} -> tensor<2x8x8x4xf32>
  // CHECK: %[[GR:.*]] = graph.relu_grad {{.*}}tensor<2x8x8x4xf32>
  // CHECK: %[[DX:[a-z_0-9]+]], {{.*}} = graph.batch_norm_grad %[[GR]], %[[C]], {{.*}}channels_last
  // CHECK: %[[DI:.*]] = graph.conv_grad_input %[[DX]], %[[WL]] {channels_last, {{.*}}input_shape = array<i64: 2, 8, 8, 4>
  // CHECK: %[[DIF:.*]] = graph.transpose %[[DI]] {perm = array<i64: 0, 3, 1, 2>}
  // CHECK: %[[DW:.*]] = graph.conv_grad_weight %[[XL]], %[[DX]] {channels_last, {{.*}}weight_shape = array<i64: 4, 3, 3, 4>
  // CHECK: %[[DWF:.*]] = graph.transpose %[[DW]] {perm = array<i64: 0, 3, 1, 2>}
  // CHECK: return %[[DWF]], %[[DIF]], %[[MEAN]]
  %w = graph.variable {name = "w", role = "parameter", value = dense<0.5> : tensor<4x4x3x3xf32>} : tensor<4x4x3x3xf32>
  %s = graph.variable {name = "s", role = "parameter", value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %c = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %y, %mean, %var = graph.batch_norm_train %c, %s, %s {epsilon = 1.0e-5 : f64} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = graph.relu %y : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %e = graph.expand %dy {shape = array<i64: 2, 4, 8, 8>} : (tensor<2x4x1x1xf32>) -> tensor<2x4x8x8xf32>
  %gr = graph.relu_grad %e, %r : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %dx, %ds, %db = graph.batch_norm_grad %gr, %c, %s, %mean, %var {epsilon = 1.0e-5 : f64} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %di = graph.conv_grad_input %dx, %w {dilations = array<i64: 1, 1>, input_shape = array<i64: 2, 4, 8, 8>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %dw = graph.conv_grad_weight %x, %dx {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, weight_shape = array<i64: 4, 4, 3, 3>} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<4x4x3x3xf32>
  return %dw, %di, %mean, %ds : tensor<4x4x3x3xf32>, tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that pooling's gradients run channels last beside their forward
// ops.
// CHECK-LABEL: func @pool_gradients
func.func @pool_gradients(%x: tensor<1x2x6x6xf32>, %dy: tensor<1x2x3x3xf32>) -> (tensor<1x2x6x6xf32>, tensor<1x2x6x6xf32>) {
  // CHECK: graph.max_pool_grad {{.*}}channels_last{{.*}} : (tensor<1x3x3x2xf32>, tensor<1x6x6x2xf32>) -> tensor<1x6x6x2xf32>
  // CHECK: graph.avg_pool_grad {{.*}}channels_last{{.*}}input_shape = array<i64: 1, 6, 6, 2>{{.*}} : (tensor<1x3x3x2xf32>) -> tensor<1x6x6x2xf32>
  %m = graph.max_pool_grad %dy, %x {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x3x3xf32>, tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
  %a = graph.avg_pool_grad %dy {dilations = array<i64: 1, 1>, input_shape = array<i64: 1, 2, 6, 6>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x3x3xf32>) -> tensor<1x2x6x6xf32>
  return %m, %a : tensor<1x2x6x6xf32>, tensor<1x2x6x6xf32>
}

// -----

// Tests that a convolution whose filter tiles its input over few channels
// (a vision transformer's patch embedding) becomes a product of the
// input's patches, laid out as the filter, with the bias in its epilogue;
// and that the model's flatten(2).transpose(1, 2) after it cancels with
// the transpose back to channels first, leaving a view of the product.
// CHECK-LABEL: func @patch_embedding
func.func @patch_embedding(%x: tensor<2x3x8x8xf32>) -> tensor<2x4x5xf32> {
  %w = graph.constant {value = dense<1.0> : tensor<5x3x4x4xf32>} : () -> tensor<5x3x4x4xf32>
  %b = graph.constant {value = dense<0.5> : tensor<5xf32>} : () -> tensor<5xf32>
  // CHECK: %[[B:.*]] = graph.reshape %arg0 {shape = array<i64: 2, 3, 2, 4, 2, 4>}
  // CHECK: %[[T:.*]] = graph.transpose %[[B]] {perm = array<i64: 0, 2, 4, 1, 3, 5>} : (tensor<2x3x2x4x2x4xf32>) -> tensor<2x2x2x3x4x4xf32>
  // CHECK: %[[P:.*]] = graph.reshape %[[T]] {shape = array<i64: 2, 2, 2, 48>}
  // CHECK: %[[M:.*]] = graph.matmul %[[P]], %{{.*}}, %{{.*}} : (tensor<2x2x2x48xf32>, tensor<48x5xf32>, tensor<5xf32>) -> tensor<2x2x2x5xf32>
  // CHECK: %[[V:.*]] = graph.reshape %[[M]] {shape = array<i64: 2, 4, 5>}
  // CHECK-NOT: graph.transpose
  // CHECK: return %[[V]]
  %c = graph.conv %x, %w, %b {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 4, 4>} : (tensor<2x3x8x8xf32>, tensor<5x3x4x4xf32>, tensor<5xf32>) -> tensor<2x5x2x2xf32>
  %f = graph.reshape %c {shape = array<i64: 2, 5, 4>} : (tensor<2x5x2x2xf32>) -> tensor<2x5x4xf32>
  %t = graph.transpose %f {perm = array<i64: 0, 2, 1>} : (tensor<2x5x4xf32>) -> tensor<2x4x5xf32>
  return %t : tensor<2x4x5xf32>
}

// -----

// Tests that convolutions a product would not run better stay convolutions:
// overlapping windows, padding, and eight input channels or more.
// CHECK-LABEL: func @not_patches
// CHECK-NOT: graph.matmul
// CHECK-COUNT-3: graph.conv {{.*}}channels_last
func.func @not_patches(%x: tensor<1x3x8x8xf32>, %y: tensor<1x8x8x8xf32>) -> (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x2x2xf32>) {
  %w = graph.constant {value = dense<1.0> : tensor<2x3x4x4xf32>} : () -> tensor<2x3x4x4xf32>
  %v = graph.constant {value = dense<1.0> : tensor<2x8x4x4xf32>} : () -> tensor<2x8x4x4xf32>
  %a = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<2x3x4x4xf32>) -> tensor<1x2x3x3xf32>
  %b = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 2, 2, 2, 2>, strides = array<i64: 4, 4>} : (tensor<1x3x8x8xf32>, tensor<2x3x4x4xf32>) -> tensor<1x2x3x3xf32>
  %c = graph.conv %y, %v {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 4, 4>} : (tensor<1x8x8x8xf32>, tensor<2x8x4x4xf32>) -> tensor<1x2x2x2xf32>
  return %a, %b, %c : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x2x2xf32>
}

// -----

// Tests that a reshape merging dimensions a transpose moved apart (heads
// joined after attention) keeps its transpose, and that one merging
// dimensions still in order moves before the transpose.
// CHECK-LABEL: func @reshape_of_transpose
// CHECK: %[[T:.*]] = graph.transpose %arg0 {perm = array<i64: 0, 2, 1, 3>}
// CHECK: graph.reshape %[[T]] {shape = array<i64: 2, 5, 12>}
// CHECK: %[[R:.*]] = graph.reshape %arg1 {shape = array<i64: 2, 12, 5>}
// CHECK: graph.transpose %[[R]] {perm = array<i64: 0, 2, 1>} : (tensor<2x12x5xf32>) -> tensor<2x5x12xf32>
func.func @reshape_of_transpose(%x: tensor<2x3x5x4xf32>, %y: tensor<2x3x4x5xf32>) -> (tensor<2x5x12xf32>, tensor<2x5x12xf32>) {
  %t = graph.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x5x4xf32>) -> tensor<2x5x3x4xf32>
  %r = graph.reshape %t {shape = array<i64: 2, 5, 12>} : (tensor<2x5x3x4xf32>) -> tensor<2x5x12xf32>
  %u = graph.transpose %y {perm = array<i64: 0, 3, 1, 2>} : (tensor<2x3x4x5xf32>) -> tensor<2x5x3x4xf32>
  %s = graph.reshape %u {shape = array<i64: 2, 5, 12>} : (tensor<2x5x3x4xf32>) -> tensor<2x5x12xf32>
  return %r, %s : tensor<2x5x12xf32>, tensor<2x5x12xf32>
}

// -----

// Tests that a transpose between two reshapes that only fold the leading
// dimensions into one batch and back (the dynamo exporter's key^T) is one
// transpose of the unfolded tensor; and that it stays where the transpose
// moves the folded batch or the last reshape splits it otherwise.
// CHECK-LABEL: func @batch_folded_transpose
// CHECK: %[[M:.*]] = graph.reshape %arg0 {shape = array<i64: 8, 16, 8>}
// CHECK: %[[T:.*]] = graph.transpose %arg0 {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x16x8xf32>) -> tensor<2x4x8x16xf32>
// CHECK: %[[U:.*]] = graph.transpose %[[M]] {perm = array<i64: 1, 0, 2>}
// CHECK: graph.reshape %[[U]] {shape = array<i64: 16, 2, 4, 8>}
// CHECK: %[[V:.*]] = graph.transpose %[[M]] {perm = array<i64: 0, 2, 1>}
// CHECK: graph.reshape %[[V]] {shape = array<i64: 4, 2, 8, 16>}
// CHECK: return %[[T]]
func.func @batch_folded_transpose(%y: tensor<2x4x16x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<16x2x4x8xf32>, tensor<4x2x8x16xf32>) {
  %m = graph.reshape %y {shape = array<i64: 8, 16, 8>} : (tensor<2x4x16x8xf32>) -> tensor<8x16x8xf32>
  %t = graph.transpose %m {perm = array<i64: 0, 2, 1>} : (tensor<8x16x8xf32>) -> tensor<8x8x16xf32>
  %o = graph.reshape %t {shape = array<i64: 2, 4, 8, 16>} : (tensor<8x8x16xf32>) -> tensor<2x4x8x16xf32>
  %u = graph.transpose %m {perm = array<i64: 1, 0, 2>} : (tensor<8x16x8xf32>) -> tensor<16x8x8xf32>
  %p = graph.reshape %u {shape = array<i64: 16, 2, 4, 8>} : (tensor<16x8x8xf32>) -> tensor<16x2x4x8xf32>
  %v = graph.transpose %m {perm = array<i64: 0, 2, 1>} : (tensor<8x16x8xf32>) -> tensor<8x8x16xf32>
  %q = graph.reshape %v {shape = array<i64: 4, 2, 8, 16>} : (tensor<8x8x16xf32>) -> tensor<4x2x8x16xf32>
  return %o, %p, %q : tensor<2x4x8x16xf32>, tensor<16x2x4x8xf32>, tensor<4x2x8x16xf32>
}

// -----

// Tests Llama's rotary embedding of the query heads: the heads' transpose
// sinks through the two halves' slices, their concatenation, the products
// with the tables (constants broadcast over batch and heads, which become
// [1, S, 1, D] constants) and the sum, to the end of the chain, where
// attention reads it in place.
// CHECK-LABEL: func @rotary_query
// CHECK-NOT: graph.transpose
// CHECK: %[[H:.*]] = graph.reshape %arg0
// CHECK: graph.slice %[[H]] {ends = array<i64: 2, 16, 4, 8>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x16x4x16xf32>) -> tensor<2x16x4x8xf32>
// CHECK: graph.slice %[[H]] {ends = array<i64: 2, 16, 4, 16>, starts = array<i64: 0, 0, 0, 8>, steps = array<i64: 1, 1, 1, 1>}
// CHECK: graph.concat {{.*}} {axis = 3 : i64}
// CHECK: graph.mul {{.*}} : (tensor<2x16x4x16xf32>, tensor<1x16x1x16xf32>) -> tensor<2x16x4x16xf32>
// CHECK: %[[SUM:.*]] = graph.add
// CHECK: %[[T:.*]] = graph.transpose %[[SUM]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK: return %[[T]]
func.func @rotary_query(%q: tensor<2x16x64xf32>) -> tensor<2x4x16x16xf32> {
  %cos = graph.constant {value = dense<0.5> : tensor<1x1x16x16xf32>} : () -> tensor<1x1x16x16xf32>
  %sin = graph.constant {value = dense<0.25> : tensor<1x1x16x16xf32>} : () -> tensor<1x1x16x16xf32>
  %heads = graph.reshape %q {shape = array<i64: 2, 16, 4, 16>} : (tensor<2x16x64xf32>) -> tensor<2x16x4x16xf32>
  %t = graph.transpose %heads {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x16xf32>) -> tensor<2x4x16x16xf32>
  %a = graph.mul %t, %cos : (tensor<2x4x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<2x4x16x16xf32>
  %lo = graph.slice %t {ends = array<i64: 2, 4, 16, 8>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x8xf32>
  %hi = graph.slice %t {ends = array<i64: 2, 4, 16, 16>, starts = array<i64: 0, 0, 0, 8>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x8xf32>
  %c = graph.concat %hi, %lo {axis = 3 : i64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
  %b = graph.mul %c, %sin : (tensor<2x4x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<2x4x16x16xf32>
  %r = graph.add %a, %b : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  return %r : tensor<2x4x16x16xf32>
}

// -----

// Tests grouped-query attention's repeated key heads: the transpose sinks
// through the unit dimension the reshape inserts, the broadcast and the
// reshape that merges the repeated heads (in order in the source), so the
// expand runs on [B, S, Hkv, n, D] and one transpose is left for attention
// to read in place. Where the heads merge with the batch (the dynamo
// exporter's key^T), the source's order does not allow it: the transpose
// stays before the (larger) broadcast.
// CHECK-LABEL: func @grouped_heads
// CHECK: %[[U:.*]] = graph.reshape %arg0 {shape = array<i64: 2, 16, 2, 1, 16>} : (tensor<2x16x32xf32>) -> tensor<2x16x2x1x16xf32>
// CHECK: %[[D:.*]] = graph.transpose %[[U]] {perm = array<i64: 0, 2, 3, 1, 4>} : (tensor<2x16x2x1x16xf32>) -> tensor<2x2x1x16x16xf32>
// CHECK: %[[E:.*]] = graph.expand %[[U]] {shape = array<i64: 2, 16, 2, 2, 16>}
// CHECK: %[[M:.*]] = graph.reshape %[[E]] {shape = array<i64: 2, 16, 4, 16>}
// CHECK: %[[T:.*]] = graph.transpose %[[M]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x16xf32>) -> tensor<2x4x16x16xf32>
// CHECK: %[[F:.*]] = graph.expand %[[D]] {shape = array<i64: 2, 2, 2, 16, 16>}
// CHECK: %[[B:.*]] = graph.reshape %[[F]] {shape = array<i64: 8, 16, 16>}
// CHECK: return %[[T]], %[[B]]
func.func @grouped_heads(%x: tensor<2x16x32xf32>) -> (tensor<2x4x16x16xf32>, tensor<8x16x16xf32>) {
  %k = graph.reshape %x {shape = array<i64: 2, 16, 2, 16>} : (tensor<2x16x32xf32>) -> tensor<2x16x2x16xf32>
  %t = graph.transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x2x16xf32>) -> tensor<2x2x16x16xf32>
  %u = graph.reshape %t {shape = array<i64: 2, 2, 1, 16, 16>} : (tensor<2x2x16x16xf32>) -> tensor<2x2x1x16x16xf32>
  %e = graph.expand %u {shape = array<i64: 2, 2, 2, 16, 16>} : (tensor<2x2x1x16x16xf32>) -> tensor<2x2x2x16x16xf32>
  %m = graph.reshape %e {shape = array<i64: 2, 4, 16, 16>} : (tensor<2x2x2x16x16xf32>) -> tensor<2x4x16x16xf32>
  %f = graph.expand %u {shape = array<i64: 2, 2, 2, 16, 16>} : (tensor<2x2x1x16x16xf32>) -> tensor<2x2x2x16x16xf32>
  %b = graph.reshape %f {shape = array<i64: 8, 16, 16>} : (tensor<2x2x2x16x16xf32>) -> tensor<8x16x16xf32>
  return %m, %b : tensor<2x4x16x16xf32>, tensor<8x16x16xf32>
}

// -----

// Tests that a transpose with a reader it cannot move past (a softmax along
// one of its axes) stays where it is for its slice too: moving it past the
// slice alone would leave two transposes where there was one.
// CHECK-LABEL: func @transpose_kept_for_softmax
// CHECK: %[[T:.*]] = graph.transpose
// CHECK: graph.slice %[[T]]
// CHECK: graph.softmax %[[T]]
// CHECK-NOT: graph.transpose
func.func @transpose_kept_for_softmax(%x: tensor<2x16x64xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x16xf32>) {
  %h = graph.reshape %x {shape = array<i64: 2, 16, 4, 16>} : (tensor<2x16x64xf32>) -> tensor<2x16x4x16xf32>
  %t = graph.transpose %h {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x16xf32>) -> tensor<2x4x16x16xf32>
  %s = graph.slice %t {ends = array<i64: 2, 4, 16, 8>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x8xf32>
  %m = graph.softmax %t {axis = 3 : i64} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  return %s, %m : tensor<2x4x16x8xf32>, tensor<2x4x16x16xf32>
}

// -----

// Tests that squeeze-and-excitation (EfficientNet, RegNetY, MobileNetV3)
// stays channels last: the [N, C, 1, 1] scale of the map is only reshaped
// to [N, 1, 1, C], so the product runs on the channels-last map, not on a
// copy transposed to channels first and back. The broadcast operand that
// would need moving data (a [N, C, 1, W] one) keeps the transposes.
// CHECK-LABEL: func @squeeze_excitation
// CHECK: %[[C:.*]] = graph.conv %{{.*}} {channels_last
// CHECK: %[[M:.*]] = graph.reduce_mean %[[C]] {axes = array<i64: 1, 2>}
// CHECK: %[[S:.*]] = graph.sigmoid %[[M]] : (tensor<2x1x1x4xf32>) -> tensor<2x1x1x4xf32>
// CHECK-NOT: graph.transpose
// CHECK: %[[P:.*]] = graph.mul %[[S]], %[[C]] : (tensor<2x1x1x4xf32>, tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
// CHECK: graph.conv %[[P]]
// CHECK: graph.transpose
// CHECK: graph.mul %arg1,
// CHECK: graph.transpose
func.func @squeeze_excitation(%x: tensor<2x4x8x8xf32>, %s2: tensor<2x4x1x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %w = graph.constant {value = dense<1.0> : tensor<4x4x3x3xf32>} : () -> tensor<4x4x3x3xf32>
  %c = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %g = graph.global_avg_pool %c : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  %s = graph.sigmoid %g : (tensor<2x4x1x1xf32>) -> tensor<2x4x1x1xf32>
  %p = graph.mul %s, %c : (tensor<2x4x1x1xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %d = graph.conv %p, %w {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %q = graph.mul %s2, %c : (tensor<2x4x1x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %e = graph.conv %q, %w {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  return %d, %e : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// Tests that ConvNeXt's layer scale, a [C, 1, 1] constant of a lower rank
// than the map, moves with the transpose (as a [1, 1, 1, C] constant), so
// that the block's residual add stays channels last too.
// CHECK-LABEL: func @layer_scale
// CHECK: %[[G:.*]] = graph.constant {value = dense<5.000000e-01> : tensor<1x1x1x4xf32>}
// CHECK: %[[C:.*]] = graph.conv %{{.*}} {channels_last
// CHECK: %[[P:.*]] = graph.mul %[[G]], %[[C]] : (tensor<1x1x1x4xf32>, tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
// CHECK: %[[A:.*]] = graph.add %[[P]], %{{.*}} : (tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
// CHECK: graph.conv %[[A]]
func.func @layer_scale(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %w = graph.constant {value = dense<1.0> : tensor<4x4x3x3xf32>} : () -> tensor<4x4x3x3xf32>
  %gamma = graph.constant {value = dense<0.5> : tensor<4x1x1xf32>} : () -> tensor<4x1x1xf32>
  %c = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %p = graph.mul %gamma, %c : (tensor<4x1x1xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %a = graph.add %p, %x : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %d = graph.conv %a, %w {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  return %d : tensor<2x4x8x8xf32>
}
