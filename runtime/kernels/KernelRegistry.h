//===- KernelRegistry.h - Internal registration of CPU kernels ------------===//
#ifndef PARTC_RUNTIME_KERNELS_KERNELREGISTRY_H
#define PARTC_RUNTIME_KERNELS_KERNELREGISTRY_H

#include "runtime/kernels/Kernel.h"

#include <functional>
#include <map>

namespace partc::runtime {

struct KernelArgs {
  const std::string &name;
  const AttrMap &attrs;
  const std::vector<TensorType> &inputs;
  const std::vector<TensorType> &outputs;
};

using KernelFactory =
    std::function<Status(const KernelArgs &, std::unique_ptr<Kernel> &)>;
using KernelTable = std::map<std::string, KernelFactory>;

// Each kernel family adds its factories to the table.
void registerElementwiseKernels(KernelTable &table);
void registerLinearAlgebraKernels(KernelTable &table);
void registerNnKernels(KernelTable &table);
void registerDataMovementKernels(KernelTable &table);

/// Fails unless the kernel has `nin` inputs (or between min and max) and
/// `nout` outputs.
Status checkArity(const KernelArgs &args, size_t minIn, size_t maxIn,
                  size_t nout);

/// Strides to read `in` as if it were broadcast to `out` (0 on broadcast
/// dims), with one entry per dimension of `out`.
std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out);

std::vector<int64_t> contiguousStrides(const Shape &shape);

bool isFloatType(DType t);

/// Reads the optional fused `activation` parameter ("" or "relu").
Status fusedRelu(const AttrMap &attrs, bool &relu);

} // namespace partc::runtime

#endif // PARTC_RUNTIME_KERNELS_KERNELREGISTRY_H
