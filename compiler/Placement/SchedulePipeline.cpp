//===- SchedulePipeline.cpp - partc-schedule-pipeline ---------------------===//
#include "compiler/Placement/BatchSplit.h"
#include "compiler/Utils/PassUtils.h"
#include "compiler/Passes.h"

#include "dialects/Graph/GraphOps.h"

namespace mlir::partc {
#define GEN_PASS_DEF_SCHEDULEPIPELINE
#include "compiler/Passes.h.inc"

namespace {
struct SchedulePipelinePass
    : public impl::SchedulePipelineBase<SchedulePipelinePass> {
  using SchedulePipelineBase::SchedulePipelineBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (schedule != "gpipe") {
      module.emitError() << "pipeline schedule '" << std::string(schedule)
                         << "' is not supported for inference; use gpipe "
                            "(1f1b only differs once backward passes exist)";
      return signalPassFailure();
    }
    auto func = getMainFunction(module);
    if (failed(func))
      return signalPassFailure();
    for (Operation &op : func->getBody().front())
      if (!isa<graph::ConstantOp, func::ReturnOp>(op) &&
          !graph::getDevice(&op)) {
        op.emitError() << "is not placed; run partc-assign-devices first";
        return signalPassFailure();
      }
    auto keepStage = [](int64_t, Operation *op) {
      return *graph::getDevice(op);
    };
    if (failed(splitBatch(*func, microBatches, "pipelining", keepStage,
                          [](int64_t slice) { return slice; })))
      return signalPassFailure();
    recordPlacement(module, "micro_batches", std::to_string(microBatches));
  }
};
} // namespace
} // namespace mlir::partc
