//===- ChainCodegen.cpp - Kernels generated per fused chain ---------------===//
#include "runtime/cuda/ChainCodegen.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/FusedElementwise.h"

#include <nvrtc.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

namespace partc::runtime::cuda {

namespace {

// The headers NVRTC compiles generated code against, embedded at build
// time (EmbedSources.cmake): {include name, text}.
const char *const kEmbeddedHeaders[][2] = {
#include "FusedChainSources.inc"
};

constexpr const char *kOneName = "partc_chain";
constexpr const char *kFourName = "partc_chain4";
constexpr const char *kEightName = "partc_chain8";

Status nvrtcStatus(nvrtcResult r, const char *what) {
  if (r == NVRTC_SUCCESS)
    return Status();
  return Status::error(std::string(what) + ": " + nvrtcGetErrorString(r));
}

std::string operand(int k) {
  return k >= 0 ? "x[" + std::to_string(k) + "]" : "v" + std::to_string(-k - 1);
}

/// A float constant exactly, infinities included.
std::string floatBits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  std::ostringstream s;
  s << "__int_as_float(0x" << std::hex << bits << ")";
  return s.str();
}

const char *modeName(unsigned char mode) {
  switch (mode) {
  case FusedParams::Same:
    return "FusedParams::Same";
  case FusedParams::Scalar:
    return "FusedParams::Scalar";
  case FusedParams::Broadcast:
    return "FusedParams::Broadcast";
  case FusedParams::Parts:
    return "FusedParams::Parts";
  }
  return "FusedParams::Unused";
}

const char *elementName(unsigned char element) {
  switch (element) {
  case FusedParams::BF16:
    return "FusedParams::BF16";
  case FusedParams::F16:
    return "FusedParams::F16";
  }
  return "FusedParams::F32";
}

struct CompiledChain {
  cudaLibrary_t library = nullptr;
  GeneratedChain kernels;
  Status status; // a failure is not retried
};

/// Every chain compiled in this process, by architecture and source. The
/// libraries stay loaded until the process ends: kernels of captured CUDA
/// graphs point into them.
struct ChainCache {
  std::mutex mutex;
  std::map<std::string, CompiledChain> chains;
  ChainStats stats;
};

ChainCache &cache() {
  static ChainCache *c = new ChainCache;
  return *c;
}

Status deviceArch(int gpu, std::string &arch) {
  int major = 0, minor = 0;
  PARTC_RETURN_IF_ERROR(cudaStatus(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, gpu),
      "reading the GPU's architecture"));
  PARTC_RETURN_IF_ERROR(cudaStatus(
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, gpu),
      "reading the GPU's architecture"));
  arch = "sm_" + std::to_string(major) + std::to_string(minor);
  return Status();
}

} // namespace

std::string chainSource(const FusedParams &p) {
  std::ostringstream s;
  s << "#include \"runtime/cuda/FusedChain.cuh\"\n"
       "using namespace partc::runtime::cuda;\n"
       "using partc::runtime::ew::Step;\n"
       "namespace {\n"
       "struct Chain {\n"
       "  static constexpr int kInputs = "
    << p.inputs << ";\n";
  // Each input's mode and element type as constants.
  auto perInput = [&](const char *method, auto name, const char *otherwise) {
    s << "  __device__ unsigned char " << method
      << "(const FusedParams &, int k) const {\n"
         "    switch (k) {\n";
    for (int k = 0; k < p.inputs; ++k)
      s << "    case " << k << ": return " << name(k) << ";\n";
    s << "    }\n"
         "    return "
      << otherwise << ";\n  }\n";
  };
  perInput(
      "mode", [&](int k) { return modeName(p.mode[k]); },
      "FusedParams::Unused");
  perInput(
      "element", [&](int k) { return elementName(p.element[k]); },
      "FusedParams::F32");
  s << "  __device__ unsigned char outElement(const FusedParams &) const {\n"
       "    return "
    << elementName(p.outElement)
    << ";\n"
       "  }\n"
       "  __device__ float operator()(const FusedParams &,\n"
       "                              const float (&x)[kInputs]) const {\n";
  for (int i = 0; i < p.steps; ++i) {
    auto step = static_cast<ew::Step>(p.step[i]);
    s << "    float v" << i << " = fusedStep(static_cast<Step>("
      << static_cast<int>(p.step[i]) << "), " << operand(p.lhs[i]) << ", "
      << operand(ew::arity(step) == 2 ? p.rhs[i] : p.lhs[i]) << ", "
      << floatBits(p.param[i][0]) << ", " << floatBits(p.param[i][1])
      << "); // " << ew::info(step).name << "\n";
  }
  s << "    return v" << p.steps - 1
    << ";\n"
       "  }\n"
       "};\n"
       "} // namespace\n";
  // A chain reading concatenated parts walks them part by part.
  bool parts = p.inputs > 0 && p.mode[0] == FusedParams::Parts;
  auto kernel = [&](const char *name, const char *loop) {
    s << "extern \"C\" __global__ void __launch_bounds__(kFusedThreads)\n"
      << name << "(FusedParams p) { " << loop << "(p, Chain()); }\n";
  };
  kernel(kOneName, parts ? "runFusedChainParts<1>" : "runFusedChain");
  kernel(kFourName, parts ? "runFusedChainParts<4>" : "runFusedChainWide<4>");
  kernel(kEightName, parts ? "runFusedChainParts<8>" : "runFusedChainWide<8>");
  return s.str();
}

Status compileChainSource(const std::string &source, const std::string &arch,
                          std::vector<char> &cubin) {
  constexpr int kHeaders =
      sizeof(kEmbeddedHeaders) / sizeof(kEmbeddedHeaders[0]);
  const char *names[kHeaders], *texts[kHeaders];
  for (int h = 0; h < kHeaders; ++h) {
    names[h] = kEmbeddedHeaders[h][0];
    texts[h] = kEmbeddedHeaders[h][1];
  }
  nvrtcProgram program = nullptr;
  PARTC_RETURN_IF_ERROR(
      nvrtcStatus(nvrtcCreateProgram(&program, source.c_str(), "chain.cu",
                                     kHeaders, texts, names),
                  "NVRTC"));
  std::string archOption = "--gpu-architecture=" + arch;
  // The same floating-point contract as nvcc's default for Kernels.cu.
  const char *options[] = {archOption.c_str(), "--std=c++17", "--fmad=true"};
  nvrtcResult compiled = nvrtcCompileProgram(
      program, sizeof(options) / sizeof(options[0]), options);
  Status status;
  if (compiled != NVRTC_SUCCESS) {
    size_t logSize = 0;
    nvrtcGetProgramLogSize(program, &logSize);
    std::string log(logSize, '\0');
    nvrtcGetProgramLog(program, log.data());
    status = Status::error(std::string("NVRTC could not compile a fused chain "
                                       "for ") +
                           arch + ": " + nvrtcGetErrorString(compiled) + "\n" +
                           log.c_str());
  }
  size_t size = 0;
  if (status.ok())
    status = nvrtcStatus(nvrtcGetCUBINSize(program, &size), "NVRTC");
  if (status.ok()) {
    cubin.resize(size);
    status = nvrtcStatus(nvrtcGetCUBIN(program, cubin.data()), "NVRTC");
  }
  nvrtcDestroyProgram(&program);
  return status;
}

Status generateChain(const FusedParams &p, int gpu, GeneratedChain &chain) {
  std::string arch;
  PARTC_RETURN_IF_ERROR(deviceArch(gpu, arch));
  std::string source = chainSource(p);
  ChainCache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::string key = arch + "\n" + source;
  auto found = c.chains.find(key);
  if (found == c.chains.end()) {
    auto start = std::chrono::steady_clock::now();
    CompiledChain compiled;
    std::vector<char> cubin;
    compiled.status = compileChainSource(source, arch, cubin);
    const char *loading = "loading a generated fused chain";
    if (compiled.status.ok())
      compiled.status = cudaStatus(
          cudaLibraryLoadData(&compiled.library, cubin.data(), nullptr, nullptr,
                              0, nullptr, nullptr, 0),
          loading);
    if (compiled.status.ok())
      compiled.status =
          cudaStatus(cudaLibraryGetKernel(&compiled.kernels.one,
                                          compiled.library, kOneName),
                     loading);
    if (compiled.status.ok())
      compiled.status =
          cudaStatus(cudaLibraryGetKernel(&compiled.kernels.four,
                                          compiled.library, kFourName),
                     loading);
    if (compiled.status.ok())
      compiled.status =
          cudaStatus(cudaLibraryGetKernel(&compiled.kernels.eight,
                                          compiled.library, kEightName),
                     loading);
    c.stats.seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (compiled.status.ok()) {
      ++c.stats.compiled;
    } else {
      cudaGetLastError(); // not sticky: the interpreter runs instead
      if (c.stats.failed++ == 0)
        c.stats.firstFailure = compiled.status.message();
    }
    found = c.chains.emplace(key, compiled).first;
  }
  chain = found->second.kernels;
  return found->second.status;
}

cudaError_t launchGeneratedChain(const GeneratedChain &chain,
                                 const FusedParams &p, cudaStream_t s) {
  int width = fusedWidth(p);
  FusedParams params = p;
  void *args[] = {&params};
  cudaKernel_t kernel = width == 8   ? chain.eight
                        : width == 4 ? chain.four
                                     : chain.one;
  return cudaLaunchKernel(reinterpret_cast<const void *>(kernel),
                          dim3(fusedBlocks(p, width)), dim3(kFusedThreads),
                          args, 0, s);
}

ChainStats generatedChainStats() {
  ChainCache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

} // namespace partc::runtime::cuda
