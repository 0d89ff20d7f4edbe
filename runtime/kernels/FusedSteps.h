//===- FusedSteps.h - Operations of fused element-wise chains ---*- C++ -*-===//
//
// The step vocabulary of fused_elementwise programs. Kept free of includes:
// the CUDA backend hands this file to NVRTC, which compiles the code it
// generates for each chain without the system headers.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_FUSEDSTEPS_H
#define PARTC_RUNTIME_KERNELS_FUSEDSTEPS_H

namespace partc::runtime::fused {

/// Kept small so that a GPU kernel takes the whole program as a launch
/// parameter.
constexpr int kMaxSteps = 16;
constexpr int kMaxInputs = 8;
constexpr int kMaxRank = 6;

enum class Step : unsigned char {
  // Unary.
  Relu,
  Sigmoid,
  Tanh,
  Erf,
  Sqrt,
  Neg,
  Exp,
  Log,
  Abs,
  Reciprocal,
  Floor,
  Ceil,
  Sin,
  Cos,
  Gelu,
  GeluTanh,
  // Binary.
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Min,
  Max,
};

} // namespace partc::runtime::fused

#endif // PARTC_RUNTIME_KERNELS_FUSEDSTEPS_H
