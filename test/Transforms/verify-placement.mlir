// RUN: partc-opt %s --partc-verify-placement | FileCheck %s

// Tests that a correctly placed graph with transfers passes unchanged.
// CHECK-LABEL: func @main
// CHECK: graph.transfer
module attributes {graph.num_devices = 2 : i64} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = graph.relu %x {graph.device = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %t = graph.transfer %a {graph.device = 1 : i64, source = 0 : i64, target = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %b = graph.neg %t {graph.device = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %b : tensor<4xf32>
  }
}
