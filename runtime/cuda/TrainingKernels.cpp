//===- TrainingKernels.cpp - GPU kernels of training ----------------------===//
//
// Convolution gradients through cuDNN's backward data and filter (the
// algorithm chosen once by measurement, as the forward's); pooling, batch
// norm, the cross-entropy loss and the optimizer steps in Training.cu.
// An op outside what they cover (asymmetric pads, another type) gets no
// GPU kernel and runs on the host behind copies, as every op may.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/TrainingKernels.h"
#include "runtime/cuda/LibraryStatus.h"
#include "runtime/kernels/KernelRegistry.h"

#include <cudnn.h>
#include <limits>

namespace partc::runtime::cuda {

namespace {

//===----------------------------------------------------------------------===//
// Convolution gradients
//===----------------------------------------------------------------------===//

class ConvGradKernel : public GpuKernel {
public:
  /// `weight`: the filter gradient (backward filter), else the input's;
  /// `channelsLast`: every operand, the filter too, is [N, spatial..., C].
  ConvGradKernel(bool weight, bool channelsLast)
      : weight_(weight), channelsLast_(channelsLast) {}
  ~ConvGradKernel() override {
    if (x_)
      cudnnDestroyTensorDescriptor(x_);
    if (y_)
      cudnnDestroyTensorDescriptor(y_);
    if (w_)
      cudnnDestroyFilterDescriptor(w_);
    if (conv_)
      cudnnDestroyConvolutionDescriptor(conv_);
  }

  /// Shapes channels first: x, w, dy; Status() without `ok` where cuDNN
  /// cannot express the convolution.
  Status init(const KernelArgs &a, DeviceContext &ctx, const Shape &xs,
              const Shape &ws, const Shape &ys, bool &ok);

  size_t workspaceBytes() const override { return workspace_; }

  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float one = 1.0f, zero = 0.0f;
    if (weight_)
      return cudnnStatus(cudnnConvolutionBackwardFilter(
                             ctx.cudnn, &one, x_, in[0].data, y_, in[1].data,
                             conv_, filterAlgo_, ctx.workspace, workspace_,
                             &zero, w_, out[0].data),
                         "convolution backward filter");
    return cudnnStatus(cudnnConvolutionBackwardData(
                           ctx.cudnn, &one, w_, in[1].data, y_, in[0].data,
                           conv_, dataAlgo_, ctx.workspace, workspace_, &zero,
                           x_, out[0].data),
                       "convolution backward data");
  }

private:
  bool weight_, channelsLast_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnConvolutionBwdDataAlgo_t dataAlgo_{};
  cudnnConvolutionBwdFilterAlgo_t filterAlgo_{};
  size_t workspace_ = 0;
};

Status ConvGradKernel::init(const KernelArgs &a, DeviceContext &ctx,
                            const Shape &xs, const Shape &ws, const Shape &ys,
                            bool &ok) {
  ok = false;
  size_t spatial = xs.size() - 2;
  std::vector<int64_t> strides = a.attrs.getInts("strides"),
                       pads = a.attrs.getInts("pads"),
                       dilations = a.attrs.getInts("dilations");
  if (spatial < 1 || spatial > 3 || pads.size() != 2 * spatial)
    return Status();
  std::vector<int> padA, strideA, dilA;
  // 1-D problems become 2-D with a unit height.
  if (spatial == 1) {
    padA.push_back(0);
    strideA.push_back(1);
    dilA.push_back(1);
  }
  for (size_t i = 0; i < spatial; ++i) {
    // cuDNN pads symmetrically: the end padding must add no output.
    int64_t out =
        (xs[2 + i] + 2 * pads[i] - dilations[i] * (ws[2 + i] - 1) - 1) /
            strides[i] +
        1;
    if (out != ys[2 + i])
      return Status();
    padA.push_back(static_cast<int>(pads[i]));
    strideA.push_back(static_cast<int>(strides[i]));
    dilA.push_back(static_cast<int>(dilations[i]));
  }
  auto dims = [&](const Shape &s) {
    std::vector<int> d;
    for (size_t i = 0; i < s.size(); ++i) {
      if (i == 2 && spatial == 1)
        d.push_back(1);
      d.push_back(static_cast<int>(s[i]));
    }
    return d;
  };
  auto packed = [&](const std::vector<int> &d) {
    return packedStrides(d, channelsLast_);
  };
  std::vector<int> xd = dims(xs), wd = dims(ws), yd = dims(ys);
  int nd = static_cast<int>(xd.size());
  PARTC_RETURN_IF_ERROR(cudnnStatus(cudnnCreateTensorDescriptor(&x_), "desc"));
  PARTC_RETURN_IF_ERROR(cudnnStatus(cudnnCreateTensorDescriptor(&y_), "desc"));
  PARTC_RETURN_IF_ERROR(cudnnStatus(cudnnCreateFilterDescriptor(&w_), "desc"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnCreateConvolutionDescriptor(&conv_), "desc"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnSetTensorNdDescriptor(x_, CUDNN_DATA_FLOAT, nd,
                                             xd.data(), packed(xd).data()),
                  "input descriptor"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnSetTensorNdDescriptor(y_, CUDNN_DATA_FLOAT, nd,
                                             yd.data(), packed(yd).data()),
                  "gradient descriptor"));
  PARTC_RETURN_IF_ERROR(cudnnStatus(
      cudnnSetFilterNdDescriptor(
          w_, CUDNN_DATA_FLOAT,
          channelsLast_ ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, nd, wd.data()),
      "filter descriptor"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnSetConvolutionNdDescriptor(
                      conv_, nd - 2, padA.data(), strideA.data(), dilA.data(),
                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                  "convolution descriptor"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnSetConvolutionGroupCount(
                      conv_, static_cast<int>(a.attrs.getInt("group", 1))),
                  "group count"));
  PARTC_RETURN_IF_ERROR(cudnnStatus(
      cudnnSetConvolutionMathType(conv_, ctx.options.tf32 ? CUDNN_TENSOR_OP_MATH
                                                          : CUDNN_FMA_MATH),
      "math type"));
  // The fastest algorithm within 1 GiB of workspace, measured once.
  const size_t limit = size_t(1) << 30;
  int found = 0;
  if (weight_) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[8];
    PARTC_RETURN_IF_ERROR(
        cudnnStatus(cudnnFindConvolutionBackwardFilterAlgorithm(
                        ctx.cudnn, x_, y_, conv_, w_, 8, &found, perf),
                    "backward filter algorithm search"));
    for (int i = 0; i < found && !ok; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= limit) {
        filterAlgo_ = perf[i].algo;
        workspace_ = perf[i].memory;
        ok = true;
      }
  } else {
    cudnnConvolutionBwdDataAlgoPerf_t perf[8];
    PARTC_RETURN_IF_ERROR(
        cudnnStatus(cudnnFindConvolutionBackwardDataAlgorithm(
                        ctx.cudnn, w_, y_, conv_, x_, 8, &found, perf),
                    "backward data algorithm search"));
    for (int i = 0; i < found && !ok; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= limit) {
        dataAlgo_ = perf[i].algo;
        workspace_ = perf[i].memory;
        ok = true;
      }
  }
  return Status();
}

GpuFactory convGradFactory(bool weight) {
  return [weight](const KernelArgs &a, DeviceContext &ctx,
                  std::unique_ptr<GpuKernel> &k) -> Status {
    if (!allF32(a))
      return Status();
    // conv_grad_input (dy, w) -> dx; conv_grad_weight (x, dy) -> dw. The
    // descriptors take dimensions channels first.
    bool channelsLast = a.attrs.getInt("channels_last", 0) != 0;
    auto firstOrder = [&](const Shape &s) {
      return channelsLast ? channelsFirstShape(s) : s;
    };
    Shape xs = firstOrder(weight ? a.inputs[0].shape : a.outputs[0].shape);
    Shape ws = firstOrder(weight ? a.outputs[0].shape : a.inputs[1].shape);
    Shape ys = firstOrder(weight ? a.inputs[1].shape : a.inputs[0].shape);
    if (channelsLast && xs.size() != 4)
      return Status(); // 2-D images only, as partc-convert-layout makes
    auto kernel = std::make_unique<ConvGradKernel>(weight, channelsLast);
    bool ok = false;
    PARTC_RETURN_IF_ERROR(kernel->init(a, ctx, xs, ws, ys, ok));
    if (ok)
      k = std::move(kernel);
    return Status();
  };
}

//===----------------------------------------------------------------------===//
// Pooling and batch norm
//===----------------------------------------------------------------------===//

/// max_pool_grad (dy, x) and avg_pool_grad (dy); max pooling's argmaxes
/// in the shared workspace.
class PoolGradGpuKernel : public GpuKernel {
public:
  explicit PoolGradGpuKernel(const PoolParams &p) : p_(p) {}
  size_t workspaceBytes() const override { return poolGradScratchBytes(p_); }
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    return cudaStatus(launchPoolGrad(in[0].as<float>(),
                                     p_.isMax ? in[1].as<float>() : nullptr,
                                     out[0].as<float>(), ctx.workspace, p_,
                                     ctx.stream),
                      "pooling gradient");
  }

private:
  PoolParams p_;
};

GpuFactory poolGradFactory(bool isMax) {
  return [isMax](const KernelArgs &a, DeviceContext &,
                 std::unique_ptr<GpuKernel> &k) -> Status {
    if (!allF32(a))
      return Status();
    bool channelsLast = a.attrs.getInt("channels_last", 0) != 0;
    Shape x = a.outputs[0].shape, y = a.inputs[0].shape;
    if (channelsLast) {
      x = channelsFirstShape(x);
      y = channelsFirstShape(y);
    }
    PoolParams p;
    PARTC_RETURN_IF_ERROR(makePoolParams(a, x, y, isMax, p));
    p.channelsLast = channelsLast ? x[1] : 0;
    // Max pooling's argmaxes are offsets in the kernel, in 32 bits.
    __int128 taps = __int128(p.kernel[0]) * p.kernel[1] * p.kernel[2];
    if (isMax && taps > std::numeric_limits<int32_t>::max())
      return Status::error(
          "the window of kernel_shape " +
          shapeToString(a.attrs.getInts("kernel_shape")) +
          " has more taps than the GPU's max pooling gradient indexes (2^31); "
          "run this plan on the cpu backend");
    k = std::make_unique<PoolGradGpuKernel>(p);
    return Status();
  };
}

ChannelShape channelShape(const Shape &x, bool channelsLast) {
  if (channelsLast && x.size() >= 3)
    return {x[0], x.back(), product(x, 1, x.size() - 1), true};
  return {x[0], x[1], product(x, 2, x.size())};
}

/// batch_norm_train (x, scale, bias[, addend]) -> (y, mean, var), or
/// batch_norm_grad (dy, x, scale, mean, var[, bias]) -> (dx, dscale,
/// dbias); partial sums in the shared workspace. `relu`: the fused ReLU
/// (its gradient, reading the bias, for batch_norm_grad).
class BatchNormGpuKernel : public GpuKernel {
public:
  BatchNormGpuKernel(ChannelShape shape, double eps, bool gradient, bool relu)
      : shape_(shape), eps_(eps), gradient_(gradient), relu_(relu) {}

  size_t workspaceBytes() const override {
    return batchNormScratchBytes(shape_);
  }

  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    if (gradient_)
      return cudaStatus(
          launchBatchNormGrad(
              in[0].as<float>(), in[1].as<float>(), in[2].as<float>(),
              in[3].as<float>(), in[4].as<float>(),
              relu_ ? in[5].as<float>() : nullptr, out[0].as<float>(),
              out[1].as<float>(), out[2].as<float>(), shape_, eps_,
              ctx.workspace, ctx.stream),
          "batch norm gradient");
    return cudaStatus(
        launchBatchNormTrain(
            in[0].as<float>(), in[1].as<float>(), in[2].as<float>(),
            in.size() > 3 ? in[3].as<float>() : nullptr, relu_,
            out[0].as<float>(), out[1].as<float>(), out[2].as<float>(), shape_,
            eps_, ctx.workspace, ctx.stream),
        "batch norm (training)");
  }

private:
  ChannelShape shape_;
  double eps_;
  bool gradient_, relu_;
};

GpuFactory batchNormFactory(bool gradient) {
  return [gradient](const KernelArgs &a, DeviceContext &,
                    std::unique_ptr<GpuKernel> &k) -> Status {
    if (!allF32(a))
      return Status();
    bool relu = false;
    PARTC_RETURN_IF_ERROR(fusedRelu(a.attrs, relu));
    if (gradient && relu != (a.inputs.size() == 6))
      return Status::error("a fused ReLU needs the norm's bias as input 5");
    k = std::make_unique<BatchNormGpuKernel>(
        channelShape(a.inputs[gradient ? 1 : 0].shape,
                     a.attrs.getInt("channels_last", 0) != 0),
        a.attrs.getFloat("epsilon"), gradient, relu);
    return Status();
  };
}

/// layer_norm_grad (dy, x, scale) -> (dx, dscale, dbias); the column sums
/// and row statistics in the shared workspace.
class LayerNormGradGpuKernel : public GpuKernel {
public:
  LayerNormGradGpuKernel(int64_t rows, int64_t cols, double eps)
      : rows_(rows), cols_(cols), eps_(eps) {}

  size_t workspaceBytes() const override {
    return layerNormGradScratchBytes(rows_, cols_);
  }

  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *addend = in.size() > 3 ? in[3].as<float>() : nullptr;
    return cudaStatus(
        launchLayerNormGrad(in[0].as<float>(), in[1].as<float>(),
                            in[2].as<float>(), addend, out[0].as<float>(),
                            out[1].as<float>(), out[2].as<float>(), rows_,
                            cols_, eps_, ctx.workspace, ctx.stream),
        "layer norm gradient");
  }

private:
  int64_t rows_, cols_;
  double eps_;
};

//===----------------------------------------------------------------------===//
// Cross-entropy: labels out of range are reported after the run.
//===----------------------------------------------------------------------===//

class CrossEntropyGpuKernel : public IndexCheckedKernel {
public:
  CrossEntropyGpuKernel(int64_t rows, int64_t pitch, int64_t classes,
                        bool gradient)
      : rows_(rows), pitch_(pitch), classes_(classes), gradient_(gradient) {}
  ~CrossEntropyGpuKernel() override { cudaFree(rowLoss_); }

  Status init() {
    PARTC_RETURN_IF_ERROR(IndexCheckedKernel::init());
    if (gradient_)
      return Status();
    return cudaStatus(
        cudaMalloc(&rowLoss_, std::max<int64_t>(rows_, 1) * sizeof(double)),
        "cross-entropy scratch");
  }

  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    PARTC_RETURN_IF_ERROR(clearFlag(ctx.stream));
    if (gradient_)
      return cudaStatus(
          launchCrossEntropyGrad(in[0].as<float>(), in[1].as<int64_t>(),
                                 in[2].as<float>(), out[0].as<float>(), rows_,
                                 pitch_, classes_, bad_, ctx.stream),
          "cross-entropy gradient");
    return cudaStatus(launchCrossEntropy(in[0].as<float>(), in[1].as<int64_t>(),
                                         rowLoss_, out[0].as<float>(), rows_,
                                         pitch_, classes_, bad_, ctx.stream),
                      "cross-entropy");
  }

private:
  std::string rangeError() const override {
    return "a label is outside the " + std::to_string(classes_) +
           " classes [0, " + std::to_string(classes_) + ")";
  }

  int64_t rows_, pitch_, classes_;
  bool gradient_;
  double *rowLoss_ = nullptr;
};

GpuFactory crossEntropyFactory(bool gradient) {
  return [gradient](const KernelArgs &a, DeviceContext &,
                    std::unique_ptr<GpuKernel> &k) -> Status {
    const TensorType &logits = a.inputs[0];
    if (logits.dtype != DType::F32 || logits.shape.empty() ||
        a.inputs[1].dtype != DType::I64)
      return Status();
    int64_t pitch = logits.shape.back();
    int64_t classes = a.attrs.getInt("classes", pitch);
    if (classes < 1 || classes > pitch)
      return Status::error("classes = " + std::to_string(classes) +
                           " must be in [1, " + std::to_string(pitch) + "]");
    auto kernel = std::make_unique<CrossEntropyGpuKernel>(
        logits.numElements() / pitch, pitch, classes, gradient);
    PARTC_RETURN_IF_ERROR(kernel->init());
    k = std::move(kernel);
    return Status();
  };
}

} // namespace

void registerTrainingGpuKernels(GpuKernelTable &t) {
  t["conv_grad_input"] = convGradFactory(false);
  t["conv_grad_weight"] = convGradFactory(true);
  t["max_pool_grad"] = poolGradFactory(true);
  t["avg_pool_grad"] = poolGradFactory(false);
  t["batch_norm_train"] = batchNormFactory(false);
  t["batch_norm_grad"] = batchNormFactory(true);
  t["update_running_stats"] = [](const KernelArgs &a, DeviceContext &,
                                 std::unique_ptr<GpuKernel> &k) -> Status {
    if (!allF32(a))
      return Status();
    int64_t channels = a.inputs[0].numElements(),
            count = a.attrs.getInt("count");
    double momentum = a.attrs.getFloat("momentum");
    if (count < 2)
      return Status();
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      return cudaStatus(
          launchRunningStats(out[0].as<float>(), out[1].as<float>(),
                             in[2].as<float>(), in[3].as<float>(), channels,
                             momentum, count, ctx.stream),
          "running statistics");
    });
    return Status();
  };
  t["softmax_grad"] = [](const KernelArgs &a, DeviceContext &,
                         std::unique_ptr<GpuKernel> &k) -> Status {
    // A folded dropout's step and seed are int64; the tensors f32.
    if (a.inputs[0].dtype != DType::F32 || a.inputs[1].dtype != DType::F32 ||
        a.outputs[0].dtype != DType::F32)
      return Status();
    const Shape &y = a.inputs[1].shape;
    int64_t axis = a.attrs.getInt("axis");
    if (axis < 0 || axis >= static_cast<int64_t>(y.size()))
      return Status::error("axis " + std::to_string(axis) + " out of range");
    size_t at = static_cast<size_t>(axis);
    int64_t outer = product(y, 0, at), count = y[at],
            inner = product(y, at + 1, y.size());
    bool dropped = a.inputs.size() == 4;
    double ratio = dropped ? a.attrs.getFloat("dropout_ratio") : 0.0;
    int64_t stream = a.attrs.getInt("dropout_stream", 0),
            offset = a.attrs.getInt("dropout_offset", 0);
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      SoftmaxGradDropout dropout{nullptr, nullptr, ratio, stream, offset};
      if (dropped) {
        dropout.step = in[2].as<int64_t>();
        dropout.seed = in[3].as<int64_t>();
      }
      return cudaStatus(launchSoftmaxGrad(in[0].as<float>(), in[1].as<float>(),
                                          out[0].as<float>(), outer, count,
                                          inner, dropped ? &dropout : nullptr,
                                          ctx.stream),
                        "softmax gradient");
    });
    return Status();
  };
  t["layer_norm_grad"] = [](const KernelArgs &a, DeviceContext &,
                            std::unique_ptr<GpuKernel> &k) -> Status {
    if (!allF32(a))
      return Status();
    const Shape &x = a.inputs[1].shape;
    int64_t axis = a.attrs.getInt("axis");
    if (axis < 0 || axis > static_cast<int64_t>(x.size()))
      return Status::error("axis " + std::to_string(axis) + " out of range");
    int64_t cols = 1;
    for (size_t d = static_cast<size_t>(axis); d < x.size(); ++d)
      cols *= x[d];
    int64_t rows = cols ? a.inputs[1].numElements() / cols : 0;
    k = std::make_unique<LayerNormGradGpuKernel>(rows, cols,
                                                 a.attrs.getFloat("epsilon"));
    return Status();
  };
  t["softmax_cross_entropy"] = crossEntropyFactory(false);
  t["softmax_cross_entropy_grad"] = crossEntropyFactory(true);
  t["sgd_update"] = [](const KernelArgs &a, DeviceContext &,
                       std::unique_ptr<GpuKernel> &k) -> Status {
    if (!allF32(a))
      return Status();
    double lr = a.attrs.getFloat("lr"),
           momentum = a.attrs.getFloat("momentum", 0.0),
           decay = a.attrs.getFloat("weight_decay", 0.0);
    int64_t n = a.inputs[0].numElements();
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      // Outputs are the state read: the parameter, then the buffer.
      return cudaStatus(launchSgd(out[0].as<float>(), in[1].as<float>(),
                                  momentum != 0 ? out[1].as<float>() : nullptr,
                                  n, lr, momentum, decay, ctx.stream),
                        "SGD step");
    });
    return Status();
  };
  t["adamw_update"] = [](const KernelArgs &a, DeviceContext &,
                         std::unique_ptr<GpuKernel> &k) -> Status {
    for (size_t i = 0; i < 4; ++i)
      if (a.inputs[i].dtype != DType::F32)
        return Status();
    AdamWParams p{a.attrs.getFloat("lr"), a.attrs.getFloat("beta1"),
                  a.attrs.getFloat("beta2"), a.attrs.getFloat("eps"),
                  a.attrs.getFloat("weight_decay")};
    int64_t n = a.inputs[0].numElements();
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      return cudaStatus(launchAdamW(out[0].as<float>(), in[1].as<float>(),
                                    out[1].as<float>(), out[2].as<float>(),
                                    in[4].as<int64_t>(), n, p, ctx.stream),
                        "AdamW step");
    });
    return Status();
  };
  t["dropout"] = [](const KernelArgs &a, DeviceContext &,
                    std::unique_ptr<GpuKernel> &k) -> Status {
    if (a.inputs[0].dtype != DType::F32)
      return Status();
    double ratio = a.attrs.getFloat("ratio");
    int64_t stream = a.attrs.getInt("stream");
    int64_t offset = a.attrs.getInt("offset", 0);
    int64_t n = a.inputs[0].numElements();
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      return cudaStatus(launchDropout(in[0].as<float>(), out[0].as<float>(), n,
                                      offset, in[1].as<int64_t>(),
                                      in[2].as<int64_t>(), stream, ratio,
                                      ctx.stream),
                        "dropout");
    });
    return Status();
  };
  t["count_step"] = [](const KernelArgs &, DeviceContext &,
                       std::unique_ptr<GpuKernel> &k) -> Status {
    k = lambda([](DeviceContext &ctx, const std::vector<TensorRef> &,
                  const std::vector<TensorRef> &out) {
      return cudaStatus(launchCountStep(out[0].as<int64_t>(), ctx.stream),
                        "step count");
    });
    return Status();
  };
}

} // namespace partc::runtime::cuda
