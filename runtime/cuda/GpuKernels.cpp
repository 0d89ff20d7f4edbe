//===- GpuKernels.cpp - GPU kernel factories: cuDNN, cuBLAS, own kernels --===//
#include "runtime/cuda/ChainCodegen.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/LibraryStatus.h"
#include "runtime/kernels/CopyLayout.h"
#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/FusedElementwise.h"
#include "runtime/kernels/IndexTuples.h"
#include "runtime/kernels/KernelRegistry.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>

namespace partc::runtime::cuda {

GpuKernel::~GpuKernel() = default;

TuneScratch::~TuneScratch() {
  for (void *b : buffers_)
    if (b)
      cudaFree(b);
  if (words_)
    cudaFree(words_);
}

Status TuneScratch::buffer(int slot, size_t bytes, void *&result) {
  if (sizes_[slot] < bytes) {
    if (buffers_[slot])
      cudaFree(buffers_[slot]);
    buffers_[slot] = nullptr;
    sizes_[slot] = 0;
    if (cudaMalloc(&buffers_[slot], bytes) != cudaSuccess) {
      cudaGetLastError();
      return Status::error("out of memory for a tuning buffer of " +
                           std::to_string(bytes) + " bytes");
    }
    sizes_[slot] = bytes;
  }
  result = buffers_[slot];
  return Status();
}

Status TuneScratch::words(unsigned *&result) {
  if (!words_)
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaMalloc(reinterpret_cast<void **>(&words_), 2 * sizeof(unsigned)),
        "tuning"));
  result = words_;
  return Status();
}

Status cudaStatus(cudaError_t err, const char *what) {
  if (err == cudaSuccess)
    return Status();
  return Status::error(std::string(what) + ": " + cudaGetErrorString(err));
}

Status cublasStatus(cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return Status();
  return Status::error(std::string(what) + ": cuBLAS error " +
                       cublasGetStatusString(s));
}

Status cudnnStatus(cudnnStatus_t s, const char *what) {
  if (s == CUDNN_STATUS_SUCCESS)
    return Status();
  return Status::error(std::string(what) + ": cuDNN error " +
                       cudnnGetErrorString(s));
}

Status pickFastest(DeviceContext &ctx, TuneScratch &scratch, size_t count,
                   const std::function<Status(size_t, void *)> &run,
                   void *reference, void *trial, int64_t n, size_t &chosen) {
  unsigned *words = nullptr;
  PARTC_RETURN_IF_ERROR(scratch.words(words));
  cudaEvent_t start = nullptr, stop = nullptr;
  PARTC_RETURN_IF_ERROR(cudaStatus(cudaEventCreate(&start), "tuning"));
  Status status = cudaStatus(cudaEventCreate(&stop), "tuning");
  // TF32 candidates round differently from each other, not by more.
  const float tolerance = ctx.options.tf32 ? 1e-2f : 1e-4f;
  constexpr int kRepeats = 3;
  float best = INFINITY;
  for (size_t c = 0; c < count && status.ok(); ++c) {
    void *result = c == 0 ? reference : trial;
    if (!run(c, result).ok()) {
      cudaGetLastError(); // not supported for this shape: skip it
      if (c == 0)
        status = Status::error("the reference implementation failed");
      continue;
    }
    if (c != 0) {
      unsigned host[2] = {};
      status =
          cudaStatus(launchMaxDifference(static_cast<const float *>(reference),
                                         static_cast<const float *>(trial), n,
                                         words, ctx.stream),
                     "tuning");
      if (status.ok())
        status = cudaStatus(cudaMemcpyAsync(host, words, sizeof(host),
                                            cudaMemcpyDeviceToHost, ctx.stream),
                            "tuning");
      if (status.ok())
        status = cudaStatus(cudaStreamSynchronize(ctx.stream), "tuning");
      if (!status.ok())
        break;
      float diff, magnitude;
      std::memcpy(&diff, &host[0], sizeof(float));
      std::memcpy(&magnitude, &host[1], sizeof(float));
      if (!(diff <= tolerance * std::max(magnitude, 1.f)))
        continue;
    }
    cudaEventRecord(start, ctx.stream);
    for (int r = 0; r < kRepeats && status.ok(); ++r)
      status = run(c, result);
    cudaEventRecord(stop, ctx.stream);
    if (status.ok())
      status = cudaStatus(cudaEventSynchronize(stop), "tuning");
    float msec = 0;
    if (status.ok() &&
        cudaEventElapsedTime(&msec, start, stop) == cudaSuccess &&
        msec < best) {
      best = msec;
      chosen = c;
    }
  }
  cudaEventDestroy(start);
  if (stop)
    cudaEventDestroy(stop);
  return status;
}

/// Broadcast strides of `ins` read as `out`, with the dimensions every
/// input walks alike merged (mergeDimensions). Outermost first.
static void collapseDims(const Shape &out, const std::vector<Shape> &ins,
                         Shape &shape,
                         std::vector<std::vector<int64_t>> &strides) {
  shape = out;
  strides.clear();
  for (const Shape &in : ins)
    strides.push_back(broadcastStrides(in, out));
  mergeDimensions(shape, strides);
}

Strides makeStrides(const Shape &out, const std::vector<Shape> &ins) {
  Shape shape;
  std::vector<std::vector<int64_t>> strides;
  collapseDims(out,
               {ins.begin(), ins.begin() + std::min<size_t>(ins.size(), 3)},
               shape, strides);
  Strides st;
  st.rank = static_cast<int>(shape.size());
  for (int d = 0; d < st.rank; ++d) {
    st.shape[d] = shape[d];
    for (size_t k = 0; k < strides.size(); ++k)
      st.stride[k][d] = strides[k][d];
  }
  return st;
}

namespace {

bool allF32(const KernelArgs &a) {
  for (const TensorType &t : a.inputs)
    if (t.dtype != DType::F32)
      return false;
  for (const TensorType &t : a.outputs)
    if (t.dtype != DType::F32)
      return false;
  return true;
}

using Factory = GpuFactory;

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

class UnaryKernel : public GpuKernel {
public:
  UnaryKernel(ew::Step op, const double (&params)[2])
      : op_(op), p_(static_cast<float>(params[0])),
        q_(static_cast<float>(params[1])) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    return cudaStatus(launchUnaryF32(op_, in[0].as<float>(), out[0].as<float>(),
                                     in[0].type.numElements(), p_, q_,
                                     ctx.stream),
                      "unary kernel");
  }

private:
  ew::Step op_;
  float p_, q_;
};

/// Runs the code generated for its program where NVRTC compiled it, else
/// the interpreter.
class FusedElementwiseKernel : public GpuKernel {
public:
  FusedElementwiseKernel(const FusedParams &params,
                         const std::optional<GeneratedChain> &generated)
      : params_(params), generated_(generated) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    FusedParams p = params_;
    for (size_t k = 0; k < in.size(); ++k)
      p.in[k] = in[k].as<float>();
    p.out = out[0].as<float>();
    return cudaStatus(generated_
                          ? launchGeneratedChain(*generated_, p, ctx.stream)
                          : launchFusedElementwise(p, ctx.stream),
                      "fused element-wise kernel");
  }

private:
  FusedParams params_;
  std::optional<GeneratedChain> generated_;
};

class BinaryKernel : public GpuKernel {
public:
  BinaryKernel(ew::Step op, Strides st, bool same, bool relu)
      : op_(op), st_(st), same_(same), relu_(relu) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    return cudaStatus(launchBinaryF32(op_, in[0].as<float>(), in[1].as<float>(),
                                      out[0].as<float>(),
                                      out[0].type.numElements(), st_, same_,
                                      relu_, ctx.stream),
                      "binary kernel");
  }

private:
  ew::Step op_;
  Strides st_;
  bool same_, relu_;
};

/// out[i] = in[base + offset of i], the output contiguous, simplified by
/// CopyLayout.h: merged dimensions, and 16- or 8-byte elements where the
/// innermost run allows (a slice of whole rows, a transpose that keeps the
/// last axis) and the pointers are aligned.
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
    if (rowsKernel()) {
      ConcatRowsParams p;
      p.count = static_cast<int>(parts.size());
      for (int k = 0; k < p.count; ++k) {
        p.parts[k] = parts[k].data;
        p.partBytes[k] = static_cast<int64_t>(chunks_[k]);
      }
      p.whole = whole;
      p.outer = outer_;
      p.split = split_;
      return cudaStatus(launchConcatRows(p, ctx.stream), "concat");
    }
    size_t pos = 0;
    for (size_t p = 0; p < parts.size(); ++p) {
      if (chunks_[p] && outer_) {
        char *part = static_cast<char *>(parts[p].data);
        cudaError_t err =
            split_ ? cudaMemcpy2DAsync(part, chunks_[p], whole + pos, row_,
                                       chunks_[p], outer_,
                                       cudaMemcpyDeviceToDevice, ctx.stream)
                   : cudaMemcpy2DAsync(whole + pos, row_, part, chunks_[p],
                                       chunks_[p], outer_,
                                       cudaMemcpyDeviceToDevice, ctx.stream);
        PARTC_RETURN_IF_ERROR(cudaStatus(err, "concat copy"));
      }
      pos += chunks_[p];
    }
    return Status();
  }

private:
  /// Many short rows: one kernel over all parts rather than a 2-D copy per
  /// part, which moves short rows slowly.
  bool rowsKernel() const {
    return outer_ > 1 && row_ < 4096 &&
           chunks_.size() <= static_cast<size_t>(kConcatMaxParts);
  }
  int64_t outer_;
  std::vector<size_t> chunks_;
  size_t row_ = 0;
  bool split_;
};

//===----------------------------------------------------------------------===//
// Normalization, pooling, softmax, reductions, gather
//===----------------------------------------------------------------------===//

template <typename Fn> class LambdaKernel : public GpuKernel {
public:
  explicit LambdaKernel(Fn fn) : fn_(std::move(fn)) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    return fn_(ctx, in, out);
  }

private:
  Fn fn_;
};

template <typename Fn> std::unique_ptr<GpuKernel> lambda(Fn fn) {
  return std::make_unique<LambdaKernel<Fn>>(std::move(fn));
}

/// IsNaN (`nan`) or IsInf of f32 elements.
Factory floatTest(bool nan) {
  return [nan](const KernelArgs &a, DeviceContext &,
               std::unique_ptr<GpuKernel> &k) -> Status {
    if (a.inputs[0].dtype != DType::F32)
      return Status();
    bool positive = a.attrs.getInt("detect_positive", 1) != 0,
         negative = a.attrs.getInt("detect_negative", 1) != 0;
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      return cudaStatus(launchFloatTest(in[0].as<float>(), out[0].as<bool>(),
                                        out[0].type.numElements(), nan,
                                        positive, negative, ctx.stream),
                        nan ? "is_nan" : "is_inf");
    });
    return Status();
  };
}

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

int64_t product(const Shape &s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i)
    p *= s[i];
  return p;
}

/// The fused element-wise kernel running `program` on f32 operands, or
/// none where its launch parameters cannot hold them (more than 2^31
/// elements, rank above kFusedMaxRank).
Status createFusedKernel(const KernelArgs &a, const fused::Program &program,
                         DeviceContext &ctx, std::unique_ptr<GpuKernel> &k) {
  static_assert(kFusedMaxSteps == fused::kMaxSteps &&
                    kFusedMaxInputs == fused::kMaxInputs &&
                    kFusedMaxRank == fused::kMaxRank,
                "the launch parameters hold any valid program");
  const Shape &out = a.outputs[0].shape;
  int64_t n = numElements(out);
  if (!allF32(a) || n > std::numeric_limits<int32_t>::max() || n == 0 ||
      out.size() > static_cast<size_t>(kFusedMaxRank))
    return Status();
  FusedParams p;
  p.steps = static_cast<int>(program.steps.size());
  p.inputs = static_cast<int>(a.inputs.size());
  p.n = static_cast<uint32_t>(n);
  std::vector<Shape> inShapes;
  for (const TensorType &t : a.inputs)
    inShapes.push_back(t.shape);
  Shape collapsed;
  std::vector<std::vector<int64_t>> strides;
  collapseDims(out, inShapes, collapsed, strides);
  p.rank = static_cast<int>(collapsed.size());
  for (int s = 0; s < p.steps; ++s) {
    p.step[s] = static_cast<uint8_t>(program.steps[s]);
    p.lhs[s] = static_cast<int8_t>(program.lhs[s]);
    // Unary steps read their operand twice rather than garbage.
    p.rhs[s] = static_cast<int8_t>(
        ew::arity(program.steps[s]) == 2 ? program.rhs[s] : program.lhs[s]);
    for (int i = 0; i < 2; ++i)
      p.param[s][i] = static_cast<float>(program.params[s][i]);
  }
  for (int d = 0; d < p.rank; ++d)
    p.shape[d] = static_cast<uint32_t>(collapsed[d]);
  for (int i = 0; i < p.inputs; ++i) {
    const Shape &in = a.inputs[i].shape;
    p.mode[i] = in == out              ? FusedParams::Same
                : numElements(in) == 1 ? FusedParams::Scalar
                                       : FusedParams::Broadcast;
    for (int d = 0; d < p.rank; ++d)
      p.stride[i][d] = static_cast<uint32_t>(strides[i][d]);
  }
  std::optional<GeneratedChain> generated;
  if (ctx.options.generatedChains) {
    GeneratedChain chain;
    // Where NVRTC fails, the interpreter computes the same; the failure is
    // reported once (generatedChainStats).
    if (generateChain(p, ctx.gpu, chain).ok())
      generated = chain;
  }
  k = std::make_unique<FusedElementwiseKernel>(p, generated);
  return Status();
}

const GpuKernelTable &factories() {
  static const GpuKernelTable table = [] {
    GpuKernelTable t;
    // Every unary step of ElementwiseOps.h; gelu picks its step by its
    // approximation.
    Factory unary = [](const KernelArgs &a, DeviceContext &,
                       std::unique_ptr<GpuKernel> &k) -> Status {
      if (!allF32(a))
        return Status();
      ew::Step step;
      double params[2];
      PARTC_RETURN_IF_ERROR(fused::stepOfKernel(a.name, a.attrs, step, params));
      k = std::make_unique<UnaryKernel>(step, params);
      return Status();
    };
    for (int i = 0; i < ew::kNumUnary; ++i)
      if (static_cast<ew::Step>(i) != ew::Step::GeluTanh)
        t[ew::kSteps[i].name] = unary;

    auto binary = [](ew::Step op) -> Factory {
      return [op](const KernelArgs &a, DeviceContext &ctx,
                  std::unique_ptr<GpuKernel> &k) -> Status {
        if (!allF32(a))
          return Status();
        const Shape &out = a.outputs[0].shape;
        if (out.size() > static_cast<size_t>(kMaxRank))
          return Status();
        bool same = a.inputs[0].shape == out && a.inputs[1].shape == out;
        bool relu;
        PARTC_RETURN_IF_ERROR(fusedRelu(a.attrs, relu));
        auto plainOrScalar = [&](const Shape &in) {
          return in == out || numElements(in) == 1;
        };
        if (!same && plainOrScalar(a.inputs[0].shape) &&
            plainOrScalar(a.inputs[1].shape)) {
          // A scalar operand runs as a one-step fused chain: read once per
          // thread and the rest 16 bytes at a time. Other broadcasts index
          // through collapsed strides below, without the chain's
          // interpreter.
          fused::Program program;
          program.steps = {op};
          program.lhs = {0};
          program.rhs = {1};
          program.params = {{0, 0}};
          if (relu) {
            program.steps.push_back(ew::Step::Relu);
            program.lhs.push_back(-1);
            program.rhs.push_back(-1);
            program.params.push_back({0, 0});
          }
          PARTC_RETURN_IF_ERROR(createFusedKernel(a, program, ctx, k));
          if (k)
            return Status();
        }
        k = std::make_unique<BinaryKernel>(
            op, makeStrides(out, {a.inputs[0].shape, a.inputs[1].shape}), same,
            relu);
        return Status();
      };
    };
    for (int i = ew::kNumUnary; i < ew::kNumSteps; ++i)
      t[ew::kSteps[i].name] = binary(static_cast<ew::Step>(i));

    t["fused_elementwise"] = [](const KernelArgs &a, DeviceContext &ctx,
                                std::unique_ptr<GpuKernel> &k) -> Status {
      fused::Program program;
      PARTC_RETURN_IF_ERROR(fused::parseProgram(
          a.attrs, static_cast<int>(a.inputs.size()), program));
      return createFusedKernel(a, program, ctx, k);
    };
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
          makeStrides(out, {a.inputs[0].shape}), 0,
          dtypeSize(a.inputs[0].dtype));
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
        int64_t axis = a.attrs.getInt("axis", 0);
        std::vector<size_t> chunks;
        for (const TensorType &p : parts)
          chunks.push_back(
              static_cast<size_t>(product(p.shape, axis, p.shape.size())) *
              dtypeSize(p.dtype));
        k = std::make_unique<ConcatKernel>(product(whole.shape, 0, axis),
                                           chunks, split);
        return Status();
      };
    };
    t["concat"] = concat(false);
    t["split"] = concat(true);
    t["gather"] = [](const KernelArgs &a, DeviceContext &,
                     std::unique_ptr<GpuKernel> &k) -> Status {
      const Shape &x = a.inputs[0].shape;
      int64_t axis = a.attrs.getInt("axis", 0);
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
                           a.attrs.getInt("batch_dims", 0), tuples)
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
      if (!parseScatterReduction(a.attrs.getString("reduction", "none"),
                                 reduction) ||
          (reduction != ScatterReduction::None &&
           a.inputs[0].dtype != DType::F32) ||
          !makeIndexTuples(a.inputs[0].shape, a.inputs[1].shape, 0, tuples)
               .ok())
        return Status();
      auto g = std::make_unique<ScatterNdKernel>(
          tupleParams(tuples, dtypeSize(a.inputs[0].dtype)),
          a.inputs[1].dtype == DType::I64, static_cast<int>(reduction));
      PARTC_RETURN_IF_ERROR(g->init());
      k = std::move(g);
      return Status();
    };
    t["is_nan"] = floatTest(true);
    t["is_inf"] = floatTest(false);

    t["matmul"] = [](const KernelArgs &a, DeviceContext &ctx,
                     std::unique_ptr<GpuKernel> &k) -> Status {
      return allF32(a) ? createMatMulKernel(a, ctx, k) : Status();
    };
    t["strided_matmul"] = [](const KernelArgs &a, DeviceContext &ctx,
                             std::unique_ptr<GpuKernel> &k) -> Status {
      return createStridedMatMulKernel(a, ctx, k);
    };
    t["gemm"] = [](const KernelArgs &a, DeviceContext &ctx,
                   std::unique_ptr<GpuKernel> &k) -> Status {
      return allF32(a) ? createGemmKernel(a, ctx, k) : Status();
    };
    t["conv"] = [](const KernelArgs &a, DeviceContext &ctx,
                   std::unique_ptr<GpuKernel> &k) -> Status {
      if (!allF32(a))
        return Status();
      size_t spatial = a.inputs[0].shape.size() - 2;
      std::vector<int64_t> pads = a.attrs.getInts("pads");
      if (spatial < 1 || spatial > 3)
        return Status();
      for (size_t i = 0; i < spatial; ++i)
        if (pads[i] != pads[i + spatial])
          return Status(); // cuDNN pads symmetrically
      return createConvKernel(a, ctx, k);
    };
    t["batch_norm"] = [](const KernelArgs &a, DeviceContext &,
                         std::unique_ptr<GpuKernel> &k) -> Status {
      if (!allF32(a))
        return Status();
      const Shape &x = a.inputs[0].shape;
      int64_t n = a.inputs[0].numElements(), c = x[1],
              inner = product(x, 2, x.size());
      float eps = static_cast<float>(a.attrs.getFloat("epsilon", 1e-5));
      k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out) {
        return cudaStatus(launchBatchNorm(in[0].as<float>(), in[1].as<float>(),
                                          in[2].as<float>(), in[3].as<float>(),
                                          in[4].as<float>(), out[0].as<float>(),
                                          n, c, inner, eps, ctx.stream),
                          "batch_norm");
      });
      return Status();
    };
    auto pool = [](bool isMax) -> Factory {
      return [isMax](const KernelArgs &a, DeviceContext &,
                     std::unique_ptr<GpuKernel> &k) -> Status {
        if (!allF32(a))
          return Status();
        bool channelsLast = a.attrs.getInt("channels_last", 0) != 0;
        Shape x = a.inputs[0].shape, y = a.outputs[0].shape;
        if (channelsLast) {
          x = channelsFirstShape(x);
          y = channelsFirstShape(y);
        }
        Window w;
        PARTC_RETURN_IF_ERROR(
            makeWindow(a.attrs, x, y, a.attrs.getInts("kernel_shape"), w));
        PoolParams p{};
        p.planes = x[0] * x[1];
        p.channelsLast = channelsLast ? x[1] : 0;
        p.isMax = isMax;
        p.countIncludePad = a.attrs.getInt("count_include_pad", 0) != 0;
        for (int i = 0; i < 3; ++i) {
          p.in[i] = w.in[i];
          p.out[i] = w.out[i];
          p.kernel[i] = w.kernel[i];
          p.stride[i] = w.stride[i];
          p.dilation[i] = w.dilation[i];
          p.padBegin[i] = w.padBegin[i];
          p.padEnd[i] = w.padEnd[i];
        }
        k = lambda([p](DeviceContext &ctx, const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out) {
          return cudaStatus(
              launchPool(in[0].as<float>(), out[0].as<float>(), p, ctx.stream),
              "pool");
        });
        return Status();
      };
    };
    t["max_pool"] = pool(true);
    t["avg_pool"] = pool(false);
    auto global = [](bool isMax) -> Factory {
      return [isMax](const KernelArgs &a, DeviceContext &,
                     std::unique_ptr<GpuKernel> &k) -> Status {
        if (!allF32(a))
          return Status();
        const Shape &x = a.inputs[0].shape;
        int64_t planes = x[0] * x[1], size = product(x, 2, x.size());
        k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out) {
          return cudaStatus(launchGlobalPool(in[0].as<float>(),
                                             out[0].as<float>(), planes, size,
                                             isMax, ctx.stream),
                            "global pool");
        });
        return Status();
      };
    };
    t["global_avg_pool"] = global(false);
    t["global_max_pool"] = global(true);
    auto softmax = [](bool log) -> Factory {
      return [log](const KernelArgs &a, DeviceContext &,
                   std::unique_ptr<GpuKernel> &k) -> Status {
        if (!allF32(a))
          return Status();
        const Shape &x = a.inputs[0].shape;
        int64_t axis = a.attrs.getInt("axis", -1);
        int64_t outer = product(x, 0, axis), len = x[axis],
                inner = product(x, axis + 1, x.size());
        bool nanToZero = a.attrs.getInt("nan_to_zero", 0) != 0;
        SoftmaxBias bias;
        bool hasBias = a.inputs.size() == 2;
        if (hasBias) {
          if (x.size() > static_cast<size_t>(kMaxRank))
            return Status();
          const Shape &b = a.inputs[1].shape;
          bias.elements = makeStrides(x, {b});
          bias.columnStride = b.empty() || b.back() == 1 ? 0 : 1;
        }
        k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out) {
          SoftmaxBias b = bias;
          if (hasBias)
            b.data = in[1].as<float>();
          return cudaStatus(launchSoftmax(in[0].as<float>(), out[0].as<float>(),
                                          outer, len, inner, log, nanToZero, b,
                                          ctx.stream),
                            "softmax");
        });
        return Status();
      };
    };
    t["softmax"] = softmax(false);
    t["log_softmax"] = softmax(true);
    t["rms_norm"] = [](const KernelArgs &a, DeviceContext &,
                       std::unique_ptr<GpuKernel> &k) -> Status {
      if (!allF32(a))
        return Status();
      const Shape &x = a.inputs[0].shape;
      int64_t axis = a.attrs.getInt("axis", -1);
      int64_t cols = product(x, axis, x.size()), rows = product(x, 0, axis);
      bool hasScale = a.inputs.size() == 2;
      int64_t scaleCount = hasScale ? a.inputs[1].numElements() : 1;
      // A scale of one value per normalized element, in order, or one
      // value; other broadcasts run on the host.
      if (hasScale && scaleCount != 1 && scaleCount != cols)
        return Status();
      float eps = static_cast<float>(a.attrs.getFloat("epsilon", 1e-5));
      k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out) {
        return cudaStatus(launchRmsNorm(in[0].as<float>(),
                                        hasScale ? in[1].as<float>() : nullptr,
                                        out[0].as<float>(), rows, cols,
                                        scaleCount, eps, ctx.stream),
                          "rms_norm");
      });
      return Status();
    };
    t["layer_norm"] = [](const KernelArgs &a, DeviceContext &,
                         std::unique_ptr<GpuKernel> &k) -> Status {
      if (!allF32(a))
        return Status();
      const Shape &x = a.inputs[0].shape;
      int64_t axis = a.attrs.getInt("axis", -1);
      int64_t cols = product(x, axis, x.size()), rows = product(x, 0, axis);
      int64_t sm = a.inputs[1].numElements();
      int64_t bm = a.inputs.size() == 3 ? a.inputs[2].numElements() : 1;
      // Scale and bias must span the trailing dimensions (or be scalars).
      Shape norm(x.begin() + axis, x.end());
      auto trailing = [&](const Shape &s) {
        int64_t n = numElements(s);
        if (n == 1)
          return true;
        if (s.size() > norm.size())
          return false;
        return std::equal(s.rbegin(), s.rend(), norm.rbegin()) && n == cols;
      };
      if (!trailing(a.inputs[1].shape) ||
          (a.inputs.size() == 3 && !trailing(a.inputs[2].shape)))
        return Status();
      bool hasBias = a.inputs.size() == 3;
      float eps = static_cast<float>(a.attrs.getFloat("epsilon", 1e-5));
      k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out) {
        return cudaStatus(launchLayerNorm(in[0].as<float>(), in[1].as<float>(),
                                          hasBias ? in[2].as<float>() : nullptr,
                                          out[0].as<float>(), rows, cols, sm,
                                          bm, eps, ctx.stream),
                          "layer_norm");
      });
      return Status();
    };
    auto reduce = [](int op) -> Factory {
      return [op](const KernelArgs &a, DeviceContext &,
                  std::unique_ptr<GpuKernel> &k) -> Status {
        if (!allF32(a))
          return Status();
        const Shape &x = a.inputs[0].shape;
        if (x.size() > static_cast<size_t>(kMaxRank))
          return Status();
        std::vector<int64_t> axes = a.attrs.getInts("axes");
        std::vector<bool> red(x.size(), false);
        for (int64_t ax : axes)
          red[ax] = true;
        std::vector<int64_t> strides = contiguousStrides(x);
        Strides keep, reduced;
        int64_t outCount = 1, count = 1;
        for (size_t d = 0; d < x.size(); ++d) {
          Strides &s = red[d] ? reduced : keep;
          s.shape[s.rank] = x[d];
          s.stride[0][s.rank] = strides[d];
          ++s.rank;
          (red[d] ? count : outCount) *= x[d];
        }
        k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out) {
          return cudaStatus(launchReduceF32(in[0].as<float>(),
                                            out[0].as<float>(), outCount, keep,
                                            reduced, count, op, ctx.stream),
                            "reduce");
        });
        return Status();
      };
    };
    auto compare = [](int code) -> Factory {
      return [code](const KernelArgs &a, DeviceContext &,
                    std::unique_ptr<GpuKernel> &k) -> Status {
        DType t = a.inputs[0].dtype;
        const Shape &out = a.outputs[0].shape;
        if ((t != DType::F32 && t != DType::I64 && t != DType::I32) ||
            out.size() > static_cast<size_t>(kMaxRank))
          return Status();
        Strides st = makeStrides(out, {a.inputs[0].shape, a.inputs[1].shape});
        k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &o) {
          return cudaStatus(
              launchCompare(code, t, in[0].data, in[1].data, o[0].as<bool>(),
                            o[0].type.numElements(), st, ctx.stream),
              "compare");
        });
        return Status();
      };
    };
    auto logical = [](int code) -> Factory {
      return [code](const KernelArgs &a, DeviceContext &,
                    std::unique_ptr<GpuKernel> &k) -> Status {
        const Shape &out = a.outputs[0].shape;
        for (const TensorType &t : a.inputs)
          if (t.dtype != DType::Bool)
            return Status();
        if (out.size() > static_cast<size_t>(kMaxRank))
          return Status();
        std::vector<Shape> shapes;
        for (const TensorType &t : a.inputs)
          shapes.push_back(t.shape);
        Strides st = makeStrides(out, shapes);
        k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &o) {
          const bool *rhs = in.size() > 1 ? in[1].as<bool>() : nullptr;
          return cudaStatus(
              launchLogical(code, in[0].as<bool>(), rhs, o[0].as<bool>(),
                            o[0].type.numElements(), st, ctx.stream),
              "logical");
        });
        return Status();
      };
    };
    t["and"] = logical(0);
    t["or"] = logical(1);
    t["xor"] = logical(2);
    t["not"] = logical(3);
    t["equal"] = compare(0);
    t["less"] = compare(1);
    t["greater"] = compare(2);
    t["less_or_equal"] = compare(3);
    t["greater_or_equal"] = compare(4);
    t["where"] = [](const KernelArgs &a, DeviceContext &,
                    std::unique_ptr<GpuKernel> &k) -> Status {
      const Shape &out = a.outputs[0].shape;
      size_t es = dtypeSize(a.outputs[0].dtype);
      if (out.size() > static_cast<size_t>(kMaxRank) || !es || es > 8)
        return Status();
      Strides st = makeStrides(
          out, {a.inputs[0].shape, a.inputs[1].shape, a.inputs[2].shape});
      k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &o) {
        return cudaStatus(launchWhere(in[0].as<bool>(), in[1].data, in[2].data,
                                      o[0].data, o[0].type.numElements(), st,
                                      es, ctx.stream),
                          "where");
      });
      return Status();
    };
    t["cast"] = [](const KernelArgs &a, DeviceContext &,
                   std::unique_ptr<GpuKernel> &k) -> Status {
      DType from = a.inputs[0].dtype, to = a.outputs[0].dtype;
      if (!castSupported(from, to))
        return Status();
      k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &o) {
        return cudaStatus(launchCast(from, to, in[0].data, o[0].data,
                                     o[0].type.numElements(), ctx.stream),
                          "cast");
      });
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
      float value = static_cast<float>(a.attrs.getFloat("value", 0.0));
      k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &i,
                     const std::vector<TensorRef> &o) {
        return cudaStatus(launchPadF32(i[0].as<float>(), o[0].as<float>(),
                                       o[0].type.numElements(), p, value,
                                       ctx.stream),
                          "pad");
      });
      return Status();
    };
    t["reduce_sum"] = reduce(0);
    t["reduce_mean"] = reduce(1);
    t["reduce_max"] = reduce(2);
    t["reduce_min"] = reduce(3);
    t["reduce_prod"] = reduce(4);
    registerDataMovementGpuKernels(t);
    return t;
  }();
  return table;
}

} // namespace

IndexCheckedKernel::~IndexCheckedKernel() {
  if (bad_)
    cudaFree(bad_);
}

Status IndexCheckedKernel::init() {
  return cudaStatus(cudaMalloc(&bad_, sizeof(int)), "index flag");
}

Status IndexCheckedKernel::checkAfterRun() {
  int bad = 0;
  PARTC_RETURN_IF_ERROR(
      cudaStatus(cudaMemcpy(&bad, bad_, sizeof(int), cudaMemcpyDeviceToHost),
                 "index check"));
  return bad ? Status::error(rangeError()) : Status();
}

Status IndexCheckedKernel::clearFlag(cudaStream_t stream) {
  return cudaStatus(cudaMemsetAsync(bad_, 0, sizeof(int), stream), "memset");
}

Status createGpuKernel(const std::string &name, const AttrMap &attrs,
                       const std::vector<TensorType> &inputs,
                       const std::vector<TensorType> &outputs,
                       DeviceContext &ctx, std::unique_ptr<GpuKernel> &result) {
  auto it = factories().find(name);
  if (it == factories().end())
    return Status();
  KernelArgs args{name, attrs, inputs, outputs};
  return it->second(args, ctx, result);
}

} // namespace partc::runtime::cuda
