// RUN: partc-opt %s --split-input-file --verify-diagnostics

// Tests that a program needs at least one device.
// expected-error@+1 {{needs at least one device, got 0}}
plan.program attributes {num_devices = 0 : i64} {
}

// -----

// Tests that a device appears once.
plan.program attributes {num_devices = 2 : i64} {
  plan.device 1 {
  }
  // expected-error@+1 {{device 1 appears twice}}
  plan.device 1 {
  }
}

// -----

// Tests that allocations live inside a device.
plan.program attributes {num_devices = 1 : i64} {
  // expected-error@+1 {{expects parent op 'plan.device'}}
  %a = plan.alloc : memref<4xf32>
}

// -----

// Tests that a send names a known transport.
plan.program attributes {num_devices = 2 : i64} {
  plan.device 0 {
    %a = plan.alloc : memref<4xf32>
    // expected-error@+1 {{attribute 'transport' failed to satisfy constraint: string attribute a transport other than peer copies (nccl)}}
    plan.send %a to 1 channel 0 {transport = "pigeon"} : memref<4xf32>
  }
}
