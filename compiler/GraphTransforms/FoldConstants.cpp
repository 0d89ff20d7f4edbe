//===- FoldConstants.cpp - partc-fold-constants ---------------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::partc {
#define GEN_PASS_DEF_FOLDCONSTANTS
#include "compiler/Passes.h.inc"

namespace {

/// The values of an i32 or i64 graph.constant, or nothing.
std::optional<SmallVector<int64_t>> intConstant(Value v) {
  auto c = v.getDefiningOp<graph::ConstantOp>();
  if (!c)
    return std::nullopt;
  auto type = cast<RankedTensorType>(c.getType());
  bool wide = type.getElementType().isInteger(64);
  if (!wide && !type.getElementType().isInteger(32))
    return std::nullopt;
  std::vector<uint8_t> scratch;
  ArrayRef<uint8_t> bytes = constantBytes(c.getValue(), scratch);
  int64_t n = type.getNumElements();
  if (static_cast<int64_t>(bytes.size()) != n * (wide ? 8 : 4))
    return std::nullopt;
  SmallVector<int64_t> values(n);
  for (int64_t i = 0; i < n; ++i) {
    if (wide) {
      std::memcpy(&values[i], bytes.data() + 8 * i, 8);
    } else {
      int32_t narrow;
      std::memcpy(&narrow, bytes.data() + 4 * i, 4);
      values[i] = narrow;
    }
  }
  return values;
}

/// A gather whose constant indices are 0, 1, ..., n-1 over the whole axis
/// reads its data in order: a reshape. Exporters write these when they
/// index a batch explicitly (PyTorch's vmap-built attention masks), and as
/// a gather they would tie every sample to a fixed batch position.
struct GatherInOrder : OpRewritePattern<graph::GatherOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::GatherOp op,
                                PatternRewriter &rewriter) const override {
    auto indices = intConstant(op.getIndices());
    if (!indices)
      return failure();
    int64_t extent = op.getData().getType().getDimSize(op.getAxis());
    if (static_cast<int64_t>(indices->size()) != extent)
      return failure();
    for (int64_t i = 0; i < extent; ++i)
      if ((*indices)[i] != i && (*indices)[i] != i - extent)
        return failure();
    rewriter.replaceOpWithNewOp<graph::ReshapeOp>(
        op, op.getType(), op.getData(),
        rewriter.getDenseI64ArrayAttr(op.getType().getShape()));
    return success();
  }
};

/// The same for GatherND: constant index tuples that enumerate every
/// position of the addressed dimensions in row-major order, per batch.
struct GatherNdInOrder : OpRewritePattern<graph::GatherNdOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::GatherNdOp op,
                                PatternRewriter &rewriter) const override {
    auto indices = intConstant(op.getIndices());
    if (!indices)
      return failure();
    auto data = op.getData().getType();
    auto idxShape = op.getIndices().getType().getShape();
    int64_t batchDims = op.getBatchDims(), k = idxShape.back();
    int64_t batches = 1, positions = 1;
    for (int64_t d = 0; d < batchDims; ++d)
      batches *= data.getDimSize(d);
    for (int64_t d = batchDims; d < batchDims + k; ++d)
      positions *= data.getDimSize(d);
    int64_t tuples = static_cast<int64_t>(indices->size()) / k;
    if (tuples != batches * positions)
      return failure();
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t linear = 0;
      for (int64_t d = 0; d < k; ++d) {
        int64_t extent = data.getDimSize(batchDims + d);
        int64_t i = (*indices)[t * k + d];
        if (i < 0)
          i += extent;
        if (i < 0 || i >= extent)
          return failure();
        linear = linear * extent + i;
      }
      if (linear != t % positions)
        return failure();
    }
    rewriter.replaceOpWithNewOp<graph::ReshapeOp>(
        op, op.getType(), op.getData(),
        rewriter.getDenseI64ArrayAttr(op.getType().getShape()));
    return success();
  }
};

/// x + 0, x - 0, x * 1 and x / 1 are x where broadcasting does not widen x:
/// exporters add all-zero attention masks (PyTorch's scaled dot-product
/// attention without a mask), each a pass over the attention matrix.
template <typename Op, bool Commutes>
struct DropIdentityOperand : OpRewritePattern<Op> {
  DropIdentityOperand(MLIRContext *ctx, double identity)
      : OpRewritePattern<Op>(ctx), identity(identity) {}
  LogicalResult matchAndRewrite(Op op,
                                PatternRewriter &rewriter) const override {
    if (op->hasAttr("activation"))
      return failure();
    for (unsigned k = 0; k < (Commutes ? 2u : 1u); ++k) {
      Value x = op->getOperand(k), other = op->getOperand(1 - k);
      if (x.getType() == op.getType() &&
          isUniformFloatConstant(other, identity)) {
        rewriter.replaceOp(op, x);
        return success();
      }
    }
    return failure();
  }
  double identity;
};

/// pow(x, 2) and pow(x, 3) of floats are multiplications: powf costs tens
/// of instructions per element, and GPT-2's exported tanh Gelu cubes its
/// input with Pow.
struct PowToMultiply : OpRewritePattern<graph::PowOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::PowOp op,
                                PatternRewriter &rewriter) const override {
    Value x = op.getLhs();
    auto type = dyn_cast<RankedTensorType>(x.getType());
    if (!type || type != op.getType() || !isa<FloatType>(type.getElementType()))
      return failure();
    int exponent = isUniformFloatConstant(op.getRhs(), 2.0)   ? 2
                   : isUniformFloatConstant(op.getRhs(), 3.0) ? 3
                                                              : 0;
    if (!exponent)
      return failure();
    auto square = graph::MulOp::create(rewriter, op.getLoc(), type, x, x);
    Value result = square;
    if (exponent == 3)
      result = graph::MulOp::create(rewriter, op.getLoc(), type, square, x);
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// concat(..., -a, ...) * c, with c a constant of the same rank, is
/// concat(..., a, ...) * c' where c' negates c along the negated parts:
/// a rotary embedding's rotate_half, concat(-x2, x1), times its sine table
/// (Llama's, Mistral's, Qwen's exports) then needs no negation kernel, two
/// kernels a layer. The pieces of c' are graph ops on constants, which the
/// driver folds.
struct NegatedPartsIntoFactor : OpRewritePattern<graph::MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::MulOp op,
                                PatternRewriter &rewriter) const override {
    for (unsigned side : {0u, 1u}) {
      auto concat = op->getOperand(side).getDefiningOp<graph::ConcatOp>();
      Value factor = op->getOperand(1 - side);
      if (!concat || !concat->hasOneUse() ||
          !factor.getDefiningOp<graph::ConstantOp>() ||
          concat.getType() != op.getType())
        continue;
      auto type = cast<RankedTensorType>(concat.getType());
      auto factorType = cast<RankedTensorType>(factor.getType());
      int64_t rank = type.getRank(), axis = concat.getAxis();
      if (axis < 0)
        axis += rank;
      if (factorType.getRank() != rank || !type.hasStaticShape() ||
          !isa<FloatType>(type.getElementType()))
        continue;
      int64_t along = factorType.getDimSize(axis);
      if (along != 1 && along != type.getDimSize(axis))
        continue;
      auto negated = [](Value part) {
        auto neg = part.getDefiningOp<graph::NegOp>();
        return neg && neg->hasOneUse() ? neg : graph::NegOp();
      };
      if (llvm::none_of(concat.getInputs(), negated))
        continue;
      Location loc = op.getLoc();
      SmallVector<Value> parts, pieces;
      int64_t offset = 0;
      for (Value part : concat.getInputs()) {
        int64_t extent =
            cast<RankedTensorType>(part.getType()).getDimSize(axis);
        SmallVector<int64_t> shape(factorType.getShape());
        shape[axis] = extent;
        Value piece;
        if (along == 1) {
          piece = graph::ExpandOp::create(rewriter, loc, factor,
                                          rewriter.getDenseI64ArrayAttr(shape));
        } else {
          SmallVector<int64_t> starts(rank, 0), ends(factorType.getShape()),
              steps(rank, 1);
          starts[axis] = offset;
          ends[axis] = offset + extent;
          piece = graph::SliceOp::create(rewriter, loc, factor,
                                         rewriter.getDenseI64ArrayAttr(starts),
                                         rewriter.getDenseI64ArrayAttr(ends),
                                         rewriter.getDenseI64ArrayAttr(steps));
        }
        graph::NegOp neg = negated(part);
        if (neg)
          piece = graph::NegOp::create(rewriter, loc, piece);
        pieces.push_back(piece);
        parts.push_back(neg ? neg.getInput() : part);
        offset += extent;
      }
      auto axisAttr = rewriter.getI64IntegerAttr(axis);
      Value newFactor =
          graph::ConcatOp::create(rewriter, loc, pieces, axisAttr);
      Value newConcat = graph::ConcatOp::create(rewriter, loc, parts, axisAttr);
      rewriter.replaceOpWithNewOp<graph::MulOp>(
          op, op.getType(), side == 0 ? newConcat : newFactor,
          side == 0 ? newFactor : newConcat);
      return success();
    }
    return failure();
  }
};

/// A rewrite keeps the replaced op's device (a training pipeline's stages
/// are cut before the graph is simplified).
struct KeepDevices : RewriterBase::Listener {
  void notifyOperationReplaced(Operation *op, ValueRange values) override {
    std::optional<int64_t> device = graph::getDevice(op);
    if (!device)
      return;
    for (Value v : values)
      if (Operation *def = v.getDefiningOp();
          def && !isa<graph::ConstantOp>(def) && !graph::getDevice(def))
        graph::setDevice(def, *device);
  }
};

struct FoldConstantsPass : public impl::FoldConstantsBase<FoldConstantsPass> {
  void runOnOperation() override {
    // The greedy driver folds every op (graph ops fold through their
    // ConstantEvaluable trait and folders) and erases dead pure ops.
    RewritePatternSet patterns(&getContext());
    patterns.add<GatherInOrder, GatherNdInOrder, PowToMultiply,
                 NegatedPartsIntoFactor>(&getContext());
    patterns.add<DropIdentityOperand<graph::AddOp, true>>(&getContext(), 0.0);
    patterns.add<DropIdentityOperand<graph::SubOp, false>>(&getContext(), 0.0);
    patterns.add<DropIdentityOperand<graph::MulOp, true>>(&getContext(), 1.0);
    patterns.add<DropIdentityOperand<graph::DivOp, false>>(&getContext(), 1.0);
    KeepDevices keepDevices;
    GreedyRewriteConfig config;
    config.setListener(&keepDevices);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
    getOperation().walk([](func::FuncOp f) { placeUnplacedOps(f); });
  }
};
} // namespace
} // namespace mlir::partc
