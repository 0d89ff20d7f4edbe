// RUN: partc-opt %s --partc-insert-transfers --split-input-file --verify-diagnostics

// Tests that the pass needs the importer's @main.
// expected-error@+1 {{expected a func.func @main with a body}}
module {
  func.func @other(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
