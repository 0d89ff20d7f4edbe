//===- HalfPrecision.cu - Softmax and layer norm on bf16 and f16 ----------===//
//
// The 16-bit forms of Nn.cu's row kernels for plans compiled with
// --precision: values are widened to f32 as they are loaded, the maximum,
// sums, mean and variance are taken in f32, and each result is rounded
// once as it is stored (FusedChain.cuh's conversions, the CPU backend's
// rounding). Rows that fit are held in registers, eight elements (16
// bytes) per load, others read three times; the exponentials of rows in
// registers are the hardware's fast ones (__expf: a few f32 ulps, far
// below a 16-bit result's rounding), without which attention's softmax
// was bound by exp, not memory.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/KernelUtils.cuh"

namespace partc::runtime::cuda {

namespace {

using u16 = unsigned short;

__device__ inline float4 load4(const u16 *p, unsigned char e) {
  uint2 u = *reinterpret_cast<const uint2 *>(p);
  return make_float4(wideFrom16(u.x & 0xffff, e), wideFrom16(u.x >> 16, e),
                     wideFrom16(u.y & 0xffff, e), wideFrom16(u.y >> 16, e));
}

__device__ inline void store4(u16 *p, float4 v, unsigned char e) {
  uint2 u;
  u.x = narrowPairTo16(v.x, v.y, e);
  u.y = narrowPairTo16(v.z, v.w, e);
  *reinterpret_cast<uint2 *>(p) = u;
}

/// Eight elements from 16 bytes, and back.
__device__ inline void load8(const u16 *p, unsigned char e, float (&v)[8]) {
  uint4 u = *reinterpret_cast<const uint4 *>(p);
  unsigned words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = wideFrom16(words[i] & 0xffff, e);
    v[2 * i + 1] = wideFrom16(words[i] >> 16, e);
  }
}

__device__ inline void store8(u16 *p, const float (&v)[8], unsigned char e) {
  unsigned words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    words[i] = narrowPairTo16(v[2 * i], v[2 * i + 1], e);
  *reinterpret_cast<uint4 *>(p) =
      make_uint4(words[0], words[1], words[2], words[3]);
}

__device__ inline float zeroNan16(float v, bool nanToZero) {
  return nanToZero && isnan(v) ? 0.f : v;
}

/// Softmax over contiguous rows of at most 8 x 32 x Chunks elements, a
/// multiple of 8: a warp per row, each lane holding 8-element units (16
/// bytes, l, l + 32, ...) in registers, the bias read 16 bytes at a time
/// where it runs along the row aligned (an attention mask), else element
/// by element.
template <int Chunks>
__global__ void softmaxRows16Wide(const u16 *x, u16 *y, int64_t rows, int cols,
                                  bool log, bool nanToZero, SoftmaxBias bias,
                                  unsigned char e) {
  int lane = threadIdx.x % 32;
  int units = cols / 8;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  bool narrow = narrowIndex(rows * cols);
  const u16 *biasData = reinterpret_cast<const u16 *>(bias.data);
  for (int64_t r = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
       r < rows; r += warps) {
    const u16 *xr = x + r * cols;
    u16 *yr = y + r * cols;
    const u16 *br =
        biasData ? biasData + offsetOf(bias.elements, 0, r * cols, narrow)
                 : nullptr;
    bool biasVectors = br && bias.columnStride == 1 &&
                       (reinterpret_cast<uintptr_t>(br) & 15) == 0;
    float v[Chunks][8];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < Chunks; ++k) {
      int u = lane + 32 * k;
      if (u < units) {
        load8(xr + 8 * u, e, v[k]);
        if (biasVectors) {
          float b[8];
          load8(br + 8 * u, e, b);
#pragma unroll
          for (int i = 0; i < 8; ++i)
            v[k][i] += b[i];
        } else if (br) {
#pragma unroll
          for (int i = 0; i < 8; ++i)
            v[k][i] +=
                wideFrom16(br[(8 * int64_t(u) + i) * bias.columnStride], e);
        }
#pragma unroll
        for (int i = 0; i < 8; ++i)
          m = fmaxf(m, v[k][i]);
      }
    }
    for (int o = 16; o > 0; o /= 2)
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < Chunks; ++k)
      if (lane + 32 * k < units) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          // Softmax keeps exp(v - m); log-softmax keeps v - m.
          float shifted = v[k][i] - m, ex = __expf(shifted);
          sum += ex;
          v[k][i] = log ? shifted : ex;
        }
      }
    for (int o = 16; o > 0; o /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float logSum = logf(sum), inverse = 1.f / sum;
#pragma unroll
    for (int k = 0; k < Chunks; ++k) {
      int u = lane + 32 * k;
      if (u < units) {
#pragma unroll
        for (int i = 0; i < 8; ++i)
          v[k][i] =
              zeroNan16(log ? v[k][i] - logSum : v[k][i] * inverse, nanToZero);
        store8(yr + 8 * u, v[k], e);
      }
    }
  }
}

/// Any softmax: one thread per (outer, inner) row along the axis, reading
/// it three times.
__global__ void softmax16Kernel(const u16 *x, u16 *y, int64_t outer,
                                int64_t axis, int64_t inner, bool log,
                                bool nanToZero, SoftmaxBias bias,
                                unsigned char e) {
  int64_t rows = outer * inner;
  bool narrow = narrowIndex(rows * axis);
  const u16 *biasData = reinterpret_cast<const u16 *>(bias.data);
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x) {
    int64_t o = r / inner, in = r % inner;
    int64_t first = o * axis * inner + in;
    auto at = [&](int64_t a) {
      float v = wideFrom16(x[first + a * inner], e);
      if (biasData)
        v += wideFrom16(
            biasData[offsetOf(bias.elements, 0, first + a * inner, narrow)], e);
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
      y[first + a * inner] = narrowTo16(
          zeroNan16(log ? v - logf(sum) : expf(v) / sum, nanToZero), e);
    }
  }
}

/// Layer norm over rows of at most 32 x 4 x Chunks elements, a multiple of
/// 128: a warp per row in registers (Nn.cu's layerNormRowsKernel). The
/// element type is a constant (tested per element it cost instructions),
/// and 40 registers let 6 blocks share an SM: BERT-large's 6144 rows of a
/// batch then run in one wave instead of two.
constexpr int kRowChunks = 8;
template <unsigned char E>
__global__ void __launch_bounds__(kThreads, 6)
    layerNorm16Rows(const u16 *x, const u16 *scale, const u16 *bias, u16 *y,
                    int64_t rows, int64_t cols, float eps) {
  constexpr unsigned char e = E;
  int lane = threadIdx.x % 32;
  int chunks = static_cast<int>(cols / 128);
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
       r < rows; r += warps) {
    const u16 *xr = x + r * cols;
    u16 *yr = y + r * cols;
    // The row stays in registers as loaded, 16 bits an element, and is
    // widened at each use: float4s took 60 registers a thread.
    uint2 raw[kRowChunks];
#pragma unroll
    for (int j = 0; j < kRowChunks; ++j)
      if (j < chunks)
        raw[j] = *reinterpret_cast<const uint2 *>(xr + 4 * (j * 32 + lane));
    auto widen = [](uint2 u) {
      return make_float4(wideFrom16(u.x & 0xffff, e), wideFrom16(u.x >> 16, e),
                         wideFrom16(u.y & 0xffff, e), wideFrom16(u.y >> 16, e));
    };
    // warpRowStatistics' sums, in its order.
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kRowChunks; ++j)
      if (j < chunks) {
        float4 v = widen(raw[j]);
        sum += v.x + v.y + v.z + v.w;
      }
    for (int o = 16; o > 0; o /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float mean = sum / float(cols);
    float sq = 0.f;
#pragma unroll
    for (int j = 0; j < kRowChunks; ++j)
      if (j < chunks) {
        float4 v = widen(raw[j]);
        float a = v.x - mean, b = v.y - mean, c = v.z - mean, d = v.w - mean;
        sq += a * a + b * b + c * c + d * d;
      }
    for (int o = 16; o > 0; o /= 2)
      sq += __shfl_xor_sync(0xffffffffu, sq, o);
    float inv = rsqrtf(sq / float(cols) + eps);
#pragma unroll
    for (int j = 0; j < kRowChunks; ++j)
      if (j < chunks) {
        int c = 4 * (j * 32 + lane);
        float4 v = widen(raw[j]);
        float4 g = load4(scale + c, e);
        float4 o = bias ? load4(bias + c, e) : make_float4(0.f, 0.f, 0.f, 0.f);
        store4(yr + c,
               make_float4((v.x - mean) * inv * g.x + o.x,
                           (v.y - mean) * inv * g.y + o.y,
                           (v.z - mean) * inv * g.z + o.z,
                           (v.w - mean) * inv * g.w + o.w),
               e);
      }
  }
}

/// Any layer norm: a block per row, the mean first, then the variance
/// about it.
__global__ void layerNorm16Kernel(const u16 *x, const u16 *scale,
                                  const u16 *bias, u16 *y, int64_t cols,
                                  int64_t scaleMod, int64_t biasMod, float eps,
                                  unsigned char e) {
  __shared__ float partial[kThreads];
  const u16 *xr = x + blockIdx.x * cols;
  u16 *yr = y + blockIdx.x * cols;
  auto blockSum = [&](float v) {
    partial[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s)
        partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    float total = partial[0];
    __syncthreads();
    return total;
  };
  float a = 0.f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
    a += wideFrom16(xr[i], e);
  float mean = blockSum(a) / float(cols);
  float b = 0.f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    float d = wideFrom16(xr[i], e) - mean;
    b += d * d;
  }
  float inv = rsqrtf(blockSum(b) / float(cols) + eps);
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    float v = (wideFrom16(xr[i], e) - mean) * inv *
              wideFrom16(scale[i % scaleMod], e);
    if (bias)
      v += wideFrom16(bias[i % biasMod], e);
    yr[i] = narrowTo16(v, e);
  }
}

/// RMS normalization over 16-bit rows, a warp per row (Nn.cu's
/// rmsNormRowsKernel): the sum of squares in f32, then a second pass over
/// the row (from cache) that scales it. `scaleCount` is 1 or cols (none
/// where null). With Vec, eight elements per 16-byte load: cols a
/// multiple of 8, rows and the scale 16-byte aligned.
template <unsigned char E, bool Vec>
__global__ void rmsNorm16Rows(const u16 *x, const u16 *scale, u16 *y,
                              int64_t rows, int64_t cols, int64_t scaleCount,
                              float eps) {
  constexpr unsigned char e = E;
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  int64_t units = Vec ? cols / 8 : cols;
  float single = scale && scaleCount == 1 ? wideFrom16(scale[0], e) : 1.f;
  const u16 *perElement = scaleCount == 1 ? nullptr : scale;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
       r < rows; r += warps) {
    const u16 *xr = x + r * cols;
    u16 *yr = y + r * cols;
    float sum = 0.f;
    for (int64_t u = lane; u < units; u += 32) {
      if constexpr (Vec) {
        float v[8];
        load8(xr + 8 * u, e, v);
#pragma unroll
        for (int i = 0; i < 8; ++i)
          sum += v[i] * v[i];
      } else {
        float v = wideFrom16(xr[u], e);
        sum += v * v;
      }
    }
    for (int o = 16; o > 0; o /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float inv = 1.f / sqrtf(sum / float(cols) + eps);
    for (int64_t u = lane; u < units; u += 32) {
      if constexpr (Vec) {
        float v[8], g[8];
        load8(xr + 8 * u, e, v);
        if (perElement)
          load8(perElement + 8 * u, e, g);
#pragma unroll
        for (int i = 0; i < 8; ++i)
          v[i] = v[i] * inv * (perElement ? g[i] : single);
        store8(yr + 8 * u, v, e);
      } else {
        float g = perElement ? wideFrom16(perElement[u], e) : single;
        yr[u] = narrowTo16(wideFrom16(xr[u], e) * inv * g, e);
      }
    }
  }
}

template <unsigned char E>
cudaError_t launchRmsNorm16Typed(const u16 *x, const u16 *scale, u16 *y,
                                 int64_t rows, int64_t cols, int64_t scaleCount,
                                 float eps, cudaStream_t s) {
  bool vec = cols % 8 == 0 && aligned16(x) && aligned16(y) &&
             (!scale || scaleCount == 1 || aligned16(scale));
  if (vec)
    rmsNorm16Rows<E, true><<<blocksFor(rows * 32), kThreads, 0, s>>>(
        x, scale, y, rows, cols, scaleCount, eps);
  else
    rmsNorm16Rows<E, false><<<blocksFor(rows * 32), kThreads, 0, s>>>(
        x, scale, y, rows, cols, scaleCount, eps);
  return cudaGetLastError();
}

bool aligned8(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 7) == 0;
}

} // namespace

cudaError_t launchSoftmax16(const void *x, void *y, int64_t outer, int64_t axis,
                            int64_t inner, bool log, bool nanToZero,
                            const SoftmaxBias &bias, unsigned char element,
                            cudaStream_t s) {
  auto *in = static_cast<const u16 *>(x);
  auto *out = static_cast<u16 *>(y);
  int cols = static_cast<int>(axis);
  bool aligned = (reinterpret_cast<uintptr_t>(x) & 15) == 0 &&
                 (reinterpret_cast<uintptr_t>(y) & 15) == 0;
  if (inner == 1 && axis % 8 == 0 && axis <= 2048 && aligned) {
    unsigned blocks = blocksFor(outer * 32);
    if (axis <= 256)
      softmaxRows16Wide<1><<<blocks, kThreads, 0, s>>>(
          in, out, outer, cols, log, nanToZero, bias, element);
    else if (axis <= 512)
      softmaxRows16Wide<2><<<blocks, kThreads, 0, s>>>(
          in, out, outer, cols, log, nanToZero, bias, element);
    else if (axis <= 1024)
      softmaxRows16Wide<4><<<blocks, kThreads, 0, s>>>(
          in, out, outer, cols, log, nanToZero, bias, element);
    else
      softmaxRows16Wide<8><<<blocks, kThreads, 0, s>>>(
          in, out, outer, cols, log, nanToZero, bias, element);
    return cudaGetLastError();
  }
  softmax16Kernel<<<blocksFor(outer * inner), kThreads, 0, s>>>(
      in, out, outer, axis, inner, log, nanToZero, bias, element);
  return cudaGetLastError();
}

cudaError_t launchLayerNorm16(const void *x, const void *scale,
                              const void *bias, void *y, int64_t rows,
                              int64_t cols, int64_t scaleMod, int64_t biasMod,
                              float eps, unsigned char element,
                              cudaStream_t s) {
  if (rows == 0)
    return cudaSuccess;
  auto *in = static_cast<const u16 *>(x);
  auto *g = static_cast<const u16 *>(scale);
  auto *b = static_cast<const u16 *>(bias);
  auto *out = static_cast<u16 *>(y);
  if (cols % 128 == 0 && cols <= 128 * kRowChunks && scaleMod == cols &&
      (!bias || biasMod == cols) && aligned8(x) && aligned8(y) &&
      aligned8(scale) && (!bias || aligned8(bias))) {
    if (element == FusedParams::BF16)
      layerNorm16Rows<FusedParams::BF16>
          <<<blocksFor(rows * 32), kThreads, 0, s>>>(in, g, b, out, rows, cols,
                                                     eps);
    else
      layerNorm16Rows<FusedParams::F16>
          <<<blocksFor(rows * 32), kThreads, 0, s>>>(in, g, b, out, rows, cols,
                                                     eps);
    return cudaGetLastError();
  }
  if (layerNormShortRowsFit(cols, scaleMod, biasMod, bias != nullptr))
    return launchLayerNormShortRows(x, scale, bias, y, rows, cols, eps, element,
                                    s);
  layerNorm16Kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
      in, g, b, out, cols, scaleMod, biasMod, eps, element);
  return cudaGetLastError();
}

cudaError_t launchRmsNorm16(const void *x, const void *scale, void *y,
                            int64_t rows, int64_t cols, int64_t scaleCount,
                            float eps, unsigned char element, cudaStream_t s) {
  if (rows == 0)
    return cudaSuccess;
  auto *in = static_cast<const u16 *>(x);
  auto *g = static_cast<const u16 *>(scale);
  auto *out = static_cast<u16 *>(y);
  return element == FusedParams::BF16
             ? launchRmsNorm16Typed<FusedParams::BF16>(in, g, out, rows, cols,
                                                       scaleCount, eps, s)
             : launchRmsNorm16Typed<FusedParams::F16>(in, g, out, rows, cols,
                                                      scaleCount, eps, s);
}

} // namespace partc::runtime::cuda
