//===- GraphInterfaces.td - Cost interface -----------------------*- tablegen -*-===//
#ifndef PARTC_GRAPH_INTERFACES
#define PARTC_GRAPH_INTERFACES

include "mlir/IR/OpBase.td"

def Graph_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::partc::graph";
  let description = [{
    Work estimates used by the partitioner. The defaults count one operation
    per result element and every operand and result byte once.
  }];
  let methods = [
    InterfaceMethod<"Floating-point operations for one execution.",
      "int64_t", "estimateFlops", (ins), [{}], [{
        return ::mlir::partc::graph::defaultFlops($_op.getOperation());
      }]>,
    InterfaceMethod<"Bytes read and written by one execution.",
      "int64_t", "estimateBytes", (ins), [{}], [{
        return ::mlir::partc::graph::defaultBytes($_op.getOperation());
      }]>,
  ];
}

def Graph_BatchRuleOpInterface : OpInterface<"BatchRuleOpInterface"> {
  let cppNamespace = "::mlir::partc::graph";
  let description = [{
    How an op carries the model's batch (dialects/Graph/BatchRule.h), so
    that data parallelism and micro-batches may clone it per slice of the
    batch. Implemented in BatchRules.cpp, op by op; element-wise ops share
    one broadcast rule, and ops without this interface must see the batch
    in dimension 0.
  }];
  let methods = [
    InterfaceMethod<[{
        Where the results carry the batch, given where each operand does
        (none where an operand is not batched); none, with `why` saying
        what the op does with the batch, where it mixes samples.
      }], "std::optional<::mlir::partc::graph::BatchLoc>", "followBatch",
      (ins "::mlir::partc::graph::OperandBatch":$operandLocs,
           "int64_t":$batch, "std::string &":$why)>,
    InterfaceMethod<[{
        Rewrites the attributes of `slice`, a clone of this op for `size`
        of the `batch` samples, that name the batch's extent (a reshape's
        shape, a slice's ends). Types are inferred again afterwards.
      }], "void", "sliceBatch",
      (ins "::mlir::Operation *":$slice, "int64_t":$batch, "int64_t":$size,
           "::mlir::partc::graph::OperandBatch":$operandLocs,
           "std::optional<::mlir::partc::graph::BatchLoc>":$resultLoc),
      [{}], [{ return; }]>,
  ];
}

def Graph_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::partc::graph";
  let description = [{
    The op's reverse-mode rule, for partc-differentiate: from the gradient
    of the loss with respect to each result, the gradient with respect to
    each operand that needs one, built in graph ops where they serve and
    in backward ops of their own where a library does better. Implemented
    op by op in Gradients.cpp; an op without it has no gradient yet, which
    partc-differentiate reports naming the node.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at the builder's insertion point, the gradient of every
        operand i with `needed[i]` into `operandGrads[i]` (which has one
        entry per operand, null on entry), given `resultGrads` (one per
        result; null where a result does not reach the loss). Fails with a
        diagnostic where the rule does not cover the op's form.
      }], "::llvm::LogicalResult", "buildGradient",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::ArrayRef<bool>":$needed,
           "::llvm::MutableArrayRef<::mlir::Value>":$operandGrads)>,
  ];
}

def Graph_StateUpdateOpInterface : OpInterface<"StateUpdateOpInterface"> {
  let cppNamespace = "::mlir::partc::graph";
  let description = [{
    An op that updates graph.variables in place (an optimizer step): the
    lowering makes the variables' state buffers the kernel's outputs.
  }];
  let methods = [
    InterfaceMethod<"Indices of the operands whose variables are written.",
      "::llvm::SmallVector<unsigned>", "getUpdatedOperands", (ins)>,
  ];
}

#endif // PARTC_GRAPH_INTERFACES
