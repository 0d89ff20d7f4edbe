//===- Dataset.cpp --------------------------------------------------------===//
#include "runtime/io/Dataset.h"

#include <algorithm>
#include <cstring>
#include <sys/stat.h>

namespace partc::runtime {

namespace {

bool isFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string shapeString(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

} // namespace

std::vector<int64_t> samplePermutation(int64_t n, uint64_t seed,
                                       uint64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int64_t>(i);
  // One stream per (seed, epoch); the multiplier keeps neighbouring seeds'
  // and epochs' streams apart.
  uint64_t state = seed ^ (epoch * 0xd1b54a32d192ed03ull);
  for (size_t i = order.size(); i > 1; --i) {
    size_t j = static_cast<size_t>(splitmix64(state) % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

Status Dataset::open(const std::string &dir, const Plan &plan,
                     const std::vector<std::string> &givenElsewhere,
                     Dataset &result) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error("--data '" + dir + "' is not a directory");
  result = Dataset();
  std::string firstFile;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const TensorDecl &decl = plan.inputs[i];
    if (std::find(givenElsewhere.begin(), givenElsewhere.end(), decl.name) !=
        givenElsewhere.end())
      continue;
    std::string path = dir + "/" + decl.name + ".npy";
    if (!isFile(path) && isFile(dir + "/" + decl.name + ".pb"))
      path = dir + "/" + decl.name + ".pb";
    if (!isFile(path))
      return Status::error("--data '" + dir + "' has no '" + decl.name +
                           ".npy' for the plan's input '" + decl.name +
                           "'; add it, or give the input with --input " +
                           decl.name + "=FILE");
    if (decl.type.shape.empty() || decl.type.shape[0] < 1)
      return Status::error("the plan's input '" + decl.name + "' (" +
                           decl.type.str() +
                           ") has no batch dimension to walk in --data; give "
                           "it with --input " +
                           decl.name + "=FILE");
    Column column;
    column.input = i;
    column.sampleBytes =
        decl.type.byteSize() / static_cast<size_t>(decl.type.shape[0]);
    // The whole file is read: it must fit this machine's memory.
    PARTC_RETURN_IF_ERROR(
        readTensorFile(path, column.all, hostMemoryBytes() / 2));
    const TensorType &got = column.all.type;
    Shape sampleShape(decl.type.shape.begin() + 1, decl.type.shape.end());
    if (got.dtype != decl.type.dtype || got.shape.empty() ||
        Shape(got.shape.begin() + 1, got.shape.end()) != sampleShape)
      return Status::error(
          "'" + path + "' holds " + got.str() + ", but the plan's input '" +
          decl.name + "' takes " + decl.type.str() + ": samples of " +
          dtypeName(decl.type.dtype) + shapeString(sampleShape) +
          " stacked along the first "
          "dimension");
    int64_t batch = decl.type.shape[0], samples = got.shape[0];
    if (samples == 0 || samples % batch != 0)
      return Status::error(
          "'" + path + "' holds " + std::to_string(samples) +
          " samples, not a whole number of the plan's batches of " +
          std::to_string(batch) + "; drop the last " +
          std::to_string(samples % batch) +
          " samples or compile with another --batch");
    if (result.columns_.empty()) {
      result.samples_ = samples;
      result.batch_ = batch;
      firstFile = path;
    } else if (samples != result.samples_ || batch != result.batch_) {
      return Status::error("'" + path + "' holds " + std::to_string(samples) +
                           " samples, but '" + firstFile + "' holds " +
                           std::to_string(result.samples_) +
                           "; every --data file holds one entry per sample");
    }
    result.columns_.push_back(std::move(column));
  }
  if (result.columns_.empty())
    return Status::error("--data '" + dir +
                         "' provides no input: every input of the plan is "
                         "given with --input");
  result.startEpoch(0, /*shuffle=*/false, 0);
  return Status();
}

void Dataset::startEpoch(uint64_t epoch, bool shuffle, uint64_t seed) {
  if (shuffle) {
    order_ = samplePermutation(samples_, seed, epoch);
    return;
  }
  order_.resize(static_cast<size_t>(samples_));
  for (size_t i = 0; i < order_.size(); ++i)
    order_[i] = static_cast<int64_t>(i);
}

void Dataset::fillBatch(int64_t index, std::vector<HostTensor> &inputs) const {
  for (const Column &column : columns_) {
    uint8_t *dst = inputs[column.input].data.data();
    for (int64_t k = 0; k < batch_; ++k) {
      int64_t sample = order_[static_cast<size_t>(index * batch_ + k)];
      std::memcpy(dst + static_cast<size_t>(k) * column.sampleBytes,
                  column.all.data.data() +
                      static_cast<size_t>(sample) * column.sampleBytes,
                  column.sampleBytes);
    }
  }
}

} // namespace partc::runtime
