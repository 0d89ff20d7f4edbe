//===- Elementwise.cu - Element-wise CUDA kernels
//---------------------------===//
//
// Unary and binary steps (their formulas in ElementwiseOps.h), the fused
// chain interpreter, comparisons, logic, where, casts and float tests.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/KernelUtils.cuh"
#include "runtime/kernels/FusedElementwise.h"

#include <cuda_fp16.h>

namespace partc::runtime::cuda {

namespace {

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
  __device__ unsigned char element(const FusedParams &p, int k) const {
    return p.element[k];
  }
  __device__ unsigned char outElement(const FusedParams &p) const {
    return p.outElement;
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
  if (p.parts)
    runFusedChainParts<1>(p, InterpretedChain());
  else
    runFusedChain(p, InterpretedChain());
}
__global__ void fusedKernel4(FusedParams p) {
  if (p.parts)
    runFusedChainParts<4>(p, InterpretedChain());
  else
    runFusedChainWide<4>(p, InterpretedChain());
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
} // namespace

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

namespace {
bool fusedFitsWidth(const FusedParams &p, unsigned width) {
  if (p.n % width != 0 || !aligned16(p.out))
    return false;
  for (int q = 0; q < p.parts; ++q)
    if ((p.partStart[q + 1] - p.partStart[q]) % width != 0 ||
        !aligned16(p.part[q]))
      return false;
  for (int k = 0; k < p.inputs; ++k) {
    if (p.mode[k] == FusedParams::Same && !aligned16(p.in[k]))
      return false;
    if (p.mode[k] != FusedParams::Broadcast)
      continue;
    unsigned innerStride = p.stride[k][p.rank - 1];
    if (p.shape[p.rank - 1] % width != 0 || innerStride > 1 ||
        (innerStride == 1 && !aligned16(p.in[k])))
      return false;
  }
  return true;
}
} // namespace

int fusedWidth(const FusedParams &p) {
  if (p.outElement != FusedParams::F32 && fusedFitsWidth(p, 8))
    return 8;
  return fusedFitsWidth(p, 4) ? 4 : 1;
}

unsigned fusedBlocks(const FusedParams &p, int width) {
  static_assert(kFusedThreads == kThreads, "blocksFor counts blocks of these");
  return static_cast<unsigned>(blocksFor(p.n / width));
}

cudaError_t launchEpilogue16(void *y, const void *bias, const void *z,
                             int64_t n, int64_t c, int64_t inner, bool relu,
                             unsigned char element, cudaStream_t s) {
  if ((!bias && !z && !relu) || n == 0)
    return cudaSuccess;
  // [outer, c, inner], the bias read along c only.
  FusedParams p;
  p.rank = 3;
  p.shape[0] = static_cast<unsigned>(n / (c * inner));
  p.shape[1] = static_cast<unsigned>(c);
  p.shape[2] = static_cast<unsigned>(inner);
  p.n = static_cast<unsigned>(n);
  p.out = y;
  p.outElement = element;
  auto input = [&](const void *data, FusedParams::Mode mode) {
    int k = p.inputs++;
    p.in[k] = data;
    p.element[k] = element;
    p.mode[k] = mode;
    if (mode == FusedParams::Broadcast)
      p.stride[k][1] = 1;
    return k;
  };
  auto step = [&](ew::Step op, int lhs, int rhs) {
    int i = p.steps++;
    p.step[i] = static_cast<unsigned char>(op);
    p.lhs[i] = static_cast<signed char>(lhs);
    p.rhs[i] = static_cast<signed char>(rhs);
    return -i - 1;
  };
  int value = input(y, FusedParams::Same);
  if (bias)
    value = step(ew::Step::Add, value, input(bias, FusedParams::Broadcast));
  if (z)
    value = step(ew::Step::Add, value, input(z, FusedParams::Same));
  if (relu)
    step(ew::Step::Relu, value, value);
  return launchFusedElementwise(p, s);
}

cudaError_t launchUnary16(ew::Step op, void *y, int64_t n,
                          unsigned char element, cudaStream_t s) {
  if (n == 0)
    return cudaSuccess;
  if (n > INT32_MAX)
    return cudaErrorInvalidValue; // FusedParams counts in 32 bits
  FusedParams p;
  p.steps = p.inputs = p.rank = 1;
  p.step[0] = static_cast<unsigned char>(op);
  p.shape[0] = static_cast<unsigned>(n);
  p.n = static_cast<unsigned>(n);
  p.in[0] = y;
  p.element[0] = p.outElement = element;
  p.mode[0] = FusedParams::Same;
  p.out = y;
  return launchFusedElementwise(p, s);
}

cudaError_t launchFusedElementwise(const FusedParams &p, cudaStream_t s) {
  // The interpreter keeps four elements a thread at most: eight would
  // double its values in local memory.
  int width = fusedWidth(p) >= 4 ? 4 : 1;
  if (width == 4)
    fusedKernel4<<<fusedBlocks(p, width), kFusedThreads, 0, s>>>(p);
  else
    fusedKernel<<<fusedBlocks(p, width), kFusedThreads, 0, s>>>(p);
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
/// f32 to and from bf16, rounded as the CPU backend and the fused chains
/// round (FusedChain.cuh).
__global__ void castToBf16Kernel(const float *x, unsigned short *y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = narrowTo16(x[i], FusedParams::BF16);
}
__global__ void castFromBf16Kernel(const unsigned short *x, float *y,
                                   int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = wideFrom16(x[i], FusedParams::BF16);
}
} // namespace

bool castSupported(DType from, DType to) {
  if ((from == DType::F32 && to == DType::BF16) ||
      (from == DType::BF16 && to == DType::F32))
    return true;
  return dispatchCast(from, to, [](auto, auto) {});
}

cudaError_t launchCast(DType from, DType to, const void *x, void *y, int64_t n,
                       cudaStream_t s) {
  if (n == 0)
    return cudaSuccess;
  if (from == DType::F32 && to == DType::BF16) {
    castToBf16Kernel<<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<const float *>(x), static_cast<unsigned short *>(y), n);
    return cudaGetLastError();
  }
  if (from == DType::BF16 && to == DType::F32) {
    castFromBf16Kernel<<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<const unsigned short *>(x), static_cast<float *>(y), n);
    return cudaGetLastError();
  }
  cudaError_t err = cudaErrorNotSupported;
  dispatchCast(from, to, [&](auto f, auto t) {
    err = castAs<decltype(f), decltype(t)>(x, y, n, s);
  });
  return err;
}

} // namespace partc::runtime::cuda
