//===- Training.cu - Backward window ops, batch norm, losses, optimizers --===//
//
// The GPU side of runtime/kernels/Backward.cpp and Training.cpp, float32.
// Per-channel and per-row sums accumulate in double, as the CPU reference
// does, so the two agree to float32's rounding of the result.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/KernelUtils.cuh"
#include "runtime/cuda/TrainingKernels.h"

namespace partc::runtime::cuda {

namespace {

constexpr int kReduceThreads = 512;

/// Sum of `v` over the block, valid in thread 0.
__device__ double blockSum(double v) {
  __shared__ double partial[kReduceThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  v = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < blockDim.x / 32; ++w)
      v += partial[w];
  return v;
}

//===----------------------------------------------------------------------===//
// Pooling gradients: one thread per window, adding into the input's
// gradient (windows overlap).
//===----------------------------------------------------------------------===//

__global__ void poolGradKernel(const float *dy, const float *x, float *dx,
                               PoolParams p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ow = i % p.out[2], oh = (i / p.out[2]) % p.out[1],
            od = (i / (p.out[2] * p.out[1])) % p.out[0],
            plane = i / (p.out[2] * p.out[1] * p.out[0]);
    int64_t planeIn = plane * p.in[0] * p.in[1] * p.in[2];
    float best = -INFINITY;
    int64_t where = -1, divisor = 0;
    for (int64_t kd = 0; kd < p.kernel[0]; ++kd) {
      int64_t id = od * p.stride[0] - p.padBegin[0] + kd * p.dilation[0];
      for (int64_t kh = 0; kh < p.kernel[1]; ++kh) {
        int64_t ih = oh * p.stride[1] - p.padBegin[1] + kh * p.dilation[1];
        for (int64_t kw = 0; kw < p.kernel[2]; ++kw) {
          int64_t iw = ow * p.stride[2] - p.padBegin[2] + kw * p.dilation[2];
          bool inside = id >= 0 && ih >= 0 && iw >= 0 && id < p.in[0] &&
                        ih < p.in[1] && iw < p.in[2];
          if (!inside) {
            if (p.countIncludePad && id >= -p.padBegin[0] &&
                ih >= -p.padBegin[1] && iw >= -p.padBegin[2] &&
                id < p.in[0] + p.padEnd[0] && ih < p.in[1] + p.padEnd[1] &&
                iw < p.in[2] + p.padEnd[2])
              ++divisor;
            continue;
          }
          int64_t at = planeIn + (id * p.in[1] + ih) * p.in[2] + iw;
          ++divisor;
          // The first maximum, as PyTorch and the CPU reference pick it.
          if (p.isMax && (where < 0 || x[at] > best)) {
            best = x[at];
            where = at;
          }
        }
      }
    }
    if (p.isMax) {
      if (where >= 0)
        atomicAdd(dx + where, dy[i]);
      continue;
    }
    float share = dy[i] / float(divisor);
    for (int64_t kd = 0; kd < p.kernel[0]; ++kd) {
      int64_t id = od * p.stride[0] - p.padBegin[0] + kd * p.dilation[0];
      for (int64_t kh = 0; kh < p.kernel[1]; ++kh) {
        int64_t ih = oh * p.stride[1] - p.padBegin[1] + kh * p.dilation[1];
        for (int64_t kw = 0; kw < p.kernel[2]; ++kw) {
          int64_t iw = ow * p.stride[2] - p.padBegin[2] + kw * p.dilation[2];
          if (id >= 0 && ih >= 0 && iw >= 0 && id < p.in[0] && ih < p.in[1] &&
              iw < p.in[2])
            atomicAdd(dx + planeIn + (id * p.in[1] + ih) * p.in[2] + iw, share);
        }
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Batch normalization: one block per channel for its sums, then one
// element-wise pass.
//===----------------------------------------------------------------------===//

/// Calls fn(index) for the elements of channel `ch` this thread takes.
template <typename Fn>
__device__ void forChannel(const ChannelShape &s, int64_t ch, Fn fn) {
  for (int64_t b = 0; b < s.n; ++b) {
    int64_t base = (b * s.c + ch) * s.size;
    for (int64_t i = threadIdx.x; i < s.size; i += blockDim.x)
      fn(base + i);
  }
}

__global__ void batchStatsKernel(const float *x, float *mean, float *var,
                                 ChannelShape s) {
  int64_t ch = blockIdx.x;
  __shared__ double shared;
  double sum = 0;
  forChannel(s, ch, [&](int64_t i) { sum += x[i]; });
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    shared = sum / double(s.n * s.size);
  __syncthreads();
  double m = shared, squares = 0;
  forChannel(s, ch, [&](int64_t i) {
    double d = x[i] - m;
    squares += d * d;
  });
  squares = blockSum(squares);
  if (threadIdx.x == 0) {
    mean[ch] = float(m);
    var[ch] = float(squares / double(s.n * s.size));
  }
}

__global__ void normalizeKernel(const float *x, const float *scale,
                                const float *bias, const float *mean,
                                const float *var, float *y, ChannelShape s,
                                double eps) {
  int64_t n = s.n * s.c * s.size;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ch = (i / s.size) % s.c;
    double a = scale[ch] / sqrt(double(var[ch]) + eps);
    y[i] = float((x[i] - mean[ch]) * a + bias[ch]);
  }
}

__global__ void batchNormGradSumsKernel(const float *dy, const float *x,
                                        const float *mean, const float *var,
                                        float *dscale, float *dbias,
                                        ChannelShape s, double eps) {
  int64_t ch = blockIdx.x;
  double invStd = 1.0 / sqrt(double(var[ch]) + eps), m = mean[ch];
  double sumDy = 0, sumDyXhat = 0;
  forChannel(s, ch, [&](int64_t i) {
    sumDy += dy[i];
    sumDyXhat += dy[i] * (x[i] - m) * invStd;
  });
  sumDy = blockSum(sumDy);
  sumDyXhat = blockSum(sumDyXhat);
  if (threadIdx.x == 0) {
    dbias[ch] = float(sumDy);
    dscale[ch] = float(sumDyXhat);
  }
}

__global__ void batchNormGradInputKernel(const float *dy, const float *x,
                                         const float *scale, const float *mean,
                                         const float *var, const float *dscale,
                                         const float *dbias, float *dx,
                                         ChannelShape s, double eps) {
  int64_t n = s.n * s.c * s.size;
  double count = double(s.n * s.size);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ch = (i / s.size) % s.c;
    double invStd = 1.0 / sqrt(double(var[ch]) + eps);
    double xhat = (x[i] - mean[ch]) * invStd;
    dx[i] = float(scale[ch] * invStd *
                  (dy[i] - dbias[ch] / count - xhat * dscale[ch] / count));
  }
}

__global__ void runningStatsKernel(float *runningMean, float *runningVar,
                                   const float *mean, const float *var,
                                   int64_t channels, double momentum,
                                   double unbias) {
  int64_t ch = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (ch >= channels)
    return;
  runningMean[ch] =
      float((1 - momentum) * runningMean[ch] + momentum * mean[ch]);
  runningVar[ch] =
      float((1 - momentum) * runningVar[ch] + momentum * var[ch] * unbias);
}

//===----------------------------------------------------------------------===//
// Softmax cross-entropy: one block per row.
//===----------------------------------------------------------------------===//

/// log(sum(exp(row))) of one row, in every thread.
__device__ double rowLogSumExp(const float *row, int64_t classes) {
  __shared__ double shared;
  double max = -INFINITY;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    max = fmax(max, double(row[c]));
  for (int offset = 16; offset > 0; offset /= 2)
    max = fmax(max, __shfl_down_sync(0xffffffffu, max, offset));
  __shared__ double maxes[kReduceThreads / 32];
  __syncthreads();
  if (threadIdx.x % 32 == 0)
    maxes[threadIdx.x / 32] = max;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < blockDim.x / 32; ++w)
      maxes[0] = fmax(maxes[0], maxes[w]);
    shared = maxes[0];
  }
  __syncthreads();
  max = shared;
  double sum = 0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    sum += exp(double(row[c]) - max);
  sum = blockSum(sum);
  __syncthreads();
  if (threadIdx.x == 0)
    shared = max + log(sum);
  __syncthreads();
  return shared;
}

__global__ void crossEntropyRowsKernel(const float *logits,
                                       const int64_t *labels, double *rowLoss,
                                       int64_t classes, int *bad) {
  int64_t r = blockIdx.x;
  int64_t label = labels[r];
  const float *row = logits + r * classes;
  double lse = rowLogSumExp(row, classes);
  if (threadIdx.x != 0)
    return;
  if (label < 0 || label >= classes) {
    atomicExch(bad, 1);
    rowLoss[r] = NAN;
    return;
  }
  rowLoss[r] = lse - row[label];
}

__global__ void meanKernel(const double *values, int64_t n, float *result) {
  double sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    sum += values[i];
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    result[0] = float(sum / double(n));
}

__global__ void crossEntropyGradKernel(const float *logits,
                                       const int64_t *labels,
                                       const float *dloss, float *grad,
                                       int64_t rows, int64_t classes,
                                       int *bad) {
  int64_t r = blockIdx.x;
  int64_t label = labels[r];
  const float *row = logits + r * classes;
  double lse = rowLogSumExp(row, classes);
  if (label < 0 || label >= classes) {
    if (threadIdx.x == 0)
      atomicExch(bad, 1);
    return;
  }
  double scale = double(dloss[0]) / double(rows);
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    grad[r * classes + c] =
        float((exp(double(row[c]) - lse) - (c == label ? 1.0 : 0.0)) * scale);
}

//===----------------------------------------------------------------------===//
// Optimizer steps, in the order of operations of the CPU reference.
//===----------------------------------------------------------------------===//

__global__ void sgdKernel(float *param, const float *grad, float *buf,
                          int64_t n, float lr, float momentum, float decay,
                          bool hasDecay) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float g = grad[i];
    if (hasDecay)
      g += decay * param[i];
    if (buf) {
      g = buf[i] * momentum + g;
      buf[i] = g;
    }
    param[i] = param[i] - lr * g;
  }
}

__global__ void adamWKernel(float *param, const float *grad, float *m, float *v,
                            const int64_t *step, int64_t n, AdamWParams p) {
  double t = double(step[0]) + 1;
  float size = float(p.lr / (1 - pow(p.beta1, t)));
  float corr = float(sqrt(1 - pow(p.beta2, t)));
  float decay = float(1 - p.lr * p.weightDecay), b1 = float(1 - p.beta1),
        b2 = float(p.beta2), c2 = float(1 - p.beta2), eps = float(p.eps);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float g = grad[i];
    float pi = param[i] * decay;
    float mi = m[i] + b1 * (g - m[i]);
    float vi = v[i] * b2 + c2 * g * g;
    float denom = sqrtf(vi) / corr + eps;
    m[i] = mi;
    v[i] = vi;
    param[i] = pi - size * (mi / denom);
  }
}

__global__ void countStepKernel(int64_t *step) { step[0] += 1; }

} // namespace

cudaError_t launchPoolGrad(const float *dy, const float *x, float *dx,
                           const PoolParams &p, cudaStream_t s) {
  int64_t inputs = p.planes * p.in[0] * p.in[1] * p.in[2];
  int64_t n = p.planes * p.out[0] * p.out[1] * p.out[2];
  cudaError_t err = cudaMemsetAsync(dx, 0, inputs * sizeof(float), s);
  if (err != cudaSuccess || n == 0)
    return err;
  poolGradKernel<<<blocksFor(n), kThreads, 0, s>>>(dy, x, dx, p, n);
  return cudaGetLastError();
}

cudaError_t launchBatchNormTrain(const float *x, const float *scale,
                                 const float *bias, float *y, float *mean,
                                 float *var, ChannelShape shape, double eps,
                                 cudaStream_t s) {
  batchStatsKernel<<<shape.c, kReduceThreads, 0, s>>>(x, mean, var, shape);
  normalizeKernel<<<blocksFor(shape.n * shape.c * shape.size), kThreads, 0,
                    s>>>(x, scale, bias, mean, var, y, shape, eps);
  return cudaGetLastError();
}

cudaError_t launchBatchNormGrad(const float *dy, const float *x,
                                const float *scale, const float *mean,
                                const float *var, float *dx, float *dscale,
                                float *dbias, ChannelShape shape, double eps,
                                cudaStream_t s) {
  batchNormGradSumsKernel<<<shape.c, kReduceThreads, 0, s>>>(
      dy, x, mean, var, dscale, dbias, shape, eps);
  batchNormGradInputKernel<<<blocksFor(shape.n * shape.c * shape.size),
                             kThreads, 0, s>>>(dy, x, scale, mean, var, dscale,
                                               dbias, dx, shape, eps);
  return cudaGetLastError();
}

cudaError_t launchRunningStats(float *runningMean, float *runningVar,
                               const float *mean, const float *var,
                               int64_t channels, double momentum, int64_t count,
                               cudaStream_t s) {
  runningStatsKernel<<<blocksFor(channels), kThreads, 0, s>>>(
      runningMean, runningVar, mean, var, channels, momentum,
      double(count) / double(count - 1));
  return cudaGetLastError();
}

cudaError_t launchCrossEntropy(const float *logits, const int64_t *labels,
                               double *rowLoss, float *loss, int64_t rows,
                               int64_t classes, int *bad, cudaStream_t s) {
  if (rows == 0)
    return cudaSuccess;
  crossEntropyRowsKernel<<<rows, kReduceThreads, 0, s>>>(logits, labels,
                                                         rowLoss, classes, bad);
  meanKernel<<<1, kReduceThreads, 0, s>>>(rowLoss, rows, loss);
  return cudaGetLastError();
}

cudaError_t launchCrossEntropyGrad(const float *logits, const int64_t *labels,
                                   const float *dloss, float *grad,
                                   int64_t rows, int64_t classes, int *bad,
                                   cudaStream_t s) {
  if (rows == 0)
    return cudaSuccess;
  crossEntropyGradKernel<<<rows, kReduceThreads, 0, s>>>(
      logits, labels, dloss, grad, rows, classes, bad);
  return cudaGetLastError();
}

cudaError_t launchSgd(float *param, const float *grad, float *buf, int64_t n,
                      double lr, double momentum, double decay,
                      cudaStream_t s) {
  sgdKernel<<<blocksFor(n), kThreads, 0, s>>>(param, grad, buf, n, float(lr),
                                              float(momentum), float(decay),
                                              decay != 0);
  return cudaGetLastError();
}

cudaError_t launchAdamW(float *param, const float *grad, float *m, float *v,
                        const int64_t *step, int64_t n, const AdamWParams &p,
                        cudaStream_t s) {
  adamWKernel<<<blocksFor(n), kThreads, 0, s>>>(param, grad, m, v, step, n, p);
  return cudaGetLastError();
}

cudaError_t launchCountStep(int64_t *step, cudaStream_t s) {
  countStepKernel<<<1, 1, 0, s>>>(step);
  return cudaGetLastError();
}

} // namespace partc::runtime::cuda
