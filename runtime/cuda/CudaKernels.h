//===- CudaKernels.h - GPU kernels (internal) -------------------*- C++ -*-===//
#ifndef PARTC_RUNTIME_CUDA_CUDAKERNELS_H
#define PARTC_RUNTIME_CUDA_CUDAKERNELS_H

#include "runtime/Executor.h"
#include "runtime/Support.h"
#include "runtime/cuda/FusedChain.cuh"
#include "runtime/kernels/Attrs.h"

#include <cuda_runtime.h>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

typedef struct cublasContext *cublasHandle_t;
typedef struct cudnnContext *cudnnHandle_t;
typedef struct cublasLtContext *cublasLtHandle_t;

namespace partc::runtime {
struct KernelArgs;
} // namespace partc::runtime

namespace partc::runtime::cuda {

/// Per-device library handles, bound to the device's stream.
struct DeviceContext {
  int gpu = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t cublasLt = nullptr;
  /// What the user asked of the backend (TF32, fused epilogues, cuDNN's
  /// graph API and its knobs, generated chains).
  CudaOptions options;
  /// Scratch shared by the device's kernels (they run in stream order).
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
};

/// Device buffers lent to GpuKernel::tune: allocated on first use, grown
/// as needed and freed when tuning ends, so that tuning never touches the
/// arena.
class TuneScratch {
public:
  TuneScratch() = default;
  TuneScratch(const TuneScratch &) = delete;
  TuneScratch &operator=(const TuneScratch &) = delete;
  ~TuneScratch();
  /// Buffer `slot` (0..3) of at least `bytes`.
  Status buffer(int slot, size_t bytes, void *&result);
  /// Two unsigned words of device memory for launchMaxDifference.
  Status words(unsigned *&result);
  /// The milliseconds pickFastest last measured for each candidate
  /// (infinite for one that failed or disagreed); empty before it runs.
  std::vector<float> &candidateTimes() { return times_; }

private:
  std::vector<float> times_;
  void *buffers_[4] = {};
  size_t sizes_[4] = {};
  unsigned *words_ = nullptr;
};

class GpuKernel {
public:
  virtual ~GpuKernel();
  virtual Status run(DeviceContext &ctx, const std::vector<TensorRef> &inputs,
                     const std::vector<TensorRef> &outputs) = 0;
  /// Workspace this kernel needs, known after creation.
  virtual size_t workspaceBytes() const { return 0; }
  /// Errors detected on the device (read after the stream synchronized).
  virtual Status checkAfterRun() { return Status(); }
  /// Whether run() only enqueues work (no host synchronization), so that it
  /// can be captured into a CUDA graph.
  virtual bool capturable() const { return true; }
  /// Chooses among equivalent implementations by running each once on this
  /// device, before the first run: the operands are the kernel's real ones
  /// (weights hold their values), but activations are read from and written
  /// to `scratch`. A candidate whose result differs from the reference
  /// implementation's is never chosen.
  virtual Status tune(DeviceContext &, const std::vector<TensorRef> &,
                      const std::vector<TensorRef> &, TuneScratch &) {
    return Status();
  }
  /// Makes candidate `c` of tune()'s last pickFastest the chosen one, for
  /// kernels that pool their timings with identical twins; false where the
  /// kernel does not take it.
  virtual bool adoptCandidate(size_t) { return false; }
  /// Short name of the implementation tune() chose, if it chose one.
  virtual const char *variant() const { return nullptr; }
};

/// For GpuKernel::tune: runs candidate 0, the reference implementation,
/// into `reference` (the next candidate that runs where it fails) and each
/// other candidate into `trial`; drops those that fail to run or whose `n`
/// results differ from the reference's by more than the precision
/// explains, times the rest and sets `chosen` to the fastest. Fails only
/// where no candidate runs.
Status pickFastest(DeviceContext &ctx, TuneScratch &scratch, size_t count,
                   const std::function<Status(size_t, void *)> &run,
                   void *reference, void *trial, int64_t n, size_t &chosen,
                   unsigned char element = FusedParams::F32);

/// Makes the GPU kernel for one plan instruction, or leaves the result empty
/// where none applies to these types (the CPU kernel then runs instead).
using GpuFactory = std::function<Status(const KernelArgs &, DeviceContext &,
                                        std::unique_ptr<GpuKernel> &)>;
using GpuKernelTable = std::map<std::string, GpuFactory>;

/// Kernels whose data errors (an index out of range) a device flag reports,
/// read after the run, so that no kernel synchronizes.
class IndexCheckedKernel : public GpuKernel {
public:
  ~IndexCheckedKernel() override;
  Status init();
  Status checkAfterRun() override;

protected:
  Status clearFlag(cudaStream_t stream);
  virtual std::string rangeError() const = 0;
  int *bad_ = nullptr;
};

/// Each family of GPU kernels registers its factories, as the CPU kernels
/// do (runtime/kernels/KernelRegistry.h), in a file of its own.
void registerElementwiseGpuKernels(GpuKernelTable &table); // ElementwiseKernels
void registerNnGpuKernels(GpuKernelTable &table);          // NnKernels
void registerLinearAlgebraGpuKernels(GpuKernelTable &table); // GemmKernel
void registerDataMovementGpuKernels(GpuKernelTable &table);  // DataMovement.cu
void registerTrainingGpuKernels(GpuKernelTable &table);      // TrainingKernels
void registerAxisGpuKernels(GpuKernelTable &table);          // AxisOps.cu

/// Whether every operand and result is f32 (what most GPU kernels take).
bool allF32(const KernelArgs &a);
/// The product of extents [from, to) of `s`.
int64_t product(const Shape &s, size_t from, size_t to);

/// A kernel that runs `fn` (ctx, inputs, outputs): for kernels whose whole
/// state is what the factory captured.
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

/// Creates a GPU kernel, or leaves `result` empty when none exists for this
/// name and these types (the executor then falls back to the CPU kernel).
Status createGpuKernel(const std::string &name, const AttrMap &attrs,
                       const std::vector<TensorType> &inputs,
                       const std::vector<TensorType> &outputs,
                       DeviceContext &ctx, std::unique_ptr<GpuKernel> &result);

Status cudaStatus(cudaError_t err, const char *what);

/// graph.attention on bf16 or f16 (Attention.cu); empty for others.
Status createAttentionKernel(const KernelArgs &args, DeviceContext &ctx,
                             std::unique_ptr<GpuKernel> &result);
/// Convolution with its fused epilogue (ConvKernel.cpp).
Status createConvKernel(const KernelArgs &args, DeviceContext &ctx,
                        std::unique_ptr<GpuKernel> &result);
/// Gemm and MatMul with their bias and ReLU (GemmKernel.cpp), f32.
Status createGemmKernel(const KernelArgs &args, DeviceContext &ctx,
                        std::unique_ptr<GpuKernel> &result);
Status createMatMulKernel(const KernelArgs &args, DeviceContext &ctx,
                          std::unique_ptr<GpuKernel> &result);
/// MatMul over strided operand views (runtime/kernels/StridedMatMul.h).
Status createStridedMatMulKernel(const KernelArgs &args, DeviceContext &ctx,
                                 std::unique_ptr<GpuKernel> &result);

/// Shape and strides passed to kernels by value (rank <= kMaxRank).
constexpr int kMaxRank = 8;
struct Strides {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t stride[3][kMaxRank] = {}; // per input, in elements
};
/// Broadcast strides of `ins` read as `out`, with the dimensions every
/// input walks alike merged (mergeDimensions). Outermost first.
void collapseDims(const Shape &out, const std::vector<Shape> &ins, Shape &shape,
                  std::vector<std::vector<int64_t>> &strides);
/// Strides of up to three inputs broadcast to `out`.
Strides makeStrides(const Shape &out, const std::vector<Shape> &ins);

// Launchers implemented in .cu files.
/// y = op(x) for a unary step (ElementwiseOps.h) with its parameters.
cudaError_t launchUnaryF32(ew::Step op, const float *x, float *y, int64_t n,
                           float p, float q, cudaStream_t s);
/// y = op(a, b) for a binary step, then a ReLU where `relu`.
cudaError_t launchBinaryF32(ew::Step op, const float *a, const float *b,
                            float *y, int64_t n, const Strides &st, bool same,
                            bool relu, cudaStream_t s);
cudaError_t launchStridedCopy(const void *in, void *out, int64_t n,
                              const Strides &st, int64_t base, size_t elemSize,
                              cudaStream_t s);
/// Adds to `graph`, after `deps`, a kernel node that does what the 1-D
/// memset `fill` does (DataMovement.cu).
cudaError_t addFillKernelNode(cudaGraph_t graph, const cudaGraphNode_t *deps,
                              size_t numDeps, const cudaMemsetParams &fill,
                              cudaGraphNode_t *node);
cudaError_t launchBatchNorm(const float *x, const float *scale,
                            const float *bias, const float *mean,
                            const float *var, float *y, int64_t n, int64_t c,
                            int64_t inner, float eps, cudaStream_t s);
/// y = act(y + bias[channel] + z) in place for a result with `c` channels
/// and `inner` elements per channel plane (1 when channels last, or for a
/// GEMM's columns); `bias` and `z` may be null, and with neither nor ReLU
/// nothing runs.
cudaError_t launchEpilogue(float *y, const float *bias, const float *z,
                           int64_t n, int64_t c, int64_t inner, bool relu,
                           cudaStream_t s);
/// y = op(y) in place on n bf16 or f16 values, as a one-step fused chain.
cudaError_t launchUnary16(ew::Step op, void *y, int64_t n,
                          unsigned char element, cudaStream_t s);
/// The same on bf16 or f16 values (`element`: FusedParams::BF16 or F16),
/// as a fused chain: the sum in f32, rounded once.
cudaError_t launchEpilogue16(void *y, const void *bias, const void *z,
                             int64_t n, int64_t c, int64_t inner, bool relu,
                             unsigned char element, cudaStream_t s);
struct PoolParams {
  /// planes = batch x channels; channelsLast = channels when the layout is
  /// [N, D, H, W, C], else 0.
  int64_t planes, channelsLast, in[3], out[3], kernel[3], stride[3],
      padBegin[3], padEnd[3], dilation[3];
  bool isMax, countIncludePad;
};
/// Whether every position a window computes fits 31 bits, so that kernels
/// may index it in int32_t: each dimension's padded extent, dilated kernel
/// and stride below 2^29 (makeWindow bounds them by 2^60).
inline bool windowFits32(const PoolParams &p) {
  constexpr int64_t kLimit = int64_t(1) << 29;
  for (int d = 0; d < 3; ++d)
    if (p.in[d] + p.padBegin[d] + p.padEnd[d] >= kLimit ||
        p.kernel[d] >= kLimit || p.stride[d] >= kLimit ||
        p.dilation[d] >= kLimit || (p.kernel[d] - 1) * p.dilation[d] >= kLimit)
      return false;
  return true;
}
/// Element strides of cuDNN's dims [N, C, spatial...] for a tensor stored
/// in that order or, `channelsLast`, as [N, spatial..., C].
std::vector<int> packedStrides(const std::vector<int> &dims, bool channelsLast);
/// A pooling op's window (`x` and `y` channels first) as PoolParams, for
/// the forward pool and the pool gradients alike.
Status makePoolParams(const KernelArgs &a, const Shape &x, const Shape &y,
                      bool isMax, PoolParams &p);
cudaError_t launchPool(const float *x, float *y, const PoolParams &p,
                       cudaStream_t s);
/// Channels-last pooling of bf16 or f16 values (`element`) whose indices
/// fit 32 bits; cudaErrorNotSupported otherwise.
cudaError_t launchPool16(const void *x, void *y, const PoolParams &p,
                         unsigned char element, cudaStream_t s);
cudaError_t launchGlobalPool(const float *x, float *y, int64_t planes,
                             int64_t size, bool isMax, cudaStream_t s);
/// Rows of a concatenation along one axis: `outer` rows, each the parts'
/// rows of partBytes[k] bytes in order (or, with `split`, the reverse).
/// Parts of a concatenation (or split) copied by one launch; more take
/// several.
constexpr int kConcatMaxParts = 32;
struct ConcatRowsParams {
  void *parts[kConcatMaxParts] = {};
  int64_t partBytes[kConcatMaxParts] = {};
  /// Where each part's chunk starts within a row of the whole.
  int64_t offsetBytes[kConcatMaxParts] = {};
  int count = 0;
  void *whole = nullptr;
  int64_t rowBytes = 0;
  int64_t outer = 0;
  bool split = false;
};
cudaError_t launchConcatRows(const ConcatRowsParams &p, cudaStream_t s);
/// x / sqrt(mean(x^2) + eps) per row of `cols`, times a scale of
/// `scaleCount` elements (1 or cols; none where null).
cudaError_t launchRmsNorm(const float *x, const float *scale, float *y,
                          int64_t rows, int64_t cols, int64_t scaleCount,
                          float eps, cudaStream_t s);
/// graph.softmax's bias, added to the input as it is read.
struct SoftmaxBias {
  const float *data = nullptr; // none
  /// The bias's offset of each element of the input (a row's first one
  /// gives the row's), and its stride along the last dimension.
  Strides elements;
  int64_t columnStride = 0;
};
/// With `nanToZero`, NaN results become 0 (graph.softmax's nan_to_zero).
cudaError_t launchSoftmax(const float *x, float *y, int64_t outer, int64_t axis,
                          int64_t inner, bool log, bool nanToZero,
                          const SoftmaxBias &bias, cudaStream_t s);
/// The same on bf16 or f16 operands (`element`: FusedParams::BF16 or F16;
/// the bias too), computed in f32 (HalfPrecision.cu).
cudaError_t launchSoftmax16(const void *x, void *y, int64_t outer, int64_t axis,
                            int64_t inner, bool log, bool nanToZero,
                            const SoftmaxBias &bias, unsigned char element,
                            cudaStream_t s);
cudaError_t launchLayerNorm16(const void *x, const void *scale,
                              const void *bias, void *y, int64_t rows,
                              int64_t cols, int64_t scaleMod, int64_t biasMod,
                              float eps, unsigned char element, cudaStream_t s);
/// RMS normalization of 16-bit rows (`element`: FusedParams::BF16 or F16),
/// f32 inside; `scale` (16-bit, may be null) has 1 or cols values.
cudaError_t launchRmsNorm16(const void *x, const void *scale, void *y,
                            int64_t rows, int64_t cols, int64_t scaleCount,
                            float eps, unsigned char element, cudaStream_t s);
cudaError_t launchLayerNorm(const float *x, const float *scale,
                            const float *bias, float *y, int64_t rows,
                            int64_t cols, int64_t scaleMod, int64_t biasMod,
                            float eps, cudaStream_t s);
cudaError_t launchGather(const void *data, const void *indices, bool idx64,
                         void *out, int64_t outer, int64_t axisLen,
                         int64_t count, int64_t innerBytes, int *badIndex,
                         cudaStream_t s);
/// GatherND and ScatterND geometry in copy units (the widest of 16, 8, 4, 2
/// or 1 bytes that a slice's size and the pointers allow; see IndexTuples).
struct NdTupleParams {
  static constexpr int kMaxTuple = 8;
  int64_t batches, tuplesPerBatch, sliceBytes, batchBytes;
  int k;
  int64_t extent[kMaxTuple], strideBytes[kMaxTuple];
};
/// out[t] = the slice tuple t of `indices` addresses in `data`; an index out
/// of range sets *badIndex.
cudaError_t launchGatherNd(const void *data, const void *indices, bool idx64,
                           void *out, const NdTupleParams &p, int *badIndex,
                           cudaStream_t s);
/// Writes each slice of `updates` to the slice its tuple addresses in `out`
/// (already a copy of the data), one f32 `reduction` (ScatterReduction's codes:
/// 0 none, 1 add, 2 mul, 3 max, 4 min) or, for none, elements of any size (p is
/// in bytes).
cudaError_t launchScatterNd(void *out, const void *indices, bool idx64,
                            const void *updates, const NdTupleParams &p,
                            int reduction, int *badIndex, cudaStream_t s);
/// Logical ops on bool with broadcasting: 0 and, 1 or, 2 xor; 3 not (of a,
/// with `b` unused).
cudaError_t launchLogical(int op, const bool *a, const bool *b, bool *y,
                          int64_t n, const Strides &st, cudaStream_t s);
/// IsNaN (nan) or IsInf (of the signs asked for) of f32 elements.
cudaError_t launchFloatTest(const float *x, bool *y, int64_t n, bool nan,
                            bool positive, bool negative, cudaStream_t s);
/// Comparison codes: 0 equal, 1 less, 2 greater, 3 less-or-equal,
/// 4 greater-or-equal. `dtype` is the operands' runtime DType.
cudaError_t launchCompare(int op, DType dtype, const void *a, const void *b,
                          bool *y, int64_t n, const Strides &st,
                          cudaStream_t s);
cudaError_t launchWhere(const bool *c, const void *x, const void *y, void *out,
                        int64_t n, const Strides &st, size_t elemSize,
                        cudaStream_t s);
/// Returns cudaErrorNotSupported for type pairs without a GPU kernel.
cudaError_t launchCast(DType from, DType to, const void *x, void *y, int64_t n,
                       cudaStream_t s);
bool castSupported(DType from, DType to);
/// Pad of f32: out[i] = in[source], where a source outside the input is
/// `value` (constant), the nearest edge element (edge) or mirrored about it
/// (reflect).
struct PadParams {
  int rank;
  PadMode mode;
  int64_t outShape[kMaxRank], inShape[kMaxRank], inStride[kMaxRank],
      begin[kMaxRank];
};
cudaError_t launchPadF32(const float *x, float *y, int64_t n,
                         const PadParams &p, float value, cudaStream_t s);

/// The fused-chain interpreter (FusedChain.cuh), for any program.
cudaError_t launchFusedElementwise(const FusedParams &p, cudaStream_t s);
/// How many elements per thread `p` may run through wide accesses
/// (runFusedChainWide): 8 where the output is 16-bit, else 4, or 1 where
/// its sizes or alignment do not allow it; and the blocks of 256 threads
/// for that width.
int fusedWidth(const FusedParams &p);
unsigned fusedBlocks(const FusedParams &p, int width);

/// `element` (FusedParams::Element) is both operands' type; sums in f32.
cudaError_t launchReduce(const void *x, void *y, int64_t outCount,
                         const Strides &keep, const Strides &reduced,
                         int64_t reduceCount, int op, unsigned char element,
                         cudaStream_t s);
/// The same over a contiguous [rows, cols] view, reducing the columns of
/// each row; both dimensions non-empty.
cudaError_t launchReduceTrailingF32(const float *x, float *y, int64_t rows,
                                    int64_t cols, int op, cudaStream_t s);

/// The leading reduction in row chunks, combined in a fixed order by the
/// last chunk to finish: fills the GPU where the columns are few (bias
/// gradients). `partials` holds reduceLeadingChunks(rows, cols) * cols
/// floats; `arrivals`, reduceLeadingColumnBlocks(cols) zeroed counters that
/// each launch leaves zeroed.
int64_t reduceLeadingChunks(int64_t rows, int64_t cols);
int64_t reduceLeadingColumnBlocks(int64_t cols);
cudaError_t launchReduceLeadingF32(const float *x, float *y, float *partials,
                                   unsigned *arrivals, int64_t rows,
                                   int64_t cols, int op, cudaStream_t s);

/// Layer norm by a warp per row of at most 1024 elements, any length, of
/// FusedParams element type `element` (scale and bias per element of the
/// row), where the wider kernels do not fit.
bool layerNormShortRowsFit(int64_t cols, int64_t scaleMod, int64_t biasMod,
                           bool hasBias);
cudaError_t launchLayerNormShortRows(const void *x, const void *scale,
                                     const void *bias, void *y, int64_t rows,
                                     int64_t cols, float eps,
                                     unsigned char element, cudaStream_t s);

/// A depthwise 2-D convolution channels last: input [n, h, w, c], filter
/// [c, kh, kw, 1] (one per channel), output [n, oh, ow, c].
struct DepthwiseGeometry {
  int n = 0, h = 0, w = 0, c = 0, oh = 0, ow = 0, kh = 0, kw = 0;
  int strideH = 1, strideW = 1, padTop = 0, padLeft = 0, dilationH = 1,
      dilationW = 1;
};
/// y = act(conv(x, w) + bias + z) for that geometry, every operand of
/// FusedParams element type `element` (bias and z may be null), summed in
/// f32; act is ReLU with `relu`, SiLU (s * sigmoid(s)) with `silu`. `form`
/// picks one of depthwiseForms(g) kernels (tuning times them); a form the
/// operands' alignment rules out falls back to another.
cudaError_t launchDepthwiseConv(const void *x, const void *w, const void *bias,
                                const void *z, void *y,
                                const DepthwiseGeometry &g, bool relu,
                                bool silu, unsigned char element,
                                cudaStream_t s, int form = 0);
/// How many kernels launchDepthwiseConv offers for the geometry: 4 for the
/// common square filters (forms 1 to 3 hold a filter row's inputs in
/// registers), else 1.
int depthwiseForms(const DepthwiseGeometry &g);

/// A 2-D convolution channels last over few input channels (an image's
/// colours): input [n, h, w, c] with c at most 4, filter [k, kh, kw, c]
/// (KRSC), output [n, oh, ow, k] with k a multiple of 8; no dilation, one
/// group.
struct FewChannelConvGeometry {
  int n = 0, h = 0, w = 0, c = 0, k = 0, oh = 0, ow = 0, kh = 0, kw = 0;
  int strideH = 1, strideW = 1, padTop = 0, padLeft = 0;
};
/// How many forms launchFewChannelConv offers for the geometry: 0 where it
/// does not apply (its filter taps or input rows overflow the kernel's
/// shared memory, or the channels do not fit); form 1 (a filter row's taps
/// loaded in pairs) needs an even stride times channels and at most 64 taps a
/// padded filter row.
int fewChannelConvForms(const FewChannelConvGeometry &g);
/// y = act(conv(x, w) + bias + z) on the tensor cores (FewChannelConv.cu),
/// every operand 16-bit of FusedParams element type `element` (bias and z
/// may be null; y 16-byte and z 4-byte aligned), f32 accumulation; act as
/// launchDepthwiseConv's. `form` picks one of fewChannelConvForms(g).
cudaError_t launchFewChannelConv(const void *x, const void *w, const void *bias,
                                 const void *z, void *y,
                                 const FewChannelConvGeometry &g, bool relu,
                                 bool silu, unsigned char element,
                                 cudaStream_t s, int form = 0);

/// y = y * sigmoid(y) in place on n values of FusedParams element type
/// `element`, in f32 (a convolution's SiLU after a library's epilogue).
cudaError_t launchSiluInPlace(void *y, int64_t n, unsigned char element,
                              cudaStream_t s);

/// A reduction over the middle dimension of a contiguous [batch, rows,
/// cols] view (channels-last global pooling) of FusedParams element type
/// `element`, summed in f32, in row chunks combined in a fixed order by
/// the last chunk of each batch item to finish. Fits where
/// reduceMiddleFits; `partials` holds batch * reduceMiddleChunks(...) *
/// cols floats (none for one chunk), `arrivals` batch zeroed counters that
/// each launch leaves zeroed.
bool reduceMiddleFits(int64_t batch, int64_t cols, unsigned char element);
int64_t reduceMiddleChunks(int64_t batch, int64_t rows, int64_t cols,
                           unsigned char element);
cudaError_t launchReduceMiddle(const void *x, void *y, float *partials,
                               unsigned *arrivals, int64_t batch, int64_t rows,
                               int64_t cols, int op, unsigned char element,
                               cudaStream_t s);

/// Holds the stream until the mapped host word `word` reaches `value` (or
/// `timeoutNs` pass).
cudaError_t launchHostGate(const unsigned *word, unsigned value,
                           uint64_t timeoutNs, cudaStream_t s);
/// Writes `value` into the mapped host word `word` when the stream gets
/// there: how the host learns where a device is stuck (CudaWatchdog.cpp).
cudaError_t launchProgressMark(unsigned *word, unsigned value, cudaStream_t s);
/// An injected fault (FaultInjection): traps if the mapped word `armed`
/// holds kFaultProbeError, spins while it holds kFaultProbeHang until
/// `release` is set or `limitNs` pass, else returns at once.
constexpr unsigned kFaultProbeError = 1, kFaultProbeHang = 2;
cudaError_t launchFaultProbe(const unsigned *armed, const unsigned *release,
                             uint64_t limitNs, cudaStream_t s);
/// y[r, 0..padded) = x[r, 0..channels) followed by zeros, for `rows` rows
/// (channels-last activations or filters widened to a vector-friendly
/// channel count).
cudaError_t launchPadChannels(const float *x, float *y, int64_t rows,
                              int channels, int padded, cudaStream_t s);
/// pointers[i] = x + offsets[i], pointers[count + i] = y + offsets[count +
/// i], pointers[2 count + i] = c + offsets[2 count + i] (in elements of
/// `elementBytes`): the
/// matrix pointers of a batched GEMM.
cudaError_t launchBatchPointers(const void *x, const void *y, void *c,
                                const int64_t *offsets, int count,
                                int elementBytes, void **pointers,
                                cudaStream_t s);
/// Fills `x` with deterministic values in [-1, 1) (for tuning kernels), of
/// type `element` (FusedParams::F32, BF16 or F16).
cudaError_t launchFillPattern(void *x, int64_t n, uint32_t seed, cudaStream_t s,
                              unsigned char element = FusedParams::F32);
/// result[0..1] = bit patterns of max |a - b| and max |a| (device memory).
cudaError_t launchMaxDifference(const void *a, const void *b, int64_t n,
                                unsigned *result, cudaStream_t s,
                                unsigned char element = FusedParams::F32);

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_CUDAKERNELS_H
