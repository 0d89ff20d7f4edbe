// RUN: partc-opt %s --partc-bucket-all-reduces --split-input-file --verify-diagnostics
// RUN: not partc-opt %s --partc-bucket-all-reduces="bucket-bytes=0" --split-input-file 2>&1 | FileCheck %s --check-prefix=ZERO

// Tests that a limit below one byte is refused (once per input split).
// ZERO: error: bucket-bytes is 0; a bucket holds at least 1 byte (1 keeps one all-reduce per gradient)

// Tests that an average not yet placed on a device is refused with a hint.
func.func @unplaced(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{of group 0 is not placed on a device; hint: buckets are formed after partc-replicate-training places every replica}}
  %m = graph.all_reduce %a {group = 0 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
  return %m : tensor<4xf32>
}

// -----

// Tests that a device meeting one group twice is refused.
func.func @twice(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %m = graph.all_reduce %a {graph.device = 0 : i64, group = 0 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error@+1 {{meets group 0 twice on device 0; each device has one op of a group}}
  %n = graph.all_reduce %a {graph.device = 0 : i64, group = 0 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
  return %m, %n : tensor<4xf32>, tensor<4xf32>
}
