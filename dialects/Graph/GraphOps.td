//===- GraphOps.td - partc graph ops -----------------------------*- tablegen -*-===//
//
// Every op infers its result types (InferTypeOpInterface), so the importer,
// micro-batch cloning and the verifier share one definition of each op's
// shape rule. Every op is Pure and can be folded when all of its operands are
// constants (ConstantEvaluable evaluates it with the runtime's CPU kernels).
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_GRAPH_OPS
#define PARTC_GRAPH_OPS

include "dialects/Graph/GraphBase.td"
include "dialects/Graph/GraphInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def ConstantEvaluable : NativeOpTrait<"ConstantEvaluable"> {
  let cppNamespace = "::mlir::partc::graph";
}

/// An op that keeps the element of the result at each index apart from
/// the others: each depends only on the operands' elements at that index
/// after numpy broadcasting.
def Graph_Elementwise : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::mlir::partc::graph";
}

/// An op with a reverse-mode rule (Gradients.cpp).
def Graph_Differentiable : DeclareOpInterfaceMethods<Graph_GradientOpInterface>;

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic,
         !listconcat(traits, [Pure,
                              DeclareOpInterfaceMethods<InferTypeOpInterface>])> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

/// An op that becomes a kernel invocation, with the default cost model.
class Graph_ComputeOp<string mnemonic, list<Trait> traits = []>
    : Graph_Op<mnemonic, !listconcat(traits, [ConstantEvaluable,
                                              Graph_CostOpInterface])>;

def Graph_Tensor : StaticShapeTensorOf<[AnyType]>;

/// An activation applied in the producer's epilogue (partc-fuse-activations).
def Graph_ActivationAttr : ConfinedAttr<StrAttr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::StringAttr>($_self).getValue() == \"relu\"">,
    "a fused activation (relu)">]>;
/// A convolution's epilogue also takes SiLU, x * sigmoid(x) (EfficientNet's
/// and RegNet's activation).
def Graph_ConvActivationAttr : ConfinedAttr<StrAttr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::StringAttr>($_self).getValue() == \"relu\" || "
          "::llvm::cast<::mlir::StringAttr>($_self).getValue() == \"silu\"">,
    "a fused activation (relu or silu)">]>;
/// A product's epilogue also takes Gelu's tanh form (cuBLASLt's GELU
/// epilogue).
def Graph_ProductActivationAttr : ConfinedAttr<StrAttr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::StringAttr>($_self).getValue() == \"relu\" || "
          "::llvm::cast<::mlir::StringAttr>($_self).getValue() == "
          "\"gelu_tanh\"">,
    "a fused activation (relu or gelu_tanh)">]>;

//===----------------------------------------------------------------------===//
// Constants, placement and views
//===----------------------------------------------------------------------===//

def Graph_ConstantOp : Op<Graph_Dialect, "constant",
    [ConstantLike, Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "A constant tensor (weights and folded shape arithmetic)";
  let description = [{
    Weights are `dense_resource` blobs so that large models are not copied
    into the attribute uniquer; small folded values are `dense`.

    ```mlir
    %w = graph.constant {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Graph_Tensor:$output);
  let hasFolder = 1;
  let assemblyFormat = "attr-dict `:` functional-type(operands, results)";
}

def Graph_TransferOp : Graph_Op<"transfer", [Graph_CostOpInterface]> {
  let summary = "Moves a tensor from device `source` to device `target`";
  let description = [{
    Placed on the target device (its `graph.device` equals `target`). The
    plan lowering turns it into a send on the source and a receive on the
    target.
  }];
  let arguments = (ins Graph_Tensor:$input, I64Attr:$source, I64Attr:$target);
  let results = (outs Graph_Tensor:$output);
  let hasVerifier = 1;
}

def Graph_IdentityOp : Graph_Op<"identity", [ConstantEvaluable,
    Graph_CostOpInterface, Graph_Elementwise, Graph_Differentiable]> {
  let summary = "Identity (also ONNX Dropout in inference)";
  let arguments = (ins Graph_Tensor:$input);
  let results = (outs Graph_Tensor:$output);
  let hasFolder = 1;
}

def Graph_ReshapeOp : Graph_ComputeOp<"reshape", [Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface, ["sliceBatch"]>]> {
  let summary = "Reshape to a static shape (also Flatten, Squeeze, Unsqueeze)";
  let description = [{
    Lowered to a view of its operand's buffer; no data moves.
  }];
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs Graph_Tensor:$output);
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

/// An element-wise op; the importer translates the ONNX operator
/// `onnxType` to it generically where `onnxType` is set (operands in order,
/// ONNX attributes to attributes of the same name, defaults from here).
class Graph_ElementwiseOp<string mnemonic, string onnxType,
                          list<Trait> traits = []>
    : Graph_ComputeOp<mnemonic, !listconcat(traits, [Graph_Elementwise])> {
  let extraClassDeclaration = !if(!empty(onnxType), "",
      "static constexpr ::llvm::StringLiteral kOnnxOpType = \"" # onnxType #
      "\";");
}

/// f(x) per element, of the operand's type. The formula is the struct of
/// the same kernel name in runtime/kernels/ElementwiseOps.h, which the
/// CPU and GPU kernels and fused chains share; its float attributes are the
/// struct's parameters.
class Graph_MathOp<string mnemonic, string onnxType, string doc,
                   list<Trait> traits = []>
    : Graph_ElementwiseOp<mnemonic, onnxType, traits> {
  let summary = doc;
  let arguments = (ins Graph_Tensor:$input);
  let results = (outs Graph_Tensor:$output);
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, ::std::optional<::mlir::Location> loc,
        ::mlir::ValueRange operands, ::mlir::DictionaryAttr,
        ::mlir::OpaqueProperties, ::mlir::RegionRange,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return inferSameType(loc, operands, types);
    }
  }];
}

/// The same shape-preserving rule for ops that are not element-wise
/// (global pooling, log-softmax) lives in ShapeInference.cpp.
class Graph_UnaryOp<string mnemonic, string doc, list<Trait> traits = []>
    : Graph_ComputeOp<mnemonic, traits> {
  let summary = doc;
  let arguments = (ins Graph_Tensor:$input);
  let results = (outs Graph_Tensor:$output);
}

def Graph_ReluOp : Graph_MathOp<"relu", "Relu", "max(x, 0)",
    [Graph_Differentiable]>;
def Graph_SigmoidOp : Graph_MathOp<"sigmoid", "Sigmoid", "1 / (1 + exp(-x))",
    [Graph_Differentiable]>;
def Graph_TanhOp : Graph_MathOp<"tanh", "Tanh", "Hyperbolic tangent",
    [Graph_Differentiable]>;
def Graph_ErfOp : Graph_MathOp<"erf", "Erf", "Error function",
    [Graph_Differentiable]>;
def Graph_SqrtOp : Graph_MathOp<"sqrt", "Sqrt", "Square root",
    [Graph_Differentiable]>;
def Graph_NegOp : Graph_MathOp<"neg", "Neg", "Negation",
    [Graph_Differentiable]>;
def Graph_ExpOp : Graph_MathOp<"exp", "Exp", "Exponential",
    [Graph_Differentiable]>;
def Graph_LogOp : Graph_MathOp<"log", "Log", "Natural logarithm",
    [Graph_Differentiable]>;
def Graph_AbsOp : Graph_MathOp<"abs", "Abs", "Absolute value",
    [Graph_Differentiable]>;
def Graph_ReciprocalOp : Graph_MathOp<"reciprocal", "Reciprocal", "1 / x",
    [Graph_Differentiable]>;
def Graph_FloorOp : Graph_MathOp<"floor", "Floor", "Round down",
    [Graph_Differentiable]>;
def Graph_CeilOp : Graph_MathOp<"ceil", "Ceil", "Round up",
    [Graph_Differentiable]>;
def Graph_RoundOp : Graph_MathOp<"round", "Round", "Round half to even",
    [Graph_Differentiable]>;
def Graph_SinOp : Graph_MathOp<"sin", "Sin", "Sine",
    [Graph_Differentiable]>;
def Graph_CosOp : Graph_MathOp<"cos", "Cos", "Cosine",
    [Graph_Differentiable]>;
def Graph_TanOp : Graph_MathOp<"tan", "Tan", "Tangent",
    [Graph_Differentiable]>;
def Graph_AsinOp : Graph_MathOp<"asin", "Asin", "Arcsine",
    [Graph_Differentiable]>;
def Graph_AcosOp : Graph_MathOp<"acos", "Acos", "Arccosine",
    [Graph_Differentiable]>;
def Graph_AtanOp : Graph_MathOp<"atan", "Atan", "Arctangent",
    [Graph_Differentiable]>;
def Graph_SinhOp : Graph_MathOp<"sinh", "Sinh", "Hyperbolic sine",
    [Graph_Differentiable]>;
def Graph_CoshOp : Graph_MathOp<"cosh", "Cosh", "Hyperbolic cosine",
    [Graph_Differentiable]>;
def Graph_AsinhOp : Graph_MathOp<"asinh", "Asinh", "Inverse hyperbolic sine",
    [Graph_Differentiable]>;
def Graph_AcoshOp : Graph_MathOp<"acosh", "Acosh",
    "Inverse hyperbolic cosine",
    [Graph_Differentiable]>;
def Graph_AtanhOp : Graph_MathOp<"atanh", "Atanh",
    "Inverse hyperbolic tangent",
    [Graph_Differentiable]>;
def Graph_SignOp : Graph_MathOp<"sign", "Sign", "Sign",
    [Graph_Differentiable]>;
def Graph_NotOp : Graph_MathOp<"not", "Not", "Logical not">;
def Graph_SoftplusOp : Graph_MathOp<"softplus", "Softplus", "log(1 + exp(x))",
    [Graph_Differentiable]>;
def Graph_HardSwishOp : Graph_MathOp<"hard_swish", "HardSwish",
                                     "x * hard_sigmoid(x)",
    [Graph_Differentiable]>;
def Graph_MishOp : Graph_MathOp<"mish", "Mish", "x * tanh(softplus(x))",
    [Graph_Differentiable]>;
def Graph_SoftsignOp : Graph_MathOp<"softsign", "Softsign", "x / (1 + |x|)",
    [Graph_Differentiable]>;

def Graph_GeluOp : Graph_MathOp<"gelu", "Gelu", "Gaussian error linear unit",
    [Graph_Differentiable]> {
  let arguments = (ins Graph_Tensor:$input,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
}
def Graph_LeakyReluOp : Graph_MathOp<"leaky_relu", "LeakyRelu",
                                     "x >= 0 ? x : alpha * x",
    [Graph_Differentiable]> {
  let arguments = (ins Graph_Tensor:$input,
                       DefaultValuedAttr<F64Attr, "0.01">:$alpha);
}
def Graph_EluOp : Graph_MathOp<"elu", "Elu",
                               "x >= 0 ? x : alpha * (exp(x) - 1)",
    [Graph_Differentiable]> {
  let arguments = (ins Graph_Tensor:$input,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha);
}
def Graph_HardSigmoidOp : Graph_MathOp<"hard_sigmoid", "HardSigmoid",
                                       "clamp(alpha * x + beta, 0, 1)",
    [Graph_Differentiable]> {
  let arguments = (ins Graph_Tensor:$input,
                       DefaultValuedAttr<F64Attr, "0.2">:$alpha,
                       DefaultValuedAttr<F64Attr, "0.5">:$beta);
}
def Graph_ShrinkOp : Graph_MathOp<"shrink", "Shrink",
    "x < -lambd ? x + bias : (x > lambd ? x - bias : 0)",
    [Graph_Differentiable]> {
  let arguments = (ins Graph_Tensor:$input,
      DefaultValuedAttr<F64Attr, "0.0">:$bias,
      DefaultValuedAttr<F64Attr, "0.5">:$lambd);
}
def Graph_SeluOp : Graph_MathOp<"selu", "Selu",
    "x > 0 ? gamma * x : gamma * (alpha * exp(x) - alpha)",
    [Graph_Differentiable]> {
  let arguments = (ins Graph_Tensor:$input,
      DefaultValuedAttr<F64Attr, "1.67326319217681884765625">:$alpha,
      DefaultValuedAttr<F64Attr, "1.05070102214813232421875">:$gamma);
}
def Graph_CeluOp : Graph_MathOp<"celu", "Celu",
    "max(0, x) + min(0, alpha * (exp(x / alpha) - 1))",
    [Graph_Differentiable]> {
  let arguments = (ins Graph_Tensor:$input,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha);
}
def Graph_ThresholdedReluOp : Graph_MathOp<"thresholded_relu",
    "ThresholdedRelu", "x > alpha ? x : 0", [Graph_Differentiable]> {
  let arguments = (ins Graph_Tensor:$input,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha);
}
/// Clip's bounds arrive as inputs from opset 11 on, so its import is not
/// generic.
def Graph_ClipOp : Graph_MathOp<"clip", "", "clamp(x, min, max)",
    [Graph_Differentiable]> {
  let arguments = (ins Graph_Tensor:$input,
      DefaultValuedAttr<F64Attr, "-std::numeric_limits<double>::infinity()">:$min,
      DefaultValuedAttr<F64Attr, "std::numeric_limits<double>::infinity()">:$max);
}

def Graph_IsNanOp : Graph_ElementwiseOp<"is_nan", "IsNaN"> {
  let summary = "x != x (i1 result)";
  let description = [{
    PyTorch's attention exports use it to zero the rows of a softmax whose
    every score was masked to -inf (ONNX IsNaN).
  }];
  let arguments = (ins Graph_Tensor:$input);
  let results = (outs Graph_Tensor:$output);
}
def Graph_IsInfOp : Graph_ElementwiseOp<"is_inf", "IsInf"> {
  let summary = "Infinity test, per sign (i1 result; ONNX IsInf)";
  let arguments = (ins Graph_Tensor:$input,
                       DefaultValuedAttr<BoolAttr, "true">:$detect_positive,
                       DefaultValuedAttr<BoolAttr, "true">:$detect_negative);
  let results = (outs Graph_Tensor:$output);
}

/// a op b per element with numpy broadcasting; comparisons and logic give
/// i1 (`predicate`). The float formula of arithmetic ops is the struct of
/// the same kernel name in runtime/kernels/ElementwiseOps.h.
class Graph_BinaryOp<string mnemonic, string onnxType, string doc,
                     bit predicate = 0, list<Trait> traits = []>
    : Graph_ElementwiseOp<mnemonic, onnxType, traits> {
  let summary = doc # " with numpy broadcasting";
  let arguments = (ins Graph_Tensor:$lhs, Graph_Tensor:$rhs);
  let results = (outs Graph_Tensor:$output);
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, ::std::optional<::mlir::Location> loc,
        ::mlir::ValueRange operands, ::mlir::DictionaryAttr,
        ::mlir::OpaqueProperties, ::mlir::RegionRange,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return inferBroadcastType(loc, operands, }] # !if(predicate, "true",
                                                            "false") # [{,
                                types);
    }
  }];
}

// Binary ops have importers of their own: opsets before 7 broadcast by an
// attribute, Max, Min and Sum are variadic, Pow and Mod have integer rules.
def Graph_AddOp : Graph_BinaryOp<"add", "", "Addition", 0,
                                 [Graph_Differentiable]> {
  let arguments = (ins Graph_Tensor:$lhs, Graph_Tensor:$rhs,
                       OptionalAttr<Graph_ActivationAttr>:$activation);
}
def Graph_SubOp : Graph_BinaryOp<"sub", "", "Subtraction", 0,
                                 [Graph_Differentiable]>;
def Graph_MulOp : Graph_BinaryOp<"mul", "", "Multiplication", 0,
                                 [Graph_Differentiable]>;
def Graph_DivOp : Graph_BinaryOp<"div", "", "Division", 0,
                                 [Graph_Differentiable]>;
def Graph_PowOp : Graph_BinaryOp<"pow", "", "Power", 0,
                                 [Graph_Differentiable]>;
def Graph_MinOp : Graph_BinaryOp<"min", "", "Minimum", 0, [Graph_Differentiable]>;
def Graph_MaxOp : Graph_BinaryOp<"max", "", "Maximum", 0, [Graph_Differentiable]>;
def Graph_ModOp : Graph_BinaryOp<"mod", "", "Modulo (sign of the divisor)">;
def Graph_EqualOp : Graph_BinaryOp<"equal", "", "Equality (i1 result)", 1>;
def Graph_LessOp : Graph_BinaryOp<"less", "", "Less than (i1 result)", 1>;
def Graph_GreaterOp : Graph_BinaryOp<"greater", "",
                                     "Greater than (i1 result)", 1>;
def Graph_LessOrEqualOp : Graph_BinaryOp<"less_or_equal", "",
                                         "<= (i1 result)", 1>;
def Graph_GreaterOrEqualOp : Graph_BinaryOp<"greater_or_equal", "", ">= (i1 result)", 1>;
def Graph_AndOp : Graph_BinaryOp<"and", "", "Logical and", 1>;
def Graph_OrOp : Graph_BinaryOp<"or", "", "Logical or", 1>;
def Graph_XorOp : Graph_BinaryOp<"xor", "", "Logical xor", 1>;

def Graph_FusedElementwiseOp : Graph_Op<"fused_elementwise", [ConstantEvaluable,
    Graph_Elementwise,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["estimateFlops"]>]> {
  let summary = "A chain of f32 element-wise ops run as one kernel";
  let description = [{
    Made by partc-fuse-elementwise. `steps` names each step's operation (a
    unary or binary op's mnemonic, or `gelu_tanh`; the steps of
    runtime/kernels/ElementwiseOps.h); `args` lists every step's operands
    in order: k >= 0 is the op's operand k, k < 0 the result of step -k-1;
    `params` the parameters of the steps that take any (leaky_relu's
    alpha, clip's bounds), in step order. The last step's result is the
    op's. Operands broadcast numpy-style to the result's shape, so one pass
    over memory replaces one per step.

    With `concat_parts = m` (made by partc-fuse-concat), the program's
    input 0 is the concatenation of the first m operands along the last
    axis, of the result's shape, and program input k > 0 is operand
    m - 1 + k: the chain reads the parts where they lie, and the
    concatenation is never written.

    ```mlir
    // 0.5 * x * (1 + erf(x / sqrt(2)))
    %y = graph.fused_elementwise %x, %sqrt2, %one, %half
           {steps = ["div", "erf", "add", "mul", "mul"],
            args = array<i64: 0, 1, -1, -2, 2, 0, -3, -4, 3>}
           : (tensor<8x128xf32>, tensor<f32>, tensor<f32>, tensor<f32>)
             -> tensor<8x128xf32>
    ```
  }];
  let arguments = (ins Variadic<Graph_Tensor>:$inputs, StrArrayAttr:$steps,
                       DenseI64ArrayAttr:$args,
                       OptionalAttr<DenseF64ArrayAttr>:$params,
                       OptionalAttr<I64Attr>:$concat_parts);
  let results = (outs Graph_Tensor:$output);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Operands concatenated into the program's input 0 (1 without
    /// concat_parts).
    int64_t getNumConcatParts() {
      std::optional<uint64_t> parts = getConcatParts();
      return parts ? static_cast<int64_t>(*parts) : 1;
    }
    /// The program's inputs: the operands, the parts counted once.
    int64_t getNumProgramInputs() {
      return static_cast<int64_t>(getInputs().size()) - getNumConcatParts() + 1;
    }
  }];
}

def Graph_WhereOp : Graph_ElementwiseOp<"where", "Where",
                                        [Graph_Differentiable]> {
  let summary = "cond ? x : y with broadcasting";
  let arguments = (ins Graph_Tensor:$condition, Graph_Tensor:$x, Graph_Tensor:$y);
  let results = (outs Graph_Tensor:$output);
}

def Graph_CastOp : Graph_ElementwiseOp<"cast", ""> {
  let summary = "Element type conversion";
  let arguments = (ins Graph_Tensor:$input, TypeAttr:$to);
  let results = (outs Graph_Tensor:$output);
}

def Graph_ExpandOp : Graph_ComputeOp<"expand", [Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface, ["sliceBatch"]>]> {
  let summary = "Broadcast to a static shape";
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs Graph_Tensor:$output);
}

//===----------------------------------------------------------------------===//
// Linear algebra, convolution, pooling, normalization
//===----------------------------------------------------------------------===//

def Graph_MatMulOp : Graph_Op<"matmul", [ConstantEvaluable, Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["estimateFlops"]>]> {
  let summary = "numpy.matmul (batched, broadcasting)";
  let description = [{
    `epilogue` holds an optional `bias` of the result's last extent (rank
    1, or leading extents of 1), added to every row, and after it an
    optional `addend` of the result's type (a residual connection); the
    optional activation (relu, or gelu_tanh: Gelu's tanh form) comes last.
    partc-fuse-activations moves them here from `add`, `relu` and `gelu`
    ops so that GEMM libraries run them in their epilogue.
  }];
  let arguments = (ins Graph_Tensor:$lhs, Graph_Tensor:$rhs,
                       Variadic<Graph_Tensor>:$epilogue,
                       OptionalAttr<Graph_ProductActivationAttr>:$activation);
  let results = (outs Graph_Tensor:$output);
  let extraClassDeclaration = [{
    ::mlir::Value getBias() {
      return getEpilogue().empty() ? ::mlir::Value() : getEpilogue()[0];
    }
    ::mlir::Value getAddend() {
      return getEpilogue().size() < 2 ? ::mlir::Value() : getEpilogue()[1];
    }
  }];
}

def Graph_StridedMatMulOp : Graph_Op<"strided_matmul", [ConstantEvaluable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface, ["sliceBatch"]>,
    DeclareOpInterfaceMethods<Graph_CostOpInterface,
                              ["estimateFlops", "estimateBytes"]>]> {
  let summary = "alpha * matmul of strided views, stored permuted";
  let description = [{
    Made by partc-fold-matmul-views from a matmul whose operands are slices,
    reshapes and transposes of other tensors and whose result is scaled,
    transposed and reshaped, as in attention's head split and merge. Each
    operand is read through a view of its buffer: element i of the logical
    operand (shape `lhs_shape`) lies at `lhs_offset` + sum of i_d *
    `lhs_strides`[d]. The operands have one rank; batch extents broadcast.
    The logical result [batch..., M, N] is scaled by `alpha`, permuted by
    `perm` and stored contiguously with shape `shape`. GEMM libraries read
    the views in place, so every operand matrix and the result must have
    its rows or its columns contiguous (runtime/kernels/StridedMatMul.h).

    ```mlir
    // q @ k^T / 8 for q, k: heads of a [2, 16, 3 * 64] projection, 4 heads.
    %s = graph.strided_matmul %qkv, %qkv {
           lhs_shape = array<i64: 2, 4, 16, 16>,
           lhs_strides = array<i64: 3072, 16, 192, 1>, lhs_offset = 0 : i64,
           rhs_shape = array<i64: 2, 4, 16, 16>,
           rhs_strides = array<i64: 3072, 16, 1, 192>, rhs_offset = 64 : i64,
           perm = array<i64: 0, 1, 2, 3>, shape = array<i64: 2, 4, 16, 16>,
           alpha = 1.250000e-01 : f64}
         : (tensor<2x16x192xf32>, tensor<2x16x192xf32>) -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$lhs, Graph_Tensor:$rhs,
                       DenseI64ArrayAttr:$lhs_shape,
                       DenseI64ArrayAttr:$lhs_strides, I64Attr:$lhs_offset,
                       DenseI64ArrayAttr:$rhs_shape,
                       DenseI64ArrayAttr:$rhs_strides, I64Attr:$rhs_offset,
                       DenseI64ArrayAttr:$perm, DenseI64ArrayAttr:$shape,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha);
  let results = (outs Graph_Tensor:$output);
  let extraClassDeclaration = [{
    /// Bytes that operand `index` (0: lhs, 1: rhs) reads through its view.
    int64_t viewBytes(unsigned index);
  }];
}

def Graph_AttentionOp : Graph_Op<"attention", [
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "softmax(scale * q k^T + bias) v over strided views, fused";
  let description = [{
    Made by partc-fuse-attention from a graph.strided_matmul of queries and
    transposed keys, the graph.softmax of its result along the keys (with
    its mask `bias` and `nan_to_zero`) and the graph.strided_matmul of
    that softmax and the values, so that the scores never reach memory.
    `q` is read through the view `q_shape` [batch..., M, D] (offset and
    strides as graph.strided_matmul's), `k` through `k_shape` [batch...,
    D, N] (the keys transposed), `v` through `v_shape` [batch..., N, Dv];
    batch extents broadcast, and `bias` broadcasts to the scores [batch...,
    M, N]. The logical result [batch..., M, Dv] is permuted by `perm` and
    stored contiguously with shape `shape`. Runs after placement, on one
    device's ops (the batch is split before), in inference plans. `causal`
    hides every key whose index exceeds its query's (-inf added to those
    scores, whatever `bias` holds there): partc-fuse-attention sets it
    where it proved the mask -inf there (a decoder's mask), and may then
    drop the mask's lower triangle, so kernels skip those scores and read
    a padding mask per key instead of per query.

    ```mlir
    // 4 heads of 16 of a [32, 3 * 64] projection of 2 sequences of 16.
    %o = graph.attention %qkv, %qkv, %qkv, %mask {
           q_shape = array<i64: 2, 4, 16, 16>,
           q_strides = array<i64: 3072, 16, 192, 1>, q_offset = 0 : i64,
           k_shape = array<i64: 2, 4, 16, 16>,
           k_strides = array<i64: 3072, 16, 1, 192>, k_offset = 64 : i64,
           v_shape = array<i64: 2, 4, 16, 16>,
           v_strides = array<i64: 3072, 16, 192, 1>, v_offset = 128 : i64,
           perm = array<i64: 0, 2, 1, 3>, shape = array<i64: 32, 64>,
           scale = 2.500000e-01 : f64, nan_to_zero = true}
         : (tensor<32x192xbf16>, tensor<32x192xbf16>, tensor<32x192xbf16>,
            tensor<2x1x16x16xbf16>) -> tensor<32x64xbf16>
    ```
  }];
  let arguments = (ins Graph_Tensor:$q, Graph_Tensor:$k, Graph_Tensor:$v,
                       Optional<Graph_Tensor>:$bias,
                       DenseI64ArrayAttr:$q_shape,
                       DenseI64ArrayAttr:$q_strides, I64Attr:$q_offset,
                       DenseI64ArrayAttr:$k_shape,
                       DenseI64ArrayAttr:$k_strides, I64Attr:$k_offset,
                       DenseI64ArrayAttr:$v_shape,
                       DenseI64ArrayAttr:$v_strides, I64Attr:$v_offset,
                       DenseI64ArrayAttr:$perm, DenseI64ArrayAttr:$shape,
                       F64Attr:$scale, BoolAttr:$nan_to_zero,
                       DefaultValuedAttr<BoolAttr, "false">:$causal);
  let results = (outs Graph_Tensor:$output);
}

def Graph_GemmOp : Graph_Op<"gemm", [ConstantEvaluable, Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["estimateFlops"]>]> {
  let summary = "alpha * op(A) * op(B) + beta * C";
  let description = [{
    The optional activation (relu, or gelu_tanh: Gelu's tanh form) applies
    to the whole result; partc-fuse-activations moves it here.
  }];
  let arguments = (ins Graph_Tensor:$a, Graph_Tensor:$b,
                       Optional<Graph_Tensor>:$c,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha,
                       DefaultValuedAttr<F64Attr, "1.0">:$beta,
                       DefaultValuedAttr<I64Attr, "0">:$trans_a,
                       DefaultValuedAttr<I64Attr, "0">:$trans_b,
                       OptionalAttr<Graph_ProductActivationAttr>:$activation);
  let results = (outs Graph_Tensor:$output);
}

def Graph_ConvOp : Graph_Op<"conv", [ConstantEvaluable, Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["estimateFlops"]>]> {
  let summary = "N-d convolution, explicit pads [begin..., end...]";
  let description = [{
    Channels first (input NC..., weight OI...) unless `channels_last`, where
    the input and result are N...C and the weight O...I (2-D: NHWC and
    OHWI), the layout tensor-core convolutions read without a transpose.

    `epilogue` holds an optional bias [O] and, after it, an optional
    `addend` with the result's shape (a residual connection fused by
    partc-fuse-activations); both are added before the activation (relu,
    or silu: x * sigmoid(x)).
  }];
  let arguments = (ins Graph_Tensor:$input, Graph_Tensor:$weight,
                       Variadic<Graph_Tensor>:$epilogue,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       UnitAttr:$channels_last,
                       OptionalAttr<Graph_ConvActivationAttr>:$activation);
  let results = (outs Graph_Tensor:$output);
  let extraClassDeclaration = [{
    ::mlir::Value getBias() {
      return getEpilogue().empty() ? ::mlir::Value() : getEpilogue()[0];
    }
    ::mlir::Value getAddend() {
      return getEpilogue().size() < 2 ? ::mlir::Value() : getEpilogue()[1];
    }
  }];
}

class Graph_PoolOp<string mnemonic, string doc, list<Trait> traits = []>
    : Graph_ComputeOp<mnemonic, traits> {
  let summary = doc # " (channels first unless `channels_last`)";
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       DefaultValuedAttr<I64Attr, "0">:$count_include_pad,
                       UnitAttr:$channels_last);
  let results = (outs Graph_Tensor:$output);
}
def Graph_MaxPoolOp : Graph_PoolOp<"max_pool", "Max pooling",
                                    [Graph_Differentiable]>;

def Graph_MaxPoolWithIndicesOp : Graph_PoolOp<"max_pool_with_indices",
    "Max pooling that also returns where each maximum came from",
    [DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let description = [{
    The second result holds, for each output element, the flat index of its
    maximum in the whole input (batch and channel included), as ONNX
    MaxPool's Indices output: spatial positions row-major with
    storage_order 0, column-major with 1.
  }];
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       DefaultValuedAttr<I64Attr, "0">:$count_include_pad,
                       DefaultValuedAttr<I64Attr, "0">:$storage_order);
  let results = (outs Graph_Tensor:$output, Graph_Tensor:$indices);
}
def Graph_AvgPoolOp : Graph_PoolOp<"avg_pool", "Average pooling",
                                    [Graph_Differentiable]>;

def Graph_GlobalAvgPoolOp : Graph_UnaryOp<"global_avg_pool",
    "Mean over all spatial dimensions", [Graph_Differentiable]>;
def Graph_GlobalMaxPoolOp : Graph_UnaryOp<"global_max_pool",
    "Max over all spatial dimensions", [Graph_Differentiable]>;

def Graph_BatchNormOp : Graph_ComputeOp<"batch_norm", [
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "Batch normalization over channel dimension 1";
  let description = [{
    Normalizes with the running `mean` and `variance` (inference). With
    `training_mode` (ONNX's attribute, set by an export made for
    training) the model asks for the batch's own statistics instead:
    partc-prepare-training turns such a norm into graph.batch_norm_train,
    so no kernel ever sees the attribute.
  }];
  let arguments = (ins Graph_Tensor:$input, Graph_Tensor:$scale,
                       Graph_Tensor:$bias, Graph_Tensor:$mean,
                       Graph_Tensor:$variance,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon,
                       UnitAttr:$training_mode,
                       OptionalAttr<F64Attr>:$momentum);
  let results = (outs Graph_Tensor:$output);
}

def Graph_LayerNormOp : Graph_ComputeOp<"layer_norm", [Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "Normalization over dimensions [axis, rank)";
  let arguments = (ins Graph_Tensor:$input, Graph_Tensor:$scale,
                       Optional<Graph_Tensor>:$bias, I64Attr:$axis,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Graph_Tensor:$output);
}

def Graph_RmsNormOp : Graph_ComputeOp<"rms_norm", [Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "Root-mean-square normalization over dimensions [axis, rank)";
  let description = [{
    x / sqrt(mean(x^2) + epsilon), times `scale` (broadcast to the
    normalized dimensions) where given: ONNX's RMSNormalization, and what
    partc-fuse-normalizations finds written out in Llama's and T5's
    exports.
  }];
  let arguments = (ins Graph_Tensor:$input, Optional<Graph_Tensor>:$scale,
                       I64Attr:$axis,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Graph_Tensor:$output);
}

def Graph_SoftmaxOp : Graph_ComputeOp<"softmax", [Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "Softmax along one axis";
  let description = [{
    With `bias`, the softmax of `input + bias`, `bias` broadcast to the
    input numpy-style: partc-fuse-activations folds an attention mask's add
    in here, which saves a pass over the attention matrix.

    With `nan_to_zero`, NaN results (a row whose every input is -inf) are
    0: PyTorch's exported attention zeroes them with IsNaN and Where, which
    partc-fuse-activations folds in here too.
  }];
  let arguments = (ins Graph_Tensor:$input, Optional<Graph_Tensor>:$bias,
                       I64Attr:$axis,
                       DefaultValuedAttr<BoolAttr, "false">:$nan_to_zero);
  let results = (outs Graph_Tensor:$output);
}
def Graph_LogSoftmaxOp : Graph_UnaryOp<"log_softmax",
    "Log-softmax along one axis",
    [DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>,
     Graph_Differentiable]> {
  let arguments = (ins Graph_Tensor:$input, I64Attr:$axis);
}

class Graph_ReduceOp<string mnemonic, string doc, list<Trait> traits = []>
    : Graph_ComputeOp<mnemonic, !listconcat(traits,
          [DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>])> {
  let summary = doc # " over sorted, non-negative `axes`";
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<I64Attr, "1">:$keepdims);
  let results = (outs Graph_Tensor:$output);
}
def Graph_ReduceSumOp : Graph_ReduceOp<"reduce_sum", "Sum",
                                       [Graph_Differentiable]>;
def Graph_ReduceMeanOp : Graph_ReduceOp<"reduce_mean", "Mean",
                                        [Graph_Differentiable]>;
def Graph_ReduceMaxOp : Graph_ReduceOp<"reduce_max", "Maximum",
                                       [Graph_Differentiable]>;
def Graph_ReduceMinOp : Graph_ReduceOp<"reduce_min", "Minimum",
                                       [Graph_Differentiable]>;
def Graph_ReduceProdOp : Graph_ReduceOp<"reduce_prod", "Product",
                                        [Graph_Differentiable]>;

/// Ops that work along one axis, each line of the input on its own.
class Graph_AxisOp<string mnemonic, list<Trait> traits = []>
    : Graph_ComputeOp<mnemonic, !listconcat(traits,
          [DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>])>;

class Graph_ArgReduceOp<string mnemonic, string which>
    : Graph_AxisOp<mnemonic> {
  let summary = "Index of the " # which # " along `axis` (ONNX Arg" # which # ")";
  let description = [{
    An i64 result. Ties go to the first index, or the last with
    `select_last_index`; a NaN counts as the extreme value, as in numpy.

    ```mlir
    %i = graph.arg_max %x {axis = 1 : i64, keepdims = 0 : i64,
                           select_last_index = 0 : i64}
           : (tensor<2x5xf32>) -> tensor<2xi64>
    ```
  }];
  let arguments = (ins Graph_Tensor:$input, I64Attr:$axis,
                       DefaultValuedAttr<I64Attr, "1">:$keepdims,
                       DefaultValuedAttr<I64Attr, "0">:$select_last_index);
  let results = (outs Graph_Tensor:$output);
}
def Graph_ArgMaxOp : Graph_ArgReduceOp<"arg_max", "Max">;
def Graph_ArgMinOp : Graph_ArgReduceOp<"arg_min", "Min">;

def Graph_CumSumOp : Graph_AxisOp<"cum_sum", [Graph_Differentiable]> {
  let summary = "Running sum along `axis` (ONNX CumSum)";
  let description = [{
    y[..., i, ...] = sum of x[..., j, ...] for j <= i (j < i when
    `exclusive`; j >= i, or j > i, when `reverse`).

    ```mlir
    %y = graph.cum_sum %x {axis = 1 : i64, exclusive = 0 : i64,
                           reverse = 0 : i64}
           : (tensor<2x5xf32>) -> tensor<2x5xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$input, I64Attr:$axis,
                       DefaultValuedAttr<I64Attr, "0">:$exclusive,
                       DefaultValuedAttr<I64Attr, "0">:$reverse);
  let results = (outs Graph_Tensor:$output);
}

def Graph_TopKOp : Graph_AxisOp<"top_k", [Graph_Differentiable]> {
  let summary = "The k largest (or smallest) elements along `axis` (ONNX TopK)";
  let description = [{
    Values and their i64 indices, sorted from the most extreme; equal values
    keep the order of their indices, and a NaN counts as larger than any
    number.

    ```mlir
    %v, %i = graph.top_k %x {axis = 1 : i64, k = 2 : i64, largest = 1 : i64}
               : (tensor<2x5xf32>) -> (tensor<2x2xf32>, tensor<2x2xi64>)
    ```
  }];
  let arguments = (ins Graph_Tensor:$input, I64Attr:$axis, I64Attr:$k,
                       DefaultValuedAttr<I64Attr, "1">:$largest);
  let results = (outs Graph_Tensor:$values, Graph_Tensor:$indices);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Graph_TransposeOp : Graph_ComputeOp<"transpose", [Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "Permutes dimensions";
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Graph_Tensor:$output);
}

def Graph_ConcatOp : Graph_ComputeOp<"concat", [Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "Concatenation along `axis`";
  let arguments = (ins Variadic<Graph_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Graph_Tensor:$output);
  // Of one tensor: that tensor (exporters write a key/value cache's
  // concatenation with an empty past so).
  let hasFolder = 1;
}

def Graph_SplitOp : Graph_ComputeOp<"split", [Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "Splits along `axis` into parts of the given `sizes`";
  let arguments = (ins Graph_Tensor:$input, I64Attr:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Graph_Tensor>:$outputs);
}

def Graph_SliceOp : Graph_ComputeOp<"slice", [Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface, ["sliceBatch"]>]> {
  let summary = "Strided slice with one normalized start/end/step per dimension";
  let description = [{
    `starts` are in range, `ends` are clamped (exclusive; -1 allowed for
    negative steps), so the result size per dimension is
    max(0, ceil((end - start) / step)).
  }];
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$steps);
  let results = (outs Graph_Tensor:$output);
}

def Graph_GatherOp : Graph_ComputeOp<"gather", [Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "numpy.take along `axis`";
  let arguments = (ins Graph_Tensor:$data, Graph_Tensor:$indices, I64Attr:$axis);
  let results = (outs Graph_Tensor:$output);
}

def Graph_GatherElementsOp : Graph_ComputeOp<"gather_elements", [
    Graph_Differentiable, DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "Elements of data picked along one axis (ONNX GatherElements)";
  let description = [{
    out[i] = data[i with its `axis` coordinate replaced by indices[i]]; the
    result has the indices' shape. Negative indices count from the end; an
    index out of range is an error when the kernel runs.

    ```mlir
    %y = graph.gather_elements %data, %idx {axis = 1 : i64}
           : (tensor<2x5xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$data, Graph_Tensor:$indices,
                       I64Attr:$axis);
  let results = (outs Graph_Tensor:$output);
}

def Graph_ResizeOp : Graph_ComputeOp<"resize", [Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface, ["sliceBatch"]>]> {
  let summary = "Nearest or (multi-)linear resampling (ONNX Resize)";
  let description = [{
    The result has extents `sizes`; `scales` holds output over input extent
    per dimension as the coordinate transformation reads it (ONNX's scales,
    or sizes over input extents where the model gave sizes). The semantics
    live in runtime/kernels/Resize.h, shared by both backends; cubic mode,
    tf_crop_and_resize and antialiasing are refused at import.

    ```mlir
    %y = graph.resize %x {sizes = array<i64: 1, 3, 8, 8>,
                          scales = array<f64: 1.0, 1.0, 2.0, 2.0>,
                          mode = "linear"}
           : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$sizes,
      DenseF64ArrayAttr:$scales,
      DefaultValuedStrAttr<StrAttr, "nearest">:$mode,
      DefaultValuedStrAttr<StrAttr, "half_pixel">:$coordinate_transformation_mode,
      DefaultValuedStrAttr<StrAttr, "round_prefer_floor">:$nearest_mode);
  let results = (outs Graph_Tensor:$output);
}

def Graph_GatherNdOp : Graph_ComputeOp<"gather_nd", [
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "ONNX GatherND: slices of `data` addressed by index tuples";
  let description = [{
    The last dimension of `indices` (k) addresses the first k dimensions of
    `data` after its `batch_dims` leading ones, which `indices` shares. The
    result is indices.shape[:-1] + data.shape[batch_dims + k:]. Negative
    indices count from the end.
  }];
  let arguments = (ins Graph_Tensor:$data, Graph_Tensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs Graph_Tensor:$output);
}

def Graph_ScatterNdOp : Graph_ComputeOp<"scatter_nd", [
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "ONNX ScatterND: a copy of `data` with slices replaced";
  let description = [{
    Each index tuple (the last dimension of `indices`, k of them) addresses
    a slice data.shape[k:] that the matching slice of `updates` replaces,
    or is combined with by `reduction` (add, mul, max, min). Updates apply
    in index order, so with `none` a repeated tuple keeps the last one.
  }];
  let arguments = (ins Graph_Tensor:$data, Graph_Tensor:$indices,
                       Graph_Tensor:$updates,
                       DefaultValuedStrAttr<StrAttr, "none">:$reduction);
  let results = (outs Graph_Tensor:$output);
}

def Graph_PadOp : Graph_ComputeOp<"pad", [Graph_Differentiable,
    DeclareOpInterfaceMethods<Graph_BatchRuleOpInterface>]> {
  let summary = "Pads with [begin..., end...] amounts";
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$pads,
                       DefaultValuedStrAttr<StrAttr, "constant">:$mode,
                       DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs Graph_Tensor:$output);
  // Padding by nothing is the input (PyTorch 1.x exports one before
  // DenseNet's average pools).
  let hasFolder = 1;
}

include "dialects/Graph/TrainingOps.td"

#endif // PARTC_GRAPH_OPS
