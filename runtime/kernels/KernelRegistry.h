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
void registerTrainingKernels(KernelTable &table);
void registerBackwardKernels(KernelTable &table);
void registerAxisKernels(KernelTable &table);

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

/// What a product or a convolution applies to its result in the pass that
/// writes it.
enum class FusedActivation { None, Relu, GeluTanh, Silu };
/// Reads a product's optional `activation`: "", "relu" or "gelu_tanh"
/// (Gelu's tanh form, which cuBLASLt's epilogue computes).
Status fusedActivation(const AttrMap &attrs, FusedActivation &activation);
/// Reads a convolution's optional `activation`: "", "relu" or "silu".
Status fusedConvActivation(const AttrMap &attrs, FusedActivation &activation);

/// Spatial geometry of convolution and pooling, always as 3-D (D, H, W): 1-D
/// and 2-D problems get leading unit dimensions so one loop nest serves all.
struct Window {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, padBegin[3] = {0, 0, 0}, padEnd[3] = {0, 0, 0},
          dilation[3] = {1, 1, 1};

  int64_t inSize() const { return in[0] * in[1] * in[2]; }
  int64_t outSize() const { return out[0] * out[1] * out[2]; }
  int64_t kernelSize() const { return kernel[0] * kernel[1] * kernel[2]; }
};

/// Registers `factory` (a channels-first kernel) under `name`, and its
/// channels-last form for an op with the `channels_last` attribute: the
/// operands flagged in `images` and the first result are [N, spatial...,
/// C] and are moved to and from [N, C, spatial...] around the kernel.
void addWithChannelsLast(KernelTable &table, const std::string &name,
                         std::vector<bool> images, KernelFactory factory);

/// Reads the window attributes of an op over `spatial` dims (1..3) of
/// channels-first shapes.
Status makeWindow(const AttrMap &attrs, const Shape &inShape,
                  const Shape &outShape, const std::vector<int64_t> &kernel,
                  Window &w);

} // namespace partc::runtime

#endif // PARTC_RUNTIME_KERNELS_KERNELREGISTRY_H
