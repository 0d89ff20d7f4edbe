//===- LinearAlgebra.cpp - MatMul and Gemm through CBLAS ------------------===//
#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/ElementwiseOps.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/StridedMatMul.h"

#include <cblas.h>
#include <cmath>
#include <cstring>

namespace partc::runtime {

SingleThreadedBlas::SingleThreadedBlas()
    : previous_(openblas_get_num_threads()) {
  openblas_set_num_threads(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
  openblas_set_num_threads(previous_);
}

namespace {

template <typename T>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha,
          const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,
          int64_t ldc) {
  CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
  else if constexpr (std::is_same_v<T, double>)
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
  else {
    // Integer matmul: a plain triple loop (rare, small) that wraps around
    // on overflow as numpy's does.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc = wrappingAdd(
              acc, wrappingMul(transA ? a[p * lda + i] : a[i * lda + p],
                               transB ? b[j * ldb + p] : b[p * ldb + j]));
        T scaled = wrappingMul(alpha, acc);
        c[i * ldc + j] =
            beta == T(0)
                ? scaled
                : wrappingAdd(scaled, wrappingMul(beta, c[i * ldc + j]));
      }
  }
}

/// A product's fused activation on its `n` results.
template <class T>
void applyActivation(FusedActivation activation, T *y, int64_t n) {
  if (activation == FusedActivation::Relu)
    for (int64_t i = 0; i < n; ++i)
      y[i] = ew::Relu::apply(y[i], T(), T());
  if constexpr (std::is_floating_point_v<T>)
    if (activation == FusedActivation::GeluTanh)
      for (int64_t i = 0; i < n; ++i)
        y[i] = ew::GeluTanh::apply(y[i], T(), T());
}

/// gelu_tanh computes in floating point only.
Status checkActivation(FusedActivation activation, DType type) {
  if (activation == FusedActivation::GeluTanh && !isFloatType(type))
    return Status::error("a fused gelu_tanh needs a floating-point result");
  return Status();
}

/// numpy.matmul: 1-D operands are promoted, batch dimensions broadcast.
class MatMulKernel : public Kernel {
public:
  MatMulKernel(const Shape &a, const Shape &b, const Shape &out, bool hasBias,
               FusedActivation activation, bool hasAddend = false)
      : out_(out), hasBias_(hasBias), hasAddend_(hasAddend),
        activation_(activation) {
    Shape aa = a, bb = b;
    if (aa.size() == 1)
      aa.insert(aa.begin(), 1);
    if (bb.size() == 1)
      bb.push_back(1);
    m_ = aa[aa.size() - 2];
    k_ = aa.back();
    n_ = bb.back();
    Shape aBatch(aa.begin(), aa.end() - 2), bBatch(bb.begin(), bb.end() - 2);
    broadcastShapes(aBatch, bBatch, batch_);
    strides_ = {broadcastStrides(aBatch, batch_),
                broadcastStrides(bBatch, batch_)};
  }
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    dispatchType(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        const T *a = in[0].as<T>();
        const T *b = in[1].as<T>();
        T *c = out[0].as<T>();
        // Each batch's matrices, found as the batch runs: a table made at
        // load would cost as much as the batch count, however large.
        auto one = [&](int64_t i, int64_t aBatch, int64_t bBatch) {
          gemm<T>(false, false, m_, n_, k_, T(1), a + aBatch * m_ * k_, k_,
                  b + bBatch * k_ * n_, n_, T(0), c + i * m_ * n_, n_);
        };
        if (batch_.empty())
          one(0, 0, 0);
        else
          broadcastLoop<2>(batch_, strides_, [&](int64_t i, const auto &idx) {
            one(i, idx[0], idx[1]);
          });
        int64_t total = out[0].type.numElements();
        if (hasBias_) {
          const T *bias = in[2].as<T>();
          for (int64_t i = 0; i < total; ++i)
            c[i] += bias[i % n_];
        }
        if (hasAddend_) {
          const T *addend = in[3].as<T>();
          for (int64_t i = 0; i < total; ++i)
            c[i] += addend[i];
        }
        applyActivation(activation_, c, total);
      }
    });
    return Status();
  }

private:
  Shape out_, batch_;
  bool hasBias_, hasAddend_;
  FusedActivation activation_;
  int64_t m_, n_, k_;
  std::array<std::vector<int64_t>, 2> strides_;
};

/// ONNX Gemm: Y = alpha * op(A) * op(B) + beta * C, C broadcast to [M, N].
class GemmKernel : public Kernel {
public:
  GemmKernel(bool ta, bool tb, double alpha, double beta, int64_t m, int64_t n,
             int64_t k, const Shape *cShape, FusedActivation activation)
      : ta_(ta), tb_(tb), alpha_(alpha), beta_(beta), m_(m), n_(n), k_(k),
        activation_(activation) {
    if (cShape) {
      hasC_ = true;
      cStrides_[0] = broadcastStrides(*cShape, {m, n});
    }
  }
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    dispatchType(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        T *y = out[0].as<T>();
        T beta = T(0);
        if (hasC_ && beta_ != 0.0) {
          const T *c = in[2].as<T>();
          broadcastLoop<1>(
              {m_, n_}, cStrides_,
              [&](int64_t o, const auto &idx) { y[o] = c[idx[0]]; });
          beta = static_cast<T>(beta_);
        }
        gemm<T>(ta_, tb_, m_, n_, k_, static_cast<T>(alpha_), in[0].as<T>(),
                ta_ ? m_ : k_, in[1].as<T>(), tb_ ? k_ : n_, beta, y, n_);
        applyActivation(activation_, y, m_ * n_);
      }
    });
    return Status();
  }

private:
  bool ta_, tb_;
  double alpha_, beta_;
  int64_t m_, n_, k_;
  bool hasC_ = false;
  std::array<std::vector<int64_t>, 1> cStrides_;
  FusedActivation activation_;
};

/// strided_matmul, kept simple as the reference: the operand views are
/// gathered into contiguous matrices, multiplied as numpy.matmul and the
/// scaled result scattered through its permutation.
class StridedMatMulKernel : public Kernel {
public:
  StridedMatMulKernel(strided::View lhs, strided::View rhs,
                      strided::View result, float alpha)
      : lhs_(std::move(lhs)), rhs_(std::move(rhs)), result_(std::move(result)),
        alpha_(alpha), product_(lhs_.shape, rhs_.shape, result_.shape, false,
                                FusedActivation::None) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    std::vector<float> a = gather(lhs_, in[0].as<float>());
    std::vector<float> b = gather(rhs_, in[1].as<float>());
    std::vector<float> c(numElements(result_.shape));
    PARTC_RETURN_IF_ERROR(
        product_.run({{a.data(), {DType::F32, lhs_.shape}},
                      {b.data(), {DType::F32, rhs_.shape}}},
                     {{c.data(), {DType::F32, result_.shape}}}));
    float *y = out[0].as<float>();
    broadcastLoop<1>(
        result_.shape, {result_.strides},
        [&](int64_t o, const auto &idx) { y[idx[0]] = alpha_ * c[o]; });
    return Status();
  }

private:
  static std::vector<float> gather(const strided::View &v, const float *x) {
    std::vector<float> dense(numElements(v.shape));
    broadcastLoop<1>(v.shape, {v.strides}, [&](int64_t o, const auto &idx) {
      dense[o] = x[v.offset + idx[0]];
    });
    return dense;
  }
  strided::View lhs_, rhs_, result_;
  float alpha_;
  MatMulKernel product_;
};

/// graph.attention as the ops it fuses, kept simple as the reference: the
/// scores are stored (f32), the softmax is graph.softmax's kernel.
class AttentionKernel : public Kernel {
public:
  AttentionKernel(const strided::Attention &att,
                  std::unique_ptr<Kernel> softmax)
      : scores_(att.scores),
        product_(att.q, att.k, strided::contiguous(att.scores),
                 static_cast<float>(att.scale)),
        softmax_(std::move(softmax)),
        weighted_(strided::contiguous(att.scores), att.v, att.result, 1.f),
        causal_(att.causal) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    TensorType type{DType::F32, scores_};
    std::vector<float> s(numElements(scores_)), p(s.size());
    PARTC_RETURN_IF_ERROR(product_.run({in[0], in[1]}, {{s.data(), type}}));
    if (causal_) {
      // -inf added, as a bias hiding them would add it.
      int64_t rows = scores_[scores_.size() - 2], cols = scores_.back();
      for (size_t i = 0; i < s.size(); ++i) {
        int64_t col = static_cast<int64_t>(i) % cols,
                row = static_cast<int64_t>(i) / cols % rows;
        if (col > row)
          s[i] += -INFINITY;
      }
    }
    std::vector<TensorRef> softmaxIn = {{s.data(), type}};
    if (in.size() == 4)
      softmaxIn.push_back(in[3]);
    PARTC_RETURN_IF_ERROR(softmax_->run(softmaxIn, {{p.data(), type}}));
    return weighted_.run({{p.data(), type}, in[2]}, out);
  }

private:
  std::vector<int64_t> scores_;
  StridedMatMulKernel product_;
  std::unique_ptr<Kernel> softmax_;
  StridedMatMulKernel weighted_;
  bool causal_;
};

bool isMatrixType(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::I32 ||
         t == DType::I64 || t == DType::U32 || t == DType::U64;
}

} // namespace

Status strided::parseKernel(const KernelArgs &a, View &lhs, View &rhs,
                            View &result, double &alpha) {
  PARTC_RETURN_IF_ERROR(checkArity(a, 2, 2, 1));
  // 16-bit operands reach the GPU kernels only (the CPU backend widens
  // them first).
  DType type = a.outputs[0].dtype;
  for (const TensorType *t : {&a.inputs[0], &a.inputs[1], &a.outputs[0]})
    if (t->dtype != type ||
        (type != DType::F32 && type != DType::BF16 && type != DType::F16))
      return Status::error("supports f32, bf16 or f16 operands of one type, "
                           "got " +
                           t->str());
  lhs = {a.attrs.getInts("lhs_shape"), a.attrs.getInts("lhs_strides"),
         a.attrs.getInt("lhs_offset")};
  rhs = {a.attrs.getInts("rhs_shape"), a.attrs.getInts("rhs_strides"),
         a.attrs.getInt("rhs_offset")};
  std::vector<int64_t> perm = a.attrs.getInts("perm");
  std::string error = checkOperands(lhs, a.inputs[0].numElements(), rhs,
                                    a.inputs[1].numElements(), perm,
                                    a.outputs[0].shape, result.shape);
  if (!error.empty())
    return Status::error(error);
  result.strides = resultStrides(result.shape, perm);
  result.offset = 0;
  alpha = a.attrs.getFloat("alpha");
  return Status();
}

Status strided::parseAttention(const KernelArgs &a, Attention &att) {
  PARTC_RETURN_IF_ERROR(checkArity(a, 3, 4, 1));
  // 16-bit operands reach the GPU kernels only (the CPU backend widens
  // them first).
  DType type = a.outputs[0].dtype;
  for (const TensorType &t : a.inputs)
    if (t.dtype != type ||
        (type != DType::F32 && type != DType::BF16 && type != DType::F16))
      return Status::error("supports f32, bf16 or f16 operands of one type, "
                           "got " +
                           t.str());
  auto view = [&](const std::string &prefix) {
    return View{a.attrs.getInts(prefix + "_shape"),
                a.attrs.getInts(prefix + "_strides"),
                a.attrs.getInt(prefix + "_offset")};
  };
  att.q = view("q");
  att.k = view("k");
  att.v = view("v");
  std::vector<int64_t> perm = a.attrs.getInts("perm");
  std::string error = checkAttention(
      att.q, a.inputs[0].numElements(), att.k, a.inputs[1].numElements(), att.v,
      a.inputs[2].numElements(), perm, a.outputs[0].shape, att.scores,
      att.result.shape);
  if (!error.empty())
    return Status::error(error);
  Shape ignored;
  if (a.inputs.size() == 4 &&
      (!broadcastShapes(a.inputs[3].shape, att.scores, ignored) ||
       ignored != att.scores))
    return Status::error("bias " + a.inputs[3].str() +
                         " does not broadcast to the scores");
  att.result.strides = resultStrides(att.result.shape, perm);
  att.result.offset = 0;
  att.scale = a.attrs.getFloat("scale");
  att.nanToZero = a.attrs.getInt("nan_to_zero") != 0;
  att.causal = a.attrs.getInt("causal", 0) != 0;
  return Status();
}

void registerLinearAlgebraKernels(KernelTable &t) {
  t["strided_matmul"] = [](const KernelArgs &a,
                           std::unique_ptr<Kernel> &k) -> Status {
    strided::View lhs, rhs, result;
    double alpha;
    PARTC_RETURN_IF_ERROR(strided::parseKernel(a, lhs, rhs, result, alpha));
    k = std::make_unique<StridedMatMulKernel>(std::move(lhs), std::move(rhs),
                                              std::move(result),
                                              static_cast<float>(alpha));
    return Status();
  };
  t["attention"] = [](const KernelArgs &a,
                      std::unique_ptr<Kernel> &k) -> Status {
    strided::Attention att;
    PARTC_RETURN_IF_ERROR(strided::parseAttention(a, att));
    if (a.outputs[0].dtype != DType::F32)
      return Status::error("the CPU kernel takes f32 operands (16-bit ones "
                           "are widened before it)");
    AttrMap softmaxAttrs;
    softmaxAttrs.set(
        "axis",
        AttrValue::ofInts({static_cast<int64_t>(att.scores.size()) - 1}));
    softmaxAttrs.set("nan_to_zero", AttrValue::ofInts({att.nanToZero}));
    std::vector<TensorType> softmaxIn = {{DType::F32, att.scores}};
    if (a.inputs.size() == 4)
      softmaxIn.push_back(a.inputs[3]);
    std::unique_ptr<Kernel> softmax;
    PARTC_RETURN_IF_ERROR(createCpuKernel("softmax", softmaxAttrs, softmaxIn,
                                          {{DType::F32, att.scores}}, softmax));
    k = std::make_unique<AttentionKernel>(att, std::move(softmax));
    return Status();
  };
  t["matmul"] = [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 2, 4, 1));
    const TensorType &x = a.inputs[0], &y = a.inputs[1], &z = a.outputs[0];
    if (x.dtype != y.dtype || x.dtype != z.dtype || !isMatrixType(x.dtype))
      return Status::error("unsupported operand types " + x.str() + ", " +
                           y.str());
    if (x.shape.empty() || y.shape.empty())
      return Status::error("operands must have rank >= 1");
    Shape aa = x.shape, bb = y.shape;
    bool aVec = aa.size() == 1, bVec = bb.size() == 1;
    if (aVec)
      aa.insert(aa.begin(), 1);
    if (bVec)
      bb.push_back(1);
    if (aa.back() != bb[bb.size() - 2])
      return Status::error("contraction dimensions of " + x.str() + " and " +
                           y.str() + " differ");
    Shape batch;
    if (!broadcastShapes(Shape(aa.begin(), aa.end() - 2),
                         Shape(bb.begin(), bb.end() - 2), batch))
      return Status::error("batch dimensions do not broadcast");
    Shape expect = batch;
    if (!aVec)
      expect.push_back(aa[aa.size() - 2]);
    if (!bVec)
      expect.push_back(bb.back());
    if (expect != z.shape)
      return Status::error("result " + z.str() + " should have shape " +
                           shapeToString(expect));
    bool hasBias = a.inputs.size() >= 3;
    bool hasAddend = a.inputs.size() == 4;
    if (hasAddend && a.inputs[3] != z)
      return Status::error("addend " + a.inputs[3].str() +
                           " must have the result's type " + z.str());
    if (hasBias && (bVec || a.inputs[2].dtype != x.dtype ||
                    a.inputs[2].numElements() != bb.back()))
      return Status::error("bias " + a.inputs[2].str() +
                           " must hold one value per result column");
    FusedActivation activation;
    PARTC_RETURN_IF_ERROR(fusedActivation(a.attrs, activation));
    PARTC_RETURN_IF_ERROR(checkActivation(activation, z.dtype));
    k = std::make_unique<MatMulKernel>(x.shape, y.shape, z.shape, hasBias,
                                       activation, hasAddend);
    return Status();
  };
  t["gemm"] = [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 2, 3, 1));
    const TensorType &x = a.inputs[0], &y = a.inputs[1], &z = a.outputs[0];
    if (x.shape.size() != 2 || y.shape.size() != 2 || z.shape.size() != 2)
      return Status::error("operands must be matrices");
    if (x.dtype != y.dtype || x.dtype != z.dtype || !isMatrixType(x.dtype))
      return Status::error("unsupported operand types");
    bool ta = a.attrs.getInt("trans_a") != 0;
    bool tb = a.attrs.getInt("trans_b") != 0;
    int64_t m = ta ? x.shape[1] : x.shape[0];
    int64_t kk = ta ? x.shape[0] : x.shape[1];
    int64_t kb = tb ? y.shape[1] : y.shape[0];
    int64_t n = tb ? y.shape[0] : y.shape[1];
    if (kk != kb || z.shape != Shape{m, n})
      return Status::error("shapes " + x.str() + ", " + y.str() + " -> " +
                           z.str() + " do not match");
    const Shape *c = nullptr;
    if (a.inputs.size() == 3) {
      Shape s;
      if (a.inputs[2].dtype != x.dtype ||
          !broadcastShapes(a.inputs[2].shape, {m, n}, s) || s != Shape{m, n})
        return Status::error("bias " + a.inputs[2].str() +
                             " does not broadcast to the result");
      c = &a.inputs[2].shape;
    }
    FusedActivation activation;
    PARTC_RETURN_IF_ERROR(fusedActivation(a.attrs, activation));
    PARTC_RETURN_IF_ERROR(checkActivation(activation, z.dtype));
    k = std::make_unique<GemmKernel>(ta, tb, a.attrs.getFloat("alpha"),
                                     a.attrs.getFloat("beta"), m, n, kk, c,
                                     activation);
    return Status();
  };
}

} // namespace partc::runtime
