//===- Passes.td - partc compiler passes -------------------------*- tablegen -*-===//
#ifndef PARTC_TRANSFORMS_PASSES
#define PARTC_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Graph transforms (compiler/GraphTransforms)
//===----------------------------------------------------------------------===//

def FoldConstants : Pass<"partc-fold-constants", "mlir::ModuleOp"> {
  let summary = "Folds constant subgraphs and removes dead and identity ops";
  let description = [{
    Evaluates every op whose operands are all constants with the runtime's
    reference kernels (so compile-time and run-time semantics cannot drift),
    folds identities and chained reshapes, and erases unused ops. A gather
    or gather_nd whose constant indices read its data in order becomes a
    reshape (exporters index a batch that way, which would otherwise tie
    samples to fixed positions), and a floating-point add or subtract of zeros or
    multiply or divide by ones that does not broadcast its other operand
    is that operand (an exported attention without a mask adds zeros);
    a square or cube by Pow is a multiplication; and a concatenation with
    negated parts times a constant, a rotary embedding's rotate_half times
    its sine table, multiplies the parts themselves by the constant
    negated where they lie.
  }];
}

def ConvertLayout : Pass<"partc-convert-layout", "mlir::ModuleOp"> {
  let summary = "Runs 2-D convolutions, pooling and batch norm channels last (NHWC)";
  let description = [{
    GPUs run convolutions on tensor cores in NHWC; in NCHW cuDNN transposes
    around every convolution. This pass gives each 2-D graph.conv,
    graph.max_pool and graph.avg_pool, and in a training step each
    graph.batch_norm_train and the gradients of all of them, the
    `channels_last` form, with transposes around it (a constant weight's is
    folded away; a trained weight is transposed once per step for all its
    readers, and its gradient back), and then moves the transposes through
    element-wise ops (constants broadcast along some dimensions are
    transposed with them), concatenation, padding, slices, global pooling,
    reshapes that merge dimensions still in order or insert unit ones, and
    broadcasts read through such reshapes, until pairs cancel, so only the
    model's inputs and outputs are transposed (a transformer's heads stay
    as the projection wrote them through Llama's rotary embedding and
    grouped-query repeat, and attention reads the one transpose left in
    place); a transpose between two
    reshapes that fold leading dimensions into one batch and back (the
    dynamo exporter's key^T) becomes one transpose. A 2-D convolution whose
    filter tiles its input (no overlap, padding or dilation) over fewer than
    eight channels, a vision transformer's patch embedding, becomes instead
    one transpose of the input into patches and a product with the filter,
    channels last: tensor-core convolutions run such few channels badly.
  }];
}

def FuseActivations : Pass<"partc-fuse-activations", "mlir::ModuleOp"> {
  let summary = "Folds ReLUs, SiLUs, biases and residual adds into their producers";
  let description = [{
    When a graph.relu is the only user of a graph.conv, graph.gemm,
    graph.matmul, graph.add or graph.batch_norm_train (its normalized
    result) on the same device, the producer gets `activation = "relu"`
    and applies it in its epilogue. Then a graph.add of a matmul's result
    (its only use) and a tensor with one value per column becomes the
    matmul's `bias`, as ONNX exporters write a linear layer; and a
    graph.add of a convolution's or a training batch norm's result (its
    only use) and another tensor of the same type becomes that op's
    `addend`; a graph.gemm (no transposes, unit alpha and beta, a bias of
    one value per column) whose only user is a reshape that keeps its
    columns, added to another tensor of the reshape's type, becomes a
    graph.matmul with that tensor (reshaped) as its `addend` between two
    reshapes (GPT-2's Conv1D and its residual connection). All keep the
    add's activation, so a linear layer's bias and
    a ResNet block's residual connection cost no pass over memory of their
    own, in inference and in training. In a training step, the
    graph.relu_grad of such a fused norm's output whose only user is the
    same norm's graph.batch_norm_grad goes into that op
    (`activation = "relu"`, with the norm's bias to compute the output's
    sign again), and a graph.add of a graph.layer_norm_grad's input
    gradient (its only use) and a tensor computed before that op becomes
    the op's `addend` (a pre-norm transformer's residual gradient).
    A graph.gelu of the tanh form (partc-match-gelu) whose input is a
    graph.matmul's or graph.gemm's result (its only use), directly or
    through a reshape, becomes that product's `activation = "gelu_tanh"`
    (cuBLASLt's GELU epilogue); x * sigmoid(x) (SiLU, as PyTorch exports
    it) of a graph.conv's result x used by nothing else becomes the
    convolution's `activation = "silu"`; the exact Gelu stays an op unless
    `erf-gelu-as-tanh` is set, which 16-bit plans do: there the tanh form
    differs from the exact one by at most 4.7e-4 (at x = -2.70), less than
    a bf16 value of magnitude 1 is rounded by (2e-3) and about one fp16
    rounding of it, and the fused epilogue saves a pass over the widest
    activation of a transformer layer.
    Before the adds, with `scale-weights`, mul(matmul(x, w, b), s) for
    constants w (a matrix), b and s, s one value per column (ConvNeXt's
    layer scale; a bias still written as an add joins the product first),
    becomes matmul(x, w * s, b * s), folded at compile time,
    so that the residual add after it joins the product's epilogue; fp16
    plans leave it off, where a small scale could push the scaled weights
    below fp16's normal range.
    Last, where(is_nan(s), 0, s) of a graph.softmax s becomes s with
    `nan_to_zero`, as PyTorch's exported attention writes it, and the
    softmax of a graph.add (its only use) of x and a tensor that broadcasts
    to x takes that tensor as its `bias`: the attention mask.
  }];
  let options = [
    Option<"erfGeluAsTanh", "erf-gelu-as-tanh", "bool", "false",
           "Fuse the exact Gelu into a product as its tanh form too">,
    Option<"scaleWeights", "scale-weights", "bool", "true",
           "Fold a constant per-column scale of a product into its weights">
  ];
}

def PadMatMulColumns : Pass<"partc-pad-matmul-columns", "mlir::ModuleOp"> {
  let summary = "Pads a wide product's columns to an aligned count";
  let description = [{
    A graph.matmul whose 2-D right operand has `min-columns` columns or
    more, not a multiple of `multiple`, multiplies by that operand padded
    with zero columns (or, for a transposed matrix, the matrix padded with
    zero rows, so that the transpose stays a view) and slices the result
    back. GEMM libraries run rows of an unaligned length (GPT-2's tied LM
    head: 50,257 columns) at well under half their speed, and in training
    all three products of the head then get aligned operands. Zero
    columns add zero terms only: every kept element is the same sum of
    the same products, up to the order a kernel adds them in. Runs
    before differentiation: the pad's and slice's gradients are each
    other.
  }];
  let options = [
    Option<"minColumns", "min-columns", "int64_t", "1024",
           "Narrower products are left alone">,
    Option<"multiple", "multiple", "int64_t", "32",
           "Column counts are padded to a multiple of this">,
  ];
}

def LowerPrecision : Pass<"partc-lower-precision", "mlir::ModuleOp"> {
  let summary = "Runs the model's f32 tensors in bf16 or fp16";
  let description = [{
    Inference in a 16-bit float type: the ops that every backend runs in
    that type (products, convolutions, element-wise chains, softmax, layer
    norm and the data movement between them) read and write it, their f32
    weights converted once here (rounded to nearest even); every other op
    keeps f32, with a graph.cast on each edge where the two meet. The
    function's inputs and results keep their types, so that a plan is fed
    and read as the model is. Kernels accumulate, and compute softmax's
    and normalizations' statistics, in f32; the CPU backend rounds each
    such op's f32 result to the type, as a GPU kernel does. The choice is
    recorded for the plan (`precision`). Training is refused: its
    gradients and optimizer state stay f32 (docs/design.md).
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"bf16\"",
           "bf16 or fp16">,
  ];
}

def FuseAttention : Pass<"partc-fuse-attention", "mlir::ModuleOp"> {
  let summary = "Fuses attention's products and softmax into one op";
  let description = [{
    A graph.strided_matmul (queries times transposed keys, scaled) whose
    only user is a graph.softmax along its last dimension, whose only user
    is the left operand of a graph.strided_matmul with the values (read
    contiguously, unscaled), becomes one graph.attention, all on one
    device: the scores then live in registers instead of memory, which
    they cross three times otherwise (written, read and written by the
    softmax, read again). f32, bf16 and f16 are fused, all operands of one
    type, on the views the GPU kernels take (strided::attentionKernelFits: head sizes 16, 32, 64
    or 128, each head's elements contiguous). Runs after placement: the
    batch is split, and stages and replicas assigned, on the unfused ops.
    The op is marked `causal` where the mask is proved -inf past the
    diagonal: a where(c, x, -inf) whose condition is, through reshapes,
    expands and casts that keep the [M, N] slices, a constant lower
    triangle of [M, N] slices or the `and` of one with anything (a
    decoder's mask and a padding mask), or such a mask folded to a
    constant; kernels may then skip the keys past each query. The bias is
    handed over at the shape that holds all it says
    (graph::narrowedBiasShape: through expands, an `and` with a constant
    all true, and the casts and wheres of such values, rebuilt at that
    shape), so that a padding mask expanded to every query is read once
    per key; the full-size chain left unused is erased.
  }];
}

def FuseDropout : Pass<"partc-fuse-dropout", "mlir::ModuleOp"> {
  let summary = "Folds a dropout's gradient into the softmax gradient that reads it";
  let description = [{
    Attention drops its probabilities out after the softmax, so the
    backward pass draws the dropout's mask over the gradient (a
    graph.dropout) and hands the result to graph.softmax_grad alone: a
    tensor the size of the scores written and read once more per layer.
    Where a graph.dropout's only user is a softmax_grad's gradient operand,
    with the same placement attributes, the softmax_grad takes the
    dropout's input, step, seed, ratio, stream and offset, and draws the
    mask itself. Training only, after differentiation.
  }];
}

def FuseConcat : Pass<"partc-fuse-concat", "mlir::ModuleOp"> {
  let summary = "Lets element-wise chains read a concatenation's parts in place";
  let description = [{
    A graph.concat along its last axis whose only user is a
    graph.fused_elementwise reading it at the result's shape becomes that
    chain's `concat_parts`: the chain reads each part where it lies and the
    concatenation is never written. DenseNet concatenates all of a block's
    earlier features before each layer's batch norm and ReLU (one chain in
    channels-last inference), so its copies grow with the square of the
    block's depth; after this pass none are left. Up to
    fused::kMaxConcatParts parts, on one device. Inference only: a
    training step keeps the concatenation for its gradient. Runs after
    placement, which splits and assigns the unfused ops.
  }];
}

def FoldMatMulViews : Pass<"partc-fold-matmul-views", "mlir::ModuleOp"> {
  let summary = "Reads slices and transposes in place in batched MatMuls";
  let description = [{
    Rewrites a graph.matmul (without bias or activation) whose operands are
    slices, split parts, transposes and reshapes of other tensors, or whose result is
    scaled by a scalar constant, transposed and reshaped, into one
    graph.strided_matmul that reads the operands through strided views,
    scales by alpha and writes the result's permuted layout: attention's
    head split, score scaling and head merge then move no data. Operand
    views must stay GEMM operands (rows or columns contiguous); a chain is
    followed only as far as that holds. Ops left without uses are erased.
    A 2-D graph.gemm whose only user transposes it computes the transposed
    product instead, operands swapped (op(B)^T op(A)^T): a tied LM head's
    weight gradient is then written in the embedding's layout.
  }];
}

def MergeProjections : Pass<"partc-merge-projections", "mlir::ModuleOp"> {
  let summary = "Merges products of one input that only strided products read";
  let description = [{
    graph.matmul ops of the same left operand, each with a constant 2-D
    weight [K, N_i] of one element type, all with a constant bias or all
    without, no addend or activation, the same placement, and read only by
    graph.strided_matmul through views that stay within a row of N_i
    columns, become one graph.matmul with the weights side by side
    [K, sum N_i] (the biases too); each reader's view moves to the merged
    result at the product's column offset (row strides scaled by
    sum N_i / N_i). Attention's query, key and value projections of BERT,
    ViT and T5 then run as one GEMM, as GPT-2's fused projection does,
    which fills the GPU at small batches. Runs after
    partc-fold-matmul-views, on inference graphs.
  }];
}

def FuseNormalizations
    : Pass<"partc-fuse-normalizations", "mlir::ModuleOp"> {
  let summary = "Recognizes RMS and layer normalization written out op by op";
  let description = [{
    Llama's and T5's exports write RMS normalization as
    x * 1 / sqrt(reduce_mean(x^2) + epsilon) (or x / sqrt(...)), five
    kernels and three passes over x, each of whose intermediate results
    only the next reads. Over the last dimension, this pass replaces the
    whole by one graph.rms_norm, taking a constant per-channel weight that
    multiplies its result as the op's `scale`. Where the normalized input
    is x - reduce_mean(x) over the same axis and nothing else reads it,
    the whole is layer normalization as PyTorch exports it below opset 17
    (LayerNormalization came in 17): one graph.layer_norm of x, taking the
    weight (ones where folding dropped it) and a constant per-channel bias
    added after it.

    With `skip-initializers` (training, where it runs before
    differentiation so that a norm's gradient is one op rather than a
    dozen), a chain whose epsilon, exponent or numerator is an initializer
    is left alone: an initializer is a parameter to train. The weight and
    bias may be initializers: they become the fused op's operands.
  }];
  let options = [
    Option<"skipInitializers", "skip-initializers", "bool", "false",
           "Constants that are initializers are not the formula's">,
  ];
}

def MatchGelu : Pass<"partc-match-gelu", "mlir::ModuleOp"> {
  let summary = "Recognizes exported Gelu formulas as graph.gelu";
  let description = [{
    Exporters write Gelu as element-wise ops: the exact form as
    mul(mul(x, add(erf(x / sqrt(2)), 1)), 0.5) before ONNX opset 20, the
    tanh form (GPT-2's gelu_new) as
    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) with the cube as a
    pow or two products, the half applied to x first (GPT-2's) or to the
    product last (PyTorch's approximate Gelu as torch 1.13 exports it).
    Where every intermediate value has no other user,
    the formula becomes one graph.gelu (approximate "none" or "tanh"): one
    step instead of five to nine, and partc-fuse-activations, which runs
    next, can then put a tanh Gelu into the epilogue of the product before
    it. Constants match within 1e-6 relative. Training runs it before
    differentiation too, with `skip-initializers`: the backward pass then
    gets one gelu_grad or gelu_tanh_grad step instead of the formula's
    gradients op by op, and an initializer (a parameter to train) is never
    taken for one of the formula's constants.
  }];
  let options = [
    Option<"skipInitializers", "skip-initializers", "bool", "false",
           "Constants that are initializers are not the formula's">,
  ];
}

def FuseElementwise : Pass<"partc-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Runs chains of f32 element-wise ops as one kernel";
  let description = [{
    Groups connected element-wise ops (unary ops, add, sub, mul, div, pow,
    min, max) whose results share one f32 type and whose intermediate
    results are used only inside the group into a graph.fused_elementwise,
    so that, for example, a softmax's scaling and masking read and write
    memory once instead of several times. Runs after
    partc-fuse-activations, which folds what it can into convolutions and
    GEMMs first. Groups stay within the limits the runtime's kernels take
    (FusedElementwise.h) and on one device.
  }];
}

//===----------------------------------------------------------------------===//
// Placement (compiler/Placement)
//===----------------------------------------------------------------------===//

def SearchPlacement : Pass<"partc-search-placement", "mlir::ModuleOp"> {
  let summary = "Chooses and applies stages x replicas x micro-batches by cost";
  let description = [{
    Predicts every op's time on the given devices (roofline of FLOPs and
    bytes, or measured times from a cost table), finds for every replica
    count and micro-batch count the stage split that minimizes the slowest
    stage including the transfers of every tensor live across a cut, subject
    to each device's memory, and applies the plan with the best predicted
    throughput (or latency). `strategy` constrains the search: single (one
    device), pipeline (every device a stage), data (every device a
    replica), or auto. Records the choice and its predictions on the module
    (`graph.placement`, which the plan's metadata carries), reports it as a
    remark and, with `explain`, prints the ranking as text or JSON; with a
    cost table, the text also sets each op kind's measured time against
    its roofline, the largest difference first (where the uncalibrated
    model is off). With
    `fused-attention`, attention's three ops are predicted as the fused
    kernel (graph::matchAttention) that partc-fuse-attention makes of them
    after placement. Fails,
    naming the heaviest stage and the device count that would fit, when
    nothing fits.
  }];
  let options = [
    Option<"devices", "devices", "std::string", "\"1xh200\"",
           "Devices as COUNTxPRESET (e.g. 4xh200, 2xh100)">,
    Option<"topology", "topology", "std::string", "\"\"",
           "JSON topology file (overrides devices)">,
    Option<"strategy", "strategy", "std::string", "\"auto\"",
           "auto, single, pipeline or data">,
    Option<"objective", "objective", "std::string", "\"throughput\"",
           "throughput or latency">,
    Option<"stages", "stages", "int64_t", "0", "Fix the stage count (0: search)">,
    Option<"replicas", "replicas", "int64_t", "0",
           "Fix the replica count (0: search)">,
    Option<"microBatches", "micro-batches", "int64_t", "0",
           "Fix the micro-batch count (0: search)">,
    Option<"costTable", "cost-table", "std::string", "\"\"",
           "Measured kernel times (partc-run --profile), files separated by "
           "commas">,
    Option<"explain", "explain", "std::string", "\"\"",
           "Print why the plan was chosen: text or json">,
    Option<"memoryGiB", "memory-gib", "double", "0",
           "Override every device's memory (GiB), for tests">,
    Option<"fusedAttention", "fused-attention", "bool", "false",
           "Predict attention as the one kernel partc-fuse-attention makes "
           "of it after placement">,
  ];
}

def AssignDevices : Pass<"partc-assign-devices", "mlir::ModuleOp"> {
  let summary = "Places every op on a pipeline stage (one device per stage)";
  let description = [{
    With `split-at`, stage k ends after the last op of the k-th named ONNX
    node. Without it, the op sequence is cut into `num-devices` contiguous
    stages that minimize the largest stage's estimated FLOPs (exact dynamic
    programming over the topological order). Sets `graph.device` on every
    op and `graph.num_devices` on the module.
  }];
  let options = [
    Option<"numDevices", "num-devices", "int64_t", "1",
           "Number of devices (stages)">,
    ListOption<"splitAt", "split-at", "std::string",
               "ONNX node names after which a new stage starts">,
  ];
}

def SchedulePipeline : Pass<"partc-schedule-pipeline", "mlir::ModuleOp"> {
  let summary = "Splits the batch into micro-batches and interleaves stages";
  let description = [{
    Clones the placed graph once per micro-batch on the batch dimension,
    keeping each op's stage. Micro-batch k's ops precede micro-batch k+1's,
    which is the GPipe forward order: while stage 1 works on micro-batch k,
    stage 0 already works on k+1. Inputs are sliced and outputs concatenated
    on the host (device -1).
  }];
  let options = [
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Number of micro-batches">,
    Option<"schedule", "schedule", "std::string", "\"gpipe\"",
           "Schedule: gpipe (1f1b needs training, which is not supported yet)">,
  ];
}

def ReplicateDataParallel : Pass<"partc-replicate-data-parallel",
                                 "mlir::ModuleOp"> {
  let summary = "Splits the batch over N replicas of the whole graph";
  let description = [{
    Replica r gets rows [r*B/N, (r+1)*B/N) of every batched input and runs
    the whole graph on device r with the weights replicated; outputs are
    concatenated on the host.
  }];
  let options = [
    Option<"replicas", "replicas", "int64_t", "1", "Number of replicas">,
  ];
}

def SliceBatch : Pass<"partc-slice-batch", "mlir::ModuleOp"> {
  let summary = "Makes the graph one replica's: its share of the batch";
  let description = [{
    The first step of data-parallel training, before partc-prepare-training:
    every batched input, op and output takes batch / N samples, so that the
    loss, gradients and batch statistics that training adds are one
    replica's. Batched inputs are marked `graph.batch_slice = N`, which
    partc-differentiate copies to `labels` and partc-replicate-training
    reads. Refuses a batch that N does not divide and ops that mix samples.
  }];
  let options = [
    Option<"parts", "parts", "int64_t", "1", "Number of equal slices">,
  ];
}

def ReplicateTraining : Pass<"partc-replicate-training", "mlir::ModuleOp"> {
  let summary = "Runs one replica's training step on each of N devices";
  let description = [{
    Data-parallel training, after partc-slice-batch, the optimizer and the
    graph optimizations: replica r takes rows [r*b, (r+1)*b) of each input
    marked `graph.batch_slice = N` (which grows back to N*b rows) and runs a
    clone of the whole step on device r with its own copy of the parameters,
    optimizer state and running statistics. Each gradient is averaged over
    the replicas by a graph.all_reduce right after it is computed, before
    the update reads it, so every replica applies the same update; the loss
    (and, without an optimizer, the returned gradients) is averaged the same
    way and returned from replica 0. Batch normalization keeps each
    replica's statistics, as DistributedDataParallel does; dropout numbers
    each replica's mask from its rows' place in the whole batch. With M
    micro-batches (gradient accumulation) each replica runs the forward and
    backward ops once per micro-batch of b/M rows, one after another, adds
    each micro-batch's gradients to a running sum as soon as they are
    computed, and averages the sum before the all-reduce and the single
    update; N = 1 accumulates on one device.

    With S `stages` (a training pipeline, after partc-assign-devices cut
    the forward graph into S stages and the training passes placed each
    backward op on its forward op's stage), replica r runs stage s on
    device r*S + s, and each device runs its micro-batches' forward and
    backward ops in the order of `schedule`: gpipe (every forward, then
    every backward) or 1f1b (stage s runs S-s-1 forwards ahead, then
    alternates one forward and one backward, keeping fewer micro-batches'
    activations). The forward ops are those the loss is computed from.
    Batch norm's running statistics under micro-batches move once per
    micro-batch in order, as PyTorch's accumulation does, folded into one
    update.
  }];
  let options = [
    Option<"replicas", "replicas", "int64_t", "1", "Number of replicas">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per replica whose gradients are accumulated">,
    Option<"stages", "stages", "int64_t", "1",
           "Pipeline stages per replica (ops carry their stage as device)">,
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "Order of a stage's micro-batch chunks: gpipe or 1f1b">,
  ];
}

def BucketAllReduces : Pass<"partc-bucket-all-reduces", "mlir::ModuleOp"> {
  let summary = "Averages consecutive gradients in one collective (a bucket)";
  let description = [{
    After partc-replicate-training: consecutive graph.all_reduce ops of the
    same devices become one op of several tensors, issued where its last
    gradient is computed, as long as the bucket stays within `bucket-bytes`
    and no earlier member's mean is read before then. NCCL exchanges a
    bucket in one group, so each step pays a collective's latency per
    bucket rather than per gradient (292 gradients of a GPT-2-medium decoder
    took 8.7 ms one call each on two H100s, 5.3 ms in one group; DDP's
    buckets are 25 MiB). A tensor larger than the limit is a bucket of its
    own; a limit of 1 byte keeps one all-reduce per gradient. Groups are
    numbered again in the order devices meet them.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "25 << 20",
           "The most bytes a bucket averages, unless one tensor is larger">,
  ];
}

def InsertTransfers : Pass<"partc-insert-transfers", "mlir::ModuleOp"> {
  let summary = "Inserts a graph.transfer for every tensor that crosses devices";
  let description = [{
    One transfer per (value, destination device), placed right after the
    producer, so a tensor used by several ops of a later stage, or by a
    stage that skips over another (residual edges), moves once and directly.
    With `at-first-use`, placed right before the first op that reads it on
    the destination instead (the sender still sends right after the
    producer; the receiver's stream then waits only where it needs the
    value): training pipelines, whose devices run many chunks between.
  }];
  let options = [
    Option<"atFirstUse", "at-first-use", "bool", "false",
           "Receive right before the destination's first reader">,
  ];
}

def AssignStreams : Pass<"partc-assign-streams", "mlir::ModuleOp"> {
  let summary = "Runs independent branches side by side on streams of their own";
  let description = [{
    A fork is an op whose results several ops on its device read; each
    reader starts a branch, and the first later op that descends from two
    branches is the join, which must descend from all of them (else the
    fork is left alone). Where the cost model predicts a gain of at least
    `min-saving-us`, every op of each branch gets `graph.stream`: 0 for
    the longest branch, whose stream the join runs on, and 1 to
    `max-streams` - 1 for the others (round robin beyond). The gain is the
    branches' predicted times one after another, less the larger of the
    longest branch and the device time their kernels occupy: a kernel
    keeps blocks / multiprocessors of the device busy, a product counting
    a block per 128 x 128 results and any other kernel one per 1,024
    values, eight to a multiprocessor; one that fills more than half the
    device counts as filling all of it. Small convolutions of an
    Inception block, which each leave most of the GPU idle, run together;
    a ResNet block at batch 64 fills it alone and stays on one stream.
    Stream 0's branch moves to just before the join, so that the side
    branches come first in the plan: a backend starts a side stream after
    what it gave its main stream so far.
    The plan's order stays a valid one-stream schedule; the CUDA backend
    orders kernels of different streams by the bytes they touch, and
    partc-plan-memory keeps a branch's buffers live until its join. The
    module's placement records how many regions were split and the
    predicted gain, and takes a quarter of the gain (what GoogLeNet and
    Inception v3 showed of it) off the step and period placement
    predicted (kept as `predicted_step_ms_one_stream` and
    `predicted_period_ms_one_stream`): per pipeline stage, its device's
    largest gain; replicas count once. Inference plans; runs after
    placement and fusion.
  }];
  let options = [
    Option<"maxStreams", "max-streams", "int64_t", "4",
           "Streams a device runs branches on (1: none, at most 4)">,
    Option<"minSavingUs", "min-saving-us", "double", "2.0",
           "Predicted gain a region needs, in microseconds">,
    Option<"devices", "devices", "std::string", "\"h200\"",
           "The devices that cost the branches (partc compile --devices)">,
    Option<"topology", "topology", "std::string", "\"\"",
           "A JSON description of the machine (overrides devices)">,
    Option<"costTable", "cost-table", "std::string", "\"\"",
           "Kernel profiles (partc-run --profile, comma-separated) that "
           "cost the branches, as placement's">,
  ];
}

def VerifyPlacement : Pass<"partc-verify-placement", "mlir::ModuleOp"> {
  let summary = "Proves that every op is placed and every use is local";
}

//===----------------------------------------------------------------------===//
// Training (compiler/Training)
//===----------------------------------------------------------------------===//

def PrepareTraining : Pass<"partc-prepare-training", "mlir::ModuleOp"> {
  let summary = "Switches ops that train differently to their training form";
  let description = [{
    What PyTorch's model.train() changes, on the graph as imported: every
    graph.batch_norm whose running mean and
    variance are initializers becomes graph.batch_norm_train, which
    normalizes with the batch's own statistics, and its running mean and
    variance become graph.variables (roles running_mean and running_var,
    initialized from the initializers) that graph.update_running_stats
    moves toward the batch's statistics at the end of the step. Run it
    before partc-differentiate.

    Every graph.dropout gets a `stream` of its own (0, 1, ... in order).
    In training its step and seed become the graph.variables
    `optimizer.step` (role step, counted by graph.count_step at the end of
    the step) and `rng.seed` (role seed, initialized to `seed`), so that
    each step draws new masks and a run can choose its own.

    With `only-marked`, for an inference compile, it converts only the
    norms the model marks `training_mode` (an export made for training
    asks ONNX for batch statistics) and keeps no running statistics;
    dropouts keep step and seed 0 (one fixed mask).
  }];
  let options = [
    Option<"batchNormMomentum", "batch-norm-momentum", "double", "-1",
           "PyTorch's BatchNorm momentum: the weight of the batch's "
           "statistics in the running ones, for every norm; negative: "
           "each norm's own (the model's momentum, else 0.1)">,
    Option<"onlyMarked", "only-marked", "bool", "false",
           "Convert only training_mode norms, without running statistics "
           "(inference)">,
    Option<"seed", "seed", "int64_t", "0",
           "Initial value of the dropout seed variable (rng.seed)">,
  ];
}

def Differentiate : Pass<"partc-differentiate", "mlir::ModuleOp"> {
  let summary = "Adds a loss and the gradients of the model's parameters";
  let description = [{
    Makes @main compute one training step's loss and gradients: it takes
    one more argument, `labels`, applies the loss to the chosen output
    (means over the batch, as PyTorch's defaults), and returns the loss
    (named "loss") and the gradient of every trainable parameter (named
    "grad.<initializer>", with `graph.gradient_of`), in place of the
    model's outputs. Parameters are the float graph.constants imported from
    ONNX initializers (`graph.initializer`) that the loss depends on,
    except the frozen ones. Gradients come from each op's
    GradientOpInterface, in reverse order from the loss; a value used
    several times sums its gradients; values that do not lead from a
    parameter to the loss get none. Run it on the imported graph, before
    any fusion.
  }];
  let options = [
    Option<"loss", "loss", "std::string", "\"mse\"",
           "mse, cross-entropy, bce-with-logits or l1">,
    Option<"output", "output", "std::string", "\"\"",
           "The output the loss applies to (default: the only one)">,
    ListOption<"frozen", "frozen", "std::string",
               "Initializers that are not trained">,
  ];
}

def ApplyOptimizer : Pass<"partc-apply-optimizer", "mlir::ModuleOp"> {
  let summary = "Updates parameters in place from their gradients";
  let description = [{
    For every result of @main that is a parameter's gradient
    (`graph.gradient_of`, from partc-differentiate), makes the parameter a
    graph.variable (its initializer's value is the initial value), adds
    the optimizer's state (momentum buffers; AdamW's moments and step
    counter) as zero-initialized variables, and updates them all with
    graph.sgd_update or graph.adamw_update just before the return, after
    every other use of them. The gradients are no longer returned.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"sgd\"",
           "sgd or adamw">,
    Option<"lr", "lr", "double", "0.001", "Learning rate">,
    Option<"momentum", "momentum", "double", "0", "SGD's momentum">,
    Option<"weightDecay", "weight-decay", "double", "-1",
           "Weight decay (default: 0 for SGD, 0.01 for AdamW, as PyTorch)">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW's beta1">,
    Option<"beta2", "beta2", "double", "0.999", "AdamW's beta2">,
    Option<"eps", "eps", "double", "1e-8", "AdamW's epsilon">,
  ];
}

def RecomputeActivations
    : Pass<"partc-recompute-activations", "mlir::ModuleOp"> {
  let summary = "Computes chosen activations again in the backward pass";
  let description = [{
    Trades compute for memory in a differentiated training step. A value
    the forward ops (those the loss, the return's first operand, is computed
    from) produce and an op after the loss reads is kept from the forward
    pass to the backward pass; the kept values are most of a step's memory.
    For a chosen value the pass clones its producer right before its first
    reader after the loss and gives the readers after the loss the copy, so
    that the original dies after its last forward reader.

    A value can be recomputed when its producer and the producers of any
    values between it and values kept anyway (or parameters, constants,
    inputs) are side-effect free, at most `kMostChainOps` ops; those values
    it is recomputed from stay kept. Values whose users outside the forward
    pass include the return or an op before the loss, and views of kept
    values (which hold no bytes of their own), are left alone. Candidates
    are taken cheapest per byte first (the chain's predicted time on the
    `devices` preset per kept byte saved) until `target-bytes` are saved,
    or all of them with `all`. Records `partc.recomputed` on the module:
    the number of values, their bytes, and the predicted seconds the
    copies add.
  }];
  let options = [
    Option<"targetBytes", "target-bytes", "double", "0",
           "Kept bytes to save (0: none unless all)">,
    Option<"all", "all", "bool", "false",
           "Recompute every value that can be">,
    Option<"devices", "devices", "std::string", "\"h200\"",
           "The device preset that costs the candidates">,
  ];
}

def ScheduleUpdates : Pass<"partc-schedule-updates", "mlir::ModuleOp"> {
  let summary = "Applies each parameter's update as soon as it can run";
  let description = [{
    partc-apply-optimizer updates every parameter at the end of the step,
    so that every gradient is kept until then: as many bytes as the
    parameters. This pass moves each graph.sgd_update and
    graph.adamw_update up to right after the last op that produces one of
    its operands or reads a variable it writes (directly or through
    reshapes and identities, which the plan reads as views of the same
    bytes), so that each gradient dies as soon as it is applied. Run it
    after every pass that adds readers of the parameters. Data-parallel
    and pipelined plans order their updates again in
    partc-replicate-training (after averaging or accumulating); the step
    counter and the running statistics stay where they are.
  }];
}

//===----------------------------------------------------------------------===//
// Graph to plan dialect (compiler/Conversion/GraphToPlan)
//===----------------------------------------------------------------------===//

def LowerToPlan : Pass<"partc-lower-to-plan", "mlir::ModuleOp"> {
  let summary = "Lowers a placed graph to per-device plan streams";
  let description = [{
    Replaces func.func @main with a plan.program: weights become
    plan.weight, each device gets a plan.device region with its ops in
    graph order as plan.kernel over plan.alloc buffers, reshapes become
    plan.view, transfers become send/recv pairs with a wait_consumed before
    the source's next send to the same device (with `transport=nccl`, sends
    say that NCCL moves them). Checks that a CPU kernel exists for every op
    and its types. The program's metadata carries the model's name and batch
    and what placement recorded in `graph.placement` (strategy, micro-batches,
    predictions).
  }];
  let dependentDialects = ["::mlir::partc::plan::PlanDialect",
                           "::mlir::memref::MemRefDialect"];
  let options = [
    Option<"transport", "transport", "std::string", "\"p2p\"",
           "How transfers move between GPUs: p2p (device-to-device copies) "
           "or nccl (NCCL send/receive)">,
  ];
}

//===----------------------------------------------------------------------===//
// Plan transforms (compiler/PlanTransforms)
//===----------------------------------------------------------------------===//

def PlanMemory : Pass<"partc-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assigns arena offsets to plan buffers by liveness";
  let description = [{
    A buffer lives from its allocation to its last use through any view;
    a buffer that is sent lives until the matching wait_consumed. Buffers
    are placed largest first at the lowest offset that does not overlap a
    buffer whose lifetime intersects (64-byte aligned). Sets `offset` on
    every plan.alloc and `arena_size` on every plan.device.
  }];
}

def ReportStepMemory : Pass<"partc-report-step-memory", "mlir::ModuleOp"> {
  let summary = "Measures what a training step keeps in each device's memory";
  let description = [{
    For a training plan (one with plan.state) whose arena is planned, sums
    per device: parameters, optimizer state (moments, step counter), other
    state (running statistics, the dropout seed), the constants its kernels
    read, the model inputs, the activations kept for the backward pass
    (arena buffers still to be read when the loss kernel has run), the
    gradients (arena buffers live at the first parameter update; updates run
    after every backward op) and the planned arena (where activations,
    gradients and temporaries share bytes by lifetime). Records each as a
    comma-separated list per device in the program's metadata
    (`memory_parameters`, `memory_optimizer_state`, `memory_other_state`,
    `memory_constants`, `memory_inputs`, `memory_kept_activations`,
    `memory_gradients`, `memory_arena`) and reports them as a remark on each
    device. Inference plans are left alone. With `device-memory` set, a
    device whose step needs more than that is an error with the numbers
    (library workspaces, chosen when the plan loads, are not counted).
  }];
  let options = [
    Option<"deviceMemoryBytes", "device-memory", "double", "0",
           "Memory of each device in bytes (0: not checked)">,
  ];
}

//===----------------------------------------------------------------------===//
// Test passes
//===----------------------------------------------------------------------===//

def TestPrintCost : Pass<"partc-test-print-cost", "mlir::ModuleOp"> {
  let summary = "Test only: prints each op's cost estimates as remarks";
  let description = [{
    FLOPs and bytes from the cost interface, then the share of the matrix
    units a convolution fills and the roofline time on the H200 preset
    (no cost table, whole batch) and the FLOPs it charges; with
    `fused-attention`, as placement predicts attention in inference plans.
  }];
  let options = [
    Option<"fusedAttention", "fused-attention", "bool", "false",
           "Predict attention as one fused kernel">,
  ];
}

#endif // PARTC_TRANSFORMS_PASSES
