// RUN: partc-opt %s --partc-bucket-all-reduces --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-bucket-all-reduces="bucket-bytes=64" --split-input-file | FileCheck %s --check-prefix=SMALL
// RUN: partc-opt %s --partc-bucket-all-reduces="bucket-bytes=1" --split-input-file | FileCheck %s --check-prefix=ONE

// Tests that three consecutive gradient averages on two replicas become one
// bucket on each device, where the last gradient is computed, with the
// means in the members' order; a limit of 64 bytes splits them (48 + 32 is
// over it, 32 + 16 is not) and 1 byte keeps one all-reduce per gradient.
// CHECK-LABEL: func @three
// CHECK: %[[C0:.*]] = graph.neg %arg2 {graph.device = 0
// CHECK-NEXT: %[[M0:.*]]:3 = graph.all_reduce %arg0, %arg1, %[[C0]] {devices = array<i64: 0, 1>, graph.device = 0 : i64, group = 0 : i64}
// CHECK-SAME: : (tensor<12xf32>, tensor<8xf32>, tensor<4xf32>) -> (tensor<12xf32>, tensor<8xf32>, tensor<4xf32>)
// CHECK: %[[M1:.*]]:3 = graph.all_reduce %arg3, %arg4, %{{.*}} {devices = array<i64: 0, 1>, graph.device = 1 : i64, group = 0 : i64}
// CHECK: graph.add %[[M0]]#0, %[[M1]]#0
// CHECK: graph.add %[[M0]]#1, %[[M1]]#1
// CHECK: graph.add %[[M0]]#2, %[[M1]]#2
// SMALL-LABEL: func @three
// SMALL: graph.all_reduce %arg0 {{{.*}}graph.device = 0 : i64, group = 0 : i64} : (tensor<12xf32>) -> tensor<12xf32>
// SMALL: graph.all_reduce %arg3 {{{.*}}graph.device = 1 : i64, group = 0 : i64} : (tensor<12xf32>) -> tensor<12xf32>
// SMALL: graph.all_reduce %arg1, %{{.*}} {{{.*}}graph.device = 0 : i64, group = 1 : i64} : (tensor<8xf32>, tensor<4xf32>)
// SMALL: graph.all_reduce %arg4, %{{.*}} {{{.*}}graph.device = 1 : i64, group = 1 : i64} : (tensor<8xf32>, tensor<4xf32>)
// ONE-LABEL: func @three
// ONE-COUNT-6: graph.all_reduce %{{[^,]*}} {
// ONE-NOT: graph.all_reduce
// ONE: return
func.func @three(%a0: tensor<12xf32>, %b0: tensor<8xf32>, %c0: tensor<4xf32>, %a1: tensor<12xf32>, %b1: tensor<8xf32>, %c1: tensor<4xf32>) -> (tensor<12xf32>, tensor<8xf32>, tensor<4xf32>) {
  %ma0 = graph.all_reduce %a0 {graph.device = 0 : i64, group = 0 : i64, devices = array<i64: 0, 1>} : (tensor<12xf32>) -> tensor<12xf32>
  %ma1 = graph.all_reduce %a1 {graph.device = 1 : i64, group = 0 : i64, devices = array<i64: 0, 1>} : (tensor<12xf32>) -> tensor<12xf32>
  %mb0 = graph.all_reduce %b0 {graph.device = 0 : i64, group = 1 : i64, devices = array<i64: 0, 1>} : (tensor<8xf32>) -> tensor<8xf32>
  %mb1 = graph.all_reduce %b1 {graph.device = 1 : i64, group = 1 : i64, devices = array<i64: 0, 1>} : (tensor<8xf32>) -> tensor<8xf32>
  %n0 = graph.neg %c0 {graph.device = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %mc0 = graph.all_reduce %n0 {graph.device = 0 : i64, group = 2 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
  %n1 = graph.neg %c1 {graph.device = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %mc1 = graph.all_reduce %n1 {graph.device = 1 : i64, group = 2 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
  %sa = graph.add %ma0, %ma1 {graph.device = 0 : i64} : (tensor<12xf32>, tensor<12xf32>) -> tensor<12xf32>
  %sb = graph.add %mb0, %mb1 {graph.device = 0 : i64} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %sc = graph.add %mc0, %mc1 {graph.device = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %sa, %sb, %sc : tensor<12xf32>, tensor<8xf32>, tensor<4xf32>
}

// -----

// Tests that a mean read before the next gradient's average closes the
// bucket (the bucket's op would come after its reader), and that the
// groups are numbered again in order.
// CHECK-LABEL: func @read_between
// CHECK: %[[A:.*]] = graph.all_reduce %arg0 {{{.*}}group = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = graph.neg %[[A]]
// CHECK-NEXT: %{{.*}}:2 = graph.all_reduce %arg1, %[[R]] {{{.*}}group = 1 : i64}
func.func @read_between(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %ma = graph.all_reduce %a {graph.device = 0 : i64, group = 5 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
  %r = graph.neg %ma {graph.device = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %mb = graph.all_reduce %b {graph.device = 0 : i64, group = 6 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
  %mr = graph.all_reduce %r {graph.device = 0 : i64, group = 7 : i64, devices = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
  return %mb, %mr : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that averages over different replicas (a hybrid's stages: devices
// 0 and 2 hold stage 0, 1 and 3 stage 1) are never bucketed together, and
// that each stage's consecutive averages are.
// CHECK-LABEL: func @stages
// CHECK: graph.all_reduce %arg0, %arg1 {devices = array<i64: 1, 3>, graph.device = 1 : i64, group = 0 : i64}
// CHECK-NEXT: graph.all_reduce %arg2 {devices = array<i64: 0, 2>, graph.device = 0 : i64, group = 1 : i64}
// CHECK-NOT: graph.all_reduce
// CHECK: return
func.func @stages(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %ma = graph.all_reduce %a {graph.device = 1 : i64, group = 0 : i64, devices = array<i64: 1, 3>} : (tensor<4xf32>) -> tensor<4xf32>
  %mb = graph.all_reduce %b {graph.device = 1 : i64, group = 1 : i64, devices = array<i64: 1, 3>} : (tensor<4xf32>) -> tensor<4xf32>
  %mc = graph.all_reduce %c {graph.device = 0 : i64, group = 2 : i64, devices = array<i64: 0, 2>} : (tensor<4xf32>) -> tensor<4xf32>
  return %ma, %mb, %mc : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
