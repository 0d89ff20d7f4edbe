//===- CudaBranches.cpp - Independent branches on side streams -----------===//
//
// Kernels whose plan instruction names a stream s > 0 run on side stream
// s - 1 of their device, so that independent branches (an Inception
// block's convolutions) share the GPU. Which instruction waits for which is
// found once, at load, from the bytes each reads and writes: an
// instruction waits for the latest earlier instruction of every other
// stream that writes what it touches or touches what it writes. That keeps
// every plan correct, whatever the memory plan reused, and the plan's order
// stays a valid schedule on one stream. The main stream waits for every
// side stream before any instruction that is not a capturable kernel and
// at the end of the program (a graph capture ends joined).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/ExecutorImpl.h"

namespace partc::runtime {

Status CudaExecutor::Impl::prepareBranches(size_t d, size_t workspaceBytes) {
  Device &dev = devices[d];
  const auto &instrs = plan->devices[d].instructions;
  size_t n = instrs.size();
  // Host kernels and every other instruction run on the main stream after
  // a join (the same rule as runOnBranch and enqueue).
  auto joinsAll = [&](size_t i) {
    return instrs[i].op != OpCode::Kernel || !dev.kernels[i]->capturable();
  };
  auto streamOf = [&](size_t i) -> uint8_t {
    return joinsAll(i) ? 0 : instrs[i].stream;
  };
  uint8_t streams = 1;
  for (size_t i = 0; i < n; ++i)
    streams = std::max<uint8_t>(streams, streamOf(i) + 1);
  if (!dev.ctx.options.branchStreams || streams == 1)
    return Status();

  std::string where = "GPU " + std::to_string(dev.ctx.gpu) + " (plan device " +
                      std::to_string(d) + ") branch streams";
  dev.sides.resize(streams - 1);
  for (Device::Side &side : dev.sides) {
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaStreamCreateWithFlags(&side.stream, cudaStreamNonBlocking),
        where.c_str()));
    if (cublasCreate(&side.cublas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(side.cublas, side.stream) != CUBLAS_STATUS_SUCCESS)
      return Status::error(where + ": cannot create a cuBLAS handle");
    if (workspaceBytes)
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaMalloc(&side.workspace, workspaceBytes), where.c_str()));
    for (cudaEvent_t *e : {&side.fork, &side.join})
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaEventCreateWithFlags(e, cudaEventDisableTiming), where.c_str()));
  }

  // The same rules as runOnBranch and joinBranches.
  std::vector<bool> awaited(n, false);
  dev.branchWaits = streamWaits(plan->devices[d], joinsAll, streamOf);
  for (const auto &waits : dev.branchWaits)
    for (const StreamWait &w : waits)
      awaited[w.instruction] = true;
  dev.branchDone.assign(n, nullptr);
  for (size_t i = 0; i < n; ++i)
    if (awaited[i])
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaEventCreateWithFlags(&dev.branchDone[i], cudaEventDisableTiming),
          where.c_str()));
  return Status();
}

Status CudaExecutor::Impl::runOnBranch(size_t d, size_t i,
                                       const std::vector<TensorRef> &ins,
                                       const std::vector<TensorRef> &outs) {
  Device &dev = devices[d];
  GpuKernel &kernel = *dev.kernels[i];
  uint8_t s = kernel.capturable() ? plan->devices[d].instructions[i].stream : 0;
  if (!kernel.capturable())
    PARTC_RETURN_IF_ERROR(joinBranches(d));
  Device::Side *side = s ? &dev.sides[s - 1] : nullptr;
  cudaStream_t stream = side ? side->stream : dev.ctx.stream;
  if (side && !side->forked) {
    // Also how a side stream joins a graph capture of the main stream.
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaEventRecord(side->fork, dev.ctx.stream), "branch fork"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaStreamWaitEvent(side->stream, side->fork, 0), "branch fork"));
    side->forked = true;
  }
  for (const StreamWait &w : dev.branchWaits[i])
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaStreamWaitEvent(stream, dev.branchDone[w.instruction], 0),
        "branch wait"));
  Status status;
  if (side) {
    DeviceContext ctx = dev.ctx;
    ctx.stream = side->stream;
    ctx.cublas = side->cublas;
    ctx.workspace = side->workspace;
    if (cudnnSetStream(ctx.cudnn, side->stream) != CUDNN_STATUS_SUCCESS)
      return Status::error("cannot lend the cuDNN handle to a branch stream");
    status = kernel.run(ctx, ins, outs);
    cudnnSetStream(ctx.cudnn, dev.ctx.stream);
    side->pending = true;
  } else {
    status = kernel.run(dev.ctx, ins, outs);
  }
  PARTC_RETURN_IF_ERROR(status);
  if (cudaEvent_t done = dev.branchDone[i])
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaEventRecord(done, stream), "branch done"));
  return Status();
}

Status CudaExecutor::Impl::joinBranches(size_t d) {
  Device &dev = devices[d];
  for (Device::Side &side : dev.sides) {
    if (side.pending) {
      PARTC_RETURN_IF_ERROR(
          cudaStatus(cudaEventRecord(side.join, side.stream), "branch join"));
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaStreamWaitEvent(dev.ctx.stream, side.join, 0), "branch join"));
    }
    side.pending = false;
    side.forked = false;
  }
  return Status();
}

void CudaExecutor::Impl::destroyBranches() {
  for (Device &dev : devices) {
    if (dev.sides.empty())
      continue;
    cudaSetDevice(dev.ctx.gpu);
    for (Device::Side &side : dev.sides) {
      if (side.stream)
        cudaStreamSynchronize(side.stream);
      if (side.cublas)
        cublasDestroy(side.cublas);
      cudaFree(side.workspace);
      for (cudaEvent_t e : {side.fork, side.join})
        if (e)
          cudaEventDestroy(e);
      if (side.stream)
        cudaStreamDestroy(side.stream);
    }
    for (cudaEvent_t e : dev.branchDone)
      if (e)
        cudaEventDestroy(e);
  }
}

} // namespace partc::runtime
