//===- IndexTuples.h - GatherND and ScatterND geometry --------------------===//
//
// GatherND and ScatterND address slices of `data` with tuples of k indices
// (the last dimension of `indices`). The CPU and GPU kernels share this
// description of where each tuple's slice lies.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_INDEXTUPLES_H
#define PARTC_RUNTIME_KERNELS_INDEXTUPLES_H

#include "runtime/Support.h"

#include <cstdint>

namespace partc::runtime {

struct IndexTuples {
  static constexpr int kMaxTuple = 8;
  /// Batches shared by data and indices (GatherND's batch_dims), tuples per
  /// batch, and the elements of one addressed slice.
  int64_t batches = 1, tuplesPerBatch = 0, sliceElements = 1;
  /// Elements of data per batch.
  int64_t batchElements = 0;
  int k = 0;
  /// Extent of each addressed dimension, and its stride in elements.
  int64_t extent[kMaxTuple] = {}, stride[kMaxTuple] = {};

  /// Element offset (within one batch) of the slice a tuple addresses, or -1
  /// if an index is out of range (negative indices count from the end).
  template <typename Index> int64_t offsetOf(const Index *tuple) const {
    int64_t offset = 0;
    for (int d = 0; d < k; ++d) {
      int64_t i = static_cast<int64_t>(tuple[d]);
      if (i < 0)
        i += extent[d];
      if (i < 0 || i >= extent[d])
        return -1;
      offset += i * stride[d];
    }
    return offset;
  }
};

/// How ScatterND combines an update with the element it lands on; the GPU
/// kernel takes the same codes.
enum class ScatterReduction : int { None, Add, Mul, Max, Min };

/// The reduction named by ScatterND's attribute, or false for another name.
inline bool parseScatterReduction(const std::string &name,
                                  ScatterReduction &out) {
  const char *const names[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; ++i)
    if (name == names[i]) {
      out = static_cast<ScatterReduction>(i);
      return true;
    }
  return false;
}

/// Describes tuples of `indices` into `data` after `batchDims` shared leading
/// dimensions; fails on shapes GatherND and ScatterND do not allow.
inline Status makeIndexTuples(const Shape &data, const Shape &indices,
                              int64_t batchDims, IndexTuples &t) {
  if (indices.empty() || batchDims < 0 ||
      static_cast<int64_t>(indices.size()) < batchDims + 1)
    return Status::error("indices " + shapeToString(indices) +
                         " need a last dimension for the index tuples");
  int64_t k = indices.back();
  if (k < 1 || k > IndexTuples::kMaxTuple ||
      batchDims + k > static_cast<int64_t>(data.size()))
    return Status::error("index tuples of length " + std::to_string(k) +
                         " do not fit data " + shapeToString(data));
  t = IndexTuples();
  t.k = static_cast<int>(k);
  for (int64_t d = 0; d < batchDims; ++d) {
    if (indices[d] != data[d])
      return Status::error("data " + shapeToString(data) + " and indices " +
                           shapeToString(indices) +
                           " differ in a batch dimension");
    t.batches *= data[d];
  }
  t.tuplesPerBatch = 1;
  for (size_t d = batchDims; d + 1 < indices.size(); ++d)
    t.tuplesPerBatch *= indices[d];
  for (size_t d = batchDims + k; d < data.size(); ++d)
    t.sliceElements *= data[d];
  int64_t stride = t.sliceElements;
  for (int64_t d = k - 1; d >= 0; --d) {
    t.extent[d] = data[batchDims + d];
    t.stride[d] = stride;
    stride *= t.extent[d];
  }
  t.batchElements = stride;
  return Status();
}

} // namespace partc::runtime

#endif // PARTC_RUNTIME_KERNELS_INDEXTUPLES_H
