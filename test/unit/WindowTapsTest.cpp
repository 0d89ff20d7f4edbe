//===- WindowTapsTest.cpp - Closed-form window taps against enumeration ---===//
//
// The pooling kernels of both backends (the CUDA ones included) take their
// loop bounds from WindowTaps.h, so its three functions are checked here
// against walking every tap, over all small windows, in 32 and 64 bits.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/WindowTaps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>

using namespace partc::runtime;

namespace {

template <typename I> void checkAllSmallWindows() {
  for (I in = 1; in <= 6; ++in)
    for (I kernel = 1; kernel <= 7; ++kernel)
      for (I dilation = 1; dilation <= 3; ++dilation)
        for (I stride = 1; stride <= 3; ++stride)
          for (I padBegin = 0; padBegin <= 6; ++padBegin)
            for (I padEnd = 0; padEnd <= 6; ++padEnd) {
              I span = dilation * (kernel - 1) + 1;
              I padded = in + padBegin + padEnd;
              if (padded < span)
                continue;
              // One more output than floor mode gives: ceil mode's.
              I out = (padded - span) / stride + 2;
              SCOPED_TRACE(::testing::Message()
                           << "in " << in << " kernel " << kernel
                           << " dilation " << dilation << " stride " << stride
                           << " pads " << padBegin << "," << padEnd);
              for (I o = 0; o < out; ++o) {
                I start = o * stride - padBegin;
                I first = -1, last = -1, inExtent = 0;
                for (I k = 0; k < kernel; ++k) {
                  I at = start + k * dilation;
                  if (at >= 0 && at < in) {
                    if (first < 0)
                      first = k;
                    last = k + 1;
                  }
                  inExtent += at >= -padBegin && at < in + padEnd;
                }
                TapRange<I> taps = inputTaps(start, kernel, dilation, in);
                if (first < 0) {
                  EXPECT_EQ(taps.first, taps.last) << "output " << o;
                } else {
                  EXPECT_EQ(taps.first, first) << "output " << o;
                  EXPECT_EQ(taps.last, last) << "output " << o;
                }
                EXPECT_EQ(paddedTaps(start, kernel, dilation, in, padEnd),
                          inExtent)
                    << "output " << o;
              }
              // The walk gives each (output, tap) pair holding `pos` once,
              // and nothing else.
              for (I pos = 0; pos < in; ++pos) {
                std::set<std::pair<I, I>> expected, walked;
                for (I o = 0; o < out; ++o)
                  for (I k = 0; k < kernel; ++k)
                    if (o * stride - padBegin + k * dilation == pos)
                      expected.insert({o, k});
                WindowWalk<I> walk = windowsHolding(pos, kernel, dilation,
                                                    stride, padBegin, out);
                for (I v = walk.first; v < walk.last; ++v) {
                  I o, k;
                  if (windowStep(walk, v, pos, dilation, stride, padBegin, o,
                                 k)) {
                    EXPECT_TRUE(walked.insert({o, k}).second);
                  }
                }
                EXPECT_EQ(walked, expected) << "position " << pos;
                EXPECT_LE(walk.last - walk.first, std::min(kernel, out));
              }
            }
}

TEST(WindowTaps, MatchEveryTapOfSmallWindows32) {
  checkAllSmallWindows<int32_t>();
}

TEST(WindowTaps, MatchEveryTapOfSmallWindows64) {
  checkAllSmallWindows<int64_t>();
}

// A window of 2^40 taps over an input of three: the ranges are found
// without walking it.
TEST(WindowTaps, HugeWindowsOfPadding) {
  const int64_t taps = int64_t(1) << 40;
  TapRange<int64_t> first = inputTaps<int64_t>(-(taps - 1), taps, 1, 3);
  EXPECT_EQ(first.first, taps - 1);
  EXPECT_EQ(first.last, taps);
  EXPECT_EQ(paddedTaps<int64_t>(-(taps - 1), taps, 1, 3, taps - 1), taps);
  TapRange<int64_t> second = inputTaps<int64_t>(1, taps, 1, 3);
  EXPECT_EQ(second.first, 0);
  EXPECT_EQ(second.last, 2);
  // Position 2 is tap 1 of window 1 only; the walk goes by output.
  WindowWalk<int64_t> walk =
      windowsHolding<int64_t>(2, taps, 1, taps, taps - 1, 2);
  EXPECT_TRUE(walk.byOutput);
  EXPECT_LE(walk.last - walk.first, 2);
  int64_t o = -1, k = -1;
  int found = 0;
  for (int64_t v = walk.first; v < walk.last; ++v)
    if (windowStep<int64_t>(walk, v, 2, 1, taps, taps - 1, o, k)) {
      ++found;
      EXPECT_EQ(o, 1);
      EXPECT_EQ(k, 1);
    }
  EXPECT_EQ(found, 1);
}

} // namespace
