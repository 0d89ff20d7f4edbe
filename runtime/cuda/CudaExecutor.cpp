//===- CudaExecutor.cpp - CUDA backend ------------------------------------===//
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/Kernel.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace partc::runtime {

using namespace cuda;

namespace {

std::string describe(size_t device, size_t index, const Instruction &in) {
  std::string s = "device " + std::to_string(device) + " instruction " +
                  std::to_string(index) + " (" + opCodeName(in.op);
  if (in.op == OpCode::Kernel)
    s += " " + in.kernel;
  if (!in.location.empty())
    s += ", ONNX node '" + in.location + "'";
  return s + ")";
}

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
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaMemcpyAsync(hin[i].data(), in[i].data, hin[i].size(),
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

private:
  std::unique_ptr<Kernel> cpu_;
};

} // namespace

struct CudaExecutor::Impl {
  const Plan *plan = nullptr;
  struct Device {
    DeviceContext ctx;
    uint8_t *arena = nullptr;
    uint8_t *weights = nullptr;
    std::vector<std::unique_ptr<GpuKernel>> kernels;
  };
  std::vector<Device> devices;
  /// Per channel: recorded on the source after its send, and on the
  /// destination after its copy.
  std::vector<cudaEvent_t> ready, consumed;
  std::vector<std::pair<size_t, BufferRef>> channelSources;
  std::map<std::string, size_t> fallbackKinds;
  std::vector<void *> registered;
  // Host-side record of which events have been recorded this run.
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<bool> sent, received;
  bool aborted = false;

  Status enqueueDevice(size_t d, const std::vector<TensorRef> &inputs,
                       const std::vector<TensorRef> &outputs,
                       bool skipInputLoads);

  ~Impl() {
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

std::string CudaExecutor::fallbackSummary() const {
  std::ostringstream os;
  for (auto &[name, count] : impl_->fallbackKinds)
    os << (os.tellp() ? ", " : "") << name << " x" << count;
  return os.str();
}

Status CudaExecutor::create(const Plan &plan, const CudaOptions &options,
                            std::unique_ptr<CudaExecutor> &result) {
  std::string why;
  int available = deviceCount(&why);
  size_t needed = plan.devices.size();
  if (available < options.firstGpu + static_cast<int>(needed))
    return Status::error("the plan needs " + std::to_string(needed) +
                         " GPU(s) but " + std::to_string(available) +
                         " are available" + (why.empty() ? "" : " (" + why + ")") +
                         "; recompile with --devices " +
                         std::to_string(std::max(1, available)) +
                         " or run with --backend cpu");
  std::unique_ptr<CudaExecutor> exec(new CudaExecutor());
  exec->impl_ = std::make_unique<Impl>();
  Impl &impl = *exec->impl_;
  impl.plan = &plan;
  impl.devices.resize(needed);
  impl.channelSources.resize(plan.channels.size());

  for (size_t d = 0; d < needed; ++d) {
    Impl::Device &dev = impl.devices[d];
    DeviceContext &ctx = dev.ctx;
    ctx.gpu = options.firstGpu + static_cast<int>(d);
    ctx.tf32 = options.tf32;
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
    // Peer access where the hardware allows; copies work without it too.
    for (size_t e = 0; e < needed; ++e) {
      int peer = options.firstGpu + static_cast<int>(e), can = 0;
      if (peer != ctx.gpu &&
          cudaDeviceCanAccessPeer(&can, ctx.gpu, peer) == cudaSuccess && can) {
        cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
        if (err == cudaErrorPeerAccessAlreadyEnabled)
          cudaGetLastError();
        else if (err != cudaSuccess)
          return cudaStatus(err, where.c_str());
      }
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
    PARTC_RETURN_IF_ERROR(allocate(dev.arena, plan.devices[d].arenaBytes, "arena"));
    PARTC_RETURN_IF_ERROR(allocate(dev.weights, plan.weightBytes, "weights"));
    if (plan.weightBytes) {
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaMemcpyAsync(dev.weights, plan.weightData, plan.weightBytes,
                          cudaMemcpyHostToDevice, ctx.stream),
          "uploading weights"));
      PARTC_RETURN_IF_ERROR(cudaStatus(cudaStreamSynchronize(ctx.stream),
                                       "uploading weights"));
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
      for (const BufferRef &b : in.inputs)
        ins.push_back(b.type);
      for (const BufferRef &b : in.outputs)
        outs.push_back(b.type);
      Status s = createGpuKernel(in.kernel, in.attrs, ins, outs, ctx,
                                 dev.kernels[i]);
      if (!s.ok())
        return s.prepend(where + " " + describe(d, i, in));
      if (!dev.kernels[i]) {
        std::unique_ptr<Kernel> cpu;
        s = createCpuKernel(in.kernel, in.attrs, ins, outs, cpu);
        if (!s.ok())
          return s.prepend(describe(d, i, in));
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
  }
  for (size_t c = 0; c < plan.channels.size(); ++c) {
    cudaEvent_t r, k;
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaSetDevice(impl.devices[plan.channels[c].srcDevice].ctx.gpu), "event"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaEventCreateWithFlags(&r, cudaEventDisableTiming), "event"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaSetDevice(impl.devices[plan.channels[c].dstDevice].ctx.gpu), "event"));
    PARTC_RETURN_IF_ERROR(cudaStatus(
        cudaEventCreateWithFlags(&k, cudaEventDisableTiming), "event"));
    impl.ready.push_back(r);
    impl.consumed.push_back(k);
  }
  result = std::move(exec);
  return Status();
}

Status CudaExecutor::registerHostMemory(void *ptr, size_t bytes) {
  if (!bytes)
    return Status();
  PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(impl_->devices[0].ctx.gpu),
                                   "register host memory"));
  PARTC_RETURN_IF_ERROR(cudaStatus(
      cudaHostRegister(ptr, bytes, cudaHostRegisterPortable),
      "register host memory"));
  impl_->registered.push_back(ptr);
  return Status();
}

Status CudaExecutor::run(const std::vector<TensorRef> &inputs,
                         const std::vector<TensorRef> &outputs,
                         bool skipInputLoads) {
  Impl &impl = *impl_;
  const Plan &plan = *impl.plan;
  size_t n = impl.devices.size();
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    impl.sent.assign(plan.channels.size(), false);
    impl.received.assign(plan.channels.size(), false);
    impl.aborted = false;
  }
  std::vector<Status> results(n);
  if (n == 1) {
    results[0] = impl.enqueueDevice(0, inputs, outputs, skipInputLoads);
  } else {
    // One host thread per GPU so that no device waits for another's
    // launches; host flags order cross-device event record and wait.
    std::vector<std::thread> threads;
    for (size_t d = 0; d < n; ++d)
      threads.emplace_back([&, d] {
        results[d] = impl.enqueueDevice(d, inputs, outputs, skipInputLoads);
      });
    for (auto &t : threads)
      t.join();
  }
  for (const Status &s : results)
    if (!s.ok() && s.message().find("aborted:") == std::string::npos)
      return s;
  for (const Status &s : results)
    if (!s.ok())
      return s;
  return Status();
}

Status CudaExecutor::Impl::enqueueDevice(size_t d,
                                         const std::vector<TensorRef> &inputs,
                                         const std::vector<TensorRef> &outputs,
                                         bool skipInputLoads) {
  Device &dev = devices[d];
  const auto &instrs = plan->devices[d].instructions;
  cudaStream_t stream = dev.ctx.stream;
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
  if (!s.ok())
    return fail(s);
  std::vector<TensorRef> ins, outs;
  for (size_t i = 0; i < instrs.size(); ++i) {
    const Instruction &in = instrs[i];
    switch (in.op) {
    case OpCode::Kernel:
      ins.clear();
      outs.clear();
      for (const BufferRef &b : in.inputs)
        ins.push_back({resolve(dev, b), b.type});
      for (const BufferRef &b : in.outputs)
        outs.push_back({resolve(dev, b), b.type});
      s = dev.kernels[i]->run(dev.ctx, ins, outs);
      break;
    case OpCode::LoadInput:
      if (skipInputLoads)
        break;
      s = cudaStatus(
          cudaMemcpyAsync(resolve(dev, in.outputs[0]),
                          static_cast<const uint8_t *>(inputs[in.index].data) +
                              in.hostOffset,
                          in.outputs[0].type.byteSize(),
                          cudaMemcpyHostToDevice, stream),
          "input copy");
      break;
    case OpCode::StoreOutput:
      s = cudaStatus(
          cudaMemcpyAsync(static_cast<uint8_t *>(outputs[in.index].data) +
                              in.hostOffset,
                          resolve(dev, in.inputs[0]),
                          in.inputs[0].type.byteSize(), cudaMemcpyDeviceToHost,
                          stream),
          "output copy");
      break;
    case OpCode::Send:
      s = cudaStatus(cudaEventRecord(ready[in.index], stream), "send");
      setFlag(sent, in.index);
      break;
    case OpCode::Recv: {
      s = waitFlag(sent, in.index);
      if (!s.ok())
        return fail(s);
      auto [srcDev, srcBuf] = channelSources[in.index];
      Device &src = devices[srcDev];
      s = cudaStatus(cudaStreamWaitEvent(stream, ready[in.index], 0),
                     "recv wait");
      if (s.ok())
        s = cudaStatus(cudaMemcpyPeerAsync(resolve(dev, in.outputs[0]),
                                           dev.ctx.gpu, resolve(src, srcBuf),
                                           src.ctx.gpu,
                                           in.outputs[0].type.byteSize(),
                                           stream),
                       "peer copy");
      if (s.ok())
        s = cudaStatus(cudaEventRecord(consumed[in.index], stream), "recv");
      setFlag(received, in.index);
      break;
    }
    case OpCode::WaitConsumed:
      s = waitFlag(received, in.index);
      if (s.ok())
        s = cudaStatus(cudaStreamWaitEvent(stream, consumed[in.index], 0),
                       "wait");
      break;
    }
    if (!s.ok())
      return fail(s.prepend("GPU " + std::to_string(dev.ctx.gpu) + " " +
                            describe(d, i, in)));
  }
  s = cudaStatus(cudaStreamSynchronize(stream), "synchronize");
  if (!s.ok())
    return fail(s.prepend("GPU " + std::to_string(dev.ctx.gpu)));
  return Status();
}

} // namespace partc::runtime
