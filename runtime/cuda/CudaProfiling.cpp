//===- CudaProfiling.cpp - Kernel profiles and traces
//-----------------------===//
//
// Every kernel timed with CUDA events, and traces of single and streamed
// runs for Perfetto.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/ExecutorImpl.h"

namespace partc::runtime {

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

} // namespace partc::runtime
