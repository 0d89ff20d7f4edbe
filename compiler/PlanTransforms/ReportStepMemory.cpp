//===- ReportStepMemory.cpp - partc-report-step-memory --------------------===//
//
// What a training step keeps in each device's memory, by kind, from the
// planned arena and the plan's state: what `partc compile --train --explain`
// prints and what placing training across devices must fit.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/PlanTransforms/BufferLiveness.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/RuntimeBridge.h"
#include "dialects/Plan/PlanDialect.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace mlir::partc {
#define GEN_PASS_DEF_REPORTSTEPMEMORY
#include "compiler/Passes.h.inc"

namespace {

int64_t tensorBytes(Type type) {
  return static_cast<int64_t>(toTensorType(cast<ShapedType>(type)).byteSize());
}

struct StepMemory {
  int64_t parameters = 0, optimizer = 0, otherState = 0, constants = 0,
          inputs = 0, kept = 0, gradients = 0, arena = 0;
};

/// Where the loss is averaged over data-parallel replicas: the all_reduce
/// group and the place in its bucket of the mean stored as "loss"; group
/// -1 if none.
std::pair<int64_t, unsigned> lossGroup(plan::ProgramOp program) {
  std::pair<int64_t, unsigned> found{-1, 0};
  program.walk([&](plan::AllReduceOp reduce) {
    for (auto [i, target] : llvm::enumerate(reduce.getTargets()))
      for (Operation *user : target.getUsers())
        if (auto store = dyn_cast<plan::StoreOutputOp>(user);
            store && store.getOutput() == "loss")
          found = {reduce.getGroup(), i};
  });
  return found;
}

/// The kernel that computes this device's loss: the one stored as "loss",
/// or on a data-parallel replica the one averaged in `group`.
Operation *lossKernel(plan::DeviceOp device,
                      std::pair<int64_t, unsigned> group) {
  Block &block = device.getBody().front();
  Value loss;
  for (auto store : block.getOps<plan::StoreOutputOp>())
    if (store.getOutput() == "loss")
      loss = store.getSource();
  for (auto reduce : block.getOps<plan::AllReduceOp>())
    if (static_cast<int64_t>(reduce.getGroup()) == group.first)
      loss = reduce.getSources()[group.second];
  while (loss)
    if (auto view = loss.getDefiningOp<plan::ViewOp>())
      loss = view.getSource();
    else
      break;
  if (!loss)
    return nullptr;
  for (Operation *user : loss.getUsers())
    if (auto kernel = dyn_cast<plan::KernelOp>(user))
      if (llvm::is_contained(kernel.getOutputs(), loss))
        return kernel;
  return nullptr;
}

struct ReportStepMemoryPass
    : public impl::ReportStepMemoryBase<ReportStepMemoryPass> {
  using ReportStepMemoryBase::ReportStepMemoryBase;
  void runOnOperation() override {
    getOperation().walk([&](plan::ProgramOp program) {
      if (failed(report(program)))
        signalPassFailure();
    });
  }

  LogicalResult report(plan::ProgramOp program) {
    llvm::StringMap<plan::StateOp> states;
    for (auto state : program.getBody().front().getOps<plan::StateOp>())
      states[state.getSymName()] = state;
    if (states.empty())
      return success(); // inference: nothing is kept across a step
    std::vector<StepMemory> perDevice;
    for (auto device : program.getBody().front().getOps<plan::DeviceOp>()) {
      if (!device.getArenaSize())
        return device.emitOpError()
                   << "has no arena size; run partc-plan-memory first",
               failure();
      perDevice.push_back(measure(device, states, lossGroup(program)));
    }
    // Per device, separated by commas, as the plan's other per-device
    // metadata.
    auto list = [&](int64_t StepMemory::*field) {
      std::string s;
      for (const StepMemory &m : perDevice)
        s += (s.empty() ? "" : ",") + std::to_string(m.*field);
      return s;
    };
    OpBuilder b(program.getContext());
    NamedAttrList metadata(program.getMetadataAttr() ? program.getMetadataAttr()
                                                     : b.getDictionaryAttr({}));
    for (auto [key, field] :
         {std::pair{"memory_parameters", &StepMemory::parameters},
          {"memory_optimizer_state", &StepMemory::optimizer},
          {"memory_other_state", &StepMemory::otherState},
          {"memory_constants", &StepMemory::constants},
          {"memory_inputs", &StepMemory::inputs},
          {"memory_kept_activations", &StepMemory::kept},
          {"memory_gradients", &StepMemory::gradients},
          {"memory_arena", &StepMemory::arena}})
      metadata.set(key, b.getStringAttr(list(field)));
    program.setMetadataAttr(metadata.getDictionary(program.getContext()));
    if (deviceMemoryBytes <= 0)
      return success();
    for (auto [d, device] :
         llvm::enumerate(program.getBody().front().getOps<plan::DeviceOp>())) {
      const StepMemory &m = perDevice[d];
      double total = double(m.parameters) + m.optimizer + m.otherState +
                     m.constants + m.arena;
      if (total <= deviceMemoryBytes)
        continue;
      // What partc compile asks partc-recompute-activations to save.
      program->getParentOfType<ModuleOp>()->setAttr(
          "partc.memory_excess_bytes",
          b.getF64FloatAttr(total - deviceMemoryBytes));
      return device.emitError()
                 << "a training step needs " << formatBytes(total)
                 << " on device " << device.getId() << " (parameters "
                 << formatBytes(m.parameters) << ", optimizer state "
                 << formatBytes(m.optimizer) << ", other state "
                 << formatBytes(m.otherState) << ", constants "
                 << formatBytes(m.constants) << ", arena "
                 << formatBytes(m.arena) << " of which kept activations "
                 << formatBytes(m.kept) << recomputedNote(program)
                 << ") but the device has " << formatBytes(deviceMemoryBytes)
                 << "; hint: --micro-batches M keeps one micro-batch's "
                    "activations at a time, more --devices share the batch, "
                    "or a smaller --batch",
             failure();
    }
    return success();
  }

  /// ", N activations recomputed" when partc-recompute-activations chose
  /// any.
  static std::string recomputedNote(plan::ProgramOp program) {
    auto recomputed =
        program->getParentOfType<ModuleOp>()->getAttrOfType<DictionaryAttr>(
            "partc.recomputed");
    auto count =
        recomputed ? recomputed.getAs<IntegerAttr>("values") : IntegerAttr();
    if (!count)
      return "";
    return ", after recomputing " + std::to_string(count.getInt()) +
           " activation(s)";
  }

  StepMemory measure(plan::DeviceOp device,
                     const llvm::StringMap<plan::StateOp> &states,
                     std::pair<int64_t, unsigned> group) {
    StepMemory m;
    m.arena = *device.getArenaSize();
    Block &block = device.getBody().front();
    for (const auto &entry : states) {
      plan::StateOp state = entry.getValue();
      if (state.getDevice() != device.getId())
        continue;
      int64_t bytes = tensorBytes(state.getType());
      StringRef role = state.getRole();
      if (role == "parameter")
        m.parameters += bytes;
      else if (role == "momentum" || role == "adam_m" || role == "adam_v" ||
               role == "step")
        m.optimizer += bytes;
      else
        m.otherState += bytes;
    }
    llvm::DenseSet<StringRef> weights;
    for (auto ref : block.getOps<plan::WeightRefOp>())
      if (weights.insert(ref.getWeight()).second)
        m.constants += tensorBytes(ref.getBuffer().getType());

    DeviceLiveness liveness = analyzeBufferLiveness(device);
    // Activations kept for the backward pass: what is still to be read when
    // the loss is known. Gradients: what waits for the first parameter
    // update (updates run after every backward op).
    Operation *loss = lossKernel(device, group);
    int64_t lossAt = loss ? liveness.position.lookup(loss) : -1;
    int64_t updateAt = -1;
    for (auto kernel : block.getOps<plan::KernelOp>()) {
      bool updatesParameter = llvm::any_of(kernel.getOutputs(), [&](Value v) {
        auto ref = v.getDefiningOp<plan::StateRefOp>();
        if (!ref)
          return false;
        auto it = states.find(ref.getState());
        return it != states.end() &&
               plan::StateOp(it->second).getRole() == "parameter";
      });
      if (updatesParameter) {
        updateAt = liveness.position.lookup(kernel);
        break;
      }
    }
    for (BufferInterval &buffer : liveness.buffers) {
      if (buffer.isInput) {
        m.inputs += buffer.size;
        continue;
      }
      bool isLoss =
          loss && llvm::is_contained(cast<plan::KernelOp>(loss).getOutputs(),
                                     buffer.alloc.getResult());
      if (lossAt >= 0 && !isLoss && buffer.begin < lossAt &&
          buffer.end > lossAt)
        m.kept += buffer.size;
      if (updateAt >= 0 && buffer.begin < updateAt && buffer.end >= updateAt)
        m.gradients += buffer.size;
    }
    device.emitRemark() << "step memory: parameters " << m.parameters
                        << " B, optimizer state " << m.optimizer
                        << " B, other state " << m.otherState
                        << " B, constants " << m.constants << " B, inputs "
                        << m.inputs << " B, kept activations " << m.kept
                        << " B, gradients " << m.gradients << " B, arena "
                        << m.arena << " B";
    return m;
  }
};

} // namespace
} // namespace mlir::partc
