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
  int steps = 0, inputs = 0, rank = 0;
  unsigned char step[kFusedMaxSteps] = {};
  signed char lhs[kFusedMaxSteps] = {}, rhs[kFusedMaxSteps] = {};
  /// Each step's parameters (ElementwiseOps.h), zero where it takes none.
  float param[kFusedMaxSteps][2] = {};
  unsigned char mode[kFusedMaxInputs] = {};
  unsigned shape[kFusedMaxRank] = {};
  unsigned stride[kFusedMaxInputs][kFusedMaxRank] = {};
  const float *in[kFusedMaxInputs] = {};
  float *out = nullptr;
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
      x[k] = m == FusedParams::Same        ? p.in[k][i]
             : m == FusedParams::Scalar    ? p.in[k][0]
             : m == FusedParams::Broadcast ? p.in[k][off[k]]
                                           : 0.f;
    }
    p.out[i] = chain(p, x);
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
        x[k] = reinterpret_cast<const float4 *>(p.in[k])[i];
      else if (m == FusedParams::Scalar)
        x[k] = splat4(p.in[k][0]);
      else if (m == FusedParams::Broadcast)
        x[k] = p.stride[k][p.rank - 1] != 0
                   ? *reinterpret_cast<const float4 *>(p.in[k] + off[k])
                   : splat4(p.in[k][off[k]]);
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
    reinterpret_cast<float4 *>(p.out)[i] = make_float4(r[0], r[1], r[2], r[3]);
  }
}

#endif // __CUDACC__ || __CUDACC_RTC__

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_FUSEDCHAIN_CUH
