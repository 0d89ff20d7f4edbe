// RUN: partc-opt %s --partc-fuse-activations --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-fuse-activations="erf-gelu-as-tanh=1" --split-input-file | FileCheck %s --check-prefix=ERF
// RUN: partc-opt %s --partc-fuse-activations="scale-weights=0" --split-input-file | FileCheck %s --check-prefix=NOSCALE

// Tests that a ReLU after a convolution, a GEMM and a residual add moves
// into each producer's epilogue.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<1x2x4x4xf32>, %w: tensor<2x2x1x1xf32>, %m: tensor<2x3xf32>, %n: tensor<3x3xf32>) -> (tensor<1x2x4x4xf32>, tensor<2x3xf32>) {
  // CHECK: %[[C:.*]] = graph.conv {{.*}}activation = "relu"
  // CHECK-NOT: graph.relu
  %c = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %r = graph.relu %c : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  // CHECK: graph.add %[[C]], %arg0 {activation = "relu"}
  %a = graph.add %r, %x : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ar = graph.relu %a : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  // CHECK: graph.gemm {{.*}}activation = "relu"
  %g = graph.gemm %m, %n : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %gr = graph.relu %g : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %ar, %gr : tensor<1x2x4x4xf32>, tensor<2x3xf32>
}

// -----

// Tests that a producer whose value is also used elsewhere, or that runs on
// another device, keeps its ReLU separate.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  // CHECK: %[[A:.*]] = graph.add %arg0, %arg1 :
  // CHECK: graph.relu %[[A]]
  %a = graph.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = graph.relu %a : (tensor<4xf32>) -> tensor<4xf32>
  // CHECK: %[[B:.*]] = graph.add %arg0, %arg0 {graph.device = 0 : i64}
  // CHECK: graph.relu %[[B]] {graph.device = 1 : i64}
  %b = graph.add %x, %x {graph.device = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = graph.relu %b {graph.device = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %r, %a, %s : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a residual add after a convolution becomes the convolution's
// addend, keeping the add's ReLU, and that a convolution without bias gets
// a zero one to put the addend after.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<1x4x4x2xf32>, %w: tensor<2x1x1x2xf32>, %b: tensor<2xf32>, %z: tensor<1x4x4x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) {
  // CHECK: %[[C:.*]] = graph.conv %arg0, %arg1, %arg2, %arg3 {activation = "relu", channels_last
  // CHECK: %[[ZERO:.*]] = graph.constant {value = dense<0.000000e+00> : tensor<2xf32>}
  // CHECK: graph.conv %arg0, %arg1, %[[ZERO]], %[[C]] {channels_last
  // CHECK-NOT: graph.add
  // CHECK-NOT: graph.relu
  %c = graph.conv %x, %w, %b {channels_last, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<2x1x1x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %a = graph.add %c, %z : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %r = graph.relu %a : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %d = graph.conv %x, %w {channels_last, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<2x1x1x2xf32>) -> tensor<1x4x4x2xf32>
  %e = graph.add %r, %d : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  return %r, %e : tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>
}

// -----

// Tests that a residual add stays separate when the convolution's value is
// used again or the other operand broadcasts.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<1x2x4x4xf32>, %w: tensor<2x2x1x1xf32>, %s: tensor<1x2x1x1xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  // CHECK: %[[C:.*]] = graph.conv %arg0, %arg1 {dilations
  // CHECK: graph.add %[[C]], %arg0
  // CHECK: %[[D:.*]] = graph.conv %arg0, %arg1 {dilations
  // CHECK: graph.add %[[D]], %arg2
  %c = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %a = graph.add %c, %x : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %u = graph.mul %a, %c : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %d = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %b = graph.add %d, %s : (tensor<1x2x4x4xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  return %u, %b : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}

// -----

// Tests that a linear layer as exporters write it, matmul then add of one
// value per column, then ReLU, becomes one matmul with a bias and an
// activation, for a folded batch and a 1 x N bias alike.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>, %b: tensor<5xf32>, %c: tensor<1x5xf32>) -> (tensor<2x3x5xf32>, tensor<2x3x5xf32>) {
  // CHECK: graph.matmul %arg0, %arg1, %arg2 {activation = "relu"}
  // CHECK: graph.matmul %arg0, %arg1, %arg3 :
  // CHECK-NOT: graph.add
  // CHECK-NOT: graph.relu
  %m = graph.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %a = graph.add %b, %m : (tensor<5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %r = graph.relu %a : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %n = graph.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %e = graph.add %n, %c : (tensor<2x3x5xf32>, tensor<1x5xf32>) -> tensor<2x3x5xf32>
  return %r, %e : tensor<2x3x5xf32>, tensor<2x3x5xf32>
}

// -----

// Tests that an add of one value per row stays separate, that a full
// tensor added to a matmul with a weight matrix becomes its residual addend
// (after a zero bias), and that an add whose matmul result is used again
// stays separate.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<3x4xf32>, %w: tensor<4x3xf32>, %r: tensor<3x1xf32>, %f: tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>) {
  // CHECK: %[[M:.*]] = graph.matmul %arg0, %arg1 :
  // CHECK: graph.add %[[M]], %arg2
  // CHECK: %[[Z:.*]] = graph.constant {value = dense<0.000000e+00> : tensor<3xf32>}
  // CHECK: graph.matmul %arg0, %arg1, %[[Z]], %arg3 :
  // CHECK: %[[P:.*]] = graph.matmul %arg0, %arg1 :
  // CHECK: graph.add %[[P]], %arg3
  %m = graph.matmul %x, %w : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  %a = graph.add %m, %r : (tensor<3x3xf32>, tensor<3x1xf32>) -> tensor<3x3xf32>
  %n = graph.matmul %x, %w : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  %b = graph.add %n, %f : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %p = graph.matmul %x, %w : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  %c = graph.add %p, %f : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %u = graph.mul %c, %p : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  return %a, %b, %u : tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>
}

// -----

// Tests a transformer's residual connection, x + (y W + b): the bias, then
// the residual, then a ReLU all in the matmul's epilogue; a batched matmul
// (a batch on both operands, not one GEMM) keeps its add.
// CHECK-LABEL: func @residual
func.func @residual(%x: tensor<2x5x8xf32>, %y: tensor<2x5x4xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x8xf32>) {
  // CHECK: %[[R:.*]] = graph.matmul %arg1, %arg2, %arg3, %arg0 {activation = "relu"}
  // CHECK: %[[B:.*]] = graph.matmul %arg1, %arg4 :
  // CHECK: graph.add %[[B]], %arg0
  %m = graph.matmul %y, %w : (tensor<2x5x4xf32>, tensor<4x8xf32>) -> tensor<2x5x8xf32>
  %mb = graph.add %m, %b : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %s = graph.add %x, %mb : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %r = graph.relu %s : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %n = graph.matmul %y, %v : (tensor<2x5x4xf32>, tensor<2x4x8xf32>) -> tensor<2x5x8xf32>
  %t = graph.add %n, %x : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  return %r, %t : tensor<2x5x8xf32>, tensor<2x5x8xf32>
}

// -----

// Tests that IsNaN + Where zeroing a softmax's NaNs (PyTorch's exported
// attention) becomes the softmax's nan_to_zero.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: %[[S:.*]] = graph.softmax %arg0 {axis = 1 : i64, nan_to_zero = true}
  // CHECK-NOT: graph.is_nan
  // CHECK-NOT: graph.where
  // CHECK: return %[[S]]
  %zero = graph.constant {value = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %s = graph.softmax %x {axis = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %n = graph.is_nan %s : (tensor<2x4xf32>) -> tensor<2x4xi1>
  %y = graph.where %n, %zero, %s : (tensor<2x4xi1>, tensor<1xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Tests that the softmax keeps its NaNs when another op reads it, or when
// they become something other than zero.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  // CHECK: graph.softmax %arg0 {axis = 1 : i64} :
  // CHECK: graph.where
  // CHECK: graph.softmax %arg0 {axis = 0 : i64} :
  // CHECK: graph.where
  %zero = graph.constant {value = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %one = graph.constant {value = dense<1.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %s = graph.softmax %x {axis = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %n = graph.is_nan %s : (tensor<2x4xf32>) -> tensor<2x4xi1>
  %y = graph.where %n, %zero, %s : (tensor<2x4xi1>, tensor<1xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %t = graph.softmax %x {axis = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %m = graph.is_nan %t : (tensor<2x4xf32>) -> tensor<2x4xi1>
  %z = graph.where %m, %one, %t : (tensor<2x4xi1>, tensor<1xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y, %s, %z : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Tests that an attention mask added to the scores becomes the softmax's
// bias, whichever side of the add it is on.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<2x3x4x4xf32>, %y: tensor<2x3x4x4xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) {
  // CHECK: %[[M:.*]] = graph.constant
  // CHECK-NOT: graph.add
  // CHECK: graph.softmax %arg0, %[[M]] {axis = 3 : i64} : (tensor<2x3x4x4xf32>, tensor<1x1x4x4xf32>)
  // CHECK: graph.softmax %arg1, %[[M]] {axis = 3 : i64, nan_to_zero = true}
  %mask = graph.constant {value = dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>} : () -> tensor<1x1x4x4xf32>
  %a = graph.add %x, %mask : (tensor<2x3x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<2x3x4x4xf32>
  %s = graph.softmax %a {axis = 3 : i64} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %b = graph.add %mask, %y : (tensor<1x1x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %t = graph.softmax %b {axis = 3 : i64, nan_to_zero = true} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %s, %t : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
}

// -----

// Tests that the add stays where another op reads its sum, or where it
// broadcasts both operands.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<2x4xf32>, %r: tensor<2x1xf32>, %c: tensor<1x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  // CHECK: %[[A:.*]] = graph.add %arg0, %arg0
  // CHECK: graph.softmax %[[A]] {axis = 1 : i64} :
  // CHECK: %[[B:.*]] = graph.add %arg1, %arg2
  // CHECK: graph.softmax %[[B]] {axis = 1 : i64} :
  %a = graph.add %x, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %s = graph.softmax %a {axis = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %b = graph.add %r, %c : (tensor<2x1xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  %t = graph.softmax %b {axis = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %a, %s, %t : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Tests that a training batch norm takes the ReLU after it and, for a
// ResNet block's last norm, the residual add and its ReLU, moving down to
// the add; the statistics stay its other results.
// CHECK-LABEL: func @training_batch_norm
func.func @training_batch_norm(%x: tensor<2x4x3x3xf32>, %z: tensor<2x4x3x3xf32>, %s: tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<4xf32>) {
  // CHECK: %[[Y:[a-z_0-9]+]], {{.*}} = graph.batch_norm_train %arg0, %arg2, %arg2 {activation = "relu"}
  // CHECK: %[[Z:[a-z_0-9]+]], %[[MEAN:[a-z_0-9]+]], {{.*}} = graph.batch_norm_train %[[Y]], %arg2, %arg2, %arg1 {activation = "relu"}
  // CHECK-NOT: graph.relu
  // CHECK-NOT: graph.add
  // CHECK: return %[[Y]], %[[Z]], %[[MEAN]]
  %y, %m, %v = graph.batch_norm_train %x, %s, %s : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = graph.relu %y : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %y2, %m2, %v2 = graph.batch_norm_train %r, %s, %s : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %a = graph.add %y2, %z : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %r2 = graph.relu %a : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  return %r, %r2, %m2 : tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<4xf32>
}

// -----

// Tests that a batch norm stays unfused where another op reads its
// normalized result, or reads its statistics before the add.
// CHECK-LABEL: func @training_batch_norm_kept
func.func @training_batch_norm_kept(%x: tensor<2x4x3x3xf32>, %z: tensor<2x4x3x3xf32>, %s: tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<4xf32>) {
  // CHECK: graph.batch_norm_train %arg0, %arg2, %arg2 :
  // CHECK: graph.relu
  // CHECK: graph.batch_norm_train %arg0, %arg2, %arg2 :
  // CHECK: graph.sqrt
  // CHECK: graph.add {{.*}}activation = "relu"
  %y, %m, %v = graph.batch_norm_train %x, %s, %s : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = graph.relu %y : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %y2, %m2, %v2 = graph.batch_norm_train %x, %s, %s : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %q = graph.sqrt %v2 : (tensor<4xf32>) -> tensor<4xf32>
  %a = graph.add %y2, %z : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %r2 = graph.relu %a : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  return %y, %r2, %q : tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<4xf32>
}

// -----

// Tests that ReLU's gradient goes into the gradient of the norm whose
// fused ReLU it differentiates, which then reads the norm's bias.
// CHECK-LABEL: func @training_relu_grad
func.func @training_relu_grad(%x: tensor<2x4x3x3xf32>, %dy: tensor<2x4x3x3xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<4xf32>) {
  // CHECK: %[[Y:[a-z_0-9]+]], %[[M:[a-z_0-9]+]], %[[V:[a-z_0-9]+]] = graph.batch_norm_train %arg0, %arg2, %arg3 {activation = "relu"}
  // CHECK-NOT: graph.relu_grad
  // CHECK: %[[DX:[a-z_0-9]+]], {{.*}} = graph.batch_norm_grad %arg1, %arg0, %arg2, %[[M]], %[[V]], %arg3 {activation = "relu"}
  // CHECK: return %[[Y]], %[[DX]]
  %y, %m, %v = graph.batch_norm_train %x, %s, %b : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = graph.relu %y : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %g = graph.relu_grad %dy, %r : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %dx, %ds, %db = graph.batch_norm_grad %g, %x, %s, %m, %v : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  return %r, %dx, %ds : tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<4xf32>
}

// -----

// Tests that ReLU's gradient stays where another op reads it (a residual
// connection's shortcut), where the norm took an addend, and where the
// gradient is of another norm.
// CHECK-LABEL: func @training_relu_grad_kept
func.func @training_relu_grad_kept(%x: tensor<2x4x3x3xf32>, %z: tensor<2x4x3x3xf32>, %dy: tensor<2x4x3x3xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) {
  // CHECK-NOT: graph.batch_norm_grad {{.*}}activation
  // CHECK-COUNT-3: graph.relu_grad
  // CHECK-NOT: graph.batch_norm_grad {{.*}}activation
  // CHECK: return
  %y, %m, %v = graph.batch_norm_train %x, %s, %b : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = graph.relu %y : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %g = graph.relu_grad %dy, %r : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %dx, %ds, %db = graph.batch_norm_grad %g, %x, %s, %m, %v : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %y2, %m2, %v2 = graph.batch_norm_train %x, %s, %b : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %a = graph.add %y2, %z : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %r2 = graph.relu %a : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %g2 = graph.relu_grad %dy, %r2 : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %dx2, %ds2, %db2 = graph.batch_norm_grad %g2, %x, %s, %m2, %v2 : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %y3, %m3, %v3 = graph.batch_norm_train %x, %s, %b : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %r3 = graph.relu %y3 : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %g3 = graph.relu_grad %dy, %r3 : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %dx3, %ds3, %db3 = graph.batch_norm_grad %g3, %x, %s, %m, %v : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  return %g, %dx2, %dx3, %r3 : tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>
}

// -----

// Tests that a Gemm between reshapes (GPT-2's Conv1D) takes its residual
// add into a matmul's epilogue, the residual and the result reshaped
// around it, keeping the bias; a Gemm with a transposed weight does not.
// CHECK-LABEL: func @reshaped_gemm
func.func @reshaped_gemm(%x: tensor<6x4xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>, %r: tensor<2x3x8xf32>, %wt: tensor<8x4xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  // CHECK: %[[FLAT:.*]] = graph.reshape %arg3 {shape = array<i64: 6, 8>}
  // CHECK: %[[M:.*]] = graph.matmul %arg0, %arg1, %arg2, %[[FLAT]] : (tensor<6x4xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  // CHECK: %[[Y:.*]] = graph.reshape %[[M]] {shape = array<i64: 2, 3, 8>}
  // CHECK: graph.gemm %arg0, %arg4, %arg2 {trans_b = 1 : i64}
  // CHECK: graph.add
  // CHECK: return %[[Y]]
  %g = graph.gemm %x, %w, %b : (tensor<6x4xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
  %v = graph.reshape %g {shape = array<i64: 2, 3, 8>} : (tensor<6x8xf32>) -> tensor<2x3x8xf32>
  %y = graph.add %v, %r : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %h = graph.gemm %x, %wt, %b {trans_b = 1 : i64} : (tensor<6x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<6x8xf32>
  %u = graph.reshape %h {shape = array<i64: 2, 3, 8>} : (tensor<6x8xf32>) -> tensor<2x3x8xf32>
  %z = graph.add %u, %r : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %y, %z : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// -----

// Tests that a tanh Gelu goes into the epilogue of the product before it:
// a matmul after its bias add, a Gemm through the reshape after it (GPT-2's
// Conv1D); an exact Gelu, and a tanh Gelu of a product read twice, stay.
// CHECK-LABEL: func @gelu_tanh
// With erf-gelu-as-tanh (16-bit plans) the exact Gelu goes too; the tanh
// Gelu of a product read twice still stays.
// ERF-LABEL: func @gelu_tanh
// ERF: graph.matmul %arg0, %arg1, %arg2 {activation = "gelu_tanh"}
// ERF: graph.gemm %arg0, %arg1, %arg2 {activation = "gelu_tanh"}
// ERF: %[[E:.*]] = graph.matmul %arg0, %arg1 {activation = "gelu_tanh"}
// ERF-NOT: graph.gelu %[[E]]
// ERF: %[[T:.*]] = graph.matmul %arg0, %arg1 :
// ERF: graph.gelu %[[T]] {approximate = "tanh"}
func.func @gelu_tanh(%x: tensor<6x4xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<6x8xf32>, tensor<2x3x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>) {
  // CHECK: %[[M:.*]] = graph.matmul %arg0, %arg1, %arg2 {activation = "gelu_tanh"}
  // CHECK: %[[G:.*]] = graph.gemm %arg0, %arg1, %arg2 {activation = "gelu_tanh"}
  // CHECK: %[[R:.*]] = graph.reshape %[[G]]
  // CHECK: %[[E:.*]] = graph.matmul %arg0, %arg1 :
  // CHECK: %[[EG:.*]] = graph.gelu %[[E]] :
  // CHECK: %[[T:.*]] = graph.matmul %arg0, %arg1 :
  // CHECK: %[[TG:.*]] = graph.gelu %[[T]] {approximate = "tanh"}
  // CHECK: return %[[M]], %[[R]], %[[EG]], %[[TG]], %[[T]]
  %m = graph.matmul %x, %w : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %mb = graph.add %m, %b : (tensor<6x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
  %mg = graph.gelu %mb {approximate = "tanh"} : (tensor<6x8xf32>) -> tensor<6x8xf32>
  %g = graph.gemm %x, %w, %b : (tensor<6x4xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
  %v = graph.reshape %g {shape = array<i64: 2, 3, 8>} : (tensor<6x8xf32>) -> tensor<2x3x8xf32>
  %vg = graph.gelu %v {approximate = "tanh"} : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %e = graph.matmul %x, %w : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %eg = graph.gelu %e : (tensor<6x8xf32>) -> tensor<6x8xf32>
  %t = graph.matmul %x, %w : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %tg = graph.gelu %t {approximate = "tanh"} : (tensor<6x8xf32>) -> tensor<6x8xf32>
  return %mg, %vg, %eg, %tg, %t : tensor<6x8xf32>, tensor<2x3x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>
}

// -----

// Tests that a pre-norm block's residual gradient (the gradient from above
// plus layer norm's input gradient) becomes layer_norm_grad's addend; the
// op stays before the scale gradient's reader.
// CHECK-LABEL: func @layer_norm_grad_residual
func.func @layer_norm_grad_residual(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %s: tensor<8xf32>, %up: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  // CHECK: %[[DX:.*]], %[[DS:.*]], %{{.*}} = graph.layer_norm_grad %arg0, %arg1, %arg2, %arg3 {axis = 1 : i64}
  // CHECK-NEXT: %[[N:.*]] = graph.neg %[[DS]]
  // CHECK-NOT: graph.add
  // CHECK: return %[[DX]], %[[N]]
  %dx, %ds, %db = graph.layer_norm_grad %dy, %x, %s {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %n = graph.neg %ds : (tensor<8xf32>) -> tensor<8xf32>
  %sum = graph.add %up, %dx : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %sum, %n : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Tests that the add stays when the other gradient is computed after
// layer_norm_grad, or when the input gradient has another reader.
// CHECK-LABEL: func @layer_norm_grad_kept_adds
func.func @layer_norm_grad_kept_adds(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %s: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK: graph.layer_norm_grad %arg0, %arg1, %arg2 {axis = 1 : i64}
  // CHECK: graph.add
  // CHECK: graph.layer_norm_grad %arg0, %arg1, %arg2 {axis = 1 : i64}
  // CHECK: graph.add
  %dx, %ds, %db = graph.layer_norm_grad %dy, %x, %s {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %late = graph.neg %dy : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = graph.add %dx, %late : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ex, %es, %eb = graph.layer_norm_grad %dy, %x, %s {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %b = graph.add %ex, %dy : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = graph.add %b, %ex : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %a, %c : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that SiLU as PyTorch exports it, x * sigmoid(x), after a
// convolution becomes the convolution's activation, in either operand
// order, after a fused residual.
// CHECK-LABEL: func @silu
func.func @silu(%x: tensor<1x4x4x2xf32>, %w: tensor<2x1x1x2xf32>, %b: tensor<2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) {
  // CHECK: %[[C:.*]] = graph.conv %arg0, %arg1, %arg2 {activation = "silu", channels_last
  // CHECK: %[[D:.*]] = graph.conv %[[C]], %arg1, %arg2, %arg0 {activation = "silu", channels_last
  // CHECK-NOT: graph.sigmoid
  // CHECK-NOT: graph.mul
  // CHECK: return %[[C]], %[[D]]
  %c = graph.conv %x, %w, %b {channels_last, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<2x1x1x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %s = graph.sigmoid %c : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %m = graph.mul %c, %s : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %d = graph.conv %m, %w, %b {channels_last, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<2x1x1x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %r = graph.add %d, %x : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %t = graph.sigmoid %r : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %n = graph.mul %t, %r : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  return %m, %n : tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>
}

// -----

// Tests that SiLU stays apart where the convolution's value or its sigmoid
// is also used elsewhere (a training step's backward pass), where the
// product is not the SiLU of the same value, and where the ops run on
// different devices.
// CHECK-LABEL: func @silu_kept
func.func @silu_kept(%x: tensor<1x2x4x4xf32>, %w: tensor<2x2x1x1xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  // CHECK-NOT: silu
  // CHECK-COUNT-4: graph.sigmoid
  // CHECK-NOT: silu
  %c = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %s = graph.sigmoid %c : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %m = graph.mul %c, %s : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c2 = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.sigmoid %c2 : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %m2 = graph.mul %c2, %s2 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c3 = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %s3 = graph.sigmoid %c3 : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %m3 = graph.mul %x, %s3 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c4 = graph.conv %x, %w {dilations = array<i64: 1, 1>, graph.device = 0 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %s4 = graph.sigmoid %c4 {graph.device = 1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %m4 = graph.mul %c4, %s4 {graph.device = 1 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  return %m, %c, %m2, %s2, %m3, %m4 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}

// -----

// Tests that a constant per-column scale of a product with constant
// weights and bias (ConvNeXt's layer scale) folds into them, after which
// the residual add joins the product's epilogue; a product without a bias
// keeps none; a bias still written as an add (as exported) folds too.
// CHECK-LABEL: func @layer_scale
// NOSCALE-LABEL: func @layer_scale
func.func @layer_scale(%x: tensor<1x3x2xf32>, %z: tensor<1x3x2xf32>) -> (tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>) {
  // CHECK-NOT: graph.constant
  // CHECK: %[[W:.*]] = graph.constant {value = dense<{{\[}}[2.000000e+00, 2.000000e+01], [6.000000e+00, 4.000000e+01]]> : tensor<2x2xf32>}
  // CHECK-NEXT: %[[B:.*]] = graph.constant {value = dense<[2.000000e+00, -1.000000e+01]> : tensor<2xf32>}
  // CHECK-NEXT: graph.matmul %arg0, %[[W]], %[[B]], %arg1 :
  // CHECK-NEXT: %[[V:.*]] = graph.constant {value = dense<{{\[}}[2.000000e+00, 2.000000e+01], [6.000000e+00, 4.000000e+01]]> : tensor<2x2xf32>}
  // CHECK-NEXT: %[[P:.*]] = graph.matmul %arg0, %[[V]] :
  // CHECK-NEXT: %[[U:.*]] = graph.constant {value = dense<{{\[}}[2.000000e+00, 2.000000e+01], [6.000000e+00, 4.000000e+01]]> : tensor<2x2xf32>}
  // CHECK-NEXT: %[[C:.*]] = graph.constant {value = dense<[2.000000e+00, -1.000000e+01]> : tensor<2xf32>}
  // CHECK-NEXT: %[[Q:.*]] = graph.matmul %arg0, %[[U]], %[[C]] :
  // CHECK-NOT: graph.mul
  // CHECK: return {{.*}}, %[[P]], %[[Q]]
  // NOSCALE-COUNT-3: graph.mul
  %w = graph.constant {value = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %b = graph.constant {value = dense<[1.0, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %s = graph.constant {value = dense<[[[2.0, 10.0]]]> : tensor<1x1x2xf32>} : () -> tensor<1x1x2xf32>
  %m = graph.matmul %x, %w, %b : (tensor<1x3x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<1x3x2xf32>
  %l = graph.mul %s, %m : (tensor<1x1x2xf32>, tensor<1x3x2xf32>) -> tensor<1x3x2xf32>
  %a = graph.add %l, %z : (tensor<1x3x2xf32>, tensor<1x3x2xf32>) -> tensor<1x3x2xf32>
  %p = graph.matmul %x, %w : (tensor<1x3x2xf32>, tensor<2x2xf32>) -> tensor<1x3x2xf32>
  %q = graph.mul %p, %s : (tensor<1x3x2xf32>, tensor<1x1x2xf32>) -> tensor<1x3x2xf32>
  %n = graph.matmul %x, %w : (tensor<1x3x2xf32>, tensor<2x2xf32>) -> tensor<1x3x2xf32>
  %nb = graph.add %n, %b : (tensor<1x3x2xf32>, tensor<2xf32>) -> tensor<1x3x2xf32>
  %ns = graph.mul %nb, %s : (tensor<1x3x2xf32>, tensor<1x1x2xf32>) -> tensor<1x3x2xf32>
  return %a, %q, %ns : tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>
}

// -----

// Tests that a scale stays a multiplication where it is not a constant,
// not one value per column, where the product's value is used elsewhere or
// has an activation, or where its weights are not constants (a training
// step's variables).
// CHECK-LABEL: func @layer_scale_kept
func.func @layer_scale_kept(%x: tensor<3x2xf32>, %v: tensor<2x2xf32>, %t: tensor<1x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
  // CHECK-COUNT-5: graph.mul
  // CHECK-NOT: graph.mul
  %w = graph.constant {value = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %rows = graph.constant {value = dense<[[2.0], [3.0], [4.0]]> : tensor<3x1xf32>} : () -> tensor<3x1xf32>
  %s = graph.constant {value = dense<[[2.0, 10.0]]> : tensor<1x2xf32>} : () -> tensor<1x2xf32>
  %m1 = graph.matmul %x, %w : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %l1 = graph.mul %m1, %t : (tensor<3x2xf32>, tensor<1x2xf32>) -> tensor<3x2xf32>
  %m2 = graph.matmul %x, %w : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %l2 = graph.mul %m2, %rows : (tensor<3x2xf32>, tensor<3x1xf32>) -> tensor<3x2xf32>
  %m3 = graph.matmul %x, %w : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %l3 = graph.mul %m3, %s : (tensor<3x2xf32>, tensor<1x2xf32>) -> tensor<3x2xf32>
  %m4 = graph.matmul %x, %w {activation = "relu"} : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %l4 = graph.mul %m4, %s : (tensor<3x2xf32>, tensor<1x2xf32>) -> tensor<3x2xf32>
  %m5 = graph.matmul %x, %v : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %l5 = graph.mul %m5, %s : (tensor<3x2xf32>, tensor<1x2xf32>) -> tensor<3x2xf32>
  return %l1, %l2, %l3, %m3, %l4, %l5 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
}
