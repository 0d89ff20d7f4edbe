// RUN: partc-opt %s --split-input-file --partc-search-placement="devices=2xh200" --verify-diagnostics | FileCheck %s
// RUN: partc-opt %s --split-input-file --partc-search-placement="devices=2xh200 stages=2 replicas=1 micro-batches=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=PIPE
// RUN: partc-opt %s --split-input-file --partc-search-placement="devices=2xh200 stages=2 replicas=1 micro-batches=1" 2>/dev/null | FileCheck %s --check-prefix=PIPE-IR
// RUN: partc-opt %s --split-input-file --partc-search-placement="devices=2xh200 objective=latency" 2>&1 >/dev/null | FileCheck %s --check-prefix=LATENCY
// RUN: echo '{"devices": [{"preset": "h200"}, {"preset": "a100"}], "default_link": {"gbps": 10000}}' > %t.json
// RUN: partc-opt %s --split-input-file --partc-search-placement="topology=%t.json stages=2 replicas=1 micro-batches=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=MIXED
// RUN: echo '{"devices": [{"preset": "h200"}, {"preset": "a100"}, {"preset": "h200"}, {"preset": "a100"}], "default_link": {"gbps": 10000}}' > %t.4.json
// The softmax case cannot have replicas, hence `not`.
// RUN: not partc-opt %s --split-input-file --partc-search-placement="topology=%t.4.json stages=2 replicas=2 micro-batches=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=MIXED-REPLICAS
// RUN: echo '{"devices": [{"preset": "h200"}, {"preset": "a100"}, {"preset": "a100"}, {"preset": "h200"}], "default_link": {"gbps": 10000}}' > %t.4b.json
// RUN: not partc-opt %s --split-input-file --partc-search-placement="topology=%t.4b.json stages=2 replicas=2 micro-batches=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=CROSSED-REPLICAS
// RUN: echo '{"devices": [{"preset": "h200"}, {"preset": "h200"}, {"preset": "a100"}, {"preset": "a100"}], "default_link": {"gbps": 10000}}' > %t.4c.json
// RUN: not partc-opt %s --split-input-file --partc-search-placement="topology=%t.4c.json stages=2 replicas=2 micro-batches=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=HYBRID-SLICES
// RUN: not partc-opt %s --split-input-file --partc-search-placement="topology=%t.4c.json stages=2 replicas=2 micro-batches=1" 2>/dev/null | FileCheck %s --check-prefix=HYBRID-IR

// Tests that two heavy, independent-per-sample matmuls on two devices are
// replicated (no transfers, no bubble) rather than pipelined, and that a
// forced two-stage pipeline cuts between the two equal matmuls.
// CHECK: module attributes {graph.num_devices = 2
// CHECK-LABEL: func @main
// CHECK: graph.slice %arg0 {{.*}}graph.device = -1
// CHECK: graph.matmul {{.*}}graph.device = 0
// CHECK: graph.matmul {{.*}}graph.device = 0
// CHECK: graph.matmul {{.*}}graph.device = 1
// CHECK: graph.matmul {{.*}}graph.device = 1
// PIPE: plan: 2 stages x 1 replica, 1 micro-batch, cuts before ops [1]
// PIPE-IR-LABEL: func @main
// PIPE-IR: graph.matmul {{.*}}graph.device = 0
// PIPE-IR: graph.matmul {{.*}}graph.device = 1
// LATENCY: plan: 1 stage x 2 replicas, cuts before ops []
// A hybrid whose replicas are an H200 pair and an A100 pair: the H200
// pipeline takes about three times the rows, each replica's stages run on
// its own devices.
// HYBRID-SLICES: plan: 2 stages x 2 replicas, 1 micro-batch, slices 12325/4059, cuts before ops [1]
// HYBRID-IR-LABEL: func @main
// HYBRID-IR-DAG: graph.matmul {{.*}}graph.device = 0 {{.*}}tensor<12325x4096xf32>
// HYBRID-IR-DAG: graph.matmul {{.*}}graph.device = 3 {{.*}}tensor<4059x4096xf32>
// expected-remark@below {{plan: 1 stage x 2 replicas, cuts before ops []}}
module {
  func.func @main(%x: tensor<16384x4096xf32>) -> tensor<16384x4096xf32> {
    %w = graph.constant {value = dense<0.5> : tensor<4096x4096xf32>} : () -> tensor<4096x4096xf32>
    %a = graph.matmul %x, %w : (tensor<16384x4096xf32>, tensor<4096x4096xf32>) -> tensor<16384x4096xf32>
    %b = graph.matmul %a, %w : (tensor<16384x4096xf32>, tensor<4096x4096xf32>) -> tensor<16384x4096xf32>
    return %b : tensor<16384x4096xf32>
  }
}

// -----

// Tests that a graph mixing the batch (softmax over dimension 0) is neither
// replicated nor micro-batched. For throughput, streamed batches overlap in
// a two-stage pipeline (a batch every slower-stage time); for latency the
// pipeline only adds a transfer, so one device wins.
// CHECK-LABEL: func @main
// CHECK: graph.matmul {{.*}}graph.device = 0
// CHECK: graph.softmax {{.*}}graph.device = 0
// CHECK: graph.matmul {{.*}}graph.device = 1
// PIPE: plan: 2 stages x 1 replica, 1 micro-batch, cuts before ops [2]
// LATENCY: plan: 1 stage x 1 replica, cuts before ops []
// expected-remark@below {{plan: 2 stages x 1 replica, 1 micro-batch, cuts before ops [2]}}
module {
  func.func @main(%x: tensor<8192x4096xf32>) -> tensor<8192x4096xf32> {
    %w = graph.constant {value = dense<0.5> : tensor<4096x4096xf32>} : () -> tensor<4096x4096xf32>
    %a = graph.matmul %x, %w : (tensor<8192x4096xf32>, tensor<4096x4096xf32>) -> tensor<8192x4096xf32>
    %b = graph.softmax %a {axis = 0 : i64} : (tensor<8192x4096xf32>) -> tensor<8192x4096xf32>
    %c = graph.matmul %b, %w : (tensor<8192x4096xf32>, tensor<4096x4096xf32>) -> tensor<8192x4096xf32>
    return %c : tensor<8192x4096xf32>
  }
}

// -----

// Tests that a pipeline over unlike devices gives each stage work in
// proportion to its device: an H200 runs three of four equal matmuls and an
// A100 (a third of its TF32 rate) one. Costed as two equal devices, the
// split is even (two H200s: two launches a device instead of the replicas'
// four outweigh the transfer, which streaming hides).
// CHECK-LABEL: func @main
// CHECK-COUNT-2: graph.matmul {{.*}}graph.device = 0
// CHECK-COUNT-2: graph.matmul {{.*}}graph.device = 1
// PIPE: plan: 2 stages x 1 replica, 1 micro-batch, cuts before ops [2]
// MIXED: plan: 2 stages x 1 replica, 1 micro-batch, cuts before ops [3]
// Two replicas of that pipeline, each an H200 then an A100, split the same
// way; when the second replica runs the other way round (A100 then H200),
// every stage has an A100 and the split is even.
// MIXED-REPLICAS: error: data parallelism needs ops that treat samples independently; 'graph.softmax' (ONNX node ''): it normalizes over the batch dimension, so the model cannot be split along the batch; use
// MIXED-REPLICAS: plan: 2 stages x 2 replicas, 1 micro-batch, cuts before ops [3]
// CROSSED-REPLICAS: plan: 2 stages x 2 replicas, 1 micro-batch, cuts before ops [2]
// LATENCY: plan: 1 stage x 2 replicas, cuts before ops []
// expected-remark@below {{plan: 2 stages x 1 replica, 1 micro-batch, cuts before ops [2]}}
module {
  func.func @main(%x: tensor<4096x1024xf32>) -> tensor<4096x1024xf32> {
    %w = graph.constant {value = dense<0.5> : tensor<1024x1024xf32>} : () -> tensor<1024x1024xf32>
    %a = graph.matmul %x, %w : (tensor<4096x1024xf32>, tensor<1024x1024xf32>) -> tensor<4096x1024xf32>
    %b = graph.matmul %a, %w : (tensor<4096x1024xf32>, tensor<1024x1024xf32>) -> tensor<4096x1024xf32>
    %c = graph.matmul %b, %w : (tensor<4096x1024xf32>, tensor<1024x1024xf32>) -> tensor<4096x1024xf32>
    %d = graph.matmul %c, %w : (tensor<4096x1024xf32>, tensor<1024x1024xf32>) -> tensor<4096x1024xf32>
    return %d : tensor<4096x1024xf32>
  }
}

// -----

// Tests that a batch reaching a reshape behind an empty dimension (no
// element before the batch's factor) is not followed: it used to divide by
// zero (a fuzz finding, test/fuzz/corpus/compile/regress-reshape-batch-div0).
// CHECK-LABEL: func @main
// CHECK: graph.reshape {{.*}}graph.device = 0
// PIPE: plan: 2 stages x 1 replica, 1 micro-batch, cuts before ops [1]
// LATENCY: plan: 1 stage x 1 replica, cuts before ops []
// expected-remark@below {{plan: 1 stage x 1 replica, cuts before ops []}}
module {
  func.func @main(%x: tensor<4x3x0xf32>) -> tensor<0x12xf32> {
    %a = graph.transpose %x {perm = array<i64: 2, 1, 0>} : (tensor<4x3x0xf32>) -> tensor<0x3x4xf32>
    %b = graph.reshape %a {shape = array<i64: 0, 12>} : (tensor<0x3x4xf32>) -> tensor<0x12xf32>
    return %b : tensor<0x12xf32>
  }
}
