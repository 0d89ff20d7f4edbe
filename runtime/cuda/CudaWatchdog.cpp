//===- CudaWatchdog.cpp - Ending runs whose devices fail or stop ----------===//
//
// A device that fails mid-step leaves its peers waiting: NCCL's kernels
// spin until the missing rank arrives, and a stream waiting on another
// GPU's event waits forever. So a run ends with the host polling every
// device's stream: an error on any device, or an NCCL communicator's
// asynchronous error, aborts the communicators and ends the run naming the
// device; a run that outlasts the step timeout is given up the same way,
// with where each device got to (progress marks written by the devices
// themselves). A failed device's work cannot be cancelled, so the executor
// is then lost and the caller exits.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/ExecutorImpl.h"

namespace partc::runtime {

namespace {

/// A spinning probe gives up by itself after this long, so that an injected
/// hang never outlives a process that forgot to release it by much.
constexpr uint64_t kProbeLimitNs = 600'000'000'000ull;

} // namespace

Status CudaExecutor::Impl::prepareWatchdog() {
  if (failure.stepTimeoutSeconds < 0)
    failure.stepTimeoutSeconds = kDefaultGpuStepTimeout;
  PARTC_RETURN_IF_ERROR(checkFaultInjection(failure, plan->devices.size()));
  bool injected = failure.fault.kind != FaultInjection::Kind::None;
  if (devices.size() < 2 && !injected)
    return Status();
  auto mapped = [&](volatile unsigned *&words, size_t count) {
    void *p = nullptr;
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(devices[0].ctx.gpu), "progress words"));
    // Portable: every GPU's kernels write their own word.
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaHostAlloc(&p, count * sizeof(unsigned),
                                 cudaHostAllocMapped | cudaHostAllocPortable),
                   "progress words"));
    words = static_cast<volatile unsigned *>(p);
    for (size_t i = 0; i < count; ++i)
      words[i] = 0;
    return Status();
  };
  PARTC_RETURN_IF_ERROR(mapped(progress, devices.size()));
  if (injected) {
    PARTC_RETURN_IF_ERROR(mapped(faultWords, 2));
    faultAt = firstPeerWait(plan->devices[failure.fault.device]);
  }
  // Loaded now: with CUDA's lazy loading, a kernel's first launch waits
  // for the GPU to be idle, which it never is again behind a hang.
  for (size_t d = 0; d < devices.size(); ++d) {
    cudaStream_t stream = devices[d].ctx.stream;
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "progress mark"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        launchProgressMark(const_cast<unsigned *>(progress + d), 0, stream),
        "progress mark"));
    if (faultWords)
      PARTC_RETURN_IF_ERROR(cudaStatus(
          launchFaultProbe(const_cast<const unsigned *>(faultWords),
                           const_cast<const unsigned *>(faultWords + 1), 0,
                           stream),
          "fault probe"));
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaStreamSynchronize(stream), "progress mark"));
  }
  return Status();
}

Status CudaExecutor::Impl::markProgress(size_t d, size_t i) {
  if (!progress)
    return Status();
  const auto &instrs = plan->devices[d].instructions;
  if (i < instrs.size() && !exchangesWithPeer(instrs[i].op))
    return Status();
  cudaStream_t stream = devices[d].ctx.stream;
  if (faultWords && d == failure.fault.device && i == faultAt)
    PARTC_RETURN_IF_ERROR(cudaStatus(
        launchFaultProbe(const_cast<const unsigned *>(faultWords),
                         const_cast<const unsigned *>(faultWords + 1),
                         kProbeLimitNs, stream),
        "fault probe"));
  return cudaStatus(launchProgressMark(const_cast<unsigned *>(progress + d),
                                       static_cast<unsigned>(i + 1), stream),
                    "progress mark");
}

void CudaExecutor::Impl::startWatchedRun() {
  watchStart = std::chrono::steady_clock::now();
  if (progress)
    for (size_t d = 0; d < devices.size(); ++d)
      progress[d] = 0;
  if (faultWords) {
    bool now = runs + 1 == failure.fault.run;
    faultWords[0] = !now ? 0
                    : failure.fault.kind == FaultInjection::Kind::Error
                        ? kFaultProbeError
                        : kFaultProbeHang;
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void CudaExecutor::Impl::abortCollectives() {
#ifdef PARTC_HAVE_NCCL
  // Each on a thread of its own, never waited for: an abort called inline
  // never returned while the other GPU still ran its hung kernel (on 2 x
  // H200; freeing its memory waits for the GPU to go idle).
  for (ncclComm_t &c : comms)
    if (c) {
      std::thread([c] { ncclCommAbort(c); }).detach();
      c = nullptr;
    }
#endif
}

bool CudaExecutor::Impl::onDeviceThreads(
    const std::function<Status(size_t)> &work, std::vector<Status> &results) {
  // Shared with the threads, which may outlive this call.
  struct Shared {
    std::mutex mutex;
    std::condition_variable finished;
    std::function<Status(size_t)> work;
    std::vector<Status> results;
    size_t done = 0;
  };
  size_t n = devices.size();
  auto shared = std::make_shared<Shared>();
  shared->work = work;
  shared->results.resize(n);
  for (size_t d = 0; d < n; ++d)
    std::thread([shared, d] {
      Status s = shared->work(d);
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->results[d] = std::move(s);
      ++shared->done;
      shared->finished.notify_all();
    }).detach();
  std::unique_lock<std::mutex> lock(shared->mutex);
  auto allDone = [&] { return shared->done == n; };
  bool inTime = true;
  if (failure.stepTimeoutSeconds > 0)
    inTime = shared->finished.wait_until(
        lock,
        watchStart +
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::duration<double>(failure.stepTimeoutSeconds)),
        allDone);
  else
    shared->finished.wait(lock, allDone);
  results = shared->results;
  return inTime;
}

Status CudaExecutor::Impl::giveUp(bool markersValid, const std::string &what,
                                  std::vector<unsigned> marks) {
  // Where the devices were when time ran out, before the abort lets the
  // healthy ones run on to their end.
  if (marks.empty() && progress)
    marks.assign(progress, progress + devices.size());
  lost = true;
  abortCollectives();
  std::string message =
      timeoutHeadline(*plan, runs + 1, failure.stepTimeoutSeconds);
  if (progress && markersValid)
    message += ": " + progressReport(marks);
  if (!what.empty())
    message += "; " + what;
  if (usesNccl)
    message += "; the NCCL communicators were aborted";
  return Status::error(message +
                       ". The GPU work cannot be resumed; the run ends here");
}

std::string
CudaExecutor::Impl::progressReport(const std::vector<unsigned> &marks) {
  // Unfinished: short of its end mark. (A graph of several GPUs runs on
  // the first device's stream, so the others' streams say nothing.)
  std::vector<int64_t> reached(devices.size());
  std::vector<bool> pending(devices.size());
  for (size_t d = 0; d < devices.size(); ++d) {
    reached[d] = static_cast<int64_t>(marks[d]) - 1;
    pending[d] = reached[d] !=
                 static_cast<int64_t>(plan->devices[d].instructions.size());
  }
  return stallReport(*plan, reached, pending, [&](size_t d) {
    return "device " + std::to_string(d) + " (GPU " +
           std::to_string(devices[d].ctx.gpu) + ")";
  });
}

Status CudaExecutor::Impl::awaitDevices(bool markersValid) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = watchStart;
  const size_t n = devices.size();
  std::vector<bool> pending(n, true);
  std::vector<cudaError_t> errors(n, cudaSuccess);
  size_t left = n;
  // The poll in which each device's error showed: the first is the cause,
  // the others often its consequence (a peer's kernel touching the failed
  // GPU's memory, one graph spanning both GPUs).
  std::vector<size_t> seenAt(n, 0);
  std::vector<unsigned> marks;
  std::string ncclFailure;
  auto anyFailure = [&] {
    return !ncclFailure.empty() ||
           std::any_of(errors.begin(), errors.end(),
                       [](cudaError_t e) { return e != cudaSuccess; });
  };
  bool aborted = false, timedOut = false;
  Clock::time_point abortedAt;
  // After an abort, the healthy devices' streams drain within moments;
  // what is still running then never will.
  const auto grace = std::chrono::seconds(2);
  const double limit = failure.stepTimeoutSeconds;
  for (size_t poll = 0;; ++poll) {
    for (size_t d = 0; d < n; ++d) {
      // A finished stream is asked again: a graph of several GPUs runs on
      // the first device's stream, and another GPU's error shows only in
      // the calls made on that GPU.
      if (!pending[d] && errors[d] != cudaSuccess)
        continue;
      cudaError_t r = cudaStreamQuery(devices[d].ctx.stream);
      if (r == cudaErrorNotReady)
        continue;
      if (pending[d]) {
        pending[d] = false;
        --left;
      }
      errors[d] = r;
      seenAt[d] = poll;
    }
#ifdef PARTC_HAVE_NCCL
    for (size_t d = 0; d < comms.size() && ncclFailure.empty(); ++d) {
      ncclResult_t async = ncclSuccess;
      if (comms[d] && ncclCommGetAsyncError(comms[d], &async) == ncclSuccess &&
          async != ncclSuccess && async != ncclInProgress)
        ncclFailure = "device " + std::to_string(d) + " (GPU " +
                      std::to_string(devices[d].ctx.gpu) + "): NCCL reported " +
                      ncclGetErrorString(async);
    }
#endif
    if (left == 0)
      break;
    Clock::time_point now = Clock::now();
    bool failed = anyFailure();
    if (!aborted && !failed && limit > 0 &&
        std::chrono::duration<double>(now - start).count() > limit) {
      timedOut = true;
      if (progress)
        marks.assign(progress, progress + n);
    }
    if (!aborted && (failed || timedOut)) {
      abortCollectives();
      aborted = true;
      abortedAt = now;
    }
    if (aborted && now - abortedAt > grace)
      break;
    // Spin while a step would still be running, then back off.
    auto waited = now - start;
    if (waited > std::chrono::milliseconds(50))
      std::this_thread::sleep_for(waited > std::chrono::seconds(1)
                                      ? std::chrono::microseconds(1000)
                                      : std::chrono::microseconds(100));
    else
      std::this_thread::yield();
  }
  // Clear the calling thread's record of the errors seen above.
  cudaGetLastError();
  if (!timedOut && !anyFailure())
    return Status();
  if (timedOut)
    return giveUp(markersValid, "", marks);
  lost = true;
  std::string step = runName(*plan, runs + 1);
  std::string message;
  // GPU by GPU: the plan devices that share a GPU share its context, so
  // its error is theirs; which of them caused it, the GPU cannot tell.
  std::map<int, std::pair<size_t, cudaError_t>> byGpu;
  for (size_t d = 0; d < n; ++d)
    if (errors[d] != cudaSuccess && !byGpu.count(devices[d].ctx.gpu))
      byGpu[devices[d].ctx.gpu] = {seenAt[d], errors[d]};
  std::vector<std::pair<size_t, int>> order; // (poll, GPU)
  for (auto &[gpu, entry] : byGpu)
    order.push_back({entry.first, gpu});
  std::stable_sort(order.begin(), order.end());
  for (auto [poll, gpu] : order) {
    cudaError_t error = byGpu[gpu].second;
    std::vector<size_t> sharing;
    for (size_t d = 0; d < n; ++d)
      if (devices[d].ctx.gpu == gpu)
        sharing.push_back(d);
    std::string which;
    for (size_t d : sharing)
      which += (which.empty() ? "" : ", ") + std::to_string(d);
    message += (message.empty() ? step + " failed on GPU " : "; then on GPU ") +
               std::to_string(gpu) + " (plan device" +
               (sharing.size() > 1 ? "s " : " ") + which +
               "): " + cudaGetErrorName(error) + ": " +
               cudaGetErrorString(error);
  }
  if (!ncclFailure.empty())
    message += (message.empty() ? step + " failed on " : "; ") + ncclFailure;
  size_t stuck = std::count(pending.begin(), pending.end(), true);
  if (usesNccl)
    message += "; the NCCL communicators were aborted";
  if (stuck) {
    std::string which;
    for (size_t d = 0; d < n; ++d)
      if (pending[d])
        which += (which.empty() ? "" : ", ") + std::to_string(d);
    message += "; device(s) " + which + " did not stop after that";
  }
  message += ". The GPU work cannot be resumed; the run ends here";
  return Status::error(message);
}

bool CudaExecutor::lost() const { return impl_->lost; }

} // namespace partc::runtime
