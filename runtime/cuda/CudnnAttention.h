//===- CudnnAttention.h - Fused attention through cuDNN ---------*- C++ -*-===//
//
// graph.attention as cuDNN's scaled-dot-product graph: q k^T, the scale,
// an additive bias, softmax and the product with v, which cuDNN's fused
// flash-attention engines run without storing the scores (16-bit operands,
// f32 statistics). The attention kernel times these plans beside its own
// (Attention.cu) and keeps the faster; a shape cuDNN does not take only
// leaves no plans.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_CUDNNATTENTION_H
#define PARTC_RUNTIME_CUDA_CUDNNATTENTION_H

#include "runtime/cuda/CudaKernels.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

typedef void *cudnnBackendDescriptor_t;

namespace partc::runtime::cuda {

namespace cudnnbe {
class DescriptorOwner;
} // namespace cudnnbe

/// Attention as cuDNN takes it: [batch, heads, rows, columns] views with
/// element strides; k is given transposed ([.., head size, keys]) as the
/// first product reads it. Extent-1 dimensions of k, v and the bias are
/// broadcast (grouped-query attention, masks shared by heads or queries).
struct AttentionGeometry {
  std::array<int64_t, 4> qDims{}, qStrides{}, kDims{}, kStrides{}, vDims{},
      vStrides{}, outDims{}, outStrides{}, biasDims{}, biasStrides{};
  bool bias = false;
  /// The bias is -inf wherever a key's index exceeds its query's
  /// (graph.attention's `causal`): the graph then says so with cuDNN's
  /// causal mask, whose engines skip those blocks.
  bool causal = false;
  float scale = 1;
  /// FusedParams::BF16 or F16.
  unsigned char element = 0;
};

class CudnnAttention {
public:
  CudnnAttention();
  CudnnAttention(const CudnnAttention &) = delete;
  CudnnAttention &operator=(const CudnnAttention &) = delete;
  ~CudnnAttention();

  /// Builds the execution plans cuDNN's heuristic offers for the graph;
  /// a causal graph cuDNN does not take is built again without the causal
  /// mask (the bias alone gives the same result).
  void init(DeviceContext &ctx, const AttentionGeometry &geometry);

  size_t size() const { return plans_.size(); }
  size_t workspaceBytes() const;
  const std::string &label(size_t i) const { return plans_[i].label; }

  /// A caller's variant pack: the plan and pointers (q, k, v, bias, out,
  /// workspace) of its last call, reused while they stay the same. Plans
  /// are shared by kernels of the same shape; packs are not.
  class Binding {
  public:
    Binding() = default;
    Binding(const Binding &) = delete;
    Binding &operator=(const Binding &) = delete;
    ~Binding();

  private:
    friend class CudnnAttention;
    cudnnBackendDescriptor_t pack = nullptr;
    size_t plan = 0;
    std::array<const void *, 6> packed{};
  };

  Status run(DeviceContext &ctx, size_t i, Binding &binding, const void *q,
             const void *k, const void *v, const void *bias, void *out) const;

  /// The plans for `geometry` on this device, built once per process and
  /// shared while some kernel holds them: a transformer's layers all have
  /// the same shape, and building (a runtime-compiled engine) is slow.
  static std::shared_ptr<const CudnnAttention>
  shared(DeviceContext &ctx, const AttentionGeometry &geometry);

private:
  struct Plan {
    cudnnBackendDescriptor_t plan = nullptr;
    size_t workspace = 0;
    std::string label;
  };
  void build(DeviceContext &ctx, const AttentionGeometry &geometry,
             bool causal);

  std::unique_ptr<cudnnbe::DescriptorOwner> owner_;
  std::vector<Plan> plans_;
  /// Whether the plans' graph has the causal mask, and the value it fills.
  bool causal_ = false;
  mutable float minusInf_ = -INFINITY;
  /// The scale, read by cuDNN from host memory at each execution (and
  /// baked into a captured graph).
  mutable float scale_ = 1;
};

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_CUDNNATTENTION_H
