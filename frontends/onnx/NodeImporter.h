//===- NodeImporter.h - Per-node import helpers (internal) ------*- C++ -*-===//
#ifndef PARTC_FRONTENDS_ONNX_NODEIMPORTER_H
#define PARTC_FRONTENDS_ONNX_NODEIMPORTER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>

namespace mlir::partc::onnx_import {

/// The view of one ONNX node while it is translated: its inputs as SSA
/// values, its attributes, and builders that infer result types and fold
/// constant operands immediately (Reshape needs its shape input folded
/// before its own result type is known).
class NodeImporter {
public:
  NodeImporter(OpBuilder &builder, const onnx::NodeProto &node, Location loc,
               int64_t opset, SmallVector<Value> inputs,
               bool keepParameters = false)
      : builder_(builder), node_(node), loc_(loc), opset_(opset),
        inputs_(std::move(inputs)), keepParameters_(keepParameters) {}

  const onnx::NodeProto &node() const { return node_; }
  Location loc() const { return loc_; }
  int64_t opset() const { return opset_; }
  OpBuilder &builder() { return builder_; }

  size_t numInputs() const { return inputs_.size(); }
  /// Input `i`, or a null value when absent or given as "".
  Value input(size_t i) const {
    return i < inputs_.size() ? inputs_[i] : Value();
  }
  size_t numOutputs() const { return node_.output_size(); }
  /// Whether output `i` is named (ONNX leaves unused optional outputs "").
  bool wantsOutput(size_t i) const {
    return static_cast<int>(i) < node_.output_size() &&
           !node_.output(i).empty();
  }

  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  int64_t attrInt(llvm::StringRef name, int64_t dflt) const;
  double attrFloat(llvm::StringRef name, double dflt) const;
  std::string attrString(llvm::StringRef name, const std::string &dflt) const;
  std::optional<SmallVector<int64_t>> attrInts(llvm::StringRef name) const;

  /// Integer or float contents of a constant operand; fails with an error
  /// naming `what` when the value is not a compile-time constant.
  FailureOr<SmallVector<int64_t>> constInts(Value v, llvm::StringRef what);
  FailureOr<SmallVector<double>> constFloats(Value v, llvm::StringRef what);

  /// Creates `opName` with inferred result types, then folds it if all its
  /// operands are constants. Errors from shape inference name the node.
  FailureOr<SmallVector<Value>> build(llvm::StringRef opName,
                                      ValueRange operands,
                                      ArrayRef<NamedAttribute> attrs = {},
                                      unsigned numResults = 1);
  FailureOr<Value> build1(llvm::StringRef opName, ValueRange operands,
                          ArrayRef<NamedAttribute> attrs = {});
  Value constant(ShapedType type, ArrayRef<uint8_t> bytes);

  /// The node's results, in output order.
  SmallVector<Value> results;

  InFlightDiagnostic error();
  /// Error for an operand that must be constant, naming its ONNX value.
  InFlightDiagnostic notConstant(Value v, llvm::StringRef what);

  // Attribute construction shorthands.
  NamedAttribute i64(llvm::StringRef name, int64_t v);
  NamedAttribute f64(llvm::StringRef name, double v);
  NamedAttribute ints(llvm::StringRef name, ArrayRef<int64_t> v);
  NamedAttribute str(llvm::StringRef name, llvm::StringRef v);
  NamedAttribute unit(llvm::StringRef name);

private:
  OpBuilder &builder_;
  const onnx::NodeProto &node_;
  Location loc_;
  int64_t opset_;
  SmallVector<Value> inputs_;
  /// Training: ops on float initializers are not folded, so that the
  /// initializers stay parameters.
  bool keepParameters_;
};

using NodeHandler = std::function<LogicalResult(NodeImporter &)>;

/// Every supported ONNX op type (default domain) and its translation.
const llvm::StringMap<NodeHandler> &onnxNodeHandlers();

/// Element type of an ONNX TensorProto data type, or null.
Type elementTypeFor(MLIRContext *ctx, int32_t onnxType);

} // namespace mlir::partc::onnx_import

#endif // PARTC_FRONTENDS_ONNX_NODEIMPORTER_H
