//===- Kernels.cu - partc's own CUDA kernels ------------------------------===//
//
// Simple, general kernels first (grid-stride loops, index arithmetic over up
// to 8 dimensions); fusion and specialization come with the benchmarks.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/FusedElementwise.h"

#include <cfloat>
#include <cmath>
#include <cuda_fp16.h>

namespace partc::runtime::cuda {

namespace {

constexpr int kThreads = 256;

int blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? (b < 1 ? 1 : b) : 65535 * 8);
}

/// Whether every index below `n` fits 32 bits, so that kernels may divide
/// in 32 bits (GPUs emulate 64-bit division at several times the cost).
__host__ __device__ inline bool narrowIndex(int64_t n) {
  return n <= INT32_MAX;
}

/// Offsets into inputs 0..N-1 of output element `i`, decomposing `i` once
/// for all of them; `narrow` when every extent and `i` fit 32 bits.
template <int N>
__device__ inline void offsetsOf(const Strides &st, int64_t i, bool narrow,
                                 int64_t (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k)
    off[k] = 0;
  if (narrow) {
    uint32_t j = static_cast<uint32_t>(i);
    for (int d = st.rank - 1; d >= 0; --d) {
      uint32_t extent = static_cast<uint32_t>(st.shape[d]);
      uint32_t c = j % extent;
      j /= extent;
#pragma unroll
      for (int k = 0; k < N; ++k)
        off[k] += int64_t(c) * st.stride[k][d];
    }
    return;
  }
  for (int d = st.rank - 1; d >= 0; --d) {
    int64_t c = i % st.shape[d];
    i /= st.shape[d];
#pragma unroll
    for (int k = 0; k < N; ++k)
      off[k] += c * st.stride[k][d];
  }
}

/// Offset into input `k` of output element `i`; `narrow` when every shape
/// extent and `i` fit 32 bits.
__device__ inline int64_t offsetOf(const Strides &st, int k, int64_t i,
                                   bool narrow) {
  int64_t off = 0;
  if (narrow) {
    uint32_t j = static_cast<uint32_t>(i);
    for (int d = st.rank - 1; d >= 0; --d) {
      uint32_t extent = static_cast<uint32_t>(st.shape[d]);
      uint32_t c = j % extent;
      j /= extent;
      off += int64_t(c) * st.stride[k][d];
    }
    return off;
  }
  for (int d = st.rank - 1; d >= 0; --d) {
    int64_t c = i % st.shape[d];
    i /= st.shape[d];
    off += c * st.stride[k][d];
  }
  return off;
}

/// Four elements per thread through 16-byte loads (n divisible by 4).
__device__ inline float maybeRelu(float x, bool relu) {
  return relu && x < 0.f ? 0.f : x;
}

__device__ inline float unaryOp(ew::Step op, float x, float p, float q) {
  return fusedStep(op, x, x, p, q);
}

__global__ void unaryKernel4(ew::Step op, const float4 *x, float4 *y,
                             int64_t n4, float p, float q) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n4;
       i += int64_t(gridDim.x) * blockDim.x) {
    float4 v = x[i];
    v.x = unaryOp(op, v.x, p, q);
    v.y = unaryOp(op, v.y, p, q);
    v.z = unaryOp(op, v.z, p, q);
    v.w = unaryOp(op, v.w, p, q);
    y[i] = v;
  }
}

__global__ void unaryKernel(ew::Step op, const float *x, float *y, int64_t n,
                            float p, float q) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = unaryOp(op, x[i], p, q);
}

__device__ inline float binaryOp(ew::Step op, float a, float b) {
  return fusedStep(op, a, b, 0.f, 0.f);
}

__global__ void binarySameKernel(ew::Step op, const float *a, const float *b,
                                 float *y, int64_t n, bool relu) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = maybeRelu(binaryOp(op, a[i], b[i]), relu);
}

__global__ void binarySameKernel4(ew::Step op, const float4 *a, const float4 *b,
                                  float4 *y, int64_t n4, bool relu) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n4;
       i += int64_t(gridDim.x) * blockDim.x) {
    float4 u = a[i], v = b[i];
    y[i] = make_float4(maybeRelu(binaryOp(op, u.x, v.x), relu),
                       maybeRelu(binaryOp(op, u.y, v.y), relu),
                       maybeRelu(binaryOp(op, u.z, v.z), relu),
                       maybeRelu(binaryOp(op, u.w, v.w), relu));
  }
}

__global__ void binaryKernel(ew::Step op, const float *a, const float *b,
                             float *y, int64_t n, Strides st, bool relu) {
  bool narrow = narrowIndex(n);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[2];
    offsetsOf(st, i, narrow, off);
    y[i] = maybeRelu(binaryOp(op, a[off[0]], b[off[1]]), relu);
  }
}

/// Any program, read from the launch parameters: the Chain of the fused
/// loops (FusedChain.cuh) where the code generated per program is not at
/// hand.
struct InterpretedChain {
  static constexpr int kInputs = kFusedMaxInputs;
  __device__ unsigned char mode(const FusedParams &p, int k) const {
    return k < p.inputs ? p.mode[k] : FusedParams::Unused;
  }
  __device__ float operator()(const FusedParams &p,
                              const float (&x)[kInputs]) const {
    float v[kFusedMaxSteps];
    for (int s = 0; s < p.steps; ++s) {
      int l = p.lhs[s], r = p.rhs[s];
      v[s] =
          fusedStep(static_cast<ew::Step>(p.step[s]), l >= 0 ? x[l] : v[-l - 1],
                    r >= 0 ? x[r] : v[-r - 1], p.param[s][0], p.param[s][1]);
    }
    return v[p.steps - 1];
  }
};

__global__ void fusedKernel(FusedParams p) {
  runFusedChain(p, InterpretedChain());
}
__global__ void fusedKernel4(FusedParams p) {
  runFusedChain4(p, InterpretedChain());
}

template <typename T>
__global__ void stridedCopyKernel(const T *in, T *out, int64_t n, Strides st,
                                  int64_t base) {
  bool narrow = narrowIndex(n);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = in[base + offsetOf(st, 0, i, narrow)];
}

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
  return isMax ? fmaxf(a, v) : a + v;
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
template <bool IsMax, typename I, typename V>
__device__ V poolWindow(const V *x, I step, const PoolParams &p, I od, I oh,
                        I ow) {
  V acc = splat(IsMax ? -FLT_MAX : 0.f, V());
  bool any = false;
  I count = 0, padCount = 0;
  const I inD = I(p.in[0]), inH = I(p.in[1]), inW = I(p.in[2]);
  for (I kd = 0; kd < I(p.kernel[0]); ++kd) {
    I id = od * I(p.stride[0]) - I(p.padBegin[0]) + kd * I(p.dilation[0]);
    for (I kh = 0; kh < I(p.kernel[1]); ++kh) {
      I ih = oh * I(p.stride[1]) - I(p.padBegin[1]) + kh * I(p.dilation[1]);
      for (I kw = 0; kw < I(p.kernel[2]); ++kw) {
        I iw = ow * I(p.stride[2]) - I(p.padBegin[2]) + kw * I(p.dilation[2]);
        if (id < 0 || ih < 0 || iw < 0 || id >= inD || ih >= inH || iw >= inW) {
          if (!IsMax && id >= -I(p.padBegin[0]) && ih >= -I(p.padBegin[1]) &&
              iw >= -I(p.padBegin[2]) && id < inD + I(p.padEnd[0]) &&
              ih < inH + I(p.padEnd[1]) && iw < inW + I(p.padEnd[2]))
            ++padCount;
          continue;
        }
        acc = combine(IsMax, acc, x[((id * inH + ih) * inW + iw) * step]);
        any = true;
        ++count;
      }
    }
  }
  if (IsMax)
    return any ? acc : splat(-INFINITY, V());
  I div = p.countIncludePad ? count + padCount : count;
  return div ? scaled(acc, 1.f / float(div)) : splat(0.f, V());
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
    y[i] = poolWindow<IsMax, I, float>(
        x + plane * I(p.in[0] * p.in[1] * p.in[2]), I(1), p, od, oh, ow);
  }
}

/// Channels last: consecutive threads take consecutive channels (or groups
/// of four) of one output position, so reads and writes are coalesced.
template <bool IsMax, typename I, typename V>
__global__ void poolLastKernel(const V *x, V *y, PoolParams p, I groups,
                               int64_t n) {
  const I outD = I(p.out[0]), outH = I(p.out[1]), outW = I(p.out[2]);
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    I i = I(k);
    I ch = i % groups, pos = i / groups;
    I ow = pos % outW, oh = (pos / outW) % outH,
      od = (pos / (outW * outH)) % outD, b = pos / (outW * outH * outD);
    y[i] = poolWindow<IsMax, I, V>(
        x + b * I(p.in[0] * p.in[1] * p.in[2]) * groups + ch, groups, p, od, oh,
        ow);
  }
}

/// One block per plane; a shared-memory tree reduction.
__global__ void globalPoolKernel(const float *x, float *y, int64_t size,
                                 bool isMax) {
  __shared__ float partial[kThreads];
  const float *xp = x + blockIdx.x * size;
  float acc = isMax ? -FLT_MAX : 0.f;
  for (int64_t i = threadIdx.x; i < size; i += blockDim.x)
    acc = isMax ? fmaxf(acc, xp[i]) : acc + xp[i];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      partial[threadIdx.x] =
          isMax ? fmaxf(partial[threadIdx.x], partial[threadIdx.x + s])
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
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kLayerNormChunks; ++j)
      if (j < chunks) {
        v[j] = xr[j * 32 + lane];
        sum += v[j].x + v[j].y + v[j].z + v[j].w;
      }
    for (int o = 16; o > 0; o /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float mean = sum / float(cols), sq = 0.f;
#pragma unroll
    for (int j = 0; j < kLayerNormChunks; ++j)
      if (j < chunks) {
        float a = v[j].x - mean, b = v[j].y - mean, c = v[j].z - mean,
              d = v[j].w - mean;
        sq += a * a + b * b + c * c + d * d;
      }
    for (int o = 16; o > 0; o /= 2)
      sq += __shfl_xor_sync(0xffffffffu, sq, o);
    float inv = rsqrtf(sq / float(cols) + eps);
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

/// Copies rows of `inner` units (`Unit`: 1 to 16 bytes, the widest the row
/// size and the pointers allow) from the indexed positions of `data`.
template <typename Unit, typename Index>
__global__ void gatherKernel(const Unit *data, const void *indices, bool idx64,
                             Unit *out, Index outer, Index axisLen, Index count,
                             Index inner, int *bad) {
  Index total = outer * count * inner;
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < total;
       i += Index(gridDim.x) * blockDim.x) {
    Index unit = i % inner, row = i / inner;
    Index k = row % count, o = row / count;
    int64_t idx = idx64 ? static_cast<const int64_t *>(indices)[k]
                        : static_cast<const int *>(indices)[k];
    if (idx < 0)
      idx += axisLen;
    if (idx < 0 || idx >= axisLen) {
      *bad = 1;
      continue;
    }
    out[i] = data[(o * axisLen + Index(idx)) * inner + unit];
  }
}

/// Byte offset of the slice tuple t addresses within its batch, or -1.
__device__ inline int64_t tupleOffset(const NdTupleParams &p,
                                      const void *indices, bool idx64,
                                      int64_t t) {
  int64_t offset = 0;
  for (int d = 0; d < p.k; ++d) {
    int64_t i = idx64 ? static_cast<const int64_t *>(indices)[t * p.k + d]
                      : static_cast<const int *>(indices)[t * p.k + d];
    if (i < 0)
      i += p.extent[d];
    if (i < 0 || i >= p.extent[d])
      return -1;
    offset += i * p.strideBytes[d];
  }
  return offset + (t / p.tuplesPerBatch) * p.batchBytes;
}

template <typename Unit>
__global__ void gatherNdKernel(const Unit *data, const void *indices,
                               bool idx64, Unit *out, NdTupleParams p,
                               int *bad) {
  int64_t slice = p.sliceBytes / int64_t(sizeof(Unit));
  int64_t total = p.batches * p.tuplesPerBatch * slice;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t offset = tupleOffset(p, indices, idx64, i / slice);
    if (offset < 0) {
      *bad = 1;
      continue;
    }
    out[i] = data[offset / int64_t(sizeof(Unit)) + i % slice];
  }
}

/// Without a reduction, every (tuple, unit) pair in parallel: ONNX leaves
/// repeated tuples undefined.
template <typename Unit>
__global__ void scatterNdKernel(Unit *out, const void *indices, bool idx64,
                                const Unit *updates, NdTupleParams p,
                                int *bad) {
  int64_t slice = p.sliceBytes / int64_t(sizeof(Unit));
  int64_t total = p.tuplesPerBatch * slice;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t offset = tupleOffset(p, indices, idx64, i / slice);
    if (offset < 0) {
      *bad = 1;
      continue;
    }
    out[offset / int64_t(sizeof(Unit)) + i % slice] = updates[i];
  }
}

/// With a reduction, a thread per slice element applies the tuples in
/// order, so repeated tuples combine exactly as on the CPU.
__global__ void scatterNdReduceKernel(float *out, const void *indices,
                                      bool idx64, const float *updates,
                                      NdTupleParams p, int reduction,
                                      int *bad) {
  int64_t slice = p.sliceBytes / int64_t(sizeof(float));
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < slice;
       e += int64_t(gridDim.x) * blockDim.x)
    for (int64_t t = 0; t < p.tuplesPerBatch; ++t) {
      int64_t offset = tupleOffset(p, indices, idx64, t);
      if (offset < 0) {
        *bad = 1;
        return;
      }
      float &y = out[offset / int64_t(sizeof(float)) + e];
      float u = updates[t * slice + e];
      y = reduction == 1   ? y + u
          : reduction == 2 ? y * u
          : reduction == 3 ? fmaxf(y, u)
                           : fminf(y, u);
    }
}

__global__ void logicalKernel(int op, const bool *a, const bool *b, bool *y,
                              int64_t n, Strides st) {
  bool narrow = narrowIndex(n);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[2];
    offsetsOf(st, i, narrow, off);
    bool u = a[off[0]];
    bool v = op == 3 ? false : b[off[1]];
    y[i] = op == 0 ? u && v : op == 1 ? u || v : op == 2 ? u != v : !u;
  }
}

__global__ void floatTestKernel(const float *x, bool *y, int64_t n, bool nan,
                                bool positive, bool negative) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = x[i];
    y[i] = nan ? isnan(v) : isinf(v) && (v > 0.f ? positive : negative);
  }
}

__device__ inline float reduceInit(int op) {
  return op == 2 ? -INFINITY : op == 3 ? INFINITY : op == 4 ? 1.f : 0.f;
}

__device__ inline float reduceStep(int op, float acc, float v) {
  switch (op) {
  case 2:
    return fmaxf(acc, v);
  case 3:
    return fminf(acc, v);
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
__global__ void reduceKernel(const float *x, float *y, int64_t outCount,
                             Strides keep, Strides reduced, int64_t reduceCount,
                             int op) {
  extern __shared__ float partial[];
  bool narrowKeep = narrowIndex(outCount),
       narrowReduced = narrowIndex(reduceCount);
  int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  float acc = reduceInit(op);
  if (o < outCount) {
    int64_t base = offsetOf(keep, 0, o, narrowKeep);
    for (int64_t r = threadIdx.y; r < reduceCount; r += blockDim.y)
      acc =
          reduceStep(op, acc, x[base + offsetOf(reduced, 0, r, narrowReduced)]);
  }
  partial[threadIdx.y * blockDim.x + threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || o >= outCount)
    return;
  for (unsigned k = 1; k < blockDim.y; ++k)
    acc = reduceStep(op, acc, partial[k * blockDim.x + threadIdx.x]);
  y[o] = op == 1 ? acc / float(reduceCount) : acc;
}

template <typename T>
__global__ void compareKernel(int op, const T *a, const T *b, bool *y,
                              int64_t n, Strides st) {
  bool narrow = narrowIndex(n);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[2];
    offsetsOf(st, i, narrow, off);
    T u = a[off[0]], v = b[off[1]];
    bool r = false;
    switch (op) {
    case 0:
      r = u == v;
      break;
    case 1:
      r = u < v;
      break;
    case 2:
      r = u > v;
      break;
    case 3:
      r = u <= v;
      break;
    case 4:
      r = u >= v;
      break;
    }
    y[i] = r;
  }
}

template <typename T>
__global__ void whereKernel(const bool *c, const T *x, const T *y, T *out,
                            int64_t n, Strides st) {
  bool narrow = narrowIndex(n);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[3];
    offsetsOf(st, i, narrow, off);
    out[i] = c[off[0]] ? x[off[1]] : y[off[2]];
  }
}

template <typename From, typename To> __device__ inline To convert(From v) {
  return static_cast<To>(v);
}
template <> __device__ inline bool convert<float, bool>(float v) {
  return v != 0.f;
}
template <> __device__ inline float convert<__half, float>(__half v) {
  return __half2float(v);
}
template <> __device__ inline __half convert<float, __half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ inline int64_t convert<float, int64_t>(float v) {
  return isnan(v) ? 0 : static_cast<int64_t>(v);
}
template <> __device__ inline int32_t convert<float, int32_t>(float v) {
  return isnan(v) ? 0 : static_cast<int32_t>(v);
}

template <typename From, typename To>
__global__ void castKernel(const From *x, To *y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = convert<From, To>(x[i]);
}

__global__ void padKernel(const float *x, float *y, int64_t n, PadParams p,
                          float value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = i, src = 0;
    bool inside = true;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t c = rem % p.outShape[d] - p.begin[d], size = p.inShape[d];
      rem /= p.outShape[d];
      if (c < 0 || c >= size) {
        if (p.mode == PadMode::Edge) {
          c = c < 0 ? 0 : size - 1;
        } else if (p.mode == PadMode::Reflect) {
          // Mirrored about the edge elements, which are not repeated.
          int64_t period = 2 * (size - 1);
          c = period ? ((c % period) + period) % period : 0;
          if (c >= size)
            c = period - c;
        } else {
          inside = false;
        }
      }
      src += c * p.inStride[d];
    }
    y[i] = inside ? x[src] : value;
  }
}

} // namespace

bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

cudaError_t launchUnaryF32(ew::Step op, const float *x, float *y, int64_t n,
                           float p, float q, cudaStream_t s) {
  if (n % 4 == 0 && aligned16(x) && aligned16(y))
    unaryKernel4<<<blocksFor(n / 4), kThreads, 0, s>>>(
        op, reinterpret_cast<const float4 *>(x), reinterpret_cast<float4 *>(y),
        n / 4, p, q);
  else
    unaryKernel<<<blocksFor(n), kThreads, 0, s>>>(op, x, y, n, p, q);
  return cudaGetLastError();
}

bool fusedVectorizable(const FusedParams &p) {
  if (p.n % 4 != 0 || !aligned16(p.out))
    return false;
  for (int k = 0; k < p.inputs; ++k) {
    if (p.mode[k] == FusedParams::Same && !aligned16(p.in[k]))
      return false;
    if (p.mode[k] != FusedParams::Broadcast)
      continue;
    unsigned innerStride = p.stride[k][p.rank - 1];
    if (p.shape[p.rank - 1] % 4 != 0 || innerStride > 1 ||
        (innerStride == 1 && !aligned16(p.in[k])))
      return false;
  }
  return true;
}

unsigned fusedBlocks(const FusedParams &p, bool vectorized) {
  static_assert(kFusedThreads == kThreads, "blocksFor counts blocks of these");
  return static_cast<unsigned>(blocksFor(vectorized ? p.n / 4 : p.n));
}

cudaError_t launchFusedElementwise(const FusedParams &p, cudaStream_t s) {
  bool vectorized = fusedVectorizable(p);
  if (vectorized)
    fusedKernel4<<<fusedBlocks(p, true), kFusedThreads, 0, s>>>(p);
  else
    fusedKernel<<<fusedBlocks(p, false), kFusedThreads, 0, s>>>(p);
  return cudaGetLastError();
}

cudaError_t launchBinaryF32(ew::Step op, const float *a, const float *b,
                            float *y, int64_t n, const Strides &st, bool same,
                            bool relu, cudaStream_t s) {
  if (same && n % 4 == 0 && aligned16(a) && aligned16(b) && aligned16(y))
    binarySameKernel4<<<blocksFor(n / 4), kThreads, 0, s>>>(
        op, reinterpret_cast<const float4 *>(a),
        reinterpret_cast<const float4 *>(b), reinterpret_cast<float4 *>(y),
        n / 4, relu);
  else if (same)
    binarySameKernel<<<blocksFor(n), kThreads, 0, s>>>(op, a, b, y, n, relu);
  else
    binaryKernel<<<blocksFor(n), kThreads, 0, s>>>(op, a, b, y, n, st, relu);
  return cudaGetLastError();
}

cudaError_t launchStridedCopy(const void *in, void *out, int64_t n,
                              const Strides &st, int64_t base, size_t elemSize,
                              cudaStream_t s) {
  switch (elemSize) {
  case 1:
    stridedCopyKernel<<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<const uint8_t *>(in), static_cast<uint8_t *>(out), n, st,
        base);
    break;
  case 2:
    stridedCopyKernel<<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<const uint16_t *>(in), static_cast<uint16_t *>(out), n, st,
        base);
    break;
  case 4:
    stridedCopyKernel<<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<const uint32_t *>(in), static_cast<uint32_t *>(out), n, st,
        base);
    break;
  case 8:
    stridedCopyKernel<<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<const uint64_t *>(in), static_cast<uint64_t *>(out), n, st,
        base);
    break;
  case 16:
    stridedCopyKernel<<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<const uint4 *>(in), static_cast<uint4 *>(out), n, st, base);
    break;
  default:
    return cudaErrorInvalidValue;
  }
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
  int64_t n = p.planes * p.out[0] * p.out[1] * p.out[2];
  int64_t inputs = p.planes * p.in[0] * p.in[1] * p.in[2];
  bool narrow = narrowIndex(n) && narrowIndex(inputs);
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
    // Rows held in registers measured faster at 128 (BERT-base's attention,
    // 0.49 -> 0.44 ms) but slower at 197 and 256 (ViT, GPT-2: 0.88 -> 1.23
    // ms) than reading the row three times from cache (benchmarks.md,
    // session 10).
    if (axis <= 32 * kSoftmaxPerLane)
      softmaxRowsInRegisters<kSoftmaxPerLane><<<blocks, kThreads, 0, s>>>(
          x, y, outer, static_cast<int>(axis), log, nanToZero, bias);
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

template <typename Unit>
cudaError_t launchGatherUnits(const void *data, const void *indices, bool idx64,
                              void *out, int64_t outer, int64_t axisLen,
                              int64_t count, int64_t innerBytes, int *badIndex,
                              cudaStream_t s) {
  int64_t inner = innerBytes / int64_t(sizeof(Unit));
  int64_t total = outer * count * inner;
  auto *in = static_cast<const Unit *>(data);
  auto *result = static_cast<Unit *>(out);
  // 32-bit index arithmetic where every offset fits.
  if (total < (int64_t(1) << 31) &&
      outer * axisLen * inner < (int64_t(1) << 31))
    gatherKernel<Unit, int32_t><<<blocksFor(total), kThreads, 0, s>>>(
        in, indices, idx64, result, int32_t(outer), int32_t(axisLen),
        int32_t(count), int32_t(inner), badIndex);
  else
    gatherKernel<Unit, int64_t><<<blocksFor(total), kThreads, 0, s>>>(
        in, indices, idx64, result, outer, axisLen, count, inner, badIndex);
  return cudaGetLastError();
}

cudaError_t launchGather(const void *data, const void *indices, bool idx64,
                         void *out, int64_t outer, int64_t axisLen,
                         int64_t count, int64_t innerBytes, int *badIndex,
                         cudaStream_t s) {
  auto fits = [&](int64_t unit) {
    return innerBytes % unit == 0 &&
           reinterpret_cast<uintptr_t>(data) % unit == 0 &&
           reinterpret_cast<uintptr_t>(out) % unit == 0;
  };
  if (fits(16))
    return launchGatherUnits<uint4>(data, indices, idx64, out, outer, axisLen,
                                    count, innerBytes, badIndex, s);
  if (fits(8))
    return launchGatherUnits<uint2>(data, indices, idx64, out, outer, axisLen,
                                    count, innerBytes, badIndex, s);
  if (fits(4))
    return launchGatherUnits<unsigned>(data, indices, idx64, out, outer,
                                       axisLen, count, innerBytes, badIndex, s);
  return launchGatherUnits<unsigned char>(data, indices, idx64, out, outer,
                                          axisLen, count, innerBytes, badIndex,
                                          s);
}

/// The widest copy unit that divides `bytes` and aligns both pointers.
static int copyUnit(int64_t bytes, const void *a, const void *b) {
  for (int unit : {16, 8, 4, 2})
    if (bytes % unit == 0 && reinterpret_cast<uintptr_t>(a) % unit == 0 &&
        reinterpret_cast<uintptr_t>(b) % unit == 0)
      return unit;
  return 1;
}

/// Calls fn(Unit{}) with the unsigned type of `unit` bytes (16, 8, 4, 2, 1).
template <typename Fn> void withCopyUnit(int unit, Fn &&fn) {
  switch (unit) {
  case 16:
    fn(uint4{});
    break;
  case 8:
    fn(uint2{});
    break;
  case 4:
    fn(0u);
    break;
  case 2:
    fn(static_cast<unsigned short>(0));
    break;
  default:
    fn(static_cast<unsigned char>(0));
  }
}

/// Concatenation (or split) of rows: unit i of the whole is unit i % row
/// of row i / row, which part k holds at column i % row - (the units of
/// the parts before it). Rows are short (a rotary embedding's halves), so
/// one kernel over every part beats a 2-D copy per part.
template <typename Unit>
__global__ void concatRowsKernel(ConcatRowsParams p, int64_t rowUnits,
                                 int64_t total, bool narrow) {
  int64_t partUnits[kConcatMaxParts];
#pragma unroll
  for (int k = 0; k < kConcatMaxParts; ++k)
    partUnits[k] = p.partBytes[k] / int64_t(sizeof(Unit));
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t row, col;
    if (narrow) {
      row = uint32_t(i) / uint32_t(rowUnits);
      col = uint32_t(i) - uint32_t(row) * uint32_t(rowUnits);
    } else {
      row = i / rowUnits;
      col = i % rowUnits;
    }
    int k = 0;
    while (k + 1 < p.count && col >= partUnits[k]) {
      col -= partUnits[k];
      ++k;
    }
    Unit *whole = static_cast<Unit *>(p.whole) + i;
    Unit *part = static_cast<Unit *>(p.parts[k]) + row * partUnits[k] + col;
    if (p.split)
      *part = *whole;
    else
      *whole = *part;
  }
}

cudaError_t launchConcatRows(const ConcatRowsParams &p, cudaStream_t s) {
  int64_t rowBytes = 0;
  int unit = 16;
  for (int k = 0; k < p.count; ++k) {
    rowBytes += p.partBytes[k];
    unit = std::min(unit, copyUnit(p.partBytes[k], p.parts[k], p.whole));
  }
  int64_t total = p.outer * rowBytes / unit;
  if (total == 0)
    return cudaSuccess;
  withCopyUnit(unit, [&](auto tag) {
    using Unit = decltype(tag);
    concatRowsKernel<Unit><<<blocksFor(total), kThreads, 0, s>>>(
        p, rowBytes / unit, total, narrowIndex(total));
  });
  return cudaGetLastError();
}

cudaError_t launchGatherNd(const void *data, const void *indices, bool idx64,
                           void *out, const NdTupleParams &p, int *badIndex,
                           cudaStream_t s) {
  int64_t bytes = p.batches * p.tuplesPerBatch * p.sliceBytes;
  if (bytes == 0)
    return cudaSuccess;
  int unit = copyUnit(p.sliceBytes, data, out);
  withCopyUnit(unit, [&](auto tag) {
    using Unit = decltype(tag);
    gatherNdKernel<Unit><<<blocksFor(bytes / unit), kThreads, 0, s>>>(
        static_cast<const Unit *>(data), indices, idx64,
        static_cast<Unit *>(out), p, badIndex);
  });
  return cudaGetLastError();
}

cudaError_t launchScatterNd(void *out, const void *indices, bool idx64,
                            const void *updates, const NdTupleParams &p,
                            int reduction, int *badIndex, cudaStream_t s) {
  int64_t bytes = p.tuplesPerBatch * p.sliceBytes;
  if (bytes == 0)
    return cudaSuccess;
  if (reduction != 0) {
    scatterNdReduceKernel<<<blocksFor(p.sliceBytes / 4), kThreads, 0, s>>>(
        static_cast<float *>(out), indices, idx64,
        static_cast<const float *>(updates), p, reduction, badIndex);
    return cudaGetLastError();
  }
  int unit = copyUnit(p.sliceBytes, out, updates);
  withCopyUnit(unit, [&](auto tag) {
    using Unit = decltype(tag);
    scatterNdKernel<Unit><<<blocksFor(bytes / unit), kThreads, 0, s>>>(
        static_cast<Unit *>(out), indices, idx64,
        static_cast<const Unit *>(updates), p, badIndex);
  });
  return cudaGetLastError();
}

cudaError_t launchLogical(int op, const bool *a, const bool *b, bool *y,
                          int64_t n, const Strides &st, cudaStream_t s) {
  if (n == 0)
    return cudaSuccess;
  logicalKernel<<<blocksFor(n), kThreads, 0, s>>>(op, a, b, y, n, st);
  return cudaGetLastError();
}

cudaError_t launchFloatTest(const float *x, bool *y, int64_t n, bool nan,
                            bool positive, bool negative, cudaStream_t s) {
  if (n == 0)
    return cudaSuccess;
  floatTestKernel<<<blocksFor(n), kThreads, 0, s>>>(x, y, n, nan, positive,
                                                    negative);
  return cudaGetLastError();
}

cudaError_t launchReduceF32(const float *x, float *y, int64_t outCount,
                            const Strides &keep, const Strides &reduced,
                            int64_t reduceCount, int op, cudaStream_t s) {
  // Split each reduction over up to 16 threads while the outputs alone
  // would leave most of the GPU idle (about 64K threads keep it busy).
  unsigned split = 1;
  while (split < 16 && outCount * split < (int64_t(1) << 16) &&
         reduceCount >= 4 * int64_t(split))
    split *= 2;
  dim3 block(kThreads / split, split);
  int64_t blocks = (outCount + block.x - 1) / block.x;
  reduceKernel<<<static_cast<unsigned>(blocks), block, kThreads * sizeof(float),
                 s>>>(x, y, outCount, keep, reduced, reduceCount, op);
  return cudaGetLastError();
}

cudaError_t launchCompare(int op, DType dtype, const void *a, const void *b,
                          bool *y, int64_t n, const Strides &st,
                          cudaStream_t s) {
  switch (dtype) {
  case DType::F32:
    compareKernel<<<blocksFor(n), kThreads, 0, s>>>(
        op, static_cast<const float *>(a), static_cast<const float *>(b), y, n,
        st);
    break;
  case DType::I64:
    compareKernel<<<blocksFor(n), kThreads, 0, s>>>(
        op, static_cast<const int64_t *>(a), static_cast<const int64_t *>(b), y,
        n, st);
    break;
  case DType::I32:
    compareKernel<<<blocksFor(n), kThreads, 0, s>>>(
        op, static_cast<const int32_t *>(a), static_cast<const int32_t *>(b), y,
        n, st);
    break;
  default:
    return cudaErrorNotSupported;
  }
  return cudaGetLastError();
}

cudaError_t launchWhere(const bool *c, const void *x, const void *y, void *out,
                        int64_t n, const Strides &st, size_t elemSize,
                        cudaStream_t s) {
  switch (elemSize) {
  case 1:
    whereKernel<<<blocksFor(n), kThreads, 0, s>>>(
        c, static_cast<const uint8_t *>(x), static_cast<const uint8_t *>(y),
        static_cast<uint8_t *>(out), n, st);
    break;
  case 2:
    whereKernel<<<blocksFor(n), kThreads, 0, s>>>(
        c, static_cast<const uint16_t *>(x), static_cast<const uint16_t *>(y),
        static_cast<uint16_t *>(out), n, st);
    break;
  case 4:
    whereKernel<<<blocksFor(n), kThreads, 0, s>>>(
        c, static_cast<const uint32_t *>(x), static_cast<const uint32_t *>(y),
        static_cast<uint32_t *>(out), n, st);
    break;
  case 8:
    whereKernel<<<blocksFor(n), kThreads, 0, s>>>(
        c, static_cast<const uint64_t *>(x), static_cast<const uint64_t *>(y),
        static_cast<uint64_t *>(out), n, st);
    break;
  default:
    return cudaErrorNotSupported;
  }
  return cudaGetLastError();
}

namespace {
template <typename From, typename To>
cudaError_t castAs(const void *x, void *y, int64_t n, cudaStream_t s) {
  castKernel<From, To><<<blocksFor(n), kThreads, 0, s>>>(
      static_cast<const From *>(x), static_cast<To *>(y), n);
  return cudaGetLastError();
}

/// The conversions that show up in exported networks (masks, indices,
/// half precision I/O); others run on the host.
template <typename Fn> bool dispatchCast(DType from, DType to, Fn &&fn) {
#define PARTC_CAST(F, T, CF, CT)                                               \
  if (from == DType::F && to == DType::T) {                                    \
    fn(CF{}, CT{});                                                            \
    return true;                                                               \
  }
  PARTC_CAST(F32, I64, float, int64_t)
  PARTC_CAST(I64, F32, int64_t, float)
  PARTC_CAST(F32, I32, float, int32_t)
  PARTC_CAST(I32, F32, int32_t, float)
  PARTC_CAST(I64, I32, int64_t, int32_t)
  PARTC_CAST(I32, I64, int32_t, int64_t)
  PARTC_CAST(F32, Bool, float, bool)
  PARTC_CAST(Bool, F32, bool, float)
  PARTC_CAST(I64, Bool, int64_t, bool)
  PARTC_CAST(Bool, I64, bool, int64_t)
  PARTC_CAST(I32, Bool, int32_t, bool)
  PARTC_CAST(Bool, I32, bool, int32_t)
  PARTC_CAST(F64, F32, double, float)
  PARTC_CAST(F32, F64, float, double)
  PARTC_CAST(F32, F16, float, __half)
  PARTC_CAST(F16, F32, __half, float)
#undef PARTC_CAST
  return false;
}
/// Deterministic values in [-1, 1) from the element index (a hash, so that
/// neighbouring elements are unrelated).
__global__ void fillPatternKernel(float *x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    x[i] = static_cast<float>(h & 0xffffff) / 8388608.f - 1.f;
  }
}

/// result[0] = max |a - b|, result[1] = max |a| (as ordered float bits:
/// non-negative floats compare like their bit patterns).
__global__ void maxDifferenceKernel(const float *a, const float *b, int64_t n,
                                    unsigned *result) {
  float diff = 0.f, mag = 0.f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    float d = fabsf(a[i] - b[i]);
    // NaN anywhere counts as the largest difference.
    diff = d == d ? fmaxf(diff, d) : FLT_MAX;
    mag = fmaxf(mag, fabsf(a[i]));
  }
  atomicMax(&result[0], __float_as_uint(diff));
  atomicMax(&result[1], __float_as_uint(mag));
}

__global__ void hostGateKernel(const volatile unsigned *word, unsigned value,
                               uint64_t timeoutNs) {
  auto now = [] {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  };
  uint64_t start = now();
  while (*word < value && now() - start < timeoutNs)
    __nanosleep(1000);
}

} // namespace

bool castSupported(DType from, DType to) {
  return dispatchCast(from, to, [](auto, auto) {});
}

cudaError_t launchCast(DType from, DType to, const void *x, void *y, int64_t n,
                       cudaStream_t s) {
  cudaError_t err = cudaErrorNotSupported;
  dispatchCast(from, to, [&](auto f, auto t) {
    err = castAs<decltype(f), decltype(t)>(x, y, n, s);
  });
  return err;
}

cudaError_t launchPadF32(const float *x, float *y, int64_t n,
                         const PadParams &p, float value, cudaStream_t s) {
  padKernel<<<blocksFor(n), kThreads, 0, s>>>(x, y, n, p, value);
  return cudaGetLastError();
}

__global__ void padChannelsKernel(const float *x, float *y, int64_t n,
                                  int channels, int padded) {
  bool narrow = narrowIndex(n);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t row, ch;
    if (narrow) {
      row = uint32_t(i) / uint32_t(padded);
      ch = uint32_t(i) % uint32_t(padded);
    } else {
      row = i / padded;
      ch = i % padded;
    }
    y[i] = ch < channels ? x[row * channels + ch] : 0.f;
  }
}

cudaError_t launchPadChannels(const float *x, float *y, int64_t rows,
                              int channels, int padded, cudaStream_t s) {
  int64_t n = rows * padded;
  if (n == 0)
    return cudaSuccess;
  padChannelsKernel<<<blocksFor(n), kThreads, 0, s>>>(x, y, n, channels,
                                                      padded);
  return cudaGetLastError();
}

__global__ void batchPointersKernel(const float *x, const float *y, float *c,
                                    const int64_t *offsets, int count,
                                    void **pointers) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 3 * count)
    return;
  const float *base = i < count ? x : i < 2 * count ? y : c;
  pointers[i] = const_cast<float *>(base + offsets[i]);
}

cudaError_t launchBatchPointers(const float *x, const float *y, float *c,
                                const int64_t *offsets, int count,
                                void **pointers, cudaStream_t s) {
  batchPointersKernel<<<blocksFor(3 * int64_t{count}), kThreads, 0, s>>>(
      x, y, c, offsets, count, pointers);
  return cudaGetLastError();
}

cudaError_t launchFillPattern(float *x, int64_t n, uint32_t seed,
                              cudaStream_t s) {
  fillPatternKernel<<<blocksFor(n), kThreads, 0, s>>>(x, n, seed);
  return cudaGetLastError();
}

cudaError_t launchMaxDifference(const float *a, const float *b, int64_t n,
                                unsigned *result, cudaStream_t s) {
  cudaError_t err = cudaMemsetAsync(result, 0, 2 * sizeof(unsigned), s);
  if (err != cudaSuccess)
    return err;
  maxDifferenceKernel<<<blocksFor(n), kThreads, 0, s>>>(a, b, n, result);
  return cudaGetLastError();
}

cudaError_t launchHostGate(const unsigned *word, unsigned value,
                           uint64_t timeoutNs, cudaStream_t s) {
  hostGateKernel<<<1, 1, 0, s>>>(word, value, timeoutNs);
  return cudaGetLastError();
}

} // namespace partc::runtime::cuda
