//===- Attention.cu - Fused attention on f32, bf16 and f16 ----------------===//
//
// graph.attention in one kernel, the scores kept in registers: each block
// takes 64 queries of one head (16 per warp) and walks the keys 64 at a
// time, keys and values staged in shared memory. The products run on the
// tensor cores (mma.sync m16n8k16, f32 accumulation); the softmax is the
// online one (running maximum and sum per row, earlier partial results
// rescaled when the maximum grows), so the scores never reach memory. The
// accumulator layout of q k^T is the operand layout of p v (PTX ISA,
// "Matrix Fragments for mma.m16n8k16"), so the probabilities go from one
// product to the next without a shuffle; they are rounded to the 16-bit
// type for the second product, as the unfused plan rounds its softmax.
// f32 has its own kernel on TF32 products (m16n8k8), or three of them per
// product where TF32 is not allowed.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/CudnnAttention.h"
#include "runtime/cuda/KernelUtils.cuh"
#include "runtime/cuda/MmaFragments.cuh"
#include "runtime/kernels/KernelRegistry.h"
#include "runtime/kernels/StridedMatMul.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace partc::runtime::cuda {

namespace {

using u16 = unsigned short;

constexpr int kMaxBatchRank = 4;
constexpr int kQueries = 64; // per block, 16 per warp
constexpr int kKeys = 64;    // per step
constexpr int kAttentionThreads = 128;

/// A launch's operands (u16 codes or f32 values, as the kernel's element
/// type says) and geometry.
struct AttentionParams {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *bias = nullptr;
  void *out = nullptr;
  int batchRank = 0;
  int64_t batchShape[kMaxBatchRank] = {};
  /// Element strides of each batch dimension (0 where broadcast).
  int64_t qBatch[kMaxBatchRank] = {}, kBatch[kMaxBatchRank] = {},
          vBatch[kMaxBatchRank] = {}, biasBatch[kMaxBatchRank] = {},
          outBatch[kMaxBatchRank] = {};
  /// Strides of a query's, a key's, a value's and an output's row; the
  /// bias's along the queries and the keys.
  int64_t qRow = 0, kRow = 0, vRow = 0, outRow = 0, biasRow = 0, biasCol = 0;
  int m = 0, n = 0, queryBlocks = 0;
  float scale = 1;
  bool nanToZero = false;
  /// Keys past each query are hidden (graph.attention's causal): the
  /// kernels skip the steps past a block's last query and add -inf on the
  /// ones that cross its diagonal.
  bool causal = false;
  /// Whether the bias tile loads 16 bytes at a time.
  bool biasVector = false;
  /// f32: whether a lane's two adjacent outputs are stored as one 8-byte
  /// word (the output's rows and batches start 8 bytes apart).
  bool outVector = false;
};

/// 2^x by the hardware's approximation (2 ulp; 0 for -inf).
__device__ __forceinline__ float exp2Fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ unsigned load32(const u16 *p) {
  return *reinterpret_cast<const unsigned *>(p);
}

/// Combines each row's N values into its first by `op` as a tree (log2
/// dependent steps instead of a chain), both rows at once.
template <int N, class Op>
__device__ __forceinline__ void reduceTree(float (&v)[2][N], Op op) {
#pragma unroll
  for (int width = N / 2; width > 0; width /= 2)
#pragma unroll
    for (int t = 0; t < width; ++t)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        v[r][t] = op(v[r][t], v[r][t + width]);
}

/// Stages the bias of a block's queries and a step's keys, zeros outside
/// the scores: 16 bytes per load where its rows run along the keys aligned
/// (an attention mask), else element by element at any strides. Returns
/// whether every staged element is -inf (`minusInf`, the type's code): a
/// step the mask hides from every query adds exactly nothing.
__device__ bool loadBiasTile(u16 (*dst)[kKeys + 8], const u16 *src,
                             int64_t rowStride, int64_t colStride, int rows,
                             int cols, bool vector, u16 minusInf) {
  bool masked = true;
  if (vector) {
    constexpr int chunks = kKeys / 8;
    unsigned pair = minusInf | (unsigned(minusInf) << 16);
    for (int i = threadIdx.x; i < kQueries * chunks; i += kAttentionThreads) {
      int r = i / chunks, c = (i % chunks) * 8;
      uint4 value = make_uint4(0, 0, 0, 0);
      if (r < rows && c < cols) {
        value = *reinterpret_cast<const uint4 *>(src + r * rowStride + c);
        masked = masked && value.x == pair && value.y == pair &&
                 value.z == pair && value.w == pair;
      }
      *reinterpret_cast<uint4 *>(&dst[r][c]) = value;
    }
    return masked;
  }
  for (int i = threadIdx.x; i < kQueries * kKeys; i += kAttentionThreads) {
    int r = i / kKeys, c = i % kKeys;
    u16 value = 0;
    if (r < rows && c < cols) {
      value = src[r * rowStride + c * colStride];
      masked = masked && value == minusInf;
    }
    dst[r][c] = value;
  }
  return masked;
}

/// Stages `rows` rows of D elements (row i at src + i * rowStride) into
/// dst, zeros after them: 16 bytes per load where the rows are aligned.
template <int D, bool Vector>
__device__ void loadTile(u16 (*dst)[D + 8], const u16 *src, int64_t rowStride,
                         int rows) {
  if constexpr (Vector) {
    constexpr int chunks = D / 8;
    for (int i = threadIdx.x; i < kKeys * chunks; i += kAttentionThreads) {
      int r = i / chunks, c = (i % chunks) * 8;
      uint4 value = make_uint4(0, 0, 0, 0);
      if (r < rows)
        value = *reinterpret_cast<const uint4 *>(src + r * rowStride + c);
      *reinterpret_cast<uint4 *>(&dst[r][c]) = value;
    }
  } else {
    for (int i = threadIdx.x; i < kKeys * D; i += kAttentionThreads) {
      int r = i / D, c = i % D;
      dst[r][c] = r < rows ? src[r * rowStride + c] : u16(0);
    }
  }
}

/// Element offsets of one batch entry's operands.
struct BatchOffsets {
  int64_t q = 0, k = 0, v = 0, bias = 0, out = 0;
};

__device__ BatchOffsets batchOffsetsOf(const AttentionParams &p, int64_t b) {
  BatchOffsets o;
  for (int d = p.batchRank - 1; d >= 0; --d) {
    int64_t i = b % p.batchShape[d];
    b /= p.batchShape[d];
    o.q += i * p.qBatch[d];
    o.k += i * p.kBatch[d];
    o.v += i * p.vBatch[d];
    o.bias += i * p.biasBatch[d];
    o.out += i * p.outBatch[d];
  }
  return o;
}

/// graph.attention's `causal`: adds -inf to a warp's scores `s` (mma
/// accumulator layout) whose key lies past its query, the key of element j
/// of tile t being (t * 8 + keyLane + (j & 1)) and its query (j >> 1) * 8
/// rows below the lane's first; `ahead` is the step's first key less the
/// lane's first query. Only steps that reach past a tile's first query
/// call it.
template <int Tiles>
__device__ __forceinline__ void hideKeysPastQuery(float (&s)[Tiles][4],
                                                  int ahead, int keyLane) {
#pragma unroll
  for (int t = 0; t < Tiles; ++t)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (ahead + t * 8 + keyLane + (j & 1) > (j >> 1) * 8)
        s[t][j] += -INFINITY;
}

/// One step of the online softmax on a warp's scores `s` (16 queries x
/// 8 * Tiles keys, mma accumulator layout: rows lane / 4 and lane / 4 + 8),
/// scaled and masked: grows each row's running maximum, rescales its sum
/// and the output accumulator `acc`, and leaves exp(s - maximum) in `s`.
/// A row's 4 lanes share its maximum; exp(x - max) as 2^(x log2(e) - max
/// log2(e)), one multiply-add and the hardware's base-2 exponential. Both
/// rows at once and reductions as trees: the few warps per scheduler leave
/// latency to hide.
template <int Tiles, int AccTiles>
__device__ __forceinline__ void
onlineSoftmaxStep(float (&s)[Tiles][4], float (&rowMax)[2], float (&rowSum)[2],
                  float (&acc)[AccTiles][4]) {
  constexpr float kLog2e = 1.4426950408889634f;
  float top[2][Tiles];
#pragma unroll
  for (int t = 0; t < Tiles; ++t)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      top[r][t] = fmaxf(s[t][2 * r], s[t][2 * r + 1]);
  reduceTree(top, [](float a, float b) { return fmaxf(a, b); });
  float base[2], rescale[2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    top[r][0] = fmaxf(top[r][0], __shfl_xor_sync(0xffffffffu, top[r][0], 1));
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    top[r][0] = fmaxf(top[r][0], __shfl_xor_sync(0xffffffffu, top[r][0], 2));
    float grown = fmaxf(rowMax[r], top[r][0]);
    // A row masked so far has no maximum: its terms are all 0.
    base[r] = grown == -INFINITY ? 0.f : grown * kLog2e;
    rescale[r] = exp2Fast(fmaf(rowMax[r], kLog2e, -base[r]));
    rowMax[r] = grown;
  }
  float part[2][Tiles];
#pragma unroll
  for (int t = 0; t < Tiles; ++t)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      s[t][2 * r] = exp2Fast(fmaf(s[t][2 * r], kLog2e, -base[r]));
      s[t][2 * r + 1] = exp2Fast(fmaf(s[t][2 * r + 1], kLog2e, -base[r]));
      part[r][t] = s[t][2 * r] + s[t][2 * r + 1];
    }
  reduceTree(part, [](float a, float b) { return a + b; });
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    rowSum[r] = fmaf(rowSum[r], rescale[r], part[r][0]);
#pragma unroll
    for (int t = 0; t < AccTiles; ++t) {
      acc[t][2 * r] *= rescale[r];
      acc[t][2 * r + 1] *= rescale[r];
    }
  }
}

/// What each of a lane's two rows' outputs is multiplied by at the end:
/// 1 / the row's sum over its 4 lanes, or 0 for a fully masked row (sum 0)
/// or one with a NaN score where nan_to_zero zeroes it, as graph.softmax
/// does.
__device__ __forceinline__ void
outputFactors(const float (&rowSum)[2], bool nanToZero, float (&factor)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = rowSum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    factor[r] = nanToZero && !(sum > 0.f) ? 0.f : 1.f / sum;
  }
}

template <int D, int E, bool Vector>
__global__ void __launch_bounds__(kAttentionThreads, D >= 128 ? 2 : 4)
    attentionKernel(AttentionParams p) {
  static_assert(kQueries == kKeys, "the query tile reuses the key buffer");
  // Rows padded by 16 bytes: the 8 rows a fragment load reads start in
  // different banks.
  __shared__ __align__(16) u16 keys[kKeys][D + 8];
  __shared__ __align__(16) u16 values[kKeys][D + 8];
  __shared__ __align__(16) u16 biasTile[kQueries][kKeys + 8];

  int query0 = (blockIdx.x % p.queryBlocks) * kQueries;
  BatchOffsets off = batchOffsetsOf(p, blockIdx.x / p.queryBlocks);
  const u16 *q = static_cast<const u16 *>(p.q) + off.q,
            *k = static_cast<const u16 *>(p.k) + off.k,
            *v = static_cast<const u16 *>(p.v) + off.v,
            *bias =
                p.bias ? static_cast<const u16 *>(p.bias) + off.bias : nullptr;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // A fragment's rows are lane / 4 and lane / 4 + 8; its columns (lane %
  // 4) * 2 and the next, and those 8 further.
  int fragRow = lane / 4, fragCol = (lane % 4) * 2;

  loadTile<D, Vector>(keys, q + query0 * p.qRow, p.qRow,
                      min(kQueries, p.m - query0));
  __syncthreads();
  unsigned qFrag[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const u16 *base = &keys[warp * 16 + fragRow][kk * 16 + fragCol];
    qFrag[kk][0] = load32(base);
    qFrag[kk][1] = load32(base + 8 * (D + 8));
    qFrag[kk][2] = load32(base + 8);
    qFrag[kk][3] = load32(base + 8 * (D + 8) + 8);
  }

  float acc[D / 8][4];
#pragma unroll
  for (int t = 0; t < D / 8; ++t)
    acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
  float rowMax[2] = {-INFINITY, -INFINITY}, rowSum[2] = {0.f, 0.f};

  // A causal mask hides every key past the block's last query: those steps
  // are not even staged.
  int keyEnd = p.causal ? min(p.n, query0 + kQueries) : p.n;
  for (int key0 = 0; key0 < keyEnd; key0 += kKeys) {
    __syncthreads(); // the previous step (or the queries) read
    int valid = min(kKeys, p.n - key0);
    if (bias) {
      constexpr u16 minusInf = E == FusedParams::BF16 ? 0xff80 : 0xfc00;
      bool masked =
          loadBiasTile(biasTile, bias + query0 * p.biasRow + key0 * p.biasCol,
                       p.biasRow, p.biasCol, min(kQueries, p.m - query0), valid,
                       p.biasVector, minusInf);
      // Causal masks hide about half the steps.
      if (__syncthreads_and(masked))
        continue;
    }
    loadTile<D, Vector>(keys, k + key0 * p.kRow, p.kRow, valid);
    loadTile<D, Vector>(values, v + key0 * p.vRow, p.vRow, valid);
    __syncthreads();

    // Scores of this warp's 16 queries and the step's 64 keys: 8 tiles of
    // 16 x 8, keys as the column-major second operand (8 keys of 16
    // elements a pair of matrices).
    float s[kKeys / 8][4];
#pragma unroll
    for (int t = 0; t < kKeys / 8; ++t)
      s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
#pragma unroll
    for (int t = 0; t < kKeys / 8; t += 2)
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        unsigned b[4];
        loadMatrices<false>(b, &keys[t * 8 + (lane / 16) * 8 + lane % 8]
                                    [kk * 16 + ((lane / 8) % 2) * 8]);
        mma16816<E>(s[t], qFrag[kk], b[0], b[1]);
        mma16816<E>(s[t + 1], qFrag[kk], b[2], b[3]);
      }
      // Scale and mask (natural units), then the keys past the end.
#pragma unroll
    for (int t = 0; t < kKeys / 8; ++t)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float bias0 = 0.f, bias1 = 0.f;
        if (bias) {
          unsigned pair =
              load32(&biasTile[warp * 16 + fragRow + 8 * r][t * 8 + fragCol]);
          bias0 = wideFrom16(pair & 0xffff, E);
          bias1 = wideFrom16(pair >> 16, E);
        }
        s[t][2 * r] = fmaf(s[t][2 * r], p.scale, bias0);
        s[t][2 * r + 1] = fmaf(s[t][2 * r + 1], p.scale, bias1);
      }
    if (valid < kKeys) {
#pragma unroll
      for (int t = 0; t < kKeys / 8; ++t)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (t * 8 + fragCol + (j & 1) >= valid)
            s[t][j] = -INFINITY;
    }
    int warpRow0 = query0 + warp * 16;
    if (p.causal && key0 + kKeys - 1 > warpRow0)
      hideKeysPastQuery(s, key0 - warpRow0 - fragRow, fragCol);
    onlineSoftmaxStep(s, rowMax, rowSum, acc);
    // acc += p v: two score tiles make one 16 x 16 operand; the values,
    // row-major [key][element], are the second operand transposed.
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      unsigned a[4] = {pack2<E>(s[2 * kk][0], s[2 * kk][1]),
                       pack2<E>(s[2 * kk][2], s[2 * kk][3]),
                       pack2<E>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                       pack2<E>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int t = 0; t < D / 8; t += 2) {
        unsigned b[4];
        loadMatrices<true>(b, &values[kk * 16 + ((lane / 8) % 2) * 8 + lane % 8]
                                     [(t + lane / 16) * 8]);
        mma16816<E>(acc[t], a, b[0], b[1]);
        mma16816<E>(acc[t + 1], a, b[2], b[3]);
      }
    }
  }

  float factor[2];
  outputFactors(rowSum, p.nanToZero, factor);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int row = query0 + warp * 16 + fragRow + 8 * r;
    if (row >= p.m)
      continue;
    u16 *o = static_cast<u16 *>(p.out) + off.out + row * p.outRow;
#pragma unroll
    for (int t = 0; t < D / 8; ++t)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        o[t * 8 + fragCol + j] = narrowTo16(acc[t][2 * r + j] * factor[r], E);
  }
}

//===----------------------------------------------------------------------===//
// f32: TF32 tensor cores, or three TF32 products where TF32 is not allowed
//===----------------------------------------------------------------------===//

/// f32 rounded to TF32 (nearest, ties away from zero); the tensor cores
/// would otherwise drop the low 13 bits of the mantissa.
__device__ __forceinline__ float roundTf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

/// c += a b on 16 x 8 x 8 TF32 tiles (PTX ISA, "Matrix Fragments for
/// mma.m16n8k8" with .tf32: a lane holds a's (row lane / 4, column lane %
/// 4), the row 8 further, and both 4 columns further; b's (row lane % 4,
/// column lane / 4) and the row 4 further; c as the 16-bit products' c).
__device__ __forceinline__ void mma1688(float (&c)[4], const float (&a)[4],
                                        float b0, float b1) {
  // Not volatile: the compiler may interleave independent products.
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])),
        "r"(__float_as_uint(a[2])), "r"(__float_as_uint(a[3])),
        "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)));
}

/// c += a b. Operands already rounded to TF32 go straight to the tensor
/// cores; with `Split` (f32 without TF32) each operand is its TF32 part
/// plus the TF32 rounding of the rest, and the three products that matter
/// give about f32's precision (the rests' product is below it).
template <bool Split>
__device__ __forceinline__ void mmaF32(float (&c)[4], const float (&a)[4],
                                       float b0, float b1) {
  if constexpr (!Split) {
    mma1688(c, a, b0, b1);
  } else {
    float big[4], rest[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      big[i] = roundTf32(a[i]);
      rest[i] = roundTf32(a[i] - big[i]);
    }
    float bigB0 = roundTf32(b0), bigB1 = roundTf32(b1);
    mma1688(c, rest, bigB0, bigB1);
    mma1688(c, big, roundTf32(b0 - bigB0), roundTf32(b1 - bigB1));
    mma1688(c, big, bigB0, bigB1);
  }
}

/// Keys per step of the f32 kernel: two steps' tiles of keys and values,
/// keys x (D + 4) f32 each, fit in 48 KB of shared memory (and together
/// hold the 64 queries at the start). Small steps leave registers for
/// more blocks, which hide the softmax's latencies. (64-wide heads take
/// 64 keys a step with TF32: launchAttentionFor.)
template <int D> constexpr int kF32KeysPerStep = D >= 128 ? 16 : 32;

/// How a thread takes its share of a tile of D-wide f32 rows, 16 bytes at a
/// time where the rows are aligned (else 4): rows `row`, `row` + RowsApart,
/// ..., at column `col`. Computed once, so that a step's copies cost one
/// address each.
template <int D, bool Vector> struct TileShare {
  static constexpr int kUnit = Vector ? 4 : 1, kPerRow = D / kUnit;
  static_assert(kAttentionThreads % kPerRow == 0, "whole rows per pass");
  static constexpr int kRowsApart = kAttentionThreads / kPerRow;
  int row = threadIdx.x / kPerRow, col = threadIdx.x % kPerRow * kUnit;
};

/// Starts copying `rows` rows of D f32 (row i at src + i * rowStride) into
/// dst, of Rows rows, zeros after them, without waiting (cp.async).
template <int D, int Rows, bool Vector>
__device__ __forceinline__ void stageTileF32(float (*dst)[D + 4],
                                             const float *src,
                                             int64_t rowStride, int rows) {
  using Share = TileShare<D, Vector>;
  Share share;
  unsigned to = static_cast<unsigned>(
      __cvta_generic_to_shared(&dst[share.row][share.col]));
  const float *from = src + share.row * rowStride + share.col;
#pragma unroll
  for (int j = 0; j < Rows / Share::kRowsApart; ++j) {
    int r = share.row + j * Share::kRowsApart;
    unsigned target = to + j * Share::kRowsApart * (D + 4) * 4;
    // A row past the end copies nothing and fills zeros.
    const float *source =
        r < rows ? from + j * Share::kRowsApart * rowStride : src;
    int bytes = r < rows ? Share::kUnit * 4 : 0;
    if constexpr (Vector)
      asm volatile(
          "cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(target),
          "l"(source), "r"(bytes));
    else
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(target),
                   "l"(source), "r"(bytes));
  }
}

/// Rounds to TF32, in place, the elements this thread staged into dst by
/// stageTileF32 (its own copies are visible to it once waited for).
template <int D, int Rows, bool Vector>
__device__ __forceinline__ void roundStagedF32(float (*dst)[D + 4]) {
  using Share = TileShare<D, Vector>;
  Share share;
#pragma unroll
  for (int j = 0; j < Rows / Share::kRowsApart; ++j) {
    float *x = &dst[share.row + j * Share::kRowsApart][share.col];
    if constexpr (Vector) {
      float4 &x4 = *reinterpret_cast<float4 *>(x);
      x4 = make_float4(roundTf32(x4.x), roundTf32(x4.y), roundTf32(x4.z),
                       roundTf32(x4.w));
    } else {
      *x = roundTf32(*x);
    }
  }
}

/// A probability (in [0, 1], or NaN) rounded to TF32 as roundTf32 rounds
/// it, in two integer operations instead of three: no infinity to keep.
/// (A NaN with a nearly full mantissa wraps to -0; the row's sum, taken
/// before rounding, is NaN then, which the output factor carries.)
__device__ __forceinline__ float roundProbabilityTf32(float x) {
  return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xffffe000u);
}

__device__ __forceinline__ void commitStaged() {
  asm volatile("cp.async.commit_group;");
}

/// Waits until at most `Pending` committed groups of copies are in flight.
template <int Pending> __device__ __forceinline__ void waitStaged() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending));
}

/// graph.attention on f32 as the 16-bit kernel computes it, on 16 x 8 x 8
/// TF32 products. The scores' accumulator layout is not the next product's
/// operand layout here, so the keys are taken in another order instead of
/// moving values between lanes: operand column c of a step's 8 keys is key
/// 2c (c < 4) or 2(c - 4) + 1, which is what a lane's scores hold, and the
/// values' rows are read in the same order. Rows of D + 4 floats keep every
/// fragment load free of bank conflicts. Each warp takes Tiles tiles of 16
/// queries, so that each key and value fragment read from shared memory
/// feeds Tiles products (shared memory's bandwidth bounds f32 operands,
/// twice the bytes of 16-bit ones). The bias is read where it lies
/// (attention masks are small and shared by every head); with KeyBias it
/// is the same for every query (a padding mask, or none), so a lane loads
/// its keys' values once a step for all its rows. The kernel is bound by
/// issue and latency with so few warps, so a whole step of keys takes no
/// per-key checks: only the last, partial step tests which keys exist.
template <int D, int Keys, int Tiles, bool Vector, bool Split, bool KeyBias>
__global__ void __launch_bounds__(kAttentionThreads, D >= 128 || Tiles > 1 ? 2
                                                     : D >= 64             ? 3
                                                                           : 4)
    attentionKernelF32(AttentionParams p) {
  constexpr int Queries = kQueries * Tiles;
  static_assert(4 * Keys >= Queries, "the queries fill the tiles");
  static_assert(Keys * D % (4 * kAttentionThreads) == 0,
                "every thread copies whole 16-byte units");
  // Two steps' keys and values, 4 Keys rows of D + 4 (dynamic: above 48 KB
  // with 64 keys a step): one step is computed on while the next one's
  // copies are in flight.
  extern __shared__ __align__(16) float stagedF32[];
  auto tiles = reinterpret_cast<float(*)[D + 4]>(stagedF32);
  auto keysOf = [&](int step) { return tiles + (step % 2) * 2 * Keys; };
  auto valuesOf = [&](int step) {
    return tiles + (step % 2) * 2 * Keys + Keys;
  };

  int query0 = (blockIdx.x % p.queryBlocks) * Queries;
  BatchOffsets off = batchOffsetsOf(p, blockIdx.x / p.queryBlocks);
  const float *q = static_cast<const float *>(p.q) + off.q,
              *k = static_cast<const float *>(p.k) + off.k,
              *v = static_cast<const float *>(p.v) + off.v,
              *bias = p.bias ? static_cast<const float *>(p.bias) + off.bias
                             : nullptr;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int group = lane / 4, member = lane % 4;

  stageTileF32<D, Queries, Vector>(tiles, q + query0 * p.qRow, p.qRow,
                                   min(Queries, p.m - query0));
  commitStaged();
  waitStaged<0>();
  if constexpr (!Split)
    roundStagedF32<D, Queries, Vector>(tiles);
  __syncthreads();
  // Tile i of this warp: queries warp * 16 * Tiles + 16 i, and 16 on.
  float qFrag[Tiles][D / 8][4];
#pragma unroll
  for (int i = 0; i < Tiles; ++i)
#pragma unroll
    for (int kk = 0; kk < D / 8; ++kk) {
      const float *base =
          &tiles[(warp * Tiles + i) * 16 + group][kk * 8 + member];
      qFrag[i][kk][0] = base[0];
      qFrag[i][kk][1] = base[8 * (D + 4)];
      qFrag[i][kk][2] = base[4];
      qFrag[i][kk][3] = base[8 * (D + 4) + 4];
    }
  __syncthreads(); // the queries are read: their space takes the steps

  float acc[Tiles][D / 8][4];
  float rowMax[Tiles][2], rowSum[Tiles][2];
  // Each row's bias (rows past the queries read the last one's: they are
  // never written).
  const float *rowBias[KeyBias ? 1 : Tiles][2];
#pragma unroll
  for (int i = 0; i < Tiles; ++i) {
#pragma unroll
    for (int t = 0; t < D / 8; ++t)
      acc[i][t][0] = acc[i][t][1] = acc[i][t][2] = acc[i][t][3] = 0.f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      rowMax[i][r] = -INFINITY;
      rowSum[i][r] = 0.f;
      if constexpr (!KeyBias) {
        int row =
            min(query0 + (warp * Tiles + i) * 16 + group + 8 * r, p.m - 1);
        rowBias[i][r] = bias + row * p.biasRow;
      }
    }
  }

  int keyEnd = p.causal ? min(p.n, query0 + Queries) : p.n;
  auto stage = [&](int step) {
    int key0 = step * Keys, valid = min(Keys, p.n - key0);
    stageTileF32<D, Keys, Vector>(keysOf(step), k + key0 * p.kRow, p.kRow,
                                  valid);
    stageTileF32<D, Keys, Vector>(valuesOf(step), v + key0 * p.vRow, p.vRow,
                                  valid);
  };
  stage(0);
  commitStaged();
  for (int step = 0, key0 = 0; key0 < keyEnd; ++step, key0 += Keys) {
    // The next step's copies start before this step's wait (a group is
    // committed either way, so that one is always pending).
    if (key0 + Keys < keyEnd)
      stage(step + 1);
    commitStaged();
    int valid = min(Keys, p.n - key0);
    bool whole = valid == Keys;

    // The bias first: its loads are in flight during the wait and the
    // products. A lane's two keys are adjacent: one 8-byte load where the
    // bias runs along the keys aligned; keys past the end read none.
    float2 add[KeyBias ? 1 : Tiles][Keys / 8][2];
    constexpr int kBiasRows = KeyBias ? 1 : 2;
    if (!bias) {
#pragma unroll
      for (int i = 0; i < (KeyBias ? 1 : Tiles); ++i)
#pragma unroll
        for (int t = 0; t < Keys / 8; ++t)
#pragma unroll
          for (int r = 0; r < kBiasRows; ++r)
            add[i][t][r] = make_float2(0.f, 0.f);
    } else if (whole && p.biasVector) {
#pragma unroll
      for (int i = 0; i < (KeyBias ? 1 : Tiles); ++i)
#pragma unroll
        for (int t = 0; t < Keys / 8; ++t)
#pragma unroll
          for (int r = 0; r < kBiasRows; ++r) {
            const float *row = KeyBias ? bias : rowBias[i][r];
            add[i][t][r] = *reinterpret_cast<const float2 *>(
                row + key0 + t * 8 + 2 * member);
          }
    } else {
#pragma unroll
      for (int i = 0; i < (KeyBias ? 1 : Tiles); ++i)
#pragma unroll
        for (int t = 0; t < Keys / 8; ++t)
#pragma unroll
          for (int r = 0; r < kBiasRows; ++r) {
            int key = t * 8 + 2 * member;
            const float *at =
                (KeyBias ? bias : rowBias[i][r]) + (key0 + key) * p.biasCol;
            add[i][t][r] = make_float2(key < valid ? at[0] : 0.f,
                                       key + 1 < valid ? at[p.biasCol] : 0.f);
          }
    }

    waitStaged<1>();
    float(*keys)[D + 4] = keysOf(step);
    float(*values)[D + 4] = valuesOf(step);
    if constexpr (!Split) {
      roundStagedF32<D, Keys, Vector>(keys);
      roundStagedF32<D, Keys, Vector>(values);
    }
    __syncthreads();

    // Scores of this warp's queries and the step's keys, 8 keys at a time;
    // each key fragment feeds every query tile.
    float s[Tiles][Keys / 8][4];
#pragma unroll
    for (int i = 0; i < Tiles; ++i)
#pragma unroll
      for (int t = 0; t < Keys / 8; ++t)
        s[i][t][0] = s[i][t][1] = s[i][t][2] = s[i][t][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 8; ++kk)
#pragma unroll
      for (int t = 0; t < Keys / 8; ++t) {
        const float *key = &keys[t * 8 + group][kk * 8 + member];
        float b0 = key[0], b1 = key[4];
#pragma unroll
        for (int i = 0; i < Tiles; ++i)
          mmaF32<Split>(s[i][t], qFrag[i][kk], b0, b1);
      }
#pragma unroll
    for (int i = 0; i < Tiles; ++i) {
      // Scale and add the bias (natural units); keys past the end of a
      // partial step are masked.
#pragma unroll
      for (int t = 0; t < Keys / 8; ++t)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float2 bias2 = KeyBias ? add[0][t][0] : add[i][t][r];
          s[i][t][2 * r] = fmaf(s[i][t][2 * r], p.scale, bias2.x);
          s[i][t][2 * r + 1] = fmaf(s[i][t][2 * r + 1], p.scale, bias2.y);
        }
      if (!whole) {
#pragma unroll
        for (int t = 0; t < Keys / 8; ++t)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            if (t * 8 + 2 * member + (j & 1) >= valid)
              s[i][t][j] = -INFINITY;
      }
      int tileRow0 = query0 + (warp * Tiles + i) * 16;
      if (p.causal && key0 + Keys - 1 > tileRow0)
        hideKeysPastQuery(s[i], key0 - tileRow0 - group, 2 * member);
      onlineSoftmaxStep(s[i], rowMax[i], rowSum[i], acc[i]);
    }
    // acc += p v with the keys in the order a lane holds them; each value
    // fragment feeds every query tile.
#pragma unroll
    for (int t = 0; t < Keys / 8; ++t) {
      float a[Tiles][4];
#pragma unroll
      for (int i = 0; i < Tiles; ++i) {
        a[i][0] = s[i][t][0];
        a[i][1] = s[i][t][2];
        a[i][2] = s[i][t][1];
        a[i][3] = s[i][t][3];
        if constexpr (!Split)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            a[i][j] = roundProbabilityTf32(a[i][j]);
      }
      const float *value = &values[t * 8 + 2 * member][group];
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        float b0 = value[n * 8], b1 = value[D + 4 + n * 8];
#pragma unroll
        for (int i = 0; i < Tiles; ++i)
          mmaF32<Split>(acc[i][n], a[i], b0, b1);
      }
    }
    __syncthreads(); // this step's tiles are read: step + 2 may take them
  }

#pragma unroll
  for (int i = 0; i < Tiles; ++i) {
    float factor[2];
    outputFactors(rowSum[i], p.nanToZero, factor);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      int row = query0 + (warp * Tiles + i) * 16 + group + 8 * r;
      if (row >= p.m)
        continue;
      float *o = static_cast<float *>(p.out) + off.out + row * p.outRow;
#pragma unroll
      for (int t = 0; t < D / 8; ++t) {
        float2 pair = make_float2(acc[i][t][2 * r] * factor[r],
                                  acc[i][t][2 * r + 1] * factor[r]);
        if (p.outVector) {
          *reinterpret_cast<float2 *>(o + t * 8 + 2 * member) = pair;
        } else {
          o[t * 8 + 2 * member] = pair.x;
          o[t * 8 + 2 * member + 1] = pair.y;
        }
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// 16-bit, keys and values copied asynchronously
//===----------------------------------------------------------------------===//

/// How a thread takes its share of a tile of D-wide 16-bit rows, 16 bytes
/// at a time: rows `row`, `row` + kRowsApart, ..., at column `col`.
template <int D> struct TileShare16 {
  static constexpr int kPerRow = D / 8;
  static_assert(kAttentionThreads % kPerRow == 0, "whole rows per pass");
  static constexpr int kRowsApart = kAttentionThreads / kPerRow;
  int row = threadIdx.x / kPerRow, col = threadIdx.x % kPerRow * 8;
};

/// Starts copying `rows` rows of D 16-bit elements (row i at src + i *
/// rowStride, 16-byte aligned) into dst, of Rows rows, zeros after them,
/// without waiting (cp.async).
template <int D, int Rows>
__device__ __forceinline__ void stageTile16(u16 (*dst)[D + 8], const u16 *src,
                                            int64_t rowStride, int rows) {
  using Share = TileShare16<D>;
  static_assert(Rows % Share::kRowsApart == 0, "whole passes");
  Share share;
  unsigned to = static_cast<unsigned>(
      __cvta_generic_to_shared(&dst[share.row][share.col]));
  const u16 *from = src + share.row * rowStride + share.col;
#pragma unroll
  for (int j = 0; j < Rows / Share::kRowsApart; ++j) {
    int r = share.row + j * Share::kRowsApart;
    unsigned target = to + j * Share::kRowsApart * (D + 8) * 2;
    // A row past the end copies nothing and fills zeros.
    const u16 *source =
        r < rows ? from + j * Share::kRowsApart * rowStride : src;
    int bytes = r < rows ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(target),
                 "l"(source), "r"(bytes));
  }
}

/// A bias pair's two 16-bit codes as f32 (the low one first).
template <int E> __device__ __forceinline__ float2 widePair(unsigned pair) {
  if constexpr (E == FusedParams::BF16)
    return make_float2(__uint_as_float(pair << 16),
                       __uint_as_float(pair & 0xffff0000u));
  return make_float2(wideFrom16(pair & 0xffff, E), wideFrom16(pair >> 16, E));
}

/// graph.attention on 16-bit operands whose rows lie 16 bytes apart, the
/// f32 kernel's structure on m16n8k16 products: the next step's keys and
/// values are copied (cp.async) while this step's are computed on; each
/// warp takes Tiles tiles of 16 queries, so that each key and value
/// fragment read from shared memory feeds Tiles products; the bias is read
/// where it lies, with KeyBias (a padding mask, or none) once a step for all
/// of a lane's rows; only the last, partial step checks which keys exist.
/// attentionKernel above takes the other layouts, and skips the steps an
/// unstated causal mask hides (tuning times both).
template <int D, int E, int Tiles, bool KeyBias>
__global__ void __launch_bounds__(kAttentionThreads, Tiles > 1 || D >= 128 ? 2
                                                     : D >= 64             ? 3
                                                                           : 4)
    attentionKernel16(AttentionParams p) {
  constexpr int Keys = kKeys, Queries = kQueries * Tiles;
  static_assert(4 * Keys >= Queries, "the queries fill the tiles");
  // Two steps' keys and values, 4 Keys rows of D + 8 (rows padded by 16
  // bytes: the 8 rows a fragment load reads start in different banks).
  extern __shared__ __align__(16) u16 staged16[];
  auto tiles = reinterpret_cast<u16(*)[D + 8]>(staged16);
  auto keysOf = [&](int step) { return tiles + (step % 2) * 2 * Keys; };
  auto valuesOf = [&](int step) {
    return tiles + (step % 2) * 2 * Keys + Keys;
  };

  // Under a causal mask a block's work grows with its queries: the last
  // query blocks of every batch entry go first, so that the short ones
  // fill the last wave instead of the long ones trailing it.
  int queryBlock = blockIdx.x % p.queryBlocks,
      batch = blockIdx.x / p.queryBlocks;
  if (p.causal) {
    int batches = gridDim.x / p.queryBlocks;
    queryBlock = p.queryBlocks - 1 - blockIdx.x / batches;
    batch = blockIdx.x % batches;
  }
  int query0 = queryBlock * Queries;
  BatchOffsets off = batchOffsetsOf(p, batch);
  const u16 *q = static_cast<const u16 *>(p.q) + off.q,
            *k = static_cast<const u16 *>(p.k) + off.k,
            *v = static_cast<const u16 *>(p.v) + off.v,
            *bias =
                p.bias ? static_cast<const u16 *>(p.bias) + off.bias : nullptr;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int fragRow = lane / 4, fragCol = (lane % 4) * 2;

  stageTile16<D, Queries>(tiles, q + query0 * p.qRow, p.qRow,
                          min(Queries, p.m - query0));
  commitStaged();
  waitStaged<0>();
  __syncthreads();
  // Tile i of this warp: queries warp * 16 * Tiles + 16 i, and 16 on.
  unsigned qFrag[Tiles][D / 16][4];
#pragma unroll
  for (int i = 0; i < Tiles; ++i)
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const u16 *base =
          &tiles[(warp * Tiles + i) * 16 + fragRow][kk * 16 + fragCol];
      qFrag[i][kk][0] = load32(base);
      qFrag[i][kk][1] = load32(base + 8 * (D + 8));
      qFrag[i][kk][2] = load32(base + 8);
      qFrag[i][kk][3] = load32(base + 8 * (D + 8) + 8);
    }
  __syncthreads(); // the queries are read: their space takes the steps

  float acc[Tiles][D / 8][4];
  float rowMax[Tiles][2], rowSum[Tiles][2];
  // Each row's bias (rows past the queries read the last one's: they are
  // never written).
  const u16 *rowBias[KeyBias ? 1 : Tiles][2];
#pragma unroll
  for (int i = 0; i < Tiles; ++i) {
#pragma unroll
    for (int t = 0; t < D / 8; ++t)
      acc[i][t][0] = acc[i][t][1] = acc[i][t][2] = acc[i][t][3] = 0.f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      rowMax[i][r] = -INFINITY;
      rowSum[i][r] = 0.f;
      if constexpr (!KeyBias) {
        int row =
            min(query0 + (warp * Tiles + i) * 16 + fragRow + 8 * r, p.m - 1);
        rowBias[i][r] = bias + row * p.biasRow;
      }
    }
  }

  int keyEnd = p.causal ? min(p.n, query0 + Queries) : p.n;
  auto stage = [&](int step) {
    int key0 = step * Keys, valid = min(Keys, p.n - key0);
    stageTile16<D, Keys>(keysOf(step), k + key0 * p.kRow, p.kRow, valid);
    stageTile16<D, Keys>(valuesOf(step), v + key0 * p.vRow, p.vRow, valid);
  };
  stage(0);
  commitStaged();
  constexpr int kBiasTiles = KeyBias ? 1 : Tiles, kBiasRows = KeyBias ? 1 : 2;
  for (int step = 0, key0 = 0; key0 < keyEnd; ++step, key0 += Keys) {
    // The next step's copies start before this step's wait (a group is
    // committed either way, so that one is always pending).
    if (key0 + Keys < keyEnd)
      stage(step + 1);
    commitStaged();
    int valid = min(Keys, p.n - key0);
    bool whole = valid == Keys;

    // The bias first: its loads are in flight during the wait and the
    // products. A lane's two keys are adjacent: one 4-byte load where the
    // bias runs along the keys aligned; keys past the end read none.
    float2 add[kBiasTiles][Keys / 8][kBiasRows];
    if (!bias) {
#pragma unroll
      for (int i = 0; i < kBiasTiles; ++i)
#pragma unroll
        for (int t = 0; t < Keys / 8; ++t)
#pragma unroll
          for (int r = 0; r < kBiasRows; ++r)
            add[i][t][r] = make_float2(0.f, 0.f);
    } else if (whole && p.biasVector) {
#pragma unroll
      for (int i = 0; i < kBiasTiles; ++i)
#pragma unroll
        for (int t = 0; t < Keys / 8; ++t)
#pragma unroll
          for (int r = 0; r < kBiasRows; ++r) {
            const u16 *row = KeyBias ? bias : rowBias[i][r];
            add[i][t][r] = widePair<E>(load32(row + key0 + t * 8 + fragCol));
          }
    } else {
#pragma unroll
      for (int i = 0; i < kBiasTiles; ++i)
#pragma unroll
        for (int t = 0; t < Keys / 8; ++t)
#pragma unroll
          for (int r = 0; r < kBiasRows; ++r) {
            int key = t * 8 + fragCol;
            const u16 *at =
                (KeyBias ? bias : rowBias[i][r]) + (key0 + key) * p.biasCol;
            add[i][t][r] = make_float2(
                key < valid ? wideFrom16(at[0], E) : 0.f,
                key + 1 < valid ? wideFrom16(at[p.biasCol], E) : 0.f);
          }
    }

    waitStaged<1>();
    __syncthreads();
    u16(*keys)[D + 8] = keysOf(step);
    u16(*values)[D + 8] = valuesOf(step);

    // Scores of this warp's queries and the step's keys: tiles of 16 x 8,
    // keys as the column-major second operand (8 keys of 16 elements a
    // pair of matrices); each key fragment feeds every query tile.
    float s[Tiles][Keys / 8][4];
#pragma unroll
    for (int i = 0; i < Tiles; ++i)
#pragma unroll
      for (int t = 0; t < Keys / 8; ++t)
        s[i][t][0] = s[i][t][1] = s[i][t][2] = s[i][t][3] = 0.f;
#pragma unroll
    for (int t = 0; t < Keys / 8; t += 2)
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        unsigned b[4];
        loadMatrices<false>(b, &keys[t * 8 + (lane / 16) * 8 + lane % 8]
                                    [kk * 16 + ((lane / 8) % 2) * 8]);
#pragma unroll
        for (int i = 0; i < Tiles; ++i) {
          mma16816<E>(s[i][t], qFrag[i][kk], b[0], b[1]);
          mma16816<E>(s[i][t + 1], qFrag[i][kk], b[2], b[3]);
        }
      }
#pragma unroll
    for (int i = 0; i < Tiles; ++i) {
      // Scale and add the bias (natural units); keys past the end of a
      // partial step are masked.
#pragma unroll
      for (int t = 0; t < Keys / 8; ++t)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float2 bias2 = KeyBias ? add[0][t][0] : add[i][t][r];
          s[i][t][2 * r] = fmaf(s[i][t][2 * r], p.scale, bias2.x);
          s[i][t][2 * r + 1] = fmaf(s[i][t][2 * r + 1], p.scale, bias2.y);
        }
      if (!whole) {
#pragma unroll
        for (int t = 0; t < Keys / 8; ++t)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            if (t * 8 + fragCol + (j & 1) >= valid)
              s[i][t][j] = -INFINITY;
      }
      int tileRow0 = query0 + (warp * Tiles + i) * 16;
      if (p.causal && key0 + Keys - 1 > tileRow0)
        hideKeysPastQuery(s[i], key0 - tileRow0 - fragRow, fragCol);
      onlineSoftmaxStep(s[i], rowMax[i], rowSum[i], acc[i]);
    }
    // acc += p v: two score tiles make one 16 x 16 operand; the values,
    // row-major [key][element], are the second operand transposed; each
    // value fragment feeds every query tile.
#pragma unroll
    for (int kk = 0; kk < Keys / 16; ++kk) {
      unsigned a[Tiles][4];
#pragma unroll
      for (int i = 0; i < Tiles; ++i) {
        a[i][0] = pack2<E>(s[i][2 * kk][0], s[i][2 * kk][1]);
        a[i][1] = pack2<E>(s[i][2 * kk][2], s[i][2 * kk][3]);
        a[i][2] = pack2<E>(s[i][2 * kk + 1][0], s[i][2 * kk + 1][1]);
        a[i][3] = pack2<E>(s[i][2 * kk + 1][2], s[i][2 * kk + 1][3]);
      }
#pragma unroll
      for (int t = 0; t < D / 8; t += 2) {
        unsigned b[4];
        loadMatrices<true>(b, &values[kk * 16 + ((lane / 8) % 2) * 8 + lane % 8]
                                     [(t + lane / 16) * 8]);
#pragma unroll
        for (int i = 0; i < Tiles; ++i) {
          mma16816<E>(acc[i][t], a[i], b[0], b[1]);
          mma16816<E>(acc[i][t + 1], a[i], b[2], b[3]);
        }
      }
    }
    __syncthreads(); // this step's tiles are read: step + 2 may take them
  }

#pragma unroll
  for (int i = 0; i < Tiles; ++i) {
    float factor[2];
    outputFactors(rowSum[i], p.nanToZero, factor);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      int row = query0 + (warp * Tiles + i) * 16 + fragRow + 8 * r;
      if (row >= p.m)
        continue;
      u16 *o = static_cast<u16 *>(p.out) + off.out + row * p.outRow;
#pragma unroll
      for (int t = 0; t < D / 8; ++t) {
        float low = acc[i][t][2 * r] * factor[r],
              high = acc[i][t][2 * r + 1] * factor[r];
        if (p.outVector) {
          *reinterpret_cast<unsigned *>(o + t * 8 + fragCol) =
              narrowPairTo16(low, high, E);
        } else {
          o[t * 8 + fragCol] = narrowTo16(low, E);
          o[t * 8 + fragCol + 1] = narrowTo16(high, E);
        }
      }
    }
  }
}

/// Launches one instance of attentionKernel16 with its shared memory
/// (dynamic: above 48 KB for 128-wide heads).
template <int D, int E, int Tiles, bool KeyBias>
void launch16Instance(const AttentionParams &p, int64_t batches,
                      cudaStream_t stream) {
  constexpr int bytes = 4 * kKeys * (D + 8) * 2;
  auto kernel = attentionKernel16<D, E, Tiles, KeyBias>;
  if constexpr (bytes > 48 * 1024) {
    static const cudaError_t raised = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    (void)raised;
  }
  AttentionParams params = p;
  params.queryBlocks = (p.m + kQueries * Tiles - 1) / (kQueries * Tiles);
  dim3 grid(static_cast<unsigned>(batches * params.queryBlocks));
  kernel<<<grid, kAttentionThreads, bytes, stream>>>(params);
}

/// Launches one instance of attentionKernelF32 with its shared memory,
/// raising the kernel's dynamic limit once where it needs more than 48 KB
/// (if that fails, so does the launch, and the caller's check says so).
template <int D, int Keys, int Tiles, bool Vector, bool Split, bool KeyBias>
void launchF32Instance(const AttentionParams &p, dim3 grid,
                       cudaStream_t stream) {
  constexpr int bytes = 4 * Keys * (D + 4) * static_cast<int>(sizeof(float));
  auto kernel = attentionKernelF32<D, Keys, Tiles, Vector, Split, KeyBias>;
  if constexpr (bytes > 48 * 1024) {
    static const cudaError_t raised = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    (void)raised;
  }
  kernel<<<grid, kAttentionThreads, bytes, stream>>>(p);
}

template <int D, int Keys, int Tiles>
void launchAttentionF32(const AttentionParams &p, int64_t batches, bool vector,
                        bool split, cudaStream_t stream) {
  AttentionParams params = p;
  params.queryBlocks = (p.m + kQueries * Tiles - 1) / (kQueries * Tiles);
  dim3 grid(static_cast<unsigned>(batches * params.queryBlocks));
  // A bias the same for every query takes the kernel that loads it once
  // for all rows, on the common path only (16-byte loads, TF32): the
  // general kernel computes it too.
  if (!split && vector && (!p.bias || p.biasRow == 0)) {
    launchF32Instance<D, Keys, Tiles, true, false, true>(params, grid, stream);
  } else if (split) {
    // Three products each: the registers allow one tile of queries and 32
    // keys a step.
    if constexpr (Tiles == 1 && Keys <= 32) {
      if (vector)
        launchF32Instance<D, Keys, Tiles, true, true, false>(params, grid,
                                                             stream);
      else
        launchF32Instance<D, Keys, Tiles, false, true, false>(params, grid,
                                                              stream);
    }
  } else if (vector) {
    launchF32Instance<D, Keys, Tiles, true, false, false>(params, grid, stream);
  } else {
    launchF32Instance<D, Keys, Tiles, false, false, false>(params, grid,
                                                           stream);
  }
}

/// `staged`: a 16-bit attention takes attentionKernel16 (its operands' rows
/// 16 bytes apart, the bias's too or none).
template <int D, int E>
cudaError_t launchAttentionFor(const AttentionParams &p, bool vector,
                               bool split, bool staged, cudaStream_t stream) {
  int64_t batches = 1;
  for (int d = 0; d < p.batchRank; ++d)
    batches *= p.batchShape[d];
  if constexpr (E == FusedParams::F32) {
    // Two query tiles a warp where the registers allow and the queries are
    // many enough to fill the GPU with blocks of 128; not under a causal
    // mask, whose smaller blocks skip more (GPT-2 medium: 2.49 ms with one
    // tile, 2.76 with two; BERT-large: 3.94 and 3.62, H100). 64-wide heads
    // take 64 keys a step where TF32 is allowed: half the steps' fixed
    // costs (H200, 24 layers: BERT-large 2.31 -> 2.18 ms, GPT-2 medium
    // 2.13 -> 2.09; the split products' registers spill at 64).
    if constexpr (D == 64) {
      if (!split) {
        if (p.m >= 256 && !p.causal)
          launchAttentionF32<D, 64, 2>(p, batches, vector, split, stream);
        else
          launchAttentionF32<D, 64, 1>(p, batches, vector, split, stream);
        return cudaGetLastError();
      }
    }
    if constexpr (D <= 64) {
      if (p.m >= 256 && !split && !p.causal) {
        launchAttentionF32<D, kF32KeysPerStep<D>, 2>(p, batches, vector, split,
                                                     stream);
        return cudaGetLastError();
      }
    }
    launchAttentionF32<D, kF32KeysPerStep<D>, 1>(p, batches, vector, split,
                                                 stream);
    return cudaGetLastError();
  } else {
    if (staged) {
      // Two query tiles a warp where the queries fill the GPU with blocks of
      // 128 (as in f32); a causal mask's smaller blocks skip more.
      bool keyBias = !p.bias || p.biasRow == 0;
      if constexpr (D <= 64) {
        if (keyBias && p.m >= 256 && !p.causal) {
          launch16Instance<D, E, 2, true>(p, batches, stream);
          return cudaGetLastError();
        }
      }
      if (keyBias)
        launch16Instance<D, E, 1, true>(p, batches, stream);
      else
        launch16Instance<D, E, 1, false>(p, batches, stream);
      return cudaGetLastError();
    }
    dim3 grid(static_cast<unsigned>(batches * p.queryBlocks));
    if (vector)
      attentionKernel<D, E, true><<<grid, kAttentionThreads, 0, stream>>>(p);
    else
      attentionKernel<D, E, false><<<grid, kAttentionThreads, 0, stream>>>(p);
    return cudaGetLastError();
  }
}

/// `split`: f32 without TF32 (three TF32 products each).
template <int E>
cudaError_t launchAttention(const AttentionParams &p, int headSize, bool vector,
                            bool split, bool staged, cudaStream_t stream) {
  switch (headSize) {
  case 16:
    return launchAttentionFor<16, E>(p, vector, split, staged, stream);
  case 32:
    return launchAttentionFor<32, E>(p, vector, split, staged, stream);
  case 64:
    return launchAttentionFor<64, E>(p, vector, split, staged, stream);
  default:
    return launchAttentionFor<128, E>(p, vector, split, staged, stream);
  }
}

/// Sets x[0, n) to the 16-bit code `value` (tuning's fully masked row).
__global__ void fillCodeKernel(u16 *x, int64_t n, u16 value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    x[i] = value;
}

/// graph.attention: partc's kernels above or, where it is faster on this
/// device and agrees with them, one of cuDNN's fused-attention plans. In
/// 16-bit with aligned rows both of partc's kernels are candidates, the
/// asynchronous one first (the reference the others must agree with).
class AttentionKernel : public GpuKernel {
public:
  AttentionKernel(AttentionParams p, int headSize, unsigned char element,
                  bool split, bool hasBias, bool biasStridesAligned,
                  bool stridesAligned, std::array<int64_t, 3> offsets)
      : p_(p), headSize_(headSize), element_(element), split_(split),
        hasBias_(hasBias), biasStridesAligned_(biasStridesAligned),
        stridesAligned_(stridesAligned), offsets_(offsets) {
    if (element != FusedParams::F32 && stridesAligned &&
        (!hasBias || biasStridesAligned))
      ownKernels_ = 2;
  }

  void useCudnn(std::shared_ptr<const CudnnAttention> cudnn) {
    if (cudnn && cudnn->size() > 0)
      cudnn_ = std::move(cudnn);
  }

  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    return runCandidate(chosen_, ctx, in, out[0].data);
  }
  size_t workspaceBytes() const override {
    return cudnn_ ? cudnn_->workspaceBytes() : 0;
  }
  Status tune(DeviceContext &ctx, const std::vector<TensorRef> &in,
              const std::vector<TensorRef> &out, TuneScratch &scratch) override;
  bool adoptCandidate(size_t c) override {
    if (c >= ownKernels_ + (cudnn_ ? cudnn_->size() : 0))
      return false;
    chosen_ = c;
    return true;
  }
  const char *variant() const override {
    if (chosen_ >= ownKernels_)
      return cudnn_->label(chosen_ - ownKernels_).c_str();
    return chosen_ == 0 ? "partc" : "partc (bias tile)";
  }

private:
  Status runCandidate(size_t c, DeviceContext &ctx,
                      const std::vector<TensorRef> &in, void *result);

  AttentionParams p_;
  int headSize_;
  /// FusedParams::F32, BF16 or F16.
  unsigned char element_;
  /// f32 without TF32.
  bool split_;
  bool hasBias_, biasStridesAligned_, stridesAligned_;
  /// Element offsets of the q, k and v views in their tensors.
  std::array<int64_t, 3> offsets_;
  std::shared_ptr<const CudnnAttention> cudnn_;
  CudnnAttention::Binding binding_;
  /// partc's candidates: 2 where attentionKernel16 applies (candidate 0),
  /// attentionKernel or attentionKernelF32 being the last.
  size_t ownKernels_ = 1;
  /// c < ownKernels_: partc's kernel c; else cuDNN's plan c - ownKernels_.
  size_t chosen_ = 0;
};

Status AttentionKernel::runCandidate(size_t c, DeviceContext &ctx,
                                     const std::vector<TensorRef> &in,
                                     void *result) {
  size_t bytes = element_ == FusedParams::F32 ? 4 : 2;
  auto at = [&](size_t i, int64_t offset) -> const void * {
    return static_cast<const char *>(in[i].data) + offset * bytes;
  };
  const void *q = at(0, offsets_[0]), *k = at(1, offsets_[1]),
             *v = at(2, offsets_[2]);
  const void *bias = hasBias_ ? in[3].data : nullptr;
  // cuDNN's plans were made for 16-byte aligned operands.
  if (c >= ownKernels_ && aligned16(q) && aligned16(k) && aligned16(v) &&
      (!bias || aligned16(bias)) && aligned16(result))
    return cudnn_->run(ctx, c - ownKernels_, binding_, q, k, v, bias, result);
  AttentionParams params = p_;
  params.q = q;
  params.k = k;
  params.v = v;
  params.bias = bias;
  params.out = result;
  // The 16-bit kernel stages the bias 16 bytes at a time, the f32 one reads
  // 8 bytes (two keys) at a time.
  params.biasVector =
      bias && biasStridesAligned_ &&
      reinterpret_cast<uintptr_t>(bias) % (bytes == 4 ? 8 : 16) == 0;
  bool vector = stridesAligned_ && aligned16(q) && aligned16(k) && aligned16(v);
  params.outVector =
      reinterpret_cast<uintptr_t>(result) % 8 == 0 && p_.outRow % 2 == 0;
  for (int d = 0; d < p_.batchRank; ++d)
    params.outVector = params.outVector && p_.outBatch[d] % 2 == 0;
  // attentionKernel16 copies 16 bytes at a time: where this call's
  // operands do not allow it, the other kernel computes the same.
  bool staged =
      c == 0 && ownKernels_ == 2 && vector && (!bias || params.biasVector);
  cudaError_t err;
  switch (element_) {
  case FusedParams::F32:
    err = launchAttention<FusedParams::F32>(params, headSize_, vector, split_,
                                            false, ctx.stream);
    break;
  case FusedParams::BF16:
    err = launchAttention<FusedParams::BF16>(params, headSize_, vector, false,
                                             staged, ctx.stream);
    break;
  default:
    err = launchAttention<FusedParams::F16>(params, headSize_, vector, false,
                                            staged, ctx.stream);
  }
  return cudaStatus(err, "attention");
}

Status AttentionKernel::tune(DeviceContext &ctx,
                             const std::vector<TensorRef> &in,
                             const std::vector<TensorRef> &out,
                             TuneScratch &scratch) {
  // The operands stay where they are: cuDNN's plans need them aligned.
  bool aligned = aligned16(out[0].data);
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t offset = i < 3 ? offsets_[i] : 0;
    aligned =
        aligned && aligned16(static_cast<const u16 *>(in[i].data) + offset);
  }
  if (!aligned)
    cudnn_.reset();
  size_t count = ownKernels_ + (cudnn_ ? cudnn_->size() : 0);
  if (count < 2)
    return Status();
  unsigned char element = element_;
  // Operands from scratch filled with a fixed pattern (the arena holds no
  // values yet), packed into slot 3.
  auto rounded = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  size_t packed = 0;
  std::vector<size_t> starts;
  for (const TensorRef &t : in) {
    starts.push_back(packed);
    packed += rounded(t.type.byteSize());
  }
  void *pack = nullptr, *reference = nullptr, *trial = nullptr;
  size_t outBytes = out[0].type.byteSize();
  PARTC_RETURN_IF_ERROR(scratch.buffer(3, packed, pack));
  PARTC_RETURN_IF_ERROR(scratch.buffer(1, outBytes, reference));
  PARTC_RETURN_IF_ERROR(scratch.buffer(2, outBytes, trial));
  std::vector<TensorRef> patterned = in;
  for (size_t i = 0; i < in.size(); ++i) {
    patterned[i].data = static_cast<char *>(pack) + starts[i];
    PARTC_RETURN_IF_ERROR(cudaStatus(
        launchFillPattern(patterned[i].data, in[i].type.numElements(),
                          static_cast<uint32_t>(i + 1), ctx.stream, element),
        "tuning"));
  }
  const u16 minusInf =
      element_ == FusedParams::BF16 ? u16(0xff80) : u16(0xfc00);
  // No pattern masks the keys past the diagonal: every candidate hides
  // them itself (cuDNN's plans as partc's kernels), and a pattern bias of
  // -inf there would let the bias-tile kernel skip what it cannot skip on
  // a narrowed padding mask.
  // With nan_to_zero a row the mask hides entirely must come out 0: the
  // bias's first row is hidden, so a plan that differs there is dropped.
  if (hasBias_ && p_.nanToZero) {
    int64_t n = std::min<int64_t>(p_.n, in[3].type.numElements());
    fillCodeKernel<<<1, 256, 0, ctx.stream>>>(
        static_cast<u16 *>(patterned[3].data), n, minusInf);
  }
  for (void *buffer : {reference, trial})
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaMemsetAsync(buffer, 0, outBytes, ctx.stream), "tuning"));
  return pickFastest(
      ctx, scratch, count,
      [&](size_t c, void *result) {
        return runCandidate(c, ctx, patterned, result);
      },
      reference, trial, out[0].type.numElements(), chosen_, element);
}

/// cuDNN's view of the attention, or false where it has none: two batch
/// dimensions at most (batch and heads), queries and outputs never
/// broadcast, keys and values broadcast along the heads only.
bool cudnnGeometry(const strided::Attention &att,
                   const std::vector<int64_t> &biasStrides, bool hasBias,
                   AttentionGeometry &g) {
  size_t rank = att.scores.size();
  if (rank < 2 || rank > 4)
    return false;
  size_t batchRank = rank - 2;
  int64_t m = att.scores[rank - 2], n = att.scores[rank - 1];
  int64_t d = att.q.shape[rank - 1], dv = att.v.shape[rank - 1];
  // The two leading dimensions, 1 where the attention has fewer.
  std::array<int64_t, 2> extent = {1, 1};
  for (size_t i = 0; i < batchRank; ++i)
    extent[2 - batchRank + i] = att.scores[i];
  // One operand's batch strides (0 where broadcast); `broadcastable` says
  // along which of the two it may be.
  auto batch = [&](const std::vector<int64_t> &strides,
                   const std::vector<int64_t> &shape, int64_t inner,
                   std::array<bool, 2> broadcastable,
                   std::array<int64_t, 2> &dims, std::array<int64_t, 2> &out) {
    int64_t next = inner;
    for (int j = 1; j >= 0; --j) {
      int i = j - (2 - static_cast<int>(batchRank));
      int64_t stride = i >= 0 && shape[i] != 1 ? strides[i] : 0;
      dims[j] = extent[j];
      if (stride == 0 && extent[j] > 1) {
        if (!broadcastable[j])
          return false;
        dims[j] = 1;
      }
      out[j] = stride != 0 ? stride : next;
      next = std::max(next, out[j] * dims[j]);
    }
    return true;
  };
  auto fill = [&](const strided::View &view, int64_t rows, int64_t cols,
                  int64_t rowStride, int64_t colStride,
                  std::array<bool, 2> broadcastable,
                  std::array<int64_t, 4> &dims,
                  std::array<int64_t, 4> &strides) {
    std::array<int64_t, 2> bd{}, bs{};
    int64_t inner = std::max(rows * rowStride, cols * colStride);
    if (!batch(view.strides, view.shape, inner, broadcastable, bd, bs))
      return false;
    dims = {bd[0], bd[1], rows, cols};
    strides = {bs[0], bs[1], rowStride, colStride};
    return true;
  };
  const auto &qs = att.q.strides, &ks = att.k.strides, &vs = att.v.strides,
             &os = att.result.strides;
  // k is viewed transposed: [.., head size, keys].
  if (!fill(att.q, m, d, qs[rank - 2], qs[rank - 1], {false, false}, g.qDims,
            g.qStrides) ||
      !fill(att.k, d, n, ks[rank - 2], ks[rank - 1], {false, true}, g.kDims,
            g.kStrides) ||
      !fill(att.v, n, dv, vs[rank - 2], vs[rank - 1], {false, true}, g.vDims,
            g.vStrides) ||
      !fill(att.result, m, dv, os[rank - 2], os[rank - 1], {false, false},
            g.outDims, g.outStrides))
    return false;
  // The head dimension is innermost in memory for every operand.
  if (g.qStrides[3] != 1 || g.kStrides[2] != 1 || g.vStrides[3] != 1 ||
      g.outStrides[3] != 1)
    return false;
  g.bias = hasBias;
  if (hasBias) {
    // Broadcast along anything but the keys, which it must run along.
    if (biasStrides[rank - 1] != 1)
      return false;
    std::array<int64_t, 4> full = {extent[0], extent[1], m, n};
    int64_t next = n;
    for (int j = 3; j >= 0; --j) {
      int i = j - (4 - static_cast<int>(rank));
      int64_t stride = i >= 0 ? biasStrides[i] : 0;
      g.biasDims[j] = stride == 0 ? 1 : full[j];
      g.biasStrides[j] = stride != 0 ? stride : next;
      next = std::max(next, g.biasStrides[j] * g.biasDims[j]);
    }
  }
  g.scale = static_cast<float>(att.scale);
  return true;
}

} // namespace

Status createAttentionKernel(const KernelArgs &a, DeviceContext &ctx,
                             std::unique_ptr<GpuKernel> &k) {
  strided::Attention att;
  PARTC_RETURN_IF_ERROR(strided::parseAttention(a, att));
  DType type = a.outputs[0].dtype;
  std::vector<int64_t> perm = a.attrs.getInts("perm");
  size_t rank = att.scores.size();
  // Shapes the kernels have no instance for run on the CPU
  // (partc-fuse-attention makes none).
  if ((type != DType::F32 && type != DType::BF16 && type != DType::F16) ||
      !strided::attentionKernelFits(att.q, att.k, att.v, perm) ||
      rank - 2 > static_cast<size_t>(kMaxBatchRank))
    return Status();
  int64_t m = att.scores[rank - 2], n = att.scores[rank - 1];
  int64_t headSize = att.q.shape[rank - 1];
  if (m > (int64_t(1) << 30) || n > (int64_t(1) << 30))
    return Status();

  AttentionParams p;
  p.batchRank = static_cast<int>(rank - 2);
  // Element strides of the bias along the scores' dimensions, numpy's
  // broadcasting (0 where the bias has extent 1 or no dimension).
  std::vector<int64_t> biasStrides(rank, 0);
  bool hasBias = a.inputs.size() == 4;
  if (hasBias) {
    const Shape &bs = a.inputs[3].shape;
    int64_t step = 1;
    for (size_t i = 0; i < bs.size(); ++i) {
      size_t j = bs.size() - 1 - i, d = rank - 1 - i;
      biasStrides[d] = bs[j] == 1 ? 0 : step;
      step *= bs[j];
    }
  }
  auto batchStride = [](const strided::View &v, size_t d) {
    return v.shape[d] == 1 ? int64_t(0) : v.strides[d];
  };
  for (size_t d = 0; d + 2 < rank; ++d) {
    p.batchShape[d] = att.result.shape[d];
    p.qBatch[d] = batchStride(att.q, d);
    p.kBatch[d] = batchStride(att.k, d);
    p.vBatch[d] = batchStride(att.v, d);
    p.biasBatch[d] = att.scores[d] == 1 ? 0 : biasStrides[d];
    p.outBatch[d] = att.result.strides[d];
  }
  p.qRow = att.q.strides[rank - 2];
  p.kRow = att.k.strides[rank - 1];
  p.vRow = att.v.strides[rank - 2];
  p.outRow = att.result.strides[rank - 2];
  p.biasRow = biasStrides[rank - 2];
  p.biasCol = biasStrides[rank - 1];
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.queryBlocks = static_cast<int>((m + kQueries - 1) / kQueries);
  p.scale = static_cast<float>(att.scale);
  p.nanToZero = att.nanToZero;
  p.causal = att.causal;
  bool f32 = type == DType::F32;
  // 16-byte loads need every row of q, k and v to start 16 bytes apart.
  int64_t perChunk = f32 ? 4 : 8;
  bool stridesAligned = true;
  for (const strided::View *v : {&att.q, &att.k, &att.v})
    for (size_t d = 0; d < rank; ++d)
      if (v->shape[d] != 1 && v->strides[d] != 1 && v->strides[d] % perChunk)
        stridesAligned = false;
  // The bias's vector loads (16 bytes in 16-bit, 8 in f32): rows along the
  // keys at such steps, whole chunks of keys.
  int64_t biasChunk = f32 ? 2 : 8;
  bool biasStridesAligned =
      p.biasCol == 1 && p.biasRow % biasChunk == 0 && n % biasChunk == 0;
  for (int d = 0; d < p.batchRank; ++d)
    biasStridesAligned = biasStridesAligned && p.biasBatch[d] % biasChunk == 0;
  unsigned char element = f32                   ? FusedParams::F32
                          : type == DType::BF16 ? FusedParams::BF16
                                                : FusedParams::F16;
  auto kernel = std::make_unique<AttentionKernel>(
      p, static_cast<int>(headSize), element, f32 && !ctx.options.tf32, hasBias,
      biasStridesAligned, stridesAligned,
      std::array<int64_t, 3>{att.q.offset, att.k.offset, att.v.offset});
  // cuDNN's engines load every operand's rows 16 bytes at a time: rows
  // an odd number of elements apart made them fault (misaligned address).
  bool cudnnAligned = stridesAligned;
  for (size_t d = 0; d < rank; ++d) {
    int64_t out = att.result.strides[d], bias = biasStrides[d];
    if ((att.result.shape[d] != 1 && out != 1 && out % perChunk) ||
        (bias > 1 && bias % perChunk))
      cudnnAligned = false;
  }
  AttentionGeometry geometry;
  // cuDNN's fused attention takes 16-bit operands only.
  if (!f32 && ctx.options.cudnnGraph && cudnnAligned &&
      cudnnGeometry(att, biasStrides, hasBias, geometry)) {
    geometry.element = element;
    geometry.causal = p.causal;
    kernel->useCudnn(CudnnAttention::shared(ctx, geometry));
  }
  k = std::move(kernel);
  return Status();
}

} // namespace partc::runtime::cuda
