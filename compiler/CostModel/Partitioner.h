//===- Partitioner.h - Optimal contiguous pipeline stages -------*- C++ -*-===//
//
// The algorithmic core of pipeline stage assignment, free of MLIR so that it
// can be property-tested against brute force. Ops are in a topological order;
// a stage is a contiguous range of them; the time of stage [j, i) is the sum
// of its ops' times plus the time to receive every tensor live across cut j
// (which charges residual and branch edges that skip over stages), or, with
// transfers overlapped, the larger of the two. A stage must fit its
// device's memory.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_COMPILER_COSTMODEL_PARTITIONER_H
#define PARTC_COMPILER_COSTMODEL_PARTITIONER_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace partc::costmodel {
using std::size_t;

struct ChainProblem {
  /// Seconds of each op for one micro-batch.
  std::vector<double> opSeconds;
  /// Bytes of weights each op reads (counted in the stage that runs it).
  std::vector<double> opWeightBytes;
  /// Bytes of activations live just after each op (for the memory bound).
  std::vector<double> liveBytes;
  /// Bytes live across the cut before op i, for i in [0, n]: produced by
  /// ops before i and used at or after i. cutBytes[0] is the model input.
  std::vector<double> cutBytes;
  /// Receiving a tensor across a cut: bytes / linkBytesPerSecond + latency.
  double linkBytesPerSecond = 1e11;
  double linkLatencySeconds = 0;
  /// When batches stream through the stages, a transfer runs on a copy
  /// engine while the stages compute: a stage then costs the larger of its
  /// compute and what it receives, and its compute includes the memory
  /// traffic the peer copies add beside its kernels, at
  /// localBytesPerSecond: what it sends is read once and what it receives
  /// written once (the runtime's kernels write and read the copied buffers
  /// themselves). Otherwise a stage receives, then computes.
  bool overlapTransfers = false;
  double localBytesPerSecond = 1e12;
  /// Memory of each device; a stage's weights + in-flight activations must
  /// fit. Activations count `inFlight` times (micro-batches held at once).
  double memoryBytes = 1e30;
  double inFlight = 1;
  /// Mixed machines: stage k runs on one device of each class c in
  /// stageClasses[k] (one per replica of the pipeline, which share its
  /// cuts), whose ops take classOpSeconds[c][i] and whose memory is
  /// classMemoryBytes[c]; it costs what the slowest of them takes and must
  /// fit the smallest. Stages past the end of stageClasses (all of them
  /// when it is empty) run on devices like opSeconds and memoryBytes.
  std::vector<std::vector<size_t>> stageClasses;
  std::vector<std::vector<double>> classOpSeconds;
  std::vector<double> classMemoryBytes;
};

struct StageCut {
  /// Start op of each stage after the first.
  std::vector<size_t> cuts;
  /// Predicted seconds of each stage, and the largest.
  std::vector<double> stageSeconds;
  double slowest = 0;
  bool feasible = false;
};

/// Time of stage [begin, end) (its ops plus what it receives at `begin`)
/// when it is the `stage`-th stage (which picks its device's class).
double stageSeconds(const ChainProblem &p, size_t begin, size_t end,
                    size_t stage = 0);
/// Memory of stage [begin, end), and what the `stage`-th device holds.
double stageMemory(const ChainProblem &p, size_t begin, size_t end);
double stageCapacity(const ChainProblem &p, size_t stage);

/// For every stage count 1..maxStages, the partition minimizing the slowest
/// stage subject to memory (exact dynamic programming, O(maxStages * n^2)).
std::vector<StageCut> solveChain(const ChainProblem &p, size_t maxStages);

/// Reference: every placement of `stages - 1` cuts (for tests).
StageCut bruteForceChain(const ChainProblem &p, size_t stages);

} // namespace partc::costmodel

#endif // PARTC_COMPILER_COSTMODEL_PARTITIONER_H
