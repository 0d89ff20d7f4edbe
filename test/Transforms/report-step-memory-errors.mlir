// RUN: partc-opt %s --partc-report-step-memory="device-memory=100" --split-input-file --verify-diagnostics

// Tests that the report needs the planned arena.
plan.program attributes {num_devices = 1 : i64} {
  plan.state @s0 : tensor<4xf32> {device = 0 : i64, name = "w", role = "parameter"}
  // expected-error@+1 {{'plan.device' op has no arena size; run partc-plan-memory first}}
  plan.device 0 {
  }
}

// -----

// Tests that a step larger than the device's memory (100 bytes here) is
// refused with its parts and the ways out.
plan.program attributes {num_devices = 1 : i64} {
  plan.state @s0 : tensor<4xf32> {device = 0 : i64, name = "w", role = "parameter"}
  // expected-remark@+2 {{step memory: parameters 16 B}}
  // expected-error@+1 {{a training step needs 144 B on device 0 (parameters 16 B, optimizer state 0 B, other state 0 B, constants 0 B, arena 128 B of which kept activations 0 B) but the device has 100 B; hint: --micro-batches M keeps one micro-batch's activations at a time, more --devices share the batch, or a smaller --batch}}
  plan.device 0 attributes {arena_size = 128 : i64} {
  }
}
