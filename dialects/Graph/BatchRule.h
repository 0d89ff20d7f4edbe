//===- BatchRule.h - Where a value carries the batch ------------*- C++ -*-===//
//
// Data parallelism and micro-batches clone a graph once per slice of the
// batch, so every op must keep samples apart. Each op says how through
// BatchRuleOpInterface (GraphInterfaces.td), implemented beside the op's
// other rules; element-wise ops follow one broadcast rule, and ops without
// the interface must see the batch in dimension 0 (sampleWiseBatch).
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_DIALECTS_GRAPH_BATCHRULE_H
#define PARTC_DIALECTS_GRAPH_BATCHRULE_H

#include "mlir/IR/Operation.h"

#include <optional>
#include <string>

namespace mlir::partc::graph {

/// Where a value carries the batch: along dimension `axis`, whose index is
/// (x * batch + n) * inner + j for sample n. Inputs have {0, 1, 1}; PyTorch's
/// attention, for one, moves the batch to dimension 1 ({1, 1, 1}) and merges
/// it with the heads ({0, 1, heads}) or with the sequence ({0, length, 1}).
struct BatchLoc {
  int64_t axis = 0, outer = 1, inner = 1;
  bool isLeading() const { return axis == 0 && outer == 1 && inner == 1; }
  bool operator==(const BatchLoc &o) const {
    return axis == o.axis && outer == o.outer && inner == o.inner;
  }
  bool operator!=(const BatchLoc &o) const { return !(*this == o); }
};

using OperandBatch = ArrayRef<std::optional<BatchLoc>>;

/// Where the result of `op`, whose operands broadcast numpy-style
/// (right-aligned), carries the batch: batched operands must agree, and
/// shared ones have extent 1 (or no dimension) where the batch lies. The
/// rule of every element-wise op.
std::optional<BatchLoc> alignBroadcast(Operation *op, OperandBatch locs,
                                       std::string &why);

/// The rule of ops that see the batch only in dimension 0 (convolutions,
/// pooling, normalizations by channel): every batched operand and every
/// result carries it there, and `sampleWise` (if given) accepts which
/// operands are batched, else every unbatched operand broadcasts along
/// dimension 0.
std::optional<BatchLoc> sampleWiseBatch(
    Operation *op, OperandBatch locs, int64_t batch, std::string &why,
    llvm::function_ref<bool(ArrayRef<bool> batched)> sampleWise = nullptr);

/// The rule of `op`: its BatchRuleOpInterface, the broadcast rule of
/// element-wise ops, or sampleWiseBatch.
std::optional<BatchLoc> followBatch(Operation *op, OperandBatch locs,
                                    int64_t batch, std::string &why);

/// Rewrites the attributes of `slice`, a clone of `op` for `size` of the
/// `batch` samples, that name the batch's extent.
void sliceBatchAttrs(Operation *op, Operation *slice, int64_t batch,
                     int64_t size, OperandBatch operandLocs,
                     std::optional<BatchLoc> resultLoc);

} // namespace mlir::partc::graph

#endif // PARTC_DIALECTS_GRAPH_BATCHRULE_H
