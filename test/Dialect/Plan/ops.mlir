// RUN: partc-opt %s | partc-opt | FileCheck %s

// Tests that a complete two-device plan round-trips.
// CHECK-LABEL: plan.program
// CHECK: plan.weight @w {value = dense<1.000000e+00> : tensor<4xf32>}
// CHECK: plan.device 0 attributes {arena_size = 64 : i64}
// CHECK: plan.send %{{.*}} to 1 channel 0 : memref<4xf32>
// CHECK: plan.wait_consumed 0
// CHECK: plan.recv %{{.*}} from 0 channel 0 : memref<4xf32>
// CHECK: plan.kernel "add"(%{{.*}}, %{{.*}}) -> (%{{.*}}) {micro_batch = 0 : i64, params = {}}
// CHECK: plan.store_output %{{.*}} into @y[0] : memref<4xf32>
plan.program attributes {num_devices = 2 : i64, metadata = {strategy = "pipeline"}} {
  plan.weight @w {value = dense<1.0> : tensor<4xf32>}
  plan.input @x : tensor<4xf32>
  plan.output @y : tensor<4xf32>
  plan.device 0 attributes {arena_size = 64 : i64} {
    %a = plan.alloc {offset = 0 : i64} : memref<4xf32>
    plan.load_input @x[0] into %a : memref<4xf32>
    plan.send %a to 1 channel 0 : memref<4xf32>
    plan.wait_consumed 0
  }
  plan.device 1 attributes {arena_size = 128 : i64} {
    %r = plan.alloc {offset = 0 : i64} : memref<4xf32>
    plan.recv %r from 0 channel 0 : memref<4xf32>
    %w = plan.weight_ref @w : memref<4xf32>
    %o = plan.alloc {offset = 64 : i64} : memref<4xf32>
    plan.kernel "add"(%r, %w) -> (%o) {params = {}, micro_batch = 0 : i64} : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
    plan.store_output %o into @y[0] : memref<4xf32>
  }
}
