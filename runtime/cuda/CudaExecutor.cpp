//===- CudaExecutor.cpp - CUDA backend ------------------------------------===//
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/ChainCodegen.h"
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

namespace {

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

/// Ends the capture on `stream` and instantiates it, unless enqueueing
/// failed (`enqueued`), in which case the partial graph is dropped.
Status endCapture(cudaStream_t stream, const Status &enqueued,
                  cudaGraphExec_t &exec) {
  cudaGraph_t graph = nullptr;
  cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!enqueued.ok()) {
    if (graph)
      cudaGraphDestroy(graph);
    return enqueued;
  }
  PARTC_RETURN_IF_ERROR(cudaStatus(end, "end capture"));
  cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  return cudaStatus(inst, "instantiate graph");
}

/// The host buffers a captured graph copies from and to.
std::vector<void *> hostPointers(const std::vector<TensorRef> &inputs,
                                 const std::vector<TensorRef> &outputs) {
  std::vector<void *> pointers;
  for (const TensorRef &t : inputs)
    pointers.push_back(t.data);
  for (const TensorRef &t : outputs)
    pointers.push_back(t.data);
  return pointers;
}

} // namespace

struct CudaExecutor::Impl {
  const Plan *plan = nullptr;
  struct Device {
    DeviceContext ctx;
    uint8_t *arena = nullptr;
    uint8_t *weights = nullptr;
    bool ownsWeights = true;
    std::vector<std::unique_ptr<GpuKernel>> kernels;
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
  StreamGraphs streamGraphs[2];
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
  Status runThreaded(const std::vector<TensorRef> &inputs,
                     const std::vector<TensorRef> &outputs,
                     bool skipInputLoads);
  Status capture(Graph &g, const std::vector<TensorRef> &inputs,
                 const std::vector<TensorRef> &outputs, bool skipInputLoads);
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

  ~Impl() {
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
      if (g.exec)
        cudaGraphExecDestroy(g.exec);
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
    for (cudaEvent_t e : ready)
      cudaEventDestroy(e);
    for (cudaEvent_t e : consumed)
      cudaEventDestroy(e);
    for (Device &d : devices) {
      cudaSetDevice(d.ctx.gpu);
      d.kernels.clear();
      cudaFree(d.arena);
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
    return (b.space == MemorySpace::Arena ? dev.arena : dev.weights) + b.offset;
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

int CudaExecutor::deviceCount(std::string *why) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why)
      *why = cudaGetErrorString(err);
    return 0;
  }
  return n;
}

CudaExecutor::~CudaExecutor() = default;

LoadReport CudaExecutor::loadReport() const {
  LoadReport r;
  if (fallbacks_)
    r.notes.push_back(std::to_string(fallbacks_) +
                      " kernel(s) run on the host because no GPU kernel "
                      "exists yet: " +
                      fallbackSummary());
  // Staging through host memory is much slower than NVLink: say so.
  if (!impl_->plan->channels.empty())
    (hostStagedCount() ? r.notes : r.details).push_back(transferSummary());
  cuda::ChainStats chains = cuda::generatedChainStats();
  if (chains.failed)
    r.notes.push_back(std::to_string(chains.failed) +
                      " fused chain program(s) run interpreted because NVRTC "
                      "could not compile them: " +
                      chains.firstFailure);
  if (chains.compiled) {
    char buf[128];
    std::snprintf(buf, sizeof(buf),
                  "%d fused chain program(s) compiled at load (NVRTC) in "
                  "%.0f ms",
                  chains.compiled, chains.seconds * 1e3);
    r.details.push_back(buf);
  }
  return r;
}

std::vector<std::string> CudaExecutor::runNotes() const {
  if (graphFailure_.empty())
    return {};
  return {"CUDA graph capture failed (" + graphFailure_ +
          "); kernels were launched directly"};
}

std::string CudaExecutor::profilingNote() const {
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "profile: an event pair around an empty kernel takes %.1f us "
                "on GPU 0; subtracted from each kernel",
                eventOverheadSeconds(0) * 1e6);
  std::string note = buf;
  if (!variantSummary().empty())
    note += "\nkernels chosen by timing: " + variantSummary();
  return note;
}

std::string CudaExecutor::fallbackSummary() const {
  std::ostringstream os;
  for (auto &[name, count] : impl_->fallbackKinds)
    os << (os.tellp() ? ", " : "") << name << " x" << count;
  return os.str();
}

std::string CudaExecutor::variantSummary() const {
  std::ostringstream os;
  for (auto &[name, count] : impl_->variants)
    os << (os.tellp() ? ", " : "") << name << " x" << count;
  return os.str();
}

std::string CudaExecutor::transferSummary() const {
  size_t counts[3] = {0, 0, 0};
  for (Impl::Route r : impl_->routes)
    ++counts[static_cast<int>(r)];
  std::ostringstream os;
  os << impl_->routes.size() << " transfer(s):";
  const char *names[3] = {"device-to-device", "through host memory",
                          "through NCCL"};
  const char *sep = " ";
  for (int r = 0; r < 3; ++r)
    if (counts[r]) {
      os << sep << counts[r] << " " << names[r];
      if (r == static_cast<int>(Impl::Route::Host))
        os << " (" << impl_->hostReason << ")";
      sep = ", ";
    }
  return os.str();
}

size_t CudaExecutor::hostStagedCount() const {
  return std::count(impl_->routes.begin(), impl_->routes.end(),
                    Impl::Route::Host);
}

Status CudaExecutor::create(const Plan &plan, const CudaOptions &options,
                            std::unique_ptr<CudaExecutor> &result) {
  std::string why;
  int available = deviceCount(&why);
  size_t needed = plan.devices.size();
  size_t perGpu = std::max(1, options.devicesPerGpu);
  size_t gpusNeeded = (needed + perGpu - 1) / perGpu;
  if (available < options.firstGpu + static_cast<int>(gpusNeeded))
    return Status::error(
        "the plan needs " + std::to_string(gpusNeeded) + " GPU(s)" +
        (perGpu > 1 ? " (" + std::to_string(needed) + " devices, " +
                          std::to_string(perGpu) + " per GPU)"
                    : "") +
        " but " + std::to_string(available) + " are available" +
        (why.empty() ? "" : " (" + why + ")") + "; recompile with --devices " +
        std::to_string(std::max(1, available)) + " or run with --backend cpu");
  // NCCL ranks are GPUs: two plan devices on one GPU cannot both be one.
  for (const Channel &c : plan.channels)
    if (c.transport == Transport::Nccl && perGpu > 1)
      return Status::error(
          "the plan moves transfers through NCCL, which needs one GPU per "
          "plan device; run without --devices-per-gpu or compile with "
          "--transfers p2p");
  std::unique_ptr<CudaExecutor> exec(new CudaExecutor());
  exec->impl_ = std::make_unique<Impl>();
  Impl &impl = *exec->impl_;
  impl.plan = &plan;
  impl.devices.resize(needed);
  impl.redirects.resize(needed);
  impl.channelSources.resize(plan.channels.size());
  impl.directTransfers = options.directTransfers;
  // reach[d][e]: device d can read and write device e's memory.
  std::vector<std::vector<bool>> reach(needed, std::vector<bool>(needed));

  for (size_t d = 0; d < needed; ++d) {
    Impl::Device &dev = impl.devices[d];
    DeviceContext &ctx = dev.ctx;
    ctx.gpu = options.firstGpu + static_cast<int>(d / perGpu);
    ctx.options = options;
    std::string where = "GPU " + std::to_string(ctx.gpu) + " (plan device " +
                        std::to_string(d) + ")";
    PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(ctx.gpu), where.c_str()));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking),
        where.c_str()));
    if (cublasCreate(&ctx.cublas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(ctx.cublas, ctx.stream) != CUBLAS_STATUS_SUCCESS)
      return Status::error(where + ": cannot create a cuBLAS handle");
    if (cudnnCreate(&ctx.cudnn) != CUDNN_STATUS_SUCCESS ||
        cudnnSetStream(ctx.cudnn, ctx.stream) != CUDNN_STATUS_SUCCESS)
      return Status::error(where + ": cannot create a cuDNN handle");
    if (cublasLtCreate(&ctx.cublasLt) != CUBLAS_STATUS_SUCCESS)
      return Status::error(where + ": cannot create a cuBLASLt handle");
    // Peer access where the hardware allows; transfers between GPUs that
    // lack it are staged through host memory (Impl::Route).
    for (size_t e = 0; e < needed; ++e) {
      int peer = options.firstGpu + static_cast<int>(e / perGpu), can = 0;
      if (peer != ctx.gpu &&
          cudaDeviceCanAccessPeer(&can, ctx.gpu, peer) == cudaSuccess && can) {
        cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
        if (err == cudaErrorPeerAccessAlreadyEnabled)
          cudaGetLastError();
        else if (err != cudaSuccess)
          return cudaStatus(err, where.c_str());
      }
      reach[d][e] = peer == ctx.gpu || can;
    }
    auto allocate = [&](uint8_t *&ptr, size_t bytes, const char *what) {
      if (!bytes)
        return Status();
      cudaError_t err = cudaMalloc(&ptr, bytes);
      if (err != cudaSuccess) {
        size_t freeBytes = 0, total = 0;
        cudaMemGetInfo(&freeBytes, &total);
        return Status::error(where + ": out of memory allocating the " + what +
                             " (" + std::to_string(bytes) + " bytes, " +
                             std::to_string(freeBytes) + " free of " +
                             std::to_string(total) + ")");
      }
      return Status();
    };
    PARTC_RETURN_IF_ERROR(
        allocate(dev.arena, plan.devices[d].arenaBytes, "arena"));
    // Plan devices that share a GPU share one copy of the weights.
    dev.ownsWeights = d % perGpu == 0;
    if (!dev.ownsWeights)
      dev.weights = impl.devices[d - d % perGpu].weights;
    else
      PARTC_RETURN_IF_ERROR(allocate(dev.weights, plan.weightBytes, "weights"));
    if (plan.weightBytes && dev.ownsWeights) {
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaMemcpyAsync(dev.weights, plan.weightData, plan.weightBytes,
                          cudaMemcpyHostToDevice, ctx.stream),
          "uploading weights"));
      PARTC_RETURN_IF_ERROR(
          cudaStatus(cudaStreamSynchronize(ctx.stream), "uploading weights"));
    }

    const DeviceProgram &prog = plan.devices[d];
    dev.kernels.resize(prog.instructions.size());
    size_t workspace = 0;
    for (size_t i = 0; i < prog.instructions.size(); ++i) {
      const Instruction &in = prog.instructions[i];
      if (in.op == OpCode::Send)
        impl.channelSources[in.index] = {d, in.inputs[0]};
      if (in.op != OpCode::Kernel)
        continue;
      std::vector<TensorType> ins, outs;
      instructionTypes(in, ins, outs);
      Status s =
          createGpuKernel(in.kernel, in.attrs, ins, outs, ctx, dev.kernels[i]);
      if (!s.ok())
        return s.prepend(where + " " + describeInstruction(d, i, in));
      if (!dev.kernels[i]) {
        std::unique_ptr<Kernel> cpu;
        s = createCpuKernel(in.kernel, in.attrs, ins, outs, cpu);
        if (!s.ok())
          return s.prepend(describeInstruction(d, i, in));
        dev.kernels[i] = std::make_unique<HostFallbackKernel>(std::move(cpu));
        exec->fallbacks_++;
        impl.fallbackKinds[in.kernel]++;
      }
      workspace = std::max(workspace, dev.kernels[i]->workspaceBytes());
    }
    uint8_t *ws = nullptr;
    PARTC_RETURN_IF_ERROR(allocate(ws, workspace, "workspace"));
    ctx.workspace = ws;
    ctx.workspaceBytes = workspace;
    // Before the first run, while nothing in the arena is live.
    TuneScratch scratch;
    for (size_t i = 0; i < prog.instructions.size(); ++i) {
      if (!dev.kernels[i])
        continue;
      const Instruction &in = prog.instructions[i];
      std::vector<TensorRef> ins, outs;
      impl.operands(d, i, ins, outs);
      Status s = dev.kernels[i]->tune(ctx, ins, outs, scratch);
      if (!s.ok())
        return s.prepend(where + " tuning " + describeInstruction(d, i, in));
      // Counted by kind: the details after the name vary by shape.
      if (const char *v = dev.kernels[i]->variant())
        impl.variants[in.kernel + " " +
                      std::string(v).substr(0, std::strcspn(v, " "))]++;
    }
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaStreamSynchronize(ctx.stream), where.c_str()));
  }
  using Route = Impl::Route;
  impl.routes.assign(plan.channels.size(), Route::Peer);
  impl.bounce.assign(plan.channels.size(), {nullptr, nullptr});
  for (size_t c = 0; c < plan.channels.size(); ++c) {
    const Channel &ch = plan.channels[c];
    if (ch.transport == Transport::Nccl) {
      impl.routes[c] = Route::Nccl;
      impl.usesNccl = true;
      continue;
    }
    if (!options.hostStaging && reach[ch.srcDevice][ch.dstDevice] &&
        reach[ch.dstDevice][ch.srcDevice])
      continue;
    impl.routes[c] = Route::Host;
    if (impl.hostReason.empty())
      impl.hostReason =
          options.hostStaging
              ? "--host-staging"
              : "GPU " + std::to_string(impl.devices[ch.srcDevice].ctx.gpu) +
                    " -> " +
                    std::to_string(impl.devices[ch.dstDevice].ctx.gpu) +
                    ": no peer access";
    for (void *&b : impl.bounce[c]) {
      // Portable: both GPUs' copies may use it.
      cudaError_t err = cudaHostAlloc(&b, std::max<size_t>(ch.bytes, 1),
                                      cudaHostAllocPortable);
      if (err != cudaSuccess)
        return Status::error("cannot page-lock " + std::to_string(ch.bytes) +
                             " bytes of host memory to stage channel " +
                             std::to_string(c) +
                             " between GPUs: " + cudaGetErrorString(err));
    }
  }
  if (impl.usesNccl)
    PARTC_RETURN_IF_ERROR(impl.initNccl());
  PARTC_RETURN_IF_ERROR(impl.createSendStreams());
  for (size_t c = 0; c < plan.channels.size(); ++c) {
    cudaEvent_t r, k;
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaSetDevice(impl.devices[plan.channels[c].srcDevice].ctx.gpu),
        "event"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaEventCreateWithFlags(&r, cudaEventDisableTiming), "event"));
    // "Consumed" belongs to the device whose stream records it (Route).
    bool peer = impl.routes[c] == Route::Peer;
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(impl.devices[peer ? plan.channels[c].dstDevice
                                                   : plan.channels[c].srcDevice]
                                     .ctx.gpu),
                   "event"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaEventCreateWithFlags(&k, cudaEventDisableTiming), "event"));
    impl.ready.push_back(r);
    impl.consumed.push_back(k);
  }
  // Graphs need every kernel to only enqueue work.
  impl.useGraphs = options.graphs;
  for (auto &dev : impl.devices)
    for (auto &k : dev.kernels)
      if (k && !k->capturable())
        impl.useGraphs = false;
  if (impl.useGraphs) {
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(impl.devices[0].ctx.gpu), "graph events"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaEventCreateWithFlags(&impl.fork, cudaEventDisableTiming), "event"));
    impl.joins.assign(needed, nullptr);
    for (size_t d = 1; d < needed; ++d) {
      PARTC_RETURN_IF_ERROR(
          cudaStatus(cudaSetDevice(impl.devices[d].ctx.gpu), "graph events"));
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaEventCreateWithFlags(&impl.joins[d], cudaEventDisableTiming),
          "event"));
    }
  }
  result = std::move(exec);
  return Status();
}

bool CudaExecutor::usesGraphs() const { return impl_->useGraphs; }

Status CudaExecutor::enableProfiling() {
  Impl &impl = *impl_;
  impl.profiling = true;
  impl.useGraphs = false;
  impl.events.resize(impl.devices.size());
  impl.gateWords.assign(impl.devices.size(), nullptr);
  impl.gateCounts.assign(impl.devices.size(), 0);
  impl.eventOverhead.assign(impl.devices.size(), 0.0);
  impl.kernelTimes.resize(impl.devices.size());
  for (size_t d = 0; d < impl.devices.size(); ++d) {
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(impl.devices[d].ctx.gpu), "profile"));
    void *word = nullptr;
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaHostAlloc(&word, sizeof(unsigned), cudaHostAllocMapped),
                   "profile gate"));
    impl.gateWords[d] = static_cast<volatile unsigned *>(word);
    *impl.gateWords[d] = 0;
    PARTC_RETURN_IF_ERROR(impl.measureEventOverhead(d));
    size_t n = impl.plan->devices[d].instructions.size();
    impl.kernelTimes[d].assign(n, 0.0);
    impl.events[d].assign(n, {nullptr, nullptr});
    for (size_t i = 0; i < n; ++i)
      if (impl.plan->devices[d].instructions[i].op == OpCode::Kernel) {
        PARTC_RETURN_IF_ERROR(cudaStatus(
            cudaEventCreate(&impl.events[d][i].first), "profile event"));
        PARTC_RETURN_IF_ERROR(cudaStatus(
            cudaEventCreate(&impl.events[d][i].second), "profile event"));
      }
  }
  return Status();
}

Status CudaExecutor::Impl::measureEventOverhead(size_t d) {
  constexpr int kPairs = 21;
  cudaStream_t stream = devices[d].ctx.stream;
  std::vector<cudaEvent_t> marks(2 * kPairs, nullptr);
  Status s;
  for (cudaEvent_t &e : marks)
    if (s.ok())
      s = cudaStatus(cudaEventCreate(&e), "profile event");
  {
    // Held until all pairs are queued, as the profiled kernels will be. A
    // gate whose value was already reached is the empty kernel.
    LaunchGates gates(stream, gateWords[d], gateCounts[d]);
    if (s.ok())
      s = gates.arm();
    for (int i = 0; i < kPairs && s.ok(); ++i) {
      s = cudaStatus(cudaEventRecord(marks[2 * i], stream), "profile");
      if (s.ok())
        s = cudaStatus(
            launchHostGate(const_cast<const unsigned *>(gateWords[d]), 0, 0,
                           stream),
            "profile");
      if (s.ok())
        s = cudaStatus(cudaEventRecord(marks[2 * i + 1], stream), "profile");
    }
  }
  if (s.ok())
    s = cudaStatus(cudaStreamSynchronize(stream), "profile");
  std::vector<float> pairs;
  for (int i = 0; i < kPairs && s.ok(); ++i) {
    float msec = 0;
    s = cudaStatus(cudaEventElapsedTime(&msec, marks[2 * i], marks[2 * i + 1]),
                   "profile");
    pairs.push_back(msec);
  }
  for (cudaEvent_t e : marks)
    if (e)
      cudaEventDestroy(e);
  PARTC_RETURN_IF_ERROR(s);
  std::nth_element(pairs.begin(), pairs.begin() + kPairs / 2, pairs.end());
  eventOverhead[d] = pairs[kPairs / 2] * 1e-3;
  return Status();
}

Status CudaExecutor::enableTracing() {
  Impl &impl = *impl_;
  if (!impl.profiling)
    PARTC_RETURN_IF_ERROR(enableProfiling());
  impl.tracing = true;
  impl.runStart.assign(impl.devices.size(), nullptr);
  for (size_t d = 0; d < impl.devices.size(); ++d) {
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(impl.devices[d].ctx.gpu), "trace"));
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaEventCreate(&impl.runStart[d]), "trace event"));
    for (size_t i = 0; i < impl.events[d].size(); ++i)
      if (!impl.events[d][i].first) {
        PARTC_RETURN_IF_ERROR(cudaStatus(
            cudaEventCreate(&impl.events[d][i].first), "trace event"));
        PARTC_RETURN_IF_ERROR(cudaStatus(
            cudaEventCreate(&impl.events[d][i].second), "trace event"));
      }
  }
  return Status();
}

std::vector<TraceEvent> CudaExecutor::lastRunTrace() const {
  return impl_->trace;
}

double CudaExecutor::kernelSeconds(size_t d, size_t i) const {
  if (!impl_->profiling || !impl_->profiledRuns)
    return 0;
  return impl_->kernelTimes[d][i] / static_cast<double>(impl_->profiledRuns);
}

const char *CudaExecutor::kernelVariant(size_t d, size_t i) const {
  const auto &kernels = impl_->devices[d].kernels;
  return i < kernels.size() && kernels[i] ? kernels[i]->variant() : nullptr;
}

double CudaExecutor::eventOverheadSeconds(size_t d) const {
  return d < impl_->eventOverhead.size() ? impl_->eventOverhead[d] : 0;
}

Status CudaExecutor::registerHostMemory(void *ptr, size_t bytes) {
  if (!bytes)
    return Status();
  PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(impl_->devices[0].ctx.gpu),
                                   "register host memory"));
  PARTC_RETURN_IF_ERROR(
      cudaStatus(cudaHostRegister(ptr, bytes, cudaHostRegisterPortable),
                 "register host memory"));
  impl_->registered.push_back(ptr);
  return Status();
}

Status CudaExecutor::run(const std::vector<TensorRef> &inputs,
                         const std::vector<TensorRef> &outputs,
                         bool skipInputLoads) {
  Impl &impl = *impl_;
  Status s;
  bool graphs = impl.useGraphs && impl.runs > 0;
  if (graphs) {
    Impl::Graph &g = impl.graphs[skipInputLoads ? 1 : 0];
    std::vector<void *> pointers = hostPointers(inputs, outputs);
    // A graph bakes in the host buffers it copies from and to.
    if (!g.exec || g.pointers != pointers) {
      s = impl.capture(g, inputs, outputs, skipInputLoads);
      if (!s.ok()) {
        // Not fatal: launch directly from now on and say why.
        cudaGetLastError();
        impl.useGraphs = false;
        graphFailure_ = s.message();
        return run(inputs, outputs, skipInputLoads);
      }
      g.pointers = pointers;
    }
    Impl::Device &origin = impl.devices[0];
    s = cudaStatus(cudaSetDevice(origin.ctx.gpu), "graph launch");
    if (s.ok())
      s = cudaStatus(cudaGraphLaunch(g.exec, origin.ctx.stream),
                     "graph launch");
    if (s.ok())
      s = cudaStatus(cudaStreamSynchronize(origin.ctx.stream), "graph run");
  } else {
    s = impl.runThreaded(inputs, outputs, skipInputLoads);
    if (s.ok() && impl.profiling)
      ++impl.profiledRuns;
  }
  if (!s.ok())
    return s;
  ++impl.runs;
  return impl.checkKernels();
}

Status CudaExecutor::Impl::checkKernels() {
  for (size_t d = 0; d < devices.size(); ++d) {
    Device &dev = devices[d];
    cudaSetDevice(dev.ctx.gpu);
    for (size_t i = 0; i < dev.kernels.size(); ++i)
      if (dev.kernels[i]) {
        Status k = dev.kernels[i]->checkAfterRun();
        if (!k.ok())
          return k.prepend(
              "GPU " + std::to_string(dev.ctx.gpu) + " " +
              describeInstruction(d, i, plan->devices[d].instructions[i]));
      }
  }
  return Status();
}

Status CudaExecutor::Impl::enqueue(size_t d, size_t i,
                                   const std::vector<TensorRef> &inputs,
                                   const std::vector<TensorRef> &outputs,
                                   bool skipInputLoads) {
  Device &dev = devices[d];
  const Instruction &in = plan->devices[d].instructions[i];
  cudaStream_t stream = dev.ctx.stream;
  switch (in.op) {
  case OpCode::Kernel: {
    std::vector<TensorRef> ins, outs;
    operands(d, i, ins, outs);
    return dev.kernels[i]->run(dev.ctx, ins, outs);
  }
  case OpCode::LoadInput:
    if (skipInputLoads)
      return Status();
    return cudaStatus(
        cudaMemcpyAsync(
            resolveAt(d, i, in.outputs[0]),
            static_cast<const uint8_t *>(inputs[in.index].data) + in.hostOffset,
            in.outputs[0].type.byteSize(), cudaMemcpyHostToDevice, stream),
        "input copy");
  case OpCode::StoreOutput:
    return cudaStatus(
        cudaMemcpyAsync(
            static_cast<uint8_t *>(outputs[in.index].data) + in.hostOffset,
            resolveAt(d, i, in.inputs[0]), in.inputs[0].type.byteSize(),
            cudaMemcpyDeviceToHost, stream),
        "output copy");
  case OpCode::Send:
    return cudaStatus(cudaEventRecord(ready[in.index], stream), "send");
  case OpCode::Recv: {
    if (routes[in.index] == Route::Nccl)
      return enqueueNcclTransfer(d, in);
    if (routes[in.index] == Route::Host)
      return enqueueHostTransfer(d, in);
    auto [srcDev, srcBuf] = channelSources[in.index];
    Device &src = devices[srcDev];
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaStreamWaitEvent(stream, ready[in.index], 0), "recv wait"));
    // With unified addressing a default-kind copy reaches the peer (over
    // NVLink where peer access is enabled) and, unlike cudaMemcpyPeerAsync,
    // can be captured into a graph.
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaMemcpyAsync(resolve(dev, in.outputs[0]), resolve(src, srcBuf),
                        in.outputs[0].type.byteSize(), cudaMemcpyDefault,
                        stream),
        "peer copy"));
    return cudaStatus(cudaEventRecord(consumed[in.index], stream), "recv");
  }
  case OpCode::WaitConsumed:
    return cudaStatus(cudaStreamWaitEvent(stream, consumed[in.index], 0),
                      "wait");
  }
  return Status();
}

Status CudaExecutor::Impl::initNccl() {
#ifdef PARTC_HAVE_NCCL
  // Point-to-point transfers need no NVLink multicast (NVLS), and setting
  // it up on shared NVSwitch machines can harm other users: off unless the
  // user asked for it.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  int count = static_cast<int>(devices.size());
  std::vector<int> gpus;
  for (Device &dev : devices)
    gpus.push_back(dev.ctx.gpu);
  comms.assign(devices.size(), nullptr);
  ncclResult_t r = ncclCommInitAll(comms.data(), count, gpus.data());
  if (r != ncclSuccess) {
    comms.clear();
    return Status::error("NCCL could not set up communicators for GPUs " +
                         std::to_string(gpus.front()) + ".." +
                         std::to_string(gpus.back()) + ": " +
                         ncclGetErrorString(r) +
                         "; compile with --transfers p2p to copy instead");
  }
  return Status();
#else
  return Status::error("the plan moves transfers through NCCL, but this "
                       "partc-run was built without NCCL; compile with "
                       "--transfers p2p, or rebuild with NCCL found next to "
                       "the CUDA toolkit");
#endif
}

Status CudaExecutor::Impl::createSendStreams() {
  sendStreams.assign(devices.size(), nullptr);
  sendJoins.assign(devices.size(), nullptr);
  for (size_t c = 0; c < routes.size(); ++c) {
    size_t d = plan->channels[c].srcDevice;
    if (routes[c] == Route::Peer || sendStreams[d])
      continue;
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "sending stream"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaStreamCreateWithFlags(&sendStreams[d], cudaStreamNonBlocking),
        "sending stream"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaEventCreateWithFlags(&sendJoins[d], cudaEventDisableTiming),
        "sending stream"));
  }
  return Status();
}

Status CudaExecutor::Impl::ncclTransfer(size_t srcDev, const void *from,
                                        cudaStream_t sending, size_t dstDev,
                                        void *to, cudaStream_t receiving,
                                        size_t bytes) {
#ifdef PARTC_HAVE_NCCL
  auto nccl = [&](ncclResult_t r, const char *what) {
    return r == ncclSuccess ? Status()
                            : Status::error(std::string(what) + ": " +
                                            ncclGetErrorString(r));
  };
  // Both halves in one group: a thread that drives several GPUs must not
  // wait in one of them for the other.
  Status s = nccl(ncclGroupStart(), "ncclGroupStart");
  if (s.ok())
    s = nccl(ncclSend(from, bytes, ncclUint8, static_cast<int>(dstDev),
                      comms[srcDev], sending),
             "ncclSend");
  if (s.ok())
    s = nccl(ncclRecv(to, bytes, ncclUint8, static_cast<int>(srcDev),
                      comms[dstDev], receiving),
             "ncclRecv");
  Status end = nccl(ncclGroupEnd(), "ncclGroupEnd");
  return s.ok() ? end : s;
#else
  (void)srcDev, (void)from, (void)sending, (void)dstDev, (void)to,
      (void)receiving, (void)bytes;
  return Status::error("built without NCCL");
#endif
}

Status CudaExecutor::Impl::enqueueNcclTransfer(size_t d,
                                               const Instruction &recv) {
  size_t c = recv.index;
  auto [srcDev, srcBuf] = channelSources[c];
  Device &dst = devices[d], &src = devices[srcDev];
  cudaStream_t sending = sendStreams[srcDev];
  std::lock_guard<std::mutex> lock(sendMutex);
  PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(src.ctx.gpu), "NCCL send"));
  PARTC_RETURN_IF_ERROR(
      cudaStatus(cudaStreamWaitEvent(sending, ready[c], 0), "NCCL send wait"));
  Status s = ncclTransfer(srcDev, resolve(src, srcBuf), sending, d,
                          resolve(dst, recv.outputs[0]), dst.ctx.stream,
                          recv.outputs[0].type.byteSize());
  if (s.ok())
    s = cudaStatus(cudaEventRecord(consumed[c], sending), "NCCL send");
  Status back = cudaStatus(cudaSetDevice(dst.ctx.gpu), "NCCL receive");
  return s.ok() ? back : s;
}

Status CudaExecutor::Impl::enqueueHostTransfer(size_t d,
                                               const Instruction &recv) {
  size_t c = recv.index;
  auto [srcDev, srcBuf] = channelSources[c];
  Device &dst = devices[d], &src = devices[srcDev];
  cudaStream_t sending = sendStreams[srcDev];
  size_t bytes = recv.outputs[0].type.byteSize();
  {
    // Several receivers may stage from one source at once; keep each
    // wait, copy and record together on its sending stream.
    std::lock_guard<std::mutex> lock(sendMutex);
    PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(src.ctx.gpu), "staging"));
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaStreamWaitEvent(sending, ready[c], 0), "staging wait"));
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaMemcpyAsync(bounce[c][0], resolve(src, srcBuf), bytes,
                                   cudaMemcpyDeviceToHost, sending),
                   "copy to host memory"));
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaEventRecord(consumed[c], sending), "staging"));
  }
  PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(dst.ctx.gpu), "staging"));
  PARTC_RETURN_IF_ERROR(cudaStatus(
      cudaStreamWaitEvent(dst.ctx.stream, consumed[c], 0), "staging wait"));
  return cudaStatus(cudaMemcpyAsync(resolve(dst, recv.outputs[0]), bounce[c][0],
                                    bytes, cudaMemcpyHostToDevice,
                                    dst.ctx.stream),
                    "copy from host memory");
}

Status CudaExecutor::Impl::runThreaded(const std::vector<TensorRef> &inputs,
                                       const std::vector<TensorRef> &outputs,
                                       bool skipInputLoads) {
  size_t n = devices.size();
  trace.clear();
  {
    std::lock_guard<std::mutex> lock(mutex);
    sent.assign(plan->channels.size(), false);
    received.assign(plan->channels.size(), false);
    aborted = false;
  }
  std::vector<Status> results(n);
  if (n == 1) {
    results[0] = enqueueDevice(0, inputs, outputs, skipInputLoads);
  } else {
    // One host thread per GPU so that no device waits for another's
    // launches; host flags order cross-device event record and wait.
    std::vector<std::thread> threads;
    for (size_t d = 0; d < n; ++d)
      threads.emplace_back([&, d] {
        results[d] = enqueueDevice(d, inputs, outputs, skipInputLoads);
      });
    for (auto &t : threads)
      t.join();
  }
  return rootCause(results);
}

Status CudaExecutor::Impl::enqueueDevice(size_t d,
                                         const std::vector<TensorRef> &inputs,
                                         const std::vector<TensorRef> &outputs,
                                         bool skipInputLoads) {
  Device &dev = devices[d];
  const auto &instrs = plan->devices[d].instructions;
  auto fail = [&](Status s) {
    std::lock_guard<std::mutex> lock(mutex);
    aborted = true;
    changed.notify_all();
    return s;
  };
  auto waitFlag = [&](std::vector<bool> &flag, uint32_t c) -> Status {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return flag[c] || aborted; });
    if (!flag[c])
      return Status::error("GPU " + std::to_string(dev.ctx.gpu) +
                           " aborted: another device failed");
    return Status();
  };
  auto setFlag = [&](std::vector<bool> &flag, uint32_t c) {
    std::lock_guard<std::mutex> lock(mutex);
    flag[c] = true;
    changed.notify_all();
  };
  Status s = cudaStatus(cudaSetDevice(dev.ctx.gpu), "device");
  std::optional<LaunchGates> gates;
  if (s.ok() && profiling) {
    gates.emplace(dev.ctx.stream, gateWords[d], gateCounts[d]);
    s = gates->arm();
  }
  if (s.ok() && tracing)
    s = cudaStatus(cudaEventRecord(runStart[d], dev.ctx.stream), "trace");
  if (!s.ok())
    return fail(s);
  for (size_t i = 0; i < instrs.size(); ++i) {
    const Instruction &in = instrs[i];
    // The host must never block while its stream is held: not on another
    // device's flag, nor in a host kernel or a copy from pageable memory.
    bool hostWaits = in.op == OpCode::Recv || in.op == OpCode::WaitConsumed;
    bool hostBlocks =
        in.op == OpCode::LoadInput || in.op == OpCode::StoreOutput ||
        (in.op == OpCode::Kernel && !dev.kernels[i]->capturable());
    if (gates && (hostWaits || hostBlocks))
      gates->release();
    if (in.op == OpCode::Recv)
      s = waitFlag(sent, in.index);
    else if (in.op == OpCode::WaitConsumed)
      s = waitFlag(received, in.index);
    if (s.ok() && gates && !hostBlocks)
      s = hostWaits ? gates->arm() : gates->launched();
    bool timed = (profiling && in.op == OpCode::Kernel) || tracing;
    if (s.ok() && timed)
      s = cudaStatus(cudaEventRecord(events[d][i].first, dev.ctx.stream),
                     "profile");
    if (s.ok())
      s = enqueue(d, i, inputs, outputs, skipInputLoads);
    if (s.ok() && timed)
      s = cudaStatus(cudaEventRecord(events[d][i].second, dev.ctx.stream),
                     "profile");
    if (s.ok() && gates && hostBlocks)
      s = gates->arm();
    if (!s.ok())
      return fail(s.prepend("GPU " + std::to_string(dev.ctx.gpu) + " " +
                            describeInstruction(d, i, in)));
    if (in.op == OpCode::Send)
      setFlag(sent, in.index);
    if (in.op == OpCode::Recv)
      setFlag(received, in.index);
  }
  if (gates)
    gates->release();
  s = cudaStatus(cudaStreamSynchronize(dev.ctx.stream), "synchronize");
  if (!s.ok())
    return fail(s.prepend("GPU " + std::to_string(dev.ctx.gpu)));
  if (profiling)
    for (size_t i = 0; i < instrs.size(); ++i)
      if (instrs[i].op == OpCode::Kernel) {
        float msec = 0;
        if (cudaEventElapsedTime(&msec, events[d][i].first,
                                 events[d][i].second) == cudaSuccess)
          kernelTimes[d][i] += std::max(0.0, msec * 1e-3 - eventOverhead[d]);
      }
  if (tracing) {
    std::vector<TraceEvent> local;
    for (size_t i = 0; i < instrs.size(); ++i) {
      float begin = 0, duration = 0;
      if (cudaEventElapsedTime(&begin, runStart[d], events[d][i].first) ==
              cudaSuccess &&
          cudaEventElapsedTime(&duration, events[d][i].first,
                               events[d][i].second) == cudaSuccess)
        local.push_back(
            TraceEvent::ofInstruction(d, i, begin * 1e3, duration * 1e3));
    }
    std::lock_guard<std::mutex> lock(mutex);
    trace.insert(trace.end(), local.begin(), local.end());
  }
  return Status();
}

Status CudaExecutor::Impl::capture(Graph &g,
                                   const std::vector<TensorRef> &inputs,
                                   const std::vector<TensorRef> &outputs,
                                   bool skipInputLoads) {
  if (g.exec) {
    cudaGraphExecDestroy(g.exec);
    g.exec = nullptr;
  }
  size_t n = devices.size();
  Device &origin = devices[0];
  // One graph for all GPUs: the other devices' streams join the capture
  // through an event from the origin stream, and join back at the end, so
  // every cross-device event becomes an edge of the graph.
  PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(origin.ctx.gpu), "capture"));
  PARTC_RETURN_IF_ERROR(cudaStatus(
      cudaStreamBeginCapture(origin.ctx.stream, cudaStreamCaptureModeRelaxed),
      "begin capture"));
  Status s = cudaStatus(cudaEventRecord(fork, origin.ctx.stream), "fork");
  for (size_t d = 1; d < n && s.ok(); ++d) {
    s = cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "fork");
    if (s.ok())
      s = cudaStatus(cudaStreamWaitEvent(devices[d].ctx.stream, fork, 0),
                     "fork");
  }
  // Enqueue from this one thread in an order that respects the channels.
  std::vector<size_t> pc(n, 0);
  std::vector<bool> isSent(plan->channels.size()),
      isReceived(plan->channels.size());
  bool progress = true;
  while (progress && s.ok()) {
    progress = false;
    for (size_t d = 0; d < n && s.ok(); ++d) {
      const auto &instrs = plan->devices[d].instructions;
      if (pc[d] < instrs.size())
        s = cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "capture");
      while (s.ok() && pc[d] < instrs.size()) {
        const Instruction &in = instrs[pc[d]];
        if ((in.op == OpCode::Recv && !isSent[in.index]) ||
            (in.op == OpCode::WaitConsumed && !isReceived[in.index]))
          break;
        s = enqueue(d, pc[d], inputs, outputs, skipInputLoads);
        if (!s.ok())
          s.prepend(describeInstruction(d, pc[d], in));
        if (in.op == OpCode::Send)
          isSent[in.index] = true;
        if (in.op == OpCode::Recv)
          isReceived[in.index] = true;
        ++pc[d];
        progress = true;
      }
    }
  }
  for (size_t d = 1; d < n && s.ok(); ++d) {
    s = cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "join");
    if (s.ok())
      s = cudaStatus(cudaEventRecord(joins[d], devices[d].ctx.stream), "join");
    if (s.ok())
      s = cudaStatus(cudaStreamWaitEvent(origin.ctx.stream, joins[d], 0),
                     "join");
  }
  // Sending streams joined the capture by waiting on a send's event; each
  // must join back, even where a receiver already waited on its tail.
  for (size_t d = 0; d < sendStreams.size() && s.ok(); ++d) {
    if (!sendStreams[d])
      continue;
    cudaStreamCaptureStatus joined = cudaStreamCaptureStatusNone;
    s = cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "join");
    if (s.ok())
      s = cudaStatus(cudaStreamIsCapturing(sendStreams[d], &joined), "join");
    if (s.ok() && joined == cudaStreamCaptureStatusActive) {
      s = cudaStatus(cudaEventRecord(sendJoins[d], sendStreams[d]), "join");
      if (s.ok())
        s = cudaStatus(cudaStreamWaitEvent(origin.ctx.stream, sendJoins[d], 0),
                       "join");
    }
  }
  cudaSetDevice(origin.ctx.gpu);
  return endCapture(origin.ctx.stream, s, g.exec);
}

Status CudaExecutor::Impl::buildSegments(StreamGraphs &sg,
                                         const std::vector<TensorRef> &inputs,
                                         const std::vector<TensorRef> &outputs,
                                         bool skipInputLoads) {
  destroySegments(sg);
  sg.segments.resize(devices.size());
  for (size_t d = 0; d < devices.size(); ++d) {
    const auto &instrs = plan->devices[d].instructions;
    auto local = [&](size_t i) {
      OpCode op = instrs[i].op;
      return op == OpCode::Kernel || op == OpCode::LoadInput ||
             op == OpCode::StoreOutput;
    };
    for (size_t i = 0; i < instrs.size();) {
      if (!local(i)) {
        ++i;
        continue;
      }
      size_t end = i;
      while (end < instrs.size() && local(end))
        ++end;
      sg.segments[d].push_back({i, end});
      i = end;
    }
    if (!useGraphs)
      continue;
    Device &dev = devices[d];
    PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(dev.ctx.gpu), "capture"));
    for (Segment &seg : sg.segments[d]) {
      bool redirected = false;
      for (const Redirect &r : redirects[d])
        redirected = redirected || (r.first < seg.end && r.last >= seg.begin);
      for (int parity = 0; parity < 2; ++parity) {
        if (parity == 1 && !redirected) {
          seg.exec[1] = seg.exec[0];
          break;
        }
        streamParity = parity;
        PARTC_RETURN_IF_ERROR(
            cudaStatus(cudaStreamBeginCapture(dev.ctx.stream,
                                              cudaStreamCaptureModeRelaxed),
                       "begin capture"));
        Status s;
        for (size_t i = seg.begin; i < seg.end && s.ok(); ++i)
          s = enqueue(d, i, inputs, outputs, skipInputLoads);
        streamParity = -1;
        PARTC_RETURN_IF_ERROR(endCapture(dev.ctx.stream, s, seg.exec[parity]));
      }
    }
  }
  sg.built = true;
  return Status();
}

void CudaExecutor::Impl::planRedirects() {
  redirects.assign(devices.size(), {});
  for (size_t c = 0; c < plan->channels.size(); ++c) {
    const Channel &ch = plan->channels[c];
    Landing &l = landings[c];
    for (bool sender : {true, false}) {
      size_t d = sender ? ch.srcDevice : ch.dstDevice;
      const auto &instrs = plan->devices[d].instructions;
      for (size_t i = 0; i < instrs.size(); ++i) {
        const Instruction &in = instrs[i];
        if (in.index != c || in.op != (sender ? OpCode::Send : OpCode::Recv))
          continue;
        const BufferRef &b = sender ? in.inputs[0] : in.outputs[0];
        if (b.space != MemorySpace::Arena || b.type.byteSize() > ch.bytes)
          break;
        uint64_t begin = b.offset, end = b.offset + b.type.byteSize();
        size_t first = 0, last = 0;
        if (!findTransferWindow(plan->devices[d], i, first, last))
          break;
        // Two redirects may share a range only at different times.
        bool clash = false;
        for (const Redirect &r : redirects[d])
          clash = clash || (r.begin < end && begin < r.end && r.first <= last &&
                            first <= r.last);
        if (clash)
          break;
        Redirect r{begin, end, first, last, {}};
        for (int p = 0; p < 2; ++p)
          r.target[p] = sender ? l.stage[p] : l.slot[p];
        redirects[d].push_back(r);
        (sender ? l.directSend : l.directRecv) = true;
        break;
      }
    }
  }
}

Status CudaExecutor::Impl::prepareLandings() {
  if (!landings.empty() || plan->channels.empty())
    return Status();
  copyStreams.assign(devices.size(), nullptr);
  for (size_t d = 0; d < devices.size(); ++d) {
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "copy stream"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaStreamCreateWithFlags(&copyStreams[d], cudaStreamNonBlocking),
        "copy stream"));
  }
  landings.resize(plan->channels.size());
  // Per parity on one side of a channel: a buffer, and the events that
  // this side records (an event belongs to the device that records it).
  auto prepare = [&](size_t c, size_t device, uint8_t *(&buffers)[2],
                     const std::vector<cudaEvent_t *> &recorded,
                     const char *what) {
    const Channel &ch = plan->channels[c];
    int gpu = devices[device].ctx.gpu;
    PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(gpu), what));
    for (int p = 0; p < 2; ++p) {
      cudaError_t err = cudaMalloc(&buffers[p], ch.bytes ? ch.bytes : 1);
      if (err != cudaSuccess)
        return Status::error(
            "GPU " + std::to_string(gpu) + ": out of memory allocating " +
            std::to_string(ch.bytes) + " bytes to " + what + " channel " +
            std::to_string(c) + " while streaming; run without --stream");
    }
    for (cudaEvent_t *e : recorded)
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaEventCreateWithFlags(e, cudaEventDisableTiming), what));
    return Status();
  };
  for (size_t c = 0; c < plan->channels.size(); ++c) {
    Landing &l = landings[c];
    // "Pulled" is recorded where the staging buffer is last read: by the
    // receiver's peer or host copy, on the source's sending stream for NCCL.
    bool pulledBySender = routes[c] == Route::Nccl;
    std::vector<cudaEvent_t *> receiverEvents = {&l.filled[0], &l.filled[1],
                                                 &l.free[0], &l.free[1]};
    std::vector<cudaEvent_t *> senderEvents = {&l.staged[0], &l.staged[1]};
    for (int p = 0; p < 2; ++p) {
      (pulledBySender ? senderEvents : receiverEvents).push_back(&l.pulled[p]);
      if (routes[c] == Route::Host)
        senderEvents.push_back(&l.bounced[p]);
    }
    PARTC_RETURN_IF_ERROR(prepare(c, plan->channels[c].dstDevice, l.slot,
                                  receiverEvents, "receive"));
    PARTC_RETURN_IF_ERROR(
        prepare(c, plan->channels[c].srcDevice, l.stage, senderEvents, "send"));
  }
  if (directTransfers)
    planRedirects();
  return Status();
}

void CudaExecutor::enableStreamTracing() { impl_->streamTracing = true; }

Status CudaExecutor::Impl::pooledEvent(size_t d, cudaEvent_t &e) {
  if (spanPoolUsed[d] == spanPool[d].size()) {
    cudaEvent_t fresh;
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaEventCreate(&fresh), "stream trace event"));
    spanPool[d].push_back(fresh);
  }
  e = spanPool[d][spanPoolUsed[d]++];
  return Status();
}

Status CudaExecutor::Impl::traced(size_t d, cudaStream_t stream, size_t index,
                                  const char *what, size_t detail,
                                  const char *category, int track, size_t batch,
                                  const std::function<Status()> &body) {
  if (!streamTracing)
    return body();
  Span span{d, index, nullptr, nullptr, what, detail, category, track, batch};
  PARTC_RETURN_IF_ERROR(pooledEvent(d, span.begin));
  PARTC_RETURN_IF_ERROR(
      cudaStatus(cudaEventRecord(span.begin, stream), "stream trace"));
  PARTC_RETURN_IF_ERROR(body());
  PARTC_RETURN_IF_ERROR(pooledEvent(d, span.end));
  PARTC_RETURN_IF_ERROR(
      cudaStatus(cudaEventRecord(span.end, stream), "stream trace"));
  spans.push_back(span);
  return Status();
}

void CudaExecutor::Impl::collectSpans() {
  trace.clear();
  for (const Span &span : spans) {
    float begin = 0, duration = 0;
    if (cudaEventElapsedTime(&begin, streamStart[span.device], span.begin) !=
            cudaSuccess ||
        cudaEventElapsedTime(&duration, span.begin, span.end) != cudaSuccess)
      continue;
    TraceEvent e;
    e.device = span.device;
    e.index = span.index;
    e.startUs = streamStartHostUs[span.device] + begin * 1e3;
    e.durationUs = duration * 1e3;
    e.name = span.what
                 ? std::string(span.what) + " #" + std::to_string(span.detail)
                 : "instructions " + std::to_string(span.index) + ".." +
                       std::to_string(span.detail);
    e.category = span.category;
    e.track = span.track;
    e.batch = static_cast<int64_t>(span.batch);
    trace.push_back(std::move(e));
  }
  spans.clear();
}

Status CudaExecutor::Impl::enqueueStreamSend(size_t d, size_t i, size_t batch) {
  Device &dev = devices[d];
  const Instruction &in = plan->devices[d].instructions[i];
  Landing &land = landings[in.index];
  int p = static_cast<int>(batch % 2);
  // Direct: this batch's kernels wrote the value into stage[p] (after
  // waiting, as the batch began, for batch k - 2 to be pulled from it).
  if (land.directSend)
    return cudaStatus(cudaEventRecord(land.staged[p], dev.ctx.stream), "send");
  // The staging buffer's previous batch (k - 2) must have been pulled.
  PARTC_RETURN_IF_ERROR(cudaStatus(
      cudaStreamWaitEvent(dev.ctx.stream, land.pulled[p], 0), "send wait"));
  PARTC_RETURN_IF_ERROR(
      traced(d, dev.ctx.stream, i, "staging copy", in.index, "transfer", 0,
             batch, [&] {
               return cudaStatus(
                   cudaMemcpyAsync(land.stage[p], resolveAt(d, i, in.inputs[0]),
                                   in.inputs[0].type.byteSize(),
                                   cudaMemcpyDeviceToDevice, dev.ctx.stream),
                   "staging copy");
             }));
  return cudaStatus(cudaEventRecord(land.staged[p], dev.ctx.stream), "send");
}

Status CudaExecutor::Impl::enqueueStreamRecv(size_t d, size_t i, size_t batch) {
  Device &dev = devices[d];
  const Instruction &in = plan->devices[d].instructions[i];
  Landing &land = landings[in.index];
  int p = static_cast<int>(batch % 2);
  size_t bytes = in.outputs[0].type.byteSize();
  cudaStream_t copy = copyStreams[d];
  size_t srcDev = plan->channels[in.index].srcDevice;
  Route route = routes[in.index];
  // Host route: the sender's copy stream moves the staged batch into host
  // memory. The buffer of parity p is free again: the sender staged this
  // batch only after batch k - 2 was pulled, i.e. copied out of it.
  if (route == Route::Host) {
    cudaStream_t out = copyStreams[srcDev];
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(devices[srcDev].ctx.gpu), "staging"));
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaStreamWaitEvent(out, land.staged[p], 0), "recv wait"));
    PARTC_RETURN_IF_ERROR(traced(
        srcDev, out, i, "copy to host", in.index, "transfer", 1, batch, [&] {
          return cudaStatus(cudaMemcpyAsync(bounce[in.index][p], land.stage[p],
                                            bytes, cudaMemcpyDeviceToHost, out),
                            "copy to host memory");
        }));
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaEventRecord(land.bounced[p], out), "staging"));
    PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(dev.ctx.gpu), "staging"));
  }
  // The slot's last batch must have been moved out before it is refilled.
  PARTC_RETURN_IF_ERROR(
      cudaStatus(cudaStreamWaitEvent(copy, land.free[p], 0), "recv wait"));
  if (route == Route::Nccl) {
    // Sent from the staging buffer on the source's sending stream, which
    // then also records that the buffer was read.
    cudaStream_t sending = sendStreams[srcDev];
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(devices[srcDev].ctx.gpu), "NCCL send"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaStreamWaitEvent(sending, land.staged[p], 0), "NCCL send wait"));
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(dev.ctx.gpu), "NCCL receive"));
    PARTC_RETURN_IF_ERROR(traced(
        d, copy, i, "NCCL transfer", in.index, "transfer", 1, batch, [&] {
          return ncclTransfer(srcDev, land.stage[p], sending, d, land.slot[p],
                              copy, bytes);
        }));
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(devices[srcDev].ctx.gpu), "NCCL send"));
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaEventRecord(land.pulled[p], sending), "NCCL send"));
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(dev.ctx.gpu), "NCCL receive"));
  } else {
    bool peer = route == Route::Peer;
    const void *from =
        peer ? static_cast<const void *>(land.stage[p]) : bounce[in.index][p];
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaStreamWaitEvent(copy, peer ? land.staged[p] : land.bounced[p], 0),
        "recv wait"));
    PARTC_RETURN_IF_ERROR(traced(
        d, copy, i, peer ? "peer copy" : "copy from host", in.index, "transfer",
        1, batch, [&] {
          return cudaStatus(
              cudaMemcpyAsync(land.slot[p], from, bytes,
                              peer ? cudaMemcpyDefault : cudaMemcpyHostToDevice,
                              copy),
              peer ? "peer copy" : "copy from host memory");
        }));
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaEventRecord(land.pulled[p], copy), "recv"));
  }
  PARTC_RETURN_IF_ERROR(
      cudaStatus(cudaEventRecord(land.filled[p], copy), "recv"));
  PARTC_RETURN_IF_ERROR(cudaStatus(
      cudaStreamWaitEvent(dev.ctx.stream, land.filled[p], 0), "recv wait"));
  // Direct: this batch's kernels read slot[p] itself; free[p] is recorded
  // as the batch ends.
  if (land.directRecv)
    return Status();
  // In stream order on the compute stream: the arena is not overwritten
  // while this device's earlier work still reads it.
  PARTC_RETURN_IF_ERROR(traced(
      d, dev.ctx.stream, i, "landing copy", in.index, "transfer", 0, batch,
      [&] {
        return cudaStatus(
            cudaMemcpyAsync(resolveAt(d, i, in.outputs[0]), land.slot[p], bytes,
                            cudaMemcpyDeviceToDevice, dev.ctx.stream),
            "landing copy");
      }));
  return cudaStatus(cudaEventRecord(land.free[p], dev.ctx.stream), "recv");
}

Status CudaExecutor::runStream(const std::vector<TensorRef> &inputs,
                               const std::vector<TensorRef> &outputs,
                               size_t iterations, bool skipInputLoads) {
  Impl &impl = *impl_;
  if (impl.profiling)
    return Status::error("streaming runs cannot be profiled or traced; "
                         "profile without --stream");
  if (impl.runs == 0) {
    // A first, direct run finds cuDNN's lazily loaded kernels before any
    // capture and leaves the inputs in place for skipInputLoads.
    PARTC_RETURN_IF_ERROR(run(inputs, outputs));
  }
  PARTC_RETURN_IF_ERROR(impl.prepareLandings());
  Impl::StreamGraphs &sg = impl.streamGraphs[skipInputLoads ? 1 : 0];
  std::vector<void *> pointers = hostPointers(inputs, outputs);
  if (!sg.built || sg.pointers != pointers) {
    Status s = impl.buildSegments(sg, inputs, outputs, skipInputLoads);
    if (!s.ok()) {
      if (!impl.useGraphs)
        return s;
      // Not fatal: enqueue directly from now on and say why.
      cudaGetLastError();
      impl.useGraphs = false;
      graphFailure_ = s.message();
      PARTC_RETURN_IF_ERROR(
          impl.buildSegments(sg, inputs, outputs, skipInputLoads));
    }
    sg.pointers = pointers;
  }

  // One thread enqueues everything. Events are reused by every batch, so a
  // record for batch k+1 may only be enqueued once every wait on batch k's
  // record is: a send waits for the previous batch's receive, a receive
  // for the previous batch's wait_consumed.
  const Plan &plan = *impl.plan;
  size_t n = impl.devices.size(), channels = plan.channels.size();
  std::vector<size_t> sentCount(channels, 0), receivedCount(channels, 0),
      waitedCount(channels, 0);
  std::vector<bool> awaited(channels, false);
  for (const DeviceProgram &prog : plan.devices)
    for (const Instruction &in : prog.instructions)
      if (in.op == OpCode::WaitConsumed)
        awaited[in.index] = true;
  // Per device: position in its instruction list and batch number.
  std::vector<size_t> pc(n, 0), batch(n, 0), segment(n, 0);
  std::vector<bool> begun(n, false);
  // Direct transfers' per-batch events (see Landing).
  auto beginBatch = [&](size_t d, size_t k) -> Status {
    int p = static_cast<int>(k % 2);
    for (size_t c = 0; c < channels; ++c)
      if (impl.landings[c].directSend && plan.channels[c].srcDevice == d)
        PARTC_RETURN_IF_ERROR(
            cudaStatus(cudaStreamWaitEvent(impl.devices[d].ctx.stream,
                                           impl.landings[c].pulled[p], 0),
                       "send wait"));
    return Status();
  };
  auto endBatch = [&](size_t d, size_t k) -> Status {
    int p = static_cast<int>(k % 2);
    for (size_t c = 0; c < channels; ++c)
      if (impl.landings[c].directRecv && plan.channels[c].dstDevice == d)
        PARTC_RETURN_IF_ERROR(
            cudaStatus(cudaEventRecord(impl.landings[c].free[p],
                                       impl.devices[d].ctx.stream),
                       "recv"));
    return Status();
  };
  Status s;
  if (impl.streamTracing) {
    // Every stream is idle here, so each start event completes as it is
    // recorded; the host's clock puts the devices on one time line.
    impl.spans.clear();
    impl.spanPool.resize(n);
    impl.spanPoolUsed.assign(n, 0);
    impl.streamStart.resize(n, nullptr);
    impl.streamStartHostUs.assign(n, 0);
    auto origin = std::chrono::steady_clock::now();
    for (size_t d = 0; d < n && s.ok(); ++d) {
      s = cudaStatus(cudaSetDevice(impl.devices[d].ctx.gpu), "stream trace");
      if (s.ok() && !impl.streamStart[d])
        s = cudaStatus(cudaEventCreate(&impl.streamStart[d]), "stream trace");
      if (s.ok())
        s = cudaStatus(
            cudaEventRecord(impl.streamStart[d], impl.devices[d].ctx.stream),
            "stream trace");
      impl.streamStartHostUs[d] = std::chrono::duration<double, std::micro>(
                                      std::chrono::steady_clock::now() - origin)
                                      .count();
    }
  }
  size_t finished = 0;
  while (finished < n && s.ok()) {
    bool progress = false;
    for (size_t d = 0; d < n && s.ok(); ++d) {
      const auto &instrs = plan.devices[d].instructions;
      Impl::Device &dev = impl.devices[d];
      if (batch[d] >= iterations)
        continue;
      s = cudaStatus(cudaSetDevice(dev.ctx.gpu), "stream");
      while (s.ok() && batch[d] < iterations) {
        size_t k = batch[d];
        if (!begun[d]) {
          s = beginBatch(d, k);
          begun[d] = true;
          if (!s.ok())
            break;
        }
        if (pc[d] == instrs.size()) {
          s = endBatch(d, k);
          if (!s.ok())
            break;
          begun[d] = false;
          pc[d] = 0;
          segment[d] = 0;
          if (++batch[d] == iterations)
            ++finished;
          progress = true;
          // Round robin by batch: a device that ran far ahead could block
          // this thread on a full launch queue while the others starve.
          break;
        }
        const Instruction &in = instrs[pc[d]];
        auto &segs = sg.segments[d];
        if (segment[d] < segs.size() && segs[segment[d]].begin == pc[d]) {
          Impl::Segment &seg = segs[segment[d]++];
          s = impl.traced(
              d, dev.ctx.stream, seg.begin, nullptr, seg.end - 1, "kernel", 0,
              k, [&] {
                if (cudaGraphExec_t exec = seg.exec[k % 2])
                  return cudaStatus(cudaGraphLaunch(exec, dev.ctx.stream),
                                    "graph launch");
                Status r;
                impl.streamParity = static_cast<int>(k % 2);
                for (size_t i = seg.begin; i < seg.end && r.ok(); ++i) {
                  r = impl.enqueue(d, i, inputs, outputs, skipInputLoads);
                  if (!r.ok())
                    r.prepend("GPU " + std::to_string(dev.ctx.gpu) + " " +
                              describeInstruction(d, i, instrs[i]));
                }
                impl.streamParity = -1;
                return r;
              });
          pc[d] = seg.end;
          progress = true;
          continue;
        }
        uint32_t c = in.index;
        bool ready = true;
        if (in.op == OpCode::Send)
          ready = receivedCount[c] >= k;
        else if (in.op == OpCode::Recv)
          ready = sentCount[c] > k && (!awaited[c] || waitedCount[c] >= k);
        else if (in.op == OpCode::WaitConsumed)
          ready = receivedCount[c] > k;
        if (!ready)
          break;
        // A wait_consumed has nothing to wait for: the sender's staging
        // copy was made in its own stream order.
        impl.streamParity = static_cast<int>(k % 2);
        if (in.op == OpCode::Recv)
          s = impl.enqueueStreamRecv(d, pc[d], k);
        else if (in.op == OpCode::Send)
          s = impl.enqueueStreamSend(d, pc[d], k);
        else if (in.op != OpCode::WaitConsumed)
          s = impl.enqueue(d, pc[d], inputs, outputs, skipInputLoads);
        impl.streamParity = -1;
        if (!s.ok()) {
          s.prepend("GPU " + std::to_string(dev.ctx.gpu) + " " +
                    describeInstruction(d, pc[d], in));
          break;
        }
        if (in.op == OpCode::Send)
          ++sentCount[c];
        else if (in.op == OpCode::Recv)
          ++receivedCount[c];
        else if (in.op == OpCode::WaitConsumed)
          ++waitedCount[c];
        ++pc[d];
        progress = true;
      }
    }
    if (s.ok() && !progress)
      s = Status::error("the streamed schedule stalled (a plan whose "
                        "channels cannot be ordered across batches)");
  }
  for (size_t d = 0; d < n; ++d) {
    cudaSetDevice(impl.devices[d].ctx.gpu);
    Status sync = cudaStatus(cudaStreamSynchronize(impl.devices[d].ctx.stream),
                             "synchronize");
    if (s.ok() && !sync.ok())
      s = sync.prepend("GPU " + std::to_string(impl.devices[d].ctx.gpu));
  }
  if (!s.ok())
    return s;
  if (impl.streamTracing)
    impl.collectSpans();
  impl.runs += iterations;
  return impl.checkKernels();
}

} // namespace partc::runtime
