//===- CompilePipeline.cpp - What partc compile runs ----------------------===//
#include "compiler/Pipeline/CompilePipeline.h"

#include "compiler/CostModel/Topology.h"
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"
#include "dialects/Graph/GraphDialect.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <algorithm>

namespace mlir::partc {

namespace {
llvm::Expected<::partc::costmodel::Topology>
topologyOf(const CompilePipelineOptions &o) {
  return o.topology.empty()
             ? ::partc::costmodel::Topology::fromShorthand(o.devices)
             : ::partc::costmodel::Topology::fromJsonFile(o.topology);
}
} // namespace

std::string checkCompileOptions(const CompilePipelineOptions &o) {
  if (o.devices == "0" || (!o.devices.empty() && o.devices[0] == '-'))
    return "--devices must be at least 1, got " + o.devices;
  auto topo = topologyOf(o);
  if (!topo)
    return llvm::toString(topo.takeError());
  int64_t numDevices = static_cast<int64_t>(topo->size());
  if (o.microBatches < 0)
    return "--micro-batches must be at least 1";
  if (o.stages < 0 || o.replicas < 0)
    return "--stages and --replicas must be at least 1";
  int64_t stages = std::max<int64_t>(o.stages, 1);
  int64_t replicas = std::max<int64_t>(o.replicas, 1);
  if (stages * replicas > numDevices)
    return "--stages " + std::to_string(stages) + " x --replicas " +
           std::to_string(replicas) + " needs " +
           std::to_string(stages * replicas) +
           " devices, but --devices gives " + std::to_string(numDevices);
  const std::string &strategy = o.strategy;
  if (strategy != "auto" && strategy != "single" && strategy != "pipeline" &&
      strategy != "data")
    return "unknown --strategy '" + strategy +
           "'; expected auto, single, pipeline or data";
  if ((o.stages || o.replicas) && strategy != "auto")
    return "--stages and --replicas constrain --strategy auto; --strategy " +
           strategy + " sets them itself";
  if (strategy == "single" && numDevices != 1)
    return "--strategy single uses one device, but --devices is " +
           std::to_string(numDevices);
  if (!o.splitAt.empty() && strategy != "pipeline" && strategy != "auto")
    return "--split-at applies to --strategy pipeline only";
  if (o.branchStreams < 1 || o.branchStreams > graph::GraphDialect::kMaxStreams)
    return "--branch-streams must be from 1 to " +
           std::to_string(graph::GraphDialect::kMaxStreams) + ", got " +
           std::to_string(o.branchStreams) + " (1 runs one stream a device)";
  if (o.transfers != "p2p" && o.transfers != "nccl")
    return "unknown --transfers '" + o.transfers +
           "'; expected p2p (device-to-device copies) or nccl";
  if (o.objective != "throughput" && o.objective != "latency")
    return "--objective must be throughput or latency, got '" + o.objective +
           "'";
  if (o.layout != "nhwc" && o.layout != "nchw")
    return "--layout must be nhwc or nchw, got '" + o.layout + "'";
  if (o.bucketBytes < 0)
    return "--bucket-bytes must be at least 1 (or 0: chosen from the link), "
           "got " +
           std::to_string(o.bucketBytes);
  if (o.precision != "fp32" && o.precision != "bf16" && o.precision != "fp16")
    return "unknown --precision '" + o.precision +
           "'; expected fp32, bf16 or fp16";
  if (o.train && o.precision != "fp32")
    return "--precision " + o.precision +
           " is for inference; training keeps its gradients and optimizer "
           "state in fp32 (compile without --precision)";
  if (o.schedule != "auto" && o.schedule != "gpipe" && o.schedule != "1f1b")
    return "unknown --schedule '" + o.schedule +
           "'; expected gpipe, 1f1b or auto";
  if (!o.train && o.schedule == "1f1b")
    return "--schedule 1f1b orders backward passes; inference pipelines "
           "run gpipe";
  if (o.train) {
    int64_t cutStages = static_cast<int64_t>(o.splitAt.size()) + 1;
    if (!o.splitAt.empty() && o.stages && o.stages != cutStages)
      return "--split-at names " + std::to_string(o.splitAt.size()) +
             " cut(s), " + std::to_string(cutStages) +
             " stages, but --stages is " + std::to_string(o.stages);
    TrainingLayout t = trainingLayout(o);
    if (strategy == "pipeline" && !o.splitAt.empty() && cutStages != numDevices)
      return "--strategy pipeline trains one stage per device: --split-at "
             "gives " +
             std::to_string(cutStages) + " stages for " +
             std::to_string(numDevices) + " devices";
    if (t.replicas * t.stages != numDevices)
      return "--train runs " + std::to_string(t.replicas) + " replica(s) x " +
             std::to_string(t.stages) +
             " stage(s) = " + std::to_string(t.replicas * t.stages) +
             " devices, but --devices "
             "gives " +
             std::to_string(numDevices) +
             "; choose --stages and --replicas whose product is the device "
             "count";
    if (t.stages > 1 && o.microBatches == 1 && o.schedule != "auto")
      return "--schedule orders micro-batches; with --micro-batches 1 the "
             "pipeline runs one batch through its stages";
  }
  if (o.train && o.optimizer != "sgd" && o.optimizer != "adamw" &&
      o.optimizer != "none")
    return "unknown --optimizer '" + o.optimizer +
           "'; expected sgd, adamw or none (the plan returns the gradients)";
  if (o.recompute != "auto" && o.recompute != "none" && o.recompute != "all")
    return "unknown --recompute '" + o.recompute +
           "'; expected auto (only when a step does not fit), none or all";
  if (!o.explain.empty() && o.explain != "text" && o.explain != "json")
    return "--explain takes text or json, got '" + o.explain + "'";
  return "";
}

TrainingLayout trainingLayout(const CompilePipelineOptions &o) {
  TrainingLayout t;
  if (!o.train)
    return t;
  int64_t numDevices = 1;
  if (auto topo = topologyOf(o))
    numDevices = static_cast<int64_t>(topo->size());
  else
    llvm::consumeError(topo.takeError()); // checkCompileOptions says so
  if (o.strategy == "pipeline") {
    t.stages = numDevices;
  } else if (o.strategy == "auto") {
    if (o.stages > 0)
      t.stages = o.stages;
    else if (!o.splitAt.empty())
      t.stages = static_cast<int64_t>(o.splitAt.size()) + 1;
    else if (o.replicas > 0)
      t.stages = std::max<int64_t>(1, numDevices / o.replicas);
  }
  t.replicas = o.replicas > 0 ? int64_t(o.replicas)
                              : std::max<int64_t>(1, numDevices / t.stages);
  // A pipeline needs micro-batches to overlap its stages; two per stage
  // keep the 1F1B bubble at a third of the step.
  t.microBatches = o.microBatches > 0 ? int64_t(o.microBatches)
                   : t.stages > 1     ? 2 * t.stages
                                      : 1;
  t.schedule = o.schedule == "gpipe" ? "gpipe" : "1f1b";
  return t;
}

bool trainingLayoutIsOpen(const CompilePipelineOptions &o) {
  if (!o.train || o.strategy != "auto" || o.stages > 0 || o.replicas > 0 ||
      !o.splitAt.empty())
    return false;
  auto topo = topologyOf(o);
  if (!topo) {
    llvm::consumeError(topo.takeError());
    return false;
  }
  return topo->size() > 1;
}

FailureOr<TrainingSearchResult>
searchTrainingLayouts(ModuleOp module, const CompilePipelineOptions &o) {
  auto func = getMainFunction(module);
  if (failed(func))
    return failure();
  auto topo = topologyOf(o);
  if (!topo)
    return module.emitError() << llvm::toString(topo.takeError()), failure();
  TrainingSearchOptions search;
  search.topology = std::move(*topo);
  search.stateCopies = o.optimizer == "adamw"                      ? 2
                       : o.optimizer == "sgd" && o.momentum != 0.0 ? 1
                                                                   : 0;
  search.microBatches = o.microBatches;
  search.schedule = o.schedule;
  return searchTrainingLayout(*func, search);
}

void constrainToLayout(CompilePipelineOptions &o, const TrainingCandidate &c) {
  o.strategy = "auto";
  o.stages = c.stages;
  o.replicas = c.replicas;
  o.microBatches = c.microBatches;
  o.schedule = c.schedule;
}

void buildCompilePipeline(OpPassManager &pm, const CompilePipelineOptions &o) {
  TrainingLayout layout = trainingLayout(o);
  int64_t replicas = layout.replicas;
  // Gradient accumulation (and a pipeline's micro-batches): each replica's
  // share in micro-batches.
  int64_t microBatches = layout.microBatches;
  bool sliced = replicas * microBatches > 1;
  bool replicated = o.train && (sliced || layout.stages > 1);
  // Data-parallel training and gradient accumulation differentiate one
  // micro-batch of one replica.
  if (sliced)
    pm.addPass(createSliceBatch({replicas * microBatches}));
  // A training pipeline's stages are cut on the forward graph; the
  // training passes put each op they build on its forward op's stage.
  if (o.train && layout.stages > 1) {
    AssignDevicesOptions assign;
    assign.numDevices = layout.stages;
    assign.splitAt.assign(o.splitAt.begin(), o.splitAt.end());
    pm.addPass(createAssignDevices(assign));
  }
  // Before differentiation, so that all of a padded product's gradients
  // are aligned too.
  if (o.padMatMulColumns)
    pm.addPass(createPadMatMulColumns());
  // Training differentiates the graph as imported, before any fusion but
  // Gelu's and the norms': their formulas' gradients are one step rather
  // than a dozen ops.
  if (o.train && o.fuseElementwise)
    pm.addPass(createMatchGelu({/*skipInitializers=*/true}));
  // Layer and RMS norms written out (exports below opset 17, Llama's) as
  // one op each: their gradient is then one op too, not a dozen.
  if (o.train && o.fuseElementwise)
    pm.addPass(createFuseNormalizations({/*skipInitializers=*/true}));
  if (o.train) {
    PrepareTrainingOptions prepare;
    prepare.batchNormMomentum = o.batchNormMomentum;
    prepare.seed = o.seed;
    pm.addPass(createPrepareTraining(prepare));
    DifferentiateOptions differentiate;
    differentiate.loss = o.loss;
    differentiate.output = o.lossOutput;
    differentiate.frozen.assign(o.frozen.begin(), o.frozen.end());
    pm.addPass(createDifferentiate(differentiate));
    if (o.optimizer != "none") {
      ApplyOptimizerOptions optimizer;
      optimizer.optimizer = o.optimizer;
      optimizer.lr = o.lr;
      optimizer.momentum = o.momentum;
      optimizer.weightDecay = o.weightDecay;
      optimizer.beta1 = o.beta1;
      optimizer.beta2 = o.beta2;
      optimizer.eps = o.eps;
      pm.addPass(createApplyOptimizer(optimizer));
    }
  } else {
    PrepareTrainingOptions prepare;
    prepare.onlyMarked = true;
    pm.addPass(createPrepareTraining(prepare));
  }
  // Graph optimizations: each pass leaves ops the next can fuse further.
  pm.addPass(createFoldConstants());
  // Exporters repeat work per layer (GPT-2's attention mask is built again
  // in each of its blocks): identical ops on identical operands run once.
  // Inference only: a training step's random and in-place ops must stay
  // apart.
  if (!o.train)
    pm.addPass(mlir::createCSEPass());
  // After differentiation: the gradient rules are written channels first.
  if (o.layout == "nhwc")
    pm.addPass(createConvertLayout());
  // Before partc-fuse-activations, which puts a tanh Gelu into the
  // product before it.
  if (o.fuseElementwise)
    pm.addPass(createMatchGelu());
  // 16-bit plans take the exact Gelu in its tanh form (Passes.td says why).
  FuseActivationsOptions activations;
  activations.erfGeluAsTanh = o.precision != "fp32" && !o.exactGelu;
  activations.scaleWeights = o.precision != "fp16";
  pm.addPass(createFuseActivations(activations));
  pm.addPass(createFuseNormalizations());
  if (o.train)
    pm.addPass(createFuseDropout());
  if (o.foldMatMulViews)
    pm.addPass(createFoldMatMulViews());
  // After the views are folded: only what strided products read merges.
  if (o.foldMatMulViews && o.mergeProjections && !o.train)
    pm.addPass(createMergeProjections());
  if (o.fuseElementwise)
    pm.addPass(createFuseElementwise());

  // After fusion: a fused chain or epilogue is converted as one op, and
  // only the edges between 16-bit and f32 ops get casts.
  if (o.precision != "fp32")
    pm.addPass(createLowerPrecision({o.precision}));

  // After fusion, so that a fused chain is computed again as one kernel.
  if (o.train && (o.recompute == "all" ||
                  (o.recompute == "auto" && o.recomputeBytes > 0))) {
    RecomputeActivationsOptions recompute;
    recompute.all = o.recompute == "all";
    recompute.targetBytes = o.recomputeBytes;
    if (o.topology.empty())
      recompute.devices = o.devices;
    pm.addPass(createRecomputeActivations(recompute));
  }
  // After every pass that adds readers of the parameters.
  if (o.train)
    pm.addPass(createScheduleUpdates());

  // Placement: cut by hand, or chosen by the cost model, which explicit
  // strategies constrain.
  if (replicated) {
    pm.addPass(createReplicateTraining(
        {replicas, microBatches, layout.stages, layout.schedule}));
    if (replicas > 1) {
      BucketAllReducesOptions bucket;
      bucket.bucketBytes = o.bucketBytes;
      if (o.bucketBytes == 0) {
        auto topo = topologyOf(o);
        bucket.bucketBytes =
            topo ? allReduceBucketBytes(topo->slowestLink(0, topo->size()),
                                        replicas)
                 : int64_t(25) << 20;
        if (!topo)
          llvm::consumeError(topo.takeError()); // checkCompileOptions said so
      }
      pm.addPass(createBucketAllReduces(bucket));
    }
  } else if (!o.splitAt.empty()) {
    AssignDevicesOptions assign;
    auto topo = topologyOf(o);
    assign.numDevices = topo ? static_cast<int64_t>(topo->size()) : 1;
    if (!topo)
      llvm::consumeError(topo.takeError()); // checkCompileOptions said so
    assign.splitAt.assign(o.splitAt.begin(), o.splitAt.end());
    pm.addPass(createAssignDevices(assign));
    if (o.microBatches > 1)
      pm.addPass(createSchedulePipeline({o.microBatches, "gpipe"}));
  } else {
    SearchPlacementOptions search;
    search.devices = o.devices;
    search.topology = o.topology;
    search.strategy = o.strategy;
    search.objective = o.objective;
    search.stages = o.stages;
    search.replicas = o.replicas;
    search.microBatches = o.microBatches;
    search.costTable = o.costTable;
    search.fusedAttention = o.fuseAttention && !o.train;
    // A training plan's JSON is partc's, with the memory of a step.
    search.explain =
        o.train && o.explain == "json" ? std::string() : std::string(o.explain);
    pm.addPass(createSearchPlacement(search));
  }
  // A training pipeline's devices run many chunks between a send and its
  // use: each receives where it needs the value.
  pm.addPass(createInsertTransfers({replicated && layout.stages > 1}));
  // After placement, which splits the batch of the unfused ops. Training
  // keeps the three ops: the backward pass reads the probabilities.
  if (o.fuseAttention && !o.train)
    pm.addPass(createFuseAttention());
  // After placement too: a concatenation cut from its chain by a transfer
  // stays.
  if (!o.train && o.fuseElementwise && o.fuseConcat)
    pm.addPass(createFuseConcat());
  // After fusion, which decides what is a kernel.
  if (!o.train && o.branchStreams > 1) {
    AssignStreamsOptions streams;
    streams.maxStreams = o.branchStreams;
    streams.devices = o.devices;
    streams.topology = o.topology;
    streams.costTable = o.costTable;
    pm.addPass(createAssignStreams(streams));
  }
  pm.addPass(createVerifyPlacement());

  // The plan dialect.
  if (o.lower) {
    pm.addPass(createLowerToPlan({o.transfers}));
    pm.addPass(createPlanMemory());
    if (o.train) {
      // Checked against the smallest device: replicas are alike.
      ReportStepMemoryOptions memory;
      if (auto topo = topologyOf(o))
        memory.deviceMemoryBytes = topo->smallestMemory();
      else
        llvm::consumeError(topo.takeError()); // checkCompileOptions said so
      pm.addPass(createReportStepMemory(memory));
    }
  }
}

void registerCompilePipeline() {
  PassPipelineRegistration<CompilePipelineOptions>(
      "partc-compile",
      "Everything partc compile runs on an imported graph: optimizations, "
      "placement, transfers, the plan dialect and its memory plan",
      [](OpPassManager &pm, const CompilePipelineOptions &options) {
        buildCompilePipeline(pm, options);
      });
}

} // namespace mlir::partc
