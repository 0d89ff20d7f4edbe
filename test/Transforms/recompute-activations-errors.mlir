// RUN: partc-opt %s --partc-recompute-activations="target-bytes=-1" --split-input-file --verify-diagnostics
// RUN: not partc-opt %s --partc-recompute-activations="all=true devices=2xtpu" 2>&1 | FileCheck %s --check-prefix=DEVICES

// Tests that an unknown device preset (which costs the candidates) is
// named with the presets there are.
// DEVICES: error: partc-recompute-activations: --devices: unknown device 'tpu'; presets are h200,

// Tests that a negative byte target is refused with what the option
// means.
// expected-error@+1 {{partc-recompute-activations: target-bytes must not be negative (got -1); hint: 0 recomputes nothing, all=true everything that can be}}
module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
