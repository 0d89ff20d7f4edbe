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

/// Folds dimension d + 1 into d where the input steps over d exactly as
/// over the whole of d + 1, and drops extents of 1.
inline CopyLayout mergeContiguous(CopyLayout l) {
  for (int d = static_cast<int>(l.shape.size()) - 2; d >= 0; --d) {
    int64_t merged;
    if (l.shape[d + 1] == 1)
      merged = l.stride[d];
    else if (l.shape[d] == 1 || l.stride[d] == l.stride[d + 1] * l.shape[d + 1])
      merged = l.stride[d + 1];
    else
      continue;
    l.shape[d] *= l.shape[d + 1];
    l.stride[d] = merged;
    l.shape.erase(l.shape.begin() + d + 1);
    l.stride.erase(l.stride.begin() + d + 1);
  }
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
