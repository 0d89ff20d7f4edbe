//===- TestPrintCost.cpp - partc-test-print-cost --------------------------===//
#include "compiler/Passes.h"

#include "compiler/CostModel/OpCost.h"
#include "compiler/CostModel/Topology.h"
#include "dialects/Graph/GraphOps.h"

#include <cstdio>

namespace mlir::partc {
#define GEN_PASS_DEF_TESTPRINTCOST
#include "compiler/Passes.h.inc"

namespace {
struct TestPrintCostPass : public impl::TestPrintCostBase<TestPrintCostPass> {
  using TestPrintCostBase::TestPrintCostBase;

  void runOnOperation() override {
    auto h200 = ::partc::costmodel::Topology::fromShorthand("h200");
    if (!h200) {
      llvm::consumeError(h200.takeError());
      return signalPassFailure();
    }
    getOperation().walk([&](graph::CostOpInterface op) {
      ::partc::costmodel::OpWork work =
          ::partc::costmodel::analyzeOp(op, /*batched=*/false, fusedAttention);
      double seconds = ::partc::costmodel::predictSeconds(
          work, 1.0, h200->devices.front(), /*tf32=*/true, nullptr);
      // charged_flops: what the prediction counts (a fused attention's
      // last product counts both products). utilization: of the matrix
      // rate for matrix work, else of the vector rate.
      char figures[96];
      std::snprintf(figures, sizeof(figures),
                    "utilization=%.3f h200_us=%.2f charged_flops=%.0f",
                    work.cls == ::partc::costmodel::OpClass::Matrix
                        ? work.matrixUtilization
                        : work.vectorUtilization,
                    seconds * 1e6, work.flops);
      op->emitRemark() << "flops=" << op.estimateFlops()
                       << " bytes=" << op.estimateBytes() << " " << figures;
    });
  }
};
} // namespace
} // namespace mlir::partc
