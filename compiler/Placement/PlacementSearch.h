//===- PlacementSearch.h - Choose stages x replicas x micro-batches ---*- C++
//-*-===//
#ifndef PARTC_COMPILER_PLACEMENT_PLACEMENTSEARCH_H
#define PARTC_COMPILER_PLACEMENT_PLACEMENTSEARCH_H

#include "compiler/CostModel/OpCost.h"
#include "compiler/CostModel/Topology.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace mlir::partc {

struct SearchOptions {
  ::partc::costmodel::Topology topology;
  /// "throughput" or "latency".
  std::string objective = "throughput";
  const ::partc::costmodel::CostTable *costTable = nullptr;
  /// Constraints (0: searched): stages, replicas, micro-batches.
  int64_t stages = 0, replicas = 0, microBatches = 0;
  /// Attention is fused after placement (inference): predict the kernel.
  bool fusedAttention = false;
};

struct StageReport {
  size_t firstOp = 0, endOp = 0;
  double seconds = 0, memoryBytes = 0, weightBytes = 0;
  double receivedBytes = 0, sentBytes = 0; // per step
};

struct Candidate {
  int64_t stages = 1, replicas = 1, microBatches = 1;
  bool feasible = false;
  std::string whyNot;
  std::vector<size_t> cuts;
  std::vector<StageReport> stageReports;
  /// Stage k of replica r runs on devices[r * stages + k]: replicas are
  /// chains of devices over the topology's fastest links.
  std::vector<size_t> devices;
  /// Replicas on unlike devices: the images each replica takes (faster
  /// devices more) and its predicted seconds. Empty: equal slices.
  std::vector<int64_t> slices;
  std::vector<double> replicaSeconds, replicaMemoryBytes;
  /// Hybrids with unequal slices: each replica's stages' seconds and
  /// memory (replicas' pipelines differ in speed).
  std::vector<std::vector<double>> replicaStageSeconds, replicaStageMemoryBytes;
  int64_t device(int64_t replica, int64_t stage) const {
    size_t slot = static_cast<size_t>(replica * stages + stage);
    return slot < devices.size() ? static_cast<int64_t>(devices[slot])
                                 : static_cast<int64_t>(slot);
  }
  /// stepSeconds: one batch from first input to last output (latency);
  /// periodSeconds: time per batch when batches stream through the stages
  /// (the slowest stage's micro-batches); throughput is batch / period.
  double slowestSeconds = 0, stepSeconds = 0, periodSeconds = 0, throughput = 0,
         bubble = 0;
  std::string label() const;
};

/// One op kind of a calibrated search (a cost table given): the roofline
/// against the table's measurement, over the kernels the table holds.
struct OpKindCalibration {
  std::string op;
  int64_t kernels = 0, measured = 0;
  double rooflineSeconds = 0, measuredSeconds = 0;
};

struct SearchResult {
  Candidate best;
  /// With a cost table: each op kind's roofline against its measurement,
  /// largest difference first.
  std::vector<OpKindCalibration> calibration;
  std::vector<Candidate> candidates; // best first
  int64_t batch = 1;
  size_t ops = 0;
  std::string topology, objective;
  double searchSeconds = 0;
};

/// Searches every S stages x R replicas x M micro-batches plan that fits the
/// topology and returns them ranked by predicted throughput (or latency).
/// Fails with an error naming the heaviest stage when nothing fits.
FailureOr<SearchResult> searchPlacement(func::FuncOp func,
                                        const SearchOptions &options);

/// Places the graph as `plan` says: stage assignment, then one clone per
/// replica and micro-batch.
LogicalResult applyPlacement(ModuleOp module, func::FuncOp func,
                             const Candidate &plan);

/// Live ranges of op results in op order (returns do not count: outputs are
/// stored from where they are produced).
struct Liveness {
  std::vector<double> cutBytes;  // [n + 1]: live across the cut before op i
  std::vector<double> liveBytes; // [n]
  std::vector<std::pair<size_t, size_t>> ranges; // per value: producer, last
  std::vector<double> sizes;
};
Liveness analyzeLiveness(ArrayRef<Operation *> ops);

/// GiB, or MiB below one GiB and KiB below one MiB (so that small models'
/// messages say something).
std::string gib(double bytes);

std::string explainText(const SearchResult &result);
std::string explainJson(const SearchResult &result);

} // namespace mlir::partc

#endif // PARTC_COMPILER_PLACEMENT_PLACEMENTSEARCH_H
