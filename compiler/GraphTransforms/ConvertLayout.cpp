//===- ConvertLayout.cpp - partc-convert-layout ---------------------------===//
//
// Rewrites 2-D convolution, pooling and training batch norm, and their
// gradients, to channels last with a transpose on each side, then sinks
// transposes through layout-agnostic ops (element-wise ops, concatenations,
// pads, inference batch norm as a per-channel affine map) so that the pairs
// between consecutive convolutions cancel.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::partc {
#define GEN_PASS_DEF_CONVERTLAYOUT
#include "compiler/Passes.h.inc"

namespace {

/// [N, C, S...] -> [N, S..., C] and back.
SmallVector<int64_t> toLastPerm(int64_t rank) {
  SmallVector<int64_t> perm = {0};
  for (int64_t d = 2; d < rank; ++d)
    perm.push_back(d);
  perm.push_back(1);
  return perm;
}
SmallVector<int64_t> toFirstPerm(int64_t rank) {
  SmallVector<int64_t> perm = {0, rank - 1};
  for (int64_t d = 1; d + 1 < rank; ++d)
    perm.push_back(d);
  return perm;
}

int64_t rankOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank();
}

/// transpose(v, perm). A function argument or a training variable (a
/// weight) is transposed once per permutation and device, right after it
/// is defined, so that every reader shares the transpose.
Value transposeOf(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> perm,
                  Operation *placedLike) {
  std::optional<int64_t> device = graph::getDevice(placedLike);
  bool shared = isa<BlockArgument>(v) || v.getDefiningOp<graph::VariableOp>();
  OpBuilder::InsertionGuard guard(b);
  if (shared) {
    for (Operation *user : v.getUsers())
      if (auto t = dyn_cast<graph::TransposeOp>(user);
          t && t.getPerm() == perm && graph::getDevice(t) == device)
        return t.getResult();
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
  }
  auto t = graph::TransposeOp::create(b, loc, v, b.getDenseI64ArrayAttr(perm));
  if (device)
    graph::setDevice(t, *device);
  return t.getResult();
}

/// Replaces `op` by transpose(`moved`, `perm`), where `moved` computes `op`
/// on the transposes' sources: its types are inferred again and it goes on
/// `op`'s device.
LogicalResult replaceByTransposeOf(PatternRewriter &rewriter, Operation *op,
                                   Operation *moved, ArrayRef<int64_t> perm) {
  if (failed(reinferTypes(moved)))
    return failure();
  if (auto device = graph::getDevice(op))
    graph::setDevice(moved, *device);
  rewriter.replaceOp(
      op, transposeOf(rewriter, op->getLoc(), moved->getResult(0), perm, op));
  return success();
}

/// Whether operand `i` of a window op is an image (or a filter) whose
/// layout changes; per-channel operands (a bias, batch norm's scale and
/// statistics) do not change.
bool isImageOperand(Operation *op, unsigned i) {
  if (isa<graph::ConvOp>(op))
    return i != 2;
  if (isa<graph::BatchNormTrainOp>(op))
    return i == 0 || i == 3; // the input and a fused addend
  if (isa<graph::BatchNormGradOp>(op))
    return i <= 1;
  return true;
}

/// Replaces a channels-first window op (convolution, pooling, training
/// batch norm and their gradients) with its channels-last form. Its first
/// result is an image; the others (batch norm's statistics and
/// per-channel gradients) keep their layout.
LogicalResult convertToChannelsLast(Operation *op) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  auto last = toLastPerm(4);
  SmallVector<Value> operands;
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    operands.push_back(isImageOperand(op, i) ? transposeOf(b, loc, v, last, op)
                                             : v);
  Operation *converted = b.clone(*op);
  converted->setOperands(operands);
  converted->setAttr("channels_last", b.getUnitAttr());
  // The forward input's or weight's shape, which the gradient's result
  // takes.
  for (StringRef name : {"input_shape", "weight_shape"})
    if (auto shape = op->getAttrOfType<DenseI64ArrayAttr>(name)) {
      SmallVector<int64_t> permuted;
      for (int64_t d : last)
        permuted.push_back(shape[d]);
      converted->setAttr(name, b.getDenseI64ArrayAttr(permuted));
    }
  if (failed(reinferTypes(converted)))
    return failure();
  Value back = transposeOf(b, loc, converted->getResult(0), toFirstPerm(4), op);
  op->getResult(0).replaceAllUsesWith(back);
  for (unsigned i = 1; i < op->getNumResults(); ++i)
    op->getResult(i).replaceAllUsesWith(converted->getResult(i));
  op->erase();
  return success();
}

/// transpose(transpose(x, p), q) = transpose(x, p[q]), or x.
struct ComposeTransposes : OpRewritePattern<graph::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<graph::TransposeOp>();
    if (!inner)
      return failure();
    ArrayRef<int64_t> p = inner.getPerm(), q = op.getPerm();
    SmallVector<int64_t> composed;
    bool identity = true;
    for (auto [i, qi] : llvm::enumerate(q)) {
      composed.push_back(p[qi]);
      identity &= p[qi] == static_cast<int64_t>(i);
    }
    if (identity) {
      rewriter.replaceOp(op, inner.getInput());
      return success();
    }
    rewriter.replaceOpWithNewOp<graph::TransposeOp>(
        op, op.getType(), inner.getInput(),
        rewriter.getDenseI64ArrayAttr(composed));
    return success();
  }
};

/// A broadcast of the same rank: transposing it is transposing its
/// (smaller) source, as global average pooling's gradient is.
graph::ExpandOp sameRankExpand(Value v) {
  auto expand = v.getDefiningOp<graph::ExpandOp>();
  if (!expand || rankOf(expand.getInput()) != rankOf(v))
    return nullptr;
  return expand;
}

/// op(transpose(a, p), transpose(b, p)) = transpose(op(a, b), p) for
/// element-wise ops whose operands all have one shape. A function argument
/// or a broadcast among the operands is transposed the other way instead
/// (an argument once), which never loops: the rewritten op's remaining
/// operands are not transposes.
struct SinkTransposeThroughElementwise : RewritePattern {
  explicit SinkTransposeThroughElementwise(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!graph::isElementwise(op) || op->getNumOperands() == 0)
      return failure();
    std::optional<ArrayRef<int64_t>> perm;
    for (Value v : op->getOperands()) {
      if (v.getType() != op->getResult(0).getType())
        return failure();
      if (isa<BlockArgument>(v) || sameRankExpand(v))
        continue;
      auto t = v.getDefiningOp<graph::TransposeOp>();
      if (!t || (perm && *perm != t.getPerm()))
        return failure();
      // A transpose of an argument is already at the graph's edge; sinking
      // it would put its inverse on the arguments and never end
      // (op(x, T(x)) becomes T(op(T'(x), x)), which matches again).
      if (isa<BlockArgument>(t.getInput()))
        return failure();
      perm = t.getPerm();
    }
    if (!perm)
      return failure();
    SmallVector<int64_t> p(*perm), inverse(p.size());
    for (auto [i, d] : llvm::enumerate(p))
      inverse[d] = static_cast<int64_t>(i);
    rewriter.setInsertionPoint(op);
    SmallVector<Value> sources;
    Location loc = op->getLoc();
    for (Value v : op->getOperands()) {
      if (isa<BlockArgument>(v)) {
        sources.push_back(transposeOf(rewriter, loc, v, inverse, op));
      } else if (graph::ExpandOp expand = sameRankExpand(v)) {
        ArrayRef<int64_t> shape = expand.getShape();
        SmallVector<int64_t> permuted;
        for (int64_t d : inverse)
          permuted.push_back(shape[d]);
        auto moved = graph::ExpandOp::create(
            rewriter, loc,
            transposeOf(rewriter, loc, expand.getInput(), inverse, op),
            permuted);
        if (auto device = graph::getDevice(op))
          graph::setDevice(moved, *device);
        sources.push_back(moved);
      } else {
        sources.push_back(v.getDefiningOp<graph::TransposeOp>().getInput());
      }
    }
    Operation *moved = rewriter.clone(*op);
    moved->setOperands(sources);
    return replaceByTransposeOf(rewriter, op, moved, p);
  }
};

/// concat(transpose(a, p), transpose(b, p), axis) =
/// transpose(concat(a, b, p[axis]), p): a concatenation of channels-last
/// branches (Inception's, DenseNet's features) stays channels last.
struct SinkTransposeThroughConcat : OpRewritePattern<graph::ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::ConcatOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<ArrayRef<int64_t>> perm;
    SmallVector<Value> sources;
    for (Value v : op.getInputs()) {
      auto t = v.getDefiningOp<graph::TransposeOp>();
      if (!t || (perm && *perm != t.getPerm()))
        return failure();
      perm = t.getPerm();
      sources.push_back(t.getInput());
    }
    if (!perm)
      return failure();
    SmallVector<int64_t> p(*perm);
    auto moved =
        graph::ConcatOp::create(rewriter, op.getLoc(), sources,
                                rewriter.getI64IntegerAttr(p[op.getAxis()]));
    return replaceByTransposeOf(rewriter, op, moved, p);
  }
};

/// pad(transpose(x, p)) = transpose(pad(x, pads of each source
/// dimension), p): Inception's padded average pools stay channels last.
struct SinkTransposeThroughPad : OpRewritePattern<graph::PadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::PadOp op,
                                PatternRewriter &rewriter) const override {
    auto t = op.getInput().getDefiningOp<graph::TransposeOp>();
    if (!t)
      return failure();
    ArrayRef<int64_t> p = t.getPerm(), pads = op.getPads();
    int64_t rank = static_cast<int64_t>(p.size());
    SmallVector<int64_t> sourcePads(2 * rank);
    for (int64_t i = 0; i < rank; ++i) {
      sourcePads[p[i]] = pads[i];
      sourcePads[rank + p[i]] = pads[rank + i];
    }
    auto moved = graph::PadOp::create(rewriter, op.getLoc(), t.getInput(),
                                      rewriter.getDenseI64ArrayAttr(sourcePads),
                                      op.getModeAttr(), op.getValueAttr());
    return replaceByTransposeOf(rewriter, op, moved, p);
  }
};

/// Inference batch normalization of a channels-first view of a
/// channels-last value is a per-channel affine map: mul and add along the
/// last axis, which join element-wise chains and let the transpose sink on.
/// (The batch_norm kernel is channels first.)
struct BatchNormOfTranspose : OpRewritePattern<graph::BatchNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::BatchNormOp op,
                                PatternRewriter &rewriter) const override {
    auto t = op.getInput().getDefiningOp<graph::TransposeOp>();
    int64_t rank = rankOf(op.getInput());
    auto type = cast<RankedTensorType>(op.getInput().getType());
    if (!t || op.getTrainingMode() || rank < 3 ||
        t.getPerm() != ArrayRef<int64_t>(toFirstPerm(rank)) ||
        !type.getElementType().isF32())
      return failure();
    Location loc = op.getLoc();
    std::optional<int64_t> device = graph::getDevice(op);
    auto placed = [&](Operation *created) {
      if (device)
        graph::setDevice(created, *device);
      return created->getResult(0);
    };
    auto scalarType = RankedTensorType::get({}, type.getElementType());
    Value epsilon = placed(graph::ConstantOp::create(
        rewriter, loc, scalarType,
        DenseElementsAttr::get(
            scalarType,
            rewriter.getF32FloatAttr(op.getEpsilon().convertToDouble()))));
    Type channels = op.getScale().getType();
    auto binary = [&](auto tag, Value lhs, Value rhs, Type result) {
      using OpTy = decltype(tag);
      return placed(
          OpTy::create(rewriter, loc, TypeRange{result}, ValueRange{lhs, rhs}));
    };
    // scale / sqrt(var + eps) and bias - mean * that: constants fold.
    Value stddev = placed(graph::SqrtOp::create(
        rewriter, loc, channels,
        binary(graph::AddOp(), op.getVariance(), epsilon, channels)));
    Value factor = binary(graph::DivOp(), op.getScale(), stddev, channels);
    Value shift = binary(graph::SubOp(), op.getBias(),
                         binary(graph::MulOp(), op.getMean(), factor, channels),
                         channels);
    Value scaled =
        binary(graph::MulOp(), t.getInput(), factor, t.getInput().getType());
    Value y = binary(graph::AddOp(), scaled, shift, t.getInput().getType());
    rewriter.replaceOp(op,
                       transposeOf(rewriter, loc, y, toFirstPerm(rank), op));
    return success();
  }
};

/// A global pool of a channels-last tensor is a reduction over its spatial
/// dimensions; the transpose moves after it, onto unit dimensions.
template <typename PoolOp, typename ReduceOp>
struct GlobalPoolOfTranspose : OpRewritePattern<PoolOp> {
  using OpRewritePattern<PoolOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(PoolOp op,
                                PatternRewriter &rewriter) const override {
    auto t = op.getInput().template getDefiningOp<graph::TransposeOp>();
    int64_t rank = rankOf(op.getInput());
    if (!t || rank < 3 || t.getPerm() != ArrayRef<int64_t>(toFirstPerm(rank)))
      return failure();
    SmallVector<int64_t> axes;
    for (int64_t d = 1; d + 1 < rank; ++d)
      axes.push_back(d);
    auto reduce = ReduceOp::create(rewriter, op.getLoc(), t.getInput(), axes,
                                   /*keepdims=*/1);
    if (auto device = graph::getDevice(op))
      graph::setDevice(reduce, *device);
    rewriter.replaceOp(
        op, transposeOf(rewriter, op.getLoc(), reduce, toFirstPerm(rank), op));
    return success();
  }
};

/// A transpose that only moves unit dimensions keeps the element order: a
/// reshape, which is a view.
struct TransposeOfUnitDims : OpRewritePattern<graph::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getInput().getType());
    int64_t previous = -1;
    for (int64_t d : op.getPerm()) {
      if (type.getDimSize(d) == 1)
        continue;
      if (d < previous)
        return failure();
      previous = d;
    }
    // The device is read before the replacement erases `op`.
    std::optional<int64_t> device = graph::getDevice(op);
    auto reshape = rewriter.replaceOpWithNewOp<graph::ReshapeOp>(
        op, op.getType(), op.getInput(),
        rewriter.getDenseI64ArrayAttr(op.getType().getShape()));
    if (device)
      graph::setDevice(reshape, *device);
    return success();
  }
};

struct ConvertLayoutPass : public impl::ConvertLayoutBase<ConvertLayoutPass> {
  void runOnOperation() override {
    SmallVector<Operation *> candidates;
    getOperation().walk([&](Operation *op) {
      if (!isa<graph::ConvOp, graph::MaxPoolOp, graph::AvgPoolOp,
               graph::ConvGradInputOp, graph::ConvGradWeightOp,
               graph::MaxPoolGradOp, graph::AvgPoolGradOp,
               graph::BatchNormTrainOp, graph::BatchNormGradOp>(op) ||
          op->hasAttr("channels_last") || rankOf(op->getOperand(0)) != 4)
        return;
      candidates.push_back(op);
    });
    for (Operation *op : candidates)
      if (failed(convertToChannelsLast(op)))
        return signalPassFailure();

    RewritePatternSet patterns(&getContext());
    patterns
        .add<ComposeTransposes, SinkTransposeThroughElementwise,
             TransposeOfUnitDims, SinkTransposeThroughConcat,
             SinkTransposeThroughPad, BatchNormOfTranspose,
             GlobalPoolOfTranspose<graph::GlobalAvgPoolOp, graph::ReduceMeanOp>,
             GlobalPoolOfTranspose<graph::GlobalMaxPoolOp, graph::ReduceMaxOp>>(
            &getContext());
    // Folding on the way turns the weights' transposes into constants.
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::partc
