//===- Training.cu - Backward window ops, batch norm, losses, optimizers --===//
//
// The GPU side of runtime/kernels/Backward.cpp and Training.cpp, float32.
// Per-channel and per-row sums accumulate in double, as the CPU reference
// does, so the two agree to float32's rounding of the result.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/FastDivider.h"
#include "runtime/cuda/KernelUtils.cuh"
#include "runtime/cuda/TrainingKernels.h"
#include "runtime/kernels/Philox.h"
#include "runtime/kernels/WindowTaps.h"

#include <algorithm>
#include <type_traits>

namespace partc::runtime::cuda {

namespace {

constexpr int kReduceThreads = 512;

/// Sum of `v` over the block, valid in thread 0.
__device__ double blockSum(double v) {
  __shared__ double partial[kReduceThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  v = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < blockDim.x / 32; ++w)
      v += partial[w];
  return v;
}

//===----------------------------------------------------------------------===//
// Pooling gradients, gathered: one thread per input element sums the
// output gradients of the windows that hold it (for max pooling, those
// whose first maximum it is, found beforehand by one thread per window).
// No atomics and no cleared buffer, and the same sums at every run.
//===----------------------------------------------------------------------===//

/// Plain division, for tensors too large for FastDivider's 31 bits.
struct PlainDivider {
  int64_t d = 1;
  __device__ int64_t divide(int64_t n) const { return n / d; }
  __device__ int64_t remainder(int64_t n, int64_t q) const { return n - q * d; }
};

/// A window's geometry in `Index`: int32_t with FastDivider where every
/// element count fits 30 bits (a thread splits indices a dozen times),
/// else int64_t.
template <typename Index> struct PoolIndex {
  using Divider =
      std::conditional_t<sizeof(Index) == 4, FastDivider, PlainDivider>;
  Index channels, in[3], out[3], kernel[3], stride[3], pad[3], padEnd[3],
      dilation[3];
  Divider byChannels, byIn[3], byOut[3];
  bool countIncludePad;
  static Divider divider(int64_t d) {
    if constexpr (sizeof(Index) == 4)
      return FastDivider(uint32_t(d));
    else
      return PlainDivider{d};
  }
  explicit PoolIndex(const PoolParams &p)
      : channels(Index(p.channelsLast)),
        byChannels(divider(std::max<int64_t>(p.channelsLast, 1))),
        countIncludePad(p.countIncludePad) {
    for (int d = 0; d < 3; ++d) {
      in[d] = Index(p.in[d]);
      out[d] = Index(p.out[d]);
      kernel[d] = Index(p.kernel[d]);
      stride[d] = Index(p.stride[d]);
      pad[d] = Index(p.padBegin[d]);
      padEnd[d] = Index(p.padEnd[d]);
      dilation[d] = Index(p.dilation[d]);
      byIn[d] = divider(std::max<int64_t>(p.in[d], 1));
      byOut[d] = divider(std::max<int64_t>(p.out[d], 1));
    }
  }
  /// Element of position (d, h, w) of `plane` (the batch index channels
  /// last) in a tensor of spatial extents `e`, for `channel`.
  __device__ Index element(Index plane, Index d, Index h, Index w,
                           const Index *e, Index channel) const {
    Index at = ((plane * e[0] + d) * e[1] + h) * e[2] + w;
    return channels ? at * channels + channel : at;
  }
  /// Splits element i of a tensor of spatial extents `by` into its plane,
  /// position and channel.
  __device__ void split(Index i, const Divider *by, Index &plane, Index *pos,
                        Index &channel) const {
    Index pixel = i;
    channel = 0;
    if (channels) {
      pixel = byChannels.divide(i);
      channel = byChannels.remainder(i, pixel);
    }
    for (int d = 2; d >= 0; --d) {
      Index rest = by[d].divide(pixel);
      pos[d] = by[d].remainder(pixel, rest);
      pixel = rest;
    }
    plane = pixel;
  }
};

/// `Lanes` consecutive floats (or ints) at p into v: one vector load for
/// four channels of a channels-last position.
template <int Lanes, typename T>
__device__ inline void loadLanes(const T *p, T *v) {
  if constexpr (Lanes == 4) {
    using Vec = std::conditional_t<std::is_same_v<T, float>, float4, int4>;
    Vec q = *reinterpret_cast<const Vec *>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    v[0] = *p;
  }
}
template <int Lanes, typename T>
__device__ inline void storeLanes(T *p, const T *v) {
  if constexpr (Lanes == 4) {
    using Vec = std::conditional_t<std::is_same_v<T, float>, float4, int4>;
    *reinterpret_cast<Vec *>(p) = Vec{v[0], v[1], v[2], v[3]};
  } else {
    *p = v[0];
  }
}

/// Per output element: the window offset (jd, jh, jw) of its first
/// maximum, flattened, or -1 if the window holds no input. With 4 `Lanes`,
/// a thread takes 4 channels (PoolIndex counts channels in fours), so
/// that it splits its index once for all of them.
template <typename Index, int Lanes>
__global__ void poolArgMaxKernel(const float *x, int32_t *arg,
                                 PoolIndex<Index> p, Index n) {
  for (Index o = blockIdx.x * Index(blockDim.x) + threadIdx.x; o < n;
       o += Index(gridDim.x) * blockDim.x) {
    Index plane, pos[3], channel;
    p.split(o, p.byOut, plane, pos, channel);
    Index d0 = pos[0] * p.stride[0] - p.pad[0],
          h0 = pos[1] * p.stride[1] - p.pad[1],
          w0 = pos[2] * p.stride[2] - p.pad[2];
    float best[Lanes];
    int32_t where[Lanes];
    for (int l = 0; l < Lanes; ++l)
      best[l] = -INFINITY, where[l] = -1;
    // Only the taps in the input (WindowTaps.h); `where` keeps the first
    // maximum's offset in the whole kernel, below 2^31 (the factory checks).
    TapRange<Index> jd = inputTaps(d0, p.kernel[0], p.dilation[0], p.in[0]),
                    jh = inputTaps(h0, p.kernel[1], p.dilation[1], p.in[1]),
                    jw = inputTaps(w0, p.kernel[2], p.dilation[2], p.in[2]);
    for (Index kd = jd.first; kd < jd.last; ++kd) {
      Index d = d0 + kd * p.dilation[0];
      for (Index kh = jh.first; kh < jh.last; ++kh) {
        Index h = h0 + kh * p.dilation[1];
        for (Index kw = jw.first; kw < jw.last; ++kw) {
          Index w = w0 + kw * p.dilation[2];
          int32_t offset = int32_t((kd * p.kernel[1] + kh) * p.kernel[2] + kw);
          float v[Lanes];
          loadLanes<Lanes>(x + p.element(plane, d, h, w, p.in, channel) * Lanes,
                           v);
          // The first maximum, as PyTorch and the CPU reference pick it.
          for (int l = 0; l < Lanes; ++l)
            if (where[l] < 0 || v[l] > best[l])
              best[l] = v[l], where[l] = offset;
        }
      }
    }
    storeLanes<Lanes>(arg + o * Lanes, where);
  }
}

/// The inputs and padded positions an average's window counts, in closed
/// form (in float: three dimensions of padded taps may exceed 2^63).
template <typename Index>
__device__ float poolDivisor(const PoolIndex<Index> &p, const Index *start) {
  float divisor = 1.f;
  for (int k = 0; k < 3; ++k) {
    TapRange<Index> taps =
        inputTaps(start[k], p.kernel[k], p.dilation[k], p.in[k]);
    divisor *= float(p.countIncludePad
                         ? paddedTaps(start[k], p.kernel[k], p.dilation[k],
                                      p.in[k], p.padEnd[k])
                         : taps.last - taps.first);
  }
  return divisor;
}

/// With `arg` (max pooling), output gradients go to their window's first
/// maximum; without, each is shared evenly by its window's divisor. Lanes
/// as in poolArgMaxKernel.
template <typename Index, int Lanes>
__global__ void poolGradKernel(const float *dy, const int32_t *arg, float *dx,
                               PoolIndex<Index> p, Index n) {
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < n;
       i += Index(gridDim.x) * blockDim.x) {
    Index plane, pos[3], channel;
    p.split(i, p.byIn, plane, pos, channel);
    float sum[Lanes] = {};
    // Only the (window, tap) pairs that hold this element (WindowTaps.h).
    WindowWalk<Index> walks[3];
    for (int d = 0; d < 3; ++d)
      walks[d] = windowsHolding(pos[d], p.kernel[d], p.dilation[d], p.stride[d],
                                p.pad[d], p.out[d]);
    Index od, oh, ow, kd, kh, kw;
    for (Index vd = walks[0].first; vd < walks[0].last; ++vd) {
      if (!windowStep(walks[0], vd, pos[0], p.dilation[0], p.stride[0],
                      p.pad[0], od, kd))
        continue;
      for (Index vh = walks[1].first; vh < walks[1].last; ++vh) {
        if (!windowStep(walks[1], vh, pos[1], p.dilation[1], p.stride[1],
                        p.pad[1], oh, kh))
          continue;
        for (Index vw = walks[2].first; vw < walks[2].last; ++vw) {
          if (!windowStep(walks[2], vw, pos[2], p.dilation[2], p.stride[2],
                          p.pad[2], ow, kw))
            continue;
          Index offset = (kd * p.kernel[1] + kh) * p.kernel[2] + kw;
          // Window (od, oh, ow) holds this element at offset (kd, kh, kw).
          Index o = p.element(plane, od, oh, ow, p.out, channel) * Lanes;
          float g[Lanes];
          loadLanes<Lanes>(dy + o, g);
          if (arg) {
            int32_t first[Lanes];
            loadLanes<Lanes>(arg + o, first);
            for (int l = 0; l < Lanes; ++l)
              sum[l] += first[l] == offset ? g[l] : 0.0f;
            continue;
          }
          Index start[3] = {od * p.stride[0] - p.pad[0],
                            oh * p.stride[1] - p.pad[1],
                            ow * p.stride[2] - p.pad[2]};
          float divisor = poolDivisor(p, start);
          for (int l = 0; l < Lanes; ++l)
            sum[l] += g[l] / divisor;
        }
      }
    }
    storeLanes<Lanes>(dx + i * Lanes, sum);
  }
}

template <typename Index, int Lanes>
cudaError_t launchPoolGradIn(const float *dy, const float *x, float *dx,
                             int32_t *arg, PoolParams params, int64_t inputs,
                             int64_t outputs, cudaStream_t s) {
  params.channelsLast /= Lanes;
  PoolIndex<Index> p(params);
  if (params.isMax)
    poolArgMaxKernel<Index, Lanes>
        <<<blocksFor(outputs / Lanes), kThreads, 0, s>>>(
            x, arg, p, Index(outputs / Lanes));
  poolGradKernel<Index, Lanes><<<blocksFor(inputs / Lanes), kThreads, 0, s>>>(
      dy, params.isMax ? arg : nullptr, dx, p, Index(inputs / Lanes));
  return cudaGetLastError();
}

//===----------------------------------------------------------------------===//
// Batch normalization. Per-channel sums are split over the batch so that
// enough blocks work (a ResNet's first stage has 64 channels of 200K values
// at batch 64): each block sums its share in double into `partial`, one
// thread per channel adds the shares and derives per-channel coefficients,
// and one element-wise pass applies them.
//===----------------------------------------------------------------------===//

constexpr int kBatchNormThreads = 256;

/// Channels last, a block sums 32 channels (a warp's coalesced row) over
/// its share of the rows, 8 rows at a time.
constexpr int kLastChannels = 32, kLastRows = 8;

/// Shares of the batch per channel (channels last, of the rows per 32
/// channels): about 1024 blocks in all.
int64_t batchShares(const ChannelShape &s) {
  if (s.last) {
    int64_t groups = (s.c + kLastChannels - 1) / kLastChannels;
    int64_t want = (1024 + groups - 1) / std::max<int64_t>(groups, 1);
    int64_t rows = s.n * s.size;
    return std::max<int64_t>(
        1, std::min<int64_t>(want, (rows + kLastRows - 1) / kLastRows));
  }
  int64_t want = (1024 + s.c - 1) / std::max<int64_t>(s.c, 1);
  return std::max<int64_t>(1, std::min<int64_t>(want, s.n));
}

/// A channel's scale / sqrt(variance + eps) from the stored float
/// variance: the forward pass and a gradient with a fused ReLU compute the
/// norm's output from the same numbers, bit for bit.
__device__ inline float normScale(float scale, float variance, double eps) {
  return float(double(scale) / sqrt(double(variance) + eps));
}

/// The norm's output before its epilogue, from x - mean.
__device__ inline float normalized(float centered, float scale, float bias) {
  return __fmaf_rn(centered, scale, bias);
}

/// What a gradient with a fused ReLU needs to mask dy as the forward
/// ReLU did: the norm's scale, bias and statistics. `bias` is null
/// without the fusion.
struct ReluMask {
  const float *scale, *bias, *var;
  double eps;
  __device__ float channelScale(int64_t ch) const {
    return bias ? normScale(scale[ch], var[ch], eps) : 0.0f;
  }
  __device__ float channelBias(int64_t ch) const {
    return bias ? bias[ch] : 0.0f;
  }
};

/// dy, or with `Masked`, 0 where the norm's output for `centered` (from
/// the channel's scale k and bias b) was not positive. A template
/// parameter, so that the unmasked loops carry no branch.
template <bool Masked>
__device__ inline float maskedGrad(float dy, float centered, float k, float b) {
  return !Masked || normalized(centered, k, b) > 0.0f ? dy : 0.0f;
}

/// Sums of one channel's values over one share of the batch: x and x^2,
/// or with `dy`, dy and dy * (x - mean) (dy masked by `mask`).
template <bool Masked>
__global__ void batchNormPartialKernel(const float *x, const float *dy,
                                       const float *mean, ReluMask mask,
                                       double *partial, ChannelShape s,
                                       int64_t shares) {
  int64_t share = blockIdx.x, ch = blockIdx.y;
  int64_t first = share * s.n / shares, last = (share + 1) * s.n / shares;
  double a = 0, b = 0;
  float m = dy ? mean[ch] : 0.0f, k = mask.channelScale(ch),
        bias = mask.channelBias(ch);
  for (int64_t n = first; n < last; ++n) {
    int64_t base = (n * s.c + ch) * s.size;
    for (int64_t i = threadIdx.x; i < s.size; i += blockDim.x) {
      float xi = x[base + i];
      double v = xi;
      if (dy) {
        double g = maskedGrad<Masked>(dy[base + i], xi - m, k, bias);
        a += g;
        b += g * (v - m);
      } else {
        a += v;
        b += v * v;
      }
    }
  }
  a = blockSum(a);
  b = blockSum(b);
  if (threadIdx.x == 0) {
    partial[(ch * shares + share) * 2] = a;
    partial[(ch * shares + share) * 2 + 1] = b;
  }
}

/// Adds a (32 columns x kLastRows rows) block's two sums over its rows and
/// stores them as column `col`'s share `share` of `partial` (two doubles
/// per share, a column's shares contiguous). Every thread of the block
/// calls it.
__device__ inline void storeColumnPartials(double a, double b, int64_t col,
                                           int64_t cols, int64_t share,
                                           int64_t shares, double *partial) {
  __shared__ double sums[2][kLastRows][kLastChannels];
  sums[0][threadIdx.y][threadIdx.x] = a;
  sums[1][threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols)
    return;
  for (int row = 1; row < kLastRows; ++row) {
    a += sums[0][row][threadIdx.x];
    b += sums[1][row][threadIdx.x];
  }
  partial[(col * shares + share) * 2] = a;
  partial[(col * shares + share) * 2 + 1] = b;
}

/// The same sums channels last: thread (x, y) of a block reads channel
/// x of every 8th row of its share, and the block adds its 8 rows.
template <bool Masked>
__global__ void batchNormPartialLastKernel(const float *x, const float *dy,
                                           const float *mean, ReluMask mask,
                                           double *partial, ChannelShape s,
                                           int64_t shares) {
  int64_t share = blockIdx.x,
          ch = int64_t(blockIdx.y) * kLastChannels + threadIdx.x;
  int64_t rows = s.n * s.size;
  int64_t first = share * rows / shares, last = (share + 1) * rows / shares;
  double a = 0, b = 0;
  if (ch < s.c) {
    float m = dy ? mean[ch] : 0.0f, k = mask.channelScale(ch),
          bias = mask.channelBias(ch);
#pragma unroll 4
    for (int64_t r = first + threadIdx.y; r < last; r += kLastRows) {
      int64_t at = r * s.c + ch;
      float xi = x[at];
      double v = xi;
      if (dy) {
        double g = maskedGrad<Masked>(dy[at], xi - m, k, bias);
        a += g;
        b += g * (v - m);
      } else {
        a += v;
        b += v * v;
      }
    }
  }
  storeColumnPartials(a, b, ch, s.c, share, shares, partial);
}

/// A channel's two sums over its shares of the batch, by one warp: lane l
/// adds shares l, l + 32, ... (a channel's shares are contiguous, so the
/// warp's loads coalesce), then the lanes add up; valid in every lane.
/// One thread per channel walking 128 to 512 shares waited on each load in
/// turn: 20 to 50 us per batch norm, a tenth of a ResNet-50 step at batch
/// 120 (H100 profile, 2026-11-26).
constexpr int kFinishWarps = 8;
__device__ inline bool channelSums(const double *partial, const ChannelShape &s,
                                   int64_t shares, int64_t &ch, double &a,
                                   double &b) {
  ch = int64_t(blockIdx.x) * kFinishWarps + threadIdx.x / 32;
  if (ch >= s.c)
    return false;
  a = 0, b = 0;
  for (int64_t k = threadIdx.x % 32; k < shares; k += 32) {
    a += partial[(ch * shares + k) * 2];
    b += partial[(ch * shares + k) * 2 + 1];
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    a += __shfl_xor_sync(0xffffffffu, a, offset);
    b += __shfl_xor_sync(0xffffffffu, b, offset);
  }
  return true;
}

unsigned finishBlocks(const ChannelShape &s) {
  return unsigned((s.c + kFinishWarps - 1) / kFinishWarps);
}

/// Forward: the batch's mean and biased variance, and y = (x - mean) *
/// coef[0] + coef[1] per channel.
__global__ void batchStatsFinishKernel(const double *partial,
                                       const float *scale, const float *bias,
                                       float *mean, float *var, float *coef,
                                       ChannelShape s, int64_t shares,
                                       double eps) {
  int64_t ch;
  double sum, squares;
  if (!channelSums(partial, s, shares, ch, sum, squares) ||
      threadIdx.x % 32 != 0)
    return;
  double count = double(s.n * s.size);
  double m = sum / count, v = fmax(squares / count - m * m, 0.0);
  mean[ch] = float(m);
  var[ch] = float(v);
  coef[ch * 2] = normScale(scale[ch], float(v), eps);
  coef[ch * 2 + 1] = bias[ch];
}

/// Backward: the scale's and bias's gradients, and dx = dy * coef[0] +
/// (x - mean) * coef[1] + coef[2] per channel (dy masked by `mask`, whose
/// channel scale goes to coef[3]): one float4 per channel.
constexpr int kGradCoefs = 4;
__global__ void batchNormGradFinishKernel(const double *partial,
                                          const float *scale, const float *var,
                                          ReluMask mask, float *dscale,
                                          float *dbias, float *coef,
                                          ChannelShape s, int64_t shares,
                                          double eps) {
  int64_t ch;
  double sumDy, sumDyXmu;
  if (!channelSums(partial, s, shares, ch, sumDy, sumDyXmu) ||
      threadIdx.x % 32 != 0)
    return;
  double count = double(s.n * s.size);
  double invStd = 1.0 / sqrt(double(var[ch]) + eps);
  double gScale = sumDyXmu * invStd, k = scale[ch] * invStd;
  dbias[ch] = float(sumDy);
  dscale[ch] = float(gScale);
  float *c = coef + ch * kGradCoefs;
  c[0] = float(k);
  c[1] = float(-k * invStd * gScale / count);
  c[2] = float(-k * sumDy / count);
  c[3] = mask.channelScale(ch);
}

/// Element i of the apply pass: y = (x - mean) * coef[0] + coef[1] (plus
/// `addend`, then ReLU where asked: the fused epilogue), or with `dy`,
/// y = dy * coef[0] + (x - mean) * coef[1] + coef[2], per channel, dy
/// masked by `mask` where `Masked`.
struct BatchNormApply {
  const float *x, *dy, *mean, *coef, *addend;
  bool relu;
  ReluMask mask;
  /// Element of channel `ch` with input xi, gradient dyi (with dy) and
  /// addend value addi (with addend).
  template <bool Masked>
  __device__ float at(int64_t ch, float xi, float dyi, float addi) const {
    float centered = xi - mean[ch];
    if (dy) {
      float4 c = reinterpret_cast<const float4 *>(coef)[ch];
      float g =
          maskedGrad<Masked>(dyi, centered, c.w, Masked ? mask.bias[ch] : 0.0f);
      return g * c.x + centered * c.y + c.z;
    }
    float v = normalized(centered, coef[ch * 2], coef[ch * 2 + 1]);
    if (addend)
      v += addi;
    return maybeRelu(v, relu);
  }
};

template <bool Masked, typename Index>
__global__ void batchNormApplyKernel(BatchNormApply op, float *y, Index size,
                                     Index channels, Index n) {
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < n;
       i += Index(gridDim.x) * blockDim.x)
    y[i] =
        op.at<Masked>((i / size) % channels, op.x[i], op.dy ? op.dy[i] : 0.0f,
                      op.addend ? op.addend[i] : 0.0f);
}

/// Channels last with a multiple of 4 channels: four channels of one row
/// a thread, read and written as float4s.
template <bool Masked>
__global__ void batchNormApplyLast4Kernel(BatchNormApply op, float4 *y,
                                          uint32_t channels4, uint32_t n4) {
  auto load = [](const float *p, uint32_t q) {
    return p ? reinterpret_cast<const float4 *>(p)[q] : float4{0, 0, 0, 0};
  };
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < n4;
       q += gridDim.x * blockDim.x) {
    uint32_t ch = (q % channels4) * 4;
    float4 x = load(op.x, q), g = load(op.dy, q), a = load(op.addend, q);
    y[q] = make_float4(op.at<Masked>(ch, x.x, g.x, a.x),
                       op.at<Masked>(ch + 1, x.y, g.y, a.y),
                       op.at<Masked>(ch + 2, x.z, g.z, a.z),
                       op.at<Masked>(ch + 3, x.w, g.w, a.w));
  }
}

template <bool Masked>
void launchApplyKernel(const BatchNormApply &op, float *y,
                       const ChannelShape &s, cudaStream_t stream) {
  int64_t n = s.n * s.c * s.size;
  if (s.last && s.c % 4 == 0 && n <= INT32_MAX && aligned16(op.x) &&
      aligned16(op.dy) && aligned16(op.addend) && aligned16(y)) {
    batchNormApplyLast4Kernel<Masked>
        <<<blocksFor(n / 4), kThreads, 0, stream>>>(
            op, reinterpret_cast<float4 *>(y), uint32_t(s.c / 4),
            uint32_t(n / 4));
    return;
  }
  // Channels last, an element's channel is its index modulo c.
  int64_t size = s.last ? 1 : s.size;
  if (n <= INT32_MAX)
    batchNormApplyKernel<Masked, uint32_t>
        <<<blocksFor(n), kThreads, 0, stream>>>(op, y, uint32_t(size),
                                                uint32_t(s.c), uint32_t(n));
  else
    batchNormApplyKernel<Masked, int64_t>
        <<<blocksFor(n), kThreads, 0, stream>>>(op, y, size, s.c, n);
}

cudaError_t launchBatchNormApply(const BatchNormApply &op, float *y,
                                 const ChannelShape &s, cudaStream_t stream) {
  if (op.mask.bias)
    launchApplyKernel<true>(op, y, s, stream);
  else
    launchApplyKernel<false>(op, y, s, stream);
  return cudaGetLastError();
}

__global__ void runningStatsKernel(float *runningMean, float *runningVar,
                                   const float *mean, const float *var,
                                   int64_t channels, double momentum,
                                   double unbias) {
  int64_t ch = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (ch >= channels)
    return;
  runningMean[ch] =
      float((1 - momentum) * runningMean[ch] + momentum * mean[ch]);
  runningVar[ch] =
      float((1 - momentum) * runningVar[ch] + momentum * var[ch] * unbias);
}

//===----------------------------------------------------------------------===//
// Softmax cross-entropy: one block per row, each thread keeping a running
// maximum and the sum of exponentials below it, so that a row is read once
// for its log-sum-exp (16 bytes a load where the rows allow). The row's
// loss is finished in double, as the CPU reference's.
//===----------------------------------------------------------------------===//

constexpr int kLossMaxThreads = 512;

/// Adds logit x to a running (max, sum of exp(logit - max)).
__device__ inline void addLogit(float x, float &max, float &sum) {
  if (x > max) {
    sum = sum * expf(max - x) + 1.f;
    max = x;
  } else {
    sum += expf(x - max);
  }
}

/// Merges another thread's running pair into (max, sum).
__device__ inline void mergeLogits(float otherMax, float otherSum, float &max,
                                   float &sum) {
  float m = fmaxf(max, otherMax);
  if (m == -INFINITY)
    return; // both empty (or all -inf): nothing to scale
  sum = sum * expf(max - m) + otherSum * expf(otherMax - m);
  max = m;
}

/// Elements of `row` before its first 16-byte boundary, or all of them
/// when the row (or `other`, read or written alongside) cannot be walked
/// 16 bytes at a time.
__device__ inline int64_t unalignedHead(const float *row, const void *other,
                                        int64_t classes) {
  auto address = reinterpret_cast<uintptr_t>(row);
  auto otherAddress = reinterpret_cast<uintptr_t>(other);
  if ((address - otherAddress) % 16 != 0 || address % 4 != 0)
    return classes;
  int64_t head = int64_t((16 - address % 16) % 16) / 4;
  return head < classes ? head : classes;
}

/// Calls visit(c, x) for every element of the row: the head, whole
/// 16-byte units, the tail.
template <typename Visit>
__device__ inline void forEachLogit(const float *row, int64_t classes,
                                    int64_t head, Visit visit) {
  for (int64_t c = threadIdx.x; c < head; c += blockDim.x)
    visit(c, row[c]);
  int64_t units = (classes - head) / 4;
  auto body = reinterpret_cast<const float4 *>(row + head);
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    float4 v = body[u];
    int64_t c = head + 4 * u;
    visit(c, v.x);
    visit(c + 1, v.y);
    visit(c + 2, v.z);
    visit(c + 3, v.w);
  }
  for (int64_t c = head + 4 * units + threadIdx.x; c < classes; c += blockDim.x)
    visit(c, row[c]);
}

/// log(sum(exp(row))) of one row, in every thread of the block, as the
/// row's maximum and the log of the sum below it (kept apart so that
/// x - max stays exact for the logits near the maximum).
__device__ float2 rowLogSumExp(const float *row, int64_t classes,
                               int64_t head) {
  float max = -INFINITY, sum = 0.f;
  forEachLogit(row, classes, head,
               [&](int64_t, float x) { addLogit(x, max, sum); });
  for (int offset = 16; offset > 0; offset /= 2)
    mergeLogits(__shfl_down_sync(0xffffffffu, max, offset),
                __shfl_down_sync(0xffffffffu, sum, offset), max, sum);
  __shared__ float maxes[kLossMaxThreads / 32], sums[kLossMaxThreads / 32];
  __shared__ float2 result;
  if (threadIdx.x % 32 == 0) {
    maxes[threadIdx.x / 32] = max;
    sums[threadIdx.x / 32] = sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < blockDim.x / 32; ++w)
      mergeLogits(maxes[w], sums[w], max, sum);
    // NaN anywhere in the row leaves a NaN sum: the row's loss is NaN.
    result = float2{max, logf(sum)};
  }
  __syncthreads();
  return result;
}

__global__ void crossEntropyRowsKernel(const float *logits,
                                       const int64_t *labels, double *rowLoss,
                                       int64_t pitch, int64_t classes,
                                       int *bad) {
  int64_t r = blockIdx.x;
  int64_t label = labels[r];
  const float *row = logits + r * pitch;
  float2 lse = rowLogSumExp(row, classes, unalignedHead(row, row, classes));
  if (threadIdx.x != 0)
    return;
  if (label < 0 || label >= classes) {
    atomicExch(bad, 1);
    rowLoss[r] = NAN;
    return;
  }
  rowLoss[r] = double(lse.x) + double(lse.y) - double(row[label]);
}

__global__ void meanKernel(const double *values, int64_t n, float *result) {
  double sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    sum += values[i];
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    result[0] = float(sum / double(n));
}

__global__ void crossEntropyGradKernel(const float *logits,
                                       const int64_t *labels,
                                       const float *dloss, float *grad,
                                       int64_t rows, int64_t pitch,
                                       int64_t classes, int *bad) {
  int64_t r = blockIdx.x;
  int64_t label = labels[r];
  const float *row = logits + r * pitch;
  float *out = grad + r * pitch;
  int64_t head = unalignedHead(row, out, classes);
  float2 lse = rowLogSumExp(row, classes, head);
  if (label < 0 || label >= classes) {
    if (threadIdx.x == 0)
      atomicExch(bad, 1);
    return;
  }
  float scale = float(double(dloss[0]) / double(rows));
  auto value = [&](int64_t c, float x) {
    return (expf((x - lse.x) - lse.y) - (c == label ? 1.f : 0.f)) * scale;
  };
  for (int64_t c = threadIdx.x; c < head; c += blockDim.x)
    out[c] = value(c, row[c]);
  int64_t units = (classes - head) / 4;
  auto in4 = reinterpret_cast<const float4 *>(row + head);
  auto out4 = reinterpret_cast<float4 *>(out + head);
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    float4 v = in4[u];
    int64_t c = head + 4 * u;
    out4[u] = float4{value(c, v.x), value(c + 1, v.y), value(c + 2, v.z),
                     value(c + 3, v.w)};
  }
  for (int64_t c = head + 4 * units + threadIdx.x; c < classes; c += blockDim.x)
    out[c] = value(c, row[c]);
  for (int64_t c = classes + threadIdx.x; c < pitch; c += blockDim.x)
    out[c] = 0.f;
}

/// Threads per row: enough that each walks a few 16-byte units.
int lossThreads(int64_t classes) {
  int threads = 32;
  while (threads < kLossMaxThreads && threads * 16 < classes)
    threads *= 2;
  return threads;
}

//===----------------------------------------------------------------------===//
// Optimizer steps, in the order of operations of the CPU reference.
//===----------------------------------------------------------------------===//

/// SGD (with momentum where `buf` is set) on one element.
__device__ inline void sgdElement(float &param, float grad, float *buf,
                                  float lr, float momentum, float decay,
                                  bool hasDecay) {
  float g = grad;
  if (hasDecay)
    g += decay * param;
  if (buf) {
    g = *buf * momentum + g;
    *buf = g;
  }
  param = param - lr * g;
}

/// With Vec, 16 bytes of each tensor at a time (every pointer aligned);
/// then the elements past the last whole unit.
template <bool Vec>
__global__ void sgdKernel(float *__restrict__ param,
                          const float *__restrict__ grad,
                          float *__restrict__ buf, int64_t n, float lr,
                          float momentum, float decay, bool hasDecay) {
  int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x,
          stride = int64_t(gridDim.x) * blockDim.x, units = Vec ? n / 4 : 0;
  for (int64_t u = first; u < units; u += stride) {
    float4 p = reinterpret_cast<float4 *>(param)[u],
           g = reinterpret_cast<const float4 *>(grad)[u];
    float4 b = buf ? reinterpret_cast<float4 *>(buf)[u] : float4{};
    sgdElement(p.x, g.x, buf ? &b.x : nullptr, lr, momentum, decay, hasDecay);
    sgdElement(p.y, g.y, buf ? &b.y : nullptr, lr, momentum, decay, hasDecay);
    sgdElement(p.z, g.z, buf ? &b.z : nullptr, lr, momentum, decay, hasDecay);
    sgdElement(p.w, g.w, buf ? &b.w : nullptr, lr, momentum, decay, hasDecay);
    reinterpret_cast<float4 *>(param)[u] = p;
    if (buf)
      reinterpret_cast<float4 *>(buf)[u] = b;
  }
  for (int64_t i = 4 * units + first; i < n; i += stride)
    sgdElement(param[i], grad[i], buf ? buf + i : nullptr, lr, momentum, decay,
               hasDecay);
}

/// AdamW's constants for one step: the bias corrections in double, once
/// per block (a double pow per thread cost more than the step's memory
/// traffic).
struct AdamWStep {
  float size, corr, decay, b1, b2, c2, eps;

  __device__ void element(float &param, float grad, float &m, float &v) const {
    float mi = m + b1 * (grad - m);
    float vi = v * b2 + c2 * grad * grad;
    float denom = sqrtf(vi) / corr + eps;
    m = mi;
    v = vi;
    param = param * decay - size * (mi / denom);
  }
};

template <bool Vec>
__global__ void adamWKernel(float *__restrict__ param,
                            const float *__restrict__ grad,
                            float *__restrict__ m, float *__restrict__ v,
                            const int64_t *step, int64_t n, AdamWParams p) {
  __shared__ float corrections[2];
  if (threadIdx.x == 0) {
    double t = double(step[0]) + 1;
    corrections[0] = float(p.lr / (1 - pow(p.beta1, t)));
    corrections[1] = float(sqrt(1 - pow(p.beta2, t)));
  }
  __syncthreads();
  AdamWStep a{
      corrections[0],     corrections[1], float(1 - p.lr * p.weightDecay),
      float(1 - p.beta1), float(p.beta2), float(1 - p.beta2),
      float(p.eps)};
  int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x,
          stride = int64_t(gridDim.x) * blockDim.x, units = Vec ? n / 4 : 0;
  for (int64_t u = first; u < units; u += stride) {
    float4 pu = reinterpret_cast<float4 *>(param)[u],
           gu = reinterpret_cast<const float4 *>(grad)[u],
           mu = reinterpret_cast<float4 *>(m)[u],
           vu = reinterpret_cast<float4 *>(v)[u];
    a.element(pu.x, gu.x, mu.x, vu.x);
    a.element(pu.y, gu.y, mu.y, vu.y);
    a.element(pu.z, gu.z, mu.z, vu.z);
    a.element(pu.w, gu.w, mu.w, vu.w);
    reinterpret_cast<float4 *>(param)[u] = pu;
    reinterpret_cast<float4 *>(m)[u] = mu;
    reinterpret_cast<float4 *>(v)[u] = vu;
  }
  for (int64_t i = 4 * units + first; i < n; i += stride)
    a.element(param[i], grad[i], m[i], v[i]);
}

__global__ void countStepKernel(int64_t *step) { step[0] += 1; }

/// One thread per four elements: one Philox draw. Step and seed are read
/// on the device, so a captured step draws new masks at each replay.
__global__ void dropoutKernel(const float *x, float *y, int64_t n,
                              int64_t offset, const int64_t *step,
                              const int64_t *seed, int64_t stream,
                              uint32_t threshold, float scale) {
  // Groups of four of the whole batch's elements that [offset, offset + n)
  // touches.
  int64_t first = offset / 4, groups = (offset + n + 3) / 4 - first;
  int64_t st = *step, sd = *seed;
  // Whole groups at a 16-byte-aligned start (arena buffers are): four
  // elements per load and store.
  if (offset % 4 == 0 && n % 4 == 0 &&
      reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(y) % 16 == 0) {
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    float4 *y4 = reinterpret_cast<float4 *>(y);
    for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groups;
         g += int64_t(gridDim.x) * blockDim.x) {
      philox::Words r =
          philox::dropoutWords(uint64_t(first + g), stream, st, sd);
      float4 v = x4[g];
      v.x = philox::dropoutKeeps(r.w[0], threshold) ? v.x * scale : 0.0f;
      v.y = philox::dropoutKeeps(r.w[1], threshold) ? v.y * scale : 0.0f;
      v.z = philox::dropoutKeeps(r.w[2], threshold) ? v.z * scale : 0.0f;
      v.w = philox::dropoutKeeps(r.w[3], threshold) ? v.w * scale : 0.0f;
      y4[g] = v;
    }
    return;
  }
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groups;
       g += int64_t(gridDim.x) * blockDim.x) {
    philox::Words r = philox::dropoutWords(uint64_t(first + g), stream, st, sd);
    for (int j = 0; j < 4; ++j) {
      int64_t i = (first + g) * 4 + j - offset;
      if (i >= 0 && i < n)
        y[i] = philox::dropoutKeeps(r.w[j], threshold) ? x[i] * scale : 0.0f;
    }
  }
}

//===----------------------------------------------------------------------===//
// Layer normalization's gradient. A pass over the rows computes each row's
// statistics again (as layer_norm does), the input's gradient, and stores
// the row's mean and 1/std; a pass over the columns sums the scale's and
// bias's gradients over shares of the rows (as batch norm's channels-last
// sums do), and a warp per column adds the shares.
//===----------------------------------------------------------------------===//

/// Rows of up to 32 x 4 x kLayerNormGradChunks elements, a multiple of
/// 128: a warp per row holding x and dy in registers (16-byte loads), the
/// statistics as layerNormRowsKernel computes them.
constexpr int kLayerNormGradChunks = 8;
__global__ void layerNormGradRowsKernel(const float *dy, const float *x,
                                        const float *scale, const float *addend,
                                        float *dx, float2 *rowStats,
                                        int64_t rows, int64_t cols, float eps) {
  int lane = threadIdx.x % 32;
  int chunks = static_cast<int>(cols / 128);
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  const float4 *scale4 = reinterpret_cast<const float4 *>(scale);
  for (int64_t r = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
       r < rows; r += warps) {
    const float4 *xr = reinterpret_cast<const float4 *>(x + r * cols);
    const float4 *gr = reinterpret_cast<const float4 *>(dy + r * cols);
    float4 v[kLayerNormGradChunks], g[kLayerNormGradChunks];
#pragma unroll
    for (int j = 0; j < kLayerNormGradChunks; ++j)
      if (j < chunks)
        v[j] = xr[j * 32 + lane];
    // The forward kernel's statistics, bit for bit.
    float mean, inv;
    warpRowStatistics(v, chunks, cols, eps, mean, inv);
    // v becomes x^ and g the gradient times the scale.
    float sumG = 0.f, sumGx = 0.f;
#pragma unroll
    for (int j = 0; j < kLayerNormGradChunks; ++j)
      if (j < chunks) {
        float4 d = gr[j * 32 + lane], k = scale4[j * 32 + lane];
        v[j] = make_float4((v[j].x - mean) * inv, (v[j].y - mean) * inv,
                           (v[j].z - mean) * inv, (v[j].w - mean) * inv);
        g[j] = make_float4(d.x * k.x, d.y * k.y, d.z * k.z, d.w * k.w);
        sumG += g[j].x + g[j].y + g[j].z + g[j].w;
        sumGx += g[j].x * v[j].x + g[j].y * v[j].y + g[j].z * v[j].z +
                 g[j].w * v[j].w;
      }
    for (int o = 16; o > 0; o /= 2) {
      sumG += __shfl_xor_sync(0xffffffffu, sumG, o);
      sumGx += __shfl_xor_sync(0xffffffffu, sumGx, o);
    }
    float meanG = sumG / float(cols), meanGx = sumGx / float(cols);
    float4 *dxr = reinterpret_cast<float4 *>(dx + r * cols);
    const float4 *ar = reinterpret_cast<const float4 *>(addend + r * cols);
#pragma unroll
    for (int j = 0; j < kLayerNormGradChunks; ++j)
      if (j < chunks) {
        float4 d = make_float4(inv * (g[j].x - meanG - v[j].x * meanGx),
                               inv * (g[j].y - meanG - v[j].y * meanGx),
                               inv * (g[j].z - meanG - v[j].z * meanGx),
                               inv * (g[j].w - meanG - v[j].w * meanGx));
        if (addend) {
          float4 a = ar[j * 32 + lane];
          d = make_float4(d.x + a.x, d.y + a.y, d.z + a.z, d.w + a.w);
        }
        dxr[j * 32 + lane] = d;
      }
    if (lane == 0)
      rowStats[r] = make_float2(mean, inv);
  }
}

/// The same for any row length: a block per row, its sums in double.
__global__ void layerNormGradKernel(const float *dy, const float *x,
                                    const float *scale, const float *addend,
                                    float *dx, float2 *rowStats, int64_t cols,
                                    float eps) {
  __shared__ double shared[3];
  int64_t r = blockIdx.x;
  const float *xr = x + r * cols, *gr = dy + r * cols;
  auto everyone = [&](double v, int slot) {
    v = blockSum(v);
    if (threadIdx.x == 0)
      shared[slot] = v;
    __syncthreads();
    return shared[slot];
  };
  double sum = 0;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
    sum += xr[i];
  float mean = float(everyone(sum, 0) / double(cols));
  double sq = 0;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
    sq += double(xr[i] - mean) * double(xr[i] - mean);
  float inv = rsqrtf(float(everyone(sq, 1) / double(cols)) + eps);
  double sumG = 0, sumGx = 0;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    float g = gr[i] * scale[i];
    sumG += g;
    sumGx += double(g) * double((xr[i] - mean) * inv);
  }
  float meanG = float(everyone(sumG, 2) / double(cols));
  float meanGx = float(everyone(sumGx, 0) / double(cols));
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    float d = inv * (gr[i] * scale[i] - meanG - (xr[i] - mean) * inv * meanGx);
    dx[r * cols + i] = addend ? d + addend[r * cols + i] : d;
  }
  if (threadIdx.x == 0)
    rowStats[r] = make_float2(mean, inv);
}

/// Sums of dy x^ and dy of 32 columns over a share of the rows, 8 rows at a
/// time, as batchNormPartialLastKernel.
__global__ void layerNormGradColumnsKernel(const float *dy, const float *x,
                                           const float2 *rowStats,
                                           double *partial, int64_t rows,
                                           int64_t cols, int64_t shares) {
  int64_t share = blockIdx.x,
          col = int64_t(blockIdx.y) * kLastChannels + threadIdx.x;
  int64_t first = share * rows / shares, last = (share + 1) * rows / shares;
  double a = 0, b = 0;
  if (col < cols) {
#pragma unroll 4
    for (int64_t r = first + threadIdx.y; r < last; r += kLastRows) {
      float2 st = rowStats[r];
      float d = dy[r * cols + col];
      a += d * ((x[r * cols + col] - st.x) * st.y);
      b += d;
    }
  }
  storeColumnPartials(a, b, col, cols, share, shares, partial);
}

__global__ void layerNormGradFinishKernel(const double *partial, float *dscale,
                                          float *dbias, ChannelShape s,
                                          int64_t shares) {
  int64_t col;
  double a, b;
  if (!channelSums(partial, s, shares, col, a, b) || threadIdx.x % 32 != 0)
    return;
  dscale[col] = float(a);
  dbias[col] = float(b);
}

/// Row shares of the column pass: about 1024 blocks, as batch norm's.
int64_t layerNormGradShares(int64_t rows, int64_t cols) {
  return batchShares(ChannelShape{1, cols, rows, true});
}

} // namespace

size_t poolGradScratchBytes(const PoolParams &p) {
  return p.isMax ? size_t(p.planes * p.out[0] * p.out[1] * p.out[2]) *
                       sizeof(int32_t)
                 : 0;
}

cudaError_t launchPoolGrad(const float *dy, const float *x, float *dx,
                           void *scratch, const PoolParams &p, cudaStream_t s) {
  int64_t inputs = p.planes * p.in[0] * p.in[1] * p.in[2];
  int64_t outputs = p.planes * p.out[0] * p.out[1] * p.out[2];
  if (inputs == 0)
    return cudaSuccess;
  auto *arg = static_cast<int32_t *>(scratch);
  // Signed 32 bits where they hold every index and window coordinate.
  bool narrow =
      std::max(inputs, outputs) < (int64_t(1) << 30) && windowFits32(p);
  // Four channels a thread, channels last: one split of the index and
  // vector loads for all four.
  if (narrow && p.channelsLast % 4 == 0 && p.channelsLast > 0 &&
      aligned16(dy) && aligned16(x) && aligned16(dx) && aligned16(arg))
    return launchPoolGradIn<int32_t, 4>(dy, x, dx, arg, p, inputs, outputs, s);
  if (narrow)
    return launchPoolGradIn<int32_t, 1>(dy, x, dx, arg, p, inputs, outputs, s);
  return launchPoolGradIn<int64_t, 1>(dy, x, dx, arg, p, inputs, outputs, s);
}

size_t batchNormScratchBytes(const ChannelShape &shape) {
  return size_t(shape.c) *
         (batchShares(shape) * 2 * sizeof(double) + kGradCoefs * sizeof(float));
}

namespace {

/// The partial sums of both batch-norm launchers, in `scratch`: x and x^2,
/// or with `dy`, dy and dy * (x - mean). The per-channel coefficients
/// follow them in the scratch (`coef`).
struct BatchNormSums {
  int64_t shares;
  double *partial;
  float *coef;
};

BatchNormSums launchBatchNormSums(const float *x, const float *dy,
                                  const float *mean, const ReluMask &mask,
                                  void *scratch, const ChannelShape &shape,
                                  cudaStream_t s) {
  BatchNormSums sums{batchShares(shape), static_cast<double *>(scratch),
                     nullptr};
  sums.coef =
      reinterpret_cast<float *>(sums.partial + shape.c * sums.shares * 2);
  dim3 lastGrid(unsigned(sums.shares),
                unsigned((shape.c + kLastChannels - 1) / kLastChannels)),
      lastBlock(kLastChannels, kLastRows),
      grid(unsigned(sums.shares), unsigned(shape.c));
  bool masked = mask.bias != nullptr;
  if (shape.last && masked)
    batchNormPartialLastKernel<true><<<lastGrid, lastBlock, 0, s>>>(
        x, dy, mean, mask, sums.partial, shape, sums.shares);
  else if (shape.last)
    batchNormPartialLastKernel<false><<<lastGrid, lastBlock, 0, s>>>(
        x, dy, mean, mask, sums.partial, shape, sums.shares);
  else if (masked)
    batchNormPartialKernel<true><<<grid, kBatchNormThreads, 0, s>>>(
        x, dy, mean, mask, sums.partial, shape, sums.shares);
  else
    batchNormPartialKernel<false><<<grid, kBatchNormThreads, 0, s>>>(
        x, dy, mean, mask, sums.partial, shape, sums.shares);
  return sums;
}

} // namespace

cudaError_t launchBatchNormTrain(const float *x, const float *scale,
                                 const float *bias, const float *addend,
                                 bool relu, float *y, float *mean, float *var,
                                 ChannelShape shape, double eps, void *scratch,
                                 cudaStream_t s) {
  if (shape.c == 0 || shape.n * shape.size == 0)
    return cudaSuccess;
  ReluMask noMask{nullptr, nullptr, nullptr, eps};
  BatchNormSums sums =
      launchBatchNormSums(x, nullptr, nullptr, noMask, scratch, shape, s);
  batchStatsFinishKernel<<<finishBlocks(shape), kFinishWarps * 32, 0, s>>>(
      sums.partial, scale, bias, mean, var, sums.coef, shape, sums.shares, eps);
  return launchBatchNormApply(
      {x, nullptr, mean, sums.coef, addend, relu, noMask}, y, shape, s);
}

cudaError_t launchBatchNormGrad(const float *dy, const float *x,
                                const float *scale, const float *mean,
                                const float *var, const float *reluBias,
                                float *dx, float *dscale, float *dbias,
                                ChannelShape shape, double eps, void *scratch,
                                cudaStream_t s) {
  if (shape.c == 0 || shape.n * shape.size == 0)
    return cudaSuccess;
  ReluMask mask{scale, reluBias, var, eps};
  BatchNormSums sums =
      launchBatchNormSums(x, dy, mean, mask, scratch, shape, s);
  batchNormGradFinishKernel<<<finishBlocks(shape), kFinishWarps * 32, 0, s>>>(
      sums.partial, scale, var, mask, dscale, dbias, sums.coef, shape,
      sums.shares, eps);
  return launchBatchNormApply({x, dy, mean, sums.coef, nullptr, false, mask},
                              dx, shape, s);
}

size_t layerNormGradScratchBytes(int64_t rows, int64_t cols) {
  return size_t(cols) * size_t(layerNormGradShares(rows, cols)) * 2 *
             sizeof(double) +
         size_t(rows) * sizeof(float2);
}

cudaError_t launchLayerNormGrad(const float *dy, const float *x,
                                const float *scale, const float *addend,
                                float *dx, float *dscale, float *dbias,
                                int64_t rows, int64_t cols, double eps,
                                void *scratch, cudaStream_t s) {
  if (cols == 0)
    return cudaSuccess;
  int64_t shares = layerNormGradShares(rows, cols);
  double *partial = static_cast<double *>(scratch);
  auto *rowStats = reinterpret_cast<float2 *>(partial + cols * shares * 2);
  if (rows > 0) {
    bool rowsFit = cols % 128 == 0 && cols <= 128 * kLayerNormGradChunks &&
                   aligned16(dy) && aligned16(x) && aligned16(scale) &&
                   aligned16(dx) && (!addend || aligned16(addend));
    if (rowsFit)
      layerNormGradRowsKernel<<<blocksFor(rows * 32), kThreads, 0, s>>>(
          dy, x, scale, addend, dx, rowStats, rows, cols, float(eps));
    else
      layerNormGradKernel<<<unsigned(rows), kThreads, 0, s>>>(
          dy, x, scale, addend, dx, rowStats, cols, float(eps));
  }
  dim3 grid(unsigned(shares),
            unsigned((cols + kLastChannels - 1) / kLastChannels)),
      block(kLastChannels, kLastRows);
  layerNormGradColumnsKernel<<<grid, block, 0, s>>>(dy, x, rowStats, partial,
                                                    rows, cols, shares);
  ChannelShape columns{1, cols, rows, true};
  layerNormGradFinishKernel<<<finishBlocks(columns), kFinishWarps * 32, 0, s>>>(
      partial, dscale, dbias, columns, shares);
  return cudaGetLastError();
}

cudaError_t launchRunningStats(float *runningMean, float *runningVar,
                               const float *mean, const float *var,
                               int64_t channels, double momentum, int64_t count,
                               cudaStream_t s) {
  runningStatsKernel<<<blocksFor(channels), kThreads, 0, s>>>(
      runningMean, runningVar, mean, var, channels, momentum,
      double(count) / double(count - 1));
  return cudaGetLastError();
}

cudaError_t launchCrossEntropy(const float *logits, const int64_t *labels,
                               double *rowLoss, float *loss, int64_t rows,
                               int64_t pitch, int64_t classes, int *bad,
                               cudaStream_t s) {
  if (rows == 0)
    return cudaSuccess;
  crossEntropyRowsKernel<<<rows, lossThreads(classes), 0, s>>>(
      logits, labels, rowLoss, pitch, classes, bad);
  meanKernel<<<1, kReduceThreads, 0, s>>>(rowLoss, rows, loss);
  return cudaGetLastError();
}

cudaError_t launchCrossEntropyGrad(const float *logits, const int64_t *labels,
                                   const float *dloss, float *grad,
                                   int64_t rows, int64_t pitch, int64_t classes,
                                   int *bad, cudaStream_t s) {
  if (rows == 0)
    return cudaSuccess;
  crossEntropyGradKernel<<<rows, lossThreads(classes), 0, s>>>(
      logits, labels, dloss, grad, rows, pitch, classes, bad);
  return cudaGetLastError();
}

namespace {
/// A dropout folded into softmax_grad: the gradient is read through the
/// dropout's mask, drawn as dropoutKernel draws it.
struct DropoutDraw {
  const int64_t *step = nullptr, *seed = nullptr;
  int64_t stream = 0, offset = 0;
  uint32_t threshold = 0;
  float scale = 1.f;
};

/// The dropped gradient of element e alone.
__device__ inline float droppedGrad(const DropoutDraw &d, int64_t st,
                                    int64_t sd, int64_t e, float g) {
  int64_t k = d.offset + e;
  philox::Words r = philox::dropoutWords(uint64_t(k / 4), d.stream, st, sd);
  return philox::dropoutKeeps(r.w[k % 4], d.threshold) ? g * d.scale : 0.0f;
}

/// The same for four elements from element e, a multiple of four past a
/// multiple-of-four offset: one draw.
__device__ inline float4 droppedGrad4(const DropoutDraw &d, int64_t st,
                                      int64_t sd, int64_t e, float4 g) {
  philox::Words r =
      philox::dropoutWords(uint64_t((d.offset + e) / 4), d.stream, st, sd);
  g.x = philox::dropoutKeeps(r.w[0], d.threshold) ? g.x * d.scale : 0.0f;
  g.y = philox::dropoutKeeps(r.w[1], d.threshold) ? g.y * d.scale : 0.0f;
  g.z = philox::dropoutKeeps(r.w[2], d.threshold) ? g.z * d.scale : 0.0f;
  g.w = philox::dropoutKeeps(r.w[3], d.threshold) ? g.w * d.scale : 0.0f;
  return g;
}

/// softmax_grad along the last axis: a warp per row reads the row's dot
/// product of dy and y, then (from L1, the row just read) writes
/// y * (dy - dot); 16 bytes a load where the rows allow. With Dropped, dy
/// is read through the folded dropout (its mask drawn twice, which costs
/// less than writing and reading the dropped gradient).
template <bool Wide, bool Dropped>
__global__ void softmaxGradLastKernel(const float *dy, const float *y,
                                      float *dx, int64_t rows, int64_t cols,
                                      DropoutDraw drop) {
  int64_t row = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  int lane = threadIdx.x & 31;
  // A warp's lanes share their row, so they leave together.
  if (row >= rows)
    return;
  int64_t base = row * cols;
  int64_t st = Dropped ? *drop.step : 0, sd = Dropped ? *drop.seed : 0;
  float dot = 0.f;
  // Rows up to 1024 wide (attention's) keep their gradient in registers
  // between the passes: read, and its mask drawn, once.
  constexpr int kUnits = 8;
  if (Wide && cols / 4 <= 32 * kUnits) {
    auto *dy4 = reinterpret_cast<const float4 *>(dy + base);
    auto *y4 = reinterpret_cast<const float4 *>(y + base);
    auto *dx4 = reinterpret_cast<float4 *>(dx + base);
    float4 kept[kUnits];
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      int64_t i = lane + 32 * u;
      if (i < cols / 4) {
        float4 g = dy4[i], p = y4[i];
        if constexpr (Dropped)
          g = droppedGrad4(drop, st, sd, base + 4 * i, g);
        kept[u] = g;
        dot += g.x * p.x + g.y * p.y + g.z * p.z + g.w * p.w;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2)
      dot += __shfl_xor_sync(0xffffffffu, dot, offset);
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      int64_t i = lane + 32 * u;
      if (i < cols / 4) {
        float4 g = kept[u], p = y4[i];
        dx4[i] = make_float4(p.x * (g.x - dot), p.y * (g.y - dot),
                             p.z * (g.z - dot), p.w * (g.w - dot));
      }
    }
    return;
  }
  if constexpr (Wide) {
    auto *dy4 = reinterpret_cast<const float4 *>(dy + base);
    auto *y4 = reinterpret_cast<const float4 *>(y + base);
    for (int64_t i = lane; i < cols / 4; i += 32) {
      float4 g = dy4[i], p = y4[i];
      if constexpr (Dropped)
        g = droppedGrad4(drop, st, sd, base + 4 * i, g);
      dot += g.x * p.x + g.y * p.y + g.z * p.z + g.w * p.w;
    }
  } else {
    for (int64_t i = lane; i < cols; i += 32) {
      float g = dy[base + i];
      if constexpr (Dropped)
        g = droppedGrad(drop, st, sd, base + i, g);
      dot += g * y[base + i];
    }
  }
  for (int offset = 16; offset > 0; offset /= 2)
    dot += __shfl_xor_sync(0xffffffffu, dot, offset);
  if constexpr (Wide) {
    auto *dy4 = reinterpret_cast<const float4 *>(dy + base);
    auto *y4 = reinterpret_cast<const float4 *>(y + base);
    auto *dx4 = reinterpret_cast<float4 *>(dx + base);
    for (int64_t i = lane; i < cols / 4; i += 32) {
      float4 g = dy4[i], p = y4[i];
      if constexpr (Dropped)
        g = droppedGrad4(drop, st, sd, base + 4 * i, g);
      dx4[i] = make_float4(p.x * (g.x - dot), p.y * (g.y - dot),
                           p.z * (g.z - dot), p.w * (g.w - dot));
    }
  } else {
    for (int64_t i = lane; i < cols; i += 32) {
      float g = dy[base + i];
      if constexpr (Dropped)
        g = droppedGrad(drop, st, sd, base + i, g);
      dx[base + i] = y[base + i] * (g - dot);
    }
  }
}

/// softmax_grad along another axis: a thread per (outer, inner) pair walks
/// the axis, neighbouring threads reading neighbouring addresses.
template <bool Dropped>
__global__ void softmaxGradStridedKernel(const float *dy, const float *y,
                                         float *dx, int64_t outer,
                                         int64_t count, int64_t inner,
                                         DropoutDraw drop) {
  int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (t >= outer * inner)
    return;
  int64_t st = Dropped ? *drop.step : 0, sd = Dropped ? *drop.seed : 0;
  int64_t base = (t / inner) * count * inner + t % inner;
  auto grad = [&](int64_t e) {
    float g = dy[e];
    if constexpr (Dropped)
      g = droppedGrad(drop, st, sd, e, g);
    return g;
  };
  float dot = 0.f;
  for (int64_t k = 0; k < count; ++k)
    dot += grad(base + k * inner) * y[base + k * inner];
  for (int64_t k = 0; k < count; ++k) {
    int64_t e = base + k * inner;
    dx[e] = y[e] * (grad(e) - dot);
  }
}

template <bool Dropped>
void launchSoftmaxGradAs(const float *dy, const float *y, float *dx,
                         int64_t outer, int64_t count, int64_t inner,
                         const DropoutDraw &drop, cudaStream_t s) {
  if (inner != 1) {
    softmaxGradStridedKernel<Dropped>
        <<<blocksFor(outer * inner), kThreads, 0, s>>>(dy, y, dx, outer, count,
                                                       inner, drop);
  } else if (count % 4 == 0 && drop.offset % 4 == 0 && aligned16(dy) &&
             aligned16(y) && aligned16(dx)) {
    softmaxGradLastKernel<true, Dropped>
        <<<blocksFor(outer * 32), kThreads, 0, s>>>(dy, y, dx, outer, count,
                                                    drop);
  } else {
    softmaxGradLastKernel<false, Dropped>
        <<<blocksFor(outer * 32), kThreads, 0, s>>>(dy, y, dx, outer, count,
                                                    drop);
  }
}
} // namespace

cudaError_t launchSoftmaxGrad(const float *dy, const float *y, float *dx,
                              int64_t outer, int64_t count, int64_t inner,
                              const SoftmaxGradDropout *dropout,
                              cudaStream_t s) {
  if (outer * count * inner == 0)
    return cudaSuccess;
  if (!dropout) {
    launchSoftmaxGradAs<false>(dy, y, dx, outer, count, inner, DropoutDraw(),
                               s);
  } else {
    DropoutDraw drop;
    drop.step = dropout->step;
    drop.seed = dropout->seed;
    drop.stream = dropout->stream;
    drop.offset = dropout->offset;
    drop.threshold = philox::dropoutThreshold(dropout->ratio);
    drop.scale = float(1.0 / (1.0 - dropout->ratio));
    launchSoftmaxGradAs<true>(dy, y, dx, outer, count, inner, drop, s);
  }
  return cudaGetLastError();
}

namespace {
/// An update's grid: a thread per 16 bytes, at most a few blocks per SM's
/// worth (each block first computes the step's constants).
int updateBlocks(int64_t n) { return std::min(blocksFor((n + 3) / 4), 2048); }
} // namespace

cudaError_t launchSgd(float *param, const float *grad, float *buf, int64_t n,
                      double lr, double momentum, double decay,
                      cudaStream_t s) {
  if (aligned16(param) && aligned16(grad) && (!buf || aligned16(buf)))
    sgdKernel<true><<<updateBlocks(n), kThreads, 0, s>>>(
        param, grad, buf, n, float(lr), float(momentum), float(decay),
        decay != 0);
  else
    sgdKernel<false><<<updateBlocks(n), kThreads, 0, s>>>(
        param, grad, buf, n, float(lr), float(momentum), float(decay),
        decay != 0);
  return cudaGetLastError();
}

cudaError_t launchAdamW(float *param, const float *grad, float *m, float *v,
                        const int64_t *step, int64_t n, const AdamWParams &p,
                        cudaStream_t s) {
  if (aligned16(param) && aligned16(grad) && aligned16(m) && aligned16(v))
    adamWKernel<true>
        <<<updateBlocks(n), kThreads, 0, s>>>(param, grad, m, v, step, n, p);
  else
    adamWKernel<false>
        <<<updateBlocks(n), kThreads, 0, s>>>(param, grad, m, v, step, n, p);
  return cudaGetLastError();
}

namespace {
struct MeanSources {
  const float *source[kMaxMeanSources];
};
} // namespace

__global__ void meanOfKernel(MeanSources in, int count, float *target,
                             int64_t n) {
  float divisor = float(count);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float sum = in.source[0][i];
    for (int k = 1; k < count; ++k)
      sum += in.source[k][i];
    target[i] = sum / divisor;
  }
}

cudaError_t launchMeanOf(const float *const *sources, int count, float *target,
                         int64_t n, cudaStream_t s) {
  if (count < 1 || count > kMaxMeanSources)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  MeanSources in{};
  for (int k = 0; k < count; ++k)
    in.source[k] = sources[k];
  meanOfKernel<<<blocksFor(n), kThreads, 0, s>>>(in, count, target, n);
  return cudaGetLastError();
}

cudaError_t launchDropout(const float *x, float *y, int64_t n, int64_t offset,
                          const int64_t *step, const int64_t *seed,
                          int64_t stream, double ratio, cudaStream_t s) {
  dropoutKernel<<<blocksFor((n + 3) / 4 + 1), kThreads, 0, s>>>(
      x, y, n, offset, step, seed, stream, philox::dropoutThreshold(ratio),
      float(1.0 / (1.0 - ratio)));
  return cudaGetLastError();
}

cudaError_t launchCountStep(int64_t *step, cudaStream_t s) {
  countStepKernel<<<1, 1, 0, s>>>(step);
  return cudaGetLastError();
}

} // namespace partc::runtime::cuda
