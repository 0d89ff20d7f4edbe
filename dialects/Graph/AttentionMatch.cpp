//===- AttentionMatch.cpp - Attention as partc-fuse-attention fuses it ----===//
#include "dialects/Graph/AttentionMatch.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"
#include "runtime/Support.h"

namespace mlir::partc::graph {

namespace {

namespace strided = ::partc::runtime::strided;

strided::View lhsView(StridedMatMulOp op) {
  return {{op.getLhsShape().begin(), op.getLhsShape().end()},
          {op.getLhsStrides().begin(), op.getLhsStrides().end()},
          static_cast<int64_t>(op.getLhsOffset())};
}
strided::View rhsView(StridedMatMulOp op) {
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
    if (!isa<ReshapeOp, ExpandOp, CastOp>(op) ||
        lastTwo(op->getOperand(0)) != lastTwo(v))
      break;
    v = op->getOperand(0);
  }
  return v;
}

/// The elements of `v` where a graph.constant of booleans (or of floats)
/// defines it, else null.
DenseElementsAttr constantElements(Value v, bool floats) {
  auto constant = v.getDefiningOp<ConstantOp>();
  auto values = constant ? dyn_cast<DenseElementsAttr>(constant.getValue())
                         : DenseElementsAttr();
  if (!values || (floats ? !isa<FloatType>(values.getElementType())
                         : !values.getElementType().isInteger(1)))
    return DenseElementsAttr();
  return values;
}

bool isMinusInf(const APFloat &value) {
  return value.isInfinity() && value.isNegative();
}

/// Whether `holds(value, row, column)` is true of every element of
/// `values` read as [..., rows, cols] slices (stopping at the first that
/// is not). `holds` depends on the position only through whether the
/// column exceeds the row, so a splat, which may stand for more elements
/// than could be walked, is checked at one position of each kind.
template <typename T, typename Holds>
bool everySliceElement(DenseElementsAttr values,
                       std::pair<int64_t, int64_t> extents, Holds holds) {
  auto [rows, cols] = extents;
  if (values.empty())
    return true;
  if (values.isSplat()) {
    T value = values.getSplatValue<T>();
    return holds(value, 0, 0) && (cols <= 1 || holds(value, 0, 1));
  }
  int64_t index = 0;
  for (T value : values.getValues<T>()) {
    int64_t col = index % cols, row = (index / cols) % rows;
    ++index;
    if (!holds(value, row, col))
      return false;
  }
  return true;
}

/// Whether the boolean `condition`, broadcast to [..., M, N], is false
/// wherever the column exceeds the row: a constant lower triangle of
/// exactly [M, N] slices, or the `and` of one with anything (a decoder's
/// causal mask and a padding mask).
bool falseAboveDiagonal(Value condition, std::pair<int64_t, int64_t> extents) {
  condition = throughSliceViews(condition);
  if (auto both = condition.getDefiningOp<AndOp>())
    return falseAboveDiagonal(both.getLhs(), extents) ||
           falseAboveDiagonal(both.getRhs(), extents);
  DenseElementsAttr values = constantElements(condition, false);
  if (!values || lastTwo(condition) != extents)
    return false;
  return everySliceElement<bool>(values, extents,
                                 [](bool value, int64_t row, int64_t col) {
                                   return !value || col <= row;
                                 });
}

} // namespace

bool masksAboveDiagonal(Value bias, int64_t queries, int64_t keys) {
  if (!bias || lastTwo(bias) != std::make_pair(queries, keys))
    return false;
  bias = throughSliceViews(bias);
  // A mask folded to a constant: -inf above the diagonal of every slice.
  if (DenseElementsAttr values = constantElements(bias, true))
    return everySliceElement<APFloat>(
        values, {queries, keys},
        [](const APFloat &value, int64_t row, int64_t col) {
          return col <= row || isMinusInf(value);
        });
  if (bias.getDefiningOp<ConstantOp>())
    return false;
  auto select = bias.getDefiningOp<WhereOp>();
  return select && isMinusInfSplat(select.getY()) &&
         falseAboveDiagonal(select.getCondition(), {queries, keys});
}

bool isAllTrue(Value v) {
  DenseElementsAttr values = constantElements(v, false);
  if (!values)
    return false;
  // A splat's one value (it may stand for more than could be walked).
  if (values.isSplat())
    return values.getSplatValue<bool>();
  return llvm::all_of(values.getValues<bool>(), [](bool b) { return b; });
}

namespace {

/// Whether `v` is a splat constant whose value `is` says.
template <typename Is> bool isFloatSplat(Value v, Is is) {
  DenseElementsAttr values = constantElements(v, true);
  return values && values.isSplat() && is(values.getSplatValue<APFloat>());
}

} // namespace

bool isMinusInfSplat(Value v) { return isFloatSplat(v, isMinusInf); }

namespace {

/// Whether `v`, through slice views, is a constant of [M, N] slices true
/// exactly where the column is at most the row.
bool isLowerTriangle(Value v, std::pair<int64_t, int64_t> extents) {
  v = throughSliceViews(v);
  DenseElementsAttr values = constantElements(v, false);
  if (!values || lastTwo(v) != extents)
    return false;
  return everySliceElement<bool>(values, extents,
                                 [](bool value, int64_t row, int64_t col) {
                                   return value == (col <= row);
                                 });
}

} // namespace

bool onlyHidesKeysPastQuery(Value bias, int64_t queries, int64_t keys) {
  if (!bias || lastTwo(bias) != std::make_pair(queries, keys))
    return false;
  bias = throughSliceViews(bias);
  if (DenseElementsAttr values = constantElements(bias, true))
    return everySliceElement<APFloat>(
        values, {queries, keys},
        [](const APFloat &value, int64_t row, int64_t col) {
          return col <= row ? value.isZero() : isMinusInf(value);
        });
  auto select = bias.getDefiningOp<WhereOp>();
  return select && isMinusInfSplat(select.getY()) &&
         isFloatSplat(select.getX(),
                      [](const APFloat &value) { return value.isZero(); }) &&
         isLowerTriangle(select.getCondition(), {queries, keys});
}

Value decidingOperand(AndOp both, CausalExtents causal) {
  auto dropped = [&](Value v) {
    return isAllTrue(v) || (causal && isLowerTriangle(v, *causal));
  };
  if (dropped(both.getLhs()))
    return both.getRhs();
  if (dropped(both.getRhs()))
    return both.getLhs();
  return Value();
}

SmallVector<int64_t> narrowedBiasShape(Value bias, CausalExtents causal) {
  auto own = cast<RankedTensorType>(bias.getType()).getShape();
  Operation *def = bias.getDefiningOp();
  if (auto expand = dyn_cast_or_null<ExpandOp>(def))
    return narrowedBiasShape(expand.getInput(), causal);
  if (auto both = dyn_cast_or_null<AndOp>(def))
    if (Value deciding = decidingOperand(both, causal))
      return narrowedBiasShape(deciding, causal);
  if (auto convert = dyn_cast_or_null<CastOp>(def))
    return narrowedBiasShape(convert.getInput(), causal);
  if (auto select = dyn_cast_or_null<WhereOp>(def)) {
    // Only a condition whose false side is -inf may lose the triangle.
    SmallVector<int64_t> shape = narrowedBiasShape(
        select.getCondition(),
        isMinusInfSplat(select.getY()) ? causal : std::nullopt);
    for (Value operand : {select.getX(), select.getY()}) {
      ::partc::runtime::Shape joined;
      SmallVector<int64_t> next = narrowedBiasShape(operand, std::nullopt);
      if (!::partc::runtime::broadcastShapes(
              {shape.begin(), shape.end()}, {next.begin(), next.end()}, joined))
        return {own.begin(), own.end()};
      shape.assign(joined.begin(), joined.end());
    }
    return shape;
  }
  return {own.begin(), own.end()};
}

std::pair<Value, SmallVector<int64_t>> fusedBias(AttentionMatch match,
                                                 bool causal) {
  Value bias = match.softmax.getBias();
  auto scoresType = cast<RankedTensorType>(match.scores.getType());
  int64_t rank = scoresType.getRank();
  int64_t queries = scoresType.getDimSize(rank - 2),
          keys = scoresType.getDimSize(rank - 1);
  if (!bias || (causal && onlyHidesKeysPastQuery(bias, queries, keys)))
    return {Value(), {}};
  CausalExtents extents;
  if (causal)
    extents = std::make_pair(queries, keys);
  return {bias, narrowedBiasShape(bias, extents)};
}

std::optional<AttentionMatch> matchAttention(StridedMatMulOp weighted) {
  auto softmax = weighted.getLhs().getDefiningOp<SoftmaxOp>();
  if (!softmax || !softmax->hasOneUse())
    return std::nullopt;
  auto scores = softmax.getInput().getDefiningOp<StridedMatMulOp>();
  if (!scores || !scores->hasOneUse())
    return std::nullopt;
  auto scoresType = cast<RankedTensorType>(scores.getType());
  int64_t rank = scoresType.getRank();
  if (static_cast<int64_t>(softmax.getAxis()) != rank - 1)
    return std::nullopt;
  // The scores are stored as computed, and read back whole and unscaled.
  strided::View probabilities = lhsView(weighted);
  strided::View expected = strided::contiguous(
      {scoresType.getShape().begin(), scoresType.getShape().end()});
  if (probabilities.shape != expected.shape ||
      probabilities.strides != expected.strides || probabilities.offset ||
      weighted.getAlpha().convertToDouble() != 1.0)
    return std::nullopt;
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
      return std::nullopt;
  }
  for (auto [i, p] : llvm::enumerate(scores.getPerm()))
    if (p != static_cast<int64_t>(i))
      return std::nullopt;
  Type element = getElementTypeOrSelf(weighted.getType());
  for (Value operand :
       {scores.getLhs(), scores.getRhs(), weighted.getRhs(), softmax.getBias()})
    if (operand && getElementTypeOrSelf(operand.getType()) != element)
      return std::nullopt;
  if (!hasKernelElementType(weighted.getResult()))
    return std::nullopt;
  std::vector<int64_t> perm(weighted.getPerm().begin(),
                            weighted.getPerm().end());
  if (!strided::attentionKernelFits(qView, kView, vView, perm))
    return std::nullopt;
  return AttentionMatch{scores, softmax, weighted, qView, kView, vView};
}

DictionaryAttr fusedAttentionAttributes(const AttentionMatch &match,
                                        bool causal) {
  AttentionMatch m = match;
  Builder b(m.weighted.getContext());
  NamedAttrList attrs;
  auto view = [&](StringRef name, const strided::View &v) {
    attrs.set((name + "_shape").str(), b.getDenseI64ArrayAttr(v.shape));
    attrs.set((name + "_strides").str(), b.getDenseI64ArrayAttr(v.strides));
    attrs.set((name + "_offset").str(), b.getI64IntegerAttr(v.offset));
  };
  view("q", m.q);
  view("k", m.k);
  view("v", m.v);
  attrs.set("perm", m.weighted.getPermAttr());
  attrs.set("shape", m.weighted.getShapeAttr());
  attrs.set("scale", m.scores.getAlphaAttr());
  attrs.set("nan_to_zero", b.getBoolAttr(m.softmax.getNanToZero()));
  attrs.set("causal", b.getBoolAttr(causal));
  return attrs.getDictionary(b.getContext());
}

std::optional<AttentionMatch> matchAttentionFromScores(StridedMatMulOp scores) {
  if (!scores->hasOneUse())
    return std::nullopt;
  auto softmax = dyn_cast<SoftmaxOp>(*scores->user_begin());
  if (!softmax || !softmax->hasOneUse())
    return std::nullopt;
  auto weighted = dyn_cast<StridedMatMulOp>(*softmax->user_begin());
  if (!weighted || weighted.getLhs() != softmax.getResult())
    return std::nullopt;
  std::optional<AttentionMatch> match = matchAttention(weighted);
  if (!match || match->scores != scores)
    return std::nullopt;
  return match;
}

} // namespace mlir::partc::graph
