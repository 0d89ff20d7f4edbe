//===- CopyLayoutTest.cpp - Strided copy rewrites against a plain gather -===//
#include "runtime/kernels/CopyLayout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

using namespace partc::runtime;

namespace {

/// The copy as the GPU kernel does it, element by element, on bytes.
std::vector<uint8_t> gather(const std::vector<uint8_t> &in,
                            const CopyLayout &l) {
  int64_t n = 1;
  for (int64_t e : l.shape)
    n *= e;
  std::vector<uint8_t> out(static_cast<size_t>(n) * l.elementBytes);
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = l.base, rest = i;
    for (int d = static_cast<int>(l.shape.size()) - 1; d >= 0; --d) {
      offset += (rest % l.shape[d]) * l.stride[d];
      rest /= l.shape[d];
    }
    std::memcpy(&out[i * l.elementBytes], &in[offset * l.elementBytes],
                l.elementBytes);
  }
  return out;
}

std::vector<int64_t> contiguous(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

/// A random transpose, slice (with steps) or broadcast of a random tensor
/// of 4-byte elements.
CopyLayout randomCopy(std::mt19937 &rng, int64_t &inputElements) {
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  size_t rank = static_cast<size_t>(pick(1, 5));
  std::vector<int64_t> in(rank);
  for (int64_t &e : in)
    e = pick(0, 3) == 0 ? 1
                        : 4 * pick(1, 3) + (pick(0, 3) == 0 ? pick(1, 3) : 0);
  std::vector<int64_t> strides = contiguous(in);
  inputElements = std::accumulate(in.begin(), in.end(), int64_t{1},
                                  std::multiplies<int64_t>());
  CopyLayout l;
  l.elementBytes = 4;
  switch (pick(0, 2)) {
  case 0: { // transpose
    std::vector<size_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (size_t d : perm) {
      l.shape.push_back(in[d]);
      l.stride.push_back(strides[d]);
    }
    break;
  }
  case 1: // slice: a start and a step per dimension
    for (size_t d = 0; d < rank; ++d) {
      int64_t start = pick(0, static_cast<int>(in[d]) - 1);
      int64_t step = pick(1, 2);
      l.shape.push_back((in[d] - start + step - 1) / step);
      l.stride.push_back(step * strides[d]);
      l.base += start * strides[d];
    }
    break;
  default: // broadcast: some dimensions repeated (stride 0)
    for (size_t d = 0; d < rank; ++d) {
      bool repeat = pick(0, 2) == 0;
      l.shape.push_back(repeat ? pick(1, 4) : in[d]);
      l.stride.push_back(repeat ? 0 : strides[d]);
    }
    break;
  }
  return l;
}

TEST(CopyLayout, MergingAndWideningCopyTheSameBytes) {
  std::mt19937 rng(7);
  int widened = 0, merged = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    int64_t elements = 0;
    CopyLayout l = randomCopy(rng, elements);
    std::vector<uint8_t> in(static_cast<size_t>(elements) * 4);
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = static_cast<uint8_t>(rng());
    std::vector<uint8_t> want = gather(in, l);
    CopyLayout m = mergeContiguous(l);
    merged += m.shape.size() < l.shape.size();
    ASSERT_EQ(gather(in, m), want) << "trial " << trial;
    for (size_t bytes : {8, 16})
      if (std::optional<CopyLayout> w = widenElements(m, bytes)) {
        ++widened;
        ASSERT_EQ(gather(in, *w), want)
            << "trial " << trial << ", " << bytes << "-byte elements";
      }
  }
  // The generator must exercise both rewrites.
  EXPECT_GT(merged, 100);
  EXPECT_GT(widened, 100);
}

TEST(CopyLayout, RowSliceBecomesTwoDimensionsOfWideElements) {
  // [32, 128, 2304] -> [32, 128, 768] at column 768: the qkv split.
  CopyLayout l{{32, 128, 768}, {128 * 2304, 2304, 1}, 768, 4};
  CopyLayout m = mergeContiguous(l);
  EXPECT_EQ(m.shape, (std::vector<int64_t>{32 * 128, 768}));
  EXPECT_EQ(m.stride, (std::vector<int64_t>{2304, 1}));
  std::optional<CopyLayout> w = widenElements(m, 16);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{32 * 128, 192}));
  EXPECT_EQ(w->stride, (std::vector<int64_t>{576, 1}));
  EXPECT_EQ(w->base, 192);
  // A transpose of the last two axes reads columns: nothing to widen.
  CopyLayout t{{4, 64, 128}, {8192, 1, 64}, 0, 4};
  EXPECT_FALSE(widenElements(mergeContiguous(t), 8));
}

TEST(CopyLayout, OperandsMergeOnlyWhereAllWalkAlike) {
  // Attention scores [2, 4, 8, 8] plus a mask [2, 1, 8, 8]: the mask is
  // broadcast over the heads, so [B, H, L * L], not one dimension.
  std::vector<int64_t> shape = {2, 4, 8, 8};
  std::vector<std::vector<int64_t>> strides = {{256, 64, 8, 1}, {64, 0, 8, 1}};
  mergeDimensions(shape, strides);
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 4, 64}));
  EXPECT_EQ(strides[0], (std::vector<int64_t>{256, 64, 1}));
  EXPECT_EQ(strides[1], (std::vector<int64_t>{64, 0, 1}));
  // A bias over the last dimension with unit dimensions between: the
  // broadcast dimensions merge with each other, not with the bias's.
  shape = {3, 1, 5, 6};
  strides = {{30, 30, 6, 1}, {0, 0, 0, 1}};
  mergeDimensions(shape, strides);
  EXPECT_EQ(shape, (std::vector<int64_t>{15, 6}));
  EXPECT_EQ(strides[0], (std::vector<int64_t>{6, 1}));
  EXPECT_EQ(strides[1], (std::vector<int64_t>{0, 1}));
}

} // namespace
