//===- AxisOps.cu - GPU kernels of ArgMax, ArgMin, CumSum and TopK --------===//
//
// ArgMax/ArgMin give each line a warp; TopK gives each line a block that
// picks the k elements one by one, each the best of those ranked after the
// previous pick, so it needs no scratch memory. CumSum scans each line in
// one thread: its lines are short in the models that use it (positions).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/KernelUtils.cuh"
#include "runtime/kernels/AxisOps.h"
#include "runtime/kernels/KernelRegistry.h"

namespace partc::runtime::cuda {

namespace {

using axis::Lines;
using axis::linesOf;

constexpr int kWarps = kThreads / 32;

/// Combines each lane's candidate (index `best`, -1 for none, and its
/// value) into lane 0's: the one that ranks first.
template <class T>
__device__ void warpBest(int64_t &best, T &bestValue, bool largest,
                         bool nanFirst, bool last) {
  for (int offset = 16; offset > 0; offset /= 2) {
    long long other = __shfl_down_sync(0xffffffffu, (long long)best, offset);
    T otherValue = __shfl_down_sync(0xffffffffu, bestValue, offset);
    if (other >= 0 &&
        (best < 0 || axis::ranksBefore(otherValue, other, bestValue, best,
                                       largest, nanFirst, last))) {
      best = other;
      bestValue = otherValue;
    }
  }
}

template <class T>
__global__ void argReduceKernel(const T *x, int64_t *y, Lines l, bool largest,
                                bool last) {
  int lane = threadIdx.x & 31;
  int64_t lines = l.outer * l.inner;
  int64_t stride = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t line = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
       line < lines; line += stride) {
    const T *p = x + (line / l.inner) * l.extent * l.inner + line % l.inner;
    int64_t best = -1;
    T bestValue{};
    for (int64_t j = lane; j < l.extent; j += 32) {
      T v = p[j * l.inner];
      if (best < 0 ||
          axis::ranksBefore(v, j, bestValue, best, largest, true, last)) {
        best = j;
        bestValue = v;
      }
    }
    warpBest(best, bestValue, largest, true, last);
    if (lane == 0)
      y[line] = best;
  }
}

template <class T>
__global__ void cumSumKernel(const T *x, T *y, Lines l, bool exclusive,
                             bool reverse) {
  int64_t lines = l.outer * l.inner;
  for (int64_t line = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       line < lines; line += int64_t(gridDim.x) * blockDim.x) {
    int64_t base = (line / l.inner) * l.extent * l.inner + line % l.inner;
    T acc = T(0);
    for (int64_t s = 0; s < l.extent; ++s) {
      int64_t at = base + (reverse ? l.extent - 1 - s : s) * l.inner;
      T v = x[at];
      if (!exclusive)
        acc = axis::wrapAdd(acc, v);
      y[at] = acc;
      if (exclusive)
        acc = axis::wrapAdd(acc, v);
    }
  }
}

template <class T>
__global__ void topKKernel(const T *x, T *values, int64_t *indices, Lines l,
                           int64_t k, bool largest) {
  __shared__ T warpValue[kWarps];
  __shared__ int64_t warpIndex[kWarps];
  __shared__ T pickedValue;
  __shared__ int64_t picked;
  int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  int64_t lines = l.outer * l.inner;
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {
    int64_t o = line / l.inner, i = line % l.inner;
    const T *p = x + o * l.extent * l.inner + i;
    int64_t prev = -1;
    T prevValue{};
    for (int64_t r = 0; r < k; ++r) {
      int64_t best = -1;
      T bestValue{};
      for (int64_t j = threadIdx.x; j < l.extent; j += blockDim.x) {
        T v = p[j * l.inner];
        if (prev >= 0 &&
            !axis::ranksBefore(prevValue, prev, v, j, largest, largest, false))
          continue;
        if (best < 0 ||
            axis::ranksBefore(v, j, bestValue, best, largest, largest, false)) {
          best = j;
          bestValue = v;
        }
      }
      warpBest(best, bestValue, largest, largest, false);
      if (lane == 0) {
        warpIndex[warp] = best;
        warpValue[warp] = bestValue;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        for (int w = 1; w < kWarps; ++w)
          if (warpIndex[w] >= 0 &&
              (best < 0 ||
               axis::ranksBefore(warpValue[w], warpIndex[w], bestValue, best,
                                 largest, largest, false))) {
            best = warpIndex[w];
            bestValue = warpValue[w];
          }
        int64_t at = o * k * l.inner + r * l.inner + i;
        values[at] = bestValue;
        indices[at] = best;
        picked = best;
        pickedValue = bestValue;
      }
      __syncthreads();
      prev = picked;
      prevValue = pickedValue;
    }
  }
}

/// Calls fn(T{}) for the types the GPU kernels take; false for others
/// (whose ops the CPU kernels run).
template <class Fn> bool dispatchGpu(DType t, Fn &&fn) {
  switch (t) {
  case DType::F32:
    fn(float{});
    return true;
  case DType::F64:
    fn(double{});
    return true;
  case DType::I32:
    fn(int32_t{});
    return true;
  case DType::I64:
    fn(int64_t{});
    return true;
  default:
    return false;
  }
}

int gridFor(int64_t units) {
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(units, 65535)));
}

GpuFactory argReduceFactory(bool largest) {
  return [largest](const KernelArgs &a, DeviceContext &,
                   std::unique_ptr<GpuKernel> &k) -> Status {
    const TensorType &x = a.inputs[0];
    Lines l = linesOf(x.shape, a.attrs.getInt("axis"));
    bool last = a.attrs.getInt("select_last_index") != 0;
    DType dt = x.dtype;
    if (!dispatchGpu(dt, [](auto) {}) || l.outer * l.inner == 0)
      return Status();
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      dispatchGpu(dt, [&](auto tag) {
        using T = decltype(tag);
        argReduceKernel<T><<<gridFor((l.outer * l.inner + kWarps - 1) / kWarps),
                             kThreads, 0, ctx.stream>>>(
            in[0].as<T>(), out[0].as<int64_t>(), l, largest, last);
      });
      return cudaStatus(cudaGetLastError(), largest ? "arg_max" : "arg_min");
    });
    return Status();
  };
}

Status createCumSum(const KernelArgs &a, DeviceContext &,
                    std::unique_ptr<GpuKernel> &k) {
  const TensorType &x = a.inputs[0];
  Lines l = linesOf(x.shape, a.attrs.getInt("axis"));
  bool exclusive = a.attrs.getInt("exclusive") != 0,
       reverse = a.attrs.getInt("reverse") != 0;
  DType dt = x.dtype;
  if (!dispatchGpu(dt, [](auto) {}) || x.numElements() == 0)
    return Status();
  k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out) {
    dispatchGpu(dt, [&](auto tag) {
      using T = decltype(tag);
      cumSumKernel<T>
          <<<blocksFor(l.outer * l.inner), kThreads, 0, ctx.stream>>>(
              in[0].as<T>(), out[0].as<T>(), l, exclusive, reverse);
    });
    return cudaStatus(cudaGetLastError(), "cum_sum");
  });
  return Status();
}

Status createTopK(const KernelArgs &a, DeviceContext &,
                  std::unique_ptr<GpuKernel> &k) {
  const TensorType &x = a.inputs[0];
  Lines l = linesOf(x.shape, a.attrs.getInt("axis"));
  int64_t count = a.attrs.getInt("k");
  bool largest = a.attrs.getInt("largest") != 0;
  DType dt = x.dtype;
  if (!dispatchGpu(dt, [](auto) {}) || count == 0 || l.outer * l.inner == 0)
    return Status();
  k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out) {
    dispatchGpu(dt, [&](auto tag) {
      using T = decltype(tag);
      topKKernel<T><<<gridFor(l.outer * l.inner), kThreads, 0, ctx.stream>>>(
          in[0].as<T>(), out[0].as<T>(), out[1].as<int64_t>(), l, count,
          largest);
    });
    return cudaStatus(cudaGetLastError(), "top_k");
  });
  return Status();
}

} // namespace

void registerAxisGpuKernels(GpuKernelTable &t) {
  t["arg_max"] = argReduceFactory(true);
  t["arg_min"] = argReduceFactory(false);
  t["cum_sum"] = createCumSum;
  t["top_k"] = createTopK;
}

} // namespace partc::runtime::cuda
