//===- CudaTransfers.cpp - Transfers through NCCL and host memory
//-----------===//
//
// The routes other than a device-to-device copy: NCCL send/receive pairs
// and staging through page-locked host memory (GPUs without peer access).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/ExecutorImpl.h"

namespace partc::runtime {

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

} // namespace partc::runtime
