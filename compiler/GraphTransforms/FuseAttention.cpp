//===- FuseAttention.cpp - partc-fuse-attention ---------------------------===//
#include "compiler/Passes.h"

#include "dialects/Graph/AttentionMatch.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::partc {
#define GEN_PASS_DEF_FUSEATTENTION
#include "compiler/Passes.h.inc"

namespace {

namespace strided = ::partc::runtime::strided;

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
    const strided::View &qView = match->q, &kView = match->k, &vView = match->v;
    Value q = scores.getLhs(), k = scores.getRhs(), v = weighted.getRhs();
    Value bias = softmax.getBias();

    OpBuilder builder(weighted);
    auto fused = graph::AttentionOp::create(
        builder,
        FusedLoc::get(weighted.getContext(),
                      {scores.getLoc(), softmax.getLoc(), weighted.getLoc()}),
        weighted.getType(), q, k, v, bias,
        builder.getDenseI64ArrayAttr(qView.shape),
        builder.getDenseI64ArrayAttr(qView.strides),
        builder.getI64IntegerAttr(qView.offset),
        builder.getDenseI64ArrayAttr(kView.shape),
        builder.getDenseI64ArrayAttr(kView.strides),
        builder.getI64IntegerAttr(kView.offset),
        builder.getDenseI64ArrayAttr(vView.shape),
        builder.getDenseI64ArrayAttr(vView.strides),
        builder.getI64IntegerAttr(vView.offset), weighted.getPermAttr(),
        weighted.getShapeAttr(), scores.getAlphaAttr(),
        builder.getBoolAttr(softmax.getNanToZero()));
    int64_t queries = scoresType.getDimSize(rank - 2),
            keys = scoresType.getDimSize(rank - 1);
    // Every layer reads the same mask: it is proved once.
    if (bias) {
      auto known = causalMasks.try_emplace(bias, false);
      if (known.second)
        known.first->second = graph::masksAboveDiagonal(bias, queries, keys);
      if (known.first->second)
        fused.setCausal(true);
    }
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
