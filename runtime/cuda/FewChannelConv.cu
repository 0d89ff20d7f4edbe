//===- FewChannelConv.cu - Convolutions over few input channels -----------===//
//
// A 16-bit channels-last convolution whose input has at most four channels
// (an image's colours: a CNN's stem) on the tensor cores. cuDNN's kernels
// for these run ResNet-50's 7 x 7 stem at about 35 TFLOP/s on an H200 in
// bf16 (436 us of a 2.1 ms batch of 64): its implicit GEMMs want the
// channels a multiple of 8. Here the GEMM's A operand (pixels x filter
// taps) is never formed in memory: a block stages the input rows under a
// segment of one output row in shared memory, and each lane gathers its
// mma fragments from them. Form 0 gathers each fragment element through a
// table of the taps' offsets (any geometry). Form 1 ("rows") walks the
// filter a row at a time: a row's kw * c taps lie side by side in the
// staged input, so a fragment register is one 32-bit load (when stride
// times channels is even), and the filter's fragments load by ldmatrix.
// The filter rows (KRSC) stay in shared memory for every tile the block
// takes.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/KernelUtils.cuh"
#include "runtime/cuda/MmaFragments.cuh"

#include <algorithm>
#include <array>
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
/// Form 1's most steps of 16 taps a filter row.
constexpr int kMaxRowSteps = 4;

struct FewChannelLaunch {
  FewChannelConvGeometry g;
  int form = 0;
  /// Taps of a filter (kh * kw * c) and that rounded up to 16.
  int taps = 0, paddedTaps = 0;
  /// Form 1: a filter row's taps (kw * c); the zero taps before them (1
  /// where the window's first column is odd, so that pairs load aligned);
  /// both rounded up to 16.
  int rowTaps = 0, rowLead = 0, rowPadded = 0;
  /// Elements from one output channel's filter to the next's in shared
  /// memory.
  int filterPitch = 0;
  /// Window rows hold windowCols pixels from up to 7 elements before the
  /// first one (its 16-byte chunk): windowPitch elements a row.
  int pixelsPerBlock = 0, segmentsPerRow = 0, windowCols = 0, windowPitch = 0;
  int64_t tiles = 0;
};

int sharedBytes(const FewChannelLaunch &p) {
  return kChannelsPerBlock * p.filterPitch * 2 + kChannelsPerBlock * 4 +
         (p.form == 0 ? p.paddedTaps * 4 : 0) + p.g.kh * p.windowPitch * 2 +
         p.pixelsPerBlock / 2 * (kChannelsPerBlock + kOutputPad) * 2;
}

__device__ __forceinline__ unsigned tapPair(const u16 *window, int base,
                                            int2 offsets) {
  unsigned low = offsets.x < 0 ? 0u : window[base + offsets.x];
  unsigned high = offsets.y < 0 ? 0u : window[base + offsets.y];
  return low | (high << 16);
}

__device__ __forceinline__ unsigned load32(const u16 *p) {
  return *reinterpret_cast<const unsigned *>(p);
}

/// Rows = 0: form 0; Rows > 0: form 1 with Rows steps of 16 taps a filter
/// row.
template <int E, int Rows>
__global__ void __launch_bounds__(kMaxWarps * 32, 4)
    fewChannelConvKernel(const u16 *x, const u16 *w, const u16 *bias,
                         const u16 *z, u16 *y, FewChannelLaunch p, bool relu,
                         bool silu) {
  extern __shared__ __align__(16) unsigned char shared[];
  const FewChannelConvGeometry &g = p.g;
  const int filterPitch = p.filterPitch;
  const int outputPitch = kChannelsPerBlock + kOutputPad;
  // Every region starts 16-byte aligned: the pitches and tap counts are
  // multiples of 8.
  u16 *filter = reinterpret_cast<u16 *>(shared);
  float *biasOf =
      reinterpret_cast<float *>(filter + kChannelsPerBlock * filterPitch);
  int *tapOffsets = reinterpret_cast<int *>(biasOf + kChannelsPerBlock);
  u16 *window =
      reinterpret_cast<u16 *>(tapOffsets + (Rows == 0 ? p.paddedTaps : 0));
  u16 *staged = window + g.kh * p.windowPitch;
  const int channel0 = blockIdx.y * kChannelsPerBlock;
  const int channels = min(kChannelsPerBlock, g.k - channel0);
  const int channelTiles = channels / 8;

  // The block's filter rows, zero past the taps (form 1: each filter row
  // padded to rowPadded taps, after rowLead zeros); its bias; form 0: each
  // tap's offset in the window (kh, kw, c: the filter's order), -1 past
  // the taps.
  const int filterTaps = Rows == 0 ? p.paddedTaps : g.kh * p.rowPadded;
  for (int i = threadIdx.x; i < kChannelsPerBlock * filterTaps;
       i += blockDim.x) {
    int o = i / filterTaps, t = i - o * filterTaps;
    int source = t;
    if constexpr (Rows > 0) {
      int kh = t / p.rowPadded, j = t - kh * p.rowPadded - p.rowLead;
      source = j >= 0 && j < p.rowTaps ? kh * p.rowTaps + j : p.taps;
    }
    filter[o * filterPitch + t] =
        o < channels && source < p.taps
            ? w[int64_t(channel0 + o) * p.taps + source]
            : 0;
  }
  for (int o = threadIdx.x; o < kChannelsPerBlock; o += blockDim.x)
    biasOf[o] = bias && o < channels ? wideFrom16(bias[channel0 + o], E) : 0.f;
  if constexpr (Rows == 0)
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
  // Form 1: which halves of the lane's A registers hold real taps (the
  // staged input past a filter row's taps belongs to other pixels, and a
  // zero weight would turn an infinity there into NaN); and where the
  // lane's ldmatrix row of the filter starts (two tiles of 8 channels a
  // load: matrices lane / 8 = tile 2t + lane / 16, taps (lane / 8) % 2 * 8).
  unsigned lowMask[Rows > 0 ? Rows : 1] = {},
                                     highMask[Rows > 0 ? Rows : 1] = {};
  int filterLane = 0;
  if constexpr (Rows > 0) {
    auto real = [&](int j) {
      return j >= p.rowLead && j < p.rowLead + p.rowTaps;
    };
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
      int j = 16 * r + quad * 2;
      lowMask[r] = (real(j) ? 0xffffu : 0u) | (real(j + 1) ? 0xffff0000u : 0u);
      highMask[r] =
          (real(j + 8) ? 0xffffu : 0u) | (real(j + 9) ? 0xffff0000u : 0u);
    }
    filterLane =
        ((lane / 16) * 8 + lane % 8) * filterPitch + (lane / 8) % 2 * 8;
  }

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
    if (ox0 + pixel0 >= g.ow)
      continue;
    // Window offsets of the lane's four pixels: tile m, rows group and
    // group + 8 (form 1 reads from rowLead elements earlier, so that the
    // offsets are even).
    int base[2][2];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        base[m][h] = shift - (Rows > 0 ? p.rowLead : 0) +
                     (pixel0 + m * 16 + group + h * 8) * g.strideW * g.c;
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
    // Every tile of 8 channels, those past the block's channels too (their
    // filter rows are zero): no branch between the products.
    if constexpr (Rows == 0) {
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
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          const u16 *f = filter + (n * 8 + group) * filterPitch + t0 + quad * 2;
          unsigned b0 = load32(f), b1 = load32(f + 8);
          mma16816<E>(acc[0][n], a[0], b0, b1);
          mma16816<E>(acc[1][n], a[1], b0, b1);
        }
      }
    } else {
      for (int kh = 0; kh < g.kh; ++kh) {
        const u16 *inputs = window + kh * p.windowPitch;
        const u16 *taps = filter + kh * p.rowPadded + filterLane;
#pragma unroll
        for (int r = 0; r < Rows; ++r) {
          int j = 16 * r + quad * 2;
          unsigned a[2][4];
#pragma unroll
          for (int m = 0; m < 2; ++m) {
            a[m][0] = load32(inputs + base[m][0] + j) & lowMask[r];
            a[m][1] = load32(inputs + base[m][1] + j) & lowMask[r];
            a[m][2] = load32(inputs + base[m][0] + j + 8) & highMask[r];
            a[m][3] = load32(inputs + base[m][1] + j + 8) & highMask[r];
          }
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            unsigned b[4];
            loadMatrices<false>(b, taps + t * 16 * filterPitch + 16 * r);
            mma16816<E>(acc[0][2 * t], a[0], b[0], b[1]);
            mma16816<E>(acc[1][2 * t], a[1], b[0], b[1]);
            mma16816<E>(acc[0][2 * t + 1], a[0], b[2], b[3]);
            mma16816<E>(acc[1][2 * t + 1], a[1], b[2], b[3]);
          }
        }
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
          *reinterpret_cast<unsigned *>(mine + (pixel - m * 16) * outputPitch +
                                        o) = narrowPairTo16(v0, v1, E);
        }
      }
      __syncwarp();
      int first = pixel0 + m * 16;
      int pixels = min(16, g.ow - ox0 - first);
      int64_t start =
          ((image * g.oh + oy) * g.ow + ox0 + first) * g.k + channel0;
      for (int i = lane; i < pixels * chunks; i += 32) {
        int pixel = i / chunks, c8 = i - pixel * chunks;
        *reinterpret_cast<uint4 *>(y + start + int64_t(pixel) * g.k + c8 * 8) =
            *reinterpret_cast<const uint4 *>(mine + pixel * outputPitch +
                                             c8 * 8);
      }
      __syncwarp();
    }
  }
}

bool planLaunch(const FewChannelConvGeometry &g, int form,
                FewChannelLaunch &p) {
  if (g.c < 1 || g.c > 4 || g.k < 8 || g.k % 8 || g.n < 1 || g.oh < 1 ||
      g.ow < 1 || g.kh < 1 || g.kw < 1 || g.strideH < 1 || g.strideW < 1 ||
      g.padLeft < 0 || form < 0 || form > 1)
    return false;
  p.g = g;
  p.form = form;
  p.taps = g.kh * g.kw * g.c;
  p.paddedTaps = (p.taps + 15) / 16 * 16;
  p.rowTaps = g.kw * g.c;
  p.rowLead = (g.padLeft * g.c) % 2;
  p.rowPadded = (p.rowTaps + p.rowLead + 15) / 16 * 16;
  p.filterPitch = (form == 0 ? p.paddedTaps : g.kh * p.rowPadded) + kFilterPad;
  int warps = std::min(kMaxWarps, (g.ow + kPixelsPerWarp - 1) / kPixelsPerWarp);
  p.pixelsPerBlock = warps * kPixelsPerWarp;
  p.segmentsPerRow = (g.ow + p.pixelsPerBlock - 1) / p.pixelsPerBlock;
  p.windowCols = (p.pixelsPerBlock - 1) * g.strideW + g.kw;
  // Form 1 reads up to a padded filter row past the last pixel's taps.
  p.windowPitch =
      (p.windowCols * g.c + 7 + 7) / 8 * 8 + (form == 1 ? p.rowPadded : 0);
  p.tiles = int64_t(g.n) * g.oh * p.segmentsPerRow;
  if (form == 0 && p.paddedTaps > 256)
    return false;
  // Form 1: pixels an even number of elements apart, a few steps a row.
  if (form == 1 && ((g.strideW * g.c) % 2 || p.rowPadded > 16 * kMaxRowSteps))
    return false;
  return sharedBytes(p) <= kMaxSharedBytes;
}

template <int E, int Rows>
void launchForm(dim3 grid, unsigned threads, int bytes, cudaStream_t s,
                const void *x, const void *w, const void *bias, const void *z,
                void *y, const FewChannelLaunch &p, bool relu, bool silu) {
  fewChannelConvKernel<E, Rows><<<grid, threads, bytes, s>>>(
      static_cast<const u16 *>(x), static_cast<const u16 *>(w),
      static_cast<const u16 *>(bias), static_cast<const u16 *>(z),
      static_cast<u16 *>(y), p, relu, silu);
}

/// Every instantiation, to raise their shared-memory limits.
template <int E> std::array<const void *, kMaxRowSteps + 1> kernelsOf() {
  return {reinterpret_cast<const void *>(fewChannelConvKernel<E, 0>),
          reinterpret_cast<const void *>(fewChannelConvKernel<E, 1>),
          reinterpret_cast<const void *>(fewChannelConvKernel<E, 2>),
          reinterpret_cast<const void *>(fewChannelConvKernel<E, 3>),
          reinterpret_cast<const void *>(fewChannelConvKernel<E, 4>)};
}

/// Past 48 KiB of shared memory a kernel must ask for it, once on each
/// device; and for the most the SM can give, so that the blocks its
/// registers allow (4) are all resident.
cudaError_t raiseSharedMemory() {
  static std::mutex mutex;
  static std::vector<int> raisedOn;
  int device = 0;
  if (cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    return err;
  std::lock_guard<std::mutex> lock(mutex);
  if (std::find(raisedOn.begin(), raisedOn.end(), device) != raisedOn.end())
    return cudaSuccess;
  std::vector<const void *> kernels;
  for (const void *k : kernelsOf<FusedParams::BF16>())
    kernels.push_back(k);
  for (const void *k : kernelsOf<FusedParams::F16>())
    kernels.push_back(k);
  for (const void *kernel : kernels) {
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
  return cudaSuccess;
}

} // namespace

int fewChannelConvForms(const FewChannelConvGeometry &g) {
  FewChannelLaunch p;
  return !planLaunch(g, 0, p) ? 0 : planLaunch(g, 1, p) ? 2 : 1;
}

cudaError_t launchFewChannelConv(const void *x, const void *w, const void *bias,
                                 const void *z, void *y,
                                 const FewChannelConvGeometry &g, bool relu,
                                 bool silu, unsigned char element,
                                 cudaStream_t s, int form) {
  FewChannelLaunch p;
  // The staged outputs go out 16 bytes at a time; a residual is read 4.
  if (element == FusedParams::F32 || !planLaunch(g, form, p) ||
      reinterpret_cast<uintptr_t>(y) % 16 ||
      (z && reinterpret_cast<uintptr_t>(z) % 4))
    return cudaErrorInvalidValue;
  static int smCount = [] {
    int device = 0, count = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    return count > 0 ? count : 132;
  }();
  if (cudaError_t err = raiseSharedMemory(); err != cudaSuccess)
    return err;
  // Enough resident blocks to fill the GPU, each loading its filter rows
  // once for the tiles it loops over.
  int64_t blocks = std::min<int64_t>(p.tiles, int64_t(smCount) * 6);
  dim3 grid(
      static_cast<unsigned>(blocks),
      static_cast<unsigned>((g.k + kChannelsPerBlock - 1) / kChannelsPerBlock));
  unsigned threads = p.pixelsPerBlock / kPixelsPerWarp * 32;
  int bytes = sharedBytes(p);
  int rows = form == 0 ? 0 : p.rowPadded / 16;
  using Launcher = void (*)(dim3, unsigned, int, cudaStream_t, const void *,
                            const void *, const void *, const void *, void *,
                            const FewChannelLaunch &, bool, bool);
  // By element type, then form 0 and form 1 with 1 to 4 steps a row.
  static constexpr Launcher kLaunchers[2][kMaxRowSteps + 1] = {
      {launchForm<FusedParams::BF16, 0>, launchForm<FusedParams::BF16, 1>,
       launchForm<FusedParams::BF16, 2>, launchForm<FusedParams::BF16, 3>,
       launchForm<FusedParams::BF16, 4>},
      {launchForm<FusedParams::F16, 0>, launchForm<FusedParams::F16, 1>,
       launchForm<FusedParams::F16, 2>, launchForm<FusedParams::F16, 3>,
       launchForm<FusedParams::F16, 4>}};
  kLaunchers[element == FusedParams::BF16 ? 0 : 1][rows](
      grid, threads, bytes, s, x, w, bias, z, y, p, relu, silu);
  return cudaGetLastError();
}

} // namespace partc::runtime::cuda
