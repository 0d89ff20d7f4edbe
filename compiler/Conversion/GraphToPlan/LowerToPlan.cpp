//===- LowerToPlan.cpp - partc-lower-to-plan ------------------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"
#include "dialects/Plan/PlanDialect.h"
#include "runtime/kernels/Kernel.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <map>

namespace mlir::partc {
#define GEN_PASS_DEF_LOWERTOPLAN
#include "compiler/Passes.h.inc"

namespace {

MemRefType bufferType(Type t) {
  auto tensor = cast<RankedTensorType>(t);
  return MemRefType::get(tensor.getShape(), tensor.getElementType());
}

int64_t byteSize(Type t) {
  return static_cast<int64_t>(toTensorType(cast<ShapedType>(t)).byteSize());
}

/// Where a slice that is one contiguous run of its input's elements (a
/// range of leading rows, say) starts, in bytes; none for other slices.
std::optional<int64_t> contiguousSliceByteOffset(graph::SliceOp slice) {
  auto in = cast<RankedTensorType>(slice.getInput().getType());
  auto out = cast<RankedTensorType>(slice.getType());
  ArrayRef<int64_t> starts = slice.getStarts(), steps = slice.getSteps();
  int64_t rank = in.getRank();
  if (rank == 0 || out.getNumElements() == 0 ||
      static_cast<int64_t>(starts.size()) != rank)
    return std::nullopt;
  // The last dimension not taken whole: every one after it is whole, every
  // one before it a single index.
  int64_t partial = -1;
  for (int64_t d = rank - 1; d >= 0 && partial < 0; --d)
    if (starts[d] != 0 || steps[d] != 1 ||
        out.getDimSize(d) != in.getDimSize(d))
      partial = d;
  if (partial >= 0 && steps[partial] != 1 && out.getDimSize(partial) != 1)
    return std::nullopt;
  for (int64_t d = 0; d < partial; ++d)
    if (out.getDimSize(d) != 1)
      return std::nullopt;
  int64_t element = byteSize(in) / in.getNumElements();
  int64_t offset = 0, stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    offset += starts[d] * stride;
    stride *= in.getDimSize(d);
  }
  return offset * element;
}

/// Kernel parameters: the op's inherent attributes.
DictionaryAttr kernelParams(Operation *op) {
  SmallVector<NamedAttribute> attrs;
  for (NamedAttribute a : op->getAttrs())
    if (!a.getName().strref().contains('.'))
      attrs.push_back(a);
  return DictionaryAttr::get(op->getContext(), attrs);
}

class Lowering {
public:
  /// `transport` is set on every send (null: device-to-device copies).
  Lowering(ModuleOp module, func::FuncOp func, StringAttr transport)
      : module_(module), func_(func), builder_(module.getContext()),
        transport_(transport) {}

  LogicalResult run();

private:
  struct Device {
    plan::DeviceOp op;
    DenseMap<Value, Value> buffers;
    /// Channel of the last send to each target not yet waited on.
    std::map<int64_t, int64_t> pendingWait;
  };

  LogicalResult lowerDevice(int64_t d);
  LogicalResult lowerOp(Device &dev, Operation &op);
  LogicalResult emitSend(Device &dev, graph::TransferOp transfer);
  FailureOr<Value> lookup(Device &dev, Value v, Location useLoc);
  Value alloc(Type tensorType, Location loc) {
    return plan::AllocOp::create(builder_, loc, bufferType(tensorType),
                                 IntegerAttr());
  }
  void emitStores(Value graphValue, Value buffer, Location loc);
  LogicalResult checkKernel(Operation *op);
  DictionaryAttr planMetadata();

  ModuleOp module_;
  func::FuncOp func_;
  OpBuilder builder_;
  StringAttr transport_;
  plan::ProgramOp program_;
  DenseMap<Operation *, FlatSymbolRefAttr> weights_;
  /// The plan.state of each graph.variable.
  DenseMap<Operation *, FlatSymbolRefAttr> states_;
  SmallVector<FlatSymbolRefAttr> inputs_, outputs_;
  /// Where each graph value must be copied out: (output index, byte offset).
  DenseMap<Value, SmallVector<std::pair<unsigned, int64_t>>> stores_;
  DenseMap<Operation *, int64_t> channels_;
  /// Transfers whose send is emitted (right after the value is computed).
  llvm::DenseSet<Operation *> sent_;
  std::vector<Device> devices_;
};

/// What the module records of the model and of placement's choice; a graph
/// placed without a search is one device's, or a pipeline cut by hand.
DictionaryAttr Lowering::planMetadata() {
  MLIRContext *ctx = module_.getContext();
  NamedAttrList meta;
  if (auto plan = module_->getAttrOfType<DictionaryAttr>(
          graph::GraphDialect::kPlacementAttrName))
    meta.append(plan.getValue());
  if (!meta.get("strategy"))
    meta.set("strategy", StringAttr::get(ctx, "single"));
  if (!meta.get("micro_batches"))
    meta.set("micro_batches", StringAttr::get(ctx, "1"));
  if (auto model = module_->getAttrOfType<StringAttr>("graph.model"))
    meta.set("model", model);
  if (auto batch = module_->getAttrOfType<IntegerAttr>("graph.batch"))
    meta.set("batch", StringAttr::get(ctx, std::to_string(batch.getInt())));
  return meta.getDictionary(ctx);
}

LogicalResult Lowering::checkKernel(Operation *op) {
  std::vector<rt::TensorType> ins, outs;
  for (Type t : op->getOperandTypes())
    ins.push_back(toTensorType(cast<ShapedType>(t)));
  for (Type t : op->getResultTypes())
    outs.push_back(toTensorType(cast<ShapedType>(t)));
  if (auto update = dyn_cast<graph::StateUpdateOpInterface>(op))
    for (unsigned i : update.getUpdatedOperands())
      outs.push_back(toTensorType(cast<ShapedType>(op->getOperandTypes()[i])));
  std::unique_ptr<rt::Kernel> kernel;
  rt::Status s = rt::createCpuKernel(kernelNameFor(op), toKernelAttrs(op), ins,
                                     outs, kernel);
  if (!s.ok())
    return op->emitError() << "cannot be executed: " << s.message();
  return success();
}

FailureOr<Value> Lowering::lookup(Device &dev, Value v, Location useLoc) {
  if (Value b = dev.buffers.lookup(v))
    return b;
  Value buffer;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    buffer = alloc(v.getType(), useLoc);
    plan::LoadInputOp::create(builder_, useLoc, inputs_[arg.getArgNumber()],
                              builder_.getI64IntegerAttr(0), buffer);
  } else if (auto constant = v.getDefiningOp<graph::ConstantOp>()) {
    buffer = plan::WeightRefOp::create(
        builder_, useLoc, bufferType(v.getType()), weights_.lookup(constant));
  } else if (auto variable = v.getDefiningOp<graph::VariableOp>()) {
    buffer = plan::StateRefOp::create(builder_, useLoc, bufferType(v.getType()),
                                      states_.lookup(variable));
  } else if (auto slice = v.getDefiningOp<graph::SliceOp>();
             slice && graph::getDevice(slice) == graph::kHostDevice) {
    auto arg = dyn_cast<BlockArgument>(slice.getInput());
    auto in = cast<RankedTensorType>(slice.getInput().getType());
    bool contiguous = arg != nullptr;
    for (int64_t d = 0; d < in.getRank() && contiguous; ++d)
      contiguous = slice.getSteps()[d] == 1 &&
                   (d == 0 || (slice.getStarts()[d] == 0 &&
                               slice.getEnds()[d] == in.getDimSize(d)));
    if (!contiguous)
      return slice.emitError() << "host slices must take whole rows of a "
                                  "model input",
             failure();
    int64_t rowBytes =
        in.getRank() ? byteSize(in) / std::max<int64_t>(1, in.getDimSize(0))
                     : 0;
    buffer = alloc(v.getType(), useLoc);
    plan::LoadInputOp::create(
        builder_, useLoc, inputs_[arg.getArgNumber()],
        builder_.getI64IntegerAttr(slice.getStarts()[0] * rowBytes), buffer);
  } else {
    return emitError(useLoc)
               << "uses a value that is not available on device "
               << dev.op.getId() << "; run partc-insert-transfers",
           failure();
  }
  dev.buffers[v] = buffer;
  return buffer;
}

void Lowering::emitStores(Value graphValue, Value buffer, Location loc) {
  auto it = stores_.find(graphValue);
  if (it == stores_.end())
    return;
  for (auto [index, offset] : it->second)
    plan::StoreOutputOp::create(builder_, loc, buffer, outputs_[index],
                                builder_.getI64IntegerAttr(offset));
}

/// Sends `transfer`'s value once. A transfer placed right after its
/// value (inference) may have one send per target in flight: the source
/// waits for the previous one's receipt first. One received at its first
/// reader (training pipelines) is sent as soon as computed and waited for
/// where the receiver takes it (lowerDevice), so that sends and receipts
/// in different orders cannot deadlock.
LogicalResult Lowering::emitSend(Device &dev, graph::TransferOp transfer) {
  if (!sent_.insert(transfer.getOperation()).second)
    return success();
  int64_t channel = channels_.lookup(transfer);
  int64_t target = transfer.getTarget();
  auto src = lookup(dev, transfer.getInput(), transfer.getLoc());
  if (failed(src))
    return failure();
  bool atUse = transfer->hasAttr(graph::GraphDialect::kReceiveAtUseAttrName);
  auto pending = dev.pendingWait.find(target);
  if (!atUse && pending != dev.pendingWait.end())
    plan::WaitConsumedOp::create(builder_, transfer.getLoc(),
                                 builder_.getI64IntegerAttr(pending->second));
  plan::SendOp::create(builder_, transfer.getLoc(), *src,
                       builder_.getI64IntegerAttr(channel),
                       builder_.getI64IntegerAttr(target), transport_);
  if (!atUse)
    dev.pendingWait[target] = channel;
  return success();
}

LogicalResult Lowering::lowerOp(Device &dev, Operation &op) {
  SmallVector<Value> ins;
  for (Value v : op.getOperands()) {
    auto b = lookup(dev, v, op.getLoc());
    if (failed(b))
      return failure();
    ins.push_back(*b);
  }
  // Reshapes, and contiguous slices at an aligned offset, are views: no
  // data moves.
  std::optional<int64_t> viewOffset;
  if (isa<graph::ReshapeOp, graph::IdentityOp>(op))
    viewOffset = 0;
  else if (auto slice = dyn_cast<graph::SliceOp>(op))
    if ((viewOffset = contiguousSliceByteOffset(slice)) &&
        *viewOffset % plan::kBufferAlignment != 0)
      viewOffset.reset();
  if (viewOffset) {
    Value result = op.getResult(0), view = ins[0];
    if (view.getType() != bufferType(result.getType()) || *viewOffset != 0)
      view = plan::ViewOp::create(builder_, op.getLoc(),
                                  bufferType(result.getType()), ins[0],
                                  builder_.getI64IntegerAttr(*viewOffset));
    dev.buffers[result] = view;
    emitStores(result, view, op.getLoc());
    return success();
  }
  if (auto reduce = dyn_cast<graph::AllReduceOp>(op)) {
    SmallVector<Value> targets;
    for (Value mean : reduce.getOutputs())
      targets.push_back(alloc(mean.getType(), op.getLoc()));
    plan::AllReduceOp::create(builder_, op.getLoc(), ins, targets,
                              reduce.getGroupAttr(), reduce.getDevicesAttr());
    for (auto [mean, target] : llvm::zip(reduce.getOutputs(), targets)) {
      dev.buffers[mean] = target;
      emitStores(mean, target, op.getLoc());
    }
    return success();
  }
  SmallVector<Value> outs;
  for (Value r : op.getResults())
    outs.push_back(alloc(r.getType(), op.getLoc()));
  // An optimizer step writes the state it read. (Transfers of state to
  // other devices come before its update; partc-verify-placement checks.)
  if (auto update = dyn_cast<graph::StateUpdateOpInterface>(op))
    for (unsigned i : update.getUpdatedOperands())
      outs.push_back(ins[i]);
  IntegerAttr microBatch =
      op.getAttrOfType<IntegerAttr>(graph::GraphDialect::kMicroBatchAttrName);
  IntegerAttr stream =
      op.getAttrOfType<IntegerAttr>(graph::GraphDialect::kStreamAttrName);
  plan::KernelOp::create(builder_, op.getLoc(),
                         builder_.getStringAttr(kernelNameFor(&op)),
                         kernelParams(&op), ins, outs, microBatch, stream);
  for (auto [r, b] : llvm::zip(op.getResults(), outs)) {
    dev.buffers[r] = b;
    emitStores(r, b, op.getLoc());
  }
  return success();
}

LogicalResult Lowering::lowerDevice(int64_t d) {
  Device &dev = devices_[d];
  builder_.setInsertionPointToEnd(&dev.op.getBody().front());
  for (Operation &op : func_.getBody().front()) {
    if (auto transfer = dyn_cast<graph::TransferOp>(op)) {
      int64_t channel = channels_.lookup(&op);
      int64_t source = transfer.getSource(), target = transfer.getTarget();
      if (source == d) {
        if (failed(emitSend(dev, transfer)))
          return failure();
        if (op.hasAttr(graph::GraphDialect::kReceiveAtUseAttrName))
          plan::WaitConsumedOp::create(builder_, op.getLoc(),
                                       builder_.getI64IntegerAttr(channel));
      } else if (target == d) {
        Value buffer = alloc(op.getResult(0).getType(), op.getLoc());
        plan::RecvOp::create(builder_, op.getLoc(), buffer,
                             builder_.getI64IntegerAttr(channel),
                             builder_.getI64IntegerAttr(source));
        dev.buffers[op.getResult(0)] = buffer;
        emitStores(op.getResult(0), buffer, op.getLoc());
      }
      continue;
    }
    if (graph::getDevice(&op) != d || isa<graph::VariableOp>(op))
      continue;
    if (failed(lowerOp(dev, op)))
      return failure();
    // Sent as soon as computed, wherever the receiver takes it.
    for (Value result : op.getResults())
      for (Operation *user : result.getUsers())
        if (auto transfer = dyn_cast<graph::TransferOp>(user);
            transfer && static_cast<int64_t>(transfer.getSource()) == d &&
            transfer->hasAttr(graph::GraphDialect::kReceiveAtUseAttrName))
          if (failed(emitSend(dev, transfer)))
            return failure();
  }
  for (auto [target, channel] : dev.pendingWait)
    plan::WaitConsumedOp::create(builder_, func_.getLoc(),
                                 builder_.getI64IntegerAttr(channel));
  return success();
}

LogicalResult Lowering::run() {
  int64_t numDevices = getNumDevices(module_);
  Block &body = func_.getBody().front();
  MLIRContext *ctx = module_.getContext();

  for (Operation &op : body) {
    if (isa<graph::ConstantOp, func::ReturnOp, graph::TransferOp>(op))
      continue;
    std::optional<int64_t> device = graph::getDevice(&op);
    if (!device)
      return op.emitError() << "is not placed on a device; run "
                               "partc-assign-devices first";
    if (*device == graph::kHostDevice)
      continue;
    if (!isa<graph::ReshapeOp, graph::IdentityOp, graph::VariableOp,
             graph::AllReduceOp>(op) &&
        failed(checkKernel(&op)))
      return failure();
  }

  builder_.setInsertionPointToEnd(module_.getBody());
  program_ = plan::ProgramOp::create(builder_, func_.getLoc(),
                                     builder_.getI64IntegerAttr(numDevices),
                                     planMetadata());
  program_.getBody().push_back(new Block());
  builder_.setInsertionPointToStart(&program_.getBody().front());

  int64_t weightIndex = 0;
  for (Operation &op : body)
    if (auto constant = dyn_cast<graph::ConstantOp>(op)) {
      std::string name = "w" + std::to_string(weightIndex++);
      plan::WeightOp::create(builder_, op.getLoc(), name, constant.getValue());
      weights_[&op] = FlatSymbolRefAttr::get(ctx, name);
    }
  int64_t stateIndex = 0;
  // Replicas of a variable start from one copy of its value.
  DenseMap<Attribute, FlatSymbolRefAttr> initialValues;
  for (auto variable : body.getOps<graph::VariableOp>()) {
    FlatSymbolRefAttr init;
    if (auto value = variable.getValueAttr()) {
      FlatSymbolRefAttr &known = initialValues[value];
      if (!known) {
        std::string name = "w" + std::to_string(weightIndex++);
        plan::WeightOp::create(builder_, variable.getLoc(), name, value);
        known = FlatSymbolRefAttr::get(ctx, name);
      }
      init = known;
    }
    std::string name = "s" + std::to_string(stateIndex++);
    plan::StateOp::create(
        builder_, variable.getLoc(), builder_.getStringAttr(name),
        TypeAttr::get(variable.getType()),
        builder_.getI64IntegerAttr(graph::getDevice(variable).value_or(0)),
        variable.getNameAttr(), variable.getRoleAttr(), init);
    states_[variable] = FlatSymbolRefAttr::get(ctx, name);
  }
  for (BlockArgument arg : body.getArguments()) {
    auto name = func_.getArgAttrOfType<StringAttr>(
        arg.getArgNumber(), graph::GraphDialect::kNameAttrName);
    std::string sym =
        name ? name.str() : "input" + std::to_string(arg.getArgNumber());
    plan::InputOp::create(builder_, func_.getLoc(), builder_.getStringAttr(sym),
                          TypeAttr::get(arg.getType()));
    inputs_.push_back(FlatSymbolRefAttr::get(ctx, sym));
  }
  auto returnOp = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(returnOp.getOperands())) {
    auto name = func_.getResultAttrOfType<StringAttr>(
        i, graph::GraphDialect::kNameAttrName);
    std::string sym = name ? name.str() : "output" + std::to_string(i);
    if (program_.lookupSymbol(sym))
      sym += "_output" + std::to_string(i);
    plan::OutputOp::create(builder_, func_.getLoc(),
                           builder_.getStringAttr(sym),
                           TypeAttr::get(v.getType()));
    outputs_.push_back(FlatSymbolRefAttr::get(ctx, sym));
  }

  // Outputs assembled on the host from parts get a byte offset per part.
  llvm::SetVector<Value> hostOutputs;
  for (auto [i, v] : llvm::enumerate(returnOp.getOperands())) {
    auto concat = v.getDefiningOp<graph::ConcatOp>();
    if (concat && graph::getDevice(concat) == graph::kHostDevice) {
      int64_t offset = 0;
      for (Value part : concat.getInputs()) {
        if (isHostValue(part))
          hostOutputs.insert(part);
        stores_[part].push_back({static_cast<unsigned>(i), offset});
        offset += byteSize(part.getType());
      }
      continue;
    }
    if (isHostValue(v))
      hostOutputs.insert(v);
    stores_[v].push_back({static_cast<unsigned>(i), 0});
  }

  int64_t channel = 0;
  for (Operation &op : body)
    if (isa<graph::TransferOp>(op))
      channels_[&op] = channel++;

  devices_.resize(numDevices);
  for (int64_t d = 0; d < numDevices; ++d) {
    builder_.setInsertionPointToEnd(&program_.getBody().front());
    devices_[d].op = plan::DeviceOp::create(
        builder_, func_.getLoc(), builder_.getI64IntegerAttr(d), IntegerAttr());
    devices_[d].op.getBody().push_back(new Block());
    if (failed(lowerDevice(d)))
      return failure();
  }
  // Inputs or weights returned as they are: device 0 copies them out.
  builder_.setInsertionPointToEnd(&devices_[0].op.getBody().front());
  for (Value v : hostOutputs) {
    auto b = lookup(devices_[0], v, func_.getLoc());
    if (failed(b))
      return failure();
    emitStores(v, *b, func_.getLoc());
  }
  func_.erase();
  return success();
}

struct LowerToPlanPass : public impl::LowerToPlanBase<LowerToPlanPass> {
  using LowerToPlanBase::LowerToPlanBase;
  void runOnOperation() override {
    auto func = getMainFunction(getOperation());
    if (failed(func))
      return signalPassFailure();
    StringAttr transportAttr;
    if (transport == "nccl") {
      transportAttr = StringAttr::get(&getContext(), transport);
    } else if (transport != "p2p") {
      getOperation().emitError()
          << "unknown transport '" << transport
          << "'; expected p2p (device-to-device copies) or nccl";
      return signalPassFailure();
    }
    Lowering lowering(getOperation(), *func, transportAttr);
    if (failed(lowering.run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::partc
