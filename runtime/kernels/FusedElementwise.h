//===- FusedElementwise.h - Programs of fused element-wise chains --------===//
//
// partc-fuse-elementwise replaces a chain of f32 element-wise ops by one
// `fused_elementwise` kernel whose attributes hold a small program: `steps`
// names each step's operation (comma-separated in the plan), `args` lists
// the operands of every step in order, k >= 0 being the kernel's input k
// and k < 0 the result of step -k-1, and `params` the float parameters of
// the steps that take any, in step order. The last step is the output.
// Inputs broadcast to the output's shape numpy-style. The CPU and GPU
// kernels and the compiler's verifier share this vocabulary and its limits.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_FUSEDELEMENTWISE_H
#define PARTC_RUNTIME_KERNELS_FUSEDELEMENTWISE_H

#include "runtime/Support.h"
#include "runtime/kernels/Attrs.h"
#include "runtime/kernels/ElementwiseOps.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace partc::runtime::fused {

using ew::Step;

/// The step named `name` (ew::StepInfo::name); false if there is none.
bool stepFromName(const std::string &name, Step &step);

/// The step that kernel `kernel` with `attrs` computes, and its parameters
/// read from `attrs`; an error where the kernel is no single step or lacks
/// an attribute the step reads. `gelu` is Gelu or GeluTanh by its
/// `approximate` attribute.
Status stepOfKernel(const std::string &kernel, const AttrMap &attrs, Step &step,
                    double (&params)[2]);

struct Program {
  std::vector<Step> steps;
  /// Per step, its operands (the second is unused for unary steps).
  std::vector<int> lhs, rhs;
  /// Per step, its parameters (zeros where it takes none).
  std::vector<std::array<double, 2>> params;
};

/// Decodes and checks `steps`, `args` and `params` for `numInputs` inputs;
/// every input must be read and every step but the last must be read by a
/// later one.
Status parseProgram(const std::string &steps, const std::vector<int64_t> &args,
                    const std::vector<double> &params, int numInputs,
                    Program &program);
/// The same from a kernel's attributes.
Status parseProgram(const AttrMap &attrs, int numInputs, Program &program);

/// The program's inputs of a fused_elementwise kernel with `operands`: its
/// `concat_parts` attribute (default 1) counts the leading operands that
/// are concatenated along their last axis into input 0 (`parts`); the
/// others follow. An error where the parts do not concatenate.
Status programInputs(const AttrMap &attrs,
                     const std::vector<TensorType> &operands, int &parts,
                     std::vector<TensorType> &inputs);

} // namespace partc::runtime::fused

#endif // PARTC_RUNTIME_KERNELS_FUSEDELEMENTWISE_H
