//===- CudaExecutor.cpp - CUDA backend: setup and launches
//------------------===//
//
// Loading a plan (devices, weights, kernels chosen and tuned), the host
// threads that enqueue each device's instructions, and single runs.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/ExecutorImpl.h"
#include "runtime/cuda/TunedTwins.h"

#include <cmath>
#include <cstdio>

namespace partc::runtime {

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

CudaExecutor::~CudaExecutor() {
  // After a run was given up, host threads may still be blocked inside it
  // (in NCCL, behind a stalled GPU) and wake later: they must find the
  // executor's state where it was, so it is left to the process's end.
  if (impl_ && impl_->lost) {
    if (impl_->faultWords)
      impl_->faultWords[1] = 1; // an injected hang may stop now
    (void)impl_.release();
  }
}

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
  // What each device allocated at load, library workspaces included (the
  // one part of a step's memory partc compile cannot know: cuDNN and
  // cuBLASLt choose their algorithms here).
  auto mib = [](double bytes) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.2f MiB", bytes / (1 << 20));
    return std::string(text);
  };
  for (size_t d = 0; d < impl_->devices.size(); ++d) {
    const auto &dev = impl_->devices[d];
    const DeviceProgram &prog = impl_->plan->devices[d];
    r.details.push_back(
        "device " + std::to_string(d) + " (GPU " + std::to_string(dev.ctx.gpu) +
        ") memory: weights " +
        mib(dev.ownsWeights ? double(impl_->plan->weightBytes) : 0.0) +
        ", state " + mib(double(prog.stateBytes)) + ", arena " +
        mib(double(prog.arenaBytes)) + ", library workspace " +
        mib(double(dev.ctx.workspaceBytes)));
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
                            std::unique_ptr<CudaExecutor> &result,
                            const FailureOptions &failure) {
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
  impl.failure = failure;
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
    PARTC_RETURN_IF_ERROR(
        allocate(dev.state, plan.devices[d].stateBytes, "state"));
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
    std::vector<uint8_t> initial;
    for (size_t s = 0; s < plan.states.size(); ++s) {
      const StateDecl &decl = plan.states[s];
      if (decl.device != d || !decl.type.byteSize())
        continue;
      initial.resize(decl.type.byteSize());
      initialStateBytes(plan, s, initial.data());
      PARTC_RETURN_IF_ERROR(
          cudaStatus(cudaMemcpy(dev.state + decl.offset, initial.data(),
                                initial.size(), cudaMemcpyHostToDevice),
                     "initializing the state"));
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
    std::vector<TunedTwins> twins;
    for (size_t i = 0; i < prog.instructions.size(); ++i) {
      if (!dev.kernels[i])
        continue;
      const Instruction &in = prog.instructions[i];
      std::vector<TensorRef> ins, outs;
      impl.operands(d, i, ins, outs);
      scratch.candidateTimes().clear();
      Status s = dev.kernels[i]->tune(ctx, ins, outs, scratch);
      if (!s.ok())
        return s.prepend(where + " tuning " + describeInstruction(d, i, in));
      if (scratch.candidateTimes().size() > 1)
        addTunedTwin(twins, prog, i, scratch.candidateTimes());
      if (options.logTuning && scratch.candidateTimes().size() > 1) {
        // Candidates that failed or disagreed with the first show as -1.
        std::string line = where + " tuned " + describeInstruction(d, i, in) +
                           ": candidates (ms)";
        for (float t : scratch.candidateTimes())
          line += std::isfinite(t) ? " " + std::to_string(t) : " -1";
        const char *v = dev.kernels[i]->variant();
        std::fprintf(stderr, "%s; chose %s\n", line.c_str(), v ? v : "?");
      }
    }
    if (options.poolTwins)
      chooseForTwins(twins, dev.kernels);
    for (size_t i = 0; i < prog.instructions.size(); ++i)
      // Counted by kind: the details after the name vary by shape.
      if (const char *v = dev.kernels[i] ? dev.kernels[i]->variant() : nullptr)
        impl.variants[prog.instructions[i].kernel + " " +
                      std::string(v).substr(0, std::strcspn(v, " "))]++;
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaStreamSynchronize(ctx.stream), where.c_str()));
    PARTC_RETURN_IF_ERROR(impl.prepareBranches(d, workspace));
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
  PARTC_RETURN_IF_ERROR(impl.createCollectives(reach, perGpu == 1));
  if (impl.usesNccl)
    PARTC_RETURN_IF_ERROR(impl.initNccl());
  PARTC_RETURN_IF_ERROR(impl.createSendStreams());
  PARTC_RETURN_IF_ERROR(impl.prepareWatchdog());
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

Status CudaExecutor::readState(size_t index, void *data) const {
  if (index >= impl_->plan->states.size())
    return Status::error("no state " + std::to_string(index));
  const StateDecl &decl = impl_->plan->states[index];
  const Impl::Device &dev = impl_->devices[decl.device];
  PARTC_RETURN_IF_ERROR(
      cudaStatus(cudaSetDevice(dev.ctx.gpu), "reading state"));
  PARTC_RETURN_IF_ERROR(
      cudaStatus(cudaStreamSynchronize(dev.ctx.stream), "reading state"));
  return cudaStatus(cudaMemcpy(data, dev.state + decl.offset,
                               decl.type.byteSize(), cudaMemcpyDeviceToHost),
                    "reading state");
}

Status CudaExecutor::writeState(size_t index, const void *data) {
  if (index >= impl_->plan->states.size())
    return Status::error("no state " + std::to_string(index));
  const StateDecl &decl = impl_->plan->states[index];
  Impl::Device &dev = impl_->devices[decl.device];
  PARTC_RETURN_IF_ERROR(
      cudaStatus(cudaSetDevice(dev.ctx.gpu), "writing state"));
  PARTC_RETURN_IF_ERROR(
      cudaStatus(cudaStreamSynchronize(dev.ctx.stream), "writing state"));
  return cudaStatus(cudaMemcpy(dev.state + decl.offset, data,
                               decl.type.byteSize(), cudaMemcpyHostToDevice),
                    "writing state");
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
  if (impl.lost)
    return Status::error("an earlier run failed and left GPU work "
                         "unfinished; start a new process");
  impl.startWatchedRun();
  Status s;
  bool graphs = impl.useGraphs && impl.runs > 0;
  if (graphs) {
    Impl::Graph &g = impl.graphs[skipInputLoads ? 1 : 0];
    std::vector<void *> pointers = hostPointers(inputs, outputs);
    // A graph bakes in the host buffers it copies from and to.
    if ((!g.exec && g.perDevice.empty()) || g.pointers != pointers) {
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
    if (!g.perDevice.empty()) {
      s = impl.launchPerDevice(g);
    } else {
      s = cudaStatus(cudaSetDevice(origin.ctx.gpu), "graph launch");
      if (s.ok())
        s = cudaStatus(cudaGraphLaunch(g.exec, origin.ctx.stream),
                       "graph launch");
      if (s.ok())
        s = impl.awaitDevices(true);
    }
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
  bool branches = !dev.sides.empty() && branchesActive();
  if (branches && in.op != OpCode::Kernel)
    PARTC_RETURN_IF_ERROR(joinBranches(d));
  switch (in.op) {
  case OpCode::Kernel: {
    std::vector<TensorRef> ins, outs;
    operands(d, i, ins, outs);
    if (branches)
      return runOnBranch(d, i, ins, outs);
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
    if (skipOutputStores)
      return Status();
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
  case OpCode::AllReduce: {
    std::lock_guard<std::mutex> lock(mutex);
    return arriveAtAllReduce(d, in);
  }
  }
  return Status();
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
    arrivals.clear();
    collectiveIssued.assign(collectiveIssued.size(), false);
    aborted = false;
  }
  std::vector<Status> results(n);
  if (n == 1) {
    results[0] = enqueueDevice(0, inputs, outputs, skipInputLoads);
  } else {
    // One host thread per GPU so that no device waits for another's
    // launches; host flags order cross-device event record and wait.
    bool returned = onDeviceThreads(
        [this, &inputs, &outputs, skipInputLoads](size_t d) {
          return enqueueDevice(d, inputs, outputs, skipInputLoads);
        },
        results);
    if (!returned)
      return giveUp(true, "a device's host thread was still enqueueing, "
                          "blocked in a library call behind a stalled GPU");
  }
  // Whatever was enqueued runs to its end (or is given up) before the
  // buffers are touched again, even after an enqueueing error; a GPU's
  // error said by the wait is the cause of what enqueueing then saw.
  PARTC_RETURN_IF_ERROR(awaitDevices(true));
  PARTC_RETURN_IF_ERROR(rootCause(results));
  for (size_t d = 0; d < n; ++d)
    collectTimes(d);
  return Status();
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
    bool hostWaits = in.op == OpCode::Recv || in.op == OpCode::WaitConsumed ||
                     in.op == OpCode::AllReduce;
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
    if (s.ok())
      s = waitForCollectives(d, i);
    if (s.ok())
      s = markProgress(d, i);
    if (s.ok() && timed)
      s = cudaStatus(cudaEventRecord(events[d][i].first, dev.ctx.stream),
                     "profile");
    if (s.ok())
      s = enqueue(d, i, inputs, outputs, skipInputLoads);
    // The group's last device enqueues it for all; this stream's next work
    // goes after that.
    if (s.ok() && in.op == OpCode::AllReduce)
      s = waitFlag(collectiveIssued, in.index);
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
  s = joinBranches(d);
  if (s.ok())
    s = waitForCollectives(d, instrs.size());
  if (s.ok())
    s = joinCommStream(d);
  if (s.ok())
    s = markProgress(d, instrs.size());
  if (!s.ok())
    return fail(s.prepend("GPU " + std::to_string(dev.ctx.gpu)));
  return Status();
}

void CudaExecutor::Impl::collectTimes(size_t d) {
  const auto &instrs = plan->devices[d].instructions;
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
    trace.insert(trace.end(), local.begin(), local.end());
  }
}

} // namespace partc::runtime
