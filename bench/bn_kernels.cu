// Batch norm's channels-last passes on ResNet-50's training shapes: the
// per-channel sums (forward: x and x^2; backward: dy and dy * (x - mean))
// and the element-wise apply, in the variants partc's kernels could take,
// against a plain copy (the bandwidth a pass can reach). Each variant's
// sums are checked against a double-precision host sum.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/bn_kernels.cu -o bn_kernels
//   ./bn_kernels            # one line per shape and variant
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
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

struct Shape {
  long rows, c; // rows = n * h * w, channels last
};

// --- sums: one block's share of the rows, written to partial[ch][share] ----

// The kernel partc runs now: 32 channels x 8 rows a block, one float a
// thread per row, double accumulators.
template <bool Grad>
__global__ void sumsScalar(const float *x, const float *dy, const float *mean,
                           double *partial, Shape s, long shares) {
  long share = blockIdx.x, ch = long(blockIdx.y) * 32 + threadIdx.x;
  long first = share * s.rows / shares, last = (share + 1) * s.rows / shares;
  double a = 0, b = 0;
  if (ch < s.c) {
    float m = Grad ? mean[ch] : 0.0f;
#pragma unroll 4
    for (long r = first + threadIdx.y; r < last; r += 8) {
      float xi = x[r * s.c + ch];
      if (Grad) {
        double g = dy[r * s.c + ch];
        a += g;
        b += g * (double(xi) - m);
      } else {
        a += xi;
        b += double(xi) * xi;
      }
    }
  }
  __shared__ double sums[2][8][32];
  sums[0][threadIdx.y][threadIdx.x] = a;
  sums[1][threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || ch >= s.c)
    return;
  for (int row = 1; row < 8; ++row) {
    a += sums[0][row][threadIdx.x];
    b += sums[1][row][threadIdx.x];
  }
  partial[(ch * shares + share) * 2] = a;
  partial[(ch * shares + share) * 2 + 1] = b;
}

// Four channels a thread (float4), `Lanes` threads across a row's
// channels and 256 / Lanes rows a block; float accumulators over a
// thread's rows (a few hundred at most), double across threads.
template <bool Grad, int Lanes>
__global__ void sumsVector(const float4 *x, const float4 *dy,
                           const float *mean, double *partial, Shape s,
                           long shares) {
  constexpr int kRows = 256 / Lanes;
  long share = blockIdx.x;
  long c4 = s.c / 4, q = long(blockIdx.y) * Lanes + threadIdx.x;
  long first = share * s.rows / shares, last = (share + 1) * s.rows / shares;
  float4 a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
  float4 m = {0, 0, 0, 0};
  if (q < c4) {
    if (Grad)
      m = reinterpret_cast<const float4 *>(mean)[q];
#pragma unroll 4
    for (long r = first + threadIdx.y; r < last; r += kRows) {
      float4 v = x[r * c4 + q];
      if (Grad) {
        float4 g = dy[r * c4 + q];
        a.x += g.x, a.y += g.y, a.z += g.z, a.w += g.w;
        b.x += g.x * (v.x - m.x), b.y += g.y * (v.y - m.y);
        b.z += g.z * (v.z - m.z), b.w += g.w * (v.w - m.w);
      } else {
        a.x += v.x, a.y += v.y, a.z += v.z, a.w += v.w;
        b.x += v.x * v.x, b.y += v.y * v.y, b.z += v.z * v.z, b.w += v.w * v.w;
      }
    }
  }
  __shared__ double sums[2][kRows][Lanes * 4];
  double *sa = &sums[0][threadIdx.y][threadIdx.x * 4];
  double *sb = &sums[1][threadIdx.y][threadIdx.x * 4];
  sa[0] = a.x, sa[1] = a.y, sa[2] = a.z, sa[3] = a.w;
  sb[0] = b.x, sb[1] = b.y, sb[2] = b.z, sb[3] = b.w;
  __syncthreads();
  // Thread t of the block adds column t of the rows (Lanes * 4 columns).
  int t = threadIdx.y * Lanes + threadIdx.x;
  if (t >= Lanes * 4)
    return;
  long ch = long(blockIdx.y) * Lanes * 4 + t;
  if (ch >= s.c)
    return;
  double ta = 0, tb = 0;
  for (int row = 0; row < kRows; ++row) {
    ta += sums[0][row][t];
    tb += sums[1][row][t];
  }
  partial[(ch * shares + share) * 2] = ta;
  partial[(ch * shares + share) * 2 + 1] = tb;
}

// --- apply: y = (x - mean) * k + b per channel (forward), or
// dy * k0 + (x - mean) * k1 + k2 (backward) ---------------------------------

template <bool Grad, int PerThread>
__global__ void applyVector(const float4 *x, const float4 *dy,
                            const float *mean, const float4 *coef, float4 *y,
                            unsigned c4, unsigned n4) {
  unsigned stride = gridDim.x * blockDim.x;
  for (unsigned base = blockIdx.x * blockDim.x + threadIdx.x; base < n4;
       base += stride * PerThread) {
    float4 xv[PerThread], gv[PerThread];
#pragma unroll
    for (int k = 0; k < PerThread; ++k) {
      unsigned q = base + k * stride;
      if (q < n4) {
        xv[k] = x[q];
        if (Grad)
          gv[k] = dy[q];
      }
    }
#pragma unroll
    for (int k = 0; k < PerThread; ++k) {
      unsigned q = base + k * stride;
      if (q >= n4)
        continue;
      unsigned ch = (q % c4) * 4;
      float out[4], in[4] = {xv[k].x, xv[k].y, xv[k].z, xv[k].w};
      float g[4] = {gv[k].x, gv[k].y, gv[k].z, gv[k].w};
      for (int j = 0; j < 4; ++j) {
        float centered = in[j] - mean[ch + j];
        float4 c = coef[ch + j];
        out[j] = Grad ? g[j] * c.x + centered * c.y + c.z
                      : __fmaf_rn(centered, c.x, c.y);
      }
      y[q] = make_float4(out[0], out[1], out[2], out[3]);
    }
  }
}

__global__ void copyVector(const float4 *x, float4 *y, unsigned n4) {
  for (unsigned q = blockIdx.x * blockDim.x + threadIdx.x; q < n4;
       q += gridDim.x * blockDim.x)
    y[q] = x[q];
}

// --- harness ----------------------------------------------------------------

struct Timer {
  cudaEvent_t start, stop;
  Timer() {
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
  }
  template <typename F> float ms(F &&launch, int reps = 50) {
    launch(); // warm up
    CHECK(cudaEventRecord(start));
    for (int i = 0; i < reps; ++i)
      launch();
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, start, stop));
    CHECK(cudaGetLastError());
    return t / reps;
  }
};

long sharesFor(const Shape &s, long groups, long blocks) {
  long want = (blocks + groups - 1) / groups;
  return std::max(1L, std::min(want, s.rows / 8));
}

// Host check: the first `check` channels' sums against double sums.
double sumsError(const std::vector<float> &x, const std::vector<float> &dy,
                 const std::vector<float> &mean, const Shape &s, bool grad,
                 const std::vector<double> &partial, long shares) {
  double worst = 0;
  for (long ch = 0; ch < std::min(s.c, 8L); ++ch) {
    double a = 0, b = 0, ga = 0, gb = 0;
    for (long r = 0; r < s.rows; ++r) {
      double v = x[r * s.c + ch];
      if (grad) {
        double g = dy[r * s.c + ch];
        a += g, b += g * (v - mean[ch]);
      } else {
        a += v, b += v * v;
      }
    }
    for (long k = 0; k < shares; ++k) {
      ga += partial[(ch * shares + k) * 2];
      gb += partial[(ch * shares + k) * 2 + 1];
    }
    double scale = grad ? std::sqrt(double(s.rows)) : double(s.rows);
    worst = std::max({worst, std::fabs(ga - a) / scale,
                      std::fabs(gb - b) / scale});
  }
  return worst;
}

int main() {
  // ResNet-50's batch-norm shapes, channels last: b120 at 128^2 and b256
  // at 224^2 (one of each distinct rows x channels).
  std::vector<std::pair<std::string, Shape>> shapes = {
      {"b120 64x64x64", {120L * 64 * 64, 64}},
      {"b120 32x32x64", {120L * 32 * 32, 64}},
      {"b120 32x32x256", {120L * 32 * 32, 256}},
      {"b120 16x16x128", {120L * 16 * 16, 128}},
      {"b120 16x16x512", {120L * 16 * 16, 512}},
      {"b120 8x8x1024", {120L * 8 * 8, 1024}},
      {"b120 4x4x2048", {120L * 4 * 4, 2048}},
      {"b256 56x56x64", {256L * 56 * 56, 64}},
      {"b256 56x56x256", {256L * 56 * 56, 256}},
      {"b256 28x28x128", {256L * 28 * 28, 128}},
      {"b256 14x14x1024", {256L * 14 * 14, 1024}},
      {"b256 7x7x2048", {256L * 7 * 7, 2048}},
  };
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  std::printf("%-16s %-22s %9s %8s %9s\n", "shape", "variant", "us", "TB/s",
              "error");
  Timer timer;
  for (auto &entry : shapes) {
    const std::string &name = entry.first;
    const Shape s = entry.second;
    long n = s.rows * s.c;
    std::vector<float> hx(n), hdy(n), hmean(s.c);
    srand(1);
    for (long i = 0; i < n; ++i) {
      hx[i] = float(rand()) / RAND_MAX * 2 - 0.5f;
      hdy[i] = float(rand()) / RAND_MAX - 0.5f;
    }
    for (long ch = 0; ch < s.c; ++ch)
      hmean[ch] = 0.5f;
    float *x, *dy, *y, *mean, *coef;
    double *partial;
    CHECK(cudaMalloc(&x, n * 4));
    CHECK(cudaMalloc(&dy, n * 4));
    CHECK(cudaMalloc(&y, n * 4));
    CHECK(cudaMalloc(&mean, s.c * 4));
    CHECK(cudaMalloc(&coef, s.c * 16));
    CHECK(cudaMalloc(&partial, s.c * 8192 * 16));
    CHECK(cudaMemcpy(x, hx.data(), n * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, hdy.data(), n * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(mean, hmean.data(), s.c * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(coef, 0, s.c * 16));
    auto report = [&](const char *variant, float ms, double tensors,
                      double err) {
      std::printf("%-16s %-22s %9.1f %8.2f %9.1e\n", name.c_str(), variant,
                  ms * 1e3, tensors * n * 4 / (ms * 1e-3) / 1e12, err);
    };
    auto check = [&](bool grad, long shares) {
      std::vector<double> hp(s.c * shares * 2);
      CHECK(cudaMemcpy(hp.data(), partial, hp.size() * 8,
                       cudaMemcpyDeviceToHost));
      return sumsError(hx, hdy, hmean, s, grad, hp, shares);
    };
    report("copy", timer.ms([&] {
             copyVector<<<std::min(n / 4 / 256 + 1, 65535L * 8), 256>>>(
                 (const float4 *)x, (float4 *)y, unsigned(n / 4));
           }),
           2, 0);
    for (bool grad : {false, true}) {
      double tensors = grad ? 2 : 1;
      for (long blocks : {1024L, 2048L, 4096L}) {
        long groups = (s.c + 31) / 32;
        long shares = sharesFor(s, groups, blocks);
        float ms = timer.ms([&] {
          dim3 grid{unsigned(shares), unsigned(groups)}, block{32, 8};
          if (grad)
            sumsScalar<true><<<grid, block>>>(x, dy, mean, partial, s, shares);
          else
            sumsScalar<false><<<grid, block>>>(x, dy, mean, partial, s,
                                               shares);
        });
        std::string v = std::string(grad ? "grad" : "stats") + " scalar/" +
                        std::to_string(blocks);
        report(v.c_str(), ms, tensors, check(grad, shares));
      }
      auto vector = [&](auto lanesTag, long blocks) {
        constexpr int Lanes = decltype(lanesTag)::value;
        long groups = (s.c / 4 + Lanes - 1) / Lanes;
        long shares = sharesFor(s, groups, blocks);
        float ms = timer.ms([&] {
          dim3 grid{unsigned(shares), unsigned(groups)},
              block{Lanes, 256 / Lanes};
          if (grad)
            sumsVector<true, Lanes><<<grid, block>>>(
                (const float4 *)x, (const float4 *)dy, mean, partial, s,
                shares);
          else
            sumsVector<false, Lanes><<<grid, block>>>(
                (const float4 *)x, (const float4 *)dy, mean, partial, s,
                shares);
        });
        std::string v = std::string(grad ? "grad" : "stats") + " vec" +
                        std::to_string(Lanes) + "/" + std::to_string(blocks);
        report(v.c_str(), ms, tensors, check(grad, shares));
      };
      for (long blocks : {1024L, 2048L, 4096L}) {
        vector(std::integral_constant<int, 8>(), blocks);
        vector(std::integral_constant<int, 16>(), blocks);
        if (s.c >= 128)
          vector(std::integral_constant<int, 32>(), blocks);
      }
      for (int perThread : {1, 2, 4}) {
        unsigned n4 = unsigned(n / 4), c4 = unsigned(s.c / 4);
        long blocks =
            std::min(long(n4 / 256 / perThread + 1), 65535L * 8);
        float ms = timer.ms([&] {
          auto *fx = (const float4 *)x, *fdy = (const float4 *)dy;
          auto *fc = (const float4 *)coef;
          auto *fy = (float4 *)y;
          if (grad && perThread == 1)
            applyVector<true, 1><<<blocks, 256>>>(fx, fdy, mean, fc, fy, c4, n4);
          else if (grad && perThread == 2)
            applyVector<true, 2><<<blocks, 256>>>(fx, fdy, mean, fc, fy, c4, n4);
          else if (grad)
            applyVector<true, 4><<<blocks, 256>>>(fx, fdy, mean, fc, fy, c4, n4);
          else if (perThread == 1)
            applyVector<false, 1><<<blocks, 256>>>(fx, fdy, mean, fc, fy, c4, n4);
          else if (perThread == 2)
            applyVector<false, 2><<<blocks, 256>>>(fx, fdy, mean, fc, fy, c4, n4);
          else
            applyVector<false, 4><<<blocks, 256>>>(fx, fdy, mean, fc, fy, c4, n4);
        });
        std::string v = std::string(grad ? "grad" : "fwd") + " apply x" +
                        std::to_string(perThread);
        report(v.c_str(), ms, grad ? 3 : 2, 0);
      }
    }
    CHECK(cudaFree(x));
    CHECK(cudaFree(dy));
    CHECK(cudaFree(y));
    CHECK(cudaFree(mean));
    CHECK(cudaFree(coef));
    CHECK(cudaFree(partial));
  }
  return 0;
}
