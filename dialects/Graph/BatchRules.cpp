//===- BatchRules.cpp - How each graph op carries the batch ---------------===//
//
// BatchRuleOpInterface, op by op (BatchRule.h): where each op's result
// carries the batch given where its operands do, and how a clone for a
// slice of the batch rewrites the attributes that name its extent.
//
//===----------------------------------------------------------------------===//
#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::partc::graph;

namespace {

int64_t rankOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank();
}
int64_t dim0(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getRank() ? t.getDimSize(0) : -1;
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// Where the batch goes through a reshape from `in` to `out`: the output
/// dimension that holds the batch's factor whole, or none when the reshape
/// splits it.
std::optional<BatchLoc> reshapeLoc(ArrayRef<int64_t> in, BatchLoc loc,
                                   ArrayRef<int64_t> out, int64_t batch) {
  // Elements before the batch's factor, in the flat order.
  int64_t before = product(in.take_front(loc.axis)) * loc.outer;
  // An empty tensor holds no sample to carry, and its zero extents would
  // divide by zero below.
  if (before <= 0 || batch <= 0 ||
      llvm::any_of(out, [](int64_t d) { return d <= 0; }))
    return std::nullopt;
  int64_t prefix = 1;
  for (int64_t b = 0; b < static_cast<int64_t>(out.size()); ++b) {
    int64_t next = prefix * out[b];
    if (next >= before * batch) {
      if (before % prefix || next % (before * batch))
        return std::nullopt;
      return BatchLoc{b, before / prefix, next / (before * batch)};
    }
    prefix = next;
  }
  return std::nullopt;
}

/// How a strided view steps over the samples of its operand: view dimension
/// `dim` covers them, its index (x * batch + n) * inner + j for sample n.
struct ViewBatch {
  int64_t dim, outer, inner;
};

/// The operand's flat strides of one sample (`sample`) and of the batch's
/// whole factor (`block`, batch samples), for a batch at `loc`.
struct BatchStrides {
  int64_t sample, block;
};
BatchStrides batchStrides(ArrayRef<int64_t> operandShape, BatchLoc loc,
                          int64_t batch) {
  int64_t sample = loc.inner * product(operandShape.drop_front(loc.axis + 1));
  return {sample, sample * batch};
}

/// The view dimension that covers the batch of a batched operand, if every
/// element the view reads stays inside its sample otherwise.
std::optional<ViewBatch> viewBatch(ArrayRef<int64_t> shape,
                                   ArrayRef<int64_t> strides, int64_t offset,
                                   ArrayRef<int64_t> operandShape, BatchLoc loc,
                                   int64_t batch) {
  BatchStrides bs = batchStrides(operandShape, loc, batch);
  auto within = [&](int64_t covering, int64_t inner) {
    // What the view reaches inside one sample, offset included; steps over
    // whole blocks (the dimensions outside the batch) move no sample.
    int64_t reach = offset % bs.block;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1)
        continue;
      if (strides[d] >= bs.block) {
        if (strides[d] % bs.block)
          return false;
        continue;
      }
      reach += strides[d] * ((int64_t(d) == covering ? inner : shape[d]) - 1);
    }
    return reach < bs.sample;
  };
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t stride = strides[d];
    if (shape[d] == 1 || stride <= 0 || stride > bs.sample ||
        bs.sample % stride)
      continue;
    int64_t inner = bs.sample / stride;
    if (shape[d] % (batch * inner) || !within(d, inner))
      continue;
    return ViewBatch{static_cast<int64_t>(d), shape[d] / (batch * inner),
                     inner};
  }
  return std::nullopt;
}

/// The view of a batched operand for a slice of `size` samples: the
/// covering dimension shrinks, and steps over whole blocks shrink with them.
void sliceView(SmallVectorImpl<int64_t> &shape,
               SmallVectorImpl<int64_t> &strides, int64_t &offset,
               ArrayRef<int64_t> operandShape, BatchLoc loc, int64_t batch,
               ViewBatch vb, int64_t size) {
  BatchStrides bs = batchStrides(operandShape, loc, batch);
  int64_t block = bs.sample * size;
  for (int64_t &stride : strides)
    if (stride >= bs.block)
      stride = stride / bs.block * block;
  shape[vb.dim] = vb.outer * size * vb.inner;
  offset = offset / bs.block * block + offset % bs.block;
}

/// What a strided matmul does with the batch: the view dimension covering it
/// in each batched operand, and where the result carries it.
struct StridedMatMulBatch {
  std::optional<ViewBatch> view[2];
  BatchLoc result;
};

int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// The batch of a strided matmul: each batched operand's view must cover
/// it, both on the same batch dimension, or the lhs on its rows (the rhs
/// shared) or the rhs on its columns (the lhs shared).
std::optional<StridedMatMulBatch> stridedMatMulBatch(StridedMatMulOp m,
                                                     OperandBatch locs,
                                                     int64_t batch,
                                                     std::string &why) {
  StridedMatMulBatch result;
  int64_t rank = m.getLhsShape().size();
  for (int i = 0; i < 2; ++i) {
    if (!locs[i])
      continue;
    result.view[i] = viewBatch(i ? m.getRhsShape() : m.getLhsShape(),
                               i ? m.getRhsStrides() : m.getLhsStrides(),
                               i ? m.getRhsOffset() : m.getLhsOffset(),
                               shapeOf(m->getOperand(i)), *locs[i], batch);
    if (!result.view[i]) {
      why = "the view of operand #" + std::to_string(i) +
            " mixes samples of the batch";
      return std::nullopt;
    }
  }
  std::optional<ViewBatch> lhs = result.view[0], rhs = result.view[1];
  // The lhs's columns and the rhs's rows are the contraction.
  if ((lhs && lhs->dim == rank - 1) || (rhs && rhs->dim == rank - 2)) {
    why = "it contracts over the batch dimension";
    return std::nullopt;
  }
  ViewBatch covering;
  if (lhs && rhs) {
    if (lhs->dim != rhs->dim || lhs->dim >= rank - 2 ||
        lhs->outer != rhs->outer || lhs->inner != rhs->inner) {
      why = "its operands carry the batch in different dimensions";
      return std::nullopt;
    }
    covering = *lhs;
  } else {
    covering = lhs ? *lhs : *rhs;
    ArrayRef<int64_t> shared = lhs ? m.getRhsShape() : m.getLhsShape();
    if (covering.dim < rank - 2 && shared[covering.dim] != 1) {
      why = "its unbatched operand spans the batch dimension";
      return std::nullopt;
    }
  }
  // The logical result [batch..., M, N], permuted, then reshaped to `shape`.
  SmallVector<int64_t> logical;
  for (int64_t d = 0; d < rank - 2; ++d)
    logical.push_back(std::max(m.getLhsShape()[d], m.getRhsShape()[d]));
  logical.push_back(m.getLhsShape()[rank - 2]);
  logical.push_back(m.getRhsShape()[rank - 1]);
  ArrayRef<int64_t> perm = m.getPerm();
  SmallVector<int64_t> permuted;
  int64_t position = 0;
  for (auto [i, p] : llvm::enumerate(perm)) {
    permuted.push_back(logical[p]);
    if (p == covering.dim)
      position = i;
  }
  std::optional<BatchLoc> loc =
      reshapeLoc(permuted, {position, covering.outer, covering.inner},
                 m.getShape(), batch);
  if (!loc) {
    why = "its result layout splits the batch dimension";
    return std::nullopt;
  }
  result.result = *loc;
  return result;
}

/// The first batched operand's location (operand 0's where it is batched)
/// and the extent of the dimension that carries the batch.
struct Carried {
  BatchLoc in;
  int64_t rank, extent;
};
Carried carried(Operation *op, OperandBatch locs, int64_t batch) {
  std::optional<BatchLoc> first;
  for (const std::optional<BatchLoc> &l : locs)
    if (l && !first)
      first = l;
  BatchLoc in = locs[0] ? *locs[0] : *first;
  return {in, rankOf(op->getOperand(0)), in.outer * batch * in.inner};
}

std::optional<BatchLoc> refuse(std::string &why, const char *reason) {
  why = reason;
  return std::nullopt;
}

/// Sets attribute `name`'s element `index` of `slice` to the extent of a
/// batch of `size` carried at `loc`.
void setExtent(Operation *op, Operation *slice, StringRef name, int64_t index,
               BatchLoc loc, int64_t size) {
  auto attr = op->getAttrOfType<DenseI64ArrayAttr>(name);
  SmallVector<int64_t> v(attr.asArrayRef());
  v[index] = loc.outer * size * loc.inner;
  slice->setAttr(name, DenseI64ArrayAttr::get(op->getContext(), v));
}

} // namespace

namespace mlir::partc::graph {

std::optional<BatchLoc> alignBroadcast(Operation *op, OperandBatch locs,
                                       std::string &why) {
  int64_t resultRank = rankOf(op->getResult(0));
  std::optional<BatchLoc> aligned;
  for (auto [i, l] : llvm::enumerate(locs)) {
    if (!l)
      continue;
    BatchLoc a = *l;
    a.axis += resultRank - rankOf(op->getOperand(i));
    if (aligned && *aligned != a) {
      why = "its operands carry the batch in different dimensions";
      return std::nullopt;
    }
    aligned = a;
  }
  for (auto [i, l] : llvm::enumerate(locs)) {
    if (l)
      continue;
    int64_t axis = aligned->axis - (resultRank - rankOf(op->getOperand(i)));
    if (axis >= 0 && shapeOf(op->getOperand(i))[axis] != 1) {
      why = "operand #" + std::to_string(i) +
            " is not batched but spans the batch dimension";
      return std::nullopt;
    }
  }
  return aligned;
}

std::optional<BatchLoc>
sampleWiseBatch(Operation *op, OperandBatch locs, int64_t batch,
                std::string &why,
                llvm::function_ref<bool(ArrayRef<bool> batched)> sampleWise) {
  SmallVector<bool> batched;
  for (auto [i, l] : llvm::enumerate(locs)) {
    if (l && !l->isLeading()) {
      why = "it needs the batch in dimension 0, but operand #" +
            std::to_string(i) + " carries it in dimension " +
            std::to_string(l->axis);
      return std::nullopt;
    }
    batched.push_back(l.has_value());
  }
  if (op->getNumResults() == 0) {
    // An update of state (an optimizer step) consumes the whole batch.
    why = "it has no result to carry the batch";
    return std::nullopt;
  }
  if (sampleWise) {
    if (!sampleWise(batched))
      return std::nullopt;
  } else {
    int64_t rank = rankOf(op->getResult(0));
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      if (!batched[i] && rankOf(v) == rank && dim0(v) != 1) {
        why = "operand #" + std::to_string(i) +
              " is not batched but spans dimension 0";
        return std::nullopt;
      }
  }
  for (Value r : op->getResults())
    if (dim0(r) != batch) {
      why = "its result does not keep the batch dimension first";
      return std::nullopt;
    }
  return BatchLoc();
}

std::optional<BatchLoc> followBatch(Operation *op, OperandBatch locs,
                                    int64_t batch, std::string &why) {
  if (auto rule = dyn_cast<BatchRuleOpInterface>(op))
    return rule.followBatch(locs, batch, why);
  if (isElementwise(op))
    return alignBroadcast(op, locs, why);
  return sampleWiseBatch(op, locs, batch, why);
}

void sliceBatchAttrs(Operation *op, Operation *slice, int64_t batch,
                     int64_t size, OperandBatch operandLocs,
                     std::optional<BatchLoc> resultLoc) {
  if (auto rule = dyn_cast<BatchRuleOpInterface>(op))
    rule.sliceBatch(slice, batch, size, operandLocs, resultLoc);
}

} // namespace mlir::partc::graph

//===----------------------------------------------------------------------===//
// Views and layout
//===----------------------------------------------------------------------===//

std::optional<BatchLoc> ReshapeOp::followBatch(OperandBatch locs, int64_t batch,
                                               std::string &why) {
  std::optional<BatchLoc> result =
      reshapeLoc(shapeOf(getInput()), *locs[0], shapeOf(getOutput()), batch);
  if (!result)
    why = "it reshapes across the batch dimension";
  return result;
}

void ReshapeOp::sliceBatch(Operation *slice, int64_t, int64_t size,
                           OperandBatch, std::optional<BatchLoc> resultLoc) {
  if (resultLoc)
    setExtent(*this, slice, "shape", resultLoc->axis, *resultLoc, size);
}

std::optional<BatchLoc> ExpandOp::followBatch(OperandBatch locs, int64_t batch,
                                              std::string &why) {
  auto [in, rank, extent] = carried(*this, locs, batch);
  int64_t shift = rankOf(getOutput()) - rank;
  if (shapeOf(getOutput())[in.axis + shift] != extent)
    return refuse(why, "it broadcasts along the batch dimension");
  return BatchLoc{in.axis + shift, in.outer, in.inner};
}

void ExpandOp::sliceBatch(Operation *slice, int64_t, int64_t size, OperandBatch,
                          std::optional<BatchLoc> resultLoc) {
  if (resultLoc)
    setExtent(*this, slice, "shape", resultLoc->axis, *resultLoc, size);
}

std::optional<BatchLoc> TransposeOp::followBatch(OperandBatch locs, int64_t,
                                                 std::string &) {
  BatchLoc result = *locs[0];
  result.axis = llvm::find(getPerm(), locs[0]->axis) - getPerm().begin();
  return result;
}

std::optional<BatchLoc> SliceOp::followBatch(OperandBatch locs, int64_t batch,
                                             std::string &why) {
  auto [in, rank, extent] = carried(*this, locs, batch);
  if (getStarts()[in.axis] == 0 && getSteps()[in.axis] == 1 &&
      getEnds()[in.axis] >= extent)
    return in;
  return refuse(why, "it slices the batch dimension");
}

void SliceOp::sliceBatch(Operation *slice, int64_t, int64_t size,
                         OperandBatch operandLocs, std::optional<BatchLoc>) {
  if (operandLocs[0])
    setExtent(*this, slice, "ends", operandLocs[0]->axis, *operandLocs[0],
              size);
}

std::optional<BatchLoc> PadOp::followBatch(OperandBatch locs, int64_t batch,
                                           std::string &why) {
  auto [in, rank, extent] = carried(*this, locs, batch);
  if (getPads()[in.axis] == 0 && getPads()[rank + in.axis] == 0)
    return in;
  return refuse(why, "it pads the batch dimension");
}

std::optional<BatchLoc> ConcatOp::followBatch(OperandBatch locs, int64_t batch,
                                              std::string &why) {
  auto [in, rank, extent] = carried(*this, locs, batch);
  // A lambda may not capture a structured binding before C++20.
  BatchLoc carriedLoc = in;
  if (normalizeAxis(getAxis(), rank) != in.axis &&
      llvm::all_of(locs, [&](const std::optional<BatchLoc> &l) {
        return l && *l == carriedLoc;
      }))
    return in;
  return refuse(why, "it concatenates along the batch dimension or with "
                     "unbatched values");
}

std::optional<BatchLoc> SplitOp::followBatch(OperandBatch locs, int64_t batch,
                                             std::string &why) {
  auto [in, rank, extent] = carried(*this, locs, batch);
  if (normalizeAxis(getAxis(), rank) != in.axis)
    return in;
  return refuse(why, "it splits the batch dimension");
}

//===----------------------------------------------------------------------===//
// Normalizations and reductions
//===----------------------------------------------------------------------===//

std::optional<BatchLoc>
LogSoftmaxOp::followBatch(OperandBatch locs, int64_t batch, std::string &why) {
  auto [in, rank, extent] = carried(*this, locs, batch);
  if (normalizeAxis(getAxis(), rank) != in.axis)
    return in;
  return refuse(why, "it normalizes over the batch dimension");
}

std::optional<BatchLoc> SoftmaxOp::followBatch(OperandBatch locs, int64_t batch,
                                               std::string &why) {
  auto [in, rank, extent] = carried(*this, locs, batch);
  if (!locs[0])
    return refuse(why, "its bias is batched but its input is not");
  if (normalizeAxis(getAxis(), rank) == in.axis)
    return refuse(why, "it normalizes over the batch dimension");
  // The bias broadcasts to the input, as in an add.
  return alignBroadcast(*this, locs, why);
}

/// Layer and RMS normalization: over the trailing dimensions from `axis`,
/// with per-channel parameters that must not be batched.
static std::optional<BatchLoc> normalizeTrailing(Operation *op,
                                                 OperandBatch locs,
                                                 int64_t axis, int64_t batch,
                                                 std::string &why) {
  auto [in, rank, extent] = carried(op, locs, batch);
  if (locs[0] && in.axis < normalizeAxis(axis, rank) &&
      llvm::all_of(locs.drop_front(),
                   [](const std::optional<BatchLoc> &b) { return !b; }))
    return in;
  return refuse(why, "it normalizes over the batch dimension");
}

std::optional<BatchLoc> DropoutOp::followBatch(OperandBatch locs, int64_t,
                                               std::string &why) {
  // The mask is numbered by flat index over the whole batch: a slice of
  // leading rows is a contiguous range of it, which `offset` starts.
  if (!locs[0] || !locs[0]->isLeading() || locs[1] || locs[2])
    return refuse(why, "its random mask is numbered over the whole batch, and "
                       "a slice of the batch outside dimension 0 would draw "
                       "a different one");
  return BatchLoc();
}

std::optional<BatchLoc>
LayerNormOp::followBatch(OperandBatch locs, int64_t batch, std::string &why) {
  return normalizeTrailing(*this, locs, getAxis(), batch, why);
}

std::optional<BatchLoc> RmsNormOp::followBatch(OperandBatch locs, int64_t batch,
                                               std::string &why) {
  return normalizeTrailing(*this, locs, getAxis(), batch, why);
}

/// No axes: ONNX reduces over all of them.
template <typename Reduce>
static std::optional<BatchLoc> reduceBatch(Reduce r, OperandBatch locs,
                                           int64_t batch, std::string &why) {
  auto [in, rank, extent] = carried(r, locs, batch);
  if (r.getAxes().empty() || llvm::is_contained(r.getAxes(), in.axis))
    return refuse(why, "it reduces over the batch dimension");
  BatchLoc result = in;
  int64_t batchAxis = in.axis;
  if (!r.getKeepdims())
    result.axis -=
        llvm::count_if(r.getAxes(), [&](int64_t a) { return a < batchAxis; });
  return result;
}

#define REDUCE_BATCH(OP)                                                       \
  std::optional<BatchLoc> OP::followBatch(OperandBatch locs, int64_t batch,    \
                                          std::string &why) {                  \
    return reduceBatch(*this, locs, batch, why);                               \
  }
REDUCE_BATCH(ReduceSumOp)
REDUCE_BATCH(ReduceMeanOp)
REDUCE_BATCH(ReduceMaxOp)
REDUCE_BATCH(ReduceMinOp)
REDUCE_BATCH(ReduceProdOp)
#undef REDUCE_BATCH

std::optional<BatchLoc>
BatchNormOp::followBatch(OperandBatch locs, int64_t batch, std::string &why) {
  return sampleWiseBatch(*this, locs, batch, why, [&](ArrayRef<bool> b) {
    bool ok = b[0] && llvm::none_of(b.drop_front(), [](bool x) { return x; });
    if (!ok)
      why = "its weights depend on the batch";
    return ok;
  });
}

//===----------------------------------------------------------------------===//
// Linear algebra and convolution
//===----------------------------------------------------------------------===//

std::optional<BatchLoc> MatMulOp::followBatch(OperandBatch locs, int64_t,
                                              std::string &why) {
  // The batch lies on a batch dimension both operands share, or on the
  // lhs's rows against a shared rhs; never on the contraction.
  int64_t lr = rankOf(getLhs()), rr = rankOf(getRhs());
  int64_t resultRank = rankOf(getOutput());
  std::optional<BatchLoc> lhs = locs[0], rhs = locs[1];
  bool ok = lhs && lhs->axis != lr - 1;
  if (ok && rhs)
    ok = lr >= 3 && rr == lr && *rhs == *lhs && lhs->axis < lr - 2;
  else if (ok && lhs->axis < lr - 2) {
    int64_t axis = lhs->axis - (lr - rr);
    ok = lr >= 2 && (axis < 0 || shapeOf(getRhs())[axis] == 1);
  }
  if (!ok)
    return refuse(why, "it contracts over the batch dimension");
  BatchLoc out = *lhs;
  out.axis += resultRank - lr;
  // A fused bias is one value per column; an addend is batched with the
  // result.
  size_t first = 2;
  if ((getBias() && locs[first]) ||
      (getAddend() && (!locs[first + 1] || *locs[first + 1] != out)))
    return refuse(why, "its fused bias or addend does not follow the batch");
  return out;
}

std::optional<BatchLoc> StridedMatMulOp::followBatch(OperandBatch locs,
                                                     int64_t batch,
                                                     std::string &why) {
  if (auto b = stridedMatMulBatch(*this, locs, batch, why))
    return b->result;
  return std::nullopt;
}

void StridedMatMulOp::sliceBatch(Operation *slice, int64_t batch, int64_t size,
                                 OperandBatch operandLocs,
                                 std::optional<BatchLoc>) {
  std::string why;
  auto b = stridedMatMulBatch(*this, operandLocs, batch, why);
  assert(b && "a split strided matmul was analyzed first");
  setExtent(*this, slice, "shape", b->result.axis, b->result, size);
  MLIRContext *ctx = getContext();
  for (int i = 0; i < 2; ++i) {
    if (!b->view[i])
      continue;
    StringRef prefix = i ? "rhs_" : "lhs_";
    SmallVector<int64_t> shape(i ? getRhsShape() : getLhsShape());
    SmallVector<int64_t> strides(i ? getRhsStrides() : getLhsStrides());
    int64_t offset = i ? getRhsOffset() : getLhsOffset();
    sliceView(shape, strides, offset, shapeOf(getOperand(i)), *operandLocs[i],
              batch, *b->view[i], size);
    slice->setAttr((prefix + "shape").str(),
                   DenseI64ArrayAttr::get(ctx, shape));
    slice->setAttr((prefix + "strides").str(),
                   DenseI64ArrayAttr::get(ctx, strides));
    slice->setAttr((prefix + "offset").str(),
                   IntegerAttr::get(IntegerType::get(ctx, 64), offset));
  }
}

std::optional<BatchLoc> AttentionOp::followBatch(OperandBatch, int64_t,
                                                 std::string &why) {
  return refuse(why, "partc-fuse-attention fuses attention after placement; "
                     "split the strided_matmuls and softmax it fuses");
}

std::optional<BatchLoc> GemmOp::followBatch(OperandBatch locs, int64_t batch,
                                            std::string &why) {
  auto [in, rank, extent] = carried(*this, locs, batch);
  Value c = getC();
  if (locs[0] && in.axis == 0 && !getTransA() && !locs[1] &&
      (!c || (!locs[2] && (rankOf(c) < 2 || dim0(c) == 1))))
    return in;
  return refuse(why, "it contracts over the batch dimension or its bias "
                     "spans it");
}

std::optional<BatchLoc> ConvOp::followBatch(OperandBatch locs, int64_t batch,
                                            std::string &why) {
  return sampleWiseBatch(*this, locs, batch, why, [&](ArrayRef<bool> b) {
    // Weights and bias are shared; a fused residual is per sample.
    bool ok =
        b[0] && !b[1] && (b.size() < 3 || !b[2]) && (!getAddend() || b[3]);
    if (!ok)
      why = "its weights depend on the batch";
    return ok;
  });
}

std::optional<BatchLoc> ConvGradInputOp::followBatch(OperandBatch locs,
                                                     int64_t batch,
                                                     std::string &why) {
  return sampleWiseBatch(*this, locs, batch, why, [&](ArrayRef<bool> b) {
    bool ok = b[0] && !b[1];
    if (!ok)
      why = "its weights depend on the batch";
    return ok;
  });
}

void ConvGradInputOp::sliceBatch(Operation *slice, int64_t, int64_t size,
                                 OperandBatch,
                                 std::optional<BatchLoc> resultLoc) {
  if (resultLoc)
    setExtent(*this, slice, "input_shape", resultLoc->axis, *resultLoc, size);
}

std::optional<BatchLoc> MaxPoolWithIndicesOp::followBatch(OperandBatch, int64_t,
                                                          std::string &why) {
  return refuse(why, "its indices count positions across the whole batch");
}

//===----------------------------------------------------------------------===//
// Gathers and scatters
//===----------------------------------------------------------------------===//

std::optional<BatchLoc> GatherOp::followBatch(OperandBatch locs, int64_t batch,
                                              std::string &why) {
  // Gathers along another dimension of batched data (PyTorch takes q, k and
  // v from a stacked projection so) and embedding lookups (a shared table,
  // batched indices) keep samples apart.
  auto [in, rank, extent] = carried(*this, locs, batch);
  int64_t axis = normalizeAxis(getAxis(), rank);
  if (locs[0] && !locs[1] && axis != in.axis) {
    BatchLoc result = in;
    if (in.axis > axis)
      result.axis += rankOf(getIndices()) - 1;
    return result;
  }
  if (!locs[0] && locs[1]) {
    BatchLoc result = *locs[1];
    result.axis += axis;
    return result;
  }
  return refuse(why, "it indexes along the batch dimension");
}

/// Index tuples address the batch dimension of the data directly unless
/// GatherND's batch_dims keeps the two apart.
std::optional<BatchLoc>
GatherNdOp::followBatch(OperandBatch locs, int64_t batch, std::string &why) {
  return sampleWiseBatch(*this, locs, batch, why, [&](ArrayRef<bool> b) {
    bool ok = !b[0] || (getBatchDims() >= 1 && b[1]);
    if (!ok)
      why = "its index tuples address samples of the batch by position";
    return ok;
  });
}

std::optional<BatchLoc>
ScatterNdOp::followBatch(OperandBatch locs, int64_t batch, std::string &why) {
  return sampleWiseBatch(*this, locs, batch, why, [&](ArrayRef<bool> b) {
    if (b[0])
      why = "its index tuples address samples of the batch by position";
    return !b[0];
  });
}

/// Data and indices batched alike, gathered along another dimension.
/// Ops that work on each line along one axis: the batch passes through
/// unless it is that axis; a removed axis before it shifts it.
static std::optional<BatchLoc> alongAxis(Operation *op, OperandBatch locs,
                                         int64_t batch, int64_t axis,
                                         bool removesAxis, std::string &why) {
  auto [in, rank, extent] = carried(op, locs, batch);
  if (axis == in.axis)
    return refuse(why, "it works along the batch dimension");
  BatchLoc result = in;
  if (removesAxis && axis < in.axis)
    --result.axis;
  return result;
}

std::optional<BatchLoc> ArgMaxOp::followBatch(OperandBatch locs, int64_t batch,
                                              std::string &why) {
  return alongAxis(*this, locs, batch, getAxis(), !getKeepdims(), why);
}
std::optional<BatchLoc> ArgMinOp::followBatch(OperandBatch locs, int64_t batch,
                                              std::string &why) {
  return alongAxis(*this, locs, batch, getAxis(), !getKeepdims(), why);
}
std::optional<BatchLoc> CumSumOp::followBatch(OperandBatch locs, int64_t batch,
                                              std::string &why) {
  return alongAxis(*this, locs, batch, getAxis(), false, why);
}
std::optional<BatchLoc> TopKOp::followBatch(OperandBatch locs, int64_t batch,
                                            std::string &why) {
  return alongAxis(*this, locs, batch, getAxis(), false, why);
}

std::optional<BatchLoc> GatherElementsOp::followBatch(OperandBatch locs,
                                                      int64_t batch,
                                                      std::string &why) {
  auto [in, rank, extent] = carried(*this, locs, batch);
  if (locs[0] && locs[1] && *locs[0] == *locs[1] &&
      static_cast<int64_t>(getAxis()) != in.axis &&
      shapeOf(getIndices())[in.axis] == extent)
    return in;
  return refuse(why, "it picks elements along the batch dimension or pairs "
                     "batched data with unbatched indices");
}

//===----------------------------------------------------------------------===//
// Resampling
//===----------------------------------------------------------------------===//

std::optional<BatchLoc> ResizeOp::followBatch(OperandBatch locs, int64_t batch,
                                              std::string &why) {
  auto [in, rank, extent] = carried(*this, locs, batch);
  if (getScales()[in.axis] == 1.0 && getSizes()[in.axis] == extent)
    return in;
  return refuse(why, "it resizes the batch dimension");
}

void ResizeOp::sliceBatch(Operation *slice, int64_t, int64_t size, OperandBatch,
                          std::optional<BatchLoc> resultLoc) {
  if (resultLoc)
    setExtent(*this, slice, "sizes", resultLoc->axis, *resultLoc, size);
}
