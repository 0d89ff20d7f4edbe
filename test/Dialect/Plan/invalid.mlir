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

// -----

// Tests that a state lives on one of the program's devices.
plan.program attributes {num_devices = 1 : i64} {
  // expected-error@+1 {{is on device 1, outside [0, 1)}}
  plan.state @s : tensor<4xf32> {device = 1 : i64, name = "w", role = "parameter"}
}

// -----

// Tests that a state's initial value is a plan.weight of its type.
plan.program attributes {num_devices = 1 : i64} {
  plan.weight @w {value = dense<1.0> : tensor<2xf32>}
  // expected-error@+1 {{of type 'tensor<4xf32>' is initialized from @w of type 'tensor<2xf32>'}}
  plan.state @s : tensor<4xf32> {device = 0 : i64, name = "w", role = "parameter", init = @w}
}

// -----

// Tests that a device reads only its own state.
plan.program attributes {num_devices = 2 : i64} {
  plan.state @s : tensor<4xf32> {device = 0 : i64, name = "w", role = "parameter"}
  plan.device 1 {
    // expected-error@+1 {{reads @s ('tensor<4xf32>' on device 0) as 'memref<4xf32>' on device 1}}
    %s = plan.state_ref @s : memref<4xf32>
  }
}

// -----

// Tests that a bucket has a target for each source.
plan.program attributes {num_devices = 2 : i64} {
  plan.device 0 {
    %a = plan.alloc : memref<4xf32>
    %b = plan.alloc : memref<2xf32>
    %m = plan.alloc : memref<4xf32>
    // expected-error@+1 {{averages 2 source(s) into 1 target(s); it needs one target per source, at least one}}
    plan.all_reduce %a, %b into %m group 0 devices [0, 1] : memref<4xf32>, memref<2xf32> -> memref<4xf32>
  }
}

// -----

// Tests that a source and its target have one type.
plan.program attributes {num_devices = 2 : i64} {
  plan.device 0 {
    %a = plan.alloc : memref<4xf32>
    %m = plan.alloc : memref<2xf32>
    // expected-error@+1 {{averages 'memref<4xf32>' into 'memref<2xf32>'; a source and its target have one type}}
    plan.all_reduce %a into %m group 0 devices [0, 1] : memref<4xf32> -> memref<2xf32>
  }
}
