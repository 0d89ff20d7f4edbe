// RUN: partc-opt %s --partc-assign-streams="max-streams=5" --split-input-file --verify-diagnostics
// RUN: not partc-opt %s --partc-assign-streams="devices=2xtpu" --split-input-file 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not partc-opt %s --partc-assign-streams="cost-table=%t.missing.json" --split-input-file 2>&1 | FileCheck %s --check-prefix=TABLE

// Tests that an unknown device preset (which costs the branches) is named
// with the presets there are.
// DEVICES: error: partc-assign-streams: --devices: unknown device 'tpu'; presets are h200,

// Tests that a cost table that cannot be read is named, with what to pass.
// TABLE: error: partc-assign-streams: --cost-table: cannot read cost table '{{.*}}.missing.json': {{.*}}; hint: pass a profile written by partc-run --profile

// Tests that more streams than the plan format has are refused, with what
// the option means.
// expected-error@+1 {{partc-assign-streams: max-streams must be from 1 to 4, got 5; hint: 1 keeps every kernel on its device's one stream}}
module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// Tests that the stream attribute names a stream the plan format has.
module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{'graph.stream' must be an integer from 0 to 3, got 4 : i64}}
    %r = graph.relu %x {graph.device = 0 : i64, graph.stream = 4 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

