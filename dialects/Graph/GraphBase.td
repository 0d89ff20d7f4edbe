//===- GraphBase.td - partc graph dialect ------------------------*- tablegen -*-===//
//
// The graph dialect holds a network with ONNX semantics on static-shaped
// tensors. Placement is the discardable attribute `graph.device` (an integer
// device index, or -1 for host-side slicing and gathering at the function
// boundary); a value used on another device than the one it was produced on
// must pass through `graph.transfer`.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_GRAPH_BASE
#define PARTC_GRAPH_BASE

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Graph_Dialect : Dialect {
  let name = "graph";
  let cppNamespace = "::mlir::partc::graph";
  let summary = "Tensor graph with ONNX semantics and explicit placement";
  let description = [{
    Ops mirror ONNX operators on static shapes, with attributes normalized by
    the importer (explicit pads, sorted non-negative axes, constant shape
    operands turned into attributes). Every op can be evaluated at compile
    time through the runtime's reference kernels, which is how shape
    arithmetic is folded.
  }];
  let hasConstantMaterializer = 1;
  let hasOperationAttrVerify = 1;
  // Attributes live in the attribute dictionary so that passes and the plan
  // writer can treat every op's parameters generically.
  let usePropertiesForAttributes = 0;
  let extraClassDeclaration = [{
    /// Name of the placement attribute.
    static constexpr ::llvm::StringLiteral kDeviceAttrName = "graph.device";
    /// Name of the micro-batch index attribute set by pipelining.
    static constexpr ::llvm::StringLiteral kMicroBatchAttrName =
        "graph.micro_batch";
    /// Name of the module attribute in which placement records its choice
    /// (strategy, micro-batches, predictions) for the plan's metadata.
    static constexpr ::llvm::StringLiteral kPlacementAttrName = "graph.placement";
    /// Name of the argument/result attribute holding the ONNX tensor name.
    static constexpr ::llvm::StringLiteral kNameAttrName = "graph.name";
    /// Name of the attribute that marks a graph.constant as the ONNX
    /// initializer it was imported from (a trainable parameter unless
    /// frozen), naming it.
    static constexpr ::llvm::StringLiteral kInitializerAttrName =
        "graph.initializer";
    /// Name of the result attribute naming the initializer whose gradient
    /// a result of a differentiated function is (partc-differentiate).
    static constexpr ::llvm::StringLiteral kGradientOfAttrName =
        "graph.gradient_of";
    /// Name of the argument attribute that marks an input whose batch
    /// partc-slice-batch cut to one of this many equal slices.
    static constexpr ::llvm::StringLiteral kBatchSliceAttrName =
        "graph.batch_slice";
    /// Name of the attribute partc-assign-streams puts on every op of a
    /// region whose independent branches run concurrently: the stream (0
    /// to kMaxStreams - 1) of the op's branch on its device.
    static constexpr ::llvm::StringLiteral kStreamAttrName = "graph.stream";
    /// Streams a device runs its kernels on (the plan format's limit).
    static constexpr int64_t kMaxStreams = 4;
    /// Name of the unit attribute of a graph.transfer placed at its first
    /// reader (partc-insert-transfers at-first-use): its source sends right
    /// after computing the value and waits for the receipt there.
    static constexpr ::llvm::StringLiteral kReceiveAtUseAttrName =
        "graph.receive_at_use";
  }];
}

#endif // PARTC_GRAPH_BASE
