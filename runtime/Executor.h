//===- Executor.h - One interface for every backend -------------*- C++ -*-===//
//
// A backend runs a verified plan: the CPU reference (runtime/cpu) and CUDA
// (runtime/cuda) implement this interface, and createExecutor makes the
// one the options name, so tools never see which backend runs.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_EXECUTOR_H
#define PARTC_RUNTIME_EXECUTOR_H

#include "runtime/plan/Plan.h"

#include <memory>
#include <string>
#include <vector>

namespace partc::runtime {

/// The CUDA backend's options; the CPU backend ignores them.
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
  /// API (CudnnGraphConv.h) beside the legacy API's algorithms, and fused
  /// attention cuDNN's fused-attention plans (CudnnAttention.h) beside
  /// partc's kernel.
  bool cudnnGraph = true;
  /// With cudnnGraph: also time the heuristic's first engine configurations
  /// with one knob (split-K slices, tile shape...) moved at a time.
  bool cudnnKnobs = true;
  /// Identical kernels of a device (same kernel, attributes and types) pool
  /// their tuning times and take one implementation (TunedTwins.h), rather
  /// than each its own pick from one noisy timing.
  bool poolTwins = true;
  /// Run kernels the plan puts on streams other than 0 (independent
  /// branches, partc-assign-streams) on side streams of their device.
  bool branchStreams = true;
  /// Compile each fused element-wise chain with NVRTC at load
  /// (ChainCodegen.h) instead of interpreting its program.
  bool generatedChains = true;
  /// Streaming: let the sender's kernels write a transferred value straight
  /// into the buffer the peer copy reads, and the receiver's read the one
  /// it lands in, where the memory plan allows (no staging or landing copy).
  bool directTransfers = true;
  /// Also time form 1 of partc's convolution over few input channels
  /// (FewChannelConv.cu), written in session 45 after its last device
  /// time: off until its GPU test has passed.
  bool fewChannelRows = false;
  /// Print each tuned kernel's candidate times and its pick at load (to
  /// stderr), to see why a kernel runs the implementation it does.
  bool logTuning = false;
  /// In captured graphs, run the small fills that libraries enqueue as
  /// memsets (cuBLASLt's and cuDNN's counters, cleared before some of their
  /// kernels) as kernel nodes: a memset node between two kernels idles the
  /// GPU several microseconds, a kernel node about one.
  bool fillKernels = true;
  /// Stage every transfer that is not NCCL's through page-locked host
  /// memory, as is done anyway between GPUs without peer access (so that
  /// path can be checked on machines whose GPUs all reach each other).
  bool hostStaging = false;
};

/// A failure made on purpose (partc-run --inject-fault), to check that a
/// run which loses a device ends with a message naming it instead of
/// hanging. It strikes device `device` in run `run` (1-based: a training
/// plan's step) just before the device's first wait for another device (an
/// all_reduce, a receive), or at its program's end if it has none, so that
/// its peers are left waiting for it.
struct FaultInjection {
  enum class Kind {
    None,
    /// A kernel error: on a GPU a device-side trap, which leaves that GPU
    /// unusable to the process, as an illegal address does; on the CPU the
    /// device's thread fails.
    Error,
    /// The device stops making progress: a kernel that spins (GPU) or a
    /// thread that blocks (CPU) until the run is given up.
    Hang,
  };
  Kind kind = Kind::None;
  size_t device = 0;
  size_t run = 1;
};

/// How runs end when a device fails or stops.
struct FailureOptions {
  /// A run still unfinished after this many seconds is given up with a
  /// report of where each device got to; 0: wait forever; negative: the
  /// backend's default (kDefaultGpuStepTimeout on GPUs, whose devices can
  /// wait for a peer forever; none on the CPU, whose kernels always end and
  /// whose reference steps of large models take minutes).
  double stepTimeoutSeconds = -1;
  FaultInjection fault;
};

/// Generous: a step of a large model on a slow GPU takes seconds.
constexpr double kDefaultGpuStepTimeout = 300;

struct ExecutorOptions {
  /// "cpu" or "cuda" (availableBackends()).
  std::string backend = "cpu";
  CudaOptions cuda;
  FailureOptions failure;
};

/// What a backend has to say after loading a plan; the tool prints it.
struct LoadReport {
  /// Worth a note whatever the verbosity: kernels on the host, transfers
  /// staged through host memory, generated code that fell back.
  std::vector<std::string> notes;
  /// Details for --summary: transfer routes, code generation time.
  std::vector<std::string> details;
};

class Executor {
public:
  virtual ~Executor();

  /// Runs the plan once. `inputs` and `outputs` follow the plan's
  /// declarations and have exactly their types. With `reuseInputs`, a
  /// backend that keeps inputs on its devices (CUDA) reuses those of the
  /// previous run (for timing compute with device-resident inputs).
  virtual Status run(const std::vector<TensorRef> &inputs,
                     const std::vector<TensorRef> &outputs,
                     bool reuseInputs = false) = 0;

  /// Runs `iterations` batches back to back, as a server would: pipeline
  /// stages overlap consecutive batches. Outputs hold the last batch's;
  /// with `keepOutputs` they stay on the devices and `outputs` is not
  /// written (for timing compute as a framework that returns device
  /// tensors).
  virtual bool canStream() const { return false; }
  virtual Status runStream(const std::vector<TensorRef> &inputs,
                           const std::vector<TensorRef> &outputs,
                           size_t iterations, bool reuseInputs = false,
                           bool keepOutputs = false);

  /// Lets the backend prepare host buffers it will copy often (CUDA
  /// page-locks them).
  virtual Status registerHostMemory(void *, size_t) { return Status(); }

  /// Copies state `index` (Plan::states) out to `data` (its bytes) or in
  /// from it: how partc-run saves and resumes training.
  virtual Status readState(size_t index, void *data) const = 0;
  virtual Status writeState(size_t index, const void *data) = 0;

  /// Whether a failed run left a device that nothing can use again in this
  /// process (a GPU whose context holds a kernel error, GPU work that could
  /// not be cancelled): the caller reports the error and exits at once.
  virtual bool lost() const { return false; }

  virtual LoadReport loadReport() const { return {}; }
  /// Notes after running, e.g. why CUDA graph capture was abandoned.
  virtual std::vector<std::string> runNotes() const { return {}; }

  /// Times every kernel of the following runs.
  virtual Status enableProfiling() = 0;
  /// Mean seconds per run of instruction `i` of device `d` (kernels only).
  virtual double kernelSeconds(size_t d, size_t i) const = 0;
  /// The implementation chosen at load for instruction `i` of device `d`,
  /// or null.
  virtual const char *kernelVariant(size_t, size_t) const { return nullptr; }
  /// A note on how profiling measures, if any (printed once).
  virtual std::string profilingNote() const { return ""; }

  /// Records every instruction's interval in each following run.
  virtual Status enableTracing() = 0;
  /// Records the following streamed runs instead.
  virtual void enableStreamTracing() {}
  /// The intervals of the last (traced) run.
  virtual std::vector<TraceEvent> lastRunTrace() const = 0;
};

/// Fills `data` (state `index`'s bytes) with its value at load: zeros or
/// the plan's weights. Every backend initializes state this way.
void initialStateBytes(const Plan &plan, size_t index, void *data);

/// The backends of this build: "cpu", and "cuda" where it was built with a
/// CUDA toolkit.
std::vector<std::string> availableBackends();

/// Whether `failure` can be carried out on a plan of `devices` devices
/// (the fault's device exists; an injected hang has a timeout to end it).
Status checkFaultInjection(const FailureOptions &failure, size_t devices);

/// Prepares `plan` to run on the backend the options name; fails with the
/// device, instruction and ONNX node of the first kernel that cannot run.
Status createExecutor(const Plan &plan, const ExecutorOptions &options,
                      std::unique_ptr<Executor> &result);

} // namespace partc::runtime

#endif // PARTC_RUNTIME_EXECUTOR_H
