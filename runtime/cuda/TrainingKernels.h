//===- TrainingKernels.h - Launchers of Training.cu -------------*- C++ -*-===//
//
// Included by TrainingKernels.cpp (the factories) and Training.cu only, so
// that the other kernel families do not rebuild when training grows.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_TRAININGKERNELS_H
#define PARTC_RUNTIME_CUDA_TRAININGKERNELS_H

#include "runtime/cuda/CudaKernels.h"

namespace partc::runtime::cuda {

/// [n, c, size] around channel dimension 1, or with `last`, [n, size, c].
struct ChannelShape {
  int64_t n, c, size;
  bool last = false;
};

struct AdamWParams {
  double lr, beta1, beta2, eps, weightDecay;
};

/// Scratch (device memory) launchPoolGrad needs: max pooling's argmax per
/// window.
size_t poolGradScratchBytes(const PoolParams &p);
/// Max (first maximum) or average pooling's input gradient, every element
/// of `dx` written (gathered, so the same at every run).
cudaError_t launchPoolGrad(const float *dy, const float *x, float *dx,
                           void *scratch, const PoolParams &p, cudaStream_t s);
/// Scratch (device memory) the two batch-norm launchers need.
size_t batchNormScratchBytes(const ChannelShape &shape);
/// Batch statistics (mean, biased variance) and the normalized output,
/// plus `addend` (or null) and then ReLU where `relu`.
cudaError_t launchBatchNormTrain(const float *x, const float *scale,
                                 const float *bias, const float *addend,
                                 bool relu, float *y, float *mean, float *var,
                                 ChannelShape shape, double eps, void *scratch,
                                 cudaStream_t s);
/// The gradients of batch_norm_train; with `reluBias` (the norm's bias,
/// else null), of its output after a fused ReLU.
cudaError_t launchBatchNormGrad(const float *dy, const float *x,
                                const float *scale, const float *mean,
                                const float *var, const float *reluBias,
                                float *dx, float *dscale, float *dbias,
                                ChannelShape shape, double eps, void *scratch,
                                cudaStream_t s);
/// Scratch launchLayerNormGrad needs: column partial sums and each row's
/// mean and 1/std.
size_t layerNormGradScratchBytes(int64_t rows, int64_t cols);
/// layer_norm_grad over `rows` rows of `cols` elements, scale of `cols`;
/// `addend` (null or the input's shape) added to the input's gradient.
cudaError_t launchLayerNormGrad(const float *dy, const float *x,
                                const float *scale, const float *addend,
                                float *dx, float *dscale, float *dbias,
                                int64_t rows, int64_t cols, double eps,
                                void *scratch, cudaStream_t s);
/// A dropout folded into softmax_grad (graph.dropout's attributes, and
/// its step and seed on the device).
struct SoftmaxGradDropout {
  const int64_t *step, *seed;
  double ratio;
  int64_t stream, offset;
};
/// softmax_grad: y * (dy - sum(dy * y)) along an axis of `count` elements
/// `inner` apart, for `outer` rows; dy read through `dropout` if given.
cudaError_t launchSoftmaxGrad(const float *dy, const float *y, float *dx,
                              int64_t outer, int64_t count, int64_t inner,
                              const SoftmaxGradDropout *dropout,
                              cudaStream_t s);
cudaError_t launchRunningStats(float *runningMean, float *runningVar,
                               const float *mean, const float *var,
                               int64_t channels, double momentum, int64_t count,
                               cudaStream_t s);
/// The mean loss over `rows` of `pitch` floats whose first `classes` are
/// the classes, through `rowLoss` (rows doubles of scratch); sets *bad to 1
/// where a label is outside [0, classes).
cudaError_t launchCrossEntropy(const float *logits, const int64_t *labels,
                               double *rowLoss, float *loss, int64_t rows,
                               int64_t pitch, int64_t classes, int *bad,
                               cudaStream_t s);
/// The loss's gradient, zero past the classes of each row.
cudaError_t launchCrossEntropyGrad(const float *logits, const int64_t *labels,
                                   const float *dloss, float *grad,
                                   int64_t rows, int64_t pitch, int64_t classes,
                                   int *bad, cudaStream_t s);
/// In place: `param` and `buf` (null without momentum) are state.
cudaError_t launchSgd(float *param, const float *grad, float *buf, int64_t n,
                      double lr, double momentum, double decay, cudaStream_t s);
cudaError_t launchAdamW(float *param, const float *grad, float *m, float *v,
                        const int64_t *step, int64_t n, const AdamWParams &p,
                        cudaStream_t s);
cudaError_t launchCountStep(int64_t *step, cudaStream_t s);
/// The most inputs launchMeanOf averages.
constexpr int kMaxMeanSources = 8;
/// target = mean of `count` (<= kMaxMeanSources) device buffers of n floats
/// (on this or peer GPUs), summed in order and then divided.
cudaError_t launchMeanOf(const float *const *sources, int count, float *target,
                         int64_t n, cudaStream_t s);
/// graph.dropout (runtime/kernels/Philox.h): step and seed on the device;
/// element i is the whole batch's element offset + i.
cudaError_t launchDropout(const float *x, float *y, int64_t n, int64_t offset,
                          const int64_t *step, const int64_t *seed,
                          int64_t stream, double ratio, cudaStream_t s);

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_TRAININGKERNELS_H
