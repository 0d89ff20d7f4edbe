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

// Tests that a training step's state round-trips: a parameter initialized
// from a weight, a zero-initialized moment, and an update that names its
// state among its outputs.
// CHECK-LABEL: plan.program
// CHECK: plan.state @s0 : tensor<4xf32> {device = 0 : i64, init = @w0, name = "w", role = "parameter"}
// CHECK: plan.state @s1 : tensor<4xf32> {device = 0 : i64, name = "w.momentum", role = "momentum"}
// CHECK: plan.kernel "sgd_update"(%[[P:.*]], %{{.*}}, %[[M:.*]]) -> (%[[P]], %[[M]])
plan.program attributes {num_devices = 1 : i64} {
  plan.weight @w0 {value = dense<1.0> : tensor<4xf32>}
  plan.state @s0 : tensor<4xf32> {device = 0 : i64, name = "w", role = "parameter", init = @w0}
  plan.state @s1 : tensor<4xf32> {device = 0 : i64, name = "w.momentum", role = "momentum"}
  plan.input @g : tensor<4xf32>
  plan.device 0 attributes {arena_size = 64 : i64} {
    %g = plan.alloc {offset = 0 : i64} : memref<4xf32>
    plan.load_input @g[0] into %g : memref<4xf32>
    %p = plan.state_ref @s0 : memref<4xf32>
    %m = plan.state_ref @s1 : memref<4xf32>
    plan.kernel "sgd_update"(%p, %g, %m) -> (%p, %m) {params = {lr = 0.1 : f64, momentum = 0.9 : f64, weight_decay = 0.0 : f64}} : (memref<4xf32>, memref<4xf32>, memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
  }
}

// Tests that a collective round-trips: each device's part of group 0.
// CHECK-LABEL: plan.program
// CHECK: plan.all_reduce %{{.*}} into %{{.*}} group 0 devices [0, 1] : memref<4xf32> -> memref<4xf32>
// CHECK: plan.all_reduce %{{.*}} into %{{.*}} group 0 devices [0, 1] : memref<4xf32> -> memref<4xf32>
plan.program attributes {num_devices = 2 : i64} {
  plan.input @x : tensor<2x4xf32>
  plan.device 0 {
    %a = plan.alloc : memref<4xf32>
    plan.load_input @x[0] into %a : memref<4xf32>
    %m = plan.alloc : memref<4xf32>
    plan.all_reduce %a into %m group 0 devices [0, 1] : memref<4xf32> -> memref<4xf32>
  }
  plan.device 1 {
    %a = plan.alloc : memref<4xf32>
    plan.load_input @x[16] into %a : memref<4xf32>
    %m = plan.alloc : memref<4xf32>
    plan.all_reduce %a into %m group 0 devices [0, 1] : memref<4xf32> -> memref<4xf32>
  }
}

// Tests that a bucket of two means round-trips.
// CHECK-LABEL: plan.program
// CHECK: plan.all_reduce %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} group 0 devices [0, 1] : memref<4xf32>, memref<2xf32> -> memref<4xf32>, memref<2xf32>
plan.program attributes {num_devices = 2 : i64} {
  plan.device 0 {
    %a = plan.alloc : memref<4xf32>
    %b = plan.alloc : memref<2xf32>
    %m = plan.alloc : memref<4xf32>
    %n = plan.alloc : memref<2xf32>
    plan.all_reduce %a, %b into %m, %n group 0 devices [0, 1] : memref<4xf32>, memref<2xf32> -> memref<4xf32>, memref<2xf32>
  }
  plan.device 1 {
    %a = plan.alloc : memref<4xf32>
    %b = plan.alloc : memref<2xf32>
    %m = plan.alloc : memref<4xf32>
    %n = plan.alloc : memref<2xf32>
    plan.all_reduce %a, %b into %m, %n group 0 devices [0, 1] : memref<4xf32>, memref<2xf32> -> memref<4xf32>, memref<2xf32>
  }
}
