//===- DataMovement.cu - GPU kernels that move and resample data ----------===//
//
// The GPU side of runtime/kernels/DataMovement.cpp, registered as one
// family (registerDataMovementGpuKernels). Each op's semantics come from
// the header the CPU kernel uses too (Resize.h), so the two cannot drift.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/KernelRegistry.h"
#include "runtime/kernels/Resize.h"

namespace partc::runtime::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? (b < 1 ? 1 : b) : 65535 * 8);
}

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
  t["gather_elements"] = createGatherElements;
  t["resize"] = createResize;
}

} // namespace partc::runtime::cuda
