// The forms of partc's depthwise convolution kernel (launchDepthwiseConv)
// on the depthwise layers of EfficientNet-B0, MobileNetV3-L and ConvNeXt-T
// at batch 64, channels last, in bf16 and f32: microseconds a launch, the
// bandwidth of the input read once and the output written once, and the
// multiply-add rate, beside a device-to-device copy of the input (its
// bandwidth counts the bytes read and written).
// Every form's output is checked against form 0's.
//
//   bash bench/build_depthwise_forms.sh   # here, after the runtime builds
//   .device/depthwise_forms               # on the GPU machine
#include "runtime/cuda/CudaKernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
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

namespace {

struct Layer {
  const char *model;
  int size, channels, k, stride;
};

const Layer kLayers[] = {
    {"efficientnet", 112, 32, 3, 1}, {"efficientnet", 112, 96, 3, 2},
    {"efficientnet", 56, 144, 3, 1}, {"efficientnet", 56, 144, 5, 2},
    {"efficientnet", 28, 240, 5, 1}, {"efficientnet", 28, 240, 3, 2},
    {"efficientnet", 14, 480, 3, 1}, {"efficientnet", 14, 480, 5, 1},
    {"efficientnet", 14, 672, 5, 1}, {"efficientnet", 14, 672, 5, 2},
    {"efficientnet", 7, 1152, 5, 1}, {"efficientnet", 7, 1152, 3, 1},
    {"mobilenet", 112, 16, 3, 1},    {"mobilenet", 112, 64, 3, 2},
    {"mobilenet", 56, 72, 3, 1},     {"mobilenet", 56, 72, 5, 2},
    {"mobilenet", 28, 120, 5, 1},    {"mobilenet", 28, 240, 3, 2},
    {"mobilenet", 14, 200, 3, 1},    {"mobilenet", 14, 184, 3, 1},
    {"mobilenet", 14, 672, 5, 2},    {"mobilenet", 7, 960, 5, 1},
    {"convnext", 56, 96, 7, 1},      {"convnext", 28, 192, 7, 1},
    {"convnext", 14, 384, 7, 1},     {"convnext", 7, 768, 7, 1},
};

constexpr int kBatch = 64;
constexpr int kIterations = 50;

float bf16ToFloat(unsigned short h) {
  unsigned bits = unsigned(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// The output as floats, whatever the element type.
std::vector<float> readBack(const void *y, size_t n, bool f32) {
  std::vector<float> out(n);
  if (f32) {
    CHECK(cudaMemcpy(out.data(), y, n * 4, cudaMemcpyDeviceToHost));
    return out;
  }
  std::vector<unsigned short> raw(n);
  CHECK(cudaMemcpy(raw.data(), y, n * 2, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i)
    out[i] = bf16ToFloat(raw[i]);
  return out;
}

float timeIt(cudaStream_t s, const std::function<void()> &launch) {
  cudaEvent_t begin, end;
  CHECK(cudaEventCreate(&begin));
  CHECK(cudaEventCreate(&end));
  for (int i = 0; i < 5; ++i)
    launch();
  CHECK(cudaEventRecord(begin, s));
  for (int i = 0; i < kIterations; ++i)
    launch();
  CHECK(cudaEventRecord(end, s));
  CHECK(cudaEventSynchronize(end));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, begin, end));
  CHECK(cudaEventDestroy(begin));
  CHECK(cudaEventDestroy(end));
  return ms * 1000.f / kIterations;
}

} // namespace

int main() {
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  std::printf("| model | layer | type | copy GB/s | form 0 us | form 1 us | "
              "form 2 us | form 3 us | best | best GB/s | best TFLOP/s | "
              "max diff |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (bool f32 : {false, true})
    for (const Layer &l : kLayers) {
      DepthwiseGeometry g;
      g.n = kBatch, g.h = g.w = l.size, g.c = l.channels;
      g.kh = g.kw = l.k, g.strideH = g.strideW = l.stride;
      g.padTop = g.padLeft = l.k / 2;
      g.oh = (g.h + 2 * g.padTop - l.k) / l.stride + 1;
      g.ow = (g.w + 2 * g.padLeft - l.k) / l.stride + 1;
      size_t bytes = f32 ? 4 : 2;
      size_t inCount = size_t(g.n) * g.h * g.w * g.c;
      size_t outCount = size_t(g.n) * g.oh * g.ow * g.c;
      size_t wCount = size_t(g.c) * l.k * l.k;
      void *x, *w, *bias, *y, *copy;
      CHECK(cudaMalloc(&x, inCount * bytes));
      CHECK(cudaMalloc(&w, wCount * bytes));
      CHECK(cudaMalloc(&bias, g.c * bytes));
      CHECK(cudaMalloc(&y, outCount * bytes));
      CHECK(cudaMalloc(&copy, inCount * bytes));
      unsigned char element = f32 ? FusedParams::F32 : FusedParams::BF16;
      CHECK(launchFillPattern(x, inCount, 1, s, element));
      CHECK(launchFillPattern(w, wCount, 2, s, element));
      CHECK(launchFillPattern(bias, g.c, 3, s, element));
      float copyUs = timeIt(s, [&] {
        CHECK(cudaMemcpyAsync(copy, x, inCount * bytes,
                              cudaMemcpyDeviceToDevice, s));
      });
      double copyGbs = 2.0 * inCount * bytes / (copyUs * 1e3);
      int forms = depthwiseForms(g);
      float us[4] = {0, 0, 0, 0};
      std::vector<float> reference;
      float worst = 0;
      for (int form = 0; form < forms; ++form) {
        auto launch = [&] {
          CHECK(launchDepthwiseConv(x, w, bias, nullptr, y, g, false, true,
                                    element, s, form));
        };
        us[form] = timeIt(s, launch);
        CHECK(cudaStreamSynchronize(s));
        std::vector<float> got = readBack(y, outCount, f32);
        if (form == 0) {
          reference = got;
          continue;
        }
        for (size_t i = 0; i < outCount; ++i)
          worst = std::max(worst, std::fabs(got[i] - reference[i]) /
                                      (std::fabs(reference[i]) + 1.f));
      }
      int best = 0;
      for (int form = 1; form < forms; ++form)
        if (us[form] < us[best])
          best = form;
      double gbs = double(inCount + outCount) * bytes / (us[best] * 1e3);
      double tflops = 2.0 * outCount * l.k * l.k / (us[best] * 1e6);
      std::printf("| %s | %dx%dx%d k%d s%d | %s | %.0f | %.1f | %.1f | %.1f | "
                  "%.1f | %d | %.0f | %.2f | %.1e |\n",
                  l.model, l.size, l.size, l.channels, l.k, l.stride,
                  f32 ? "f32" : "bf16", copyGbs, us[0], us[1], us[2], us[3],
                  best, gbs, tflops, worst);
      for (void *p : {x, w, bias, y, copy})
        CHECK(cudaFree(p));
    }
  return 0;
}
