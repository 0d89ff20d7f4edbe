// RUN: partc-opt %s --partc-plan-memory --split-input-file --verify-diagnostics

// Tests that a view must keep the byte size, checked before planning.
plan.program attributes {num_devices = 1 : i64} {
  plan.device 0 {
    %a = plan.alloc : memref<16xf32>
    // expected-error@+1 {{cannot view 'memref<16xf32>' as 'memref<3x4xf32>'; element type and size must match}}
    %v = plan.view %a : memref<16xf32> to memref<3x4xf32>
  }
}

// -----

// Tests that device ids must lie within the program's device count.
plan.program attributes {num_devices = 1 : i64} {
  // expected-error@+1 {{id 3 is outside [0, 1)}}
  plan.device 3 {
  }
}
