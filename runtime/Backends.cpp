//===- Backends.cpp - The executor of a backend, by name ------------------===//
//
// The one place that knows which backends this build has: the CPU reference
// always, CUDA where CMake found a toolkit (PARTC_HAVE_CUDA).
//
//===----------------------------------------------------------------------===//
#include "runtime/Executor.h"
#include "runtime/cpu/CpuExecutor.h"
#ifdef PARTC_HAVE_CUDA
#include "runtime/cuda/CudaExecutor.h"
#endif

namespace partc::runtime {

std::vector<std::string> availableBackends() {
#ifdef PARTC_HAVE_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

Status createExecutor(const Plan &plan, const ExecutorOptions &options,
                      std::unique_ptr<Executor> &result) {
  if (options.backend == "cpu") {
    std::unique_ptr<CpuExecutor> cpu;
    PARTC_RETURN_IF_ERROR(CpuExecutor::create(plan, cpu, options.failure));
    // Memory no instruction wrote reads as NaN, so a missing transfer shows.
    cpu->poisonArenas(0xFF);
    result = std::move(cpu);
    return Status();
  }
#ifdef PARTC_HAVE_CUDA
  if (options.backend == "cuda") {
    std::unique_ptr<CudaExecutor> gpu;
    PARTC_RETURN_IF_ERROR(
        CudaExecutor::create(plan, options.cuda, gpu, options.failure));
    result = std::move(gpu);
    return Status();
  }
#endif
  std::string names;
  for (const std::string &b : availableBackends())
    names += (names.empty() ? "" : ", ") + b;
  return Status::error("backend '" + options.backend +
                       "' is not available in this build (available: " + names +
                       ")");
}

} // namespace partc::runtime
