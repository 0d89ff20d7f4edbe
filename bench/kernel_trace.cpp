//===- kernel_trace.cpp - Every kernel's GPU start and end, by LD_PRELOAD -===//
//
// A benchmark tool, not part of partc: preloaded into any CUDA program
// (partc-run, PyTorch), it records every kernel the GPU runs, inside CUDA
// graphs too, through CUPTI's activity API, and writes them as CSV
// (start_ns,end_ns,stream,graph_node,name) to $PARTC_KERNEL_TRACE at
// exit. partc's own profile (partc-run --profile) times each kernel alone
// between events; this shows how far apart a graph's kernels really run.
// CUPTI is opened at run time (the torch wheel's libcupti.so.13 on the lent
// GPU machines), so nothing links against it.
//
//   g++ -O2 -shared -fPIC -I/usr/local/cuda/include bench/kernel_trace.cpp \
//       -o libkernel_trace.so -ldl
//   PARTC_KERNEL_TRACE=k.csv LD_PRELOAD=./libkernel_trace.so partc-run ...
//   python3 bench/kernel_gaps.py k.csv
//
//===----------------------------------------------------------------------===//
#include <cuda_runtime_api.h>
#include <cupti_activity.h>

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Kernel {
  uint64_t start, end, graphNode;
  uint32_t stream;
  std::string name;
};

std::mutex mutex;
// Never destroyed: CUPTI may deliver the last buffers while the program's
// static objects are torn down.
std::vector<Kernel> &kernels = *new std::vector<Kernel>;

using EnableFn = CUptiResult (*)(CUpti_ActivityKind);
using RegisterFn = CUptiResult (*)(CUpti_BuffersCallbackRequestFunc,
                                   CUpti_BuffersCallbackCompleteFunc);
using NextFn = CUptiResult (*)(uint8_t *, size_t, CUpti_Activity **);
using FlushFn = CUptiResult (*)(uint32_t);
using PeriodFn = CUptiResult (*)(uint32_t);

NextFn nextRecord = nullptr;
FlushFn flushAll = nullptr;

constexpr size_t kBufferBytes = size_t(8) << 20;

void CUPTIAPI bufferRequested(uint8_t **buffer, size_t *size,
                              size_t *maxRecords) {
  *buffer = static_cast<uint8_t *>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *maxRecords = 0;
}

void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t *buffer, size_t,
                              size_t valid) {
  CUpti_Activity *record = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  while (nextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    // Copies and fills are recorded too, named in brackets: a graph's
    // memset or memcpy node is a gap between kernels otherwise.
    if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto *m = reinterpret_cast<const CUpti_ActivityMemset4 *>(record);
      kernels.push_back({m->start, m->end, m->graphNodeId, m->streamId,
                         "[memset " + std::to_string(m->bytes) + "]"});
      continue;
    }
    if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto *m = reinterpret_cast<const CUpti_ActivityMemcpy6 *>(record);
      kernels.push_back({m->start, m->end, m->graphNodeId, m->streamId,
                         "[memcpy " + std::to_string(m->bytes) + "]"});
      continue;
    }
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
      continue;
    // The fields read here sit at the same place in every kernel record
    // version CUPTI 13 writes.
    auto *k = reinterpret_cast<const CUpti_ActivityKernel10 *>(record);
    kernels.push_back({k->start, k->end, k->graphNodeId, k->streamId,
                       k->name ? k->name : "?"});
  }
  std::free(buffer);
}

void write() {
  const char *path = std::getenv("PARTC_KERNEL_TRACE");
  if (flushAll)
    flushAll(1);
  std::lock_guard<std::mutex> lock(mutex);
  // A child the program starts inherits the preload and runs no kernels:
  // it must not overwrite the parent's trace.
  if (kernels.empty())
    return;
  FILE *f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path);
    return;
  }
  std::fprintf(f, "start_ns,end_ns,stream,graph_node,name\n");
  for (const Kernel &k : kernels) {
    std::string name = k.name;
    for (char &c : name)
      if (c == ',' || c == '\n')
        c = ';';
    std::fprintf(f, "%llu,%llu,%u,%llu,%s\n",
                 static_cast<unsigned long long>(k.start),
                 static_cast<unsigned long long>(k.end), k.stream,
                 static_cast<unsigned long long>(k.graphNode), name.c_str());
  }
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels to %s\n", kernels.size(),
               path);
}

__attribute__((constructor)) void start() {
  if (!std::getenv("PARTC_KERNEL_TRACE"))
    return;
  void *cupti = dlopen("libcupti.so.13", RTLD_NOW | RTLD_GLOBAL);
  if (!cupti)
    cupti = dlopen("libcupti.so", RTLD_NOW | RTLD_GLOBAL);
  if (!cupti) {
    std::fprintf(stderr, "kernel_trace: no libcupti: %s\n", dlerror());
    return;
  }
  auto enable = reinterpret_cast<EnableFn>(dlsym(cupti, "cuptiActivityEnable"));
  auto registerBuffers = reinterpret_cast<RegisterFn>(
      dlsym(cupti, "cuptiActivityRegisterCallbacks"));
  auto period =
      reinterpret_cast<PeriodFn>(dlsym(cupti, "cuptiActivityFlushPeriod"));
  nextRecord =
      reinterpret_cast<NextFn>(dlsym(cupti, "cuptiActivityGetNextRecord"));
  flushAll = reinterpret_cast<FlushFn>(dlsym(cupti, "cuptiActivityFlushAll"));
  if (!enable || !registerBuffers || !nextRecord || !flushAll ||
      registerBuffers(bufferRequested, bufferCompleted) != CUPTI_SUCCESS ||
      enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_trace: CUPTI refused activity tracing\n");
    flushAll = nullptr;
    return;
  }
  enable(CUPTI_ACTIVITY_KIND_MEMSET);
  enable(CUPTI_ACTIVITY_KIND_MEMCPY);
  // Buffers delivered while the program runs, not only at its end, when
  // the driver may already be gone.
  if (period)
    period(200);
  std::atexit(write);
}

} // namespace

// Interposed on libcudart's: each instantiated graph's shape on stderr (nodes
// by type, and how many wait on more than one node: the forks and joins
// whose launches the trace shows as gaps), the largest one as Graphviz to
// $PARTC_GRAPH_DOT when set.
extern "C" cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec,
                                            cudaGraph_t graph,
                                            unsigned long long flags) {
  using InstantiateFn =
      cudaError_t (*)(cudaGraphExec_t *, cudaGraph_t, unsigned long long);
  static auto real =
      reinterpret_cast<InstantiateFn>(dlsym(RTLD_NEXT, "cudaGraphInstantiate"));
  if (std::getenv("PARTC_KERNEL_TRACE")) {
    size_t count = 0;
    cudaGraphGetNodes(graph, nullptr, &count);
    std::vector<cudaGraphNode_t> nodes(count);
    cudaGraphGetNodes(graph, nodes.data(), &count);
    size_t byType[32] = {}, joins = 0;
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type = cudaGraphNodeTypeCount;
      cudaGraphNodeGetType(node, &type);
      ++byType[static_cast<unsigned>(type) % 32];
      size_t deps = 0;
      cudaGraphNodeGetDependencies(node, nullptr, nullptr, &deps);
      joins += deps > 1;
    }
    std::fprintf(
        stderr,
        "kernel_trace: graph of %zu nodes: %zu kernels, %zu memcpy, "
        "%zu memset, %zu empty, %zu event waits/records, %zu other; "
        "%zu nodes wait on several\n",
        count, byType[cudaGraphNodeTypeKernel], byType[cudaGraphNodeTypeMemcpy],
        byType[cudaGraphNodeTypeMemset], byType[cudaGraphNodeTypeEmpty],
        byType[cudaGraphNodeTypeWaitEvent] +
            byType[cudaGraphNodeTypeEventRecord],
        count - byType[cudaGraphNodeTypeKernel] -
            byType[cudaGraphNodeTypeMemcpy] - byType[cudaGraphNodeTypeMemset] -
            byType[cudaGraphNodeTypeEmpty] -
            byType[cudaGraphNodeTypeWaitEvent] -
            byType[cudaGraphNodeTypeEventRecord],
        joins);
    static size_t largest = 0;
    const char *dot = std::getenv("PARTC_GRAPH_DOT");
    if (dot && count > largest) {
      largest = count;
      cudaGraphDebugDotPrint(graph, dot, 0);
    }
  }
  return real(exec, graph, flags);
}
