//===- BatchSplit.cpp - Clone a graph per batch slice ---------------------===//
//
// A value is "batched" when one of its dimensions carries the model's batch:
// dimension 0 at the inputs, elsewhere after transposes and reshapes (PyTorch's
// attention moves the batch to dimension 1 and merges it with the heads). A
// BatchLoc says where: along `axis`, index (x * batch + n) * inner + j for
// sample n. An op may be cloned per slice when it treats each sample
// independently; each op's rule (dialects/Graph/BatchRules.cpp) accepts
// exactly those ops, and the analysis names the node otherwise.
//
//===----------------------------------------------------------------------===//
#include "compiler/Placement/BatchSplit.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"
#include "mlir/IR/IRMapping.h"

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
      return graph::followBatch(&op, locs, info.batch, info.reason);
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

/// The error for a graph without a batched input.
static LogicalResult refuseNoBatch(func::FuncOp func, StringRef purpose) {
  return func.emitError() << purpose
                          << ": the model has no input with a batch "
                             "dimension to split";
}

/// The error for a graph whose op `info.failedOp` mixes samples.
static LogicalResult refuseMixedSamples(const BatchInfo &info,
                                        StringRef purpose, StringRef hint) {
  return info.failedOp->emitError()
         << purpose << " needs ops that treat samples independently, but '"
         << info.failedOp->getName() << "' (ONNX node '"
         << onnxNodeName(info.failedOp->getLoc())
         << "') cannot be split along the batch: " << info.reason << "; "
         << hint;
}

/// Clones `ops` for samples [offset, offset + size) of the batch, with `map`
/// holding the slice's batched arguments; `place` sees each clone.
static LogicalResult
cloneSlice(OpBuilder &builder, ArrayRef<Operation *> ops, const BatchInfo &info,
           int64_t size, int64_t offset, IRMapping &map,
           function_ref<void(Operation *op, Operation *clone)> place) {
  int64_t batch = info.batch;
  for (Value v : info.uniformConstants) {
    // Equal rows: the leading `size` rows serve every slice.
    auto type = cast<RankedTensorType>(v.getType());
    std::vector<uint8_t> scratch;
    ArrayRef<uint8_t> bytes =
        constantBytes(v.getDefiningOp<graph::ConstantOp>().getValue(), scratch);
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
      graph::sliceBatchAttrs(op, clone, batch, size, operandLocs, resultLoc);
      if (failed(reinferTypes(clone)))
        return failure();
      // The slice's mask continues the whole batch's numbering.
      if (isa<graph::DropoutOp, graph::SoftmaxGradOp>(clone)) {
        auto whole = cast<RankedTensorType>(op->getOperand(0).getType());
        graph::shiftDropoutOffset(clone,
                                  whole.getNumElements() / batch * offset);
      }
    }
    place(op, clone);
  }
  return success();
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
    return refuseNoBatch(func, purpose);
  if (batch < parts)
    return func.emitError()
           << purpose << ": batch " << batch << " is smaller than " << parts
           << " parts; raise --batch or use fewer parts";
  if (!info.splittable)
    return refuseMixedSamples(info, purpose,
                              "use the single or pipeline strategy with one "
                              "micro-batch");
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
    auto place = [&](Operation *op, Operation *clone) {
      graph::setDevice(clone, deviceOf(p, op));
      if (microBatchOf)
        clone->setAttr(GraphDialect::kMicroBatchAttrName,
                       builder.getI64IntegerAttr(microBatchOf(p)));
    };
    if (failed(cloneSlice(builder, ops, info, size, offset, map, place)))
      return failure();
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

LogicalResult shrinkBatch(func::FuncOp func, int64_t parts, StringRef purpose) {
  Block &body = func.getBody().front();
  BatchInfo info = analyzeBatch(func);
  int64_t batch = info.batch;
  if (batch < 0)
    return refuseNoBatch(func, purpose);
  if (parts < 1 || batch % parts)
    return func.emitError()
           << purpose << ": batch " << batch << " does not divide into "
           << parts << " equal slices; choose a --batch that " << parts
           << " divides";
  if (!info.splittable)
    return refuseMixedSamples(info, purpose,
                              "train it on one device without micro-batches "
                              "(--devices 1 --micro-batches 1)");
  if (parts == 1)
    return success();
  int64_t size = batch / parts;
  OpBuilder builder(func.getContext());
  auto returnOp = cast<func::ReturnOp>(body.getTerminator());

  // The slice's ops read stand-ins of the batched arguments until the
  // originals, no longer read, take the slice's type.
  IRMapping map;
  SmallVector<std::pair<BlockArgument, BlockArgument>> standIns;
  for (BlockArgument arg : llvm::to_vector(body.getArguments())) {
    if (!info.locationOf(arg))
      continue;
    auto type = cast<RankedTensorType>(arg.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[0] = size;
    BlockArgument standIn = body.addArgument(
        RankedTensorType::get(shape, type.getElementType()), arg.getLoc());
    map.map(arg, standIn);
    standIns.push_back({arg, standIn});
  }
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    if (!isa<graph::ConstantOp>(op))
      ops.push_back(&op);
  builder.setInsertionPoint(returnOp);
  if (failed(cloneSlice(builder, ops, info, size, /*offset=*/0, map,
                        [](Operation *, Operation *) {})))
    return failure();
  for (OpOperand &result : returnOp->getOpOperands())
    result.set(map.lookupOrDefault(result.get()));
  for (Operation *op : llvm::reverse(ops)) {
    op->dropAllUses();
    op->erase();
  }
  llvm::BitVector erase(body.getNumArguments());
  for (auto [arg, standIn] : standIns) {
    arg.setType(standIn.getType());
    standIn.replaceAllUsesWith(arg);
    erase.set(standIn.getArgNumber());
    func.setArgAttr(arg.getArgNumber(), GraphDialect::kBatchSliceAttrName,
                    builder.getI64IntegerAttr(parts));
  }
  body.eraseArguments(erase);
  func.setFunctionType(builder.getFunctionType(body.getArgumentTypes(),
                                               returnOp.getOperandTypes()));
  return success();
}

} // namespace mlir::partc
