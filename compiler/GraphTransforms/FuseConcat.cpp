//===- FuseConcat.cpp - partc-fuse-concat ---------------------------------===//
#include "compiler/Passes.h"

#include "dialects/Graph/GraphOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::partc {
#define GEN_PASS_DEF_FUSECONCAT
#include "compiler/Passes.h.inc"

namespace {

struct FuseConcatPass : public impl::FuseConcatBase<FuseConcatPass> {
  void runOnOperation() override {
    SmallVector<graph::ConcatOp> concats;
    getOperation().walk([&](graph::ConcatOp op) { concats.push_back(op); });
    for (graph::ConcatOp concat : concats)
      fuse(concat);
  }

  /// Moves `concat` into the chain that alone reads it, if it can.
  static void fuse(graph::ConcatOp concat) {
    graph::FusedElementwiseOp chain = graph::concatReader(concat);
    if (!chain)
      return;
    int64_t parts = static_cast<int64_t>(concat.getInputs().size());

    SmallVector<Value> operands;
    SmallVector<int64_t> args;
    graph::concatPartsOperands(concat, chain, operands, args);

    OpBuilder builder(chain);
    auto merged = graph::FusedElementwiseOp::create(
        builder,
        FusedLoc::get(chain.getContext(), {concat.getLoc(), chain.getLoc()}),
        chain.getType(), operands, chain.getStepsAttr(),
        builder.getDenseI64ArrayAttr(args), chain.getParamsAttr(),
        builder.getI64IntegerAttr(parts));
    // Placement's attributes (device, micro-batch) are the chain's.
    for (NamedAttribute a : chain->getDiscardableAttrs())
      merged->setAttr(a.getName(), a.getValue());
    chain.getResult().replaceAllUsesWith(merged.getResult());
    chain.erase();
    concat.erase();
  }
};

} // namespace
} // namespace mlir::partc
