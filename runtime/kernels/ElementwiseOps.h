//===- ElementwiseOps.h - The formula of every element-wise op --*- C++ -*-===//
//
// One definition per element-wise float op: its kernel name (the graph op's
// mnemonic), the names of the float attributes it reads, and its formula.
// The CPU kernels, the CPU and GPU interpreters of fused chains, the GPU's
// unary and binary kernels and the code NVRTC compiles per chain all
// evaluate ops through `applyStep`, so they cannot drift apart.
//
// NVRTC compiles this file under generated code without system headers, so
// the device path includes nothing. Adding an op: a struct below and its
// name in PARTC_UNARY_OPS or PARTC_BINARY_OPS (docs/adding-an-op.md).
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_ELEMENTWISEOPS_H
#define PARTC_RUNTIME_KERNELS_ELEMENTWISEOPS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define PARTC_EW_FN __host__ __device__ __forceinline__
#else
#define PARTC_EW_FN inline
#include <cmath>
#endif

namespace partc::runtime::ew {

/// Math on f32 (CPU and GPU) and f64 (CPU): the CUDA functions where nvcc
/// or NVRTC compile, the standard library's on the host.
namespace math {
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define PARTC_EW_MATH(name, f32, f64)                                          \
  PARTC_EW_FN float name(float x) { return ::f32(x); }                         \
  PARTC_EW_FN double name(double x) { return ::f64(x); }
#define PARTC_EW_MATH2(name, f32, f64)                                         \
  PARTC_EW_FN float name(float x, float y) { return ::f32(x, y); }             \
  PARTC_EW_FN double name(double x, double y) { return ::f64(x, y); }
#else
#define PARTC_EW_MATH(name, f32, f64)                                          \
  inline float name(float x) { return std::f64(x); }                           \
  inline double name(double x) { return std::f64(x); }
#define PARTC_EW_MATH2(name, f32, f64)                                         \
  inline float name(float x, float y) { return std::f64(x, y); }               \
  inline double name(double x, double y) { return std::f64(x, y); }
#endif
PARTC_EW_MATH(exp, expf, exp)
PARTC_EW_MATH(log, logf, log)
PARTC_EW_MATH(log1p, log1pf, log1p)
PARTC_EW_MATH(tanh, tanhf, tanh)
PARTC_EW_MATH(erf, erff, erf)
PARTC_EW_MATH(sqrt, sqrtf, sqrt)
PARTC_EW_MATH(fabs, fabsf, fabs)
PARTC_EW_MATH(floor, floorf, floor)
PARTC_EW_MATH(ceil, ceilf, ceil)
PARTC_EW_MATH(sin, sinf, sin)
PARTC_EW_MATH(cos, cosf, cos)
PARTC_EW_MATH(tan, tanf, tan)
PARTC_EW_MATH(asin, asinf, asin)
PARTC_EW_MATH(acos, acosf, acos)
PARTC_EW_MATH(atan, atanf, atan)
PARTC_EW_MATH(sinh, sinhf, sinh)
PARTC_EW_MATH(cosh, coshf, cosh)
PARTC_EW_MATH(asinh, asinhf, asinh)
PARTC_EW_MATH(acosh, acoshf, acosh)
PARTC_EW_MATH(atanh, atanhf, atanh)
PARTC_EW_MATH(nearbyint, nearbyintf, nearbyint)
PARTC_EW_MATH2(pow, powf, pow)
#undef PARTC_EW_MATH
#undef PARTC_EW_MATH2
} // namespace math

/// Max and min that keep NaN from either side, as numpy's maximum and
/// minimum (hence ONNX's reference) do; std::max, fmaxf and a plain
/// comparison drop it. Pooling and reductions use them too.
template <class T> PARTC_EW_FN T maxKeepNan(T a, T b) {
  return (a != a || a > b) ? a : b;
}
template <class T> PARTC_EW_FN T minKeepNan(T a, T b) {
  return (a != a || a < b) ? a : b;
}
/// -x of an integer, wrapping at the lowest value as numpy does (signed
/// overflow is undefined; unsigned arithmetic wraps).
template <class T> PARTC_EW_FN T negateWrapping(T x) {
  return static_cast<T>(0ULL - static_cast<unsigned long long>(x));
}
/// Clamps to [lo, hi]; NaN stays NaN.
template <class T> PARTC_EW_FN T clampKeepNan(T x, T lo, T hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}

// Each op: kName, the kernel name; kParamNames, the float attributes it
// reads, if any (at most 2, passed to apply as p and q; each is required in
// a plan, its default lives in the op's ODS definition); kIntegers, set
// where the formula also serves integer tensors; apply(x, p, q), or
// apply(a, b) for binary ops.

struct Relu {
  static constexpr const char *kName = "relu";
  static constexpr bool kIntegers = true;
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return x < T(0) ? T(0) : x; // Relu(NaN) is NaN
  }
};
struct Sigmoid {
  static constexpr const char *kName = "sigmoid";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return T(1) / (T(1) + math::exp(-x));
  }
};
struct Tanh {
  static constexpr const char *kName = "tanh";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return math::tanh(x);
  }
};
struct Erf {
  static constexpr const char *kName = "erf";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return math::erf(x);
  }
};
struct Sqrt {
  static constexpr const char *kName = "sqrt";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return math::sqrt(x);
  }
};
struct Neg {
  static constexpr const char *kName = "neg";
  static constexpr bool kIntegers = true;
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    if constexpr (T(1) / T(2) == T(0)) // integers wrap (-INT_MIN), as numpy
      return negateWrapping(x);
    else
      return -x;
  }
};
struct Exp {
  static constexpr const char *kName = "exp";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return math::exp(x);
  }
};
struct Log {
  static constexpr const char *kName = "log";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return math::log(x);
  }
};
struct Abs {
  static constexpr const char *kName = "abs";
  static constexpr bool kIntegers = true;
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    if constexpr (T(-1) > T(0)) // unsigned
      return x;
    else if constexpr (T(1) / T(2) == T(0)) // signed integer
      return x < T(0) ? negateWrapping(x)
                      : x; // wraps at the lowest value, as numpy
    else
      return math::fabs(x);
  }
};
struct Reciprocal {
  static constexpr const char *kName = "reciprocal";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) { return T(1) / x; }
};
struct Floor {
  static constexpr const char *kName = "floor";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return math::floor(x);
  }
};
struct Ceil {
  static constexpr const char *kName = "ceil";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return math::ceil(x);
  }
};
struct Sin {
  static constexpr const char *kName = "sin";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return math::sin(x);
  }
};
struct Cos {
  static constexpr const char *kName = "cos";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return math::cos(x);
  }
};
/// Exact Gelu; `gelu` with approximate = "tanh" runs GeluTanh.
struct Gelu {
  static constexpr const char *kName = "gelu";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return T(0.5) * x * (T(1) + math::erf(x * T(0.70710678118654752440)));
  }
};
struct GeluTanh {
  static constexpr const char *kName = "gelu_tanh";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return T(0.5) * x *
           (T(1) + math::tanh(T(0.79788456080286535588) *
                              (x + T(0.044715) * x * x * x)));
  }
};
struct LeakyRelu {
  static constexpr const char *kName = "leaky_relu";
  static constexpr const char *kParamNames[] = {"alpha"};
  template <class T> PARTC_EW_FN static T apply(T x, T alpha, T) {
    return x >= T(0) ? x : alpha * x;
  }
};
struct HardSigmoid {
  static constexpr const char *kName = "hard_sigmoid";
  static constexpr const char *kParamNames[] = {"alpha", "beta"};
  template <class T> PARTC_EW_FN static T apply(T x, T alpha, T beta) {
    return clampKeepNan(alpha * x + beta, T(0), T(1));
  }
};
struct HardSwish {
  static constexpr const char *kName = "hard_swish";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return x * clampKeepNan(x / T(6) + T(0.5), T(0), T(1));
  }
};
struct Clip {
  static constexpr const char *kName = "clip";
  static constexpr const char *kParamNames[] = {"min", "max"};
  static constexpr bool kIntegers = true;
  template <class T> PARTC_EW_FN static T apply(T x, T lo, T hi) {
    T low = x < lo ? lo : x;
    return low > hi ? hi : low;
  }
};
struct Softplus {
  static constexpr const char *kName = "softplus";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return math::log1p(math::exp(x));
  }
};
struct Elu {
  static constexpr const char *kName = "elu";
  static constexpr const char *kParamNames[] = {"alpha"};
  template <class T> PARTC_EW_FN static T apply(T x, T alpha, T) {
    return x >= T(0) ? x : alpha * (math::exp(x) - T(1));
  }
};
struct Sign {
  static constexpr const char *kName = "sign";
  static constexpr bool kIntegers = true;
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    // Zero, and NaN, are their own sign.
    return x > T(0) ? T(1) : (x < T(0) ? static_cast<T>(-1) : x);
  }
};
/// Half to even, in the default rounding mode.
struct Round {
  static constexpr const char *kName = "round";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return math::nearbyint(x);
  }
};
struct Mish {
  static constexpr const char *kName = "mish";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return x * math::tanh(math::log1p(math::exp(x)));
  }
};
struct Selu {
  static constexpr const char *kName = "selu";
  static constexpr const char *kParamNames[] = {"alpha", "gamma"};
  template <class T> PARTC_EW_FN static T apply(T x, T alpha, T gamma) {
    return x > T(0) ? gamma * x : gamma * (alpha * math::exp(x) - alpha);
  }
};
struct Celu {
  static constexpr const char *kName = "celu";
  static constexpr const char *kParamNames[] = {"alpha"};
  template <class T> PARTC_EW_FN static T apply(T x, T alpha, T) {
    return maxKeepNan(T(0), x) +
           minKeepNan(T(0), alpha * (math::exp(x / alpha) - T(1)));
  }
};
struct Softsign {
  static constexpr const char *kName = "softsign";
  template <class T> PARTC_EW_FN static T apply(T x, T, T) {
    return x / (T(1) + math::fabs(x));
  }
};
struct ThresholdedRelu {
  static constexpr const char *kName = "thresholded_relu";
  static constexpr const char *kParamNames[] = {"alpha"};
  template <class T> PARTC_EW_FN static T apply(T x, T alpha, T) {
    return x > alpha ? x : T(0);
  }
};
/// ONNX's Shrink: values within lambd of zero become 0, the others move
/// toward zero by bias.
struct Shrink {
  static constexpr const char *kName = "shrink";
  static constexpr const char *kParamNames[] = {"bias", "lambd"};
  template <class T> PARTC_EW_FN static T apply(T x, T bias, T lambd) {
    return x < -lambd ? x + bias : (x > lambd ? x - bias : T(0));
  }
};
// Trigonometric and hyperbolic functions and their inverses.
#define PARTC_EW_MATH_OP(Op, fn)                                               \
  struct Op {                                                                  \
    static constexpr const char *kName = #fn;                                  \
    template <class T> PARTC_EW_FN static T apply(T x, T, T) {                 \
      return math::fn(x);                                                      \
    }                                                                          \
  };
PARTC_EW_MATH_OP(Tan, tan)
PARTC_EW_MATH_OP(Asin, asin)
PARTC_EW_MATH_OP(Acos, acos)
PARTC_EW_MATH_OP(Atan, atan)
PARTC_EW_MATH_OP(Sinh, sinh)
PARTC_EW_MATH_OP(Cosh, cosh)
PARTC_EW_MATH_OP(Asinh, asinh)
PARTC_EW_MATH_OP(Acosh, acosh)
PARTC_EW_MATH_OP(Atanh, atanh)
#undef PARTC_EW_MATH_OP

// Binary ops on floats; integer tensors take Elementwise.cpp's rules (a
// division by zero gives 0, Pow goes through f64).
struct Add {
  static constexpr const char *kName = "add";
  template <class T> PARTC_EW_FN static T apply(T a, T b) { return a + b; }
};
struct Sub {
  static constexpr const char *kName = "sub";
  template <class T> PARTC_EW_FN static T apply(T a, T b) { return a - b; }
};
struct Mul {
  static constexpr const char *kName = "mul";
  template <class T> PARTC_EW_FN static T apply(T a, T b) { return a * b; }
};
struct Div {
  static constexpr const char *kName = "div";
  template <class T> PARTC_EW_FN static T apply(T a, T b) { return a / b; }
};
struct Pow {
  static constexpr const char *kName = "pow";
  template <class T> PARTC_EW_FN static T apply(T a, T b) {
    return math::pow(a, b);
  }
};
struct Min {
  static constexpr const char *kName = "min";
  template <class T> PARTC_EW_FN static T apply(T a, T b) {
    return minKeepNan(a, b);
  }
};
struct Max {
  static constexpr const char *kName = "max";
  template <class T> PARTC_EW_FN static T apply(T a, T b) {
    return maxKeepNan(a, b);
  }
};

// Backward rules of unary ops, (dy, a forward value) -> dx, for
// partc-differentiate; binary steps, so that they fuse into chains.
struct ReluGrad {
  static constexpr const char *kName = "relu_grad";
  template <class T> PARTC_EW_FN static T apply(T dy, T y) {
    return y > T(0) ? dy : T(0);
  }
};
struct SigmoidGrad {
  static constexpr const char *kName = "sigmoid_grad";
  template <class T> PARTC_EW_FN static T apply(T dy, T y) {
    return dy * y * (T(1) - y);
  }
};
struct TanhGrad {
  static constexpr const char *kName = "tanh_grad";
  template <class T> PARTC_EW_FN static T apply(T dy, T y) {
    return dy * (T(1) - y * y);
  }
};
struct GeluGrad {
  static constexpr const char *kName = "gelu_grad";
  template <class T> PARTC_EW_FN static T apply(T dy, T x) {
    // Phi(x) + x * phi(x); 1/sqrt(2) and 1/sqrt(2 pi).
    T cdf = T(0.5) * (T(1) + math::erf(x * T(0.70710678118654752440)));
    T pdf = T(0.39894228040143267794) * math::exp(T(-0.5) * x * x);
    return dy * (cdf + x * pdf);
  }
};
struct GeluTanhGrad {
  static constexpr const char *kName = "gelu_tanh_grad";
  template <class T> PARTC_EW_FN static T apply(T dy, T x) {
    // u = sqrt(2 / pi) * (x + 0.044715 x^3).
    T k = T(0.79788456080286535588);
    T t = math::tanh(k * (x + T(0.044715) * x * x * x));
    T du = k * (T(1) + T(3 * 0.044715) * x * x);
    return dy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
  }
};

/// Every unary op, in the order of Step.
#define PARTC_UNARY_OPS(X)                                                     \
  X(Relu)                                                                      \
  X(Sigmoid)                                                                   \
  X(Tanh)                                                                      \
  X(Erf)                                                                       \
  X(Sqrt)                                                                      \
  X(Neg)                                                                       \
  X(Exp)                                                                       \
  X(Log) X(Abs) X(Reciprocal) X(Floor) X(Ceil) X(Sin) X(Cos) X(Gelu)           \
      X(GeluTanh) X(LeakyRelu) X(HardSigmoid) X(HardSwish) X(Clip) X(Softplus) \
          X(Elu) X(Sign) X(Round) X(Mish) X(Selu) X(Celu) X(Softsign)          \
              X(ThresholdedRelu) X(Shrink) X(Tan) X(Asin) X(Acos) X(Atan)      \
                  X(Sinh) X(Cosh) X(Asinh) X(Acosh) X(Atanh)
/// Every binary op, after the unary ones in Step.
#define PARTC_BINARY_OPS(X)                                                    \
  X(Add)                                                                       \
  X(Sub)                                                                       \
  X(Mul)                                                                       \
  X(Div) X(Pow) X(Min) X(Max) X(ReluGrad) X(SigmoidGrad) X(TanhGrad)           \
      X(GeluGrad) X(GeluTanhGrad)

/// An op of a fused chain, or of a unary or binary kernel.
enum class Step : unsigned char {
#define PARTC_EW_ENUM(Op) Op,
  PARTC_UNARY_OPS(PARTC_EW_ENUM) PARTC_BINARY_OPS(PARTC_EW_ENUM)
#undef PARTC_EW_ENUM
};

#define PARTC_EW_COUNT(Op) +1
constexpr int kNumUnary = 0 PARTC_UNARY_OPS(PARTC_EW_COUNT);
constexpr int kNumSteps = kNumUnary + 0 PARTC_BINARY_OPS(PARTC_EW_COUNT);
#undef PARTC_EW_COUNT
constexpr Step kFirstBinary = static_cast<Step>(kNumUnary);

PARTC_EW_FN constexpr int arity(Step step) {
  return step >= kFirstBinary ? 2 : 1;
}

/// `step` on a and b (b is unused by unary steps) with the unary step's
/// parameters p and q. Where `step` is a constant, as in generated code,
/// the switch folds away.
template <class T> PARTC_EW_FN T applyStep(Step step, T a, T b, T p, T q) {
  switch (step) {
#define PARTC_EW_UNARY_CASE(Op)                                                \
  case Step::Op:                                                               \
    return Op::apply<T>(a, p, q);
    PARTC_UNARY_OPS(PARTC_EW_UNARY_CASE)
#undef PARTC_EW_UNARY_CASE
#define PARTC_EW_BINARY_CASE(Op)                                               \
  case Step::Op:                                                               \
    return Op::apply<T>(a, b);
    PARTC_BINARY_OPS(PARTC_EW_BINARY_CASE)
#undef PARTC_EW_BINARY_CASE
  }
  return a;
}

#if !defined(__CUDACC_RTC__)
/// What the host needs to know of a step: its kernel name, parameter
/// names and whether integer tensors may use it.
struct StepInfo {
  const char *name;
  int params;
  const char *paramNames[2];
  bool integers;
};

namespace detail {
template <class Op, class = void> struct ParamsOf {
  static constexpr int count = 0;
  static constexpr const char *name(int) { return ""; }
};
template <class Op>
struct ParamsOf<Op, decltype((void)Op::kParamNames, void())> {
  static constexpr int count =
      sizeof(Op::kParamNames) / sizeof(Op::kParamNames[0]);
  static constexpr const char *name(int i) {
    return i < count ? Op::kParamNames[i] : "";
  }
};
template <class Op, class = void> struct IntegersOf {
  static constexpr bool value = false;
};
template <class Op>
struct IntegersOf<Op, decltype((void)Op::kIntegers, void())> {
  static constexpr bool value = Op::kIntegers;
};
} // namespace detail

constexpr StepInfo kSteps[] = {
#define PARTC_EW_INFO(Op)                                                      \
  {Op::kName,                                                                  \
   detail::ParamsOf<Op>::count,                                                \
   {detail::ParamsOf<Op>::name(0), detail::ParamsOf<Op>::name(1)},             \
   detail::IntegersOf<Op>::value},
    PARTC_UNARY_OPS(PARTC_EW_INFO) PARTC_BINARY_OPS(PARTC_EW_INFO)
#undef PARTC_EW_INFO
};
static_assert(sizeof(kSteps) / sizeof(kSteps[0]) == kNumSteps,
              "a description per step");

inline constexpr const StepInfo &info(Step step) {
  return kSteps[static_cast<int>(step)];
}

/// A unary `step` on an integer type: the steps whose kIntegers is set
/// (the kernels refuse the others on integers).
template <class T> inline T applyIntegerStep(Step step, T x, T p, T q) {
  switch (step) {
#define PARTC_EW_INTEGER_CASE(Op)                                              \
  case Step::Op:                                                               \
    if constexpr (detail::IntegersOf<Op>::value)                               \
      return Op::apply<T>(x, p, q);                                            \
    break;
    PARTC_UNARY_OPS(PARTC_EW_INTEGER_CASE)
#undef PARTC_EW_INTEGER_CASE
  default:
    break;
  }
  return x;
}
#endif // !__CUDACC_RTC__

} // namespace partc::runtime::ew

namespace partc::runtime::fused {
/// Limits of fused_elementwise programs, kept small so that a GPU kernel
/// takes the whole program as a launch parameter.
constexpr int kMaxSteps = 16;
constexpr int kMaxInputs = 8;
constexpr int kMaxRank = 6;
/// Most operands concatenated into a program's input 0 (concat_parts):
/// DenseNet-201's widest concatenation has 49.
constexpr int kMaxConcatParts = 64;
} // namespace partc::runtime::fused

#endif // PARTC_RUNTIME_KERNELS_ELEMENTWISEOPS_H
