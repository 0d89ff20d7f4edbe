// RUN: partc-opt %s --partc-fuse-activations --split-input-file --verify-diagnostics

// Tests that only known activations can be fused into a producer.
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{attribute 'activation' failed to satisfy constraint: string attribute a fused activation (relu)}}
  %a = graph.add %x, %x {activation = "gelu"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

