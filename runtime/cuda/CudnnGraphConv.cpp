//===- CudnnGraphConv.cpp - Convolutions through cuDNN's graph API --------===//
#include "runtime/cuda/CudnnGraphConv.h"
#include "runtime/cuda/CudnnBackend.h"
#include "runtime/cuda/LibraryStatus.h"

#include <algorithm>
#include <array>

namespace partc::runtime::cuda {

using namespace cudnnbe;

namespace {

/// Tensor ids in the variant pack; virtual intermediates come after.
enum : int64_t { kX = 1, kW, kY, kBias, kAddend, kFirstVirtual };

/// Heuristic candidates per graph worth timing; beyond the first few
/// cuDNN's ranking is rarely wrong by much.
constexpr int kPlansPerGraph = 8;
/// Plans needing more workspace than this are skipped: every candidate's
/// workspace is reserved before tuning picks one.
constexpr int64_t kMaxWorkspace = int64_t(256) << 20;
/// The heuristic's first configurations are also tried with each of their
/// knobs (split-K slices, tile shapes, CTA counts...) moved one at a time:
/// its ranking is tuned for large problems, and a small batch often leaves
/// most of the GPU idle under the tiling it picks.
constexpr int kKnobSeeds = 2;
constexpr int kKnobVariantsPerSeed = 24;
/// Knobs with more values than this are left as the heuristic set them.
constexpr int64_t kMaxKnobValues = 16;

/// Engines whose numerics partc does not accept: inputs converted to a
/// narrower type, nondeterminism, and TF32 tensor cores unless allowed.
bool acceptable(cudnnBackendDescriptor_t engine, bool tf32) {
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT>
      notes{};
  int64_t count = 0;
  if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                               CUDNN_TYPE_NUMERICAL_NOTE, notes.size(), &count,
                               notes.data()) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < count; ++i)
    if (notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
        notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION ||
        notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC ||
        (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && !tf32))
      return false;
  // Runtime-compiled engines can take seconds each to build at load time.
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT>
      behaviors{};
  if (cudnnBackendGetAttribute(
          engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
          behaviors.size(), &count, behaviors.data()) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < count; ++i)
    if (behaviors[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)
      return false;
  return true;
}

} // namespace

CudnnGraphConv::CudnnGraphConv()
    : owner_(std::make_unique<DescriptorOwner>()) {}

CudnnGraphConv::~CudnnGraphConv() {
  for (Plan &p : plans_)
    if (p.pack)
      cudnnBackendDestroyDescriptor(p.pack);
}

cudnnBackendDescriptor_t CudnnGraphConv::create(int type) {
  return owner_->create(static_cast<cudnnBackendDescriptorType_t>(type));
}

size_t CudnnGraphConv::workspaceBytes() const {
  size_t bytes = 0;
  for (const Plan &p : plans_)
    bytes = std::max(bytes, p.workspace);
  return bytes;
}

void CudnnGraphConv::init(DeviceContext &ctx, const ConvGeometry &geometry,
                          bool bias, bool addend, bool relu,
                          unsigned char element) {
  addPlans(ctx, geometry, bias, addend, relu, /*fused=*/false, element);
  if (bias || addend || relu)
    addPlans(ctx, geometry, bias, addend, relu, /*fused=*/true, element);
}

void CudnnGraphConv::addPlans(DeviceContext &ctx, const ConvGeometry &g,
                              bool bias, bool addend, bool relu, bool fused,
                              unsigned char element) {
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  // Tensors in memory have the operands' type; virtual ones (between the
  // convolution and its epilogue) stay f32.
  const cudnnDataType_t stored = element == FusedParams::BF16
                                     ? CUDNN_DATA_BFLOAT16
                                 : element == FusedParams::F16 ? CUDNN_DATA_HALF
                                                               : f32;
  bool sixteen = element != FusedParams::F32;
  int64_t nextVirtual = kFirstVirtual;
  auto tensor = [&](int64_t id, const std::vector<int64_t> &dims,
                    const std::vector<int64_t> &strides, bool isVirtual) {
    return makeTensor(*owner_, id, isVirtual ? f32 : stored, dims, strides,
                      isVirtual);
  };
  // The convolution's result is virtual when the epilogue follows it.
  cudnnBackendDescriptor_t x = tensor(kX, g.xDims, g.xStrides, false);
  cudnnBackendDescriptor_t w = tensor(kW, g.wDims, g.wStrides, false);
  cudnnBackendDescriptor_t convOut =
      tensor(fused ? nextVirtual++ : kY, g.yDims, g.yStrides, fused);
  if (!x || !w || !convOut)
    return;

  int64_t spatial = static_cast<int64_t>(g.pads.size());
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnBackendDescriptor_t conv = create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  if (!conv ||
      !set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1,
           &spatial) ||
      !set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
           &f32) ||
      !set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE,
           1, &mode) ||
      !set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, spatial,
           g.pads.data()) ||
      !set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64,
           spatial, g.pads.data()) ||
      !set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, spatial,
           g.dilations.data()) ||
      !set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64,
           spatial, g.strides.data()) ||
      !finalize(conv))
    return;
  float one = 1.f, zero = 0.f;
  cudnnBackendDescriptor_t convOp =
      create(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  if (!convOp ||
      !setDescriptor(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x) ||
      !setDescriptor(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w) ||
      !setDescriptor(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                     convOut) ||
      !setDescriptor(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                     conv) ||
      !set(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
           CUDNN_TYPE_FLOAT, 1, &one) ||
      !set(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
           CUDNN_TYPE_FLOAT, 1, &zero) ||
      !finalize(convOp))
    return;
  std::vector<cudnnBackendDescriptor_t> ops = {convOp};

  // The epilogue: each step reads the previous value and writes a virtual
  // tensor, the last one y.
  std::vector<cudnnPointwiseMode_t> steps;
  std::vector<int64_t> operandIds;
  if (fused) {
    if (bias) {
      steps.push_back(CUDNN_POINTWISE_ADD);
      operandIds.push_back(kBias);
    }
    if (addend) {
      steps.push_back(CUDNN_POINTWISE_ADD);
      operandIds.push_back(kAddend);
    }
    if (relu) {
      steps.push_back(CUDNN_POINTWISE_RELU_FWD);
      operandIds.push_back(0);
    }
  }
  // The bias is [1, K, 1, ...], broadcast over the others.
  std::vector<int64_t> biasDims(g.yDims.size(), 1),
      biasStrides(g.yDims.size(), g.yDims[1]);
  biasDims[1] = g.yDims[1];
  biasStrides[1] = 1;
  cudnnBackendDescriptor_t value = convOut;
  for (size_t s = 0; s < steps.size(); ++s) {
    bool last = s + 1 == steps.size();
    cudnnBackendDescriptor_t out =
        tensor(last ? kY : nextVirtual++, g.yDims, g.yStrides, !last);
    cudnnBackendDescriptor_t operand = nullptr;
    if (operandIds[s] == kBias)
      operand = tensor(kBias, biasDims, biasStrides, false);
    else if (operandIds[s] == kAddend)
      operand = tensor(kAddend, g.yDims, g.yStrides, false);
    if (!out || (operandIds[s] && !operand))
      return;
    cudnnBackendDescriptor_t op =
        makePointwise(*owner_, steps[s], value, operand, out);
    if (!op)
      return;
    ops.push_back(op);
    value = out;
  }

  std::vector<cudnnBackendDescriptor_t> configs =
      heuristicConfigs(*owner_, ctx.cudnn, ops);
  int64_t returned = static_cast<int64_t>(configs.size());
  int added = 0, seeds = 0;
  for (int64_t i = 0; i < returned && added < kPlansPerGraph; ++i) {
    cudnnBackendDescriptor_t engine = engineOf(*owner_, configs[i]);
    if (!engine || !acceptable(engine, ctx.options.tf32 || sixteen))
      continue;
    int64_t index = engineIndex(engine);
    std::string label = "engine " + std::to_string(index);
    if (!addPlan(ctx, configs[i], fused, label))
      continue;
    ++added;
    if (ctx.options.cudnnKnobs && seeds++ < kKnobSeeds)
      addKnobVariants(ctx, engine, configs[i], fused, label);
  }
}

bool CudnnGraphConv::addPlan(DeviceContext &ctx,
                             cudnnBackendDescriptor_t config, bool fused,
                             const std::string &label) {
  int64_t workspace = 0;
  cudnnBackendDescriptor_t plan =
      makePlan(*owner_, ctx.cudnn, config, kMaxWorkspace, workspace);
  if (!plan)
    return false;
  plans_.push_back({plan, fused, static_cast<size_t>(workspace), label});
  return true;
}

void CudnnGraphConv::addKnobVariants(DeviceContext &ctx,
                                     cudnnBackendDescriptor_t engine,
                                     cudnnBackendDescriptor_t config,
                                     bool fused, const std::string &label) {
  forEachKnobVariant(
      *owner_, engine, config, kKnobVariantsPerSeed, kMaxKnobValues,
      [&](cudnnBackendDescriptor_t variant, const std::string &knob) {
        return addPlan(ctx, variant, fused, label + " knob " + knob);
      });
}

Status CudnnGraphConv::run(DeviceContext &ctx, size_t i, const void *x,
                           const void *w, const void *bias, const void *z,
                           void *y) {
  Plan &p = plans_[i];
  if (!p.fused)
    bias = z = nullptr;
  std::array<const void *, 6> pointers = {x, w, y, bias, z, ctx.workspace};
  if (!p.pack || pointers != p.packed) {
    // A variant pack is host-side only; remade when an operand moves (a
    // direct transfer's buffer), it costs microseconds of host time.
    if (p.pack)
      cudnnBackendDestroyDescriptor(p.pack);
    p.pack = nullptr;
    std::vector<int64_t> ids = {kX, kW, kY};
    std::vector<void *> data = {const_cast<void *>(x), const_cast<void *>(w),
                                y};
    if (bias) {
      ids.push_back(kBias);
      data.push_back(const_cast<void *>(bias));
    }
    if (z) {
      ids.push_back(kAddend);
      data.push_back(const_cast<void *>(z));
    }
    cudnnBackendDescriptor_t pack = nullptr;
    PARTC_RETURN_IF_ERROR(makeVariantPack(ids, data, ctx.workspace, pack));
    p.pack = pack;
    p.packed = pointers;
  }
  return cudnnStatus(cudnnBackendExecute(ctx.cudnn, p.plan, p.pack),
                     "cudnnBackendExecute");
}

} // namespace partc::runtime::cuda
