//===- TrainingOps.td - partc graph ops for training -------------*- tablegen -*-===//
//
// What partc-differentiate and partc-apply-optimizer add to a forward
// graph: state that lives across steps (graph.variable), losses, the
// backward ops that gradients use where graph ops would do worse, and the
// optimizer steps that update state in place. Included by GraphOps.td.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

def Graph_VariableOp : Op<Graph_Dialect, "variable", [MemoryEffects<[MemRead]>]> {
  let summary = "A tensor kept across training steps (a parameter or moment)";
  let description = [{
    Its value at the start of the step. It is initialized from `value`
    (zeros without one) when the plan is loaded and changed only by the
    ops of the StateUpdateOpInterface (optimizer steps), which the lowering
    runs after every other read of it. `name` is the ONNX initializer it
    trains, or "<initializer>.<role>"; `role` says what it holds
    (parameter, momentum, adam_m, adam_v, step).

    ```mlir
    %w = graph.variable {name = "fc.weight", role = "parameter",
                         value = dense<...> : tensor<8x4xf32>} : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, StrAttr:$role,
                       OptionalAttr<ElementsAttr>:$value);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = "attr-dict `:` type($output)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Losses and backward ops
//===----------------------------------------------------------------------===//

def Graph_SoftmaxCrossEntropyOp : Graph_ComputeOp<"softmax_cross_entropy", [
    Graph_Differentiable]> {
  let summary = "Mean cross-entropy of softmax(logits) over class indices";
  let description = [{
    `logits` [..., C] and int64 `labels` [...] (every dimension but the
    last): mean over the rows of -log_softmax(logits)[label], PyTorch's
    CrossEntropyLoss with its defaults. A label outside [0, C) is an error
    at run time. With `classes` = K < C, only the first K entries of each
    row are classes and the rest is padding, never read: the logits of a
    product whose columns were padded (partc-pad-matmul-columns), read
    without slicing them.
  }];
  let arguments = (ins Graph_Tensor:$logits, Graph_Tensor:$labels,
                       OptionalAttr<I64Attr>:$classes);
  let results = (outs Graph_Tensor:$loss);
}

def Graph_SoftmaxCrossEntropyGradOp : Graph_ComputeOp<
    "softmax_cross_entropy_grad"> {
  let summary = "Gradient of softmax_cross_entropy with respect to logits";
  let description = [{
    (softmax(logits) - onehot(labels)) * dloss / rows, in one pass over
    the logits. With `classes` (as softmax_cross_entropy's), the entries
    past the classes get a zero gradient.
  }];
  let arguments = (ins Graph_Tensor:$logits, Graph_Tensor:$labels,
                       Graph_Tensor:$dloss, OptionalAttr<I64Attr>:$classes);
  let results = (outs Graph_Tensor:$output);
}

// Element-wise backward rules, (dy, a forward value) -> dx; their formulas
// are in runtime/kernels/ElementwiseOps.h, so they fuse into chains.
def Graph_ReluGradOp : Graph_BinaryOp<"relu_grad", "",
    "dy where relu's result y > 0, else 0 (dy, y)">;
def Graph_SigmoidGradOp : Graph_BinaryOp<"sigmoid_grad", "",
    "dy * y * (1 - y) for y = sigmoid(x) (dy, y)">;
def Graph_TanhGradOp : Graph_BinaryOp<"tanh_grad", "",
    "dy * (1 - y^2) for y = tanh(x) (dy, y)">;
def Graph_GeluGradOp : Graph_BinaryOp<"gelu_grad", "",
    "dy * (Phi(x) + x * phi(x)), exact gelu's derivative (dy, x)">;
def Graph_GeluTanhGradOp : Graph_BinaryOp<"gelu_tanh_grad", "",
    "dy * d/dx of gelu's tanh approximation (dy, x)">;

// Backward ops of the window ops, channels first unless `channels_last`
// (partc-convert-layout sets it: every image operand and result, and the
// filter, are then [N, spatial..., C], and so are the shape attributes).
// The forward input's shape is an attribute where the gradient does not
// otherwise carry it (a stride drops rows), so the forward input need not
// stay alive.
def Graph_ConvGradInputOp : Graph_Op<"conv_grad_input", [ConstantEvaluable,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["estimateFlops"]>,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface, ["sliceBatch"]>]> {
  let summary = "Gradient of a convolution with respect to its input";
  let description = [{
    The transposed convolution of `grad` (the result's gradient) with
    `weight`, to the forward input's `input_shape`: cuDNN's backward data.
    ONNX's ConvTranspose imports as this op (plus its bias).
  }];
  let arguments = (ins Graph_Tensor:$grad, Graph_Tensor:$weight,
                       DenseI64ArrayAttr:$input_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       UnitAttr:$channels_last);
  let results = (outs Graph_Tensor:$output);
}

def Graph_ConvGradWeightOp : Graph_Op<"conv_grad_weight", [ConstantEvaluable,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["estimateFlops"]>]> {
  let summary = "Gradient of a convolution with respect to its weight";
  let description = [{
    The correlation of the forward `input` with `grad`, summed over the
    batch, to `weight_shape`: cuDNN's backward filter.
  }];
  let arguments = (ins Graph_Tensor:$input, Graph_Tensor:$grad,
                       DenseI64ArrayAttr:$weight_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       UnitAttr:$channels_last);
  let results = (outs Graph_Tensor:$output);
}

def Graph_MaxPoolGradOp : Graph_ComputeOp<"max_pool_grad"> {
  let summary = "Gradient of max pooling: each window's gradient to its max";
  let description = [{
    (grad, forward input) -> gradient of the input. A window's gradient
    goes to the first position holding its maximum, as PyTorch does;
    overlapping windows add.
  }];
  let arguments = (ins Graph_Tensor:$grad, Graph_Tensor:$input,
                       DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       UnitAttr:$channels_last);
  let results = (outs Graph_Tensor:$output);
}

def Graph_AvgPoolGradOp : Graph_ComputeOp<"avg_pool_grad"> {
  let summary = "Gradient of average pooling, to the input's shape";
  let description = [{
    Each window's gradient, divided by the count its forward average
    divided by, spread over the window.
  }];
  let arguments = (ins Graph_Tensor:$grad, DenseI64ArrayAttr:$input_shape,
                       DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       DefaultValuedAttr<I64Attr, "0">:$count_include_pad,
                       UnitAttr:$channels_last);
  let results = (outs Graph_Tensor:$output);
}

//===----------------------------------------------------------------------===//
// Batch normalization in training mode
//===----------------------------------------------------------------------===//

def Graph_BatchNormTrainOp : Graph_ComputeOp<"batch_norm_train", [
    Graph_Differentiable]> {
  let summary = "Batch normalization with the batch's own statistics";
  let description = [{
    Over channel dimension 1 (the last with `channels_last`): the mean and
    biased variance of each channel over the batch and spatial positions,
    y = (x - mean) / sqrt(variance + epsilon) * scale + bias. Returns the
    statistics too, for the backward op and the running statistics.
    partc-prepare-training puts it in place of graph.batch_norm.

    partc-fuse-activations may give it an epilogue: `addend` (a residual
    connection, of the result's type) is added to y and `activation =
    "relu"` applied after, in the pass that writes y, so that a ResNet
    block's add and ReLU cost no pass of their own. The backward ops read
    the input and the statistics, never y, and ReLU's gradient reads the
    fused result, so the epilogue changes nothing they see.
  }];
  let arguments = (ins Graph_Tensor:$input, Graph_Tensor:$scale,
                       Graph_Tensor:$bias, Optional<Graph_Tensor>:$addend,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon,
                       UnitAttr:$channels_last,
                       OptionalAttr<Graph_ActivationAttr>:$activation);
  let results = (outs Graph_Tensor:$output, Graph_Tensor:$mean,
                      Graph_Tensor:$variance);
}

def Graph_BatchNormGradOp : Graph_ComputeOp<"batch_norm_grad"> {
  let summary = "Gradients of batch_norm_train's input, scale and bias";
  let description = [{
    (grad, input, scale, mean, variance) -> (grad_input, grad_scale,
    grad_bias), the statistics' own dependence on the input included.

    With `activation = "relu"` and the norm's `bias`, `grad` is the
    gradient of relu(y) for the norm's output y, which the op computes
    again from the input and the statistics (as batch_norm_train computed
    it) to mask `grad` where y <= 0. partc-fuse-activations folds ReLU's
    gradient in so when ReLU was fused into the norm: the mask then costs
    no pass over the tensors of its own.
  }];
  let arguments = (ins Graph_Tensor:$grad, Graph_Tensor:$input,
                       Graph_Tensor:$scale, Graph_Tensor:$mean,
                       Graph_Tensor:$variance, Optional<Graph_Tensor>:$bias,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon,
                       UnitAttr:$channels_last,
                       OptionalAttr<Graph_ActivationAttr>:$activation);
  let results = (outs Graph_Tensor:$grad_input, Graph_Tensor:$grad_scale,
                      Graph_Tensor:$grad_bias);
}

def Graph_SoftmaxGradOp : Graph_ComputeOp<"softmax_grad"> {
  let summary = "Gradient of softmax with respect to its input";
  let description = [{
    (grad, output) -> output * (grad - sum(grad * output, axis)), with
    `output` the softmax's result: one pass over each row where the same
    rule in graph ops took three kernels and wrote two intermediates the
    size of attention's scores. A row the softmax zeroed (nan_to_zero)
    gets zeros.

    With `dropout_ratio` and two more operands, a dropout's `step` and
    `seed`, `grad` is the gradient of that dropout's result (its input was
    the softmax's): the kernel draws the dropout's mask as graph.dropout
    does (its `dropout_stream` and `dropout_offset`) and reads grad through
    it, so the dropped gradient is never written (partc-fuse-dropout).
  }];
  let arguments = (ins Graph_Tensor:$grad, Graph_Tensor:$output,
                       Variadic<Graph_Tensor>:$dropout_counters,
                       I64Attr:$axis, OptionalAttr<F64Attr>:$dropout_ratio,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_stream,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_offset);
  let results = (outs Graph_Tensor:$grad_input);
}

def Graph_LayerNormGradOp : Graph_ComputeOp<"layer_norm_grad"> {
  let summary = "Gradients of layer_norm's input, scale and bias";
  let description = [{
    (grad, input, scale) -> (grad_input, grad_scale, grad_bias) of
    graph.layer_norm over dimensions [axis, rank), the statistics computed
    again from the input; `scale` has the normalized dimensions' shape and
    the two parameter gradients have its type (the bias's gradient is the
    sum of `grad` over the rows). With x^ = (x - mean) r, r = 1 / sqrt(var
    + epsilon) and g = grad * scale per row: grad_input = r (g - mean(g) -
    x^ mean(g x^)), grad_scale = sum of grad x^, grad_bias = sum of grad.
    One pass over the rows and one over the columns, where the same rule in
    graph ops took about fifteen kernels. With `addend` (the input's type),
    grad_input is that much more: the gradient a residual connection adds
    to the normalized input's (partc-fuse-activations), with no separate
    add.
  }];
  let arguments = (ins Graph_Tensor:$grad, Graph_Tensor:$input,
                       Graph_Tensor:$scale, Optional<Graph_Tensor>:$addend,
                       I64Attr:$axis,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Graph_Tensor:$grad_input, Graph_Tensor:$grad_scale,
                      Graph_Tensor:$grad_bias);
}

//===----------------------------------------------------------------------===//
// Dropout in training mode
//===----------------------------------------------------------------------===//

def Graph_DropoutOp : Graph_ComputeOp<"dropout", [Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "ONNX Dropout in training mode, from a counter-based generator";
  let description = [{
    output = input / (1 - ratio) where element i is kept, else 0. Element i
    is kept when its 24-bit uniform number is at least ratio * 2^24: word
    i % 4 of Philox4x32-10 (Salmon et al., SC'11) with key `seed` and
    counter (i / 4, `stream`, `step`). `step` and `seed` are int64 scalars;
    partc-prepare-training binds them to the step counter and the run's
    seed, and numbers each dropout's `stream`, so that every op and every
    step draws its own mask, the CPU and the GPU the same one. The mask is
    a function of those numbers only: the gradient is the same op applied
    to the output's gradient, and nothing is kept for it. A slice of the
    batch (a data-parallel replica, a micro-batch) numbers its elements
    from `offset`, its first element's index in the whole batch's tensor,
    so that the slices together draw the whole batch's mask.

    ```mlir
    %y = graph.dropout %x, %step, %seed {ratio = 1.000000e-01 : f64,
                                         stream = 0 : i64}
        : (tensor<2x8xf32>, tensor<i64>, tensor<i64>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$input, Graph_Tensor:$step,
                       Graph_Tensor:$seed, F64Attr:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$stream,
                       DefaultValuedAttr<I64Attr, "0">:$offset);
  let results = (outs Graph_Tensor:$output);
}

//===----------------------------------------------------------------------===//
// Optimizer steps
//===----------------------------------------------------------------------===//

class Graph_UpdateOp<string mnemonic>
    : Op<Graph_Dialect, mnemonic, [MemoryEffects<[MemWrite]>,
          DeclareOpInterfaceMethods<Graph_StateUpdateOpInterface>]> {
  let assemblyFormat = "operands attr-dict `:` type(operands)";
  let hasVerifier = 1;
}

def Graph_SgdUpdateOp : Graph_UpdateOp<"sgd_update"> {
  let summary = "One SGD step on a parameter, as torch.optim.SGD";
  let description = [{
    g = grad + weight_decay * param; with momentum, buf = momentum * buf + g
    and the step uses buf (dampening 0, not Nesterov); param -= lr * step.
    `param` and `momentum_buffer` are graph.variables, updated in place.
  }];
  let arguments = (ins Graph_Tensor:$param, Graph_Tensor:$grad,
                       Optional<Graph_Tensor>:$momentum_buffer, F64Attr:$lr,
                       DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
}

def Graph_AdamWUpdateOp : Graph_UpdateOp<"adamw_update"> {
  let summary = "One AdamW step on a parameter, as torch.optim.AdamW";
  let description = [{
    With t = step + 1: param *= 1 - lr * weight_decay; m = beta1 * m +
    (1 - beta1) * grad; v = beta2 * v + (1 - beta2) * grad^2; param -= lr /
    (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps). `param`, `m`
    and `v` are updated in place; `step` (an int64 scalar variable counting
    finished steps) is only read.
  }];
  let arguments = (ins Graph_Tensor:$param, Graph_Tensor:$grad,
                       Graph_Tensor:$m, Graph_Tensor:$v, Graph_Tensor:$step,
                       F64Attr:$lr, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay);
}

def Graph_CountStepOp : Graph_UpdateOp<"count_step"> {
  let summary = "Adds one to an int64 scalar variable: the finished steps";
  let arguments = (ins Graph_Tensor:$step);
}

def Graph_UpdateRunningStatsOp : Graph_UpdateOp<"update_running_stats"> {
  let summary = "Moves batch norm's running statistics toward the batch's";
  let description = [{
    As PyTorch's BatchNorm in training mode: running_mean = (1 - momentum)
    * running_mean + momentum * mean; running_var likewise with the
    batch's unbiased variance, variance * count / (count - 1), where
    `count` is the number of values per channel. `momentum` is PyTorch's
    (ONNX's momentum is 1 - it).
  }];
  let arguments = (ins Graph_Tensor:$running_mean, Graph_Tensor:$running_var,
                       Graph_Tensor:$mean, Graph_Tensor:$variance,
                       F64Attr:$momentum, I64Attr:$count);
}

//===----------------------------------------------------------------------===//
// Collectives across replicas
//===----------------------------------------------------------------------===//

def Graph_AllReduceOp : Graph_Op<"all_reduce"> {
  let summary = "One replica's part of the means of tensors over replicas";
  let description = [{
    The ops of one `group`, one on each of `devices` (placed there, in that
    order of their inputs), together compute the element-wise mean of each
    of their inputs, and each returns the means on its device: the gradient
    averaging of data-parallel training. An op of several inputs is a
    bucket (partc-bucket-all-reduces): its means are exchanged together,
    which costs one collective's latency instead of one per tensor. Every
    device meets its groups in the same order (partc-replicate-training
    clones one replica's ops per device), so the plan's collectives cannot
    deadlock. The mean sums the inputs in the order of `devices` and then
    divides, on every backend.

    ```mlir
    %g, %h = graph.all_reduce %g0, %h0 {group = 3 : i64,
                                        devices = array<i64: 0, 1>,
                                        graph.device = 0 : i64}
        : (tensor<8x4xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>)
    ```
  }];
  let arguments = (ins Variadic<Graph_Tensor>:$inputs, I64Attr:$group,
                       DenseI64ArrayAttr:$devices);
  let results = (outs Variadic<Graph_Tensor>:$outputs);
  let hasVerifier = 1;
}

