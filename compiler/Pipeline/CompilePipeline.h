//===- CompilePipeline.h - What partc compile runs --------------*- C++ -*-===//
//
// The whole compilation from an imported graph to a plan dialect module,
// as one pipeline with its options: `partc compile` builds it from its
// flags, and partc-opt runs the same as --partc-compile="...", so that any
// stage of a compilation can be replayed and tested.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_COMPILER_PIPELINE_COMPILEPIPELINE_H
#define PARTC_COMPILER_PIPELINE_COMPILEPIPELINE_H

#include "compiler/Placement/TrainingSearch.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir::partc {

struct CompilePipelineOptions
    : public PassPipelineOptions<CompilePipelineOptions> {
  Option<std::string> devices{
      *this, "devices",
      llvm::cl::desc("Devices: a count (H200s) or COUNTxPRESET, e.g. 4xh200, "
                     "2xh100, 8xa100"),
      llvm::cl::init("1")};
  Option<std::string> topology{
      *this, "topology",
      llvm::cl::desc("JSON description of the machine (overrides devices)"),
      llvm::cl::init("")};
  Option<std::string> strategy{
      *this, "strategy",
      llvm::cl::desc("auto (searched by the cost model), single, pipeline or "
                     "data"),
      llvm::cl::init("auto")};
  Option<std::string> objective{*this, "objective",
                                llvm::cl::desc("throughput or latency"),
                                llvm::cl::init("throughput")};
  Option<int64_t> stages{
      *this, "stages",
      llvm::cl::desc("Pipeline stages per replica (strategy auto; 0: "
                     "searched)"),
      llvm::cl::init(0)};
  Option<int64_t> replicas{
      *this, "replicas",
      llvm::cl::desc("Data-parallel replicas (strategy auto; 0: searched)"),
      llvm::cl::init(0)};
  Option<int64_t> microBatches{
      *this, "micro-batches",
      llvm::cl::desc("Micro-batches for pipelining (0: searched)"),
      llvm::cl::init(0)};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("Pipeline schedule: gpipe or 1f1b (training; auto: "
                     "1f1b, as fast with fewer activations kept)"),
      llvm::cl::init("auto")};
  Option<std::string> costTable{
      *this, "cost-table",
      llvm::cl::desc("Measured kernel times (partc-run --profile), files "
                     "separated by commas"),
      llvm::cl::init("")};
  ListOption<std::string> splitAt{
      *this, "split-at",
      llvm::cl::desc("ONNX nodes after which a new stage starts (a "
                     "pipeline cut by hand)")};
  Option<std::string> transfers{
      *this, "transfers",
      llvm::cl::desc("p2p (device-to-device copies) or nccl"),
      llvm::cl::init("p2p")};
  Option<std::string> layout{
      *this, "layout",
      llvm::cl::desc("Convolution layout: nhwc (channels last) or nchw"),
      llvm::cl::init("nhwc")};
  Option<bool> fuseElementwise{
      *this, "fuse-elementwise",
      llvm::cl::desc("Fuse chains of element-wise ops into one kernel"),
      llvm::cl::init(true)};
  Option<bool> foldMatMulViews{
      *this, "fold-matmul-views",
      llvm::cl::desc("Read slices and transposes around batched MatMuls in "
                     "place"),
      llvm::cl::init(true)};
  Option<bool> fuseAttention{
      *this, "fuse-attention",
      llvm::cl::desc("Fuse attention's products and softmax into one kernel "
                     "(inference)"),
      llvm::cl::init(true)};
  Option<int64_t> branchStreams{
      *this, "branch-streams",
      llvm::cl::desc("Streams a device may run independent branches on "
                     "(inference; 1: one stream)"),
      llvm::cl::init(4)};
  Option<bool> exactGelu{
      *this, "exact-gelu",
      llvm::cl::desc("Keep the exact (erf) Gelu in 16-bit plans instead of "
                     "fusing it into the product as its tanh form"),
      llvm::cl::init(false)};
  Option<bool> fuseConcat{
      *this, "fuse-concat",
      llvm::cl::desc("Let element-wise chains read a concatenation's parts "
                     "in place (inference)"),
      llvm::cl::init(true)};
  Option<bool> mergeProjections{
      *this, "merge-projections",
      llvm::cl::desc("Run products of one input that attention reads "
                     "through views (query, key, value) as one product"),
      llvm::cl::init(true)};
  Option<bool> padMatMulColumns{
      *this, "pad-matmul-columns",
      llvm::cl::desc("Pad wide products' unaligned column counts"),
      llvm::cl::init(true)};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("Activations and weights in fp32, bf16 or fp16 "
                     "(inference)"),
      llvm::cl::init("fp32")};
  Option<bool> lower{
      *this, "lower",
      llvm::cl::desc("Lower the placed graph to the plan dialect and plan "
                     "its memory (false: stop at the placed graph)"),
      llvm::cl::init(true)};
  // Training (partc-differentiate, partc-apply-optimizer).
  Option<bool> train{*this, "train",
                     llvm::cl::desc("Compile one training step: loss, "
                                    "gradients and optimizer update"),
                     llvm::cl::init(false)};
  Option<std::string> loss{
      *this, "loss",
      llvm::cl::desc("mse, cross-entropy, bce-with-logits or l1"),
      llvm::cl::init("mse")};
  Option<std::string> lossOutput{
      *this, "output", llvm::cl::desc("The model output the loss applies to"),
      llvm::cl::init("")};
  ListOption<std::string> frozen{
      *this, "frozen", llvm::cl::desc("Initializers that are not trained")};
  Option<std::string> optimizer{
      *this, "optimizer",
      llvm::cl::desc("sgd, adamw, or none (return the gradients)"),
      llvm::cl::init("sgd")};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("The most gradient bytes one all-reduce averages (0: "
                     "chosen from the replicas' link; 1: one all-reduce per "
                     "gradient)"),
      llvm::cl::init(0)};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(0.001)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD's momentum"),
                          llvm::cl::init(0.0)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (default: SGD 0, AdamW 0.01)"),
      llvm::cl::init(-1.0)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW's beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW's beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW's epsilon"),
                     llvm::cl::init(1e-8)};
  Option<double> batchNormMomentum{
      *this, "batch-norm-momentum",
      llvm::cl::desc("Weight of the batch's statistics in batch norm's "
                     "running ones (PyTorch's momentum) for every norm; "
                     "negative: each norm's own, from the model"),
      llvm::cl::init(-1)};
  Option<int64_t> seed{*this, "seed",
                       llvm::cl::desc("Dropout's seed until the run sets one"),
                       llvm::cl::init(0)};
  Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("Activations computed again in the backward pass: auto "
                     "(when a step does not fit), none or all"),
      llvm::cl::init("auto")};
  Option<double> recomputeBytes{
      *this, "recompute-bytes",
      llvm::cl::desc("Kept bytes to save by recomputing (auto: partc "
                     "compile sets it after a refusal)"),
      llvm::cl::init(0.0)};
  Option<std::string> explain{
      *this, "explain",
      llvm::cl::desc("Print why the plan was chosen: text or json"),
      llvm::cl::init("")};
};

/// Checks the options together (the topology parses, stages x replicas fit
/// the devices, the strategy admits them); the error, or "".
std::string checkCompileOptions(const CompilePipelineOptions &options);

/// How a training step is spread: replicas x stages devices, each
/// replica's batch in micro-batches, and the pipeline's schedule.
struct TrainingLayout {
  int64_t replicas = 1, stages = 1, microBatches = 1;
  std::string schedule = "1f1b";
};

/// The layout the options ask for (after checkCompileOptions): explicit
/// --stages/--replicas/--split-at/--strategy, else data parallelism.
TrainingLayout trainingLayout(const CompilePipelineOptions &options);

/// Whether the options leave a training layout on several devices to
/// partc (--strategy auto and no --stages, --replicas or --split-at): the
/// driver then compiles the layouts searchTrainingLayouts ranks, best
/// first, until one fits.
bool trainingLayoutIsOpen(const CompilePipelineOptions &options);

/// The cost model's ranking of training layouts for the imported forward
/// graph of `module` when trainingLayoutIsOpen(options) (see
/// compiler/Placement/TrainingSearch.h).
FailureOr<TrainingSearchResult>
searchTrainingLayouts(ModuleOp module, const CompilePipelineOptions &options);

/// Options that compile candidate `c`: --strategy auto constrained to its
/// stages, replicas, micro-batches and schedule.
void constrainToLayout(CompilePipelineOptions &options,
                       const TrainingCandidate &c);

/// Graph optimizations, placement (searched, or cut by hand with
/// split-at), transfers and their verification, then, with `lower`, the
/// plan dialect and its memory plan. Options must have passed
/// checkCompileOptions.
void buildCompilePipeline(OpPassManager &pm,
                          const CompilePipelineOptions &options);

/// Registers --partc-compile with partc-opt.
void registerCompilePipeline();

} // namespace mlir::partc

#endif // PARTC_COMPILER_PIPELINE_COMPILEPIPELINE_H
