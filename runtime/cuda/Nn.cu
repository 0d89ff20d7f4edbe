//===- Nn.cu - Normalization, pooling, softmax and reduction kernels
//--------===//
//
// Batch, layer and RMS normalization, convolution epilogues, pooling,
// softmax and reductions.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/KernelUtils.cuh"
#include "runtime/kernels/ElementwiseOps.h"
#include "runtime/kernels/WindowTaps.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace partc::runtime::cuda {

namespace {

// Per-channel kernels: blockIdx.y walks the (image, channel) planes so that
// no thread divides by the plane size.
__global__ void batchNormKernel(const float *x, const float *scale,
                                const float *bias, const float *mean,
                                const float *var, float *y, int64_t c,
                                int64_t inner, float eps, int64_t first) {
  int64_t plane = first + blockIdx.y, ch = plane % c;
  float a = scale[ch] * rsqrtf(var[ch] + eps);
  float b = bias[ch] - mean[ch] * a;
  const float *xp = x + plane * inner;
  float *yp = y + plane * inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < inner;
       i += int64_t(gridDim.x) * blockDim.x)
    yp[i] = xp[i] * a + b;
}

__global__ void epilogueFirstKernel(float *y, const float *bias, const float *z,
                                    int64_t c, int64_t inner, int64_t first,
                                    bool relu) {
  int64_t plane = first + blockIdx.y;
  float b = bias ? bias[plane % c] : 0.f;
  float *yp = y + plane * inner;
  const float *zp = z ? z + plane * inner : nullptr;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < inner;
       i += int64_t(gridDim.x) * blockDim.x)
    yp[i] = maybeRelu(yp[i] + b + (zp ? zp[i] : 0.f), relu);
}

/// Channels last, four channels per thread: bias[i % c], addend[i].
__global__ void epilogueLastKernel(float4 *y, const float4 *bias,
                                   const float4 *z, int64_t n4, int64_t c4,
                                   bool relu) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n4;
       i += int64_t(gridDim.x) * blockDim.x) {
    float4 v = y[i];
    if (bias) {
      float4 b = bias[i % c4];
      v.x += b.x;
      v.y += b.y;
      v.z += b.z;
      v.w += b.w;
    }
    if (z) {
      float4 a = z[i];
      v.x += a.x;
      v.y += a.y;
      v.z += a.z;
      v.w += a.w;
    }
    v.x = maybeRelu(v.x, relu);
    v.y = maybeRelu(v.y, relu);
    v.z = maybeRelu(v.z, relu);
    v.w = maybeRelu(v.w, relu);
    y[i] = v;
  }
}

dim3 planeGrid(int64_t planes, int64_t inner) {
  int64_t x = (inner + kThreads - 1) / kThreads;
  return dim3(static_cast<unsigned>(x < 1 ? 1 : (x > 1024 ? 1024 : x)),
              static_cast<unsigned>(planes));
}

// Pooling accumulates one float, or four channels at once (float4).
__device__ inline float splat(float v, float) { return v; }
__device__ inline float4 splat(float v, float4) {
  return make_float4(v, v, v, v);
}
__device__ inline float combine(bool isMax, float a, float v) {
  return isMax ? ew::maxKeepNan(a, v) : a + v;
}
__device__ inline float4 combine(bool isMax, float4 a, float4 v) {
  return make_float4(combine(isMax, a.x, v.x), combine(isMax, a.y, v.y),
                     combine(isMax, a.z, v.z), combine(isMax, a.w, v.w));
}
__device__ inline float scaled(float a, float s) { return a * s; }
__device__ inline float4 scaled(float4 a, float s) {
  return make_float4(a.x * s, a.y * s, a.z * s, a.w * s);
}

/// One pooling window: `x` points at the window's plane (channels first) or
/// at its channel group (channels last); spatial neighbours are `step`
/// apart. `I` is the index type: 32 bits where the tensors allow.
template <bool IsMax, typename I, typename V, typename Load>
__device__ V poolWindow(Load x, I step, const PoolParams &p, I od, I oh, I ow) {
  V acc = splat(IsMax ? -FLT_MAX : 0.f, V());
  const I inH = I(p.in[1]), inW = I(p.in[2]);
  const I out[3] = {od, oh, ow};
  I start[3];
  TapRange<I> taps[3];
  // Only the taps in the input are visited (WindowTaps.h); the padded ones
  // are counted. In float: three dimensions of them may exceed 2^63.
  float inside = 1.f, padded = 1.f;
  for (int d = 0; d < 3; ++d) {
    start[d] = out[d] * I(p.stride[d]) - I(p.padBegin[d]);
    taps[d] = inputTaps(start[d], I(p.kernel[d]), I(p.dilation[d]), I(p.in[d]));
    inside *= float(taps[d].last - taps[d].first);
    padded *= float(paddedTaps(start[d], I(p.kernel[d]), I(p.dilation[d]),
                               I(p.in[d]), I(p.padEnd[d])));
  }
  for (I kd = taps[0].first; kd < taps[0].last; ++kd) {
    I id = start[0] + kd * I(p.dilation[0]);
    for (I kh = taps[1].first; kh < taps[1].last; ++kh) {
      I ih = start[1] + kh * I(p.dilation[1]);
      for (I kw = taps[2].first; kw < taps[2].last; ++kw) {
        I iw = start[2] + kw * I(p.dilation[2]);
        acc = combine(IsMax, acc, x(((id * inH + ih) * inW + iw) * step));
      }
    }
  }
  if (IsMax)
    return inside > 0.f ? acc : splat(-INFINITY, V());
  float div = p.countIncludePad ? padded : inside;
  return div > 0.f ? scaled(acc, 1.f / div) : splat(0.f, V());
}

/// Channels first: one thread per output element.
template <bool IsMax, typename I>
__global__ void poolKernel(const float *x, float *y, PoolParams p, int64_t n) {
  const I outD = I(p.out[0]), outH = I(p.out[1]), outW = I(p.out[2]);
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    I i = I(k);
    I ow = i % outW, oh = (i / outW) % outH, od = (i / (outW * outH)) % outD,
      plane = i / (outW * outH * outD);
    const float *xp = x + plane * I(p.in[0] * p.in[1] * p.in[2]);
    y[i] = poolWindow<IsMax, I, float>([xp](I j) { return xp[j]; }, I(1), p, od,
                                       oh, ow);
  }
}

/// Channels last: consecutive threads take consecutive units (a channel, or
/// a group of four) of one output position, so reads and writes are
/// coalesced. `widen` turns a unit as stored into the window's type Acc,
/// `store(i, acc)` writes output unit i.
template <bool IsMax, typename I, typename Acc, typename Unit, typename Widen,
          typename Store>
__device__ void poolLast(const Unit *x, PoolParams p, I units, int64_t n,
                         Widen widen, Store store) {
  const I outD = I(p.out[0]), outH = I(p.out[1]), outW = I(p.out[2]);
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    I i = I(k);
    I unit = i % units, pos = i / units;
    I ow = pos % outW, oh = (pos / outW) % outH,
      od = (pos / (outW * outH)) % outD, b = pos / (outW * outH * outD);
    const Unit *xp = x + b * I(p.in[0] * p.in[1] * p.in[2]) * units + unit;
    store(i, poolWindow<IsMax, I, Acc>([&](I j) { return widen(xp[j]); }, units,
                                       p, od, oh, ow));
  }
}

template <bool IsMax, typename I, typename V>
__global__ void poolLastKernel(const V *x, V *y, PoolParams p, I groups,
                               int64_t n) {
  poolLast<IsMax, I, V>(
      x, p, groups, n, [](V v) { return v; }, [y](I i, V v) { y[i] = v; });
}

/// Channels last on bf16 or f16 values (`element`), four channels (8
/// bytes) per thread: the window in f32, the results rounded once.
template <bool IsMax, typename I>
__global__ void poolLast16x4Kernel(const unsigned short *x, unsigned short *y,
                                   PoolParams p, I groups, int64_t n,
                                   unsigned char element) {
  poolLast<IsMax, I, float4>(
      reinterpret_cast<const uint2 *>(x), p, groups, n,
      [element](uint2 u) {
        return make_float4(
            wideFrom16(u.x & 0xffff, element), wideFrom16(u.x >> 16, element),
            wideFrom16(u.y & 0xffff, element), wideFrom16(u.y >> 16, element));
      },
      [y, element](I i, float4 v) {
        uint2 out;
        out.x = narrowPairTo16(v.x, v.y, element);
        out.y = narrowPairTo16(v.z, v.w, element);
        reinterpret_cast<uint2 *>(y)[i] = out;
      });
}

/// The same a channel per thread, for any channel count.
template <bool IsMax, typename I>
__global__ void poolLast16Kernel(const unsigned short *x, unsigned short *y,
                                 PoolParams p, I channels, int64_t n,
                                 unsigned char element) {
  poolLast<IsMax, I, float>(
      x, p, channels, n,
      [element](unsigned short h) { return wideFrom16(h, element); },
      [y, element](I i, float v) { y[i] = narrowTo16(v, element); });
}

/// One block per plane; a shared-memory tree reduction.
__global__ void globalPoolKernel(const float *x, float *y, int64_t size,
                                 bool isMax) {
  __shared__ float partial[kThreads];
  const float *xp = x + blockIdx.x * size;
  float acc = isMax ? -FLT_MAX : 0.f;
  for (int64_t i = threadIdx.x; i < size; i += blockDim.x)
    acc = isMax ? ew::maxKeepNan(acc, xp[i]) : acc + xp[i];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      partial[threadIdx.x] =
          isMax ? ew::maxKeepNan(partial[threadIdx.x], partial[threadIdx.x + s])
                : partial[threadIdx.x] + partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    y[blockIdx.x] = isMax ? partial[0] : partial[0] / float(size);
}

/// One thread per (outer, inner) row along the axis.
__device__ inline float zeroNan(float v, bool nanToZero) {
  return nanToZero && isnan(v) ? 0.f : v;
}

/// The bias of the row whose first element is input element `first`
/// (`narrow`: the input's indices fit 32 bits).
__device__ inline const float *softmaxBiasRow(const SoftmaxBias &bias,
                                              int64_t first, bool narrow) {
  return bias.data ? bias.data + offsetOf(bias.elements, 0, first, narrow)
                   : nullptr;
}

__global__ void softmaxKernel(const float *x, float *y, int64_t outer,
                              int64_t axis, int64_t inner, bool log,
                              bool nanToZero, SoftmaxBias bias) {
  int64_t rows = outer * inner;
  bool narrow = narrowIndex(rows * axis);
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x) {
    int64_t o = r / inner, in = r % inner;
    int64_t first = o * axis * inner + in;
    const float *xp = x + first;
    float *yp = y + first;
    // x[a] plus the bias, as the add fused into the softmax computed it.
    auto at = [&](int64_t a) {
      float v = xp[a * inner];
      if (bias.data)
        v += bias.data[offsetOf(bias.elements, 0, first + a * inner, narrow)];
      return v;
    };
    float m = -INFINITY;
    for (int64_t a = 0; a < axis; ++a)
      m = fmaxf(m, at(a));
    float sum = 0.f;
    for (int64_t a = 0; a < axis; ++a)
      sum += expf(at(a) - m);
    for (int64_t a = 0; a < axis; ++a) {
      float v = at(a) - m;
      yp[a * inner] = zeroNan(log ? v - logf(sum) : expf(v) / sum, nanToZero);
    }
  }
}

/// Softmax over contiguous rows (the last axis): a warp per row, so that a
/// warp's loads are coalesced; the row is read three times, from cache
/// after the first.
__global__ void softmaxRowsKernel(const float *x, float *y, int64_t rows,
                                  int64_t cols, bool log, bool nanToZero,
                                  SoftmaxBias bias) {
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  bool narrow = narrowIndex(rows * cols);
  for (int64_t r = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
       r < rows; r += warps) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    const float *br = softmaxBiasRow(bias, r * cols, narrow);
    auto at = [&](int64_t c) {
      return br ? xr[c] + br[c * bias.columnStride] : xr[c];
    };
    float m = -INFINITY;
    for (int64_t c = lane; c < cols; c += 32)
      m = fmaxf(m, at(c));
    for (int o = 16; o > 0; o /= 2)
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = 0.f;
    for (int64_t c = lane; c < cols; c += 32)
      sum += expf(at(c) - m);
    for (int o = 16; o > 0; o /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float logSum = logf(sum);
    for (int64_t c = lane; c < cols; c += 32) {
      float v = at(c) - m;
      yr[c] = zeroNan(log ? v - logSum : expf(v) / sum, nanToZero);
    }
  }
}

/// Softmax over contiguous rows of at most 32 x PerLane elements: a warp
/// per row holding the row in registers (lane l has elements l, l + 32,
/// ...), so that it is read once; the bias is added as it is loaded.
constexpr int kSoftmaxPerLane = 4;
template <int PerLane>
__global__ void softmaxRowsInRegisters(const float *x, float *y, int64_t rows,
                                       int cols, bool log, bool nanToZero,
                                       SoftmaxBias bias) {
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  bool narrow = narrowIndex(rows * cols);
  for (int64_t r = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
       r < rows; r += warps) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    const float *br = softmaxBiasRow(bias, r * cols, narrow);
    float v[PerLane];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < PerLane; ++k) {
      int c = lane + 32 * k;
      v[k] = -INFINITY;
      if (c < cols) {
        v[k] = br ? xr[c] + br[c * bias.columnStride] : xr[c];
        m = fmaxf(m, v[k]);
      }
    }
    for (int o = 16; o > 0; o /= 2)
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < PerLane; ++k)
      if (lane + 32 * k < cols) {
        // Softmax keeps exp(v - m); log-softmax keeps v - m.
        float e = expf(v[k] - m);
        sum += e;
        v[k] = log ? v[k] - m : e;
      }
    for (int o = 16; o > 0; o /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float logSum = logf(sum);
#pragma unroll
    for (int k = 0; k < PerLane; ++k) {
      int c = lane + 32 * k;
      if (c < cols)
        yr[c] = zeroNan(log ? v[k] - logSum : v[k] / sum, nanToZero);
    }
  }
}

/// Softmax over contiguous rows of 4 x 32 x Chunks elements at most, a
/// multiple of four: a warp per row, each lane holding its 16-byte units
/// (l, l + 32, ...) in registers, so that the row is read once, in
/// 16-byte loads. The bias comes in 16-byte loads too where it is
/// contiguous along the row and aligned, else element by element.
template <int Chunks>
__global__ void softmaxRowsVectorized(const float *x, float *y, int64_t rows,
                                      int cols, bool log, bool nanToZero,
                                      SoftmaxBias bias) {
  int lane = threadIdx.x % 32;
  int units = cols / 4;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  bool narrow = narrowIndex(rows * cols);
  for (int64_t r = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
       r < rows; r += warps) {
    const float4 *xr = reinterpret_cast<const float4 *>(x + r * cols);
    float4 *yr = reinterpret_cast<float4 *>(y + r * cols);
    const float *br = softmaxBiasRow(bias, r * cols, narrow);
    bool biasVectors = br && bias.columnStride == 1 &&
                       reinterpret_cast<uintptr_t>(br) % 16 == 0; // per row
    float4 v[Chunks];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < Chunks; ++k) {
      int u = lane + 32 * k;
      v[k] = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
      if (u < units) {
        v[k] = xr[u];
        if (biasVectors) {
          float4 b = reinterpret_cast<const float4 *>(br)[u];
          v[k].x += b.x, v[k].y += b.y, v[k].z += b.z, v[k].w += b.w;
        } else if (br) {
          int64_t c = 4 * int64_t(u) * bias.columnStride;
          v[k].x += br[c];
          v[k].y += br[c + bias.columnStride];
          v[k].z += br[c + 2 * bias.columnStride];
          v[k].w += br[c + 3 * bias.columnStride];
        }
        m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
      }
    }
    for (int o = 16; o > 0; o /= 2)
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = 0.f;
    // Softmax keeps exp(v - m); log-softmax keeps v - m.
    auto keep = [&](float &e) {
      float shifted = e - m, ex = expf(shifted);
      sum += ex;
      e = log ? shifted : ex;
    };
#pragma unroll
    for (int k = 0; k < Chunks; ++k)
      if (lane + 32 * k < units) {
        keep(v[k].x);
        keep(v[k].y);
        keep(v[k].z);
        keep(v[k].w);
      }
    for (int o = 16; o > 0; o /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float logSum = logf(sum), inverse = 1.f / sum;
    auto out = [&](float e) {
      return zeroNan(log ? e - logSum : e * inverse, nanToZero);
    };
#pragma unroll
    for (int k = 0; k < Chunks; ++k) {
      int u = lane + 32 * k;
      if (u < units)
        yr[u] = make_float4(out(v[k].x), out(v[k].y), out(v[k].z), out(v[k].w));
    }
  }
}

/// RMS normalization, a warp per row: the sum of squares by shuffles, then
/// a second pass over the row (from cache) to scale it. The scale has
/// `scaleCount` elements, 1 or cols (none where null); with Vec, rows are
/// read 16 bytes at a time (cols a multiple of 4, rows aligned).
template <bool Vec>
__global__ void rmsNormRowsKernel(const float *x, const float *scale, float *y,
                                  int64_t rows, int64_t cols,
                                  int64_t scaleCount, float eps) {
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  int64_t units = Vec ? cols / 4 : cols;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
       r < rows; r += warps) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    float sum = 0.f;
    for (int64_t u = lane; u < units; u += 32) {
      if constexpr (Vec) {
        float4 v = reinterpret_cast<const float4 *>(xr)[u];
        sum += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      } else {
        sum += xr[u] * xr[u];
      }
    }
    for (int o = 16; o > 0; o /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float inv = 1.f / sqrtf(sum / float(cols) + eps);
    auto scaled = [&](float v, int64_t c) {
      v *= inv;
      return scale ? v * scale[scaleCount == 1 ? 0 : c] : v;
    };
    for (int64_t u = lane; u < units; u += 32) {
      if constexpr (Vec) {
        float4 v = reinterpret_cast<const float4 *>(xr)[u];
        reinterpret_cast<float4 *>(yr)[u] =
            make_float4(scaled(v.x, 4 * u), scaled(v.y, 4 * u + 1),
                        scaled(v.z, 4 * u + 2), scaled(v.w, 4 * u + 3));
      } else {
        yr[u] = scaled(xr[u], u);
      }
    }
  }
}

/// Rows of at most 32 x 4 x kMaxChunks elements, a multiple of 128: a warp
/// per row holding its row in registers (16-byte loads), mean and variance
/// by shuffles, the variance about the mean.
constexpr int kLayerNormChunks = 8;
__global__ void layerNormRowsKernel(const float *x, const float *scale,
                                    const float *bias, float *y, int64_t rows,
                                    int64_t cols, float eps) {
  int lane = threadIdx.x % 32;
  int chunks = static_cast<int>(cols / 128);
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
       r < rows; r += warps) {
    const float4 *xr = reinterpret_cast<const float4 *>(x + r * cols);
    float4 *yr = reinterpret_cast<float4 *>(y + r * cols);
    float4 v[kLayerNormChunks];
#pragma unroll
    for (int j = 0; j < kLayerNormChunks; ++j)
      if (j < chunks)
        v[j] = xr[j * 32 + lane];
    float mean, inv;
    warpRowStatistics(v, chunks, cols, eps, mean, inv);
#pragma unroll
    for (int j = 0; j < kLayerNormChunks; ++j)
      if (j < chunks) {
        int c4 = j * 32 + lane;
        float4 g = reinterpret_cast<const float4 *>(scale)[c4];
        float4 o = bias ? reinterpret_cast<const float4 *>(bias)[c4]
                        : make_float4(0.f, 0.f, 0.f, 0.f);
        yr[c4] = make_float4((v[j].x - mean) * inv * g.x + o.x,
                             (v[j].y - mean) * inv * g.y + o.y,
                             (v[j].z - mean) * inv * g.z + o.z,
                             (v[j].w - mean) * inv * g.w + o.w);
      }
  }
}

/// One block per row.
__global__ void layerNormKernel(const float *x, const float *scale,
                                const float *bias, float *y, int64_t cols,
                                int64_t scaleMod, int64_t biasMod, float eps) {
  __shared__ float s1[kThreads], s2[kThreads];
  const float *xr = x + blockIdx.x * cols;
  float *yr = y + blockIdx.x * cols;
  float a = 0.f, b = 0.f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    a += xr[i];
    b += xr[i] * xr[i];
  }
  s1[threadIdx.x] = a;
  s2[threadIdx.x] = b;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      s1[threadIdx.x] += s1[threadIdx.x + s];
      s2[threadIdx.x] += s2[threadIdx.x + s];
    }
    __syncthreads();
  }
  float mean = s1[0] / float(cols);
  float var = fmaxf(s2[0] / float(cols) - mean * mean, 0.f);
  float inv = rsqrtf(var + eps);
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    float v = (xr[i] - mean) * inv * scale[i % scaleMod];
    if (bias)
      v += bias[i % biasMod];
    yr[i] = v;
  }
}

__device__ inline float reduceInit(int op) {
  return op == 2 ? -INFINITY : op == 3 ? INFINITY : op == 4 ? 1.f : 0.f;
}

__device__ inline float reduceStep(int op, float acc, float v) {
  switch (op) {
  case 2:
    return ew::maxKeepNan(acc, v);
  case 3:
    return ew::minKeepNan(acc, v);
  case 4:
    return acc * v;
  default:
    return acc + v;
  }
}

/// Threads x of a block take consecutive outputs (consecutive addresses
/// where the kept dimensions are innermost); threads y split each output's
/// reduction, so that few outputs with long reductions (a global average
/// pool at a small batch) still fill the GPU, and combine in shared memory.
/// Element `i` of `base` (of FusedParams element type `e`) as f32, and
/// `v` stored there rounded to it.
__device__ inline float loadElement(const void *base, int64_t i,
                                    unsigned char e) {
  if (e == FusedParams::F32)
    return static_cast<const float *>(base)[i];
  return wideFrom16(static_cast<const unsigned short *>(base)[i], e);
}
__device__ inline void storeElement(void *base, int64_t i, float v,
                                    unsigned char e) {
  if (e == FusedParams::F32)
    static_cast<float *>(base)[i] = v;
  else
    static_cast<unsigned short *>(base)[i] = narrowTo16(v, e);
}

__global__ void reduceKernel(const void *x, void *y, int64_t outCount,
                             Strides keep, Strides reduced, int64_t reduceCount,
                             int op, unsigned char element) {
  extern __shared__ float partial[];
  bool narrowKeep = narrowIndex(outCount),
       narrowReduced = narrowIndex(reduceCount);
  int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  float acc = reduceInit(op);
  if (o < outCount) {
    int64_t base = offsetOf(keep, 0, o, narrowKeep);
    for (int64_t r = threadIdx.y; r < reduceCount; r += blockDim.y)
      acc = reduceStep(
          op, acc,
          loadElement(x, base + offsetOf(reduced, 0, r, narrowReduced),
                      element));
  }
  partial[threadIdx.y * blockDim.x + threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || o >= outCount)
    return;
  for (unsigned k = 1; k < blockDim.y; ++k)
    acc = reduceStep(op, acc, partial[k * blockDim.x + threadIdx.x]);
  storeElement(y, o, op == 1 ? acc / float(reduceCount) : acc, element);
}

/// W consecutive elements of `base` from element `i` (a multiple of W) as
/// f32: 16-byte loads (8 16-bit or 4 f32 values), 8-byte ones (4 16-bit),
/// or one at a time (W = 1).
template <int W>
__device__ __forceinline__ void loadRun(const void *base, int64_t i,
                                        unsigned char e, float (&v)[W]) {
  if constexpr (W == 1) {
    v[0] = loadElement(base, i, e);
  } else if (e == FusedParams::F32) {
    fusedLoadWideFrom<W>(static_cast<const float *>(base) + i, 0, e, v);
  } else {
    fusedLoadWideFrom<W>(static_cast<const unsigned short *>(base) + i, 0, e,
                         v);
  }
}

/// A reduction over the middle dimension of a contiguous [batch, rows,
/// cols] view: a global average pool of a channels-last map (rows are its
/// pixels, cols its channels), which the general kernel reads a few
/// channels at a time. Block (x, b) reduces rows [x * rowsPerChunk, ...)
/// of batch item b: its threads split into cols / W column groups of W
/// consecutive elements (one wide load) and blockDim / groups row phases,
/// so that a warp reads whole rows; the phases meet in shared memory in
/// order. With several chunks, the last block of an item to finish
/// (counted in `arrivals`, which it resets) combines the chunks' partials
/// in order, so that the result never depends on timing.
template <int W>
__global__ void reduceMiddleKernel(const void *x, void *y, float *partials,
                                   unsigned *arrivals, int64_t rows,
                                   int64_t cols, int64_t rowsPerChunk, int op,
                                   unsigned char element) {
  extern __shared__ float phasePartial[];
  __shared__ bool lastToArrive;
  int groups = static_cast<int>(cols / W);
  int phases = blockDim.x / groups;
  int group = threadIdx.x % groups, phase = threadIdx.x / groups;
  int64_t item = blockIdx.y;
  int64_t begin = blockIdx.x * rowsPerChunk;
  int64_t end = min(rows, begin + rowsPerChunk);
  if (phase < phases) {
    float acc[W];
#pragma unroll
    for (int i = 0; i < W; ++i)
      acc[i] = reduceInit(op);
    int64_t base = item * rows * cols + group * W;
#pragma unroll 4
    for (int64_t r = begin + phase; r < end; r += phases) {
      float v[W];
      loadRun<W>(x, base + r * cols, element, v);
#pragma unroll
      for (int i = 0; i < W; ++i)
        acc[i] = reduceStep(op, acc[i], v[i]);
    }
#pragma unroll
    for (int i = 0; i < W; ++i)
      phasePartial[phase * cols + group * W + i] = acc[i];
  }
  __syncthreads();
  auto finish = [&](float acc) { return op == 1 ? acc / float(rows) : acc; };
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float acc = phasePartial[c];
    for (int k = 1; k < phases; ++k)
      acc = reduceStep(op, acc, phasePartial[k * cols + c]);
    if (gridDim.x == 1)
      storeElement(y, item * cols + c, finish(acc), element);
    else
      partials[(item * gridDim.x + blockIdx.x) * cols + c] = acc;
  }
  if (gridDim.x == 1)
    return;
  // Publish the partials before counting this block in.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned before = atomicAdd(arrivals + item, 1u);
    lastToArrive = before == gridDim.x - 1;
    if (lastToArrive)
      arrivals[item] = 0;
  }
  __syncthreads();
  if (!lastToArrive)
    return;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float acc = reduceInit(op);
    for (unsigned k = 0; k < gridDim.x; ++k)
      acc = reduceStep(op, acc,
                       __ldcg(partials + (item * gridDim.x + k) * cols + c));
    storeElement(y, item * cols + c, finish(acc), element);
  }
}

/// The leading reduction for narrow matrices (a bias of 768 features has 24
/// column blocks of 32, a fifth of an H200's SMs), in row chunks: block
/// (x, y) reduces rows [y * rowsPerChunk, ...) of 32 * Width columns,
/// Width consecutive columns a thread, into row y of `partials`; the last
/// block of each column group to finish (counted in `arrivals`, which it
/// resets) combines the chunks in order, so the result never depends on
/// timing. One chunk writes y directly.
constexpr int kChunkRows = 16;

template <int Width>
__global__ void reduceLeadingChunkKernel(const float *x, float *partials,
                                         unsigned *arrivals, float *y,
                                         int64_t rows, int64_t cols,
                                         int64_t rowsPerChunk, int op) {
  __shared__ float partial[kChunkRows][32 * Width + 1];
  __shared__ bool lastToArrive;
  int64_t c = (blockIdx.x * int64_t(32) + threadIdx.x) * Width;
  int64_t begin = blockIdx.y * rowsPerChunk;
  int64_t end = min(rows, begin + rowsPerChunk);
  float acc[Width];
  for (int i = 0; i < Width; ++i)
    acc[i] = reduceInit(op);
  if (c < cols) {
#pragma unroll 4
    for (int64_t r = begin + threadIdx.y; r < end; r += kChunkRows) {
      if constexpr (Width == 4) {
        float4 v = *reinterpret_cast<const float4 *>(x + r * cols + c);
        acc[0] = reduceStep(op, acc[0], v.x);
        acc[1] = reduceStep(op, acc[1], v.y);
        acc[2] = reduceStep(op, acc[2], v.z);
        acc[3] = reduceStep(op, acc[3], v.w);
      } else {
        acc[0] = reduceStep(op, acc[0], x[r * cols + c]);
      }
    }
  }
  for (int i = 0; i < Width; ++i)
    partial[threadIdx.y][threadIdx.x * Width + i] = acc[i];
  __syncthreads();
  bool writer = threadIdx.y == 0 && c < cols;
  if (writer)
    for (int k = 1; k < kChunkRows; ++k)
      for (int i = 0; i < Width; ++i)
        acc[i] = reduceStep(op, acc[i], partial[k][threadIdx.x * Width + i]);
  if (gridDim.y == 1) {
    if (writer)
      for (int i = 0; i < Width; ++i)
        y[c + i] = op == 1 ? acc[i] / float(rows) : acc[i];
    return;
  }
  if (writer)
    for (int i = 0; i < Width; ++i)
      partials[blockIdx.y * cols + c + i] = acc[i];
  // Publish the partials before counting this block in.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    unsigned before = atomicAdd(arrivals + blockIdx.x, 1u);
    lastToArrive = before == gridDim.y - 1;
    if (lastToArrive)
      arrivals[blockIdx.x] = 0;
  }
  __syncthreads();
  if (!lastToArrive)
    return;
  // The whole block combines: thread row ty takes chunks ty, ty + 16, ...
  // (one chain of L2 reads per thread would leave this block waiting on
  // latency), then the rows meet in shared memory in order.
  for (int i = 0; i < Width; ++i)
    acc[i] = reduceInit(op);
  if (c < cols)
    for (unsigned k = threadIdx.y; k < gridDim.y; k += kChunkRows)
      for (int i = 0; i < Width; ++i)
        acc[i] = reduceStep(op, acc[i], __ldcg(partials + k * cols + c + i));
  for (int i = 0; i < Width; ++i)
    partial[threadIdx.y][threadIdx.x * Width + i] = acc[i];
  __syncthreads();
  if (!writer)
    return;
  for (int k = 1; k < kChunkRows; ++k)
    for (int i = 0; i < Width; ++i)
      acc[i] = reduceStep(op, acc[i], partial[k][threadIdx.x * Width + i]);
  for (int i = 0; i < Width; ++i)
    y[c + i] = op == 1 ? acc[i] / float(rows) : acc[i];
}

/// A reduction over the trailing dimensions of a contiguous [rows, cols]
/// view (layer norm's mean and variance, softmax's sums): a warp per row
/// whose lanes read consecutive elements and combine by shuffles.
__global__ void reduceTrailingKernel(const float *x, float *y, int64_t rows,
                                     int64_t cols, int op) {
  int64_t row = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  int lane = threadIdx.x & 31;
  // A warp's lanes share their row, so they leave together.
  if (row >= rows)
    return;
  const float *p = x + row * cols;
  float acc = reduceInit(op);
  for (int64_t i = lane; i < cols; i += 32)
    acc = reduceStep(op, acc, p[i]);
  for (int offset = 16; offset > 0; offset /= 2)
    acc = reduceStep(op, acc, __shfl_down_sync(0xffffffffu, acc, offset));
  if (lane == 0)
    y[row] = op == 1 ? acc / float(cols) : acc;
}

} // namespace

int64_t reduceLeadingColumnBlocks(int64_t cols) {
  int64_t width = cols % 4 == 0 ? 4 : 1;
  return (cols + 32 * width - 1) / (32 * width);
}

int64_t reduceLeadingChunks(int64_t rows, int64_t cols) {
  // Enough blocks to fill a GPU of ~130 SMs four times over, and at least
  // 128 rows a chunk (8 a thread) so that combining the chunks stays cheap.
  // Rounding the rows up to whole chunks may leave fewer chunks than asked.
  int64_t columnBlocks = reduceLeadingColumnBlocks(cols);
  int64_t chunks = std::max<int64_t>(
      std::min((512 + columnBlocks - 1) / columnBlocks, (rows + 127) / 128), 1);
  int64_t rowsPerChunk = (rows + chunks - 1) / chunks;
  return (rows + rowsPerChunk - 1) / rowsPerChunk;
}

cudaError_t launchReduceLeadingF32(const float *x, float *y, float *partials,
                                   unsigned *arrivals, int64_t rows,
                                   int64_t cols, int op, cudaStream_t s) {
  int64_t chunks = reduceLeadingChunks(rows, cols);
  int64_t rowsPerChunk = (rows + chunks - 1) / chunks;
  // A misaligned view takes one column a thread: more column blocks than
  // `arrivals` counts for the wide layout, so it runs unchunked.
  bool wide = cols % 4 == 0 && aligned16(x);
  if (cols % 4 == 0 && !wide) {
    chunks = 1;
    rowsPerChunk = rows;
  }
  int64_t width = wide ? 4 : 1;
  dim3 grid(static_cast<unsigned>((cols + 32 * width - 1) / (32 * width)),
            static_cast<unsigned>(chunks));
  if (wide)
    reduceLeadingChunkKernel<4><<<grid, dim3(32, kChunkRows), 0, s>>>(
        x, partials, arrivals, y, rows, cols, rowsPerChunk, op);
  else
    reduceLeadingChunkKernel<1><<<grid, dim3(32, kChunkRows), 0, s>>>(
        x, partials, arrivals, y, rows, cols, rowsPerChunk, op);
  return cudaGetLastError();
}

cudaError_t launchReduceTrailingF32(const float *x, float *y, int64_t rows,
                                    int64_t cols, int op, cudaStream_t s) {
  reduceTrailingKernel<<<blocksFor(rows * 32), kThreads, 0, s>>>(x, y, rows,
                                                                 cols, op);
  return cudaGetLastError();
}

cudaError_t launchBatchNorm(const float *x, const float *scale,
                            const float *bias, const float *mean,
                            const float *var, float *y, int64_t n, int64_t c,
                            int64_t inner, float eps, cudaStream_t s) {
  if (n == 0)
    return cudaSuccess;
  // gridDim.y is limited to 65535 planes a launch.
  int64_t planes = n / inner, chunk = 65535;
  for (int64_t p = 0; p < planes; p += chunk) {
    int64_t count = planes - p < chunk ? planes - p : chunk;
    batchNormKernel<<<planeGrid(count, inner), kThreads, 0, s>>>(
        x, scale, bias, mean, var, y, c, inner, eps, p);
  }
  return cudaGetLastError();
}

cudaError_t launchEpilogue(float *y, const float *bias, const float *z,
                           int64_t n, int64_t c, int64_t inner, bool relu,
                           cudaStream_t s) {
  if (n == 0 || (!bias && !z && !relu))
    return cudaSuccess;
  if (!bias && !z)
    return launchUnaryF32(ew::Step::Relu, y, y, n, 0, 0, s);
  auto aligned = [](const void *p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  if (inner == 1 && c % 4 == 0 && aligned(y) && aligned(bias) && aligned(z)) {
    epilogueLastKernel<<<blocksFor(n / 4), kThreads, 0, s>>>(
        reinterpret_cast<float4 *>(y), reinterpret_cast<const float4 *>(bias),
        reinterpret_cast<const float4 *>(z), n / 4, c / 4, relu);
    return cudaGetLastError();
  }
  int64_t planes = n / inner, chunk = 65535;
  for (int64_t p = 0; p < planes; p += chunk) {
    int64_t count = planes - p < chunk ? planes - p : chunk;
    epilogueFirstKernel<<<planeGrid(count, inner), kThreads, 0, s>>>(
        y, bias, z, c, inner, p, relu);
  }
  return cudaGetLastError();
}

namespace {

/// A 2-D window (depth 1, no dilation) on channels last, in 32-bit
/// indices: what pool2dLastKernel reads.
struct Pool2d {
  int inH, inW, outH, outW, units, kernelH, kernelW, strideH, strideW, padH,
      padW, padEndH, padEndW;
  bool countIncludePad;
};

/// 16 bytes of channels as f32 lanes: 4 f32, or 8 bf16 or f16 (`E`).
template <int E> struct Lanes16 {
  static constexpr int kCount = E == FusedParams::F32 ? 4 : 8;
  float v[kCount];
  __device__ void load(uint4 u) {
    if constexpr (E == FusedParams::F32) {
      v[0] = __uint_as_float(u.x);
      v[1] = __uint_as_float(u.y);
      v[2] = __uint_as_float(u.z);
      v[3] = __uint_as_float(u.w);
    } else {
      unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[2 * j] = wideFrom16(w[j] & 0xffff, E);
        v[2 * j + 1] = wideFrom16(w[j] >> 16, E);
      }
    }
  }
  __device__ uint4 store() const {
    if constexpr (E == FusedParams::F32)
      return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]),
                        __float_as_uint(v[2]), __float_as_uint(v[3]));
    else
      return make_uint4(
          narrowPairTo16(v[0], v[1], E), narrowPairTo16(v[2], v[3], E),
          narrowPairTo16(v[4], v[5], E), narrowPairTo16(v[6], v[7], E));
  }
};

/// Pooling's common case (2-D windows on channels last, 16 bytes of
/// channels a thread, every row aligned): a grid row per output row
/// (blockIdx.y: batch x output height), so that a thread finds its window
/// with one division. Computes what poolWindow computes, in the same order;
/// the general kernels above spent most of their time on its 3-D index
/// arithmetic (Inception v3's average pools at 0.7 TB/s).
template <bool IsMax, int E>
__global__ void pool2dLastKernel(const uint4 *x, uint4 *y, Pool2d p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.outW * p.units)
    return;
  int unit = i % p.units, ow = i / p.units;
  int oh = blockIdx.y % p.outH, b = blockIdx.y / p.outH;
  int h0 = oh * p.strideH - p.padH, w0 = ow * p.strideW - p.padW;
  TapRange<int> rows = inputTaps(h0, p.kernelH, 1, p.inH),
                cols = inputTaps(w0, p.kernelW, 1, p.inW);
  Lanes16<E> acc, tap;
#pragma unroll
  for (int j = 0; j < Lanes16<E>::kCount; ++j)
    acc.v[j] = IsMax ? -FLT_MAX : 0.f;
  const uint4 *plane = x + b * p.inH * p.inW * p.units + unit;
  for (int kh = rows.first; kh < rows.last; ++kh) {
    const uint4 *row = plane + (h0 + kh) * p.inW * p.units;
    for (int kw = cols.first; kw < cols.last; ++kw) {
      tap.load(row[(w0 + kw) * p.units]);
#pragma unroll
      for (int j = 0; j < Lanes16<E>::kCount; ++j)
        acc.v[j] =
            IsMax ? ew::maxKeepNan(acc.v[j], tap.v[j]) : acc.v[j] + tap.v[j];
    }
  }
  float inside = float(rows.last - rows.first) * float(cols.last - cols.first);
  if (IsMax) {
    if (!(inside > 0.f))
#pragma unroll
      for (int j = 0; j < Lanes16<E>::kCount; ++j)
        acc.v[j] = -INFINITY;
  } else {
    float padded = float(paddedTaps(h0, p.kernelH, 1, p.inH, p.padEndH)) *
                   float(paddedTaps(w0, p.kernelW, 1, p.inW, p.padEndW));
    float div = p.countIncludePad ? padded : inside;
    float factor = div > 0.f ? 1.f / div : 0.f;
#pragma unroll
    for (int j = 0; j < Lanes16<E>::kCount; ++j)
      acc.v[j] = div > 0.f ? acc.v[j] * factor : 0.f;
  }
  y[(blockIdx.y * p.outW + ow) * p.units + unit] = acc.store();
}

template <int E>
void launchPool2dAs(bool isMax, dim3 grid, int block, const uint4 *x, uint4 *y,
                    const Pool2d &q, cudaStream_t s) {
  if (isMax)
    pool2dLastKernel<true, E><<<grid, block, 0, s>>>(x, y, q);
  else
    pool2dLastKernel<false, E><<<grid, block, 0, s>>>(x, y, q);
}

/// Runs pool2dLastKernel where it applies (`element`: FusedParams::F32,
/// BF16 or F16); false where the general kernels must.
bool launchPool2dLast(const void *x, void *y, const PoolParams &p,
                      unsigned char element, cudaStream_t s) {
  int64_t lanes = element == FusedParams::F32 ? 4 : 8;
  int64_t c = p.channelsLast;
  if (!c || c % lanes || !aligned16(x) || !aligned16(y) || p.in[0] != 1 ||
      p.out[0] != 1 || p.kernel[0] != 1 || p.padBegin[0] || p.padEnd[0] ||
      p.dilation[1] != 1 || p.dilation[2] != 1 || !windowFits32(p))
    return false;
  int64_t batch = p.planes / c, units = c / lanes;
  int64_t inputs = batch * p.in[1] * p.in[2] * units,
          outputs = batch * p.out[1] * p.out[2] * units;
  int64_t gridRows = batch * p.out[1], rowUnits = p.out[2] * units;
  if (!narrowIndex(inputs) || !narrowIndex(outputs) || gridRows < 1 ||
      gridRows > 65535 || rowUnits < 1)
    return false;
  Pool2d q;
  q.inH = int(p.in[1]);
  q.inW = int(p.in[2]);
  q.outH = int(p.out[1]);
  q.outW = int(p.out[2]);
  q.units = int(units);
  q.kernelH = int(p.kernel[1]);
  q.kernelW = int(p.kernel[2]);
  q.strideH = int(p.stride[1]);
  q.strideW = int(p.stride[2]);
  q.padH = int(p.padBegin[1]);
  q.padW = int(p.padBegin[2]);
  q.padEndH = int(p.padEnd[1]);
  q.padEndW = int(p.padEnd[2]);
  q.countIncludePad = p.countIncludePad;
  constexpr int kBlock = 128;
  dim3 grid(static_cast<unsigned>((rowUnits + kBlock - 1) / kBlock),
            static_cast<unsigned>(gridRows));
  auto *in = static_cast<const uint4 *>(x);
  auto *out = static_cast<uint4 *>(y);
  switch (element) {
  case FusedParams::F32:
    launchPool2dAs<FusedParams::F32>(p.isMax, grid, kBlock, in, out, q, s);
    break;
  case FusedParams::BF16:
    launchPool2dAs<FusedParams::BF16>(p.isMax, grid, kBlock, in, out, q, s);
    break;
  default:
    launchPool2dAs<FusedParams::F16>(p.isMax, grid, kBlock, in, out, q, s);
  }
  return true;
}

} // namespace

template <bool IsMax, typename I>
void launchPoolAs(const float *x, float *y, const PoolParams &p, int64_t n,
                  cudaStream_t s) {
  int64_t c = p.channelsLast;
  if (!c) {
    poolKernel<IsMax, I><<<blocksFor(n), kThreads, 0, s>>>(x, y, p, n);
  } else if (c % 4 == 0 && aligned16(x) && aligned16(y)) {
    poolLastKernel<IsMax, I, float4><<<blocksFor(n / 4), kThreads, 0, s>>>(
        reinterpret_cast<const float4 *>(x), reinterpret_cast<float4 *>(y), p,
        I(c / 4), n / 4);
  } else {
    poolLastKernel<IsMax, I, float>
        <<<blocksFor(n), kThreads, 0, s>>>(x, y, p, I(c), n);
  }
}

cudaError_t launchPool(const float *x, float *y, const PoolParams &p,
                       cudaStream_t s) {
  if (launchPool2dLast(x, y, p, FusedParams::F32, s))
    return cudaGetLastError();
  int64_t n = p.planes * p.out[0] * p.out[1] * p.out[2];
  int64_t inputs = p.planes * p.in[0] * p.in[1] * p.in[2];
  bool narrow = narrowIndex(n) && narrowIndex(inputs) && windowFits32(p);
  if (p.isMax && narrow)
    launchPoolAs<true, int32_t>(x, y, p, n, s);
  else if (p.isMax)
    launchPoolAs<true, int64_t>(x, y, p, n, s);
  else if (narrow)
    launchPoolAs<false, int32_t>(x, y, p, n, s);
  else
    launchPoolAs<false, int64_t>(x, y, p, n, s);
  return cudaGetLastError();
}

cudaError_t launchPool16(const void *x, void *y, const PoolParams &p,
                         unsigned char element, cudaStream_t s) {
  int64_t n = p.planes * p.out[0] * p.out[1] * p.out[2];
  int64_t inputs = p.planes * p.in[0] * p.in[1] * p.in[2];
  if (!p.channelsLast || !narrowIndex(n) || !narrowIndex(inputs) ||
      !windowFits32(p))
    return cudaErrorNotSupported;
  if (launchPool2dLast(x, y, p, element, s))
    return cudaGetLastError();
  auto *in = static_cast<const unsigned short *>(x);
  auto *out = static_cast<unsigned short *>(y);
  int32_t c = static_cast<int32_t>(p.channelsLast);
  if (c % 4 == 0 && (reinterpret_cast<uintptr_t>(x) & 7) == 0 &&
      (reinterpret_cast<uintptr_t>(y) & 7) == 0) {
    if (p.isMax)
      poolLast16x4Kernel<true, int32_t><<<blocksFor(n / 4), kThreads, 0, s>>>(
          in, out, p, c / 4, n / 4, element);
    else
      poolLast16x4Kernel<false, int32_t><<<blocksFor(n / 4), kThreads, 0, s>>>(
          in, out, p, c / 4, n / 4, element);
    return cudaGetLastError();
  }
  if (p.isMax)
    poolLast16Kernel<true, int32_t>
        <<<blocksFor(n), kThreads, 0, s>>>(in, out, p, c, n, element);
  else
    poolLast16Kernel<false, int32_t>
        <<<blocksFor(n), kThreads, 0, s>>>(in, out, p, c, n, element);
  return cudaGetLastError();
}

cudaError_t launchGlobalPool(const float *x, float *y, int64_t planes,
                             int64_t size, bool isMax, cudaStream_t s) {
  if (planes == 0)
    return cudaSuccess;
  globalPoolKernel<<<static_cast<unsigned>(planes), kThreads, 0, s>>>(
      x, y, size, isMax);
  return cudaGetLastError();
}

cudaError_t launchSoftmax(const float *x, float *y, int64_t outer, int64_t axis,
                          int64_t inner, bool log, bool nanToZero,
                          const SoftmaxBias &bias, cudaStream_t s) {
  if (inner == 1 && axis >= 32) {
    // A warp per row: as many threads as rows times 32, the row in
    // registers where it fits.
    unsigned blocks = blocksFor(outer * 32);
    // Rows held in registers element by element measured faster at 128
    // (BERT-base's attention, 0.49 -> 0.44 ms) but slower at 197 and 256
    // (ViT, GPT-2: 0.88 -> 1.23 ms) than reading the row three times from
    // cache (benchmarks.md, session 10); rows of 16-byte units are held in
    // registers up to 2048 (session 23).
    int cols = static_cast<int>(axis);
    bool vectors =
        axis % 4 == 0 && axis <= 2048 && aligned16(x) && aligned16(y);
    if (axis <= 32 * kSoftmaxPerLane)
      softmaxRowsInRegisters<kSoftmaxPerLane>
          <<<blocks, kThreads, 0, s>>>(x, y, outer, cols, log, nanToZero, bias);
    else if (vectors && axis <= 512)
      softmaxRowsVectorized<4>
          <<<blocks, kThreads, 0, s>>>(x, y, outer, cols, log, nanToZero, bias);
    else if (vectors && axis <= 1024)
      softmaxRowsVectorized<8>
          <<<blocks, kThreads, 0, s>>>(x, y, outer, cols, log, nanToZero, bias);
    else if (vectors)
      softmaxRowsVectorized<16>
          <<<blocks, kThreads, 0, s>>>(x, y, outer, cols, log, nanToZero, bias);
    else
      softmaxRowsKernel<<<blocks, kThreads, 0, s>>>(x, y, outer, axis, log,
                                                    nanToZero, bias);
    return cudaGetLastError();
  }
  softmaxKernel<<<blocksFor(outer * inner), kThreads, 0, s>>>(
      x, y, outer, axis, inner, log, nanToZero, bias);
  return cudaGetLastError();
}

cudaError_t launchLayerNorm(const float *x, const float *scale,
                            const float *bias, float *y, int64_t rows,
                            int64_t cols, int64_t scaleMod, int64_t biasMod,
                            float eps, cudaStream_t s) {
  if (rows == 0)
    return cudaSuccess;
  bool rowsFit = cols % 128 == 0 && cols <= 128 * kLayerNormChunks &&
                 scaleMod == cols && (!bias || biasMod == cols) &&
                 aligned16(x) && aligned16(y) && aligned16(scale) &&
                 (!bias || aligned16(bias));
  if (rowsFit) {
    // A warp per row.
    layerNormRowsKernel<<<blocksFor(rows * 32), kThreads, 0, s>>>(
        x, scale, bias, y, rows, cols, eps);
    return cudaGetLastError();
  }
  if (layerNormShortRowsFit(cols, scaleMod, biasMod, bias != nullptr))
    return launchLayerNormShortRows(x, scale, bias, y, rows, cols, eps,
                                    FusedParams::F32, s);
  layerNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
      x, scale, bias, y, cols, scaleMod, biasMod, eps);
  return cudaGetLastError();
}

cudaError_t launchRmsNorm(const float *x, const float *scale, float *y,
                          int64_t rows, int64_t cols, int64_t scaleCount,
                          float eps, cudaStream_t s) {
  if (rows == 0)
    return cudaSuccess;
  // A warp per row: as many threads as rows times 32.
  if (cols % 4 == 0 && aligned16(x) && aligned16(y))
    rmsNormRowsKernel<true><<<blocksFor(rows * 32), kThreads, 0, s>>>(
        x, scale, y, rows, cols, scaleCount, eps);
  else
    rmsNormRowsKernel<false><<<blocksFor(rows * 32), kThreads, 0, s>>>(
        x, scale, y, rows, cols, scaleCount, eps);
  return cudaGetLastError();
}

cudaError_t launchReduce(const void *x, void *y, int64_t outCount,
                         const Strides &keep, const Strides &reduced,
                         int64_t reduceCount, int op, unsigned char element,
                         cudaStream_t s) {
  // Split each reduction over up to a block of threads while the outputs
  // alone would leave most of the GPU idle (about 64K threads keep it
  // busy): a whole-tensor mean (a loss) takes one block, not 16 threads.
  unsigned split = 1;
  while (split < unsigned(kThreads) && outCount * split < (int64_t(1) << 16) &&
         reduceCount >= 4 * int64_t(split))
    split *= 2;
  dim3 block(kThreads / split, split);
  int64_t blocks = (outCount + block.x - 1) / block.x;
  reduceKernel<<<static_cast<unsigned>(blocks), block, kThreads * sizeof(float),
                 s>>>(x, y, outCount, keep, reduced, reduceCount, op, element);
  return cudaGetLastError();
}

namespace {

/// A depthwise convolution channels last (one filter per channel, as
/// MobileNet's, EfficientNet's and ConvNeXt's), with its epilogue: a
/// thread computes W consecutive channels of one output pixel, one wide
/// load of the input per tap, the per-channel taps read from the [C, KH,
/// KW] filter (they stay in L1). cuDNN's kernels for these take 50 to 200
/// times the memory-bound time on an H200 in bf16.
template <int W>
__global__ void depthwiseConvKernel(const void *x, const void *w,
                                    const void *bias, const void *z, void *y,
                                    DepthwiseGeometry g, bool relu, bool silu,
                                    unsigned char e) {
  int groups = g.c / W;
  int taps = g.kh * g.kw;
  int64_t total = int64_t(g.n) * g.oh * g.ow * groups;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    int c0 = static_cast<int>(t % groups) * W;
    int64_t pixel = t / groups;
    int ox = static_cast<int>(pixel % g.ow);
    int64_t rest = pixel / g.ow;
    int oy = static_cast<int>(rest % g.oh);
    int64_t image = rest / g.oh;
    float acc[W];
#pragma unroll
    for (int u = 0; u < W; ++u)
      acc[u] = bias ? loadElement(bias, c0 + u, e) : 0.f;
    for (int i = 0; i < g.kh; ++i) {
      int iy = oy * g.strideH - g.padTop + i * g.dilationH;
      if (iy < 0 || iy >= g.h)
        continue;
      for (int j = 0; j < g.kw; ++j) {
        int ix = ox * g.strideW - g.padLeft + j * g.dilationW;
        if (ix < 0 || ix >= g.w)
          continue;
        float v[W];
        loadRun<W>(x, ((image * g.h + iy) * g.w + ix) * g.c + c0, e, v);
        int tap = i * g.kw + j;
#pragma unroll
        for (int u = 0; u < W; ++u)
          acc[u] += v[u] * loadElement(w, int64_t(c0 + u) * taps + tap, e);
      }
    }
    int64_t out = pixel * g.c + c0;
    if (z) {
      float r[W];
      loadRun<W>(z, out, e, r);
#pragma unroll
      for (int u = 0; u < W; ++u)
        acc[u] += r[u];
    }
#pragma unroll
    for (int u = 0; u < W; ++u) {
      if (relu)
        acc[u] = fmaxf(acc[u], 0.f);
      if (silu)
        acc[u] = siluOf(acc[u]);
      storeElement(y, out + u, acc[u], e);
    }
  }
}

/// W consecutive elements of `v` stored at element `i` of `base` (i a
/// multiple of W): one 16-byte store, or one at a time (W = 1).
template <int W>
__device__ __forceinline__ void storeRun(void *base, int64_t i, unsigned char e,
                                         const float (&v)[W]) {
  if constexpr (W == 1) {
    storeElement(base, i, v[0], e);
  } else if (e == FusedParams::F32) {
    fusedStoreWideTo<W>(static_cast<float *>(base) + i, 0, e, v);
  } else {
    fusedStoreWideTo<W>(static_cast<unsigned short *>(base) + i, 0, e, v);
  }
}

/// The depthwise convolution of the common shapes (a square K x K filter,
/// stride S, no dilation), tiled so that each input and filter value
/// loaded serves several outputs: a thread computes W channels of P
/// consecutive output columns, so a filter row's K taps and the
/// (P - 1) S + K input columns under it are read once for P K W
/// multiply-adds. A block takes a slice of `groups` channel groups (W
/// channels each) and keeps that slice's filter in shared memory as [K K,
/// groups W] rows, so a tap's W weights are one vector read; its threads
/// take consecutive column tiles along the rows. The input columns of a
/// filter row are loaded without branches (a column outside the image reads
/// column 0 and counts zero), so all of a row's loads are in flight at
/// once. The general kernel above read each tap's weights one by one from
/// the [C, K, K] filter (1.5-2.5 TFLOP/s on ConvNeXt's 7 x 7
/// convolutions).
///
/// With `RowInRegisters` a thread holds a filter row's input columns in
/// registers and reads each tap's weights once for its P columns (tap
/// major): a shared-memory read then feeds P W multiply-adds instead of W,
/// at the price of (P - 1) S + K columns of W registers (so W = 4 there). A
/// thread computes R output rows too: each input row it loads then serves every
/// one of them whose filter covers it, up to K R multiply-adds a loaded value
/// instead of K.
template <unsigned char E, int W, int K, int S, int P, int R,
          bool RowInRegisters, int MinBlocks>
__global__ void __launch_bounds__(kThreads, MinBlocks)
    depthwiseTiledKernel(const void *x, const void *w, const void *bias,
                         const void *z, void *y, DepthwiseGeometry g,
                         int groups, bool relu, bool silu) {
  static_assert(!RowInRegisters || W == 4, "a tap's weights are one float4");
  constexpr int kColumns = (P - 1) * S + K;
  constexpr int kInputRows = (R - 1) * S + K;
  extern __shared__ float4 filterStorage[];
  float *filter = reinterpret_cast<float *>(filterStorage);
  int sliceChannels = groups * W;
  int channelGroups = g.c / W;
  int firstGroup = blockIdx.y * groups;
  int firstChannel = firstGroup * W;
  int sliceWidth = min(groups, channelGroups - firstGroup) * W;
  int filterSize = K * K * sliceChannels;
#pragma unroll 4
  for (int k = threadIdx.x; k < filterSize; k += kThreads) {
    int tap = k / sliceChannels, channel = k % sliceChannels;
    filter[k] =
        channel < sliceWidth
            ? loadElement(w, int64_t(firstChannel + channel) * K * K + tap, E)
            : 0.f;
  }
  __syncthreads();
  int lane = threadIdx.x % groups;
  int tile = threadIdx.x / groups;
  int tilesPerBlock = kThreads / groups;
  if (tile >= tilesPerBlock || firstGroup + lane >= channelGroups)
    return;
  int c0 = firstChannel + lane * W;
  float b[W];
#pragma unroll
  for (int u = 0; u < W; ++u)
    b[u] = bias ? loadElement(bias, c0 + u, E) : 0.f;
  // Index arithmetic in 32 bits: the launch checks that the tiles fit.
  unsigned colTiles = (g.ow + P - 1) / P;
  unsigned rowTiles = (g.oh + R - 1) / R;
  unsigned tiles = unsigned(g.n) * rowTiles * colTiles;
  for (unsigned t = blockIdx.x * tilesPerBlock + tile; t < tiles;
       t += gridDim.x * tilesPerBlock) {
    unsigned rowTile = t / colTiles;
    int ox0 = static_cast<int>(t - rowTile * colTiles) * P;
    int image = static_cast<int>(rowTile / rowTiles);
    int oy0 = static_cast<int>(rowTile - unsigned(image) * rowTiles) * R;
    float acc[R][P][W];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int p = 0; p < P; ++p)
#pragma unroll
        for (int u = 0; u < W; ++u)
          acc[r][p][u] = b[u];
    int ix0 = ox0 * S - g.padLeft;
#pragma unroll
    for (int ii = 0; ii < kInputRows; ++ii) {
      int iy = oy0 * S - g.padTop + ii;
      if (iy < 0 || iy >= g.h)
        continue;
      int64_t inputRow = (int64_t(image) * g.h + iy) * g.w;
      // Input column q of the row, zero outside the image.
      auto loadColumn = [&](int q, float(&v)[W]) {
        int ix = ix0 + q;
        bool inside = unsigned(ix) < unsigned(g.w);
        loadRun<W>(x, (inputRow + (inside ? ix : 0)) * g.c + c0, E, v);
#pragma unroll
        for (int u = 0; u < W; ++u)
          v[u] = inside ? v[u] : 0.f;
      };
      if constexpr (RowInRegisters) {
        float v[kColumns][W];
#pragma unroll
        for (int q = 0; q < kColumns; ++q)
          loadColumn(q, v[q]);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          // Filter row i of output row r reads this input row.
          int i = ii - r * S;
          if (i < 0 || i >= K)
            continue;
          const float *taps = filter + i * K * sliceChannels + lane * W;
#pragma unroll
          for (int j = 0; j < K; ++j) {
            float4 f =
                *reinterpret_cast<const float4 *>(taps + j * sliceChannels);
#pragma unroll
            for (int p = 0; p < P; ++p) {
              const float(&in)[W] = v[p * S + j];
              acc[r][p][0] = fmaf(in[0], f.x, acc[r][p][0]);
              acc[r][p][1] = fmaf(in[1], f.y, acc[r][p][1]);
              acc[r][p][2] = fmaf(in[2], f.z, acc[r][p][2]);
              acc[r][p][3] = fmaf(in[3], f.w, acc[r][p][3]);
            }
          }
        }
      } else {
        static_assert(R == 1, "the column-major form computes one row");
        const float *taps = filter + ii * K * sliceChannels + lane * W;
#pragma unroll
        for (int q = 0; q < kColumns; ++q) {
          float v[W];
          loadColumn(q, v);
#pragma unroll
          for (int p = 0; p < P; ++p) {
            int j = q - p * S;
            if (j < 0 || j >= K)
              continue;
#pragma unroll
            for (int u = 0; u < W; u += 4) {
              float4 f = *reinterpret_cast<const float4 *>(
                  taps + j * sliceChannels + u);
              acc[0][p][u] = fmaf(v[u], f.x, acc[0][p][u]);
              acc[0][p][u + 1] = fmaf(v[u + 1], f.y, acc[0][p][u + 1]);
              acc[0][p][u + 2] = fmaf(v[u + 2], f.z, acc[0][p][u + 2]);
              acc[0][p][u + 3] = fmaf(v[u + 3], f.w, acc[0][p][u + 3]);
            }
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (oy0 + r >= g.oh)
        break;
#pragma unroll
      for (int p = 0; p < P; ++p) {
        if (ox0 + p >= g.ow)
          break;
        int64_t out =
            ((int64_t(image) * g.oh + oy0 + r) * g.ow + ox0 + p) * g.c + c0;
        float(&a)[W] = acc[r][p];
        if (z) {
          float res[W];
          loadRun<W>(z, out, E, res);
#pragma unroll
          for (int u = 0; u < W; ++u)
            a[u] += res[u];
        }
        if (relu)
#pragma unroll
          for (int u = 0; u < W; ++u)
            a[u] = fmaxf(a[u], 0.f);
        if (silu)
#pragma unroll
          for (int u = 0; u < W; ++u)
            a[u] = siluOf(a[u]);
        storeRun<W>(y, out, E, a);
      }
    }
  }
}

/// Output columns a thread of the tiled kernel computes.
constexpr int kDepthwiseColumns = 4;

/// Whether the tiled kernel's 32-bit tile arithmetic holds the output.
bool depthwiseTiledFits(const DepthwiseGeometry &g) {
  int64_t tiles = int64_t(g.n) * g.oh *
                  ((g.ow + kDepthwiseColumns - 1) / kDepthwiseColumns);
  return tiles + kThreads * int64_t(65535) < (int64_t(1) << 32);
}

/// Launches the tiled kernel: form 0 takes W channels (16 bytes) of
/// kDepthwiseColumns output columns a thread, form 1 four channels of a
/// filter row held in registers (8 columns at stride 1), form 2 the same
/// at 4 columns in at most 64 registers, so that twice as many threads
/// hide each other's latency, form 3 4 columns of several output rows (4
/// for 3 x 3 filters, else 2). Tuning picks per layer (bench/
/// depthwise_forms.cu times them).
template <unsigned char E, int W, int K, int S, int Form>
cudaError_t launchDepthwiseTiled(const void *x, const void *w, const void *bias,
                                 const void *z, void *y,
                                 const DepthwiseGeometry &g, bool relu,
                                 bool silu, cudaStream_t s) {
  constexpr int P = Form == 1 && S == 1 ? 8 : kDepthwiseColumns;
  constexpr int R = Form != 3 ? 1 : K == 3 ? 4 : 2;
  constexpr int kMinBlocks = Form == 2 ? 4 : 2;
  // Forms 1-3's 4-channel groups are 8 bytes in 16 bits: 16 of them give
  // a warp's loads 128 contiguous bytes.
  constexpr int kMostGroups = Form == 0 ? 8 : 16;
  int channelGroups = g.c / W;
  int groups = std::min(channelGroups, kMostGroups);
  int tilesPerBlock = kThreads / groups;
  int slices = (channelGroups + groups - 1) / groups;
  int64_t tiles = int64_t(g.n) * ((g.oh + R - 1) / R) * ((g.ow + P - 1) / P);
  // Each block reads its slice's filter once; past a few waves more
  // blocks would only read it again.
  int64_t wanted = (tiles + tilesPerBlock - 1) / tilesPerBlock;
  int64_t most = std::max<int64_t>(1, 2048 / slices);
  unsigned blocks = static_cast<unsigned>(std::min(wanted, most));
  size_t shared = size_t(K) * K * groups * W * sizeof(float);
  depthwiseTiledKernel<E, W, K, S, P, R, Form != 0, kMinBlocks>
      <<<dim3(blocks, static_cast<unsigned>(slices)), kThreads, shared, s>>>(
          x, w, bias, z, y, g, groups, relu, silu);
  return cudaGetLastError();
}

/// y = y * sigmoid(y) in place: a convolution's SiLU after a library's
/// fused epilogue, W elements a thread.
template <unsigned char E, int W>
__global__ void siluInPlaceKernel(void *y, int64_t vectors) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < vectors;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v[W];
    loadRun<W>(y, i * W, E, v);
#pragma unroll
    for (int u = 0; u < W; ++u)
      v[u] = siluOf(v[u]);
    storeRun<W>(y, i * W, E, v);
  }
}

template <unsigned char E>
cudaError_t launchSiluFor(void *y, int64_t n, cudaStream_t s) {
  constexpr int kWide = E == FusedParams::F32 ? 4 : 8;
  if (n % kWide == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0)
    siluInPlaceKernel<E, kWide>
        <<<blocksFor(n / kWide), kThreads, 0, s>>>(y, n / kWide);
  else
    siluInPlaceKernel<E, 1><<<blocksFor(n), kThreads, 0, s>>>(y, n);
  return cudaGetLastError();
}

template <unsigned char E, int W, int Form>
cudaError_t launchDepthwiseTiledFor(const void *x, const void *w,
                                    const void *bias, const void *z, void *y,
                                    const DepthwiseGeometry &g, bool relu,
                                    bool silu, cudaStream_t s) {
  auto byStride = [&](auto k) {
    constexpr int K = decltype(k)::value;
    return g.strideH == 1
               ? launchDepthwiseTiled<E, W, K, 1, Form>(x, w, bias, z, y, g,
                                                        relu, silu, s)
               : launchDepthwiseTiled<E, W, K, 2, Form>(x, w, bias, z, y, g,
                                                        relu, silu, s);
  };
  switch (g.kh) {
  case 3:
    return byStride(std::integral_constant<int, 3>());
  case 5:
    return byStride(std::integral_constant<int, 5>());
  default:
    return byStride(std::integral_constant<int, 7>());
  }
}

template <int Form>
cudaError_t launchDepthwiseTiledOf(const void *x, const void *w,
                                   const void *bias, const void *z, void *y,
                                   const DepthwiseGeometry &g, bool relu,
                                   bool silu, unsigned char element,
                                   cudaStream_t s) {
  constexpr int kWide = Form == 0 ? 8 : 4;
  switch (element) {
  case FusedParams::F32:
    return launchDepthwiseTiledFor<FusedParams::F32, 4, Form>(x, w, bias, z, y,
                                                              g, relu, silu, s);
  case FusedParams::BF16:
    return launchDepthwiseTiledFor<FusedParams::BF16, kWide, Form>(
        x, w, bias, z, y, g, relu, silu, s);
  default:
    return launchDepthwiseTiledFor<FusedParams::F16, kWide, Form>(
        x, w, bias, z, y, g, relu, silu, s);
  }
}

} // namespace

namespace {

/// Layer norm over short rows of any length up to 32 x kShortRowSlots (a
/// ConvNeXt stage's 96 or 192 channels): a warp per row, element j * 32 +
/// lane held by that lane, f32 inside. The block-per-row kernel left 7 of
/// 8 warps idle on such rows (0.5 ms for one of ConvNeXt-T's 64 x 56 x 56 x
/// 96 maps, against 16 us of memory traffic).
constexpr int kShortRowSlots = 32;
__global__ void __launch_bounds__(kThreads)
    layerNormShortRowsKernel(const void *x, const void *scale, const void *bias,
                             void *y, int64_t rows, int cols, float eps,
                             unsigned char e) {
  int lane = threadIdx.x % 32;
  int slots = (cols + 31) / 32;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
       r < rows; r += warps) {
    float v[kShortRowSlots];
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kShortRowSlots; ++j) {
      int c = j * 32 + lane;
      v[j] = j < slots && c < cols ? loadElement(x, r * cols + c, e) : 0.f;
      sum += v[j];
    }
    for (int o = 16; o > 0; o /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float mean = sum / float(cols);
    float sq = 0.f;
#pragma unroll
    for (int j = 0; j < kShortRowSlots; ++j) {
      int c = j * 32 + lane;
      float d = j < slots && c < cols ? v[j] - mean : 0.f;
      sq += d * d;
    }
    for (int o = 16; o > 0; o /= 2)
      sq += __shfl_xor_sync(0xffffffffu, sq, o);
    float inv = rsqrtf(sq / float(cols) + eps);
#pragma unroll
    for (int j = 0; j < kShortRowSlots; ++j) {
      int c = j * 32 + lane;
      if (j < slots && c < cols) {
        float out = (v[j] - mean) * inv * loadElement(scale, c, e);
        if (bias)
          out += loadElement(bias, c, e);
        storeElement(y, r * cols + c, out, e);
      }
    }
  }
}

/// Vectors of V elements a lane holds of a row in the grouped kernel.
constexpr int kGroupedRowChunks = 4;

/// Layer norm over rows of whole 16-byte vectors (V elements) up to 32 x
/// kGroupedRowChunks vectors long: a row takes `lanes` lanes (a power of
/// two, as few as hold it), so a warp normalizes 32 / lanes rows at once
/// with 16-byte loads. ConvNeXt's 96-channel rows in bf16 are 12 vectors:
/// four lanes a row, eight rows a warp, where a warp a row left 29 of 32
/// lanes idle and read two bytes a lane.
template <unsigned char E, int V>
__global__ void __launch_bounds__(kThreads)
    layerNormGroupedKernel(const void *x, const void *scale, const void *bias,
                           void *y, int64_t rows, int cols, int lanes,
                           float eps) {
  int lane = threadIdx.x % 32;
  int sub = lane % lanes;
  int rowsPerWarp = 32 / lanes;
  int vectors = cols / V;
  int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  // The loop bound is the same for the whole warp, so every lane reaches
  // the shuffles; lanes past the last row compute on zeros.
  for (int64_t base = warp * rowsPerWarp; base < rows;
       base += warps * rowsPerWarp) {
    int64_t r = base + lane / lanes;
    bool valid = r < rows;
    float v[kGroupedRowChunks][V];
    float sum = 0.f;
#pragma unroll
    for (int c = 0; c < kGroupedRowChunks; ++c) {
      int k = c * lanes + sub;
      if (valid && k < vectors)
        loadRun<V>(x, r * cols + k * V, E, v[c]);
      else
#pragma unroll
        for (int u = 0; u < V; ++u)
          v[c][u] = 0.f;
#pragma unroll
      for (int u = 0; u < V; ++u)
        sum += v[c][u];
    }
    for (int o = lanes / 2; o > 0; o /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float mean = sum / float(cols);
    float sq = 0.f;
#pragma unroll
    for (int c = 0; c < kGroupedRowChunks; ++c)
      if (c * lanes + sub < vectors)
#pragma unroll
        for (int u = 0; u < V; ++u) {
          float d = v[c][u] - mean;
          sq += d * d;
        }
    for (int o = lanes / 2; o > 0; o /= 2)
      sq += __shfl_xor_sync(0xffffffffu, sq, o);
    float inv = rsqrtf(sq / float(cols) + eps);
    if (!valid)
      continue;
#pragma unroll
    for (int c = 0; c < kGroupedRowChunks; ++c) {
      int k = c * lanes + sub;
      if (k >= vectors)
        continue;
      float g[V], b[V];
      loadRun<V>(scale, k * V, E, g);
      if (bias)
        loadRun<V>(bias, k * V, E, b);
#pragma unroll
      for (int u = 0; u < V; ++u)
        v[c][u] = (v[c][u] - mean) * inv * g[u] + (bias ? b[u] : 0.f);
      storeRun<V>(y, r * cols + k * V, E, v[c]);
    }
  }
}

template <unsigned char E, int V>
cudaError_t launchLayerNormGrouped(const void *x, const void *scale,
                                   const void *bias, void *y, int64_t rows,
                                   int cols, float eps, cudaStream_t s) {
  int vectors = cols / V;
  int lanes = 1;
  while (lanes * kGroupedRowChunks < vectors)
    lanes *= 2;
  int64_t warps = (rows + 32 / lanes - 1) / (32 / lanes);
  layerNormGroupedKernel<E, V><<<blocksFor(warps * 32), kThreads, 0, s>>>(
      x, scale, bias, y, rows, cols, lanes, eps);
  return cudaGetLastError();
}

} // namespace

bool layerNormShortRowsFit(int64_t cols, int64_t scaleMod, int64_t biasMod,
                           bool hasBias) {
  return cols > 0 && cols <= 32 * kShortRowSlots && scaleMod == cols &&
         (!hasBias || biasMod == cols);
}

cudaError_t launchLayerNormShortRows(const void *x, const void *scale,
                                     const void *bias, void *y, int64_t rows,
                                     int64_t cols, float eps,
                                     unsigned char element, cudaStream_t s) {
  int width = element == FusedParams::F32 ? 4 : 8;
  auto aligned = [](const void *p) {
    return !p || reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  if (cols % width == 0 && cols <= 32 * kGroupedRowChunks * width &&
      aligned(x) && aligned(scale) && aligned(bias) && aligned(y)) {
    int c = static_cast<int>(cols);
    switch (element) {
    case FusedParams::F32:
      return launchLayerNormGrouped<FusedParams::F32, 4>(x, scale, bias, y,
                                                         rows, c, eps, s);
    case FusedParams::BF16:
      return launchLayerNormGrouped<FusedParams::BF16, 8>(x, scale, bias, y,
                                                          rows, c, eps, s);
    default:
      return launchLayerNormGrouped<FusedParams::F16, 8>(x, scale, bias, y,
                                                         rows, c, eps, s);
    }
  }
  layerNormShortRowsKernel<<<blocksFor(rows * 32), kThreads, 0, s>>>(
      x, scale, bias, y, rows, static_cast<int>(cols), eps, element);
  return cudaGetLastError();
}

int depthwiseWidth(int64_t channels, unsigned char element) {
  if (element != FusedParams::F32 && channels % 8 == 0)
    return 8;
  return channels % 4 == 0 ? 4 : 1;
}

/// Whether the tiled kernel takes the geometry (its pointers aside).
bool depthwiseTiledShape(const DepthwiseGeometry &g) {
  return g.kh == g.kw && (g.kh == 3 || g.kh == 5 || g.kh == 7) &&
         g.strideH == g.strideW && (g.strideH == 1 || g.strideH == 2) &&
         g.dilationH == 1 && g.dilationW == 1 && depthwiseTiledFits(g) &&
         g.n * int64_t(g.oh) * g.ow > 0;
}

int depthwiseForms(const DepthwiseGeometry &g) {
  return depthwiseTiledShape(g) && g.c % 4 == 0 ? 4 : 1;
}

cudaError_t launchDepthwiseConv(const void *x, const void *w, const void *bias,
                                const void *z, void *y,
                                const DepthwiseGeometry &g, bool relu,
                                bool silu, unsigned char element,
                                cudaStream_t s, int form) {
  int width = depthwiseWidth(g.c, element);
  size_t bytes = element == FusedParams::F32 ? 4 : 2;
  auto aligned = [&](const void *p) {
    return !p || reinterpret_cast<uintptr_t>(p) % (width * bytes) == 0;
  };
  if (!aligned(x) || !aligned(z) || !aligned(y))
    width = 1;
  if (depthwiseTiledShape(g)) {
    // Forms 1 to 3 need 4-channel groups, form 0 16-byte ones.
    if (form == 1 && width >= 4)
      return launchDepthwiseTiledOf<1>(x, w, bias, z, y, g, relu, silu, element,
                                       s);
    if (form == 2 && width >= 4)
      return launchDepthwiseTiledOf<2>(x, w, bias, z, y, g, relu, silu, element,
                                       s);
    if (form == 3 && width >= 4)
      return launchDepthwiseTiledOf<3>(x, w, bias, z, y, g, relu, silu, element,
                                       s);
    if (width == (element == FusedParams::F32 ? 4 : 8))
      return launchDepthwiseTiledOf<0>(x, w, bias, z, y, g, relu, silu, element,
                                       s);
  }
  int64_t threads = int64_t(g.n) * g.oh * g.ow * (g.c / width);
  if (threads == 0)
    return cudaSuccess;
  unsigned blocks = blocksFor(threads);
  switch (width) {
  case 8:
    depthwiseConvKernel<8>
        <<<blocks, kThreads, 0, s>>>(x, w, bias, z, y, g, relu, silu, element);
    break;
  case 4:
    depthwiseConvKernel<4>
        <<<blocks, kThreads, 0, s>>>(x, w, bias, z, y, g, relu, silu, element);
    break;
  default:
    depthwiseConvKernel<1>
        <<<blocks, kThreads, 0, s>>>(x, w, bias, z, y, g, relu, silu, element);
  }
  return cudaGetLastError();
}

cudaError_t launchSiluInPlace(void *y, int64_t n, unsigned char element,
                              cudaStream_t s) {
  if (n == 0)
    return cudaSuccess;
  switch (element) {
  case FusedParams::F32:
    return launchSiluFor<FusedParams::F32>(y, n, s);
  case FusedParams::BF16:
    return launchSiluFor<FusedParams::BF16>(y, n, s);
  default:
    return launchSiluFor<FusedParams::F16>(y, n, s);
  }
}

int reduceMiddleWidth(int64_t cols, unsigned char element) {
  if (element != FusedParams::F32 && cols % 8 == 0)
    return 8;
  return cols % 4 == 0 ? 4 : 1;
}

bool reduceMiddleFits(int64_t batch, int64_t cols, unsigned char element) {
  return batch >= 1 && batch <= 65535 && cols >= 1 &&
         cols / reduceMiddleWidth(cols, element) <= kThreads;
}

int64_t reduceMiddleChunks(int64_t batch, int64_t rows, int64_t cols,
                           unsigned char element) {
  // About four blocks an SM of a ~130-SM GPU, and at least 8 rows a
  // thread in each chunk so that combining the chunks stays cheap.
  int64_t phases = kThreads / (cols / reduceMiddleWidth(cols, element));
  int64_t chunks = std::max<int64_t>(
      std::min((528 + batch - 1) / batch, rows / (8 * phases)), 1);
  int64_t rowsPerChunk = (rows + chunks - 1) / chunks;
  return (rows + rowsPerChunk - 1) / rowsPerChunk;
}

cudaError_t launchReduceMiddle(const void *x, void *y, float *partials,
                               unsigned *arrivals, int64_t batch, int64_t rows,
                               int64_t cols, int op, unsigned char element,
                               cudaStream_t s) {
  int width = reduceMiddleWidth(cols, element);
  // Wide loads need their first element aligned to their size; a view
  // that is not, with more columns than a block has threads, takes the
  // general kernel.
  size_t bytes = element == FusedParams::F32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(x) % (width * bytes) != 0)
    width = 1;
  if (width == 1 && cols > kThreads) {
    Strides keep, reduced;
    keep.rank = 2;
    keep.shape[0] = batch, keep.shape[1] = cols;
    keep.stride[0][0] = rows * cols, keep.stride[0][1] = 1;
    reduced.rank = 1;
    reduced.shape[0] = rows;
    reduced.stride[0][0] = cols;
    return launchReduce(x, y, batch * cols, keep, reduced, rows, op, element,
                        s);
  }
  int64_t chunks = reduceMiddleChunks(batch, rows, cols, element);
  int64_t rowsPerChunk = (rows + chunks - 1) / chunks;
  dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(batch));
  size_t shared = static_cast<size_t>(kThreads) * width * sizeof(float);
  auto launch = [&](auto kernel) {
    kernel<<<grid, kThreads, shared, s>>>(x, y, partials, arrivals, rows, cols,
                                          rowsPerChunk, op, element);
  };
  switch (width) {
  case 8:
    launch(reduceMiddleKernel<8>);
    break;
  case 4:
    launch(reduceMiddleKernel<4>);
    break;
  default:
    launch(reduceMiddleKernel<1>);
    break;
  }
  return cudaGetLastError();
}

} // namespace partc::runtime::cuda
