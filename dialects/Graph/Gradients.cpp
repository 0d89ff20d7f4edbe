//===- Gradients.cpp - Reverse-mode rules of graph ops --------------------===//
//
// GradientOpInterface, op by op, as BatchRules.cpp holds the batch rules:
// each rule builds the gradients of an op's operands from those of its
// results, in graph ops (so that folding, fusion, placement and both
// backends treat them as any other op) or in the backward ops of
// TrainingOps.td where a kernel does better. Element-wise results broadcast
// back to an operand's shape by summing (unbroadcast).
//
//===----------------------------------------------------------------------===//
#include "dialects/Graph/GraphOps.h"
#include "runtime/kernels/IndexTuples.h"
#include "runtime/kernels/Resize.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <numeric>

using namespace mlir;
using namespace mlir::partc::graph;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// A scalar constant of `elementType`; broadcasting ops take it as is.
Value scalar(OpBuilder &b, Location loc, Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  return ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(elementType, value)));
}

/// Sums `grad` over the dimensions that numpy broadcasting added to or
/// stretched in `target`'s shape, so that it has `target`'s type.
Value unbroadcast(OpBuilder &b, Location loc, Value grad, Type target) {
  auto from = tensorType(grad), to = cast<RankedTensorType>(target);
  if (from == to)
    return grad;
  int64_t lead = from.getRank() - to.getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < from.getRank(); ++d)
    if (d < lead || (to.getDimSize(d - lead) == 1 && from.getDimSize(d) != 1))
      axes.push_back(d);
  Value summed = grad;
  if (!axes.empty())
    summed = ReduceSumOp::create(b, loc, grad, axes, /*keepdims=*/1);
  if (tensorType(summed) != to)
    summed = ReshapeOp::create(b, loc, summed, to.getShape());
  return summed;
}

/// `grad` of a reduction's result, broadcast back to its input's shape.
Value unreduce(OpBuilder &b, Location loc, Value grad, ArrayRef<int64_t> axes,
               bool keepdims, RankedTensorType input) {
  if (!keepdims) {
    SmallVector<int64_t> kept(input.getShape());
    for (int64_t a : axes)
      kept[a] = 1;
    grad = ReshapeOp::create(b, loc, grad, kept);
  }
  if (tensorType(grad).getShape() == input.getShape())
    return grad;
  return ExpandOp::create(b, loc, grad, input.getShape());
}

/// The permutation that swaps the last two of `rank` dimensions.
SmallVector<int64_t> swapLastTwo(int64_t rank) {
  SmallVector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

/// The longest index or weight table a gradient rule writes into the plan
/// for one dimension (32 MiB of int64): longer ones are refused rather
/// than built at compile time.
constexpr int64_t kMaxGradientTable = int64_t(1) << 22;

/// An axis attribute (I64Attr, read unsigned) counted from the front.
int64_t nonNegativeAxis(uint64_t attribute, int64_t rank) {
  auto axis = static_cast<int64_t>(attribute);
  return axis < 0 ? axis + rank : axis;
}

LogicalResult refuseFused(Operation *op, StringAttr activation) {
  if (!activation)
    return success();
  return op->emitOpError()
         << "has a fused activation '" << activation.getValue()
         << "'; differentiate the graph before partc-fuse-activations";
}

} // namespace

//===----------------------------------------------------------------------===//
// Views and identities
//===----------------------------------------------------------------------===//

LogicalResult IdentityOp::buildGradient(OpBuilder &, ArrayRef<Value> dy,
                                        ArrayRef<bool>,
                                        MutableArrayRef<Value> dx) {
  dx[0] = dy[0];
  return success();
}

LogicalResult ReshapeOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                       ArrayRef<bool>,
                                       MutableArrayRef<Value> dx) {
  dx[0] =
      ReshapeOp::create(b, getLoc(), dy[0], tensorType(getInput()).getShape());
  return success();
}

LogicalResult TransposeOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                         ArrayRef<bool>,
                                         MutableArrayRef<Value> dx) {
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = static_cast<int64_t>(i);
  dx[0] = TransposeOp::create(b, getLoc(), dy[0], inverse);
  return success();
}

//===----------------------------------------------------------------------===//
// Unary math: dx = dy * f'(x), written with the result where it is cheaper
//===----------------------------------------------------------------------===//

LogicalResult ReluOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  dx[0] = ReluGradOp::create(b, getLoc(), dy[0], getResult());
  return success();
}

LogicalResult SigmoidOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                       ArrayRef<bool>,
                                       MutableArrayRef<Value> dx) {
  dx[0] = SigmoidGradOp::create(b, getLoc(), dy[0], getResult());
  return success();
}

LogicalResult TanhOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  dx[0] = TanhGradOp::create(b, getLoc(), dy[0], getResult());
  return success();
}

LogicalResult GeluOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  if (getApproximate() == "tanh")
    dx[0] = GeluTanhGradOp::create(b, getLoc(), dy[0], getInput());
  else
    dx[0] = GeluGradOp::create(b, getLoc(), dy[0], getInput());
  return success();
}

LogicalResult ExpOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool>, MutableArrayRef<Value> dx) {
  dx[0] = MulOp::create(b, getLoc(), dy[0], getResult());
  return success();
}

LogicalResult LogOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool>, MutableArrayRef<Value> dx) {
  dx[0] = DivOp::create(b, getLoc(), dy[0], getInput());
  return success();
}

LogicalResult SqrtOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  // dy / (2 sqrt(x)).
  Value half =
      scalar(b, getLoc(), tensorType(getInput()).getElementType(), 0.5);
  Value scaled = MulOp::create(b, getLoc(), dy[0], half);
  dx[0] = DivOp::create(b, getLoc(), scaled, getResult());
  return success();
}

LogicalResult NegOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool>, MutableArrayRef<Value> dx) {
  dx[0] = NegOp::create(b, getLoc(), dy[0]);
  return success();
}

LogicalResult AbsOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool>, MutableArrayRef<Value> dx) {
  // sign(0) = 0: PyTorch's subgradient at 0.
  Value sign = SignOp::create(b, getLoc(), getInput());
  dx[0] = MulOp::create(b, getLoc(), dy[0], sign);
  return success();
}

LogicalResult SoftplusOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                        ArrayRef<bool>,
                                        MutableArrayRef<Value> dx) {
  Value sigmoid = SigmoidOp::create(b, getLoc(), getInput());
  dx[0] = MulOp::create(b, getLoc(), dy[0], sigmoid);
  return success();
}

LogicalResult ErfOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool>, MutableArrayRef<Value> dx) {
  // 2 / sqrt(pi) * exp(-x^2): Gelu as exported before opset 20.
  Location loc = getLoc();
  Value x = getInput();
  Value square = MulOp::create(b, loc, x, x);
  Value bell = ExpOp::create(b, loc, NegOp::create(b, loc, square));
  Value slope = MulOp::create(
      b, loc, bell,
      scalar(b, loc, tensorType(x).getElementType(), 1.1283791670955126));
  dx[0] = MulOp::create(b, loc, dy[0], slope);
  return success();
}

//===----------------------------------------------------------------------===//
// More math and activations, written in graph ops (each a step of a fused
// element-wise chain on the GPU). At a kink the gradient is PyTorch's.
//===----------------------------------------------------------------------===//

namespace {
/// Builds an element-wise gradient from graph ops: constants of the
/// input's element type and comparisons turned into 0/1 masks.
struct PointwiseGrad {
  OpBuilder &b;
  Location loc;
  Value x;

  Value c(double value) {
    return scalar(b, loc, tensorType(x).getElementType(), value);
  }
  Value mask(Value predicate) {
    auto type = tensorType(predicate);
    Type element = tensorType(x).getElementType();
    return CastOp::create(b, loc,
                          RankedTensorType::get(type.getShape(), element),
                          predicate, TypeAttr::get(element));
  }
  Value mul(Value l, Value r) { return MulOp::create(b, loc, l, r); }
  Value add(Value l, Value r) {
    return AddOp::create(b, loc, l, r, StringAttr());
  }
  Value sub(Value l, Value r) { return SubOp::create(b, loc, l, r); }
  Value div(Value l, Value r) { return DivOp::create(b, loc, l, r); }
  Value gt(Value l, Value r) { return GreaterOp::create(b, loc, l, r); }
  Value lt(Value l, Value r) { return LessOp::create(b, loc, l, r); }
  Value where(Value cond, Value l, Value r) {
    return WhereOp::create(b, loc, cond, l, r);
  }
  /// 1 where lo < v < hi, else 0.
  Value inside(Value v, double lo, double hi) {
    // One statement per op: the IR's order must not depend on the
    // compiler's order of evaluating arguments.
    Value above = gt(v, c(lo));
    Value below = lt(v, c(hi));
    return mask(AndOp::create(b, loc, above, below));
  }
  /// 1 / sqrt(v).
  Value rsqrt(Value v) {
    return ReciprocalOp::create(b, loc, SqrtOp::create(b, loc, v));
  }
};
} // namespace

LogicalResult ReciprocalOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                          ArrayRef<bool>,
                                          MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value y = getResult();
  dx[0] = g.mul(dy[0], NegOp::create(b, getLoc(), g.mul(y, y)));
  return success();
}

/// Floor, Ceil, Round and Sign are flat wherever they have a slope.
static Value zeroGradient(OpBuilder &b, Location loc, Value x) {
  auto type = tensorType(x);
  return ExpandOp::create(b, loc, scalar(b, loc, type.getElementType(), 0.0),
                          type.getShape());
}
LogicalResult FloorOp::buildGradient(OpBuilder &b, ArrayRef<Value>,
                                     ArrayRef<bool>,
                                     MutableArrayRef<Value> dx) {
  dx[0] = zeroGradient(b, getLoc(), getInput());
  return success();
}
LogicalResult CeilOp::buildGradient(OpBuilder &b, ArrayRef<Value>,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  dx[0] = zeroGradient(b, getLoc(), getInput());
  return success();
}
LogicalResult RoundOp::buildGradient(OpBuilder &b, ArrayRef<Value>,
                                     ArrayRef<bool>,
                                     MutableArrayRef<Value> dx) {
  dx[0] = zeroGradient(b, getLoc(), getInput());
  return success();
}
LogicalResult SignOp::buildGradient(OpBuilder &b, ArrayRef<Value>,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  dx[0] = zeroGradient(b, getLoc(), getInput());
  return success();
}

LogicalResult SinOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool>, MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  dx[0] = g.mul(dy[0], CosOp::create(b, getLoc(), getInput()));
  return success();
}

LogicalResult CosOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool>, MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  dx[0] = g.mul(dy[0], NegOp::create(b, getLoc(),
                                     SinOp::create(b, getLoc(), getInput())));
  return success();
}

LogicalResult TanOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool>, MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value y = getResult();
  dx[0] = g.mul(dy[0], g.add(g.c(1.0), g.mul(y, y)));
  return success();
}

LogicalResult AsinOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value x = getInput();
  dx[0] = g.mul(dy[0], g.rsqrt(g.sub(g.c(1.0), g.mul(x, x))));
  return success();
}

LogicalResult AcosOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value x = getInput();
  dx[0] = NegOp::create(b, getLoc(),
                        g.mul(dy[0], g.rsqrt(g.sub(g.c(1.0), g.mul(x, x)))));
  return success();
}

LogicalResult AtanOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value x = getInput();
  dx[0] = g.div(dy[0], g.add(g.c(1.0), g.mul(x, x)));
  return success();
}

LogicalResult SinhOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  dx[0] = g.mul(dy[0], CoshOp::create(b, getLoc(), getInput()));
  return success();
}

LogicalResult CoshOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  dx[0] = g.mul(dy[0], SinhOp::create(b, getLoc(), getInput()));
  return success();
}

LogicalResult AsinhOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                     ArrayRef<bool>,
                                     MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value x = getInput();
  dx[0] = g.mul(dy[0], g.rsqrt(g.add(g.mul(x, x), g.c(1.0))));
  return success();
}

LogicalResult AcoshOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                     ArrayRef<bool>,
                                     MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value x = getInput();
  dx[0] = g.mul(dy[0], g.rsqrt(g.sub(g.mul(x, x), g.c(1.0))));
  return success();
}

LogicalResult AtanhOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                     ArrayRef<bool>,
                                     MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value x = getInput();
  dx[0] = g.div(dy[0], g.sub(g.c(1.0), g.mul(x, x)));
  return success();
}

LogicalResult ClipOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  // Inside the bounds only, as PyTorch's hardtanh (ReLU6) passes it; an
  // infinite bound never stops it.
  PointwiseGrad g{b, getLoc(), getInput()};
  dx[0] = g.mul(dy[0], g.inside(getInput(), getMin().convertToDouble(),
                                getMax().convertToDouble()));
  return success();
}

LogicalResult ShrinkOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                      ArrayRef<bool>,
                                      MutableArrayRef<Value> dx) {
  // Slope 1 outside [-lambd, lambd], 0 inside.
  PointwiseGrad g{b, getLoc(), getInput()};
  double lambd = getLambd().convertToDouble();
  Value below = g.lt(getInput(), g.c(-lambd));
  Value above = g.gt(getInput(), g.c(lambd));
  dx[0] = g.mul(dy[0], g.mask(OrOp::create(b, getLoc(), below, above)));
  return success();
}

LogicalResult ThresholdedReluOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                               ArrayRef<bool>,
                                               MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value passes = g.gt(getInput(), g.c(getAlpha().convertToDouble()));
  dx[0] = g.mul(dy[0], g.mask(passes));
  return success();
}

LogicalResult LeakyReluOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                         ArrayRef<bool>,
                                         MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value slope = g.where(g.gt(getInput(), g.c(0.0)), g.c(1.0),
                        g.c(getAlpha().convertToDouble()));
  dx[0] = g.mul(dy[0], slope);
  return success();
}

LogicalResult EluOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool>, MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value x = getInput();
  Value negative =
      g.mul(g.c(getAlpha().convertToDouble()), ExpOp::create(b, getLoc(), x));
  dx[0] = g.mul(dy[0], g.where(g.gt(x, g.c(0.0)), g.c(1.0), negative));
  return success();
}

LogicalResult SeluOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value x = getInput();
  double gamma = getGamma().convertToDouble();
  Value negative = g.mul(g.c(gamma * getAlpha().convertToDouble()),
                         ExpOp::create(b, getLoc(), x));
  dx[0] = g.mul(dy[0], g.where(g.gt(x, g.c(0.0)), g.c(gamma), negative));
  return success();
}

LogicalResult CeluOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value x = getInput();
  Value negative =
      ExpOp::create(b, getLoc(), g.div(x, g.c(getAlpha().convertToDouble())));
  dx[0] = g.mul(dy[0], g.where(g.gt(x, g.c(0.0)), g.c(1.0), negative));
  return success();
}

LogicalResult HardSigmoidOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                           ArrayRef<bool>,
                                           MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  double alpha = getAlpha().convertToDouble();
  Value t =
      g.add(g.mul(getInput(), g.c(alpha)), g.c(getBeta().convertToDouble()));
  dx[0] = g.mul(dy[0], g.mul(g.inside(t, 0.0, 1.0), g.c(alpha)));
  return success();
}

LogicalResult HardSwishOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                         ArrayRef<bool>,
                                         MutableArrayRef<Value> dx) {
  // x * clamp(x / 6 + 1 / 2, 0, 1): 0 below -3, x / 3 + 1 / 2 up to 3,
  // 1 above (PyTorch's hardswish_backward).
  PointwiseGrad g{b, getLoc(), getInput()};
  Value x = getInput();
  Value middle = g.add(g.div(x, g.c(3.0)), g.c(0.5));
  Value slope = g.where(g.lt(x, g.c(-3.0)), g.c(0.0),
                        g.where(g.gt(x, g.c(3.0)), g.c(1.0), middle));
  dx[0] = g.mul(dy[0], slope);
  return success();
}

LogicalResult MishOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  // tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus(x).
  PointwiseGrad g{b, getLoc(), getInput()};
  Value x = getInput();
  Value t = TanhOp::create(b, getLoc(), SoftplusOp::create(b, getLoc(), x));
  Value s = SigmoidOp::create(b, getLoc(), x);
  Value slope = g.add(t, g.mul(g.mul(x, s), g.sub(g.c(1.0), g.mul(t, t))));
  dx[0] = g.mul(dy[0], slope);
  return success();
}

LogicalResult SoftsignOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                        ArrayRef<bool>,
                                        MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, getLoc(), getInput()};
  Value d = g.add(g.c(1.0), AbsOp::create(b, getLoc(), getInput()));
  dx[0] = g.div(dy[0], g.mul(d, d));
  return success();
}

//===----------------------------------------------------------------------===//
// Binary arithmetic
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool> needed,
                                   MutableArrayRef<Value> dx) {
  if (failed(refuseFused(*this, getActivationAttr())))
    return failure();
  if (needed[0])
    dx[0] = unbroadcast(b, getLoc(), dy[0], getLhs().getType());
  if (needed[1])
    dx[1] = unbroadcast(b, getLoc(), dy[0], getRhs().getType());
  return success();
}

LogicalResult SubOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool> needed,
                                   MutableArrayRef<Value> dx) {
  if (needed[0])
    dx[0] = unbroadcast(b, getLoc(), dy[0], getLhs().getType());
  if (needed[1])
    dx[1] = unbroadcast(b, getLoc(), NegOp::create(b, getLoc(), dy[0]),
                        getRhs().getType());
  return success();
}

LogicalResult MulOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool> needed,
                                   MutableArrayRef<Value> dx) {
  Location loc = getLoc();
  if (needed[0])
    dx[0] = unbroadcast(b, loc, MulOp::create(b, loc, dy[0], getRhs()),
                        getLhs().getType());
  if (needed[1])
    dx[1] = unbroadcast(b, loc, MulOp::create(b, loc, dy[0], getLhs()),
                        getRhs().getType());
  return success();
}

LogicalResult DivOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool> needed,
                                   MutableArrayRef<Value> dx) {
  Location loc = getLoc();
  Value scaled = DivOp::create(b, loc, dy[0], getRhs());
  if (needed[0])
    dx[0] = unbroadcast(b, loc, scaled, getLhs().getType());
  if (needed[1]) {
    // d(a / b)/db = -(a / b) / b.
    Value term = MulOp::create(b, loc, scaled, getResult());
    dx[1] =
        unbroadcast(b, loc, NegOp::create(b, loc, term), getRhs().getType());
  }
  return success();
}

LogicalResult PowOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool> needed,
                                   MutableArrayRef<Value> dx) {
  Location loc = getLoc();
  // Both operands have the base's float type (the importer casts).
  Type exponentType = tensorType(getRhs()).getElementType();
  if (needed[0]) {
    // y * x^(y - 1).
    Value lower =
        SubOp::create(b, loc, getRhs(), scalar(b, loc, exponentType, 1.0));
    Value slope =
        MulOp::create(b, loc, getRhs(), PowOp::create(b, loc, getLhs(), lower));
    dx[0] = unbroadcast(b, loc, MulOp::create(b, loc, dy[0], slope),
                        getLhs().getType());
  }
  if (needed[1]) {
    // x^y log(x): NaN for a negative base, as PyTorch gives.
    Value slope =
        MulOp::create(b, loc, getResult(), LogOp::create(b, loc, getLhs()));
    dx[1] = unbroadcast(b, loc, MulOp::create(b, loc, dy[0], slope),
                        getRhs().getType());
  }
  return success();
}

LogicalResult WhereOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                     ArrayRef<bool> needed,
                                     MutableArrayRef<Value> dx) {
  // The condition is boolean, so it never needs one.
  Location loc = getLoc();
  Value zero = scalar(b, loc, tensorType(dy[0]).getElementType(), 0.0);
  if (needed[1])
    dx[1] = unbroadcast(b, loc,
                        WhereOp::create(b, loc, getCondition(), dy[0], zero),
                        getX().getType());
  if (needed[2])
    dx[2] = unbroadcast(b, loc,
                        WhereOp::create(b, loc, getCondition(), zero, dy[0]),
                        getY().getType());
  return success();
}

/// Max and Min of two tensors: the gradient to the side that won, halved
/// between the two on a tie (PyTorch's maximum and minimum).
static void extremumOfTwoGradient(OpBuilder &b, Location loc, Value lhs,
                                  Value rhs, Value grad, bool isMax,
                                  ArrayRef<bool> needed,
                                  MutableArrayRef<Value> dx) {
  PointwiseGrad g{b, loc, lhs};
  Value wins = g.mask(isMax ? g.gt(lhs, rhs) : g.lt(lhs, rhs));
  Value ties = g.mask(EqualOp::create(b, loc, lhs, rhs));
  Value half = g.c(0.5);
  Value share = g.add(wins, g.mul(ties, half)); // lhs's share
  Value lhsGrad = g.mul(grad, share);
  if (needed[0])
    dx[0] = unbroadcast(b, loc, lhsGrad, lhs.getType());
  if (needed[1])
    dx[1] = unbroadcast(b, loc, g.sub(grad, lhsGrad), rhs.getType());
}

LogicalResult MaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool> needed,
                                   MutableArrayRef<Value> dx) {
  extremumOfTwoGradient(b, getLoc(), getLhs(), getRhs(), dy[0],
                        /*isMax=*/true, needed, dx);
  return success();
}

LogicalResult MinOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool> needed,
                                   MutableArrayRef<Value> dx) {
  extremumOfTwoGradient(b, getLoc(), getLhs(), getRhs(), dy[0],
                        /*isMax=*/false, needed, dx);
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult GemmOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool> needed,
                                    MutableArrayRef<Value> dx) {
  if (failed(refuseFused(*this, getActivationAttr())))
    return failure();
  Location loc = getLoc();
  APFloat alpha(getAlpha()), one(1.0), zero(0.0);
  bool transA = getTransA(), transB = getTransB();
  Value grad = dy[0];
  // Y = alpha op(A) op(B) + beta C; op(X) is X or X^T.
  if (needed[0])
    dx[0] = transA ? GemmOp::create(b, loc, getB(), grad, Value(), alpha, zero,
                                    transB, 1, StringAttr())
                   : GemmOp::create(b, loc, grad, getB(), Value(), alpha, zero,
                                    0, transB ? 0 : 1, StringAttr());
  if (needed[1])
    dx[1] = transB ? GemmOp::create(b, loc, grad, getA(), Value(), alpha, zero,
                                    1, transA, StringAttr())
                   : GemmOp::create(b, loc, getA(), grad, Value(), alpha, zero,
                                    transA ? 0 : 1, 0, StringAttr());
  if (getC() && needed[2]) {
    Value scaled = grad;
    if (getBeta().convertToDouble() != 1.0)
      scaled = MulOp::create(b, loc, grad,
                             scalar(b, loc, tensorType(grad).getElementType(),
                                    getBeta().convertToDouble()));
    dx[2] = unbroadcast(b, loc, scaled, getC().getType());
  }
  return success();
}

LogicalResult MatMulOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                      ArrayRef<bool> needed,
                                      MutableArrayRef<Value> dx) {
  if (!getEpilogue().empty() || getActivationAttr())
    return emitOpError() << "has a fused epilogue; differentiate the graph "
                            "before partc-fuse-activations";
  auto lhs = tensorType(getLhs()), rhs = tensorType(getRhs());
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOpError() << "multiplies " << lhs << " by " << rhs
                         << "; gradients of 1-D matmul operands are not "
                            "supported yet (reshape the vector to a matrix)";
  Location loc = getLoc();
  Value grad = dy[0];
  auto gradType = tensorType(grad);
  if (needed[0]) {
    // dA = dY B^T, summed over batch dimensions A broadcast along.
    Value rhsT =
        TransposeOp::create(b, loc, getRhs(), swapLastTwo(rhs.getRank()));
    Value full =
        MatMulOp::create(b, loc, grad, rhsT, ValueRange(), StringAttr());
    dx[0] = unbroadcast(b, loc, full, lhs);
  }
  if (needed[1]) {
    if (rhs.getRank() == 2 && lhs.getRank() > 2) {
      // A shared weight of a batched product (a linear layer over a
      // sequence): one GEMM over every row, A^T dY.
      int64_t k = lhs.getShape().back(), n = gradType.getShape().back();
      Value rows = ReshapeOp::create(
          b, loc, getLhs(), ArrayRef<int64_t>{lhs.getNumElements() / k, k});
      Value gradRows = ReshapeOp::create(
          b, loc, grad, ArrayRef<int64_t>{gradType.getNumElements() / n, n});
      dx[1] = GemmOp::create(b, loc, rows, gradRows, Value(), APFloat(1.0),
                             APFloat(0.0), 1, 0, StringAttr());
    } else {
      Value lhsT =
          TransposeOp::create(b, loc, getLhs(), swapLastTwo(lhs.getRank()));
      Value full =
          MatMulOp::create(b, loc, lhsT, grad, ValueRange(), StringAttr());
      dx[1] = unbroadcast(b, loc, full, rhs);
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax and reductions
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                       ArrayRef<bool> needed,
                                       MutableArrayRef<Value> dx) {
  // dx = y * (dy - sum(dy * y, axis)) in one op; a bias added before the
  // softmax gets the same, summed to its shape.
  Location loc = getLoc();
  Value grad = SoftmaxGradOp::create(
      b, loc, dy[0], getResult(), ValueRange(), getAxisAttr(), FloatAttr(),
      b.getI64IntegerAttr(0), b.getI64IntegerAttr(0));
  // With nan_to_zero, a row that was all -inf has y = 0, hence dx = 0.
  if (needed[0])
    dx[0] = grad;
  if (getBias() && needed[1])
    dx[1] = unbroadcast(b, loc, grad, getBias().getType());
  return success();
}

LogicalResult LogSoftmaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                          ArrayRef<bool>,
                                          MutableArrayRef<Value> dx) {
  // dx = dy - exp(y) * sum(dy, axis).
  Location loc = getLoc();
  Value sum = ReduceSumOp::create(
      b, loc, dy[0], ArrayRef<int64_t>{static_cast<int64_t>(getAxis())},
      /*keepdims=*/1);
  Value probs = ExpOp::create(b, loc, getResult());
  Value scaled = MulOp::create(b, loc, probs, sum);
  dx[0] = SubOp::create(b, loc, dy[0], scaled);
  return success();
}

LogicalResult ReduceSumOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                         ArrayRef<bool>,
                                         MutableArrayRef<Value> dx) {
  dx[0] = unreduce(b, getLoc(), dy[0], getAxes(), getKeepdims() != 0,
                   tensorType(getInput()));
  return success();
}

LogicalResult ReduceMeanOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                          ArrayRef<bool>,
                                          MutableArrayRef<Value> dx) {
  auto input = tensorType(getInput());
  int64_t count = 1;
  for (int64_t a : getAxes())
    count *= input.getDimSize(a);
  Location loc = getLoc();
  Value scale = scalar(b, loc, input.getElementType(),
                       1.0 / static_cast<double>(std::max<int64_t>(count, 1)));
  Value scaled = MulOp::create(b, loc, dy[0], scale);
  dx[0] = unreduce(b, loc, scaled, getAxes(), getKeepdims() != 0, input);
  return success();
}

/// The gradient of a maximum or minimum over `axes`: each element equal to
/// its extremum takes an even share of the result's gradient (ties split
/// it, as PyTorch's amax and amin do); the others get none.
static Value extremumGradient(OpBuilder &b, Location loc, Value input,
                              Value result, Value grad, ArrayRef<int64_t> axes,
                              bool keepdims) {
  auto type = tensorType(input);
  SmallVector<int64_t> kept(type.getShape());
  for (int64_t a : axes)
    kept[a] = 1;
  if (!keepdims) {
    result = ReshapeOp::create(b, loc, result, kept);
    grad = ReshapeOp::create(b, loc, grad, kept);
  }
  Value hit = EqualOp::create(b, loc, input, result);
  auto floatType =
      RankedTensorType::get(type.getShape(), type.getElementType());
  Value mask = CastOp::create(b, loc, floatType, hit,
                              TypeAttr::get(type.getElementType()));
  Value ties = ReduceSumOp::create(b, loc, mask, axes, /*keepdims=*/1);
  Value share = DivOp::create(b, loc, grad, ties);
  return MulOp::create(b, loc, mask, share);
}

LogicalResult ReduceMaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                         ArrayRef<bool>,
                                         MutableArrayRef<Value> dx) {
  dx[0] = extremumGradient(b, getLoc(), getInput(), getOutput(), dy[0],
                           getAxes(), getKeepdims() != 0);
  return success();
}

LogicalResult ReduceMinOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                         ArrayRef<bool>,
                                         MutableArrayRef<Value> dx) {
  dx[0] = extremumGradient(b, getLoc(), getInput(), getOutput(), dy[0],
                           getAxes(), getKeepdims() != 0);
  return success();
}

LogicalResult ReduceProdOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                          ArrayRef<bool>,
                                          MutableArrayRef<Value> dx) {
  // Each element's gradient is dy times the product of the others: y / x
  // where the reduction has no zero. Zeros are counted apart, so that no
  // division by zero is ever selected: with one zero only that element
  // gets the product of the others; with two or more, every element's
  // product of the others has a zero in it.
  Location loc = getLoc();
  auto input = tensorType(getInput());
  PointwiseGrad g{b, loc, getInput()};
  Value x = getInput();
  ArrayRef<int64_t> axes = getAxes();
  Value isZero = EqualOp::create(b, loc, x, g.c(0.0));
  Value zeroMask = g.mask(isZero);
  Value zeroCount = ReduceSumOp::create(b, loc, zeroMask, axes,
                                        /*keepdims=*/1);
  Value zerosAsOnes = g.where(isZero, g.c(1.0), x);
  Value others = ReduceProdOp::create(b, loc, zerosAsOnes, axes,
                                      /*keepdims=*/1);
  Value quotient = g.div(others, zerosAsOnes);
  Value noZero = EqualOp::create(b, loc, zeroCount, g.c(0.0));
  Value oneZero = EqualOp::create(b, loc, zeroCount, g.c(1.0));
  Value theZero = AndOp::create(b, loc, oneZero, isZero);
  Value atTheZero = g.where(theZero, others, g.c(0.0));
  Value local = g.where(noZero, quotient, atTheZero);
  Value grad = unreduce(b, loc, dy[0], axes, getKeepdims() != 0, input);
  dx[0] = g.mul(local, grad);
  return success();
}

LogicalResult GlobalMaxPoolOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                             ArrayRef<bool>,
                                             MutableArrayRef<Value> dx) {
  SmallVector<int64_t> spatial;
  for (int64_t d = 2; d < tensorType(getInput()).getRank(); ++d)
    spatial.push_back(d);
  dx[0] = extremumGradient(b, getLoc(), getInput(), getOutput(), dy[0], spatial,
                           /*keepdims=*/true);
  return success();
}

LogicalResult CumSumOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                      ArrayRef<bool>,
                                      MutableArrayRef<Value> dx) {
  // Element j reaches every sum that counts it: the running sum the other
  // way, exclusive as the forward one was.
  dx[0] = CumSumOp::create(b, getLoc(), dy[0].getType(), dy[0], getAxis(),
                           getExclusive(), getReverse() ? 0 : 1);
  return success();
}

LogicalResult LayerNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                         ArrayRef<bool> needed,
                                         MutableArrayRef<Value> dx) {
  // With x^ = (x - mean) r, r = 1 / sqrt(var + eps), g = dy * scale, over
  // the normalized dimensions: dx = r (g - mean(g) - x^ mean(g x^)).
  Location loc = getLoc();
  auto input = tensorType(getInput());
  // A scale (and bias) of the normalized shape: one op with kernels of its
  // own (two passes where the graph ops below take about fifteen).
  ArrayRef<int64_t> normShape = input.getShape().drop_front(getAxis());
  auto normalizedShape = [&](Value v) {
    return tensorType(v).getShape() == normShape;
  };
  if (normalizedShape(getScale()) &&
      (!getBias() || tensorType(getBias()) == tensorType(getScale()))) {
    auto grads =
        LayerNormGradOp::create(b, loc, dy[0], getInput(), getScale(),
                                /*addend=*/Value(), getAxis(), getEpsilon());
    if (needed[0])
      dx[0] = grads.getGradInput();
    if (needed[1])
      dx[1] = grads.getGradScale();
    if (getBias() && needed[2])
      dx[2] = grads.getGradBias();
    return success();
  }
  Type element = input.getElementType();
  SmallVector<int64_t> axes;
  for (int64_t d = getAxis(); d < input.getRank(); ++d)
    axes.push_back(d);
  auto mean = [&](Value v) -> Value {
    return ReduceMeanOp::create(b, loc, v, axes, /*keepdims=*/1);
  };
  Value centered = SubOp::create(b, loc, getInput(), mean(getInput()));
  Value variance = mean(MulOp::create(b, loc, centered, centered));
  Value deviation = SqrtOp::create(
      b, loc,
      AddOp::create(b, loc, variance,
                    scalar(b, loc, element, getEpsilon().convertToDouble()),
                    StringAttr()));
  Value rstd = DivOp::create(b, loc, scalar(b, loc, element, 1.0), deviation);
  Value normalized = MulOp::create(b, loc, centered, rstd);
  if (needed[0]) {
    Value g = MulOp::create(b, loc, dy[0], getScale());
    Value meanG = mean(g);
    Value meanGx = mean(MulOp::create(b, loc, g, normalized));
    Value inner = SubOp::create(b, loc, SubOp::create(b, loc, g, meanG),
                                MulOp::create(b, loc, normalized, meanGx));
    dx[0] = MulOp::create(b, loc, inner, rstd);
  }
  if (needed[1])
    dx[1] = unbroadcast(b, loc, MulOp::create(b, loc, dy[0], normalized),
                        getScale().getType());
  if (getBias() && needed[2])
    dx[2] = unbroadcast(b, loc, dy[0], getBias().getType());
  return success();
}

LogicalResult RmsNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                       ArrayRef<bool> needed,
                                       MutableArrayRef<Value> dx) {
  // y = x r s with r = 1 / sqrt(mean(x^2) + eps) over [axis, rank) and
  // g = dy s: dx = r g - x r^3 mean(g x); the scale's gradient is dy x r
  // summed over the other dimensions.
  Location loc = getLoc();
  auto input = tensorType(getInput());
  int64_t rank = input.getRank();
  int64_t axis = nonNegativeAxis(getAxis(), rank);
  SmallVector<int64_t> axes;
  for (int64_t d = axis; d < rank; ++d)
    axes.push_back(d);
  Type element = input.getElementType();
  Value x = getInput();
  Value meanSquare = ReduceMeanOp::create(b, loc, MulOp::create(b, loc, x, x),
                                          axes, /*keepdims=*/1);
  Value shifted = AddOp::create(
      b, loc, meanSquare,
      scalar(b, loc, element, getEpsilon().convertToDouble()), StringAttr());
  Value r = ReciprocalOp::create(b, loc, SqrtOp::create(b, loc, shifted));
  if (needed[0]) {
    Value g = getScale() ? MulOp::create(b, loc, dy[0], getScale()).getResult()
                         : dy[0];
    Value gx = ReduceMeanOp::create(b, loc, MulOp::create(b, loc, g, x), axes,
                                    /*keepdims=*/1);
    Value rCubed =
        MulOp::create(b, loc, MulOp::create(b, loc, r, r), r).getResult();
    Value along = MulOp::create(b, loc, x, MulOp::create(b, loc, gx, rCubed));
    dx[0] = SubOp::create(b, loc, MulOp::create(b, loc, g, r), along);
  }
  if (getScale() && needed[1]) {
    Value normalized = MulOp::create(b, loc, x, r);
    dx[1] = unbroadcast(b, loc, MulOp::create(b, loc, dy[0], normalized),
                        getScale().getType());
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxCrossEntropyOp::buildGradient(OpBuilder &b,
                                                   ArrayRef<Value> dy,
                                                   ArrayRef<bool>,
                                                   MutableArrayRef<Value> dx) {
  dx[0] = SoftmaxCrossEntropyGradOp::create(
      b, getLoc(), getLogits(), getLabels(), dy[0], getClassesAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling (channels first: partc-differentiate runs before
// partc-convert-layout)
//===----------------------------------------------------------------------===//

namespace {
LogicalResult refuseChannelsLast(Operation *op) {
  if (!op->hasAttr("channels_last"))
    return success();
  return op->emitOpError() << "is channels last; differentiate the graph "
                              "before partc-convert-layout";
}

/// The sum of `grad` [N, C, spatial...] over all but dimension 1, as `type`.
Value sumPerChannel(OpBuilder &b, Location loc, Value grad, Type type) {
  SmallVector<int64_t> axes{0};
  for (int64_t d = 2; d < tensorType(grad).getRank(); ++d)
    axes.push_back(d);
  Value sum = ReduceSumOp::create(b, loc, grad, axes, /*keepdims=*/0);
  if (sum.getType() != type)
    sum =
        ReshapeOp::create(b, loc, sum, cast<RankedTensorType>(type).getShape());
  return sum;
}
} // namespace

LogicalResult ConvOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool> needed,
                                    MutableArrayRef<Value> dx) {
  if (failed(refuseFused(*this, getActivationAttr())) ||
      failed(refuseChannelsLast(*this)))
    return failure();
  Location loc = getLoc();
  Value grad = dy[0];
  auto group = b.getI64IntegerAttr(getGroup());
  if (needed[0])
    dx[0] = ConvGradInputOp::create(
        b, loc, grad, getWeight(),
        b.getDenseI64ArrayAttr(tensorType(getInput()).getShape()),
        getStridesAttr(), getPadsAttr(), getDilationsAttr(), group,
        /*channels_last=*/nullptr);
  if (needed[1])
    dx[1] = ConvGradWeightOp::create(
        b, loc, getInput(), grad,
        b.getDenseI64ArrayAttr(tensorType(getWeight()).getShape()),
        getStridesAttr(), getPadsAttr(), getDilationsAttr(), group,
        /*channels_last=*/nullptr);
  if (getBias() && needed[2])
    dx[2] = sumPerChannel(b, loc, grad, getBias().getType());
  if (getAddend() && needed[3])
    dx[3] = grad;
  return success();
}

LogicalResult MaxPoolOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                       ArrayRef<bool>,
                                       MutableArrayRef<Value> dx) {
  if (failed(refuseChannelsLast(*this)))
    return failure();
  dx[0] = MaxPoolGradOp::create(
      b, getLoc(), dy[0], getInput(), getKernelShapeAttr(), getStridesAttr(),
      getPadsAttr(), getDilationsAttr(), getCeilModeAttr(),
      /*channels_last=*/nullptr);
  return success();
}

LogicalResult AvgPoolOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                       ArrayRef<bool>,
                                       MutableArrayRef<Value> dx) {
  if (failed(refuseChannelsLast(*this)))
    return failure();
  dx[0] = AvgPoolGradOp::create(
      b, getLoc(), dy[0],
      b.getDenseI64ArrayAttr(tensorType(getInput()).getShape()),
      getKernelShapeAttr(), getStridesAttr(), getPadsAttr(), getDilationsAttr(),
      getCeilModeAttr(), getCountIncludePadAttr(), /*channels_last=*/nullptr);
  return success();
}

LogicalResult GlobalAvgPoolOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                             ArrayRef<bool>,
                                             MutableArrayRef<Value> dx) {
  auto input = tensorType(getInput());
  int64_t positions = 1;
  for (int64_t d = 2; d < input.getRank(); ++d)
    positions *= input.getDimSize(d);
  Location loc = getLoc();
  Value scaled = MulOp::create(
      b, loc, dy[0],
      scalar(b, loc, input.getElementType(),
             1.0 / static_cast<double>(std::max<int64_t>(positions, 1))));
  dx[0] = ExpandOp::create(b, loc, scaled, input.getShape());
  return success();
}

LogicalResult BatchNormTrainOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                              ArrayRef<bool> needed,
                                              MutableArrayRef<Value> dx) {
  if (failed(refuseChannelsLast(*this)) ||
      failed(refuseFused(*this, getActivationAttr())))
    return failure();
  if (getAddend())
    return emitOpError() << "has a fused addend; differentiate the graph "
                            "before partc-fuse-activations";
  // The statistics feed only the running ones, which do not reach the
  // loss.
  auto grads = BatchNormGradOp::create(
      b, getLoc(), dy[0], getInput(), getScale(), getMean(), getVariance(),
      /*bias=*/Value(), getEpsilonAttr(), /*channels_last=*/nullptr,
      /*activation=*/nullptr);
  for (unsigned i = 0; i < 3; ++i)
    if (needed[i])
      dx[i] = grads->getResult(i);
  return success();
}

LogicalResult DropoutOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                       ArrayRef<bool>,
                                       MutableArrayRef<Value> dx) {
  // The same mask and scale: the same numbers drawn again.
  dx[0] = DropoutOp::create(b, getLoc(), dy[0], getStep(), getSeed(),
                            getRatioAttr(), getStreamAttr(), getOffsetAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ExpandOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                      ArrayRef<bool>,
                                      MutableArrayRef<Value> dx) {
  dx[0] = unbroadcast(b, getLoc(), dy[0], getInput().getType());
  return success();
}

LogicalResult ConcatOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                      ArrayRef<bool> needed,
                                      MutableArrayRef<Value> dx) {
  auto result = tensorType(getResult());
  int64_t axis = getAxis(), offset = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    int64_t size = tensorType(input).getDimSize(axis);
    if (needed[i]) {
      SmallVector<int64_t> starts(result.getRank(), 0), ends(result.getShape()),
          steps(result.getRank(), 1);
      starts[axis] = offset;
      ends[axis] = offset + size;
      dx[i] = SliceOp::create(b, getLoc(), dy[0], starts, ends, steps);
    }
    offset += size;
  }
  return success();
}

LogicalResult SplitOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                     ArrayRef<bool>,
                                     MutableArrayRef<Value> dx) {
  dx[0] = ConcatOp::create(b, getLoc(), dy, getAxis());
  return success();
}

LogicalResult SliceOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                     ArrayRef<bool>,
                                     MutableArrayRef<Value> dx) {
  // The gradient puts dy back where the slice read it and zeros elsewhere,
  // from ops that have kernels everywhere: reverse the dimensions read
  // backwards, spread strided ones apart with zeros (a unit axis padded to
  // the step and merged), then pad to the input's shape.
  auto input = tensorType(getInput());
  auto output = tensorType(getOutput());
  int64_t rank = input.getRank();
  ArrayRef<int64_t> starts = getStarts(), steps = getSteps();
  SmallVector<int64_t> first(rank), stride(rank), length(rank);
  bool reversed = false, spread = false;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = output.getDimSize(d);
    stride[d] = steps[d] < 0 ? -steps[d] : steps[d];
    // The lowest input index read, and the extent from it to the highest.
    first[d] = n == 0         ? 0
               : steps[d] > 0 ? starts[d]
                              : starts[d] + (n - 1) * steps[d];
    length[d] = n == 0 ? 0 : (n - 1) * stride[d] + 1;
    reversed |= n > 1 && steps[d] < 0;
    spread |= n > 1 && stride[d] > 1;
  }
  Value grad = dy[0];
  Location loc = getLoc();
  if (reversed) {
    SmallVector<int64_t> from(rank, 0), to(output.getShape()), by(rank, 1);
    for (int64_t d = 0; d < rank; ++d)
      if (output.getDimSize(d) > 1 && steps[d] < 0) {
        from[d] = output.getDimSize(d) - 1;
        to[d] = -1;
        by[d] = -1;
      }
    grad = SliceOp::create(b, loc, grad, from, to, by);
  }
  if (spread) {
    // [.., n, ..] -> [.., n, 1, ..] -> pad to [.., n, step, ..] -> [.., n *
    // step, ..] -> the first (n - 1) * step + 1.
    SmallVector<int64_t> unit, pads, merged;
    SmallVector<int64_t> padAfter;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t n = output.getDimSize(d);
      unit.push_back(n);
      padAfter.push_back(0);
      if (n > 1 && stride[d] > 1) {
        unit.push_back(1);
        padAfter.push_back(stride[d] - 1);
      }
      merged.push_back(n > 1 && stride[d] > 1 ? n * stride[d] : n);
    }
    pads.assign(unit.size(), 0);
    pads.append(padAfter);
    grad = ReshapeOp::create(b, loc, grad, unit);
    grad = PadOp::create(b, loc, grad, pads, "constant", APFloat(0.0));
    grad = ReshapeOp::create(b, loc, grad, merged);
    SmallVector<int64_t> from(rank, 0), by(rank, 1);
    grad = SliceOp::create(b, loc, grad, from, length, by);
  }
  SmallVector<int64_t> pads(2 * rank);
  for (int64_t d = 0; d < rank; ++d) {
    pads[d] = first[d];
    pads[d + rank] = input.getDimSize(d) - first[d] - length[d];
  }
  dx[0] = PadOp::create(b, loc, grad, pads, "constant", APFloat(0.0));
  return success();
}

LogicalResult PadOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                   ArrayRef<bool>, MutableArrayRef<Value> dx) {
  if (getMode() != "constant")
    return emitOpError() << "pads in mode '" << getMode()
                         << "'; only constant padding has a gradient so far";
  auto input = tensorType(getInput());
  int64_t rank = input.getRank();
  ArrayRef<int64_t> pads = getPads();
  SmallVector<int64_t> starts(rank), ends(rank), steps(rank, 1);
  // (Shape inference refuses negative pads.)
  for (int64_t d = 0; d < rank; ++d) {
    starts[d] = pads[d];
    ends[d] = pads[d] + input.getDimSize(d);
  }
  // The padding is constant: only the input's own elements pass gradients.
  dx[0] = SliceOp::create(b, getLoc(), dy[0], starts, ends, steps);
  return success();
}

//===----------------------------------------------------------------------===//
// Gathers
//===----------------------------------------------------------------------===//

/// The gradient of numpy.take(data, indices, axis) (data of type `data`)
/// from the result's gradient `grad`: every slice picked adds its gradient
/// where it came from (scatter_nd with add, slices picked twice add
/// twice), along another axis than the first with that axis moved to the
/// front and back.
static Value takeGradient(OpBuilder &b, Location loc, Value grad, Value indices,
                          int64_t axis, RankedTensorType data) {
  auto indexType = tensorType(indices);
  int64_t rank = data.getRank();
  int64_t picked = indexType.getNumElements();
  int64_t indexRank = indexType.getRank();
  // The data's dimensions with `axis` first.
  SmallVector<int64_t> toFront{axis}, fromFront(rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      toFront.push_back(d);
  for (int64_t d = 0; d < rank; ++d)
    fromFront[toFront[d]] = d;
  SmallVector<int64_t> table, rows{picked};
  for (int64_t d : toFront)
    table.push_back(data.getDimSize(d));
  rows.append(table.begin() + 1, table.end());
  // grad is data[:axis] + indices + data[axis + 1:]: the indices'
  // dimensions go first, then the rest in order.
  if (axis != 0 && indexRank > 0) {
    SmallVector<int64_t> indicesFirst;
    for (int64_t d = 0; d < indexRank; ++d)
      indicesFirst.push_back(axis + d);
    for (int64_t d = 0; d < axis; ++d)
      indicesFirst.push_back(d);
    for (int64_t d = axis + indexRank; d < rank - 1 + indexRank; ++d)
      indicesFirst.push_back(d);
    grad = TransposeOp::create(b, loc, grad, indicesFirst);
  }
  Value tuples =
      ReshapeOp::create(b, loc, indices, ArrayRef<int64_t>{picked, 1});
  Value updates = ReshapeOp::create(b, loc, grad, rows);
  // A zero broadcast, not a zero constant: a vocabulary-sized table of
  // zeros would be stored in the plan (folding keeps small ones).
  Value zeros = ExpandOp::create(
      b, loc, scalar(b, loc, data.getElementType(), 0.0), table);
  Value scattered = ScatterNdOp::create(b, loc, zeros, tuples, updates,
                                        b.getStringAttr("add"));
  return axis == 0 ? scattered
                   : TransposeOp::create(b, loc, scattered, fromFront);
}

LogicalResult GatherOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                      ArrayRef<bool>,
                                      MutableArrayRef<Value> dx) {
  // An embedding lookup's gradient; along another axis, a class token's
  // x[:, 0].
  auto data = tensorType(getData());
  auto indices = tensorType(getIndices());
  if (!indices.getElementType().isInteger(64))
    return emitOpError() << "has indices of type " << indices
                         << "; its gradient needs int64 indices";
  int64_t axis = nonNegativeAxis(getAxis(), data.getRank());
  dx[0] = takeGradient(b, getLoc(), dy[0], getIndices(), axis, data);
  return success();
}

/// An int64 constant of `shape` (one extent not 1) counting 0, 1, ... along
/// that extent.
static Value iotaAlong(OpBuilder &b, Location loc, ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t extent : shape)
    count *= extent;
  SmallVector<int64_t> values(count);
  std::iota(values.begin(), values.end(), int64_t(0));
  auto type = RankedTensorType::get(shape, b.getI64Type());
  return ConstantOp::create(b, loc,
                            DenseElementsAttr::get(type, ArrayRef(values)));
}

/// The gradient of GatherElements(data, indices, axis) (and of TopK's
/// values, which are that gather of its indices) from the result's
/// gradient `grad`: each element adds into the one it was read from.
/// Written as scatter_nd with add, whose index tuples are each element's
/// own coordinates with the `axis` one replaced by its index.
static FailureOr<Value> gatherElementsGradient(Operation *op, OpBuilder &b,
                                               Value grad, Value indices,
                                               int64_t axis,
                                               RankedTensorType data) {
  Location loc = op->getLoc();
  auto indexType = tensorType(indices);
  int64_t rank = indexType.getRank(), count = indexType.getNumElements();
  constexpr int64_t kMaxTuple = ::partc::runtime::IndexTuples::kMaxTuple;
  if (rank > kMaxTuple)
    return op->emitOpError()
           << "of rank " << rank << " has no gradient: index tuples cover "
           << kMaxTuple << " dimensions at most";
  if (!indexType.getElementType().isInteger(64)) {
    auto i64 = RankedTensorType::get(indexType.getShape(), b.getI64Type());
    indices =
        CastOp::create(b, loc, i64, indices, TypeAttr::get(b.getI64Type()));
  }
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && indexType.getDimSize(d) > kMaxGradientTable)
      return op->emitOpError()
             << "has no gradient: dimension " << d << " of its indices has "
             << indexType.getDimSize(d) << " elements, more than the "
             << kMaxGradientTable << " a coordinate table may hold";
  SmallVector<Value> columns;
  for (int64_t d = 0; d < rank; ++d) {
    Value column = indices;
    if (d != axis) {
      // Coordinate d of every element: a count along d, broadcast.
      SmallVector<int64_t> shape(rank, 1);
      shape[d] = indexType.getDimSize(d);
      column = iotaAlong(b, loc, shape);
      if (ArrayRef<int64_t>(shape) != indexType.getShape())
        column = ExpandOp::create(b, loc, column, indexType.getShape());
    }
    columns.push_back(
        ReshapeOp::create(b, loc, column, ArrayRef<int64_t>{count, 1}));
  }
  Value tuples =
      rank == 1 ? columns[0] : ConcatOp::create(b, loc, columns, 1).getResult();
  Value updates = ReshapeOp::create(b, loc, grad, ArrayRef<int64_t>{count});
  Value zeros = ExpandOp::create(
      b, loc, scalar(b, loc, data.getElementType(), 0.0), data.getShape());
  return ScatterNdOp::create(b, loc, zeros, tuples, updates,
                             b.getStringAttr("add"))
      .getResult();
}

LogicalResult GatherElementsOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                              ArrayRef<bool>,
                                              MutableArrayRef<Value> dx) {
  auto data = tensorType(getData());
  int64_t axis = nonNegativeAxis(getAxis(), data.getRank());
  FailureOr<Value> grad =
      gatherElementsGradient(*this, b, dy[0], getIndices(), axis, data);
  if (failed(grad))
    return failure();
  dx[0] = *grad;
  return success();
}

LogicalResult TopKOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                    ArrayRef<bool>, MutableArrayRef<Value> dx) {
  // The indices carry no gradient; the values are the input gathered at
  // them.
  auto input = tensorType(getInput());
  if (!dy[0]) {
    dx[0] = ExpandOp::create(b, getLoc(),
                             scalar(b, getLoc(), input.getElementType(), 0.0),
                             input.getShape());
    return success();
  }
  int64_t axis = nonNegativeAxis(getAxis(), input.getRank());
  FailureOr<Value> grad =
      gatherElementsGradient(*this, b, dy[0], getIndices(), axis, input);
  if (failed(grad))
    return failure();
  dx[0] = *grad;
  return success();
}

//===----------------------------------------------------------------------===//
// Resampling
//===----------------------------------------------------------------------===//

/// A constant of `element` type with `values` along dimension `d` of a
/// rank-`rank` shape of ones elsewhere, to broadcast along the others.
static Value alongDimension(OpBuilder &b, Location loc, Type element,
                            ArrayRef<double> values, int64_t d, int64_t rank) {
  SmallVector<int64_t> shape(rank, 1);
  shape[d] = static_cast<int64_t>(values.size());
  auto type = RankedTensorType::get(shape, element);
  SmallVector<Attribute> attrs;
  for (double v : values)
    attrs.push_back(b.getFloatAttr(element, v));
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, attrs));
}

static Value indexVector(OpBuilder &b, Location loc, ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                    b.getI64Type());
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, values));
}

LogicalResult ResizeOp::buildGradient(OpBuilder &b, ArrayRef<Value> dy,
                                      ArrayRef<bool>,
                                      MutableArrayRef<Value> dx) {
  // Nearest and (multi-)linear resampling are separable: along each
  // resized dimension, every output reads one input index (nearest) or two
  // with weights 1 - w and w (linear; the corners' weights are the
  // products). The gradient undoes one dimension at a time with the
  // gradient of a gather along it, from the coordinates that the kernels
  // compute (runtime/kernels/Resize.h).
  namespace rs = ::partc::runtime::resize;
  auto input = tensorType(getInput());
  auto output = tensorType(getOutput());
  int64_t rank = input.getRank();
  rs::Params p;
  std::string why;
  if (!rs::parseMode(getMode().str(), p.mode, why) ||
      !rs::parseCoordinates(getCoordinateTransformationMode().str(),
                            p.coordinates, why) ||
      !rs::parseRounding(getNearestMode().str(), p.rounding, why))
    return emitOpError() << "has no gradient: " << why;
  ArrayRef<double> scales = getScales();
  if (rank > rs::kMaxRank || static_cast<int64_t>(scales.size()) != rank)
    return emitOpError() << "of rank " << rank << " with " << scales.size()
                         << " scales has no gradient";
  p.rank = static_cast<int>(rank);
  for (int64_t d = 0; d < rank; ++d) {
    p.inShape[d] = input.getDimSize(d);
    p.outShape[d] = output.getDimSize(d);
    p.scale[d] = scales[d];
  }
  Location loc = getLoc();
  Type element = input.getElementType();
  Value grad = dy[0];
  SmallVector<int64_t> shape(output.getShape());
  for (int64_t d = 0; d < rank; ++d) {
    int dim = static_cast<int>(d);
    if (!rs::resized(p, dim))
      continue;
    int64_t in = p.inShape[d], out = p.outShape[d];
    if (out > kMaxGradientTable)
      return emitOpError() << "has no gradient: its dimension " << d
                           << " is resized to " << out
                           << " elements, more than the " << kMaxGradientTable
                           << " an index table may hold";
    SmallVector<int64_t> from = shape;
    from[d] = in;
    auto fromType = RankedTensorType::get(from, element);
    if (p.mode == rs::Mode::Nearest) {
      SmallVector<int64_t> index(out);
      for (int64_t x = 0; x < out; ++x)
        index[x] =
            rs::nearestIndex(p.rounding, rs::sourceCoordinate(p, dim, x), in);
      // An integer upsampling that repeats each input `step` times in
      // order (nearest x2 of a U-Net or an FPN): a sum over the repeats.
      int64_t step = in > 0 && out % in == 0 ? out / in : 0;
      bool repeats = step > 0;
      for (int64_t x = 0; repeats && x < out; ++x)
        repeats = index[x] == x / step;
      if (repeats) {
        SmallVector<int64_t> split = from;
        split.insert(split.begin() + d + 1, step);
        Value grouped = ReshapeOp::create(b, loc, grad, split);
        grad = ReduceSumOp::create(b, loc, grouped, ArrayRef<int64_t>{d + 1},
                                   /*keepdims=*/0);
      } else {
        grad =
            takeGradient(b, loc, grad, indexVector(b, loc, index), d, fromType);
      }
    } else {
      SmallVector<int64_t> low(out), high(out);
      SmallVector<double> upper(out), lower(out);
      for (int64_t x = 0; x < out; ++x) {
        double c = rs::sourceCoordinate(p, dim, x), f = std::floor(c);
        low[x] = rs::clampIndex(static_cast<int64_t>(f), in);
        high[x] = rs::clampIndex(static_cast<int64_t>(f) + 1, in);
        upper[x] = c - f;
        lower[x] = 1 - upper[x];
      }
      Value toLow = MulOp::create(
          b, loc, grad, alongDimension(b, loc, element, lower, d, rank));
      Value toHigh = MulOp::create(
          b, loc, grad, alongDimension(b, loc, element, upper, d, rank));
      // Separate statements: the order of the ops does not depend on the
      // compiler's order of evaluating arguments.
      Value fromLow =
          takeGradient(b, loc, toLow, indexVector(b, loc, low), d, fromType);
      Value fromHigh =
          takeGradient(b, loc, toHigh, indexVector(b, loc, high), d, fromType);
      grad = AddOp::create(b, loc, fromLow, fromHigh, StringAttr());
    }
    shape[d] = in;
  }
  dx[0] = grad;
  return success();
}
