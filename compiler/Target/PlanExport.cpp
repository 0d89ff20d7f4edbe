//===- PlanExport.cpp - plan dialect to plan file -------------------------===//
#include "compiler/Target/PlanExport.h"

#include "compiler/Utils/PassUtils.h"
#include "dialects/Graph/RuntimeBridge.h"
#include "dialects/Plan/PlanDialect.h"

#include <cstring>

namespace mlir::partc {

namespace {

constexpr uint64_t kWeightAlign = 64;

class Exporter {
public:
  Exporter(rt::Plan &plan, std::vector<uint8_t> &storage)
      : plan_(plan), storage_(storage) {}

  LogicalResult run(plan::ProgramOp program);

private:
  FailureOr<rt::BufferRef> resolve(Value v);

  rt::Plan &plan_;
  std::vector<uint8_t> &storage_;
  llvm::StringMap<uint64_t> weightOffsets_;
  /// Each plan.state's offset in its device's state region.
  llvm::StringMap<uint64_t> stateOffsets_;
  llvm::StringMap<uint32_t> inputIndex_, outputIndex_;
};

FailureOr<rt::BufferRef> Exporter::resolve(Value v) {
  rt::BufferRef ref;
  ref.type = toTensorType(cast<ShapedType>(v.getType()));
  Operation *def = v.getDefiningOp();
  if (auto alloc = dyn_cast_or_null<plan::AllocOp>(def)) {
    if (!alloc.getOffset())
      return alloc.emitError() << "has no arena offset; run partc-plan-memory",
             failure();
    ref.space = rt::MemorySpace::Arena;
    ref.offset = *alloc.getOffset();
    return ref;
  }
  if (auto weight = dyn_cast_or_null<plan::WeightRefOp>(def)) {
    ref.space = rt::MemorySpace::Weight;
    ref.offset = weightOffsets_.lookup(weight.getWeight());
    return ref;
  }
  if (auto state = dyn_cast_or_null<plan::StateRefOp>(def)) {
    ref.space = rt::MemorySpace::State;
    ref.offset = stateOffsets_.lookup(state.getState());
    return ref;
  }
  if (auto view = dyn_cast_or_null<plan::ViewOp>(def)) {
    auto base = resolve(view.getSource());
    if (failed(base))
      return failure();
    base->type = ref.type;
    base->offset += static_cast<uint64_t>(view.getByteOffset());
    return base;
  }
  return emitError(v.getLoc()) << "buffer has no known storage", failure();
}

LogicalResult Exporter::run(plan::ProgramOp program) {
  if (auto meta = program.getMetadataAttr())
    for (NamedAttribute a : meta)
      if (auto s = dyn_cast<StringAttr>(a.getValue()))
        plan_.metadata[a.getName().str()] = s.str();

  Block &body = program.getBody().front();
  // Weights, 64-byte aligned.
  uint64_t total = 0;
  SmallVector<std::pair<plan::WeightOp, uint64_t>> weights;
  for (auto w : body.getOps<plan::WeightOp>()) {
    total = (total + kWeightAlign - 1) / kWeightAlign * kWeightAlign;
    weights.push_back({w, total});
    total += toTensorType(cast<ShapedType>(w.getValue().getType())).byteSize();
  }
  // Refused with the numbers before allocating: a model can declare a
  // constant (ConstantOfShape, say) far larger than this machine's memory.
  uint64_t hostBytes = rt::hostMemoryBytes();
  if (total > hostBytes)
    return program.emitError()
           << "the plan's weights need " << total
           << " bytes but this machine has " << hostBytes
           << " bytes of memory; check the model's constants (a "
              "ConstantOfShape or Expand of a large shape?)";
  storage_.assign(total, 0);
  for (auto [w, offset] : weights) {
    std::vector<uint8_t> scratch;
    ArrayRef<uint8_t> bytes = constantBytes(w.getValue(), scratch);
    rt::TensorType type =
        toTensorType(cast<ShapedType>(w.getValue().getType()));
    if (bytes.size() != type.byteSize())
      return w.emitError() << "weight data has " << bytes.size()
                           << " bytes, expected " << type.byteSize()
                           << " (a dense_resource without its blob?)";
    if (!bytes.empty())
      std::memcpy(storage_.data() + offset, bytes.data(), bytes.size());
    weightOffsets_[w.getSymName()] = offset;
    plan_.weights.push_back({onnxNodeName(w.getLoc()), type, offset});
  }
  plan_.weightData = storage_.data();
  plan_.weightBytes = storage_.size();

  plan_.devices.resize(program.getNumDevices());
  for (auto state : body.getOps<plan::StateOp>()) {
    rt::StateDecl decl;
    decl.name = state.getName().str();
    decl.type = toTensorType(cast<ShapedType>(state.getType()));
    decl.device = static_cast<uint32_t>(state.getDevice());
    decl.role = state.getRole().str();
    uint64_t &end = plan_.devices[decl.device].stateBytes;
    decl.offset = (end + kWeightAlign - 1) / kWeightAlign * kWeightAlign;
    end = decl.offset + decl.type.byteSize();
    if (auto init = state.getInitAttr()) {
      decl.zeroInit = false;
      decl.initOffset = weightOffsets_.lookup(init.getValue());
    }
    stateOffsets_[state.getSymName()] = decl.offset;
    plan_.states.push_back(std::move(decl));
  }

  for (auto in : body.getOps<plan::InputOp>()) {
    inputIndex_[in.getSymName()] = plan_.inputs.size();
    plan_.inputs.push_back(
        {in.getSymName().str(), toTensorType(cast<ShapedType>(in.getType()))});
  }
  for (auto out : body.getOps<plan::OutputOp>()) {
    outputIndex_[out.getSymName()] = plan_.outputs.size();
    plan_.outputs.push_back({out.getSymName().str(),
                             toTensorType(cast<ShapedType>(out.getType()))});
  }

  for (auto device : body.getOps<plan::DeviceOp>()) {
    rt::DeviceProgram &prog = plan_.devices[device.getId()];
    prog.arenaBytes = device.getArenaSize().value_or(0);
    for (Operation &op : device.getBody().front()) {
      rt::Instruction in;
      in.location = onnxNodeName(op.getLoc());
      auto add = [&](Value v, std::vector<rt::BufferRef> &list) {
        auto ref = resolve(v);
        if (failed(ref))
          return failure();
        list.push_back(*ref);
        return success();
      };
      if (auto k = dyn_cast<plan::KernelOp>(op)) {
        in.op = rt::OpCode::Kernel;
        in.kernel = k.getKernel().str();
        in.attrs = toKernelAttrs(k.getParams());
        if (k.getMicroBatch())
          in.microBatch = *k.getMicroBatch();
        if (k.getStream())
          in.stream = static_cast<uint8_t>(*k.getStream());
        for (Value v : k.getInputs())
          if (failed(add(v, in.inputs)))
            return failure();
        for (Value v : k.getOutputs())
          if (failed(add(v, in.outputs)))
            return failure();
      } else if (auto load = dyn_cast<plan::LoadInputOp>(op)) {
        in.op = rt::OpCode::LoadInput;
        in.index = inputIndex_.lookup(load.getInput());
        in.hostOffset = load.getHostOffset();
        if (failed(add(load.getTarget(), in.outputs)))
          return failure();
      } else if (auto store = dyn_cast<plan::StoreOutputOp>(op)) {
        in.op = rt::OpCode::StoreOutput;
        in.index = outputIndex_.lookup(store.getOutput());
        in.hostOffset = store.getHostOffset();
        if (failed(add(store.getSource(), in.inputs)))
          return failure();
      } else if (auto send = dyn_cast<plan::SendOp>(op)) {
        in.op = rt::OpCode::Send;
        in.index = send.getChannel();
        if (failed(add(send.getSource(), in.inputs)))
          return failure();
        if (plan_.channels.size() <= in.index)
          plan_.channels.resize(in.index + 1);
        plan_.channels[in.index] = {static_cast<uint32_t>(device.getId()),
                                    static_cast<uint32_t>(send.getTarget()),
                                    in.inputs[0].type.byteSize(),
                                    send.getTransport()
                                        ? rt::Transport::Nccl
                                        : rt::Transport::PeerCopy};
      } else if (auto recv = dyn_cast<plan::RecvOp>(op)) {
        in.op = rt::OpCode::Recv;
        in.index = recv.getChannel();
        if (failed(add(recv.getTarget(), in.outputs)))
          return failure();
      } else if (auto reduce = dyn_cast<plan::AllReduceOp>(op)) {
        in.op = rt::OpCode::AllReduce;
        in.index = static_cast<uint32_t>(reduce.getGroup());
        in.attrs.set("devices", rt::AttrValue::ofInts(
                                    std::vector<int64_t>(reduce.getDevices())));
        for (auto [source, target] :
             llvm::zip(reduce.getSources(), reduce.getTargets()))
          if (failed(add(source, in.inputs)) || failed(add(target, in.outputs)))
            return failure();
      } else if (auto wait = dyn_cast<plan::WaitConsumedOp>(op)) {
        in.op = rt::OpCode::WaitConsumed;
        in.index = wait.getChannel();
      } else {
        continue; // alloc, view, weight_ref: storage only
      }
      prog.instructions.push_back(std::move(in));
    }
  }
  rt::Status s = rt::verifyPlan(plan_);
  if (!s.ok())
    return program.emitError() << "produced an invalid plan: " << s.message();
  return success();
}

} // namespace

LogicalResult exportPlan(ModuleOp module, rt::Plan &plan,
                         std::vector<uint8_t> &weightStorage) {
  auto programs = module.getOps<plan::ProgramOp>();
  if (std::distance(programs.begin(), programs.end()) != 1)
    return module.emitError() << "expected exactly one plan.program; run "
                                 "partc-lower-to-plan";
  Exporter exporter(plan, weightStorage);
  return exporter.run(*programs.begin());
}

} // namespace mlir::partc
