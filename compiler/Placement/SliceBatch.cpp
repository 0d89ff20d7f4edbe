//===- SliceBatch.cpp - partc-slice-batch ---------------------------------===//
#include "compiler/Passes.h"
#include "compiler/Placement/BatchSplit.h"
#include "compiler/Utils/PassUtils.h"

namespace mlir::partc {
#define GEN_PASS_DEF_SLICEBATCH
#include "compiler/Passes.h.inc"

namespace {
struct SliceBatchPass : public impl::SliceBatchBase<SliceBatchPass> {
  using SliceBatchBase::SliceBatchBase;

  void runOnOperation() override {
    auto func = getMainFunction(getOperation());
    if (failed(func))
      return signalPassFailure();
    if (parts < 1) {
      getOperation().emitError()
          << "partc-slice-batch: parts must be at least 1, got "
          << static_cast<int64_t>(parts);
      return signalPassFailure();
    }
    // Replicas and micro-batches (accumulation, pipelines) alike.
    if (failed(shrinkBatch(*func, parts,
                           "training on slices of the batch (replicas x "
                           "micro-batches)")))
      signalPassFailure();
  }
};
} // namespace
} // namespace mlir::partc
