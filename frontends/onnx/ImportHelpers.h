//===- ImportHelpers.h - Shared pieces of the ONNX node handlers -*- C++
//-*-===//
//
// Small helpers the handlers of OnnxOps.cpp and OnnxComposites.cpp share,
// and OpChain, which spells an ONNX operator as a sequence of graph ops.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_FRONTENDS_ONNX_IMPORTHELPERS_H
#define PARTC_FRONTENDS_ONNX_IMPORTHELPERS_H

#include "frontends/onnx/NodeImporter.h"

namespace mlir::partc::onnx_import {

inline ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
inline int64_t rankOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank();
}
inline Type elemOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

/// Fails with an error unless inputs 0..count-1 are present.
LogicalResult requireInputs(NodeImporter &n, size_t count);

/// `axis` made non-negative for `rank`, or an error naming both.
FailureOr<int64_t> normAxis(NodeImporter &n, int64_t axis, int64_t rank);

/// Appends `v` to the node's results.
LogicalResult emit(NodeImporter &n, FailureOr<Value> v);

/// A rank-0 constant of element type `et` (float, integer or bool) holding
/// `value` converted to that type.
Value scalarConstant(NodeImporter &n, Type et, double value);

/// Axes given as an attribute before `inputOpset` and as the constant input
/// `inputIndex` from it; empty when absent.
FailureOr<SmallVector<int64_t>>
axesFromAttrOrInput(NodeImporter &n, int64_t inputOpset, size_t inputIndex);

/// The sorted, unique, non-negative axes of a Reduce* node (an attribute
/// before `axesInputOpset`, an input from it). Empty axes mean all, unless
/// `noop_with_empty_axes` is set: then `noop` is true.
FailureOr<SmallVector<int64_t>>
reductionAxes(NodeImporter &n, int64_t axesInputOpset, bool &noop);

/// Handlers of the operators spelled as compositions of graph ops
/// (OnnxComposites.cpp).
void addCompositeHandlers(llvm::StringMap<NodeHandler> &handlers);

/// Builds one ONNX node as a chain of graph ops. The first failure (already
/// reported by the importer, naming the node) makes every later step return
/// a null value, so that a decomposition reads as straight-line code and is
/// checked once at the end.
class OpChain {
public:
  explicit OpChain(NodeImporter &n) : n_(n) {}

  Value op(StringRef name, ValueRange operands,
           ArrayRef<NamedAttribute> attrs = {});
  Value reshape(Value v, ArrayRef<int64_t> shape);
  Value transpose(Value v, ArrayRef<int64_t> perm);
  Value castTo(Value v, Type et);
  Value scalar(Type et, double value);
  /// A reduction over `axes` with `keepdims`.
  Value reduce(StringRef name, Value v, ArrayRef<int64_t> axes, bool keepdims);

  /// Emits `values` as the node's results if every step succeeded.
  LogicalResult finish(ArrayRef<Value> values);
  bool ok() const { return ok_; }
  NodeImporter &importer() { return n_; }

private:
  NodeImporter &n_;
  bool ok_ = true;
};

} // namespace mlir::partc::onnx_import

#endif // PARTC_FRONTENDS_ONNX_IMPORTHELPERS_H
