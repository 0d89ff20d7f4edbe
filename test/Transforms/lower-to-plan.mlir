// RUN: partc-opt %s --partc-lower-to-plan --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-lower-to-plan="transport=nccl" --split-input-file | FileCheck %s --check-prefix=NCCL

// Tests the lowering of a two-stage graph: weights become plan.weight,
// inputs are loaded where used, reshapes become views, the transfer becomes
// send/recv with a wait before the source's next send, and the output is
// stored where it is produced.
// CHECK-LABEL: plan.program
// CHECK: plan.weight @w0
// CHECK: plan.input @x : tensor<2x4xf32>
// CHECK: plan.output @y : tensor<8xf32>
// CHECK: plan.device 0 {
// CHECK:   %[[IN:.*]] = plan.alloc : memref<2x4xf32>
// CHECK:   plan.load_input @x[0] into %[[IN]]
// CHECK:   %[[W:.*]] = plan.weight_ref @w0 : memref<4xf32>
// CHECK:   %[[A:.*]] = plan.alloc : memref<2x4xf32>
// CHECK:   plan.kernel "mul"(%[[IN]], %[[W]]) -> (%[[A]]) {params = {}}
// CHECK:   %[[V:.*]] = plan.view %[[A]] : memref<2x4xf32> to memref<8xf32>
// CHECK:   plan.send %[[V]] to 1 channel 0 :
// With transport=nccl, the send says that NCCL moves the channel.
// NCCL-LABEL: plan.program
// NCCL: plan.send %{{.*}} to 1 channel 0 {transport = "nccl"}
// CHECK:   plan.wait_consumed 0
// CHECK: plan.device 1 {
// CHECK:   %[[R:.*]] = plan.alloc : memref<8xf32>
// CHECK:   plan.recv %[[R]] from 0 channel 0
// CHECK:   %[[O:.*]] = plan.alloc : memref<8xf32>
// CHECK:   plan.kernel "leaky_relu"(%[[R]]) -> (%[[O]]) {params = {alpha = 1.000000e-01 : f64}}
// CHECK:   plan.store_output %[[O]] into @y[0]
module attributes {graph.num_devices = 2 : i64} {
  func.func @main(%x: tensor<2x4xf32> {graph.name = "x"}) -> (tensor<8xf32> {graph.name = "y"}) {
    %w = graph.constant {value = dense<2.0> : tensor<4xf32>} : () -> tensor<4xf32>
    %a = graph.mul %x, %w {graph.device = 0 : i64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %f = graph.reshape %a {graph.device = 0 : i64, shape = array<i64: 8>} : (tensor<2x4xf32>) -> tensor<8xf32>
    %t = graph.transfer %f {graph.device = 1 : i64, source = 0 : i64, target = 1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
    %y = graph.leaky_relu %t {graph.device = 1 : i64, alpha = 0.1 : f64} : (tensor<8xf32>) -> tensor<8xf32>
    return %y : tensor<8xf32>
  }
}

// -----

// Tests that data-parallel parts load their rows of the input at a byte
// offset and store their rows of the output at a byte offset.
// CHECK-LABEL: plan.program
// CHECK: plan.device 0 {
// CHECK:   plan.load_input @x[0] into
// CHECK:   plan.kernel "relu"
// CHECK:   plan.store_output {{.*}} into @y[0]
// CHECK: plan.device 1 {
// CHECK:   plan.load_input @x[12] into
// CHECK:   plan.kernel "relu"
// CHECK:   plan.store_output {{.*}} into @y[12]
module attributes {graph.num_devices = 2 : i64} {
  func.func @main(%x: tensor<2x3xf32> {graph.name = "x"}) -> (tensor<2x3xf32> {graph.name = "y"}) {
    %s0 = graph.slice %x {graph.device = -1 : i64, starts = array<i64: 0, 0>, ends = array<i64: 1, 3>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<1x3xf32>
    %r0 = graph.relu %s0 {graph.device = 0 : i64} : (tensor<1x3xf32>) -> tensor<1x3xf32>
    %s1 = graph.slice %x {graph.device = -1 : i64, starts = array<i64: 1, 0>, ends = array<i64: 2, 3>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<1x3xf32>
    %r1 = graph.relu %s1 {graph.device = 1 : i64} : (tensor<1x3xf32>) -> tensor<1x3xf32>
    %c = graph.concat %r0, %r1 {graph.device = -1 : i64, axis = 0 : i64} : (tensor<1x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
    return %c : tensor<2x3xf32>
  }
}

// -----

// Tests data-parallel training state: each replica's variable becomes a
// plan.state of its device, both initialized from one plan.weight, and
// each graph.all_reduce a plan.all_reduce of its device into a buffer of
// its own; replica 0's average is the output.
// CHECK-LABEL: plan.program
// CHECK: plan.weight @[[INIT:w[0-9]+]] {value = dense<5.000000e-01> : tensor<4xf32>}
// CHECK-NOT: plan.weight
// CHECK: plan.state @s0 : tensor<4xf32> {device = 0 : i64, init = @[[INIT]], name = "w", role = "parameter"}
// CHECK: plan.state @s1 : tensor<4xf32> {device = 1 : i64, init = @[[INIT]], name = "w", role = "parameter"}
// CHECK: plan.device 0 {
// CHECK:   plan.kernel "mul"
// CHECK:   %[[M0:.*]] = plan.view
// CHECK:   %[[A0:.*]] = plan.alloc
// CHECK:   plan.all_reduce %[[M0]] into %[[A0]] group 0 devices [0, 1] : memref<4xf32> -> memref<4xf32>
// CHECK:   plan.store_output %[[A0]] into @g[0]
// CHECK: plan.device 1 {
// CHECK:   plan.all_reduce {{.*}} group 0 devices [0, 1]
// CHECK-NOT: plan.store_output
module attributes {graph.num_devices = 2 : i64} {
  func.func @main(%x: tensor<2x4xf32> {graph.name = "x"}) -> (tensor<4xf32> {graph.name = "g"}) {
    %s0 = graph.slice %x {graph.device = -1 : i64, starts = array<i64: 0, 0>, ends = array<i64: 1, 4>, steps = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<1x4xf32>
    %w0 = graph.variable {graph.device = 0 : i64, name = "w", role = "parameter", value = dense<0.5> : tensor<4xf32>} : tensor<4xf32>
    %m0 = graph.mul %s0, %w0 {graph.device = 0 : i64} : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
    %r0 = graph.reshape %m0 {graph.device = 0 : i64, shape = array<i64: 4>} : (tensor<1x4xf32>) -> tensor<4xf32>
    %a0 = graph.all_reduce %r0 {graph.device = 0 : i64, group = 0 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
    %s1 = graph.slice %x {graph.device = -1 : i64, starts = array<i64: 1, 0>, ends = array<i64: 2, 4>, steps = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<1x4xf32>
    %w1 = graph.variable {graph.device = 1 : i64, name = "w", role = "parameter", value = dense<0.5> : tensor<4xf32>} : tensor<4xf32>
    %m1 = graph.mul %s1, %w1 {graph.device = 1 : i64} : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
    %r1 = graph.reshape %m1 {graph.device = 1 : i64, shape = array<i64: 4>} : (tensor<1x4xf32>) -> tensor<4xf32>
    %a1 = graph.all_reduce %r1 {graph.device = 1 : i64, group = 0 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
    return %a0 : tensor<4xf32>
  }
}

// -----

// Tests a transfer received at its first reader (training pipelines): the
// source sends right after computing the value, before its later work,
// and waits for the receipt where the transfer stands; no wait before its
// next send to the same device.
// CHECK-LABEL: plan.program
// CHECK: plan.device 0 {
// CHECK:   plan.kernel "relu"(%{{.*}}) -> (%[[A:.*]]) {params = {}}
// CHECK-NEXT:   plan.send %[[A]] to 1 channel 0 :
// CHECK:   plan.kernel "neg"(%[[A]]) -> (%[[B:.*]]) {params = {}}
// CHECK-NEXT:   plan.send %[[B]] to 1 channel 1 :
// CHECK-NEXT:   plan.wait_consumed 0
// CHECK-NEXT:   plan.wait_consumed 1
// CHECK-NEXT: }
// CHECK: plan.device 1 {
// CHECK:   plan.recv %{{.*}} from 0 channel 0
// CHECK:   plan.recv %{{.*}} from 0 channel 1
module attributes {graph.num_devices = 2 : i64} {
  func.func @main(%x: tensor<4xf32> {graph.name = "x"}) -> (tensor<4xf32> {graph.name = "y"}) {
    %a = graph.relu %x {graph.device = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %b = graph.neg %a {graph.device = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %ta = graph.transfer %a {graph.device = 1 : i64, graph.receive_at_use, source = 0 : i64, target = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %tb = graph.transfer %b {graph.device = 1 : i64, graph.receive_at_use, source = 0 : i64, target = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %y = graph.add %ta, %tb {graph.device = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// Tests that a slice of whole rows at a multiple of 64 bytes is a view at
// that offset (a prefix, and rows 4 to 7 of 16 floats each), while a slice
// of part of each row, a strided slice and rows at an unaligned offset (row
// 1 of 4 floats: byte 16) stay kernels.
// CHECK-LABEL: plan.program
// CHECK: plan.kernel "relu"(%{{[0-9]+}}) -> (%[[A:[0-9]+]])
// CHECK: plan.view %[[A]] : memref<8x16xf32> to memref<2x16xf32>
// CHECK: plan.view %[[A]] {byte_offset = 256 : i64} : memref<8x16xf32> to memref<4x16xf32>
// CHECK: plan.kernel "slice"(%[[A]]) {{.*}}memref<4x15xf32>
// CHECK: plan.kernel "slice"(%[[A]]) {{.*}}memref<4x16xf32>
// CHECK: plan.kernel "slice"({{.*}}memref<2x4xf32>
// CHECK-NOT: plan.view
module attributes {graph.num_devices = 1 : i64} {
  func.func @main(%x: tensor<8x16xf32> {graph.name = "x"}, %y: tensor<8x4xf32> {graph.name = "y"}) -> (tensor<2x16xf32> {graph.name = "p"}, tensor<4x16xf32> {graph.name = "r"}, tensor<4x15xf32> {graph.name = "c"}, tensor<4x16xf32> {graph.name = "s"}, tensor<2x4xf32> {graph.name = "u"}) {
    %a = graph.relu %x {graph.device = 0 : i64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %p = graph.slice %a {graph.device = 0 : i64, starts = array<i64: 0, 0>, ends = array<i64: 2, 16>, steps = array<i64: 1, 1>} : (tensor<8x16xf32>) -> tensor<2x16xf32>
    %r = graph.slice %a {graph.device = 0 : i64, starts = array<i64: 4, 0>, ends = array<i64: 8, 16>, steps = array<i64: 1, 1>} : (tensor<8x16xf32>) -> tensor<4x16xf32>
    %c = graph.slice %a {graph.device = 0 : i64, starts = array<i64: 0, 1>, ends = array<i64: 4, 16>, steps = array<i64: 1, 1>} : (tensor<8x16xf32>) -> tensor<4x15xf32>
    %s = graph.slice %a {graph.device = 0 : i64, starts = array<i64: 0, 0>, ends = array<i64: 8, 16>, steps = array<i64: 2, 1>} : (tensor<8x16xf32>) -> tensor<4x16xf32>
    %b = graph.relu %y {graph.device = 0 : i64} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %u = graph.slice %b {graph.device = 0 : i64, starts = array<i64: 1, 0>, ends = array<i64: 3, 4>, steps = array<i64: 1, 1>} : (tensor<8x4xf32>) -> tensor<2x4xf32>
    return %p, %r, %c, %s, %u : tensor<2x16xf32>, tensor<4x16xf32>, tensor<4x15xf32>, tensor<4x16xf32>, tensor<2x4xf32>
  }
}
