// RUN: partc-opt %s --split-input-file --partc-search-placement="devices=2xh100 memory-gib=0.005" --verify-diagnostics

// Tests that a model whose weights exceed every split says how many devices
// would do: 4 MiB per weight, 5 MiB per device.
module {
  // expected-error@below {{the model does not fit: split over 2 device(s), the heaviest stage needs 8.0 MiB but each device has 5.1 MiB; use --devices 4 or more}}
  func.func @main(%x: tensor<8x1024xf32>) -> tensor<8x1024xf32> {
    %w = graph.constant {value = dense<0.5> : tensor<1024x1024xf32>} : () -> tensor<1024x1024xf32>
    %a = graph.matmul %x, %w : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %v = graph.constant {value = dense<0.25> : tensor<1024x1024xf32>} : () -> tensor<1024x1024xf32>
    %b = graph.matmul %a, %v : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %u = graph.constant {value = dense<0.125> : tensor<1024x1024xf32>} : () -> tensor<1024x1024xf32>
    %c = graph.matmul %b, %u : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %t = graph.constant {value = dense<0.0625> : tensor<1024x1024xf32>} : () -> tensor<1024x1024xf32>
    %d = graph.matmul %c, %t : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    return %d : tensor<8x1024xf32>
  }
}

// -----

// Tests that one op larger than a device cannot be placed at all.
module {
  // expected-error@below {{one op needs 16.0 MiB but each device has 5.1 MiB; no split across devices can fit this model}}
  func.func @main(%x: tensor<8x2048xf32>) -> tensor<8x2048xf32> {
    %w = graph.constant {value = dense<0.5> : tensor<2048x2048xf32>} : () -> tensor<2048x2048xf32>
    %a = graph.matmul %x, %w : (tensor<8x2048xf32>, tensor<2048x2048xf32>) -> tensor<8x2048xf32>
    return %a : tensor<8x2048xf32>
  }
}

// -----

// Tests that unknown device presets are rejected with the list of presets.
// RUN: not partc-opt %s --split-input-file --partc-search-placement="devices=3xtpu" 2>&1 | FileCheck %s --check-prefix=PRESET
// PRESET: --devices: unknown device 'tpu'; presets are h200, h100, h100-pcie, a100, l40s
// expected-remark@below {{plan: 1 stage x 1 replica}}
module {
  func.func @main(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %a = graph.relu %x : (tensor<8x8xf32>) -> tensor<8x8xf32>
    return %a : tensor<8x8xf32>
  }
}

// -----

// Tests that the model rejected above fits once enough devices are given:
// four 4 MiB weights on four 5 MiB devices.
// RUN: not partc-opt %s --split-input-file --partc-search-placement="devices=4xh100 memory-gib=0.005" 2>&1 | FileCheck %s --check-prefix=FITS
// FITS: plan: 4 stages x 1 replica, 1 micro-batch, cuts before ops [1,2,3]
module {
  // expected-error@below {{the model does not fit: split over 2 device(s)}}
  func.func @main(%x: tensor<8x1024xf32>) -> tensor<8x1024xf32> {
    %w = graph.constant {value = dense<0.5> : tensor<1024x1024xf32>} : () -> tensor<1024x1024xf32>
    %a = graph.matmul %x, %w : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %v = graph.constant {value = dense<0.25> : tensor<1024x1024xf32>} : () -> tensor<1024x1024xf32>
    %b = graph.matmul %a, %v : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %u = graph.constant {value = dense<0.125> : tensor<1024x1024xf32>} : () -> tensor<1024x1024xf32>
    %c = graph.matmul %b, %u : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %t = graph.constant {value = dense<0.0625> : tensor<1024x1024xf32>} : () -> tensor<1024x1024xf32>
    %d = graph.matmul %c, %t : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    return %d : tensor<8x1024xf32>
  }
}
