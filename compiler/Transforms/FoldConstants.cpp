//===- FoldConstants.cpp - partc-fold-constants ---------------------------===//
#include "compiler/Transforms/Passes.h"

#include "dialects/Graph/GraphOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::partc {
#define GEN_PASS_DEF_FOLDCONSTANTS
#include "compiler/Transforms/Passes.h.inc"

namespace {
struct FoldConstantsPass : public impl::FoldConstantsBase<FoldConstantsPass> {
  void runOnOperation() override {
    // The greedy driver folds every op (graph ops fold through their
    // ConstantEvaluable trait and folders) and erases dead pure ops.
    RewritePatternSet patterns(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
} // namespace mlir::partc
