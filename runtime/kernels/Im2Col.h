//===- Im2Col.h - Convolution windows as matrix columns --------*- C++ -*-===//
//
// The CPU convolution and its two gradients are GEMMs over the matrix whose
// column o holds the input values window o reads (zero in the padding):
// forward and weight gradient read it (im2col), the input gradient adds
// such a matrix back onto the input (col2im).
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_IM2COL_H
#define PARTC_RUNTIME_KERNELS_IM2COL_H

#include "runtime/kernels/KernelRegistry.h"

namespace partc::runtime {

/// Walks the [channels * kernel, out] matrix of `w` in order, calling
/// `visit(element, offset)` with the input offset of each element (within
/// `channels` planes) or -1 where it falls in the padding.
template <typename Visit>
void forEachColumnElement(const Window &w, int64_t channels, Visit &&visit) {
  int64_t element = 0;
  for (int64_t ch = 0; ch < channels; ++ch)
    for (int64_t kd = 0; kd < w.kernel[0]; ++kd)
      for (int64_t kh = 0; kh < w.kernel[1]; ++kh)
        for (int64_t kw = 0; kw < w.kernel[2]; ++kw)
          for (int64_t od = 0; od < w.out[0]; ++od) {
            int64_t id = od * w.stride[0] - w.padBegin[0] + kd * w.dilation[0];
            bool dOk = id >= 0 && id < w.in[0];
            for (int64_t oh = 0; oh < w.out[1]; ++oh) {
              int64_t ih =
                  oh * w.stride[1] - w.padBegin[1] + kh * w.dilation[1];
              bool hOk = dOk && ih >= 0 && ih < w.in[1];
              int64_t row = (ch * w.in[0] + id) * w.in[1] + ih;
              for (int64_t ow = 0; ow < w.out[2]; ++ow) {
                int64_t iw =
                    ow * w.stride[2] - w.padBegin[2] + kw * w.dilation[2];
                bool ok = hOk && iw >= 0 && iw < w.in[2];
                visit(element++, ok ? row * w.in[2] + iw : int64_t(-1));
              }
            }
          }
}

inline void im2col(const Window &w, const float *x, int64_t channels,
                   float *col) {
  forEachColumnElement(w, channels, [&](int64_t e, int64_t at) {
    col[e] = at >= 0 ? x[at] : 0.0f;
  });
}

/// Adds each column element to the input position it was read from.
inline void col2imAdd(const Window &w, const float *col, int64_t channels,
                      float *x) {
  forEachColumnElement(w, channels, [&](int64_t e, int64_t at) {
    if (at >= 0)
      x[at] += col[e];
  });
}

} // namespace partc::runtime

#endif // PARTC_RUNTIME_KERNELS_IM2COL_H
