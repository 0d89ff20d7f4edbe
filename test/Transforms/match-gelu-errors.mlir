// RUN: partc-opt %s --partc-match-gelu --split-input-file --verify-diagnostics

// Tests that the graph.gelu the pass writes is checked like any: its input
// and result must have one type (so a formula whose outer product
// broadcasts is not matched; this one is written by hand).
func.func @shape(%x: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error@+2 {{'graph.gelu' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error@+1 {{'graph.gelu' op failed to infer returned types}}
  %g = graph.gelu %x {approximate = "tanh"} : (tensor<4xf32>) -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}
