//===- RuntimeBridge.h - Graph IR <-> runtime types and attributes -*- C++
//-*-===//
//
// The compiler reuses the runtime's kernels (constant folding) and writes its
// plan format; these helpers translate types, attributes and constant data.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_DIALECTS_GRAPH_RUNTIMEBRIDGE_H
#define PARTC_DIALECTS_GRAPH_RUNTIMEBRIDGE_H

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "runtime/Support.h"
#include "runtime/kernels/Attrs.h"

namespace mlir::partc {
namespace rt = ::partc::runtime;

/// Element type to runtime dtype; DType::Invalid if there is none.
rt::DType toDType(Type elementType);
Type fromDType(MLIRContext *ctx, rt::DType dtype);
rt::TensorType toTensorType(ShapedType type);

/// The kernel a graph op runs: its mnemonic ("graph.conv" -> "conv").
std::string kernelNameFor(Operation *op);

/// The op's inherent attributes as kernel attributes (discardable `graph.*`
/// placement attributes and type attributes are left out).
rt::AttrMap toKernelAttrs(Operation *op);
rt::AttrMap toKernelAttrs(DictionaryAttr attrs);

/// Dense row-major bytes of a constant, in the runtime's layout (bool as one
/// byte per element).
std::vector<uint8_t> elementsToBytes(ElementsAttr attr);

/// A constant attribute of `type` from runtime-layout bytes.
ElementsAttr bytesToElements(ShapedType type, ArrayRef<uint8_t> bytes);

/// Raw bytes of a constant without copying when its storage allows (dense
/// non-splat or resource blobs); otherwise fills `scratch` and returns it.
ArrayRef<uint8_t> constantBytes(ElementsAttr attr,
                                std::vector<uint8_t> &scratch);

} // namespace mlir::partc

#endif // PARTC_DIALECTS_GRAPH_RUNTIMEBRIDGE_H
