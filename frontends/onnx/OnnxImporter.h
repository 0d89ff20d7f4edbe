//===- OnnxImporter.h - ONNX model to graph dialect -------------*- C++ -*-===//
#ifndef PARTC_FRONTENDS_ONNX_ONNXIMPORTER_H
#define PARTC_FRONTENDS_ONNX_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <string>
#include <vector>

namespace mlir::partc::onnx_import {

struct ImportOptions {
  /// Value for a dynamic leading (batch) dimension of the graph inputs.
  int64_t batch = 1;
  /// Whether the user set `batch`: then a model that fixes every input's
  /// leading dimension at another size is an error, not a silent no-op.
  bool batchGiven = false;
  /// Values of symbolic dimensions by name (ONNX dim_param), any position;
  /// a named leading dimension bound here overrides `batch`.
  std::map<std::string, int64_t> dims;
  /// Whole shapes of graph inputs by name, for dimensions without a name.
  std::map<std::string, std::vector<int64_t>> shapes;
  /// Graph inputs frozen to the tensor in a file (.pb or .npy), for inputs
  /// that are really parameters, such as shapes.
  std::map<std::string, std::string> constantInputs;
  /// Keep float initializers as they are for training: ops that read them
  /// are not folded into new constants while importing.
  bool keepParameters = false;
};

/// Imports `path` into a module holding `func.func @main` of graph ops.
/// Every op's location names its ONNX node; errors are reported through the
/// context's diagnostic handler and yield a null module.
OwningOpRef<ModuleOp> importOnnxFile(MLIRContext *context,
                                     const std::string &path,
                                     const ImportOptions &options);

/// The same for a model already in memory (serialized ModelProto bytes);
/// `path` names it in diagnostics and locates its external data.
OwningOpRef<ModuleOp> importOnnxBuffer(MLIRContext *context,
                                       llvm::StringRef contents,
                                       const std::string &path,
                                       const ImportOptions &options);

/// ONNX operator types this importer understands.
std::vector<std::string> supportedOnnxOps();

} // namespace mlir::partc::onnx_import

#endif // PARTC_FRONTENDS_ONNX_ONNXIMPORTER_H
