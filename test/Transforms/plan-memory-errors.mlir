// RUN: partc-opt %s --partc-plan-memory --split-input-file --verify-diagnostics

// Tests that a view must lie inside its source, checked before planning.
plan.program attributes {num_devices = 1 : i64} {
  plan.device 0 {
    %a = plan.alloc : memref<16xf32>
    // expected-error@+1 {{cannot view 'memref<16xf32>' as 'memref<5x4xf32>' at byte 0; the element type must match and the view lie in the source at a multiple of 64 bytes}}
    %v = plan.view %a : memref<16xf32> to memref<5x4xf32>
  }
}

// -----

// Tests that a view past its source's end, or at an offset off the
// arena's alignment, is refused.
plan.program attributes {num_devices = 1 : i64} {
  plan.device 0 {
    %a = plan.alloc : memref<64xf32>
    // expected-error@+1 {{cannot view 'memref<64xf32>' as 'memref<32xf32>' at byte 192}}
    %v = plan.view %a {byte_offset = 192 : i64} : memref<64xf32> to memref<32xf32>
  }
}

// -----

plan.program attributes {num_devices = 1 : i64} {
  plan.device 0 {
    %a = plan.alloc : memref<64xf32>
    // expected-error@+1 {{cannot view 'memref<64xf32>' as 'memref<8xf32>' at byte 4}}
    %v = plan.view %a {byte_offset = 4 : i64} : memref<64xf32> to memref<8xf32>
  }
}

// -----

// Tests that device ids must lie within the program's device count.
plan.program attributes {num_devices = 1 : i64} {
  // expected-error@+1 {{id 3 is outside [0, 1)}}
  plan.device 3 {
  }
}
