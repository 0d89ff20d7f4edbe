//===- BufferLiveness.h - When each plan buffer is live ---------*- C++ -*-===//
//
// Shared by the memory planner (partc-plan-memory) and the step memory
// report (partc-report-step-memory), so both see the same lifetimes.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_COMPILER_PLANTRANSFORMS_BUFFERLIVENESS_H
#define PARTC_COMPILER_PLANTRANSFORMS_BUFFERLIVENESS_H

#include "dialects/Plan/PlanDialect.h"

#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace mlir::partc {

/// Arena buffers are rounded up to this many bytes.
constexpr int64_t kArenaAlignment = plan::kBufferAlignment;

struct BufferInterval {
  plan::AllocOp alloc;
  /// Positions in the device's block: allocation and last use.
  int64_t begin = 0, end = 0;
  /// Bytes, rounded up to kArenaAlignment.
  int64_t size = 0;
  /// Loaded from a model input: live for the whole program.
  bool isInput = false;
};

struct DeviceLiveness {
  /// Each op's position in the device's block.
  DenseMap<Operation *, int64_t> position;
  std::vector<BufferInterval> buffers;
};

/// A buffer lives from its allocation to its last use through any view; a
/// sent buffer until its channel's wait_consumed; a model input's for the
/// whole program (partc-run --keep-inputs runs the program again on it).
DeviceLiveness analyzeBufferLiveness(plan::DeviceOp device);

} // namespace mlir::partc

#endif // PARTC_COMPILER_PLANTRANSFORMS_BUFFERLIVENESS_H
