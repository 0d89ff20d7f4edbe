//===- ShapeInference.cpp - Result types of graph ops ---------------------===//
//
// One inferReturnTypes per op. The importer builds ops through these, the
// verifier checks against them and micro-batch cloning re-runs them with a
// smaller batch, so each rule exists exactly once.
//
//===----------------------------------------------------------------------===//
#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "runtime/Support.h"
#include "runtime/kernels/FusedElementwise.h"
#include "runtime/kernels/IndexTuples.h"
#include "runtime/kernels/Resize.h"
#include "runtime/kernels/StridedMatMul.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::partc::graph;

namespace {

using Types = SmallVectorImpl<Type>;
using Loc = std::optional<Location>;

RankedTensorType tensorOf(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

LogicalResult fail(Loc loc, const Twine &message) {
  return emitOptionalError(loc, message);
}

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string typeStr(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

std::optional<ArrayRef<int64_t>> intsAttr(DictionaryAttr attrs,
                                          StringRef name) {
  if (auto a = attrs.getAs<DenseI64ArrayAttr>(name))
    return a.asArrayRef();
  return std::nullopt;
}

int64_t intAttr(DictionaryAttr attrs, StringRef name, int64_t dflt) {
  if (auto a = attrs.getAs<IntegerAttr>(name))
    return a.getInt();
  return dflt;
}

LogicalResult requireOperands(Loc loc, ValueRange operands, size_t min,
                              size_t max) {
  if (operands.size() < min || operands.size() > max)
    return fail(loc, "expects " + Twine(min) + " to " + Twine(max) +
                         " operands, got " + Twine(operands.size()));
  for (Value v : operands)
    if (!tensorOf(v) || !tensorOf(v).hasStaticShape())
      return fail(loc, "operands must be statically shaped tensors");
  return success();
}

bool broadcast(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
               SmallVectorImpl<int64_t> &out) {
  ::partc::runtime::Shape shape;
  if (!::partc::runtime::broadcastShapes({a.begin(), a.end()},
                                         {b.begin(), b.end()}, shape))
    return false;
  out.assign(shape.begin(), shape.end());
  return true;
}

LogicalResult inferSame(Loc loc, ValueRange operands, Types &types) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  types.push_back(operands[0].getType());
  return success();
}

LogicalResult inferBroadcast(Loc loc, ValueRange operands, bool predicate,
                             Types &types) {
  if (failed(requireOperands(loc, operands, 2, 2)))
    return failure();
  auto a = tensorOf(operands[0]), b = tensorOf(operands[1]);
  if (a.getElementType() != b.getElementType())
    return fail(loc, "operand element types differ; convert one with Cast");
  SmallVector<int64_t> shape;
  if (!broadcast(a.getShape(), b.getShape(), shape))
    return fail(loc, "shapes " + shapeStr(a.getShape()) + " and " +
                         shapeStr(b.getShape()) + " do not broadcast");
  Type elem =
      predicate ? IntegerType::get(a.getContext(), 1) : a.getElementType();
  types.push_back(RankedTensorType::get(shape, elem));
  return success();
}

/// Output extent of a sliding window (convolution and pooling).
int64_t windowOutput(int64_t in, int64_t k, int64_t stride, int64_t padBegin,
                     int64_t padEnd, int64_t dilation, bool ceilMode) {
  // -1 (refused as a negative dimension) where the arithmetic overflows.
  int64_t effective, span;
  if (llvm::MulOverflow(k - 1, dilation, effective) ||
      llvm::AddOverflow(effective, int64_t(1), effective) ||
      llvm::AddOverflow(in, padBegin, span) ||
      llvm::AddOverflow(span, padEnd, span) ||
      llvm::SubOverflow(span, effective, span) ||
      (ceilMode && llvm::AddOverflow(span, stride, span)))
    return -1;
  if (ceilMode)
    span -= stride; // added above only to check it fits
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  // A window must start inside the input or the begin padding.
  if (ceilMode && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

LogicalResult inferWindow(Loc loc, RankedTensorType input,
                          ArrayRef<int64_t> kernel, DictionaryAttr attrs,
                          int64_t channels, bool ceilMode, Types &types) {
  int64_t spatial = input.getRank() - 2;
  if (spatial < 1)
    return fail(loc, "input " + shapeStr(input.getShape()) +
                         " needs batch, channel and spatial dimensions");
  auto strides = intsAttr(attrs, "strides");
  auto pads = intsAttr(attrs, "pads");
  auto dilations = intsAttr(attrs, "dilations");
  if (!strides || !pads || !dilations)
    return fail(loc, "needs strides, pads and dilations attributes");
  if (static_cast<int64_t>(kernel.size()) != spatial ||
      static_cast<int64_t>(strides->size()) != spatial ||
      static_cast<int64_t>(dilations->size()) != spatial ||
      static_cast<int64_t>(pads->size()) != 2 * spatial)
    return fail(loc, "kernel, strides, dilations and pads must match " +
                         Twine(spatial) + " spatial dimensions");
  SmallVector<int64_t> shape = {input.getDimSize(0), channels};
  for (int64_t i = 0; i < spatial; ++i) {
    if (kernel[i] < 1 || (*strides)[i] < 1 || (*dilations)[i] < 1 ||
        (*pads)[i] < 0 || (*pads)[i + spatial] < 0)
      return fail(loc, "window sizes, strides and dilations must be positive "
                       "and pads non-negative");
    int64_t out = windowOutput(input.getDimSize(2 + i), kernel[i],
                               (*strides)[i], (*pads)[i], (*pads)[i + spatial],
                               (*dilations)[i], ceilMode);
    if (out < 1)
      return fail(loc, "window larger than the padded input " +
                           shapeStr(input.getShape()));
    shape.push_back(out);
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult normalizedAxis(Loc loc, int64_t axis, int64_t rank,
                             bool allowEnd = false) {
  if (axis < 0 || axis > rank || (axis == rank && !allowEnd))
    return fail(loc, "axis " + Twine(axis) + " is out of range for rank " +
                         Twine(rank));
  return success();
}

} // namespace

std::string mlir::partc::graph::tensorSizeProblem(ShapedType type) {
  // kDynamic is INT64_MIN: a dimension a file declares as that is no
  // dynamic one (partc's graphs are static after import).
  for (int64_t d : type.getShape())
    if (d < 0)
      return "has negative dimension " + std::to_string(d) + " in " +
             shapeStr(type.getShape());
  ::partc::runtime::TensorType sized = toTensorType(type);
  if (sized.dtype == ::partc::runtime::DType::Invalid)
    sized.dtype = ::partc::runtime::DType::U8; // the size alone matters
  if (!::partc::runtime::checkedByteSize(sized))
    return "has shape " + shapeStr(type.getShape()) +
           ", over partc's limit of 2^50 bytes for one tensor";
  return {};
}

#define INFER_SIGNATURE(OP)                                                    \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *context, std::optional<Location> loc, ValueRange operands,  \
      DictionaryAttr attrs, OpaqueProperties, RegionRange, Types &types)

#define INFER_SAME(OP)                                                         \
  INFER_SIGNATURE(OP) { return inferSame(loc, operands, types); }

LogicalResult mlir::partc::graph::inferSameType(Loc loc, ValueRange operands,
                                                Types &types) {
  return inferSame(loc, operands, types);
}

LogicalResult mlir::partc::graph::inferBroadcastType(Loc loc,
                                                     ValueRange operands,
                                                     bool predicate,
                                                     Types &types) {
  return inferBroadcast(loc, operands, predicate, types);
}

INFER_SAME(IdentityOp)
INFER_SAME(TransferOp)

INFER_SIGNATURE(ConstantOp) {
  auto value = attrs.getAs<ElementsAttr>("value");
  if (!value)
    return fail(loc, "needs an elements attribute 'value'");
  types.push_back(value.getType());
  return success();
}

INFER_SIGNATURE(SoftmaxOp) {
  if (failed(requireOperands(loc, operands, 1, 2)))
    return failure();
  auto x = tensorOf(operands[0]);
  if (operands.size() == 2) {
    auto bias = tensorOf(operands[1]);
    SmallVector<int64_t> s;
    if (bias.getElementType() != x.getElementType() ||
        !broadcast(bias.getShape(), x.getShape(), s) ||
        ArrayRef<int64_t>(s) != x.getShape())
      return fail(loc, "bias " + typeStr(bias) + " does not broadcast to " +
                           typeStr(x) +
                           "; hint: the bias is added to the input before "
                           "the softmax");
  }
  types.push_back(x);
  return normalizedAxis(loc, intAttr(attrs, "axis", -1), x.getRank());
}

INFER_SIGNATURE(LogSoftmaxOp) {
  if (failed(inferSame(loc, operands, types)))
    return failure();
  return normalizedAxis(loc, intAttr(attrs, "axis", -1),
                        tensorOf(operands[0]).getRank());
}

INFER_SIGNATURE(ReshapeOp) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  auto shape = intsAttr(attrs, "shape");
  if (!shape)
    return fail(loc, "needs a 'shape' attribute");
  auto in = tensorOf(operands[0]);
  int64_t n = 1;
  for (int64_t d : *shape) {
    if (d < 0)
      return fail(loc, "target shape " + shapeStr(*shape) +
                           " must be fully resolved");
    n *= d;
  }
  if (n != in.getNumElements())
    return fail(loc, "cannot reshape " + shapeStr(in.getShape()) + " (" +
                         Twine(in.getNumElements()) + " elements) to " +
                         shapeStr(*shape));
  types.push_back(RankedTensorType::get(*shape, in.getElementType()));
  return success();
}

INFER_SIGNATURE(ExpandOp) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  auto shape = intsAttr(attrs, "shape");
  if (!shape)
    return fail(loc, "needs a 'shape' attribute");
  auto in = tensorOf(operands[0]);
  SmallVector<int64_t> out;
  if (!broadcast(in.getShape(), *shape, out))
    return fail(loc, "cannot expand " + shapeStr(in.getShape()) + " to " +
                         shapeStr(*shape));
  types.push_back(RankedTensorType::get(out, in.getElementType()));
  return success();
}

INFER_SIGNATURE(WhereOp) {
  if (failed(requireOperands(loc, operands, 3, 3)))
    return failure();
  auto c = tensorOf(operands[0]), x = tensorOf(operands[1]),
       y = tensorOf(operands[2]);
  if (!c.getElementType().isInteger(1))
    return fail(loc, "condition must have element type i1");
  if (x.getElementType() != y.getElementType())
    return fail(loc, "value element types differ");
  SmallVector<int64_t> s1, s2;
  if (!broadcast(c.getShape(), x.getShape(), s1) ||
      !broadcast(s1, y.getShape(), s2))
    return fail(loc, "operands do not broadcast");
  types.push_back(RankedTensorType::get(s2, x.getElementType()));
  return success();
}

INFER_SIGNATURE(FusedElementwiseOp) {
  namespace fused = ::partc::runtime::fused;
  // concat_parts: the leading operands, concatenated along their last axis,
  // are the program's input 0, which has the result's shape.
  int64_t parts = intAttr(attrs, "concat_parts", 1);
  if (parts < 1 || parts > fused::kMaxConcatParts)
    return fail(loc, "concat_parts = " + Twine(parts) + " is not in [1, " +
                         Twine(fused::kMaxConcatParts) + "]");
  if (failed(
          requireOperands(loc, operands, parts, fused::kMaxInputs + parts - 1)))
    return failure();
  SmallVector<int64_t> shape;
  Type element = tensorOf(operands[0]).getElementType();
  SmallVector<int64_t> concatShape;
  if (parts > 1) {
    auto first = tensorOf(operands[0]);
    if (first.getRank() == 0)
      return fail(loc, "concatenates scalars; parts need an axis");
    concatShape.assign(first.getShape().begin(), first.getShape().end());
    concatShape.back() = 0;
    for (Value v : operands.take_front(parts)) {
      auto t = tensorOf(v);
      if (t.getRank() != first.getRank() ||
          t.getShape().drop_back() != first.getShape().drop_back())
        return fail(loc, "concatenated part " + shapeStr(t.getShape()) +
                             " differs from " + shapeStr(first.getShape()) +
                             " outside the last axis");
      concatShape.back() += t.getShape().back();
    }
    shape = concatShape;
  }
  for (auto [index, v] : llvm::enumerate(operands)) {
    auto t = tensorOf(v);
    // Steps compute in f32; 16-bit operands (--precision) are widened as
    // they are read.
    if (t.getElementType() != element ||
        !(element.isF32() || element.isBF16() || element.isF16()))
      return fail(loc, "fuses f32 (or all bf16, or all f16) tensors only, "
                       "got " +
                           shapeStr(t.getShape()) + " of another type");
    if (parts > 1 && static_cast<int64_t>(index) < parts)
      continue; // the parts stand for their concatenation, checked above
    SmallVector<int64_t> next;
    if (!broadcast(shape, t.getShape(), next))
      return fail(loc, "operand shapes " + shapeStr(shape) + " and " +
                           shapeStr(t.getShape()) + " do not broadcast");
    shape = next;
  }
  if (parts > 1 && ArrayRef<int64_t>(shape) != ArrayRef<int64_t>(concatShape))
    return fail(loc, "the other operands broadcast the concatenation " +
                         shapeStr(concatShape) + " to " + shapeStr(shape) +
                         "; it must have the result's shape");
  types.push_back(
      RankedTensorType::get(shape, tensorOf(operands[0]).getElementType()));
  return success();
}

/// A strided view from attributes `prefix`_shape, _strides and _offset
/// (strided_matmul's operands, attention's q, k and v).
static bool readView(DictionaryAttr attrs, StringRef prefix,
                     ::partc::runtime::strided::View &v) {
  auto shape = intsAttr(attrs, (prefix + "_shape").str());
  auto strides = intsAttr(attrs, (prefix + "_strides").str());
  if (!shape || !strides)
    return false;
  v.shape.assign(shape->begin(), shape->end());
  v.strides.assign(strides->begin(), strides->end());
  v.offset = intAttr(attrs, (prefix + "_offset").str(), 0);
  return true;
}

INFER_SIGNATURE(StridedMatMulOp) {
  if (failed(requireOperands(loc, operands, 2, 2)))
    return failure();
  auto a = tensorOf(operands[0]), b = tensorOf(operands[1]);
  Type element = a.getElementType();
  if (element != b.getElementType() ||
      !(element.isF32() || element.isBF16() || element.isF16()))
    return fail(loc, "multiplies two f32, bf16 or f16 tensors only");
  namespace strided = ::partc::runtime::strided;
  auto view = [&](StringRef prefix, strided::View &v) {
    return readView(attrs, prefix, v);
  };
  strided::View lhs, rhs;
  auto perm = intsAttr(attrs, "perm");
  auto shape = intsAttr(attrs, "shape");
  if (!view("lhs", lhs) || !view("rhs", rhs) || !perm || !shape)
    return fail(loc, "needs the lhs and rhs views, perm and shape");
  std::vector<int64_t> logical;
  std::string error = strided::checkOperands(
      lhs, a.getNumElements(), rhs, b.getNumElements(),
      {perm->begin(), perm->end()}, {shape->begin(), shape->end()}, logical);
  if (!error.empty())
    return fail(loc, error + "; the views come from slices, reshapes and "
                             "transposes that partc-fold-matmul-views folds");
  types.push_back(RankedTensorType::get(*shape, a.getElementType()));
  return success();
}

INFER_SIGNATURE(AttentionOp) {
  if (failed(requireOperands(loc, operands, 3, 4)))
    return failure();
  Type element = tensorOf(operands[0]).getElementType();
  if (!(element.isF32() || element.isBF16() || element.isF16()))
    return fail(loc, "computes on f32, bf16 or f16 tensors only");
  for (Value v : operands)
    if (tensorOf(v).getElementType() != element)
      return fail(loc, "operands must share one element type, got " +
                           typeStr(tensorOf(operands[0])) + " and " +
                           typeStr(tensorOf(v)));
  namespace strided = ::partc::runtime::strided;
  auto view = [&](StringRef prefix, strided::View &v) {
    return readView(attrs, prefix, v);
  };
  strided::View q, k, v;
  auto perm = intsAttr(attrs, "perm");
  auto shape = intsAttr(attrs, "shape");
  if (!view("q", q) || !view("k", k) || !view("v", v) || !perm || !shape)
    return fail(loc, "needs the q, k and v views, perm and shape");
  std::vector<int64_t> scores, logical;
  std::string error = strided::checkAttention(
      q, tensorOf(operands[0]).getNumElements(), k,
      tensorOf(operands[1]).getNumElements(), v,
      tensorOf(operands[2]).getNumElements(), {perm->begin(), perm->end()},
      {shape->begin(), shape->end()}, scores, logical);
  if (!error.empty())
    return fail(loc, error + "; hint: the views are those of the two "
                             "strided_matmuls partc-fuse-attention fused");
  if (operands.size() == 4) {
    auto bias = tensorOf(operands[3]);
    SmallVector<int64_t> s;
    if (!broadcast(bias.getShape(), scores, s) ||
        ArrayRef<int64_t>(s) != ArrayRef<int64_t>(scores))
      return fail(loc, "bias " + typeStr(bias) +
                           " does not broadcast to the scores " +
                           shapeStr(scores) +
                           "; hint: it is the softmax's bias (a mask)");
  }
  types.push_back(RankedTensorType::get(*shape, element));
  return success();
}

INFER_SIGNATURE(CastOp) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  auto to = attrs.getAs<TypeAttr>("to");
  if (!to)
    return fail(loc, "needs a type attribute 'to'");
  types.push_back(
      RankedTensorType::get(tensorOf(operands[0]).getShape(), to.getValue()));
  return success();
}

INFER_SIGNATURE(MatMulOp) {
  if (failed(requireOperands(loc, operands, 2, 4)))
    return failure();
  auto a = tensorOf(operands[0]), b = tensorOf(operands[1]);
  if (a.getElementType() != b.getElementType())
    return fail(loc, "operand element types differ");
  if (a.getRank() < 1 || b.getRank() < 1)
    return fail(loc, "operands must have rank >= 1");
  SmallVector<int64_t> as(a.getShape()), bs(b.getShape());
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  if (as.back() != bs[bs.size() - 2])
    return fail(loc,
                "contraction dimensions differ: " + shapeStr(a.getShape()) +
                    " x " + shapeStr(b.getShape()));
  SmallVector<int64_t> batch;
  if (!broadcast(ArrayRef<int64_t>(as).drop_back(2),
                 ArrayRef<int64_t>(bs).drop_back(2), batch))
    return fail(loc, "batch dimensions do not broadcast");
  if (!aVec)
    batch.push_back(as[as.size() - 2]);
  if (!bVec)
    batch.push_back(bs.back());
  if (operands.size() >= 3) {
    // A bias is one value per result column.
    auto bias = tensorOf(operands[2]);
    ArrayRef<int64_t> shape = bias.getShape();
    if (bVec || bias.getElementType() != a.getElementType() || shape.empty() ||
        shape.back() != bs.back() ||
        llvm::any_of(shape.drop_back(), [](int64_t d) { return d != 1; }))
      return fail(loc, "bias " + shapeStr(shape) +
                           " must hold one value per result column (" +
                           Twine(bVec ? 1 : bs.back()) + ")");
  }
  auto result = RankedTensorType::get(batch, a.getElementType());
  if (operands.size() == 4 && tensorOf(operands[3]) != result)
    return fail(loc, "addend " + shapeStr(tensorOf(operands[3]).getShape()) +
                         " must have the result's type, shape " +
                         shapeStr(batch));
  types.push_back(result);
  return success();
}

INFER_SIGNATURE(GemmOp) {
  if (failed(requireOperands(loc, operands, 2, 3)))
    return failure();
  auto a = tensorOf(operands[0]), b = tensorOf(operands[1]);
  if (a.getRank() != 2 || b.getRank() != 2)
    return fail(loc, "A and B must be matrices");
  bool ta = intAttr(attrs, "trans_a", 0), tb = intAttr(attrs, "trans_b", 0);
  int64_t m = a.getDimSize(ta ? 1 : 0), k = a.getDimSize(ta ? 0 : 1);
  int64_t kb = b.getDimSize(tb ? 1 : 0), n = b.getDimSize(tb ? 0 : 1);
  if (k != kb)
    return fail(loc,
                "inner dimensions differ: " + Twine(k) + " vs " + Twine(kb));
  if (operands.size() == 3) {
    SmallVector<int64_t> s;
    auto c = tensorOf(operands[2]);
    if (!broadcast(c.getShape(), {m, n}, s) || s[0] != m || s[1] != n)
      return fail(loc, "C " + shapeStr(c.getShape()) +
                           " does not broadcast to [" + Twine(m) + "," +
                           Twine(n) + "]");
  }
  types.push_back(RankedTensorType::get({m, n}, a.getElementType()));
  return success();
}

/// [N, spatial..., C] <-> [N, C, spatial...]: channels-last ops check and
/// infer their shapes through the channels-first rule.
static SmallVector<int64_t> toChannelsFirst(ArrayRef<int64_t> shape) {
  ::partc::runtime::Shape first = ::partc::runtime::channelsFirstShape(
      ::partc::runtime::Shape(shape.begin(), shape.end()));
  return SmallVector<int64_t>(first.begin(), first.end());
}
static SmallVector<int64_t> toChannelsLast(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape);
  if (s.size() >= 3)
    std::rotate(s.begin() + 1, s.begin() + 2, s.end());
  return s;
}

/// Runs a channels-first window rule on a channels-last op.
static LogicalResult inferWindowLayout(Loc loc, RankedTensorType x,
                                       ArrayRef<int64_t> kernel,
                                       DictionaryAttr attrs, int64_t channels,
                                       bool ceilMode, Types &types) {
  if (!attrs.get("channels_last"))
    return inferWindow(loc, x, kernel, attrs, channels, ceilMode, types);
  auto first =
      RankedTensorType::get(toChannelsFirst(x.getShape()), x.getElementType());
  SmallVector<Type> inferred;
  if (failed(
          inferWindow(loc, first, kernel, attrs, channels, ceilMode, inferred)))
    return failure();
  auto out = cast<RankedTensorType>(inferred.front());
  types.push_back(RankedTensorType::get(toChannelsLast(out.getShape()),
                                        out.getElementType()));
  return success();
}

INFER_SIGNATURE(ConvOp) {
  if (failed(requireOperands(loc, operands, 2, 4)))
    return failure();
  auto x = tensorOf(operands[0]), w = tensorOf(operands[1]);
  if (x.getRank() != w.getRank() || x.getRank() < 3)
    return fail(loc, "input " + shapeStr(x.getShape()) + " and weight " +
                         shapeStr(w.getShape()) +
                         " must have the same rank >= 3");
  bool channelsLast = attrs.get("channels_last") != nullptr;
  SmallVector<int64_t> xs(x.getShape()), ws(w.getShape());
  if (channelsLast) {
    xs = toChannelsFirst(xs);
    ws = toChannelsFirst(ws);
  }
  int64_t group = intAttr(attrs, "group", 1);
  // Division, not ws[1] * group: a group near 2^63 overflows the product.
  if (group < 1 || xs[1] % group || xs[1] / group != ws[1] || ws[0] % group)
    return fail(loc, "input channels " + Twine(xs[1]) +
                         " do not match weight " + shapeStr(w.getShape()) +
                         " with group " + Twine(group) +
                         (channelsLast ? " (channels last)" : ""));
  if (operands.size() >= 3 && tensorOf(operands[2]).getNumElements() != ws[0])
    return fail(loc, "bias must have " + Twine(ws[0]) + " elements");
  if (failed(inferWindowLayout(loc, x, ArrayRef<int64_t>(ws).drop_front(2),
                               attrs, ws[0], false, types)))
    return failure();
  if (operands.size() == 4 && operands[3].getType() != types.front())
    return fail(loc,
                "addend " + shapeStr(tensorOf(operands[3]).getShape()) +
                    " must have the result's type " +
                    shapeStr(cast<RankedTensorType>(types.front()).getShape()));
  return success();
}

static LogicalResult inferPool(Loc loc, ValueRange operands,
                               DictionaryAttr attrs, Types &types) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  auto kernel = intsAttr(attrs, "kernel_shape");
  if (!kernel)
    return fail(loc, "needs 'kernel_shape'");
  auto x = tensorOf(operands[0]);
  if (x.getRank() < 3)
    return fail(loc, "input must have rank >= 3");
  int64_t channels =
      attrs.get("channels_last") ? x.getShape().back() : x.getDimSize(1);
  return inferWindowLayout(loc, x, *kernel, attrs, channels,
                           intAttr(attrs, "ceil_mode", 0) != 0, types);
}

INFER_SIGNATURE(MaxPoolOp) { return inferPool(loc, operands, attrs, types); }
INFER_SIGNATURE(MaxPoolWithIndicesOp) {
  if (failed(inferPool(loc, operands, attrs, types)))
    return failure();
  auto values = cast<RankedTensorType>(types.front());
  types.push_back(
      RankedTensorType::get(values.getShape(), IntegerType::get(context, 64)));
  return success();
}
INFER_SIGNATURE(AvgPoolOp) { return inferPool(loc, operands, attrs, types); }

static LogicalResult inferGlobalPool(Loc loc, ValueRange operands,
                                     Types &types) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  auto x = tensorOf(operands[0]);
  if (x.getRank() < 3)
    return fail(loc, "input must have rank >= 3");
  SmallVector<int64_t> shape(x.getShape());
  for (size_t i = 2; i < shape.size(); ++i)
    shape[i] = 1;
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

INFER_SIGNATURE(GlobalAvgPoolOp) {
  return inferGlobalPool(loc, operands, types);
}
INFER_SIGNATURE(GlobalMaxPoolOp) {
  return inferGlobalPool(loc, operands, types);
}

INFER_SIGNATURE(BatchNormOp) {
  if (failed(requireOperands(loc, operands, 5, 5)))
    return failure();
  auto x = tensorOf(operands[0]);
  if (x.getRank() < 2)
    return fail(loc, "input must have rank >= 2");
  for (unsigned i = 1; i < 5; ++i)
    if (tensorOf(operands[i]).getNumElements() != x.getDimSize(1))
      return fail(loc, "parameter " + Twine(i) + " must have " +
                           Twine(x.getDimSize(1)) + " elements");
  types.push_back(x);
  return success();
}

/// Layer and RMS normalization: scale and bias broadcast to the normalized
/// dimensions [axis, rank).
static LogicalResult inferNormalization(Loc loc, ValueRange operands,
                                        DictionaryAttr attrs, Types &types) {
  auto x = tensorOf(operands[0]);
  int64_t axis = intAttr(attrs, "axis", -1);
  if (failed(normalizedAxis(loc, axis, x.getRank())))
    return failure();
  ArrayRef<int64_t> norm = x.getShape().drop_front(axis);
  for (unsigned i = 1; i < operands.size(); ++i) {
    SmallVector<int64_t> s;
    if (!broadcast(tensorOf(operands[i]).getShape(), norm, s) ||
        ArrayRef<int64_t>(s) != norm)
      return fail(loc, "scale/bias " +
                           shapeStr(tensorOf(operands[i]).getShape()) +
                           " does not broadcast to " + shapeStr(norm));
  }
  types.push_back(x);
  return success();
}

INFER_SIGNATURE(LayerNormOp) {
  if (failed(requireOperands(loc, operands, 2, 3)))
    return failure();
  return inferNormalization(loc, operands, attrs, types);
}

INFER_SIGNATURE(SoftmaxGradOp) {
  if (failed(requireOperands(loc, operands, 2, 4)))
    return failure();
  auto grad = tensorOf(operands[0]), y = tensorOf(operands[1]);
  if (grad != y || !isa<FloatType>(y.getElementType()))
    return fail(loc, "gradient " + typeStr(grad) +
                         " must have the softmax output's type " + typeStr(y) +
                         " (floats)");
  // A folded dropout brings its step and seed, int64 scalars, and its
  // ratio; neither comes alone.
  bool ratio = static_cast<bool>(attrs.get("dropout_ratio"));
  if (operands.size() == 3 || (operands.size() == 4) != ratio)
    return fail(loc, "has " + Twine(operands.size() - 2) +
                         " dropout operands and " + (ratio ? "a" : "no") +
                         " dropout_ratio; hint: a folded dropout takes its "
                         "step and seed and its ratio");
  for (Value counter : operands.drop_front(2)) {
    auto t = tensorOf(counter);
    if (t.getRank() != 0 || !t.getElementType().isInteger(64))
      return fail(loc, "dropout counter " + typeStr(t) +
                           " must be an int64 scalar (the step or the seed)");
  }
  types.push_back(y);
  return normalizedAxis(loc, intAttr(attrs, "axis", -1), y.getRank());
}

INFER_SIGNATURE(LayerNormGradOp) {
  if (failed(requireOperands(loc, operands, 3, 4)))
    return failure();
  auto grad = tensorOf(operands[0]), x = tensorOf(operands[1]),
       scale = tensorOf(operands[2]);
  if (grad != x)
    return fail(loc, "gradient " + typeStr(grad) +
                         " must have the input's type " + typeStr(x));
  if (operands.size() == 4 && tensorOf(operands[3]) != x)
    return fail(loc, "addend " + typeStr(tensorOf(operands[3])) +
                         " must have the input's type " + typeStr(x) +
                         "; hint: it is added to the input's gradient");
  int64_t axis = intAttr(attrs, "axis", -1);
  if (failed(normalizedAxis(loc, axis, x.getRank())))
    return failure();
  ArrayRef<int64_t> norm = x.getShape().drop_front(axis);
  if (scale.getShape() != norm || scale.getElementType() != x.getElementType())
    return fail(loc, "scale " + typeStr(scale) +
                         " must have the normalized dimensions' shape " +
                         shapeStr(norm) + " and the input's element type");
  types.append({x, scale, scale});
  return success();
}

INFER_SIGNATURE(RmsNormOp) {
  if (failed(requireOperands(loc, operands, 1, 2)))
    return failure();
  return inferNormalization(loc, operands, attrs, types);
}

static LogicalResult inferReduce(Loc loc, ValueRange operands,
                                 DictionaryAttr attrs, Types &types) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  auto x = tensorOf(operands[0]);
  auto axes = intsAttr(attrs, "axes");
  if (!axes)
    return fail(loc, "needs 'axes'");
  bool keep = intAttr(attrs, "keepdims", 1) != 0;
  SmallVector<bool> reduced(x.getRank(), false);
  int64_t prev = -1;
  for (int64_t a : *axes) {
    if (a <= prev || a >= x.getRank())
      return fail(loc, "axes " + shapeStr(*axes) +
                           " must be sorted, unique and below rank " +
                           Twine(x.getRank()));
    reduced[a] = true;
    prev = a;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < x.getRank(); ++d) {
    if (!reduced[d])
      shape.push_back(x.getDimSize(d));
    else if (keep)
      shape.push_back(1);
  }
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

INFER_SIGNATURE(ReduceSumOp) {
  return inferReduce(loc, operands, attrs, types);
}
INFER_SIGNATURE(ReduceMeanOp) {
  return inferReduce(loc, operands, attrs, types);
}
INFER_SIGNATURE(ReduceMaxOp) {
  return inferReduce(loc, operands, attrs, types);
}
INFER_SIGNATURE(ReduceMinOp) {
  return inferReduce(loc, operands, attrs, types);
}
INFER_SIGNATURE(ReduceProdOp) {
  return inferReduce(loc, operands, attrs, types);
}

/// The input of an axis op and its (non-negative) axis.
static LogicalResult axisOperand(Loc loc, ValueRange operands,
                                 DictionaryAttr attrs, RankedTensorType &x,
                                 int64_t &axis) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  x = tensorOf(operands[0]);
  axis = intAttr(attrs, "axis", -1);
  if (axis < 0 || axis >= x.getRank())
    return fail(loc, "axis " + Twine(axis) + " is out of range for " +
                         typeStr(x) + "; it must be in [0, " +
                         Twine(x.getRank()) + ")");
  return success();
}

static LogicalResult inferArgReduce(Loc loc, ValueRange operands,
                                    DictionaryAttr attrs, Types &types) {
  RankedTensorType x;
  int64_t axis;
  if (failed(axisOperand(loc, operands, attrs, x, axis)))
    return failure();
  if (x.getDimSize(axis) == 0)
    return fail(loc, "the axis of " + typeStr(x) +
                         " is empty; there is no index to return");
  SmallVector<int64_t> shape(x.getShape());
  if (intAttr(attrs, "keepdims", 1))
    shape[axis] = 1;
  else
    shape.erase(shape.begin() + axis);
  types.push_back(
      RankedTensorType::get(shape, IntegerType::get(x.getContext(), 64)));
  return success();
}
INFER_SIGNATURE(ArgMaxOp) {
  return inferArgReduce(loc, operands, attrs, types);
}
INFER_SIGNATURE(ArgMinOp) {
  return inferArgReduce(loc, operands, attrs, types);
}

INFER_SIGNATURE(CumSumOp) {
  RankedTensorType x;
  int64_t axis;
  if (failed(axisOperand(loc, operands, attrs, x, axis)))
    return failure();
  types.push_back(x);
  return success();
}

INFER_SIGNATURE(TopKOp) {
  RankedTensorType x;
  int64_t axis;
  if (failed(axisOperand(loc, operands, attrs, x, axis)))
    return failure();
  int64_t k = intAttr(attrs, "k", -1);
  if (k < 0 || k > x.getDimSize(axis))
    return fail(loc, "k = " + Twine(k) + " must lie in [0, " +
                         Twine(x.getDimSize(axis)) + "], the extent of axis " +
                         Twine(axis) + " of " + typeStr(x));
  SmallVector<int64_t> shape(x.getShape());
  shape[axis] = k;
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  types.push_back(
      RankedTensorType::get(shape, IntegerType::get(x.getContext(), 64)));
  return success();
}

INFER_SIGNATURE(TransposeOp) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  auto x = tensorOf(operands[0]);
  auto perm = intsAttr(attrs, "perm");
  if (!perm || static_cast<int64_t>(perm->size()) != x.getRank())
    return fail(loc, "'perm' must have one entry per dimension");
  SmallVector<bool> seen(x.getRank(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : *perm) {
    if (p < 0 || p >= x.getRank() || seen[p])
      return fail(loc, "'perm' " + shapeStr(*perm) + " is not a permutation");
    seen[p] = true;
    shape.push_back(x.getDimSize(p));
  }
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

INFER_SIGNATURE(ConcatOp) {
  if (failed(requireOperands(loc, operands, 1, 1u << 20)))
    return failure();
  auto first = tensorOf(operands[0]);
  int64_t axis = intAttr(attrs, "axis", 0);
  if (failed(normalizedAxis(loc, axis, first.getRank())))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value v : operands) {
    auto t = tensorOf(v);
    if (t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return fail(loc, "operands differ in rank or element type");
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != first.getDimSize(d))
        return fail(loc, "operand " + shapeStr(t.getShape()) +
                             " differs from " + shapeStr(first.getShape()) +
                             " outside axis " + Twine(axis));
    shape[axis] += t.getDimSize(axis);
  }
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

INFER_SIGNATURE(SplitOp) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  auto x = tensorOf(operands[0]);
  int64_t axis = intAttr(attrs, "axis", 0);
  if (failed(normalizedAxis(loc, axis, x.getRank())))
    return failure();
  auto sizes = intsAttr(attrs, "sizes");
  if (!sizes || sizes->empty())
    return fail(loc, "needs non-empty 'sizes'");
  int64_t total = 0;
  for (int64_t s : *sizes) {
    if (s < 0)
      return fail(loc, "split sizes must be non-negative");
    SmallVector<int64_t> shape(x.getShape());
    shape[axis] = s;
    types.push_back(RankedTensorType::get(shape, x.getElementType()));
    if (llvm::AddOverflow(total, s, total))
      return fail(loc, "split sizes " + shapeStr(*sizes) + " overflow");
  }
  if (total != x.getDimSize(axis))
    return fail(loc, "split sizes " + shapeStr(*sizes) + " do not add up to " +
                         Twine(x.getDimSize(axis)));
  return success();
}

INFER_SIGNATURE(SliceOp) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  auto x = tensorOf(operands[0]);
  auto starts = intsAttr(attrs, "starts"), ends = intsAttr(attrs, "ends"),
       steps = intsAttr(attrs, "steps");
  if (!starts || !ends || !steps ||
      static_cast<int64_t>(starts->size()) != x.getRank() ||
      ends->size() != starts->size() || steps->size() != starts->size())
    return fail(loc, "starts, ends and steps need one entry per dimension");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < x.getRank(); ++d) {
    int64_t s = (*starts)[d], e = (*ends)[d], st = (*steps)[d],
            n = x.getDimSize(d);
    if (st == 0)
      return fail(loc, "slice step must not be 0");
    // In 128 bits: attributes anywhere in int64 must not overflow here.
    using Wide = __int128;
    Wide size = st > 0 ? (Wide(e) - s + st - 1) / st
                       : (Wide(s) - e - st - 1) / -Wide(st);
    size = std::max<Wide>(size, 0);
    Wide last = Wide(s) + (size - 1) * st;
    if (size > 0 && (s < 0 || s >= n || last < 0 || last >= n))
      return fail(loc, "slice [" + Twine(s) + ":" + Twine(e) + ":" + Twine(st) +
                           "] is out of bounds for dimension " + Twine(d) +
                           " of size " + Twine(n));
    shape.push_back(static_cast<int64_t>(size)); // at most n here
  }
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

/// The operands and axis of Gather and GatherElements: data, i32 or i64
/// indices, and an axis inside the data's rank.
static LogicalResult gatherOperands(Loc loc, ValueRange operands,
                                    DictionaryAttr attrs, RankedTensorType &x,
                                    RankedTensorType &idx, int64_t &axis) {
  if (failed(requireOperands(loc, operands, 2, 2)))
    return failure();
  x = tensorOf(operands[0]);
  idx = tensorOf(operands[1]);
  axis = intAttr(attrs, "axis", 0);
  if (failed(normalizedAxis(loc, axis, x.getRank())))
    return failure();
  if (!idx.getElementType().isInteger(32) &&
      !idx.getElementType().isInteger(64))
    return fail(loc, "indices must be i32 or i64");
  return success();
}

INFER_SIGNATURE(GatherOp) {
  RankedTensorType x, idx;
  int64_t axis;
  if (failed(gatherOperands(loc, operands, attrs, x, idx, axis)))
    return failure();
  SmallVector<int64_t> shape(x.getShape().take_front(axis));
  shape.append(idx.getShape().begin(), idx.getShape().end());
  shape.append(x.getShape().begin() + axis + 1, x.getShape().end());
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

INFER_SIGNATURE(GatherElementsOp) {
  RankedTensorType x, idx;
  int64_t axis;
  if (failed(gatherOperands(loc, operands, attrs, x, idx, axis)))
    return failure();
  if (idx.getRank() != x.getRank())
    return fail(loc, "indices " + typeStr(idx) + " and data " + typeStr(x) +
                         " must have the same rank");
  for (int64_t d = 0; d < x.getRank(); ++d)
    if (d != axis && idx.getDimSize(d) > x.getDimSize(d))
      return fail(loc, "indices " + shapeStr(idx.getShape()) +
                           " reach outside data " + shapeStr(x.getShape()) +
                           " in dimension " + Twine(d) +
                           "; only the axis may be longer");
  types.push_back(RankedTensorType::get(idx.getShape(), x.getElementType()));
  return success();
}

INFER_SIGNATURE(ResizeOp) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  auto x = tensorOf(operands[0]);
  auto sizes = intsAttr(attrs, "sizes");
  auto scales = attrs.getAs<DenseF64ArrayAttr>("scales");
  if (!sizes || !scales || sizes->size() != size_t(x.getRank()) ||
      scales.size() != x.getRank())
    return fail(loc, "needs sizes and scales for each of the " +
                         Twine(x.getRank()) + " dimensions");
  for (auto [d, n] : llvm::enumerate(*sizes))
    if (n < 1 || !(scales[d] > 0))
      return fail(loc, "dimension " + Twine(d) + " has size " + Twine(n) +
                           " and scale " + std::to_string(scales[d]) +
                           "; both must be positive");
  namespace rs = ::partc::runtime::resize;
  std::string why;
  rs::Mode mode;
  rs::Coordinates coordinates;
  rs::Rounding rounding;
  auto str = [&](StringRef name, StringRef dflt) {
    auto a = attrs.getAs<StringAttr>(name);
    return (a ? a.getValue() : dflt).str();
  };
  if (!rs::parseMode(str("mode", "nearest"), mode, why) ||
      !rs::parseCoordinates(str("coordinate_transformation_mode", "half_pixel"),
                            coordinates, why) ||
      !rs::parseRounding(str("nearest_mode", "round_prefer_floor"), rounding,
                         why))
    return fail(loc, why);
  if (mode == rs::Mode::Linear && !isa<FloatType>(x.getElementType()))
    return fail(loc, "linear resizing needs a float tensor, got " + typeStr(x));
  types.push_back(RankedTensorType::get(*sizes, x.getElementType()));
  return success();
}

/// IsNaN and IsInf: the operand's shape, i1 elements.
LogicalResult inferFloatTest(Loc loc, ValueRange operands, Types &types) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  auto x = tensorOf(operands[0]);
  if (!isa<FloatType>(x.getElementType()))
    return fail(loc, "needs a floating-point operand, got " +
                         typeStr(x.getElementType()));
  types.push_back(
      RankedTensorType::get(x.getShape(), IntegerType::get(x.getContext(), 1)));
  return success();
}

INFER_SIGNATURE(IsNanOp) { return inferFloatTest(loc, operands, types); }
INFER_SIGNATURE(IsInfOp) { return inferFloatTest(loc, operands, types); }

/// Checks GatherND's and ScatterND's index tuples: integer, at least rank 1,
/// and no longer than the dimensions of `data` they address.
LogicalResult checkIndexTuples(Loc loc, RankedTensorType data,
                               RankedTensorType idx, int64_t batchDims) {
  if (!idx.getElementType().isInteger(32) &&
      !idx.getElementType().isInteger(64))
    return fail(loc, "indices must be i32 or i64");
  // Before any sum with it: batch_dims comes from the file (a fuzzed model
  // asked for 2^63 - 1).
  if (batchDims < 0 || batchDims > data.getRank())
    return fail(loc, "batch_dims " + Twine(batchDims) + " must be in [0, " +
                         Twine(data.getRank()) + "], the rank of data " +
                         shapeStr(data.getShape()));
  if (idx.getRank() < 1 + batchDims)
    return fail(loc, "indices " + shapeStr(idx.getShape()) + " need rank " +
                         Twine(1 + batchDims) + " or more");
  int64_t k = idx.getShape().back();
  if (k < 1 || k > data.getRank() - batchDims)
    return fail(loc, "index tuples of length " + Twine(k) + " after " +
                         Twine(batchDims) +
                         " batch dimension(s) do not fit "
                         "data " +
                         shapeStr(data.getShape()));
  for (int64_t d = 0; d < batchDims; ++d)
    if (idx.getDimSize(d) != data.getDimSize(d))
      return fail(loc, "batch dimension " + Twine(d) + " differs: data " +
                           shapeStr(data.getShape()) + ", indices " +
                           shapeStr(idx.getShape()));
  return success();
}

INFER_SIGNATURE(GatherNdOp) {
  if (failed(requireOperands(loc, operands, 2, 2)))
    return failure();
  auto x = tensorOf(operands[0]), idx = tensorOf(operands[1]);
  int64_t batchDims = intAttr(attrs, "batch_dims", 0);
  if (failed(checkIndexTuples(loc, x, idx, batchDims)))
    return failure();
  SmallVector<int64_t> shape(idx.getShape().drop_back());
  shape.append(x.getShape().begin() + batchDims + idx.getShape().back(),
               x.getShape().end());
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

INFER_SIGNATURE(ScatterNdOp) {
  if (failed(requireOperands(loc, operands, 3, 3)))
    return failure();
  auto x = tensorOf(operands[0]), idx = tensorOf(operands[1]),
       updates = tensorOf(operands[2]);
  if (failed(checkIndexTuples(loc, x, idx, 0)))
    return failure();
  SmallVector<int64_t> expect(idx.getShape().drop_back());
  expect.append(x.getShape().begin() + idx.getShape().back(),
                x.getShape().end());
  if (updates.getShape() != ArrayRef<int64_t>(expect) ||
      updates.getElementType() != x.getElementType())
    return fail(loc, "updates " + shapeStr(updates.getShape()) + " should be " +
                         shapeStr(expect) + " of the data's element type");
  auto reduction = attrs.getAs<StringAttr>("reduction");
  ::partc::runtime::ScatterReduction parsed;
  if (reduction &&
      !::partc::runtime::parseScatterReduction(reduction.str(), parsed))
    return fail(loc, "unknown reduction '" + reduction.getValue() +
                         "' (none, add, mul, max or min)");
  types.push_back(x);
  return success();
}

INFER_SIGNATURE(PadOp) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  auto x = tensorOf(operands[0]);
  auto pads = intsAttr(attrs, "pads");
  if (!pads || static_cast<int64_t>(pads->size()) != 2 * x.getRank())
    return fail(loc, "'pads' needs two entries per dimension");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < x.getRank(); ++d) {
    int64_t b = (*pads)[d], e = (*pads)[d + x.getRank()];
    if (b < 0 || e < 0)
      return fail(loc, "negative pads are not supported");
    int64_t padded;
    if (llvm::AddOverflow(x.getDimSize(d), b, padded) ||
        llvm::AddOverflow(padded, e, padded))
      return fail(loc, "pads " + std::to_string(b) + " and " +
                           std::to_string(e) + " of dimension " +
                           std::to_string(d) + " overflow its size");
    shape.push_back(padded);
  }
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Training (TrainingOps.td)
//===----------------------------------------------------------------------===//

namespace {
/// Logits [..., C] of a float type and int64 labels of the logits' shape
/// without its last dimension.
LogicalResult checkCrossEntropyOperands(Loc loc, RankedTensorType logits,
                                        RankedTensorType labels,
                                        DictionaryAttr attrs) {
  if (!isa<FloatType>(logits.getElementType()) || logits.getRank() < 1)
    return fail(loc, "logits " + typeStr(logits) +
                         " must be floats with a class dimension last");
  int64_t classes = intAttr(attrs, "classes", logits.getShape().back());
  if (classes < 1 || classes > logits.getShape().back())
    return fail(
        loc, "classes = " + std::to_string(classes) + " must be in [1, " +
                 std::to_string(logits.getShape().back()) + "] (the logits " +
                 typeStr(logits) + " hold the classes first in each row)");
  if (!labels.getElementType().isInteger(64) ||
      labels.getShape() != logits.getShape().drop_back())
    return fail(loc, "labels " + typeStr(labels) + " must be int64 of shape " +
                         shapeStr(logits.getShape().drop_back()) +
                         " (one class index per row of the logits " +
                         typeStr(logits) + ")");
  return success();
}
} // namespace

INFER_SIGNATURE(SoftmaxCrossEntropyOp) {
  if (failed(requireOperands(loc, operands, 2, 2)))
    return failure();
  auto logits = tensorOf(operands[0]);
  if (failed(
          checkCrossEntropyOperands(loc, logits, tensorOf(operands[1]), attrs)))
    return failure();
  types.push_back(RankedTensorType::get({}, logits.getElementType()));
  return success();
}

INFER_SIGNATURE(SoftmaxCrossEntropyGradOp) {
  if (failed(requireOperands(loc, operands, 3, 3)))
    return failure();
  auto logits = tensorOf(operands[0]);
  if (failed(
          checkCrossEntropyOperands(loc, logits, tensorOf(operands[1]), attrs)))
    return failure();
  auto dloss = tensorOf(operands[2]);
  if (dloss != RankedTensorType::get({}, logits.getElementType()))
    return fail(loc, "dloss " + typeStr(dloss) +
                         " must be a scalar of the logits' element type");
  types.push_back(logits);
  return success();
}

namespace {
/// A backward window op's forward shapes must give back the gradient it
/// takes: `grad` is what the forward op with this input and kernel made.
LogicalResult checkForwardWindow(Loc loc, RankedTensorType input,
                                 ArrayRef<int64_t> kernel, DictionaryAttr attrs,
                                 int64_t channels, RankedTensorType grad) {
  SmallVector<Type> forward;
  if (failed(inferWindow(loc, input, kernel, attrs, channels,
                         intAttr(attrs, "ceil_mode", 0) != 0, forward)))
    return failure();
  if (forward.front() != grad)
    return fail(loc, "gradient " + typeStr(grad) +
                         " is not what the forward op makes of input " +
                         typeStr(input) + " (" +
                         typeStr(cast<RankedTensorType>(forward.front())) +
                         ")");
  return success();
}

/// The channels-first view of an image operand of a backward op: its
/// checks are the channels-first ones.
RankedTensorType firstOrderOf(RankedTensorType t, DictionaryAttr attrs) {
  if (!attrs.get("channels_last") || t.getRank() < 3)
    return t;
  return RankedTensorType::get(toChannelsFirst(t.getShape()),
                               t.getElementType());
}

FailureOr<RankedTensorType> shapeFromAttr(Loc loc, DictionaryAttr attrs,
                                          StringRef name, Type elementType) {
  auto shape = intsAttr(attrs, name);
  if (!shape || shape->size() < 3 ||
      llvm::any_of(*shape, [](int64_t d) { return d < 1; }))
    return fail(loc,
                "needs '" + name + "' of rank >= 3 with positive dimensions");
  auto type = RankedTensorType::get(*shape, elementType);
  if (std::string why = tensorSizeProblem(type); !why.empty())
    return fail(loc, "'" + name + "' " + why);
  return type;
}

/// Convolution gradients: the input and weight of the forward op, the
/// group checked as the forward op checks it.
LogicalResult checkConvGradient(Loc loc, RankedTensorType x, RankedTensorType w,
                                RankedTensorType grad, DictionaryAttr attrs) {
  x = firstOrderOf(x, attrs);
  w = firstOrderOf(w, attrs);
  grad = firstOrderOf(grad, attrs);
  if (x.getRank() != w.getRank() || grad.getRank() != x.getRank())
    return fail(loc, "input " + typeStr(x) + ", weight " + typeStr(w) +
                         " and gradient " + typeStr(grad) +
                         " must have one rank");
  int64_t group = intAttr(attrs, "group", 1);
  if (group < 1 || x.getDimSize(1) % group ||
      x.getDimSize(1) / group != w.getDimSize(1) || w.getDimSize(0) % group)
    return fail(loc, "input channels " + Twine(x.getDimSize(1)) +
                         " do not match weight " + typeStr(w) + " with group " +
                         Twine(group));
  return checkForwardWindow(loc, x, w.getShape().drop_front(2), attrs,
                            w.getDimSize(0), grad);
}
} // namespace

INFER_SIGNATURE(ConvGradInputOp) {
  if (failed(requireOperands(loc, operands, 2, 2)))
    return failure();
  auto grad = tensorOf(operands[0]), w = tensorOf(operands[1]);
  auto x = shapeFromAttr(loc, attrs, "input_shape", grad.getElementType());
  if (failed(x) || failed(checkConvGradient(loc, *x, w, grad, attrs)))
    return failure();
  types.push_back(*x);
  return success();
}

INFER_SIGNATURE(ConvGradWeightOp) {
  if (failed(requireOperands(loc, operands, 2, 2)))
    return failure();
  auto x = tensorOf(operands[0]), grad = tensorOf(operands[1]);
  auto w = shapeFromAttr(loc, attrs, "weight_shape", grad.getElementType());
  if (failed(w) || failed(checkConvGradient(loc, x, *w, grad, attrs)))
    return failure();
  types.push_back(*w);
  return success();
}

INFER_SIGNATURE(MaxPoolGradOp) {
  if (failed(requireOperands(loc, operands, 2, 2)))
    return failure();
  auto grad = tensorOf(operands[0]), x = tensorOf(operands[1]);
  auto kernel = intsAttr(attrs, "kernel_shape");
  if (!kernel)
    return fail(loc, "needs 'kernel_shape'");
  if (x.getRank() < 3)
    return fail(loc, "input must have rank >= 3");
  auto first = firstOrderOf(x, attrs);
  if (failed(checkForwardWindow(loc, first, *kernel, attrs, first.getDimSize(1),
                                firstOrderOf(grad, attrs))))
    return failure();
  types.push_back(x);
  return success();
}

INFER_SIGNATURE(AvgPoolGradOp) {
  if (failed(requireOperands(loc, operands, 1, 1)))
    return failure();
  auto grad = tensorOf(operands[0]);
  auto kernel = intsAttr(attrs, "kernel_shape");
  if (!kernel)
    return fail(loc, "needs 'kernel_shape'");
  auto x = shapeFromAttr(loc, attrs, "input_shape", grad.getElementType());
  if (failed(x))
    return failure();
  auto first = firstOrderOf(*x, attrs);
  if (failed(checkForwardWindow(loc, first, *kernel, attrs, first.getDimSize(1),
                                firstOrderOf(grad, attrs))))
    return failure();
  types.push_back(*x);
  return success();
}

namespace {
/// Batch normalization's per-channel operands: `count` of them from
/// `first`, each with one float per channel of `x`.
LogicalResult checkPerChannel(Loc loc, RankedTensorType x, ValueRange operands,
                              unsigned first, unsigned count,
                              DictionaryAttr attrs) {
  x = firstOrderOf(x, attrs);
  if (x.getRank() < 2 || !isa<FloatType>(x.getElementType()))
    return fail(loc, "input " + typeStr(x) +
                         " must be floats with a channel dimension 1");
  for (unsigned i = first; i < first + count; ++i) {
    auto t = tensorOf(operands[i]);
    if (t.getRank() != 1 || t.getDimSize(0) != x.getDimSize(1) ||
        t.getElementType() != x.getElementType())
      return fail(loc, "operand " + Twine(i) + " " + typeStr(t) +
                           " must hold one " + typeStr(x.getElementType()) +
                           " per channel (" + Twine(x.getDimSize(1)) + ")");
  }
  return success();
}
} // namespace

INFER_SIGNATURE(BatchNormTrainOp) {
  if (failed(requireOperands(loc, operands, 3, 4)))
    return failure();
  auto x = tensorOf(operands[0]);
  if (failed(checkPerChannel(loc, x, operands, 1, 2, attrs)))
    return failure();
  if (operands.size() == 4 && tensorOf(operands[3]) != x)
    return fail(loc, "addend " + typeStr(tensorOf(operands[3])) +
                         " must have the input's type " + typeStr(x));
  auto perChannel = tensorOf(operands[1]);
  types.append({x, perChannel, perChannel});
  return success();
}

INFER_SIGNATURE(BatchNormGradOp) {
  if (failed(requireOperands(loc, operands, 5, 6)))
    return failure();
  auto grad = tensorOf(operands[0]), x = tensorOf(operands[1]);
  if (grad != x)
    return fail(loc, "gradient " + typeStr(grad) +
                         " must have the input's type " + typeStr(x));
  if (failed(checkPerChannel(loc, x, operands, 2, operands.size() - 2, attrs)))
    return failure();
  // The ReLU mask is computed again from the norm's output, which needs
  // its bias.
  if (attrs && attrs.get("activation") && operands.size() != 6)
    return fail(loc, "a fused activation needs the norm's bias (operand 5) "
                     "to compute the norm's output again");
  auto perChannel = tensorOf(operands[2]);
  types.append({x, perChannel, perChannel});
  return success();
}

INFER_SIGNATURE(AllReduceOp) {
  // Each mean has its input's type (the verifier asks for at least one).
  llvm::append_range(types, operands.getTypes());
  return success();
}

INFER_SIGNATURE(DropoutOp) {
  if (failed(requireOperands(loc, operands, 3, 3)))
    return failure();
  auto x = tensorOf(operands[0]);
  if (!isa<FloatType>(x.getElementType()))
    return fail(loc, "input " + typeStr(x) + " must be floats");
  for (unsigned i : {1u, 2u}) {
    auto t = tensorOf(operands[i]);
    if (t.getRank() != 0 || !t.getElementType().isInteger(64))
      return fail(loc, Twine(i == 1 ? "step " : "seed ") + typeStr(t) +
                           " must be an int64 scalar (tensor<i64>)");
  }
  if (auto ratio = attrs.getAs<FloatAttr>("ratio")) {
    double r = ratio.getValueAsDouble();
    if (!(r >= 0 && r < 1))
      return fail(loc, "ratio " + Twine(std::to_string(r)) +
                           " must be in [0, 1) (the probability of dropping "
                           "an element)");
  }
  // Four elements per counter value, whose element part is 32 bits.
  if (x.getNumElements() > (int64_t(1) << 34))
    return fail(loc, "input " + typeStr(x) +
                         " has more than 2^34 elements, past the random "
                         "generator's counter");
  types.push_back(x);
  return success();
}
