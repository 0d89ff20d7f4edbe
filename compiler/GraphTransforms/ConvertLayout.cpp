//===- ConvertLayout.cpp - partc-convert-layout ---------------------------===//
//
// Rewrites 2-D convolution and pooling to channels last with a transpose on
// each side, then sinks transposes through layout-agnostic ops (element-wise
// ops, concatenations, pads, inference batch norm as a per-channel affine map)
// so that the pairs between consecutive convolutions cancel.
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

/// transpose(v, perm), reusing an identical transpose of a function
/// argument so that each input is transposed once.
Value transposeOf(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> perm,
                  Operation *placedLike) {
  if (isa<BlockArgument>(v))
    for (Operation *user : v.getUsers())
      if (auto t = dyn_cast<graph::TransposeOp>(user);
          t && t.getPerm() == perm &&
          graph::getDevice(t) == graph::getDevice(placedLike))
        return t.getResult();
  auto t = graph::TransposeOp::create(b, loc, v, b.getDenseI64ArrayAttr(perm));
  if (auto device = graph::getDevice(placedLike))
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

/// Replaces a channels-first conv or pool with its channels-last form.
LogicalResult convertToChannelsLast(Operation *op) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  auto last = toLastPerm(4);
  SmallVector<Value> operands;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    // Input, weight and residual addend change layout; the bias does not.
    bool isBias = isa<graph::ConvOp>(op) && i == 2;
    operands.push_back(isBias ? v : transposeOf(b, loc, v, last, op));
  }
  Operation *converted = b.clone(*op);
  converted->setOperands(operands);
  converted->setAttr("channels_last", b.getUnitAttr());
  if (failed(reinferTypes(converted)))
    return failure();
  Value back = transposeOf(b, loc, converted->getResult(0), toFirstPerm(4), op);
  op->getResult(0).replaceAllUsesWith(back);
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

/// op(transpose(a, p), transpose(b, p)) = transpose(op(a, b), p) for
/// element-wise ops whose operands all have one shape. A function argument
/// among the operands is transposed the other way instead (once per
/// argument), which never loops: the rewritten op's remaining operands are
/// not transposes.
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
      if (isa<BlockArgument>(v))
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
    for (Value v : op->getOperands())
      sources.push_back(
          isa<BlockArgument>(v)
              ? transposeOf(rewriter, op->getLoc(), v, inverse, op)
              : v.getDefiningOp<graph::TransposeOp>().getInput());
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
      if (!isa<graph::ConvOp, graph::MaxPoolOp, graph::AvgPoolOp>(op) ||
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
