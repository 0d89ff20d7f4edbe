//===- GraphDialect.cpp - partc graph dialect -----------------------------===//
#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::partc::graph;

#include "dialects/Graph/GraphDialect.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Graph/GraphOps.cpp.inc"
      >();
}

Operation *GraphDialect::materializeConstant(OpBuilder &builder,
                                             Attribute value, Type type,
                                             Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}

LogicalResult GraphDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  if (name == kDeviceAttrName || name == kMicroBatchAttrName) {
    auto value = dyn_cast<IntegerAttr>(attr.getValue());
    int64_t min = name == kDeviceAttrName ? kHostDevice : 0;
    if (!value || value.getInt() < min)
      return op->emitError() << "'" << name << "' must be an integer >= " << min
                             << ", got " << attr.getValue();
    if (name == kDeviceAttrName && value.getInt() == kHostDevice &&
        !isa<SliceOp, ConcatOp>(op))
      return op->emitError()
             << "only graph.slice and graph.concat can run on the host "
                "(device -1); place '"
             << op->getName() << "' on a device";
    return success();
  }
  if (name == kStreamAttrName) {
    auto value = dyn_cast<IntegerAttr>(attr.getValue());
    if (!value || value.getInt() < 0 || value.getInt() >= kMaxStreams)
      return op->emitError() << "'" << name << "' must be an integer from 0 to "
                             << kMaxStreams - 1 << ", got " << attr.getValue();
    return success();
  }
  if (name == kNameAttrName || name == kGradientOfAttrName)
    return success(isa<StringAttr>(attr.getValue()));
  if (name == kReceiveAtUseAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) || !isa<TransferOp>(op))
      return op->emitError()
             << "'" << name << "' is a unit attribute of graph.transfer";
    return success();
  }
  if (name == kInitializerAttrName) {
    if (!isa<StringAttr>(attr.getValue()) || !isa<ConstantOp>(op))
      return op->emitError()
             << "'" << name << "' names the initializer of a graph.constant";
    return success();
  }
  if (name == "graph.opset" || name == "graph.num_devices" ||
      name == "graph.batch")
    return success(isa<IntegerAttr>(attr.getValue()));
  if (name == "graph.model")
    return success(isa<StringAttr>(attr.getValue()));
  // What placement chose, for the plan's metadata: strings by name.
  if (name == kPlacementAttrName) {
    auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
    if (dict && llvm::all_of(dict, [](NamedAttribute entry) {
          return isa<StringAttr>(entry.getValue());
        }))
      return success();
    return op->emitError() << "'" << name
                           << "' must be a dictionary of strings, got "
                           << attr.getValue();
  }
  return op->emitError() << "unknown graph dialect attribute '" << name << "'";
}

namespace mlir::partc::graph {

std::optional<int64_t> getDevice(Operation *op) {
  if (auto attr = op->getAttrOfType<IntegerAttr>(GraphDialect::kDeviceAttrName))
    return attr.getInt();
  return std::nullopt;
}

void setDevice(Operation *op, int64_t device) {
  op->setAttr(GraphDialect::kDeviceAttrName,
              IntegerAttr::get(IntegerType::get(op->getContext(), 64), device));
}

void shiftDropoutOffset(Operation *op, int64_t elements) {
  if (auto dropout = dyn_cast<DropoutOp>(op))
    dropout.setOffset(dropout.getOffset() + elements);
  else if (auto gradient = dyn_cast<SoftmaxGradOp>(op);
           gradient && gradient.getDropoutRatioAttr())
    gradient.setDropoutOffset(gradient.getDropoutOffset() + elements);
}

} // namespace mlir::partc::graph
