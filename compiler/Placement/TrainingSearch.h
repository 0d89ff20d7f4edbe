//===- TrainingSearch.h - Choose how a training step spreads ----*- C++ -*-===//
//
// The cost model of a training step on several devices: for every split of
// the devices into pipeline stages x data-parallel replicas, every micro-
// batch count and schedule, a predicted step time (compute, the pipeline's
// bubble, activation transfers, the gradient all-reduce the backward pass
// does not hide, the optimizer update) and each stage's memory (parameters,
// gradients, optimizer state, the activations each schedule keeps).
// `partc compile --train --strategy auto` ranks them, compiles the best that
// fits and explains the choice against the runners-up.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_COMPILER_PLACEMENT_TRAININGSEARCH_H
#define PARTC_COMPILER_PLACEMENT_TRAININGSEARCH_H

#include "compiler/CostModel/OpCost.h"
#include "compiler/CostModel/Topology.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>
#include <vector>

namespace mlir::partc {

struct TrainingSearchOptions {
  ::partc::costmodel::Topology topology;
  const ::partc::costmodel::CostTable *costTable = nullptr;
  /// Optimizer state per parameter, in parameters' sizes: 0 for plain SGD,
  /// 1 with momentum, 2 for AdamW.
  int64_t stateCopies = 0;
  /// Fixed by the options (0 or "auto": searched).
  int64_t microBatches = 0;
  std::string schedule = "auto";
};

struct TrainingCandidate {
  int64_t stages = 1, replicas = 1, microBatches = 1;
  std::string schedule = "1f1b";
  /// `possible`: the batch splits this way; `feasible`: and the estimate
  /// fits every device (else `whyNot` says why).
  bool possible = false, feasible = false;
  std::string whyNot;
  /// Predicted seconds per step: the slowest stage over the micro-batches
  /// (its activation transfers included, also given apart), the bubble,
  /// the all-reduce left after the backward pass, the optimizer update,
  /// and their sum.
  double computeSeconds = 0, bubbleSeconds = 0, transferSeconds = 0,
         allReduceSeconds = 0, updateSeconds = 0, stepSeconds = 0;
  /// What a step over several devices costs whatever its size
  /// (kMultiDeviceStepSeconds; 0 on one device), included in stepSeconds.
  double fixedSeconds = 0;
  /// Per stage: predicted memory of a step on its devices.
  std::vector<double> stageMemoryBytes;
  double peakMemoryBytes() const;
  std::string label() const;
};

struct TrainingSearchResult {
  /// Best first: those estimated to fit by step time, then those estimated
  /// not to by memory (the compile's exact check may still take them), then
  /// the impossible ones.
  std::vector<TrainingCandidate> candidates;
  int64_t batch = 1;
  std::string topology;
  double searchSeconds = 0;
  /// The same step on one of the devices (0 where there is only one, or
  /// its estimate does not fit): `--devices N` spreads over all N, and
  /// --explain says when one would be faster.
  double oneDeviceSeconds = 0;
};

/// A step over several devices pays this beyond its work: NCCL's launch and
/// latency, a host thread per GPU to start it and the wait for the slowest.
/// Measured on 2 x H200 (docs/benchmarks.md, session 30): Chainer's MLP at
/// batch 100 took 0.284 ms data-parallel against 0.130 ms on one GPU, whose
/// half-batch kernels take as long as the whole batch's.
constexpr double kMultiDeviceStepSeconds = 150e-6;

/// The largest bucket of gradients that one all-reduce among `replicas`
/// averages (partc-bucket-all-reduces): big enough that the collective's
/// latency costs at most a tenth of its transfer over `link`, within
/// [1 MiB, 128 MiB].
int64_t allReduceBucketBytes(const ::partc::costmodel::LinkSpec &link,
                             int64_t replicas);

/// Ranks every stages x replicas layout of the forward graph `func` over
/// the topology's devices (none for a graph without ops).
FailureOr<TrainingSearchResult>
searchTrainingLayout(func::FuncOp func, const TrainingSearchOptions &options);

/// "one device would be faster: ..." when the search predicts that a step
/// on one device beats candidate `chosen`, else empty.
std::string oneDeviceNote(const TrainingSearchResult &r, size_t chosen);

/// The ranking as --explain prints it; `chosen` indexes the candidate that
/// compiled (earlier ones were refused by the exact memory check, with
/// `refusals` saying why).
std::string explainTrainingSearch(const TrainingSearchResult &result,
                                  size_t chosen,
                                  const std::vector<std::string> &refusals);

} // namespace mlir::partc

#endif // PARTC_COMPILER_PLACEMENT_TRAININGSEARCH_H
