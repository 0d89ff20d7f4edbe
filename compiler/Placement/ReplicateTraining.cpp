//===- ReplicateTraining.cpp - partc-replicate-training -------------------===//
//
// Data-parallel training as DistributedDataParallel runs it: every replica
// runs the whole step on its rows of the batch, with its own parameters and
// optimizer state, and averages each gradient with the other replicas'
// before its update, so the replicas stay identical. The averages are
// graph.all_reduce ops, one per replica and gradient, that the plan lowers
// to a collective of the devices.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <limits>

namespace mlir::partc {
#define GEN_PASS_DEF_REPLICATETRAINING
#include "compiler/Passes.h.inc"

namespace {

using graph::GraphDialect;

/// The gradient an optimizer update reads, or null.
OpOperand *gradientOperand(Operation *op) {
  if (isa<graph::SgdUpdateOp, graph::AdamWUpdateOp>(op))
    return &op->getOpOperand(1);
  return nullptr;
}

class Replicator {
public:
  Replicator(ModuleOp module, func::FuncOp func, int64_t replicas,
             int64_t microBatches)
      : module_(module), func_(func), builder_(module.getContext()),
        replicas_(replicas), microBatches_(microBatches) {}
  LogicalResult run();

private:
  LogicalResult findBatchedArguments();
  LogicalResult cloneReplica(int64_t r);
  Value accumulate(ArrayRef<Value> parts, Location loc, int64_t r);
  void averageAcrossReplicas(Value v, int64_t group);

  ModuleOp module_;
  func::FuncOp func_;
  OpBuilder builder_;
  int64_t replicas_, microBatches_;
  SmallVector<BlockArgument> batched_;
  /// The step's ops: its state (once per replica), its work on samples
  /// (once per micro-batch) and its updates (once per replica, last).
  SmallVector<Operation *> stateOps_, sampleOps_, updateOps_;
  /// The values the replicas average: gradients and results.
  llvm::SetVector<Value> averaged_;
  /// Each replica's values as its updates see them (averaged values: the
  /// mean over its micro-batches), and its first op (where averages of
  /// values that no op of the replica computes go).
  SmallVector<IRMapping> maps_;
  SmallVector<Operation *> firstOps_;
  /// Each averaged value's average on replica 0.
  DenseMap<Value, Value> averageOnFirst_;
  Value inverseMicroBatches_;
};

LogicalResult Replicator::findBatchedArguments() {
  int64_t parts = replicas_ * microBatches_;
  for (BlockArgument arg : func_.getBody().front().getArguments()) {
    auto slices = func_.getArgAttrOfType<IntegerAttr>(
        arg.getArgNumber(), GraphDialect::kBatchSliceAttrName);
    if (!slices)
      continue;
    if (slices.getInt() != parts)
      return func_.emitError()
             << "input " << arg.getArgNumber() << " holds one of "
             << slices.getInt() << " slices of the batch, but " << replicas_
             << " replica(s) of " << microBatches_
             << " micro-batch(es) were asked for; run partc-slice-batch with "
                "parts="
             << parts;
    batched_.push_back(arg);
  }
  if (batched_.empty())
    return func_.emitError()
           << "no input holds a slice of the batch; run partc-slice-batch "
              "with parts="
           << parts << " before partc-prepare-training";
  return success();
}

/// The mean of a replica's micro-batch values, each added as soon as it
/// is computed, so that one micro-batch's gradients are live at a time.
Value Replicator::accumulate(ArrayRef<Value> parts, Location loc, int64_t r) {
  Block &body = func_.getBody().front();
  auto after = [&](Value v) -> Operation * {
    Operation *def = v.getDefiningOp();
    return def && !isa<graph::ConstantOp>(def) ? def : nullptr;
  };
  Value sum = parts.front();
  for (Value part : parts.drop_front()) {
    Operation *a = after(sum), *b = after(part);
    Operation *last = !a ? b : !b ? a : a->isBeforeInBlock(b) ? b : a;
    if (last)
      builder_.setInsertionPointAfter(last);
    else
      builder_.setInsertionPoint(body.getTerminator());
    sum = graph::AddOp::create(builder_, loc, sum.getType(), sum, part,
                               StringAttr());
    graph::setDevice(sum.getDefiningOp(), r);
  }
  builder_.setInsertionPointAfter(sum.getDefiningOp());
  Value mean = graph::MulOp::create(builder_, loc, sum, inverseMicroBatches_);
  graph::setDevice(mean.getDefiningOp(), r);
  return mean;
}

LogicalResult Replicator::cloneReplica(int64_t r) {
  Block &body = func_.getBody().front();
  auto returnOp = body.getTerminator();
  IRMapping &map = maps_.emplace_back();
  builder_.setInsertionPoint(returnOp);
  firstOps_.push_back(nullptr);
  auto place = [&](Operation *clone) {
    graph::setDevice(clone, r);
    if (!firstOps_.back())
      firstOps_.back() = clone;
  };
  for (Operation *op : stateOps_)
    place(builder_.clone(*op, map));
  SmallVector<IRMapping> microMaps;
  for (int64_t k = 0; k < microBatches_; ++k) {
    IRMapping &micro = microMaps.emplace_back(map);
    // This part's rows, on the host; the arguments have grown to the whole
    // batch already.
    int64_t part = r * microBatches_ + k;
    for (BlockArgument arg : batched_) {
      auto whole = cast<RankedTensorType>(arg.getType());
      int64_t rows = whole.getDimSize(0) / (replicas_ * microBatches_);
      SmallVector<int64_t> shape(whole.getShape()), starts(whole.getRank(), 0),
          ends(whole.getShape()), steps(whole.getRank(), 1);
      shape[0] = rows;
      starts[0] = part * rows;
      ends[0] = (part + 1) * rows;
      auto rowsOfPart = graph::SliceOp::create(
          builder_, arg.getLoc(),
          RankedTensorType::get(shape, whole.getElementType()), arg,
          builder_.getDenseI64ArrayAttr(starts),
          builder_.getDenseI64ArrayAttr(ends),
          builder_.getDenseI64ArrayAttr(steps));
      graph::setDevice(rowsOfPart, graph::kHostDevice);
      micro.map(arg, rowsOfPart.getResult());
    }
    for (Operation *op : sampleOps_) {
      Operation *clone = builder_.clone(*op, micro);
      place(clone);
      // This part's rows continue the whole batch's mask numbering.
      if (auto dropout = dyn_cast<graph::DropoutOp>(clone))
        dropout.setOffset(
            dropout.getOffset() +
            part * cast<RankedTensorType>(dropout.getInput().getType())
                       .getNumElements());
    }
  }
  if (microBatches_ == 1) {
    map = microMaps.front();
  } else {
    for (Value v : averaged_) {
      SmallVector<Value> parts;
      for (IRMapping &micro : microMaps)
        parts.push_back(micro.lookupOrDefault(v));
      map.map(v, accumulate(parts, v.getLoc(), r));
    }
    // Anything else an update reads from a micro-batch has no one value.
    for (Operation *op : updateOps_)
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && llvm::is_contained(sampleOps_, def) &&
            !averaged_.contains(operand))
          return op->emitOpError()
                 << "reads a value of each micro-batch that is not a "
                    "gradient; gradient accumulation over micro-batches "
                    "does not support it yet (batch normalization's running "
                    "statistics); use --micro-batches 1";
  }
  builder_.setInsertionPoint(returnOp);
  for (Operation *op : updateOps_)
    place(builder_.clone(*op, map));
  return success();
}

void Replicator::averageAcrossReplicas(Value v, int64_t group) {
  if (replicas_ == 1) {
    averageOnFirst_[v] = maps_[0].lookupOrDefault(v);
    return;
  }
  SmallVector<int64_t> devices;
  for (int64_t r = 0; r < replicas_; ++r)
    devices.push_back(r);
  for (int64_t r = 0; r < replicas_; ++r) {
    Value local = maps_[r].lookupOrDefault(v);
    // Right after the gradient is computed, so that later backward work
    // may overlap the exchange.
    Operation *def = local.getDefiningOp();
    if (def && !isa<graph::ConstantOp>(def))
      builder_.setInsertionPointAfter(def);
    else
      builder_.setInsertionPoint(firstOps_[r]);
    auto average = graph::AllReduceOp::create(
        builder_, v.getLoc(), local, builder_.getI64IntegerAttr(group),
        builder_.getDenseI64ArrayAttr(devices));
    graph::setDevice(average, r);
    for (OpOperand &use : llvm::make_early_inc_range(local.getUses()))
      if (OpOperand *grad = gradientOperand(use.getOwner());
          grad == &use && graph::getDevice(use.getOwner()) == r)
        use.set(average);
    if (r == 0)
      averageOnFirst_[v] = average;
  }
}

LogicalResult Replicator::run() {
  if (failed(findBatchedArguments()))
    return failure();
  Block &body = func_.getBody().front();
  auto returnOp = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(returnOp.getOperands()))
    if (!cast<RankedTensorType>(v.getType()).getElementType().isF32())
      return func_.emitError()
             << "result " << i << " is " << v.getType()
             << "; a data-parallel training step returns f32 losses and "
                "gradients, which the replicas average";

  for (Operation &op : body.without_terminator()) {
    if (isa<graph::ConstantOp>(op))
      continue;
    if (isa<graph::VariableOp>(op))
      stateOps_.push_back(&op);
    else if (isa<graph::StateUpdateOpInterface>(op))
      updateOps_.push_back(&op);
    else
      sampleOps_.push_back(&op);
    if (OpOperand *grad = gradientOperand(&op))
      averaged_.insert(grad->get());
  }
  for (Value v : returnOp.getOperands())
    averaged_.insert(v);
  // Updates in the order their gradients are computed (the backward pass
  // runs from the last layer to the first): a replica's first updates then
  // run while the last gradients are still being averaged.
  DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(body.without_terminator()))
    position[&op] = static_cast<int64_t>(i);
  auto readyAt = [&](Operation *update) {
    OpOperand *grad = gradientOperand(update);
    Operation *def = grad ? grad->get().getDefiningOp() : nullptr;
    return def ? position.lookup(def) : std::numeric_limits<int64_t>::max();
  };
  llvm::stable_sort(updateOps_, [&](Operation *a, Operation *b) {
    return readyAt(a) < readyAt(b);
  });
  if (sampleOps_.empty())
    return func_.emitError() << "has no ops to replicate";

  // The inputs grow back to the whole batch; each part reads its rows.
  for (BlockArgument arg : batched_) {
    auto slice = cast<RankedTensorType>(arg.getType());
    SmallVector<int64_t> whole(slice.getShape());
    whole[0] *= replicas_ * microBatches_;
    arg.setType(RankedTensorType::get(whole, slice.getElementType()));
    func_.removeArgAttr(arg.getArgNumber(), GraphDialect::kBatchSliceAttrName);
  }
  // The originals' rows are read through the arguments' old types; they
  // are erased below, before anything verifies them.
  SmallVector<Type> argTypes(body.getArgumentTypes());
  builder_.setInsertionPointToStart(&body);
  auto scalar = RankedTensorType::get({}, builder_.getF32Type());
  inverseMicroBatches_ = graph::ConstantOp::create(
      builder_, func_.getLoc(), scalar,
      DenseElementsAttr::get(scalar, 1.0f / float(microBatches_)));
  for (int64_t r = 0; r < replicas_; ++r)
    if (failed(cloneReplica(r)))
      return failure();
  for (auto [group, v] : llvm::enumerate(averaged_))
    averageAcrossReplicas(v, static_cast<int64_t>(group));
  for (OpOperand &result : returnOp->getOpOperands())
    result.set(averageOnFirst_.lookup(result.get()));
  // Groups numbered in the order the devices meet them, for readers.
  DenseMap<int64_t, int64_t> renumbered;
  for (auto reduce : body.getOps<graph::AllReduceOp>())
    if (graph::getDevice(reduce) == 0)
      renumbered.try_emplace(reduce.getGroup(), renumbered.size());
  for (auto reduce : body.getOps<graph::AllReduceOp>())
    reduce.setGroup(renumbered.lookup(reduce.getGroup()));
  for (auto *ops : {&updateOps_, &sampleOps_, &stateOps_})
    for (Operation *op : llvm::reverse(*ops)) {
      op->dropAllUses();
      op->erase();
    }
  if (inverseMicroBatches_.use_empty())
    inverseMicroBatches_.getDefiningOp()->erase();
  func_.setFunctionType(
      builder_.getFunctionType(argTypes, returnOp.getOperandTypes()));
  setNumDevices(module_, replicas_);
  recordPlacement(module_, "strategy", replicas_ > 1 ? "data" : "single");
  recordPlacement(module_, "replicas", std::to_string(replicas_));
  recordPlacement(module_, "micro_batches", std::to_string(microBatches_));
  if (replicas_ > 1)
    recordPlacement(module_, "gradient_all_reduces",
                    std::to_string(averaged_.size()));
  return success();
}

struct ReplicateTrainingPass
    : public impl::ReplicateTrainingBase<ReplicateTrainingPass> {
  using ReplicateTrainingBase::ReplicateTrainingBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = getMainFunction(module);
    if (failed(func))
      return signalPassFailure();
    if (replicas < 1 || microBatches < 1 || replicas * microBatches < 2) {
      module.emitError() << "partc-replicate-training needs at least 2 "
                            "replicas or micro-batches, got "
                         << static_cast<int64_t>(replicas) << " x "
                         << static_cast<int64_t>(microBatches)
                         << "; one device and one batch train without it";
      return signalPassFailure();
    }
    if (failed(Replicator(module, *func, replicas, microBatches).run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::partc
