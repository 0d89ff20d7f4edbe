//===- Elementwise.cpp - Unary, binary (broadcasting), where, cast --------===//
#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/FusedElementwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace partc::runtime {
namespace {

//===----------------------------------------------------------------------===//
// Unary (formulas in ElementwiseOps.h)
//===----------------------------------------------------------------------===//

class UnaryKernel : public Kernel {
public:
  UnaryKernel(ew::Step step, const double (&params)[2])
      : step_(step), p_(params[0]), q_(params[1]) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    int64_t n = in[0].type.numElements();
    dispatchType(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        const T *x = in[0].as<T>();
        T *y = out[0].as<T>();
        if (step_ == ew::Step::Relu) {
          // The hottest unary op in CNNs gets a loop the compiler vectorizes.
          for (int64_t i = 0; i < n; ++i)
            y[i] = ew::Relu::apply<T>(x[i], T(0), T(0));
          return;
        }
        if constexpr (std::is_floating_point_v<T>) {
          T p = static_cast<T>(p_), q = static_cast<T>(q_);
          for (int64_t i = 0; i < n; ++i)
            y[i] = ew::applyStep<T>(step_, x[i], x[i], p, q);
        } else {
          // Clip's infinite default bounds saturate to the type's range.
          T p = saturateCast<T>(p_), q = saturateCast<T>(q_);
          for (int64_t i = 0; i < n; ++i)
            y[i] = ew::applyIntegerStep<T>(step_, x[i], p, q);
        }
      }
    });
    return Status();
  }

private:
  ew::Step step_;
  double p_, q_;
};

/// Logical not, the one unary op on bool.
class NotKernel : public Kernel {
public:
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    int64_t n = in[0].type.numElements();
    // Bytes, not bool: any non-zero byte is true, as in numpy.
    const uint8_t *x = in[0].as<uint8_t>();
    bool *y = out[0].as<bool>();
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] == 0;
    return Status();
  }
};

Status checkSameType(const KernelArgs &a) {
  PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
  if (a.inputs[0] != a.outputs[0])
    return Status::error("input " + a.inputs[0].str() + " and output " +
                         a.outputs[0].str() + " differ");
  return Status();
}

Status createUnary(const KernelArgs &a, std::unique_ptr<Kernel> &k) {
  PARTC_RETURN_IF_ERROR(checkSameType(a));
  ew::Step step;
  double params[2];
  PARTC_RETURN_IF_ERROR(fused::stepOfKernel(a.name, a.attrs, step, params));
  DType t = a.inputs[0].dtype;
  bool integer = !isFloatType(t) && t != DType::Bool;
  if (!(t == DType::F32 || t == DType::F64 ||
        (integer && ew::info(step).integers)))
    return Status::error(std::string("element type ") + dtypeName(t) +
                         " is not supported");
  k = std::make_unique<UnaryKernel>(step, params);
  return Status();
}

//===----------------------------------------------------------------------===//
// Binary with broadcasting
//===----------------------------------------------------------------------===//

bool hasCppType(DType t) {
  return dtypeSize(t) != 0 && t != DType::F16 && t != DType::BF16;
}

enum class BinaryOp {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Min,
  Max,
  // Backward rules: floats only.
  ReluGrad,
  SigmoidGrad,
  TanhGrad,
  GeluGrad,
  GeluTanhGrad,
  Mod,
  Equal,
  Less,
  Greater,
  LessOrEqual,
  GreaterOrEqual,
  And,
  Or,
  Xor
};

bool isComparison(BinaryOp op) {
  return op == BinaryOp::Equal || op == BinaryOp::Less ||
         op == BinaryOp::Greater || op == BinaryOp::LessOrEqual ||
         op == BinaryOp::GreaterOrEqual;
}
bool isLogical(BinaryOp op) {
  return op == BinaryOp::And || op == BinaryOp::Or || op == BinaryOp::Xor;
}

template <typename T> T applyArith(BinaryOp op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (op <= BinaryOp::GeluTanhGrad)
      return ew::applyStep<T>(
          static_cast<ew::Step>(static_cast<int>(ew::kFirstBinary) +
                                static_cast<int>(op)),
          a, b, T(0), T(0));
  switch (op) {
  case BinaryOp::Add:
    return wrappingAdd(a, b);
  case BinaryOp::Sub:
    return wrappingSub(a, b);
  case BinaryOp::Mul:
    return wrappingMul(a, b);
  case BinaryOp::Div:
    if constexpr (std::is_integral_v<T>) {
      if (b == 0)
        return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) // the lowest value / -1 overflows: wrap
          return wrappingSub(T(0), a);
      return static_cast<T>(a / b);
    } else {
      return a / b;
    }
  case BinaryOp::Pow:
    return saturateCast<T>(
        std::pow(static_cast<double>(a), static_cast<double>(b)));
  case BinaryOp::Min:
    return a < b ? a : b;
  case BinaryOp::Max:
    return a > b ? a : b;
  case BinaryOp::Mod:
    if constexpr (std::is_integral_v<T>) {
      if (b == 0)
        return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) // the lowest value % -1 overflows; the result is 0
          return T(0);
      T r = static_cast<T>(a % b);
      if constexpr (std::is_signed_v<T>)
        if (r != 0 && ((r < 0) != (b < 0)))
          r = static_cast<T>(r + b);
      return r;
    } else {
      return std::fmod(a, b);
    }
  default:
    return a;
  }
}

template <typename T> bool applyCompare(BinaryOp op, T a, T b) {
  switch (op) {
  case BinaryOp::Equal:
    return a == b;
  case BinaryOp::Less:
    return a < b;
  case BinaryOp::Greater:
    return a > b;
  case BinaryOp::LessOrEqual:
    return a <= b;
  case BinaryOp::GreaterOrEqual:
    return a >= b;
  case BinaryOp::And:
    return a && b;
  case BinaryOp::Or:
    return a || b;
  case BinaryOp::Xor:
    return bool(a) != bool(b);
  default:
    return false;
  }
}

class BinaryKernel : public Kernel {
public:
  BinaryKernel(BinaryOp op, const Shape &a, const Shape &b, const Shape &out,
               bool relu)
      : op_(op), out_(out), relu_(relu) {
    strides_[0] = broadcastStrides(a, out);
    strides_[1] = broadcastStrides(b, out);
    sameShape_ = a == out && b == out;
  }
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    dispatchType(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *a = in[0].as<T>();
      const T *b = in[1].as<T>();
      if (isComparison(op_) || isLogical(op_)) {
        bool *y = out[0].as<bool>();
        broadcastLoop<2>(out_, strides_, [&](int64_t o, const auto &idx) {
          y[o] = applyCompare<T>(op_, a[idx[0]], b[idx[1]]);
        });
        return;
      }
      if constexpr (!std::is_same_v<T, bool>) {
        T *y = out[0].as<T>();
        int64_t n = numElements(out_);
        if (sameShape_ && op_ == BinaryOp::Add) {
          for (int64_t i = 0; i < n; ++i)
            y[i] = wrappingAdd(a[i], b[i]);
        } else {
          broadcastLoop<2>(out_, strides_, [&](int64_t o, const auto &idx) {
            y[o] = applyArith<T>(op_, a[idx[0]], b[idx[1]]);
          });
        }
        if (relu_)
          for (int64_t i = 0; i < n; ++i)
            y[i] = ew::Relu::apply(y[i], T(), T());
      }
    });
    return Status();
  }

private:
  BinaryOp op_;
  Shape out_;
  std::array<std::vector<int64_t>, 2> strides_;
  bool sameShape_ = false;
  bool relu_;
};

void addBinary(KernelTable &t, const char *name, BinaryOp op) {
  t[name] = [op](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 2, 2, 1));
    const TensorType &x = a.inputs[0], &y = a.inputs[1], &z = a.outputs[0];
    if (x.dtype != y.dtype)
      return Status::error("operand types " + x.str() + " and " + y.str() +
                           " differ");
    Shape shape;
    if (!broadcastShapes(x.shape, y.shape, shape) || shape != z.shape)
      return Status::error("cannot broadcast " + x.str() + " and " + y.str() +
                           " to " + z.str());
    DType want = (isComparison(op) || isLogical(op)) ? DType::Bool : x.dtype;
    if (z.dtype != want)
      return Status::error("result type " + z.str() + " should have type " +
                           dtypeName(want));
    bool ok = hasCppType(x.dtype);
    if (op >= BinaryOp::ReluGrad && op <= BinaryOp::GeluTanhGrad)
      ok = isFloatType(x.dtype);
    else if (isLogical(op))
      ok = x.dtype == DType::Bool;
    else if (!isComparison(op))
      ok = ok && x.dtype != DType::Bool;
    if (!ok)
      return Status::error(std::string("element type ") + dtypeName(x.dtype) +
                           " is not supported");
    bool relu;
    PARTC_RETURN_IF_ERROR(fusedRelu(a.attrs, relu));
    if (relu && (isComparison(op) || isLogical(op)))
      return Status::error("a fused activation needs an arithmetic op");
    k = std::make_unique<BinaryKernel>(op, x.shape, y.shape, z.shape, relu);
    return Status();
  };
}

//===----------------------------------------------------------------------===//
// Where, Expand, Cast, Copy
//===----------------------------------------------------------------------===//

class WhereKernel : public Kernel {
public:
  WhereKernel(const std::vector<TensorType> &in, const Shape &out) : out_(out) {
    for (size_t i = 0; i < 3; ++i)
      strides_[i] = broadcastStrides(in[i].shape, out);
  }
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    // Bytes, not bool: any non-zero byte is true, as in numpy.
    const uint8_t *c = in[0].as<uint8_t>();
    size_t es = dtypeSize(in[1].type.dtype);
    const char *x = static_cast<const char *>(in[1].data);
    const char *y = static_cast<const char *>(in[2].data);
    char *z = static_cast<char *>(out[0].data);
    broadcastLoop<3>(out_, strides_, [&](int64_t o, const auto &idx) {
      std::memcpy(z + o * es, c[idx[0]] ? x + idx[1] * es : y + idx[2] * es,
                  es);
    });
    return Status();
  }

private:
  Shape out_;
  std::array<std::vector<int64_t>, 3> strides_;
};

class ExpandKernel : public Kernel {
public:
  ExpandKernel(const Shape &in, const Shape &out) : out_(out) {
    strides_[0] = broadcastStrides(in, out);
  }
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    size_t es = dtypeSize(in[0].type.dtype);
    const char *x = static_cast<const char *>(in[0].data);
    char *y = static_cast<char *>(out[0].data);
    broadcastLoop<1>(out_, strides_, [&](int64_t o, const auto &idx) {
      std::memcpy(y + o * es, x + idx[0] * es, es);
    });
    return Status();
  }

private:
  Shape out_;
  std::array<std::vector<int64_t>, 1> strides_;
};

template <typename To, typename From> To convertValue(From v) {
  if constexpr (std::is_same_v<To, bool>)
    return v != From(0);
  else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>)
    return saturateCast<To>(v);
  else
    return static_cast<To>(v);
}

bool isHalfType(DType t) { return t == DType::F16 || t == DType::BF16; }

class CastKernel : public Kernel {
public:
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    int64_t n = in[0].type.numElements();
    DType from = in[0].type.dtype, to = out[0].type.dtype;
    if (isHalfType(from) || isHalfType(to)) {
      // 16-bit floats go through f32, which holds every value of both.
      std::vector<float> tmp(n);
      if (isHalfType(from)) {
        const uint16_t *x = in[0].as<uint16_t>();
        for (int64_t i = 0; i < n; ++i)
          tmp[i] = from == DType::F16 ? halfToFloat(x[i]) : bf16ToFloat(x[i]);
      } else {
        dispatchType(from, [&](auto tag) {
          using From = decltype(tag);
          const From *x = in[0].as<From>();
          for (int64_t i = 0; i < n; ++i)
            tmp[i] = static_cast<float>(x[i]);
        });
      }
      if (isHalfType(to)) {
        uint16_t *y = out[0].as<uint16_t>();
        for (int64_t i = 0; i < n; ++i)
          y[i] = to == DType::F16 ? floatToHalf(tmp[i]) : floatToBf16(tmp[i]);
      } else {
        dispatchType(to, [&](auto tag) {
          using To = decltype(tag);
          To *y = out[0].as<To>();
          for (int64_t i = 0; i < n; ++i)
            y[i] = convertValue<To>(tmp[i]);
        });
      }
      return Status();
    }
    dispatchType(in[0].type.dtype, [&](auto fromTag) {
      using From = decltype(fromTag);
      dispatchType(out[0].type.dtype, [&](auto toTag) {
        using To = decltype(toTag);
        const From *x = in[0].as<From>();
        To *y = out[0].as<To>();
        for (int64_t i = 0; i < n; ++i)
          y[i] = convertValue<To>(x[i]);
      });
    });
    return Status();
  }
};

class CopyKernel : public Kernel {
public:
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    if (in[0].data != out[0].data)
      std::memmove(out[0].data, in[0].data, out[0].type.byteSize());
    return Status();
  }
};

//===----------------------------------------------------------------------===//
// Fused element-wise chains (FusedElementwise.h)
//===----------------------------------------------------------------------===//

// Binary steps list the arithmetic ops in the order of BinaryOp, so that an
// op converts to its step by an offset.
static_assert(static_cast<int>(ew::Step::GeluTanhGrad) -
                      static_cast<int>(ew::kFirstBinary) ==
                  static_cast<int>(BinaryOp::GeluTanhGrad),
              "binary steps follow BinaryOp");

class FusedElementwiseKernel : public Kernel {
public:
  /// `parts` leading operands (`partWidths` along their last axis) are
  /// concatenated into the program's input 0, of `inputs`.
  FusedElementwiseKernel(fused::Program program,
                         const std::vector<TensorType> &inputs,
                         const Shape &out, std::vector<int64_t> partWidths)
      : program_(std::move(program)), out_(out),
        partWidths_(std::move(partWidths)) {
    for (size_t s = 0; s < program_.steps.size(); ++s)
      for (int i = 0; i < 2; ++i)
        params_[s][i] = static_cast<float>(program_.params[s][i]);
    for (size_t k = 0; k < fused::kMaxInputs; ++k)
      strides_[k] = k < inputs.size() ? broadcastStrides(inputs[k].shape, out)
                                      : std::vector<int64_t>(out.size(), 0);
  }
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *x[fused::kMaxInputs] = {};
    size_t parts = std::max<size_t>(1, partWidths_.size());
    for (size_t k = parts; k < in.size(); ++k)
      x[k - parts + 1] = in[k].as<float>();
    x[0] = in[0].as<float>();
    if (parts > 1) {
      // The reference concatenates; the GPU reads the parts in place.
      int64_t width = out_.back(), rows = numElements(out_) / width;
      // Allocated at the first run, not when the kernel is made: the
      // compiler makes every kernel once to check it (partc-lower-to-plan),
      // and DenseNet's 58 concatenations at batch 32 zero-filled gigabytes.
      concatenated_.resize(numElements(out_));
      float *to = concatenated_.data();
      for (int64_t r = 0; r < rows; ++r)
        for (size_t q = 0; q < parts; ++q) {
          const float *from = in[q].as<float>() + r * partWidths_[q];
          to = std::copy(from, from + partWidths_[q], to);
        }
      x[0] = concatenated_.data();
    }
    float *y = out[0].as<float>();
    size_t steps = program_.steps.size();
    float value[fused::kMaxSteps];
    broadcastLoop<fused::kMaxInputs>(
        out_, strides_, [&](int64_t o, const auto &idx) {
          auto operand = [&](int ref) {
            return ref >= 0 ? x[ref][idx[ref]] : value[-ref - 1];
          };
          for (size_t s = 0; s < steps; ++s) {
            float a = operand(program_.lhs[s]);
            value[s] = ew::applyStep<float>(program_.steps[s], a,
                                            ew::arity(program_.steps[s]) == 2
                                                ? operand(program_.rhs[s])
                                                : a,
                                            params_[s][0], params_[s][1]);
          }
          y[o] = value[steps - 1];
        });
    return Status();
  }

private:
  fused::Program program_;
  float params_[fused::kMaxSteps][2] = {};
  Shape out_;
  std::array<std::vector<int64_t>, fused::kMaxInputs> strides_;
  std::vector<int64_t> partWidths_;
  std::vector<float> concatenated_;
};

/// IsNaN and IsInf: a float test per element, i1 results.
class FloatTestKernel : public Kernel {
public:
  FloatTestKernel(bool nan, bool positive, bool negative)
      : nan_(nan), positive_(positive), negative_(negative) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    int64_t n = in[0].type.numElements();
    bool *y = out[0].as<bool>();
    auto test = [&](auto *x) {
      for (int64_t i = 0; i < n; ++i)
        y[i] = nan_ ? std::isnan(x[i])
                    : std::isinf(x[i]) && (x[i] > 0 ? positive_ : negative_);
    };
    if (in[0].type.dtype == DType::F64)
      test(in[0].as<double>());
    else
      test(in[0].as<float>());
    return Status();
  }

private:
  bool nan_, positive_, negative_;
};

KernelFactory floatTest(bool nan) {
  return [nan](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
    DType t = a.inputs[0].dtype;
    if ((t != DType::F32 && t != DType::F64) ||
        a.outputs[0].dtype != DType::Bool ||
        a.outputs[0].shape != a.inputs[0].shape)
      return Status::error(a.name + " takes f32 or f64 and gives bool of the "
                                    "same shape");
    // IsNaN has no sign to detect; IsInf carries both flags.
    k = std::make_unique<FloatTestKernel>(
        nan, nan || a.attrs.getInt("detect_positive") != 0,
        nan || a.attrs.getInt("detect_negative") != 0);
    return Status();
  };
}

} // namespace

void registerElementwiseKernels(KernelTable &t) {
  for (int i = 0; i < ew::kNumUnary; ++i)
    t[ew::kSteps[i].name] = createUnary;
  // gelu_tanh is a step, not a kernel: gelu runs it by its attribute.
  t.erase(ew::info(ew::Step::GeluTanh).name);
  t["gelu"] = createUnary;
  t["not"] = [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkSameType(a));
    if (a.inputs[0].dtype != DType::Bool)
      return Status::error("not takes bool, got " + a.inputs[0].str());
    k = std::make_unique<NotKernel>();
    return Status();
  };
  t["is_nan"] = floatTest(true);
  t["is_inf"] = floatTest(false);

  addBinary(t, "add", BinaryOp::Add);
  addBinary(t, "sub", BinaryOp::Sub);
  addBinary(t, "mul", BinaryOp::Mul);
  addBinary(t, "div", BinaryOp::Div);
  addBinary(t, "pow", BinaryOp::Pow);
  addBinary(t, "min", BinaryOp::Min);
  addBinary(t, "max", BinaryOp::Max);
  addBinary(t, "relu_grad", BinaryOp::ReluGrad);
  addBinary(t, "sigmoid_grad", BinaryOp::SigmoidGrad);
  addBinary(t, "tanh_grad", BinaryOp::TanhGrad);
  addBinary(t, "gelu_grad", BinaryOp::GeluGrad);
  addBinary(t, "gelu_tanh_grad", BinaryOp::GeluTanhGrad);
  addBinary(t, "mod", BinaryOp::Mod);
  addBinary(t, "equal", BinaryOp::Equal);
  addBinary(t, "less", BinaryOp::Less);
  addBinary(t, "greater", BinaryOp::Greater);
  addBinary(t, "less_or_equal", BinaryOp::LessOrEqual);
  addBinary(t, "greater_or_equal", BinaryOp::GreaterOrEqual);
  addBinary(t, "and", BinaryOp::And);
  addBinary(t, "or", BinaryOp::Or);
  addBinary(t, "xor", BinaryOp::Xor);

  t["fused_elementwise"] = [](const KernelArgs &a,
                              std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(
        checkArity(a, 1, fused::kMaxInputs + fused::kMaxConcatParts - 1, 1));
    const TensorType &out = a.outputs[0];
    if (out.dtype != DType::F32 || out.shape.size() > fused::kMaxRank)
      return Status::error("fused chains compute f32 tensors of rank <= " +
                           std::to_string(fused::kMaxRank) + ", got " +
                           out.str());
    int parts = 1;
    std::vector<TensorType> inputs;
    PARTC_RETURN_IF_ERROR(
        fused::programInputs(a.attrs, a.inputs, parts, inputs));
    if (inputs.size() > static_cast<size_t>(fused::kMaxInputs))
      return Status::error("fused chains read at most " +
                           std::to_string(fused::kMaxInputs) + " inputs, got " +
                           std::to_string(inputs.size()));
    if (parts > 1 && inputs[0].shape != out.shape)
      return Status::error("the concatenation " + inputs[0].str() +
                           " does not have the result's shape " + out.str());
    std::vector<int64_t> partWidths;
    for (int q = 0; q < parts && parts > 1; ++q)
      partWidths.push_back(a.inputs[q].shape.back());
    Shape shape;
    for (const TensorType &in : inputs) {
      Shape next;
      if (in.dtype != DType::F32 || !broadcastShapes(in.shape, shape, next))
        return Status::error("input " + in.str() +
                             " is not f32 or does not "
                             "broadcast to " +
                             out.str());
      shape = next;
    }
    if (shape != out.shape)
      return Status::error("inputs broadcast to a shape other than " +
                           out.str());
    fused::Program program;
    PARTC_RETURN_IF_ERROR(
        fused::parseProgram(a.attrs, static_cast<int>(inputs.size()), program));
    k = std::make_unique<FusedElementwiseKernel>(
        std::move(program), inputs, out.shape, std::move(partWidths));
    return Status();
  };
  t["where"] = [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 3, 3, 1));
    if (a.inputs[0].dtype != DType::Bool)
      return Status::error("condition must be bool, got " + a.inputs[0].str());
    if (a.inputs[1].dtype != a.inputs[2].dtype ||
        a.inputs[1].dtype != a.outputs[0].dtype)
      return Status::error("value types differ");
    Shape s1, s2;
    if (!broadcastShapes(a.inputs[0].shape, a.inputs[1].shape, s1) ||
        !broadcastShapes(s1, a.inputs[2].shape, s2) || s2 != a.outputs[0].shape)
      return Status::error("operands do not broadcast to " +
                           a.outputs[0].str());
    k = std::make_unique<WhereKernel>(a.inputs, a.outputs[0].shape);
    return Status();
  };
  t["expand"] = [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
    Shape s;
    if (a.inputs[0].dtype != a.outputs[0].dtype ||
        !broadcastShapes(a.inputs[0].shape, a.outputs[0].shape, s) ||
        s != a.outputs[0].shape)
      return Status::error("cannot expand " + a.inputs[0].str() + " to " +
                           a.outputs[0].str());
    k = std::make_unique<ExpandKernel>(a.inputs[0].shape, a.outputs[0].shape);
    return Status();
  };
  t["cast"] = [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
    if (a.inputs[0].shape != a.outputs[0].shape)
      return Status::error("shapes differ");
    auto castable = [](DType t) { return hasCppType(t) || isHalfType(t); };
    if (!castable(a.inputs[0].dtype) || !castable(a.outputs[0].dtype))
      return Status::error(std::string("cannot cast ") +
                           dtypeName(a.inputs[0].dtype) + " to " +
                           dtypeName(a.outputs[0].dtype));
    k = std::make_unique<CastKernel>();
    return Status();
  };
  t["copy"] = [](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
    if (a.inputs[0].byteSize() != a.outputs[0].byteSize())
      return Status::error("sizes differ");
    k = std::make_unique<CopyKernel>();
    return Status();
  };
}

namespace fused {

bool stepFromName(const std::string &name, Step &step) {
  for (int i = 0; i < ew::kNumSteps; ++i)
    if (name == ew::kSteps[i].name) {
      step = static_cast<Step>(i);
      return true;
    }
  return false;
}

Status stepOfKernel(const std::string &kernel, const AttrMap &attrs, Step &step,
                    double (&params)[2]) {
  params[0] = params[1] = 0;
  if (kernel == "gelu") {
    std::string approximate;
    PARTC_RETURN_IF_ERROR(attrs.requireString("approximate", approximate));
    if (approximate != "none" && approximate != "tanh")
      return Status::error("approximate must be none or tanh, got '" +
                           approximate + "'");
    step = approximate == "tanh" ? Step::GeluTanh : Step::Gelu;
    return Status();
  }
  if (!stepFromName(kernel, step) || step == Step::GeluTanh)
    return Status::error("'" + kernel + "' is not an element-wise step");
  const ew::StepInfo &info = ew::info(step);
  for (int i = 0; i < info.params; ++i)
    PARTC_RETURN_IF_ERROR(attrs.requireFloat(info.paramNames[i], params[i]));
  return Status();
}

Status parseProgram(const std::string &steps, const std::vector<int64_t> &args,
                    const std::vector<double> &params, int numInputs,
                    Program &program) {
  program = Program();
  size_t next = 0, nextParam = 0;
  std::vector<bool> inputRead(numInputs, false);
  std::vector<bool> stepRead;
  for (size_t begin = 0; begin <= steps.size();) {
    size_t end = steps.find(',', begin);
    if (end == std::string::npos)
      end = steps.size();
    std::string name = steps.substr(begin, end - begin);
    Step step;
    if (!stepFromName(name, step))
      return Status::error("unknown fused step '" + name + "'");
    if (program.steps.size() == static_cast<size_t>(kMaxSteps))
      return Status::error("more than " + std::to_string(kMaxSteps) +
                           " fused steps");
    int refs[2] = {0, 0};
    for (int k = 0; k < ew::arity(step); ++k) {
      if (next == args.size())
        return Status::error("step " + std::to_string(program.steps.size()) +
                             " (" + name + ") lacks operands in 'args'");
      int64_t ref = args[next++];
      int64_t done = static_cast<int64_t>(program.steps.size());
      if (ref >= numInputs || ref < -done)
        return Status::error("step " + std::to_string(done) + " (" + name +
                             ") reads " +
                             (ref >= 0 ? "input " + std::to_string(ref) +
                                             " of " + std::to_string(numInputs)
                                       // ~ref is -ref - 1 without
                                       // overflow at INT64_MIN.
                                       : "step " + std::to_string(~ref) +
                                             ", which does not precede it"));
      if (ref >= 0)
        inputRead[ref] = true;
      else
        stepRead[-ref - 1] = true;
      refs[k] = static_cast<int>(ref);
    }
    std::array<double, 2> stepParams = {0, 0};
    for (int i = 0; i < ew::info(step).params; ++i) {
      if (nextParam == params.size())
        return Status::error("step " + std::to_string(program.steps.size()) +
                             " (" + name + ") lacks its parameter '" +
                             ew::info(step).paramNames[i] + "' in 'params'");
      stepParams[i] = params[nextParam++];
    }
    program.params.push_back(stepParams);
    program.steps.push_back(step);
    program.lhs.push_back(refs[0]);
    program.rhs.push_back(refs[1]);
    stepRead.push_back(false);
    begin = end + 1;
  }
  if (next != args.size())
    return Status::error("'args' holds " + std::to_string(args.size()) +
                         " operands but the steps read " +
                         std::to_string(next));
  if (nextParam != params.size())
    return Status::error("'params' holds " + std::to_string(params.size()) +
                         " values but the steps take " +
                         std::to_string(nextParam));
  for (int k = 0; k < numInputs; ++k)
    if (!inputRead[k])
      return Status::error("input " + std::to_string(k) + " is never read");
  for (size_t s = 0; s + 1 < stepRead.size(); ++s)
    if (!stepRead[s])
      return Status::error("the result of step " + std::to_string(s) +
                           " is never read");
  return Status();
}

Status parseProgram(const AttrMap &attrs, int numInputs, Program &program) {
  return parseProgram(attrs.getString("steps"), attrs.getInts("args"),
                      attrs.getFloats("params"), numInputs, program);
}

Status programInputs(const AttrMap &attrs,
                     const std::vector<TensorType> &operands, int &parts,
                     std::vector<TensorType> &inputs) {
  int64_t count = attrs.getInt("concat_parts", 1);
  if (count < 1 || count > kMaxConcatParts ||
      count > static_cast<int64_t>(operands.size()))
    return Status::error("concat_parts = " + std::to_string(count) + " with " +
                         std::to_string(operands.size()) +
                         " operands; it must be in [1, " +
                         std::to_string(kMaxConcatParts) + "]");
  parts = static_cast<int>(count);
  TensorType whole = operands[0];
  if (parts > 1) {
    if (whole.shape.empty())
      return Status::error("concatenated parts need an axis, got " +
                           whole.str());
    whole.shape.back() = 0;
    for (int q = 0; q < parts; ++q) {
      const TensorType &part = operands[q];
      if (part.dtype != whole.dtype ||
          part.shape.size() != whole.shape.size() ||
          !std::equal(part.shape.begin(), part.shape.end() - 1,
                      whole.shape.begin()))
        return Status::error("concatenated part " + part.str() +
                             " differs from " + operands[0].str() +
                             " outside the last axis");
      whole.shape.back() += part.shape.back();
    }
  }
  inputs.assign(1, whole);
  inputs.insert(inputs.end(), operands.begin() + parts, operands.end());
  return Status();
}

} // namespace fused

} // namespace partc::runtime
