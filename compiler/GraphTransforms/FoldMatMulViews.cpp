//===- FoldMatMulViews.cpp - partc-fold-matmul-views ----------------------===//
//
// Attention splits a projection into heads with slices, reshapes and
// transposes, multiplies them, scales the scores and merges the heads back
// with a transpose and a reshape. Each of those is a full copy of a tensor
// as large as the GEMM's own operands, although GEMM libraries can read a
// matrix at any leading dimension and a batch of matrices at any offsets.
// This pass composes those ops into strided views read by one
// graph.strided_matmul, folds a scalar scale into its alpha and a result
// transpose and reshape into the layout it writes.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
#include "mlir/IR/Builders.h"
#include "runtime/kernels/StridedMatMul.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace mlir::partc {
#define GEN_PASS_DEF_FOLDMATMULVIEWS
#include "compiler/Passes.h.inc"

namespace {

namespace strided = ::partc::runtime::strided;

strided::View contiguousView(ArrayRef<int64_t> shape) {
  return strided::contiguous({shape.begin(), shape.end()});
}

/// Applies the slice, split, transpose or reshape that defines `value` to
/// the view of its operand; false for other ops and for what strides
/// cannot express (reversed or empty slices, merges of strided dimensions).
bool applyViewOp(Value value, strided::View &v) {
  auto slice = [&](ArrayRef<int64_t> starts, ArrayRef<int64_t> ends,
                   ArrayRef<int64_t> steps) {
    for (size_t d = 0; d < v.shape.size(); ++d) {
      if (steps[d] < 1 || ends[d] <= starts[d])
        return false;
      v.offset += starts[d] * v.strides[d];
      v.shape[d] = (ends[d] - starts[d] + steps[d] - 1) / steps[d];
      v.strides[d] *= steps[d];
    }
    return true;
  };
  return llvm::TypeSwitch<Operation *, bool>(value.getDefiningOp())
      .Case<graph::TransposeOp>([&](graph::TransposeOp t) {
        strided::View permuted = v;
        for (auto [i, p] : llvm::enumerate(t.getPerm())) {
          permuted.shape[i] = v.shape[p];
          permuted.strides[i] = v.strides[p];
        }
        v = std::move(permuted);
        return true;
      })
      .Case<graph::SliceOp>([&](graph::SliceOp s) {
        return slice(s.getStarts(), s.getEnds(), s.getSteps());
      })
      .Case<graph::SplitOp>([&](graph::SplitOp s) {
        // Part i is a slice along the axis after the parts before it.
        size_t rank = v.shape.size();
        int64_t axis = s.getAxis();
        unsigned part = cast<OpResult>(value).getResultNumber();
        SmallVector<int64_t> starts(rank, 0),
            ends(v.shape.begin(), v.shape.end()), steps(rank, 1);
        for (unsigned i = 0; i < part; ++i)
          starts[axis] += s.getSizes()[i];
        ends[axis] = starts[axis] + s.getSizes()[part];
        return slice(starts, ends, steps);
      })
      .Case<graph::ReshapeOp>([&](graph::ReshapeOp r) {
        return strided::reshape(v, {r.getShape().begin(), r.getShape().end()});
      })
      .Case<graph::GatherOp>([&](graph::GatherOp g) {
        // One constant index picks a slice (PyTorch takes q, k and v from a
        // stacked projection so); a scalar index drops the dimension.
        std::optional<int64_t> index = scalarIntConstant(g.getIndices());
        int64_t rank = v.shape.size();
        int64_t axis = static_cast<int64_t>(g.getAxis());
        if (axis < 0)
          axis += rank;
        int64_t indexRank =
            cast<RankedTensorType>(g.getIndices().getType()).getRank();
        if (!index || indexRank > 1 || axis < 0 || axis >= rank)
          return false;
        int64_t i = *index < 0 ? *index + v.shape[axis] : *index;
        if (i < 0 || i >= v.shape[axis])
          return false;
        v.offset += i * v.strides[axis];
        if (indexRank == 0) {
          v.shape.erase(v.shape.begin() + axis);
          v.strides.erase(v.strides.begin() + axis);
        } else {
          v.shape[axis] = 1;
        }
        return true;
      })
      // A scale by a constant (traceOperand checked it) changes no layout.
      .Case<graph::MulOp, graph::DivOp>([](Operation *) { return true; })
      .Default([](Operation *) { return false; });
}

/// The scale of `op` if it multiplies or divides `value` by a scalar
/// constant.
std::optional<double> scaleOf(Operation *op, Value value) {
  if (auto mul = dyn_cast<graph::MulOp>(op)) {
    Value other = mul.getLhs() == value ? mul.getRhs() : mul.getLhs();
    return scalarF32Constant(other);
  }
  if (auto div = dyn_cast<graph::DivOp>(op); div && div.getLhs() == value) {
    std::optional<double> c = scalarF32Constant(div.getRhs());
    if (c && *c != 0.0 && std::isfinite(1.0 / *c))
      return 1.0 / *c;
  }
  return std::nullopt;
}

/// The tensor that `op` multiplies or divides by a scalar constant (of its
/// result's type), with the scale; null otherwise.
Value scaledTensor(Operation *op, double &scale) {
  if (!isa_and_nonnull<graph::MulOp, graph::DivOp>(op))
    return {};
  for (Value tensor : op->getOperands())
    if (tensor.getType() == op->getResult(0).getType())
      if (std::optional<double> s = scaleOf(op, tensor)) {
        scale = *s;
        return tensor;
      }
  return {};
}

bool isViewOp(Operation *op) {
  return isa<graph::TransposeOp, graph::SliceOp, graph::SplitOp,
             graph::ReshapeOp, graph::GatherOp>(op);
}

/// An operand of the matmul read through views of `source`, times
/// `scale`.
struct OperandView {
  Value source;
  strided::View view;
  double scale = 1.0;
  /// The results of the view and scale ops read through, nearest first.
  SmallVector<Value> steps;
  bool movesData = false;
};

/// Follows `operand` up through view ops and scalings by constants (as
/// exporters scale q and k before attention's product) as far as the
/// composed view stays a GEMM operand; keeps the longest such chain.
OperandView traceOperand(Value operand) {
  auto shapeOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  OperandView best{operand, contiguousView(shapeOf(operand)), 1.0, {}, false};
  SmallVector<Value> chain;
  Value current = operand;
  double scale = 1.0;
  while (Operation *def = current.getDefiningOp()) {
    double factor = 1.0;
    Value next;
    if (isViewOp(def))
      next = def->getOperand(0);
    else if (!(next = scaledTensor(def, factor)))
      break;
    chain.push_back(current);
    current = next;
    scale *= factor;
    strided::View v = contiguousView(shapeOf(current));
    bool expressible = llvm::all_of(
        llvm::reverse(chain), [&](Value step) { return applyViewOp(step, v); });
    if (!expressible)
      break;
    size_t r = v.shape.size();
    if (!strided::matrixSupported(v.shape[r - 2], v.shape[r - 1],
                                  v.strides[r - 2], v.strides[r - 1]))
      continue;
    best.source = current;
    best.view = v;
    best.scale = scale;
    best.steps = chain;
  }
  // Reshapes move nothing, and a scale alone is no reason to leave the
  // GEMM kernel that fuses bias and activation (nor to take the last step
  // of an exported Gelu before partc-fuse-elementwise sees it).
  best.movesData = llvm::any_of(best.steps, [](Value step) {
    return isa<graph::TransposeOp, graph::SliceOp, graph::SplitOp,
               graph::GatherOp>(step.getDefiningOp());
  });
  return best;
}

/// Leading dimensions of extent 1 (stride 0) up to `rank`.
void padRank(strided::View &v, size_t rank) {
  while (v.shape.size() < rank) {
    v.shape.insert(v.shape.begin(), 1);
    v.strides.insert(v.strides.begin(), 0);
  }
}

class FoldMatMulViewsPass
    : public impl::FoldMatMulViewsBase<FoldMatMulViewsPass> {
public:
  void runOnOperation() override {
    SmallVector<graph::TransposeOp> transposes;
    getOperation().walk(
        [&](graph::TransposeOp op) { transposes.push_back(op); });
    for (graph::TransposeOp op : transposes)
      foldTransposedGemm(op);
    SmallVector<graph::MatMulOp> matmuls;
    getOperation().walk([&](graph::MatMulOp op) { matmuls.push_back(op); });
    for (graph::MatMulOp op : matmuls)
      fold(op);
  }

private:
  /// transpose(op(A) op(B)) = op(B)^T op(A)^T: a 2-D gemm whose only user
  /// transposes its result computes the transposed product instead (a
  /// tied LM head's weight gradient, [768, 50272] turned [50272, 768]).
  static void foldTransposedGemm(graph::TransposeOp transpose) {
    auto gemm = transpose.getInput().getDefiningOp<graph::GemmOp>();
    // Both where the same device (or pipeline stage) runs them: the
    // product then takes the transpose's place in every schedule.
    if (!gemm || !gemm->hasOneUse() || gemm.getC() || gemm.getActivation() ||
        transpose.getPerm() != ArrayRef<int64_t>{1, 0} ||
        gemm->getDiscardableAttrDictionary() !=
            transpose->getDiscardableAttrDictionary())
      return;
    OpBuilder b(transpose);
    auto swapped = graph::GemmOp::create(
        b, gemm.getLoc(), transpose.getType(), gemm.getB(), gemm.getA(),
        Value(), gemm.getAlphaAttr(), gemm.getBetaAttr(),
        b.getI64IntegerAttr(gemm.getTransB() ? 0 : 1),
        b.getI64IntegerAttr(gemm.getTransA() ? 0 : 1), nullptr);
    // The product's placement and schedule.
    for (NamedAttribute attr : gemm->getDiscardableAttrs())
      swapped->setAttr(attr.getName(), attr.getValue());
    transpose.getResult().replaceAllUsesWith(swapped.getResult());
    transpose.erase();
    gemm.erase();
  }

  static void fold(graph::MatMulOp op) {
    auto lhsType = cast<RankedTensorType>(op.getLhs().getType());
    auto rhsType = cast<RankedTensorType>(op.getRhs().getType());
    auto resultType = cast<RankedTensorType>(op.getType());
    if (!op.getEpilogue().empty() || op.getActivation() ||
        lhsType.getRank() < 2 || rhsType.getRank() < 2 ||
        resultType.getRank() > 8 || !lhsType.getElementType().isF32() ||
        !rhsType.getElementType().isF32())
      return;
    OperandView lhs = traceOperand(op.getLhs());
    OperandView rhs = traceOperand(op.getRhs());
    size_t rank = resultType.getRank();
    padRank(lhs.view, rank);
    padRank(rhs.view, rank);

    // Down the result's single-use chain: scalar scales anywhere,
    // transposes, then at most one reshape.
    std::vector<int64_t> logical(resultType.getShape().begin(),
                                 resultType.getShape().end());
    std::vector<int64_t> perm(rank);
    for (size_t d = 0; d < rank; ++d)
      perm[d] = static_cast<int64_t>(d);
    SmallVector<int64_t> stored(logical.begin(), logical.end());
    double alpha = lhs.scale * rhs.scale;
    bool reshaped = false, movesData = false;
    SmallVector<Operation *> users;
    Value result = op.getResult();
    while (result.hasOneUse()) {
      Operation *user = *result.getUsers().begin();
      if (user->getNumResults() != 1)
        break;
      if (std::optional<double> scale = scaleOf(user, result);
          scale && user->getResult(0).getType() == result.getType()) {
        alpha *= *scale;
      } else if (auto t = dyn_cast<graph::TransposeOp>(user); t && !reshaped) {
        std::vector<int64_t> next(rank);
        for (size_t i = 0; i < rank; ++i)
          next[i] = perm[t.getPerm()[i]];
        if (!strided::resultContiguous(logical,
                                       strided::resultStrides(logical, next)))
          break;
        perm = std::move(next);
        for (size_t i = 0; i < rank; ++i)
          stored[i] = logical[perm[i]];
      } else if (auto r = dyn_cast<graph::ReshapeOp>(user); r && !reshaped) {
        stored.assign(r.getShape().begin(), r.getShape().end());
        reshaped = true;
      } else {
        break;
      }
      movesData = movesData || !isa<graph::ReshapeOp>(user);
      users.push_back(user);
      result = user->getResult(0);
    }
    // A reshape alone moves nothing; leave such matmuls to the GEMM kernel,
    // which fuses bias and activation.
    if (!lhs.movesData && !rhs.movesData && !movesData)
      return;

    std::vector<int64_t> check;
    if (!strided::checkOperands(
             lhs.view,
             cast<RankedTensorType>(lhs.source.getType()).getNumElements(),
             rhs.view,
             cast<RankedTensorType>(rhs.source.getType()).getNumElements(),
             perm, {stored.begin(), stored.end()}, check)
             .empty())
      return;

    OpBuilder builder(op);
    SmallVector<Location> locs = {op.getLoc()};
    for (Operation *user : users)
      locs.push_back(user->getLoc());
    auto fused = graph::StridedMatMulOp::create(
        builder, FusedLoc::get(op.getContext(), locs),
        RankedTensorType::get(stored, resultType.getElementType()), lhs.source,
        rhs.source, builder.getDenseI64ArrayAttr(lhs.view.shape),
        builder.getDenseI64ArrayAttr(lhs.view.strides),
        builder.getI64IntegerAttr(lhs.view.offset),
        builder.getDenseI64ArrayAttr(rhs.view.shape),
        builder.getDenseI64ArrayAttr(rhs.view.strides),
        builder.getI64IntegerAttr(rhs.view.offset),
        builder.getDenseI64ArrayAttr(perm),
        builder.getDenseI64ArrayAttr(stored), builder.getF64FloatAttr(alpha));
    for (NamedAttribute a : op->getDiscardableAttrs())
      fused->setAttr(a.getName(), a.getValue());
    result.replaceAllUsesWith(fused.getResult());

    // Erase what only fed the new op: the result chain, the matmul, then
    // views and scalars nothing else reads.
    SmallVector<Operation *> maybeDead;
    for (Operation *user : users)
      for (Value v : user->getOperands())
        if (Operation *def = v.getDefiningOp();
            def && def != op && !llvm::is_contained(users, def))
          maybeDead.push_back(def);
    for (Operation *user : llvm::reverse(users))
      user->erase();
    op.erase();
    for (Value step : llvm::concat<Value>(lhs.steps, rhs.steps)) {
      maybeDead.push_back(step.getDefiningOp());
      // A scale step's constant goes with it, unless read elsewhere.
      for (Value v : step.getDefiningOp()->getOperands())
        if (auto constant = v.getDefiningOp<graph::ConstantOp>())
          maybeDead.push_back(constant);
    }
    eraseDead(maybeDead);
  }

  /// Erases the candidates left without uses, repeatedly, since erasing
  /// one may leave its producer (another candidate) without uses.
  static void eraseDead(SmallVector<Operation *> candidates) {
    llvm::SetVector<Operation *> unique(candidates.begin(), candidates.end());
    SmallVector<Operation *> pending(unique.begin(), unique.end());
    bool changed = true;
    while (changed) {
      changed = false;
      for (Operation *&candidate : pending)
        if (candidate && candidate->use_empty()) {
          candidate->erase();
          candidate = nullptr;
          changed = true;
        }
    }
  }
};

} // namespace
} // namespace mlir::partc
