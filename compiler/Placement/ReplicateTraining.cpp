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
  Replicator(ModuleOp module, func::FuncOp func, int64_t replicas)
      : module_(module), func_(func), builder_(module.getContext()),
        replicas_(replicas) {}
  LogicalResult run();

private:
  LogicalResult findBatchedArguments();
  void cloneReplicas();
  void averageAcrossReplicas(Value v, int64_t group);

  ModuleOp module_;
  func::FuncOp func_;
  OpBuilder builder_;
  int64_t replicas_;
  SmallVector<BlockArgument> batched_;
  SmallVector<Operation *> ops_;
  /// Each replica's clones, and its first op (where averages of values
  /// that no op of the replica computes go).
  SmallVector<IRMapping> maps_;
  SmallVector<Operation *> firstOps_;
  /// Each averaged value's average on replica 0.
  DenseMap<Value, Value> averageOnFirst_;
};

LogicalResult Replicator::findBatchedArguments() {
  for (BlockArgument arg : func_.getBody().front().getArguments()) {
    auto parts = func_.getArgAttrOfType<IntegerAttr>(
        arg.getArgNumber(), GraphDialect::kBatchSliceAttrName);
    if (!parts)
      continue;
    if (parts.getInt() != replicas_)
      return func_.emitError()
             << "input " << arg.getArgNumber() << " holds one of "
             << parts.getInt() << " slices of the batch, but " << replicas_
             << " replicas were asked for; run "
                "partc-slice-batch with parts="
             << replicas_;
    batched_.push_back(arg);
  }
  if (batched_.empty())
    return func_.emitError()
           << "no input holds a slice of the batch; run partc-slice-batch "
              "with parts="
           << replicas_ << " before partc-prepare-training";
  return success();
}

void Replicator::cloneReplicas() {
  Block &body = func_.getBody().front();
  auto returnOp = body.getTerminator();
  for (int64_t r = 0; r < replicas_; ++r) {
    IRMapping &map = maps_.emplace_back();
    builder_.setInsertionPoint(returnOp);
    for (BlockArgument arg : batched_) {
      // The argument has grown to the whole batch already.
      auto whole = cast<RankedTensorType>(arg.getType());
      int64_t rows = whole.getDimSize(0) / replicas_;
      SmallVector<int64_t> shape(whole.getShape()), starts(whole.getRank(), 0),
          ends(whole.getShape()), steps(whole.getRank(), 1);
      shape[0] = rows;
      starts[0] = r * rows;
      ends[0] = (r + 1) * rows;
      auto rowsOfReplica = graph::SliceOp::create(
          builder_, arg.getLoc(),
          RankedTensorType::get(shape, whole.getElementType()), arg,
          builder_.getDenseI64ArrayAttr(starts),
          builder_.getDenseI64ArrayAttr(ends),
          builder_.getDenseI64ArrayAttr(steps));
      graph::setDevice(rowsOfReplica, graph::kHostDevice);
      map.map(arg, rowsOfReplica.getResult());
    }
    firstOps_.push_back(nullptr);
    for (Operation *op : ops_) {
      Operation *clone = builder_.clone(*op, map);
      graph::setDevice(clone, r);
      if (!firstOps_.back())
        firstOps_.back() = clone;
      // Replica r's rows continue the whole batch's mask numbering.
      if (auto dropout = dyn_cast<graph::DropoutOp>(clone))
        dropout.setOffset(
            dropout.getOffset() +
            r * cast<RankedTensorType>(dropout.getInput().getType())
                    .getNumElements());
    }
  }
}

void Replicator::averageAcrossReplicas(Value v, int64_t group) {
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

  llvm::SetVector<Value> averaged;
  for (Operation &op : body.without_terminator()) {
    if (!isa<graph::ConstantOp>(op))
      ops_.push_back(&op);
    if (OpOperand *grad = gradientOperand(&op))
      averaged.insert(grad->get());
  }
  for (Value v : returnOp.getOperands())
    averaged.insert(v);
  if (ops_.empty())
    return func_.emitError() << "has no ops to replicate";

  // The inputs grow back to the whole batch; each replica reads its rows.
  for (BlockArgument arg : batched_) {
    auto slice = cast<RankedTensorType>(arg.getType());
    SmallVector<int64_t> whole(slice.getShape());
    whole[0] *= replicas_;
    arg.setType(RankedTensorType::get(whole, slice.getElementType()));
    func_.removeArgAttr(arg.getArgNumber(), GraphDialect::kBatchSliceAttrName);
  }
  // The originals' rows are read through the arguments' old types; they
  // are erased below, before anything verifies them.
  SmallVector<Type> argTypes(body.getArgumentTypes());
  cloneReplicas();
  for (auto [group, v] : llvm::enumerate(averaged))
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
  for (Operation *op : llvm::reverse(ops_)) {
    op->dropAllUses();
    op->erase();
  }
  func_.setFunctionType(
      builder_.getFunctionType(argTypes, returnOp.getOperandTypes()));
  setNumDevices(module_, replicas_);
  recordPlacement(module_, "strategy", "data");
  recordPlacement(module_, "replicas", std::to_string(replicas_));
  recordPlacement(module_, "gradient_all_reduces",
                  std::to_string(averaged.size()));
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
    if (replicas < 2) {
      module.emitError() << "partc-replicate-training needs at least 2 "
                            "replicas, got "
                         << static_cast<int64_t>(replicas)
                         << "; one device trains without it";
      return signalPassFailure();
    }
    if (failed(Replicator(module, *func, replicas).run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::partc
