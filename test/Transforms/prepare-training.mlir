// RUN: partc-opt %s --partc-prepare-training --split-input-file | FileCheck %s
// RUN: partc-opt %s --partc-prepare-training="batch-norm-momentum=0.25" --split-input-file | FileCheck %s --check-prefix=MOMENTUM
// RUN: partc-opt %s --partc-prepare-training="only-marked=true" --split-input-file | FileCheck %s --check-prefix=MARKED

// Tests that an eval-mode batch norm becomes batch_norm_train, its running
// statistics variables initialized from their initializers (which go), and
// that update_running_stats blends the batch's statistics into them at the
// end, with PyTorch's momentum and the values per channel (2 x 4 x 4).
// CHECK-LABEL: func @main
// CHECK-NOT: graph.initializer = "mean"
// CHECK-DAG: %[[M:.*]] = graph.variable {name = "mean", role = "running_mean", value = dense<5.000000e-01> : tensor<3xf32>}
// CHECK-DAG: %[[V:.*]] = graph.variable {name = "var", role = "running_var", value = dense<2.000000e+00> : tensor<3xf32>}
// CHECK: %[[N:.*]], %[[MEAN:.*]], %[[VAR:.*]] = graph.batch_norm_train %arg0, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f64}
// CHECK: %[[R:.*]] = graph.relu %[[N]]
// CHECK: graph.update_running_stats %[[M]], %[[V]], %[[MEAN]], %[[VAR]] {count = 32 : i64, momentum = 1.000000e-01 : f64}
// CHECK-NEXT: return %[[R]]
// MOMENTUM: momentum = 2.500000e-01
func.func @main(%x: tensor<2x3x4x4xf32> {graph.name = "x"}) -> (tensor<2x3x4x4xf32> {graph.name = "y"}) {
  %g = graph.constant {graph.initializer = "g", value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %b = graph.constant {graph.initializer = "b", value = dense<0.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %m = graph.constant {graph.initializer = "mean", value = dense<0.5> : tensor<3xf32>} : () -> tensor<3xf32>
  %v = graph.constant {graph.initializer = "var", value = dense<2.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %n = graph.batch_norm %x, %g, %b, %m, %v {epsilon = 1.0e-3 : f64} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %y = graph.relu %n : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %y : tensor<2x3x4x4xf32>
}

// -----

// Tests that a norm's own momentum (ONNX's: the running statistics'
// weight, 0.99 as torchvision's MobileNet v3 exports it) gives the batch
// 1 - 0.99, and that --batch-norm-momentum overrides it.
// CHECK-LABEL: func @main
// CHECK: graph.update_running_stats {{.*}} {count = 4 : i64, momentum = 0.010000000000000009 : f64}
// MOMENTUM: graph.update_running_stats {{.*}} {count = 4 : i64, momentum = 2.500000e-01 : f64}
func.func @main(%x: tensor<4x2xf32> {graph.name = "x"}) -> (tensor<4x2xf32> {graph.name = "y"}) {
  %g = graph.constant {graph.initializer = "g", value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %m = graph.constant {graph.initializer = "mean", value = dense<0.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %v = graph.constant {graph.initializer = "var", value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %y = graph.batch_norm %x, %g, %g, %m, %v {momentum = 0.99 : f64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// Tests that two norms sharing running statistics share one variable each
// and that a graph without batch norm is left as it is.
// CHECK-LABEL: func @main
// CHECK-COUNT-1: graph.variable {name = "mean"
// CHECK-COUNT-2: graph.update_running_stats
func.func @main(%x: tensor<2x3xf32> {graph.name = "x"}) -> (tensor<2x3xf32> {graph.name = "y"}) {
  %g = graph.constant {graph.initializer = "g", value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %m = graph.constant {graph.initializer = "mean", value = dense<0.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %v = graph.constant {graph.initializer = "var", value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %a = graph.batch_norm %x, %g, %g, %m, %v : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %y = graph.batch_norm %a, %g, %g, %m, %v : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func @main
// CHECK-NOT: graph.variable
// CHECK: graph.relu
func.func @main(%x: tensor<4xf32> {graph.name = "x"}) -> (tensor<4xf32> {graph.name = "y"}) {
  %y = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that a norm the model marks training_mode (an export made for
// training) trains as an unmarked one does, and that an inference compile
// (only-marked) gives it the batch's statistics without keeping running
// ones, leaving the unmarked norm as it is.
// CHECK-LABEL: func @main(%{{.*}}: tensor<4x3x2x2xf32>
// CHECK-COUNT-2: graph.batch_norm_train
// CHECK-COUNT-2: graph.update_running_stats
// MARKED-LABEL: func @main(%{{.*}}: tensor<4x3x2x2xf32>
// MARKED-NOT: graph.variable
// MARKED: %[[T:.*]], %{{.*}}, %{{.*}} = graph.batch_norm_train %arg0, %{{.*}}, %{{.*}} :
// MARKED-NEXT: %[[E:.*]] = graph.batch_norm %[[T]], {{.*}} :
// MARKED-NOT: graph.update_running_stats
// MARKED: return %[[E]]
func.func @main(%x: tensor<4x3x2x2xf32> {graph.name = "x"}) -> (tensor<4x3x2x2xf32> {graph.name = "y"}) {
  %g = graph.constant {graph.initializer = "g", value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %m = graph.constant {graph.initializer = "mean", value = dense<0.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %v = graph.constant {graph.initializer = "var", value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %m2 = graph.constant {graph.initializer = "mean2", value = dense<0.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %t = graph.batch_norm %x, %g, %g, %m, %v {training_mode} : (tensor<4x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3x2x2xf32>
  %e = graph.batch_norm %t, %g, %g, %m2, %v : (tensor<4x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3x2x2xf32>
  return %e : tensor<4x3x2x2xf32>
}

// -----

// Tests that each dropout gets a stream of its own (0, the default, is not
// printed) and, in training, reads the step counter (counted at the end of
// the step) and the seed variable instead of the importer's zeros, which
// go; an inference compile keeps the zeros (one fixed mask) and numbers
// the streams all the same.
// CHECK-LABEL: func @main
// CHECK-DAG: %[[STEP:.*]] = graph.variable {name = "optimizer.step", role = "step"} : tensor<i64>
// CHECK-DAG: %[[SEED:.*]] = graph.variable {name = "rng.seed", role = "seed", value = dense<0> : tensor<i64>} : tensor<i64>
// CHECK-NOT: graph.constant
// CHECK: %[[A:.*]] = graph.dropout %arg0, %[[STEP]], %[[SEED]] {ratio = 1.000000e-01 : f64}
// CHECK: %[[B:.*]] = graph.dropout %[[A]], %[[STEP]], %[[SEED]] {ratio = 5.000000e-01 : f64, stream = 1 : i64}
// CHECK: graph.count_step %[[STEP]]
// CHECK-NEXT: return %[[B]]
// MARKED-LABEL: func @main
// MARKED: %[[Z:.*]] = graph.constant {value = dense<0> : tensor<i64>}
// MARKED: %[[A:.*]] = graph.dropout %arg0, %[[Z]], %[[Z]] {ratio = 1.000000e-01 : f64}
// MARKED: graph.dropout %[[A]], %[[Z]], %[[Z]] {ratio = 5.000000e-01 : f64, stream = 1 : i64}
// MARKED-NOT: graph.variable
// MARKED-NOT: graph.count_step
func.func @main(%x: tensor<2x8xf32> {graph.name = "x"}) -> (tensor<2x8xf32> {graph.name = "y"}) {
  %z = graph.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %a = graph.dropout %x, %z, %z {ratio = 0.1 : f64} : (tensor<2x8xf32>, tensor<i64>, tensor<i64>) -> tensor<2x8xf32>
  %b = graph.dropout %a, %z, %z {ratio = 0.5 : f64} : (tensor<2x8xf32>, tensor<i64>, tensor<i64>) -> tensor<2x8xf32>
  return %b : tensor<2x8xf32>
}
