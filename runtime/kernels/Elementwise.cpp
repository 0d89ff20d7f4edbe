//===- Elementwise.cpp - Unary, binary (broadcasting), where, cast --------===//
#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/FusedElementwise.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace partc::runtime {
namespace {

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

enum class UnaryOp {
  Relu,
  Sigmoid,
  Tanh,
  Erf,
  Sqrt,
  Neg,
  Exp,
  Log,
  Abs,
  Reciprocal,
  Floor,
  Ceil,
  Sin,
  Cos,
  Gelu,
  GeluTanh,
  LeakyRelu,
  HardSigmoid,
  HardSwish,
  Clip,
  Not,
  Softplus,
  Elu,
  Sign,
  Round
};

struct UnaryParams {
  double alpha = 0, beta = 0, lo = 0, hi = 0;
};

template <typename T> T applyUnary(UnaryOp op, T x, const UnaryParams &p) {
  if constexpr (std::is_same_v<T, bool>) {
    return op == UnaryOp::Not ? !x : x;
  } else if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
    case UnaryOp::Relu:
      return x > T(0) ? x : T(0);
    case UnaryOp::Sigmoid:
      return T(1) / (T(1) + std::exp(-x));
    case UnaryOp::Tanh:
      return std::tanh(x);
    case UnaryOp::Erf:
      return std::erf(x);
    case UnaryOp::Sqrt:
      return std::sqrt(x);
    case UnaryOp::Neg:
      return -x;
    case UnaryOp::Exp:
      return std::exp(x);
    case UnaryOp::Log:
      return std::log(x);
    case UnaryOp::Abs:
      return std::fabs(x);
    case UnaryOp::Reciprocal:
      return T(1) / x;
    case UnaryOp::Floor:
      return std::floor(x);
    case UnaryOp::Ceil:
      return std::ceil(x);
    case UnaryOp::Sin:
      return std::sin(x);
    case UnaryOp::Cos:
      return std::cos(x);
    case UnaryOp::Gelu:
      return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
    case UnaryOp::GeluTanh:
      return T(0.5) * x *
             (T(1) + std::tanh(T(0.79788456080286535588) *
                               (x + T(0.044715) * x * x * x)));
    case UnaryOp::LeakyRelu:
      return x >= T(0) ? x : T(p.alpha) * x;
    case UnaryOp::HardSigmoid:
      return std::max(T(0), std::min(T(1), T(p.alpha) * x + T(p.beta)));
    case UnaryOp::HardSwish:
      return x * std::max(T(0), std::min(T(1), x / T(6) + T(0.5)));
    case UnaryOp::Clip:
      return std::min(T(p.hi), std::max(T(p.lo), x));
    case UnaryOp::Softplus:
      return std::log1p(std::exp(x));
    case UnaryOp::Elu:
      return x >= T(0) ? x : T(p.alpha) * (std::exp(x) - T(1));
    case UnaryOp::Sign:
      return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
    case UnaryOp::Round:
      return std::nearbyint(x);
    case UnaryOp::Not:
      return x;
    }
    return x;
  } else {
    switch (op) {
    case UnaryOp::Relu:
      return x > T(0) ? x : T(0);
    case UnaryOp::Neg:
      return static_cast<T>(-x);
    case UnaryOp::Abs:
      if constexpr (std::is_signed_v<T>)
        return x < 0 ? static_cast<T>(-x) : x;
      return x;
    case UnaryOp::Clip:
      return static_cast<T>(std::min<double>(p.hi, std::max<double>(p.lo, x)));
    case UnaryOp::Sign:
      return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
    default:
      return x;
    }
  }
}

bool unaryAllowsType(UnaryOp op, DType t) {
  if (t == DType::Bool)
    return op == UnaryOp::Not;
  if (isFloatType(t))
    return op != UnaryOp::Not;
  return op == UnaryOp::Relu || op == UnaryOp::Neg || op == UnaryOp::Abs ||
         op == UnaryOp::Clip || op == UnaryOp::Sign;
}

class UnaryKernel : public Kernel {
public:
  UnaryKernel(UnaryOp op, UnaryParams params) : op_(op), params_(params) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    int64_t n = in[0].type.numElements();
    dispatchType(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *x = in[0].as<T>();
      T *y = out[0].as<T>();
      if (op_ == UnaryOp::Relu) {
        // The hottest unary op in CNNs gets a loop the compiler vectorizes.
        for (int64_t i = 0; i < n; ++i)
          y[i] = x[i] > T(0) ? x[i] : T(0);
        return;
      }
      for (int64_t i = 0; i < n; ++i)
        y[i] = applyUnary<T>(op_, x[i], params_);
    });
    return Status();
  }

private:
  UnaryOp op_;
  UnaryParams params_;
};

void addUnary(KernelTable &t, const char *name, UnaryOp op) {
  t[name] = [op](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
    if (a.inputs[0] != a.outputs[0])
      return Status::error("input " + a.inputs[0].str() + " and output " +
                           a.outputs[0].str() + " differ");
    if (!unaryAllowsType(op, a.inputs[0].dtype))
      return Status::error(std::string("element type ") +
                           dtypeName(a.inputs[0].dtype) + " is not supported");
    UnaryParams p;
    p.alpha = a.attrs.getFloat("alpha", op == UnaryOp::HardSigmoid ? 0.2
                                        : op == UnaryOp::Elu       ? 1.0
                                                                   : 0.01);
    p.beta = a.attrs.getFloat("beta", 0.5);
    p.lo = a.attrs.getFloat("min", -std::numeric_limits<double>::infinity());
    p.hi = a.attrs.getFloat("max", std::numeric_limits<double>::infinity());
    UnaryOp effective = op;
    if (op == UnaryOp::Gelu &&
        a.attrs.getString("approximate", "none") == "tanh")
      effective = UnaryOp::GeluTanh;
    k = std::make_unique<UnaryKernel>(effective, p);
    return Status();
  };
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
  switch (op) {
  case BinaryOp::Add:
    return static_cast<T>(a + b);
  case BinaryOp::Sub:
    return static_cast<T>(a - b);
  case BinaryOp::Mul:
    return static_cast<T>(a * b);
  case BinaryOp::Div:
    if constexpr (std::is_integral_v<T>)
      return b == 0 ? T(0) : static_cast<T>(a / b);
    else
      return a / b;
  case BinaryOp::Pow:
    return static_cast<T>(
        std::pow(static_cast<double>(a), static_cast<double>(b)));
  case BinaryOp::Min:
    return a < b ? a : b;
  case BinaryOp::Max:
    return a > b ? a : b;
  case BinaryOp::Mod:
    if constexpr (std::is_integral_v<T>) {
      if (b == 0)
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
            y[i] = static_cast<T>(a[i] + b[i]);
        } else {
          broadcastLoop<2>(out_, strides_, [&](int64_t o, const auto &idx) {
            y[o] = applyArith<T>(op_, a[idx[0]], b[idx[1]]);
          });
        }
        if (relu_)
          for (int64_t i = 0; i < n; ++i)
            y[i] = y[i] > T(0) ? y[i] : T(0);
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
    if (isLogical(op))
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
    const bool *c = in[0].as<bool>();
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
  else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(v))
      return To(0);
    return static_cast<To>(v);
  } else
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

// Fused steps list the unary and binary ops in the order of UnaryOp and
// BinaryOp, so that a step converts by a cast.
static_assert(static_cast<int>(fused::Step::Relu) ==
                      static_cast<int>(UnaryOp::Relu) &&
                  static_cast<int>(fused::Step::Cos) ==
                      static_cast<int>(UnaryOp::Cos) &&
                  static_cast<int>(fused::Step::GeluTanh) ==
                      static_cast<int>(UnaryOp::GeluTanh),
              "fused unary steps follow UnaryOp");
static_assert(static_cast<int>(fused::Step::Max) -
                      static_cast<int>(fused::Step::Add) ==
                  static_cast<int>(BinaryOp::Max),
              "fused binary steps follow BinaryOp");

UnaryOp unaryOf(fused::Step step) { return static_cast<UnaryOp>(step); }

BinaryOp binaryOf(fused::Step step) {
  return static_cast<BinaryOp>(static_cast<int>(step) -
                               static_cast<int>(fused::Step::Add));
}

class FusedElementwiseKernel : public Kernel {
public:
  FusedElementwiseKernel(fused::Program program,
                         const std::vector<TensorType> &inputs,
                         const Shape &out)
      : program_(std::move(program)), out_(out) {
    for (size_t k = 0; k < fused::kMaxInputs; ++k)
      strides_[k] = k < inputs.size() ? broadcastStrides(inputs[k].shape, out)
                                      : std::vector<int64_t>(out.size(), 0);
  }
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    const float *x[fused::kMaxInputs] = {};
    for (size_t k = 0; k < in.size(); ++k)
      x[k] = in[k].as<float>();
    float *y = out[0].as<float>();
    size_t steps = program_.steps.size();
    float value[fused::kMaxSteps];
    broadcastLoop<fused::kMaxInputs>(
        out_, strides_, [&](int64_t o, const auto &idx) {
          auto operand = [&](int ref) {
            return ref >= 0 ? x[ref][idx[ref]] : value[-ref - 1];
          };
          for (size_t s = 0; s < steps; ++s)
            value[s] = fused::applyStep(
                program_.steps[s], operand(program_.lhs[s]),
                fused::arity(program_.steps[s]) == 2 ? operand(program_.rhs[s])
                                                     : 0.0f);
          y[o] = value[steps - 1];
        });
    return Status();
  }

private:
  fused::Program program_;
  Shape out_;
  std::array<std::vector<int64_t>, fused::kMaxInputs> strides_;
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
    k = std::make_unique<FloatTestKernel>(
        nan, a.attrs.getInt("detect_positive", 1) != 0,
        a.attrs.getInt("detect_negative", 1) != 0);
    return Status();
  };
}

} // namespace

void registerElementwiseKernels(KernelTable &t) {
  addUnary(t, "relu", UnaryOp::Relu);
  addUnary(t, "sigmoid", UnaryOp::Sigmoid);
  addUnary(t, "tanh", UnaryOp::Tanh);
  addUnary(t, "erf", UnaryOp::Erf);
  addUnary(t, "sqrt", UnaryOp::Sqrt);
  addUnary(t, "neg", UnaryOp::Neg);
  addUnary(t, "exp", UnaryOp::Exp);
  addUnary(t, "log", UnaryOp::Log);
  addUnary(t, "abs", UnaryOp::Abs);
  addUnary(t, "reciprocal", UnaryOp::Reciprocal);
  addUnary(t, "floor", UnaryOp::Floor);
  addUnary(t, "ceil", UnaryOp::Ceil);
  addUnary(t, "sin", UnaryOp::Sin);
  addUnary(t, "cos", UnaryOp::Cos);
  addUnary(t, "gelu", UnaryOp::Gelu);
  addUnary(t, "leaky_relu", UnaryOp::LeakyRelu);
  addUnary(t, "hard_sigmoid", UnaryOp::HardSigmoid);
  addUnary(t, "hard_swish", UnaryOp::HardSwish);
  addUnary(t, "clip", UnaryOp::Clip);
  addUnary(t, "not", UnaryOp::Not);
  addUnary(t, "softplus", UnaryOp::Softplus);
  addUnary(t, "elu", UnaryOp::Elu);
  addUnary(t, "sign", UnaryOp::Sign);
  addUnary(t, "round", UnaryOp::Round);
  t["is_nan"] = floatTest(true);
  t["is_inf"] = floatTest(false);

  addBinary(t, "add", BinaryOp::Add);
  addBinary(t, "sub", BinaryOp::Sub);
  addBinary(t, "mul", BinaryOp::Mul);
  addBinary(t, "div", BinaryOp::Div);
  addBinary(t, "pow", BinaryOp::Pow);
  addBinary(t, "min", BinaryOp::Min);
  addBinary(t, "max", BinaryOp::Max);
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
    PARTC_RETURN_IF_ERROR(checkArity(a, 1, fused::kMaxInputs, 1));
    const TensorType &out = a.outputs[0];
    if (out.dtype != DType::F32 || out.shape.size() > fused::kMaxRank)
      return Status::error("fused chains compute f32 tensors of rank <= " +
                           std::to_string(fused::kMaxRank) + ", got " +
                           out.str());
    Shape shape;
    for (const TensorType &in : a.inputs) {
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
    PARTC_RETURN_IF_ERROR(fused::parseProgram(
        a.attrs, static_cast<int>(a.inputs.size()), program));
    k = std::make_unique<FusedElementwiseKernel>(std::move(program), a.inputs,
                                                 out.shape);
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

namespace {
const char *const kStepNames[] = {
    "relu", "sigmoid",    "tanh",  "erf",  "sqrt", "neg", "exp",  "log",
    "abs",  "reciprocal", "floor", "ceil", "sin",  "cos", "gelu", "gelu_tanh",
    "add",  "sub",        "mul",   "div",  "pow",  "min", "max"};
constexpr size_t kStepCount = sizeof(kStepNames) / sizeof(kStepNames[0]);
static_assert(kStepCount == static_cast<size_t>(Step::Max) + 1,
              "a name per step");
} // namespace

bool stepFromName(const std::string &name, Step &step) {
  for (size_t i = 0; i < kStepCount; ++i)
    if (name == kStepNames[i]) {
      step = static_cast<Step>(i);
      return true;
    }
  return false;
}

const char *stepName(Step step) {
  return kStepNames[static_cast<size_t>(step)];
}

Status parseProgram(const std::string &steps, const std::vector<int64_t> &args,
                    int numInputs, Program &program) {
  program = Program();
  size_t next = 0;
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
    for (int k = 0; k < arity(step); ++k) {
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
                                       : "step " + std::to_string(-ref - 1) +
                                             ", which does not precede it"));
      if (ref >= 0)
        inputRead[ref] = true;
      else
        stepRead[-ref - 1] = true;
      refs[k] = static_cast<int>(ref);
    }
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
  return parseProgram(attrs.getString("steps", ""), attrs.getInts("args"),
                      numInputs, program);
}

float applyStep(Step step, float a, float b) {
  if (arity(step) == 2)
    return applyArith<float>(binaryOf(step), a, b);
  return applyUnary<float>(unaryOf(step), a, UnaryParams());
}

} // namespace fused

} // namespace partc::runtime
