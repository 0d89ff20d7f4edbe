// RUN: partc-opt %s --partc-lower-precision --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-lower-precision="precision=fp16" --split-input-file | FileCheck %s --check-prefix=HALF

// Tests that a product, its softmax and the add after it run in bf16: the
// input is cast once, the weight converted at compile time (0.1 rounds to
// 0.10009765625 in bf16), and the result cast back to f32 for the return.
// CHECK-LABEL: func @head
// CHECK-DAG: %[[W:.*]] = graph.constant {value = dense<1.000980e-01> : tensor<8x4xbf16>}
// CHECK-DAG: %[[X:.*]] = graph.cast %arg0 {to = bf16} : (tensor<2x8xf32>) -> tensor<2x8xbf16>
// CHECK: %[[M:.*]] = graph.matmul %[[X]], %[[W]] : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
// CHECK: %[[S:.*]] = graph.softmax %[[M]] {axis = 1 : i64} : (tensor<2x4xbf16>) -> tensor<2x4xbf16>
// CHECK: %[[R:.*]] = graph.cast %[[S]] {to = f32} : (tensor<2x4xbf16>) -> tensor<2x4xf32>
// CHECK: return %[[R]] : tensor<2x4xf32>
// HALF-LABEL: func @head
// HALF: graph.matmul {{.*}} -> tensor<2x4xf16>
func.func @head(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = graph.constant {value = dense<0.1> : tensor<8x4xf32>} : () -> tensor<8x4xf32>
  %m = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %s = graph.softmax %m {axis = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// -----

// Tests that an op without a 16-bit kernel on every backend (a product
// of elements) keeps
// f32 between two 16-bit ops, with one cast on each edge, and that a value
// read by two 16-bit ops is cast once.
// CHECK-LABEL: func @island
// CHECK: %[[X:.*]] = graph.cast %arg0 {to = bf16}
// CHECK-NEXT: %[[A:.*]] = graph.relu %[[X]] : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT: %[[WA:.*]] = graph.cast %[[A]] {to = f32} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[B:.*]] = graph.tanh %[[X]] : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT: %[[R:.*]] = graph.reduce_prod %[[WA]] {{.*}} : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[LR:.*]] = graph.cast %[[R]] {to = bf16} : (tensor<4x1xf32>) -> tensor<4x1xbf16>
// CHECK-NEXT: %[[S:.*]] = graph.sub %[[B]], %[[LR]] : (tensor<4x8xbf16>, tensor<4x1xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT: %[[O:.*]] = graph.cast %[[S]] {to = f32}
// CHECK-NEXT: return %[[O]]
func.func @island(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = graph.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = graph.tanh %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = graph.reduce_prod %a {axes = array<i64: 1>, keepdims = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %s = graph.sub %b, %r : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Tests that reductions run in 16-bit (f32 sums inside the kernel): a
// squeeze-and-excitation block's global pool reads the 16-bit map as it
// is, with no copy widened to f32.
// CHECK-LABEL: func @pool
// CHECK: %[[X:.*]] = graph.cast %arg0 {to = bf16}
// CHECK-NEXT: %[[M:.*]] = graph.reduce_mean %[[X]] {axes = array<i64: 1, 2>} : (tensor<2x4x4x8xbf16>) -> tensor<2x1x1x8xbf16>
// CHECK-NEXT: %[[S:.*]] = graph.sigmoid %[[M]] : (tensor<2x1x1x8xbf16>) -> tensor<2x1x1x8xbf16>
// CHECK-NEXT: %[[P:.*]] = graph.mul %[[S]], %[[X]] : (tensor<2x1x1x8xbf16>, tensor<2x4x4x8xbf16>) -> tensor<2x4x4x8xbf16>
// CHECK-NEXT: %[[O:.*]] = graph.cast %[[P]] {to = f32}
// CHECK-NEXT: return %[[O]]
func.func @pool(%x: tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32> {
  %m = graph.reduce_mean %x {axes = array<i64: 1, 2>, keepdims = 1 : i64} : (tensor<2x4x4x8xf32>) -> tensor<2x1x1x8xf32>
  %s = graph.sigmoid %m : (tensor<2x1x1x8xf32>) -> tensor<2x1x1x8xf32>
  %p = graph.mul %s, %x : (tensor<2x1x1x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  return %p : tensor<2x4x4x8xf32>
}

// -----

// Tests that the normalizations run in bf16 back to back, with no cast
// between them: an RMS norm with its scale (Llama's and T5's, f32 in the
// kernel), then a layer norm.
// CHECK-LABEL: func @norms
// CHECK: %[[X:.*]] = graph.cast %arg0 {to = bf16}
// CHECK-DAG: %[[G:.*]] = graph.constant {value = dense<5.000000e-01> : tensor<8xbf16>}
// CHECK: %[[R:.*]] = graph.rms_norm %[[X]], %[[G]] {{.*}} : (tensor<2x8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
// CHECK-NEXT: %[[L:.*]] = graph.layer_norm %[[R]], %{{.*}}, %{{.*}} {{.*}} -> tensor<2x8xbf16>
// CHECK-NEXT: graph.cast %[[L]] {to = f32}
func.func @norms(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %g = graph.constant {value = dense<0.5> : tensor<8xf32>} : () -> tensor<8xf32>
  %b = graph.constant {value = dense<0.0> : tensor<8xf32>} : () -> tensor<8xf32>
  %r = graph.rms_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %l = graph.layer_norm %r, %g, %b {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %l : tensor<2x8xf32>
}

// -----

// Tests that integer operands stay as they are: an embedding's table is
// converted, its indices are not, and the comparison (a bool result) keeps
// f32 operands.
// CHECK-LABEL: func @embedding
// CHECK: %[[T:.*]] = graph.constant {value = dense<2.500000e-01> : tensor<16x4xbf16>}
// CHECK: %[[G:.*]] = graph.gather %[[T]], %arg0 {axis = 0 : i64} : (tensor<16x4xbf16>, tensor<3xi64>) -> tensor<3x4xbf16>
// CHECK: %[[F:.*]] = graph.cast %[[G]] {to = f32}
// CHECK: graph.less %[[F]], {{.*}} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
func.func @embedding(%ids: tensor<3xi64>) -> tensor<3x4xi1> {
  %t = graph.constant {value = dense<0.25> : tensor<16x4xf32>} : () -> tensor<16x4xf32>
  %z = graph.constant {value = dense<0.0> : tensor<3x4xf32>} : () -> tensor<3x4xf32>
  %g = graph.gather %t, %ids {axis = 0 : i64} : (tensor<16x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  %l = graph.less %g, %z : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
  return %l : tensor<3x4xi1>
}

// -----

// Tests that a model already in f64 is left alone: only f32 is lowered.
// CHECK-LABEL: func @wide
// CHECK-NOT: graph.cast
// CHECK: graph.matmul %arg0, %arg1 : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
func.func @wide(%a: tensor<2x2xf64>, %b: tensor<2x2xf64>) -> tensor<2x2xf64> {
  %m = graph.matmul %a, %b : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  return %m : tensor<2x2xf64>
}
