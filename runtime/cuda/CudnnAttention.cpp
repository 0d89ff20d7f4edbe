//===- CudnnAttention.cpp - Fused attention through cuDNN -----------------===//
//
// The graph is the one cuDNN's fused-attention engines recognize (cuDNN's
// documentation, "Scaled Dot Product Attention"): scores = q k^T in f32,
// times the scale, plus the bias; softmax as max, subtract, exp, sum and
// divide, with the log-sum-exp statistics left virtual; the probabilities
// in the operands' 16-bit type, then times v.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudnnAttention.h"
#include "runtime/cuda/CudnnBackend.h"
#include "runtime/cuda/LibraryStatus.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace partc::runtime::cuda {

using namespace cudnnbe;

namespace {

/// Tensor ids in the variant pack; virtual intermediates come after.
enum : int64_t {
  kQ = 1,
  kK,
  kV,
  kOut,
  kBias,
  kScale,
  kMinusInf,
  kFirstVirtual
};
/// Heuristic candidates worth timing (cuDNN offers few for this graph),
/// and variants of the first ones with one knob moved (tile shapes).
constexpr int kMaxPlans = 4;
constexpr int kKnobSeeds = 2;
constexpr int kKnobVariantsPerSeed = 8;
constexpr int64_t kMaxKnobValues = 16;
constexpr int64_t kMaxWorkspace = int64_t(256) << 20;

std::vector<int64_t> vec(const std::array<int64_t, 4> &a) {
  return {a.begin(), a.end()};
}

/// Engines whose numerics partc does not accept: nondeterministic ones.
bool deterministic(cudnnBackendDescriptor_t engine) {
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT>
      notes{};
  int64_t count = 0;
  if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                               CUDNN_TYPE_NUMERICAL_NOTE, notes.size(), &count,
                               notes.data()) != CUDNN_STATUS_SUCCESS)
    return false;
  return std::none_of(notes.begin(), notes.begin() + count, [](auto note) {
    return note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
  });
}

} // namespace

CudnnAttention::CudnnAttention()
    : owner_(std::make_unique<DescriptorOwner>()) {}

CudnnAttention::~CudnnAttention() = default;

CudnnAttention::Binding::~Binding() {
  if (pack)
    cudnnBackendDestroyDescriptor(pack);
}

std::shared_ptr<const CudnnAttention>
CudnnAttention::shared(DeviceContext &ctx, const AttentionGeometry &g) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const CudnnAttention>> built;
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(ctx.cudnn)) +
                    " " + std::to_string(g.element) + " " +
                    std::to_string(g.bias) + " " + std::to_string(g.causal) +
                    " " + std::to_string(g.scale);
  for (const auto *a :
       {&g.qDims, &g.qStrides, &g.kDims, &g.kStrides, &g.vDims, &g.vStrides,
        &g.outDims, &g.outStrides, &g.biasDims, &g.biasStrides})
    for (int64_t x : *a)
      key += " " + std::to_string(x);
  std::lock_guard<std::mutex> lock(mutex);
  if (std::shared_ptr<const CudnnAttention> existing = built[key].lock())
    return existing;
  auto made = std::make_shared<CudnnAttention>();
  made->init(ctx, g);
  built[key] = made;
  return made;
}

size_t CudnnAttention::workspaceBytes() const {
  size_t bytes = 0;
  for (const Plan &p : plans_)
    bytes = std::max(bytes, p.workspace);
  return bytes;
}

void CudnnAttention::init(DeviceContext &ctx, const AttentionGeometry &g) {
  build(ctx, g, g.causal);
  if (plans_.empty() && g.causal)
    build(ctx, g, false);
}

void CudnnAttention::build(DeviceContext &ctx, const AttentionGeometry &g,
                           bool causal) {
  DescriptorOwner &o = *owner_;
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  const cudnnDataType_t stored =
      g.element == FusedParams::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
  scale_ = g.scale;
  causal_ = causal;
  int64_t nextVirtual = kFirstVirtual;
  // Scores [b, h, queries, keys] and per-row statistics [b, h, queries, 1],
  // packed (virtual: never in memory).
  int64_t b = g.outDims[0], h = g.outDims[1], m = g.outDims[2], n = g.kDims[3];
  std::vector<int64_t> scoreDims = {b, h, m, n},
                       scoreStrides = {h * m * n, m * n, n, 1},
                       rowDims = {b, h, m, 1}, rowStrides = {h * m, m, 1, 1};
  auto scores = [&](cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return makeTensor(o, nextVirtual++, type, scoreDims, scoreStrides, true);
  };
  auto rows = [&] {
    return makeTensor(o, nextVirtual++, f32, rowDims, rowStrides, true);
  };
  cudnnBackendDescriptor_t q =
      makeTensor(o, kQ, stored, vec(g.qDims), vec(g.qStrides), false);
  cudnnBackendDescriptor_t k =
      makeTensor(o, kK, stored, vec(g.kDims), vec(g.kStrides), false);
  cudnnBackendDescriptor_t v =
      makeTensor(o, kV, stored, vec(g.vDims), vec(g.vStrides), false);
  cudnnBackendDescriptor_t out =
      makeTensor(o, kOut, stored, vec(g.outDims), vec(g.outStrides), false);
  cudnnBackendDescriptor_t scale =
      makeTensor(o, kScale, f32, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
  cudnnBackendDescriptor_t bias =
      g.bias ? makeTensor(o, kBias, stored, vec(g.biasDims), vec(g.biasStrides),
                          false)
             : nullptr;
  if (!q || !k || !v || !out || !scale || (g.bias && !bias))
    return;

  std::vector<cudnnBackendDescriptor_t> ops;
  auto matmul = [&](cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t bm,
                    cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t desc = o.create(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    cudnnBackendDescriptor_t op =
        o.create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    if (!desc || !op ||
        !set(desc, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
             &f32) ||
        !finalize(desc) ||
        !setDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a) ||
        !setDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, bm) ||
        !setDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c) ||
        !setDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, desc) ||
        !finalize(op))
      return false;
    ops.push_back(op);
    return true;
  };
  auto reduce = [&](cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                    cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t desc =
        o.create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    cudnnBackendDescriptor_t op =
        o.create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    if (!desc || !op ||
        !set(desc, CUDNN_ATTR_REDUCTION_OPERATOR,
             CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode) ||
        !set(desc, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
             &f32) ||
        !finalize(desc) ||
        !setDescriptor(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x) ||
        !setDescriptor(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y) ||
        !setDescriptor(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, desc) ||
        !finalize(op))
      return false;
    ops.push_back(op);
    return true;
  };
  auto pointwise = [&](cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                       cudnnBackendDescriptor_t operand,
                       cudnnBackendDescriptor_t y, int64_t axis = -1,
                       cudnnBackendDescriptor_t condition = nullptr) {
    cudnnBackendDescriptor_t op =
        makePointwise(o, mode, x, operand, y, condition, axis);
    if (op)
      ops.push_back(op);
    return op != nullptr;
  };

  cudnnBackendDescriptor_t product = scores(), scaled = scores();
  if (!product || !scaled || !matmul(q, k, product) ||
      !pointwise(CUDNN_POINTWISE_MUL, product, scale, scaled))
    return;
  cudnnBackendDescriptor_t logits = scaled;
  if (bias) {
    logits = scores();
    if (!logits || !pointwise(CUDNN_POINTWISE_ADD, scaled, bias, logits))
      return;
  }
  if (causal) {
    // Keys past the query: -inf where column > row, as the bias has it.
    cudnnBackendDescriptor_t row = scores(), column = scores(),
                             keep = scores(CUDNN_DATA_BOOLEAN),
                             masked = scores();
    cudnnBackendDescriptor_t minusInf =
        makeTensor(o, kMinusInf, f32, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
    if (!row || !column || !keep || !masked || !minusInf ||
        !pointwise(CUDNN_POINTWISE_GEN_INDEX, logits, nullptr, row, 2) ||
        !pointwise(CUDNN_POINTWISE_GEN_INDEX, logits, nullptr, column, 3) ||
        !pointwise(CUDNN_POINTWISE_CMP_GE, row, column, keep) ||
        !pointwise(CUDNN_POINTWISE_BINARY_SELECT, logits, minusInf, masked, -1,
                   keep))
      return;
    logits = masked;
  }
  cudnnBackendDescriptor_t rowMax = rows(), shifted = scores(), exps = scores(),
                           rowSum = rows(), logSum = rows(), stats = rows(),
                           probabilities = scores(stored);
  if (!rowMax || !shifted || !exps || !rowSum || !logSum || !stats ||
      !probabilities || !reduce(CUDNN_REDUCE_TENSOR_MAX, logits, rowMax) ||
      !pointwise(CUDNN_POINTWISE_SUB, logits, rowMax, shifted) ||
      !pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, exps) ||
      !reduce(CUDNN_REDUCE_TENSOR_ADD, exps, rowSum) ||
      !pointwise(CUDNN_POINTWISE_LOG, rowSum, nullptr, logSum) ||
      !pointwise(CUDNN_POINTWISE_ADD, rowMax, logSum, stats) ||
      !pointwise(CUDNN_POINTWISE_DIV, exps, rowSum, probabilities) ||
      !matmul(probabilities, v, out))
    return;

  std::vector<cudnnBackendDescriptor_t> configs =
      heuristicConfigs(o, ctx.cudnn, ops);
  auto addPlan = [&](cudnnBackendDescriptor_t config, std::string label) {
    int64_t workspace = 0;
    cudnnBackendDescriptor_t plan =
        makePlan(o, ctx.cudnn, config, kMaxWorkspace, workspace);
    if (plan)
      plans_.push_back(
          {plan, static_cast<size_t>(workspace), std::move(label)});
    return plan != nullptr;
  };
  int added = 0;
  for (cudnnBackendDescriptor_t config : configs) {
    if (added >= kMaxPlans)
      break;
    cudnnBackendDescriptor_t engine = engineOf(o, config);
    if (!engine || !deterministic(engine))
      continue;
    std::string label = std::string(causal ? "cudnn causal" : "cudnn") +
                        " engine " + std::to_string(engineIndex(engine));
    if (!addPlan(config, label))
      continue;
    if (ctx.options.cudnnKnobs && added < kKnobSeeds)
      forEachKnobVariant(
          o, engine, config, kKnobVariantsPerSeed, kMaxKnobValues,
          [&](cudnnBackendDescriptor_t variant, const std::string &knob) {
            return addPlan(variant, label + " knob " + knob);
          });
    ++added;
  }
}

Status CudnnAttention::run(DeviceContext &ctx, size_t i, Binding &binding,
                           const void *q, const void *k, const void *v,
                           const void *bias, void *out) const {
  std::array<const void *, 6> pointers = {q, k, v, bias, out, ctx.workspace};
  if (!binding.pack || binding.plan != i || pointers != binding.packed) {
    if (binding.pack)
      cudnnBackendDestroyDescriptor(binding.pack);
    binding.pack = nullptr;
    std::vector<int64_t> ids = {kQ, kK, kV, kOut, kScale};
    std::vector<void *> data = {const_cast<void *>(q), const_cast<void *>(k),
                                const_cast<void *>(v), out, &scale_};
    if (causal_) {
      ids.push_back(kMinusInf);
      data.push_back(&minusInf_);
    }
    if (bias) {
      ids.push_back(kBias);
      data.push_back(const_cast<void *>(bias));
    }
    cudnnBackendDescriptor_t pack = nullptr;
    PARTC_RETURN_IF_ERROR(makeVariantPack(ids, data, ctx.workspace, pack));
    binding.pack = pack;
    binding.plan = i;
    binding.packed = pointers;
  }
  return cudnnStatus(
      cudnnBackendExecute(ctx.cudnn, plans_[i].plan, binding.pack),
      "cudnnBackendExecute (attention)");
}

} // namespace partc::runtime::cuda
