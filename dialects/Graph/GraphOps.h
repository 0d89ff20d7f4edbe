//===- GraphOps.h - partc graph ops -----------------------------*- C++ -*-===//
#ifndef PARTC_DIALECTS_GRAPH_GRAPHOPS_H
#define PARTC_DIALECTS_GRAPH_GRAPHOPS_H

#include "dialects/Graph/BatchRule.h"
#include "dialects/Graph/GraphDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

namespace mlir::partc::graph {

int64_t defaultFlops(Operation *op);
int64_t defaultBytes(Operation *op);

/// Evaluates `op` on constant operands with the runtime's CPU kernels.
/// Fails (without a diagnostic) when an operand is not constant, the result
/// would be large, or no kernel applies.
LogicalResult evaluateConstantOp(Operation *op, ArrayRef<Attribute> operands,
                                 SmallVectorImpl<OpFoldResult> &results);

/// Folds an op whose operands are all constants.
template <typename ConcreteType>
class ConstantEvaluable
    : public OpTrait::TraitBase<ConcreteType, ConstantEvaluable> {
public:
  static LogicalResult foldTrait(Operation *op, ArrayRef<Attribute> operands,
                                 SmallVectorImpl<OpFoldResult> &results) {
    return evaluateConstantOp(op, operands, results);
  }
};

/// Ops whose result element at each index depends only on the operands'
/// elements at that index, after numpy broadcasting.
template <typename ConcreteType>
class Elementwise : public OpTrait::TraitBase<ConcreteType, Elementwise> {};

/// Whether `op` has the Elementwise trait (unary and binary math,
/// comparisons and logic, where, cast, identity, fused chains of them).
inline bool isElementwise(Operation *op) { return op->hasTrait<Elementwise>(); }

/// Shape rules shared by the element-wise op classes of GraphOps.td: the
/// operand's type, and numpy broadcasting (i1 results for `predicate`).
LogicalResult inferSameType(std::optional<Location> loc, ValueRange operands,
                            SmallVectorImpl<Type> &types);
LogicalResult inferBroadcastType(std::optional<Location> loc,
                                 ValueRange operands, bool predicate,
                                 SmallVectorImpl<Type> &types);

/// Why `type` cannot be a tensor partc handles (a negative dimension, or an
/// element count or byte size over runtime::kMaxTensorBytes); empty when it
/// can. Checked where sizes are declared or inferred, so that no size
/// computed later overflows. Dynamic dimensions are refused too.
std::string tensorSizeProblem(ShapedType type);

/// Placement: the device index of `op`, -1 for host, nullopt if unplaced.
std::optional<int64_t> getDevice(Operation *op);
void setDevice(Operation *op, int64_t device);
constexpr int64_t kHostDevice = -1;

} // namespace mlir::partc::graph

#include "dialects/Graph/GraphInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/Graph/GraphOps.h.inc"

namespace mlir::partc::graph {
/// The fused chain that reads `concat`'s parts in place after
/// partc-fuse-concat: its only user, a chain without parts of its own,
/// reading it at the chain's shape, on its device; null where there is
/// none (the concatenation is then written). The cost model charges such
/// a concatenation nothing.
FusedElementwiseOp concatReader(ConcatOp concat);
/// `chain`'s operands and `args` once it reads `concat`'s parts in place
/// (concat_parts = the parts' count): the parts, then its other operands
/// in order; program input 0 is the concatenation.
void concatPartsOperands(ConcatOp concat, FusedElementwiseOp chain,
                         SmallVectorImpl<Value> &operands,
                         SmallVectorImpl<int64_t> &args);
/// Moves the mask numbering of a dropout (graph.dropout's `offset`, or a
/// softmax_grad's folded `dropout_offset`) on by `elements`: the clone for
/// a slice of the batch continues the whole batch's mask. Other ops are
/// left alone.
void shiftDropoutOffset(Operation *op, int64_t elements);
} // namespace mlir::partc::graph

#endif // PARTC_DIALECTS_GRAPH_GRAPHOPS_H
