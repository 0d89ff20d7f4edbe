// What a data-parallel step's gradient averaging costs on this machine's
// GPUs, by how it is issued: the parameters of a GPT-2-medium-sized
// decoder (24 layers of 1024, vocabulary 50,257: 292 tensors, 1.42 GB of
// fp32 gradients) averaged one ncclAllReduce per tensor (what partc does),
// all of them in one ncclGroupStart/End, the small ones (under 1 MiB)
// grouped, and as one flat buffer (the bandwidth bound). One process, one
// thread, every GPU (ncclCommInitAll).
//
//   nvcc -O3 -std=c++17 bench/nccl_allreduce.cu -lnccl -o nccl_allreduce
//   ./nccl_allreduce [layers width vocab]
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CHECK_CUDA(x)                                                          \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                  \
                   cudaGetErrorString(e));                                     \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)
#define CHECK_NCCL(x)                                                          \
  do {                                                                         \
    ncclResult_t r = (x);                                                      \
    if (r != ncclSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                  \
                   ncclGetErrorString(r));                                     \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

int main(int argc, char **argv) {
  long layers = argc > 1 ? std::atol(argv[1]) : 24;
  long width = argc > 2 ? std::atol(argv[2]) : 1024;
  long vocab = argc > 3 ? std::atol(argv[3]) : 50257;
  // GPT-2's parameters per layer: two norms, qkv, attention projection,
  // two MLP products, each with a bias; then the embeddings and the last
  // norm.
  std::vector<size_t> sizes;
  for (long l = 0; l < layers; ++l)
    for (long n : {width, width, width * 3 * width, 3 * width, width * width,
                   width, width, width, width * 4 * width, 4 * width,
                   4 * width * width, width})
      sizes.push_back(size_t(n));
  for (long n : {vocab * width, 1024 * width, width, width})
    sizes.push_back(size_t(n));
  size_t total = 0, small = 0;
  for (size_t n : sizes) {
    total += n;
    small += n * 4 < (1u << 20);
  }
  int gpus = 0;
  CHECK_CUDA(cudaGetDeviceCount(&gpus));
  if (gpus < 2) {
    std::printf("SKIPPED: needs 2 GPUs, found %d\n", gpus);
    return 0;
  }
  std::vector<int> ids(gpus);
  for (int g = 0; g < gpus; ++g)
    ids[g] = g;
  std::vector<ncclComm_t> comms(gpus);
  CHECK_NCCL(ncclCommInitAll(comms.data(), gpus, ids.data()));
  std::vector<cudaStream_t> streams(gpus);
  std::vector<float *> buffers(gpus);
  for (int g = 0; g < gpus; ++g) {
    CHECK_CUDA(cudaSetDevice(g));
    CHECK_CUDA(cudaStreamCreate(&streams[g]));
    CHECK_CUDA(cudaMalloc(&buffers[g], total * sizeof(float)));
    CHECK_CUDA(cudaMemset(buffers[g], 0, total * sizeof(float)));
  }
  auto sync = [&] {
    for (int g = 0; g < gpus; ++g) {
      CHECK_CUDA(cudaSetDevice(g));
      CHECK_CUDA(cudaStreamSynchronize(streams[g]));
    }
  };
  // Every GPU's call for tensor [offset, offset + n), in one group (the
  // single-process form NCCL requires).
  auto reduce = [&](size_t offset, size_t n) {
    CHECK_NCCL(ncclGroupStart());
    for (int g = 0; g < gpus; ++g)
      CHECK_NCCL(ncclAllReduce(buffers[g] + offset, buffers[g] + offset, n,
                               ncclFloat, ncclAvg, comms[g], streams[g]));
    CHECK_NCCL(ncclGroupEnd());
  };
  auto time = [&](const char *what, long calls,
                  const std::function<void()> &step) {
    step();
    sync();
    const int reps = 10;
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r)
      step();
    sync();
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count() /
                reps;
    std::printf("{\"what\": \"%s\", \"gpus\": %d, \"tensors\": %zu, "
                "\"calls\": %ld, \"gbytes\": %.3f, \"ms\": %.3f, "
                "\"bus_gb_s\": %.1f}\n",
                what, gpus, sizes.size(), calls, total * 4e-9, ms,
                total * 4e-9 * 2 * (gpus - 1) / gpus / (ms * 1e-3));
  };
  time("one call per tensor", long(sizes.size()), [&] {
    size_t offset = 0;
    for (size_t n : sizes) {
      reduce(offset, n);
      offset += n;
    }
  });
  time("small tensors (< 1 MiB) in one group", long(sizes.size() - small + 1),
       [&] {
         size_t offset = 0;
         CHECK_NCCL(ncclGroupStart());
         for (size_t n : sizes) {
           if (n * 4 < (1u << 20))
             for (int g = 0; g < gpus; ++g)
               CHECK_NCCL(ncclAllReduce(buffers[g] + offset,
                                        buffers[g] + offset, n, ncclFloat,
                                        ncclAvg, comms[g], streams[g]));
           offset += n;
         }
         CHECK_NCCL(ncclGroupEnd());
         offset = 0;
         for (size_t n : sizes) {
           if (n * 4 >= (1u << 20))
             reduce(offset, n);
           offset += n;
         }
       });
  time("all tensors in one group", 1, [&] {
    size_t offset = 0;
    CHECK_NCCL(ncclGroupStart());
    for (size_t n : sizes) {
      for (int g = 0; g < gpus; ++g)
        CHECK_NCCL(ncclAllReduce(buffers[g] + offset, buffers[g] + offset, n,
                                 ncclFloat, ncclAvg, comms[g], streams[g]));
      offset += n;
    }
    CHECK_NCCL(ncclGroupEnd());
  });
  time("one flat buffer", 1, [&] { reduce(0, total); });
  for (int g = 0; g < gpus; ++g)
    ncclCommDestroy(comms[g]);
  return 0;
}
