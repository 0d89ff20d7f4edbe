//===- PassUtils.h - Helpers shared by partc passes -------------*- C++ -*-===//
#ifndef PARTC_COMPILER_UTILS_PASSUTILS_H
#define PARTC_COMPILER_UTILS_PASSUTILS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>
#include <string>

namespace mlir::partc {

/// The ONNX node name recorded in `loc`, or "" if there is none.
std::string onnxNodeName(Location loc);

/// Whether `loc` names ONNX node `name`, also among the nodes fused into it.
bool locationNamesNode(Location loc, StringRef name);

/// The module's `func.func @main`, or an error on the module.
FailureOr<func::FuncOp> getMainFunction(ModuleOp module);

/// Number of devices recorded by partc-assign-devices, or 1.
int64_t getNumDevices(ModuleOp module);
void setNumDevices(ModuleOp module, int64_t n);

/// Records `key` = `value` in the module's `graph.placement`, what placement
/// chose, which the plan's metadata carries (partc-lower-to-plan).
void recordPlacement(ModuleOp module, StringRef key, StringRef value);

/// What recordPlacement recorded under `key`, if anything.
std::optional<std::string> placementValue(ModuleOp module, StringRef key);

/// Values every device can read without a transfer: function arguments,
/// constants and host-side slices of arguments.
bool isHostValue(Value v);

/// Gives every op of a placed @main that a pass created without a device
/// (a variable, an optimizer update, a rewritten op) the device its
/// neighbours imply: an op its first placed user's (else its placed
/// operands'), an update its gradient's or statistics', a variable its
/// first user's. Does nothing where no op is placed (before placement).
void placeUnplacedOps(func::FuncOp func);

/// Recomputes `op`'s result types from its operands and attributes (after
/// they changed), through its InferTypeOpInterface.
LogicalResult reinferTypes(Operation *op);

/// `bytes` in the largest binary unit that leaves at least 1 ("1.50 KiB",
/// "16 B"), for diagnostics and --explain.
std::string formatBytes(double bytes);

/// A training step's forward ops: those the loss (`loss`, the return's
/// first operand) is computed from, constants and variables aside; the
/// rest of the step works back from them.
void collectForwardOps(Value loss, llvm::DenseSet<Operation *> &forward);

/// The value of a one-element f32 graph.constant, if `v` is one.
std::optional<double> scalarF32Constant(Value v);

/// Whether `v` is a floating-point graph.constant whose every element
/// equals `value` (dense attributes of any float type, resource blobs of
/// f32 or f64).
bool isUniformFloatConstant(Value v, double value);

/// The value of a one-element integer graph.constant, if `v` is one.
std::optional<int64_t> scalarIntConstant(Value v);

/// Erases `ops`, replaced by a fused op and listed users first, and then
/// the graph.constants they read that nothing else reads (the scalars of a
/// pattern go with it).
void eraseWithTheirConstants(ArrayRef<Operation *> ops);

/// Numbers the graph.all_reduce groups of `body` 0, 1, ... in the order
/// the devices first meet them (the plan verifier asks for dense numbers;
/// readers of the IR see the order).
void renumberAllReduceGroups(Block &body);

} // namespace mlir::partc

#endif // PARTC_COMPILER_UTILS_PASSUTILS_H
