//===- FuseNormalizations.cpp - partc-fuse-normalizations -----------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::partc {
#define GEN_PASS_DEF_FUSENORMALIZATIONS
#include "compiler/Passes.h.inc"

namespace {

/// Ops of one written-out RMS normalization, root last.
struct RmsChain {
  bool skipInitializers = false;
  Value input;
  double epsilon = 0;
  SmallVector<Operation *> ops;
};

/// The op defining `v` if it is an OpTy whose result only the chain reads.
template <typename OpTy> OpTy singleUse(Value v) {
  auto op = v.getDefiningOp<OpTy>();
  return op && op->hasOneUse() ? op : OpTy();
}

/// Whether `v` is a model initializer, which training takes for a
/// parameter, not a constant of the formula.
bool isInitializer(Value v) {
  Operation *def = v.getDefiningOp();
  return def && def->hasAttr(graph::GraphDialect::kInitializerAttrName);
}

/// x where `v` is pow(x, 2) or x * x (the 2 not an initializer where
/// `skipInitializers`).
Value squaredOperand(Value v, bool skipInitializers) {
  if (auto pow = singleUse<graph::PowOp>(v))
    return isUniformFloatConstant(pow.getRhs(), 2.0) &&
                   !(skipInitializers && isInitializer(pow.getRhs()))
               ? pow.getLhs()
               : Value();
  if (auto mul = singleUse<graph::MulOp>(v))
    return mul.getLhs() == mul.getRhs() && !mul->hasAttr("activation")
               ? mul.getLhs()
               : Value();
  return {};
}

/// Matches sqrt(reduce_mean(x^2, last axis) + epsilon) in `v`, appending its
/// ops to `chain`.
bool matchRootMeanSquare(Value v, RmsChain &chain) {
  auto sqrt = singleUse<graph::SqrtOp>(v);
  auto add = sqrt ? singleUse<graph::AddOp>(sqrt.getInput()) : nullptr;
  if (!add || add->hasAttr("activation"))
    return false;
  Value meanValue = add.getLhs(), eps = add.getRhs();
  std::optional<double> epsilon = scalarF32Constant(eps);
  if (!epsilon) {
    std::swap(meanValue, eps);
    epsilon = scalarF32Constant(eps);
  }
  auto mean = singleUse<graph::ReduceMeanOp>(meanValue);
  if (!epsilon || !mean || !mean.getKeepdims() ||
      (chain.skipInitializers && isInitializer(eps)))
    return false;
  Value x = squaredOperand(mean.getInput(), chain.skipInitializers);
  auto type = x ? dyn_cast<RankedTensorType>(x.getType()) : nullptr;
  if (!type || !type.getElementType().isF32() || type.getRank() < 1 ||
      mean.getAxes().size() != 1 || mean.getAxes()[0] != type.getRank() - 1)
    return false;
  chain.input = x;
  chain.epsilon = *epsilon;
  chain.ops = {mean.getInput().getDefiningOp(), mean, add, sqrt};
  return true;
}

/// Matches x * (1 / rms), x * reciprocal(rms) or x / rms rooted at `root`.
bool matchRmsNorm(Operation *root, RmsChain &chain) {
  if (root->hasAttr("activation"))
    return false;
  if (auto div = dyn_cast<graph::DivOp>(root)) {
    if (!matchRootMeanSquare(div.getRhs(), chain) ||
        chain.input != div.getLhs())
      return false;
  } else if (auto mul = dyn_cast<graph::MulOp>(root)) {
    bool matched = false;
    for (auto [x, r] : {std::pair(mul.getLhs(), mul.getRhs()),
                        std::pair(mul.getRhs(), mul.getLhs())}) {
      Value rms;
      Operation *inverse = nullptr;
      if (auto rec = singleUse<graph::ReciprocalOp>(r)) {
        rms = rec.getInput();
        inverse = rec;
      } else if (auto div = singleUse<graph::DivOp>(r);
                 div && !div->hasAttr("activation") &&
                 isUniformFloatConstant(div.getLhs(), 1.0) &&
                 !(chain.skipInitializers && isInitializer(div.getLhs())) &&
                 cast<RankedTensorType>(div.getLhs().getType())
                         .getNumElements() == 1) {
        rms = div.getRhs();
        inverse = div;
      }
      if (rms && matchRootMeanSquare(rms, chain) && chain.input == x) {
        chain.ops.push_back(inverse);
        matched = true;
        break;
      }
    }
    if (!matched)
      return false;
  } else {
    return false;
  }
  chain.ops.push_back(root);
  return root->getResult(0).getType() == chain.input.getType() &&
         llvm::all_of(chain.ops, [&](Operation *op) {
           return graph::getDevice(op) == graph::getDevice(root);
         });
}

/// The OpTy (a multiply by the weight, an add of the bias) that is the
/// only user of `normalized`'s result, with a constant of one f32 value per
/// channel (set in `constant`) on its other side; null if there is none.
template <typename OpTy>
OpTy perChannelUser(Operation *normalized, Value &constant) {
  Value result = normalized->getResult(0);
  if (!result.hasOneUse())
    return nullptr;
  auto op = dyn_cast<OpTy>(*result.getUsers().begin());
  if (!op || op->hasAttr("activation") || op.getType() != result.getType() ||
      graph::getDevice(op) != graph::getDevice(normalized))
    return nullptr;
  constant = op.getLhs() == result ? op.getRhs() : op.getLhs();
  auto type = cast<RankedTensorType>(constant.getType());
  int64_t channels = cast<RankedTensorType>(result.getType()).getShape().back();
  if (!constant.getDefiningOp<graph::ConstantOp>() || type.getRank() != 1 ||
      type.getDimSize(0) != channels || !type.getElementType().isF32())
    return nullptr;
  return op;
}

/// The shift and its mean where `input` is x - reduce_mean(x) over the last
/// axis (kept) and only `chain`'s square and root read it: the centred
/// input of layer normalization written out op by op (PyTorch's exports
/// below opset 17).
std::pair<graph::SubOp, graph::ReduceMeanOp>
centredInput(Value input, const RmsChain &chain) {
  auto sub = input.getDefiningOp<graph::SubOp>();
  if (!sub || sub->hasAttr("activation"))
    return {};
  auto mean = singleUse<graph::ReduceMeanOp>(sub.getRhs());
  auto type = cast<RankedTensorType>(input.getType());
  if (!mean || mean.getInput() != sub.getLhs() || !mean.getKeepdims() ||
      mean.getAxes().size() != 1 || mean.getAxes()[0] != type.getRank() - 1 ||
      sub.getLhs().getType() != type ||
      graph::getDevice(sub) != graph::getDevice(chain.ops.back()) ||
      graph::getDevice(mean) != graph::getDevice(sub))
    return {};
  for (Operation *user : sub->getUsers())
    if (!llvm::is_contained(chain.ops, user))
      return {};
  return {sub, mean};
}

struct FuseNormalizationsPass
    : public impl::FuseNormalizationsBase<FuseNormalizationsPass> {
  using FuseNormalizationsBase::FuseNormalizationsBase;
  void runOnOperation() override {
    SmallVector<Operation *> roots;
    getOperation().walk([&](Operation *op) {
      if (isa<graph::MulOp, graph::DivOp>(op))
        roots.push_back(op);
    });
    llvm::SmallPtrSet<Operation *, 16> erased;
    for (Operation *root : roots) {
      RmsChain chain;
      chain.skipInitializers = skipInitializers;
      if (erased.contains(root) || !matchRmsNorm(root, chain))
        continue;
      Value weight;
      graph::MulOp scale = perChannelUser<graph::MulOp>(root, weight);
      SmallVector<Location> locs;
      for (Operation *op : chain.ops)
        locs.push_back(op->getLoc());
      if (scale)
        locs.push_back(scale.getLoc());
      // Normalizing x - mean(x) is layer normalization; its bias is the
      // per-channel constant added after the weight, if any. (Folding drops
      // a weight of ones and a bias of zeros: PyTorch's defaults.)
      auto [centre, mean] = centredInput(chain.input, chain);
      Value bias;
      graph::AddOp shift = centre
                               ? perChannelUser<graph::AddOp>(
                                     scale ? scale.getOperation() : root, bias)
                               : nullptr;
      if (centre)
        locs.append({mean.getLoc(), centre.getLoc()});
      if (shift)
        locs.push_back(shift.getLoc());
      Operation *last = shift   ? shift.getOperation()
                        : scale ? scale.getOperation()
                                : root;
      OpBuilder builder(last);
      auto type = cast<RankedTensorType>(chain.input.getType());
      Location loc = FusedLoc::get(root->getContext(), locs);
      // graph.layer_norm takes a weight: ones where folding dropped it.
      if (centre && !weight) {
        auto ones = RankedTensorType::get({type.getShape().back()},
                                          builder.getF32Type());
        weight = graph::ConstantOp::create(builder, loc, ones,
                                           DenseElementsAttr::get(ones, 1.0f));
      }
      Operation *norm =
          centre ? graph::LayerNormOp::create(
                       builder, loc, type, centre.getLhs(), weight, bias,
                       builder.getI64IntegerAttr(type.getRank() - 1),
                       builder.getF64FloatAttr(chain.epsilon))
                       .getOperation()
                 : graph::RmsNormOp::create(
                       builder, loc, type, chain.input, weight,
                       builder.getI64IntegerAttr(type.getRank() - 1),
                       builder.getF64FloatAttr(chain.epsilon))
                       .getOperation();
      for (NamedAttribute a : root->getDiscardableAttrs())
        norm->setAttr(a.getName(), a.getValue());
      last->getResult(0).replaceAllUsesWith(norm->getResult(0));
      SmallVector<Operation *> dead;
      if (shift)
        dead.push_back(shift);
      if (scale)
        dead.push_back(scale);
      // Root first: each op's only user goes before it.
      llvm::append_range(dead, llvm::reverse(chain.ops));
      if (centre)
        dead.append({centre, mean});
      erased.insert(dead.begin(), dead.end());
      eraseWithTheirConstants(dead);
    }
  }
};

} // namespace
} // namespace mlir::partc
