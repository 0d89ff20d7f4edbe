//===- FuseAttention.cpp - partc-fuse-attention ---------------------------===//
#include "compiler/Passes.h"

#include "dialects/Graph/AttentionMatch.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::partc {
#define GEN_PASS_DEF_FUSEATTENTION
#include "compiler/Passes.h.inc"

namespace {

struct FuseAttentionPass : public impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    SmallVector<graph::StridedMatMulOp> products;
    getOperation().walk(
        [&](graph::StridedMatMulOp op) { products.push_back(op); });
    DenseMap<Value, bool> causalMasks;
    for (graph::StridedMatMulOp weighted : products)
      fuse(weighted, causalMasks);
  }

  /// Fuses the attention whose last product is `weighted` (scores x
  /// values), if it is one.
  static void fuse(graph::StridedMatMulOp weighted,
                   DenseMap<Value, bool> &causalMasks) {
    std::optional<graph::AttentionMatch> match =
        graph::matchAttention(weighted);
    if (!match)
      return;
    graph::StridedMatMulOp scores = match->scores;
    graph::SoftmaxOp softmax = match->softmax;
    std::optional<int64_t> device = graph::getDevice(weighted);
    if (graph::getDevice(softmax) != device ||
        graph::getDevice(scores) != device)
      return;
    auto scoresType = cast<RankedTensorType>(scores.getType());
    int64_t rank = scoresType.getRank();
    Value bias = softmax.getBias();
    // Every layer reads the same mask: it is proved once.
    bool causal = false;
    if (bias) {
      auto known = causalMasks.try_emplace(bias, false);
      if (known.second)
        known.first->second =
            graph::masksAboveDiagonal(bias, scoresType.getDimSize(rank - 2),
                                      scoresType.getDimSize(rank - 1));
      causal = known.first->second;
    }
    SmallVector<Value> operands = {scores.getLhs(), scores.getRhs(),
                                   weighted.getRhs()};
    if (bias)
      operands.push_back(bias);
    OpBuilder builder(weighted);
    auto fused = graph::AttentionOp::create(
        builder,
        FusedLoc::get(weighted.getContext(),
                      {scores.getLoc(), softmax.getLoc(), weighted.getLoc()}),
        TypeRange{weighted.getType()}, operands,
        graph::fusedAttentionAttributes(*match, causal).getValue());
    // Placement's attributes (device, micro-batch) are the last op's.
    for (NamedAttribute a : weighted->getDiscardableAttrs())
      fused->setAttr(a.getName(), a.getValue());
    weighted.getResult().replaceAllUsesWith(fused.getResult());
    weighted.erase();
    softmax.erase();
    scores.erase();
  }
};

} // namespace
} // namespace mlir::partc
