//===- FusedChain.cuh - Fused element-wise chains on the GPU ---*- CUDA -*-===//
//
// Compiled twice: by nvcc into Kernels.cu, whose interpreter runs any
// fused_elementwise program, and by NVRTC at load time under the code that
// ChainCodegen.cpp generates for one program, so that both compute every
// step alike. NVRTC sees this file and ElementwiseOps.h only: no system
// headers.
// The host side (g++) reads FusedParams alone.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_FUSEDCHAIN_CUH
#define PARTC_RUNTIME_CUDA_FUSEDCHAIN_CUH

#include "runtime/kernels/ElementwiseOps.h"

namespace partc::runtime::cuda {

constexpr int kFusedMaxSteps = fused::kMaxSteps;
constexpr int kFusedMaxInputs = fused::kMaxInputs;
constexpr int kFusedMaxRank = fused::kMaxRank;
/// Threads per block of every fused-chain kernel.
constexpr int kFusedThreads = 256;

/// A fused element-wise chain over fewer than 2^31 elements, passed to the
/// kernel by value. Each input is read at the output's index (Same), at 0
/// (Scalar) or through `stride` over the collapsed `shape` (Broadcast).
struct FusedParams {
  enum Mode : unsigned char { Same, Scalar, Broadcast, Unused };
  /// Element type of an operand in memory; every step computes in f32.
  enum Element : unsigned char { F32, BF16, F16 };
  int steps = 0, inputs = 0, rank = 0;
  unsigned char step[kFusedMaxSteps] = {};
  signed char lhs[kFusedMaxSteps] = {}, rhs[kFusedMaxSteps] = {};
  /// Each step's parameters (ElementwiseOps.h), zero where it takes none.
  float param[kFusedMaxSteps][2] = {};
  unsigned char mode[kFusedMaxInputs] = {};
  unsigned shape[kFusedMaxRank] = {};
  unsigned stride[kFusedMaxInputs][kFusedMaxRank] = {};
  unsigned char element[kFusedMaxInputs] = {};
  unsigned char outElement = F32;
  const void *in[kFusedMaxInputs] = {};
  void *out = nullptr;
  unsigned n = 0;
};

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

/// One step on f32 values. The unfused unary and binary kernels compute
/// their ops through it too; where `step` is a constant, as in generated
/// code, the switch folds away.
__device__ __forceinline__ float fusedStep(ew::Step step, float a, float b,
                                           float p, float q) {
  return ew::applyStep<float>(step, a, b, p, q);
}

/// 16-bit floats to and from f32, rounded to nearest even as the CPU
/// backend's floatToBf16 and floatToHalf do (no headers under NVRTC).
__device__ __forceinline__ float wideFrom16(unsigned short h,
                                            unsigned char element) {
  if (element == FusedParams::BF16)
    return __uint_as_float(static_cast<unsigned>(h) << 16);
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short narrowTo16(float f,
                                                     unsigned char element) {
  if (element == FusedParams::BF16) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
      return static_cast<unsigned short>((u >> 16) | 0x40);
    return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
  }
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

/// Element `i` of input k, as f32.
__device__ __forceinline__ float fusedLoad(const FusedParams &p, int k,
                                           unsigned i) {
  if (p.element[k] == FusedParams::F32)
    return static_cast<const float *>(p.in[k])[i];
  return wideFrom16(static_cast<const unsigned short *>(p.in[k])[i],
                    p.element[k]);
}

/// Elements i..i+3 of input k (i a multiple of 4; 16 or 8 bytes).
__device__ __forceinline__ float4 fusedLoad4(const FusedParams &p, int k,
                                             unsigned i) {
  if (p.element[k] == FusedParams::F32)
    return *reinterpret_cast<const float4 *>(
        static_cast<const float *>(p.in[k]) + i);
  uint2 u = *reinterpret_cast<const uint2 *>(
      static_cast<const unsigned short *>(p.in[k]) + i);
  unsigned char e = p.element[k];
  return make_float4(wideFrom16(u.x & 0xffff, e), wideFrom16(u.x >> 16, e),
                     wideFrom16(u.y & 0xffff, e), wideFrom16(u.y >> 16, e));
}

__device__ __forceinline__ void fusedStore(const FusedParams &p, unsigned i,
                                           float v) {
  if (p.outElement == FusedParams::F32)
    static_cast<float *>(p.out)[i] = v;
  else
    static_cast<unsigned short *>(p.out)[i] = narrowTo16(v, p.outElement);
}

__device__ __forceinline__ void fusedStore4(const FusedParams &p, unsigned i,
                                            const float (&r)[4]) {
  if (p.outElement == FusedParams::F32) {
    *reinterpret_cast<float4 *>(static_cast<float *>(p.out) + i) =
        make_float4(r[0], r[1], r[2], r[3]);
    return;
  }
  unsigned char e = p.outElement;
  uint2 u;
  u.x =
      narrowTo16(r[0], e) | (static_cast<unsigned>(narrowTo16(r[1], e)) << 16);
  u.y =
      narrowTo16(r[2], e) | (static_cast<unsigned>(narrowTo16(r[3], e)) << 16);
  *reinterpret_cast<uint2 *>(static_cast<unsigned short *>(p.out) + i) = u;
}

// The loops below take a Chain: kInputs, mode(p, k) (FusedParams::Mode,
// Unused past the inputs) and operator()(p, x), the program on one
// element's inputs. Generated chains answer with constants.

/// Offsets into the broadcast inputs of output element `i`, the index
/// decomposed once for all of them.
template <class Chain>
__device__ __forceinline__ void fusedOffsets(const FusedParams &p,
                                             const Chain &chain, unsigned i,
                                             unsigned (&off)[Chain::kInputs]) {
  bool any = false;
#pragma unroll
  for (int k = 0; k < Chain::kInputs; ++k) {
    off[k] = 0;
    any = any || chain.mode(p, k) == FusedParams::Broadcast;
  }
  if (!any)
    return;
  for (int d = p.rank - 1; d >= 0; --d) {
    unsigned c = i % p.shape[d];
    i /= p.shape[d];
#pragma unroll
    for (int k = 0; k < Chain::kInputs; ++k)
      if (chain.mode(p, k) == FusedParams::Broadcast)
        off[k] += c * p.stride[k][d];
  }
}

/// One element per thread and step.
template <class Chain>
__device__ void runFusedChain(const FusedParams &p, const Chain &chain) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n;
       i += gridDim.x * blockDim.x) {
    unsigned off[Chain::kInputs];
    fusedOffsets(p, chain, i, off);
    float x[Chain::kInputs];
#pragma unroll
    for (int k = 0; k < Chain::kInputs; ++k) {
      unsigned char m = chain.mode(p, k);
      x[k] = m == FusedParams::Same        ? fusedLoad(p, k, i)
             : m == FusedParams::Scalar    ? fusedLoad(p, k, 0)
             : m == FusedParams::Broadcast ? fusedLoad(p, k, off[k])
                                           : 0.f;
    }
    fusedStore(p, i, chain(p, x));
  }
}

__device__ __forceinline__ float4 splat4(float v) {
  return make_float4(v, v, v, v);
}
__device__ __forceinline__ float lane4(const float4 &v, int lane) {
  return lane == 0 ? v.x : lane == 1 ? v.y : lane == 2 ? v.z : v.w;
}

/// Four consecutive elements per thread through 16-byte accesses. The
/// launcher checks that this reads right: n and the innermost extent are
/// multiples of 4, the pointers 16-byte aligned, and every broadcast input
/// walks the innermost dimension with stride 0 or 1.
template <class Chain>
__device__ void runFusedChain4(const FusedParams &p, const Chain &chain) {
  constexpr int kInputs = Chain::kInputs;
  unsigned n4 = p.n / 4;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n4;
       i += gridDim.x * blockDim.x) {
    unsigned off[kInputs];
    fusedOffsets(p, chain, 4 * i, off);
    float4 x[kInputs];
#pragma unroll
    for (int k = 0; k < kInputs; ++k) {
      unsigned char m = chain.mode(p, k);
      if (m == FusedParams::Same)
        x[k] = fusedLoad4(p, k, 4 * i);
      else if (m == FusedParams::Scalar)
        x[k] = splat4(fusedLoad(p, k, 0));
      else if (m == FusedParams::Broadcast)
        x[k] = p.stride[k][p.rank - 1] != 0 ? fusedLoad4(p, k, off[k])
                                            : splat4(fusedLoad(p, k, off[k]));
      else
        x[k] = splat4(0.f);
    }
    float r[4];
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      float xs[kInputs];
#pragma unroll
      for (int k = 0; k < kInputs; ++k)
        xs[k] = lane4(x[k], lane);
      r[lane] = chain(p, xs);
    }
    fusedStore4(p, 4 * i, r);
  }
}

#endif // __CUDACC__ || __CUDACC_RTC__

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_FUSEDCHAIN_CUH
