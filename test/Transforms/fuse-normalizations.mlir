// RUN: partc-opt %s --partc-fuse-normalizations --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-fuse-normalizations=skip-initializers=true --split-input-file | FileCheck %s --check-prefix=TRAIN

// Tests Llama's RMS normalization, x * (1 / sqrt(mean(x^2) + eps)), and the
// per-channel weight after it, as one op.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  // CHECK: %[[W:.*]] = graph.constant {{.*}} : () -> tensor<8xf32>
  // CHECK-NEXT: %[[N:.*]] = graph.rms_norm %arg0, %[[W]] {axis = 2 : i64, epsilon = 9.99999997{{[0-9]*}}E-7 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  // CHECK-NEXT: return %[[N]]
  %two = graph.constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %eps = graph.constant {value = dense<1.0e-6> : tensor<f32>} : () -> tensor<f32>
  %one = graph.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %w = graph.constant {value = dense<0.5> : tensor<8xf32>} : () -> tensor<8xf32>
  %p = graph.pow %x, %two : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %m = graph.reduce_mean %p {axes = array<i64: 2>} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  %a = graph.add %m, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %s = graph.sqrt %a : (tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %r = graph.div %one, %s : (tensor<f32>, tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %n = graph.mul %x, %r : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %y = graph.mul %w, %n : (tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// Tests T5's form (x * x, reciprocal) and a division by the root mean
// square, each without a weight.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK-DAG: graph.rms_norm %arg0 {axis = 1 : i64, epsilon = 9.99999997{{[0-9]*}}E-7 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-DAG: graph.rms_norm %arg1 {axis = 1 : i64, epsilon = 9.99999997{{[0-9]*}}E-7 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NOT: graph.reduce_mean
  %eps = graph.constant {value = dense<1.0e-6> : tensor<f32>} : () -> tensor<f32>
  %p = graph.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = graph.reduce_mean %p {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a = graph.add %eps, %m : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %s = graph.sqrt %a : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %r = graph.reciprocal %s : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = graph.mul %r, %x : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %p2 = graph.mul %z, %z : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m2 = graph.reduce_mean %p2 {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a2 = graph.add %m2, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s2 = graph.sqrt %a2 : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n2 = graph.div %z, %s2 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %n, %n2 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that nothing is fused where another op reads the mean, the mean
// runs over another axis, or the squares are of another tensor.
// CHECK-LABEL: func @main
func.func @main(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK-NOT: graph.rms_norm
  %eps = graph.constant {value = dense<1.0e-6> : tensor<f32>} : () -> tensor<f32>
  %p = graph.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = graph.reduce_mean %p {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a = graph.add %m, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = graph.sqrt %a : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = graph.div %x, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %p2 = graph.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m2 = graph.reduce_mean %p2 {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %a2 = graph.add %m2, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %s2 = graph.sqrt %a2 : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %n2 = graph.div %x, %s2 : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %p3 = graph.mul %z, %z : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m3 = graph.reduce_mean %p3 {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a3 = graph.add %m3, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s3 = graph.sqrt %a3 : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n3 = graph.div %x, %s3 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %n, %m, %n2, %n3 : tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests layer normalization as PyTorch exports it below opset 17: x minus
// its mean, normalized by the root mean square, times a weight, plus a
// bias, as one graph.layer_norm.
// CHECK-LABEL: func @layer_norm
func.func @layer_norm(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  // CHECK-DAG: %[[W:.*]] = graph.constant {value = dense<5.000000e-01> : tensor<8xf32>}
  // CHECK-DAG: %[[B:.*]] = graph.constant {value = dense<2.500000e-01> : tensor<8xf32>}
  // CHECK: %[[N:.*]] = graph.layer_norm %arg0, %[[W]], %[[B]] {axis = 2 : i64, epsilon = 9.99999974{{[0-9]*}}E-6 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  // CHECK-NEXT: return %[[N]]
  %two = graph.constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %eps = graph.constant {value = dense<1.0e-5> : tensor<f32>} : () -> tensor<f32>
  %w = graph.constant {value = dense<0.5> : tensor<8xf32>} : () -> tensor<8xf32>
  %b = graph.constant {value = dense<0.25> : tensor<8xf32>} : () -> tensor<8xf32>
  %mu = graph.reduce_mean %x {axes = array<i64: 2>} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  %d = graph.sub %x, %mu : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %p = graph.pow %d, %two : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %m = graph.reduce_mean %p {axes = array<i64: 2>} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  %a = graph.add %m, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %s = graph.sqrt %a : (tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %n = graph.div %d, %s : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %y = graph.mul %n, %w : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %z = graph.add %y, %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  return %z : tensor<2x3x8xf32>
}

// -----

// Tests the centred form without a bias (layer normalization with its
// weight only), and that another reader of x - mean(x) keeps it an RMS
// normalization of the difference.
// CHECK-LABEL: func @layer_norm_partial
func.func @layer_norm_partial(%x: tensor<4x8xf32>, %x2: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK-DAG: graph.layer_norm %arg0, %{{.*}} {axis = 1 : i64, {{.*}}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-DAG: %[[D:.*]] = graph.sub %arg1
  // CHECK-DAG: graph.rms_norm %[[D]], %{{.*}} {axis = 1 : i64
  // CHECK-NOT: graph.layer_norm %arg1
  %eps = graph.constant {value = dense<1.0e-5> : tensor<f32>} : () -> tensor<f32>
  %w = graph.constant {value = dense<0.5> : tensor<8xf32>} : () -> tensor<8xf32>
  %mu = graph.reduce_mean %x {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = graph.sub %x, %mu : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %p = graph.mul %d, %d : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = graph.reduce_mean %p {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a = graph.add %m, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = graph.sqrt %a : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = graph.div %d, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %y = graph.mul %n, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %mu2 = graph.reduce_mean %x2 {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d2 = graph.sub %x2, %mu2 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %p2 = graph.mul %d2, %d2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m2 = graph.reduce_mean %p2 {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a2 = graph.add %m2, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s2 = graph.sqrt %a2 : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n2 = graph.div %d2, %s2 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %y2 = graph.mul %n2, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y, %y2, %d2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that before training's differentiation (skip-initializers) a
// layer norm whose weight and bias are initializers still fuses (they are
// parameters and become its operands), while one whose epsilon is an
// initializer does not: that initializer is a parameter to train. Without
// the option both fuse.
// CHECK-LABEL: func @main
// CHECK-COUNT-2: graph.layer_norm
// TRAIN-LABEL: func @main
// TRAIN: %[[W:.*]] = graph.constant {graph.initializer = "w"
// TRAIN: %[[B:.*]] = graph.constant {graph.initializer = "b"
// TRAIN: graph.layer_norm %arg0, %[[W]], %[[B]] {axis = 1 : i64
// TRAIN-NOT: graph.layer_norm
// TRAIN: graph.sqrt
func.func @main(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %two = graph.constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %eps = graph.constant {value = dense<1.0e-5> : tensor<f32>} : () -> tensor<f32>
  %peps = graph.constant {graph.initializer = "eps", value = dense<1.0e-5> : tensor<f32>} : () -> tensor<f32>
  %w = graph.constant {graph.initializer = "w", value = dense<0.5> : tensor<8xf32>} : () -> tensor<8xf32>
  %b = graph.constant {graph.initializer = "b", value = dense<0.25> : tensor<8xf32>} : () -> tensor<8xf32>
  %mx = graph.reduce_mean %x {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %cx = graph.sub %x, %mx : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %px = graph.pow %cx, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %vx = graph.reduce_mean %px {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ax = graph.add %vx, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %sx = graph.sqrt %ax : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %nx = graph.div %cx, %sx : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %wx = graph.mul %nx, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %yx = graph.add %wx, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %mz = graph.reduce_mean %z {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %cz = graph.sub %z, %mz : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %pz = graph.pow %cz, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %vz = graph.reduce_mean %pz {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %az = graph.add %vz, %peps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %sz = graph.sqrt %az : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %nz = graph.div %cz, %sz : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %yx, %nz : tensor<4x8xf32>, tensor<4x8xf32>
}
