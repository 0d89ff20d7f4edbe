// The fused element-wise chains of 16-bit transformer plans (BERT's erf
// Gelu, GPT-2's nine-step tanh Gelu) through FusedChain.cuh at one, four
// and eight elements a thread, against a 16-byte copy (the bandwidth a
// pass can reach). Each width's output is checked against the one-element
// kernel's, bit for bit.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I. bench/ew16_chain.cu -o ew16_chain
//   ./ew16_chain            # one line per shape, chain and width
#include "runtime/cuda/FusedChain.cuh"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                  \
                   cudaGetErrorString(e));                                     \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

using namespace partc::runtime::cuda;
using partc::runtime::ew::Step;

namespace {

// Every operand bf16, as generated code states it.
struct Bf16Operands {
  __device__ unsigned char element(const FusedParams &, int) const {
    return FusedParams::BF16;
  }
  __device__ unsigned char outElement(const FusedParams &) const {
    return FusedParams::BF16;
  }
};

// What ChainCodegen.cpp writes for graph.gelu alone.
struct GeluErfChain : Bf16Operands {
  static constexpr int kInputs = 1;
  __device__ unsigned char mode(const FusedParams &, int k) const {
    return k == 0 ? FusedParams::Same : FusedParams::Unused;
  }
  __device__ float operator()(const FusedParams &,
                              const float (&x)[kInputs]) const {
    return fusedStep(Step::Gelu, x[0], x[0], 0.f, 0.f);
  }
};

// GPT-2's gelu_new as exported: x, 0.5, 0.044715, 0.79788, 1 (scalars).
struct GeluTanhChain : Bf16Operands {
  static constexpr int kInputs = 5;
  __device__ unsigned char mode(const FusedParams &, int k) const {
    return k == 0 ? FusedParams::Same : FusedParams::Scalar;
  }
  __device__ float operator()(const FusedParams &,
                              const float (&x)[kInputs]) const {
    float v0 = fusedStep(Step::Mul, x[0], x[1], 0.f, 0.f);
    float v1 = fusedStep(Step::Mul, x[0], x[0], 0.f, 0.f);
    float v2 = fusedStep(Step::Mul, v1, x[0], 0.f, 0.f);
    float v3 = fusedStep(Step::Mul, v2, x[2], 0.f, 0.f);
    float v4 = fusedStep(Step::Add, x[0], v3, 0.f, 0.f);
    float v5 = fusedStep(Step::Mul, v4, x[3], 0.f, 0.f);
    float v6 = fusedStep(Step::Tanh, v5, v5, 0.f, 0.f);
    float v7 = fusedStep(Step::Add, v6, x[4], 0.f, 0.f);
    return fusedStep(Step::Mul, v0, v7, 0.f, 0.f);
  }
};

template <class Chain> __global__ void chain1(FusedParams p) {
  runFusedChain(p, Chain());
}
template <int W, class Chain> __global__ void chainWide(FusedParams p) {
  runFusedChainWide<W>(p, Chain());
}

__global__ void copy16(const uint4 *x, uint4 *y, unsigned n16) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n16;
       i += gridDim.x * blockDim.x)
    y[i] = x[i];
}

unsigned blocks(long work) {
  long b = (work + kFusedThreads - 1) / kFusedThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? b : 65535 * 8);
}

template <class Launch> float timeIt(Launch launch) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i)
    launch();
  const int reps = 50;
  CHECK(cudaEventRecord(a));
  for (int i = 0; i < reps; ++i)
    launch();
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaGetLastError());
  return ms * 1000.f / reps; // us
}

template <class Chain>
void run(const char *name, long rows, long cols, int inputs, unsigned short *x,
         unsigned short *scalars, unsigned short *y,
         unsigned short *reference) {
  long n = rows * cols;
  FusedParams p;
  p.inputs = inputs;
  p.rank = 1;
  p.shape[0] = static_cast<unsigned>(n);
  p.n = static_cast<unsigned>(n);
  p.out = y;
  p.outElement = FusedParams::BF16;
  for (int k = 0; k < inputs; ++k) {
    p.in[k] = k == 0 ? x : scalars + (k - 1);
    p.element[k] = FusedParams::BF16;
    p.mode[k] = k == 0 ? FusedParams::Same : FusedParams::Scalar;
  }
  double bytes = 4.0 * n;
  std::vector<unsigned short> out(n), ref(n);
  float t1 = timeIt([&] { chain1<Chain><<<blocks(n), kFusedThreads>>>(p); });
  CHECK(cudaMemcpy(ref.data(), y, 2 * n, cudaMemcpyDeviceToHost));
  std::printf("%-10s %5ldx%-5ld width 1: %7.1f us %6.2f TB/s\n", name, rows,
              cols, t1, bytes / t1 * 1e-6);
  for (int w : {4, 8}) {
    CHECK(cudaMemset(y, 0, 2 * n));
    float t = timeIt([&] {
      if (w == 4)
        chainWide<4, Chain><<<blocks(n / 4), kFusedThreads>>>(p);
      else
        chainWide<8, Chain><<<blocks(n / 8), kFusedThreads>>>(p);
    });
    CHECK(cudaMemcpy(out.data(), y, 2 * n, cudaMemcpyDeviceToHost));
    bool same = std::memcmp(out.data(), ref.data(), 2 * n) == 0;
    std::printf("%-10s %5ldx%-5ld width %d: %7.1f us %6.2f TB/s %s\n", name,
                rows, cols, w, t, bytes / t * 1e-6,
                same ? "same bits" : "DIFFERENT");
  }
  (void)reference;
}

} // namespace

int main() {
  long shapes[][2] = {{6144, 4096}, {4096, 4096}, {4096, 1024}};
  long most = 6144 * 4096;
  unsigned short *x, *y, *scalars;
  CHECK(cudaMalloc(&x, 2 * most));
  CHECK(cudaMalloc(&y, 2 * most));
  CHECK(cudaMalloc(&scalars, 16));
  std::vector<unsigned short> host(most);
  unsigned seed = 12345;
  for (long i = 0; i < most; ++i) {
    seed = seed * 1664525u + 1013904223u;
    float f = (static_cast<int>(seed >> 8) % 20001 - 10000) / 2500.f;
    unsigned u;
    std::memcpy(&u, &f, 4);
    host[i] = static_cast<unsigned short>(u >> 16);
  }
  CHECK(cudaMemcpy(x, host.data(), 2 * most, cudaMemcpyHostToDevice));
  float consts[4] = {0.5f, 0.044715f, 0.7978845608f, 1.f};
  unsigned short sc[4];
  for (int i = 0; i < 4; ++i) {
    unsigned u;
    std::memcpy(&u, &consts[i], 4);
    sc[i] = static_cast<unsigned short>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  }
  CHECK(cudaMemcpy(scalars, sc, sizeof(sc), cudaMemcpyHostToDevice));
  for (auto &s : shapes) {
    long n = s[0] * s[1];
    float t = timeIt([&] {
      copy16<<<blocks(n / 8), kFusedThreads>>>(
          reinterpret_cast<const uint4 *>(x), reinterpret_cast<uint4 *>(y),
          static_cast<unsigned>(n / 8));
    });
    std::printf("%-10s %5ldx%-5ld copy   : %7.1f us %6.2f TB/s\n", "copy", s[0],
                s[1], t, 4.0 * n / t * 1e-6);
    run<GeluErfChain>("gelu-erf", s[0], s[1], 1, x, scalars, y, nullptr);
    run<GeluTanhChain>("gelu-tanh", s[0], s[1], 5, x, scalars, y, nullptr);
  }
  return 0;
}
