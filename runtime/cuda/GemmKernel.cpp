//===- GemmKernel.cpp - Gemm and MatMul with their epilogue ---------------===//
//
// Row-major C[m, n] = alpha * op(A) * op(B), then: beta * C0 (Gemm's C,
// full or broadcast) or a bias of one value per column (Gemm's C of shape
// [n] or [1, n], or MatMul's fused bias) with, for MatMul, a fused residual
// addend of the result's shape; then an optional ReLU.
//
// Two implementations of a single GEMM:
//  * cublas: cublasGemmEx, then one vectorized pass for the bias, residual
//    and ReLU (a broadcast C is copied into the result first and scaled by
//    beta);
//  * cublaslt: cublasLtMatmul with the bias and ReLU in its epilogue and a
//    full C or the residual as its C operand; one candidate per algorithm
//    its heuristic offers.
// tune() times them at load time and keeps the fastest whose result agrees
// with the cublas one. Batched MatMuls (a batch on the right operand, as in
// attention) run as one strided batched cublas GEMM where the matrices lie
// at even strides (broadcasting with a stride of 0 included), else one
// GEMM per matrix; then the epilogue pass.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/LibraryStatus.h"
#include "runtime/cuda/LtHeuristics.h"
#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/KernelRegistry.h"
#include "runtime/kernels/StridedMatMul.h"

#include <cublas_v2.h>

namespace partc::runtime::cuda {

namespace {

struct GemmShape {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
};

/// What is added to alpha * op(A) * op(B): a bias per column, Gemm's C
/// (scaled by beta, full or broadcast) or MatMul's residual (the result's
/// shape, added after the bias).
struct Addend {
  bool bias = false;
  enum Matrix { None, Full, Broadcast } matrix = None;
  bool residual = false;
  /// Input index of the matrix or residual.
  size_t matrixInput = 2;
};

struct GemmOperands {
  const void *a, *b, *bias, *c;
  void *y;
};

/// The library type of a product's operands: f32, or bf16 and f16 (whose
/// products accumulate in f32 too).
struct GemmElement {
  cudaDataType_t type = CUDA_R_32F;
  int bytes = 4;

  static bool of(DType t, GemmElement &e) {
    if (t == DType::F32)
      e = {CUDA_R_32F, 4};
    else if (t == DType::BF16)
      e = {CUDA_R_16BF, 2};
    else if (t == DType::F16)
      e = {CUDA_R_16F, 2};
    else
      return false;
    return true;
  }
  bool sixteen() const { return bytes == 2; }
  /// TF32 where asked for f32; 16-bit operands multiply exactly into f32.
  cublasComputeType_t compute(const CudaOptions &options) const {
    return !sixteen() && options.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                      : CUBLAS_COMPUTE_32F;
  }
  const void *at(const void *base, int64_t elements) const {
    return static_cast<const char *>(base) + elements * bytes;
  }
  void *at(void *base, int64_t elements) const {
    return static_cast<char *>(base) + elements * bytes;
  }
};

/// Every operand of `a` has one type a GEMM takes; sets it.
bool uniformGemmElement(const KernelArgs &a, GemmElement &e) {
  if (!GemmElement::of(a.outputs[0].dtype, e))
    return false;
  for (const TensorType &t : a.inputs)
    if (t.dtype != a.outputs[0].dtype)
      return false;
  return true;
}

class LinearKernel : public GpuKernel {
public:
  LinearKernel(GemmShape g, float alpha, float beta, Addend addend,
               Strides cStrides, FusedActivation activation,
               std::vector<int64_t> aOffsets, std::vector<int64_t> bOffsets,
               GemmElement element)
      : g_(g), alpha_(alpha), beta_(beta), addend_(addend), cStrides_(cStrides),
        activation_(activation), relu_(activation == FusedActivation::Relu),
        aOffsets_(std::move(aOffsets)), bOffsets_(std::move(bOffsets)),
        e_(element) {
    strided_ = strided::evenStride(aOffsets_, aStride_) &&
               strided::evenStride(bOffsets_, bStride_);
  }
  ~LinearKernel() override;
  Status initLt(DeviceContext &ctx);

  size_t workspaceBytes() const override {
    return algos_.empty() ? 0 : kLtWorkspace;
  }
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    return runCandidate(chosen_, ctx, operands(in, out[0].data));
  }
  Status tune(DeviceContext &ctx, const std::vector<TensorRef> &in,
              const std::vector<TensorRef> &out, TuneScratch &scratch) override;
  bool adoptCandidate(size_t c) override {
    if (c > algos_.size())
      return false;
    chosen_ = c;
    return true;
  }
  const char *variant() const override {
    return algos_.empty() ? nullptr : chosen_ ? "cublaslt-fused" : "cublas";
  }

private:
  GemmOperands operands(const std::vector<TensorRef> &in, void *y) const {
    bool matrix = addend_.matrix != Addend::None || addend_.residual;
    return {in[0].data, in[1].data, addend_.bias ? in[2].data : nullptr,
            matrix ? in[addend_.matrixInput].data : nullptr, y};
  }
  int64_t elements() const {
    return g_.m * g_.n * static_cast<int64_t>(aOffsets_.size());
  }
  /// Candidate 0 is cuBLAS plus the epilogue pass, i > 0 cuBLASLt's
  /// algorithm i - 1.
  Status runCandidate(size_t index, DeviceContext &ctx,
                      const GemmOperands &ops) {
    return index ? runLt(ctx, ops, algos_[index - 1]) : runSeparate(ctx, ops);
  }
  Status runSeparate(DeviceContext &ctx, const GemmOperands &ops);
  Status runEpilogue16(DeviceContext &ctx, const GemmOperands &ops);
  /// The separate path's Gelu, after the bias and residual.
  Status runGelu(DeviceContext &ctx, const GemmOperands &ops);
  unsigned char fusedElement() const {
    return e_.type == CUDA_R_16BF  ? FusedParams::BF16
           : e_.type == CUDA_R_16F ? FusedParams::F16
                                   : FusedParams::F32;
  }
  Status runLt(DeviceContext &ctx, const GemmOperands &ops,
               const cublasLtMatmulAlgo_t &algo);

  GemmShape g_;
  float alpha_, beta_;
  Addend addend_;
  Strides cStrides_;
  FusedActivation activation_;
  bool relu_;
  std::vector<int64_t> aOffsets_, bOffsets_;
  GemmElement e_;
  /// The batch's matrices lie at offsets aOffsets_[0] + i * aStride_ (and
  /// likewise for B).
  bool strided_ = false;
  int64_t aStride_ = 0, bStride_ = 0;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t aLayout_ = nullptr, bLayout_ = nullptr,
                         yLayout_ = nullptr;
  std::vector<cublasLtMatmulAlgo_t> algos_;
  size_t chosen_ = 0;
};

LinearKernel::~LinearKernel() {
  if (desc_)
    cublasLtMatmulDescDestroy(desc_);
  for (cublasLtMatrixLayout_t l : {aLayout_, bLayout_, yLayout_})
    if (l)
      cublasLtMatrixLayoutDestroy(l);
}

Status LinearKernel::runSeparate(DeviceContext &ctx, const GemmOperands &ops) {
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS gets B first.
  cublasOperation_t opB = g_.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opA = g_.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  int64_t ldb = g_.transB ? g_.k : g_.n, lda = g_.transA ? g_.m : g_.k;
  cublasComputeType_t compute = e_.compute(ctx.options);
  cudaDataType_t type = e_.type;
  float beta = 0.f;
  if (addend_.matrix != Addend::None) {
    PARTC_RETURN_IF_ERROR(
        cudaStatus(launchStridedCopy(ops.c, ops.y, elements(), cStrides_, 0,
                                     e_.bytes, ctx.stream),
                   "gemm addend"));
    beta = beta_;
  }
  if (strided_ && aOffsets_.size() > 1 &&
      aOffsets_.size() <= static_cast<size_t>(INT32_MAX))
    PARTC_RETURN_IF_ERROR(cublasStatus(
        cublasGemmStridedBatchedEx(
            ctx.cublas, opB, opA, static_cast<int>(g_.n),
            static_cast<int>(g_.m), static_cast<int>(g_.k), &alpha_,
            e_.at(ops.b, bOffsets_[0]), type, static_cast<int>(ldb), bStride_,
            e_.at(ops.a, aOffsets_[0]), type, static_cast<int>(lda), aStride_,
            &beta, ops.y, type, static_cast<int>(g_.n), g_.m * g_.n,
            static_cast<int>(aOffsets_.size()), compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx"));
  else
    for (size_t i = 0; i < aOffsets_.size(); ++i)
      PARTC_RETURN_IF_ERROR(cublasStatus(
          cublasGemmEx(ctx.cublas, opB, opA, static_cast<int>(g_.n),
                       static_cast<int>(g_.m), static_cast<int>(g_.k), &alpha_,
                       e_.at(ops.b, bOffsets_[i]), type, static_cast<int>(ldb),
                       e_.at(ops.a, aOffsets_[i]), type, static_cast<int>(lda),
                       &beta, e_.at(ops.y, i * g_.m * g_.n), type,
                       static_cast<int>(g_.n), compute, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx"));
  if (e_.sixteen())
    PARTC_RETURN_IF_ERROR(runEpilogue16(ctx, ops));
  else
    PARTC_RETURN_IF_ERROR(cudaStatus(
        launchEpilogue(
            static_cast<float *>(ops.y), static_cast<const float *>(ops.bias),
            addend_.residual ? static_cast<const float *>(ops.c) : nullptr,
            elements(), g_.n, 1, relu_, ctx.stream),
        "gemm epilogue"));
  return runGelu(ctx, ops);
}

Status LinearKernel::runGelu(DeviceContext &ctx, const GemmOperands &ops) {
  if (activation_ != FusedActivation::GeluTanh)
    return Status();
  cudaError_t err =
      e_.sixteen()
          ? launchUnary16(ew::Step::GeluTanh, ops.y, elements(), fusedElement(),
                          ctx.stream)
          : launchUnaryF32(ew::Step::GeluTanh, static_cast<float *>(ops.y),
                           static_cast<float *>(ops.y), elements(), 0.f, 0.f,
                           ctx.stream);
  return cudaStatus(err, "gemm gelu");
}

Status LinearKernel::runEpilogue16(DeviceContext &ctx,
                                   const GemmOperands &ops) {
  // The product was rounded once already (cuBLASLt's epilogue, preferred
  // for 16 bits, rounds once).
  return cudaStatus(
      launchEpilogue16(ops.y, ops.bias, addend_.residual ? ops.c : nullptr,
                       elements(), g_.n, 1, relu_, fusedElement(), ctx.stream),
      "gemm epilogue");
}

Status LinearKernel::initLt(DeviceContext &ctx) {
  // One GEMM whose addend cuBLASLt can take: a bias, and a full C or the
  // residual.
  if (!ctx.cublasLt || !ctx.options.fuseEpilogues || aOffsets_.size() != 1 ||
      addend_.matrix == Addend::Broadcast)
    return Status();
  PARTC_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatmulDescCreate(&desc_, e_.compute(ctx.options), CUDA_R_32F),
      "cuBLASLt descriptor"));
  // Column-major view: D^T[n, m] = op(B)^T[n, k] * op(A)^T[k, m]; the bias
  // has one value per row of D^T, that is per column of the result.
  cublasOperation_t opB = g_.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opA = g_.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = ltEpilogue(addend_.bias, activation_);
  for (auto [attr, value] : {std::pair{CUBLASLT_MATMUL_DESC_TRANSA, &opB},
                             std::pair{CUBLASLT_MATMUL_DESC_TRANSB, &opA}})
    PARTC_RETURN_IF_ERROR(
        cublasStatus(cublasLtMatmulDescSetAttribute(desc_, attr, value,
                                                    sizeof(cublasOperation_t)),
                     "cuBLASLt descriptor"));
  PARTC_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                     &epilogue, sizeof(epilogue)),
      "cuBLASLt descriptor"));
  uint64_t m = g_.m, n = g_.n, k = g_.k;
  PARTC_RETURN_IF_ERROR(cublasStatus(
      g_.transB ? cublasLtMatrixLayoutCreate(&bLayout_, e_.type, k, n, k)
                : cublasLtMatrixLayoutCreate(&bLayout_, e_.type, n, k, n),
      "cuBLASLt layout"));
  PARTC_RETURN_IF_ERROR(cublasStatus(
      g_.transA ? cublasLtMatrixLayoutCreate(&aLayout_, e_.type, m, k, m)
                : cublasLtMatrixLayoutCreate(&aLayout_, e_.type, k, m, k),
      "cuBLASLt layout"));
  PARTC_RETURN_IF_ERROR(
      cublasStatus(cublasLtMatrixLayoutCreate(&yLayout_, e_.type, n, m, n),
                   "cuBLASLt layout"));
  algos_ = ltAlgorithms(ctx.cublasLt, desc_, bLayout_, aLayout_, yLayout_, 8);
  // Until tuned, 16-bit results take the heuristic's first choice, which
  // rounds the epilogue's sum once.
  if (e_.sixteen() && !algos_.empty())
    chosen_ = 1;
  return Status();
}

Status LinearKernel::runLt(DeviceContext &ctx, const GemmOperands &ops,
                           const cublasLtMatmulAlgo_t &algo) {
  if (addend_.bias)
    PARTC_RETURN_IF_ERROR(cublasStatus(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                       &ops.bias, sizeof(ops.bias)),
        "cuBLASLt bias"));
  bool matrix = addend_.matrix == Addend::Full || addend_.residual;
  float beta = addend_.residual ? 1.f : matrix ? beta_ : 0.f;
  return cublasStatus(
      cublasLtMatmul(ctx.cublasLt, desc_, &alpha_, ops.b, bLayout_, ops.a,
                     aLayout_, &beta, matrix ? ops.c : ops.y, yLayout_, ops.y,
                     yLayout_, &algo, ctx.workspace, kLtWorkspace, ctx.stream),
      "cublasLtMatmul");
}

Status LinearKernel::tune(DeviceContext &ctx, const std::vector<TensorRef> &in,
                          const std::vector<TensorRef> &out,
                          TuneScratch &scratch) {
  if (algos_.empty())
    return Status();
  // Every operand comes from scratch filled with a fixed pattern: which of
  // them are weights is not known here, and the arena holds no values yet.
  // Slot 3 holds B, then the bias and the matrix or residual, if any.
  auto rounded = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  std::vector<size_t> starts;
  size_t packed = 0;
  for (size_t i = 1; i < in.size(); ++i) {
    starts.push_back(packed);
    packed += rounded(in[i].type.byteSize());
  }
  void *a = nullptr, *pack = nullptr, *reference = nullptr, *y = nullptr;
  PARTC_RETURN_IF_ERROR(scratch.buffer(0, in[0].type.byteSize(), a));
  PARTC_RETURN_IF_ERROR(scratch.buffer(3, packed, pack));
  PARTC_RETURN_IF_ERROR(scratch.buffer(1, out[0].type.byteSize(), reference));
  PARTC_RETURN_IF_ERROR(scratch.buffer(2, out[0].type.byteSize(), y));
  std::vector<TensorRef> patterned = in;
  patterned[0].data = a;
  for (size_t i = 1; i < in.size(); ++i)
    patterned[i].data = static_cast<char *>(pack) + starts[i - 1];
  for (size_t i = 0; i < in.size(); ++i)
    PARTC_RETURN_IF_ERROR(cudaStatus(
        launchFillPattern(patterned[i].data, in[i].type.numElements(),
                          static_cast<uint32_t>(i + 1), ctx.stream,
                          fusedElement()),
        "tuning"));
  GemmOperands ops = operands(patterned, nullptr);
  return pickFastest(
      ctx, scratch, algos_.size() + 1,
      [&](size_t index, void *result) {
        ops.y = result;
        return runCandidate(index, ctx, ops);
      },
      reference, y, elements(), chosen_, fusedElement());
}

/// strided_matmul: one GEMM, a strided batched GEMM where the batch lies at
/// even strides, else a pointer-array batched GEMM whose pointers a small
/// kernel writes before it (in every run, so that a captured graph holds
/// both and no pointer array outlives the buffers it was made for).
class StridedMatMulGpuKernel : public GpuKernel {
public:
  StridedMatMulGpuKernel(strided::Gemm g, float alpha, GemmElement element)
      : g_(std::move(g)), alpha_(alpha), e_(element) {
    even_ = g_.evenlyStrided(xStride_, yStride_, cStride_);
  }
  ~StridedMatMulGpuKernel() override {
    cudaFree(offsets_);
    cudaFree(pointers_);
  }
  /// Uploads the offsets a pointer-array GEMM needs.
  Status init() {
    if (even_)
      return Status();
    size_t count = g_.cOffsets.size();
    std::vector<int64_t> offsets;
    for (const std::vector<int64_t> *o :
         {&g_.x.offsets, &g_.y.offsets, &g_.cOffsets})
      offsets.insert(offsets.end(), o->begin(), o->end());
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaMalloc(&offsets_, offsets.size() * sizeof(int64_t)),
                   "strided matmul offsets"));
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaMalloc(&pointers_, 3 * count * sizeof(void *)),
                   "strided matmul pointers"));
    return cudaStatus(cudaMemcpy(offsets_, offsets.data(),
                                 offsets.size() * sizeof(int64_t),
                                 cudaMemcpyHostToDevice),
                      "strided matmul offsets");
  }
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const void *x = in[g_.x.lhs ? 0 : 1].data;
    const void *y = in[g_.y.lhs ? 0 : 1].data;
    void *c = out[0].data;
    cudaDataType_t type = e_.type;
    cublasOperation_t opX = g_.x.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opY = g_.y.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasComputeType_t compute = e_.compute(ctx.options);
    int rows = static_cast<int>(g_.rows), cols = static_cast<int>(g_.cols),
        depth = static_cast<int>(g_.depth), ldx = static_cast<int>(g_.x.ld),
        ldy = static_cast<int>(g_.y.ld), ldc = static_cast<int>(g_.ldc);
    int count = static_cast<int>(g_.cOffsets.size());
    float beta = 0.f;
    if (even_)
      return cublasStatus(cublasGemmStridedBatchedEx(
                              ctx.cublas, opX, opY, rows, cols, depth, &alpha_,
                              e_.at(x, g_.x.offsets[0]), type, ldx, xStride_,
                              e_.at(y, g_.y.offsets[0]), type, ldy, yStride_,
                              &beta, e_.at(c, g_.cOffsets[0]), type, ldc,
                              cStride_, count, compute, CUBLAS_GEMM_DEFAULT),
                          "cublasGemmStridedBatchedEx");
    PARTC_RETURN_IF_ERROR(
        cudaStatus(launchBatchPointers(x, y, c, offsets_, count, e_.bytes,
                                       pointers_, ctx.stream),
                   "strided matmul pointers"));
    return cublasStatus(
        cublasGemmBatchedEx(ctx.cublas, opX, opY, rows, cols, depth, &alpha_,
                            pointers_, type, ldx, pointers_ + count, type, ldy,
                            &beta, pointers_ + 2 * count, type, ldc, count,
                            compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmBatchedEx");
  }

private:
  strided::Gemm g_;
  float alpha_;
  GemmElement e_;
  bool even_ = false;
  int64_t xStride_ = 0, yStride_ = 0, cStride_ = 0;
  int64_t *offsets_ = nullptr;
  void **pointers_ = nullptr;
};

/// The addend of a Gemm's C operand of shape `c` for a result [m, n].
Addend gemmAddend(const Shape &c, int64_t m, int64_t n, float beta) {
  Addend addend;
  if (numElements(c) == n && (c.size() <= 1 || c[0] == 1) && beta == 1.f)
    addend.bias = true;
  else if (c.size() == 2 && c[0] == m && c[1] == n)
    addend.matrix = Addend::Full;
  else
    addend.matrix = Addend::Broadcast;
  return addend;
}

} // namespace

cublasLtEpilogue_t ltEpilogue(bool bias, bool relu) {
  return ltEpilogue(bias, relu ? FusedActivation::Relu : FusedActivation::None);
}

cublasLtEpilogue_t ltEpilogue(bool bias, FusedActivation activation) {
  switch (activation) {
  case FusedActivation::Relu:
    return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  case FusedActivation::GeluTanh:
    return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  case FusedActivation::None:
  case FusedActivation::Silu: // no cuBLASLt epilogue; never asked for
    break;
  }
  return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

std::vector<cublasLtMatmulAlgo_t>
ltAlgorithms(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
             cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
             cublasLtMatrixLayout_t d, int most) {
  std::vector<cublasLtMatmulAlgo_t> algos;
  cublasLtMatmulPreference_t preference = nullptr;
  if (cublasLtMatmulPreferenceCreate(&preference) != CUBLAS_STATUS_SUCCESS)
    return algos;
  size_t workspace = kLtWorkspace;
  cublasLtMatmulPreferenceSetAttribute(preference,
                                       CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace, sizeof(workspace));
  uint32_t alignment = 16;
  for (cublasLtMatmulPreferenceAttributes_t attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(preference, attr, &alignment,
                                         sizeof(alignment));
  std::vector<cublasLtMatmulHeuristicResult_t> results(most);
  int count = 0;
  if (cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, d, d, preference, most,
                                     results.data(),
                                     &count) == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < count; ++i)
      if (results[i].state == CUBLAS_STATUS_SUCCESS)
        algos.push_back(results[i].algo);
  cublasLtMatmulPreferenceDestroy(preference);
  return algos;
}

Status createGemmKernel(const KernelArgs &a, DeviceContext &ctx,
                        std::unique_ptr<GpuKernel> &result) {
  bool ta = a.attrs.getInt("trans_a"), tb = a.attrs.getInt("trans_b");
  const Shape &x = a.inputs[0].shape, &w = a.inputs[1].shape;
  GemmShape g{ta, tb, ta ? x[1] : x[0], tb ? w[0] : w[1], ta ? x[0] : x[1]};
  float alpha = static_cast<float>(a.attrs.getFloat("alpha"));
  float beta = static_cast<float>(a.attrs.getFloat("beta"));
  Addend addend;
  Strides cStrides;
  if (a.inputs.size() == 3 && beta != 0.f) {
    addend = gemmAddend(a.inputs[2].shape, g.m, g.n, beta);
    cStrides = makeStrides({g.m, g.n}, {a.inputs[2].shape});
  }
  FusedActivation activation;
  PARTC_RETURN_IF_ERROR(fusedActivation(a.attrs, activation));
  GemmElement element;
  if (!uniformGemmElement(a, element))
    return Status(); // the CPU kernel runs it
  auto kernel = std::make_unique<LinearKernel>(
      g, alpha, beta, addend, cStrides, activation, std::vector<int64_t>{0},
      std::vector<int64_t>{0}, element);
  PARTC_RETURN_IF_ERROR(kernel->initLt(ctx));
  result = std::move(kernel);
  return Status();
}

Status createStridedMatMulKernel(const KernelArgs &a, DeviceContext &,
                                 std::unique_ptr<GpuKernel> &result) {
  strided::View lhs, rhs, view;
  double alpha;
  PARTC_RETURN_IF_ERROR(strided::parseKernel(a, lhs, rhs, view, alpha));
  strided::Gemm g;
  if (!strided::planGemm(lhs, rhs, view, g))
    return Status::error("the operand views are not GEMM operands");
  for (int64_t v : {g.rows, g.cols, g.depth, g.x.ld, g.y.ld, g.ldc,
                    static_cast<int64_t>(g.cOffsets.size())})
    if (v > INT32_MAX)
      return Status(); // beyond cuBLAS's int arguments: the CPU kernel runs
  GemmElement element;
  if (!uniformGemmElement(a, element))
    return Status(); // the CPU kernel runs it
  auto kernel = std::make_unique<StridedMatMulGpuKernel>(
      std::move(g), static_cast<float>(alpha), element);
  PARTC_RETURN_IF_ERROR(kernel->init());
  result = std::move(kernel);
  return Status();
}

Status createMatMulKernel(const KernelArgs &a, DeviceContext &ctx,
                          std::unique_ptr<GpuKernel> &result) {
  Shape aa = a.inputs[0].shape, bb = a.inputs[1].shape;
  if (aa.size() == 1)
    aa.insert(aa.begin(), 1);
  if (bb.size() == 1)
    bb.push_back(1);
  GemmShape g{false, false, aa[aa.size() - 2], bb.back(), aa.back()};
  Shape aBatch(aa.begin(), aa.end() - 2), bBatch(bb.begin(), bb.end() - 2);
  std::vector<int64_t> aOffsets, bOffsets;
  if (numElements(bBatch) == 1) {
    // A weight matrix: fold A's batch into its rows, one GEMM.
    g.m *= numElements(aBatch);
    aOffsets = {0};
    bOffsets = {0};
  } else {
    Shape batch;
    broadcastShapes(aBatch, bBatch, batch);
    std::array<std::vector<int64_t>, 2> strides{
        broadcastStrides(aBatch, batch), broadcastStrides(bBatch, batch)};
    broadcastLoop<2>(batch, strides, [&](int64_t, const auto &idx) {
      aOffsets.push_back(idx[0] * g.m * g.k);
      bOffsets.push_back(idx[1] * g.k * g.n);
    });
  }
  FusedActivation activation;
  PARTC_RETURN_IF_ERROR(fusedActivation(a.attrs, activation));
  Addend addend;
  addend.bias = a.inputs.size() >= 3;
  addend.residual = a.inputs.size() == 4;
  addend.matrixInput = 3;
  GemmElement element;
  if (!uniformGemmElement(a, element))
    return Status(); // the CPU kernel runs it
  auto kernel = std::make_unique<LinearKernel>(g, 1.f, 1.f, addend, Strides(),
                                               activation, std::move(aOffsets),
                                               std::move(bOffsets), element);
  PARTC_RETURN_IF_ERROR(kernel->initLt(ctx));
  result = std::move(kernel);
  return Status();
}

void registerLinearAlgebraGpuKernels(GpuKernelTable &t) {
  t["matmul"] = [](const KernelArgs &a, DeviceContext &ctx,
                   std::unique_ptr<GpuKernel> &k) -> Status {
    return createMatMulKernel(a, ctx, k);
  };
  t["strided_matmul"] = [](const KernelArgs &a, DeviceContext &ctx,
                           std::unique_ptr<GpuKernel> &k) -> Status {
    return createStridedMatMulKernel(a, ctx, k);
  };
  t["attention"] = [](const KernelArgs &a, DeviceContext &ctx,
                      std::unique_ptr<GpuKernel> &k) -> Status {
    return createAttentionKernel(a, ctx, k);
  };
  t["gemm"] = [](const KernelArgs &a, DeviceContext &ctx,
                 std::unique_ptr<GpuKernel> &k) -> Status {
    return createGemmKernel(a, ctx, k);
  };
}

} // namespace partc::runtime::cuda
