//===- ReplicateDataParallel.cpp - partc-replicate-data-parallel ----------===//
#include "compiler/Placement/BatchSplit.h"
#include "compiler/Utils/PassUtils.h"
#include "compiler/Passes.h"

#include "dialects/Graph/GraphOps.h"

namespace mlir::partc {
#define GEN_PASS_DEF_REPLICATEDATAPARALLEL
#include "compiler/Passes.h.inc"

namespace {
struct ReplicateDataParallelPass
    : public impl::ReplicateDataParallelBase<ReplicateDataParallelPass> {
  using ReplicateDataParallelBase::ReplicateDataParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = getMainFunction(module);
    if (failed(func))
      return signalPassFailure();
    if (replicas < 1) {
      module.emitError() << "--devices must be at least 1, got "
                         << static_cast<int64_t>(replicas);
      return signalPassFailure();
    }
    if (replicas == 1) {
      for (Operation &op : func->getBody().front())
        if (!isa<graph::ConstantOp, func::ReturnOp>(op))
          graph::setDevice(&op, 0);
    } else {
      auto replicaDevice = [](int64_t replica, Operation *) { return replica; };
      if (failed(
              splitBatch(*func, replicas, "data parallelism", replicaDevice)))
        return signalPassFailure();
    }
    setNumDevices(module, replicas);
    recordPlacement(module, "strategy", "data");
  }
};
} // namespace
} // namespace mlir::partc
