//===- CudnnBackend.cpp - Helpers for cuDNN's backend API -----------------===//
#include "runtime/cuda/CudnnBackend.h"
#include "runtime/cuda/LibraryStatus.h"

#include <algorithm>

namespace partc::runtime::cuda::cudnnbe {

DescriptorOwner::~DescriptorOwner() {
  for (auto it = owned_.rbegin(); it != owned_.rend(); ++it)
    cudnnBackendDestroyDescriptor(*it);
}

cudnnBackendDescriptor_t
DescriptorOwner::create(cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d = nullptr;
  if (cudnnBackendCreateDescriptor(type, &d) != CUDNN_STATUS_SUCCESS)
    return nullptr;
  owned_.push_back(d);
  return d;
}

cudnnBackendDescriptor_t makeTensor(DescriptorOwner &owner, int64_t id,
                                    cudnnDataType_t type,
                                    const std::vector<int64_t> &dims,
                                    const std::vector<int64_t> &strides,
                                    bool isVirtual, bool byValue) {
  // 16 bytes: what tensor-core engines need; partc's buffers are aligned
  // further.
  const int64_t alignment = 16;
  int64_t rank = static_cast<int64_t>(dims.size());
  cudnnBackendDescriptor_t t = owner.create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
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
      (byValue && !set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1,
                       &byValue)) ||
      !finalize(t))
    return nullptr;
  return t;
}

cudnnBackendDescriptor_t
makePointwise(DescriptorOwner &owner, cudnnPointwiseMode_t mode,
              cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
              cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t t,
              int64_t axis) {
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t pointwise =
      owner.create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  cudnnBackendDescriptor_t op =
      owner.create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  if (!pointwise || !op ||
      !set(pointwise, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1,
           &mode) ||
      !set(pointwise, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1,
           &f32) ||
      (axis >= 0 && !set(pointwise, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64,
                         1, &axis)) ||
      !finalize(pointwise) ||
      !setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                     pointwise) ||
      !setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x) ||
      (b && !setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b)) ||
      (t && !setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t)) ||
      !setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y) ||
      !finalize(op))
    return nullptr;
  return op;
}

std::vector<cudnnBackendDescriptor_t>
heuristicConfigs(DescriptorOwner &owner, cudnnHandle_t handle,
                 const std::vector<cudnnBackendDescriptor_t> &ops) {
  cudnnBackendDescriptor_t graph =
      owner.create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  if (!graph ||
      !set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
           static_cast<int64_t>(ops.size()), ops.data()) ||
      !set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
           &handle) ||
      !finalize(graph))
    return {};
  cudnnBackendDescriptor_t heuristics =
      owner.create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  cudnnBackendHeurMode_t heurMode = CUDNN_HEUR_MODE_A;
  if (!heuristics ||
      !setDescriptor(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                     graph) ||
      !set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
           &heurMode) ||
      !finalize(heuristics))
    return {};
  int64_t available = 0;
  if (cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available,
                               nullptr) != CUDNN_STATUS_SUCCESS ||
      available <= 0)
    return {};
  std::vector<cudnnBackendDescriptor_t> configs;
  for (int64_t i = 0; i < available; ++i) {
    cudnnBackendDescriptor_t c =
        owner.create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    if (!c)
      return {};
    configs.push_back(c);
  }
  int64_t returned = 0;
  if (cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, available,
                               &returned,
                               configs.data()) != CUDNN_STATUS_SUCCESS)
    return {};
  configs.resize(static_cast<size_t>(returned));
  return configs;
}

cudnnBackendDescriptor_t engineOf(DescriptorOwner &owner,
                                  cudnnBackendDescriptor_t config) {
  cudnnBackendDescriptor_t engine =
      owner.create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t count = 0;
  if (!engine ||
      cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                               &engine) != CUDNN_STATUS_SUCCESS)
    return nullptr;
  return engine;
}

int64_t engineIndex(cudnnBackendDescriptor_t engine) {
  int64_t index = -1, count = 0;
  cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                           CUDNN_TYPE_INT64, 1, &count, &index);
  return index;
}

cudnnBackendDescriptor_t makePlan(DescriptorOwner &owner, cudnnHandle_t handle,
                                  cudnnBackendDescriptor_t config,
                                  int64_t maxWorkspace, int64_t &workspace) {
  cudnnBackendDescriptor_t plan =
      owner.create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  int64_t count = 0;
  workspace = 0;
  if (!plan ||
      !setDescriptor(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config) ||
      !set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
           &handle) ||
      !finalize(plan) ||
      cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                               CUDNN_TYPE_INT64, 1, &count,
                               &workspace) != CUDNN_STATUS_SUCCESS ||
      workspace < 0 || workspace > maxWorkspace)
    return nullptr;
  return plan;
}

Status makeVariantPack(const std::vector<int64_t> &ids,
                       const std::vector<void *> &data, void *workspace,
                       cudnnBackendDescriptor_t &pack) {
  pack = nullptr;
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
    pack = nullptr;
    return Status::error("cuDNN variant pack rejected");
  }
  return Status();
}

void forEachKnobVariant(DescriptorOwner &owner, cudnnBackendDescriptor_t engine,
                        cudnnBackendDescriptor_t config, int maxVariants,
                        int64_t maxValues,
                        const std::function<bool(cudnnBackendDescriptor_t,
                                                 const std::string &)> &add) {
  // The engine's knobs and the values the heuristic chose for them.
  std::vector<cudnnBackendDescriptor_t> infos, choices;
  for (int k = 0; k < CUDNN_KNOB_TYPE_COUNTS; ++k) {
    cudnnBackendDescriptor_t info =
        owner.create(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR);
    cudnnBackendDescriptor_t choice =
        owner.create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
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
  for (int64_t k = 0; k < infoCount && variants < maxVariants; ++k) {
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
        stride <= 0 || hi < lo || (hi - lo) / stride >= maxValues)
      continue;
    auto current = std::find_if(chosen.begin(), chosen.end(),
                                [&](const auto &c) { return c.first == type; });
    for (int64_t value = lo; value <= hi && variants < maxVariants;
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
            owner.create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
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
          owner.create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      if (!variant ||
          !setDescriptor(variant, CUDNN_ATTR_ENGINECFG_ENGINE, engine))
        return;
      // cuDNN refuses knob values this shape or engine cannot take.
      if (!set(variant, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
               CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(made.size()),
               made.data()) ||
          !finalize(variant) ||
          !add(variant, std::to_string(type) + "=" + std::to_string(value)))
        continue;
      ++variants;
    }
  }
}

} // namespace partc::runtime::cuda::cudnnbe
