//===- MmaFragments.cuh - 16-bit tensor-core products in registers -*- CUDA
//-*-===//
//
// The warp-level tensor-core product (mma.sync m16n8k16, f32 accumulation)
// and the packing of its 16-bit operands, shared by the kernels that form
// their fragments themselves (Attention.cu, FewChannelConv.cu). Fragment
// layouts: PTX ISA, "Matrix Fragments for mma.m16n8k16"; a lane holds A's
// (row lane / 4, columns (lane % 4) * 2 and the next), the row 8 further,
// and both 8 columns further; B's (rows (lane % 4) * 2 and the next,
// column lane / 4) and the rows 8 further; C's as A's first four.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_MMAFRAGMENTS_CUH
#define PARTC_RUNTIME_CUDA_MMAFRAGMENTS_CUH

#include "runtime/kernels/FusedElementwise.h"

namespace partc::runtime::cuda {

/// c += a b on 16 x 8 x 16 tiles of element type E (FusedParams::BF16 or
/// F16).
template <int E>
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4],
                                         unsigned b0, unsigned b1) {
  if constexpr (E == FusedParams::BF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
}

/// Two f32 values rounded to nearest even and packed, `low` in the low half.
template <int E>
__device__ __forceinline__ unsigned pack2(float low, float high) {
  unsigned r;
  if constexpr (E == FusedParams::BF16)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(high), "f"(low));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(high), "f"(low));
  return r;
}

/// Four 8 x 8 matrices from shared memory, lane l giving the address of
/// row l % 8 of matrix l / 8; a lane receives, of each matrix, the two
/// elements of row lane / 4 at column (lane % 4) * 2 (with `Transposed`,
/// column lane / 4 at rows (lane % 4) * 2 and the next): an mma operand.
template <bool Transposed>
__device__ __forceinline__ void loadMatrices(unsigned (&r)[4],
                                             const unsigned short *p) {
  unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(p));
  if constexpr (Transposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
}

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_MMAFRAGMENTS_CUH
