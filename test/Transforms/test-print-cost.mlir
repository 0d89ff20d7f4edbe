// RUN: partc-opt %s --partc-test-print-cost --split-input-file --verify-diagnostics

// Tests the FLOP estimates: 2*K per output element for contractions, one per
// element otherwise.
func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %m: tensor<2x5xf32>, %n: tensor<5x7xf32>) -> (tensor<1x4x6x6xf32>, tensor<2x7xf32>) {
  // expected-remark@+1 {{flops=7776 bytes=1776 utilization=0.125 h200_us=7.00}}
  %c = graph.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  // expected-remark@+1 {{flops=140 bytes=236}}
  %y = graph.matmul %m, %n : (tensor<2x5xf32>, tensor<5x7xf32>) -> tensor<2x7xf32>
  // expected-remark@+1 {{flops=144 bytes=1152}}
  %r = graph.relu %c : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  return %r, %y : tensor<1x4x6x6xf32>, tensor<2x7xf32>
}

// -----

// Tests the few-channel rule on ResNet-50's layers at batch 64, channels
// last: the 3-channel stem fills 4/32 of the reduction tile (measured 0.40
// ms on an H200), a 64-channel 3x3 convolution all of it (measured 0.05 to
// 0.07 ms).
func.func @stem(%x: tensor<64x224x224x3xf32>, %w: tensor<64x7x7x3xf32>, %y: tensor<64x56x56x64xf32>, %v: tensor<64x3x3x64xf32>) -> (tensor<64x112x112x64xf32>, tensor<64x56x56x64xf32>) {
  // expected-remark@+1 {{flops=15105785856 bytes=244093696 utilization=0.125 h200_us=414.14}}
  %c = graph.conv %x, %w {channels_last, dilations = array<i64: 1, 1>, pads = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>} : (tensor<64x224x224x3xf32>, tensor<64x7x7x3xf32>) -> tensor<64x112x112x64xf32>
  // expected-remark@+1 {{flops=14797504512 bytes=102907904 utilization=1.000 h200_us=56.85}}
  %d = graph.conv %y, %v {channels_last, dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<64x56x56x64xf32>, tensor<64x3x3x64xf32>) -> tensor<64x56x56x64xf32>
  return %c, %d : tensor<64x112x112x64xf32>, tensor<64x56x56x64xf32>
}

// -----

// Tests that a strided matmul is charged the bytes its views read (two
// 2x4x16x16 views of a 2x16x192 buffer, and the result), not its buffers.
func.func @heads(%qkv: tensor<2x16x192xf32>) -> tensor<2x4x16x16xf32> {
  // expected-remark@+1 {{flops=65536 bytes=24576}}
  %s = graph.strided_matmul %qkv, %qkv {alpha = 2.500000e-01 : f64, lhs_offset = 0 : i64, lhs_shape = array<i64: 2, 4, 16, 16>, lhs_strides = array<i64: 3072, 16, 192, 1>, perm = array<i64: 0, 1, 2, 3>, rhs_offset = 64 : i64, rhs_shape = array<i64: 2, 4, 16, 16>, rhs_strides = array<i64: 3072, 16, 1, 192>, shape = array<i64: 2, 4, 16, 16>} : (tensor<2x16x192xf32>, tensor<2x16x192xf32>) -> tensor<2x4x16x16xf32>
  return %s : tensor<2x4x16x16xf32>
}

// -----

// Tests that a convolution's gradients count the forward convolution's
// work (2 x 3 x 3 x 3 per element of the result's gradient, 4 x 6 x 6 of
// them) as matrix work, and the 3-channel filter's low utilization.
func.func @gradients(%dy: tensor<1x4x6x6xf32>, %w: tensor<4x3x3x3xf32>, %x: tensor<1x3x8x8xf32>) -> (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) {
  // expected-remark@+1 {{flops=7776 bytes=1776 utilization=0.125}}
  %dx = graph.conv_grad_input %dy, %w {dilations = array<i64: 1, 1>, input_shape = array<i64: 1, 3, 8, 8>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<1x3x8x8xf32>
  // expected-remark@+1 {{flops=7776 bytes=1776 utilization=0.125}}
  %dw = graph.conv_grad_weight %x, %dy {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>, weight_shape = array<i64: 4, 3, 3, 3>} : (tensor<1x3x8x8xf32>, tensor<1x4x6x6xf32>) -> tensor<4x3x3x3xf32>
  return %dx, %dw : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>
}

// -----

// Tests the fixed costs profiles show below the preset's 7 us: a 16-bit
// GEMM pays half of it (8.59 GFLOP at 1.2 x 0.6 of the bf16 peak, 12.06 us,
// plus 3.5), a layer norm 0.3 (33.6 MB at 0.8 of the bandwidth, 8.74 us,
// plus 2.1); an f32 GEMM all of it (8.59 GFLOP at 0.6 of the TF32 peak,
// 28.94 us, plus 7).
func.func @fixed_costs(%x: tensor<4096x1024xbf16>, %w: tensor<1024x1024xbf16>, %y: tensor<8x512x1024xf32>, %g: tensor<1024xf32>, %b: tensor<1024xf32>, %u: tensor<4096x1024xf32>, %v: tensor<1024x1024xf32>) -> (tensor<4096x1024xbf16>, tensor<8x512x1024xf32>, tensor<4096x1024xf32>) {
  // expected-remark@+1 {{utilization=1.200 h200_us=15.56}}
  %p = graph.matmul %x, %w : (tensor<4096x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<4096x1024xbf16>
  // expected-remark@+1 {{h200_us=10.84}}
  %n = graph.layer_norm %y, %g, %b {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<8x512x1024xf32>, tensor<1024xf32>, tensor<1024xf32>) -> tensor<8x512x1024xf32>
  // expected-remark@+1 {{utilization=1.000 h200_us=35.94}}
  %q = graph.matmul %u, %v : (tensor<4096x1024xf32>, tensor<1024x1024xf32>) -> tensor<4096x1024xf32>
  return %p, %n, %q : tensor<4096x1024xbf16>, tensor<8x512x1024xf32>, tensor<4096x1024xf32>
}

// -----

// Tests a 16-bit convolution: 7.40 GFLOP at 0.65 x 0.6 of the bf16 peak
// (19.18 us) plus 0.6 of the fixed cost (4.2 us; ResNet-50's bf16 fit),
// where an f32 one of the same shape keeps the TF32 fit (24.93 us plus 7).
func.func @conv16(%x: tensor<32x56x56x64xbf16>, %w: tensor<64x3x3x64xbf16>, %y: tensor<32x56x56x64xf32>, %v: tensor<64x3x3x64xf32>) -> (tensor<32x56x56x64xbf16>, tensor<32x56x56x64xf32>) {
  // expected-remark@+1 {{utilization=0.650 h200_us=23.37}}
  %c = graph.conv %x, %w {channels_last, dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<32x56x56x64xbf16>, tensor<64x3x3x64xbf16>) -> tensor<32x56x56x64xbf16>
  // expected-remark@+1 {{utilization=1.000 h200_us=31.93}}
  %d = graph.conv %y, %v {channels_last, dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<32x56x56x64xf32>, tensor<64x3x3x64xf32>) -> tensor<32x56x56x64xf32>
  return %c, %d : tensor<32x56x56x64xbf16>, tensor<32x56x56x64xf32>
}

// -----

// Tests depthwise convolutions (partc's CUDA-core kernel, bf16 and f32
// alike): ConvNeXt-T's first 7 x 7 one at batch 64 does 2 x 49 flops an
// output and 27 of overhead, at 0.17 of the vector rate (its fastest form
// measured 198 us on an H200), and EfficientNet-B0's 3 x 3 stride 2 one
// pays the overhead twice (measured 100 us); a 1 x 1 convolution's SiLU is
// a pass of its own over the output, with its own launch (conv and pass
// measured 152 us).
func.func @depthwise(%x: tensor<64x56x56x96xbf16>, %w: tensor<96x7x7x1xbf16>, %e: tensor<64x112x112x96xbf16>, %v: tensor<96x3x3x1xbf16>, %p: tensor<64x112x112x16xbf16>, %u: tensor<96x1x1x16xbf16>) -> (tensor<64x56x56x96xbf16>, tensor<64x56x56x96xbf16>, tensor<64x112x112x96xbf16>) {
  // expected-remark@+1 {{flops=1888223232 bytes=77079744 utilization=0.170 h200_us=226.78 charged_flops=2408448000}}
  %c = graph.conv %x, %w {channels_last, dilations = array<i64: 1, 1>, group = 96 : i64, pads = array<i64: 3, 3, 3, 3>, strides = array<i64: 1, 1>} : (tensor<64x56x56x96xbf16>, tensor<96x7x7x1xbf16>) -> tensor<64x56x56x96xbf16>
  // expected-remark@+1 {{utilization=0.170 h200_us=132.41 charged_flops=1387266048}}
  %d = graph.conv %e, %v {activation = "silu", channels_last, dilations = array<i64: 1, 1>, group = 96 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<64x112x112x96xbf16>, tensor<96x3x3x1xbf16>) -> tensor<64x56x56x96xbf16>
  // expected-remark@+1 {{bytes=179833856 utilization=0.325 h200_us=138.31}}
  %s = graph.conv %p, %u {activation = "silu", channels_last, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<64x112x112x16xbf16>, tensor<96x1x1x16xbf16>) -> tensor<64x112x112x96xbf16>
  return %c, %d, %s : tensor<64x56x56x96xbf16>, tensor<64x56x56x96xbf16>, tensor<64x112x112x96xbf16>
}
