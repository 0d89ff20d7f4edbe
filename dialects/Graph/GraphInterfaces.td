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

#endif // PARTC_GRAPH_INTERFACES
