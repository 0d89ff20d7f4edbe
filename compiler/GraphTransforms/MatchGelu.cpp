//===- MatchGelu.cpp - partc-match-gelu
//------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>

namespace mlir::partc {
#define GEN_PASS_DEF_MATCHGELU
#include "compiler/Passes.h.inc"

namespace {

bool near(std::optional<double> value, double expected) {
  return value && std::abs(*value - expected) <= 1e-6 * std::abs(expected);
}

/// If `op` is an Op with a constant of about `expected` on one side,
/// returns its other operand. With `skipInitializers` (before training's
/// differentiation), a constant that is an initializer is a parameter to
/// train, not part of a formula.
template <typename Op>
Value binaryWithConstant(Operation *op, double expected,
                         bool skipInitializers) {
  auto binary = dyn_cast_or_null<Op>(op);
  if (!binary)
    return {};
  for (unsigned k = 0; k < 2; ++k) {
    Value constant = binary->getOperand(1 - k);
    Operation *def = constant.getDefiningOp();
    if (skipInitializers && def &&
        def->hasAttr(graph::GraphDialect::kInitializerAttrName))
      continue;
    if (near(scalarF32Constant(constant), expected))
      return binary->getOperand(k);
  }
  return {};
}

/// Replaces `outer` by graph.gelu(x) with `approximate`, erasing `ops` (the
/// pattern, users first) and the scalars only they read.
void replaceByGelu(Operation *outer, Value x, StringRef approximate,
                   ArrayRef<Operation *> ops) {
  OpBuilder builder(outer);
  SmallVector<Location> locs;
  for (Operation *op : ops)
    locs.push_back(op->getLoc());
  auto gelu =
      graph::GeluOp::create(builder, FusedLoc::get(outer->getContext(), locs),
                            x, builder.getStringAttr(approximate));
  for (NamedAttribute a : outer->getDiscardableAttrs())
    gelu->setAttr(a.getName(), a.getValue());
  outer->getResult(0).replaceAllUsesWith(gelu.getResult());
  eraseWithTheirConstants(ops);
}

/// mul(mul(x, add(erf(x / sqrt(2)), 1)), 0.5), as exporters write ONNX's
/// exact Gelu before opset 20.
bool matchExactGelu(graph::MulOp outer, bool skip) {
  Value product = binaryWithConstant<graph::MulOp>(outer, 0.5, skip);
  auto inner = product ? product.getDefiningOp<graph::MulOp>() : nullptr;
  if (!inner || !product.hasOneUse())
    return false;
  for (unsigned k = 0; k < 2; ++k) {
    Value x = inner->getOperand(k), sum = inner->getOperand(1 - k);
    auto add = sum.getDefiningOp<graph::AddOp>();
    if (!add || !sum.hasOneUse() || add.getActivation())
      continue;
    Value erfValue = binaryWithConstant<graph::AddOp>(add, 1.0, skip);
    auto erf = erfValue ? erfValue.getDefiningOp<graph::ErfOp>() : nullptr;
    if (!erf || !erfValue.hasOneUse())
      continue;
    Operation *scale = erf.getInput().getDefiningOp();
    Value scaled =
        binaryWithConstant<graph::DivOp>(scale, std::sqrt(2.0), skip);
    if (!scaled)
      scaled = binaryWithConstant<graph::MulOp>(scale, std::sqrt(0.5), skip);
    if (scaled != x || !erf.getInput().hasOneUse() ||
        outer.getType() != cast<RankedTensorType>(x.getType()))
      continue;
    replaceByGelu(outer, x, "none", {outer, inner, add, erf, scale});
    return true;
  }
  return false;
}

/// The ops computing x^3 from `cube` (pow(x, 3), or x * x * x in either
/// grouping), users first, or none. Sets `x`.
SmallVector<Operation *, 2> cubeOf(Value cube, Value &x, bool skip) {
  if (Value base =
          binaryWithConstant<graph::PowOp>(cube.getDefiningOp(), 3.0, skip);
      base && cube.getDefiningOp()->getOperand(0) == base) {
    x = base;
    return {cube.getDefiningOp()};
  }
  auto outer = cube.getDefiningOp<graph::MulOp>();
  if (!outer)
    return {};
  for (unsigned k = 0; k < 2; ++k) {
    Value single = outer->getOperand(k), square = outer->getOperand(1 - k);
    auto inner = square.getDefiningOp<graph::MulOp>();
    if (inner && square.hasOneUse() && inner.getLhs() == single &&
        inner.getRhs() == single) {
      x = single;
      return {outer, inner};
    }
  }
  return {};
}

/// The ops of 1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)) rooted at `one`
/// (users first), each read only by the next, or none.
SmallVector<Operation *> tanhPart(graph::AddOp one, Value x, bool skip) {
  const double kScale = std::sqrt(2.0 / M_PI), kCubic = 0.044715;
  if (!one || !one->hasOneUse() || one.getActivation())
    return {};
  Value tanhValue = binaryWithConstant<graph::AddOp>(one, 1.0, skip);
  auto tanh = tanhValue ? tanhValue.getDefiningOp<graph::TanhOp>() : nullptr;
  if (!tanh || !tanhValue.hasOneUse() || !tanh.getInput().hasOneUse())
    return {};
  Operation *scale = tanh.getInput().getDefiningOp();
  Value sum = binaryWithConstant<graph::MulOp>(scale, kScale, skip);
  auto add = sum ? sum.getDefiningOp<graph::AddOp>() : nullptr;
  if (!add || !sum.hasOneUse() || add.getActivation())
    return {};
  for (unsigned j = 0; j < 2; ++j) {
    Value term = add->getOperand(1 - j);
    if (add->getOperand(j) != x || !term.hasOneUse())
      continue;
    Value cube =
        binaryWithConstant<graph::MulOp>(term.getDefiningOp(), kCubic, skip);
    Value base;
    SmallVector<Operation *, 2> cubeOps = cube && cube.hasOneUse()
                                              ? cubeOf(cube, base, skip)
                                              : SmallVector<Operation *, 2>();
    if (cubeOps.empty() || base != x)
      continue;
    SmallVector<Operation *> ops = {one, tanh, scale, add,
                                    term.getDefiningOp()};
    ops.append(cubeOps.begin(), cubeOps.end());
    return ops;
  }
  return {};
}

/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), as exporters write
/// Gelu's tanh form: mul(mul(x, 0.5), add(tanh(...), 1)) (GPT-2's
/// gelu_new) or mul(mul(x, add(...)), 0.5) (PyTorch's own approximate
/// Gelu below opset 20), with the factors of each product in either order.
bool matchTanhGelu(graph::MulOp outer, bool skip) {
  // mul(mul(x, 0.5), 1 + tanh(...)).
  for (unsigned k = 0; k < 2; ++k) {
    Value left = outer->getOperand(k), right = outer->getOperand(1 - k);
    Value x = binaryWithConstant<graph::MulOp>(left.getDefiningOp(), 0.5, skip);
    if (!x || !left.hasOneUse() || outer.getType() != x.getType())
      continue;
    SmallVector<Operation *> ops =
        tanhPart(right.getDefiningOp<graph::AddOp>(), x, skip);
    if (!ops.empty()) {
      ops.insert(ops.begin(), {outer, left.getDefiningOp()});
      replaceByGelu(outer, x, "tanh", ops);
      return true;
    }
  }
  // mul(mul(x, 1 + tanh(...)), 0.5).
  Value product = binaryWithConstant<graph::MulOp>(outer, 0.5, skip);
  auto inner = product ? product.getDefiningOp<graph::MulOp>() : nullptr;
  if (!inner || !product.hasOneUse())
    return false;
  for (unsigned j = 0; j < 2; ++j) {
    Value x = inner->getOperand(j);
    if (outer.getType() != x.getType())
      continue;
    SmallVector<Operation *> ops = tanhPart(
        inner->getOperand(1 - j).getDefiningOp<graph::AddOp>(), x, skip);
    if (!ops.empty()) {
      ops.insert(ops.begin(), {outer, inner});
      replaceByGelu(outer, x, "tanh", ops);
      return true;
    }
  }
  return false;
}

struct MatchGeluPass : public impl::MatchGeluBase<MatchGeluPass> {
  using MatchGeluBase::MatchGeluBase;

  void runOnOperation() override {
    SmallVector<graph::MulOp> muls;
    getOperation().walk([&](graph::MulOp mul) { muls.push_back(mul); });
    // A match erases only ops before the outer mul, which were visited.
    for (graph::MulOp mul : muls)
      if (!matchExactGelu(mul, skipInitializers))
        matchTanhGelu(mul, skipInitializers);
  }
};

} // namespace
} // namespace mlir::partc
