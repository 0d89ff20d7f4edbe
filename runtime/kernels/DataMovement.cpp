//===- DataMovement.cpp - Transpose, concat, split, slice, gather, pad ----===//
#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/ElementwiseOps.h"
#include "runtime/kernels/IndexTuples.h"
#include "runtime/kernels/Resize.h"

#include <cstring>

namespace partc::runtime {
namespace {

/// Copies elements of size `es` from `in` (read through `inStrides`, one per
/// dimension of `outShape`, plus `inBase`) to a contiguous `out`.
void stridedGather(const char *in, int64_t inBase, char *out,
                   const Shape &outShape, const std::vector<int64_t> &inStrides,
                   size_t es) {
  std::array<std::vector<int64_t>, 1> strides{inStrides};
  const char *base = in + inBase * static_cast<int64_t>(es);
  if (es == 4) {
    auto *o = reinterpret_cast<uint32_t *>(out);
    auto *i = reinterpret_cast<const uint32_t *>(base);
    broadcastLoop<1>(outShape, strides,
                     [&](int64_t k, const auto &idx) { o[k] = i[idx[0]]; });
    return;
  }
  broadcastLoop<1>(outShape, strides, [&](int64_t k, const auto &idx) {
    std::memcpy(out + k * es, base + idx[0] * static_cast<int64_t>(es), es);
  });
}

class TransposeKernel : public Kernel {
public:
  TransposeKernel(const Shape &in, const std::vector<int64_t> &perm,
                  const Shape &out)
      : out_(out) {
    std::vector<int64_t> inStrides = contiguousStrides(in);
    for (int64_t p : perm)
      strides_.push_back(inStrides[p]);
  }
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    stridedGather(static_cast<const char *>(in[0].data), 0,
                  static_cast<char *>(out[0].data), out_, strides_,
                  dtypeSize(in[0].type.dtype));
    return Status();
  }

private:
  Shape out_;
  std::vector<int64_t> strides_;
};

/// Concat and split move blocks: `outer` rows, each row made of one chunk
/// per part.
class ConcatKernel : public Kernel {
public:
  ConcatKernel(int64_t outer, std::vector<size_t> chunkBytes, bool split)
      : outer_(outer), chunks_(std::move(chunkBytes)), split_(split) {
    for (size_t c : chunks_)
      rowBytes_ += c;
  }
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const std::vector<TensorRef> &parts = split_ ? out : in;
    char *whole = static_cast<char *>(split_ ? in[0].data : out[0].data);
    for (int64_t o = 0; o < outer_; ++o) {
      size_t pos = o * rowBytes_;
      for (size_t p = 0; p < parts.size(); ++p) {
        if (!chunks_[p])
          continue; // an empty part, whose data may be null
        char *part = static_cast<char *>(parts[p].data) + o * chunks_[p];
        if (split_)
          std::memcpy(part, whole + pos, chunks_[p]);
        else
          std::memcpy(whole + pos, part, chunks_[p]);
        pos += chunks_[p];
      }
    }
    return Status();
  }

private:
  int64_t outer_;
  std::vector<size_t> chunks_;
  size_t rowBytes_ = 0;
  bool split_;
};

class SliceKernel : public Kernel {
public:
  SliceKernel(const Shape &in, const std::vector<int64_t> &starts,
              const std::vector<int64_t> &steps, const Shape &out)
      : out_(out) {
    std::vector<int64_t> inStrides = contiguousStrides(in);
    for (size_t d = 0; d < in.size(); ++d) {
      base_ += starts[d] * inStrides[d];
      strides_.push_back(steps[d] * inStrides[d]);
    }
  }
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    stridedGather(static_cast<const char *>(in[0].data), base_,
                  static_cast<char *>(out[0].data), out_, strides_,
                  dtypeSize(in[0].type.dtype));
    return Status();
  }

private:
  Shape out_;
  int64_t base_ = 0;
  std::vector<int64_t> strides_;
};

class GatherKernel : public Kernel {
public:
  GatherKernel(int64_t outer, int64_t axisLen, int64_t inner, size_t es)
      : outer_(outer), axisLen_(axisLen), innerBytes_(inner * es) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    int64_t count = in[1].type.numElements();
    std::vector<int64_t> idx(count);
    for (int64_t i = 0; i < count; ++i) {
      int64_t v = in[1].type.dtype == DType::I64 ? in[1].as<int64_t>()[i]
                                                 : in[1].as<int32_t>()[i];
      if (v < 0)
        v += axisLen_;
      if (v < 0 || v >= axisLen_)
        return Status::error("gather index " + std::to_string(v) +
                             " is out of range [0, " +
                             std::to_string(axisLen_) + ")");
      idx[i] = v;
    }
    const char *x = static_cast<const char *>(in[0].data);
    char *y = static_cast<char *>(out[0].data);
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t i = 0; i < count; ++i)
        std::memcpy(y + (o * count + i) * innerBytes_,
                    x + (o * axisLen_ + idx[i]) * innerBytes_, innerBytes_);
    return Status();
  }

private:
  int64_t outer_, axisLen_;
  size_t innerBytes_;
};

class PadKernel : public Kernel {
public:
  PadKernel(const Shape &in, const Shape &out, std::vector<int64_t> begin,
            PadMode mode, double value)
      : in_(in), out_(out), begin_(std::move(begin)), mode_(mode),
        value_(value) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    dispatchType(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      compute(in[0].as<T>(), out[0].as<T>());
    });
    return Status();
  }

private:
  template <typename T> void compute(const T *x, T *y) {
    size_t rank = out_.size();
    std::vector<int64_t> inStrides = contiguousStrides(in_);
    std::vector<int64_t> coord(rank, 0);
    int64_t total = numElements(out_);
    T fill = saturateCast<T>(value_);
    for (int64_t o = 0; o < total; ++o) {
      int64_t src = 0;
      bool inside = true;
      for (size_t d = 0; d < rank; ++d) {
        int64_t c = coord[d] - begin_[d], n = in_[d];
        if (c < 0 || c >= n) {
          if (mode_ == PadMode::Constant) {
            inside = false;
            break;
          }
          if (mode_ == PadMode::Edge)
            c = c < 0 ? 0 : n - 1;
          else {
            // Reflect without repeating the edge element.
            int64_t period = 2 * (n - 1);
            c = period ? ((c % period) + period) % period : 0;
            if (c >= n)
              c = period - c;
          }
        }
        src += c * inStrides[d];
      }
      y[o] = inside ? x[src] : fill;
      for (int d = static_cast<int>(rank) - 1; d >= 0; --d) {
        if (++coord[d] < out_[d])
          break;
        coord[d] = 0;
      }
    }
  }
  Shape in_, out_;
  std::vector<int64_t> begin_;
  PadMode mode_;
  double value_;
};

int64_t product(const Shape &s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i)
    p *= s[i];
  return p;
}

Status makeConcat(const KernelArgs &a, bool split, std::unique_ptr<Kernel> &k) {
  const std::vector<TensorType> &parts = split ? a.outputs : a.inputs;
  const TensorType &whole = split ? a.inputs[0] : a.outputs[0];
  if (parts.empty() || (split ? a.inputs.size() : a.outputs.size()) != 1)
    return Status::error("bad operand count");
  int64_t axis = a.attrs.getInt("axis");
  size_t rank = whole.shape.size();
  if (axis < 0 || axis >= static_cast<int64_t>(rank))
    return Status::error("axis " + std::to_string(axis) + " out of range");
  int64_t total = 0;
  std::vector<size_t> chunks;
  size_t es = dtypeSize(whole.dtype);
  for (const TensorType &p : parts) {
    if (p.dtype != whole.dtype || p.shape.size() != rank)
      return Status::error("part " + p.str() + " does not match " +
                           whole.str());
    for (size_t d = 0; d < rank; ++d)
      if (d != static_cast<size_t>(axis) && p.shape[d] != whole.shape[d])
        return Status::error("part " + p.str() + " does not match " +
                             whole.str());
    total += p.shape[axis];
    chunks.push_back(static_cast<size_t>(product(p.shape, axis, rank)) * es);
  }
  if (total != whole.shape[axis])
    return Status::error("parts do not add up along axis " +
                         std::to_string(axis));
  k = std::make_unique<ConcatKernel>(product(whole.shape, 0, axis), chunks,
                                     split);
  return Status();
}

/// Reads tuple `t` of `indices` (i32 or i64) and returns its slice's offset
/// in data, or an error naming the tuple.
Status tupleOffset(const IndexTuples &g, const TensorRef &indices, int64_t t,
                   int64_t &offset) {
  int64_t within = indices.type.dtype == DType::I64
                       ? g.offsetOf(indices.as<int64_t>() + t * g.k)
                       : g.offsetOf(indices.as<int32_t>() + t * g.k);
  if (within < 0)
    return Status::error("index tuple #" + std::to_string(t) +
                         " is out of range for the addressed dimensions");
  offset = (t / g.tuplesPerBatch) * g.batchElements + within;
  return Status();
}

class GatherNdKernel : public Kernel {
public:
  GatherNdKernel(IndexTuples g, size_t es) : g_(g), es_(es) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const char *x = static_cast<const char *>(in[0].data);
    char *y = static_cast<char *>(out[0].data);
    size_t slice = static_cast<size_t>(g_.sliceElements) * es_;
    for (int64_t t = 0; t < g_.batches * g_.tuplesPerBatch; ++t) {
      int64_t offset;
      PARTC_RETURN_IF_ERROR(tupleOffset(g_, in[1], t, offset));
      std::memcpy(y + t * slice, x + offset * es_, slice);
    }
    return Status();
  }

private:
  IndexTuples g_;
  size_t es_;
};

class ScatterNdKernel : public Kernel {
public:
  ScatterNdKernel(IndexTuples g, DType dtype, ScatterReduction reduction)
      : g_(g), dtype_(dtype), reduction_(reduction) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    size_t es = dtypeSize(dtype_);
    if (out[0].data != in[0].data)
      std::memcpy(out[0].data, in[0].data, out[0].type.byteSize());
    char *y = static_cast<char *>(out[0].data);
    const char *u = static_cast<const char *>(in[2].data);
    int64_t n = g_.sliceElements;
    for (int64_t t = 0; t < g_.tuplesPerBatch; ++t) {
      int64_t offset;
      PARTC_RETURN_IF_ERROR(tupleOffset(g_, in[1], t, offset));
      if (reduction_ == ScatterReduction::None) {
        std::memcpy(y + offset * es, u + t * n * es, n * es);
        continue;
      }
      dispatchType(dtype_, [&](auto zero) {
        using T = decltype(zero);
        T *dst = reinterpret_cast<T *>(y) + offset;
        const T *src = reinterpret_cast<const T *>(u) + t * n;
        for (int64_t i = 0; i < n; ++i)
          dst[i] = combine(dst[i], src[i]);
      });
    }
    return Status();
  }

private:
  template <typename T> T combine(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      if (reduction_ == ScatterReduction::Add ||
          reduction_ == ScatterReduction::Max)
        return a || b;
      return a && b;
    } else {
      switch (reduction_) {
      case ScatterReduction::Add:
        return wrappingAdd(a, b);
      case ScatterReduction::Mul:
        return wrappingMul(a, b);
      case ScatterReduction::Max:
        return ew::maxKeepNan(a, b);
      default:
        return ew::minKeepNan(a, b);
      }
    }
  }

  IndexTuples g_;
  DType dtype_;
  ScatterReduction reduction_;
};

/// out[i] = data[i with its `axis` coordinate replaced by indices[i]].
class GatherElementsKernel : public Kernel {
public:
  GatherElementsKernel(const Shape &data, const Shape &indices, int64_t axis,
                       size_t es)
      : indices_(indices), axis_(axis), es_(es),
        dataStrides_(contiguousStrides(data)), axisLen_(data[axis]) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const char *data = static_cast<const char *>(in[0].data);
    char *y = static_cast<char *>(out[0].data);
    bool wide = in[1].type.dtype == DType::I64;
    int64_t n = numElements(indices_);
    int64_t rank = static_cast<int64_t>(indices_.size());
    for (int64_t o = 0; o < n; ++o) {
      int64_t i = wide ? in[1].as<int64_t>()[o] : in[1].as<int32_t>()[o];
      if (i < -axisLen_ || i >= axisLen_)
        return Status::error("index " + std::to_string(i) +
                             " is out of range [" + std::to_string(-axisLen_) +
                             ", " + std::to_string(axisLen_) + ")");
      if (i < 0)
        i += axisLen_;
      int64_t offset = 0, rest = o;
      for (int64_t d = rank - 1; d >= 0; --d) {
        int64_t c = rest % indices_[d];
        rest /= indices_[d];
        offset += (d == axis_ ? i : c) * dataStrides_[d];
      }
      std::memcpy(y + o * es_, data + offset * static_cast<int64_t>(es_), es_);
    }
    return Status();
  }

private:
  Shape indices_;
  int64_t axis_;
  size_t es_;
  std::vector<int64_t> dataStrides_;
  int64_t axisLen_;
};

class ResizeKernel : public Kernel {
public:
  explicit ResizeKernel(const resize::Params &p) : p_(p) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    int64_t n = out[0].type.numElements();
    dispatchType(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        const T *x = in[0].as<T>();
        T *y = out[0].as<T>();
        for (int64_t o = 0; o < n; ++o)
          y[o] = resize::resizeElement<T>(p_, x, o);
      }
    });
    return Status();
  }

private:
  resize::Params p_;
};

} // namespace

Status resize::paramsOf(const KernelArgs &a, resize::Params &p) {
  const Shape &in = a.inputs[0].shape, &out = a.outputs[0].shape;
  std::vector<double> scales = a.attrs.getFloats("scales");
  if (in.size() != out.size() || scales.size() != in.size() ||
      in.size() > static_cast<size_t>(resize::kMaxRank))
    return Status::error(
        "input " + a.inputs[0].str() + ", result " + a.outputs[0].str() +
        " and " + std::to_string(scales.size()) +
        " scales do not agree (rank <= " + std::to_string(resize::kMaxRank) +
        ")");
  std::string mode, coordinates, rounding, why;
  PARTC_RETURN_IF_ERROR(a.attrs.requireString("mode", mode));
  PARTC_RETURN_IF_ERROR(
      a.attrs.requireString("coordinate_transformation_mode", coordinates));
  PARTC_RETURN_IF_ERROR(a.attrs.requireString("nearest_mode", rounding));
  if (!resize::parseMode(mode, p.mode, why) ||
      !resize::parseCoordinates(coordinates, p.coordinates, why) ||
      !resize::parseRounding(rounding, p.rounding, why))
    return Status::error(why);
  p.rank = static_cast<int>(in.size());
  for (int d = 0; d < p.rank; ++d) {
    if (in[d] == 0 || !(scales[d] > 0))
      return Status::error("dimension " + std::to_string(d) +
                           " has extent 0 or a scale that is not positive");
    p.inShape[d] = in[d];
    p.outShape[d] = out[d];
    p.scale[d] = scales[d];
  }
  return Status();
}

static Status createGatherElements(const KernelArgs &a,
                                   std::unique_ptr<Kernel> &k) {
  PARTC_RETURN_IF_ERROR(checkArity(a, 2, 2, 1));
  const TensorType &data = a.inputs[0], &indices = a.inputs[1];
  if (indices.dtype != DType::I64 && indices.dtype != DType::I32)
    return Status::error("indices must be i32 or i64");
  int64_t axis;
  PARTC_RETURN_IF_ERROR(a.attrs.requireInt("axis", axis));
  int64_t rank = static_cast<int64_t>(data.shape.size());
  if (axis < 0 || axis >= rank || indices.shape.size() != data.shape.size())
    return Status::error("axis " + std::to_string(axis) + " of data " +
                         data.str() + " and indices " + indices.str() +
                         " of the same rank");
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && indices.shape[d] > data.shape[d])
      return Status::error("indices " + indices.str() + " reach outside data " +
                           data.str());
  if (a.outputs[0].dtype != data.dtype || a.outputs[0].shape != indices.shape)
    return Status::error("result " + a.outputs[0].str() +
                         " should have the indices' shape and the data's "
                         "element type");
  k = std::make_unique<GatherElementsKernel>(data.shape, indices.shape, axis,
                                             dtypeSize(data.dtype));
  return Status();
}

static Status createResize(const KernelArgs &a, std::unique_ptr<Kernel> &k) {
  PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
  resize::Params p;
  PARTC_RETURN_IF_ERROR(resize::paramsOf(a, p));
  DType t = a.inputs[0].dtype;
  if (a.outputs[0].dtype != t || t == DType::Bool || t == DType::F16 ||
      t == DType::BF16 || dtypeSize(t) == 0 ||
      (p.mode == resize::Mode::Linear && !isFloatType(t)))
    return Status::error(std::string("element type ") + dtypeName(t) +
                         " is not supported (linear needs floats)");
  k = std::make_unique<ResizeKernel>(p);
  return Status();
}

void registerDataMovementKernels(KernelTable &t) {
  t["gather_elements"] = createGatherElements;
  t["resize"] = createResize;
  t["gather_nd"] = [](const KernelArgs &a,
                      std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 2, 2, 1));
    if (a.inputs[1].dtype != DType::I64 && a.inputs[1].dtype != DType::I32)
      return Status::error("indices must be i32 or i64");
    IndexTuples g;
    PARTC_RETURN_IF_ERROR(makeIndexTuples(a.inputs[0].shape, a.inputs[1].shape,
                                          a.attrs.getInt("batch_dims"), g));
    if (g.batches * g.tuplesPerBatch * g.sliceElements !=
        a.outputs[0].numElements())
      return Status::error("result " + a.outputs[0].str() +
                           " does not hold the gathered slices");
    k = std::make_unique<GatherNdKernel>(g, dtypeSize(a.inputs[0].dtype));
    return Status();
  };
  t["scatter_nd"] = [](const KernelArgs &a,
                       std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 3, 3, 1));
    if (a.inputs[1].dtype != DType::I64 && a.inputs[1].dtype != DType::I32)
      return Status::error("indices must be i32 or i64");
    IndexTuples g;
    PARTC_RETURN_IF_ERROR(
        makeIndexTuples(a.inputs[0].shape, a.inputs[1].shape, 0, g));
    std::string name = a.attrs.getString("reduction");
    ScatterReduction reduction;
    if (!parseScatterReduction(name, reduction))
      return Status::error("unknown reduction '" + name + "'");
    DType dtype = a.inputs[0].dtype;
    if (a.outputs[0] != a.inputs[0] || a.inputs[2].dtype != dtype ||
        a.inputs[2].numElements() != g.tuplesPerBatch * g.sliceElements)
      return Status::error("updates " + a.inputs[2].str() + " and result " +
                           a.outputs[0].str() + " do not match data " +
                           a.inputs[0].str());
    if (reduction != ScatterReduction::None &&
        !dispatchType(dtype, [](auto) {}))
      return Status::error("reduction '" + name +
                           "' needs a numeric element type");
    k = std::make_unique<ScatterNdKernel>(g, dtype, reduction);
    return Status();
  };

  t["transpose"] = [](const KernelArgs &a,
                      std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
    const Shape &in = a.inputs[0].shape;
    std::vector<int64_t> perm = a.attrs.getInts("perm");
    if (perm.size() != in.size())
      return Status::error("perm has " + std::to_string(perm.size()) +
                           " entries for rank " + std::to_string(in.size()));
    Shape expect;
    std::vector<bool> seen(in.size(), false);
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p])
        return Status::error("perm is not a permutation");
      seen[p] = true;
      expect.push_back(in[p]);
    }
    if (expect != a.outputs[0].shape || a.inputs[0].dtype != a.outputs[0].dtype)
      return Status::error("result " + a.outputs[0].str() + " is wrong");
    k = std::make_unique<TransposeKernel>(in, perm, a.outputs[0].shape);
    return Status();
  };
  t["concat"] = [](const KernelArgs &a, std::unique_ptr<Kernel> &k) {
    return makeConcat(a, false, k);
  };
  t["split"] = [](const KernelArgs &a, std::unique_ptr<Kernel> &k) {
    return makeConcat(a, true, k);
  };
  t["slice"] = [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
    const Shape &in = a.inputs[0].shape, &out = a.outputs[0].shape;
    std::vector<int64_t> starts = a.attrs.getInts("starts");
    std::vector<int64_t> steps = a.attrs.getInts("steps");
    if (starts.size() != in.size() || steps.size() != in.size() ||
        out.size() != in.size() || a.inputs[0].dtype != a.outputs[0].dtype)
      return Status::error("starts/steps must have one entry per dimension");
    for (size_t d = 0; d < in.size(); ++d) {
      if (out[d] == 0)
        continue;
      int64_t last = starts[d] + (out[d] - 1) * steps[d];
      if (steps[d] == 0 || starts[d] < 0 || starts[d] >= in[d] || last < 0 ||
          last >= in[d])
        return Status::error("slice of dimension " + std::to_string(d) +
                             " is out of bounds");
    }
    k = std::make_unique<SliceKernel>(in, starts, steps, out);
    return Status();
  };
  t["gather"] = [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 2, 2, 1));
    const Shape &x = a.inputs[0].shape, &idx = a.inputs[1].shape;
    int64_t axis = a.attrs.getInt("axis");
    if (axis < 0 || axis >= static_cast<int64_t>(x.size()))
      return Status::error("axis out of range");
    if (a.inputs[1].dtype != DType::I64 && a.inputs[1].dtype != DType::I32)
      return Status::error("indices must be i32 or i64");
    Shape expect(x.begin(), x.begin() + axis);
    expect.insert(expect.end(), idx.begin(), idx.end());
    expect.insert(expect.end(), x.begin() + axis + 1, x.end());
    if (expect != a.outputs[0].shape)
      return Status::error("result " + a.outputs[0].str() + " should be " +
                           shapeToString(expect));
    k = std::make_unique<GatherKernel>(product(x, 0, axis), x[axis],
                                       product(x, axis + 1, x.size()),
                                       dtypeSize(a.inputs[0].dtype));
    return Status();
  };
  t["pad"] = [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
    const Shape &in = a.inputs[0].shape, &out = a.outputs[0].shape;
    std::vector<int64_t> pads = a.attrs.getInts("pads");
    if (pads.size() != 2 * in.size() || out.size() != in.size())
      return Status::error("pads must have 2 entries per dimension");
    for (size_t d = 0; d < in.size(); ++d)
      if (pads[d] < 0 || pads[d + in.size()] < 0 ||
          in[d] + pads[d] + pads[d + in.size()] != out[d])
        return Status::error("pads do not match the result shape");
    PadMode m = padModeOf(a.attrs);
    if (m != PadMode::Constant)
      for (size_t d = 0; d < in.size(); ++d)
        if (in[d] == 0 && out[d] > 0)
          return Status::error("cannot pad an empty dimension in mode " +
                               a.attrs.getString("mode"));
    k = std::make_unique<PadKernel>(
        in, out, std::vector<int64_t>(pads.begin(), pads.begin() + in.size()),
        m, a.attrs.getFloat("value"));
    return Status();
  };
}

} // namespace partc::runtime
