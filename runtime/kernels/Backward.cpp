//===- Backward.cpp - Gradients of convolution, pooling, batch norm -------===//
//
// The CPU reference of the backward ops partc-differentiate adds for the
// window ops and of batch normalization in training mode. Channels first,
// float32; sums of many terms accumulate in double where a float sum would
// drift from the GPU's.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/Im2Col.h"
#include "runtime/kernels/KernelRegistry.h"
#include "runtime/kernels/Philox.h"
#include "runtime/kernels/WindowTaps.h"

#include <cblas.h>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace partc::runtime {

namespace {

Status requireFloat32(const KernelArgs &a) {
  for (const std::vector<TensorType> *list : {&a.inputs, &a.outputs})
    for (const TensorType &t : *list)
      if (t.dtype != DType::F32)
        return Status::error("operand " + t.str() +
                             " is not float32, the only type of the "
                             "backward window and normalization kernels");
  return Status();
}

bool isPointwise(const Window &w) {
  bool pointwise = w.kernelSize() == 1;
  for (int i = 0; i < 3; ++i)
    pointwise =
        pointwise && w.stride[i] == 1 && w.padBegin[i] == 0 && w.padEnd[i] == 0;
  return pointwise;
}

//===----------------------------------------------------------------------===//
// Convolution: the forward GEMM W [mg, kdim] x col [kdim, out] transposed
// either way, per image and group.
//===----------------------------------------------------------------------===//

struct ConvDims {
  Window w;
  int64_t n, c, m, group;
  int64_t cg() const { return c / group; }
  int64_t mg() const { return m / group; }
  int64_t kdim() const { return cg() * w.kernelSize(); }
};

class ConvGradInputKernel : public Kernel {
public:
  explicit ConvGradInputKernel(ConvDims d)
      : d_(d), pointwise_(isPointwise(d.w)) {
    if (!pointwise_)
      col_.resize(static_cast<size_t>(d.kdim() * d.w.outSize()));
  }

  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *dy = in[0].as<float>(), *wt = in[1].as<float>();
    float *dx = out[0].as<float>();
    const Window &w = d_.w;
    int64_t osz = w.outSize(), isz = w.inSize(), kdim = d_.kdim();
    std::memset(dx, 0, out[0].type.byteSize());
    for (int64_t b = 0; b < d_.n; ++b)
      for (int64_t g = 0; g < d_.group; ++g) {
        const float *dyg = dy + (b * d_.m + g * d_.mg()) * osz;
        float *dxg = dx + (b * d_.c + g * d_.cg()) * isz;
        // col = W_g^T dy_g; a pointwise convolution's col is the input.
        float *col = pointwise_ ? dxg : col_.data();
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kdim, osz, d_.mg(),
                    1.0f, wt + g * d_.mg() * kdim, kdim, dyg, osz, 0.0f, col,
                    osz);
        if (!pointwise_)
          col2imAdd(w, col, d_.cg(), dxg);
      }
    return Status();
  }

private:
  ConvDims d_;
  bool pointwise_;
  std::vector<float> col_;
};

class ConvGradWeightKernel : public Kernel {
public:
  explicit ConvGradWeightKernel(ConvDims d)
      : d_(d), pointwise_(isPointwise(d.w)) {
    if (!pointwise_)
      col_.resize(static_cast<size_t>(d.kdim() * d.w.outSize()));
  }

  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *x = in[0].as<float>(), *dy = in[1].as<float>();
    float *dw = out[0].as<float>();
    const Window &w = d_.w;
    int64_t osz = w.outSize(), isz = w.inSize(), kdim = d_.kdim();
    std::memset(dw, 0, out[0].type.byteSize());
    for (int64_t b = 0; b < d_.n; ++b)
      for (int64_t g = 0; g < d_.group; ++g) {
        const float *xg = x + (b * d_.c + g * d_.cg()) * isz;
        const float *col = xg;
        if (!pointwise_) {
          im2col(w, xg, d_.cg(), col_.data());
          col = col_.data();
        }
        // dW_g += dy_g col^T.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d_.mg(), kdim, osz,
                    1.0f, dy + (b * d_.m + g * d_.mg()) * osz, osz, col, osz,
                    1.0f, dw + g * d_.mg() * kdim, kdim);
      }
    return Status();
  }

private:
  ConvDims d_;
  bool pointwise_;
  std::vector<float> col_;
};

/// Checks a convolution gradient's shapes: x [N, C, in...], w [M, C/group,
/// k...], dy [N, M, out...].
Status makeConvDims(const KernelArgs &a, const Shape &x, const Shape &w,
                    const Shape &dy, ConvDims &d) {
  PARTC_RETURN_IF_ERROR(requireFloat32(a));
  if (x.size() < 3 || w.size() != x.size() || dy.size() != x.size())
    return Status::error("input " + shapeToString(x) + ", weight " +
                         shapeToString(w) + " and gradient " +
                         shapeToString(dy) + " ranks do not match");
  int64_t group = a.attrs.getInt("group", 1);
  if (group < 1 || x[1] % group || w[0] % group || x[1] / group != w[1] ||
      dy[0] != x[0] || dy[1] != w[0])
    return Status::error("input " + shapeToString(x) + ", weight " +
                         shapeToString(w) + " and gradient " +
                         shapeToString(dy) + " do not fit group " +
                         std::to_string(group));
  PARTC_RETURN_IF_ERROR(
      makeWindow(a.attrs, x, dy, Shape(w.begin() + 2, w.end()), d.w));
  d.n = x[0];
  d.c = x[1];
  d.m = w[0];
  d.group = group;
  double scratch = static_cast<double>(d.kdim()) *
                   static_cast<double>(d.w.outSize()) * sizeof(float);
  if (scratch > static_cast<double>(hostMemoryBytes()))
    return Status::error("needs " + std::to_string(scratch) +
                         " bytes of im2col scratch, more than this "
                         "machine's " +
                         std::to_string(hostMemoryBytes()));
  return Status();
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// Calls `visit(output, input)` for every input position of every window
/// of one plane, skipping the taps in the padding (WindowTaps.h says why).
template <typename Visit> void forEachWindow(const Window &w, Visit &&visit) {
  for (int64_t od = 0; od < w.out[0]; ++od)
    for (int64_t oh = 0; oh < w.out[1]; ++oh)
      for (int64_t ow = 0; ow < w.out[2]; ++ow) {
        int64_t o = (od * w.out[1] + oh) * w.out[2] + ow;
        int64_t start[3] = {od * w.stride[0] - w.padBegin[0],
                            oh * w.stride[1] - w.padBegin[1],
                            ow * w.stride[2] - w.padBegin[2]};
        TapRange<int64_t> taps[3];
        for (int d = 0; d < 3; ++d)
          taps[d] = inputTaps(start[d], w.kernel[d], w.dilation[d], w.in[d]);
        for (int64_t kd = taps[0].first; kd < taps[0].last; ++kd) {
          int64_t id = start[0] + kd * w.dilation[0];
          for (int64_t kh = taps[1].first; kh < taps[1].last; ++kh) {
            int64_t ih = start[1] + kh * w.dilation[1];
            for (int64_t kw = taps[2].first; kw < taps[2].last; ++kw)
              visit(o, (id * w.in[1] + ih) * w.in[2] + start[2] +
                           kw * w.dilation[2]);
          }
        }
      }
}

/// The divisor of each window of the forward average: its input taps, or
/// with count_include_pad its taps in the padded extent (in double, as
/// three dimensions of those may exceed 2^63).
std::vector<double> averageDivisors(const Window &w, bool countIncludePad) {
  std::vector<double> divisors;
  divisors.reserve(static_cast<size_t>(w.outSize()));
  for (int64_t od = 0; od < w.out[0]; ++od)
    for (int64_t oh = 0; oh < w.out[1]; ++oh)
      for (int64_t ow = 0; ow < w.out[2]; ++ow) {
        int64_t out[3] = {od, oh, ow};
        double divisor = 1;
        for (int d = 0; d < 3; ++d) {
          int64_t start = out[d] * w.stride[d] - w.padBegin[d];
          TapRange<int64_t> taps =
              inputTaps(start, w.kernel[d], w.dilation[d], w.in[d]);
          divisor *= static_cast<double>(
              countIncludePad ? paddedTaps(start, w.kernel[d], w.dilation[d],
                                           w.in[d], w.padEnd[d])
                              : taps.last - taps.first);
        }
        divisors.push_back(divisor);
      }
  return divisors;
}

class MaxPoolGradKernel : public Kernel {
public:
  MaxPoolGradKernel(Window w, int64_t planes) : w_(w), planes_(planes) {
    best_.resize(static_cast<size_t>(w.outSize()));
    where_.resize(static_cast<size_t>(w.outSize()));
  }

  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *dy = in[0].as<float>(), *x = in[1].as<float>();
    float *dx = out[0].as<float>();
    std::memset(dx, 0, out[0].type.byteSize());
    for (int64_t p = 0; p < planes_; ++p) {
      const float *xp = x + p * w_.inSize();
      std::fill(best_.begin(), best_.end(),
                -std::numeric_limits<float>::infinity());
      std::fill(where_.begin(), where_.end(), int64_t(-1));
      // The first position holding the maximum, as PyTorch picks it.
      forEachWindow(w_, [&](int64_t o, int64_t at) {
        if (where_[o] < 0 || xp[at] > best_[o]) {
          best_[o] = xp[at];
          where_[o] = at;
        }
      });
      for (int64_t o = 0; o < w_.outSize(); ++o)
        if (where_[o] >= 0)
          dx[p * w_.inSize() + where_[o]] += dy[p * w_.outSize() + o];
    }
    return Status();
  }

private:
  Window w_;
  int64_t planes_;
  std::vector<float> best_;
  std::vector<int64_t> where_;
};

class AvgPoolGradKernel : public Kernel {
public:
  AvgPoolGradKernel(Window w, int64_t planes, bool countIncludePad)
      : w_(w), planes_(planes), divisors_(averageDivisors(w, countIncludePad)) {
  }

  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *dy = in[0].as<float>();
    float *dx = out[0].as<float>();
    std::memset(dx, 0, out[0].type.byteSize());
    for (int64_t p = 0; p < planes_; ++p) {
      const float *dyp = dy + p * w_.outSize();
      float *dxp = dx + p * w_.inSize();
      forEachWindow(w_, [&](int64_t o, int64_t at) {
        dxp[at] += dyp[o] / static_cast<float>(divisors_[o]);
      });
    }
    return Status();
  }

private:
  Window w_;
  int64_t planes_;
  std::vector<double> divisors_;
};

Status makePoolGradWindow(const KernelArgs &a, const Shape &x, const Shape &dy,
                          Window &w) {
  PARTC_RETURN_IF_ERROR(requireFloat32(a));
  if (x.size() < 3 || dy.size() != x.size() || x[0] != dy[0] || x[1] != dy[1])
    return Status::error("input " + shapeToString(x) + " and gradient " +
                         shapeToString(dy) + " must share batch and channels");
  return makeWindow(a.attrs, x, dy, a.attrs.getInts("kernel_shape"), w);
}

//===----------------------------------------------------------------------===//
// Batch normalization in training mode
//===----------------------------------------------------------------------===//

struct ChannelLayout {
  int64_t n, c, size; // [n, c, size]
  int64_t count() const { return n * size; }
};

/// A channel's scale * 1 / sqrt(variance + eps), from the float variance
/// the forward op stores, so that a gradient with a fused ReLU computes
/// the forward's values again bit for bit.
double normScale(float scale, float variance, double eps) {
  return scale / std::sqrt(static_cast<double>(variance) + eps);
}

/// The normalized value of `x` before any epilogue (see normScale).
float normalized(float x, float mean, double scale, float bias) {
  return static_cast<float>((x - static_cast<double>(mean)) * scale + bias);
}

class BatchNormTrainKernel : public Kernel {
public:
  /// `relu`, and an addend as input 3: the fused epilogue, applied to the
  /// normalized float as the unfused add and ReLU would.
  BatchNormTrainKernel(ChannelLayout l, double eps, bool relu)
      : l_(l), eps_(eps), relu_(relu) {}

  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *x = in[0].as<float>(), *scale = in[1].as<float>(),
                *bias = in[2].as<float>();
    const float *addend = in.size() > 3 ? in[3].as<float>() : nullptr;
    float *y = out[0].as<float>(), *mean = out[1].as<float>(),
          *var = out[2].as<float>();
    for (int64_t ch = 0; ch < l_.c; ++ch) {
      double sum = 0, squares = 0;
      forChannel(ch, [&](int64_t i) { sum += x[i]; });
      double m = sum / static_cast<double>(l_.count());
      forChannel(ch, [&](int64_t i) {
        double d = x[i] - m;
        squares += d * d;
      });
      mean[ch] = static_cast<float>(m);
      var[ch] = static_cast<float>(squares / static_cast<double>(l_.count()));
      double a = normScale(scale[ch], var[ch], eps_);
      forChannel(ch, [&](int64_t i) {
        float v = normalized(x[i], mean[ch], a, bias[ch]);
        if (addend)
          v += addend[i];
        y[i] = relu_ && v < 0.0f ? 0.0f : v; // ReLU(NaN) is NaN
      });
    }
    return Status();
  }

private:
  template <typename Fn> void forChannel(int64_t ch, Fn &&fn) {
    for (int64_t b = 0; b < l_.n; ++b)
      for (int64_t i = 0, base = (b * l_.c + ch) * l_.size; i < l_.size; ++i)
        fn(base + i);
  }

  ChannelLayout l_;
  double eps_;
  bool relu_;
};

class BatchNormGradKernel : public Kernel {
public:
  /// With `relu`, input 5 is the norm's bias and dy is masked where the
  /// norm's output, computed again as the forward kernel did, is not
  /// positive (ReLU's gradient, fused).
  BatchNormGradKernel(ChannelLayout l, double eps, bool relu)
      : l_(l), eps_(eps), relu_(relu) {}

  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *dyIn = in[0].as<float>(), *x = in[1].as<float>(),
                *scale = in[2].as<float>(), *mean = in[3].as<float>(),
                *var = in[4].as<float>();
    const float *bias = relu_ ? in[5].as<float>() : nullptr;
    float *dx = out[0].as<float>(), *dscale = out[1].as<float>(),
          *dbias = out[2].as<float>();
    double count = static_cast<double>(l_.count());
    for (int64_t ch = 0; ch < l_.c; ++ch) {
      double invStd = 1.0 / std::sqrt(static_cast<double>(var[ch]) + eps_);
      double forward = relu_ ? normScale(scale[ch], var[ch], eps_) : 0;
      auto dy = [&](int64_t i) -> float {
        if (relu_ && !(normalized(x[i], mean[ch], forward, bias[ch]) > 0.0f))
          return 0.0f;
        return dyIn[i];
      };
      double sumDy = 0, sumDyXhat = 0;
      forChannel(ch, [&](int64_t i) {
        float g = dy(i);
        sumDy += g;
        sumDyXhat += g * (x[i] - mean[ch]) * invStd;
      });
      // dx = scale * invStd * (dy - mean(dy) - xhat * mean(dy * xhat)).
      double k = scale[ch] * invStd;
      forChannel(ch, [&](int64_t i) {
        double xhat = (x[i] - mean[ch]) * invStd;
        dx[i] = static_cast<float>(
            k * (dy(i) - sumDy / count - xhat * sumDyXhat / count));
      });
      dscale[ch] = static_cast<float>(sumDyXhat);
      dbias[ch] = static_cast<float>(sumDy);
    }
    return Status();
  }

private:
  template <typename Fn> void forChannel(int64_t ch, Fn &&fn) {
    for (int64_t b = 0; b < l_.n; ++b)
      for (int64_t i = 0, base = (b * l_.c + ch) * l_.size; i < l_.size; ++i)
        fn(base + i);
  }

  ChannelLayout l_;
  double eps_;
  bool relu_;
};

class UpdateRunningStatsKernel : public Kernel {
public:
  UpdateRunningStatsKernel(int64_t channels, double momentum, int64_t count)
      : channels_(channels), momentum_(momentum), count_(count) {}

  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *mean = in[2].as<float>(), *var = in[3].as<float>();
    float *runningMean = out[0].as<float>(), *runningVar = out[1].as<float>();
    double unbias = static_cast<double>(count_) / (count_ - 1);
    for (int64_t ch = 0; ch < channels_; ++ch) {
      runningMean[ch] = static_cast<float>((1 - momentum_) * runningMean[ch] +
                                           momentum_ * mean[ch]);
      runningVar[ch] = static_cast<float>((1 - momentum_) * runningVar[ch] +
                                          momentum_ * var[ch] * unbias);
    }
    return Status();
  }

private:
  int64_t channels_;
  double momentum_;
  int64_t count_;
};

/// Where softmax_grad reads its gradient through a dropout: the dropout's
/// draw (runtime/kernels/Philox.h) for the softmax's elements.
struct FoldedDropout {
  bool present = false;
  double ratio = 0;
  int64_t stream = 0, offset = 0;
};

/// softmax_grad (dy, y[, step, seed]) -> y * (dy - sum(dy * y)) along an
/// axis of `count` elements, `inner` apart, for `outer` such rows; the sum
/// in double. With a folded dropout, dy is first masked and scaled as
/// graph.dropout would have.
class SoftmaxGradKernel : public Kernel {
public:
  SoftmaxGradKernel(int64_t outer, int64_t count, int64_t inner,
                    FoldedDropout dropout)
      : outer_(outer), count_(count), inner_(inner), dropout_(dropout) {}

  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    int64_t step = 0, seed = 0;
    if (dropout_.present) {
      step = in[2].as<int64_t>()[0];
      seed = in[3].as<int64_t>()[0];
    }
    bool ok = dispatchType(in[1].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>)
        compute(in[0].as<T>(), in[1].as<T>(), out[0].as<T>(), step, seed);
    });
    return ok ? Status() : Status::error("softmax_grad: unsupported type");
  }

private:
  template <class T>
  void compute(const T *dy, const T *y, T *dx, int64_t step,
               int64_t seed) const {
    int64_t n = outer_ * count_ * inner_;
    std::vector<T> masked;
    if (dropout_.present) {
      // The dropped gradient, element for element as the dropout kernel
      // writes it.
      masked.resize(n);
      uint32_t threshold = philox::dropoutThreshold(dropout_.ratio);
      T scale = static_cast<T>(1.0 / (1.0 - dropout_.ratio));
      for (int64_t i = 0; i < n; ++i) {
        int64_t k = dropout_.offset + i;
        philox::Words r =
            philox::dropoutWords(uint64_t(k / 4), dropout_.stream, step, seed);
        masked[i] =
            philox::dropoutKeeps(r.w[k % 4], threshold) ? dy[i] * scale : T(0);
      }
      dy = masked.data();
    }
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t i = 0; i < inner_; ++i) {
        int64_t base = o * count_ * inner_ + i;
        double dot = 0;
        for (int64_t k = 0; k < count_; ++k)
          dot += static_cast<double>(dy[base + k * inner_]) *
                 static_cast<double>(y[base + k * inner_]);
        for (int64_t k = 0; k < count_; ++k) {
          int64_t e = base + k * inner_;
          dx[e] = static_cast<T>(static_cast<double>(y[e]) *
                                 (static_cast<double>(dy[e]) - dot));
        }
      }
  }

  int64_t outer_, count_, inner_;
  FoldedDropout dropout_;
};

/// layer_norm_grad (dy, x, scale) -> (dx, dscale, dbias) over rows of
/// `cols` elements, in double: the statistics as the layer_norm kernel
/// computes them, then the three gradients.
class LayerNormGradKernel : public Kernel {
public:
  LayerNormGradKernel(int64_t rows, int64_t cols, double eps)
      : rows_(rows), cols_(cols), eps_(eps) {}

  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    bool ok = dispatchType(in[1].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>)
        compute(in[0].as<T>(), in[1].as<T>(), in[2].as<T>(),
                in.size() > 3 ? in[3].as<T>() : nullptr, out[0].as<T>(),
                out[1].as<T>(), out[2].as<T>());
    });
    if (!ok)
      return Status::error("unsupported type " + in[1].type.str());
    return Status();
  }

private:
  template <typename T>
  void compute(const T *dy, const T *x, const T *scale, const T *addend, T *dx,
               T *dscale, T *dbias) const {
    std::vector<double> sumScale(cols_, 0.0), sumBias(cols_, 0.0),
        normalized(cols_);
    double n = static_cast<double>(cols_);
    for (int64_t r = 0; r < rows_; ++r) {
      const T *xr = x + r * cols_, *dyr = dy + r * cols_;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < cols_; ++i)
        mean += xr[i];
      mean /= n;
      for (int64_t i = 0; i < cols_; ++i)
        var += (xr[i] - mean) * (xr[i] - mean);
      double inv = 1.0 / std::sqrt(var / n + eps_);
      double meanG = 0, meanGx = 0;
      for (int64_t i = 0; i < cols_; ++i) {
        normalized[i] = (xr[i] - mean) * inv;
        double g = double(dyr[i]) * double(scale[i]);
        meanG += g;
        meanGx += g * normalized[i];
        sumScale[i] += double(dyr[i]) * normalized[i];
        sumBias[i] += dyr[i];
      }
      meanG /= n;
      meanGx /= n;
      T *dxr = dx + r * cols_;
      for (int64_t i = 0; i < cols_; ++i) {
        double g = double(dyr[i]) * double(scale[i]);
        dxr[i] = static_cast<T>(inv * (g - meanG - normalized[i] * meanGx));
        // Rounded first, as the add it replaces saw it.
        if (addend)
          dxr[i] += addend[r * cols_ + i];
      }
    }
    for (int64_t i = 0; i < cols_; ++i) {
      dscale[i] = static_cast<T>(sumScale[i]);
      dbias[i] = static_cast<T>(sumBias[i]);
    }
  }

  int64_t rows_, cols_;
  double eps_;
};

/// `x` [N, C, ...] and `perChannel` operands of C floats each.
Status makeChannelLayout(const KernelArgs &a, const TensorType &x,
                         ChannelLayout &l) {
  PARTC_RETURN_IF_ERROR(requireFloat32(a));
  if (x.shape.size() < 2)
    return Status::error("input " + x.str() + " has no channel dimension");
  l.n = x.shape[0];
  l.c = x.shape[1];
  l.size = numElements(Shape(x.shape.begin() + 2, x.shape.end()));
  if (l.count() < 1)
    return Status::error("input " + x.str() + " is empty");
  return Status();
}

Status requirePerChannel(const TensorType &t, int64_t channels) {
  if (t.shape != Shape{channels})
    return Status::error("per-channel operand " + t.str() + " must have " +
                         std::to_string(channels) + " elements");
  return Status();
}

} // namespace

void registerBackwardKernels(KernelTable &t) {
  // conv_grad_input (dy, w) -> dx; conv_grad_weight (x, dy) -> dw.
  auto convGradient = [](bool weight) -> KernelFactory {
    return [weight](const KernelArgs &a, std::unique_ptr<Kernel> &k) {
      PARTC_RETURN_IF_ERROR(checkArity(a, 2, 2, 1));
      const Shape &x = weight ? a.inputs[0].shape : a.outputs[0].shape;
      const Shape &w = weight ? a.outputs[0].shape : a.inputs[1].shape;
      const Shape &dy = weight ? a.inputs[1].shape : a.inputs[0].shape;
      ConvDims d;
      PARTC_RETURN_IF_ERROR(makeConvDims(a, x, w, dy, d));
      if (weight)
        k = std::make_unique<ConvGradWeightKernel>(d);
      else
        k = std::make_unique<ConvGradInputKernel>(d);
      return Status();
    };
  };
  addWithChannelsLast(t, "conv_grad_input", {true, true}, convGradient(false));
  addWithChannelsLast(t, "conv_grad_weight", {true, true}, convGradient(true));
  addWithChannelsLast(
      t, "max_pool_grad", {true, true},
      [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
        PARTC_RETURN_IF_ERROR(checkArity(a, 2, 2, 1));
        if (a.outputs[0] != a.inputs[1])
          return Status::error("the gradient " + a.outputs[0].str() +
                               " must have the input's type " +
                               a.inputs[1].str());
        Window w;
        PARTC_RETURN_IF_ERROR(
            makePoolGradWindow(a, a.inputs[1].shape, a.inputs[0].shape, w));
        k = std::make_unique<MaxPoolGradKernel>(w, a.inputs[1].shape[0] *
                                                       a.inputs[1].shape[1]);
        return Status();
      });
  addWithChannelsLast(
      t, "avg_pool_grad", {true},
      [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
        PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
        Window w;
        PARTC_RETURN_IF_ERROR(
            makePoolGradWindow(a, a.outputs[0].shape, a.inputs[0].shape, w));
        k = std::make_unique<AvgPoolGradKernel>(
            w, a.outputs[0].shape[0] * a.outputs[0].shape[1],
            a.attrs.getInt("count_include_pad", 0) != 0);
        return Status();
      });
  addWithChannelsLast(
      t, "batch_norm_train", {true, false, false, true},
      [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
        PARTC_RETURN_IF_ERROR(checkArity(a, 3, 4, 3));
        ChannelLayout l;
        PARTC_RETURN_IF_ERROR(makeChannelLayout(a, a.inputs[0], l));
        if (a.outputs[0] != a.inputs[0] ||
            (a.inputs.size() == 4 && a.inputs[3] != a.inputs[0]))
          return Status::error("result " + a.outputs[0].str() +
                               " and addend must have the input's type");
        for (const TensorType *p :
             {&a.inputs[1], &a.inputs[2], &a.outputs[1], &a.outputs[2]})
          PARTC_RETURN_IF_ERROR(requirePerChannel(*p, l.c));
        bool relu;
        PARTC_RETURN_IF_ERROR(fusedRelu(a.attrs, relu));
        k = std::make_unique<BatchNormTrainKernel>(
            l, a.attrs.getFloat("epsilon"), relu);
        return Status();
      });
  addWithChannelsLast(
      t, "batch_norm_grad", {true, true},
      [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
        PARTC_RETURN_IF_ERROR(checkArity(a, 5, 6, 3));
        bool relu;
        PARTC_RETURN_IF_ERROR(fusedRelu(a.attrs, relu));
        if (relu != (a.inputs.size() == 6))
          return Status::error("a fused ReLU needs the norm's bias as input "
                               "5, and the bias is read only for it");
        ChannelLayout l;
        PARTC_RETURN_IF_ERROR(makeChannelLayout(a, a.inputs[1], l));
        if (a.inputs[0] != a.inputs[1] || a.outputs[0] != a.inputs[1])
          return Status::error(
              "gradients " + a.inputs[0].str() + " and " + a.outputs[0].str() +
              " must have the input's type " + a.inputs[1].str());
        for (size_t i = 2; i < a.inputs.size(); ++i)
          PARTC_RETURN_IF_ERROR(requirePerChannel(a.inputs[i], l.c));
        for (const TensorType *p : {&a.outputs[1], &a.outputs[2]})
          PARTC_RETURN_IF_ERROR(requirePerChannel(*p, l.c));
        k = std::make_unique<BatchNormGradKernel>(
            l, a.attrs.getFloat("epsilon"), relu);
        return Status();
      });
  t["softmax_grad"] = [](const KernelArgs &a,
                         std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 2, 4, 1));
    FoldedDropout dropout;
    if (a.inputs.size() != 2) {
      if (a.inputs.size() != 4)
        return Status::error("takes 2 operands, or 4 with a dropout's step "
                             "and seed");
      for (size_t i : {2, 3})
        if (a.inputs[i] != TensorType{DType::I64, {}})
          return Status::error(std::string(i == 2 ? "step " : "seed ") +
                               a.inputs[i].str() + " must be an int64 scalar");
      dropout.present = true;
      PARTC_RETURN_IF_ERROR(
          a.attrs.requireFloat("dropout_ratio", dropout.ratio));
      PARTC_RETURN_IF_ERROR(
          a.attrs.requireInt("dropout_stream", dropout.stream));
      PARTC_RETURN_IF_ERROR(
          a.attrs.requireInt("dropout_offset", dropout.offset));
      if (!(dropout.ratio >= 0 && dropout.ratio < 1))
        return Status::error("dropout_ratio " + std::to_string(dropout.ratio) +
                             " must be in [0, 1)");
      if (dropout.offset < 0 ||
          a.inputs[1].numElements() > (int64_t(1) << 34) - dropout.offset)
        return Status::error("dropout_offset " +
                             std::to_string(dropout.offset) + " and " +
                             std::to_string(a.inputs[1].numElements()) +
                             " elements reach past the generator's 2^34");
    }
    const TensorType &y = a.inputs[1];
    if (!isFloatType(y.dtype) || a.inputs[0] != y || a.outputs[0] != y)
      return Status::error(
          "gradients " + a.inputs[0].str() + " and " + a.outputs[0].str() +
          " must have the softmax output's type " + y.str() + " (floats)");
    int64_t axis = a.attrs.getInt("axis");
    int64_t rank = static_cast<int64_t>(y.shape.size());
    if (axis < 0 || axis >= rank)
      return Status::error("axis " + std::to_string(axis) +
                           " out of range for rank " + std::to_string(rank));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= y.shape[d];
    for (int64_t d = axis + 1; d < rank; ++d)
      inner *= y.shape[d];
    k = std::make_unique<SoftmaxGradKernel>(outer, y.shape[axis], inner,
                                            dropout);
    return Status();
  };
  t["layer_norm_grad"] = [](const KernelArgs &a,
                            std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 3, 4, 3));
    const TensorType &x = a.inputs[1];
    if (!isFloatType(x.dtype) || a.inputs[0] != x || a.outputs[0] != x ||
        (a.inputs.size() > 3 && a.inputs[3] != x))
      return Status::error("gradients " + a.inputs[0].str() + " and " +
                           a.outputs[0].str() +
                           " (and an addend) must have "
                           "the input's type " +
                           x.str() + " (floats)");
    int64_t axis = a.attrs.getInt("axis");
    if (axis < 0 || axis > static_cast<int64_t>(x.shape.size()))
      return Status::error("axis " + std::to_string(axis) + " out of range");
    Shape norm(x.shape.begin() + axis, x.shape.end());
    for (const TensorType *p : {&a.inputs[2], &a.outputs[1], &a.outputs[2]})
      if (p->shape != norm || p->dtype != x.dtype)
        return Status::error("scale and parameter gradients " + p->str() +
                             " must have the normalized shape " +
                             shapeToString(norm));
    int64_t cols = numElements(norm);
    int64_t rows = cols ? x.numElements() / cols : 0;
    k = std::make_unique<LayerNormGradKernel>(rows, cols,
                                              a.attrs.getFloat("epsilon"));
    return Status();
  };
  t["update_running_stats"] = [](const KernelArgs &a,
                                 std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 4, 4, 2));
    PARTC_RETURN_IF_ERROR(requireFloat32(a));
    int64_t channels = a.inputs[0].numElements();
    for (const TensorType *p : {&a.inputs[1], &a.inputs[2], &a.inputs[3],
                                &a.outputs[0], &a.outputs[1]})
      PARTC_RETURN_IF_ERROR(requirePerChannel(*p, channels));
    double momentum = a.attrs.getFloat("momentum");
    int64_t count = a.attrs.getInt("count");
    if (!(momentum >= 0 && momentum <= 1) || count < 2)
      return Status::error("momentum must be in [0, 1] and count at least 2");
    k = std::make_unique<UpdateRunningStatsKernel>(channels, momentum, count);
    return Status();
  };
}

} // namespace partc::runtime
