//===- ExecutorImpl.h - The CUDA executor's state (internal) ---*- C++ -*-===//
//
// CudaExecutor::Impl and its helpers, shared by the executor's files:
// CudaExecutor.cpp (setup and launches), CudaTransfers.cpp (NCCL and host
// staging), CudaStreaming.cpp (graph capture and streamed batches),
// CudaCollectives.cpp (all-reduces), CudaBranches.cpp (branches on side
// streams), CudaProfiling.cpp (profiling and tracing) and CudaWatchdog.cpp
// (the end of a run: errors, stalls, NCCL aborts).
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_EXECUTORIMPL_H
#define PARTC_RUNTIME_CUDA_EXECUTORIMPL_H

#include "runtime/cuda/ChainCodegen.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/Kernel.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#ifdef PARTC_HAVE_NCCL
#include <nccl.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

namespace partc::runtime {

using namespace cuda;

namespace cuda::executor {

/// Runs a CPU kernel on copies of the operands: correct, slow, counted.
class HostFallbackKernel : public GpuKernel {
public:
  explicit HostFallbackKernel(std::unique_ptr<Kernel> cpu)
      : cpu_(std::move(cpu)) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    // Every copy goes through the device's own stream: the legacy default
    // stream does not order against non-blocking streams.
    std::vector<std::vector<uint8_t>> hin(in.size()), hout(out.size());
    std::vector<TensorRef> rin, rout;
    for (size_t i = 0; i < in.size(); ++i) {
      hin[i].resize(in[i].type.byteSize());
      PARTC_RETURN_IF_ERROR(
          cudaStatus(cudaMemcpyAsync(hin[i].data(), in[i].data, hin[i].size(),
                                     cudaMemcpyDeviceToHost, ctx.stream),
                     "host fallback"));
      rin.push_back({hin[i].data(), in[i].type});
    }
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaStreamSynchronize(ctx.stream), "host fallback"));
    for (size_t i = 0; i < out.size(); ++i) {
      hout[i].resize(out[i].type.byteSize());
      rout.push_back({hout[i].data(), out[i].type});
    }
    PARTC_RETURN_IF_ERROR(cpu_->run(rin, rout));
    for (size_t i = 0; i < out.size(); ++i)
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaMemcpyAsync(out[i].data, hout[i].data(), hout[i].size(),
                          cudaMemcpyHostToDevice, ctx.stream),
          "host fallback"));
    // The host buffers die here; wait until the copies have read them.
    return cudaStatus(cudaStreamSynchronize(ctx.stream), "host fallback");
  }
  bool capturable() const override { return false; }

private:
  std::unique_ptr<Kernel> cpu_;
};

/// Holds a stream until the host has queued the work behind it, so that
/// kernels timed between events run back to back on the GPU instead of at
/// the pace of the host's launches (which would count the launch gaps as
/// kernel time at small batches). The stream waits in a one-thread kernel
/// polling a word of mapped host memory rather than in a host callback:
/// callbacks of all streams share one thread, so one device's gate would
/// hold back every other device.
class LaunchGates {
public:
  LaunchGates(cudaStream_t stream, volatile unsigned *word, unsigned &count)
      : stream_(stream), word_(word), count_(count) {}
  LaunchGates(const LaunchGates &) = delete;
  LaunchGates &operator=(const LaunchGates &) = delete;
  ~LaunchGates() { release(); }
  /// Closes the stream at this point.
  Status arm() {
    release();
    ++count_;
    armed_ = true;
    launches_ = 0;
    // Bounded: should a library call block the host on this stream (an
    // implicit synchronization), the gate opens by itself and only that
    // stretch's timing suffers.
    return cudaStatus(launchHostGate(const_cast<const unsigned *>(word_),
                                     count_, kTimeoutNs, stream_),
                      "profile gate");
  }
  /// Counts a launch; a stream only holds so many pending launches before
  /// the next one blocks the host, so long stretches are let go in parts.
  Status launched() {
    if (++launches_ < kMaxHeldLaunches)
      return Status();
    return arm();
  }
  /// Lets the stream run (before the host blocks on anything).
  void release() {
    if (!armed_)
      return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *word_ = count_;
    armed_ = false;
  }

private:
  static constexpr int kMaxHeldLaunches = 128;
  static constexpr uint64_t kTimeoutNs = 50'000'000;
  cudaStream_t stream_;
  volatile unsigned *word_;
  unsigned &count_;
  bool armed_ = false;
  int launches_ = 0;
};

/// Replaces the graph's small 1-D memset nodes (the 4-byte counters that
/// cuBLASLt and cuDNN clear before some of their kernels) by kernel nodes
/// that fill the same bytes: between two kernels a memset node idles the
/// GPU about 4 us, a kernel node about 1 (CudaStreaming.cpp).
Status fillWithKernels(cudaGraph_t graph);

/// Ends the capture on `stream` and instantiates it, unless enqueueing
/// failed (`enqueued`), in which case the partial graph is dropped.
/// `fillKernels`: fillWithKernels first.
inline Status endCapture(cudaStream_t stream, const Status &enqueued,
                         cudaGraphExec_t &exec, bool fillKernels) {
  cudaGraph_t graph = nullptr;
  cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!enqueued.ok()) {
    if (graph)
      cudaGraphDestroy(graph);
    return enqueued;
  }
  PARTC_RETURN_IF_ERROR(cudaStatus(end, "end capture"));
  Status filled = fillKernels ? fillWithKernels(graph) : Status();
  if (!filled.ok()) {
    cudaGraphDestroy(graph);
    return filled;
  }
  cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  return cudaStatus(inst, "instantiate graph");
}

/// The host buffers a captured graph copies from and to.
inline std::vector<void *> hostPointers(const std::vector<TensorRef> &inputs,
                                        const std::vector<TensorRef> &outputs) {
  std::vector<void *> pointers;
  for (const TensorRef &t : inputs)
    pointers.push_back(t.data);
  for (const TensorRef &t : outputs)
    pointers.push_back(t.data);
  return pointers;
}

} // namespace cuda::executor

using namespace cuda::executor;

struct CudaExecutor::Impl {
  const Plan *plan = nullptr;
  struct Device {
    DeviceContext ctx;
    uint8_t *arena = nullptr;
    uint8_t *weights = nullptr;
    /// Training state, updated in place by kernels (never shared).
    uint8_t *state = nullptr;
    bool ownsWeights = true;
    std::vector<std::unique_ptr<GpuKernel>> kernels;
    /// Branch streams (CudaBranches.cpp): side stream s - 1 runs the
    /// kernels of plan stream s > 0, with its own cuBLAS handle and
    /// workspace (cuDNN's handle is lent to it around each kernel).
    struct Side {
      cudaStream_t stream = nullptr;
      cublasHandle_t cublas = nullptr;
      void *workspace = nullptr;
      /// Recorded on the main stream where the side stream starts after a
      /// join, and on the side stream where the main stream joins it.
      cudaEvent_t fork = nullptr, join = nullptr;
      bool forked = false, pending = false;
    };
    std::vector<Side> sides;
    /// Per instruction: (stream, earlier instruction) it waits for; the
    /// event recorded after an instruction that another stream waits for.
    std::vector<std::vector<StreamWait>> branchWaits;
    std::vector<cudaEvent_t> branchDone;
  };
  std::vector<Device> devices;
  /// Per channel: recorded on the source after its send, and where the
  /// source's buffer has been read (after the copy, see Route).
  std::vector<cudaEvent_t> ready, consumed;
  /// How a channel's bytes move: one device-to-device copy by the receiver
  /// where the GPUs reach each other; where they cannot (or with
  /// CudaOptions::hostStaging), a copy into page-locked host memory on the
  /// source's sending stream and one out of it on the receiver's; through
  /// NCCL where the plan says so. "consumed" is recorded on the receiver's
  /// stream for a peer copy and on the source's sending stream otherwise.
  enum class Route { Peer, Host, Nccl };
  std::vector<Route> routes;
  /// Host route: page-locked buffers per channel, one per batch parity
  /// (a single run uses the first).
  std::vector<std::array<void *, 2>> bounce;
  /// Per device: the stream on which host-staged and NCCL transfers out of
  /// it run, so they need not wait behind its later kernels, and the event
  /// that joins that stream back into a graph capture.
  std::vector<cudaStream_t> sendStreams;
  std::vector<cudaEvent_t> sendJoins;
  std::mutex sendMutex;
  /// Why the host route was taken, for the summary.
  std::string hostReason;
  std::vector<std::pair<size_t, BufferRef>> channelSources;
  std::map<std::string, size_t> fallbackKinds;
  /// Implementations chosen by tuning, e.g. "conv cublaslt-fused" -> 32.
  std::map<std::string, size_t> variants;
  std::vector<void *> registered;
  // Host-side record of which events have been recorded this run.
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<bool> sent, received;
  bool aborted = false;

  /// CUDA graphs of the whole schedule, without and with input loads.
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    /// Instead, one graph per device, replayed by a thread per device
    /// (see devicesMeetOnlyInNccl).
    std::vector<cudaGraphExec_t> perDevice;
    std::vector<void *> pointers;
  };
  Graph graphs[2];
  bool useGraphs = false;
  /// Streaming: each device's schedule as segments of instructions that
  /// need no other device, each replayed as a graph (when graphs are used).
  /// A run of local instructions between transfers; its graph per batch
  /// parity (the same one twice unless a redirect falls in the run).
  struct Segment {
    size_t begin, end;
    cudaGraphExec_t exec[2] = {nullptr, nullptr};
  };
  struct StreamGraphs {
    std::vector<std::vector<Segment>> segments; // per device
    std::vector<void *> pointers;
    bool built = false;
  };
  /// By skipInputLoads + 2 x keepOutputs.
  StreamGraphs streamGraphs[4];
  /// Streaming receives land in one of two slots per channel (by batch
  /// parity) on the receiver's copy stream, so a transfer overlaps the
  /// receiver's work on the previous batch; the compute stream then copies
  /// the slot into the arena. Events: slot filled, slot free again.
  ///
  /// The sender, in turn, copies what it sends into one of two staging
  /// buffers of its own in stream order, so that its next batch may
  /// overwrite the arena at once instead of waiting for the transfer (the
  /// plan's wait_consumed then has nothing left to wait for). Events:
  /// staged (the staging buffer holds the batch; the sender's), pulled (the
  /// receiver has copied it out; the receiver's).
  ///
  /// Where the memory plan keeps a channel's value in one arena range for
  /// a window of instructions, the streamed graphs of batch parity p
  /// address stage[p] (sender) or slot[p] (receiver) in its place: the
  /// sender's kernels then write straight into what the peer copy reads and
  /// the receiver's read what it wrote, with no local copy (direct). The
  /// sender waits for pulled[p] as its batch starts; the receiver records
  /// free[p] as its batch ends.
  struct Landing {
    uint8_t *slot[2] = {nullptr, nullptr};
    cudaEvent_t filled[2] = {nullptr, nullptr}, free[2] = {nullptr, nullptr};
    uint8_t *stage[2] = {nullptr, nullptr};
    cudaEvent_t staged[2] = {nullptr, nullptr}, pulled[2] = {nullptr, nullptr};
    /// Host route: the copy into host memory is done (the sender's).
    cudaEvent_t bounced[2] = {nullptr, nullptr};
    bool directSend = false, directRecv = false;
  };
  std::vector<Landing> landings; // per channel
  struct Redirect {
    uint64_t begin, end; // arena bytes
    size_t first, last;  // instruction window
    uint8_t *target[2];
  };
  std::vector<std::vector<Redirect>> redirects; // per device
  /// The batch parity being enqueued or captured while streaming, else -1.
  int streamParity = -1;
  /// While a streamed run keeps its outputs on the devices: output stores
  /// enqueue nothing (nor are they captured).
  bool skipOutputStores = false;
  bool directTransfers = true;
  void planRedirects();
  void *resolveAt(size_t d, size_t i, const BufferRef &b) {
    if (streamParity >= 0 && b.space == MemorySpace::Arena)
      for (const Redirect &r : redirects[d])
        if (i >= r.first && i <= r.last && b.offset >= r.begin &&
            b.offset + b.type.byteSize() <= r.end)
          return r.target[streamParity] + (b.offset - r.begin);
    return resolve(devices[d], b);
  }
  std::vector<cudaStream_t> copyStreams; // per device
  Status prepareLandings();
  /// NCCL channels: one communicator per device (plan device d is rank d).
  /// The receiver enqueues both halves of a transfer, the send on the
  /// source's sending stream after the value is ready, under sendMutex,
  /// because communicators are not thread-safe.
  bool usesNccl = false;
#ifdef PARTC_HAVE_NCCL
  std::vector<ncclComm_t> comms;
#endif
  Status initNccl();
  Status createSendStreams();
  /// Enqueues `bytes` from `from` on device `srcDev` to `to` on device
  /// `dstDev` through NCCL: the send on `sending` (the source's), the
  /// receive on `receiving` (the destination's).
  Status ncclTransfer(size_t srcDev, const void *from, cudaStream_t sending,
                      size_t dstDev, void *to, cudaStream_t receiving,
                      size_t bytes);
  Status enqueueNcclTransfer(size_t d, const Instruction &recv);

  /// all_reduce groups (each a bucket of one or more buffers, exchanged in
  /// one NCCL group). Each device of a group records `ready` on its
  /// stream when it reaches the group; the last to arrive enqueues the
  /// whole collective on the devices' communication streams, so that it
  /// overlaps the rest of the backward pass (as DDP's buckets do): through
  /// NCCL where every plan device has a GPU of its own (the plan's devices
  /// are the communicator's ranks), else as a kernel per device that reads
  /// every device's input over peer access. Each records `done` there. A
  /// device's compute stream waits for every device's `done` of a group
  /// before the first later instruction that reads its average or writes
  /// over its input or average (`waitBefore`), and at the end of the run.
  struct Collective {
    std::vector<size_t> devices;
    /// By position in `devices`, then by place in the bucket.
    std::vector<std::vector<BufferRef>> sources, targets;
    std::vector<cudaEvent_t> ready, done;
    bool nccl = false;
  };
  std::map<uint32_t, Collective> collectives;
  /// Per device and instruction: the groups to wait for before it.
  std::vector<std::vector<std::vector<uint32_t>>> waitBefore;
  /// Per device: the stream collectives run on, and an event that joins
  /// it back into the compute stream.
  std::vector<cudaStream_t> commStreams;
  std::vector<cudaEvent_t> commJoins;
  /// Makes device d's compute stream wait for the groups that instruction
  /// i (the program's size: the end of the run) must follow.
  Status waitForCollectives(size_t d, size_t i);
  /// Makes device d's compute stream wait for its communication stream.
  Status joinCommStream(size_t d);
  /// Branch streams (CudaBranches.cpp). Set up after the kernels are
  /// tuned: side streams and the waits between streams, found from the
  /// bytes each instruction reads and writes.
  Status prepareBranches(size_t d, size_t workspaceBytes);
  /// Whether this run spreads branches over side streams (not while
  /// profiling or tracing, which time kernels one after another).
  bool branchesActive() const {
    return !profiling && !tracing && !streamTracing;
  }
  /// Runs kernel instruction `i` on its stream after what it waits for.
  Status runOnBranch(size_t d, size_t i, const std::vector<TensorRef> &ins,
                     const std::vector<TensorRef> &outs);
  /// The main stream waits for every side stream's work so far.
  Status joinBranches(size_t d);
  void destroyBranches();
  void planCollectiveWaits();
  /// This run's arrivals per group and the groups enqueued (under mutex).
  std::map<uint32_t, size_t> arrivals;
  std::vector<bool> collectiveIssued;
  Status createCollectives(const std::vector<std::vector<bool>> &reach,
                           bool onePerGpu);
  /// Device d reaches all_reduce `in`; the last device of its group
  /// enqueues the collective for all of them. Call with mutex held.
  Status arriveAtAllReduce(size_t d, const Instruction &in);
  Status enqueueAllReduce(uint32_t group);
  Status enqueueHostTransfer(size_t d, const Instruction &recv);
  /// Reads the device-side error flags of every kernel after a run.
  Status checkKernels();
  Status enqueueStreamSend(size_t d, size_t i, size_t batch);
  Status enqueueStreamRecv(size_t d, size_t i, size_t batch);
  /// Streamed tracing: spans between two timing events from a pool per
  /// device that grows as needed and is reused by the next traced run.
  /// A span is named when the trace is collected, not on the enqueue path:
  /// "what #detail" (a copy of channel `detail`), or without `what`,
  /// "instructions index..detail" (a graph segment).
  struct Span {
    size_t device, index;
    cudaEvent_t begin, end;
    const char *what;
    size_t detail;
    const char *category;
    int track;
    size_t batch;
  };
  bool streamTracing = false;
  std::vector<Span> spans;
  std::vector<std::vector<cudaEvent_t>> spanPool;
  std::vector<size_t> spanPoolUsed;
  std::vector<cudaEvent_t> streamStart; // per device, with its host time
  std::vector<double> streamStartHostUs;
  Status pooledEvent(size_t d, cudaEvent_t &e);
  /// Runs `body` (which enqueues on `stream` of device d) and, while
  /// tracing, records it as a span.
  Status traced(size_t d, cudaStream_t stream, size_t index, const char *what,
                size_t detail, const char *category, int track, size_t batch,
                const std::function<Status()> &body);
  void collectSpans();
  size_t runs = 0;

  /// Failure handling (CudaWatchdog.cpp). A run ends with the host polling
  /// every device's stream rather than blocking on one, so that a device
  /// whose kernel failed is seen while its peers still wait for it in a
  /// collective: NCCL's communicators are then aborted (the only way to
  /// stop a collective waiting for a peer that will never come), and a run
  /// that outlasts the step timeout is given up the same way.
  FailureOptions failure;
  /// Mapped host words, one per device: where its stream has got to. A
  /// one-thread kernel writes i + 1 before instruction i when i waits for
  /// or signals another device (all_reduce, send, receive, wait_consumed),
  /// and the program's size + 1 at its end; the host zeroes them before
  /// each run. Null where no device can wait for another.
  volatile unsigned *progress = nullptr;
  /// Fault injection: [0] the probe's kind for this run, [1] releases a
  /// spinning probe (at teardown).
  volatile unsigned *faultWords = nullptr;
  /// The instruction of the faulty device before which the probe runs.
  size_t faultAt = 0;
  /// Set once a run failed in a way that leaves GPU work unfinished or a
  /// context broken: later runs and the destructor keep off the GPUs.
  bool lost = false;
  Status prepareWatchdog();
  /// Before instruction i of device d (i == its size: the end): the
  /// progress mark, and the fault probe where one is injected.
  Status markProgress(size_t d, size_t i);
  /// Zeroes the progress words and arms the probe for this run.
  void startWatchedRun();
  /// Waits for every device's stream to drain, watching for errors on any
  /// device, NCCL's asynchronous errors and the step timeout.
  /// `markersValid`: the progress words describe this run.
  Status awaitDevices(bool markersValid);
  /// Aborts every NCCL communicator (their collectives stop waiting).
  void abortCollectives();
  /// Runs work(d) for every device on a thread of its own and waits for
  /// them until the step's deadline at most: a host thread can block in a
  /// library call behind a GPU that stopped (NCCL connects lazily, memory
  /// frees wait for the device). False if they did not all return; they
  /// are then left running, and the run is given up.
  bool onDeviceThreads(const std::function<Status(size_t)> &work,
                       std::vector<Status> &results);
  /// Ends a run that outlasted the step timeout: aborts NCCL, marks the
  /// executor lost, and says where each device got to (from the progress
  /// marks, as read into `marks` when time ran out or else now, if
  /// `markersValid`) and what else is known.
  Status giveUp(bool markersValid, const std::string &what,
                std::vector<unsigned> marks = {});
  /// When the step timeout started counting (a run's start; a streamed
  /// run's last enqueue).
  std::chrono::steady_clock::time_point watchStart;
  /// Where each unfinished device got to, and which of them the others
  /// wait for, from a copy of the progress words.
  std::string progressReport(const std::vector<unsigned> &marks);

  // Profiling: an event pair per kernel instruction, and accumulated times.
  bool profiling = false, tracing = false;
  size_t profiledRuns = 0;
  std::vector<cudaEvent_t> runStart; // per device, when tracing
  /// Per device, while profiling: the mapped host word its launch gates
  /// poll, and how many gates it has armed.
  std::vector<volatile unsigned *> gateWords;
  std::vector<unsigned> gateCounts;
  /// Per device: what an event pair around an empty kernel measures,
  /// subtracted from every kernel's time (it is most of a small kernel's).
  std::vector<double> eventOverhead;
  Status measureEventOverhead(size_t d);
  std::vector<TraceEvent> trace;
  std::vector<std::vector<std::pair<cudaEvent_t, cudaEvent_t>>> events;
  std::vector<std::vector<double>> kernelTimes;
  cudaEvent_t fork = nullptr;
  std::vector<cudaEvent_t> joins;

  Status enqueue(size_t d, size_t i, const std::vector<TensorRef> &inputs,
                 const std::vector<TensorRef> &outputs, bool skipInputLoads);
  Status enqueueDevice(size_t d, const std::vector<TensorRef> &inputs,
                       const std::vector<TensorRef> &outputs,
                       bool skipInputLoads);
  /// After a run: device d's kernel times and trace events (profiling).
  void collectTimes(size_t d);
  Status runThreaded(const std::vector<TensorRef> &inputs,
                     const std::vector<TensorRef> &outputs,
                     bool skipInputLoads);
  Status capture(Graph &g, const std::vector<TensorRef> &inputs,
                 const std::vector<TensorRef> &outputs, bool skipInputLoads);
  /// Whether the devices exchange nothing but NCCL collectives, so each
  /// can capture and replay its own graph: one graph over several GPUs is
  /// launched by one thread, which measured slower than a thread per GPU
  /// (ResNet-50 on 4 GPUs, docs/benchmarks.md session 20).
  bool devicesMeetOnlyInNccl() const;
  Status captureDevice(size_t d, Graph &g, const std::vector<TensorRef> &inputs,
                       const std::vector<TensorRef> &outputs,
                       bool skipInputLoads);
  Status launchPerDevice(Graph &g);
  /// Device d's own part of NCCL collective `in` (no group: a thread per
  /// device calls its own communicator).
  Status enqueueOwnAllReduce(size_t d, const Instruction &in);
#ifdef PARTC_HAVE_NCCL
  /// One device's part of a bucket's means, in one NCCL group.
  Status ncclBucket(Device &dev, const std::vector<BufferRef> &sources,
                    const std::vector<BufferRef> &targets, ncclComm_t comm,
                    cudaStream_t stream);
#endif
  static void destroyGraph(Graph &g);
  Status buildSegments(StreamGraphs &sg, const std::vector<TensorRef> &inputs,
                       const std::vector<TensorRef> &outputs,
                       bool skipInputLoads);
  void destroySegments(StreamGraphs &sg) {
    for (auto &perDevice : sg.segments)
      for (Segment &seg : perDevice) {
        if (seg.exec[1] && seg.exec[1] != seg.exec[0])
          cudaGraphExecDestroy(seg.exec[1]);
        if (seg.exec[0])
          cudaGraphExecDestroy(seg.exec[0]);
      }
    sg.segments.clear();
    sg.built = false;
  }

  // Never run for a lost executor (~CudaExecutor leaves it be).
  ~Impl() {
    destroyBranches();
    for (size_t d = 0; d < commStreams.size(); ++d) {
      cudaSetDevice(devices[d].ctx.gpu);
      if (commStreams[d])
        cudaStreamDestroy(commStreams[d]);
      if (commJoins[d])
        cudaEventDestroy(commJoins[d]);
    }
    for (auto &[group, c] : collectives)
      for (auto *events : {&c.ready, &c.done})
        for (cudaEvent_t e : *events)
          if (e)
            cudaEventDestroy(e);
    for (volatile unsigned *w : gateWords)
      if (w)
        cudaFreeHost(const_cast<unsigned *>(w));
    for (cudaEvent_t e : runStart)
      if (e)
        cudaEventDestroy(e);
    for (cudaEvent_t e : streamStart)
      if (e)
        cudaEventDestroy(e);
    for (auto &pool : spanPool)
      for (cudaEvent_t e : pool)
        cudaEventDestroy(e);
    for (auto &perDevice : events)
      for (auto &[a, b] : perDevice) {
        if (a)
          cudaEventDestroy(a);
        if (b)
          cudaEventDestroy(b);
      }
    for (Graph &g : graphs)
      destroyGraph(g);
    for (StreamGraphs &sg : streamGraphs)
      destroySegments(sg);
    for (size_t c = 0; c < landings.size(); ++c) {
      Landing &l = landings[c];
      cudaSetDevice(devices[plan->channels[c].dstDevice].ctx.gpu);
      for (int p = 0; p < 2; ++p) {
        cudaFree(l.slot[p]);
        for (cudaEvent_t e : {l.filled[p], l.free[p]})
          if (e)
            cudaEventDestroy(e);
      }
      cudaSetDevice(devices[plan->channels[c].srcDevice].ctx.gpu);
      for (int p = 0; p < 2; ++p) {
        cudaFree(l.stage[p]);
        for (cudaEvent_t e : {l.staged[p], l.pulled[p], l.bounced[p]})
          if (e)
            cudaEventDestroy(e);
      }
    }
    for (size_t d = 0; d < copyStreams.size(); ++d)
      if (copyStreams[d]) {
        cudaSetDevice(devices[d].ctx.gpu);
        cudaStreamDestroy(copyStreams[d]);
      }
#ifdef PARTC_HAVE_NCCL
    for (ncclComm_t c : comms)
      if (c)
        ncclCommDestroy(c);
#endif
    for (size_t d = 0; d < sendStreams.size(); ++d) {
      cudaSetDevice(devices[d].ctx.gpu);
      if (sendStreams[d])
        cudaStreamDestroy(sendStreams[d]);
      if (sendJoins[d])
        cudaEventDestroy(sendJoins[d]);
    }
    for (auto &buffers : bounce)
      for (void *b : buffers)
        if (b)
          cudaFreeHost(b);
    if (fork)
      cudaEventDestroy(fork);
    for (cudaEvent_t e : joins)
      if (e)
        cudaEventDestroy(e);
    for (void *p : registered)
      cudaHostUnregister(p);
    for (volatile unsigned *words : {progress, faultWords})
      if (words)
        cudaFreeHost(const_cast<unsigned *>(words));
    for (cudaEvent_t e : ready)
      cudaEventDestroy(e);
    for (cudaEvent_t e : consumed)
      cudaEventDestroy(e);
    for (Device &d : devices) {
      cudaSetDevice(d.ctx.gpu);
      d.kernels.clear();
      cudaFree(d.arena);
      cudaFree(d.state);
      if (d.ownsWeights)
        cudaFree(d.weights);
      cudaFree(d.ctx.workspace);
      if (d.ctx.cublas)
        cublasDestroy(d.ctx.cublas);
      if (d.ctx.cudnn)
        cudnnDestroy(d.ctx.cudnn);
      if (d.ctx.stream)
        cudaStreamDestroy(d.ctx.stream);
    }
  }

  void *resolve(Device &dev, const BufferRef &b) {
    uint8_t *base = b.space == MemorySpace::Arena   ? dev.arena
                    : b.space == MemorySpace::State ? dev.state
                                                    : dev.weights;
    return base + b.offset;
  }
  /// Instruction i of device d's operands in device memory.
  void operands(size_t d, size_t i, std::vector<TensorRef> &ins,
                std::vector<TensorRef> &outs) {
    const Instruction &in = plan->devices[d].instructions[i];
    for (const BufferRef &b : in.inputs)
      ins.push_back({resolveAt(d, i, b), b.type});
    for (const BufferRef &b : in.outputs)
      outs.push_back({resolveAt(d, i, b), b.type});
  }
};

} // namespace partc::runtime

#endif // PARTC_RUNTIME_CUDA_EXECUTORIMPL_H
