//===- GraphOps.cpp - Folders, verifiers and costs of graph ops -----------===//
#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
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

FusedElementwiseOp mlir::partc::graph::concatReader(ConcatOp concat) {
  auto type = cast<RankedTensorType>(concat.getType());
  int64_t rank = type.getRank(), axis = concat.getAxis();
  int64_t parts = static_cast<int64_t>(concat.getInputs().size());
  if (axis < 0)
    axis += rank;
  if (rank == 0 || axis != rank - 1 || parts < 2 ||
      parts > ::partc::runtime::fused::kMaxConcatParts || concat->use_empty())
    return {};
  auto chain = dyn_cast<FusedElementwiseOp>(*concat->user_begin());
  if (!chain || chain.getNumConcatParts() != 1 ||
      chain.getType().getShape() != type.getShape() ||
      getDevice(chain) != getDevice(concat) ||
      !llvm::all_of(concat->getUsers(),
                    [&](Operation *user) { return user == chain; }))
    return {};
  // The chain's other inputs and the concatenation's place must fit.
  int64_t others = 0;
  for (Value v : chain.getInputs())
    others += v != concat.getResult();
  if (others + 1 > ::partc::runtime::fused::kMaxInputs)
    return {};
  return chain;
}

void mlir::partc::graph::concatPartsOperands(ConcatOp concat,
                                             FusedElementwiseOp chain,
                                             SmallVectorImpl<Value> &operands,
                                             SmallVectorImpl<int64_t> &args) {
  int64_t parts = static_cast<int64_t>(concat.getInputs().size());
  operands.assign(concat.getInputs().begin(), concat.getInputs().end());
  SmallVector<int64_t> programInput;
  for (Value v : chain.getInputs()) {
    if (v == concat.getResult()) {
      programInput.push_back(0);
      continue;
    }
    programInput.push_back(static_cast<int64_t>(operands.size()) - parts + 1);
    operands.push_back(v);
  }
  args.clear();
  for (int64_t a : chain.getArgs())
    args.push_back(a >= 0 ? programInput[a] : a);
}

OpFoldResult PadOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType() &&
      llvm::all_of(getPads(), [](int64_t p) { return p == 0; }))
    return getInput();
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

LogicalResult AllReduceOp::verify() {
  ArrayRef<int64_t> devices = getDevices();
  if (devices.size() < 2)
    return emitOpError() << "averages over " << devices.size()
                         << " device(s); a collective needs at least 2";
  for (auto [i, d] : llvm::enumerate(devices))
    if (d < 0 || llvm::is_contained(devices.take_front(i), d))
      return emitOpError() << "lists device " << d
                           << " twice or below 0; devices must be distinct "
                              "indices >= 0";
  if (auto device = getDevice(*this);
      device && !llvm::is_contained(devices, *device))
    return emitOpError() << "is placed on device " << *device
                         << ", which is not among its group's devices";
  if (getInputs().empty())
    return emitOpError() << "averages nothing; it needs at least one tensor";
  for (Value input : getInputs())
    if (!cast<TensorType>(input.getType()).getElementType().isF32())
      return emitOpError() << "averages " << input.getType()
                           << "; only f32 tensors (gradients, losses) can be "
                              "averaged so far";
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
  int64_t parts = getNumConcatParts();
  if (parts < 1 || parts > fused::kMaxConcatParts ||
      parts > static_cast<int64_t>(getInputs().size()))
    return emitOpError() << "has concat_parts = " << parts << " with "
                         << getInputs().size()
                         << " operands; it counts the leading operands "
                            "concatenated into the program's input 0, from 1 "
                            "to "
                         << fused::kMaxConcatParts;
  ::partc::runtime::Status s =
      fused::parseProgram(steps, {getArgs().begin(), getArgs().end()}, params,
                          static_cast<int>(getNumProgramInputs()), program);
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

/// A convolution's gradients do the forward convolution's work: 2 x the
/// filter's reduction (C / group x kernel) per element of the result's
/// gradient, whatever the layout (the output channels come first).
static int64_t convGradientFlops(ArrayRef<int64_t> weight, Value grad) {
  int64_t perOutput = 2;
  for (int64_t d : weight.drop_front())
    perOutput *= d;
  return perOutput * elementCount(grad.getType());
}

int64_t ConvGradInputOp::estimateFlops() {
  return convGradientFlops(cast<ShapedType>(getWeight().getType()).getShape(),
                           getGrad());
}

int64_t ConvGradWeightOp::estimateFlops() {
  return convGradientFlops(getWeightShape(), getGrad());
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

//===----------------------------------------------------------------------===//
// Training (TrainingOps.td)
//===----------------------------------------------------------------------===//

LogicalResult VariableOp::verify() {
  if (auto value = getValueAttr(); value && value.getType() != getType())
    return emitOpError() << "'" << getName() << "' of type " << getType()
                         << " is initialized with a value of type "
                         << value.getType();
  if (std::string why = tensorSizeProblem(getType()); !why.empty())
    return emitOpError() << "'" << getName() << "' " << why;
  return success();
}

/// The operands an update writes must be graph.variables of one type with
/// `like` (the parameter), or for the step counter an int64 scalar.
static LogicalResult
verifyUpdatedOperands(Operation *op, ArrayRef<unsigned> updated, Type like) {
  for (unsigned i : updated) {
    Value v = op->getOperand(i);
    if (!v.getDefiningOp<VariableOp>())
      return op->emitOpError()
             << "updates operand " << i
             << " in place, so it must be a graph.variable; hint: "
                "partc-apply-optimizer makes parameters variables";
    if (like && v.getType() != like)
      return op->emitOpError() << "operand " << i << " of type " << v.getType()
                               << " does not match the parameter's " << like;
  }
  return success();
}

static LogicalResult verifyStepCounter(Operation *op, Value step) {
  auto type = cast<RankedTensorType>(step.getType());
  if (type.getRank() != 0 || !type.getElementType().isInteger(64))
    return op->emitOpError()
           << "counts steps in " << type << "; the step counter is tensor<i64>";
  return success();
}

SmallVector<unsigned> SgdUpdateOp::getUpdatedOperands() {
  if (getMomentumBuffer())
    return {0, 2};
  return {0};
}

LogicalResult SgdUpdateOp::verify() {
  if (getGrad().getType() != getParam().getType())
    return emitOpError() << "gradient " << getGrad().getType()
                         << " does not match the parameter "
                         << getParam().getType();
  double momentum = getMomentum().convertToDouble();
  if ((momentum != 0) != (getMomentumBuffer() != nullptr))
    return emitOpError() << "has momentum " << momentum << " but "
                         << (getMomentumBuffer() ? "a" : "no")
                         << " momentum buffer; it needs one exactly when "
                            "momentum is not 0";
  if (!isa<FloatType>(mlir::getElementTypeOrSelf(getParam().getType())))
    return emitOpError() << "updates " << getParam().getType()
                         << "; parameters are floats";
  return verifyUpdatedOperands(*this, getUpdatedOperands(),
                               getParam().getType());
}

SmallVector<unsigned> AdamWUpdateOp::getUpdatedOperands() { return {0, 2, 3}; }

LogicalResult AdamWUpdateOp::verify() {
  if (getGrad().getType() != getParam().getType())
    return emitOpError() << "gradient " << getGrad().getType()
                         << " does not match the parameter "
                         << getParam().getType();
  if (!isa<FloatType>(mlir::getElementTypeOrSelf(getParam().getType())))
    return emitOpError() << "updates " << getParam().getType()
                         << "; parameters are floats";
  double beta1 = getBeta1().convertToDouble(),
         beta2 = getBeta2().convertToDouble();
  if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1))
    return emitOpError() << "has betas " << beta1 << ", " << beta2
                         << "; each must be in [0, 1)";
  if (!getStep().getDefiningOp<VariableOp>())
    return emitOpError() << "reads the step count from a value that is not a "
                            "graph.variable";
  if (failed(verifyStepCounter(*this, getStep())))
    return failure();
  return verifyUpdatedOperands(*this, getUpdatedOperands(),
                               getParam().getType());
}

SmallVector<unsigned> CountStepOp::getUpdatedOperands() { return {0}; }

LogicalResult CountStepOp::verify() {
  if (failed(verifyStepCounter(*this, getStep())))
    return failure();
  return verifyUpdatedOperands(*this, getUpdatedOperands(), Type());
}

SmallVector<unsigned> UpdateRunningStatsOp::getUpdatedOperands() {
  return {0, 1};
}

LogicalResult UpdateRunningStatsOp::verify() {
  Type like = getRunningMean().getType();
  for (Value v : {getMean(), getVariance()})
    if (v.getType() != like)
      return emitOpError() << "batch statistic " << v.getType()
                           << " does not match the running mean " << like;
  double momentum = getMomentum().convertToDouble();
  if (!(momentum >= 0 && momentum <= 1))
    return emitOpError() << "has momentum " << momentum
                         << "; it must be in [0, 1]";
  if (getCount() < 2)
    return emitOpError() << "averages " << getCount()
                         << " values per channel; the unbiased variance "
                            "needs at least 2";
  return verifyUpdatedOperands(*this, getUpdatedOperands(), like);
}

#define GET_OP_CLASSES
#include "dialects/Graph/GraphInterfaces.cpp.inc"
#include "dialects/Graph/GraphOps.cpp.inc"
