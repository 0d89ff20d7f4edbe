//===- Dataset.h - Training data walked batch by batch ----------*- C++ -*-===//
//
// partc-run --data DIR: one tensor file per plan input, named after it
// (NAME.npy, or NAME.pb), whose leading dimension holds a whole number of
// the plan's batches. Each epoch walks the samples in order or, shuffled, in
// a permutation drawn from the seed and the epoch, so that a run is
// reproducible and a resumed run can take up the same order.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_IO_DATASET_H
#define PARTC_RUNTIME_IO_DATASET_H

#include "runtime/io/TensorFile.h"
#include "runtime/plan/Plan.h"

#include <string>
#include <vector>

namespace partc::runtime {

class Dataset {
public:
  /// Reads `dir`'s file for every plan input not named in `givenElsewhere`
  /// (those come from --input). Fails naming the file and the input where a
  /// file is missing, holds another element type or sample shape than the
  /// plan's input, is not a whole number of batches, or holds another
  /// number of samples than the others.
  static Status open(const std::string &dir, const Plan &plan,
                     const std::vector<std::string> &givenElsewhere,
                     Dataset &result);

  int64_t samples() const { return samples_; }
  int64_t batchSize() const { return batch_; }
  int64_t batchesPerEpoch() const { return batch_ ? samples_ / batch_ : 0; }

  /// Puts the samples of `epoch` in order, or with `shuffle` in the
  /// permutation samplePermutation(samples(), seed, epoch).
  void startEpoch(uint64_t epoch, bool shuffle, uint64_t seed);

  /// Copies batch `index` of the current epoch into the plan inputs it
  /// holds (`inputs` in the plan's order).
  void fillBatch(int64_t index, std::vector<HostTensor> &inputs) const;

private:
  struct Column {
    size_t input;       // the plan input's position
    size_t sampleBytes; // one sample's bytes
    HostTensor all;     // every sample
  };
  std::vector<Column> columns_;
  std::vector<int64_t> order_;
  int64_t samples_ = 0, batch_ = 0;
};

/// A permutation of [0, n): Fisher-Yates over splitmix64 numbers seeded
/// with `seed` and `epoch` (docs/training.md gives the recipe, so that other
/// tools can reproduce the order).
std::vector<int64_t> samplePermutation(int64_t n, uint64_t seed,
                                       uint64_t epoch);

} // namespace partc::runtime

#endif // PARTC_RUNTIME_IO_DATASET_H
