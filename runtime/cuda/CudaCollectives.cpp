//===- CudaCollectives.cpp - all_reduce across plan devices ---------------===//
//
// A collective is enqueued whole by the last of its devices to reach it,
// so that a thread per device (direct runs) and one thread for all (graph
// capture) enqueue it the same way, and NCCL's calls for several GPUs from
// one thread go in one group.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/ExecutorImpl.h"
#include "runtime/cuda/TrainingKernels.h"

namespace partc::runtime {

Status CudaExecutor::Impl::createCollectives(
    const std::vector<std::vector<bool>> &reach, bool onePerGpu) {
  for (size_t d = 0; d < plan->devices.size(); ++d) {
    const auto &instrs = plan->devices[d].instructions;
    for (const Instruction &in : instrs) {
      if (in.op != OpCode::AllReduce)
        continue;
      Collective &c = collectives[in.index];
      if (c.devices.empty()) {
        for (int64_t e : in.attrs.getInts("devices"))
          c.devices.push_back(static_cast<size_t>(e));
        size_t count = c.devices.size();
        c.sources.resize(count);
        c.targets.resize(count);
        c.ready.assign(count, nullptr);
        c.done.assign(count, nullptr);
        // NCCL's communicator spans every plan device.
        c.nccl = onePerGpu && count == plan->devices.size();
#ifndef PARTC_HAVE_NCCL
        c.nccl = false;
#endif
        usesNccl |= c.nccl;
        if (!c.nccl && count > cuda::kMaxMeanSources)
          return Status::error("all_reduce group " + std::to_string(in.index) +
                               " spans " + std::to_string(count) +
                               " devices; without NCCL partc averages "
                               "over at most " +
                               std::to_string(cuda::kMaxMeanSources));
        for (size_t a : c.devices)
          for (size_t b : c.devices)
            if (!c.nccl && !reach[a][b])
              return Status::error(
                  "GPUs " + std::to_string(devices[a].ctx.gpu) + " and " +
                  std::to_string(devices[b].ctx.gpu) +
                  " cannot reach each other's memory, which the gradient "
                  "average needs without NCCL; give each plan device a GPU of "
                  "its own (no --devices-per-gpu) so NCCL can average");
      }
      size_t pos =
          std::find(c.devices.begin(), c.devices.end(), d) - c.devices.begin();
      c.sources[pos] = in.inputs;
      c.targets[pos] = in.outputs;
      PARTC_RETURN_IF_ERROR(
          cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "all_reduce events"));
      for (cudaEvent_t *e : {&c.ready[pos], &c.done[pos]})
        PARTC_RETURN_IF_ERROR(cudaStatus(
            cudaEventCreateWithFlags(e, cudaEventDisableTiming), "event"));
    }
  }
  collectiveIssued.assign(
      collectives.empty() ? 0 : collectives.rbegin()->first + 1, false);
  if (collectives.empty())
    return Status();
  commStreams.assign(devices.size(), nullptr);
  commJoins.assign(devices.size(), nullptr);
  for (size_t d = 0; d < devices.size(); ++d) {
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "communication stream"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaStreamCreateWithFlags(&commStreams[d], cudaStreamNonBlocking),
        "communication stream"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaEventCreateWithFlags(&commJoins[d], cudaEventDisableTiming),
        "communication stream"));
  }
  planCollectiveWaits();
  return Status();
}

#ifdef PARTC_HAVE_NCCL
namespace {
Status ncclStatus(ncclResult_t r, const char *what) {
  return r == ncclSuccess
             ? Status()
             : Status::error(std::string(what) + ": " + ncclGetErrorString(r));
}
} // namespace

Status CudaExecutor::Impl::ncclBucket(Device &dev,
                                      const std::vector<BufferRef> &sources,
                                      const std::vector<BufferRef> &targets,
                                      ncclComm_t comm, cudaStream_t stream) {
  // One NCCL group: NCCL launches the bucket's reductions together, paying
  // one collective's latency instead of one per tensor.
  Status s = ncclStatus(ncclGroupStart(), "ncclGroupStart");
  for (size_t pair = 0; pair < sources.size() && s.ok(); ++pair)
    s = ncclStatus(ncclAllReduce(resolve(dev, sources[pair]),
                                 resolve(dev, targets[pair]),
                                 size_t(sources[pair].type.numElements()),
                                 ncclFloat, ncclAvg, comm, stream),
                   "ncclAllReduce");
  Status end = ncclStatus(ncclGroupEnd(), "ncclGroupEnd");
  return s.ok() ? end : s;
}
#endif

namespace {
bool overlaps(const BufferRef &a, const BufferRef &b) {
  return a.space == b.space && a.offset < b.offset + b.type.byteSize() &&
         b.offset < a.offset + a.type.byteSize();
}
} // namespace

void CudaExecutor::Impl::planCollectiveWaits() {
  waitBefore.assign(devices.size(), {});
  for (size_t d = 0; d < devices.size(); ++d) {
    const auto &instrs = plan->devices[d].instructions;
    waitBefore[d].assign(instrs.size() + 1, {});
    for (size_t i = 0; i < instrs.size(); ++i) {
      if (instrs[i].op != OpCode::AllReduce)
        continue;
      const auto &sources = instrs[i].inputs, &targets = instrs[i].outputs;
      auto touches = [](const std::vector<BufferRef> &these,
                        const std::vector<BufferRef> &bucket) {
        return std::any_of(these.begin(), these.end(), [&](const BufferRef &b) {
          return std::any_of(
              bucket.begin(), bucket.end(),
              [&](const BufferRef &c) { return overlaps(b, c); });
        });
      };
      // The first reader of an average, or writer over any of the bucket's
      // buffers (the arena plan reuses an input's bytes right after it).
      size_t j = i + 1;
      for (; j < instrs.size(); ++j) {
        const Instruction &later = instrs[j];
        if (touches(later.inputs, targets) || touches(later.outputs, targets) ||
            touches(later.outputs, sources))
          break;
      }
      waitBefore[d][j].push_back(instrs[i].index);
    }
  }
}

Status CudaExecutor::Impl::waitForCollectives(size_t d, size_t i) {
  if (waitBefore.empty())
    return Status();
  cudaStream_t stream = devices[d].ctx.stream;
  for (uint32_t g : waitBefore[d][i]) {
    const Collective &c = collectives.at(g);
    for (size_t k = 0; k < c.devices.size(); ++k)
      // NCCL is done with this device's buffers when its own part ends;
      // the peer average reads every device's source.
      if (!c.nccl || c.devices[k] == d)
        PARTC_RETURN_IF_ERROR(cudaStatus(
            cudaStreamWaitEvent(stream, c.done[k], 0), "all_reduce wait"));
  }
  return Status();
}

Status CudaExecutor::Impl::joinCommStream(size_t d) {
  // A stream that never joined a capture cannot be waited on in one.
  if (commStreams.empty() ||
      std::all_of(waitBefore[d].begin(), waitBefore[d].end(),
                  [](const std::vector<uint32_t> &g) { return g.empty(); }))
    return Status();
  PARTC_RETURN_IF_ERROR(cudaStatus(
      cudaEventRecord(commJoins[d], commStreams[d]), "communication join"));
  return cudaStatus(cudaStreamWaitEvent(devices[d].ctx.stream, commJoins[d], 0),
                    "communication join");
}

Status CudaExecutor::Impl::arriveAtAllReduce(size_t d, const Instruction &in) {
  Collective &c = collectives.at(in.index);
  size_t pos =
      std::find(c.devices.begin(), c.devices.end(), d) - c.devices.begin();
  PARTC_RETURN_IF_ERROR(cudaStatus(
      cudaEventRecord(c.ready[pos], devices[d].ctx.stream), "all_reduce"));
  if (++arrivals[in.index] < c.devices.size())
    return Status();
  Status s = enqueueAllReduce(in.index);
  collectiveIssued[in.index] = true;
  changed.notify_all();
  Status back = cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "all_reduce");
  return s.ok() ? back : s;
}

Status CudaExecutor::Impl::enqueueOwnAllReduce(size_t d,
                                               const Instruction &in) {
#ifdef PARTC_HAVE_NCCL
  Collective &c = collectives.at(in.index);
  size_t k =
      std::find(c.devices.begin(), c.devices.end(), d) - c.devices.begin();
  Device &dev = devices[d];
  PARTC_RETURN_IF_ERROR(
      cudaStatus(cudaEventRecord(c.ready[k], dev.ctx.stream), "all_reduce"));
  PARTC_RETURN_IF_ERROR(cudaStatus(
      cudaStreamWaitEvent(commStreams[d], c.ready[k], 0), "all_reduce"));
  PARTC_RETURN_IF_ERROR(
      ncclBucket(dev, c.sources[k], c.targets[k], comms[d], commStreams[d]));
  return cudaStatus(cudaEventRecord(c.done[k], commStreams[d]), "all_reduce");
#else
  return Status::error("built without NCCL");
#endif
}

Status CudaExecutor::Impl::enqueueAllReduce(uint32_t group) {
  Collective &c = collectives.at(group);
  size_t count = c.devices.size();
  if (c.nccl) {
#ifdef PARTC_HAVE_NCCL
    for (size_t k = 0; k < count; ++k) {
      size_t d = c.devices[k];
      PARTC_RETURN_IF_ERROR(
          cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "all_reduce"));
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaStreamWaitEvent(commStreams[d], c.ready[k], 0), "all_reduce"));
    }
    Status s = ncclStatus(ncclGroupStart(), "ncclGroupStart");
    for (size_t k = 0; k < count && s.ok(); ++k) {
      size_t d = c.devices[k];
      s = ncclBucket(devices[d], c.sources[k], c.targets[k], comms[d],
                     commStreams[d]);
    }
    Status end = ncclStatus(ncclGroupEnd(), "ncclGroupEnd");
    if (!s.ok() || !end.ok())
      return s.ok() ? end : s;
    for (size_t k = 0; k < count; ++k) {
      size_t d = c.devices[k];
      PARTC_RETURN_IF_ERROR(
          cudaStatus(cudaSetDevice(devices[d].ctx.gpu), "all_reduce"));
      PARTC_RETURN_IF_ERROR(
          cudaStatus(cudaEventRecord(c.done[k], commStreams[d]), "all_reduce"));
    }
    return Status();
#else
    return Status::error("built without NCCL");
#endif
  }
  for (size_t k = 0; k < count; ++k) {
    size_t d = c.devices[k];
    Device &dev = devices[d];
    cudaStream_t comm = commStreams[d];
    PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(dev.ctx.gpu), "all_reduce"));
    for (size_t j = 0; j < count; ++j)
      PARTC_RETURN_IF_ERROR(
          cudaStatus(cudaStreamWaitEvent(comm, c.ready[j], 0), "all_reduce"));
    for (size_t pair = 0; pair < c.targets[k].size(); ++pair) {
      std::vector<const float *> sources;
      for (size_t j = 0; j < count; ++j)
        sources.push_back(static_cast<const float *>(
            resolve(devices[c.devices[j]], c.sources[j][pair])));
      const BufferRef &target = c.targets[k][pair];
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cuda::launchMeanOf(sources.data(), static_cast<int>(count),
                             static_cast<float *>(resolve(dev, target)),
                             target.type.numElements(), comm),
          "all_reduce"));
    }
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaEventRecord(c.done[k], comm), "all_reduce"));
  }
  return Status();
}

} // namespace partc::runtime
