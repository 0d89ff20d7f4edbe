// RUN: partc-opt %s --partc-report-step-memory --split-input-file --verify-diagnostics

// Tests that the report needs the planned arena.
plan.program attributes {num_devices = 1 : i64} {
  plan.state @s0 : tensor<4xf32> {device = 0 : i64, name = "w", role = "parameter"}
  // expected-error@+1 {{'plan.device' op has no arena size; run partc-plan-memory first}}
  plan.device 0 {
  }
}
