//===- FuseDropout.cpp - partc-fuse-dropout -------------------------------===//
#include "compiler/Passes.h"

#include "dialects/Graph/GraphOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::partc {
#define GEN_PASS_DEF_FUSEDROPOUT
#include "compiler/Passes.h.inc"

namespace {

struct FuseDropoutPass : public impl::FuseDropoutBase<FuseDropoutPass> {
  void runOnOperation() override {
    SmallVector<graph::SoftmaxGradOp> gradients;
    getOperation().walk(
        [&](graph::SoftmaxGradOp op) { gradients.push_back(op); });
    for (graph::SoftmaxGradOp gradient : gradients)
      fuse(gradient);
  }

  /// Folds the dropout that alone feeds `gradient`'s gradient operand.
  static void fuse(graph::SoftmaxGradOp gradient) {
    if (gradient.getDropoutRatioAttr())
      return;
    auto dropout = gradient.getGrad().getDefiningOp<graph::DropoutOp>();
    if (!dropout || !dropout->hasOneUse() ||
        dropout.getInput().getType() != gradient.getOutput().getType())
      return;
    // A dropout on another device or stage stays where placement put it.
    if (dropout->getDiscardableAttrDictionary() !=
        gradient->getDiscardableAttrDictionary())
      return;
    OpBuilder builder(gradient);
    auto fused = graph::SoftmaxGradOp::create(
        builder,
        FusedLoc::get(gradient.getContext(),
                      {dropout.getLoc(), gradient.getLoc()}),
        dropout.getInput(), gradient.getOutput(),
        ValueRange{dropout.getStep(), dropout.getSeed()},
        gradient.getAxisAttr(), dropout.getRatioAttr(), dropout.getStreamAttr(),
        dropout.getOffsetAttr());
    for (NamedAttribute a : gradient->getDiscardableAttrs())
      fused->setAttr(a.getName(), a.getValue());
    gradient.getResult().replaceAllUsesWith(fused.getResult());
    gradient.erase();
    dropout.erase();
  }
};

} // namespace
} // namespace mlir::partc
