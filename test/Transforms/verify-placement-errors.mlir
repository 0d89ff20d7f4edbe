// RUN: partc-opt %s --partc-verify-placement --split-input-file --verify-diagnostics

// Tests that a cross-device use without a transfer is caught with a hint.
module attributes {graph.num_devices = 2 : i64} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = graph.relu %x {graph.device = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    // expected-error@+1 {{operand #0 is produced on device 0 but used on device 1; run partc-insert-transfers}}
    %b = graph.neg %a {graph.device = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %b : tensor<4xf32>
  }
}

// -----

// Tests that every op needs a device.
module attributes {graph.num_devices = 1 : i64} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{has no device; run partc-assign-devices or partc-replicate-data-parallel}}
    %a = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

// -----

// Tests that devices beyond the module's count are rejected.
module attributes {graph.num_devices = 2 : i64} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{is placed on device 5 but the module has 2 device(s)}}
    %a = graph.relu %x {graph.device = 5 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

// -----

// Tests that a transfer must read from its source device.
module attributes {graph.num_devices = 3 : i64} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = graph.relu %x {graph.device = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    // expected-error@+1 {{moves a value that is not produced on its source device 0}}
    %t = graph.transfer %a {graph.device = 1 : i64, source = 0 : i64, target = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %t : tensor<4xf32>
  }
}

// -----

// Tests that host ops are limited to slicing inputs and gathering outputs.
module attributes {graph.num_devices = 1 : i64} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{runs on the host but does not slice a model input or gather a model output}}
    %c = graph.concat %x, %x {axis = 0 : i64, graph.device = -1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
    %s = graph.slice %c {starts = array<i64: 0>, ends = array<i64: 4>, steps = array<i64: 1>, graph.device = 0 : i64} : (tensor<8xf32>) -> tensor<4xf32>
    return %s : tensor<4xf32>
  }
}

// -----

// Tests that an all_reduce group with no op on one of its devices is
// caught: that device would never join it.
module attributes {graph.num_devices = 2 : i64} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %r = graph.relu %x {graph.device = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    // expected-error@+1 {{'graph.all_reduce' op group 0 has ops on devices 0 but lists devices 0, 1; each listed device needs exactly one}}
    %a = graph.all_reduce %r {graph.device = 0 : i64, group = 0 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

// -----

// Tests that two devices meeting their groups in different orders are
// caught: each would wait for the other forever.
module attributes {graph.num_devices = 2 : i64} {
  // expected-error@+1 {{devices 0 and 1 meet their all_reduce groups in different orders; the collectives would deadlock}}
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %r0 = graph.relu %x {graph.device = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %a0 = graph.all_reduce %r0 {graph.device = 0 : i64, group = 0 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
    %b0 = graph.all_reduce %r0 {graph.device = 0 : i64, group = 1 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
    %r1 = graph.relu %x {graph.device = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %b1 = graph.all_reduce %r1 {graph.device = 1 : i64, group = 1 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
    %a1 = graph.all_reduce %r1 {graph.device = 1 : i64, group = 0 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
    return %a0 : tensor<4xf32>
  }
}

// -----

// Tests that a transfer of state after the state's update is refused: the
// receiver would read the next step's value.
module attributes {graph.num_devices = 2 : i64} {
  func.func @main(%g: tensor<4xf32>) -> tensor<4xf32> {
    %w = graph.variable {graph.device = 0 : i64, name = "w", role = "parameter", value = dense<0.5> : tensor<4xf32>} : tensor<4xf32>
    graph.sgd_update %w, %g {graph.device = 0 : i64, lr = 0.1 : f64} : tensor<4xf32>, tensor<4xf32>
    // expected-error@+1 {{moves state that an update before it already changed; a transfer of state must come before the state's update}}
    %t = graph.transfer %w {graph.device = 1 : i64, source = 0 : i64, target = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %y = graph.relu %t {graph.device = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
