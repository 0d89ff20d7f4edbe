//===- TestPrintCost.cpp - partc-test-print-cost --------------------------===//
#include "compiler/Transforms/Passes.h"

#include "dialects/Graph/GraphOps.h"

namespace mlir::partc {
#define GEN_PASS_DEF_TESTPRINTCOST
#include "compiler/Transforms/Passes.h.inc"

namespace {
struct TestPrintCostPass : public impl::TestPrintCostBase<TestPrintCostPass> {
  void runOnOperation() override {
    getOperation().walk([](graph::CostOpInterface op) {
      op->emitRemark() << "flops=" << op.estimateFlops()
                       << " bytes=" << op.estimateBytes();
    });
  }
};
} // namespace
} // namespace mlir::partc
