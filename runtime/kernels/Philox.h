//===- Philox.h - Counter-based random numbers for dropout ------*- C++ -*-===//
//
// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as
// easy as 1, 2, 3", SC'11): four 32-bit words from a 128-bit counter and a
// 64-bit key, with no state between calls. Dropout's mask is a function of
// (seed, stream, step, element) only, so the CPU reference and the GPU
// draw the same one, the backward pass draws it again instead of keeping
// it, and any element can be drawn alone.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_PHILOX_H
#define PARTC_RUNTIME_KERNELS_PHILOX_H

#include <cstdint>

#if defined(__CUDACC__)
#define PARTC_PHILOX_FN __host__ __device__ inline
#else
#define PARTC_PHILOX_FN inline
#endif

namespace partc::runtime::philox {

struct Words {
  uint32_t w[4];
};

/// Philox4x32 with 10 rounds: counter (c0, c1, c2, c3), key (k0, k1).
PARTC_PHILOX_FN Words philox4x32(uint32_t c0, uint32_t c1, uint32_t c2,
                                 uint32_t c3, uint32_t k0, uint32_t k1) {
  constexpr uint64_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = kMul0 * c0, p1 = kMul1 * c2;
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

/// Dropout's draw for elements 4g..4g+3: counter (g, stream, step), key
/// the seed.
PARTC_PHILOX_FN Words dropoutWords(uint64_t group, int64_t stream, int64_t step,
                                   int64_t seed) {
  uint64_t st = uint64_t(step), sd = uint64_t(seed);
  return philox4x32(uint32_t(group), uint32_t(stream), uint32_t(st),
                    uint32_t(st >> 32), uint32_t(sd), uint32_t(sd >> 32));
}

/// Dropout keeps an element when its word's top 24 bits, a uniform number
/// in [0, 2^24), are at least ratio * 2^24 (rounded down).
inline uint32_t dropoutThreshold(double ratio) {
  return uint32_t(ratio * 16777216.0);
}

PARTC_PHILOX_FN bool dropoutKeeps(uint32_t word, uint32_t threshold) {
  return (word >> 8) >= threshold;
}

} // namespace partc::runtime::philox

#endif // PARTC_RUNTIME_KERNELS_PHILOX_H
