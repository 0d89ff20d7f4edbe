//===- CudnnBackend.h - Helpers for cuDNN's backend API ---------*- C++ -*-===//
//
// What the users of cuDNN's graph (backend) API share: descriptors owned by
// one object and destroyed with it, attribute setters that report success,
// and the path from a list of operations to the execution plans cuDNN's
// heuristic ranks for them. Included only by the files that build graphs.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_CUDNNBACKEND_H
#define PARTC_RUNTIME_CUDA_CUDNNBACKEND_H

#include "runtime/Support.h"

#include <cudnn.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace partc::runtime::cuda::cudnnbe {

inline bool set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                cudnnBackendAttributeType_t type, int64_t count,
                const void *values) {
  return cudnnBackendSetAttribute(d, name, type, count, values) ==
         CUDNN_STATUS_SUCCESS;
}

inline bool setDescriptor(cudnnBackendDescriptor_t d,
                          cudnnBackendAttributeName_t name,
                          cudnnBackendDescriptor_t value) {
  return set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
}

inline bool finalize(cudnnBackendDescriptor_t d) {
  return cudnnBackendFinalize(d) == CUDNN_STATUS_SUCCESS;
}

/// Every descriptor made through it, destroyed with it, newest first:
/// plans refer to the graphs and tensors they were made from.
class DescriptorOwner {
public:
  DescriptorOwner() = default;
  DescriptorOwner(const DescriptorOwner &) = delete;
  DescriptorOwner &operator=(const DescriptorOwner &) = delete;
  ~DescriptorOwner();
  /// A new descriptor of `type`, or null if cuDNN refuses it.
  cudnnBackendDescriptor_t create(cudnnBackendDescriptorType_t type);

private:
  std::vector<cudnnBackendDescriptor_t> owned_;
};

/// A tensor descriptor (finalized), or null. `byValue` tensors are scalars
/// read from host memory at each execution.
cudnnBackendDescriptor_t makeTensor(DescriptorOwner &owner, int64_t id,
                                    cudnnDataType_t type,
                                    const std::vector<int64_t> &dims,
                                    const std::vector<int64_t> &strides,
                                    bool isVirtual, bool byValue = false);

/// A pointwise operation computed in f32, or null: y = mode(x), mode(x, b),
/// or for a select y = t ? x : b; `axis` is GEN_INDEX's.
cudnnBackendDescriptor_t
makePointwise(DescriptorOwner &owner, cudnnPointwiseMode_t mode,
              cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
              cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t t = nullptr,
              int64_t axis = -1);

/// The operation graph of `ops` on `handle` and the engine configurations
/// cuDNN's heuristic (mode A) ranks for it, best first; empty if it takes
/// none of them.
std::vector<cudnnBackendDescriptor_t>
heuristicConfigs(DescriptorOwner &owner, cudnnHandle_t handle,
                 const std::vector<cudnnBackendDescriptor_t> &ops);

/// The engine of `config` (owned by `owner`), or null.
cudnnBackendDescriptor_t engineOf(DescriptorOwner &owner,
                                  cudnnBackendDescriptor_t config);
/// The engine's global index, -1 if cuDNN does not say.
int64_t engineIndex(cudnnBackendDescriptor_t engine);

/// The execution plan of `config`, or null if cuDNN rejects it or it needs
/// more than `maxWorkspace` bytes of workspace (set in `workspace`).
cudnnBackendDescriptor_t makePlan(DescriptorOwner &owner, cudnnHandle_t handle,
                                  cudnnBackendDescriptor_t config,
                                  int64_t maxWorkspace, int64_t &workspace);

/// Calls `add(variant, "type=value")` for the configurations of `engine`
/// that differ from `config` in one knob (split-K slices, tile shape, CTA
/// count...), over knobs of at most `maxValues` values, until `add` has
/// accepted `maxVariants` of them: the heuristic's ranking is tuned for
/// large problems, and a small one often leaves most of the GPU idle under
/// the tiling it picks. cuDNN refuses values this shape cannot take.
void forEachKnobVariant(DescriptorOwner &owner, cudnnBackendDescriptor_t engine,
                        cudnnBackendDescriptor_t config, int maxVariants,
                        int64_t maxValues,
                        const std::function<bool(cudnnBackendDescriptor_t,
                                                 const std::string &)> &add);

/// A variant pack binding tensor `ids` to `data` and the workspace; the
/// caller destroys it.
Status makeVariantPack(const std::vector<int64_t> &ids,
                       const std::vector<void *> &data, void *workspace,
                       cudnnBackendDescriptor_t &pack);

} // namespace partc::runtime::cuda::cudnnbe

#endif // PARTC_RUNTIME_CUDA_CUDNNBACKEND_H
