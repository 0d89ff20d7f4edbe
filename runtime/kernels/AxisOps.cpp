//===- AxisOps.cpp - CPU kernels of ArgMax, ArgMin, CumSum and TopK -------===//
#include "runtime/kernels/AxisOps.h"

#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/KernelRegistry.h"

#include <algorithm>
#include <numeric>

namespace partc::runtime {

namespace {

using axis::Lines;
using axis::linesOf;

/// Whether the kernels handle `t`: every numeric type dispatchType knows.
bool numeric(DType t) {
  return t != DType::Bool && dispatchType(t, [](auto) {});
}

/// Reads the axis and checks it against the input's rank.
Status axisOf(const KernelArgs &a, int64_t &ax) {
  PARTC_RETURN_IF_ERROR(a.attrs.requireInt("axis", ax));
  if (ax < 0 || ax >= static_cast<int64_t>(a.inputs[0].shape.size()))
    return Status::error("axis " + std::to_string(ax) +
                         " is out of range for " + a.inputs[0].str());
  return Status();
}

class ArgReduceKernel : public Kernel {
public:
  ArgReduceKernel(Lines l, bool largest, bool last)
      : l_(l), largest_(largest), last_(last) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    int64_t *y = out[0].as<int64_t>();
    dispatchType(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *x = in[0].as<T>();
      for (int64_t o = 0; o < l_.outer; ++o)
        for (int64_t i = 0; i < l_.inner; ++i) {
          const T *line = x + o * l_.extent * l_.inner + i;
          int64_t best = 0;
          for (int64_t j = 1; j < l_.extent; ++j)
            if (axis::ranksBefore(line[j * l_.inner], j, line[best * l_.inner],
                                  best, largest_,
                                  /*nanFirst=*/true, last_))
              best = j;
          y[o * l_.inner + i] = best;
        }
    });
    return Status();
  }

private:
  Lines l_;
  bool largest_, last_;
};

KernelFactory argReduceFactory(bool largest) {
  return [largest](const KernelArgs &a, std::unique_ptr<Kernel> &k) -> Status {
    PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
    int64_t ax, keepdims, last;
    PARTC_RETURN_IF_ERROR(axisOf(a, ax));
    PARTC_RETURN_IF_ERROR(a.attrs.requireInt("keepdims", keepdims));
    PARTC_RETURN_IF_ERROR(a.attrs.requireInt("select_last_index", last));
    Lines l = linesOf(a.inputs[0].shape, ax);
    if (!numeric(a.inputs[0].dtype) || l.extent == 0)
      return Status::error("needs a numeric input with a non-empty axis, got " +
                           a.inputs[0].str());
    if (a.outputs[0].dtype != DType::I64 ||
        a.outputs[0].numElements() != l.outer * l.inner)
      return Status::error("result " + a.outputs[0].str() +
                           " should hold one i64 index per line");
    k = std::make_unique<ArgReduceKernel>(l, largest, last != 0);
    return Status();
  };
}

class CumSumKernel : public Kernel {
public:
  CumSumKernel(Lines l, bool exclusive, bool reverse)
      : l_(l), exclusive_(exclusive), reverse_(reverse) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    dispatchType(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        const T *x = in[0].as<T>();
        T *y = out[0].as<T>();
        for (int64_t o = 0; o < l_.outer; ++o)
          for (int64_t i = 0; i < l_.inner; ++i) {
            int64_t base = o * l_.extent * l_.inner + i;
            T acc = T(0);
            for (int64_t s = 0; s < l_.extent; ++s) {
              int64_t j = reverse_ ? l_.extent - 1 - s : s;
              T v = x[base + j * l_.inner];
              if (!exclusive_)
                acc = axis::wrapAdd(acc, v);
              y[base + j * l_.inner] = acc;
              if (exclusive_)
                acc = axis::wrapAdd(acc, v);
            }
          }
      }
    });
    return Status();
  }

private:
  Lines l_;
  bool exclusive_, reverse_;
};

Status createCumSum(const KernelArgs &a, std::unique_ptr<Kernel> &k) {
  PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 1));
  int64_t ax, exclusive, reverse;
  PARTC_RETURN_IF_ERROR(axisOf(a, ax));
  PARTC_RETURN_IF_ERROR(a.attrs.requireInt("exclusive", exclusive));
  PARTC_RETURN_IF_ERROR(a.attrs.requireInt("reverse", reverse));
  if (!numeric(a.inputs[0].dtype) || a.outputs[0] != a.inputs[0])
    return Status::error(
        "needs a numeric input and a result of its type, got " +
        a.inputs[0].str() + " -> " + a.outputs[0].str());
  k = std::make_unique<CumSumKernel>(linesOf(a.inputs[0].shape, ax),
                                     exclusive != 0, reverse != 0);
  return Status();
}

class TopKKernel : public Kernel {
public:
  TopKKernel(Lines l, int64_t k, bool largest)
      : l_(l), k_(k), largest_(largest) {}
  Status run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    int64_t *indices = out[1].as<int64_t>();
    std::vector<int64_t> order(l_.extent);
    dispatchType(in[0].type.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *x = in[0].as<T>();
      T *values = out[0].as<T>();
      for (int64_t o = 0; o < l_.outer; ++o)
        for (int64_t i = 0; i < l_.inner; ++i) {
          const T *line = x + o * l_.extent * l_.inner + i;
          std::iota(order.begin(), order.end(), int64_t(0));
          std::partial_sort(order.begin(), order.begin() + k_, order.end(),
                            [&](int64_t a, int64_t b) {
                              return axis::ranksBefore(
                                  line[a * l_.inner], a, line[b * l_.inner], b,
                                  largest_, /*nanFirst=*/largest_, false);
                            });
          int64_t base = o * k_ * l_.inner + i;
          for (int64_t r = 0; r < k_; ++r) {
            values[base + r * l_.inner] = line[order[r] * l_.inner];
            indices[base + r * l_.inner] = order[r];
          }
        }
    });
    return Status();
  }

private:
  Lines l_;
  int64_t k_;
  bool largest_;
};

Status createTopK(const KernelArgs &a, std::unique_ptr<Kernel> &k) {
  PARTC_RETURN_IF_ERROR(checkArity(a, 1, 1, 2));
  int64_t ax, count, largest;
  PARTC_RETURN_IF_ERROR(axisOf(a, ax));
  PARTC_RETURN_IF_ERROR(a.attrs.requireInt("k", count));
  PARTC_RETURN_IF_ERROR(a.attrs.requireInt("largest", largest));
  Lines l = linesOf(a.inputs[0].shape, ax);
  if (count < 0 || count > l.extent)
    return Status::error("k = " + std::to_string(count) + " must lie in [0, " +
                         std::to_string(l.extent) + "]");
  Shape expected = a.inputs[0].shape;
  expected[ax] = count;
  if (!numeric(a.inputs[0].dtype) ||
      a.outputs[0] != TensorType{a.inputs[0].dtype, expected} ||
      a.outputs[1] != TensorType{DType::I64, expected})
    return Status::error("results " + a.outputs[0].str() + " and " +
                         a.outputs[1].str() + " do not fit " +
                         a.inputs[0].str() +
                         " with k = " + std::to_string(count));
  k = std::make_unique<TopKKernel>(l, count, largest != 0);
  return Status();
}

} // namespace

void registerAxisKernels(KernelTable &t) {
  t["arg_max"] = argReduceFactory(true);
  t["arg_min"] = argReduceFactory(false);
  t["cum_sum"] = createCumSum;
  t["top_k"] = createTopK;
}

} // namespace partc::runtime
