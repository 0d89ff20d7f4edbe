//===- OnnxComposites.cpp - ONNX operators spelled in existing graph ops --===//
//
// Operators whose meaning is a short composition of graph ops (most are ONNX
// functions themselves) are imported as that composition: they get every
// backend's kernels, batch rules, fusion and gradients of the ops they are
// made of, with no kernel of their own.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/ImportHelpers.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"

#include <cstring>

namespace mlir::partc::onnx_import {

namespace {

/// Constants built by the importer (masks, index ramps) stay below this.
constexpr int64_t kMaxBuiltConstant = int64_t(1) << 24;

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

/// [0, 1, ..., extent-1] as i64, shaped to lie along `axis` of `rank`.
Value indexRamp(NodeImporter &n, int64_t extent, int64_t axis, int64_t rank) {
  std::vector<uint8_t> bytes(extent * sizeof(int64_t));
  for (int64_t i = 0; i < extent; ++i)
    std::memcpy(bytes.data() + i * sizeof(int64_t), &i, sizeof(int64_t));
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = extent;
  return n.constant(
      RankedTensorType::get(shape, n.builder().getIntegerType(64)), bytes);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

enum class NormReduce { SumSquare, L1, L2, LogSum, LogSumExp };

NodeHandler normReduce(NormReduce kind) {
  return [kind](NodeImporter &n) -> LogicalResult {
    if (failed(requireInputs(n, 1)))
      return failure();
    bool noop = false;
    auto axes = reductionAxes(n, 18, noop);
    if (failed(axes))
      return failure();
    OpChain c(n);
    Value x = n.input(0);
    bool keep = n.attrInt("keepdims", 1) != 0;
    auto sum = [&](Value v, bool keepdims) {
      return noop ? v : c.reduce("reduce_sum", v, *axes, keepdims);
    };
    Value y;
    switch (kind) {
    case NormReduce::SumSquare:
      y = sum(c.op("mul", {x, x}), keep);
      break;
    case NormReduce::L1:
      y = sum(c.op("abs", {x}), keep);
      break;
    case NormReduce::L2:
      y = c.op("sqrt", {sum(c.op("mul", {x, x}), keep)});
      break;
    case NormReduce::LogSum:
      y = c.op("log", {sum(x, keep)});
      break;
    case NormReduce::LogSumExp: {
      if (noop) {
        y = x;
        break;
      }
      // Shifted by the maximum so that exp cannot overflow; an infinite
      // maximum (all -inf, or any +inf) is not subtracted.
      Value max = c.reduce("reduce_max", x, *axes, true);
      Value zero = c.scalar(elemOf(x), 0.0);
      Value shift = c.op("where", {c.op("is_inf", {max}), zero, max});
      Value sumExp =
          sum(c.op("exp", {c.op("sub", {x, shift})}), /*keepdims=*/true);
      y = c.op("add", {c.op("log", {sumExp}), shift});
      if (!keep && c.ok()) {
        SmallVector<int64_t> shape;
        for (auto [d, extent] : llvm::enumerate(shapeOf(x)))
          if (!llvm::is_contained(*axes, static_cast<int64_t>(d)))
            shape.push_back(extent);
        y = c.reshape(y, shape);
      }
      break;
    }
    }
    return c.finish({y});
  };
}

//===----------------------------------------------------------------------===//
// Element-wise compositions
//===----------------------------------------------------------------------===//

LogicalResult importPRelu(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  Value x = n.input(0), slope = n.input(1);
  // ONNX broadcasts the slope to the input one way only.
  ArrayRef<int64_t> xs = shapeOf(x), ss = shapeOf(slope);
  bool fits = ss.size() <= xs.size();
  for (size_t i = 0; fits && i < ss.size(); ++i) {
    int64_t s = ss[ss.size() - 1 - i], d = xs[xs.size() - 1 - i];
    fits = s == 1 || s == d;
  }
  // Before numpy broadcasting (opset 7), a slope [C] was per channel, and
  // old exporters still write it so.
  if (!fits && ss.size() == 1 && xs.size() >= 2 && ss[0] == xs[1]) {
    SmallVector<int64_t> perChannel(xs.size() - 1, 1);
    perChannel[0] = ss[0];
    OpChain c(n);
    slope = c.reshape(slope, perChannel);
    if (!c.ok())
      return failure();
    fits = true;
  }
  if (!fits)
    return n.error() << "slope of shape [" << shapeOf(slope)
                     << "] does not broadcast to the input's [" << shapeOf(x)
                     << "]";
  OpChain c(n);
  Value negative = c.op("less", {x, c.scalar(elemOf(x), 0.0)});
  return c.finish({c.op("where", {negative, c.op("mul", {x, slope}), x})});
}

LogicalResult importTrilu(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  if (rankOf(x) < 2)
    return n.error() << "Trilu needs an input of rank >= 2, got rank "
                     << rankOf(x);
  int64_t k = 0;
  if (n.input(1)) {
    auto ks = n.constInts(n.input(1), "k");
    if (failed(ks))
      return failure();
    if (ks->size() != 1)
      return n.error() << "k must be a scalar, got " << ks->size() << " values";
    k = (*ks)[0];
  }
  bool upper = n.attrInt("upper", 1) != 0;
  int64_t rows = shapeOf(x)[rankOf(x) - 2], cols = shapeOf(x).back();
  if (rows < 0 || cols < 0 || rows * cols > kMaxBuiltConstant)
    return n.error() << "Trilu over a " << rows << " x " << cols
                     << " matrix is not supported (at most 2^24 elements, "
                        "known sizes)";
  // The kept triangle as a constant mask; k is clamped so that j - i
  // cannot overflow against it.
  int64_t kk = std::clamp<int64_t>(k, -rows - 1, cols + 1);
  std::vector<uint8_t> mask(rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      mask[i * cols + j] = upper ? (j - i >= kk) : (j - i <= kk);
  Value keep = n.constant(
      RankedTensorType::get({rows, cols}, n.builder().getI1Type()), mask);
  OpChain c(n);
  return c.finish({c.op("where", {keep, x, c.scalar(elemOf(x), 0.0)})});
}

/// Hardmax: 1 at the first maximum along the axis, 0 elsewhere. Before
/// opset 13 the input is read as a matrix [prod(d < axis), prod(d >= axis)].
LogicalResult importHardmax(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  bool legacy = n.opset() < 13;
  auto axis = normAxis(n, n.attrInt("axis", legacy ? 1 : -1), rankOf(x));
  if (failed(axis))
    return failure();
  OpChain c(n);
  Value in = x;
  int64_t a = *axis;
  if (legacy) {
    ArrayRef<int64_t> s = shapeOf(x);
    in = c.reshape(x, {product(s.take_front(a)), product(s.drop_front(a))});
    a = 1;
  }
  int64_t extent = shapeOf(in)[a];
  if (extent > kMaxBuiltConstant)
    return n.error() << "Hardmax over " << extent
                     << " elements is not supported (at most 2^24)";
  Value best = c.op(
      "arg_max", {in},
      {n.i64("axis", a), n.i64("keepdims", 1), n.i64("select_last_index", 0)});
  Value ramp = indexRamp(n, extent, a, rankOf(in));
  Value y = c.castTo(c.op("equal", {best, ramp}), elemOf(x));
  return c.finish({c.reshape(y, shapeOf(x))});
}

LogicalResult importOneHot(NodeImporter &n) {
  if (failed(requireInputs(n, 3)))
    return failure();
  Value indices = n.input(0), values = n.input(2);
  auto depths = n.constFloats(n.input(1), "depth");
  if (failed(depths))
    return failure();
  if (depths->size() != 1)
    return n.error() << "depth must be a scalar, got " << depths->size()
                     << " values";
  double d = (*depths)[0];
  if (!(d >= 1 && d <= double(kMaxBuiltConstant)))
    return n.error() << "depth " << d << " must lie in [1, 2^24]";
  int64_t depth = static_cast<int64_t>(d);
  if (shapeOf(values) != ArrayRef<int64_t>{2})
    return n.error() << "values must hold [off, on], got shape ["
                     << shapeOf(values) << "]";
  int64_t rank = rankOf(indices) + 1;
  auto axis = normAxis(n, n.attrInt("axis", -1), rank);
  if (failed(axis))
    return failure();
  OpChain c(n);
  Type i64 = n.builder().getIntegerType(64);
  // Float indices are truncated toward zero; negative ones count from the
  // end; anything outside [-depth, depth) matches no position.
  Value idx = c.castTo(indices, i64);
  Value wrapped =
      c.op("where", {c.op("less", {idx, c.scalar(i64, 0)}),
                     c.op("add", {idx, c.scalar(i64, depth)}), idx});
  SmallVector<int64_t> shape(shapeOf(indices));
  shape.insert(shape.begin() + *axis, 1);
  Value hit = c.op(
      "equal", {c.reshape(wrapped, shape), indexRamp(n, depth, *axis, rank)});
  auto pick = [&](int64_t i) {
    return c.op("gather", {values, c.scalar(i64, double(i))},
                {n.i64("axis", 0)});
  };
  return c.finish({c.op("where", {hit, pick(1), pick(0)})});
}

LogicalResult importLpNormalization(NodeImporter &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  auto axis = normAxis(n, n.attrInt("axis", -1), rankOf(x));
  if (failed(axis))
    return failure();
  int64_t p = n.attrInt("p", 2);
  if (p != 1 && p != 2)
    return n.error() << "LpNormalization with p=" << p
                     << " is not defined; p must be 1 or 2";
  OpChain c(n);
  Value norm =
      p == 1
          ? c.reduce("reduce_sum", c.op("abs", {x}), {*axis}, true)
          : c.op("sqrt",
                 {c.reduce("reduce_sum", c.op("mul", {x, x}), {*axis}, true)});
  return c.finish({c.op("div", {x, norm})});
}

//===----------------------------------------------------------------------===//
// Normalizations: layer norm over the trailing dimensions of a view
//===----------------------------------------------------------------------===//

/// Per-channel parameter [C] shaped [C, 1, ...] to broadcast against
/// channels-first data of `rank`.
Value channelParam(OpChain &c, Value p, int64_t rank) {
  SmallVector<int64_t> shape(rank - 1, 1);
  shape[0] = shapeOf(p)[0];
  return c.reshape(p, shape);
}

LogicalResult importInstanceNorm(NodeImporter &n) {
  if (failed(requireInputs(n, 3)))
    return failure();
  Value x = n.input(0), scale = n.input(1), bias = n.input(2);
  if (rankOf(x) < 3)
    return n.error() << "InstanceNormalization needs [N, C, D1, ...], got rank "
                     << rankOf(x);
  int64_t channels = shapeOf(x)[1];
  if (shapeOf(scale) != ArrayRef<int64_t>{channels} ||
      shapeOf(bias) != ArrayRef<int64_t>{channels})
    return n.error() << "scale and bias must have shape [" << channels
                     << "], got [" << shapeOf(scale) << "] and ["
                     << shapeOf(bias) << "]";
  OpChain c(n);
  Type et = elemOf(x);
  Value normalized =
      c.op("layer_norm", {x, c.scalar(et, 1.0)},
           {n.i64("axis", 2), n.f64("epsilon", n.attrFloat("epsilon", 1e-5))});
  Value y =
      c.op("add", {c.op("mul", {normalized, channelParam(c, scale, rankOf(x))}),
                   channelParam(c, bias, rankOf(x))});
  return c.finish({y});
}

/// GroupNormalization (opset 18: scale and bias per group; opset 21: per
/// channel; either size is accepted).
LogicalResult importGroupNorm(NodeImporter &n) {
  if (failed(requireInputs(n, 3)))
    return failure();
  Value x = n.input(0), scale = n.input(1), bias = n.input(2);
  int64_t groups = n.attrInt("num_groups", 0);
  if (rankOf(x) < 3)
    return n.error() << "GroupNormalization needs [N, C, D1, ...], got rank "
                     << rankOf(x);
  ArrayRef<int64_t> s = shapeOf(x);
  int64_t channels = s[1];
  if (groups < 1 || channels % groups != 0)
    return n.error() << "num_groups " << groups << " must divide the "
                     << channels << " channels";
  int64_t paramSize = shapeOf(scale).size() == 1 ? shapeOf(scale)[0] : -1;
  if ((paramSize != groups && paramSize != channels) ||
      shapeOf(bias) != shapeOf(scale))
    return n.error() << "scale and bias must have shape [" << groups << "] or ["
                     << channels << "], got [" << shapeOf(scale) << "] and ["
                     << shapeOf(bias) << "]";
  if (n.attrInt("stash_type", 1) != 1)
    return n.error() << "stash_type " << n.attrInt("stash_type", 1)
                     << " is not supported (statistics are kept in float)";
  OpChain c(n);
  int64_t perGroup = product(s.drop_front(1)) / groups;
  Value grouped = c.reshape(x, {s[0], groups, perGroup});
  Value normalized =
      c.op("layer_norm", {grouped, c.scalar(elemOf(x), 1.0)},
           {n.i64("axis", 2), n.f64("epsilon", n.attrFloat("epsilon", 1e-5))});
  Value y;
  if (paramSize == groups && groups != channels) {
    y = c.op("add", {c.op("mul", {normalized, c.reshape(scale, {groups, 1})}),
                     c.reshape(bias, {groups, 1})});
    y = c.reshape(y, s);
  } else {
    y = c.reshape(normalized, s);
    y = c.op("add", {c.op("mul", {y, channelParam(c, scale, rankOf(x))}),
                     channelParam(c, bias, rankOf(x))});
  }
  return c.finish({y});
}

//===----------------------------------------------------------------------===//
// Data movement: reshapes and transposes
//===----------------------------------------------------------------------===//

LogicalResult importDepthToSpace(NodeImporter &n, bool toSpace) {
  if (failed(requireInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  int64_t b = n.attrInt("blocksize", 0);
  if (rankOf(x) != 4)
    return n.error() << "expects a 4-D input [N, C, H, W], got rank "
                     << rankOf(x);
  ArrayRef<int64_t> s = shapeOf(x);
  int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  if (b < 1 || b > (int64_t(1) << 20))
    return n.error() << "blocksize " << b << " must be positive";
  OpChain c(n);
  if (toSpace) {
    if (C % (b * b) != 0)
      return n.error() << "blocksize " << b << " squared must divide the " << C
                       << " channels";
    int64_t out = C / (b * b);
    Value y;
    if (n.attrString("mode", "DCR") == "CRD")
      y = c.transpose(c.reshape(x, {N, out, b, b, H, W}), {0, 1, 4, 2, 5, 3});
    else if (n.attrString("mode", "DCR") == "DCR")
      y = c.transpose(c.reshape(x, {N, b, b, out, H, W}), {0, 3, 4, 1, 5, 2});
    else
      return n.error() << "unknown mode '" << n.attrString("mode", "")
                       << "'; expected DCR or CRD";
    return c.finish({c.reshape(y, {N, out, H * b, W * b})});
  }
  if (H % b != 0 || W % b != 0)
    return n.error() << "blocksize " << b << " must divide height " << H
                     << " and width " << W;
  Value y =
      c.transpose(c.reshape(x, {N, C, H / b, b, W / b, b}), {0, 3, 5, 1, 2, 4});
  return c.finish({c.reshape(y, {N, C * b * b, H / b, W / b})});
}

LogicalResult importTile(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  Value x = n.input(0);
  auto repeats = n.constInts(n.input(1), "repeats");
  if (failed(repeats))
    return failure();
  ArrayRef<int64_t> s = shapeOf(x);
  if (repeats->size() != s.size())
    return n.error() << "repeats has " << repeats->size()
                     << " entries for an input of rank " << s.size();
  // Each repeated dimension d becomes [r, d] broadcast from [1, d], then
  // merged; unrepeated dimensions stay as they are.
  SmallVector<int64_t> unit, expanded, result;
  for (auto [d, r] : llvm::zip(s, *repeats)) {
    if (r < 0)
      return n.error() << "repeats must not be negative, got " << r;
    int64_t merged;
    if (llvm::MulOverflow(d, r, merged) || merged > (int64_t(1) << 40))
      return n.error() << "repeating a dimension of " << d << " by " << r
                       << " is too large";
    if (r != 1) {
      unit.push_back(1);
      expanded.push_back(r);
    }
    unit.push_back(d);
    expanded.push_back(d);
    result.push_back(merged);
  }
  OpChain c(n);
  Value y = c.reshape(x, unit);
  if (unit != expanded)
    y = c.op("expand", {y}, {n.ints("shape", expanded)});
  return c.finish({c.reshape(y, result)});
}

//===----------------------------------------------------------------------===//
// Einsum as transposes, reductions and batched matrix products
//===----------------------------------------------------------------------===//

/// Labels are letters' character codes; dimensions an ellipsis stands for
/// get 256 + their position among the broadcast ellipsis dimensions.
constexpr int kEllipsisLabel = 256;

struct EinsumTerm {
  Value value;
  SmallVector<int> labels;
};

/// Parses one side of an equation term into labels, expanding "..." to
/// `ellipsisRank` labels aligned to the right of `maxEllipsis`.
FailureOr<SmallVector<int>> parseTerm(NodeImporter &n, StringRef term,
                                      int64_t rank, int64_t maxEllipsis,
                                      bool output, int64_t &ellipsisRank) {
  SmallVector<int> labels;
  size_t dots = term.find("...");
  StringRef before = term.substr(0, dots);
  StringRef after = dots == StringRef::npos ? "" : term.substr(dots + 3);
  int64_t letters = 0;
  for (char ch : (before + after).str()) {
    if (!llvm::isAlpha(ch))
      return n.error() << "Einsum term '" << term << "' holds '" << ch
                       << "'; labels are letters",
             failure();
    ++letters;
  }
  ellipsisRank = 0;
  if (dots != StringRef::npos)
    ellipsisRank = output ? maxEllipsis : rank - letters;
  else if (!output && letters != rank)
    return n.error() << "Einsum term '" << term << "' has " << letters
                     << " labels for an operand of rank " << rank,
           failure();
  if (ellipsisRank < 0)
    return n.error() << "Einsum term '" << term << "' has more labels than "
                     << "its operand's rank " << rank,
           failure();
  for (char ch : before)
    labels.push_back(ch);
  for (int64_t i = 0; i < ellipsisRank; ++i)
    labels.push_back(kEllipsisLabel + int(maxEllipsis - ellipsisRank + i));
  for (char ch : after)
    labels.push_back(ch);
  return labels;
}

class EinsumBuilder {
public:
  EinsumBuilder(NodeImporter &n, OpChain &c) : n_(n), c_(c) {}

  /// The extent of every label, broadcasting 1 against any other extent.
  LogicalResult collectSizes(ArrayRef<EinsumTerm> terms) {
    for (const EinsumTerm &t : terms)
      for (auto [label, extent] : llvm::zip(t.labels, shapeOf(t.value))) {
        auto [it, fresh] = sizes_.try_emplace(label, extent);
        if (fresh || it->second == extent || extent == 1)
          continue;
        if (it->second != 1)
          return n_.error()
                 << "Einsum label '" << labelName(label) << "' has extents "
                 << it->second << " and " << extent;
        it->second = extent;
      }
    return success();
  }

  /// Sums out the labels of `t` that `keep` does not hold.
  void sumOut(EinsumTerm &t, const llvm::SmallSet<int, 16> &keep) {
    SmallVector<int64_t> axes;
    SmallVector<int> rest;
    for (auto [d, label] : llvm::enumerate(t.labels)) {
      if (keep.contains(label))
        rest.push_back(label);
      else
        axes.push_back(d);
    }
    if (axes.empty())
      return;
    t.value = c_.reduce("reduce_sum", t.value, axes, false);
    t.labels = rest;
  }

  /// `t` transposed to `order` and broadcast to the full extents.
  Value arrange(const EinsumTerm &t, ArrayRef<int> order) {
    SmallVector<int64_t> perm, full;
    for (int label : order) {
      perm.push_back(llvm::find(t.labels, label) - t.labels.begin());
      full.push_back(sizes_[label]);
    }
    Value v = c_.transpose(t.value, perm);
    if (v && shapeOf(v) != ArrayRef<int64_t>(full))
      v = c_.op("expand", {v}, {n_.ints("shape", full)});
    return v;
  }

  int64_t extentOf(ArrayRef<int> labels) {
    int64_t p = 1;
    for (int l : labels)
      p *= sizes_[l];
    return p;
  }

  /// The product of `a` and `b`, summing the labels they share that `keep`
  /// does not hold.
  EinsumTerm contract(EinsumTerm a, EinsumTerm b,
                      const llvm::SmallSet<int, 16> &keep) {
    llvm::SmallSet<int, 16> keepA = keep, keepB = keep;
    for (int l : b.labels)
      keepA.insert(l);
    for (int l : a.labels)
      keepB.insert(l);
    sumOut(a, keepA);
    sumOut(b, keepB);
    SmallVector<int> batch, inner, onlyA, onlyB;
    for (int l : a.labels) {
      bool inB = llvm::is_contained(b.labels, l);
      (inB ? (keep.contains(l) ? batch : inner) : onlyA).push_back(l);
    }
    for (int l : b.labels)
      if (!llvm::is_contained(a.labels, l))
        onlyB.push_back(l);
    SmallVector<int> orderA(batch), orderB(batch);
    orderA.append(onlyA);
    orderA.append(inner);
    orderB.append(inner);
    orderB.append(onlyB);
    int64_t bt = extentOf(batch), m = extentOf(onlyA), k = extentOf(inner),
            nn = extentOf(onlyB);
    SmallVector<int64_t> lhsShape = {m, k}, rhsShape = {k, nn};
    if (!batch.empty()) {
      lhsShape.insert(lhsShape.begin(), bt);
      rhsShape.insert(rhsShape.begin(), bt);
    }
    Value product = c_.op("matmul", {c_.reshape(arrange(a, orderA), lhsShape),
                                     c_.reshape(arrange(b, orderB), rhsShape)});
    EinsumTerm r;
    r.labels = batch;
    r.labels.append(onlyA);
    r.labels.append(onlyB);
    SmallVector<int64_t> shape;
    for (int l : r.labels)
      shape.push_back(sizes_[l]);
    r.value = c_.reshape(product, shape);
    return r;
  }

  Value finish(EinsumTerm t, ArrayRef<int> output) {
    llvm::SmallSet<int, 16> keep;
    for (int l : output)
      keep.insert(l);
    sumOut(t, keep);
    return arrange(t, output);
  }

  static std::string labelName(int label) {
    return label < kEllipsisLabel ? std::string(1, char(label))
                                  : std::string("...");
  }

private:
  NodeImporter &n_;
  OpChain &c_;
  llvm::DenseMap<int, int64_t> sizes_;
};

LogicalResult importEinsum(NodeImporter &n) {
  if (n.numInputs() == 0 || failed(requireInputs(n, n.numInputs())))
    return n.error() << "Einsum expects at least one input";
  std::string eq;
  for (char ch : n.attrString("equation", ""))
    if (ch != ' ')
      eq.push_back(ch);
  StringRef equation(eq);
  auto [lhs, rhs] = equation.split("->");
  bool explicitOutput = equation.contains("->");
  SmallVector<StringRef> termTexts;
  lhs.split(termTexts, ',');
  if (termTexts.size() != n.numInputs())
    return n.error() << "Einsum equation '" << eq << "' has "
                     << termTexts.size() << " terms for " << n.numInputs()
                     << " inputs";
  int64_t maxEllipsis = 0;
  for (auto [i, text] : llvm::enumerate(termTexts)) {
    int64_t letters = llvm::count_if(text, llvm::isAlpha);
    if (text.contains("..."))
      maxEllipsis = std::max(maxEllipsis, rankOf(n.input(i)) - letters);
  }
  SmallVector<EinsumTerm> terms;
  for (auto [i, text] : llvm::enumerate(termTexts)) {
    int64_t ellipsisRank;
    auto labels = parseTerm(n, text, rankOf(n.input(i)), maxEllipsis, false,
                            ellipsisRank);
    if (failed(labels))
      return failure();
    llvm::SmallSet<int, 16> seen;
    for (int l : *labels)
      if (!seen.insert(l).second)
        return n.error() << "Einsum label '" << EinsumBuilder::labelName(l)
                         << "' repeats within term '" << text
                         << "'; diagonals are not supported";
    terms.push_back({n.input(i), *labels});
  }
  SmallVector<int> output;
  if (explicitOutput) {
    int64_t ellipsisRank;
    auto labels = parseTerm(n, rhs, 0, maxEllipsis, true, ellipsisRank);
    if (failed(labels))
      return failure();
    output = *labels;
  } else {
    // Implicit output: the broadcast ellipsis dimensions, then the letters
    // used exactly once, in alphabetical order.
    for (int64_t i = 0; i < maxEllipsis; ++i)
      output.push_back(kEllipsisLabel + int(i));
    std::map<int, int> uses;
    for (const EinsumTerm &t : terms)
      for (int l : t.labels)
        if (l < kEllipsisLabel)
          ++uses[l];
    for (auto [l, count] : uses)
      if (count == 1)
        output.push_back(l);
  }
  for (int l : output)
    if (llvm::none_of(terms, [&](const EinsumTerm &t) {
          return llvm::is_contained(t.labels, l);
        }))
      return n.error() << "Einsum output label '" << EinsumBuilder::labelName(l)
                       << "' appears in no input term";
  OpChain c(n);
  EinsumBuilder b(n, c);
  if (failed(b.collectSizes(terms)))
    return failure();
  // Operands are multiplied left to right; a label stays while the output
  // or a later operand needs it.
  EinsumTerm acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    llvm::SmallSet<int, 16> keep;
    for (int l : output)
      keep.insert(l);
    for (size_t j = i + 1; j < terms.size(); ++j)
      for (int l : terms[j].labels)
        keep.insert(l);
    acc = b.contract(acc, terms[i], keep);
  }
  return c.finish({b.finish(acc, output)});
}

//===----------------------------------------------------------------------===//
// Quantization: QuantizeLinear and DequantizeLinear in float arithmetic
//===----------------------------------------------------------------------===//

/// The scale (or zero point) shaped to broadcast against `x`: a scalar as it
/// is, a vector along `axis`.
FailureOr<Value> quantParam(NodeImporter &n, OpChain &c, Value param, Value x,
                            StringRef what) {
  // A single value without an axis scales every element.
  if (rankOf(param) == 0 ||
      (rankOf(param) == 1 && shapeOf(param)[0] == 1 && !n.attr("axis")))
    return c.reshape(param, {});
  if (rankOf(param) != 1)
    return n.error() << what << " must be a scalar or a vector, got rank "
                     << rankOf(param)
                     << " (blocked quantization is not "
                        "supported)",
           failure();
  auto axis = normAxis(n, n.attrInt("axis", 1), rankOf(x));
  if (failed(axis))
    return failure();
  if (shapeOf(param)[0] != shapeOf(x)[*axis])
    return n.error() << what << " has " << shapeOf(param)[0]
                     << " entries for axis " << *axis << " of extent "
                     << shapeOf(x)[*axis],
           failure();
  SmallVector<int64_t> shape(rankOf(x), 1);
  shape[*axis] = shapeOf(param)[0];
  return c.reshape(param, shape);
}

LogicalResult importDequantizeLinear(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  Value x = n.input(0), scaleIn = n.input(1), zeroIn = n.input(2);
  Type ft = elemOf(scaleIn);
  if (!isa<FloatType>(ft))
    return n.error() << "x_scale must be float, got " << ft;
  if (isa<FloatType>(elemOf(x)))
    return n.error() << "dequantizing " << elemOf(x)
                     << " (float8) is not supported";
  OpChain c(n);
  auto scale = quantParam(n, c, scaleIn, x, "x_scale");
  if (failed(scale))
    return failure();
  Value y = c.castTo(x, ft);
  if (zeroIn) {
    auto zero = quantParam(n, c, zeroIn, x, "x_zero_point");
    if (failed(zero))
      return failure();
    y = c.op("sub", {y, c.castTo(*zero, ft)});
  }
  return c.finish({c.op("mul", {y, *scale})});
}

LogicalResult importQuantizeLinear(NodeImporter &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  Value x = n.input(0), scaleIn = n.input(1), zeroIn = n.input(2);
  Type ft = elemOf(x);
  if (!isa<FloatType>(ft) || elemOf(scaleIn) != ft)
    return n.error() << "QuantizeLinear needs float x and x_scale of one type, "
                        "got "
                     << ft << " and " << elemOf(scaleIn);
  Type qt = zeroIn ? elemOf(zeroIn)
                   : fromDType(n.builder().getContext(), rt::DType::U8);
  double lo, hi;
  switch (toDType(qt)) {
  case rt::DType::U8:
    lo = 0, hi = 255;
    break;
  case rt::DType::I8:
    lo = -128, hi = 127;
    break;
  case rt::DType::U16:
    lo = 0, hi = 65535;
    break;
  case rt::DType::I16:
    lo = -32768, hi = 32767;
    break;
  default:
    return n.error() << "quantizing to " << qt << " is not supported "
                     << "(int8, uint8, int16 and uint16 are)";
  }
  OpChain c(n);
  auto scale = quantParam(n, c, scaleIn, x, "y_scale");
  if (failed(scale))
    return failure();
  // round(x / scale) + zero point, saturated: rounding is half to even.
  Value q = c.op("round", {c.op("div", {x, *scale})});
  if (zeroIn) {
    auto zero = quantParam(n, c, zeroIn, x, "y_zero_point");
    if (failed(zero))
      return failure();
    q = c.op("add", {q, c.castTo(*zero, ft)});
  }
  q = c.op("clip", {q}, {n.f64("min", lo), n.f64("max", hi)});
  return c.finish({c.castTo(q, qt)});
}

} // namespace

void addCompositeHandlers(llvm::StringMap<NodeHandler> &h) {
  h["ReduceSumSquare"] = normReduce(NormReduce::SumSquare);
  h["ReduceL1"] = normReduce(NormReduce::L1);
  h["ReduceL2"] = normReduce(NormReduce::L2);
  h["ReduceLogSum"] = normReduce(NormReduce::LogSum);
  h["ReduceLogSumExp"] = normReduce(NormReduce::LogSumExp);
  h["PRelu"] = importPRelu;
  h["Trilu"] = importTrilu;
  h["Hardmax"] = importHardmax;
  h["OneHot"] = importOneHot;
  h["LpNormalization"] = importLpNormalization;
  h["InstanceNormalization"] = importInstanceNorm;
  h["GroupNormalization"] = importGroupNorm;
  h["DepthToSpace"] = [](NodeImporter &n) {
    return importDepthToSpace(n, true);
  };
  h["SpaceToDepth"] = [](NodeImporter &n) {
    return importDepthToSpace(n, false);
  };
  h["Tile"] = importTile;
  h["Einsum"] = importEinsum;
  h["QuantizeLinear"] = importQuantizeLinear;
  h["DequantizeLinear"] = importDequantizeLinear;
}

} // namespace mlir::partc::onnx_import
