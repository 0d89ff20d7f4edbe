//===- BatchSplit.cpp - Clone a graph per batch slice ---------------------===//
//
// A value is "batched" when its dimension 0 is the model's batch dimension.
// An op may be cloned per slice when it treats each sample independently;
// the rules below accept exactly those ops and name the node otherwise.
//
//===----------------------------------------------------------------------===//
#include "compiler/Transforms/BatchSplit.h"
#include "compiler/Transforms/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
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

/// Checks that `op` keeps samples independent given which operands are
/// batched; explains why not otherwise.
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
      .Case<graph::ReshapeOp, graph::ExpandOp>([&](auto) {
        ok = dim0(op->getOperand(0)) == batch && allResultsBatched();
        if (!ok)
          why = "it reshapes across the batch dimension";
      })
      .Case<graph::TransposeOp>([&](graph::TransposeOp t) {
        ok = t.getPerm().front() == 0;
        if (!ok)
          why = "it moves the batch dimension";
      })
      .Case<graph::SoftmaxOp, graph::LogSoftmaxOp>([&](auto s) {
        ok = s.getAxis() != 0;
        if (!ok)
          why = "it normalizes over the batch dimension";
      })
      .Case<graph::LayerNormOp>([&](graph::LayerNormOp l) {
        ok = l.getAxis() != 0 && !batched[1] &&
             (op->getNumOperands() < 3 || !batched[2]);
        if (!ok)
          why = "it normalizes over the batch dimension";
      })
      .Case<graph::ConcatOp, graph::SplitOp>([&](auto c) {
        ok =
            c.getAxis() != 0 && llvm::all_of(batched, [](bool b) { return b; });
        if (!ok)
          why = "it concatenates or splits along the batch dimension";
      })
      .Case<graph::GatherOp>([&](graph::GatherOp g) {
        // Embedding lookups (unbatched table, batched indices) keep samples
        // apart as well as gathers along a later axis of batched data.
        ok = (g.getAxis() != 0 && batched[0] && !batched[1]) ||
             (g.getAxis() == 0 && !batched[0] && batched[1]);
        if (!ok)
          why = "it indexes along the batch dimension";
      })
      .Case<graph::SliceOp>([&](graph::SliceOp s) {
        ok = s.getStarts()[0] == 0 && s.getSteps()[0] == 1 &&
             s.getEnds()[0] == batch;
        if (!ok)
          why = "it slices the batch dimension";
      })
      .Case<graph::PadOp>([&](graph::PadOp p) {
        ok = p.getPads()[0] == 0 && p.getPads()[rankOf(op->getOperand(0))] == 0;
        if (!ok)
          why = "it pads the batch dimension";
      })
      .Case<graph::MatMulOp>([&](graph::MatMulOp) {
        // Rows of a 2-D left operand are samples; for higher ranks the
        // batch is a batch dimension, which a right operand may share only
        // when it is batched too (or broadcasts with extent 1).
        int64_t lr = rankOf(op->getOperand(0)), rr = rankOf(op->getOperand(1));
        if (batched[1])
          ok = batched[0] && lr >= 3 && rr == lr;
        else
          ok = batched[0] && lr >= 2 &&
               (lr == 2 || rr < lr || dim0(op->getOperand(1)) == 1);
        // A fused bias is one value per column, never per sample; a fused
        // addend has the result's shape, so it is batched with it.
        ok = ok && (op->getNumOperands() < 3 || !batched[2]) &&
             (op->getNumOperands() < 4 || batched[3]);
        if (!ok)
          why = "it contracts over the batch dimension";
      })
      .Case<graph::StridedMatMulOp>([&](graph::StridedMatMulOp m) {
        // A batched operand's view steps over whole samples in its first
        // dimension and stays inside one sample in the others; an unbatched
        // one is shared (extent 1 there).
        ok = m.getPerm().front() == 0 && m.getShape().front() == batch;
        for (int i = 0; i < 2 && ok; ++i) {
          ArrayRef<int64_t> shape = i ? m.getRhsShape() : m.getLhsShape();
          ArrayRef<int64_t> strides = i ? m.getRhsStrides() : m.getLhsStrides();
          int64_t offset = i ? m.getRhsOffset() : m.getLhsOffset();
          if (!batched[i]) {
            ok = shape.front() == 1;
            continue;
          }
          int64_t sample = cast<RankedTensorType>(op->getOperand(i).getType())
                               .getNumElements() /
                           batch;
          int64_t last = offset;
          for (size_t d = 1; d < shape.size(); ++d)
            last += (shape[d] - 1) * strides[d];
          ok = shape.front() == batch && strides.front() == sample &&
               last < sample;
        }
        if (!ok)
          why = "its operand views or its result mix samples of the batch";
      })
      .Case<graph::GemmOp>([&](graph::GemmOp g) {
        Value c = g.getC();
        ok = batched[0] && !g.getTransA() && !batched[1] &&
             (!c || (!batched[2] && (rankOf(c) < 2 || dim0(c) == 1)));
        if (!ok)
          why = "it contracts over the batch dimension or its bias spans it";
      })
      .Case<graph::MaxPoolWithIndicesOp>([&](auto) {
        ok = false;
        why = "its indices count positions across the whole batch";
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
      .Case<graph::ReduceSumOp, graph::ReduceMeanOp, graph::ReduceMaxOp,
            graph::ReduceMinOp, graph::ReduceProdOp>([&](auto r) {
        ok = r.getAxes().empty() || r.getAxes().front() != 0;
        if (!ok)
          why = "it reduces over the batch dimension";
      })
      .Default([&](Operation *) { ok = unbatchedBroadcastOnly(); });
  if (ok && !allResultsBatched())
    ok = false;
  return success(ok);
}

/// Rewrites shape attributes that name the batch extent for a slice of
/// `size` rows; `batched` tells which operands carry the batch.
void adjustShapeAttrs(Operation *op, int64_t size, ArrayRef<bool> batched) {
  auto setDim0 = [&](StringRef name) {
    auto attr = op->getAttrOfType<DenseI64ArrayAttr>(name);
    SmallVector<int64_t> v(attr.asArrayRef());
    v[0] = size;
    op->setAttr(name, DenseI64ArrayAttr::get(op->getContext(), v));
  };
  if (isa<graph::ReshapeOp, graph::ExpandOp>(op))
    setDim0("shape");
  if (isa<graph::SliceOp>(op))
    setDim0("ends");
  if (isa<graph::StridedMatMulOp>(op)) {
    setDim0("shape");
    if (batched[0])
      setDim0("lhs_shape");
    if (batched[1])
      setDim0("rhs_shape");
  }
}

} // namespace

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
  DenseSet<Value> &batched = info.batchedValues;
  for (BlockArgument arg : body.getArguments())
    if (rankOf(arg) >= 1 && dim0(arg) == info.batch)
      batched.insert(arg);
  for (Operation &op : body.without_terminator()) {
    SmallVector<bool> flags;
    for (Value v : op.getOperands())
      flags.push_back(batched.contains(v));
    if (llvm::none_of(flags, [](bool b) { return b; }))
      continue;
    if (failed(checkSampleWise(&op, flags, info.batch, info.reason))) {
      info.failedOp = &op;
      info.why = "'" + op.getName().getStringRef().str() + "' (ONNX node '" +
                 onnxNodeName(op.getLoc()) + "'): " + info.reason;
      return info;
    }
    info.batchedOps.insert(&op);
    for (Value r : op.getResults())
      batched.insert(r);
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
  DenseSet<Value> &batched = info.batchedValues;
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
      if (!batched.contains(arg))
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
    for (Operation *op : ops) {
      Operation *clone = builder.clone(*op, map);
      SmallVector<bool> operandBatched;
      for (Value v : op->getOperands())
        operandBatched.push_back(batched.contains(v));
      if (llvm::is_contained(operandBatched, true)) {
        adjustShapeAttrs(clone, size, operandBatched);
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
    if (!batched.contains(v)) {
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
