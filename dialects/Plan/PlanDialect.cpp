//===- PlanDialect.cpp - partc plan dialect -------------------------------===//
#include "dialects/Plan/PlanDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::partc::plan;

#include "dialects/Plan/PlanDialect.cpp.inc"

void PlanDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Plan/PlanOps.cpp.inc"
      >();
}

LogicalResult ProgramOp::verify() {
  if (getNumDevices() < 1)
    return emitOpError() << "needs at least one device, got "
                         << getNumDevices();
  llvm::SmallDenseSet<int64_t> seen;
  for (auto device : getBody().front().getOps<DeviceOp>()) {
    if (static_cast<int64_t>(device.getId()) < 0 ||
        device.getId() >= getNumDevices())
      return device.emitOpError()
             << "id " << device.getId() << " is outside [0, " << getNumDevices()
             << ")";
    if (!seen.insert(device.getId()).second)
      return device.emitOpError()
             << "device " << device.getId() << " appears twice";
  }
  for (auto state : getBody().front().getOps<StateOp>()) {
    auto device = static_cast<int64_t>(state.getDevice());
    if (device < 0 || device >= static_cast<int64_t>(getNumDevices()))
      return state.emitOpError() << "is on device " << device
                                 << ", outside [0, " << getNumDevices() << ")";
    if (auto init = state.getInitAttr()) {
      auto weight = dyn_cast_or_null<WeightOp>(lookupSymbol(init.getAttr()));
      if (!weight)
        return state.emitOpError()
               << "is initialized from " << init << ", which is not a "
               << "plan.weight";
      if (weight.getValue().getType() != state.getType())
        return state.emitOpError()
               << "of type " << state.getType() << " is initialized from "
               << init << " of type " << weight.getValue().getType();
    }
  }
  // A device updates only its own state.
  for (auto device : getBody().front().getOps<DeviceOp>())
    for (auto ref : device.getBody().front().getOps<StateRefOp>()) {
      auto state = dyn_cast_or_null<StateOp>(lookupSymbol(ref.getStateAttr()));
      if (!state)
        return ref.emitOpError()
               << "refers to " << ref.getStateAttr() << ", not a plan.state";
      auto tensor = cast<ShapedType>(state.getType());
      auto buffer = cast<ShapedType>(ref.getType());
      if (state.getDevice() != device.getId() ||
          tensor.getShape() != buffer.getShape() ||
          tensor.getElementType() != buffer.getElementType())
        return ref.emitOpError()
               << "reads " << ref.getStateAttr() << " (" << state.getType()
               << " on device " << state.getDevice() << ") as " << buffer
               << " on device " << device.getId();
    }
  return success();
}

static int64_t memrefBytes(MemRefType t) {
  unsigned bits = t.getElementType().getIntOrFloatBitWidth();
  return t.getNumElements() * ((bits + 7) / 8);
}

LogicalResult ViewOp::verify() {
  auto from = cast<MemRefType>(getSource().getType());
  auto to = cast<MemRefType>(getType());
  int64_t offset = getByteOffset();
  if (from.getElementType() != to.getElementType() || offset < 0 ||
      offset % kBufferAlignment != 0 ||
      offset + memrefBytes(to) > memrefBytes(from))
    return emitOpError() << "cannot view " << from << " as " << to
                         << " at byte " << offset
                         << "; the element type must match and the view lie "
                            "in the source at a multiple of "
                         << kBufferAlignment << " bytes";
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (getSources().empty() || getSources().size() != getTargets().size())
    return emitOpError() << "averages " << getSources().size()
                         << " source(s) into " << getTargets().size()
                         << " target(s); it needs one target per source, "
                            "at least one";
  for (auto [source, target] : llvm::zip(getSources(), getTargets()))
    if (source.getType() != target.getType())
      return emitOpError() << "averages " << source.getType() << " into "
                           << target.getType()
                           << "; a source and its target have one type";
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Plan/PlanOps.cpp.inc"
