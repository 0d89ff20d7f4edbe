//===- LtHeuristics.h - cuBLASLt epilogues and algorithms -------*- C++ -*-===//
//
// Shared by the GEMM kernels and the 1x1 convolutions that run as GEMMs;
// only the files that call cuBLASLt include this header.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_LTHEURISTICS_H
#define PARTC_RUNTIME_CUDA_LTHEURISTICS_H

#include <cublasLt.h>

#include <cstddef>
#include <vector>

namespace partc::runtime {
enum class FusedActivation; // KernelRegistry.h
} // namespace partc::runtime

namespace partc::runtime::cuda {

/// cuBLASLt's recommended workspace on Hopper.
constexpr size_t kLtWorkspace = size_t(32) << 20;

/// The epilogue that adds a bias (one value per row of D) and applies ReLU.
cublasLtEpilogue_t ltEpilogue(bool bias, bool relu);
/// cuBLASLt's GELU epilogue is Gelu's tanh form.
cublasLtEpilogue_t ltEpilogue(bool bias, FusedActivation activation);

/// Up to `most` algorithms cuBLASLt's heuristic offers for D = A * B (+ C,
/// laid out as D), in its order, that fit kLtWorkspace and need operands
/// aligned to no more than 16 bytes (arena tensors start 64-byte aligned,
/// rows of a folded batch need not). None is not an error: callers keep
/// their other implementations.
std::vector<cublasLtMatmulAlgo_t>
ltAlgorithms(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
             cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
             cublasLtMatrixLayout_t d, int most);

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_LTHEURISTICS_H
