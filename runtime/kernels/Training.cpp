//===- Training.cpp - Losses and optimizer steps --------------------------===//
//
// The CPU reference of what partc-differentiate and partc-apply-optimizer
// add to a graph. Optimizer steps update state in place: their outputs are
// the state buffers they also read, so every loop reads an element before
// writing it, and the arithmetic follows torch.optim's order of operations
// in the parameter's own precision.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/KernelRegistry.h"
#include "runtime/kernels/Philox.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace partc::runtime {

namespace {

/// Rows of the logits [..., C], their length (C) and their class count
/// (the attribute `classes`, C by default; the entries past it pad the row).
struct CrossEntropyShape {
  int64_t rows = 0, pitch = 0, classes = 0;
};

Status checkCrossEntropy(const KernelArgs &a, size_t numInputs,
                         CrossEntropyShape &shape) {
  PARTC_RETURN_IF_ERROR(checkArity(a, numInputs, numInputs, 1));
  const TensorType &logits = a.inputs[0], &labels = a.inputs[1];
  if (!isFloatType(logits.dtype) || logits.shape.empty())
    return Status::error("logits " + logits.str() +
                         " must be floats with a class dimension last");
  Shape rowShape(logits.shape.begin(), logits.shape.end() - 1);
  if (labels.dtype != DType::I64 || labels.shape != rowShape)
    return Status::error("labels " + labels.str() + " must be int64 of shape " +
                         shapeToString(rowShape));
  shape.pitch = logits.shape.back();
  shape.classes = a.attrs.getInt("classes", shape.pitch);
  if (shape.classes < 1 || shape.classes > shape.pitch)
    return Status::error("classes = " + std::to_string(shape.classes) +
                         " must be in [1, " + std::to_string(shape.pitch) +
                         "], the length of the rows of " + logits.str());
  shape.rows = numElements(rowShape);
  return Status();
}

/// Runs `fn(row, label)` over the rows, failing on a label outside the
/// classes as PyTorch does (it has no defined loss).
template <typename Fn>
Status forEachLabel(const TensorRef &labels, const CrossEntropyShape &s,
                    Fn &&fn) {
  const int64_t *label = labels.as<int64_t>();
  for (int64_t r = 0; r < s.rows; ++r) {
    if (label[r] < 0 || label[r] >= s.classes)
      return Status::error("label " + std::to_string(label[r]) + " of row " +
                           std::to_string(r) + " is outside the " +
                           std::to_string(s.classes) + " classes [0, " +
                           std::to_string(s.classes) + ")");
    fn(r, label[r]);
  }
  return Status();
}

template <typename T> double logSumExp(const T *row, int64_t n) {
  T max = -std::numeric_limits<T>::infinity();
  for (int64_t c = 0; c < n; ++c)
    max = row[c] > max || std::isnan(row[c]) ? row[c] : max;
  double sum = 0;
  for (int64_t c = 0; c < n; ++c)
    sum += std::exp(static_cast<double>(row[c]) - static_cast<double>(max));
  return static_cast<double>(max) + std::log(sum);
}

/// The loss (logits, labels) -> mean over rows of -log softmax[label], or
/// its gradient (logits, labels, dloss) -> (softmax - onehot) * dloss / rows.
class CrossEntropyKernel : public Kernel {
public:
  CrossEntropyKernel(CrossEntropyShape s, bool gradient)
      : s_(s), gradient_(gradient) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    Status status;
    dispatchFloat(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *logits = in[0].as<T>();
      T *result = out[0].as<T>();
      double rows = static_cast<double>(s_.rows), total = 0;
      double scale =
          gradient_ ? static_cast<double>(in[2].as<T>()[0]) / rows : 0.0;
      status = forEachLabel(in[1], s_, [&](int64_t r, int64_t label) {
        const T *row = logits + r * s_.pitch;
        double lse = logSumExp(row, s_.classes);
        if (!gradient_) {
          total += lse - static_cast<double>(row[label]);
          return;
        }
        T *g = result + r * s_.pitch;
        for (int64_t c = 0; c < s_.classes; ++c) {
          double p = std::exp(static_cast<double>(row[c]) - lse);
          g[c] = static_cast<T>((p - (c == label ? 1.0 : 0.0)) * scale);
        }
        std::fill(g + s_.classes, g + s_.pitch, T(0));
      });
      // The mean over no rows is NaN, as PyTorch's.
      if (!gradient_)
        result[0] = static_cast<T>(total / rows);
    });
    return status;
  }

private:
  CrossEntropyShape s_;
  bool gradient_;
};

/// The first `numLikeParam` operands of an optimizer step have the
/// parameter's type (the rest is the step counter); outputs are the
/// updated state, in operand order.
Status checkUpdate(const KernelArgs &a, size_t numInputs, size_t numLikeParam,
                   const std::vector<size_t> &updated) {
  PARTC_RETURN_IF_ERROR(checkArity(a, numInputs, numInputs, updated.size()));
  const TensorType &param = a.inputs[0];
  if (!isFloatType(param.dtype))
    return Status::error("updates " + param.str() + "; parameters are floats");
  for (size_t i = 1; i < numLikeParam; ++i)
    if (a.inputs[i] != param)
      return Status::error("operand " + std::to_string(i) + " " +
                           a.inputs[i].str() +
                           " does not match the parameter " + param.str());
  for (size_t o = 0; o < updated.size(); ++o)
    if (a.outputs[o] != a.inputs[updated[o]])
      return Status::error("output " + std::to_string(o) + " " +
                           a.outputs[o].str() + " is not the updated operand " +
                           std::to_string(updated[o]));
  return Status();
}

class SgdKernel : public Kernel {
public:
  SgdKernel(double lr, double momentum, double weightDecay)
      : lr_(lr), momentum_(momentum), weightDecay_(weightDecay) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    dispatchFloat(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *param = in[0].as<T>(), *grad = in[1].as<T>();
      const T *buf = momentum_ != 0 ? in[2].as<T>() : nullptr;
      T *newParam = out[0].as<T>();
      T *newBuf = momentum_ != 0 ? out[1].as<T>() : nullptr;
      T lr = static_cast<T>(lr_), momentum = static_cast<T>(momentum_),
        decay = static_cast<T>(weightDecay_);
      int64_t n = in[0].type.numElements();
      for (int64_t i = 0; i < n; ++i) {
        T g = grad[i];
        if (weightDecay_ != 0)
          g += decay * param[i];
        if (newBuf) {
          g = buf[i] * momentum + g;
          newBuf[i] = g;
        }
        newParam[i] = param[i] - lr * g;
      }
    });
    return Status();
  }

private:
  double lr_, momentum_, weightDecay_;
};

class AdamWKernel : public Kernel {
public:
  AdamWKernel(double lr, double beta1, double beta2, double eps,
              double weightDecay)
      : lr_(lr), beta1_(beta1), beta2_(beta2), eps_(eps),
        weightDecay_(weightDecay) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    int64_t step = in[4].as<int64_t>()[0];
    if (step < 0)
      return Status::error("the step counter holds " + std::to_string(step));
    double t = static_cast<double>(step) + 1;
    double stepSize = lr_ / (1 - std::pow(beta1_, t));
    double correction2 = std::sqrt(1 - std::pow(beta2_, t));
    dispatchFloat(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *param = in[0].as<T>(), *grad = in[1].as<T>();
      const T *m = in[2].as<T>(), *v = in[3].as<T>();
      T *newParam = out[0].as<T>(), *newM = out[1].as<T>(),
        *newV = out[2].as<T>();
      T decay = static_cast<T>(1 - lr_ * weightDecay_);
      T b1 = static_cast<T>(1 - beta1_), b2 = static_cast<T>(beta2_),
        c2 = static_cast<T>(1 - beta2_), eps = static_cast<T>(eps_),
        size = static_cast<T>(stepSize), corr = static_cast<T>(correction2);
      int64_t n = in[0].type.numElements();
      for (int64_t i = 0; i < n; ++i) {
        T g = grad[i];
        T p = param[i] * decay;
        T mi = m[i] + b1 * (g - m[i]);
        T vi = v[i] * b2 + c2 * g * g;
        T denom = std::sqrt(vi) / corr + eps;
        newM[i] = mi;
        newV[i] = vi;
        newParam[i] = p - size * (mi / denom);
      }
    });
    return Status();
  }

private:
  double lr_, beta1_, beta2_, eps_, weightDecay_;
};

class CountStepKernel : public Kernel {
public:
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    int64_t step = in[0].as<int64_t>()[0];
    if (step == std::numeric_limits<int64_t>::max())
      return Status::error("the step counter overflows");
    out[0].as<int64_t>()[0] = step + 1;
    return Status();
  }
};

/// ONNX Dropout in training mode (graph.dropout): element i kept when
/// Philox's word k % 4 for counter (k / 4, stream, step) passes the ratio,
/// k = offset + i (a slice of the batch numbers its elements as the whole
/// batch does).
class DropoutKernel : public Kernel {
public:
  DropoutKernel(double ratio, int64_t stream, int64_t offset)
      : ratio_(ratio), stream_(stream), offset_(offset),
        threshold_(philox::dropoutThreshold(ratio)) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    int64_t step = in[1].as<int64_t>()[0], seed = in[2].as<int64_t>()[0];
    int64_t n = in[0].type.numElements();
    dispatchFloat(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *x = in[0].as<T>();
      T *y = out[0].as<T>();
      T scale = static_cast<T>(1.0 / (1.0 - ratio_));
      for (int64_t g = offset_ / 4; g * 4 < offset_ + n; ++g) {
        philox::Words r =
            philox::dropoutWords(uint64_t(g), stream_, step, seed);
        for (int64_t j = 0; j < 4; ++j) {
          int64_t i = g * 4 + j - offset_;
          if (i >= 0 && i < n)
            y[i] =
                philox::dropoutKeeps(r.w[j], threshold_) ? x[i] * scale : T(0);
        }
      }
    });
    return Status();
  }

private:
  double ratio_;
  int64_t stream_, offset_;
  uint32_t threshold_;
};

Status checkStepCounter(const TensorType &t) {
  if (t.dtype != DType::I64 || !t.shape.empty())
    return Status::error("the step counter " + t.str() +
                         " must be an int64 scalar");
  return Status();
}

} // namespace

void registerTrainingKernels(KernelTable &t) {
  t["softmax_cross_entropy"] = [](const KernelArgs &a,
                                  std::unique_ptr<Kernel> &k) -> Status {
    CrossEntropyShape s;
    PARTC_RETURN_IF_ERROR(checkCrossEntropy(a, 2, s));
    if (a.outputs[0] != TensorType{a.inputs[0].dtype, {}})
      return Status::error("the loss " + a.outputs[0].str() +
                           " must be a scalar of the logits' type");
    k = std::make_unique<CrossEntropyKernel>(s, /*gradient=*/false);
    return Status();
  };
  t["softmax_cross_entropy_grad"] = [](const KernelArgs &a,
                                       std::unique_ptr<Kernel> &k) -> Status {
    CrossEntropyShape s;
    PARTC_RETURN_IF_ERROR(checkCrossEntropy(a, 3, s));
    if (a.inputs[2] != TensorType{a.inputs[0].dtype, {}} ||
        a.outputs[0] != a.inputs[0])
      return Status::error("expects a scalar dloss and gives the logits' type");
    k = std::make_unique<CrossEntropyKernel>(s, /*gradient=*/true);
    return Status();
  };
  t["sgd_update"] = [](const KernelArgs &a,
                       std::unique_ptr<Kernel> &k) -> Status {
    double momentum = a.attrs.getFloat("momentum");
    double lr = a.attrs.getFloat("lr");
    double decay = a.attrs.getFloat("weight_decay");
    if (momentum != 0)
      PARTC_RETURN_IF_ERROR(checkUpdate(a, 3, 3, {0, 2}));
    else
      PARTC_RETURN_IF_ERROR(checkUpdate(a, 2, 2, {0}));
    k = std::make_unique<SgdKernel>(lr, momentum, decay);
    return Status();
  };
  t["adamw_update"] = [](const KernelArgs &a,
                         std::unique_ptr<Kernel> &k) -> Status {
    double lr = a.attrs.getFloat("lr"), beta1 = a.attrs.getFloat("beta1"),
           beta2 = a.attrs.getFloat("beta2"), eps = a.attrs.getFloat("eps"),
           decay = a.attrs.getFloat("weight_decay");
    PARTC_RETURN_IF_ERROR(checkUpdate(a, 5, 4, {0, 2, 3}));
    PARTC_RETURN_IF_ERROR(checkStepCounter(a.inputs[4]));
    if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1))
      return Status::error("betas must be in [0, 1)");
    k = std::make_unique<AdamWKernel>(lr, beta1, beta2, eps, decay);
    return Status();
  };
  t["dropout"] = [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 3, 3, 1));
    double ratio = 0;
    int64_t stream = 0;
    PARTC_RETURN_IF_ERROR(a.attrs.requireFloat("ratio", ratio));
    PARTC_RETURN_IF_ERROR(a.attrs.requireInt("stream", stream));
    DType dtype = a.inputs[0].dtype;
    if ((dtype != DType::F32 && dtype != DType::F64) ||
        a.outputs[0] != a.inputs[0])
      return Status::error("input " + a.inputs[0].str() + " and output " +
                           a.outputs[0].str() +
                           " must be f32 or f64, of one type");
    for (size_t i : {1, 2})
      if (a.inputs[i] != TensorType{DType::I64, {}})
        return Status::error(std::string(i == 1 ? "step " : "seed ") +
                             a.inputs[i].str() + " must be an int64 scalar");
    if (!(ratio >= 0 && ratio < 1))
      return Status::error("ratio " + std::to_string(ratio) +
                           " must be in [0, 1)");
    // Philox's counter numbers 2^32 groups of four elements.
    int64_t offset = a.attrs.getInt("offset", 0);
    if (offset < 0 || a.inputs[0].numElements() > (int64_t(1) << 34) - offset)
      return Status::error("offset " + std::to_string(offset) + " and " +
                           std::to_string(a.inputs[0].numElements()) +
                           " elements reach past the generator's 2^34");
    k = std::make_unique<DropoutKernel>(ratio, stream, offset);
    return Status();
  };
  t["count_step"] = [](const KernelArgs &a,
                       std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
    PARTC_RETURN_IF_ERROR(checkStepCounter(a.inputs[0]));
    PARTC_RETURN_IF_ERROR(checkStepCounter(a.outputs[0]));
    k = std::make_unique<CountStepKernel>();
    return Status();
  };
}

} // namespace partc::runtime
