//===- FusedElementwise.h - Programs of fused element-wise chains --------===//
//
// partc-fuse-elementwise replaces a chain of f32 element-wise ops by one
// `fused_elementwise` kernel whose attributes hold a small program: `steps`
// names each step's operation (comma-separated in the plan) and `args`
// lists the operands of every step in order, k >= 0 being the kernel's
// input k and k < 0 the result of step -k-1. The last step is the output.
// Inputs broadcast to the output's shape numpy-style. The CPU and GPU
// kernels and the compiler's verifier share this vocabulary and its limits.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_FUSEDELEMENTWISE_H
#define PARTC_RUNTIME_KERNELS_FUSEDELEMENTWISE_H

#include "runtime/Support.h"
#include "runtime/kernels/Attrs.h"
#include "runtime/kernels/FusedSteps.h"

#include <cstdint>
#include <string>
#include <vector>

namespace partc::runtime::fused {

/// The step named `name` (a graph op mnemonic, or "gelu_tanh"); false if
/// such a step does not exist.
bool stepFromName(const std::string &name, Step &step);
const char *stepName(Step step);
inline int arity(Step step) { return step >= Step::Add ? 2 : 1; }

struct Program {
  std::vector<Step> steps;
  /// Per step, its operands (the second is unused for unary steps).
  std::vector<int> lhs, rhs;
};

/// Decodes and checks `steps` and `args` for `numInputs` inputs; every input
/// must be read and every step but the last must be read by a later one.
Status parseProgram(const std::string &steps, const std::vector<int64_t> &args,
                    int numInputs, Program &program);
/// The same from a kernel's attributes.
Status parseProgram(const AttrMap &attrs, int numInputs, Program &program);

/// One step on f32 values, exactly as the unfused CPU kernels compute it.
float applyStep(Step step, float a, float b);

} // namespace partc::runtime::fused

#endif // PARTC_RUNTIME_KERNELS_FUSEDELEMENTWISE_H
