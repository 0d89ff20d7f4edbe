//===- OnnxOps.cpp - Translation of each supported ONNX operator ----------===//
//
// Each handler normalizes ONNX's many spellings (attributes that became
// inputs across opsets, negative axes, auto_pad, defaults) into the graph
// dialect's explicit form. Shape rules live in the ops, not here.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/ImportHelpers.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/InterleavedRange.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>

namespace mlir::partc::onnx_import {

namespace {

/// Kernel extents, strides and dilations beyond this are refused before
/// window arithmetic multiplies them.
constexpr int64_t kMaxWindowParameter = int64_t(1) << 31;

NodeHandler unary(StringRef op) {
  return [op](NodeImporter &n) -> LogicalResult {
    if (failed(requireInputs(n, 1)))
      return failure();
    return emit(n, n.build1(op, {n.input(0)}));
  };
}

/// Before opset 7, `broadcast=1` aligned the right operand with the left at
/// `axis` (default: trailing). Reshaping the right operand to the left's rank
/// turns that into numpy broadcasting.
FailureOr<Value> legacyBroadcast(NodeImporter &n, Value lhs, Value rhs) {
  if (n.opset() >= 7 || n.attrInt("broadcast", 0) == 0)
    return rhs;
  int64_t lr = rankOf(lhs), rr = rankOf(rhs);
  int64_t axis = n.attrInt("axis", lr - rr);
  if (axis < 0)
    axis += lr;
  if (axis < 0 || axis + rr > lr)
    return n.error() << "legacy broadcast axis " << axis << " does not fit",
           failure();
  SmallVector<int64_t> shape(lr, 1);
  for (int64_t i = 0; i < rr; ++i)
    shape[axis + i] = shapeOf(rhs)[i];
  return n.build1("reshape", {rhs}, {n.ints("shape", shape)});
}

NodeHandler binary(StringRef op) {
  return [op](NodeImporter &n) -> LogicalResult {
    if (failed(requireInputs(n, 2)))
      return failure();
    auto rhs = legacyBroadcast(n, n.input(0), n.input(1));
    if (failed(rhs))
      return failure();
    return emit(n, n.build1(op, {n.input(0), *rhs}));
  };
}

/// Sum, Max, Min, Mean over any number of inputs.
NodeHandler variadic(StringRef op, bool mean) {
  return [op, mean](NodeImporter &n) -> LogicalResult {
    if (n.numInputs() == 0 || failed(requireInputs(n, n.numInputs())))
      return n.error() << "expects at least one input";
    Value acc = n.input(0);
    for (size_t i = 1; i < n.numInputs(); ++i) {
      auto r = n.build1(op, {acc, n.input(i)});
      if (failed(r))
        return failure();
      acc = *r;
    }
    if (mean && n.numInputs() > 1) {
      Type et = elemOf(acc);
      if (!isa<FloatType>(et))
        return n.error() << "Mean needs a float type";
      auto scalar = RankedTensorType::get({}, et);
      std::vector<uint8_t> bytes(et.isF64() ? 8 : 4);
      double c = static_cast<double>(n.numInputs());
      if (et.isF64())
        std::memcpy(bytes.data(), &c, 8);
      else {
        float f = static_cast<float>(c);
        std::memcpy(bytes.data(), &f, 4);
      }
      Value count = n.constant(scalar, bytes);
      auto r = n.build1("div", {acc, count});
      if (failed(r))
        return failure();
      acc = *r;
    }
    n.results.push_back(acc);
    return success();
  };
}

LogicalResult importClip(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  SmallVector<NamedAttribute> attrs;
  if (n.opset() < 11) {
    if (n.attr("min"))
      attrs.push_back(n.f64("min", n.attrFloat("min", 0)));
    if (n.attr("max"))
      attrs.push_back(n.f64("max", n.attrFloat("max", 0)));
  } else {
    for (auto [idx, name] :
         {std::pair<int, const char *>{1, "min"}, {2, "max"}}) {
      if (!n.input(idx))
        continue;
      auto v = n.constFloats(n.input(idx), name);
      if (failed(v) || v->size() != 1)
        return failed(v)
                   ? failure()
                   : (n.error() << name << " must be a scalar", failure());
      attrs.push_back(n.f64(name, (*v)[0]));
    }
  }
  return emit(n, n.build1("clip", {n.input(0)}, attrs));
}

LogicalResult importSoftmax(NodeImporter &n, StringRef op) {
  if (failed(requireInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  int64_t rank = rankOf(x);
  if (n.opset() >= 13) {
    auto axis = normAxis(n, n.attrInt("axis", -1), rank);
    if (failed(axis))
      return failure();
    return emit(n, n.build1(op, {x}, {n.i64("axis", *axis)}));
  }
  // Before opset 13 the input is coerced to 2-D at `axis`.
  int64_t axisAttr = n.attrInt("axis", 1);
  int64_t axis = axisAttr < 0 ? axisAttr + rank : axisAttr;
  if (axis < 0 || axis > rank)
    return n.error() << "axis " << axisAttr << " is out of range";
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? outer : inner) *= shape[i];
  auto flat = n.build1("reshape", {x}, {n.ints("shape", {outer, inner})});
  if (failed(flat))
    return failure();
  auto sm = n.build1(op, {*flat}, {n.i64("axis", 1)});
  if (failed(sm))
    return failure();
  return emit(n, n.build1("reshape", {*sm}, {n.ints("shape", shape)}));
}

LogicalResult importCast(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  Type to = elementTypeFor(n.builder().getContext(), n.attrInt("to", 0));
  if (!to)
    return n.error() << "cast to data type " << n.attrInt("to", 0)
                     << " is not supported";
  if (to == elemOf(n.input(0))) {
    n.results.push_back(n.input(0));
    return success();
  }
  return emit(n, n.build1("cast", {n.input(0)},
                          {n.builder().getNamedAttr("to", TypeAttr::get(to))}));
}

LogicalResult importReshape(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  auto target = n.constInts(n.input(1), "the shape input");
  if (failed(target))
    return failure();
  ArrayRef<int64_t> in = shapeOf(n.input(0));
  bool allowZero = n.attrInt("allowzero", 0) != 0;
  SmallVector<int64_t> shape;
  int64_t known = 1, inferIndex = -1;
  int64_t total = std::accumulate(in.begin(), in.end(), int64_t(1),
                                  std::multiplies<int64_t>());
  for (auto [i, d] : llvm::enumerate(*target)) {
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return n.error() << "shape entry 0 at " << i << " has no input dim";
      d = in[i];
    }
    if (d == -1) {
      if (inferIndex >= 0)
        return n.error() << "shape has more than one -1";
      inferIndex = i;
      shape.push_back(-1);
      continue;
    }
    if (d < 0)
      return n.error() << "invalid shape entry " << d;
    if (llvm::MulOverflow(known, d, known))
      return n.error() << "shape " << llvm::interleaved_array(*target)
                       << " has more elements than 64 bits count";
    shape.push_back(d);
  }
  if (inferIndex >= 0) {
    if (known == 0 || total % known)
      return n.error() << "cannot infer -1: " << total
                       << " elements do not divide by " << known;
    shape[inferIndex] = total / known;
  }
  return emit(n, n.build1("reshape", {n.input(0)}, {n.ints("shape", shape)}));
}

LogicalResult importFlatten(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  ArrayRef<int64_t> in = shapeOf(n.input(0));
  int64_t rank = in.size(), axis = n.attrInt("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return n.error() << "axis " << n.attrInt("axis", 1) << " is out of range";
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? outer : inner) *= in[i];
  return emit(
      n, n.build1("reshape", {n.input(0)}, {n.ints("shape", {outer, inner})}));
}

LogicalResult importSqueeze(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  auto axes = axesFromAttrOrInput(n, 13, 1);
  if (failed(axes))
    return failure();
  ArrayRef<int64_t> in = shapeOf(n.input(0));
  SmallVector<bool> drop(in.size(), false);
  if (axes->empty()) {
    for (size_t i = 0; i < in.size(); ++i)
      drop[i] = in[i] == 1;
  }
  for (int64_t a : *axes) {
    auto axis = normAxis(n, a, in.size());
    if (failed(axis))
      return failure();
    if (in[*axis] != 1)
      return n.error() << "cannot squeeze dimension " << *axis << " of size "
                       << in[*axis];
    drop[*axis] = true;
  }
  SmallVector<int64_t> shape;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i])
      shape.push_back(in[i]);
  return emit(n, n.build1("reshape", {n.input(0)}, {n.ints("shape", shape)}));
}

LogicalResult importUnsqueeze(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  auto axes = axesFromAttrOrInput(n, 13, 1);
  if (failed(axes))
    return failure();
  ArrayRef<int64_t> in = shapeOf(n.input(0));
  int64_t outRank = in.size() + axes->size();
  SmallVector<bool> inserted(outRank, false);
  for (int64_t a : *axes) {
    auto axis = normAxis(n, a, outRank);
    if (failed(axis))
      return failure();
    if (inserted[*axis])
      return n.error() << "axis " << a << " repeats";
    inserted[*axis] = true;
  }
  SmallVector<int64_t> shape;
  size_t next = 0;
  for (int64_t i = 0; i < outRank; ++i)
    shape.push_back(inserted[i] ? 1 : in[next++]);
  return emit(n, n.build1("reshape", {n.input(0)}, {n.ints("shape", shape)}));
}

LogicalResult importTranspose(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  int64_t rank = rankOf(n.input(0));
  SmallVector<int64_t> perm;
  if (auto p = n.attrInts("perm"))
    perm = *p;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  return emit(n, n.build1("transpose", {n.input(0)}, {n.ints("perm", perm)}));
}

LogicalResult importConcat(NodeImporter &n) {
  if (n.numInputs() == 0 || failed(requireInputs(n, n.numInputs())))
    return n.error() << "expects inputs";
  auto axis = normAxis(n, n.attrInt("axis", 0), rankOf(n.input(0)));
  if (failed(axis))
    return failure();
  SmallVector<Value> inputs;
  for (size_t i = 0; i < n.numInputs(); ++i)
    inputs.push_back(n.input(i));
  return emit(n, n.build1("concat", inputs, {n.i64("axis", *axis)}));
}

LogicalResult importSplit(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  ArrayRef<int64_t> in = shapeOf(n.input(0));
  auto axis = normAxis(n, n.attrInt("axis", 0), in.size());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> sizes;
  int64_t parts = n.numOutputs();
  if (n.opset() < 13) {
    if (auto s = n.attrInts("split"))
      sizes = *s;
  } else if (n.input(1)) {
    auto s = n.constInts(n.input(1), "the split input");
    if (failed(s))
      return failure();
    sizes = *s;
  }
  if (sizes.empty()) {
    if (n.opset() >= 18 && n.attr("num_outputs"))
      parts = n.attrInt("num_outputs", parts);
    int64_t dim = in[*axis];
    if (parts < 1 || parts > static_cast<int64_t>(n.numOutputs()))
      return n.error() << "cannot split into " << parts << " parts with "
                       << n.numOutputs() << " outputs";
    int64_t chunk = (dim + parts - 1) / parts;
    if (n.opset() < 18 && dim % parts)
      return n.error() << "dimension " << dim << " does not split evenly into "
                       << parts;
    for (int64_t p = 0, left = dim; p < parts; ++p) {
      sizes.push_back(std::min(chunk, left));
      left -= sizes.back();
    }
  }
  auto r =
      n.build("split", {n.input(0)},
              {n.i64("axis", *axis), n.ints("sizes", sizes)}, sizes.size());
  if (failed(r))
    return failure();
  n.results.assign(r->begin(), r->end());
  return success();
}

LogicalResult importSlice(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  ArrayRef<int64_t> in = shapeOf(n.input(0));
  int64_t rank = in.size();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (n.opset() < 10) {
    starts = n.attrInts("starts").value_or(SmallVector<int64_t>());
    ends = n.attrInts("ends").value_or(SmallVector<int64_t>());
    axes = n.attrInts("axes").value_or(SmallVector<int64_t>());
  } else {
    if (failed(requireInputs(n, 3)))
      return failure();
    auto s = n.constInts(n.input(1), "starts");
    auto e = n.constInts(n.input(2), "ends");
    if (failed(s) || failed(e))
      return failure();
    starts = *s;
    ends = *e;
    if (n.input(3)) {
      auto a = n.constInts(n.input(3), "axes");
      if (failed(a))
        return failure();
      axes = *a;
    }
    if (n.input(4)) {
      auto st = n.constInts(n.input(4), "steps");
      if (failed(st))
        return failure();
      steps = *st;
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return n.error() << "starts, ends, axes and steps differ in length";
  SmallVector<int64_t> fs(rank, 0), fe(in.begin(), in.end()), fst(rank, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = normAxis(n, axes[i], rank);
    if (failed(axis))
      return failure();
    int64_t dim = in[*axis], s = starts[i], e = ends[i], st = steps[i];
    if (st == 0)
      return n.error() << "slice step must not be 0";
    if (s < 0)
      s += dim;
    if (e < 0)
      e += dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    fs[*axis] = s;
    fe[*axis] = e;
    fst[*axis] = st;
  }
  // An empty result along a dimension has any in-range start.
  for (int64_t d = 0; d < rank; ++d)
    if (in[d] == 0)
      fs[d] = 0;
  return emit(n, n.build1("slice", {n.input(0)},
                          {n.ints("starts", fs), n.ints("ends", fe),
                           n.ints("steps", fst)}));
}

LogicalResult importGather(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  auto axis = normAxis(n, n.attrInt("axis", 0), rankOf(n.input(0)));
  if (failed(axis))
    return failure();
  return emit(
      n, n.build1("gather", {n.input(0), n.input(1)}, {n.i64("axis", *axis)}));
}

LogicalResult importGatherElements(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  auto axis = normAxis(n, n.attrInt("axis", 0), rankOf(n.input(0)));
  if (failed(axis))
    return failure();
  return emit(n, n.build1("gather_elements", {n.input(0), n.input(1)},
                          {n.i64("axis", *axis)}));
}

/// Resize 10 (inputs X, scales), 11 to 19 (X, roi, scales, sizes; axes from
/// 18): sizes and scales become attributes, and what partc does not
/// implement is refused by name.
LogicalResult importResize(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t rank = rankOf(x);
  std::string mode = n.attrString("mode", "nearest");
  if (mode == "cubic")
    return n.error() << "Resize mode 'cubic' is not supported; partc "
                        "implements nearest and linear";
  if (n.attrInt("antialias", 0) != 0)
    return n.error() << "Resize with antialias is not supported";
  std::string coordinates =
      n.opset() < 11
          ? "asymmetric"
          : n.attrString("coordinate_transformation_mode", "half_pixel");
  if (coordinates == "tf_crop_and_resize")
    return n.error() << "Resize's coordinate_transformation_mode "
                        "'tf_crop_and_resize' is not supported";
  // Resize 10 rounds nearest coordinates down, as Upsample did.
  std::string rounding =
      n.opset() < 11 ? "floor"
                     : n.attrString("nearest_mode", "round_prefer_floor");
  SmallVector<int64_t> axes;
  if (auto a = n.attrInts("axes")) {
    for (int64_t axis : *a) {
      auto normalized = normAxis(n, axis, rank);
      if (failed(normalized))
        return failure();
      axes.push_back(*normalized);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  SmallVector<int64_t> sizes(in);
  SmallVector<double> scales(rank, 1.0);
  Value scalesInput = n.input(n.opset() < 11 ? 1 : 2);
  Value sizesInput = n.opset() < 11 ? Value() : n.input(3);
  // An empty tensor stands for an absent input.
  if (scalesInput &&
      cast<RankedTensorType>(scalesInput.getType()).getNumElements() == 0)
    scalesInput = Value();
  if (sizesInput &&
      cast<RankedTensorType>(sizesInput.getType()).getNumElements() == 0)
    sizesInput = Value();
  if (!scalesInput == !sizesInput)
    return n.error() << "Resize needs exactly one of scales and sizes";
  if (sizesInput) {
    if (n.attrString("keep_aspect_ratio_policy", "stretch") != "stretch")
      return n.error() << "Resize's keep_aspect_ratio_policy '"
                       << n.attrString("keep_aspect_ratio_policy", "")
                       << "' is not supported (stretch only)";
    auto given = n.constInts(sizesInput, "sizes");
    if (failed(given))
      return failure();
    if (given->size() != axes.size())
      return n.error() << "Resize has " << given->size() << " sizes for "
                       << axes.size() << " axes";
    for (auto [i, axis] : llvm::enumerate(axes)) {
      sizes[axis] = (*given)[i];
      scales[axis] = static_cast<double>((*given)[i]) / in[axis];
    }
  } else {
    auto given = n.constFloats(scalesInput, "scales");
    if (failed(given))
      return failure();
    if (given->size() != axes.size())
      return n.error() << "Resize has " << given->size() << " scales for "
                       << axes.size() << " axes";
    for (auto [i, axis] : llvm::enumerate(axes)) {
      scales[axis] = (*given)[i];
      double size = std::floor(in[axis] * (*given)[i]);
      // Checked before the conversion, which is undefined out of range.
      if (!(scales[axis] > 0 && size >= 0 && size < 0x1p50))
        return n.error() << "Resize scale " << scales[axis] << " of axis "
                         << axis << " gives " << size
                         << " elements; scales must be positive and finite";
      sizes[axis] = static_cast<int64_t>(size);
    }
  }
  OpBuilder &b = n.builder();
  return emit(
      n, n.build1("resize", {x},
                  {n.ints("sizes", sizes),
                   b.getNamedAttr("scales", b.getDenseF64ArrayAttr(scales)),
                   n.str("mode", mode),
                   n.str("coordinate_transformation_mode", coordinates),
                   n.str("nearest_mode", rounding)}));
}

LogicalResult importExpand(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  auto shape = n.constInts(n.input(1), "the shape input");
  if (failed(shape))
    return failure();
  return emit(n, n.build1("expand", {n.input(0)}, {n.ints("shape", *shape)}));
}

LogicalResult importPow(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  Value base = n.input(0);
  auto legacy = legacyBroadcast(n, base, n.input(1));
  if (failed(legacy))
    return failure();
  Value exponent = *legacy;
  if (elemOf(exponent) != elemOf(base)) {
    auto c =
        n.build1("cast", {exponent},
                 {n.builder().getNamedAttr("to", TypeAttr::get(elemOf(base)))});
    if (failed(c))
      return failure();
    exponent = *c;
  }
  return emit(n, n.build1("pow", {base, exponent}));
}

LogicalResult importMod(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  bool fmod = n.attrInt("fmod", 0) != 0;
  bool isFloat = isa<FloatType>(elemOf(n.input(0)));
  if (fmod != isFloat)
    return n.error() << "Mod with fmod=" << fmod << " on " << elemOf(n.input(0))
                     << " is not supported";
  return emit(n, n.build1("mod", {n.input(0), n.input(1)}));
}

/// Explicit [begin..., end...] pads from `pads` or `auto_pad`.
FailureOr<SmallVector<int64_t>> windowPads(NodeImporter &n,
                                           ArrayRef<int64_t> spatialIn,
                                           ArrayRef<int64_t> kernel,
                                           ArrayRef<int64_t> strides,
                                           ArrayRef<int64_t> dilations) {
  size_t k = spatialIn.size();
  std::string autoPad = n.attrString("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    SmallVector<int64_t> pads =
        n.attrInts("pads").value_or(SmallVector<int64_t>(2 * k, 0));
    if (pads.size() != 2 * k)
      return n.error() << "pads must have " << 2 * k << " entries", failure();
    return pads;
  }
  SmallVector<int64_t> pads(2 * k, 0);
  if (autoPad == "VALID")
    return pads;
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return n.error() << "unknown auto_pad '" << autoPad << "'", failure();
  for (size_t i = 0; i < k; ++i) {
    if (i >= strides.size() || strides[i] < 1)
      return n.error() << "strides must be positive with auto_pad " << autoPad
                       << " (one per spatial dimension)",
             failure();
    // Bounded so that the padding arithmetic below cannot overflow.
    if (strides[i] > kMaxWindowParameter || kernel[i] < 1 ||
        kernel[i] > kMaxWindowParameter || dilations[i] < 1 ||
        dilations[i] > kMaxWindowParameter)
      return n.error() << "kernel " << kernel[i] << ", stride " << strides[i]
                       << " and dilation " << dilations[i]
                       << " must lie in [1, 2^31] with auto_pad " << autoPad,
             failure();
    // A dynamic size (MLIR's sentinel is negative) has no padding yet.
    if (spatialIn[i] < 0 || spatialIn[i] > (int64_t(1) << 48))
      return n.error() << "auto_pad " << autoPad
                       << " needs a known spatial size, got "
                       << (spatialIn[i] < 0 ? std::string("a dynamic one")
                                            : std::to_string(spatialIn[i])),
             failure();
    int64_t out = (spatialIn[i] + strides[i] - 1) / strides[i];
    int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] +
                                             (kernel[i] - 1) * dilations[i] +
                                             1 - spatialIn[i]);
    int64_t small = total / 2, big = total - small;
    pads[i] = autoPad == "SAME_UPPER" ? small : big;
    pads[i + k] = autoPad == "SAME_UPPER" ? big : small;
  }
  return pads;
}

LogicalResult importConv(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  Value x = n.input(0), w = n.input(1);
  if (rankOf(x) < 3 || rankOf(w) != rankOf(x))
    return n.error() << "input and weight must have the same rank >= 3";
  size_t k = rankOf(x) - 2;
  SmallVector<int64_t> kernel(shapeOf(w).drop_front(2));
  SmallVector<int64_t> strides =
      n.attrInts("strides").value_or(SmallVector<int64_t>(k, 1));
  SmallVector<int64_t> dilations =
      n.attrInts("dilations").value_or(SmallVector<int64_t>(k, 1));
  if (strides.size() != k || dilations.size() != k)
    return n.error() << "strides and dilations need " << k << " entries";
  auto pads =
      windowPads(n, shapeOf(x).drop_front(2), kernel, strides, dilations);
  if (failed(pads))
    return failure();
  SmallVector<Value> operands = {x, w};
  if (n.input(2))
    operands.push_back(n.input(2));
  return emit(n, n.build1("conv", operands,
                          {n.ints("strides", strides), n.ints("pads", *pads),
                           n.ints("dilations", dilations),
                           n.i64("group", n.attrInt("group", 1))}));
}

/// ConvTranspose is the gradient of a convolution with respect to its input:
/// the convolution whose input has ConvTranspose's output shape.
LogicalResult importConvTranspose(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  Value x = n.input(0), w = n.input(1);
  if (rankOf(x) < 3 || rankOf(w) != rankOf(x))
    return n.error() << "input and weight must have the same rank >= 3";
  size_t k = rankOf(x) - 2;
  int64_t group = n.attrInt("group", 1);
  ArrayRef<int64_t> xs = shapeOf(x), ws = shapeOf(w);
  if (group < 1 || ws[0] != xs[1] || xs[1] % group != 0)
    return n.error() << "weight [" << ws << "] must have the input's " << xs[1]
                     << " channels first, divisible by group " << group;
  SmallVector<int64_t> kernel(ws.drop_front(2));
  auto ints = [&](StringRef name, int64_t dflt) {
    return n.attrInts(name).value_or(SmallVector<int64_t>(k, dflt));
  };
  SmallVector<int64_t> strides = ints("strides", 1),
                       dilations = ints("dilations", 1),
                       outputPadding = ints("output_padding", 0);
  if (strides.size() != k || dilations.size() != k || outputPadding.size() != k)
    return n.error() << "strides, dilations and output_padding need " << k
                     << " entries";
  SmallVector<int64_t> natural(k), pads(2 * k, 0);
  for (size_t i = 0; i < k; ++i) {
    if (strides[i] < 1 || strides[i] > kMaxWindowParameter ||
        dilations[i] < 1 || dilations[i] > kMaxWindowParameter ||
        kernel[i] < 1 || kernel[i] > kMaxWindowParameter)
      return n.error() << "kernel " << kernel[i] << ", stride " << strides[i]
                       << " and dilation " << dilations[i]
                       << " must lie in [1, 2^31]";
    if (outputPadding[i] < 0 || outputPadding[i] >= strides[i])
      return n.error() << "output_padding " << outputPadding[i]
                       << " must lie in [0, stride " << strides[i] << ")";
    natural[i] = strides[i] * (xs[2 + i] - 1) + outputPadding[i] +
                 (kernel[i] - 1) * dilations[i] + 1;
  }
  std::string autoPad = n.attrString("auto_pad", "NOTSET");
  auto outputShape = n.attrInts("output_shape");
  if (outputShape && outputShape->size() == k + 2)
    outputShape =
        SmallVector<int64_t>(outputShape->begin() + 2, outputShape->end());
  // Checked before any arithmetic: the attribute may hold anything.
  if (outputShape)
    for (int64_t extent : *outputShape)
      if (extent < 1 || extent > (int64_t(1) << 31))
        return n.error() << "output_shape " << extent
                         << " must lie in [1, 2^31]";
  if (!outputShape && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")) {
    outputShape.emplace();
    for (size_t i = 0; i < k; ++i)
      outputShape->push_back(xs[2 + i] * strides[i]);
  }
  if (outputShape) {
    if (outputShape->size() != k)
      return n.error() << "output_shape needs " << k << " spatial entries";
    for (size_t i = 0; i < k; ++i) {
      // ONNX's rule, with floor division; a negative end pad is extra
      // output padding (positions no input reaches).
      int64_t total = natural[i] - (*outputShape)[i];
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      bool upper = autoPad == "SAME_UPPER";
      pads[i] = upper ? half : total - half;
      pads[i + k] = std::max<int64_t>(0, total - pads[i]);
      if (pads[i] < 0)
        return n.error() << "output_shape " << (*outputShape)[i]
                         << " exceeds the " << natural[i]
                         << " positions the input reaches in dimension " << i;
    }
  } else if (autoPad == "NOTSET") {
    pads = n.attrInts("pads").value_or(SmallVector<int64_t>(2 * k, 0));
    if (pads.size() != 2 * k)
      return n.error() << "pads must have " << 2 * k << " entries";
  } else if (autoPad != "VALID") {
    return n.error() << "unknown auto_pad '" << autoPad << "'";
  }
  SmallVector<int64_t> outShape = {xs[0], ws[1] * group};
  for (size_t i = 0; i < k; ++i) {
    int64_t extent =
        outputShape ? (*outputShape)[i] : natural[i] - pads[i] - pads[i + k];
    int64_t extra = extent - (natural[i] - pads[i] - pads[i + k]);
    if (extra < 0 || extra + outputPadding[i] >= strides[i])
      return n.error() << "output_shape " << extent << " in dimension " << i
                       << " is not reachable with stride " << strides[i]
                       << " from " << natural[i] << " positions";
    if (pads[i] < 0 || pads[i + k] < 0 || extent < 1)
      return n.error() << "pads " << pads[i] << " and " << pads[i + k]
                       << " leave no output in dimension " << i << " (of "
                       << natural[i] << ")";
    outShape.push_back(extent);
  }
  auto y = n.build1("conv_grad_input", {x, w},
                    {n.ints("input_shape", outShape),
                     n.ints("strides", strides), n.ints("pads", pads),
                     n.ints("dilations", dilations), n.i64("group", group)});
  if (failed(y) || !n.input(2))
    return emit(n, y);
  Value bias = n.input(2);
  if (shapeOf(bias) != ArrayRef<int64_t>{outShape[1]})
    return n.error() << "bias must have shape [" << outShape[1] << "], got ["
                     << shapeOf(bias) << "]";
  SmallVector<int64_t> biasShape(k + 1, 1);
  biasShape[0] = outShape[1];
  OpChain c(n);
  return c.finish({c.op("add", {*y, c.reshape(bias, biasShape)})});
}

NodeHandler argReduce(StringRef op) {
  return [op](NodeImporter &n) -> LogicalResult {
    if (failed(requireInputs(n, 1)))
      return failure();
    auto axis = normAxis(n, n.attrInt("axis", 0), rankOf(n.input(0)));
    if (failed(axis))
      return failure();
    return emit(n, n.build1(op, {n.input(0)},
                            {n.i64("axis", *axis),
                             n.i64("keepdims", n.attrInt("keepdims", 1)),
                             n.i64("select_last_index",
                                   n.attrInt("select_last_index", 0))}));
  };
}

LogicalResult importCumSum(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  auto axes = n.constInts(n.input(1), "axis");
  if (failed(axes))
    return failure();
  if (axes->size() != 1)
    return n.error() << "axis must be a scalar, got " << axes->size()
                     << " values";
  auto axis = normAxis(n, (*axes)[0], rankOf(n.input(0)));
  if (failed(axis))
    return failure();
  return emit(n, n.build1("cum_sum", {n.input(0)},
                          {n.i64("axis", *axis),
                           n.i64("exclusive", n.attrInt("exclusive", 0)),
                           n.i64("reverse", n.attrInt("reverse", 0))}));
}

LogicalResult importTopK(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  int64_t k;
  if (n.opset() < 10) {
    k = n.attrInt("k", -1);
  } else {
    if (failed(requireInputs(n, 2)))
      return failure();
    auto ks = n.constInts(n.input(1), "K");
    if (failed(ks))
      return failure();
    if (ks->size() != 1)
      return n.error() << "K must hold one value, got " << ks->size();
    k = (*ks)[0];
  }
  auto axis = normAxis(n, n.attrInt("axis", -1), rankOf(n.input(0)));
  if (failed(axis))
    return failure();
  auto r = n.build("top_k", {n.input(0)},
                   {n.i64("axis", *axis), n.i64("k", k),
                    n.i64("largest", n.attrInt("largest", 1))},
                   2);
  if (failed(r))
    return failure();
  n.results.append(r->begin(), r->end());
  return success();
}

LogicalResult importPool(NodeImporter &n, StringRef op) {
  if (failed(requireInputs(n, 1)))
    return failure();
  bool indices = n.wantsOutput(1);
  if (indices && op != "max_pool")
    return n.error() << "only MaxPool has an Indices output";
  Value x = n.input(0);
  if (rankOf(x) < 3)
    return n.error() << "input must have rank >= 3";
  size_t k = rankOf(x) - 2;
  auto kernel = n.attrInts("kernel_shape");
  if (!kernel || kernel->size() != k)
    return n.error() << "kernel_shape must have " << k << " entries";
  SmallVector<int64_t> strides =
      n.attrInts("strides").value_or(SmallVector<int64_t>(k, 1));
  SmallVector<int64_t> dilations =
      n.attrInts("dilations").value_or(SmallVector<int64_t>(k, 1));
  if (strides.size() != k || dilations.size() != k)
    return n.error() << "strides and dilations need " << k << " entries";
  auto pads =
      windowPads(n, shapeOf(x).drop_front(2), *kernel, strides, dilations);
  if (failed(pads))
    return failure();
  SmallVector<NamedAttribute> attrs = {
      n.ints("kernel_shape", *kernel),
      n.ints("strides", strides),
      n.ints("pads", *pads),
      n.ints("dilations", dilations),
      n.i64("ceil_mode", n.attrInt("ceil_mode", 0)),
      n.i64("count_include_pad", n.attrInt("count_include_pad", 0))};
  if (!indices)
    return emit(n, n.build1(op, {x}, attrs));
  attrs.push_back(n.i64("storage_order", n.attrInt("storage_order", 0)));
  auto r = n.build("max_pool_with_indices", {x}, attrs, 2);
  if (failed(r))
    return failure();
  n.results.assign(r->begin(), r->end());
  return success();
}

LogicalResult importBatchNorm(NodeImporter &n) {
  if (failed(requireInputs(n, 5)))
    return failure();
  // An export made for training (PyTorch's TrainingMode.TRAINING; an eval
  // export folds batch norm into the convolution) marks the norm
  // training_mode from opset 14 and before that gives it the running
  // statistics' outputs. partc keeps those statistics as state itself.
  // Its statistics' outputs are left unset: the importer refuses them if
  // the graph reads them.
  bool trainingMode = n.attrInt("training_mode", 0) != 0;
  for (int output = 1; output < n.node().output_size(); ++output)
    trainingMode = trainingMode || (n.opset() < 14 && n.wantsOutput(output));
  if (n.attrInt("spatial", 1) != 1)
    return n.error() << "spatial=0 is not supported";
  SmallVector<NamedAttribute, 2> attrs{
      n.f64("epsilon", n.attrFloat("epsilon", 1e-5))};
  if (trainingMode)
    attrs.push_back(n.unit("training_mode"));
  // The running statistics' weight (PyTorch's 1 - momentum), which
  // training keeps: as the shortest decimal that gives the file's float,
  // so that PyTorch's 0.1 stays 0.1 rather than 1 - 0.9f.
  if (const auto *a = n.attr("momentum")) {
    float stored = a->f();
    double momentum = stored;
    for (int digits = 1; digits <= 9; ++digits) {
      char text[32];
      std::snprintf(text, sizeof text, "%.*g", digits, double(stored));
      if (std::strtof(text, nullptr) == stored) {
        momentum = std::strtod(text, nullptr);
        break;
      }
    }
    attrs.push_back(n.f64("momentum", momentum));
  }
  return emit(
      n, n.build1("batch_norm",
                  {n.input(0), n.input(1), n.input(2), n.input(3), n.input(4)},
                  attrs));
}

/// LayerNormalization with its Mean and InvStdDev outputs, spelled out in
/// primitive ops (the fused op has no statistics outputs).
LogicalResult importLayerNormWithStatistics(NodeImporter &n, int64_t axis) {
  Value x = n.input(0);
  Type et = elemOf(x);
  if (!isa<FloatType>(et))
    return n.error() << "LayerNormalization needs a float input";
  SmallVector<int64_t> axes;
  for (int64_t d = axis; d < rankOf(x); ++d)
    axes.push_back(d);
  auto reduceAttrs = [&]() {
    return SmallVector<NamedAttribute>{n.ints("axes", axes),
                                       n.i64("keepdims", 1)};
  };
  auto mean = n.build1("reduce_mean", {x}, reduceAttrs());
  if (failed(mean))
    return failure();
  auto centered = n.build1("sub", {x, *mean});
  if (failed(centered))
    return failure();
  auto squared = n.build1("mul", {*centered, *centered});
  if (failed(squared))
    return failure();
  auto var = n.build1("reduce_mean", {*squared}, reduceAttrs());
  if (failed(var))
    return failure();
  auto shifted = n.build1(
      "add", {*var, scalarConstant(n, et, n.attrFloat("epsilon", 1e-5))});
  if (failed(shifted))
    return failure();
  auto stddev = n.build1("sqrt", {*shifted});
  if (failed(stddev))
    return failure();
  auto inv = n.build1("reciprocal", {*stddev});
  if (failed(inv))
    return failure();
  auto normalized = n.build1("mul", {*centered, *inv});
  if (failed(normalized))
    return failure();
  auto y = n.build1("mul", {*normalized, n.input(1)});
  if (failed(y))
    return failure();
  if (n.input(2)) {
    y = n.build1("add", {*y, n.input(2)});
    if (failed(y))
      return failure();
  }
  n.results = {*y, *mean, *inv};
  return success();
}

LogicalResult importLayerNorm(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  auto axis = normAxis(n, n.attrInt("axis", -1), rankOf(n.input(0)));
  if (failed(axis))
    return failure();
  if (n.wantsOutput(1) || n.wantsOutput(2))
    return importLayerNormWithStatistics(n, *axis);
  SmallVector<Value> operands = {n.input(0), n.input(1)};
  if (n.input(2))
    operands.push_back(n.input(2));
  return emit(n, n.build1("layer_norm", operands,
                          {n.i64("axis", *axis),
                           n.f64("epsilon", n.attrFloat("epsilon", 1e-5))}));
}

/// RMSNormalization (opset 23): x / sqrt(mean(x^2) + epsilon) * scale over
/// dimensions [axis, rank), the scale broadcast to the normalized shape.
/// stash_type only names the type of the statistics, which partc keeps in
/// float32 or wider anyway.
LogicalResult importRmsNorm(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  Value x = n.input(0), scale = n.input(1);
  if (!isa<FloatType>(elemOf(x)) || elemOf(scale) != elemOf(x))
    return n.error() << "needs a float input and a scale "
                        "of the same type";
  auto axis = normAxis(n, n.attrInt("axis", -1), rankOf(x));
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> norm = shapeOf(x).drop_front(*axis);
  ArrayRef<int64_t> given = shapeOf(scale);
  // Leading ones beyond the normalized rank broadcast away.
  while (given.size() > norm.size() && given.front() == 1)
    given = given.drop_front();
  bool fits = given.size() <= norm.size();
  for (size_t i = 0; fits && i < given.size(); ++i) {
    int64_t want = norm[norm.size() - given.size() + i];
    fits = given[i] == want || given[i] == 1;
  }
  if (!fits)
    return n.error() << "scale of shape "
                     << llvm::interleaved_array(shapeOf(scale))
                     << " does not broadcast to the normalized shape "
                     << llvm::interleaved_array(norm) << " (axis " << *axis
                     << ")";
  if (shapeOf(scale) != norm) {
    auto expanded = n.build1("expand", {scale}, {n.ints("shape", norm)});
    if (failed(expanded))
      return failure();
    if (shapeOf(*expanded) != norm) {
      expanded = n.build1("reshape", {*expanded}, {n.ints("shape", norm)});
      if (failed(expanded))
        return failure();
    }
    scale = *expanded;
  }
  return emit(n, n.build1("rms_norm", {x, scale},
                          {n.i64("axis", *axis),
                           n.f64("epsilon", n.attrFloat("epsilon", 1e-5))}));
}

NodeHandler reduce(StringRef op, int64_t axesInputOpset) {
  return [op, axesInputOpset](NodeImporter &n) -> LogicalResult {
    if (failed(requireInputs(n, 1)))
      return failure();
    bool noop = false;
    auto axes = reductionAxes(n, axesInputOpset, noop);
    if (failed(axes))
      return failure();
    if (noop) {
      n.results.push_back(n.input(0));
      return success();
    }
    return emit(n, n.build1(op, {n.input(0)},
                            {n.ints("axes", *axes),
                             n.i64("keepdims", n.attrInt("keepdims", 1))}));
  };
}

LogicalResult importPad(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  int64_t rank = rankOf(n.input(0));
  SmallVector<int64_t> pads;
  double value = 0;
  if (n.opset() < 11) {
    pads = n.attrInts("pads").value_or(SmallVector<int64_t>());
    value = n.attrFloat("value", 0);
  } else {
    if (failed(requireInputs(n, 2)))
      return failure();
    auto p = n.constInts(n.input(1), "pads");
    if (failed(p))
      return failure();
    pads = *p;
    if (n.input(2)) {
      auto v = n.constFloats(n.input(2), "constant_value");
      if (failed(v) || v->size() != 1)
        return failed(v) ? failure()
                         : (n.error() << "constant_value must be a scalar",
                            failure());
      value = (*v)[0];
    }
    if (n.input(3)) {
      auto axes = n.constInts(n.input(3), "axes");
      if (failed(axes))
        return failure();
      if (pads.size() != 2 * axes->size())
        return n.error() << "pads must have two entries per axis";
      SmallVector<int64_t> full(2 * rank, 0);
      for (auto [i, a] : llvm::enumerate(*axes)) {
        auto axis = normAxis(n, a, rank);
        if (failed(axis))
          return failure();
        full[*axis] = pads[i];
        full[*axis + rank] = pads[i + axes->size()];
      }
      pads = full;
    }
  }
  std::string mode = n.attrString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return n.error() << "pad mode '" << mode << "' is not supported";
  return emit(n, n.build1("pad", {n.input(0)},
                          {n.ints("pads", pads), n.str("mode", mode),
                           n.f64("value", value)}));
}

Value i64Constant(NodeImporter &n, ArrayRef<int64_t> values, bool scalar) {
  auto type = RankedTensorType::get(
      scalar ? ArrayRef<int64_t>{} : ArrayRef<int64_t>{int64_t(values.size())},
      n.builder().getIntegerType(64));
  return n.constant(
      type, ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(values.data()),
                              values.size() * 8));
}

LogicalResult importShape(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(n.input(0));
  int64_t rank = shape.size();
  int64_t start = n.attrInt("start", 0), end = n.attrInt("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  SmallVector<int64_t> dims(shape.begin() + start, shape.begin() + end);
  n.results.push_back(i64Constant(n, dims, false));
  return success();
}

LogicalResult importSize(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  int64_t count = cast<RankedTensorType>(n.input(0).getType()).getNumElements();
  n.results.push_back(i64Constant(n, {count}, true));
  return success();
}

LogicalResult importConstant(NodeImporter &n) {
  // Tensor-valued Constants are handled by the model importer.
  if (const auto *a = n.attr("value_float")) {
    float f = a->f();
    n.results.push_back(
        n.constant(RankedTensorType::get({}, n.builder().getF32Type()),
                   ArrayRef<uint8_t>(reinterpret_cast<uint8_t *>(&f), 4)));
  } else if (const auto *a = n.attr("value_floats")) {
    std::vector<float> v(a->floats().begin(), a->floats().end());
    n.results.push_back(n.constant(
        RankedTensorType::get({int64_t(v.size())}, n.builder().getF32Type()),
        ArrayRef<uint8_t>(reinterpret_cast<uint8_t *>(v.data()),
                          4 * v.size())));
  } else if (const auto *a = n.attr("value_int")) {
    n.results.push_back(i64Constant(n, {a->i()}, true));
  } else if (const auto *a = n.attr("value_ints")) {
    SmallVector<int64_t> v(a->ints().begin(), a->ints().end());
    n.results.push_back(i64Constant(n, v, false));
  } else {
    return n.error() << "only tensor, float(s) and int(s) constants are "
                        "supported";
  }
  return success();
}

LogicalResult importConstantOfShape(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  auto shape = n.constInts(n.input(0), "the shape input");
  if (failed(shape))
    return failure();
  Type elem = n.builder().getF32Type();
  std::vector<uint8_t> one(4, 0);
  if (const auto *a = n.attr("value")) {
    elem = elementTypeFor(n.builder().getContext(), a->t().data_type());
    if (!elem)
      return n.error() << "unsupported value type";
    rt::DType dt = toDType(elem);
    one.assign(rt::dtypeSize(dt), 0);
    const auto &t = a->t();
    if (t.has_raw_data() && t.raw_data().size() == one.size())
      std::memcpy(one.data(), t.raw_data().data(), one.size());
    else if (t.float_data_size() == 1) {
      float v = t.float_data(0);
      std::memcpy(one.data(), &v, std::min<size_t>(4, one.size()));
    } else if (t.int64_data_size() == 1) {
      int64_t v = t.int64_data(0);
      std::memcpy(one.data(), &v, std::min<size_t>(8, one.size()));
    } else if (t.int32_data_size() == 1) {
      int32_t v = t.int32_data(0);
      if (elem.isInteger(1))
        one[0] = v != 0;
      else
        std::memcpy(one.data(), &v, std::min<size_t>(4, one.size()));
    } else if (t.double_data_size() == 1) {
      double v = t.double_data(0);
      std::memcpy(one.data(), &v, std::min<size_t>(8, one.size()));
    }
  }
  auto type = RankedTensorType::get(*shape, elem);
  std::string problem = graph::tensorSizeProblem(type);
  if (!problem.empty())
    return n.error() << "the filled tensor " << problem
                     << "; check the shape input";
  // One element: a splat, materialised only if a kernel needs it.
  n.results.push_back(n.constant(type, one));
  return success();
}

LogicalResult importRange(NodeImporter &n) {
  if (failed(requireInputs(n, 3)))
    return failure();
  Type elem = elemOf(n.input(0));
  auto s = n.constFloats(n.input(0), "start");
  auto l = n.constFloats(n.input(1), "limit");
  auto d = n.constFloats(n.input(2), "delta");
  if (failed(s) || failed(l) || failed(d))
    return failure();
  if (s->size() != 1 || l->size() != 1 || d->size() != 1)
    return n.error() << "start, limit and delta must be scalars, got "
                     << s->size() << ", " << l->size() << " and " << d->size()
                     << " values";
  double start = (*s)[0], limit = (*l)[0], delta = (*d)[0];
  if (delta == 0)
    return n.error() << "delta must not be 0";
  double steps = std::ceil((limit - start) / delta);
  // Checked before the conversion, which is undefined out of range.
  if (!(steps < 0x1p40))
    return n.error() << "Range from " << start << " to " << limit << " by "
                     << delta << " has " << steps
                     << " elements; start, limit and delta must be finite";
  int64_t count = std::max<int64_t>(0, static_cast<int64_t>(steps));
  // Integer ranges are computed exactly in int64 from values that doubles
  // hold exactly; the count bounds i * delta by about |limit - start|.
  if (!isa<FloatType>(elem) &&
      (std::fabs(start) > 0x1p53 || std::fabs(limit) > 0x1p53 ||
       std::fabs(delta) > 0x1p53))
    return n.error() << "integer Range bounds and step must be at most 2^53 "
                        "in magnitude";
  rt::DType dt = toDType(elem);
  size_t es = rt::dtypeSize(dt);
  std::vector<uint8_t> bytes(count * es);
  for (int64_t i = 0; i < count; ++i) {
    double v = start + i * delta;
    uint8_t *p = bytes.data() + i * es;
    switch (dt) {
    case rt::DType::F32: {
      float f = v;
      std::memcpy(p, &f, 4);
      break;
    }
    case rt::DType::F64:
      std::memcpy(p, &v, 8);
      break;
    case rt::DType::I64: {
      int64_t x =
          static_cast<int64_t>((*s)[0]) + i * static_cast<int64_t>(delta);
      std::memcpy(p, &x, 8);
      break;
    }
    case rt::DType::I32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case rt::DType::I16: {
      int16_t x = static_cast<int16_t>(v);
      std::memcpy(p, &x, 2);
      break;
    }
    default:
      return n.error() << "unsupported Range type " << elem;
    }
  }
  n.results.push_back(n.constant(RankedTensorType::get({count}, elem), bytes));
  return success();
}

LogicalResult importDropout(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  bool trainingMode = false;
  if (Value training = n.input(2)) {
    Attribute attr;
    if (!matchPattern(training, m_Constant(&attr)))
      return n.notConstant(training, "training_mode"), failure();
    // A scalar by the spec; read no more (a huge folded constant there
    // took minutes to expand, a fuzz finding).
    auto elements = cast<ElementsAttr>(attr);
    if (elements.getNumElements() != 1)
      return n.error() << "training_mode must be a scalar, got "
                       << elements.getNumElements() << " values";
    for (uint8_t b : elementsToBytes(elements))
      trainingMode = trainingMode || b;
  }
  double ratio = 0.5;
  if (trainingMode && n.input(1)) {
    auto ratios = n.constFloats(n.input(1), "ratio");
    if (failed(ratios))
      return failure();
    if (ratios->size() != 1)
      return n.error() << "ratio must be a scalar, got " << ratios->size()
                       << " values";
    ratio = ratios->front();
  }
  // Dropping nothing is the identity in training mode too (torchvision's
  // Swin exports attention dropout of ratio 0 in training mode).
  if (!trainingMode || ratio == 0) {
    n.results.push_back(n.input(0));
    if (n.wantsOutput(1)) {
      auto type =
          RankedTensorType::get(shapeOf(n.input(0)), n.builder().getI1Type());
      // All true: one element, a splat.
      n.results.push_back(n.constant(type, {1}));
    }
    return success();
  }
  // The mask output is left unset: PyTorch's exports name it but never read
  // it, and the import refuses it only where the graph reads it.
  // Step and seed 0 until partc-prepare-training binds them to the step
  // counter and the run's seed: an inference compile draws one fixed mask.
  auto scalar = RankedTensorType::get({}, n.builder().getI64Type());
  Value zero = n.constant(scalar, std::vector<uint8_t>(8, 0));
  return emit(n, n.build1("dropout", {n.input(0), zero, zero},
                          {n.f64("ratio", ratio), n.i64("stream", 0)}));
}

LogicalResult importGemm(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  SmallVector<Value> operands = {n.input(0), n.input(1)};
  if (n.input(2))
    operands.push_back(n.input(2));
  return emit(n, n.build1("gemm", operands,
                          {n.f64("alpha", n.attrFloat("alpha", 1.0)),
                           n.f64("beta", n.attrFloat("beta", 1.0)),
                           n.i64("trans_a", n.attrInt("transA", 0)),
                           n.i64("trans_b", n.attrInt("transB", 0))}));
}

/// The generic translation of an ONNX operator to the graph op `opName`
/// with `numOperands` operands: the node's inputs in order, and each ONNX
/// attribute to the op's attribute of the same name, typed as the op's
/// default for it. Defaults live in the op's ODS definition alone.
NodeHandler importGeneric(StringRef opName, size_t numOperands,
                          ArrayRef<StringRef> attrNames) {
  return [opName, numOperands, attrNames](NodeImporter &n) -> LogicalResult {
    if (n.numInputs() != numOperands)
      return n.error() << "has " << n.numInputs() << " inputs; "
                       << n.node().op_type() << " takes " << numOperands;
    if (failed(requireInputs(n, numOperands)))
      return failure();
    NamedAttrList defaults;
    OperationName(("graph." + opName).str(), n.builder().getContext())
        .populateDefaultAttrs(defaults);
    SmallVector<NamedAttribute> attrs;
    for (const auto &a : n.node().attribute()) {
      // Opsets before 6 listed inputs that may be overwritten in place;
      // results do not depend on it.
      if (a.name() == "consumed_inputs")
        continue;
      Attribute dflt = defaults.get(a.name());
      if (!llvm::is_contained(attrNames, a.name()) || !dflt)
        return n.error() << "has attribute '" << a.name()
                         << "', which partc does not support for "
                         << n.node().op_type();
      OpBuilder &b = n.builder();
      if (isa<BoolAttr>(dflt))
        attrs.push_back(b.getNamedAttr(
            a.name(), b.getBoolAttr(n.attrInt(a.name(), 0) != 0)));
      else if (isa<IntegerAttr>(dflt))
        attrs.push_back(n.i64(a.name(), n.attrInt(a.name(), 0)));
      else if (isa<FloatAttr>(dflt))
        attrs.push_back(n.f64(a.name(), n.attrFloat(a.name(), 0)));
      else if (isa<StringAttr>(dflt))
        attrs.push_back(n.str(a.name(), n.attrString(a.name(), "")));
      else
        return n.error() << "has attribute '" << a.name()
                         << "' of a kind the generic import cannot read";
    }
    SmallVector<Value> operands;
    for (size_t i = 0; i < numOperands; ++i)
      operands.push_back(n.input(i));
    return emit(n, n.build1(opName, operands, attrs));
  };
}

template <typename Op> constexpr size_t fixedOperandCount() {
  if constexpr (Op::template hasTrait<OpTrait::OneOperand>())
    return 1;
  else if constexpr (Op::template hasTrait<OpTrait::NOperands<2>::Impl>())
    return 2;
  else if constexpr (Op::template hasTrait<OpTrait::NOperands<3>::Impl>())
    return 3;
  return 0;
}

template <typename Op, typename = void> struct ImportedFromOnnx {
  static void add(llvm::StringMap<NodeHandler> &) {}
};
/// Ops whose ODS class names an ONNX operator (kOnnxOpType).
template <typename Op>
struct ImportedFromOnnx<Op, decltype((void)Op::kOnnxOpType, void())> {
  static void add(llvm::StringMap<NodeHandler> &h) {
    static_assert(fixedOperandCount<Op>() > 0,
                  "generic import needs a fixed number of operands");
    h[Op::kOnnxOpType] =
        importGeneric(Op::getOperationName().split('.').second,
                      fixedOperandCount<Op>(), Op::getAttributeNames());
  }
};

template <typename... Ops>
void addGenericHandlers(llvm::StringMap<NodeHandler> &h) {
  (ImportedFromOnnx<Ops>::add(h), ...);
}

} // namespace

const llvm::StringMap<NodeHandler> &onnxNodeHandlers() {
  static const llvm::StringMap<NodeHandler> handlers = [] {
    llvm::StringMap<NodeHandler> h;
    addGenericHandlers<
#define GET_OP_LIST
#include "dialects/Graph/GraphOps.cpp.inc"
        >(h);
    for (auto [onnxName, op] :
         std::vector<std::pair<const char *, const char *>>{
             {"GlobalAveragePool", "global_avg_pool"},
             {"GlobalMaxPool", "global_max_pool"},
             {"Identity", "identity"}})
      h[onnxName] = unary(op);
    for (auto [onnxName, op] :
         std::vector<std::pair<const char *, const char *>>{
             {"Add", "add"},
             {"Sub", "sub"},
             {"Mul", "mul"},
             {"Div", "div"},
             {"Equal", "equal"},
             {"Less", "less"},
             {"Greater", "greater"},
             {"LessOrEqual", "less_or_equal"},
             {"GreaterOrEqual", "greater_or_equal"},
             {"And", "and"},
             {"Or", "or"},
             {"Xor", "xor"},
             {"MatMul", "matmul"}})
      h[onnxName] = binary(op);
    h["Sum"] = variadic("add", false);
    h["Mean"] = variadic("add", true);
    h["Max"] = variadic("max", false);
    h["Min"] = variadic("min", false);
    h["Pow"] = importPow;
    h["Mod"] = importMod;
    h["GatherND"] = [](NodeImporter &n) -> LogicalResult {
      if (failed(requireInputs(n, 2)))
        return failure();
      return emit(n,
                  n.build1("gather_nd", {n.input(0), n.input(1)},
                           {n.i64("batch_dims", n.attrInt("batch_dims", 0))}));
    };
    h["ScatterND"] = [](NodeImporter &n) -> LogicalResult {
      if (failed(requireInputs(n, 3)))
        return failure();
      return emit(
          n, n.build1("scatter_nd", {n.input(0), n.input(1), n.input(2)},
                      {n.str("reduction", n.attrString("reduction", "none"))}));
    };
    h["Clip"] = importClip;
    h["Cast"] = importCast;
    h["Softmax"] = [](NodeImporter &n) { return importSoftmax(n, "softmax"); };
    h["LogSoftmax"] = [](NodeImporter &n) {
      return importSoftmax(n, "log_softmax");
    };
    h["Reshape"] = importReshape;
    h["Flatten"] = importFlatten;
    h["Squeeze"] = importSqueeze;
    h["Unsqueeze"] = importUnsqueeze;
    h["Transpose"] = importTranspose;
    h["Concat"] = importConcat;
    h["Split"] = importSplit;
    h["Slice"] = importSlice;
    h["Gather"] = importGather;
    h["Expand"] = importExpand;
    h["GatherElements"] = importGatherElements;
    h["Resize"] = importResize;
    h["Gemm"] = importGemm;
    h["Conv"] = importConv;
    h["MaxPool"] = [](NodeImporter &n) { return importPool(n, "max_pool"); };
    h["AveragePool"] = [](NodeImporter &n) {
      return importPool(n, "avg_pool");
    };
    h["BatchNormalization"] = importBatchNorm;
    h["LayerNormalization"] = importLayerNorm;
    h["RMSNormalization"] = importRmsNorm;
    h["ReduceSum"] = reduce("reduce_sum", 13);
    h["ReduceMean"] = reduce("reduce_mean", 18);
    h["ReduceMax"] = reduce("reduce_max", 18);
    h["ReduceMin"] = reduce("reduce_min", 18);
    h["ReduceProd"] = reduce("reduce_prod", 18);
    h["Pad"] = importPad;
    h["Shape"] = importShape;
    h["Size"] = importSize;
    h["Constant"] = importConstant;
    h["ConstantOfShape"] = importConstantOfShape;
    h["Range"] = importRange;
    h["Dropout"] = importDropout;
    h["ConvTranspose"] = importConvTranspose;
    h["ArgMax"] = argReduce("arg_max");
    h["ArgMin"] = argReduce("arg_min");
    h["CumSum"] = importCumSum;
    h["TopK"] = importTopK;
    addCompositeHandlers(h);
    return h;
  }();
  return handlers;
}

} // namespace mlir::partc::onnx_import
