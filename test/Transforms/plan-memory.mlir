// RUN: partc-opt %s --partc-plan-memory --split-input-file | FileCheck %s

// Tests liveness-based reuse: %c reuses %b's bytes once %b is dead, a
// buffer read through a view stays live while the view is used, a sent
// buffer stays live until its wait_consumed, and a model input's buffer is
// never reused (partc-run --keep-inputs runs the program again on it).
// CHECK-LABEL: plan.program
// CHECK: plan.device 0 attributes {arena_size = 256 : i64}
// CHECK:   %[[A:.*]] = plan.alloc {offset = 0 : i64} : memref<16xf32>
// CHECK:   %[[B:.*]] = plan.alloc {offset = 64 : i64} : memref<16xf32>
// CHECK:   %[[S:.*]] = plan.alloc {offset = 128 : i64} : memref<16xf32>
// CHECK:   %[[D:.*]] = plan.alloc {offset = 192 : i64} : memref<16xf32>
// CHECK:   %[[C:.*]] = plan.alloc {offset = 64 : i64} : memref<16xf32>
plan.program attributes {num_devices = 2 : i64} {
  plan.input @x : tensor<16xf32>
  plan.device 0 {
    %a = plan.alloc : memref<16xf32>
    plan.load_input @x[0] into %a : memref<16xf32>
    %b = plan.alloc : memref<16xf32>
    %av = plan.view %a : memref<16xf32> to memref<4x4xf32>
    %bv = plan.view %b : memref<16xf32> to memref<4x4xf32>
    plan.kernel "relu"(%av) -> (%bv) {params = {}} : (memref<4x4xf32>) -> memref<4x4xf32>
    %s = plan.alloc : memref<16xf32>
    plan.kernel "neg"(%b) -> (%s) {params = {}} : (memref<16xf32>) -> memref<16xf32>
    plan.send %s to 1 channel 0 : memref<16xf32>
    %d = plan.alloc : memref<16xf32>
    plan.kernel "exp"(%b) -> (%d) {params = {}} : (memref<16xf32>) -> memref<16xf32>
    %c = plan.alloc : memref<16xf32>
    plan.kernel "abs"(%d) -> (%c) {params = {}} : (memref<16xf32>) -> memref<16xf32>
    plan.wait_consumed 0
  }
  plan.device 1 {
    %r = plan.alloc : memref<16xf32>
    plan.recv %r from 0 channel 0 : memref<16xf32>
  }
}

// -----

// Tests that an all_reduce's input stays live until its average is read:
// the collective runs alongside the instructions after it, so %n may not
// take %g's bytes although no later instruction reads %g.
// CHECK-LABEL: plan.program
// CHECK:   %[[G:.*]] = plan.alloc {offset = 64 : i64} : memref<16xf32>
// CHECK:   %[[M:.*]] = plan.alloc {offset = 128 : i64} : memref<16xf32>
// CHECK:   %[[N:.*]] = plan.alloc {offset = 192 : i64} : memref<16xf32>
plan.program attributes {num_devices = 2 : i64} {
  plan.input @x : tensor<2x16xf32>
  plan.device 0 {
    %a = plan.alloc : memref<16xf32>
    plan.load_input @x[0] into %a : memref<16xf32>
    %g = plan.alloc : memref<16xf32>
    plan.kernel "neg"(%a) -> (%g) {params = {}} : (memref<16xf32>) -> memref<16xf32>
    %m = plan.alloc : memref<16xf32>
    plan.all_reduce %g into %m group 0 devices [0, 1] : memref<16xf32> -> memref<16xf32>
    %n = plan.alloc : memref<16xf32>
    plan.kernel "exp"(%a) -> (%n) {params = {}} : (memref<16xf32>) -> memref<16xf32>
    %o = plan.alloc : memref<16xf32>
    plan.kernel "add"(%m, %n) -> (%o) {params = {}} : (memref<16xf32>, memref<16xf32>) -> memref<16xf32>
  }
  plan.device 1 {
    %a = plan.alloc : memref<16xf32>
    plan.load_input @x[64] into %a : memref<16xf32>
    %m = plan.alloc : memref<16xf32>
    plan.all_reduce %a into %m group 0 devices [0, 1] : memref<16xf32> -> memref<16xf32>
  }
}

// -----

// Tests that buffers touched by kernels on branch streams stay live until
// the join (the first later kernel without a stream): %b2 gets bytes of
// its own although %a is dead after the first branch's kernel (without
// streams it would take %a's offset 64), and so does the join's result.
// CHECK-LABEL: plan.program
// CHECK: plan.device 0 attributes {arena_size = 320 : i64}
// CHECK:   plan.alloc {offset = 0 : i64} : memref<16xf32>
// CHECK:   plan.alloc {offset = 64 : i64} : memref<16xf32>
// CHECK:   plan.alloc {offset = 128 : i64} : memref<16xf32>
// CHECK:   plan.alloc {offset = 192 : i64} : memref<16xf32>
// CHECK:   plan.alloc {offset = 256 : i64} : memref<16xf32>
plan.program attributes {num_devices = 1 : i64} {
  plan.input @x : tensor<16xf32>
  plan.output @y : tensor<16xf32>
  plan.device 0 {
    %x = plan.alloc : memref<16xf32>
    plan.load_input @x[0] into %x : memref<16xf32>
    %a = plan.alloc : memref<16xf32>
    plan.kernel "relu"(%x) -> (%a) {params = {}} : (memref<16xf32>) -> memref<16xf32>
    %b1 = plan.alloc : memref<16xf32>
    plan.kernel "neg"(%a) -> (%b1) {params = {}, stream = 0 : i64} : (memref<16xf32>) -> memref<16xf32>
    %b2 = plan.alloc : memref<16xf32>
    plan.kernel "exp"(%x) -> (%b2) {params = {}, stream = 1 : i64} : (memref<16xf32>) -> memref<16xf32>
    %j = plan.alloc : memref<16xf32>
    plan.kernel "add"(%b1, %b2) -> (%j) {params = {}} : (memref<16xf32>, memref<16xf32>) -> memref<16xf32>
    plan.store_output %j into @y[0] : memref<16xf32>
  }
}
