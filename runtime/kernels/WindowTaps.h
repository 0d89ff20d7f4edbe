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
  I first, last;
  if (dilation == 1) { // no division, the common case on the GPU
    first = start >= 0 ? I(0) : -start;
    last = in - start <= 0 ? I(0) : in - start;
  } else {
    first = start >= 0 ? I(0) : (-start + dilation - 1) / dilation;
    last = in - start <= 0 ? I(0) : (in - 1 - start) / dilation + 1;
  }
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
  I taps = dilation == 1 ? room : (room - 1) / dilation + 1;
  return taps < kernel ? taps : kernel;
}

/// A walk over the (output, tap) pairs of one dimension whose window holds
/// input position `pos`: steps [first, last) over taps, or over outputs
/// where those are fewer (a stride far larger than the dilation), so that
/// a gradient gathers in min(kernel, outputs) steps.
template <typename I> struct WindowWalk {
  I first, last;
  bool byOutput;
};

/// Tap k and output o hold `pos` when o * stride + k * dilation equals
/// pos + padBegin, with k in [0, kernel) and o in [0, out).
template <typename I>
PARTC_TAPS_FN WindowWalk<I> windowsHolding(I pos, I kernel, I dilation,
                                           I stride, I padBegin, I out) {
  I reach = pos + padBegin;
  if (reach < 0 || out <= 0)
    return {0, 0, false};
  // Taps: k * dilation <= reach <= k * dilation + (out - 1) * stride.
  I lastStart = (out - 1) * stride;
  I tapFirst =
      reach <= lastStart ? I(0) : (reach - lastStart + dilation - 1) / dilation;
  I tapLast = reach / dilation + 1;
  if (tapLast > kernel)
    tapLast = kernel;
  // Outputs: o * stride <= reach <= o * stride + (kernel - 1) * dilation.
  I span = (kernel - 1) * dilation;
  I outFirst = reach <= span ? I(0) : (reach - span + stride - 1) / stride;
  I outLast = reach / stride + 1;
  if (outLast > out)
    outLast = out;
  I taps = tapLast > tapFirst ? tapLast - tapFirst : I(0);
  I outputs = outLast > outFirst ? outLast - outFirst : I(0);
  if (outputs < taps)
    return {outFirst, outFirst + outputs, true};
  return {tapFirst, tapFirst + taps, false};
}

/// Step `v` of such a walk: its output and tap, or false where the step
/// falls between them (not a whole number of strides or dilations).
template <typename I>
PARTC_TAPS_FN bool windowStep(const WindowWalk<I> &walk, I v, I pos, I dilation,
                              I stride, I padBegin, I &output, I &tap) {
  I reach = pos + padBegin;
  if (walk.byOutput) {
    I rest = reach - v * stride;
    if (rest % dilation != 0)
      return false;
    output = v;
    tap = rest / dilation;
    return true;
  }
  I rest = reach - v * dilation;
  if (rest % stride != 0)
    return false;
  output = rest / stride;
  tap = v;
  return true;
}

} // namespace partc::runtime

#endif // PARTC_RUNTIME_KERNELS_WINDOWTAPS_H
