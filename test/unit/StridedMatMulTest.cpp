//===- StridedMatMulTest.cpp - Views, GEMM plans and the CPU kernel -------===//
//
// Random strided_matmul operands: the CPU kernel and the column-major GEMM
// batch that the GPU kernel hands to cuBLAS (run here element by element)
// must both agree with a direct sum over the views.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/StridedMatMul.h"
#include "runtime/kernels/Kernel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

using namespace partc::runtime;
using strided::View;

namespace {

struct Case {
  View lhs, rhs;
  std::vector<int64_t> perm, stored, logical;
  int64_t lhsElements = 0, rhsElements = 0;
  float alpha = 1.f;
};

/// A view of `shape` whose matrix (the last two dimensions) has its rows
/// or columns contiguous, the other dimensions laid out in a random order
/// with gaps, broadcast dimensions at stride 0 and a random offset.
View randomView(std::mt19937 &rng, const std::vector<int64_t> &shape,
                int64_t &elements) {
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  size_t rank = shape.size();
  View v;
  v.shape = shape;
  v.strides.assign(rank, 0);
  size_t inner = pick(0, 1) ? rank - 1 : rank - 2;
  std::vector<size_t> order;
  for (size_t d = 0; d < rank; ++d)
    if (d != inner)
      order.push_back(d);
  std::shuffle(order.begin(), order.end(), rng);
  v.strides[inner] = 1;
  int64_t step = shape[inner] + pick(0, 2);
  for (size_t d : order) {
    if (shape[d] == 1 && d + 2 < rank && pick(0, 1)) {
      v.strides[d] = 0; // a broadcast batch dimension
      continue;
    }
    v.strides[d] = step;
    step *= shape[d] + pick(0, 1);
  }
  v.offset = pick(0, 3);
  int64_t last = v.offset;
  for (size_t d = 0; d < rank; ++d)
    last += (shape[d] - 1) * v.strides[d];
  elements = last + 1 + pick(0, 3);
  return v;
}

Case randomCase(std::mt19937 &rng) {
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  size_t batchRank = static_cast<size_t>(pick(0, 2));
  std::vector<int64_t> a, b, logical;
  for (size_t d = 0; d < batchRank; ++d) {
    int64_t e = pick(1, 3);
    int which = pick(0, 3); // sometimes one side broadcasts
    a.push_back(which == 0 ? 1 : e);
    b.push_back(which == 1 ? 1 : e);
    logical.push_back(which == 0 ? b.back() : e);
  }
  int64_t m = pick(1, 5), k = pick(1, 5), n = pick(1, 5);
  a.insert(a.end(), {m, k});
  b.insert(b.end(), {k, n});
  logical.insert(logical.end(), {m, n});
  Case c;
  c.lhs = randomView(rng, a, c.lhsElements);
  c.rhs = randomView(rng, b, c.rhsElements);
  c.logical = logical;
  size_t rank = logical.size();
  // Stored order: the innermost stored dimension is M or N.
  std::vector<int64_t> rest(rank);
  std::iota(rest.begin(), rest.end(), 0);
  int64_t innermost = static_cast<int64_t>(rank) - 1 - pick(0, 1);
  rest.erase(std::find(rest.begin(), rest.end(), innermost));
  std::shuffle(rest.begin(), rest.end(), rng);
  c.perm = rest;
  c.perm.push_back(innermost);
  for (int64_t p : c.perm)
    c.stored.push_back(logical[p]);
  if (pick(0, 2) == 0)
    c.stored = {strided::product(logical)};
  c.alpha = pick(0, 1) ? 1.f : 0.125f;
  return c;
}

std::vector<float> randomData(std::mt19937 &rng, int64_t n) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float &x : v)
    x = u(rng);
  return v;
}

/// The result summed straight from the views, stored as the kernel does.
std::vector<float> directSum(const Case &c, const std::vector<float> &a,
                             const std::vector<float> &b) {
  size_t rank = c.logical.size();
  std::vector<int64_t> out = strided::resultStrides(c.logical, c.perm);
  std::vector<float> y(strided::product(c.logical));
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < strided::product(c.logical); ++i) {
    int64_t ya = 0;
    for (size_t d = 0; d < rank; ++d)
      ya += idx[d] * out[d];
    float acc = 0.f;
    for (int64_t p = 0; p < c.lhs.shape[rank - 1]; ++p) {
      int64_t ia = c.lhs.offset, ib = c.rhs.offset;
      for (size_t d = 0; d + 2 < rank; ++d) {
        ia += (c.lhs.shape[d] == 1 ? 0 : idx[d]) * c.lhs.strides[d];
        ib += (c.rhs.shape[d] == 1 ? 0 : idx[d]) * c.rhs.strides[d];
      }
      ia +=
          idx[rank - 2] * c.lhs.strides[rank - 2] + p * c.lhs.strides[rank - 1];
      ib +=
          p * c.rhs.strides[rank - 2] + idx[rank - 1] * c.rhs.strides[rank - 1];
      acc += a[ia] * b[ib];
    }
    y[ya] = c.alpha * acc;
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < c.logical[d])
        break;
      idx[d] = 0;
    }
  }
  return y;
}

/// The GEMM batch run as cuBLAS would, column-major.
std::vector<float> runPlan(const strided::Gemm &g, float alpha,
                           const std::vector<float> &a,
                           const std::vector<float> &b, int64_t n) {
  std::vector<float> y(n, -7.f);
  const std::vector<float> &x = g.x.lhs ? a : b, &z = g.y.lhs ? a : b;
  for (size_t i = 0; i < g.cOffsets.size(); ++i)
    for (int64_t r = 0; r < g.rows; ++r)
      for (int64_t col = 0; col < g.cols; ++col) {
        float acc = 0.f;
        for (int64_t p = 0; p < g.depth; ++p) {
          int64_t ix =
              g.x.offsets[i] + (g.x.trans ? p + r * g.x.ld : r + p * g.x.ld);
          int64_t iz = g.y.offsets[i] +
                       (g.y.trans ? col + p * g.y.ld : p + col * g.y.ld);
          acc += x[ix] * z[iz];
        }
        y[g.cOffsets[i] + r + col * g.ldc] = alpha * acc;
      }
  return y;
}

AttrMap attrsOf(const Case &c) {
  AttrMap attrs;
  attrs.set("lhs_shape", AttrValue::ofInts(c.lhs.shape));
  attrs.set("lhs_strides", AttrValue::ofInts(c.lhs.strides));
  attrs.set("lhs_offset", AttrValue::ofInts({c.lhs.offset}));
  attrs.set("rhs_shape", AttrValue::ofInts(c.rhs.shape));
  attrs.set("rhs_strides", AttrValue::ofInts(c.rhs.strides));
  attrs.set("rhs_offset", AttrValue::ofInts({c.rhs.offset}));
  attrs.set("perm", AttrValue::ofInts(c.perm));
  attrs.set("alpha", AttrValue::ofFloats({c.alpha}));
  return attrs;
}

void expectNear(const std::vector<float> &got, const std::vector<float> &want,
                const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4f) << what << " element " << i;
}

TEST(StridedMatMul, RandomViewsAgreeWithDirectSum) {
  std::mt19937 rng(11);
  int planned = 0, batched = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    Case c = randomCase(rng);
    std::vector<int64_t> logical;
    std::string error = strided::checkOperands(
        c.lhs, c.lhsElements, c.rhs, c.rhsElements, c.perm, c.stored, logical);
    ASSERT_EQ(error, "") << "trial " << trial;
    ASSERT_EQ(logical, c.logical);
    std::vector<float> a = randomData(rng, c.lhsElements);
    std::vector<float> b = randomData(rng, c.rhsElements);
    std::vector<float> want = directSum(c, a, b);

    std::unique_ptr<Kernel> kernel;
    std::vector<TensorType> ins = {{DType::F32, {c.lhsElements}},
                                   {DType::F32, {c.rhsElements}}};
    std::vector<TensorType> outs = {{DType::F32, c.stored}};
    ASSERT_TRUE(
        createCpuKernel("strided_matmul", attrsOf(c), ins, outs, kernel).ok());
    std::vector<float> y(want.size(), -7.f);
    ASSERT_TRUE(kernel
                    ->run({{a.data(), ins[0]}, {b.data(), ins[1]}},
                          {{y.data(), outs[0]}})
                    .ok());
    expectNear(y, want, "CPU kernel, trial " + std::to_string(trial));

    View result{c.logical, strided::resultStrides(c.logical, c.perm), 0};
    strided::Gemm g;
    ASSERT_TRUE(strided::planGemm(c.lhs, c.rhs, result, g))
        << "trial " << trial;
    ++planned;
    batched += g.cOffsets.size() > 1;
    expectNear(runPlan(g, c.alpha, a, b, static_cast<int64_t>(want.size())),
               want, "GEMM plan, trial " + std::to_string(trial));
  }
  EXPECT_EQ(planned, 2000);
  EXPECT_GT(batched, 200); // the generator reaches real batches
}

/// Element address of row-major linear index `i` of a view.
int64_t addressOf(const View &v, int64_t i) {
  int64_t a = v.offset;
  for (size_t d = v.shape.size(); d-- > 0;) {
    a += (i % v.shape[d]) * v.strides[d];
    i /= v.shape[d];
  }
  return a;
}

TEST(StridedMatMul, ReshapedViewsAddressTheSameElements) {
  std::mt19937 rng(5);
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  int reshaped = 0, refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    // A view: random extents laid out in a random order, with gaps.
    size_t rank = static_cast<size_t>(pick(1, 4));
    std::vector<int64_t> shape(rank);
    for (int64_t &e : shape)
      e = std::vector<int64_t>{1, 2, 3, 4, 6}[pick(0, 4)];
    bool dense = pick(0, 3) == 0;
    std::vector<size_t> order(rank);
    std::iota(order.begin(), order.end(), 0);
    if (!dense)
      std::shuffle(order.begin(), order.end(), rng);
    View v{shape, std::vector<int64_t>(rank, 0), dense ? 0 : pick(0, 5)};
    int64_t step = 1;
    for (size_t k = rank; k-- > 0;) {
      v.strides[order[k]] = step;
      step *= shape[order[k]] + (dense ? 0 : pick(0, 1));
    }
    // A new shape of the same size: extents split into factors, ones
    // inserted, neighbours merged.
    std::vector<int64_t> factors;
    for (int64_t e : shape) {
      if (e == 4 && pick(0, 1))
        factors.insert(factors.end(), {2, 2});
      else if (e == 6 && pick(0, 1))
        factors.insert(factors.end(), {2, 3});
      else
        factors.push_back(e);
      if (pick(0, 4) == 0)
        factors.push_back(1);
    }
    std::vector<int64_t> target;
    for (int64_t f : factors) {
      if (!target.empty() && pick(0, 2) == 0)
        target.back() *= f;
      else
        target.push_back(f);
    }
    View r = v;
    if (!strided::reshape(r, target)) {
      ASSERT_FALSE(dense) << "a contiguous view always reshapes, trial "
                          << trial;
      ++refused;
      continue;
    }
    ++reshaped;
    ASSERT_EQ(r.shape, target);
    for (int64_t i = 0; i < strided::product(shape); ++i)
      ASSERT_EQ(addressOf(r, i), addressOf(v, i))
          << "trial " << trial << " element " << i;
  }
  EXPECT_GT(reshaped, 1000);
  EXPECT_GT(refused, 100); // merges of strided dimensions are refused
}

TEST(StridedMatMul, SharedRhsFoldsBatchIntoRows) {
  // [4, 3, 5] x [5, 6] (the rhs broadcast as [1, 5, 6]): one 12 x 6 GEMM.
  View lhs{{4, 3, 5}, {15, 5, 1}, 0}, rhs{{1, 5, 6}, {0, 6, 1}, 0};
  View result{{4, 3, 6}, {18, 6, 1}, 0};
  strided::Gemm g;
  ASSERT_TRUE(strided::planGemm(lhs, rhs, result, g));
  EXPECT_EQ(g.cOffsets.size(), 1u);
  EXPECT_EQ(g.cols, 12); // C^T: rows are N, columns M
  EXPECT_EQ(g.rows, 6);
}

TEST(StridedMatMul, AttentionHeadsUsePointerBatches) {
  // q @ k^T for q, k heads of a [2, 16, 3 * 64] projection with 4 heads:
  // the batch (2 x 4) is not evenly strided, the matrices are.
  View q{{2, 4, 16, 16}, {3072, 16, 192, 1}, 0};
  View k{{2, 4, 16, 16}, {3072, 16, 1, 192}, 64};
  View s{{2, 4, 16, 16}, {1024, 256, 16, 1}, 0};
  strided::Gemm g;
  ASSERT_TRUE(strided::planGemm(q, k, s, g));
  int64_t xs, ys, cs;
  EXPECT_FALSE(g.evenlyStrided(xs, ys, cs));
  EXPECT_EQ(g.cOffsets.size(), 8u);
  EXPECT_EQ(g.x.ld, 192);
  EXPECT_EQ(g.y.ld, 192);
}

TEST(StridedMatMul, RejectsWhatGemmsCannotRead) {
  std::vector<int64_t> logical;
  View ok{{2, 3, 4}, {12, 4, 1}, 0};
  // Out of the buffer.
  EXPECT_NE(
      strided::checkOperands(ok, 23, ok, 24, {0, 1, 2}, {2, 3, 3}, logical)
          .find("reaches element 23"),
      std::string::npos);
  // Neither rows nor columns contiguous.
  View neither{{2, 3, 4}, {24, 8, 2}, 0};
  View rhs{{2, 4, 3}, {12, 3, 1}, 0};
  EXPECT_NE(strided::checkOperands(neither, 48, rhs, 24, {0, 1, 2}, {2, 3, 3},
                                   logical)
                .find("rows or columns at stride 1"),
            std::string::npos);
  // The result's innermost stored dimension must be M or N.
  EXPECT_NE(
      strided::checkOperands(ok, 24, rhs, 24, {1, 2, 0}, {3, 3, 2}, logical)
          .find("rows or columns contiguous"),
      std::string::npos);
  // Not a permutation.
  EXPECT_NE(
      strided::checkOperands(ok, 24, rhs, 24, {0, 0, 2}, {2, 3, 3}, logical)
          .find("not a permutation"),
      std::string::npos);
}

} // namespace
