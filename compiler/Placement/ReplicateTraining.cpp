//===- ReplicateTraining.cpp - partc-replicate-training -------------------===//
//
// Data-parallel training as DistributedDataParallel runs it: every replica
// runs the whole step on its rows of the batch, with its own parameters and
// optimizer state, and averages each gradient with the other replicas'
// before its update, so the replicas stay identical. The averages are
// graph.all_reduce ops, one per replica and gradient, that the plan lowers
// to a collective of the devices.
//
// With stages (a training pipeline), the step's ops already carry their
// stage (cut on the forward graph; each backward op takes its forward op's
// stage). Every replica is then a pipeline of S devices, and each device
// runs its micro-batches' forward and backward chunks in the order of the
// schedule (GPipe or 1F1B); the block is reordered so that each device's
// ops follow that order while every op still comes after what it reads.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <limits>
#include <map>

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

/// Where a device runs each chunk of its work: its state first, then each
/// micro-batch's forward and backward ops in the schedule's order, then the
/// updates.
class PipelineSchedule {
public:
  static constexpr int64_t kStateSlot = -1;
  static constexpr int64_t kUpdateSlot = std::numeric_limits<int64_t>::max();

  /// GPipe: every forward, then every backward. 1F1B: stage s runs
  /// S - s - 1 forwards ahead, then alternates, so it keeps at most S - s
  /// micro-batches' activations (one stage is plain accumulation: a
  /// micro-batch's backward right after its forward).
  PipelineSchedule(int64_t stages, int64_t microBatches, bool gpipe)
      : forward_(stages, SmallVector<int64_t>(microBatches)),
        backward_(stages, SmallVector<int64_t>(microBatches)) {
    for (int64_t s = 0; s < stages; ++s) {
      int64_t slot = 0;
      if (gpipe) {
        for (int64_t k = 0; k < microBatches; ++k)
          forward_[s][k] = slot++;
        for (int64_t k = 0; k < microBatches; ++k)
          backward_[s][k] = slot++;
        continue;
      }
      int64_t ahead = std::min(stages - s - 1, microBatches);
      for (int64_t k = 0; k < ahead; ++k)
        forward_[s][k] = slot++;
      for (int64_t k = 0; k + ahead < microBatches; ++k) {
        forward_[s][k + ahead] = slot++;
        backward_[s][k] = slot++;
      }
      for (int64_t k = microBatches - ahead; k < microBatches; ++k)
        backward_[s][k] = slot++;
    }
  }
  int64_t slot(int64_t stage, bool forward, int64_t microBatch) const {
    return (forward ? forward_ : backward_)[stage][microBatch];
  }

private:
  SmallVector<SmallVector<int64_t>> forward_, backward_;
};

class Replicator {
public:
  Replicator(ModuleOp module, func::FuncOp func, int64_t replicas,
             int64_t microBatches, int64_t stages, bool gpipe)
      : module_(module), func_(func), builder_(module.getContext()),
        replicas_(replicas), microBatches_(microBatches), stages_(stages),
        gpipe_(gpipe), schedule_(stages, microBatches, gpipe) {}
  LogicalResult run();

private:
  LogicalResult findBatchedArguments();
  LogicalResult findStages();
  void copyCountersPerStage();
  LogicalResult cloneReplica(int64_t r);
  Value accumulate(ArrayRef<Value> parts, Location loc, int64_t device);
  int64_t stageOf(Value v) const;
  FailureOr<Operation *> blendStatistics(Operation *update, IRMapping &map,
                                         ArrayRef<IRMapping> micro,
                                         int64_t device);
  void averageAcrossReplicas(Value v, int64_t group);
  LogicalResult orderBySchedule();

  int64_t deviceOf(int64_t replica, int64_t stage) const {
    return replica * stages_ + stage;
  }
  /// Places a clone on `device` at `slot` of that device's schedule.
  void place(Operation *op, int64_t device, int64_t slot) {
    graph::setDevice(op, device);
    slot_[op] = slot;
  }
  int64_t slotOfDef(Value v) const {
    Operation *def = v.getDefiningOp();
    auto it = def ? slot_.find(def) : slot_.end();
    return it == slot_.end() ? PipelineSchedule::kStateSlot : it->second;
  }

  ModuleOp module_;
  func::FuncOp func_;
  OpBuilder builder_;
  int64_t replicas_, microBatches_, stages_;
  bool gpipe_;
  PipelineSchedule schedule_;
  SmallVector<BlockArgument> batched_;
  /// Each op's stage, and whether it computes toward the loss (forward)
  /// or back from it.
  DenseMap<Operation *, int64_t> stage_;
  llvm::DenseSet<Operation *> forward_;
  /// Each clone's place in its device's schedule.
  DenseMap<Operation *, int64_t> slot_;
  /// The step's ops: its state (once per replica), its work on samples
  /// (once per micro-batch) and its updates (once per replica, last).
  SmallVector<Operation *> stateOps_, sampleOps_, updateOps_;
  /// The values the replicas average: gradients and results.
  llvm::SetVector<Value> averaged_;
  /// Each replica's values as its updates see them (averaged values: the
  /// mean over its micro-batches).
  SmallVector<IRMapping> maps_;
  /// Each averaged value's average on replica 0.
  DenseMap<Value, Value> averageOnFirst_;
  Value inverseMicroBatches_;
};

LogicalResult Replicator::findBatchedArguments() {
  int64_t parts = replicas_ * microBatches_;
  // A pipeline of one batch reads the inputs whole.
  if (parts == 1)
    return success();
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

LogicalResult Replicator::findStages() {
  Block &body = func_.getBody().front();
  auto returnOp = cast<func::ReturnOp>(body.getTerminator());
  for (Operation &op : body.without_terminator()) {
    if (isa<graph::ConstantOp>(op))
      continue;
    std::optional<int64_t> stage = graph::getDevice(&op);
    if (stages_ == 1) {
      stage_[&op] = 0;
      continue;
    }
    if (!stage || *stage < 0 || *stage >= stages_)
      return op.emitOpError()
             << "has no pipeline stage in [0, " << stages_ << ") (got "
             << (stage ? std::to_string(*stage) : std::string("none"))
             << "); run partc-assign-devices with num-devices=" << stages_
             << " on the forward graph before partc-prepare-training";
    stage_[&op] = *stage;
  }
  // The rest of a micro-batch's ops work back from the forward ones.
  collectForwardOps(returnOp.getOperand(0), forward_);
  return success();
}

/// State that only counts (the step, the seed), read on several stages,
/// gets a copy on each: updates read their step from a variable of their
/// own device, and no stage waits for another's counter.
void Replicator::copyCountersPerStage() {
  Block &body = func_.getBody().front();
  for (auto variable :
       llvm::make_early_inc_range(body.getOps<graph::VariableOp>())) {
    std::map<int64_t, SmallVector<OpOperand *>> readers;
    SmallVector<Operation *> counters;
    bool countsOnly = true;
    for (OpOperand &use : variable->getUses()) {
      Operation *user = use.getOwner();
      if (isa<graph::StateUpdateOpInterface>(user) &&
          llvm::is_contained(
              cast<graph::StateUpdateOpInterface>(user).getUpdatedOperands(),
              use.getOperandNumber())) {
        countsOnly &= user->getNumOperands() == 1;
        counters.push_back(user);
        continue;
      }
      readers[stage_.lookup(user)].push_back(&use);
    }
    if (!countsOnly || readers.size() < 2)
      continue;
    OpBuilder builder(variable);
    for (auto &[stage, uses] : llvm::drop_begin(readers)) {
      Operation *copy = builder.clone(*variable);
      stage_[copy] = stage;
      for (OpOperand *use : uses)
        use->set(copy->getResult(0));
      for (Operation *counter : counters) {
        OpBuilder after(counter);
        Operation *count = after.clone(*counter);
        count->setOperand(0, copy->getResult(0));
        stage_[count] = stage;
      }
    }
    int64_t first = readers.begin()->first;
    stage_[variable] = first;
    for (Operation *counter : counters)
      stage_[counter] = first;
  }
}

/// The mean of a replica's micro-batch values, each added as soon as it
/// is computed, so that one micro-batch's gradients are live at a time.
Value Replicator::accumulate(ArrayRef<Value> parts, Location loc,
                             int64_t device) {
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
    int64_t slot = std::max(slotOfDef(sum), slotOfDef(part));
    sum = graph::AddOp::create(builder_, loc, sum.getType(), sum, part,
                               StringAttr());
    place(sum.getDefiningOp(), device, slot);
  }
  builder_.setInsertionPointAfter(sum.getDefiningOp());
  Value mean = graph::MulOp::create(builder_, loc, sum, inverseMicroBatches_);
  place(mean.getDefiningOp(), device, slotOfDef(sum));
  return mean;
}

/// Batch norm's running statistics under micro-batches, as PyTorch's
/// gradient accumulation moves them: once per micro-batch, in order. M
/// updates with momentum m equal one with momentum 1 - (1 - m)^M toward
/// the statistics weighted m (1 - m)^(M-1-k) / (1 - (1 - m)^M) each (the
/// update is linear in them, the unbiased correction included), so the
/// plan still changes the state once a step.
FailureOr<Operation *> Replicator::blendStatistics(Operation *op,
                                                   IRMapping &map,
                                                   ArrayRef<IRMapping> micro,
                                                   int64_t device) {
  auto update = dyn_cast<graph::UpdateRunningStatsOp>(op);
  if (!update)
    return op->emitOpError()
           << "reads a value of each micro-batch that is neither a gradient "
              "nor batch-norm statistics; gradient accumulation over "
              "micro-batches cannot update it once; use --micro-batches 1";
  double m = update.getMomentum().convertToDouble();
  double keep = std::pow(1.0 - m, double(microBatches_));
  double blended = 1.0 - keep;
  Operation *clone = builder_.clone(*op, map);
  auto result = cast<graph::UpdateRunningStatsOp>(clone);
  result.setMomentumAttr(builder_.getF64FloatAttr(blended));
  if (blended == 0)
    return clone; // A momentum of 0 never moves the statistics.
  for (unsigned operand : {2u, 3u}) {
    Value statistic = op->getOperand(operand);
    auto type = cast<RankedTensorType>(statistic.getType());
    builder_.setInsertionPoint(clone);
    Value sum;
    for (auto [k, part] : llvm::enumerate(micro)) {
      double weight =
          m * std::pow(1.0 - m, double(microBatches_ - 1 - int64_t(k))) /
          blended;
      auto scalar = RankedTensorType::get({}, type.getElementType());
      Value w = graph::ConstantOp::create(
          builder_, op->getLoc(), scalar,
          DenseElementsAttr::get(scalar, float(weight)));
      Value term = graph::MulOp::create(builder_, op->getLoc(),
                                        part.lookupOrDefault(statistic), w);
      place(term.getDefiningOp(), device, PipelineSchedule::kUpdateSlot);
      if (sum) {
        sum = graph::AddOp::create(builder_, op->getLoc(), type, sum, term,
                                   StringAttr());
        place(sum.getDefiningOp(), device, PipelineSchedule::kUpdateSlot);
      } else {
        sum = term;
      }
    }
    clone->setOperand(operand, sum);
  }
  return clone;
}

LogicalResult Replicator::cloneReplica(int64_t r) {
  Block &body = func_.getBody().front();
  auto returnOp = body.getTerminator();
  IRMapping &map = maps_.emplace_back();
  builder_.setInsertionPoint(returnOp);
  auto deviceFor = [&](Operation *original) {
    return deviceOf(r, stage_.lookup(original));
  };
  for (Operation *op : stateOps_)
    place(builder_.clone(*op, map), deviceFor(op),
          PipelineSchedule::kStateSlot);
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
      int64_t stage = stage_.lookup(op);
      place(clone, deviceOf(r, stage),
            schedule_.slot(stage, forward_.contains(op), k));
      // This part's rows continue the whole batch's mask numbering.
      if (isa<graph::DropoutOp, graph::SoftmaxGradOp>(clone))
        graph::shiftDropoutOffset(
            clone, part * cast<RankedTensorType>(clone->getOperand(0).getType())
                              .getNumElements());
    }
  }
  SmallVector<Operation *> blended;
  if (microBatches_ == 1) {
    map = microMaps.front();
  } else {
    for (Value v : averaged_) {
      SmallVector<Value> parts;
      for (IRMapping &micro : microMaps)
        parts.push_back(micro.lookupOrDefault(v));
      map.map(v, accumulate(parts, v.getLoc(), deviceOf(r, stageOf(v))));
    }
  }
  builder_.setInsertionPoint(returnOp);
  for (Operation *op : updateOps_) {
    bool perMicroBatch =
        microBatches_ > 1 && llvm::any_of(op->getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return def && llvm::is_contained(sampleOps_, def) &&
                 !averaged_.contains(v);
        });
    if (!perMicroBatch) {
      place(builder_.clone(*op, map), deviceFor(op),
            PipelineSchedule::kUpdateSlot);
      continue;
    }
    auto clone = blendStatistics(op, map, microMaps, deviceFor(op));
    if (failed(clone))
      return failure();
    place(*clone, deviceFor(op), PipelineSchedule::kUpdateSlot);
    builder_.setInsertionPoint(returnOp);
  }
  return success();
}

int64_t Replicator::stageOf(Value v) const {
  if (Operation *def = v.getDefiningOp())
    if (auto it = stage_.find(def); it != stage_.end())
      return it->second;
  // A value no op computes (a constant gradient): where its reader is.
  for (Operation *user : v.getUsers())
    if (auto it = stage_.find(user); it != stage_.end())
      return it->second;
  return stages_ - 1;
}

void Replicator::averageAcrossReplicas(Value v, int64_t group) {
  if (replicas_ == 1) {
    averageOnFirst_[v] = maps_[0].lookupOrDefault(v);
    return;
  }
  int64_t stage = stageOf(v);
  SmallVector<int64_t> devices;
  for (int64_t r = 0; r < replicas_; ++r)
    devices.push_back(deviceOf(r, stage));
  Block &body = func_.getBody().front();
  for (int64_t r = 0; r < replicas_; ++r) {
    Value local = maps_[r].lookupOrDefault(v);
    // Right after the gradient is computed, so that later backward work
    // may overlap the exchange.
    if (Operation *def = local.getDefiningOp())
      builder_.setInsertionPointAfter(def);
    else
      builder_.setInsertionPointToStart(&body);
    auto reduce =
        graph::AllReduceOp::create(builder_, v.getLoc(), ValueRange{local},
                                   builder_.getI64IntegerAttr(group),
                                   builder_.getDenseI64ArrayAttr(devices));
    place(reduce, devices[r], slotOfDef(local));
    Value average = reduce.getOutputs()[0];
    for (OpOperand &use : llvm::make_early_inc_range(local.getUses()))
      if (OpOperand *grad = gradientOperand(use.getOwner());
          grad == &use && graph::getDevice(use.getOwner()) == devices[r])
        use.set(average);
    if (r == 0)
      averageOnFirst_[v] = average;
  }
}

/// Moves every device's ops into its schedule's order (stable within a
/// chunk) and merges the devices' sequences so that each op follows what
/// it reads: each device in turn goes as far as it can.
LogicalResult Replicator::orderBySchedule() {
  Block &body = func_.getBody().front();
  Operation *returnOp = body.getTerminator();
  int64_t numDevices = replicas_ * stages_;
  SmallVector<Operation *> shared;
  SmallVector<SmallVector<Operation *>> perDevice(numDevices);
  for (Operation &op : body.without_terminator()) {
    auto it = slot_.find(&op);
    if (it == slot_.end())
      shared.push_back(&op); // constants and the host's slices
    else
      perDevice[*graph::getDevice(&op)].push_back(&op);
  }
  for (auto &ops : perDevice)
    llvm::stable_sort(ops, [&](Operation *a, Operation *b) {
      return slot_.lookup(a) < slot_.lookup(b);
    });
  llvm::DenseSet<Operation *> emitted;
  for (Operation *op : shared) {
    op->moveBefore(returnOp);
    emitted.insert(op);
  }
  auto ready = [&](Operation *op) {
    if (!llvm::all_of(op->getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return !def || emitted.contains(def);
        }))
      return false;
    // An update writes its state after every read of it, on any device
    // (a weight shared by two stages is moved to the other one).
    auto update = dyn_cast<graph::StateUpdateOpInterface>(op);
    if (!update)
      return true;
    return llvm::all_of(update.getUpdatedOperands(), [&](unsigned i) {
      return llvm::all_of(op->getOperand(i).getUsers(), [&](Operation *u) {
        return u == op || isa<graph::StateUpdateOpInterface>(u) ||
               emitted.contains(u);
      });
    });
  };
  SmallVector<size_t> next(numDevices, 0);
  while (true) {
    bool progress = false, done = true;
    for (int64_t d = 0; d < numDevices; ++d) {
      auto &ops = perDevice[d];
      while (next[d] < ops.size() && ready(ops[next[d]])) {
        ops[next[d]]->moveBefore(returnOp);
        emitted.insert(ops[next[d]++]);
        progress = true;
      }
      done &= next[d] == ops.size();
    }
    if (done)
      return success();
    if (!progress) {
      for (int64_t d = 0; d < numDevices; ++d)
        if (next[d] < perDevice[d].size())
          return perDevice[d][next[d]]->emitOpError()
                 << "cannot run on device " << d << " in the "
                 << (gpipe_ ? "gpipe" : "1f1b")
                 << " schedule: it reads a value its device's schedule "
                    "computes later (a backward op on an earlier stage "
                    "than the gradient it reads?); try --schedule gpipe or "
                    "other --split-at cuts";
    }
  }
}

LogicalResult Replicator::run() {
  if (failed(findBatchedArguments()) || failed(findStages()))
    return failure();
  if (stages_ > 1)
    copyCountersPerStage();
  Block &body = func_.getBody().front();
  auto returnOp = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(returnOp.getOperands()))
    if (!cast<RankedTensorType>(v.getType()).getElementType().isF32())
      return func_.emitError()
             << "result " << i << " is " << v.getType()
             << "; a replicated or pipelined training step returns f32 "
                "losses and gradients, which it averages";

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
  for (auto *ops : {&updateOps_, &sampleOps_, &stateOps_})
    for (Operation *op : llvm::reverse(*ops)) {
      op->dropAllUses();
      op->erase();
    }
  if (inverseMicroBatches_.use_empty())
    inverseMicroBatches_.getDefiningOp()->erase();
  if (failed(orderBySchedule()))
    return failure();
  renumberAllReduceGroups(body);
  func_.setFunctionType(
      builder_.getFunctionType(argTypes, returnOp.getOperandTypes()));
  setNumDevices(module_, replicas_ * stages_);
  StringRef strategy = stages_ > 1 && replicas_ > 1 ? "hybrid"
                       : stages_ > 1                ? "pipeline"
                       : replicas_ > 1              ? "data"
                                                    : "single";
  recordPlacement(module_, "strategy", strategy);
  recordPlacement(module_, "replicas", std::to_string(replicas_));
  recordPlacement(module_, "micro_batches", std::to_string(microBatches_));
  if (stages_ > 1) {
    recordPlacement(module_, "stages", std::to_string(stages_));
    recordPlacement(module_, "schedule", gpipe_ ? "gpipe" : "1f1b");
  }
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
    if (replicas < 1 || microBatches < 1 || stages < 1 ||
        replicas * microBatches * stages < 2) {
      module.emitError() << "partc-replicate-training needs at least 2 "
                            "replicas, micro-batches or stages, got "
                         << static_cast<int64_t>(replicas) << " x "
                         << static_cast<int64_t>(microBatches) << " x "
                         << static_cast<int64_t>(stages)
                         << "; one device and one batch train without it";
      return signalPassFailure();
    }
    if (schedule != "gpipe" && schedule != "1f1b") {
      module.emitError() << "unknown pipeline schedule '"
                         << std::string(schedule)
                         << "'; expected gpipe or 1f1b";
      return signalPassFailure();
    }
    if (failed(Replicator(module, *func, replicas, microBatches, stages,
                          schedule == "gpipe")
                   .run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::partc
