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

#include "runtime/plan/Plan.h"

#include <memory>
#include <vector>

namespace partc::runtime {

struct CudaOptions {
  /// Allow TF32 tensor cores for fp32 matrix and convolution work.
  bool tf32 = true;
  /// First GPU to use; plan device d runs on GPU firstGpu + d /
  /// devicesPerGpu.
  int firstGpu = 0;
  /// Plan devices per GPU, each with its own stream, arena and library
  /// handles (weights are shared): a data-parallel plan for K x N devices
  /// then runs K replicas side by side on each of N GPUs, whose kernels
  /// overlap where one alone would leave the GPU partly idle (small
  /// batches).
  int devicesPerGpu = 1;
  /// Capture the whole schedule as one CUDA graph after a first, direct run
  /// and replay it (unless a kernel runs on the host).
  bool graphs = true;
  /// Let kernels pick, by timing at load, implementations that fuse their
  /// epilogue (cuBLASLt for 1x1 convolutions, cuDNN's fused convolution).
  bool fuseEpilogues = true;
  /// Let convolutions also time the engine configurations of cuDNN's graph
  /// API (CudnnGraphConv.h) beside the legacy API's algorithms.
  bool cudnnGraph = true;
  /// With cudnnGraph: also time the heuristic's first engine configurations
  /// with one knob (split-K slices, tile shape...) moved at a time.
  bool cudnnKnobs = true;
  /// Compile each fused element-wise chain with NVRTC at load
  /// (ChainCodegen.h) instead of interpreting its program.
  bool generatedChains = true;
  /// Streaming: let the sender's kernels write a transferred value straight
  /// into the buffer the peer copy reads, and the receiver's read the one
  /// it lands in, where the memory plan allows (no staging or landing copy).
  bool directTransfers = true;
  /// Stage every transfer that is not NCCL's through page-locked host
  /// memory, as is done anyway between GPUs without peer access (so that
  /// path can be checked on machines whose GPUs all reach each other).
  bool hostStaging = false;
};

class CudaExecutor {
public:
  /// Number of usable GPUs, or an explanation of why there are none.
  static int deviceCount(std::string *why = nullptr);

  static Status create(const Plan &plan, const CudaOptions &options,
                       std::unique_ptr<CudaExecutor> &result);
  ~CudaExecutor();

  /// Runs the plan once. With `skipInputLoads`, inputs copied by an earlier
  /// run are reused (for timing compute with device-resident inputs).
  Status run(const std::vector<TensorRef> &inputs,
             const std::vector<TensorRef> &outputs,
             bool skipInputLoads = false);

  /// Runs the plan `iterations` times back to back, as a server streaming
  /// batches would: no device waits for the host between batches, so with a
  /// pipeline plan stage 0 starts batch k+1 while later stages finish batch
  /// k. One host thread enqueues every device's work; between the points
  /// where devices synchronize, each device's instructions replay as small
  /// CUDA graphs. Outputs hold the last batch's results.
  Status runStream(const std::vector<TensorRef> &inputs,
                   const std::vector<TensorRef> &outputs, size_t iterations,
                   bool skipInputLoads = false);

  /// Page-locks host memory used for inputs and outputs so that copies are
  /// asynchronous DMA; undone when the executor is destroyed.
  Status registerHostMemory(void *ptr, size_t bytes);

  bool usesGraphs() const;

  /// Times every kernel with CUDA events from now on (launches directly,
  /// without graphs, while profiling).
  Status enableProfiling();
  double kernelSeconds(size_t d, size_t i) const;
  /// The implementation tuning chose for instruction i of device d, or null.
  const char *kernelVariant(size_t d, size_t i) const;
  /// What an event pair around an empty kernel measured on device d; it is
  /// subtracted from each kernel's time.
  double eventOverheadSeconds(size_t d) const;

  /// Records every instruction of the following runs with CUDA events
  /// (direct launches); lastRunTrace() returns the last run's intervals,
  /// each device's relative to its own start (devices start within the
  /// host's launch skew of each other).
  Status enableTracing();
  std::vector<TraceEvent> lastRunTrace() const;
  /// Records the following streamed runs (runStream) as spans: each graph
  /// segment and staging copy on the compute stream, each peer copy on the
  /// copy stream, one span per batch; lastRunTrace() returns them on one
  /// clock (devices aligned by the host's clock, to a few microseconds).
  void enableStreamTracing();
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
