//===- Kernel.h - CPU kernel interface ------------------------------------===//
//
// A kernel is created once per plan instruction at load time, where it checks
// its attributes and operand types, and then run many times. Creation errors
// are how a corrupt or unsupported plan is reported without crashing.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_KERNEL_H
#define PARTC_RUNTIME_KERNELS_KERNEL_H

#include "runtime/Support.h"
#include "runtime/kernels/Attrs.h"

#include <memory>
#include <string>
#include <vector>

namespace partc::runtime {

class Kernel {
public:
  virtual ~Kernel();
  /// Runs on operands whose types were checked at creation.
  virtual Status run(const std::vector<TensorRef> &inputs,
                     const std::vector<TensorRef> &outputs) = 0;
};

/// Creates the CPU kernel `name` or explains why it cannot.
/// An error naming the first required attribute a kernel factory looked up
/// in `attrs` and did not find (AttrMap::firstMissing), if any.
Status missingAttribute(const AttrMap &attrs);

Status createCpuKernel(const std::string &name, const AttrMap &attrs,
                       const std::vector<TensorType> &inputs,
                       const std::vector<TensorType> &outputs,
                       std::unique_ptr<Kernel> &result);

/// True when a CPU kernel of that name exists.
bool hasCpuKernel(const std::string &name);

/// Names of every CPU kernel, sorted.
std::vector<std::string> cpuKernelNames();

/// A stable key for one kernel invocation: name, parameters and operand
/// types. Profiles written by partc-run and cost tables read by partc
/// compile match on it.
std::string kernelSignature(const std::string &name, const AttrMap &attrs,
                            const std::vector<TensorType> &inputs,
                            const std::vector<TensorType> &outputs);

/// Keeps OpenBLAS to the calling thread while it lives. The CPU executor's
/// device threads call it side by side: OpenBLAS's one pool of threads,
/// shared by concurrent callers, has given wrong results in such programs
/// (OpenBLAS issues 1755 and 2126), and each caller's pool would also
/// oversubscribe the cores.
class SingleThreadedBlas {
public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas &) = delete;
  SingleThreadedBlas &operator=(const SingleThreadedBlas &) = delete;

private:
  int previous_;
};

} // namespace partc::runtime

#endif // PARTC_RUNTIME_KERNELS_KERNEL_H
