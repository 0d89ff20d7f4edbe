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
constexpr int kFusedMaxParts = fused::kMaxConcatParts;
/// Threads per block of every fused-chain kernel.
constexpr int kFusedThreads = 256;

/// A fused element-wise chain over fewer than 2^31 elements, passed to the
/// kernel by value. Each input is read at the output's index (Same), at 0
/// (Scalar), through `stride` over the collapsed `shape` (Broadcast), or,
/// input 0 only, from the `parts` concatenated along the innermost axis
/// (Parts).
struct FusedParams {
  enum Mode : unsigned char { Same, Scalar, Broadcast, Unused, Parts };
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
  /// Parts of input 0 (mode Parts), each [rows, width of part q]: the
  /// column where part q starts (partStart[parts]: the innermost extent),
  /// and the element where it starts in the parts' order (rows x start).
  int parts = 0;
  const void *part[kFusedMaxParts] = {};
  unsigned partStart[kFusedMaxParts + 1] = {};
  unsigned partBegin[kFusedMaxParts + 1] = {};
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

/// Two floats rounded as narrowTo16 does, `lo` in the low half. One
/// conversion instruction rounds both (cvt.rn.bf16x2/f16x2, sm_80 on);
/// NaNs, which it would make canonical, take narrowTo16's way so that
/// their bits match the CPU backend's.
__device__ __forceinline__ unsigned narrowPairTo16(float lo, float hi,
                                                   unsigned char element) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  if (lo == lo && hi == hi) {
    unsigned u;
    if (element == FusedParams::BF16)
      asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
    else
      asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
    return u;
  }
#endif
  return narrowTo16(lo, element) |
         (static_cast<unsigned>(narrowTo16(hi, element)) << 16);
}

/// Element `i` of `base`, of element type `e`, as f32.
__device__ __forceinline__ float fusedLoadFrom(const void *base, unsigned i,
                                               unsigned char e) {
  if (e == FusedParams::F32)
    return static_cast<const float *>(base)[i];
  return wideFrom16(static_cast<const unsigned short *>(base)[i], e);
}
/// Element `i` of input k.
__device__ __forceinline__ float fusedLoad(const FusedParams &p, int k,
                                           unsigned i, unsigned char e) {
  return fusedLoadFrom(p.in[k], i, e);
}

/// Elements i..i+W-1 of `base` (i a multiple of W, W 4 or 8): 16-byte
/// loads where W elements fill them, 8-byte ones for four 16-bit values.
template <int W>
__device__ __forceinline__ void fusedLoadWideFrom(const void *base, unsigned i,
                                                  unsigned char e,
                                                  float (&x)[W]) {
  if (e == FusedParams::F32) {
    const float4 *in =
        reinterpret_cast<const float4 *>(static_cast<const float *>(base) + i);
#pragma unroll
    for (int j = 0; j < W / 4; ++j) {
      float4 f = in[j];
      x[4 * j] = f.x, x[4 * j + 1] = f.y, x[4 * j + 2] = f.z,
            x[4 * j + 3] = f.w;
    }
    return;
  }
  const unsigned short *in = static_cast<const unsigned short *>(base) + i;
  unsigned u[W / 2];
  if constexpr (W == 8) {
    uint4 v = *reinterpret_cast<const uint4 *>(in);
    u[0] = v.x, u[1] = v.y, u[2] = v.z, u[3] = v.w;
  } else {
    uint2 v = *reinterpret_cast<const uint2 *>(in);
    u[0] = v.x, u[1] = v.y;
  }
#pragma unroll
  for (int j = 0; j < W / 2; ++j) {
    x[2 * j] = wideFrom16(u[j] & 0xffff, e);
    x[2 * j + 1] = wideFrom16(u[j] >> 16, e);
  }
}
/// Elements i..i+W-1 of input k.
template <int W>
__device__ __forceinline__ void fusedLoadWide(const FusedParams &p, int k,
                                              unsigned i, unsigned char e,
                                              float (&x)[W]) {
  fusedLoadWideFrom<W>(p.in[k], i, e, x);
}

__device__ __forceinline__ void fusedStore(const FusedParams &p, unsigned i,
                                           float v, unsigned char e) {
  if (e == FusedParams::F32)
    static_cast<float *>(p.out)[i] = v;
  else
    static_cast<unsigned short *>(p.out)[i] = narrowTo16(v, e);
}

/// Stores r as elements i..i+W-1 of `base` (i a multiple of W, W 4 or 8),
/// of element type `e`: the stores fusedLoadWideFrom's loads mirror.
template <int W>
__device__ __forceinline__ void
fusedStoreWideTo(void *base, unsigned i, unsigned char e, const float (&r)[W]) {
  if (e == FusedParams::F32) {
    float4 *out = reinterpret_cast<float4 *>(static_cast<float *>(base) + i);
#pragma unroll
    for (int j = 0; j < W / 4; ++j)
      out[j] = make_float4(r[4 * j], r[4 * j + 1], r[4 * j + 2], r[4 * j + 3]);
    return;
  }
  unsigned u[W / 2];
#pragma unroll
  for (int j = 0; j < W / 2; ++j)
    u[j] = narrowPairTo16(r[2 * j], r[2 * j + 1], e);
  unsigned short *out = static_cast<unsigned short *>(base) + i;
  if constexpr (W == 8)
    *reinterpret_cast<uint4 *>(out) = make_uint4(u[0], u[1], u[2], u[3]);
  else
    *reinterpret_cast<uint2 *>(out) = make_uint2(u[0], u[1]);
}
template <int W>
__device__ __forceinline__ void fusedStoreWide(const FusedParams &p, unsigned i,
                                               unsigned char e,
                                               const float (&r)[W]) {
  fusedStoreWideTo<W>(p.out, i, e, r);
}

// The loops below take a Chain: kInputs, mode(p, k) (FusedParams::Mode,
// Unused past the inputs), element(p, k) and outElement(p) (the operands'
// FusedParams::Element) and operator()(p, x), the program on one element's
// inputs. Generated chains answer with constants, so that their loops
// convert each type without testing it per element.

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

/// The chain on each of W elements, element j's inputs x[k][j].
template <int W, class Chain>
__device__ __forceinline__ void
fusedApplyWide(const FusedParams &p, const Chain &chain,
               const float (&x)[Chain::kInputs][W], float (&r)[W]) {
#pragma unroll
  for (int j = 0; j < W; ++j) {
    float xs[Chain::kInputs];
#pragma unroll
    for (int k = 0; k < Chain::kInputs; ++k)
      xs[k] = x[k][j];
    r[j] = chain(p, xs);
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
      unsigned char e = chain.element(p, k);
      x[k] = m == FusedParams::Same        ? fusedLoad(p, k, i, e)
             : m == FusedParams::Scalar    ? fusedLoad(p, k, 0, e)
             : m == FusedParams::Broadcast ? fusedLoad(p, k, off[k], e)
                                           : 0.f;
    }
    fusedStore(p, i, chain(p, x), chain.outElement(p));
  }
}

/// W (4 or 8) consecutive elements per thread through wide accesses
/// (fusedLoadWide). The launcher checks that this reads right
/// (fusedWidth): n and the innermost extent are multiples of W, the
/// pointers 16-byte aligned, and every broadcast input walks the innermost
/// dimension with stride 0 or 1. Eight 16-bit elements fill a 16-byte
/// access, which memory-bound chains need to keep enough bytes in flight.
template <int W, class Chain>
__device__ void runFusedChainWide(const FusedParams &p, const Chain &chain) {
  constexpr int kInputs = Chain::kInputs;
  unsigned nW = p.n / W;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < nW;
       i += gridDim.x * blockDim.x) {
    unsigned off[kInputs];
    fusedOffsets(p, chain, W * i, off);
    float x[kInputs][W];
#pragma unroll
    for (int k = 0; k < kInputs; ++k) {
      unsigned char m = chain.mode(p, k), e = chain.element(p, k);
      if (m == FusedParams::Same) {
        fusedLoadWide<W>(p, k, W * i, e, x[k]);
      } else if (m == FusedParams::Broadcast && p.stride[k][p.rank - 1] != 0) {
        fusedLoadWide<W>(p, k, off[k], e, x[k]);
      } else {
        float v = m == FusedParams::Scalar      ? fusedLoad(p, k, 0, e)
                  : m == FusedParams::Broadcast ? fusedLoad(p, k, off[k], e)
                                                : 0.f;
#pragma unroll
        for (int j = 0; j < W; ++j)
          x[k][j] = v;
      }
    }
    float r[W];
    fusedApplyWide(p, chain, x, r);
    fusedStoreWide<W>(p, W * i, chain.outElement(p), r);
  }
}

/// Input 0 in mode Parts, the rest as runFusedChainWide reads them, W
/// (1, 4 or 8) elements a thread. The threads walk the parts one after the
/// other, each part's elements in memory order, so that every part is read
/// contiguously; the output and the other inputs are addressed at the
/// element's place in the concatenation. For W > 1 the launcher checks
/// (fusedWidth) that every part's width is a multiple of W and its pointer
/// 16-byte aligned, as runFusedChainWide's conditions for the rest.
template <int W, class Chain>
__device__ void runFusedChainParts(const FusedParams &p, const Chain &chain) {
  constexpr int kInputs = Chain::kInputs;
  unsigned width = p.partStart[p.parts], nW = p.n / W;
  for (unsigned g = blockIdx.x * blockDim.x + threadIdx.x; g < nW;
       g += gridDim.x * blockDim.x) {
    unsigned j = W * g;
    // The part holding element j: the last that begins at or before it.
    int lo = 0, hi = p.parts - 1;
    while (lo < hi) {
      int mid = (lo + hi + 1) >> 1;
      if (p.partBegin[mid] <= j)
        lo = mid;
      else
        hi = mid - 1;
    }
    unsigned local = j - p.partBegin[lo];
    unsigned partWidth = p.partStart[lo + 1] - p.partStart[lo];
    unsigned row = local / partWidth;
    unsigned o = row * width + p.partStart[lo] + (local - row * partWidth);
    unsigned off[kInputs];
    fusedOffsets(p, chain, o, off);
    float x[kInputs][W];
#pragma unroll
    for (int k = 0; k < kInputs; ++k) {
      unsigned char m = chain.mode(p, k), e = chain.element(p, k);
      if constexpr (W > 1) {
        if (m == FusedParams::Parts) {
          fusedLoadWideFrom<W>(p.part[lo], local, e, x[k]);
          continue;
        }
        if (m == FusedParams::Same) {
          fusedLoadWide<W>(p, k, o, e, x[k]);
          continue;
        }
        if (m == FusedParams::Broadcast && p.stride[k][p.rank - 1] != 0) {
          fusedLoadWide<W>(p, k, off[k], e, x[k]);
          continue;
        }
      }
      float v = m == FusedParams::Parts    ? fusedLoadFrom(p.part[lo], local, e)
                : m == FusedParams::Same   ? fusedLoad(p, k, o, e)
                : m == FusedParams::Scalar ? fusedLoad(p, k, 0, e)
                : m == FusedParams::Broadcast ? fusedLoad(p, k, off[k], e)
                                              : 0.f;
#pragma unroll
      for (int i = 0; i < W; ++i)
        x[k][i] = v;
    }
    float r[W];
    fusedApplyWide(p, chain, x, r);
    if constexpr (W > 1)
      fusedStoreWide<W>(p, o, chain.outElement(p), r);
    else
      fusedStore(p, o, r[0], chain.outElement(p));
  }
}

#endif // __CUDACC__ || __CUDACC_RTC__

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_FUSEDCHAIN_CUH
