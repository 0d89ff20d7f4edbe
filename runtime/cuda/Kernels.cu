//===- Kernels.cu - Support kernels: tuning, gates, batch pointers --------===//
//
// Kernels the executor and the library-backed kernels need: fill patterns
// and differences for tuning, host gates, progress marks and the fault
// probe (CudaWatchdog.cpp), pointer arrays of batched GEMMs and channel
// padding for convolutions. The op kernels live with their
// family (Elementwise.cu, Nn.cu, DataMovement.cu).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/KernelUtils.cuh"

namespace partc::runtime::cuda {

namespace {

/// Deterministic values in [-1, 1) from the element index (a hash, so that
/// neighbouring elements are unrelated).
__global__ void fillPatternKernel(void *x, int64_t n, uint32_t seed,
                                  unsigned char element) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    float v = static_cast<float>(h & 0xffffff) / 8388608.f - 1.f;
    if (element == FusedParams::F32)
      static_cast<float *>(x)[i] = v;
    else
      static_cast<unsigned short *>(x)[i] = narrowTo16(v, element);
  }
}

__device__ inline float elementAt(const void *p, int64_t i,
                                  unsigned char element) {
  return element == FusedParams::F32
             ? static_cast<const float *>(p)[i]
             : wideFrom16(static_cast<const unsigned short *>(p)[i], element);
}

/// result[0] = max |a - b|, result[1] = max |a| (as ordered float bits:
/// non-negative floats compare like their bit patterns).
__global__ void maxDifferenceKernel(const void *a, const void *b, int64_t n,
                                    unsigned *result, unsigned char element) {
  float diff = 0.f, mag = 0.f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    float ai = elementAt(a, i, element);
    float d = fabsf(ai - elementAt(b, i, element));
    // NaN anywhere counts as the largest difference.
    diff = d == d ? fmaxf(diff, d) : FLT_MAX;
    mag = fmaxf(mag, fabsf(ai));
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

__global__ void progressMarkKernel(volatile unsigned *word, unsigned value) {
  *word = value;
  __threadfence_system();
}

__global__ void faultProbeKernel(const volatile unsigned *armed,
                                 const volatile unsigned *release,
                                 uint64_t limitNs) {
  unsigned kind = *armed;
  if (kind == kFaultProbeError)
    __trap();
  if (kind != kFaultProbeHang)
    return;
  auto now = [] {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  };
  uint64_t start = now();
  while (!*release && now() - start < limitNs)
    __nanosleep(10000);
}

} // namespace

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

__global__ void batchPointersKernel(const char *x, const char *y, char *c,
                                    const int64_t *offsets, int count,
                                    int elementBytes, void **pointers) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 3 * count)
    return;
  const char *base = i < count ? x : i < 2 * count ? y : c;
  pointers[i] = const_cast<char *>(base + offsets[i] * elementBytes);
}

cudaError_t launchBatchPointers(const void *x, const void *y, void *c,
                                const int64_t *offsets, int count,
                                int elementBytes, void **pointers,
                                cudaStream_t s) {
  batchPointersKernel<<<blocksFor(3 * int64_t{count}), kThreads, 0, s>>>(
      static_cast<const char *>(x), static_cast<const char *>(y),
      static_cast<char *>(c), offsets, count, elementBytes, pointers);
  return cudaGetLastError();
}

cudaError_t launchFillPattern(void *x, int64_t n, uint32_t seed, cudaStream_t s,
                              unsigned char element) {
  fillPatternKernel<<<blocksFor(n), kThreads, 0, s>>>(x, n, seed, element);
  return cudaGetLastError();
}

cudaError_t launchMaxDifference(const void *a, const void *b, int64_t n,
                                unsigned *result, cudaStream_t s,
                                unsigned char element) {
  cudaError_t err = cudaMemsetAsync(result, 0, 2 * sizeof(unsigned), s);
  if (err != cudaSuccess)
    return err;
  maxDifferenceKernel<<<blocksFor(n), kThreads, 0, s>>>(a, b, n, result,
                                                        element);
  return cudaGetLastError();
}

cudaError_t launchHostGate(const unsigned *word, unsigned value,
                           uint64_t timeoutNs, cudaStream_t s) {
  hostGateKernel<<<1, 1, 0, s>>>(word, value, timeoutNs);
  return cudaGetLastError();
}

cudaError_t launchProgressMark(unsigned *word, unsigned value,
                               cudaStream_t s) {
  progressMarkKernel<<<1, 1, 0, s>>>(word, value);
  return cudaGetLastError();
}

cudaError_t launchFaultProbe(const unsigned *armed, const unsigned *release,
                             uint64_t limitNs, cudaStream_t s) {
  faultProbeKernel<<<1, 1, 0, s>>>(armed, release, limitNs);
  return cudaGetLastError();
}

} // namespace partc::runtime::cuda
