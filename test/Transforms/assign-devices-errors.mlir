// RUN: partc-opt %s --partc-assign-devices="num-devices=3" --split-input-file --verify-diagnostics
// RUN: not partc-opt %s --partc-assign-devices="num-devices=2 split-at=nowhere" 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not partc-opt %s --partc-assign-devices="num-devices=3 split-at=a" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not partc-opt %s --partc-assign-devices="num-devices=0" 2>&1 | FileCheck %s --check-prefix=ZERO

// Tests that asking for more devices than ops is an error.
// expected-error@below {{cannot split 2 op(s) over 3 devices}}
module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32> loc("a")
    %b = graph.neg %a : (tensor<4xf32>) -> tensor<4xf32> loc("b")
    return %b : tensor<4xf32>
  }
}
// NAME: no ONNX node named 'nowhere' remains in the graph
// COUNT: --split-at names 1 cut(s), giving 2 stages, but 3 devices were requested
// ZERO: --devices must be at least 1, got 0
