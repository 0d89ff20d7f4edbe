//===- GraphEvaluate.cpp - Runtime bridge and constant evaluation ---------===//
#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"
#include "runtime/kernels/Kernel.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <cstring>

namespace mlir::partc {

using rt::DType;

DType toDType(Type t) {
  if (t.isF32())
    return DType::F32;
  if (t.isF64())
    return DType::F64;
  if (t.isF16())
    return DType::F16;
  if (t.isBF16())
    return DType::BF16;
  if (auto it = dyn_cast<IntegerType>(t)) {
    unsigned w = it.getWidth();
    if (w == 1)
      return DType::Bool;
    bool u = it.isUnsigned();
    switch (w) {
    case 8:
      return u ? DType::U8 : DType::I8;
    case 16:
      return u ? DType::U16 : DType::I16;
    case 32:
      return u ? DType::U32 : DType::I32;
    case 64:
      return u ? DType::U64 : DType::I64;
    default:
      break;
    }
  }
  return DType::Invalid;
}

Type fromDType(MLIRContext *ctx, DType d) {
  Builder b(ctx);
  auto uns = [&](unsigned w) {
    return IntegerType::get(ctx, w, IntegerType::Unsigned);
  };
  switch (d) {
  case DType::F32:
    return b.getF32Type();
  case DType::F64:
    return b.getF64Type();
  case DType::F16:
    return b.getF16Type();
  case DType::BF16:
    return b.getBF16Type();
  case DType::Bool:
    return b.getI1Type();
  case DType::I8:
    return b.getIntegerType(8);
  case DType::I16:
    return b.getIntegerType(16);
  case DType::I32:
    return b.getIntegerType(32);
  case DType::I64:
    return b.getIntegerType(64);
  case DType::U8:
    return uns(8);
  case DType::U16:
    return uns(16);
  case DType::U32:
    return uns(32);
  case DType::U64:
    return uns(64);
  case DType::Invalid:
    break;
  }
  return Type();
}

rt::TensorType toTensorType(ShapedType type) {
  rt::TensorType t;
  t.dtype = toDType(type.getElementType());
  t.shape.assign(type.getShape().begin(), type.getShape().end());
  return t;
}

std::string kernelNameFor(Operation *op) {
  if (isa<graph::ReshapeOp, graph::IdentityOp>(op))
    return "copy";
  return op->getName().stripDialect().str();
}

rt::AttrMap toKernelAttrs(DictionaryAttr attrs) {
  rt::AttrMap map;
  for (NamedAttribute na : attrs) {
    StringRef name = na.getName().strref();
    if (name.contains('.'))
      continue; // discardable attributes such as graph.device
    Attribute a = na.getValue();
    if (auto i = dyn_cast<IntegerAttr>(a))
      map.set(name.str(), rt::AttrValue::ofInts({i.getInt()}));
    else if (auto b = dyn_cast<BoolAttr>(a))
      map.set(name.str(), rt::AttrValue::ofInts({b.getValue()}));
    else if (auto f = dyn_cast<FloatAttr>(a))
      map.set(name.str(), rt::AttrValue::ofFloats({f.getValueAsDouble()}));
    else if (auto arr = dyn_cast<DenseI64ArrayAttr>(a))
      map.set(name.str(),
              rt::AttrValue::ofInts(std::vector<int64_t>(
                  arr.asArrayRef().begin(), arr.asArrayRef().end())));
    else if (auto arr = dyn_cast<DenseF64ArrayAttr>(a))
      map.set(name.str(),
              rt::AttrValue::ofFloats(std::vector<double>(
                  arr.asArrayRef().begin(), arr.asArrayRef().end())));
    else if (auto s = dyn_cast<StringAttr>(a))
      map.set(name.str(), rt::AttrValue::ofString(s.str()));
    else if (isa<UnitAttr>(a))
      map.set(name.str(), rt::AttrValue::ofInts({1}));
    else if (auto list = dyn_cast<ArrayAttr>(a)) {
      // A list of strings (a fused chain's steps) travels comma-separated.
      std::string joined;
      for (Attribute item : list)
        if (auto str = dyn_cast<StringAttr>(item))
          joined += (joined.empty() ? "" : ",") + str.str();
      map.set(name.str(), rt::AttrValue::ofString(joined));
    }
  }
  return map;
}

rt::AttrMap toKernelAttrs(Operation *op) {
  return toKernelAttrs(op->getAttrDictionary());
}

static ArrayRef<uint8_t> asBytes(ArrayRef<char> data) {
  return ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(data.data()),
                           data.size());
}

ArrayRef<uint8_t> constantBytes(ElementsAttr attr,
                                std::vector<uint8_t> &scratch) {
  if (auto res = dyn_cast<DenseResourceElementsAttr>(attr)) {
    if (AsmResourceBlob *blob = res.getRawHandle().getBlob())
      return asBytes(blob->getData());
    scratch.clear();
    return scratch;
  }
  auto dense = dyn_cast<DenseIntOrFPElementsAttr>(attr);
  if (dense && !dense.isSplat() && !dense.getElementType().isInteger(1))
    return asBytes(dense.getRawData());
  scratch = elementsToBytes(attr);
  return scratch;
}

std::vector<uint8_t> elementsToBytes(ElementsAttr attr) {
  auto type = cast<ShapedType>(attr.getType());
  int64_t n = type.getNumElements();
  std::vector<uint8_t> out;
  if (auto res = dyn_cast<DenseResourceElementsAttr>(attr)) {
    if (AsmResourceBlob *blob = res.getRawHandle().getBlob()) {
      ArrayRef<char> d = blob->getData();
      out.assign(d.begin(), d.end());
    }
    return out;
  }
  auto dense = dyn_cast<DenseIntOrFPElementsAttr>(attr);
  if (!dense)
    return out;
  if (dense.getElementType().isInteger(1)) {
    for (bool b : dense.getValues<bool>())
      out.push_back(b ? 1 : 0);
    return out;
  }
  ArrayRef<char> raw = dense.getRawData();
  if (dense.isSplat()) {
    size_t es = raw.size();
    out.resize(es * n);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(out.data() + i * es, raw.data(), es);
    return out;
  }
  out.assign(raw.begin(), raw.end());
  return out;
}

ElementsAttr bytesToElements(ShapedType type, ArrayRef<uint8_t> bytes) {
  if (type.getElementType().isInteger(1)) {
    SmallVector<bool> values(bytes.begin(), bytes.end());
    return DenseElementsAttr::get(type, values);
  }
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(reinterpret_cast<const char *>(bytes.data()),
                           bytes.size()));
}

} // namespace mlir::partc

namespace mlir::partc::graph {

// Folding is for shape arithmetic and small weight transforms; larger
// results stay as ops.
static constexpr int64_t kMaxFoldedBytes = 64 << 20;

LogicalResult evaluateConstantOp(Operation *op, ArrayRef<Attribute> operands,
                                 SmallVectorImpl<OpFoldResult> &results) {
  if (op->getNumOperands() == 0)
    return failure();
  // Sizes first: a splat operand of a huge type is one value until it is
  // expanded to be read.
  for (Type type :
       llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto shaped = dyn_cast<RankedTensorType>(type);
    if (!shaped || !shaped.hasStaticShape() ||
        !tensorSizeProblem(shaped).empty() ||
        toTensorType(shaped).byteSize() > uint64_t(kMaxFoldedBytes))
      return failure();
  }
  std::vector<rt::TensorType> inTypes, outTypes;
  std::vector<std::vector<uint8_t>> scratch(operands.size());
  std::vector<rt::TensorRef> ins, outs;
  for (auto [i, attr] : llvm::enumerate(operands)) {
    auto elements = dyn_cast_or_null<ElementsAttr>(attr);
    if (!elements)
      return failure();
    rt::TensorType t =
        toTensorType(cast<ShapedType>(op->getOperand(i).getType()));
    ArrayRef<uint8_t> bytes = constantBytes(elements, scratch[i]);
    if (bytes.size() != t.byteSize() || t.dtype == DType::Invalid)
      return failure();
    inTypes.push_back(t);
    ins.push_back({const_cast<uint8_t *>(bytes.data()), t});
  }
  int64_t total = 0;
  for (Type type : op->getResultTypes()) {
    auto shaped = dyn_cast<RankedTensorType>(type);
    if (!shaped || !shaped.hasStaticShape())
      return failure();
    outTypes.push_back(toTensorType(shaped));
    if (outTypes.back().dtype == DType::Invalid)
      return failure();
    total += outTypes.back().byteSize();
  }
  if (total > kMaxFoldedBytes)
    return failure();
  std::unique_ptr<rt::Kernel> kernel;
  if (!rt::createCpuKernel(kernelNameFor(op), toKernelAttrs(op), inTypes,
                           outTypes, kernel)
           .ok())
    return failure();
  std::vector<std::vector<uint8_t>> buffers(outTypes.size());
  for (size_t i = 0; i < outTypes.size(); ++i) {
    buffers[i].assign(outTypes[i].byteSize(), 0);
    outs.push_back({buffers[i].data(), outTypes[i]});
  }
  if (!kernel->run(ins, outs).ok())
    return failure();
  for (size_t i = 0; i < outTypes.size(); ++i)
    results.push_back(bytesToElements(
        cast<ShapedType>(op->getResult(i).getType()), buffers[i]));
  return success();
}

} // namespace mlir::partc::graph
