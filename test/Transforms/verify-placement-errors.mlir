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
