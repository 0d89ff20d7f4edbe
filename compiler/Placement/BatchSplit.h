//===- BatchSplit.h - Clone a graph per batch slice -------------*- C++ -*-===//
#ifndef PARTC_COMPILER_PLACEMENT_BATCHSPLIT_H
#define PARTC_COMPILER_PLACEMENT_BATCHSPLIT_H

#include "dialects/Graph/BatchRule.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>
#include <optional>

namespace mlir::partc {

/// Splits dimension 0 of the batched inputs of `func` into `parts` slices
/// and clones every op once per slice, in slice-major order. `deviceOf`
/// gives the device of the clone of `op` for a slice. Slices of inputs and
/// concatenations of outputs are host ops (device -1). Ops that mix samples
/// of the batch (reducing or reshaping across dimension 0) are reported.
/// Slices are equal (the first ones one larger where the batch does not
/// divide) unless `sliceSizes` gives each one's size.
LogicalResult
splitBatch(func::FuncOp func, int64_t parts, StringRef purpose,
           std::function<int64_t(int64_t slice, Operation *op)> deviceOf,
           std::function<int64_t(int64_t slice)> microBatchOf = nullptr,
           ArrayRef<int64_t> sliceSizes = {});

/// Makes `func` compute the first of `parts` equal slices of its batch in
/// place: its batched inputs, every op and its results take batch / parts
/// samples. Each batched input is marked with GraphDialect's
/// kBatchSliceAttrName (= `parts`). Refuses, naming the op, graphs that mix
/// samples, and batches that `parts` does not divide.
LogicalResult shrinkBatch(func::FuncOp func, int64_t parts, StringRef purpose);

using graph::BatchLoc;

/// The batch size of `func` (dimension 0 of its first ranked input) and
/// whether every op keeps samples apart; on failure `why` names the op.
/// `batchedOps` receives the ops whose results carry the batch dimension.
struct BatchInfo {
  int64_t batch = -1;
  bool splittable = false;
  std::string why;
  /// The first op that mixes samples, and why, when not splittable.
  Operation *failedOp = nullptr;
  std::string reason;
  DenseSet<Operation *> batchedOps;
  /// Where each batched value carries the batch; other values are shared.
  DenseMap<Value, BatchLoc> locations;
  /// Constants that span the batch with equal rows, batched where an op
  /// needs them to be (each slice gets its leading rows).
  SmallVector<Value> uniformConstants;
  std::optional<BatchLoc> locationOf(Value v) const {
    auto it = locations.find(v);
    return it == locations.end() ? std::nullopt : std::optional(it->second);
  }
};
BatchInfo analyzeBatch(func::FuncOp func);

} // namespace mlir::partc

#endif // PARTC_COMPILER_PLACEMENT_BATCHSPLIT_H
