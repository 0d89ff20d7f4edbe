//===- FastDivider.h - Division by a fixed divisor without a divide -------===//
//
// GPUs have no integer divide instruction: a 32-bit division by a runtime
// value costs about twenty instructions, and kernels that split a flat
// index into coordinates divide a dozen times per element. A divisor known
// when the kernel is made becomes a multiply-high and a shift (Granlund and
// Montgomery, "Division by invariant integers using multiplication", PLDI
// 1994). Host code compiles it too, so that it can be tested without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_FASTDIVIDER_H
#define PARTC_RUNTIME_CUDA_FASTDIVIDER_H

#include <cstdint>

#ifdef __CUDACC__
#define PARTC_HOST_DEVICE __host__ __device__
#else
#define PARTC_HOST_DEVICE
#endif

namespace partc::runtime::cuda {

/// n / d and n % d for numerators in [0, 2^31) and a divisor in [1, 2^31).
class FastDivider {
public:
  FastDivider() = default;
  explicit FastDivider(uint32_t divisor) : divisor_(divisor) {
    while ((uint64_t(1) << shift_) < divisor)
      ++shift_;
    // The smallest magic with n * magic / 2^32 + n rounding down to n / d
    // after the shift; below 2^32 because 2^(shift - 1) < divisor.
    magic_ = uint32_t((uint64_t(1) << 32) *
                          ((uint64_t(1) << shift_) - divisor) / divisor +
                      1);
  }
  PARTC_HOST_DEVICE uint32_t divide(uint32_t n) const {
#ifdef __CUDA_ARCH__
    uint32_t high = __umulhi(n, magic_);
#else
    uint32_t high = uint32_t((uint64_t(n) * magic_) >> 32);
#endif
    // high <= n < 2^31, so the sum does not wrap.
    return (high + n) >> shift_;
  }
  PARTC_HOST_DEVICE uint32_t remainder(uint32_t n, uint32_t quotient) const {
    return n - quotient * divisor_;
  }
  PARTC_HOST_DEVICE uint32_t divisor() const { return divisor_; }

private:
  uint32_t divisor_ = 1, magic_ = 1, shift_ = 0;
};

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_FASTDIVIDER_H
