//===- CudnnGraphConv.cpp - Convolutions through cuDNN's graph API --------===//
#include "runtime/cuda/CudnnGraphConv.h"
#include "runtime/cuda/LibraryStatus.h"

#include <cudnn.h>

#include <algorithm>
#include <array>

namespace partc::runtime::cuda {

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

bool set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
         cudnnBackendAttributeType_t type, int64_t count, const void *values) {
  return cudnnBackendSetAttribute(d, name, type, count, values) ==
         CUDNN_STATUS_SUCCESS;
}

bool setDescriptor(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                   cudnnBackendDescriptor_t value) {
  return set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
}

bool finalize(cudnnBackendDescriptor_t d) {
  return cudnnBackendFinalize(d) == CUDNN_STATUS_SUCCESS;
}

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

CudnnGraphConv::~CudnnGraphConv() {
  for (Plan &p : plans_)
    if (p.pack)
      cudnnBackendDestroyDescriptor(p.pack);
  // Plans first, then what they were built from, newest first.
  for (auto it = owned_.rbegin(); it != owned_.rend(); ++it)
    cudnnBackendDestroyDescriptor(*it);
}

cudnnBackendDescriptor_t CudnnGraphConv::create(int type) {
  cudnnBackendDescriptor_t d = nullptr;
  if (cudnnBackendCreateDescriptor(
          static_cast<cudnnBackendDescriptorType_t>(type), &d) !=
      CUDNN_STATUS_SUCCESS)
    return nullptr;
  owned_.push_back(d);
  return d;
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
  const int64_t alignment = 16;
  int64_t nextVirtual = kFirstVirtual;
  auto tensor = [&](int64_t id, const std::vector<int64_t> &dims,
                    const std::vector<int64_t> &strides,
                    bool isVirtual) -> cudnnBackendDescriptor_t {
    cudnnBackendDescriptor_t t = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t rank = static_cast<int64_t>(dims.size());
    const cudnnDataType_t &type = isVirtual ? f32 : stored;
    if (!t ||
        !set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type) ||
        !set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, rank,
             dims.data()) ||
        !set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, rank,
             strides.data()) ||
        !set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &id) ||
        !set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1,
             &alignment) ||
        !set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1,
             &isVirtual) ||
        !finalize(t))
      return nullptr;
    return t;
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
    cudnnBackendDescriptor_t pointwise =
        create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    cudnnBackendDescriptor_t op =
        create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    if (!out || (operandIds[s] && !operand) || !pointwise || !op ||
        !set(pointwise, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1,
             &steps[s]) ||
        !set(pointwise, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1,
             &f32) ||
        !finalize(pointwise) ||
        !setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                       pointwise) ||
        !setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, value) ||
        (operand &&
         !setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, operand)) ||
        !setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, out) ||
        !finalize(op))
      return;
    ops.push_back(op);
    value = out;
  }

  cudnnBackendDescriptor_t graph =
      create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  cudnnHandle_t handle = ctx.cudnn;
  if (!graph ||
      !set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
           static_cast<int64_t>(ops.size()), ops.data()) ||
      !set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
           &handle) ||
      !finalize(graph))
    return;
  cudnnBackendDescriptor_t heuristics =
      create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  cudnnBackendHeurMode_t heurMode = CUDNN_HEUR_MODE_A;
  if (!heuristics ||
      !setDescriptor(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                     graph) ||
      !set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
           &heurMode) ||
      !finalize(heuristics))
    return;
  int64_t available = 0;
  if (cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available,
                               nullptr) != CUDNN_STATUS_SUCCESS ||
      available <= 0)
    return;
  std::vector<cudnnBackendDescriptor_t> configs;
  for (int64_t i = 0; i < available; ++i) {
    cudnnBackendDescriptor_t c = create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    if (!c)
      return;
    configs.push_back(c);
  }
  int64_t returned = 0;
  if (cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, available,
                               &returned,
                               configs.data()) != CUDNN_STATUS_SUCCESS)
    return;
  int added = 0, seeds = 0;
  for (int64_t i = 0; i < returned && added < kPlansPerGraph; ++i) {
    cudnnBackendDescriptor_t engine = create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t count = 0;
    if (!engine ||
        cudnnBackendGetAttribute(configs[i], CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                 &engine) != CUDNN_STATUS_SUCCESS ||
        !acceptable(engine, ctx.options.tf32 || sixteen))
      continue;
    int64_t index = -1;
    cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                             CUDNN_TYPE_INT64, 1, &count, &index);
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
  cudnnHandle_t handle = ctx.cudnn;
  cudnnBackendDescriptor_t plan =
      create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  int64_t workspace = 0, count = 0;
  if (!plan ||
      !setDescriptor(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config) ||
      !set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
           &handle) ||
      !finalize(plan) ||
      cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                               CUDNN_TYPE_INT64, 1, &count,
                               &workspace) != CUDNN_STATUS_SUCCESS ||
      workspace < 0 || workspace > kMaxWorkspace)
    return false;
  plans_.push_back({plan, fused, static_cast<size_t>(workspace), label});
  return true;
}

void CudnnGraphConv::addKnobVariants(DeviceContext &ctx,
                                     cudnnBackendDescriptor_t engine,
                                     cudnnBackendDescriptor_t config,
                                     bool fused, const std::string &label) {
  // The engine's knobs and the values the heuristic chose for them.
  std::vector<cudnnBackendDescriptor_t> infos, choices;
  for (int k = 0; k < CUDNN_KNOB_TYPE_COUNTS; ++k) {
    cudnnBackendDescriptor_t info = create(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR);
    cudnnBackendDescriptor_t choice =
        create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    if (!info || !choice)
      return;
    infos.push_back(info);
    choices.push_back(choice);
  }
  int64_t infoCount = 0, choiceCount = 0, n = 0;
  if (cudnnBackendGetAttribute(
          engine, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR,
          infos.size(), &infoCount, infos.data()) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, choices.size(),
                               &choiceCount,
                               choices.data()) != CUDNN_STATUS_SUCCESS)
    return;
  std::vector<std::pair<cudnnBackendKnobType_t, int64_t>> chosen;
  for (int64_t c = 0; c < choiceCount; ++c) {
    cudnnBackendKnobType_t type;
    int64_t value = 0;
    if (cudnnBackendGetAttribute(choices[c], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                 CUDNN_TYPE_KNOB_TYPE, 1, &n,
                                 &type) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(choices[c], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                 CUDNN_TYPE_INT64, 1, &n,
                                 &value) != CUDNN_STATUS_SUCCESS)
      return;
    chosen.push_back({type, value});
  }
  // One knob at a time over its whole range, where the range is short: the
  // heuristic's other choices stay.
  int variants = 0;
  for (int64_t k = 0; k < infoCount && variants < kKnobVariantsPerSeed; ++k) {
    cudnnBackendKnobType_t type;
    int64_t lo = 0, hi = 0, stride = 0;
    if (cudnnBackendGetAttribute(infos[k], CUDNN_ATTR_KNOB_INFO_TYPE,
                                 CUDNN_TYPE_KNOB_TYPE, 1, &n,
                                 &type) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(infos[k], CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE,
                                 CUDNN_TYPE_INT64, 1, &n,
                                 &lo) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(infos[k], CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE,
                                 CUDNN_TYPE_INT64, 1, &n,
                                 &hi) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(infos[k], CUDNN_ATTR_KNOB_INFO_STRIDE,
                                 CUDNN_TYPE_INT64, 1, &n,
                                 &stride) != CUDNN_STATUS_SUCCESS ||
        stride <= 0 || hi < lo || (hi - lo) / stride >= kMaxKnobValues)
      continue;
    auto current = std::find_if(chosen.begin(), chosen.end(),
                                [&](const auto &c) { return c.first == type; });
    for (int64_t value = lo; value <= hi && variants < kKnobVariantsPerSeed;
         value += stride) {
      if (current != chosen.end() && current->second == value)
        continue;
      std::vector<std::pair<cudnnBackendKnobType_t, int64_t>> knobs = chosen;
      if (current != chosen.end())
        knobs[current - chosen.begin()].second = value;
      else
        knobs.push_back({type, value});
      std::vector<cudnnBackendDescriptor_t> made;
      for (const auto &[knob, knobValue] : knobs) {
        cudnnBackendDescriptor_t c =
            create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
        if (!c ||
            !set(c, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1,
                 &knob) ||
            !set(c, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1,
                 &knobValue) ||
            !finalize(c))
          return;
        made.push_back(c);
      }
      cudnnBackendDescriptor_t variant =
          create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      if (!variant ||
          !setDescriptor(variant, CUDNN_ATTR_ENGINECFG_ENGINE, engine))
        return;
      // cuDNN refuses knob values this shape or engine cannot take.
      if (!set(variant, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
               CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(made.size()),
               made.data()) ||
          !finalize(variant) ||
          !addPlan(ctx, variant, fused,
                   label + " knob " + std::to_string(type) + "=" +
                       std::to_string(value)))
        continue;
      ++variants;
    }
  }
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
    void *workspace = ctx.workspace;
    cudnnBackendDescriptor_t pack = nullptr;
    PARTC_RETURN_IF_ERROR(
        cudnnStatus(cudnnBackendCreateDescriptor(
                        CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack),
                    "cuDNN variant pack"));
    if (!set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
             static_cast<int64_t>(ids.size()), ids.data()) ||
        !set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
             static_cast<int64_t>(data.size()), data.data()) ||
        !set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
             &workspace) ||
        !finalize(pack)) {
      cudnnBackendDestroyDescriptor(pack);
      return Status::error("cuDNN variant pack rejected");
    }
    p.pack = pack;
    p.packed = pointers;
  }
  return cudnnStatus(cudnnBackendExecute(ctx.cudnn, p.plan, p.pack),
                     "cudnnBackendExecute");
}

} // namespace partc::runtime::cuda
