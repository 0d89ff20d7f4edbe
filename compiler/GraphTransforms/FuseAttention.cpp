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
    MaskMemo masks;
    for (graph::StridedMatMulOp weighted : products)
      fuse(weighted, masks);
  }

  /// What was found of each mask, which every layer reads: whether it is
  /// proved causal, and the bias the fused ops read for it (built once, at
  /// the first layer, which comes before the others).
  struct MaskMemo {
    DenseMap<Value, bool> causal;
    DenseMap<Value, Value> fusedBias;
  };

  /// A value that broadcasts to `v` and equals it there, at
  /// graph::narrowedBiasShape(v, causal): through expands, the deciding
  /// operand of an `and`, and the casts and wheres of such values, which
  /// are built again, before `builder`'s point and on the replaced op's
  /// device, at the narrower shape. The bias of attention then reads as
  /// what it is: Hugging Face's exports (transformers 5) expand BERT's
  /// padding mask [B, 1, 1, N] to [B, 1, M, N] through
  /// and(all true [1, 1, M, 1], mask), and GPT-2's causal mask is
  /// and(lower triangle, padding mask), whose triangle the fused op's
  /// `causal` restores; the kernels load a bias the same for every query
  /// once a step instead of once a row.
  static Value narrowBroadcast(Value v, graph::CausalExtents causal,
                               OpBuilder &builder) {
    Operation *def = v.getDefiningOp();
    if (auto expand = dyn_cast_or_null<graph::ExpandOp>(def))
      return narrowBroadcast(expand.getInput(), causal, builder);
    if (auto both = dyn_cast_or_null<graph::AndOp>(def)) {
      if (Value deciding = graph::decidingOperand(both, causal))
        return narrowBroadcast(deciding, causal, builder);
      return v;
    }
    auto placeLike = [&](Operation *made) {
      for (NamedAttribute a : def->getDiscardableAttrs())
        made->setAttr(a.getName(), a.getValue());
      return made->getResult(0);
    };
    if (auto convert = dyn_cast_or_null<graph::CastOp>(def)) {
      Value input = narrowBroadcast(convert.getInput(), causal, builder);
      if (input == convert.getInput())
        return v;
      Type element = convert.getTo();
      auto type = RankedTensorType::get(
          cast<RankedTensorType>(input.getType()).getShape(), element);
      return placeLike(graph::CastOp::create(builder, convert.getLoc(), type,
                                             input, TypeAttr::get(element)));
    }
    if (auto select = dyn_cast_or_null<graph::WhereOp>(def)) {
      // Only a condition whose false side is -inf may lose the triangle.
      Value condition = narrowBroadcast(
          select.getCondition(),
          graph::isMinusInfSplat(select.getY()) ? causal : std::nullopt,
          builder);
      Value x = narrowBroadcast(select.getX(), std::nullopt, builder);
      Value y = narrowBroadcast(select.getY(), std::nullopt, builder);
      if (condition == select.getCondition() && x == select.getX() &&
          y == select.getY())
        return v;
      auto narrowed =
          graph::WhereOp::create(builder, select.getLoc(), condition, x, y);
      if (narrowed.getType() == select.getType()) {
        // Nothing narrower: drop what was built for it.
        narrowed.erase();
        for (Value built : {condition, x, y})
          eraseUnusedChain(built);
        return v;
      }
      return placeLike(narrowed);
    }
    return v;
  }

  /// Fuses the attention whose last product is `weighted` (scores x
  /// values), if it is one.
  static void fuse(graph::StridedMatMulOp weighted, MaskMemo &masks) {
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
    int64_t queries = scoresType.getDimSize(rank - 2),
            keys = scoresType.getDimSize(rank - 1);
    Value bias = softmax.getBias();
    // Every layer reads the same mask: it is proved once.
    bool causal = false;
    if (bias) {
      auto known = masks.causal.try_emplace(bias, false);
      if (known.second)
        known.first->second = graph::masksAboveDiagonal(bias, queries, keys);
      causal = known.first->second;
    }
    OpBuilder builder(weighted);
    SmallVector<Value> operands = {scores.getLhs(), scores.getRhs(),
                                   weighted.getRhs()};
    // A mask that only hides the keys past each query is the causal
    // masking itself: the fused op reads none (a null bias in the memo).
    if (bias) {
      auto known = masks.fusedBias.try_emplace(bias, Value());
      if (known.second &&
          !(causal && graph::onlyHidesKeysPastQuery(bias, queries, keys)))
        known.first->second = narrowBroadcast(
            bias,
            causal ? graph::CausalExtents(std::make_pair(queries, keys))
                   : std::nullopt,
            builder);
      if (known.first->second)
        operands.push_back(known.first->second);
    }
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
    if (bias && bias != operands.back())
      eraseUnusedChain(bias);
  }

  /// Erases the ops narrowBroadcast looked through that nothing reads any
  /// more (the full-size mask), from `v` back.
  static void eraseUnusedChain(Value v) {
    Operation *def = v.getDefiningOp();
    if (!def || !def->use_empty() ||
        !isa<graph::ExpandOp, graph::AndOp, graph::CastOp, graph::WhereOp,
             graph::ConstantOp>(def))
      return;
    SmallVector<Value> operands(def->getOperands());
    def->erase();
    for (Value operand : operands)
      eraseUnusedChain(operand);
  }
};

} // namespace
} // namespace mlir::partc
