//===- CopyLayout.h - Simplifying strided gather-copies --------*- C++ -*-===//
//
// Transposes, slices and broadcasts are gather-copies into a contiguous
// output: out[i] = in[base + sum over d of coord_d(i) * stride[d]]. Two
// rewrites make them cheaper on a GPU without changing what is copied:
// dimensions the input walks contiguously merge (fewer divisions per
// element), and where the innermost run is contiguous and every offset is
// a multiple of a wider element, the copy moves 8 or 16 bytes at a time.
// Host code only, so that the rewrites are unit-tested without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_COPYLAYOUT_H
#define PARTC_RUNTIME_KERNELS_COPYLAYOUT_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace partc::runtime {

struct CopyLayout {
  /// Output shape (row-major, contiguous) and the input stride of each of
  /// its dimensions, in elements.
  std::vector<int64_t> shape, stride;
  int64_t base = 0;
  size_t elementBytes = 4;
};

/// Folds dimension d + 1 into d where every operand (one stride per
/// dimension each) steps over d exactly as over the whole of d + 1 (walks
/// both contiguously, or is broadcast along both), and drops extents of 1.
/// Broadcasting element-wise kernels index a [B, H, L, L] output with a
/// [B, 1, L, L] mask as [B, H, L * L].
inline void mergeDimensions(std::vector<int64_t> &shape,
                            std::vector<std::vector<int64_t>> &strides) {
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    bool innerUnit = shape[d + 1] == 1;
    bool mergeable = true;
    for (size_t k = 0; k < strides.size() && !innerUnit && shape[d] != 1; ++k)
      mergeable =
          mergeable && strides[k][d] == strides[k][d + 1] * shape[d + 1];
    if (!mergeable)
      continue;
    shape[d] *= shape[d + 1];
    shape.erase(shape.begin() + d + 1);
    for (std::vector<int64_t> &s : strides) {
      if (!innerUnit)
        s[d] = s[d + 1];
      s.erase(s.begin() + d + 1);
    }
  }
}

/// mergeDimensions for the copy's one input.
inline CopyLayout mergeContiguous(CopyLayout l) {
  std::vector<std::vector<int64_t>> strides = {std::move(l.stride)};
  mergeDimensions(l.shape, strides);
  l.stride = std::move(strides[0]);
  return l;
}

/// The same copy in elements of `bytes` (a multiple of elementBytes), if
/// the innermost dimension is contiguous and every offset lands on such an
/// element.
inline std::optional<CopyLayout> widenElements(const CopyLayout &l,
                                               size_t bytes) {
  if (l.shape.empty() || bytes <= l.elementBytes || bytes % l.elementBytes != 0)
    return std::nullopt;
  int64_t ratio = static_cast<int64_t>(bytes / l.elementBytes);
  size_t last = l.shape.size() - 1;
  if (l.stride[last] != 1 || l.shape[last] % ratio != 0 || l.base % ratio != 0)
    return std::nullopt;
  for (size_t d = 0; d < last; ++d)
    if (l.stride[d] % ratio != 0)
      return std::nullopt;
  CopyLayout wide = l;
  wide.shape[last] /= ratio;
  for (size_t d = 0; d < last; ++d)
    wide.stride[d] /= ratio;
  wide.base /= ratio;
  wide.elementBytes = bytes;
  return wide;
}

} // namespace partc::runtime

#endif // PARTC_RUNTIME_KERNELS_COPYLAYOUT_H
