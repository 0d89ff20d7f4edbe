//===- FuseActivations.cpp - partc-fuse-activations -----------------------===//
#include "compiler/Transforms/Passes.h"

#include "dialects/Graph/GraphOps.h"

namespace mlir::partc {
#define GEN_PASS_DEF_FUSEACTIVATIONS
#include "compiler/Transforms/Passes.h.inc"

namespace {
struct FuseActivationsPass
    : public impl::FuseActivationsBase<FuseActivationsPass> {
  void runOnOperation() override {
    SmallVector<graph::ReluOp> relus;
    getOperation().walk([&](graph::ReluOp relu) { relus.push_back(relu); });
    for (graph::ReluOp relu : relus) {
      Operation *producer = relu.getInput().getDefiningOp();
      if (!producer ||
          !isa<graph::ConvOp, graph::GemmOp, graph::AddOp>(producer))
        continue;
      // The producer's other users must keep seeing the value before ReLU,
      // and the pair must run on one device.
      if (!producer->getResult(0).hasOneUse() ||
          producer->hasAttr("activation") ||
          graph::getDevice(producer) != graph::getDevice(relu) ||
          producer->getResult(0).getType() != relu.getType())
        continue;
      producer->setAttr("activation",
                        StringAttr::get(producer->getContext(), "relu"));
      // Keep the ReLU's node name visible in diagnostics of the fused op.
      producer->setLoc(FusedLoc::get(producer->getContext(),
                                     {producer->getLoc(), relu.getLoc()}));
      relu.getResult().replaceAllUsesWith(producer->getResult(0));
      relu.erase();
    }
  }
};
} // namespace
} // namespace mlir::partc
