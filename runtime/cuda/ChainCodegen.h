//===- ChainCodegen.h - Kernels generated per fused chain -------*- C++ -*-===//
//
// The interpreter of fused_elementwise programs reads each step from its
// launch parameters and keeps the intermediate values in local memory;
// straight-line code for one program keeps them in registers. At load,
// partc-run writes CUDA source for each distinct program and input layout
// (over FusedChain.cuh, so both compute each step alike), compiles it with
// NVRTC for the device's architecture and loads it. Compiled kernels are
// kept for the life of the process, found again by their source.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_CHAINCODEGEN_H
#define PARTC_RUNTIME_CUDA_CHAINCODEGEN_H

#include "runtime/Support.h"
#include "runtime/cuda/FusedChain.cuh"

#include <cuda_runtime.h>
#include <string>
#include <vector>

namespace partc::runtime::cuda {

/// The kernels of one program: a thread per element, per four or per eight.
struct GeneratedChain {
  cudaKernel_t one = nullptr, four = nullptr, eight = nullptr;
};

/// CUDA source for the program and input modes of `p` (not its shapes).
std::string chainSource(const FusedParams &p);

/// NVRTC's compilation of `source` for `arch` (such as "sm_90") into a
/// cubin; the error carries NVRTC's log.
Status compileChainSource(const std::string &source, const std::string &arch,
                          std::vector<char> &cubin);

/// The kernels for `p` on device `gpu`, compiled on first request.
Status generateChain(const FusedParams &p, int gpu, GeneratedChain &chain);

cudaError_t launchGeneratedChain(const GeneratedChain &chain,
                                 const FusedParams &p, cudaStream_t s);

/// What generateChain did in this process.
struct ChainStats {
  int compiled = 0, failed = 0;
  double seconds = 0; // compiling and loading
  std::string firstFailure;
};
ChainStats generatedChainStats();

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_CHAINCODEGEN_H
