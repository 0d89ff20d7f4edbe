//===- ConvertLayout.cpp - partc-convert-layout ---------------------------===//
//
// Rewrites 2-D convolution, pooling and training batch norm, and their
// gradients, to channels last with a transpose on each side, then sinks
// transposes through layout-agnostic ops (element-wise ops, concatenations,
// pads, slices, broadcasts, inference batch norm as a per-channel affine
// map) so that the pairs between consecutive convolutions cancel, and a
// transformer's head transposes reach attention, which reads them in place.
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

/// The result of an op a rewrite created, placed on `device` where set.
Value onDevice(Operation *created, std::optional<int64_t> device) {
  if (device)
    graph::setDevice(created, *device);
  return created->getResult(0);
}

/// Replaces `op` by transpose(`moved`, `perm`), where `moved` computes `op`
/// on the transposes' sources: its types are inferred again and it goes on
/// `op`'s device.
LogicalResult replaceByTransposeOf(PatternRewriter &rewriter, Operation *op,
                                   Operation *moved, ArrayRef<int64_t> perm,
                                   bool inferTypes = true) {
  if (inferTypes && failed(reinferTypes(moved)))
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

/// Below this many input channels a tensor-core convolution fills its
/// products badly: cuDNN's 16 x 16, stride-16 patch embedding of ViT-Base
/// over 3 channels took 0.30 ms at batch 32 in bf16, a twelfth of the
/// rate of the same arithmetic as one product.
constexpr int64_t kFewChannels = 8;

/// A 2-D convolution whose filter tiles its input without overlap, padding
/// or dilation (a vision transformer's patch embedding), over few channels.
bool isPatchConv(graph::ConvOp op) {
  auto x = cast<RankedTensorType>(op.getInput().getType());
  auto w = cast<RankedTensorType>(op.getWeight().getType());
  if (x.getRank() != 4 || !x.hasStaticShape() || !w.hasStaticShape() ||
      op.getChannelsLast() || op.getGroup() != 1 || op.getActivation() ||
      op.getEpilogue().size() > 1 || x.getDimSize(1) < 1 ||
      x.getDimSize(1) >= kFewChannels ||
      w.getDimSize(2) * w.getDimSize(3) == 1) // 1x1: a product already
    return false;
  ArrayRef<int64_t> strides = op.getStrides(), pads = op.getPads(),
                    dilations = op.getDilations();
  for (int64_t d = 0; d < 2; ++d) {
    int64_t kernel = w.getDimSize(2 + d);
    if (kernel < 1 || strides[d] != kernel || dilations[d] != 1 ||
        pads[d] != 0 || pads[2 + d] != 0 || x.getDimSize(2 + d) % kernel != 0)
      return false;
  }
  return true;
}

/// Such a convolution as a product of the input's patches, each laid out
/// [C, kh, kw] as the filter is, and the filter: one transpose of the
/// input, one GEMM with the bias in its epilogue, channels last, then the
/// transpose back to channels first that later patterns move on.
void convertPatchConv(graph::ConvOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  std::optional<int64_t> device = graph::getDevice(op);
  auto placed = [&](Operation *created) { return onDevice(created, device); };
  auto x = cast<RankedTensorType>(op.getInput().getType());
  auto w = cast<RankedTensorType>(op.getWeight().getType());
  int64_t n = x.getDimSize(0), c = x.getDimSize(1), m = w.getDimSize(0);
  int64_t kh = w.getDimSize(2), kw = w.getDimSize(3);
  int64_t rows = x.getDimSize(2) / kh, cols = x.getDimSize(3) / kw;
  auto reshape = [&](Value v, ArrayRef<int64_t> shape) {
    auto type = RankedTensorType::get(
        shape, cast<RankedTensorType>(v.getType()).getElementType());
    return placed(graph::ReshapeOp::create(b, loc, type, v,
                                           b.getDenseI64ArrayAttr(shape)));
  };
  auto transpose = [&](Value v, ArrayRef<int64_t> perm) {
    return placed(
        graph::TransposeOp::create(b, loc, v, b.getDenseI64ArrayAttr(perm)));
  };
  Value blocks = reshape(op.getInput(), {n, c, rows, kh, cols, kw});
  Value patches = reshape(transpose(blocks, {0, 2, 4, 1, 3, 5}),
                          {n, rows, cols, c * kh * kw});
  Value filter = transpose(reshape(op.getWeight(), {m, c * kh * kw}), {1, 0});
  SmallVector<Value> operands = {patches, filter};
  if (Value bias = op.getBias())
    operands.push_back(bias);
  auto productType =
      RankedTensorType::get({n, rows, cols, m}, x.getElementType());
  Value product = placed(graph::MatMulOp::create(b, loc, TypeRange{productType},
                                                 ValueRange(operands)));
  op.getResult().replaceAllUsesWith(transpose(product, toFirstPerm(4)));
  op.erase();
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

/// `v`'s static shape with leading unit dimensions up to `rank` (numpy's
/// broadcasting), or none.
std::optional<SmallVector<int64_t>> broadcastShape(Value v, int64_t rank) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape() || type.getRank() > rank)
    return std::nullopt;
  SmallVector<int64_t> shape(rank - type.getRank(), 1);
  llvm::append_range(shape, type.getShape());
  return shape;
}

/// Whether `v` broadcasts to `result` (numpy's way: a lower rank gains
/// leading unit dimensions) and is not of its shape. Scalars of a lower
/// rank are left out: a transpose stays above their product, where
/// partc-fold-matmul-views folds the scale of a query or key into the
/// attention's product.
bool isBroadcast(Value v, Type result) {
  auto target = dyn_cast<RankedTensorType>(result);
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!target || !type || type == target ||
      (type.getRank() < target.getRank() && type.getNumElements() == 1))
    return false;
  std::optional<SmallVector<int64_t>> shape =
      broadcastShape(v, target.getRank());
  if (!shape)
    return false;
  for (auto [have, want] : llvm::zip(*shape, target.getShape()))
    if (have != 1 && have != want)
      return false;
  return true;
}

/// `v` of `rank` dimensions: reshaped with leading unit dimensions where it
/// has fewer.
Value withRank(OpBuilder &b, Location loc, Value v, int64_t rank,
               Operation *placedLike) {
  SmallVector<int64_t> shape = *broadcastShape(v, rank);
  if (static_cast<int64_t>(shape.size()) == rankOf(v))
    return v;
  auto type = RankedTensorType::get(
      shape, cast<RankedTensorType>(v.getType()).getElementType());
  auto reshape =
      graph::ReshapeOp::create(b, loc, type, v, b.getDenseI64ArrayAttr(shape));
  return onDevice(reshape, graph::getDevice(placedLike));
}

/// Whether transposing a tensor of `shape` by `perm` keeps its element
/// order: only unit dimensions move, so the transpose is a reshape (a
/// view).
bool transposeIsView(ArrayRef<int64_t> shape, ArrayRef<int64_t> perm) {
  int64_t previous = -1;
  for (int64_t d : perm) {
    if (shape[d] == 1)
      continue;
    if (d < previous)
      return false;
    previous = d;
  }
  return true;
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
    Type resultType = op->getResult(0).getType();
    std::optional<ArrayRef<int64_t>> perm;
    SmallVector<Value> broadcasts;
    for (Value v : op->getOperands()) {
      // A broadcast is transposed the other way: a constant one (Llama's
      // rotary tables, [1, 1, S, D] against [B, H, S, D]) folds into a
      // constant again; any other only where that transpose is a reshape
      // (squeeze-and-excitation's [N, C, 1, 1] scale of a channels-last
      // map, which would otherwise be transposed to channels first and back
      // around the product).
      if (isBroadcast(v, resultType)) {
        if (!v.getDefiningOp<graph::ConstantOp>())
          broadcasts.push_back(v);
        continue;
      }
      if (v.getType() != resultType)
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
    for (Value v : broadcasts)
      if (!transposeIsView(*broadcastShape(v, p.size()), inverse))
        return failure();
    rewriter.setInsertionPoint(op);
    SmallVector<Value> sources;
    Location loc = op->getLoc();
    for (Value v : op->getOperands()) {
      if (isBroadcast(v, resultType)) {
        Value full = withRank(rewriter, loc, v, p.size(), op);
        sources.push_back(transposeOf(rewriter, loc, full, inverse, op));
      } else if (isa<BlockArgument>(v)) {
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
    auto placed = [&](Operation *created) { return onDevice(created, device); };
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

/// reshape(transpose(x, p)) where the reshape only merges runs of
/// dimensions that lie in order in x = transpose(reshape(x), q) of the
/// merged dimensions. A vision transformer's flatten(2).transpose(1, 2) of
/// its channels-last patch embedding then cancels with the transpose back
/// to channels first.
struct SinkTransposeThroughReshape : OpRewritePattern<graph::ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto t = op.getInput().getDefiningOp<graph::TransposeOp>();
    if (!t || !op.getType().hasStaticShape())
      return failure();
    ArrayRef<int64_t> p = t.getPerm();
    ArrayRef<int64_t> moved = t.getType().getShape();
    ArrayRef<int64_t> merged = op.getType().getShape();
    int64_t rank = static_cast<int64_t>(moved.size());
    // Each result dimension: the run [first, end) of transposed dimensions
    // it merges, whose sources must be consecutive and in order.
    SmallVector<std::pair<int64_t, int64_t>> runs;
    int64_t next = 0;
    for (int64_t extent : merged) {
      int64_t first = next, product = 1;
      do {
        if (next == rank)
          return failure();
        product *= moved[next];
        if (next > first && p[next] != p[next - 1] + 1)
          return failure();
        ++next;
      } while (product < extent);
      if (product != extent)
        return failure();
      runs.push_back({first, next});
    }
    if (next != rank)
      return failure();
    // The runs in the source's order, and where each result run lies there.
    SmallVector<int64_t> order(runs.size());
    for (int64_t i = 0; i < static_cast<int64_t>(runs.size()); ++i)
      order[i] = i;
    llvm::sort(order, [&](int64_t a, int64_t b) {
      return p[runs[a].first] < p[runs[b].first];
    });
    SmallVector<int64_t> sourceShape, perm(runs.size());
    for (auto [position, run] : llvm::enumerate(order)) {
      sourceShape.push_back(merged[run]);
      perm[run] = static_cast<int64_t>(position);
    }
    std::optional<int64_t> device = graph::getDevice(op);
    auto type =
        RankedTensorType::get(sourceShape, op.getType().getElementType());
    auto reshaped =
        graph::ReshapeOp::create(rewriter, op.getLoc(), type, t.getInput(),
                                 rewriter.getDenseI64ArrayAttr(sourceShape));
    if (device)
      graph::setDevice(reshaped, *device);
    if (llvm::is_sorted(perm)) {
      rewriter.replaceOp(op, reshaped);
      return success();
    }
    rewriter.replaceOp(op,
                       transposeOf(rewriter, op.getLoc(), reshaped, perm, op));
    return success();
  }
};

/// Whether every reader of `t` is an op a transpose can move past, so that
/// moving it past one reader does not leave it behind for another (a
/// second transpose where there was one).
bool readersLetItSink(graph::TransposeOp t) {
  return llvm::all_of(t->getUsers(), [](Operation *user) {
    return graph::isElementwise(user) ||
           isa<graph::SliceOp, graph::ConcatOp, graph::PadOp, graph::ReshapeOp,
               graph::ExpandOp, graph::TransposeOp>(user);
  });
}

/// slice(transpose(x, p)) = transpose(slice(x), p), the slice's bounds on
/// each source dimension: the transpose moves fewer bytes after it, and
/// can sink on to where a kernel reads it in place (Llama's rotary halves,
/// attention's strided views).
struct SinkTransposeThroughSlice : OpRewritePattern<graph::SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::SliceOp op,
                                PatternRewriter &rewriter) const override {
    auto t = op.getInput().getDefiningOp<graph::TransposeOp>();
    if (!t || isa<BlockArgument>(t.getInput()) || !readersLetItSink(t))
      return failure();
    ArrayRef<int64_t> p = t.getPerm();
    size_t rank = p.size();
    if (op.getStarts().size() != rank || op.getEnds().size() != rank ||
        op.getSteps().size() != rank)
      return failure();
    SmallVector<int64_t> starts(rank), ends(rank), steps(rank), shape(rank);
    for (size_t i = 0; i < rank; ++i) {
      starts[p[i]] = op.getStarts()[i];
      ends[p[i]] = op.getEnds()[i];
      steps[p[i]] = op.getSteps()[i];
      shape[p[i]] = op.getType().getDimSize(i);
    }
    auto type = RankedTensorType::get(shape, op.getType().getElementType());
    auto moved =
        graph::SliceOp::create(rewriter, op.getLoc(), type, t.getInput(),
                               rewriter.getDenseI64ArrayAttr(starts),
                               rewriter.getDenseI64ArrayAttr(ends),
                               rewriter.getDenseI64ArrayAttr(steps));
    return replaceByTransposeOf(rewriter, op, moved, p, /*inferTypes=*/false);
  }
};

/// Whether reshaping transpose(x, p) (of shape `moved`) to `merged` only
/// merges runs of dimensions that lie consecutive and in order in x, so
/// that the transpose can move after the reshape.
bool mergesSourceRuns(ArrayRef<int64_t> p, ArrayRef<int64_t> moved,
                      ArrayRef<int64_t> merged) {
  int64_t rank = static_cast<int64_t>(moved.size()), next = 0;
  for (int64_t extent : merged) {
    int64_t first = next, product = 1;
    do {
      if (next == rank)
        return false;
      product *= moved[next];
      if (next > first && p[next] != p[next - 1] + 1)
        return false;
      ++next;
    } while (product < extent);
    if (product != extent)
      return false;
  }
  return next == rank;
}

/// expand(transpose(x, p)) = transpose(expand(x), p) where the broadcast
/// is read through reshapes that the transpose can then sink through
/// (grouped-query attention repeats each key head [B, Hkv, 1, S, D] ->
/// [B, Hkv, n, S, D], then merges the heads): it reaches attention, which
/// reads it in place. Other broadcasts keep the transpose on the smaller
/// side (the dynamo exporter folds batch and heads together, which x's
/// order does not allow).
struct SinkTransposeThroughExpand : OpRewritePattern<graph::ExpandOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::ExpandOp op,
                                PatternRewriter &rewriter) const override {
    auto t = op.getInput().getDefiningOp<graph::TransposeOp>();
    if (!t || isa<BlockArgument>(t.getInput()) || op->use_empty() ||
        !readersLetItSink(t))
      return failure();
    for (Operation *user : op->getUsers()) {
      auto reshape = dyn_cast<graph::ReshapeOp>(user);
      if (!reshape || !reshape.getType().hasStaticShape() ||
          !mergesSourceRuns(t.getPerm(), op.getType().getShape(),
                            reshape.getType().getShape()))
        return failure();
    }
    ArrayRef<int64_t> p = t.getPerm();
    ArrayRef<int64_t> shape = op.getShape();
    if (shape.size() != p.size())
      return failure();
    SmallVector<int64_t> sourceShape(p.size());
    for (size_t i = 0; i < p.size(); ++i)
      sourceShape[p[i]] = shape[i];
    auto type =
        RankedTensorType::get(sourceShape, op.getType().getElementType());
    auto moved =
        graph::ExpandOp::create(rewriter, op.getLoc(), type, t.getInput(),
                                rewriter.getDenseI64ArrayAttr(sourceShape));
    return replaceByTransposeOf(rewriter, op, moved, p, /*inferTypes=*/false);
  }
};

/// reshape(transpose(x, p)) where the reshape only inserts unit
/// dimensions = transpose(reshape(x), q): each new unit dimension goes in
/// x right after the source of the dimension before it (unit dimensions
/// hold no data, so any place keeps the element order).
struct SinkTransposeThroughUnitReshape : OpRewritePattern<graph::ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto t = op.getInput().getDefiningOp<graph::TransposeOp>();
    if (!t || isa<BlockArgument>(t.getInput()) ||
        !op.getType().hasStaticShape() || !readersLetItSink(t))
      return failure();
    ArrayRef<int64_t> p = t.getPerm();
    ArrayRef<int64_t> moved = t.getType().getShape();
    ArrayRef<int64_t> out = op.getType().getShape();
    int64_t rank = static_cast<int64_t>(moved.size());
    if (static_cast<int64_t>(out.size()) <= rank)
      return failure();
    // Result dimension j is transposed dimension mapped[j], or new (-1).
    SmallVector<int64_t> mapped;
    int64_t i = 0;
    for (int64_t extent : out) {
      if (i < rank && extent == moved[i]) {
        mapped.push_back(i++);
      } else if (extent == 1) {
        mapped.push_back(-1);
      } else {
        return failure();
      }
    }
    if (i != rank)
      return failure();
    // The source's dimensions in order, each followed by the new unit
    // dimensions placed after it (those before any mapped one go first).
    SmallVector<SmallVector<int64_t>> after(rank + 1);
    int64_t anchor = 0; // slot 0: the front; slot s + 1: after source s
    for (auto [j, m] : llvm::enumerate(mapped)) {
      if (m >= 0)
        anchor = p[m] + 1;
      else
        after[anchor].push_back(static_cast<int64_t>(j));
    }
    ArrayRef<int64_t> source =
        cast<RankedTensorType>(t.getInput().getType()).getShape();
    SmallVector<int64_t> sourceShape, perm(out.size());
    auto placeUnits = [&](int64_t slot) {
      for (int64_t j : after[slot]) {
        perm[j] = static_cast<int64_t>(sourceShape.size());
        sourceShape.push_back(1);
      }
    };
    placeUnits(0);
    for (int64_t s = 0; s < rank; ++s) {
      int64_t j =
          llvm::find(mapped, llvm::find(p, s) - p.begin()) - mapped.begin();
      perm[j] = static_cast<int64_t>(sourceShape.size());
      sourceShape.push_back(source[s]);
      placeUnits(s + 1);
    }
    auto type =
        RankedTensorType::get(sourceShape, op.getType().getElementType());
    auto reshaped =
        graph::ReshapeOp::create(rewriter, op.getLoc(), type, t.getInput(),
                                 rewriter.getDenseI64ArrayAttr(sourceShape));
    return replaceByTransposeOf(rewriter, op, reshaped, perm,
                                /*inferTypes=*/false);
  }
};

/// reshape(transpose(reshape(y, [a*b*.., rest]), p), [a, b, .., ...]) with
/// p keeping the merged leading dimension first: the reshapes only fold
/// y's leading dimensions into one batch and back, so this is one
/// transpose of y. The dynamo exporter writes key^T that way (heads
/// folded into the batch for a 3-D transpose); as one transpose of a view,
/// partc-fold-matmul-views reads it in place.
struct TransposeBetweenBatchReshapes : OpRewritePattern<graph::ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto t = op.getInput().getDefiningOp<graph::TransposeOp>();
    auto inner =
        t ? t.getInput().getDefiningOp<graph::ReshapeOp>() : graph::ReshapeOp();
    if (!inner)
      return failure();
    ArrayRef<int64_t> y =
        cast<RankedTensorType>(inner.getInput().getType()).getShape();
    ArrayRef<int64_t> merged = inner.getType().getShape();
    ArrayRef<int64_t> out = op.getType().getShape();
    ArrayRef<int64_t> p = t.getPerm();
    int64_t rank = static_cast<int64_t>(merged.size());
    // y = [leading..., rest...] with merged = [prod(leading), rest...].
    int64_t leading = static_cast<int64_t>(y.size()) - (rank - 1);
    if (rank < 2 || leading < 2 || p[0] != 0 ||
        !llvm::equal(y.drop_front(leading), merged.drop_front()) ||
        out.size() != y.size() ||
        !llvm::equal(out.take_front(leading), y.take_front(leading)))
      return failure();
    ArrayRef<int64_t> moved = t.getType().getShape();
    if (!llvm::equal(out.drop_front(leading), moved.drop_front()))
      return failure();
    SmallVector<int64_t> perm;
    for (int64_t d = 0; d < leading; ++d)
      perm.push_back(d);
    for (int64_t i = 1; i < rank; ++i)
      perm.push_back(p[i] - 1 + leading);
    std::optional<int64_t> device = graph::getDevice(op);
    auto unfolded = rewriter.replaceOpWithNewOp<graph::TransposeOp>(
        op, op.getType(), inner.getInput(),
        rewriter.getDenseI64ArrayAttr(perm));
    if (device)
      graph::setDevice(unfolded, *device);
    return success();
  }
};

/// A transpose that only moves unit dimensions keeps the element order: a
/// reshape, which is a view.
struct TransposeOfUnitDims : OpRewritePattern<graph::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::TransposeOp op,
                                PatternRewriter &rewriter) const override {
    if (!transposeIsView(
            cast<RankedTensorType>(op.getInput().getType()).getShape(),
            op.getPerm()))
      return failure();
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
    SmallVector<graph::ConvOp> patchConvs;
    getOperation().walk([&](graph::ConvOp op) {
      if (isPatchConv(op))
        patchConvs.push_back(op);
    });
    for (graph::ConvOp op : patchConvs)
      convertPatchConv(op);
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
    patterns.add<
        ComposeTransposes, SinkTransposeThroughElementwise, TransposeOfUnitDims,
        SinkTransposeThroughConcat, SinkTransposeThroughReshape,
        TransposeBetweenBatchReshapes, SinkTransposeThroughPad,
        SinkTransposeThroughSlice, SinkTransposeThroughExpand,
        SinkTransposeThroughUnitReshape, BatchNormOfTranspose,
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
