// RUN: partc-opt %s --split-input-file --partc-report-step-memory --verify-diagnostics | FileCheck %s

// Tests a training step's memory: the logits are kept for the loss's
// gradient (the loss itself and the inputs are not counted as kept), the
// weight's gradient waits for the parameter update while a buffer last read
// before it (%9) does not count, and state is split by role (a parameter,
// an AdamW moment pair and the step counter).
// CHECK-LABEL: plan.program
// CHECK-SAME: memory_arena = "448"
// CHECK-SAME: memory_constants = "4"
// CHECK-SAME: memory_gradients = "128"
// CHECK-SAME: memory_inputs = "192"
// CHECK-SAME: memory_kept_activations = "64"
// CHECK-SAME: memory_optimizer_state = "264"
// CHECK-SAME: memory_other_state = "0"
// CHECK-SAME: memory_parameters = "128"
plan.program attributes {metadata = {batch = "4"}, num_devices = 1 : i64} {
  plan.weight @w0 {value = dense<1.000000e+00> : tensor<f32>}
  plan.weight @w1 {value = dense<0.5> : tensor<8x4xf32>}
  plan.state @s2 : tensor<i64> {device = 0 : i64, name = "optimizer.step", role = "step"}
  plan.state @s3 : tensor<8x4xf32> {device = 0 : i64, name = "W.adam_m", role = "adam_m"}
  plan.state @s4 : tensor<8x4xf32> {device = 0 : i64, name = "W.adam_v", role = "adam_v"}
  plan.state @s5 : tensor<8x4xf32> {device = 0 : i64, init = @w1, name = "W", role = "parameter"}
  plan.input @x : tensor<4x8xf32>
  plan.input @labels : tensor<4xi64>
  plan.output @loss : tensor<f32>
  // expected-remark@+1 {{step memory: parameters 128 B, optimizer state 264 B, other state 0 B, constants 4 B, inputs 192 B, kept activations 64 B, gradients 128 B, arena 448 B}}
  plan.device 0 attributes {arena_size = 448 : i64} {
    %0 = plan.alloc {offset = 0 : i64} : memref<4x8xf32>
    plan.load_input @x[0] into %0 : memref<4x8xf32>
    %1 = plan.state_ref @s5 : memref<8x4xf32>
    %3 = plan.alloc {offset = 128 : i64} : memref<4x4xf32>
    plan.kernel "matmul"(%0, %1) -> (%3) {params = {}} : (memref<4x8xf32>, memref<8x4xf32>) -> memref<4x4xf32>
    %4 = plan.alloc {offset = 256 : i64} : memref<4xi64>
    plan.load_input @labels[0] into %4 : memref<4xi64>
    %5 = plan.alloc {offset = 192 : i64} : memref<f32>
    plan.kernel "softmax_cross_entropy"(%3, %4) -> (%5) {params = {}} : (memref<4x4xf32>, memref<4xi64>) -> memref<f32>
    plan.store_output %5 into @loss[0] : memref<f32>
    %6 = plan.weight_ref @w0 : memref<f32>
    %7 = plan.alloc {offset = 320 : i64} : memref<4x4xf32>
    plan.kernel "softmax_cross_entropy_grad"(%3, %4, %6) -> (%7) {params = {}} : (memref<4x4xf32>, memref<4xi64>, memref<f32>) -> memref<4x4xf32>
    %8 = plan.alloc {offset = 128 : i64} : memref<8x4xf32>
    plan.kernel "gemm"(%0, %7) -> (%8) {params = {alpha = 1.000000e+00 : f64, beta = 0.000000e+00 : f64, trans_a = 1 : i64, trans_b = 0 : i64}} : (memref<4x8xf32>, memref<4x4xf32>) -> memref<8x4xf32>
    %9 = plan.alloc {offset = 384 : i64} : memref<1x4xf32>
    plan.kernel "reduce_sum"(%7) -> (%9) {params = {axes = array<i64: 0>, keepdims = 1 : i64}} : (memref<4x4xf32>) -> memref<1x4xf32>
    %10 = plan.view %9 : memref<1x4xf32> to memref<4xf32>
    plan.kernel "relu"(%10) -> (%10) {params = {}} : (memref<4xf32>) -> memref<4xf32>
    %11 = plan.state_ref @s3 : memref<8x4xf32>
    %12 = plan.state_ref @s4 : memref<8x4xf32>
    %13 = plan.state_ref @s2 : memref<i64>
    plan.kernel "adamw_update"(%1, %8, %11, %12, %13) -> (%1, %11, %12) {params = {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64}} : (memref<8x4xf32>, memref<8x4xf32>, memref<8x4xf32>, memref<8x4xf32>, memref<i64>) -> (memref<8x4xf32>, memref<8x4xf32>, memref<8x4xf32>)
    plan.kernel "count_step"(%13) -> (%13) {params = {}} : (memref<i64>) -> memref<i64>
  }
}

// -----

// Tests that an inference plan (no state) is left alone.
// CHECK-LABEL: plan.program
// CHECK-NOT: memory_
plan.program attributes {num_devices = 1 : i64} {
  plan.input @x : tensor<4xf32>
  plan.device 0 attributes {arena_size = 64 : i64} {
    %0 = plan.alloc {offset = 0 : i64} : memref<4xf32>
    plan.load_input @x[0] into %0 : memref<4xf32>
  }
}
