//===- CpuExecutor.cpp ----------------------------------------------------===//
#include "runtime/cpu/CpuExecutor.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace partc::runtime {

/// memcpy, except that empty tensors (whose data may be null) copy nothing.
static void copyBytes(void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memcpy(dst, src, bytes);
}

using AlignedBytes = std::unique_ptr<uint8_t[], void (*)(uint8_t *)>;

struct CpuDeviceState {
  /// 64-byte aligned storage for the device's static memory plan.
  AlignedBytes arena{nullptr, [](uint8_t *) {}};
  uint64_t arenaBytes = 0;
  /// What the plan keeps across runs (training state), 64-byte aligned.
  AlignedBytes state{nullptr, [](uint8_t *) {}};
  std::vector<std::unique_ptr<Kernel>> kernels; // one per instruction
};

/// 64-byte aligned storage for `bytes` (rounded up), or none for 0 bytes.
static Status allocateAligned(size_t device, uint64_t bytes, const char *what,
                              AlignedBytes &out) {
  uint64_t rounded = (bytes + 63) / 64 * 64;
  if (!rounded)
    return Status();
  void *mem = std::aligned_alloc(64, rounded);
  if (!mem)
    return Status::error("device " + std::to_string(device) +
                         ": cannot allocate " + what + " of " +
                         std::to_string(rounded) + " bytes");
  out = {static_cast<uint8_t *>(mem), [](uint8_t *p) { std::free(p); }};
  return Status();
}

struct CpuExecutor::Sync {
  /// One all_reduce group's rendezvous: its devices' inputs (in the order
  /// of its "devices"), how many have arrived and how many have read them.
  struct Collective {
    std::vector<std::vector<const float *>> sources; // [device][bucket]
    size_t arrived = 0, finished = 0;
  };
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<bool> sent, consumed;
  std::map<uint32_t, Collective> collectives;
  bool aborted = false;
  std::string abortReason;
  /// Per device: the last instruction exchanging with a peer it reached
  /// (-1: none yet), and whether its thread has returned.
  std::vector<int64_t> reached;
  std::vector<bool> returned;
  /// With a step timeout: when waiting for another device gives up.
  std::optional<std::chrono::steady_clock::time_point> deadline;

  /// Set when the deadline aborted the run: abortReason is then the run's
  /// error.
  bool timedOut = false;
};

CpuExecutor::CpuExecutor(const Plan &plan) : plan_(plan) {}
CpuExecutor::~CpuExecutor() = default;

Status CpuExecutor::create(const Plan &plan,
                           std::unique_ptr<CpuExecutor> &result,
                           const FailureOptions &failure) {
  PARTC_RETURN_IF_ERROR(checkFaultInjection(failure, plan.devices.size()));
  // The arenas are written whole at load: refuse, with the numbers, what
  // this machine cannot hold instead of running out of memory.
  uint64_t total = 0;
  for (const DeviceProgram &prog : plan.devices)
    total += prog.arenaBytes + prog.stateBytes; // each at most 2^50
  uint64_t hostBytes = hostMemoryBytes();
  if (total > hostBytes)
    return Status::error(
        "the plan's device arenas and state need " + std::to_string(total) +
        " bytes but this machine has " + std::to_string(hostBytes) +
        " bytes of memory; run it with --backend cuda or "
        "on a larger machine");
  std::unique_ptr<CpuExecutor> exec(new CpuExecutor(plan));
  exec->sync_ = std::make_unique<Sync>();
  exec->failure_ = failure;
  if (failure.fault.kind != FaultInjection::Kind::None)
    exec->faultAt_ = firstPeerWait(plan.devices[failure.fault.device]);
  exec->channelSources_.resize(plan.channels.size());
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const DeviceProgram &prog = plan.devices[d];
    auto state = std::make_unique<CpuDeviceState>();
    state->arenaBytes = prog.arenaBytes;
    PARTC_RETURN_IF_ERROR(
        allocateAligned(d, prog.arenaBytes, "an arena", state->arena));
    PARTC_RETURN_IF_ERROR(
        allocateAligned(d, prog.stateBytes, "a state", state->state));
    state->kernels.resize(prog.instructions.size());
    for (size_t i = 0; i < prog.instructions.size(); ++i) {
      const Instruction &in = prog.instructions[i];
      if (in.op == OpCode::Send)
        exec->channelSources_[in.index] = {d, in.inputs[0]};
      if (in.op != OpCode::Kernel)
        continue;
      std::vector<TensorType> ins, outs;
      instructionTypes(in, ins, outs);
      Status s =
          createCpuKernel(in.kernel, in.attrs, ins, outs, state->kernels[i]);
      if (!s.ok())
        return s.prepend(describeInstruction(d, i, in));
    }
    exec->devices_.push_back(std::move(state));
  }
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const StateDecl &decl = plan.states[i];
    initialStateBytes(plan, i,
                      exec->devices_[decl.device]->state.get() + decl.offset);
  }
  result = std::move(exec);
  return Status();
}

Status CpuExecutor::readState(size_t index, void *data) const {
  if (index >= plan_.states.size())
    return Status::error("no state " + std::to_string(index));
  const StateDecl &decl = plan_.states[index];
  copyBytes(data, devices_[decl.device]->state.get() + decl.offset,
            decl.type.byteSize());
  return Status();
}

Status CpuExecutor::writeState(size_t index, const void *data) {
  if (index >= plan_.states.size())
    return Status::error("no state " + std::to_string(index));
  const StateDecl &decl = plan_.states[index];
  copyBytes(devices_[decl.device]->state.get() + decl.offset, data,
            decl.type.byteSize());
  return Status();
}

Status CpuExecutor::enableProfiling() {
  profiling_ = true;
  kernelTimes_.assign(plan_.devices.size(), {});
  for (size_t d = 0; d < plan_.devices.size(); ++d)
    kernelTimes_[d].assign(plan_.devices[d].instructions.size(), 0.0);
  return Status();
}

double CpuExecutor::kernelSeconds(size_t d, size_t i) const {
  if (!profiling_ || !profiledRuns_)
    return 0;
  return kernelTimes_[d][i] / static_cast<double>(profiledRuns_);
}

std::vector<TraceEvent> CpuExecutor::lastRunTrace() const {
  std::vector<TraceEvent> all;
  for (const auto &perDevice : trace_)
    all.insert(all.end(), perDevice.begin(), perDevice.end());
  return all;
}

void CpuExecutor::poisonArenas(uint8_t pattern) {
  for (auto &dev : devices_)
    if (dev->arenaBytes)
      std::memset(dev->arena.get(), pattern, dev->arenaBytes);
}

Status CpuExecutor::run(const std::vector<TensorRef> &inputs,
                        const std::vector<TensorRef> &outputs, bool) {
  if (inputs.size() != plan_.inputs.size() ||
      outputs.size() != plan_.outputs.size())
    return Status::error("wrong number of inputs or outputs");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].type != plan_.inputs[i].type)
      return Status::error("input '" + plan_.inputs[i].name + "' must be " +
                           plan_.inputs[i].type.str() + ", got " +
                           inputs[i].type.str());
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].type != plan_.outputs[i].type)
      return Status::error("output '" + plan_.outputs[i].name + "' must be " +
                           plan_.outputs[i].type.str());
  {
    std::lock_guard<std::mutex> lock(sync_->mutex);
    sync_->sent.assign(plan_.channels.size(), false);
    sync_->consumed.assign(plan_.channels.size(), false);
    sync_->collectives.clear();
    sync_->aborted = sync_->timedOut = false;
    sync_->abortReason.clear();
    sync_->reached.assign(devices_.size(), -1);
    sync_->returned.assign(devices_.size(), false);
    runStart_ = std::chrono::steady_clock::now();
    sync_->deadline.reset();
    if (failure_.stepTimeoutSeconds > 0)
      sync_->deadline =
          runStart_ +
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              std::chrono::duration<double>(failure_.stepTimeoutSeconds));
  }
  size_t n = devices_.size();
  if (tracing_)
    trace_.assign(n, {});
  std::vector<Status> results(n);
  if (n == 1) {
    results[0] = runDevice(0, inputs, outputs);
  } else {
    SingleThreadedBlas blas;
    std::vector<std::thread> threads;
    for (size_t d = 0; d < n; ++d)
      threads.emplace_back(
          [&, d] { results[d] = runDevice(d, inputs, outputs); });
    for (auto &t : threads)
      t.join();
  }
  ++runs_;
  // A timeout's report says more than any device's "aborted".
  if (sync_->timedOut)
    return Status::error(sync_->abortReason);
  if (Status s = rootCause(results); !s.ok())
    return s;
  if (profiling_)
    ++profiledRuns_;
  return Status();
}

template <typename Ready>
void CpuExecutor::waitLocked(std::unique_lock<std::mutex> &lock, Ready ready) {
  Sync &sync = *sync_;
  if (!sync.deadline) {
    sync.changed.wait(lock, ready);
    return;
  }
  if (sync.changed.wait_until(lock, *sync.deadline, ready) || sync.aborted)
    return;
  // The first waiter past the deadline aborts the run with the report.
  sync.aborted = sync.timedOut = true;
  sync.abortReason = stallReport();
  sync.changed.notify_all();
}

void CpuExecutor::reach(size_t d, size_t i) {
  std::lock_guard<std::mutex> lock(sync_->mutex);
  sync_->reached[d] = static_cast<int64_t>(i);
}

Status CpuExecutor::injectFault(size_t d, size_t i) {
  const FaultInjection &fault = failure_.fault;
  if (fault.kind == FaultInjection::Kind::None || d != fault.device ||
      i != faultAt_ || runs_ + 1 != fault.run)
    return Status();
  const auto &instrs = plan_.devices[d].instructions;
  std::string where = i < instrs.size()
                          ? describeInstruction(d, i, instrs[i])
                          : "device " + std::to_string(d) + " at its end";
  if (fault.kind == FaultInjection::Kind::Error)
    return Status::error(where + ": injected fault (--inject-fault error)");
  // A hang: this thread stops until the run is given up.
  Sync &sync = *sync_;
  std::unique_lock<std::mutex> lock(sync.mutex);
  waitLocked(lock, [&] { return sync.aborted; });
  return Status::error("device " + std::to_string(d) +
                       " aborted: " + sync.abortReason);
}

std::string CpuExecutor::stallReport() const {
  // Called with the mutex held.
  std::vector<bool> pending(devices_.size());
  for (size_t d = 0; d < pending.size(); ++d)
    pending[d] = !sync_->returned[d];
  return timeoutHeadline(plan_, runs_ + 1, failure_.stepTimeoutSeconds) + ": " +
         runtime::stallReport(plan_, sync_->reached, pending, [](size_t d) {
           return "device " + std::to_string(d);
         });
}

Status CpuExecutor::allReduce(size_t d, const Instruction &in,
                              const std::vector<TensorRef> &sources,
                              const std::vector<TensorRef> &targets) {
  Sync &sync = *sync_;
  std::vector<int64_t> devices = in.attrs.getInts("devices");
  size_t count = devices.size();
  size_t position =
      std::find(devices.begin(), devices.end(), int64_t(d)) - devices.begin();
  // Every device of the group waits for all of them twice: until every
  // input is there, and until every device has read them all (after which
  // each may write over its input).
  auto rendezvous = [&](size_t Sync::Collective::*counter) -> Status {
    std::unique_lock<std::mutex> lock(sync.mutex);
    Sync::Collective &c = sync.collectives[in.index];
    if (c.sources.empty())
      c.sources.resize(count);
    if (counter == &Sync::Collective::arrived)
      for (const TensorRef &source : sources)
        c.sources[position].push_back(source.as<float>());
    ++(c.*counter);
    sync.changed.notify_all();
    waitLocked(lock, [&] { return c.*counter == count || sync.aborted; });
    if (c.*counter != count)
      return Status::error("device " + std::to_string(d) +
                           " aborted: " + sync.abortReason);
    return Status();
  };
  PARTC_RETURN_IF_ERROR(rendezvous(&Sync::Collective::arrived));
  std::vector<std::vector<const float *>> all;
  {
    std::lock_guard<std::mutex> lock(sync.mutex);
    all = sync.collectives[in.index].sources;
  }
  // Summed in the order of the group's devices on every device, so every
  // replica gets the same bits.
  float divisor = static_cast<float>(count);
  for (size_t pair = 0; pair < targets.size(); ++pair) {
    float *out = targets[pair].as<float>();
    int64_t n = targets[pair].type.numElements();
    for (int64_t i = 0; i < n; ++i) {
      float sum = all[0][pair][i];
      for (size_t k = 1; k < count; ++k)
        sum += all[k][pair][i];
      out[i] = sum / divisor;
    }
  }
  return rendezvous(&Sync::Collective::finished);
}

Status CpuExecutor::runDevice(size_t d, const std::vector<TensorRef> &inputs,
                              const std::vector<TensorRef> &outputs) {
  CpuDeviceState &dev = *devices_[d];
  const DeviceProgram &prog = plan_.devices[d];
  Sync &sync = *sync_;
  auto resolve = [&](const BufferRef &b) -> TensorRef {
    TensorRef r;
    r.type = b.type;
    r.data = b.space == MemorySpace::Arena
                 ? static_cast<void *>(dev.arena.get() + b.offset)
             : b.space == MemorySpace::State
                 ? static_cast<void *>(dev.state.get() + b.offset)
                 : const_cast<uint8_t *>(plan_.weightPtr(b));
    return r;
  };
  auto fail = [&](Status s) {
    std::lock_guard<std::mutex> lock(sync.mutex);
    if (!sync.aborted) {
      sync.aborted = true;
      sync.abortReason = "device " + std::to_string(d) + " failed";
    }
    sync.changed.notify_all();
    return s;
  };
  // Blocks until `flag[c]` is set, another device failed or the step
  // timed out.
  auto waitFor = [&](std::vector<bool> &flag, uint32_t c) -> Status {
    std::unique_lock<std::mutex> lock(sync.mutex);
    waitLocked(lock, [&] { return flag[c] || sync.aborted; });
    if (!flag[c])
      return Status::error("device " + std::to_string(d) +
                           " aborted: " + sync.abortReason);
    return Status();
  };
  auto signal = [&](std::vector<bool> &flag, uint32_t c) {
    std::lock_guard<std::mutex> lock(sync.mutex);
    flag[c] = true;
    sync.changed.notify_all();
  };

  std::vector<TensorRef> ins, outs;
  auto micros = [&] {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now() - runStart_)
        .count();
  };
  // However this device's part ends, it no longer holds up the others.
  struct Returned {
    Sync &sync;
    size_t d;
    ~Returned() {
      std::lock_guard<std::mutex> lock(sync.mutex);
      sync.returned[d] = true;
    }
  } returned{sync, d};
  for (size_t i = 0; i <= prog.instructions.size(); ++i) {
    if (Status s = injectFault(d, i); !s.ok())
      return fail(s);
    if (i == prog.instructions.size())
      break;
    const Instruction &in = prog.instructions[i];
    if (exchangesWithPeer(in.op))
      reach(d, i);
    double started = tracing_ ? micros() : 0;
    switch (in.op) {
    case OpCode::Kernel: {
      ins.clear();
      outs.clear();
      for (const BufferRef &b : in.inputs)
        ins.push_back(resolve(b));
      bool anyOutput = false;
      for (const BufferRef &b : in.outputs) {
        outs.push_back(resolve(b));
        anyOutput |= b.type.numElements() != 0;
      }
      // Nothing to write: a kernel over empty tensors could still loop
      // over the other dimensions (a softmax of [2^32, 4, 0]).
      if (!anyOutput)
        break;
      auto start = std::chrono::steady_clock::now();
      Status s = dev.kernels[i]->run(ins, outs);
      if (!s.ok())
        return fail(s.prepend(describeInstruction(d, i, in)));
      if (profiling_)
        kernelTimes_[d][i] += std::chrono::duration<double>(
                                  std::chrono::steady_clock::now() - start)
                                  .count();
      break;
    }
    case OpCode::LoadInput: {
      TensorRef dst = resolve(in.outputs[0]);
      copyBytes(dst.data,
                static_cast<const uint8_t *>(inputs[in.index].data) +
                    in.hostOffset,
                dst.type.byteSize());
      break;
    }
    case OpCode::StoreOutput: {
      TensorRef src = resolve(in.inputs[0]);
      copyBytes(static_cast<uint8_t *>(outputs[in.index].data) + in.hostOffset,
                src.data, src.type.byteSize());
      break;
    }
    case OpCode::Send:
      signal(sync.sent, in.index);
      break;
    case OpCode::Recv: {
      Status s = waitFor(sync.sent, in.index);
      if (!s.ok())
        return fail(s);
      auto [srcDev, srcBuf] = channelSources_[in.index];
      const CpuDeviceState &src = *devices_[srcDev];
      const uint8_t *from =
          srcBuf.space == MemorySpace::Arena   ? src.arena.get() + srcBuf.offset
          : srcBuf.space == MemorySpace::State ? src.state.get() + srcBuf.offset
                                               : plan_.weightPtr(srcBuf);
      TensorRef dst = resolve(in.outputs[0]);
      copyBytes(dst.data, from, dst.type.byteSize());
      signal(sync.consumed, in.index);
      break;
    }
    case OpCode::WaitConsumed: {
      Status s = waitFor(sync.consumed, in.index);
      if (!s.ok())
        return fail(s);
      break;
    }
    case OpCode::AllReduce: {
      std::vector<TensorRef> sources, targets;
      for (const BufferRef &b : in.inputs)
        sources.push_back(resolve(b));
      for (const BufferRef &b : in.outputs)
        targets.push_back(resolve(b));
      Status s = allReduce(d, in, sources, targets);
      if (!s.ok())
        return fail(s.prepend(describeInstruction(d, i, in)));
      break;
    }
    }
    if (tracing_)
      trace_[d].push_back(
          TraceEvent::ofInstruction(d, i, started, micros() - started));
  }
  return Status();
}

} // namespace partc::runtime
