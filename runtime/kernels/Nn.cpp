//===- Nn.cpp - Convolution, pooling, normalization, softmax, reductions --===//
#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/ElementwiseOps.h"
#include "runtime/kernels/Im2Col.h"
#include "runtime/kernels/WindowTaps.h"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace partc::runtime {

Status makeWindow(const AttrMap &attrs, const Shape &inShape,
                  const Shape &outShape, const std::vector<int64_t> &kernel,
                  Window &w) {
  size_t spatial = inShape.size() - 2;
  if (spatial < 1 || spatial > 3 || outShape.size() != inShape.size())
    return Status::error("expects 1 to 3 spatial dimensions, got input " +
                         shapeToString(inShape));
  std::vector<int64_t> strides = attrs.getInts("strides");
  std::vector<int64_t> pads = attrs.getInts("pads");
  std::vector<int64_t> dilations = attrs.getInts("dilations");
  if (kernel.size() != spatial ||
      (!strides.empty() && strides.size() != spatial) ||
      (!pads.empty() && pads.size() != 2 * spatial) ||
      (!dilations.empty() && dilations.size() != spatial))
    return Status::error("window attributes do not match " +
                         std::to_string(spatial) + " spatial dimensions");
  size_t off = 3 - spatial;
  for (size_t i = 0; i < spatial; ++i) {
    w.in[off + i] = inShape[2 + i];
    w.out[off + i] = outShape[2 + i];
    w.kernel[off + i] = kernel[i];
    w.stride[off + i] = strides.empty() ? 1 : strides[i];
    w.padBegin[off + i] = pads.empty() ? 0 : pads[i];
    w.padEnd[off + i] = pads.empty() ? 0 : pads[spatial + i];
    w.dilation[off + i] = dilations.empty() ? 1 : dilations[i];
    if (w.kernel[off + i] < 1 || w.stride[off + i] < 1 ||
        w.dilation[off + i] < 1 || w.padBegin[off + i] < 0 ||
        w.padEnd[off + i] < 0)
      return Status::error("invalid window attributes");
    // The result's extent must follow from the window (one more where
    // pooling rounds up): then no offset a kernel computes from it
    // overflows, whatever a corrupt plan says. In 128 bits, as the
    // attributes may be anything.
    __int128 padded = static_cast<__int128>(w.in[off + i]) +
                      w.padBegin[off + i] + w.padEnd[off + i];
    __int128 span =
        static_cast<__int128>(w.dilation[off + i]) * (w.kernel[off + i] - 1) +
        1;
    // Kernels compute positions in 64 bits: far from overflowing below 2^60.
    constexpr __int128 kLargest = __int128(1) << 60;
    if (padded > kLargest || span > kLargest || w.stride[off + i] > kLargest) {
      auto text = [](__int128 v) {
        return std::to_string(static_cast<long long>(
            std::min<__int128>(v, std::numeric_limits<int64_t>::max())));
      };
      return Status::error(
          "window attributes out of range in spatial dimension " +
          std::to_string(i) + ": padded extent " + text(padded) +
          ", dilated kernel " + text(span) + ", stride " +
          std::to_string(w.stride[off + i]) + " (each at most 2^60)");
    }
    __int128 extent =
        padded < span ? 0 : (padded - span) / w.stride[off + i] + 1;
    if (w.out[off + i] != extent && w.out[off + i] != extent + 1)
      return Status::error(
          "window attributes give spatial extent " +
          std::to_string(static_cast<long long>(std::min<__int128>(
              extent, std::numeric_limits<int64_t>::max()))) +
          " from input " + shapeToString(inShape) + ", but the result is " +
          shapeToString(outShape));
  }
  return Status();
}

namespace {

//===----------------------------------------------------------------------===//
// Convolution: im2col + GEMM per group and image.
//===----------------------------------------------------------------------===//

class ConvKernel : public Kernel {
public:
  ConvKernel(Window w, int64_t n, int64_t c, int64_t m, int64_t group,
             bool hasBias, bool hasAddend, FusedActivation activation)
      : w_(w), n_(n), c_(c), m_(m), group_(group), hasBias_(hasBias),
        hasAddend_(hasAddend), activation_(activation) {
    bool pointwise = w.kernelSize() == 1;
    for (int i = 0; i < 3; ++i)
      pointwise = pointwise && w.stride[i] == 1 && w.padBegin[i] == 0 &&
                  w.padEnd[i] == 0;
    pointwise_ = pointwise;
  }

  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    // Scratch on first use: kernels are also created only to validate plans
    // (Inception v3's 64 MB a convolution made compiling it slow).
    if (!pointwise_)
      col_.resize(
          static_cast<size_t>((c_ / group_) * w_.kernelSize() * w_.outSize()));
    const float *x = in[0].as<float>();
    const float *wt = in[1].as<float>();
    float *y = out[0].as<float>();
    int64_t cg = c_ / group_, mg = m_ / group_;
    int64_t kdim = cg * w_.kernelSize(), osz = w_.outSize(), isz = w_.inSize();
    for (int64_t b = 0; b < n_; ++b) {
      for (int64_t g = 0; g < group_; ++g) {
        const float *xg = x + (b * c_ + g * cg) * isz;
        const float *col = xg;
        if (!pointwise_) {
          im2col(xg, cg);
          col = col_.data();
        }
        // In double, rounded once: the CPU backend is the reference, and
        // float sums over deep networks drifted twice as far from the
        // float64 result as PyTorch's (ResNeXt-101 32x8d).
        wide_.assign(wt + g * mg * kdim, wt + (g + 1) * mg * kdim);
        colWide_.assign(col, col + kdim * osz);
        outWide_.resize(static_cast<size_t>(mg * osz));
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mg, osz, kdim,
                    1.0, wide_.data(), kdim, colWide_.data(), osz, 0.0,
                    outWide_.data(), osz);
        std::copy(outWide_.begin(), outWide_.end(),
                  y + (b * m_ + g * mg) * osz);
      }
      if (hasBias_) {
        const float *bias = in[2].as<float>();
        for (int64_t o = 0; o < m_; ++o) {
          float *yo = y + (b * m_ + o) * osz;
          for (int64_t i = 0; i < osz; ++i)
            yo[i] += bias[o];
        }
      }
      if (hasAddend_) {
        const float *z = in[3].as<float>() + b * m_ * osz;
        float *yb = y + b * m_ * osz;
        for (int64_t i = 0; i < m_ * osz; ++i)
          yb[i] += z[i];
      }
      float *yb = y + b * m_ * osz;
      if (activation_ == FusedActivation::Relu)
        for (int64_t i = 0; i < m_ * osz; ++i)
          yb[i] = ew::Relu::apply(yb[i], 0.f, 0.f);
      if (activation_ == FusedActivation::Silu)
        for (int64_t i = 0; i < m_ * osz; ++i)
          yb[i] *= ew::Sigmoid::apply(yb[i], 0.f, 0.f);
    }
    return Status();
  }

private:
  void im2col(const float *x, int64_t channels) {
    runtime::im2col(w_, x, channels, col_.data());
  }

  Window w_;
  int64_t n_, c_, m_, group_;
  bool hasBias_, hasAddend_;
  FusedActivation activation_;
  bool pointwise_;
  std::vector<float> col_;
  std::vector<double> wide_, colWide_, outWide_;
};

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

class PoolKernel : public Kernel {
public:
  PoolKernel(Window w, int64_t planes, bool isMax, bool countIncludePad,
             bool withIndices = false, bool columnMajor = false)
      : w_(w), planes_(planes), isMax_(isMax),
        countIncludePad_(countIncludePad), withIndices_(withIndices),
        columnMajor_(columnMajor) {}

  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    bool ok = dispatchType(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>)
        compute(in[0].as<T>(), out[0].as<T>(),
                withIndices_ ? out[1].as<int64_t>() : nullptr);
    });
    if (!ok)
      return Status::error("unsupported pooling type");
    return Status();
  }

private:
  template <typename T> void compute(const T *x, T *y, int64_t *indices) {
    const Window &w = w_;
    for (int64_t p = 0; p < planes_; ++p) {
      const T *xp = x + p * w.inSize();
      T *yp = y + p * w.outSize();
      for (int64_t od = 0; od < w.out[0]; ++od)
        for (int64_t oh = 0; oh < w.out[1]; ++oh)
          for (int64_t ow = 0; ow < w.out[2]; ++ow) {
            int64_t start[3] = {od * w.stride[0] - w.padBegin[0],
                                oh * w.stride[1] - w.padBegin[1],
                                ow * w.stride[2] - w.padBegin[2]};
            TapRange<int64_t> taps[3];
            // In double: the padded taps of three dimensions may exceed
            // 2^63 (and then divide the sum to nothing).
            int64_t inside = 1;
            double padded = 1;
            for (int d = 0; d < 3; ++d) {
              taps[d] =
                  inputTaps(start[d], w.kernel[d], w.dilation[d], w.in[d]);
              inside *= taps[d].last - taps[d].first;
              // Padding counts for the average only up to the padded
              // extent, as in ONNX's reference.
              padded *= static_cast<double>(paddedTaps(
                  start[d], w.kernel[d], w.dilation[d], w.in[d], w.padEnd[d]));
            }
            double acc =
                isMax_ ? -std::numeric_limits<double>::infinity() : 0.0;
            int64_t where = 0;
            for (int64_t kd = taps[0].first; kd < taps[0].last; ++kd) {
              int64_t id = start[0] + kd * w.dilation[0];
              for (int64_t kh = taps[1].first; kh < taps[1].last; ++kh) {
                int64_t ih = start[1] + kh * w.dilation[1];
                for (int64_t kw = taps[2].first; kw < taps[2].last; ++kw) {
                  int64_t iw = start[2] + kw * w.dilation[2];
                  int64_t at = (id * w.in[1] + ih) * w.in[2] + iw;
                  double v = xp[at];
                  // A NaN in the window wins (and stays), as in numpy.
                  if (isMax_ && ew::maxKeepNan(acc, v) != acc && acc == acc)
                    where = p * w.inSize() +
                            (columnMajor_ ? id + w.in[0] * (ih + w.in[1] * iw)
                                          : at);
                  acc = isMax_ ? ew::maxKeepNan(acc, v) : acc + v;
                }
              }
            }
            if (!isMax_) {
              double div =
                  countIncludePad_ ? padded : static_cast<double>(inside);
              acc = div > 0 ? acc / div : 0.0;
            }
            // A window wholly in the padding has no maximum: the type's
            // lowest value (-inf for floats, which integers cannot hold).
            if (isMax_ && inside == 0 && !std::numeric_limits<T>::has_infinity)
              acc = static_cast<double>(std::numeric_limits<T>::lowest());
            int64_t o = (od * w.out[1] + oh) * w.out[2] + ow;
            yp[o] = saturateCast<T>(acc);
            if (indices)
              indices[p * w.outSize() + o] = where;
          }
    }
  }

  Window w_;
  int64_t planes_;
  // Indices count spatial positions column-major (ONNX storage_order 1).
  bool isMax_, countIncludePad_, withIndices_, columnMajor_;
};

class GlobalPoolKernel : public Kernel {
public:
  GlobalPoolKernel(int64_t planes, int64_t size, bool isMax)
      : planes_(planes), size_(size), isMax_(isMax) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *x = in[0].as<float>();
    float *y = out[0].as<float>();
    for (int64_t p = 0; p < planes_; ++p) {
      const float *xp = x + p * size_;
      if (isMax_) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < size_; ++i)
          m = ew::maxKeepNan(m, xp[i]);
        y[p] = m;
      } else {
        double s = 0;
        for (int64_t i = 0; i < size_; ++i)
          s += xp[i];
        y[p] = static_cast<float>(s / static_cast<double>(size_));
      }
    }
    return Status();
  }

private:
  int64_t planes_, size_;
  bool isMax_;
};

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

class BatchNormKernel : public Kernel {
public:
  BatchNormKernel(int64_t n, int64_t c, int64_t size, double eps)
      : n_(n), c_(c), size_(size), eps_(eps) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *x = in[0].as<float>(), *scale = in[1].as<float>(),
                *bias = in[2].as<float>(), *mean = in[3].as<float>(),
                *var = in[4].as<float>();
    float *y = out[0].as<float>();
    for (int64_t ch = 0; ch < c_; ++ch) {
      float a = scale[ch] / std::sqrt(var[ch] + static_cast<float>(eps_));
      float b = bias[ch] - mean[ch] * a;
      for (int64_t b0 = 0; b0 < n_; ++b0) {
        const float *xp = x + (b0 * c_ + ch) * size_;
        float *yp = y + (b0 * c_ + ch) * size_;
        for (int64_t i = 0; i < size_; ++i)
          yp[i] = xp[i] * a + b;
      }
    }
    return Status();
  }

private:
  int64_t n_, c_, size_;
  double eps_;
};

class LayerNormKernel : public Kernel {
public:
  LayerNormKernel(int64_t rows, int64_t cols, double eps, bool hasBias,
                  std::vector<int64_t> scaleIdx, std::vector<int64_t> biasIdx)
      : rows_(rows), cols_(cols), eps_(eps), hasBias_(hasBias),
        scaleIdx_(std::move(scaleIdx)), biasIdx_(std::move(biasIdx)) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *x = in[0].as<float>(), *scale = in[1].as<float>();
    const float *bias = hasBias_ ? in[2].as<float>() : nullptr;
    float *y = out[0].as<float>();
    for (int64_t r = 0; r < rows_; ++r) {
      const float *xr = x + r * cols_;
      float *yr = y + r * cols_;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < cols_; ++i)
        mean += xr[i];
      mean /= static_cast<double>(cols_);
      for (int64_t i = 0; i < cols_; ++i)
        var += (xr[i] - mean) * (xr[i] - mean);
      var /= static_cast<double>(cols_);
      double inv = 1.0 / std::sqrt(var + eps_);
      for (int64_t i = 0; i < cols_; ++i) {
        double v = (xr[i] - mean) * inv * scale[scaleIdx_[i]];
        if (bias)
          v += bias[biasIdx_[i]];
        yr[i] = static_cast<float>(v);
      }
    }
    return Status();
  }

private:
  int64_t rows_, cols_;
  double eps_;
  bool hasBias_;
  std::vector<int64_t> scaleIdx_, biasIdx_;
};

/// For a normalization's scale or bias of shape `param`, the element each
/// of the normalized dimensions' elements reads; an error where `param`
/// does not broadcast to `norm` or the table would not fit this machine's
/// memory (a normalized shape of 2^31 elements asks for 16 GiB). Without
/// rows to normalize the table stays empty.
Status normalizedIndices(const Shape &param, const Shape &norm, int64_t rows,
                         std::vector<int64_t> &idx) {
  Shape joined;
  if (!broadcastShapes(param, norm, joined) || joined != norm)
    return Status::error("scale or bias " + shapeToString(param) +
                         " does not broadcast to " + shapeToString(norm));
  if (rows == 0)
    return Status();
  double tableBytes = static_cast<double>(numElements(norm)) * sizeof(int64_t);
  if (tableBytes > static_cast<double>(hostMemoryBytes()))
    return Status::error("normalizing " + shapeToString(norm) + " needs " +
                         std::to_string(static_cast<uint64_t>(tableBytes)) +
                         " bytes of scale indices, more than this machine's " +
                         std::to_string(hostMemoryBytes()) + " bytes");
  std::array<std::vector<int64_t>, 1> st{broadcastStrides(param, norm)};
  idx.resize(numElements(norm));
  broadcastLoop<1>(norm, st, [&](int64_t o, const auto &i) { idx[o] = i[0]; });
  return Status();
}

class RmsNormKernel : public Kernel {
public:
  /// `scaleIdx` (one index per normalized element) is empty without scale.
  RmsNormKernel(int64_t rows, int64_t cols, double eps,
                std::vector<int64_t> scaleIdx)
      : rows_(rows), cols_(cols), eps_(eps), scaleIdx_(std::move(scaleIdx)) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *x = in[0].as<float>();
    const float *scale = in.size() == 2 ? in[1].as<float>() : nullptr;
    float *y = out[0].as<float>();
    for (int64_t r = 0; r < rows_; ++r) {
      const float *xr = x + r * cols_;
      float *yr = y + r * cols_;
      double squares = 0;
      for (int64_t i = 0; i < cols_; ++i)
        squares += static_cast<double>(xr[i]) * xr[i];
      double inv = 1.0 / std::sqrt(squares / static_cast<double>(cols_) + eps_);
      for (int64_t i = 0; i < cols_; ++i) {
        double v = xr[i] * inv;
        yr[i] = static_cast<float>(scale ? v * scale[scaleIdx_[i]] : v);
      }
    }
    return Status();
  }

private:
  int64_t rows_, cols_;
  double eps_;
  std::vector<int64_t> scaleIdx_;
};

class SoftmaxKernel : public Kernel {
public:
  /// `biasStrides`, when not empty, read the bias broadcast to the input.
  SoftmaxKernel(Shape shape, int64_t axis, bool log, bool nanToZero,
                std::vector<int64_t> biasStrides)
      : shape_(std::move(shape)), axis_(shape_[axis]), log_(log),
        nanToZero_(nanToZero), biasStrides_(std::move(biasStrides)) {
    for (int64_t d = 0; d < axis; ++d)
      outer_ *= shape_[d];
    for (size_t d = axis + 1; d < shape_.size(); ++d)
      inner_ *= shape_[d];
  }
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    dispatchType(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>) {
        const T *x = in[0].as<T>();
        std::vector<T> biased;
        if (in.size() == 2) {
          // The add the bias was fused from, rounded as it was.
          const T *bias = in[1].as<T>();
          biased.resize(numElements(shape_));
          broadcastLoop<1>(shape_, {biasStrides_},
                           [&](int64_t o, const auto &idx) {
                             biased[o] = static_cast<T>(x[o] + bias[idx[0]]);
                           });
          x = biased.data();
        }
        compute(x, out[0].as<T>());
      }
    });
    return Status();
  }

private:
  template <typename T> void compute(const T *x, T *y) {
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t i = 0; i < inner_; ++i) {
        const T *xp = x + o * axis_ * inner_ + i;
        T *yp = y + o * axis_ * inner_ + i;
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t a = 0; a < axis_; ++a)
          m = std::max(m, xp[a * inner_]);
        double sum = 0;
        for (int64_t a = 0; a < axis_; ++a)
          sum += std::exp(static_cast<double>(xp[a * inner_] - m));
        for (int64_t a = 0; a < axis_; ++a) {
          double v = static_cast<double>(xp[a * inner_] - m);
          T r = static_cast<T>(log_ ? v - std::log(sum) : std::exp(v) / sum);
          yp[a * inner_] = nanToZero_ && std::isnan(r) ? T(0) : r;
        }
      }
  }
  Shape shape_;
  int64_t outer_ = 1, axis_, inner_ = 1;
  bool log_, nanToZero_;
  std::vector<int64_t> biasStrides_;
};

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

enum class ReduceOp { Sum, Mean, Max, Min, Prod };

class ReduceKernel : public Kernel {
public:
  ReduceKernel(ReduceOp op, Shape in, std::vector<int64_t> outStrides,
               int64_t outCount, int64_t reduceCount)
      : op_(op), in_(std::move(in)), outCount_(outCount),
        reduceCount_(reduceCount) {
    strides_[0] = std::move(outStrides);
  }
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    dispatchType(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>)
        compute(in[0].as<T>(), out[0].as<T>());
    });
    return Status();
  }

private:
  template <typename T> void compute(const T *x, T *y) {
    std::vector<double> acc(outCount_);
    double init =
        op_ == ReduceOp::Max    ? -std::numeric_limits<double>::infinity()
        : op_ == ReduceOp::Min  ? std::numeric_limits<double>::infinity()
        : op_ == ReduceOp::Prod ? 1.0
                                : 0.0;
    std::fill(acc.begin(), acc.end(), init);
    broadcastLoop<1>(in_, strides_, [&](int64_t i, const auto &idx) {
      double v = static_cast<double>(x[i]);
      double &a = acc[idx[0]];
      switch (op_) {
      case ReduceOp::Sum:
      case ReduceOp::Mean:
        a += v;
        break;
      case ReduceOp::Max:
        a = ew::maxKeepNan(a, v);
        break;
      case ReduceOp::Min:
        a = ew::minKeepNan(a, v);
        break;
      case ReduceOp::Prod:
        a *= v;
        break;
      }
    });
    for (int64_t o = 0; o < outCount_; ++o) {
      double v = acc[o];
      if (op_ == ReduceOp::Mean)
        v /= static_cast<double>(reduceCount_);
      y[o] = saturateCast<T>(v);
    }
  }
  ReduceOp op_;
  Shape in_;
  std::array<std::vector<int64_t>, 1> strides_;
  int64_t outCount_, reduceCount_;
};

Status requireF32(const KernelArgs &a) {
  for (const TensorType &t : a.inputs)
    if (t.dtype != DType::F32)
      return Status::error("supports f32 only, got " + t.str());
  for (const TensorType &t : a.outputs)
    if (t.dtype != DType::F32)
      return Status::error("supports f32 only, got " + t.str());
  return Status();
}

void addReduce(KernelTable &t, const char *name, ReduceOp op) {
  t[name] = [op](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
    const Shape &in = a.inputs[0].shape;
    if (a.inputs[0].dtype != a.outputs[0].dtype ||
        a.inputs[0].dtype == DType::Bool)
      return Status::error("unsupported types");
    std::vector<int64_t> axes = a.attrs.getInts("axes");
    std::vector<bool> reduced(in.size(), false);
    for (int64_t ax : axes) {
      if (ax < 0 || ax >= static_cast<int64_t>(in.size()))
        return Status::error("axis " + std::to_string(ax) + " out of range");
      reduced[ax] = true;
    }
    // Output viewed with the input's rank: reduced dims have extent 1.
    Shape kept;
    int64_t reduceCount = 1;
    for (size_t d = 0; d < in.size(); ++d) {
      kept.push_back(reduced[d] ? 1 : in[d]);
      if (reduced[d])
        reduceCount *= in[d];
    }
    if (numElements(kept) != a.outputs[0].numElements())
      return Status::error("result " + a.outputs[0].str() +
                           " does not match the reduction");
    std::vector<int64_t> strides = contiguousStrides(kept);
    for (size_t d = 0; d < in.size(); ++d)
      if (reduced[d])
        strides[d] = 0;
    k = std::make_unique<ReduceKernel>(op, in, strides, numElements(kept),
                                       reduceCount);
    return Status();
  };
}

Status makePool(const KernelArgs &a, bool isMax, std::unique_ptr<Kernel> &k,
                bool withIndices = false) {
  PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, withIndices ? 2 : 1));
  if (withIndices && (a.outputs[1].dtype != DType::I64 ||
                      a.outputs[1].shape != a.outputs[0].shape))
    return Status::error("indices must be i64 with the output's shape");
  DType t = a.inputs[0].dtype;
  // Max pooling is exact in any type; averages need floating point.
  bool typeOk = isMax ? (t != DType::Bool && t != DType::F16 &&
                         t != DType::BF16 && t == a.outputs[0].dtype)
                      : (isFloatType(t) && t == a.outputs[0].dtype);
  if (!typeOk)
    return Status::error(std::string("element type ") + dtypeName(t) +
                         " is not supported");
  const Shape &in = a.inputs[0].shape, &out = a.outputs[0].shape;
  Window w;
  PARTC_RETURN_IF_ERROR(
      makeWindow(a.attrs, in, out, a.attrs.getInts("kernel_shape"), w));
  if (in[0] != out[0] || in[1] != out[1])
    return Status::error("batch and channels must be preserved");
  k = std::make_unique<PoolKernel>(
      w, in[0] * in[1], isMax, a.attrs.getInt("count_include_pad") != 0,
      withIndices, withIndices && a.attrs.getInt("storage_order") == 1);
  return Status();
}

//===----------------------------------------------------------------------===//
// Channels last: the reference runs the channels-first kernel between
// permutations, which is slow but cannot disagree with it.
//===----------------------------------------------------------------------===//

/// Moves channels between last ([N, S..., C]) and first ([N, C, S...]).
void permuteChannels(const uint8_t *src, uint8_t *dst, const Shape &last,
                     size_t elementBytes, bool toFirst) {
  int64_t n = last.front(), c = last.back(), spatial = 1;
  for (size_t d = 1; d + 1 < last.size(); ++d)
    spatial *= last[d];
  for (int64_t b = 0; b < n; ++b)
    for (int64_t s = 0; s < spatial; ++s)
      for (int64_t ch = 0; ch < c; ++ch) {
        size_t l = static_cast<size_t>((b * spatial + s) * c + ch);
        size_t f = static_cast<size_t>((b * c + ch) * spatial + s);
        if (toFirst)
          std::memcpy(dst + f * elementBytes, src + l * elementBytes,
                      elementBytes);
        else
          std::memcpy(dst + l * elementBytes, src + f * elementBytes,
                      elementBytes);
      }
}

class ChannelsLastKernel : public Kernel {
public:
  ChannelsLastKernel(std::unique_ptr<Kernel> inner, std::vector<bool> permute,
                     std::vector<bool> permuteOut, std::vector<TensorType> ins,
                     std::vector<TensorType> outs)
      : inner_(std::move(inner)), permute_(std::move(permute)),
        permuteOut_(std::move(permuteOut)), ins_(std::move(ins)),
        outs_(std::move(outs)), inBuf_(ins_.size()), outBuf_(outs_.size()) {}

  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    // Scratch on first use: kernels are also created only to validate plans.
    for (size_t i = 0; i < ins_.size(); ++i)
      if (permute_[i])
        inBuf_[i].resize(ins_[i].byteSize());
    for (size_t i = 0; i < outs_.size(); ++i)
      if (permuteOut_[i])
        outBuf_[i].resize(outs_[i].byteSize());
    std::vector<TensorRef> first(in.size()), firstOut(out.size());
    for (size_t i = 0; i < in.size(); ++i) {
      first[i] = in[i];
      if (!permute_[i])
        continue;
      permuteChannels(static_cast<const uint8_t *>(in[i].data),
                      inBuf_[i].data(), in[i].type.shape,
                      dtypeSize(in[i].type.dtype), true);
      first[i] = {inBuf_[i].data(), ins_[i]};
    }
    for (size_t i = 0; i < out.size(); ++i)
      firstOut[i] =
          permuteOut_[i] ? TensorRef{outBuf_[i].data(), outs_[i]} : out[i];
    PARTC_RETURN_IF_ERROR(inner_->run(first, firstOut));
    for (size_t i = 0; i < out.size(); ++i)
      if (permuteOut_[i])
        permuteChannels(outBuf_[i].data(), static_cast<uint8_t *>(out[i].data),
                        out[i].type.shape, dtypeSize(out[i].type.dtype), false);
    return Status();
  }

private:
  std::unique_ptr<Kernel> inner_;
  std::vector<bool> permute_, permuteOut_;
  std::vector<TensorType> ins_, outs_;
  std::vector<std::vector<uint8_t>> inBuf_, outBuf_;
};

} // namespace

/// Builds `factory`'s kernel for a channels-last op: the operands flagged
/// in `permute` and the results flagged in `permuteOut` are moved between
/// layouts around it.
static Status makeChannelsLast(const KernelArgs &a, std::vector<bool> permute,
                               const KernelFactory &factory,
                               std::unique_ptr<Kernel> &k,
                               std::vector<bool> permuteOut) {
  std::vector<TensorType> ins = a.inputs, outs = a.outputs;
  permute.resize(ins.size(), false);
  permuteOut.resize(outs.size(), false);
  for (size_t i = 0; i < ins.size(); ++i)
    if (permute[i]) {
      if (ins[i].shape.size() < 3)
        return Status::error("channels-last operand " + ins[i].str() +
                             " needs rank >= 3");
      ins[i].shape = channelsFirstShape(ins[i].shape);
    }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!permuteOut[i])
      continue;
    if (outs[i].shape.size() < 3)
      return Status::error("channels-last result " + outs[i].str() +
                           " needs rank >= 3");
    outs[i].shape = channelsFirstShape(outs[i].shape);
  }
  AttrMap attrs = a.attrs;
  attrs.erase("channels_last");
  std::unique_ptr<Kernel> inner;
  PARTC_RETURN_IF_ERROR(factory({a.name, attrs, ins, outs}, inner));
  k = std::make_unique<ChannelsLastKernel>(std::move(inner), std::move(permute),
                                           std::move(permuteOut), ins, outs);
  return Status();
}

void addWithChannelsLast(KernelTable &t, const std::string &name,
                         std::vector<bool> images, KernelFactory factory) {
  t[name] = [images, factory](const KernelArgs &a,
                              std::unique_ptr<Kernel> &k) -> Status {
    if (!a.attrs.getInt("channels_last", 0))
      return factory(a, k);
    std::vector<bool> results(a.outputs.size(), false);
    if (!results.empty())
      results[0] = true;
    return makeChannelsLast(a, images, factory, k, results);
  };
}

static Status createLayerNorm(const KernelArgs &a, std::unique_ptr<Kernel> &k) {
  PARTC_RETURN_IF_ERROR(checkArity(a, 2, 3, 1));
  PARTC_RETURN_IF_ERROR(requireF32(a));
  const Shape &x = a.inputs[0].shape;
  int64_t axis = a.attrs.getInt("axis");
  if (axis < 0 || axis > static_cast<int64_t>(x.size()) ||
      a.outputs[0].shape != x)
    return Status::error("bad axis or shapes");
  Shape norm(x.begin() + axis, x.end());
  int64_t cols = numElements(norm);
  int64_t rows = cols ? a.inputs[0].numElements() / cols : 0;
  std::vector<int64_t> si, bi;
  PARTC_RETURN_IF_ERROR(normalizedIndices(a.inputs[1].shape, norm, rows, si));
  if (a.inputs.size() == 3)
    PARTC_RETURN_IF_ERROR(normalizedIndices(a.inputs[2].shape, norm, rows, bi));
  k = std::make_unique<LayerNormKernel>(rows, cols, a.attrs.getFloat("epsilon"),
                                        a.inputs.size() == 3, si, bi);
  return Status();
}

void registerNnKernels(KernelTable &t) {
  KernelFactory conv = [](const KernelArgs &a,
                          std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 2, 4, 1));
    PARTC_RETURN_IF_ERROR(requireF32(a));
    const Shape &x = a.inputs[0].shape, &w = a.inputs[1].shape,
                &y = a.outputs[0].shape;
    if (x.size() < 3 || w.size() != x.size())
      return Status::error("input " + a.inputs[0].str() + " and weight " +
                           a.inputs[1].str() + " ranks do not match");
    int64_t group = a.attrs.getInt("group");
    if (group < 1 || x[1] % group || w[0] % group || x[1] / group != w[1])
      return Status::error("channels " + std::to_string(x[1]) + " and weight " +
                           a.inputs[1].str() + " do not fit group " +
                           std::to_string(group));
    if (y[0] != x[0] || y[1] != w[0])
      return Status::error("result " + a.outputs[0].str() + " is inconsistent");
    if (a.inputs.size() >= 3 && a.inputs[2].numElements() != w[0])
      return Status::error("bias " + a.inputs[2].str() + " has wrong size");
    if (a.inputs.size() == 4 && a.inputs[3] != a.outputs[0])
      return Status::error("addend " + a.inputs[3].str() +
                           " does not match the result " + a.outputs[0].str());
    Window win;
    PARTC_RETURN_IF_ERROR(
        makeWindow(a.attrs, x, y, Shape(w.begin() + 2, w.end()), win));
    FusedActivation activation;
    PARTC_RETURN_IF_ERROR(fusedConvActivation(a.attrs, activation));
    // The im2col scratch of one group of one image, allocated here: refused
    // with the numbers where this machine cannot hold it.
    double scratch = static_cast<double>(x[1] / group) *
                     static_cast<double>(win.kernelSize()) *
                     static_cast<double>(win.outSize()) * sizeof(float);
    if (scratch > static_cast<double>(hostMemoryBytes())) {
      char need[32];
      std::snprintf(need, sizeof need, "%.3g", scratch);
      return Status::error(std::string("needs ") + need +
                           " bytes of scratch for its im2col matrix, more "
                           "than this machine's " +
                           std::to_string(hostMemoryBytes()) + " bytes");
    }
    k = std::make_unique<ConvKernel>(win, x[0], x[1], w[0], group,
                                     a.inputs.size() >= 3, a.inputs.size() == 4,
                                     activation);
    return Status();
  };
  addWithChannelsLast(t, "conv", {true, true, false, true}, conv);
  auto pool = [](bool isMax) -> KernelFactory {
    return [isMax](const KernelArgs &a, std::unique_ptr<Kernel> &k) {
      return makePool(a, isMax, k);
    };
  };
  addWithChannelsLast(t, "max_pool", {true}, pool(true));
  addWithChannelsLast(t, "avg_pool", {true}, pool(false));
  t["max_pool_with_indices"] = [](const KernelArgs &a,
                                  std::unique_ptr<Kernel> &k) {
    return makePool(a, true, k, /*withIndices=*/true);
  };
  auto global = [](bool isMax) {
    return [isMax](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
      PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
      PARTC_RETURN_IF_ERROR(requireF32(a));
      const Shape &x = a.inputs[0].shape;
      if (x.size() < 2 || a.outputs[0].numElements() != x[0] * x[1])
        return Status::error("bad shapes");
      int64_t planes = x[0] * x[1];
      k = std::make_unique<GlobalPoolKernel>(
          planes, planes ? a.inputs[0].numElements() / planes : 0, isMax);
      return Status();
    };
  };
  t["global_avg_pool"] = global(false);
  t["global_max_pool"] = global(true);
  t["batch_norm"] = [](const KernelArgs &a,
                       std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 5, 5, 1));
    PARTC_RETURN_IF_ERROR(requireF32(a));
    const Shape &x = a.inputs[0].shape;
    if (x.size() < 2 || a.outputs[0].shape != x)
      return Status::error("bad shapes");
    for (size_t i = 1; i < 5; ++i)
      if (a.inputs[i].numElements() != x[1])
        return Status::error("parameter " + std::to_string(i) + " " +
                             a.inputs[i].str() + " must have " +
                             std::to_string(x[1]) + " elements");
    int64_t size = 1;
    for (size_t d = 2; d < x.size(); ++d)
      size *= x[d];
    k = std::make_unique<BatchNormKernel>(x[0], x[1], size,
                                          a.attrs.getFloat("epsilon"));
    return Status();
  };
  t["rms_norm"] = [](const KernelArgs &a,
                     std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 1, 2, 1));
    PARTC_RETURN_IF_ERROR(requireF32(a));
    const Shape &x = a.inputs[0].shape;
    int64_t axis = a.attrs.getInt("axis");
    if (axis < 0 || axis >= static_cast<int64_t>(x.size()) ||
        a.outputs[0].shape != x)
      return Status::error("bad axis or shapes");
    Shape norm(x.begin() + axis, x.end());
    int64_t cols = numElements(norm);
    int64_t rows = cols ? a.inputs[0].numElements() / cols : 0;
    std::vector<int64_t> scaleIdx;
    if (a.inputs.size() == 2)
      PARTC_RETURN_IF_ERROR(
          normalizedIndices(a.inputs[1].shape, norm, rows, scaleIdx));
    k = std::make_unique<RmsNormKernel>(rows, cols, a.attrs.getFloat("epsilon"),
                                        std::move(scaleIdx));
    return Status();
  };
  t["layer_norm"] = createLayerNorm;
  auto softmax = [](bool log) {
    return [log](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
      PARTC_RETURN_IF_ERROR(checkArity(a, 1, log ? 1 : 2, 1));
      const TensorType &x = a.inputs[0];
      if (!isFloatType(x.dtype) || a.outputs[0] != x)
        return Status::error("unsupported type " + x.str());
      int64_t axis = a.attrs.getInt("axis");
      if (axis < 0 || axis >= static_cast<int64_t>(x.shape.size()))
        return Status::error("axis " + std::to_string(axis) + " out of range");
      std::vector<int64_t> biasStrides;
      if (a.inputs.size() == 2) {
        const TensorType &bias = a.inputs[1];
        Shape joined;
        if (bias.dtype != x.dtype ||
            !broadcastShapes(bias.shape, x.shape, joined) || joined != x.shape)
          return Status::error("bias " + bias.str() +
                               " does not broadcast to " + x.str());
        biasStrides = broadcastStrides(bias.shape, x.shape);
      }
      // Only softmax zeroes fully masked rows.
      k = std::make_unique<SoftmaxKernel>(x.shape, axis, log,
                                          !log && a.attrs.getInt("nan_to_zero"),
                                          std::move(biasStrides));
      return Status();
    };
  };
  t["softmax"] = softmax(false);
  t["log_softmax"] = softmax(true);
  addReduce(t, "reduce_sum", ReduceOp::Sum);
  addReduce(t, "reduce_mean", ReduceOp::Mean);
  addReduce(t, "reduce_max", ReduceOp::Max);
  addReduce(t, "reduce_min", ReduceOp::Min);
  addReduce(t, "reduce_prod", ReduceOp::Prod);
}

} // namespace partc::runtime
