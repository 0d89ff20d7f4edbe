//===- DataMovement.cu - GPU kernels that move and resample data ----------===//
//
// The GPU side of runtime/kernels/DataMovement.cpp, registered as one
// family (registerDataMovementGpuKernels). Each op's semantics come from
// the header the CPU kernel uses too (Resize.h), so the two cannot drift.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/CopyLayout.h"
#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/IndexTuples.h"
#include "runtime/kernels/KernelRegistry.h"
#include "runtime/kernels/Resize.h"

namespace partc::runtime::cuda {

namespace {

using Factory = GpuFactory;

class StridedCopyKernel : public GpuKernel {
public:
  StridedCopyKernel(const Strides &st, int64_t base, size_t elemSize) {
    CopyLayout l;
    l.shape.assign(st.shape, st.shape + st.rank);
    l.stride.assign(st.stride[0], st.stride[0] + st.rank);
    l.base = base;
    l.elementBytes = elemSize;
    CopyLayout merged = mergeContiguous(l);
    narrow_ = wide_ = toLaunch(merged);
    for (size_t bytes : {16, 8})
      if (std::optional<CopyLayout> w = widenElements(merged, bytes)) {
        wide_ = toLaunch(*w);
        break;
      }
  }
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    size_t wide = wide_.elementBytes;
    bool aligned = reinterpret_cast<uintptr_t>(in[0].data) % wide == 0 &&
                   reinterpret_cast<uintptr_t>(out[0].data) % wide == 0;
    const Launch &l = aligned ? wide_ : narrow_;
    return cudaStatus(
        launchStridedCopy(in[0].data, out[0].data,
                          out[0].type.byteSize() /
                              static_cast<int64_t>(l.elementBytes),
                          l.strides, l.base, l.elementBytes, ctx.stream),
        "strided copy");
  }

private:
  struct Launch {
    Strides strides;
    int64_t base = 0;
    size_t elementBytes = 4;
  };
  static Launch toLaunch(const CopyLayout &l) {
    Launch launch;
    launch.strides.rank = static_cast<int>(l.shape.size());
    for (int d = 0; d < launch.strides.rank; ++d) {
      launch.strides.shape[d] = l.shape[d];
      launch.strides.stride[0][d] = l.stride[d];
    }
    launch.base = l.base;
    launch.elementBytes = l.elementBytes;
    return launch;
  }
  Launch narrow_, wide_;
};

class CopyKernel : public GpuKernel {
public:
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    return cudaStatus(cudaMemcpyAsync(out[0].data, in[0].data,
                                      out[0].type.byteSize(),
                                      cudaMemcpyDeviceToDevice, ctx.stream),
                      "copy");
  }
};

/// Concat and split as 2-D copies: `outer` rows of one chunk per part.
class ConcatKernel : public GpuKernel {
public:
  ConcatKernel(int64_t outer, std::vector<size_t> chunks, bool split)
      : outer_(outer), chunks_(std::move(chunks)), split_(split) {
    for (size_t c : chunks_)
      row_ += c;
  }
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const std::vector<TensorRef> &parts = split_ ? out : in;
    char *whole = static_cast<char *>(split_ ? in[0].data : out[0].data);
    if (rowsKernel()) {
      ConcatRowsParams p;
      p.count = static_cast<int>(parts.size());
      for (int k = 0; k < p.count; ++k) {
        p.parts[k] = parts[k].data;
        p.partBytes[k] = static_cast<int64_t>(chunks_[k]);
      }
      p.whole = whole;
      p.outer = outer_;
      p.split = split_;
      return cudaStatus(launchConcatRows(p, ctx.stream), "concat");
    }
    size_t pos = 0;
    for (size_t p = 0; p < parts.size(); ++p) {
      if (chunks_[p] && outer_) {
        char *part = static_cast<char *>(parts[p].data);
        cudaError_t err =
            split_ ? cudaMemcpy2DAsync(part, chunks_[p], whole + pos, row_,
                                       chunks_[p], outer_,
                                       cudaMemcpyDeviceToDevice, ctx.stream)
                   : cudaMemcpy2DAsync(whole + pos, row_, part, chunks_[p],
                                       chunks_[p], outer_,
                                       cudaMemcpyDeviceToDevice, ctx.stream);
        PARTC_RETURN_IF_ERROR(cudaStatus(err, "concat copy"));
      }
      pos += chunks_[p];
    }
    return Status();
  }

private:
  /// Many short rows: one kernel over all parts rather than a 2-D copy per
  /// part, which moves short rows slowly.
  bool rowsKernel() const {
    return outer_ > 1 && row_ < 4096 &&
           chunks_.size() <= static_cast<size_t>(kConcatMaxParts);
  }
  int64_t outer_;
  std::vector<size_t> chunks_;
  size_t row_ = 0;
  bool split_;
};

/// A kernel that checks its indices on the GPU: an out-of-range index sets a
/// flag, read after the run, so that it is reported instead of silently
/// leaving zeros.
class GatherKernel : public IndexCheckedKernel {
public:
  GatherKernel(int64_t outer, int64_t axisLen, int64_t count, int64_t inner,
               bool idx64)
      : outer_(outer), axisLen_(axisLen), count_(count), inner_(inner),
        idx64_(idx64) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    PARTC_RETURN_IF_ERROR(clearFlag(ctx.stream));
    return cudaStatus(launchGather(in[0].data, in[1].data, idx64_, out[0].data,
                                   outer_, axisLen_, count_, inner_, bad_,
                                   ctx.stream),
                      "gather");
  }

private:
  std::string rangeError() const override {
    return "gather index is out of range [0, " + std::to_string(axisLen_) + ")";
  }
  int64_t outer_, axisLen_, count_, inner_;
  bool idx64_;
};

/// NdTupleParams (in bytes) of IndexTuples (in elements).
NdTupleParams tupleParams(const IndexTuples &t, size_t es) {
  NdTupleParams p{};
  p.batches = t.batches;
  p.tuplesPerBatch = t.tuplesPerBatch;
  p.sliceBytes = t.sliceElements * static_cast<int64_t>(es);
  p.batchBytes = t.batchElements * static_cast<int64_t>(es);
  p.k = t.k;
  for (int d = 0; d < t.k; ++d) {
    p.extent[d] = t.extent[d];
    p.strideBytes[d] = t.stride[d] * static_cast<int64_t>(es);
  }
  return p;
}

class GatherNdKernel : public IndexCheckedKernel {
public:
  GatherNdKernel(NdTupleParams p, bool idx64) : p_(p), idx64_(idx64) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    PARTC_RETURN_IF_ERROR(clearFlag(ctx.stream));
    return cudaStatus(launchGatherNd(in[0].data, in[1].data, idx64_,
                                     out[0].data, p_, bad_, ctx.stream),
                      "gather_nd");
  }

private:
  std::string rangeError() const override {
    return "a gather_nd index tuple is out of range for the data";
  }
  NdTupleParams p_;
  bool idx64_;
};

class ScatterNdKernel : public IndexCheckedKernel {
public:
  ScatterNdKernel(NdTupleParams p, bool idx64, int reduction)
      : p_(p), idx64_(idx64), reduction_(reduction) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    PARTC_RETURN_IF_ERROR(clearFlag(ctx.stream));
    if (out[0].data != in[0].data)
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaMemcpyAsync(out[0].data, in[0].data, out[0].type.byteSize(),
                          cudaMemcpyDeviceToDevice, ctx.stream),
          "scatter_nd copy"));
    return cudaStatus(launchScatterNd(out[0].data, in[1].data, idx64_,
                                      in[2].data, p_, reduction_, bad_,
                                      ctx.stream),
                      "scatter_nd");
  }

private:
  std::string rangeError() const override {
    return "a scatter_nd index tuple is out of range for the data";
  }
  NdTupleParams p_;
  bool idx64_;
  int reduction_;
};

constexpr int kThreads = 256;

unsigned blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? (b < 1 ? 1 : b) : 65535 * 8);
}

//===----------------------------------------------------------------------===//
// GatherElements
//===----------------------------------------------------------------------===//

/// The geometry of a gather_elements: the indices' (and result's) shape and
/// the data's strides in elements.
struct GatherElementsParams {
  int rank = 0, axis = 0;
  int64_t shape[kMaxRank] = {}, dataStride[kMaxRank] = {};
  int64_t axisLen = 0;
};

template <typename Unit, typename Index>
__global__ void gatherElementsKernel(const Unit *data, const Index *indices,
                                     Unit *out, GatherElementsParams p,
                                     int64_t n, int *bad) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t i = static_cast<int64_t>(indices[o]);
    if (i < -p.axisLen || i >= p.axisLen) {
      *bad = 1;
      continue;
    }
    if (i < 0)
      i += p.axisLen;
    int64_t offset = 0, rest = o;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t c = rest % p.shape[d];
      rest /= p.shape[d];
      offset += (d == p.axis ? i : c) * p.dataStride[d];
    }
    out[o] = data[offset];
  }
}

template <typename Unit>
void launchGatherElements(const void *data, const void *indices, bool idx64,
                          void *out, const GatherElementsParams &p, int64_t n,
                          int *bad, cudaStream_t s) {
  auto *d = static_cast<const Unit *>(data);
  auto *o = static_cast<Unit *>(out);
  if (idx64)
    gatherElementsKernel<<<blocksFor(n), kThreads, 0, s>>>(
        d, static_cast<const int64_t *>(indices), o, p, n, bad);
  else
    gatherElementsKernel<<<blocksFor(n), kThreads, 0, s>>>(
        d, static_cast<const int32_t *>(indices), o, p, n, bad);
}

class GatherElementsKernel : public IndexCheckedKernel {
public:
  GatherElementsKernel(GatherElementsParams p, int64_t n, size_t elemSize,
                       bool idx64)
      : p_(p), n_(n), elemSize_(elemSize), idx64_(idx64) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    if (n_ == 0)
      return Status();
    PARTC_RETURN_IF_ERROR(clearFlag(ctx.stream));
    const void *data = in[0].data, *indices = in[1].data;
    void *y = out[0].data;
    switch (elemSize_) {
    case 1:
      launchGatherElements<uint8_t>(data, indices, idx64_, y, p_, n_, bad_,
                                    ctx.stream);
      break;
    case 2:
      launchGatherElements<uint16_t>(data, indices, idx64_, y, p_, n_, bad_,
                                     ctx.stream);
      break;
    case 4:
      launchGatherElements<uint32_t>(data, indices, idx64_, y, p_, n_, bad_,
                                     ctx.stream);
      break;
    default:
      launchGatherElements<uint64_t>(data, indices, idx64_, y, p_, n_, bad_,
                                     ctx.stream);
      break;
    }
    return cudaStatus(cudaGetLastError(), "gather_elements");
  }

private:
  std::string rangeError() const override {
    return "a gather_elements index is out of range [" +
           std::to_string(-p_.axisLen) + ", " + std::to_string(p_.axisLen) +
           ")";
  }
  GatherElementsParams p_;
  int64_t n_;
  size_t elemSize_;
  bool idx64_;
};

Status createGatherElements(const KernelArgs &a, DeviceContext &,
                            std::unique_ptr<GpuKernel> &k) {
  const TensorType &data = a.inputs[0], &indices = a.inputs[1];
  size_t es = dtypeSize(data.dtype);
  int64_t axis;
  PARTC_RETURN_IF_ERROR(a.attrs.requireInt("axis", axis));
  if (data.shape.size() > static_cast<size_t>(kMaxRank) ||
      (es != 1 && es != 2 && es != 4 && es != 8))
    return Status(); // the CPU kernel runs it
  GatherElementsParams p;
  p.rank = static_cast<int>(data.shape.size());
  p.axis = static_cast<int>(axis);
  std::vector<int64_t> strides = contiguousStrides(data.shape);
  for (int d = 0; d < p.rank; ++d) {
    p.shape[d] = indices.shape[d];
    p.dataStride[d] = strides[d];
  }
  p.axisLen = data.shape[axis];
  auto g = std::make_unique<GatherElementsKernel>(
      p, numElements(indices.shape), es, indices.dtype == DType::I64);
  PARTC_RETURN_IF_ERROR(g->init());
  k = std::move(g);
  return Status();
}

//===----------------------------------------------------------------------===//
// Resize
//===----------------------------------------------------------------------===//

__global__ void resizeKernel(const float *in, float *out, resize::Params p,
                             int64_t n) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x)
    out[o] = resize::resizeElement<float>(p, in, o);
}

class ResizeKernel : public GpuKernel {
public:
  ResizeKernel(const resize::Params &p, int64_t n) : p_(p), n_(n) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    resizeKernel<<<blocksFor(n_), kThreads, 0, ctx.stream>>>(
        in[0].as<float>(), out[0].as<float>(), p_, n_);
    return cudaStatus(cudaGetLastError(), "resize");
  }

private:
  resize::Params p_;
  int64_t n_;
};

Status createResize(const KernelArgs &a, DeviceContext &,
                    std::unique_ptr<GpuKernel> &k) {
  resize::Params p;
  PARTC_RETURN_IF_ERROR(resize::paramsOf(a, p));
  if (a.inputs[0].dtype != DType::F32)
    return Status(); // the CPU kernel runs it
  k = std::make_unique<ResizeKernel>(p, a.outputs[0].numElements());
  return Status();
}

} // namespace

void registerDataMovementGpuKernels(GpuKernelTable &t) {
  t["copy"] = [](const KernelArgs &, DeviceContext &,
                 std::unique_ptr<GpuKernel> &k) -> Status {
    k = std::make_unique<CopyKernel>();
    return Status();
  };
  t["expand"] = [](const KernelArgs &a, DeviceContext &,
                   std::unique_ptr<GpuKernel> &k) -> Status {
    const Shape &out = a.outputs[0].shape;
    if (out.size() > static_cast<size_t>(kMaxRank))
      return Status();
    k = std::make_unique<StridedCopyKernel>(
        makeStrides(out, {a.inputs[0].shape}), 0, dtypeSize(a.inputs[0].dtype));
    return Status();
  };
  t["transpose"] = [](const KernelArgs &a, DeviceContext &,
                      std::unique_ptr<GpuKernel> &k) -> Status {
    const Shape &in = a.inputs[0].shape;
    if (in.size() > static_cast<size_t>(kMaxRank))
      return Status();
    std::vector<int64_t> perm = a.attrs.getInts("perm");
    std::vector<int64_t> inStrides = contiguousStrides(in);
    Strides st;
    st.rank = static_cast<int>(in.size());
    for (int d = 0; d < st.rank; ++d) {
      st.shape[d] = a.outputs[0].shape[d];
      st.stride[0][d] = inStrides[perm[d]];
    }
    k = std::make_unique<StridedCopyKernel>(st, 0,
                                            dtypeSize(a.inputs[0].dtype));
    return Status();
  };
  t["slice"] = [](const KernelArgs &a, DeviceContext &,
                  std::unique_ptr<GpuKernel> &k) -> Status {
    const Shape &in = a.inputs[0].shape;
    if (in.size() > static_cast<size_t>(kMaxRank))
      return Status();
    std::vector<int64_t> starts = a.attrs.getInts("starts"),
                         steps = a.attrs.getInts("steps");
    std::vector<int64_t> inStrides = contiguousStrides(in);
    Strides st;
    st.rank = static_cast<int>(in.size());
    int64_t base = 0;
    for (int d = 0; d < st.rank; ++d) {
      st.shape[d] = a.outputs[0].shape[d];
      st.stride[0][d] = steps[d] * inStrides[d];
      base += starts[d] * inStrides[d];
    }
    k = std::make_unique<StridedCopyKernel>(st, base,
                                            dtypeSize(a.inputs[0].dtype));
    return Status();
  };
  auto concat = [](bool split) -> Factory {
    return [split](const KernelArgs &a, DeviceContext &,
                   std::unique_ptr<GpuKernel> &k) -> Status {
      const std::vector<TensorType> &parts = split ? a.outputs : a.inputs;
      const TensorType &whole = split ? a.inputs[0] : a.outputs[0];
      int64_t axis = a.attrs.getInt("axis");
      std::vector<size_t> chunks;
      for (const TensorType &p : parts)
        chunks.push_back(
            static_cast<size_t>(product(p.shape, axis, p.shape.size())) *
            dtypeSize(p.dtype));
      k = std::make_unique<ConcatKernel>(product(whole.shape, 0, axis), chunks,
                                         split);
      return Status();
    };
  };
  t["concat"] = concat(false);
  t["split"] = concat(true);
  t["gather"] = [](const KernelArgs &a, DeviceContext &,
                   std::unique_ptr<GpuKernel> &k) -> Status {
    const Shape &x = a.inputs[0].shape;
    int64_t axis = a.attrs.getInt("axis");
    auto g = std::make_unique<GatherKernel>(
        product(x, 0, axis), x[axis], a.inputs[1].numElements(),
        product(x, axis + 1, x.size()) * dtypeSize(a.inputs[0].dtype),
        a.inputs[1].dtype == DType::I64);
    PARTC_RETURN_IF_ERROR(g->init());
    k = std::move(g);
    return Status();
  };

  t["gather_nd"] = [](const KernelArgs &a, DeviceContext &,
                      std::unique_ptr<GpuKernel> &k) -> Status {
    IndexTuples tuples;
    if (!makeIndexTuples(a.inputs[0].shape, a.inputs[1].shape,
                         a.attrs.getInt("batch_dims"), tuples)
             .ok())
      return Status();
    auto g = std::make_unique<GatherNdKernel>(
        tupleParams(tuples, dtypeSize(a.inputs[0].dtype)),
        a.inputs[1].dtype == DType::I64);
    PARTC_RETURN_IF_ERROR(g->init());
    k = std::move(g);
    return Status();
  };
  t["scatter_nd"] = [](const KernelArgs &a, DeviceContext &,
                       std::unique_ptr<GpuKernel> &k) -> Status {
    IndexTuples tuples;
    ScatterReduction reduction;
    // Reductions run in f32 only; the CPU kernel takes the rest.
    if (!parseScatterReduction(a.attrs.getString("reduction"), reduction) ||
        (reduction != ScatterReduction::None &&
         a.inputs[0].dtype != DType::F32) ||
        !makeIndexTuples(a.inputs[0].shape, a.inputs[1].shape, 0, tuples).ok())
      return Status();
    auto g = std::make_unique<ScatterNdKernel>(
        tupleParams(tuples, dtypeSize(a.inputs[0].dtype)),
        a.inputs[1].dtype == DType::I64, static_cast<int>(reduction));
    PARTC_RETURN_IF_ERROR(g->init());
    k = std::move(g);
    return Status();
  };
  t["pad"] = [](const KernelArgs &a, DeviceContext &,
                std::unique_ptr<GpuKernel> &k) -> Status {
    const Shape &in = a.inputs[0].shape, &out = a.outputs[0].shape;
    if (!allF32(a) || in.size() > static_cast<size_t>(kMaxRank))
      return Status();
    std::vector<int64_t> pads = a.attrs.getInts("pads");
    std::vector<int64_t> strides = contiguousStrides(in);
    PadParams p{};
    p.rank = static_cast<int>(in.size());
    p.mode = padModeOf(a.attrs);
    // Only the CPU kernel checks shapes: an empty dimension cannot be
    // padded from its edge.
    for (int d = 0; d < p.rank; ++d)
      if (p.mode != PadMode::Constant && in[d] == 0 && out[d] > 0)
        return Status();
    for (int d = 0; d < p.rank; ++d) {
      p.outShape[d] = out[d];
      p.inShape[d] = in[d];
      p.inStride[d] = strides[d];
      p.begin[d] = pads[d];
    }
    float value = static_cast<float>(a.attrs.getFloat("value"));
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &i,
                   const std::vector<TensorRef> &o) {
      return cudaStatus(launchPadF32(i[0].as<float>(), o[0].as<float>(),
                                     o[0].type.numElements(), p, value,
                                     ctx.stream),
                        "pad");
    });
    return Status();
  };
  t["gather_elements"] = createGatherElements;
  t["resize"] = createResize;
}

} // namespace partc::runtime::cuda
