//===- FastDividerTest.cpp - Division by multiply-high, on the host -------===//
#include "runtime/cuda/FastDivider.h"
#include <gtest/gtest.h>
#include <random>

using partc::runtime::cuda::FastDivider;

namespace {
void expectDivides(const FastDivider &d, uint32_t n) {
  uint32_t q = d.divide(n);
  ASSERT_EQ(q, n / d.divisor()) << n << " / " << d.divisor();
  ASSERT_EQ(d.remainder(n, q), n % d.divisor()) << n << " % " << d.divisor();
}
} // namespace

// Every numerator below 2^16 and near multiples and the top of the range,
// for the divisors a kernel meets (extents, strides, channel counts) and
// the extremes: 1, powers of two, their neighbours, 2^31 - 1.
TEST(FastDivider, MatchesDivision) {
  std::vector<uint32_t> divisors = {1,
                                    2,
                                    3,
                                    4,
                                    5,
                                    6,
                                    7,
                                    9,
                                    56,
                                    64,
                                    112,
                                    224,
                                    1000,
                                    12544,
                                    65535,
                                    65536,
                                    65537,
                                    (1u << 20) + 1,
                                    (1u << 30) - 1,
                                    1u << 30,
                                    (1u << 31) - 1};
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> any(0, (1u << 31) - 1);
  for (uint32_t divisor : divisors) {
    FastDivider d(divisor);
    for (uint32_t n = 0; n < (1u << 16); ++n)
      expectDivides(d, n);
    for (uint32_t top = 0; top < 4096; ++top)
      expectDivides(d, (1u << 31) - 1 - top);
    for (uint64_t k = 1; k * divisor < (1ull << 31) && k < 4096; ++k)
      for (int64_t delta : {-1, 0, 1})
        if (int64_t m = int64_t(k * divisor) + delta; m < (1ll << 31))
          expectDivides(d, uint32_t(m));
    for (int i = 0; i < 100000; ++i)
      expectDivides(d, any(rng));
  }
}
