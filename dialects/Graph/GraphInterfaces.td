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

#endif // PARTC_GRAPH_INTERFACES
