//===- CudaExecutor.cpp - CUDA backend ------------------------------------===//
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/Kernel.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <map>
#include <sstream>

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
    PARTC_RETURN_IF_ERROR(
        cudaStatus(cudaStreamSynchronize(ctx.stream), "host fallback"));
    std::vector<std::vector<uint8_t>> hin(in.size()), hout(out.size());
    std::vector<TensorRef> rin, rout;
    for (size_t i = 0; i < in.size(); ++i) {
      hin[i].resize(in[i].type.byteSize());
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaMemcpy(hin[i].data(), in[i].data, hin[i].size(),
                     cudaMemcpyDeviceToHost),
          "host fallback"));
      rin.push_back({hin[i].data(), in[i].type});
    }
    for (size_t i = 0; i < out.size(); ++i) {
      hout[i].resize(out[i].type.byteSize());
      rout.push_back({hout[i].data(), out[i].type});
    }
    PARTC_RETURN_IF_ERROR(cpu_->run(rin, rout));
    for (size_t i = 0; i < out.size(); ++i)
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaMemcpy(out[i].data, hout[i].data(), hout[i].size(),
                     cudaMemcpyHostToDevice),
          "host fallback"));
    return Status();
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

  ~Impl() {
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
    if (plan.weightBytes)
      PARTC_RETURN_IF_ERROR(cudaStatus(
          cudaMemcpy(dev.weights, plan.weightData, plan.weightBytes,
                     cudaMemcpyHostToDevice),
          "uploading weights"));

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

Status CudaExecutor::run(const std::vector<TensorRef> &inputs,
                         const std::vector<TensorRef> &outputs) {
  Impl &impl = *impl_;
  const Plan &plan = *impl.plan;
  size_t n = impl.devices.size();
  std::vector<size_t> pc(n, 0);
  std::vector<bool> sent(plan.channels.size()), received(plan.channels.size());
  std::vector<TensorRef> ins, outs;
  // Enqueue in a channel-respecting order (the plan verifier proved one
  // exists): a device stops at a receive whose send is not enqueued yet.
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t d = 0; d < n; ++d) {
      Impl::Device &dev = impl.devices[d];
      const auto &instrs = plan.devices[d].instructions;
      if (pc[d] < instrs.size())
        PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(dev.ctx.gpu), "device"));
      while (pc[d] < instrs.size()) {
        const Instruction &in = instrs[pc[d]];
        if ((in.op == OpCode::Recv && !sent[in.index]) ||
            (in.op == OpCode::WaitConsumed && !received[in.index]))
          break;
        Status s;
        cudaStream_t stream = dev.ctx.stream;
        switch (in.op) {
        case OpCode::Kernel: {
          ins.clear();
          outs.clear();
          for (const BufferRef &b : in.inputs)
            ins.push_back({impl.resolve(dev, b), b.type});
          for (const BufferRef &b : in.outputs)
            outs.push_back({impl.resolve(dev, b), b.type});
          s = dev.kernels[pc[d]]->run(dev.ctx, ins, outs);
          break;
        }
        case OpCode::LoadInput:
          s = cudaStatus(
              cudaMemcpyAsync(impl.resolve(dev, in.outputs[0]),
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
                              impl.resolve(dev, in.inputs[0]),
                              in.inputs[0].type.byteSize(),
                              cudaMemcpyDeviceToHost, stream),
              "output copy");
          break;
        case OpCode::Send:
          s = cudaStatus(cudaEventRecord(impl.ready[in.index], stream), "send");
          sent[in.index] = true;
          break;
        case OpCode::Recv: {
          auto [srcDev, srcBuf] = impl.channelSources[in.index];
          Impl::Device &src = impl.devices[srcDev];
          s = cudaStatus(cudaStreamWaitEvent(stream, impl.ready[in.index], 0),
                         "recv wait");
          if (s.ok())
            s = cudaStatus(
                cudaMemcpyPeerAsync(impl.resolve(dev, in.outputs[0]),
                                    dev.ctx.gpu, impl.resolve(src, srcBuf),
                                    src.ctx.gpu, in.outputs[0].type.byteSize(),
                                    stream),
                "peer copy");
          if (s.ok())
            s = cudaStatus(cudaEventRecord(impl.consumed[in.index], stream),
                           "recv");
          received[in.index] = true;
          break;
        }
        case OpCode::WaitConsumed:
          s = cudaStatus(
              cudaStreamWaitEvent(stream, impl.consumed[in.index], 0), "wait");
          break;
        }
        if (!s.ok())
          return s.prepend("GPU " + std::to_string(dev.ctx.gpu) + " " +
                           describe(d, pc[d], in));
        ++pc[d];
        progress = true;
      }
    }
  }
  for (size_t d = 0; d < n; ++d) {
    Impl::Device &dev = impl.devices[d];
    PARTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(dev.ctx.gpu), "device"));
    Status s = cudaStatus(cudaStreamSynchronize(dev.ctx.stream), "synchronize");
    if (!s.ok())
      return s.prepend("GPU " + std::to_string(dev.ctx.gpu));
  }
  return Status();
}

} // namespace partc::runtime
