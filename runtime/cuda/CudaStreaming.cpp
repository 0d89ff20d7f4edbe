//===- CudaStreaming.cpp - CUDA graphs and streamed batches
//-----------------===//
//
// The whole schedule captured as one CUDA graph, and batches streamed back
// to back as per-device graph segments with direct transfers.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/ExecutorImpl.h"

#include <algorithm>
#include <thread>

namespace partc::runtime {

namespace {

bool plainEdges(const std::vector<cudaGraphEdgeData> &edges) {
  return std::all_of(edges.begin(), edges.end(), [](const auto &e) {
    return e.from_port == 0 && e.to_port == 0 && e.type == 0;
  });
}

} // namespace

Status cuda::executor::fillWithKernels(cudaGraph_t graph) {
  // Larger fills keep their memset node, whose cost they amortize.
  constexpr size_t kMostBytes = size_t(1) << 20;
  size_t count = 0;
  PARTC_RETURN_IF_ERROR(
      cudaStatus(cudaGraphGetNodes(graph, nullptr, &count), "graph nodes"));
  std::vector<cudaGraphNode_t> nodes(count);
  PARTC_RETURN_IF_ERROR(cudaStatus(
      cudaGraphGetNodes(graph, nodes.data(), &count), "graph nodes"));
  int current = 0;
  PARTC_RETURN_IF_ERROR(cudaStatus(cudaGetDevice(&current), "graph nodes"));
  Status s;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    cudaMemsetParams fill{};
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess ||
        type != cudaGraphNodeTypeMemset ||
        cudaGraphMemsetNodeGetParams(node, &fill) != cudaSuccess ||
        fill.height != 1 || fill.width * fill.elementSize > kMostBytes)
      continue;
    size_t before = 0, after = 0;
    if (cudaGraphNodeGetDependencies(node, nullptr, nullptr, &before) !=
            cudaSuccess ||
        cudaGraphNodeGetDependentNodes(node, nullptr, nullptr, &after) !=
            cudaSuccess)
      continue;
    std::vector<cudaGraphNode_t> deps(before), dependents(after);
    std::vector<cudaGraphEdgeData> depEdges(before), dependentEdges(after);
    cudaPointerAttributes where{};
    if (cudaGraphNodeGetDependencies(node, deps.data(), depEdges.data(),
                                     &before) != cudaSuccess ||
        cudaGraphNodeGetDependentNodes(node, dependents.data(),
                                       dependentEdges.data(),
                                       &after) != cudaSuccess ||
        !plainEdges(depEdges) || !plainEdges(dependentEdges) ||
        cudaPointerGetAttributes(&where, fill.dst) != cudaSuccess ||
        where.type != cudaMemoryTypeDevice)
      continue;
    // A kernel node runs on the device current when it is added: the one
    // whose memory the memset fills.
    s = cudaStatus(cudaSetDevice(where.device), "fill node");
    cudaGraphNode_t kernel = nullptr;
    if (s.ok() && addFillKernelNode(graph, deps.data(), deps.size(), fill,
                                    &kernel) != cudaSuccess)
      continue;
    for (size_t i = 0; i < dependents.size() && s.ok(); ++i)
      s = cudaStatus(
          cudaGraphAddDependencies(graph, &kernel, &dependents[i], nullptr, 1),
          "fill node");
    if (s.ok())
      s = cudaStatus(cudaGraphDestroyNode(node), "fill node");
    if (!s.ok())
      break;
  }
  cudaGetLastError();
  Status restored = cudaStatus(cudaSetDevice(current), "graph nodes");
  return s.ok() ? restored : s;
}

Status CudaExecutor::Impl::capture(Graph &g,
                                   const std::vector<TensorRef> &inputs,
                                   const std::vector<TensorRef> &outputs,
                                   bool skipInputLoads) {
  destroyGraph(g);
  size_t n = devices.size();
  if (devicesMeetOnlyInNccl()) {
    // A thread per device captures its own stream.
    g.perDevice.assign(n, nullptr);
    std::vector<Status> results(n);
    std::vector<std::thread> threads;
    for (size_t d = 0; d < n; ++d)
      threads.emplace_back([&, d] {
        results[d] = captureDevice(d, g, inputs, outputs, skipInputLoads);
      });
    for (auto &t : threads)
      t.join();
    Status s = rootCause(results);
    if (!s.ok())
      destroyGraph(g);
    return s;
  }
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
  // A device that has reached an all_reduce waits there until the group's
  // last device enqueues it.
  std::vector<bool> arrived(n, false);
  arrivals.clear();
  collectiveIssued.assign(collectiveIssued.size(), false);
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
        if (in.op == OpCode::AllReduce) {
          if (!arrived[d]) {
            s = waitForCollectives(d, pc[d]);
            if (s.ok())
              s = markProgress(d, pc[d]);
            if (s.ok())
              s = enqueue(d, pc[d], inputs, outputs, skipInputLoads);
            arrived[d] = true;
            progress = true;
            if (s.ok() && !collectiveIssued[in.index])
              s = cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "capture");
          }
          if (!s.ok()) {
            s.prepend(describeInstruction(d, pc[d], in));
            break;
          }
          if (!collectiveIssued[in.index])
            break;
          arrived[d] = false;
          ++pc[d];
          progress = true;
          continue;
        }
        s = waitForCollectives(d, pc[d]);
        if (s.ok())
          s = markProgress(d, pc[d]);
        if (s.ok())
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
  // Branch streams, and collectives still running on communication
  // streams, join their devices.
  for (size_t d = 0; d < n && s.ok(); ++d) {
    s = cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "join");
    if (s.ok())
      s = joinBranches(d);
    if (s.ok())
      s = waitForCollectives(d, plan->devices[d].instructions.size());
    if (s.ok())
      s = joinCommStream(d);
    if (s.ok())
      s = markProgress(d, plan->devices[d].instructions.size());
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
  return endCapture(origin.ctx.stream, s, g.exec,
                    origin.ctx.options.fillKernels);
}

void CudaExecutor::Impl::destroyGraph(Graph &g) {
  if (g.exec)
    cudaGraphExecDestroy(g.exec);
  g.exec = nullptr;
  for (cudaGraphExec_t e : g.perDevice)
    if (e)
      cudaGraphExecDestroy(e);
  g.perDevice.clear();
}

bool CudaExecutor::Impl::devicesMeetOnlyInNccl() const {
  if (devices.size() < 2 || !plan->channels.empty() || collectives.empty())
    return false;
  return std::all_of(collectives.begin(), collectives.end(),
                     [](const auto &c) { return c.second.nccl; });
}

Status CudaExecutor::Impl::captureDevice(size_t d, Graph &g,
                                         const std::vector<TensorRef> &inputs,
                                         const std::vector<TensorRef> &outputs,
                                         bool skipInputLoads) {
  Device &dev = devices[d];
  const auto &instrs = plan->devices[d].instructions;
  PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(dev.ctx.gpu), "capture"));
  PARTC_RETURN_IF_ERROR(cudaStatus(
      cudaStreamBeginCapture(dev.ctx.stream, cudaStreamCaptureModeRelaxed),
      "begin capture"));
  Status s;
  for (size_t i = 0; i < instrs.size() && s.ok(); ++i) {
    s = waitForCollectives(d, i);
    if (s.ok())
      s = markProgress(d, i);
    if (s.ok())
      s = instrs[i].op == OpCode::AllReduce
              ? enqueueOwnAllReduce(d, instrs[i])
              : enqueue(d, i, inputs, outputs, skipInputLoads);
    if (!s.ok())
      s.prepend(describeInstruction(d, i, instrs[i]));
  }
  if (s.ok())
    s = joinBranches(d);
  if (s.ok())
    s = waitForCollectives(d, instrs.size());
  if (s.ok())
    s = joinCommStream(d);
  if (s.ok())
    s = markProgress(d, instrs.size());
  return endCapture(dev.ctx.stream, s, g.perDevice[d],
                    dev.ctx.options.fillKernels);
}

Status CudaExecutor::Impl::launchPerDevice(Graph &g) {
  std::vector<Status> results;
  bool returned = onDeviceThreads(
      [this, &g](size_t d) {
        Device &dev = devices[d];
        Status s = cudaStatus(cudaSetDevice(dev.ctx.gpu), "graph launch");
        if (s.ok())
          s = cudaStatus(cudaGraphLaunch(g.perDevice[d], dev.ctx.stream),
                         "graph launch");
        if (!s.ok())
          s.prepend("GPU " + std::to_string(dev.ctx.gpu));
        return s;
      },
      results);
  if (!returned)
    return giveUp(true, "a device's host thread was still launching its "
                        "graph, blocked behind a stalled GPU");
  PARTC_RETURN_IF_ERROR(awaitDevices(true));
  return rootCause(results);
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
        if (s.ok())
          s = joinBranches(d);
        streamParity = -1;
        PARTC_RETURN_IF_ERROR(endCapture(dev.ctx.stream, s, seg.exec[parity],
                                         dev.ctx.options.fillKernels));
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
                               size_t iterations, bool skipInputLoads,
                               bool keepOutputs) {
  Impl &impl = *impl_;
  if (impl.profiling)
    return Status::error("streaming runs cannot be profiled or traced; "
                         "profile without --stream");
  if (!impl.collectives.empty())
    return Status::error("a plan whose devices average with all_reduce (data-"
                         "parallel training) runs one step at a time; run it "
                         "without --stream");
  if (impl.runs == 0) {
    // A first, direct run finds cuDNN's lazily loaded kernels before any
    // capture and leaves the inputs in place for skipInputLoads.
    PARTC_RETURN_IF_ERROR(run(inputs, outputs));
  }
  PARTC_RETURN_IF_ERROR(impl.prepareLandings());
  Impl::StreamGraphs &sg =
      impl.streamGraphs[(skipInputLoads ? 1 : 0) + (keepOutputs ? 2 : 0)];
  // Capture and enqueueing below read the flag; every return resets it.
  struct OutputStores {
    bool &skip;
    ~OutputStores() { skip = false; }
  } outputStores{impl.skipOutputStores};
  impl.skipOutputStores = keepOutputs;
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
                if (r.ok())
                  r = impl.joinBranches(d);
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
  // The deadline covers draining what is queued: enqueueing kept pace
  // with the GPUs until here, however many batches there were.
  impl.watchStart = std::chrono::steady_clock::now();
  Status drained = impl.awaitDevices(false);
  if (s.ok())
    s = drained;
  if (!s.ok())
    return s;
  if (impl.streamTracing)
    impl.collectSpans();
  impl.runs += iterations;
  return impl.checkKernels();
}

} // namespace partc::runtime
