//===- TunedTwins.h - One tuning choice for identical kernels ---*- C++ -*-===//
//
// One timing of a candidate is noisy (the clock moves under the power cap),
// so identical kernels tuned one by one chose differently: BERT-large's
// 4 x 384 attention took three implementations in 24 identical layers.
// Kernels of one device with the same name, attributes and types are
// twins; each group takes the candidate whose times, summed over the
// group, are least.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_TUNEDTWINS_H
#define PARTC_RUNTIME_CUDA_TUNEDTWINS_H

#include "runtime/cuda/CudaKernels.h"
#include "runtime/plan/Plan.h"

#include <memory>
#include <vector>

namespace partc::runtime::cuda {

/// Instructions of one device that run the same kernel on the same types
/// with the same attributes, with each one's tuning times per candidate.
struct TunedTwins {
  std::vector<size_t> members;
  std::vector<std::vector<float>> times;
};

/// Adds instruction `index` of `prog`, timed as `times` (one entry per
/// candidate, infinite where it failed or disagreed), to its group.
void addTunedTwin(std::vector<TunedTwins> &groups, const DeviceProgram &prog,
                  size_t index, const std::vector<float> &times);

/// Makes every member of a group of two or more adopt the candidate with
/// the least summed time among those every member ran and agreed on.
void chooseForTwins(const std::vector<TunedTwins> &groups,
                    std::vector<std::unique_ptr<GpuKernel>> &kernels);

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_TUNEDTWINS_H
