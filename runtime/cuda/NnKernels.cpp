//===- NnKernels.cpp - Convolution, normalization, pooling, softmax -------===//
//
// The GPU side of runtime/kernels/Nn.cpp: convolutions (ConvKernel.cpp),
// batch, layer and RMS normalization, pooling, softmax and reductions.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/KernelRegistry.h"

#include <algorithm>
#include <limits>

namespace partc::runtime::cuda {

Status makePoolParams(const KernelArgs &a, const Shape &x, const Shape &y,
                      bool isMax, PoolParams &p) {
  Window w;
  PARTC_RETURN_IF_ERROR(
      makeWindow(a.attrs, x, y, a.attrs.getInts("kernel_shape"), w));
  p = PoolParams{};
  p.planes = x[0] * x[1];
  p.isMax = isMax;
  p.countIncludePad = a.attrs.getInt("count_include_pad", 0) != 0;
  for (int i = 0; i < 3; ++i) {
    p.in[i] = w.in[i];
    p.out[i] = w.out[i];
    p.kernel[i] = w.kernel[i];
    p.stride[i] = w.stride[i];
    p.dilation[i] = w.dilation[i];
    p.padBegin[i] = w.padBegin[i];
    p.padEnd[i] = w.padEnd[i];
  }
  return Status();
}

namespace {

using Factory = GpuFactory;

/// FusedParams::BF16 or F16 where every operand has that type, else -1.
int uniform16(const KernelArgs &a) {
  DType t = a.outputs[0].dtype;
  if (t != DType::BF16 && t != DType::F16)
    return -1;
  for (const TensorType &in : a.inputs)
    if (in.dtype != t)
      return -1;
  return t == DType::BF16 ? FusedParams::BF16 : FusedParams::F16;
}

Factory poolFactory(bool isMax) {
  return [isMax](const KernelArgs &a, DeviceContext &,
                 std::unique_ptr<GpuKernel> &k) -> Status {
    int element = uniform16(a);
    bool channelsLast = a.attrs.getInt("channels_last", 0) != 0;
    if (!allF32(a) &&
        (element < 0 || !channelsLast ||
         a.inputs[0].numElements() > std::numeric_limits<int32_t>::max()))
      return Status();
    Shape x = a.inputs[0].shape, y = a.outputs[0].shape;
    if (channelsLast) {
      x = channelsFirstShape(x);
      y = channelsFirstShape(y);
    }
    PoolParams p;
    PARTC_RETURN_IF_ERROR(makePoolParams(a, x, y, isMax, p));
    p.channelsLast = channelsLast ? x[1] : 0;
    // The 16-bit kernels index in 32 bits only.
    if (element >= 0 && !windowFits32(p))
      return Status();
    if (element >= 0) {
      k = lambda([p, element](DeviceContext &ctx,
                              const std::vector<TensorRef> &in,
                              const std::vector<TensorRef> &out) {
        return cudaStatus(launchPool16(in[0].data, out[0].data, p,
                                       static_cast<unsigned char>(element),
                                       ctx.stream),
                          "pool");
      });
      return Status();
    }
    k = lambda([p](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      return cudaStatus(
          launchPool(in[0].as<float>(), out[0].as<float>(), p, ctx.stream),
          "pool");
    });
    return Status();
  };
}

Factory globalFactory(bool isMax) {
  return [isMax](const KernelArgs &a, DeviceContext &,
                 std::unique_ptr<GpuKernel> &k) -> Status {
    if (!allF32(a))
      return Status();
    const Shape &x = a.inputs[0].shape;
    int64_t planes = x[0] * x[1], size = product(x, 2, x.size());
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      return cudaStatus(launchGlobalPool(in[0].as<float>(), out[0].as<float>(),
                                         planes, size, isMax, ctx.stream),
                        "global pool");
    });
    return Status();
  };
}

Factory softmaxFactory(bool log) {
  return [log](const KernelArgs &a, DeviceContext &,
               std::unique_ptr<GpuKernel> &k) -> Status {
    int element = uniform16(a);
    if (!allF32(a) && element < 0)
      return Status();
    const Shape &x = a.inputs[0].shape;
    int64_t axis = a.attrs.getInt("axis");
    int64_t outer = product(x, 0, axis), len = x[axis],
            inner = product(x, axis + 1, x.size());
    // Only softmax zeroes fully masked rows.
    bool nanToZero = !log && a.attrs.getInt("nan_to_zero") != 0;
    SoftmaxBias bias;
    bool hasBias = a.inputs.size() == 2;
    if (hasBias) {
      if (x.size() > static_cast<size_t>(kMaxRank))
        return Status();
      const Shape &b = a.inputs[1].shape;
      bias.elements = makeStrides(x, {b});
      bias.columnStride = b.empty() || b.back() == 1 ? 0 : 1;
    }
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      SoftmaxBias b = bias;
      if (hasBias)
        b.data = static_cast<const float *>(in[1].data);
      if (element >= 0)
        return cudaStatus(launchSoftmax16(in[0].data, out[0].data, outer, len,
                                          inner, log, nanToZero, b,
                                          static_cast<unsigned char>(element),
                                          ctx.stream),
                          "softmax");
      return cudaStatus(launchSoftmax(in[0].as<float>(), out[0].as<float>(),
                                      outer, len, inner, log, nanToZero, b,
                                      ctx.stream),
                        "softmax");
    });
    return Status();
  };
}

/// A reduction over leading axes (bias gradients), in row chunks whose
/// partial results wait in the shared workspace.
class ReduceLeadingKernel : public GpuKernel {
public:
  ReduceLeadingKernel(int64_t rows, int64_t cols, int op)
      : rows_(rows), cols_(cols), op_(op) {}
  ~ReduceLeadingKernel() override {
    if (arrivals_)
      cudaFree(arrivals_);
  }
  Status init() {
    size_t bytes = reduceLeadingColumnBlocks(cols_) * sizeof(unsigned);
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaMalloc(&arrivals_, bytes), "reduction counters"));
    return cudaStatus(cudaMemset(arrivals_, 0, bytes), "reduction counters");
  }
  size_t workspaceBytes() const override {
    int64_t chunks = reduceLeadingChunks(rows_, cols_);
    return chunks > 1 ? static_cast<size_t>(chunks * cols_) * sizeof(float) : 0;
  }
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    return cudaStatus(
        launchReduceLeadingF32(in[0].as<float>(), out[0].as<float>(),
                               static_cast<float *>(ctx.workspace), arrivals_,
                               rows_, cols_, op_, ctx.stream),
        "reduce");
  }

private:
  int64_t rows_, cols_;
  int op_;
  unsigned *arrivals_ = nullptr;
};

/// A reduction over the middle dimension of [batch, rows, cols]: a global
/// pool channels last, in f32 or 16-bit.
class ReduceMiddleKernel : public GpuKernel {
public:
  ReduceMiddleKernel(int64_t batch, int64_t rows, int64_t cols, int op,
                     unsigned char element)
      : batch_(batch), rows_(rows), cols_(cols), op_(op), element_(element) {}
  ~ReduceMiddleKernel() override {
    if (arrivals_)
      cudaFree(arrivals_);
  }
  Status init() {
    size_t bytes = static_cast<size_t>(batch_) * sizeof(unsigned);
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaMalloc(&arrivals_, bytes), "reduction counters"));
    return cudaStatus(cudaMemset(arrivals_, 0, bytes), "reduction counters");
  }
  size_t workspaceBytes() const override {
    int64_t chunks = reduceMiddleChunks(batch_, rows_, cols_, element_);
    return chunks > 1
               ? static_cast<size_t>(batch_ * chunks * cols_) * sizeof(float)
               : 0;
  }
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    return cudaStatus(launchReduceMiddle(in[0].data, out[0].data,
                                         static_cast<float *>(ctx.workspace),
                                         arrivals_, batch_, rows_, cols_, op_,
                                         element_, ctx.stream),
                      "reduce");
  }

private:
  int64_t batch_, rows_, cols_;
  int op_;
  unsigned char element_;
  unsigned *arrivals_ = nullptr;
};

Factory reduceFactory(int op) {
  return [op](const KernelArgs &a, DeviceContext &,
              std::unique_ptr<GpuKernel> &k) -> Status {
    // Products (op 4) of 16-bit values stay on the CPU kernel's f32 path.
    int sixteen = op == 4 ? -1 : uniform16(a);
    if (!allF32(a) && sixteen < 0)
      return Status();
    unsigned char element =
        sixteen < 0 ? FusedParams::F32 : static_cast<unsigned char>(sixteen);
    const Shape &x = a.inputs[0].shape;
    if (x.size() > static_cast<size_t>(kMaxRank))
      return Status();
    std::vector<int64_t> axes = a.attrs.getInts("axes");
    std::vector<bool> red(x.size(), false);
    for (int64_t ax : axes)
      red[ax] = true;
    std::vector<int64_t> strides = contiguousStrides(x);
    Strides keep, reduced;
    int64_t outCount = 1, count = 1;
    for (size_t d = 0; d < x.size(); ++d) {
      Strides &s = red[d] ? reduced : keep;
      s.shape[s.rank] = x[d];
      s.stride[0][s.rank] = strides[d];
      ++s.rank;
      (red[d] ? count : outCount) *= x[d];
    }
    // Reduced axes that are all leading or all trailing make the input a
    // [rows, cols] matrix reduced along one side, which the coalesced
    // kernels take (the general one strides): leading ones from a warp's
    // width of columns, trailing ones where the rows fill the GPU.
    size_t firstReduced = 0, lastReduced = 0;
    for (size_t d = 0; d < x.size(); ++d)
      if (red[d])
        lastReduced = d + 1;
    while (firstReduced < x.size() && !red[firstReduced])
      ++firstReduced;
    bool contiguous =
        lastReduced > firstReduced &&
        std::all_of(red.begin() + firstReduced, red.begin() + lastReduced,
                    [](bool b) { return b; });
    bool leading = contiguous && firstReduced == 0 && outCount >= 32;
    bool trailing = contiguous && lastReduced == x.size() && outCount >= 512;
    int64_t batch = 1, inner = 1;
    for (size_t d = 0; d < firstReduced; ++d)
      batch *= x[d];
    for (size_t d = lastReduced; d < x.size(); ++d)
      inner *= x[d];
    // Reduced axes between kept ones (or any contiguous run, in 16-bit):
    // the middle kernel, whose warps read whole rows of channels.
    bool middle = contiguous && count > 0 && outCount > 0 &&
                  (firstReduced > 0 || element != FusedParams::F32) &&
                  (lastReduced < x.size() || element != FusedParams::F32) &&
                  reduceMiddleFits(batch, inner, element);
    if (middle) {
      auto kernel = std::make_unique<ReduceMiddleKernel>(batch, count, inner,
                                                         op, element);
      PARTC_RETURN_IF_ERROR(kernel->init());
      k = std::move(kernel);
      return Status();
    }
    if (element != FusedParams::F32) {
      k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out) {
        return cudaStatus(launchReduce(in[0].data, out[0].data, outCount, keep,
                                       reduced, count, op, element, ctx.stream),
                          "reduce");
      });
      return Status();
    }
    if (count > 0 && outCount > 0 && leading) {
      auto kernel = std::make_unique<ReduceLeadingKernel>(count, outCount, op);
      PARTC_RETURN_IF_ERROR(kernel->init());
      k = std::move(kernel);
      return Status();
    }
    if (count > 0 && outCount > 0 && trailing) {
      k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out) {
        return cudaStatus(launchReduceTrailingF32(in[0].as<float>(),
                                                  out[0].as<float>(), outCount,
                                                  count, op, ctx.stream),
                          "reduce");
      });
      return Status();
    }
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      return cudaStatus(launchReduce(in[0].data, out[0].data, outCount, keep,
                                     reduced, count, op, FusedParams::F32,
                                     ctx.stream),
                        "reduce");
    });
    return Status();
  };
}

} // namespace

void registerNnGpuKernels(GpuKernelTable &t) {
  t["conv"] = [](const KernelArgs &a, DeviceContext &ctx,
                 std::unique_ptr<GpuKernel> &k) -> Status {
    if (!allF32(a) && uniform16(a) < 0)
      return Status();
    size_t spatial = a.inputs[0].shape.size() - 2;
    std::vector<int64_t> pads = a.attrs.getInts("pads");
    if (spatial < 1 || spatial > 3)
      return Status();
    for (size_t i = 0; i < spatial; ++i)
      if (pads[i] != pads[i + spatial])
        return Status(); // cuDNN pads symmetrically
    return createConvKernel(a, ctx, k);
  };
  t["batch_norm"] = [](const KernelArgs &a, DeviceContext &,
                       std::unique_ptr<GpuKernel> &k) -> Status {
    if (!allF32(a))
      return Status();
    const Shape &x = a.inputs[0].shape;
    int64_t n = a.inputs[0].numElements(), c = x[1],
            inner = product(x, 2, x.size());
    float eps = static_cast<float>(a.attrs.getFloat("epsilon"));
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      return cudaStatus(launchBatchNorm(in[0].as<float>(), in[1].as<float>(),
                                        in[2].as<float>(), in[3].as<float>(),
                                        in[4].as<float>(), out[0].as<float>(),
                                        n, c, inner, eps, ctx.stream),
                        "batch_norm");
    });
    return Status();
  };
  t["max_pool"] = poolFactory(true);
  t["avg_pool"] = poolFactory(false);
  t["global_avg_pool"] = globalFactory(false);
  t["global_max_pool"] = globalFactory(true);
  t["softmax"] = softmaxFactory(false);
  t["log_softmax"] = softmaxFactory(true);
  t["rms_norm"] = [](const KernelArgs &a, DeviceContext &,
                     std::unique_ptr<GpuKernel> &k) -> Status {
    int element = uniform16(a);
    if (!allF32(a) && element < 0)
      return Status();
    const Shape &x = a.inputs[0].shape;
    int64_t axis = a.attrs.getInt("axis");
    int64_t cols = product(x, axis, x.size()), rows = product(x, 0, axis);
    bool hasScale = a.inputs.size() == 2;
    int64_t scaleCount = hasScale ? a.inputs[1].numElements() : 1;
    // A scale of one value per normalized element, in order, or one
    // value; other broadcasts run on the host.
    if (hasScale && scaleCount != 1 && scaleCount != cols)
      return Status();
    float eps = static_cast<float>(a.attrs.getFloat("epsilon"));
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      if (element >= 0)
        return cudaStatus(
            launchRmsNorm16(in[0].data, hasScale ? in[1].data : nullptr,
                            out[0].data, rows, cols, scaleCount, eps,
                            static_cast<unsigned char>(element), ctx.stream),
            "rms_norm");
      return cudaStatus(launchRmsNorm(in[0].as<float>(),
                                      hasScale ? in[1].as<float>() : nullptr,
                                      out[0].as<float>(), rows, cols,
                                      scaleCount, eps, ctx.stream),
                        "rms_norm");
    });
    return Status();
  };
  t["layer_norm"] = [](const KernelArgs &a, DeviceContext &,
                       std::unique_ptr<GpuKernel> &k) -> Status {
    int element = uniform16(a);
    if (!allF32(a) && element < 0)
      return Status();
    const Shape &x = a.inputs[0].shape;
    int64_t axis = a.attrs.getInt("axis");
    int64_t cols = product(x, axis, x.size()), rows = product(x, 0, axis);
    int64_t sm = a.inputs[1].numElements();
    int64_t bm = a.inputs.size() == 3 ? a.inputs[2].numElements() : 1;
    // Scale and bias must span the trailing dimensions (or be scalars).
    Shape norm(x.begin() + axis, x.end());
    auto trailing = [&](const Shape &s) {
      int64_t n = numElements(s);
      if (n == 1)
        return true;
      if (s.size() > norm.size())
        return false;
      return std::equal(s.rbegin(), s.rend(), norm.rbegin()) && n == cols;
    };
    if (!trailing(a.inputs[1].shape) ||
        (a.inputs.size() == 3 && !trailing(a.inputs[2].shape)))
      return Status();
    bool hasBias = a.inputs.size() == 3;
    float eps = static_cast<float>(a.attrs.getFloat("epsilon"));
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      if (element >= 0)
        return cudaStatus(
            launchLayerNorm16(in[0].data, in[1].data,
                              hasBias ? in[2].data : nullptr, out[0].data, rows,
                              cols, sm, bm, eps,
                              static_cast<unsigned char>(element), ctx.stream),
            "layer_norm");
      return cudaStatus(launchLayerNorm(in[0].as<float>(), in[1].as<float>(),
                                        hasBias ? in[2].as<float>() : nullptr,
                                        out[0].as<float>(), rows, cols, sm, bm,
                                        eps, ctx.stream),
                        "layer_norm");
    });
    return Status();
  };
  t["reduce_sum"] = reduceFactory(0);
  t["reduce_mean"] = reduceFactory(1);
  t["reduce_max"] = reduceFactory(2);
  t["reduce_min"] = reduceFactory(3);
  t["reduce_prod"] = reduceFactory(4);
}

} // namespace partc::runtime::cuda
