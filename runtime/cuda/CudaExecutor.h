//===- CudaExecutor.h - CUDA backend ----------------------------*- C++ -*-===//
//
// One stream and one arena per device of the plan, weights uploaded once,
// transfers as peer copies ordered by CUDA events. The host enqueues every
// device's work in an order that respects the channels (a receive is only
// enqueued after its send, a wait after its receive), so cross-device event
// waits always refer to recorded events.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_CUDAEXECUTOR_H
#define PARTC_RUNTIME_CUDA_CUDAEXECUTOR_H

#include "runtime/Executor.h"
#include "runtime/plan/Plan.h"

#include <memory>
#include <vector>

namespace partc::runtime {

class CudaExecutor : public Executor {
public:
  /// Number of usable GPUs, or an explanation of why there are none.
  static int deviceCount(std::string *why = nullptr);

  static Status create(const Plan &plan, const CudaOptions &options,
                       std::unique_ptr<CudaExecutor> &result,
                       const FailureOptions &failure = {});
  ~CudaExecutor() override;

  /// Runs the plan once. With `skipInputLoads`, inputs copied by an earlier
  /// run are reused (for timing compute with device-resident inputs).
  Status run(const std::vector<TensorRef> &inputs,
             const std::vector<TensorRef> &outputs,
             bool skipInputLoads = false) override;

  /// Runs the plan `iterations` times back to back, as a server streaming
  /// batches would: no device waits for the host between batches, so with a
  /// pipeline plan stage 0 starts batch k+1 while later stages finish batch
  /// k. One host thread enqueues every device's work; between the points
  /// where devices synchronize, each device's instructions replay as small
  /// CUDA graphs. Outputs hold the last batch's results.
  bool canStream() const override { return true; }
  Status runStream(const std::vector<TensorRef> &inputs,
                   const std::vector<TensorRef> &outputs, size_t iterations,
                   bool skipInputLoads = false,
                   bool keepOutputs = false) override;

  Status readState(size_t index, void *data) const override;
  Status writeState(size_t index, const void *data) override;

  /// After a run that failed on a GPU error or gave up waiting: the
  /// executor's GPU work can no longer be trusted to finish (CudaWatchdog).
  bool lost() const override;

  /// Page-locks host memory used for inputs and outputs so that copies are
  /// asynchronous DMA; undone when the executor is destroyed.
  Status registerHostMemory(void *ptr, size_t bytes) override;

  /// Kernels on the host, transfers through host memory, chains NVRTC
  /// could not compile; with details, every route and the NVRTC time.
  LoadReport loadReport() const override;
  /// Why graph capture was abandoned, if it was.
  std::vector<std::string> runNotes() const override;

  bool usesGraphs() const;

  /// Times every kernel with CUDA events from now on (launches directly,
  /// without graphs, while profiling).
  Status enableProfiling() override;
  double kernelSeconds(size_t d, size_t i) const override;
  /// The implementation tuning chose for instruction i of device d, or null.
  const char *kernelVariant(size_t d, size_t i) const override;
  /// The event overhead subtracted, and the implementations chosen.
  std::string profilingNote() const override;
  /// What an event pair around an empty kernel measured on device d; it is
  /// subtracted from each kernel's time.
  double eventOverheadSeconds(size_t d) const;

  /// Records every instruction of the following runs with CUDA events
  /// (direct launches); lastRunTrace() returns the last run's intervals,
  /// each device's relative to its own start (devices start within the
  /// host's launch skew of each other).
  Status enableTracing() override;
  std::vector<TraceEvent> lastRunTrace() const override;
  /// Records the following streamed runs (runStream) as spans: each graph
  /// segment and staging copy on the compute stream, each peer copy on the
  /// copy stream, one span per batch; lastRunTrace() returns them on one
  /// clock (devices aligned by the host's clock, to a few microseconds).
  void enableStreamTracing() override;
  /// Why graph capture was abandoned, if it was.
  const std::string &graphFailure() const { return graphFailure_; }

  /// Kernels that run on the host because no GPU kernel exists yet.
  size_t fallbackCount() const { return fallbacks_; }
  std::string fallbackSummary() const;
  /// Implementations chosen at load time by timing, with counts.
  std::string variantSummary() const;
  /// How the plan's transfers move, e.g. "2 transfers: 1 device-to-device,
  /// 1 through host memory (GPU 0 -> 1: no peer access)".
  std::string transferSummary() const;
  /// Transfers staged through host memory.
  size_t hostStagedCount() const;

  struct Impl;

private:
  CudaExecutor() = default;
  std::unique_ptr<Impl> impl_;
  size_t fallbacks_ = 0;
  std::string graphFailure_;
};

} // namespace partc::runtime

#endif // PARTC_RUNTIME_CUDA_CUDAEXECUTOR_H
