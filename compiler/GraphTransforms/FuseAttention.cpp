//===- FuseAttention.cpp - partc-fuse-attention ---------------------------===//
#include "compiler/Passes.h"

#include "dialects/Graph/GraphOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"
#include "runtime/kernels/StridedMatMul.h"

namespace mlir::partc {
#define GEN_PASS_DEF_FUSEATTENTION
#include "compiler/Passes.h.inc"

namespace {

namespace strided = ::partc::runtime::strided;

strided::View lhsView(graph::StridedMatMulOp op) {
  return {{op.getLhsShape().begin(), op.getLhsShape().end()},
          {op.getLhsStrides().begin(), op.getLhsStrides().end()},
          static_cast<int64_t>(op.getLhsOffset())};
}
strided::View rhsView(graph::StridedMatMulOp op) {
  return {{op.getRhsShape().begin(), op.getRhsShape().end()},
          {op.getRhsStrides().begin(), op.getRhsStrides().end()},
          static_cast<int64_t>(op.getRhsOffset())};
}

/// The element types the GPU kernels take.
bool hasKernelElementType(Value v) {
  Type t = cast<RankedTensorType>(v.getType()).getElementType();
  return t.isF32() || t.isBF16() || t.isF16();
}

/// The last two extents of `v`'s type, or none below rank 2.
std::optional<std::pair<int64_t, int64_t>> lastTwo(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() < 2)
    return std::nullopt;
  return std::make_pair(type.getDimSize(type.getRank() - 2),
                        type.getDimSize(type.getRank() - 1));
}

/// Follows reshapes, expands and casts that keep the last two extents (each
/// [M, N] slice stays a slice).
Value throughSliceViews(Value v) {
  while (Operation *op = v.getDefiningOp()) {
    if (!isa<graph::ReshapeOp, graph::ExpandOp, graph::CastOp>(op) ||
        lastTwo(op->getOperand(0)) != lastTwo(v))
      break;
    v = op->getOperand(0);
  }
  return v;
}

/// Whether the boolean `condition`, broadcast to [..., M, N], is false
/// wherever the column exceeds the row: a constant lower triangle of
/// exactly [M, N] slices, or the `and` of one with anything (a decoder's
/// causal mask and a padding mask).
bool falseAboveDiagonal(Value condition, std::pair<int64_t, int64_t> extents) {
  condition = throughSliceViews(condition);
  if (auto both = condition.getDefiningOp<graph::AndOp>())
    return falseAboveDiagonal(both.getLhs(), extents) ||
           falseAboveDiagonal(both.getRhs(), extents);
  auto constant = condition.getDefiningOp<graph::ConstantOp>();
  if (!constant || lastTwo(condition) != extents)
    return false;
  auto values = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!values || !values.getElementType().isInteger(1))
    return false;
  auto [rows, cols] = extents;
  int64_t index = 0;
  for (bool value : values.getValues<bool>()) {
    int64_t col = index % cols, row = (index / cols) % rows;
    ++index;
    if (value && col > row)
      return false;
  }
  return true;
}

/// Whether an attention's additive mask `bias`, broadcast to scores
/// [batch..., M, N], is -inf wherever the key's index exceeds the query's:
/// where(c, x, -inf) with `c` false there.
bool masksAboveDiagonal(Value bias, int64_t queries, int64_t keys) {
  if (!bias || lastTwo(bias) != std::make_pair(queries, keys))
    return false;
  bias = throughSliceViews(bias);
  // A mask folded to a constant: -inf above the diagonal of every slice.
  if (auto constant = bias.getDefiningOp<graph::ConstantOp>()) {
    auto values = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!values || !isa<FloatType>(values.getElementType()))
      return false;
    int64_t index = 0;
    for (APFloat value : values.getValues<APFloat>()) {
      int64_t col = index % keys, row = (index / keys) % queries;
      ++index;
      if (col > row && !(value.isInfinity() && value.isNegative()))
        return false;
    }
    return true;
  }
  auto select = bias.getDefiningOp<graph::WhereOp>();
  if (!select)
    return false;
  auto fill = select.getOperand(2).getDefiningOp<graph::ConstantOp>();
  auto values =
      fill ? dyn_cast<DenseElementsAttr>(fill.getValue()) : DenseElementsAttr();
  if (!values || !values.isSplat() || !isa<FloatType>(values.getElementType()))
    return false;
  APFloat filled = values.getSplatValue<APFloat>();
  return filled.isInfinity() && filled.isNegative() &&
         falseAboveDiagonal(select.getOperand(0), {queries, keys});
}

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
    auto softmax = weighted.getLhs().getDefiningOp<graph::SoftmaxOp>();
    if (!softmax || !softmax->hasOneUse())
      return;
    auto scores = softmax.getInput().getDefiningOp<graph::StridedMatMulOp>();
    if (!scores || !scores->hasOneUse())
      return;
    auto scoresType = cast<RankedTensorType>(scores.getType());
    int64_t rank = scoresType.getRank();
    std::optional<int64_t> device = graph::getDevice(weighted);
    if (graph::getDevice(softmax) != device ||
        graph::getDevice(scores) != device ||
        static_cast<int64_t>(softmax.getAxis()) != rank - 1)
      return;
    // The scores are stored as computed, and read back whole and unscaled.
    strided::View probabilities = lhsView(weighted);
    strided::View expected = strided::contiguous(
        {scoresType.getShape().begin(), scoresType.getShape().end()});
    if (probabilities.shape != expected.shape ||
        probabilities.strides != expected.strides || probabilities.offset ||
        weighted.getAlpha().convertToDouble() != 1.0)
      return;
    // The stored scores are the logical ones [batch..., M, N], unpermuted.
    strided::View qView = lhsView(scores), kView = rhsView(scores),
                  vView = rhsView(weighted);
    for (int64_t d = 0; d < rank; ++d) {
      int64_t logical = d == rank - 2 ? qView.shape[d]
                        : d == rank - 1
                            ? kView.shape[d]
                            : std::max(qView.shape[d], kView.shape[d]);
      if (static_cast<int64_t>(qView.shape.size()) != rank ||
          scoresType.getDimSize(d) != logical)
        return;
    }
    for (auto [i, p] : llvm::enumerate(scores.getPerm()))
      if (p != static_cast<int64_t>(i))
        return;
    Value q = scores.getLhs(), k = scores.getRhs(), v = weighted.getRhs();
    Value bias = softmax.getBias();
    Type element = getElementTypeOrSelf(weighted.getType());
    for (Value operand : {q, k, v, bias})
      if (operand && getElementTypeOrSelf(operand.getType()) != element)
        return;
    if (!hasKernelElementType(weighted.getResult()))
      return;
    std::vector<int64_t> perm(weighted.getPerm().begin(),
                              weighted.getPerm().end());
    if (!strided::attentionKernelFits(qView, kView, vView, perm))
      return;

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
        known.first->second = masksAboveDiagonal(bias, queries, keys);
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
