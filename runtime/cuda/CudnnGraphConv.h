//===- CudnnGraphConv.h - Convolutions through cuDNN's graph API -*- C++
//-*-===//
//
// The legacy cuDNN API offers eight convolution algorithms, each with knobs
// cuDNN picks; the graph (backend) API exposes the engine configurations
// behind them (tile sizes, split-K and the like), ranked by cuDNN's
// heuristics, and fuses a bias, residual add and ReLU into the convolution
// where an engine supports it. ConvKernel times these plans beside its
// other variants.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_CUDNNGRAPHCONV_H
#define PARTC_RUNTIME_CUDA_CUDNNGRAPHCONV_H

#include "runtime/cuda/CudaKernels.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

typedef void *cudnnBackendDescriptor_t;

namespace partc::runtime::cuda {

namespace cudnnbe {
class DescriptorOwner;
} // namespace cudnnbe

/// A convolution as cuDNN's descriptors take it: dimensions channels first
/// ([N, C, spatial...], filter [K, C / group, spatial...]) with the strides
/// of the layout in memory.
struct ConvGeometry {
  std::vector<int64_t> xDims, xStrides, wDims, wStrides, yDims, yStrides;
  std::vector<int64_t> pads, strides, dilations;
};

class CudnnGraphConv {
public:
  CudnnGraphConv();
  CudnnGraphConv(const CudnnGraphConv &) = delete;
  CudnnGraphConv &operator=(const CudnnGraphConv &) = delete;
  ~CudnnGraphConv();

  /// Builds the execution plans heuristics offer for the convolution alone
  /// and, when it has an epilogue, for the convolution with it. A graph or
  /// engine cuDNN rejects only leaves fewer plans.
  /// `element` is the operands' type in memory (FusedParams::F32, BF16 or
  /// F16); the convolution and its epilogue compute in f32.
  void init(DeviceContext &ctx, const ConvGeometry &geometry, bool bias,
            bool addend, bool relu, unsigned char element = FusedParams::F32);

  size_t size() const { return plans_.size(); }
  /// Whether plan `i` applies the bias, addend and ReLU itself.
  bool fusesEpilogue(size_t i) const { return plans_[i].fused; }
  size_t workspaceBytes() const;
  const std::string &label(size_t i) const { return plans_[i].label; }

  Status run(DeviceContext &ctx, size_t i, const void *x, const void *w,
             const void *bias, const void *z, void *y);

private:
  struct Plan {
    cudnnBackendDescriptor_t plan = nullptr;
    bool fused = false;
    size_t workspace = 0;
    /// The engine's global index and the knob moved, if any ("engine 12
    /// knob 17=4": knob type 17, split-K slices, set to 4).
    std::string label;
    /// The variant pack of the last call and the pointers it holds (x, w,
    /// y, bias, addend, workspace): reused while they stay the same.
    cudnnBackendDescriptor_t pack = nullptr;
    std::array<const void *, 6> packed{};
  };
  /// Builds one operation graph and appends the plans for it.
  void addPlans(DeviceContext &ctx, const ConvGeometry &geometry, bool bias,
                bool addend, bool relu, bool fused, unsigned char element);
  /// Appends the execution plan of one engine configuration; false if cuDNN
  /// rejects it or it needs too much workspace.
  bool addPlan(DeviceContext &ctx, cudnnBackendDescriptor_t config, bool fused,
               const std::string &label);
  /// Appends plans for `config` with one knob moved at a time.
  void addKnobVariants(DeviceContext &ctx, cudnnBackendDescriptor_t engine,
                       cudnnBackendDescriptor_t config, bool fused,
                       const std::string &label);
  cudnnBackendDescriptor_t create(int type);

  /// Every descriptor made, destroyed with this object (after the plans'
  /// variant packs).
  std::unique_ptr<cudnnbe::DescriptorOwner> owner_;
  std::vector<Plan> plans_;
};

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_CUDNNGRAPHCONV_H
