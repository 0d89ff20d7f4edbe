//===- AxisOps.h - Orderings shared by the CPU and GPU axis kernels -------===//
//
// ArgMax, ArgMin and TopK rank elements along one axis; both backends
// include this header so that their orders (NaN, ties) cannot disagree.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_AXISOPS_H
#define PARTC_RUNTIME_KERNELS_AXISOPS_H

#include "runtime/Support.h"
#include "runtime/kernels/ElementwiseOps.h"

#include <cstdint>

namespace partc::runtime::axis {

/// An input viewed as [outer, extent, inner] around its axis.
struct Lines {
  int64_t outer = 1, extent = 1, inner = 1;
};

/// `shape` viewed as [outer, extent, inner] around axis `ax`.
inline Lines linesOf(const Shape &shape, int64_t ax) {
  Lines l;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    (d < ax ? l.outer : d == ax ? l.extent : l.inner) *= shape[d];
  return l;
}

/// The order of the ranking ops: the most extreme value first (the largest
/// when `largest`), a NaN before every number when `nanFirst` and after
/// when not, equal values by index (the higher first when `lastOnTie`).
template <class T>
PARTC_EW_FN bool ranksBefore(T a, int64_t ia, T b, int64_t ib, bool largest,
                             bool nanFirst, bool lastOnTie) {
  bool aNan = a != a, bNan = b != b;
  if (aNan != bNan)
    return aNan == nanFirst;
  if (!aNan && a != b)
    return largest ? a > b : a < b;
  return lastOnTie ? ia > ib : ia < ib;
}

/// Adds without signed overflow: integers wrap, as numpy's do.
template <class T> PARTC_EW_FN T wrapAdd(T a, T b) {
  if constexpr (T(-1) < T(0) && T(1) / T(2) == T(0)) {
    return static_cast<T>(static_cast<unsigned long long>(a) +
                          static_cast<unsigned long long>(b));
  } else {
    return a + b;
  }
}

} // namespace partc::runtime::axis

#endif // PARTC_RUNTIME_KERNELS_AXISOPS_H
