//===- WindowTaps.h - The taps of a pooling window that count ---*- C++ -*-===//
//
// A pooling window may be almost all padding: a kernel of 2^31 over an
// input of one, with pads to match, is a valid window. The pooling kernels
// of both backends visit only the taps that land in the input and count the
// padded ones in closed form, so that a window costs what its input
// positions cost, never what its kernel_shape says.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_WINDOWTAPS_H
#define PARTC_RUNTIME_KERNELS_WINDOWTAPS_H

#if defined(__CUDACC__)
#define PARTC_TAPS_FN __host__ __device__ inline
#else
#define PARTC_TAPS_FN inline
#endif

namespace partc::runtime {

/// Taps [first, last) of one dimension of a window.
template <typename I> struct TapRange { I first, last; };

/// The taps that land in [0, in) of a window whose first tap is at `start`
/// (output * stride - padBegin), `kernel` taps `dilation` apart.
template <typename I>
PARTC_TAPS_FN TapRange<I> inputTaps(I start, I kernel, I dilation, I in) {
  I first = start >= 0 ? I(0) : (-start + dilation - 1) / dilation;
  I last = in - start <= 0 ? I(0) : (in - 1 - start) / dilation + 1;
  if (last > kernel)
    last = kernel;
  if (first > last)
    first = last;
  return {first, last};
}

/// How many taps of that window lie in the padded extent [-padBegin, in +
/// padEnd), which count_include_pad divides by. Every tap is at or after
/// -padBegin, so only the end bounds them.
template <typename I>
PARTC_TAPS_FN I paddedTaps(I start, I kernel, I dilation, I in, I padEnd) {
  I room = in + padEnd - start;
  if (room <= 0)
    return 0;
  I taps = (room - 1) / dilation + 1;
  return taps < kernel ? taps : kernel;
}

/// The taps that reach input position `pos` from a window that exists:
/// tap k belongs to output (pos + padBegin - k * dilation) / stride where
/// that is a whole number in [0, out). Callers still test divisibility.
template <typename I>
PARTC_TAPS_FN TapRange<I> tapsReaching(I pos, I kernel, I dilation, I stride,
                                       I padBegin, I out) {
  I reach = pos + padBegin; // output * stride + k * dilation
  I lastStart = (out - 1) * stride;
  I first =
      reach <= lastStart ? I(0) : (reach - lastStart + dilation - 1) / dilation;
  I last = reach < 0 ? I(0) : reach / dilation + 1;
  if (last > kernel)
    last = kernel;
  if (first > last)
    first = last;
  return {first, last};
}

} // namespace partc::runtime

#endif // PARTC_RUNTIME_KERNELS_WINDOWTAPS_H
