//===- Dispatch.h - Element type dispatch and broadcast loops -------------===//
#ifndef PARTC_RUNTIME_KERNELS_DISPATCH_H
#define PARTC_RUNTIME_KERNELS_DISPATCH_H

#include "runtime/kernels/KernelRegistry.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace partc::runtime {

/// `v` converted to T, clamped to T's range (NaN to 0): a float outside an
/// integer type's range has no defined conversion in C++.
template <typename T> T saturateCast(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v))
      return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

/// Integer +, - and * that wrap around as numpy's do (signed overflow is
/// undefined in C++; the arithmetic is done unsigned).
template <typename T> T wrappingAdd(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<decltype(a + b)>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return static_cast<T>(a + b);
  }
}
template <typename T> T wrappingSub(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<decltype(a - b)>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return static_cast<T>(a - b);
  }
}
template <typename T> T wrappingMul(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<decltype(a * b)>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return static_cast<T>(a * b);
  }
}

/// Calls `fn(T{})` with the C++ type of `dtype`; returns false for types
/// without a C++ counterpart here (f16, bf16).
template <typename Fn> bool dispatchType(DType dtype, Fn &&fn) {
  switch (dtype) {
  case DType::F32:
    fn(float{});
    return true;
  case DType::F64:
    fn(double{});
    return true;
  case DType::I8:
    fn(int8_t{});
    return true;
  case DType::U8:
    fn(uint8_t{});
    return true;
  case DType::I16:
    fn(int16_t{});
    return true;
  case DType::U16:
    fn(uint16_t{});
    return true;
  case DType::I32:
    fn(int32_t{});
    return true;
  case DType::U32:
    fn(uint32_t{});
    return true;
  case DType::I64:
    fn(int64_t{});
    return true;
  case DType::U64:
    fn(uint64_t{});
    return true;
  case DType::Bool:
    fn(bool{});
    return true;
  default:
    return false;
  }
}

/// Calls `fn(T{})` for f32 and f64; returns false for other types.
template <typename Fn> bool dispatchFloat(DType dtype, Fn &&fn) {
  if (dtype == DType::F32)
    fn(float{});
  else if (dtype == DType::F64)
    fn(double{});
  else
    return false;
  return true;
}

/// Visits every element of `out` in row-major order; `fn(o, in)` gets the
/// flat output index and the flat index into each of the N inputs, which are
/// read through `strides` (0 on broadcast dimensions).
template <size_t N, typename Fn>
void broadcastLoop(const Shape &out,
                   const std::array<std::vector<int64_t>, N> &strides,
                   Fn &&fn) {
  int64_t total = numElements(out);
  if (total == 0)
    return;
  size_t rank = out.size();
  if (rank == 0) {
    std::array<int64_t, N> idx{};
    fn(int64_t{0}, idx);
    return;
  }
  std::vector<int64_t> coord(rank, 0);
  std::array<int64_t, N> base{};
  int64_t inner = out[rank - 1];
  std::array<int64_t, N> innerStride;
  for (size_t k = 0; k < N; ++k)
    innerStride[k] = strides[k][rank - 1];
  for (int64_t o = 0; o < total; o += inner) {
    std::array<int64_t, N> idx = base;
    for (int64_t i = 0; i < inner; ++i) {
      fn(o + i, idx);
      for (size_t k = 0; k < N; ++k)
        idx[k] += innerStride[k];
    }
    // Advance the outer coordinates.
    for (int d = static_cast<int>(rank) - 2; d >= 0; --d) {
      if (++coord[d] < out[d]) {
        for (size_t k = 0; k < N; ++k)
          base[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k)
        base[k] -= strides[k][d] * (out[d] - 1);
      coord[d] = 0;
    }
  }
}

} // namespace partc::runtime

#endif // PARTC_RUNTIME_KERNELS_DISPATCH_H
