//===- ConvKernel.cpp - Convolution with its epilogue --------------------===//
//
// One convolution with its epilogue, y = act(conv(x, w) + bias + z), has up
// to three implementations:
//  * separate: cuDNN's convolution, then one vectorized epilogue pass;
//  * cudnn-fused: cudnnConvolutionBiasActivationForward;
//  * gemm-fused: a 1x1, stride-1 channels-last convolution is the GEMM
//    Y[pixels, K] = X[pixels, C] * W[K, C]^T, which cuBLASLt runs with the
//    bias and ReLU in its epilogue and the residual as its C operand;
//  * widened (separate or fused): a channels-last input whose channel count
//    is not a multiple of four (an image's three colours) keeps cuDNN off
//    its tensor-core kernels, so the input is first copied into channels
//    padded with zeros, against a filter padded the same way;
//  * graph: an execution plan of cuDNN's graph API (CudnnGraphConv.h), the
//    convolution alone then the epilogue pass, or all of it in one plan;
//  * depthwise: a channels-last 2-D convolution with one filter per
//    channel runs partc's own kernel, epilogue included;
//  * few-channel: a 16-bit channels-last 2-D convolution over at most four
//    input channels (a CNN's stem) runs partc's tensor-core kernel
//    (FewChannelConv.cu), epilogue included.
// A fused SiLU (no library epilogue computes it) goes into the separate
// epilogue pass and partc's own kernels; after the other variants' fused
// epilogues it is a pass of its own.
// Which is fastest depends on the shape and on the library version, so
// tune() times them on the device at load time and keeps the fastest one
// whose result agrees with the separate one.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/CudnnGraphConv.h"
#include "runtime/cuda/LibraryStatus.h"
#include "runtime/cuda/LtHeuristics.h"
#include "runtime/kernels/KernelRegistry.h"

#include <cudnn.h>

#include <algorithm>
#include <optional>

namespace partc::runtime::cuda {

std::vector<int> packedStrides(const std::vector<int> &dims,
                               bool channelsLast) {
  std::vector<int> s(dims.size(), 1);
  if (!channelsLast) {
    for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
      s[i] = s[i + 1] * dims[i + 1];
    return s;
  }
  int step = dims[1];
  for (int i = static_cast<int>(dims.size()) - 1; i >= 2; --i) {
    s[i] = step;
    step *= dims[i];
  }
  s[0] = step;
  return s;
}

namespace {

/// launchDepthwiseConv's forms by index, as profiles name them.
const char *const kDepthwiseFormNames[] = {"depthwise", "depthwise-rows",
                                           "depthwise-rows-light",
                                           "depthwise-rows-tall"};

enum class ConvVariant {
  Separate,
  CudnnFused,
  GemmFused,
  WidenedSeparate,
  WidenedFused,
  Graph,
  FewChannels,
  Depthwise
};

struct ConvOperands {
  const void *x, *w, *bias, *z;
  void *y;
};

/// An algorithm cudnnConvolutionBiasActivationForward may use, and its
/// workspace.
struct FusedAlgo {
  cudnnConvolutionFwdAlgo_t algo;
  size_t workspace;
};

/// What cuDNN convolves: the operands as given, or the widened copies.
struct CudnnInput {
  cudnnTensorDescriptor_t xDesc;
  const void *x;
  cudnnFilterDescriptor_t wDesc;
  const void *w;
  void *workspace;
};

class ConvKernel : public GpuKernel {
public:
  ~ConvKernel() override;
  Status init(const KernelArgs &a, DeviceContext &ctx);

  size_t workspaceBytes() const override {
    size_t bytes = workspace_;
    for (const FusedAlgo &f : fusedAlgos_)
      bytes = std::max(bytes, f.workspace);
    if (!gemmAlgos_.empty())
      bytes = std::max(bytes, kLtWorkspace);
    if (wide_.x) {
      size_t inner = wide_.workspace;
      for (const FusedAlgo &f : wide_.fused)
        inner = std::max(inner, f.workspace);
      bytes = std::max(bytes, wide_.inputBytes + inner);
    }
    if (graph_)
      bytes = std::max(bytes, graph_->workspaceBytes());
    return bytes;
  }

  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    return runVariant(chosen_, choice_, ctx, operands(in, out[0].data));
  }

  Status tune(DeviceContext &ctx, const std::vector<TensorRef> &in,
              const std::vector<TensorRef> &out, TuneScratch &scratch) override;
  bool adoptCandidate(size_t c) override;

  const char *variant() const override {
    switch (chosen_) {
    case ConvVariant::Separate:
      return "cudnn+epilogue";
    case ConvVariant::CudnnFused:
      return "cudnn-fused";
    case ConvVariant::GemmFused:
      return "cublaslt-fused";
    case ConvVariant::WidenedSeparate:
      return "cudnn-widened+epilogue";
    case ConvVariant::WidenedFused:
      return "cudnn-widened-fused";
    case ConvVariant::Graph:
      return graphVariant_.c_str();
    case ConvVariant::Depthwise:
      return kDepthwiseFormNames[choice_ < 4 ? choice_ : 0];
    case ConvVariant::FewChannels:
      return choice_ ? "few-channel-rows" : "few-channel";
    }
    return nullptr;
  }

private:
  ConvOperands operands(const std::vector<TensorRef> &in, void *y) const {
    return {in[0].data, in[1].data, hasBias_ ? in[2].data : nullptr,
            hasAddend_ ? in[3].data : nullptr, y};
  }
  Status runVariant(ConvVariant v, size_t index, DeviceContext &ctx,
                    const ConvOperands &ops);
  Status runVariantBody(ConvVariant v, size_t index, DeviceContext &ctx,
                        const ConvOperands &ops);
  /// Whether variant v's run applies the epilogue pass (runEpilogue) or
  /// partc's depthwise kernel, which both compute SiLU.
  bool appliesSilu(ConvVariant v, size_t index) const;
  CudnnInput given(DeviceContext &ctx, const ConvOperands &ops) const {
    return {x_, ops.x, w_, ops.w, ctx.workspace};
  }
  Status runSeparate(DeviceContext &ctx, const ConvOperands &ops,
                     const CudnnInput &in, cudnnConvolutionFwdAlgo_t algo,
                     size_t workspaceBytes);
  Status runEpilogue(DeviceContext &ctx, const ConvOperands &ops);
  Status runCudnnFused(DeviceContext &ctx, const ConvOperands &ops,
                       const CudnnInput &in, const FusedAlgo &f);
  Status runGemm(DeviceContext &ctx, const ConvOperands &ops, size_t index);
  Status runWidened(DeviceContext &ctx, const ConvOperands &ops, bool fused,
                    size_t index);
  Status initCudnnFused(DeviceContext &ctx, int nd);
  Status initGemm(const KernelArgs &a, DeviceContext &ctx);
  Status initWidened(DeviceContext &ctx, std::vector<int> xd,
                     std::vector<int> wd, const std::vector<int> &xStrides);
  Status widenWeights(DeviceContext &ctx, const void *weights);

  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, bias_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnActivationDescriptor_t act_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace_ = 0;
  std::vector<FusedAlgo> fusedAlgos_;
  /// The algorithms cudnnConvolutionBiasActivationForward may use with
  /// these input and filter descriptors.
  std::vector<FusedAlgo> fusedAlgosFor(DeviceContext &ctx,
                                       cudnnTensorDescriptor_t x,
                                       cudnnFilterDescriptor_t w,
                                       cudnnConvolutionFwdAlgo_t chosen) const;
  /// The widened variants' descriptors, algorithms and filter; the widened
  /// input goes at the start of the workspace, cuDNN's after it.
  struct Widened {
    cudnnTensorDescriptor_t x = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    size_t workspace = 0, inputBytes = 0;
    std::vector<FusedAlgo> fused;
    float *weights = nullptr;
    int channels = 0, padded = 0;
    int64_t pixels = 0, filterRows = 0;
  } wide_;
  std::unique_ptr<CudnnGraphConv> graph_;
  cublasLtMatmulDesc_t gemm_ = nullptr;
  cublasLtMatrixLayout_t gemmW_ = nullptr, gemmX_ = nullptr, gemmY_ = nullptr;
  std::vector<cublasLtMatmulAlgo_t> gemmAlgos_;
  ConvVariant chosen_ = ConvVariant::Separate;
  size_t choice_ = 0;
  /// tune()'s candidates: a variant and its index among that variant's.
  std::vector<std::pair<ConvVariant, size_t>> candidates_;
  /// variant() of a graph plan: its kind, engine and knobs.
  std::string graphVariant_;
  bool hasBias_ = false, hasAddend_ = false, relu_ = false, silu_ = false,
       channelsLast_ = false;
  /// Set where the depthwise variant applies.
  std::optional<DepthwiseGeometry> depthwise_;
  /// Set where the few-channel variant applies.
  std::optional<FewChannelConvGeometry> fewChannels_;
  bool fuseEpilogues_ = true;
  /// The operands' type in memory: FusedParams::F32, BF16 or F16.
  unsigned char element_ = FusedParams::F32;
  cudnnDataType_t stored_ = CUDNN_DATA_FLOAT;
  int64_t m_ = 0, inner_ = 1, n_ = 0;
};

ConvKernel::~ConvKernel() {
  if (x_)
    cudnnDestroyTensorDescriptor(x_);
  if (y_)
    cudnnDestroyTensorDescriptor(y_);
  if (bias_)
    cudnnDestroyTensorDescriptor(bias_);
  if (w_)
    cudnnDestroyFilterDescriptor(w_);
  if (conv_)
    cudnnDestroyConvolutionDescriptor(conv_);
  if (act_)
    cudnnDestroyActivationDescriptor(act_);
  if (gemm_)
    cublasLtMatmulDescDestroy(gemm_);
  for (cublasLtMatrixLayout_t l : {gemmW_, gemmX_, gemmY_})
    if (l)
      cublasLtMatrixLayoutDestroy(l);
  if (wide_.x)
    cudnnDestroyTensorDescriptor(wide_.x);
  if (wide_.w)
    cudnnDestroyFilterDescriptor(wide_.w);
  if (wide_.weights)
    cudaFree(wide_.weights);
}

Status ConvKernel::init(const KernelArgs &a, DeviceContext &ctx) {
  channelsLast_ = a.attrs.getInt("channels_last", 0) != 0;
  if (a.outputs[0].dtype == DType::BF16) {
    element_ = FusedParams::BF16;
    stored_ = CUDNN_DATA_BFLOAT16;
  } else if (a.outputs[0].dtype == DType::F16) {
    element_ = FusedParams::F16;
    stored_ = CUDNN_DATA_HALF;
  }
  bool sixteen = element_ != FusedParams::F32;
  // Descriptors take dimensions channels first; channels-last operands are
  // described by their strides (and the filter by its format).
  auto firstOrder = [&](const Shape &s) {
    return channelsLast_ ? channelsFirstShape(s) : s;
  };
  Shape xs = firstOrder(a.inputs[0].shape), ws = firstOrder(a.inputs[1].shape),
        ys = firstOrder(a.outputs[0].shape);
  int spatial = static_cast<int>(xs.size()) - 2;
  std::vector<int64_t> strides = a.attrs.getInts("strides"),
                       pads = a.attrs.getInts("pads"),
                       dil = a.attrs.getInts("dilations");
  // 1-D problems become 2-D with a unit height.
  auto dims = [&](const Shape &s) {
    std::vector<int> d;
    for (size_t i = 0; i < s.size(); ++i) {
      if (i == 2 && spatial == 1)
        d.push_back(1);
      d.push_back(static_cast<int>(s[i]));
    }
    return d;
  };
  std::vector<int> xd = dims(xs), wd = dims(ws), yd = dims(ys);
  std::vector<int> padA, strideA, dilA;
  if (spatial == 1) {
    padA.push_back(0);
    strideA.push_back(1);
    dilA.push_back(1);
  }
  for (int i = 0; i < spatial; ++i) {
    padA.push_back(static_cast<int>(pads[i]));
    strideA.push_back(static_cast<int>(strides[i]));
    dilA.push_back(static_cast<int>(dil[i]));
  }
  int nd = static_cast<int>(xd.size());
  auto packed = [&](const std::vector<int> &d) {
    return packedStrides(d, channelsLast_);
  };
  PARTC_RETURN_IF_ERROR(cudnnStatus(cudnnCreateTensorDescriptor(&x_), "desc"));
  PARTC_RETURN_IF_ERROR(cudnnStatus(cudnnCreateTensorDescriptor(&y_), "desc"));
  PARTC_RETURN_IF_ERROR(cudnnStatus(cudnnCreateFilterDescriptor(&w_), "desc"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnCreateConvolutionDescriptor(&conv_), "desc"));
  PARTC_RETURN_IF_ERROR(cudnnStatus(
      cudnnSetTensorNdDescriptor(x_, stored_, nd, xd.data(), packed(xd).data()),
      "input descriptor"));
  PARTC_RETURN_IF_ERROR(cudnnStatus(
      cudnnSetTensorNdDescriptor(y_, stored_, nd, yd.data(), packed(yd).data()),
      "output descriptor"));
  PARTC_RETURN_IF_ERROR(cudnnStatus(
      cudnnSetFilterNdDescriptor(
          w_, stored_, channelsLast_ ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
          nd, wd.data()),
      "filter descriptor"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnSetConvolutionNdDescriptor(
                      conv_, nd - 2, padA.data(), strideA.data(), dilA.data(),
                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                  "convolution descriptor"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnSetConvolutionGroupCount(
                      conv_, static_cast<int>(a.attrs.getInt("group"))),
                  "group count"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnSetConvolutionMathType(conv_, ctx.options.tf32 || sixteen
                                                         ? CUDNN_TENSOR_OP_MATH
                                                         : CUDNN_FMA_MATH),
                  "math type"));
  // Pick the algorithm once, by measurement, and keep it.
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  int found = 0;
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnFindConvolutionForwardAlgorithm(ctx.cudnn, x_, w_, conv_,
                                                       y_, 8, &found, perf),
                  "algorithm search"));
  const size_t limit = size_t(1) << 30;
  bool picked = false;
  for (int i = 0; i < found && !picked; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= limit) {
      algo_ = perf[i].algo;
      workspace_ = perf[i].memory;
      picked = true;
    }
  if (!picked)
    return Status::error("cuDNN found no convolution algorithm");
  hasBias_ = a.inputs.size() >= 3;
  hasAddend_ = a.inputs.size() == 4;
  FusedActivation activation;
  PARTC_RETURN_IF_ERROR(fusedConvActivation(a.attrs, activation));
  relu_ = activation == FusedActivation::Relu;
  silu_ = activation == FusedActivation::Silu;
  m_ = ws[0];
  inner_ = 1;
  for (size_t d = 2; d < ys.size() && !channelsLast_; ++d)
    inner_ *= ys[d];
  n_ = a.outputs[0].numElements();
  fuseEpilogues_ = ctx.options.fuseEpilogues;
  // One filter per channel (a multiplier of one), 2-D, channels last.
  if (channelsLast_ && spatial == 2 && a.attrs.getInt("group") == xs[1] &&
      ws[0] == xs[1] && ws[1] == 1) {
    DepthwiseGeometry g;
    g.n = xd[0], g.c = xd[1], g.h = xd[2], g.w = xd[3];
    g.oh = yd[2], g.ow = yd[3], g.kh = wd[2], g.kw = wd[3];
    g.padTop = padA[0], g.padLeft = padA[1];
    g.strideH = strideA[0], g.strideW = strideA[1];
    g.dilationH = dilA[0], g.dilationW = dilA[1];
    depthwise_ = g;
  }
  if (channelsLast_ && sixteen && spatial == 2 &&
      a.attrs.getInt("group") == 1 && dilA[0] == 1 && dilA[1] == 1) {
    FewChannelConvGeometry g;
    g.n = xd[0], g.c = xd[1], g.h = xd[2], g.w = xd[3], g.k = yd[1];
    g.oh = yd[2], g.ow = yd[3], g.kh = wd[2], g.kw = wd[3];
    g.padTop = padA[0], g.padLeft = padA[1];
    g.strideH = strideA[0], g.strideW = strideA[1];
    if (fewChannelConvForms(g) > 0)
      fewChannels_ = g;
  }
  if (ctx.options.cudnnGraph) {
    auto wide = [](const std::vector<int> &v) {
      return std::vector<int64_t>(v.begin(), v.end());
    };
    ConvGeometry geometry{wide(xd),         wide(packed(xd)), wide(wd),
                          wide(packed(wd)), wide(yd),         wide(packed(yd)),
                          wide(padA),       wide(strideA),    wide(dilA)};
    graph_ = std::make_unique<CudnnGraphConv>();
    graph_->init(ctx, geometry, hasBias_ && ctx.options.fuseEpilogues,
                 hasAddend_ && ctx.options.fuseEpilogues,
                 relu_ && ctx.options.fuseEpilogues, element_);
    if (!graph_->size())
      graph_.reset();
  }
  if (!ctx.options.fuseEpilogues)
    return Status();
  // cudnnConvolutionBiasActivationForward and the widened input describe
  // f32 operands; cuBLASLt takes 16-bit ones too.
  if (hasBias_ && !sixteen)
    PARTC_RETURN_IF_ERROR(initCudnnFused(ctx, nd));
  bool pointwise = channelsLast_ && a.attrs.getInt("group") == 1;
  for (int i = 0; i < spatial; ++i)
    pointwise = pointwise && ws[2 + i] == 1 && strides[i] == 1 &&
                pads[i] == 0 && pads[i + spatial] == 0;
  if (pointwise)
    PARTC_RETURN_IF_ERROR(initGemm(a, ctx));
  if (channelsLast_ && a.attrs.getInt("group") == 1 && xd[1] % 4 != 0 &&
      !sixteen)
    PARTC_RETURN_IF_ERROR(initWidened(ctx, xd, wd, packed(xd)));
  return Status();
}

Status ConvKernel::initWidened(DeviceContext &ctx, std::vector<int> xd,
                               std::vector<int> wd,
                               const std::vector<int> &xStrides) {
  int nd = static_cast<int>(xd.size());
  wide_.channels = xd[1];
  wide_.padded = (xd[1] + 3) / 4 * 4;
  xd[1] = wd[1] = wide_.padded;
  // Channels last: every stride but the channel's grows by padded/channels.
  std::vector<int> strides(xStrides);
  for (int i = 0; i < nd; ++i)
    if (i != 1)
      strides[i] = strides[i] / wide_.channels * wide_.padded;
  wide_.pixels = 1;
  for (int i = 0; i < nd; ++i)
    if (i != 1)
      wide_.pixels *= xd[i];
  wide_.filterRows = 1;
  for (int i = 0; i < nd; ++i)
    if (i != 1)
      wide_.filterRows *= wd[i];
  wide_.inputBytes =
      (static_cast<size_t>(wide_.pixels) * wide_.padded * sizeof(float) + 255) /
      256 * 256;
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnCreateTensorDescriptor(&wide_.x), "desc"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnCreateFilterDescriptor(&wide_.w), "desc"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnSetTensorNdDescriptor(wide_.x, CUDNN_DATA_FLOAT, nd,
                                             xd.data(), strides.data()),
                  "widened input descriptor"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnSetFilterNdDescriptor(wide_.w, CUDNN_DATA_FLOAT,
                                             CUDNN_TENSOR_NHWC, nd, wd.data()),
                  "widened filter descriptor"));
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  int found = 0;
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnFindConvolutionForwardAlgorithm(
                      ctx.cudnn, wide_.x, wide_.w, conv_, y_, 8, &found, perf),
                  "widened algorithm search"));
  bool picked = false;
  for (int i = 0; i < found && !picked; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS &&
        perf[i].memory <= (size_t(1) << 30)) {
      wide_.algo = perf[i].algo;
      wide_.workspace = perf[i].memory;
      picked = true;
    }
  if (!picked) {
    // Not an error: the other variants remain.
    cudnnDestroyTensorDescriptor(wide_.x);
    cudnnDestroyFilterDescriptor(wide_.w);
    wide_.x = nullptr;
    wide_.w = nullptr;
    return Status();
  }
  if (bias_)
    wide_.fused = fusedAlgosFor(ctx, wide_.x, wide_.w, wide_.algo);
  return Status();
}

Status ConvKernel::widenWeights(DeviceContext &ctx, const void *weights) {
  if (wide_.weights)
    return Status();
  PARTC_RETURN_IF_ERROR(cudaStatus(
      cudaMalloc(&wide_.weights, static_cast<size_t>(wide_.filterRows) *
                                     wide_.padded * sizeof(float)),
      "widened filter"));
  return cudaStatus(launchPadChannels(static_cast<const float *>(weights),
                                      wide_.weights, wide_.filterRows,
                                      wide_.channels, wide_.padded, ctx.stream),
                    "widened filter");
}

Status ConvKernel::initCudnnFused(DeviceContext &ctx, int nd) {
  // The bias is a [1, K, 1, ...] tensor broadcast over the output.
  std::vector<int> bd(nd, 1), bs(nd, 1);
  bd[1] = static_cast<int>(m_);
  bs[0] = static_cast<int>(m_);
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnCreateTensorDescriptor(&bias_), "desc"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnSetTensorNdDescriptor(bias_, CUDNN_DATA_FLOAT, nd,
                                             bd.data(), bs.data()),
                  "bias descriptor"));
  PARTC_RETURN_IF_ERROR(
      cudnnStatus(cudnnCreateActivationDescriptor(&act_), "desc"));
  PARTC_RETURN_IF_ERROR(cudnnStatus(
      cudnnSetActivationDescriptor(
          act_, relu_ ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
          CUDNN_PROPAGATE_NAN, 0.0),
      "activation descriptor"));
  fusedAlgos_ = fusedAlgosFor(ctx, x_, w_, algo_);
  return Status();
}

std::vector<FusedAlgo>
ConvKernel::fusedAlgosFor(DeviceContext &ctx, cudnnTensorDescriptor_t x,
                          cudnnFilterDescriptor_t w,
                          cudnnConvolutionFwdAlgo_t chosen) const {
  // Without ReLU cuDNN only fuses with the precomputed implicit GEMM; with
  // it, the chosen algorithm is worth trying as well.
  std::vector<cudnnConvolutionFwdAlgo_t> algos = {
      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM};
  if (relu_ && chosen != algos[0])
    algos.push_back(chosen);
  std::vector<FusedAlgo> result;
  for (cudnnConvolutionFwdAlgo_t algo : algos) {
    size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(
            ctx.cudnn, x, w, conv_, y_, algo, &bytes) == CUDNN_STATUS_SUCCESS &&
        bytes <= (size_t(1) << 30))
      result.push_back({algo, bytes});
  }
  return result;
}

Status ConvKernel::initGemm(const KernelArgs &a, DeviceContext &ctx) {
  if (!ctx.cublasLt)
    return Status();
  uint64_t channels = static_cast<uint64_t>(a.inputs[0].shape.back());
  uint64_t pixels = static_cast<uint64_t>(n_) / static_cast<uint64_t>(m_);
  uint64_t filters = static_cast<uint64_t>(m_);
  cudaDataType_t type = element_ == FusedParams::BF16  ? CUDA_R_16BF
                        : element_ == FusedParams::F16 ? CUDA_R_16F
                                                       : CUDA_R_32F;
  // Column-major view: W is C x K (used transposed), X is C x pixels, Y and
  // the residual are K x pixels.
  PARTC_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatmulDescCreate(&gemm_,
                               ctx.options.tf32 && element_ == FusedParams::F32
                                   ? CUBLAS_COMPUTE_32F_FAST_TF32
                                   : CUBLAS_COMPUTE_32F,
                               CUDA_R_32F),
      "cuBLASLt descriptor"));
  cublasOperation_t transposed = CUBLAS_OP_T, plain = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = ltEpilogue(hasBias_, relu_);
  PARTC_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatmulDescSetAttribute(gemm_, CUBLASLT_MATMUL_DESC_TRANSA,
                                     &transposed, sizeof(transposed)),
      "cuBLASLt descriptor"));
  PARTC_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatmulDescSetAttribute(gemm_, CUBLASLT_MATMUL_DESC_TRANSB, &plain,
                                     sizeof(plain)),
      "cuBLASLt descriptor"));
  PARTC_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatmulDescSetAttribute(gemm_, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                     &epilogue, sizeof(epilogue)),
      "cuBLASLt descriptor"));
  PARTC_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatrixLayoutCreate(&gemmW_, type, channels, filters, channels),
      "cuBLASLt layout"));
  PARTC_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatrixLayoutCreate(&gemmX_, type, channels, pixels, channels),
      "cuBLASLt layout"));
  PARTC_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatrixLayoutCreate(&gemmY_, type, filters, pixels, filters),
      "cuBLASLt layout"));
  // No algorithm is not an error: the cuDNN variants remain.
  gemmAlgos_ = ltAlgorithms(ctx.cublasLt, gemm_, gemmW_, gemmX_, gemmY_, 4);
  return Status();
}

bool ConvKernel::appliesSilu(ConvVariant v, size_t index) const {
  switch (v) {
  case ConvVariant::Separate:
  case ConvVariant::WidenedSeparate:
  case ConvVariant::Depthwise:
  case ConvVariant::FewChannels:
    return true;
  case ConvVariant::Graph:
    return !graph_->fusesEpilogue(index);
  case ConvVariant::CudnnFused:
  case ConvVariant::GemmFused:
  case ConvVariant::WidenedFused:
    break;
  }
  return false;
}

Status ConvKernel::runVariant(ConvVariant v, size_t index, DeviceContext &ctx,
                              const ConvOperands &ops) {
  PARTC_RETURN_IF_ERROR(runVariantBody(v, index, ctx, ops));
  if (!silu_ || appliesSilu(v, index))
    return Status();
  return cudaStatus(launchSiluInPlace(ops.y, n_, element_, ctx.stream),
                    "conv SiLU");
}

Status ConvKernel::runVariantBody(ConvVariant v, size_t index,
                                  DeviceContext &ctx, const ConvOperands &ops) {
  switch (v) {
  case ConvVariant::Separate:
    return runSeparate(ctx, ops, given(ctx, ops), algo_, workspace_);
  case ConvVariant::CudnnFused:
    return runCudnnFused(ctx, ops, given(ctx, ops), fusedAlgos_[index]);
  case ConvVariant::GemmFused:
    return runGemm(ctx, ops, index);
  case ConvVariant::WidenedSeparate:
    return runWidened(ctx, ops, false, index);
  case ConvVariant::WidenedFused:
    return runWidened(ctx, ops, true, index);
  case ConvVariant::Graph:
    PARTC_RETURN_IF_ERROR(
        graph_->run(ctx, index, ops.x, ops.w, ops.bias, ops.z, ops.y));
    return graph_->fusesEpilogue(index) ? Status() : runEpilogue(ctx, ops);
  case ConvVariant::Depthwise:
    if (!fuseEpilogues_) {
      PARTC_RETURN_IF_ERROR(
          cudaStatus(launchDepthwiseConv(ops.x, ops.w, nullptr, nullptr, ops.y,
                                         *depthwise_, false, false, element_,
                                         ctx.stream, static_cast<int>(index)),
                     "depthwise convolution"));
      return runEpilogue(ctx, ops);
    }
    return cudaStatus(launchDepthwiseConv(ops.x, ops.w, ops.bias, ops.z, ops.y,
                                          *depthwise_, relu_, silu_, element_,
                                          ctx.stream, static_cast<int>(index)),
                      "depthwise convolution");
  case ConvVariant::FewChannels:
    if (!fuseEpilogues_) {
      PARTC_RETURN_IF_ERROR(
          cudaStatus(launchFewChannelConv(ops.x, ops.w, nullptr, nullptr, ops.y,
                                          *fewChannels_, false, false, element_,
                                          ctx.stream, static_cast<int>(index)),
                     "few-channel convolution"));
      return runEpilogue(ctx, ops);
    }
    return cudaStatus(launchFewChannelConv(ops.x, ops.w, ops.bias, ops.z, ops.y,
                                           *fewChannels_, relu_, silu_,
                                           element_, ctx.stream,
                                           static_cast<int>(index)),
                      "few-channel convolution");
  }
  return Status();
}

Status ConvKernel::runWidened(DeviceContext &ctx, const ConvOperands &ops,
                              bool fused, size_t index) {
  float *input = static_cast<float *>(ctx.workspace);
  PARTC_RETURN_IF_ERROR(cudaStatus(
      launchPadChannels(static_cast<const float *>(ops.x), input, wide_.pixels,
                        wide_.channels, wide_.padded, ctx.stream),
      "widen input"));
  CudnnInput in{wide_.x, input, wide_.w, wide_.weights,
                static_cast<uint8_t *>(ctx.workspace) + wide_.inputBytes};
  if (fused)
    return runCudnnFused(ctx, ops, in, wide_.fused[index]);
  return runSeparate(ctx, ops, in, wide_.algo, wide_.workspace);
}

Status ConvKernel::runSeparate(DeviceContext &ctx, const ConvOperands &ops,
                               const CudnnInput &in,
                               cudnnConvolutionFwdAlgo_t algo,
                               size_t workspaceBytes) {
  float one = 1.f, zero = 0.f;
  PARTC_RETURN_IF_ERROR(cudnnStatus(
      cudnnConvolutionForward(ctx.cudnn, &one, in.xDesc, in.x, in.wDesc, in.w,
                              conv_, algo, in.workspace, workspaceBytes, &zero,
                              y_, ops.y),
      "cudnnConvolutionForward"));
  return runEpilogue(ctx, ops);
}

Status ConvKernel::runEpilogue(DeviceContext &ctx, const ConvOperands &ops) {
  if (element_ != FusedParams::F32)
    PARTC_RETURN_IF_ERROR(
        cudaStatus(launchEpilogue16(ops.y, ops.bias, ops.z, n_, m_, inner_,
                                    relu_, element_, ctx.stream),
                   "conv epilogue"));
  else
    PARTC_RETURN_IF_ERROR(
        cudaStatus(launchEpilogue(static_cast<float *>(ops.y),
                                  static_cast<const float *>(ops.bias),
                                  static_cast<const float *>(ops.z), n_, m_,
                                  inner_, relu_, ctx.stream),
                   "conv epilogue"));
  // A pass of its own: the interpreted chain runs SiLU several times
  // slower than this kernel.
  if (!silu_)
    return Status();
  return cudaStatus(launchSiluInPlace(ops.y, n_, element_, ctx.stream),
                    "conv SiLU");
}

Status ConvKernel::runCudnnFused(DeviceContext &ctx, const ConvOperands &ops,
                                 const CudnnInput &in, const FusedAlgo &f) {
  float one = 1.f, residual = ops.z ? 1.f : 0.f;
  // Without a residual, z aliases y with a zero weight (cuDNN allows it).
  return cudnnStatus(cudnnConvolutionBiasActivationForward(
                         ctx.cudnn, &one, in.xDesc, in.x, in.wDesc, in.w, conv_,
                         f.algo, in.workspace, f.workspace, &residual, y_,
                         ops.z ? ops.z : ops.y, bias_, ops.bias, act_, y_,
                         ops.y),
                     "cudnnConvolutionBiasActivationForward");
}

Status ConvKernel::runGemm(DeviceContext &ctx, const ConvOperands &ops,
                           size_t index) {
  if (hasBias_)
    PARTC_RETURN_IF_ERROR(cublasStatus(
        cublasLtMatmulDescSetAttribute(gemm_, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                       &ops.bias, sizeof(ops.bias)),
        "cuBLASLt bias"));
  float one = 1.f, residual = ops.z ? 1.f : 0.f;
  return cublasStatus(cublasLtMatmul(ctx.cublasLt, gemm_, &one, ops.w, gemmW_,
                                     ops.x, gemmX_, &residual,
                                     ops.z ? ops.z : ops.y, gemmY_, ops.y,
                                     gemmY_, &gemmAlgos_[index], ctx.workspace,
                                     kLtWorkspace, ctx.stream),
                      "cublasLtMatmul");
}

Status ConvKernel::tune(DeviceContext &ctx, const std::vector<TensorRef> &in,
                        const std::vector<TensorRef> &out,
                        TuneScratch &scratch) {
  candidates_ = {{ConvVariant::Separate, 0}};
  for (size_t i = 0; i < fusedAlgos_.size(); ++i)
    candidates_.push_back({ConvVariant::CudnnFused, i});
  for (size_t i = 0; i < gemmAlgos_.size(); ++i)
    candidates_.push_back({ConvVariant::GemmFused, i});
  if (wide_.x) {
    PARTC_RETURN_IF_ERROR(widenWeights(ctx, in[1].data));
    candidates_.push_back({ConvVariant::WidenedSeparate, 0});
    for (size_t i = 0; i < wide_.fused.size(); ++i)
      candidates_.push_back({ConvVariant::WidenedFused, i});
  }
  for (size_t i = 0; graph_ && i < graph_->size(); ++i)
    candidates_.push_back({ConvVariant::Graph, i});
  for (int form = 0; depthwise_ && form < depthwiseForms(*depthwise_); ++form)
    candidates_.push_back({ConvVariant::Depthwise, size_t(form)});
  // Form 1 only where asked for (CudaOptions::fewChannelRows).
  for (int form = 0;
       fewChannels_ && form < fewChannelConvForms(*fewChannels_) &&
       (form == 0 || ctx.options.fewChannelRows);
       ++form)
    candidates_.push_back({ConvVariant::FewChannels, size_t(form)});
  if (candidates_.size() == 1)
    return Status();
  // Activations come from scratch filled with a fixed pattern; the weights
  // and bias are the real ones.
  void *x = nullptr, *reference = nullptr, *y = nullptr, *z = nullptr;
  size_t outBytes = out[0].type.byteSize();
  PARTC_RETURN_IF_ERROR(scratch.buffer(0, in[0].type.byteSize(), x));
  PARTC_RETURN_IF_ERROR(scratch.buffer(1, outBytes, reference));
  PARTC_RETURN_IF_ERROR(scratch.buffer(2, outBytes, y));
  PARTC_RETURN_IF_ERROR(cudaStatus(
      launchFillPattern(x, in[0].type.numElements(), 1, ctx.stream, element_),
      "tuning"));
  if (hasAddend_) {
    PARTC_RETURN_IF_ERROR(scratch.buffer(3, outBytes, z));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        launchFillPattern(z, n_, 2, ctx.stream, element_), "tuning"));
  }
  ConvOperands ops = operands(in, reference);
  ops.x = x;
  ops.z = z;
  size_t best = 0;
  PARTC_RETURN_IF_ERROR(pickFastest(
      ctx, scratch, candidates_.size(),
      [&](size_t index, void *result) {
        ops.y = result;
        return runVariant(candidates_[index].first, candidates_[index].second,
                          ctx, ops);
      },
      reference, y, n_, best, element_));
  adoptCandidate(best);
  return Status();
}

bool ConvKernel::adoptCandidate(size_t c) {
  if (c >= candidates_.size())
    return false;
  chosen_ = candidates_[c].first;
  choice_ = candidates_[c].second;
  if (chosen_ == ConvVariant::Graph)
    graphVariant_ =
        std::string(graph_->fusesEpilogue(choice_) ? "cudnn-graph-fused"
                                                   : "cudnn-graph+epilogue") +
        " (" + graph_->label(choice_) + ")";
  return true;
}

} // namespace

Status createConvKernel(const KernelArgs &a, DeviceContext &ctx,
                        std::unique_ptr<GpuKernel> &result) {
  auto conv = std::make_unique<ConvKernel>();
  PARTC_RETURN_IF_ERROR(conv->init(a, ctx));
  result = std::move(conv);
  return Status();
}

} // namespace partc::runtime::cuda
