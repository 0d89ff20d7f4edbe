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
          !isa<graph::ConvOp, graph::GemmOp, graph::MatMulOp, graph::AddOp>(
              producer))
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
      if (!fuseMatMulBias(add))
        fuseResidual(add);
  }

  /// add(matmul(x, w), b) -> matmul(x, w, bias = b) for a b that holds one
  /// value per column, keeping the add's activation.
  static bool fuseMatMulBias(graph::AddOp add) {
    for (unsigned k = 0; k < 2; ++k) {
      auto matmul = add->getOperand(k).getDefiningOp<graph::MatMulOp>();
      Value bias = add->getOperand(1 - k);
      if (!matmul || !matmul->getResult(0).hasOneUse() ||
          matmul.getActivation() || matmul.getBias() ||
          add.getType() != matmul.getType() ||
          graph::getDevice(matmul) != graph::getDevice(add))
        continue;
      auto result = cast<RankedTensorType>(matmul.getType());
      auto biasType = cast<RankedTensorType>(bias.getType());
      ArrayRef<int64_t> shape = biasType.getShape();
      // A vector right operand has no columns to add a bias to.
      if (cast<RankedTensorType>(matmul.getRhs().getType()).getRank() < 2 ||
          result.getRank() == 0 || shape.empty() ||
          shape.back() != result.getShape().back() ||
          llvm::any_of(shape.drop_back(), [](int64_t d) { return d != 1; }))
        continue;
      // The bias may be computed after the matmul: run the matmul at the add.
      matmul->moveBefore(add);
      matmul.getBiasMutable().assign(bias);
      if (auto activation = add.getActivationAttr())
        matmul.setActivationAttr(activation);
      matmul->setLoc(FusedLoc::get(matmul->getContext(),
                                   {matmul->getLoc(), add.getLoc()}));
      add.getResult().replaceAllUsesWith(matmul.getResult());
      add.erase();
      return true;
    }
    return false;
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
