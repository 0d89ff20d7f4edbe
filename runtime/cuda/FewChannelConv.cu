//===- FewChannelConv.cu - Convolutions over few input channels -----------===//
//
// A 16-bit channels-last convolution whose input has at most four channels
// (an image's colours: a CNN's stem) on the tensor cores. cuDNN's kernels
// for these run ResNet-50's 7 x 7 stem at about 35 TFLOP/s on an H200 in
// bf16 (438 us of a 2.2 ms batch of 64): its implicit GEMMs want the
// channels a multiple of 8. Here the GEMM's A operand (pixels x filter
// taps) is never formed in memory: a block stages the input rows under a
// segment of one output row in shared memory, and each lane gathers its
// mma fragments from them through a table of the taps' offsets. The filter
// rows (KRSC, so a row's taps are in the table's order) stay in shared
// memory for every tile the block takes.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/KernelUtils.cuh"
#include "runtime/cuda/MmaFragments.cuh"

#include <algorithm>
#include <mutex>
#include <vector>

namespace partc::runtime::cuda {

namespace {

using u16 = unsigned short;

/// Output channels a block computes: 8 mma tiles of 8.
constexpr int kChannelsPerBlock = 64;
/// Output pixels a warp computes: 2 mma tiles of 16.
constexpr int kPixelsPerWarp = 32;
constexpr int kMaxWarps = 4;
/// Elements after each filter row in shared memory, so that the 8 rows a
/// B fragment reads fall in different banks.
constexpr int kFilterPad = 8;
/// Elements after each staged output pixel (bank spread).
constexpr int kOutputPad = 8;
constexpr int kMaxSharedBytes = 96 << 10;

struct FewChannelLaunch {
  FewChannelConvGeometry g;
  /// Taps of a filter row (kh * kw * c) and that rounded up to 16.
  int taps = 0, paddedTaps = 0;
  /// Window rows hold windowCols pixels from 8 elements before the first
  /// one's 16-byte chunk: windowPitch elements a row.
  int pixelsPerBlock = 0, segmentsPerRow = 0, windowCols = 0, windowPitch = 0;
  int64_t tiles = 0;
};

int sharedBytes(const FewChannelLaunch &p) {
  return kChannelsPerBlock * (p.paddedTaps + kFilterPad) * 2 +
         kChannelsPerBlock * 4 + p.paddedTaps * 4 + p.g.kh * p.windowPitch * 2 +
         p.pixelsPerBlock / 2 * (kChannelsPerBlock + kOutputPad) * 2;
}

__device__ __forceinline__ unsigned tapPair(const u16 *window, int base,
                                            int2 offsets) {
  unsigned low = offsets.x < 0 ? 0u : window[base + offsets.x];
  unsigned high = offsets.y < 0 ? 0u : window[base + offsets.y];
  return low | (high << 16);
}

template <int E>
__global__ void __launch_bounds__(kMaxWarps * 32)
    fewChannelConvKernel(const u16 *x, const u16 *w, const u16 *bias,
                         const u16 *z, u16 *y, FewChannelLaunch p, bool relu,
                         bool silu) {
  extern __shared__ __align__(16) unsigned char shared[];
  const FewChannelConvGeometry &g = p.g;
  const int filterPitch = p.paddedTaps + kFilterPad;
  const int outputPitch = kChannelsPerBlock + kOutputPad;
  // Every region starts 16-byte aligned: the pitches and tap counts are
  // multiples of 8.
  u16 *filter = reinterpret_cast<u16 *>(shared);
  float *biasOf =
      reinterpret_cast<float *>(filter + kChannelsPerBlock * filterPitch);
  int *tapOffsets = reinterpret_cast<int *>(biasOf + kChannelsPerBlock);
  u16 *window = reinterpret_cast<u16 *>(tapOffsets + p.paddedTaps);
  u16 *staged = window + g.kh * p.windowPitch;
  const int channel0 = blockIdx.y * kChannelsPerBlock;
  const int channels = min(kChannelsPerBlock, g.k - channel0);
  const int channelTiles = channels / 8;

  // The block's filter rows, zero past the taps; its bias; each tap's
  // offset in the window (kh, kw, c: the filter's order), -1 past the taps.
  for (int i = threadIdx.x; i < kChannelsPerBlock * p.paddedTaps;
       i += blockDim.x) {
    int o = i / p.paddedTaps, t = i - o * p.paddedTaps;
    filter[o * filterPitch + t] =
        o < channels && t < p.taps ? w[int64_t(channel0 + o) * p.taps + t] : 0;
  }
  for (int o = threadIdx.x; o < kChannelsPerBlock; o += blockDim.x)
    biasOf[o] = bias && o < channels ? wideFrom16(bias[channel0 + o], E) : 0.f;
  for (int t = threadIdx.x; t < p.paddedTaps; t += blockDim.x) {
    int offset = -1;
    if (t < p.taps) {
      int c = t % g.c, r = t / g.c;
      offset = (r / g.kw) * p.windowPitch + (r % g.kw) * g.c + c;
    }
    tapOffsets[t] = offset;
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;
  const int64_t inputRow = int64_t(g.w) * g.c;
  const int chunksPerRow = p.windowPitch / 8;
  // Rows of the input start 16 bytes apart when a row's elements are a
  // multiple of 8 (and the input is aligned): then whole chunks load at
  // once.
  const bool wide =
      inputRow % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  for (int64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
    int segment = static_cast<int>(tile % p.segmentsPerRow);
    int64_t row = tile / p.segmentsPerRow;
    int oy = static_cast<int>(row % g.oh);
    int64_t image = row / g.oh;
    int ox0 = segment * p.pixelsPerBlock;
    int64_t column0 = int64_t(ox0 * g.strideW - g.padLeft) * g.c;
    // The window starts at the 16-byte chunk holding the first column.
    int shift = static_cast<int>(((column0 % 8) + 8) % 8);
    int64_t chunk0 = column0 - shift;
    // The last tile's reads of the window and the staged outputs are done
    // (and, the first time, the filter, bias and offsets are written).
    __syncthreads();
    for (int i = threadIdx.x; i < g.kh * chunksPerRow; i += blockDim.x) {
      int kh = i / chunksPerRow;
      int iy = oy * g.strideH - g.padTop + kh;
      int64_t column = chunk0 + int64_t(i - kh * chunksPerRow) * 8;
      const u16 *source = x + (image * g.h + iy) * inputRow;
      uint4 v = make_uint4(0, 0, 0, 0);
      bool rowInside = iy >= 0 && iy < g.h;
      if (rowInside && wide && column >= 0 && column + 8 <= inputRow) {
        v = *reinterpret_cast<const uint4 *>(source + column);
      } else if (rowInside) {
        u16 e[8];
#pragma unroll
        for (int u = 0; u < 8; ++u)
          e[u] =
              column + u >= 0 && column + u < inputRow ? source[column + u] : 0;
        v = make_uint4(e[0] | unsigned(e[1]) << 16, e[2] | unsigned(e[3]) << 16,
                       e[4] | unsigned(e[5]) << 16,
                       e[6] | unsigned(e[7]) << 16);
      }
      *reinterpret_cast<uint4 *>(window + kh * p.windowPitch +
                                 (i - kh * chunksPerRow) * 8) = v;
    }
    __syncthreads();
    int pixel0 = warp * kPixelsPerWarp;
    if (ox0 + pixel0 < g.ow) {
      // Window offsets of the lane's four pixels: tile m, rows group and
      // group + 8.
      int base[2][2];
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          base[m][h] =
              shift + (pixel0 + m * 16 + group + h * 8) * g.strideW * g.c;
      float acc[2][8][4];
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        float b0 = biasOf[n * 8 + quad * 2], b1 = biasOf[n * 8 + quad * 2 + 1];
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          acc[m][n][0] = acc[m][n][2] = b0;
          acc[m][n][1] = acc[m][n][3] = b1;
        }
      }
#pragma unroll 2
      for (int t0 = 0; t0 < p.paddedTaps; t0 += 16) {
        int2 low = *reinterpret_cast<const int2 *>(tapOffsets + t0 + quad * 2);
        int2 high =
            *reinterpret_cast<const int2 *>(tapOffsets + t0 + quad * 2 + 8);
        unsigned a[2][4];
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          a[m][0] = tapPair(window, base[m][0], low);
          a[m][1] = tapPair(window, base[m][1], low);
          a[m][2] = tapPair(window, base[m][0], high);
          a[m][3] = tapPair(window, base[m][1], high);
        }
        // Every tile of 8 channels, those past the block's channels too
        // (their filter rows are zero): no branch between the products.
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          const u16 *f = filter + (n * 8 + group) * filterPitch + t0 + quad * 2;
          unsigned b0 = *reinterpret_cast<const unsigned *>(f);
          unsigned b1 = *reinterpret_cast<const unsigned *>(f + 8);
          mma16816<E>(acc[0][n], a[0], b0, b1);
          mma16816<E>(acc[1][n], a[1], b0, b1);
        }
      }
      // act(conv + bias + z) rounded, each tile of 16 pixels staged as
      // [pixels, channels] so that a pixel's channels go out in 16-byte
      // chunks.
      u16 *mine = staged + pixel0 / 2 * outputPitch;
      int chunks = channels / 8;
#pragma unroll
      for (int m = 0; m < 2; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          int pixel = m * 16 + group + h * 8;
          int64_t out =
              ((image * g.oh + oy) * g.ow + ox0 + pixel0 + pixel) * g.k +
              channel0;
          bool inside = ox0 + pixel0 + pixel < g.ow;
#pragma unroll
          for (int n = 0; n < 8; ++n) {
            if (n >= channelTiles)
              break;
            int o = n * 8 + quad * 2;
            float v0 = acc[m][n][h * 2], v1 = acc[m][n][h * 2 + 1];
            if (z && inside) {
              unsigned r = *reinterpret_cast<const unsigned *>(z + out + o);
              v0 += wideFrom16(static_cast<u16>(r & 0xffffu), E);
              v1 += wideFrom16(static_cast<u16>(r >> 16), E);
            }
            if (relu) {
              v0 = fmaxf(v0, 0.f);
              v1 = fmaxf(v1, 0.f);
            }
            if (silu) {
              v0 = siluOf(v0);
              v1 = siluOf(v1);
            }
            *reinterpret_cast<unsigned *>(mine +
                                          (pixel - m * 16) * outputPitch + o) =
                narrowPairTo16(v0, v1, E);
          }
        }
        __syncwarp();
        int first = pixel0 + m * 16;
        int pixels = min(16, g.ow - ox0 - first);
        int64_t start =
            ((image * g.oh + oy) * g.ow + ox0 + first) * g.k + channel0;
        for (int i = lane; i < pixels * chunks; i += 32) {
          int pixel = i / chunks, c8 = i - pixel * chunks;
          *reinterpret_cast<uint4 *>(y + start + int64_t(pixel) * g.k +
                                     c8 * 8) =
              *reinterpret_cast<const uint4 *>(mine + pixel * outputPitch +
                                               c8 * 8);
        }
        __syncwarp();
      }
    }
  }
}

bool planLaunch(const FewChannelConvGeometry &g, FewChannelLaunch &p) {
  if (g.c < 1 || g.c > 4 || g.k < 8 || g.k % 8 || g.n < 1 || g.oh < 1 ||
      g.ow < 1 || g.kh < 1 || g.kw < 1 || g.strideH < 1 || g.strideW < 1)
    return false;
  p.g = g;
  p.taps = g.kh * g.kw * g.c;
  p.paddedTaps = (p.taps + 15) / 16 * 16;
  int warps = std::min(kMaxWarps, (g.ow + kPixelsPerWarp - 1) / kPixelsPerWarp);
  p.pixelsPerBlock = warps * kPixelsPerWarp;
  p.segmentsPerRow = (g.ow + p.pixelsPerBlock - 1) / p.pixelsPerBlock;
  p.windowCols = (p.pixelsPerBlock - 1) * g.strideW + g.kw;
  p.windowPitch = (p.windowCols * g.c + 7 + 7) / 8 * 8;
  p.tiles = int64_t(g.n) * g.oh * p.segmentsPerRow;
  return p.paddedTaps <= 256 && sharedBytes(p) <= kMaxSharedBytes;
}

} // namespace

bool fewChannelConvApplies(const FewChannelConvGeometry &g) {
  FewChannelLaunch p;
  return planLaunch(g, p);
}

cudaError_t launchFewChannelConv(const void *x, const void *w, const void *bias,
                                 const void *z, void *y,
                                 const FewChannelConvGeometry &g, bool relu,
                                 bool silu, unsigned char element,
                                 cudaStream_t s) {
  FewChannelLaunch p;
  auto aligned = [](const void *ptr) {
    return reinterpret_cast<uintptr_t>(ptr) % 4 == 0;
  };
  if (element == FusedParams::F32 || !planLaunch(g, p) || !aligned(y) ||
      (z && !aligned(z)))
    return cudaErrorInvalidValue;
  // The staged outputs go out 16 bytes at a time.
  if (reinterpret_cast<uintptr_t>(y) % 16)
    return cudaErrorInvalidValue;
  static int smCount = [] {
    int device = 0, count = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    return count > 0 ? count : 132;
  }();
  // Enough resident blocks to fill the GPU, each loading its filter rows
  // once for the tiles it loops over.
  int64_t blocks = std::min<int64_t>(p.tiles, int64_t(smCount) * 6);
  dim3 grid(
      static_cast<unsigned>(blocks),
      static_cast<unsigned>((g.k + kChannelsPerBlock - 1) / kChannelsPerBlock));
  unsigned threads = p.pixelsPerBlock / kPixelsPerWarp * 32;
  auto *xs = static_cast<const u16 *>(x);
  auto *ws = static_cast<const u16 *>(w);
  auto *bs = static_cast<const u16 *>(bias);
  auto *zs = static_cast<const u16 *>(z);
  auto *ys = static_cast<u16 *>(y);
  // Past 48 KiB of shared memory a kernel must ask for it, once on each
  // device.
  static std::mutex mutex;
  static std::vector<int> raisedOn;
  {
    int device = 0;
    cudaGetDevice(&device);
    std::lock_guard<std::mutex> lock(mutex);
    if (std::find(raisedOn.begin(), raisedOn.end(), device) == raisedOn.end()) {
      // And the most shared memory the SM can give, so that the blocks
      // the registers allow (4) are all resident.
      for (const void *kernel : {reinterpret_cast<const void *>(
                                     fewChannelConvKernel<FusedParams::BF16>),
                                 reinterpret_cast<const void *>(
                                     fewChannelConvKernel<FusedParams::F16>)}) {
        if (cudaError_t err = cudaFuncSetAttribute(
                kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                kMaxSharedBytes);
            err != cudaSuccess)
          return err;
        if (cudaError_t err = cudaFuncSetAttribute(
                kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                cudaSharedmemCarveoutMaxShared);
            err != cudaSuccess)
          return err;
      }
      raisedOn.push_back(device);
    }
  }
  if (element == FusedParams::BF16)
    fewChannelConvKernel<FusedParams::BF16>
        <<<grid, threads, sharedBytes(p), s>>>(xs, ws, bs, zs, ys, p, relu,
                                               silu);
  else
    fewChannelConvKernel<FusedParams::F16>
        <<<grid, threads, sharedBytes(p), s>>>(xs, ws, bs, zs, ys, p, relu,
                                               silu);
  return cudaGetLastError();
}

} // namespace partc::runtime::cuda
