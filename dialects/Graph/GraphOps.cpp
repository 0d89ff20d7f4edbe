//===- GraphOps.cpp - Folders, verifiers and costs of graph ops -----------===//
#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "runtime/kernels/FusedElementwise.h"

using namespace mlir;
using namespace mlir::partc::graph;

static int64_t elementCount(Type t) {
  auto shaped = dyn_cast<ShapedType>(t);
  return shaped && shaped.hasStaticShape() ? shaped.getNumElements() : 0;
}

static int64_t byteCount(Type t) {
  auto shaped = dyn_cast<ShapedType>(t);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  unsigned bits = shaped.getElementType().getIntOrFloatBitWidth();
  return shaped.getNumElements() * ((bits + 7) / 8);
}

namespace mlir::partc::graph {

int64_t defaultFlops(Operation *op) {
  int64_t n = 0;
  for (Type t : op->getResultTypes())
    n += elementCount(t);
  return n;
}

int64_t defaultBytes(Operation *op) {
  int64_t n = 0;
  for (Type t : op->getOperandTypes())
    n += byteCount(t);
  for (Type t : op->getResultTypes())
    n += byteCount(t);
  return n;
}

} // namespace mlir::partc::graph

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult IdentityOp::fold(FoldAdaptor) { return getInput(); }

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
    return getInputs()[0];
  return {};
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) reads x directly.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(cast<ShapedType>(getType()));
  return {};
}

LogicalResult TransferOp::verify() {
  int64_t source = getSource(), target = getTarget();
  if (source < 0 || target < 0 || source == target)
    return emitOpError() << "moves from device " << getSource() << " to device "
                         << getTarget()
                         << "; both must be distinct device indices >= 0";
  if (auto device = getDevice(*this);
      device && *device != static_cast<int64_t>(getTarget()))
    return emitOpError() << "is placed on device " << *device
                         << " but targets device " << getTarget()
                         << "; a transfer runs on its target";
  return success();
}

LogicalResult FusedElementwiseOp::verify() {
  std::string steps;
  for (Attribute a : getSteps())
    steps += (steps.empty() ? "" : ",") + cast<StringAttr>(a).str();
  namespace fused = ::partc::runtime::fused;
  fused::Program program;
  std::vector<double> params;
  if (auto p = getParams())
    params.assign(p->begin(), p->end());
  ::partc::runtime::Status s =
      fused::parseProgram(steps, {getArgs().begin(), getArgs().end()}, params,
                          static_cast<int>(getInputs().size()), program);
  if (!s.ok())
    return emitOpError() << "has an invalid program: " << s.message()
                         << "; args lists each step's operands (k >= 0: "
                            "operand k, k < 0: step -k-1), params the "
                            "parameters of the steps that take any";
  if (cast<ShapedType>(getType()).getRank() > fused::kMaxRank)
    return emitOpError() << "has rank " << cast<ShapedType>(getType()).getRank()
                         << "; fused chains support rank <= "
                         << fused::kMaxRank;
  return success();
}

int64_t FusedElementwiseOp::estimateFlops() {
  return static_cast<int64_t>(getSteps().size()) * elementCount(getType());
}

int64_t ConvOp::estimateFlops() {
  auto w = cast<ShapedType>(getWeight().getType());
  int64_t perOutput = 2;
  for (int64_t d : w.getShape().drop_front())
    perOutput *= d;
  return perOutput * elementCount(getType());
}

int64_t MatMulOp::estimateFlops() {
  auto lhs = cast<ShapedType>(getLhs().getType());
  int64_t k = lhs.getShape().empty() ? 1 : lhs.getShape().back();
  return 2 * k * elementCount(getType());
}

int64_t StridedMatMulOp::estimateFlops() {
  return 2 * getLhsShape().back() * elementCount(getType());
}

int64_t StridedMatMulOp::viewBytes(unsigned index) {
  Value operand = index ? getRhs() : getLhs();
  int64_t bytes =
      cast<ShapedType>(operand.getType()).getElementTypeBitWidth() / 8;
  for (int64_t d : index ? getRhsShape() : getLhsShape())
    bytes *= d;
  return bytes;
}

int64_t StridedMatMulOp::estimateBytes() {
  // The views read only what they cover, not their whole buffers.
  auto result = cast<ShapedType>(getType());
  return viewBytes(0) + viewBytes(1) +
         result.getNumElements() * result.getElementTypeBitWidth() / 8;
}

int64_t GemmOp::estimateFlops() {
  auto a = cast<ShapedType>(getA().getType());
  int64_t k = getTransA() ? a.getShape()[0] : a.getShape()[1];
  return 2 * k * elementCount(getType());
}

#define GET_OP_CLASSES
#include "dialects/Graph/GraphInterfaces.cpp.inc"
#include "dialects/Graph/GraphOps.cpp.inc"
