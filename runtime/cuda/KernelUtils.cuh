//===- KernelUtils.cuh - What partc's own CUDA kernels share ----*- CUDA
//-*-===//
//
// Launch geometry, index arithmetic over up to kMaxRank dimensions, and the
// widest copy unit a size and two pointers allow; included by each family's
// .cu file.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_KERNELUTILS_CUH
#define PARTC_RUNTIME_CUDA_KERNELUTILS_CUH

#include "runtime/cuda/CudaKernels.h"

#include <cfloat>
#include <cmath>
#include <cstdint>

namespace partc::runtime::cuda {

constexpr int kThreads = 256;

inline int blocksFor(int64_t n) {
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

/// The widest copy unit that divides `bytes` and aligns both pointers.
inline int copyUnit(int64_t bytes, const void *a, const void *b) {
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

__device__ inline float maybeRelu(float x, bool relu) {
  return relu && x < 0.f ? 0.f : x;
}

/// A row's mean and 1 / sqrt(variance + eps) by one warp, from the row's
/// first `chunks` float4s of `v` (lane l holds elements 4 (32 j + l) to
/// 4 (32 j + l) + 3 in v[j]); the variance about the mean. Layer norm's
/// forward and backward kernels share it, so both see the same numbers.
template <int MaxChunks>
__device__ inline void warpRowStatistics(const float4 (&v)[MaxChunks],
                                         int chunks, int64_t cols, float eps,
                                         float &mean, float &inv) {
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < MaxChunks; ++j)
    if (j < chunks)
      sum += v[j].x + v[j].y + v[j].z + v[j].w;
  for (int o = 16; o > 0; o /= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
  mean = sum / float(cols);
  float sq = 0.f;
#pragma unroll
  for (int j = 0; j < MaxChunks; ++j)
    if (j < chunks) {
      float a = v[j].x - mean, b = v[j].y - mean, c = v[j].z - mean,
            d = v[j].w - mean;
      sq += a * a + b * b + c * c + d * d;
    }
  for (int o = 16; o > 0; o /= 2)
    sq += __shfl_xor_sync(0xffffffffu, sq, o);
  inv = rsqrtf(sq / float(cols) + eps);
}

/// SiLU, s * sigmoid(s), as the CPU backend's sigmoid computes it.
__device__ __forceinline__ float siluOf(float s) {
  return s * (1.f / (1.f + expf(-s)));
}

inline bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_KERNELUTILS_CUH
