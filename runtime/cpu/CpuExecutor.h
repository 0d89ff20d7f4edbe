//===- CpuExecutor.h - Reference backend: one thread per device -----------===//
//
// Every device of the plan gets its own arena and its own thread. Transfers
// copy between the arenas and synchronize through channel flags, so a missing
// transfer or a wrong wait in a plan shows up as a wrong answer, not as a
// silent pass.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CPU_CPUEXECUTOR_H
#define PARTC_RUNTIME_CPU_CPUEXECUTOR_H

#include "runtime/Executor.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/plan/Plan.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

namespace partc::runtime {

struct CpuDeviceState;

class CpuExecutor : public Executor {
public:
  /// Prepares every kernel of the plan; fails with the device, instruction
  /// and ONNX node of the first one that cannot run.
  static Status create(const Plan &plan, std::unique_ptr<CpuExecutor> &result,
                       const FailureOptions &failure = {});
  ~CpuExecutor() override;

  /// Runs the whole plan once (inputs are always copied in).
  Status run(const std::vector<TensorRef> &inputs,
             const std::vector<TensorRef> &outputs,
             bool reuseInputs = false) override;

  Status readState(size_t index, void *data) const override;
  Status writeState(size_t index, const void *data) override;

  /// Accumulates the wall time of every kernel instruction from now on.
  Status enableProfiling() override;
  double kernelSeconds(size_t d, size_t i) const override;

  Status enableTracing() override {
    tracing_ = true;
    return Status();
  }
  /// The intervals of the last run (empty unless tracing).
  std::vector<TraceEvent> lastRunTrace() const override;

  /// Fills every arena with a byte pattern, so that reads of memory nobody
  /// wrote produce garbage (used by tests to catch missing transfers).
  void poisonArenas(uint8_t pattern);

private:
  explicit CpuExecutor(const Plan &plan);
  /// Device `device`'s part of an all_reduce group.
  Status allReduce(size_t device, const Instruction &in,
                   const std::vector<TensorRef> &sources,
                   const std::vector<TensorRef> &targets);
  Status runDevice(size_t device, const std::vector<TensorRef> &inputs,
                   const std::vector<TensorRef> &outputs);

  /// Device d has reached instruction i, which exchanges with a peer (or
  /// the end of its program), for stall reports.
  void reach(size_t d, size_t i);
  /// Carries out an injected fault on device d before instruction i, if
  /// one strikes there in this run.
  Status injectFault(size_t d, size_t i);
  /// Why the run timed out: where each device got to (mutex held).
  std::string stallReport() const;
  /// Waits (the sync mutex held by `lock`) until `ready` holds, or until
  /// the step's deadline, where the first waiter aborts the run with
  /// stallReport().
  template <typename Ready>
  void waitLocked(std::unique_lock<std::mutex> &lock, Ready ready);
  const Plan &plan_;
  FailureOptions failure_;
  size_t faultAt_ = 0;
  size_t runs_ = 0;
  std::vector<std::unique_ptr<CpuDeviceState>> devices_;
  struct Sync;
  std::unique_ptr<Sync> sync_;
  /// For each channel, the device and buffer its send reads from.
  std::vector<std::pair<size_t, BufferRef>> channelSources_;
  bool profiling_ = false;
  bool tracing_ = false;
  std::chrono::steady_clock::time_point runStart_;
  std::vector<std::vector<TraceEvent>> trace_;
  size_t profiledRuns_ = 0;
  std::vector<std::vector<double>> kernelTimes_;
};

} // namespace partc::runtime

#endif // PARTC_RUNTIME_CPU_CPUEXECUTOR_H
