//===- Resize.h - ONNX Resize, nearest and linear ---------------*- C++ -*-===//
//
// One definition of Resize's semantics for the CPU kernel, the GPU kernel
// and the compiler's checks: the attribute values partc supports, the
// coordinate transformations, the rounding of nearest and the taps of
// (multi-)linear interpolation. Coordinates are computed in double on both
// backends, so that a nearest index never depends on the device.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_RESIZE_H
#define PARTC_RUNTIME_KERNELS_RESIZE_H

#include "runtime/Support.h"

#include <cmath>
#include <cstdint>
#include <string>

#if defined(__CUDACC__)
#define PARTC_RESIZE_FN __host__ __device__ inline
#else
#define PARTC_RESIZE_FN inline
#endif

namespace partc::runtime {
struct KernelArgs;
} // namespace partc::runtime

namespace partc::runtime::resize {

constexpr int kMaxRank = 8;

enum class Mode : int { Nearest, Linear };
enum class Coordinates : int {
  HalfPixel,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn
};
enum class Rounding : int { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

/// Everything a kernel needs, passed to the GPU by value.
struct Params {
  int rank = 0;
  Mode mode = Mode::Nearest;
  Coordinates coordinates = Coordinates::HalfPixel;
  Rounding rounding = Rounding::RoundPreferFloor;
  int64_t inShape[kMaxRank] = {}, outShape[kMaxRank] = {};
  /// Output extent over input extent per dimension, as ONNX's `scales`
  /// (or sizes / input extents where the model gave sizes).
  double scale[kMaxRank] = {};
};

/// Parses the string attributes; false, with `why`, for values partc does
/// not support.
inline bool parseMode(const std::string &s, Mode &m, std::string &why) {
  if (s == "nearest")
    m = Mode::Nearest;
  else if (s == "linear")
    m = Mode::Linear;
  else {
    why = "mode '" + s + "' is not supported (nearest or linear)";
    return false;
  }
  return true;
}
inline bool parseCoordinates(const std::string &s, Coordinates &c,
                             std::string &why) {
  if (s == "half_pixel")
    c = Coordinates::HalfPixel;
  else if (s == "pytorch_half_pixel")
    c = Coordinates::PytorchHalfPixel;
  else if (s == "align_corners")
    c = Coordinates::AlignCorners;
  else if (s == "asymmetric")
    c = Coordinates::Asymmetric;
  else if (s == "tf_half_pixel_for_nn")
    c = Coordinates::TfHalfPixelForNn;
  else {
    why = "coordinate_transformation_mode '" + s +
          "' is not supported (half_pixel, pytorch_half_pixel, "
          "align_corners, asymmetric or tf_half_pixel_for_nn)";
    return false;
  }
  return true;
}
inline bool parseRounding(const std::string &s, Rounding &r, std::string &why) {
  if (s == "round_prefer_floor")
    r = Rounding::RoundPreferFloor;
  else if (s == "round_prefer_ceil")
    r = Rounding::RoundPreferCeil;
  else if (s == "floor")
    r = Rounding::Floor;
  else if (s == "ceil")
    r = Rounding::Ceil;
  else {
    why = "nearest_mode '" + s +
          "' is not supported (round_prefer_floor, round_prefer_ceil, "
          "floor or ceil)";
    return false;
  }
  return true;
}

/// The parameters of a resize kernel from its attributes (every one
/// required) and its input and result types.
Status paramsOf(const KernelArgs &args, Params &p);

/// The input coordinate that output coordinate `x` of dimension `d` reads.
/// As ONNX defines it, the resized length is the input's times the scale,
/// not rounded (they differ where scales, not sizes, were given).
PARTC_RESIZE_FN double sourceCoordinate(const Params &p, int d, int64_t x) {
  double scale = p.scale[d];
  double in = static_cast<double>(p.inShape[d]), out = in * scale;
  switch (p.coordinates) {
  case Coordinates::HalfPixel:
    return (x + 0.5) / scale - 0.5;
  case Coordinates::PytorchHalfPixel:
    return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  case Coordinates::AlignCorners:
    return out > 1 ? x * (in - 1) / (out - 1) : 0.0;
  case Coordinates::Asymmetric:
    return x / scale;
  case Coordinates::TfHalfPixelForNn:
    return (x + 0.5) / scale;
  }
  return 0.0;
}

PARTC_RESIZE_FN int64_t clampIndex(int64_t i, int64_t extent) {
  return i < 0 ? 0 : (i >= extent ? extent - 1 : i);
}

/// The input index that nearest mode reads for coordinate `c`.
PARTC_RESIZE_FN int64_t nearestIndex(Rounding r, double c, int64_t extent) {
  double f = floor(c);
  double i;
  switch (r) {
  case Rounding::RoundPreferFloor:
    i = c - f == 0.5 ? f : floor(c + 0.5);
    break;
  case Rounding::RoundPreferCeil:
    i = c - f == 0.5 ? f + 1 : floor(c + 0.5);
    break;
  case Rounding::Floor:
    i = f;
    break;
  default:
    i = ceil(c);
    break;
  }
  return clampIndex(static_cast<int64_t>(i), extent);
}

/// Whether dimension `d` changes: dimensions of scale 1 and equal extents
/// are read in place and take no interpolation taps.
PARTC_RESIZE_FN bool resized(const Params &p, int d) {
  return p.inShape[d] != p.outShape[d] || p.scale[d] != 1.0;
}

/// Output element `o` (row-major over outShape) of `in`.
template <class T>
PARTC_RESIZE_FN T resizeElement(const Params &p, const T *in, int64_t o) {
  int64_t coord[kMaxRank];
  for (int d = p.rank - 1; d >= 0; --d) {
    coord[d] = o % p.outShape[d];
    o /= p.outShape[d];
  }
  if (p.mode == Mode::Nearest) {
    int64_t offset = 0;
    for (int d = 0; d < p.rank; ++d) {
      int64_t i = resized(p, d) ? nearestIndex(p.rounding,
                                               sourceCoordinate(p, d, coord[d]),
                                               p.inShape[d])
                                : coord[d];
      offset = offset * p.inShape[d] + i;
    }
    return in[offset];
  }
  // Linear: the two neighbours of each resized dimension, clamped to the
  // edge, weighted by the distance to each; 2^k taps for k such dimensions.
  int64_t low[kMaxRank], high[kMaxRank];
  double weight[kMaxRank];
  int taps[kMaxRank], resizedCount = 0;
  for (int d = 0; d < p.rank; ++d) {
    if (!resized(p, d)) {
      low[d] = high[d] = coord[d];
      weight[d] = 0;
      continue;
    }
    double c = sourceCoordinate(p, d, coord[d]);
    double f = floor(c);
    low[d] = clampIndex(static_cast<int64_t>(f), p.inShape[d]);
    high[d] = clampIndex(static_cast<int64_t>(f) + 1, p.inShape[d]);
    weight[d] = c - f;
    taps[resizedCount++] = d;
  }
  double sum = 0;
  for (int corner = 0; corner < (1 << resizedCount); ++corner) {
    double w = 1;
    int64_t offset = 0;
    for (int d = 0, t = 0; d < p.rank; ++d) {
      int64_t i = low[d];
      if (t < resizedCount && taps[t] == d) {
        bool up = (corner >> t) & 1;
        i = up ? high[d] : low[d];
        w *= up ? weight[d] : 1 - weight[d];
        ++t;
      }
      offset = offset * p.inShape[d] + i;
    }
    sum += w * static_cast<double>(in[offset]);
  }
  return static_cast<T>(sum);
}

} // namespace partc::runtime::resize

#endif // PARTC_RUNTIME_KERNELS_RESIZE_H
