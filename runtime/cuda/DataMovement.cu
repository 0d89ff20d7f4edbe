//===- DataMovement.cu - GPU kernels that move and resample data ----------===//
//
// The GPU side of runtime/kernels/DataMovement.cpp, registered as one
// family (registerDataMovementGpuKernels). Each op's semantics come from
// the header the CPU kernel uses too (Resize.h), so the two cannot drift.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/KernelUtils.cuh"
#include "runtime/kernels/CopyLayout.h"
#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/ElementwiseOps.h"
#include "runtime/kernels/IndexTuples.h"
#include "runtime/kernels/KernelRegistry.h"
#include "runtime/kernels/Resize.h"

#include <algorithm>

namespace partc::runtime::cuda {

//===----------------------------------------------------------------------===//
// Device code: strided copies, gathers, scatters, concatenation, padding
//===----------------------------------------------------------------------===//

namespace {

template <typename T>
__global__ void stridedCopyKernel(const T *in, T *out, int64_t n, Strides st,
                                  int64_t base) {
  bool narrow = narrowIndex(n);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = in[base + offsetOf(st, 0, i, narrow)];
}

/// Copies rows of `inner` units (`Unit`: 1 to 16 bytes, the widest the row
/// size and the pointers allow) from the indexed positions of `data`.
template <typename Unit, typename Index>
__global__ void gatherKernel(const Unit *data, const void *indices, bool idx64,
                             Unit *out, Index outer, Index axisLen, Index count,
                             Index inner, int *bad) {
  Index total = outer * count * inner;
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < total;
       i += Index(gridDim.x) * blockDim.x) {
    Index unit = i % inner, row = i / inner;
    Index k = row % count, o = row / count;
    int64_t idx = idx64 ? static_cast<const int64_t *>(indices)[k]
                        : static_cast<const int *>(indices)[k];
    if (idx < 0)
      idx += axisLen;
    if (idx < 0 || idx >= axisLen) {
      *bad = 1;
      continue;
    }
    out[i] = data[(o * axisLen + Index(idx)) * inner + unit];
  }
}

/// Byte offset of the slice tuple t addresses within its batch, or -1.
__device__ inline int64_t tupleOffset(const NdTupleParams &p,
                                      const void *indices, bool idx64,
                                      int64_t t) {
  int64_t offset = 0;
  for (int d = 0; d < p.k; ++d) {
    int64_t i = idx64 ? static_cast<const int64_t *>(indices)[t * p.k + d]
                      : static_cast<const int *>(indices)[t * p.k + d];
    if (i < 0)
      i += p.extent[d];
    if (i < 0 || i >= p.extent[d])
      return -1;
    offset += i * p.strideBytes[d];
  }
  return offset + (t / p.tuplesPerBatch) * p.batchBytes;
}

template <typename Unit>
__global__ void gatherNdKernel(const Unit *data, const void *indices,
                               bool idx64, Unit *out, NdTupleParams p,
                               int *bad) {
  int64_t slice = p.sliceBytes / int64_t(sizeof(Unit));
  int64_t total = p.batches * p.tuplesPerBatch * slice;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t offset = tupleOffset(p, indices, idx64, i / slice);
    if (offset < 0) {
      *bad = 1;
      continue;
    }
    out[i] = data[offset / int64_t(sizeof(Unit)) + i % slice];
  }
}

/// Every (tuple, unit) pair in parallel. Without a reduction ONNX leaves
/// repeated tuples undefined; adding (`Add`, Unit float) uses atomic adds:
/// an embedding's gradient scatters thousands of rows into a few, where a
/// thread per element walking the tuples in order leaves the GPU idle.
/// Repeated tuples then add in an order that varies between runs (within
/// float rounding; the CPU reference adds in tuple order).
template <typename Unit, bool Add = false>
__global__ void scatterNdKernel(Unit *out, const void *indices, bool idx64,
                                const Unit *updates, NdTupleParams p,
                                int *bad) {
  int64_t slice = p.sliceBytes / int64_t(sizeof(Unit));
  int64_t total = p.tuplesPerBatch * slice;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t offset = tupleOffset(p, indices, idx64, i / slice);
    if (offset < 0) {
      *bad = 1;
      continue;
    }
    Unit &y = out[offset / int64_t(sizeof(Unit)) + i % slice];
    if constexpr (Add)
      atomicAdd(&y, updates[i]);
    else
      y = updates[i];
  }
}

/// With a reduction, a thread per slice element applies the tuples in
/// order, so repeated tuples combine exactly as on the CPU.
__global__ void scatterNdReduceKernel(float *out, const void *indices,
                                      bool idx64, const float *updates,
                                      NdTupleParams p, int reduction,
                                      int *bad) {
  int64_t slice = p.sliceBytes / int64_t(sizeof(float));
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < slice;
       e += int64_t(gridDim.x) * blockDim.x)
    for (int64_t t = 0; t < p.tuplesPerBatch; ++t) {
      int64_t offset = tupleOffset(p, indices, idx64, t);
      if (offset < 0) {
        *bad = 1;
        return;
      }
      float &y = out[offset / int64_t(sizeof(float)) + e];
      float u = updates[t * slice + e];
      y = reduction == 1   ? y + u
          : reduction == 2 ? y * u
          : reduction == 3 ? ew::maxKeepNan(y, u)
                           : ew::minKeepNan(y, u);
    }
}

__global__ void padKernel(const float *x, float *y, int64_t n, PadParams p,
                          float value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = i, src = 0;
    bool inside = true;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t c = rem % p.outShape[d] - p.begin[d], size = p.inShape[d];
      rem /= p.outShape[d];
      if (c < 0 || c >= size) {
        if (p.mode == PadMode::Edge) {
          c = c < 0 ? 0 : size - 1;
        } else if (p.mode == PadMode::Reflect) {
          // Mirrored about the edge elements, which are not repeated.
          int64_t period = 2 * (size - 1);
          c = period ? ((c % period) + period) % period : 0;
          if (c >= size)
            c = period - c;
        } else {
          inside = false;
        }
      }
      src += c * p.inStride[d];
    }
    y[i] = inside ? x[src] : value;
  }
}

} // namespace

namespace {

/// A memset node's fill as a kernel: `count` elements of `elementSize`
/// (1, 2 or 4) bytes, each `value`.
__global__ void fillKernel(void *dst, unsigned value, unsigned elementSize,
                           uint64_t count) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count;
       i += uint64_t(gridDim.x) * blockDim.x) {
    if (elementSize == 4)
      static_cast<unsigned *>(dst)[i] = value;
    else if (elementSize == 2)
      static_cast<unsigned short *>(dst)[i] =
          static_cast<unsigned short>(value);
    else
      static_cast<unsigned char *>(dst)[i] = static_cast<unsigned char>(value);
  }
}

} // namespace

cudaError_t addFillKernelNode(cudaGraph_t graph, const cudaGraphNode_t *deps,
                              size_t numDeps, const cudaMemsetParams &fill,
                              cudaGraphNode_t *node) {
  void *dst = fill.dst;
  unsigned value = fill.value, elementSize = fill.elementSize;
  uint64_t count = fill.width;
  if (fill.height != 1 ||
      (elementSize != 1 && elementSize != 2 && elementSize != 4) ||
      reinterpret_cast<uintptr_t>(dst) % elementSize)
    return cudaErrorInvalidValue;
  constexpr unsigned kThreads = 256;
  uint64_t blocks = std::min<uint64_t>((count + kThreads - 1) / kThreads, 1024);
  void *args[] = {&dst, &value, &elementSize, &count};
  cudaKernelNodeParams params{};
  params.func = reinterpret_cast<void *>(fillKernel);
  params.gridDim = dim3(static_cast<unsigned>(std::max<uint64_t>(blocks, 1)));
  params.blockDim = dim3(kThreads);
  params.kernelParams = args;
  return cudaGraphAddKernelNode(node, graph, deps, numDeps, &params);
}

cudaError_t launchStridedCopy(const void *in, void *out, int64_t n,
                              const Strides &st, int64_t base, size_t elemSize,
                              cudaStream_t s) {
  switch (elemSize) {
  case 1:
    stridedCopyKernel<<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<const uint8_t *>(in), static_cast<uint8_t *>(out), n, st,
        base);
    break;
  case 2:
    stridedCopyKernel<<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<const uint16_t *>(in), static_cast<uint16_t *>(out), n, st,
        base);
    break;
  case 4:
    stridedCopyKernel<<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<const uint32_t *>(in), static_cast<uint32_t *>(out), n, st,
        base);
    break;
  case 8:
    stridedCopyKernel<<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<const uint64_t *>(in), static_cast<uint64_t *>(out), n, st,
        base);
    break;
  case 16:
    stridedCopyKernel<<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<const uint4 *>(in), static_cast<uint4 *>(out), n, st, base);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename Unit>
cudaError_t launchGatherUnits(const void *data, const void *indices, bool idx64,
                              void *out, int64_t outer, int64_t axisLen,
                              int64_t count, int64_t innerBytes, int *badIndex,
                              cudaStream_t s) {
  int64_t inner = innerBytes / int64_t(sizeof(Unit));
  int64_t total = outer * count * inner;
  auto *in = static_cast<const Unit *>(data);
  auto *result = static_cast<Unit *>(out);
  // 32-bit index arithmetic where every offset fits.
  if (total < (int64_t(1) << 31) &&
      outer * axisLen * inner < (int64_t(1) << 31))
    gatherKernel<Unit, int32_t><<<blocksFor(total), kThreads, 0, s>>>(
        in, indices, idx64, result, int32_t(outer), int32_t(axisLen),
        int32_t(count), int32_t(inner), badIndex);
  else
    gatherKernel<Unit, int64_t><<<blocksFor(total), kThreads, 0, s>>>(
        in, indices, idx64, result, outer, axisLen, count, inner, badIndex);
  return cudaGetLastError();
}

cudaError_t launchGather(const void *data, const void *indices, bool idx64,
                         void *out, int64_t outer, int64_t axisLen,
                         int64_t count, int64_t innerBytes, int *badIndex,
                         cudaStream_t s) {
  auto fits = [&](int64_t unit) {
    return innerBytes % unit == 0 &&
           reinterpret_cast<uintptr_t>(data) % unit == 0 &&
           reinterpret_cast<uintptr_t>(out) % unit == 0;
  };
  if (fits(16))
    return launchGatherUnits<uint4>(data, indices, idx64, out, outer, axisLen,
                                    count, innerBytes, badIndex, s);
  if (fits(8))
    return launchGatherUnits<uint2>(data, indices, idx64, out, outer, axisLen,
                                    count, innerBytes, badIndex, s);
  if (fits(4))
    return launchGatherUnits<unsigned>(data, indices, idx64, out, outer,
                                       axisLen, count, innerBytes, badIndex, s);
  return launchGatherUnits<unsigned char>(data, indices, idx64, out, outer,
                                          axisLen, count, innerBytes, badIndex,
                                          s);
}

/// Concatenation (or split) of rows: part blockIdx.y copies its chunk of
/// every row to the chunk's place in the whole's row (or back). One launch
/// moves every part however short its rows (a DenseNet concatenation of
/// channels-last features has rows of 128 bytes per part and 25 parts).
template <typename Unit>
__global__ void concatPartsKernel(ConcatRowsParams p, int64_t rowUnits,
                                  bool narrow) {
  int k = blockIdx.y;
  int64_t units = p.partBytes[k] / int64_t(sizeof(Unit));
  int64_t total = p.outer * units;
  Unit *part = static_cast<Unit *>(p.parts[k]);
  Unit *whole =
      static_cast<Unit *>(p.whole) + p.offsetBytes[k] / int64_t(sizeof(Unit));
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t row, col;
    if (narrow) {
      row = uint32_t(i) / uint32_t(units);
      col = uint32_t(i) - uint32_t(row) * uint32_t(units);
    } else {
      row = i / units;
      col = i - row * units;
    }
    Unit *w = whole + row * rowUnits + col;
    if (p.split)
      part[i] = *w;
    else
      *w = part[i];
  }
}

cudaError_t launchConcatRows(const ConcatRowsParams &p, cudaStream_t s) {
  int unit = copyUnit(p.rowBytes, p.whole, p.whole);
  int64_t largest = 0;
  for (int k = 0; k < p.count; ++k) {
    unit = std::min(unit,
                    copyUnit(p.partBytes[k], p.parts[k],
                             static_cast<char *>(p.whole) + p.offsetBytes[k]));
    largest = std::max(largest, p.outer * p.partBytes[k]);
  }
  if (largest == 0)
    return cudaSuccess;
  withCopyUnit(unit, [&](auto tag) {
    using Unit = decltype(tag);
    int64_t units = largest / unit;
    dim3 grid(static_cast<unsigned>(std::min<int64_t>(blocksFor(units), 8192)),
              static_cast<unsigned>(p.count));
    concatPartsKernel<Unit>
        <<<grid, kThreads, 0, s>>>(p, p.rowBytes / unit, narrowIndex(units));
  });
  return cudaGetLastError();
}

cudaError_t launchGatherNd(const void *data, const void *indices, bool idx64,
                           void *out, const NdTupleParams &p, int *badIndex,
                           cudaStream_t s) {
  int64_t bytes = p.batches * p.tuplesPerBatch * p.sliceBytes;
  if (bytes == 0)
    return cudaSuccess;
  int unit = copyUnit(p.sliceBytes, data, out);
  withCopyUnit(unit, [&](auto tag) {
    using Unit = decltype(tag);
    gatherNdKernel<Unit><<<blocksFor(bytes / unit), kThreads, 0, s>>>(
        static_cast<const Unit *>(data), indices, idx64,
        static_cast<Unit *>(out), p, badIndex);
  });
  return cudaGetLastError();
}

cudaError_t launchScatterNd(void *out, const void *indices, bool idx64,
                            const void *updates, const NdTupleParams &p,
                            int reduction, int *badIndex, cudaStream_t s) {
  int64_t bytes = p.tuplesPerBatch * p.sliceBytes;
  if (bytes == 0)
    return cudaSuccess;
  if (reduction == 1) {
    scatterNdKernel<float, true><<<blocksFor(bytes / 4), kThreads, 0, s>>>(
        static_cast<float *>(out), indices, idx64,
        static_cast<const float *>(updates), p, badIndex);
    return cudaGetLastError();
  }
  if (reduction != 0) {
    scatterNdReduceKernel<<<blocksFor(p.sliceBytes / 4), kThreads, 0, s>>>(
        static_cast<float *>(out), indices, idx64,
        static_cast<const float *>(updates), p, reduction, badIndex);
    return cudaGetLastError();
  }
  int unit = copyUnit(p.sliceBytes, out, updates);
  withCopyUnit(unit, [&](auto tag) {
    using Unit = decltype(tag);
    scatterNdKernel<Unit><<<blocksFor(bytes / unit), kThreads, 0, s>>>(
        static_cast<Unit *>(out), indices, idx64,
        static_cast<const Unit *>(updates), p, badIndex);
  });
  return cudaGetLastError();
}

cudaError_t launchPadF32(const float *x, float *y, int64_t n,
                         const PadParams &p, float value, cudaStream_t s) {
  padKernel<<<blocksFor(n), kThreads, 0, s>>>(x, y, n, p, value);
  return cudaGetLastError();
}

namespace {

using Factory = GpuFactory;

class StridedCopyKernel : public GpuKernel {
public:
  StridedCopyKernel(const Strides &st, int64_t base, size_t elemSize) {
    CopyLayout l;
    l.shape.assign(st.shape, st.shape + st.rank);
    l.stride.assign(st.stride[0], st.stride[0] + st.rank);
    l.base = base;
    l.elementBytes = elemSize;
    CopyLayout merged = mergeContiguous(l);
    narrow_ = wide_ = toLaunch(merged);
    for (size_t bytes : {16, 8})
      if (std::optional<CopyLayout> w = widenElements(merged, bytes)) {
        wide_ = toLaunch(*w);
        break;
      }
  }
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    size_t wide = wide_.elementBytes;
    bool aligned = reinterpret_cast<uintptr_t>(in[0].data) % wide == 0 &&
                   reinterpret_cast<uintptr_t>(out[0].data) % wide == 0;
    const Launch &l = aligned ? wide_ : narrow_;
    return cudaStatus(
        launchStridedCopy(in[0].data, out[0].data,
                          out[0].type.byteSize() /
                              static_cast<int64_t>(l.elementBytes),
                          l.strides, l.base, l.elementBytes, ctx.stream),
        "strided copy");
  }

private:
  struct Launch {
    Strides strides;
    int64_t base = 0;
    size_t elementBytes = 4;
  };
  static Launch toLaunch(const CopyLayout &l) {
    Launch launch;
    launch.strides.rank = static_cast<int>(l.shape.size());
    for (int d = 0; d < launch.strides.rank; ++d) {
      launch.strides.shape[d] = l.shape[d];
      launch.strides.stride[0][d] = l.stride[d];
    }
    launch.base = l.base;
    launch.elementBytes = l.elementBytes;
    return launch;
  }
  Launch narrow_, wide_;
};

class CopyKernel : public GpuKernel {
public:
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    return cudaStatus(cudaMemcpyAsync(out[0].data, in[0].data,
                                      out[0].type.byteSize(),
                                      cudaMemcpyDeviceToDevice, ctx.stream),
                      "copy");
  }
};

/// Concat and split as 2-D copies: `outer` rows of one chunk per part.
class ConcatKernel : public GpuKernel {
public:
  ConcatKernel(int64_t outer, std::vector<size_t> chunks, bool split)
      : outer_(outer), chunks_(std::move(chunks)), split_(split) {
    for (size_t c : chunks_)
      row_ += c;
  }
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const std::vector<TensorRef> &parts = split_ ? out : in;
    char *whole = static_cast<char *>(split_ ? in[0].data : out[0].data);
    if (outer_ == 0 || row_ == 0)
      return Status();
    if (outer_ > 1) {
      size_t offset = 0;
      for (size_t first = 0; first < parts.size(); first += kConcatMaxParts) {
        ConcatRowsParams p;
        p.count = static_cast<int>(
            std::min<size_t>(kConcatMaxParts, parts.size() - first));
        for (int k = 0; k < p.count; ++k) {
          p.parts[k] = parts[first + k].data;
          p.partBytes[k] = static_cast<int64_t>(chunks_[first + k]);
          p.offsetBytes[k] = static_cast<int64_t>(offset);
          offset += chunks_[first + k];
        }
        p.whole = whole;
        p.rowBytes = static_cast<int64_t>(row_);
        p.outer = outer_;
        p.split = split_;
        PARTC_RETURN_IF_ERROR(
            cudaStatus(launchConcatRows(p, ctx.stream), "concat"));
      }
      return Status();
    }
    // One row: each part is one contiguous copy.
    size_t pos = 0;
    for (size_t p = 0; p < parts.size(); ++p) {
      if (chunks_[p]) {
        char *part = static_cast<char *>(parts[p].data);
        cudaError_t err =
            split_ ? cudaMemcpyAsync(part, whole + pos, chunks_[p],
                                     cudaMemcpyDeviceToDevice, ctx.stream)
                   : cudaMemcpyAsync(whole + pos, part, chunks_[p],
                                     cudaMemcpyDeviceToDevice, ctx.stream);
        PARTC_RETURN_IF_ERROR(cudaStatus(err, "concat copy"));
      }
      pos += chunks_[p];
    }
    return Status();
  }

private:
  int64_t outer_;
  std::vector<size_t> chunks_;
  size_t row_ = 0;
  bool split_;
};

/// A kernel that checks its indices on the GPU: an out-of-range index sets a
/// flag, read after the run, so that it is reported instead of silently
/// leaving zeros.
class GatherKernel : public IndexCheckedKernel {
public:
  GatherKernel(int64_t outer, int64_t axisLen, int64_t count, int64_t inner,
               bool idx64)
      : outer_(outer), axisLen_(axisLen), count_(count), inner_(inner),
        idx64_(idx64) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    PARTC_RETURN_IF_ERROR(clearFlag(ctx.stream));
    return cudaStatus(launchGather(in[0].data, in[1].data, idx64_, out[0].data,
                                   outer_, axisLen_, count_, inner_, bad_,
                                   ctx.stream),
                      "gather");
  }

private:
  std::string rangeError() const override {
    return "gather index is out of range [0, " + std::to_string(axisLen_) + ")";
  }
  int64_t outer_, axisLen_, count_, inner_;
  bool idx64_;
};

/// NdTupleParams (in bytes) of IndexTuples (in elements).
NdTupleParams tupleParams(const IndexTuples &t, size_t es) {
  NdTupleParams p{};
  p.batches = t.batches;
  p.tuplesPerBatch = t.tuplesPerBatch;
  p.sliceBytes = t.sliceElements * static_cast<int64_t>(es);
  p.batchBytes = t.batchElements * static_cast<int64_t>(es);
  p.k = t.k;
  for (int d = 0; d < t.k; ++d) {
    p.extent[d] = t.extent[d];
    p.strideBytes[d] = t.stride[d] * static_cast<int64_t>(es);
  }
  return p;
}

class GatherNdKernel : public IndexCheckedKernel {
public:
  GatherNdKernel(NdTupleParams p, bool idx64) : p_(p), idx64_(idx64) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    PARTC_RETURN_IF_ERROR(clearFlag(ctx.stream));
    return cudaStatus(launchGatherNd(in[0].data, in[1].data, idx64_,
                                     out[0].data, p_, bad_, ctx.stream),
                      "gather_nd");
  }

private:
  std::string rangeError() const override {
    return "a gather_nd index tuple is out of range for the data";
  }
  NdTupleParams p_;
  bool idx64_;
};

class ScatterNdKernel : public IndexCheckedKernel {
public:
  ScatterNdKernel(NdTupleParams p, bool idx64, int reduction)
      : p_(p), idx64_(idx64), reduction_(reduction) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    PARTC_RETURN_IF_ERROR(clearFlag(ctx.stream));
    if (out[0].data != in[0].data)
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaMemcpyAsync(out[0].data, in[0].data, out[0].type.byteSize(),
                          cudaMemcpyDeviceToDevice, ctx.stream),
          "scatter_nd copy"));
    return cudaStatus(launchScatterNd(out[0].data, in[1].data, idx64_,
                                      in[2].data, p_, reduction_, bad_,
                                      ctx.stream),
                      "scatter_nd");
  }

private:
  std::string rangeError() const override {
    return "a scatter_nd index tuple is out of range for the data";
  }
  NdTupleParams p_;
  bool idx64_;
  int reduction_;
};

//===----------------------------------------------------------------------===//
// GatherElements
//===----------------------------------------------------------------------===//

/// The geometry of a gather_elements: the indices' (and result's) shape and
/// the data's strides in elements.
struct GatherElementsParams {
  int rank = 0, axis = 0;
  int64_t shape[kMaxRank] = {}, dataStride[kMaxRank] = {};
  int64_t axisLen = 0;
};

template <typename Unit, typename Index>
__global__ void gatherElementsKernel(const Unit *data, const Index *indices,
                                     Unit *out, GatherElementsParams p,
                                     int64_t n, int *bad) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t i = static_cast<int64_t>(indices[o]);
    if (i < -p.axisLen || i >= p.axisLen) {
      *bad = 1;
      continue;
    }
    if (i < 0)
      i += p.axisLen;
    int64_t offset = 0, rest = o;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t c = rest % p.shape[d];
      rest /= p.shape[d];
      offset += (d == p.axis ? i : c) * p.dataStride[d];
    }
    out[o] = data[offset];
  }
}

template <typename Unit>
void launchGatherElements(const void *data, const void *indices, bool idx64,
                          void *out, const GatherElementsParams &p, int64_t n,
                          int *bad, cudaStream_t s) {
  auto *d = static_cast<const Unit *>(data);
  auto *o = static_cast<Unit *>(out);
  if (idx64)
    gatherElementsKernel<<<blocksFor(n), kThreads, 0, s>>>(
        d, static_cast<const int64_t *>(indices), o, p, n, bad);
  else
    gatherElementsKernel<<<blocksFor(n), kThreads, 0, s>>>(
        d, static_cast<const int32_t *>(indices), o, p, n, bad);
}

class GatherElementsKernel : public IndexCheckedKernel {
public:
  GatherElementsKernel(GatherElementsParams p, int64_t n, size_t elemSize,
                       bool idx64)
      : p_(p), n_(n), elemSize_(elemSize), idx64_(idx64) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    if (n_ == 0)
      return Status();
    PARTC_RETURN_IF_ERROR(clearFlag(ctx.stream));
    const void *data = in[0].data, *indices = in[1].data;
    void *y = out[0].data;
    switch (elemSize_) {
    case 1:
      launchGatherElements<uint8_t>(data, indices, idx64_, y, p_, n_, bad_,
                                    ctx.stream);
      break;
    case 2:
      launchGatherElements<uint16_t>(data, indices, idx64_, y, p_, n_, bad_,
                                     ctx.stream);
      break;
    case 4:
      launchGatherElements<uint32_t>(data, indices, idx64_, y, p_, n_, bad_,
                                     ctx.stream);
      break;
    default:
      launchGatherElements<uint64_t>(data, indices, idx64_, y, p_, n_, bad_,
                                     ctx.stream);
      break;
    }
    return cudaStatus(cudaGetLastError(), "gather_elements");
  }

private:
  std::string rangeError() const override {
    return "a gather_elements index is out of range [" +
           std::to_string(-p_.axisLen) + ", " + std::to_string(p_.axisLen) +
           ")";
  }
  GatherElementsParams p_;
  int64_t n_;
  size_t elemSize_;
  bool idx64_;
};

Status createGatherElements(const KernelArgs &a, DeviceContext &,
                            std::unique_ptr<GpuKernel> &k) {
  const TensorType &data = a.inputs[0], &indices = a.inputs[1];
  size_t es = dtypeSize(data.dtype);
  int64_t axis;
  PARTC_RETURN_IF_ERROR(a.attrs.requireInt("axis", axis));
  if (data.shape.size() > static_cast<size_t>(kMaxRank) ||
      (es != 1 && es != 2 && es != 4 && es != 8))
    return Status(); // the CPU kernel runs it
  GatherElementsParams p;
  p.rank = static_cast<int>(data.shape.size());
  p.axis = static_cast<int>(axis);
  std::vector<int64_t> strides = contiguousStrides(data.shape);
  for (int d = 0; d < p.rank; ++d) {
    p.shape[d] = indices.shape[d];
    p.dataStride[d] = strides[d];
  }
  p.axisLen = data.shape[axis];
  auto g = std::make_unique<GatherElementsKernel>(
      p, numElements(indices.shape), es, indices.dtype == DType::I64);
  PARTC_RETURN_IF_ERROR(g->init());
  k = std::move(g);
  return Status();
}

//===----------------------------------------------------------------------===//
// Resize
//===----------------------------------------------------------------------===//

__global__ void resizeKernel(const float *in, float *out, resize::Params p,
                             int64_t n) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x)
    out[o] = resize::resizeElement<float>(p, in, o);
}

class ResizeKernel : public GpuKernel {
public:
  ResizeKernel(const resize::Params &p, int64_t n) : p_(p), n_(n) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    resizeKernel<<<blocksFor(n_), kThreads, 0, ctx.stream>>>(
        in[0].as<float>(), out[0].as<float>(), p_, n_);
    return cudaStatus(cudaGetLastError(), "resize");
  }

private:
  resize::Params p_;
  int64_t n_;
};

Status createResize(const KernelArgs &a, DeviceContext &,
                    std::unique_ptr<GpuKernel> &k) {
  resize::Params p;
  PARTC_RETURN_IF_ERROR(resize::paramsOf(a, p));
  if (a.inputs[0].dtype != DType::F32)
    return Status(); // the CPU kernel runs it
  k = std::make_unique<ResizeKernel>(p, a.outputs[0].numElements());
  return Status();
}

} // namespace

void registerDataMovementGpuKernels(GpuKernelTable &t) {
  t["copy"] = [](const KernelArgs &, DeviceContext &,
                 std::unique_ptr<GpuKernel> &k) -> Status {
    k = std::make_unique<CopyKernel>();
    return Status();
  };
  t["expand"] = [](const KernelArgs &a, DeviceContext &,
                   std::unique_ptr<GpuKernel> &k) -> Status {
    const Shape &out = a.outputs[0].shape;
    if (out.size() > static_cast<size_t>(kMaxRank))
      return Status();
    k = std::make_unique<StridedCopyKernel>(
        makeStrides(out, {a.inputs[0].shape}), 0, dtypeSize(a.inputs[0].dtype));
    return Status();
  };
  t["transpose"] = [](const KernelArgs &a, DeviceContext &,
                      std::unique_ptr<GpuKernel> &k) -> Status {
    const Shape &in = a.inputs[0].shape;
    if (in.size() > static_cast<size_t>(kMaxRank))
      return Status();
    std::vector<int64_t> perm = a.attrs.getInts("perm");
    std::vector<int64_t> inStrides = contiguousStrides(in);
    Strides st;
    st.rank = static_cast<int>(in.size());
    for (int d = 0; d < st.rank; ++d) {
      st.shape[d] = a.outputs[0].shape[d];
      st.stride[0][d] = inStrides[perm[d]];
    }
    k = std::make_unique<StridedCopyKernel>(st, 0,
                                            dtypeSize(a.inputs[0].dtype));
    return Status();
  };
  t["slice"] = [](const KernelArgs &a, DeviceContext &,
                  std::unique_ptr<GpuKernel> &k) -> Status {
    const Shape &in = a.inputs[0].shape;
    if (in.size() > static_cast<size_t>(kMaxRank))
      return Status();
    std::vector<int64_t> starts = a.attrs.getInts("starts"),
                         steps = a.attrs.getInts("steps");
    std::vector<int64_t> inStrides = contiguousStrides(in);
    Strides st;
    st.rank = static_cast<int>(in.size());
    int64_t base = 0;
    for (int d = 0; d < st.rank; ++d) {
      st.shape[d] = a.outputs[0].shape[d];
      st.stride[0][d] = steps[d] * inStrides[d];
      base += starts[d] * inStrides[d];
    }
    k = std::make_unique<StridedCopyKernel>(st, base,
                                            dtypeSize(a.inputs[0].dtype));
    return Status();
  };
  auto concat = [](bool split) -> Factory {
    return [split](const KernelArgs &a, DeviceContext &,
                   std::unique_ptr<GpuKernel> &k) -> Status {
      const std::vector<TensorType> &parts = split ? a.outputs : a.inputs;
      const TensorType &whole = split ? a.inputs[0] : a.outputs[0];
      int64_t axis = a.attrs.getInt("axis");
      std::vector<size_t> chunks;
      for (const TensorType &p : parts)
        chunks.push_back(
            static_cast<size_t>(product(p.shape, axis, p.shape.size())) *
            dtypeSize(p.dtype));
      k = std::make_unique<ConcatKernel>(product(whole.shape, 0, axis), chunks,
                                         split);
      return Status();
    };
  };
  t["concat"] = concat(false);
  t["split"] = concat(true);
  t["gather"] = [](const KernelArgs &a, DeviceContext &,
                   std::unique_ptr<GpuKernel> &k) -> Status {
    const Shape &x = a.inputs[0].shape;
    int64_t axis = a.attrs.getInt("axis");
    auto g = std::make_unique<GatherKernel>(
        product(x, 0, axis), x[axis], a.inputs[1].numElements(),
        product(x, axis + 1, x.size()) * dtypeSize(a.inputs[0].dtype),
        a.inputs[1].dtype == DType::I64);
    PARTC_RETURN_IF_ERROR(g->init());
    k = std::move(g);
    return Status();
  };

  t["gather_nd"] = [](const KernelArgs &a, DeviceContext &,
                      std::unique_ptr<GpuKernel> &k) -> Status {
    IndexTuples tuples;
    if (!makeIndexTuples(a.inputs[0].shape, a.inputs[1].shape,
                         a.attrs.getInt("batch_dims"), tuples)
             .ok())
      return Status();
    auto g = std::make_unique<GatherNdKernel>(
        tupleParams(tuples, dtypeSize(a.inputs[0].dtype)),
        a.inputs[1].dtype == DType::I64);
    PARTC_RETURN_IF_ERROR(g->init());
    k = std::move(g);
    return Status();
  };
  t["scatter_nd"] = [](const KernelArgs &a, DeviceContext &,
                       std::unique_ptr<GpuKernel> &k) -> Status {
    IndexTuples tuples;
    ScatterReduction reduction;
    // Reductions run in f32 only; the CPU kernel takes the rest.
    if (!parseScatterReduction(a.attrs.getString("reduction"), reduction) ||
        (reduction != ScatterReduction::None &&
         a.inputs[0].dtype != DType::F32) ||
        !makeIndexTuples(a.inputs[0].shape, a.inputs[1].shape, 0, tuples).ok())
      return Status();
    auto g = std::make_unique<ScatterNdKernel>(
        tupleParams(tuples, dtypeSize(a.inputs[0].dtype)),
        a.inputs[1].dtype == DType::I64, static_cast<int>(reduction));
    PARTC_RETURN_IF_ERROR(g->init());
    k = std::move(g);
    return Status();
  };
  t["pad"] = [](const KernelArgs &a, DeviceContext &,
                std::unique_ptr<GpuKernel> &k) -> Status {
    const Shape &in = a.inputs[0].shape, &out = a.outputs[0].shape;
    if (!allF32(a) || in.size() > static_cast<size_t>(kMaxRank))
      return Status();
    std::vector<int64_t> pads = a.attrs.getInts("pads");
    std::vector<int64_t> strides = contiguousStrides(in);
    PadParams p{};
    p.rank = static_cast<int>(in.size());
    p.mode = padModeOf(a.attrs);
    // Only the CPU kernel checks shapes: an empty dimension cannot be
    // padded from its edge.
    for (int d = 0; d < p.rank; ++d)
      if (p.mode != PadMode::Constant && in[d] == 0 && out[d] > 0)
        return Status();
    for (int d = 0; d < p.rank; ++d) {
      p.outShape[d] = out[d];
      p.inShape[d] = in[d];
      p.inStride[d] = strides[d];
      p.begin[d] = pads[d];
    }
    float value = static_cast<float>(a.attrs.getFloat("value"));
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &i,
                   const std::vector<TensorRef> &o) {
      return cudaStatus(launchPadF32(i[0].as<float>(), o[0].as<float>(),
                                     o[0].type.numElements(), p, value,
                                     ctx.stream),
                        "pad");
    });
    return Status();
  };
  t["gather_elements"] = createGatherElements;
  t["resize"] = createResize;
}

} // namespace partc::runtime::cuda
