//===- FuzzRun.h - Runs a small verified plan on the CPU reference --------===//
//
// Shared by the fuzz targets that end in a plan: a plan that verified must
// also run without a sanitizer report. Large plans are skipped so that one
// execution stays in milliseconds.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_TEST_FUZZ_FUZZRUN_H
#define PARTC_TEST_FUZZ_FUZZRUN_H

#include "runtime/Executor.h"
#include "runtime/io/TestData.h"
#include "runtime/plan/Plan.h"

namespace partc::fuzz {

inline void runSmallPlan(const runtime::Plan &plan) {
  constexpr uint64_t kMaxBytes = 4 << 20;
  constexpr size_t kMaxInstructions = 4096;
  uint64_t bytes = 0;
  size_t instructions = 0;
  for (const runtime::DeviceProgram &d : plan.devices) {
    bytes += d.arenaBytes + d.stateBytes;
    instructions += d.instructions.size();
  }
  for (const auto &decls : {plan.inputs, plan.outputs})
    for (const runtime::TensorDecl &d : decls)
      bytes += d.type.byteSize();
  if (bytes > kMaxBytes || instructions > kMaxInstructions)
    return;
  std::vector<runtime::HostTensor> inputs;
  if (!runtime::loadInputs(plan, {}, "", /*seed=*/1, inputs).ok())
    return;
  std::vector<runtime::HostTensor> outputs = runtime::allocateOutputs(plan);
  std::unique_ptr<runtime::Executor> exec;
  runtime::ExecutorOptions options;
  if (!runtime::createExecutor(plan, options, exec).ok())
    return;
  std::vector<runtime::TensorRef> in, out;
  for (auto &t : inputs)
    in.push_back(t.ref());
  for (auto &t : outputs)
    out.push_back(t.ref());
  (void)exec->run(in, out);
}

} // namespace partc::fuzz

#endif // PARTC_TEST_FUZZ_FUZZRUN_H
