//===- BatchSplit.cpp - Clone a graph per batch slice ---------------------===//
//
// A value is "batched" when one of its dimensions carries the model's batch:
// dimension 0 at the inputs, elsewhere after transposes and reshapes (PyTorch's
// attention moves the batch to dimension 1 and merges it with the heads). A
// BatchLoc says where: along `axis`, index (x * batch + n) * inner + j for
// sample n. An op may be cloned per slice when it treats each sample
// independently; the rules below accept exactly those ops and name the node
// otherwise.
//
//===----------------------------------------------------------------------===//
#include "compiler/Transforms/BatchSplit.h"
#include "compiler/Transforms/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::partc {

namespace {

using graph::GraphDialect;

int64_t rankOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank();
}
int64_t dim0(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getRank() ? t.getDimSize(0) : -1;
}

/// Checks that `op`, one of those that only see the batch in dimension 0
/// (convolutions, pooling, gathers...), keeps samples independent given
/// which operands are batched; explains why not otherwise.
LogicalResult checkSampleWise(Operation *op, ArrayRef<bool> batched,
                              int64_t batch, std::string &why) {
  auto allResultsBatched = [&]() {
    for (Value r : op->getResults())
      if (dim0(r) != batch) {
        why = "its result does not keep the batch dimension first";
        return false;
      }
    return true;
  };
  auto unbatchedBroadcastOnly = [&]() {
    int64_t rank = rankOf(op->getResult(0));
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      if (!batched[i] && rankOf(v) == rank && dim0(v) != 1) {
        why = "operand #" + std::to_string(i) +
              " is not batched but spans dimension 0";
        return false;
      }
    return true;
  };
  bool ok = true;
  llvm::TypeSwitch<Operation *>(op)
      .Case<graph::MaxPoolWithIndicesOp>([&](auto) {
        ok = false;
        why = "its indices count positions across the whole batch";
      })
      .Case<graph::GatherNdOp, graph::ScatterNdOp>([&](Operation *o) {
        // Index tuples address the batch dimension of the data directly
        // unless GatherND's batch_dims keeps the two apart.
        auto g = dyn_cast<graph::GatherNdOp>(o);
        ok = !batched[0] || (g && g.getBatchDims() >= 1 && batched[1]);
        if (!ok)
          why = "its index tuples address samples of the batch by position";
      })
      .Case<graph::ConvOp>([&](graph::ConvOp c) {
        // Weights and bias are shared; a fused residual is per sample.
        ok = batched[0] && !batched[1] && (batched.size() < 3 || !batched[2]) &&
             (!c.getAddend() || batched[3]);
        if (!ok)
          why = "its weights depend on the batch";
      })
      .Case<graph::BatchNormOp>([&](auto) {
        ok = batched[0] && llvm::all_of(ArrayRef<bool>(batched).drop_front(),
                                        [](bool b) { return !b; });
        if (!ok)
          why = "its weights depend on the batch";
      })
      .Default([&](Operation *) { ok = unbatchedBroadcastOnly(); });
  if (ok && !allResultsBatched())
    ok = false;
  return success(ok);
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

/// Ops whose rules follow the batch into any dimension.
bool followsBatch(Operation *op) {
  return graph::isElementwise(op) ||
         isa<graph::ReshapeOp, graph::ExpandOp, graph::TransposeOp,
             graph::SliceOp, graph::PadOp, graph::ConcatOp, graph::SplitOp,
             graph::SoftmaxOp, graph::LogSoftmaxOp, graph::LayerNormOp,
             graph::RmsNormOp, graph::ReduceSumOp, graph::ReduceMeanOp,
             graph::ReduceMaxOp, graph::ReduceMinOp, graph::ReduceProdOp,
             graph::MatMulOp, graph::StridedMatMulOp, graph::GemmOp,
             graph::GatherOp>(op);
}

int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// The batch of a strided matmul: each batched operand's view must cover
/// it, both on the same batch dimension, or the lhs on its rows (the rhs
/// shared) or the rhs on its columns (the lhs shared).
std::optional<StridedMatMulBatch>
stridedMatMulBatch(graph::StridedMatMulOp m,
                   ArrayRef<std::optional<BatchLoc>> locs, int64_t batch,
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

/// Where the result of `op`, whose operands broadcast numpy-style
/// (right-aligned), carries the batch: batched operands must agree, and
/// shared ones have extent 1 (or no dimension) where the batch lies.
std::optional<BatchLoc> alignBroadcast(Operation *op,
                                       ArrayRef<std::optional<BatchLoc>> locs,
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

/// Where the results of `op` carry the batch, for ops that follow it into
/// any dimension; `locs` holds each operand's (none when unbatched).
std::optional<BatchLoc> followBatch(Operation *op,
                                    ArrayRef<std::optional<BatchLoc>> locs,
                                    int64_t batch, std::string &why) {
  auto fail = [&](const char *reason) -> std::optional<BatchLoc> {
    why = reason;
    return std::nullopt;
  };
  int64_t rank = rankOf(op->getOperand(0));
  std::optional<BatchLoc> first;
  for (const std::optional<BatchLoc> &l : locs)
    if (l && !first)
      first = l;
  BatchLoc in = locs[0] ? *locs[0] : *first;
  int64_t extent = in.outer * batch * in.inner;

  if (graph::isElementwise(op))
    return alignBroadcast(op, locs, why);
  std::optional<BatchLoc> result;
  llvm::TypeSwitch<Operation *>(op)
      .Case<graph::ReshapeOp>([&](auto r) {
        result = reshapeLoc(shapeOf(r.getInput()), in, shapeOf(r.getOutput()),
                            batch);
        if (!result)
          why = "it reshapes across the batch dimension";
      })
      .Case<graph::ExpandOp>([&](graph::ExpandOp e) {
        int64_t shift = rankOf(e.getOutput()) - rank;
        if (shapeOf(e.getOutput())[in.axis + shift] != extent)
          why = "it broadcasts along the batch dimension";
        else
          result = BatchLoc{in.axis + shift, in.outer, in.inner};
      })
      .Case<graph::TransposeOp>([&](graph::TransposeOp t) {
        auto it = llvm::find(t.getPerm(), in.axis);
        result = in;
        result->axis = it - t.getPerm().begin();
      })
      .Case<graph::SliceOp>([&](graph::SliceOp s) {
        if (s.getStarts()[in.axis] == 0 && s.getSteps()[in.axis] == 1 &&
            s.getEnds()[in.axis] >= extent)
          result = in;
        else
          why = "it slices the batch dimension";
      })
      .Case<graph::PadOp>([&](graph::PadOp p) {
        if (p.getPads()[in.axis] == 0 && p.getPads()[rank + in.axis] == 0)
          result = in;
        else
          why = "it pads the batch dimension";
      })
      .Case<graph::ConcatOp>([&](graph::ConcatOp c) {
        if (normalizeAxis(c.getAxis(), rank) != in.axis &&
            llvm::all_of(locs, [&](const std::optional<BatchLoc> &l) {
              return l && *l == in;
            }))
          result = in;
        else
          why = "it concatenates along the batch dimension or with unbatched "
                "values";
      })
      .Case<graph::SplitOp>([&](graph::SplitOp s) {
        if (normalizeAxis(s.getAxis(), rank) != in.axis)
          result = in;
        else
          why = "it splits the batch dimension";
      })
      .Case<graph::LogSoftmaxOp>([&](graph::LogSoftmaxOp s) {
        if (normalizeAxis(s.getAxis(), rank) != in.axis)
          result = in;
        else
          why = "it normalizes over the batch dimension";
      })
      .Case<graph::SoftmaxOp>([&](graph::SoftmaxOp s) {
        if (!locs[0])
          why = "its bias is batched but its input is not";
        else if (normalizeAxis(s.getAxis(), rank) == in.axis)
          why = "it normalizes over the batch dimension";
        else // the bias broadcasts to the input, as in an add
          result = alignBroadcast(op, locs, why);
      })
      .Case<graph::LayerNormOp, graph::RmsNormOp>([&](auto l) {
        if (locs[0] && in.axis < normalizeAxis(l.getAxis(), rank) &&
            llvm::all_of(locs.drop_front(),
                         [](const std::optional<BatchLoc> &b) { return !b; }))
          result = in;
        else
          why = "it normalizes over the batch dimension";
      })
      .Case<graph::ReduceSumOp, graph::ReduceMeanOp, graph::ReduceMaxOp,
            graph::ReduceMinOp, graph::ReduceProdOp>([&](auto r) {
        // No axes: ONNX reduces over all of them.
        if (r.getAxes().empty() || llvm::is_contained(r.getAxes(), in.axis)) {
          why = "it reduces over the batch dimension";
          return;
        }
        result = in;
        if (!r.getKeepdims())
          result->axis -= llvm::count_if(
              r.getAxes(), [&](int64_t a) { return a < in.axis; });
      })
      .Case<graph::MatMulOp>([&](graph::MatMulOp m) {
        // The batch lies on a batch dimension both operands share, or on
        // the lhs's rows against a shared rhs; never on the contraction.
        int64_t lr = rankOf(m.getLhs()), rr = rankOf(m.getRhs());
        int64_t resultRank = rankOf(m.getOutput());
        std::optional<BatchLoc> lhs = locs[0], rhs = locs[1];
        bool ok = lhs && lhs->axis != lr - 1;
        if (ok && rhs)
          ok = lr >= 3 && rr == lr && *rhs == *lhs && lhs->axis < lr - 2;
        else if (ok && lhs->axis < lr - 2) {
          int64_t axis = lhs->axis - (lr - rr);
          ok = lr >= 2 && (axis < 0 || shapeOf(m.getRhs())[axis] == 1);
        }
        if (!ok) {
          why = "it contracts over the batch dimension";
          return;
        }
        BatchLoc out = *lhs;
        out.axis += resultRank - lr;
        // A fused bias is one value per column; an addend is batched with
        // the result.
        Value bias = m.getBias(), addend = m.getAddend();
        size_t first = 2;
        if ((bias && locs[first]) ||
            (addend && (!locs[first + 1] || *locs[first + 1] != out))) {
          why = "its fused bias or addend does not follow the batch";
          return;
        }
        result = out;
      })
      .Case<graph::GemmOp>([&](graph::GemmOp g) {
        Value c = g.getC();
        if (locs[0] && in.axis == 0 && !g.getTransA() && !locs[1] &&
            (!c || (!locs[2] && (rankOf(c) < 2 || dim0(c) == 1))))
          result = in;
        else
          why = "it contracts over the batch dimension or its bias spans it";
      })
      .Case<graph::GatherOp>([&](graph::GatherOp g) {
        // Gathers along another dimension of batched data (PyTorch takes q,
        // k and v from a stacked projection so) and embedding lookups (a
        // shared table, batched indices) keep samples apart.
        int64_t axis = normalizeAxis(g.getAxis(), rank);
        if (locs[0] && !locs[1] && axis != in.axis) {
          result = in;
          if (in.axis > axis)
            result->axis += rankOf(g.getIndices()) - 1;
        } else if (!locs[0] && locs[1]) {
          result = *locs[1];
          result->axis += axis;
        } else {
          why = "it indexes along the batch dimension";
        }
      })
      .Case<graph::StridedMatMulOp>([&](graph::StridedMatMulOp m) {
        if (auto b = stridedMatMulBatch(m, locs, batch, why))
          result = b->result;
      })
      .Default([&](Operation *) { why = "unexpected op"; });
  return result;
}

/// Rewrites the attributes that name the batch's extent for a slice of
/// `size` samples, from where the original op's operands and result carried
/// the batch.
void adjustShapeAttrs(Operation *op, Operation *clone, int64_t batch,
                      int64_t size,
                      ArrayRef<std::optional<BatchLoc>> operandLocs,
                      std::optional<BatchLoc> resultLoc) {
  auto setAt = [&](StringRef name, int64_t index, BatchLoc loc) {
    auto attr = op->getAttrOfType<DenseI64ArrayAttr>(name);
    SmallVector<int64_t> v(attr.asArrayRef());
    v[index] = loc.outer * size * loc.inner;
    clone->setAttr(name, DenseI64ArrayAttr::get(op->getContext(), v));
  };
  if (isa<graph::ReshapeOp, graph::ExpandOp>(op) && resultLoc)
    setAt("shape", resultLoc->axis, *resultLoc);
  if (isa<graph::SliceOp>(op) && operandLocs[0])
    setAt("ends", operandLocs[0]->axis, *operandLocs[0]);
  if (auto m = dyn_cast<graph::StridedMatMulOp>(op)) {
    std::string why;
    auto b = stridedMatMulBatch(m, operandLocs, batch, why);
    assert(b && "a split strided matmul was analyzed first");
    setAt("shape", b->result.axis, b->result);
    MLIRContext *ctx = op->getContext();
    for (int i = 0; i < 2; ++i) {
      if (!b->view[i])
        continue;
      StringRef prefix = i ? "rhs_" : "lhs_";
      SmallVector<int64_t> shape(i ? m.getRhsShape() : m.getLhsShape());
      SmallVector<int64_t> strides(i ? m.getRhsStrides() : m.getLhsStrides());
      int64_t offset = i ? m.getRhsOffset() : m.getLhsOffset();
      sliceView(shape, strides, offset, shapeOf(op->getOperand(i)),
                *operandLocs[i], batch, *b->view[i], size);
      clone->setAttr((prefix + "shape").str(),
                     DenseI64ArrayAttr::get(ctx, shape));
      clone->setAttr((prefix + "strides").str(),
                     DenseI64ArrayAttr::get(ctx, strides));
      clone->setAttr((prefix + "offset").str(),
                     IntegerAttr::get(IntegerType::get(ctx, 64), offset));
    }
  }
}

} // namespace

/// A graph.constant whose dimension 0 is the batch and whose rows along it
/// are all equal.
bool isBatchUniformConstant(Value v, int64_t batch) {
  auto c = v.getDefiningOp<graph::ConstantOp>();
  if (!c || batch < 2)
    return false;
  auto type = cast<RankedTensorType>(c.getType());
  if (type.getRank() < 1 || type.getDimSize(0) != batch)
    return false;
  std::vector<uint8_t> scratch;
  ArrayRef<uint8_t> bytes = constantBytes(c.getValue(), scratch);
  if (bytes.empty() || bytes.size() % batch)
    return false;
  size_t row = bytes.size() / batch;
  for (int64_t b = 1; b < batch; ++b)
    if (std::memcmp(bytes.data(), bytes.data() + b * row, row))
      return false;
  return true;
}

BatchInfo analyzeBatch(func::FuncOp func) {
  BatchInfo info;
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments())
    if (rankOf(arg) >= 1) {
      info.batch = dim0(arg);
      break;
    }
  if (info.batch < 0) {
    info.why = "the model has no input with a batch dimension";
    return info;
  }
  if (info.batch == 0) {
    info.why = "the model's batch dimension is empty";
    return info;
  }
  for (BlockArgument arg : body.getArguments())
    if (rankOf(arg) >= 1 && dim0(arg) == info.batch)
      info.locations[arg] = BatchLoc();
  auto refuse = [&](Operation *op) {
    info.failedOp = op;
    info.why = "'" + op->getName().getStringRef().str() + "' (ONNX node '" +
               onnxNodeName(op->getLoc()) + "'): " + info.reason;
    return info;
  };
  for (Operation &op : body.without_terminator()) {
    SmallVector<bool> flags;
    SmallVector<std::optional<BatchLoc>> locs;
    for (Value v : op.getOperands()) {
      locs.push_back(info.locationOf(v));
      flags.push_back(locs.back().has_value());
    }
    if (llvm::none_of(flags, [](bool b) { return b; }))
      continue;
    auto analyzeOp = [&]() -> std::optional<BatchLoc> {
      if (followsBatch(&op))
        return followBatch(&op, locs, info.batch, info.reason);
      for (auto [i, l] : llvm::enumerate(locs))
        if (l && !l->isLeading()) {
          info.reason = "it needs the batch in dimension 0, but operand #" +
                        std::to_string(i) + " carries it in dimension " +
                        std::to_string(l->axis);
          return std::nullopt;
        }
      if (failed(checkSampleWise(&op, flags, info.batch, info.reason)))
        return std::nullopt;
      return BatchLoc();
    };
    std::optional<BatchLoc> resultLoc = analyzeOp();
    if (!resultLoc) {
      // A constant that spans the batch with the same rows for every sample
      // (a mask or class token an exporter broadcast to a fixed batch) is
      // batched after all: each slice takes its leading rows.
      SmallVector<Value> uniform;
      for (auto [i, v] : llvm::enumerate(op.getOperands()))
        if (!flags[i] && !llvm::is_contained(uniform, v) &&
            isBatchUniformConstant(v, info.batch) &&
            llvm::none_of(v.getUsers(), [&](Operation *user) {
              // An earlier user read it as shared; it must stay so.
              return user->isBeforeInBlock(&op);
            }))
          uniform.push_back(v);
      // Every use of a promoted value, repeated operands too.
      for (auto [i, v] : llvm::enumerate(op.getOperands()))
        if (llvm::is_contained(uniform, v)) {
          locs[i] = BatchLoc();
          flags[i] = true;
        }
      std::string first = info.reason;
      if (!uniform.empty())
        resultLoc = analyzeOp();
      if (!resultLoc) {
        info.reason = first;
        return refuse(&op);
      }
      for (Value v : uniform) {
        info.locations[v] = BatchLoc();
        info.uniformConstants.push_back(v);
      }
    }
    info.batchedOps.insert(&op);
    for (Value r : op.getResults())
      info.locations[r] = *resultLoc;
  }
  // Slices of a batch are concatenated along dimension 0.
  for (Value v : body.getTerminator()->getOperands())
    if (std::optional<BatchLoc> loc = info.locationOf(v);
        loc && !loc->isLeading() && v.getDefiningOp()) {
      info.reason = "a model output carries the batch in dimension " +
                    std::to_string(loc->axis) + " instead of dimension 0";
      return refuse(v.getDefiningOp());
    }
  info.splittable = true;
  return info;
}

LogicalResult
splitBatch(func::FuncOp func, int64_t parts, StringRef purpose,
           std::function<int64_t(int64_t slice, Operation *op)> deviceOf,
           std::function<int64_t(int64_t slice)> microBatchOf,
           ArrayRef<int64_t> sliceSizes) {
  Block &body = func.getBody().front();
  if (parts < 1)
    return func.emitError()
           << purpose << ": need at least 1 part, got " << parts;
  if (parts == 1) {
    return success();
  }
  BatchInfo info = analyzeBatch(func);
  int64_t batch = info.batch;
  if (batch < 0)
    return func.emitError() << purpose
                            << ": the model has no input with a batch "
                               "dimension to split";
  if (batch < parts)
    return func.emitError()
           << purpose << ": batch " << batch << " is smaller than " << parts
           << " parts; raise --batch or use fewer parts";
  if (!info.splittable)
    return info.failedOp->emitError()
           << purpose << " needs ops that treat samples independently, but '"
           << info.failedOp->getName() << "' (ONNX node '"
           << onnxNodeName(info.failedOp->getLoc())
           << "') cannot be split along the batch: " << info.reason
           << "; use the single or pipeline strategy with one micro-batch";
  if (!sliceSizes.empty()) {
    int64_t total = 0;
    for (int64_t size : sliceSizes)
      total += size;
    if (static_cast<int64_t>(sliceSizes.size()) != parts || total != batch ||
        llvm::any_of(sliceSizes, [](int64_t size) { return size < 1; }))
      return func.emitError()
             << purpose << ": " << sliceSizes.size() << " slices totalling "
             << total << " do not split batch " << batch << " into " << parts
             << " non-empty parts";
  }
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    if (!isa<graph::ConstantOp>(op))
      ops.push_back(&op);

  OpBuilder builder(func.getContext());
  auto returnOp = cast<func::ReturnOp>(body.getTerminator());
  builder.setInsertionPoint(returnOp);
  SmallVector<SmallVector<Value>> partResults(returnOp.getNumOperands());
  int64_t offset = 0;
  for (int64_t p = 0; p < parts; ++p) {
    int64_t size = sliceSizes.empty()
                       ? batch / parts + (p < batch % parts ? 1 : 0)
                       : sliceSizes[p];
    IRMapping map;
    for (BlockArgument arg : body.getArguments()) {
      if (!info.locationOf(arg))
        continue;
      auto type = cast<RankedTensorType>(arg.getType());
      SmallVector<int64_t> starts(type.getRank(), 0), ends(type.getShape()),
          steps(type.getRank(), 1);
      starts[0] = offset;
      ends[0] = offset + size;
      SmallVector<int64_t> shape(type.getShape());
      shape[0] = size;
      auto slice = graph::SliceOp::create(
          builder, arg.getLoc(),
          RankedTensorType::get(shape, type.getElementType()), arg,
          builder.getDenseI64ArrayAttr(starts),
          builder.getDenseI64ArrayAttr(ends),
          builder.getDenseI64ArrayAttr(steps));
      graph::setDevice(slice, graph::kHostDevice);
      map.map(arg, slice.getResult());
    }
    for (Value v : info.uniformConstants) {
      // Equal rows: the leading `size` rows serve every slice.
      auto type = cast<RankedTensorType>(v.getType());
      std::vector<uint8_t> scratch;
      ArrayRef<uint8_t> bytes = constantBytes(
          v.getDefiningOp<graph::ConstantOp>().getValue(), scratch);
      SmallVector<int64_t> shape(type.getShape());
      shape[0] = size;
      auto sliceType = RankedTensorType::get(shape, type.getElementType());
      size_t sliceBytes = bytes.size() / batch * size;
      auto slice = graph::ConstantOp::create(
          builder, v.getLoc(), sliceType,
          bytesToElements(sliceType, bytes.take_front(sliceBytes)));
      map.map(v, slice.getResult());
    }
    for (Operation *op : ops) {
      Operation *clone = builder.clone(*op, map);
      SmallVector<std::optional<BatchLoc>> operandLocs;
      for (Value v : op->getOperands())
        operandLocs.push_back(info.locationOf(v));
      if (llvm::any_of(operandLocs, [](const auto &l) { return l; })) {
        std::optional<BatchLoc> resultLoc;
        if (op->getNumResults())
          resultLoc = info.locationOf(op->getResult(0));
        adjustShapeAttrs(op, clone, batch, size, operandLocs, resultLoc);
        if (failed(reinferTypes(clone)))
          return failure();
      }
      graph::setDevice(clone, deviceOf(p, op));
      if (microBatchOf)
        clone->setAttr(GraphDialect::kMicroBatchAttrName,
                       builder.getI64IntegerAttr(microBatchOf(p)));
    }
    for (auto [i, v] : llvm::enumerate(returnOp.getOperands()))
      partResults[i].push_back(map.lookupOrDefault(v));
    offset += size;
  }
  for (auto [i, v] : llvm::enumerate(returnOp.getOperands())) {
    if (!info.locationOf(v)) {
      returnOp.setOperand(i, partResults[i].front());
      continue;
    }
    auto concat =
        graph::ConcatOp::create(builder, v.getLoc(), v.getType(),
                                partResults[i], builder.getI64IntegerAttr(0));
    graph::setDevice(concat, graph::kHostDevice);
    returnOp.setOperand(i, concat.getResult());
  }
  for (Operation *op : llvm::reverse(ops)) {
    op->dropAllUses();
    op->erase();
  }
  return success();
}

} // namespace mlir::partc
