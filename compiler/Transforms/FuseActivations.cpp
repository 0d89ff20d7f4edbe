//===- FuseActivations.cpp - partc-fuse-activations -----------------------===//
#include "compiler/Transforms/Passes.h"

#include "dialects/Graph/GraphOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

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
    SmallVector<graph::AddOp> adds;
    getOperation().walk([&](graph::AddOp add) { adds.push_back(add); });
    for (graph::AddOp add : adds)
      fuseResidual(add);
  }

  /// add(conv(x), z) -> conv(x, addend = z), keeping the add's activation.
  static void fuseResidual(graph::AddOp add) {
    for (unsigned k = 0; k < 2; ++k) {
      auto conv = add->getOperand(k).getDefiningOp<graph::ConvOp>();
      Value other = add->getOperand(1 - k);
      if (!conv || !conv->getResult(0).hasOneUse() || conv.getActivation() ||
          conv.getAddend() || other.getType() != conv.getType() ||
          add.getType() != conv.getType() ||
          graph::getDevice(conv) != graph::getDevice(add))
        continue;
      OpBuilder builder(conv);
      if (!conv.getBias()) {
        // The epilogue takes the addend after a bias: give it a zero one.
        auto type = cast<RankedTensorType>(conv.getType());
        int64_t channels = conv.getChannelsLast() ? type.getShape().back()
                                                  : type.getDimSize(1);
        auto biasType =
            RankedTensorType::get({channels}, type.getElementType());
        auto zero = graph::ConstantOp::create(
            builder, conv.getLoc(), biasType,
            DenseElementsAttr::get(biasType,
                                   builder.getZeroAttr(type.getElementType())));
        conv.getEpilogueMutable().append(zero.getResult());
      }
      // The addend may be computed after the conv: run the conv at the add.
      conv->moveBefore(add);
      conv.getEpilogueMutable().append(other);
      if (auto activation = add.getActivationAttr())
        conv.setActivationAttr(activation);
      conv->setLoc(
          FusedLoc::get(conv->getContext(), {conv->getLoc(), add.getLoc()}));
      add.getResult().replaceAllUsesWith(conv.getResult());
      add.erase();
      return;
    }
  }
};
} // namespace
} // namespace mlir::partc
