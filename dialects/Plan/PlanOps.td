//===- PlanOps.td - partc plan dialect ---------------------------*- tablegen -*-===//
//
// The plan dialect is one step above the plan file: a program with global
// weights and inputs/outputs, and one region per device holding a static,
// fully unrolled instruction stream over buffers (memrefs). Buffers get arena
// offsets from partc-plan-memory; the file writer then emits them verbatim.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_PLAN_OPS
#define PARTC_PLAN_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::mlir::partc::plan";
  let summary = "Per-device static schedules of kernels and transfers";
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

class Plan_Op<string mnemonic, list<Trait> traits = []>
    : Op<Plan_Dialect, mnemonic, traits>;

def Plan_Buffer : StaticShapeMemRefOf<[AnyType]>;

def Plan_ProgramOp : Plan_Op<"program", [SymbolTable, NoTerminator,
    SingleBlock, IsolatedFromAbove]> {
  let summary = "A whole execution plan";
  let arguments = (ins I64Attr:$num_devices,
                       OptionalAttr<DictionaryAttr>:$metadata);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Plan_WeightOp : Plan_Op<"weight", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "Constant data shared by every device that references it";
  let arguments = (ins SymbolNameAttr:$sym_name, ElementsAttr:$value);
  let assemblyFormat = "$sym_name attr-dict";
}

def Plan_StateOp : Plan_Op<"state", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "A tensor that a device keeps across runs, updated in place";
  let description = [{
    Training state: a trainable parameter, an optimizer moment, a running
    statistic or a step counter. It is initialized when the plan is loaded
    from the plan.weight `init` (zeros without one) and afterwards changed
    only by kernels that name its plan.state_ref among their outputs; every
    read of it in a run comes before that update (the plan verifier checks).
    `name` is what partc-run saves and loads it as: the ONNX initializer,
    or "<initializer>.<role>" for a moment.

    ```mlir
    plan.weight @w0 {value = dense<...> : tensor<4x8xf32>}
    plan.state @s0 : tensor<4x8xf32> {device = 0, name = "fc.weight",
                                      role = "parameter", init = @w0}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttr:$type,
                       I64Attr:$device, StrAttr:$name, StrAttr:$role,
                       OptionalAttr<FlatSymbolRefAttr>:$init);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
}

def Plan_InputOp : Plan_Op<"input", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "A host-side model input";
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttr:$type);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
}

def Plan_OutputOp : Plan_Op<"output", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "A host-side model output";
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttr:$type);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
}

def Plan_DeviceOp : Plan_Op<"device", [NoTerminator, SingleBlock,
    HasParent<"ProgramOp">]> {
  let summary = "The instruction stream of one device, in execution order";
  let arguments = (ins I64Attr:$id, OptionalAttr<I64Attr>:$arena_size);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$id attr-dict-with-keyword $body";
}

def Plan_AllocOp : Plan_Op<"alloc", [HasParent<"DeviceOp">]> {
  let summary = "A buffer in the device's arena, written exactly once";
  let description = [{
    `offset` is assigned by partc-plan-memory from the liveness of the
    buffer and every view of it.
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$offset);
  let results = (outs Plan_Buffer:$buffer);
  let assemblyFormat = "attr-dict `:` type($buffer)";
}

def Plan_WeightRefOp : Plan_Op<"weight_ref", [HasParent<"DeviceOp">]> {
  let summary = "Reads a plan.weight";
  let arguments = (ins FlatSymbolRefAttr:$weight);
  let results = (outs Plan_Buffer:$buffer);
  let assemblyFormat = "$weight attr-dict `:` type($buffer)";
}

def Plan_StateRefOp : Plan_Op<"state_ref", [HasParent<"DeviceOp">]> {
  let summary = "Reads or, as a kernel's output, updates a plan.state";
  let arguments = (ins FlatSymbolRefAttr:$state);
  let results = (outs Plan_Buffer:$buffer);
  let assemblyFormat = "$state attr-dict `:` type($buffer)";
}

def Plan_ViewOp : Plan_Op<"view", [HasParent<"DeviceOp">]> {
  let summary = "Reinterprets a buffer, or a contiguous part of it";
  let description = [{
    The result is the source's bytes from `byte_offset` on, as many as its
    type holds: a reshape (offset 0, same size) or a contiguous slice (a
    range of leading rows), which then moves no data. The offset is a
    multiple of the arena's 64-byte alignment, so a view is as aligned as
    any buffer.
  }];
  let arguments = (ins Plan_Buffer:$source,
                       DefaultValuedAttr<I64Attr, "0">:$byte_offset);
  let results = (outs Plan_Buffer:$buffer);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($buffer)";
  let hasVerifier = 1;
}

def Plan_LoadInputOp : Plan_Op<"load_input", [HasParent<"DeviceOp">]> {
  let summary = "Copies bytes [offset, offset + size) of an input in";
  let arguments = (ins FlatSymbolRefAttr:$input, I64Attr:$host_offset,
                       Plan_Buffer:$target);
  let assemblyFormat = "$input `[` $host_offset `]` `into` $target attr-dict `:` type($target)";
}

def Plan_StoreOutputOp : Plan_Op<"store_output", [HasParent<"DeviceOp">]> {
  let summary = "Copies a buffer out to bytes [offset, ...) of an output";
  let arguments = (ins Plan_Buffer:$source, FlatSymbolRefAttr:$output,
                       I64Attr:$host_offset);
  let assemblyFormat = "$source `into` $output `[` $host_offset `]` attr-dict `:` type($source)";
}

def Plan_KernelOp : Plan_Op<"kernel", [HasParent<"DeviceOp">,
    AttrSizedOperandSegments]> {
  let summary = "Runs a named kernel from inputs into its outputs";
  let description = [{
    Outputs are freshly allocated buffers, or plan.state_refs that the
    kernel updates in place (an optimizer step reads a parameter and
    writes it back). `stream` marks a kernel of a region whose branches
    run concurrently (partc-assign-streams): the stream of its branch.
  }];
  let arguments = (ins StrAttr:$kernel, DictionaryAttr:$params,
                       Variadic<Plan_Buffer>:$inputs,
                       Variadic<Plan_Buffer>:$outputs,
                       OptionalAttr<I64Attr>:$micro_batch,
                       OptionalAttr<ConfinedAttr<I64Attr,
                           [IntMinValue<0>, IntMaxValue<3>]>>:$stream);
  let assemblyFormat = [{
    $kernel `(` $inputs `)` `->` `(` $outputs `)` attr-dict `:`
    functional-type($inputs, $outputs)
  }];
}

def Plan_TransportAttr : ConfinedAttr<StrAttr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::StringAttr>($_self).getValue() == \"nccl\"">,
    "a transport other than peer copies (nccl)">]>;

def Plan_SendOp : Plan_Op<"send", [HasParent<"DeviceOp">]> {
  let summary = "Marks a buffer ready for channel `channel` to device `target`";
  let description = [{
    The channel's bytes move by a device-to-device copy unless `transport`
    says "nccl": a NCCL send and receive pair.
  }];
  let arguments = (ins Plan_Buffer:$source, I64Attr:$channel, I64Attr:$target,
                       OptionalAttr<Plan_TransportAttr>:$transport);
  let assemblyFormat = "$source `to` $target `channel` $channel attr-dict `:` type($source)";
}

def Plan_RecvOp : Plan_Op<"recv", [HasParent<"DeviceOp">]> {
  let summary = "Waits for channel `channel` and copies its buffer in";
  let arguments = (ins Plan_Buffer:$target, I64Attr:$channel, I64Attr:$source);
  let assemblyFormat = "$target `from` $source `channel` $channel attr-dict `:` type($target)";
}

def Plan_WaitConsumedOp : Plan_Op<"wait_consumed", [HasParent<"DeviceOp">]> {
  let summary = "Waits until the receiver of `channel` has copied the data";
  let arguments = (ins I64Attr:$channel);
  let assemblyFormat = "$channel attr-dict";
}

def Plan_AllReduceOp : Plan_Op<"all_reduce",
    [HasParent<"DeviceOp">, AttrSizedOperandSegments]> {
  let summary = "This device's part of the means of buffers over `devices`";
  let description = [{
    Every device of `devices` runs the op of `group` once; when all have
    reached it, each gets in each `targets` buffer the mean of all their
    buffers at the same place of `sources` (summed in the order of
    `devices`), and none goes on until every device has read them all.
    Several pairs are a bucket, exchanged as one collective.
  }];
  let arguments = (ins Variadic<Plan_Buffer>:$sources,
                       Variadic<Plan_Buffer>:$targets, I64Attr:$group,
                       DenseI64ArrayAttr:$devices);
  let assemblyFormat = [{
    $sources `into` $targets `group` $group `devices` $devices attr-dict `:`
    type($sources) `->` type($targets)
  }];
  let hasVerifier = 1;
}

#endif // PARTC_PLAN_OPS
