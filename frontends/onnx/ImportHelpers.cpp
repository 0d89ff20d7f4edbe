//===- ImportHelpers.cpp - Shared pieces of the ONNX node handlers --------===//
#include "frontends/onnx/ImportHelpers.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"

#include <cstring>

namespace mlir::partc::onnx_import {

LogicalResult requireInputs(NodeImporter &n, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (!n.input(i))
      return n.error() << "expects input " << i;
  return success();
}

FailureOr<int64_t> normAxis(NodeImporter &n, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return n.error() << "axis " << axis << " is out of range for rank " << rank,
           failure();
  return a;
}

LogicalResult emit(NodeImporter &n, FailureOr<Value> v) {
  if (failed(v))
    return failure();
  n.results.push_back(*v);
  return success();
}

namespace {
template <typename T> void storeAs(std::vector<uint8_t> &bytes, T value) {
  bytes.resize(sizeof(T));
  std::memcpy(bytes.data(), &value, sizeof(T));
}
} // namespace

Value scalarConstant(NodeImporter &n, Type et, double value) {
  std::vector<uint8_t> bytes;
  switch (toDType(et)) {
  case rt::DType::F64:
    storeAs(bytes, value);
    break;
  case rt::DType::I64:
    storeAs(bytes, static_cast<int64_t>(value));
    break;
  case rt::DType::I32:
    storeAs(bytes, static_cast<int32_t>(value));
    break;
  case rt::DType::I16:
    storeAs(bytes, static_cast<int16_t>(value));
    break;
  case rt::DType::I8:
    storeAs(bytes, static_cast<int8_t>(value));
    break;
  case rt::DType::U8:
  case rt::DType::Bool:
    storeAs(bytes, static_cast<uint8_t>(value));
    break;
  case rt::DType::U16:
    storeAs(bytes, static_cast<uint16_t>(value));
    break;
  case rt::DType::U32:
    storeAs(bytes, static_cast<uint32_t>(value));
    break;
  case rt::DType::U64:
    storeAs(bytes, static_cast<uint64_t>(value));
    break;
  default:
    storeAs(bytes, static_cast<float>(value));
    break;
  }
  return n.constant(RankedTensorType::get({}, et), bytes);
}

FailureOr<SmallVector<int64_t>>
axesFromAttrOrInput(NodeImporter &n, int64_t inputOpset, size_t inputIndex) {
  if (n.opset() < inputOpset) {
    auto a = n.attrInts("axes");
    return a ? *a : SmallVector<int64_t>();
  }
  if (!n.input(inputIndex))
    return SmallVector<int64_t>();
  return n.constInts(n.input(inputIndex), "the axes input");
}

FailureOr<SmallVector<int64_t>>
reductionAxes(NodeImporter &n, int64_t axesInputOpset, bool &noop) {
  noop = false;
  auto axes = axesFromAttrOrInput(n, axesInputOpset, 1);
  if (failed(axes))
    return failure();
  int64_t rank = rankOf(n.input(0));
  SmallVector<int64_t> norm;
  if (axes->empty()) {
    if (n.attrInt("noop_with_empty_axes", 0)) {
      noop = true;
      return norm;
    }
    for (int64_t i = 0; i < rank; ++i)
      norm.push_back(i);
  }
  for (int64_t a : *axes) {
    auto axis = normAxis(n, a, rank);
    if (failed(axis))
      return failure();
    norm.push_back(*axis);
  }
  llvm::sort(norm);
  norm.erase(std::unique(norm.begin(), norm.end()), norm.end());
  return norm;
}

Value OpChain::op(StringRef name, ValueRange operands,
                  ArrayRef<NamedAttribute> attrs) {
  if (!ok_)
    return Value();
  if (llvm::any_of(operands, [](Value v) { return !v; })) {
    n_.error() << "internal: graph." << name << " lacks an operand";
    ok_ = false;
    return Value();
  }
  auto result = n_.build1(name, operands, attrs);
  if (failed(result)) {
    ok_ = false;
    return Value();
  }
  return *result;
}

Value OpChain::reshape(Value v, ArrayRef<int64_t> shape) {
  if (v && shapeOf(v) == shape)
    return v;
  return op("reshape", {v}, {n_.ints("shape", shape)});
}

Value OpChain::transpose(Value v, ArrayRef<int64_t> perm) {
  bool identity = true;
  for (auto [i, p] : llvm::enumerate(perm))
    identity = identity && p == static_cast<int64_t>(i);
  if (v && identity)
    return v;
  return op("transpose", {v}, {n_.ints("perm", perm)});
}

Value OpChain::castTo(Value v, Type et) {
  if (v && elemOf(v) == et)
    return v;
  return op("cast", {v}, {n_.builder().getNamedAttr("to", TypeAttr::get(et))});
}

Value OpChain::scalar(Type et, double value) {
  return scalarConstant(n_, et, value);
}

Value OpChain::reduce(StringRef name, Value v, ArrayRef<int64_t> axes,
                      bool keepdims) {
  return op(name, {v},
            {n_.ints("axes", axes), n_.i64("keepdims", keepdims ? 1 : 0)});
}

LogicalResult OpChain::finish(ArrayRef<Value> values) {
  if (!ok_ || llvm::any_of(values, [](Value v) { return !v; }))
    return failure();
  n_.results.append(values.begin(), values.end());
  return success();
}

} // namespace mlir::partc::onnx_import
