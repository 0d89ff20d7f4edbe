// RUN: partc-opt %s --partc-assign-devices="num-devices=2" --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-assign-devices="num-devices=2 split-at=first" --split-input-file | FileCheck %s --check-prefix=CUT

// Tests that the automatic split balances FLOPs: the matmul (2*4*64*64 flops)
// outweighs everything else, so it gets a stage of its own.
// CHECK: module attributes {graph.num_devices = 2
// CHECK-LABEL: func @main
// CUT-LABEL: func @main
func.func @main(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %w = graph.constant {value = dense<1.0> : tensor<64x64xf32>} : () -> tensor<64x64xf32>
  // CHECK: graph.relu {{.*}}graph.device = 0
  // CUT: graph.relu {{.*}}graph.device = 0
  %a = graph.relu %x : (tensor<4x64xf32>) -> tensor<4x64xf32> loc("first")
  // CHECK: graph.neg {{.*}}graph.device = 0
  // CUT: graph.neg {{.*}}graph.device = 1
  %b = graph.neg %a : (tensor<4x64xf32>) -> tensor<4x64xf32> loc("second")
  // CHECK: graph.matmul {{.*}}graph.device = 1
  // CUT: graph.matmul {{.*}}graph.device = 1
  %c = graph.matmul %b, %w : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32> loc("third")
  return %c : tensor<4x64xf32>
}
